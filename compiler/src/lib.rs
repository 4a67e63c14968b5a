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
pub mod p4map;
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

/// A port or device name shared by every entry that mentions it (cloning is a reference count).
pub type Name = std::sync::Arc<str>;

/// Every switch, host and port name as a shared [`Name`], made once per compiler.
struct Names {
    switch: Vec<Name>,
    host: Vec<Name>,
    port: Vec<Vec<Name>>,
}

impl Names {
    fn new(t: &Topology) -> Self {
        Names {
            switch: t
                .switches
                .iter()
                .map(|s| Name::from(s.name.as_str()))
                .collect(),
            host: t
                .hosts
                .iter()
                .map(|h| Name::from(h.name.as_str()))
                .collect(),
            port: t
                .switches
                .iter()
                .map(|s| {
                    s.ports
                        .iter()
                        .map(|p| Name::from(p.name.as_str()))
                        .collect()
                })
                .collect(),
        }
    }
}

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
    pub port: Name,
    pub router_mac: MacAddr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Nexthop {
    pub id: u16,
    pub port_id: u32,
    pub port: Name,
    pub dst_mac: MacAddr,
    pub src_mac: MacAddr,
    /// The switch or host behind the port.
    pub neighbour: Name,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Member {
    pub nexthop_id: u16,
    pub port_id: u32,
    pub port: Name,
    pub neighbour: Name,
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
    by_hash: HashMap<u64, u32, std::hash::BuildHasherDefault<PreHashed>>,
    sets: Vec<Vec<(u16, u32)>>,
}

/// The keys of `SetTable::by_hash` are hashes already: hashing them again only costs time.
#[derive(Default)]
struct PreHashed(u64);

impl std::hash::Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
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

/// Compiles the whole fabric.
pub fn compile(t: &Topology, links: &LinkState) -> Desired {
    Compiler::new(t, links.clone()).desired()
}

/// A class of destination leaves with identical live uplinks; routing is computed for `members[0]`
/// and copied to the others, except at `parents` and the members themselves (patched).
struct Class {
    members: Vec<usize>,
    parents: Vec<u32>,
    state: Scratch,
}

/// The compiler with its intermediate state kept, so a link change recomputes only what it
/// affects ([`Compiler::set_link`]).
pub struct Compiler<'t> {
    t: &'t Topology,
    links: LinkState,
    g: Graph,
    equal_weights: bool,
    dests: Vec<SwitchIdx>,
    infos: Vec<DestInfo>,
    /// Every destination leaf's prefixes and how they may merge (computed once).
    order: MergePlan,
    names: Names,
    classes: Vec<Class>,
    class_of_dest: Vec<usize>,
    /// route_set[s][d]: interned next-hop set of switch s toward dests[d].
    route_set: Vec<Vec<u32>>,
    tables: Vec<SetTable>,
    /// Reused by `intern`, which runs thousands of times per link change.
    members_buf: Vec<(u16, u32)>,
    last_intern: Vec<Option<(Vec<Hop>, u32)>>,
    switches: Vec<SwitchDesired>,
    notes: Vec<Vec<String>>,
}

fn signature(g: &Graph, dest: SwitchIdx) -> Vec<(u32, u64)> {
    let mut sig: Vec<(u32, u64)> = g.up[dest]
        .iter()
        .map(|e| (e.nb, g.speed[e.link as usize]))
        .collect();
    sig.sort_unstable();
    sig
}

impl<'t> Compiler<'t> {
    pub fn new(t: &'t Topology, links: LinkState) -> Self {
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
        let per_packet = per_packet_in_use(t);
        let infos = dests
            .iter()
            .map(|&d| DestInfo::new(t, d, per_packet))
            .collect();
        let mut c = Compiler {
            t,
            equal_weights: t.qos.classes.iter().all(|c| c.routing == RoutingMode::Ecmp),
            links,
            g,
            order: MergePlan::default(),
            names: Names::new(t),
            infos,
            classes: Vec::new(),
            class_of_dest: vec![0; dests.len()],
            route_set: vec![vec![NO_ROUTE; dests.len()]; n],
            tables: (0..n).map(|_| SetTable::default()).collect(),
            members_buf: Vec::with_capacity(64),
            last_intern: vec![None; n],
            dests,
            switches: Vec::new(),
            notes: vec![Vec::new(); n],
        };
        // Leaves with the same live uplinks (same parents, speeds, multiplicity) see the same
        // fabric above them: route once per class and patch the few switches that differ.
        let mut by_sig: HashMap<Vec<(u32, u64)>, usize> = HashMap::new();
        for d in 0..c.dests.len() {
            let sig = signature(&c.g, c.dests[d]);
            let parents: Vec<u32> = sig.iter().map(|x| x.0).collect();
            let ci = *by_sig.entry(sig).or_insert_with(|| {
                c.classes.push(Class {
                    members: Vec::new(),
                    parents,
                    state: Scratch::new(n),
                });
                c.classes.len() - 1
            });
            c.classes[ci].members.push(d);
            c.class_of_dest[d] = ci;
        }
        for ci in 0..c.classes.len() {
            c.route_class(ci);
        }
        for (d, &dest) in c.dests.iter().enumerate() {
            let leaf = &t.switches[dest];
            if let Some(net) = leaf.host_subnet_v4 {
                c.order.leaves.push((IpNet::V4(net), d as u32));
            }
            if let Some(net) = leaf.host_subnet_v6 {
                c.order.leaves.push((IpNet::V6(net), d as u32));
            }
        }
        c.order.build();
        c.switches = (0..n).map(|s| c.compile_switch(s)).collect();
        c
    }

    pub fn desired(self) -> Desired {
        let down_links = self.down_link_names();
        Desired {
            switches: self.switches,
            notes: self.notes.into_iter().flatten().collect(),
            down_links,
        }
    }

    pub fn switches(&self) -> &[SwitchDesired] {
        &self.switches
    }

    pub fn link_state(&self) -> &LinkState {
        &self.links
    }

    /// What the operator should know about the current state (unreachable leaves, ...).
    pub fn notes(&self) -> Vec<String> {
        self.notes.iter().flatten().cloned().collect()
    }

    fn down_link_names(&self) -> Vec<String> {
        let t = self.t;
        self.links
            .down_links()
            .map(|l| {
                format!(
                    "{} ↔ {}",
                    t.end_name(t.links[l].a),
                    t.end_name(t.links[l].b)
                )
            })
            .collect()
    }

    fn intern(&mut self, s: SwitchIdx, hops: &[Hop]) -> u32 {
        if hops.is_empty() {
            return NO_ROUTE;
        }
        // A switch usually meets the same hops for many destinations in a row (every remote
        // class looks alike from below): remember the last answer.
        if let Some((last, id)) = &self.last_intern[s]
            && last.as_slice() == hops
        {
            return *id;
        }
        let t = self.t;
        let sw = &t.switches[s];
        let parallel = routing::has_parallel(hops);
        let equal = self.equal_weights
            || (!parallel && hops.iter().all(|h| h.capacity == hops[0].capacity));
        let mut members = std::mem::take(&mut self.members_buf);
        members.clear();
        if equal {
            members.extend(hops.iter().map(|h| {
                (
                    sw.ports[t.links[h.link as usize].end_at(s).port].id as u16,
                    1,
                )
            }));
        } else {
            let w = if parallel {
                let speed = &self.g.speed;
                routing::link_weights(hops, |l| speed[l as usize], MAX_GROUP_WEIGHT)
            } else {
                let caps: Vec<u64> = hops.iter().map(|h| h.capacity).collect();
                routing::weights(&caps, MAX_GROUP_WEIGHT)
            };
            members.extend(hops.iter().zip(w).map(|(h, w)| {
                (
                    sw.ports[t.links[h.link as usize].end_at(s).port].id as u16,
                    w,
                )
            }));
        }
        members.sort_unstable();
        let id = self.tables[s].intern(&members);
        self.members_buf = members;
        self.last_intern[s] = Some((hops.to_vec(), id));
        id
    }

    /// Full routing of one class: the representative by BFS, the other members by copy+patch.
    fn route_class(&mut self, ci: usize) {
        let rep = self.classes[ci].members[0];
        let dest = self.dests[rep];
        let mut state = std::mem::replace(&mut self.classes[ci].state, Scratch::new(0));
        let mut emitted: Vec<(usize, Vec<Hop>)> = Vec::new();
        routing::route_to(&self.g, dest, &mut state, |s, hops: &[Hop]| {
            emitted.push((s, hops.to_vec()))
        });
        self.classes[ci].state = state;
        for row in self.route_set.iter_mut() {
            row[rep] = NO_ROUTE;
        }
        for (s, hops) in emitted {
            self.route_set[s][rep] = self.intern(s, &hops);
        }
        let members = self.classes[ci].members.clone();
        for &d in &members[1..] {
            for row in self.route_set.iter_mut() {
                row[d] = row[rep];
            }
            self.patch_member(ci, d);
        }
    }

    /// A member's routes differ from the representative's only at the shared parents (down to
    /// it) and at the other members (up to the parents).
    fn patch_member(&mut self, ci: usize, d: usize) {
        let dest = self.dests[d];
        let mut parent_cap: HashMap<u32, u64> = HashMap::new();
        for &p in &self.classes[ci].parents.clone() {
            if parent_cap.contains_key(&p) {
                continue;
            }
            // The destination carries on everything: the parent's links to it give their speeds.
            let run: Vec<&routing::Adj> = self.g.down[p as usize]
                .iter()
                .filter(|e| e.nb as usize == dest)
                .collect();
            let total = run.first().map_or(0, |e| e.total);
            let hops: Vec<Hop> = run
                .iter()
                .map(|e| Hop {
                    link: e.link,
                    neighbour: e.nb,
                    capacity: total,
                })
                .collect();
            parent_cap.insert(p, total);
            self.route_set[p as usize][d] = self.intern(p as usize, &hops);
        }
        for m in self.classes[ci].members.clone() {
            let sib = self.dests[m];
            if sib == dest {
                continue;
            }
            // The first link to each parent carries the run's total speed; its parallels follow.
            let mut via = 0u64;
            let hops: Vec<Hop> = self.g.up[sib]
                .iter()
                .filter_map(|e| {
                    let pc = *parent_cap.get(&e.nb)?;
                    if e.total != 0 {
                        via = e.total.min(pc);
                    }
                    (pc > 0).then_some(Hop {
                        link: e.link,
                        neighbour: e.nb,
                        capacity: via,
                    })
                })
                .collect();
            self.route_set[sib][d] = self.intern(sib, &hops);
        }
    }

    /// Takes link `l` down or up and recomputes what that changes. Returns the switches whose
    /// desired state changed (their new state is in [`Compiler::switches`]).
    pub fn set_link(&mut self, l: LinkIdx, down: bool) -> Vec<SwitchIdx> {
        let t = self.t;
        if self.links.is_down(l) == down {
            return Vec::new();
        }
        self.links.set_down(l, down);
        let live = !down && t.link_admin_up(l);
        self.g.set_link(t, l, live);
        let (a, b) = (t.links[l].a.switch, t.links[l].b.switch);

        // An endpoint that is a destination leaf may change class: regroup and recompute those
        // classes whole (rare: only the two ends of the link can move).
        let mut full: Vec<usize> = Vec::new();
        for e in [a, b] {
            if let Some(d) = self.dests.iter().position(|&x| x == e) {
                let ci = self.class_of_dest[d];
                let sig = signature(&self.g, e);
                let parents: Vec<u32> = sig.iter().map(|x| x.0).collect();
                if parents != self.classes[ci].parents || self.classes[ci].members.len() == 1 {
                    self.classes[ci].members.retain(|&m| m != d);
                    let n = t.switches.len();
                    let target = (0..self.classes.len()).find(|&c| {
                        !self.classes[c].members.is_empty()
                            && signature(&self.g, self.dests[self.classes[c].members[0]]) == sig
                    });
                    let nc = match target {
                        Some(c) => c,
                        None => {
                            self.classes.push(Class {
                                members: Vec::new(),
                                parents,
                                state: Scratch::new(n),
                            });
                            self.classes.len() - 1
                        }
                    };
                    self.classes[nc].members.push(d);
                    self.class_of_dest[d] = nc;
                    full.push(nc);
                    if !self.classes[ci].members.is_empty() {
                        full.push(ci);
                    }
                }
            }
        }
        full.sort_unstable();
        full.dedup();

        let mut dirty = vec![false; t.switches.len()];
        for ci in 0..self.classes.len() {
            if self.classes[ci].members.is_empty() {
                continue;
            }
            if full.contains(&ci) {
                let before: Vec<Vec<u32>> = self.classes[ci]
                    .members
                    .iter()
                    .map(|&d| self.route_set.iter().map(|r| r[d]).collect())
                    .collect();
                self.route_class(ci);
                for (k, &d) in self.classes[ci].members.clone().iter().enumerate() {
                    for s in 0..t.switches.len() {
                        if before.get(k).is_none_or(|b| b[s] != self.route_set[s][d]) {
                            dirty[s] = true;
                        }
                    }
                }
                continue;
            }
            let rep = self.classes[ci].members[0];
            let dest = self.dests[rep];
            let mut state = std::mem::replace(&mut self.classes[ci].state, Scratch::new(0));
            let mut touched_switches: Vec<usize> = Vec::new();
            routing::update(&self.g, &mut state, dest, &[a, b], |s| {
                touched_switches.push(s)
            });
            let mut hops = Vec::new();
            let mut changes: Vec<(usize, u32)> = Vec::new();
            for s in touched_switches {
                routing::hops_at(&self.g, &state, dest, s, &mut hops);
                let id = self.intern(s, &hops);
                if id != self.route_set[s][rep] {
                    changes.push((s, id));
                }
            }
            self.classes[ci].state = state;
            let members = self.classes[ci].members.clone();
            let parents = self.classes[ci].parents.clone();
            for (s, id) in changes {
                dirty[s] = true;
                self.route_set[s][rep] = id;
                let patched =
                    parents.contains(&(s as u32)) || members.iter().any(|&m| self.dests[m] == s);
                if !patched {
                    for &d in &members[1..] {
                        self.route_set[s][d] = id;
                    }
                }
            }
        }
        let changed: Vec<SwitchIdx> = (0..t.switches.len()).filter(|&s| dirty[s]).collect();
        self.recompile(&changed);
        changed
    }

    /// Re-derives the tables of `switches`; each depends only on its own row of next-hop sets.
    fn recompile(&mut self, switches: &[SwitchIdx]) {
        let (t, infos, order, names, route_set, tables) = (
            self.t,
            &self.infos,
            &self.order,
            &self.names,
            &self.route_set,
            &self.tables,
        );
        let work = |chunk: &[SwitchIdx]| -> Vec<(SwitchIdx, SwitchDesired, Vec<String>)> {
            chunk
                .iter()
                .map(|&s| {
                    let mut notes = Vec::new();
                    let d = compile_switch(
                        t,
                        s,
                        infos,
                        order,
                        names,
                        &route_set[s],
                        &tables[s],
                        &mut notes,
                    );
                    (s, d, notes)
                })
                .collect()
        };
        // Two threads did not pay on this 2-core machine: the other core is BMv2's.
        let results = work(switches);
        for (s, d, notes) in results {
            self.switches[s] = d;
            self.notes[s] = notes;
        }
    }

    fn compile_switch(&mut self, s: SwitchIdx) -> SwitchDesired {
        let mut notes = Vec::new();
        let out = compile_switch(
            self.t,
            s,
            &self.infos,
            &self.order,
            &self.names,
            &self.route_set[s],
            &self.tables[s],
            &mut notes,
        );
        self.notes[s] = notes;
        out
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

// The inputs are borrowed one by one from the compiler, whose other fields are written at the
// same time; bundling them would only add a struct to unpack.
#[allow(clippy::too_many_arguments)]
fn compile_switch(
    t: &Topology,
    s: SwitchIdx,
    dests: &[DestInfo],
    order: &MergePlan,
    names: &Names,
    route_set: &[u32],
    sets: &SetTable,
    notes: &mut Vec<String>,
) -> SwitchDesired {
    let sw = &t.switches[s];
    let mut ports = Vec::new();
    let mut nexthops = BTreeMap::new();
    for (pi, p) in sw.ports.iter().enumerate() {
        let (neighbour, mac) = match p.peer {
            Peer::None => continue,
            Peer::Host { host } => (names.host[host].clone(), t.hosts[host].mac),
            Peer::Switch { link } => {
                let o = t.links[link].other(s).switch;
                (names.switch[o].clone(), t.switches[o].router_mac)
            }
        };
        let port = names.port[s][pi].clone();
        ports.push(PortConfig {
            port_id: p.id,
            port: port.clone(),
            router_mac: sw.router_mac,
        });
        nexthops.insert(
            p.id as u16,
            Nexthop {
                id: p.id as u16,
                port_id: p.id,
                port,
                dst_mac: mac,
                src_mac: sw.router_mac,
                neighbour,
            },
        );
    }

    // Routes toward every other destination leaf. A route's key is (next-hop set, whether
    // per-packet modes are allowed toward it).
    let mut leaf_routes: Vec<(IpNet, (u32, bool))> = Vec::with_capacity(64);
    let mut host_routes: Vec<(IpNet, (u32, bool))> = Vec::new();
    for (d, info) in dests.iter().enumerate() {
        if info.switch != s && route_set[d] == NO_ROUTE {
            notes.push(format!(
                "{}: no path to leaf {}; its hosts are unreachable from here",
                sw.name, t.switches[info.switch].name
            ));
        }
        if info.switch != s {
            let set = route_set[d];
            host_routes.extend(info.host_routes.iter().map(|&(net, ok)| (net, (set, ok))));
        }
    }
    // Leaf prefixes, merged bottom-up along the fabric-wide merge tree where siblings agree.
    order.evaluate(
        |d| {
            let info = &dests[d as usize];
            (info.switch != s).then_some((route_set[d as usize], info.all_ok))
        },
        t.routing.aggregate,
        &mut leaf_routes,
    );
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
    type Keyed<'a> = (&'a Vec<(u16, u32)>, bool, u32);
    let mut sorted: Vec<Keyed> = keys
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

/// Every destination leaf prefix, and the tree of supernets that sibling prefixes may merge
/// into. Built once per fabric; per switch, merging is then one pass of integer compares
/// instead of prefix arithmetic over thousands of routes.
#[derive(Debug, Default)]
struct MergePlan {
    /// (prefix, destination index), sorted by address after `build`.
    leaves: Vec<(IpNet, u32)>,
    /// Every node: the leaves first, then the supernets.
    nodes: Vec<IpNet>,
    /// Bottom-up merges: (left child, right child, parent).
    ops: Vec<(u32, u32, u32)>,
    parent: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl MergePlan {
    fn build(&mut self) {
        self.leaves
            .sort_by_key(|(n, _)| (n.network(), n.prefix_len()));
        self.nodes = self.leaves.iter().map(|l| l.0).collect();
        // The same one-pass stack merge as a per-switch aggregation, ignoring next hops: every
        // pair of sibling prefixes present gets a parent node.
        let mut stack: Vec<u32> = Vec::with_capacity(self.nodes.len());
        for i in 0..self.leaves.len() as u32 {
            stack.push(i);
            while stack.len() >= 2 {
                let (r, l) = (stack[stack.len() - 1], stack[stack.len() - 2]);
                let (a, b) = (self.nodes[l as usize], self.nodes[r as usize]);
                match (a.supernet(), b.supernet()) {
                    (Some(pa), Some(pb))
                        if a != b && a.prefix_len() == b.prefix_len() && pa == pb =>
                    {
                        let p = self.nodes.len() as u32;
                        self.nodes.push(pa);
                        self.ops.push((l, r, p));
                        stack.truncate(stack.len() - 2);
                        stack.push(p);
                    }
                    _ => break,
                }
            }
        }
        self.parent = vec![NONE; self.nodes.len()];
        for &(l, r, p) in &self.ops {
            self.parent[l as usize] = p;
            self.parent[r as usize] = p;
        }
    }

    /// Pushes the routes of one switch: `key(dest)` is its (next-hop set, per-packet allowed)
    /// toward a destination, None for its own leaf (never merged, never routed).
    fn evaluate(
        &self,
        key: impl Fn(u32) -> Option<(u32, bool)>,
        aggregate: bool,
        out: &mut Vec<(IpNet, (u32, bool))>,
    ) {
        // Keys packed in a u64 (set << 1 | ok), u64::MAX for none: the merge is then plain
        // integer compares over one reused buffer.
        const ABSENT: u64 = u64::MAX;
        let pack = |k: Option<(u32, bool)>| {
            k.map_or(ABSENT, |(set, ok)| u64::from(set) << 1 | u64::from(ok))
        };
        let unpack = |v: u64| ((v >> 1) as u32, v & 1 == 1);
        thread_local! {
            static VALS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        VALS.with_borrow_mut(|vals| {
            vals.clear();
            vals.extend(self.leaves.iter().map(|&(_, d)| pack(key(d))));
            if !aggregate {
                out.extend(
                    self.leaves
                        .iter()
                        .zip(vals.iter())
                        .filter(|(_, v)| **v != ABSENT)
                        .map(|(l, v)| (l.0, unpack(*v))),
                );
                return;
            }
            vals.resize(self.nodes.len(), ABSENT);
            for &(l, r, p) in &self.ops {
                let (a, b) = (vals[l as usize], vals[r as usize]);
                vals[p as usize] = if a == b { a } else { ABSENT };
            }
            for (n, &v) in vals.iter().enumerate() {
                if v != ABSENT {
                    let p = self.parent[n];
                    if p == NONE || vals[p as usize] == ABSENT {
                        out.push((self.nodes[n], unpack(v)));
                    }
                }
            }
        });
    }
}

/// Longest-prefix match over a switch's compiled routes (for checkers and tests).
pub fn lookup(routes: &[Route], addr: IpAddr) -> Option<&Route> {
    routes
        .iter()
        .filter(|r| r.prefix.contains(&addr))
        .max_by_key(|r| r.prefix.prefix_len())
}
