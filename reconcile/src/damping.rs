//! Link flap dampening (as BGP route-flap damping, RFC 2439, and SONiC's link event damping)
//! and hold-down, as a pure state machine over explicit time, so it is tested without waiting.
//!
//! ```text
//!   each down event:   penalty += P                      (after decaying to now)
//!   decay:             penalty × 0.5^(Δt / half_life)
//!   penalty > suppress  → suppressed: the link counts as down whatever it does
//!   penalty < reuse     → reusable (or after max_suppress)
//!   an up link is used only after it stayed up for hold_down
//! ```
//! The effective state changes at most once per down event and once per deadline, so a flapping
//! link cannot make the controller write without limit: once suppressed, flaps cost nothing.

use std::time::Duration;

use weft_topology::Dampening;

/// Time since an arbitrary start, in nanoseconds.
pub type Nanos = u64;

#[derive(Debug, Clone)]
pub struct LinkDamper {
    pub penalty: f64,
    last: Nanos,
    pub suppressed_since: Option<Nanos>,
    /// The link's real state.
    pub up: bool,
    /// When it last came up (for hold-down).
    up_since: Nanos,
    pub flaps: u64,
}

impl LinkDamper {
    pub fn new(up: bool) -> Self {
        LinkDamper {
            penalty: 0.0,
            last: 0,
            suppressed_since: None,
            up,
            up_since: 0,
            flaps: 0,
        }
    }

    fn decay(&mut self, cfg: &Dampening, now: Nanos) {
        if self.penalty != 0.0 {
            // Most links never flap: no power to take (0 decays to 0 exactly).
            let dt = now.saturating_sub(self.last) as f64;
            let hl = cfg.half_life.as_nanos().max(1) as f64;
            self.penalty *= 0.5f64.powf(dt / hl);
        }
        self.last = now;
        if let Some(since) = self.suppressed_since
            && (self.penalty < f64::from(cfg.reuse)
                || now.saturating_sub(since) >= cfg.max_suppress.as_nanos())
        {
            self.suppressed_since = None;
            // Cap what is left so a link freed by max_suppress is not suppressed again at once.
            self.penalty = self.penalty.min(f64::from(cfg.reuse));
        }
    }

    /// The link went down or up at `now`.
    pub fn event(&mut self, cfg: &Dampening, now: Nanos, up: bool) {
        self.decay(cfg, now);
        if up == self.up {
            return;
        }
        self.up = up;
        if up {
            self.up_since = now;
        } else if cfg.enabled {
            self.flaps += 1;
            self.penalty += f64::from(cfg.penalty);
            if self.penalty > f64::from(cfg.suppress) && self.suppressed_since.is_none() {
                self.suppressed_since = Some(now);
            }
        }
    }

    pub fn suppressed(&mut self, cfg: &Dampening, now: Nanos) -> bool {
        self.decay(cfg, now);
        self.suppressed_since.is_some()
    }

    /// Whether traffic may use the link at `now`.
    pub fn usable(&mut self, cfg: &Dampening, hold_down: Duration, now: Nanos) -> bool {
        if self.suppressed(cfg, now) || !self.up {
            return false;
        }
        // A link that was never down needs no hold-down.
        self.flaps == 0 || now.saturating_sub(self.up_since) >= hold_down.as_nanos() as u64
    }

    /// When `usable` may next change without an event (hold-down ends or the penalty decays
    /// under reuse), if ever.
    pub fn next_deadline(&self, cfg: &Dampening, hold_down: Duration) -> Option<Nanos> {
        let mut d: Option<Nanos> = None;
        if self.up && self.flaps > 0 {
            let t = self.up_since + hold_down.as_nanos() as u64;
            if t > self.last {
                d = Some(t);
            }
        }
        if let Some(since) = self.suppressed_since {
            let hl = cfg.half_life.as_nanos().max(1) as f64;
            let reuse = f64::from(cfg.reuse).max(1.0);
            let wait = if self.penalty > reuse {
                (self.penalty / reuse).log2() * hl
            } else {
                0.0
            };
            let t = (self.last + wait.ceil() as u64 + 1).min(since + cfg.max_suppress.as_nanos());
            d = Some(d.map_or(t, |x| x.min(t)));
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_topology::units::Duration as D;

    fn cfg() -> Dampening {
        Dampening {
            enabled: true,
            penalty: 1000,
            suppress: 2000,
            reuse: 750,
            half_life: D::millis(1000),
            max_suppress: D::millis(20_000),
        }
    }
    const MS: u64 = 1_000_000;
    const HOLD: Duration = Duration::from_millis(500);

    #[test]
    fn a_single_flap_is_not_suppressed_and_returns_after_hold_down() {
        let c = cfg();
        let mut l = LinkDamper::new(true);
        assert!(l.usable(&c, HOLD, 0));
        l.event(&c, 10 * MS, false);
        assert!(!l.usable(&c, HOLD, 11 * MS));
        l.event(&c, 20 * MS, true);
        assert!(!l.usable(&c, HOLD, 100 * MS), "inside hold-down");
        assert_eq!(l.next_deadline(&c, HOLD), Some(520 * MS));
        assert!(l.usable(&c, HOLD, 521 * MS));
        assert!(!l.suppressed(&c, 521 * MS));
    }

    #[test]
    fn rapid_flaps_suppress_the_link_until_the_penalty_decays_under_reuse() {
        let c = cfg();
        let mut l = LinkDamper::new(true);
        for i in 0..3 {
            l.event(&c, (i * 100) * MS, false);
            l.event(&c, (i * 100 + 50) * MS, true);
        }
        assert!(l.suppressed(&c, 300 * MS), "penalty {}", l.penalty);
        // Up, stable, but suppressed: not usable until penalty < 750: about log2(2700/750) ≈ 1.85
        // half-lives after the last flap.
        assert!(!l.usable(&c, HOLD, 1500 * MS));
        let t = l.next_deadline(&c, HOLD).expect("deadline");
        assert!(
            (1900 * MS..2300 * MS).contains(&t),
            "reuse at {} ms",
            t / MS
        );
        assert!(l.usable(&c, HOLD, t + MS));
    }

    #[test]
    fn a_flap_storm_changes_the_effective_state_a_bounded_number_of_times() {
        let c = cfg();
        let mut l = LinkDamper::new(true);
        let mut changes = 0;
        let mut was = true;
        // 100 flaps in 10 s.
        for i in 0..100u64 {
            for (dt, up) in [(0, false), (50, true)] {
                let now = (i * 100 + dt) * MS;
                l.event(&c, now, up);
                let u = l.usable(&c, HOLD, now);
                if u != was {
                    changes += 1;
                    was = u;
                }
            }
        }
        assert!(changes <= 2, "{changes} effective changes");
        assert!(l.suppressed(&c, 10_000 * MS));
    }

    #[test]
    fn max_suppress_frees_the_link_even_with_a_high_penalty() {
        let c = Dampening {
            max_suppress: D::millis(3000),
            ..cfg()
        };
        let mut l = LinkDamper::new(true);
        for i in 0..20 {
            l.event(&c, i * 10 * MS, false);
            l.event(&c, (i * 10 + 5) * MS, true);
        }
        assert!(l.suppressed(&c, 300 * MS));
        assert!(!l.suppressed(&c, 3300 * MS));
    }
}
