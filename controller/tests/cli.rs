//! The `weft` binary as an operator's shell meets it, without switches: closed pipes, exit
//! codes, JSON on standard output whatever happens, no ANSI escapes in a pipe, generated
//! artefacts (schema, completions, man pages, graphs), and the README's example outputs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

fn weft(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(repo())
        .env_remove("WEFT_LOG")
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run weft");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn examples() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo().join("topology/examples"))
        .expect("examples")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

const SMALL: &str = "topology/examples/leaf-spine-small.yaml";

fn invalid_intent() -> PathBuf {
    let p = std::env::temp_dir().join(format!("weft-cli-invalid-{}.yaml", std::process::id()));
    std::fs::write(&p, "fabric:\n  name: x\n  defaults: {cable_lenght: 3m}\n").expect("write");
    p
}

/// Reads one line of a command's output and closes the pipe, as `| head -1` does.
fn first_line_then_close(args: &[&str]) -> (String, i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn weft");
    let mut first = String::new();
    {
        let stdout = child.stdout.take().expect("stdout");
        let mut r = BufReader::new(stdout);
        r.read_line(&mut first).expect("a line");
        // The reader goes away here.
    }
    let out = child.wait_with_output().expect("wait");
    (
        first,
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_pipe_neither_panics_nor_changes_the_exit_status() {
    let mut args = vec!["validate"];
    let ex = examples();
    // Enough output that the writer meets the closed pipe.
    for _ in 0..200 {
        args.extend(ex.iter().map(String::as_str));
    }
    let (first, code, err) = first_line_then_close(&args);
    assert!(first.contains(": valid ("), "{first}");
    assert_eq!(code, 0, "every intent is valid: exit 0\n{err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );

    let (first, code, err) = first_line_then_close(&[
        "plan",
        "topology/examples/multi-plane-8.yaml",
        "--offline",
        "-v",
    ]);
    assert!(first.starts_with("plan for fabric"), "{first}");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // Diagnostics go to standard error: `2>&1 | head -1` closes that too.
    let files = vec!["tests/readme/broken.yaml"; 400].join(" ");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "\"$0\" validate {files} 2>&1 | head -1; echo \"rc=${{PIPESTATUS[0]}}\""
        ))
        .arg(env!("CARGO_BIN_EXE_weft"))
        .current_dir(repo())
        .output()
        .expect("bash");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("rc=2\n"),
        "invalid intents: exit 2 also with stderr cut short:\n{text}"
    );
    assert!(!text.contains("panicked"), "{text}");
    let (_, code, err) = first_line_then_close(&["schema"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn exit_codes_follow_the_table() {
    // 64: usage.
    let (code, _, err) = weft(&["plan"]);
    assert_eq!(code, 64, "{err}");
    let (code, _, _) = weft(&["frobnicate"]);
    assert_eq!(code, 64);
    let (code, _, _) = weft(&["apply", SMALL, "--timeout", "30"]);
    assert_eq!(code, 64, "a duration without unit is a usage error");
    // --help and --version are not errors.
    let (code, out, _) = weft(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("64  usage error"),
        "the table is in --help:\n{out}"
    );
    let (code, _, _) = weft(&["plan", "--help"]);
    assert_eq!(code, 0);
    // 2: invalid intent.
    let bad = invalid_intent();
    let (code, _, err) = weft(&["plan", &bad.to_string_lossy(), "--offline"]);
    assert_eq!(code, 2, "{err}");
    // 1: a file that cannot be read.
    let (code, _, err) = weft(&["plan", "/nonexistent/intent.yaml", "--offline"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    // 3: --detailed-exitcode with changes (offline: everything is to add).
    let (code, _, err) = weft(&["plan", SMALL, "--offline", "--detailed-exitcode"]);
    assert_eq!(code, 3, "{err}");
    let (code, _, _) = weft(&["plan", SMALL, "--offline"]);
    assert_eq!(code, 0, "without the flag changes are not an exit status");
    // A by-design property is one line, not 21,504.
    let (code, out, _) = weft(&["plan", "topology/examples/multi-plane-8.yaml", "--offline"]);
    assert_eq!(code, 0);
    let notes: Vec<&str> = out.lines().filter(|l| l.starts_with("note:")).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("21504 leaf pairs") && notes[0].contains("8 separate planes"),
        "{notes:?}"
    );
    // 1: switches that cannot be read (none has a DB here).
    let (code, _, err) = weft(&["plan", SMALL, "--switch", "leaf1"]);
    assert_eq!(code, 1, "{err}");
    // 1, not 3: without `weft run` and with no switch answering, the answer is incomplete
    // (3 needs every switch read: tests/verdicts.rs).
    let sf = std::env::temp_dir().join("weft-cli-no-status.json");
    let (code, out, _) = weft(&["status", SMALL, "--status-file", &sf.to_string_lossy()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("weft run is not running"), "{out}");
    // A selection that selects nothing is an error, not "everything".
    let (code, _, err) = weft(&["plan", SMALL, "--offline", "--switch", "leaf9"]);
    assert_eq!(code, 1);
    assert!(err.contains("--switch leaf9: matches no switch"), "{err}");
    let _ = std::fs::remove_file(bad);
}

#[test]
fn json_output_is_json_also_for_invalid_intents_and_absent_daemons() {
    let bad = invalid_intent();
    let bad = bad.to_string_lossy();
    for cmd in [
        vec!["plan", &*bad, "--offline", "--output", "json"],
        vec!["show", &*bad, "--output", "json"],
        vec!["status", &*bad, "--output", "json"],
        vec!["apply", &*bad, "--output", "json"],
    ] {
        let (code, out, _) = weft(&cmd);
        assert_eq!(code, 2, "{cmd:?}");
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{cmd:?}: {e}: {out}"));
        assert_eq!(v["version"], 1, "{cmd:?}: {v}");
        assert_eq!(v["error"]["kind"], "invalid-intent", "{cmd:?}: {v}");
        assert!(
            v["error"]["errors"][0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("cable_lenght")),
            "{v}"
        );
    }
    let sf = std::env::temp_dir().join("weft-cli-no-status2.json");
    let (code, out, _) = weft(&[
        "status",
        SMALL,
        "--status-file",
        &sf.to_string_lossy(),
        "--output",
        "json",
    ]);
    assert_eq!(code, 1, "no switch answers: incomplete");
    let v: serde_json::Value = serde_json::from_str(&out).expect("status json");
    assert_eq!(v["run"]["running"], false);
    assert!(
        v["run"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("not running")),
        "{v}"
    );
    assert_eq!(v["links"].as_array().map(Vec::len), Some(8), "{v}");
    assert_eq!(v["switches"].as_array().map(Vec::len), Some(6));
    assert!(
        v["switches"][0]["error"].is_string(),
        "unreachable is said: {v}"
    );
    // The plan JSON has the same shape with --switch.
    let (code, out, _) = weft(&[
        "plan",
        SMALL,
        "--offline",
        "--output",
        "json",
        "--switch",
        "spine*",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("plan json");
    let names: Vec<&str> = v["switches"]
        .as_array()
        .expect("switches")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["spine1", "spine2"]);
}

#[test]
fn logs_in_a_pipe_carry_no_ansi_escapes_and_errors_are_one_line() {
    let (_, _, err) = weft(&["--log-level", "debug", "plan", SMALL, "--switch", "leaf1"]);
    assert!(err.contains("leaf1"), "debug logs name the switch: {err}");
    assert!(!err.is_empty(), "debug logs expected");
    assert!(!err.contains('\u{1b}'), "ANSI escape in a pipe:\n{err}");
    let (_, _, err) = weft(&[
        "--log-format",
        "json",
        "--log-level",
        "debug",
        "plan",
        SMALL,
        "--switch",
        "leaf1",
    ]);
    let json_lines: Vec<&str> = err.lines().filter(|l| l.starts_with('{')).collect();
    assert!(!json_lines.is_empty(), "{err}");
    for l in json_lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(v["level"].is_string(), "{v}");
    }
    // RUST_BACKTRACE=1 is set by `weft()`: still no backtrace, one line.
    let (code, _, err) = weft(&["run", "/nonexistent/intent.yaml"]);
    assert_eq!(code, 1);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!err.contains("backtrace"), "{err}");
}

#[test]
fn schema_is_the_committed_json_schema_and_examples_point_editors_at_it() {
    let (code, out, _) = weft(&["schema"]);
    assert_eq!(code, 0);
    let printed: serde_json::Value = serde_json::from_str(&out).expect("schema json");
    let committed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("topology/intent.schema.json")).expect("schema"),
    )
    .expect("committed schema");
    assert_eq!(printed, committed);
    for e in examples() {
        let text = std::fs::read_to_string(&e).expect("example");
        assert!(
            text.starts_with("# yaml-language-server: $schema=../intent.schema.json\n"),
            "{e} does not point the YAML language server at the schema"
        );
    }
}

#[test]
fn completions_and_man_pages_are_generated_from_the_command_line() {
    // The scripts ask `weft` itself (COMPLETE=SHELL), which knows the flags and the intent's
    // names (tests/views.rs runs bash's).
    for (shell, marker) in [
        ("bash", "_clap_complete_weft()"),
        ("zsh", "#compdef weft"),
        ("fish", "complete --keep-order --exclusive --command weft"),
    ] {
        let (code, out, err) = weft(&["completions", shell]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains(marker),
            "{shell}: {}",
            &out[..out.len().min(200)]
        );
    }
    let asked = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["--", "weft", "plan", "--det"])
        .env("COMPLETE", "fish")
        .output()
        .expect("weft");
    assert!(
        String::from_utf8_lossy(&asked.stdout).starts_with("--detailed-exitcode"),
        "completes plan's flags: {asked:?}"
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("man");
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out, err) = weft(&["manpages", &dir.to_string_lossy()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("man pages in"), "{out}");
    for page in [
        "weft.1",
        "weft-plan.1",
        "weft-apply.1",
        "weft-show-queues.1",
        "weft-testbed-up.1",
    ] {
        let text =
            std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page} is not a man page");
    }
    let apply = std::fs::read_to_string(dir.join("weft-apply.1")).expect("apply page");
    assert!(apply.contains("canary"), "the page documents the flags");
}

#[test]
fn graph_lays_out_tiers_and_renders_svg_with_graphviz() {
    let (code, out, err) = weft(&["graph", "topology/examples/fat-tree-k4.yaml", "--offline"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("graph \"fat-tree-k4\""), "{out}");
    assert_eq!(
        out.matches("rank=same").count(),
        3,
        "one rank per tier:\n{out}"
    );
    assert_eq!(
        out.matches("color=\"#9a9a9a\"").count(),
        32,
        "32 links, state unknown offline"
    );
    let svg = std::env::temp_dir().join(format!("weft-graph-{}.svg", std::process::id()));
    let (code, _, err) = weft(&[
        "graph",
        SMALL,
        "--offline",
        "--format",
        "svg",
        "--hosts",
        "-o",
        &svg.to_string_lossy(),
    ]);
    assert_eq!(
        code, 0,
        "needs Graphviz from Debian (scripts/setup.sh installs `graphviz`): {err}"
    );
    let text = std::fs::read_to_string(&svg).expect("svg");
    // Graphviz writes `-` in names as `&#45;`.
    assert!(text.contains("<svg"), "{text}");
    assert!(
        text.contains("<title>leaf1</title>") && text.contains("<title>leaf1&#45;h1</title>"),
        "{text}"
    );
    // Offline: every link drawn as unknown.
    assert!(text.contains("#9a9a9a"));
    let _ = std::fs::remove_file(svg);
}

/// The README's and the docs pages' `$ weft ...` examples (console blocks) are what the commands
/// print. Lines in a block after the command are its expected output; `...` matches the rest of
/// the output.
#[test]
fn readme_examples_are_what_the_commands_print() {
    let mut pages = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let readme = pages
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("documentation page"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut checked = 0;
    let mut failures = Vec::new();
    let mut in_console = false;
    let mut current: Option<(String, Vec<String>)> = None;
    let mut blocks: Vec<(String, Vec<String>)> = Vec::new();
    for line in readme.lines() {
        if line.starts_with("```console") {
            in_console = true;
            continue;
        }
        if in_console && line.starts_with("```") {
            in_console = false;
            blocks.extend(current.take());
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            blocks.extend(current.take());
            current = Some((cmd.to_string(), Vec::new()));
        } else if line.starts_with("# ") {
            // A root prompt (testbed): not run here.
            blocks.extend(current.take());
        } else if let Some((_, lines)) = current.as_mut() {
            lines.push(line.to_string());
        }
    }
    for (cmd, mut expected) in blocks {
        while expected.last().is_some_and(|l| l.trim().is_empty()) {
            expected.pop();
        }
        let cmd = cmd.split("  #").next().unwrap_or(&cmd).trim().to_string();
        if !cmd.starts_with("weft ")
            || expected.is_empty()
            || cmd.contains('*') && !cmd.starts_with("weft validate")
        {
            continue;
        }
        let words: Vec<String> = cmd.split_whitespace().skip(1).map(String::from).collect();
        // Globs as the shell would expand them.
        let mut args = Vec::new();
        for w in words {
            if w.ends_with("*.yaml") {
                let dir = repo().join(w.trim_end_matches("*.yaml"));
                let mut files: Vec<String> = std::fs::read_dir(&dir)
                    .expect("glob dir")
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".yaml"))
                    .map(|n| format!("{}{n}", w.trim_end_matches("*.yaml")))
                    .collect();
                files.sort();
                args.extend(files);
            } else {
                args.push(w);
            }
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let (_, out, err) = weft(&argv);
        let got: Vec<String> = format!("{out}{err}").lines().map(String::from).collect();
        let mut ok = true;
        for (i, want) in expected.iter().enumerate() {
            if want.trim() == "..." {
                break;
            }
            if got.get(i).map(|g| g.trim_end()) != Some(want.trim_end()) {
                ok = false;
                break;
            }
        }
        checked += 1;
        if !ok {
            failures.push(format!(
                "$ {cmd}\n--- README says:\n{}\n--- the command prints:\n{}",
                expected.join("\n"),
                got.join("\n")
            ));
        }
    }
    assert!(checked >= 4, "only {checked} README examples found");
    assert!(
        failures.is_empty(),
        "README examples out of date (paste what the command prints):\n\n{}",
        failures.join("\n\n")
    );
}

/// The README's exit status table says what `weft --help` says, row by row.
#[test]
fn the_readme_exit_table_is_the_one_weft_help_prints() {
    let (_, help, _) = weft(&["--help"]);
    let table = help
        .split("Exit status (every command")
        .nth(1)
        .expect("the table ends the help");
    let mut rows: Vec<(String, String)> = Vec::new();
    for line in table.lines().skip(1) {
        let t = line.trim();
        if t.is_empty() {
            break;
        }
        let first = t.split_whitespace().next().unwrap_or_default();
        if line.starts_with("  ") && !line.starts_with("   ") && first.parse::<u8>().is_ok() {
            rows.push((first.to_string(), t[first.len()..].trim().to_string()));
        } else if let Some(last) = rows.last_mut() {
            last.1 = format!("{} {t}", last.1);
        }
    }
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README");
    let documented: Vec<(String, String)> = readme
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells.len() == 4 && cells[1].parse::<u8>().is_ok())
                .then(|| (cells[1].to_string(), cells[2].to_string()))
        })
        .collect();
    assert_eq!(rows.len(), 5, "{table}");
    assert_eq!(documented, rows);
}

#[test]
fn ui_refuses_a_bad_listen_address_as_usage_and_names_a_port_in_use() {
    let file = "topology/examples/leaf-spine-small.yaml";
    for bad in ["8088", "nowhere:8088", "127.0.0.1:99999"] {
        let (code, _, err) = weft(&["ui", file, "--listen", bad]);
        assert_eq!(code, 64, "--listen {bad}: {err}");
        assert!(err.contains("expected HOST:PORT"), "--listen {bad}: {err}");
    }
    let (code, _, err) = weft(&["run", file, "--ui", "nowhere"]);
    assert_eq!(code, 64, "run --ui nowhere: {err}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("address").to_string();
    let (code, out, err) = weft(&["ui", file, "--listen", &addr]);
    assert_eq!(code, 1, "weft ui on a port in use: {out}{err}");
    assert!(
        err.contains(&addr) && err.contains("another process listens there"),
        "{err}"
    );
    assert_eq!(err.matches("os error").count(), 1, "the cause once: {err}");
}

#[test]
fn transport_zmq_on_the_command_line_names_the_switches_whose_db_leaves_no_place_for_an_endpoint() {
    let base = std::fs::read_to_string(repo().join(SMALL)).expect("example");
    let p = std::env::temp_dir().join(format!("weft-cli-tcp-{}.yaml", std::process::id()));
    std::fs::write(
        &p,
        format!("{base}\nswitches:\n  - name: leaf1\n    db: redis://127.0.0.1:1\n"),
    )
    .expect("write");
    let f = p.to_string_lossy().into_owned();
    for args in [
        vec!["apply", &f, "--transport", "zmq", "--dry-run"],
        vec!["run", &f, "--transport", "zmq"],
    ] {
        let (code, _, err) = weft(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("--transport zmq: leaf1: DB reached over TCP"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("spine1"), "only the switch over TCP: {err}");
    }
    let (code, _, err) = weft(&["apply", &f, "--transport", "smoke"]);
    assert_eq!(code, 64, "{err}");
    let _ = std::fs::remove_file(p);
}
