//! How much every port's counters moved over a window, computed once per window: a rule then
//! looks a port up instead of walking the samples (5,120 switches, 327,680 ports).
//!
//! A counter's move is its increase over the samples that hold it, sample to sample: one that
//! went backwards was reset (the switch restarted) and counts from zero there, so a restart in
//! the middle of a window loses only what was counted between the last sample before it and
//! the restart, not everything before it. A port is moved only when the window's first and
//! last samples both hold it; a sample in between that lacks it is skipped.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::{PRIORITIES, PortSample, QueueSample, SwitchSample, Window, sub};

/// One port's moves: its counters (as a [`PortSample`] of increases) and its queues'.
#[derive(Debug, Default)]
pub(crate) struct PortDelta {
    pub d: PortSample,
    /// Per queue: CE marks, departures and packets trimmed.
    pub marks: [u64; PRIORITIES],
    pub departures: [u64; PRIORITIES],
    pub trimmed: [u64; PRIORITIES],
    /// RoCE PSN anomalies (out of order, regressions) from the first sample to the last, when
    /// both published them (`None`: unknown, not zero).
    pub psn: (Option<u64>, Option<u64>),
    /// Where [`Table::at`] holds the port in each of the window's samples (`None`: a port
    /// known only by its queues).
    pub at: Option<usize>,
    /// Of the depth histogram's increase: (packets that found at least the deep-queue
    /// threshold queued, packets it counted); (0, 0) where no histogram was published alike
    /// in every sample.
    pub deep: (u64, u64),
}

/// FNV-1a: the rules look ports up by short names (`leaf-1-2`, `Ethernet12`) some ten million
/// times a window at 5,120 switches, where SipHash's setup cost more than the lookups.
#[derive(Default)]
pub(crate) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

pub(crate) type Fast = BuildHasherDefault<Fnv>;
pub(crate) type FastMap<K, V> = HashMap<K, V, Fast>;

/// What the cable rules read of a port in one sample: its packet counters and its switch's
/// poll time, copied out of the sample while the deltas walk it anyway. A cable's end is then
/// one short run of the arena, not pointers into every sample's maps (at k=64 the cable rules
/// spent most of their time waiting on those reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cell {
    pub tx: u64,
    pub rx: u64,
    /// The switch's poll time (`None`: not published).
    pub poll: Option<u64>,
}

/// One switch's moved ports: their deltas in one vector of exactly their number, and a small
/// index by name. A map holding the deltas themselves kept twice as many slots as ports (61 KB
/// a switch of 64 ports, 314 MB a window at k=64), all of it allocated and freed every window.
#[derive(Debug, Default)]
pub(crate) struct SwitchDeltas<'a> {
    /// In the last sample's port order, then ports known only by their queues.
    names: Vec<&'a str>,
    deltas: Vec<PortDelta>,
    index: FastMap<&'a str, u32>,
}

impl<'a> SwitchDeltas<'a> {
    fn with_capacity(n: usize) -> Self {
        SwitchDeltas {
            names: Vec::with_capacity(n),
            deltas: Vec::with_capacity(n),
            index: FastMap::with_capacity_and_hasher(n, Fast::default()),
        }
    }
    pub fn get(&self, port: &str) -> Option<&PortDelta> {
        self.index.get(port).map(|i| &self.deltas[*i as usize])
    }
    /// Ports and their deltas in the last sample's port order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &PortDelta)> + '_ {
        self.names.iter().copied().zip(&self.deltas)
    }
    pub fn keys(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.names.iter().copied()
    }
    pub fn values(&self) -> std::slice::Iter<'_, PortDelta> {
        self.deltas.iter()
    }
    pub fn is_empty(&self) -> bool {
        self.deltas.is_empty()
    }
    fn push(&mut self, name: &'a str, d: PortDelta) {
        self.index.insert(name, self.deltas.len() as u32);
        self.names.push(name);
        self.deltas.push(d);
    }
    /// The port's deltas, added empty if it has none yet.
    fn entry(&mut self, name: &'a str) -> &mut PortDelta {
        let i = match self.index.get(name) {
            Some(i) => *i as usize,
            None => {
                self.push(name, PortDelta::default());
                self.deltas.len() - 1
            }
        };
        &mut self.deltas[i]
    }
}

impl std::ops::Index<&str> for SwitchDeltas<'_> {
    type Output = PortDelta;
    fn index(&self, port: &str) -> &PortDelta {
        self.get(port).expect("a moved port")
    }
}

#[derive(Debug, Default)]
pub(crate) struct Table<'a> {
    pub ports: FastMap<&'a str, SwitchDeltas<'a>>,
    /// Every moved port in each of the window's samples, a port's run starting at its
    /// [`PortDelta::at`] (`None` where its switch or it is absent): one allocation, not one
    /// per port.
    pub at: Vec<Option<Cell>>,
    /// Switches in the first and last samples whose counters did not move at all (and whose
    /// poll time, if published, did not either): nothing can be judged from them.
    pub frozen: HashSet<&'a str, Fast>,
    /// Priorities with any PAUSE sent or received anywhere in the window.
    pub active_prios: [bool; PRIORITIES],
}

fn add_increase(acc: &mut PortSample, a: &PortSample, b: &PortSample) {
    acc.rx_packets += sub(b.rx_packets, a.rx_packets);
    acc.tx_packets += sub(b.tx_packets, a.tx_packets);
    acc.rx_bytes += sub(b.rx_bytes, a.rx_bytes);
    acc.tx_bytes += sub(b.tx_bytes, a.tx_bytes);
    for p in 0..PRIORITIES {
        acc.pfc_rx_pause[p] += sub(b.pfc_rx_pause[p], a.pfc_rx_pause[p]);
        acc.pfc_tx_pause[p] += sub(b.pfc_tx_pause[p], a.pfc_tx_pause[p]);
    }
}

/// The port's increase over the samples that hold it, if the first does, and of its depth
/// histogram's increase (packets that found at least `deep_queue` queued, packets counted),
/// bucketed at the last sample's shift: two sums, not a histogram allocated per port.
fn port_increase(at: &[Option<&PortSample>], deep_queue: u64) -> Option<(PortSample, (u64, u64))> {
    let first = (*at.first()?)?;
    let mut acc = PortSample::default();
    let mut prev = first;
    let mut hist_ok = !first.depth_histogram.is_empty();
    let shift = at
        .iter()
        .flatten()
        .last()
        .map_or(0, |p| p.histogram_shift)
        .min(16);
    let mut deep = (0u64, 0u64);
    for p in at[1..].iter().flatten() {
        add_increase(&mut acc, prev, p);
        if hist_ok && p.depth_histogram.len() == prev.depth_histogram.len() {
            for (i, (a, b)) in prev
                .depth_histogram
                .iter()
                .zip(&p.depth_histogram)
                .enumerate()
            {
                let n = sub(*b, *a);
                deep.1 += n;
                if ((i as u64) << shift) >= deep_queue {
                    deep.0 += n;
                }
            }
        } else {
            hist_ok = false;
        }
        prev = p;
    }
    Some((acc, if hist_ok { deep } else { (0, 0) }))
}

/// `EthernetN:q` → (`EthernetN`, q).
fn queue_key(k: &str) -> Option<(&str, usize)> {
    let (p, q) = k.rsplit_once(':')?;
    let q: usize = q.parse().ok()?;
    (q < PRIORITIES).then_some((p, q))
}

/// (marks, departures, trimmed) of a queue over its samples: missing from the first sample,
/// it starts at zero (a queue that never carried anything is not published); missing later,
/// skipped.
fn queue_increase(at: &[Option<&QueueSample>]) -> (u64, u64, u64) {
    let zero = QueueSample::default();
    let mut prev = at.first().copied().flatten().unwrap_or(&zero);
    let (mut m, mut d, mut t) = (0, 0, 0);
    for q in at.iter().skip(1).flatten() {
        m += sub(q.ecn_marked, prev.ecn_marked);
        d += sub(q.packets, prev.packets);
        t += sub(q.trimmed, prev.trimmed);
        prev = q;
    }
    (m, d, t)
}

/// Walks the last sample's keys in order and finds each in every sample by advancing one
/// cursor per sample (the maps are sorted alike): no lookup per key and sample, which at 5,120
/// switches × 64 ports × 8 queues × 3 samples was most of the rules' time.
fn aligned<'a, V>(
    maps: &[Option<&'a BTreeMap<String, V>>],
    mut each: impl FnMut(&'a str, &[Option<&'a V>]),
) {
    let Some(Some(last)) = maps.last() else {
        return;
    };
    let mut cursors: Vec<_> = maps
        .iter()
        .map(|m| m.map(|m| m.iter().peekable()))
        .collect();
    let mut row: Vec<Option<&'a V>> = vec![None; maps.len()];
    for key in last.keys() {
        for (slot, cur) in row.iter_mut().zip(cursors.iter_mut()) {
            *slot = None;
            let Some(cur) = cur else { continue };
            // Equal first: the samples nearly always hold the same keys.
            while let Some((k, v)) = cur.peek() {
                if *k == key {
                    *slot = Some(*v);
                    cur.next();
                    break;
                }
                if k.as_str() > key.as_str() {
                    break;
                }
                cur.next();
            }
        }
        each(key.as_str(), &row);
    }
}

fn switch_table<'a>(
    seq: &[Option<&'a SwitchSample>],
    arena: &mut Vec<Option<Cell>>,
    deep_queue: u64,
) -> SwitchDeltas<'a> {
    let Some(Some(last)) = seq.last() else {
        return SwitchDeltas::default();
    };
    let n = seq.len();
    let mut ports = SwitchDeltas::with_capacity(last.ports.len());
    let port_maps: Vec<_> = seq.iter().map(|s| s.map(|s| &s.ports)).collect();
    aligned(&port_maps, |name, at| {
        if let Some((d, deep)) = port_increase(at, deep_queue) {
            let start = arena.len();
            arena.extend(at.iter().zip(seq).map(|(p, sw)| {
                p.map(|p| Cell {
                    tx: p.tx_packets,
                    rx: p.rx_packets,
                    poll: sw.and_then(|s| s.poll_ms),
                })
            }));
            let known = |f: fn(&PortSample) -> Option<u64>| Some(sub(f(at[n - 1]?)?, f(at[0]?)?));
            let psn = (known(|p| p.psn_out_of_order), known(|p| p.psn_regressions));
            ports.push(
                name,
                PortDelta {
                    d,
                    psn,
                    at: Some(start),
                    deep,
                    ..Default::default()
                },
            );
        }
    });
    // A port's queues are consecutive keys (`EthernetN:0` … `:7`): one lookup per port.
    let queue_maps: Vec<_> = seq.iter().map(|s| s.map(|s| &s.queues)).collect();
    let mut moves: Vec<(&'a str, usize, (u64, u64, u64))> = Vec::new();
    aligned(&queue_maps, |key, at| {
        if let Some((port, q)) = queue_key(key) {
            moves.push((port, q, queue_increase(at)));
        }
    });
    for run in moves.chunk_by(|a, b| a.0 == b.0) {
        let e = ports.entry(run[0].0);
        for &(_, q, (m, d, t)) in run {
            e.marks[q] = m;
            e.departures[q] = d;
            e.trimmed[q] = t;
        }
    }
    ports
}

/// The window's deltas on the calling thread, the histograms bucketed at the default deep
/// queue.
pub(crate) fn build(w: &Window) -> Table<'_> {
    build_on(w, false, crate::Thresholds::default().deep_queue)
}

type Seq<'a> = (&'a str, Vec<Option<&'a SwitchSample>>);

/// The window's deltas, with `two_threads` half of the switches on a second thread (the tables
/// are joined after: a port's [`PortDelta::at`] moved by what the first half holds).
/// `deep_queue`: [`crate::Thresholds::deep_queue`].
pub(crate) fn build_on(w: &Window, two_threads: bool, deep_queue: u64) -> Table<'_> {
    let mut t = Table::default();
    let Some(last) = w.samples.last() else {
        return t;
    };
    // Every sample's switches in order, walked alongside the last sample's; a switch must be
    // in the first sample too.
    let maps: Vec<_> = w.samples.iter().map(|s| Some(&s.switches)).collect();
    let mut seqs: Vec<Seq<'_>> = Vec::with_capacity(last.switches.len());
    aligned(&maps, |name, at| {
        if at[0].is_some() {
            seqs.push((name, at.to_vec()));
        }
    });
    if !two_threads || seqs.len() < 2 {
        fill(&mut t, seqs, deep_queue);
        return t;
    }
    let second = seqs.split_off(seqs.len() / 2);
    let other = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut o = Table::default();
            fill(&mut o, second, deep_queue);
            o
        });
        fill(&mut t, seqs, deep_queue);
        h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
    });
    let base = t.at.len();
    t.at.extend(other.at);
    for (name, mut ports) in other.ports {
        for p in &mut ports.deltas {
            if let Some(at) = &mut p.at {
                *at += base;
            }
        }
        t.ports.insert(name, ports);
    }
    t.frozen.extend(other.frozen);
    for (a, b) in t.active_prios.iter_mut().zip(other.active_prios) {
        *a |= b;
    }
    t
}

fn fill<'a>(t: &mut Table<'a>, seqs: Vec<Seq<'a>>, deep_queue: u64) {
    // The arena at its full size at once: grown by doubling it was copied and faulted in
    // again at every step (7.9 MB at k=64).
    let cells: usize = seqs
        .iter()
        .map(|(_, seq)| seq.last().copied().flatten().map_or(0, |s| s.ports.len()) * seq.len())
        .sum();
    t.at.reserve(cells);
    t.ports.reserve(seqs.len());
    for (name, seq) in seqs {
        let ports = switch_table(&seq, &mut t.at, deep_queue);
        let moved = ports
            .values()
            .any(|p| p.d.rx_packets > 0 || p.d.tx_packets > 0);
        let mut present = seq.iter().flatten();
        let first = present.next().and_then(|s| s.poll_ms);
        let last = present.last().and_then(|s| s.poll_ms);
        let polled = matches!((first, last), (Some(a), Some(b)) if b > a);
        if !ports.is_empty() && !moved && !polled {
            t.frozen.insert(name);
        }
        for p in ports.values() {
            for q in 0..PRIORITIES {
                t.active_prios[q] |= p.d.pfc_rx_pause[q] > 0 || p.d.pfc_tx_pause[q] > 0;
            }
        }
        t.ports.insert(name, ports);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sample;

    fn port(rx: u64, tx: u64) -> PortSample {
        PortSample {
            rx_packets: rx,
            tx_packets: tx,
            ..Default::default()
        }
    }

    fn sample(t_ms: u64, ports: &[(&str, PortSample)]) -> Sample {
        let mut s = SwitchSample::default();
        for (n, p) in ports {
            s.ports.insert(n.to_string(), p.clone());
        }
        Sample {
            t_ms,
            switches: [("sw".to_string(), s)].into(),
        }
    }

    #[test]
    fn ports_are_matched_by_name_across_samples_whatever_else_each_sample_holds() {
        // The first sample has a port the others lost; the last one a port the first lacks;
        // the middle one a port of its own between them.
        let w = Window {
            samples: vec![
                sample(
                    0,
                    &[
                        ("Ethernet0", port(0, 5)),
                        ("Ethernet4", port(0, 7)),
                        ("Ethernet8", port(0, 9)),
                    ],
                ),
                sample(
                    1000,
                    &[
                        ("Ethernet0", port(0, 15)),
                        ("Ethernet2", port(0, 1)),
                        ("Ethernet8", port(0, 19)),
                    ],
                ),
                sample(
                    2000,
                    &[
                        ("Ethernet0", port(0, 25)),
                        ("Ethernet6", port(0, 3)),
                        ("Ethernet8", port(0, 29)),
                    ],
                ),
            ],
            ..Default::default()
        };
        let t = build(&w);
        let sw = &t.ports["sw"];
        let mut names: Vec<&str> = sw.keys().collect();
        names.sort();
        assert_eq!(names, ["Ethernet0", "Ethernet8"]);
        assert_eq!(sw["Ethernet0"].d.tx_packets, 20);
        assert_eq!(sw["Ethernet8"].d.tx_packets, 20);
        let at = sw["Ethernet8"].at.expect("in the arena");
        let txs: Vec<Option<u64>> = t.at[at..at + 3].iter().map(|p| p.map(|p| p.tx)).collect();
        assert_eq!(txs, [Some(9), Some(19), Some(29)]);
    }

    #[test]
    fn a_restart_in_the_middle_of_a_window_loses_only_what_it_counted_since_the_last_sample() {
        // 100 per second; the switch restarts between the second and third sample.
        let w = Window {
            samples: vec![
                sample(0, &[("p", port(1000, 0))]),
                sample(1000, &[("p", port(1100, 0))]),
                sample(2000, &[("p", port(60, 0))]),
                sample(3000, &[("p", port(160, 0))]),
            ],
            ..Default::default()
        };
        let t = build(&w);
        assert_eq!(t.ports["sw"]["p"].d.rx_packets, 100 + 60 + 100);
        assert!(t.frozen.is_empty());
    }

    #[test]
    fn a_switch_whose_counters_did_not_move_is_frozen_unless_its_polls_advanced() {
        let mut w = Window {
            samples: vec![
                sample(0, &[("p", port(5, 5))]),
                sample(1000, &[("p", port(5, 5))]),
            ],
            ..Default::default()
        };
        assert!(build(&w).frozen.contains("sw"));
        // Polled twice and nothing moved: an idle switch, judged (no traffic is no loss).
        for (i, s) in w.samples.iter_mut().enumerate() {
            s.switches.get_mut("sw").expect("sw").poll_ms = Some(10_000 + 1000 * i as u64);
        }
        assert!(build(&w).frozen.is_empty());
    }

    #[test]
    fn a_sample_in_between_that_lacks_a_port_is_skipped_and_queues_start_at_zero() {
        let mut a = sample(0, &[("p", port(0, 10))]);
        let b = sample(1000, &[]);
        let mut c = sample(2000, &[("p", port(0, 30))]);
        c.switches.get_mut("sw").expect("sw").queues.insert(
            "p:3".into(),
            QueueSample {
                packets: 20,
                ecn_marked: 4,
                ..Default::default()
            },
        );
        a.switches
            .get_mut("sw")
            .expect("sw")
            .ports
            .get_mut("p")
            .expect("p")
            .pfc_tx_pause[3] = 0;
        let w = Window {
            samples: vec![a, b, c],
            ..Default::default()
        };
        let t = build(&w);
        let p = &t.ports["sw"]["p"];
        assert_eq!(p.d.tx_packets, 20);
        assert_eq!((p.marks[3], p.departures[3]), (4, 20));
        assert!(!t.active_prios.iter().any(|x| *x));
    }

    #[test]
    fn the_depth_histogram_increase_is_bucketed_at_the_last_samples_shift() {
        let hist = |h: &[u64], shift: u8| PortSample {
            depth_histogram: h.to_vec(),
            histogram_shift: shift,
            ..Default::default()
        };
        // Buckets of 4 packets (shift 2): buckets 3 and up found at least 12 queued.
        let at = [
            hist(&[10, 0, 0, 0, 0], 2),
            hist(&[30, 5, 0, 1, 0], 2),
            hist(&[40, 5, 2, 4, 6], 2),
        ];
        let refs: Vec<Option<&PortSample>> = at.iter().map(Some).collect();
        let (_, deep) = port_increase(&refs, 12).expect("in the first sample");
        assert_eq!(deep, (4 + 6, 30 + 5 + 2 + 4 + 6));
        // A sample that lacks the port is skipped; a histogram that changed size is unknown.
        let gap = [Some(&at[0]), None, Some(&at[2])];
        assert_eq!(port_increase(&gap, 12).expect("port").1, (10, 47));
        let resized = hist(&[40, 5], 2);
        let odd = [Some(&at[0]), Some(&resized)];
        assert_eq!(port_increase(&odd, 12).expect("port").1, (0, 0));
        // At a coarser last shift (3: buckets of 8) bucket 2 already found 16 queued.
        let mut coarse = at.clone();
        coarse[2].histogram_shift = 3;
        let refs: Vec<Option<&PortSample>> = coarse.iter().map(Some).collect();
        assert_eq!(port_increase(&refs, 12).expect("port").1, (2 + 4 + 6, 47));
    }

    #[test]
    fn two_threads_build_the_table_one_thread_builds() {
        // Five switches (the second thread takes the last three), ports moving at each's own
        // rate, one switch absent from the middle sample, one frozen.
        let samples = (0..3u64)
            .map(|i| {
                let mut switches = BTreeMap::new();
                for s in 0..5u64 {
                    if s == 3 && i == 1 {
                        continue;
                    }
                    let mut sw = SwitchSample::default();
                    for p in 0..4u64 {
                        let rate = if s == 4 { 0 } else { (s + 1) * (p + 1) };
                        let mut ps = port(i * rate, 2 * i * rate);
                        ps.pfc_rx_pause[3] = if s == 2 { i * 7 } else { 0 };
                        sw.ports.insert(format!("Ethernet{p}"), ps);
                    }
                    sw.poll_ms = (s != 4).then_some(i * 1000 + s);
                    switches.insert(format!("sw{s}"), sw);
                }
                Sample {
                    t_ms: i * 1000,
                    switches,
                }
            })
            .collect();
        let w = Window {
            samples,
            ..Default::default()
        };
        let (one, two) = (build_on(&w, false, 10), build_on(&w, true, 10));
        type Runs = BTreeMap<(String, String), (u64, u64, Vec<Option<Cell>>)>;
        let runs = |t: &Table<'_>| -> Runs {
            t.ports
                .iter()
                .flat_map(|(sw, ports)| {
                    ports.iter().map(move |(p, d)| {
                        let at = d.at.map(|a| &t.at[a..a + 3]).unwrap_or_default();
                        (
                            (sw.to_string(), p.to_string()),
                            (d.d.rx_packets, d.d.pfc_rx_pause[3], at.to_vec()),
                        )
                    })
                })
                .collect()
        };
        assert_eq!(runs(&one).len(), 20);
        assert_eq!(runs(&one), runs(&two));
        assert_eq!(one.frozen, two.frozen);
        assert!(two.frozen.contains("sw4"));
        assert_eq!(one.active_prios, two.active_prios);
        assert!(two.active_prios[3]);
        // Each cell carries its switch's poll of that sample.
        let sw1 = &two.ports["sw1"]["Ethernet2"];
        let cells = &two.at[sw1.at.expect("in the arena")..][..3];
        assert_eq!(
            cells
                .iter()
                .map(|c| c.and_then(|c| c.poll))
                .collect::<Vec<_>>(),
            [Some(1), Some(1001), Some(2001)]
        );
    }
}
