//! The plugin's features around its engine, each a module with a small interface (intent in,
//! desired switch objects / counter reads out, observations in, rows to publish out). Nothing
//! here does I/O: the daemon reads and writes.
//!
//! ```text
//!   SwitchIntent (CONFIG_DB) ──► qos::objects        switch config (DSCP map, hash seed,
//!                           │        ▲               watchdog ports), queue_config_table
//!                           │        │               (ECN + PFC per queue), clone sessions
//!                           ├─► Tuning::thresholds   ECN per queue (static or tuned)
//!                           └─► Watchdog::objects    pfc_watchdog_table (stormed queues),
//!                                                    and its ports for the switch config
//!   Features::desired = all of it ─► Engine::apply_owned / full_sync
//!
//!   counter reads ──► Watchdog::observe ─► PFC_WD_STATE rows, COUNTERS watchdog fields
//!                 ──► Tuning::observe   ─► WEFT_ECN_TUNING rows, histograms, new ECN entries
//!                 ──► counters::rows    ─► COUNTERS rows
//! ```

use std::collections::BTreeMap;

use weft_p4::counters as c;
use weft_p4rt::P4Info;
use weft_p4rt::proto::p4::v1::{Entity, entity};
use weft_sonic_db::FieldValues;
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{PortCounters, QueueCounters};
use weft_sonic_schema::state::{EcnTuningState, PfcWdState, WdStatus};

use crate::clock::Now;
use crate::config::QueueModel;
use crate::counters::{Cells, queue_cell};
use crate::intent::{QueueKey, SwitchIntent};
use crate::objects::Objects;
use crate::qos::{self, SwitchSettings};
use crate::tuning::Tuning;
use crate::watchdog::{Watchdog, WdEvent};

/// Rows a poll wants written, by database.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Publish {
    /// STATE_DB rows replaced whole: (table, key, fields).
    pub state: Vec<(&'static str, String, FieldValues)>,
    /// STATE_DB rows removed: (table, key).
    pub state_delete: Vec<(&'static str, String)>,
    /// COUNTERS_DB `COUNTERS` rows, fields merged (several writers share a row).
    pub counters: Vec<(String, FieldValues)>,
    /// `WEFT_COUNTERS_SNAPSHOT` fields (the packed copy of some of `counters`).
    pub snapshot: FieldValues,
}

impl Publish {
    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
            && self.state_delete.is_empty()
            && self.counters.is_empty()
            && self.snapshot.is_empty()
    }

    fn state_row<R: Row>(&mut self, r: &R) {
        self.state.push((R::TABLE, r.key(), r.to_fields()));
    }
}

/// What the plugin's features want of the switch, and their state.
/// Per port: the pipeline's cumulative queue-depth histogram buckets.
pub type DepthHistograms = BTreeMap<String, [u64; crate::tuning::HIST_BUCKETS as usize]>;

/// The clone session postcards use (PFC frames use 1024 + port; 1..511 are free).
pub const POSTCARD_SESSION: u32 = 500;

#[derive(Debug, Clone)]
pub struct Features {
    pub intent: SwitchIntent,
    pub tuning: Tuning,
    pub wd: Watchdog,
    model: QueueModel,
    device_id: u64,
    /// Every port's last published depth histogram: a tick reads only the ports busy the tick
    /// before, and the snapshot's copy must hold what the rows hold (all of them).
    histograms: DepthHistograms,
}

impl Features {
    pub fn new(model: QueueModel, line_rate: BTreeMap<String, f64>, device_id: u64) -> Self {
        Features {
            intent: SwitchIntent::default(),
            tuning: Tuning::new(model, line_rate),
            wd: Watchdog::default(),
            model,
            device_id,
            histograms: DepthHistograms::new(),
        }
    }

    /// Takes a new intent. `restored`: the tuning records an earlier run left in STATE_DB, for
    /// queues this run has not seen yet. Returns the tuning rows to write and delete.
    pub fn configure(
        &mut self,
        intent: SwitchIntent,
        restored: &BTreeMap<QueueKey, EcnTuningState>,
    ) -> Publish {
        let (write, gone) = self.tuning.reconfigure(&intent, restored);
        self.wd.reconfigure(&intent);
        self.intent = intent;
        let mut p = Publish::default();
        for k in write {
            if let Some(st) = self.tuning.queues.get(&k) {
                p.state_row(&st.record(&k));
            }
        }
        for (port, q) in gone {
            p.state_delete
                .push((EcnTuningState::TABLE, format!("{port}|{q}")));
        }
        p
    }

    /// Every plugin-owned switch object: QoS tables, ECN thresholds, watchdog entries.
    pub fn desired(&self, info: &P4Info) -> Result<Objects, weft_p4rt::Error> {
        let (postcard_sample_n, postcard_session) = match self.intent.telemetry {
            Some((n, _)) => (n, POSTCARD_SESSION),
            None => (0, 0),
        };
        let ports = &self.intent.ports;
        let port_id = |p: &str| ports.id(p);
        let settings = SwitchSettings {
            device_id: self.device_id,
            hash_seed: weft_p4::hash_seed(self.device_id),
            histogram_shift: self.tuning.shift,
            postcard_sample_n,
            postcard_session,
            watchdog_ports: self.wd.ports_with_entries(&port_id),
        };
        let mut o = qos::objects(
            info,
            &self.intent,
            &self.model,
            &settings,
            &self.tuning.thresholds(),
        )?;
        qos::put(
            &mut o,
            crate::trim::trim_config(info, self.intent.trim.as_ref(), &self.model)?,
        );
        if postcard_session != 0 {
            // Postcards go to the CPU port: packet-ins to this plugin.
            qos::put(
                &mut o,
                Entity {
                    entity: Some(entity::Entity::PacketReplicationEngineEntry(
                        weft_p4rt::clone_session(
                            POSTCARD_SESSION,
                            [(u32::from(weft_p4::constants::CPU_PORT), 1)],
                            0,
                            0,
                        ),
                    )),
                },
            );
        }
        o.extend(self.wd.objects(info, &port_id)?);
        Ok(o)
    }

    /// The watchdog's counter reads: PAUSE frames received per watched (port, priority).
    pub fn watchdog_reads(&self, info: &P4Info) -> Vec<Entity> {
        let mut out = Vec::new();
        for (port, prio) in self.wd.queues.keys() {
            let Some(id) = self.intent.ports.id(port) else {
                continue;
            };
            let i = i64::from(queue_cell(id, *prio));
            if let Ok(ce) = info.counter_entry(c::pfc_rx_pause_counter::NAME, Some(i)) {
                out.push(Entity {
                    entity: Some(entity::Entity::CounterEntry(ce)),
                });
            }
        }
        out
    }

    /// Feeds the watchdog one poll; returns the events (the caller re-applies the owned
    /// objects when there are any) and the rows to publish.
    pub fn observe_watchdog(
        &mut self,
        cells: &Cells,
        now: Now,
    ) -> (Vec<(QueueKey, WdEvent)>, Publish) {
        let mut events = Vec::new();
        for (key, q) in self.wd.queues.iter_mut() {
            let Some(id) = self.intent.ports.id(&key.0) else {
                continue;
            };
            let i = i64::from(queue_cell(id, key.1));
            let count = cells
                .get(&(c::pfc_rx_pause_counter::ID, i))
                .map_or(0, |c| c.0);
            if let Some(ev) = q.observe(count, now.at) {
                events.push((key.clone(), ev));
            }
        }
        let mut p = Publish::default();
        for (key, _) in &events {
            let Some(q) = self.wd.queues.get(key) else {
                continue;
            };
            let status = if q.stormed {
                WdStatus::Stormed
            } else {
                WdStatus::Operational
            };
            p.state_row(&PfcWdState {
                port: key.0.clone(),
                priority: key.1,
                status,
                action: q.config.action,
                detected: q.detected,
                restored: q.restored,
                timestamp_ms: now.wall_ms,
            });
            let qc = QueueCounters {
                port: key.0.clone(),
                queue: key.1,
                wd_status: Some(status),
                wd_action: Some(q.config.action),
                wd_detected: Some(q.detected),
                wd_restored: Some(q.restored),
                ..Default::default()
            };
            p.counters.push((qc.key(), qc.to_fields()));
        }
        (events, p)
    }

    /// Feeds the tuners one tick: returns the changes (the caller re-applies the owned
    /// objects when there are any) and the rows to publish (records of changed queues, the
    /// depth histograms).
    pub fn observe_tuning(
        &mut self,
        cells: Cells,
        now: Now,
    ) -> (
        Vec<(QueueKey, weft_tuning::Change)>,
        Publish,
        DepthHistograms,
    ) {
        let out = self.tuning.observe(cells, now, &self.intent.ports);
        let mut p = Publish::default();
        let row = |port: &String, hist: &[u64; crate::tuning::HIST_BUCKETS as usize]| {
            let pc = PortCounters {
                port: port.clone(),
                depth_histogram: Some(*hist),
                histogram_shift: Some(u64::from(self.tuning.shift)),
                ..Default::default()
            };
            (pc.key(), pc.to_fields())
        };
        for (port, hist) in &out.histograms {
            p.counters.push(row(port, hist));
            self.histograms.insert(port.clone(), *hist);
        }
        if !out.histograms.is_empty() {
            // The copy holds every port's last histogram, as the rows do, not only this tick's.
            let all: Vec<_> = self.histograms.iter().map(|(k, h)| row(k, h)).collect();
            p.snapshot = weft_sonic_schema::snapshot::CountersSnapshot::of_hist(&all).to_fields();
        }
        for (k, _) in &out.changes {
            if let Some(st) = self.tuning.queues.get(k) {
                p.state_row(&st.record(k));
            }
        }
        (out.changes, p, out.histograms)
    }

    /// Every tuned queue's record (the status tick refreshes them with the last sample).
    pub fn tuning_records(&self) -> Publish {
        let mut p = Publish::default();
        for (k, st) in &self.tuning.queues {
            p.state_row(&st.record(k));
        }
        p
    }
}
