//! Run-time ECN tuning for one (port, queue): a small, deterministic control law that moves Kmin,
//! Kmax and Pmax inside the envelope the controller computed (ECN before PFC, within the port's
//! buffer share), from what the switch measured over the last interval.
//!
//! ```text
//!   every interval, with the measured sample:
//!   1. PFC onset    pause frames sent this interval      → at once: K × 1/2, Pmax × 2   ("pfc")
//!   2. queue high   p99 depth ≥ 0.8 Kmax, link busy       → after HOLD intervals: K × 0.8 ("queue-high")
//!                   (u ≥ 0.9)
//!   3. starved      marks ≥ 5% while the link idles       → after HOLD intervals: K + 10% of the
//!                   (u < 0.8) and no deep queue             envelope's span, Pmax × 0.8 ("underutilized")
//!   4. otherwise    hold; a condition must persist HOLD intervals in a row to act, and after a
//!                   move the tuner waits COOLDOWN intervals: no oscillation on noise
//!   always: Kmin_min ≤ Kmin < Kmax ≤ Kmax_max, Pmax in its bounds
//! ```
//! Moving down is multiplicative and fast (queues and PFC hurt everyone on the path); moving up
//! is additive and slow (throughput recovers without overshoot): AIMD on the thresholds.

use serde::{Deserialize, Serialize};

/// The bounds from the controller (CONFIG_DB `WEFT_ECN_ENVELOPE|<port>|<queue>`), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub kmin_min: u64,
    pub kmin_max: u64,
    pub kmax_min: u64,
    pub kmax_max: u64,
    pub pmax_min: f64,
    pub pmax_max: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    pub kmin: u64,
    pub kmax: u64,
    pub pmax: f64,
}

/// What the switch measured over one interval for one (port, queue).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Mean and 99th-percentile queue depth, bytes.
    pub depth_mean: u64,
    pub depth_p99: u64,
    /// Departure rate over line rate, 0..1.
    pub utilization: f64,
    /// Packets marked CE over packets sent.
    pub marked_fraction: f64,
    /// PFC pause frames this port sent (its queue crossed xoff) and received.
    pub pfc_sent: u64,
    pub pfc_received: u64,
    pub drops: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    Pfc,
    QueueHigh,
    Underutilized,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Pfc => "pfc",
            Reason::QueueHigh => "queue-high",
            Reason::Underutilized => "underutilized",
        }
    }
}

/// Tunables of the law itself (defaults documented above).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub hold: u32,
    pub cooldown: u32,
    pub high_water: f64,
    pub busy: f64,
    pub idle: f64,
    pub starved_marks: f64,
    pub decrease: f64,
    pub increase_span: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            hold: 3,
            cooldown: 2,
            high_water: 0.8,
            busy: 0.9,
            idle: 0.8,
            starved_marks: 0.05,
            decrease: 0.8,
            increase_span: 0.1,
        }
    }
}

/// The tuner of one (port, queue).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuner {
    pub current: Thresholds,
    pub envelope: Envelope,
    pub params: Params,
    streak: (Option<Reason>, u32),
    cooldown: u32,
}

/// One change, for the record (STATE_DB and a tracing event).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub from: Thresholds,
    pub to: Thresholds,
    pub reason: Reason,
}

impl Tuner {
    /// Starts from the controller's static values, clamped into the envelope.
    pub fn new(start: Thresholds, envelope: Envelope, params: Params) -> Self {
        let mut t = Tuner {
            current: start,
            envelope,
            params,
            streak: (None, 0),
            cooldown: 0,
        };
        t.current = t.clamp(start);
        t
    }

    fn clamp(&self, mut x: Thresholds) -> Thresholds {
        let e = &self.envelope;
        x.kmax = x.kmax.clamp(e.kmax_min, e.kmax_max.max(e.kmax_min));
        x.kmin = x
            .kmin
            .clamp(e.kmin_min, e.kmin_max.max(e.kmin_min))
            .min(x.kmax.saturating_sub(1));
        x.pmax = x.pmax.clamp(e.pmax_min, e.pmax_max.max(e.pmax_min));
        x
    }

    fn condition(&self, s: &Sample) -> Option<Reason> {
        let p = &self.params;
        if s.pfc_sent > 0 {
            Some(Reason::Pfc)
        } else if s.depth_p99 as f64 >= p.high_water * self.current.kmax as f64
            && s.utilization >= p.busy
        {
            Some(Reason::QueueHigh)
        } else if s.utilization < p.idle
            && s.marked_fraction >= p.starved_marks
            && (s.depth_p99 as f64) < p.high_water * self.current.kmax as f64
        {
            Some(Reason::Underutilized)
        } else {
            None
        }
    }

    /// Feeds one interval's sample; returns the change made, if any.
    pub fn step(&mut self, s: &Sample) -> Option<Change> {
        let cond = self.condition(s);
        self.streak = match (cond, self.streak) {
            (Some(c), (Some(p), n)) if c == p => (Some(c), n + 1),
            (Some(c), _) => (Some(c), 1),
            (None, _) => (None, 0),
        };
        let reason = cond?;
        // PFC is the emergency: no hold, no cooldown.
        if reason != Reason::Pfc {
            if self.cooldown > 0 {
                self.cooldown -= 1;
                return None;
            }
            if self.streak.1 < self.params.hold {
                return None;
            }
        }
        let c = self.current;
        let e = self.envelope;
        let to = match reason {
            Reason::Pfc => Thresholds {
                kmin: c.kmin / 2,
                kmax: c.kmax / 2,
                pmax: c.pmax * 2.0,
            },
            Reason::QueueHigh => {
                let d = self.params.decrease;
                Thresholds {
                    kmin: (c.kmin as f64 * d) as u64,
                    kmax: (c.kmax as f64 * d) as u64,
                    pmax: c.pmax,
                }
            }
            Reason::Underutilized => {
                let span = |lo: u64, hi: u64| {
                    ((hi.saturating_sub(lo)) as f64 * self.params.increase_span).max(1.0) as u64
                };
                Thresholds {
                    kmin: c.kmin + span(e.kmin_min, e.kmin_max),
                    kmax: c.kmax + span(e.kmax_min, e.kmax_max),
                    pmax: c.pmax * 0.8,
                }
            }
        };
        let to = self.clamp(to);
        self.cooldown = self.params.cooldown;
        self.streak = (None, 0);
        if to == c {
            return None;
        }
        self.current = to;
        Some(Change {
            from: c,
            to,
            reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Envelope {
        // 100G defaults: static 400KB / 1.6MB / 0.2; bounds ¼× .. 2× (pause threshold caps Kmax).
        Envelope {
            kmin_min: 100_000,
            kmin_max: 800_000,
            kmax_min: 400_000,
            kmax_max: 2_300_000,
            pmax_min: 0.01,
            pmax_max: 1.0,
        }
    }
    fn start() -> Thresholds {
        Thresholds {
            kmin: 400_000,
            kmax: 1_600_000,
            pmax: 0.2,
        }
    }
    fn in_envelope(t: &Tuner) -> bool {
        let (c, e) = (t.current, t.envelope);
        (e.kmin_min..=e.kmin_max).contains(&c.kmin)
            && (e.kmax_min..=e.kmax_max).contains(&c.kmax)
            && c.kmin < c.kmax
            && (e.pmax_min..=e.pmax_max).contains(&c.pmax)
    }
    /// Direction reversals of Kmax over a run: the oscillation measure.
    fn reversals(ks: &[u64]) -> usize {
        let dirs: Vec<i8> = ks
            .windows(2)
            .filter(|w| w[0] != w[1])
            .map(|w| if w[1] > w[0] { 1 } else { -1 })
            .collect();
        dirs.windows(2).filter(|w| w[0] != w[1]).count()
    }

    #[test]
    fn steady_load_with_a_short_queue_changes_nothing() {
        let mut t = Tuner::new(start(), env(), Params::default());
        let s = Sample {
            depth_mean: 50_000,
            depth_p99: 200_000,
            utilization: 0.95,
            marked_fraction: 0.01,
            ..Sample::default()
        };
        for _ in 0..200 {
            assert_eq!(t.step(&s), None);
        }
        assert_eq!(t.current, start());
    }

    #[test]
    fn incast_lowers_thresholds_after_the_hold_and_stays_in_the_envelope() {
        let mut t = Tuner::new(start(), env(), Params::default());
        let s = Sample {
            depth_mean: 1_400_000,
            depth_p99: 1_900_000,
            utilization: 1.0,
            marked_fraction: 0.3,
            ..Sample::default()
        };
        assert_eq!(t.step(&s), None);
        assert_eq!(t.step(&s), None);
        let c = t.step(&s).expect("third high interval acts");
        assert_eq!(c.reason, Reason::QueueHigh);
        assert!(c.to.kmax < c.from.kmax && c.to.kmin < c.from.kmin);
        for _ in 0..100 {
            t.step(&s);
            assert!(in_envelope(&t));
        }
        assert_eq!(
            t.current.kmax,
            env().kmax_min,
            "sustained incast drives Kmax to its floor"
        );
    }

    #[test]
    fn pfc_onset_lowers_thresholds_within_one_interval() {
        let mut t = Tuner::new(start(), env(), Params::default());
        let calm = Sample {
            depth_p99: 100_000,
            utilization: 0.9,
            ..Sample::default()
        };
        t.step(&calm);
        let c = t
            .step(&Sample {
                pfc_sent: 3,
                depth_p99: 2_000_000,
                utilization: 1.0,
                ..Sample::default()
            })
            .expect("acts at once");
        assert_eq!(c.reason, Reason::Pfc);
        assert_eq!((c.to.kmin, c.to.kmax), (200_000, 800_000));
        assert!((c.to.pmax - 0.4).abs() < 1e-9);
    }

    #[test]
    fn mice_and_elephants_settle_without_oscillating() {
        // Elephants keep the link busy with a moderate queue; mice bursts push p99 up every
        // few intervals, then a quiet spell marks while the link idles.
        let mut t = Tuner::new(start(), env(), Params::default());
        let mut ks = vec![t.current.kmax];
        for i in 0..300u64 {
            let burst = i % 7 == 0;
            let quiet = (i / 50) % 2 == 1 && i % 5 == 0;
            let s = Sample {
                depth_mean: if burst { 900_000 } else { 300_000 },
                depth_p99: if burst { 1_500_000 } else { 600_000 },
                utilization: if quiet { 0.6 } else { 0.97 },
                marked_fraction: if quiet { 0.08 } else { 0.04 },
                ..Sample::default()
            };
            t.step(&s);
            assert!(in_envelope(&t));
            ks.push(t.current.kmax);
        }
        assert!(
            reversals(&ks) <= 2,
            "Kmax reversed direction {} times: {:?}",
            reversals(&ks),
            ks
        );
    }

    #[test]
    fn an_idle_link_that_marks_raises_thresholds_slowly_up_to_the_ceiling() {
        let mut t = Tuner::new(
            Thresholds {
                kmin: 100_000,
                kmax: 400_000,
                pmax: 0.5,
            },
            env(),
            Params::default(),
        );
        let s = Sample {
            depth_mean: 80_000,
            depth_p99: 150_000,
            utilization: 0.5,
            marked_fraction: 0.2,
            ..Sample::default()
        };
        let mut changes = 0;
        for _ in 0..400 {
            if let Some(c) = t.step(&s) {
                assert_eq!(c.reason, Reason::Underutilized);
                assert!(
                    c.to.kmax >= c.from.kmax
                        && c.to.kmin >= c.from.kmin
                        && c.to.pmax <= c.from.pmax
                );
                changes += 1;
            }
            assert!(in_envelope(&t));
        }
        assert!(
            changes >= 5 && t.current.kmax == env().kmax_max,
            "{changes} changes, kmax {}",
            t.current.kmax
        );
    }

    #[test]
    fn noise_around_the_boundary_does_not_move_thresholds() {
        let mut t = Tuner::new(start(), env(), Params::default());
        for i in 0..500 {
            // High and calm intervals alternate: never three high in a row.
            let high = i % 3 != 0;
            let s = Sample {
                depth_p99: if high { 1_400_000 } else { 100_000 },
                utilization: 0.95,
                ..Sample::default()
            };
            assert_eq!(t.step(&s), None, "interval {i}");
        }
    }
}
