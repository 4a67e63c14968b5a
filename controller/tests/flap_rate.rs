//! Flap storm at rate: one link flaps (its STATE_DB PORT_TABLE oper_status down, up) at
//! WEFT_FLAP_PER_MIN flaps a minute (default 1,000) for WEFT_FLAP_SECONDS (default 20 here; the
//! issue's run: `WEFT_FLAP_SECONDS=600 cargo test -p weft-controller --test flap_rate --
//! --nocapture`) with `weft run` up against real redis-servers and stand-in plugins. Proves:
//! the controller's memory does not grow with the flaps (the least-squares slope of RSS, sampled
//! every second, against the flaps made, is below [`MAX_BYTES_PER_FLAP`] plus what page-sized
//! steps can fake over the run), its writes stay bounded by
//! the damping parameters (once suppressed or held down, flaps cost nothing), and after the
//! storm the fabric ends where a fresh `weft plan` has nothing to do.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/stand_in.rs"]
mod stand_in_plugin;

use stand_in_plugin::stand_in;
use weft_sonic_db::{SonicDb, SonicDbId, Table};

const SWITCHES: [&str; 6] = ["spine1", "spine2", "leaf1", "leaf2", "leaf3", "leaf4"];
/// What a flap may cost in memory for good: at 1,000 flaps a minute, 64 bytes a flap would be
/// 92 MB a day.
const MAX_BYTES_PER_FLAP: f64 = 64.0;
/// RSS moves in pages and allocator arenas: one step of this much in the middle of the run is
/// noise, not a slope. Least squares fit such a step as 1.5 × step / flaps; that is what the
/// bound allows on top, so it tightens with the run (20 s: ~1.2 KiB a flap; 10 minutes: ~100 B).
const RSS_STEP_BYTES: f64 = 256.0 * 1024.0;
/// Samples from the first seconds of the storm are left out: the first flaps allocate what
/// the damping state keeps for the link.
const WARMUP_S: f64 = 2.0;

/// Least-squares slope of `y` over `x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mx, my) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

fn rss_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn env_num(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Run(Child);
impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_link_flapping_1000_times_a_minute_leaves_memory_flat_writes_bounded_and_the_end_state_right() {
    let per_min = env_num("WEFT_FLAP_PER_MIN", 1000.0).max(1.0);
    let seconds = env_num("WEFT_FLAP_SECONDS", 20.0).max(1.0);
    let (name, dir) = stand_in_plugin::scratch("fr");
    struct Rm(PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _rm = Rm(dir.clone());
    let dbs = stand_in_plugin::redis_servers(SWITCHES.len());
    let urls: Vec<String> = dbs.iter().map(|r| r.url()).collect();
    let file = stand_in_plugin::example_on(&name, &dir, &SWITCHES, &urls);
    let f = file.to_string_lossy().into_owned();
    let t = weft_topology::load_file(&f).expect("intent loads");
    let max_suppress = t.failover.dampening.max_suppress.to_std();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    for r in &dbs {
        rt.spawn(stand_in(r.url()));
    }
    let status = dir.join("run.json");
    let run = Run(Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["run", &f, "--resync", "600s", "--status-file"])
        .arg(&status)
        .env_remove("WEFT_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("run.log")).expect("log"))
        .spawn()
        .expect("weft run"));
    let pid = run.0.id();
    let read_status = || -> serde_json::Value {
        std::fs::read_to_string(&status)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    };
    let settled = |s: &serde_json::Value| {
        s["switches_converged"].as_u64() == Some(6)
            && s["links"]
                .as_array()
                .is_some_and(|ls| ls.iter().all(|l| l["in_use"] == true))
    };
    let t0 = Instant::now();
    while !settled(&read_status()) {
        assert!(t0.elapsed() < Duration::from_secs(90), "weft run converges");
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = read_status();
    let writes0 = before["writes"].as_u64().unwrap_or(0);
    let recs0 = before["reconvergences"].as_u64().unwrap_or(0);

    // leaf1:Ethernet8 is cabled to spine1: flap leaf1's end.
    let leaf1 = SonicDb::from_endpoint(&dbs[2].url()).expect("leaf1 db");
    let ports = rt.block_on(async {
        Table::new(
            leaf1.connect(SonicDbId::StateDb).await.expect("state"),
            "PORT_TABLE",
        )
        .expect("table")
    });
    let set = |up: bool| {
        rt.block_on(ports.replace(
            "Ethernet8",
            &[
                ("oper_status", if up { "up" } else { "down" }),
                ("admin_status", "up"),
            ],
        ))
        .expect("PORT_TABLE write");
    };
    let period = Duration::from_secs_f64(60.0 / per_min);
    let storm = Duration::from_secs_f64(seconds);
    // (seconds into the storm, flaps made, RSS KiB)
    let mut rss: Vec<(f64, u64, u64)> = Vec::new();
    let mut flaps = 0u64;
    let start = Instant::now();
    let mut next_sample = Duration::ZERO;
    while start.elapsed() < storm {
        let at = period * flaps as u32;
        if let Some(wait) = at.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        set(false);
        std::thread::sleep(period / 2);
        set(true);
        flaps += 1;
        if start.elapsed() >= next_sample {
            if let Some(kib) = rss_kib(pid) {
                rss.push((start.elapsed().as_secs_f64(), flaps, kib));
            }
            next_sample += Duration::from_secs(1);
        }
    }
    let took = start.elapsed().as_secs_f64();
    let during = read_status();
    let writes = during["writes"].as_u64().unwrap_or(0) - writes0;
    let recs = during["reconvergences"].as_u64().unwrap_or(0) - recs0;
    // The storm over, the link stays up: it is used again after reuse or max_suppress, and
    // hold-down.
    let t1 = Instant::now();
    let plan_clean = loop {
        let s = read_status();
        if settled(&s) {
            let out = Command::new(env!("CARGO_BIN_EXE_weft"))
                .args(["plan", &f, "--detailed-exitcode"])
                .stdin(Stdio::null())
                .output()
                .expect("weft plan");
            if out.status.code() == Some(0) {
                break true;
            }
        }
        if t1.elapsed() > max_suppress + Duration::from_secs(60) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let restored = t1.elapsed().as_secs_f64();
    let n = rss.len();
    let first = rss[..n.div_ceil(4).max(1)]
        .iter()
        .map(|x| x.2)
        .max()
        .unwrap_or(0);
    let last = rss[n - n.div_ceil(4).max(1)..]
        .iter()
        .map(|x| x.2)
        .max()
        .unwrap_or(0);
    let peak = rss.iter().map(|x| x.2).max().unwrap_or(0);
    let fit: Vec<(f64, f64)> = rss
        .iter()
        .filter(|x| x.0 >= WARMUP_S)
        .map(|x| (x.1 as f64, x.2 as f64 * 1024.0))
        .collect();
    let span = fit.last().map_or(0.0, |l| l.0) - fit.first().map_or(0.0, |f| f.0);
    let per_flap = slope(&fit);
    let bound = MAX_BYTES_PER_FLAP + 1.5 * RSS_STEP_BYTES / span.max(1.0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!(
        "flap storm: {flaps} flaps in {took:.0} s ({:.0}/min) on leaf1:Ethernet8; weft run RSS first quarter max {first} KiB, last quarter max {last} KiB, peak {peak} KiB ({n} samples); RSS slope {per_flap:.1} bytes per flap over {span:.0} flaps (bound {bound:.1}); during the storm {recs} reconvergences, {writes} entries written; link back in use and plan clean {restored:.1} s after the storm; load {}",
        flaps as f64 * 60.0 / took,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert!(plan_clean, "after the storm a fresh plan has nothing to do");
    assert!(
        fit.len() >= 5,
        "too few RSS samples after the first {WARMUP_S} s: {rss:?}"
    );
    assert!(
        per_flap <= bound,
        "RSS grows {per_flap:.1} bytes per flap (bound {bound:.1}): {rss:?}"
    );
    // Bounded by damping: the link goes out of use once, and at most comes back and goes out
    // again once per max_suppress (hold-down keeps a flapping link out even then).
    let cycles = 2 + 2 * (took / max_suppress.as_secs_f64()).ceil() as u64;
    assert!(
        recs <= cycles,
        "{recs} reconvergences in {took:.0} s: damping bounds them by {cycles}"
    );
    let per = before["last"]["entries_written"]
        .as_u64()
        .unwrap_or(0)
        .max(40);
    assert!(
        writes <= cycles * per,
        "{writes} entries written during the storm (bound {})",
        cycles * per
    );
}
