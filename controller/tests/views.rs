//! The operator's views and workflow through the real `weft` binary: `show hosts`, `show
//! switches`, `show routes` (compiled, and against switches answering through stand-in plugins
//! on real redis-servers), `show PLAN.json`, `diff`, `apply --previous` (kept with its intent,
//! refused once the fabric drifted), the warning when a plan's intent changed, colour on a
//! terminal only, completions that know the intent's names, and the smaller things an operator
//! meets first (`-` for every intent, `--version`, `manpages` in the help, `graph -o x.svg`).

#[path = "common/stand_in.rs"]
#[allow(dead_code)]
mod stand_in_plugin;

#[path = "common/lab.rs"]
#[allow(dead_code)]
mod lab;

use lab::{Lab, example, weft, weft_with};

#[test]
fn show_hosts_and_switches_list_addresses_attachments_and_endpoints() {
    let small = example("leaf-spine-small.yaml");
    let r = weft(&["show", "hosts", &small]);
    assert_eq!(r.code, 0, "{r:?}");
    let h1 = r
        .out
        .lines()
        .find(|l| l.starts_with("leaf1-h1 "))
        .expect("leaf1-h1");
    for want in [
        "10.0.0.2",
        "fd00:77::2",
        "leaf1:Ethernet0",
        "100G",
        "ooo-tolerant",
    ] {
        assert!(h1.contains(want), "{want} in {h1}");
    }
    let r = weft(&["show", "switches", &small]);
    assert_eq!(r.code, 0, "{r:?}");
    let leaf1 = r
        .out
        .lines()
        .find(|l| l.starts_with("leaf1 "))
        .expect("leaf1");
    for want in [
        "10.255.0.3",
        "127.0.0.1:9561",
        "unix:///run/weft/small/leaf1/redis.sock",
    ] {
        assert!(leaf1.contains(want), "{want} in {leaf1}");
    }
    let j = weft(&["show", "hosts", &small, "--output", "json"]).json();
    assert_eq!(j["hosts"].as_array().map(Vec::len), Some(8));
}

#[test]
fn show_routes_gives_the_compiled_fib_and_what_the_switch_holds() {
    let small = example("leaf-spine-small.yaml");
    let r = weft(&["show", "routes", &small, "leaf1", "10.0.0.26", "--offline"]);
    assert_eq!(r.code, 0, "{r:?}");
    let route = r
        .out
        .lines()
        .find(|l| l.starts_with("10.0.0."))
        .expect("a route");
    assert!(
        route.contains("group") && route.contains("spine1 ") && route.contains("spine2 "),
        "{}",
        r.out
    );
    let l = Lab::new("rts");
    l.stand_ins();
    let f = l.file();
    assert_eq!(l.weft(&["apply", &f, "--timeout", "20s"]).code, 0);
    let r = l.weft(&["show", "routes", &f, "leaf1"]);
    assert_eq!(r.code, 0, "every route held\n{r:?}");
    assert!(r.out.contains("installed: APPL_STATE_DB"), "{}", r.out);
    assert!(!r.out.contains("missing"), "{}", r.out);
    // A route gone behind Weft's back: missing, exit 3; one the intent does not give: listed.
    let key = l.cli(
        "leaf1",
        14,
        &["KEYS", "P4RT_TABLE:FIXED_IPV4_TABLE:*10.0.0.2/32*"],
    );
    let key = key
        .lines()
        .next()
        .expect("the route to leaf1-h1")
        .trim()
        .to_string();
    l.cli("leaf1", 14, &["DEL", &key]);
    let extra = "P4RT_TABLE:FIXED_IPV4_TABLE:{\"match/ipv4_dst\":\"192.168.7.0/24\"}";
    l.cli("leaf1", 14, &["HSET", extra, "action", "drop_route"]);
    let r = l.weft(&["show", "routes", &f, "leaf1"]);
    assert_eq!(r.code, 3, "{r:?}");
    let line = r
        .out
        .lines()
        .find(|x| x.starts_with("10.0.0.2/32"))
        .expect("10.0.0.2/32");
    assert!(line.contains("missing"), "{line}");
    assert!(
        r.out.contains("192.168.7.0/24") && r.out.contains("held, not in the intent"),
        "{}",
        r.out
    );
}

#[test]
fn show_routes_of_a_switch_without_a_running_plugin_is_unknown() {
    let l = Lab::new("rtu");
    let r = l.weft(&["show", "routes", &l.file(), "leaf1"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.out.contains("leaf1: STALE"), "{}", r.out);
    assert!(!r.out.contains(" held "), "{}", r.out);
}

#[test]
fn show_plan_file_prints_the_plan_and_whether_its_intent_changed() {
    let l = Lab::new("shp");
    l.stand_ins();
    let f = l.file();
    let plan = l.dir.join("plan.json");
    let p = plan.to_string_lossy().into_owned();
    let made = l.weft(&["plan", &f, "-o", &p]);
    assert_eq!(made.code, 0, "{made:?}");
    let r = weft(&["show", &p]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.out.starts_with(&format!("plan file {p}: made ")),
        "{}",
        r.out
    );
    assert!(r.out.contains("(intent unchanged since)"), "{}", r.out);
    let total = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("total: "))
            .map(String::from)
    };
    assert_eq!(
        total(&r.out),
        total(&made.out),
        "the plan as `weft plan` printed it"
    );
    let v = weft(&["show", &p, "-v"]);
    assert!(v.out.contains("    + FIXED_IPV4_TABLE:"), "{}", v.out);
    std::fs::write(
        &l.file,
        std::fs::read_to_string(&l.file).expect("intent") + "\n# edited\n",
    )
    .expect("edit");
    let r = weft(&["show", &p]);
    assert!(r.out.contains("CHANGED since"), "{}", r.out);
    // Applying it warns too.
    let r = l.weft(&["apply", &p, "--no-wait"]);
    assert!(r.err.contains("changed since this plan was made"), "{r:?}");
}

#[test]
fn diff_lists_per_switch_what_another_intent_would_change() {
    let dir = std::env::temp_dir().join(format!("weft-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let a = example("leaf-spine-small.yaml");
    let text = std::fs::read_to_string(&a).expect("example");
    let b = dir.join("b.yaml");
    std::fs::write(&b, text.replace("cable_length: 3m", "cable_length: 100m")).expect("b");
    let b = b.to_string_lossy().into_owned();
    let r = weft(&["diff", &a, &b]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.out.contains("~ BUFFER_PROFILE|")
            || r.out.contains("~ PORT_QOS_MAP|")
            || r.out.contains("~ "),
        "{}",
        r.out
    );
    assert!(r.out.contains("→"), "old → new fields: {}", r.out);
    assert!(
        r.out
            .lines()
            .last()
            .unwrap_or_default()
            .contains("CONFIG_DB rows"),
        "{}",
        r.out
    );
    let c = dir.join("c.yaml");
    std::fs::write(&c, text.replace("leaves: 4", "leaves: 3")).expect("c");
    let r = weft(&["diff", &a, &c.to_string_lossy()]);
    assert!(
        r.out.contains("leaf4") && r.out.contains("everything of it goes"),
        "{}",
        r.out
    );
    let j = weft(&["diff", &a, &b, "--output", "json"]).json();
    assert_eq!(j["same"], false);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn apply_previous_goes_back_to_the_last_converged_apply_unless_the_fabric_drifted() {
    let l = Lab::new("rbk");
    l.stand_ins();
    let a = l.file();
    let b = l.dir.join("b.yaml");
    let text = std::fs::read_to_string(&l.file).expect("intent");
    std::fs::write(&b, text.replace("cable_length: 3m", "cable_length: 100m")).expect("b");
    let b = b.to_string_lossy().into_owned();
    assert_eq!(l.weft(&["apply", &a, "--timeout", "20s"]).code, 0);
    assert_eq!(l.weft(&["apply", &b, "--timeout", "20s"]).code, 0);
    assert_eq!(
        l.weft(&["plan", &b, "--detailed-exitcode"]).code,
        0,
        "B applied"
    );
    let r = l.weft(&["apply", &b, "--previous", "--timeout", "20s"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.err.contains("rolling fabric"), "{}", r.err);
    assert_eq!(
        l.weft(&["plan", &a, "--detailed-exitcode"]).code,
        0,
        "back to A"
    );
    // Someone changes leaf2 by hand: rolling back now would undo what nobody recorded.
    let keys = l.cli("leaf2", 4, &["KEYS", "PORT_QOS_MAP|*"]);
    let row = keys.lines().next().expect("a row").trim().to_string();
    l.cli("leaf2", 4, &["HSET", &row, "pfc_enable", "5"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let r = l.weft(&["apply", &a, "--previous", "--timeout", "20s"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.err.contains("leaf2: changed since the last apply"),
        "{}",
        r.err
    );
    assert!(!r.err.contains("leaf1:"), "{}", r.err);
    assert_eq!(
        l.cli("leaf2", 4, &["HGET", &row, "pfc_enable"]).trim(),
        "5",
        "nothing written"
    );
}

#[test]
fn colour_marks_failures_on_a_terminal_and_never_in_a_pipe() {
    let l = Lab::new("clr");
    let piped = weft(&["doctor", &l.file()]);
    assert!(
        piped.out.contains("FAIL") && !piped.out.contains('\x1b'),
        "{}",
        piped.out
    );
    // `script` gives the command a terminal.
    let cmd = format!("{} doctor {}", lab::bin(), l.file());
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .output()
        .expect("script (util-linux)");
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(tty.contains("\x1b[1;31mFAIL\x1b[0m"), "{tty:?}");
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .output()
        .expect("script");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("\x1b[1;31m"),
        "NO_COLOR"
    );
}

#[test]
fn completion_offers_the_intents_switch_host_and_port_names() {
    let small = example("leaf-spine-small.yaml");
    let script = weft(&["completions", "bash"]);
    assert_eq!(script.code, 0);
    let dir = std::path::Path::new(&lab::bin())
        .parent()
        .expect("bin dir")
        .to_path_buf();
    // The shell's own completion function, with the binary on PATH as an installed weft.
    let complete = |words: &str| -> String {
        let prog = format!(
            "{}\nCOMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); COMP_TYPE=9\n_clap_complete_weft weft \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.out
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &prog])
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    dir.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .output()
            .expect("bash");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let got = complete(&format!("weft plan {small} --switch le"));
    for s in ["leaf1", "leaf2", "leaf3", "leaf4"] {
        assert!(got.lines().any(|l| l.trim() == s), "{s} in {got:?}");
    }
    assert!(!got.contains("spine"), "{got:?}");
    let got = complete(&format!("weft trace {small} leaf3-"));
    assert!(got.lines().any(|l| l.trim() == "leaf3-h2"), "{got:?}");
    let got = complete(&format!("weft plan {small} --down leaf1:Eth"));
    assert!(
        got.lines().any(|l| l.trim() == "leaf1:Ethernet8"),
        "{got:?}"
    );
}

#[test]
fn the_first_things_an_operator_meets_work_as_written() {
    let small = example("leaf-spine-small.yaml");
    let text = std::fs::read_to_string(&small).expect("example");
    // `-` is standard input for every command that takes an intent.
    let r = weft_with(&["show", "-"], Some(&text), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.starts_with("fabric small:"), "{}", r.out);
    let r = weft_with(&["plan", "-", "--offline"], Some(&text), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = weft(&["show", &small, "--switches"]);
    assert!(r.out.contains("uplinks downlinks"), "{}", r.out);
    let r = weft(&["--version"]);
    assert!(
        r.out.starts_with("weft ") && r.out.contains("commit "),
        "{}",
        r.out
    );
    let r = weft(&["--help"]);
    assert!(r.out.contains("\n  manpages "), "{}", r.out);
    // graph -o follows the file's extension; one no format has is refused.
    let dir = std::env::temp_dir().join(format!("weft-graph-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let svg = dir.join("x.svg");
    let r = weft(&["graph", &small, "--offline", "-o", &svg.to_string_lossy()]);
    assert_eq!(r.code, 0, "{r:?}");
    let body = std::fs::read_to_string(&svg).expect("svg");
    assert!(body.contains("<svg"), "{}", &body[..body.len().min(200)]);
    let r = weft(&[
        "graph",
        &small,
        "--offline",
        "-o",
        &dir.join("x.png").to_string_lossy(),
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains(".png"), "{}", r.err);
    let _ = std::fs::remove_dir_all(dir);
}
