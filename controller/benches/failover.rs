//! Failover under load: the testbed's link-down measurement, repeated, on a quiet machine and
//! with one core kept busy by a CPU hog this bench starts and stops.
//!
//! ```console
//! # cargo build --release -j2 -p weft-sonic-plugin
//! # cargo bench -j2 -p weft-controller --bench failover
//! ```
//! Needs root and BMv2 (`simple_switch_grpc` on PATH or in /opt/p4/bin). Each trial streams
//! 1,000 packets/s of one UDP flow between hosts on two leaves, finds which uplink of the
//! source leaf carries it (kernel counters), pulls that cable 1.5 s in, and records the
//! packets lost, the largest gap between arrivals, and the time `weft run` took from seeing
//! the port down to every affected switch acknowledging the delta (its events log). Every loss
//! of every trial is reported with when it began relative to the pull, and every trial counts:
//! the summary's losses are all of them (those within [−5, +200] ms of the pull shown apart),
//! and a trial whose reconvergence `weft run` did not log makes the controller's p99 unknown
//! rather than leaving the trial out. Trials
//! rotate over the four leaves; between trials the cable is plugged back and the bench waits
//! until `weft run` uses the link again. `WEFT_BENCH_TRIALS` (default 10) sets the trials per
//! load; `WEFT_BENCH_KEEP=DIR` keeps the logs (plugins, BMv2, `weft run`) in DIR;
//! `WEFT_BENCH_TRANSPORT=zmq` has `weft run` write over SONiC's ZMQ channel (default `redis`).

#[path = "../tests/common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weft_testbed as tb;

struct Guard {
    dir: PathBuf,
    fabric: String,
    run: Option<Child>,
    hog: Option<Child>,
}

impl Guard {
    fn stop_hog(&mut self) {
        if let Some(mut c) = self.hog.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop_hog();
        if let Some(mut c) = self.run.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(keep) = std::env::var_os("WEFT_BENCH_KEEP") {
            let _ = Command::new("cp")
                .arg("-r")
                .arg(&self.dir)
                .arg(&keep)
                .status();
            eprintln!("logs copied to {}", Path::new(&keep).display());
        }
        let _ = tb::down(&self.dir.join("state"), &self.fabric);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Loss that begins from 5 ms before the pull (the `ip` command's own latency is within it)
/// to 200 ms after it (the data plane's and the controller's reaction) is the failover's.
const FAILOVER_WINDOW: (f64, f64) = (-5.0, 200.0);

#[derive(Debug, Clone)]
struct Trial {
    link: String,
    /// Lost in runs that began within [`FAILOVER_WINDOW`] of the pull.
    lost: u64,
    /// Lost elsewhere in the stream.
    lost_elsewhere: u64,
    /// Every run of lost packets: (start relative to the pull, ms; packets; its length, ms).
    runs: Vec<(f64, u64, f64)>,
    sent: i64,
    gap_ms: f64,
    /// The failover's loss window: from the last packet sent before its loss to the first sent
    /// after it that arrived (sender's clock; 0 without loss).
    outage_ms: f64,
    /// From pulling the cable to the start of that window.
    outage_after_pull_ms: Option<f64>,
    controller_ms: Option<f64>,
}

/// The value below which `q` of the samples lie (nearest rank; with 10 samples p99 is the
/// worst one).
fn percentile(mut v: Vec<f64>, q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn status(dir: &Path) -> serde_json::Value {
    std::fs::read_to_string(dir.join("status.json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// Whether `weft run` counts every link as in use (none down, held down or suppressed).
fn all_links_in_use(dir: &Path) -> bool {
    status(dir)["links"]
        .as_array()
        .is_some_and(|l| l.iter().all(|x| x["in_use"] == true))
}

fn wait(what: &str, deadline: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn trial(g: &Guard, st: &tb::State, i: usize) -> Trial {
    let leaf = |n: usize| format!("leaf{}", n % 4 + 1);
    let (src_leaf, dst_leaf) = (leaf(i), leaf(i + 2));
    let (src, dst) = (format!("{src_leaf}-h1"), format!("{dst_leaf}-h1"));
    let uplinks = tb::uplinks(st, &src_leaf);
    let events = g.dir.join("events.jsonl");
    let seen = std::fs::read_to_string(&events)
        .map(|s| s.lines().count())
        .unwrap_or(0);
    let t = tb::failover_trial(
        st,
        &tb::Stream {
            src: &src,
            dst: &dst,
            port: 5000,
            pps: 1000,
            seconds: 3.0,
            flows: 1,
        },
        &src_leaf,
        &uplinks,
        Duration::from_millis(1500),
    )
    .expect("failover trial");
    let link = format!("{src_leaf}:{}", t.port);
    // The reconvergence of this link, logged after the trial began.
    let mut controller_ms = None;
    let t0 = Instant::now();
    while controller_ms.is_none() && t0.elapsed() < Duration::from_secs(10) {
        let text = std::fs::read_to_string(&events).unwrap_or_default();
        controller_ms = text
            .lines()
            .skip(seen)
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["changes"].to_string().contains(&format!("{link} ")))
            .and_then(|v| v["total_ms"].as_f64());
        if controller_ms.is_none() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    tb::set_link(st, &src_leaf, &t.port, true).expect("link up");
    wait("the link back in use", Duration::from_secs(60), || {
        all_links_in_use(&g.dir)
    });
    let (mut lost, mut window, mut window_from) = (0, 0.0f64, None);
    let runs = t
        .result
        .loss_runs
        .iter()
        .map(|r| (r.from_unix_ms - t.pulled_at_unix_ms, r.lost, r.ms))
        .collect();
    for r in &t.result.loss_runs {
        let d = r.from_unix_ms - t.pulled_at_unix_ms;
        if (FAILOVER_WINDOW.0..=FAILOVER_WINDOW.1).contains(&d) {
            lost += r.lost;
            if r.ms > window {
                (window, window_from) = (r.ms, Some(d));
            }
        }
    }
    Trial {
        link,
        lost,
        lost_elsewhere: t.result.lost.saturating_sub(lost),
        runs,
        sent: t.result.max_seq + 1,
        gap_ms: t.result.max_gap_ms.unwrap_or(f64::NAN),
        outage_ms: window,
        outage_after_pull_ms: window_from,
        controller_ms,
    }
}

fn summary(load: &str, trials: &[Trial]) {
    let all: Vec<f64> = trials
        .iter()
        .map(|t| (t.lost + t.lost_elsewhere) as f64)
        .collect();
    let lost: Vec<f64> = trials.iter().map(|t| t.lost as f64).collect();
    let elsewhere: u64 = trials.iter().map(|t| t.lost_elsewhere).sum();
    let with_elsewhere = trials.iter().filter(|t| t.lost_elsewhere > 0).count();
    let gap: Vec<f64> = trials.iter().map(|t| t.gap_ms).collect();
    let window: Vec<f64> = trials.iter().map(|t| t.outage_ms).collect();
    let ctl: Vec<f64> = trials.iter().filter_map(|t| t.controller_ms).collect();
    let unlogged = trials.len() - ctl.len();
    // A trial without a logged reconvergence is not a fast one: with any, the tail is unknown.
    let ctl_p99 = if unlogged == 0 {
        format!("{:>6.1} ms", percentile(ctl.clone(), 0.99))
    } else {
        format!("unknown ({unlogged} of {} not logged)", trials.len())
    };
    println!(
        "{load:<16} {:>3} trials | lost (all) p50 {:>4} p99 {:>4}, of it within [-5, +200] ms of the pull p50 {:>4} p99 {:>4}; \
         elsewhere {elsewhere} packets in {with_elsewhere} trials | loss window p50 {:>6.1} ms p99 {:>6.1} ms | \
         arrival gap p50 {:>6.1} ms p99 {:>6.1} ms | controller p50 {:>6.1} ms p99 {ctl_p99}",
        trials.len(),
        percentile(all.clone(), 0.5),
        percentile(all, 0.99),
        percentile(lost.clone(), 0.5),
        percentile(lost, 0.99),
        percentile(window.clone(), 0.5),
        percentile(window, 0.99),
        percentile(gap.clone(), 0.5),
        percentile(gap, 0.99),
        percentile(ctl, 0.5),
    );
}

/// `weft run` on the intent, its events log and status file in `dir`, its output in
/// `dir/run.log`.
fn start_run(weft: &Path, file: &Path, dir: &Path) -> Child {
    let log = std::fs::File::create(dir.join("run.log")).expect("log");
    Command::new(weft)
        .arg("run")
        .arg(file)
        .args(["--resync", "5s", "--timeout", "5s", "--events-log"])
        .arg(dir.join("events.jsonl"))
        .arg("--status-file")
        .arg(dir.join("status.json"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("weft run")
}

fn print_trial(load: &str, i: usize, r: &Trial) {
    let runs: Vec<String> = r
        .runs
        .iter()
        .map(|(at, n, ms)| format!("{n} at {at:+.1} ms ({ms:.1} ms)"))
        .collect();
    println!(
        "  {load:<14} #{i:<2} {:<18} lost {:>3} (+{} elsewhere) of {:>4}  loss window {:>6.1} ms{}  arrival gap {:>6.1} ms  controller {}  (load {})\n  {:<18} every loss: {}",
        r.link,
        r.lost,
        r.lost_elsewhere,
        r.sent,
        r.outage_ms,
        r.outage_after_pull_ms
            .map_or(String::new(), |d| format!(" (from {d:+.1} ms)")),
        r.gap_ms,
        r.controller_ms
            .map_or("not logged".to_string(), |c| format!("{c:.1} ms")),
        load_average(),
        "",
        if runs.is_empty() {
            "none".to_string()
        } else {
            runs.join(", ")
        }
    );
}

fn main() {
    // `cargo bench` passes --bench; a filter argument that is not ours means another bench
    // was asked for.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with("--") && a != "failover")
    {
        return;
    }
    let Some(bmv2) = weft_tests::bmv2::find_bmv2() else {
        common::skip_or_fail("failover bench", "BMv2 simple_switch_grpc not found");
        return;
    };
    if !common::is_root() {
        common::skip_or_fail("failover bench", "needs root for network namespaces");
        return;
    }
    let weft = PathBuf::from(env!("CARGO_BIN_EXE_weft"));
    let plugin = weft.with_file_name("weft-plugin");
    if !plugin.exists() {
        eprintln!(
            "{} not built: run `cargo build --release -j2 -p weft-sonic-plugin` first",
            plugin.display()
        );
        std::process::exit(1);
    }
    let n: usize = std::env::var("WEFT_BENCH_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let transport = match std::env::var("WEFT_BENCH_TRANSPORT").as_deref() {
        Ok("zmq") => common::transport::Transport::Zmq,
        Ok("redis") | Err(_) => common::transport::Transport::Redis,
        Ok(other) => {
            eprintln!("WEFT_BENCH_TRANSPORT={other}: expected redis or zmq");
            std::process::exit(2);
        }
    };
    let (dir, fabric, text) = common::small_example("fob");
    let file = dir.join("fabric.yaml");
    std::fs::write(&file, transport.intent(&text)).expect("intent");
    let t = weft_topology::load_file(&file).expect("valid intent");
    let mut g = Guard {
        dir: dir.clone(),
        fabric,
        run: None,
        hog: None,
    };
    let programs = tb::Programs {
        bmv2,
        redis: PathBuf::from("/usr/bin/redis-server"),
        plugin,
    };
    let st = tb::up(
        &t,
        &programs,
        &tb::UpOptions {
            state_dir: dir.join("state"),
            plugin_args: Vec::new(),
            db_only: false,
            acl: false,
            tls: false,
        },
    )
    .expect("testbed up");
    g.run = Some(start_run(&weft, &file, &dir));
    wait(
        "every host pair reachable",
        Duration::from_secs(120),
        || tb::ping_all(&st, 1).iter().all(|x| x.2),
    );
    wait("weft run using every link", Duration::from_secs(60), || {
        all_links_in_use(&dir)
    });
    println!(
        "failover bench: small leaf-spine (6 switches, 8 hosts), entries over {transport:?}, {} \
         CPUs, load average {} before the start",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );
    let mut results = Vec::new();
    for load in ["quiet", "one core busy"] {
        if load != "quiet" {
            g.hog = Some(
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("CPU hog"),
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        let mut trials = Vec::new();
        for i in 0..n {
            let r = trial(&g, &st, i);
            print_trial(load, i, &r);
            trials.push(r);
        }
        g.stop_hog();
        results.push((load, trials));
    }
    for (load, trials) in &results {
        summary(load, trials);
    }
}
