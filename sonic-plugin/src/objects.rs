//! What the switch holds, as a map from identity to P4Runtime entity, and the ordered plan that
//! turns one such map into another.
//!
//! ```text
//!   current ──┐                    stage (rank 0..6, upserts ascending)   port config, QoS, clone sessions
//!             ├─ diff ─► Plan ───► ...                                     nexthops
//!   desired ──┘                    stage (rank 2) action-profile members   members
//!                                  stage (rank 3) groups                   groups
//!                                  stage (rank 4) wcmp tables, 5 mode, 6 routes
//!                                  then deletes, rank 6 down to 0 (make before break)
//! ```
//!
//! Every write within a stage is independent of the others, so a stage is one pipelined
//! `Client::write`; stages run one after the other.

use std::collections::{BTreeMap, HashMap};

use prost::Message;
use weft_p4rt::proto::p4::v1::{
    Entity, TableEntry, Update, action_profile_group, entity, packet_replication_engine_entry,
    update,
};

/// The identity of one switch object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjKey {
    /// A table entry: its table, encoded match fields (sorted by id) and priority.
    Entry {
        table_id: u32,
        matches: Vec<u8>,
        priority: i32,
    },
    /// The default entry of a table (only ever modified).
    Default {
        table_id: u32,
    },
    Member {
        profile_id: u32,
        member_id: u32,
    },
    Group {
        profile_id: u32,
        group_id: u32,
    },
    CloneSession {
        session_id: u32,
    },
}

impl ObjKey {
    /// The identity of an entity; `None` for kinds the plugin does not manage.
    pub fn of(e: &Entity) -> Option<ObjKey> {
        use entity::Entity as E;
        Some(match e.entity.as_ref()? {
            E::TableEntry(t) => ObjKey::of_table_entry(t),
            E::ActionProfileMember(m) => ObjKey::Member {
                profile_id: m.action_profile_id,
                member_id: m.member_id,
            },
            E::ActionProfileGroup(g) => ObjKey::Group {
                profile_id: g.action_profile_id,
                group_id: g.group_id,
            },
            E::PacketReplicationEngineEntry(p) => match p.r#type.as_ref()? {
                packet_replication_engine_entry::Type::CloneSessionEntry(c) => {
                    ObjKey::CloneSession {
                        session_id: c.session_id,
                    }
                }
                packet_replication_engine_entry::Type::MulticastGroupEntry(_) => return None,
            },
            _ => return None,
        })
    }

    pub fn of_table_entry(t: &TableEntry) -> ObjKey {
        if t.is_default_action {
            return ObjKey::Default {
                table_id: t.table_id,
            };
        }
        let mut matches = Vec::new();
        for m in &t.r#match {
            m.encode_length_delimited(&mut matches).ok();
        }
        ObjKey::Entry {
            table_id: t.table_id,
            matches,
            priority: t.priority,
        }
    }

    pub fn table_id(&self) -> Option<u32> {
        match self {
            ObjKey::Entry { table_id, .. } | ObjKey::Default { table_id } => Some(*table_id),
            _ => None,
        }
    }
}

/// Objects by identity (the whole switch, or everything the plugin owns).
pub type Objects = BTreeMap<ObjKey, Entity>;

/// The objects of one P4RT_TABLE key: one for a route, a few for a group. Sorted by identity in
/// a vector rather than a [`BTreeMap`]: a map allocates a whole node (11 slots of key and
/// entity, ~4 KiB) for its first entry, which for 100k routes was a third of the plugin's
/// time in malloc and page faults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyObjects(Vec<(ObjKey, Entity)>);

impl KeyObjects {
    pub fn new() -> Self {
        KeyObjects(Vec::new())
    }

    fn find(&self, k: &ObjKey) -> Result<usize, usize> {
        self.0.binary_search_by(|(x, _)| x.cmp(k))
    }

    /// Inserts or replaces; returns what `k` held before.
    pub fn insert(&mut self, k: ObjKey, e: Entity) -> Option<Entity> {
        match self.find(&k) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, e)),
            Err(i) => {
                self.0.insert(i, (k, e));
                None
            }
        }
    }

    pub fn get(&self, k: &ObjKey) -> Option<&Entity> {
        self.find(k).ok().map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, k: &ObjKey) -> bool {
        self.find(k).is_ok()
    }

    pub fn remove(&mut self, k: &ObjKey) -> Option<Entity> {
        self.find(k).ok().map(|i| self.0.remove(i).1)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// In identity order, like a map.
    pub fn iter(&self) -> impl Iterator<Item = (&ObjKey, &Entity)> {
        self.0.iter().map(|(k, e)| (k, e))
    }

    pub fn keys(&self) -> impl Iterator<Item = &ObjKey> {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &Entity> {
        self.0.iter().map(|(_, e)| e)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Entity> {
        self.0.iter_mut().map(|(_, e)| e)
    }

    pub fn into_values(self) -> impl Iterator<Item = Entity> {
        self.0.into_iter().map(|(_, e)| e)
    }
}

impl FromIterator<(ObjKey, Entity)> for KeyObjects {
    fn from_iter<I: IntoIterator<Item = (ObjKey, Entity)>>(iter: I) -> Self {
        let mut v: Vec<(ObjKey, Entity)> = iter.into_iter().collect();
        // Later entries win, as a map's inserts would.
        v.reverse();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        KeyObjects(v)
    }
}

impl<const N: usize> From<[(ObjKey, Entity); N]> for KeyObjects {
    fn from(a: [(ObjKey, Entity); N]) -> Self {
        a.into_iter().collect()
    }
}

impl IntoIterator for KeyObjects {
    type Item = (ObjKey, Entity);
    type IntoIter = std::vec::IntoIter<(ObjKey, Entity)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// The comparable content of an entity: what the plugin writes, without what the switch adds
/// or reports unreliably (counter data, meter configs; BMv2 reads group watch ports back wrong,
/// so groups compare on member ids and weights only).
pub fn normalized(e: &Entity) -> Entity {
    use entity::Entity as E;
    let mut e = e.clone();
    match e.entity.as_mut() {
        Some(E::TableEntry(t)) => {
            t.counter_data = None;
            t.meter_config = None;
            t.meter_counter_data = None;
            t.idle_timeout_ns = 0;
            t.time_since_last_hit = None;
            t.metadata = Vec::new();
        }
        Some(E::ActionProfileGroup(g)) => {
            g.max_size = 0;
            for m in &mut g.members {
                m.watch_kind = None::<action_profile_group::member::WatchKind>;
            }
            g.members.sort_by_key(|m| m.member_id);
        }
        _ => {}
    }
    e
}

pub fn same(a: &Entity, b: &Entity) -> bool {
    normalized(a) == normalized(b)
}

/// Dependency rank of an object (see the module diagram); ranks come from the caller, who
/// knows which table is which.
pub trait Ranker {
    fn rank(&self, key: &ObjKey) -> u8;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Upsert,
    Delete,
}

/// One write, with the owner it is done for (an index the caller chose).
#[derive(Debug, Clone)]
pub struct PlannedUpdate<O> {
    pub key: ObjKey,
    pub update: Update,
    pub owner: O,
}

/// The writes of one stage. The updates are kept apart from their keys and owners so a
/// stage nobody failed in is written as it stands, without copying every update.
#[derive(Debug, Clone)]
pub struct Stage<O> {
    pub updates: Vec<Update>,
    pub keys: Vec<ObjKey>,
    pub owners: Vec<O>,
}

impl<O> Default for Stage<O> {
    fn default() -> Self {
        Stage {
            updates: Vec::new(),
            keys: Vec::new(),
            owners: Vec::new(),
        }
    }
}

impl<O: Clone> Stage<O> {
    pub fn len(&self) -> usize {
        self.updates.len()
    }

    pub fn is_empty(&self) -> bool {
        self.updates.is_empty()
    }

    /// Update `i` with its key and owner.
    pub fn planned(&self, i: usize) -> PlannedUpdate<O> {
        PlannedUpdate {
            key: self.keys[i].clone(),
            update: self.updates[i].clone(),
            owner: self.owners[i].clone(),
        }
    }
}

/// Stages in execution order.
#[derive(Debug, Clone)]
pub struct Plan<O> {
    pub stages: BTreeMap<(Phase, i16), Stage<O>>,
    /// Owners that hold only if others of the same plan do (a route whose nexthop is in the
    /// same batch; a nexthop deleted once the routes using it moved away), with the status and
    /// message an owner gets when one it depends on fails.
    pub deps: HashMap<O, Vec<(O, crate::StatusCode, String)>>,
}

impl<O> Default for Plan<O> {
    fn default() -> Self {
        Plan {
            stages: BTreeMap::new(),
            deps: HashMap::new(),
        }
    }
}

impl<O: Clone> Plan<O> {
    pub fn len(&self) -> usize {
        self.stages.values().map(Stage::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.stages.values().all(Stage::is_empty)
    }

    /// Every update in execution order.
    pub fn updates(&self) -> impl Iterator<Item = &Update> {
        self.stages.values().flat_map(|s| &s.updates)
    }

    fn push(&mut self, phase: Phase, rank: u8, u: PlannedUpdate<O>) {
        // Deletes run from the highest rank down.
        let r = match phase {
            Phase::Upsert => i16::from(rank),
            Phase::Delete => -i16::from(rank),
        };
        let stage = self.stages.entry((phase, r)).or_default();
        stage.updates.push(u.update);
        stage.keys.push(u.key);
        stage.owners.push(u.owner);
    }

    /// Adds what turns `current` into `desired`, for `owner`.
    pub fn add_diff(
        &mut self,
        ranker: &dyn Ranker,
        current: &KeyObjects,
        desired: &KeyObjects,
        owner: O,
    ) {
        for (k, want) in desired.iter() {
            let ty = match current.get(k) {
                Some(have) if same(have, want) => continue,
                Some(_) => update::Type::Modify,
                None if matches!(k, ObjKey::Default { .. }) => update::Type::Modify,
                None => update::Type::Insert,
            };
            self.push(
                Phase::Upsert,
                ranker.rank(k),
                PlannedUpdate {
                    key: k.clone(),
                    update: Update {
                        r#type: ty as i32,
                        entity: Some(want.clone()),
                    },
                    owner: owner.clone(),
                },
            );
        }
        for (k, have) in current.iter() {
            if desired.contains_key(k) || matches!(k, ObjKey::Default { .. }) {
                continue;
            }
            self.push(
                Phase::Delete,
                ranker.rank(k),
                PlannedUpdate {
                    key: k.clone(),
                    update: Update {
                        r#type: update::Type::Delete as i32,
                        entity: Some(delete_form(have)),
                    },
                    owner: owner.clone(),
                },
            );
        }
    }
}

/// What a DELETE needs: the identity; actions stay (P4Runtime ignores them) except for
/// members and groups where BMv2 wants only the ids.
fn delete_form(e: &Entity) -> Entity {
    use entity::Entity as E;
    let mut e = normalized(e);
    match e.entity.as_mut() {
        Some(E::ActionProfileMember(m)) => m.action = None,
        Some(E::ActionProfileGroup(g)) => g.members.clear(),
        _ => {}
    }
    e
}

/// A P4RT_TABLE key, shared by everything that names it (the installed map, object owners,
/// reference users): one allocation per key instead of one per structure.
pub type KeyName = std::sync::Arc<str>;

/// Which owner holds each object (so two keys cannot claim one switch object).
#[derive(Debug, Default, Clone)]
pub struct Owners {
    map: foldhash::HashMap<ObjKey, KeyName>,
}

impl Owners {
    pub fn get(&self, k: &ObjKey) -> Option<&str> {
        self.map.get(k).map(|o| &**o)
    }
    pub fn claim(&mut self, objects: &KeyObjects, owner: &KeyName) {
        for k in objects.keys() {
            self.map.insert(k.clone(), owner.clone());
        }
    }
    pub fn release(&mut self, objects: &KeyObjects, owner: &str) {
        for k in objects.keys() {
            if self.map.get(k).is_some_and(|o| &**o == owner) {
                self.map.remove(k);
            }
        }
    }
    pub fn clear(&mut self) {
        self.map.clear();
    }
}

/// A big-endian bit string of `bits` bits with bit `i` set for every `i` in `set` (below `bits`).
pub(crate) fn bit_string(set: impl IntoIterator<Item = u32>, bits: u32) -> Vec<u8> {
    let nbytes = bits.div_ceil(8) as usize;
    let mut out = vec![0u8; nbytes];
    for i in set.into_iter().filter(|i| *i < bits) {
        out[nbytes - 1 - (i / 8) as usize] |= 1 << (i % 8);
    }
    out
}

/// A table entry as the entity the switch is written.
pub(crate) fn entity_of(
    te: weft_p4rt::proto::p4::v1::TableEntry,
) -> weft_p4rt::proto::p4::v1::Entity {
    use weft_p4rt::proto::p4::v1::{Entity, entity};
    Entity {
        entity: Some(entity::Entity::TableEntry(te)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_p4rt::proto::p4::v1::{
        ActionProfileGroup, ActionProfileMember, FieldMatch, field_match,
    };

    struct R;
    impl Ranker for R {
        fn rank(&self, k: &ObjKey) -> u8 {
            match k {
                ObjKey::Member { .. } => 2,
                ObjKey::Group { .. } => 3,
                _ => 6,
            }
        }
    }

    fn entry(table_id: u32, v: u8) -> Entity {
        Entity {
            entity: Some(entity::Entity::TableEntry(TableEntry {
                table_id,
                r#match: vec![FieldMatch {
                    field_id: 1,
                    field_match_type: Some(field_match::FieldMatchType::Exact(
                        field_match::Exact { value: vec![v] },
                    )),
                }],
                ..Default::default()
            })),
        }
    }

    fn member(id: u32) -> Entity {
        Entity {
            entity: Some(entity::Entity::ActionProfileMember(ActionProfileMember {
                action_profile_id: 9,
                member_id: id,
                action: None,
            })),
        }
    }

    fn group(id: u32, members: &[u32]) -> Entity {
        Entity {
            entity: Some(entity::Entity::ActionProfileGroup(ActionProfileGroup {
                action_profile_id: 9,
                group_id: id,
                members: members
                    .iter()
                    .map(|m| action_profile_group::Member {
                        member_id: *m,
                        weight: 1,
                        watch_kind: Some(action_profile_group::member::WatchKind::WatchPort(vec![
                            *m as u8,
                        ])),
                    })
                    .collect(),
                max_size: 0,
            })),
        }
    }

    fn objs(es: &[Entity]) -> KeyObjects {
        es.iter()
            .map(|e| (ObjKey::of(e).expect("key"), e.clone()))
            .collect()
    }

    #[test]
    fn inserts_run_members_then_groups_then_entries_and_deletes_in_reverse() {
        let desired = objs(&[entry(1, 1), member(1), group(1, &[1])]);
        let mut plan = Plan::default();
        plan.add_diff(&R, &KeyObjects::new(), &desired, 0u8);
        let order: Vec<(Phase, i16)> = plan.stages.keys().copied().collect();
        assert_eq!(
            order,
            vec![(Phase::Upsert, 2), (Phase::Upsert, 3), (Phase::Upsert, 6)]
        );
        let mut plan = Plan::default();
        plan.add_diff(&R, &desired, &KeyObjects::new(), 0u8);
        let order: Vec<(Phase, i16)> = plan.stages.keys().copied().collect();
        assert_eq!(
            order,
            vec![
                (Phase::Delete, -6),
                (Phase::Delete, -3),
                (Phase::Delete, -2)
            ]
        );
    }

    #[test]
    fn equal_objects_plan_nothing_and_group_watch_ports_are_ignored() {
        let a = objs(&[entry(1, 1), group(1, &[1, 2])]);
        let mut b = a.clone();
        if let Some(entity::Entity::ActionProfileGroup(g)) = b
            .values_mut()
            .find_map(|e| match &e.entity {
                Some(entity::Entity::ActionProfileGroup(_)) => Some(e),
                _ => None,
            })
            .and_then(|e| e.entity.as_mut())
        {
            g.members[0].watch_kind = None;
            g.members.reverse();
        }
        let mut plan = Plan::default();
        plan.add_diff(&R, &a, &b, 0u8);
        assert!(plan.is_empty(), "{plan:?}");
    }

    #[test]
    fn key_objects_keep_identity_order_and_one_entity_per_identity_like_a_map() {
        let (a, b, c) = (entry(1, 1), entry(1, 2), member(3));
        let key = |e: &Entity| ObjKey::of(e).expect("key");
        let mut o = KeyObjects::new();
        assert!(o.insert(key(&c), c.clone()).is_none());
        assert!(o.insert(key(&b), b.clone()).is_none());
        assert!(o.insert(key(&a), a.clone()).is_none());
        let map: Objects = [a.clone(), b.clone(), c.clone()]
            .iter()
            .map(|e| (key(e), e.clone()))
            .collect();
        assert_eq!(
            o.keys().collect::<Vec<_>>(),
            map.keys().collect::<Vec<_>>(),
            "same order as a BTreeMap"
        );
        assert_eq!(o.insert(key(&a), b.clone()), Some(a.clone()));
        assert_eq!(o.get(&key(&a)), Some(&b));
        assert_eq!(o.len(), 3);
        assert_eq!(o.remove(&key(&c)), Some(c.clone()));
        assert!(!o.contains_key(&key(&c)));
        assert_eq!(o.remove(&key(&c)), None);
        // Collected, the later entity of an identity wins, as a map's inserts would have it.
        let o: KeyObjects = [(key(&a), a.clone()), (key(&a), b.clone())].into();
        assert_eq!(o.len(), 1);
        assert_eq!(o.get(&key(&a)), Some(&b));
    }

    #[test]
    fn a_changed_object_is_modified_not_reinserted() {
        let a = objs(&[group(1, &[1])]);
        let b = objs(&[group(1, &[1, 2])]);
        let mut plan = Plan::default();
        plan.add_diff(&R, &a, &b, 0u8);
        let ups: Vec<i32> = plan.updates().map(|u| u.r#type).collect();
        assert_eq!(ups, vec![update::Type::Modify as i32]);
    }
}
