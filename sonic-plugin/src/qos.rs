//! CONFIG_DB QoS rows → the pipeline tables the plugin owns. A pure function of a CONFIG_DB
//! snapshot, so a changed row simply yields a new desired set, diffed against the switch.
//!
//! ```text
//!   PORT_QOS_MAP|EthernetN dscp_to_tc_map ─► DSCP_TO_TC_MAP|<map> ─► qos_classify_table dscp → (tc, lossless)
//!                          pfc_enable "3,4" ─────────────────────────┘ lossless = tc ∈ pfc_enable (any port)
//!   QUEUE|EthernetN|q wred_profile ─► WRED_PROFILE ─► ecn_threshold_table (port, q) → kmin, kmax, pmax
//!   BUFFER_PG|EthernetN|q profile ─► BUFFER_PROFILE xon ─┐
//!   WEFT_ECN_ENVELOPE|EthernetN|q pause_threshold ───────┴► pfc_threshold_table (port, q) → xoff, xon, quanta
//!   PORT_QOS_MAP pfc_enable non-empty ─► clone session PFC_CLONE_SESSION_BASE + port → replica on port
//!   device id ─► switch_config_table default set_switch_config(switch_id)
//! ```
//!
//! Units: SONiC gives thresholds in bytes, BMv2 queues count packets. With `cell` = the port's
//! MTU (`PORT|EthernetN mtu`, or `--cell-bytes`) and `scale` = `--bmv2-queue-scale`:
//!
//! ```text
//!   packets_up(b)   = ceil(b × scale / cell)     Kmin            (mark no earlier than asked)
//!   packets_down(b) = floor(b × scale / cell)    Kmax, xoff      (act no later than asked)
//!   then: Kmax ≤ depth − 2, xoff ≤ depth − 1, Kmin < Kmax, Kmax < xoff (ECN before PFC),
//!         xon = xoff − max(1, packets_up(BUFFER_PROFILE xon)), at least 0
//! ```
//!
//! `depth` is `--queue-depth` (BMv2's default 64). The pause threshold is the controller's
//! `WEFT_ECN_ENVELOPE ... pause_threshold` (port buffer minus headroom); without it the
//! profile's `xoff` stands in. `pmax_percent` is `green_drop_probability`.

use std::collections::{BTreeMap, BTreeSet};

use weft_appdb::PortMap;
use weft_p4::{actions as a, constants, tables as t};
use weft_p4rt::proto::p4::v1::{Entity, TableEntry, entity};
use weft_p4rt::{P4Info, clone_session};

use crate::config::QueueModel;
use crate::objects::{ObjKey, Objects};

/// CONFIG_DB rows by table, then key.
pub type ConfigTables = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;

/// The CONFIG_DB tables the plugin follows.
pub const CONFIG_TABLES: &[&str] = &[
    "PORT",
    "PORT_QOS_MAP",
    "DSCP_TO_TC_MAP",
    "WRED_PROFILE",
    "QUEUE",
    "BUFFER_PROFILE",
    "BUFFER_PG",
    "PFC_WD",
    "WEFT_ECN_ENVELOPE",
];

/// SONiC's default MTU when a PORT row has none.
pub const DEFAULT_MTU: u32 = 9100;

/// A problem in the QoS rows; the rest is still applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosWarning(pub String);

#[derive(Debug, Clone, Default)]
pub struct ConfigView {
    pub tables: ConfigTables,
}

impl ConfigView {
    pub fn rows(&self, table: &str) -> impl Iterator<Item = (&String, &BTreeMap<String, String>)> {
        self.tables.get(table).into_iter().flatten()
    }

    pub fn field(&self, table: &str, key: &str, field: &str) -> Option<&str> {
        self.tables
            .get(table)?
            .get(key)?
            .get(field)
            .map(String::as_str)
    }

    /// Port name → P4Runtime port id, from `PORT|EthernetN id`.
    pub fn port_map(&self) -> (PortMap, Vec<QosWarning>) {
        let mut map = PortMap::default();
        let mut warn = Vec::new();
        for (name, f) in self.rows("PORT") {
            match f.get("id").map(|v| v.parse::<u32>()) {
                Some(Ok(id)) if (1..512).contains(&id) => {
                    map.by_name.insert(name.clone(), id);
                }
                Some(_) => warn.push(QosWarning(format!(
                    "PORT|{name} id {:?} is not a port number in 1..511",
                    f.get("id")
                ))),
                None => {}
            }
        }
        (map, warn)
    }

    /// Traffic classes with PFC enabled on `port`.
    pub fn pfc_enabled(&self, port: &str) -> BTreeSet<u8> {
        self.field("PORT_QOS_MAP", port, "pfc_enable")
            .map(parse_class_list)
            .unwrap_or_default()
    }

    fn mtu(&self, port: &str) -> u32 {
        self.field("PORT", port, "mtu")
            .and_then(|m| m.parse().ok())
            .filter(|m| *m > 0)
            .unwrap_or(DEFAULT_MTU)
    }
}

/// "3,4" or "3-4" → {3, 4}; classes outside 0..7 are ignored.
pub fn parse_class_list(s: &str) -> BTreeSet<u8> {
    let mut out = BTreeSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(lo), Ok(hi)) = (lo.trim().parse::<u8>(), hi.trim().parse::<u8>()) {
            for c in lo..=hi.min(7) {
                out.insert(c);
            }
        }
    }
    out
}

/// `EthernetN|3` or `EthernetN|3-4` → (port, classes).
fn port_and_classes(key: &str) -> Option<(&str, BTreeSet<u8>)> {
    let (port, classes) = key.split_once('|')?;
    let c = parse_class_list(classes);
    (!c.is_empty()).then_some((port, c))
}

fn parse_u64(v: Option<&String>) -> Option<u64> {
    v.and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|x| x.is_finite() && *x >= 0.0)
        .map(|x| x as u64)
}

fn packets_up(bytes: u64, scale: f64, cell: u32) -> u32 {
    ((bytes as f64 * scale) / f64::from(cell))
        .ceil()
        .min(f64::from(u32::MAX)) as u32
}

fn packets_down(bytes: u64, scale: f64, cell: u32) -> u32 {
    ((bytes as f64 * scale) / f64::from(cell))
        .floor()
        .min(f64::from(u32::MAX)) as u32
}

/// ECN and PFC thresholds of one (port, queue), in packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub ecn: Option<(u32, u32, u32)>,
    pub pfc: Option<(u32, u32)>,
}

/// Converts one (port, queue)'s byte thresholds (see the module doc).
pub fn convert(
    model: &QueueModel,
    cell: u32,
    wred: Option<(u64, u64, u32)>,
    pause: Option<(u64, u64)>,
) -> Thresholds {
    let depth = model.queue_depth.max(4);
    let pfc = pause.map(|(pause_bytes, xon_bytes)| {
        let xoff = packets_down(pause_bytes, model.scale, cell).clamp(2, depth - 1);
        let hyst = packets_up(xon_bytes, model.scale, cell).max(1);
        (xoff, xoff.saturating_sub(hyst))
    });
    let ecn = wred.map(|(min_b, max_b, pmax)| {
        let mut kmax = packets_down(max_b, model.scale, cell).clamp(1, depth - 2);
        if let Some((xoff, _)) = pfc {
            kmax = kmax.min(xoff.saturating_sub(1)).max(1);
        }
        let kmin = packets_up(min_b, model.scale, cell).min(kmax - 1);
        (kmin, kmax, pmax.min(100))
    });
    Thresholds { ecn, pfc }
}

/// What the QoS rows ask of the pipeline.
#[derive(Debug, Clone, Default)]
pub struct QosPlan {
    pub objects: Objects,
    pub warnings: Vec<QosWarning>,
    /// (port, class) pairs with PFC on: what the watchdog watches.
    pub lossless: BTreeSet<(String, u8)>,
}

fn entity_of(te: TableEntry) -> Entity {
    Entity {
        entity: Some(entity::Entity::TableEntry(te)),
    }
}

fn put(out: &mut Objects, e: Entity) {
    if let Some(k) = ObjKey::of(&e) {
        out.insert(k, e);
    }
}

/// The switch_config_table default action: switch_id = device id.
pub fn switch_config(info: &P4Info, device_id: u64) -> Result<Entity, weft_p4rt::Error> {
    let p = &a::set_switch_config::params::switch_id::NAME;
    let call = info
        .action_call(a::set_switch_config::NAME)?
        .param(p, (device_id & 0xffff_ffff) as u32)?
        .param(a::set_switch_config::params::postcard_sample_n::NAME, 0u32)?
        .param(a::set_switch_config::params::postcard_session::NAME, 0u32)?
        .param(a::set_switch_config::params::histogram_shift::NAME, 0u8)?;
    Ok(entity_of(
        info.table_entry(t::switch_config_table::NAME)?
            .default_entry()
            .action(call)?
            .build()?,
    ))
}

/// The desired QoS objects for `view`.
pub fn plan(
    info: &P4Info,
    view: &ConfigView,
    model: &QueueModel,
    device_id: u64,
) -> Result<QosPlan, weft_p4rt::Error> {
    let mut out = QosPlan::default();
    let (ports, warn) = view.port_map();
    out.warnings.extend(warn);
    put(&mut out.objects, switch_config(info, device_id)?);

    // Classification: the pipeline has one DSCP table, so one map for the switch (the one most
    // ports name), and a class is lossless if any port enables PFC on it.
    let mut map_votes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut lossless_classes = BTreeSet::new();
    for (port, f) in view.rows("PORT_QOS_MAP") {
        if let Some(m) = f.get("dscp_to_tc_map") {
            *map_votes.entry(m.as_str()).or_default() += 1;
        }
        let pfc = view.pfc_enabled(port);
        for c in &pfc {
            out.lossless.insert((port.clone(), *c));
        }
        lossless_classes.extend(pfc);
        if !view.pfc_enabled(port).is_empty() {
            match ports.id(port) {
                Some(id) => {
                    let session = constants::PFC_CLONE_SESSION_BASE + id;
                    put(
                        &mut out.objects,
                        Entity {
                            entity: Some(entity::Entity::PacketReplicationEngineEntry(
                                clone_session(session, [(id, 1)], 0, 0),
                            )),
                        },
                    );
                }
                None => out.warnings.push(QosWarning(format!(
                    "PORT_QOS_MAP|{port}: no PORT|{port} id, no PFC clone session"
                ))),
            }
        }
    }
    if map_votes.len() > 1 {
        out.warnings.push(QosWarning(format!(
            "ports name different DSCP_TO_TC_MAPs ({}); the pipeline has one, using the most common",
            map_votes.keys().copied().collect::<Vec<_>>().join(", ")
        )));
    }
    let map_name = map_votes
        .iter()
        .max_by_key(|(name, n)| (**n, std::cmp::Reverse(**name)))
        .map(|(n, _)| n.to_string())
        .or_else(|| {
            let maps: Vec<&String> = view.rows("DSCP_TO_TC_MAP").map(|(k, _)| k).collect();
            (maps.len() == 1).then(|| maps[0].clone())
        });
    if let Some(map) = map_name {
        let rows = view.tables.get("DSCP_TO_TC_MAP").and_then(|m| m.get(&map));
        match rows {
            None => out.warnings.push(QosWarning(format!(
                "DSCP_TO_TC_MAP|{map} is named by PORT_QOS_MAP but does not exist"
            ))),
            Some(rows) => {
                for (dscp, tc) in rows {
                    let (Ok(d), Ok(c)) = (dscp.parse::<u8>(), tc.parse::<u8>()) else {
                        out.warnings.push(QosWarning(format!(
                            "DSCP_TO_TC_MAP|{map}: {dscp:?} → {tc:?} is not dscp 0..63 → class 0..7"
                        )));
                        continue;
                    };
                    if d > 63 || c > 7 {
                        out.warnings.push(QosWarning(format!(
                            "DSCP_TO_TC_MAP|{map}: {d} → {c} out of range"
                        )));
                        continue;
                    }
                    let call = info
                        .action_call(a::set_traffic_class::NAME)?
                        .param(a::set_traffic_class::params::traffic_class::NAME, c)?
                        .param(
                            a::set_traffic_class::params::lossless::NAME,
                            u8::from(lossless_classes.contains(&c)),
                        )?;
                    let te = info
                        .table_entry(t::qos_classify_table::NAME)?
                        .exact(t::qos_classify_table::fields::dscp::NAME, d)?
                        .action(call)?
                        .build()?;
                    put(&mut out.objects, entity_of(te));
                }
            }
        }
    }

    // Thresholds per (port, queue).
    let mut wred: BTreeMap<(String, u8), (u64, u64, u32)> = BTreeMap::new();
    for (key, f) in view.rows("QUEUE") {
        let Some((port, classes)) = port_and_classes(key) else {
            continue;
        };
        let Some(profile) = f.get("wred_profile") else {
            continue;
        };
        let Some(p) = view.tables.get("WRED_PROFILE").and_then(|m| m.get(profile)) else {
            out.warnings.push(QosWarning(format!(
                "QUEUE|{key}: WRED_PROFILE|{profile} does not exist"
            )));
            continue;
        };
        if p.get("ecn").is_none_or(|e| e == "ecn_none") {
            continue;
        }
        let (Some(min), Some(max)) = (
            parse_u64(p.get("green_min_threshold")),
            parse_u64(p.get("green_max_threshold")),
        ) else {
            out.warnings.push(QosWarning(format!(
                "WRED_PROFILE|{profile}: green_min_threshold/green_max_threshold missing or not numbers"
            )));
            continue;
        };
        let pmax = parse_u64(p.get("green_drop_probability")).unwrap_or(100) as u32;
        for c in classes {
            wred.insert((port.to_string(), c), (min, max, pmax));
        }
    }
    let mut pause: BTreeMap<(String, u8), (u64, u64)> = BTreeMap::new();
    for (key, f) in view.rows("BUFFER_PG") {
        let Some((port, classes)) = port_and_classes(key) else {
            continue;
        };
        let enabled = view.pfc_enabled(port);
        let Some(profile) = f.get("profile") else {
            continue;
        };
        let Some(p) = view
            .tables
            .get("BUFFER_PROFILE")
            .and_then(|m| m.get(profile))
        else {
            out.warnings.push(QosWarning(format!(
                "BUFFER_PG|{key}: BUFFER_PROFILE|{profile} does not exist"
            )));
            continue;
        };
        for c in classes.into_iter().filter(|c| enabled.contains(c)) {
            let envelope = view
                .field(
                    "WEFT_ECN_ENVELOPE",
                    &format!("{port}|{c}"),
                    "pause_threshold",
                )
                .and_then(|v| v.parse::<u64>().ok());
            let Some(threshold) = envelope.or_else(|| parse_u64(p.get("xoff"))) else {
                out.warnings.push(QosWarning(format!(
                    "BUFFER_PROFILE|{profile}: no xoff and no WEFT_ECN_ENVELOPE|{port}|{c} pause_threshold"
                )));
                continue;
            };
            let xon = parse_u64(p.get("xon")).unwrap_or(0);
            pause.insert((port.to_string(), c), (threshold, xon));
        }
    }
    let queues: BTreeSet<(String, u8)> = wred.keys().chain(pause.keys()).cloned().collect();
    for (port, q) in queues {
        let Some(id) = ports.id(&port) else {
            out.warnings.push(QosWarning(format!(
                "{port}: thresholds configured but no PORT|{port} id"
            )));
            continue;
        };
        let cell = model.cell_bytes.unwrap_or_else(|| view.mtu(&port));
        let th = convert(
            model,
            cell,
            wred.get(&(port.clone(), q)).copied(),
            pause.get(&(port.clone(), q)).copied(),
        );
        if let Some((kmin, kmax, pmax)) = th.ecn {
            let call = info
                .action_call(a::set_ecn_thresholds::NAME)?
                .param(a::set_ecn_thresholds::params::kmin::NAME, kmin)?
                .param(a::set_ecn_thresholds::params::kmax::NAME, kmax)?
                .param(a::set_ecn_thresholds::params::pmax_percent::NAME, pmax)?;
            let te = info
                .table_entry(t::ecn_threshold_table::NAME)?
                .exact(t::ecn_threshold_table::fields::port::NAME, id)?
                .exact(t::ecn_threshold_table::fields::queue::NAME, q)?
                .action(call)?
                .build()?;
            put(&mut out.objects, entity_of(te));
        }
        if let Some((xoff, xon)) = th.pfc {
            let call = info
                .action_call(a::set_pfc_thresholds::NAME)?
                .param(a::set_pfc_thresholds::params::xoff::NAME, xoff)?
                .param(a::set_pfc_thresholds::params::xon::NAME, xon)?
                .param(
                    a::set_pfc_thresholds::params::quanta::NAME,
                    model.pfc_quanta,
                )?;
            let te = info
                .table_entry(t::pfc_threshold_table::NAME)?
                .exact(t::pfc_threshold_table::fields::port::NAME, id)?
                .exact(t::pfc_threshold_table::fields::priority::NAME, q)?
                .action(call)?
                .build()?;
            put(&mut out.objects, entity_of(te));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Row<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

    fn view(rows: &[Row]) -> ConfigView {
        let mut v = ConfigView::default();
        for (t, k, f) in rows {
            v.tables.entry(t.to_string()).or_default().insert(
                k.to_string(),
                f.iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect(),
            );
        }
        v
    }

    #[test]
    fn byte_thresholds_become_packets_rounded_toward_acting_early_and_ordered() {
        let m = QueueModel {
            scale: 1.0,
            queue_depth: 1000,
            ..QueueModel::default()
        };
        // README example: 400 KB / 1600 KB at 4096-byte cells → Kmin 98, Kmax 390.
        let th = convert(&m, 4096, Some((400_000, 1_600_000, 20)), None);
        assert_eq!(th.ecn, Some((98, 390, 20)));
        // With a pause threshold under Kmax, ECN still acts first.
        let th = convert(
            &m,
            4096,
            Some((400_000, 1_600_000, 20)),
            Some((800_000, 40_960)),
        );
        assert_eq!(th.pfc, Some((195, 185)));
        assert_eq!(th.ecn, Some((98, 194, 20)));
    }

    #[test]
    fn bmv2_scale_and_queue_depth_keep_thresholds_inside_the_queue() {
        let m = QueueModel {
            scale: 0.05,
            queue_depth: 64,
            ..QueueModel::default()
        };
        let th = convert(
            &m,
            9100,
            Some((400_000, 1_600_000, 20)),
            Some((20_000_000, 40_000)),
        );
        let (kmin, kmax, _) = th.ecn.expect("ecn");
        let (xoff, xon) = th.pfc.expect("pfc");
        assert!(
            kmin < kmax && kmax < xoff && xoff < 64 && xon < xoff,
            "{th:?}"
        );
        assert_eq!((kmin, kmax), (3, 8));
    }

    #[test]
    fn class_lists_and_ranges_parse() {
        assert_eq!(parse_class_list("3,4"), [3, 4].into());
        assert_eq!(parse_class_list("3-5"), [3, 4, 5].into());
        assert_eq!(parse_class_list("x, 9, 2"), [2].into());
    }

    #[test]
    fn qos_rows_become_classify_ecn_pfc_entries_and_clone_sessions() {
        let info = crate::pipeline::weft_p4info().expect("p4info");
        let v = view(&[
            ("PORT", "Ethernet0", &[("id", "1"), ("mtu", "4096")]),
            ("PORT", "Ethernet4", &[("id", "2"), ("mtu", "4096")]),
            ("DSCP_TO_TC_MAP", "WEFT", &[("26", "3"), ("0", "0")]),
            (
                "PORT_QOS_MAP",
                "Ethernet0",
                &[("dscp_to_tc_map", "WEFT"), ("pfc_enable", "3")],
            ),
            (
                "WRED_PROFILE",
                "W",
                &[
                    ("ecn", "ecn_all"),
                    ("green_min_threshold", "40960"),
                    ("green_max_threshold", "163840"),
                    ("green_drop_probability", "20"),
                ],
            ),
            ("QUEUE", "Ethernet0|3", &[("wred_profile", "W")]),
            ("QUEUE", "Ethernet4|3", &[("wred_profile", "NOPE")]),
            (
                "BUFFER_PROFILE",
                "P",
                &[("xon", "8192"), ("xoff", "204800"), ("size", "1")],
            ),
            ("BUFFER_PG", "Ethernet0|3", &[("profile", "P")]),
        ]);
        let p = plan(&info, &v, &QueueModel::default(), 7).expect("plan");
        let tables: Vec<u32> = p.objects.keys().filter_map(ObjKey::table_id).collect();
        let count = |id: u32| tables.iter().filter(|t| **t == id).count();
        assert_eq!(count(t::qos_classify_table::ID), 2);
        assert_eq!(count(t::ecn_threshold_table::ID), 1);
        assert_eq!(count(t::pfc_threshold_table::ID), 1);
        assert_eq!(count(t::switch_config_table::ID), 1);
        assert!(p.objects.contains_key(&ObjKey::CloneSession {
            session_id: constants::PFC_CLONE_SESSION_BASE + 1
        }));
        assert_eq!(p.lossless, [("Ethernet0".to_string(), 3)].into());
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert!(p.warnings[0].0.contains("WRED_PROFILE|NOPE"));
    }
}
