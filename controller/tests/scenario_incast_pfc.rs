//! Congestion scenarios on the small leaf-spine example, emulated: real BMv2 per switch, real
//! redis-server per switch, real plugins, hosts in network namespaces. Needs root and BMv2;
//! without BMv2 it prints SKIPPED (WEFT_REQUIRE_BMV2=1 makes it fail).
//!
//! One testbed, two phases:
//! 1. Incast: four hosts send paced ECT(0) RoCE-class UDP to one receiver whose leaf port is
//!    rate-limited with BMv2's `set_queue_rate`, so its queue builds: the receiver sees CE marks
//!    and the leaf's `SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS` in COUNTERS_DB rises.
//! 2. PFC storm: a host keeps pausing its leaf port on priority 3; the plugin's watchdog declares
//!    the storm (STATE_DB `PFC_WD_STATE`, the `pfc_watchdog_table` drop entry read back with the
//!    independent p4rt-dump, lossless traffic toward the port dropped), and restores the queue
//!    once the pauses stop.

mod common;

use std::time::{Duration, Instant};

use common::bed::{self, Bed, Needs, wait_until};

const TEST: &str = "scenario_incast_pfc";
/// DSCP 26 (the example's lossless `roce` class) with ECT(0).
const TOS_ROCE_ECT0: &str = "106";

/// Scenario-specific reads and loads on the shared testbed.
impl Bed {
    /// `pfc_watchdog_table` of one switch, read by the independent p4rt_dump.py.
    fn watchdog_entries(&self, switch: &str) -> Vec<serde_json::Value> {
        let st = self.state();
        let sw = st.switch(switch).expect("switch");
        let v = bed::p4rt_dump(&st.netns, &sw.p4rt_address, sw.device_id).expect("p4rt_dump.py");
        v["tables"][weft_p4::tables::pfc_watchdog_table::NAME]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

#[test]
fn incast_marks_ecn_at_the_receiver_and_a_pfc_storm_is_stopped_by_the_watchdog_and_restored() {
    let needs = Needs {
        cli: true,
        venv: true,
        ..Needs::default()
    };
    let Some(programs) = bed::programs(TEST, &needs) else {
        return;
    };
    // Counters every 300 ms so COUNTERS_DB follows the short phases.
    let mut f = Bed::up_applied(&programs, "ipf", |t| t, &["--counter-interval-ms", "300"]);
    let wd = f.topo.qos.watchdog.clone();
    let dir = f.dir.clone();

    // 1. Incast toward leaf4-h1: four senders, 250 pps each, into a port drained at 100 pps.
    let (rx_sw, rx_port) = ("leaf4", "Ethernet0");
    let qkey = format!("COUNTERS:{rx_port}:3");
    let ecn_field = "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS";
    let marks_before = f.hget_u64(rx_sw, 2, &qkey, ecn_field);
    let pid4 = f.port_id(rx_sw, rx_port);
    let r = f.bmv2_cli(rx_sw, &format!("set_queue_rate 100 {pid4}"));
    assert!(!r.contains("Error"), "set_queue_rate: {r}");
    let senders = ["leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf4-h2"];
    let rep = f.incast(&senders, "leaf4-h1", 250, 3.0, TOS_ROCE_ECT0);
    // Undo the limit (BMv2: rate 0 = unlimited) so the storm phase sees a normal port.
    f.bmv2_cli(rx_sw, &format!("set_queue_rate 0 {pid4}"));
    let mut marks_after = marks_before;
    wait_until(Duration::from_secs(10), || {
        marks_after = f.hget_u64(rx_sw, 2, &qkey, ecn_field);
        marks_after > marks_before
    });
    let queued = f.hget_u64(rx_sw, 2, &qkey, "SAI_QUEUE_STAT_PACKETS");
    println!(
        "incast {} → leaf4-h1 (4 × 250 pps ECT(0) DSCP 26 for 3 s into 100 pps): \
         received {}, CE-marked at the receiver {}; {rx_sw} {qkey} {ecn_field} {marks_before} → {marks_after} \
         (queue 3 packets sent {queued})",
        senders.join("+"),
        rep["received"],
        rep["ce_marked"],
    );
    assert!(
        rep["received"].as_u64().unwrap_or(0) > 0,
        "nothing arrived: {rep}"
    );
    assert!(
        rep["ce_marked"].as_u64().unwrap_or(0) > 0,
        "no CE marks at the receiver under incast: {rep}"
    );
    assert!(
        marks_after > marks_before,
        "the switch's ECN mark counter did not rise ({marks_before} → {marks_after})"
    );

    // 2. PFC storm from leaf1-h1 toward leaf1 Ethernet0, priority 3 (the lossless class).
    let (sw, port) = ("leaf1", "Ethernet0");
    let port_id = f.port_id(sw, port);
    let wd_key = format!("PFC_WD_STATE|{port}|3");
    let status = |f: &Bed| f.hget(sw, 6, &wd_key, "status").unwrap_or_default();
    assert_eq!(f.watchdog_entries(sw).len(), 0, "no storm yet");
    let rx_field = "SAI_PORT_STAT_PFC_3_RX_PKTS";
    let pauses_before = f.hget_u64(sw, 2, &format!("COUNTERS:{port}"), rx_field);
    f.start_storm("leaf1-h1", 30);
    let t_storm = Instant::now();
    let detected = wait_until(Duration::from_secs(15), || status(&f) == "stormed");
    println!(
        "PFC storm on {sw}:{port} prio 3 (PAUSE every 5 ms, detection_time {} ms, poll {} ms): \
         declared stormed after {:?}",
        wd.detection_time.as_millis(),
        wd.poll_interval.as_millis(),
        detected.map(|_| t_storm.elapsed())
    );
    assert!(
        detected.is_some(),
        "the watchdog did not declare the storm; STATE_DB {wd_key} status {:?}; plugin log in {}",
        status(&f),
        dir.display()
    );
    let entries = f.watchdog_entries(sw);
    println!("{sw} pfc_watchdog_table while stormed: {entries:?}");
    assert!(
        entries.iter().any(|e| {
            e["match"]["port"].as_u64() == Some(u64::from(port_id))
                && e["match"]["priority"].as_u64() == Some(3)
                && e["action"]
                    .as_str()
                    .is_some_and(|a| a.ends_with("pfc_watchdog_drop"))
        }),
        "no drop entry for ({port_id}, 3): {entries:?}"
    );
    // The action acts: lossless traffic toward the stormed port is dropped, not queued.
    let drops_key = "COUNTERS:WEFT_SWITCH";
    let drops_field = "WEFT_DROP_PFC_WATCHDOG_PKTS";
    let drops_before = f.hget_u64(sw, 2, drops_key, drops_field);
    let during = f.incast(&["leaf1-h2"], "leaf1-h1", 200, 1.0, TOS_ROCE_ECT0);
    let mut drops_after = drops_before;
    wait_until(Duration::from_secs(5), || {
        drops_after = f.hget_u64(sw, 2, drops_key, drops_field);
        drops_after > drops_before
    });
    let pauses = f.hget_u64(sw, 2, &format!("COUNTERS:{port}"), rx_field) - pauses_before;
    println!(
        "during the storm: leaf1-h2 → leaf1-h1 RoCE class received {} of 200; \
         {drops_field} {drops_before} → {drops_after}; {rx_field} +{pauses}",
        during["received"]
    );
    assert!(
        during["received"].as_u64().unwrap_or(0) <= 20,
        "the stormed queue still forwards: {during}"
    );
    assert!(drops_after > drops_before, "no watchdog drops counted");
    assert!(pauses > 0, "the PAUSE frames were not counted");

    // Stop the storm: restored after restoration_time without PAUSE.
    f.stop("storm");
    let t_stop = Instant::now();
    let restored = wait_until(Duration::from_secs(15), || status(&f) == "operational");
    println!(
        "storm stopped: restored after {:?} (restoration_time {} ms); STATE_DB {wd_key}: detected {:?} restored {:?}",
        restored.map(|_| t_stop.elapsed()),
        wd.restoration_time.as_millis(),
        f.hget(sw, 6, &wd_key, "detected"),
        f.hget(sw, 6, &wd_key, "restored"),
    );
    assert!(restored.is_some(), "not restored: {:?}", status(&f));
    // A lower bound only (a loaded machine makes it later, never earlier): the pauses sent up
    // to the stop must still hold the queue stormed for most of restoration_time.
    assert!(
        restored.unwrap_or_default() + Duration::from_millis(200)
            >= Duration::from_millis(wd.restoration_time.as_millis()),
        "restored long before restoration_time"
    );
    let gone = wait_until(Duration::from_secs(10), || {
        f.watchdog_entries(sw).is_empty()
    });
    assert!(gone.is_some(), "the drop entry stayed after restoration");
    let after = f.incast(&["leaf1-h2"], "leaf1-h1", 200, 1.0, TOS_ROCE_ECT0);
    println!(
        "after restoration: leaf1-h2 → leaf1-h1 RoCE class received {} of 200",
        after["received"]
    );
    assert!(
        after["received"].as_u64().unwrap_or(0) >= 180,
        "lossless traffic does not flow again: {after}"
    );
}
