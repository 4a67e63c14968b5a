//! The judging functions on recorded inputs: COUNTERS_DB rows as the plugins wrote them on the
//! testbed (`tests/data/*.counters.json`, each recorded from the diagnose window named in its
//! `from`: the window's first and last sample, in the wire form the plugin writes with
//! `weft-sonic-schema`; `record_counters_dumps` below writes them again).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weft_diagnose::{SwitchSample, Window};
use weft_observe::counters::switch_queue_rows;
use weft_observe::diagnose::switch_sample;
use weft_observe::read::SwitchRead;
use weft_observe::top::{Snapshot, Sort, view};
use weft_sonic_db::FieldValues;
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{
    CountersRow, PfcCounts, PortCounters, QueueCounters, SwitchCounters,
};
use weft_sonic_schema::state::WdStatus;
use weft_topology::Topology;

/// One switch's COUNTERS_DB `COUNTERS` rows and STATE_DB `WEFT_DRIFT` rows at one instant, and
/// the rules' sample the diagnose recording holds for it.
#[derive(Debug, Serialize, Deserialize)]
struct SwitchDump {
    counters: Vec<(String, FieldValues)>,
    drift: Vec<(String, FieldValues)>,
    sample: SwitchSample,
}

#[derive(Debug, Serialize, Deserialize)]
struct Dump {
    t_ms: u64,
    switches: BTreeMap<String, SwitchDump>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Recording {
    /// The diagnose window these rows were recorded from.
    from: String,
    dumps: Vec<Dump>,
}

const RECORDINGS: [&str; 3] = [
    "pfc_storm--leaf2-h2--seed16-0",
    "congestion--leaf4-h1--1",
    "healthy--all--1",
];

fn data(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format!("{name}.counters.json"))
}

fn recording(name: &str) -> Recording {
    let text = std::fs::read_to_string(data(name)).expect("recorded counters");
    serde_json::from_str(&text).expect("a recording")
}

fn small() -> Topology {
    weft_topology::load_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topology/examples/leaf-spine-small.yaml"
    ))
    .expect("example")
}

fn snapshot(d: &Dump) -> Snapshot {
    Snapshot {
        switches: d
            .switches
            .iter()
            .map(|(sw, s)| {
                let rows: Vec<CountersRow> = s
                    .counters
                    .iter()
                    .filter_map(|(k, f)| CountersRow::from_fields(k, f).ok())
                    .collect();
                (sw.clone(), SwitchRead::rows(Ok(rows)))
            })
            .collect(),
    }
}

/// The last two dumps of a recording as `weft top` would see them.
fn top_of(name: &str) -> weft_observe::top::TopView {
    let r = recording(name);
    let (a, b) = (&r.dumps[0], &r.dumps[r.dumps.len() - 1]);
    let dt = (b.t_ms - a.t_ms) as f64 / 1000.0;
    view(
        &small(),
        &snapshot(a),
        &snapshot(b),
        dt,
        &BTreeMap::new(),
        Sort::Utilisation,
        "",
    )
}

#[test]
fn recorded_counters_rows_read_back_as_the_samples_the_rules_were_recorded_with() {
    for name in RECORDINGS {
        let r = recording(name);
        assert_eq!(r.dumps.len(), 2, "{name}");
        for d in &r.dumps {
            assert_eq!(d.switches.len(), 6, "{name}: every switch");
            for (sw, s) in &d.switches {
                assert!(!s.counters.is_empty(), "{name} {sw}");
                let got = switch_sample(&s.counters, &[], &s.drift);
                assert_eq!(got, s.sample, "{name} {sw} at {} ms", d.t_ms);
            }
        }
    }
}

#[test]
fn top_names_the_port_that_receives_the_storms_pause_frames_and_no_other() {
    let v = top_of("pfc_storm--leaf2-h2--seed16-0");
    assert_eq!(v.pfc.len(), 1, "{:?}", v.pfc);
    let p = &v.pfc[0];
    assert_eq!(
        (p.switch.as_str(), p.port.as_str(), p.priority),
        ("leaf2", "Ethernet4", 3)
    );
    // 167 PAUSE frames over the 1,002 ms between the window's first and last sample.
    assert!((p.rx_pause_per_s - 167.0 / 1.002).abs() < 1e-6, "{p:?}");
    assert_eq!(p.tx_pause_per_s, 0.0);
    let t = small();
    let h = &t.hosts[t.host_index("leaf2-h2").expect("leaf2-h2")];
    assert_eq!(
        t.switches[h.switch].ports[h.port].name, "Ethernet4",
        "the storming host's port"
    );
    assert!(v.unknown.is_empty(), "{:?}", v.unknown);
}

#[test]
fn top_ranks_the_congested_hosts_queue_first_by_ecn_marks() {
    let v = top_of("congestion--leaf4-h1--1");
    let q = &v.queues[0];
    assert_eq!(
        (q.switch.as_str(), q.port.as_str(), q.queue),
        ("leaf4", "Ethernet0", 3)
    );
    assert!((q.ecn_marked_per_s - 1537.0 / 5.002).abs() < 1e-6, "{q:?}");
    assert!(
        v.queues[1..].iter().all(|o| o.ecn_marked_per_s == 0.0),
        "{:?}",
        &v.queues[1..]
    );
}

#[test]
fn a_healthy_recording_shows_no_pause_frames_and_no_ecn_marks() {
    let v = top_of("healthy--all--1");
    assert!(v.pfc.is_empty(), "{:?}", v.pfc);
    assert!(v.queues.iter().all(|q| q.ecn_marked_per_s == 0.0));
    assert!(
        v.queues.iter().any(|q| q.tx_pps > 0.0),
        "traffic was flowing"
    );
}

#[test]
fn show_queues_lists_a_recorded_switchs_queues_in_port_order_and_nonzero_keeps_the_busy_ones() {
    let r = recording("congestion--leaf4-h1--1");
    let leaf4 = &r.dumps[1].switches["leaf4"];
    let all = switch_queue_rows("leaf4", &leaf4.counters, false);
    let ports: Vec<&str> = all.iter().map(|q| q.port.as_str()).collect();
    let mut numeric = ports.clone();
    numeric.sort_by_key(|p| p.trim_start_matches("Ethernet").parse::<u32>().unwrap_or(0));
    assert_eq!(ports, numeric, "Ethernet4 before Ethernet12");
    let q = all
        .iter()
        .find(|q| q.port == "Ethernet0" && q.queue == 3)
        .expect("the congested queue");
    assert_eq!(
        q.ecn_marked,
        Some(leaf4.sample.queues["Ethernet0:3"].ecn_marked)
    );
    let busy = switch_queue_rows("leaf4", &leaf4.counters, true);
    assert!(
        busy.iter()
            .all(|q| q.packets.unwrap_or(0) > 0 || q.ecn_marked.unwrap_or(0) > 0)
    );
    assert_eq!(
        busy.len(),
        all.len(),
        "the recording holds only queues that counted"
    );
}

/// The rows the plugin writes for one switch's sample.
fn rows_of(s: &SwitchSample) -> Vec<(String, FieldValues)> {
    let mut rows = Vec::new();
    for (port, p) in &s.ports {
        let mut pc = PortCounters {
            port: port.clone(),
            rx_packets: Some(p.rx_packets),
            tx_packets: Some(p.tx_packets),
            histogram_shift: Some(u64::from(p.histogram_shift)),
            ..Default::default()
        };
        for i in 0..pc.pfc.len() {
            pc.pfc[i] = PfcCounts {
                rx_pause: Some(p.pfc_rx_pause[i]),
                tx_pause: Some(p.pfc_tx_pause[i]),
                ..Default::default()
            };
        }
        if let Ok(h) = p.depth_histogram.as_slice().try_into() {
            pc.depth_histogram = Some(h);
        }
        rows.push((pc.key(), pc.to_fields()));
    }
    for (key, q) in &s.queues {
        let Some((port, queue)) = key.split_once(':') else {
            continue;
        };
        let qc = QueueCounters {
            port: port.to_string(),
            queue: queue.parse().unwrap_or(0),
            packets: Some(q.packets),
            ecn_marked: Some(q.ecn_marked),
            wd_status: q.wd_stormed.then_some(WdStatus::Stormed),
            wd_detected: Some(q.wd_detected),
            ..Default::default()
        };
        rows.push((qc.key(), qc.to_fields()));
    }
    let sc = SwitchCounters {
        drops: s.drops.iter().map(|(r, p)| (r.clone(), (*p, 0))).collect(),
        psn_out_of_order: Some(s.psn_out_of_order),
        psn_regressions: Some(s.psn_regressions),
        ..Default::default()
    };
    rows.push((sc.key(), sc.to_fields()));
    rows
}

/// Writes `tests/data/*.counters.json` again from the diagnose recordings:
/// `cargo test -p weft-observe --test recorded -- --ignored`.
#[test]
#[ignore = "writes the recorded inputs"]
fn record_counters_dumps() {
    for name in RECORDINGS {
        let from = format!("diagnose/tests/data/{name}.json");
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(&from);
        let w: Window =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("window")).expect("window");
        let ends = [&w.samples[0], &w.samples[w.samples.len() - 1]];
        let dumps = ends
            .iter()
            .map(|s| Dump {
                t_ms: s.t_ms,
                switches: s
                    .switches
                    .iter()
                    .map(|(sw, ss)| {
                        let drift = ss
                            .drift
                            .iter()
                            .map(|d| (d.key.clone(), vec![("state".to_string(), d.state.clone())]))
                            .collect();
                        let dump = SwitchDump {
                            counters: rows_of(ss),
                            drift,
                            sample: ss.clone(),
                        };
                        (sw.clone(), dump)
                    })
                    .collect(),
            })
            .collect();
        let r = Recording { from, dumps };
        std::fs::write(data(name), serde_json::to_string(&r).expect("json") + "\n").expect("write");
    }
}
