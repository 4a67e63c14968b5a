//! An independent checker of compiled forwarding state: it follows the compiled tables (LPM
//! routes, nexthops, group members) hop by hop, the way packets would, and compares with
//! distances it computes itself on the live topology. It shares no routing code with the
//! compiler.
//!
//! For every (source host, destination host) it checks:
//! - no forwarding loop and no blackhole on any branch of any group;
//! - the destination is reached exactly when the live fabric connects the two hosts (same plane);
//! - every branch is a shortest valley-free (up then down) path;
//! - a group toward a neighbour uses every live link to it (parallel links included);
//! - each group's weights are proportional to the capacity reachable through each member
//!   (when the fabric uses capacity weights), within integer rounding. The capacity through a
//!   neighbour is `min(Σ speeds of the live links to it, what it carries on)`, shared among
//!   those links by speed: k parallel links do not make a neighbour count k times.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;

use weft_topology::{HostIdx, LinkIdx, Peer, RoutingMode, SwitchIdx, Topology};

use super::{Desired, LinkState, Target, lookup};

#[derive(Debug, Default)]
pub struct Report {
    pub pairs_checked: usize,
    pub problems: Vec<String>,
}

/// Valley-free shortest distances from `src` (in switch hops), by BFS on (switch, going-down).
fn valley_free_dist(t: &Topology, up: &dyn Fn(LinkIdx) -> bool, src: SwitchIdx) -> Vec<u32> {
    let n = t.switches.len();
    let mut dist = vec![[u32::MAX; 2]; n];
    let mut q = VecDeque::new();
    dist[src][0] = 0;
    q.push_back((src, 0usize));
    while let Some((s, phase)) = q.pop_front() {
        let d = dist[s][phase];
        for p in &t.switches[s].ports {
            let Peer::Switch { link } = p.peer else {
                continue;
            };
            if !up(link) {
                continue;
            }
            let o = t.links[link].other(s).switch;
            let (ts, to) = (t.switches[s].tier(), t.switches[o].tier());
            let next_phase = if to > ts && phase == 0 {
                0
            } else if to < ts {
                1
            } else {
                continue;
            };
            if dist[o][next_phase] == u32::MAX {
                dist[o][next_phase] = d + 1;
                q.push_back((o, next_phase));
            }
        }
    }
    dist.into_iter().map(|[a, b]| a.min(b)).collect()
}

struct Walker<'a> {
    t: &'a Topology,
    live: &'a dyn Fn(LinkIdx) -> bool,
    d: &'a Desired,
    dst: HostIdx,
    memo: HashMap<SwitchIdx, Result<(u32, u32, u64), String>>,
    in_progress: Vec<bool>,
    capacity_weights: bool,
    problems: Vec<String>,
}

impl Walker<'_> {
    /// (shortest, longest) hops from switch `s` to the destination host's leaf, and the capacity
    /// the compiled tables offer from `s` toward it.
    fn walk(&mut self, s: SwitchIdx) -> Result<(u32, u32, u64), String> {
        if let Some(r) = self.memo.get(&s) {
            return r.clone();
        }
        if self.in_progress[s] {
            return Err(format!(
                "forwarding loop through {}",
                self.t.switches[s].name
            ));
        }
        self.in_progress[s] = true;
        let r = self.step(s);
        self.in_progress[s] = false;
        self.memo.insert(s, r.clone());
        r
    }

    fn step(&mut self, s: SwitchIdx) -> Result<(u32, u32, u64), String> {
        let t = self.t;
        let h = &t.hosts[self.dst];
        let sw = &self.d.switches[s];
        let route = lookup(&sw.routes, IpAddr::V4(h.ipv4))
            .ok_or_else(|| format!("{}: no route to {} ({})", sw.name, h.name, h.ipv4))?;
        let members: Vec<(u32, u32)> = match route.target {
            Target::Drop => {
                return Err(format!(
                    "{}: route {} drops traffic to {}",
                    sw.name, route.prefix, h.name
                ));
            }
            Target::Nexthop(id) => {
                let nh = sw.nexthops.get(&id).ok_or_else(|| {
                    format!(
                        "{}: route {} names missing nexthop {id}",
                        sw.name, route.prefix
                    )
                })?;
                vec![(nh.port_id, 1)]
            }
            Target::Group(id) => {
                let g = sw.groups.get(&id).ok_or_else(|| {
                    format!(
                        "{}: route {} names missing group {id}",
                        sw.name, route.prefix
                    )
                })?;
                if g.members.is_empty() {
                    return Err(format!("{}: group {id} is empty", sw.name));
                }
                g.members.iter().map(|m| (m.port_id, m.weight)).collect()
            }
        };
        let mut lo = u32::MAX;
        let mut hi = 0;
        // (capacity share, weight) per member; members toward switches grouped by neighbour.
        let mut caps: Vec<(f64, u32)> = Vec::new();
        let mut cap = 0u64;
        let mut by_nb: BTreeMap<SwitchIdx, Vec<(LinkIdx, u32)>> = BTreeMap::new();
        let sw_t = &t.switches[s];
        for (port_id, w) in &members {
            let p = sw_t
                .ports
                .iter()
                .find(|p| p.id == *port_id)
                .ok_or_else(|| format!("{}: no port with id {port_id}", sw.name))?;
            match p.peer {
                Peer::Host { host } if host == self.dst => {
                    lo = 0;
                    caps.push((f64::MAX, *w));
                    cap = u64::MAX;
                }
                Peer::Host { host } => {
                    return Err(format!(
                        "{}: traffic to {} sent to host {}",
                        sw.name, h.name, t.hosts[host].name
                    ));
                }
                Peer::None => {
                    return Err(format!(
                        "{}: traffic to {} sent out unconnected {}",
                        sw.name, h.name, p.name
                    ));
                }
                Peer::Switch { link } => {
                    let next = t.links[link].other(s).switch;
                    by_nb.entry(next).or_default().push((link, *w));
                }
            }
        }
        for (next, used) in by_nb {
            let live: Vec<LinkIdx> = sw_t
                .ports
                .iter()
                .filter_map(|p| match p.peer {
                    Peer::Switch { link }
                        if (self.live)(link) && t.links[link].other(s).switch == next =>
                    {
                        Some(link)
                    }
                    _ => None,
                })
                .collect();
            if used.len() != live.len() || !used.iter().all(|(l, _)| live.contains(l)) {
                self.problems.push(format!(
                    "{}: toward {} uses {} of the {} live links to {}",
                    sw.name,
                    h.name,
                    used.len(),
                    live.len(),
                    t.switches[next].name
                ));
            }
            let total: u64 = live.iter().map(|&l| t.links[l].speed.bits_per_sec()).sum();
            let (a, b, c) = self.walk(next)?;
            lo = lo.min(a + 1);
            hi = hi.max(b + 1);
            let via = total.min(c);
            cap = cap.saturating_add(via);
            for (l, w) in used {
                let share =
                    via as f64 * t.links[l].speed.bits_per_sec() as f64 / total.max(1) as f64;
                caps.push((share, w));
            }
        }
        if let Target::Group(id) = route.target
            && self.capacity_weights
        {
            let wsum: u64 = caps.iter().map(|c| u64::from(c.1)).sum();
            let csum: f64 = caps.iter().map(|c| c.0).sum();
            // Weights are exact unless the exact ratio needs a larger sum than a group holds;
            // only then may each be off by the rounding of one unit.
            let scaled = wsum + caps.len() as u64 > u64::from(super::MAX_GROUP_WEIGHT);
            let tolerance = if scaled {
                1.0 / wsum as f64 + 1e-9
            } else {
                1e-6
            };
            for (c, w) in &caps {
                let want = *c / csum;
                let got = f64::from(*w) / wsum as f64;
                if (want - got).abs() > tolerance {
                    self.problems.push(format!(
                        "{}: group {id} toward {}: weight share {got:.3} but capacity share {want:.3}",
                        sw.name, h.name
                    ));
                    break;
                }
            }
        }
        Ok((lo, hi.max(lo), cap))
    }
}

/// One hop of a path: a switch, the port a packet came in on and the one it leaves by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct PathHop {
    pub switch: SwitchIdx,
    /// Port ids (`Switch::ports[..].id`).
    pub ingress: u32,
    pub egress: u32,
}

/// Every path the compiled tables allow from host `src` to host `dst`, following routes,
/// nexthops and every member of every group (as [`check`] walks them), at most `limit`.
/// `Err` names the first switch where the walk breaks (no route, drop, loop).
pub fn allowed_paths(
    t: &Topology,
    d: &Desired,
    src: HostIdx,
    dst: HostIdx,
    limit: usize,
) -> Result<Vec<Vec<PathHop>>, String> {
    let h = &t.hosts[src];
    let start = (h.switch, t.switches[h.switch].ports[h.port].id);
    let mut out = Vec::new();
    let mut path = Vec::new();
    walk_paths(t, d, dst, start, &mut path, &mut out, limit)?;
    Ok(out)
}

fn walk_paths(
    t: &Topology,
    d: &Desired,
    dst: HostIdx,
    (s, ingress): (SwitchIdx, u32),
    path: &mut Vec<PathHop>,
    out: &mut Vec<Vec<PathHop>>,
    limit: usize,
) -> Result<(), String> {
    let sw = &d.switches[s];
    if path.len() > t.switches.len() || path.iter().any(|p| p.switch == s) {
        return Err(format!("forwarding loop through {}", sw.name));
    }
    let h = &t.hosts[dst];
    let route = lookup(&sw.routes, IpAddr::V4(h.ipv4))
        .ok_or_else(|| format!("{}: no route to {} ({})", sw.name, h.name, h.ipv4))?;
    let ports: Vec<u32> = match route.target {
        Target::Drop => return Err(format!("{}: route {} drops", sw.name, route.prefix)),
        Target::Nexthop(id) => vec![
            sw.nexthops
                .get(&id)
                .ok_or_else(|| format!("{}: missing nexthop {id}", sw.name))?
                .port_id,
        ],
        Target::Group(id) => sw
            .groups
            .get(&id)
            .ok_or_else(|| format!("{}: missing group {id}", sw.name))?
            .members
            .iter()
            .map(|m| m.port_id)
            .collect(),
    };
    let mut seen = Vec::new();
    for egress in ports {
        if seen.contains(&egress) || out.len() >= limit {
            continue;
        }
        seen.push(egress);
        let Some(p) = t.switches[s].ports.iter().find(|p| p.id == egress) else {
            return Err(format!("{}: no port with id {egress}", sw.name));
        };
        path.push(PathHop {
            switch: s,
            ingress,
            egress,
        });
        match p.peer {
            Peer::Host { host } if host == dst => out.push(path.clone()),
            Peer::Switch { link } => {
                let o = t.links[link].other(s);
                let next = (o.switch, t.switches[o.switch].ports[o.port].id);
                walk_paths(t, d, dst, next, path, out, limit)?;
            }
            _ => {
                path.pop();
                return Err(format!(
                    "{}: traffic to {} leaves by {} (not toward it)",
                    sw.name, h.name, p.name
                ));
            }
        }
        path.pop();
    }
    Ok(())
}

/// Checks all host pairs (or every `stride`-th destination, for large fabrics).
pub fn check(t: &Topology, links: &LinkState, d: &Desired, stride: usize) -> Report {
    let up = |l: LinkIdx| t.link_admin_up(l) && !links.is_down(l);
    let capacity_weights = !t.qos.classes.iter().all(|c| c.routing == RoutingMode::Ecmp);
    let mut report = Report::default();
    let mut dist_cache: HashMap<SwitchIdx, Vec<u32>> = HashMap::new();
    for dst in (0..t.hosts.len()).step_by(stride.max(1)) {
        let mut w = Walker {
            t,
            live: &up,
            d,
            dst,
            memo: HashMap::new(),
            in_progress: vec![false; t.switches.len()],
            capacity_weights,
            problems: Vec::new(),
        };
        for (src, hs) in t.hosts.iter().enumerate() {
            if src == dst {
                continue;
            }
            let hd = &t.hosts[dst];
            if hs.plane != hd.plane {
                continue;
            }
            report.pairs_checked += 1;
            let dist = dist_cache
                .entry(hs.switch)
                .or_insert_with(|| valley_free_dist(t, &up, hs.switch));
            let want = dist[hd.switch];
            match w.walk(hs.switch) {
                Ok((lo, hi, _)) if want == u32::MAX => report.problems.push(format!(
                    "{} → {}: delivered (paths of {lo}..{hi} hops) though the live fabric does not connect them",
                    hs.name, hd.name
                )),
                Ok((lo, hi, _)) if lo != want || hi != want => report.problems.push(format!(
                    "{} → {}: paths of {lo}..{hi} switch hops, shortest valley-free is {want}",
                    hs.name, hd.name
                )),
                Ok(_) => {}
                Err(e) if want == u32::MAX && !e.contains("loop") => {}
                Err(e) => report.problems.push(format!("{} → {}: {e}", hs.name, hd.name)),
            }
        }
        report.problems.append(&mut w.problems);
    }
    report.problems.sort();
    report.problems.dedup();
    report
}
