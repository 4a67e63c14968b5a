//! What the controller asks of this switch, read from CONFIG_DB once per change: the port map
//! and, per (port, queue), its ECN thresholds, PFC thresholds, tuning envelope and watchdog.
//! Every feature (QoS tables, tuning, watchdog, ports) reads this, never the rows themselves,
//! so two features cannot read one row two ways.
//!
//! ```text
//!   CONFIG_DB rows ──ConfigDb (weft-sonic-schema)──► SwitchIntent
//!     PORT|p                    ports (name → id), speed, MTU, admin_status
//!     PORT_QOS_MAP|p            dscp map name, pfc_enable ─┐
//!     DSCP_TO_TC_MAP|m          dscp → tc                   ├► classify: dscp → (tc, lossless)
//!     QUEUE|p|q → WRED_PROFILE  ecn (kmin, kmax, pmax)     ─┤
//!     BUFFER_PG|p|q → BUFFER_PROFILE  xon, xoff            ─┼► QueueIntent per (p, q)
//!     WEFT_ECN_ENVELOPE|p|q     envelope, tuning, pause    ─┤
//!     PFC_WD|p, PFC_WD|GLOBAL   watchdog, poll             ─┘
//! ```
//! The pause threshold of a lossless queue is the envelope's `pause_threshold` (port buffer
//! minus headroom, from the controller) or, without an envelope, the profile's `xoff`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use weft_appdb::PortMap;
use weft_sonic_db::FieldValues;
use weft_sonic_schema::config::{ConfigDb, EcnMode, PfcWdAction, Tuning};
use weft_tuning::{Envelope, Thresholds};

use crate::config::QueueModel;

/// SONiC's default MTU when a PORT row has none.
pub const DEFAULT_MTU: u32 = 9100;
/// The PFC watchdog's poll interval when `PFC_WD|GLOBAL` says nothing (SONiC's default).
pub const DEFAULT_WD_POLL: Duration = Duration::from_millis(100);
/// A port's line rate when its PORT row has no speed, Mb/s.
const DEFAULT_SPEED_MBPS: u64 = 100_000;

/// SONiC's limits for the watchdog's times (`PFC_WD` in Configuration.md, pfcwdorch).
const DETECTION_RANGE_MS: (u32, u32) = (100, 5000);
const RESTORATION_RANGE_MS: (u32, u32) = (100, 60_000);

pub type QueueKey = (String, u8);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WdConfig {
    pub action: PfcWdAction,
    pub detection: Duration,
    pub restoration: Duration,
}

/// One (port, queue) as the controller configured it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueIntent {
    pub port_id: Option<u32>,
    /// Bytes one BMv2 queue slot stands for: `--cell-bytes`, else the port's MTU.
    pub cell: u32,
    pub speed_mbps: u64,
    /// ECN marking from WRED_PROFILE (bytes; Pmax as a probability), when ECN is on.
    pub ecn: Option<Thresholds>,
    /// The tuner's bounds, when the controller gave any, and whether it may move.
    pub envelope: Option<Envelope>,
    pub tuning: Tuning,
    /// PFC on this queue: (pause threshold, xon) in bytes.
    pub pause: Option<(u64, u64)>,
    pub watchdog: Option<WdConfig>,
}

/// CONFIG_DB as the plugin's features need it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwitchIntent {
    pub ports: PortMap,
    pub admin_down: BTreeSet<String>,
    /// The one DSCP map the pipeline has: dscp → class.
    pub dscp: BTreeMap<u8, u8>,
    /// Classes PFC protects on some port.
    pub lossless_classes: BTreeSet<u8>,
    /// Ports with PFC on some class (they need a PAUSE clone session).
    pub pfc_ports: BTreeSet<String>,
    pub queues: BTreeMap<QueueKey, QueueIntent>,
    pub wd_poll: Duration,
    /// CONFIG_DB WEFT_TELEMETRY: (1-in-N sampling, records kept); `None`: postcards off.
    pub telemetry: Option<(u32, u64)>,
    /// Packet trimming (SWITCH_TRIMMING|GLOBAL and the queues whose profile trims).
    pub trim: Option<crate::trim::TrimIntent>,
    /// Problems in the rows; the rest is used.
    pub warnings: Vec<String>,
}

impl SwitchIntent {
    /// From `(table, key, fields)` rows of CONFIG_DB.
    pub fn from_rows<'a>(
        rows: impl IntoIterator<Item = (&'a str, &'a str, &'a FieldValues)>,
        model: &QueueModel,
    ) -> SwitchIntent {
        let db = ConfigDb::from_rows(rows);
        Self::from_db(&db, model)
    }

    pub fn from_db(db: &ConfigDb, model: &QueueModel) -> SwitchIntent {
        let mut out = SwitchIntent {
            wd_poll: DEFAULT_WD_POLL,
            warnings: db.errors.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        };
        for (name, p) in &db.ports {
            if (1..512).contains(&p.id) {
                out.ports.by_name.insert(name.clone(), p.id);
            } else {
                out.warnings.push(format!(
                    "PORT|{name} id {} is not a port number in 1..511",
                    p.id
                ));
            }
            if p.admin_status == Some(weft_sonic_schema::config::AdminStatus::Down) {
                out.admin_down.insert(name.clone());
            }
        }
        out.classification(db);
        out.trim = crate::trim::intent(db, &out.ports);
        if out.trim.as_ref().is_some_and(|t| t.uneven) {
            out.warnings.push(
                "trimming ports trim different queues: the pipeline trims the union on each".into(),
            );
        }
        out.telemetry = db
            .telemetry
            .as_ref()
            .map(|t| (t.sample_n, t.max_records.max(1)));
        if let Some(ms) = db.pfc_wd_global.as_ref().and_then(|g| g.poll_interval) {
            out.wd_poll = Duration::from_millis(u64::from(ms.clamp(10, 10_000)));
        }

        let cell = |port: &str| {
            model
                .cell_bytes
                .unwrap_or_else(|| db.mtu(port).unwrap_or(DEFAULT_MTU))
        };
        let mut keys: BTreeSet<QueueKey> = BTreeSet::new();
        for q in &db.queues {
            keys.extend(q.queues.iter().map(|c| (q.port.clone(), c)));
        }
        for b in &db.buffer_pgs {
            keys.extend(b.classes.iter().map(|c| (b.port.clone(), c)));
        }
        keys.extend(db.envelopes.keys().cloned());
        for (port, q) in keys {
            let ecn = out.ecn_of(db, &port, q);
            let pfc_on = db.pfc_enabled(&port).contains(q);
            let envelope_row = db.envelopes.get(&(port.clone(), q));
            let pause = if pfc_on {
                let profile = db.buffer_profile_of(&port, q);
                let xon = profile.and_then(|p| p.xon).unwrap_or(0);
                match (envelope_row, profile.and_then(|p| p.xoff)) {
                    (Some(e), _) => Some((e.pause_threshold, xon)),
                    (None, Some(xoff)) => Some((xoff, xon)),
                    (None, None) => {
                        out.warnings.push(format!(
                            "{port}|{q}: PFC enabled but no BUFFER_PG profile and no WEFT_ECN_ENVELOPE pause_threshold"
                        ));
                        None
                    }
                }
            } else {
                None
            };
            let watchdog = if pfc_on {
                db.pfc_wd.get(&port).map(|w| out.watchdog_of(&port, w))
            } else {
                None
            };
            let intent = QueueIntent {
                port_id: out.ports.id(&port),
                cell: cell(&port),
                speed_mbps: db
                    .ports
                    .get(&port)
                    .and_then(|p| p.speed)
                    .filter(|s| *s > 0)
                    .unwrap_or(DEFAULT_SPEED_MBPS),
                ecn,
                envelope: envelope_row.map(|e| Envelope {
                    kmin_min: e.kmin_min,
                    kmin_max: e.kmin_max,
                    kmax_min: e.kmax_min,
                    kmax_max: e.kmax_max,
                    pmax_min: e.pmax_min,
                    pmax_max: e.pmax_max,
                }),
                tuning: envelope_row.map_or(Tuning::Off, |e| e.tuning),
                pause,
                watchdog,
            };
            if intent.port_id.is_none() && (intent.ecn.is_some() || intent.pause.is_some()) {
                out.warnings.push(format!(
                    "{port}: thresholds configured but no PORT|{port} id"
                ));
            }
            out.queues.insert((port, q), intent);
        }
        out
    }

    /// The pipeline has one DSCP table, so one map for the switch (the one most ports name);
    /// a class is lossless if any port enables PFC on it.
    fn classification(&mut self, db: &ConfigDb) {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for (port, q) in &db.port_qos {
            if let Some(m) = &q.dscp_to_tc_map {
                *votes.entry(m.as_str()).or_default() += 1;
            }
            let pfc = q.pfc_enable.clone().unwrap_or_default();
            if !pfc.is_empty() {
                self.pfc_ports.insert(port.clone());
            }
            self.lossless_classes.extend(pfc.iter());
        }
        if votes.len() > 1 {
            self.warnings.push(format!(
                "ports name different DSCP_TO_TC_MAPs ({}); the pipeline has one, using the most common",
                votes.keys().copied().collect::<Vec<_>>().join(", ")
            ));
        }
        let name = votes
            .iter()
            .max_by_key(|(name, n)| (**n, std::cmp::Reverse(**name)))
            .map(|(n, _)| n.to_string())
            .or_else(|| {
                (db.dscp_to_tc.len() == 1)
                    .then(|| db.dscp_to_tc.keys().next().cloned())
                    .flatten()
            });
        let Some(name) = name else { return };
        match db.dscp_to_tc.get(&name) {
            None => self.warnings.push(format!(
                "DSCP_TO_TC_MAP|{name} is named by PORT_QOS_MAP but does not exist"
            )),
            Some(m) => {
                for (&d, &c) in &m.map {
                    if d > 63 || c > 7 {
                        self.warnings.push(format!(
                            "DSCP_TO_TC_MAP|{name}: {d} → {c} is not dscp 0..63 → class 0..7"
                        ));
                        continue;
                    }
                    self.dscp.insert(d, c);
                }
            }
        }
    }

    fn ecn_of(&mut self, db: &ConfigDb, port: &str, q: u8) -> Option<Thresholds> {
        let qrow = db
            .queues
            .iter()
            .find(|r| r.port == port && r.queues.contains(q))?;
        let name = qrow.wred_profile.as_deref()?;
        let Some(w) = db.wred.get(name) else {
            self.warnings.push(format!(
                "QUEUE|{port}|{q}: WRED_PROFILE|{name} does not exist"
            ));
            return None;
        };
        if w.ecn.is_none_or(|e| e == EcnMode::None) {
            return None;
        }
        let (Some(kmin), Some(kmax)) = (w.green_min_threshold, w.green_max_threshold) else {
            self.warnings.push(format!(
                "WRED_PROFILE|{name}: ECN on but green_min_threshold/green_max_threshold missing"
            ));
            return None;
        };
        Some(Thresholds {
            kmin,
            kmax,
            pmax: (w.green_drop_probability.unwrap_or(100.0) / 100.0).clamp(0.0, 1.0),
        })
    }

    fn watchdog_of(&mut self, port: &str, w: &weft_sonic_schema::config::PfcWd) -> WdConfig {
        let mut ms = |field: &str, v: Option<u32>, range: (u32, u32), default: u32| -> Duration {
            let Some(v) = v else {
                return Duration::from_millis(u64::from(default));
            };
            let ok = (range.0..=range.1).contains(&v);
            if !ok {
                self.warnings.push(format!(
                    "PFC_WD|{port}: {field} {v} outside {}..={} ms, using {default}",
                    range.0, range.1
                ));
            }
            Duration::from_millis(u64::from(if ok { v } else { default }))
        };
        WdConfig {
            action: w.action.unwrap_or(PfcWdAction::Drop),
            detection: ms("detection_time", w.detection_time, DETECTION_RANGE_MS, 200),
            restoration: ms(
                "restoration_time",
                w.restoration_time,
                RESTORATION_RANGE_MS,
                200,
            ),
        }
    }

    pub fn queue(&self, port: &str, q: u8) -> Option<&QueueIntent> {
        self.queues.get(&(port.to_string(), q))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// (table, key, fields) as CONFIG_DB holds them.
    pub type Rows<'a> = [(&'a str, &'a str, &'a [(&'a str, &'a str)])];

    /// Builds a SwitchIntent from rows written the way CONFIG_DB holds them.
    pub fn intent(rows: &Rows, model: &QueueModel) -> SwitchIntent {
        let owned: Vec<(String, String, FieldValues)> = rows
            .iter()
            .map(|(t, k, f)| {
                (
                    t.to_string(),
                    k.to_string(),
                    f.iter()
                        .map(|(a, b)| (a.to_string(), b.to_string()))
                        .collect(),
                )
            })
            .collect();
        SwitchIntent::from_rows(
            owned.iter().map(|(t, k, f)| (t.as_str(), k.as_str(), f)),
            model,
        )
    }

    const P1: &[(&str, &str)] = &[
        ("id", "1"),
        ("mtu", "9100"),
        ("speed", "100000"),
        ("admin_status", "up"),
    ];
    const P2: &[(&str, &str)] = &[
        ("id", "2"),
        ("mtu", "9100"),
        ("speed", "100000"),
        ("admin_status", "up"),
    ];

    #[test]
    fn the_pause_threshold_is_the_envelopes_else_the_profiles_xoff_the_same_for_every_feature() {
        let env = [
            ("kmin_min", "1"),
            ("kmin_max", "2"),
            ("kmax_min", "3"),
            ("kmax_max", "4"),
            ("pmax_min", "0.01"),
            ("pmax_max", "1"),
            ("pause_threshold", "900000"),
            ("tuning", "auto"),
        ];
        let qos = [
            ("dscp_to_tc_map", "WEFT"),
            ("tc_to_queue_map", "WEFT"),
            ("tc_to_pg_map", "WEFT"),
            ("pfc_enable", "3"),
        ];
        let prof = [
            ("pool", "p"),
            ("xon", "19456"),
            ("xoff", "46080"),
            ("size", "65536"),
            ("dynamic_th", "0"),
        ];
        let rows: &Rows = &[
            ("PORT", "Ethernet0", P1),
            ("PORT", "Ethernet4", P2),
            ("DSCP_TO_TC_MAP", "WEFT", &[("26", "3")]),
            ("PORT_QOS_MAP", "Ethernet0", &qos),
            ("PORT_QOS_MAP", "Ethernet4", &qos),
            ("BUFFER_PROFILE", "P", &prof),
            ("BUFFER_PG", "Ethernet0|3", &[("profile", "P")]),
            ("BUFFER_PG", "Ethernet4|3", &[("profile", "P")]),
            ("WEFT_ECN_ENVELOPE", "Ethernet0|3", &env),
        ];
        let i = intent(rows, &QueueModel::default());
        assert_eq!(
            i.queue("Ethernet0", 3).and_then(|q| q.pause),
            Some((900_000, 19_456))
        );
        assert_eq!(
            i.queue("Ethernet4", 3).and_then(|q| q.pause),
            Some((46_080, 19_456))
        );
        assert_eq!(i.lossless_classes, [3].into());
        assert!(i.warnings.is_empty(), "{:?}", i.warnings);
    }

    #[test]
    fn pfc_wd_rows_take_sonic_defaults_and_ranges() {
        let qos = [
            ("dscp_to_tc_map", "WEFT"),
            ("tc_to_queue_map", "WEFT"),
            ("tc_to_pg_map", "WEFT"),
            ("pfc_enable", "3"),
        ];
        let rows: &Rows = &[
            ("PORT", "Ethernet0", P1),
            ("DSCP_TO_TC_MAP", "WEFT", &[("26", "3")]),
            ("PORT_QOS_MAP", "Ethernet0", &qos),
            (
                "BUFFER_PROFILE",
                "P",
                &[
                    ("pool", "p"),
                    ("xon", "1"),
                    ("xoff", "2"),
                    ("size", "3"),
                    ("dynamic_th", "0"),
                ],
            ),
            ("BUFFER_PG", "Ethernet0|3", &[("profile", "P")]),
            (
                "PFC_WD",
                "Ethernet0",
                &[("action", "forward"), ("detection_time", "50")],
            ),
            ("PFC_WD", "GLOBAL", &[("POLL_INTERVAL", "50")]),
        ];
        let i = intent(rows, &QueueModel::default());
        assert_eq!(i.wd_poll, Duration::from_millis(50));
        let wd = i
            .queue("Ethernet0", 3)
            .and_then(|q| q.watchdog)
            .expect("watched");
        assert_eq!(wd.action, PfcWdAction::Forward);
        assert_eq!(
            wd.detection,
            Duration::from_millis(200),
            "50 ms is out of range"
        );
        assert_eq!(
            wd.restoration,
            Duration::from_millis(200),
            "SONiC's default"
        );
        assert_eq!(i.warnings.len(), 1, "{:?}", i.warnings);
    }

    #[test]
    fn bad_rows_are_warnings_and_the_rest_is_used() {
        let rows: &Rows = &[
            ("PORT", "Ethernet0", P1),
            ("PORT", "Ethernet4", &[("id", "x")]),
            ("QUEUE", "Ethernet0|3", &[("wred_profile", "NOPE")]),
        ];
        let i = intent(rows, &QueueModel::default());
        assert_eq!(i.ports.id("Ethernet0"), Some(1));
        assert_eq!(i.ports.id("Ethernet4"), None);
        assert!(
            i.warnings.iter().any(|w| w.contains("PORT|Ethernet4")),
            "{:?}",
            i.warnings
        );
        assert!(
            i.warnings.iter().any(|w| w.contains("WRED_PROFILE|NOPE")),
            "{:?}",
            i.warnings
        );
    }
}
