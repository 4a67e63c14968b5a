//! QoS of one switch as SONiC CONFIG_DB rows (typed in `weft-sonic-schema`), so a real SONiC
//! switch could take the same intent and Weft's plugin derives the pipeline's QoS tables from
//! the same rows.
//!
//! ```text
//!   PORT|EthernetN                 id, speed, mtu, admin_status
//!   DSCP_TO_TC_MAP|WEFT            "<dscp>": "<tc>" for every DSCP a class names
//!   TC_TO_QUEUE_MAP|WEFT           "<tc>": "<queue>" (identity)
//!   TC_TO_PRIORITY_GROUP_MAP|WEFT  "<tc>": "<pg>" (identity)
//!   PORT_QOS_MAP|EthernetN         dscp_to_tc_map, tc_to_queue_map, tc_to_pg_map, pfc_enable
//!   WRED_PROFILE|WEFT_<class>_<speed>   ECN marking thresholds (bytes) and probability (%)
//!   QUEUE|EthernetN|<tc>           wred_profile
//!   CABLE_LENGTH|AZURE             EthernetN: "<len>m"
//!   BUFFER_PROFILE|pg_lossless_<speed>_<cable>_profile   xon, xoff, size (headroom model)
//!   BUFFER_PG|EthernetN|<tc>       profile
//!   PFC_WD|EthernetN, PFC_WD|GLOBAL  watchdog action and times (ms), poll interval
//!   WEFT_ECN_ENVELOPE|EthernetN|<tc>  the run-time tuner's bounds, under the pause threshold
//!   SWITCH_TRIMMING|GLOBAL         trimmed size, DSCP and queue (a class is trimmable)
//!   BUFFER_PROFILE|q_lossy_trim_profile  packet_discard_action trim
//!   BUFFER_QUEUE|EthernetN|<tc>    that profile, for every trimmable class's queue
//! ```
//!
//! Packet trimming follows SONiC's design (`SWITCH_TRIMMING|GLOBAL` size, `dscp_value`,
//! `queue_index`; the queue's buffer profile `packet_discard_action: trim`); the trimmed DSCP
//! joins `DSCP_TO_TC_MAP` toward the trimmed queue, so the next switch keeps trimmed packets
//! there too.
//!
//! Validation refuses intents whose buffers cannot hold the headroom or whose ECN thresholds
//! lie above the pause threshold; the compiler checks the same again on every row it emits
//! ([`QosError`]), so nothing unsafe reaches a switch even if a check upstream has a hole.

use std::collections::BTreeMap;

use weft_sonic_schema::config::{
    self as c, AdminStatus, BufferPg, BufferProfile, BufferQueue, CableLength, ConfigRow,
    DiscardAction, DscpToTcMap, EcnEnvelope, EcnMode, MAP_NAME, PfcWd, PfcWdAction, PfcWdGlobal,
    Port, PortQosMap, Queue, SwitchTrimming, TcToPriorityGroupMap, TcToQueueMap, WredProfile,
};
use weft_sonic_schema::{ClassList, Metres};
use weft_topology::qos::PortQos;
use weft_topology::units::Speed;
use weft_topology::{Peer, Qos, SwitchIdx, Topology, TrafficClass, Tuning, WatchdogAction};

/// The tuner may move Kmin and Kmax down to this fraction of their static values...
const ENVELOPE_LOW: f64 = 0.25;
/// ...and up to this multiple, but never past the pause threshold.
const ENVELOPE_HIGH: f64 = 2.0;

/// A row the compiler refuses to emit: the intent's QoS would be unsafe on this port. Validation
/// refuses such intents by the same rule ([`weft_topology::qos::PortQos::problem`]); this is
/// the check again where the rows are made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "switch {switch} port {port} class {class}: {problem:?} (cable {cable_m} m at {speed_gbps} Gb/s): refusing to emit its buffer profile and ECN envelope"
)]
pub struct QosError {
    pub switch: String,
    pub port: String,
    pub class: String,
    pub problem: weft_topology::qos::QosProblem,
    pub cable_m: u64,
    pub speed_gbps: u64,
}

fn wd_action(a: WatchdogAction) -> PfcWdAction {
    match a {
        WatchdogAction::Drop => PfcWdAction::Drop,
        WatchdogAction::Forward => PfcWdAction::Forward,
        WatchdogAction::Alert => PfcWdAction::Alert,
    }
}

/// Every CONFIG_DB row of switch `s`.
pub fn compile_switch(t: &Topology, s: SwitchIdx) -> Result<Vec<ConfigRow>, QosError> {
    let sw = &t.switches[s];
    let q = &t.qos;
    let lossless: Vec<&TrafficClass> = q.classes.iter().filter(|c| c.lossless).collect();
    let mut out = SwitchRows {
        rows: maps(q),
        cable: BTreeMap::new(),
        profiles: BTreeMap::new(),
        wred: BTreeMap::new(),
    };
    if let Some(tel) = &t.telemetry {
        out.rows
            .push(ConfigRow::Telemetry(weft_sonic_schema::config::Telemetry {
                name: weft_sonic_schema::config::TELEMETRY_KEY.into(),
                sample_n: tel.sample,
                max_records: tel.max_records,
            }));
    }
    let wd = &q.watchdog;
    if wd.enabled && q.pfc_enabled && !lossless.is_empty() {
        out.rows.push(ConfigRow::PfcWdGlobal(PfcWdGlobal {
            name: c::PFC_WD_GLOBAL.into(),
            poll_interval: Some(millis(wd.poll_interval.as_millis())),
        }));
    }
    if let Some(tr) = &q.trim {
        out.rows.push(ConfigRow::SwitchTrimming(SwitchTrimming {
            name: c::SWITCH_TRIMMING_KEY.into(),
            size: u32::try_from(tr.size.0).unwrap_or(u32::MAX),
            dscp_value: tr.dscp,
            queue_index: tr.traffic_class,
        }));
        // SONiC's own example profile: a dynamic share of the lossy pool, trimmed on failure.
        out.profiles.insert(
            c::TRIM_PROFILE.into(),
            BufferProfile {
                name: c::TRIM_PROFILE.into(),
                pool: Some("egress_lossy_pool".into()),
                xon: None,
                xoff: None,
                size: Some(0),
                dynamic_th: Some(3),
                packet_discard_action: Some(DiscardAction::Trim),
            },
        );
    }
    for p in &sw.ports {
        out.port(t, s, p, &lossless)?;
    }
    let SwitchRows {
        mut rows,
        cable,
        profiles,
        wred,
    } = out;
    rows.extend(wred.into_values().map(ConfigRow::WredProfile));
    rows.extend(profiles.into_values().map(ConfigRow::BufferProfile));
    if !cable.is_empty() {
        rows.push(ConfigRow::CableLength(CableLength {
            name: c::CABLE_LENGTH_NAME.into(),
            map: cable,
        }));
    }
    Ok(rows)
}

/// The switch-wide maps: DSCP to traffic class (every DSCP a class names), traffic class to
/// queue and to priority group (identities).
fn maps(q: &Qos) -> Vec<ConfigRow> {
    let mut dscp = BTreeMap::new();
    for c in &q.classes {
        for d in &c.dscp {
            dscp.insert(*d, c.traffic_class);
        }
    }
    if let Some(tr) = &q.trim {
        dscp.insert(tr.dscp, tr.traffic_class);
    }
    let identity: BTreeMap<u8, u8> = (0..8).map(|i| (i, i)).collect();
    vec![
        ConfigRow::DscpToTcMap(DscpToTcMap {
            name: MAP_NAME.into(),
            map: dscp,
        }),
        ConfigRow::TcToQueueMap(TcToQueueMap {
            name: MAP_NAME.into(),
            map: identity.clone(),
        }),
        ConfigRow::TcToPriorityGroupMap(TcToPriorityGroupMap {
            name: MAP_NAME.into(),
            map: identity,
        }),
    ]
}

/// A switch's rows as its ports are compiled; profiles and cable lengths are shared by ports
/// and emitted once, after them.
struct SwitchRows {
    rows: Vec<ConfigRow>,
    cable: BTreeMap<String, Metres>,
    profiles: BTreeMap<String, BufferProfile>,
    wred: BTreeMap<String, WredProfile>,
}

impl SwitchRows {
    /// Port `p` of switch `s`: its PORT row and, when connected, its QoS map and one queue
    /// (and lossless priority group) per traffic class.
    fn port(
        &mut self,
        t: &Topology,
        s: SwitchIdx,
        p: &weft_topology::Port,
        lossless: &[&TrafficClass],
    ) -> Result<(), QosError> {
        let q = &t.qos;
        let connected = !matches!(p.peer, Peer::None);
        let (speed, len) = match p.peer {
            Peer::Switch { link } => (t.links[link].speed, t.links[link].cable_length),
            Peer::Host { host } => (t.hosts[host].speed, t.hosts[host].cable_length),
            Peer::None => (p.speed, p.cable_length),
        };
        self.rows.push(ConfigRow::Port(Port {
            port: p.name.clone(),
            id: p.id,
            speed: Some(speed.bits_per_sec() / 1_000_000),
            mtu: Some(t.mtu),
            admin_status: Some(if p.admin_up {
                AdminStatus::Up
            } else {
                AdminStatus::Down
            }),
        }));
        if !connected {
            return Ok(());
        }
        let metres = len.as_metres().round() as u64;
        self.cable.insert(p.name.clone(), Metres(metres));
        let pfc_enable: ClassList = if q.pfc_enabled {
            lossless.iter().map(|c| c.traffic_class).collect()
        } else {
            ClassList::default()
        };
        self.rows.push(ConfigRow::PortQosMap(PortQosMap {
            port: p.name.clone(),
            dscp_to_tc_map: Some(MAP_NAME.into()),
            tc_to_queue_map: Some(MAP_NAME.into()),
            tc_to_pg_map: Some(MAP_NAME.into()),
            pfc_enable: Some(pfc_enable),
        }));
        let mut classes_done = std::collections::BTreeSet::new();
        for c in &q.classes {
            if !classes_done.insert(c.traffic_class) {
                // Classes that share a traffic class share its queue (validation made sure
                // they agree on it): one row per traffic class.
                continue;
            }
            let pq = q.port_qos(speed, len, t.mtu, c);
            let lossless_here = q.pfc_protects(c);
            if let Some(problem) = pq.problem(lossless_here) {
                return Err(QosError {
                    switch: t.switches[s].name.clone(),
                    port: p.name.clone(),
                    class: c.name.clone(),
                    problem,
                    cable_m: metres,
                    speed_gbps: speed.bits_per_sec() / 1_000_000_000,
                });
            }
            let at = ClassAt {
                port: &p.name,
                speed,
                metres,
                class: c,
                pq: &pq,
            };
            self.queue(&at);
            if c.trimmable {
                self.rows.push(ConfigRow::BufferQueue(BufferQueue {
                    port: p.name.clone(),
                    queues: ClassList::single(c.traffic_class),
                    profile: c::TRIM_PROFILE.into(),
                }));
            }
            if lossless_here {
                let first_lossless = c.traffic_class == lossless[0].traffic_class;
                self.lossless(q, &at, first_lossless);
            }
            self.rows.push(envelope(q, &at, lossless_here));
        }
        Ok(())
    }

    /// The class's queue and its WRED (ECN marking) profile.
    fn queue(&mut self, at: &ClassAt) {
        let (c, pq) = (at.class, at.pq);
        let profile = format!("WEFT_{}_{}", c.name.to_uppercase(), at.speed);
        self.wred
            .entry(profile.clone())
            .or_insert_with(|| WredProfile {
                name: profile.clone(),
                ecn: Some(EcnMode::All),
                wred_green_enable: Some(true),
                green_min_threshold: Some(pq.ecn.kmin.0),
                green_max_threshold: Some(pq.ecn.kmax.0),
                green_drop_probability: Some((pq.ecn.pmax * 100.0).round()),
            });
        self.rows.push(ConfigRow::Queue(Queue {
            port: at.port.to_string(),
            queues: ClassList::single(c.traffic_class),
            wred_profile: Some(profile),
        }));
    }

    /// A lossless class's priority group with its headroom profile, and (for the first
    /// lossless class) the port's PFC watchdog.
    fn lossless(&mut self, q: &Qos, at: &ClassAt, first_lossless: bool) {
        let (c, pq) = (at.class, at.pq);
        let prof = format!(
            "pg_lossless_{}_{}m_profile",
            at.speed.bits_per_sec() / 1_000_000,
            at.metres
        );
        self.profiles
            .entry(prof.clone())
            .or_insert_with(|| BufferProfile {
                name: prof.clone(),
                pool: Some("ingress_lossless_pool".into()),
                xon: Some(pq.headroom.xon.0),
                xoff: Some(pq.headroom.xoff.0),
                size: Some(pq.headroom.size.0),
                dynamic_th: Some(0),
                packet_discard_action: None,
            });
        self.rows.push(ConfigRow::BufferPg(BufferPg {
            port: at.port.to_string(),
            classes: ClassList::single(c.traffic_class),
            profile: prof,
        }));
        let wd = &q.watchdog;
        if wd.enabled && first_lossless {
            self.rows.push(ConfigRow::PfcWd(PfcWd {
                port: at.port.to_string(),
                action: Some(wd_action(wd.action)),
                detection_time: Some(millis(wd.detection_time.as_millis())),
                restoration_time: Some(millis(wd.restoration_time.as_millis())),
            }));
        }
    }
}

/// One traffic class on one port, with what the headroom and ECN models give it there.
struct ClassAt<'a> {
    port: &'a str,
    speed: Speed,
    metres: u64,
    class: &'a TrafficClass,
    pq: &'a PortQos,
}

/// The tuner's bounds: never under a quarter of the static values, never past the pause
/// threshold (so ECN still acts before PFC) nor past the port's buffer share.
fn envelope(q: &Qos, at: &ClassAt, lossless_here: bool) -> ConfigRow {
    let pq = at.pq;
    let ceiling = if lossless_here {
        pq.pause_threshold.0
    } else {
        pq.port_buffer.0
    };
    let kmax_max = ((pq.ecn.kmax.0 as f64 * ENVELOPE_HIGH) as u64).min(ceiling);
    let kmin_max = ((pq.ecn.kmin.0 as f64 * ENVELOPE_HIGH) as u64).min(kmax_max.saturating_sub(1));
    ConfigRow::EcnEnvelope(EcnEnvelope {
        port: at.port.to_string(),
        tc: at.class.traffic_class,
        kmin_min: (pq.ecn.kmin.0 as f64 * ENVELOPE_LOW) as u64,
        kmin_max,
        kmax_min: (pq.ecn.kmax.0 as f64 * ENVELOPE_LOW) as u64,
        kmax_max,
        pmax_min: 0.01,
        pmax_max: 1.0,
        pause_threshold: pq.pause_threshold.0,
        tuning: match q.tuning {
            Tuning::Auto => c::Tuning::Auto,
            Tuning::Off => c::Tuning::Off,
        },
    })
}

fn millis(ms: u64) -> u32 {
    u32::try_from(ms).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Topology {
        weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example")
    }

    #[test]
    fn every_lossless_port_gets_headroom_under_its_buffer_and_ecn_before_pfc() {
        let t = small();
        for s in 0..t.switches.len() {
            let rows = compile_switch(&t, s).expect("the example is safe");
            let profiles: BTreeMap<String, &BufferProfile> = rows
                .iter()
                .filter_map(|r| match r {
                    ConfigRow::BufferProfile(p) => Some((p.name.clone(), p)),
                    _ => None,
                })
                .collect();
            let lossless: std::collections::BTreeSet<(String, u8)> = rows
                .iter()
                .filter_map(|r| match r {
                    ConfigRow::BufferPg(pg) => {
                        pg.classes.iter().next().map(|c| (pg.port.clone(), c))
                    }
                    _ => None,
                })
                .collect();
            assert!(!lossless.is_empty() || t.switches[s].ports.is_empty());
            for r in &rows {
                if let ConfigRow::EcnEnvelope(e) = r {
                    if lossless.contains(&(e.port.clone(), e.tc)) {
                        assert!(e.kmax_max <= e.pause_threshold, "{e:?}");
                    }
                    assert!(e.kmin_max < e.kmax_max, "{e:?}");
                }
                if let ConfigRow::BufferPg(pg) = r {
                    let p = profiles[&pg.profile];
                    let (xon, xoff, size) =
                        (p.xon.unwrap_or(0), p.xoff.unwrap_or(0), p.size.unwrap_or(0));
                    assert!(xon <= xoff && size == xon + xoff, "{p:?}");
                }
            }
        }
    }

    #[test]
    fn a_trimmable_class_gets_sonics_trimming_rows_and_no_pfc() {
        let t = weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-trim.yaml"
        ))
        .expect("example");
        let leaf = t.switch_index("leaf1").expect("leaf1");
        let rows = compile_switch(&t, leaf).expect("safe");
        let trimming: Vec<&SwitchTrimming> = rows
            .iter()
            .filter_map(|r| match r {
                ConfigRow::SwitchTrimming(x) => Some(x),
                _ => None,
            })
            .collect();
        assert_eq!(trimming.len(), 1);
        assert_eq!(
            (
                trimming[0].size,
                trimming[0].dscp_value,
                trimming[0].queue_index
            ),
            (256, 11, 7)
        );
        let db = c::ConfigDb::from_rows(
            rows.iter()
                .map(|r| (r.table(), r.key(), r.to_fields()))
                .collect::<Vec<_>>()
                .iter()
                .map(|(t, k, f)| (*t, k.as_str(), f)),
        );
        assert!(db.errors.is_empty(), "{:?}", db.errors);
        // Every connected port's RoCE queue trims, no other queue does, and nothing is paused.
        let connected: Vec<&str> = t.switches[leaf]
            .ports
            .iter()
            .filter(|p| !matches!(p.peer, Peer::None))
            .map(|p| p.name.as_str())
            .collect();
        assert!(!connected.is_empty());
        for p in &connected {
            assert!(db.trims(p, 3), "{p}");
            assert!((0..8).filter(|q| *q != 3).all(|q| !db.trims(p, q)), "{p}");
            assert!(db.pfc_enabled(p).iter().next().is_none(), "{p}");
        }
        assert!(!rows.iter().any(|r| matches!(r, ConfigRow::BufferPg(_))));
        // The trimmed DSCP reaches the trimmed queue on the next switch too.
        assert_eq!(db.dscp_to_tc[MAP_NAME].map.get(&11), Some(&7));
        assert_eq!(db.dscp_to_tc[MAP_NAME].map.get(&26), Some(&3));
    }

    #[test]
    fn a_cable_too_long_for_the_buffer_is_refused_not_emitted() {
        // 40 km at 400G needs ~20 MB of headroom: more than any port buffer the defaults give.
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example");
        let mut t = weft_topology::load_str(&text, "x.yaml").expect("valid");
        for l in &mut t.links {
            l.cable_length = weft_topology::units::Length::metres(40_000);
        }
        let errs: Vec<QosError> = (0..t.switches.len())
            .filter_map(|s| compile_switch(&t, s).err())
            .collect();
        assert!(!errs.is_empty(), "40 km links must be refused");
        assert!(
            errs.iter()
                .all(|e| e.problem == weft_topology::qos::QosProblem::HeadroomFillsBuffer),
            "{errs:?}"
        );
    }
}
