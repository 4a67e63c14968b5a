//! The diff: what one switch should hold (compiled entries and CONFIG_DB rows) against what it
//! has (read from its SONiC DB). Pure. `weft plan` prints it, `weft apply` and `weft run` write
//! it stage by stage through the reconciler's core (`crate::core`): there is no other diff.
//!
//! `weft plan --output json` prints [`Plan`] (as a stream, one switch at a time); its format is
//! documented in the README ("Plan JSON") so other tools can read it.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use weft_compiler::p4delta::EntryDelta;
use weft_compiler::p4map::{self, Entries, MapError, Stage, stage_of_table};
use weft_compiler::qos::QosError;
use weft_compiler::{SwitchDesired, Target};
use weft_sonic_db::Digest;
use weft_sonic_db::FieldValues;
use weft_sonic_schema::config::ConfigRow;
use weft_sonic_schema::state::{InstalledDigests, PluginStatus};
use weft_topology::{Peer, SwitchIdx, Topology};

/// Why a switch's desired state could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DesiredError {
    #[error(transparent)]
    Map(#[from] MapError),
    #[error(transparent)]
    Qos(#[from] QosError),
}

/// Everything one switch should hold, as written.
#[derive(Debug, Clone, Default)]
pub struct DesiredSwitch {
    pub entries: Entries,
    /// CONFIG_DB rows, typed (their fields are rendered only where compared or written).
    pub config: Vec<ConfigRow>,
}

/// Compiles switch `si` down to what is written into its DBs.
pub fn desired_switch(
    t: &Topology,
    info: &weft_p4rt::P4Info,
    sw: &SwitchDesired,
    si: SwitchIdx,
) -> Result<DesiredSwitch, DesiredError> {
    let entries = p4map::entries(t, info, sw)?;
    let config = weft_compiler::qos::compile_switch(t, si)?;
    Ok(DesiredSwitch { entries, config })
}

impl DesiredSwitch {
    /// The digests a plugin publishes when its switch holds exactly this: of the entries as
    /// APPL_STATE_DB holds them and of the CONFIG_DB rows as written.
    pub fn digests(&self) -> InstalledDigests {
        InstalledDigests {
            entries: Digest::of(self.entries.iter().map(|(k, e)| (k.as_str(), &e.fields))),
            config: weft_sonic_schema::config::config_digest(
                self.config
                    .iter()
                    .map(|r| (r.table(), r.key(), r.to_fields())),
            ),
        }
    }
}

/// Where an installed state came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Read from the switch's APPL_STATE_DB and CONFIG_DB.
    ApplStateDb,
    /// Not read (`--offline`) or not readable: planned against nothing.
    Empty(String),
    /// Read from the APPL_DB P4RT_TABLE of a switch whose consumer is SONiC's own p4orch, which
    /// writes what it applied back there (sonic-swss#3066), and its CONFIG_DB; with what SONiC
    /// publishes about its readiness.
    SonicApplDb(SonicReadiness),
    /// Not read because the plugin, in sync, publishes digests of APPL_STATE_DB and CONFIG_DB
    /// equal to these, which are the desired state's ([`Installed::by_digest`]): the switch
    /// holds exactly what it should.
    #[serde(skip_serializing)]
    Digest(InstalledDigests),
}

/// Whether SONiC's own P4RT consumer (p4orch in orchagent) takes entries, from what SONiC
/// itself publishes: orchagent programs nothing before portsyncd's `PortInitDone` (APPL_DB
/// `PORT_TABLE:PortInitDone`), and during a warm restart sonic-pins' P4RT app holds its writes
/// until orchagent's warm-restart state is `reconciled` (STATE_DB `WARM_RESTART_TABLE|orchagent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SonicReadiness {
    /// APPL_DB `PORT_TABLE:PortInitDone` exists.
    pub ports_ready: bool,
    /// STATE_DB `WARM_RESTART_TABLE|orchagent` field `state`, when a warm restart left one.
    pub warm_restart: Option<String>,
}

impl SonicReadiness {
    pub fn ready(&self) -> bool {
        self.ports_ready
            && self
                .warm_restart
                .as_deref()
                .is_none_or(|s| s == "reconciled")
    }

    /// Why not, in the operator's words (`None`: ready).
    pub fn why_not(&self) -> Option<String> {
        if !self.ports_ready {
            return Some(
                "no APPL_DB PORT_TABLE:PortInitDone: SONiC has not initialised its ports".into(),
            );
        }
        match self.warm_restart.as_deref() {
            Some(s) if s != "reconciled" => Some(format!(
                "orchagent's warm restart is {s}, not reconciled (STATE_DB WARM_RESTART_TABLE|orchagent)"
            )),
            _ => None,
        }
    }
}

/// What a switch has, as read from its SONiC DB.
#[derive(Debug, Clone)]
pub struct Installed {
    /// APPL_STATE_DB P4RT_TABLE (key without the `P4RT_TABLE:` prefix → fields, sorted): entries
    /// the switch acknowledged.
    pub entries: BTreeMap<String, FieldValues>,
    /// CONFIG_DB rows of the owned tables by `TABLE|key`, fields sorted.
    pub config: BTreeMap<String, FieldValues>,
    pub source: Source,
    /// The plugin's status row, when one was there (it expires when the plugin dies).
    pub plugin: Option<PluginStatus>,
}

impl Default for Installed {
    fn default() -> Self {
        Installed::empty("not read")
    }
}

impl Installed {
    /// What the switch has, known from its plugin's status row alone: when the plugin is in
    /// sync and its published digests equal `desired` (a [`DesiredSwitch::digests`]), it holds
    /// exactly the desired state and its rows need not be read. `None` otherwise (digests
    /// differ, the plugin is not in sync, or it publishes none): read the rows.
    pub fn by_digest(status: PluginStatus, desired: &InstalledDigests) -> Option<Installed> {
        if !status.in_sync() || status.digests().as_ref() != Some(desired) {
            return None;
        }
        Some(Installed {
            entries: BTreeMap::new(),
            config: BTreeMap::new(),
            source: Source::Digest(*desired),
            plugin: Some(status),
        })
    }

    /// What a switch holds when it holds exactly `desired` (known by digest), as a read of
    /// its rows would give it: the base of later diffs.
    pub fn holding(desired: &DesiredSwitch, plugin: Option<PluginStatus>) -> Installed {
        let sorted = |mut f: FieldValues| {
            f.sort();
            f
        };
        Installed {
            entries: desired
                .entries
                .iter()
                .map(|(k, e)| (k.clone(), sorted(e.fields.clone())))
                .collect(),
            config: desired
                .config
                .iter()
                .map(|r| (r.redis_key(), sorted(r.to_fields())))
                .collect(),
            source: Source::ApplStateDb,
            plugin,
        }
    }

    pub fn empty(why: impl Into<String>) -> Self {
        Installed {
            entries: BTreeMap::new(),
            config: BTreeMap::new(),
            source: Source::Empty(why.into()),
            plugin: None,
        }
    }

    /// What the plan's `installed_from` says.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::ApplStateDb | Source::Digest(_) => match &self.plugin {
                Some(p) if p.in_sync() => "APPL_STATE_DB".into(),
                Some(p) => format!(
                    "APPL_STATE_DB (plugin {}: not what the switch holds)",
                    p.state
                ),
                None => "APPL_STATE_DB (no live plugin: not what the switch holds)".into(),
            },
            Source::SonicApplDb(r) => match r.why_not() {
                None => "APPL_DB (SONiC p4orch)".into(),
                Some(why) => format!("APPL_DB (SONiC p4orch not ready: {why})"),
            },
            Source::Empty(why) => format!("empty: {why}"),
        }
    }

    /// The digests of the entries and of the rows (the ones the plugin publishes, computed the
    /// same way), whether they were read or known by digest.
    pub fn digests(&self) -> InstalledDigests {
        match &self.source {
            Source::Digest(d) => *d,
            _ => InstalledDigests {
                entries: Digest::of(self.entries.iter().map(|(k, f)| (k.as_str(), f))),
                config: Digest::of(self.config.iter().map(|(k, f)| (k.as_str(), f))),
            },
        }
    }

    /// The plan's `installed_digest`: both digests as one, hex: equal digests, equal installed
    /// state.
    pub fn digest(&self) -> String {
        self.digests().combined().hex()
    }

    /// The switch holds what APPL_STATE_DB says only while its plugin is running (primary,
    /// pipeline pushed, synced).
    /// A switch whose consumer is SONiC's p4orch: while SONiC says it is ready.
    pub fn trusted(&self) -> bool {
        match &self.source {
            Source::SonicApplDb(r) => r.ready(),
            Source::ApplStateDb | Source::Digest(_) => {
                self.plugin.as_ref().is_some_and(|p| p.in_sync())
            }
            Source::Empty(_) => false,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct EntryChange {
    pub key: String,
    pub stage: Stage,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: FieldValues,
    /// For a modification: the fields the switch has now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<FieldValues>,
}

/// A CONFIG_DB row to write, and what the switch has now. Serialized as
/// `{"table", "key", "fields": {...}, "old": {...}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigChange {
    pub row: ConfigRow,
    /// What the switch has under the same key (a modification), fields sorted.
    pub old: Option<FieldValues>,
}

impl ConfigChange {
    pub fn table(&self) -> &'static str {
        self.row.table()
    }
    pub fn key(&self) -> String {
        self.row.key()
    }
    /// `TABLE|key`.
    pub fn redis_key(&self) -> String {
        self.row.redis_key()
    }
    pub fn fields(&self) -> FieldValues {
        self.row.to_fields()
    }
    /// Referenced rows are written before the rows that refer to them.
    pub fn rank(&self) -> u8 {
        self.row.write_rank()
    }
}

struct AsMap<'a>(&'a FieldValues);

impl Serialize for AsMap<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut sorted: Vec<&(String, String)> = self.0.iter().collect();
        sorted.sort();
        let mut m = s.serialize_map(Some(sorted.len()))?;
        for (k, v) in sorted {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl Serialize for ConfigChange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let fields = self.fields();
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("table", self.table())?;
        m.serialize_entry("key", &self.key())?;
        m.serialize_entry("fields", &AsMap(&fields))?;
        if let Some(old) = &self.old {
            m.serialize_entry("old", &AsMap(old))?;
        }
        m.end()
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub entries: usize,
    pub add: usize,
    pub modify: usize,
    pub delete: usize,
    pub config_rows: usize,
    pub config_set: usize,
    pub config_delete: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct NextHopView {
    pub neighbour: String,
    pub port: String,
    pub weight: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModeView {
    pub class: String,
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flowlet_gap_us: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_from: Option<String>,
}

/// One route as an outside checker wants it: prefix → neighbours, without P4 details.
#[derive(Debug, Clone, Serialize)]
pub struct RouteView {
    pub prefix: String,
    /// "nexthop", "group" or "drop".
    pub kind: &'static str,
    pub next_hops: Vec<NextHopView>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub modes: Vec<ModeView>,
}

/// A connected port: to a switch or a host, with the link's speed and state.
#[derive(Debug, Clone, Serialize)]
pub struct LinkView {
    pub port: String,
    /// The P4Runtime port id of `port` (CONFIG_DB `PORT|port id`).
    pub port_id: u32,
    /// `switch:port` or the host's name.
    pub peer: String,
    /// "switch" or "host".
    pub peer_kind: &'static str,
    /// Bits per second.
    pub speed_bps: u64,
    pub state: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct SwitchPlan {
    pub name: String,
    pub device_id: u64,
    pub db: String,
    pub p4rt: String,
    pub installed_from: String,
    /// False when the switch's plugin is not running: APPL_STATE_DB is then not what the
    /// switch holds, and the plan compares against it anyway.
    pub installed_trusted: bool,
    /// A digest of the installed state the plan was made against (entries and rows), so a
    /// saved plan can be refused when the switch changed since. Made for readers only
    /// ([`Views::With`]; empty otherwise: hashing every entry costs more than the diff).
    pub installed_digest: String,
    pub counts: Counts,
    pub add: Vec<EntryChange>,
    pub modify: Vec<EntryChange>,
    pub delete: Vec<EntryChange>,
    pub config_set: Vec<ConfigChange>,
    pub config_delete: Vec<String>,
    pub routes: Vec<RouteView>,
    pub links: Vec<LinkView>,
}

impl SwitchPlan {
    pub fn is_empty(&self) -> bool {
        self.add.is_empty()
            && self.modify.is_empty()
            && self.delete.is_empty()
            && self.config_set.is_empty()
            && self.config_delete.is_empty()
    }

    pub fn changes(&self) -> usize {
        self.counts.add
            + self.counts.modify
            + self.counts.delete
            + self.counts.config_set
            + self.counts.config_delete
    }
}

/// The plan of a whole fabric (what `weft plan --output json` prints).
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub fabric: String,
    pub links_down: Vec<String>,
    pub notes: Vec<String>,
    pub switches: Vec<SwitchPlan>,
}

pub fn route_views(sw: &SwitchDesired) -> Vec<RouteView> {
    let nh_view = |id: u16, weight: u32| {
        sw.nexthops.get(&id).map(|n| NextHopView {
            neighbour: n.neighbour.to_string(),
            port: n.port.to_string(),
            weight,
        })
    };
    sw.routes
        .iter()
        .map(|r| match r.target {
            Target::Nexthop(id) => RouteView {
                prefix: r.prefix.to_string(),
                kind: "nexthop",
                next_hops: nh_view(id, 1).into_iter().collect(),
                modes: Vec::new(),
            },
            Target::Group(id) => {
                let g = sw.groups.get(&id);
                RouteView {
                    prefix: r.prefix.to_string(),
                    kind: "group",
                    next_hops: g
                        .map(|g| {
                            g.members
                                .iter()
                                .filter_map(|m| nh_view(m.nexthop_id, m.weight))
                                .collect()
                        })
                        .unwrap_or_default(),
                    modes: g
                        .map(|g| {
                            g.modes
                                .iter()
                                .map(|m| ModeView {
                                    class: m.class.to_string(),
                                    mode: m.mode.to_string(),
                                    flowlet_gap_us: (m.mode == weft_topology::RoutingMode::Flowlet)
                                        .then_some(m.flowlet_gap_us),
                                    fallback_from: m.fallback_from.map(|f| f.to_string()),
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                }
            }
            Target::Drop => RouteView {
                prefix: r.prefix.to_string(),
                kind: "drop",
                next_hops: Vec::new(),
                modes: Vec::new(),
            },
        })
        .collect()
}

/// Every connected port of switch `si`: fabric links and host links.
pub fn link_views(t: &Topology, si: SwitchIdx, down: &BTreeSet<usize>) -> Vec<LinkView> {
    let sw = &t.switches[si];
    sw.ports
        .iter()
        .filter_map(|p| {
            let (peer, peer_kind, speed, state) = match p.peer {
                Peer::None => return None,
                Peer::Switch { link } => {
                    let l = &t.links[link];
                    let state = if !t.link_admin_up(link) {
                        "admin-down"
                    } else if down.contains(&link) {
                        "down"
                    } else {
                        "up"
                    };
                    (t.end_name(l.other(si)), "switch", l.speed, state)
                }
                Peer::Host { host } => {
                    let h = &t.hosts[host];
                    let state = if p.admin_up { "up" } else { "admin-down" };
                    (h.name.clone(), "host", h.speed, state)
                }
            };
            Some(LinkView {
                port: p.name.clone(),
                port_id: p.id,
                peer,
                peer_kind,
                speed_bps: speed.bits_per_sec(),
                state,
            })
        })
        .collect()
}

fn field_map(f: &FieldValues) -> BTreeMap<String, String> {
    f.iter().cloned().collect()
}

/// Whether [`diff`] fills the plan's `routes`, `links` and `installed_digest` (the JSON and
/// outside checkers want them; the text table and the writers do not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Views {
    With,
    Without,
}

/// The one diff: `desired` (moved into the plan) against `installed`. Entries and rows compare
/// as field sets.
pub fn diff(
    t: &Topology,
    si: SwitchIdx,
    sw: &SwitchDesired,
    desired: DesiredSwitch,
    installed: &Installed,
    down: &BTreeSet<usize>,
    views: Views,
) -> SwitchPlan {
    let (entries, config_rows) = (desired.entries.len(), desired.config.len());
    let (add, modify, delete, config_set, config_delete) = match &installed.source {
        Source::Digest(d) => {
            // Made by `Installed::by_digest` from this desired state's digests: nothing differs.
            debug_assert_eq!(*d, desired.digests(), "a digest of another desired state");
            Default::default()
        }
        _ => {
            let (add, modify, delete) = diff_entries(desired.entries, &installed.entries);
            let (set, del) = diff_config(desired.config, &installed.config);
            (add, modify, delete, set, del)
        }
    };
    let mut p = switch_plan(t, si, installed, views, (add, modify, delete));
    p.counts.entries = entries;
    p.counts.config_rows = config_rows;
    p.counts.config_set = config_set.len();
    p.counts.config_delete = config_delete.len();
    p.config_set = config_set;
    p.config_delete = config_delete;
    if views == Views::With {
        p.routes = route_views(sw);
        p.links = link_views(t, si, down);
    }
    p
}

/// A plan of entry changes alone (no CONFIG_DB rows, no views yet).
fn switch_plan(
    t: &Topology,
    si: SwitchIdx,
    installed: &Installed,
    views: Views,
    (add, modify, delete): (Vec<EntryChange>, Vec<EntryChange>, Vec<EntryChange>),
) -> SwitchPlan {
    let s = &t.switches[si];
    SwitchPlan {
        name: s.name.clone(),
        device_id: s.device_id,
        db: s.db.clone(),
        p4rt: s.p4rt_address.clone(),
        installed_from: installed.describe(),
        installed_trusted: installed.trusted(),
        installed_digest: if views == Views::With {
            installed.digest()
        } else {
            String::new()
        },
        counts: Counts {
            entries: match &installed.source {
                Source::Digest(d) => d.entries.count() as usize,
                _ => (installed.entries.len() + add.len()).saturating_sub(delete.len()),
            },
            add: add.len(),
            modify: modify.len(),
            delete: delete.len(),
            config_rows: installed.config.len(),
            config_set: 0,
            config_delete: 0,
        },
        add,
        modify,
        delete,
        config_set: Vec::new(),
        config_delete: Vec::new(),
        routes: Vec::new(),
        links: Vec::new(),
    }
}

/// The diff of a switch after a link change `delta`, when what it has installed is exactly
/// what it should have held before (it acknowledged all of it, and neither changed since):
/// then only the entries the delta names differ, as the delta says (what was under each key
/// is what the switch holds), and the result is what [`diff`] of the whole new desired state
/// would give. CONFIG_DB rows do not depend on links.
pub fn diff_delta(
    t: &Topology,
    si: SwitchIdx,
    delta: &EntryDelta,
    installed: &Installed,
) -> SwitchPlan {
    let held = |key: &str, was: Option<&FieldValues>| {
        let have = installed.entries.get(key);
        have.is_none() && was.is_none() || have.zip(was).is_some_and(|(h, w)| same_fields(h, w))
    };
    let mut delete = Vec::with_capacity(delta.removed.len());
    for m in &delta.removed {
        debug_assert!(
            held(&m.0, Some(&m.1.fields)),
            "{}: not held as planned",
            m.0
        );
        let table = m.0.split(':').next().unwrap_or_default();
        delete.push(EntryChange {
            key: m.0.clone(),
            stage: stage_of_table(table),
            fields: Vec::new(),
            old: None,
        });
    }
    let (mut add, mut modify) = (Vec::with_capacity(delta.set.len()), Vec::new());
    for (m, was) in &delta.set {
        let (key, want) = &**m;
        debug_assert!(
            held(key, was.as_ref().map(|w| &w.1.fields)),
            "{key}: not held as planned"
        );
        match was {
            None => add.push(EntryChange {
                key: key.clone(),
                stage: want.stage,
                fields: want.fields.clone(),
                old: None,
            }),
            Some(w) if !std::sync::Arc::ptr_eq(m, w) && !same_fields(&w.1.fields, &want.fields) => {
                modify.push(EntryChange {
                    key: key.clone(),
                    stage: want.stage,
                    fields: want.fields.clone(),
                    old: Some(w.1.fields.clone()),
                })
            }
            Some(_) => {}
        }
    }
    switch_plan(t, si, installed, Views::Without, (add, modify, delete))
}

/// Adds, modifications and deletes of P4RT entries.
pub fn diff_entries(
    desired: Entries,
    installed: &BTreeMap<String, FieldValues>,
) -> (Vec<EntryChange>, Vec<EntryChange>, Vec<EntryChange>) {
    let mut add = Vec::new();
    let mut modify = Vec::new();
    let mut delete = Vec::new();
    for key in installed.keys() {
        if !desired.contains_key(key) {
            let table = key.split(':').next().unwrap_or_default();
            delete.push(EntryChange {
                key: key.clone(),
                stage: stage_of_table(table),
                fields: Vec::new(),
                old: None,
            });
        }
    }
    for (key, want) in desired {
        match installed.get(&key) {
            None => add.push(EntryChange {
                key,
                stage: want.stage,
                fields: want.fields,
                old: None,
            }),
            Some(have) if !same_fields(have, &want.fields) => modify.push(EntryChange {
                key,
                stage: want.stage,
                fields: want.fields,
                old: Some(have.clone()),
            }),
            Some(_) => {}
        }
    }
    (add, modify, delete)
}

/// CONFIG_DB rows to write (whole rows: a row with a field too many is rewritten) and to
/// delete. A row's fields are rendered only when the switch has a row under its key.
pub fn diff_config(
    desired: Vec<ConfigRow>,
    installed: &BTreeMap<String, FieldValues>,
) -> (Vec<ConfigChange>, Vec<String>) {
    if installed.is_empty() {
        // Nothing to compare with (a fresh switch, `--offline`): every row is new.
        let set = desired
            .into_iter()
            .map(|row| ConfigChange { row, old: None })
            .collect();
        return (set, Vec::new());
    }
    let mut wanted = BTreeSet::new();
    let mut set = Vec::new();
    for row in desired {
        let k = row.redis_key();
        let have = installed.get(&k);
        let same = have.is_some_and(|h| same_fields(h, &row.to_fields()));
        if !same {
            set.push(ConfigChange {
                row,
                old: have.cloned(),
            });
        }
        wanted.insert(k);
    }
    let del = installed
        .keys()
        .filter(|k| !wanted.contains(*k))
        .cloned()
        .collect();
    (set, del)
}

/// Field lists compare as sets (Redis hashes have no order).
pub fn same_fields(a: &FieldValues, b: &FieldValues) -> bool {
    if a.len() != b.len() {
        return false;
    }
    fn sorted(f: &FieldValues) -> Vec<(&str, &str)> {
        let mut v: Vec<(&str, &str)> = f.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        v.sort_unstable();
        v
    }
    sorted(a) == sorted(b)
}

/// Operator-facing text of a plan's header.
pub fn render_header(fabric: &str, links_down: &[String]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "plan for fabric {fabric}{}",
        if links_down.is_empty() {
            String::new()
        } else {
            format!(" with {} link(s) down", links_down.len())
        }
    );
    for l in links_down {
        let _ = writeln!(o, "  down: {l}");
    }
    let _ = writeln!(
        o,
        "{:<20} {:>8} {:>6} {:>7} {:>7} {:>8} {:>8}  installed state",
        "switch", "entries", "add", "modify", "delete", "config±", "groups"
    );
    o
}

/// Keys as an operator reads them: digit runs compare as numbers (`Ethernet4` before
/// `Ethernet12`, `0x5` before `0x1a` of the same width as hex would not), the rest as text.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> impl Iterator<Item = (bool, &str)> {
        let mut rest = s;
        std::iter::from_fn(move || {
            let first = rest.chars().next()?;
            let digit = first.is_ascii_digit();
            let end = rest
                .find(|c: char| c.is_ascii_digit() != digit)
                .unwrap_or(rest.len());
            let (chunk, tail) = rest.split_at(end);
            rest = tail;
            Some((digit, chunk))
        })
    }
    let mut x = chunks(a);
    let mut y = chunks(b);
    loop {
        match (x.next(), y.next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some((true, p)), Some((true, q))) => {
                let (p, q) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                let o = p.len().cmp(&q.len()).then_with(|| p.cmp(q));
                if o.is_ne() {
                    return o;
                }
            }
            (Some((_, p)), Some((_, q))) => {
                if p != q {
                    return p.cmp(q);
                }
            }
        }
    }
}

/// One change as `-v` lists it: `+`, `~` or `-`, the key, the fields before (a modification)
/// and after.
pub struct ChangeLine {
    pub sign: char,
    pub key: String,
    pub old: Option<FieldValues>,
    pub new: FieldValues,
}

/// A switch's line of the plan table.
pub struct SwitchLine<'a> {
    pub name: &'a str,
    pub entries: usize,
    pub add: usize,
    pub modify: usize,
    pub delete: usize,
    pub config: usize,
    pub groups: usize,
    pub installed_from: &'a str,
}

/// The plan table's line of a switch, and with `changes` every change under it: P4RT entries
/// first, then CONFIG_DB rows, each group in natural key order.
pub fn render_lines(
    l: &SwitchLine<'_>,
    changes: Option<(Vec<ChangeLine>, Vec<ChangeLine>)>,
) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<20} {:>8} {:>6} {:>7} {:>7} {:>8} {:>8}  {}",
        l.name, l.entries, l.add, l.modify, l.delete, l.config, l.groups, l.installed_from
    );
    let Some((entries, rows)) = changes else {
        return o;
    };
    for mut group in [entries, rows] {
        let rank = |c: char| match c {
            '+' => 0,
            '~' => 1,
            _ => 2,
        };
        group.sort_by(|a, b| {
            rank(a.sign)
                .cmp(&rank(b.sign))
                .then_with(|| natural_cmp(&a.key, &b.key))
        });
        for c in group {
            let _ = writeln!(o, "    {} {}", c.sign, c.key);
            if c.sign != '-' {
                field_diff(&mut o, c.old.as_ref(), &c.new);
            }
        }
    }
    o
}

/// One switch's line (and with `verbose`, every change: the fields of an addition, old → new
/// of a modification; keys in natural order).
pub fn render_switch(s: &SwitchPlan, verbose: bool) -> String {
    let line = SwitchLine {
        name: &s.name,
        entries: s.counts.entries,
        add: s.counts.add,
        modify: s.counts.modify,
        delete: s.counts.delete,
        config: s.counts.config_set + s.counts.config_delete,
        groups: s
            .add
            .iter()
            .chain(&s.modify)
            .filter(|c| c.stage == Stage::Group)
            .count(),
        installed_from: &s.installed_from,
    };
    let changes = verbose.then(|| {
        let entry = |sign: char, c: &EntryChange| ChangeLine {
            sign,
            key: c.key.clone(),
            old: c.old.clone(),
            new: c.fields.clone(),
        };
        let entries = s
            .add
            .iter()
            .map(|c| entry('+', c))
            .chain(s.modify.iter().map(|c| entry('~', c)))
            .chain(s.delete.iter().map(|c| entry('-', c)))
            .collect();
        let rows = s
            .config_set
            .iter()
            .map(|c| ChangeLine {
                sign: if c.old.is_some() { '~' } else { '+' },
                key: c.redis_key(),
                old: c.old.clone(),
                new: c.fields(),
            })
            .chain(s.config_delete.iter().map(|k| ChangeLine {
                sign: '-',
                key: k.clone(),
                old: None,
                new: Vec::new(),
            }))
            .collect();
        (entries, rows)
    });
    render_lines(&line, changes)
}

/// What a plan adds, modifies and deletes: P4RT entries and CONFIG_DB rows apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub add: usize,
    pub modify: usize,
    pub delete: usize,
    pub config_add: usize,
    pub config_modify: usize,
    pub config_delete: usize,
}

impl Totals {
    /// Adds one switch's plan.
    pub fn count(&mut self, p: &SwitchPlan) {
        self.add += p.counts.add;
        self.modify += p.counts.modify;
        self.delete += p.counts.delete;
        let modified = p.config_set.iter().filter(|c| c.old.is_some()).count();
        self.config_modify += modified;
        self.config_add += p.counts.config_set - modified;
        self.config_delete += p.counts.config_delete;
    }

    /// `total: 3 to add, 1 to modify, 1 to delete on 1 switch (P4RT entries: 3 to add;
    /// CONFIG_DB rows: 1 to modify, 1 to delete)`.
    pub fn line(&self, switches: usize) -> String {
        fn part(what: &str, a: usize, m: usize, d: usize) -> Option<String> {
            let v: Vec<String> = [(a, "to add"), (m, "to modify"), (d, "to delete")]
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, w)| format!("{n} {w}"))
                .collect();
            (!v.is_empty()).then(|| format!("{what}: {}", v.join(", ")))
        }
        let parts: Vec<String> = [
            part("P4RT entries", self.add, self.modify, self.delete),
            part(
                "CONFIG_DB rows",
                self.config_add,
                self.config_modify,
                self.config_delete,
            ),
        ]
        .into_iter()
        .flatten()
        .collect();
        format!(
            "total: {} to add, {} to modify, {} to delete on {switches} switch{}{}",
            self.add + self.config_add,
            self.modify + self.config_modify,
            self.delete + self.config_delete,
            if switches == 1 { "" } else { "es" },
            if parts.is_empty() {
                String::new()
            } else {
                format!(" ({})", parts.join("; "))
            }
        )
    }
}

/// `        field: old → new` for every field that differs.
fn field_diff(o: &mut String, old: Option<&FieldValues>, new: &FieldValues) {
    use std::fmt::Write as _;
    let Some(old) = old.map(field_map) else {
        // An addition: its fields as written.
        for (f, v) in field_map(new) {
            let _ = writeln!(o, "        {f}: {v}");
        }
        return;
    };
    let new = field_map(new);
    for (f, v) in &new {
        match old.get(f) {
            Some(o2) if o2 == v => {}
            Some(o2) => {
                let _ = writeln!(o, "        {f}: {o2} → {v}");
            }
            None => {
                let _ = writeln!(o, "        {f}: (none) → {v}");
            }
        }
    }
    for (f, v) in &old {
        if !new.contains_key(f) {
            let _ = writeln!(o, "        {f}: {v} → (none)");
        }
    }
}

/// Summary lines after the switches: per-class fallbacks, notes (summarised), totals.
pub fn render_footer(
    switches: usize,
    totals: &Totals,
    fallbacks: &BTreeSet<String>,
    notes: &[String],
    verbose: bool,
) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    for f in fallbacks {
        let _ = writeln!(o, "note: {f}");
    }
    let shown = if verbose { notes.len() } else { 20 };
    for n in notes.iter().take(shown) {
        let _ = writeln!(o, "note: {n}");
    }
    if notes.len() > shown {
        let _ = writeln!(
            o,
            "note: ... and {} more (all of them with -v or --output json)",
            notes.len() - shown
        );
    }
    let _ = writeln!(o, "{}", totals.line(switches));
    o
}

/// The per-class fallback notes a switch's groups imply.
pub fn fallbacks(sw: &SwitchDesired, out: &mut BTreeSet<String>) {
    for m in sw.groups.values().flat_map(|g| g.modes.iter()) {
        if let Some(f) = &m.fallback_from {
            out.insert(format!(
                "class {}: {f} falls back to {} toward NICs that cannot take reordering",
                m.class, m.mode
            ));
        }
    }
}

/// A whole plan as text (for small fabrics and tests; the command streams).
pub fn render(p: &Plan, verbose: bool) -> String {
    let mut o = render_header(&p.fabric, &p.links_down);
    let mut fb = BTreeSet::new();
    let mut totals = Totals::default();
    for s in &p.switches {
        o.push_str(&render_switch(s, verbose));
        for m in s.routes.iter().flat_map(|r| r.modes.iter()) {
            if let Some(f) = &m.fallback_from {
                fb.insert(format!(
                    "class {}: {f} falls back to {} toward NICs that cannot take reordering",
                    m.class, m.mode
                ));
            }
        }
        totals.count(s);
    }
    o.push_str(&render_footer(
        p.switches.len(),
        &totals,
        &fb,
        &p.notes,
        verbose,
    ));
    o
}
