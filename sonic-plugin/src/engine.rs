//! What the plugin knows of the switch and how a change becomes writes: P4RT_TABLE operations
//! and plugin-owned objects → ordered plans, with a result for every key. No I/O: plans are
//! written by [`crate::exec::Run`] (whoever holds the switch), reads come back as entities.
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
use weft_p4rt::P4Info;
use weft_p4rt::proto::p4::v1::{
    ActionProfileGroup, ActionProfileMember, CloneSessionEntry, Entity,
    PacketReplicationEngineEntry, TableEntry, entity, packet_replication_engine_entry, update,
};
use weft_sonic_db::{EntryResult, FieldValues, KeyOpFieldValues, Op, StatusCode};
use weft_sonic_schema::state::DriftKind;

pub use crate::exec::{Executed, Run, SwitchLost, status_of};
use crate::objects::{KeyName, KeyObjects, ObjKey, Objects, Owners, Plan};
use crate::pipeline::Contract;
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

/// What a full sync did.
#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    pub updates: usize,
    pub failed_updates: usize,
    /// APPL_STATE_DB keys that no longer translate (left off the switch), with the reason.
    pub untranslatable: Vec<(String, String)>,
}

pub struct Engine {
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

/// Field lists compare as sets (Redis hashes have no order).
pub fn same_fields(a: &FieldValues, b: &FieldValues) -> bool {
    let a: BTreeMap<&str, &str> = a.iter().map(|(f, v)| (f.as_str(), v.as_str())).collect();
    let b: BTreeMap<&str, &str> = b.iter().map(|(f, v)| (f.as_str(), v.as_str())).collect();
    a == b
}

/// A batch committed: every key's answer, and what undoes the earlier stages of keys that
/// failed in a later one (written before anything else reaches the switch).
#[derive(Debug)]
pub struct Committed {
    pub results: Vec<EntryResult>,
    pub undo: Plan<usize>,
}

/// A full sync planned: the writes, and what the engine holds once they are done.
pub struct SyncPlan {
    pub plan: Plan<ObjKey>,
    installed: FastMap<KeyName, Installed>,
    owners: Owners,
    index: RefIndex,
    owned: Objects,
    report: SyncReport,
}

impl Engine {
    pub fn new(translator: Translator) -> Self {
        Engine {
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

    /// Translates a batch and plans its writes against what is installed, without writing:
    /// the batch loop prepares the next batch while the switch takes the current one.
    /// `pending` is what a batch still in flight will claim: a key or object it holds is
    /// refused as a conflict here (the caller prepares such a batch only after the other).
    pub fn prepare(&self, ops: Vec<KeyOpFieldValues>, pending: &Pending) -> Prepared {
        let mut p = Preparing::new(self, &ops, pending);
        p.translate();
        p.claim();
        p.check_refs();
        p.refuse_dependents();
        p.plan_writes();
        let Preparing {
            results,
            new_objects,
            new_refs,
            mut plan,
            mut deps,
            blocked,
            unknown_ports,
            ..
        } = p;
        deps.retain(|i, _| results[*i].is_none());
        plan.deps = deps;
        Prepared {
            ops,
            results,
            new_objects,
            new_refs,
            plan,
            blocked,
            unknown_ports,
        }
    }

    /// Takes what the switch did with a prepared batch: records what is installed, answers
    /// every key, and plans the rollback of what failed keys did in earlier stages (each key
    /// is all or nothing).
    pub fn commit(&mut self, prepared: Prepared, executed: Executed<usize>) -> Committed {
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
        let mut undo: Plan<usize> = Plan::default();
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
            for (owner, cur) in &partial {
                let old = self
                    .installed
                    .get(ops[*owner].key.as_str())
                    .map_or(&empty, |x| &x.objects);
                undo.add_diff(&self.contract, cur, old, *owner);
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
        let results = results
            .into_iter()
            .zip(ops)
            .map(|(r, op)| r.unwrap_or_else(|| EntryResult::ok(op.key, op.op, op.fields)))
            .collect();
        Committed { results, undo }
    }

    /// A rollback was written: what it failed to undo is left to the next full sync.
    pub fn rolled_back(&mut self, keys: &[String], executed: Executed<usize>) {
        self.stats.switch_updates += executed.sent;
        for (owner, (_, msg)) in executed.failed {
            let key = keys.get(owner).map_or("?", String::as_str);
            tracing::error!(%key, error = %msg,
                "rollback of a failed key failed; the next full sync repairs it");
        }
    }

    /// The writes that bring the plugin-owned objects to `desired` (QoS, watchdog, switch
    /// config).
    pub fn plan_owned(&self, desired: &Objects) -> Plan<ObjKey> {
        let mut plan: Plan<ObjKey> = Plan::default();
        for (k, e) in desired {
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
        plan
    }

    /// The owned objects' writes are done: what the switch refused keeps its old value.
    pub fn owned_written(&mut self, desired: Objects, executed: Executed<ObjKey>) {
        self.stats.switch_updates += executed.sent;
        for (k, (_, msg)) in &executed.failed {
            tracing::warn!(object = ?k, error = %msg, "plugin-owned switch object not written");
        }
        let mut next = desired;
        for k in executed.failed.keys() {
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
    }

    /// The reads that give [`switch_objects`] what the switch holds (one Read each).
    pub fn switch_reads(&self) -> Vec<Vec<Entity>> {
        switch_reads(self.translator.info())
    }

    /// Entries (APPL_STATE_DB keys) the switch no longer holds as installed: an object of theirs
    /// is missing or differs on the switch (someone wrote to it behind the plugin's back).
    /// Sorted by key.
    pub fn audit(&self, current: &Objects) -> Vec<(String, DriftKind)> {
        let mut out = Vec::new();
        for (key, inst) in &self.installed {
            let mut state = None;
            for (k, want) in inst.objects.iter() {
                match current.get(k) {
                    None => {
                        state = Some(DriftKind::Missing);
                        break;
                    }
                    Some(have) if !crate::objects::same(have, want) => {
                        state = Some(DriftKind::Modified)
                    }
                    Some(_) => {}
                }
            }
            if let Some(s) = state {
                out.push((key.to_string(), s));
            }
        }
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// A full sync begins (counted whether or not its reads succeed).
    pub fn sync_started(&mut self) {
        self.stats.syncs += 1;
    }

    /// The writes that make the switch (`current`) hold exactly `desired_p4rt`
    /// (APPL_STATE_DB) plus `owned`.
    pub fn plan_sync(
        &self,
        desired_p4rt: &BTreeMap<String, FieldValues>,
        owned: Objects,
        current: &Objects,
    ) -> SyncPlan {
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
        let plan = self.plan_to(current, &desired);
        report.updates = plan.len();
        SyncPlan {
            plan,
            installed,
            owners,
            index,
            owned,
            report,
        }
    }

    /// Owner = the object, so one failure skips nothing else.
    fn plan_to(&self, current: &Objects, desired: &Objects) -> Plan<ObjKey> {
        let mut plan: Plan<ObjKey> = Plan::default();
        for (k, want) in desired {
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
        for (k, have) in current {
            if !desired.contains_key(k) {
                plan.add_diff(
                    &self.contract,
                    &[(k.clone(), have.clone())].into(),
                    &KeyObjects::new(),
                    k.clone(),
                );
            }
        }
        plan
    }

    /// The sync's writes are done: the engine holds what it planned.
    pub fn sync_done(&mut self, sync: SyncPlan, executed: Executed<ObjKey>) -> SyncReport {
        let SyncPlan {
            installed,
            owners,
            index,
            owned,
            mut report,
            ..
        } = sync;
        self.stats.switch_updates += executed.sent;
        report.failed_updates = executed.failed.len();
        for (k, (_, msg)) in executed.failed.iter().take(10) {
            tracing::warn!(object = ?k, error = %msg, "full sync could not write an object");
        }
        self.stats.last_sync_updates = report.updates as u64;
        self.stats.sync_failures += executed.failed.len() as u64;
        self.installed = installed;
        self.owners = owners;
        self.index = index;
        self.owned = owned;
        report
    }
}

/// What the switch holds that the plugin manages, from the entities [`switch_reads`] returned
/// (everything but the port status table, which the port thread owns).
pub fn switch_objects(entities: Vec<Entity>) -> Objects {
    let mut out = Objects::new();
    for e in entities {
        if let Some(k) = ObjKey::of(&e) {
            if k.table_id() == Some(t::port_status_table::ID) {
                continue;
            }
            out.insert(k, e);
        }
    }
    out
}

/// The reads of everything the plugin manages on the switch (one Read each): every table
/// entry, every action profile's members and groups, the clone sessions, and the default
/// entries the plugin programs.
pub fn switch_reads(info: &P4Info) -> Vec<Vec<Entity>> {
    let mut reads = vec![vec![table_entity(TableEntry::default())]];
    for p in info.action_profiles() {
        reads.push(vec![
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
        ]);
    }
    reads.push(vec![Entity {
        entity: Some(entity::Entity::PacketReplicationEngineEntry(
            PacketReplicationEngineEntry {
                r#type: Some(packet_replication_engine_entry::Type::CloneSessionEntry(
                    CloneSessionEntry::default(),
                )),
            },
        )),
    }]);
    for table_id in [t::switch_config_table::ID, t::queue_config_table::ID] {
        reads.push(vec![table_entity(TableEntry {
            table_id,
            is_default_action: true,
            ..Default::default()
        })]);
    }
    reads
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
    /// Ports its refused entries name that CONFIG_DB gave no id (as far as the plugin knows).
    unknown_ports: BTreeSet<String>,
}

impl Prepared {
    /// Whether this batch met something the batch in flight changes: it must be prepared
    /// again once that one is committed.
    pub fn blocked(&self) -> bool {
        self.blocked
    }

    /// The ports entries of this batch were refused for: CONFIG_DB had given them no id when
    /// it was prepared.
    pub fn unknown_ports(&self) -> &BTreeSet<String> {
        &self.unknown_ports
    }
}

/// One batch being prepared: the steps of [`Engine::prepare`], each over every op.
struct Preparing<'e, 'o> {
    engine: &'e Engine,
    ops: &'o [KeyOpFieldValues],
    pending: &'o Pending,
    /// One lookup per key in the installed map (100k long keys: most of a lookup is
    /// comparing their common prefix), used by every step below.
    olds: Vec<Option<&'e Installed>>,
    results: Vec<Option<EntryResult>>,
    new_objects: Vec<Option<KeyObjects>>,
    new_refs: Vec<Option<Refs>>,
    plan: Plan<usize>,
    deps: HashMap<usize, Vec<(usize, StatusCode, String)>>,
    blocked: bool,
    unknown_ports: BTreeSet<String>,
}

/// What a batch's keys provide and drop, by the key that does.
struct BatchRefs<'r> {
    new_refs: &'r [Option<Refs>],
    provides: FastMap<&'r Ref, usize>,
    drops: FastMap<&'r Ref, usize>,
}

impl<'e, 'o> Preparing<'e, 'o> {
    fn new(engine: &'e Engine, ops: &'o [KeyOpFieldValues], pending: &'o Pending) -> Self {
        let n = ops.len();
        Preparing {
            engine,
            ops,
            pending,
            olds: ops
                .iter()
                .map(|o| engine.installed.get(o.key.as_str()))
                .collect(),
            results: vec![None; n],
            new_objects: Vec::with_capacity(n),
            new_refs: Vec::with_capacity(n),
            plan: Plan::default(),
            deps: HashMap::new(),
            blocked: false,
            unknown_ports: BTreeSet::new(),
        }
    }

    fn reject(&mut self, i: usize, status: StatusCode, message: String) {
        let op = &self.ops[i];
        self.results[i] = Some(EntryResult::err(
            op.key.clone(),
            op.op,
            status,
            message,
            op.fields.clone(),
        ));
    }

    /// Step 1: translate every SET; a DEL of a key not installed is NOT_FOUND.
    fn translate(&mut self) {
        for (i, op) in self.ops.iter().enumerate() {
            let (objs, refs) = match op.op {
                Op::Set => match self
                    .engine
                    .translator
                    .translate_with_refs(&op.key, &op.fields)
                {
                    Ok((o, r)) => (Some(o), Some(r)),
                    Err(r) => {
                        self.unknown_ports.extend(r.unknown_port.clone());
                        self.reject(i, r.status, r.message);
                        (None, None)
                    }
                },
                Op::Del => {
                    if self.olds[i].is_none() {
                        self.reject(
                            i,
                            StatusCode::NotFound,
                            format!("no installed entry {}", op.key),
                        );
                    }
                    (None, None)
                }
            };
            self.new_objects.push(objs);
            self.new_refs.push(refs);
        }
    }

    /// Claims the objects, in batch order: the first key programming an object has it.
    fn claim(&mut self) {
        let ops = self.ops;
        let mut conflicts = Vec::new();
        {
            let mut claimed: FastMap<&ObjKey, usize> = FastMap::default();
            claimed.reserve(ops.len());
            for (i, op) in ops.iter().enumerate() {
                let Some(objs) = &self.new_objects[i] else {
                    continue;
                };
                let conflict = objs.keys().find_map(|k| {
                    if let Some(o) = self.engine.owners.get(k).filter(|o| *o != op.key) {
                        return Some(o.to_string());
                    }
                    if self.pending.has_object(k) {
                        self.blocked = true;
                        return Some("a key of the batch in flight".to_string());
                    }
                    claimed
                        .get(k)
                        .filter(|j| **j != i)
                        .map(|j| ops[*j].key.clone())
                });
                if let Some(other) = conflict {
                    conflicts.push((i, other));
                    continue;
                }
                for k in objs.keys() {
                    claimed.insert(k, i);
                }
            }
        }
        for (i, other) in conflicts {
            self.reject(
                i,
                StatusCode::Exists,
                format!(
                    "programs the same switch entry as key {other} (another spelling of the same match?)"
                ),
            );
        }
        for i in 0..ops.len() {
            if self.results[i].is_some() {
                self.new_objects[i] = None;
                self.new_refs[i] = None;
            }
        }
    }

    /// Step 2, references as the batch leaves them: every reference must name something that
    /// is there, and nothing may lose what others still name.
    fn check_refs(&mut self) {
        let ops = self.ops;
        // Taken out while the maps below borrow it: the checks record answers meanwhile.
        let new_refs = std::mem::take(&mut self.new_refs);
        let mut provides: FastMap<&Ref, usize> = FastMap::default();
        let mut drops: FastMap<&Ref, usize> = FastMap::default();
        for (i, new) in new_refs.iter().enumerate() {
            if self.results[i].is_some() {
                continue;
            }
            let old = self.olds[i].map(|x| &x.refs);
            if let Some(r) = new {
                for id in &r.ids {
                    // Provided by the batch in flight too, or dropped by it: which key
                    // provides it is known only once that one is committed.
                    if self.pending.changes(id) {
                        self.blocked = true;
                    }
                    provides.insert(id, i);
                }
            }
            for id in old.map_or(&[][..], |r| &r.ids[..]) {
                let kept = new.as_ref().is_some_and(|n| n.ids.contains(id));
                if !kept {
                    drops.insert(id, i);
                }
            }
        }
        let batch = BatchRefs {
            new_refs: &new_refs,
            provides,
            drops,
        };
        for i in 0..ops.len() {
            if self.results[i].is_some() {
                continue;
            }
            self.check_named(i, &batch);
            if self.results[i].is_some() {
                continue;
            }
            self.check_users(i, batch.new_refs);
        }
        drop(batch);
        self.new_refs = new_refs;
    }

    /// Every reference of `i` must name something that is there: installed and not deleted by
    /// this batch, or set by this batch (then `i` holds only if that one does).
    fn check_named(&mut self, i: usize, batch: &BatchRefs<'_>) {
        let ops = self.ops;
        let Some(r) = &batch.new_refs[i] else {
            return;
        };
        for x in &r.refs {
            // Only what the batch in flight provides or drops is in doubt; what it merely
            // names too (every route naming the same nexthops) is not.
            if self.pending.changes(x) {
                self.blocked = true;
            }
            let dropped = batch.drops.get(x).filter(|j| **j != i);
            let installed = self.engine.index.provider(x).is_some() && dropped.is_none();
            if let Some(&j) = batch.provides.get(x).filter(|j| **j != i) {
                self.deps.entry(i).or_default().push((
                    j,
                    StatusCode::NotFound,
                    format!("refers to {x}, whose entry {} was refused", ops[j].key),
                ));
            } else if !installed {
                let why = match dropped {
                    Some(&j) => format!(", deleted in the same batch by {}", ops[j].key),
                    None => String::new(),
                };
                self.reject(
                    i,
                    StatusCode::NotFound,
                    format!("refers to {x}, which does not exist{why}"),
                );
                return;
            }
        }
    }

    /// Nothing may lose what others still name: every installed user of an identity `i`
    /// drops must leave it in this batch (then `i` holds only if they do).
    fn check_users(&mut self, i: usize, new_refs: &[Option<Refs>]) {
        let ops = self.ops;
        let op = &ops[i];
        let old_ids = self.olds[i].map_or(&[][..], |x| &x.refs.ids[..]);
        for id in old_ids {
            let kept = new_refs[i].as_ref().is_some_and(|n| n.ids.contains(id));
            if kept {
                continue;
            }
            // Its users are known only once the batch in flight is committed.
            if self.pending.changes(id) || self.pending.names(id) {
                self.blocked = true;
            }
            // Sorted, so the user an answer names does not depend on hashing.
            let mut users: Vec<&str> = self
                .engine
                .index
                .users(id)
                .filter(|u| *u != op.key)
                .collect();
            users.sort_unstable();
            for user in users {
                let leaving = ops.iter().enumerate().find(|(j, o)| {
                    o.key == user
                        && self.results[*j].is_none()
                        && new_refs[*j].as_ref().is_none_or(|n| !n.refs.contains(id))
                });
                match leaving {
                    Some((j, _)) => self.deps.entry(i).or_default().push((
                        j,
                        StatusCode::InUse,
                        format!("{id} is still used by {user}, whose change was refused"),
                    )),
                    None => {
                        self.reject(
                            i,
                            StatusCode::InUse,
                            format!("{id} is still used by {user}"),
                        );
                        return;
                    }
                }
            }
        }
    }

    /// A key refused here takes down what depends on it.
    fn refuse_dependents(&mut self) {
        loop {
            let mut refused = Vec::new();
            for (i, ds) in &self.deps {
                if self.results[*i].is_some() {
                    continue;
                }
                if let Some((_, status, msg)) =
                    ds.iter().find(|(j, _, _)| self.results[*j].is_some())
                {
                    refused.push((*i, *status, msg.clone()));
                }
            }
            if refused.is_empty() {
                break;
            }
            for (i, status, msg) in refused {
                self.reject(i, status, msg);
            }
        }
    }

    /// Step 3: the writes of what is left.
    fn plan_writes(&mut self) {
        let empty = KeyObjects::new();
        for (i, op) in self.ops.iter().enumerate() {
            if self.results[i].is_some() {
                self.new_objects[i] = None;
                continue;
            }
            let old = self.olds[i].map(|x| &x.objects);
            match op.op {
                Op::Set => {
                    if let Some(objs) = &self.new_objects[i] {
                        self.plan
                            .add_diff(&self.engine.contract, old.unwrap_or(&empty), objs, i);
                    }
                }
                Op::Del => {
                    if let Some(old) = old {
                        self.plan.add_diff(&self.engine.contract, old, &empty, i);
                        self.new_objects[i] = Some(KeyObjects::new());
                    }
                }
            }
        }
    }
}

impl Engine {
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
    use crate::sim::SimSwitch;
    use weft_appdb::PortMap;

    /// The engine and a switch, driven as the core drives them: each plan written stage by
    /// stage, a failed key's earlier stages rolled back before anything else.
    struct TestEngine {
        engine: Engine,
        switch: SimSwitch,
    }

    impl std::ops::Deref for TestEngine {
        type Target = Engine;
        fn deref(&self) -> &Engine {
            &self.engine
        }
    }

    impl std::ops::DerefMut for TestEngine {
        fn deref_mut(&mut self) -> &mut Engine {
            &mut self.engine
        }
    }

    /// Writes a plan to the switch, stage by stage.
    fn execute<O: Clone + Eq + std::hash::Hash>(
        switch: &SimSwitch,
        plan: &Plan<O>,
    ) -> Result<Executed<O>, SwitchLost> {
        let mut run = Run::new(plan.clone());
        while let Some(updates) = run.next_write() {
            run.written(switch.write(&updates))?;
        }
        Ok(run.finish())
    }

    impl TestEngine {
        fn apply_batch(
            &mut self,
            ops: &[KeyOpFieldValues],
        ) -> Result<Vec<EntryResult>, SwitchLost> {
            let p = self.engine.prepare(ops.to_vec(), &Pending::default());
            let x = execute(&self.switch, &p.plan)?;
            self.commit(p, x)
        }

        fn commit(
            &mut self,
            p: Prepared,
            x: Executed<usize>,
        ) -> Result<Vec<EntryResult>, SwitchLost> {
            let keys: Vec<String> = p.ops.iter().map(|o| o.key.clone()).collect();
            let c = self.engine.commit(p, x);
            if !c.undo.is_empty() {
                let undone = execute(&self.switch, &c.undo)?;
                self.engine.rolled_back(&keys, undone);
            }
            Ok(c.results)
        }

        fn full_sync(
            &mut self,
            want: &BTreeMap<String, FieldValues>,
            owned: Objects,
        ) -> Result<SyncReport, SwitchLost> {
            self.engine.sync_started();
            let mut entities = Vec::new();
            for r in self.engine.switch_reads() {
                entities.extend(self.switch.read(&r)?);
            }
            let current = switch_objects(entities);
            let sync = self.engine.plan_sync(want, owned, &current);
            let x = execute(&self.switch, &sync.plan)?;
            Ok(self.engine.sync_done(sync, x))
        }
    }

    fn bare_engine() -> TestEngine {
        let info = weft_p4info().expect("p4info");
        let mut tr = Translator::new(info, owned_tables(), false);
        let mut ports = PortMap::default();
        for i in 1..=4u32 {
            ports.by_name.insert(format!("Ethernet{}", (i - 1) * 4), i);
        }
        tr.set_ports(ports);
        TestEngine {
            engine: Engine::new(tr),
            switch: SimSwitch::default(),
        }
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
    fn engine() -> TestEngine {
        let mut e = bare_engine();
        let res = e.apply_batch(&port_configs()).expect("switch up");
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

    #[test]
    fn a_group_becomes_members_a_group_and_an_entry_in_both_wcmp_tables() {
        let mut e = engine();
        let ops = [
            nexthop("0x1", "Ethernet0"),
            nexthop("0x2", "Ethernet4"),
            group(),
            route(),
        ];
        let res = e.apply_batch(&ops).expect("switch up");
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
        let res = e.apply_batch(&ops).expect("switch up");
        assert!(res.iter().all(|r| r.status.is_ok()));
        assert_eq!(e.switch.updates.load(Ordering::SeqCst), before);

        // Deleting everything in one batch works despite the dependencies.
        let dels: Vec<_> = ops
            .iter()
            .map(|o| KeyOpFieldValues::del(o.key.clone()))
            .collect();
        let res = e.apply_batch(&dels).expect("switch up");
        assert!(res.iter().all(|r| r.status.is_ok()), "{res:?}");
        let left = e.switch.snapshot();
        assert_eq!(
            count(&left, t::port_config_table::ID),
            left.len(),
            "only the port configs are left: {:?}",
            kinds(&left)
        );
    }

    #[test]
    fn bad_entries_get_errors_naming_the_problem_and_the_rest_installs() {
        let mut e = engine();
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
        let res = e.apply_batch(&ops).expect("switch up");
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

    #[test]
    fn a_group_whose_table_entry_fails_is_rolled_back_entirely_members_included() {
        let mut e = engine();
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

    #[test]
    fn full_sync_removes_strays_installs_missing_and_a_second_sync_writes_nothing() {
        let mut e = engine();
        let ops = [
            nexthop("0x1", "Ethernet0"),
            nexthop("0x3", "Ethernet8"),
            group(),
        ];
        e.apply_batch(&ops).expect("switch up");
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
        let r = e.full_sync(&want, owned.clone()).expect("sync");
        // The group was refused (NOT_FOUND) by the batch: its nexthop 2 was missing.
        assert_eq!(
            r.updates, 7,
            "delete nh 3, insert nh 2 and the group (2 members, group, table entry), set switch config: {r:?}"
        );
        let r = e.full_sync(&want, owned).expect("sync");
        assert_eq!(r.updates, 0);
        let k = kinds(&e.switch.snapshot());
        assert_eq!(k[&format!("table {:#x}", t::nexthop_table::ID)], 2);
    }

    #[test]
    fn a_lost_switch_aborts_the_batch_without_answers() {
        let mut e = engine();
        e.switch.down.store(true, Ordering::SeqCst);
        assert!(e.apply_batch(&[nexthop("0x1", "Ethernet0")]).is_err());
        assert!(!e.installed().keys().any(|k| k.starts_with("FIXED_NEXTHOP")));
    }

    const ROUTE_TO_NH1: &str = r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.3.0.0/16"}"#;

    fn route_to(nh: &str) -> KeyOpFieldValues {
        set(
            ROUTE_TO_NH1,
            &[("action", "set_nexthop_id"), ("param/nexthop_id", nh)],
        )
    }

    #[test]
    fn a_route_to_a_missing_nexthop_is_not_found_and_nothing_is_written() {
        let mut e = engine();
        let before = e.switch.snapshot();
        let res = e.apply_batch(&[route_to("0x1")]).expect("switch up");
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
            .expect("switch up");
        assert!(res.iter().all(|r| r.status.is_ok()), "{res:?}");
    }

    #[test]
    fn a_nexthop_routes_still_use_is_in_use_and_stays_installed() {
        let mut e = engine();
        e.apply_batch(&[nexthop("0x1", "Ethernet0"), route_to("0x01")])
            .expect("switch up");
        let nh = nexthop("0x1", "Ethernet0").key;
        let res = e
            .apply_batch(&[KeyOpFieldValues::del(nh.clone())])
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
            .expect("switch up");
        assert!(res.iter().all(|r| r.status.is_ok()), "{res:?}");
        assert_eq!(count(&e.switch.snapshot(), t::nexthop_table::ID), 0);
    }

    #[test]
    fn a_route_whose_new_nexthop_the_switch_refuses_is_refused_too_and_keeps_its_old_one() {
        let mut e = engine();
        e.apply_batch(&[nexthop("0x1", "Ethernet0"), route_to("0x1")])
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
    fn overlapped(
        e: &mut TestEngine,
        first: Vec<KeyOpFieldValues>,
        next: Vec<KeyOpFieldValues>,
    ) -> (bool, Vec<EntryResult>, Vec<EntryResult>) {
        let p1 = e.prepare(first, &Pending::default());
        let pending = e.pending(&p1);
        assert!(pending.disjoint(&next), "the test's batches share a key");
        let p2 = e.prepare(next, &pending);
        let x1 = execute(&e.switch, &p1.plan).expect("switch up");
        let r1 = e.commit(p1, x1).expect("switch up");
        let blocked = p2.blocked();
        let p2 = if blocked {
            e.prepare(p2.ops, &Pending::default())
        } else {
            p2
        };
        let x2 = execute(&e.switch, &p2.plan).expect("switch up");
        let r2 = e.commit(p2, x2).expect("switch up");
        (blocked, r1, r2)
    }

    fn route_n(i: u32, nh: &str) -> KeyOpFieldValues {
        set(
            &format!(r#"FIXED_IPV4_TABLE:{{"match/ipv4_dst":"10.9.{i}.0/24"}}"#),
            &[("action", "set_nexthop_id"), ("param/nexthop_id", nh)],
        )
    }

    #[test]
    fn the_pending_fingerprints_answer_for_exactly_what_the_batch_in_flight_holds() {
        let mut e = engine();
        e.apply_batch(&[nexthop("0x1", "Ethernet0"), route_to("0x1")])
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

    #[test]
    fn routes_naming_the_nexthops_of_the_batch_in_flight_are_prepared_meanwhile() {
        let mut e = engine();
        e.apply_batch(&[nexthop("0x1", "Ethernet0")])
            .expect("switch up");
        let (blocked, r1, r2) = overlapped(
            &mut e,
            (0..4).map(|i| route_n(i, "0x1")).collect(),
            (4..8).map(|i| route_n(i, "0x1")).collect(),
        );
        assert!(!blocked, "only naming the same nexthop is no dependency");
        assert!(
            r1.iter().chain(&r2).all(|r| r.status.is_ok()),
            "{r1:?} {r2:?}"
        );
        assert_eq!(count(&e.switch.snapshot(), t::ipv4_table::ID), 8);
    }

    #[test]
    fn a_route_to_a_nexthop_the_batch_in_flight_creates_waits_for_it_and_succeeds() {
        let mut e = engine();
        let (blocked, r1, r2) = overlapped(
            &mut e,
            vec![nexthop("0x1", "Ethernet0")],
            vec![route_to("0x1")],
        );
        assert!(blocked);
        assert!(
            r1.iter().chain(&r2).all(|r| r.status.is_ok()),
            "{r1:?} {r2:?}"
        );
    }

    #[test]
    fn a_route_to_a_nexthop_the_batch_in_flight_deletes_waits_and_is_not_found() {
        let mut e = engine();
        e.apply_batch(&[nexthop("0x1", "Ethernet0")])
            .expect("switch up");
        let (blocked, r1, r2) = overlapped(
            &mut e,
            vec![KeyOpFieldValues::del(nexthop("0x1", "Ethernet0").key)],
            vec![route_to("0x1")],
        );
        assert!(
            blocked,
            "prepared against the old state it would be installed"
        );
        assert!(r1[0].status.is_ok(), "{r1:?}");
        assert_eq!(r2[0].status, StatusCode::NotFound, "{r2:?}");
        assert_eq!(count(&e.switch.snapshot(), t::ipv4_table::ID), 0);
    }

    #[test]
    fn deleting_a_nexthop_a_route_in_flight_starts_using_waits_and_is_in_use() {
        let mut e = engine();
        e.apply_batch(&[nexthop("0x1", "Ethernet0")])
            .expect("switch up");
        let (blocked, r1, r2) = overlapped(
            &mut e,
            vec![route_to("0x1")],
            vec![KeyOpFieldValues::del(nexthop("0x1", "Ethernet0").key)],
        );
        assert!(
            blocked,
            "prepared against the old state it would find no user"
        );
        assert!(r1[0].status.is_ok(), "{r1:?}");
        assert_eq!(r2[0].status, StatusCode::InUse, "{r2:?}");
        assert_eq!(count(&e.switch.snapshot(), t::nexthop_table::ID), 1);
    }

    #[test]
    fn deleting_a_nexthop_whose_last_route_leaves_in_flight_waits_and_succeeds() {
        let mut e = engine();
        e.apply_batch(&[nexthop("0x1", "Ethernet0"), route_to("0x1")])
            .expect("switch up");
        let (blocked, r1, r2) = overlapped(
            &mut e,
            vec![KeyOpFieldValues::del(ROUTE_TO_NH1)],
            vec![KeyOpFieldValues::del(nexthop("0x1", "Ethernet0").key)],
        );
        assert!(blocked, "prepared against the old state it would be in use");
        assert!(
            r1.iter().chain(&r2).all(|r| r.status.is_ok()),
            "{r1:?} {r2:?}"
        );
        assert_eq!(count(&e.switch.snapshot(), t::nexthop_table::ID), 0);
    }
}
