//! Packet trimming end to end on the testbed: the small leaf-spine with its RoCE class lossy and
//! trimmable (`trim: {size: 256B, dscp: 11, traffic_class: 7}`, PFC off), applied by `weft
//! apply` through the plugins (CONFIG_DB's `SWITCH_TRIMMING` and trim buffer profiles → the
//! pipeline's trim entries), every queue at 150 packets/s (the NICs' rate), and `weft-traffic`
//! ranks in an incast 5:1 toward leaf4-h1. The senders carry the packet model's DCQCN timers in
//! packet times (`FabricSpec::timing`, without its long timeout), so their first burst outruns
//! the first CNP as it does at line rate, and queues fill.
//!
//! Asserted, each a count a different component keeps:
//! - the switches trimmed packets of the RoCE class (COUNTERS_DB, as the plugin read them);
//! - the receiver got trimmed headers (DSCP 11) and NACKed them, no more than were trimmed;
//! - the senders got those NACKs and sent each asked-for packet again;
//! - the incast completed: every byte placed, every message acknowledged.
//!
//! Needs root, BMv2 and `weft-traffic`; without BMv2 it prints SKIPPED (WEFT_REQUIRE_BMV2=1
//! makes that a failure).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::bed::{self, Bed, Needs};
use weft_simulate::transport::FabricSpec;
use weft_testbed::workload::{self, Spec};
use weft_traffic::collective::Kind;
use weft_traffic::engine::Timing;

const TEST: &str = "scenario_trim";
/// Receiver first; every host but leaf1-h2 and leaf3-h2 sends.
const INCAST: [&str; 6] = [
    "leaf4-h1", "leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf2-h2", "leaf4-h2",
];
const RATE_PPS: u64 = 150;

#[test]
fn an_incast_into_a_trimming_fabric_is_trimmed_nacked_resent_and_completes() {
    let needs = Needs {
        cli: true,
        bins: &[("weft-traffic", "weft-traffic")],
        ..Needs::default()
    };
    let Some(programs) = bed::programs(TEST, &needs) else {
        return;
    };
    let f = Bed::up_applied(
        &programs,
        "trm",
        |t| bed::lossy_roce(t, true),
        &["--bmv2-queue-scale", "0.18", "--counter-interval-ms", "300"],
    );
    let cli = programs.bmv2.with_file_name("simple_switch_CLI");
    let st = f.state();
    workload::set_port_rates(&st, &cli, RATE_PPS).expect("set_queue_rate");
    let traffic = PathBuf::from(env!("CARGO_BIN_EXE_weft")).with_file_name("weft-traffic");

    let mut spec = Spec::new(
        &f.topo,
        Kind::Incast,
        INCAST.iter().map(|r| r.to_string()).collect(),
        256 << 10,
    );
    assert_eq!(
        spec.trim_dscp,
        Some(11),
        "the ranks learn the trimmed DSCP from the intent"
    );
    spec.rate_pps = RATE_PPS as f64;
    spec.warmup = 0;
    spec.iterations = 1;
    spec.deadline = Duration::from_secs(90);
    spec.timing = Some(Timing {
        rto: None,
        ..FabricSpec::default().timing()
    });

    let before = workload::trimmed_packets(&st, spec.traffic_class).expect("COUNTERS_DB");
    let o = workload::run_workload(&st, &f.topo, &traffic, &spec).expect("incast");
    let (rx_trimmed, trim_naks, resent) = (o.trimmed_received, o.trim_naks, o.retransmitted);
    // The plugins poll every 300 ms: wait for a count that covers the whole run.
    let mut trimmed = 0;
    bed::wait_until(Duration::from_secs(10), || {
        trimmed = workload::trimmed_packets(&st, spec.traffic_class)
            .unwrap_or(before)
            .saturating_sub(before);
        trimmed > 0 && trimmed >= rx_trimmed
    });
    println!(
        "incast 5:1 × 256 KiB into leaf4-h1 at {RATE_PPS} packets/s: complete {}, {:.2} s, \
         message p99 {:.2} s; switches trimmed {trimmed}; receiver got {rx_trimmed} trimmed \
         headers; senders got {trim_naks} trim NACKs, resent {resent}, \
         {} timeouts; errors {:?}",
        o.complete, o.seconds, o.message_p99_s, o.timeouts, o.errors
    );
    assert!(
        o.complete,
        "the incast did not complete: {:?}; logs in {}",
        o.errors,
        f.dir.display()
    );
    assert_eq!(o.bytes_received, o.bytes_expected, "bytes placed");
    assert!(trimmed > 0, "no switch trimmed a packet of the incast");
    assert!(
        rx_trimmed > 0,
        "the switches trimmed {trimmed} packets but the receiver saw no trimmed header"
    );
    assert!(
        rx_trimmed <= trimmed,
        "the receiver saw {rx_trimmed} trimmed headers, more than the {trimmed} the switches trimmed"
    );
    assert!(
        trim_naks > 0 && trim_naks <= rx_trimmed,
        "senders got {trim_naks} trim NACKs for {rx_trimmed} trimmed headers received"
    );
    assert!(
        resent >= trim_naks,
        "senders resent {resent} packets for {trim_naks} trim NACKs"
    );
}
