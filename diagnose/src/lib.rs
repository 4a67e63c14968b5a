//! Fault diagnosis for a RoCE fabric: pure rules over a window of counter snapshots.
//!
//! The input is a [`Window`]: the fabric's cabling ([`Fabric`]) and two or more [`Sample`]s of
//! every switch's counters (COUNTERS_DB and STATE_DB as the plugin writes them, read by
//! `weft diagnose`). [`diagnose`] turns it into [`Finding`]s ranked by confidence, each with
//! the counters that moved ([`Evidence`]) and a suggested action. No rule does I/O or knows
//! about the testbed; windows are JSON, so recorded ones replay in tests.
//!
//! ```text
//!  rule              fires on                                          names
//!  ───────────────   ───────────────────────────────────────────────   ─────────────────────
//!  pfc_storm         a host (or port) pausing without being paused,    the origin host, the
//!                    continuously (rate ≥ storm_pause_rate) or with    victims along the
//!                    the PFC watchdog declaring the queue stormed       pause graph
//!  slow_receiver     a host pausing in stretches while its leaf's      the host
//!                    queue toward it builds (ECN marks / PAUSE sent)
//!  congestion        an egress queue marking ECN, deep, or trimming    the host, its senders,
//!                    packets, toward a host that does not pause        ECN before PFC or not,
//!                    (incast); PAUSE sent by a switch that is not      trimming
//!                    paused itself (back-pressure origin)
//!  slow_link         an egress queue marking ECN toward a switch       SW:PORT
//!                    (a link that drains slower than it is fed)
//!  lossy_link        tx at one end ≠ rx at the other                   both ends, loss rate
//!  black_hole        drops by reason no_route / no_nexthop, or the     the switch, the entries
//!                    switch's read-back differing from APPL_STATE_DB
//!  reordering        RoCE PSN out-of-order counts at a leaf            the host, routing mode
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

mod deltas;
mod group;
mod index;
mod lossy;

pub use group::summarize;

/// Priorities per port.
pub const PRIORITIES: usize = 8;

/// One end of a cable: a switch and port, or a host and its interface.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct End {
    pub node: String,
    pub port: String,
}

impl End {
    pub fn new(node: &str, port: &str) -> End {
        End {
            node: node.into(),
            port: port.into(),
        }
    }
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.node, self.port)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub a: End,
    pub b: End,
}

/// What the rules need to know about the fabric besides counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fabric {
    pub switches: Vec<String>,
    pub hosts: Vec<String>,
    /// Every cable, switch–switch and switch–host.
    pub links: Vec<Link>,
    /// Lossless priorities (PFC applies to them).
    #[serde(default)]
    pub lossless: Vec<u8>,
    /// Routing mode per traffic class name (`ecmp`, `spray`, `adaptive`, …), for attribution.
    #[serde(default)]
    pub routing: BTreeMap<String, String>,
    /// Each switch's tier (1 = leaf): a switch's ports toward the tier above form its uplink
    /// group, whose members per-packet routing keeps evenly loaded.
    #[serde(default)]
    pub tiers: BTreeMap<String, u8>,
    /// Lookups by end and host, built on first use (a fabric is not changed after).
    #[serde(skip)]
    pub index: index::IndexCache,
}

impl Fabric {
    /// The far end of the cable at `e`.
    pub fn peer(&self, e: &End) -> Option<&End> {
        if let Some(ix) = index::of(self) {
            return ix.peer(self, e);
        }
        self.links.iter().find_map(|l| {
            if &l.a == e {
                Some(&l.b)
            } else if &l.b == e {
                Some(&l.a)
            } else {
                None
            }
        })
    }
    pub fn is_host(&self, node: &str) -> bool {
        if let Some(ix) = index::of(self) {
            return ix.is_host(node);
        }
        self.hosts.iter().any(|h| h == node)
    }
    /// The leaf port a host hangs off.
    pub fn host_port(&self, host: &str) -> Option<End> {
        if let Some(ix) = index::of(self) {
            return ix.host_port(self, host);
        }
        self.links.iter().find_map(|l| {
            if l.a.node == host {
                Some(l.b.clone())
            } else if l.b.node == host {
                Some(l.a.clone())
            } else {
                None
            }
        })
    }
}

/// A port's counters (`COUNTERS:EthernetN`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortSample {
    pub rx_packets: u64,
    pub tx_packets: u64,
    /// Octets received / sent (what a finding's traffic is weighed by; 0 when not read).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rx_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tx_bytes: u64,
    /// PFC PAUSE frames received / sent, per priority.
    #[serde(default, skip_serializing_if = "all_zero")]
    pub pfc_rx_pause: [u64; PRIORITIES],
    #[serde(default, skip_serializing_if = "all_zero")]
    pub pfc_tx_pause: [u64; PRIORITIES],
    /// Egress queue-depth histogram: bucket b counts packets that found
    /// `[b << shift, (b+1) << shift)` packets queued (empty when not published).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depth_histogram: Vec<u64>,
    #[serde(default)]
    pub histogram_shift: u8,
    /// RoCE requests sent out of this port whose PSN skipped ahead, and older PSNs (the
    /// pipeline counts them per egress port); `None`: not published (unknown, not zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psn_out_of_order: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psn_regressions: Option<u64>,
}

fn all_zero(a: &[u64; PRIORITIES]) -> bool {
    a.iter().all(|x| *x == 0)
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// A queue's counters and watchdog state (`COUNTERS:EthernetN:q`, STATE_DB `PFC_WD_STATE`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueSample {
    pub packets: u64,
    pub ecn_marked: u64,
    /// Packets of the queue trimmed (cut to their headers and sent on: packet trimming).
    #[serde(default)]
    pub trimmed: u64,
    #[serde(default)]
    pub wd_stormed: bool,
    #[serde(default)]
    pub wd_detected: u64,
}

/// An entry whose switch read-back differs from APPL_STATE_DB.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Drift {
    /// The APPL_STATE_DB key (`P4RT_TABLE:FIXED_IPV4_TABLE:{…}`).
    pub key: String,
    /// `missing` (installed per APPL_STATE_DB, not on the switch) or `modified`.
    pub state: String,
}

/// One switch at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchSample {
    pub ports: BTreeMap<String, PortSample>,
    /// By `EthernetN:q`.
    #[serde(default)]
    pub queues: BTreeMap<String, QueueSample>,
    /// Drops by reason (`no_route`, `pfc_watchdog`, …).
    #[serde(default)]
    pub drops: BTreeMap<String, u64>,
    /// RoCE PSN anomalies at this switch's host-facing ports (sum over the ports; per port in
    /// [`PortSample`]).
    #[serde(default)]
    pub psn_out_of_order: u64,
    #[serde(default)]
    pub psn_regressions: u64,
    #[serde(default)]
    pub drift: Vec<Drift>,
    /// When the switch polled the counters this sample holds (ms on the switch's clock, e.g.
    /// `WEFT_POLL_TIME_MS`); compared only between samples of the same switch, so the
    /// switch's clock need not agree with the reader's. `None`: not published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_ms: Option<u64>,
}

/// Every switch at (about) one instant. A switch that could not be read is absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Milliseconds since the window's start.
    pub t_ms: u64,
    pub switches: BTreeMap<String, SwitchSample>,
}

/// What `diagnose` looks at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Shared by the windows of one fabric: its lookups ([`Fabric::index`]) are built once, not
    /// per window (at k=64 they took a tenth of a window's rules).
    pub fabric: std::sync::Arc<Fabric>,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    PfcStorm,
    SlowReceiver,
    Congestion,
    SlowLink,
    LossyLink,
    BlackHole,
    Reordering,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::PfcStorm => "pfc_storm",
            Kind::SlowReceiver => "slow_receiver",
            Kind::Congestion => "congestion",
            Kind::SlowLink => "slow_link",
            Kind::LossyLink => "lossy_link",
            Kind::BlackHole => "black_hole",
            Kind::Reordering => "reordering",
        }
    }
}

/// One counter that moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub switch: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    pub counter: String,
    /// How much it moved over the window.
    pub delta: u64,
    pub per_second: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: Kind,
    /// What is at fault: a host, `SW:PORT`, a link `A:P—B:Q`, or a switch.
    pub target: String,
    /// 0..1; findings below [`Thresholds::report`] are not reported.
    pub confidence: f64,
    pub summary: String,
    pub evidence: Vec<Evidence>,
    /// Who suffers from it (paused ports, senders, hosts behind the switch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub victims: Vec<String>,
    pub action: String,
    /// Bytes through the ports it affects over the window: the traffic it touches, what the
    /// findings are ranked by (0: not known).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes: u64,
    /// Findings the rules also made that share this one's cause and were folded into it
    /// (`kind target`), e.g. the queues a storm's PAUSE held up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folded: Vec<String>,
}

/// The rules' thresholds. Defaults suit the testbed and a real fabric alike: they are rates
/// and fractions, not absolute counts, except the minimum counts that keep a few stray packets
/// from making a finding.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Thresholds {
    /// Findings below this confidence are not reported.
    pub report: f64,
    /// PAUSE frames per second from one origin that count as a storm without the watchdog.
    pub storm_pause_rate: f64,
    /// Minimum PAUSE frames received from a host in the window to consider it at all.
    pub min_pauses: u64,
    /// Minimum ECN marks on a queue, and marks per departure, for congestion.
    pub min_marks: u64,
    pub min_mark_fraction: f64,
    /// Minimum packets a port trimmed in the window, and per departure, for congestion: a
    /// trimming queue is one past its threshold again and again, not a stray burst.
    pub min_trims: u64,
    pub min_trim_fraction: f64,
    /// A queue this deep (packets) counts as deep; a port whose histogram counted at least
    /// `min_histogram` packets in the window, `min_deep_fraction` of them deep, is congested.
    pub deep_queue: u64,
    pub min_histogram: u64,
    pub min_deep_fraction: f64,
    /// Uplink groups under per-packet routing: a member departing at most `max_member_share`
    /// of its busiest sibling (which departs at least `min_group_rate` lossless pkt/s) is slow,
    /// judged only once the group departed `min_group_packets` in the window: on a lightly
    /// loaded fabric a second's few dozen packets split 8:28 between two healthy uplinks.
    pub min_group_rate: f64,
    pub min_group_packets: u64,
    pub max_member_share: f64,
    /// Minimum packets sent on a link direction, lost packets and loss fraction for a lossy link.
    pub min_link_packets: u64,
    pub min_lost: u64,
    pub min_loss_fraction: f64,
    /// How far apart (seconds) the two ends of a link may have read their counters (the
    /// plugins poll independently: up to one counter interval, 300 ms on the testbed).
    pub counter_skew_s: f64,
    /// This many lossy links at once are one fabric-wide finding, not that many cables.
    pub max_lossy_links: usize,
    /// Minimum no-route drops for a black hole.
    pub min_route_drops: u64,
    /// Minimum out-of-order PSNs, and per packet sent toward the leaf's hosts.
    pub min_ooo: u64,
    pub min_ooo_fraction: f64,
    /// Where a lossy link's per-end rates between polls spread too wide to judge by poll times,
    /// judge it by sample times: right for counters read from the switches (a software switch
    /// reads them at a varying point of a poll, each sample read at one instant); wrong for
    /// samples placed on a grid by their scrapes (Prometheus), whose two ends are a scrape
    /// interval apart. Where both ends carry poll times, only if those show the two ends
    /// polled together (within 50 ms or a twentieth of the span).
    pub loss_by_sample_time: bool,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            report: 0.5,
            storm_pause_rate: 100.0,
            min_pauses: 5,
            min_marks: 20,
            min_mark_fraction: 0.02,
            min_trims: 20,
            min_trim_fraction: 0.01,
            deep_queue: 8,
            min_histogram: 20,
            min_deep_fraction: 0.5,
            min_group_rate: 10.0,
            min_group_packets: 100,
            max_member_share: 0.3,
            min_link_packets: 100,
            min_lost: 15,
            min_loss_fraction: 0.08,
            counter_skew_s: 0.45,
            max_lossy_links: 3,
            min_route_drops: 10,
            min_ooo: 20,
            min_ooo_fraction: 0.05,
            loss_by_sample_time: true,
        }
    }
}

/// Differences between the window's first and last sample, per switch; per port, the
/// increases over every sample (`deltas`).
struct Deltas<'a> {
    w: &'a Window,
    secs: f64,
    t: deltas::Table<'a>,
}

fn sub(a: u64, b: u64) -> u64 {
    // A counter that went backwards was reset (switch restarted): count from zero.
    if a >= b { a - b } else { a }
}

impl<'a> Deltas<'a> {
    /// `two_threads`: the deltas built on two threads.
    fn new(w: &'a Window, two_threads: bool, th: &Thresholds) -> Option<Deltas<'a>> {
        let (f, l) = (w.samples.first()?, w.samples.last()?);
        if w.samples.len() < 2 {
            return None;
        }
        let secs = (l.t_ms.saturating_sub(f.t_ms) as f64 / 1000.0).max(0.001);
        Some(Deltas {
            w,
            secs,
            t: deltas::build_on(w, two_threads, th.deep_queue),
        })
    }
    fn first(&self) -> &Sample {
        &self.w.samples[0]
    }
    fn last(&self) -> &Sample {
        &self.w.samples[self.w.samples.len() - 1]
    }
    /// The switch in both the first and the last sample.
    fn pair(&self, sw: &str) -> Option<(&SwitchSample, &SwitchSample)> {
        Some((
            self.first().switches.get(sw)?,
            self.last().switches.get(sw)?,
        ))
    }
    fn port(&self, e: &End, f: impl Fn(&PortSample) -> u64) -> u64 {
        self.moved(e).map_or(0, |p| f(&p.d))
    }
    /// The port's moves, if the window's first and last samples hold it.
    fn moved(&self, e: &End) -> Option<&deltas::PortDelta> {
        self.moved_at(&e.node, &e.port)
    }
    fn moved_at(&self, node: &str, port: &str) -> Option<&deltas::PortDelta> {
        self.t.ports.get(node)?.get(port)
    }
    fn queue(&self, sw: &str, key: &str, f: impl Fn(&QueueSample) -> u64) -> u64 {
        self.pair(sw)
            .and_then(|(a, b)| {
                let qb = b.queues.get(key)?;
                let qa = a.queues.get(key).cloned().unwrap_or_default();
                Some(sub(f(qb), f(&qa)))
            })
            .unwrap_or(0)
    }
    fn switch(&self, sw: &str, f: impl Fn(&SwitchSample) -> u64) -> u64 {
        self.pair(sw).map(|(a, b)| sub(f(b), f(a))).unwrap_or(0)
    }
    fn rate(&self, d: u64) -> f64 {
        round2(d as f64 / self.secs)
    }
    /// The highest rate of a port counter between two successive samples that hold it, timed
    /// by the switch's polls when it publishes them.
    fn peak_rate(&self, e: &End, f: impl Fn(&PortSample) -> u64) -> f64 {
        let mut prev: Option<(u64, Option<u64>, u64)> = None;
        let mut best: f64 = 0.0;
        for s in &self.w.samples {
            let Some(sw) = s.switches.get(&e.node) else {
                continue;
            };
            let Some(p) = sw.ports.get(&e.port) else {
                continue;
            };
            let now = (s.t_ms, sw.poll_ms, f(p));
            if let Some((t0, p0, v0)) = prev {
                let ms = match (p0, now.1) {
                    (Some(a), Some(b)) => b.saturating_sub(a),
                    _ => now.0.saturating_sub(t0),
                };
                if ms > 0 && now.2 >= v0 {
                    best = best.max((now.2 - v0) as f64 * 1000.0 / ms as f64);
                }
            }
            prev = Some(now);
        }
        round2(best)
    }
    fn ev(&self, sw: &str, port: Option<&str>, counter: impl Into<String>, d: u64) -> Evidence {
        Evidence {
            switch: sw.to_string(),
            port: port.map(str::to_string),
            counter: counter.into(),
            delta: d,
            per_second: self.rate(d),
        }
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Every finding at or above `th.report`, one per cause (findings sharing it folded into the
/// one that names it), those touching the most traffic first.
pub fn diagnose(w: &Window, th: &Thresholds) -> Vec<Finding> {
    let mut out = all_findings(w, th);
    out.retain(|f| f.confidence >= th.report);
    out
}

/// [`diagnose`] with every rule on the calling thread: the same findings, for a caller that
/// must leave the other cores alone (and to measure what the second thread gains).
pub fn diagnose_on_one_thread(w: &Window, th: &Thresholds) -> Vec<Finding> {
    let mut out = findings(w, th, false);
    out.retain(|f| f.confidence >= th.report);
    out
}

/// Every finding any rule made, also those below the reporting threshold, ranked.
pub fn all_findings(w: &Window, th: &Thresholds) -> Vec<Finding> {
    findings(w, th, true)
}

/// The cable rules (every cable of the fabric): lossy links, black holes.
fn cable_rules(d: &Deltas<'_>, th: &Thresholds) -> Vec<Finding> {
    let mut v = Vec::new();
    lossy::lossy_links(d, th, &mut v);
    black_holes(d, th, &mut v);
    v
}

fn findings(w: &Window, th: &Thresholds, two_threads: bool) -> Vec<Finding> {
    let Some(d) = Deltas::new(w, two_threads, th) else {
        return Vec::new();
    };
    // The rules only read the deltas: with `two_threads` the cable rules run beside the others
    // on a second thread. Findings are joined in the one order they always had.
    let mut out = Vec::new();
    let (cables, mut rest) = std::thread::scope(|s| {
        let cables = two_threads.then(|| s.spawn(|| cable_rules(&d, th)));
        pfc(&d, th, &mut out);
        queues(&d, th, &mut out);
        steered_around(&d, th, &mut out);
        let mut rest = Vec::new();
        reordering(&d, th, &mut rest);
        let cables = match cables {
            Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            None => cable_rules(&d, th),
        };
        (cables, rest)
    });
    out.extend(cables);
    out.append(&mut rest);
    for f in &mut out {
        f.confidence = round2(f.confidence.clamp(0.0, 1.0));
    }
    out.sort_by(|a, b| {
        b.confidence
            .total_cmp(&a.confidence)
            .then(a.kind.cmp(&b.kind))
            .then(a.target.cmp(&b.target))
    });
    // Two rules naming the same thing: the more confident one stays.
    let mut seen = BTreeSet::new();
    out.retain(|f| seen.insert((f.kind, f.target.clone())));
    group::fold(&d, &mut out);
    group::weigh(&d, &mut out);
    // Reported first, then by the traffic they touch, the most first.
    out.sort_by(|a, b| {
        (b.confidence >= th.report)
            .cmp(&(a.confidence >= th.report))
            .then(b.bytes.cmp(&a.bytes))
            .then(b.confidence.total_cmp(&a.confidence))
            .then(a.kind.cmp(&b.kind))
            .then(a.target.cmp(&b.target))
    });
    out
}

/// The switches of the window whose counters did not move at all from its first sample to
/// its last, nor their poll time: written before the window by a plugin that stopped (or,
/// without poll times, a switch that carried nothing: the two look alike). No loss is judged
/// at them.
pub fn frozen(w: &Window) -> Vec<String> {
    let t = deltas::build(w);
    let mut v: Vec<String> = t.frozen.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// A switch port pausing its peer on `prio`, or being paused by it.
fn pauses(d: &Deltas<'_>, e: &End, prio: usize) -> (u64, u64) {
    (
        d.port(e, |p| p.pfc_rx_pause[prio]),
        d.port(e, |p| p.pfc_tx_pause[prio]),
    )
}

fn switch_ports<'a>(d: &'a Deltas<'_>, sw: &str) -> Vec<&'a String> {
    d.last()
        .switches
        .get(sw)
        .map(|s| s.ports.keys().collect())
        .unwrap_or_default()
}

/// Congestion evidence of the queues of `e` (ECN marks, departures) on `prio`.
fn queue_marks(d: &Deltas<'_>, e: &End, prio: usize) -> (u64, u64) {
    d.moved(e)
        .map_or((0, 0), |p| (p.marks[prio], p.departures[prio]))
}

/// The pause graph: who paused whom, followed from every node that pauses without being
/// paused (the origins) to the ports it held up (the victims).
fn pfc(d: &Deltas<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    for prio in (0..PRIORITIES).filter(|p| d.t.active_prios[*p]) {
        let g = PauseGraph::new(d, prio);
        // Only a host that paused its leaf can be a storm or a slow receiver: those the graph
        // holds as pausers, not every host of the fabric.
        for h in g.evidence.keys().filter(|n| d.w.fabric.is_host(n)) {
            if let Some(f) = pausing_host(d, th, &g, h) {
                out.push(f);
            }
        }
        back_pressure(d, th, &g, out);
    }
}

/// Who paused whom on one priority.
struct PauseGraph {
    prio: usize,
    /// Edges pauser → paused switch port.
    paused_by: BTreeMap<End, Vec<End>>,
    is_paused: BTreeSet<String>,
    /// The PAUSE counted, by the node that sent it (a host or a switch).
    evidence: BTreeMap<String, Vec<Evidence>>,
}

impl PauseGraph {
    fn new(d: &Deltas<'_>, prio: usize) -> Self {
        let fab = &d.w.fabric;
        let mut g = PauseGraph {
            prio,
            paused_by: BTreeMap::new(),
            is_paused: BTreeSet::new(),
            evidence: BTreeMap::new(),
        };
        for sw in &fab.switches {
            // The few ports that sent or received PAUSE, in port order: one walk of the
            // switch's moves, no lookup per port (327,680 of them at k=64).
            let Some(moved) = d.t.ports.get(sw.as_str()) else {
                continue;
            };
            let mut pausing: Vec<(&str, u64, u64)> = moved
                .iter()
                .map(|(p, m)| (p, m.d.pfc_rx_pause[prio], m.d.pfc_tx_pause[prio]))
                .filter(|(_, rx, tx)| *rx > 0 || *tx > 0)
                .collect();
            pausing.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (port, rx, tx) in pausing {
                let e = End::new(sw, port);
                if rx > 0
                    && let Some(p) = fab.peer(&e)
                {
                    // p paused sw's egress toward it.
                    g.paused_by.entry(p.clone()).or_default().push(e.clone());
                    g.is_paused.insert(sw.clone());
                    // Evidence of the pauser (a host or a switch) is where it was counted.
                    g.evidence.entry(p.node.clone()).or_default().push(d.ev(
                        sw,
                        Some(port),
                        format!("SAI_PORT_STAT_PFC_{prio}_RX_PKTS"),
                        rx,
                    ));
                }
                if tx > 0
                    && let Some(p) = fab.peer(&e)
                    && fab.is_host(&p.node)
                {
                    // sw paused a host: the host is held up too (a victim, never a pauser).
                    g.paused_by.entry(e.clone()).or_default().push(p.clone());
                }
                if tx > 0 {
                    g.evidence.entry(sw.clone()).or_default().push(d.ev(
                        sw,
                        Some(port),
                        format!("SAI_PORT_STAT_PFC_{prio}_TX_PKTS"),
                        tx,
                    ));
                }
            }
        }
        g
    }

    /// Victims of an origin: the ports it paused, then whatever those switches paused (and
    /// the hosts they paused).
    fn victims_of(&self, origin: &str) -> Vec<String> {
        let mut by_node: BTreeMap<&str, Vec<&End>> = BTreeMap::new();
        for (pauser, paused) in &self.paused_by {
            by_node
                .entry(pauser.node.as_str())
                .or_default()
                .extend(paused.iter());
        }
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut queue: Vec<&str> = vec![origin];
        let mut out = Vec::new();
        while let Some(n) = queue.pop() {
            if !seen.insert(n) {
                continue;
            }
            for v in by_node.get(n).into_iter().flatten() {
                out.push(v.to_string());
                queue.push(v.node.as_str());
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// A host that pauses its leaf on the graph's priority, with what its leaf saw meanwhile.
struct PausingHost<'h> {
    host: &'h str,
    leaf: End,
    /// PAUSE frames per second.
    rate: f64,
    /// The PFC watchdog declared the queue stormed in the window, or it was already.
    wd: bool,
    wd_drops: u64,
    evidence: Vec<Evidence>,
    victims: Vec<String>,
}

/// The finding of host `h` if it pauses its leaf: a PFC storm when it pauses continuously, a
/// slow receiver when in stretches.
fn pausing_host(d: &Deltas<'_>, th: &Thresholds, g: &PauseGraph, h: &str) -> Option<Finding> {
    let prio = g.prio;
    let leaf = d.w.fabric.host_port(h)?;
    let (rx, _) = pauses(d, &leaf, prio);
    if rx < th.min_pauses {
        return None;
    }
    let key = format!("{}:{prio}", leaf.port);
    let wd_detected = d.queue(&leaf.node, &key, |q| q.wd_detected);
    let wd_now = d
        .last()
        .switches
        .get(&leaf.node)
        .and_then(|s| s.queues.get(&key))
        .is_some_and(|q| q.wd_stormed);
    let wd_drops = d.switch(&leaf.node, |s| {
        s.drops.get("pfc_watchdog").copied().unwrap_or(0)
    });
    let mut ev = g.evidence.get(h).cloned().unwrap_or_default();
    if wd_detected > 0 {
        ev.push(d.ev(
            &leaf.node,
            Some(&key),
            "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED",
            wd_detected,
        ));
    } else if wd_now {
        // Stormed since before the window.
        ev.push(d.ev(&leaf.node, Some(&key), "PFC_WD_STATUS stormed", 0));
    }
    if wd_drops > 0 {
        ev.push(d.ev(&leaf.node, None, "WEFT_DROP_PFC_WATCHDOG_PKTS", wd_drops));
    }
    let p = PausingHost {
        host: h,
        victims: g.victims_of(h),
        // The busiest stretch: a storm that began late in the window is as fast as ever.
        rate: d.rate(rx).max(d.peak_rate(&leaf, |x| x.pfc_rx_pause[prio])),
        wd: wd_detected > 0 || wd_now,
        wd_drops,
        evidence: ev,
        leaf,
    };
    // A storm pauses continuously: PAUSE refreshed faster than storm_pause_rate. A host that
    // stalls in stretches pauses less often; the watchdog may fire on either (a stretch longer
    // than detection_time), so it only adds confidence. Pausing that began in the window's
    // last interval, slower than a storm, may be a storm's first moments: the next window
    // tells.
    if p.rate < th.storm_pause_rate && began_last(d, &p.leaf, |x| x.pfc_rx_pause[prio]) {
        return None;
    }
    Some(if p.rate >= th.storm_pause_rate {
        storm(d, th, g, p)
    } else {
        slow_receiver(d, th, prio, p)
    })
}

/// A counter of `e` that moved only in the last of three or more samples.
fn began_last(d: &Deltas<'_>, e: &End, f: impl Fn(&PortSample) -> u64) -> bool {
    let s = &d.w.samples;
    if s.len() < 3 {
        return false;
    }
    let at = |i: usize| {
        s[i].switches
            .get(&e.node)
            .and_then(|x| x.ports.get(&e.port))
            .map(&f)
    };
    matches!((at(0), at(s.len() - 2)), (Some(a), Some(b)) if a == b)
}

fn storm(d: &Deltas<'_>, th: &Thresholds, g: &PauseGraph, p: PausingHost) -> Finding {
    let (h, leaf, prio, rate) = (p.host, &p.leaf, g.prio, p.rate);
    let cg = congestion(d, leaf);
    let mut confidence = if p.wd { 0.97 } else { 0.85 };
    if !p.wd && cg.congested(th) {
        // Continuous pauses with traffic backing up: could be a stuck receiver.
        confidence = 0.75;
    }
    // The spreading: PAUSE the victims sent on in turn.
    let spread: BTreeSet<String> = p
        .victims
        .iter()
        .filter_map(|v| v.split(':').next().map(str::to_string))
        .collect();
    let mut ev = p.evidence;
    for n in &spread {
        if let Some(e) = g.evidence.get(n) {
            ev.extend(
                e.iter()
                    .filter(|x| x.switch == *n && x.counter.ends_with("_TX_PKTS"))
                    .cloned(),
            );
        }
    }
    let mut victims = p.victims;
    if p.wd_drops > 0 {
        victims.push(format!(
            "{} lossless packets dropped by the watchdog on {}",
            p.wd_drops, leaf.node
        ));
    }
    Finding {
        kind: Kind::PfcStorm,
        target: h.to_string(),
        confidence,
        summary: format!(
            "PFC storm: {h} sends PAUSE on priority {prio} continuously ({rate} frames/s into {leaf}){}",
            if p.wd {
                "; the PFC watchdog declared the queue stormed"
            } else {
                ""
            }
        ),
        evidence: ev,
        victims,
        bytes: 0,
        folded: Vec::new(),
        action: format!(
            "Isolate {h}: check its NIC (a stuck or misbehaving NIC pauses forever); keep the PFC watchdog on {leaf} priority {prio} in drop mode until it is fixed"
        ),
    }
}

fn slow_receiver(d: &Deltas<'_>, th: &Thresholds, prio: usize, p: PausingHost) -> Finding {
    let (h, leaf, rate, wd, wd_drops) = (p.host, &p.leaf, p.rate, p.wd, p.wd_drops);
    let cg = congestion(d, leaf);
    let upstream_pauses: u64 = switch_ports(d, &leaf.node)
        .iter()
        .map(|port| pauses(d, &End::new(&leaf.node, port), prio).1)
        .sum();
    let backed_up = cg.congested(th) || upstream_pauses > 0;
    let mut ev = p.evidence;
    ev.extend(cg.evidence(d, leaf));
    let confidence = if backed_up || wd || wd_drops > 0 {
        0.88
    } else {
        0.6
    };
    Finding {
        kind: Kind::SlowReceiver,
        target: h.to_string(),
        confidence,
        summary: format!(
            "{h} does not drain: it pauses {leaf} on priority {prio} in stretches ({rate} frames/s){}",
            match (backed_up, wd) {
                (true, _) => format!(
                    " while the queue toward it backs up ({}; {upstream_pauses} PAUSE sent upstream)",
                    cg.describe()
                ),
                (false, true) => format!(
                    "; the PFC watchdog fired on its stretches and dropped {wd_drops} packets toward it"
                ),
                _ => String::new(),
            }
        ),
        evidence: ev,
        victims: p.victims,
        bytes: 0,
        folded: Vec::new(),
        action: format!(
            "Check {h}: receive ring, CPU, PCIe, application not posting receives; the fabric is fine"
        ),
    }
}

/// Switches that pause others without being paused: back-pressure origins (their own
/// congested queue), reported with the queue that marks most on the priority.
fn back_pressure(d: &Deltas<'_>, th: &Thresholds, g: &PauseGraph, out: &mut Vec<Finding>) {
    let (fab, prio) = (&d.w.fabric, g.prio);
    for sw in &fab.switches {
        if g.is_paused.contains(sw) {
            continue;
        }
        let Some(ev) = g.evidence.get(sw) else {
            continue;
        };
        let sent: u64 = ev
            .iter()
            .filter(|e| e.switch == *sw && e.counter.ends_with("_TX_PKTS"))
            .map(|e| e.delta)
            .sum();
        if sent < th.min_pauses {
            continue;
        }
        // Which of its queues is the origin: the one marking most on this priority, else the
        // one most often found deep (a slow link's queue fills to xoff through ECN's range
        // with few departures to mark).
        let hottest = switch_ports(d, sw)
            .into_iter()
            .map(|p| {
                let e = End::new(sw, p);
                let marks = queue_marks(d, &e, prio).0;
                ((marks, congestion(d, &e).deep.0), p.clone())
            })
            .max();
        let victims = g.victims_of(sw);
        // Toward a host: many senders to one (incast). Toward a switch: a link that drains
        // slower than it is fed (a slow link, its queue the origin of the back-pressure).
        let (kind, target, what) = match hottest {
            Some(((m, deep), p)) if m > 0 || deep > 0 => {
                let e = End::new(sw, &p);
                let (kind, t) = match fab.peer(&e) {
                    Some(peer) if fab.is_host(&peer.node) => (Kind::Congestion, peer.node.clone()),
                    _ => (Kind::SlowLink, e.to_string()),
                };
                (
                    kind,
                    t,
                    if m > 0 {
                        format!("its queue {sw}:{p}:{prio} is congested ({m} ECN marks)")
                    } else {
                        format!(
                            "its queue {sw}:{p} is deep ({deep} departures found it deep, no ECN marks)"
                        )
                    },
                )
            }
            _ => (
                Kind::Congestion,
                sw.clone(),
                "no queue of it marks ECN or runs deep".to_string(),
            ),
        };
        out.push(Finding {
            kind,
            target,
            confidence: 0.55,
            summary: format!(
                "back-pressure, not a storm: {sw} sends PAUSE on priority {prio} ({sent} frames) without being paused itself; {what}"
            ),
            evidence: ev.clone(),
            victims,
            bytes: 0,
            folded: Vec::new(),
            action: "Find the congested queue's senders (incast); lower ECN thresholds so DCQCN slows them before PFC engages".into(),
        });
    }
}

/// A port's congestion over the window: ECN marks and departures summed over its queues, and
/// the share of departures that found a deep queue (depth histogram).
struct Congestion {
    marks: u64,
    departures: u64,
    trimmed: u64,
    /// (packets that found ≥ deep_queue packets queued, packets counted by the histogram).
    deep: (u64, u64),
}

fn congestion(d: &Deltas<'_>, e: &End) -> Congestion {
    congestion_of(d.moved_at(&e.node, &e.port))
}

fn congestion_of(moved: Option<&deltas::PortDelta>) -> Congestion {
    let mut c = Congestion {
        marks: 0,
        departures: 0,
        trimmed: 0,
        deep: (0, 0),
    };
    if let Some(p) = moved {
        c.marks = p.marks.iter().sum();
        c.departures = p.departures.iter().sum();
        c.trimmed = p.trimmed.iter().sum();
        // Bucketed at `th.deep_queue` when the deltas were built.
        c.deep = p.deep;
    }
    c
}

impl Congestion {
    fn marking(&self, th: &Thresholds) -> bool {
        self.marks >= th.min_marks
            && self.marks as f64 >= th.min_mark_fraction * self.departures.max(1) as f64
    }
    fn deep_fraction(&self) -> f64 {
        self.deep.0 as f64 / self.deep.1.max(1) as f64
    }
    fn queued(&self, th: &Thresholds) -> bool {
        self.deep.1 >= th.min_histogram && self.deep_fraction() >= th.min_deep_fraction
    }
    /// Persistent trimming: the queue crossed the trim threshold again and again.
    fn trimming(&self, th: &Thresholds) -> bool {
        self.trimmed >= th.min_trims
            && self.trimmed as f64 >= th.min_trim_fraction * self.departures.max(1) as f64
    }
    fn congested(&self, th: &Thresholds) -> bool {
        self.marking(th) || self.queued(th) || self.trimming(th)
    }
    /// How strongly: the largest of the marked, the trimmed and the deep share.
    fn strength(&self) -> f64 {
        let per_departure = |n: u64| n as f64 / self.departures.max(1) as f64;
        per_departure(self.marks)
            .max(per_departure(self.trimmed))
            .max(self.deep_fraction())
            .min(1.0)
    }
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.marks > 0 {
            parts.push(format!(
                "{} of {} departures ECN-marked",
                self.marks, self.departures
            ));
        }
        if self.trimmed > 0 {
            parts.push(format!(
                "{} packets trimmed (receivers asked for each again)",
                self.trimmed
            ));
        }
        if self.deep.1 > 0 {
            parts.push(format!(
                "{:.0}% of {} packets found a deep queue",
                self.deep_fraction() * 100.0,
                self.deep.1
            ));
        }
        parts.join(", ")
    }
    fn evidence(&self, d: &Deltas<'_>, e: &End) -> Vec<Evidence> {
        let mut ev = Vec::new();
        if self.marks > 0 {
            ev.push(d.ev(
                &e.node,
                Some(&e.port),
                "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS (all queues)",
                self.marks,
            ));
        }
        if self.trimmed > 0 {
            ev.push(d.ev(
                &e.node,
                Some(&e.port),
                "SAI_QUEUE_STAT_TRIM_PACKETS (all queues)",
                self.trimmed,
            ));
        }
        if self.deep.0 > 0 {
            ev.push(d.ev(
                &e.node,
                Some(&e.port),
                "WEFT_QUEUE_DEPTH_BUCKET_<deep>_PKTS",
                self.deep.0,
            ));
        }
        ev
    }
}

/// Which of ECN, PFC and trimming acted on a congested port, for the finding's summary.
fn what_acted(marked: bool, pfc_sent: u64, trimmed: bool) -> String {
    match (marked, pfc_sent > 0) {
        (true, false) => "ECN acts before PFC (no PAUSE sent)".to_string(),
        (true, true) => {
            format!("PFC engaged too ({pfc_sent} PAUSE sent): ECN does not slow the senders enough")
        }
        (false, true) => format!(
            "PFC engaged ({pfc_sent} PAUSE sent) without ECN marks: ECN thresholds above xoff?"
        ),
        (false, false) if trimmed => {
            "trimming acted, no ECN marks nor PAUSE (lossy class)".to_string()
        }
        (false, false) => {
            "neither ECN nor PFC acted (non-ECT traffic or thresholds above the queue)".to_string()
        }
    }
}

/// The congested ports of `sw`, in port order: its moved ports walked in the table's own
/// order, no lookup per port (327,680 of them at 5,120 switches).
fn congested_ports<'d>(d: &'d Deltas<'_>, th: &Thresholds, sw: &str) -> Vec<(&'d str, Congestion)> {
    let Some(moved) = d.t.ports.get(sw) else {
        return Vec::new();
    };
    let mut hot: Vec<(&str, Congestion)> = moved
        .iter()
        .map(|(p, m)| (p, congestion_of(Some(m))))
        .filter(|(_, c)| c.congested(th))
        .collect();
    hot.sort_by(|a, b| a.0.cmp(b.0));
    hot
}

/// PAUSE frames `sw` sent on all its ports and priorities in the window.
fn pause_sent(d: &Deltas<'_>, sw: &str) -> u64 {
    switch_ports(d, sw)
        .iter()
        .map(|p| {
            (0..PRIORITIES)
                .map(|q| pauses(d, &End::new(sw, p), q).1)
                .sum::<u64>()
        })
        .sum()
}

/// Every host with what its leaf received from it in the window, most first.
fn hosts_by_rx<'w>(d: &Deltas<'w>) -> Vec<(u64, &'w String)> {
    let fab: &'w Fabric = &d.w.fabric;
    let mut v: Vec<(u64, &String)> = fab
        .hosts
        .iter()
        .filter_map(|h| {
            let hp = fab.host_port(h)?;
            Some((d.port(&hp, |p| p.rx_packets), h))
        })
        .collect();
    v.sort_by(|a, b| b.cmp(a));
    v
}

/// Congested egress ports: toward a host (incast) or toward a switch (a slow link).
fn queues(d: &Deltas<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    let fab = &d.w.fabric;
    let mut by_rx = None;
    for sw in &fab.switches {
        // The switch's PAUSE sent, summed once, on its first congested port that needs it.
        let mut sent: Option<u64> = None;
        for (port, c) in congested_ports(d, th, sw) {
            let port = &port.to_string();
            let e = End::new(sw, port);
            let Some(peer) = fab.peer(&e) else { continue };
            let peer_pauses: u64 = (0..PRIORITIES).map(|q| pauses(d, &e, q).0).sum();
            // A switch sends PAUSE only when its own queue passes xoff, and one frame holds the
            // queue for its quanta: a single one from a switch peer explains a deep queue. A
            // host that paused at all holds its port too: with fewer than `min_pauses` frames it
            // is not yet called a slow receiver, nor is its queue an incast (a slow receiver's
            // first window, or a NIC's stray frame beside an incast): the next window judges.
            if peer_pauses > 0 {
                // Its peer holds it up: the pause rule names the host (slow receiver or storm)
                // or, through the pause graph, whoever the peer switch is held up by.
                continue;
            }
            let pfc_sent = *sent.get_or_insert_with(|| pause_sent(d, sw));
            let mut ev = c.evidence(d, &e);
            let tx = d.port(&e, |p| p.tx_packets);
            ev.push(d.ev(sw, Some(port), "SAI_PORT_STAT_IF_OUT_UCAST_PKTS", tx));
            if pfc_sent > 0 {
                ev.push(d.ev(
                    sw,
                    None,
                    "SAI_PORT_STAT_PFC_<p>_TX_PKTS (all ports)",
                    pfc_sent,
                ));
            }
            let ecn_first = what_acted(c.marks > 0, pfc_sent, c.trimmed > 0);
            let strength = c.strength();
            if fab.is_host(&peer.node) {
                // Senders: hosts whose leaf received most in the window (every host's, looked
                // up once a window: 65,536 hosts at k=64, and an incast has many victims).
                let by_rx = by_rx.get_or_insert_with(|| hosts_by_rx(d));
                let senders: Vec<(u64, &String)> = by_rx
                    .iter()
                    .filter(|(_, h)| **h != peer.node)
                    .copied()
                    .collect();
                let top = senders.first().map_or(0, |s| s.0);
                let senders: Vec<String> = senders
                    .into_iter()
                    .filter(|(n, _)| *n > 0 && *n * 3 >= top)
                    .map(|(n, h)| format!("{h} ({} pkt/s)", d.rate(n)))
                    .collect();
                out.push(Finding {
                    kind: Kind::Congestion,
                    target: peer.node.clone(),
                    confidence: (0.7 + strength / 2.0).min(0.92),
                    summary: format!(
                        "congestion (incast) toward {}: {e} {}; departing at {} pkt/s; {} senders; {ecn_first}",
                        peer.node,
                        c.describe(),
                        d.rate(tx),
                        senders.len()
                    ),
                    evidence: ev,
                    victims: senders,
                    bytes: 0,
                    folded: Vec::new(),
                    action: format!(
                        "Not a fault: many-to-one traffic toward {}. Spread it (schedule, rails) or let DCQCN act: check the senders answer CNPs",
                        peer.node
                    ),
                });
            } else {
                // Siblings: the switch's other ports toward switches, for comparison.
                let siblings: Vec<String> = switch_ports(d, sw)
                    .into_iter()
                    .filter(|p| *p != port)
                    .filter(|p| {
                        fab.peer(&End::new(sw, p))
                            .is_some_and(|x| !fab.is_host(&x.node))
                    })
                    .map(|p| {
                        format!(
                            "{sw}:{p} {} pkt/s",
                            d.rate(d.port(&End::new(sw, p), |x| x.tx_packets))
                        )
                    })
                    .collect();
                out.push(Finding {
                    kind: Kind::SlowLink,
                    target: e.to_string(),
                    confidence: (0.72 + strength / 2.0).min(0.9),
                    summary: format!(
                        "slow link {e} → {peer}: its queue stays deep ({}) while departing at {} pkt/s, and {peer} does not pause it; {ecn_first}",
                        c.describe(),
                        d.rate(tx),
                    ),
                    evidence: ev,
                    victims: siblings,
                    bytes: 0,
                    folded: Vec::new(),
                    action: format!(
                        "Check {e}'s link speed and errors (autoneg, a bad optic or cable); take it out of service (weft link down) if it stays slow"
                    ),
                });
            }
        }
    }
}

/// Uplinks that per-packet routing steers around: a member of a switch's uplink group that
/// departs far less lossless traffic than its siblings while still carrying some (a link
/// down carries none) is draining slowly; adaptive routing hides its queue by avoiding it.
fn steered_around(d: &Deltas<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    let fab = &d.w.fabric;
    let per_packet = fab
        .routing
        .values()
        .any(|m| matches!(m.as_str(), "spray" | "adaptive"));
    if !per_packet || fab.lossless.is_empty() {
        return;
    }
    for sw in &fab.switches {
        let Some(&tier) = fab.tiers.get(sw) else {
            continue;
        };
        let ups: Vec<End> = switch_ports(d, sw)
            .into_iter()
            .map(|p| End::new(sw, p))
            .filter(|e| {
                fab.peer(e)
                    .and_then(|p| fab.tiers.get(&p.node))
                    .is_some_and(|t| *t > tier)
            })
            .collect();
        if ups.len() < 2 {
            continue;
        }
        let lossless = |e: &End| -> u64 {
            fab.lossless
                .iter()
                .map(|q| queue_marks(d, e, usize::from(*q)).1)
                .sum()
        };
        let loads: Vec<(u64, &End)> = ups.iter().map(|e| (lossless(e), e)).collect();
        let Some(&(max, _)) = loads.iter().max_by_key(|x| x.0) else {
            continue;
        };
        let total: u64 = loads.iter().map(|x| x.0).sum();
        if (max as f64) < th.min_group_rate * d.secs || total < th.min_group_packets {
            continue;
        }
        for (n, e) in &loads {
            if *n == 0 || (*n as f64) > th.max_member_share * max as f64 {
                continue;
            }
            // A member its peer paused drains little because it was told to stop: a victim of
            // back-pressure beyond it (the pause rule follows that), not a slow link.
            if fab
                .lossless
                .iter()
                .any(|q| pauses(d, e, usize::from(*q)).0 > 0)
            {
                continue;
            }
            let peer = fab.peer(e).map(|p| p.to_string()).unwrap_or_default();
            let c = congestion(d, e);
            let mut ev = vec![d.ev(sw, Some(&e.port), "SAI_QUEUE_STAT_PACKETS (lossless)", *n)];
            ev.extend(c.evidence(d, e));
            for (m, o) in &loads {
                if o != e {
                    ev.push(d.ev(sw, Some(&o.port), "SAI_QUEUE_STAT_PACKETS (lossless)", *m));
                }
            }
            out.push(Finding {
                kind: Kind::SlowLink,
                target: e.to_string(),
                confidence: if c.deep.0 > 0 { 0.8 } else { 0.7 },
                summary: format!(
                    "slow link {e} → {peer}: per-packet routing steers around it: it departed {} lossless pkt/s while its busiest sibling uplink departed {} pkt/s{}",
                    d.rate(*n),
                    d.rate(max),
                    if c.deep.0 > 0 {
                        format!(" ({})", c.describe())
                    } else {
                        String::new()
                    }
                ),
                evidence: ev,
                victims: Vec::new(),
                bytes: 0,
                folded: Vec::new(),
                action: format!(
                    "Check {e}'s link speed and errors (autoneg, a bad optic or cable); take it out of service (weft link down) if it stays slow"
                ),
            });
        }
    }
}

const ROUTE_DROPS: [&str; 2] = ["no_route", "no_nexthop"];

/// Drops for lack of a route, and entries the switch lost behind Weft's back.
fn black_holes(d: &Deltas<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    for sw in &d.w.fabric.switches {
        let mut ev = Vec::new();
        let mut drops = 0;
        for r in ROUTE_DROPS {
            let n = d.switch(sw, |s| s.drops.get(r).copied().unwrap_or(0));
            if n > 0 {
                ev.push(d.ev(
                    sw,
                    None,
                    format!("WEFT_DROP_{}_PKTS", r.to_ascii_uppercase()),
                    n,
                ));
                drops += n;
            }
        }
        let drift: Vec<&Drift> = d
            .last()
            .switches
            .get(sw)
            .map(|s| s.drift.iter().collect())
            .unwrap_or_default();
        if drops < th.min_route_drops && drift.is_empty() {
            continue;
        }
        let entries: Vec<String> = drift
            .iter()
            .map(|x| format!("{} ({})", x.key, x.state))
            .collect();
        let confidence = match (drops >= th.min_route_drops, !drift.is_empty()) {
            (true, true) => 0.96,
            (true, false) => 0.9,
            _ => 0.7,
        };
        out.push(Finding {
            kind: Kind::BlackHole,
            target: sw.clone(),
            confidence,
            summary: if entries.is_empty() {
                format!(
                    "black hole on {sw}: {drops} packets dropped for lack of a route ({} pkt/s)",
                    d.rate(drops)
                )
            } else {
                format!(
                    "black hole on {sw}: {drops} packets dropped for lack of a route; the switch's tables differ from APPL_STATE_DB: {}",
                    entries.join(", ")
                )
            },
            evidence: ev,
            victims: entries,
            bytes: 0,
            folded: Vec::new(),
            action: format!(
                "Re-sync {sw} (restart its plugin, or weft apply): an entry was removed or rewritten behind Weft's back; find who writes to the switch"
            ),
        });
    }
}

/// RoCE PSN out-of-order counts at a leaf's host ports, each attributed to the host its port
/// faces (the pipeline counts them per egress port): one finding per host that sees them. A
/// switch that publishes only its total (no per-port counts) gives one finding on the switch:
/// which of its hosts is not known, and not guessed.
fn reordering(d: &Deltas<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    let fab = &d.w.fabric;
    let per_packet: Vec<String> = fab
        .routing
        .iter()
        .filter(|(_, m)| matches!(m.as_str(), "spray" | "adaptive"))
        .map(|(c, m)| format!("{c}: {m}"))
        .collect();
    let cause = if per_packet.is_empty() {
        "no class routes per packet: look for a path change (flowlet gaps, failover) or a misbehaving sender".to_string()
    } else {
        format!(
            "per-packet routing ({}) over paths of unequal latency",
            per_packet.join(", ")
        )
    };
    for sw in &fab.switches {
        // Too few anomalies on any port and on the switch for either form of the rule.
        let port_ooo =
            d.t.ports
                .get(sw.as_str())
                .is_some_and(|m| m.values().any(|p| p.psn.0.is_some_and(|n| n >= th.min_ooo)));
        if !port_ooo && d.switch(sw, |s| s.psn_out_of_order) < th.min_ooo {
            continue;
        }
        // Host ports of the switch: (port, host).
        let hosts: Vec<(String, String)> = switch_ports(d, sw)
            .into_iter()
            .filter_map(|p| {
                let peer = fab.peer(&End::new(sw, p))?;
                fab.is_host(&peer.node)
                    .then(|| (p.clone(), peer.node.clone()))
            })
            .collect();
        let counted: Vec<(&String, &String, u64)> = hosts
            .iter()
            .filter_map(|(p, h)| {
                let ooo = d.moved(&End::new(sw, p))?.psn.0?;
                Some((p, h, ooo))
            })
            .collect();
        if counted.is_empty() {
            reordering_at_switch(d, th, sw, &hosts, &cause, out);
            continue;
        }
        for (port, host, ooo) in counted {
            let e = End::new(sw, port);
            let sent = d.port(&e, |x| x.tx_packets);
            let fraction = ooo as f64 / sent.max(1) as f64;
            if ooo < th.min_ooo || fraction < th.min_ooo_fraction {
                continue;
            }
            let regress = d.moved(&e).and_then(|p| p.psn.1).unwrap_or(0);
            let mut ev = vec![d.ev(sw, Some(port), "WEFT_PSN_OUT_OF_ORDER_PKTS", ooo)];
            if regress > 0 {
                ev.push(d.ev(sw, Some(port), "WEFT_PSN_REGRESSION_PKTS", regress));
            }
            ev.push(d.ev(sw, Some(port), "SAI_PORT_STAT_IF_OUT_UCAST_PKTS", sent));
            out.push(Finding {
                kind: Kind::Reordering,
                target: host.clone(),
                confidence: (0.65 + fraction).min(0.9),
                summary: format!(
                    "reordering toward {host} ({sw}:{port}): {ooo} RoCE requests out of order ({:.1}% of {sent} packets sent to it), {regress} PSN regressions (retransmissions or late packets); {cause}",
                    fraction * 100.0
                ),
                evidence: ev,
                victims: Vec::new(),
                bytes: 0,
                folded: Vec::new(),
                action: format!(
                    "Find the slower path toward {sw} (a link with extra latency or a deep queue: weft trace); NICs without out-of-order placement retransmit: use flowlet or ECMP for them"
                ),
            });
        }
    }
}

/// Reordering a switch counts only in total: a finding on the switch, its hosts the victims.
fn reordering_at_switch(
    d: &Deltas<'_>,
    th: &Thresholds,
    sw: &str,
    hosts: &[(String, String)],
    cause: &str,
    out: &mut Vec<Finding>,
) {
    let ooo = d.switch(sw, |s| s.psn_out_of_order);
    let toward: u64 = hosts
        .iter()
        .map(|(p, _)| d.port(&End::new(sw, p), |x| x.tx_packets))
        .sum();
    let fraction = ooo as f64 / toward.max(1) as f64;
    if ooo < th.min_ooo || fraction < th.min_ooo_fraction {
        return;
    }
    let regress = d.switch(sw, |s| s.psn_regressions);
    let mut ev = vec![d.ev(sw, None, "WEFT_PSN_OUT_OF_ORDER_PKTS", ooo)];
    if regress > 0 {
        ev.push(d.ev(sw, None, "WEFT_PSN_REGRESSION_PKTS", regress));
    }
    out.push(Finding {
        kind: Kind::Reordering,
        target: sw.to_string(),
        confidence: (0.6 + fraction).min(0.8),
        summary: format!(
            "reordering toward {sw}'s hosts: {ooo} RoCE requests out of order ({:.1}% of {toward} packets sent to them), {regress} PSN regressions; which host is unknown ({sw} publishes no per-port PSN counts); {cause}",
            fraction * 100.0
        ),
        evidence: ev,
        victims: hosts.iter().map(|(_, h)| h.clone()).collect(),
        bytes: 0,
        folded: Vec::new(),
        action: format!(
            "Find the slower path toward {sw} (weft trace); upgrade its plugin to count PSN anomalies per port to name the host"
        ),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_one_sample_yields_nothing() {
        let w = Window {
            samples: vec![Sample::default()],
            ..Default::default()
        };
        assert!(diagnose(&w, &Thresholds::default()).is_empty());
    }

    #[test]
    fn a_reset_counter_counts_from_zero() {
        assert_eq!(sub(5, 100), 5);
        assert_eq!(sub(100, 5), 95);
    }
}
