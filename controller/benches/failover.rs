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
//! the summary's losses are all of them (those within [−5, +200] ms of the pull shown apart;
//! "sent" is what the sender's kernel accepted, so a lost tail counts too), and a trial whose
//! reconvergence `weft run` did not log makes the controller's p99 unknown rather than leaving
//! the trial out. So that a loss or a gap can be placed, each trial also prints the largest
//! gap by the kernel's receive timestamps (a receiver scheduled late does not widen it) and
//! where it began, every send more than 2 ms behind the sender's schedule, and the kernel's
//! packet counters per hop (each switch's ports in and out, drops on the cables). Trials
//! rotate over the four leaves; between trials the cable is plugged back and the bench waits
//! until `weft run` uses the link again. `WEFT_BENCH_TRIALS` (default 10) sets the trials per
//! load; `WEFT_BENCH_PLUGIN_ARGS` adds arguments to every plugin (to compare settings); the
//! CPU BMv2 and the plugins use with no traffic is printed before the trials.
//! `WEFT_BENCH_KEEP=DIR` keeps the logs (plugins, BMv2, `weft run`, every trial's
//! datagrams) in DIR; `WEFT_BENCH_TRANSPORT=zmq` has `weft run` write over SONiC's ZMQ channel
//! (default `redis`).

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
    /// Lost elsewhere in the stream, the tail after the last arrival included.
    lost_elsewhere: u64,
    /// Every run of lost packets.
    runs: Vec<Run>,
    /// Datagrams the sender's kernel accepted (`None`: the sender did not report).
    sent: Option<u64>,
    /// The largest gap between arrivals as the receiving process read them.
    gap_ms: f64,
    /// The same by the kernel's receive timestamps, and when it began relative to the pull.
    kernel_gap_ms: f64,
    kernel_gap_at_ms: Option<f64>,
    /// The sender's furthest lag behind its schedule, and its sends more than 2 ms late
    /// (relative to the pull, ms; how late, ms).
    sender_late_ms: f64,
    late: Vec<(f64, f64)>,
    /// The failover's loss window: from the last packet sent before its loss to the first sent
    /// after it that arrived (sender's clock; 0 without loss).
    outage_ms: f64,
    /// From pulling the cable to the start of that window.
    outage_after_pull_ms: Option<f64>,
    controller_ms: Option<f64>,
    /// How long the commands that pulled the cable took (it went down within that time).
    pull_ms: f64,
    /// Where packets went during the trial, by the kernel's interface counters.
    hops: String,
}

/// A run of lost packets: where it began relative to the pull, how many, how long (sender's
/// clock), and what preceded it.
#[derive(Debug, Clone)]
struct Run {
    at_ms: f64,
    lost: u64,
    ms: f64,
    delay_before_ms: Option<f64>,
    burst_before: Option<u32>,
}

impl Run {
    /// What the evidence before it says: a switch's queue had built up (the path's delay was
    /// over 5 ms, against well under 1 ms unloaded), or the sender had just caught up on its
    /// schedule in a burst (10 or more of its 20 sends before less than 0.2 ms apart).
    fn cause(&self) -> &'static str {
        let backlog = self.delay_before_ms.is_some_and(|d| d > 5.0);
        let burst = self.burst_before.is_some_and(|b| b >= 10);
        match (backlog, burst) {
            (true, true) => "after a switch backlog and a sender burst",
            (true, false) => "after a switch backlog",
            (false, true) => "after a sender burst",
            (false, false) => "path idle before it",
        }
    }
}

/// Kernel packet counters of every interface in a namespace: name → (rx, tx, rx dropped,
/// tx dropped).
type Counters = std::collections::BTreeMap<String, [u64; 4]>;

fn counters(netns: &str) -> Counters {
    let out = Command::new("ip")
        .args(["-n", netns, "-s", "-j", "link", "show"])
        .output()
        .expect("ip -s -j link");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut m = Counters::new();
    for i in v.as_array().into_iter().flatten() {
        let s = &i["stats64"];
        let n = |d: &str, f: &str| s[d][f].as_u64().unwrap_or(0);
        if let Some(name) = i["ifname"].as_str() {
            m.insert(
                name.to_string(),
                [
                    n("rx", "packets"),
                    n("tx", "packets"),
                    n("rx", "dropped"),
                    n("tx", "dropped"),
                ],
            );
        }
    }
    m
}

/// The counters a trial's hop accounting reads: the switches' namespace, the cables', and the
/// two hosts'.
struct Snapshot {
    fabric: Counters,
    wires: Counters,
    src: Counters,
    dst: Counters,
}

fn snapshot(st: &tb::State, src: &str, dst: &str) -> Snapshot {
    let host = |h: &str| st.host(h).map(|h| h.netns.clone()).unwrap_or_default();
    Snapshot {
        fabric: counters(&st.netns),
        wires: counters(&tb::wires_netns(&st.fabric)),
        src: counters(&host(src)),
        dst: counters(&host(dst)),
    }
}

fn delta(a: &Counters, b: &Counters, ifaces: &[&String], k: usize) -> u64 {
    ifaces
        .iter()
        .map(|i| {
            let (x, y) = (a.get(*i).map_or(0, |c| c[k]), b.get(*i).map_or(0, |c| c[k]));
            y.saturating_sub(x)
        })
        .sum()
}

/// Per hop: what the source host sent, what each switch took in and put out over all its
/// ports (what BMv2 dropped or still held is the difference), drops the kernel counted on the
/// cables, and what the destination host received.
fn hops(st: &tb::State, a: &Snapshot, b: &Snapshot) -> String {
    let eth = |c: &Counters| c.keys().filter(|k| *k != "lo").cloned().collect::<Vec<_>>();
    let src_if = eth(&b.src);
    let dst_if = eth(&b.dst);
    let mut parts = vec![format!(
        "src tx {}",
        delta(&a.src, &b.src, &src_if.iter().collect::<Vec<_>>(), 1)
    )];
    for sw in &st.switches {
        let ifs: Vec<&String> = sw.interfaces.values().collect();
        let (rx, tx) = (
            delta(&a.fabric, &b.fabric, &ifs, 0),
            delta(&a.fabric, &b.fabric, &ifs, 1),
        );
        let dropped = delta(&a.fabric, &b.fabric, &ifs, 2) + delta(&a.fabric, &b.fabric, &ifs, 3);
        if rx + tx > 0 {
            parts.push(format!(
                "{} in {rx} out {tx}{}",
                sw.name,
                if dropped > 0 {
                    format!(" (kernel dropped {dropped})")
                } else {
                    String::new()
                }
            ));
        }
    }
    let w: Vec<&String> = b.wires.keys().collect();
    let wire_drops = delta(&a.wires, &b.wires, &w, 2) + delta(&a.wires, &b.wires, &w, 3);
    parts.push(format!("cables dropped {wire_drops}"));
    parts.push(format!(
        "dst rx {}",
        delta(&a.dst, &b.dst, &dst_if.iter().collect::<Vec<_>>(), 0)
    ));
    parts.join("; ")
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
    let before = snapshot(st, &src, &dst);
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
    let after = snapshot(st, &src, &dst);
    keep_packet_log(g, st, &src, &dst, i);
    let link = format!("{src_leaf}:{}", t.port);
    let controller_ms = logged_reconvergence(&events, seen, &link);
    tb::set_link(st, &src_leaf, &t.port, true).expect("link up");
    wait("the link back in use", Duration::from_secs(60), || {
        all_links_in_use(&g.dir)
    });
    let pulled = t.pulled_at_unix_ms;
    let r = &t.result;
    let (mut lost, mut window, mut window_from) = (0, 0.0f64, None);
    for run in &r.loss_runs {
        let d = run.from_unix_ms - pulled;
        if (FAILOVER_WINDOW.0..=FAILOVER_WINDOW.1).contains(&d) {
            lost += run.lost;
            if run.ms > window {
                (window, window_from) = (run.ms, Some(d));
            }
        }
    }
    let sent = r.sender.as_ref().map(|s| s.sent);
    // All that did not arrive: the receiver's runs miss a tail lost after its last arrival.
    let all_lost = sent.map_or(r.lost, |n| n.saturating_sub(r.unique).max(r.lost));
    Trial {
        link,
        lost,
        lost_elsewhere: all_lost.saturating_sub(lost),
        runs: r
            .loss_runs
            .iter()
            .map(|x| Run {
                at_ms: x.from_unix_ms - pulled,
                lost: x.lost,
                ms: x.ms,
                delay_before_ms: x.delay_before_ms,
                burst_before: x.burst_before,
            })
            .collect(),
        sent,
        gap_ms: r.max_gap_ms.unwrap_or(f64::NAN),
        kernel_gap_ms: r.max_kernel_gap_ms.unwrap_or(f64::NAN),
        kernel_gap_at_ms: r.kernel_gap_from_unix_ms.map(|x| x - pulled),
        sender_late_ms: r.sender.as_ref().map_or(f64::NAN, |s| s.max_late_ms),
        late: r
            .sender
            .iter()
            .flat_map(|s| &s.late)
            .map(|l| (l.unix_ms - pulled, l.late_ms))
            .collect(),
        outage_ms: window,
        outage_after_pull_ms: window_from,
        controller_ms,
        pull_ms: t.pull_done_unix_ms - pulled,
        hops: hops(st, &before, &after),
    }
}

/// The reconvergence of `link` that `weft run` logged after line `seen` of its events log
/// (waits up to 10 s for it).
fn logged_reconvergence(events: &Path, seen: usize, link: &str) -> Option<f64> {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(events).unwrap_or_default();
        let found = text
            .lines()
            .skip(seen)
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["changes"].to_string().contains(&format!("{link} ")))
            .and_then(|v| v["total_ms"].as_f64());
        if found.is_some() || t0.elapsed() > Duration::from_secs(10) {
            return found;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every datagram of trial `i` (sequence, sent, kernel arrival, read), kept with the logs.
fn keep_packet_log(g: &Guard, st: &tb::State, src: &str, dst: &str, i: usize) {
    let log = st
        .state_dir
        .join(format!("stream-{src}-{dst}-5000.packets.csv"));
    let n = std::fs::read_dir(&g.dir).map_or(0, |d| d.count());
    let _ = std::fs::copy(&log, g.dir.join(format!("trial-{n:03}-{i}-packets.csv")));
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
    let kgap: Vec<f64> = trials.iter().map(|t| t.kernel_gap_ms).collect();
    let late: Vec<f64> = trials.iter().map(|t| t.sender_late_ms).collect();
    let window: Vec<f64> = trials.iter().map(|t| t.outage_ms).collect();
    let ctl: Vec<f64> = trials.iter().filter_map(|t| t.controller_ms).collect();
    let unlogged = trials.len() - ctl.len();
    // A trial without a logged reconvergence is not a fast one: with any, the tail is unknown.
    let ctl_p99 = if unlogged == 0 {
        format!("{:>6.1} ms", percentile(ctl.clone(), 0.99))
    } else {
        format!("unknown ({unlogged} of {} not logged)", trials.len())
    };
    // The loss outside the failover's window, by what preceded each run.
    let mut causes = std::collections::BTreeMap::<&str, u64>::new();
    for r in trials.iter().flat_map(|t| &t.runs) {
        if !(FAILOVER_WINDOW.0..=FAILOVER_WINDOW.1).contains(&r.at_ms) {
            *causes.entry(r.cause()).or_default() += r.lost;
        }
    }
    let tail: u64 = trials
        .iter()
        .map(|t| {
            let in_runs: u64 = t.runs.iter().map(|r| r.lost).sum();
            (t.lost + t.lost_elsewhere).saturating_sub(in_runs)
        })
        .sum();
    let causes: Vec<String> = causes
        .iter()
        .map(|(c, n)| format!("{n} {c}"))
        .chain((tail > 0).then(|| format!("{tail} after the last arrival")))
        .collect();
    println!(
        "{load:<16} lost elsewhere, by what preceded each run: {}",
        if causes.is_empty() {
            "none".to_string()
        } else {
            causes.join(", ")
        }
    );
    println!(
        "{load:<16} {:>3} trials | lost (all) p50 {:>4} p99 {:>4}, of it within [-5, +200] ms of the pull p50 {:>4} p99 {:>4}; \
         elsewhere {elsewhere} packets in {with_elsewhere} trials | loss window p50 {:>6.1} ms p99 {:>6.1} ms | \
         arrival gap p50 {:>6.1} ms p99 {:>6.1} ms (by kernel timestamps p50 {:>6.1} p99 {:>6.1}) | \
         sender behind schedule p99 {:>6.1} ms | controller p50 {:>6.1} ms p99 {ctl_p99}",
        trials.len(),
        percentile(all.clone(), 0.5),
        percentile(all, 0.99),
        percentile(lost.clone(), 0.5),
        percentile(lost, 0.99),
        percentile(window.clone(), 0.5),
        percentile(window, 0.99),
        percentile(gap.clone(), 0.5),
        percentile(gap, 0.99),
        percentile(kgap.clone(), 0.5),
        percentile(kgap, 0.99),
        percentile(late, 0.99),
        percentile(ctl, 0.5),
    );
}

/// What the switches and the plugins cost with no traffic at all, over `d`: the plugins' polls
/// of their switch (counters, tuning samples, status) run whether or not packets flow, and on
/// a shared machine every CPU second BMv2 spends on them is one its packet threads wait for.
fn idle_cpu(st: &tb::State, d: Duration) -> String {
    let of = |kind: &str| -> Vec<u32> {
        st.processes
            .iter()
            .filter(|p| p.log.file_name().is_some_and(|n| n == kind))
            .map(|p| p.pid)
            .collect()
    };
    let (bm, pl) = (of("bmv2.log"), of("plugin.log"));
    let sum = |pids: &[u32]| {
        pids.iter()
            .map(|p| weft_tests::process::cpu_seconds(*p))
            .sum::<f64>()
    };
    let (b0, p0) = (sum(&bm), sum(&pl));
    std::thread::sleep(d);
    let (b1, p1) = (sum(&bm), sum(&pl));
    let pct = |x: f64, n: usize| 100.0 * x / d.as_secs_f64() / n.max(1) as f64;
    format!(
        "idle, no traffic, over {:.0} s: BMv2 {:.1}% of a core per switch ({} switches), plugins {:.1}% per plugin",
        d.as_secs_f64(),
        pct(b1 - b0, bm.len()),
        bm.len(),
        pct(p1 - p0, pl.len())
    )
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
        .map(|x| {
            format!(
                "{} at {:+.1} ms ({:.1} ms; path delay before {}, {} of 20 sends before in a burst: {})",
                x.lost,
                x.at_ms,
                x.ms,
                x.delay_before_ms
                    .map_or("?".to_string(), |d| format!("{d:.1} ms")),
                x.burst_before.map_or("?".to_string(), |b| b.to_string()),
                x.cause()
            )
        })
        .collect();
    let mut late: Vec<String> = r
        .late
        .iter()
        .take(20)
        .map(|(at, ms)| format!("{at:+.1} ms ({ms:.1} ms late)"))
        .collect();
    if r.late.len() > 20 {
        late.push(format!("and {} more", r.late.len() - 20));
    }
    let list = |v: Vec<String>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    println!(
        "  {load:<14} #{i:<2} {:<18} lost {:>3} (+{} elsewhere) of {}  loss window {:>6.1} ms{}  arrival gap {:>6.1} ms (kernel {:.1} ms{})  controller {}  (load {})",
        r.link,
        r.lost,
        r.lost_elsewhere,
        r.sent
            .map_or("? (sender did not report)".to_string(), |n| n.to_string()),
        r.outage_ms,
        r.outage_after_pull_ms
            .map_or(String::new(), |d| format!(" (from {d:+.1} ms)")),
        r.gap_ms,
        r.kernel_gap_ms,
        r.kernel_gap_at_ms
            .map_or(String::new(), |d| format!(" at {d:+.1} ms")),
        r.controller_ms
            .map_or("not logged".to_string(), |c| format!("{c:.1} ms")),
        load_average(),
    );
    println!(
        "  {:<18} every loss (relative to the start of the pull, which took {:.1} ms): {}",
        "",
        r.pull_ms,
        list(runs)
    );
    println!(
        "  {:<18} sender at most {:.1} ms behind; sends > 2 ms late: {}",
        "",
        r.sender_late_ms,
        list(late)
    );
    println!("  {:<18} hops: {}", "", r.hops);
}

/// Starts `weft run` on a testbed where nothing is installed yet (the fresh plugins hold an
/// empty pipeline): `weft run` from an empty fabric on real switches. Returns the seconds to
/// its "converged" line.
fn run_from_empty(g: &mut Guard, weft: &Path, file: &Path) -> f64 {
    let t_run = Instant::now();
    g.run = Some(start_run(weft, file, &g.dir));
    // Polled every 10 ms, finer than `wait`'s 200 ms.
    while !std::fs::read_to_string(g.dir.join("run.log"))
        .is_ok_and(|l| l.contains("converged; following port state"))
    {
        assert!(
            t_run.elapsed() < Duration::from_secs(120),
            "weft run did not converge on the empty testbed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    t_run.elapsed().as_secs_f64()
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
            // For comparisons, e.g. WEFT_BENCH_PLUGIN_ARGS="--tuning-interval 0".
            plugin_args: std::env::var("WEFT_BENCH_PLUGIN_ARGS")
                .unwrap_or_default()
                .split_whitespace()
                .map(String::from)
                .collect(),
            db_only: false,
            acl: false,
            tls: false,
        },
    )
    .expect("testbed up");
    let from_empty = run_from_empty(&mut g, &weft, &file);
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
    println!(
        "weft run, empty fabric (fresh plugins and BMv2 switches, nothing installed) to converged: \
         {from_empty:.2} s"
    );
    println!("{}", idle_cpu(&st, Duration::from_secs(5)));
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
