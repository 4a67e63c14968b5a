//! The alerting rules through Prometheus's own tool: `promtool check rules` accepts the file
//! `weft_telemetry::rules` writes, and `promtool test rules` runs `tests/rules/weft-alerts.test.yml`
//! — per alert, series that make it fire (and, where a `for:` applies, not yet fire) with the
//! labels and annotations it must carry. Every alert the generator writes has a test there, and
//! every series the tests feed is a family the plugin or `weft run` serves (or `up`), with the
//! reconvergence bucket edge as the registry really encodes it.
//!
//! promtool comes with Debian's prometheus package (scripts/setup.sh); without it the test
//! prints SKIPPED, unless WEFT_REQUIRE_PROMTOOL=1 (scripts/test.sh sets it).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use weft_telemetry::metrics::{CONTROLLER_FAMILIES, ControllerMetrics, PLUGIN_FAMILIES, encode};
use weft_telemetry::rules::{RuleOptions, alerts, rules_yaml};

const TESTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/rules/weft-alerts.test.yml"
);

fn promtool() -> Option<&'static str> {
    let p = "/usr/bin/promtool";
    if Path::new(p).exists() {
        return Some(p);
    }
    let why = "promtool not installed (Debian's prometheus package; scripts/setup.sh)";
    if std::env::var_os("WEFT_REQUIRE_PROMTOOL").is_some_and(|v| v == "1") {
        panic!("WEFT_REQUIRE_PROMTOOL=1 but {why}");
    }
    println!("SKIPPED: alert_rules: {why}");
    None
}

#[test]
fn every_alert_has_a_promtool_test_fed_only_with_served_families() {
    let tests = std::fs::read_to_string(TESTS).expect("the rule tests");
    let named: BTreeSet<&str> = tests
        .lines()
        .filter_map(|l| l.trim().strip_prefix("alertname: "))
        .collect();
    for a in alerts(&RuleOptions::default()).expect("rules") {
        assert!(named.contains(a.name), "{} has no test in {TESTS}", a.name);
    }
    let families: BTreeSet<&str> = PLUGIN_FAMILIES
        .iter()
        .chain(CONTROLLER_FAMILIES)
        .map(|f| f.name)
        .collect();
    for l in tests.lines() {
        let Some(s) = l.trim().strip_prefix("- series: ") else {
            continue;
        };
        let name = s.trim_matches('\'').split('{').next().unwrap_or_default();
        let base = name
            .strip_suffix("_bucket")
            .or_else(|| name.strip_suffix("_count"))
            .unwrap_or(name);
        assert!(
            base == "up" || families.contains(base),
            "{name} is fed to the rules but not served"
        );
    }
    // The bucket edge the slow-reconvergence rule compares with is one the registry encodes.
    let m = ControllerMetrics::new(["leaf1"]);
    m.reconverged(2000.0);
    let text = encode(&m.registry());
    assert!(text.contains("le=\"1.024\""), "{text}");
    assert!(tests.contains("le=\"1.024\""));
}

#[test]
fn promtool_checks_the_rules_and_their_tests_pass() {
    let Some(promtool) = promtool() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("weft-alert-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let rules = dir.join("weft-alerts.yml");
    std::fs::write(
        &rules,
        rules_yaml(
            &RuleOptions::default(),
            "written by telemetry/tests/alert_rules.rs",
        )
        .expect("yaml"),
    )
    .expect("rules");
    std::fs::copy(TESTS, dir.join("weft-alerts.test.yml")).expect("tests");
    let check = Command::new(promtool)
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .expect("promtool");
    let out = String::from_utf8_lossy(&check.stdout).into_owned()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "promtool check rules:\n{out}");
    assert!(out.contains("SUCCESS: 12 rules found"), "{out}");
    let test = Command::new(promtool)
        .args(["test", "rules", "weft-alerts.test.yml"])
        .current_dir(&dir)
        .output()
        .expect("promtool");
    let out =
        String::from_utf8_lossy(&test.stdout).into_owned() + &String::from_utf8_lossy(&test.stderr);
    println!("{out}");
    assert!(test.status.success(), "promtool test rules:\n{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
