//! The sender's rate state machine (DCQCN's reaction point), on explicit time so it can be
//! tested without sleeping.
//!
//! On a CNP: `target = current; current *= 1 - alpha/2; alpha = (1-g)·alpha + g`, and the
//! recovery stages restart. Every `alpha_period` without a CNP: `alpha *= 1-g`. Every
//! `increase_period` without a CNP the sender recovers: the first `fast_recovery_stages`
//! periods halve the distance to the target (`current = (target + current)/2`); then additive
//! increase raises the target by `additive_increase` each period; after as many again, hyper
//! increase raises it by `hyper_increase` times the number of hyper stages so far. Rates stay
//! within `[min_rate, line_rate]`.
//!
//! DCQCN's byte counter (a recovery step per N bytes sent) is left out: recovery is timed only.
//!
//! On a real fabric DCQCN's timers (50–55 µs) span several round trips, so a sender hears the
//! effect of one cut before it cuts or grows again. An emulated fabric's round trip is tens of
//! packet times; to keep that relation the sender reports its measured round trip
//! ([`Dcqcn::set_round_trip`]): a CNP within one round trip of the last cut is stale (its
//! packet left before the cut took effect) and is not acted on, and the alpha and increase
//! periods stretch to at least one round trip.

use serde::{Deserialize, Serialize};

/// Nanoseconds on the engine's clock.
pub type Nanos = u64;

/// Parameters, in bytes per second and nanoseconds. DCQCN's published values (g = 1/256,
/// 55 µs timers, 5 fast-recovery stages, 40 Mb/s additive increase) are for 40–100 Gb/s NICs
/// whose packet time is tens of nanoseconds; [`DcqcnParams::for_line_rate`] keeps the stage
/// structure and scales the timers to the packet time of the line rate, so a software-paced
/// sender at a few hundred packets per second reacts within the same number of packets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DcqcnParams {
    pub line_rate: f64,
    pub min_rate: f64,
    /// Weight of a new CNP in alpha.
    pub g: f64,
    pub alpha_period_ns: Nanos,
    pub increase_period_ns: Nanos,
    pub fast_recovery_stages: u32,
    /// Bytes/s added to the target per additive-increase stage.
    pub additive_increase: f64,
    /// Bytes/s added per hyper-increase stage (times the stage number).
    pub hyper_increase: f64,
}

impl DcqcnParams {
    /// Defaults for a sender of `line_rate` bytes/s sending `packet` bytes per packet: g = 1/16,
    /// alpha and increase periods of 4 packet times (at least 1 ms), 5 fast-recovery stages,
    /// additive increase of 1/20 and hyper increase of 1/10 of the line rate, minimum 1/64.
    pub fn for_line_rate(line_rate: f64, packet: usize) -> DcqcnParams {
        let pkt_ns = (packet as f64 / line_rate.max(1.0) * 1e9) as Nanos;
        let period = (4 * pkt_ns).max(1_000_000);
        DcqcnParams {
            line_rate,
            min_rate: line_rate / 64.0,
            g: 1.0 / 16.0,
            alpha_period_ns: period,
            increase_period_ns: period,
            fast_recovery_stages: 5,
            additive_increase: line_rate / 20.0,
            hyper_increase: line_rate / 10.0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Dcqcn {
    p: DcqcnParams,
    current: f64,
    target: f64,
    alpha: f64,
    last_alpha: Nanos,
    last_increase: Nanos,
    cnp_since_alpha: bool,
    stage: u32,
    last_cut: Option<Nanos>,
    rtt: Nanos,
    pub cuts: u64,
    /// CNPs that arrived within a round trip of the last cut.
    pub stale_cnps: u64,
}

impl Dcqcn {
    /// Starts at line rate, as DCQCN does.
    pub fn new(p: DcqcnParams, now: Nanos) -> Dcqcn {
        Dcqcn {
            p,
            current: p.line_rate,
            target: p.line_rate,
            alpha: 1.0,
            last_alpha: now,
            last_increase: now,
            cnp_since_alpha: false,
            stage: 0,
            last_cut: None,
            rtt: 0,
            cuts: 0,
            stale_cnps: 0,
        }
    }

    /// The sender's smoothed round trip.
    pub fn set_round_trip(&mut self, rtt: Nanos) {
        self.rtt = rtt;
    }

    pub fn rate(&self) -> f64 {
        self.current
    }
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    pub fn on_cnp(&mut self, now: Nanos) {
        self.advance(now);
        if self
            .last_cut
            .is_some_and(|t| now.saturating_sub(t) < self.rtt)
        {
            self.stale_cnps += 1;
            self.cnp_since_alpha = true;
            return;
        }
        self.last_cut = Some(now);
        self.target = self.current;
        self.current = (self.current * (1.0 - self.alpha / 2.0)).max(self.p.min_rate);
        self.alpha = (1.0 - self.p.g) * self.alpha + self.p.g;
        self.cnp_since_alpha = true;
        self.stage = 0;
        self.last_increase = now;
        self.cuts += 1;
    }

    /// Runs the timers up to `now`.
    pub fn advance(&mut self, now: Nanos) {
        let ap = self.p.alpha_period_ns.max(self.rtt).max(1);
        while now.saturating_sub(self.last_alpha) >= ap {
            self.last_alpha += ap;
            if !self.cnp_since_alpha {
                self.alpha *= 1.0 - self.p.g;
            }
            self.cnp_since_alpha = false;
        }
        let ip = self.p.increase_period_ns.max(self.rtt).max(1);
        while now.saturating_sub(self.last_increase) >= ip {
            self.last_increase += ip;
            self.stage += 1;
            let f = self.p.fast_recovery_stages;
            if self.stage > 2 * f {
                self.target += self.p.hyper_increase * f64::from(self.stage - 2 * f);
            } else if self.stage > f {
                self.target += self.p.additive_increase;
            }
            self.target = self.target.min(self.p.line_rate);
            self.current = ((self.target + self.current) / 2.0).min(self.p.line_rate);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> DcqcnParams {
        DcqcnParams {
            line_rate: 1000.0,
            min_rate: 10.0,
            g: 0.5,
            alpha_period_ns: 100,
            increase_period_ns: 100,
            fast_recovery_stages: 2,
            additive_increase: 100.0,
            hyper_increase: 50.0,
        }
    }

    #[test]
    fn a_cnp_cuts_by_half_alpha_and_alpha_grows_with_every_cut() {
        let mut d = Dcqcn::new(params(), 0);
        d.on_cnp(10);
        // alpha starts at 1: the first cut halves.
        assert_eq!(d.rate(), 500.0);
        assert_eq!(d.alpha(), 1.0);
        d.on_cnp(20);
        assert_eq!(d.rate(), 250.0);
        // Many cuts never go below the minimum.
        for t in 0..50 {
            d.on_cnp(30 + t);
        }
        assert_eq!(d.rate(), 10.0);
    }

    #[test]
    fn without_cnps_alpha_decays_and_the_rate_recovers_fast_then_additively_then_hyper() {
        let mut d = Dcqcn::new(params(), 0);
        d.on_cnp(0); // current 500, target 1000
        d.on_cnp(0); // current 250, target 500
        d.advance(100);
        // Fast recovery 1: halfway to the target; alpha: the period had a CNP, so no decay.
        assert_eq!(d.rate(), 375.0);
        assert_eq!(d.alpha(), 1.0);
        d.advance(200);
        assert_eq!(d.rate(), 437.5);
        assert_eq!(d.alpha(), 0.5);
        // Additive stages 3 and 4: target 600 then 700.
        d.advance(300);
        assert_eq!(d.rate(), (600.0 + 437.5) / 2.0);
        d.advance(400);
        assert_eq!(d.rate(), (700.0 + (600.0 + 437.5) / 2.0) / 2.0);
        // Hyper stage 5 (+50·1) and 6 (+50·2), then capped at line rate.
        d.advance(500);
        let r5 = (750.0 + d_prev(700.0, 600.0, 437.5)) / 2.0;
        assert_eq!(d.rate(), r5);
        d.advance(10_000);
        assert_eq!(d.rate(), 1000.0);
        assert!(d.alpha() < 1e-20);
    }

    fn d_prev(t4: f64, t3: f64, r2: f64) -> f64 {
        (t4 + (t3 + r2) / 2.0) / 2.0
    }

    #[test]
    fn a_cnp_restarts_recovery_from_the_first_stage() {
        let mut d = Dcqcn::new(params(), 0);
        d.on_cnp(0);
        d.advance(350); // three stages in
        let before = d.rate();
        d.on_cnp(360);
        let cut = d.rate();
        assert!(cut < before);
        // 99 ns later nothing has happened; at 100 ns the first fast-recovery step.
        d.advance(459);
        assert_eq!(d.rate(), cut);
        d.advance(460);
        assert_eq!(d.rate(), (before + cut) / 2.0);
    }

    #[test]
    fn within_a_round_trip_of_a_cut_further_cnps_are_stale_and_periods_stretch_to_it() {
        let mut d = Dcqcn::new(params(), 0);
        d.set_round_trip(300);
        d.on_cnp(0);
        d.on_cnp(100);
        d.on_cnp(299);
        assert_eq!((d.cuts, d.stale_cnps), (1, 2));
        assert_eq!(d.rate(), 500.0);
        // Recovery waits a round trip (300), not the 100 ns period.
        d.advance(299);
        assert_eq!(d.rate(), 500.0);
        d.advance(300);
        assert_eq!(d.rate(), 750.0);
        d.on_cnp(301);
        assert_eq!(d.cuts, 2);
    }

    #[test]
    fn default_parameters_scale_the_timers_to_the_packet_time() {
        // 300 packets/s of 4 KiB: 3.3 ms per packet, periods of 4 packets.
        let p = DcqcnParams::for_line_rate(300.0 * 4096.0, 4096);
        assert!((13_000_000..=13_400_000).contains(&p.alpha_period_ns));
        // 100 Gb/s: periods floor at 1 ms.
        let p = DcqcnParams::for_line_rate(12.5e9, 4096);
        assert_eq!(p.increase_period_ns, 1_000_000);
    }
}
