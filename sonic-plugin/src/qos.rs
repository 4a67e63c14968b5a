//! The pipeline tables the plugin derives from CONFIG_DB's QoS rows (through
//! [`SwitchIntent`]): a pure function, so a changed row simply yields a new desired set,
//! diffed against the switch. ECN thresholds are the tuner's ([`crate::tuning`]), which yields
//! the static values when tuning is off.
//!
//! ```text
//!   dscp map + lossless classes ─► qos_classify_table dscp → (tc, lossless)
//!   (port, q) pause threshold, xon ─► pfc_threshold_table (port, q) → xoff, xon, quanta
//!   ports with PFC on ─► clone session PFC_CLONE_SESSION_BASE + port → replica on port
//!   device id, histogram shift ─► switch_config_table default set_switch_config
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
//! `depth` is `--queue-depth` (BMv2's default 64).

use weft_p4::{actions as a, constants, tables as t};
use weft_p4rt::proto::p4::v1::{Entity, TableEntry, entity};
use weft_p4rt::{P4Info, clone_session};

use crate::config::QueueModel;
use crate::intent::SwitchIntent;
use crate::objects::{ObjKey, Objects};

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
    PacketThresholds { ecn, pfc }
}

/// The switch-wide settings: switch id, postcard sampling and session, histogram shift.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwitchSettings {
    pub device_id: u64,
    pub postcard_sample_n: u32,
    pub postcard_session: u32,
    pub histogram_shift: u8,
}

pub(crate) fn entity_of(te: TableEntry) -> Entity {
    Entity {
        entity: Some(entity::Entity::TableEntry(te)),
    }
}

pub(crate) fn put(out: &mut Objects, e: Entity) {
    if let Some(k) = ObjKey::of(&e) {
        out.insert(k, e);
    }
}

/// The switch_config_table default action.
pub fn switch_config(info: &P4Info, s: SwitchSettings) -> Result<Entity, weft_p4rt::Error> {
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
        .param(
            a::set_switch_config::params::histogram_shift::NAME,
            s.histogram_shift,
        )?;
    Ok(entity_of(
        info.table_entry(t::switch_config_table::NAME)?
            .default_entry()
            .action(call)?
            .build()?,
    ))
}

/// The desired QoS objects (everything but ECN thresholds) for `intent`.
pub fn objects(
    info: &P4Info,
    intent: &SwitchIntent,
    model: &QueueModel,
    settings: SwitchSettings,
) -> Result<Objects, weft_p4rt::Error> {
    let mut out = Objects::new();
    put(&mut out, switch_config(info, settings)?);
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
    for (&d, &c) in &intent.dscp {
        let call = info
            .action_call(a::set_traffic_class::NAME)?
            .param(a::set_traffic_class::params::traffic_class::NAME, c)?
            .param(
                a::set_traffic_class::params::lossless::NAME,
                u8::from(intent.lossless_classes.contains(&c)),
            )?;
        let te = info
            .table_entry(t::qos_classify_table::NAME)?
            .exact(t::qos_classify_table::fields::dscp::NAME, d)?
            .action(call)?
            .build()?;
        put(&mut out, entity_of(te));
    }
    for ((_, q), qi) in &intent.queues {
        let (Some(id), Some(pause)) = (qi.port_id, qi.pause) else {
            continue;
        };
        let Some((xoff, xon)) = convert(model, qi.cell, None, Some(pause)).pfc else {
            continue;
        };
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
            .exact(t::pfc_threshold_table::fields::priority::NAME, *q)?
            .action(call)?
            .build()?;
        put(&mut out, entity_of(te));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intent::tests::intent;

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
    fn qos_rows_become_classify_pfc_entries_and_clone_sessions_but_no_ecn_entries() {
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
        let objs = objects(
            &info,
            &i,
            &QueueModel::default(),
            SwitchSettings {
                device_id: 7,
                ..Default::default()
            },
        )
        .expect("objects");
        let tables: Vec<u32> = objs.keys().filter_map(ObjKey::table_id).collect();
        let count = |id: u32| tables.iter().filter(|t| **t == id).count();
        assert_eq!(count(t::qos_classify_table::ID), 2);
        assert_eq!(
            count(t::ecn_threshold_table::ID),
            0,
            "ECN entries are the tuner's"
        );
        assert_eq!(count(t::pfc_threshold_table::ID), 1);
        assert_eq!(count(t::switch_config_table::ID), 1);
        assert!(objs.contains_key(&ObjKey::CloneSession {
            session_id: constants::PFC_CLONE_SESSION_BASE + 1
        }));
        assert_eq!(i.warnings.len(), 1, "{:?}", i.warnings);
        assert!(i.warnings[0].contains("WRED_PROFILE|NOPE"));
    }
}
