//! The packet-level model of loss handling (`weft_simulate::transport`): lossless PFC, lossy
//! drop-tail and lossy trimming on the same incast with a victim flow, and on an all-to-all.
//! Outcomes, not timings: the model runs on explicit time, so its figures are the same on any
//! machine; the full table is `cargo run --release -p weft-simulate --bin weft-loss-bench`.

use weft_simulate::transport::{Arm, FabricSpec, Outcome, Workload, run};

const LIMIT_NS: u64 = 2_000_000_000;
const BYTES: u64 = 512 * 1024;
const SENDERS: usize = 8;

fn incast(arm: Arm) -> Outcome {
    let w = Workload::Incast {
        senders: SENDERS,
        bytes: BYTES,
        victim: true,
    };
    let o = run(FabricSpec::default(), arm, false, w, 1, LIMIT_NS);
    assert!(o.complete, "{arm:?}: {o:?}");
    assert_eq!(o.completion_ns.len(), SENDERS, "{arm:?}");
    o
}

#[test]
fn trimming_finishes_an_incast_at_least_twice_as_fast_as_drop_tail_at_the_99th_percentile() {
    let drop = incast(Arm::DropTail);
    let trim = incast(Arm::Trim);
    assert!(drop.dropped > 0 && drop.timeouts > 0, "{drop:?}");
    assert!(trim.trimmed > 0, "{trim:?}");
    assert_eq!((trim.dropped, trim.timeouts), (0, 0), "{trim:?}");
    assert!(
        2 * trim.quantile_ns(0.99) <= drop.quantile_ns(0.99),
        "trim p99 {} ns, drop-tail p99 {} ns",
        trim.quantile_ns(0.99),
        drop.quantile_ns(0.99)
    );
    // Retransmissions are the trimmed packets (one each), not windows behind a loss.
    assert!(
        trim.retransmitted_bytes < drop.retransmitted_bytes,
        "{trim:?} {drop:?}"
    );
}

#[test]
fn pfc_pauses_instead_of_dropping_and_the_victim_keeps_its_rate_under_trimming() {
    let pfc = incast(Arm::Pfc);
    assert!(pfc.pause_frames > 0, "{pfc:?}");
    assert_eq!(
        (pfc.dropped, pfc.retransmitted_bytes, pfc.trimmed),
        (0, 0, 0)
    );
    let alone = run(
        FabricSpec::default(),
        Arm::Trim,
        false,
        Workload::VictimAlone {
            bytes: BYTES * SENDERS as u64 * 4,
        },
        1,
        LIMIT_NS,
    );
    let alone = alone.victim_gbps.expect("victim measured");
    assert!(
        alone > 90.0,
        "the victim alone runs near line rate: {alone}"
    );
    let with = incast(Arm::Trim).victim_gbps.expect("victim measured");
    assert!(
        with >= 0.9 * alone,
        "victim {with} Gb/s with the incast, {alone} alone"
    );
}

#[test]
fn an_all_to_all_completes_in_every_arm_and_only_drop_tail_times_out() {
    for arm in [Arm::Pfc, Arm::DropTail, Arm::Trim] {
        let o = run(
            FabricSpec::default(),
            arm,
            arm == Arm::Trim,
            Workload::AllToAll { bytes: 128 * 1024 },
            1,
            LIMIT_NS,
        );
        assert!(o.complete, "{arm:?}: {o:?}");
        // 16 hosts, each to 15 others.
        assert_eq!(o.completion_ns.len(), 16 * 15, "{arm:?}");
        assert_eq!(o.timeouts > 0, arm == Arm::DropTail, "{arm:?}: {o:?}");
    }
}

#[test]
fn the_models_timing_in_packet_times_converts_back_to_its_own_timers_and_scales_to_a_slow_fabric() {
    use weft_traffic::collective::{Collective, Kind};
    use weft_traffic::engine::RankPlan;
    use weft_traffic::receiver::Placement;
    let f = FabricSpec::default();
    let t = f.timing();
    let plan = |line_rate: f64| {
        let c = Collective {
            kind: Kind::Incast,
            ranks: 2,
            size: BYTES,
        };
        let addrs = vec![
            std::net::Ipv4Addr::new(10, 0, 0, 1),
            std::net::Ipv4Addr::new(10, 0, 0, 2),
        ];
        let mut p = RankPlan::defaults(0, addrs, c, line_rate, f.mtu, Placement::OutOfOrder);
        p.set_timing(&t);
        p
    };
    // At the model's own speed the timers are its nanoseconds again.
    let p = plan(f.link_gbps * 1e9 / 8.0);
    let d = p.dcqcn.expect("set_timing sets DCQCN");
    assert_eq!(
        (p.cnp_interval_ns, d.alpha_period_ns, p.tx.rto_ns),
        (50_000, 55_000, f.rto_ns)
    );
    assert_eq!(p.rx.nak_timeout_ns, 2 * f.rto_ns);
    // At the testbed's 150 packets/s the same ratios: a CNP gap of ~1 s, not the NIC default's
    // 4 packet times (27 ms).
    let slow = plan(150.0 * RankPlan::wire_bytes(f.mtu) as f64);
    let pkt = slow.packet_ns();
    let ratio = slow.cnp_interval_ns as f64 / pkt;
    assert!((ratio - 50_000.0 / f.packet_ns()).abs() < 0.01, "{ratio}");
    assert!(
        slow.cnp_interval_ns > 900_000_000,
        "{}",
        slow.cnp_interval_ns
    );
    assert_eq!(slow.tx.max_outstanding, 64);
}
