//! Loss handling side by side on the testbed: lossless + PFC, lossy drop-tail, and lossy with
//! packet trimming, on the same small leaf-spine (real BMv2, redis-server and plugin per
//! switch, `weft-traffic` ranks in the host namespaces), with the same senders (DCQCN-like rate
//! control, out-of-order placement, timeout retransmission; NACK of a trimmed packet where the
//! fabric trims).
//!
//! ```console
//! # cargo build --release -j2 -p weft-sonic-plugin -p weft-traffic
//! # cargo bench -j2 -p weft-controller --bench trim_testbed
//! ```
//!
//! Needs root and BMv2 (SKIPPED without it; WEFT_REQUIRE_BMV2=1 makes that a failure). Per mode
//! the testbed is brought up from the small example with only the `roce` class's loss handling
//! changed (`lossless: true` and PFC; neither; `trim: {size: 256B, dscp: 11, traffic_class: 7}`),
//! applied with `weft apply`, every switch queue limited to the NICs' packet rate. Then:
//!
//! - the victim alone: one flow leaf1-h2 → leaf3-h2, which shares leaf1's uplinks and the
//!   spines with the incast but not its congested port;
//! - incast 3:1 (leaf1-h1, leaf2-h1, leaf3-h1 → leaf4-h1) with the victim started in the
//!   middle of it, `WEFT_BENCH_ROUNDS` rounds (default 3);
//! - all-to-all over the 8 hosts.
//!
//! Each in the setups of the senders that `WEFT_BENCH_SETUPS` lists (default `nic,model`):
//!
//! - `nic`: the testbed NICs' own timers, tuned for BMv2 (a CNP gap and DCQCN periods of 4
//!   packet times, a smallest retransmission timeout of 30, a window of 256 packets); incast 3:1
//!   of 1 MiB each;
//! - `model`: the packet model's timers carried over in packet times
//!   (`weft_simulate::transport::FabricSpec::timing`: CNP gap 150, DCQCN periods 165, smallest
//!   retransmission timeout and hole timer 3,000 packet times, window 64); incast 5:1 of
//!   512 KiB each, the most this fabric's 8 hosts hold beside the victim (the model's is 8:1);
//! - `model-cc`: as `model`, with the NICs' own retransmission timeout.
//!
//! Reported per mode and workload: message completion p50/p99 (posted → acknowledged, every
//! sender's messages of every round), packets retransmitted (4 KiB payload each), PAUSE frames the switches sent and
//! packets they trimmed (COUNTERS_DB, the plugin's counters read 1 s after the run ends), and the
//! victim's throughput with the incast over its throughput alone (the median of its rounds).

#[path = "../tests/common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::bed::{self, Bed, Needs};
use weft_simulate::transport::FabricSpec;
use weft_testbed::State;
use weft_testbed::workload::{self, Outcome, Spec};
use weft_traffic::collective::Kind;
use weft_traffic::engine::Timing;

const BENCH: &str = "trim_testbed";
const INCAST: [&str; 4] = ["leaf4-h1", "leaf1-h1", "leaf2-h1", "leaf3-h1"];
/// Every host but the victim's two sends to leaf4-h1.
const INCAST_WIDE: [&str; 6] = [
    "leaf4-h1", "leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf2-h2", "leaf4-h2",
];
const VICTIM: (&str, &str) = ("leaf1-h2", "leaf3-h2");
const ALL: [&str; 8] = [
    "leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf4-h1", "leaf1-h2", "leaf2-h2", "leaf3-h2", "leaf4-h2",
];
/// Each NIC's packet rate and every switch queue's: the fabric's line rate.
const RATE_PPS: u64 = 150;
const INCAST_BYTES: u64 = 1 << 20;
const INCAST_WIDE_BYTES: u64 = 512 << 10;
const VICTIM_BYTES: u64 = 256 << 10;
const ALLTOALL_BYTES: u64 = 512 << 10;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Pfc,
    DropTail,
    Trim,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Pfc => "lossless + PFC",
            Mode::DropTail => "lossy drop-tail",
            Mode::Trim => "lossy + trimming",
        }
    }

    /// The small example with only the `roce` class's loss handling changed (and the run-time
    /// ECN tuner off, so thresholds do not move between modes).
    fn intent(self, text: String) -> String {
        match self {
            Mode::Pfc => text.replace("tuning: auto", "tuning: off"),
            Mode::DropTail => bed::lossy_roce(text, false),
            Mode::Trim => bed::lossy_roce(text, true),
        }
    }
}

/// How the senders are set up.
#[derive(Clone, Copy)]
enum Setup {
    /// The testbed NICs' own timers; incast 3:1 of 1 MiB.
    Nic,
    /// The packet model's timers in packet times (`model`, or `model-cc` without its
    /// retransmission timeout); incast 5:1 of 512 KiB.
    Model(Timing),
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::Nic => "nic",
            Setup::Model(t) if t.rto.is_some() => "model",
            Setup::Model(_) => "model-cc",
        }
    }

    /// The incast's ranks (receiver first), bytes per sender and label.
    fn incast(self) -> (&'static [&'static str], u64, &'static str) {
        match self {
            Setup::Nic => (&INCAST, INCAST_BYTES, "incast 3:1 + victim"),
            Setup::Model(_) => (&INCAST_WIDE, INCAST_WIDE_BYTES, "incast 5:1 + victim"),
        }
    }

    fn apply(self, s: &mut Spec) {
        if let Setup::Model(t) = self {
            s.timing = Some(t);
            if t.rto.is_some() {
                // Timeouts of thousands of packet times: seconds each on this fabric.
                s.deadline = Duration::from_secs(300);
            }
        }
    }

    /// From `WEFT_BENCH_SETUPS` (default `nic,model`).
    fn from_env() -> Vec<Setup> {
        let model = FabricSpec::default().timing();
        let names = std::env::var("WEFT_BENCH_SETUPS").unwrap_or_else(|_| "nic,model".into());
        names
            .split(',')
            .map(|n| match n.trim() {
                "nic" => Setup::Nic,
                "model" => Setup::Model(model),
                "model-cc" => Setup::Model(Timing { rto: None, ..model }),
                other => {
                    panic!("WEFT_BENCH_SETUPS: unknown setup {other:?} (nic, model, model-cc)")
                }
            })
            .collect()
    }
}

/// What the switches counted over a run (None: a DB could not be read).
#[derive(Clone, Copy, Default)]
struct Fabric {
    pauses: Option<u64>,
    trimmed: Option<u64>,
}

fn fabric_counters(st: &State, tc: u8) -> Fabric {
    Fabric {
        pauses: workload::pfc_pauses(st, tc),
        trimmed: workload::trimmed_packets(st, tc),
    }
}

fn delta(a: Fabric, b: Fabric) -> Fabric {
    let d = |x: Option<u64>, y: Option<u64>| Some(y?.saturating_sub(x?));
    Fabric {
        pauses: d(a.pauses, b.pauses),
        trimmed: d(a.trimmed, b.trimmed),
    }
}

/// One row of the table.
struct Row {
    mode: Mode,
    setup: Setup,
    workload: &'static str,
    messages: Vec<f64>,
    complete: bool,
    retransmitted: u64,
    timeouts: u64,
    fabric: Fabric,
    /// Victim throughput (bytes/s): with the incast, alone.
    victim: Option<(f64, f64)>,
}

fn spec(bed: &Bed, setup: Setup, kind: Kind, ranks: &[&str], size: u64) -> Spec {
    let mut s = Spec::new(
        &bed.topo,
        kind,
        ranks.iter().map(|r| r.to_string()).collect(),
        size,
    );
    s.rate_pps = RATE_PPS as f64;
    s.warmup = 0;
    s.iterations = 1;
    s.deadline = Duration::from_secs(90);
    setup.apply(&mut s);
    s
}

/// The state with its own workload directory, so two workloads can run at once.
fn state_in(bed: &Bed, sub: &str) -> State {
    let mut st = bed.state();
    st.state_dir = st.state_dir.join(sub);
    st
}

fn throughput(o: &Outcome) -> Option<f64> {
    (o.complete && o.seconds > 0.0).then(|| o.bytes_received as f64 / o.seconds)
}

/// The victim alone, then `rounds` incasts with the victim started 1 s into each.
fn incast_rows(bed: &Bed, mode: Mode, setup: Setup, traffic: &Path, rounds: u32) -> Row {
    let victim = spec(
        bed,
        setup,
        Kind::Incast,
        &[VICTIM.1, VICTIM.0],
        VICTIM_BYTES,
    );
    let (ranks, bytes, label) = setup.incast();
    let incast = spec(bed, setup, Kind::Incast, ranks, bytes);
    let (st_i, st_v) = (state_in(bed, "incast"), state_in(bed, "victim"));
    let mut alone = Vec::new();
    let mut with = Vec::new();
    let mut messages = Vec::new();
    let (mut complete, mut retransmitted, mut timeouts) = (true, 0, 0);
    let mut fabric = Fabric {
        pauses: Some(0),
        trimmed: Some(0),
    };
    for round in 0..rounds {
        let a = workload::run_workload(&st_v, &bed.topo, traffic, &victim).expect("victim alone");
        alone.extend(throughput(&a));
        let before = fabric_counters(&st_i, incast.traffic_class);
        let (i, v) = std::thread::scope(|s| {
            let h = s.spawn(|| workload::run_workload(&st_i, &bed.topo, traffic, &incast));
            // The incast's ranks start 1.5 s after the call; the victim's 1.5 s after its own.
            std::thread::sleep(Duration::from_secs(1));
            let v = workload::run_workload(&st_v, &bed.topo, traffic, &victim);
            (h.join().expect("incast thread"), v)
        });
        let (i, v) = (i.expect("incast"), v.expect("victim with the incast"));
        std::thread::sleep(Duration::from_secs(1));
        let d = delta(before, fabric_counters(&st_i, incast.traffic_class));
        fabric.pauses = fabric.pauses.zip(d.pauses).map(|(x, y)| x + y);
        fabric.trimmed = fabric.trimmed.zip(d.trimmed).map(|(x, y)| x + y);
        with.push(throughput(&v).unwrap_or(0.0));
        println!(
            "  {} ({}) incast round {round}: {:.2} s, complete {}, retransmitted {} packets, victim {:.0} B/s with, {:.0} B/s alone{}",
            mode.name(),
            setup.name(),
            i.seconds,
            i.complete,
            i.retransmitted,
            throughput(&v).unwrap_or(0.0),
            throughput(&a).unwrap_or(0.0),
            if i.errors.is_empty() && v.errors.is_empty() {
                String::new()
            } else {
                format!("; errors {:?} {:?}", i.errors, v.errors)
            }
        );
        complete &= i.complete;
        retransmitted += i.retransmitted;
        timeouts += i.timeouts;
        messages.extend(message_times(&st_i));
    }
    Row {
        mode,
        setup,
        workload: label,
        messages,
        complete,
        retransmitted,
        timeouts,
        fabric,
        victim: Some((median(&with), median(&alone))),
    }
}

/// Every message time (s) the ranks of the last run in `st`'s workload directory reported.
fn message_times(st: &State) -> Vec<f64> {
    let dir = st.state_dir.join("workload");
    let mut out = Vec::new();
    for r in 0.. {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("rank-{r}.out"))) else {
            break;
        };
        if let Ok(rep) = serde_json::from_str::<weft_traffic::engine::RankReport>(text.trim()) {
            out.extend(rep.message_ns.iter().map(|n| *n as f64 / 1e9));
        }
    }
    out
}

fn all_to_all(bed: &Bed, mode: Mode, setup: Setup, traffic: &Path) -> Row {
    let mut s = spec(bed, setup, Kind::AllToAll, &ALL, ALLTOALL_BYTES);
    s.warmup = 1;
    s.iterations = 3;
    let st = state_in(bed, "alltoall");
    let before = fabric_counters(&st, s.traffic_class);
    let o = workload::run_workload(&st, &bed.topo, traffic, &s).expect("all-to-all");
    std::thread::sleep(Duration::from_secs(1));
    let fabric = delta(before, fabric_counters(&st, s.traffic_class));
    Row {
        mode,
        setup,
        workload: "all-to-all 8",
        messages: message_times(&st),
        complete: o.complete,
        retransmitted: o.retransmitted,
        timeouts: o.timeouts,
        fabric,
        victim: None,
    }
}

fn median(v: &[f64]) -> f64 {
    percentile(v, 0.5)
}

fn percentile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn opt(v: Option<u64>) -> String {
    v.map_or("unknown".into(), |x| x.to_string())
}

fn print_table(rows: &[Row]) {
    println!(
        "\n| mode | senders | workload | complete | completion p50 | p99 | retransmitted (packets of 4 KiB payload) | timeouts | PAUSE sent | trimmed | victim with incast / alone |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let victim = r.victim.map_or("".into(), |(w, a)| {
            format!("{:.0} / {:.0} B/s = {:.2}", w, a, w / a)
        });
        println!(
            "| {} | {} | {} | {} | {:.2} s | {:.2} s | {} ({:.1} MB) | {} | {} | {} | {} |",
            r.mode.name(),
            r.setup.name(),
            r.workload,
            if r.complete { "yes" } else { "no" },
            percentile(&r.messages, 0.5),
            percentile(&r.messages, 0.99),
            r.retransmitted,
            r.retransmitted as f64 * 4096.0 / 1e6,
            r.timeouts,
            opt(r.fabric.pauses),
            opt(r.fabric.trimmed),
            victim
        );
    }
    for setup in ["nic", "model", "model-cc"] {
        let p99 = |m: Mode| {
            rows.iter()
                .find(|r| r.mode == m && r.setup.name() == setup && r.victim.is_some())
                .map(|r| percentile(&r.messages, 0.99))
        };
        if let (Some(d), Some(t)) = (p99(Mode::DropTail), p99(Mode::Trim)) {
            println!(
                "{setup} senders: incast p99 completion, drop-tail over trimming: {:.2}× (goal ≥ 2)",
                d / t
            );
        }
    }
    println!("load average after: {}", load());
}

fn main() {
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with("--") && a != BENCH)
    {
        return;
    }
    let needs = Needs {
        cli: true,
        bins: &[("weft-traffic", "weft-traffic")],
        ..Needs::default()
    };
    let Some(programs) = bed::programs(BENCH, &needs) else {
        return;
    };
    let rounds: u32 = std::env::var("WEFT_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let setups = Setup::from_env();
    let traffic = PathBuf::from(env!("CARGO_BIN_EXE_weft")).with_file_name("weft-traffic");
    let cli = programs.bmv2.with_file_name("simple_switch_CLI");
    println!(
        "trim_testbed: small leaf-spine (6 BMv2 switches, 8 hosts), {} CPUs, every queue {RATE_PPS} packets/s, load average {} before the start",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load()
    );
    for setup in &setups {
        if let Setup::Model(t) = setup {
            println!(
                "{} senders: CNP gap {:.0}, DCQCN periods {:.0}, retransmission timeout {}, in packet times; window {} packets",
                setup.name(),
                t.cnp_interval,
                t.dcqcn_period,
                t.rto.map_or("the NICs' own".into(), |r| format!("{r:.0}")),
                t.max_outstanding
            );
        }
    }
    let mut rows = Vec::new();
    for (i, mode) in [Mode::Pfc, Mode::DropTail, Mode::Trim]
        .into_iter()
        .enumerate()
    {
        let bed = Bed::up_applied(
            &programs,
            &format!("tb{i}"),
            |t| mode.intent(t),
            &["--bmv2-queue-scale", "0.18", "--counter-interval-ms", "300"],
        );
        workload::set_port_rates(&bed.state(), &cli, RATE_PPS).expect("set_queue_rate");
        println!("{} (load average {}):", mode.name(), load());
        for &setup in &setups {
            rows.push(incast_rows(&bed, mode, setup, &traffic, rounds));
            rows.push(all_to_all(&bed, mode, setup, &traffic));
        }
        drop(bed);
    }
    print_table(&rows);
}
