//! The generator of `src/generated.rs`: a pure function from the P4Info (the run-time model,
//! `weft_p4rt::P4Info`, read from `p4/build/weft.p4info.bin`) and the text of
//! `include/constants.p4` to Rust source. `WEFT_REGEN=1 cargo test -p weft-p4` or
//! `cargo run -p weft-p4 --bin weft-p4-gen` writes it; a unit test fails when the committed file
//! differs from what the current P4Info gives.
//!
//! Emitted per table: names and ids; the contract ([`crate::contract`]: `WRITE_RANK`, `OWNER`,
//! `REFERS_TO`, `REFERRED_BY`, `CONTRACT`); and for tables the controller writes, typed entries
//! (`Key`, `Action`, `entry`; see [`crate::wire`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use weft_appdb::Format;
use weft_p4rt::{CounterUnit, MatchKind, Owner, P4Info, TableInfo};

use crate::contract::{ContractError, Ranks, derive_ranks};

/// Errors of the generator.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error(transparent)]
    P4Info(#[from] weft_p4rt::Error),
    #[error(transparent)]
    Contract(#[from] ContractError),
    #[error("include/constants.p4 line {line}: {message}: {text:?}")]
    Constant {
        line: usize,
        message: &'static str,
        text: String,
    },
}

/// A `const bit<W> NAME = VALUE;` of `include/constants.p4`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P4Constant {
    pub name: String,
    pub bitwidth: u32,
    pub value: u128,
}

/// Every `const bit<W> NAME = VALUE;` line of a P4 source (one declaration per line).
pub fn parse_constants(source: &str) -> Result<Vec<P4Constant>, CodegenError> {
    let mut out = Vec::new();
    for (i, raw) in source.lines().enumerate() {
        let line = raw.trim();
        let Some(rest) = line.strip_prefix("const bit<") else {
            continue;
        };
        let err = |message| CodegenError::Constant {
            line: i + 1,
            message,
            text: raw.to_string(),
        };
        let (width, rest) = rest.split_once('>').ok_or_else(|| err("no closing '>'"))?;
        let bitwidth: u32 = width.trim().parse().map_err(|_| err("bad width"))?;
        let (name, rest) = rest.split_once('=').ok_or_else(|| err("no '='"))?;
        let value = rest
            .trim()
            .strip_suffix(';')
            .ok_or_else(|| err("no ';'"))?
            .trim();
        let value = match value.strip_prefix("0x") {
            Some(hex) => u128::from_str_radix(hex, 16),
            None => value.parse(),
        }
        .map_err(|_| err("value is not a number"))?;
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(err("bad name"));
        }
        if bitwidth == 0 || bitwidth > 128 {
            return Err(err("width out of 1..=128"));
        }
        out.push(P4Constant {
            name: name.to_string(),
            bitwidth,
            value,
        });
    }
    Ok(out)
}

fn rust_uint(bitwidth: u32) -> &'static str {
    match bitwidth {
        0..=8 => "u8",
        9..=16 => "u16",
        17..=32 => "u32",
        33..=64 => "u64",
        _ => "u128",
    }
}

fn uint_bits(bitwidth: u32) -> u32 {
    match bitwidth {
        0..=8 => 8,
        9..=16 => 16,
        17..=32 => 32,
        33..=64 => 64,
        _ => 128,
    }
}

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "box", "break", "const", "continue", "crate", "do", "dyn", "else",
    "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let", "loop",
    "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return", "self",
    "static", "struct", "super", "trait", "true", "try", "type", "typeof", "unsafe", "unsized",
    "use", "virtual", "where", "while", "yield",
];

/// A P4Info name as a Rust module or field name.
fn ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    let mut s = s.to_ascii_lowercase();
    if KEYWORDS.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// A P4 action alias as a Rust enum variant (`set_nexthop_id` → `SetNexthopId`).
fn camel(name: &str) -> String {
    let mut out = String::new();
    for part in ident(name).split('_').filter(|p| !p.is_empty()) {
        let mut cs = part.chars();
        if let Some(c) = cs.next() {
            out.push(c.to_ascii_uppercase());
            out.extend(cs);
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) || out.is_empty() {
        out.insert(0, 'A');
    }
    out
}

fn kind_path(kind: MatchKind) -> &'static str {
    match kind {
        MatchKind::Exact => "weft_p4rt::MatchKind::Exact",
        MatchKind::Lpm => "weft_p4rt::MatchKind::Lpm",
        MatchKind::Ternary => "weft_p4rt::MatchKind::Ternary",
        MatchKind::Range => "weft_p4rt::MatchKind::Range",
        MatchKind::Optional => "weft_p4rt::MatchKind::Optional",
        MatchKind::Other => "weft_p4rt::MatchKind::Other",
    }
}

fn unit_path(unit: CounterUnit) -> &'static str {
    match unit {
        CounterUnit::Packets => "weft_p4rt::CounterUnit::Packets",
        CounterUnit::Bytes => "weft_p4rt::CounterUnit::Bytes",
        CounterUnit::Both => "weft_p4rt::CounterUnit::Both",
        CounterUnit::Unspecified => "weft_p4rt::CounterUnit::Unspecified",
    }
}

fn format_path(f: Format) -> &'static str {
    match f {
        Format::Port => "weft_appdb::Format::Port",
        Format::Mac => "weft_appdb::Format::Mac",
        Format::Ipv4 => "weft_appdb::Format::Ipv4",
        Format::Ipv6 => "weft_appdb::Format::Ipv6",
        Format::Hex => "weft_appdb::Format::Hex",
    }
}

fn id_list(ids: &[u32]) -> String {
    ids.iter()
        .map(|id| format!("0x{id:08x}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn width(bitwidth: i32) -> u32 {
    u32::try_from(bitwidth).unwrap_or(0)
}

/// A small indenting writer; the output is close to rustfmt's, and the staleness test ignores
/// whitespace anyway.
struct Out {
    text: String,
    depth: usize,
}

impl Out {
    fn line(&mut self, s: &str) {
        if s.is_empty() {
            self.text.push('\n');
        } else {
            for _ in 0..self.depth {
                self.text.push_str("    ");
            }
            self.text.push_str(s);
            self.text.push('\n');
        }
    }
    fn open(&mut self, s: &str) {
        self.line(s);
        self.depth += 1;
    }
    fn close_with(&mut self, s: &str) {
        self.depth -= 1;
        self.line(s);
    }
    fn close(&mut self) {
        self.close_with("}");
    }
    /// NAME, ALIAS and ID of a P4Info object (ids in hex, with their type prefix).
    fn name_id(&mut self, name: &str, alias: Option<&str>, id: u32) {
        self.line(&format!("pub const NAME: &str = {name:?};"));
        if let Some(alias) = alias {
            self.line(&format!("pub const ALIAS: &str = {alias:?};"));
        }
        self.line(&format!("pub const ID: u32 = 0x{id:08x};"));
    }
    /// NAME and ID of a match field, parameter or metadata field (small ids, decimal).
    fn name_local_id(&mut self, name: &str, id: u32) {
        self.line(&format!("pub const NAME: &str = {name:?};"));
        self.line(&format!("pub const ID: u32 = {id};"));
    }
    fn all(&mut self, doc: &str, items: &[(String, u32)]) {
        self.line(&format!("/// {doc}"));
        self.open("pub const ALL: &[(&str, u32)] = &[");
        for (name, id) in items {
            self.line(&format!("({name:?}, 0x{id:08x}),"));
        }
        self.close_with("];");
    }
}

/// What the generator knows about one value (key field or parameter) of a typed entry.
struct Value {
    /// Name in the P4Info.
    name: String,
    /// Rust field name.
    ident: String,
    bitwidth: u32,
    format: Format,
    kind: MatchKind,
}

impl Value {
    /// The Rust type of the bare value (no LPM/ternary wrapper).
    fn scalar(&self) -> Result<String, ContractError> {
        let bad = |what: &str| {
            ContractError::Invalid(format!(
                "{}: {what} ({} bits, {:?})",
                self.name, self.bitwidth, self.format
            ))
        };
        Ok(match self.format {
            Format::Port => "crate::wire::PortName<'a>".into(),
            Format::Mac if self.bitwidth == 48 => "[u8; 6]".into(),
            Format::Ipv4 if self.bitwidth == 32 => "std::net::Ipv4Addr".into(),
            Format::Ipv6 if self.bitwidth == 128 => "std::net::Ipv6Addr".into(),
            Format::Mac | Format::Ipv4 | Format::Ipv6 => {
                return Err(bad("the format does not fit the width"));
            }
            Format::Hex => rust_uint(self.bitwidth).into(),
        })
    }

    fn ty(&self) -> Result<String, ContractError> {
        let s = self.scalar()?;
        let port = self.format == Format::Port;
        Ok(match self.kind {
            MatchKind::Exact => s,
            MatchKind::Optional => format!("Option<{s}>"),
            MatchKind::Lpm if !port => format!("crate::wire::Lpm<{s}>"),
            MatchKind::Ternary if !port => format!("Option<crate::wire::Ternary<{s}>>"),
            k => {
                return Err(ContractError::Invalid(format!(
                    "{}: a {k} field cannot be written by the controller through P4RT_TABLE",
                    self.name
                )));
            }
        })
    }

    fn has_port(&self) -> bool {
        self.format == Format::Port
    }

    /// Width checks of `expr` (the bare value) where the Rust type is wider than the field.
    fn checks(&self, table: &str, expr: &str) -> Vec<String> {
        if self.format != Format::Hex || uint_bits(self.bitwidth) == self.bitwidth {
            return Vec::new();
        }
        vec![format!(
            "crate::wire::check_width({table}, {:?}, u128::from({expr}), {})?;",
            self.name, self.bitwidth
        )]
    }
}

fn table_values(t: &TableInfo) -> Result<Vec<Value>, CodegenError> {
    let mut out = Vec::new();
    for f in &t.match_fields {
        out.push(Value {
            name: f.name.clone(),
            ident: ident(&f.name),
            bitwidth: width(f.bitwidth),
            format: weft_appdb::format_of_field(f)
                .map_err(|e| ContractError::Invalid(format!("table {}: {e}", t.name)))?,
            kind: f.kind,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

struct ActionValues {
    id: u32,
    alias: String,
    variant: String,
    /// Sorted by name (the order of the `param/` fields).
    params: Vec<Value>,
}

fn entry_actions(info: &P4Info, t: &TableInfo) -> Result<Vec<ActionValues>, CodegenError> {
    let mut out = Vec::new();
    for id in t.entry_action_ids() {
        let a = info.action_by_id(id)?;
        let mut params = Vec::new();
        for p in &a.params {
            params.push(Value {
                name: p.name.clone(),
                ident: ident(&p.name),
                bitwidth: width(p.bitwidth),
                format: weft_appdb::format_of_param(p)
                    .map_err(|e| ContractError::Invalid(format!("action {}: {e}", a.name)))?,
                kind: MatchKind::Exact,
            });
        }
        params.sort_by(|a, b| a.name.cmp(&b.name));
        out.push(ActionValues {
            id,
            alias: a.alias.clone(),
            variant: camel(&a.alias),
            params,
        });
    }
    Ok(out)
}

/// Checks what the typed code and [`crate::contract::references`] rely on: every table says who
/// writes it; a reference is from an exact (or optional) match field or a parameter, to an exact
/// key field, in the same format (values are compared as text).
fn validate(info: &P4Info) -> Result<(), CodegenError> {
    for t in info.tables() {
        if t.owner.is_none() {
            return Err(ContractError::NoOwner(t.name.clone()).into());
        }
        for f in &t.match_fields {
            if !f.refers_to.is_empty() && !matches!(f.kind, MatchKind::Exact | MatchKind::Optional)
            {
                return Err(ContractError::Invalid(format!(
                    "table {}: match field {} is {} and cannot refer to an entry",
                    t.name, f.name, f.kind
                ))
                .into());
            }
            let from = weft_appdb::format_of_field(f)
                .map_err(|e| ContractError::Invalid(format!("table {}: {e}", t.name)))?;
            check_targets(info, &f.refers_to, from, &format!("{}.{}", t.name, f.name))?;
        }
    }
    for a in info.actions() {
        for p in &a.params {
            let from = weft_appdb::format_of_param(p)
                .map_err(|e| ContractError::Invalid(format!("action {}: {e}", a.name)))?;
            check_targets(info, &p.refers_to, from, &format!("{}.{}", a.name, p.name))?;
        }
    }
    Ok(())
}

fn check_targets(
    info: &P4Info,
    refs: &[weft_p4rt::RefersTo],
    from: Format,
    what: &str,
) -> Result<(), CodegenError> {
    for r in refs {
        let t = info.table_by_id(r.table_id)?;
        let f = t.field(&r.field)?;
        if f.kind != MatchKind::Exact {
            return Err(ContractError::Invalid(format!(
                "{what}: @refers_to({}, {}): the referenced field is {}, not exact",
                t.alias, f.name, f.kind
            ))
            .into());
        }
        let to = weft_appdb::format_of_field(f)
            .map_err(|e| ContractError::Invalid(format!("table {}: {e}", t.name)))?;
        if to != from {
            return Err(ContractError::Invalid(format!(
                "{what}: @refers_to({}, {}): written as {from:?}, the referenced field as {to:?}",
                t.alias, f.name
            ))
            .into());
        }
    }
    Ok(())
}

/// The contract's references of table `t` (match fields, then entry-action parameters).
fn refs_of(info: &P4Info, t: &TableInfo) -> Result<Vec<String>, CodegenError> {
    let mut out = Vec::new();
    let target = |r: &weft_p4rt::RefersTo| -> Result<String, CodegenError> {
        let tt = info.table_by_id(r.table_id)?;
        Ok(format!(
            "table_id: 0x{:08x}, table: {:?}, field_id: {}, field: {:?}",
            r.table_id, tt.alias, r.field_id, r.field
        ))
    };
    for f in &t.match_fields {
        for r in &f.refers_to {
            out.push(format!(
                "crate::contract::RefersTo {{ source: crate::contract::RefSource::Match {{ field_id: {}, field: {:?} }}, {} }},",
                f.id,
                f.name,
                target(r)?
            ));
        }
    }
    for id in t.entry_action_ids() {
        let a = info.action_by_id(id)?;
        for p in &a.params {
            for r in &p.refers_to {
                out.push(format!(
                    "crate::contract::RefersTo {{ source: crate::contract::RefSource::Param {{ action_id: 0x{:08x}, action: {:?}, param_id: {}, param: {:?} }}, {} }},",
                    a.id,
                    a.alias,
                    p.id,
                    p.name,
                    target(r)?
                ));
            }
        }
    }
    Ok(out)
}

/// Table id → ids of the tables whose contract references name it.
fn referred_by(info: &P4Info) -> Result<BTreeMap<u32, BTreeSet<u32>>, CodegenError> {
    let mut out: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for t in info.tables() {
        for f in &t.match_fields {
            for r in &f.refers_to {
                out.entry(r.table_id).or_default().insert(t.id);
            }
        }
        for id in t.entry_action_ids() {
            for p in &info.action_by_id(id)?.params {
                for r in &p.refers_to {
                    out.entry(r.table_id).or_default().insert(t.id);
                }
            }
        }
    }
    Ok(out)
}

/// The JSON text of a name (P4 names need no escapes; this keeps the output right if one did).
fn json_name(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// Rust source of `src/generated.rs` for this P4Info and these constants.
pub fn generate(info: &P4Info, constants: &[P4Constant]) -> Result<String, CodegenError> {
    validate(info)?;
    let ranks = derive_ranks(info)?;
    let referred = referred_by(info)?;
    let referable: BTreeSet<(u32, String)> = info
        .tables()
        .iter()
        .flat_map(|t| {
            let fields = t.match_fields.iter().flat_map(|f| f.refers_to.iter());
            let params = info
                .actions()
                .iter()
                .flat_map(|a| a.params.iter().flat_map(|p| p.refers_to.iter()));
            fields
                .chain(params)
                .map(|r| (r.table_id, r.field.clone()))
                .collect::<Vec<_>>()
        })
        .collect();

    let mut o = Out {
        text: String::new(),
        depth: 0,
    };
    o.line("// @generated by weft-p4 (src/codegen.rs) from p4/build/weft.p4info.bin and");
    o.line("// p4/include/constants.p4. DO NOT EDIT: regenerate with `WEFT_REGEN=1 cargo test -p");
    o.line("// weft-p4` or `cargo run -p weft-p4 --bin weft-p4-gen`.");
    o.line("");
    o.line("//! Names and P4Runtime ids of every object in Weft's P4Info, the table contract");
    o.line("//! (write ranks, owners, references) and typed P4RT_TABLE entries of the tables the");
    o.line("//! controller writes, and the pipeline's constants. Use these instead of string");
    o.line("//! literals of P4 names.");

    tables_module(&mut o, info, &ranks, &referred, &referable)?;
    actions_module(&mut o, info);
    profiles_module(&mut o, info, &ranks);
    resources_modules(&mut o, info);
    constants_module(&mut o, constants);
    Ok(o.text)
}

fn tables_module(
    o: &mut Out,
    info: &P4Info,
    ranks: &Ranks,
    referred: &BTreeMap<u32, BTreeSet<u32>>,
    referable: &BTreeSet<(u32, String)>,
) -> Result<(), CodegenError> {
    o.line("");
    o.line(
        "/// Tables: `NAME` (fully qualified), `ALIAS`, `ID`, `SIZE`, allowed `ACTION_IDS`, key",
    );
    o.line("/// `fields`; the contract (`SONIC_NAME`, `WRITE_RANK`, `OWNER`, `REFERS_TO`,");
    o.line(
        "/// `REFERRED_BY`, `CONTRACT`); for tables the controller writes, typed entries (`Key`,",
    );
    o.line("/// `Action`, `entry`).");
    o.open("pub mod tables {");
    for t in info.tables() {
        table_module(o, info, t, ranks, referred, referable)?;
    }
    let all: Vec<(String, u32)> = info
        .tables()
        .iter()
        .map(|t| (t.name.clone(), t.id))
        .collect();
    o.all("Every table: (fully qualified name, id).", &all);
    o.line("/// Every table's contract, in P4Info order.");
    o.open("pub static CONTRACTS: &[crate::contract::TableContract] = &[");
    for t in info.tables() {
        o.line(&format!("{}::CONTRACT,", ident(&t.alias)));
    }
    o.close_with("];");
    let max = ranks
        .tables
        .values()
        .chain(ranks.profiles.values().flat_map(|(m, g)| [m, g]))
        .copied()
        .max()
        .unwrap_or(0);
    o.line("/// The highest write rank.");
    o.line(&format!("pub const MAX_WRITE_RANK: u8 = {max};"));
    o.close();
    Ok(())
}

/// One table's module: names and ids, the contract, key fields, typed entries.
fn table_module(
    o: &mut Out,
    info: &P4Info,
    t: &TableInfo,
    ranks: &Ranks,
    referred: &BTreeMap<u32, BTreeSet<u32>>,
    referable: &BTreeSet<(u32, String)>,
) -> Result<(), CodegenError> {
    let rank = ranks.tables.get(&t.id).copied().unwrap_or(0);
    o.line(&format!("/// `{}`", t.name));
    o.open(&format!("pub mod {} {{", ident(&t.alias)));
    o.name_id(&t.name, Some(&t.alias), t.id);
    o.line(&format!(
        "pub const SIZE: u64 = {};",
        u64::try_from(t.size).unwrap_or(0)
    ));
    o.line(&format!(
        "pub const ACTION_IDS: &[u32] = &[{}];",
        id_list(&t.action_ids)
    ));
    let profile = match t.action_profile_id {
        None => "None".to_string(),
        Some(id) => format!("Some(0x{id:08x})"),
    };
    o.line(&format!(
        "pub const ACTION_PROFILE_ID: Option<u32> = {profile};"
    ));
    o.line(&format!(
        "pub const NEEDS_PRIORITY: bool = {};",
        t.needs_priority()
    ));
    let sonic = weft_sonic_db::sonic_table_name(&t.alias, weft_sonic_db::P4rtTableKind::Fixed);
    o.line("/// The P4RT_TABLE (SONiC) name.");
    o.line(&format!("pub const SONIC_NAME: &str = {sonic:?};"));
    o.line("/// Inserts by ascending rank, deletes by descending (`weft_p4::contract`).");
    o.line(&format!("pub const WRITE_RANK: u8 = {rank};"));
    let owner = match &t.owner {
        Some(Owner::Plugin { reason }) => {
            format!("crate::contract::Owner::Plugin {{ reason: {reason:?} }}")
        }
        _ => "crate::contract::Owner::Controller".to_string(),
    };
    o.line(&format!(
        "pub const OWNER: crate::contract::Owner = {owner};"
    ));
    o.line("/// What entries of this table refer to (`@refers_to`).");
    o.open("pub const REFERS_TO: &[crate::contract::RefersTo] = &[");
    for r in refs_of(info, t)? {
        o.line(&r);
    }
    o.close_with("];");
    let by: Vec<u32> = referred
        .get(&t.id)
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default();
    o.line("/// Tables whose entries refer to entries of this one.");
    o.line(&format!(
        "pub const REFERRED_BY: &[u32] = &[{}];",
        id_list(&by)
    ));

    let values = table_values(t)?;
    let actions = entry_actions(info, t)?;
    contract_record(o, info, t, &actions, referable)?;
    fields_module(o, t)?;

    if t.owner == Some(Owner::Controller) && !t.match_fields.is_empty() {
        typed_entries(o, t, &values, &actions)?;
    }
    o.close();
    Ok(())
}

/// The table's `CONTRACT` record.
fn contract_record(
    o: &mut Out,
    info: &P4Info,
    t: &TableInfo,
    actions: &[ActionValues],
    referable: &BTreeSet<(u32, String)>,
) -> Result<(), CodegenError> {
    o.open("pub const CONTRACT: crate::contract::TableContract = crate::contract::TableContract {");
    o.line("id: ID,");
    o.line("name: NAME,");
    o.line("alias: ALIAS,");
    o.line("sonic_name: SONIC_NAME,");
    o.line("write_rank: WRITE_RANK,");
    o.line("owner: OWNER,");
    o.open("key: &[");
    for f in &t.match_fields {
        let format = weft_appdb::format_of_field(f)
            .map_err(|e| ContractError::Invalid(format!("table {}: {e}", t.name)))?;
        o.line(&format!(
            "crate::contract::KeyField {{ id: {}, name: {:?}, bitwidth: {}, kind: {}, format: {}, referable: {} }},",
            f.id,
            f.name,
            width(f.bitwidth),
            kind_path(f.kind),
            format_path(format),
            referable.contains(&(t.id, f.name.clone()))
        ));
    }
    o.close_with("],");
    o.open("actions: &[");
    for a in actions {
        o.open("crate::contract::EntryAction {");
        o.line(&format!("id: 0x{:08x},", a.id));
        o.line(&format!("alias: {:?},", a.alias));
        o.open("params: &[");
        for p in &a.params {
            let id = info
                .action_by_id(a.id)?
                .param(&p.name)
                .map(|p| p.id)
                .unwrap_or(0);
            o.line(&format!(
                "crate::contract::ParamField {{ id: {id}, name: {:?}, bitwidth: {}, format: {} }},",
                p.name,
                p.bitwidth,
                format_path(p.format)
            ));
        }
        o.close_with("],");
        o.close_with("},");
    }
    o.close_with("],");
    o.line("refers_to: REFERS_TO,");
    o.line("referred_by: REFERRED_BY,");
    o.line("action_profile_id: ACTION_PROFILE_ID,");
    o.close_with("};");

    Ok(())
}

/// The table's `fields` module: each key field's name, id, width, kind and format.
fn fields_module(o: &mut Out, t: &TableInfo) -> Result<(), CodegenError> {
    o.line("/// Key fields.");
    o.open("pub mod fields {");
    for f in &t.match_fields {
        let format = weft_appdb::format_of_field(f)
            .map_err(|e| ContractError::Invalid(format!("table {}: {e}", t.name)))?;
        o.line(&format!("/// {}, {} bits", f.kind, f.bitwidth));
        o.open(&format!("pub mod {} {{", ident(&f.name)));
        o.name_local_id(&f.name, f.id);
        o.line(&format!("pub const BITWIDTH: u32 = {};", f.bitwidth));
        o.line(&format!(
            "pub const KIND: weft_p4rt::MatchKind = {};",
            kind_path(f.kind)
        ));
        o.line(&format!(
            "pub const FORMAT: weft_appdb::Format = {};",
            format_path(format)
        ));
        o.close();
    }
    o.close();

    Ok(())
}

/// `Key`, `Action` and `entry` of a table the controller writes.
fn typed_entries(
    o: &mut Out,
    t: &TableInfo,
    key: &[Value],
    actions: &[ActionValues],
) -> Result<(), CodegenError> {
    let life = |yes: bool| {
        if yes {
            Lifetimes {
                decl: "<'a>",
                used: "<'_>",
            }
        } else {
            Lifetimes { decl: "", used: "" }
        }
    };
    let k = life(key.iter().any(Value::has_port));
    let a = life(actions.iter().any(|a| a.params.iter().any(Value::has_port)));
    entry_types(o, key, actions, &k, &a)?;
    key_impl(o, t, key, &k);
    action_impl(o, t, actions, &a);
    entry_fn(o, t, &k, &a);
    Ok(())
}

/// The lifetime parameter of a generated type (`<'a>` when it borrows a port name), as declared
/// and as used in an `impl` or a signature.
struct Lifetimes {
    decl: &'static str,
    used: &'static str,
}

/// `struct Key` and `enum Action`.
fn entry_types(
    o: &mut Out,
    key: &[Value],
    actions: &[ActionValues],
    k: &Lifetimes,
    a: &Lifetimes,
) -> Result<(), CodegenError> {
    let (kl, al) = (k.decl, a.decl);
    o.line("/// The key of an entry (fields sorted by name, as P4RT_TABLE writes them).");
    o.line("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]");
    o.open(&format!("pub struct Key{kl} {{"));
    for v in key {
        o.line(&format!(
            "/// `{}`: {}, {} bits, {:?}.",
            v.name, v.kind, v.bitwidth, v.format
        ));
        o.line(&format!("pub {}: {},", v.ident, v.ty()?));
    }
    o.close();

    o.line("/// The actions an entry may use, with typed parameters.");
    o.line("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]");
    o.open(&format!("pub enum Action{al} {{"));
    for a in actions {
        o.line(&format!("/// `{}`", a.alias));
        if a.params.is_empty() {
            o.line(&format!("{},", a.variant));
        } else {
            o.open(&format!("{} {{", a.variant));
            for p in &a.params {
                o.line(&format!("{}: {},", p.ident, p.scalar()?));
            }
            o.close_with("},");
        }
    }
    o.close();

    Ok(())
}

/// `Key::table_key`: the P4RT_TABLE key's JSON, written field by field.
fn key_impl(o: &mut Out, t: &TableInfo, key: &[Value], k: &Lifetimes) {
    let k_use = k.used;
    let priority = t.needs_priority();
    o.open(&format!("impl Key{k_use} {{"));
    o.line(&format!(
        "/// The P4RT_TABLE key: `{}:{{\"match/...\":\"...\"{}}}`.",
        weft_sonic_db::sonic_table_name(&t.alias, weft_sonic_db::P4rtTableKind::Fixed),
        if priority { ",\"priority\":N" } else { "" }
    ));
    let sig = if priority {
        "pub fn table_key(&self, priority: u32) -> Result<String, crate::wire::WireError> {"
    } else {
        "pub fn table_key(&self) -> Result<String, crate::wire::WireError> {"
    };
    o.open(sig);
    o.line("use crate::wire::Text as _;");
    o.line("let mut out = String::with_capacity(SONIC_NAME.len() + 64);");
    o.line("out.push_str(SONIC_NAME);");
    o.line("out.push_str(\":{\");");
    // Whether the next field is the first written is known while every field before it is
    // always written; after an optional one it is tracked at run time.
    // A field always written fixes it for every later one, so `first` is needed only when the
    // first field (by name) may be left out.
    let runtime_first = matches!(
        key.first().map(|v| v.kind),
        Some(MatchKind::Optional | MatchKind::Ternary)
    );
    if runtime_first {
        o.line("let mut first = true;");
    }
    let mut known_first = Some(true);
    for v in key {
        let lit = format!("{}:", json_name(&format!("match/{}", v.name)));
        let optional = matches!(v.kind, MatchKind::Optional | MatchKind::Ternary);
        // The value's expression: the field itself, or `v` bound by `if let Some(v)`.
        let value = if optional {
            o.open(&format!("if let Some(v) = &self.{} {{", v.ident));
            "v".to_string()
        } else {
            format!("self.{}", v.ident)
        };
        let checks = match v.kind {
            MatchKind::Lpm => {
                let mut c = vec![format!(
                    "crate::wire::check_prefix(NAME, {:?}, {value}.prefix_len, {})?;",
                    v.name, v.bitwidth
                )];
                c.extend(v.checks("NAME", &format!("{value}.addr")));
                c
            }
            MatchKind::Ternary => {
                let mut c = v.checks("NAME", &format!("{value}.value"));
                c.extend(v.checks("NAME", &format!("{value}.mask")));
                c
            }
            MatchKind::Optional => v.checks("NAME", &format!("*{value}")),
            _ => v.checks("NAME", &value),
        };
        for c in checks {
            o.line(&c);
        }
        match known_first {
            Some(true) => {}
            Some(false) => o.line("out.push(',');"),
            None => o.line("if !first { out.push(','); }"),
        }
        // Read later only while the state is not known statically.
        if optional && known_first != Some(false) {
            o.line("first = false;");
        }
        o.line(&format!("out.push_str({lit:?});"));
        o.line(&format!("{value}.push_json(&mut out);"));
        if optional {
            o.close();
        }
        known_first = match (known_first, optional) {
            (_, false) => Some(false),
            (Some(false), true) => Some(false),
            _ => None,
        };
    }
    let p = if priority { "priority" } else { "0" };
    let first = match known_first {
        Some(f) => f.to_string(),
        None => "first".to_string(),
    };
    o.line(&format!("crate::wire::finish_key(&mut out, {first}, {p});"));
    o.line("Ok(out)");
    o.close();
    o.close();
}

/// `Action::fields` (a single action) or `Action::push_member` (a weighted action set).
fn action_impl(o: &mut Out, t: &TableInfo, actions: &[ActionValues], a: &Lifetimes) {
    let a_use = a.used;
    let weighted = t.action_profile_id.is_some();
    o.open(&format!("impl Action{a_use} {{"));
    let bind = |a: &ActionValues| -> String {
        if a.params.is_empty() {
            format!("Action::{}", a.variant)
        } else {
            let names: Vec<&str> = a.params.iter().map(|p| p.ident.as_str()).collect();
            format!("Action::{} {{ {} }}", a.variant, names.join(", "))
        }
    };
    if !weighted {
        o.line("/// The entry's fields: `action`, then `param/...` sorted by name.");
        o.open(
            "pub fn fields(&self) -> Result<weft_sonic_db::FieldValues, crate::wire::WireError> {",
        );
        o.open("Ok(match self {");
        for a in actions {
            o.open(&format!("{} => {{", bind(a)));
            for p in &a.params {
                for c in p.checks("NAME", &format!("*{}", p.ident)) {
                    o.line(&c);
                }
            }
            o.open("vec![");
            o.line(&format!(
                "(\"action\".to_string(), {:?}.to_string()),",
                a.alias
            ));
            for p in &a.params {
                o.line(&format!(
                    "({:?}.to_string(), crate::wire::to_text({})),",
                    format!("param/{}", p.name),
                    p.ident
                ));
            }
            o.close_with("]");
            o.close();
        }
        o.close_with("})");
        o.close();
    } else {
        o.line("/// The member's JSON object without its weight and watch port: `{\"action\":..,\"param/..\":..`.");
        o.open("fn push_member(&self, out: &mut String) -> Result<(), crate::wire::WireError> {");
        o.line("use crate::wire::Text as _;");
        o.open("match self {");
        for a in actions {
            o.open(&format!("{} => {{", bind(a)));
            for p in &a.params {
                for c in p.checks("NAME", &format!("*{}", p.ident)) {
                    o.line(&c);
                }
            }
            o.line(&format!(
                "out.push_str({:?});",
                format!("{{\"action\":{}", json_name(&a.alias))
            ));
            for p in &a.params {
                o.line(&format!(
                    "out.push_str({:?});",
                    format!(",{}:", json_name(&format!("param/{}", p.name)))
                ));
                o.line(&format!("{}.push_json(out);", p.ident));
            }
            o.close();
        }
        o.close();
        o.line("Ok(())");
        o.close();
    }
    o.close();
}

/// `entry()`: the key and the action's fields, or the weighted action set's JSON.
fn entry_fn(o: &mut Out, t: &TableInfo, k: &Lifetimes, a: &Lifetimes) {
    let (k_use, a_use) = (k.used, a.used);
    let priority = t.needs_priority();
    let weighted = t.action_profile_id.is_some();
    let kparam = if priority {
        format!("key: &Key{k_use}, priority: u32")
    } else {
        format!("key: &Key{k_use}")
    };
    let kcall = if priority {
        "key.table_key(priority)?"
    } else {
        "key.table_key()?"
    };
    if !weighted {
        o.line("/// The entry as written to P4RT_TABLE.");
        o.open(&format!(
            "pub fn entry({kparam}, action: &Action{a_use}) -> Result<crate::wire::Wire, crate::wire::WireError> {{"
        ));
        o.line(&format!(
            "Ok(crate::wire::Wire {{ key: {kcall}, fields: action.fields()? }})"
        ));
        o.close();
    } else {
        o.line("/// The entry as written to P4RT_TABLE: a weighted action set (`actions` JSON, members");
        o.line("/// in the order given).");
        o.open(&format!(
            "pub fn entry({kparam}, members: &[crate::wire::Weighted<'_, Action{a_use}>]) -> Result<crate::wire::Wire, crate::wire::WireError> {{"
        ));
        o.line("use crate::wire::Text as _;");
        o.line("let mut json = String::with_capacity(2 + members.len() * 96);");
        o.line("json.push('[');");
        o.open("for (i, m) in members.iter().enumerate() {");
        o.line("if i > 0 { json.push(','); }");
        o.line("m.action.push_member(&mut json)?;");
        o.open("if let Some(p) = &m.watch_port {");
        o.line("json.push_str(\",\\\"watch_port\\\":\");");
        o.line("p.push_json(&mut json);");
        o.close();
        o.line("json.push_str(\",\\\"weight\\\":\");");
        o.line("crate::wire::push_decimal(&mut json, m.weight);");
        o.line("json.push('}');");
        o.close();
        o.line("json.push(']');");
        o.line(&format!(
            "Ok(crate::wire::Wire {{ key: {kcall}, fields: vec![(\"actions\".to_string(), json)] }})"
        ));
        o.close();
    }
}

fn actions_module(o: &mut Out, info: &P4Info) {
    o.line("");
    o.line("/// Actions: `NAME`, `ALIAS`, `ID`, `params` (each `NAME`, `ID`, `BITWIDTH`).");
    o.open("pub mod actions {");
    for a in info.actions() {
        o.line(&format!("/// `{}`", a.name));
        o.open(&format!("pub mod {} {{", ident(&a.alias)));
        o.name_id(&a.name, Some(&a.alias), a.id);
        o.line("/// Parameters.");
        o.open("pub mod params {");
        for p in &a.params {
            o.line(&format!("/// {} bits", p.bitwidth));
            o.open(&format!("pub mod {} {{", ident(&p.name)));
            o.name_local_id(&p.name, p.id);
            o.line(&format!("pub const BITWIDTH: u32 = {};", p.bitwidth));
            o.close();
        }
        o.close();
        o.close();
    }
    let all: Vec<(String, u32)> = info
        .actions()
        .iter()
        .map(|a| (a.name.clone(), a.id))
        .collect();
    o.all("Every action: (fully qualified name, id).", &all);
    o.close();
}

fn profiles_module(o: &mut Out, info: &P4Info, ranks: &Ranks) {
    o.line("");
    o.line("/// Action profiles and selectors, with the write ranks of their members and groups.");
    o.open("pub mod action_profiles {");
    for p in info.action_profiles() {
        let (member, group) = ranks.profiles.get(&p.id).copied().unwrap_or((0, 0));
        o.line(&format!("/// `{}`", p.name));
        o.open(&format!("pub mod {} {{", ident(&p.alias)));
        o.name_id(&p.name, Some(&p.alias), p.id);
        o.line(&format!(
            "pub const WITH_SELECTOR: bool = {};",
            p.with_selector
        ));
        o.line(&format!(
            "pub const SIZE: u64 = {};",
            u64::try_from(p.size).unwrap_or(0)
        ));
        o.line(&format!(
            "pub const MAX_GROUP_SIZE: u32 = {};",
            u32::try_from(p.max_group_size).unwrap_or(0)
        ));
        o.line(&format!(
            "pub const TABLE_IDS: &[u32] = &[{}];",
            id_list(&p.table_ids)
        ));
        o.line("/// Write rank of the members (after what their actions refer to).");
        o.line(&format!("pub const MEMBER_RANK: u8 = {member};"));
        o.line("/// Write rank of the groups (after their members, before the tables using them).");
        o.line(&format!("pub const GROUP_RANK: u8 = {group};"));
        o.close();
    }
    o.line("/// Every profile: (id, member rank, group rank).");
    o.open("pub const RANKS: &[(u32, u8, u8)] = &[");
    for p in info.action_profiles() {
        o.line(&format!(
            "({}::ID, {}::MEMBER_RANK, {}::GROUP_RANK),",
            ident(&p.alias),
            ident(&p.alias),
            ident(&p.alias)
        ));
    }
    o.close_with("];");
    o.close();
}

fn resources_modules(o: &mut Out, info: &P4Info) {
    o.line("");
    o.line("/// Indexed counters: `NAME`, `ALIAS`, `ID`, `SIZE`, `UNIT`.");
    o.open("pub mod counters {");
    for c in info.counters() {
        o.line(&format!("/// `{}`", c.name));
        o.open(&format!("pub mod {} {{", ident(&c.alias)));
        o.name_id(&c.name, Some(&c.alias), c.id);
        o.line(&format!(
            "pub const SIZE: u64 = {};",
            u64::try_from(c.size).unwrap_or(0)
        ));
        o.line(&format!(
            "pub const UNIT: weft_p4rt::CounterUnit = {};",
            unit_path(c.unit)
        ));
        o.close();
    }
    let all: Vec<(String, u32)> = info
        .counters()
        .iter()
        .map(|c| (c.name.clone(), c.id))
        .collect();
    o.all("Every indexed counter: (fully qualified name, id).", &all);
    o.close();

    o.line("");
    o.line("/// Direct counters: `NAME`, `ALIAS`, `ID`, `TABLE_ID`, `UNIT`.");
    o.open("pub mod direct_counters {");
    for c in info.direct_counters() {
        o.line(&format!("/// `{}`", c.name));
        o.open(&format!("pub mod {} {{", ident(&c.alias)));
        o.name_id(&c.name, Some(&c.alias), c.id);
        o.line(&format!("pub const TABLE_ID: u32 = 0x{:08x};", c.table_id));
        o.line(&format!(
            "pub const UNIT: weft_p4rt::CounterUnit = {};",
            unit_path(c.unit)
        ));
        o.close();
    }
    o.close();

    o.line("");
    o.line("/// Registers (data-plane state: BMv2's P4Runtime server cannot read or write them).");
    o.open("pub mod registers {");
    for r in info.registers() {
        o.line(&format!("/// `{}`", r.name));
        o.open(&format!("pub mod {} {{", ident(&r.alias)));
        o.name_id(&r.name, Some(&r.alias), r.id);
        o.line(&format!(
            "pub const SIZE: u64 = {};",
            u64::try_from(r.size).unwrap_or(0)
        ));
        o.line(&format!("pub const BITWIDTH: u32 = {};", r.bitwidth));
        o.close();
    }
    o.close();

    o.line("");
    o.line("/// Controller packet metadata (packet-in and packet-out headers).");
    o.open("pub mod packet_metadata {");
    for m in info.controller_headers() {
        o.line(&format!("/// `{}`", m.name));
        o.open(&format!("pub mod {} {{", ident(&m.name)));
        o.name_id(&m.name, None, m.id);
        o.line("/// Metadata fields, in header order.");
        o.open("pub mod fields {");
        for f in &m.metadata {
            o.line(&format!("/// {} bits", f.bitwidth));
            o.open(&format!("pub mod {} {{", ident(&f.name)));
            o.name_local_id(&f.name, f.id);
            o.line(&format!("pub const BITWIDTH: u32 = {};", f.bitwidth));
            o.close();
        }
        o.close();
        o.close();
    }
    o.close();
}

fn constants_module(o: &mut Out, constants: &[P4Constant]) {
    o.line("");
    o.line(
        "/// Constants of `p4/include/constants.p4` (modes, drop reasons, ports, sessions, ...).",
    );
    o.open("pub mod constants {");
    for c in constants {
        o.line(&format!(
            "pub const {}: {} = {};",
            c.name,
            rust_uint(c.bitwidth),
            c.value
        ));
    }
    o.line("/// Drop reasons by counter index, for naming `drop_reason_counter` entries.");
    o.open("pub const DROP_REASONS: &[(u8, &str)] = &[");
    for c in constants {
        if let Some(reason) = c.name.strip_prefix("DROP_REASON_") {
            let mut line = String::new();
            let _ = write!(line, "({}, {:?}),", c.value, reason.to_ascii_lowercase());
            o.line(&line);
        }
    }
    o.close_with("];");
    o.close();
}

/// Writes the generated source to `path`, then formats it with `rustfmt` when rustfmt is
/// installed (it picks up the workspace's rustfmt.toml), so `cargo fmt --check` stays clean.
pub fn write_formatted(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)?;
    // Best effort: without rustfmt the file is still correct, only not canonically formatted.
    let _ = std::process::Command::new("rustfmt")
        .arg("--edition")
        .arg("2024")
        .arg(path)
        .status();
    Ok(())
}

/// `s` without whitespace and without the commas rustfmt adds or drops before a closing
/// bracket: the staleness test compares this, so `cargo fmt` on the generated file does not make
/// it "stale".
pub fn comparable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().filter(|c| !c.is_whitespace()) {
        if matches!(c, '}' | ']' | ')') && out.ends_with(',') {
            out.pop();
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_constants_reads_typed_consts_and_skips_other_lines() {
        let src = "// x\nconst bit<9> CPU_PORT = 255;\n#define X 1\n  const bit<48> MAC = 0x0180c2000001;\n";
        let c = parse_constants(src).expect("parses");
        assert_eq!(
            c,
            vec![
                P4Constant {
                    name: "CPU_PORT".into(),
                    bitwidth: 9,
                    value: 255
                },
                P4Constant {
                    name: "MAC".into(),
                    bitwidth: 48,
                    value: 0x0180c2000001
                },
            ]
        );
    }

    #[test]
    fn parse_constants_rejects_a_malformed_line_with_its_number() {
        let err = parse_constants("\nconst bit<8> A = zz;\n").expect_err("bad value");
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn comparable_ignores_layout_and_trailing_commas_only() {
        assert_eq!(
            comparable("f(a, b,\n) { x: [1,] }"),
            comparable("f(a,b){x:[1]}")
        );
        assert_ne!(comparable("f(a, b)"), comparable("f(a, c)"));
    }

    #[test]
    fn ident_makes_module_and_field_names() {
        assert_eq!(ident("routing.set_nexthop_id"), "routing_set_nexthop_id");
        assert_eq!(ident("9x"), "_9x");
        assert_eq!(ident("type"), "type_");
        assert_eq!(camel("set_nexthop_id"), "SetNexthopId");
        assert_eq!(camel("drop_route"), "DropRoute");
    }
}
