//! What a fault does to the counters, as effects on ports and switches over a span of
//! emulated time. Several effects on one port combine (losses compound, scales multiply,
//! PAUSE rates add, the worst queue wins).

use std::collections::HashMap;

use weft_topology::SwitchIdx;

use crate::ports::PortId;

/// An effect on one port.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fx {
    /// This share of what arrives is lost before it is counted (a bad cable or optic at this
    /// end, a switch dropping on input).
    RxLoss(f64),
    /// The port sends this share of what it would (drains slowly, paused, a route missing).
    TxScale(f64),
    /// The port sends this many more bytes/s (an incast's flows).
    Extra(f64),
    /// A host port: the host sends this many more bytes/s (an incast sender).
    ExtraRx(f64),
    /// A host port: the host sends this share of what it would (paused by its leaf).
    HostScale(f64),
    /// This share of the port's lossless departures is CE-marked.
    Ecn(f64),
    /// This share of the port's departures found a deep queue.
    Deep(f64),
    /// PAUSE frames per second the port receives (its peer pauses it) / sends.
    PauseRx(f64),
    PauseTx(f64),
}

/// An effect on a switch as a whole.
#[derive(Debug, Clone, PartialEq)]
pub enum SwFx {
    /// Packets per second dropped for `reason` (`no_route`, `pfc_watchdog`).
    Drops { reason: &'static str, pps: f64 },
    /// RoCE PSN anomalies per second at its host ports.
    Psn { ooo: f64, regress: f64 },
    /// The PFC watchdog holds the port's lossless queue stormed (declared at the span's start).
    Watchdog { port: PortId },
    /// The plugin's read-back finds this APPL_STATE_DB key missing on the switch.
    Drift { key: String },
}

/// An effect and when it holds: `[from, to)` in emulated ms; `fault`: whose.
#[derive(Debug, Clone, PartialEq)]
pub struct Span<T> {
    pub fault: u32,
    pub from: u64,
    pub to: u64,
    pub fx: T,
}

impl<T> Span<T> {
    pub fn holds_at(&self, t: u64) -> bool {
        self.from <= t && t < self.to
    }
}

/// Every effect in force or to come.
#[derive(Debug, Default)]
pub struct Effects {
    pub ports: HashMap<PortId, Vec<Span<Fx>>>,
    pub switches: HashMap<SwitchIdx, Vec<Span<SwFx>>>,
    /// Every instant an effect starts or ends, sorted.
    pub changes: Vec<u64>,
}

impl Effects {
    pub fn port(&mut self, fault: u32, p: PortId, from: u64, to: u64, fx: Fx) {
        self.ports.entry(p).or_default().push(Span {
            fault,
            from,
            to,
            fx,
        });
        self.change(from, to);
    }

    pub fn switch(&mut self, fault: u32, s: SwitchIdx, from: u64, to: u64, fx: SwFx) {
        self.switches.entry(s).or_default().push(Span {
            fault,
            from,
            to,
            fx,
        });
        self.change(from, to);
    }

    fn change(&mut self, from: u64, to: u64) {
        for t in [from, to] {
            if t != u64::MAX
                && let Err(i) = self.changes.binary_search(&t)
            {
                self.changes.insert(i, t);
            }
        }
    }

    /// Ends every effect of `fault` still in force at `at`.
    pub fn end(&mut self, fault: u32, at: u64) {
        let mut ends = Vec::new();
        for spans in self.ports.values_mut() {
            for s in spans.iter_mut().filter(|s| s.fault == fault && s.to > at) {
                s.to = at.max(s.from);
                ends.push(s.to);
            }
        }
        for spans in self.switches.values_mut() {
            for s in spans.iter_mut().filter(|s| s.fault == fault && s.to > at) {
                s.to = at.max(s.from);
                ends.push(s.to);
            }
        }
        for t in ends {
            self.change(t, t);
        }
    }

    /// Forgets effects that ended before `t` (their counts are in the counters already).
    pub fn prune(&mut self, t: u64) {
        self.ports.retain(|_, v| {
            v.retain(|s| s.to > t);
            !v.is_empty()
        });
        // Watchdog and drift spans stay: the counts of storms declared and restored, and the
        // rows, are read from them.
        self.switches.retain(|_, v| {
            v.retain(|s| s.to > t || matches!(s.fx, SwFx::Watchdog { .. }));
            !v.is_empty()
        });
        self.changes.retain(|c| *c >= t);
    }
}

/// A port's effects at one instant, combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortFx {
    pub rx_loss: f64,
    pub tx_scale: f64,
    pub extra: f64,
    pub extra_rx: f64,
    pub host_scale: f64,
    pub ecn: f64,
    pub deep: f64,
    pub pause_rx: f64,
    pub pause_tx: f64,
}

impl Default for PortFx {
    fn default() -> Self {
        PortFx {
            rx_loss: 0.0,
            tx_scale: 1.0,
            extra: 0.0,
            extra_rx: 0.0,
            host_scale: 1.0,
            ecn: 0.0,
            deep: 0.0,
            pause_rx: 0.0,
            pause_tx: 0.0,
        }
    }
}

impl PortFx {
    pub fn of(spans: Option<&Vec<Span<Fx>>>, t: u64) -> PortFx {
        let mut c = PortFx::default();
        for s in spans.into_iter().flatten().filter(|s| s.holds_at(t)) {
            match s.fx {
                Fx::RxLoss(f) => c.rx_loss = 1.0 - (1.0 - c.rx_loss) * (1.0 - f),
                Fx::TxScale(f) => c.tx_scale *= f,
                Fx::Extra(b) => c.extra += b,
                Fx::ExtraRx(b) => c.extra_rx += b,
                Fx::HostScale(f) => c.host_scale *= f,
                Fx::Ecn(f) => c.ecn = c.ecn.max(f),
                Fx::Deep(f) => c.deep = c.deep.max(f),
                Fx::PauseRx(r) => c.pause_rx += r,
                Fx::PauseTx(r) => c.pause_tx += r,
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_on_one_port_combine_and_hold_only_in_their_span() {
        let mut e = Effects::default();
        e.port(1, 7, 100, 200, Fx::RxLoss(0.5));
        e.port(2, 7, 150, u64::MAX, Fx::RxLoss(0.5));
        e.port(2, 7, 150, u64::MAX, Fx::TxScale(0.5));
        e.port(2, 7, 150, u64::MAX, Fx::TxScale(0.5));
        let at = |e: &Effects, t| PortFx::of(e.ports.get(&7), t);
        assert_eq!(at(&e, 99), PortFx::default());
        assert_eq!(at(&e, 120).rx_loss, 0.5);
        assert_eq!(at(&e, 160).rx_loss, 0.75);
        assert_eq!(at(&e, 160).tx_scale, 0.25);
        assert_eq!(at(&e, 250).rx_loss, 0.5);
        assert_eq!(e.changes, vec![100, 150, 200]);
        e.end(2, 300);
        assert_eq!(at(&e, 300), PortFx::default());
        assert_eq!(e.changes, vec![100, 150, 200, 300]);
        e.prune(300);
        assert!(e.ports.is_empty());
    }
}
