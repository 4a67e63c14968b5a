//! The real plugin's state digests on the testbed (real BMv2, redis-server and plugin per
//! switch): after `weft apply`, every plugin publishes in its status row the digests of
//! APPL_STATE_DB and of the owned CONFIG_DB tables, equal to the ones the controller computes
//! of the desired state, so `weft plan` reads no switch's rows and finds nothing to do; a hand
//! edit of an owned CONFIG_DB row changes that plugin's digest and the plan reads that switch
//! and names the row.
//!
//! Needs root and BMv2; without them it prints SKIPPED (WEFT_REQUIRE_BMV2=1 fails).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::bed::{self, Bed, Needs};
use weft_compiler::{Compiler, LinkState, p4map};
use weft_sonic_db::{SonicDb, SonicDbId};
use weft_sonic_schema::state::InstalledDigests;
use weft_topology::Topology;

const TEST: &str = "scenario_plan_digest";

fn weft(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .env_remove("WEFT_LOG")
        .output()
        .expect("run weft");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// What the controller would write to every switch, as digests.
fn desired(t: &Topology) -> Vec<InstalledDigests> {
    let compiler = Compiler::new(t, LinkState::all_up(t));
    let info = p4map::pipeline_p4info().expect("P4Info");
    compiler
        .switches()
        .iter()
        .enumerate()
        .map(|(si, sw)| {
            weft_reconcile::plan::desired_switch(t, &info, sw, si)
                .expect("desired")
                .digests()
        })
        .collect()
}

fn published(rt: &tokio::runtime::Runtime, db: &str) -> Option<InstalledDigests> {
    rt.block_on(weft_reconcile::io::read_status(db))
        .ok()
        .flatten()
        .filter(|s| s.in_sync())
        .and_then(|s| s.digests())
}

async fn redis_cmd(db: &str, args: &[&str]) -> redis::RedisResult<String> {
    let sonic = SonicDb::from_endpoint(db).expect("endpoint");
    let mut c = sonic
        .connect(SonicDbId::ConfigDb)
        .await
        .map_err(|e| redis::RedisError::from(std::io::Error::other(e.to_string())))?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let v: redis::Value = cmd.query_async(c.raw()).await?;
    Ok(match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => format!("{other:?}"),
    })
}

/// SCAN calls on the switch's server since the last `CONFIG RESETSTAT`: reading its rows
/// pages through them with SCAN.
fn scans(rt: &tokio::runtime::Runtime, db: &str) -> u64 {
    let info = rt
        .block_on(redis_cmd(db, &["INFO", "commandstats"]))
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_scan:calls="))
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn real_plugins_publish_the_desired_digests_after_apply_and_plan_then_reads_no_rows() {
    let Some(programs) = bed::programs(TEST, &Needs::default()) else {
        return;
    };
    let b = Bed::up(&programs, "pdig", |t| t, &[]);
    b.apply(&b.file, "60s");
    let f = b.file.to_string_lossy().into_owned();
    let topo = &b.topo;

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let want = desired(topo);
    for (si, s) in topo.switches.iter().enumerate() {
        // The status row follows the answers `weft apply` waited for, and the CONFIG_DB change.
        wait_for(
            &format!("{}'s plugin to publish the desired digests", s.name),
            Duration::from_secs(30),
            || published(&rt, &s.db) == Some(want[si]),
        );
        // And they describe its DBs as a reader finds them.
        let read = rt
            .block_on(weft_reconcile::io::read_installed(&s.db))
            .expect("read");
        assert_eq!(read.digests(), want[si], "{}", s.name);
        assert!(want[si].entries.count() > 0 && want[si].config.count() > 0);
    }
    println!(
        "{TEST}: every plugin publishes the desired digests (e.g. {}: entries {}, config {})",
        topo.switches[0].name, want[0].entries, want[0].config
    );

    // A plan reads no rows: the plugins' own CONFIG_DB reads scan too, so wait for a quiet spell.
    let reset_when_quiet = || {
        wait_for("the DBs to go quiet", Duration::from_secs(30), || {
            for s in &topo.switches {
                rt.block_on(redis_cmd(&s.db, &["CONFIG", "RESETSTAT"]))
                    .expect("RESETSTAT");
            }
            std::thread::sleep(Duration::from_millis(500));
            topo.switches.iter().all(|s| scans(&rt, &s.db) == 0)
        })
    };
    reset_when_quiet();
    let (code, out, err) = weft(&["plan", "--detailed-exitcode", &f]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("total: 0 to add, 0 to modify, 0 to delete"),
        "{out}"
    );
    for s in &topo.switches {
        assert_eq!(scans(&rt, &s.db), 0, "{}: rows were read", s.name);
    }

    // A hand edit of an owned CONFIG_DB row: the plugin's watcher rereads CONFIG_DB, its digest
    // changes, and the plan reads that switch and names the row.
    let leaf = topo
        .switches
        .iter()
        .position(|s| s.name == "leaf1")
        .expect("leaf1");
    let db = topo.switches[leaf].db.clone();
    let row = "CABLE_LENGTH|AZURE";
    let port = &topo.switches[leaf].ports[0].name;
    let old = rt
        .block_on(redis_cmd(&db, &["HGET", row, port]))
        .expect("HGET");
    assert!(old.ends_with('m'), "{row} {port} holds a length: {old}");
    rt.block_on(redis_cmd(&db, &["HSET", row, port, "77m"]))
        .expect("HSET");
    wait_for(
        "leaf1's plugin to publish another config digest",
        Duration::from_secs(30),
        || published(&rt, &db).is_some_and(|d| d.config != want[leaf].config),
    );
    reset_when_quiet();
    let (code, out, err) = weft(&["plan", "--detailed-exitcode", "-v", &f]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains(&format!("~ {row}")), "{out}");
    assert!(out.contains(&format!("{port}: 77m →")), "{out}");
    assert!(scans(&rt, &db) > 0, "leaf1's rows were read");
    for s in topo.switches.iter().filter(|s| s.name != "leaf1") {
        assert_eq!(scans(&rt, &s.db), 0, "{}: rows were read", s.name);
    }
    // Applying again puts the row back, and the digest with it.
    let (code, out, err) = weft(&["apply", &f, "--timeout", "60s"]);
    assert_eq!(code, 0, "{out}{err}");
    wait_for(
        "leaf1's plugin to publish the desired config digest again",
        Duration::from_secs(30),
        || published(&rt, &db) == Some(want[leaf]),
    );
}
