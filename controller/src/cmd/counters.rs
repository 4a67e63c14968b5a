//! `weft show queues FILE` (SONiC's `show queue counters`, across switches) and
//! `weft show pfcwd FILE` (`show pfcwd stats`), from each switch's COUNTERS_DB and STATE_DB.

use std::collections::BTreeSet;

use serde::Serialize;
use weft_sonic_db::{SonicDb, SonicDbError, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{CountersRow, PortCounters, QueueCounters};
use weft_sonic_schema::state::PfcWdState;
use weft_topology::{SwitchIdx, Topology};

use super::{Outcome, OutputFormat, load_valid_as};
use crate::cli::Targets;
use crate::outln;

/// `Ethernet12` → 12, so ports sort as SONiC lists them.
fn port_order(p: &str) -> (u64, String) {
    (
        p.trim_start_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap_or(u64::MAX),
        p.to_string(),
    )
}

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

pub(crate) async fn dump(
    db: &str,
    id: SonicDbId,
    table: &str,
) -> Result<Vec<(String, weft_sonic_db::FieldValues)>, String> {
    let run = async {
        let sonic = SonicDb::from_endpoint(db)?;
        let t = Table::new(sonic.connect(id).await?, table)?;
        Ok::<_, SonicDbError>(t.dump().await?.into_iter().collect())
    };
    match tokio::time::timeout(super::fabric::READ_TIMEOUT, run).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(weft_reconcile::io::describe_db_error(db, &e)),
        Err(_) => Err(format!("{db} did not answer in time")),
    }
}

fn chosen(t: &Topology, targets: &Targets) -> anyhow::Result<BTreeSet<SwitchIdx>> {
    Ok(crate::targets::select(t, targets)?.unwrap_or_else(|| (0..t.switches.len()).collect()))
}

pub async fn queues(
    file: &str,
    targets: &Targets,
    nonzero: bool,
    output: OutputFormat,
) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(file, output)? else {
        return Ok(Outcome::Invalid);
    };
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for si in chosen(&t, targets)? {
        let s = &t.switches[si];
        let raw = match dump(&s.db, SonicDbId::CountersDb, QueueCounters::TABLE).await {
            Ok(r) => r,
            Err(e) => {
                errors.push(serde_json::json!({"switch": s.name, "error": e}));
                continue;
            }
        };
        let mut ports: std::collections::BTreeMap<String, PortCounters> = Default::default();
        let mut qs = Vec::new();
        for (k, f) in &raw {
            match CountersRow::from_fields(k, f) {
                Ok(CountersRow::Queue(q)) => qs.push(q),
                Ok(CountersRow::Port(p)) => {
                    ports.insert(p.port.clone(), *p);
                }
                _ => {}
            }
        }
        qs.sort_by_key(|q| (port_order(&q.port), q.queue));
        for q in qs {
            let pfc = ports
                .get(&q.port)
                .and_then(|p| p.pfc.get(usize::from(q.queue)).copied())
                .unwrap_or_default();
            let row = QueueRow {
                switch: s.name.clone(),
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
    }
    let n = |v: Option<u64>| v.map_or("N/A".to_string(), |v| v.to_string());
    match output {
        OutputFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"fabric": t.name, "queues": rows, "errors": errors})
            )?
        ),
        OutputFormat::Text => {
            outln!(
                "{:<16} {:<12} {:>3} {:>12} {:>14} {:>10} {:>8} {:>8}",
                "switch",
                "port",
                "txq",
                "packets",
                "bytes",
                "ecn_marked",
                "pfc_tx",
                "pfc_rx"
            );
            for r in &rows {
                outln!(
                    "{:<16} {:<12} {:>3} {:>12} {:>14} {:>10} {:>8} {:>8}",
                    r.switch,
                    r.port,
                    format!("UC{}", r.queue),
                    n(r.packets),
                    n(r.bytes),
                    n(r.ecn_marked),
                    n(r.pfc_tx),
                    n(r.pfc_rx)
                );
            }
            for e in &errors {
                outln!(
                    "{}: UNREACHABLE: {}",
                    e["switch"].as_str().unwrap_or("?"),
                    e["error"].as_str().unwrap_or("?")
                );
            }
        }
    }
    Ok(if errors.is_empty() {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

/// Queues the controller configured a watchdog for, as operational with no storm yet.
async fn watched(db: &str) -> Vec<PfcWdState> {
    use weft_sonic_schema::config::{PfcWd, PfcWdAction, PortQosMap};
    let Ok(wd) = dump(db, SonicDbId::ConfigDb, PfcWd::TABLE).await else {
        return Vec::new();
    };
    let Ok(qos) = dump(db, SonicDbId::ConfigDb, PortQosMap::TABLE).await else {
        return Vec::new();
    };
    let qos: std::collections::BTreeMap<String, PortQosMap> = qos
        .iter()
        .filter_map(|(k, f)| PortQosMap::from_fields(k, f).ok().map(|q| (k.clone(), q)))
        .collect();
    let mut out = Vec::new();
    for (k, f) in &wd {
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
                status: weft_sonic_schema::state::WdStatus::Operational,
                action: w.action.unwrap_or(PfcWdAction::Drop),
                detected: 0,
                restored: 0,
                timestamp_ms: 0,
            });
        }
    }
    out
}

#[derive(Debug, Clone, Serialize)]
pub struct WdRow {
    pub switch: String,
    pub port: String,
    pub priority: u8,
    pub status: String,
    pub action: String,
    pub storms_detected: u64,
    pub storms_restored: u64,
    /// Unix time of the last change, milliseconds.
    pub last_change_ms: u64,
}

pub async fn pfcwd(file: &str, targets: &Targets, output: OutputFormat) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(file, output)? else {
        return Ok(Outcome::Invalid);
    };
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for si in chosen(&t, targets)? {
        let s = &t.switches[si];
        match dump(&s.db, SonicDbId::StateDb, PfcWdState::TABLE).await {
            Ok(raw) => {
                let mut sw: Vec<PfcWdState> = raw
                    .iter()
                    .filter_map(|(k, f)| PfcWdState::from_fields(k, f).ok())
                    .collect();
                // The plugin writes a queue's row at its first storm; the queues watched
                // without one yet come from CONFIG_DB (PFC_WD ports × PORT_QOS_MAP pfc_enable).
                let seen: BTreeSet<(String, u8)> =
                    sw.iter().map(|w| (w.port.clone(), w.priority)).collect();
                for w in watched(&s.db).await {
                    if !seen.contains(&(w.port.clone(), w.priority)) {
                        sw.push(w);
                    }
                }
                sw.sort_by_key(|w| (port_order(&w.port), w.priority));
                rows.extend(sw.into_iter().map(|w| WdRow {
                    switch: s.name.clone(),
                    port: w.port,
                    priority: w.priority,
                    status: w.status.as_str().to_string(),
                    action: w.action.as_str().to_string(),
                    storms_detected: w.detected,
                    storms_restored: w.restored,
                    last_change_ms: w.timestamp_ms,
                }));
            }
            Err(e) => errors.push(serde_json::json!({"switch": s.name, "error": e})),
        }
    }
    match output {
        OutputFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"fabric": t.name, "queues": rows, "errors": errors})
            )?
        ),
        OutputFormat::Text => {
            outln!(
                "{:<16} {:<16} {:<12} {:<8} {:>14} {:>14}  last change",
                "switch",
                "queue",
                "status",
                "action",
                "storm detected",
                "storm restored"
            );
            for r in &rows {
                outln!(
                    "{:<16} {:<16} {:<12} {:<8} {:>14} {:>14}  {}",
                    r.switch,
                    format!("{}:{}", r.port, r.priority),
                    r.status,
                    r.action,
                    r.storms_detected,
                    r.storms_restored,
                    if r.last_change_ms == 0 {
                        "-".to_string()
                    } else {
                        weft_reconcile::lock::ago(r.last_change_ms)
                    }
                );
            }
            if rows.is_empty() && errors.is_empty() {
                outln!(
                    "(no queue watched: no PFC_WD rows in CONFIG_DB; has the intent been applied?)"
                );
            }
            for e in &errors {
                outln!(
                    "{}: UNREACHABLE: {}",
                    e["switch"].as_str().unwrap_or("?"),
                    e["error"].as_str().unwrap_or("?")
                );
            }
        }
    }
    Ok(if errors.is_empty() {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}
