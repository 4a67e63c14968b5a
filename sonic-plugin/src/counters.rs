//! Pipeline counters → COUNTERS_DB, named like SONiC where a SAI name fits:
//!
//! | COUNTERS_DB key | field | pipeline counter |
//! |---|---|---|
//! | `COUNTERS:EthernetN` | `SAI_PORT_STAT_IF_IN_UCAST_PKTS`, `SAI_PORT_STAT_IF_IN_OCTETS` | `port_rx_counter[port]` (all packets) |
//! | | `SAI_PORT_STAT_IF_OUT_UCAST_PKTS`, `SAI_PORT_STAT_IF_OUT_OCTETS` | `port_tx_counter[port]` |
//! | | `SAI_PORT_STAT_PFC_<p>_RX_PKTS` / `_TX_PKTS` | `pfc_rx_pause_counter` / `pfc_tx_pause_counter[port×8+p]` |
//! | | `WEFT_PFC_<p>_RX_RESUME_PKTS` / `WEFT_PFC_<p>_TX_RESUME_PKTS` | `pfc_rx_resume_counter` / `pfc_tx_resume_counter` |
//! | | `WEFT_PSN_OUT_OF_ORDER_PKTS`, `WEFT_PSN_REGRESSION_PKTS` | `psn_out_of_order_counter[port]`, `psn_regression_counter[port]` (RoCE requests leaving the port: the host it faces) |
//! | `COUNTERS:EthernetN:<q>` | `SAI_QUEUE_STAT_PACKETS`, `SAI_QUEUE_STAT_BYTES` | `queue_tx_counter[port×8+q]` |
//! | | `SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS` | `ecn_mark_counter[port×8+q]` |
//! | | `SAI_QUEUE_STAT_TRIM_PACKETS` | `trim_counter[port×8+q]` (q: the class before trimming) |
//! | `COUNTERS:WEFT_SWITCH` | `WEFT_DROP_<REASON>_PKTS`, `_OCTETS` | `drop_reason_counter[reason]` |
//! | | `WEFT_PSN_OUT_OF_ORDER_PKTS`, `WEFT_PSN_REGRESSION_PKTS` | the ports' PSN counts summed |
//! | `COUNTERS:WEFT_NEXTHOP:<0xid>` | `WEFT_MULTIPATH_MEMBER_PKTS`, `_OCTETS` | `multipath_member_counter[nexthop_id]` |
//!
//! `COUNTERS_PORT_NAME_MAP` maps each port name to its own key (SONiC maps to SAI object ids,
//! which a P4 switch does not have). Only the cells of configured ports and installed
//! nexthops are read, not whole arrays.

use std::collections::{BTreeMap, BTreeSet};

use weft_appdb::PortMap;
use weft_p4::{constants, counters as c};
use weft_p4rt::P4Info;
use weft_p4rt::proto::p4::v1::{Entity, entity};
use weft_sonic_schema::counters::{
    CountersRow, NexthopCounters, PortCounters, PortNameMap, QueueCounters, SwitchCounters,
};

pub const QUEUES: u32 = 8;

/// The cell of a per-(port, queue) counter or register: `port × 8 + queue`, as the pipeline
/// indexes them (`p4/include/port_egress.p4`).
pub fn queue_cell(port: u32, queue: u8) -> u32 {
    port * QUEUES + u32::from(queue)
}

/// (counter id, index) → (packets, bytes).
pub type Cells = BTreeMap<(u32, i64), (u64, u64)>;

fn cell(info: &P4Info, name: &str, index: i64) -> Option<Entity> {
    info.counter_entry(name, Some(index)).ok().map(|ce| Entity {
        entity: Some(entity::Entity::CounterEntry(ce)),
    })
}

/// Per-(port, queue) counter cells of `ports` for the given counters.
pub fn port_queue_reads(info: &P4Info, names: &[&str], ports: &[u32]) -> Vec<Entity> {
    let mut out = Vec::new();
    for name in names {
        for p in ports {
            for q in 0..QUEUES {
                out.extend(cell(info, name, i64::from(p * QUEUES + q)));
            }
        }
    }
    out
}

/// Every cell the counter poll reads.
pub fn reads(info: &P4Info, ports: &PortMap, nexthops: &BTreeSet<u32>) -> Vec<Entity> {
    let ids: Vec<u32> = ports.by_name.values().copied().collect();
    let mut out = Vec::new();
    for p in &ids {
        out.extend(cell(info, c::port_rx_counter::NAME, i64::from(*p)));
        out.extend(cell(info, c::port_tx_counter::NAME, i64::from(*p)));
        out.extend(cell(info, c::psn_out_of_order_counter::NAME, i64::from(*p)));
        out.extend(cell(info, c::psn_regression_counter::NAME, i64::from(*p)));
    }
    out.extend(port_queue_reads(
        info,
        &[
            c::pfc_rx_pause_counter::NAME,
            c::pfc_rx_resume_counter::NAME,
            c::pfc_tx_pause_counter::NAME,
            c::pfc_tx_resume_counter::NAME,
            c::queue_tx_counter::NAME,
            c::ecn_mark_counter::NAME,
            c::trim_counter::NAME,
        ],
        &ids,
    ));
    for (reason, _) in constants::DROP_REASONS {
        out.extend(cell(info, c::drop_reason_counter::NAME, i64::from(*reason)));
    }
    for nh in nexthops {
        out.extend(cell(
            info,
            c::multipath_member_counter::NAME,
            i64::from(*nh),
        ));
    }
    out
}

/// What a PSN task of its own reads: nothing. The PSN counters are per port and read with the
/// port counters above (two cells a port), so nothing is left that would hold up the poll.
pub fn psn_reads(_info: &P4Info) -> Vec<Entity> {
    Vec::new()
}

/// (out of order, regressions) summed over the cells read.
pub fn psn_totals(cells: &Cells) -> (u64, u64) {
    let sum = |id: u32| {
        cells
            .iter()
            .filter(|((c, _), _)| *c == id)
            .map(|(_, v)| v.0)
            .sum::<u64>()
    };
    (
        sum(c::psn_out_of_order_counter::ID),
        sum(c::psn_regression_counter::ID),
    )
}

/// Read results by (counter id, index).
pub fn cells(results: &[Entity]) -> Cells {
    let mut out = Cells::new();
    for e in results {
        if let Some(entity::Entity::CounterEntry(ce)) = &e.entity {
            let idx = ce.index.as_ref().map(|i| i.index).unwrap_or(0);
            let d = ce.data.as_ref();
            out.insert(
                (ce.counter_id, idx),
                (
                    d.map(|d| d.packet_count as u64).unwrap_or(0),
                    d.map(|d| d.byte_count as u64).unwrap_or(0),
                ),
            );
        }
    }
    out
}

/// The COUNTERS_DB rows the cells give (typed in `weft-sonic-schema`).
pub fn rows(ports: &PortMap, nexthops: &BTreeSet<u32>, cells: &Cells) -> Vec<CountersRow> {
    let get = |id: u32, idx: u32| cells.get(&(id, i64::from(idx))).copied();
    let mut out = Vec::new();
    for (name, p) in &ports.by_name {
        let mut pc = PortCounters {
            port: name.clone(),
            ..Default::default()
        };
        if let Some((pk, by)) = get(c::port_rx_counter::ID, *p) {
            pc.rx_packets = Some(pk);
            pc.rx_bytes = Some(by);
        }
        if let Some((pk, by)) = get(c::port_tx_counter::ID, *p) {
            pc.tx_packets = Some(pk);
            pc.tx_bytes = Some(by);
        }
        pc.psn_out_of_order = get(c::psn_out_of_order_counter::ID, *p).map(|x| x.0);
        pc.psn_regressions = get(c::psn_regression_counter::ID, *p).map(|x| x.0);
        for q in 0..QUEUES {
            let i = p * QUEUES + q;
            let pfc = &mut pc.pfc[q as usize];
            pfc.rx_pause = get(c::pfc_rx_pause_counter::ID, i).map(|x| x.0);
            pfc.tx_pause = get(c::pfc_tx_pause_counter::ID, i).map(|x| x.0);
            pfc.rx_resume = get(c::pfc_rx_resume_counter::ID, i).map(|x| x.0);
            pfc.tx_resume = get(c::pfc_tx_resume_counter::ID, i).map(|x| x.0);
        }
        out.push(CountersRow::Port(Box::new(pc)));
        for q in 0..QUEUES {
            let i = p * QUEUES + q;
            let tx = get(c::queue_tx_counter::ID, i);
            let ecn = get(c::ecn_mark_counter::ID, i);
            let trimmed = get(c::trim_counter::ID, i);
            if tx.is_none() && ecn.is_none() && trimmed.is_none() {
                continue;
            }
            out.push(CountersRow::Queue(QueueCounters {
                port: name.clone(),
                queue: q as u8,
                packets: tx.map(|x| x.0),
                bytes: tx.map(|x| x.1),
                ecn_marked: ecn.map(|x| x.0),
                trimmed: trimmed.map(|x| x.0),
                ..Default::default()
            }));
        }
    }
    let mut sw = SwitchCounters::default();
    for (reason, label) in constants::DROP_REASONS {
        if let Some(v) = get(c::drop_reason_counter::ID, u32::from(*reason)) {
            sw.drops.insert(label.to_string(), v);
        }
    }
    // Over the configured ports' cells: the switch's total of what its ports counted.
    let sum = |id: u32| -> Option<u64> {
        let mut cells_of = cells.range((id, i64::MIN)..=(id, i64::MAX)).peekable();
        cells_of.peek()?;
        Some(cells_of.map(|(_, v)| v.0).sum())
    };
    sw.psn_out_of_order = sum(c::psn_out_of_order_counter::ID);
    sw.psn_regressions = sum(c::psn_regression_counter::ID);
    if !sw.drops.is_empty() || sw.psn_out_of_order.is_some() {
        out.push(CountersRow::Switch(sw));
    }
    for nh in nexthops {
        if let Some((pk, by)) = get(c::multipath_member_counter::ID, *nh) {
            out.push(CountersRow::Nexthop(NexthopCounters {
                nexthop_id: *nh,
                packets: pk,
                bytes: by,
            }));
        }
    }
    out
}

/// `COUNTERS_PORT_NAME_MAP`: each port maps to its own key.
pub fn name_map(ports: &PortMap) -> PortNameMap {
    PortNameMap {
        name: String::new(),
        map: ports
            .by_name
            .keys()
            .map(|n| (n.clone(), n.clone()))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_become_sonic_named_rows() {
        let mut ports = PortMap::default();
        ports.by_name.insert("Ethernet0".into(), 1);
        ports.by_name.insert("Ethernet4".into(), 2);
        let mut cells = Cells::new();
        cells.insert((c::port_rx_counter::ID, 1), (10, 1000));
        cells.insert((c::pfc_rx_pause_counter::ID, 8 + 3), (4, 0));
        cells.insert((c::ecn_mark_counter::ID, 8 + 3), (2, 0));
        cells.insert((c::trim_counter::ID, 8 + 2), (6, 0));
        cells.insert((c::drop_reason_counter::ID, 5), (7, 700));
        cells.insert((c::multipath_member_counter::ID, 5), (9, 900));
        cells.insert((c::psn_out_of_order_counter::ID, 1), (3, 0));
        cells.insert((c::psn_out_of_order_counter::ID, 2), (4, 0));
        cells.insert((c::psn_regression_counter::ID, 2), (0, 0));
        let r: std::collections::BTreeMap<String, weft_sonic_db::FieldValues> =
            rows(&ports, &[5].into(), &cells)
                .iter()
                .map(CountersRow::key_fields)
                .collect();
        let f = |k: &str, f: &str| {
            r.get(k)
                .and_then(|row| row.iter().find(|(n, _)| n == f))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            f("Ethernet0", "SAI_PORT_STAT_IF_IN_UCAST_PKTS").as_deref(),
            Some("10")
        );
        assert_eq!(
            f("Ethernet0", "SAI_PORT_STAT_PFC_3_RX_PKTS").as_deref(),
            Some("4")
        );
        assert_eq!(
            f("Ethernet0:3", "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS").as_deref(),
            Some("2")
        );
        // A queue that only trimmed still gets its row.
        assert_eq!(
            f("Ethernet0:2", "SAI_QUEUE_STAT_TRIM_PACKETS").as_deref(),
            Some("6")
        );
        assert_eq!(
            f("WEFT_SWITCH", "WEFT_DROP_NO_ROUTE_PKTS").as_deref(),
            Some("7")
        );
        assert_eq!(
            f("WEFT_NEXTHOP:0x5", "WEFT_MULTIPATH_MEMBER_PKTS").as_deref(),
            Some("9")
        );
        // Per port (the host it faces), and summed for the switch.
        assert_eq!(
            f("Ethernet0", "WEFT_PSN_OUT_OF_ORDER_PKTS").as_deref(),
            Some("3")
        );
        assert_eq!(
            f("Ethernet4", "WEFT_PSN_OUT_OF_ORDER_PKTS").as_deref(),
            Some("4")
        );
        assert_eq!(
            f("Ethernet4", "WEFT_PSN_REGRESSION_PKTS").as_deref(),
            Some("0")
        );
        assert_eq!(
            f("Ethernet0", "WEFT_PSN_REGRESSION_PKTS"),
            None,
            "not read: unknown"
        );
        assert_eq!(
            f("WEFT_SWITCH", "WEFT_PSN_OUT_OF_ORDER_PKTS").as_deref(),
            Some("7"),
            "summed over the ports"
        );
        assert_eq!(
            f("WEFT_SWITCH", "WEFT_PSN_REGRESSION_PKTS").as_deref(),
            Some("0")
        );
    }
}
