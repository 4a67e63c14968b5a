//! `weft top FILE`: a live view of the fabric from every switch's COUNTERS_DB, two reads an
//! interval apart: busiest links by utilisation, queues by ECN marking rate (with the depth
//! histogram's p99 where the plugin publishes it), PFC PAUSE rates, drops, and links `weft run`
//! keeps out of use (suppressed, down). `--once` prints one view (text or JSON) and exits.
//!
//! RoCE PSN anomalies (out of order, regressions) per switch come from COUNTERS:WEFT_SWITCH.
//!
//! Keys (a letter, then Enter: the terminal stays in line mode): `u` sort links by utilisation,
//! `p` by packet rate, `e` queues by ECN, `d` by depth, `/TEXT` show only rows naming TEXT,
//! `/` alone clears the filter, `q` quits.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use weft_sonic_db::SonicDbId;
use weft_sonic_schema::counters::{CountersRow, HIST_BUCKETS, PortCounters, QueueCounters};
use weft_topology::{Peer, Topology};

use super::{Outcome, OutputFormat, load_valid_as};
use crate::outln;

/// One read of every switch's counters.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Switch name → rows (or why not read).
    pub switches: BTreeMap<String, Result<Vec<CountersRow>, String>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LinkRow {
    pub link: String,
    /// `fabric` (switch to switch) or `host`.
    pub kind: &'static str,
    pub a_to_b_pps: f64,
    pub a_to_b_bps: f64,
    pub b_to_a_pps: f64,
    pub b_to_a_bps: f64,
    /// The busier direction's bits/s over the link's speed.
    pub utilisation: f64,
    /// From `weft run`: `in use`, `suppressed`, `down`, `hold-down`; `unknown` without it.
    pub state: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueRow {
    pub switch: String,
    pub port: String,
    pub queue: u8,
    pub tx_pps: f64,
    pub ecn_marked_per_s: f64,
    /// Packets of the queue trimmed per second (packet trimming).
    pub trimmed_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DepthRow {
    pub switch: String,
    pub port: String,
    /// Queue depth (packets) under which 99% of the interval's packets found the port's queue.
    pub depth_p99: u32,
    pub packets: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PfcRow {
    pub switch: String,
    pub port: String,
    pub priority: usize,
    pub rx_pause_per_s: f64,
    pub tx_pause_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DropRow {
    pub switch: String,
    pub reason: String,
    pub pps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OooRow {
    pub switch: String,
    pub out_of_order: u64,
    pub regressions: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TopView {
    pub fabric: String,
    pub interval_s: f64,
    pub links: Vec<LinkRow>,
    pub queues: Vec<QueueRow>,
    pub depth: Vec<DepthRow>,
    pub pfc: Vec<PfcRow>,
    pub drops: Vec<DropRow>,
    /// Links `weft run` does not use right now (suppressed, down, hold-down).
    pub out_of_use: Vec<String>,
    /// Per switch: RoCE PSN anomalies toward its host ports since the switch started (the
    /// plugin reads them every 5th counter poll).
    pub out_of_order: Vec<OooRow>,
    pub errors: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Utilisation,
    Packets,
}

type Ports<'a> = BTreeMap<(&'a str, &'a str), &'a PortCounters>;
type Queues<'a> = BTreeMap<(&'a str, &'a str, u8), &'a QueueCounters>;

fn index(s: &Snapshot) -> (Ports<'_>, Queues<'_>) {
    let mut p = Ports::new();
    let mut q = Queues::new();
    for (sw, rows) in &s.switches {
        for r in rows.iter().flatten() {
            match r {
                CountersRow::Port(pc) => {
                    p.insert((sw.as_str(), pc.port.as_str()), pc);
                }
                CountersRow::Queue(qc) => {
                    q.insert((sw.as_str(), qc.port.as_str(), qc.queue), qc);
                }
                _ => {}
            }
        }
    }
    (p, q)
}

fn rate(a: Option<u64>, b: Option<u64>, dt: f64) -> f64 {
    match (a, b) {
        // A counter that went backwards (switch restart) counts from zero.
        (Some(a), Some(b)) if b >= a => (b - a) as f64 / dt,
        (_, Some(b)) => b as f64 / dt,
        _ => 0.0,
    }
}

/// The view of two snapshots `dt` seconds apart. `usage` is `weft run`'s link states by link
/// name (empty without it). Pure: the tests feed it made-up snapshots.
pub fn view(
    t: &Topology,
    prev: &Snapshot,
    cur: &Snapshot,
    dt: f64,
    usage: &BTreeMap<String, String>,
    sort: Sort,
    filter: &str,
) -> TopView {
    let dt = dt.max(1e-3);
    let (p0, q0) = index(prev);
    let (p1, q1) = index(cur);
    let port_rates = |sw: &str, port: &str| {
        let a = p0.get(&(sw, port));
        let b = p1.get(&(sw, port));
        let f = |g: fn(&PortCounters) -> Option<u64>| {
            rate(a.and_then(|x| g(x)), b.and_then(|x| g(x)), dt)
        };
        (
            f(|p| p.tx_packets),
            f(|p| p.tx_bytes) * 8.0,
            f(|p| p.rx_packets),
            f(|p| p.rx_bytes) * 8.0,
        )
    };
    let mut links = Vec::new();
    for (li, l) in t.links.iter().enumerate() {
        let (sa, pa) = (
            &t.switches[l.a.switch].name,
            &t.switches[l.a.switch].ports[l.a.port].name,
        );
        let (sb, pb) = (
            &t.switches[l.b.switch].name,
            &t.switches[l.b.switch].ports[l.b.port].name,
        );
        let (atx_p, atx_b, _, _) = port_rates(sa, pa);
        let (btx_p, btx_b, _, _) = port_rates(sb, pb);
        let name = weft_reconcile::core::link_name(t, li);
        let speed = l.speed.bits_per_sec().max(1) as f64;
        links.push(LinkRow {
            state: usage.get(&name).cloned().unwrap_or_else(|| {
                if usage.is_empty() {
                    "unknown".into()
                } else {
                    "in use".into()
                }
            }),
            link: name,
            kind: "fabric",
            a_to_b_pps: atx_p,
            a_to_b_bps: atx_b,
            b_to_a_pps: btx_p,
            b_to_a_bps: btx_b,
            utilisation: atx_b.max(btx_b) / speed,
        });
    }
    for h in &t.hosts {
        let sw = &t.switches[h.switch];
        let port = &sw.ports[h.port];
        if !matches!(port.peer, Peer::Host { .. }) {
            continue;
        }
        let (tx_p, tx_b, rx_p, rx_b) = port_rates(&sw.name, &port.name);
        links.push(LinkRow {
            link: format!("{} ↔ {}:{}", h.name, sw.name, port.name),
            kind: "host",
            a_to_b_pps: rx_p,
            a_to_b_bps: rx_b,
            b_to_a_pps: tx_p,
            b_to_a_bps: tx_b,
            utilisation: rx_b.max(tx_b) / h.speed.bits_per_sec().max(1) as f64,
            state: "in use".into(),
        });
    }
    let keep = |s: &str| filter.is_empty() || s.contains(filter);
    links.retain(|l| keep(&l.link));
    let key = |l: &LinkRow| match sort {
        Sort::Utilisation => l.utilisation,
        Sort::Packets => l.a_to_b_pps.max(l.b_to_a_pps),
    };
    links.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.link.cmp(&b.link)));

    let mut queues: Vec<QueueRow> = q1
        .iter()
        .map(|(&(sw, port, q), c)| {
            let o = q0.get(&(sw, port, q));
            QueueRow {
                switch: sw.to_string(),
                port: port.to_string(),
                queue: q,
                tx_pps: rate(o.and_then(|x| x.packets), c.packets, dt),
                ecn_marked_per_s: rate(o.and_then(|x| x.ecn_marked), c.ecn_marked, dt),
                trimmed_per_s: rate(o.and_then(|x| x.trimmed), c.trimmed, dt),
            }
        })
        .filter(|r| r.tx_pps > 0.0 || r.ecn_marked_per_s > 0.0 || r.trimmed_per_s > 0.0)
        .filter(|r| keep(&format!("{}:{}", r.switch, r.port)))
        .collect();
    queues.sort_by(|a, b| {
        (b.ecn_marked_per_s + b.trimmed_per_s)
            .total_cmp(&(a.ecn_marked_per_s + a.trimmed_per_s))
            .then(b.tx_pps.total_cmp(&a.tx_pps))
    });

    let mut depth = Vec::new();
    let mut pfc = Vec::new();
    for (&(sw, port), c) in &p1 {
        if !keep(&format!("{sw}:{port}")) {
            continue;
        }
        let o = p0.get(&(sw, port));
        if let (Some(h1), shift) = (c.depth_histogram, c.histogram_shift.unwrap_or(0)) {
            let h0 = o
                .and_then(|x| x.depth_histogram)
                .unwrap_or([0; HIST_BUCKETS]);
            let d: Vec<u64> = (0..HIST_BUCKETS)
                .map(|b| h1[b].saturating_sub(h0[b]))
                .collect();
            let n: u64 = d.iter().sum();
            if n > 0 {
                let mut acc = 0;
                let mut p99 = 0;
                for (b, x) in d.iter().enumerate() {
                    acc += x;
                    if acc * 100 >= n * 99 {
                        p99 = (((b as u64 + 1) << shift) - 1) as u32;
                        break;
                    }
                }
                depth.push(DepthRow {
                    switch: sw.to_string(),
                    port: port.to_string(),
                    depth_p99: p99,
                    packets: n,
                });
            }
        }
        for prio in 0..8 {
            let a = o.map(|x| x.pfc[prio]).unwrap_or_default();
            let b = c.pfc[prio];
            let row = PfcRow {
                switch: sw.to_string(),
                port: port.to_string(),
                priority: prio,
                rx_pause_per_s: rate(a.rx_pause, b.rx_pause, dt),
                tx_pause_per_s: rate(a.tx_pause, b.tx_pause, dt),
            };
            if row.rx_pause_per_s > 0.0 || row.tx_pause_per_s > 0.0 {
                pfc.push(row);
            }
        }
    }
    depth.sort_by(|a, b| {
        b.depth_p99
            .cmp(&a.depth_p99)
            .then(b.packets.cmp(&a.packets))
    });
    pfc.sort_by(|a, b| {
        (b.rx_pause_per_s + b.tx_pause_per_s).total_cmp(&(a.rx_pause_per_s + a.tx_pause_per_s))
    });
    let mut drops = Vec::new();
    for (sw, rows) in &cur.switches {
        let before: BTreeMap<String, (u64, u64)> = prev
            .switches
            .get(sw)
            .and_then(|r| r.as_ref().ok())
            .and_then(|rs| {
                rs.iter().find_map(|r| match r {
                    CountersRow::Switch(s) => Some(s.drops.clone()),
                    _ => None,
                })
            })
            .unwrap_or_default();
        for r in rows.iter().flatten() {
            if let CountersRow::Switch(s) = r {
                for (reason, (p, _)) in &s.drops {
                    let pps = rate(before.get(reason).map(|x| x.0), Some(*p), dt);
                    if pps > 0.0 && keep(sw) {
                        drops.push(DropRow {
                            switch: sw.clone(),
                            reason: reason.to_ascii_lowercase(),
                            pps,
                        });
                    }
                }
            }
        }
    }
    drops.sort_by(|a, b| b.pps.total_cmp(&a.pps));
    let mut out_of_order: Vec<OooRow> = cur
        .switches
        .iter()
        .filter(|(sw, _)| keep(sw))
        .filter_map(|(sw, rows)| {
            rows.iter().flatten().find_map(|r| match r {
                CountersRow::Switch(s) if s.psn_out_of_order.is_some() => Some(OooRow {
                    switch: sw.clone(),
                    out_of_order: s.psn_out_of_order.unwrap_or(0),
                    regressions: s.psn_regressions.unwrap_or(0),
                }),
                _ => None,
            })
        })
        .collect();
    out_of_order.sort_by_key(|o| std::cmp::Reverse(o.out_of_order + o.regressions));
    let errors = cur
        .switches
        .iter()
        .filter_map(|(s, r)| r.as_ref().err().map(|e| (s.clone(), e.clone())))
        .collect();
    TopView {
        fabric: t.name.clone(),
        interval_s: dt,
        links,
        queues,
        depth,
        pfc,
        drops,
        out_of_use: usage
            .iter()
            .filter(|(_, u)| u.as_str() != "in use")
            .map(|(l, u)| format!("{l}: {u}"))
            .collect(),
        out_of_order,
        errors,
    }
}

async fn snapshot(t: &Topology) -> Snapshot {
    let reads = t.switches.iter().map(|s| async move {
        let r = super::counters::dump(&s.db, SonicDbId::CountersDb, "COUNTERS")
            .await
            .map(|rows| {
                rows.iter()
                    .filter_map(|(k, f)| CountersRow::from_fields(k, f).ok())
                    .collect()
            });
        (s.name.clone(), r)
    });
    Snapshot {
        switches: futures::future::join_all(reads).await.into_iter().collect(),
    }
}

/// `weft run`'s view of the links (suppressed, down, ...), if it runs.
fn usage(t: &Topology) -> BTreeMap<String, String> {
    let path = weft_reconcile::run::default_status_file(&t.name);
    let Some(st) = super::run::read_daemon_status(&path).filter(|s| s.running) else {
        return BTreeMap::new();
    };
    st.status
        .links
        .iter()
        .map(|l| {
            let u = if l.suppressed {
                "suppressed"
            } else if !l.in_use && l.oper_up {
                "hold-down"
            } else if !l.in_use {
                "down"
            } else {
                "in use"
            };
            (l.link.clone(), u.to_string())
        })
        .collect()
}

fn si(v: f64, unit: &str) -> String {
    let (d, p) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    format!("{d:.1}{p}{unit}")
}

fn render(v: &TopView, rows: usize) {
    outln!(
        "weft top {}: rates over {:.1} s (keys: u/p sort links, /TEXT filter, q quit)",
        v.fabric,
        v.interval_s
    );
    outln!();
    outln!(
        "{:<48} {:>7} {:>10} {:>10} {:>9} {:>9}  state",
        "busiest links",
        "util",
        "a→b",
        "b→a",
        "a→b pps",
        "b→a pps"
    );
    for l in v.links.iter().take(rows) {
        outln!(
            "{:<48} {:>6.3}% {:>10} {:>10} {:>9.0} {:>9.0}  {}",
            l.link,
            l.utilisation * 100.0,
            si(l.a_to_b_bps, "b/s"),
            si(l.b_to_a_bps, "b/s"),
            l.a_to_b_pps,
            l.b_to_a_pps,
            l.state
        );
    }
    outln!();
    outln!(
        "{:<24} {:>5} {:>10} {:>12} {:>10}",
        "queues (by ECN marks, trims)",
        "queue",
        "tx pps",
        "ECN marks/s",
        "trimmed/s"
    );
    for q in v.queues.iter().take(rows) {
        outln!(
            "{:<24} {:>5} {:>10.0} {:>12.1} {:>10.1}",
            format!("{}:{}", q.switch, q.port),
            q.queue,
            q.tx_pps,
            q.ecn_marked_per_s,
            q.trimmed_per_s
        );
    }
    if !v.depth.is_empty() {
        outln!();
        outln!(
            "{:<24} {:>10} {:>10}",
            "deepest queues",
            "p99 pkts",
            "packets"
        );
        for d in v.depth.iter().take(rows) {
            outln!(
                "{:<24} {:>10} {:>10}",
                format!("{}:{}", d.switch, d.port),
                d.depth_p99,
                d.packets
            );
        }
    }
    outln!();
    if v.pfc.is_empty() {
        outln!("PFC: no PAUSE frames");
    } else {
        outln!(
            "{:<24} {:>4} {:>12} {:>12}",
            "PFC",
            "prio",
            "rx PAUSE/s",
            "tx PAUSE/s"
        );
        for p in v.pfc.iter().take(rows) {
            outln!(
                "{:<24} {:>4} {:>12.1} {:>12.1}",
                format!("{}:{}", p.switch, p.port),
                p.priority,
                p.rx_pause_per_s,
                p.tx_pause_per_s
            );
        }
    }
    if v.drops.is_empty() {
        outln!("drops: none");
    } else {
        for d in v.drops.iter().take(rows) {
            outln!("drops: {} {} {:.1} pps", d.switch, d.reason, d.pps);
        }
    }
    let ooo: Vec<String> = v
        .out_of_order
        .iter()
        .filter(|o| o.out_of_order + o.regressions > 0)
        .take(rows)
        .map(|o| format!("{} {}/{}", o.switch, o.out_of_order, o.regressions))
        .collect();
    if !ooo.is_empty() {
        outln!(
            "RoCE PSN out of order/regressions (since start): {}",
            ooo.join(", ")
        );
    }
    if !v.out_of_use.is_empty() {
        outln!("links out of use: {}", v.out_of_use.join(", "));
    }
    for (s, e) in &v.errors {
        outln!("{s}: not read: {e}");
    }
}

pub async fn run(
    file: &str,
    once: bool,
    interval: Duration,
    sort: Sort,
    filter: Option<String>,
    rows: usize,
    output: OutputFormat,
) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(file, output)? else {
        return Ok(Outcome::Invalid);
    };
    let interval = interval.max(Duration::from_millis(100));
    let mut prev = snapshot(&t).await;
    let mut at = Instant::now();
    let mut sort = sort;
    let mut filter = filter.unwrap_or_default();
    let keys = if once {
        None
    } else {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            let mut line = String::new();
            while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
                if tx.send(line.trim().to_string()).is_err() {
                    return;
                }
                line.clear();
            }
        });
        Some(rx)
    };
    loop {
        tokio::time::sleep(interval.saturating_sub(at.elapsed())).await;
        let cur = snapshot(&t).await;
        let dt = at.elapsed().as_secs_f64();
        at = Instant::now();
        let v = view(&t, &prev, &cur, dt, &usage(&t), sort, &filter);
        if once {
            if output == OutputFormat::Json {
                outln!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                render(&v, rows);
            }
            return Ok(if v.errors.is_empty() {
                Outcome::Ok
            } else {
                Outcome::Failed
            });
        }
        crate::out!("\x1b[H\x1b[2J");
        render(&v, rows);
        prev = cur;
        if let Some(rx) = &keys {
            while let Ok(k) = rx.try_recv() {
                match k.as_str() {
                    "q" => return Ok(Outcome::Ok),
                    "u" => sort = Sort::Utilisation,
                    "p" => sort = Sort::Packets,
                    f if f.starts_with('/') => filter = f[1..].to_string(),
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_sonic_schema::counters::QueueCounters;

    fn topo() -> Topology {
        weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example")
    }

    fn port(name: &str, tx_bytes: u64) -> CountersRow {
        CountersRow::Port(Box::new(PortCounters {
            port: name.into(),
            tx_packets: Some(tx_bytes / 100),
            tx_bytes: Some(tx_bytes),
            rx_packets: Some(0),
            rx_bytes: Some(0),
            ..Default::default()
        }))
    }

    #[test]
    fn the_link_carrying_most_comes_first_and_ecn_queues_are_ranked() {
        let t = topo();
        let l0 = &t.links[0];
        let l1 = &t.links[1];
        let name = |e: weft_topology::End| {
            (
                t.switches[e.switch].name.clone(),
                t.switches[e.switch].ports[e.port].name.clone(),
            )
        };
        let (s0, p0) = name(l0.a);
        let (s1, p1) = name(l1.a);
        let mut prev = Snapshot::default();
        let mut cur = Snapshot::default();
        prev.switches.insert(s0.clone(), Ok(vec![port(&p0, 0)]));
        prev.switches.insert(s1.clone(), Ok(vec![port(&p1, 0)]));
        let q = CountersRow::Queue(QueueCounters {
            port: p1.clone(),
            queue: 3,
            packets: Some(10),
            ecn_marked: Some(5),
            trimmed: Some(3),
            ..Default::default()
        });
        if s0 == s1 {
            cur.switches.insert(
                s0.clone(),
                Ok(vec![port(&p0, 1_000_000), port(&p1, 5_000_000), q]),
            );
            prev.switches
                .insert(s0.clone(), Ok(vec![port(&p0, 0), port(&p1, 0)]));
        } else {
            cur.switches
                .insert(s0.clone(), Ok(vec![port(&p0, 1_000_000)]));
            cur.switches
                .insert(s1.clone(), Ok(vec![port(&p1, 5_000_000), q]));
        }
        let v = view(
            &t,
            &prev,
            &cur,
            1.0,
            &BTreeMap::new(),
            Sort::Utilisation,
            "",
        );
        assert_eq!(
            v.links[0].link,
            weft_reconcile::core::link_name(&t, 1),
            "{:?}",
            v.links
        );
        assert_eq!(v.links[0].a_to_b_bps, 40_000_000.0);
        assert_eq!(v.links[1].link, weft_reconcile::core::link_name(&t, 0));
        assert_eq!(v.queues[0].ecn_marked_per_s, 5.0);
        assert_eq!(v.queues[0].trimmed_per_s, 3.0);
        let filtered = view(
            &t,
            &prev,
            &cur,
            1.0,
            &BTreeMap::new(),
            Sort::Utilisation,
            &p0,
        );
        assert!(filtered.links.iter().all(|l| l.link.contains(&p0)));
        // JSON for scripts: the fields `--once --output json` promises.
        let j = serde_json::to_value(&v).expect("json");
        for k in [
            "links",
            "queues",
            "depth",
            "pfc",
            "drops",
            "out_of_use",
            "errors",
        ] {
            assert!(j.get(k).is_some(), "{k}");
        }
    }

    #[test]
    fn psn_anomalies_come_from_the_switch_row_through_counters_db_fields() {
        use weft_sonic_schema::Row;
        let t = topo();
        let sw = weft_sonic_schema::counters::SwitchCounters {
            psn_out_of_order: Some(7),
            psn_regressions: Some(2),
            ..Default::default()
        };
        // Through the wire form, as the plugin writes it and `weft top` reads it.
        let back = CountersRow::from_fields(&sw.key(), &sw.to_fields()).expect("parses");
        let mut cur = Snapshot::default();
        cur.switches.insert("leaf1".into(), Ok(vec![back]));
        let v = view(
            &t,
            &Snapshot::default(),
            &cur,
            1.0,
            &BTreeMap::new(),
            Sort::Utilisation,
            "",
        );
        assert_eq!(v.out_of_order.len(), 1);
        assert_eq!(
            (
                v.out_of_order[0].out_of_order,
                v.out_of_order[0].regressions
            ),
            (7, 2)
        );
    }

    #[test]
    fn a_counter_that_went_backwards_counts_from_zero() {
        assert_eq!(rate(Some(100), Some(30), 1.0), 30.0);
        assert_eq!(rate(Some(10), Some(30), 2.0), 10.0);
        assert_eq!(rate(None, None, 1.0), 0.0);
    }
}
