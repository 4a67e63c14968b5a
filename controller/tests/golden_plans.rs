//! Golden files: the offline plan (every P4RT_TABLE entry, CONFIG_DB row and route view) of
//! each example, and of the small example with a link down. A change to the compiler shows up
//! as a reviewable diff; `WEFT_REGEN=1 cargo test -p weft-controller --test golden_plans`
//! rewrites them.

use std::path::Path;
use std::process::Command;

fn check(name: &str, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .output()
        .expect("run weft");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The command streams compact JSON; the golden file is pretty, for reviewable diffs.
    let value: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("plan output is one JSON document");
    let got = serde_json::to_string_pretty(&value).expect("json") + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("WEFT_REGEN").is_some() {
        std::fs::write(&path, &got).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if want != got {
        let first = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "{} differs from the compiler's output at line {} (regenerate with WEFT_REGEN=1 after reviewing):\n  want: {}\n  got:  {}",
            path.display(),
            first + 1,
            want.lines().nth(first).unwrap_or("<end>"),
            got.lines().nth(first).unwrap_or("<end>")
        );
    }
}

fn example(name: &str) -> String {
    format!("{}/../topology/examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn small_leaf_spine_plan_matches_its_golden_file() {
    check(
        "leaf-spine-small.plan.json",
        &[
            "plan",
            &example("leaf-spine-small.yaml"),
            "--offline",
            "--output",
            "json",
        ],
    );
}

#[test]
fn trimmed_leaf_spine_plan_matches_its_golden_file() {
    // RoCE lossy with packet trimming: SWITCH_TRIMMING|GLOBAL, the trim buffer profile on every
    // RoCE queue, DSCP 11 toward queue 7, no PFC.
    check(
        "leaf-spine-trim.plan.json",
        &[
            "plan",
            &example("leaf-spine-trim.yaml"),
            "--offline",
            "--output",
            "json",
        ],
    );
}

#[test]
fn small_leaf_spine_plan_with_a_link_down_matches_its_golden_file() {
    check(
        "leaf-spine-small.leaf1-Ethernet8-down.plan.json",
        &[
            "plan",
            &example("leaf-spine-small.yaml"),
            "--offline",
            "--down",
            "leaf1:Ethernet8",
            "--output",
            "json",
        ],
    );
}

#[test]
fn fat_tree_k4_plan_matches_its_golden_file() {
    check(
        "fat-tree-k4.plan.json",
        &[
            "plan",
            &example("fat-tree-k4.yaml"),
            "--offline",
            "--output",
            "json",
        ],
    );
}
