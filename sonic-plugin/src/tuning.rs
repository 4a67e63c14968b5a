//! ECN thresholds, static or tuned at run time: the only producer of the ECN part of
//! `queue_config_table` entries (the queue's PFC part is [`crate::qos`]'s).
//! Every queue with an ECN profile gets its values from here: the static values when tuning is
//! off (or the controller gave no envelope), the tuned values otherwise. Every
//! `--tuning-interval-ms` (default 50 ms) the plugin samples each tuned (egress port, queue),
//! feeds the sample to that queue's [`weft_tuning::Tuner`] and, on a change, writes
//! the queue's `queue_config_table` entry and records it.
//!
//! ```text
//!   SwitchIntent (static ECN + envelope per queue) ─► QueueState ─► Tuner::new(static)
//!   tick: P4Runtime counter read ─► deltas over the interval ─► Sample ─► Tuner::step
//!            port_tx_counter[p]                 departure rate / line rate  → utilization
//!            queue_depth_histogram[p×16+b]      mean, p99 (bytes)           → depth_mean, depth_p99
//!            queue_tx / ecn_mark_counter[p×8+q] marked / sent               → marked_fraction
//!            pfc_tx_pause_counter[*×8+q]        PAUSEs this queue caused    → pfc_sent
//!            pfc_rx_pause_counter[p×8+q]                                    → pfc_received
//!   Change ─► owned objects (queue_config_table entry with the tuned values) ─► P4Runtime
//!          ─► STATE_DB WEFT_ECN_TUNING|EthernetN|<q> + a tracing event
//! ```
//!
//! Choices, each for a reason:
//! * **Units.** Depth is sampled in packets (BMv2 counts packets) and converted to bytes with
//!   the same cell size and `--bmv2-queue-scale` as [`crate::qos`] converts thresholds the other
//!   way (`bytes = packets × cell / scale`), so the tuner compares like with like.
//! * **Histogram.** The pipeline keeps one depth histogram per port (`enq_qdepth` of the
//!   packet's own queue, all queues together), so every tuned queue of a port sees the port's
//!   histogram; with one congested class per port (the lossless one) that is its queue. The
//!   plugin sets `histogram_shift` (every queue_config_table entry and its default) so the 16 buckets span `--queue-depth` (64 packets → shift 2,
//!   4-packet buckets). Mean uses bucket midpoints; percentiles use the bucket's upper edge, so
//!   they err towards acting.
//! * **Line rate.** `PORT|EthernetN speed` (Mb/s) over `cell` bytes per packet, unless
//!   `--tuning-line-rate PORT=PPS` says otherwise. On BMv2 the real service rate of a port is
//!   what Thrift `set_queue_rate` configured (packets/s), far below the nominal speed, so the
//!   testbed passes it with that flag; utilization is the port's departures over that rate.
//! * **PFC attribution.** A PAUSE leaves through the upstream port, not the congested one, so
//!   the pipeline's counter cannot tell which queue caused it. The pauses of priority q sent by
//!   the whole switch in an interval go to the queues q whose depth reached xoff in that
//!   interval (the condition that makes the pipeline send them), or, if none did by the
//!   histogram's resolution, to the deepest queue q.
//! * **Drops.** BMv2 drops on a full queue before egress, invisible to the pipeline, so
//!   `drops` is 0 here; the tuner does not use it.
//! * **Idle ports.** Only ports whose transmit counter moved in the previous interval get the
//!   full read (histogram, queue counters), so an idle fabric costs one small read per tick.
//!
//! Intent changes: a (port, queue) whose static values or envelope changed gets a fresh tuner
//! from the new static values; unchanged rows (a reapply writing the same values) keep the
//! tuned values, so a reapply never puts static values back. After a plugin restart the tuned
//! values come back from STATE_DB when its static values still match the intent.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use weft_appdb::PortMap;
use weft_p4::counters as c;
use weft_p4rt::P4Info;
use weft_p4rt::proto::p4::v1::{Entity, entity};
use weft_tuning::{Change, Envelope, Params, Sample, Thresholds, Tuner};

use weft_sonic_schema::config::Tuning as TuningMode;
use weft_sonic_schema::state::EcnTuningState;

use crate::clock::Now;
use crate::config::QueueModel;
use crate::counters::{Cells, queue_cell};
use crate::intent::{QueueIntent as QueueConfig, SwitchIntent};
use crate::qos;

pub use crate::intent::QueueKey;

/// Buckets of the pipeline's queue-depth histogram per port.
pub const HIST_BUCKETS: u32 = weft_sonic_schema::counters::HIST_BUCKETS as u32;

/// Smallest shift that makes 16 buckets cover a queue of `queue_depth` packets.
pub fn histogram_shift(queue_depth: u32) -> u8 {
    let mut s = 0u8;
    while s < 31 && (queue_depth.saturating_sub(1) >> s) >= HIST_BUCKETS {
        s += 1;
    }
    s
}

/// What the controller asks of one tuned (port, queue): static values, envelope, on/off.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueIntent {
    pub statics: Thresholds,
    pub envelope: Option<Envelope>,
    pub auto: bool,
    /// How the queue's bytes become BMv2 packets.
    pub config: QueueConfig,
}

impl QueueIntent {
    fn of(q: &QueueConfig) -> Option<QueueIntent> {
        let statics = q.ecn?;
        Some(QueueIntent {
            statics,
            envelope: q.envelope,
            auto: q.envelope.is_some() && q.tuning == TuningMode::Auto,
            config: q.clone(),
        })
    }
}

fn pmax_percent(p: f64) -> u32 {
    (p * 100.0).round().clamp(0.0, 100.0) as u32
}

/// (Kmin, Kmax, Pmax %) in packets for `th` on queue `q`, converted as the PFC thresholds are
/// (so a tuned Kmax is clamped under xoff exactly as the static one is).
pub fn to_packets(model: &QueueModel, q: &QueueConfig, th: Thresholds) -> (u32, u32, u32) {
    qos::convert(
        model,
        q.cell,
        Some((th.kmin, th.kmax, pmax_percent(th.pmax))),
        q.pause,
    )
    .ecn
    .unwrap_or((0, 1, 0))
}

/// Queue-depth statistics of one interval's histogram deltas, in packets.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DepthStats {
    pub packets: u64,
    pub mean: f64,
    pub p50: u32,
    pub p99: u32,
    pub max: u32,
}

/// Bucket `b`'s packet range (the top bucket ends at the queue's depth).
fn bucket_range(b: usize, shift: u8, queue_depth: u32) -> (u32, u32) {
    let lo = (b as u32) << shift;
    let hi = if b as u32 == HIST_BUCKETS - 1 {
        queue_depth.max(lo)
    } else {
        (((b as u32) + 1) << shift) - 1
    };
    (lo, hi.min(queue_depth.max(lo)))
}

/// Mean (bucket midpoints) and percentiles (bucket upper edges) of histogram deltas.
pub fn depth_stats(
    delta: &[u64; HIST_BUCKETS as usize],
    shift: u8,
    queue_depth: u32,
) -> DepthStats {
    let packets: u64 = delta.iter().sum();
    if packets == 0 {
        return DepthStats::default();
    }
    let mut sum = 0.0;
    let mut max = 0;
    for (b, n) in delta.iter().enumerate().filter(|(_, n)| **n > 0) {
        let (lo, hi) = bucket_range(b, shift, queue_depth);
        sum += *n as f64 * (f64::from(lo) + f64::from(hi)) / 2.0;
        max = hi;
    }
    let pct = |p: f64| {
        let rank = ((packets as f64) * p).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in delta.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_range(b, shift, queue_depth).1;
            }
        }
        max
    };
    DepthStats {
        packets,
        mean: sum / packets as f64,
        p50: pct(0.50),
        p99: pct(0.99),
        max,
    }
}

/// Packets → bytes, the inverse of the threshold conversion.
pub fn packets_to_bytes(packets: f64, cell: u32, scale: f64) -> u64 {
    (packets * f64::from(cell) / scale).round().max(0.0) as u64
}

/// One (port, queue)'s tuning state.
#[derive(Debug, Clone)]
pub struct QueueState {
    pub intent: QueueIntent,
    pub tuner: Option<Tuner>,
    pub current: Thresholds,
    pub changes: u64,
    pub reason: String,
    pub changed_at_ms: u128,
    pub last: Option<Sample>,
}

impl QueueState {
    fn fresh(intent: QueueIntent, params: Params) -> Self {
        let tuner = match (intent.auto, intent.envelope) {
            (true, Some(env)) => Some(Tuner::new(intent.statics, env, params)),
            _ => None,
        };
        QueueState {
            current: tuner.as_ref().map_or(intent.statics, |t| t.current),
            tuner,
            changes: 0,
            reason: if intent.auto { "static" } else { "tuning-off" }.to_string(),
            changed_at_ms: 0,
            last: None,
            intent,
        }
    }

    /// Resumes from a STATE_DB record when it was tuned from the same static values and its
    /// values still lie in the envelope.
    fn resume(intent: QueueIntent, params: Params, rec: &EcnTuningState) -> Option<Self> {
        let env = intent.envelope.filter(|_| intent.auto)?;
        let same = rec.static_kmin == intent.statics.kmin
            && rec.static_kmax == intent.statics.kmax
            && (rec.static_pmax - intent.statics.pmax).abs() < 1e-6;
        if !same {
            return None;
        }
        let cur = Thresholds {
            kmin: rec.kmin,
            kmax: rec.kmax,
            pmax: rec.pmax,
        };
        let mut t = Tuner::new(cur, env, params);
        if t.current != cur {
            return None;
        }
        t.current = cur;
        Some(QueueState {
            intent,
            current: cur,
            tuner: Some(t),
            changes: rec.changes,
            reason: rec.reason.clone(),
            changed_at_ms: u128::from(rec.changed_at),
            last: None,
        })
    }

    /// The STATE_DB record.
    pub fn record(&self, key: &QueueKey) -> EcnTuningState {
        let s = self.intent.statics;
        EcnTuningState {
            port: key.0.clone(),
            tc: key.1,
            kmin: self.current.kmin,
            kmax: self.current.kmax,
            pmax: self.current.pmax,
            static_kmin: s.kmin,
            static_kmax: s.kmax,
            static_pmax: s.pmax,
            tuning: if self.intent.auto {
                TuningMode::Auto
            } else {
                TuningMode::Off
            },
            reason: self.reason.clone(),
            changed_at: u64::try_from(self.changed_at_ms).unwrap_or(u64::MAX),
            changes: self.changes,
            depth_mean: self.last.map(|l| l.depth_mean),
            depth_p99: self.last.map(|l| l.depth_p99),
            utilization: self.last.map(|l| (l.utilization * 1000.0).round() / 1000.0),
            marked_fraction: self
                .last
                .map(|l| (l.marked_fraction * 1000.0).round() / 1000.0),
            pfc_sent: self.last.map(|l| l.pfc_sent),
            pfc_received: self.last.map(|l| l.pfc_received),
        }
    }
}

/// What one tick found and did.
#[derive(Debug, Default)]
pub struct TickOutcome {
    pub changes: Vec<(QueueKey, Change)>,
    /// Ports whose histogram was read this tick, with the cumulative bucket counts.
    pub histograms: BTreeMap<String, [u64; HIST_BUCKETS as usize]>,
}

/// The plugin's ECN thresholds: one [`QueueState`] per (port, queue) with an ECN profile.
#[derive(Debug, Clone)]
pub struct Tuning {
    pub params: Params,
    pub model: QueueModel,
    pub shift: u8,
    /// `--tuning-line-rate`: port (or `*`) → packets per second.
    pub line_rate: BTreeMap<String, f64>,
    pub queues: BTreeMap<QueueKey, QueueState>,
    prev: Option<(Instant, Cells)>,
    active: BTreeSet<u32>,
}

impl Tuning {
    pub fn new(model: QueueModel, line_rate: BTreeMap<String, f64>) -> Self {
        Tuning {
            params: Params::default(),
            shift: histogram_shift(model.queue_depth),
            model,
            line_rate,
            queues: BTreeMap::new(),
            prev: None,
            active: BTreeSet::new(),
        }
    }

    /// Takes a new intent. `restored` are STATE_DB records, used for queues this run has not
    /// seen yet. Returns the keys whose record must be (re)written and those to delete.
    pub fn reconfigure(
        &mut self,
        intent: &SwitchIntent,
        restored: &BTreeMap<QueueKey, EcnTuningState>,
    ) -> (Vec<QueueKey>, Vec<QueueKey>) {
        let intents: BTreeMap<QueueKey, QueueIntent> = intent
            .queues
            .iter()
            .filter_map(|(k, q)| Some((k.clone(), QueueIntent::of(q)?)))
            .collect();
        let mut write = Vec::new();
        let gone: Vec<QueueKey> = self
            .queues
            .keys()
            .filter(|k| !intents.contains_key(*k))
            .cloned()
            .collect();
        for k in &gone {
            self.queues.remove(k);
        }
        for (k, qi) in intents {
            match self.queues.get_mut(&k) {
                // Only a change of what the tuner starts from or moves within restarts it; a
                // new port id or MTU only changes how the same bytes are written.
                Some(s)
                    if s.intent.statics == qi.statics
                        && s.intent.envelope == qi.envelope
                        && s.intent.auto == qi.auto =>
                {
                    s.intent.config = qi.config;
                }
                Some(_) => {
                    tracing::info!(port = %k.0, queue = k.1, auto = qi.auto, "ECN intent changed: tuner restarts from the static values");
                    self.queues
                        .insert(k.clone(), QueueState::fresh(qi, self.params));
                    write.push(k);
                }
                None => {
                    let s = restored
                        .get(&k)
                        .and_then(|r| QueueState::resume(qi.clone(), self.params, r))
                        .inspect(|s| {
                            tracing::info!(port = %k.0, queue = k.1, kmin = s.current.kmin, kmax = s.current.kmax, pmax = s.current.pmax, "tuned ECN thresholds resumed from STATE_DB");
                        })
                        .unwrap_or_else(|| QueueState::fresh(qi, self.params));
                    self.queues.insert(k.clone(), s);
                    write.push(k);
                }
            }
        }
        (write, gone)
    }

    /// The ECN thresholds (in packets) of every queue with an ECN profile, by (port id,
    /// queue): tuned values where a tuner runs, the static values elsewhere. They become the
    /// ECN part of the queue's `queue_config_table` entry ([`crate::qos::objects`]).
    pub fn thresholds(&self) -> crate::qos::EcnByQueue {
        let mut out = crate::qos::EcnByQueue::new();
        for ((_, q), s) in &self.queues {
            let Some(id) = s.intent.config.port_id else {
                continue;
            };
            out.insert(
                (id, *q),
                to_packets(&self.model, &s.intent.config, s.current),
            );
        }
        out
    }

    /// Whether any queue has a tuner.
    pub fn tuning_any(&self) -> bool {
        self.queues.values().any(|s| s.tuner.is_some())
    }

    /// Whether any queue is sampled: every queue the controller gave an envelope, tuned or
    /// not, so its depth and marking are published either way.
    pub fn sampling_any(&self) -> bool {
        self.queues.values().any(|s| s.intent.envelope.is_some())
    }

    fn ports_of(&self, ports: &PortMap) -> BTreeMap<u32, (String, BTreeSet<u8>)> {
        let mut out: BTreeMap<u32, (String, BTreeSet<u8>)> = BTreeMap::new();
        for ((port, q), _) in self
            .queues
            .iter()
            .filter(|(_, s)| s.intent.envelope.is_some())
        {
            if let Some(id) = ports.id(port) {
                out.entry(id)
                    .or_insert_with(|| (port.clone(), BTreeSet::new()))
                    .1
                    .insert(*q);
            }
        }
        out
    }

    /// The counter cells of one tick: transmit and PAUSE counters of every tuned port, the
    /// rest only for ports that were busy last tick.
    pub fn reads(&self, info: &P4Info, ports: &PortMap) -> Vec<Entity> {
        let mut out = Vec::new();
        let mut cell = |name: &str, idx: u32| {
            if let Ok(ce) = info.counter_entry(name, Some(i64::from(idx))) {
                out.push(Entity {
                    entity: Some(entity::Entity::CounterEntry(ce)),
                });
            }
        };
        for (id, (_, qs)) in self.ports_of(ports) {
            cell(c::port_tx_counter::NAME, id);
            for q in &qs {
                cell(c::pfc_tx_pause_counter::NAME, queue_cell(id, *q));
            }
            if self.active.contains(&id) {
                for b in 0..HIST_BUCKETS {
                    cell(c::queue_depth_histogram::NAME, id * HIST_BUCKETS + b);
                }
                for q in &qs {
                    let i = queue_cell(id, *q);
                    cell(c::queue_tx_counter::NAME, i);
                    cell(c::ecn_mark_counter::NAME, i);
                    cell(c::pfc_rx_pause_counter::NAME, i);
                }
            }
        }
        out
    }

    fn line_rate_pps(&self, port: &str, q: &QueueConfig) -> f64 {
        if let Some(r) = self.line_rate.get(port).or_else(|| self.line_rate.get("*")) {
            return *r;
        }
        q.speed_mbps as f64 * 1e6 / (8.0 * f64::from(q.cell))
    }

    /// Any sampled queue of `port`: its cell and speed are the port's.
    fn port_config(&self, port: &str) -> Option<&QueueConfig> {
        self.queues
            .iter()
            .find(|((p, _), s)| p == port && s.intent.envelope.is_some())
            .map(|(_, s)| &s.intent.config)
    }

    /// Feeds one tick's counter cells; returns the changes made (already applied to the state:
    /// the caller writes them to the switch and records them).
    pub fn observe(&mut self, cells: Cells, now: Now, ports: &PortMap) -> TickOutcome {
        let mut out = TickOutcome::default();
        let by_port = self.ports_of(ports);
        let Some((t0, prev)) = self.prev.replace((now.at, cells.clone())) else {
            self.active = by_port.keys().copied().collect();
            return out;
        };
        let tick = Tick {
            dt: now.at.duration_since(t0).as_secs_f64(),
            cells: &cells,
            prev: &prev,
        };
        let (active, depth) = self.depths(&tick, &by_port, &mut out);
        let (pauses, blamed) = self.blame(&tick, &by_port, &depth);
        let rates: BTreeMap<&str, (u32, f64)> = by_port
            .values()
            .filter_map(|(name, _)| {
                let qc = self.port_config(name)?;
                Some((name.as_str(), (qc.cell, self.line_rate_pps(name, qc))))
            })
            .collect();
        let scale = self.model.scale;
        for ((port, q), st) in self.queues.iter_mut() {
            let Some(id) = ports.id(port) else { continue };
            let Some(&(cell, rate)) = rates.get(port.as_str()) else {
                continue;
            };
            let Some(d) = depth.get(&id) else { continue };
            let i = queue_cell(id, *q);
            let (Some(tx_q), Some(marked), Some(tx_port)) = (
                tick.delta(c::queue_tx_counter::ID, i),
                tick.delta(c::ecn_mark_counter::ID, i),
                tick.delta(c::port_tx_counter::ID, id),
            ) else {
                continue;
            };
            let sample = Sample {
                depth_mean: packets_to_bytes(d.mean, cell, scale),
                depth_p99: packets_to_bytes(f64::from(d.p99), cell, scale),
                utilization: if tick.dt > 0.0 && rate > 0.0 {
                    (tx_port as f64 / tick.dt / rate).min(1.0)
                } else {
                    0.0
                },
                marked_fraction: if tx_q > 0 {
                    marked as f64 / tx_q as f64
                } else {
                    0.0
                },
                pfc_sent: if blamed.get(q).is_some_and(|s| s.contains(&id)) {
                    pauses.get(q).copied().unwrap_or(0)
                } else {
                    0
                },
                pfc_received: tick.delta(c::pfc_rx_pause_counter::ID, i).unwrap_or(0),
                drops: 0,
            };
            st.last = Some(sample);
            // An idle queue says nothing about its thresholds.
            if tx_q == 0 && sample.pfc_sent == 0 {
                continue;
            }
            if let Some(ch) = step_queue(port, *q, st, &sample, now) {
                out.changes.push(((port.clone(), *q), ch));
            }
        }
        self.active = active;
        out
    }

    /// Per tuned port: whether it sent anything this tick, its queue-depth statistics (when its
    /// histogram was read whole) and its cumulative histogram for the outcome.
    fn depths(
        &self,
        tick: &Tick<'_>,
        by_port: &BTreeMap<u32, (String, BTreeSet<u8>)>,
        out: &mut TickOutcome,
    ) -> (BTreeSet<u32>, BTreeMap<u32, DepthStats>) {
        let mut active = BTreeSet::new();
        let mut depth: BTreeMap<u32, DepthStats> = BTreeMap::new();
        for (id, (name, _)) in by_port {
            if tick
                .delta(c::port_tx_counter::ID, *id)
                .is_some_and(|d| d > 0)
            {
                active.insert(*id);
            }
            let mut hist = [0u64; HIST_BUCKETS as usize];
            let mut cum = [0u64; HIST_BUCKETS as usize];
            let mut complete = true;
            for b in 0..HIST_BUCKETS {
                let idx = id * HIST_BUCKETS + b;
                match tick.delta(c::queue_depth_histogram::ID, idx) {
                    Some(d) => hist[b as usize] = d,
                    None => complete = false,
                }
                if let Some(v) = tick
                    .cells
                    .get(&(c::queue_depth_histogram::ID, i64::from(idx)))
                {
                    cum[b as usize] = v.0;
                }
            }
            let first = (c::queue_depth_histogram::ID, i64::from(id * HIST_BUCKETS));
            if tick.cells.contains_key(&first) {
                out.histograms.insert(name.clone(), cum);
            }
            if complete {
                depth.insert(*id, depth_stats(&hist, self.shift, self.model.queue_depth));
            }
        }
        (active, depth)
    }

    /// PAUSEs sent per priority, switch-wide, and the ports blamed for them: those whose queue
    /// reached XOFF, else the deepest.
    #[allow(clippy::type_complexity)]
    fn blame(
        &self,
        tick: &Tick<'_>,
        by_port: &BTreeMap<u32, (String, BTreeSet<u8>)>,
        depth: &BTreeMap<u32, DepthStats>,
    ) -> (BTreeMap<u8, u64>, BTreeMap<u8, BTreeSet<u32>>) {
        let mut pauses: BTreeMap<u8, u64> = BTreeMap::new();
        for (id, (_, qs)) in by_port {
            for q in qs {
                let i = queue_cell(*id, *q);
                if let Some(d) = tick.delta(c::pfc_tx_pause_counter::ID, i) {
                    *pauses.entry(*q).or_default() += d;
                }
            }
        }
        let mut blamed: BTreeMap<u8, BTreeSet<u32>> = BTreeMap::new();
        for (q, n) in &pauses {
            if *n == 0 {
                continue;
            }
            let cands: Vec<(u32, u32, u32)> = by_port
                .iter()
                .filter(|(_, (_, qs))| qs.contains(q))
                .filter_map(|(id, (name, _))| {
                    let d = depth.get(id)?;
                    let qc = &self.queues.get(&(name.clone(), *q))?.intent.config;
                    let xoff = qos::convert(&self.model, qc.cell, None, qc.pause)
                        .pfc
                        .map_or(u32::MAX, |p| p.0);
                    Some((*id, d.max, xoff))
                })
                .collect();
            let mut set: BTreeSet<u32> = cands
                .iter()
                .filter(|(_, max, xoff)| max >= xoff)
                .map(|c| c.0)
                .collect();
            if set.is_empty()
                && let Some(deepest) = cands.iter().filter(|c| c.1 > 0).max_by_key(|c| c.1)
            {
                set.insert(deepest.0);
            }
            blamed.insert(*q, set);
        }
        (pauses, blamed)
    }
}

/// One tick's counters beside the previous tick's.
struct Tick<'c> {
    dt: f64,
    cells: &'c Cells,
    prev: &'c Cells,
}

impl Tick<'_> {
    /// The cell's increase over the tick; `None` for a cell not read both times (a cell read
    /// for the first time has no interval behind it).
    fn delta(&self, id: u32, idx: u32) -> Option<u64> {
        let k = (id, i64::from(idx));
        Some(self.cells.get(&k)?.0.saturating_sub(self.prev.get(&k)?.0))
    }
}

/// Steps one queue's tuner with its sample; a change is applied to the state and returned.
fn step_queue(port: &str, q: u8, st: &mut QueueState, sample: &Sample, now: Now) -> Option<Change> {
    tracing::debug!(
        %port,
        queue = q,
        depth_mean = sample.depth_mean,
        depth_p99 = sample.depth_p99,
        utilization = sample.utilization,
        marked = sample.marked_fraction,
        pfc_sent = sample.pfc_sent,
        kmin = st.current.kmin,
        kmax = st.current.kmax,
        "ECN tuning sample"
    );
    let ch = st.tuner.as_mut()?.step(sample)?;
    st.current = ch.to;
    st.changes += 1;
    st.reason = ch.reason.as_str().to_string();
    st.changed_at_ms = u128::from(now.wall_ms);
    Some(ch)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::intent::tests::intent;

    const ENV: &[(&str, &str)] = &[
        ("kmin_min", "100000"),
        ("kmin_max", "800000"),
        ("kmax_min", "400000"),
        ("kmax_max", "3200000"),
        ("pmax_min", "0.01"),
        ("pmax_max", "1"),
        ("pause_threshold", "9000000"),
        ("tuning", "auto"),
    ];

    fn fabric_view(env: &[(&str, &str)], kmin: &str) -> SwitchIntent {
        let port = |id: &'static str| -> [(&'static str, &'static str); 4] {
            [
                ("id", id),
                ("mtu", "9100"),
                ("speed", "100000"),
                ("admin_status", "up"),
            ]
        };
        let (p0, p4) = (port("1"), port("2"));
        let qos = [
            ("dscp_to_tc_map", "WEFT"),
            ("tc_to_queue_map", "WEFT"),
            ("tc_to_pg_map", "WEFT"),
            ("pfc_enable", "3"),
        ];
        let wred = [
            ("ecn", "ecn_all"),
            ("wred_green_enable", "true"),
            ("green_min_threshold", kmin),
            ("green_max_threshold", "1600000"),
            ("green_drop_probability", "20"),
        ];
        intent(
            &[
                ("PORT", "Ethernet0", &p0),
                ("PORT", "Ethernet4", &p4),
                ("DSCP_TO_TC_MAP", "WEFT", &[("26", "3")]),
                ("PORT_QOS_MAP", "Ethernet0", &qos),
                ("PORT_QOS_MAP", "Ethernet4", &qos),
                ("WRED_PROFILE", "W", &wred),
                ("QUEUE", "Ethernet0|3", &[("wred_profile", "W")]),
                ("QUEUE", "Ethernet4|3", &[("wred_profile", "W")]),
                ("WEFT_ECN_ENVELOPE", "Ethernet0|3", env),
                ("WEFT_ECN_ENVELOPE", "Ethernet4|3", env),
            ],
            &model(),
        )
    }

    fn model() -> QueueModel {
        QueueModel {
            scale: 1.0,
            queue_depth: 64,
            cell_bytes: None,
            pfc_quanta: 0xffff,
            ..QueueModel::default()
        }
    }

    /// A fake counter source: one port's cumulative pipeline counters, advanced by what a
    /// simulated interval sends, returned as the cells a P4Runtime read would give.
    struct FakeCounters {
        port: u32,
        q: u8,
        tx: u64,
        marked: u64,
        hist: [u64; 16],
        pauses: u64,
    }

    impl FakeCounters {
        fn new(port: u32, q: u8) -> Self {
            FakeCounters {
                port,
                q,
                tx: 0,
                marked: 0,
                hist: [0; 16],
                pauses: 0,
            }
        }
        /// Sends packets that found `depths` packets queued (shift 2: bucket = depth / 4).
        fn send(&mut self, depths: &[u32], kmin: u32, pauses: u64) {
            for d in depths {
                self.tx += 1;
                self.hist[((d >> 2) as usize).min(15)] += 1;
                if *d >= kmin {
                    self.marked += 1;
                }
            }
            self.pauses += pauses;
        }
        fn cells(&self) -> Cells {
            let mut out = Cells::new();
            let i = i64::from(queue_cell(self.port, self.q));
            out.insert((c::port_tx_counter::ID, i64::from(self.port)), (self.tx, 0));
            out.insert((c::queue_tx_counter::ID, i), (self.tx, 0));
            out.insert((c::ecn_mark_counter::ID, i), (self.marked, 0));
            out.insert((c::pfc_rx_pause_counter::ID, i), (0, 0));
            // PAUSEs leave through the upstream port (2), not the congested one.
            out.insert((c::pfc_tx_pause_counter::ID, i), (0, 0));
            out.insert(
                (
                    c::pfc_tx_pause_counter::ID,
                    i64::from(queue_cell(2, self.q)),
                ),
                (self.pauses, 0),
            );
            for (b, n) in self.hist.iter().enumerate() {
                out.insert(
                    (
                        c::queue_depth_histogram::ID,
                        i64::from(self.port * 16) + b as i64,
                    ),
                    (*n, 0),
                );
            }
            out
        }
    }

    fn at(t: Instant) -> Now {
        Now { at: t, wall_ms: 0 }
    }

    fn ports() -> PortMap {
        let mut p = PortMap::default();
        p.by_name.insert("Ethernet0".into(), 1);
        p.by_name.insert("Ethernet4".into(), 2);
        p
    }

    #[test]
    fn the_histogram_shift_spreads_sixteen_buckets_over_the_queue() {
        assert_eq!(histogram_shift(16), 0);
        assert_eq!(histogram_shift(64), 2);
        assert_eq!(histogram_shift(65), 3);
        assert_eq!(histogram_shift(1000), 6);
    }

    #[test]
    fn depth_stats_take_midpoints_for_the_mean_and_upper_edges_for_percentiles() {
        // Shift 2: 100 packets, 90 found 0..3 queued, 9 found 20..23, 1 found 40..43.
        let mut h = [0u64; 16];
        h[0] = 90;
        h[5] = 9;
        h[10] = 1;
        let s = depth_stats(&h, 2, 64);
        assert_eq!(s.packets, 100);
        assert!((s.mean - (90.0 * 1.5 + 9.0 * 21.5 + 41.5) / 100.0).abs() < 1e-9);
        assert_eq!((s.p50, s.p99, s.max), (3, 23, 43));
        // The top bucket saturates: it reaches the queue's depth.
        let mut h = [0u64; 16];
        h[15] = 10;
        assert_eq!(depth_stats(&h, 2, 64).p99, 64);
        assert_eq!(depth_stats(&[0; 16], 2, 64), DepthStats::default());
        // Bytes use the same cell and scale as the threshold conversion.
        assert_eq!(packets_to_bytes(23.0, 9100, 1.0), 209_300);
        assert_eq!(packets_to_bytes(23.0, 9100, 0.05), 4_186_000);
    }

    #[test]
    fn sampling_turns_counter_deltas_into_bytes_rates_and_fractions() {
        let v = fabric_view(ENV, "400000");
        let mut line = BTreeMap::new();
        line.insert("*".to_string(), 100.0);
        let mut tu = Tuning::new(model(), line);
        tu.reconfigure(&v, &BTreeMap::new());
        let mut fake = FakeCounters::new(1, 3);
        let t0 = Instant::now();
        let out = tu.observe(fake.cells(), at(t0), &ports());
        assert!(out.changes.is_empty());
        // Port 1 is now read in full (first tick marks every tuned port active).
        let reads = tu.reads(&crate::pipeline::weft_p4info().expect("p4info"), &ports());
        assert!(reads.len() > 16, "{} cells", reads.len());
        // One 100 ms interval: 9 packets at depth 0, 1 at depth 40 (marked at kmin 30).
        let mut depths = vec![0u32; 9];
        depths.push(40);
        fake.send(&depths, 30, 0);
        tu.observe(
            fake.cells(),
            at(t0 + std::time::Duration::from_millis(100)),
            &ports(),
        );
        let s = tu.queues[&("Ethernet0".to_string(), 3)]
            .last
            .expect("sampled");
        assert_eq!(s.depth_p99, 43 * 9100);
        assert_eq!(
            s.depth_mean,
            packets_to_bytes((9.0 * 1.5 + 41.5) / 10.0, 9100, 1.0)
        );
        assert!(
            (s.utilization - 1.0).abs() < 1e-6,
            "10 packets in 0.1 s at 100 pps: {s:?}"
        );
        assert!((s.marked_fraction - 0.1).abs() < 1e-9);
        assert_eq!(s.pfc_sent, 0);
    }

    #[test]
    fn pauses_sent_upstream_are_blamed_on_the_queue_that_reached_xoff_and_act_at_once() {
        let v = fabric_view(ENV, "400000");
        let mut tu = Tuning::new(model(), [("*".to_string(), 100.0)].into());
        tu.reconfigure(&v, &BTreeMap::new());
        let mut fake = FakeCounters::new(1, 3);
        let t0 = Instant::now();
        tu.observe(fake.cells(), at(t0), &ports());
        fake.send(&[63; 10], 44, 3);
        let out = tu.observe(
            fake.cells(),
            at(t0 + std::time::Duration::from_millis(100)),
            &ports(),
        );
        assert_eq!(out.changes.len(), 1, "{:?}", out.changes);
        let (k, ch) = &out.changes[0];
        assert_eq!(k, &("Ethernet0".to_string(), 3));
        assert_eq!(ch.reason, weft_tuning::Reason::Pfc);
        assert_eq!(ch.to.kmax, 800_000);
        let st = &tu.queues[k];
        assert_eq!((st.changes, st.reason.as_str()), (1, "pfc"));
        assert_eq!(st.last.expect("sample").pfc_sent, 3);
        // The histogram published to COUNTERS_DB is cumulative.
        assert_eq!(out.histograms["Ethernet0"][15], 10);
    }

    #[test]
    fn tuned_values_replace_the_static_ones_and_an_identical_reapply_keeps_them() {
        let v = fabric_view(ENV, "400000");
        let mut tu = Tuning::new(model(), BTreeMap::new());
        let (write, gone) = tu.reconfigure(&v, &BTreeMap::new());
        assert_eq!((write.len(), gone.len()), (2, 0));
        assert!(v.warnings.is_empty(), "{:?}", v.warnings);
        let statics = tu.thresholds();
        assert_eq!(
            statics.len(),
            2,
            "ECN thresholds for each queue, from the static values"
        );
        let key = ("Ethernet0".to_string(), 3);
        tu.queues.get_mut(&key).expect("queue").current = Thresholds {
            kmin: 100_000,
            kmax: 400_000,
            pmax: 0.8,
        };
        let tuned = tu.thresholds();
        assert_eq!(
            tuned.keys().collect::<Vec<_>>(),
            statics.keys().collect::<Vec<_>>(),
            "the tuned values take the static ones' queue"
        );
        assert_ne!(
            tuned, statics,
            "the tuned values differ from the static ones"
        );
        let qc = tu.queues[&key].intent.config.clone();
        assert_eq!(
            to_packets(&model(), &qc, tu.queues[&key].current),
            (11, 43, 80)
        );
        // The same rows again: nothing restarts, the tuned values stay.
        let (write, _) = tu.reconfigure(&v.clone(), &BTreeMap::new());
        assert!(write.is_empty());
        assert_eq!(tu.queues[&key].current.kmax, 400_000);
        // A changed static value is a changed intent: back to the (new) static values.
        let (write, _) = tu.reconfigure(&fabric_view(ENV, "300000"), &BTreeMap::new());
        assert_eq!(write.len(), 2);
        assert_eq!(tu.queues[&key].current.kmin, 300_000);
        assert_eq!(tu.queues[&key].current.kmax, 1_600_000);
    }

    #[test]
    fn tuning_off_yields_the_static_values_and_restarts_resume_only_matching_records() {
        let mut env: Vec<(&str, &str)> = ENV.to_vec();
        env.retain(|(k, _)| *k != "tuning");
        env.push(("tuning", "off"));
        let mut tu = Tuning::new(model(), BTreeMap::new());
        tu.reconfigure(&fabric_view(&env, "400000"), &BTreeMap::new());
        let key = ("Ethernet0".to_string(), 3);
        assert!(tu.queues[&key].tuner.is_none());
        assert!(!tu.tuning_any());
        assert!(
            tu.sampling_any(),
            "untuned queues are still sampled and published"
        );
        assert_eq!(tu.queues[&key].reason, "tuning-off");
        assert_eq!(
            tu.thresholds().len(),
            2,
            "static ECN values, one set per queue"
        );

        let rec = |static_kmin: u64| -> BTreeMap<QueueKey, EcnTuningState> {
            let r = EcnTuningState {
                port: "Ethernet0".into(),
                tc: 3,
                kmin: 200_000,
                kmax: 800_000,
                pmax: 0.4,
                static_kmin,
                static_kmax: 1_600_000,
                static_pmax: 0.2,
                tuning: TuningMode::Auto,
                reason: "pfc".into(),
                changed_at: 0,
                changes: 1,
                depth_mean: None,
                depth_p99: None,
                utilization: None,
                marked_fraction: None,
                pfc_sent: None,
                pfc_received: None,
            };
            [(key.clone(), r)].into()
        };
        let mut tu = Tuning::new(model(), BTreeMap::new());
        tu.reconfigure(&fabric_view(ENV, "400000"), &rec(400_000));
        assert_eq!(tu.queues[&key].current.kmax, 800_000, "resumed");
        assert_eq!(tu.queues[&key].changes, 1);
        let mut tu = Tuning::new(model(), BTreeMap::new());
        tu.reconfigure(&fabric_view(ENV, "400000"), &rec(300_000));
        assert_eq!(
            tu.queues[&key].current.kmax, 1_600_000,
            "other static values: not resumed"
        );
    }
}
