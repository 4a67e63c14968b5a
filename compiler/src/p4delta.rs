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

/// What a link change does to one switch's P4RT_TABLE entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryDelta {
    /// Keys of entries that go away (and are not set again in `set`), ascending.
    pub removed: Vec<String>,
    /// Entries added or rewritten, ascending by key.
    pub set: Vec<Mapped>,
}

impl EntryDelta {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.set.is_empty()
    }
}

/// Routes and groups mapped during one link change (or several applied together).
pub struct WireMemo<'a> {
    t: &'a Topology,
    info: &'a P4Info,
    routes: HashMap<Route, Mapped>,
    /// By a hash of what the entries depend on; the groups kept to tell collisions apart.
    groups: HashMap<u64, Vec<(Group, Arc<[Mapped]>)>>,
    /// Distinct routes and groups mapped (for benchmarks: the rest were found here).
    pub mapped: usize,
}

/// The hash of what a group's entries depend on (not its members' neighbour names).
fn wire_hash(g: &Group) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
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
            routes: HashMap::new(),
            groups: HashMap::new(),
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
        let mut set: Vec<Mapped> = Vec::with_capacity(delta.routes_new.len() + 4);
        for r in &delta.routes_new {
            set.push(self.route(sw, r)?);
        }
        for id in &delta.groups_new {
            // Every id of a delta is a group the switch holds now.
            if let Some(g) = sw.groups.get(id) {
                set.extend(self.group(sw, g)?.iter().cloned());
            }
        }
        set.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut removed: Vec<String> = Vec::new();
        let mut gone = |m: &Mapped| {
            if set.binary_search_by(|x| x.0.cmp(&m.0)).is_err() {
                removed.push(m.0.clone());
            }
        };
        for r in &delta.routes_old {
            gone(&self.route(sw, r)?);
        }
        for g in &delta.groups_old {
            for m in self.group(sw, g)?.iter() {
                gone(m);
            }
        }
        removed.sort_unstable();
        removed.dedup();
        Ok(EntryDelta { removed, set })
    }
}

fn unmapped(sw: &SwitchDesired, what: &'static str) -> DeltaError {
    DeltaError::Unmapped {
        switch: sw.name.clone(),
        what,
    }
}
