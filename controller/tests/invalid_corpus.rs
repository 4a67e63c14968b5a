//! The corpus, through the real `weft` binary:
//!
//! - every intent under `tests/invalid/` is refused with exit status 2 and every message its
//!   `# expect:` header lines name;
//! - every intent under `tests/valid/` (tricky but valid) and every example is accepted.
//!
//! Header lines: `# expect: <text>` — some diagnostic (with its help) contains `<text>`;
//! `# expect: <N>: <text>` — a diagnostic *at line N* contains `<text>`;
//! `# expect-errors: <N>` — exactly N errors (for follow-on errors that must not appear). In `tests/valid/`,
//! `# expect: <text>` is matched against the `valid (...)` line.
//!
//! Also here: the output forms (JSON keys, several files, standard input) and the resource
//! bombs, each run under a memory limit.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn weft(args: &[&str]) -> (i32, String, String) {
    weft_in(args, None)
}

fn weft_in(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run weft");
    if let Some(text) = stdin
        && let Some(mut i) = child.stdin.take()
    {
        i.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("weft output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    v
}

/// One `# expect:` line: text anywhere, or text at a line.
#[derive(Debug)]
struct Expect {
    line: Option<usize>,
    text: String,
}

fn expectations(text: &str) -> Vec<Expect> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# expect: "))
        .map(|e| match e.split_once(": ") {
            Some((n, rest)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => Expect {
                line: n.parse().ok(),
                text: rest.to_string(),
            },
            _ => Expect {
                line: None,
                text: e.to_string(),
            },
        })
        .collect()
}

/// Diagnostics of `path` in `stderr`: (line, the diagnostic with its help lines).
fn diagnostics(stderr: &str, path: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    for l in stderr.lines() {
        if let Some(rest) = l.strip_prefix(path).and_then(|r| r.strip_prefix(':'))
            && l.contains(": error: ")
        {
            let line = rest
                .split(':')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            out.push((line, l.to_string()));
        } else if l.starts_with("    ")
            && let Some(last) = out.last_mut()
        {
            last.1.push('\n');
            last.1.push_str(l);
        }
    }
    out
}

#[test]
fn each_invalid_intent_is_refused_with_its_expected_messages_at_their_lines_and_exit_status_2() {
    let files = yaml_files(&repo().join("tests/invalid"));
    assert!(
        files.len() >= 80,
        "the corpus must hold at least 80 invalid intents, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read corpus file");
        let expects = expectations(&text);
        assert!(
            !expects.is_empty(),
            "{} has no `# expect:` header",
            f.display()
        );
        let path = f.to_string_lossy();
        let (code, _, stderr) = weft(&["validate", &path]);
        if code != 2 {
            failures.push(format!("{path}: exit status {code}, want 2\n{stderr}"));
        }
        let diags = diagnostics(&stderr, &path);
        if let Some(n) = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect-errors: "))
            .and_then(|n| n.trim().parse::<usize>().ok())
            && diags.len() != n
        {
            failures.push(format!(
                "{path}: {} errors, want exactly {n}:\n{stderr}",
                diags.len()
            ));
        }
        for e in &expects {
            let hit = match e.line {
                Some(n) => diags.iter().any(|(l, d)| *l == n && d.contains(&e.text)),
                None => stderr.contains(&e.text),
            };
            if !hit {
                let at = e.line.map(|n| format!(" at line {n}")).unwrap_or_default();
                failures.push(format!("{path}: missing {:?}{at} in:\n{stderr}", e.text));
            }
        }
        // Every diagnostic points into this file with a line and a column.
        for line in stderr.lines().filter(|l| l.contains(": error: ")) {
            let rest = line.strip_prefix(path.as_ref()).unwrap_or_default();
            let mut parts = rest.splitn(4, ':');
            let (_, l, c) = (parts.next(), parts.next(), parts.next());
            let num = |s: Option<&str>| {
                s.and_then(|s| s.parse::<usize>().ok())
                    .is_some_and(|n| n > 0)
            };
            if !num(l) || !num(c) {
                failures.push(format!(
                    "{path}: diagnostic without file:line:column: {line}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn each_tricky_valid_intent_is_accepted() {
    let files = yaml_files(&repo().join("tests/valid"));
    assert!(
        files.len() >= 15,
        "tests/valid must hold at least 15 intents, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read corpus file");
        let path = f.to_string_lossy();
        let (code, stdout, stderr) = weft(&["validate", &path]);
        if code != 0 {
            failures.push(format!("{path}: exit status {code}, want 0\n{stderr}"));
        }
        for e in expectations(&text) {
            if !stdout.contains(&e.text) {
                failures.push(format!("{path}: missing {:?} in {stdout}", e.text));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_example_fabric_is_valid() {
    let files = yaml_files(&repo().join("topology/examples"));
    assert!(files.len() >= 4);
    let paths: Vec<String> = files
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["validate"];
    args.extend(paths.iter().map(String::as_str));
    let (code, stdout, stderr) = weft(&args);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout.matches(": valid").count(), files.len());
}

#[test]
fn unreadable_file_exits_1_not_2() {
    let (code, _, stderr) = weft(&["validate", "/nonexistent/weft-intent.yaml"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("cannot read /nonexistent/weft-intent.yaml"),
        "{stderr}"
    );
}

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("scratch file");
    p
}

const TWO_SWITCHES: &str = "switches:\n  - {name: spine1, role: spine, ports: [{name: Ethernet0}, {name: Ethernet4}]}\n  - {name: leaf1, role: leaf, ports: [{name: Ethernet0}, {name: Ethernet4}]}\n  - {name: leaf2, role: leaf, ports: [{name: Ethernet0}, {name: Ethernet4}]}\nlinks:\n  - {a: leaf1:Ethernet4, b: spine1:Ethernet0}\n  - {a: leaf2:Ethernet4, b: spine1:Ethernet4}\nhosts:\n  - {name: h1, attach: leaf1:Ethernet0}\n  - {name: h2, attach: leaf2:Ethernet0}\n";

#[test]
fn independent_errors_of_one_file_are_all_reported_in_one_run() {
    let text = format!(
        "{TWO_SWITCHES}qos:\n  ecn: {{pmax: 1.5}}\n  pfc: {{watchdog: {{detection_time: 50ms}}}}\n"
    );
    let f = scratch("two-errors.yaml", &text);
    let (code, _, stderr) = weft(&["validate", &f.to_string_lossy()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("pmax 1.5"), "{stderr}");
    assert!(stderr.contains("detection_time 50ms"), "{stderr}");
    assert!(stderr.contains("2 error(s)"), "{stderr}");
}

#[test]
fn several_files_one_unreadable_are_each_reported_and_the_others_checked() {
    let good = repo().join("topology/examples/leaf-spine-small.yaml");
    let bad = repo().join("tests/invalid/03-unknown-top-level-field.yaml");
    let (good, bad) = (good.to_string_lossy(), bad.to_string_lossy());
    let (code, stdout, stderr) = weft(&["validate", &good, "/nonexistent/x.yaml", &bad]);
    assert_eq!(code, 1, "an unreadable file makes the status 1\n{stderr}");
    assert!(stdout.contains(&format!("{good}: valid")), "{stdout}");
    assert!(
        stderr.contains("/nonexistent/x.yaml: error: cannot read"),
        "{stderr}"
    );
    assert!(stderr.contains("unknown field `swiches`"), "{stderr}");
}

#[test]
fn dash_reads_the_intent_from_standard_input() {
    let (code, stdout, stderr) = weft_in(&["validate", "-"], Some(TWO_SWITCHES));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("<stdin>: valid (3 switches, 2 hosts, 2 links)"),
        "{stdout}"
    );
    let (code, _, stderr) = weft_in(&["validate", "-"], Some("swiches: []\n"));
    assert_eq!(code, 2);
    assert!(stderr.contains("<stdin>:1:1: error"), "{stderr}");
}

#[test]
fn json_reports_have_every_documented_key_and_no_counts_when_invalid() {
    let good = repo().join("topology/examples/fat-tree-k4.yaml");
    let bad = repo().join("tests/invalid/29-routing-for-unknown-class.yaml");
    let nohelp = repo().join("tests/invalid/42-two-documents.yaml");
    let (code, stdout, stderr) = weft(&[
        "validate",
        "--output",
        "json",
        &good.to_string_lossy(),
        &bad.to_string_lossy(),
        &nohelp.to_string_lossy(),
        "/nonexistent/y.yaml",
    ]);
    assert_eq!(code, 1, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["version"], 1, "{v}");
    assert_eq!(
        v["error"]["kind"], "failure",
        "a file could not be read: {v}"
    );
    let reports = v["files"].as_array().expect("one report per file");
    assert_eq!(reports.len(), 4);
    let report_keys = [
        "file",
        "valid",
        "switches",
        "hosts",
        "links",
        "error_count",
        "errors",
    ];
    let error_keys = ["file", "line", "column", "item", "message", "help"];
    for r in reports {
        let o = r.as_object().expect("report object");
        for k in report_keys {
            assert!(o.contains_key(k), "report without {k}: {r}");
        }
        for e in r["errors"].as_array().expect("errors") {
            for k in error_keys {
                assert!(
                    e.as_object().is_some_and(|e| e.contains_key(k)),
                    "error without {k}: {e}"
                );
            }
        }
    }
    assert_eq!(reports[0]["valid"], true);
    assert_eq!(reports[0]["switches"], 20);
    for r in &reports[1..] {
        assert_eq!(r["valid"], false);
        assert!(
            r["switches"].is_null(),
            "an invalid intent claims no count: {r}"
        );
        assert!(r["error_count"].as_u64() >= Some(1));
    }
    assert!(reports[1]["errors"][0]["help"].is_string());
    assert!(reports[2]["errors"][0]["help"].is_null());
    assert!(reports[3]["errors"][0]["line"].is_null());
}

#[test]
fn show_json_reports_counts_oversubscription_and_bisection() {
    let ex = repo().join("topology/examples/fat-tree-k4.yaml");
    let (code, stdout, stderr) = weft(&["show", &ex.to_string_lossy(), "--output", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["switches"], 20);
    assert_eq!(v["hosts"], 16);
    assert_eq!(v["links"], 32);
    // k=4 fat-tree: full bisection = 16 hosts × 400G / 2.
    assert_eq!(v["bisection_bps"].as_u64(), Some(16 * 400_000_000_000 / 2));
    let leaf = v["roles"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["role"] == "leaf"))
        .expect("leaf role");
    assert_eq!(leaf["oversubscription"].as_f64(), Some(1.0));
    assert_eq!(v["per_switch"].as_array().map(Vec::len), Some(20));
}

// ---- resource bombs: each must be refused (exit 2, a clear message), not exhaust the machine.

/// Runs `weft validate FILE` with its address space limited to 1 GiB (`ulimit -v`), so that a
/// bomb that got through would fail by running out of memory (exit status not 2, or a signal)
/// instead of taking the machine with it.
fn validate_limited(file: &Path) -> (i32, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576 && exec \"$0\" validate \"$1\"")
        .arg(env!("CARGO_BIN_EXE_weft"))
        .arg(file)
        .output()
        .expect("run weft under sh");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_refused(name: &str, text: &str, want: &[&str]) {
    let f = scratch(name, text);
    let (code, stderr) = validate_limited(&f);
    assert_eq!(
        code,
        2,
        "{name}: exit status {code}\n{}",
        &stderr[..stderr.len().min(2000)]
    );
    for w in want {
        assert!(
            stderr.contains(w),
            "{name}: missing {w:?} in\n{}",
            &stderr[..stderr.len().min(2000)]
        );
    }
}

#[test]
fn a_yaml_alias_bomb_under_1kb_is_refused_within_1gib() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    text.push_str("switches: *a9\n");
    assert!(text.len() < 1024);
    assert_refused(
        "alias-bomb.yaml",
        &text,
        &["aliases", "alias-expansion bomb"],
    );
}

#[test]
fn generators_too_large_to_handle_are_refused_before_generating() {
    for (k, switches) in [(1024u64, "1,310,720 switches"), (192, "46,080 switches")] {
        let text = format!("generators:\n  - kind: fat-tree\n    k: {k}\n");
        assert_refused(
            &format!("fat-tree-k{k}.yaml"),
            &text,
            &[
                &format!("3:5: error: generators[0]: the fabric would have {switches}"),
                "at most 16,384",
            ],
        );
    }
    let text =
        "generators:\n  - {kind: leaf-spine, spines: 4000, leaves: 4000, hosts_per_leaf: 1}\n";
    assert_refused("leaf-spine-huge.yaml", text, &["at most"]);
}

#[test]
fn an_intent_with_a_million_errors_prints_200_and_says_how_many_more() {
    let mut text = String::from("switches:\n");
    for i in 0..300_000 {
        text.push_str(&format!("  - {{name: s{i}, role: leaf, bogus: 1}}\n"));
    }
    let f = scratch("many-errors.yaml", &text);
    let (code, stderr) = validate_limited(&f);
    assert_eq!(code, 2);
    let shown = stderr.lines().filter(|l| l.contains(": error: ")).count();
    assert_eq!(shown, 201, "200 errors and one line saying how many more");
    assert!(
        stderr.contains("299800 more errors not shown"),
        "{}",
        &stderr[stderr.len().saturating_sub(500)..]
    );
    assert!(stderr.contains("300000 error(s), the first 200 shown"));
}

#[test]
fn an_intent_over_64_mib_is_refused_without_being_parsed() {
    let mut text = String::with_capacity(70 << 20);
    text.push_str("switches:\n");
    while text.len() <= 65 << 20 {
        text.push_str("  - {name: s, role: leaf}\n");
    }
    assert_refused("huge.yaml", &text, &["larger than 64 MiB"]);
}

#[test]
fn forty_thousand_explicit_ports_on_one_switch_are_one_error() {
    let mut text = String::from("switches:\n  - name: big\n    role: leaf\n    ports:\n");
    for i in 0..40_000 {
        text.push_str(&format!("      - {{name: Ethernet{}}}\n", i * 4));
    }
    let f = scratch("40k-ports.yaml", &text);
    let (code, stderr) = validate_limited(&f);
    assert_eq!(code, 2, "{}", &stderr[..stderr.len().min(2000)]);
    assert!(
        stderr.contains("4:5: error: switch big: 40000 ports; a switch has at most 510"),
        "{}",
        &stderr[..stderr.len().min(2000)]
    );
    assert!(
        stderr.contains("1 error(s)"),
        "{}",
        &stderr[..stderr.len().min(2000)]
    );
}

#[test]
fn nesting_thousands_deep_is_refused_not_a_stack_overflow() {
    let depth = 100_000;
    let text = format!("switches: {}{}\n", "[".repeat(depth), "]".repeat(depth));
    assert_refused("deep-flow.yaml", &text, &["nest more than 255 deep"]);
    let mut text = String::from("switches:\n");
    for i in 0..2000 {
        text.push_str(&" ".repeat(2 * i + 2));
        text.push_str("- \n");
    }
    assert_refused("deep-block.yaml", &text, &["nest more than 64 deep"]);
}
