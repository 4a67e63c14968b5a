//! Shared by the testbed scenarios: the SKIPPED/required policy and the root check.

/// Without BMv2 (or root) a scenario prints a loud SKIPPED line and passes, unless
/// WEFT_REQUIRE_BMV2=1 asks for a failure instead.
pub fn skip_or_fail(test: &str, why: &str) {
    if std::env::var_os("WEFT_REQUIRE_BMV2").is_some_and(|v| v == "1") {
        panic!("WEFT_REQUIRE_BMV2=1 but {why}");
    }
    println!("SKIPPED: {test}: {why}");
    eprintln!("SKIPPED: {test}: {why}");
}

/// Network namespaces and veths need root.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}
