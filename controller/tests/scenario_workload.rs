//! Collectives on the emulated small leaf-spine fabric: real BMv2, redis-server and plugin per
//! switch, `weft-traffic` ranks in the host namespaces, the real `weft testbed workload` and
//! `weft apply` binaries. Needs root and BMv2; without them it prints SKIPPED
//! (WEFT_REQUIRE_BMV2=1 makes it fail).
//!
//! Ring AllReduce and AlltoAll under ECMP and spray, the ranks in an order whose QPs the
//! pipeline's hash puts two to a link (the fabric model predicts it, and the report carries the
//! prediction): every byte arrives, bandwidths are computed as nccl-tests defines them,
//! spraying is at least as fast as ECMP on the all-to-all, and packets arrive out of order only
//! when they are sprayed.

mod common;

use std::path::Path;
use std::process::Command;

use common::bed::{self, Bed, Needs};
use weft_testbed::workload_report::Report;
use weft_traffic::collective::{Collective, Kind};

const TEST: &str = "scenario_workload";
/// Ranks in an order a scheduler might hand out (not by leaf): with the switches' hash seeds
/// (from their device ids) the model puts ECMP at 2.25× the ideal on the ring and 1.6× on the
/// all-to-all for it, spraying at about 1×. (A different order collided before the pipeline
/// had seeds; which orders collide depends on every leaf's seed.)
const RANKS: &str = "leaf4-h1,leaf1-h1,leaf3-h2,leaf1-h2,leaf3-h1,leaf4-h2,leaf2-h2,leaf2-h1";

#[test]
fn ring_allreduce_and_alltoall_deliver_every_byte_and_spraying_beats_colliding_ecmp() {
    let needs = Needs {
        cli: true,
        bins: &[("weft-traffic", "weft-traffic")],
        ..Needs::default()
    };
    let Some(programs) = bed::programs(TEST, &needs) else {
        return;
    };
    // The run-time ECN tuner would move thresholds between the runs being compared. ECN
    // thresholds mapped into BMv2's 64-packet queues (README, run-time ECN tuning), so DCQCN
    // sees marks before the queue overflows; counters every 300 ms.
    let f = Bed::up_applied(
        &programs,
        "wkl",
        |t| t.replace("tuning: auto", "tuning: off"),
        &["--bmv2-queue-scale", "0.18", "--counter-interval-ms", "300"],
    );
    let (weft, file, state) = (
        Path::new(env!("CARGO_BIN_EXE_weft")),
        f.file.clone(),
        f.state_dir(),
    );

    // The comparison of modes is timing: on a machine other builds keep busy it can drown in
    // BMv2 starving. Up to three attempts, every one printed; the outcomes that are not timing
    // (every byte delivered, bandwidth arithmetic, no reordering without spraying) must hold in
    // every attempt.
    let mut attempts = Vec::new();
    for attempt in 1..=3 {
        let report = workload(weft, &file, &state);
        println!(
            "attempt {attempt}:\n{}",
            weft_testbed::workload_report::render(&report)
        );
        check_outcomes(&report);
        let faster = spray_beats_ecmp(&report);
        attempts.push(report);
        if faster {
            break;
        }
    }
    let last = attempts.last().expect("an attempt");
    let (ea, sa) = (
        case(last, Kind::AllToAll, "ecmp"),
        case(last, Kind::AllToAll, "spray"),
    );
    assert!(
        spray_beats_ecmp(last),
        "all-to-all: spray busbw {} < ECMP busbw {} in all {} attempts",
        sa.run.busbw,
        ea.run.busbw,
        attempts.len()
    );
    let sprayed: u64 = attempts
        .iter()
        .map(|r| {
            case(r, Kind::AllReduce, "spray").run.out_of_order
                + case(r, Kind::AllToAll, "spray").run.out_of_order
        })
        .sum();
    assert!(
        sprayed > 0,
        "spraying over two spines must reorder some packets"
    );
    drop(f);
}

fn workload(weft: &Path, file: &Path, state: &Path) -> Report {
    let out = Command::new(weft)
        .args([
            "testbed",
            "workload",
            &file.to_string_lossy(),
            "allreduce,alltoall",
        ])
        .args([
            "--ranks",
            RANKS,
            "--size",
            "512KiB",
            "--warmup",
            "1",
            "--iterations",
            "1",
        ])
        .args(["--modes", "ecmp,spray", "--output", "json"])
        .arg("--state-dir")
        .arg(state)
        .output()
        .expect("weft testbed workload");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Report = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "no report ({e}); exit {:?}\n{stdout}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        weft_testbed::workload_report::render(&report)
    );
    assert!(report.measured_bytes_per_s > 0.0);
    report
}

fn case<'a>(r: &'a Report, k: Kind, mode: &str) -> &'a weft_testbed::workload_report::Case {
    r.cases
        .iter()
        .find(|c| c.collective == k && c.mode.as_deref() == Some(mode))
        .unwrap_or_else(|| panic!("no {k} {mode} case"))
}

fn spray_beats_ecmp(r: &Report) -> bool {
    case(r, Kind::AllToAll, "spray").run.busbw >= case(r, Kind::AllToAll, "ecmp").run.busbw
}

/// What must hold in every run, however busy the machine.
fn check_outcomes(report: &Report) {
    for c in &report.cases {
        let r = &c.run;
        let what = format!("{} {:?}", c.collective, c.mode);
        assert!(r.complete, "{what}: not complete: {r:?}");
        assert_eq!(r.bytes_received, r.bytes_expected, "{what}: bytes missing");
        let coll = Collective {
            kind: c.collective,
            ranks: report.ranks.len() as u32,
            size: report.size,
        };
        assert_eq!(
            r.bytes_expected,
            coll.network_bytes() * u64::from(report.warmup + report.iterations),
            "{what}: every rank's share of every iteration was expected"
        );
        // nccl-tests: algbw = S / t; busbw = algbw · 2(n−1)/n (AllReduce), · (n−1)/n (AlltoAll).
        let n = report.ranks.len() as f64;
        let factor = match c.collective {
            Kind::AllReduce => 2.0 * (n - 1.0) / n,
            _ => (n - 1.0) / n,
        };
        let mean = r.iterations.iter().map(|i| i.seconds).sum::<f64>() / r.iterations.len() as f64;
        assert!((r.seconds - mean).abs() < 1e-9 * mean, "{what}");
        assert!(
            (r.algbw - report.size as f64 / mean).abs() < 1e-6 * r.algbw,
            "{what}"
        );
        assert!(
            (r.busbw - r.algbw * factor).abs() < 1e-6 * r.busbw,
            "{what}"
        );
        for i in &r.iterations {
            assert!((i.busbw - report.size as f64 / i.seconds * factor).abs() < 1e-6 * i.busbw);
        }
    }
    // The model foresaw the collisions this rank order causes.
    let (ea, sa) = (
        case(report, Kind::AllToAll, "ecmp"),
        case(report, Kind::AllToAll, "spray"),
    );
    assert!(
        ea.model_ratio.unwrap_or(0.0) > sa.model_ratio.unwrap_or(f64::MAX),
        "the model must predict ECMP collisions for this order: {:?} vs {:?}",
        ea.model_ratio,
        sa.model_ratio
    );
    // Reordering only where packets are sprayed.
    for k in [Kind::AllReduce, Kind::AllToAll] {
        assert_eq!(
            case(report, k, "ecmp").run.out_of_order,
            0,
            "{k}: ECMP reordered"
        );
    }
}
