//! `weft run`: the controller as a daemon that keeps the fabric converged while links flap.
//!
//! ```text
//!   per switch: STATE_DB PORT_TABLE subscriber ──(switch, port, up, t)──┐
//!                                                                       ▼
//!   main loop: port state → link state (down if either end is down)
//!              → LinkDamper (penalty, suppression, hold-down)        ← timers (next deadline)
//!              → Compiler::set_link (only what changes)              ← periodic full resync
//!              → per changed switch: diff against what it has → write, wait for answers
//! ```
//! Events that arrive together are handled together, so a burst costs one recomputation; a
//! suppressed link costs nothing however often it flaps.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tokio::sync::mpsc;
use weft_sonic_db::{
    KeyOpFieldValues, Op, ProducerStateTable, ResponseWaiter, SonicDb, SonicDbId,
    SubscriberOptions, SubscriberStateTable,
};
use weft_topology::{LinkIdx, Peer, SwitchIdx, Topology};

use crate::apply::{self, P4RT_TABLE};
use crate::damping::{LinkDamper, Nanos};
use crate::plan;
use weft_compiler::p4map::{self, Stage};
use weft_compiler::{Compiler, LinkState};

pub const PORT_TABLE: &str = "PORT_TABLE";

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub resync: Duration,
    pub timeout: Duration,
    /// Where `weft status` finds the daemon's view.
    pub status_file: PathBuf,
    /// One JSON line per reconvergence.
    pub events_log: Option<PathBuf>,
}

#[derive(Debug)]
struct PortEvent {
    switch: SwitchIdx,
    port: String,
    up: bool,
    at: Instant,
}

/// What `weft status` shows of a link.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LinkStatus {
    pub link: String,
    pub oper_up: bool,
    pub in_use: bool,
    pub suppressed: bool,
    pub penalty: u32,
    pub flaps: u64,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, Default)]
pub struct Reconvergence {
    /// Links whose use changed, `A:port ↔ B:port` with `down`/`up`.
    pub changes: Vec<String>,
    pub switches_changed: usize,
    pub entries_written: usize,
    pub failed: usize,
    /// From the first port event of the batch to the compiler's answer, microseconds.
    pub compute_us: u128,
    /// From the first port event of the batch to every affected switch's acknowledgement.
    pub total_ms: f64,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, Default)]
pub struct DaemonStatus {
    pub fabric: String,
    pub pid: u32,
    pub links: Vec<LinkStatus>,
    pub reconvergences: u64,
    pub writes: u64,
    pub last: Option<Reconvergence>,
}

/// A switch's connection for incremental writes, kept open so a reconvergence pays no connects.
struct Writer {
    producer: ProducerStateTable,
    waiter: ResponseWaiter,
}

impl Writer {
    async fn open(db: &str) -> anyhow::Result<Writer> {
        let sonic = SonicDb::from_endpoint(db)?;
        let waiter = ResponseWaiter::subscribe(&sonic, P4RT_TABLE).await?;
        let producer = ProducerStateTable::new(&sonic, SonicDbId::ApplDb, P4RT_TABLE).await?;
        Ok(Writer { producer, waiter })
    }

    /// Writes sets (by ascending stage) and deletes (descending), stage by stage. Returns
    /// (acknowledged, failed).
    async fn write(
        &mut self,
        sets: BTreeMap<Stage, Vec<KeyOpFieldValues>>,
        dels: BTreeMap<Stage, Vec<KeyOpFieldValues>>,
        timeout: Duration,
    ) -> anyhow::Result<(usize, usize)> {
        let (mut ok, mut bad) = (0, 0);
        for ops in sets.into_values().chain(dels.into_values().rev()) {
            self.producer.apply(&ops).await?;
            let out = self
                .waiter
                .wait(ops.iter().map(|o| o.key.clone()), timeout)
                .await?;
            let good = out.responses.values().filter(|r| r.status.is_ok()).count();
            ok += good;
            bad += ops.len() - good;
        }
        Ok((ok, bad))
    }
}

fn now_ns(start: Instant) -> Nanos {
    start.elapsed().as_nanos() as Nanos
}

async fn watch_switch(si: SwitchIdx, db: String, tx: mpsc::UnboundedSender<PortEvent>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let r: anyhow::Result<()> = async {
            let sonic = SonicDb::from_endpoint(&db)?;
            let mut sub = SubscriberStateTable::new(
                &sonic,
                SonicDbId::StateDb,
                PORT_TABLE,
                SubscriberOptions {
                    allow_config_set: true,
                },
            )
            .await?;
            // The dump after subscribing: nothing between the two is lost.
            for k in sub.initial_dump().await? {
                send(si, &k, &tx);
            }
            loop {
                let k = sub.next().await?;
                send(si, &k, &tx);
            }
        }
        .await;
        if tx.is_closed() {
            return;
        }
        tracing::warn!(switch = si, error = ?r.err(), "STATE_DB watch lost; reconnecting");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

fn send(si: SwitchIdx, k: &KeyOpFieldValues, tx: &mpsc::UnboundedSender<PortEvent>) {
    let up = match k.op {
        Op::Del => true,
        Op::Set => k.field("oper_status") != Some("down"),
    };
    let _ = tx.send(PortEvent {
        switch: si,
        port: k.key.clone(),
        up,
        at: Instant::now(),
    });
}

/// Runs until interrupted.
pub async fn run(t: &Topology, opts: RunOptions) -> anyhow::Result<()> {
    let start = Instant::now();
    let info = Arc::new(p4map::pipeline_p4info().context("the pipeline's P4Info")?);
    let stages = plan::stage_map(&info);
    let cfg = t.failover.dampening.clone();
    let hold = t.failover.hold_down.to_std();

    // Initial apply of the whole intent, every link assumed up until a switch says otherwise.
    let mut compiler = Compiler::new(t, LinkState::all_up(t));
    let installed = apply::read_all(
        t.switches
            .iter()
            .map(|s| (s.name.clone(), s.db.clone()))
            .collect(),
    )
    .await;
    let mut applied: Vec<BTreeMap<String, (Stage, weft_sonic_db::P4rtEntry)>> =
        Vec::with_capacity(t.switches.len());
    let mut plans = Vec::new();
    for (si, sw) in compiler.switches().iter().enumerate() {
        let desired = p4map::entries(t, &info, sw)?;
        let config = weft_compiler::qos::compile_switch(t, si).rows;
        let inst = installed.get(&sw.name).cloned().unwrap_or_default();
        plans.push(plan::switch_plan(
            t,
            sw,
            &desired,
            &config,
            &inst,
            &stages,
            &Default::default(),
        ));
        applied.push(desired);
    }
    let results = apply::apply_all(
        plans,
        Some(opts.timeout),
        Arc::new(|_: &str, _: usize, _: usize| {}),
    )
    .await;
    for r in &results {
        match (&r.error, r.failed.len()) {
            (Some(e), _) => {
                tracing::warn!(switch = %r.switch, error = %e, "initial apply: unreachable")
            }
            (None, 0) => tracing::info!(switch = %r.switch, written = r.written, "initial apply"),
            (None, n) => {
                tracing::warn!(switch = %r.switch, failed = n, "initial apply: entries refused")
            }
        }
    }

    let (tx, mut rx) = mpsc::unbounded_channel();
    for (si, s) in t.switches.iter().enumerate() {
        tokio::spawn(watch_switch(si, s.db.clone(), tx.clone()));
    }
    drop(tx);

    // Port → link, and per-link state.
    let mut link_of: HashMap<(SwitchIdx, String), LinkIdx> = HashMap::new();
    for (si, s) in t.switches.iter().enumerate() {
        for p in &s.ports {
            if let Peer::Switch { link } = p.peer {
                link_of.insert((si, p.name.clone()), link);
            }
        }
    }
    let mut end_up: HashMap<(SwitchIdx, String), bool> = HashMap::new();
    let mut dampers: Vec<LinkDamper> = (0..t.links.len()).map(|_| LinkDamper::new(true)).collect();
    let mut writers: HashMap<SwitchIdx, Writer> = HashMap::new();
    let mut status = DaemonStatus {
        fabric: t.name.clone(),
        pid: std::process::id(),
        ..Default::default()
    };
    let mut next_resync = Instant::now() + opts.resync;
    write_status(&opts, t, &mut dampers, &compiler, &status, now_ns(start));
    tracing::info!(fabric = %t.name, "converged; following port state");

    loop {
        let now = now_ns(start);
        let next_deadline = dampers
            .iter()
            .filter_map(|d| d.next_deadline(&cfg, hold))
            .filter(|&d| d > now)
            .min();
        let wait = next_deadline
            .map(|d| Duration::from_nanos(d - now))
            .unwrap_or(Duration::from_secs(3600))
            .min(next_resync.saturating_duration_since(Instant::now()));
        let mut batch = Vec::new();
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(e) => batch.push(e),
                None => anyhow::bail!("every STATE_DB watcher stopped"),
            },
            _ = tokio::time::sleep(wait) => {},
            _ = tokio::signal::ctrl_c() => {
                tracing::info!("interrupted");
                return Ok(());
            }
        }
        while let Ok(e) = rx.try_recv() {
            batch.push(e);
        }
        let first_event = batch.iter().map(|e| e.at).min();
        for e in batch {
            let Some(&l) = link_of.get(&(e.switch, e.port.clone())) else {
                continue;
            };
            end_up.insert((e.switch, e.port), e.up);
            let link = &t.links[l];
            let ends = [link.a, link.b];
            let up = ends.iter().all(|x| {
                *end_up
                    .get(&(x.switch, t.switches[x.switch].ports[x.port].name.clone()))
                    .unwrap_or(&true)
            });
            dampers[l].event(&cfg, now_ns(start), up);
        }
        // Apply every link whose usability differs from what the compiler assumes.
        let now = now_ns(start);
        let mut changed: Vec<SwitchIdx> = Vec::new();
        let mut changes = Vec::new();
        let t0 = Instant::now();
        for (l, d) in dampers.iter_mut().enumerate() {
            let usable = d.usable(&cfg, hold, now) && t.link_admin_up(l);
            if compiler.link_state().is_down(l) == usable {
                changed.extend(compiler.set_link(l, !usable));
                changes.push(format!(
                    "{} ↔ {} {}",
                    t.end_name(t.links[l].a),
                    t.end_name(t.links[l].b),
                    if usable { "up" } else { "down" }
                ));
            }
        }
        let compute_us = first_event
            .map_or(t0.elapsed(), |f| f.elapsed())
            .as_micros();
        let resync_due = Instant::now() >= next_resync;
        if resync_due {
            next_resync = Instant::now() + opts.resync;
            // Repair drift: what each switch really acknowledged (APPL_STATE_DB) becomes the
            // base of the diff, so lost or foreign entries are put right.
            let installed = apply::read_all(
                t.switches
                    .iter()
                    .map(|s| (s.name.clone(), s.db.clone()))
                    .collect(),
            )
            .await;
            for (si, sw) in t.switches.iter().enumerate() {
                if let Some(inst) = installed
                    .get(&sw.name)
                    .filter(|i| i.source == "APPL_STATE_DB")
                {
                    applied[si] = inst
                        .entries
                        .values()
                        .map(|e| {
                            (
                                e.key.to_table_key(),
                                (plan::stage_of(&e.key.table, &stages), e.clone()),
                            )
                        })
                        .collect();
                }
            }
            changed.extend(0..t.switches.len());
        }
        changed.sort_unstable();
        changed.dedup();
        if changed.is_empty() {
            if first_event.is_some() {
                // Flaps of a suppressed link change nothing but its penalty: show that.
                write_status(&opts, t, &mut dampers, &compiler, &status, now_ns(start));
            }
            continue;
        }
        let mut rec = Reconvergence {
            changes,
            switches_changed: changed.len(),
            compute_us,
            ..Default::default()
        };
        // Write every changed switch concurrently.
        let mut jobs = Vec::new();
        for &si in &changed {
            let desired = p4map::entries(t, &info, &compiler.switches()[si])?;
            let old = &applied[si];
            let mut sets: BTreeMap<Stage, Vec<KeyOpFieldValues>> = BTreeMap::new();
            let mut dels: BTreeMap<Stage, Vec<KeyOpFieldValues>> = BTreeMap::new();
            for (k, (stage, e)) in &desired {
                if old.get(k).map(|x| &x.1) != Some(e) {
                    sets.entry(*stage).or_default().push(e.to_set_op());
                }
            }
            for (k, (stage, _)) in old {
                if !desired.contains_key(k) {
                    dels.entry(*stage)
                        .or_default()
                        .push(KeyOpFieldValues::del(k.clone()));
                }
            }
            applied[si] = desired;
            if sets.is_empty() && dels.is_empty() {
                continue;
            }
            let writer = match writers.remove(&si) {
                Some(w) => Some(w),
                None => Writer::open(&t.switches[si].db).await.ok(),
            };
            let timeout = opts.timeout;
            jobs.push(tokio::spawn(async move {
                match writer {
                    Some(mut w) => {
                        let r = w.write(sets, dels, timeout).await;
                        (si, r.is_ok().then_some(w), r.unwrap_or((0, 1)))
                    }
                    None => (si, None, (0, 1)),
                }
            }));
        }
        for j in jobs {
            if let Ok((si, w, (ok, bad))) = j.await {
                rec.entries_written += ok;
                rec.failed += bad;
                if let Some(w) = w {
                    writers.insert(si, w);
                }
                if bad > 0 {
                    // Unknown state on that switch: the next resync repairs it from APPL_STATE_DB.
                    applied[si].clear();
                }
            }
        }
        rec.total_ms = first_event.map_or(0.0, |f| f.elapsed().as_secs_f64() * 1e3);
        if rec.changes.is_empty() && rec.entries_written == 0 && rec.failed == 0 {
            // A resync that found nothing to repair.
            write_status(&opts, t, &mut dampers, &compiler, &status, now_ns(start));
            continue;
        }
        status.reconvergences += 1;
        status.writes += rec.entries_written as u64;
        tracing::info!(
            changes = ?rec.changes,
            switches = rec.switches_changed,
            entries = rec.entries_written,
            failed = rec.failed,
            compute_us = rec.compute_us,
            total_ms = rec.total_ms,
            "reconverged"
        );
        if let Some(p) = &opts.events_log {
            use std::io::Write as _;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
            {
                let _ = writeln!(f, "{}", serde_json::to_string(&rec).unwrap_or_default());
            }
        }
        status.last = Some(rec);
        write_status(&opts, t, &mut dampers, &compiler, &status, now_ns(start));
    }
}

fn write_status(
    opts: &RunOptions,
    t: &Topology,
    dampers: &mut [LinkDamper],
    compiler: &Compiler,
    status: &DaemonStatus,
    now: Nanos,
) {
    let cfg = &t.failover.dampening;
    let mut s = status.clone();
    s.links = dampers
        .iter_mut()
        .enumerate()
        .map(|(l, d)| LinkStatus {
            link: format!(
                "{} ↔ {}",
                t.end_name(t.links[l].a),
                t.end_name(t.links[l].b)
            ),
            oper_up: d.up,
            in_use: !compiler.link_state().is_down(l),
            suppressed: d.suppressed(cfg, now),
            penalty: d.penalty.round() as u32,
            flaps: d.flaps,
        })
        .collect();
    if let Some(parent) = opts.status_file.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let tmp = opts.status_file.with_extension("tmp");
    if std::fs::write(&tmp, serde_json::to_string_pretty(&s).unwrap_or_default()).is_ok() {
        let _ = std::fs::rename(&tmp, &opts.status_file);
    }
}

/// Default place of the daemon's status file.
pub fn default_status_file(fabric: &str) -> PathBuf {
    PathBuf::from("/run/weft").join(format!("{fabric}.controller.json"))
}
