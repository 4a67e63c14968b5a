//! COUNTERS_DB rows the plugin writes from the pipeline's counters, named like SONiC's where
//! a SAI name fits (`COUNTERS:EthernetN`, `COUNTERS:EthernetN:<q>`), Weft's own otherwise.

use std::collections::BTreeMap;

use crate::{FieldDoc, FieldValues, Owner, Row, SchemaError, SonicDbId, TableDoc, doc_of, map_row};

/// Priorities and queues per port.
pub const QUEUES: usize = 8;
/// Buckets of the per-port queue-depth histogram.
pub const HIST_BUCKETS: usize = 16;
/// The key of the switch-wide row.
pub const SWITCH_KEY: &str = "WEFT_SWITCH";
/// The key prefix of the per-nexthop rows (`WEFT_NEXTHOP:0x5`).
pub const NEXTHOP_PREFIX: &str = "WEFT_NEXTHOP";

fn get(fields: &FieldValues, name: &str) -> Option<u64> {
    fields
        .iter()
        .rev()
        .find(|(f, _)| f == name)
        .and_then(|(_, v)| v.trim().parse().ok())
}

fn put(out: &mut FieldValues, name: impl Into<String>, v: Option<u64>) {
    if let Some(v) = v {
        out.push((name.into(), v.to_string()));
    }
}

/// Per-priority PFC counts of a port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PfcCounts {
    pub rx_pause: Option<u64>,
    pub tx_pause: Option<u64>,
    pub rx_resume: Option<u64>,
    pub tx_resume: Option<u64>,
    /// Microseconds the port's peer held this priority's egress queue paused (BMv2: the
    /// plugin's hold, from the PFC frames' quanta at the port's emulated speed).
    pub rx_pause_duration_us: Option<u64>,
}

/// `COUNTERS:EthernetN`: a port's packets and bytes, PFC per priority, the queue-depth
/// histogram (bucket b: packets that found `[b << shift, (b+1) << shift)` packets queued) and
/// the RoCE PSN anomalies of packets leaving it (host-facing ports: the host they go to).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PortCounters {
    pub port: String,
    pub rx_packets: Option<u64>,
    pub rx_bytes: Option<u64>,
    pub tx_packets: Option<u64>,
    pub tx_bytes: Option<u64>,
    pub pfc: [PfcCounts; QUEUES],
    pub depth_histogram: Option<[u64; HIST_BUCKETS]>,
    pub histogram_shift: Option<u64>,
    pub psn_out_of_order: Option<u64>,
    pub psn_regressions: Option<u64>,
}

pub const RX_PKTS: &str = "SAI_PORT_STAT_IF_IN_UCAST_PKTS";
pub const RX_OCTETS: &str = "SAI_PORT_STAT_IF_IN_OCTETS";
pub const TX_PKTS: &str = "SAI_PORT_STAT_IF_OUT_UCAST_PKTS";
pub const TX_OCTETS: &str = "SAI_PORT_STAT_IF_OUT_OCTETS";
pub const HIST_SHIFT: &str = "WEFT_QUEUE_DEPTH_HISTOGRAM_SHIFT";

/// Priority `q`'s PFC fields of a port row: PAUSE received, sent, RESUME received, sent, and the
/// time the peer held the queue paused.
pub fn pfc_names(q: usize) -> [String; 5] {
    [
        format!("SAI_PORT_STAT_PFC_{q}_RX_PKTS"),
        format!("SAI_PORT_STAT_PFC_{q}_TX_PKTS"),
        format!("WEFT_PFC_{q}_RX_RESUME_PKTS"),
        format!("WEFT_PFC_{q}_TX_RESUME_PKTS"),
        format!("SAI_PORT_STAT_PFC_{q}_RX_PAUSE_DURATION_US"),
    ]
}

/// Bucket `b`'s field of a port row's queue-depth histogram.
pub fn bucket_name(b: usize) -> String {
    format!("WEFT_QUEUE_DEPTH_BUCKET_{b}_PKTS")
}

impl Row for PortCounters {
    const TABLE: &'static str = "COUNTERS";
    const DB: SonicDbId = SonicDbId::CountersDb;
    const OWNER: Owner = Owner::Plugin;
    const KEY_FORM: &'static str = "EthernetN";
    const DOC: &'static str =
        "A port's counters. `<p>` is a priority 0–7, `<b>` a histogram bucket 0–15.";
    const FIELDS: &'static [FieldDoc] = &[
        FieldDoc {
            name: RX_PKTS,
            expected: "packets",
            optional: true,
            doc: "every packet received",
        },
        FieldDoc {
            name: RX_OCTETS,
            expected: "bytes",
            optional: true,
            doc: "",
        },
        FieldDoc {
            name: TX_PKTS,
            expected: "packets",
            optional: true,
            doc: "every packet sent",
        },
        FieldDoc {
            name: TX_OCTETS,
            expected: "bytes",
            optional: true,
            doc: "",
        },
        FieldDoc {
            name: "SAI_PORT_STAT_PFC_<p>_RX_PKTS",
            expected: "frames",
            optional: true,
            doc: "PFC PAUSE received",
        },
        FieldDoc {
            name: "SAI_PORT_STAT_PFC_<p>_TX_PKTS",
            expected: "frames",
            optional: true,
            doc: "PFC PAUSE sent",
        },
        FieldDoc {
            name: "WEFT_PFC_<p>_RX_RESUME_PKTS",
            expected: "frames",
            optional: true,
            doc: "PFC RESUME (quanta 0) received",
        },
        FieldDoc {
            name: "WEFT_PFC_<p>_TX_RESUME_PKTS",
            expected: "frames",
            optional: true,
            doc: "PFC RESUME sent",
        },
        FieldDoc {
            name: "SAI_PORT_STAT_PFC_<p>_RX_PAUSE_DURATION_US",
            expected: "microseconds",
            optional: true,
            doc: "time the peer held the priority's egress queue paused",
        },
        FieldDoc {
            name: "WEFT_QUEUE_DEPTH_BUCKET_<b>_PKTS",
            expected: "packets",
            optional: true,
            doc: "queue-depth histogram of the port's egress",
        },
        FieldDoc {
            name: HIST_SHIFT,
            expected: "bits",
            optional: true,
            doc: "bucket width is `1 << shift` packets",
        },
        FieldDoc {
            name: PSN_OOO,
            expected: "packets",
            optional: true,
            doc: "RoCE requests sent out of this (host-facing) port whose PSN skipped ahead (psn_out_of_order_counter[port])",
        },
        FieldDoc {
            name: PSN_REGRESSION,
            expected: "packets",
            optional: true,
            doc: "RoCE requests sent out of this port with an older PSN (psn_regression_counter[port])",
        },
    ];
    fn key(&self) -> String {
        self.port.clone()
    }
    fn to_fields(&self) -> FieldValues {
        let mut o = Vec::new();
        put(&mut o, RX_PKTS, self.rx_packets);
        put(&mut o, RX_OCTETS, self.rx_bytes);
        put(&mut o, TX_PKTS, self.tx_packets);
        put(&mut o, TX_OCTETS, self.tx_bytes);
        for (q, c) in self.pfc.iter().enumerate() {
            let [a, b, cc, d, e] = pfc_names(q);
            put(&mut o, a, c.rx_pause);
            put(&mut o, b, c.tx_pause);
            put(&mut o, cc, c.rx_resume);
            put(&mut o, d, c.tx_resume);
            put(&mut o, e, c.rx_pause_duration_us);
        }
        if let Some(h) = &self.depth_histogram {
            for (b, v) in h.iter().enumerate() {
                put(&mut o, bucket_name(b), Some(*v));
            }
        }
        put(&mut o, HIST_SHIFT, self.histogram_shift);
        put(&mut o, PSN_OOO, self.psn_out_of_order);
        put(&mut o, PSN_REGRESSION, self.psn_regressions);
        o
    }
    fn from_fields(key: &str, f: &FieldValues) -> Result<Self, SchemaError> {
        let mut c = PortCounters {
            port: key.to_string(),
            rx_packets: get(f, RX_PKTS),
            rx_bytes: get(f, RX_OCTETS),
            tx_packets: get(f, TX_PKTS),
            tx_bytes: get(f, TX_OCTETS),
            histogram_shift: get(f, HIST_SHIFT),
            psn_out_of_order: get(f, PSN_OOO),
            psn_regressions: get(f, PSN_REGRESSION),
            ..Default::default()
        };
        for q in 0..QUEUES {
            let [a, b, cc, d, e] = pfc_names(q);
            c.pfc[q] = PfcCounts {
                rx_pause: get(f, &a),
                tx_pause: get(f, &b),
                rx_resume: get(f, &cc),
                tx_resume: get(f, &d),
                rx_pause_duration_us: get(f, &e),
            };
        }
        let buckets: Vec<Option<u64>> =
            (0..HIST_BUCKETS).map(|b| get(f, &bucket_name(b))).collect();
        if buckets.iter().all(Option::is_some) {
            let mut h = [0u64; HIST_BUCKETS];
            for (i, b) in buckets.into_iter().enumerate() {
                h[i] = b.unwrap_or(0);
            }
            c.depth_histogram = Some(h);
        }
        Ok(c)
    }
}

/// `COUNTERS:EthernetN:<q>`: a queue's departures and ECN marks (the counter poll), and its
/// PFC watchdog state (the watchdog): two writers merge their fields into one row, as SONiC's
/// do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueCounters {
    pub port: String,
    pub queue: u8,
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
    pub ecn_marked: Option<u64>,
    /// Packets of this queue the switch trimmed (packet trimming) instead of queueing them.
    pub trimmed: Option<u64>,
    pub wd_status: Option<crate::state::WdStatus>,
    pub wd_action: Option<crate::config::PfcWdAction>,
    pub wd_detected: Option<u64>,
    pub wd_restored: Option<u64>,
}

pub const Q_PKTS: &str = "SAI_QUEUE_STAT_PACKETS";
pub const Q_BYTES: &str = "SAI_QUEUE_STAT_BYTES";
pub const Q_TRIM: &str = "SAI_QUEUE_STAT_TRIM_PACKETS";
pub const Q_ECN: &str = "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS";
pub const WD_STATUS: &str = "PFC_WD_STATUS";
pub const WD_ACTION: &str = "PFC_WD_ACTION";
pub const WD_DETECTED: &str = "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED";
pub const WD_RESTORED: &str = "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED";

impl Row for QueueCounters {
    const TABLE: &'static str = "COUNTERS";
    const DB: SonicDbId = SonicDbId::CountersDb;
    const OWNER: Owner = Owner::Plugin;
    const KEY_FORM: &'static str = "EthernetN:q";
    const DOC: &'static str = "A queue's counters and PFC watchdog state.";
    const FIELDS: &'static [FieldDoc] = &[
        FieldDoc {
            name: Q_PKTS,
            expected: "packets",
            optional: true,
            doc: "departures",
        },
        FieldDoc {
            name: Q_BYTES,
            expected: "bytes",
            optional: true,
            doc: "",
        },
        FieldDoc {
            name: Q_ECN,
            expected: "packets",
            optional: true,
            doc: "CE-marked departures",
        },
        FieldDoc {
            name: Q_TRIM,
            expected: "packets",
            optional: true,
            doc: "packets of this queue trimmed (cut to the trim size and sent on in the trimmed queue) because the port was congested",
        },
        FieldDoc {
            name: WD_STATUS,
            expected: "operational or stormed",
            optional: true,
            doc: "",
        },
        FieldDoc {
            name: WD_ACTION,
            expected: "drop, forward or alert",
            optional: true,
            doc: "",
        },
        FieldDoc {
            name: WD_DETECTED,
            expected: "storms",
            optional: true,
            doc: "",
        },
        FieldDoc {
            name: WD_RESTORED,
            expected: "storms",
            optional: true,
            doc: "",
        },
    ];
    fn key(&self) -> String {
        format!("{}:{}", self.port, self.queue)
    }
    fn to_fields(&self) -> FieldValues {
        let mut o = Vec::new();
        put(&mut o, Q_PKTS, self.packets);
        put(&mut o, Q_BYTES, self.bytes);
        put(&mut o, Q_ECN, self.ecn_marked);
        put(&mut o, Q_TRIM, self.trimmed);
        if let Some(s) = self.wd_status {
            o.push((WD_STATUS.into(), s.as_str().into()));
        }
        if let Some(a) = self.wd_action {
            o.push((WD_ACTION.into(), a.as_str().into()));
        }
        put(&mut o, WD_DETECTED, self.wd_detected);
        put(&mut o, WD_RESTORED, self.wd_restored);
        o
    }
    fn from_fields(key: &str, f: &FieldValues) -> Result<Self, SchemaError> {
        let bad = || SchemaError::Key {
            table: Self::TABLE,
            key: key.to_string(),
            form: Self::KEY_FORM,
        };
        let (port, q) = key.rsplit_once(':').ok_or_else(bad)?;
        let queue: u8 = q.parse().map_err(|_| bad())?;
        let word = |n: &str| {
            f.iter()
                .rev()
                .find(|(x, _)| x == n)
                .map(|(_, v)| v.as_str())
        };
        Ok(QueueCounters {
            port: port.to_string(),
            queue,
            packets: get(f, Q_PKTS),
            bytes: get(f, Q_BYTES),
            ecn_marked: get(f, Q_ECN),
            trimmed: get(f, Q_TRIM),
            wd_status: word(WD_STATUS).and_then(<crate::state::WdStatus as crate::Field>::parse),
            wd_action: word(WD_ACTION)
                .and_then(<crate::config::PfcWdAction as crate::Field>::parse),
            wd_detected: get(f, WD_DETECTED),
            wd_restored: get(f, WD_RESTORED),
        })
    }
}

/// `COUNTERS:WEFT_SWITCH`: packets and bytes dropped, by the pipeline's drop reason; and when
/// the plugin last wrote the counters, so a reader tells current counters from a dead poller's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwitchCounters {
    /// Reason label (lower case, as the pipeline names it) → (packets, bytes).
    pub drops: BTreeMap<String, (u64, u64)>,
    /// RoCE PSN anomalies at the host-facing ports, summed over the ports (per port: each
    /// port's row).
    pub psn_out_of_order: Option<u64>,
    pub psn_regressions: Option<u64>,
    /// Unix time (ms, the plugin's clock) of the counter poll that wrote these rows, written in
    /// the same merge as them. Absent from an older plugin.
    pub poll_time_ms: Option<u64>,
    /// The plugin's counter polling interval (ms): readers call rows older than a few
    /// intervals stale.
    pub poll_interval_ms: Option<u64>,
}

pub const PSN_OOO: &str = "WEFT_PSN_OUT_OF_ORDER_PKTS";
pub const PSN_REGRESSION: &str = "WEFT_PSN_REGRESSION_PKTS";
/// [`SwitchCounters::poll_time_ms`]'s field.
pub const POLL_TIME: &str = "WEFT_POLL_TIME_MS";
/// [`SwitchCounters::poll_interval_ms`]'s field.
pub const POLL_INTERVAL: &str = "WEFT_POLL_INTERVAL_MS";

impl Row for SwitchCounters {
    const TABLE: &'static str = "COUNTERS";
    const DB: SonicDbId = SonicDbId::CountersDb;
    const OWNER: Owner = Owner::Plugin;
    const KEY_FORM: &'static str = "WEFT_SWITCH";
    const DOC: &'static str = "Switch-wide drops by reason (`<REASON>`: the pipeline's drop reasons upper-cased) and RoCE PSN anomalies.";
    const FIELDS: &'static [FieldDoc] = &[
        FieldDoc {
            name: "WEFT_DROP_<REASON>_PKTS",
            expected: "packets",
            optional: true,
            doc: "",
        },
        FieldDoc {
            name: "WEFT_DROP_<REASON>_OCTETS",
            expected: "bytes",
            optional: true,
            doc: "",
        },
        FieldDoc {
            name: PSN_OOO,
            expected: "packets",
            optional: true,
            doc: "RoCE requests toward a host whose PSN skipped ahead (psn_out_of_order_counter, sum over the ports)",
        },
        FieldDoc {
            name: PSN_REGRESSION,
            expected: "packets",
            optional: true,
            doc: "RoCE packets toward a host with an older PSN: retransmissions or late packets",
        },
        FieldDoc {
            name: POLL_TIME,
            expected: "unix ms",
            optional: true,
            doc: "when the counter poll that wrote the COUNTERS rows ran (the plugin's clock); readers judge staleness by it",
        },
        FieldDoc {
            name: POLL_INTERVAL,
            expected: "ms",
            optional: true,
            doc: "the plugin's counter polling interval",
        },
    ];
    fn key(&self) -> String {
        SWITCH_KEY.to_string()
    }
    fn to_fields(&self) -> FieldValues {
        let mut o = Vec::new();
        for (reason, (p, b)) in &self.drops {
            let r = reason.to_ascii_uppercase();
            o.push((format!("WEFT_DROP_{r}_PKTS"), p.to_string()));
            o.push((format!("WEFT_DROP_{r}_OCTETS"), b.to_string()));
        }
        put(&mut o, PSN_OOO, self.psn_out_of_order);
        put(&mut o, PSN_REGRESSION, self.psn_regressions);
        put(&mut o, POLL_TIME, self.poll_time_ms);
        put(&mut o, POLL_INTERVAL, self.poll_interval_ms);
        o
    }
    fn from_fields(_key: &str, f: &FieldValues) -> Result<Self, SchemaError> {
        let mut drops: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (name, v) in f {
            let Some(rest) = name.strip_prefix("WEFT_DROP_") else {
                continue;
            };
            let Ok(n) = v.trim().parse::<u64>() else {
                continue;
            };
            if let Some(r) = rest.strip_suffix("_PKTS") {
                drops.entry(r.to_ascii_lowercase()).or_default().0 = n;
            } else if let Some(r) = rest.strip_suffix("_OCTETS") {
                drops.entry(r.to_ascii_lowercase()).or_default().1 = n;
            }
        }
        Ok(SwitchCounters {
            drops,
            psn_out_of_order: get(f, PSN_OOO),
            psn_regressions: get(f, PSN_REGRESSION),
            poll_time_ms: get(f, POLL_TIME),
            poll_interval_ms: get(f, POLL_INTERVAL),
        })
    }
}

/// `COUNTERS:WEFT_NEXTHOP:<0xid>`: packets a multipath group sent through one nexthop (the
/// path spread).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NexthopCounters {
    pub nexthop_id: u32,
    pub packets: u64,
    pub bytes: u64,
}

const NH_PKTS: &str = "WEFT_MULTIPATH_MEMBER_PKTS";
const NH_OCTETS: &str = "WEFT_MULTIPATH_MEMBER_OCTETS";

impl Row for NexthopCounters {
    const TABLE: &'static str = "COUNTERS";
    const DB: SonicDbId = SonicDbId::CountersDb;
    const OWNER: Owner = Owner::Plugin;
    const KEY_FORM: &'static str = "WEFT_NEXTHOP:0xID";
    const DOC: &'static str = "Packets multipath groups sent through one nexthop.";
    const FIELDS: &'static [FieldDoc] = &[
        FieldDoc {
            name: NH_PKTS,
            expected: "packets",
            optional: false,
            doc: "",
        },
        FieldDoc {
            name: NH_OCTETS,
            expected: "bytes",
            optional: false,
            doc: "",
        },
    ];
    fn key(&self) -> String {
        format!("{NEXTHOP_PREFIX}:{:#x}", self.nexthop_id)
    }
    fn to_fields(&self) -> FieldValues {
        vec![
            (NH_PKTS.into(), self.packets.to_string()),
            (NH_OCTETS.into(), self.bytes.to_string()),
        ]
    }
    fn from_fields(key: &str, f: &FieldValues) -> Result<Self, SchemaError> {
        let bad = || SchemaError::Key {
            table: Self::TABLE,
            key: key.to_string(),
            form: Self::KEY_FORM,
        };
        let id = key
            .strip_prefix(NEXTHOP_PREFIX)
            .and_then(|r| r.strip_prefix(":0x"))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(bad)?;
        Ok(NexthopCounters {
            nexthop_id: id,
            packets: get(f, NH_PKTS).unwrap_or(0),
            bytes: get(f, NH_OCTETS).unwrap_or(0),
        })
    }
}

map_row! {
    /// Port name → its key in `COUNTERS` (SONiC maps to SAI object ids, which a P4 switch does
    /// not have; Weft maps each port to its own name). The whole hash is the Redis key
    /// `COUNTERS_PORT_NAME_MAP`.
    pub struct PortNameMap in CountersDb "COUNTERS_PORT_NAME_MAP" by Plugin,
        key "(none)", map "<port>": String => "counters key": String
}

/// Every `COUNTERS` row, by what its key says it is.
#[derive(Debug, Clone, PartialEq)]
pub enum CountersRow {
    Port(Box<PortCounters>),
    Queue(QueueCounters),
    Switch(SwitchCounters),
    Nexthop(NexthopCounters),
}

impl CountersRow {
    pub fn from_fields(key: &str, f: &FieldValues) -> Result<CountersRow, SchemaError> {
        if key == SWITCH_KEY {
            SwitchCounters::from_fields(key, f).map(CountersRow::Switch)
        } else if key.starts_with(NEXTHOP_PREFIX) {
            NexthopCounters::from_fields(key, f).map(CountersRow::Nexthop)
        } else if key.contains(':') {
            QueueCounters::from_fields(key, f).map(CountersRow::Queue)
        } else {
            PortCounters::from_fields(key, f).map(|p| CountersRow::Port(Box::new(p)))
        }
    }

    /// The row as written: its key (without the `COUNTERS:` prefix) and its fields.
    pub fn key_fields(&self) -> (String, FieldValues) {
        match self {
            CountersRow::Port(r) => (r.key(), r.to_fields()),
            CountersRow::Queue(r) => (r.key(), r.to_fields()),
            CountersRow::Switch(r) => (r.key(), r.to_fields()),
            CountersRow::Nexthop(r) => (r.key(), r.to_fields()),
        }
    }
}

pub(crate) fn catalogue() -> Vec<TableDoc> {
    vec![
        doc_of::<PortCounters>(),
        doc_of::<QueueCounters>(),
        doc_of::<SwitchCounters>(),
        doc_of::<NexthopCounters>(),
        doc_of::<PortNameMap>(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_rows_are_told_apart_by_key_and_round_trip() {
        let mut p = PortCounters {
            port: "Ethernet0".into(),
            rx_packets: Some(10),
            ..Default::default()
        };
        p.pfc[3].rx_pause = Some(4);
        p.depth_histogram = Some([1; HIST_BUCKETS]);
        p.psn_out_of_order = Some(7);
        p.psn_regressions = Some(0);
        let q = QueueCounters {
            port: "Ethernet0".into(),
            queue: 3,
            ecn_marked: Some(2),
            trimmed: Some(6),
            ..Default::default()
        };
        let mut s = SwitchCounters::default();
        s.drops.insert("no_route".into(), (7, 700));
        let n = NexthopCounters {
            nexthop_id: 5,
            packets: 9,
            bytes: 900,
        };
        for (row, key, fields) in [
            (
                CountersRow::Port(Box::new(p.clone())),
                p.key(),
                p.to_fields(),
            ),
            (CountersRow::Queue(q.clone()), q.key(), q.to_fields()),
            (CountersRow::Switch(s.clone()), s.key(), s.to_fields()),
            (CountersRow::Nexthop(n.clone()), n.key(), n.to_fields()),
        ] {
            assert_eq!(
                CountersRow::from_fields(&key, &fields).expect("parses"),
                row,
                "{key}"
            );
        }
        assert!(
            p.to_fields()
                .iter()
                .any(|(f, v)| f == "SAI_PORT_STAT_PFC_3_RX_PKTS" && v == "4")
        );
        assert_eq!(n.key(), "WEFT_NEXTHOP:0x5");
    }
}
