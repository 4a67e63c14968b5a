//! `weft diagnose` at fabric scale on the telemetry twin: fat-trees of k=32 (1,280 switches)
//! and k=64 (5,120 switches) whose switches' COUNTERS_DB and STATE_DB are real redis-servers
//! (switches spread over them by `?db_base=`), written as each switch's plugin writes them.
//!
//! ```console
//! # cargo bench -j2 -p weft-controller --bench twin
//! # WEFT_BENCH_K=64 WEFT_BENCH_SERVERS=8 WEFT_BENCH_WINDOWS=6 cargo bench ... --bench twin
//! # WEFT_BENCH_K= WEFT_BENCH_CAMPAIGN=32:150 cargo bench ... --bench twin
//! ```
//!
//! Real time (`WEFT_BENCH_K`, default `32,64`; `WEFT_BENCH_SERVERS` redis-servers, default 8):
//! the twin advances one second at a time and writes what its switches polled; then the
//! reader `weft diagnose --source db` uses (`weft_observe::source::db::Reader`) reads one sample
//! of every switch, from each switch's snapshot and then again row by row, the two checked equal
//! (one pipelined round trip per server of one script call per switch), and the rules judge
//! the last window of three samples. Per sample: wall time of the read, this process's CPU and
//! the servers' CPU in it (where the time goes), bytes read, the same decoding without I/O
//! (the twin's rows in hand), and the rules' time, on a healthy window and on one with a
//! spreading PFC storm, a lossy link and an incast. Peak RSS of this process and the servers.
//! `WEFT_BENCH_EXPLAIN=1` prints every finding of the faults windows with its evidence.
//!
//! Scored (`WEFT_BENCH_CAMPAIGN=K:TRIALS[:SEED]`, default `32:160`): a seeded campaign of faults,
//! one to three at once, between healthy windows under load, through the DBs, scored on every
//! finding of every window (the table the README shows).

#[path = "../tests/common/twin.rs"]
#[allow(dead_code)]
mod twin_common;

use std::time::Instant;

use twin_common::{Bed, Direct, Through, load, self_cpu};
use weft_diagnose::{Sample, Thresholds, Window};
use weft_tests::process::cpu_seconds;
use weft_twin::Config;
use weft_twin::fault::Fault;
use weft_twin::score::{Campaign, Sampler, Score, run};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Peak and current RSS of a process (MiB), from /proc.
fn rss_mib(pid: u32) -> (f64, f64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn stats(v: &[f64]) -> String {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match (v.first(), v.get(v.len() / 2), v.last()) {
        (Some(a), Some(m), Some(z)) => format!("median {m:.3} s (min {a:.3}, max {z:.3})"),
        _ => "–".into(),
    }
}

/// Per-sample measurements of the real-time run.
#[derive(Default)]
struct Times {
    write: Vec<f64>,
    read: Vec<f64>,
    read_cpu_self: Vec<f64>,
    read_cpu_servers: Vec<f64>,
    /// The same read row by row (no snapshots), after the snapshot read of the same sample.
    read_rows: Vec<f64>,
    read_rows_cpu_self: Vec<f64>,
    read_rows_cpu_servers: Vec<f64>,
    rows_bytes: usize,
    from_snapshot: usize,
    direct: Vec<f64>,
    rules_healthy: Vec<f64>,
    rules_faulty: Vec<f64>,
    bytes: usize,
    findings: Vec<String>,
    unjudged: usize,
}

/// The faults of the "faulty" windows: a storm two hops deep, a lossy spine uplink, an incast.
fn faults(twin: &mut weft_twin::Twin, at: u64) {
    use weft_twin::ports::Peer;
    let hosts = twin.topo.hosts.len();
    twin.inject(
        Fault::PfcStorm {
            host: 1,
            rate: 900.0,
            watchdog: false,
            depth: 2,
        },
        at,
    );
    let link = (0..twin.ports.len() as u32).find_map(|p| {
        let port = twin.ports.get(p);
        let Peer::Switch(q) = port.peer else {
            return None;
        };
        (twin.ports.tier[port.switch] == 2
            && twin.base.egress[p as usize] > 0.0
            && port.switch > 40)
            .then_some((p, q))
    });
    if let Some((from, to)) = link {
        twin.inject(
            Fault::LossyLink {
                from,
                to,
                loss: 0.12,
                both: false,
            },
            at,
        );
    }
    twin.inject(
        Fault::Incast {
            host: hosts / 2,
            senders: (1..=16).map(|i| (hosts / 2 + i * 37) % hosts).collect(),
            pfc: true,
        },
        at,
    );
}

/// `s` added to the last samples, the oldest dropped: the window of the last three, once
/// there are three.
fn slide(
    samples: &mut std::collections::VecDeque<Sample>,
    s: Sample,
    fabric: &std::sync::Arc<weft_diagnose::Fabric>,
) -> Option<Window> {
    samples.push_back(s);
    while samples.len() > 3 {
        samples.pop_front();
    }
    (samples.len() == 3).then(|| Window {
        fabric: fabric.clone(),
        samples: samples.iter().cloned().collect(),
    })
}

async fn realtime_run(bed: &Bed, windows: usize) -> Times {
    let n = bed.topo.switches.len();
    let cfg = Config {
        epoch_ms: 1_000_000,
        ..Default::default()
    };
    // Two switches never written, one whose plugin dies, one that restarts.
    let mut twin = twin_common::twin(&bed.topo, cfg, &[3, n / 2]);
    twin.life[n / 3].dead_from = Some(2500);
    twin.life[n / 4].resets.push((3300, 2000));
    let fabric = std::sync::Arc::new(weft_observe::diagnose::fabric_of(&twin.topo));
    let mut through = Through::new(&twin).await;
    let mut by_rows = weft_observe::source::db::Reader::new(&twin.topo).rows_only();
    let mut direct = Direct::new(&twin.topo);
    let pids: Vec<u32> = bed.servers.iter().filter_map(|s| s.pid()).collect();
    let mut tm = Times::default();
    let mut samples: std::collections::VecDeque<Sample> = Default::default();
    let fault_at = (windows as u64 / 2 + 2) * 1000;
    for step in 1..=(windows as u64 + 2) {
        let t = step * 1000;
        if t == fault_at {
            faults(&mut twin, t - 500);
        }
        let changed = twin.advance(t);
        let w0 = Instant::now();
        through
            .writer
            .write(&twin, &changed)
            .await
            .expect("twin write");
        tm.write.push(w0.elapsed().as_secs_f64());
        let (c_self, c_srv) = (
            self_cpu(),
            pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>(),
        );
        // WEFT_BENCH_REREAD=N: N more reads of each sample first (to profile the reader).
        for _ in 0..env_or("WEFT_BENCH_REREAD", "0")
            .parse::<usize>()
            .unwrap_or(0)
        {
            let _ = through.reader.sweep(twin.cfg.epoch_ms + t).await;
        }
        let r0 = Instant::now();
        let sweep = through.reader.sweep(twin.cfg.epoch_ms + t).await;
        tm.read.push(r0.elapsed().as_secs_f64());
        tm.read_cpu_self.push(self_cpu() - c_self);
        tm.read_cpu_servers
            .push(pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>() - c_srv);
        tm.bytes = sweep.bytes;
        tm.unjudged = sweep.unjudged.len();
        tm.from_snapshot = sweep.from_snapshot;
        let (c_self, c_srv) = (
            self_cpu(),
            pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>(),
        );
        let r0 = Instant::now();
        let rows = by_rows.sweep(twin.cfg.epoch_ms + t).await;
        tm.read_rows.push(r0.elapsed().as_secs_f64());
        tm.read_rows_cpu_self.push(self_cpu() - c_self);
        tm.read_rows_cpu_servers
            .push(pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>() - c_srv);
        tm.rows_bytes = rows.bytes;
        assert!(
            rows.switches == sweep.switches,
            "the snapshots and the rows say different things at {t} ms"
        );
        let d0 = Instant::now();
        let _ = direct.sample(&twin, &changed).await.expect("direct");
        tm.direct.push(d0.elapsed().as_secs_f64());
        let sample = Sample {
            t_ms: t,
            switches: sweep.switches,
        };
        let Some(w) = slide(&mut samples, sample, &fabric) else {
            continue;
        };
        let j0 = Instant::now();
        let found = weft_diagnose::diagnose(&w, &Thresholds::default());
        let rules = j0.elapsed().as_secs_f64();
        if t - 2000 >= fault_at {
            // WEFT_BENCH_EXPLAIN=1: every finding of the faults window with its evidence.
            if std::env::var_os("WEFT_BENCH_EXPLAIN").is_some() {
                for f in &found {
                    println!("    t={t}: {} {}: {}", f.kind.as_str(), f.target, f.summary);
                }
            }
            tm.rules_faulty.push(rules);
            tm.findings = found
                .iter()
                .map(|f| {
                    format!(
                        "{} {} ({} affected)",
                        f.kind.as_str(),
                        f.target,
                        f.victims.len()
                    )
                })
                .collect();
        } else if t < fault_at - 500 {
            tm.rules_healthy.push(rules);
        }
    }
    tm
}

fn realtime(k: u32, servers: usize, windows: usize) {
    let dir = std::env::temp_dir().join(format!("weft-twin-bench-{k}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let t0 = Instant::now();
    let bed = Bed::start(k, &format!("twin{k}"), servers, &dir);
    let n = bed.topo.switches.len();
    let ports: usize = bed.topo.switches.iter().map(|s| s.ports.len()).sum();
    println!(
        "k={k}: {n} switches, {ports} ports, {} hosts, in {servers} redis-servers (set up in {:.1} s), load {}",
        bed.topo.hosts.len(),
        t0.elapsed().as_secs_f64(),
        load()
    );
    let rt = runtime();
    let tm = rt.block_on(realtime_run(&bed, windows));
    let servers_rss: f64 = bed
        .servers
        .iter()
        .filter_map(|s| s.pid())
        .map(|p| rss_mib(p).1)
        .sum();
    println!(
        "  write of a second's polls (twin → DBs): {}",
        stats(&tm.write)
    );
    println!(
        "  read of one sample of every switch:     {}",
        stats(&tm.read)
    );
    println!(
        "    CPU in it: this process {}, redis-servers {}",
        stats(&tm.read_cpu_self),
        stats(&tm.read_cpu_servers)
    );
    println!(
        "    {:.1} MB read, {} switches from their snapshot, {} unjudged (missing / dead / restarting)",
        tm.bytes as f64 / 1e6,
        tm.from_snapshot,
        tm.unjudged
    );
    println!(
        "  the same read row by row (no snapshots): {}",
        stats(&tm.read_rows)
    );
    println!(
        "    CPU in it: this process {}, redis-servers {}; {:.1} MB",
        stats(&tm.read_rows_cpu_self),
        stats(&tm.read_rows_cpu_servers),
        tm.rows_bytes as f64 / 1e6
    );
    let med = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    println!(
        "    snapshot read / row-by-row read (medians, same samples): {:.2}",
        med(&tm.read) / med(&tm.read_rows)
    );
    println!(
        "  same decoding, rows in hand (no I/O):   {}",
        stats(&tm.direct)
    );
    println!(
        "  rules over a 3-sample window, healthy:  {}",
        stats(&tm.rules_healthy)
    );
    println!(
        "  rules over a 3-sample window, faults:   {}",
        stats(&tm.rules_faulty)
    );
    println!("    findings: {}", tm.findings.join("; "));
    println!(
        "  memory: this process peak {:.0} MiB; redis-servers {:.0} MiB in all; load {}",
        rss_mib(std::process::id()).0,
        servers_rss,
        load()
    );
    drop(bed);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Adds chunk `b`'s score into `a`.
fn merge(a: &mut Score, b: Score) {
    for (k, r) in b.rows {
        let x = a.rows.entry(k).or_default();
        x.faults += r.faults;
        x.localised += r.localised;
        x.right += r.right;
        x.wrong += r.wrong;
        x.t2l.extend(r.t2l);
    }
    a.windows += b.windows;
    a.multi += b.multi;
    a.healthy += b.healthy;
    a.healthy_findings += b.healthy_findings;
    a.wrong_examples.extend(b.wrong_examples);
    a.rules_s.extend(b.rules_s);
    a.sample_s.extend(b.sample_s);
}

/// Trials per chunk of a campaign: each chunk a twin of its own (its clock after the last
/// one's), its score added and the table so far printed, so a campaign cut short still says
/// what it scored.
const CHUNK: usize = 20;

fn campaign(k: u32, trials: usize, seed: u64, servers: usize) {
    let dir = std::env::temp_dir().join(format!("weft-twin-campaign-{k}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bed = Bed::start(k, &format!("tc{k}"), servers, &dir);
    let n = bed.topo.switches.len();
    let rt = runtime();
    let t0 = Instant::now();
    let (c0, l0) = (self_cpu(), load());
    let mut score = Score::default();
    for (i, start) in (0..trials).step_by(CHUNK).enumerate() {
        let chunk = CHUNK.min(trials - start);
        let s = rt.block_on(async {
            let cfg = Config {
                seed: seed + i as u64,
                epoch_ms: 1_000_000 + i as u64 * 100_000_000,
                ..Default::default()
            };
            let mut twin = twin_common::twin(&bed.topo, cfg, &[7, n / 2 + 1]);
            let fabric = std::sync::Arc::new(weft_observe::diagnose::fabric_of(&twin.topo));
            let mut through = Through::new(&twin).await;
            let c = Campaign {
                trials: chunk,
                seed: seed + i as u64,
                record: std::env::var_os("WEFT_TWIN_RECORD").map(Into::into),
                ..Default::default()
            };
            run(&mut twin, &fabric, &c, &Thresholds::default(), &mut through)
                .await
                .expect("campaign")
        });
        merge(&mut score, s);
        let fault_windows = score.windows - score.healthy;
        println!(
            "campaign k={k} ({n} switches, {servers} redis-servers), {} of {trials} trials, seed {seed}: {:.0} s wall, {:.0} s CPU of this process; load before {l0}, now {}",
            start + chunk,
            t0.elapsed().as_secs_f64(),
            self_cpu() - c0,
            load()
        );
        println!(
            "windows {}: healthy {}, with faults {}, with two or more {} ({:.0}% of those with faults)",
            score.windows,
            score.healthy,
            fault_windows,
            score.multi,
            100.0 * f64::from(score.multi) / f64::from(fault_windows.max(1))
        );
        println!(
            "read per sample {}; rules per window {}",
            stats(&score.sample_s),
            stats(&score.rules_s)
        );
        println!("{}", score.table());
    }
    for w in &score.wrong_examples {
        println!("wrong: {w}");
    }
    drop(bed);
    let _ = std::fs::remove_dir_all(&dir);
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.into())
}

/// The rules alone (`WEFT_BENCH_RULES=K`): windows sampled from the twin in memory, no
/// redis-server, so a profiler sees only the rules.
fn rules_only(k: u32, windows: usize) {
    let n = weft_twin::intent::switches(k).expect("fat-tree").len();
    // Eight servers' addresses, as the real-time run spreads them; nothing connects.
    let urls: Vec<String> = (1..=8).map(|p| format!("redis://127.0.0.1:{p}")).collect();
    let text = weft_twin::intent::fat_tree(k, "rules", |i| weft_twin::intent::spread(i, n, &urls))
        .expect("intent");
    let topo = weft_topology::load_str(&text, "rules.yaml").expect("valid intent");
    let mut twin = twin_common::twin(&topo, Config::default(), &[3, n / 2]);
    let fabric = std::sync::Arc::new(weft_observe::diagnose::fabric_of(&twin.topo));
    let direct = Direct::new(&twin.topo);
    let mut samples: std::collections::VecDeque<Sample> = Default::default();
    let fault_at = (windows as u64 / 2 + 2) * 1000;
    let (mut healthy, mut faulty, mut one_thread) = (Vec::new(), Vec::new(), Vec::new());
    for step in 1..=(windows as u64 + 2) {
        let t = step * 1000;
        if t == fault_at {
            faults(&mut twin, t - 500);
        }
        twin.advance(t);
        let switches = (0..twin.topo.switches.len())
            .filter_map(|s| Some((twin.topo.switches[s].name.clone(), direct.switch(&twin, s)?)))
            .collect();
        let Some(w) = slide(&mut samples, Sample { t_ms: t, switches }, &fabric) else {
            continue;
        };
        let j0 = Instant::now();
        let found = weft_diagnose::diagnose(&w, &Thresholds::default());
        let took = j0.elapsed().as_secs_f64();
        if t - 2000 >= fault_at {
            faulty.push(took);
            println!("  t={t}: {} findings", found.len());
            // WEFT_BENCH_REPEAT=N: the same window N times more, for a profiler, each time also
            // with every rule on one thread (what the second thread gains, in the same run).
            let again: usize = env_or("WEFT_BENCH_REPEAT", "0").parse().unwrap_or(0);
            for _ in 0..again {
                let j0 = Instant::now();
                let two = weft_diagnose::diagnose(&w, &Thresholds::default());
                faulty.push(j0.elapsed().as_secs_f64());
                let j0 = Instant::now();
                let one = weft_diagnose::diagnose_on_one_thread(&w, &Thresholds::default());
                one_thread.push(j0.elapsed().as_secs_f64());
                assert!(one == two, "one thread and two find different things");
            }
        } else if t < fault_at - 500 {
            healthy.push(took);
        }
    }
    println!(
        "k={k} rules only ({n} switches): healthy {}; with faults {}; with faults, every rule on one thread {}",
        stats(&healthy),
        stats(&faulty),
        stats(&one_thread)
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if let Ok(k) = env_or("WEFT_BENCH_RULES", "").parse::<u32>() {
        rules_only(k, env_or("WEFT_BENCH_WINDOWS", "6").parse().unwrap_or(6));
        return;
    }
    let servers: usize = env_or("WEFT_BENCH_SERVERS", "8").parse().unwrap_or(8);
    let windows: usize = env_or("WEFT_BENCH_WINDOWS", "6").parse().unwrap_or(6);
    for k in env_or("WEFT_BENCH_K", "32,64")
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
    {
        realtime(k, servers, windows);
    }
    let c = env_or("WEFT_BENCH_CAMPAIGN", "32:160");
    let parts: Vec<u64> = c.split(':').filter_map(|s| s.trim().parse().ok()).collect();
    if let [k, trials, rest @ ..] = parts.as_slice() {
        campaign(
            *k as u32,
            *trials as usize,
            rest.first().copied().unwrap_or(7),
            servers,
        );
    }
}
