//! Weft's one retry policy: exponential backoff with jitter.
//!
//! Every retry loop of Weft — a P4Runtime stream reconnecting, the plugin's sessions, `weft run`'s
//! switch watchers, the etcd election, and the reconciler's pure core — waits by this policy, so a
//! fabric of thousands of switches that lost one Redis or one etcd at once does not come back in
//! lock step (the reason for the jitter), and each loop's bounds are read in one place.
//!
//! ```text
//!   attempt n (from 0):  base(n)  = min(min × factorⁿ, max)
//!                        delay(n) = base(n) × (1 + u),   u uniform in [0, 1)
//! ```
//!
//! Code that does its own I/O takes the delays from [`RetryPolicy::backoff`], a `backon`
//! backoff (`u` from `backon`'s generator); a pure core on explicit time asks
//! [`RetryPolicy::delay`] with its own `u` (e.g. [`unit_from`] a seed), so its golden steps
//! stay reproducible. Both give the same delays for the same `u`.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

pub use backon::ExponentialBackoff;

/// Exponential backoff with jitter. `factor` is ≥ 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    pub min: Duration,
    pub max: Duration,
    pub factor: f32,
}

impl RetryPolicy {
    /// Doubling from `min` up to `max`.
    pub const fn doubling(min: Duration, max: Duration) -> Self {
        RetryPolicy {
            min,
            max,
            factor: 2.0,
        }
    }

    /// An endless, jittered backoff for a loop that does its own I/O: take `next()` before each
    /// wait, build a new one after a success.
    pub fn backoff(&self) -> ExponentialBackoff {
        ExponentialBuilder::default()
            .with_min_delay(self.min)
            .with_max_delay(self.max)
            .with_factor(self.factor)
            .with_jitter()
            .without_max_times()
            .build()
    }

    /// The un-jittered base of attempt `n` (0 = the first retry).
    pub fn base(&self, n: u32) -> Duration {
        let mut d = self.min;
        for _ in 0..n {
            if d >= self.max {
                break;
            }
            d = d.mul_f64(f64::from(self.factor.max(1.0)));
        }
        d.min(self.max)
    }

    /// The delay of attempt `n` with jitter `u` in [0, 1): what [`RetryPolicy::backoff`] gives
    /// for the same `u`.
    pub fn delay(&self, n: u32, u: f32) -> Duration {
        let base = self.base(n);
        base.saturating_add(base.mul_f64(f64::from(u.clamp(0.0, 1.0 - f32::EPSILON))))
    }
}

/// A jitter value in [0, 1) derived from a seed (e.g. a switch index and an attempt), for pure
/// code that must be reproducible: the same seed, the same wait.
pub fn unit_from(seed: u64) -> f32 {
    // splitmix64: cheap, and every bit of the seed moves the result.
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 24) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: RetryPolicy =
        RetryPolicy::doubling(Duration::from_millis(100), Duration::from_millis(1_000));

    #[test]
    fn the_base_doubles_from_min_and_stops_at_max() {
        let b: Vec<u128> = (0..6).map(|n| P.base(n).as_millis()).collect();
        assert_eq!(b, vec![100, 200, 400, 800, 1000, 1000]);
    }

    #[test]
    fn jitter_stretches_a_delay_by_less_than_its_base() {
        assert_eq!(P.delay(2, 0.0), Duration::from_millis(400));
        assert_eq!(P.delay(2, 0.5), Duration::from_millis(600));
        assert!(P.delay(2, 1.0) < Duration::from_millis(800));
    }

    #[test]
    fn the_io_backoff_stays_inside_the_policy_envelope_and_is_jittered() {
        let delays: Vec<Duration> = P.backoff().take(40).collect();
        for (n, d) in delays.iter().enumerate() {
            let base = P.base(n as u32);
            assert!(
                *d >= base && *d < base * 2,
                "attempt {n}: {d:?} outside [{base:?}, 2×)"
            );
        }
        let distinct: std::collections::BTreeSet<Duration> = delays[5..].iter().copied().collect();
        assert!(
            distinct.len() > 1,
            "delays at max must still differ: {distinct:?}"
        );
    }

    #[test]
    fn unit_from_is_in_range_reproducible_and_spread() {
        let us: Vec<f32> = (0..1000).map(unit_from).collect();
        assert!(us.iter().all(|u| (0.0..1.0).contains(u)));
        assert_eq!(unit_from(7), unit_from(7));
        let below_half = us.iter().filter(|u| **u < 0.5).count();
        assert!(
            (400..600).contains(&below_half),
            "{below_half} of 1000 below 0.5"
        );
    }
}
