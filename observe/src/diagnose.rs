//! What `weft diagnose` samples, as the pure rules of `weft-diagnose` take them: the fabric
//! ([`fabric_of`]), a switch's COUNTERS_DB and STATE_DB rows as a sample ([`switch_sample`],
//! for rows already in hand; the window itself is read by `source::db::Reader`). Only current
//! counters enter a sample (a switch without a live plugin stamping its polls is left out),
//! and a switch with fewer than two samples in the window is [`unknown`]: the rules judge
//! rates, and one sample has none.

use std::collections::{BTreeMap, BTreeSet};

use weft_diagnose::{Drift, End, Fabric, Link, PortSample, QueueSample, SwitchSample, Window};
use weft_sonic_db::FieldValues;
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::CountersRow;
use weft_sonic_schema::state::{PfcWdState, WdStatus};
use weft_topology::Topology;

use crate::read::Unknown;

/// STATE_DB table of entries whose switch read-back differs from APPL_STATE_DB (the plugin's
/// audit), `WEFT_DRIFT|<APPL_STATE_DB key>` with field `state`.
pub const DRIFT_TABLE: &str = weft_sonic_schema::state::DriftState::TABLE;

/// Switches whose counters could not be used in a sample, with the last reason.
pub type Unreadable = BTreeMap<String, Unknown>;

/// Samples a switch needs in a window before the rules' rates say anything about it.
pub const MIN_SAMPLES: usize = 2;

/// The switches of `fabric` the window cannot judge: fewer than [`MIN_SAMPLES`] samples, each
/// with why (the last reason its counters could not be used, when one was seen).
pub fn unknown(fabric: &Fabric, w: &Window, unread: &Unreadable) -> Vec<Unknown> {
    fabric
        .switches
        .iter()
        .filter_map(|sw| {
            let n = w
                .samples
                .iter()
                .filter(|s| s.switches.contains_key(sw))
                .count();
            if n >= MIN_SAMPLES {
                return None;
            }
            Some(unread.get(sw).cloned().unwrap_or_else(|| Unknown {
                switch: sw.clone(),
                data: "no-data",
                detail: format!(
                    "{n} sample(s) with counters in the window: a rate needs {MIN_SAMPLES}"
                ),
            }))
        })
        .collect()
}

/// How a recorded window's fabric differs from the intent's, one line each (empty: the same
/// switches, hosts and cables).
pub fn fabric_mismatch(intent: &Fabric, recorded: &Fabric) -> Vec<String> {
    fn diff(what: &str, a: &BTreeSet<String>, b: &BTreeSet<String>, out: &mut Vec<String>) {
        let only_rec: Vec<&String> = b.difference(a).collect();
        let only_int: Vec<&String> = a.difference(b).collect();
        let show = |v: &[&String]| {
            let mut s: Vec<&str> = v.iter().take(4).map(|x| x.as_str()).collect();
            if v.len() > 4 {
                s.push("...");
            }
            s.join(", ")
        };
        if !only_rec.is_empty() {
            out.push(format!(
                "{} {what} recorded that the intent does not have ({})",
                only_rec.len(),
                show(&only_rec)
            ));
        }
        if !only_int.is_empty() {
            out.push(format!(
                "{} {what} of the intent not in the recording ({})",
                only_int.len(),
                show(&only_int)
            ));
        }
    }
    let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
    let cables = |f: &Fabric| {
        f.links
            .iter()
            .map(|l| {
                let (a, b) = (
                    format!("{}:{}", l.a.node, l.a.port),
                    format!("{}:{}", l.b.node, l.b.port),
                );
                if a <= b {
                    format!("{a}-{b}")
                } else {
                    format!("{b}-{a}")
                }
            })
            .collect::<BTreeSet<_>>()
    };
    let mut out = Vec::new();
    diff(
        "switch(es)",
        &set(&intent.switches),
        &set(&recorded.switches),
        &mut out,
    );
    diff(
        "host(s)",
        &set(&intent.hosts),
        &set(&recorded.hosts),
        &mut out,
    );
    diff("cable(s)", &cables(intent), &cables(recorded), &mut out);
    out
}

/// The rules' view of the intent: cables, hosts, lossless priorities, routing per class.
pub fn fabric_of(t: &Topology) -> Fabric {
    let sw = |i: usize| &t.switches[i];
    let mut links: Vec<Link> = t
        .links
        .iter()
        .map(|l| Link {
            a: End::new(&sw(l.a.switch).name, &sw(l.a.switch).ports[l.a.port].name),
            b: End::new(&sw(l.b.switch).name, &sw(l.b.switch).ports[l.b.port].name),
        })
        .collect();
    for h in &t.hosts {
        let s = sw(h.switch);
        links.push(Link {
            a: End::new(&s.name, &s.ports[h.port].name),
            b: End::new(&h.name, "eth0"),
        });
    }
    Fabric {
        tiers: t
            .switches
            .iter()
            .map(|s| (s.name.clone(), s.role.tier()))
            .collect(),
        switches: t.switches.iter().map(|s| s.name.clone()).collect(),
        hosts: t.hosts.iter().map(|h| h.name.clone()).collect(),
        links,
        lossless: t
            .qos
            .classes
            .iter()
            .filter(|c| c.lossless)
            .map(|c| c.traffic_class)
            .collect(),
        routing: t
            .qos
            .classes
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    format!("{:?}", c.routing).to_ascii_lowercase(),
                )
            })
            .collect(),
        ..Default::default()
    }
}

/// One switch's counters and state, as the rules take them.
pub fn switch_sample(
    counters: &[(String, FieldValues)],
    wd: &[(String, FieldValues)],
    drift: &[(String, FieldValues)],
) -> SwitchSample {
    let mut s = SwitchSample::default();
    for (k, f) in counters {
        match CountersRow::from_fields(k, f) {
            Ok(CountersRow::Port(p)) => {
                let mut ps = PortSample {
                    rx_packets: p.rx_packets.unwrap_or(0),
                    tx_packets: p.tx_packets.unwrap_or(0),
                    rx_bytes: p.rx_bytes.unwrap_or(0),
                    tx_bytes: p.tx_bytes.unwrap_or(0),
                    depth_histogram: p.depth_histogram.map(|h| h.to_vec()).unwrap_or_default(),
                    histogram_shift: p.histogram_shift.unwrap_or(0).min(32) as u8,
                    psn_out_of_order: p.psn_out_of_order,
                    psn_regressions: p.psn_regressions,
                    ..Default::default()
                };
                for (i, c) in p.pfc.iter().enumerate() {
                    ps.pfc_rx_pause[i] = c.rx_pause.unwrap_or(0);
                    ps.pfc_tx_pause[i] = c.tx_pause.unwrap_or(0);
                }
                s.ports.insert(p.port.clone(), ps);
            }
            Ok(CountersRow::Queue(q)) => {
                // A queue that never carried anything says nothing (and would only bloat
                // recorded windows); the rules read a missing queue as zeros.
                if q.packets.unwrap_or(0) == 0
                    && q.ecn_marked.unwrap_or(0) == 0
                    && q.trimmed.unwrap_or(0) == 0
                    && q.wd_detected.unwrap_or(0) == 0
                {
                    continue;
                }
                s.queues.insert(
                    format!("{}:{}", q.port, q.queue),
                    QueueSample {
                        packets: q.packets.unwrap_or(0),
                        ecn_marked: q.ecn_marked.unwrap_or(0),
                        trimmed: q.trimmed.unwrap_or(0),
                        wd_stormed: q.wd_status == Some(WdStatus::Stormed),
                        wd_detected: q.wd_detected.unwrap_or(0),
                    },
                );
            }
            Ok(CountersRow::Switch(sw)) => {
                s.drops = sw.drops.iter().map(|(r, (p, _))| (r.clone(), *p)).collect();
                s.psn_out_of_order = sw.psn_out_of_order.unwrap_or(0);
                s.psn_regressions = sw.psn_regressions.unwrap_or(0);
                s.poll_ms = sw.poll_time_ms;
            }
            _ => {}
        }
    }
    // STATE_DB PFC_WD_STATE is the watchdog's own record; it wins over the COUNTERS copy.
    for (k, f) in wd {
        if let Ok(w) = PfcWdState::from_fields(k, f) {
            let q = s
                .queues
                .entry(format!("{}:{}", w.port, w.priority))
                .or_default();
            q.wd_stormed = w.status == WdStatus::Stormed;
            q.wd_detected = q.wd_detected.max(w.detected);
        }
    }
    for (k, f) in drift {
        let state = f
            .iter()
            .find(|(n, _)| n == "state")
            .map_or_else(|| "differs".to_string(), |(_, v)| v.clone());
        s.drift.push(Drift {
            key: k.clone(),
            state,
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_diagnose::Sample;

    fn small() -> Topology {
        weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example")
    }

    #[test]
    fn a_switch_seen_in_fewer_than_two_samples_is_unknown_with_the_reason_it_was_not_read() {
        let t = small();
        let f = fabric_of(&t);
        let both: BTreeMap<String, SwitchSample> = t
            .switches
            .iter()
            .map(|s| (s.name.clone(), SwitchSample::default()))
            .collect();
        let mut once = both.clone();
        once.remove("leaf1");
        once.remove("leaf2");
        let w = Window {
            fabric: f.clone().into(),
            samples: vec![
                Sample {
                    t_ms: 0,
                    switches: both,
                },
                Sample {
                    t_ms: 1000,
                    switches: once,
                },
            ],
        };
        let mut unread = Unreadable::new();
        unread.insert(
            "leaf2".into(),
            Unknown {
                switch: "leaf2".into(),
                data: "stale",
                detail: "no live plugin".into(),
            },
        );
        let u = unknown(&f, &w, &unread);
        let got: Vec<(&str, &str)> = u.iter().map(|u| (u.switch.as_str(), u.data)).collect();
        assert_eq!(got, [("leaf1", "no-data"), ("leaf2", "stale")]);
        assert!(u[0].detail.contains("1 sample(s)"), "{}", u[0].detail);
    }

    #[test]
    fn a_recording_of_another_fabric_is_told_apart_from_the_intents() {
        let small = fabric_of(&small());
        let k4 = fabric_of(
            &weft_topology::load_file(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../topology/examples/fat-tree-k4.yaml"
            ))
            .expect("example"),
        );
        assert!(fabric_mismatch(&small, &small).is_empty());
        let m = fabric_mismatch(&k4, &small);
        assert!(
            m.iter()
                .any(|l| l.contains("host(s) recorded that the intent does not have")),
            "{m:?}"
        );
    }

    fn fv(pairs: &[(&str, &str)]) -> FieldValues {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn counters_db_rows_become_the_rules_sample() {
        let c = vec![
            (
                "Ethernet0".to_string(),
                fv(&[
                    ("SAI_PORT_STAT_IF_IN_UCAST_PKTS", "10"),
                    ("SAI_PORT_STAT_IF_OUT_UCAST_PKTS", "20"),
                    ("SAI_PORT_STAT_PFC_3_RX_PKTS", "7"),
                ]),
            ),
            (
                "Ethernet0:3".to_string(),
                fv(&[
                    ("SAI_QUEUE_STAT_PACKETS", "5"),
                    ("SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS", "2"),
                ]),
            ),
            (
                "WEFT_SWITCH".to_string(),
                fv(&[
                    ("WEFT_DROP_NO_ROUTE_PKTS", "4"),
                    ("WEFT_PSN_OUT_OF_ORDER_PKTS", "9"),
                ]),
            ),
        ];
        let drift = vec![(
            "P4RT_TABLE:FIXED_IPV4_TABLE:{}".to_string(),
            fv(&[("state", "missing")]),
        )];
        let s = switch_sample(&c, &[], &drift);
        let p = &s.ports["Ethernet0"];
        assert_eq!((p.rx_packets, p.tx_packets, p.pfc_rx_pause[3]), (10, 20, 7));
        assert_eq!(s.queues["Ethernet0:3"].ecn_marked, 2);
        assert_eq!(s.drops["no_route"], 4);
        assert_eq!(s.psn_out_of_order, 9);
        assert_eq!(s.drift[0].state, "missing");
    }
}
