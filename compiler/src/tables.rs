//! One switch's routes and groups from its next-hop sets toward every destination leaf: built
//! whole ([`build`]) or, after a link change, patched from the destinations whose set changed
//! ([`patch`]). The two must agree exactly; `tests/compile_props.rs` checks that they do.

use std::collections::BTreeMap;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use weft_topology::{Peer, SwitchIdx, Topology};

use crate::merge::{ABSENT, Affected, MergePlan, NodeChange, Packed, pack, unpack};
use crate::{
    ClassMode, DestInfo, GROUP_ID_SPACE, Group, LinkState, Member, NO_ROUTE, Route, SetTable,
    SwitchDelta, Target,
};

/// What building a switch's table reads besides its own next-hop sets. A switch's nexthops
/// are given as members of weight 1, sorted by nexthop id.
pub(crate) struct Ctx<'a> {
    pub t: &'a Topology,
    pub links: &'a LinkState,
    pub dests: &'a [DestInfo],
    pub order: &'a MergePlan,
    /// A group's modes, per whether per-packet modes are allowed toward it.
    pub modes: &'a [Vec<ClassMode>; 2],
}

/// Buffers of [`patch`], reused from switch to switch.
#[derive(Debug, Default)]
pub(crate) struct PatchBuf {
    leaves: Vec<u32>,
    /// (prefix, key before, key after) of every leaf route that changes.
    changed: Vec<(IpNet, Option<Packed>, Option<Packed>)>,
    nodes: Vec<NodeChange>,
    affected: Vec<Affected>,
    refs: Vec<(Packed, u32)>,
    keys: Vec<Packed>,
    /// The changed prefixes in route order: (address, length, index into `changed`).
    order: Vec<(std::net::IpAddr, u8, u32)>,
    /// A table's routes are rebuilt here and the buffers swapped.
    spare: Vec<Route>,
}

/// What a patch needs to know of a switch's table besides its routes and groups.
#[derive(Debug, Default)]
pub(crate) struct TableState {
    /// Emitted merge-plan nodes with their keys, ascending.
    merged: Vec<(u32, Packed)>,
    /// How many leaf routes (merged, and host routes of other leaves) use each key, by key.
    refs: Vec<(Packed, u32)>,
    /// The group id of each key with two or more members, by key.
    ids: Vec<(Packed, u16)>,
    /// Destinations the switch has no path to, ascending.
    pub unreachable: Vec<u32>,
}

fn is_group(sets: &SetTable, v: Packed) -> bool {
    let (set, _) = unpack(v);
    set != NO_ROUTE && sets.sets[set as usize].len() > 1
}

fn target(sets: &SetTable, ids: &[(Packed, u16)], v: Packed) -> Target {
    let (set, _) = unpack(v);
    if set == NO_ROUTE {
        return Target::Drop;
    }
    let m = &sets.sets[set as usize];
    if m.len() == 1 {
        return Target::Nexthop(m[0].0);
    }
    match ids.binary_search_by_key(&v, |e| e.0) {
        Ok(i) => Target::Group(ids[i].1),
        // Every key with two or more members has an id (`group_ids`): not reachable.
        Err(_) => Target::Drop,
    }
}

fn route_order(r: &Route) -> (std::net::IpAddr, u8) {
    (r.prefix.network(), r.prefix.prefix_len())
}

/// Routes to the switch's own hosts: to their port, or dropped while the host is cut off.
fn attached(cx: &Ctx, s: SwitchIdx, out: &mut Vec<Route>) {
    for p in &cx.t.switches[s].ports {
        if let Peer::Host { host } = p.peer {
            let h = &cx.t.hosts[host];
            let target = if cx.links.is_host_down(host) {
                Target::Drop
            } else {
                Target::Nexthop(p.id as u16)
            };
            out.push(Route {
                prefix: IpNet::V4(Ipv4Net::from(h.ipv4)),
                target,
            });
            if let Some(a) = h.ipv6 {
                out.push(Route {
                    prefix: IpNet::V6(Ipv6Net::from(a)),
                    target,
                });
            }
        }
    }
}

/// Deterministic group ids for `keys` (ascending): a hash of the member set, probed in
/// member-set order, so an id changes only when its members do (or, rarely, when a colliding
/// neighbour does).
fn group_ids(keys: &[Packed], sets: &SetTable) -> Vec<(Packed, u16)> {
    // By (members, per-packet allowed), then key.
    type ByMembers<'s> = (&'s Vec<(u16, u32)>, bool, Packed);
    let mut sorted: Vec<ByMembers> = keys
        .iter()
        .map(|&v| {
            let (set, ok) = unpack(v);
            (&sets.sets[set as usize], ok, v)
        })
        .collect();
    sorted.sort_unstable();
    let mut used = [false; GROUP_ID_SPACE as usize];
    used[0] = true;
    let mut ids = Vec::with_capacity(keys.len());
    for (_, ok, v) in sorted {
        let h = sets.fnv[unpack(v).0 as usize] ^ u32::from(ok).wrapping_mul(0x9e37_79b9);
        let mut id = (h % u32::from(GROUP_ID_SPACE)) as u16;
        let mut tries = 0;
        while used[id as usize] && tries < GROUP_ID_SPACE {
            id = (id + 1) % GROUP_ID_SPACE;
            tries += 1;
        }
        used[id as usize] = true;
        ids.push((v, id));
    }
    ids.sort_unstable();
    ids
}

fn group(cx: &Ctx, sets: &SetTable, nexthops: &[Member], v: Packed, id: u16) -> Group {
    let (set, ok) = unpack(v);
    let m = &sets.sets[set as usize];
    // Both are sorted by nexthop id: one pass over the switch's nexthops, in memory order.
    let mut all = nexthops.iter();
    let members: Vec<Member> = m
        .iter()
        .filter_map(|&(nh, w)| {
            // Sets are made of the switch's own ports, each of which has a nexthop.
            let x = all.find(|x| x.nexthop_id == nh)?;
            Some(Member {
                weight: w,
                ..x.clone()
            })
        })
        .collect();
    Group {
        id,
        epoch: crate::epoch_of(sets.fnv[set as usize]),
        members,
        modes: cx.modes[usize::from(ok)].clone(),
    }
}

fn count(refs: &mut Vec<(Packed, u32)>, v: Packed, up: bool) {
    match refs.binary_search_by_key(&v, |e| e.0) {
        Ok(i) if up => refs[i].1 += 1,
        Ok(i) => {
            refs[i].1 -= 1;
            if refs[i].1 == 0 {
                refs.remove(i);
            }
        }
        Err(i) if up => refs.insert(i, (v, 1)),
        // Every key counted down was counted up when its route was made.
        Err(_) => {}
    }
}

/// The whole table of switch `s`: `row[d]` is its next-hop set toward destination `d`.
pub(crate) fn build(
    cx: &Ctx,
    s: SwitchIdx,
    row: &[u32],
    sets: &SetTable,
    nexthops: &[Member],
) -> (Vec<Route>, BTreeMap<u16, Group>, TableState) {
    let mut st = TableState::default();
    // Routes toward every other destination leaf, each keyed by (next-hop set, whether
    // per-packet modes are allowed toward it).
    let mut keyed: Vec<(IpNet, Packed)> = Vec::with_capacity(64);
    for (d, info) in cx.dests.iter().enumerate() {
        if info.switch == s {
            continue;
        }
        if row[d] == NO_ROUTE {
            st.unreachable.push(d as u32);
        }
        keyed.extend(
            info.host_routes
                .iter()
                .map(|&(net, ok)| (net, pack(row[d], ok))),
        );
    }
    // Leaf prefixes, merged bottom-up along the fabric-wide merge tree where siblings agree.
    cx.order.evaluate(
        |d| {
            let info = &cx.dests[d as usize];
            if info.switch == s {
                ABSENT
            } else {
                pack(row[d as usize], info.all_ok)
            }
        },
        cx.t.routing.aggregate,
        &mut st.merged,
    );
    keyed.extend(
        st.merged
            .iter()
            .map(|&(n, v)| (cx.order.nodes[n as usize], v)),
    );
    for &(_, v) in &keyed {
        count(&mut st.refs, v, true);
    }
    // Groups: one per distinct (member set, per-packet allowed) with two or more members.
    let keys: Vec<Packed> = st
        .refs
        .iter()
        .map(|e| e.0)
        .filter(|&v| is_group(sets, v))
        .collect();
    st.ids = group_ids(&keys, sets);
    let mut routes: Vec<Route> = keyed
        .iter()
        .map(|&(prefix, v)| Route {
            prefix,
            target: target(sets, &st.ids, v),
        })
        .collect();
    attached(cx, s, &mut routes);
    routes.sort_by_key(route_order);
    // A link change splits a merged route into a dozen: room for them without moving the rest.
    routes.reserve(16);
    let groups = st
        .ids
        .iter()
        .map(|&(v, id)| (id, group(cx, sets, nexthops, v, id)))
        .collect();
    (routes, groups, st)
}

/// Patches switch `s`'s `routes`, `groups` and state after its next-hop sets toward the
/// destinations in `changes` (destination, set before; ascending, each once) took the values
/// `now(d)`. Returns what changed, or `None` (nothing touched) when a group id other than
/// those of the changed sets would move: the caller then builds the table whole.
// The table's parts are borrowed one by one from the compiler, whose other fields are read at
// the same time; bundling them would only add a struct to unpack.
#[allow(clippy::too_many_arguments)]
pub(crate) fn patch(
    cx: &Ctx,
    s: SwitchIdx,
    changes: &[(u32, u32)],
    now: impl Fn(usize) -> u32,
    sets: &SetTable,
    nexthops: &[Member],
    routes: &mut Vec<Route>,
    groups: &mut BTreeMap<u16, Group>,
    st: &mut TableState,
    buf: &mut PatchBuf,
) -> Option<SwitchDelta> {
    buf.find_changes(cx, s, changes, &now, st);
    let ids = match buf.new_group_ids(sets, st) {
        GroupIds::Same => None,
        GroupIds::New(ids) => Some(ids),
        GroupIds::Moved => return None,
    };

    // Commit.
    let mut delta = SwitchDelta {
        switch: s,
        ..SwitchDelta::default()
    };
    for &(n, _, new) in buf.nodes.iter() {
        match st.merged.binary_search_by_key(&n, |e| e.0) {
            Ok(i) => match new {
                Some(v) => st.merged[i].1 = v,
                None => {
                    st.merged.remove(i);
                }
            },
            Err(i) => {
                if let Some(v) = new {
                    st.merged.insert(i, (n, v));
                }
            }
        }
    }
    std::mem::swap(&mut st.refs, &mut buf.refs);
    if let Some(ids) = ids {
        for &(v, id) in &st.ids {
            if ids.binary_search_by_key(&v, |e| e.0).is_err()
                && let Some(g) = groups.remove(&id)
            {
                delta.groups_old.push(g);
            }
        }
        for &(v, id) in &ids {
            if st.ids.binary_search_by_key(&v, |e| e.0).is_err() {
                groups.insert(id, group(cx, sets, nexthops, v, id));
                delta.groups_new.push(id);
            }
        }
        st.ids = ids;
    }
    for &(d, old) in changes {
        if cx.dests[d as usize].switch == s {
            continue;
        }
        let (was, is) = (old == NO_ROUTE, now(d as usize) == NO_ROUTE);
        if was != is {
            match st.unreachable.binary_search(&d) {
                Ok(i) if !is => {
                    st.unreachable.remove(i);
                }
                Err(i) if is => st.unreachable.insert(i, d),
                _ => {}
            }
        }
    }
    buf.merge_routes(sets, st, routes, &mut delta);
    delta.groups_old.sort_by_key(|g| g.id);
    delta.groups_new.sort_unstable();
    Some(delta)
}

/// The group ids after a patch.
enum GroupIds {
    Same,
    New(Vec<(Packed, u16)>),
    /// A kept group's id would move, which would retarget routes outside the patch.
    Moved,
}

impl PatchBuf {
    /// The leaf routes of switch `s` whose key changes: the host routes of the changed
    /// destinations, and the merged prefixes above them (into `changed`; the merge plan's
    /// nodes into `nodes`).
    fn find_changes(
        &mut self,
        cx: &Ctx,
        s: SwitchIdx,
        changes: &[(u32, u32)],
        now: &impl Fn(usize) -> u32,
        st: &TableState,
    ) {
        let key_of_leaf = |n: u32| {
            let d = cx.order.leaves[n as usize].1 as usize;
            let info = &cx.dests[d];
            if info.switch == s {
                ABSENT
            } else {
                pack(now(d), info.all_ok)
            }
        };
        self.leaves.clear();
        self.changed.clear();
        self.nodes.clear();
        for &(d, old) in changes {
            let info = &cx.dests[d as usize];
            if info.switch == s {
                continue;
            }
            self.leaves
                .extend_from_slice(cx.order.leaves_of(d as usize));
            let new = now(d as usize);
            for &(net, ok) in &info.host_routes {
                self.changed
                    .push((net, Some(pack(old, ok)), Some(pack(new, ok))));
            }
        }
        cx.order.patch(
            &st.merged,
            &self.leaves,
            key_of_leaf,
            cx.t.routing.aggregate,
            &mut self.affected,
            &mut self.nodes,
        );
        self.changed.extend(
            self.nodes
                .iter()
                .map(|&(n, was, new)| (cx.order.nodes[n as usize], was, new)),
        );
    }

    /// Counts the keys after the changes (into `refs`) and numbers their groups again if the
    /// set of group keys changed.
    fn new_group_ids(&mut self, sets: &SetTable, st: &TableState) -> GroupIds {
        let refs = &mut self.refs;
        refs.clear();
        refs.extend_from_slice(&st.refs);
        for &(_, was, new) in self.changed.iter() {
            if let Some(v) = was {
                count(refs, v, false);
            }
            if let Some(v) = new {
                count(refs, v, true);
            }
        }
        let keys = &mut self.keys;
        keys.clear();
        keys.extend(refs.iter().map(|e| e.0).filter(|&v| is_group(sets, v)));
        let same_keys =
            keys.len() == st.ids.len() && keys.iter().zip(&st.ids).all(|(a, b)| *a == b.0);
        if same_keys {
            return GroupIds::Same;
        }
        let ids = group_ids(keys, sets);
        let moved = ids.iter().any(|&(v, id)| {
            st.ids
                .binary_search_by_key(&v, |e| e.0)
                .is_ok_and(|i| st.ids[i].1 != id)
        });
        if moved {
            GroupIds::Moved
        } else {
            GroupIds::New(ids)
        }
    }

    /// The changed prefixes in route order (ties in the order they came), merged with the
    /// routes in one pass into the spare buffer: inserting and removing one by one moved the
    /// whole table once per change (a leaf's split supernet is a dozen changes).
    fn merge_routes(
        &mut self,
        sets: &SetTable,
        st: &TableState,
        routes: &mut Vec<Route>,
        delta: &mut SwitchDelta,
    ) {
        let (order, changed) = (&mut self.order, &self.changed);
        order.clear();
        order.extend(
            changed
                .iter()
                .enumerate()
                .map(|(i, c)| (c.0.network(), c.0.prefix_len(), i as u32)),
        );
        order.sort_unstable();
        let mut old = std::mem::take(routes);
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        out.reserve(old.len() + order.len() + 16);
        delta.routes_old.reserve(order.len());
        delta.routes_new.reserve(order.len());
        let mut held = old.drain(..).peekable();
        let mut k = 0;
        while k < order.len() {
            let key = (order[k].0, order[k].1);
            while let Some(r) = held.next_if(|r| route_order(r) < key) {
                out.push(r);
            }
            // The route under this prefix as each change of it finds it.
            let mut cur = held.next_if(|r| route_order(r) == key);
            while k < order.len() && (order[k].0, order[k].1) == key {
                let (prefix, _, new) = changed[order[k].2 as usize];
                let new = new.map(|v| Route {
                    prefix,
                    target: target(sets, &st.ids, v),
                });
                cur = match (cur, new) {
                    (Some(c), Some(r)) if c == r => Some(c),
                    (Some(c), Some(r)) => {
                        delta.routes_old.push(c);
                        delta.routes_new.push(r.clone());
                        Some(r)
                    }
                    (Some(c), None) => {
                        delta.routes_old.push(c);
                        None
                    }
                    (None, Some(r)) => {
                        delta.routes_new.push(r.clone());
                        Some(r)
                    }
                    (None, None) => None,
                };
                k += 1;
            }
            out.extend(cur);
        }
        out.extend(held);
        *routes = out;
        self.spare = old;
    }
}

/// What differs between a switch's table before and after (both sorted as built).
pub(crate) fn compare(
    s: SwitchIdx,
    old_routes: Vec<Route>,
    old_groups: BTreeMap<u16, Group>,
    routes: &[Route],
    groups: &BTreeMap<u16, Group>,
) -> SwitchDelta {
    let mut delta = SwitchDelta {
        switch: s,
        ..SwitchDelta::default()
    };
    let mut new = routes.iter().peekable();
    for r in old_routes {
        while let Some(n) = new.next_if(|n| route_order(n) < route_order(&r)) {
            delta.routes_new.push(n.clone());
        }
        match new.next_if(|n| route_order(n) == route_order(&r)) {
            Some(n) if *n == r => {}
            Some(n) => {
                delta.routes_new.push(n.clone());
                delta.routes_old.push(r);
            }
            None => delta.routes_old.push(r),
        }
    }
    delta.routes_new.extend(new.cloned());
    for (id, g) in groups {
        if old_groups.get(id) != Some(g) {
            delta.groups_new.push(*id);
        }
    }
    for (id, g) in old_groups {
        if groups.get(&id) != Some(&g) {
            delta.groups_old.push(g);
        }
    }
    delta
}
