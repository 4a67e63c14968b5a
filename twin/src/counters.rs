//! The counters each port and switch accumulates, integrated over emulated time from the
//! background load and the effects in force, and the rows the plugin writes of them.

use std::collections::BTreeMap;

use weft_sonic_schema::counters::{
    CountersRow, HIST_BUCKETS, PfcCounts, PortCounters, QUEUES, QueueCounters, SwitchCounters,
};

use crate::effects::{Effects, PortFx, SwFx};
use crate::fault::PACKET;
use crate::load::Loads;
use crate::ports::{Peer, PortId, Ports};

/// Bucket width of the queue-depth histogram (`1 << shift` packets): a queue of 8 packets or
/// more (the rules' deep queue) starts at bucket 2.
pub const HIST_SHIFT: u8 = 2;
/// The lossless class's share of the background bytes; the other classes share the rest.
const LOSSLESS_SHARE: f64 = 0.94;

/// One port's counters since the switch started, as floats (rates integrate to fractions).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cum {
    pub rx_p: f64,
    pub rx_b: f64,
    pub tx_p: f64,
    pub tx_b: f64,
    pub pfc_rx: f64,
    pub pfc_tx: f64,
    /// Per class queue (see [`Classes`]): packets, bytes, CE marks.
    pub q: [[f64; 3]; QUEUES],
    pub hist: [f64; HIST_BUCKETS],
}

/// One switch's own counters.
#[derive(Debug, Clone, Default)]
pub struct SwCum {
    /// Drop reason → packets.
    pub drops: BTreeMap<&'static str, f64>,
    pub psn_ooo: f64,
    pub psn_regress: f64,
}

/// The traffic classes' queues and PFC priority, from the intent.
#[derive(Debug, Clone)]
pub struct Classes {
    /// Queue → share of a port's bytes.
    pub share: [f64; QUEUES],
    /// The lossless queue (PFC priority) the storms and marks are on.
    pub lossless: usize,
}

impl Classes {
    pub fn of(t: &weft_topology::Topology) -> Classes {
        let mut share = [0.0; QUEUES];
        let lossless: Vec<usize> = t
            .qos
            .classes
            .iter()
            .filter(|c| c.lossless)
            .map(|c| usize::from(c.traffic_class))
            .filter(|q| *q < QUEUES)
            .collect();
        let other: Vec<usize> = t
            .qos
            .classes
            .iter()
            .map(|c| usize::from(c.traffic_class))
            .filter(|q| *q < QUEUES && !lossless.contains(q))
            .collect();
        let (ls, os) = match (lossless.is_empty(), other.is_empty()) {
            (true, _) => (0.0, 1.0),
            (false, true) => (1.0, 0.0),
            (false, false) => (LOSSLESS_SHARE, 1.0 - LOSSLESS_SHARE),
        };
        for q in &lossless {
            share[*q] += ls / lossless.len() as f64;
        }
        for q in &other {
            share[*q] += os / other.len() as f64;
        }
        Classes {
            share,
            lossless: lossless.first().copied().unwrap_or(3),
        }
    }
}

/// A port's rates at one instant (bytes/s, frames/s, shares).
#[derive(Debug, Clone, Copy, Default)]
struct Rates {
    egress: f64,
    ingress: f64,
    ecn: f64,
    deep: f64,
    pause_rx: f64,
    pause_tx: f64,
}

fn egress(base: &Loads, ports: &Ports, fx: &PortFx, p: PortId) -> f64 {
    let cap = ports.get(p).cap;
    (base.egress[p as usize] * fx.tx_scale + fx.extra).min(cap.max(0.0))
}

fn rates(base: &Loads, ports: &Ports, e: &Effects, p: PortId, t: u64) -> Rates {
    let fx = PortFx::of(e.ports.get(&p), t);
    let eg = egress(base, ports, &fx, p);
    let ingress = match ports.get(p).peer {
        Peer::None => 0.0,
        Peer::Host(_) => base.ingress[p as usize] * fx.host_scale + fx.extra_rx,
        Peer::Switch(q) => egress(base, ports, &PortFx::of(e.ports.get(&q), t), q),
    } * (1.0 - fx.rx_loss);
    let u = eg / ports.get(p).cap.max(1.0);
    Rates {
        egress: eg,
        ingress,
        // A loaded port marks a little and queues a little on its own.
        ecn: fx.ecn.max(1e-5 * u.powi(4)),
        deep: fx.deep.max(0.002 * u.powi(3)),
        pause_rx: fx.pause_rx,
        pause_tx: fx.pause_tx,
    }
}

fn add(c: &mut Cum, r: &Rates, classes: &Classes, secs: f64) {
    let (eb, ib) = (r.egress * secs, r.ingress * secs);
    let (ep, ip) = (eb / PACKET, ib / PACKET);
    c.tx_b += eb;
    c.tx_p += ep;
    c.rx_b += ib;
    c.rx_p += ip;
    c.pfc_rx += r.pause_rx * secs;
    c.pfc_tx += r.pause_tx * secs;
    for (q, share) in classes.share.iter().enumerate() {
        if *share > 0.0 {
            c.q[q][0] += ep * share;
            c.q[q][1] += eb * share;
            if q == classes.lossless {
                c.q[q][2] += ep * share * r.ecn;
            }
        }
    }
    // Departures by the depth they found: most an empty or short queue, `deep` of them 8 to
    // 27 packets (buckets 2..=6 at shift 2).
    let shallow = ep * (1.0 - r.deep);
    c.hist[0] += shallow * 0.8;
    c.hist[1] += shallow * 0.2;
    for b in 2..=6 {
        c.hist[b] += ep * r.deep / 5.0;
    }
}

/// Integrates port `p` from `a` to `b` (ms), splitting where effects change.
pub fn integrate_port(
    c: &mut Cum,
    base: &Loads,
    ports: &Ports,
    e: &Effects,
    classes: &Classes,
    p: PortId,
    (a, b): (u64, u64),
) {
    if b <= a {
        return;
    }
    let touched = e.ports.contains_key(&p)
        || matches!(ports.get(p).peer, Peer::Switch(q) if e.ports.contains_key(&q));
    if !touched {
        let r = rates(base, ports, e, p, a);
        add(c, &r, classes, (b - a) as f64 / 1000.0);
        return;
    }
    let mut from = a;
    let cuts = e
        .changes
        .iter()
        .copied()
        .filter(|x| *x > a && *x < b)
        .chain(std::iter::once(b));
    for to in cuts {
        let r = rates(base, ports, e, p, from + (to - from) / 2);
        add(c, &r, classes, (to - from) as f64 / 1000.0);
        from = to;
    }
}

/// Integrates switch `s`'s own counters from `a` to `b`.
pub fn integrate_switch(c: &mut SwCum, e: &Effects, s: usize, (a, b): (u64, u64)) {
    let Some(spans) = e.switches.get(&s) else {
        return;
    };
    for sp in spans {
        let (from, to) = (sp.from.max(a), sp.to.min(b));
        if to <= from {
            continue;
        }
        let secs = (to - from) as f64 / 1000.0;
        match &sp.fx {
            SwFx::Drops { reason, pps } => *c.drops.entry(reason).or_default() += pps * secs,
            SwFx::Psn { ooo, regress } => {
                c.psn_ooo += ooo * secs;
                c.psn_regress += regress * secs;
            }
            SwFx::Watchdog { .. } | SwFx::Drift { .. } => {}
        }
    }
}

/// A port's counters as the plugin's row holds them (whole packets and bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    pub rx_p: u64,
    pub rx_b: u64,
    pub tx_p: u64,
    pub tx_b: u64,
    pub pfc_rx: u64,
    pub pfc_tx: u64,
    pub q: [[u64; 3]; QUEUES],
    pub hist: [u64; HIST_BUCKETS],
}

impl Written {
    pub fn of(c: &Cum) -> Written {
        let f = |x: f64| x.max(0.0) as u64;
        let mut w = Written {
            rx_p: f(c.rx_p),
            rx_b: f(c.rx_b),
            tx_p: f(c.tx_p),
            tx_b: f(c.tx_b),
            pfc_rx: f(c.pfc_rx),
            pfc_tx: f(c.pfc_tx),
            ..Default::default()
        };
        for q in 0..QUEUES {
            for i in 0..3 {
                w.q[q][i] = f(c.q[q][i]);
            }
        }
        for b in 0..HIST_BUCKETS {
            w.hist[b] = f(c.hist[b]);
        }
        w
    }
}

/// A port row and its queues' rows with the fields that differ from `prev` (all of them when
/// `prev` is `None`: a first write, as the plugin's first poll).
pub fn port_rows(
    port: &str,
    w: &Written,
    prev: Option<&Written>,
    lossless: usize,
) -> Vec<CountersRow> {
    let changed = |a: u64, b: Option<u64>| -> Option<u64> { (Some(a) != b).then_some(a) };
    let pv = |f: fn(&Written) -> u64| prev.map(f);
    let mut pc = PortCounters {
        port: port.to_string(),
        rx_packets: changed(w.rx_p, pv(|x| x.rx_p)),
        rx_bytes: changed(w.rx_b, pv(|x| x.rx_b)),
        tx_packets: changed(w.tx_p, pv(|x| x.tx_p)),
        tx_bytes: changed(w.tx_b, pv(|x| x.tx_b)),
        ..Default::default()
    };
    for (q, pfc) in pc.pfc.iter_mut().enumerate() {
        let (rx, tx) = if q == lossless {
            (w.pfc_rx, w.pfc_tx)
        } else {
            (0, 0)
        };
        let (prx, ptx) = match prev {
            Some(p) if q == lossless => (Some(p.pfc_rx), Some(p.pfc_tx)),
            Some(_) => (Some(0), Some(0)),
            None => (None, None),
        };
        *pfc = PfcCounts {
            rx_pause: changed(rx, prx),
            tx_pause: changed(tx, ptx),
            rx_resume: prev.is_none().then_some(0),
            tx_resume: prev.is_none().then_some(0),
            // The twin does not model how long a queue stays paused.
            rx_pause_duration_us: None,
        };
    }
    if prev.is_none_or(|p| p.hist != w.hist) {
        pc.depth_histogram = Some(w.hist);
        pc.histogram_shift = Some(u64::from(HIST_SHIFT));
    }
    let mut out = vec![CountersRow::Port(Box::new(pc))];
    for q in 0..QUEUES {
        let p = prev.map(|p| p.q[q]);
        let qc = QueueCounters {
            port: port.to_string(),
            queue: q as u8,
            packets: changed(w.q[q][0], p.map(|x| x[0])),
            bytes: changed(w.q[q][1], p.map(|x| x[1])),
            ecn_marked: changed(w.q[q][2], p.map(|x| x[2])),
            ..Default::default()
        };
        if qc.packets.is_some() || qc.bytes.is_some() || qc.ecn_marked.is_some() {
            out.push(CountersRow::Queue(qc));
        }
    }
    out
}

/// The switch row: drops by reason (every reason the pipeline counts, as the plugin writes
/// them), PSN anomalies, the poll's time and interval.
pub fn switch_row(c: &SwCum, poll_time_ms: u64, interval_ms: u64) -> SwitchCounters {
    let mut drops: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in [
        "no_route",
        "no_nexthop",
        "pfc_watchdog",
        "ttl_expired",
        "acl",
    ] {
        let p = c.drops.get(r).copied().unwrap_or(0.0).max(0.0);
        drops.insert(r.to_string(), (p as u64, (p * PACKET) as u64));
    }
    SwitchCounters {
        drops,
        psn_out_of_order: Some(c.psn_ooo.max(0.0) as u64),
        psn_regressions: Some(c.psn_regress.max(0.0) as u64),
        poll_time_ms: Some(poll_time_ms),
        poll_interval_ms: Some(interval_ms),
    }
}
