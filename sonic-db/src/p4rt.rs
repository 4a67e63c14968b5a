//! APPL_DB `P4RT_TABLE` entries in the format of SONiC's P4RT app (sonic-pins `p4rt_app/sonic`).
//!
//! ```text
//!   Redis key   P4RT_TABLE:FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.81.8.0/24","match/vrf_id":"v1"}
//!               └ table ─┘ └ SONiC name ──┘ └ match JSON: sorted keys, compact, "priority":N if N>0 ┘
//!   producer key           FIXED_IPV4_TABLE:{...}        (the key within P4RT_TABLE; also the key of
//!                                                          responses and of APPL_STATE_DB entries)
//!   fields      action=set_nexthop_id  param/nexthop_id=nh-1
//!               | actions=[{"action":"set_nexthop_id","param/nexthop_id":"nh-1","watch_port":"Ethernet1","weight":2},...]
//!               meter/cir meter/cburst meter/pir meter/pburst (non-zero only)  controller_metadata
//! ```
//!
//! The key string is the entry's identity in Redis, so a key is only accepted when it is byte-for-byte
//! the canonical encoding of what it parses to: a second spelling of the same entry would otherwise
//! live beside the first and never be deleted.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::error::P4rtError;
use crate::types::{FieldValues, KeyOpFieldValues};

/// The APPL_DB table holding all P4 entries.
pub const P4RT_TABLE: &str = "P4RT_TABLE";
pub const MATCH_PREFIX: &str = "match/";
pub const PARAM_PREFIX: &str = "param/";
pub const FIELD_ACTION: &str = "action";
pub const FIELD_ACTIONS: &str = "actions";
pub const FIELD_CONTROLLER_METADATA: &str = "controller_metadata";
pub const FIELD_METER_CIR: &str = "meter/cir";
pub const FIELD_METER_CBURST: &str = "meter/cburst";
pub const FIELD_METER_PIR: &str = "meter/pir";
pub const FIELD_METER_PBURST: &str = "meter/pburst";
const KEY_PRIORITY: &str = "priority";
const ITEM_WEIGHT: &str = "weight";
const ITEM_WATCH_PORT: &str = "watch_port";

/// The key of a P4RT_TABLE entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct P4rtKey {
    /// SONiC table name, e.g. `FIXED_IPV4_TABLE` (see [`P4rtTableNames`]).
    pub table: String,
    /// Match fields keyed with their prefix, e.g. `"match/ipv4_dst" → "10.0.0.0/8"`. Values: exact as
    /// the string itself, LPM `addr/len`, ternary `value&mask`.
    pub matches: BTreeMap<String, String>,
    /// 0 for tables without priority; then it is left out of the key.
    pub priority: u32,
}

impl P4rtKey {
    pub fn new(table: impl Into<String>) -> Self {
        P4rtKey {
            table: table.into(),
            matches: BTreeMap::new(),
            priority: 0,
        }
    }

    /// Adds a match; `field` may be given with or without the `match/` prefix.
    pub fn with_match(mut self, field: &str, value: impl Into<String>) -> Self {
        let name = if field.starts_with(MATCH_PREFIX) {
            field.to_string()
        } else {
            format!("{MATCH_PREFIX}{field}")
        };
        self.matches.insert(name, value.into());
        self
    }

    pub fn with_priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }

    /// The value of match field `name` (without the prefix).
    pub fn match_value(&self, name: &str) -> Option<&str> {
        self.matches
            .get(&format!("{MATCH_PREFIX}{name}"))
            .map(String::as_str)
    }

    /// Match fields without their prefix.
    pub fn match_fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.matches.iter().map(|(k, v)| {
            (
                k.strip_prefix(MATCH_PREFIX).unwrap_or(k.as_str()),
                v.as_str(),
            )
        })
    }

    /// The canonical match JSON: keys sorted bytewise, no spaces, `"priority"` only when non-zero
    /// (what nlohmann::json's `dump()` gives SONiC's P4RT app).
    pub fn match_json(&self) -> String {
        serde_json::to_string(&KeyJson(self)).unwrap_or_else(|_| "{}".to_string())
    }

    /// `<TABLE>:<JSON>`: the key within P4RT_TABLE, used by the producer, the consumer, responses and
    /// APPL_STATE_DB.
    pub fn to_table_key(&self) -> String {
        format!("{}:{}", self.table, self.match_json())
    }

    /// `P4RT_TABLE:<TABLE>:<JSON>`: the full Redis key of the live entry.
    pub fn to_db_key(&self) -> String {
        format!("{P4RT_TABLE}:{}", self.to_table_key())
    }

    /// Checks table name, match names and values (what the parser insists on).
    pub fn validate(&self) -> Result<(), P4rtError> {
        check_sonic_table_name(&self.table)?;
        let bad = |reason: String| P4rtError::KeyContent {
            key: self.to_table_key(),
            reason,
        };
        for (name, value) in &self.matches {
            let Some(field) = name.strip_prefix(MATCH_PREFIX) else {
                return Err(bad(format!(
                    "match field {name:?} does not start with {MATCH_PREFIX:?}"
                )));
            };
            if field.is_empty() || field.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(bad(format!("invalid match field name {name:?}")));
            }
            if value.is_empty() {
                return Err(bad(format!("match field {name:?} has an empty value")));
            }
            if value.chars().any(char::is_control) {
                return Err(bad(format!(
                    "match field {name:?} has control characters in its value"
                )));
            }
        }
        Ok(())
    }

    /// Parses `<TABLE>:<JSON>` strictly (canonical form only).
    pub fn parse_table_key(key: &str) -> Result<Self, P4rtError> {
        let Some((table, json)) = key.split_once(':') else {
            return Err(P4rtError::MissingSeparator {
                key: key.to_string(),
            });
        };
        check_sonic_table_name(table)?;
        let value: Value = serde_json::from_str(json).map_err(|e| P4rtError::KeyJson {
            key: key.to_string(),
            reason: e.to_string(),
        })?;
        let Value::Object(obj) = value else {
            return Err(P4rtError::KeyJson {
                key: key.to_string(),
                reason: "not a JSON object".to_string(),
            });
        };
        let content = |reason: String| P4rtError::KeyContent {
            key: key.to_string(),
            reason,
        };
        let mut out = P4rtKey::new(table);
        for (name, v) in obj {
            if name == KEY_PRIORITY {
                let p = v
                    .as_u64()
                    .and_then(|p| u32::try_from(p).ok())
                    .ok_or_else(|| {
                        content(format!(
                            "priority must be an integer in 1..={}, got {v}",
                            u32::MAX
                        ))
                    })?;
                out.priority = p;
                continue;
            }
            let Value::String(s) = v else {
                return Err(content(format!(
                    "match field {name:?} must be a JSON string, got {v}"
                )));
            };
            out.matches.insert(name, s);
        }
        out.validate().map_err(|e| match e {
            P4rtError::KeyContent { reason, .. } => content(reason),
            other => other,
        })?;
        let canonical = out.to_table_key();
        if canonical != key {
            return Err(P4rtError::NonCanonicalKey {
                key: key.to_string(),
                canonical,
            });
        }
        Ok(out)
    }

    /// Parses `P4RT_TABLE:<TABLE>:<JSON>`.
    pub fn parse_db_key(key: &str) -> Result<Self, P4rtError> {
        const PREFIX: &str = "P4RT_TABLE:";
        let rest = key
            .strip_prefix(PREFIX)
            .ok_or_else(|| P4rtError::WrongPrefix {
                key: key.to_string(),
                prefix: PREFIX,
            })?;
        P4rtKey::parse_table_key(rest)
    }
}

/// Serialises a key's match object without copying it. Matches come from a BTreeMap, so they are in
/// bytewise order; "priority" sorts after every "match/..." name, so appending it keeps the order.
struct KeyJson<'a>(&'a P4rtKey);

impl serde::Serialize for KeyJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let key = self.0;
        let extra = usize::from(key.priority > 0);
        let mut map = s.serialize_map(Some(key.matches.len() + extra))?;
        let mut priority_done = key.priority == 0;
        for (name, value) in &key.matches {
            // Only reachable for names that validate() rejects; keeps the output sorted regardless.
            if !priority_done && name.as_str() > KEY_PRIORITY {
                map.serialize_entry(KEY_PRIORITY, &key.priority)?;
                priority_done = true;
            }
            map.serialize_entry(name, value)?;
        }
        if !priority_done {
            map.serialize_entry(KEY_PRIORITY, &key.priority)?;
        }
        map.end()
    }
}

impl fmt::Display for P4rtKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_table_key())
    }
}

impl FromStr for P4rtKey {
    type Err = P4rtError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        P4rtKey::parse_table_key(s)
    }
}

/// An action with its parameters (names without the `param/` prefix).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct P4rtAction {
    pub name: String,
    pub params: BTreeMap<String, String>,
}

impl P4rtAction {
    pub fn new(name: impl Into<String>) -> Self {
        P4rtAction {
            name: name.into(),
            params: BTreeMap::new(),
        }
    }

    pub fn with_param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.insert(name.into(), value.into());
        self
    }
}

/// One member of a weighted action set (WCMP group).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WeightedAction {
    pub action: P4rtAction,
    /// At least 1.
    pub weight: u32,
    /// SONiC port name (`EthernetN`) whose oper-down prunes the member.
    pub watch_port: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum P4rtActionSpec {
    Single(P4rtAction),
    Weighted(Vec<WeightedAction>),
}

/// Meter configuration; zero rates are left out of the fields, so an all-zero meter reads back as none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct P4rtMeter {
    pub cir: u64,
    pub cburst: u64,
    pub pir: u64,
    pub pburst: u64,
}

/// A complete P4RT_TABLE entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct P4rtEntry {
    pub key: P4rtKey,
    pub action: P4rtActionSpec,
    pub controller_metadata: Option<String>,
    pub meter: Option<P4rtMeter>,
}

impl P4rtEntry {
    pub fn new(key: P4rtKey, action: P4rtAction) -> Self {
        P4rtEntry {
            key,
            action: P4rtActionSpec::Single(action),
            controller_metadata: None,
            meter: None,
        }
    }

    pub fn weighted(key: P4rtKey, members: Vec<WeightedAction>) -> Self {
        P4rtEntry {
            key,
            action: P4rtActionSpec::Weighted(members),
            controller_metadata: None,
            meter: None,
        }
    }

    /// The hash fields, in a fixed order.
    pub fn to_fields(&self) -> FieldValues {
        let mut out = Vec::new();
        match &self.action {
            P4rtActionSpec::Single(a) => {
                out.push((FIELD_ACTION.to_string(), a.name.clone()));
                for (p, v) in &a.params {
                    out.push((format!("{PARAM_PREFIX}{p}"), v.clone()));
                }
            }
            P4rtActionSpec::Weighted(members) => {
                out.push((FIELD_ACTIONS.to_string(), action_set_json(members)));
            }
        }
        if let Some(m) = &self.meter {
            for (field, v) in [
                (FIELD_METER_CIR, m.cir),
                (FIELD_METER_CBURST, m.cburst),
                (FIELD_METER_PIR, m.pir),
                (FIELD_METER_PBURST, m.pburst),
            ] {
                if v != 0 {
                    out.push((field.to_string(), v.to_string()));
                }
            }
        }
        if let Some(md) = &self.controller_metadata {
            out.push((FIELD_CONTROLLER_METADATA.to_string(), md.clone()));
        }
        out
    }

    /// The producer operation that installs or modifies this entry.
    pub fn to_set_op(&self) -> KeyOpFieldValues {
        KeyOpFieldValues {
            key: self.key.to_table_key(),
            op: crate::types::Op::Set,
            fields: self.to_fields(),
        }
    }

    /// Parses the fields of an entry strictly: unknown fields, a missing or doubled action, parameters
    /// without an action and malformed action sets are errors that name the problem.
    pub fn from_fields(key: P4rtKey, fields: &[(String, String)]) -> Result<Self, P4rtError> {
        // The key's text only for errors: serialising it for every entry was a tenth of the
        // plugin's translation.
        let k = || key.to_table_key();
        let field_err = |reason: String| P4rtError::Field { key: k(), reason };
        let mut action: Option<String> = None;
        let mut actions: Option<&str> = None;
        let mut params = BTreeMap::new();
        let mut meter = P4rtMeter::default();
        let mut has_meter = false;
        let mut controller_metadata = None;
        let mut seen = std::collections::BTreeSet::new();
        for (f, v) in fields {
            if !seen.insert(f.as_str()) {
                return Err(field_err(format!("field {f:?} appears twice")));
            }
            match f.as_str() {
                FIELD_ACTION => action = Some(v.clone()),
                FIELD_ACTIONS => actions = Some(v.as_str()),
                FIELD_CONTROLLER_METADATA => controller_metadata = Some(v.clone()),
                FIELD_METER_CIR | FIELD_METER_CBURST | FIELD_METER_PIR | FIELD_METER_PBURST => {
                    let n: u64 = v.parse().map_err(|_| {
                        field_err(format!("{f} must be a non-negative integer, got {v:?}"))
                    })?;
                    has_meter = true;
                    match f.as_str() {
                        FIELD_METER_CIR => meter.cir = n,
                        FIELD_METER_CBURST => meter.cburst = n,
                        FIELD_METER_PIR => meter.pir = n,
                        _ => meter.pburst = n,
                    }
                }
                other => {
                    let Some(p) = other.strip_prefix(PARAM_PREFIX) else {
                        return Err(P4rtError::UnknownField {
                            key: k(),
                            field: other.to_string(),
                        });
                    };
                    if p.is_empty() {
                        return Err(field_err("parameter field with an empty name".into()));
                    }
                    params.insert(p.to_string(), v.clone());
                }
            }
        }
        let spec = match (action, actions) {
            (Some(_), Some(_)) => {
                return Err(field_err(
                    "has both 'action' and 'actions'; an entry has one or the other".into(),
                ));
            }
            (None, None) => {
                return Err(field_err("has neither 'action' nor 'actions'".into()));
            }
            (Some(name), None) => {
                if name.is_empty() {
                    return Err(field_err("'action' is empty".into()));
                }
                P4rtActionSpec::Single(P4rtAction { name, params })
            }
            (None, Some(json)) => {
                if let Some(p) = params.keys().next() {
                    return Err(field_err(format!(
                        "parameter 'param/{p}' outside 'actions' in a weighted entry"
                    )));
                }
                P4rtActionSpec::Weighted(parse_action_set(&k(), json)?)
            }
        };
        Ok(P4rtEntry {
            key,
            action: spec,
            controller_metadata,
            meter: has_meter.then_some(meter),
        })
    }

    /// Parses a consumed SET operation (key `<TABLE>:<JSON>` plus fields).
    pub fn from_set_op(op: &KeyOpFieldValues) -> Result<Self, P4rtError> {
        let key = P4rtKey::parse_table_key(&op.key)?;
        P4rtEntry::from_fields(key, &op.fields)
    }
}

/// The `actions` field: a compact JSON array of objects with sorted keys.
pub fn action_set_json(members: &[WeightedAction]) -> String {
    let items: Vec<BTreeMap<String, Value>> = members
        .iter()
        .map(|m| {
            let mut obj = BTreeMap::new();
            obj.insert(
                FIELD_ACTION.to_string(),
                Value::String(m.action.name.clone()),
            );
            for (p, v) in &m.action.params {
                obj.insert(format!("{PARAM_PREFIX}{p}"), Value::String(v.clone()));
            }
            obj.insert(ITEM_WEIGHT.to_string(), Value::from(m.weight));
            if let Some(port) = &m.watch_port {
                obj.insert(ITEM_WATCH_PORT.to_string(), Value::String(port.clone()));
            }
            obj
        })
        .collect();
    serde_json::to_string(&items).unwrap_or_else(|_| "[]".to_string())
}

fn parse_action_set(key: &str, json: &str) -> Result<Vec<WeightedAction>, P4rtError> {
    let err = |reason: String| P4rtError::ActionSet {
        key: key.to_string(),
        reason,
    };
    let value: Value = serde_json::from_str(json).map_err(|e| err(e.to_string()))?;
    let Value::Array(items) = value else {
        return Err(err("not a JSON array".into()));
    };
    if items.is_empty() {
        return Err(err("empty action set".into()));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(obj) = item else {
            return Err(err(format!("member {i} is not a JSON object")));
        };
        let mut name = None;
        let mut weight = None;
        let mut watch_port = None;
        let mut params = BTreeMap::new();
        for (f, v) in obj {
            match f.as_str() {
                FIELD_ACTION => match v {
                    Value::String(s) if !s.is_empty() => name = Some(s),
                    other => {
                        return Err(err(format!(
                            "member {i}: 'action' must be a non-empty string, got {other}"
                        )));
                    }
                },
                ITEM_WEIGHT => {
                    let w = v
                        .as_u64()
                        .and_then(|w| u32::try_from(w).ok())
                        .filter(|w| *w >= 1)
                        .ok_or_else(|| {
                            err(format!(
                                "member {i}: 'weight' must be an integer >= 1, got {v}"
                            ))
                        })?;
                    weight = Some(w);
                }
                ITEM_WATCH_PORT => match v {
                    Value::String(s) if !s.is_empty() => watch_port = Some(s),
                    other => {
                        return Err(err(format!(
                            "member {i}: 'watch_port' must be a non-empty string, got {other}"
                        )));
                    }
                },
                other => {
                    let Some(p) = other.strip_prefix(PARAM_PREFIX).filter(|p| !p.is_empty()) else {
                        return Err(err(format!("member {i}: unknown field {other:?}")));
                    };
                    let Value::String(s) = v else {
                        return Err(err(format!(
                            "member {i}: parameter {other:?} must be a string, got {v}"
                        )));
                    };
                    params.insert(p.to_string(), s);
                }
            }
        }
        let name = name.ok_or_else(|| err(format!("member {i} has no 'action'")))?;
        let weight = weight.ok_or_else(|| err(format!("member {i} has no 'weight'")))?;
        out.push(WeightedAction {
            action: P4rtAction { name, params },
            weight,
            watch_port,
        });
    }
    Ok(out)
}

/// SONiC's table-name prefixes (sonic-pins `table::TypeName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum P4rtTableKind {
    Fixed,
    Acl,
    Ext,
}

impl P4rtTableKind {
    pub const fn prefix(self) -> &'static str {
        match self {
            P4rtTableKind::Fixed => "FIXED_",
            P4rtTableKind::Acl => "ACL_",
            P4rtTableKind::Ext => "EXT_",
        }
    }
}

/// SONiC's name for a P4 table: kind prefix + the P4 name (its P4Info alias) upper-cased.
pub fn sonic_table_name(p4_name: &str, kind: P4rtTableKind) -> String {
    format!("{}{}", kind.prefix(), p4_name.to_ascii_uppercase())
}

fn check_sonic_table_name(name: &str) -> Result<(), P4rtError> {
    let bad = |reason| {
        Err(P4rtError::InvalidTableName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '.')
    {
        return bad("only upper-case ASCII letters, digits, '_' and '.' are allowed");
    }
    Ok(())
}

/// The two-way mapping between the pipeline's P4 table names and SONiC's P4RT table names, built from
/// the names the caller takes from its P4Info (this crate does not know the program).
#[derive(Debug, Clone, Default)]
pub struct P4rtTableNames {
    to_sonic: BTreeMap<String, String>,
    to_p4: BTreeMap<String, String>,
}

impl P4rtTableNames {
    /// All tables as `FIXED_` tables, SONiC's convention for its fixed pipeline.
    pub fn new<I, S>(p4_names: I) -> Result<Self, P4rtError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::with_kinds(
            p4_names
                .into_iter()
                .map(|n| (n.as_ref().to_string(), P4rtTableKind::Fixed)),
        )
    }

    pub fn with_kinds<I, S>(names: I) -> Result<Self, P4rtError>
    where
        I: IntoIterator<Item = (S, P4rtTableKind)>,
        S: AsRef<str>,
    {
        let mut out = P4rtTableNames::default();
        for (p4, kind) in names {
            let p4 = p4.as_ref();
            let sonic = sonic_table_name(p4, kind);
            check_sonic_table_name(&sonic)?;
            if let Some(other) = out.to_p4.get(&sonic) {
                if other != p4 {
                    return Err(P4rtError::NameCollision {
                        p4_name: p4.to_string(),
                        other: other.clone(),
                        sonic_name: sonic,
                    });
                }
                continue;
            }
            out.to_sonic.insert(p4.to_string(), sonic.clone());
            out.to_p4.insert(sonic, p4.to_string());
        }
        Ok(out)
    }

    pub fn sonic_name(&self, p4_name: &str) -> Result<&str, P4rtError> {
        self.to_sonic
            .get(p4_name)
            .map(String::as_str)
            .ok_or_else(|| P4rtError::UnknownTable {
                name: p4_name.to_string(),
                known: self.to_sonic.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    pub fn p4_name(&self, sonic_name: &str) -> Result<&str, P4rtError> {
        self.to_p4
            .get(sonic_name)
            .map(String::as_str)
            .ok_or_else(|| P4rtError::UnknownTable {
                name: sonic_name.to_string(),
                known: self.to_p4.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// (P4 name, SONiC name) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.to_sonic.iter().map(|(a, b)| (a.as_str(), b.as_str()))
    }

    pub fn len(&self) -> usize {
        self.to_sonic.len()
    }

    pub fn is_empty(&self) -> bool {
        self.to_sonic.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fv(pairs: &[(&str, &str)]) -> FieldValues {
        pairs
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn key_matches_the_p4rt_app_example_byte_for_byte() {
        let key = P4rtKey::new("FIXED_IPV4_TABLE").with_match("ipv4_dst", "10.81.8.0/24");
        assert_eq!(
            key.to_db_key(),
            r#"P4RT_TABLE:FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.81.8.0/24"}"#
        );
        assert_eq!(
            key.to_table_key(),
            r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.81.8.0/24"}"#
        );
    }

    #[test]
    fn key_json_sorts_fields_and_puts_priority_only_when_positive() {
        let key = P4rtKey::new("ACL_ACL_INGRESS_TABLE")
            .with_match("match/src_ip", "10.0.0.1&255.255.255.255")
            .with_match("ether_type", "0x0800&0xffff");
        assert_eq!(
            key.match_json(),
            r#"{"match/ether_type":"0x0800&0xffff","match/src_ip":"10.0.0.1&255.255.255.255"}"#
        );
        let key = key.with_priority(10);
        assert_eq!(
            key.match_json(),
            r#"{"match/ether_type":"0x0800&0xffff","match/src_ip":"10.0.0.1&255.255.255.255","priority":10}"#
        );
        assert_eq!(P4rtKey::new("FIXED_T").match_json(), "{}");
    }

    #[test]
    fn keys_round_trip_including_ipv6_values_with_colons() {
        let key = P4rtKey::new("FIXED_IPV6_TABLE")
            .with_match("ipv6_dst", "2001:db8::/32")
            .with_match("vrf_id", "vrf-1")
            .with_priority(7);
        let parsed = P4rtKey::parse_table_key(&key.to_table_key()).expect("parse");
        assert_eq!(parsed, key);
        assert_eq!(
            P4rtKey::parse_db_key(&key.to_db_key()).expect("db key"),
            key
        );
        assert_eq!(parsed.match_value("ipv6_dst"), Some("2001:db8::/32"));
        let plain: Vec<_> = parsed.match_fields().collect();
        assert_eq!(
            plain,
            vec![("ipv6_dst", "2001:db8::/32"), ("vrf_id", "vrf-1")]
        );
    }

    #[test]
    fn special_characters_in_values_are_json_escaped_and_round_trip() {
        let key = P4rtKey::new("FIXED_T").with_match("name", "a\"b\\c/é");
        assert_eq!(key.match_json(), r#"{"match/name":"a\"b\\c/é"}"#);
        assert_eq!(
            P4rtKey::parse_table_key(&key.to_table_key()).expect("parse"),
            key
        );
    }

    #[test]
    fn malformed_keys_get_typed_errors() {
        use P4rtError as E;
        type Check = fn(&P4rtError) -> bool;
        let cases: Vec<(&str, Check)> = vec![
            ("FIXED_IPV4_TABLE", |e| {
                matches!(e, E::MissingSeparator { .. })
            }),
            (r#"FIXED_T:{"match/a":"1""#, |e| {
                matches!(e, E::KeyJson { .. })
            }),
            (r#"FIXED_T:["match/a"]"#, |e| matches!(e, E::KeyJson { .. })),
            (r#"FIXED_T:{"a":"1"}"#, |e| {
                matches!(e, E::KeyContent { .. })
            }),
            (r#"FIXED_T:{"match/a":1}"#, |e| {
                matches!(e, E::KeyContent { .. })
            }),
            (r#"FIXED_T:{"match/a":""}"#, |e| {
                matches!(e, E::KeyContent { .. })
            }),
            (r#"FIXED_T:{"match/":"1"}"#, |e| {
                matches!(e, E::KeyContent { .. })
            }),
            (r#"FIXED_T:{"match/a":"1","priority":-1}"#, |e| {
                matches!(e, E::KeyContent { .. })
            }),
            (r#"FIXED_T:{"match/a":"1","priority":"5"}"#, |e| {
                matches!(e, E::KeyContent { .. })
            }),
            (r#"FIXED_T:{"match/a":"1","priority":4294967296}"#, |e| {
                matches!(e, E::KeyContent { .. })
            }),
            (r#"FIXED_T:{"match/a":"1","priority":0}"#, |e| {
                matches!(e, E::NonCanonicalKey { .. })
            }),
            (r#"FIXED_T:{"match/b":"1","match/a":"2"}"#, |e| {
                matches!(e, E::NonCanonicalKey { .. })
            }),
            (r#"FIXED_T:{ "match/a":"1"}"#, |e| {
                matches!(e, E::NonCanonicalKey { .. })
            }),
            (r#"fixed_t:{"match/a":"1"}"#, |e| {
                matches!(e, E::InvalidTableName { .. })
            }),
            (r#":{"match/a":"1"}"#, |e| {
                matches!(e, E::InvalidTableName { .. })
            }),
        ];
        for (key, want) in cases {
            let err = P4rtKey::parse_table_key(key).expect_err(key);
            assert!(want(&err), "{key}: unexpected error {err:?}");
            assert!(!err.to_string().is_empty());
        }
        assert!(matches!(
            P4rtKey::parse_db_key(r#"ROUTE_TABLE:FIXED_T:{"match/a":"1"}"#),
            Err(P4rtError::WrongPrefix { .. })
        ));
    }

    #[test]
    fn non_canonical_error_names_the_canonical_spelling() {
        let err = P4rtKey::parse_table_key(r#"FIXED_T:{"match/b":"1","match/a":"2"}"#)
            .expect_err("non-canonical");
        assert_eq!(
            err,
            P4rtError::NonCanonicalKey {
                key: r#"FIXED_T:{"match/b":"1","match/a":"2"}"#.into(),
                canonical: r#"FIXED_T:{"match/a":"2","match/b":"1"}"#.into(),
            }
        );
    }

    #[test]
    fn single_action_entry_fields_and_round_trip() {
        let key = P4rtKey::new("FIXED_IPV4_TABLE").with_match("ipv4_dst", "10.0.0.0/8");
        let mut entry = P4rtEntry::new(
            key.clone(),
            P4rtAction::new("set_nexthop")
                .with_param("port", "Ethernet3")
                .with_param("dmac", "00:11:22:33:44:55"),
        );
        entry.controller_metadata = Some("weft:gen=3".into());
        entry.meter = Some(P4rtMeter {
            cir: 1000,
            cburst: 0,
            pir: 2000,
            pburst: 64,
        });
        let fields = entry.to_fields();
        assert_eq!(
            fields,
            fv(&[
                ("action", "set_nexthop"),
                ("param/dmac", "00:11:22:33:44:55"),
                ("param/port", "Ethernet3"),
                ("meter/cir", "1000"),
                ("meter/pir", "2000"),
                ("meter/pburst", "64"),
                ("controller_metadata", "weft:gen=3"),
            ])
        );
        assert_eq!(P4rtEntry::from_fields(key, &fields).expect("parse"), entry);
        let op = entry.to_set_op();
        assert_eq!(op.key, entry.key.to_table_key());
        assert_eq!(P4rtEntry::from_set_op(&op).expect("from op"), entry);
    }

    #[test]
    fn weighted_entry_actions_json_matches_p4rt_app_layout() {
        let key = P4rtKey::new("FIXED_WCMP_GROUP_TABLE").with_match("wcmp_group_id", "g1");
        let entry = P4rtEntry::weighted(
            key.clone(),
            vec![
                WeightedAction {
                    action: P4rtAction::new("set_nexthop_id").with_param("nexthop_id", "nh-1"),
                    weight: 2,
                    watch_port: Some("Ethernet1".into()),
                },
                WeightedAction {
                    action: P4rtAction::new("set_nexthop_id").with_param("nexthop_id", "nh-2"),
                    weight: 1,
                    watch_port: None,
                },
            ],
        );
        let fields = entry.to_fields();
        assert_eq!(
            fields,
            fv(&[(
                "actions",
                r#"[{"action":"set_nexthop_id","param/nexthop_id":"nh-1","watch_port":"Ethernet1","weight":2},{"action":"set_nexthop_id","param/nexthop_id":"nh-2","weight":1}]"#
            )])
        );
        assert_eq!(P4rtEntry::from_fields(key, &fields).expect("parse"), entry);
    }

    #[test]
    fn malformed_entries_get_errors_that_name_the_problem() {
        let key = P4rtKey::new("FIXED_T").with_match("a", "1");
        let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
            (vec![], "neither 'action' nor 'actions'"),
            (vec![("param/x", "1")], "neither 'action' nor 'actions'"),
            (vec![("action", "a"), ("actions", "[]")], "both"),
            (vec![("action", "a"), ("bogus", "1")], "\"bogus\""),
            (vec![("action", "")], "'action' is empty"),
            (vec![("action", "a"), ("meter/cir", "fast")], "meter/cir"),
            (vec![("actions", "{}")], "not a JSON array"),
            (vec![("actions", "[")], "not a valid action set"),
            (vec![("actions", "[]")], "empty action set"),
            (vec![("actions", r#"[{"weight":1}]"#)], "no 'action'"),
            (vec![("actions", r#"[{"action":"a"}]"#)], "no 'weight'"),
            (
                vec![("actions", r#"[{"action":"a","weight":0}]"#)],
                "'weight'",
            ),
            (
                vec![("actions", r#"[{"action":"a","weight":"1"}]"#)],
                "'weight'",
            ),
            (
                vec![("actions", r#"[{"action":"a","weight":1,"watch_port":3}]"#)],
                "'watch_port'",
            ),
            (
                vec![("actions", r#"[{"action":"a","weight":1,"port":"x"}]"#)],
                "unknown field \"port\"",
            ),
            (
                vec![
                    ("actions", r#"[{"action":"a","weight":1}]"#),
                    ("param/p", "1"),
                ],
                "outside 'actions'",
            ),
            (vec![("action", "a"), ("action", "b")], "twice"),
        ];
        for (fields, needle) in cases {
            let fields = fv(&fields);
            let err = P4rtEntry::from_fields(key.clone(), &fields).expect_err(needle);
            let msg = err.to_string();
            assert!(msg.contains(needle), "{fields:?}: {msg:?} lacks {needle:?}");
            assert!(msg.contains("FIXED_T:"), "{msg:?} does not name the entry");
        }
    }

    #[test]
    fn table_names_follow_sonic_fixed_convention() {
        assert_eq!(
            sonic_table_name("ipv4_table", P4rtTableKind::Fixed),
            "FIXED_IPV4_TABLE"
        );
        assert_eq!(
            sonic_table_name("acl_ingress_table", P4rtTableKind::Acl),
            "ACL_ACL_INGRESS_TABLE"
        );
        let names = P4rtTableNames::new(["ipv4_table", "wcmp_group_table"]).expect("names");
        assert_eq!(names.sonic_name("ipv4_table"), Ok("FIXED_IPV4_TABLE"));
        assert_eq!(
            names.p4_name("FIXED_WCMP_GROUP_TABLE"),
            Ok("wcmp_group_table")
        );
        assert_eq!(names.len(), 2);
        let err = names.p4_name("FIXED_NOPE").expect_err("unknown");
        assert!(err.to_string().contains("FIXED_IPV4_TABLE"), "{err}");
    }

    #[test]
    fn table_name_collisions_and_bad_names_are_errors() {
        let err = P4rtTableNames::new(["ipv4_table", "IPV4_table"]).expect_err("collision");
        assert!(matches!(err, P4rtError::NameCollision { .. }), "{err:?}");
        let err = P4rtTableNames::new(["bad name"]).expect_err("space");
        assert!(matches!(err, P4rtError::InvalidTableName { .. }), "{err:?}");
        // The same name twice is not a collision.
        assert!(P4rtTableNames::new(["t", "t"]).is_ok());
    }
}
