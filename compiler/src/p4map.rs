//! Desired switch state → P4RT_TABLE entries in the pipeline's terms, built from the typed
//! entries generated from the P4Info (`weft_p4::tables::<table>::{Key, Action, entry}`): a
//! value of the wrong kind does not compile, and no P4 name is looked up per entry. They write
//! exactly what the shared codec (`weft_appdb`) writes, which the plugin parses (a `weft-p4`
//! test compares the two on random values).
//!
//! The write order is the pipeline's: [`Stage`] names the write ranks the P4 source's
//! `@refers_to` declarations give the tables the controller writes (`weft_p4::contract`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use weft_p4::contract;
use weft_p4::tables as tb;
use weft_p4::wire::{Lpm, PortName, Ternary, Weighted, Wire, WireError};
use weft_p4::{constants as k, p4info};
use weft_p4rt::P4Info;
use weft_sonic_db::FieldValues;
use weft_topology::{Peer, RoutingMode, Topology};

use super::{Group, Route, SwitchDesired, Target};

/// When an entry must be written relative to others: inserts in ascending stage, deletes in
/// descending (make before break). Each stage is the generated write rank of its tables
/// (`weft_p4::tables::<table>::WRITE_RANK`), so the order is the pipeline's and is declared
/// once, in the P4 source; a test checks that every table the controller writes has a stage.
///
/// Serialised by name (`"Port"`, `"Nexthop"`, `"Group"`, `"Mode"`, `"Route"`: the plan JSON).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Stage {
    /// `port_config_table`, `psn_tracking_table`.
    Port = tb::port_config_table::WRITE_RANK,
    /// `nexthop_table`.
    Nexthop = tb::nexthop_table::WRITE_RANK,
    /// `wcmp_group_table` (the plugin writes its members and groups first).
    Group = tb::wcmp_group_table::WRITE_RANK,
    /// `multipath_mode_table`.
    Mode = tb::multipath_mode_table::WRITE_RANK,
    /// `ipv4_table`, `ipv6_table`.
    Route = tb::ipv4_table::WRITE_RANK,
}

impl Stage {
    /// Every stage, in write order.
    pub const ALL: [Stage; 5] = [
        Stage::Port,
        Stage::Nexthop,
        Stage::Group,
        Stage::Mode,
        Stage::Route,
    ];

    /// The write rank this stage writes.
    pub fn rank(self) -> u8 {
        self as u8
    }

    /// The stage of write rank `rank`, if the controller writes a table of that rank.
    pub fn of_rank(rank: u8) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.rank() == rank)
    }
}

/// One P4RT_TABLE entry as it is written: its stage and its fields, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireEntry {
    pub stage: Stage,
    pub fields: FieldValues,
}

/// A switch's entries by APPL_DB key without the `P4RT_TABLE:` prefix (`FIXED_X:{json}`).
pub type Entries = BTreeMap<String, WireEntry>;

#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("switch {switch}: {source}")]
    Value {
        switch: String,
        #[source]
        source: WireError,
    },
    /// The P4Info given is not the pipeline the typed entries were generated from.
    #[error("the P4Info is not Weft's pipeline: {0}")]
    Pipeline(String),
}

/// The pipeline's P4Info, parsed once.
pub fn pipeline_p4info() -> Result<P4Info, weft_p4rt::Error> {
    p4info()
}

fn mode_code(m: RoutingMode) -> u8 {
    match m {
        RoutingMode::Ecmp | RoutingMode::Wcmp => k::MULTIPATH_MODE_HASH,
        RoutingMode::Spray => k::MULTIPATH_MODE_SPRAY,
        RoutingMode::Adaptive => k::MULTIPATH_MODE_ADAPTIVE,
        RoutingMode::Flowlet => k::MULTIPATH_MODE_FLOWLET,
        RoutingMode::Entropy => k::MULTIPATH_MODE_ENTROPY,
    }
}

/// The tables [`entries`] writes, with their stages.
const WRITTEN: [(u32, &str, Stage); 8] = [
    (
        tb::postcard_watch_table::ID,
        tb::postcard_watch_table::NAME,
        Stage::Port,
    ),
    (
        tb::port_config_table::ID,
        tb::port_config_table::NAME,
        Stage::Port,
    ),
    (
        tb::psn_tracking_table::ID,
        tb::psn_tracking_table::NAME,
        Stage::Port,
    ),
    (
        tb::nexthop_table::ID,
        tb::nexthop_table::NAME,
        Stage::Nexthop,
    ),
    (
        tb::wcmp_group_table::ID,
        tb::wcmp_group_table::NAME,
        Stage::Group,
    ),
    (
        tb::multipath_mode_table::ID,
        tb::multipath_mode_table::NAME,
        Stage::Mode,
    ),
    (tb::ipv4_table::ID, tb::ipv4_table::NAME, Stage::Route),
    (tb::ipv6_table::ID, tb::ipv6_table::NAME, Stage::Route),
];

/// Refuses a P4Info whose tables are not those the typed entries were generated for (ids and
/// names), once per call rather than per entry.
fn check_pipeline(info: &P4Info) -> Result<(), MapError> {
    for (id, name, _) in WRITTEN {
        match info.table_by_id(id) {
            Ok(t) if t.name == name => {}
            Ok(t) => {
                return Err(MapError::Pipeline(format!(
                    "table {id:#x} is {}, not {name}",
                    t.name
                )));
            }
            Err(_) => return Err(MapError::Pipeline(format!("no table {name} ({id:#x})"))),
        }
    }
    Ok(())
}

/// All P4RT_TABLE entries of one switch, for the pipeline `info` describes (the embedded one:
/// [`pipeline_p4info`]).
pub fn entries(t: &Topology, info: &P4Info, sw: &SwitchDesired) -> Result<Entries, MapError> {
    check_pipeline(info)?;
    let mut out = Out {
        switch: &sw.name,
        entries: BTreeMap::new(),
    };
    port_entries(t, sw, &mut out)?;
    watch_entries(t, &mut out)?;
    for nh in sw.nexthops.values() {
        use tb::nexthop_table as n;
        let key = n::Key { nexthop_id: nh.id };
        let action = n::Action::SetNexthop {
            egress_port: PortName(&nh.port),
            dst_mac: nh.dst_mac.0,
            src_mac: nh.src_mac.0,
        };
        out.put(Stage::Nexthop, n::entry(&key, &action))?;
    }
    group_entries(sw, &mut out)?;
    for r in &sw.routes {
        out.put(Stage::Route, route_entry(r))?;
    }
    Ok(out.entries)
}

/// The entries of one switch as they are mapped.
struct Out<'s> {
    switch: &'s str,
    entries: Entries,
}

impl Out<'_> {
    fn put(&mut self, stage: Stage, w: Result<Wire, WireError>) -> Result<(), MapError> {
        let w = w.map_err(|source| MapError::Value {
            switch: self.switch.to_string(),
            source,
        })?;
        self.entries.insert(
            w.key,
            WireEntry {
                stage,
                fields: w.fields,
            },
        );
        Ok(())
    }
}

/// Every port's configuration, and PSN tracking on the host-facing ones (reordering and
/// retransmission counters).
fn port_entries(t: &Topology, sw: &SwitchDesired, out: &mut Out) -> Result<(), MapError> {
    for p in &sw.ports {
        use tb::port_config_table as pc;
        let key = pc::Key {
            port: PortName(&p.port),
        };
        let action = pc::Action::SetPortConfig {
            router_mac: p.router_mac.0,
        };
        out.put(Stage::Port, pc::entry(&key, &action))?;
    }
    if let Some(si) = t.switch_index(&sw.name) {
        use tb::psn_tracking_table as psn;
        let host_ports: Vec<u32> = t.switches[si]
            .ports
            .iter()
            .filter(|q| matches!(q.peer, Peer::Host { .. }))
            .map(|q| q.id)
            .collect();
        for p in sw.ports.iter().filter(|p| host_ports.contains(&p.port_id)) {
            let key = psn::Key {
                port: PortName(&p.port),
            };
            out.put(
                Stage::Port,
                psn::entry(&key, &psn::Action::EnablePsnTracking),
            )?;
        }
    }
    Ok(())
}

/// Watched flows (the intent's `telemetry.watch`): the same entries on every switch, so a
/// watched packet gets a postcard at every hop. IPv4 addresses are matched zero-extended to
/// 128 bits, as the pipeline's flow key holds them. Earlier flows win (higher priority).
fn watch_entries(t: &Topology, out: &mut Out) -> Result<(), MapError> {
    use tb::postcard_watch_table as pw;
    const _: () =
        assert!(tb::postcard_watch_table::SIZE as usize == weft_topology::MAX_WATCHED_FLOWS);
    let Some(tel) = &t.telemetry else {
        return Ok(());
    };
    let addr = |a: Option<IpAddr>| {
        a.map(|a| Ternary {
            value: match a {
                IpAddr::V4(v) => u128::from(u32::from(v)),
                IpAddr::V6(v) => u128::from(v),
            },
            mask: u128::MAX,
        })
    };
    let n = tel.watch.len() as u32;
    for (i, w) in tel.watch.iter().enumerate() {
        let key = pw::Key {
            src_addr: addr(w.src),
            dst_addr: addr(w.dst),
            ip_protocol: w.protocol.map(|p| Ternary {
                value: p,
                mask: 0xff,
            }),
            l4_dst_port: w.dst_port.map(|p| Ternary {
                value: p,
                mask: 0xffff,
            }),
            dst_qp: w.qp.map(|q| Ternary {
                value: q,
                mask: 0xff_ffff,
            }),
        };
        out.put(
            Stage::Port,
            pw::entry(&key, n - i as u32, &pw::Action::WatchPostcard),
        )?;
    }
    Ok(())
}

/// Every WCMP group with its members, and its multipath modes.
fn group_entries(sw: &SwitchDesired, out: &mut Out) -> Result<(), MapError> {
    use tb::wcmp_group_table as wg;
    // Port id → name (a port the switch does not list is written as its id in hex, which the
    // plugin also accepts).
    let port_names: BTreeMap<u32, &str> = sw.ports.iter().map(|p| (p.port_id, &*p.port)).collect();
    let hex_ports: BTreeMap<u32, String> = sw
        .groups
        .values()
        .flat_map(|g| &g.members)
        .filter(|m| !port_names.contains_key(&m.port_id))
        .map(|m| (m.port_id, format!("{:#x}", m.port_id)))
        .collect();
    let port_name = |id: u32| -> PortName<'_> {
        PortName(
            port_names
                .get(&id)
                .copied()
                .or_else(|| hex_ports.get(&id).map(String::as_str))
                .unwrap_or_default(),
        )
    };
    let mut members = Vec::new();
    for g in sw.groups.values() {
        members.clear();
        members.extend(g.members.iter().map(|m| Weighted {
            action: wg::Action::SetWcmpMember {
                egress_port: port_name(m.port_id),
                nexthop_id: m.nexthop_id,
            },
            weight: m.weight,
            watch_port: Some(port_name(m.port_id)),
        }));
        out.put(
            Stage::Group,
            wg::entry(
                &wg::Key {
                    wcmp_group_id: g.id,
                },
                &members,
            ),
        )?;
        mode_entries(g, out)?;
    }
    Ok(())
}

/// One entry per distinct mode of group `g`: a wildcard for the most common, exact classes for
/// the rest (of equally common modes, the last in (mode, gap) order is the wildcard).
fn mode_entries(g: &Group, out: &mut Out) -> Result<(), MapError> {
    use tb::multipath_mode_table as mm;
    let mut by_mode: BTreeMap<(u8, u32), Vec<u8>> = BTreeMap::new();
    for m in &g.modes {
        by_mode
            .entry((mode_code(m.mode), m.flowlet_gap_us))
            .or_default()
            .push(m.traffic_class);
    }
    let common = by_mode.iter().max_by_key(|(_, v)| v.len()).map(|(k, _)| *k);
    for ((mode, gap), tcs) in &by_mode {
        let action = mm::Action::SetMultipathMode {
            epoch: g.epoch,
            flowlet_gap_us: *gap,
            mode: *mode,
        };
        if Some((*mode, *gap)) == common {
            let key = mm::Key {
                wcmp_group_id: g.id,
                traffic_class: None,
            };
            out.put(Stage::Mode, mm::entry(&key, 1, &action))?;
        } else {
            for tc in tcs {
                let key = mm::Key {
                    wcmp_group_id: g.id,
                    traffic_class: Some(Ternary {
                        value: *tc,
                        mask: 7,
                    }),
                };
                out.put(Stage::Mode, mm::entry(&key, 10, &action))?;
            }
        }
    }
    Ok(())
}

/// A route's IPv4 or IPv6 LPM entry (also what `weft show routes` looks for on a switch).
pub fn route_entry(r: &Route) -> Result<Wire, WireError> {
    let prefix_len = r.prefix.prefix_len();
    match r.prefix.network() {
        IpAddr::V4(addr) => {
            use tb::ipv4_table as v4;
            let action = match r.target {
                Target::Nexthop(id) => v4::Action::SetNexthopId { nexthop_id: id },
                Target::Group(id) => v4::Action::SetWcmpGroupId { wcmp_group_id: id },
                Target::Drop => v4::Action::DropRoute,
            };
            let key = v4::Key {
                ipv4_dst: Lpm { addr, prefix_len },
            };
            v4::entry(&key, &action)
        }
        IpAddr::V6(addr) => {
            use tb::ipv6_table as v6;
            let action = match r.target {
                Target::Nexthop(id) => v6::Action::SetNexthopId { nexthop_id: id },
                Target::Group(id) => v6::Action::SetWcmpGroupId { wcmp_group_id: id },
                Target::Drop => v6::Action::DropRoute,
            };
            let key = v6::Key {
                ipv6_dst: Lpm { addr, prefix_len },
            };
            v6::entry(&key, &action)
        }
    }
}

/// The stage of an installed entry, by its SONiC table name (`FIXED_NEXTHOP_TABLE`): its
/// table's write rank, so deletes run in reverse dependency order; tables the pipeline does
/// not know (or that rank where the controller writes nothing) are deleted first.
pub fn stage_of_table(table: &str) -> Stage {
    contract::table_by_sonic_name(table)
        .and_then(|t| Stage::of_rank(t.write_rank))
        .unwrap_or(Stage::Route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_the_controller_writes_has_a_stage_of_its_write_rank() {
        for t in contract::tables() {
            if t.owner != contract::Owner::Controller {
                continue;
            }
            let stage = Stage::of_rank(t.write_rank);
            assert!(
                stage.is_some(),
                "{} (rank {}) has no Stage: add one",
                t.name,
                t.write_rank
            );
            assert_eq!(stage_of_table(t.sonic_name), stage.unwrap_or(Stage::Route));
        }
        for (id, _, stage) in WRITTEN {
            assert_eq!(
                contract::table(id).map(|t| t.write_rank),
                Some(stage.rank())
            );
        }
    }

    #[test]
    fn stages_order_as_their_ranks_and_keep_their_json_names() {
        let mut sorted = Stage::ALL;
        sorted.sort();
        assert_eq!(sorted, Stage::ALL);
        assert!(Stage::ALL.windows(2).all(|w| w[0].rank() < w[1].rank()));
        let names: Vec<String> = Stage::ALL
            .iter()
            .map(|s| serde_json::to_string(s).expect("json"))
            .collect();
        assert_eq!(
            names,
            [
                "\"Port\"",
                "\"Nexthop\"",
                "\"Group\"",
                "\"Mode\"",
                "\"Route\""
            ]
        );
        assert_eq!(stage_of_table("FIXED_NO_SUCH_TABLE"), Stage::Route);
        assert_eq!(
            stage_of_table(tb::psn_tracking_table::SONIC_NAME),
            Stage::Port
        );
    }

    #[test]
    fn a_p4info_of_another_pipeline_is_refused() {
        // Same ids, one table renamed: the typed entries would name the wrong table.
        let mut raw = pipeline_p4info().expect("p4info").raw().clone();
        for t in &mut raw.tables {
            if let Some(p) = t
                .preamble
                .as_mut()
                .filter(|p| p.id == tb::nexthop_table::ID)
            {
                p.name = "ingress.other.nexthop_table".into();
            }
        }
        let other = P4Info::new(raw).expect("still a P4Info");
        let err = check_pipeline(&other).expect_err("renamed table");
        assert!(
            err.to_string().contains("ingress.other.nexthop_table"),
            "{err}"
        );
        assert!(check_pipeline(&pipeline_p4info().expect("p4info")).is_ok());
    }
}
