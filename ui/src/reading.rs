//! One read of every switch, as the page uses it: per switch its port states, its plugin, its
//! counters and the sample `weft diagnose`'s rules take, each kept apart as a
//! [`SwitchRead`] (read, nothing there, old, not answered). Both sources (the switch DBs and
//! Prometheus) end here, through the same conversion of COUNTERS_DB-form rows
//! ([`SwitchReading::from_rows`]), so the page judges them alike.

use std::collections::BTreeMap;

use weft_diagnose::SwitchSample;
use weft_observe::read::SwitchRead;
use weft_sonic_db::FieldValues;
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::CountersRow;
use weft_sonic_schema::state::{PluginStatus, PortState, WdStatus};
use weft_topology::Switch;

/// A port's totals since the switch started, as one read saw them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PortTotals {
    pub rx_packets: Option<u64>,
    pub rx_bytes: Option<u64>,
    pub tx_packets: Option<u64>,
    pub tx_bytes: Option<u64>,
    /// CE marks of every egress queue of the port.
    pub ecn_marked: u64,
    /// PAUSE frames received / sent, every priority.
    pub pause_rx: u64,
    pub pause_tx: u64,
    /// A queue of the port the PFC watchdog holds stormed.
    pub stormed: bool,
    /// Packets the port's queues trimmed (`None`: no queue row of the port carries the
    /// counter, e.g. a pipeline without trimming).
    pub trimmed: Option<u64>,
}

/// A switch's counters, by the topology's port index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CounterView {
    pub ports: Vec<Option<PortTotals>>,
    /// Drops by reason (lower case), packets.
    pub drops: BTreeMap<String, u64>,
}

/// What the page shows of a switch's plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginInfo {
    /// `running`, `syncing`, `waiting-for-switch`, ...
    pub state: String,
    /// Unix ms the source last heard of it (the status row's `updated_ms`, the sample's time).
    pub updated_ms: u64,
    pub pid: Option<u32>,
    pub uptime_s: Option<u64>,
    /// Keys written to APPL_DB and not yet taken.
    pub pending_keys: Option<u64>,
}

impl PluginInfo {
    pub fn of_status(p: &PluginStatus) -> PluginInfo {
        PluginInfo {
            state: p.state.as_str().to_string(),
            updated_ms: p.updated_ms,
            pid: Some(p.pid),
            uptime_s: Some(p.uptime_s),
            pending_keys: Some(p.pending_keys),
        }
    }
}

/// One switch, one read.
#[derive(Debug, Clone)]
pub struct SwitchReading {
    /// STATE_DB PORT_TABLE by port index: `Some(true)` up, `Some(false)` down (carrier or
    /// admin), `None` no row.
    pub ports: SwitchRead<Vec<Option<bool>>>,
    /// `NoData`: no live plugin (its status row expires with it) or no metrics of it.
    pub plugin: SwitchRead<PluginInfo>,
    pub counters: SwitchRead<CounterView>,
    /// What the diagnosis rules take of this switch (`None` when its counters were not read).
    pub sample: Option<SwitchSample>,
}

impl SwitchReading {
    /// Nothing read: the source has not got to it, or gave up.
    pub fn unread(e: weft_observe::read::ReadError) -> SwitchReading {
        SwitchReading {
            ports: SwitchRead::Unreachable(e.clone()),
            plugin: SwitchRead::Unreachable(e.clone()),
            counters: SwitchRead::Unreachable(e),
            sample: None,
        }
    }
}

/// Every switch (by index), read at `t_ms` (Unix ms).
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub t_ms: u64,
    pub switches: Vec<SwitchReading>,
    /// How long the read took, ms.
    pub took_ms: u64,
}

/// Port states by port index, from PORT_TABLE rows.
pub fn port_states(sw: &Switch, rows: &BTreeMap<String, FieldValues>) -> Vec<Option<bool>> {
    let mut out = vec![None; sw.ports.len()];
    for (k, f) in rows {
        if let (Some(i), Ok(p)) = (sw.port_index(k), PortState::from_fields(k, f)) {
            out[i] = Some(p.is_up());
        }
    }
    out
}

/// The page's counters and the rules' sample of one switch, from its COUNTERS_DB `COUNTERS`
/// rows, STATE_DB `PFC_WD_STATE` rows and drift rows (the plugin's own forms: a source that
/// reads elsewhere writes them in this form first).
pub fn counters_of(
    sw: &Switch,
    counters: &[(String, FieldValues)],
    wd: &[(String, FieldValues)],
    drift: &[(String, FieldValues)],
) -> (CounterView, SwitchSample) {
    let mut v = CounterView {
        ports: vec![None; sw.ports.len()],
        drops: BTreeMap::new(),
    };
    for (k, f) in counters {
        match CountersRow::from_fields(k, f) {
            Ok(CountersRow::Port(p)) => {
                if let Some(i) = sw.port_index(&p.port) {
                    let t = v.ports[i].get_or_insert_with(PortTotals::default);
                    t.rx_packets = p.rx_packets;
                    t.rx_bytes = p.rx_bytes;
                    t.tx_packets = p.tx_packets;
                    t.tx_bytes = p.tx_bytes;
                    t.pause_rx = p.pfc.iter().filter_map(|c| c.rx_pause).sum();
                    t.pause_tx = p.pfc.iter().filter_map(|c| c.tx_pause).sum();
                }
            }
            Ok(CountersRow::Queue(q)) => {
                if let Some(i) = sw.port_index(&q.port) {
                    let t = v.ports[i].get_or_insert_with(PortTotals::default);
                    t.ecn_marked += q.ecn_marked.unwrap_or(0);
                    t.stormed |= q.wd_status == Some(WdStatus::Stormed);
                    if let Some(n) = q.trimmed {
                        t.trimmed = Some(t.trimmed.unwrap_or(0) + n);
                    }
                }
            }
            Ok(CountersRow::Switch(s)) => {
                v.drops = s
                    .drops
                    .iter()
                    .map(|(r, (p, _))| (r.to_ascii_lowercase(), *p))
                    .collect();
            }
            _ => {}
        }
    }
    let sample = weft_observe::diagnose::switch_sample(counters, wd, drift);
    // The watchdog's own record (STATE_DB) wins, as it does for the rules.
    for (q, s) in &sample.queues {
        if let Some((port, _)) = q.split_once(':')
            && let Some(i) = sw.port_index(port)
            && let Some(t) = v.ports[i].as_mut()
        {
            t.stormed |= s.wd_stormed;
        }
    }
    (v, sample)
}

impl SwitchReading {
    /// A switch whose STATE_DB and COUNTERS_DB rows were read (each `Err` when its DB did not
    /// answer): ports, plugin, counters and sample.
    pub fn from_rows(
        sw: &Switch,
        state: Result<
            &BTreeMap<String, BTreeMap<String, FieldValues>>,
            &weft_observe::read::ReadError,
        >,
        counters: Result<&[(String, FieldValues)], &weft_observe::read::ReadError>,
    ) -> SwitchReading {
        let empty = BTreeMap::new();
        let table = |m: &BTreeMap<String, BTreeMap<String, FieldValues>>, t: &str| {
            m.get(t).cloned().unwrap_or_default()
        };
        let (ports, plugin, wd, drift) = match state {
            Ok(m) => {
                let ports = port_states(sw, m.get(PortState::TABLE).unwrap_or(&empty));
                let plugin = m
                    .get(PluginStatus::TABLE)
                    .and_then(|t| t.get(weft_sonic_schema::state::PLUGIN_STATUS_KEY))
                    .and_then(|f| {
                        PluginStatus::from_fields(weft_sonic_schema::state::PLUGIN_STATUS_KEY, f)
                            .ok()
                    });
                let any_port = ports.iter().any(Option::is_some);
                (
                    if any_port {
                        SwitchRead::Ok(ports)
                    } else {
                        SwitchRead::NoData
                    },
                    plugin.map_or(SwitchRead::NoData, |p| {
                        SwitchRead::Ok(PluginInfo::of_status(&p))
                    }),
                    table(m, weft_sonic_schema::state::PfcWdState::TABLE)
                        .into_iter()
                        .collect::<Vec<_>>(),
                    table(m, weft_observe::diagnose::DRIFT_TABLE)
                        .into_iter()
                        .collect::<Vec<_>>(),
                )
            }
            Err(e) => (
                SwitchRead::Unreachable(e.clone()),
                SwitchRead::Unreachable(e.clone()),
                Vec::new(),
                Vec::new(),
            ),
        };
        let (counters, sample) = match counters {
            Ok([]) => (SwitchRead::NoData, None),
            Ok(rows) => {
                let (v, s) = counters_of(sw, rows, &wd, &drift);
                (SwitchRead::Ok(v), Some(s))
            }
            Err(e) => (SwitchRead::Unreachable(e.clone()), None),
        };
        SwitchReading {
            ports,
            plugin,
            counters,
            sample,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_sonic_schema::counters::{PortCounters, QueueCounters};

    fn topo() -> weft_topology::Topology {
        weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example")
    }

    fn fv(pairs: &[(&str, &str)]) -> FieldValues {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn counters_rows_become_port_totals_by_index_with_queues_summed_and_the_sample_beside() {
        let t = topo();
        let sw = &t.switches[t.switch_index("leaf1").expect("leaf1")];
        let mut p = PortCounters {
            port: "Ethernet8".into(),
            rx_packets: Some(10),
            tx_packets: Some(20),
            tx_bytes: Some(2000),
            ..Default::default()
        };
        p.pfc[3].rx_pause = Some(7);
        let q3 = QueueCounters {
            port: "Ethernet8".into(),
            queue: 3,
            packets: Some(5),
            ecn_marked: Some(2),
            ..Default::default()
        };
        let q0 = QueueCounters {
            port: "Ethernet8".into(),
            queue: 0,
            packets: Some(5),
            ecn_marked: Some(1),
            ..Default::default()
        };
        let rows = vec![
            (p.key(), p.to_fields()),
            (q3.key(), q3.to_fields()),
            (q0.key(), q0.to_fields()),
            (
                "WEFT_SWITCH".to_string(),
                fv(&[("WEFT_DROP_NO_ROUTE_PKTS", "4")]),
            ),
        ];
        let wd = vec![(
            "Ethernet8|3".to_string(),
            fv(&[
                ("status", "stormed"),
                ("action", "drop"),
                ("detected", "1"),
                ("restored", "0"),
                ("timestamp_ms", "1"),
            ]),
        )];
        let (v, s) = counters_of(sw, &rows, &wd, &[]);
        let i = sw.port_index("Ethernet8").expect("port");
        let pt = v.ports[i].expect("totals");
        assert_eq!(
            (pt.rx_packets, pt.tx_bytes, pt.pause_rx, pt.ecn_marked),
            (Some(10), Some(2000), 7, 3)
        );
        assert!(pt.stormed, "the watchdog's STATE_DB record marks the port");
        assert_eq!(v.drops["no_route"], 4);
        assert!(v.ports[sw.port_index("Ethernet0").expect("port")].is_none());
        assert_eq!(s.ports["Ethernet8"].pfc_rx_pause[3], 7);
        assert!(s.queues["Ethernet8:3"].wd_stormed);
    }

    #[test]
    fn a_db_that_answered_with_nothing_is_no_data_and_one_that_did_not_is_unreachable() {
        let t = topo();
        let sw = &t.switches[0];
        let empty = BTreeMap::new();
        let r = SwitchReading::from_rows(sw, Ok(&empty), Ok(&[]));
        assert_eq!(r.ports, SwitchRead::NoData);
        assert_eq!(r.plugin, SwitchRead::NoData);
        assert_eq!(r.counters, SwitchRead::NoData);
        assert!(r.sample.is_none());
        let e = weft_observe::read::ReadError::Unreachable {
            db: "x".into(),
            reason: "refused".into(),
        };
        let r = SwitchReading::from_rows(sw, Err(&e), Err(&e));
        assert!(r.ports.error().is_some() && r.plugin.error().is_some());
        assert!(r.counters.error().is_some());
    }
}
