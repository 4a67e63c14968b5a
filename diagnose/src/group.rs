//! What an operator acts on across a fabric: one finding per cause, ranked by the traffic it
//! touches.
//!
//! * **Folding**: a finding whose target is a port another finding names among its victims
//!   (a queue a storm's PAUSE held up, a port a back-pressure origin paused) is not a cause of
//!   its own: it is folded into the finding that names it. A back-pressure finding on the
//!   port a slow link is found on is the slow link's. (Loss on most links of one switch is
//!   already one finding on the switch, see `lossy`.)
//! * **Weighing**: each finding's `bytes` is what crossed the ports it affects over the window
//!   (each cable once, both directions; a black hole: the packets it dropped at the switch's
//!   mean packet size).

use std::collections::{BTreeMap, BTreeSet};

use crate::{Deltas, End, Finding, Kind};

/// `SW:PORT` or `HOST:eth0` as an end, if it names one of the fabric's ends.
fn end_of(d: &Deltas<'_>, s: &str) -> Option<End> {
    let (node, port) = s.rsplit_once(':')?;
    let e = End::new(node, port);
    d.w.fabric.peer(&e).is_some().then_some(e)
}

/// The switch ports `f` holds up: its victims that are ends, a host's as its leaf port.
fn victim_ports(d: &Deltas<'_>, f: &Finding) -> BTreeSet<End> {
    let fab = &d.w.fabric;
    f.victims
        .iter()
        .filter_map(|v| end_of(d, v))
        .filter_map(|e| {
            if fab.is_host(&e.node) {
                fab.host_port(&e.node)
            } else {
                Some(e)
            }
        })
        .collect()
}

/// Folds findings that share a cause into the one that names it.
pub(crate) fn fold(d: &Deltas<'_>, out: &mut Vec<Finding>) {
    let held: Vec<BTreeSet<End>> = out.iter().map(|f| victim_ports(d, f)).collect();
    let mut into: BTreeMap<usize, usize> = BTreeMap::new();
    for (j, g) in out.iter().enumerate() {
        if !matches!(g.kind, Kind::SlowLink | Kind::Congestion) {
            continue;
        }
        let Some(port) = end_of(d, &g.target).filter(|e| !d.w.fabric.is_host(&e.node)) else {
            continue;
        };
        // A port some other finding holds up (the most confident one takes it).
        let by = (0..out.len())
            .filter(|&i| i != j && held[i].contains(&port))
            .max_by(|&a, &b| out[a].confidence.total_cmp(&out[b].confidence));
        // A back-pressure finding on a slow link's own port.
        let same = (g.kind == Kind::Congestion)
            .then(|| {
                (0..out.len()).find(|&i| out[i].kind == Kind::SlowLink && out[i].target == g.target)
            })
            .flatten();
        if let Some(i) = by.or(same) {
            into.insert(j, i);
        }
    }
    // Follow chains (a folded into b folded into c) to a finding that stays.
    let root = |mut j: usize| {
        for _ in 0..out.len() {
            match into.get(&j) {
                Some(&i) if i != j => j = i,
                _ => break,
            }
        }
        j
    };
    let mut moves: Vec<(usize, usize)> = into.keys().map(|&j| (j, root(j))).collect();
    moves.retain(|(j, r)| j != r);
    let mut taken: BTreeMap<usize, Finding> = BTreeMap::new();
    for (j, _) in &moves {
        taken.insert(*j, out[*j].clone());
    }
    for (j, r) in &moves {
        let g = &taken[j];
        let f = &mut out[*r];
        f.folded.push(format!("{} {}", g.kind.as_str(), g.target));
        f.folded.extend(g.folded.iter().cloned());
        for v in &g.victims {
            if !f.victims.contains(v) {
                f.victims.push(v.clone());
            }
        }
    }
    let gone: BTreeSet<usize> = moves.iter().map(|(j, _)| *j).collect();
    let mut i = 0;
    out.retain(|_| {
        i += 1;
        !gone.contains(&(i - 1))
    });
}

/// The ports a finding affects (switch side of each cable).
fn affected(d: &Deltas<'_>, f: &Finding) -> Vec<End> {
    let fab = &d.w.fabric;
    let mut ends: Vec<End> = Vec::new();
    let target_port = |t: &str| -> Option<End> {
        if fab.is_host(t) {
            return fab.host_port(t);
        }
        end_of(d, t)
    };
    match f.kind {
        Kind::LossyLink if f.target.contains('—') => {
            ends.extend(f.target.split('—').filter_map(|t| end_of(d, t)));
        }
        Kind::LossyLink => {
            for v in &f.victims {
                ends.extend(v.split('—').filter_map(|t| end_of(d, t)));
            }
        }
        Kind::Reordering if !fab.is_host(&f.target) => {
            let sw = &f.target;
            ends.extend(
                d.t.ports
                    .get(sw.as_str())
                    .into_iter()
                    .flat_map(|m| m.keys())
                    .map(|p| End::new(sw, p))
                    .filter(|e| fab.peer(e).is_some_and(|x| fab.is_host(&x.node))),
            );
        }
        _ => ends.extend(target_port(&f.target)),
    }
    ends.extend(victim_ports(d, f));
    for x in &f.folded {
        if let Some((_, t)) = x.split_once(' ') {
            ends.extend(target_port(t));
        }
    }
    ends
}

/// Bytes through `e`'s cable in both directions, counted at the switch end.
fn cable_bytes(d: &Deltas<'_>, e: &End) -> u64 {
    d.port(e, |p| p.tx_bytes + p.rx_bytes)
}

/// A switch's mean packet size over the window (bytes), if it sent any.
fn mean_packet(d: &Deltas<'_>, sw: &str) -> Option<u64> {
    let m = d.t.ports.get(sw)?;
    let (b, p) = m.values().fold((0u64, 0u64), |(b, p), x| {
        (b + x.d.tx_bytes, p + x.d.tx_packets)
    });
    (p > 0).then(|| b / p)
}

/// Sets each finding's `bytes`.
pub(crate) fn weigh(d: &Deltas<'_>, out: &mut [Finding]) {
    let fab = &d.w.fabric;
    for f in out.iter_mut() {
        let mut cables: BTreeSet<End> = BTreeSet::new();
        for e in affected(d, f) {
            // One end per cable: the smaller of the two (a switch end: hosts are not read).
            let key = match fab.peer(&e) {
                Some(p) if !fab.is_host(&p.node) && *p < e => p.clone(),
                _ => e,
            };
            cables.insert(key);
        }
        let mut bytes: u64 = cables.iter().map(|e| cable_bytes(d, e)).sum();
        if f.kind == Kind::BlackHole {
            let dropped: u64 = f
                .evidence
                .iter()
                .filter(|e| e.counter.starts_with("WEFT_DROP_"))
                .map(|e| e.delta)
                .sum();
            bytes += dropped * mean_packet(d, &f.target).unwrap_or(0);
        }
        f.bytes = bytes;
    }
}

/// `victims` as one line: all of them when few, else how many, on how many nodes, and the
/// first `max`.
pub fn summarize(victims: &[String], max: usize) -> String {
    if victims.len() <= max {
        return victims.join(", ");
    }
    let nodes: BTreeSet<&str> = victims
        .iter()
        .map(|v| v.split(':').next().unwrap_or(v))
        .collect();
    format!(
        "{} on {} nodes: {}, …",
        victims.len(),
        nodes.len(),
        victims[..max].join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::summarize;

    #[test]
    fn a_long_victim_list_is_summarised_with_counts_and_the_first_few() {
        let v: Vec<String> = (0..40)
            .map(|i| format!("leaf{}:Ethernet{}", i % 8, i))
            .collect();
        let s = summarize(&v, 3);
        assert!(
            s.starts_with("40 on 8 nodes: leaf0:Ethernet0, leaf1:Ethernet1, leaf2:Ethernet2"),
            "{s}"
        );
        assert_eq!(summarize(&v[..2], 3), "leaf0:Ethernet0, leaf1:Ethernet1");
    }
}
