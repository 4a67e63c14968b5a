//! An index over a P4Info: names ↔ ids for every object the client touches, with typed errors
//! (and a nearest-name suggestion) for unknown names.
//!
//! Objects are found by their fully qualified name (`ingress.route.ipv4_lpm`) or, when it is
//! unambiguous, by their alias (`ipv4_lpm`).
//!
//! Annotations the P4 source declares for its control plane are parsed here, once, when the
//! P4Info is loaded (see [`annotations`](crate::annotations)): `@refers_to(table, field)` on
//! match fields and action parameters (resolved to the referenced table and key field, which
//! must exist and have the same width), `@format(...)` on them, and `@weft_owner(...)` on tables.

use std::collections::HashMap;
use std::sync::Arc;

use p4runtime_proto::p4::config::v1 as cfg;
use prost::Message;

use crate::annotations::{self, DeclaredFormat, Owner, RefersTo};
use crate::error::{Error, MatchKind, ObjectKind, Result};

#[derive(Debug, Clone)]
pub struct MatchFieldInfo {
    pub id: u32,
    pub name: String,
    pub bitwidth: i32,
    pub kind: MatchKind,
    /// The P4Info annotations, as p4c wrote them.
    pub annotations: Vec<String>,
    /// `@refers_to`: key fields of other tables this field's value names.
    pub refers_to: Vec<RefersTo>,
    /// `@format`: how the value is written as text, if declared.
    pub format: Option<DeclaredFormat>,
}

#[derive(Debug, Clone)]
pub struct TableInfo {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub match_fields: Vec<MatchFieldInfo>,
    pub action_ids: Vec<u32>,
    /// Actions allowed only as the default action (`@defaultonly`).
    pub default_only_action_ids: Vec<u32>,
    /// The default action, when the program fixes it (`const default_action`); 0 otherwise.
    pub const_default_action_id: u32,
    /// The action profile (or selector) implementing this table, if any.
    pub action_profile_id: Option<u32>,
    pub direct_counter_id: Option<u32>,
    pub direct_meter_id: Option<u32>,
    pub size: i64,
    pub is_const: bool,
    /// The preamble's annotations, as p4c wrote them.
    pub annotations: Vec<String>,
    /// `@weft_owner`: who writes the table's entries, if declared.
    pub owner: Option<Owner>,
    fields_by_name: HashMap<String, usize>,
    fields_by_id: HashMap<u32, usize>,
}

impl TableInfo {
    pub fn field(&self, name: &str) -> Result<&MatchFieldInfo> {
        match self.fields_by_name.get(name) {
            Some(i) => Ok(&self.match_fields[*i]),
            None => Err(Error::UnknownName {
                kind: ObjectKind::MatchField,
                name: name.to_string(),
                scope: Some(format!("table {}", self.name)),
                suggestion: nearest(name, self.match_fields.iter().map(|f| f.name.as_str())),
            }),
        }
    }

    pub fn field_by_id(&self, id: u32) -> Option<&MatchFieldInfo> {
        self.fields_by_id.get(&id).map(|i| &self.match_fields[*i])
    }

    /// Actions an ordinary (non-default) entry may use.
    pub fn entry_action_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.action_ids
            .iter()
            .copied()
            .filter(|a| !self.default_only_action_ids.contains(a))
    }

    /// Whether entries need a priority (ternary, range or optional fields).
    pub fn needs_priority(&self) -> bool {
        self.match_fields.iter().any(|f| {
            matches!(
                f.kind,
                MatchKind::Ternary | MatchKind::Range | MatchKind::Optional
            )
        })
    }
}

#[derive(Debug, Clone)]
pub struct ParamInfo {
    pub id: u32,
    pub name: String,
    pub bitwidth: i32,
    /// The P4Info annotations, as p4c wrote them.
    pub annotations: Vec<String>,
    /// `@refers_to`: key fields of other tables this parameter's value names.
    pub refers_to: Vec<RefersTo>,
    /// `@format`: how the value is written as text, if declared.
    pub format: Option<DeclaredFormat>,
}

#[derive(Debug, Clone)]
pub struct ActionInfo {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub params: Vec<ParamInfo>,
    /// The preamble's annotations, as p4c wrote them.
    pub annotations: Vec<String>,
}

impl ActionInfo {
    pub fn param(&self, name: &str) -> Result<&ParamInfo> {
        self.params
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| Error::UnknownName {
                kind: ObjectKind::ActionParam,
                name: name.to_string(),
                scope: Some(format!("action {}", self.name)),
                suggestion: nearest(name, self.params.iter().map(|p| p.name.as_str())),
            })
    }

    pub fn param_by_id(&self, id: u32) -> Option<&ParamInfo> {
        self.params.iter().find(|p| p.id == id)
    }
}

#[derive(Debug, Clone)]
pub struct ActionProfileInfo {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub table_ids: Vec<u32>,
    pub with_selector: bool,
    pub size: i64,
    pub max_group_size: i32,
}

/// What a counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterUnit {
    Packets,
    Bytes,
    Both,
    /// Not a counter, or the P4Info does not say.
    Unspecified,
}

impl CounterUnit {
    fn of(spec: &Option<cfg::CounterSpec>) -> Self {
        use cfg::counter_spec::Unit;
        match spec.as_ref().map(|s| Unit::try_from(s.unit)) {
            Some(Ok(Unit::Packets)) => CounterUnit::Packets,
            Some(Ok(Unit::Bytes)) => CounterUnit::Bytes,
            Some(Ok(Unit::Both)) => CounterUnit::Both,
            _ => CounterUnit::Unspecified,
        }
    }
}

/// Indexed counters, meters and registers.
#[derive(Debug, Clone)]
pub struct ArrayInfo {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub size: i64,
    /// Counters: what they count (meters and registers: `Unspecified`).
    pub unit: CounterUnit,
    /// Registers: the width of one element when it is a plain bitstring (0 otherwise).
    pub bitwidth: i32,
}

/// Direct counters and meters, attached to one table.
#[derive(Debug, Clone)]
pub struct DirectInfo {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub table_id: u32,
    /// Direct counters: what they count (meters: `Unspecified`).
    pub unit: CounterUnit,
}

#[derive(Debug, Clone)]
pub struct PacketMetadataInfo {
    pub id: u32,
    pub name: String,
    pub bitwidth: i32,
}

/// A controller header (`packet_in` or `packet_out`) and its metadata fields.
#[derive(Debug, Clone)]
pub struct ControllerHeaderInfo {
    pub id: u32,
    pub name: String,
    pub metadata: Vec<PacketMetadataInfo>,
}

impl ControllerHeaderInfo {
    pub fn field(&self, name: &str) -> Result<&PacketMetadataInfo> {
        self.metadata
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| Error::UnknownName {
                kind: ObjectKind::PacketMetadata,
                name: name.to_string(),
                scope: Some(format!("controller header {}", self.name)),
                suggestion: nearest(name, self.metadata.iter().map(|m| m.name.as_str())),
            })
    }
}

/// Objects of one kind, found by name, alias or id.
#[derive(Debug, Clone)]
struct Named<T> {
    kind: ObjectKind,
    items: Vec<T>,
    by_name: HashMap<String, usize>,
    by_id: HashMap<u32, usize>,
}

impl<T> Named<T> {
    fn new(kind: ObjectKind) -> Self {
        Named {
            kind,
            items: Vec::new(),
            by_name: HashMap::new(),
            by_id: HashMap::new(),
        }
    }

    fn insert(&mut self, id: u32, name: &str, item: T) -> Result<()> {
        if self.by_id.contains_key(&id) || self.by_name.contains_key(name) {
            return Err(Error::P4Info(format!(
                "duplicate {} {name} (id {id})",
                self.kind
            )));
        }
        let i = self.items.len();
        self.items.push(item);
        self.by_id.insert(id, i);
        self.by_name.insert(name.to_string(), i);
        Ok(())
    }

    /// Aliases go in after all full names, and only where they collide with nothing.
    fn insert_aliases<'a>(&mut self, aliases: impl Iterator<Item = (&'a str, u32)>) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let pairs: Vec<(&str, u32)> = aliases.collect();
        for (alias, _) in &pairs {
            *seen.entry(alias).or_default() += 1;
        }
        for (alias, id) in pairs {
            if alias.is_empty() || seen.get(alias) != Some(&1) || self.by_name.contains_key(alias) {
                continue;
            }
            if let Some(i) = self.by_id.get(&id).copied() {
                self.by_name.insert(alias.to_string(), i);
            }
        }
    }

    fn get(&self, name: &str) -> Result<&T> {
        match self.by_name.get(name) {
            Some(i) => Ok(&self.items[*i]),
            None => Err(Error::UnknownName {
                kind: self.kind,
                name: name.to_string(),
                scope: None,
                suggestion: nearest(name, self.by_name.keys().map(String::as_str)),
            }),
        }
    }

    fn by_id(&self, id: u32) -> Result<&T> {
        self.by_id
            .get(&id)
            .map(|i| &self.items[*i])
            .ok_or(Error::UnknownId {
                kind: self.kind,
                id,
                scope: None,
            })
    }
}

/// The closest name by edit distance, if reasonably close.
pub(crate) fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    candidates
        .map(|c| (strsim::levenshtein(name, c), c))
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 2).max(2))
        .min_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)))
        .map(|(_, c)| c.to_string())
}

fn preamble_annotations(p: &Option<cfg::Preamble>) -> Vec<String> {
    p.as_ref()
        .map(|p| p.annotations.clone())
        .unwrap_or_default()
}

fn preamble(p: &Option<cfg::Preamble>, what: &str) -> Result<(u32, String, String)> {
    let p = p
        .as_ref()
        .ok_or_else(|| Error::P4Info(format!("{what} without preamble")))?;
    if p.id == 0 || p.name.is_empty() {
        return Err(Error::P4Info(format!("{what} with empty id or name")));
    }
    Ok((p.id, p.name.clone(), p.alias.clone()))
}

fn match_kind(f: &cfg::MatchField) -> MatchKind {
    use cfg::match_field::{Match, MatchType};
    match f.r#match {
        Some(Match::MatchType(t)) => match MatchType::try_from(t) {
            Ok(MatchType::Exact) => MatchKind::Exact,
            Ok(MatchType::Lpm) => MatchKind::Lpm,
            Ok(MatchType::Ternary) => MatchKind::Ternary,
            Ok(MatchType::Range) => MatchKind::Range,
            Ok(MatchType::Optional) => MatchKind::Optional,
            _ => MatchKind::Other,
        },
        _ => MatchKind::Other,
    }
}

/// The index. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct P4Info {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    raw: cfg::P4Info,
    tables: Named<TableInfo>,
    actions: Named<ActionInfo>,
    action_profiles: Named<ActionProfileInfo>,
    counters: Named<ArrayInfo>,
    direct_counters: Named<DirectInfo>,
    meters: Named<ArrayInfo>,
    direct_meters: Named<DirectInfo>,
    registers: Named<ArrayInfo>,
    controller_headers: Named<ControllerHeaderInfo>,
}

impl P4Info {
    /// Decodes a binary P4Info (`p4c --p4runtime-files x.p4info.bin`).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = cfg::P4Info::decode(bytes).map_err(|e| Error::P4Info(e.to_string()))?;
        Self::new(raw)
    }

    pub fn new(raw: cfg::P4Info) -> Result<Self> {
        let mut tables = read_tables(&raw)?;
        let mut actions = read_actions(&raw)?;
        let mut action_profiles = read_action_profiles(&raw)?;
        let (mut counters, mut meters, mut registers) = read_arrays(&raw)?;
        let (mut direct_counters, mut direct_meters) = read_directs(&raw)?;
        for t in tables.items.iter_mut() {
            t.direct_counter_id = direct_counters
                .items
                .iter()
                .find(|d| d.table_id == t.id)
                .map(|d| d.id);
            t.direct_meter_id = direct_meters
                .items
                .iter()
                .find(|d| d.table_id == t.id)
                .map(|d| d.id);
        }

        let controller_headers = read_controller_headers(&raw)?;

        tables.insert_aliases(aliases(raw.tables.iter().map(|x| &x.preamble)));
        resolve_references(&mut tables, &mut actions)?;
        actions.insert_aliases(aliases(raw.actions.iter().map(|x| &x.preamble)));
        action_profiles.insert_aliases(aliases(raw.action_profiles.iter().map(|x| &x.preamble)));
        counters.insert_aliases(aliases(raw.counters.iter().map(|x| &x.preamble)));
        meters.insert_aliases(aliases(raw.meters.iter().map(|x| &x.preamble)));
        registers.insert_aliases(aliases(raw.registers.iter().map(|x| &x.preamble)));
        direct_counters.insert_aliases(aliases(raw.direct_counters.iter().map(|x| &x.preamble)));
        direct_meters.insert_aliases(aliases(raw.direct_meters.iter().map(|x| &x.preamble)));

        Ok(P4Info {
            inner: Arc::new(Inner {
                raw,
                tables,
                actions,
                action_profiles,
                counters,
                direct_counters,
                meters,
                direct_meters,
                registers,
                controller_headers,
            }),
        })
    }

    pub fn raw(&self) -> &cfg::P4Info {
        &self.inner.raw
    }

    pub fn table(&self, name: &str) -> Result<&TableInfo> {
        self.inner.tables.get(name)
    }
    pub fn table_by_id(&self, id: u32) -> Result<&TableInfo> {
        self.inner.tables.by_id(id)
    }
    pub fn tables(&self) -> &[TableInfo] {
        &self.inner.tables.items
    }
    pub fn action(&self, name: &str) -> Result<&ActionInfo> {
        self.inner.actions.get(name)
    }
    pub fn action_by_id(&self, id: u32) -> Result<&ActionInfo> {
        self.inner.actions.by_id(id)
    }
    pub fn actions(&self) -> &[ActionInfo] {
        &self.inner.actions.items
    }
    pub fn action_profile(&self, name: &str) -> Result<&ActionProfileInfo> {
        self.inner.action_profiles.get(name)
    }
    pub fn action_profile_by_id(&self, id: u32) -> Result<&ActionProfileInfo> {
        self.inner.action_profiles.by_id(id)
    }
    pub fn action_profiles(&self) -> &[ActionProfileInfo] {
        &self.inner.action_profiles.items
    }
    pub fn counter(&self, name: &str) -> Result<&ArrayInfo> {
        self.inner.counters.get(name)
    }
    pub fn counter_by_id(&self, id: u32) -> Result<&ArrayInfo> {
        self.inner.counters.by_id(id)
    }
    pub fn counters(&self) -> &[ArrayInfo] {
        &self.inner.counters.items
    }
    pub fn direct_counter(&self, name: &str) -> Result<&DirectInfo> {
        self.inner.direct_counters.get(name)
    }
    pub fn direct_counter_by_id(&self, id: u32) -> Result<&DirectInfo> {
        self.inner.direct_counters.by_id(id)
    }
    pub fn meter(&self, name: &str) -> Result<&ArrayInfo> {
        self.inner.meters.get(name)
    }
    pub fn meter_by_id(&self, id: u32) -> Result<&ArrayInfo> {
        self.inner.meters.by_id(id)
    }
    pub fn direct_meter(&self, name: &str) -> Result<&DirectInfo> {
        self.inner.direct_meters.get(name)
    }
    pub fn direct_meter_by_id(&self, id: u32) -> Result<&DirectInfo> {
        self.inner.direct_meters.by_id(id)
    }
    pub fn register(&self, name: &str) -> Result<&ArrayInfo> {
        self.inner.registers.get(name)
    }
    pub fn register_by_id(&self, id: u32) -> Result<&ArrayInfo> {
        self.inner.registers.by_id(id)
    }
    pub fn direct_counters(&self) -> &[DirectInfo] {
        &self.inner.direct_counters.items
    }
    pub fn meters(&self) -> &[ArrayInfo] {
        &self.inner.meters.items
    }
    pub fn direct_meters(&self) -> &[DirectInfo] {
        &self.inner.direct_meters.items
    }
    pub fn registers(&self) -> &[ArrayInfo] {
        &self.inner.registers.items
    }
    /// `packet_in` or `packet_out`.
    pub fn controller_header(&self, name: &str) -> Result<&ControllerHeaderInfo> {
        self.inner.controller_headers.get(name)
    }
    /// Every controller header, in P4Info order.
    pub fn controller_headers(&self) -> &[ControllerHeaderInfo] {
        &self.inner.controller_headers.items
    }
}

/// A register's element width when the P4Info gives it as a plain bitstring.
fn register_bitwidth(r: &cfg::Register) -> i32 {
    use cfg::p4_bitstring_like_type_spec::TypeSpec as Bit;
    use cfg::p4_data_type_spec::TypeSpec as Data;
    match r.type_spec.as_ref().and_then(|t| t.type_spec.as_ref()) {
        Some(Data::Bitstring(b)) => match b.type_spec.as_ref() {
            Some(Bit::Bit(b)) => b.bitwidth,
            Some(Bit::Int(i)) => i.bitwidth,
            _ => 0,
        },
        _ => 0,
    }
}

/// A resolved reference: (table id, table name, field id, field name).
type Target = (u32, String, u32, String);

/// Resolves every `@refers_to` to the referenced table and key field: each must exist (by name
/// or alias) and have the width of the field or parameter that refers to it, or the P4Info is
/// refused (a reference that can never match is a bug in the P4 source).
fn resolve_references(
    tables: &mut Named<TableInfo>,
    actions: &mut Named<ActionInfo>,
) -> Result<()> {
    let target = |tables: &Named<TableInfo>, r: &RefersTo, width: i32, from: &str| {
        let t = tables.get(&r.table).map_err(|_| {
            Error::P4Info(format!(
                "{from}: @refers_to({}, {}): no table {:?}",
                r.table, r.field, r.table
            ))
        })?;
        let f = t.field(&r.field).map_err(|_| {
            Error::P4Info(format!(
                "{from}: @refers_to({}, {}): table {} has no match field {:?}",
                r.table, r.field, t.name, r.field
            ))
        })?;
        if f.bitwidth != width {
            return Err(Error::P4Info(format!(
                "{from}: @refers_to({}, {}): {} bits refer to a field of {} bits",
                r.table, r.field, width, f.bitwidth
            )));
        }
        Ok::<_, Error>((t.id, t.name.clone(), f.id, f.name.clone()))
    };
    let mut resolved: Vec<(usize, usize, usize, Target)> = Vec::new();
    for (ti, t) in tables.items.iter().enumerate() {
        for (fi, f) in t.match_fields.iter().enumerate() {
            for (ri, r) in f.refers_to.iter().enumerate() {
                let from = format!("table {}, match field {}", t.name, f.name);
                resolved.push((ti, fi, ri, target(tables, r, f.bitwidth, &from)?));
            }
        }
    }
    for (ti, fi, ri, (table_id, table, field_id, field)) in resolved {
        let r = &mut tables.items[ti].match_fields[fi].refers_to[ri];
        (r.table_id, r.table, r.field_id, r.field) = (table_id, table, field_id, field);
    }
    let mut resolved = Vec::new();
    for (ai, a) in actions.items.iter().enumerate() {
        for (pi, p) in a.params.iter().enumerate() {
            for (ri, r) in p.refers_to.iter().enumerate() {
                let from = format!("action {}, parameter {}", a.name, p.name);
                resolved.push((ai, pi, ri, target(tables, r, p.bitwidth, &from)?));
            }
        }
    }
    for (ai, pi, ri, (table_id, table, field_id, field)) in resolved {
        let r = &mut actions.items[ai].params[pi].refers_to[ri];
        (r.table_id, r.table, r.field_id, r.field) = (table_id, table, field_id, field);
    }
    Ok(())
}

fn aliases<'a>(
    preambles: impl Iterator<Item = &'a Option<cfg::Preamble>>,
) -> impl Iterator<Item = (&'a str, u32)> {
    preambles.filter_map(|p| p.as_ref().map(|p| (p.alias.as_str(), p.id)))
}

fn read_tables(raw: &cfg::P4Info) -> Result<Named<TableInfo>> {
    let mut tables = Named::new(ObjectKind::Table);
    for t in &raw.tables {
        let (id, name, alias) = preamble(&t.preamble, "table")?;
        let mut info = TableInfo {
            id,
            name: name.clone(),
            alias: alias.clone(),
            match_fields: Vec::new(),
            action_ids: t.action_refs.iter().map(|a| a.id).collect(),
            default_only_action_ids: t
                .action_refs
                .iter()
                .filter(|a| a.scope == cfg::action_ref::Scope::DefaultOnly as i32)
                .map(|a| a.id)
                .collect(),
            const_default_action_id: t.const_default_action_id,
            action_profile_id: (t.implementation_id != 0).then_some(t.implementation_id),
            direct_counter_id: None,
            direct_meter_id: None,
            size: t.size,
            is_const: t.is_const_table,
            annotations: preamble_annotations(&t.preamble),
            owner: annotations::owner(&preamble_annotations(&t.preamble))
                .map_err(|e| Error::P4Info(format!("table {name}: {e}")))?,
            fields_by_name: HashMap::new(),
            fields_by_id: HashMap::new(),
        };
        for f in &t.match_fields {
            let i = info.match_fields.len();
            if info.fields_by_id.insert(f.id, i).is_some()
                || info.fields_by_name.insert(f.name.clone(), i).is_some()
            {
                return Err(Error::P4Info(format!(
                    "table {name}: duplicate match field {}",
                    f.name
                )));
            }
            let what = |e| Error::P4Info(format!("table {name}, match field {}: {e}", f.name));
            info.match_fields.push(MatchFieldInfo {
                id: f.id,
                name: f.name.clone(),
                bitwidth: f.bitwidth,
                kind: match_kind(f),
                annotations: f.annotations.clone(),
                refers_to: annotations::refers_to(&f.annotations).map_err(what)?,
                format: annotations::format(&f.annotations).map_err(what)?,
            });
        }
        tables.insert(id, &name, info)?;
    }

    Ok(tables)
}

fn read_actions(raw: &cfg::P4Info) -> Result<Named<ActionInfo>> {
    let mut actions = Named::new(ObjectKind::Action);
    for a in &raw.actions {
        let (id, name, alias) = preamble(&a.preamble, "action")?;
        let mut params = Vec::with_capacity(a.params.len());
        for p in &a.params {
            let what = |e| Error::P4Info(format!("action {name}, parameter {}: {e}", p.name));
            params.push(ParamInfo {
                id: p.id,
                name: p.name.clone(),
                bitwidth: p.bitwidth,
                annotations: p.annotations.clone(),
                refers_to: annotations::refers_to(&p.annotations).map_err(what)?,
                format: annotations::format(&p.annotations).map_err(what)?,
            });
        }
        actions.insert(
            id,
            &name,
            ActionInfo {
                id,
                name: name.clone(),
                alias: alias.clone(),
                params,
                annotations: preamble_annotations(&a.preamble),
            },
        )?;
    }

    Ok(actions)
}

fn read_action_profiles(raw: &cfg::P4Info) -> Result<Named<ActionProfileInfo>> {
    let mut action_profiles = Named::new(ObjectKind::ActionProfile);
    for p in &raw.action_profiles {
        let (id, name, alias) = preamble(&p.preamble, "action profile")?;
        action_profiles.insert(
            id,
            &name,
            ActionProfileInfo {
                id,
                name: name.clone(),
                alias: alias.clone(),
                table_ids: p.table_ids.clone(),
                with_selector: p.with_selector,
                size: p.size,
                max_group_size: p.max_group_size,
            },
        )?;
    }

    Ok(action_profiles)
}

/// One indexed array (counter, meter or register) into `named`.
fn array(
    kind: ObjectKind,
    pre: &Option<cfg::Preamble>,
    size: i64,
    (unit, bitwidth): (CounterUnit, i32),
    named: &mut Named<ArrayInfo>,
) -> Result<()> {
    let (id, name, alias) = preamble(pre, &kind.to_string())?;
    named.insert(
        id,
        &name,
        ArrayInfo {
            id,
            name: name.clone(),
            alias: alias.clone(),
            size,
            unit,
            bitwidth,
        },
    )
}

type Arrays = (Named<ArrayInfo>, Named<ArrayInfo>, Named<ArrayInfo>);

/// Counters, meters and registers.
fn read_arrays(raw: &cfg::P4Info) -> Result<Arrays> {
    let mut counters = Named::new(ObjectKind::Counter);
    for c in &raw.counters {
        let unit = CounterUnit::of(&c.spec);
        array(
            ObjectKind::Counter,
            &c.preamble,
            c.size,
            (unit, 0),
            &mut counters,
        )?;
    }
    let mut meters = Named::new(ObjectKind::Meter);
    for m in &raw.meters {
        let none = (CounterUnit::Unspecified, 0);
        array(ObjectKind::Meter, &m.preamble, m.size, none, &mut meters)?;
    }
    let mut registers = Named::new(ObjectKind::Register);
    for r in &raw.registers {
        let bitwidth = register_bitwidth(r);
        array(
            ObjectKind::Register,
            &r.preamble,
            i64::from(r.size),
            (CounterUnit::Unspecified, bitwidth),
            &mut registers,
        )?;
    }

    Ok((counters, meters, registers))
}

/// One direct resource (counter or meter) of table `table_id` into `named`.
fn direct(
    kind: ObjectKind,
    pre: &Option<cfg::Preamble>,
    table_id: u32,
    unit: CounterUnit,
    named: &mut Named<DirectInfo>,
) -> Result<()> {
    let (id, name, alias) = preamble(pre, &kind.to_string())?;
    named.insert(
        id,
        &name,
        DirectInfo {
            id,
            name: name.clone(),
            alias: alias.clone(),
            table_id,
            unit,
        },
    )
}

/// Direct counters and direct meters.
fn read_directs(raw: &cfg::P4Info) -> Result<(Named<DirectInfo>, Named<DirectInfo>)> {
    let mut direct_counters = Named::new(ObjectKind::DirectCounter);
    for c in &raw.direct_counters {
        direct(
            ObjectKind::DirectCounter,
            &c.preamble,
            c.direct_table_id,
            CounterUnit::of(&c.spec),
            &mut direct_counters,
        )?;
    }
    let mut direct_meters = Named::new(ObjectKind::DirectMeter);
    for m in &raw.direct_meters {
        direct(
            ObjectKind::DirectMeter,
            &m.preamble,
            m.direct_table_id,
            CounterUnit::Unspecified,
            &mut direct_meters,
        )?;
    }
    Ok((direct_counters, direct_meters))
}

fn read_controller_headers(raw: &cfg::P4Info) -> Result<Named<ControllerHeaderInfo>> {
    let mut controller_headers = Named::new(ObjectKind::ControllerHeader);
    for h in &raw.controller_packet_metadata {
        let (id, name, _) = preamble(&h.preamble, "controller packet metadata")?;
        let metadata = h
            .metadata
            .iter()
            .map(|m| PacketMetadataInfo {
                id: m.id,
                name: m.name.clone(),
                bitwidth: m.bitwidth,
            })
            .collect();
        controller_headers.insert(
            id,
            &name,
            ControllerHeaderInfo {
                id,
                name: name.clone(),
                metadata,
            },
        )?;
    }

    Ok(controller_headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEXTHOPS: u32 = 0x0200_0001;
    const ROUTES: u32 = 0x0200_0002;
    const SET_NEXTHOP_ID: u32 = 0x0100_0001;

    /// Two tables: routes whose action names a nexthop by `@refers_to`, and the nexthops.
    fn raw(reference: &str, param_bits: i32) -> cfg::P4Info {
        use cfg::match_field::{Match, MatchType};
        let pre = |id, name: &str, annotations: &[&str]| {
            Some(cfg::Preamble {
                id,
                name: name.into(),
                alias: name.rsplit('.').next().unwrap_or(name).into(),
                annotations: annotations.iter().map(|a| a.to_string()).collect(),
                ..Default::default()
            })
        };
        let field = |name: &str, bits, annotations: Vec<String>| cfg::MatchField {
            id: 1,
            name: name.into(),
            bitwidth: bits,
            annotations,
            r#match: Some(Match::MatchType(MatchType::Exact as i32)),
            ..Default::default()
        };
        cfg::P4Info {
            tables: vec![
                cfg::Table {
                    preamble: pre(
                        NEXTHOPS,
                        "ingress.nexthops",
                        &[r#"@weft_owner("controller")"#],
                    ),
                    match_fields: vec![field("nexthop_id", 16, vec![])],
                    ..Default::default()
                },
                cfg::Table {
                    preamble: pre(
                        ROUTES,
                        "ingress.routes",
                        &[r#"@weft_owner("plugin" , "it routes")"#],
                    ),
                    match_fields: vec![field("dst", 32, vec!["@format(IPV4_ADDRESS)".to_string()])],
                    action_refs: vec![cfg::ActionRef {
                        id: SET_NEXTHOP_ID,
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            ],
            actions: vec![cfg::Action {
                preamble: pre(SET_NEXTHOP_ID, "ingress.set_nexthop_id", &[]),
                params: vec![cfg::action::Param {
                    id: 1,
                    name: "nexthop_id".into(),
                    bitwidth: param_bits,
                    annotations: vec![reference.to_string()],
                    ..Default::default()
                }],
            }],
            ..Default::default()
        }
    }

    #[test]
    fn references_resolve_to_the_target_table_and_field_ids() {
        let info = P4Info::new(raw("@refers_to(nexthops , nexthop_id)", 16)).expect("loads");
        let p = &info.action_by_id(SET_NEXTHOP_ID).expect("action").params[0];
        assert_eq!(
            p.refers_to,
            vec![RefersTo {
                table_id: NEXTHOPS,
                table: "ingress.nexthops".into(),
                field_id: 1,
                field: "nexthop_id".into(),
            }]
        );
        let routes = info.table_by_id(ROUTES).expect("table");
        assert_eq!(
            routes.owner,
            Some(Owner::Plugin {
                reason: "it routes".into()
            })
        );
        assert_eq!(
            routes.match_fields[0].format,
            Some(DeclaredFormat::Ipv4Address)
        );
        let nexthops = info.table_by_id(NEXTHOPS).expect("table");
        assert_eq!(nexthops.owner, Some(Owner::Controller));
    }

    #[test]
    fn a_reference_to_a_missing_table_or_field_or_another_width_is_refused() {
        for (annotation, bits, expect) in [
            (
                "@refers_to(nexthop , nexthop_id)",
                16,
                "no table \"nexthop\"",
            ),
            ("@refers_to(nexthops , id)", 16, "no match field \"id\""),
            (
                "@refers_to(nexthops , nexthop_id)",
                12,
                "12 bits refer to a field of 16",
            ),
        ] {
            let err = P4Info::new(raw(annotation, bits)).expect_err(annotation);
            let msg = err.to_string();
            assert!(
                msg.contains(expect) && msg.contains("parameter nexthop_id"),
                "{annotation}: {msg}"
            );
        }
    }
}
