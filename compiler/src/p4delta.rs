//! A [`SwitchDelta`] in P4RT_TABLE terms: the entries a link change removes and the ones it
//! sets, mapped by [`p4map::entries`] from only the routes and groups that changed.
//!
//! A link change alters thousands of switches the same way (every leaf of a fat-tree stops
//! using the spine that lost its way to one leaf: the same new group, the same new routes), so
//! the mapped entries are kept in a [`WireMemo`] for the change: each distinct route or group
//! is mapped once. A route's entry depends on the route alone; a group's on its id, epoch,
//! members (nexthop, port, weight) and modes, not on which switch holds it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use weft_p4rt::P4Info;
use weft_topology::Topology;

use crate::p4map::{self, MapError, Stage, WireEntry};
use crate::{Group, PortConfig, Route, SwitchDelta, SwitchDesired};

/// Why a delta could not be mapped.
#[derive(Debug, thiserror::Error)]
pub enum DeltaError {
    #[error(transparent)]
    Map(#[from] MapError),
    /// Not reachable: every route and group maps to at least one entry.
    #[error("switch {switch}: a {what} mapped to no entry")]
    Unmapped { switch: String, what: &'static str },
}

/// One mapped entry, shared by every switch of a change that holds it.
pub type Mapped = Arc<(String, WireEntry)>;

/// What a link change does to one switch's P4RT_TABLE entries: each entry it touches, as it
/// was and as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryDelta {
    /// Entries that go away, as they were, ascending by key.
    pub removed: Vec<Mapped>,
    /// Entries added or rewritten, ascending by key, with what was under the key before
    /// (`None`: nothing).
    pub set: Vec<(Mapped, Option<Mapped>)>,
}

impl EntryDelta {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.set.is_empty()
    }

    /// This change followed by `next` (two links changed together).
    pub fn then(self, next: EntryDelta) -> EntryDelta {
        // key → (before the first, after the second)
        let mut keys: std::collections::BTreeMap<String, (Option<Mapped>, Option<Mapped>)> =
            Default::default();
        for m in self.removed {
            keys.insert(m.0.clone(), (Some(m), None));
        }
        for (m, was) in self.set {
            keys.insert(m.0.clone(), (was, Some(m)));
        }
        for m in next.removed {
            match keys.get_mut(&m.0) {
                Some(e) => e.1 = None,
                None => {
                    keys.insert(m.0.clone(), (Some(m), None));
                }
            }
        }
        for (m, was) in next.set {
            match keys.get_mut(&m.0) {
                Some(e) => e.1 = Some(m),
                None => {
                    keys.insert(m.0.clone(), (was, Some(m)));
                }
            }
        }
        let mut out = EntryDelta::default();
        for (_, (was, now)) in keys {
            match (was, now) {
                (was, Some(m)) => out.set.push((m, was)),
                (Some(w), None) => out.removed.push(w),
                (None, None) => {}
            }
        }
        out
    }
}

/// A word-at-a-time multiply-rotate hash for the memo's keys: they are hashed thousands of
/// times per change (a group's members, port names included) and need no defence against
/// chosen collisions. (Byte-at-a-time FNV made hashing a 31-member group cost more than
/// finding it.)
#[derive(Default)]
struct Fast(u64);

impl Fast {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for Fast {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ (rest.len() as u64) << 59);
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }
    fn write_u16(&mut self, v: u16) {
        self.add(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

type FastBuild = std::hash::BuildHasherDefault<Fast>;

/// A group and its entries.
type MappedGroup = (Group, Arc<[Mapped]>);

/// Routes and groups mapped during one link change (or several applied together).
pub struct WireMemo<'a> {
    t: &'a Topology,
    info: &'a P4Info,
    routes: HashMap<Route, Mapped, FastBuild>,
    /// By a hash of what the entries depend on; the groups kept to tell collisions apart.
    groups: HashMap<u64, Vec<MappedGroup>, FastBuild>,
    /// The last delta mapped and its entries: switches that change alike come one after the
    /// other (a pod's leaves), and a delta equal to the last one maps to the same entries.
    last: Option<(SwitchDelta, Vec<Group>, EntryDelta)>,
    /// Distinct routes and groups mapped (for benchmarks: the rest were found here).
    pub mapped: usize,
}

/// The hash of what a group's entries depend on (not its members' neighbour names).
fn wire_hash(g: &Group) -> u64 {
    let mut h = Fast::default();
    (g.id, g.epoch).hash(&mut h);
    for m in &g.members {
        (m.nexthop_id, m.port_id, m.weight, &*m.port).hash(&mut h);
    }
    for m in &g.modes {
        (m.traffic_class, m.mode, m.flowlet_gap_us).hash(&mut h);
    }
    h.finish()
}

fn same_wire(a: &Group, b: &Group) -> bool {
    a.id == b.id
        && a.epoch == b.epoch
        && a.members.len() == b.members.len()
        && a.members.iter().zip(&b.members).all(|(x, y)| {
            (x.nexthop_id, x.port_id, x.weight, &*x.port)
                == (y.nexthop_id, y.port_id, y.weight, &*y.port)
        })
        && a.modes.len() == b.modes.len()
        && a.modes.iter().zip(&b.modes).all(|(x, y)| {
            (x.traffic_class, x.mode, x.flowlet_gap_us)
                == (y.traffic_class, y.mode, y.flowlet_gap_us)
        })
}

impl<'a> WireMemo<'a> {
    pub fn new(t: &'a Topology, info: &'a P4Info) -> Self {
        WireMemo {
            t,
            info,
            routes: HashMap::default(),
            groups: HashMap::default(),
            last: None,
            mapped: 0,
        }
    }

    /// A switch holding only `routes` and `groups` (and, so that members name their ports,
    /// the ports they use): what [`p4map::entries`] maps of it are exactly their entries, plus
    /// port entries that are dropped.
    fn map(
        &mut self,
        sw: &SwitchDesired,
        routes: Vec<Route>,
        group: Option<&Group>,
    ) -> Result<Vec<Mapped>, DeltaError> {
        self.mapped += 1;
        let ports = group.map_or_else(Vec::new, |g| {
            g.members
                .iter()
                .map(|m| PortConfig {
                    port_id: m.port_id,
                    port: m.port.clone(),
                    router_mac: weft_topology::MacAddr([0; 6]),
                })
                .collect()
        });
        let only = SwitchDesired {
            name: sw.name.clone(),
            device_id: sw.device_id,
            ports,
            nexthops: Default::default(),
            groups: group.map(|g| (g.id, g.clone())).into_iter().collect(),
            routes,
        };
        Ok(p4map::entries(self.t, self.info, &only)?
            .into_iter()
            .filter(|(_, e)| e.stage != Stage::Port)
            .map(Arc::new)
            .collect())
    }

    fn route(&mut self, sw: &SwitchDesired, r: &Route) -> Result<Mapped, DeltaError> {
        if let Some(m) = self.routes.get(r) {
            return Ok(m.clone());
        }
        let m = self
            .map(sw, vec![r.clone()], None)?
            .into_iter()
            .next()
            .ok_or_else(|| unmapped(sw, "route"))?;
        self.routes.insert(r.clone(), m.clone());
        Ok(m)
    }

    fn group(&mut self, sw: &SwitchDesired, g: &Group) -> Result<Arc<[Mapped]>, DeltaError> {
        let h = wire_hash(g);
        if let Some(found) = self
            .groups
            .get(&h)
            .and_then(|v| v.iter().find(|(x, _)| same_wire(x, g)))
        {
            return Ok(found.1.clone());
        }
        let m: Arc<[Mapped]> = self.map(sw, Vec::new(), Some(g))?.into();
        self.groups
            .entry(h)
            .or_default()
            .push((g.clone(), m.clone()));
        Ok(m)
    }

    /// The entries `delta` removes and sets at its switch, whose state is now `sw`.
    pub fn entry_delta(
        &mut self,
        sw: &SwitchDesired,
        delta: &SwitchDelta,
    ) -> Result<EntryDelta, DeltaError> {
        // A route's entries depend on the route alone and a group's on what `same_wire`
        // compares, so a delta like the last one is the last one's entries (the same shared
        // values its own mapping would find in the memo).
        if let Some((d, new, ed)) = &self.last
            && d.routes_old == delta.routes_old
            && d.routes_new == delta.routes_new
            && d.groups_new == delta.groups_new
            && d.groups_old.len() == delta.groups_old.len()
            && d.groups_old
                .iter()
                .zip(&delta.groups_old)
                .all(|(a, b)| same_wire(a, b))
            && new.len() == delta.groups_new.len()
            && new
                .iter()
                .zip(&delta.groups_new)
                .all(|(a, id)| sw.groups.get(id).is_some_and(|b| same_wire(a, b)))
        {
            return Ok(ed.clone());
        }
        let ed = self.map_delta(sw, delta)?;
        let new = delta
            .groups_new
            .iter()
            .filter_map(|id| sw.groups.get(id).cloned())
            .collect();
        let key = SwitchDelta {
            switch: delta.switch,
            routes_old: delta.routes_old.clone(),
            routes_new: delta.routes_new.clone(),
            groups_old: delta.groups_old.clone(),
            groups_new: delta.groups_new.clone(),
        };
        self.last = Some((key, new, ed.clone()));
        Ok(ed)
    }

    fn map_delta(
        &mut self,
        sw: &SwitchDesired,
        delta: &SwitchDelta,
    ) -> Result<EntryDelta, DeltaError> {
        let mut was: Vec<Mapped> = Vec::with_capacity(delta.routes_old.len() + 4);
        for r in &delta.routes_old {
            was.push(self.route(sw, r)?);
        }
        for g in &delta.groups_old {
            was.extend(self.group(sw, g)?.iter().cloned());
        }
        was.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut now: Vec<Mapped> = Vec::with_capacity(delta.routes_new.len() + 4);
        for r in &delta.routes_new {
            now.push(self.route(sw, r)?);
        }
        for id in &delta.groups_new {
            // Every id of a delta is a group the switch holds now.
            if let Some(g) = sw.groups.get(id) {
                now.extend(self.group(sw, g)?.iter().cloned());
            }
        }
        now.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        // Merge the two key-ordered lists.
        let (mut removed, mut set) = (Vec::with_capacity(was.len()), Vec::with_capacity(now.len()));
        let mut was = was.into_iter().peekable();
        for m in now {
            while let Some(w) = was.next_if(|w| w.0 < m.0) {
                removed.push(w);
            }
            let before = was.next_if(|w| w.0 == m.0);
            set.push((m, before));
        }
        removed.extend(was);
        Ok(EntryDelta { removed, set })
    }
}

fn unmapped(sw: &SwitchDesired, what: &'static str) -> DeltaError {
    DeltaError::Unmapped {
        switch: sw.name.clone(),
        what,
    }
}
