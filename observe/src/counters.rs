//! What `weft show queues` (SONiC's `show queue counters`, across switches) and
//! `weft show pfcwd` (`show pfcwd stats`) list, from each switch's COUNTERS_DB, STATE_DB and
//! CONFIG_DB. Counters that are not current and a watchdog no live plugin runs make their
//! switch `unknown`: a queue is "operational" only when a running plugin watches it.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use weft_sonic_db::{FieldValues, SonicDbId};
use weft_sonic_schema::Row;
use weft_sonic_schema::config::{PfcWd, PfcWdAction, PortQosMap};
use weft_sonic_schema::counters::{CountersRow, PortCounters, QueueCounters};
use weft_sonic_schema::state::{PfcWdState, WdStatus};
use weft_topology::{SwitchIdx, Topology};

use crate::read::{ReadError, Staleness, SwitchRead, Unknown, dump, plugin_status, read_counters};

/// `Ethernet12` → 12, so ports sort as SONiC lists them.
fn port_order(p: &str) -> (u64, String) {
    (
        p.trim_start_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap_or(u64::MAX),
        p.to_string(),
    )
}

/// Switches whose data could not be used, with why.
pub type Unread = Vec<Unknown>;

#[derive(Debug, Clone, Serialize)]
pub struct QueueRow {
    pub switch: String,
    pub port: String,
    pub queue: u8,
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
    pub ecn_marked: Option<u64>,
    /// PFC PAUSE frames this port sent / received for the queue's priority.
    pub pfc_tx: Option<u64>,
    pub pfc_rx: Option<u64>,
}

/// One switch's queue rows from its COUNTERS_DB rows, ports in SONiC's order.
pub fn switch_queue_rows(
    switch: &str,
    raw: &[(String, FieldValues)],
    nonzero: bool,
) -> Vec<QueueRow> {
    let mut ports: BTreeMap<String, PortCounters> = Default::default();
    let mut qs: Vec<QueueCounters> = Vec::new();
    for (k, f) in raw {
        match CountersRow::from_fields(k, f) {
            Ok(CountersRow::Queue(q)) => qs.push(q),
            Ok(CountersRow::Port(p)) => {
                ports.insert(p.port.clone(), *p);
            }
            _ => {}
        }
    }
    qs.sort_by_key(|q| (port_order(&q.port), q.queue));
    let mut rows = Vec::new();
    for q in qs {
        let pfc = ports
            .get(&q.port)
            .and_then(|p| p.pfc.get(usize::from(q.queue)).copied())
            .unwrap_or_default();
        let row = QueueRow {
            switch: switch.to_string(),
            port: q.port.clone(),
            queue: q.queue,
            packets: q.packets,
            bytes: q.bytes,
            ecn_marked: q.ecn_marked,
            pfc_tx: pfc.tx_pause,
            pfc_rx: pfc.rx_pause,
        };
        let any = [
            row.packets,
            row.bytes,
            row.ecn_marked,
            row.pfc_tx,
            row.pfc_rx,
        ]
        .iter()
        .any(|v| v.unwrap_or(0) > 0);
        if !nonzero || any {
            rows.push(row);
        }
    }
    rows
}

/// Every queue of the chosen switches (only those that counted something with `nonzero`), and
/// the switches not read.
pub async fn queue_rows(
    t: &Topology,
    chosen: &BTreeSet<SwitchIdx>,
    nonzero: bool,
) -> (Vec<QueueRow>, Unread) {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for &si in chosen {
        let s = &t.switches[si];
        let r = read_counters(&s.db).await;
        // Old counters are still listed, their switch named as unknown beside them.
        rows.extend(switch_queue_rows(&s.name, r.rows_read(), nonzero));
        errors.extend(r.unknown(&s.name, "counters"));
    }
    (rows, errors)
}

/// The queues the controller configured a watchdog for (CONFIG_DB PFC_WD ports ×
/// PORT_QOS_MAP pfc_enable), as operational with no storm yet.
pub fn watched_queues(
    wd: &[(String, FieldValues)],
    qos: &[(String, FieldValues)],
) -> Vec<PfcWdState> {
    let qos: BTreeMap<String, PortQosMap> = qos
        .iter()
        .filter_map(|(k, f)| PortQosMap::from_fields(k, f).ok().map(|q| (k.clone(), q)))
        .collect();
    let mut out = Vec::new();
    for (k, f) in wd {
        let Ok(w) = PfcWd::from_fields(k, f) else {
            continue;
        };
        let Some(prios) = qos.get(k).and_then(|q| q.pfc_enable.clone()) else {
            continue;
        };
        for p in prios.iter() {
            out.push(PfcWdState {
                port: w.port.clone(),
                priority: p,
                status: WdStatus::Operational,
                action: w.action.unwrap_or(PfcWdAction::Drop),
                detected: 0,
                restored: 0,
                timestamp_ms: 0,
            });
        }
    }
    out
}

async fn watched(db: &str) -> Vec<PfcWdState> {
    let Ok(wd) = dump(db, SonicDbId::ConfigDb, PfcWd::TABLE).await else {
        return Vec::new();
    };
    let Ok(qos) = dump(db, SonicDbId::ConfigDb, PortQosMap::TABLE).await else {
        return Vec::new();
    };
    watched_queues(&wd, &qos)
}

#[derive(Debug, Clone, Serialize)]
pub struct WdRow {
    pub switch: String,
    pub port: String,
    pub priority: u8,
    /// `operational` or `stormed` as a running plugin's watchdog says; `unknown` when no
    /// running plugin watches the switch.
    pub status: String,
    /// What STATE_DB last recorded when the status is `unknown` (`None`: nothing).
    pub recorded_status: Option<String>,
    pub action: String,
    pub storms_detected: u64,
    pub storms_restored: u64,
    /// Unix time of the last change, milliseconds.
    pub last_change_ms: u64,
}

/// One switch's watchdog rows: the plugin writes a queue's STATE_DB row at its first storm;
/// the queues watched without one yet come from `watched` (CONFIG_DB). Without a running
/// plugin (`live` false) nothing watches them: every status is `unknown`.
pub fn switch_wd_rows(
    switch: &str,
    state: &[(String, FieldValues)],
    watched: Vec<PfcWdState>,
    live: bool,
) -> Vec<WdRow> {
    let mut sw: Vec<PfcWdState> = state
        .iter()
        .filter_map(|(k, f)| PfcWdState::from_fields(k, f).ok())
        .collect();
    let seen: BTreeSet<(String, u8)> = sw.iter().map(|w| (w.port.clone(), w.priority)).collect();
    for w in watched {
        if !seen.contains(&(w.port.clone(), w.priority)) {
            sw.push(w);
        }
    }
    sw.sort_by_key(|w| (port_order(&w.port), w.priority));
    sw.into_iter()
        .map(|w| WdRow {
            switch: switch.to_string(),
            priority: w.priority,
            status: if live {
                w.status.as_str().to_string()
            } else {
                "unknown".into()
            },
            recorded_status: (!live && seen.contains(&(w.port.clone(), w.priority)))
                .then(|| w.status.as_str().to_string()),
            port: w.port,
            action: w.action.as_str().to_string(),
            storms_detected: w.detected,
            storms_restored: w.restored,
            last_change_ms: w.timestamp_ms,
        })
        .collect()
}

/// Whether a running plugin watches the switch: its watchdog state is then current.
fn watchdog_read(
    state: Vec<(String, FieldValues)>,
    plugin: Option<&weft_sonic_schema::state::PluginStatus>,
) -> SwitchRead<Vec<(String, FieldValues)>> {
    use weft_sonic_schema::state::PluginState;
    let why = match plugin {
        None => Staleness::NoWriter,
        Some(p) if p.state != PluginState::Running => {
            Staleness::NotRunning(p.state.as_str().to_string())
        }
        Some(_) => return SwitchRead::Ok(state),
    };
    SwitchRead::Stale { data: state, why }
}

/// Every watched queue of the chosen switches, and the switches whose watchdog state is
/// unknown (not read, or no running plugin watches them).
pub async fn pfcwd_rows(t: &Topology, chosen: &BTreeSet<SwitchIdx>) -> (Vec<WdRow>, Unread) {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for &si in chosen {
        let s = &t.switches[si];
        let read = async {
            let state = dump(&s.db, SonicDbId::StateDb, PfcWdState::TABLE).await?;
            let plugin = plugin_status(&s.db).await?;
            Ok::<_, ReadError>(watchdog_read(state, plugin.as_ref()))
        };
        let r = read.await.unwrap_or_else(SwitchRead::Unreachable);
        if let Some(raw) = r.data() {
            rows.extend(switch_wd_rows(
                &s.name,
                raw,
                watched(&s.db).await,
                r.current().is_some(),
            ));
        }
        errors.extend(r.unknown(&s.name, "PFC watchdog state"));
    }
    (rows, errors)
}
