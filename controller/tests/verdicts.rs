//! No verdict without data, through the real `weft` binary against real redis-servers (one per
//! switch, as SONiC has), without BMv2: every command that says healthy, ok, verified,
//! operational, in use or none says it only about what it read, names every switch it could
//! not use, and exits by one rule (README's table): 0 ok, 1 a switch could not be read (or had
//! no current data), 2 invalid intent, 3 the answer is "not yet".

#[path = "common/stand_in.rs"]
#[allow(dead_code)]
mod stand_in_plugin;

#[path = "common/lab.rs"]
#[allow(dead_code)]
mod lab;

use lab::{Lab, SWITCHES, example, weft, weft_with};

#[test]
fn canaries_are_refused_when_nothing_would_answer_to_verify_them() {
    let l = Lab::new("cny");
    let r = l.weft(&["apply", &l.file(), "--no-wait", "--canary", "2"]);
    assert_eq!(r.code, 64, "a usage error, not 'verified':\n{r:?}");
    assert!(r.err.contains("--no-wait"), "{}", r.err);
    assert!(
        !r.out.contains("verified") && !r.err.contains("verified"),
        "{r:?}"
    );
    for s in SWITCHES {
        assert_eq!(l.cli(s, 0, &["DBSIZE"]).trim(), "0", "{s}: nothing written");
    }
    // Written without waiting: the result says so, not "ok".
    let r = l.weft(&["apply", &l.file(), "--no-wait", "--switch", "leaf1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.out.contains("written, not answered (--no-wait)"),
        "{}",
        r.out
    );
    assert!(
        !r.out.lines().any(|l| l.trim_end().ends_with(" ok")),
        "{}",
        r.out
    );
}

#[test]
fn pfc_watchdog_of_switches_without_a_running_plugin_is_unknown_not_operational() {
    let l = Lab::new("wd");
    assert_eq!(l.weft(&["apply", &l.file(), "--no-wait"]).code, 0);
    let r = l.weft(&["show", "pfcwd", &l.file()]);
    assert_eq!(r.code, 1, "could not read a watchdog: exit 1\n{r:?}");
    assert!(!r.out.contains("operational"), "{}", r.out);
    assert!(r.out.contains("unknown"), "{}", r.out);
    assert!(
        r.out
            .contains("leaf1: STALE: PFC watchdog state: no live plugin writes it"),
        "{}",
        r.out
    );
    let j = l
        .weft(&["show", "pfcwd", &l.file(), "--output", "json"])
        .json();
    let queues = j["queues"].as_array().expect("queues");
    assert!(!queues.is_empty(), "the watched queues are listed");
    assert!(queues.iter().all(|q| q["status"] == "unknown"), "{j:#}");
    assert_eq!(j["unknown"].as_array().map(Vec::len), Some(6));
    // One switch with a running plugin: its queues are operational, the others still unknown.
    l.plugin_rows("leaf1", 0, 1);
    let j = l
        .weft(&["show", "pfcwd", &l.file(), "--output", "json"])
        .json();
    for q in j["queues"].as_array().expect("queues") {
        let want = if q["switch"] == "leaf1" {
            "operational"
        } else {
            "unknown"
        };
        assert_eq!(q["status"], want, "{q}");
    }
}

#[test]
fn diagnose_of_a_fabric_without_counters_is_not_healthy_and_needs_two_samples() {
    let l = Lab::new("dgn");
    let r = l.weft(&["diagnose", &l.file(), "--window", "2s"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(!r.out.contains("healthy: nothing found"), "{}", r.out);
    assert!(r.out.contains("not healthy, not judged"), "{}", r.out);
    assert!(r.out.contains("spine1: NO DATA"), "{}", r.out);
    let r = l.weft(&["diagnose", &l.file(), "--window", "0s", "--output", "json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["healthy"], false);
    assert!(
        j["samples"].as_u64() >= Some(2),
        "a rate needs two samples: {j}"
    );
    assert_eq!(j["unknown"].as_array().map(Vec::len), Some(6));
}

#[test]
fn top_without_counters_says_unknown_not_in_use_or_none() {
    let l = Lab::new("top");
    let r = l.weft(&["top", &l.file(), "--once", "--interval", "200ms"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(!r.out.contains("in use"), "{}", r.out);
    assert!(!r.out.contains("drops: none\n"), "{}", r.out);
    assert!(!r.out.contains("PFC: no PAUSE frames\n"), "{}", r.out);
    assert!(r.out.contains("no data"), "{}", r.out);
    let j = l
        .weft(&[
            "top",
            &l.file(),
            "--once",
            "--interval",
            "200ms",
            "--output",
            "json",
        ])
        .json();
    assert!(
        j["links"]
            .as_array()
            .expect("links")
            .iter()
            .all(|x| x["utilisation"].is_null()),
        "no rate without counters: {j}"
    );
}

#[test]
fn stale_counters_are_unknown_and_current_ones_are_judged() {
    let l = Lab::new("stl");
    for s in SWITCHES {
        l.plugin_rows(s, 60_000, 10);
    }
    let r = l.weft(&["top", &l.file(), "--once", "--interval", "200ms"]);
    assert_eq!(r.code, 1, "written a minute ago: stale\n{r:?}");
    assert!(r.out.contains("STALE: counters: last written"), "{}", r.out);
    let r = l.weft(&["show", "queues", &l.file()]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.out.contains("UC3"),
        "old rows are still listed: {}",
        r.out
    );
    // Polled now, and again while diagnose watches: current, judged, healthy.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|sc| {
        let st = stop.clone();
        let lr = &l;
        sc.spawn(move || {
            let mut n = 10;
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                for s in SWITCHES {
                    lr.plugin_rows(s, 0, n);
                }
                n += 10;
                std::thread::sleep(std::time::Duration::from_millis(300));
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(500));
        let top = l.weft(&["top", &l.file(), "--once", "--interval", "500ms"]);
        let diag = l.weft(&[
            "diagnose",
            &l.file(),
            "--window",
            "2s",
            "--interval",
            "500ms",
        ]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(top.code, 0, "{top:?}");
        assert!(top.out.contains("drops: none"), "{}", top.out);
        assert_eq!(diag.code, 0, "{diag:?}");
        assert!(
            diag.out.starts_with("healthy: nothing found"),
            "{}",
            diag.out
        );
    });
}

/// Every command that reads switches, with every switch's DB gone: exit 1, never a verdict.
#[test]
fn every_command_that_reads_switches_exits_1_when_their_dbs_are_gone() {
    let (dir, file) = Lab::gone("gone");
    let f = file.to_string_lossy().into_owned();
    let cases: Vec<Vec<&str>> = vec![
        vec!["status", &f],
        vec!["doctor", &f],
        vec!["graph", &f],
        vec!["show", "queues", &f],
        vec!["show", "pfcwd", &f],
        vec!["show", "routes", &f, "leaf1"],
        vec!["top", &f, "--once", "--interval", "200ms"],
        vec!["diagnose", &f, "--window", "1s", "--interval", "500ms"],
        vec!["trace", &f, "leaf1-h1", "leaf3-h1"],
        vec!["plan", &f],
        vec!["apply", &f, "--retry", "1s", "--timeout", "2s"],
    ];
    let mut bad = Vec::new();
    for c in &cases {
        let r = weft(c);
        if r.code != 1 {
            bad.push(format!(
                "weft {}: exit {} (want 1)\n{}{}",
                c.join(" "),
                r.code,
                r.out,
                r.err
            ));
        }
    }
    let g = weft(&["graph", &f]);
    assert!(
        g.out.starts_with("graph "),
        "the drawing is still made: {}",
        g.out
    );
    assert!(
        g.err.contains("leaf1: UNREACHABLE"),
        "and says why it is grey: {}",
        g.err
    );
    let _ = std::fs::remove_dir_all(dir);
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

/// Every command that takes an intent: exit 2 on an invalid one, and with `--output json` a
/// document saying so.
#[test]
fn every_command_exits_2_on_an_invalid_intent_with_a_document_when_asked() {
    let broken = lab::repo().join("tests/readme/broken.yaml");
    let b = broken.to_string_lossy().into_owned();
    let cases: Vec<Vec<&str>> = vec![
        vec!["validate", &b],
        vec!["show", &b],
        vec!["show", "hosts", &b],
        vec!["show", "switches", &b],
        vec!["show", "routes", &b, "leaf1"],
        vec!["show", "queues", &b],
        vec!["show", "pfcwd", &b],
        vec!["plan", &b],
        vec!["apply", &b],
        vec!["diff", &b, &b],
        vec!["status", &b],
        vec!["doctor", &b],
        vec!["top", &b],
        vec!["trace", &b, "a", "b"],
        vec!["diagnose", &b],
        vec!["simulate", &b, "alltoall"],
    ];
    let mut bad = Vec::new();
    for c in &cases {
        let r = weft(c);
        if r.code != 2 {
            bad.push(format!(
                "weft {}: exit {} (want 2)\n{}",
                c.join(" "),
                r.code,
                r.err
            ));
        }
        let mut j = c.clone();
        j.extend(["--output", "json"]);
        let r = weft(&j);
        let doc: Option<serde_json::Value> = serde_json::from_str(&r.out).ok();
        let kind = doc.as_ref().map(|d| {
            (
                d["version"].clone(),
                d["error"]["kind"].clone(),
                d["error"]["errors"].as_array().map(Vec::len),
            )
        });
        if r.code != 2 || kind != Some((1.into(), "invalid-intent".into(), Some(2))) {
            bad.push(format!(
                "weft {}: exit {}, document {kind:?}\n{}",
                j.join(" "),
                r.code,
                r.out
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

/// "Not yet" is 3, and only with a complete answer.
#[test]
fn not_yet_is_3_for_each_command_that_has_a_not_yet() {
    let l = Lab::new("ny");
    let f = l.file();
    // Every DB answers; no plugin, no `weft run`.
    let r = l.weft(&["status", &f]);
    assert_eq!(r.code, 3, "weft run not running, every switch read\n{r:?}");
    let r = l.weft(&["doctor", &f]);
    assert_eq!(r.code, 3, "problems found (no plugin)\n{r:?}");
    assert!(r.out.contains("FAIL plugin"), "{}", r.out);
    let r = l.weft(&["plan", &f, "--offline", "--detailed-exitcode"]);
    assert_eq!(r.code, 3, "{r:?}");
    let small = example("leaf-spine-small.yaml");
    let r = weft(&["diff", &small, &f]);
    assert_eq!(r.code, 3, "the DB endpoints differ\n{r:?}");
    let r = weft(&["diff", &small, &small]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = weft(&[
        "simulate",
        &small,
        "alltoall",
        "--modes",
        "ecmp",
        "--size",
        "1MiB",
        "--down",
        "leaf1:Ethernet8,leaf1:Ethernet12",
    ]);
    assert_eq!(
        r.code, 3,
        "leaf1 cut off: the collective does not complete\n{r:?}"
    );
}

#[test]
fn plan_totals_count_config_db_rows_and_v_lists_added_fields_in_natural_order() {
    let l = Lab::new("tot");
    let f = l.file();
    assert_eq!(
        l.weft(&["apply", &f, "--no-wait", "--switch", "leaf1"])
            .code,
        0
    );
    // A CONFIG_DB row changed by hand, and a row of an owned table the intent does not have.
    let keys = l.cli("leaf1", 4, &["KEYS", "PORT_QOS_MAP|*"]);
    let row = keys
        .lines()
        .next()
        .expect("a PORT_QOS_MAP row")
        .trim()
        .to_string();
    l.cli("leaf1", 4, &["HSET", &row, "pfc_enable", "5"]);
    l.cli(
        "leaf1",
        4,
        &["HSET", "PORT_QOS_MAP|Ethernet99", "pfc_enable", "3"],
    );
    let r = l.weft(&["plan", &f, "-v", "--switch", "leaf1"]);
    let total = r.out.lines().last().unwrap_or_default();
    assert!(
        total.contains("1 to modify, 1 to delete")
            && total.contains("CONFIG_DB rows: 1 to modify, 1 to delete"),
        "the total counts CONFIG_DB rows:\n{}",
        r.out
    );
    let e4 = r
        .out
        .find("+ FIXED_PORT_CONFIG_TABLE:{\"match/port\":\"Ethernet4\"}");
    let e12 = r
        .out
        .find("+ FIXED_PORT_CONFIG_TABLE:{\"match/port\":\"Ethernet12\"}");
    assert!(
        e4.is_some() && e4 < e12,
        "Ethernet4 before Ethernet12:\n{}",
        r.out
    );
    let added = r
        .out
        .lines()
        .skip_while(|x| !x.contains("+ FIXED_IPV4_TABLE"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        added.trim_start().starts_with("action: "),
        "an addition's fields: {added:?}\n{}",
        r.out
    );
    assert!(
        r.out.contains(&format!("~ {row}")) && r.out.contains("pfc_enable: 5 → "),
        "{}",
        r.out
    );
}

#[test]
fn structured_output_is_one_document_with_a_version_for_every_command_and_error() {
    let small = example("leaf-spine-small.yaml");
    let l = Lab::new("doc");
    let f = l.file();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["validate", &small], "validate"),
        (vec!["show", &small], "show"),
        (vec!["show", "hosts", &small], "show hosts"),
        (vec!["show", "switches", &small], "show switches"),
        (
            vec!["show", "routes", &small, "leaf1", "--offline"],
            "show routes",
        ),
        (vec!["plan", &small, "--offline"], "plan"),
        (vec!["diff", &small, &small], "diff"),
        (
            vec![
                "simulate",
                &small,
                "allreduce",
                "--modes",
                "ecmp",
                "--size",
                "1MiB",
            ],
            "simulate",
        ),
        (vec!["status", &f], "status"),
        (vec!["doctor", &f], "doctor"),
        (vec!["show", "queues", &f], "show queues"),
        (vec!["show", "pfcwd", &f], "show pfcwd"),
        (vec!["top", &f, "--once", "--interval", "200ms"], "top"),
        (
            vec!["diagnose", &f, "--window", "1s", "--interval", "500ms"],
            "diagnose",
        ),
        (vec!["trace", &f, "leaf1-h1", "leaf3-h1"], "trace"),
        (vec!["plan", "nope.yaml", "--offline"], "plan"),
    ];
    let mut bad = Vec::new();
    for (args, command) in &cases {
        for format in ["json", "yaml"] {
            let mut a = args.clone();
            a.extend(["--output", format]);
            let r = l.weft(&a);
            let doc: Result<serde_json::Value, String> = if format == "json" {
                serde_json::from_str(&r.out).map_err(|e| e.to_string())
            } else {
                serde_yaml_ng::from_str(&r.out).map_err(|e| e.to_string())
            };
            let ok = doc.as_ref().is_ok_and(|d| {
                d["version"] == 1
                    && d["command"] == *command
                    && d.get("fabric").is_some()
                    && d.get("error").is_some()
                    && (d["fabric"].is_string() || !d["error"].is_null())
            });
            if !ok {
                bad.push(format!("weft {} → {doc:?}\n{}", a.join(" "), r.err));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
    // An error is the document's, said once.
    let r = weft(&["plan", "nope.yaml", "--offline", "--output", "json"]);
    assert_eq!(r.code, 1);
    let j = r.json();
    assert_eq!(j["error"]["kind"], "failure");
    let said = format!("{} {}", j["error"]["message"], j["error"]["causes"]);
    assert_eq!(
        said.matches("No such file or directory").count(),
        1,
        "{said}"
    );
    assert_eq!(
        r.err.matches("No such file or directory").count(),
        1,
        "{}",
        r.err
    );
    // The same words for the same things: doctor's findings are a list, like diagnose's.
    let d = l.weft(&["doctor", &f, "--output", "json"]).json();
    assert!(d["findings"].is_array() && d["unknown"].is_array(), "{d}");
    assert!(d.get("name").is_none(), "{d}");
    let s = weft(&["show", &small, "--output", "json"]).json();
    assert_eq!(s["fabric"], "small");
    assert!(
        s.get("name").is_none(),
        "show names the fabric as every command does: {s}"
    );
}

#[test]
fn log_format_json_makes_every_line_of_standard_error_json() {
    let l = Lab::new("log");
    let f = l.file();
    let plan = l.dir.join("p.json");
    let p = plan.to_string_lossy().into_owned();
    let runs = [
        l.weft(&["--log-format", "json", "plan", &f, "-o", &p]),
        l.weft(&[
            "--log-format",
            "json",
            "apply",
            &f,
            "--retry",
            "1s",
            "--timeout",
            "1s",
            "--switch",
            "leaf1",
        ]),
        l.weft(&["--log-format", "json", "plan", "nope.yaml"]),
        l.weft(&[
            "--log-format",
            "json",
            "validate",
            "tests/readme/broken.yaml",
        ]),
        l.weft(&["--log-format", "json", "plan", &f, "--no-such-flag"]),
    ];
    assert!(runs[0].err.contains("plan written to"), "{:?}", runs[0]);
    assert!(runs[1].err.contains("not ready"), "{:?}", runs[1]);
    assert_eq!(runs[4].code, 64);
    for r in &runs {
        assert!(!r.err.trim().is_empty(), "{r:?}");
        for line in r.err.lines() {
            let v: Result<serde_json::Value, _> = serde_json::from_str(line);
            assert!(
                v.as_ref()
                    .is_ok_and(|v| v["level"].is_string() && v["message"].is_string()),
                "not a JSON log line: {line:?}\n{r:?}"
            );
        }
    }
    let diag: serde_json::Value =
        serde_json::from_str(runs[3].err.lines().next().unwrap_or_default()).expect("json");
    assert_eq!(diag["line"], 5, "a diagnostic keeps its position: {diag}");
}

#[test]
fn top_off_a_terminal_prints_one_frame_without_screen_escapes() {
    let l = Lab::new("pipe");
    let t0 = std::time::Instant::now();
    // No --once: stdout is a pipe.
    let r = weft_with(&["top", &l.file(), "--interval", "200ms"], None, &[]);
    assert!(t0.elapsed() < std::time::Duration::from_secs(60), "it ends");
    assert!(!r.out.contains('\x1b'), "no escapes in a pipe: {:?}", r.out);
    assert_eq!(
        r.out.matches("weft top ").count(),
        1,
        "one frame: {}",
        r.out
    );
}

#[test]
fn simulate_refuses_impossible_inputs_and_never_calls_unroutable_bytes_ideal() {
    let small = example("leaf-spine-small.yaml");
    let r = weft(&["simulate", &small, "alltoall", "--random-down", "150"]);
    assert_eq!(r.code, 64, "{r:?}");
    assert!(r.err.contains("150"), "{}", r.err);
    let r = weft(&[
        "simulate",
        &small,
        "alltoall",
        "--modes",
        "ecmp,spray",
        "--size",
        "1MiB",
        "--down",
        "leaf1:Ethernet8,leaf1:Ethernet12",
    ]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.out.contains("does not complete"), "{}", r.out);
    assert!(
        !r.out.contains(" 1.00 "),
        "unroutable bytes are not ideal:\n{}",
        r.out
    );
    assert!(!r.out.contains("-0.0"), "{}", r.out);
    let j = weft(&[
        "simulate",
        &small,
        "alltoall",
        "--modes",
        "ecmp",
        "--size",
        "1MiB",
        "--down",
        "leaf1:Ethernet8,leaf1:Ethernet12",
        "--output",
        "json",
    ])
    .json();
    assert_eq!(j["results"][0]["completes"], false);
    assert!(j["results"][0]["ratio"].is_null(), "{j}");
}

#[test]
fn a_recording_of_another_fabric_is_refused_by_replay() {
    let (dir, file) = Lab::gone("rec");
    let rec = dir.join("w.json");
    let f = file.to_string_lossy().into_owned();
    let r = weft(&[
        "diagnose",
        &f,
        "--window",
        "1s",
        "--interval",
        "500ms",
        "--record",
        &rec.to_string_lossy(),
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let k4 = example("fat-tree-k4.yaml");
    let r = weft(&["diagnose", &k4, "--replay", &rec.to_string_lossy()]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.err.contains("recording of another fabric"), "{}", r.err);
    assert!(!r.out.contains("healthy"), "{}", r.out);
    // Its own fabric is replayed (and, nothing having been read, is not called healthy).
    let r = weft(&["diagnose", &f, "--replay", &rec.to_string_lossy()]);
    assert!(!r.err.contains("another fabric"), "{}", r.err);
    assert_eq!(r.code, 1, "{r:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs `weft testbed down` for each testbed a test started, even when it fails.
struct Beds(Vec<(String, String)>);

impl Drop for Beds {
    fn drop(&mut self) {
        for (file, state) in &self.0 {
            let _ = weft(&["testbed", "down", file, "--state-dir", state]);
        }
    }
}

#[test]
fn a_renamed_copy_gets_its_own_sockets_and_a_testbed_on_another_ones_is_refused() {
    let (name, dir) = stand_in_plugin::scratch("tbc");
    let text = std::fs::read_to_string(example("leaf-spine-small.yaml"))
        .expect("example")
        .replace("name: small", &format!("name: {name}"));
    let copy = |n: &str, extra: &str| -> String {
        let f = dir.join(format!("{n}.yaml"));
        let t = text.replace(&format!("name: {name}"), &format!("name: {n}"));
        let t = t.replace(
            "    p4rt_address: 127.0.0.1:9559\n",
            &format!("    p4rt_address: 127.0.0.1:9559\n{extra}"),
        );
        std::fs::write(&f, t).expect("intent");
        f.to_string_lossy().into_owned()
    };
    let state = |n: &str| dir.join("state").join(n).to_string_lossy().into_owned();
    let first = copy(&name, "");
    let second = copy(&format!("{name}b"), "");
    let third = copy(
        &format!("{name}c"),
        &format!("    db_socket_dir: /run/weft/{name}\n"),
    );
    let mut beds = Beds(Vec::new());
    beds.0.push((first.clone(), state("a")));
    let r = weft(&[
        "testbed",
        "up",
        &first,
        "--db-only",
        "--state-dir",
        &state("a"),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        std::path::Path::new(&format!("/run/weft/{name}/leaf1/redis.sock")).exists(),
        "sockets under the fabric's own directory"
    );
    // A copy with only its name changed: its own sockets, both run.
    beds.0.push((second.clone(), state("b")));
    let r = weft(&[
        "testbed",
        "up",
        &second,
        "--db-only",
        "--state-dir",
        &state("b"),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(std::path::Path::new(&format!("/run/weft/{name}b/leaf1/redis.sock")).exists());
    // A copy pointed at the first one's sockets: refused, naming the first testbed.
    let r = weft(&[
        "testbed",
        "up",
        &third,
        "--db-only",
        "--state-dir",
        &state("c"),
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.err
            .contains(&format!("another testbed runs there: testbed {name} "))
            && r.err
                .contains(&format!("socket /run/weft/{name}/leaf1/redis.sock")),
        "{}",
        r.err
    );
    // Taking the second one down leaves the first one's sockets alone.
    let r = weft(&["testbed", "down", &second, "--state-dir", &state("b")]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.out.contains(&format!("/run/weft/{name}/")), "{}", r.out);
    let r = weft(&["testbed", "status", &first, "--state-dir", &state("a")]);
    assert_eq!(r.code, 0, "the first still runs and answers\n{r:?}");
    let r = weft(&["apply", &first, "--no-wait"]);
    assert_eq!(r.code, 0, "its DBs answer\n{r:?}");
    let r = weft(&["testbed", "down", &first, "--state-dir", &state("a")]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !std::path::Path::new(&format!("/run/weft/{name}")).exists(),
        "{}",
        r.out
    );
    drop(beds);
    let _ = std::fs::remove_dir_all(dir);
}
