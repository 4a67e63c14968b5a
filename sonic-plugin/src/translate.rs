//! One P4RT_TABLE entry → the P4Runtime objects that realise it, decided by the P4Info alone
//! (value formats: `weft_appdb`).
//!
//! ```text
//!   FIXED_NEXTHOP_TABLE:{"match/nexthop_id":"0x5"}  action=set_nexthop param/...
//!       └─► table entry nexthop_table {nexthop_id=5} set_nexthop(...)
//!   FIXED_WCMP_GROUP_TABLE:{"match/wcmp_group_id":"0x7"}  actions=[{set_wcmp_member ...,weight,watch_port}, ...]
//!       └─► members 7<<8|0, 7<<8|1, ... of wcmp_group_selector
//!           group 7 (member ids + weights)
//!           an entry → group 7 in EVERY table the selector implements
//!           (wcmp_group_table and wcmp_group_alt_table)
//! ```
//!
//! Tables the plugin programs itself (QoS from CONFIG_DB, port status, watchdog, switch
//! config) are refused here: two writers of one table would undo each other.

use std::collections::{BTreeMap, BTreeSet};

use weft_appdb::{PortMap, parse_value};
use weft_p4rt::proto::p4::v1::{Entity, entity};
use weft_p4rt::{MatchKind, P4Info, TableEntryBuilder, TableInfo};
use weft_sonic_db::{
    P4rtAction, P4rtActionSpec, P4rtEntry, P4rtKey, P4rtTableKind, StatusCode, sonic_table_name,
};

use crate::objects::{KeyObjects, ObjKey};

/// Why an entry cannot be installed; the message names the field and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub status: StatusCode,
    pub message: String,
    /// The entry names a port CONFIG_DB has given no id (as far as the translator knows):
    /// refused only once the plugin has read CONFIG_DB again (see [`crate::core`]).
    pub unknown_port: Option<String>,
}

impl Rejected {
    pub fn invalid(message: impl Into<String>) -> Self {
        Rejected {
            status: StatusCode::InvalidParam,
            message: message.into(),
            unknown_port: None,
        }
    }

    fn full(message: impl Into<String>) -> Self {
        Rejected {
            status: StatusCode::Full,
            ..Rejected::invalid(message)
        }
    }

    fn unknown_port(message: impl Into<String>, port: &str) -> Self {
        Rejected {
            unknown_port: Some(port.to_string()),
            ..Rejected::invalid(message)
        }
    }

    /// The same refusal, its message after `prefix`.
    fn within(self, prefix: &str) -> Self {
        Rejected {
            message: format!("{prefix}{}", self.message),
            ..self
        }
    }
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

/// What an entry is to others (identities: the key fields others may name) and what it names
/// (references), canonical so `0x05` and `0x5` are one value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refs {
    pub ids: Vec<weft_p4::contract::Ref>,
    pub refs: Vec<weft_p4::contract::Ref>,
}

/// Member ids of group G are `G << MEMBER_BITS | index`.
pub const MEMBER_BITS: u32 = 8;

pub struct Translator {
    info: P4Info,
    /// SONiC table name → P4 table id.
    tables: BTreeMap<String, u32>,
    /// Tables written by the plugin itself, with the reason shown to a writer.
    owned: BTreeMap<u32, &'static str>,
    ports: PortMap,
    watch_ports: bool,
}

impl Translator {
    pub fn new(info: P4Info, owned: BTreeMap<u32, &'static str>, watch_ports: bool) -> Self {
        let tables = info
            .tables()
            .iter()
            .map(|t| (sonic_table_name(&t.alias, P4rtTableKind::Fixed), t.id))
            .collect();
        Translator {
            info,
            tables,
            owned,
            ports: PortMap::default(),
            watch_ports,
        }
    }

    pub fn info(&self) -> &P4Info {
        &self.info
    }

    pub fn set_ports(&mut self, ports: PortMap) {
        self.ports = ports;
    }

    pub fn ports(&self) -> &PortMap {
        &self.ports
    }

    /// The objects of a SET of `key` with `fields`.
    pub fn translate_set(
        &self,
        key: &str,
        fields: &[(String, String)],
    ) -> Result<KeyObjects, Rejected> {
        self.translate_with_refs(key, fields).map(|(o, _)| o)
    }

    /// The objects of a SET, and what the entry is (its identities) and points at (its
    /// references), from the pipeline's `@refers_to` declarations.
    pub fn translate_with_refs(
        &self,
        key: &str,
        fields: &[(String, String)],
    ) -> Result<(KeyObjects, Refs), Rejected> {
        let k = P4rtKey::parse_table_key(key).map_err(|e| Rejected::invalid(e.to_string()))?;
        let entry =
            P4rtEntry::from_fields(k, fields).map_err(|e| Rejected::invalid(e.to_string()))?;
        let objects = self.translate(&entry)?;
        let refs = match self.tables.get(&entry.key.table) {
            Some(&table_id) => Refs {
                ids: weft_p4::contract::identities(table_id, &entry)
                    .map_err(|e| Rejected::invalid(e.to_string()))?,
                refs: weft_p4::contract::references(table_id, &entry)
                    .map_err(|e| Rejected::invalid(e.to_string()))?,
            },
            None => Refs::default(),
        };
        Ok((objects, refs))
    }

    pub fn translate(&self, entry: &P4rtEntry) -> Result<KeyObjects, Rejected> {
        let key = &entry.key;
        let table_id = *self.tables.get(&key.table).ok_or_else(|| {
            Rejected::invalid(format!(
                "unknown table {:?} (known: {})",
                key.table,
                self.tables
                    .iter()
                    .filter(|(_, id)| !self.owned.contains_key(id))
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if let Some(why) = self.owned.get(&table_id) {
            return Err(Rejected::invalid(format!(
                "table {} is programmed by the plugin itself ({why}), not through P4RT_TABLE",
                key.table
            )));
        }
        let table = self
            .info
            .table_by_id(table_id)
            .map_err(|e| Rejected::invalid(e.to_string()))?;
        if table.match_fields.is_empty() {
            return Err(Rejected::invalid(format!(
                "table {} has no match fields (keyless tables are not written through P4RT_TABLE)",
                key.table
            )));
        }
        if entry.meter.is_some() {
            return Err(Rejected::invalid(format!(
                "table {} has no meter",
                key.table
            )));
        }
        let needs_priority = table.needs_priority();
        if needs_priority && key.priority == 0 {
            return Err(Rejected::invalid(format!(
                "table {} has ternary or optional fields: the key needs \"priority\" > 0",
                key.table
            )));
        }
        if !needs_priority && key.priority != 0 {
            return Err(Rejected::invalid(format!(
                "table {} takes no priority, the key has {}",
                key.table, key.priority
            )));
        }
        match table.action_profile_id {
            None => {
                let P4rtActionSpec::Single(action) = &entry.action else {
                    return Err(Rejected::invalid(format!(
                        "table {} takes one 'action', not an 'actions' set",
                        key.table
                    )));
                };
                let builder = self.matches(table, key)?;
                let call = self.action_call(table, action, "")?;
                let te = builder
                    .action(call)
                    .and_then(|b| b.build())
                    .map_err(|e| Rejected::invalid(e.to_string()))?;
                Ok(one(Entity {
                    entity: Some(entity::Entity::TableEntry(te)),
                }))
            }
            Some(profile_id) => self.translate_group(table, profile_id, entry),
        }
    }

    fn translate_group(
        &self,
        table: &TableInfo,
        profile_id: u32,
        entry: &P4rtEntry,
    ) -> Result<KeyObjects, Rejected> {
        let key = &entry.key;
        let profile = self
            .info
            .action_profile_by_id(profile_id)
            .map_err(|e| Rejected::invalid(e.to_string()))?;
        // The controller writes one table of a shared profile; the plugin mirrors it into the
        // others, so they can never disagree.
        let primary = profile.table_ids.iter().copied().min().unwrap_or(table.id);
        if primary != table.id {
            let name = self
                .info
                .table_by_id(primary)
                .map(|t| sonic_table_name(&t.alias, P4rtTableKind::Fixed))
                .unwrap_or_default();
            return Err(Rejected::invalid(format!(
                "table {} shares action profile {} with {name}: write {name} only, the plugin installs the group in every table of the profile",
                key.table, profile.name
            )));
        }
        let exact: Vec<_> = table
            .match_fields
            .iter()
            .filter(|f| f.kind == MatchKind::Exact)
            .collect();
        let [gfield] = exact.as_slice() else {
            return Err(Rejected::invalid(format!(
                "table {}: group tables need exactly one exact match field (the group id)",
                key.table
            )));
        };
        let gtext = key.match_value(&gfield.name).ok_or_else(|| {
            Rejected::invalid(format!("key of {} lacks match/{}", key.table, gfield.name))
        })?;
        let group_id = self.value(&gfield.name, gfield.bitwidth, gtext)?.value;
        if group_id == 0 || group_id >= (1u128 << (32 - MEMBER_BITS)) {
            return Err(Rejected::invalid(format!(
                "match/{} = {gtext}: group ids must be in 1..{} (0 means none)",
                gfield.name,
                1u32 << (32 - MEMBER_BITS)
            )));
        }
        let group_id = group_id as u32;
        let members: Vec<(P4rtAction, u32, Option<String>)> = match &entry.action {
            P4rtActionSpec::Single(a) => vec![(a.clone(), 1, None)],
            P4rtActionSpec::Weighted(ws) => ws
                .iter()
                .map(|w| (w.action.clone(), w.weight, w.watch_port.clone()))
                .collect(),
        };
        let mut out = self.group_objects(table, profile, group_id, &members)?;
        let mut table_ids: BTreeSet<u32> = profile.table_ids.iter().copied().collect();
        table_ids.insert(table.id);
        for tid in table_ids {
            let t = self
                .info
                .table_by_id(tid)
                .map_err(|e| Rejected::invalid(e.to_string()))?;
            let te = self
                .matches(t, key)?
                .group_id(group_id)
                .and_then(|b| b.build())
                .map_err(|e| Rejected::invalid(e.to_string()))?;
            insert(
                &mut out,
                Entity {
                    entity: Some(entity::Entity::TableEntry(te)),
                },
            );
        }
        Ok(out)
    }

    /// A group's members and the group itself (weights and watch ports), checked against the
    /// profile's limits.
    fn group_objects(
        &self,
        table: &TableInfo,
        profile: &weft_p4rt::ActionProfileInfo,
        group_id: u32,
        members: &[(P4rtAction, u32, Option<String>)],
    ) -> Result<KeyObjects, Rejected> {
        if members.len() > (1usize << MEMBER_BITS) {
            return Err(Rejected::full(format!(
                "{} members: a group holds at most {}",
                members.len(),
                1u32 << MEMBER_BITS
            )));
        }
        let total: u64 = members.iter().map(|m| u64::from(m.1)).sum();
        if profile.max_group_size > 0 && total > profile.max_group_size as u64 {
            return Err(Rejected::full(format!(
                "sum of member weights {total} exceeds the group size {} of {}",
                profile.max_group_size, profile.name
            )));
        }
        let mut out = KeyObjects::new();
        let mut group = self
            .info
            .group(&profile.name, group_id)
            .map_err(|e| Rejected::invalid(e.to_string()))?;
        let watch_allowed = self.watch_ports && members.len() > 1;
        for (i, (action, weight, watch)) in members.iter().enumerate() {
            let member_id = (group_id << MEMBER_BITS) | i as u32;
            let call = self.action_call(table, action, &format!("member {i}: "))?;
            let m = self
                .info
                .member(&profile.name, member_id, call)
                .map_err(|e| Rejected::invalid(format!("member {i}: {e}")))?;
            let watch_id = match watch {
                Some(p) => Some(self.ports.id(p).ok_or_else(|| {
                    Rejected::unknown_port(
                        format!(
                            "member {i}: watch_port {p:?} is not a port of this switch (no CONFIG_DB PORT|{p} with an id)"
                        ),
                        p,
                    )
                })?),
                None => None,
            };
            let weight = i32::try_from(*weight)
                .map_err(|_| Rejected::invalid(format!("member {i}: weight {weight} too big")))?;
            group = group.member(member_id, weight, watch_id.filter(|_| watch_allowed));
            insert(
                &mut out,
                Entity {
                    entity: Some(entity::Entity::ActionProfileMember(m)),
                },
            );
        }
        insert(
            &mut out,
            Entity {
                entity: Some(entity::Entity::ActionProfileGroup(group.build())),
            },
        );
        Ok(out)
    }

    fn value(
        &self,
        field: &str,
        bitwidth: i32,
        text: &str,
    ) -> Result<weft_appdb::Parsed, Rejected> {
        let ports = &self.ports;
        parse_value(field, bitwidth.max(0) as u32, text, &|p| ports.id(p)).map_err(|e| match &e {
            weft_appdb::CodecError::UnknownPort { port, .. } => {
                Rejected::unknown_port(e.to_string(), port)
            }
            _ => Rejected::invalid(e.to_string()),
        })
    }

    fn matches<'a>(
        &'a self,
        table: &'a TableInfo,
        key: &P4rtKey,
    ) -> Result<TableEntryBuilder<'a>, Rejected> {
        let mut b = self
            .info
            .table_entry(&table.name)
            .map_err(|e| Rejected::invalid(e.to_string()))?;
        for (name, text) in key.match_fields() {
            let f = table
                .field(name)
                .map_err(|e| Rejected::invalid(format!("match/{name}: {e}")))?;
            let p = self.value(&f.name, f.bitwidth, text)?;
            let kind_err = |what: &str| {
                Rejected::invalid(format!(
                    "match/{name} = {text:?}: field is {} match, {what}",
                    f.kind
                ))
            };
            let r = match f.kind {
                MatchKind::Exact | MatchKind::Optional => {
                    if p.prefix_len.is_some() || p.mask.is_some() {
                        return Err(kind_err("give the value alone"));
                    }
                    if f.kind == MatchKind::Exact {
                        b.exact(name, p.value)
                    } else {
                        b.optional(name, p.value)
                    }
                }
                MatchKind::Lpm => {
                    let Some(len) = p.prefix_len else {
                        return Err(kind_err("give value/prefix_length"));
                    };
                    b.lpm(name, p.value, len)
                }
                MatchKind::Ternary => {
                    let Some(mask) = p.mask else {
                        return Err(kind_err("give value&mask"));
                    };
                    if p.prefix_len.is_some() {
                        return Err(kind_err("give value&mask"));
                    }
                    b.ternary(name, p.value, mask)
                }
                MatchKind::Range | MatchKind::Other => {
                    return Err(kind_err("which P4RT_TABLE cannot express"));
                }
            };
            b = r.map_err(|e| Rejected::invalid(e.to_string()))?;
        }
        // Exact fields may not be left out (only LPM, ternary, optional have wildcards).
        for f in &table.match_fields {
            if f.kind == MatchKind::Exact && key.match_value(&f.name).is_none() {
                return Err(Rejected::invalid(format!(
                    "key of {} lacks exact match field match/{}",
                    key.table, f.name
                )));
            }
        }
        Ok(b.priority(key.priority as i32))
    }

    fn action_call<'a>(
        &'a self,
        table: &TableInfo,
        action: &P4rtAction,
        ctx: &str,
    ) -> Result<weft_p4rt::ActionCall<'a>, Rejected> {
        let info = self
            .info
            .action(&action.name)
            .map_err(|e| Rejected::invalid(format!("{ctx}{e}")))?;
        if !table.entry_action_ids().any(|a| a == info.id) {
            return Err(Rejected::invalid(format!(
                "{ctx}action {:?} is not allowed in table {}",
                action.name, table.alias
            )));
        }
        let mut call = self
            .info
            .action_call(&info.name)
            .map_err(|e| Rejected::invalid(format!("{ctx}{e}")))?;
        for (name, text) in &action.params {
            let p = info
                .param(name)
                .map_err(|e| Rejected::invalid(format!("{ctx}param/{name}: {e}")))?;
            let v = self
                .value(&p.name, p.bitwidth, text)
                .map_err(|r| r.within(&format!("{ctx}param/{name}: ")))?;
            if v.prefix_len.is_some() || v.mask.is_some() {
                return Err(Rejected::invalid(format!(
                    "{ctx}param/{name} = {text:?}: a parameter is a plain value"
                )));
            }
            call = call
                .param(name, v.value)
                .map_err(|e| Rejected::invalid(format!("{ctx}{e}")))?;
        }
        for p in &info.params {
            if !action.params.contains_key(&p.name) {
                return Err(Rejected::invalid(format!(
                    "{ctx}action {} is missing param/{}",
                    action.name, p.name
                )));
            }
        }
        Ok(call)
    }
}

fn insert(out: &mut KeyObjects, e: Entity) {
    if let Some(k) = ObjKey::of(&e) {
        out.insert(k, e);
    }
}

fn one(e: Entity) -> KeyObjects {
    let mut out = KeyObjects::new();
    insert(&mut out, e);
    out
}
