//! Shared by the testbed scenarios: the SKIPPED/required policy and the root check.

/// A BMv2 scenario that cannot run: a failure where BMv2 is installed (unless
/// `WEFT_REQUIRE_BMV2=0`) or under `WEFT_REQUIRE_BMV2=1`, else a loud SKIPPED line; recorded in
/// `scripts/test.sh`'s ledger either way (`weft_tests::bmv2`).
pub fn skip_or_fail(test: &str, why: &str) {
    weft_tests::bmv2::skip_or_fail(test, why);
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

/// A private copy of the small leaf-spine example for one test: its own fabric name (so its
/// namespaces do not clash) and its own DB socket directory. Returns (dir, fabric, intent text).
pub fn small_example(prefix: &str) -> (std::path::PathBuf, String, String) {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("weft-{prefix}-{pid}"));
    std::fs::create_dir_all(&dir).expect("test directory");
    let fabric = format!("{prefix}{}", pid % 100_000);
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topology/examples/leaf-spine-small.yaml"
    ))
    .expect("example")
    .replace("name: small", &format!("name: {fabric}"))
    .replace(
        "    p4rt_address: 127.0.0.1:9559\n",
        &format!(
            "    p4rt_address: 127.0.0.1:9559\n    db_socket_dir: {}/db\n",
            dir.display()
        ),
    );
    (dir, fabric, text)
}

pub mod bed;
pub mod browser;
pub mod stats;
pub mod transport;
