//! Every intent under tests/invalid/ must be rejected by `weft validate` with exit status 2 and
//! each message its `# expect:` header names; every example must be accepted.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn weft(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .output()
        .expect("run weft");
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

#[test]
fn each_invalid_intent_is_rejected_with_its_expected_message_and_exit_status_2() {
    let files = yaml_files(&repo().join("tests/invalid"));
    assert!(
        files.len() >= 30,
        "the corpus must hold at least 30 invalid intents, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read corpus file");
        let expects: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# expect: "))
            .collect();
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
        for e in &expects {
            if !stderr.contains(e) {
                failures.push(format!("{path}: missing {e:?} in:\n{stderr}"));
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

#[test]
fn all_errors_of_one_file_are_reported_in_one_run() {
    let f = repo().join("tests/invalid/14-port-in-two-links.yaml");
    let (code, _, stderr) = weft(&["validate", &f.to_string_lossy()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("2 error(s)"), "{stderr}");
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
