//! The plan: what each switch should hold, compared with what it has. Pure: the installed state
//! is an input (read by `apply` from the switch's SONiC DB, or empty).
//!
//! `weft plan --output json` prints [`Plan`]; its format is documented in the README ("Plan
//! JSON") so other tools can read it.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use weft_sonic_db::{FieldValues, P4rtEntry, P4rtKey};
use weft_topology::Topology;

use weft_compiler::p4map::{self, MapError, Stage};
use weft_compiler::qos::ConfigRow;
use weft_compiler::{Desired, SwitchDesired, Target};

/// CONFIG_DB tables Weft owns: rows there that the intent does not produce are removed.
pub const OWNED_CONFIG_TABLES: &[&str] = &[
    "PORT",
    "DSCP_TO_TC_MAP",
    "TC_TO_QUEUE_MAP",
    "TC_TO_PRIORITY_GROUP_MAP",
    "PORT_QOS_MAP",
    "WRED_PROFILE",
    "QUEUE",
    "CABLE_LENGTH",
    "BUFFER_PROFILE",
    "BUFFER_PG",
    "PFC_WD",
    "WEFT_ECN_ENVELOPE",
];

/// What a switch has, as read from its SONiC DB.
#[derive(Debug, Clone, Default)]
pub struct Installed {
    /// APPL_STATE_DB P4RT_TABLE: entries the switch acknowledged.
    pub entries: BTreeMap<P4rtKey, P4rtEntry>,
    /// APPL_STATE_DB keys that do not parse: removed as strays.
    pub malformed: Vec<String>,
    /// CONFIG_DB rows of the owned tables, keyed `TABLE|key`.
    pub config: BTreeMap<String, FieldValues>,
    /// Where this came from: "APPL_STATE_DB" or why it is empty.
    pub source: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct EntryChange {
    pub key: String,
    pub stage: Stage,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: FieldValues,
    #[serde(skip)]
    pub entry: Option<P4rtEntry>,
}

#[derive(Debug, Clone, Serialize)]
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

#[derive(Debug, Clone, Serialize)]
pub struct LinkView {
    pub port: String,
    pub peer: String,
    pub state: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct SwitchPlan {
    pub name: String,
    pub device_id: u64,
    pub db: String,
    pub installed_from: String,
    pub counts: Counts,
    pub add: Vec<EntryChange>,
    pub modify: Vec<EntryChange>,
    pub delete: Vec<EntryChange>,
    pub config_set: Vec<ConfigRow>,
    pub config_delete: Vec<String>,
    pub routes: Vec<RouteView>,
    pub links: Vec<LinkView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub fabric: String,
    pub links_down: Vec<String>,
    pub notes: Vec<String>,
    pub switches: Vec<SwitchPlan>,
}

/// The stage of an installed key, by its table, so deletes run in reverse dependency order.
pub fn stage_of(table: &str, stages: &BTreeMap<String, Stage>) -> Stage {
    stages.get(table).copied().unwrap_or(Stage::Route)
}

pub fn route_views(t: &Topology, sw: &SwitchDesired) -> Vec<RouteView> {
    let nh_view = |id: u16, weight: u32| {
        sw.nexthops.get(&id).map(|n| NextHopView {
            neighbour: n.neighbour.to_string(),
            port: n.port.to_string(),
            weight,
        })
    };
    let _ = t;
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
                                    class: m.class.clone(),
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

fn link_views(t: &Topology, name: &str, down: &BTreeSet<String>) -> Vec<LinkView> {
    let Some(si) = t.switch_index(name) else {
        return Vec::new();
    };
    t.neighbours(si)
        .map(|(l, pi, peer)| {
            let link = &t.links[l];
            let label = format!("{} ↔ {}", t.end_name(link.a), t.end_name(link.b));
            let state = if !t.link_admin_up(l) {
                "admin-down"
            } else if down.contains(&label) {
                "down"
            } else {
                "up"
            };
            LinkView {
                port: t.switches[si].ports[pi].name.clone(),
                peer: t.end_name(peer),
                state,
            }
        })
        .collect()
}

/// Compares one switch's desired entries and config rows with what it has.
pub fn switch_plan(
    t: &Topology,
    sw: &SwitchDesired,
    desired: &BTreeMap<String, (Stage, P4rtEntry)>,
    config: &[ConfigRow],
    installed: &Installed,
    stages: &BTreeMap<String, Stage>,
    down: &BTreeSet<String>,
) -> SwitchPlan {
    let mut add = Vec::new();
    let mut modify = Vec::new();
    let mut delete = Vec::new();
    let installed_by_key: BTreeMap<String, &P4rtEntry> = installed
        .entries
        .iter()
        .map(|(k, e)| (k.to_table_key(), e))
        .collect();
    for (key, (stage, entry)) in desired {
        let change = || EntryChange {
            key: key.clone(),
            stage: *stage,
            fields: entry.to_fields(),
            entry: Some(entry.clone()),
        };
        match installed_by_key.get(key) {
            None => add.push(change()),
            Some(have) if *have != entry => modify.push(change()),
            Some(_) => {}
        }
    }
    for (key, entry) in &installed_by_key {
        if !desired.contains_key(key) {
            delete.push(EntryChange {
                key: key.clone(),
                stage: stage_of(&entry.key.table, stages),
                fields: Vec::new(),
                entry: None,
            });
        }
    }
    for key in &installed.malformed {
        let table = key.split(':').next().unwrap_or_default();
        delete.push(EntryChange {
            key: key.clone(),
            stage: stage_of(table, stages),
            fields: Vec::new(),
            entry: None,
        });
    }
    let mut config_set = Vec::new();
    let mut wanted = BTreeSet::new();
    for row in config {
        let k = format!("{}|{}", row.table, row.key);
        let want: FieldValues = row
            .fields
            .iter()
            .map(|(a, b)| (a.clone(), b.clone()))
            .collect();
        let same = installed.config.get(&k).is_some_and(|have| {
            let mut h = have.clone();
            h.sort();
            h == want
        });
        if !same {
            config_set.push(row.clone());
        }
        wanted.insert(k);
    }
    let config_delete: Vec<String> = installed
        .config
        .keys()
        .filter(|k| !wanted.contains(*k))
        .cloned()
        .collect();
    SwitchPlan {
        name: sw.name.clone(),
        device_id: sw.device_id,
        db: t.switch(&sw.name).map(|s| s.db.clone()).unwrap_or_default(),
        installed_from: installed.source.clone(),
        counts: Counts {
            entries: desired.len(),
            add: add.len(),
            modify: modify.len(),
            delete: delete.len(),
            config_rows: config.len(),
            config_set: config_set.len(),
            config_delete: config_delete.len(),
        },
        add,
        modify,
        delete,
        config_set,
        config_delete,
        routes: route_views(t, sw),
        links: link_views(t, &sw.name, down),
    }
}

/// The SONiC table name → stage map of the pipeline.
pub fn stage_map(info: &weft_p4rt::P4Info) -> BTreeMap<String, Stage> {
    use weft_p4::tables as tb;
    let enc = weft_appdb::Encoder::new(info);
    let mut m = BTreeMap::new();
    for (name, stage) in [
        (tb::port_config_table::NAME, Stage::Port),
        (tb::psn_tracking_table::NAME, Stage::Port),
        (tb::nexthop_table::NAME, Stage::Nexthop),
        (tb::wcmp_group_table::NAME, Stage::Group),
        (tb::multipath_mode_table::NAME, Stage::Mode),
        (tb::ipv4_table::NAME, Stage::Route),
        (tb::ipv6_table::NAME, Stage::Route),
    ] {
        if let Ok(s) = enc.table_name(name) {
            m.insert(s, stage);
        }
    }
    m
}

/// Builds the whole plan. `installed(switch)` gives what a switch has.
pub fn plan(
    t: &Topology,
    d: &Desired,
    info: &weft_p4rt::P4Info,
    mut installed: impl FnMut(&str) -> Installed,
) -> Result<Plan, MapError> {
    let stages = stage_map(info);
    let down: BTreeSet<String> = d.down_links.iter().cloned().collect();
    let mut switches = Vec::with_capacity(d.switches.len());
    for (si, sw) in d.switches.iter().enumerate() {
        let desired = p4map::entries(t, info, sw)?;
        let config = weft_compiler::qos::compile_switch(t, si).rows;
        switches.push(switch_plan(
            t,
            sw,
            &desired,
            &config,
            &installed(&sw.name),
            &stages,
            &down,
        ));
    }
    Ok(Plan {
        fabric: t.name.clone(),
        links_down: d.down_links.clone(),
        notes: d.notes.clone(),
        switches,
    })
}

/// Operator-facing text of a plan.
pub fn render(p: &Plan, verbose: bool) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "plan for fabric {}{}",
        p.fabric,
        if p.links_down.is_empty() {
            String::new()
        } else {
            format!(" with {} link(s) down", p.links_down.len())
        }
    );
    for l in &p.links_down {
        let _ = writeln!(o, "  down: {l}");
    }
    let _ = writeln!(
        o,
        "{:<20} {:>8} {:>6} {:>7} {:>7} {:>8} {:>8}  installed state",
        "switch", "entries", "add", "modify", "delete", "config±", "groups"
    );
    for s in &p.switches {
        let groups = s
            .add
            .iter()
            .chain(&s.modify)
            .filter(|c| c.stage == Stage::Group)
            .count();
        let _ = writeln!(
            o,
            "{:<20} {:>8} {:>6} {:>7} {:>7} {:>8} {:>8}  {}",
            s.name,
            s.counts.entries,
            s.counts.add,
            s.counts.modify,
            s.counts.delete,
            s.counts.config_set + s.counts.config_delete,
            groups,
            s.installed_from
        );
        if verbose {
            for c in &s.add {
                let _ = writeln!(o, "    + {}", c.key);
            }
            for c in &s.modify {
                let _ = writeln!(o, "    ~ {}", c.key);
            }
            for c in &s.delete {
                let _ = writeln!(o, "    - {}", c.key);
            }
        }
    }
    let fallbacks: BTreeSet<String> = p
        .switches
        .iter()
        .flat_map(|s| s.routes.iter())
        .flat_map(|r| r.modes.iter())
        .filter_map(|m| {
            m.fallback_from.as_ref().map(|f| {
                format!(
                    "class {}: {f} falls back to {} toward NICs that cannot take reordering",
                    m.class, m.mode
                )
            })
        })
        .collect();
    for f in fallbacks {
        let _ = writeln!(o, "note: {f}");
    }
    for n in p.notes.iter().take(20) {
        let _ = writeln!(o, "note: {n}");
    }
    if p.notes.len() > 20 {
        let _ = writeln!(o, "note: ... and {} more", p.notes.len() - 20);
    }
    let (a, m, d): (usize, usize, usize) = p.switches.iter().fold((0, 0, 0), |x, s| {
        (
            x.0 + s.counts.add,
            x.1 + s.counts.modify,
            x.2 + s.counts.delete,
        )
    });
    let _ = writeln!(
        o,
        "total: {a} to add, {m} to modify, {d} to delete on {} switches",
        p.switches.len()
    );
    o
}
