//! QoS of one switch as SONiC CONFIG_DB rows, so a real SONiC switch could take the same intent
//! and Weft's plugin derives the pipeline's QoS tables from the same rows.
//!
//! ```text
//!   PORT|EthernetN                 id, speed, mtu, admin_status
//!   DSCP_TO_TC_MAP|WEFT            "<dscp>": "<tc>" for all 64 values
//!   TC_TO_QUEUE_MAP|WEFT           "<tc>": "<queue>" (identity)
//!   TC_TO_PRIORITY_GROUP_MAP|WEFT  "<tc>": "<pg>" (identity)
//!   PORT_QOS_MAP|EthernetN         dscp_to_tc_map, tc_to_queue_map, tc_to_pg_map, pfc_enable
//!   WRED_PROFILE|WEFT_<class>_<speed>   ecn ecn_all, green_min/max_threshold (bytes), green_drop_probability (%)
//!   QUEUE|EthernetN|<tc>           wred_profile
//!   CABLE_LENGTH|AZURE             EthernetN: "<len>m"
//!   BUFFER_PROFILE|pg_lossless_<speed>_<cable>_profile   xon, xoff, size, dynamic_th, pool
//!   BUFFER_PG|EthernetN|<tc>       profile
//!   PFC_WD|EthernetN               action, detection_time, restoration_time (ms)
//!   PFC_WD|GLOBAL                  POLL_INTERVAL (ms)
//!   WEFT_ECN_ENVELOPE|EthernetN|<tc>  kmin_min, kmin_max, kmax_min, kmax_max, pmax_min, pmax_max,
//!                                     pause_threshold, tuning (the run-time tuner's bounds)
//! ```

use std::collections::BTreeMap;

use serde::Serialize;
use weft_topology::{Peer, SwitchIdx, Topology, Tuning};

/// One CONFIG_DB row: `<table>|<key>` with its fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigRow {
    pub table: String,
    pub key: String,
    pub fields: BTreeMap<String, String>,
}

impl ConfigRow {
    fn new(table: &str, key: impl Into<String>, fields: &[(&str, String)]) -> Self {
        ConfigRow {
            table: table.to_string(),
            key: key.into(),
            fields: fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SwitchQos {
    pub rows: Vec<ConfigRow>,
}

pub const MAP_NAME: &str = "WEFT";

/// The tuner may move Kmin and Kmax down to this fraction of their static values...
const ENVELOPE_LOW: f64 = 0.25;
/// ...and up to this multiple, but never past the pause threshold.
const ENVELOPE_HIGH: f64 = 2.0;

pub fn compile_switch(t: &Topology, s: SwitchIdx) -> SwitchQos {
    let sw = &t.switches[s];
    let q = &t.qos;
    let mut rows = Vec::new();

    let mut dscp = BTreeMap::new();
    for c in &q.classes {
        for d in &c.dscp {
            dscp.insert(d.to_string(), c.traffic_class.to_string());
        }
    }
    rows.push(ConfigRow {
        table: "DSCP_TO_TC_MAP".into(),
        key: MAP_NAME.into(),
        fields: dscp,
    });
    let identity: BTreeMap<String, String> =
        (0..8).map(|i| (i.to_string(), i.to_string())).collect();
    rows.push(ConfigRow {
        table: "TC_TO_QUEUE_MAP".into(),
        key: MAP_NAME.into(),
        fields: identity.clone(),
    });
    rows.push(ConfigRow {
        table: "TC_TO_PRIORITY_GROUP_MAP".into(),
        key: MAP_NAME.into(),
        fields: identity,
    });

    let lossless: Vec<&weft_topology::TrafficClass> =
        q.classes.iter().filter(|c| c.lossless).collect();
    let pfc_enable = if q.pfc_enabled {
        lossless
            .iter()
            .map(|c| c.traffic_class.to_string())
            .collect::<Vec<_>>()
            .join(",")
    } else {
        String::new()
    };
    let wd = &q.watchdog;
    if wd.enabled && q.pfc_enabled && !lossless.is_empty() {
        rows.push(ConfigRow::new(
            "PFC_WD",
            "GLOBAL",
            &[("POLL_INTERVAL", wd.poll_interval.as_millis().to_string())],
        ));
    }
    let mut cable = BTreeMap::new();
    let mut profiles: BTreeMap<String, ConfigRow> = BTreeMap::new();
    let mut wred: BTreeMap<String, ConfigRow> = BTreeMap::new();
    for p in &sw.ports {
        let connected = !matches!(p.peer, Peer::None);
        let (speed, len) = match p.peer {
            Peer::Switch { link } => (t.links[link].speed, t.links[link].cable_length),
            Peer::Host { host } => (t.hosts[host].speed, t.hosts[host].cable_length),
            Peer::None => (p.speed, p.cable_length),
        };
        rows.push(ConfigRow::new(
            "PORT",
            &p.name,
            &[
                ("id", p.id.to_string()),
                ("speed", (speed.bits_per_sec() / 1_000_000).to_string()),
                ("mtu", t.mtu.to_string()),
                (
                    "admin_status",
                    if p.admin_up { "up" } else { "down" }.to_string(),
                ),
            ],
        ));
        if !connected {
            continue;
        }
        cable.insert(p.name.clone(), format!("{}m", len.as_metres()));
        rows.push(ConfigRow::new(
            "PORT_QOS_MAP",
            &p.name,
            &[
                ("dscp_to_tc_map", MAP_NAME.to_string()),
                ("tc_to_queue_map", MAP_NAME.to_string()),
                ("tc_to_pg_map", MAP_NAME.to_string()),
                ("pfc_enable", pfc_enable.clone()),
            ],
        ));
        for c in &q.classes {
            let pq = q.port_qos(speed, len, t.mtu, c);
            let profile = format!("WEFT_{}_{}", c.name.to_uppercase(), speed);
            wred.entry(profile.clone()).or_insert_with(|| {
                ConfigRow::new(
                    "WRED_PROFILE",
                    &profile,
                    &[
                        ("ecn", "ecn_all".to_string()),
                        ("wred_green_enable", "true".to_string()),
                        ("green_min_threshold", pq.ecn.kmin.0.to_string()),
                        ("green_max_threshold", pq.ecn.kmax.0.to_string()),
                        (
                            "green_drop_probability",
                            format!("{}", (pq.ecn.pmax * 100.0).round() as u32),
                        ),
                    ],
                )
            });
            rows.push(ConfigRow::new(
                "QUEUE",
                format!("{}|{}", p.name, c.traffic_class),
                &[("wred_profile", profile)],
            ));
            if c.lossless && q.pfc_enabled {
                let prof = format!(
                    "pg_lossless_{}_{}m_profile",
                    speed.bits_per_sec() / 1_000_000,
                    len.as_metres()
                );
                profiles.entry(prof.clone()).or_insert_with(|| {
                    ConfigRow::new(
                        "BUFFER_PROFILE",
                        &prof,
                        &[
                            ("pool", "ingress_lossless_pool".to_string()),
                            ("xon", pq.headroom.xon.0.to_string()),
                            ("xoff", pq.headroom.xoff.0.to_string()),
                            ("size", pq.headroom.size.0.to_string()),
                            ("dynamic_th", "0".to_string()),
                        ],
                    )
                });
                rows.push(ConfigRow::new(
                    "BUFFER_PG",
                    format!("{}|{}", p.name, c.traffic_class),
                    &[("profile", prof)],
                ));
                if wd.enabled && c.traffic_class == lossless[0].traffic_class {
                    rows.push(ConfigRow::new(
                        "PFC_WD",
                        &p.name,
                        &[
                            ("action", wd.action.as_str().to_string()),
                            ("detection_time", wd.detection_time.as_millis().to_string()),
                            (
                                "restoration_time",
                                wd.restoration_time.as_millis().to_string(),
                            ),
                        ],
                    ));
                }
            }
            // The tuner's bounds: never under a quarter of the static values, never past the
            // pause threshold (so ECN still acts before PFC) nor past the port's buffer share.
            let ceiling = if c.lossless && q.pfc_enabled {
                pq.pause_threshold.0
            } else {
                pq.port_buffer.0
            };
            let kmax_max = ((pq.ecn.kmax.0 as f64 * ENVELOPE_HIGH) as u64).min(ceiling);
            let kmin_max =
                ((pq.ecn.kmin.0 as f64 * ENVELOPE_HIGH) as u64).min(kmax_max.saturating_sub(1));
            rows.push(ConfigRow::new(
                "WEFT_ECN_ENVELOPE",
                format!("{}|{}", p.name, c.traffic_class),
                &[
                    (
                        "kmin_min",
                        ((pq.ecn.kmin.0 as f64 * ENVELOPE_LOW) as u64).to_string(),
                    ),
                    ("kmin_max", kmin_max.to_string()),
                    (
                        "kmax_min",
                        ((pq.ecn.kmax.0 as f64 * ENVELOPE_LOW) as u64).to_string(),
                    ),
                    ("kmax_max", kmax_max.to_string()),
                    ("pmax_min", "0.01".to_string()),
                    ("pmax_max", "1".to_string()),
                    ("pause_threshold", pq.pause_threshold.0.to_string()),
                    (
                        "tuning",
                        match q.tuning {
                            Tuning::Auto => "auto",
                            Tuning::Off => "off",
                        }
                        .to_string(),
                    ),
                ],
            ));
        }
    }
    rows.extend(wred.into_values());
    rows.extend(profiles.into_values());
    if !cable.is_empty() {
        rows.push(ConfigRow {
            table: "CABLE_LENGTH".into(),
            key: "AZURE".into(),
            fields: cable,
        });
    }
    rows.sort_by(|a, b| (&a.table, &a.key).cmp(&(&b.table, &b.key)));
    SwitchQos { rows }
}
