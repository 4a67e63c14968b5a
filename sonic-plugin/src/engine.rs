//! The reconcile core: P4RT_TABLE operations and plugin-owned objects → ordered switch writes,
//! with a result for every key. No Redis here (the daemon reads and answers); the switch is a
//! [`SwitchIo`].
//!
//! ```text
//!   batch of (key, SET fields | DEL)
//!     │ translate each SET (errors: INVALID_PARAM with the reason); DEL of an unknown key: NOT_FOUND
//!     │ diff each key's old objects → new objects; one Plan for the batch (owner = the key)
//!     ▼
//!   stages in dependency order, one pipelined write each; a key whose update fails skips its
//!   later stages and its earlier writes are rolled back; a lost switch aborts the batch
//!     ▼
//!   installed map (key → fields + objects), owners (object → key), results
//! ```
//!
//! Full sync: desired = translate(APPL_STATE_DB) ∪ plugin-owned; current = read the switch;
//! write the diff. Run twice, the second plans nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use foldhash::HashMap as FastMap;
use foldhash::HashSet as FastSet;
use std::hash::{Hash, Hasher};

use weft_p4::tables as t;
use weft_p4rt::proto::p4::v1::{
    ActionProfileGroup, ActionProfileMember, CloneSessionEntry, Entity,
    PacketReplicationEngineEntry, TableEntry, entity, packet_replication_engine_entry, update,
};
use weft_p4rt::{Code, Error as P4Error};
use weft_sonic_db::{EntryResult, FieldValues, KeyOpFieldValues, Op, StatusCode};

use crate::objects::{KeyName, KeyObjects, ObjKey, Objects, Owners, Plan, PlannedUpdate};
use crate::pipeline::Contract;
use crate::switch::SwitchIo;
use crate::translate::{Refs, Translator};
use weft_p4::contract::Ref;

/// What one key has on the switch.
#[derive(Debug, Clone)]
pub struct Installed {
    pub fields: FieldValues,
    pub objects: KeyObjects,
    /// What it is to other entries, and what it names.
    pub refs: Refs,
}

/// Which installed key provides each identity and which keys refer to it, so a route to a
/// missing nexthop is refused (NOT_FOUND) and a nexthop routes still use is not deleted
/// (IN_USE), as SONiC's p4orch answers.
#[derive(Debug, Default, Clone)]
pub struct RefIndex {
    provided: FastMap<Ref, KeyName>,
    /// Unordered: a nexthop has tens of thousands of routes, and a sorted set of long keys
    /// cost more to keep than anything else per route. Whoever reports a user sorts.
    users: FastMap<Ref, FastSet<KeyName>>,
}

impl RefIndex {
    fn add(&mut self, key: &KeyName, r: &Refs) {
        for id in &r.ids {
            self.provided.insert(id.clone(), key.clone());
        }
        for x in &r.refs {
            // Every route names one of a few nexthops: look the set up before cloning the Ref.
            match self.users.get_mut(x) {
                Some(u) => {
                    u.insert(key.clone());
                }
                None => {
                    let mut u = FastSet::default();
                    u.insert(key.clone());
                    self.users.insert(x.clone(), u);
                }
            }
        }
    }

    fn remove(&mut self, key: &str, r: &Refs) {
        for id in &r.ids {
            if self.provided.get(id).is_some_and(|k| &**k == key) {
                self.provided.remove(id);
            }
        }
        for x in &r.refs {
            if let Some(u) = self.users.get_mut(x) {
                u.remove(key);
                if u.is_empty() {
                    self.users.remove(x);
                }
            }
        }
    }

    pub fn provider(&self, id: &Ref) -> Option<&str> {
        self.provided.get(id).map(|k| &**k)
    }

    /// The keys naming `id`, in no particular order.
    pub fn users(&self, id: &Ref) -> impl Iterator<Item = &str> {
        self.users.get(id).into_iter().flatten().map(|k| &**k)
    }

    /// The keys providing an identity of `table_id`.
    pub fn providers_in(&self, table_id: u32) -> impl Iterator<Item = &str> {
        self.provided
            .iter()
            .filter(move |(r, _)| r.table_id == table_id)
            .map(|(_, k)| &**k)
    }
}

/// Counters shown in the status key.
#[derive(Debug, Clone, Default)]
pub struct EngineStats {
    /// P4Runtime updates sent (every write, syncs included).
    pub switch_updates: u64,
    pub batches: u64,
    pub keys_ok: u64,
    pub keys_failed: u64,
    pub syncs: u64,
    pub last_sync_updates: u64,
    pub sync_failures: u64,
}

/// The switch could not be written at all (gone, not primary): resync after reconnecting.
#[derive(Debug, thiserror::Error)]
#[error("switch unavailable: {0}")]
pub struct SwitchLost(#[from] pub P4Error);

/// What a full sync did.
#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    pub updates: usize,
    pub failed_updates: usize,
    /// APPL_STATE_DB keys that no longer translate (left off the switch), with the reason.
    pub untranslatable: Vec<(String, String)>,
}

pub struct Engine<S> {
    pub switch: S,
    pub translator: Translator,
    contract: Contract,
    /// Keyed by the shared key string: the same allocation names the key in `owners` and
    /// `index`. Hashed: 100k keys sharing a 40-byte prefix made every lookup of a sorted map
    /// a chain of long comparisons.
    installed: FastMap<KeyName, Installed>,
    index: RefIndex,
    owners: Owners,
    owned: Objects,
    pub stats: EngineStats,
}

/// Maps a switch's per-update gRPC code to SONiC's status.
pub fn status_of(code: Code) -> StatusCode {
    match code {
        Code::InvalidArgument | Code::OutOfRange => StatusCode::InvalidParam,
        Code::NotFound => StatusCode::NotFound,
        Code::AlreadyExists => StatusCode::Exists,
        Code::ResourceExhausted => StatusCode::Full,
        Code::Unimplemented => StatusCode::Unimplemented,
        Code::FailedPrecondition => StatusCode::FailedPrecondition,
        Code::PermissionDenied => StatusCode::PermissionDenied,
        Code::Unavailable => StatusCode::Unavail,
        Code::DeadlineExceeded => StatusCode::DeadlineExceeded,
        Code::Internal => StatusCode::Internal,
        _ => StatusCode::Unknown,
    }
}

/// Field lists compare as sets (Redis hashes have no order).
pub fn same_fields(a: &FieldValues, b: &FieldValues) -> bool {
    let a: BTreeMap<&str, &str> = a.iter().map(|(f, v)| (f.as_str(), v.as_str())).collect();
    let b: BTreeMap<&str, &str> = b.iter().map(|(f, v)| (f.as_str(), v.as_str())).collect();
    a == b
}

impl<S: SwitchIo> Engine<S> {
    pub fn new(switch: S, translator: Translator) -> Self {
        Engine {
            switch,
            translator,
            contract: Contract::default(),
            installed: FastMap::default(),
            index: RefIndex::default(),
            owners: Owners::default(),
            owned: Objects::new(),
            stats: EngineStats::default(),
        }
    }

    pub fn installed(&self) -> &FastMap<KeyName, Installed> {
        &self.installed
    }

    pub fn owned(&self) -> &Objects {
        &self.owned
    }

    /// Nexthop ids of the installed `nexthop_table` entries (whose path spread is counted).
    pub fn nexthop_ids(&self) -> BTreeSet<u32> {
        // The keys providing a nexthop identity: the nexthops, not a scan of every route.
        self.index
            .providers_in(t::nexthop_table::ID)
            .filter_map(|k| weft_sonic_db::P4rtKey::parse_table_key(k).ok())
            .filter_map(|k| {
                k.match_value(t::nexthop_table::fields::nexthop_id::NAME)
                    .and_then(|v| v.strip_prefix("0x"))
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
            })
            .collect()
    }

    /// The switch lost everything (new pipeline): nothing is installed any more.
    pub fn forget_switch(&mut self) {
        self.owned.clear();
        for inst in self.installed.values_mut() {
            inst.objects.clear();
        }
        self.owners.clear();
    }

    /// Runs a plan stage by stage (see [`execute`]), counting the updates.
    async fn execute<O: Clone + Eq + std::hash::Hash>(
        &mut self,
        plan: &Plan<O>,
    ) -> Result<Executed<O>, SwitchLost> {
        let r = execute(&self.switch, plan).await?;
        self.stats.switch_updates += r.sent;
        Ok(r)
    }

    /// Applies one batch of P4RT_TABLE operations; one result per operation, in order.
    pub async fn apply_batch(
        &mut self,
        ops: &[KeyOpFieldValues],
    ) -> Result<Vec<EntryResult>, SwitchLost> {
        let prepared = self.prepare(ops.to_vec(), &Pending::default());
        let executed = execute(&self.switch, &prepared.plan).await?;
        self.commit(prepared, executed).await
    }

    /// Translates a batch and plans its writes against what is installed, without writing:
    /// the batch loop prepares the next batch while the switch takes the current one.
    /// `pending` is what a batch still in flight will claim: a key or object it holds is
    /// refused as a conflict here (the caller prepares such a batch only after the other).
    pub fn prepare(&self, ops: Vec<KeyOpFieldValues>, pending: &Pending) -> Prepared {
        let n = ops.len();
        let mut results: Vec<Option<EntryResult>> = vec![None; n];
        let mut new_objects: Vec<Option<KeyObjects>> = Vec::with_capacity(n);
        let mut new_refs: Vec<Option<Refs>> = Vec::with_capacity(n);
        let mut plan: Plan<usize> = Plan::default();
        let mut blocked = false;
        // One lookup per key in the installed map (100k long keys: most of a lookup is
        // comparing their common prefix), used by every step below.
        let olds: Vec<Option<&Installed>> = ops
            .iter()
            .map(|o| self.installed.get(o.key.as_str()))
            .collect();
        let reject = |op: &KeyOpFieldValues, status: StatusCode, message: String| {
            Some(EntryResult::err(
                op.key.clone(),
                op.op,
                status,
                message,
                op.fields.clone(),
            ))
        };

        // 1. Translate every SET.
        for (i, op) in ops.iter().enumerate() {
            let (objs, refs) = match op.op {
                Op::Set => match self.translator.translate_with_refs(&op.key, &op.fields) {
                    Ok((o, r)) => (Some(o), Some(r)),
                    Err(r) => {
                        results[i] = reject(op, r.status, r.message);
                        (None, None)
                    }
                },
                Op::Del => {
                    if olds[i].is_none() {
                        results[i] = reject(
                            op,
                            StatusCode::NotFound,
                            format!("no installed entry {}", op.key),
                        );
                    }
                    (None, None)
                }
            };
            new_objects.push(objs);
            new_refs.push(refs);
        }
        // Then claim the objects, in batch order: the first key programming an object has it.
        {
            let mut claimed: FastMap<&ObjKey, usize> = FastMap::default();
            claimed.reserve(n);
            for (i, op) in ops.iter().enumerate() {
                let Some(objs) = &new_objects[i] else {
                    continue;
                };
                let conflict = objs.keys().find_map(|k| {
                    if let Some(o) = self.owners.get(k).filter(|o| *o != op.key) {
                        return Some(o.to_string());
                    }
                    if pending.has_object(k) {
                        blocked = true;
                        return Some("a key of the batch in flight".to_string());
                    }
                    claimed
                        .get(k)
                        .filter(|j| **j != i)
                        .map(|j| ops[*j].key.clone())
                });
                if let Some(other) = conflict {
                    results[i] = reject(
                        op,
                        StatusCode::Exists,
                        format!(
                            "programs the same switch entry as key {other} (another spelling of the same match?)"
                        ),
                    );
                    continue;
                }
                for k in objs.keys() {
                    claimed.insert(k, i);
                }
            }
        }
        for i in 0..n {
            if results[i].is_some() {
                new_objects[i] = None;
                new_refs[i] = None;
            }
        }

        // 2. References, as the batch leaves them: what each key provides and names.
        let mut batch_provides: FastMap<&Ref, usize> = FastMap::default();
        let mut batch_drops: FastMap<&Ref, usize> = FastMap::default();
        for i in 0..n {
            if results[i].is_some() {
                continue;
            }
            let old = olds[i].map(|x| &x.refs);
            if let Some(r) = &new_refs[i] {
                for id in &r.ids {
                    // Provided by the batch in flight too, or dropped by it: which key
                    // provides it is known only once that one is committed.
                    if pending.changes(id) {
                        blocked = true;
                    }
                    batch_provides.insert(id, i);
                }
            }
            for id in old.map_or(&[][..], |r| &r.ids[..]) {
                let kept = new_refs[i].as_ref().is_some_and(|n| n.ids.contains(id));
                if !kept {
                    batch_drops.insert(id, i);
                }
            }
        }
        let mut deps: HashMap<usize, Vec<(usize, StatusCode, String)>> = HashMap::new();
        for (i, op) in ops.iter().enumerate() {
            if results[i].is_some() {
                continue;
            }
            // Every reference must name something that is there: installed and not deleted
            // by this batch, or set by this batch (then this key holds only if that one does).
            if let Some(r) = &new_refs[i] {
                for x in &r.refs {
                    // Only what the batch in flight provides or drops is in doubt; what it
                    // merely names too (every route naming the same nexthops) is not.
                    if pending.changes(x) {
                        blocked = true;
                    }
                    let dropped = batch_drops.get(x).filter(|j| **j != i);
                    let installed = self.index.provider(x).is_some() && dropped.is_none();
                    if let Some(&j) = batch_provides.get(x).filter(|j| **j != i) {
                        deps.entry(i).or_default().push((
                            j,
                            StatusCode::NotFound,
                            format!("refers to {x}, whose entry {} was refused", ops[j].key),
                        ));
                    } else if !installed {
                        let why = match dropped {
                            Some(&j) => format!(", deleted in the same batch by {}", ops[j].key),
                            None => String::new(),
                        };
                        results[i] = reject(
                            op,
                            StatusCode::NotFound,
                            format!("refers to {x}, which does not exist{why}"),
                        );
                        break;
                    }
                }
            }
            if results[i].is_some() {
                continue;
            }
            // Nothing may lose what others still name: every installed user must leave it in
            // this batch (then this key holds only if they do).
            let old_ids = olds[i].map_or(&[][..], |x| &x.refs.ids[..]);
            for id in old_ids {
                let kept = new_refs[i].as_ref().is_some_and(|n| n.ids.contains(id));
                if kept {
                    continue;
                }
                // Its users are known only once the batch in flight is committed.
                if pending.changes(id) || pending.names(id) {
                    blocked = true;
                }
                // Sorted, so the user an answer names does not depend on hashing.
                let mut users: Vec<&str> = self.index.users(id).filter(|u| *u != op.key).collect();
                users.sort_unstable();
                for user in users {
                    let leaving = ops.iter().enumerate().find(|(j, o)| {
                        o.key == user
                            && results[*j].is_none()
                            && new_refs[*j].as_ref().is_none_or(|n| !n.refs.contains(id))
                    });
                    match leaving {
                        Some((j, _)) => deps.entry(i).or_default().push((
                            j,
                            StatusCode::InUse,
                            format!("{id} is still used by {user}, whose change was refused"),
                        )),
                        None => {
                            results[i] = reject(
                                op,
                                StatusCode::InUse,
                                format!("{id} is still used by {user}"),
                            );
                            break;
                        }
                    }
                }
                if results[i].is_some() {
                    break;
                }
            }
        }
        // A key refused here takes down what depends on it.
        loop {
            let mut changed = false;
            for (i, ds) in &deps {
                if results[*i].is_some() {
                    continue;
                }
                if let Some((_, status, msg)) = ds.iter().find(|(j, _, _)| results[*j].is_some()) {
                    results[*i] = reject(&ops[*i], *status, msg.clone());
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }

        // 3. The writes of what is left.
        let empty = KeyObjects::new();
        for (i, op) in ops.iter().enumerate() {
            if results[i].is_some() {
                new_objects[i] = None;
                continue;
            }
            let old = olds[i].map(|x| &x.objects);
            match op.op {
                Op::Set => {
                    if let Some(objs) = &new_objects[i] {
                        plan.add_diff(&self.contract, old.unwrap_or(&empty), objs, i);
                    }
                }
                Op::Del => {
                    if let Some(old) = old {
                        plan.add_diff(&self.contract, old, &empty, i);
                        new_objects[i] = Some(KeyObjects::new());
                    }
                }
            }
        }
        deps.retain(|i, _| results[*i].is_none());
        plan.deps = deps;
        Prepared {
            ops,
            results,
            new_objects,
            new_refs,
            plan,
            blocked,
        }
    }

    /// Takes what the switch did with a prepared batch: rolls back what failed keys did in
    /// earlier stages (each key is all or nothing), records what is installed, answers every
    /// key.
    pub async fn commit(
        &mut self,
        prepared: Prepared,
        executed: Executed<usize>,
    ) -> Result<Vec<EntryResult>, SwitchLost> {
        self.stats.batches += 1;
        self.stats.switch_updates += executed.sent;
        let Prepared {
            ops,
            mut results,
            mut new_objects,
            mut new_refs,
            ..
        } = prepared;
        let Executed { failed, done, .. } = executed;
        if !failed.is_empty() {
            let empty = KeyObjects::new();
            let mut partial: HashMap<usize, KeyObjects> = HashMap::new();
            for u in done.iter().filter(|u| failed.contains_key(&u.owner)) {
                let cur = partial.entry(u.owner).or_insert_with(|| {
                    self.installed
                        .get(ops[u.owner].key.as_str())
                        .map(|x| x.objects.clone())
                        .unwrap_or_default()
                });
                if u.update.r#type == update::Type::Delete as i32 {
                    cur.remove(&u.key);
                } else if let Some(e) = &u.update.entity {
                    cur.insert(u.key.clone(), e.clone());
                }
            }
            let mut undo: Plan<usize> = Plan::default();
            for (owner, cur) in &partial {
                let old = self
                    .installed
                    .get(ops[*owner].key.as_str())
                    .map_or(&empty, |x| &x.objects);
                undo.add_diff(&self.contract, cur, old, *owner);
            }
            if !undo.is_empty() {
                let undone = self.execute(&undo).await?;
                for (owner, (_, msg)) in undone.failed {
                    tracing::error!(key = %ops[owner].key, error = %msg,
                        "rollback of a failed key failed; the next full sync repairs it");
                }
            }
        }

        for (i, op) in ops.iter().enumerate() {
            if results[i].is_some() {
                self.stats.keys_failed += 1;
                continue;
            }
            if let Some((status, msg)) = failed.get(&i) {
                self.stats.keys_failed += 1;
                results[i] = Some(EntryResult::err(
                    op.key.clone(),
                    op.op,
                    *status,
                    msg.clone(),
                    op.fields.clone(),
                ));
                continue;
            }
            self.stats.keys_ok += 1;
            let objs = new_objects[i].take().unwrap_or_default();
            // The key's shared name: the installed one when there is one, else made once here.
            let name = match self.installed.remove_entry(op.key.as_str()) {
                Some((name, old)) => {
                    self.owners.release(&old.objects, &name);
                    self.index.remove(&name, &old.refs);
                    name
                }
                None => KeyName::from(op.key.as_str()),
            };
            if op.op == Op::Set {
                let refs = new_refs[i].take().unwrap_or_default();
                self.owners.claim(&objs, &name);
                self.index.add(&name, &refs);
                self.installed.insert(
                    name,
                    Installed {
                        fields: op.fields.clone(),
                        objects: objs,
                        refs,
                    },
                );
            }
        }
        // What is still unanswered succeeded: its answer takes the op's key and fields.
        Ok(results
            .into_iter()
            .zip(ops)
            .map(|(r, op)| r.unwrap_or_else(|| EntryResult::ok(op.key, op.op, op.fields)))
            .collect())
    }

    /// Brings the plugin-owned objects to `desired` (QoS, watchdog, switch config).
    pub async fn apply_owned(&mut self, desired: Objects) -> Result<usize, SwitchLost> {
        let mut plan: Plan<ObjKey> = Plan::default();
        for (k, e) in &desired {
            let cur: KeyObjects = self
                .owned
                .get(k)
                .map(|c| [(k.clone(), c.clone())].into())
                .unwrap_or_default();
            plan.add_diff(
                &self.contract,
                &cur,
                &[(k.clone(), e.clone())].into(),
                k.clone(),
            );
        }
        for (k, e) in &self.owned {
            if !desired.contains_key(k) {
                plan.add_diff(
                    &self.contract,
                    &[(k.clone(), e.clone())].into(),
                    &KeyObjects::new(),
                    k.clone(),
                );
            }
        }
        let n = plan.len();
        if n == 0 {
            return Ok(0);
        }
        let failed = self.execute(&plan).await?.failed;
        for (k, (_, msg)) in &failed {
            tracing::warn!(object = ?k, error = %msg, "plugin-owned switch object not written");
        }
        let mut next = desired;
        for k in failed.keys() {
            match self.owned.get(k) {
                Some(old) => {
                    next.insert(k.clone(), old.clone());
                }
                None => {
                    next.remove(k);
                }
            }
        }
        self.owned = next;
        Ok(n)
    }

    /// What the switch holds that the plugin manages (everything but the port status table,
    /// which the port task owns).
    pub async fn read_switch(&self) -> Result<Objects, SwitchLost> {
        let info = self.translator.info();
        let mut out = Objects::new();
        let mut add = |es: Vec<Entity>| {
            for e in es {
                if let Some(k) = ObjKey::of(&e) {
                    if k.table_id() == Some(t::port_status_table::ID) {
                        continue;
                    }
                    out.insert(k, e);
                }
            }
        };
        add(self
            .switch
            .read(vec![table_entity(TableEntry::default())])
            .await?);
        for p in info.action_profiles() {
            add(self
                .switch
                .read(vec![
                    Entity {
                        entity: Some(entity::Entity::ActionProfileMember(ActionProfileMember {
                            action_profile_id: p.id,
                            ..Default::default()
                        })),
                    },
                    Entity {
                        entity: Some(entity::Entity::ActionProfileGroup(ActionProfileGroup {
                            action_profile_id: p.id,
                            ..Default::default()
                        })),
                    },
                ])
                .await?);
        }
        add(self
            .switch
            .read(vec![Entity {
                entity: Some(entity::Entity::PacketReplicationEngineEntry(
                    PacketReplicationEngineEntry {
                        r#type: Some(packet_replication_engine_entry::Type::CloneSessionEntry(
                            CloneSessionEntry::default(),
                        )),
                    },
                )),
            }])
            .await?);
        for table_id in [
            t::switch_config_table::ID,
            t::queue_config_table::ID,
            t::trim_config_table::ID,
        ] {
            add(self
                .switch
                .read(vec![table_entity(TableEntry {
                    table_id,
                    is_default_action: true,
                    ..Default::default()
                })])
                .await?);
        }
        Ok(out)
    }

    /// Entries (APPL_STATE_DB keys) the switch no longer holds as installed: an object of theirs
    /// is missing or differs on the switch (someone wrote to it behind the plugin's back).
    /// Sorted; `missing` or `modified` each.
    pub async fn audit(&self) -> Result<Vec<(String, &'static str)>, SwitchLost> {
        let current = self.read_switch().await?;
        let mut out = Vec::new();
        for (key, inst) in &self.installed {
            let mut state = None;
            for (k, want) in inst.objects.iter() {
                match current.get(k) {
                    None => {
                        state = Some("missing");
                        break;
                    }
                    Some(have) if !crate::objects::same(have, want) => state = Some("modified"),
                    Some(_) => {}
                }
            }
            if let Some(s) = state {
                out.push((key.to_string(), s));
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Makes the switch hold exactly `desired_p4rt` (APPL_STATE_DB) plus `owned`.
    pub async fn full_sync(
        &mut self,
        desired_p4rt: &BTreeMap<String, FieldValues>,
        owned: Objects,
    ) -> Result<SyncReport, SwitchLost> {
        self.stats.syncs += 1;
        let mut report = SyncReport::default();
        let mut desired = Objects::new();
        let mut installed = FastMap::default();
        let mut owners = Owners::default();
        let mut index = RefIndex::default();
        for (key, fields) in desired_p4rt {
            match self.translator.translate_with_refs(key, fields) {
                Ok((objs, refs)) => {
                    if let Some(other) = objs.keys().find_map(|k| owners.get(k)) {
                        report.untranslatable.push((
                            key.clone(),
                            format!("programs the same switch entry as {other}"),
                        ));
                        continue;
                    }
                    let name = KeyName::from(key.as_str());
                    owners.claim(&objs, &name);
                    index.add(&name, &refs);
                    desired.extend(objs.iter().map(|(k, v)| (k.clone(), v.clone())));
                    installed.insert(
                        name,
                        Installed {
                            fields: fields.clone(),
                            objects: objs,
                            refs,
                        },
                    );
                }
                Err(r) => report.untranslatable.push((key.clone(), r.message)),
            }
        }
        for (k, e) in &owned {
            desired.insert(k.clone(), e.clone());
        }
        let current = self.read_switch().await?;
        let mut plan: Plan<ObjKey> = Plan::default();
        // Owner = the object, so one failure skips nothing else.
        for (k, want) in &desired {
            let cur: KeyObjects = current
                .get(k)
                .map(|c| [(k.clone(), c.clone())].into())
                .unwrap_or_default();
            plan.add_diff(
                &self.contract,
                &cur,
                &[(k.clone(), want.clone())].into(),
                k.clone(),
            );
        }
        for (k, have) in &current {
            if !desired.contains_key(k) {
                plan.add_diff(
                    &self.contract,
                    &[(k.clone(), have.clone())].into(),
                    &KeyObjects::new(),
                    k.clone(),
                );
            }
        }
        report.updates = plan.len();
        let failed = self.execute(&plan).await?.failed;
        report.failed_updates = failed.len();
        for (k, (_, msg)) in failed.iter().take(10) {
            tracing::warn!(object = ?k, error = %msg, "full sync could not write an object");
        }
        self.stats.last_sync_updates = report.updates as u64;
        self.stats.sync_failures += failed.len() as u64;
        self.installed = installed;
        self.owners = owners;
        self.index = index;
        self.owned = owned;
        Ok(report)
    }
}

/// A batch translated and planned, not yet written.
#[derive(Debug)]
pub struct Prepared {
    pub ops: Vec<KeyOpFieldValues>,
    /// Keys refused before any write (bad entries, conflicts).
    results: Vec<Option<EntryResult>>,
    /// Per op: the objects it leaves installed (`None`: refused, or nothing to install).
    new_objects: Vec<Option<KeyObjects>>,
    new_refs: Vec<Option<Refs>>,
    pub plan: Plan<usize>,
    /// It met an object or identity the batch in flight changes: prepare it again once that
    /// one is committed.
    blocked: bool,
}

impl Prepared {
    /// Whether this batch met something the batch in flight changes: it must be prepared
    /// again once that one is committed.
    pub fn blocked(&self) -> bool {
        self.blocked
    }
}

impl<S: SwitchIo> Engine<S> {
    /// What a prepared batch will change once written, for the batch prepared meanwhile:
    /// its keys and switch objects, the identities its keys provide or drop (new and old), and
    /// the identities they name (new and old).
    pub fn pending(&self, p: &Prepared) -> Pending {
        let mut out = Pending::default();
        out.keys.reserve(p.ops.len());
        out.objects.reserve(p.ops.len() + p.plan.len());
        out.keys
            .extend(p.ops.iter().map(|o| fingerprint(o.key.as_str())));
        out.objects.extend(
            p.new_objects
                .iter()
                .flatten()
                .flat_map(|o| o.keys())
                .chain(p.plan.stages.values().flat_map(|s| &s.keys))
                .map(fingerprint),
        );
        let old = p
            .ops
            .iter()
            .filter_map(|o| self.installed.get(o.key.as_str()).map(|x| &x.refs));
        for r in p.new_refs.iter().flatten().chain(old) {
            out.ids.extend(r.ids.iter().map(fingerprint));
            out.named.extend(r.refs.iter().map(fingerprint));
        }
        out
    }
}

/// A 64-bit fingerprint of a key, object or identity, for [`Pending`].
fn fingerprint<T: Hash + ?Sized>(x: &T) -> u64 {
    // A fixed seed: the same value gives the same fingerprint in every batch.
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x5745_4654).hash_one(x)
}

/// Hashes a fingerprint as itself: it is a hash already.
#[derive(Default, Clone, Copy)]
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type Fingerprints = HashSet<u64, std::hash::BuildHasherDefault<IdentityHasher>>;

/// The keys, objects and references of a batch in flight, as fingerprints: the batch
/// prepared meanwhile only asks whether it meets one of them, and copying every key, object
/// and identity of a batch of 4,096 routes for that cost more than the questions. Two values
/// sharing a fingerprint only make a batch wait for the one in flight (a key: prepared after
/// its commit; an object or identity: prepared again), which is always correct.
#[derive(Debug, Default, Clone)]
pub struct Pending {
    keys: Fingerprints,
    objects: Fingerprints,
    /// Identities its keys provide or drop.
    ids: Fingerprints,
    /// Identities its keys name, before or after.
    named: Fingerprints,
}

impl Pending {
    /// Whether the batch in flight programs switch object `k`.
    pub fn has_object(&self, k: &ObjKey) -> bool {
        self.objects.contains(&fingerprint(k))
    }

    /// Whether the batch in flight provides or drops `r` (its provider is in doubt).
    pub fn changes(&self, r: &Ref) -> bool {
        !self.ids.is_empty() && self.ids.contains(&fingerprint(r))
    }

    /// Whether the batch in flight names `r`, before or after (its users are in doubt).
    pub fn names(&self, r: &Ref) -> bool {
        !self.named.is_empty() && self.named.contains(&fingerprint(r))
    }

    /// Whether a batch of `ops` can be prepared before this one is committed.
    pub fn disjoint(&self, ops: &[KeyOpFieldValues]) -> bool {
        self.keys.is_empty()
            || ops
                .iter()
                .all(|o| !self.keys.contains(&fingerprint(o.key.as_str())))
    }
}

/// What the switch did with a plan.
#[derive(Debug)]
pub struct Executed<O> {
    /// The first failure per owner (its later stages were skipped).
    pub failed: HashMap<O, (StatusCode, String)>,
    /// The updates the switch took for the owners in `failed` (what a rollback undoes); the
    /// others' are not copied.
    pub done: Vec<PlannedUpdate<O>>,
    /// Updates sent.
    pub sent: u64,
}

/// Runs a plan stage by stage: one pipelined write per stage. Per-update failures are
/// returned by owner (the first per owner; later stages of a failed owner are skipped); an
/// RPC failure aborts. Takes only the switch, so it runs while the engine prepares the next
/// batch.
pub async fn execute<S: SwitchIo, O: Clone + Eq + std::hash::Hash>(
    switch: &S,
    plan: &Plan<O>,
) -> Result<Executed<O>, SwitchLost> {
    let mut failed: HashMap<O, (StatusCode, String)> = HashMap::new();
    // Updates not taken by the switch (skipped, or refused), by (stage, index): the rest of
    // a failed owner's updates are what it did.
    let mut not_done: HashSet<(usize, usize)> = HashSet::new();
    let mut sent = 0u64;
    for (s, stage) in plan.stages.values().enumerate() {
        // An owner whose dependency failed in an earlier stage is refused, unwritten.
        if !plan.deps.is_empty() {
            for o in &stage.owners {
                if failed.contains_key(o) {
                    continue;
                }
                if let Some((_, status, msg)) = plan
                    .deps
                    .get(o)
                    .into_iter()
                    .flatten()
                    .find(|(d, _, _)| failed.contains_key(d))
                {
                    failed.insert(o.clone(), (*status, msg.clone()));
                }
            }
        }
        // Nobody failed yet in this stage (the usual case): the stage is written as planned.
        let skip: Vec<bool> = if failed.is_empty() {
            Vec::new()
        } else {
            stage
                .owners
                .iter()
                .map(|o| failed.contains_key(o))
                .collect()
        };
        let todo: Vec<usize> = (0..stage.len())
            .filter(|i| !skip.get(*i).copied().unwrap_or(false))
            .collect();
        not_done.extend(
            (0..stage.len())
                .filter(|i| skip.get(*i).copied().unwrap_or(false))
                .map(|i| (s, i)),
        );
        if todo.is_empty() {
            continue;
        }
        let filtered: Vec<_>;
        let updates: &[weft_p4rt::proto::p4::v1::Update] = if todo.len() == stage.len() {
            &stage.updates
        } else {
            filtered = todo.iter().map(|i| stage.updates[*i].clone()).collect();
            &filtered
        };
        sent += updates.len() as u64;
        match switch.write(updates).await {
            Ok(()) => {}
            Err(P4Error::Write(we)) => {
                for e in we.failed {
                    let Some(&i) = todo.get(e.index) else {
                        continue;
                    };
                    not_done.insert((s, i));
                    failed
                        .entry(stage.owners[i].clone())
                        .or_insert_with(|| (status_of(e.code), e.to_string()));
                }
            }
            Err(e) => return Err(SwitchLost(e)),
        }
    }
    let mut done = Vec::new();
    if !failed.is_empty() {
        for (s, stage) in plan.stages.values().enumerate() {
            for (i, o) in stage.owners.iter().enumerate() {
                if failed.contains_key(o) && !not_done.contains(&(s, i)) {
                    done.push(stage.planned(i));
                }
            }
        }
    }
    Ok(Executed { failed, done, sent })
}

fn table_entity(t: TableEntry) -> Entity {
    Entity {
        entity: Some(entity::Entity::TableEntry(t)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::pipeline::{owned_tables, weft_p4info};
    use crate::switch::fake::FakeSwitch;
    use weft_appdb::PortMap;

    fn bare_engine() -> Engine<FakeSwitch> {
        let info = weft_p4info().expect("p4info");
        let mut tr = Translator::new(info, owned_tables(), false);
        let mut ports = PortMap::default();
        for i in 1..=4u32 {
            ports.by_name.insert(format!("Ethernet{}", (i - 1) * 4), i);
        }
        tr.set_ports(ports);
        Engine::new(FakeSwitch::default(), tr)
    }

    /// The port config entries every nexthop refers to, as the controller writes them first.
    fn port_configs() -> Vec<KeyOpFieldValues> {
        (0..4)
            .map(|i| {
                set(
                    &format!(
                        r#"FIXED_PORT_CONFIG_TABLE:{{"match/port":"Ethernet{}"}}"#,
                        i * 4
                    ),
                    &[
                        ("action", "set_port_config"),
                        ("param/router_mac", "02:00:00:00:00:aa"),
                    ],
                )
            })
            .collect()
    }

    /// An engine whose switch holds the port configs.
    async fn engine() -> Engine<FakeSwitch> {
        let mut e = bare_engine();
        let res = e.apply_batch(&port_configs()).await.expect("switch up");
        assert!(res.iter().all(|r| r.status.is_ok()), "{res:?}");
        e
    }

    fn count(objs: &Objects, table: u32) -> usize {
        objs.keys().filter(|k| k.table_id() == Some(table)).count()
    }

    fn set(key: &str, fields: &[(&str, &str)]) -> KeyOpFieldValues {
        KeyOpFieldValues::set(key, fields.iter().map(|(a, b)| (*a, *b)))
    }

    fn nexthop(id: &str, port: &str) -> KeyOpFieldValues {
        set(
            &format!(r#"FIXED_NEXTHOP_TABLE:{{"match/nexthop_id":"{id}"}}"#),
            &[
                ("action", "set_nexthop"),
                ("param/egress_port", port),
                ("param/dst_mac", "02:00:00:00:00:01"),
                ("param/src_mac", "02:00:00:00:00:02"),
            ],
        )
    }

    const GROUP: &str = r#"FIXED_WCMP_GROUP_TABLE:{"match/wcmp_group_id":"0x7"}"#;

    fn group() -> KeyOpFieldValues {
        set(
            GROUP,
            &[(
                "actions",
                r#"[{"action":"set_wcmp_member","param/egress_port":"Ethernet0","param/nexthop_id":"0x1","watch_port":"Ethernet0","weight":2},{"action":"set_wcmp_member","param/egress_port":"Ethernet4","param/nexthop_id":"0x2","watch_port":"Ethernet4","weight":1}]"#,
            )],
        )
    }

    fn route() -> KeyOpFieldValues {
        set(
            r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.1.0.0/16"}"#,
            &[
                ("action", "set_wcmp_group_id"),
                ("param/wcmp_group_id", "0x7"),
            ],
        )
    }

    fn kinds(objs: &Objects) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for k in objs.keys() {
            let name = match k {
                ObjKey::Entry { table_id, .. } => format!("table {table_id:#x}"),
                ObjKey::Member { .. } => "member".into(),
                ObjKey::Group { .. } => "group".into(),
                other => format!("{other:?}"),
            };
            *out.entry(name).or_default() += 1;
        }
        out
    }

    #[tokio::test]
    async fn a_group_becomes_members_a_group_and_an_entry_in_both_wcmp_tables() {
        let mut e = engine().await;
        let ops = [
            nexthop("0x1", "Ethernet0"),
            nexthop("0x2", "Ethernet4"),
            group(),
            route(),
        ];
        let res = e.apply_batch(&ops).await.expect("switch up");
        assert!(res.iter().all(|r| r.status.is_ok()), "{res:?}");
        let k = kinds(&e.switch.snapshot());
        assert_eq!(k["member"], 2);
        assert_eq!(k["group"], 1);
        assert_eq!(k[&format!("table {:#x}", t::wcmp_group_table::ID)], 1);
        // One entry per table the selector implements.
        assert_eq!(
            weft_p4::action_profiles::wcmp_group_selector::TABLE_IDS
                .iter()
                .map(|id| k[&format!("table {id:#x}")])
                .sum::<usize>(),
            weft_p4::action_profiles::wcmp_group_selector::TABLE_IDS.len()
        );
        assert_eq!(k[&format!("table {:#x}", t::nexthop_table::ID)], 2);
        assert_eq!(k[&format!("table {:#x}", t::ipv4_table::ID)], 1);

        // The same batch again writes nothing and still answers success.
        let before = e.switch.updates.load(Ordering::SeqCst);
        let res = e.apply_batch(&ops).await.expect("switch up");
        assert!(res.iter().all(|r| r.status.is_ok()));
        assert_eq!(e.switch.updates.load(Ordering::SeqCst), before);

        // Deleting everything in one batch works despite the dependencies.
        let dels: Vec<_> = ops
            .iter()
            .map(|o| KeyOpFieldValues::del(o.key.clone()))
            .collect();
        let res = e.apply_batch(&dels).await.expect("switch up");
        assert!(res.iter().all(|r| r.status.is_ok()), "{res:?}");
        let left = e.switch.snapshot();
        assert_eq!(
            count(&left, t::port_config_table::ID),
            left.len(),
            "only the port configs are left: {:?}",
            kinds(&left)
        );
    }

    #[tokio::test]
    async fn bad_entries_get_errors_naming_the_problem_and_the_rest_installs() {
        let mut e = engine().await;
        let ops = [
            nexthop("0x1", "Ethernet0"),
            nexthop("0x2", "Ethernet99"),
            set(r#"FIXED_NOPE_TABLE:{"match/x":"0x1"}"#, &[("action", "a")]),
            set(
                r#"FIXED_NEXTHOP_TABLE:{"match/nexthop_id":"0x10000"}"#,
                &[("action", "set_nexthop")],
            ),
            set(
                r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.1.0.0/16"}"#,
                &[("action", "set_nexthop_id"), ("param/bogus", "0x1")],
            ),
            set(
                r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.2.0.0/16"}"#,
                &[("action", "fly")],
            ),
            set("garbage", &[("action", "x")]),
            set(
                r#"FIXED_QUEUE_CONFIG_TABLE:{"match/port":"Ethernet0","match/queue":"0x3"}"#,
                &[("action", "set_queue_config")],
            ),
            KeyOpFieldValues::del(r#"FIXED_NEXTHOP_TABLE:{"match/nexthop_id":"0x9"}"#),
            nexthop("0x01", "Ethernet0"),
        ];
        let res = e.apply_batch(&ops).await.expect("switch up");
        let st: Vec<(StatusCode, &str)> =
            res.iter().map(|r| (r.status, r.message.as_str())).collect();
        assert_eq!(st[0].0, StatusCode::Success);
        let expect = [
            (1, StatusCode::InvalidParam, "unknown port \"Ethernet99\""),
            (
                2,
                StatusCode::InvalidParam,
                "unknown table \"FIXED_NOPE_TABLE\"",
            ),
            (3, StatusCode::InvalidParam, "does not fit in 16 bits"),
            (4, StatusCode::InvalidParam, "bogus"),
            (5, StatusCode::InvalidParam, "fly"),
            (6, StatusCode::InvalidParam, "garbage"),
            (
                7,
                StatusCode::InvalidParam,
                "programmed by the plugin itself",
            ),
            (8, StatusCode::NotFound, "no installed entry"),
            (9, StatusCode::Exists, "same switch entry"),
        ];
        for (i, code, needle) in expect {
            assert_eq!(st[i].0, code, "op {i}: {}", st[i].1);
            assert!(
                st[i].1.contains(needle),
                "op {i}: {:?} lacks {needle:?}",
                st[i].1
            );
        }
        assert_eq!(
            count(&e.switch.snapshot(), t::nexthop_table::ID),
            1,
            "only the good nexthop is installed"
        );
    }

    #[tokio::test]
    async fn a_group_whose_table_entry_fails_is_rolled_back_entirely_members_included() {
        let mut e = engine().await;
        *e.switch.reject.lock().expect("lock") = Some(Box::new(|k: &ObjKey| {
            k.table_id() == Some(t::wcmp_group_table::ID)
        }));
        let base = e.switch.snapshot();
        let res = e
            .apply_batch(&[
                nexthop("0x1", "Ethernet0"),
                nexthop("0x2", "Ethernet4"),
                group(),
            ])
            .await
            .expect("switch up");
        assert_eq!(res[2].status, StatusCode::InvalidParam, "{res:?}");
        let now = e.switch.snapshot();
        assert_eq!(
            now.len(),
            base.len() + 2,
            "only the two nexthops: {:?}",
            kinds(&now)
        );
        assert!(!e.installed().contains_key(GROUP));
    }

    #[tokio::test]
    async fn full_sync_removes_strays_installs_missing_and_a_second_sync_writes_nothing() {
        let mut e = engine().await;
        let ops = [
            nexthop("0x1", "Ethernet0"),
            nexthop("0x3", "Ethernet8"),
            group(),
        ];
        e.apply_batch(&ops).await.expect("switch up");
        // APPL_STATE_DB says: nexthop 1 and 2 and the group (nexthop 3 is a stray, 2 missing).
        let want: BTreeMap<String, FieldValues> = port_configs()
            .into_iter()
            .chain([
                nexthop("0x1", "Ethernet0"),
                nexthop("0x2", "Ethernet4"),
                group(),
            ])
            .map(|o| (o.key, o.fields))
            .collect();
        let info = e.translator.info().clone();
        let owned: Objects = [crate::qos::switch_config(
            &info,
            &crate::qos::SwitchSettings {
                device_id: 3,
                ..Default::default()
            },
            &BTreeMap::new(),
            &Default::default(),
        )
        .expect("switch config")]
        .into_iter()
        .map(|x| (ObjKey::of(&x).expect("key"), x))
        .collect();
        let r = e.full_sync(&want, owned.clone()).await.expect("sync");
        // The group was refused (NOT_FOUND) by the batch: its nexthop 2 was missing.
        assert_eq!(
            r.updates, 7,
            "delete nh 3, insert nh 2 and the group (2 members, group, table entry), set switch config: {r:?}"
        );
        let r = e.full_sync(&want, owned).await.expect("sync");
        assert_eq!(r.updates, 0);
        let k = kinds(&e.switch.snapshot());
        assert_eq!(k[&format!("table {:#x}", t::nexthop_table::ID)], 2);
    }

    #[tokio::test]
    async fn a_lost_switch_aborts_the_batch_without_answers() {
        let mut e = engine().await;
        e.switch.down.store(true, Ordering::SeqCst);
        assert!(e.apply_batch(&[nexthop("0x1", "Ethernet0")]).await.is_err());
        assert!(!e.installed().keys().any(|k| k.starts_with("FIXED_NEXTHOP")));
    }

    const ROUTE_TO_NH1: &str = r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.3.0.0/16"}"#;

    fn route_to(nh: &str) -> KeyOpFieldValues {
        set(
            ROUTE_TO_NH1,
            &[("action", "set_nexthop_id"), ("param/nexthop_id", nh)],
        )
    }

    #[tokio::test]
    async fn a_route_to_a_missing_nexthop_is_not_found_and_nothing_is_written() {
        let mut e = engine().await;
        let before = e.switch.snapshot();
        let res = e.apply_batch(&[route_to("0x1")]).await.expect("switch up");
        assert_eq!(res[0].status, StatusCode::NotFound, "{res:?}");
        assert!(
            res[0].message.contains("nexthop_table"),
            "{}",
            res[0].message
        );
        assert_eq!(e.switch.snapshot(), before);
        // With its nexthop in the same batch, written in rank order: both succeed.
        let res = e
            .apply_batch(&[route_to("0x1"), nexthop("0x1", "Ethernet0")])
            .await
            .expect("switch up");
        assert!(res.iter().all(|r| r.status.is_ok()), "{res:?}");
    }

    #[tokio::test]
    async fn a_nexthop_routes_still_use_is_in_use_and_stays_installed() {
        let mut e = engine().await;
        e.apply_batch(&[nexthop("0x1", "Ethernet0"), route_to("0x01")])
            .await
            .expect("switch up");
        let nh = nexthop("0x1", "Ethernet0").key;
        let res = e
            .apply_batch(&[KeyOpFieldValues::del(nh.clone())])
            .await
            .expect("switch up");
        assert_eq!(res[0].status, StatusCode::InUse, "{res:?}");
        assert!(res[0].message.contains(ROUTE_TO_NH1), "{}", res[0].message);
        assert!(e.installed().contains_key(nh.as_str()));
        assert_eq!(count(&e.switch.snapshot(), t::nexthop_table::ID), 1);
        // The route and its nexthop deleted together: route first, then the nexthop.
        let res = e
            .apply_batch(&[
                KeyOpFieldValues::del(nh.clone()),
                KeyOpFieldValues::del(ROUTE_TO_NH1),
            ])
            .await
            .expect("switch up");
        assert!(res.iter().all(|r| r.status.is_ok()), "{res:?}");
        assert_eq!(count(&e.switch.snapshot(), t::nexthop_table::ID), 0);
    }

    #[tokio::test]
    async fn a_route_whose_new_nexthop_the_switch_refuses_is_refused_too_and_keeps_its_old_one() {
        let mut e = engine().await;
        e.apply_batch(&[nexthop("0x1", "Ethernet0"), route_to("0x1")])
            .await
            .expect("switch up");
        *e.switch.reject.lock().expect("lock") = Some(Box::new(|k: &ObjKey| {
            k.table_id() == Some(t::nexthop_table::ID)
        }));
        // Move the route to nexthop 2 (refused by the switch) and delete nexthop 1 at once.
        let res = e
            .apply_batch(&[
                nexthop("0x2", "Ethernet4"),
                route_to("0x2"),
                KeyOpFieldValues::del(nexthop("0x1", "Ethernet0").key),
            ])
            .await
            .expect("switch up");
        assert_eq!(res[0].status, StatusCode::InvalidParam, "{res:?}");
        assert_eq!(res[1].status, StatusCode::NotFound, "{res:?}");
        assert_eq!(res[2].status, StatusCode::InUse, "{res:?}");
        assert_eq!(
            e.installed()[ROUTE_TO_NH1].fields,
            route_to("0x1").fields,
            "the route kept its nexthop"
        );
        assert_eq!(count(&e.switch.snapshot(), t::nexthop_table::ID), 1);
    }
    /// Prepares `next` while `first` is in flight (prepared, not committed), as the batch loop
    /// does; returns whether `next` had to wait, and the answers of both once `first` is
    /// committed and `next` prepared again if it had to.
    async fn overlapped(
        e: &mut Engine<FakeSwitch>,
        first: Vec<KeyOpFieldValues>,
        next: Vec<KeyOpFieldValues>,
    ) -> (bool, Vec<EntryResult>, Vec<EntryResult>) {
        let p1 = e.prepare(first, &Pending::default());
        let pending = e.pending(&p1);
        assert!(pending.disjoint(&next), "the test's batches share a key");
        let p2 = e.prepare(next, &pending);
        let x1 = execute(&e.switch, &p1.plan).await.expect("switch up");
        let r1 = e.commit(p1, x1).await.expect("switch up");
        let blocked = p2.blocked();
        let p2 = if blocked {
            e.prepare(p2.ops, &Pending::default())
        } else {
            p2
        };
        let x2 = execute(&e.switch, &p2.plan).await.expect("switch up");
        let r2 = e.commit(p2, x2).await.expect("switch up");
        (blocked, r1, r2)
    }

    fn route_n(i: u32, nh: &str) -> KeyOpFieldValues {
        set(
            &format!(r#"FIXED_IPV4_TABLE:{{"match/ipv4_dst":"10.9.{i}.0/24"}}"#),
            &[("action", "set_nexthop_id"), ("param/nexthop_id", nh)],
        )
    }

    #[tokio::test]
    async fn the_pending_fingerprints_answer_for_exactly_what_the_batch_in_flight_holds() {
        let mut e = engine().await;
        e.apply_batch(&[nexthop("0x1", "Ethernet0"), route_to("0x1")])
            .await
            .expect("switch up");
        let first = vec![
            nexthop("0x2", "Ethernet4"),
            route_n(7, "0x1"),
            KeyOpFieldValues::del(ROUTE_TO_NH1),
        ];
        let p = e.prepare(first.clone(), &Pending::default());
        let pending = e.pending(&p);
        // Its keys...
        for op in &first {
            assert!(!pending.disjoint(std::slice::from_ref(op)), "{}", op.key);
        }
        assert!(pending.disjoint(&[route_n(8, "0x1")]));
        // ...the objects it writes (new and deleted)...
        let tr = &e.translator;
        let objs = |o: &KeyOpFieldValues| {
            tr.translate_set(&o.key, &o.fields)
                .expect("translates")
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        };
        for o in [&first[0], &first[1], &route_to("0x1")] {
            assert!(objs(o).iter().all(|k| pending.has_object(k)), "{}", o.key);
        }
        assert!(
            !objs(&route_n(8, "0x1"))
                .iter()
                .any(|k| pending.has_object(k))
        );
        // ...the identity it provides, and the ones it names, new and old.
        let nh = |id: &str| {
            let (_, r) = tr
                .translate_with_refs(
                    &nexthop(id, "Ethernet0").key,
                    &nexthop(id, "Ethernet0").fields,
                )
                .expect("translates");
            r.ids[0].clone()
        };
        assert!(pending.changes(&nh("0x2")));
        assert!(!pending.changes(&nh("0x1")), "only named, not provided");
        assert!(pending.names(&nh("0x1")));
        assert!(!pending.names(&nh("0x3")));
    }

    #[tokio::test]
    async fn routes_naming_the_nexthops_of_the_batch_in_flight_are_prepared_meanwhile() {
        let mut e = engine().await;
        e.apply_batch(&[nexthop("0x1", "Ethernet0")])
            .await
            .expect("switch up");
        let (blocked, r1, r2) = overlapped(
            &mut e,
            (0..4).map(|i| route_n(i, "0x1")).collect(),
            (4..8).map(|i| route_n(i, "0x1")).collect(),
        )
        .await;
        assert!(!blocked, "only naming the same nexthop is no dependency");
        assert!(
            r1.iter().chain(&r2).all(|r| r.status.is_ok()),
            "{r1:?} {r2:?}"
        );
        assert_eq!(count(&e.switch.snapshot(), t::ipv4_table::ID), 8);
    }

    #[tokio::test]
    async fn a_route_to_a_nexthop_the_batch_in_flight_creates_waits_for_it_and_succeeds() {
        let mut e = engine().await;
        let (blocked, r1, r2) = overlapped(
            &mut e,
            vec![nexthop("0x1", "Ethernet0")],
            vec![route_to("0x1")],
        )
        .await;
        assert!(blocked);
        assert!(
            r1.iter().chain(&r2).all(|r| r.status.is_ok()),
            "{r1:?} {r2:?}"
        );
    }

    #[tokio::test]
    async fn a_route_to_a_nexthop_the_batch_in_flight_deletes_waits_and_is_not_found() {
        let mut e = engine().await;
        e.apply_batch(&[nexthop("0x1", "Ethernet0")])
            .await
            .expect("switch up");
        let (blocked, r1, r2) = overlapped(
            &mut e,
            vec![KeyOpFieldValues::del(nexthop("0x1", "Ethernet0").key)],
            vec![route_to("0x1")],
        )
        .await;
        assert!(
            blocked,
            "prepared against the old state it would be installed"
        );
        assert!(r1[0].status.is_ok(), "{r1:?}");
        assert_eq!(r2[0].status, StatusCode::NotFound, "{r2:?}");
        assert_eq!(count(&e.switch.snapshot(), t::ipv4_table::ID), 0);
    }

    #[tokio::test]
    async fn deleting_a_nexthop_a_route_in_flight_starts_using_waits_and_is_in_use() {
        let mut e = engine().await;
        e.apply_batch(&[nexthop("0x1", "Ethernet0")])
            .await
            .expect("switch up");
        let (blocked, r1, r2) = overlapped(
            &mut e,
            vec![route_to("0x1")],
            vec![KeyOpFieldValues::del(nexthop("0x1", "Ethernet0").key)],
        )
        .await;
        assert!(
            blocked,
            "prepared against the old state it would find no user"
        );
        assert!(r1[0].status.is_ok(), "{r1:?}");
        assert_eq!(r2[0].status, StatusCode::InUse, "{r2:?}");
        assert_eq!(count(&e.switch.snapshot(), t::nexthop_table::ID), 1);
    }

    #[tokio::test]
    async fn deleting_a_nexthop_whose_last_route_leaves_in_flight_waits_and_succeeds() {
        let mut e = engine().await;
        e.apply_batch(&[nexthop("0x1", "Ethernet0"), route_to("0x1")])
            .await
            .expect("switch up");
        let (blocked, r1, r2) = overlapped(
            &mut e,
            vec![KeyOpFieldValues::del(ROUTE_TO_NH1)],
            vec![KeyOpFieldValues::del(nexthop("0x1", "Ethernet0").key)],
        )
        .await;
        assert!(blocked, "prepared against the old state it would be in use");
        assert!(
            r1.iter().chain(&r2).all(|r| r.status.is_ok()),
            "{r1:?} {r2:?}"
        );
        assert_eq!(count(&e.switch.snapshot(), t::nexthop_table::ID), 0);
    }
}
