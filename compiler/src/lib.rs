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
//!
//! A link change ([`Compiler::set_link_delta`]) is propagated through the per-destination
//! routing state; each switch whose next-hop set toward some destinations changed has only
//! those destinations' routes patched (the merge tree's paths from them to the root), and the
//! change is reported as a [`SwitchDelta`]: the routes and groups that differ, before and
//! after, so the layers above map and diff only those.

pub mod check;
pub mod down;
mod merge;
pub mod p4delta;
pub mod p4map;
pub mod qos;
pub mod routing;
mod tables;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::Serialize;
use weft_topology::{HostIdx, LinkIdx, MacAddr, Peer, RoutingMode, SwitchIdx, Topology};

use merge::MergePlan;
use routing::{Graph, Hop, Scratch};
use tables::{Ctx, TableState};

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
        // Port names repeat on every switch (`Ethernet0`, ...): one shared name each, so the
        // groups of thousands of switches touch a few hot reference counts, not one per port.
        let mut ports: HashMap<&str, Name> = HashMap::new();
        let port = t
            .switches
            .iter()
            .map(|s| {
                s.ports
                    .iter()
                    .map(|p| {
                        ports
                            .entry(p.name.as_str())
                            .or_insert_with(|| Name::from(p.name.as_str()))
                            .clone()
                    })
                    .collect()
            })
            .collect();
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
            port,
        }
    }
}

/// Which links are down (by index into `Topology::links`), and which hosts are cut off from
/// their leaf (by index into `Topology::hosts`: the link of a host port).
#[derive(Debug, Clone, Default)]
pub struct LinkState {
    down: Vec<bool>,
    hosts_down: Vec<bool>,
}

impl LinkState {
    pub fn all_up(t: &Topology) -> Self {
        LinkState {
            down: vec![false; t.links.len()],
            hosts_down: vec![false; t.hosts.len()],
        }
    }
    /// Takes the link between host `h` and its leaf down or up.
    pub fn set_host_down(&mut self, h: HostIdx, down: bool) {
        if let Some(x) = self.hosts_down.get_mut(h) {
            *x = down;
        }
    }
    pub fn is_host_down(&self, h: HostIdx) -> bool {
        self.hosts_down.get(h).copied().unwrap_or(false)
    }
    pub fn down_hosts(&self) -> impl Iterator<Item = HostIdx> + '_ {
        self.hosts_down
            .iter()
            .enumerate()
            .filter(|(_, d)| **d)
            .map(|(i, _)| i)
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

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Member {
    pub nexthop_id: u16,
    pub port_id: u32,
    pub port: Name,
    pub neighbour: Name,
    pub weight: u32,
}

/// The multipath mode a group uses for one traffic class.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ClassMode {
    pub class: Name,
    pub traffic_class: u8,
    pub mode: RoutingMode,
    pub flowlet_gap_us: u32,
    /// The class asked for a per-packet mode, but the destination's NICs cannot take reordering.
    pub fallback_from: Option<RoutingMode>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Group {
    pub id: u16,
    pub members: Vec<Member>,
    pub modes: Vec<ClassMode>,
    /// Changes whenever the member set does, so the pipeline forgets flowlets and last choices.
    pub epoch: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", content = "id", rename_all = "lowercase")]
pub enum Target {
    Nexthop(u16),
    Group(u16),
    Drop,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
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

/// What one link change did to one switch's desired state: every route and group that
/// differs, as it was and as it is (by prefix and by id; a retargeted route or a group whose id
/// now holds other members is in both). Ports and nexthops never change with links.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwitchDelta {
    pub switch: SwitchIdx,
    /// Removed or retargeted routes, as they were, by prefix.
    pub routes_old: Vec<Route>,
    /// Added or retargeted routes, as they are now, by prefix.
    pub routes_new: Vec<Route>,
    /// Removed or changed groups, as they were.
    pub groups_old: Vec<Group>,
    /// Ids of added or changed groups, ascending; as they are now in
    /// `Compiler::switches()[switch].groups` (a group is large: it is not copied here).
    pub groups_new: Vec<u16>,
}

impl SwitchDelta {
    pub fn is_empty(&self) -> bool {
        self.routes_old.is_empty()
            && self.routes_new.is_empty()
            && self.groups_old.is_empty()
            && self.groups_new.is_empty()
    }
}

/// Per-switch interning of next-hop sets: (nexthop id, weight) lists → small ids.
#[derive(Default)]
struct SetTable {
    by_hash: HashMap<u64, u32, std::hash::BuildHasherDefault<PreHashed>>,
    sets: Vec<Vec<(u16, u32)>>,
    /// `fnv32` of each set, which group ids and epochs derive from.
    fnv: Vec<u32>,
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
                    self.fnv.push(fnv32(members));
                    self.by_hash.insert(h, id);
                    return id;
                }
            }
        }
    }
}

const NO_ROUTE: u32 = u32::MAX;
/// `Compiler::parent_cap` of a switch that is not a parent of the class being patched.
const NOT_PARENT: u64 = u64::MAX;
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

/// Every switch's interned next-hop sets, and what makes interning cheap.
struct Interner {
    tables: Vec<SetTable>,
    /// Per link: (switch at end a, port id at end a, port id at end b), so a hop's port costs
    /// one small read (interning runs thousands of times per link change).
    ends: Vec<(u32, u16, u16)>,
    members_buf: Vec<(u16, u32)>,
    /// Per switch, the last two hop lists interned and their sets, newest first.
    last: Vec<[(Vec<Hop>, u32); 2]>,
}

impl Interner {
    fn new(t: &Topology) -> Self {
        let n = t.switches.len();
        Interner {
            tables: (0..n).map(|_| SetTable::default()).collect(),
            ends: t
                .links
                .iter()
                .map(|l| {
                    let id = |e: weft_topology::End| t.switches[e.switch].ports[e.port].id as u16;
                    (l.a.switch as u32, id(l.a), id(l.b))
                })
                .collect(),
            members_buf: Vec::with_capacity(64),
            last: (0..n)
                .map(|_| [(Vec::new(), NO_ROUTE), (Vec::new(), NO_ROUTE)])
                .collect(),
        }
    }

    fn intern(&mut self, g: &Graph, equal_weights: bool, s: SwitchIdx, hops: &[Hop]) -> u32 {
        if hops.is_empty() {
            return NO_ROUTE;
        }
        // A switch meets the same few hop lists for destination after destination (every
        // remote class looks alike from below; a link change alternates two classes).
        let last = &mut self.last[s];
        if last[0].1 != NO_ROUTE && last[0].0 == hops {
            return last[0].1;
        }
        if last[1].1 != NO_ROUTE && last[1].0 == hops {
            last.swap(0, 1);
            return last[0].1;
        }
        let parallel = routing::has_parallel(hops);
        let equal =
            equal_weights || (!parallel && hops.iter().all(|h| h.capacity == hops[0].capacity));
        let mut members = std::mem::take(&mut self.members_buf);
        members.clear();
        let ends = &self.ends;
        let port = |h: &Hop| {
            let e = ends[h.link as usize];
            if e.0 as usize == s { e.1 } else { e.2 }
        };
        if equal {
            members.extend(hops.iter().map(|h| (port(h), 1)));
        } else {
            let w = if parallel {
                routing::link_weights(hops, |l| g.speed[l as usize], MAX_GROUP_WEIGHT)
            } else {
                let caps: Vec<u64> = hops.iter().map(|h| h.capacity).collect();
                routing::weights(&caps, MAX_GROUP_WEIGHT)
            };
            members.extend(hops.iter().zip(w).map(|(h, w)| (port(h), w)));
        }
        members.sort_unstable();
        let id = self.tables[s].intern(&members);
        self.members_buf = members;
        let last = &mut self.last[s];
        last.swap(0, 1);
        last[0].0.clear();
        last[0].0.extend_from_slice(hops);
        last[0].1 = id;
        id
    }
}

/// Past this many changed destinations at one switch its table is built whole rather than
/// patched: a patch walks the merge tree from each changed destination, a build walks it once.
const PATCH_LIMIT: usize = 64;

/// Notes a set of a changed destination before the link change (the first record of a
/// destination holds it).
fn record(
    pending: &mut [Vec<(u32, u32)>],
    touched: &mut Vec<SwitchIdx>,
    s: SwitchIdx,
    d: usize,
    old: u32,
) {
    if pending[s].is_empty() {
        touched.push(s);
    }
    pending[s].push((d as u32, old));
}

/// The compiler with its intermediate state kept, so a link change recomputes only what it
/// affects ([`Compiler::set_link_delta`]).
pub struct Compiler<'t> {
    t: &'t Topology,
    links: LinkState,
    g: Graph,
    equal_weights: bool,
    dests: Vec<SwitchIdx>,
    infos: Vec<DestInfo>,
    /// Every destination leaf's prefixes and how they may merge (computed once).
    order: MergePlan,
    /// A group's multipath modes, per whether per-packet modes are allowed toward it.
    modes: [Vec<ClassMode>; 2],
    classes: Vec<Class>,
    class_of_dest: Vec<usize>,
    /// cols[d][s]: interned next-hop set of switch s toward dests[d]. By destination, because
    /// a class of destinations is routed once and copied column by column; a switch's table
    /// reads its row only when built whole.
    cols: Vec<Vec<u32>>,
    sets: Interner,
    marks: routing::Marks,
    /// The sets of a class being routed again, as they were (reused between changes).
    snapshot: Vec<u32>,
    /// Per switch, while a class member is patched: what it carries on as a parent.
    parent_cap: Vec<u64>,
    hops_buf: Vec<Hop>,
    /// Buffers of table patches, reused between switches.
    patch_buf: tables::PatchBuf,
    /// Past this many changed destinations a switch's table is built whole.
    patch_limit: usize,
    switches: Vec<SwitchDesired>,
    /// Per switch, its nexthops as group members of weight 1, by id: a group's members are
    /// copied from here in one pass (thousands of groups are made per link change).
    nexthops: Vec<Vec<Member>>,
    tables: Vec<TableState>,
    /// Notes that no link change alters (hosts cut off), per switch.
    fixed_notes: Vec<Vec<String>>,
    /// During a link change, per switch: (destination, set before) of every set that changed.
    pending: Vec<Vec<(u32, u32)>>,
    touched: Vec<SwitchIdx>,
}

fn signature(g: &Graph, dest: SwitchIdx) -> Vec<(u32, u64)> {
    let mut sig: Vec<(u32, u64)> = g.up[dest]
        .iter()
        .map(|e| (e.nb, g.speed[e.link as usize]))
        .collect();
    sig.sort_unstable();
    sig
}

/// Port config and nexthops of switch `s`: one per connected port, whatever the links do.
fn ports_and_nexthops(
    t: &Topology,
    s: SwitchIdx,
    names: &Names,
) -> (Vec<PortConfig>, BTreeMap<u16, Nexthop>) {
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
    (ports, nexthops)
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
        let names = Names::new(t);
        let switches: Vec<SwitchDesired> = (0..n)
            .map(|s| {
                let (ports, nexthops) = ports_and_nexthops(t, s, &names);
                SwitchDesired {
                    name: t.switches[s].name.clone(),
                    device_id: t.switches[s].device_id,
                    ports,
                    nexthops,
                    groups: BTreeMap::new(),
                    routes: Vec::new(),
                }
            })
            .collect();
        let nexthops = switches
            .iter()
            .map(|sw: &SwitchDesired| {
                sw.nexthops
                    .values()
                    .map(|x| Member {
                        nexthop_id: x.id,
                        port_id: x.port_id,
                        port: x.port.clone(),
                        neighbour: x.neighbour.clone(),
                        weight: 1,
                    })
                    .collect()
            })
            .collect();
        let mut fixed_notes = vec![Vec::new(); n];
        for h in links.down_hosts() {
            let host = &t.hosts[h];
            fixed_notes[host.switch].push(format!(
                "host {} is cut off: {}:{} is down",
                host.name,
                t.switches[host.switch].name,
                t.switches[host.switch].ports[host.port].name
            ));
        }
        let mut c = Compiler {
            t,
            equal_weights: t.qos.classes.iter().all(|c| c.routing == RoutingMode::Ecmp),
            links,
            g,
            order: MergePlan::default(),
            modes: [false, true].map(|ok| class_modes(t, ok)),
            infos,
            classes: Vec::new(),
            class_of_dest: vec![0; dests.len()],
            cols: vec![vec![NO_ROUTE; n]; dests.len()],
            sets: Interner::new(t),
            marks: routing::Marks::default(),
            snapshot: Vec::new(),
            parent_cap: Vec::new(),
            hops_buf: Vec::with_capacity(64),
            patch_buf: tables::PatchBuf::default(),
            patch_limit: PATCH_LIMIT,
            dests,
            switches,
            nexthops,
            tables: (0..n).map(|_| TableState::default()).collect(),
            fixed_notes,
            pending: vec![Vec::new(); n],
            touched: Vec::new(),
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
        c.order.build(c.dests.len());
        c.build_all();
        c
    }

    /// Builds every switch's table whole. Rows are gathered from the columns a block of
    /// switches at a time, so the gathering reads memory in order.
    fn build_all(&mut self) {
        const BLOCK: usize = 64;
        let (n, nd) = (self.t.switches.len(), self.dests.len());
        let cx = Ctx {
            t: self.t,
            links: &self.links,
            dests: &self.infos,
            order: &self.order,
            modes: &self.modes,
        };
        let mut block = vec![NO_ROUTE; nd * BLOCK];
        let mut row = vec![NO_ROUTE; nd];
        for s0 in (0..n).step_by(BLOCK) {
            let w = BLOCK.min(n - s0);
            for (d, col) in self.cols.iter().enumerate() {
                block[d * BLOCK..d * BLOCK + w].copy_from_slice(&col[s0..s0 + w]);
            }
            for j in 0..w {
                let s = s0 + j;
                for (d, x) in row.iter_mut().enumerate() {
                    *x = block[d * BLOCK + j];
                }
                let sw = &mut self.switches[s];
                let (routes, groups, st) =
                    tables::build(&cx, s, &row, &self.sets.tables[s], &self.nexthops[s]);
                sw.routes = routes;
                sw.groups = groups;
                self.tables[s] = st;
            }
        }
    }

    pub fn desired(self) -> Desired {
        let down_links = self.down_link_names();
        let notes = self.notes();
        Desired {
            switches: self.switches,
            notes,
            down_links,
        }
    }

    /// For tests: with 0, every changed switch's table is built whole (and its delta found by
    /// comparison) instead of patched.
    #[doc(hidden)]
    pub fn with_patch_limit(mut self, limit: usize) -> Self {
        self.patch_limit = limit;
        self
    }

    pub fn switches(&self) -> &[SwitchDesired] {
        &self.switches
    }

    pub fn link_state(&self) -> &LinkState {
        &self.links
    }

    /// What the operator should know about the current state (unreachable leaves, hosts cut
    /// off, ...).
    pub fn notes(&self) -> Vec<String> {
        let t = self.t;
        let mut out = Vec::new();
        for (s, st) in self.tables.iter().enumerate() {
            for &d in &st.unreachable {
                out.push(format!(
                    "{}: no path to leaf {}; its hosts are unreachable from here",
                    t.switches[s].name, t.switches[self.dests[d as usize]].name
                ));
            }
            out.extend(self.fixed_notes[s].iter().cloned());
        }
        out
    }

    fn down_link_names(&self) -> Vec<String> {
        let t = self.t;
        let links = self.links.down_links().map(|l| {
            format!(
                "{} ↔ {}",
                t.end_name(t.links[l].a),
                t.end_name(t.links[l].b)
            )
        });
        let hosts = self.links.down_hosts().map(|h| {
            let host = &t.hosts[h];
            format!(
                "{}:{} ↔ {}",
                t.switches[host.switch].name,
                t.switches[host.switch].ports[host.port].name,
                host.name
            )
        });
        links.chain(hosts).collect()
    }

    fn intern(&mut self, s: SwitchIdx, hops: &[Hop]) -> u32 {
        self.sets.intern(&self.g, self.equal_weights, s, hops)
    }

    /// Full routing of one class: the representative by BFS, the other members by copy+patch.
    fn route_class(&mut self, ci: usize) {
        let rep = self.classes[ci].members[0];
        let dest = self.dests[rep];
        let mut state = std::mem::replace(&mut self.classes[ci].state, Scratch::new(0));
        let (g, eq) = (&self.g, self.equal_weights);
        let col = &mut self.cols[rep];
        col.fill(NO_ROUTE);
        let sets = &mut self.sets;
        routing::route_to(g, dest, &mut state, |s, hops: &[Hop]| {
            col[s] = sets.intern(g, eq, s, hops)
        });
        self.classes[ci].state = state;
        let members = self.classes[ci].members.clone();
        let src = std::mem::take(&mut self.cols[rep]);
        for &d in &members[1..] {
            self.cols[d].copy_from_slice(&src);
        }
        self.cols[rep] = src;
        for &d in &members[1..] {
            self.patch_member(ci, d);
        }
    }

    /// A member's routes differ from the representative's only at the shared parents (down to
    /// it) and at the other members (up to the parents).
    fn patch_member(&mut self, ci: usize, d: usize) {
        let dest = self.dests[d];
        // What each parent carries on toward this member: indexed by switch (a parent's
        // neighbours are looked up once per sibling and parent), cleared again below.
        let mut cap = std::mem::take(&mut self.parent_cap);
        cap.resize(self.t.switches.len(), NOT_PARENT);
        let parents = std::mem::take(&mut self.classes[ci].parents);
        let mut hops = std::mem::take(&mut self.hops_buf);
        for &p in &parents {
            if cap[p as usize] != NOT_PARENT {
                continue;
            }
            // The destination carries on everything: the parent's links to it give their speeds.
            hops.clear();
            let mut total = None;
            for e in self.g.down[p as usize]
                .iter()
                .filter(|e| e.nb as usize == dest)
            {
                let t = *total.get_or_insert(e.total);
                hops.push(Hop {
                    link: e.link,
                    neighbour: e.nb,
                    capacity: t,
                });
            }
            cap[p as usize] = total.unwrap_or(0);
            self.cols[d][p as usize] = self.intern(p as usize, &hops);
        }
        let members = std::mem::take(&mut self.classes[ci].members);
        for &m in &members {
            let sib = self.dests[m];
            if sib == dest {
                continue;
            }
            // The first link to each parent carries the run's total speed; its parallels follow.
            let mut via = 0u64;
            hops.clear();
            for e in &self.g.up[sib] {
                let pc = cap[e.nb as usize];
                if pc == NOT_PARENT {
                    continue;
                }
                if e.total != 0 {
                    via = e.total.min(pc);
                }
                if pc > 0 {
                    hops.push(Hop {
                        link: e.link,
                        neighbour: e.nb,
                        capacity: via,
                    });
                }
            }
            self.cols[d][sib] = self.intern(sib, &hops);
        }
        for &p in &parents {
            cap[p as usize] = NOT_PARENT;
        }
        self.classes[ci].members = members;
        self.classes[ci].parents = parents;
        self.parent_cap = cap;
        self.hops_buf = hops;
    }

    /// Takes link `l` down or up and recomputes what that changes. Returns the switches whose
    /// desired state changed (their new state is in [`Compiler::switches`]).
    pub fn set_link(&mut self, l: LinkIdx, down: bool) -> Vec<SwitchIdx> {
        self.set_link_delta(l, down)
            .into_iter()
            .map(|d| d.switch)
            .collect()
    }

    /// As [`Compiler::set_link`], with what changed at each switch (ascending by switch): the
    /// routes and groups before and after, so a caller maps and diffs only those.
    pub fn set_link_delta(&mut self, l: LinkIdx, down: bool) -> Vec<SwitchDelta> {
        let t = self.t;
        if self.links.is_down(l) == down {
            return Vec::new();
        }
        self.links.set_down(l, down);
        let live = !down && t.link_admin_up(l);
        self.g.set_link(t, l, live);
        let (a, b) = (t.links[l].a.switch, t.links[l].b.switch);
        let full = self.regroup(a, b);
        for ci in 0..self.classes.len() {
            if self.classes[ci].members.is_empty() {
                continue;
            }
            if full.contains(&ci) {
                self.reroute_class(ci);
            } else {
                self.update_class(ci, a, b);
            }
        }
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        let out = touched.iter().map(|&s| self.retable(s)).collect();
        touched.clear();
        self.touched = touched;
        out
    }

    /// An endpoint (`a`, `b`) of a changed link that is a destination leaf may change class:
    /// moves it, and returns the classes to recompute whole (rare: only the two ends of the
    /// link can move), ascending.
    fn regroup(&mut self, a: SwitchIdx, b: SwitchIdx) -> Vec<usize> {
        let n = self.t.switches.len();
        let mut full: Vec<usize> = Vec::new();
        for e in [a, b] {
            let Some(d) = self.dests.iter().position(|&x| x == e) else {
                continue;
            };
            let ci = self.class_of_dest[d];
            let sig = signature(&self.g, e);
            let parents: Vec<u32> = sig.iter().map(|x| x.0).collect();
            if parents == self.classes[ci].parents && self.classes[ci].members.len() != 1 {
                continue;
            }
            self.classes[ci].members.retain(|&m| m != d);
            let target = (0..self.classes.len()).find(|&c| {
                !self.classes[c].members.is_empty()
                    && signature(&self.g, self.dests[self.classes[c].members[0]]) == sig
            });
            let nc = match target {
                Some(c) => c,
                None => {
                    // Reuse a class left empty by earlier changes: a link that flaps must not
                    // leave a routing state behind each time.
                    let empty = (0..self.classes.len())
                        .find(|&c| self.classes[c].members.is_empty() && c != ci);
                    match empty {
                        Some(c) => {
                            self.classes[c].parents = parents;
                            c
                        }
                        None => {
                            self.classes.push(Class {
                                members: Vec::new(),
                                parents,
                                state: Scratch::new(n),
                            });
                            self.classes.len() - 1
                        }
                    }
                }
            };
            self.classes[nc].members.push(d);
            self.class_of_dest[d] = nc;
            full.push(nc);
            if !self.classes[ci].members.is_empty() {
                full.push(ci);
            }
        }
        full.sort_unstable();
        full.dedup();
        full
    }

    /// Routes class `ci` whole and records every column entry that changed.
    fn reroute_class(&mut self, ci: usize) {
        let n = self.t.switches.len();
        let mut snap = std::mem::take(&mut self.snapshot);
        snap.clear();
        for &d in &self.classes[ci].members {
            snap.extend_from_slice(&self.cols[d]);
        }
        self.route_class(ci);
        for (k, &d) in self.classes[ci].members.iter().enumerate() {
            let old = &snap[k * n..(k + 1) * n];
            for (s, (&o, &c)) in old.iter().zip(&self.cols[d]).enumerate() {
                if o != c {
                    record(&mut self.pending, &mut self.touched, s, d, o);
                }
            }
        }
        self.snapshot = snap;
    }

    /// Updates class `ci` after a change of the links at `a` and `b`, from its representative's
    /// routing state; the other members follow where their columns agree with it.
    fn update_class(&mut self, ci: usize, a: SwitchIdx, b: SwitchIdx) {
        let eq = self.equal_weights;
        let rep = self.classes[ci].members[0];
        let dest = self.dests[rep];
        let mut state = std::mem::replace(&mut self.classes[ci].state, Scratch::new(0));
        let mut touched_switches: Vec<usize> = Vec::new();
        routing::update(&self.g, &mut state, &mut self.marks, dest, &[a, b], |s| {
            touched_switches.push(s)
        });
        let mut hops = Vec::new();
        let mut changes: Vec<(usize, u32)> = Vec::new();
        for s in touched_switches {
            routing::hops_at(&self.g, &state, dest, s, &mut hops);
            let id = self.sets.intern(&self.g, eq, s, &hops);
            if id != self.cols[rep][s] {
                changes.push((s, id));
            }
        }
        self.classes[ci].state = state;
        let class = &self.classes[ci];
        for (s, id) in changes {
            record(
                &mut self.pending,
                &mut self.touched,
                s,
                rep,
                self.cols[rep][s],
            );
            self.cols[rep][s] = id;
            let patched = class.parents.contains(&(s as u32))
                || class.members.iter().any(|&m| self.dests[m] == s);
            if !patched {
                for &d in &class.members[1..] {
                    record(&mut self.pending, &mut self.touched, s, d, self.cols[d][s]);
                    self.cols[d][s] = id;
                }
            }
        }
    }

    /// Brings switch `s`'s table up to date with the sets recorded as changed.
    fn retable(&mut self, s: SwitchIdx) -> SwitchDelta {
        let mut changes = std::mem::take(&mut self.pending[s]);
        // Stable: the first record of a destination holds its set before the change.
        changes.sort_by_key(|e| e.0);
        changes.dedup_by_key(|e| e.0);
        let cols = &self.cols;
        changes.retain(|&(d, old)| cols[d as usize][s] != old);
        let cx = Ctx {
            t: self.t,
            links: &self.links,
            dests: &self.infos,
            order: &self.order,
            modes: &self.modes,
        };
        let sw = &mut self.switches[s];
        let patched = (changes.len() <= self.patch_limit)
            .then(|| {
                tables::patch(
                    &cx,
                    s,
                    &changes,
                    |d| cols[d][s],
                    &self.sets.tables[s],
                    &self.nexthops[s],
                    &mut sw.routes,
                    &mut sw.groups,
                    &mut self.tables[s],
                    &mut self.patch_buf,
                )
            })
            .flatten();
        let delta = patched.unwrap_or_else(|| {
            let row: Vec<u32> = cols.iter().map(|c| c[s]).collect();
            let (routes, groups, st) =
                tables::build(&cx, s, &row, &self.sets.tables[s], &self.nexthops[s]);
            let old_routes = std::mem::replace(&mut sw.routes, routes);
            let old_groups = std::mem::replace(&mut sw.groups, groups);
            self.tables[s] = st;
            tables::compare(s, old_routes, old_groups, &sw.routes, &sw.groups)
        });
        changes.clear();
        self.pending[s] = changes;
        delta
    }
}

/// The multipath mode of every traffic class in a group toward NICs that take reordering
/// (`ok`) or not (per-packet modes fall back to flowlet).
fn class_modes(t: &Topology, ok: bool) -> Vec<ClassMode> {
    t.qos
        .classes
        .iter()
        .map(|c| {
            let (mode, fallback_from) = if c.routing.per_packet() && !ok {
                (RoutingMode::Flowlet, Some(c.routing))
            } else {
                (c.routing, None)
            };
            ClassMode {
                class: Name::from(c.name.as_str()),
                traffic_class: c.traffic_class,
                mode,
                flowlet_gap_us: c.flowlet_gap.as_micros().min(u64::from(u32::MAX)) as u32,
                fallback_from,
            }
        })
        .collect()
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

fn fnv32(members: &[(u16, u32)]) -> u32 {
    let mut h = 0x811c_9dc5u32;
    for (n, w) in members {
        for b in n.to_le_bytes().iter().chain(w.to_le_bytes().iter()) {
            h = (h ^ u32::from(*b)).wrapping_mul(0x0100_0193);
        }
    }
    h
}

/// A member-set fingerprint from its `fnv32`, never 0 (0 is the pipeline's "no memory" value).
fn epoch_of(fnv: u32) -> u16 {
    ((fnv >> 16) as u16 ^ fnv as u16).max(1)
}

/// Longest-prefix match over a switch's compiled routes (for checkers and tests).
pub fn lookup(routes: &[Route], addr: IpAddr) -> Option<&Route> {
    routes
        .iter()
        .filter(|r| r.prefix.contains(&addr))
        .max_by_key(|r| r.prefix.prefix_len())
}
