//! Rates between two reads of the counters, per link and per switch. Only counters a live
//! writer keeps are used (`Some` views): a port without them has no rate, never a rate of 0.

use std::collections::BTreeMap;

use crate::layout::Layout;
use crate::reading::{CounterView, PortTotals};

/// Counters per switch index (`None`: not usable this read), read at `t_ms`.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub t_ms: u64,
    pub switches: Vec<Option<CounterView>>,
}

/// `(b - a) / dt`; a counter that went backwards (the switch restarted) counts from zero.
pub fn rate(a: Option<u64>, b: Option<u64>, dt: f64) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b >= a => Some((b - a) as f64 / dt),
        (Some(_), Some(b)) => Some(b as f64 / dt),
        _ => None,
    }
}

/// One link over one interval. `None`: not known.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkRates {
    /// Bits/s from end a to end b (for a host link: leaf to host), and back.
    pub ab_bps: Option<f64>,
    pub ba_bps: Option<f64>,
    /// CE marks/s on the egress queues of both ends toward the link.
    pub ecn: Option<f64>,
    /// PAUSE frames/s received at either end (sent by the other).
    pub pause: Option<f64>,
    /// A queue toward the link held stormed by the PFC watchdog.
    pub storm: bool,
    /// Packets/s trimmed by the egress queues of both ends toward the link (`None`: neither
    /// end has a trim counter).
    pub trimmed: Option<f64>,
}

impl LinkRates {
    /// The busier direction over the link's speed.
    pub fn utilisation(&self, gbps: f64) -> Option<f64> {
        let m = match (self.ab_bps, self.ba_bps) {
            (Some(a), Some(b)) => a.max(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return None,
        };
        Some(m / (gbps * 1e9).max(1.0))
    }
}

fn port(c: &Counters, sw: usize, p: usize) -> Option<&PortTotals> {
    c.switches.get(sw)?.as_ref()?.ports.get(p)?.as_ref()
}

fn sum(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (x, None) | (None, x) => x,
    }
}

/// Per link of `l` (switch links, then host links), from `prev` to `cur`.
pub fn links(l: &Layout, prev: &Counters, cur: &Counters) -> Vec<LinkRates> {
    let dt = (cur.t_ms.saturating_sub(prev.t_ms) as f64 / 1000.0).max(1e-3);
    let field = |sw: usize, p: usize, f: fn(&PortTotals) -> Option<u64>| {
        rate(
            port(prev, sw, p).and_then(f),
            port(cur, sw, p).and_then(f),
            dt,
        )
    };
    l.links
        .iter()
        .map(|k| {
            let (a, ap) = (k.a, k.ap);
            let tx_a = field(a, ap, |p| p.tx_bytes).map(|x| x * 8.0);
            let rx_a = field(a, ap, |p| p.rx_bytes).map(|x| x * 8.0);
            let ecn_a = field(a, ap, |p| Some(p.ecn_marked));
            let pause_a = field(a, ap, |p| Some(p.pause_rx));
            let storm_a = port(cur, a, ap).is_some_and(|p| p.stormed);
            let trimmed_a = field(a, ap, |p| p.trimmed);
            if k.host {
                return LinkRates {
                    ab_bps: tx_a,
                    ba_bps: rx_a,
                    ecn: ecn_a,
                    pause: pause_a,
                    storm: storm_a,
                    trimmed: trimmed_a,
                };
            }
            let (b, bp) = (k.b, k.bp);
            let tx_b = field(b, bp, |p| p.tx_bytes).map(|x| x * 8.0);
            let rx_b = field(b, bp, |p| p.rx_bytes).map(|x| x * 8.0);
            LinkRates {
                // What a sent, else what b received.
                ab_bps: tx_a.or(rx_b),
                ba_bps: tx_b.or(rx_a),
                ecn: sum(ecn_a, field(b, bp, |p| Some(p.ecn_marked))),
                pause: sum(pause_a, field(b, bp, |p| Some(p.pause_rx))),
                storm: storm_a || port(cur, b, bp).is_some_and(|p| p.stormed),
                trimmed: sum(trimmed_a, field(b, bp, |p| p.trimmed)),
            }
        })
        .collect()
}

/// One switch over one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwitchRates {
    pub rx_bps: f64,
    pub tx_bps: f64,
    pub ecn: f64,
    pub pause_rx: f64,
    pub pause_tx: f64,
    /// Drops/s by reason.
    pub drops: BTreeMap<String, f64>,
}

/// Per switch (`None`: its counters not usable at both reads).
pub fn switches(prev: &Counters, cur: &Counters) -> Vec<Option<SwitchRates>> {
    let dt = (cur.t_ms.saturating_sub(prev.t_ms) as f64 / 1000.0).max(1e-3);
    cur.switches
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (p, c) = (prev.switches.get(i)?.as_ref()?, c.as_ref()?);
            let mut s = SwitchRates::default();
            for (a, b) in p.ports.iter().zip(&c.ports) {
                let (Some(a), Some(b)) = (a, b) else { continue };
                let r = |f: fn(&PortTotals) -> Option<u64>| rate(f(a), f(b), dt).unwrap_or(0.0);
                s.rx_bps += r(|p| p.rx_bytes) * 8.0;
                s.tx_bps += r(|p| p.tx_bytes) * 8.0;
                s.ecn += r(|p| Some(p.ecn_marked));
                s.pause_rx += r(|p| Some(p.pause_rx));
                s.pause_tx += r(|p| Some(p.pause_tx));
            }
            for (reason, n) in &c.drops {
                let pps = rate(
                    Some(p.drops.get(reason).copied().unwrap_or(0)),
                    Some(*n),
                    dt,
                )
                .unwrap_or(0.0);
                if pps > 0.0 {
                    s.drops.insert(reason.clone(), pps);
                }
            }
            Some(s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_counter_counts_from_zero_and_a_missing_one_has_no_rate() {
        assert_eq!(rate(Some(10), Some(30), 2.0), Some(10.0));
        assert_eq!(rate(Some(100), Some(30), 1.0), Some(30.0));
        assert_eq!(rate(None, Some(30), 1.0), None);
        assert_eq!(rate(Some(1), None, 1.0), None);
    }

    #[test]
    fn a_link_uses_what_one_end_sent_or_else_what_the_other_received_and_trims_only_where_counted()
    {
        let t = weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example");
        let l = crate::layout::layout(&t);
        let k = &l.links[0];
        let view = |sw: usize, p: usize, tx: u64, rx: u64| {
            let mut v = CounterView {
                ports: vec![None; t.switches[sw].ports.len()],
                ..Default::default()
            };
            v.ports[p] = Some(PortTotals {
                tx_bytes: Some(tx),
                rx_bytes: Some(rx),
                ..Default::default()
            });
            v
        };
        let n = t.switches.len();
        let mut prev = Counters {
            t_ms: 0,
            switches: vec![None; n],
        };
        let mut cur = Counters {
            t_ms: 1000,
            switches: vec![None; n],
        };
        // Only end b has counters: a→b from b's rx, b→a from b's tx.
        prev.switches[k.b] = Some(view(k.b, k.bp, 0, 0));
        cur.switches[k.b] = Some(view(k.b, k.bp, 1_000, 5_000));
        let r = links(&l, &prev, &cur)[0];
        assert_eq!((r.ab_bps, r.ba_bps), (Some(40_000.0), Some(8_000.0)));
        assert_eq!(r.utilisation(k.gbps), Some(40_000.0 / (k.gbps * 1e9)));
        // Another link, no counters at either end: unknown, not idle.
        let other = links(&l, &prev, &cur)
            .into_iter()
            .zip(&l.links)
            .find(|(_, x)| !x.host && x.a != k.b && x.b != k.b)
            .map(|(r, _)| r)
            .expect("a link away from b");
        assert_eq!(other.utilisation(100.0), None);
        // No trim counter anywhere: not known, not 0.
        assert_eq!(r.trimmed, None);
        // End b's queues trimmed 30 packets over the second.
        let trim = |n| {
            let mut v = view(k.b, k.bp, 0, 0);
            if let Some(p) = v.ports[k.bp].as_mut() {
                p.trimmed = Some(n);
            }
            v
        };
        prev.switches[k.b] = Some(trim(10));
        cur.switches[k.b] = Some(trim(40));
        assert_eq!(links(&l, &prev, &cur)[0].trimmed, Some(30.0));
    }
}
