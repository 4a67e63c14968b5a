//! Lossy links: sent at one end of a cable, not received at the other.
//!
//! The two ends are read by two plugins polling on their own clocks, so their counters are
//! of different instants. When the samples carry each switch's poll time
//! ([`crate::SwitchSample::poll_ms`]) the rates are exact per end (packets over that end's own
//! polled span); two spans offset by up to one poll interval still disagree by as much as the
//! rates changed, so each end must have polled at least three times in the window and the
//! spread of its rates between polls is allowed for (a steady flow: nearly nothing; a flow
//! that started, stopped or was paused in the window: judged in a later one, unless the two
//! ends polled together and the samples' own times can judge it). Without poll times, a loss
//! must exceed `counter_skew_s` of the sender's traffic, as before.
//!
//! A loss is judged on every sub-window from the first or second sample to the last or
//! second-to-last (one late sample is no loss), and never across a counter reset or at a
//! switch whose counters did not move at all (frozen: nothing to judge). Loss on many links of
//! one switch is one finding on the switch (a linecard, its ASIC, ports flapping), not many
//! cables; loss on many links with nothing in common is one fabric-wide finding below the
//! reporting threshold (switches starved or counters read late).

use std::collections::BTreeMap;

use crate::deltas::{Cell, FastMap, PortDelta, SwitchDeltas};
use crate::{Deltas, End, Finding, Kind, PortSample, Thresholds};

/// A switch loses, not its cables, when at least 3 and this share of its loaded cables lose.
const SWITCH_SHARE: f64 = 0.5;
/// Unrelated lossy links as a share of the loaded ones that make a fabric-wide finding.
const FABRIC_SHARE: f64 = 0.2;
/// What exact rates still disagree on, as a share of the traffic (rounding, in-flight).
const STAMPED_FLOOR: f64 = 0.005;
/// Two ends' polls this close (ms) are one instant for a loss judged by sample times.
const POLLED_TOGETHER_MS: u64 = 50;

/// One end's port in each sample, with its switch's poll times: a run of the arena.
#[derive(Clone, Copy)]
struct EndAt<'d> {
    at: &'d [Option<Cell>],
}

impl<'d> EndAt<'d> {
    fn of(d: &'d Deltas<'d>, m: &PortDelta) -> Option<EndAt<'d>> {
        let from = m.at?;
        Some(EndAt {
            at: d.t.at.get(from..from + d.w.samples.len())?,
        })
    }
}

/// One end of a cable, looked up once for both directions (131,072 cables at k=64).
struct Side<'d> {
    e: &'d End,
    moved: Option<&'d PortDelta>,
    /// Its samples and polls; `None` where its switch is frozen (nothing to judge) or the port
    /// is not in the window.
    at: Option<EndAt<'d>>,
}

/// What a cable's end needs of its switch, looked up once for a run of cables at it.
#[derive(Clone, Copy)]
struct SwitchAt<'d> {
    host: bool,
    ports: Option<&'d SwitchDeltas<'d>>,
    frozen: bool,
}

/// The last switch looked up for each end of the cables: a fabric lists a switch's cables
/// together, so most cables find one end's switch here (131,072 cables at k=64, each end's
/// switch otherwise four lookups by name).
struct Switches<'d> {
    d: &'d Deltas<'d>,
    last: [Option<(&'d str, SwitchAt<'d>)>; 2],
}

impl<'d> Switches<'d> {
    fn at(&mut self, end: usize, node: &'d str) -> SwitchAt<'d> {
        if let Some((n, at)) = self.last[end]
            && n == node
        {
            return at;
        }
        let d = self.d;
        let at = SwitchAt {
            host: d.w.fabric.is_host(node),
            ports: d.t.ports.get(node),
            frozen: d.t.frozen.contains(node),
        };
        self.last[end] = Some((node, at));
        at
    }
}

impl<'d> Side<'d> {
    fn of(d: &'d Deltas<'d>, e: &'d End, sw: SwitchAt<'d>) -> Side<'d> {
        let moved = sw.ports.and_then(|m| m.get(e.port.as_str()));
        let at = moved.filter(|_| !sw.frozen).and_then(|m| EndAt::of(d, m));
        Side { e, moved, at }
    }
    fn count(&self, f: fn(&PortSample) -> u64) -> u64 {
        self.moved.map_or(0, |m| f(&m.d))
    }
}

/// A counter of an end at sample `i`, and its switch's poll time.
fn at(e: EndAt<'_>, i: usize, f: fn(&Cell) -> u64) -> Option<(u64, Option<u64>)> {
    let c = (*e.at.get(i)?)?;
    Some((f(&c), c.poll))
}

/// Polled span (ms) of one end between two samples, when both carry poll times.
fn span(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) if b > a => Some(b - a),
        _ => None,
    }
}

/// How much an end's counter rate varied over the window: (max − min) / mean of its rates
/// between successive polls (timed by its own poll times). `None` when it polled fewer than
/// three times or a counter went back (a restart): its steadiness is not known.
fn variation(e: EndAt<'_>, f: fn(&Cell) -> u64) -> Option<f64> {
    // Streamed, no list of points: called for both ends of every loaded cable in the window.
    let mut last: Option<(u64, u64)> = None;
    let (mut min, mut max, mut sum, mut n) = (f64::MAX, f64::MIN, 0.0, 0u32);
    for i in 0..e.at.len() {
        let Some((v, Some(p))) = at(e, i, f) else {
            continue;
        };
        match last {
            Some((lp, _)) if p <= lp => continue,
            Some((_, lv)) if v < lv => return None,
            Some((lp, lv)) => {
                let r = (v - lv) as f64 / (p - lp) as f64;
                min = min.min(r);
                max = max.max(r);
                sum += r;
                n += 1;
            }
            None => {}
        }
        last = Some((p, v));
    }
    if n < 2 {
        return None;
    }
    let mean = sum / f64::from(n);
    Some(if mean > 0.0 { (max - min) / mean } else { 0.0 })
}

/// Loss beyond what the ends' clocks explain from `from` to `to` between samples `i` and `j`:
/// `None` when this sub-window cannot judge (an end missing or reset, no time passed), else
/// (excess lost, sent).
fn excess(
    d: &Deltas<'_>,
    th: &Thresholds,
    from: EndAt<'_>,
    to: EndAt<'_>,
    i: usize,
    j: usize,
) -> Option<(u64, u64)> {
    let (ta, pa) = at(from, i, |c| c.tx)?;
    let (tb, pb) = at(from, j, |c| c.tx)?;
    let (ra, qa) = at(to, i, |c| c.rx)?;
    let (rb, qb) = at(to, j, |c| c.rx)?;
    if tb < ta || rb < ra {
        return None;
    }
    let (tx, rx) = (tb - ta, rb - ra);
    let s = &d.w.samples;
    let stamped = [pa, pb, qa, qb].iter().any(Option::is_some);
    if stamped {
        // Exact rates per end, each over its own polled span (an end that did not poll in
        // between says nothing). The spans are offset by up to one poll interval, which
        // matters as much as the rates changed over the window: each end's rates between its
        // successive polls must be known, and their spread is allowed for.
        let (sf, st) = (span(pa, pb)?, span(qa, qb)?);
        let vary = variation(from, |c| c.tx)
            .zip(variation(to, |c| c.rx))
            .map(|(a, b)| a + b);
        // Where the rates between polls are unknown (fewer than three polls) or spread wider
        // than the smallest loss to report, the poll times cannot judge: the sample times do
        // where each sample is one instant ([`Thresholds::loss_by_sample_time`]), else
        // nothing judges this sub-window.
        let precise = vary.filter(|v| v + STAMPED_FLOOR < th.min_loss_fraction);
        if precise.is_none() && !(th.loss_by_sample_time && polled_together(pa, qa, pb, qb, sf)) {
            return None;
        }
        if let Some(vary) = precise {
            let tx_rate = tx as f64 / sf as f64;
            let rx_rate = rx as f64 / st as f64;
            let allowance = tx_rate * (vary + STAMPED_FLOOR);
            let lost = (tx_rate - rx_rate - allowance).max(0.0) * sf as f64;
            return Some((lost as u64, tx));
        }
    }
    let secs = (s[j].t_ms.saturating_sub(s[i].t_ms) as f64 / 1000.0).max(0.001);
    let skew = (tx as f64 / secs * th.counter_skew_s) as u64;
    Some((tx.saturating_sub(rx).saturating_sub(skew), tx))
}

/// Whether the two ends' polls at both samples were close enough for the samples' own times to
/// stand for them: within [`POLLED_TOGETHER_MS`] or a twentieth of the span. Ends polled far
/// apart on their own clocks while a rate changed (a pause arriving, a flow starting) differ by
/// that change alone: in a 1 s-apart sample pair, a pause that cut a spine's sending to 40%
/// mid-window "lost" 49% of a healthy cable.
fn polled_together(
    pa: Option<u64>,
    qa: Option<u64>,
    pb: Option<u64>,
    qb: Option<u64>,
    span: u64,
) -> bool {
    let near = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => a.abs_diff(b) <= POLLED_TOGETHER_MS.max(span / 20),
        // An end without its poll time: the sample time is all there is.
        _ => true,
    };
    near(pa, qa) && near(pb, qb)
}

fn lossy(th: &Thresholds, (lost, tx): (u64, u64)) -> bool {
    lost >= th.min_lost && lost as f64 >= th.min_loss_fraction * tx as f64
}

/// `from → to` loses on every sub-window that can judge it (at least one can); never where
/// either end's switch is frozen or an end is not in the window.
fn lossy_everywhere(d: &Deltas<'_>, th: &Thresholds, from: &Side<'_>, to: &Side<'_>) -> bool {
    let (Some(from), Some(to)) = (from.at, to.at) else {
        return false;
    };
    let s = &d.w.samples;
    let n = s.len();
    let total = s[n - 1].t_ms.saturating_sub(s[0].t_ms);
    // The whole window first: most links do not lose, and it is one of the sub-windows.
    if excess(d, th, from, to, 0, n - 1).is_some_and(|x| !lossy(th, x)) {
        return false;
    }
    let mut judged = false;
    for i in [0, 1] {
        for j in [n - 1, n.saturating_sub(2)] {
            if j <= i || s[j].t_ms.saturating_sub(s[i].t_ms) * 2 < total {
                continue;
            }
            match excess(d, th, from, to, i, j) {
                None => continue,
                Some(x) if !lossy(th, x) => return false,
                Some(_) => judged = true,
            }
        }
    }
    judged
}

/// One lossy cable: each direction that loses, (loss fraction, lost, sent, received, from, to).
struct Lossy<'a> {
    dirs: Vec<(f64, u64, u64, u64, &'a End, &'a End)>,
}

impl Lossy<'_> {
    fn worst(&self) -> (f64, &End, &End) {
        let w = self
            .dirs
            .iter()
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .expect("a lossy cable has a direction");
        (w.0, w.4, w.5)
    }
    fn name(&self) -> String {
        let (_, from, to) = self.worst();
        format!("{from}—{to}")
    }
    fn finding(&self, d: &Deltas<'_>) -> Finding {
        let (frac, from, to) = self.worst();
        let (ev, parts) = self.evidence(d);
        Finding {
            kind: Kind::LossyLink,
            target: format!("{from}—{to}"),
            confidence: 0.62 + frac.min(0.3),
            summary: format!("lossy link: {}", parts.join("; ")),
            evidence: ev,
            victims: Vec::new(),
            bytes: 0,
            folded: Vec::new(),
            action: format!(
                "Replace the cable or optic between {from} and {to} (check FEC/CRC errors); take the link out of service meanwhile (weft link down)"
            ),
        }
    }
    fn evidence(&self, d: &Deltas<'_>) -> (Vec<crate::Evidence>, Vec<String>) {
        let mut ev = Vec::new();
        let mut parts = Vec::new();
        for (f, lost, tx, rx, a, b) in &self.dirs {
            ev.push(d.ev(
                &a.node,
                Some(&a.port),
                "SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
                *tx,
            ));
            ev.push(d.ev(
                &b.node,
                Some(&b.port),
                "SAI_PORT_STAT_IF_IN_UCAST_PKTS",
                *rx,
            ));
            parts.push(format!(
                "{a} → {b}: {lost} of {tx} lost ({:.1}%)",
                f * 100.0
            ));
        }
        (ev, parts)
    }
}

/// Every switch–switch cable that loses, and how many cables carried enough to be judged (per
/// switch and in all).
fn cables<'a>(
    d: &'a Deltas<'a>,
    th: &Thresholds,
) -> (Vec<Lossy<'a>>, BTreeMap<&'a str, usize>, usize) {
    let fab = &d.w.fabric;
    let mut out = Vec::new();
    let mut loaded: FastMap<&str, usize> = FastMap::default();
    let mut total = 0;
    let mut switches = Switches { d, last: [None; 2] };
    for l in &fab.links {
        let (sa, sb) = (switches.at(0, &l.a.node), switches.at(1, &l.b.node));
        if sa.host || sb.host {
            continue;
        }
        let mut dirs = Vec::new();
        let mut carried = false;
        let (a, b) = (Side::of(d, &l.a, sa), Side::of(d, &l.b, sb));
        for (from, to) in [(&a, &b), (&b, &a)] {
            let tx = from.count(|p| p.tx_packets);
            if tx < th.min_link_packets {
                continue;
            }
            carried = true;
            let rx = to.count(|p| p.rx_packets);
            let lost = tx.saturating_sub(rx);
            if lossy_everywhere(d, th, from, to) {
                dirs.push((lost as f64 / tx as f64, lost, tx, rx, from.e, to.e));
            }
        }
        if carried {
            total += 1;
            *loaded.entry(l.a.node.as_str()).or_default() += 1;
            *loaded.entry(l.b.node.as_str()).or_default() += 1;
        }
        if !dirs.is_empty() {
            out.push(Lossy { dirs });
        }
    }
    (out, loaded.into_iter().collect(), total)
}

/// The switch most of whose loaded cables lose, for each lossy cable that has one.
fn switch_groups<'a>(
    links: &'a [Lossy<'a>],
    loaded: &BTreeMap<&'a str, usize>,
) -> BTreeMap<&'a str, Vec<usize>> {
    let mut by_switch: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, l) in links.iter().enumerate() {
        let (_, a, b) = l.worst();
        for n in [a.node.as_str(), b.node.as_str()] {
            by_switch.entry(n).or_default().push(i);
        }
    }
    by_switch.retain(|sw, v| {
        let of = loaded.get(sw).copied().unwrap_or(0);
        v.len() >= 3 && v.len() as f64 >= SWITCH_SHARE * of as f64
    });
    // A cable belongs to one group: the switch with more lossy cables.
    let mut owner: BTreeMap<usize, &str> = BTreeMap::new();
    for (sw, v) in &by_switch {
        for i in v {
            let better = owner.get(i).is_none_or(|o| by_switch[o].len() < v.len());
            if better {
                owner.insert(*i, sw);
            }
        }
    }
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, sw) in owner {
        groups.entry(sw).or_default().push(i);
    }
    groups
}

fn switch_finding(d: &Deltas<'_>, sw: &str, links: &[&Lossy<'_>], of: usize) -> Finding {
    let fracs: Vec<f64> = links.iter().map(|l| l.worst().0).collect();
    let lo = fracs.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = fracs.iter().cloned().fold(0.0, f64::max);
    let mut ev = Vec::new();
    for l in links {
        ev.extend(l.evidence(d).0);
    }
    Finding {
        kind: Kind::LossyLink,
        target: sw.to_string(),
        confidence: 0.7 + (hi / 2.0).min(0.2),
        summary: format!(
            "{sw} loses packets on {} of its {of} loaded links at once ({:.1}–{:.1}%): the switch (a linecard, its ASIC, ports flapping), not {} cables",
            links.len(),
            lo * 100.0,
            hi * 100.0,
            links.len()
        ),
        evidence: ev,
        victims: links.iter().map(|l| l.name()).collect(),
        bytes: 0,
        folded: Vec::new(),
        action: format!(
            "Check {sw}: port flaps and errors on every port, its linecards and CPU; drain it (weft link down on its links) before replacing cables"
        ),
    }
}

/// Links whose two ends disagree, grouped: per switch when most of its links lose, one
/// fabric-wide finding when many unrelated links do.
pub(crate) fn lossy_links(d: &Deltas<'_>, th: &Thresholds, out: &mut Vec<Finding>) {
    let (links, loaded, total) = cables(d, th);
    let groups = switch_groups(&links, &loaded);
    let mut grouped = vec![false; links.len()];
    for (sw, idx) in &groups {
        let members: Vec<&Lossy<'_>> = idx.iter().map(|i| &links[*i]).collect();
        for i in idx {
            grouped[*i] = true;
        }
        out.push(switch_finding(
            d,
            sw,
            &members,
            loaded.get(sw).copied().unwrap_or(0),
        ));
    }
    let rest: Vec<&Lossy<'_>> = links
        .iter()
        .zip(&grouped)
        .filter(|(_, g)| !**g)
        .map(|(l, _)| l)
        .collect();
    if rest.len() < th.max_lossy_links || (rest.len() as f64) < FABRIC_SHARE * total as f64 {
        out.extend(rest.iter().map(|l| l.finding(d)));
        return;
    }
    // Loss on many links at once with no switch in common is not many bad cables: the
    // switches drop on input (a starved software switch, a control-plane storm) or their
    // counters are stale. One finding, below the reporting threshold unless a link stands out.
    let targets: Vec<String> = rest.iter().map(|l| l.name()).collect();
    out.push(Finding {
        kind: Kind::LossyLink,
        target: "fabric".into(),
        confidence: 0.45,
        summary: format!(
            "{} links lose packets at once ({}): switches dropping on input or counters read late, not cables",
            rest.len(),
            targets.join(", ")
        ),
        evidence: rest.iter().flat_map(|l| l.evidence(d).0).collect(),
        victims: targets,
        bytes: 0,
        folded: Vec::new(),
        action: "Check the switches' CPU and input drops and whether their counters are fresh (plugin status); diagnose again".into(),
    });
}
