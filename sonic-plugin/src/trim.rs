//! Packet trimming: the pipeline's `trim_config_table` (keyless, its default action) from
//! CONFIG_DB, as SONiC's packet trimming design writes it.
//!
//! ```text
//!   SWITCH_TRIMMING|GLOBAL  size, dscp_value, queue_index ─► trim_size, trim_dscp, trim_queue
//!   BUFFER_QUEUE|p|q → BUFFER_PROFILE packet_discard_action trim
//!                           ─► queues (bit q), ports (bit id of p)
//!   --queue-depth           ─► threshold (packets)
//! ```
//!
//! SONiC trims a packet its queue's buffer cannot admit. BMv2 has no buffer admission: its
//! queues count packets and tail-drop at their depth (`--queue-depth`, 64 by default), so the
//! pipeline trims when the egress port's queue estimate reaches [`threshold`], a quarter of the
//! depth below it (at least 2 packets): trimming starts before BMv2 drops.
//!
//! The pipeline holds one queue mask and one port mask, so what it does is exact when every
//! trimming port trims the same queues (what Weft's compiler writes); otherwise it trims the
//! union of the queues on every trimming port, and [`TrimIntent::uneven`] says so (the caller
//! logs it). Without `SWITCH_TRIMMING|GLOBAL`, or with no trimmable queue, the default action
//! trims nothing. Ports above 255 are outside the pipeline's mask and never trim.

use std::collections::{BTreeMap, BTreeSet};

use weft_appdb::PortMap;
use weft_p4::{actions as a, tables as t};
use weft_p4rt::P4Info;
use weft_p4rt::proto::p4::v1::Entity;
use weft_sonic_schema::config::ConfigDb;

use crate::config::QueueModel;
use crate::objects::{bit_string as bits, entity_of};

/// What CONFIG_DB asks of the pipeline's trimming.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrimIntent {
    /// Bytes a trimmed packet keeps (SONiC's `size`), at most 65535.
    pub size: u16,
    pub dscp: u8,
    pub queue: u8,
    /// Traffic classes trimmable on some port.
    pub queues: BTreeSet<u8>,
    /// Port ids (below 256) with a trimmable queue.
    pub ports: BTreeSet<u32>,
    /// Not every trimming port trims the same queues: the pipeline trims the union.
    pub uneven: bool,
}

/// The trimming CONFIG_DB asks for (None: none).
pub fn intent(db: &ConfigDb, ports: &PortMap) -> Option<TrimIntent> {
    let st = db.switch_trimming.as_ref()?;
    let mut by_port: BTreeMap<u32, BTreeSet<u8>> = BTreeMap::new();
    for (name, id) in &ports.by_name {
        let qs: BTreeSet<u8> = (0..8).filter(|q| db.trims(name, *q)).collect();
        if !qs.is_empty() && *id < 256 {
            by_port.insert(*id, qs);
        }
    }
    let queues: BTreeSet<u8> = by_port.values().flatten().copied().collect();
    if queues.is_empty() {
        return None;
    }
    Some(TrimIntent {
        size: u16::try_from(st.size).unwrap_or(u16::MAX),
        dscp: st.dscp_value & 0x3f,
        queue: st.queue_index & 0x7,
        uneven: by_port.values().any(|q| *q != queues),
        ports: by_port.into_keys().collect(),
        queues,
    })
}

/// Packets of queue estimate at which the pipeline trims: a quarter of BMv2's queue depth
/// below it, at least 2 below, at least 1.
pub fn threshold(model: &QueueModel) -> u32 {
    let depth = model.queue_depth.max(4);
    depth.saturating_sub((depth / 4).max(2)).max(1)
}

/// The trim_config_table default action (trimming off when `intent` is None).
pub fn trim_config(
    info: &P4Info,
    intent: Option<&TrimIntent>,
    model: &QueueModel,
) -> Result<Entity, weft_p4rt::Error> {
    use a::set_trim_config::params as p;
    let off = TrimIntent::default();
    let i = intent.unwrap_or(&off);
    let call = info
        .action_call(a::set_trim_config::NAME)?
        .param(p::trim_size::NAME, i.size)?
        .param(p::trim_dscp::NAME, i.dscp)?
        .param(p::trim_queue::NAME, i.queue)?
        .param(
            p::threshold::NAME,
            if intent.is_some() {
                threshold(model)
            } else {
                0
            },
        )?
        .param(
            p::queues::NAME,
            bits(i.queues.iter().map(|q| u32::from(*q)), p::queues::BITWIDTH),
        )?
        .param(
            p::ports::NAME,
            bits(i.ports.iter().copied(), p::ports::BITWIDTH),
        )?;
    Ok(entity_of(
        info.table_entry(t::trim_config_table::NAME)?
            .default_entry()
            .action(call)?
            .build()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_sonic_schema::ClassList;
    use weft_sonic_schema::config::{
        BufferProfile, BufferQueue, ConfigRow, DiscardAction, SwitchTrimming, TRIM_PROFILE,
    };

    fn ports() -> PortMap {
        let mut m = PortMap::default();
        m.by_name.insert("Ethernet0".into(), 1);
        m.by_name.insert("Ethernet4".into(), 2);
        m.by_name.insert("Ethernet8".into(), 300);
        m
    }

    fn db(queues: &[(&str, u8)], global: bool) -> ConfigDb {
        let mut db = ConfigDb::default();
        if global {
            db.insert(ConfigRow::SwitchTrimming(SwitchTrimming {
                name: "GLOBAL".into(),
                size: 256,
                dscp_value: 11,
                queue_index: 7,
            }));
        }
        db.insert(ConfigRow::BufferProfile(BufferProfile {
            name: TRIM_PROFILE.into(),
            pool: None,
            xon: None,
            xoff: None,
            size: Some(0),
            dynamic_th: Some(3),
            packet_discard_action: Some(DiscardAction::Trim),
        }));
        for (p, q) in queues {
            db.insert(ConfigRow::BufferQueue(BufferQueue {
                port: (*p).into(),
                queues: ClassList::single(*q),
                profile: TRIM_PROFILE.into(),
            }));
        }
        db
    }

    #[test]
    fn sonics_rows_become_the_masks_the_pipeline_reads() {
        let i = intent(
            &db(
                &[("Ethernet0", 3), ("Ethernet4", 3), ("Ethernet8", 3)],
                true,
            ),
            &ports(),
        )
        .expect("trimming");
        assert_eq!((i.size, i.dscp, i.queue), (256, 11, 7));
        assert_eq!(i.queues, BTreeSet::from([3]));
        // Port 300 is beyond the pipeline's 256-bit mask.
        assert_eq!(i.ports, BTreeSet::from([1, 2]));
        assert!(!i.uneven);
        assert_eq!(bits([3], 8), vec![0b1000]);
        assert_eq!(bits([1, 2], 16), vec![0, 0b110]);
    }

    #[test]
    fn no_global_row_or_no_trim_queue_means_no_trimming_and_uneven_queues_are_flagged() {
        assert_eq!(intent(&db(&[("Ethernet0", 3)], false), &ports()), None);
        assert_eq!(intent(&db(&[], true), &ports()), None);
        let i =
            intent(&db(&[("Ethernet0", 3), ("Ethernet4", 2)], true), &ports()).expect("trimming");
        assert_eq!(i.queues, BTreeSet::from([2, 3]));
        assert!(i.uneven);
    }

    #[test]
    fn the_threshold_sits_below_bmv2s_tail_drop() {
        let m = |d| QueueModel {
            queue_depth: d,
            ..QueueModel::default()
        };
        assert_eq!(threshold(&m(64)), 48);
        assert_eq!(threshold(&m(8)), 6);
        assert_eq!(threshold(&m(1)), 2);
    }
}
