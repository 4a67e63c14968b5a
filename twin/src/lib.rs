//! A telemetry twin of a fabric at scale: every switch's COUNTERS_DB and STATE_DB rows as its
//! plugin writes them (the `weft-sonic-schema` types, each switch polling every second on its
//! own phase), driven by the fabric model's loads (`weft-simulate` on the compiler's tables)
//! under a background all-to-all, with faults injected ([`fault`]) — so that `weft diagnose`
//! can be run and scored over 5,120 switches without 5,120 BMv2s.
//!
//! ```text
//!  intent ─▶ ports::Ports, load::Model ─▶ load::background (bytes/s per port)
//!  fault::Fault ─inject─▶ effects::Effects (per port / switch, over emulated time)
//!  Twin::advance(t): each switch's counters at its last poll ≤ t (counters::integrate_*)
//!     ├─▶ write::Writer: the rows that changed, into each switch's DB (real redis-servers)
//!     ├─▶ Twin::rows: the rows as they stand (what a reader of the DB gets)
//!     └─▶ export: /metrics per switch (the plugin's families), for Prometheus
//! ```
//!
//! Time is emulated (milliseconds from the twin's start): a bench advances it as fast as the
//! machine writes, a real-time run keeps it on the wall clock. Poll stamps are
//! `epoch_ms + t`. Switches can restart (counters from zero, a gap in their polls), die (rows
//! frozen, status row gone) or never be written at all.

pub mod counters;
pub mod effects;
pub mod export;
pub mod fault;
pub mod intent;
pub mod load;
pub mod ports;
pub mod score;
pub mod write;

use weft_sonic_schema::config::PfcWdAction;
use weft_sonic_schema::counters::CountersRow;
use weft_sonic_schema::state::{
    DriftKind, DriftState, PfcWdState, PluginState, PluginStatus, WdStatus,
};
use weft_topology::{SwitchIdx, Topology};

use counters::{Classes, Cum, SwCum, Written};
use effects::{Effects, SwFx};
use fault::{Ctx, Fault, Truth};
use load::{Loads, Model};
use ports::Ports;

#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    #[error("the fabric model: {0}")]
    Model(String),
    #[error("{endpoint}: {source}")]
    Db {
        endpoint: String,
        source: weft_sonic_db::SonicDbError,
    },
    #[error("{endpoint}: {what}: {source}")]
    Redis {
        endpoint: String,
        what: String,
        source: redis::RedisError,
    },
    #[error("metrics exporter: {0}")]
    Export(std::io::Error),
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Destinations per host of the background all-to-all sample.
    pub peers: u32,
    /// The busiest port's load, as a share of its capacity.
    pub peak: f64,
    /// Each plugin's counter polling interval and the jitter of its polls (ms).
    pub poll_ms: u64,
    pub jitter_ms: u64,
    pub seed: u64,
    /// Unix ms of emulated time 0 (the poll stamps' clock).
    pub epoch_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            peers: 16,
            peak: 0.8,
            poll_ms: 1000,
            jitter_ms: 20,
            seed: 1,
            epoch_ms: 0,
        }
    }
}

/// What happens to a switch's plugin and counters besides traffic.
#[derive(Debug, Clone, Default)]
pub struct Life {
    /// Never written: its DB holds nothing (or is not there).
    pub missing: bool,
    /// The plugin stops polling at this instant: rows frozen, status row gone.
    pub dead_from: Option<u64>,
    /// Restarts: counters from zero at `at`, no polls for `gap` ms after.
    pub resets: Vec<(u64, u64)>,
}

/// An injected fault and when.
#[derive(Debug, Clone)]
pub struct Injected {
    pub id: u32,
    pub fault: Fault,
    pub truth: Truth,
    pub start: u64,
    pub end: Option<u64>,
}

pub struct Twin {
    pub topo: Topology,
    pub ports: Ports,
    pub base: Loads,
    pub model: Model,
    pub classes: Classes,
    pub cfg: Config,
    pub effects: Effects,
    pub life: Vec<Life>,
    pub faults: Vec<Injected>,
    cum: Vec<Cum>,
    sw: Vec<SwCum>,
    /// Per switch: the instant its counters stand at (its last poll so far).
    polled: Vec<Option<u64>>,
    /// Switches whose plugin's death was reported by [`Twin::advance`].
    gone: Vec<bool>,
    phase: Vec<u64>,
    now: u64,
}

fn mix(a: u64, b: u64) -> u64 {
    let mut x = a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

impl Twin {
    pub fn new(topo: Topology, cfg: Config) -> Result<Twin, TwinError> {
        let ports = Ports::new(&topo);
        let model = Model::new(&topo)?;
        let base = load::background(&topo, &ports, &model, cfg.peers, cfg.peak, cfg.seed);
        let n = topo.switches.len();
        let phase = (0..n as u64)
            .map(|s| mix(cfg.seed, s) % cfg.poll_ms.max(1))
            .collect();
        Ok(Twin {
            classes: Classes::of(&topo),
            cum: vec![Cum::default(); ports.len()],
            sw: vec![SwCum::default(); n],
            polled: vec![None; n],
            gone: vec![false; n],
            life: vec![Life::default(); n],
            phase,
            ports,
            base,
            model,
            topo,
            cfg,
            effects: Effects::default(),
            faults: Vec::new(),
            now: 0,
        })
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            t: &self.topo,
            ports: &self.ports,
            loads: &self.base,
            model: &self.model,
            seed: self.cfg.seed,
        }
    }

    /// Injects `fault` from `at` on; its id.
    pub fn inject(&mut self, fault: Fault, at: u64) -> u32 {
        let id = self.faults.len() as u32 + 1;
        let truth = fault.truth(&self.ctx());
        let mut e = std::mem::take(&mut self.effects);
        fault.inject(&self.ctx(), &mut e, id, at);
        self.effects = e;
        self.faults.push(Injected {
            id,
            fault,
            truth,
            start: at,
            end: None,
        });
        id
    }

    /// Ends fault `id` at `at`.
    pub fn clear(&mut self, id: u32, at: u64) {
        self.effects.end(id, at);
        if let Some(f) = self.faults.iter_mut().find(|f| f.id == id) {
            f.end = Some(at);
        }
    }

    /// The `k`th poll of switch `s` (its phase, plus a jitter of its own).
    fn poll_at(&self, s: SwitchIdx, k: u64) -> u64 {
        let j = mix(self.cfg.seed ^ 0xa5a5, (s as u64) << 32 | k) % self.cfg.jitter_ms.max(1);
        self.phase[s] + k * self.cfg.poll_ms.max(1) + j
    }

    /// Switch `s`'s last poll at or before `t`, if its plugin polled by then.
    pub fn last_poll(&self, s: SwitchIdx, t: u64) -> Option<u64> {
        let l = &self.life[s];
        if l.missing {
            return None;
        }
        let p = self.cfg.poll_ms.max(1);
        let mut k = t.saturating_sub(self.phase[s]) / p + 1;
        for _ in 0..64 {
            let at = self.poll_at(s, k);
            let silent = at > t
                || l.dead_from.is_some_and(|d| at >= d)
                || l.resets.iter().any(|(r, g)| at >= *r && at < r + g);
            if !silent {
                return Some(at);
            }
            if k == 0 {
                return None;
            }
            k -= 1;
        }
        None
    }

    /// Brings every switch to its last poll at or before `t`; the switches whose rows changed.
    pub fn advance(&mut self, t: u64) -> Vec<SwitchIdx> {
        let mut changed = Vec::new();
        for s in 0..self.topo.switches.len() {
            let died = !self.gone[s] && self.life[s].dead_from.is_some_and(|d| d <= t);
            if died {
                // Its status row goes with its plugin.
                self.gone[s] = true;
            }
            let polled = match self.last_poll(s, t) {
                Some(at) if self.polled[s].is_none_or(|from| at > from) => {
                    self.integrate(s, self.polled[s].unwrap_or(0), at);
                    self.polled[s] = Some(at);
                    true
                }
                _ => false,
            };
            if died || polled {
                changed.push(s);
            }
        }
        self.now = self.now.max(t);
        changed
    }

    /// Switch `s`'s counters from `a` to `b`, through its restarts.
    fn integrate(&mut self, s: SwitchIdx, a: u64, b: u64) {
        let mut cuts: Vec<u64> = self.life[s]
            .resets
            .iter()
            .map(|(r, _)| *r)
            .filter(|r| *r > a && *r <= b)
            .collect();
        cuts.sort_unstable();
        let mut from = a;
        for to in cuts.iter().copied().chain(std::iter::once(b)) {
            for p in self.ports.of_switch[s].clone() {
                counters::integrate_port(
                    &mut self.cum[p as usize],
                    &self.base,
                    &self.ports,
                    &self.effects,
                    &self.classes,
                    p,
                    (from, to),
                );
            }
            counters::integrate_switch(&mut self.sw[s], &self.effects, s, (from, to));
            if cuts.contains(&to) {
                for p in self.ports.of_switch[s].clone() {
                    self.cum[p as usize] = Cum::default();
                }
                self.sw[s] = SwCum::default();
            }
            from = to;
        }
    }

    /// When switch `s`'s rows were polled (emulated ms), if ever.
    pub fn polled(&self, s: SwitchIdx) -> Option<u64> {
        self.polled[s]
    }

    /// Port `p`'s counters as its row holds them.
    pub fn written(&self, p: ports::PortId) -> Written {
        Written::of(&self.cum[p as usize])
    }

    /// Every COUNTERS row of switch `s` as its last poll wrote them (none if it never polled).
    pub fn counters_rows(&self, s: SwitchIdx) -> Vec<CountersRow> {
        let Some(at) = self.polled[s] else {
            return Vec::new();
        };
        let sw = &self.topo.switches[s];
        let mut out = Vec::new();
        for p in self.ports.of_switch[s].clone() {
            let name = &sw.ports[self.ports.get(p).index].name;
            out.extend(counters::port_rows(
                name,
                &self.written(p),
                None,
                self.classes.lossless,
            ));
        }
        out.extend(self.watchdog_queue_rows(s, at));
        out.push(CountersRow::Switch(counters::switch_row(
            &self.sw[s],
            self.cfg.epoch_ms + at,
            self.cfg.poll_ms,
        )));
        out
    }

    /// The PFC watchdog's storms on switch `s` as of `t`: (port, stormed now, declared,
    /// restored, last change).
    fn watchdog(&self, s: SwitchIdx, t: u64) -> Vec<(ports::PortId, bool, u64, u64, u64)> {
        let mut by: std::collections::BTreeMap<ports::PortId, (bool, u64, u64, u64)> =
            Default::default();
        for sp in self.effects.switches.get(&s).into_iter().flatten() {
            let SwFx::Watchdog { port } = sp.fx else {
                continue;
            };
            if sp.from > t {
                continue;
            }
            let e = by.entry(port).or_default();
            e.1 += 1;
            e.3 = e.3.max(sp.from);
            if sp.to <= t {
                e.2 += 1;
                e.3 = e.3.max(sp.to);
            } else {
                e.0 = true;
            }
        }
        by.into_iter()
            .map(|(p, (a, b, c, d))| (p, a, b, c, d))
            .collect()
    }

    fn watchdog_queue_rows(&self, s: SwitchIdx, t: u64) -> Vec<CountersRow> {
        let sw = &self.topo.switches[s];
        self.watchdog(s, t)
            .into_iter()
            .map(|(p, stormed, det, res, _)| {
                CountersRow::Queue(weft_sonic_schema::counters::QueueCounters {
                    port: sw.ports[self.ports.get(p).index].name.clone(),
                    queue: self.classes.lossless as u8,
                    wd_status: Some(if stormed {
                        WdStatus::Stormed
                    } else {
                        WdStatus::Operational
                    }),
                    wd_action: Some(PfcWdAction::Drop),
                    wd_detected: Some(det),
                    wd_restored: Some(res),
                    ..Default::default()
                })
            })
            .collect()
    }

    /// STATE_DB rows of switch `s` as of its last poll: the watchdog's, the read-back's drift,
    /// and the plugin's status row while it lives.
    pub fn state_rows(
        &self,
        s: SwitchIdx,
    ) -> (Vec<PfcWdState>, Vec<DriftState>, Option<PluginStatus>) {
        let Some(at) = self.polled[s] else {
            return (Vec::new(), Vec::new(), None);
        };
        let sw = &self.topo.switches[s];
        let wd = self
            .watchdog(s, at)
            .into_iter()
            .map(|(p, stormed, det, res, ts)| PfcWdState {
                port: sw.ports[self.ports.get(p).index].name.clone(),
                priority: self.classes.lossless as u8,
                status: if stormed {
                    WdStatus::Stormed
                } else {
                    WdStatus::Operational
                },
                action: PfcWdAction::Drop,
                detected: det,
                restored: res,
                timestamp_ms: self.cfg.epoch_ms + ts,
            })
            .collect();
        let drift = self
            .effects
            .switches
            .get(&s)
            .into_iter()
            .flatten()
            .filter(|sp| sp.holds_at(at))
            .filter_map(|sp| match &sp.fx {
                SwFx::Drift { key } => Some(DriftState {
                    key: key.clone(),
                    state: DriftKind::Missing,
                }),
                _ => None,
            })
            .collect();
        let alive = self.life[s].dead_from.is_none_or(|d| self.now < d);
        let status = alive.then(|| {
            let mut st = PluginStatus::fresh(PluginState::Running, &sw.p4rt_address);
            st.counter_polls = at / self.cfg.poll_ms.max(1) + 1;
            st.updated_ms = self.cfg.epoch_ms + self.now;
            st
        });
        (wd, drift, status)
    }

    /// Faults in force at any time in `[a, b]`.
    pub fn active(&self, a: u64, b: u64) -> Vec<&Injected> {
        self.faults
            .iter()
            .filter(|f| f.start <= b && f.end.is_none_or(|e| e >= a))
            .collect()
    }

    /// Forgets what no longer matters before `t` (ended effects).
    pub fn prune(&mut self, t: u64) {
        let oldest = self.polled.iter().flatten().copied().min().unwrap_or(0);
        self.effects.prune(t.min(oldest));
    }
}
