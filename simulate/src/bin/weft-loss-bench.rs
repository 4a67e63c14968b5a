//! Lossless PFC vs lossy drop-tail vs lossy trimming, in the packet-level model
//! (`weft_simulate::transport`): incast N:1 with a victim flow sharing the first leaf's uplinks
//! and the spines, and all-to-all. Prints the README's table (Markdown).
//!
//!   cargo run --release -p weft-simulate --bin weft-loss-bench [-- --seeds 5]
//!
//! The model runs on explicit time: its figures do not depend on the machine or its load
//! (printed anyway, with the wall time the runs took).

use std::time::Instant;

use weft_simulate::transport::{Arm, FabricSpec, Outcome, Workload, quantile, run};

const LIMIT_NS: u64 = 5_000_000_000;

struct Row {
    completion: Vec<u64>,
    retx: u64,
    pauses: u64,
    drops: u64,
    trimmed: u64,
    timeouts: u64,
    victim: Vec<f64>,
    runs: u32,
    complete: u32,
}

fn pooled(f: FabricSpec, arm: Arm, spray: bool, w: Workload, seeds: u64) -> Row {
    let mut r = Row {
        completion: Vec::new(),
        retx: 0,
        pauses: 0,
        drops: 0,
        trimmed: 0,
        timeouts: 0,
        victim: Vec::new(),
        runs: 0,
        complete: 0,
    };
    for seed in 1..=seeds {
        let o: Outcome = run(f, arm, spray, w, seed, LIMIT_NS);
        r.completion.extend(o.completion_ns.iter().copied());
        r.retx += o.retransmitted_bytes;
        r.pauses += o.pause_frames;
        r.drops += o.dropped;
        r.trimmed += o.trimmed;
        r.timeouts += o.timeouts;
        r.victim.extend(o.victim_gbps);
        r.runs += 1;
        r.complete += u32::from(o.complete);
    }
    r
}

fn us(ns: u64) -> String {
    format!("{:.0}", ns as f64 / 1e3)
}

fn print_row(name: &str, r: &Row, alone: Option<f64>) {
    let n = f64::from(r.runs.max(1));
    let victim = match (r.victim.is_empty(), alone) {
        (false, Some(a)) => {
            let v = r.victim.iter().sum::<f64>() / r.victim.len() as f64;
            format!("{v:.1} ({:.2}×)", v / a)
        }
        _ => "—".into(),
    };
    println!(
        "| {name} | {}/{} | {} | {} | {:.2} | {:.0} | {:.0} | {:.0} | {:.1} | {victim} |",
        r.complete,
        r.runs,
        us(quantile(&r.completion, 0.5)),
        us(quantile(&r.completion, 0.99)),
        r.retx as f64 / n / 1e6,
        r.pauses as f64 / n,
        r.drops as f64 / n,
        r.trimmed as f64 / n,
        r.timeouts as f64 / n,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seeds = args
        .iter()
        .position(|a| a == "--seeds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(5u64);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let t0 = Instant::now();
    let f = FabricSpec::default();
    let arms = [
        ("lossless + PFC + DCQCN", Arm::Pfc, false),
        ("lossy drop-tail + timeout", Arm::DropTail, false),
        ("lossy + trimming + NACK", Arm::Trim, false),
        (
            "lossy + trimming + NACK + entropy spraying",
            Arm::Trim,
            true,
        ),
    ];
    println!(
        "fabric: {} spines, {} leaves × {} hosts, {} Gb/s, {} ns links, {} B payloads, queues {} packets, trim at {} to {} B, PFC xoff/xon {}/{} per ingress port, ECN {}..{} packets, RTO {} µs; {seeds} seeds each\n",
        f.spines,
        f.leaves,
        f.hosts_per_leaf,
        f.link_gbps,
        f.link_delay_ns,
        f.mtu,
        f.queue_packets,
        f.trim_threshold,
        f.trim_bytes,
        f.xoff,
        f.xon,
        f.kmin,
        f.kmax,
        f.rto_ns / 1000
    );
    for (senders, bytes) in [(8usize, 512u64 << 10), (10, 2 << 20)] {
        let alone = pooled(
            f,
            Arm::Trim,
            false,
            Workload::VictimAlone {
                bytes: bytes * senders as u64 * 4,
            },
            1,
        )
        .victim
        .first()
        .copied();
        println!(
            "incast {senders}:1 of {} KB each, victim alone {:.1} Gb/s\n",
            bytes >> 10,
            alone.unwrap_or(0.0)
        );
        header("victim Gb/s during the incast (× alone)");
        for (name, arm, spray) in arms {
            let w = Workload::Incast {
                senders,
                bytes,
                victim: true,
            };
            print_row(name, &pooled(f, arm, spray, w, seeds), alone);
        }
        println!();
    }
    println!("all-to-all, 16 hosts, 256 KB to each peer\n");
    header("—");
    for (name, arm, spray) in arms {
        let w = Workload::AllToAll { bytes: 256 << 10 };
        print_row(name, &pooled(f, arm, spray, w, seeds), None);
    }
    println!(
        "\nload average before: {}wall time {:.1} s",
        load,
        t0.elapsed().as_secs_f64()
    );
}

fn header(victim: &str) {
    println!(
        "| arm | complete | completion p50 µs | p99 µs | retransmitted MB/run | PAUSE frames/run | drops/run | trimmed/run | timeouts/run | {victim} |\n|---|---|---|---|---|---|---|---|---|---|"
    );
}
