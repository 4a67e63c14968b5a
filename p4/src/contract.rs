//! The table contract of the P4 source, as the controller and the plugin use it: who writes
//! each table, what its fields refer to, and the one write order that follows.
//!
//! Declared once, in `p4/include/*.p4`:
//!
//! * `@weft_owner("controller")` / `@weft_owner("plugin", "why")` on every table;
//! * `@refers_to(table, field)` on every match field and action parameter whose value names
//!   another table's entry by its key field (sonic-pins' sai_p4 convention).
//!
//! p4c copies them into the P4Info; `weft_p4rt::P4Info` parses and resolves them; the generator
//! ([`crate::codegen`]) derives the write ranks ([`derive_ranks`]) and emits, per table,
//! `WRITE_RANK`, `OWNER`, `REFERS_TO`, `REFERRED_BY` and the [`TableContract`] that the
//! functions here read. Nothing here parses a P4Info at run time.
//!
//! # Write order
//!
//! Inserts run by ascending rank, deletes by descending rank (make before break). A table's
//! rank is one more than the highest rank of what it must follow:
//!
//! 1. every table it refers to (a route after its nexthop and its group);
//! 2. when it points traffic at an entry (an action parameter refers to it), also every table
//!    keyed by that entry (a match field refers to it): the entry is then complete when its
//!    first packet arrives (a route to a group after the group's multipath modes);
//! 3. an action-profile table's actions are its members': members rank after what their actions
//!    refer to, groups after members, and the table after its groups.
//!
//! For Weft's pipeline: port config 0 → nexthops 1 → members 2 → groups 3 → `wcmp_group_table`
//! 4 → multipath modes 5 → routes 6; tables that refer to nothing rank 0.

use std::collections::{BTreeMap, BTreeSet};

use weft_appdb::{CodecError, Format};
use weft_p4rt::{MatchKind, P4Info};
use weft_sonic_db::{P4rtActionSpec, P4rtEntry};

/// Who writes a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Owner {
    /// The controller, through APPL_DB P4RT_TABLE.
    Controller,
    /// The switch's plugin itself; `reason` is what a P4RT_TABLE writer of the table is told.
    Plugin { reason: &'static str },
}

/// Where a reference is written in an entry of the referring table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefSource {
    /// A match field.
    Match { field_id: u32, field: &'static str },
    /// A parameter of an entry action (of an action-profile table: of its members' actions).
    /// `action` is the action's alias, as P4RT_TABLE names it.
    Param {
        action_id: u32,
        action: &'static str,
        param_id: u32,
        param: &'static str,
    },
}

/// One `@refers_to`: the value at `source` names the entry of table `table` whose key field
/// `field` has that value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RefersTo {
    pub source: RefSource,
    pub table_id: u32,
    /// The referenced table's alias.
    pub table: &'static str,
    pub field_id: u32,
    pub field: &'static str,
}

/// A key field of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyField {
    pub id: u32,
    pub name: &'static str,
    pub bitwidth: u32,
    pub kind: MatchKind,
    pub format: Format,
    /// Some table refers to entries of this table by this field.
    pub referable: bool,
}

/// A parameter of an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamField {
    pub id: u32,
    pub name: &'static str,
    pub bitwidth: u32,
    pub format: Format,
}

/// An action an entry of a table may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryAction {
    pub id: u32,
    /// As P4RT_TABLE names it.
    pub alias: &'static str,
    pub params: &'static [ParamField],
}

/// Everything the contract says about one table (generated: `tables::<alias>::CONTRACT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableContract {
    pub id: u32,
    pub name: &'static str,
    pub alias: &'static str,
    /// `FIXED_<ALIAS>`.
    pub sonic_name: &'static str,
    pub write_rank: u8,
    pub owner: Owner,
    pub key: &'static [KeyField],
    /// Entry actions (default-only actions left out).
    pub actions: &'static [EntryAction],
    pub refers_to: &'static [RefersTo],
    /// Ids of the tables that refer to this one, ascending.
    pub referred_by: &'static [u32],
    pub action_profile_id: Option<u32>,
}

/// Every table's contract, in P4Info order.
pub fn tables() -> &'static [TableContract] {
    crate::tables::CONTRACTS
}

/// The contract of table `id`.
pub fn table(id: u32) -> Option<&'static TableContract> {
    tables().iter().find(|t| t.id == id)
}

/// The contract of the table SONiC calls `name` (`FIXED_NEXTHOP_TABLE`).
pub fn table_by_sonic_name(name: &str) -> Option<&'static TableContract> {
    tables().iter().find(|t| t.sonic_name == name)
}

/// The highest write rank of any table or action-profile object.
pub const MAX_WRITE_RANK: u8 = crate::tables::MAX_WRITE_RANK;

/// Write ranks of an action profile's members and groups: `(member, group)`.
pub fn profile_ranks(profile_id: u32) -> Option<(u8, u8)> {
    crate::action_profiles::RANKS
        .iter()
        .find(|(id, _, _)| *id == profile_id)
        .map(|(_, m, g)| (*m, *g))
}

/// Tables the plugin writes itself, with the reason a P4RT_TABLE writer is told.
pub fn plugin_tables() -> impl Iterator<Item = (u32, &'static str)> {
    tables().iter().filter_map(|t| match t.owner {
        Owner::Plugin { reason } => Some((t.id, reason)),
        Owner::Controller => None,
    })
}

/// One reference of an entry, or an entry's identity as a reference target: the entry of table
/// `table_id` whose key field `field` is `value`. `value` is the value's canonical text
/// ([`weft_appdb::canonical_text`]), so equal values compare equal whatever their spelling.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ref {
    pub table_id: u32,
    /// The table's alias.
    pub table: &'static str,
    pub field: &'static str,
    pub value: String,
}

impl std::fmt::Display for Ref {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}={}", self.table, self.field, self.value)
    }
}

/// Why an entry's references cannot be listed.
#[derive(Debug, thiserror::Error)]
pub enum RefError {
    #[error("no table with id {0:#x} in the pipeline")]
    UnknownTable(u32),
    #[error("{table}: {source}")]
    Value {
        table: &'static str,
        #[source]
        source: CodecError,
    },
}

fn canonical(
    t: &TableContract,
    format: Format,
    name: &str,
    bitwidth: u32,
    text: &str,
) -> Result<String, RefError> {
    weft_appdb::canonical_text(format, name, bitwidth, text).map_err(|source| RefError::Value {
        table: t.alias,
        source,
    })
}

/// What a P4RT_TABLE entry of table `table_id` refers to, sorted, without repeats: for every
/// `@refers_to` of the table, the referenced (table, key field, value) when the entry has that
/// field or uses that action (every member of a weighted entry counts).
///
/// The plugin answers `SWSS_RC_NOT_FOUND` to an entry with a reference no installed entry's
/// [`identities`] contain. Fields or parameters the entry lacks are not references (the
/// translator refuses entries missing required ones).
pub fn references(table_id: u32, entry: &P4rtEntry) -> Result<Vec<Ref>, RefError> {
    let t = table(table_id).ok_or(RefError::UnknownTable(table_id))?;
    let mut out = Vec::new();
    for r in t.refers_to {
        match r.source {
            RefSource::Match { field, .. } => {
                let Some(text) = entry.key.match_value(field) else {
                    continue;
                };
                let Some(f) = t.key.iter().find(|f| f.name == field) else {
                    continue;
                };
                out.push(Ref {
                    table_id: r.table_id,
                    table: r.table,
                    field: r.field,
                    value: canonical(t, f.format, field, f.bitwidth, text)?,
                });
            }
            RefSource::Param { action, param, .. } => {
                let Some(p) = t
                    .actions
                    .iter()
                    .find(|a| a.alias == action)
                    .and_then(|a| a.params.iter().find(|p| p.name == param))
                else {
                    continue;
                };
                let calls: Vec<&weft_sonic_db::P4rtAction> = match &entry.action {
                    P4rtActionSpec::Single(a) => vec![a],
                    P4rtActionSpec::Weighted(members) => {
                        members.iter().map(|m| &m.action).collect()
                    }
                };
                for call in calls.into_iter().filter(|c| c.name == action) {
                    if let Some(text) = call.params.get(param) {
                        out.push(Ref {
                            table_id: r.table_id,
                            table: r.table,
                            field: r.field,
                            value: canonical(t, p.format, param, p.bitwidth, text)?,
                        });
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// What other entries may refer to a P4RT_TABLE entry of table `table_id` by: (this table, key
/// field, value) for each of its key fields that some `@refers_to` names. Empty for tables
/// nothing refers to.
///
/// The plugin answers `SWSS_RC_IN_USE` to deleting an entry while an installed entry's
/// [`references`] contain one of its identities that no other installed entry provides (with
/// several key fields, several entries can share one identity).
pub fn identities(table_id: u32, entry: &P4rtEntry) -> Result<Vec<Ref>, RefError> {
    let t = table(table_id).ok_or(RefError::UnknownTable(table_id))?;
    let mut out = Vec::new();
    for f in t.key.iter().filter(|f| f.referable) {
        if let Some(text) = entry.key.match_value(f.name) {
            out.push(Ref {
                table_id: t.id,
                table: t.alias,
                field: f.name,
                value: canonical(t, f.format, f.name, f.bitwidth, text)?,
            });
        }
    }
    Ok(out)
}

// ---- derivation (used by the generator and the tests, from the P4Info) ----

/// A P4Info the contract cannot be derived from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    #[error("table {0} has no @weft_owner annotation (say who writes it)")]
    NoOwner(String),
    #[error("the write order has a cycle through {0}")]
    Cycle(String),
    #[error("{0}")]
    Invalid(String),
}

/// Write ranks derived from the references (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ranks {
    /// Table id → rank.
    pub tables: BTreeMap<u32, u8>,
    /// Action profile id → (member rank, group rank).
    pub profiles: BTreeMap<u32, (u8, u8)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Table(u32),
    Member(u32),
    Group(u32),
}

/// "`a` is written after `b`" facts of a P4Info, by the rules of the module documentation.
fn after(info: &P4Info) -> BTreeSet<(Node, Node)> {
    let mut out = BTreeSet::new();
    // Tables keyed by each table (a match field refers to it): its extensions.
    let mut keyed_by: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for t in info.tables() {
        for f in &t.match_fields {
            for r in &f.refers_to {
                out.insert((Node::Table(t.id), Node::Table(r.table_id)));
                keyed_by.entry(r.table_id).or_default().insert(t.id);
            }
        }
    }
    for t in info.tables() {
        let user = match t.action_profile_id {
            Some(p) => Node::Member(p),
            None => Node::Table(t.id),
        };
        for a in t.entry_action_ids() {
            let Ok(action) = info.action_by_id(a) else {
                continue;
            };
            for p in &action.params {
                for r in &p.refers_to {
                    out.insert((user, Node::Table(r.table_id)));
                    for ext in keyed_by.get(&r.table_id).into_iter().flatten() {
                        if Node::Table(*ext) != user && *ext != t.id {
                            out.insert((user, Node::Table(*ext)));
                        }
                    }
                }
            }
        }
    }
    for p in info.action_profiles() {
        let last = if p.with_selector {
            out.insert((Node::Group(p.id), Node::Member(p.id)));
            Node::Group(p.id)
        } else {
            Node::Member(p.id)
        };
        for t in &p.table_ids {
            out.insert((Node::Table(*t), last));
        }
    }
    out
}

/// The write rank of every table and action-profile object of `info`: 0 for what follows
/// nothing, else one more than the highest rank of what it follows.
pub fn derive_ranks(info: &P4Info) -> Result<Ranks, ContractError> {
    let facts = after(info);
    let mut deps: BTreeMap<Node, Vec<Node>> = BTreeMap::new();
    let mut nodes: Vec<Node> = info.tables().iter().map(|t| Node::Table(t.id)).collect();
    for p in info.action_profiles() {
        nodes.push(Node::Member(p.id));
        if p.with_selector {
            nodes.push(Node::Group(p.id));
        }
    }
    for (a, b) in facts {
        deps.entry(a).or_default().push(b);
    }
    let name = |n: Node| match n {
        Node::Table(id) => info
            .table_by_id(id)
            .map_or_else(|_| format!("{id:#x}"), |t| t.name.clone()),
        Node::Member(id) | Node::Group(id) => info
            .action_profile_by_id(id)
            .map_or_else(|_| format!("{id:#x}"), |p| p.name.clone()),
    };
    // Longest path by depth-first search; `on_path` catches cycles.
    fn rank_of(
        n: Node,
        deps: &BTreeMap<Node, Vec<Node>>,
        memo: &mut BTreeMap<Node, u8>,
        on_path: &mut BTreeSet<Node>,
    ) -> Result<u8, Node> {
        if let Some(r) = memo.get(&n) {
            return Ok(*r);
        }
        if !on_path.insert(n) {
            return Err(n);
        }
        let mut r = 0u8;
        for d in deps.get(&n).into_iter().flatten() {
            r = r.max(rank_of(*d, deps, memo, on_path)?.saturating_add(1));
        }
        on_path.remove(&n);
        memo.insert(n, r);
        Ok(r)
    }
    let mut memo = BTreeMap::new();
    let mut ranks = Ranks::default();
    for n in &nodes {
        let r = rank_of(*n, &deps, &mut memo, &mut BTreeSet::new())
            .map_err(|c| ContractError::Cycle(name(c)))?;
        match *n {
            Node::Table(id) => {
                ranks.tables.insert(id, r);
            }
            Node::Member(id) => ranks.profiles.entry(id).or_insert((0, 0)).0 = r,
            Node::Group(id) => ranks.profiles.entry(id).or_insert((0, 0)).1 = r,
        }
    }
    // A profile without groups: its "group" rank is its member rank.
    for p in info.action_profiles() {
        if !p.with_selector
            && let Some(e) = ranks.profiles.get_mut(&p.id)
        {
            e.1 = e.0;
        }
    }
    Ok(ranks)
}
