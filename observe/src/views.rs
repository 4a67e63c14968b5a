//! The operator's tables of a fabric: `weft show hosts` and `weft show switches` (from the
//! intent alone), and `weft show routes SWITCH [PREFIX]`: the switch's compiled FIB (each
//! prefix, its next hops and weights, its modes per class) and, against a live fabric, whether
//! the switch holds each route as compiled ([`held`], judged on its APPL_STATE_DB while a
//! running plugin answers for it).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Serialize;
use weft_compiler::{Route, SwitchDesired, Target};
use weft_reconcile::plan::{Installed, ModeView, NextHopView, RouteView, route_views};
use weft_sonic_db::FieldValues;
use weft_topology::{Peer, SwitchIdx, Topology};

use crate::read::Unknown;

#[derive(Debug, Clone, Serialize)]
pub struct HostRow {
    pub name: String,
    pub ipv4: String,
    pub ipv6: Option<String>,
    pub mac: String,
    /// `leaf:port` the host is cabled to.
    pub attached: String,
    pub speed: String,
    /// `ooo-tolerant` (per-packet spraying allowed toward it) or `in-order`.
    pub nic: &'static str,
    pub rail: Option<u32>,
    pub plane: Option<u32>,
}

/// Every host of the intent, in its order.
pub fn hosts(t: &Topology) -> Vec<HostRow> {
    t.hosts
        .iter()
        .map(|h| {
            let sw = &t.switches[h.switch];
            HostRow {
                name: h.name.clone(),
                ipv4: h.ipv4.to_string(),
                ipv6: h.ipv6.map(|a| a.to_string()),
                mac: h.mac.to_string(),
                attached: format!("{}:{}", sw.name, sw.ports[h.port].name),
                speed: h.speed.to_string(),
                nic: if h.ooo_tolerant {
                    "ooo-tolerant"
                } else {
                    "in-order"
                },
                rail: h.rail,
                plane: h.plane,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct SwitchRow {
    pub name: String,
    pub role: &'static str,
    pub device_id: u64,
    pub loopback: String,
    pub router_mac: String,
    /// Where its plugin reaches the switch over P4Runtime.
    pub p4rt: String,
    /// Its SONiC DB (Redis) endpoint: what Weft reads and writes.
    pub db: String,
    pub plane: Option<u32>,
    /// Connected ports: to switches, to hosts.
    pub fabric_ports: usize,
    pub host_ports: usize,
}

/// Every switch of the intent, in its order.
pub fn switches(t: &Topology) -> Vec<SwitchRow> {
    t.switches
        .iter()
        .map(|s| SwitchRow {
            name: s.name.clone(),
            role: s.role.as_str(),
            device_id: s.device_id,
            loopback: s.loopback.to_string(),
            router_mac: s.router_mac.to_string(),
            p4rt: s.p4rt_address.clone(),
            db: s.db.clone(),
            plane: s.plane,
            fabric_ports: s
                .ports
                .iter()
                .filter(|p| matches!(p.peer, Peer::Switch { .. }))
                .count(),
            host_ports: s
                .ports
                .iter()
                .filter(|p| matches!(p.peer, Peer::Host { .. }))
                .count(),
        })
        .collect()
}

/// Which routes `show routes` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteFilter {
    All,
    /// The route an address takes (longest prefix match).
    Address(IpAddr),
    /// The routes equal to or inside a prefix.
    Within(IpNet),
}

impl std::fmt::Display for RouteFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteFilter::All => write!(f, "every prefix"),
            RouteFilter::Address(a) => write!(f, "{a}"),
            RouteFilter::Within(n) => write!(f, "{n}"),
        }
    }
}

/// A filter that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither an address nor a prefix (10.0.0.2, 10.0.0.0/29, fd00:77::/64)")]
pub struct FilterError(pub String);

impl std::str::FromStr for RouteFilter {
    type Err = FilterError;
    fn from_str(s: &str) -> Result<RouteFilter, FilterError> {
        let s = s.trim();
        if let Ok(a) = s.parse::<IpAddr>() {
            return Ok(RouteFilter::Address(a));
        }
        s.parse::<IpNet>()
            .map(|n| RouteFilter::Within(n.trunc()))
            .map_err(|_| FilterError(s.to_string()))
    }
}

/// One route of a switch's FIB, and (live) whether the switch holds it.
#[derive(Debug, Clone, Serialize)]
pub struct RouteRow {
    pub prefix: String,
    /// `nexthop`, `group` or `drop`.
    pub kind: &'static str,
    pub next_hops: Vec<NextHopView>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub modes: Vec<ModeView>,
    /// Against a live fabric: `held` (the switch acknowledged exactly this entry and its
    /// group), `missing`, `differs`; `None` offline or when the switch could not be judged.
    pub switch_holds: Option<&'static str>,
}

/// `show routes`: what the compiler gives a switch and, live, what it holds.
#[derive(Debug, Clone, Serialize)]
pub struct RoutesView {
    pub switch: String,
    pub routes: Vec<RouteRow>,
    /// Live: prefixes the switch holds that the intent does not give it.
    pub not_in_intent: Vec<String>,
    /// Live: where what the switch holds was read from (`APPL_STATE_DB`, or why not).
    pub installed_from: Option<String>,
    /// Live: the switch could not be judged (DB not answering, no running plugin).
    pub unknown: Option<Unknown>,
}

fn matches(f: RouteFilter, prefix: &IpNet, best: Option<u8>) -> bool {
    match f {
        RouteFilter::All => true,
        RouteFilter::Address(_) => Some(prefix.prefix_len()) == best,
        RouteFilter::Within(n) => n.contains(prefix),
    }
}

/// The compiled routes of `sw` that `filter` selects (an address: the longest match).
pub fn compiled(sw: &SwitchDesired, filter: RouteFilter) -> Vec<(Route, RouteView)> {
    let best = match filter {
        RouteFilter::Address(a) => sw
            .routes
            .iter()
            .filter(|r| r.prefix.contains(&a))
            .map(|r| r.prefix.prefix_len())
            .max(),
        _ => None,
    };
    sw.routes
        .iter()
        .cloned()
        .zip(route_views(sw))
        .filter(|(r, _)| {
            matches(filter, &r.prefix, best)
                && match filter {
                    RouteFilter::Address(a) => r.prefix.contains(&a),
                    _ => true,
                }
        })
        .collect()
}

/// The APPL_DB keys a route needs on its switch: its LPM entry and, for a group, the group's.
fn route_keys(r: &Route) -> Vec<String> {
    let mut keys: Vec<String> = weft_compiler::p4map::route_entry(r)
        .map(|w| vec![w.key])
        .unwrap_or_default();
    if let Target::Group(id) = r.target
        && let Ok(k) = (weft_p4::tables::wcmp_group_table::Key { wcmp_group_id: id }).table_key()
    {
        keys.push(k);
    }
    keys
}

/// Whether `installed` holds `r` as `desired` has it: `held`, `missing` (an entry absent) or
/// `differs`. Pure.
pub fn held(
    r: &Route,
    desired: &BTreeMap<String, FieldValues>,
    installed: &BTreeMap<String, FieldValues>,
) -> &'static str {
    let mut state = "held";
    for k in route_keys(r) {
        match (desired.get(&k), installed.get(&k)) {
            (_, None) => return "missing",
            (Some(d), Some(i)) if !weft_reconcile::plan::same_fields(d, i) => state = "differs",
            _ => {}
        }
    }
    state
}

/// Route entries the switch holds that `desired` does not have, by their key's prefix.
pub fn not_in_intent(
    desired: &BTreeMap<String, FieldValues>,
    installed: &BTreeMap<String, FieldValues>,
) -> Vec<String> {
    let lpm = [
        weft_p4::tables::ipv4_table::NAME,
        weft_p4::tables::ipv6_table::NAME,
    ];
    let route_tables: BTreeSet<String> = lpm
        .iter()
        .filter_map(|n| {
            weft_p4::contract::tables()
                .iter()
                .find(|t| t.name == *n)
                .map(|t| t.sonic_name.to_string())
        })
        .collect();
    installed
        .keys()
        .filter(|k| !desired.contains_key(*k))
        .filter(|k| {
            k.split(':')
                .next()
                .is_some_and(|t| route_tables.contains(t))
        })
        .map(|k| {
            // The prefix is the one value of the key's match object.
            k.split_once(':')
                .and_then(|(_, m)| serde_json::from_str::<serde_json::Value>(m).ok())
                .and_then(|v| {
                    v.as_object()
                        .and_then(|o| o.values().next().and_then(|x| x.as_str().map(String::from)))
                })
                .unwrap_or_else(|| k.clone())
        })
        .collect()
}

/// The routes of switch `si` that `filter` selects; with `installed` (a live read), whether the
/// switch holds each one, judged only when its plugin runs (APPL_STATE_DB is what it holds).
pub fn routes_view(
    t: &Topology,
    si: SwitchIdx,
    sw: &SwitchDesired,
    desired: &BTreeMap<String, FieldValues>,
    filter: RouteFilter,
    installed: Option<Result<&Installed, &weft_reconcile::core::SwitchError>>,
) -> RoutesView {
    let name = t.switches[si].name.clone();
    let rows = compiled(sw, filter);
    let mut v = RoutesView {
        switch: name.clone(),
        routes: Vec::new(),
        not_in_intent: Vec::new(),
        installed_from: None,
        unknown: None,
    };
    let judged = match installed {
        None => None,
        Some(Err(e)) => {
            v.unknown = Some(Unknown {
                switch: name.clone(),
                data: "unreachable",
                detail: e.to_string(),
            });
            None
        }
        Some(Ok(i)) => {
            v.installed_from = Some(i.describe());
            if i.trusted() {
                Some(i)
            } else {
                v.unknown = Some(Unknown {
                    switch: name.clone(),
                    data: "stale",
                    detail: format!("what it holds is not known: {}", i.describe()),
                });
                None
            }
        }
    };
    if let Some(i) = judged {
        v.not_in_intent = not_in_intent(desired, &i.entries)
            .into_iter()
            .filter(|p| match (filter, p.parse::<IpNet>()) {
                (RouteFilter::All, _) => true,
                (RouteFilter::Address(a), Ok(n)) => n.contains(&a),
                (RouteFilter::Within(w), Ok(n)) => w.contains(&n),
                (_, Err(_)) => false,
            })
            .collect();
    }
    v.routes = rows
        .into_iter()
        .map(|(r, view)| RouteRow {
            switch_holds: judged.map(|i| held(&r, desired, &i.entries)),
            prefix: view.prefix,
            kind: view.kind,
            next_hops: view.next_hops,
            modes: view.modes,
        })
        .collect();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Topology {
        weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example")
    }

    #[test]
    fn an_address_selects_its_longest_match_and_a_prefix_what_lies_inside_it() {
        let t = small();
        let desired = weft_compiler::compile(&t, &weft_compiler::LinkState::all_up(&t));
        let leaf1 = t.switch_index("leaf1").expect("leaf1");
        let sw = &desired.switches[leaf1];
        let all = compiled(sw, RouteFilter::All);
        assert_eq!(all.len(), sw.routes.len());
        let one = compiled(sw, "10.0.0.2".parse().expect("address"));
        assert_eq!(
            one.len(),
            1,
            "{:?}",
            one.iter().map(|r| &r.1.prefix).collect::<Vec<_>>()
        );
        assert_eq!(one[0].1.prefix, "10.0.0.2/32");
        let far = compiled(sw, "10.0.0.26".parse().expect("address"));
        assert_eq!(far.len(), 1);
        assert_eq!(
            far[0].1.kind, "group",
            "another leaf's host: over the spines"
        );
        assert_eq!(far[0].1.next_hops.len(), 2);
        let v4: Vec<_> = compiled(sw, "10.0.0.0/24".parse().expect("prefix"));
        assert!(v4.iter().all(|(r, _)| r.prefix.addr().is_ipv4()));
        assert!("leaf1".parse::<RouteFilter>().is_err());
    }

    #[test]
    fn a_route_is_held_only_when_its_entry_and_group_are_there_as_compiled() {
        let t = small();
        let desired = weft_compiler::compile(&t, &weft_compiler::LinkState::all_up(&t));
        let leaf1 = t.switch_index("leaf1").expect("leaf1");
        let sw = &desired.switches[leaf1];
        let (r, _) = compiled(sw, "10.0.0.26".parse().expect("address"))
            .into_iter()
            .next()
            .expect("route");
        let info = weft_compiler::p4map::pipeline_p4info().expect("p4info");
        let entries: BTreeMap<String, FieldValues> =
            weft_reconcile::plan::desired_switch(&t, &info, sw, leaf1)
                .expect("desired")
                .entries
                .into_iter()
                .map(|(k, e)| (k, e.fields))
                .collect();
        assert_eq!(held(&r, &entries, &entries), "held");
        let keys = route_keys(&r);
        assert_eq!(keys.len(), 2, "route and group: {keys:?}");
        let mut without_group = entries.clone();
        without_group.remove(&keys[1]);
        assert_eq!(held(&r, &entries, &without_group), "missing");
        let mut changed = entries.clone();
        if let Some(f) = changed.get_mut(&keys[0]) {
            f.push(("param/extra".into(), "1".into()));
        }
        assert_eq!(held(&r, &entries, &changed), "differs");
        let mut extra = entries.clone();
        let mut foreign = r.clone();
        foreign.prefix = "192.168.0.0/16".parse().expect("prefix");
        let k = weft_compiler::p4map::route_entry(&foreign)
            .expect("entry")
            .key;
        extra.insert(k, Vec::new());
        assert_eq!(not_in_intent(&entries, &extra), ["192.168.0.0/16"]);
    }
}
