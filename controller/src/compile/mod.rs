//! The compiler: a pure function from (topology, links that are down) to the desired state of
//! every switch. No I/O: everything here is deterministic and testable with golden files.
//!
//! ```text
//!   Topology + down links
//!     │ routing::Graph (live links by tier)
//!     │ per destination leaf: routing::route_to → next hops + capacities per switch
//!     ▼
//!   per switch: next-hop sets (interned) → groups (shared by identical member sets)
//!               leaf-subnet routes, merged into covering prefixes where next hops agree,
//!               host routes at the leaf, port router MACs
//! ```
//! QoS (CONFIG_DB rows) is compiled per switch on demand by [`qos::compile_switch`]: at 5,000
//! switches the rows of all switches at once would take gigabytes for no use.

pub mod check;
pub mod qos;
pub mod routing;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::Serialize;
use weft_topology::{LinkIdx, MacAddr, Peer, RoutingMode, SwitchIdx, Topology};

use routing::{Graph, Hop, Scratch};

/// Largest sum of member weights in one group (the pipeline's `WCMP_MAX_GROUP_SIZE`).
pub const MAX_GROUP_WEIGHT: u32 = 256;
/// Group ids live in 1..4096 (the pipeline's per-group register has 4096 slots).
pub const GROUP_ID_SPACE: u16 = 4096;

/// Which links are down (by index into `Topology::links`).
#[derive(Debug, Clone, Default)]
pub struct LinkState {
    down: Vec<bool>,
}

impl LinkState {
    pub fn all_up(t: &Topology) -> Self {
        LinkState {
            down: vec![false; t.links.len()],
        }
    }
    pub fn set_down(&mut self, l: LinkIdx, down: bool) {
        if let Some(x) = self.down.get_mut(l) {
            *x = down;
        }
    }
    pub fn is_down(&self, l: LinkIdx) -> bool {
        self.down.get(l).copied().unwrap_or(false)
    }
    pub fn down_links(&self) -> impl Iterator<Item = LinkIdx> + '_ {
        self.down
            .iter()
            .enumerate()
            .filter(|(_, d)| **d)
            .map(|(i, _)| i)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortConfig {
    pub port_id: u32,
    pub port: String,
    pub router_mac: MacAddr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Nexthop {
    pub id: u16,
    pub port_id: u32,
    pub port: String,
    pub dst_mac: MacAddr,
    pub src_mac: MacAddr,
    /// The switch or host behind the port.
    pub neighbour: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Member {
    pub nexthop_id: u16,
    pub port_id: u32,
    pub port: String,
    pub neighbour: String,
    pub weight: u32,
}

/// The multipath mode a group uses for one traffic class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassMode {
    pub class: String,
    pub traffic_class: u8,
    pub mode: RoutingMode,
    pub flowlet_gap_us: u32,
    /// The class asked for a per-packet mode, but the destination's NICs cannot take reordering.
    pub fallback_from: Option<RoutingMode>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    pub id: u16,
    pub members: Vec<Member>,
    pub modes: Vec<ClassMode>,
    /// Changes whenever the member set does, so the pipeline forgets flowlets and last choices.
    pub epoch: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "id", rename_all = "lowercase")]
pub enum Target {
    Nexthop(u16),
    Group(u16),
    Drop,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    pub prefix: IpNet,
    pub target: Target,
}

/// Everything one switch should hold.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchDesired {
    pub name: String,
    pub device_id: u64,
    pub ports: Vec<PortConfig>,
    pub nexthops: BTreeMap<u16, Nexthop>,
    pub groups: BTreeMap<u16, Group>,
    pub routes: Vec<Route>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Desired {
    pub switches: Vec<SwitchDesired>,
    /// Things the operator should know (fallbacks, unreachable destinations).
    pub notes: Vec<String>,
    /// Links assumed down, as `A:port ↔ B:port`.
    pub down_links: Vec<String>,
}

/// Per-switch interning of next-hop sets: (nexthop id, weight) lists → small ids.
#[derive(Default)]
struct SetTable {
    by_hash: HashMap<u64, u32>,
    sets: Vec<Vec<(u16, u32)>>,
}

impl SetTable {
    fn intern(&mut self, members: &[(u16, u32)]) -> u32 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for (n, w) in members {
            h = (h ^ (u64::from(*n) << 32 | u64::from(*w))).wrapping_mul(0x0100_0000_01b3);
        }
        loop {
            match self.by_hash.get(&h) {
                Some(&id) if self.sets[id as usize] == members => return id,
                Some(_) => h = h.wrapping_add(1),
                None => {
                    let id = self.sets.len() as u32;
                    self.sets.push(members.to_vec());
                    self.by_hash.insert(h, id);
                    return id;
                }
            }
        }
    }
}

const NO_ROUTE: u32 = u32::MAX;

/// Reused buffers for turning hops into an interned (nexthop id, weight) set.
#[derive(Default)]
struct InternBuf {
    members: Vec<(u16, u32)>,
    caps: Vec<u64>,
}

impl InternBuf {
    fn intern(
        &mut self,
        t: &Topology,
        s: SwitchIdx,
        hops: &[Hop],
        equal: bool,
        table: &mut SetTable,
    ) -> u32 {
        self.caps.clear();
        self.caps.extend(hops.iter().map(|h| h.capacity));
        self.members.clear();
        let w = if equal {
            vec![1; hops.len()]
        } else {
            routing::weights(&self.caps, MAX_GROUP_WEIGHT)
        };
        for (h, w) in hops.iter().zip(w) {
            let e = t.links[h.link as usize].end_at(s);
            self.members
                .push((t.switches[s].ports[e.port].id as u16, w));
        }
        self.members.sort_unstable();
        table.intern(&self.members)
    }
}

/// Compiles the whole fabric.
pub fn compile(t: &Topology, links: &LinkState) -> Desired {
    let link_up = |l: LinkIdx| t.link_admin_up(l) && !links.is_down(l);
    let g = Graph::build(t, &link_up);
    let n = t.switches.len();
    let dests: Vec<SwitchIdx> = (0..n)
        .filter(|&s| {
            t.switches[s]
                .ports
                .iter()
                .any(|p| matches!(p.peer, Peer::Host { .. }))
        })
        .collect();
    let equal_weights = t.qos.classes.iter().all(|c| c.routing == RoutingMode::Ecmp);

    // sets[s]: interned next-hop sets of switch s; route_set[s][d]: set toward dests[d].
    let mut tables: Vec<SetTable> = (0..n).map(|_| SetTable::default()).collect();
    let mut route_set: Vec<Vec<u32>> = vec![vec![NO_ROUTE; dests.len()]; n];
    let mut sc = Scratch::new(n);
    let mut buf = InternBuf::default();

    // Leaves with the same live uplinks (same parents, same speeds, same multiplicity) see the
    // same fabric above them: every switch but their parents and themselves routes to all of
    // them alike. So route once per class and patch the few switches that differ.
    let mut classes: Vec<Vec<usize>> = Vec::new();
    let mut class_of: HashMap<Vec<(u32, u64)>, usize> = HashMap::new();
    for (d, &dest) in dests.iter().enumerate() {
        let mut sig: Vec<(u32, u64)> = g.up[dest].iter().map(|&(p, _, c)| (p, c)).collect();
        sig.sort_unstable();
        let c = *class_of.entry(sig).or_insert_with(|| {
            classes.push(Vec::new());
            classes.len() - 1
        });
        classes[c].push(d);
    }
    for members in &classes {
        let rep = members[0];
        routing::route_to(&g, dests[rep], &mut sc, |s, hops: &[Hop]| {
            if !hops.is_empty() {
                route_set[s][rep] = buf.intern(t, s, hops, equal_weights, &mut tables[s]);
            }
        });
        for &d in &members[1..] {
            let dest = dests[d];
            for row in route_set.iter_mut() {
                row[d] = row[rep];
            }
            // Parents: straight down their links to this leaf.
            let mut parent_cap: HashMap<u32, u64> = HashMap::new();
            for &(p, _, _) in &g.up[dest] {
                if parent_cap.contains_key(&p) {
                    continue;
                }
                let hops: Vec<Hop> = g.down[p as usize]
                    .iter()
                    .filter(|(m, _, _)| *m as usize == dest)
                    .map(|&(m, link, c)| Hop {
                        link,
                        neighbour: m,
                        capacity: c,
                    })
                    .collect();
                parent_cap.insert(p, hops.iter().map(|h| h.capacity).sum());
                route_set[p as usize][d] =
                    buf.intern(t, p as usize, &hops, equal_weights, &mut tables[p as usize]);
            }
            // Siblings of the class (the representative included): up to the shared parents.
            for &m in members {
                let sib = dests[m];
                if sib == dest {
                    continue;
                }
                let hops: Vec<Hop> = g.up[sib]
                    .iter()
                    .filter_map(|&(p, link, c)| {
                        let pc = *parent_cap.get(&p)?;
                        (pc > 0).then_some(Hop {
                            link,
                            neighbour: p,
                            capacity: c.min(pc),
                        })
                    })
                    .collect();
                route_set[sib][d] = if hops.is_empty() {
                    NO_ROUTE
                } else {
                    buf.intern(t, sib, &hops, equal_weights, &mut tables[sib])
                };
            }
        }
    }

    let per_packet = per_packet_in_use(t);
    let infos: Vec<DestInfo> = dests
        .iter()
        .map(|&d| DestInfo::new(t, d, per_packet))
        .collect();
    let mut notes = Vec::new();
    let mut switches = Vec::with_capacity(n);
    for s in 0..n {
        switches.push(compile_switch(
            t,
            s,
            &infos,
            &route_set[s],
            &tables[s],
            &mut notes,
        ));
    }
    Desired {
        switches,
        notes,
        down_links: links
            .down_links()
            .map(|l| {
                format!(
                    "{} ↔ {}",
                    t.end_name(t.links[l].a),
                    t.end_name(t.links[l].b)
                )
            })
            .collect(),
    }
}

fn per_packet_in_use(t: &Topology) -> bool {
    t.qos.classes.iter().any(|c| c.routing.per_packet())
}

/// What every switch needs to know about one destination leaf.
struct DestInfo {
    switch: SwitchIdx,
    /// Per-packet modes are allowed toward the leaf's prefix (all its NICs take reordering).
    all_ok: bool,
    /// Hosts that need their own route: outside the leaf's prefix, or unlike the prefix in
    /// whether they take reordering. (prefix, per-packet allowed)
    host_routes: Vec<(IpNet, bool)>,
}

impl DestInfo {
    fn new(t: &Topology, dest: SwitchIdx, per_packet: bool) -> Self {
        let leaf = &t.switches[dest];
        let hosts: Vec<&weft_topology::Host> = leaf
            .ports
            .iter()
            .filter_map(|p| match p.peer {
                Peer::Host { host } => Some(&t.hosts[host]),
                _ => None,
            })
            .collect();
        let all_ok = !per_packet || hosts.iter().all(|h| h.ooo_tolerant);
        let mut host_routes = Vec::new();
        for h in &hosts {
            let ok = !per_packet || h.ooo_tolerant;
            let outside = leaf.host_subnet_v4.is_none_or(|n| !n.contains(&h.ipv4));
            if outside || ok != all_ok {
                host_routes.push((IpNet::V4(Ipv4Net::from(h.ipv4)), ok));
                if let Some(a) = h.ipv6 {
                    host_routes.push((IpNet::V6(Ipv6Net::from(a)), ok));
                }
            }
        }
        DestInfo {
            switch: dest,
            all_ok,
            host_routes,
        }
    }
}

fn compile_switch(
    t: &Topology,
    s: SwitchIdx,
    dests: &[DestInfo],
    route_set: &[u32],
    sets: &SetTable,
    notes: &mut Vec<String>,
) -> SwitchDesired {
    let sw = &t.switches[s];
    let mut ports = Vec::new();
    let mut nexthops = BTreeMap::new();
    for p in &sw.ports {
        let (neighbour, mac) = match p.peer {
            Peer::None => continue,
            Peer::Host { host } => (t.hosts[host].name.clone(), t.hosts[host].mac),
            Peer::Switch { link } => {
                let o = &t.switches[t.links[link].other(s).switch];
                (o.name.clone(), o.router_mac)
            }
        };
        ports.push(PortConfig {
            port_id: p.id,
            port: p.name.clone(),
            router_mac: sw.router_mac,
        });
        nexthops.insert(
            p.id as u16,
            Nexthop {
                id: p.id as u16,
                port_id: p.id,
                port: p.name.clone(),
                dst_mac: mac,
                src_mac: sw.router_mac,
                neighbour,
            },
        );
    }

    // Routes toward every other destination leaf. A route's key is (next-hop set, whether
    // per-packet modes are allowed toward it).
    let mut leaf_routes: Vec<(IpNet, (u32, bool))> = Vec::with_capacity(dests.len() * 2);
    let mut host_routes: Vec<(IpNet, (u32, bool))> = Vec::new();
    for (d, info) in dests.iter().enumerate() {
        if info.switch == s {
            continue;
        }
        let leaf = &t.switches[info.switch];
        let set = route_set[d];
        if set == NO_ROUTE {
            notes.push(format!(
                "{}: no path to leaf {}; its hosts are unreachable from here",
                sw.name, leaf.name
            ));
        }
        if let Some(net) = leaf.host_subnet_v4 {
            leaf_routes.push((IpNet::V4(net), (set, info.all_ok)));
        }
        if let Some(net) = leaf.host_subnet_v6 {
            leaf_routes.push((IpNet::V6(net), (set, info.all_ok)));
        }
        host_routes.extend(info.host_routes.iter().map(|&(net, ok)| (net, (set, ok))));
    }
    if t.routing.aggregate {
        leaf_routes = aggregate(leaf_routes);
    }
    leaf_routes.extend(host_routes);

    // Groups: one per distinct (member set, per-packet allowed) with two or more members.
    let group_keys: std::collections::BTreeSet<(u32, bool)> = leaf_routes
        .iter()
        .map(|(_, k)| *k)
        .filter(|(set, _)| *set != NO_ROUTE && sets.sets[*set as usize].len() > 1)
        .collect();
    let ids = assign_group_ids(&group_keys, sets);
    let mut routes: Vec<Route> = leaf_routes
        .iter()
        .map(|(prefix, (set, ok))| {
            let target = if *set == NO_ROUTE {
                Target::Drop
            } else {
                let m = &sets.sets[*set as usize];
                if m.len() == 1 {
                    Target::Nexthop(m[0].0)
                } else {
                    Target::Group(ids[&(*set, *ok)])
                }
            };
            Route {
                prefix: *prefix,
                target,
            }
        })
        .collect();
    // Directly attached hosts.
    for p in &sw.ports {
        if let Peer::Host { host } = p.peer {
            let h = &t.hosts[host];
            routes.push(Route {
                prefix: IpNet::V4(Ipv4Net::from(h.ipv4)),
                target: Target::Nexthop(p.id as u16),
            });
            if let Some(a) = h.ipv6 {
                routes.push(Route {
                    prefix: IpNet::V6(Ipv6Net::from(a)),
                    target: Target::Nexthop(p.id as u16),
                });
            }
        }
    }
    routes.sort_by_key(|r| (r.prefix.network(), r.prefix.prefix_len()));

    let mut groups = BTreeMap::new();
    for (set, ok) in group_keys {
        let id = ids[&(set, ok)];
        let m = &sets.sets[set as usize];
        let members: Vec<Member> = m
            .iter()
            .map(|&(nh, w)| {
                let x = &nexthops[&nh];
                Member {
                    nexthop_id: nh,
                    port_id: x.port_id,
                    port: x.port.clone(),
                    neighbour: x.neighbour.clone(),
                    weight: w,
                }
            })
            .collect();
        let modes = t
            .qos
            .classes
            .iter()
            .map(|c| {
                let (mode, fallback_from) = if c.routing.per_packet() && !ok {
                    (RoutingMode::Flowlet, Some(c.routing))
                } else {
                    (c.routing, None)
                };
                ClassMode {
                    class: c.name.clone(),
                    traffic_class: c.traffic_class,
                    mode,
                    flowlet_gap_us: c.flowlet_gap.as_micros().min(u64::from(u32::MAX)) as u32,
                    fallback_from,
                }
            })
            .collect();
        groups.insert(
            id,
            Group {
                id,
                epoch: epoch_of(m),
                members,
                modes,
            },
        );
    }
    SwitchDesired {
        name: sw.name.clone(),
        device_id: sw.device_id,
        ports,
        nexthops,
        groups,
        routes,
    }
}

fn fnv32(members: &[(u16, u32)]) -> u32 {
    let mut h = 0x811c_9dc5u32;
    for (n, w) in members {
        for b in n.to_le_bytes().iter().chain(w.to_le_bytes().iter()) {
            h = (h ^ u32::from(*b)).wrapping_mul(0x0100_0193);
        }
    }
    h
}

/// A member-set fingerprint, never 0 (0 is the pipeline's "no memory" value).
fn epoch_of(members: &[(u16, u32)]) -> u16 {
    let h = fnv32(members);
    ((h >> 16) as u16 ^ h as u16).max(1)
}

/// Deterministic group ids: a hash of the member set, probed in member-set order, so an id
/// changes only when its members do (or, rarely, when a colliding neighbour does).
fn assign_group_ids(
    keys: &std::collections::BTreeSet<(u32, bool)>,
    sets: &SetTable,
) -> HashMap<(u32, bool), u16> {
    let mut sorted: Vec<(&Vec<(u16, u32)>, bool, u32)> = keys
        .iter()
        .map(|&(s, ok)| (&sets.sets[s as usize], ok, s))
        .collect();
    sorted.sort();
    let mut used = vec![false; GROUP_ID_SPACE as usize];
    used[0] = true;
    let mut ids = HashMap::with_capacity(keys.len());
    for (members, ok, set) in sorted {
        let h = fnv32(members) ^ u32::from(ok).wrapping_mul(0x9e37_79b9);
        let mut id = (h % u32::from(GROUP_ID_SPACE)) as u16;
        let mut tries = 0;
        while used[id as usize] && tries < GROUP_ID_SPACE {
            id = (id + 1) % GROUP_ID_SPACE;
            tries += 1;
        }
        used[id as usize] = true;
        ids.insert((set, ok), id);
    }
    ids
}

/// Merges sibling prefixes with the same key into their parent, as far as it goes; a prefix
/// whose sibling is missing or differs stays as it is, so no address changes its next hops.
/// One pass over the prefixes in address order with a stack.
fn aggregate<K: Copy + Eq>(mut v: Vec<(IpNet, K)>) -> Vec<(IpNet, K)> {
    v.sort_by_key(|(n, _)| (n.network(), n.prefix_len()));
    let mut stack: Vec<(IpNet, K)> = Vec::with_capacity(v.len());
    for item in v {
        stack.push(item);
        while stack.len() >= 2 {
            let (b, kb) = stack[stack.len() - 1];
            let (a, ka) = stack[stack.len() - 2];
            match (a.supernet(), b.supernet()) {
                (Some(pa), Some(pb))
                    if ka == kb && a != b && a.prefix_len() == b.prefix_len() && pa == pb =>
                {
                    stack.truncate(stack.len() - 2);
                    stack.push((pa, ka));
                }
                _ => break,
            }
        }
    }
    stack
}

/// Longest-prefix match over a switch's compiled routes (for checkers and tests).
pub fn lookup(routes: &[Route], addr: IpAddr) -> Option<&Route> {
    routes
        .iter()
        .filter(|r| r.prefix.contains(&addr))
        .max_by_key(|r| r.prefix.prefix_len())
}
