//! How much every port's counters moved over a window, computed once per window: a rule then
//! looks a port up instead of walking the samples (5,120 switches, 327,680 ports).
//!
//! A counter's move is its increase over the samples that hold it, sample to sample: one that
//! went backwards was reset (the switch restarted) and counts from zero there, so a restart in
//! the middle of a window loses only what was counted between the last sample before it and
//! the restart, not everything before it. A port is moved only when the window's first and
//! last samples both hold it; a sample in between that lacks it is skipped.

use std::collections::{HashMap, HashSet};

use crate::{PRIORITIES, PortSample, QueueSample, SwitchSample, Window, sub};

/// One port's moves: its counters (as a [`PortSample`] of increases) and its queues'.
#[derive(Debug, Default)]
pub(crate) struct PortDelta {
    pub d: PortSample,
    /// Per queue: CE marks and departures.
    pub marks: [u64; PRIORITIES],
    pub departures: [u64; PRIORITIES],
}

#[derive(Debug, Default)]
pub(crate) struct Table<'a> {
    pub ports: HashMap<&'a str, HashMap<&'a str, PortDelta>>,
    /// Switches in the first and last samples whose counters did not move at all (and whose
    /// poll time, if published, did not either): nothing can be judged from them.
    pub frozen: HashSet<&'a str>,
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

/// The port's increase over `seq` (the switch in every sample that holds it), if the first
/// holds the port.
fn port_increase(seq: &[&SwitchSample], port: &str) -> Option<PortSample> {
    let first = seq.first()?.ports.get(port)?;
    let mut acc = PortSample::default();
    let mut prev = first;
    let mut hist_ok = !first.depth_histogram.is_empty();
    let mut hist = vec![0u64; first.depth_histogram.len()];
    for s in &seq[1..] {
        let Some(p) = s.ports.get(port) else {
            continue;
        };
        add_increase(&mut acc, prev, p);
        if hist_ok && p.depth_histogram.len() == prev.depth_histogram.len() {
            for (h, (a, b)) in hist
                .iter_mut()
                .zip(prev.depth_histogram.iter().zip(&p.depth_histogram))
            {
                *h += sub(*b, *a);
            }
        } else {
            hist_ok = false;
        }
        acc.histogram_shift = p.histogram_shift;
        prev = p;
    }
    if hist_ok {
        acc.depth_histogram = hist;
    }
    Some(acc)
}

/// `EthernetN:q` → (`EthernetN`, q).
fn queue_key(k: &str) -> Option<(&str, usize)> {
    let (p, q) = k.rsplit_once(':')?;
    let q: usize = q.parse().ok()?;
    (q < PRIORITIES).then_some((p, q))
}

/// (marks, departures) of queue `key` over `seq`: missing from the first sample, it starts at
/// zero (a queue that never carried anything is not published); missing later, skipped.
fn queue_increase(seq: &[&SwitchSample], key: &str) -> (u64, u64) {
    let zero = QueueSample::default();
    let mut prev = seq.first().and_then(|s| s.queues.get(key)).unwrap_or(&zero);
    let (mut m, mut d) = (0, 0);
    for s in seq.iter().skip(1) {
        let Some(q) = s.queues.get(key) else {
            continue;
        };
        m += sub(q.ecn_marked, prev.ecn_marked);
        d += sub(q.packets, prev.packets);
        prev = q;
    }
    (m, d)
}

fn switch_table<'a>(seq: &[&'a SwitchSample]) -> HashMap<&'a str, PortDelta> {
    let Some(last) = seq.last() else {
        return HashMap::new();
    };
    let mut ports: HashMap<&'a str, PortDelta> = HashMap::with_capacity(last.ports.len());
    for name in last.ports.keys() {
        if let Some(d) = port_increase(seq, name) {
            ports.insert(
                name.as_str(),
                PortDelta {
                    d,
                    ..Default::default()
                },
            );
        }
    }
    for key in last.queues.keys() {
        let Some((port, q)) = queue_key(key) else {
            continue;
        };
        let (m, d) = queue_increase(seq, key);
        let e = ports.entry(port).or_default();
        e.marks[q] = m;
        e.departures[q] = d;
    }
    ports
}

pub(crate) fn build(w: &Window) -> Table<'_> {
    let mut t = Table::default();
    let (Some(first), Some(last)) = (w.samples.first(), w.samples.last()) else {
        return t;
    };
    for name in last.switches.keys() {
        if !first.switches.contains_key(name) {
            continue;
        }
        let seq: Vec<&SwitchSample> = w
            .samples
            .iter()
            .filter_map(|s| s.switches.get(name))
            .collect();
        let ports = switch_table(&seq);
        let moved = ports
            .values()
            .any(|p| p.d.rx_packets > 0 || p.d.tx_packets > 0);
        let polls = (seq[0].poll_ms, seq[seq.len() - 1].poll_ms);
        let polled = matches!(polls, (Some(a), Some(b)) if b > a);
        if !ports.is_empty() && !moved && !polled {
            t.frozen.insert(name.as_str());
        }
        for p in ports.values() {
            for q in 0..PRIORITIES {
                t.active_prios[q] |= p.d.pfc_rx_pause[q] > 0 || p.d.pfc_tx_pause[q] > 0;
            }
        }
        t.ports.insert(name.as_str(), ports);
    }
    t
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
}
