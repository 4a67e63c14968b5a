//! `weft top`'s view of the fabric from every switch's COUNTERS_DB, two reads an interval
//! apart: busiest links by utilisation, queues by ECN marking rate, the deepest queues (the
//! depth histogram's p99 where the plugin publishes it), PFC PAUSE rates, drops, RoCE PSN
//! anomalies (COUNTERS:WEFT_SWITCH), and links `weft run` keeps out of use.
//!
//! Rates come only from switches whose counters were current in both reads: a switch with no
//! counters, stale ones or no answer is listed in `unknown`, its links' rates are `None` and
//! their state says why, and "no PAUSE frames" or "no drops" is said only when every switch
//! was read.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use weft_sonic_schema::counters::{CountersRow, HIST_BUCKETS, PortCounters, QueueCounters};
use weft_topology::{Peer, Topology};

use crate::read::{SwitchRead, Unknown, read_counters};

/// One read of every switch's counters.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Switch name → rows (or why none).
    pub switches: BTreeMap<String, SwitchRead<Vec<CountersRow>>>,
}

/// A link's rates; every one `None` when an end's switch was not read twice with current
/// counters.
#[derive(Debug, Clone, Serialize)]
pub struct LinkRow {
    pub link: String,
    /// `fabric` (switch to switch) or `host`.
    pub kind: &'static str,
    pub a_to_b_pps: Option<f64>,
    pub a_to_b_bps: Option<f64>,
    pub b_to_a_pps: Option<f64>,
    pub b_to_a_bps: Option<f64>,
    /// The busier direction's bits/s over the link's speed.
    pub utilisation: Option<f64>,
    /// From `weft run`: `in use`, `suppressed`, `down`, `hold-down`; `unknown` without it;
    /// `no data`, `stale` or `unreachable` when an end's counters could not be used.
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
    /// Switches whose counters could not be used (in either read): nothing above is about them.
    pub unknown: Vec<Unknown>,
}

impl TopView {
    /// Every switch was read twice with current counters: "none" means none.
    pub fn complete(&self) -> bool {
        self.unknown.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Utilisation,
    Packets,
}

type Ports<'a> = BTreeMap<(&'a str, &'a str), &'a PortCounters>;
type Queues<'a> = BTreeMap<(&'a str, &'a str, u8), &'a QueueCounters>;

/// The current rows of the switches in `known`.
fn index<'s>(s: &'s Snapshot, known: &BTreeSet<&str>) -> (Ports<'s>, Queues<'s>) {
    let mut p = Ports::new();
    let mut q = Queues::new();
    for (sw, rows) in &s.switches {
        if !known.contains(sw.as_str()) {
            continue;
        }
        for r in rows.current().map_or(&[][..], Vec::as_slice) {
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

/// The two snapshots indexed, `dt` seconds apart, and the rows' filter.
struct Pair<'s> {
    p0: Ports<'s>,
    q0: Queues<'s>,
    p1: Ports<'s>,
    q1: Queues<'s>,
    dt: f64,
    filter: &'s str,
    /// Why a switch's counters were not used, by switch.
    unknown: BTreeMap<&'s str, &'s Unknown>,
}

/// tx packets/s, tx bits/s, rx packets/s, rx bits/s.
type Rates = (f64, f64, f64, f64);

impl Pair<'_> {
    fn keep(&self, s: &str) -> bool {
        self.filter.is_empty() || s.contains(self.filter)
    }

    /// A port's rates; `None` when its switch's counters could not be used.
    fn port_rates(&self, sw: &str, port: &str) -> Option<Rates> {
        if self.unknown.contains_key(sw) {
            return None;
        }
        let a = self.p0.get(&(sw, port));
        let b = self.p1.get(&(sw, port));
        let f = |g: fn(&PortCounters) -> Option<u64>| {
            rate(a.and_then(|x| g(x)), b.and_then(|x| g(x)), self.dt)
        };
        Some((
            f(|p| p.tx_packets),
            f(|p| p.tx_bytes) * 8.0,
            f(|p| p.rx_packets),
            f(|p| p.rx_bytes) * 8.0,
        ))
    }

    /// Why a link between `a` and `b` has no rates (the first end not read), as its state.
    fn unread_state(&self, a: &str, b: &str) -> Option<String> {
        [a, b]
            .iter()
            .find_map(|s| self.unknown.get(s))
            .map(|u| u.data.replace('-', " "))
    }

    /// Every link, switch to switch and to hosts, busiest first.
    fn links(&self, t: &Topology, usage: &BTreeMap<String, String>, sort: Sort) -> Vec<LinkRow> {
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
            let a = self.port_rates(sa, pa);
            let b = self.port_rates(sb, pb);
            let name = weft_reconcile::core::link_name(t, li);
            let speed = l.speed.bits_per_sec().max(1) as f64;
            let state = self
                .unread_state(sa, sb)
                .or_else(|| usage.get(&name).cloned())
                .unwrap_or_else(|| run_state(usage));
            links.push(LinkRow {
                state,
                link: name,
                kind: "fabric",
                a_to_b_pps: a.map(|r| r.0),
                a_to_b_bps: a.map(|r| r.1),
                b_to_a_pps: b.map(|r| r.0),
                b_to_a_bps: b.map(|r| r.1),
                utilisation: a.zip(b).map(|(a, b)| a.1.max(b.1) / speed),
            });
        }
        for h in &t.hosts {
            let sw = &t.switches[h.switch];
            let port = &sw.ports[h.port];
            if !matches!(port.peer, Peer::Host { .. }) {
                continue;
            }
            let r = self.port_rates(&sw.name, &port.name);
            links.push(LinkRow {
                link: format!("{} ↔ {}:{}", h.name, sw.name, port.name),
                kind: "host",
                a_to_b_pps: r.map(|r| r.2),
                a_to_b_bps: r.map(|r| r.3),
                b_to_a_pps: r.map(|r| r.0),
                b_to_a_bps: r.map(|r| r.1),
                utilisation: r.map(|r| r.3.max(r.1) / h.speed.bits_per_sec().max(1) as f64),
                state: self
                    .unread_state(&sw.name, &sw.name)
                    .unwrap_or_else(|| run_state(usage)),
            });
        }
        links.retain(|l| self.keep(&l.link));
        // Links without rates rank last.
        let key = |l: &LinkRow| match sort {
            Sort::Utilisation => l.utilisation.unwrap_or(-1.0),
            Sort::Packets => l
                .a_to_b_pps
                .zip(l.b_to_a_pps)
                .map_or(-1.0, |(a, b)| a.max(b)),
        };
        links.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.link.cmp(&b.link)));
        links
    }

    /// Queues that sent, marked or trimmed, by ECN marks + trims per second.
    fn queues(&self) -> Vec<QueueRow> {
        let mut queues: Vec<QueueRow> = self
            .q1
            .iter()
            .map(|(&(sw, port, q), c)| {
                let o = self.q0.get(&(sw, port, q));
                QueueRow {
                    switch: sw.to_string(),
                    port: port.to_string(),
                    queue: q,
                    tx_pps: rate(o.and_then(|x| x.packets), c.packets, self.dt),
                    ecn_marked_per_s: rate(o.and_then(|x| x.ecn_marked), c.ecn_marked, self.dt),
                    trimmed_per_s: rate(o.and_then(|x| x.trimmed), c.trimmed, self.dt),
                }
            })
            .filter(|r| r.tx_pps > 0.0 || r.ecn_marked_per_s > 0.0 || r.trimmed_per_s > 0.0)
            .filter(|r| self.keep(&format!("{}:{}", r.switch, r.port)))
            .collect();
        queues.sort_by(|a, b| {
            (b.ecn_marked_per_s + b.trimmed_per_s)
                .total_cmp(&(a.ecn_marked_per_s + a.trimmed_per_s))
                .then(b.tx_pps.total_cmp(&a.tx_pps))
        });
        queues
    }

    /// Per port: the interval's depth p99 (where the plugin publishes a histogram), and PAUSE
    /// rates per priority.
    fn depth_and_pfc(&self) -> (Vec<DepthRow>, Vec<PfcRow>) {
        let mut depth = Vec::new();
        let mut pfc = Vec::new();
        for (&(sw, port), c) in &self.p1 {
            if !self.keep(&format!("{sw}:{port}")) {
                continue;
            }
            let o = self.p0.get(&(sw, port));
            if let Some(d) = depth_row(sw, port, o.copied(), c) {
                depth.push(d);
            }
            for prio in 0..8 {
                let a = o.map(|x| x.pfc[prio]).unwrap_or_default();
                let b = c.pfc[prio];
                let row = PfcRow {
                    switch: sw.to_string(),
                    port: port.to_string(),
                    priority: prio,
                    rx_pause_per_s: rate(a.rx_pause, b.rx_pause, self.dt),
                    tx_pause_per_s: rate(a.tx_pause, b.tx_pause, self.dt),
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
        (depth, pfc)
    }
}

/// The depth p99 over the interval of a port that publishes a histogram and counted packets.
fn depth_row(
    sw: &str,
    port: &str,
    prev: Option<&PortCounters>,
    cur: &PortCounters,
) -> Option<DepthRow> {
    let h1 = cur.depth_histogram?;
    let shift = cur.histogram_shift.unwrap_or(0);
    let h0 = prev
        .and_then(|x| x.depth_histogram)
        .unwrap_or([0; HIST_BUCKETS]);
    let d: Vec<u64> = (0..HIST_BUCKETS)
        .map(|b| h1[b].saturating_sub(h0[b]))
        .collect();
    let n: u64 = d.iter().sum();
    if n == 0 {
        return None;
    }
    let mut acc = 0;
    let mut p99 = 0;
    for (b, x) in d.iter().enumerate() {
        acc += x;
        if acc * 100 >= n * 99 {
            p99 = (((b as u64 + 1) << shift) - 1) as u32;
            break;
        }
    }
    Some(DepthRow {
        switch: sw.to_string(),
        port: port.to_string(),
        depth_p99: p99,
        packets: n,
    })
}

/// A link's state when its counters were read: `weft run`'s word, which says nothing for links
/// it does not report (then: in use while it runs, unknown without it).
fn run_state(usage: &BTreeMap<String, String>) -> String {
    if usage.is_empty() {
        "unknown".into()
    } else {
        "in use".into()
    }
}

/// Drop rates by reason, from each switch's WEFT_SWITCH row (switches read twice only).
fn drops(
    prev: &Snapshot,
    cur: &Snapshot,
    dt: f64,
    known: &BTreeSet<&str>,
    keep: impl Fn(&str) -> bool,
) -> Vec<DropRow> {
    let mut drops = Vec::new();
    for (sw, rows) in &cur.switches {
        if !known.contains(sw.as_str()) {
            continue;
        }
        let before: BTreeMap<String, (u64, u64)> = prev
            .switches
            .get(sw)
            .and_then(|r| {
                r.rows_read().iter().find_map(|r| match r {
                    CountersRow::Switch(s) => Some(s.drops.clone()),
                    _ => None,
                })
            })
            .unwrap_or_default();
        for r in rows.rows_read() {
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
    drops
}

/// RoCE PSN anomalies per switch (since it started), most first.
fn out_of_order(cur: &Snapshot, keep: impl Fn(&str) -> bool) -> Vec<OooRow> {
    let mut out: Vec<OooRow> = cur
        .switches
        .iter()
        .filter(|(sw, _)| keep(sw))
        .filter_map(|(sw, rows)| {
            rows.current()?.iter().find_map(|r| match r {
                CountersRow::Switch(s) if s.psn_out_of_order.is_some() => Some(OooRow {
                    switch: sw.clone(),
                    out_of_order: s.psn_out_of_order.unwrap_or(0),
                    regressions: s.psn_regressions.unwrap_or(0),
                }),
                _ => None,
            })
        })
        .collect();
    out.sort_by_key(|o| std::cmp::Reverse(o.out_of_order + o.regressions));
    out
}

/// The view of two snapshots `dt` seconds apart. `usage` is `weft run`'s link states by link
/// name (empty without it). Pure: the tests feed it recorded snapshots.
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
    let unknown = unknown_of(t, prev, cur);
    let known: BTreeSet<&str> = t
        .switches
        .iter()
        .map(|s| s.name.as_str())
        .filter(|s| !unknown.iter().any(|u| u.switch == *s))
        .collect();
    let (p0, q0) = index(prev, &known);
    let (p1, q1) = index(cur, &known);
    let pair = Pair {
        p0,
        q0,
        p1,
        q1,
        dt,
        filter,
        unknown: unknown.iter().map(|u| (u.switch.as_str(), u)).collect(),
    };
    let (depth, pfc) = pair.depth_and_pfc();
    let keep = |s: &str| pair.keep(s);
    let (links, queues) = (pair.links(t, usage, sort), pair.queues());
    let (drops, out_of_order) = (drops(prev, cur, dt, &known, keep), out_of_order(cur, keep));
    drop(pair);
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
        unknown,
    }
}

/// The switches whose counters were not current in `cur` (or, when they were, in `prev`), in
/// the intent's order.
fn unknown_of(t: &Topology, prev: &Snapshot, cur: &Snapshot) -> Vec<Unknown> {
    t.switches
        .iter()
        .filter_map(|s| {
            let of = |snap: &Snapshot| match snap.switches.get(&s.name) {
                Some(r) => r.unknown(&s.name, "counters"),
                None => SwitchRead::<()>::NoData.unknown(&s.name, "counters"),
            };
            of(cur).or_else(|| of(prev))
        })
        .collect()
}

/// Every switch's COUNTERS_DB `COUNTERS` rows, read at once and judged current or not.
pub async fn snapshot(t: &Topology) -> Snapshot {
    let reads = t.switches.iter().map(|s| async move {
        let r = read_counters(&s.db).await.map(|rows| {
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

    /// Every switch read, with no rows.
    fn read_all(t: &Topology) -> Snapshot {
        Snapshot {
            switches: t
                .switches
                .iter()
                .map(|s| (s.name.clone(), SwitchRead::Ok(Vec::new())))
                .collect(),
        }
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
        let mut prev = read_all(&t);
        let mut cur = read_all(&t);
        prev.switches
            .insert(s0.clone(), SwitchRead::Ok(vec![port(&p0, 0)]));
        prev.switches
            .insert(s1.clone(), SwitchRead::Ok(vec![port(&p1, 0)]));
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
                SwitchRead::Ok(vec![port(&p0, 1_000_000), port(&p1, 5_000_000), q]),
            );
            prev.switches
                .insert(s0.clone(), SwitchRead::Ok(vec![port(&p0, 0), port(&p1, 0)]));
        } else {
            cur.switches
                .insert(s0.clone(), SwitchRead::Ok(vec![port(&p0, 1_000_000)]));
            cur.switches
                .insert(s1.clone(), SwitchRead::Ok(vec![port(&p1, 5_000_000), q]));
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
        assert_eq!(v.links[0].a_to_b_bps, Some(40_000_000.0));
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
            "unknown",
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
        let mut cur = read_all(&t);
        cur.switches
            .insert("leaf1".into(), SwitchRead::Ok(vec![back]));
        let v = view(
            &t,
            &read_all(&t),
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
    fn a_switch_without_current_counters_is_unknown_and_none_is_said_only_when_all_were_read() {
        let t = topo();
        let all = read_all(&t);
        let v = view(&t, &all, &all, 1.0, &BTreeMap::new(), Sort::Utilisation, "");
        assert!(v.complete() && v.drops.is_empty() && v.pfc.is_empty());
        let mut cur = read_all(&t);
        cur.switches.insert("leaf1".into(), SwitchRead::NoData);
        cur.switches.insert(
            "spine1".into(),
            SwitchRead::Stale {
                data: vec![port("Ethernet0", 1_000)],
                why: crate::read::Staleness::NoWriter,
            },
        );
        let v = view(&t, &all, &cur, 1.0, &BTreeMap::new(), Sort::Utilisation, "");
        assert!(!v.complete());
        let unknown: Vec<(&str, &str)> = v
            .unknown
            .iter()
            .map(|u| (u.switch.as_str(), u.data))
            .collect();
        assert_eq!(unknown, [("spine1", "stale"), ("leaf1", "no-data")]);
        for l in v.links.iter().filter(|l| l.link.contains("leaf1")) {
            assert!(l.utilisation.is_none(), "{l:?}");
            assert!(l.state == "no data" || l.state == "stale", "{l:?}");
        }
        let h = v
            .links
            .iter()
            .find(|l| l.kind == "host" && l.link.contains("leaf2"))
            .expect("a host link of leaf2");
        assert_eq!(
            h.state, "unknown",
            "read, but no weft run to say it is in use"
        );
        assert_eq!(h.utilisation, Some(0.0));
    }

    #[test]
    fn a_counter_that_went_backwards_counts_from_zero() {
        assert_eq!(rate(Some(100), Some(30), 1.0), 30.0);
        assert_eq!(rate(Some(10), Some(30), 2.0), 10.0);
        assert_eq!(rate(None, None, 1.0), 0.0);
    }
}
