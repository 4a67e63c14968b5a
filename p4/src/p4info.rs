//! A small typed view of the P4Info (from p4c's JSON output): names ↔ ids and bitwidths of every
//! table, match field, action, parameter, counter, register, action profile and controller packet
//! metadata. It is what the generator reads, and what code that gets a name at run time (for
//! example from a P4RT_TABLE key) uses to resolve it.
//!
//! Objects are found by their fully qualified name (`ingress.routing.ipv4_table`) or by their
//! alias (`ipv4_table`), which p4c makes unique.

use std::collections::HashMap;

use serde::{Deserialize, Deserializer};

/// Errors of the P4Info view. Unknown names say what kind of object was looked up and where.
#[derive(Debug, thiserror::Error)]
pub enum P4InfoError {
    #[error("P4Info JSON does not parse: {0}")]
    Parse(#[from] serde_json::Error),
    #[error("P4Info has two {kind} objects called {name:?}")]
    Duplicate { kind: &'static str, name: String },
    #[error("unknown {kind} {name:?}{}", scope_suffix(.scope))]
    Unknown {
        kind: &'static str,
        name: String,
        scope: Option<String>,
    },
    #[error("value {value} does not fit in {bitwidth} bits ({what})")]
    TooWide {
        what: String,
        value: u128,
        bitwidth: u32,
    },
}

fn scope_suffix(scope: &Option<String>) -> String {
    scope
        .as_ref()
        .map(|s| format!(" in {s}"))
        .unwrap_or_default()
}

/// Match kind of a table key field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchKind {
    Exact,
    Lpm,
    Ternary,
    Range,
    Optional,
    /// A kind the P4Info names that this crate does not know.
    Other,
}

impl MatchKind {
    fn from_p4info(s: &str) -> Self {
        match s {
            "EXACT" => Self::Exact,
            "LPM" => Self::Lpm,
            "TERNARY" => Self::Ternary,
            "RANGE" => Self::Range,
            "OPTIONAL" => Self::Optional,
            _ => Self::Other,
        }
    }

    /// Whether entries of a table with a field of this kind carry a priority.
    pub fn needs_priority(self) -> bool {
        matches!(self, Self::Ternary | Self::Range | Self::Optional)
    }
}

/// What a counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterUnit {
    Packets,
    Bytes,
    Both,
    Unspecified,
}

impl CounterUnit {
    fn from_p4info(s: &str) -> Self {
        match s {
            "PACKETS" => Self::Packets,
            "BYTES" => Self::Bytes,
            "BOTH" => Self::Both,
            _ => Self::Unspecified,
        }
    }
}

/// Where an action may be used in a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionScope {
    TableAndDefault,
    TableOnly,
    DefaultOnly,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchField {
    pub id: u32,
    pub name: String,
    pub bitwidth: u32,
    pub kind: MatchKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRef {
    pub id: u32,
    pub scope: ActionScope,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub match_fields: Vec<MatchField>,
    pub actions: Vec<ActionRef>,
    /// The action profile implementing the table (0 = none).
    pub implementation_id: u32,
    pub direct_resource_ids: Vec<u32>,
    pub size: u64,
    pub is_const: bool,
}

impl Table {
    pub fn field(&self, name: &str) -> Result<&MatchField, P4InfoError> {
        self.match_fields
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| P4InfoError::Unknown {
                kind: "match field",
                name: name.to_string(),
                scope: Some(format!("table {}", self.name)),
            })
    }

    pub fn allows_action(&self, action_id: u32) -> bool {
        self.actions.iter().any(|a| a.id == action_id)
    }

    /// Whether entries carry a priority (a ternary, range or optional field).
    pub fn needs_priority(&self) -> bool {
        self.match_fields.iter().any(|f| f.kind.needs_priority())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub id: u32,
    pub name: String,
    pub bitwidth: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub params: Vec<Param>,
}

impl Action {
    pub fn param(&self, name: &str) -> Result<&Param, P4InfoError> {
        self.params
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| P4InfoError::Unknown {
                kind: "action parameter",
                name: name.to_string(),
                scope: Some(format!("action {}", self.name)),
            })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionProfile {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub table_ids: Vec<u32>,
    pub with_selector: bool,
    pub size: u64,
    pub max_group_size: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub unit: CounterUnit,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectCounter {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub unit: CounterUnit,
    pub table_id: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Register {
    pub id: u32,
    pub name: String,
    pub alias: String,
    pub bitwidth: u32,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketMetadataField {
    pub id: u32,
    pub name: String,
    pub bitwidth: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketMetadata {
    pub id: u32,
    /// `packet_in` or `packet_out`.
    pub name: String,
    pub fields: Vec<PacketMetadataField>,
}

impl PacketMetadata {
    pub fn field(&self, name: &str) -> Result<&PacketMetadataField, P4InfoError> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| P4InfoError::Unknown {
                kind: "packet metadata field",
                name: name.to_string(),
                scope: Some(self.name.clone()),
            })
    }
}

/// Whether `value` fits in `bitwidth` bits; `what` names the field in the error.
pub fn check_width(what: &str, value: u128, bitwidth: u32) -> Result<(), P4InfoError> {
    if bitwidth >= 128 || value >> bitwidth == 0 {
        Ok(())
    } else {
        Err(P4InfoError::TooWide {
            what: what.to_string(),
            value,
            bitwidth,
        })
    }
}

/// Lookup by fully qualified name or alias.
#[derive(Debug, Clone, Default)]
struct Names {
    by_name: HashMap<String, usize>,
}

impl Names {
    fn build<'a>(
        kind: &'static str,
        items: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, P4InfoError> {
        let mut by_name = HashMap::new();
        let mut aliases: HashMap<String, Option<usize>> = HashMap::new();
        for (i, (name, alias)) in items.enumerate() {
            if by_name.insert(name.to_string(), i).is_some() {
                return Err(P4InfoError::Duplicate {
                    kind,
                    name: name.to_string(),
                });
            }
            if !alias.is_empty() && alias != name {
                // An alias shared by two objects resolves to neither.
                aliases
                    .entry(alias.to_string())
                    .and_modify(|v| *v = None)
                    .or_insert(Some(i));
            }
        }
        for (alias, i) in aliases {
            if let Some(i) = i {
                by_name.entry(alias).or_insert(i);
            }
        }
        Ok(Self { by_name })
    }

    fn get(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }
}

/// The P4Info of a pipeline, indexed.
#[derive(Debug, Clone)]
pub struct P4Info {
    pub tables: Vec<Table>,
    pub actions: Vec<Action>,
    pub action_profiles: Vec<ActionProfile>,
    pub counters: Vec<Counter>,
    pub direct_counters: Vec<DirectCounter>,
    pub registers: Vec<Register>,
    pub packet_metadata: Vec<PacketMetadata>,
    table_names: Names,
    action_names: Names,
    profile_names: Names,
    counter_names: Names,
    direct_counter_names: Names,
    register_names: Names,
}

macro_rules! lookup {
    ($fn_name:ident, $by_id:ident, $field:ident, $names:ident, $ty:ty, $kind:literal) => {
        #[doc = concat!("The ", $kind, " called `name` (fully qualified name or alias).")]
        pub fn $fn_name(&self, name: &str) -> Result<&$ty, P4InfoError> {
            self.$names
                .get(name)
                .map(|i| &self.$field[i])
                .ok_or_else(|| P4InfoError::Unknown {
                    kind: $kind,
                    name: name.to_string(),
                    scope: None,
                })
        }

        #[doc = concat!("The ", $kind, " with P4Runtime id `id`.")]
        pub fn $by_id(&self, id: u32) -> Option<&$ty> {
            self.$field.iter().find(|x| x.id == id)
        }
    };
}

impl P4Info {
    /// The P4Info of Weft's pipeline, as committed in `p4/build/weft.p4info.json`.
    pub fn weft() -> Result<Self, P4InfoError> {
        Self::from_json(crate::P4INFO_JSON)
    }

    /// Parses p4c's JSON P4Info (`--p4runtime-files x.json`).
    pub fn from_json(json: &str) -> Result<Self, P4InfoError> {
        let raw: RawP4Info = serde_json::from_str(json)?;
        Self::from_raw(raw)
    }

    fn from_raw(raw: RawP4Info) -> Result<Self, P4InfoError> {
        let tables: Vec<Table> = raw
            .tables
            .into_iter()
            .map(|t| Table {
                id: t.preamble.id,
                name: t.preamble.name,
                alias: t.preamble.alias,
                match_fields: t
                    .match_fields
                    .into_iter()
                    .map(|f| MatchField {
                        id: f.id,
                        name: f.name,
                        bitwidth: f.bitwidth,
                        kind: MatchKind::from_p4info(f.match_type.as_deref().unwrap_or("")),
                    })
                    .collect(),
                actions: t
                    .action_refs
                    .into_iter()
                    .map(|a| ActionRef {
                        id: a.id,
                        scope: match a.scope.as_deref() {
                            Some("TABLE_ONLY") => ActionScope::TableOnly,
                            Some("DEFAULT_ONLY") => ActionScope::DefaultOnly,
                            _ => ActionScope::TableAndDefault,
                        },
                    })
                    .collect(),
                implementation_id: t.implementation_id,
                direct_resource_ids: t.direct_resource_ids,
                size: t.size,
                is_const: t.is_const_table,
            })
            .collect();
        let actions: Vec<Action> = raw
            .actions
            .into_iter()
            .map(|a| Action {
                id: a.preamble.id,
                name: a.preamble.name,
                alias: a.preamble.alias,
                params: a
                    .params
                    .into_iter()
                    .map(|p| Param {
                        id: p.id,
                        name: p.name,
                        bitwidth: p.bitwidth,
                    })
                    .collect(),
            })
            .collect();
        let action_profiles: Vec<ActionProfile> = raw
            .action_profiles
            .into_iter()
            .map(|p| ActionProfile {
                id: p.preamble.id,
                name: p.preamble.name,
                alias: p.preamble.alias,
                table_ids: p.table_ids,
                with_selector: p.with_selector,
                size: p.size,
                max_group_size: p.max_group_size,
            })
            .collect();
        let counters: Vec<Counter> = raw
            .counters
            .into_iter()
            .map(|c| Counter {
                id: c.preamble.id,
                name: c.preamble.name,
                alias: c.preamble.alias,
                unit: CounterUnit::from_p4info(&c.spec.unit),
                size: c.size,
            })
            .collect();
        let direct_counters: Vec<DirectCounter> = raw
            .direct_counters
            .into_iter()
            .map(|c| DirectCounter {
                id: c.preamble.id,
                name: c.preamble.name,
                alias: c.preamble.alias,
                unit: CounterUnit::from_p4info(&c.spec.unit),
                table_id: c.direct_table_id,
            })
            .collect();
        let registers: Vec<Register> = raw
            .registers
            .into_iter()
            .map(|r| Register {
                id: r.preamble.id,
                name: r.preamble.name,
                alias: r.preamble.alias,
                bitwidth: r.type_spec.bitstring.bit.bitwidth,
                size: r.size,
            })
            .collect();
        let packet_metadata: Vec<PacketMetadata> = raw
            .controller_packet_metadata
            .into_iter()
            .map(|m| PacketMetadata {
                id: m.preamble.id,
                name: m.preamble.name,
                fields: m
                    .metadata
                    .into_iter()
                    .map(|f| PacketMetadataField {
                        id: f.id,
                        name: f.name,
                        bitwidth: f.bitwidth,
                    })
                    .collect(),
            })
            .collect();

        fn names<'a, T: 'a>(
            kind: &'static str,
            items: &'a [T],
            f: impl Fn(&'a T) -> (&'a str, &'a str),
        ) -> Result<Names, P4InfoError> {
            Names::build(kind, items.iter().map(f))
        }
        Ok(Self {
            table_names: names("table", &tables, |t| (&t.name, &t.alias))?,
            action_names: names("action", &actions, |t| (&t.name, &t.alias))?,
            profile_names: names("action profile", &action_profiles, |t| (&t.name, &t.alias))?,
            counter_names: names("counter", &counters, |t| (&t.name, &t.alias))?,
            direct_counter_names: names("direct counter", &direct_counters, |t| {
                (&t.name, &t.alias)
            })?,
            register_names: names("register", &registers, |t| (&t.name, &t.alias))?,
            tables,
            actions,
            action_profiles,
            counters,
            direct_counters,
            registers,
            packet_metadata,
        })
    }

    lookup!(table, table_by_id, tables, table_names, Table, "table");
    lookup!(
        action,
        action_by_id,
        actions,
        action_names,
        Action,
        "action"
    );
    lookup!(
        action_profile,
        action_profile_by_id,
        action_profiles,
        profile_names,
        ActionProfile,
        "action profile"
    );
    lookup!(
        counter,
        counter_by_id,
        counters,
        counter_names,
        Counter,
        "counter"
    );
    lookup!(
        direct_counter,
        direct_counter_by_id,
        direct_counters,
        direct_counter_names,
        DirectCounter,
        "direct counter"
    );
    lookup!(
        register,
        register_by_id,
        registers,
        register_names,
        Register,
        "register"
    );

    /// Controller packet metadata (`packet_in` or `packet_out`).
    pub fn packet_metadata(&self, name: &str) -> Result<&PacketMetadata, P4InfoError> {
        self.packet_metadata
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| P4InfoError::Unknown {
                kind: "controller packet metadata",
                name: name.to_string(),
                scope: None,
            })
    }
}

// ---- p4c's JSON form of the P4Info (protobuf JSON mapping: lowerCamelCase names, 64-bit
// integers as strings). snake_case aliases accept the other spelling protobuf allows.

fn u64_str_or_num<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        Num(u64),
        Str(String),
    }
    match N::deserialize(d)? {
        N::Num(n) => Ok(n),
        N::Str(s) => s.parse().map_err(serde::de::Error::custom),
    }
}

#[derive(Deserialize)]
struct RawPreamble {
    id: u32,
    name: String,
    #[serde(default)]
    alias: String,
}

#[derive(Deserialize)]
struct RawP4Info {
    #[serde(default)]
    tables: Vec<RawTable>,
    #[serde(default)]
    actions: Vec<RawAction>,
    #[serde(default, rename = "actionProfiles", alias = "action_profiles")]
    action_profiles: Vec<RawActionProfile>,
    #[serde(default)]
    counters: Vec<RawCounter>,
    #[serde(default, rename = "directCounters", alias = "direct_counters")]
    direct_counters: Vec<RawDirectCounter>,
    #[serde(default)]
    registers: Vec<RawRegister>,
    #[serde(
        default,
        rename = "controllerPacketMetadata",
        alias = "controller_packet_metadata"
    )]
    controller_packet_metadata: Vec<RawPacketMetadata>,
}

#[derive(Deserialize)]
struct RawTable {
    preamble: RawPreamble,
    #[serde(default, rename = "matchFields", alias = "match_fields")]
    match_fields: Vec<RawMatchField>,
    #[serde(default, rename = "actionRefs", alias = "action_refs")]
    action_refs: Vec<RawActionRef>,
    #[serde(default, rename = "implementationId", alias = "implementation_id")]
    implementation_id: u32,
    #[serde(default, rename = "directResourceIds", alias = "direct_resource_ids")]
    direct_resource_ids: Vec<u32>,
    #[serde(default, deserialize_with = "u64_str_or_num")]
    size: u64,
    #[serde(default, rename = "isConstTable", alias = "is_const_table")]
    is_const_table: bool,
}

#[derive(Deserialize)]
struct RawMatchField {
    id: u32,
    name: String,
    #[serde(default)]
    bitwidth: u32,
    #[serde(default, rename = "matchType", alias = "match_type")]
    match_type: Option<String>,
}

#[derive(Deserialize)]
struct RawActionRef {
    id: u32,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
struct RawAction {
    preamble: RawPreamble,
    #[serde(default)]
    params: Vec<RawParam>,
}

#[derive(Deserialize)]
struct RawParam {
    id: u32,
    name: String,
    #[serde(default)]
    bitwidth: u32,
}

#[derive(Deserialize)]
struct RawActionProfile {
    preamble: RawPreamble,
    #[serde(default, rename = "tableIds", alias = "table_ids")]
    table_ids: Vec<u32>,
    #[serde(default, rename = "withSelector", alias = "with_selector")]
    with_selector: bool,
    #[serde(default, deserialize_with = "u64_str_or_num")]
    size: u64,
    #[serde(default, rename = "maxGroupSize", alias = "max_group_size")]
    max_group_size: u32,
}

#[derive(Deserialize, Default)]
struct RawCounterSpec {
    #[serde(default)]
    unit: String,
}

#[derive(Deserialize)]
struct RawCounter {
    preamble: RawPreamble,
    #[serde(default)]
    spec: RawCounterSpec,
    #[serde(default, deserialize_with = "u64_str_or_num")]
    size: u64,
}

#[derive(Deserialize)]
struct RawDirectCounter {
    preamble: RawPreamble,
    #[serde(default)]
    spec: RawCounterSpec,
    #[serde(default, rename = "directTableId", alias = "direct_table_id")]
    direct_table_id: u32,
}

#[derive(Deserialize, Default)]
struct RawBit {
    #[serde(default)]
    bitwidth: u32,
}

#[derive(Deserialize, Default)]
struct RawBitstring {
    #[serde(default)]
    bit: RawBit,
}

#[derive(Deserialize, Default)]
struct RawTypeSpec {
    #[serde(default)]
    bitstring: RawBitstring,
}

#[derive(Deserialize)]
struct RawRegister {
    preamble: RawPreamble,
    #[serde(default, rename = "typeSpec", alias = "type_spec")]
    type_spec: RawTypeSpec,
    #[serde(default, deserialize_with = "u64_str_or_num")]
    size: u64,
}

#[derive(Deserialize)]
struct RawPacketMetadata {
    preamble: RawPreamble,
    #[serde(default)]
    metadata: Vec<RawParam>,
}

#[cfg(test)]
mod tests {
    use super::*;

    // The shape p4c writes: lowerCamelCase keys, int64 sizes as strings, int32 as numbers.
    const SAMPLE: &str = r#"{
      "tables": [
        {"preamble": {"id": 33554433, "name": "ingress.a.t", "alias": "t"},
         "matchFields": [{"id": 1, "name": "k", "bitwidth": 9, "matchType": "TERNARY"}],
         "actionRefs": [{"id": 16777217}, {"id": 16777218, "scope": "DEFAULT_ONLY"}],
         "size": "1024", "implementationId": 285212673},
        {"preamble": {"id": 33554434, "name": "egress.b.t", "alias": "b.t"}, "size": "8"}
      ],
      "actions": [{"preamble": {"id": 16777217, "name": "ingress.a.act", "alias": "act"},
                   "params": [{"id": 1, "name": "p", "bitwidth": 16}]}],
      "registers": [{"preamble": {"id": 369098753, "name": "r", "alias": "r"},
                     "typeSpec": {"bitstring": {"bit": {"bitwidth": 48}}}, "size": 4096}],
      "counters": [{"preamble": {"id": 301989889, "name": "ingress.a.c", "alias": "c"},
                    "spec": {"unit": "BOTH"}, "size": "512"}]
    }"#;

    #[test]
    fn parses_p4c_json_with_string_sizes_and_camel_case_keys() {
        let info = P4Info::from_json(SAMPLE).expect("parses");
        let t = info.table("t").expect("by alias");
        assert_eq!(t.size, 1024);
        assert_eq!(t.implementation_id, 285212673);
        assert!(t.needs_priority());
        assert_eq!(t.actions[1].scope, ActionScope::DefaultOnly);
        assert_eq!(info.table("egress.b.t").expect("by name").id, 33554434);
        assert_eq!(info.register("r").expect("register").bitwidth, 48);
        assert_eq!(info.counter("c").expect("counter").unit, CounterUnit::Both);
        assert_eq!(info.action_by_id(16777217).map(|a| a.params.len()), Some(1));
    }

    #[test]
    fn malformed_json_is_a_parse_error_not_a_panic() {
        let err = P4Info::from_json("{\"tables\": [{\"preamble\": 3}]}").expect_err("bad");
        assert!(matches!(err, P4InfoError::Parse(_)));
    }

    #[test]
    fn an_alias_shared_by_two_objects_resolves_to_neither() {
        let json = r#"{"tables": [
            {"preamble": {"id": 1, "name": "ingress.x.t", "alias": "t"}},
            {"preamble": {"id": 2, "name": "egress.y.t", "alias": "t"}}]}"#;
        let info = P4Info::from_json(json).expect("parses");
        assert!(info.table("t").is_err());
        assert_eq!(info.table("egress.y.t").expect("full name").id, 2);
    }
}
