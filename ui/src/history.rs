//! The last minutes of every link's and switch's rates, for the drill-down charts: at most
//! [`POINTS`] points over the history span, each the exact average between two reads a bucket
//! apart (not a sample of one interval). Values are kept as 16-bit logarithms (0.05% steps up
//! to 2·10¹³/s), so k=32 (24,576 links and host links) holds 150 points in about 30 MB.

use std::collections::VecDeque;

/// Points per series.
pub const POINTS: usize = 150;
/// Values per link point: a→b bits/s, b→a bits/s, ECN marks/s, PAUSE frames/s.
pub const LINK_VALUES: usize = 4;
/// Values per switch point: rx bits/s, tx bits/s, ECN marks/s, PAUSE received/s, drops/s.
pub const SWITCH_VALUES: usize = 5;

const UNKNOWN: u16 = u16::MAX;
/// Steps per doubling: 2^(65534/1480) ≈ 2·10¹³, above an 800G link's bits/s.
const SCALE: f64 = 1480.0;

/// A rate as a 16-bit logarithm (`UNKNOWN` for none).
pub fn encode(v: Option<f64>) -> u16 {
    match v {
        Some(v) if v.is_finite() && v >= 0.0 => ((v + 1.0).log2() * SCALE)
            .round()
            .min(f64::from(UNKNOWN - 1)) as u16,
        _ => UNKNOWN,
    }
}

pub fn decode(q: u16) -> Option<f64> {
    (q != UNKNOWN).then(|| (f64::from(q) / SCALE).exp2() - 1.0)
}

/// Points in time, each a row of values per link and per switch.
#[derive(Debug, Default)]
pub struct History {
    pub times: VecDeque<u64>,
    links: VecDeque<Box<[u16]>>,
    switches: VecDeque<Box<[u16]>>,
}

/// One series of a link or switch: times (Unix ms) and each value's points.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Series {
    pub t: Vec<u64>,
    pub values: Vec<Vec<Option<f64>>>,
}

impl History {
    /// Adds a point at `t_ms` (rows of `LINK_VALUES` per link and `SWITCH_VALUES` per switch),
    /// dropping the oldest beyond [`POINTS`].
    pub fn push(&mut self, t_ms: u64, links: Box<[u16]>, switches: Box<[u16]>) {
        self.times.push_back(t_ms);
        self.links.push_back(links);
        self.switches.push_back(switches);
        while self.times.len() > POINTS {
            self.times.pop_front();
            self.links.pop_front();
            self.switches.pop_front();
        }
    }

    fn series(rows: &VecDeque<Box<[u16]>>, times: &VecDeque<u64>, i: usize, w: usize) -> Series {
        Series {
            t: times.iter().copied().collect(),
            values: (0..w)
                .map(|v| {
                    rows.iter()
                        .map(|r| r.get(i * w + v).copied().and_then(decode))
                        .collect()
                })
                .collect(),
        }
    }

    pub fn link(&self, i: usize) -> Series {
        Self::series(&self.links, &self.times, i, LINK_VALUES)
    }

    pub fn switch(&self, i: usize) -> Series {
        Self::series(&self.switches, &self.times, i, SWITCH_VALUES)
    }

    /// Bytes the points hold.
    pub fn bytes(&self) -> usize {
        self.links.iter().map(|r| r.len() * 2).sum::<usize>()
            + self.switches.iter().map(|r| r.len() * 2).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_survive_the_16_bit_logarithm_within_a_tenth_of_a_percent_and_unknown_stays_unknown() {
        for v in [0.0, 1.0, 3.5, 1234.0, 8.0e8, 1.6e12] {
            let back = decode(encode(Some(v))).expect("known");
            assert!((back - v).abs() <= v * 1e-3 + 1e-3, "{v} came back {back}");
        }
        assert_eq!(decode(encode(None)), None);
        assert_eq!(decode(encode(Some(f64::NAN))), None);
    }

    #[test]
    fn the_history_keeps_the_last_points_only() {
        let mut h = History::default();
        for t in 0..(POINTS as u64 + 10) {
            h.push(
                t,
                vec![encode(Some(t as f64)); LINK_VALUES].into(),
                vec![UNKNOWN; SWITCH_VALUES].into(),
            );
        }
        let s = h.link(0);
        assert_eq!(s.t.len(), POINTS);
        assert_eq!(s.t[0], 10);
        assert!((s.values[0][0].expect("known") - 10.0).abs() < 0.01);
        assert_eq!(h.switch(0).values[0][0], None);
    }
}
