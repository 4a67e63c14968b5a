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
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use weft_topology::{HostIdx, LinkIdx, Peer, RoutingMode, SwitchIdx, Topology};

use super::{Desired, LinkState, Route, SwitchDesired, Target, lookup};

/// Where a walk of the compiled tables breaks: the first switch whose entries lose or misdirect
/// traffic to the destination host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForwardingError {
    #[error("forwarding loop through {switch}")]
    Loop { switch: String },
    #[error("{switch}: no route to {host} ({ip})")]
    NoRoute {
        switch: String,
        host: String,
        ip: Ipv4Addr,
    },
    #[error("{switch}: route {prefix} drops traffic to {host}")]
    DropsTo {
        switch: String,
        prefix: IpNet,
        host: String,
    },
    #[error("{switch}: route {prefix} drops")]
    Drops { switch: String, prefix: IpNet },
    /// The route names a nexthop or group the switch does not hold.
    #[error("{switch}: route {prefix} names missing {what} {id}")]
    Dangling {
        switch: String,
        prefix: IpNet,
        what: &'static str,
        id: u16,
    },
    #[error("{switch}: missing {what} {id}")]
    Missing {
        switch: String,
        what: &'static str,
        id: u16,
    },
    #[error("{switch}: group {id} is empty")]
    EmptyGroup { switch: String, id: u16 },
    #[error("{switch}: no port with id {port}")]
    NoPort { switch: String, port: u32 },
    #[error("{switch}: traffic to {host} sent to host {other}")]
    ToOtherHost {
        switch: String,
        host: String,
        other: String,
    },
    #[error("{switch}: traffic to {host} sent out unconnected {port}")]
    Unconnected {
        switch: String,
        host: String,
        port: String,
    },
    #[error("{switch}: traffic to {host} leaves by {port} (not toward it)")]
    WrongWay {
        switch: String,
        host: String,
        port: String,
    },
}

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
    memo: HashMap<SwitchIdx, Result<(u32, u32, u64), ForwardingError>>,
    in_progress: Vec<bool>,
    capacity_weights: bool,
    problems: Vec<String>,
}

impl Walker<'_> {
    /// (shortest, longest) hops from switch `s` to the destination host's leaf, and the capacity
    /// the compiled tables offer from `s` toward it.
    fn walk(&mut self, s: SwitchIdx) -> Result<(u32, u32, u64), ForwardingError> {
        if let Some(r) = self.memo.get(&s) {
            return r.clone();
        }
        if self.in_progress[s] {
            return Err(ForwardingError::Loop {
                switch: self.t.switches[s].name.clone(),
            });
        }
        self.in_progress[s] = true;
        let r = self.step(s);
        self.in_progress[s] = false;
        self.memo.insert(s, r.clone());
        r
    }

    fn step(&mut self, s: SwitchIdx) -> Result<(u32, u32, u64), ForwardingError> {
        let t = self.t;
        let h = &t.hosts[self.dst];
        let sw = &self.d.switches[s];
        let route = route_to(sw, &h.name, h.ipv4)?;
        let members = self.members(sw, route)?;
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
                .ok_or_else(|| ForwardingError::NoPort {
                    switch: sw.name.clone(),
                    port: *port_id,
                })?;
            match p.peer {
                Peer::Host { host } if host == self.dst => {
                    lo = 0;
                    caps.push((f64::MAX, *w));
                    cap = u64::MAX;
                }
                Peer::Host { host } => {
                    return Err(ForwardingError::ToOtherHost {
                        switch: sw.name.clone(),
                        host: h.name.clone(),
                        other: t.hosts[host].name.clone(),
                    });
                }
                Peer::None => {
                    return Err(ForwardingError::Unconnected {
                        switch: sw.name.clone(),
                        host: h.name.clone(),
                        port: p.name.clone(),
                    });
                }
                Peer::Switch { link } => {
                    let next = t.links[link].other(s).switch;
                    by_nb.entry(next).or_default().push((link, *w));
                }
            }
        }
        for (next, used) in by_nb {
            let (a, b, via) = self.through(s, next, &used, &mut caps)?;
            lo = lo.min(a + 1);
            hi = hi.max(b + 1);
            cap = cap.saturating_add(via);
        }
        if let Target::Group(id) = route.target
            && self.capacity_weights
        {
            self.check_weights(sw, id, &caps);
        }
        Ok((lo, hi.max(lo), cap))
    }

    /// The (port id, weight) members of `route` at switch `sw`.
    fn members(
        &self,
        sw: &SwitchDesired,
        route: &Route,
    ) -> Result<Vec<(u32, u32)>, ForwardingError> {
        let h = &self.t.hosts[self.dst];
        let dangling = |what, id| ForwardingError::Dangling {
            switch: sw.name.clone(),
            prefix: route.prefix,
            what,
            id,
        };
        match route.target {
            Target::Drop => Err(ForwardingError::DropsTo {
                switch: sw.name.clone(),
                prefix: route.prefix,
                host: h.name.clone(),
            }),
            Target::Nexthop(id) => {
                let nh = sw
                    .nexthops
                    .get(&id)
                    .ok_or_else(|| dangling("nexthop", id))?;
                Ok(vec![(nh.port_id, 1)])
            }
            Target::Group(id) => {
                let g = sw.groups.get(&id).ok_or_else(|| dangling("group", id))?;
                if g.members.is_empty() {
                    return Err(ForwardingError::EmptyGroup {
                        switch: sw.name.clone(),
                        id,
                    });
                }
                Ok(g.members.iter().map(|m| (m.port_id, m.weight)).collect())
            }
        }
    }

    /// Follows the members of switch `s` toward neighbour `next` (over links `used`, with
    /// their weights): the neighbour's (shortest, longest) hops and the capacity through it.
    /// Each member's share of that capacity goes to `caps`.
    fn through(
        &mut self,
        s: SwitchIdx,
        next: SwitchIdx,
        used: &[(LinkIdx, u32)],
        caps: &mut Vec<(f64, u32)>,
    ) -> Result<(u32, u32, u64), ForwardingError> {
        let t = self.t;
        let sw_t = &t.switches[s];
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
                self.d.switches[s].name,
                t.hosts[self.dst].name,
                used.len(),
                live.len(),
                t.switches[next].name
            ));
        }
        let total: u64 = live.iter().map(|&l| t.links[l].speed.bits_per_sec()).sum();
        let (a, b, c) = self.walk(next)?;
        let via = total.min(c);
        for &(l, w) in used {
            let share = via as f64 * t.links[l].speed.bits_per_sec() as f64 / total.max(1) as f64;
            caps.push((share, w));
        }
        Ok((a, b, via))
    }

    /// Group `id`'s weights against the capacity each member leads to.
    fn check_weights(&mut self, sw: &SwitchDesired, id: u16, caps: &[(f64, u32)]) {
        let h = &self.t.hosts[self.dst];
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
        for (c, w) in caps {
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
}

/// The route `sw` takes toward `host` (at `ip`).
fn route_to<'d>(
    sw: &'d SwitchDesired,
    host: &str,
    ip: Ipv4Addr,
) -> Result<&'d Route, ForwardingError> {
    lookup(&sw.routes, IpAddr::V4(ip)).ok_or_else(|| ForwardingError::NoRoute {
        switch: sw.name.clone(),
        host: host.to_string(),
        ip,
    })
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
) -> Result<Vec<Vec<PathHop>>, ForwardingError> {
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
) -> Result<(), ForwardingError> {
    let sw = &d.switches[s];
    if path.len() > t.switches.len() || path.iter().any(|p| p.switch == s) {
        return Err(ForwardingError::Loop {
            switch: sw.name.clone(),
        });
    }
    let h = &t.hosts[dst];
    let route = route_to(sw, &h.name, h.ipv4)?;
    let missing = |what, id| ForwardingError::Missing {
        switch: sw.name.clone(),
        what,
        id,
    };
    let ports: Vec<u32> = match route.target {
        Target::Drop => {
            return Err(ForwardingError::Drops {
                switch: sw.name.clone(),
                prefix: route.prefix,
            });
        }
        Target::Nexthop(id) => vec![
            sw.nexthops
                .get(&id)
                .ok_or_else(|| missing("nexthop", id))?
                .port_id,
        ],
        Target::Group(id) => sw
            .groups
            .get(&id)
            .ok_or_else(|| missing("group", id))?
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
            return Err(ForwardingError::NoPort {
                switch: sw.name.clone(),
                port: egress,
            });
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
                return Err(ForwardingError::WrongWay {
                    switch: sw.name.clone(),
                    host: h.name.clone(),
                    port: p.name.clone(),
                });
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
                Err(e) if want == u32::MAX && !matches!(e, ForwardingError::Loop { .. }) => {}
                Err(e) => report.problems.push(format!("{} → {}: {e}", hs.name, hd.name)),
            }
        }
        report.problems.append(&mut w.problems);
    }
    report.problems.sort();
    report.problems.dedup();
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile;

    fn small() -> Topology {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        );
        weft_topology::load_file(p).unwrap_or_else(|e| panic!("{p}: {e:?}"))
    }

    /// Two hosts on different leaves, and the first of them's leaf.
    fn remote_pair(t: &Topology) -> (HostIdx, HostIdx) {
        let dst = (1..t.hosts.len())
            .find(|&h| t.hosts[h].switch != t.hosts[0].switch)
            .expect("hosts on two leaves");
        (0, dst)
    }

    #[test]
    fn a_walk_that_meets_a_dropping_route_names_the_switch_and_prefix() {
        let t = small();
        let mut d = compile(&t, &LinkState::all_up(&t));
        let (src, dst) = remote_pair(&t);
        let leaf = t.hosts[src].switch;
        let ip = IpAddr::V4(t.hosts[dst].ipv4);
        let prefix = {
            let sw = &mut d.switches[leaf];
            let at = sw
                .routes
                .iter()
                .position(|r| r.prefix.contains(&ip) && r.prefix.prefix_len() < 32)
                .expect("a route toward the remote host");
            sw.routes[at].target = Target::Drop;
            sw.routes[at].prefix
        };
        let e = allowed_paths(&t, &d, src, dst, 8).expect_err("dropped");
        let name = t.switches[leaf].name.clone();
        assert_eq!(
            e,
            ForwardingError::Drops {
                switch: name.clone(),
                prefix
            }
        );
        assert_eq!(e.to_string(), format!("{name}: route {prefix} drops"));
        let problems = check(&t, &LinkState::all_up(&t), &d, 1).problems;
        let want = format!(
            "{} → {}: {name}: route {prefix} drops traffic to {}",
            t.hosts[src].name, t.hosts[dst].name, t.hosts[dst].name
        );
        assert!(problems.contains(&want), "{problems:#?}");
    }

    #[test]
    fn a_route_to_a_group_the_switch_does_not_hold_is_dangling() {
        let t = small();
        let mut d = compile(&t, &LinkState::all_up(&t));
        let (src, dst) = remote_pair(&t);
        let leaf = t.hosts[src].switch;
        d.switches[leaf].groups.clear();
        d.switches[leaf].nexthops.clear();
        let e = allowed_paths(&t, &d, src, dst, 8).expect_err("dangling");
        assert!(matches!(e, ForwardingError::Missing { .. }), "{e:?}: {e}");
        assert!(e.to_string().contains(": missing "), "{e}");
        let problems = check(&t, &LinkState::all_up(&t), &d, 1).problems;
        assert!(
            problems.iter().any(|p| p.contains(" names missing ")),
            "{problems:#?}"
        );
    }
}
