//! What the model needs of the compiler's output, per switch: IPv4 routes to a port, a group or
//! nowhere, and each group's members, weights and mode for the simulated traffic class.
//! (`weft simulate` builds it from `compile::Desired`; the model does not depend on the
//! compiler, which sits above it.)

use std::collections::HashMap;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use weft_topology::{HostIdx, SwitchIdx, Topology};

/// A group's multipath mode for the simulated class (the pipeline's `MULTIPATH_MODE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// ECMP and WCMP: the flow hash picks a member (weights replicate members).
    Hash,
    /// A random member per packet, by weight.
    Spray,
    /// Per packet, the less loaded of a random sample and the group's last choice.
    Adaptive,
    /// Per flowlet: kept while packets arrive within the gap, else re-picked as adaptive.
    Flowlet { gap_ns: u64 },
    /// The sender's choice: the UDP source port alone picks a member (weights replicate
    /// members).
    Entropy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Port index in the switch's `ports`.
    pub port: usize,
    pub weight: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub members: Vec<Member>,
    pub mode: Mode,
}

impl Group {
    /// Member indices in BMv2's member-handle order, each member as often as its weight. PI
    /// creates a member's first handle with the member and the rest (weight − 1 replicas) when
    /// the group is written, member by member; BMv2 orders a group by handle. So on a freshly
    /// programmed switch: every member once in order, then each member's replicas. The
    /// selector's pick is `slots[hash % slots.len()]`.
    pub fn slots(&self) -> Vec<u16> {
        let mut s: Vec<u16> = (0..self.members.len() as u16).collect();
        for (i, m) in self.members.iter().enumerate() {
            s.extend(std::iter::repeat_n(
                i as u16,
                m.weight.saturating_sub(1) as usize,
            ));
        }
        s
    }
    pub fn total_weight(&self) -> u32 {
        self.members.iter().map(|m| m.weight.max(1)).sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Port(usize),
    Group(u32),
    Drop,
}

#[derive(Debug, Clone, Default)]
pub struct SwitchFib {
    pub routes: Vec<(Ipv4Net, Next)>,
    pub groups: Vec<Group>,
}

/// Indexed like `Topology::switches`.
#[derive(Debug, Clone, Default)]
pub struct Fib {
    pub switches: Vec<SwitchFib>,
}

/// Longest-prefix decisions, memoised per (switch, destination leaf): host routes (/32) are
/// looked up per host, every other route covers whole leaf subnets.
pub struct Router<'a> {
    t: &'a Topology,
    fib: &'a Fib,
    /// Per switch: /32 routes.
    host_routes: Vec<HashMap<Ipv4Addr, Next>>,
    /// Per switch: other routes, longest prefix first.
    net_routes: Vec<Vec<(Ipv4Net, Next)>>,
    leaf_index: Vec<u32>,
    leaves: usize,
    memo: Vec<u32>,
    /// Hosts whose own /32 route exists somewhere but at their leaf, or outside their leaf's
    /// subnet: decided per host, never by their leaf's memo.
    pub irregular: Vec<bool>,
    /// What each host's own leaf does with its packets (its /32 route there), looked up once:
    /// the per-hop lookups then touch no hash map.
    at_leaf: Vec<Option<Next>>,
    groups_slots: Vec<Vec<Vec<u16>>>,
}

const UNKNOWN: u32 = u32::MAX;

fn pack(n: Next) -> u32 {
    match n {
        Next::Drop => 0,
        Next::Port(p) => 1 + 2 * p as u32,
        Next::Group(g) => 2 + 2 * g,
    }
}

fn unpack(v: u32) -> Next {
    match v {
        0 => Next::Drop,
        v if v % 2 == 1 => Next::Port(((v - 1) / 2) as usize),
        v => Next::Group((v - 2) / 2),
    }
}

fn lpm(routes: &[(Ipv4Net, Next)], a: Ipv4Addr) -> Next {
    routes
        .iter()
        .find(|(n, _)| n.contains(&a))
        .map_or(Next::Drop, |r| r.1)
}

impl<'a> Router<'a> {
    pub fn new(t: &'a Topology, fib: &'a Fib) -> Router<'a> {
        let mut leaf_index = vec![UNKNOWN; t.switches.len()];
        let mut leaves = 0;
        for h in &t.hosts {
            if leaf_index[h.switch] == UNKNOWN {
                leaf_index[h.switch] = leaves;
                leaves += 1;
            }
        }
        let by_ip: HashMap<Ipv4Addr, HostIdx> = t
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.ipv4, i))
            .collect();
        let mut irregular: Vec<bool> = t
            .hosts
            .iter()
            .map(|h| {
                t.switches[h.switch]
                    .host_subnet_v4
                    .is_none_or(|n| !n.contains(&h.ipv4))
            })
            .collect();
        let mut host_routes = Vec::with_capacity(fib.switches.len());
        let mut net_routes = Vec::with_capacity(fib.switches.len());
        for (s, sf) in fib.switches.iter().enumerate() {
            let mut hr = HashMap::new();
            let mut nr = Vec::new();
            for &(net, next) in &sf.routes {
                if net.prefix_len() == 32 {
                    hr.insert(net.addr(), next);
                    if let Some(&h) = by_ip.get(&net.addr())
                        && t.hosts[h].switch != s
                    {
                        irregular[h] = true;
                    }
                } else {
                    nr.push((net, next));
                }
            }
            nr.sort_by_key(|r| std::cmp::Reverse(r.0.prefix_len()));
            host_routes.push(hr);
            net_routes.push(nr);
        }
        let at_leaf = t
            .hosts
            .iter()
            .map(|h| {
                host_routes
                    .get(h.switch)
                    .and_then(|m: &HashMap<Ipv4Addr, Next>| m.get(&h.ipv4).copied())
            })
            .collect();
        let groups_slots = fib
            .switches
            .iter()
            .map(|s| s.groups.iter().map(Group::slots).collect())
            .collect();
        Router {
            t,
            fib,
            host_routes,
            net_routes,
            memo: vec![UNKNOWN; fib.switches.len() * leaves as usize],
            leaf_index,
            leaves: leaves as usize,
            irregular,
            at_leaf,
            groups_slots,
        }
    }

    /// What switch `s` does with a packet for host `h`.
    pub fn decide(&mut self, s: SwitchIdx, h: HostIdx) -> Next {
        let host = &self.t.hosts[h];
        if !self.irregular[h] {
            // A regular host has its /32 only at its leaf; elsewhere its leaf's subnet decides.
            if s == host.switch
                && let Some(n) = self.at_leaf[h]
            {
                return n;
            }
            if s != host.switch {
                return self.decide_leaf(s, host.switch);
            }
        }
        if let Some(n) = self.host_routes.get(s).and_then(|m| m.get(&host.ipv4)) {
            return *n;
        }
        let Some(routes) = self.net_routes.get(s) else {
            return Next::Drop;
        };
        if self.irregular[h] {
            return lpm(routes, host.ipv4);
        }
        self.decide_leaf(s, host.switch)
    }

    /// What switch `s` does with a packet for the subnet of leaf `leaf` (its regular hosts).
    pub fn decide_leaf(&mut self, s: SwitchIdx, leaf: SwitchIdx) -> Next {
        let li = self.leaf_index[leaf];
        if li == UNKNOWN || s >= self.net_routes.len() {
            return Next::Drop;
        }
        let k = s * self.leaves + li as usize;
        if self.memo[k] == UNKNOWN {
            let n = match self.t.switches[leaf].host_subnet_v4 {
                Some(net) => lpm(&self.net_routes[s], net.network()),
                None => Next::Drop,
            };
            self.memo[k] = pack(n);
        }
        unpack(self.memo[k])
    }

    pub fn group(&self, s: SwitchIdx, g: u32) -> Option<&'a Group> {
        self.fib
            .switches
            .get(s)
            .and_then(|x| x.groups.get(g as usize))
    }

    pub fn slots(&self, s: SwitchIdx, g: u32) -> &[u16] {
        &self.groups_slots[s][g as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_list_every_member_once_then_the_replicas_of_each_in_order() {
        let g = Group {
            members: vec![
                Member { port: 4, weight: 3 },
                Member { port: 5, weight: 1 },
                Member { port: 6, weight: 2 },
            ],
            mode: Mode::Hash,
        };
        assert_eq!(g.slots(), [0, 1, 2, 0, 0, 2]);
        assert_eq!(g.total_weight(), 6);
    }

    #[test]
    fn packed_decisions_unpack_to_themselves() {
        for n in [
            Next::Drop,
            Next::Port(0),
            Next::Port(77),
            Next::Group(0),
            Next::Group(4095),
        ] {
            assert_eq!(unpack(pack(n)), n);
        }
    }
}
