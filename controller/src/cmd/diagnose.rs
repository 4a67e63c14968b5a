//! `weft diagnose FILE [--window 10s]`: samples every switch's COUNTERS_DB and STATE_DB over the
//! window and hands the samples to the pure rules of `weft-diagnose`; prints the findings
//! ranked by confidence. Exit status 0 healthy, 3 findings, 1 nothing could be read.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;
use weft_diagnose::{
    Drift, End, Fabric, Finding, Link, PortSample, QueueSample, Sample, SwitchSample, Thresholds,
    Window,
};
use weft_sonic_db::{FieldValues, SonicDbId};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::CountersRow;
use weft_sonic_schema::state::{PfcWdState, WdStatus};
use weft_topology::Topology;

use super::counters::dump;
use super::{Outcome, OutputFormat, load_valid_as};
use crate::outln;

/// STATE_DB table of entries whose switch read-back differs from APPL_STATE_DB (the plugin's
/// audit), `WEFT_DRIFT|<APPL_STATE_DB key>` with field `state`.
pub const DRIFT_TABLE: &str = weft_sonic_schema::state::DriftState::TABLE;

#[derive(Debug, Clone)]
pub struct DiagnoseArgs {
    pub window: Duration,
    pub interval: Duration,
    pub record: Option<PathBuf>,
    pub replay: Option<PathBuf>,
    pub all: bool,
    pub output: OutputFormat,
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
                    depth_histogram: p.depth_histogram.map(|h| h.to_vec()).unwrap_or_default(),
                    histogram_shift: p.histogram_shift.unwrap_or(0).min(32) as u8,
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

/// Every switch once. Switches that do not answer are left out of the sample (and named).
async fn sample(t: &Topology, t0: Instant, errors: &mut BTreeMap<String, String>) -> Sample {
    let reads = t.switches.iter().map(|s| async move {
        let c = dump(&s.db, SonicDbId::CountersDb, "COUNTERS").await;
        let wd = dump(&s.db, SonicDbId::StateDb, PfcWdState::TABLE).await;
        let drift = dump(&s.db, SonicDbId::StateDb, DRIFT_TABLE).await;
        (s.name.clone(), c, wd, drift)
    });
    let t_ms = t0.elapsed().as_millis() as u64;
    let mut out = Sample {
        t_ms,
        switches: BTreeMap::new(),
    };
    for (name, c, wd, drift) in futures_join(reads).await {
        match c {
            Ok(c) => {
                out.switches.insert(
                    name,
                    switch_sample(&c, &wd.unwrap_or_default(), &drift.unwrap_or_default()),
                );
            }
            Err(e) => {
                errors.insert(name, e);
            }
        }
    }
    out
}

async fn futures_join<F: std::future::Future>(fs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let handles: Vec<_> = fs.collect();
    let mut out = Vec::with_capacity(handles.len());
    // The switches are few and each read is bounded by READ_TIMEOUT: one after the other keeps
    // this free of a join dependency while staying well inside a 1 s sampling interval.
    for h in handles {
        out.push(h.await);
    }
    out
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    fabric: &'a str,
    window_ms: u64,
    samples: usize,
    healthy: bool,
    findings: &'a [Finding],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    unreadable: &'a BTreeMap<String, String>,
}

pub async fn run(file: &str, a: DiagnoseArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let mut errors = BTreeMap::new();
    let w = if let Some(p) = &a.replay {
        let text = std::fs::read_to_string(p)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))?;
        serde_json::from_str::<Window>(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
    } else {
        let t0 = Instant::now();
        let mut samples = vec![sample(&t, t0, &mut errors).await];
        let interval = a.interval.max(Duration::from_millis(100));
        while t0.elapsed() < a.window {
            let next = interval.min(a.window.saturating_sub(t0.elapsed()));
            tokio::time::sleep(next).await;
            samples.push(sample(&t, t0, &mut errors).await);
        }
        Window {
            fabric: fabric_of(&t),
            samples,
        }
    };
    if w.samples.iter().all(|s| s.switches.is_empty()) {
        for (sw, e) in &errors {
            crate::errln!("weft: {sw}: {e}");
        }
        anyhow::bail!("no switch could be read");
    }
    if let Some(p) = &a.record {
        std::fs::write(p, serde_json::to_string(&w)? + "\n")
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?;
    }
    let th = Thresholds::default();
    let findings = if a.all {
        weft_diagnose::all_findings(&w, &th)
    } else {
        weft_diagnose::diagnose(&w, &th)
    };
    let reported = findings
        .iter()
        .filter(|f| f.confidence >= th.report)
        .count();
    let window_ms = match (w.samples.first(), w.samples.last()) {
        (Some(f), Some(l)) => l.t_ms.saturating_sub(f.t_ms),
        _ => 0,
    };
    match a.output {
        OutputFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&Report {
                fabric: &t.name,
                window_ms,
                samples: w.samples.len(),
                healthy: reported == 0,
                findings: &findings,
                unreadable: &errors,
            })?
        ),
        OutputFormat::Text => {
            if findings.is_empty() {
                outln!(
                    "healthy: nothing found over {:.1}s ({} samples of {} switches)",
                    window_ms as f64 / 1000.0,
                    w.samples.len(),
                    t.switches.len()
                );
            }
            for (i, f) in findings.iter().enumerate() {
                outln!(
                    "{}. {} {} (confidence {:.2})",
                    i + 1,
                    f.kind.as_str(),
                    f.target,
                    f.confidence
                );
                outln!("   {}", f.summary);
                for e in &f.evidence {
                    outln!(
                        "   evidence: {}{} {} +{} ({}/s)",
                        e.switch,
                        e.port
                            .as_deref()
                            .map(|p| format!(":{p}"))
                            .unwrap_or_default(),
                        e.counter,
                        e.delta,
                        e.per_second
                    );
                }
                if !f.victims.is_empty() {
                    outln!("   affected: {}", f.victims.join(", "));
                }
                outln!("   action: {}", f.action);
            }
            for (sw, e) in &errors {
                outln!("unreadable: {sw}: {e}");
            }
        }
    }
    Ok(if reported == 0 {
        Outcome::Ok
    } else {
        Outcome::NotYet
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
