//! The pipeline tables the plugin derives from CONFIG_DB's QoS rows (through
//! [`SwitchIntent`]): a pure function, so a changed row simply yields a new desired set,
//! diffed against the switch. ECN thresholds are the tuner's ([`crate::tuning`]), which yields
//! the static values when tuning is off.
//!
//! ```text
//!   device id, hash seed, dscp map + lossless classes, watchdog ports
//!                                  ─► switch_config_table default set_switch_config
//!   (port, q) ECN (the tuner's) and/or pause threshold, xon
//!                                  ─► queue_config_table (port, q) → set_queue_config(_pfc)
//!   histogram shift                ─► queue_config_table default queue_config_default
//!   ports with PFC on ─► clone session PFC_CLONE_SESSION_BASE + port → replica on port
//! ```
//!
//! The pipeline reads the DSCP map from the switch config's parameters (4 bits per DSCP:
//! lossless << 3 | class, and a bit per mapped DSCP) rather than from a table: one table hit
//! less per packet. A queue's ECN and PFC settings share its one queue_config_table entry,
//! which also carries the queue's counter indices (computed here once, not per packet).
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
//! `depth` is `--queue-depth` (BMv2's default 64).

use std::collections::{BTreeMap, BTreeSet};

use weft_p4::{actions as a, constants, tables as t};
use weft_p4rt::proto::p4::v1::{Entity, entity};
use weft_p4rt::{P4Info, clone_session};

use crate::config::QueueModel;
use crate::intent::SwitchIntent;
use crate::objects::{ObjKey, Objects, bit_string, entity_of};

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
pub struct PacketThresholds {
    pub ecn: Option<(u32, u32, u32)>,
    pub pfc: Option<(u32, u32)>,
}

/// Converts one (port, queue)'s byte thresholds (see the module doc).
pub fn convert(
    model: &QueueModel,
    cell: u32,
    wred: Option<(u64, u64, u32)>,
    pause: Option<(u64, u64)>,
) -> PacketThresholds {
    let depth = model.queue_depth.max(4);
    let pfc = pause.map(|(pause_bytes, xon_bytes)| {
        // The headroom stays free above xoff: what arrives while the PAUSE takes effect.
        let top = (depth - 1).saturating_sub(model.pfc_headroom).max(2);
        let xoff = packets_down(pause_bytes, model.scale, cell).clamp(2, top);
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
    PacketThresholds { ecn, pfc }
}

/// The switch-wide settings: switch id, hash seed, postcard sampling and session, histogram
/// shift, and the egress ports with `pfc_watchdog_table` entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwitchSettings {
    pub device_id: u64,
    pub hash_seed: u32,
    pub postcard_sample_n: u32,
    pub postcard_session: u32,
    pub histogram_shift: u8,
    pub watchdog_ports: BTreeSet<u32>,
}

/// ECN thresholds in packets (kmin, kmax, pmax percent) by (port id, queue): the tuner's.
pub type EcnByQueue = BTreeMap<(u32, u8), (u32, u32, u32)>;

pub(crate) fn put(out: &mut Objects, e: Entity) {
    if let Some(k) = ObjKey::of(&e) {
        out.insert(k, e);
    }
}

/// `dscp_class_map` and `dscp_mapped` of `set_switch_config` (see `p4/include/qos.p4`):
/// nibble d = lossless << 3 | class of DSCP d; bit d = DSCP d is mapped. DSCPs above 63 and
/// classes above 7 cannot be expressed and are left out (the intent reader warns of them).
pub fn dscp_map(dscp: &BTreeMap<u8, u8>, lossless: &BTreeSet<u8>) -> (Vec<u8>, Vec<u8>) {
    let map_bits = a::set_switch_config::params::dscp_class_map::BITWIDTH;
    let mapped_bits = a::set_switch_config::params::dscp_mapped::BITWIDTH;
    let mut map = vec![0u8; map_bits.div_ceil(8) as usize];
    let mut mapped = Vec::new();
    for (&d, &c) in dscp.iter().filter(|(d, c)| **d < 64 && **c < 8) {
        let nibble = (u8::from(lossless.contains(&c)) << 3) | c;
        let bit = 4 * u32::from(d);
        let byte = map.len() - 1 - (bit / 8) as usize;
        map[byte] |= nibble << (bit % 8);
        mapped.push(u32::from(d));
    }
    (map, bit_string(mapped, mapped_bits))
}

/// The switch_config_table default action.
pub fn switch_config(
    info: &P4Info,
    s: &SwitchSettings,
    dscp: &BTreeMap<u8, u8>,
    lossless: &BTreeSet<u8>,
) -> Result<Entity, weft_p4rt::Error> {
    let (map, mapped) = dscp_map(dscp, lossless);
    let call = info
        .action_call(a::set_switch_config::NAME)?
        .param(
            a::set_switch_config::params::switch_id::NAME,
            (s.device_id & 0xffff_ffff) as u32,
        )?
        .param(
            a::set_switch_config::params::postcard_sample_n::NAME,
            s.postcard_sample_n,
        )?
        .param(
            a::set_switch_config::params::postcard_session::NAME,
            s.postcard_session,
        )?
        .param(a::set_switch_config::params::hash_seed::NAME, s.hash_seed)?
        .param(a::set_switch_config::params::dscp_class_map::NAME, map)?
        .param(a::set_switch_config::params::dscp_mapped::NAME, mapped)?
        .param(
            a::set_switch_config::params::watchdog_ports::NAME,
            bit_string(
                s.watchdog_ports.iter().copied(),
                a::set_switch_config::params::watchdog_ports::BITWIDTH,
            ),
        )?;
    Ok(entity_of(
        info.table_entry(t::switch_config_table::NAME)?
            .default_entry()
            .action(call)?
            .build()?,
    ))
}

/// The queue_config_table default action: queues without an entry are counted and sampled
/// with this histogram shift, no ECN, no PFC.
pub fn queue_config_default(
    info: &P4Info,
    histogram_shift: u8,
) -> Result<Entity, weft_p4rt::Error> {
    let call = info.action_call(a::queue_config_default::NAME)?.param(
        a::queue_config_default::params::histogram_shift::NAME,
        histogram_shift,
    )?;
    Ok(entity_of(
        info.table_entry(t::queue_config_table::NAME)?
            .default_entry()
            .action(call)?
            .build()?,
    ))
}

/// The queue_config_table entry of one (port, queue) with ECN and/or PFC.
fn queue_config(
    info: &P4Info,
    port: u32,
    queue: u8,
    histogram_shift: u8,
    ecn: Option<(u32, u32, u32)>,
    pfc: Option<(u32, u32, u16)>,
) -> Result<Entity, weft_p4rt::Error> {
    let queues = crate::counters::QUEUES;
    let buckets = weft_sonic_schema::counters::HIST_BUCKETS as u32;
    let (kmin, kmax, pmax) = ecn.unwrap_or((0, 0, 0));
    let enabled = u8::from(ecn.is_some());
    let call = match pfc {
        None => {
            use a::set_queue_config::params as p;
            info.action_call(a::set_queue_config::NAME)?
                .param(p::port_index::NAME, port)?
                .param(p::queue_index::NAME, port * queues + u32::from(queue))?
                .param(p::histogram_base::NAME, port * buckets)?
                .param(p::histogram_shift::NAME, histogram_shift)?
                .param(p::ecn_enabled::NAME, enabled)?
                .param(p::kmin::NAME, kmin)?
                .param(p::kmax::NAME, kmax)?
                .param(p::pmax_percent::NAME, pmax)?
        }
        Some((xoff, xon, quanta)) => {
            use a::set_queue_config_pfc::params as p;
            info.action_call(a::set_queue_config_pfc::NAME)?
                .param(p::port_index::NAME, port)?
                .param(p::queue_index::NAME, port * queues + u32::from(queue))?
                .param(p::histogram_base::NAME, port * buckets)?
                .param(p::histogram_shift::NAME, histogram_shift)?
                .param(p::ecn_enabled::NAME, enabled)?
                .param(p::kmin::NAME, kmin)?
                .param(p::kmax::NAME, kmax)?
                .param(p::pmax_percent::NAME, pmax)?
                .param(p::xoff::NAME, xoff)?
                .param(p::xon::NAME, xon)?
                .param(p::quanta::NAME, quanta)?
        }
    };
    Ok(entity_of(
        info.table_entry(t::queue_config_table::NAME)?
            .exact(t::queue_config_table::fields::port::NAME, port)?
            .exact(t::queue_config_table::fields::queue::NAME, queue)?
            .action(call)?
            .build()?,
    ))
}

/// The desired QoS objects for `intent`, with the tuner's ECN thresholds `ecn`.
pub fn objects(
    info: &P4Info,
    intent: &SwitchIntent,
    model: &QueueModel,
    settings: &SwitchSettings,
    ecn: &EcnByQueue,
) -> Result<Objects, weft_p4rt::Error> {
    let mut out = Objects::new();
    put(
        &mut out,
        switch_config(info, settings, &intent.dscp, &intent.lossless_classes)?,
    );
    put(
        &mut out,
        queue_config_default(info, settings.histogram_shift)?,
    );
    for port in &intent.pfc_ports {
        if let Some(id) = intent.ports.id(port) {
            let session = constants::PFC_CLONE_SESSION_BASE + id;
            put(
                &mut out,
                Entity {
                    entity: Some(entity::Entity::PacketReplicationEngineEntry(clone_session(
                        session,
                        [(id, 1)],
                        0,
                        0,
                    ))),
                },
            );
        }
    }
    let mut pfc: BTreeMap<(u32, u8), (u32, u32, u16)> = BTreeMap::new();
    for ((_, q), qi) in &intent.queues {
        let (Some(id), Some(pause)) = (qi.port_id, qi.pause) else {
            continue;
        };
        if let Some((xoff, xon)) = convert(model, qi.cell, None, Some(pause)).pfc {
            pfc.insert((id, *q), (xoff, xon, model.pfc_quanta));
        }
    }
    let queues: BTreeSet<(u32, u8)> = pfc.keys().chain(ecn.keys()).copied().collect();
    for (id, q) in queues {
        put(
            &mut out,
            queue_config(
                info,
                id,
                q,
                settings.histogram_shift,
                ecn.get(&(id, q)).copied(),
                pfc.get(&(id, q)).copied(),
            )?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intent::tests::intent;
    use weft_p4rt::proto::p4::v1::TableEntry;

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
    fn the_pausing_plugins_headroom_stays_free_above_xoff_and_ecn_stays_below() {
        let m = QueueModel {
            scale: 1.0,
            queue_depth: 64,
            pfc_headroom: 20,
            ..QueueModel::default()
        };
        // A pause threshold past the queue's end: xoff at 64 - 1 - 20, not at 63.
        let th = convert(
            &m,
            9100,
            Some((400_000, 1_600_000, 20)),
            Some((10_000_000, 40_000)),
        );
        assert_eq!(th.pfc, Some((43, 38)));
        let (kmin, kmax, _) = th.ecn.expect("ecn");
        assert!(kmin < kmax && kmax < 43, "{th:?}");
        // Without headroom (the switch pauses by itself) the queue's end bounds it.
        let m0 = QueueModel {
            pfc_headroom: 0,
            ..m
        };
        assert_eq!(
            convert(&m0, 9100, None, Some((10_000_000, 40_000))).pfc,
            Some((63, 58))
        );
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
    fn qos_rows_become_the_switch_dscp_map_queue_entries_and_clone_sessions() {
        let info = crate::pipeline::weft_p4info().expect("p4info");
        let port = |id: &'static str| -> [(&'static str, &'static str); 4] {
            [
                ("id", id),
                ("mtu", "4096"),
                ("speed", "100000"),
                ("admin_status", "up"),
            ]
        };
        let p0 = port("1");
        let p4 = port("2");
        let qos = [
            ("dscp_to_tc_map", "WEFT"),
            ("tc_to_queue_map", "WEFT"),
            ("tc_to_pg_map", "WEFT"),
            ("pfc_enable", "3"),
        ];
        let wred = [
            ("ecn", "ecn_all"),
            ("wred_green_enable", "true"),
            ("green_min_threshold", "40960"),
            ("green_max_threshold", "163840"),
            ("green_drop_probability", "20"),
        ];
        let prof = [
            ("pool", "p"),
            ("xon", "8192"),
            ("xoff", "204800"),
            ("size", "1"),
            ("dynamic_th", "0"),
        ];
        let rows: &crate::intent::tests::Rows = &[
            ("PORT", "Ethernet0", &p0),
            ("PORT", "Ethernet4", &p4),
            ("DSCP_TO_TC_MAP", "WEFT", &[("26", "3"), ("0", "0")]),
            ("PORT_QOS_MAP", "Ethernet0", &qos),
            ("WRED_PROFILE", "W", &wred),
            ("QUEUE", "Ethernet0|3", &[("wred_profile", "W")]),
            ("QUEUE", "Ethernet4|3", &[("wred_profile", "NOPE")]),
            ("BUFFER_PROFILE", "P", &prof),
            ("BUFFER_PG", "Ethernet0|3", &[("profile", "P")]),
        ];
        let i = intent(rows, &QueueModel::default());
        let settings = SwitchSettings {
            device_id: 7,
            ..Default::default()
        };
        let objs = objects(
            &info,
            &i,
            &QueueModel::default(),
            &settings,
            &EcnByQueue::new(),
        )
        .expect("objects");
        let tables: Vec<u32> = objs.keys().filter_map(ObjKey::table_id).collect();
        let count = |id: u32| tables.iter().filter(|t| **t == id).count();
        // The PFC queue's entry and the default; no ECN values were given (they are the tuner's).
        assert_eq!(count(t::queue_config_table::ID), 2);
        assert_eq!(count(t::switch_config_table::ID), 1);
        let queue_entry = |objs: &Objects| -> TableEntry {
            objs.values()
                .find_map(|e| match &e.entity {
                    Some(entity::Entity::TableEntry(te))
                        if te.table_id == t::queue_config_table::ID && !te.is_default_action =>
                    {
                        Some(te.clone())
                    }
                    _ => None,
                })
                .expect("queue entry")
        };
        let action_id = |te: &TableEntry| match te.action.as_ref().and_then(|a| a.r#type.as_ref()) {
            Some(weft_p4rt::proto::p4::v1::table_action::Type::Action(a)) => a.action_id,
            _ => 0,
        };
        assert_eq!(action_id(&queue_entry(&objs)), a::set_queue_config_pfc::ID);
        // With the tuner's ECN values the same queue keeps one entry, now with both.
        let ecn: EcnByQueue = [((1, 3), (3, 8, 20))].into();
        let with_ecn =
            objects(&info, &i, &QueueModel::default(), &settings, &ecn).expect("objects");
        let tables: Vec<u32> = with_ecn.keys().filter_map(ObjKey::table_id).collect();
        assert_eq!(
            tables
                .iter()
                .filter(|t| **t == t::queue_config_table::ID)
                .count(),
            2
        );
        assert_ne!(queue_entry(&with_ecn), queue_entry(&objs));
        assert!(objs.contains_key(&ObjKey::CloneSession {
            session_id: constants::PFC_CLONE_SESSION_BASE + 1
        }));
        assert_eq!(i.warnings.len(), 1, "{:?}", i.warnings);
        assert!(i.warnings[0].contains("WRED_PROFILE|NOPE"));
    }
}

#[cfg(test)]
mod map_tests {
    use super::*;

    #[test]
    fn the_dscp_map_puts_lossless_and_class_in_the_nibble_of_each_mapped_dscp() {
        let dscp: BTreeMap<u8, u8> = [(0, 0), (26, 3), (63, 5)].into();
        let lossless: BTreeSet<u8> = [3].into();
        let (map, mapped) = dscp_map(&dscp, &lossless);
        assert_eq!((map.len(), mapped.len()), (32, 8));
        let nibble = |d: usize| (map[31 - d / 2] >> (4 * (d % 2))) & 0xf;
        assert_eq!(nibble(26), 0b1011, "lossless class 3");
        assert_eq!(nibble(63), 5);
        assert_eq!(nibble(0), 0);
        assert_eq!(nibble(1), 0);
        let bit = |d: usize| (mapped[7 - d / 8] >> (d % 8)) & 1;
        assert_eq!((bit(0), bit(26), bit(63), bit(1)), (1, 1, 1, 0));
    }

    #[test]
    fn watchdog_ports_become_bits_of_a_256_bit_mask() {
        let m = bit_string([0, 2, 255, 300], 256);
        assert_eq!(m.len(), 32);
        assert_eq!(m[31], 0b101);
        assert_eq!(m[0], 0x80);
    }
}
