//! Desired switch state → P4RT_TABLE entries in the pipeline's terms. Every P4 name comes from
//! the constants generated from the P4Info (`weft_p4`); every value is formatted by the shared
//! codec (`weft_appdb`), so the plugin reads exactly what is written here.

use std::collections::BTreeMap;

use weft_appdb::{Call, Encoder, Match, Value};
use weft_p4::{actions as a, constants as k, tables as tb};
use weft_p4rt::P4Info;
use weft_sonic_db::{FieldValues, P4rtEntry};
use weft_topology::{RoutingMode, Topology};

use super::{SwitchDesired, Target};

/// When an entry must be written relative to others: inserts in ascending stage, deletes in
/// descending (make before break).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Stage {
    Port = 0,
    Nexthop = 1,
    Group = 2,
    Mode = 3,
    Route = 4,
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
#[error("switch {switch}: {source}")]
pub struct MapError {
    pub switch: String,
    #[source]
    pub source: weft_appdb::CodecError,
}

/// The pipeline's P4Info, parsed once.
pub fn pipeline_p4info() -> Result<P4Info, weft_p4rt::Error> {
    P4Info::from_bytes(weft_p4::P4INFO_BINARY)
}

fn mode_code(m: RoutingMode) -> u128 {
    u128::from(match m {
        RoutingMode::Ecmp | RoutingMode::Wcmp => k::MULTIPATH_MODE_HASH,
        RoutingMode::Spray => k::MULTIPATH_MODE_SPRAY,
        RoutingMode::Adaptive => k::MULTIPATH_MODE_ADAPTIVE,
        RoutingMode::Flowlet => k::MULTIPATH_MODE_FLOWLET,
    })
}

/// All P4RT_TABLE entries of one switch.
pub fn entries(t: &Topology, info: &P4Info, sw: &SwitchDesired) -> Result<Entries, MapError> {
    let err = |source| MapError {
        switch: sw.name.clone(),
        source,
    };
    let enc = Encoder::new(info);
    let mut out = BTreeMap::new();
    let mut put = |stage: Stage, e: P4rtEntry| {
        let mut fields = e.to_fields();
        fields.sort();
        out.insert(e.key.to_table_key(), WireEntry { stage, fields });
    };
    let port_name = |id: u32| -> String {
        sw.ports
            .iter()
            .find(|p| p.port_id == id)
            .map_or_else(|| format!("{id:#x}"), |p| p.port.to_string())
    };

    for p in &sw.ports {
        let key = enc
            .key(
                tb::port_config_table::NAME,
                &[Match::Exact(
                    tb::port_config_table::fields::port::NAME,
                    Value::Port(p.port.to_string()),
                )],
                0,
            )
            .map_err(err)?;
        let call = Call {
            action: a::set_port_config::NAME,
            params: vec![(
                a::set_port_config::params::router_mac::NAME,
                Value::Mac(p.router_mac.0),
            )],
        };
        put(Stage::Port, enc.entry(key, &call).map_err(err)?);
    }
    // Host-facing ports track RoCE PSNs (reordering and retransmission counters).
    let swi = t.switch_index(&sw.name);
    for p in &sw.ports {
        let host_port = swi.is_some_and(|si| {
            t.switches[si]
                .ports
                .iter()
                .any(|q| q.id == p.port_id && matches!(q.peer, weft_topology::Peer::Host { .. }))
        });
        if host_port {
            let key = enc
                .key(
                    tb::psn_tracking_table::NAME,
                    &[Match::Exact(
                        tb::psn_tracking_table::fields::port::NAME,
                        Value::Port(p.port.to_string()),
                    )],
                    0,
                )
                .map_err(err)?;
            put(
                Stage::Port,
                enc.entry(
                    key,
                    &Call {
                        action: a::enable_psn_tracking::NAME,
                        params: vec![],
                    },
                )
                .map_err(err)?,
            );
        }
    }
    for nh in sw.nexthops.values() {
        let key = enc
            .key(
                tb::nexthop_table::NAME,
                &[Match::Exact(
                    tb::nexthop_table::fields::nexthop_id::NAME,
                    Value::Uint(nh.id.into()),
                )],
                0,
            )
            .map_err(err)?;
        let call = Call {
            action: a::set_nexthop::NAME,
            params: vec![
                (
                    a::set_nexthop::params::egress_port::NAME,
                    Value::Port(nh.port.to_string()),
                ),
                (
                    a::set_nexthop::params::dst_mac::NAME,
                    Value::Mac(nh.dst_mac.0),
                ),
                (
                    a::set_nexthop::params::src_mac::NAME,
                    Value::Mac(nh.src_mac.0),
                ),
            ],
        };
        put(Stage::Nexthop, enc.entry(key, &call).map_err(err)?);
    }
    for g in sw.groups.values() {
        let key = enc
            .key(
                tb::wcmp_group_table::NAME,
                &[Match::Exact(
                    tb::wcmp_group_table::fields::wcmp_group_id::NAME,
                    Value::Uint(g.id.into()),
                )],
                0,
            )
            .map_err(err)?;
        let members: Vec<(Call, u32, Option<String>)> = g
            .members
            .iter()
            .map(|m| {
                (
                    Call {
                        action: a::set_wcmp_member::NAME,
                        params: vec![
                            (
                                a::set_wcmp_member::params::nexthop_id::NAME,
                                Value::Uint(m.nexthop_id.into()),
                            ),
                            (
                                a::set_wcmp_member::params::egress_port::NAME,
                                Value::Port(port_name(m.port_id)),
                            ),
                        ],
                    },
                    m.weight,
                    Some(port_name(m.port_id)),
                )
            })
            .collect();
        put(Stage::Group, enc.group(key, &members).map_err(err)?);
        // One entry per distinct mode: a wildcard for the most common, exact classes for the rest.
        let mut by_mode: BTreeMap<(u128, u32), Vec<u8>> = BTreeMap::new();
        for m in &g.modes {
            by_mode
                .entry((mode_code(m.mode), m.flowlet_gap_us))
                .or_default()
                .push(m.traffic_class);
        }
        let common = by_mode.iter().max_by_key(|(_, v)| v.len()).map(|(k, _)| *k);
        for ((mode, gap), tcs) in &by_mode {
            let call = Call {
                action: a::set_multipath_mode::NAME,
                params: vec![
                    (
                        a::set_multipath_mode::params::mode::NAME,
                        Value::Uint(*mode),
                    ),
                    (
                        a::set_multipath_mode::params::flowlet_gap_us::NAME,
                        Value::Uint((*gap).into()),
                    ),
                    (
                        a::set_multipath_mode::params::epoch::NAME,
                        Value::Uint(g.epoch.into()),
                    ),
                ],
            };
            let gid = Match::Exact(
                tb::multipath_mode_table::fields::wcmp_group_id::NAME,
                Value::Uint(g.id.into()),
            );
            if Some((*mode, *gap)) == common {
                let key = enc
                    .key(tb::multipath_mode_table::NAME, &[gid], 1)
                    .map_err(err)?;
                put(Stage::Mode, enc.entry(key, &call).map_err(err)?);
            } else {
                for tc in tcs {
                    let key = enc
                        .key(
                            tb::multipath_mode_table::NAME,
                            &[
                                Match::Exact(
                                    tb::multipath_mode_table::fields::wcmp_group_id::NAME,
                                    Value::Uint(g.id.into()),
                                ),
                                Match::Ternary(
                                    tb::multipath_mode_table::fields::traffic_class::NAME,
                                    Value::Uint((*tc).into()),
                                    Value::Uint(7),
                                ),
                            ],
                            10,
                        )
                        .map_err(err)?;
                    put(Stage::Mode, enc.entry(key, &call).map_err(err)?);
                }
            }
        }
    }
    for r in &sw.routes {
        let (table, field, value) = match r.prefix {
            ipnet::IpNet::V4(n) => (
                tb::ipv4_table::NAME,
                tb::ipv4_table::fields::ipv4_dst::NAME,
                Value::Ipv4(n.network()),
            ),
            ipnet::IpNet::V6(n) => (
                tb::ipv6_table::NAME,
                tb::ipv6_table::fields::ipv6_dst::NAME,
                Value::Ipv6(n.network()),
            ),
        };
        let key = enc
            .key(
                table,
                &[Match::Lpm(field, value, u32::from(r.prefix.prefix_len()))],
                0,
            )
            .map_err(err)?;
        let call = match r.target {
            Target::Nexthop(id) => Call {
                action: a::set_nexthop_id::NAME,
                params: vec![(
                    a::set_nexthop_id::params::nexthop_id::NAME,
                    Value::Uint(id.into()),
                )],
            },
            Target::Group(id) => Call {
                action: a::set_wcmp_group_id::NAME,
                params: vec![(
                    a::set_wcmp_group_id::params::wcmp_group_id::NAME,
                    Value::Uint(id.into()),
                )],
            },
            Target::Drop => Call {
                action: a::drop_route::NAME,
                params: vec![],
            },
        };
        put(Stage::Route, enc.entry(key, &call).map_err(err)?);
    }
    Ok(out)
}

/// The stage of an installed entry, by its SONiC table name (`FIXED_NEXTHOP_TABLE`), so deletes
/// run in reverse dependency order; tables the pipeline does not know are deleted first.
pub fn stage_of_table(table: &str) -> Stage {
    use std::sync::OnceLock;
    static MAP: OnceLock<BTreeMap<String, Stage>> = OnceLock::new();
    let map = MAP.get_or_init(|| {
        [
            (tb::port_config_table::ALIAS, Stage::Port),
            (tb::psn_tracking_table::ALIAS, Stage::Port),
            (tb::nexthop_table::ALIAS, Stage::Nexthop),
            (tb::wcmp_group_table::ALIAS, Stage::Group),
            (tb::multipath_mode_table::ALIAS, Stage::Mode),
            (tb::ipv4_table::ALIAS, Stage::Route),
            (tb::ipv6_table::ALIAS, Stage::Route),
        ]
        .into_iter()
        .map(|(alias, stage)| {
            (
                weft_sonic_db::sonic_table_name(alias, weft_sonic_db::P4rtTableKind::Fixed),
                stage,
            )
        })
        .collect()
    });
    map.get(table).copied().unwrap_or(Stage::Route)
}
