//! The daemon: wiring between the switch's SONiC Redis, the engine, the features and the
//! switch. Sessions of (primary on the switch + connected to Redis), each starting with a
//! pipeline check and a full sync, then an event loop. Anything lost (switch restarted, Redis
//! restarted, mastership lost) ends the session; the next one reconciles from scratch.
//!
//! ```text
//!  tasks                               channel            session loop (Daemon::session)
//!  ─────                               ───────            ──────────────────────────────
//!  consumer (APPL_DB P4RT_TABLE pop) ──batch_rx (2)───►  Engine::apply_batch ─► answers,
//!                                                           APPL_STATE_DB, APPL_DB revert
//!  CONFIG_DB keyspace watcher ─────────cfg_rx (1)─────►  SwitchIntent ─► Features::configure
//!                                                           ─► Engine::apply_owned (or sync)
//!  P4Runtime stream (weft-p4rt) ───────events─────────►  disconnected / lost primary: resync
//!  timers: watchdog poll, counter poll, tuning tick ──►  Features::observe_* ─► Publish rows
//!          status tick ───────────────────────────────►  WEFT_PLUGIN|status (expires), records
//!  port task (ports.rs, across sessions) ◄──PortCmd──── Config / Arm / Republish
//!      netlink + sysfs ─► port_status_table, STATE_DB PORT_TABLE (on change)
//! ```
//! ## The batch loop's pipeline, and why it keeps every order that matters
//!
//! ```text
//!   consumer task:  pop N+2 ─┐ (channel of 2: popped keys wait here, never dropped)
//!   batch loop:     prepare N+1 (translate, check refs, plan)   commit N ─► start N+1
//!   switch:         ═══ Write N (its stages in rank order) ═══            ═══ Write N+1 ═══
//!   responder task: answer N−1 (APPL_DB reverts, APPL_STATE_DB copies, then the PUBLISHes:
//!                   one script for the APPL_STATE_DB rows and one of the PUBLISHes per batch)
//! ```
//! * One Write in flight, ever: batch N+1 reaches the switch only after batch N's every stage
//!   was answered by the switch and committed. The writes the switch sees are in the order the
//!   batches were popped, so the controller's make-before-break staging (nexthops before the
//!   routes naming them, routes moved before a nexthop is deleted) holds across batches as it
//!   does within one. What overlaps is only work that writes nothing to the switch: preparing
//!   the next batch and answering the previous one.
//! * Preparing N+1 while N is in flight checks N+1 against what is committed, so it is kept
//!   only when N cannot change the outcome: N+1 shares no key with N (else it is prepared
//!   after N's commit: entries on one key stay in order), programs no switch object N writes,
//!   names or provides no identity N provides or drops, and drops no identity N names. Routes
//!   naming the same nexthops as N are independent; a route to a nexthop N creates or deletes
//!   is prepared again after N's commit (then it finds the nexthop, or is NOT_FOUND).
//! * Answers are decided at commit, from what the switch did with that batch (per-entry
//!   failures, rollback of a failed key's earlier stages), before the next batch starts: a
//!   failed write's answers are exact. The responder writes them in batch order; before the
//!   session reads APPL_STATE_DB again (CONFIG_DB change, next session's full sync) the loop
//!   drains the write in flight and flushes the responder.
//! * A lost switch or Redis ends the session with the batch in flight unanswered: its keys
//!   are in APPL_DB but not APPL_STATE_DB, which is what the next session replays after its
//!   full sync (reconcile after a switch restart is unchanged).
//!
//! The consumer and the keyspace watcher run as tasks feeding channels, so no Redis command
//! of theirs is ever cancelled half-way by the select (a cancelled pop would lose keys). Every
//! Redis write goes through `weft-sonic-db` tables, with rows typed by `weft-sonic-schema`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::FutureExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use weft_p4rt::{Client, ClientConfig, Event, P4Info, PipelineConfig, PipelinePush};
use weft_sonic_db::{
    ConsumerStateTable, Digest, EntryResult, FieldValues, KeyOpFieldValues, P4RT_TABLE,
    ResponsePublisher, SonicDb, SonicDbConfig, SonicDbError, SonicDbId, StateTableNames, Table,
    TableWatcher,
};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::PortNameMap;
use weft_sonic_schema::state::{
    EcnTuningState, InstalledDigests, PLUGIN_STATUS_KEY, PLUGIN_STATUS_TTL_MS, PluginState,
    PluginStatus,
};

use crate::config::PluginConfig;
use crate::engine::{Engine, Executed, Pending, Prepared, SwitchLost, same_fields};
use crate::features::{Features, Publish};
use crate::intent::SwitchIntent;
use crate::pipeline::{self, owned_tables};
use crate::ports::{self, PortCmd, PortStats};
use crate::translate::Translator;
use crate::watchdog::WdEvent;

/// CONFIG_DB tables the plugin follows.
pub fn config_tables() -> Vec<&'static str> {
    weft_sonic_schema::config::owned_tables()
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Pipeline(#[from] pipeline::PipelineError),
    #[error(transparent)]
    P4rt(#[from] weft_p4rt::Error),
    #[error(transparent)]
    Db(#[from] SonicDbError),
    #[error("starting the port thread: {0}")]
    PortThread(#[source] std::io::Error),
    #[error("{0}")]
    Metrics(String),
}

/// Why a session ended.
#[derive(Debug)]
enum End {
    Shutdown,
    Resync(String),
}

impl From<SonicDbError> for End {
    fn from(e: SonicDbError) -> Self {
        End::Resync(format!("Redis: {e}"))
    }
}

impl From<crate::engine::SwitchLost> for End {
    fn from(e: crate::engine::SwitchLost) -> Self {
        End::Resync(e.to_string())
    }
}

#[derive(Debug, Default, Clone)]
struct Counters {
    sessions: u64,
    pipeline_pushes: u64,
    redis_restores: u64,
    wd_storms: u64,
    counter_polls: u64,
}

pub struct Daemon {
    cfg: PluginConfig,
    pipeline: PipelineConfig,
    client: Client,
    engine: Engine<Client>,
    sonic: SonicDb,
    features: Features,
    port_tx: mpsc::Sender<PortCmd>,
    port_stats: Arc<PortStats>,
    redis_run_id: Option<String>,
    /// Cookie of the pipeline this session found or pushed (0: none yet).
    cookie: u64,
    counters: Counters,
    state: PluginState,
    started: Instant,
    metrics: Arc<weft_telemetry::PluginMetrics>,
    /// Decoded postcards not yet in STATE_DB `WEFT_POSTCARDS`.
    postcards: Vec<weft_sonic_schema::state::PostcardHop>,
    /// The last drift audit, and the keys it reported (STATE_DB `WEFT_DRIFT`).
    audited: Option<Instant>,
    /// How long the last audit took (it reads the whole switch back: ~0.6 s at 100k entries).
    audit_cost: Duration,
    /// When the batch loop last took a batch (an audit waits while batches flow).
    last_batch: Option<Instant>,
    drifted: Vec<String>,
    /// Why the last read-back failed, while it keeps failing (logged once).
    audit_error: Option<String>,
    /// The digest of APPL_STATE_DB P4RT_TABLE as this session's responder last wrote it
    /// (`None` until the session read it): published in the status row, so `weft plan` reads
    /// the rows only when it differs from what it would write.
    appl_digest: Option<Digest>,
    /// The digest of the owned CONFIG_DB tables as last read (`load_config`).
    config_digest: Option<Digest>,
}

/// The PSN anomaly counters (two wildcard reads of every QP slot) are read every this many
/// counter intervals.
const PSN_EVERY: u64 = 1;

/// Reads the PSN anomaly counters every `every` in a task of its own: the wildcard reads of
/// 2 × 4096 cells take long on BMv2, and the session loop must not wait on them (a CONFIG_DB
/// change and a batch queued behind one would race). Totals go to the metrics and to
/// COUNTERS:WEFT_SWITCH. Errors are logged at debug and retried next time: the session loop
/// notices a lost switch on its own.
async fn psn_task(
    client: Client,
    reads: Vec<weft_p4rt::proto::p4::v1::Entity>,
    sonic: SonicDb,
    metrics: Arc<weft_telemetry::PluginMetrics>,
    every: Option<Duration>,
) {
    let Some(every) = every else { return };
    if reads.is_empty() {
        return;
    }
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let cells = match client.read(reads.clone()).await {
            Ok(r) => crate::counters::cells(&r),
            Err(e) => {
                tracing::debug!(error = %e, "PSN counter read");
                continue;
            }
        };
        let (ooo, reg) = crate::counters::psn_totals(&cells);
        metrics.set_psn(ooo, reg);
        let sw = weft_sonic_schema::counters::SwitchCounters {
            psn_out_of_order: Some(ooo),
            psn_regressions: Some(reg),
            ..Default::default()
        };
        let write = async {
            let conn = sonic.connect(SonicDbId::CountersDb).await?;
            Table::new(conn, "COUNTERS")?
                .merge_many(&[(sw.key(), sw.to_fields())])
                .await
        };
        if let Err(e) = write.await {
            tracing::debug!(error = %e, "PSN counters to COUNTERS_DB");
        }
    }
}

/// Postcards held for the next flush at most; more are dropped (and counted).
const POSTCARD_BUFFER: usize = 20_000;

/// How often the plugin reads the switch back and compares it with what it installed, at
/// most (see [`audit_due`]).
pub const AUDIT_INTERVAL: Duration = Duration::from_secs(2);
/// An audit is at most this share of the plugin's time: the next one waits this many times
/// the last one's duration.
const AUDIT_COST_FACTOR: u32 = 20;
/// While batches flow, the audit waits, but never longer than this.
const AUDIT_MAX_DEFER: Duration = Duration::from_secs(60);

/// Whether the drift audit runs now. It reads the whole switch back and the session loop waits
/// for it (a batch committed during the read would show as drift), so it must not stall a
/// stream of batches: with 100k routes it took 30% of the plugin's CPU and held the batch loop
/// 0.6 s every 2 s. It waits until no batch came for [`AUDIT_INTERVAL`] (a controller writing
/// routes is not when the switch drifts behind the plugin's back), or [`AUDIT_MAX_DEFER`] under
/// constant churn, and keeps to a 1/[`AUDIT_COST_FACTOR`] duty cycle. Small tables audit every
/// [`AUDIT_INTERVAL`] as before.
/// `last` is the last audit (`None`: none yet, then the deferral counts from `started`).
fn audit_due(
    now: Instant,
    last: Option<Instant>,
    started: Instant,
    last_cost: Duration,
    last_batch: Option<Instant>,
) -> bool {
    let since = |t: Instant| now.saturating_duration_since(t);
    let spacing = AUDIT_INTERVAL.max(last_cost * AUDIT_COST_FACTOR);
    if last.is_some_and(|t| since(t) < spacing) {
        return false;
    }
    let busy = last_batch.is_some_and(|t| since(t) < AUDIT_INTERVAL);
    !busy || since(last.unwrap_or(started)) >= AUDIT_MAX_DEFER
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Daemon {
    pub fn new(cfg: PluginConfig) -> Result<Daemon, DaemonError> {
        let pipeline = pipeline::load(&cfg.pipeline)?;
        let mut p4rt = ClientConfig::new(cfg.p4rt.clone(), cfg.device_id, cfg.election_id);
        if let Some(t) = &cfg.p4rt_tls {
            p4rt = p4rt.with_tls(weft_p4rt::TlsConfig::from_files(
                &t.ca_cert,
                t.client.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
                t.domain.clone(),
            )?);
        }
        let client = Client::connect(p4rt.clone())?;
        client.set_p4info(pipeline.p4info.clone());
        let translator = Translator::new(pipeline.p4info.clone(), owned_tables(), cfg.watch_ports);
        let engine = Engine::new(client.clone(), translator);
        let mut db = SonicDbConfig::parse(&cfg.redis)?;
        if let Some(u) = &cfg.redis_user {
            db.username = Some(u.clone());
        }
        if let Some(p) = &cfg.redis_password {
            db.password = Some(p.clone());
        }
        let sonic = SonicDb::new(db);
        let port_stats = Arc::new(PortStats::default());
        let (port_tx, port_rx) = mpsc::channel(64);
        ports::spawn_port_thread(
            p4rt,
            pipeline.p4info.clone(),
            sonic.clone(),
            cfg.interfaces.clone(),
            port_rx,
            port_stats.clone(),
        )
        .map_err(DaemonError::PortThread)?;
        Ok(Daemon {
            features: Features::new(cfg.queue, cfg.tuning_line_rate.clone(), cfg.device_id),
            pipeline,
            client,
            engine,
            sonic,
            port_tx,
            port_stats,
            redis_run_id: None,
            cookie: 0,
            counters: Counters::default(),
            state: PluginState::Starting,
            started: Instant::now(),
            metrics: Arc::new(weft_telemetry::PluginMetrics::new(cfg.switch_name.clone())),
            postcards: Vec::new(),
            audited: None,
            audit_cost: Duration::ZERO,
            last_batch: None,
            drifted: Vec::new(),
            audit_error: None,
            appl_digest: None,
            config_digest: None,
            cfg,
        })
    }

    fn info(&self) -> &P4Info {
        &self.pipeline.p4info
    }

    /// Runs until `shutdown` resolves.
    pub async fn run(
        mut self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), DaemonError> {
        let mut shutdown = std::pin::pin!(shutdown.fuse());
        let mut events = self.client.events();
        let mut usr1 =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1()).map_err(
                |e| DaemonError::P4rt(weft_p4rt::Error::Config(format!("SIGUSR1: {e}"))),
            )?;
        let _metrics_server = match &self.cfg.metrics {
            Some(addr) => Some(
                weft_telemetry::serve(addr, self.metrics.registry())
                    .await
                    .map_err(|e| DaemonError::Metrics(e.to_string()))?,
            ),
            None => None,
        };
        let mut backoff = Duration::from_millis(100);
        loop {
            self.counters.sessions += 1;
            self.metrics.session();
            let end = self.session(&mut events, &mut usr1, &mut shutdown).await;
            match end {
                End::Shutdown => {
                    self.state = PluginState::Stopped;
                    let _ = self.write_status().await;
                    tracing::info!("plugin stopped");
                    return Ok(());
                }
                End::Resync(reason) => {
                    self.state = PluginState::Reconnecting;
                    self.cookie = 0;
                    tracing::warn!(%reason, "session ended; reconnecting and resyncing");
                    let _ = self.write_status().await;
                }
            }
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    async fn session(
        &mut self,
        events: &mut weft_p4rt::Events,
        usr1: &mut tokio::signal::unix::Signal,
        shutdown: &mut std::pin::Pin<
            &mut futures::future::Fuse<impl std::future::Future<Output = ()>>,
        >,
    ) -> End {
        // 1. Primary on the switch.
        self.state = PluginState::WaitingForSwitch;
        // What the last session wrote may change before this one reads APPL_STATE_DB again.
        self.appl_digest = None;
        let _ = self.write_status().await;
        loop {
            tokio::select! {
                _ = &mut *shutdown => return End::Shutdown,
                r = self.client.wait_primary(Duration::from_secs(5)) => match r {
                    Ok(()) => break,
                    Err(e) => tracing::info!(p4rt = %self.cfg.p4rt, error = %e, mastership = ?self.client.mastership(), "waiting to be primary"),
                },
            }
        }
        // Events from before this point are what this session is about to handle anyway.
        while let Some(Some(_)) = events.next().now_or_never() {}

        // 2. Redis.
        self.state = PluginState::WaitingForRedis;
        let run_id = loop {
            tokio::select! {
                _ = &mut *shutdown => return End::Shutdown,
                r = redis_run_id(&self.sonic) => match r {
                    Ok(id) => break id,
                    Err(e) => {
                        tracing::info!(redis = %self.cfg.redis, error = %e, "waiting for Redis");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                },
            }
        };
        if let Err(end) = self.setup(&run_id).await {
            return end;
        }
        self.redis_run_id = Some(run_id);

        // 3. Consumers, sync, replay.
        self.state = PluginState::Syncing;
        let _ = self.write_status().await;
        let (appl_live, appl_state) = match self.p4rt_tables().await {
            Ok(t) => t,
            Err(e) => return e.into(),
        };
        let (live, state) = match tokio::try_join!(appl_live.dump(), appl_state.dump()) {
            Ok(x) => x,
            Err(e) => return e.into(),
        };
        let replay = replay_list(&live, &state);
        let (batch_tx, mut batch_rx) = mpsc::channel(2);
        let (cfg_tx, mut cfg_rx) = mpsc::channel::<()>(1);
        let tasks = Tasks(vec![
            tokio::spawn(consumer_task(
                self.sonic.clone(),
                self.cfg.batch_size,
                self.cfg.consumer_poll,
                batch_tx,
            )),
            tokio::spawn(config_watch_task(self.sonic.clone(), cfg_tx)),
            tokio::spawn(psn_task(
                self.client.clone(),
                crate::counters::psn_reads(self.info()),
                self.sonic.clone(),
                self.metrics.clone(),
                self.cfg.counter_interval.map(|d| d * PSN_EVERY as u32),
            )),
        ]);
        let (mut responder, mut responder_failed, mut appl_digest) =
            match Responder::start(&self.sonic, appl_live.clone(), &state).await {
                Ok(r) => r,
                Err(e) => return e.into(),
            };
        self.appl_digest = *appl_digest.borrow_and_update();
        // CONFIG_DB again, now that the watcher is subscribed: nothing changes unseen.
        if let Err(e) = self.load_config().await {
            return e;
        }
        let t0 = Instant::now();
        let owned = match self.owned_desired() {
            Ok(o) => o,
            Err(e) => return e,
        };
        let report = match self.engine.full_sync(&state, owned).await {
            Ok(r) => r,
            Err(e) => return e.into(),
        };
        tracing::info!(
            updates = report.updates,
            failed = report.failed_updates,
            keys = state.len(),
            untranslatable = report.untranslatable.len(),
            ms = t0.elapsed().as_millis() as u64,
            "full sync done"
        );
        for (k, why) in report.untranslatable.iter().take(10) {
            tracing::warn!(key = %k, reason = %why, "APPL_STATE_DB entry cannot be installed any more");
        }
        let _ = self.port_tx.send(PortCmd::Arm).await;
        if !replay.is_empty() {
            tracing::info!(
                keys = replay.len(),
                "replaying keys popped but never answered"
            );
            for chunk in replay.chunks(self.cfg.batch_size) {
                if let Err(e) = self.handle_batch(chunk, &mut responder).await {
                    return e;
                }
            }
        }
        self.state = PluginState::Running;
        let _ = self.write_status().await;

        // 4. Events.
        let tick = |d: Option<Duration>| {
            let mut t = tokio::time::interval(d.unwrap_or(Duration::from_secs(3600)));
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        };
        let mut wd_tick = tick(Some(self.features.intent.wd_poll));
        let mut status_tick = tick(Some(self.cfg.status_interval));
        let mut counter_tick = tick(self.cfg.counter_interval);
        let mut tuning_tick = tick(self.cfg.tuning_interval);
        let mut postcard_tick = tick(Some(Duration::from_millis(100)));
        let mut pipe = Pipe::default();
        let end = loop {
            let result = tokio::select! {
                _ = &mut *shutdown => break End::Shutdown,
                b = batch_rx.recv(), if pipe.next.is_none() => match b {
                    // A CONFIG_DB change already signalled goes first: the controller writes
                    // CONFIG_DB before APPL_DB, and this batch may name the ports it adds.
                    Some(Ok(batch)) if cfg_rx.try_recv().is_ok() => {
                        let poll = self.features.intent.wd_poll;
                        let r = match self.config_changed(&mut pipe, &mut responder, &appl_state).await {
                            Ok(()) => self.take_batch(&mut pipe, batch),
                            Err(e) => Err(e),
                        };
                        if self.features.intent.wd_poll != poll {
                            wd_tick = tick(Some(self.features.intent.wd_poll));
                        }
                        r
                    }
                    Some(Ok(batch)) => self.take_batch(&mut pipe, batch),
                    Some(Err(e)) => Err(e.into()),
                    None => Err(End::Resync("consumer task ended".into())),
                },
                w = async { match pipe.inflight.as_mut() { Some(f) => f.await, None => std::future::pending().await } } => {
                    pipe.inflight = None;
                    self.written(&mut pipe, w, &mut responder).await
                },
                c = cfg_rx.recv() => match c {
                    Some(()) => {
                        // Rows of one apply arrive together: take them as one change.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        while cfg_rx.try_recv().is_ok() {}
                        let poll = self.features.intent.wd_poll;
                        let r = self.config_changed(&mut pipe, &mut responder, &appl_state).await;
                        if self.features.intent.wd_poll != poll {
                            wd_tick = tick(Some(self.features.intent.wd_poll));
                        }
                        r
                    }
                    None => Err(End::Resync("CONFIG_DB watcher ended".into())),
                },
                ev = events.next() => match ev {
                    Some(Event::Disconnected { reason }) => Err(End::Resync(format!("switch disconnected: {reason}"))),
                    Some(Event::LostPrimary { primary_election_id }) => Err(End::Resync(format!("lost primary to election id {primary_election_id}"))),
                    Some(Event::Reconnected) => Err(End::Resync("switch reconnected (it may have restarted)".into())),
                    None => break End::Shutdown,
                    Some(Event::PacketIn(p)) => {
                        self.on_packet_in(&p);
                        Ok(())
                    }
                    Some(Event::Lagged(n)) => {
                        // Stream events (under load: packet-ins) this loop did not take in time.
                        self.metrics.postcards_lagged(n);
                        Ok(())
                    }
                    Some(_) => Ok(()),
                },
                _ = postcard_tick.tick(), if !self.postcards.is_empty() => self.flush_postcards().await,
                _ = wd_tick.tick(), if !self.features.wd.queues.is_empty() => self.poll_watchdog().await,
                _ = counter_tick.tick(), if self.cfg.counter_interval.is_some() => self.poll_counters().await,
                _ = tuning_tick.tick(), if self.cfg.tuning_interval.is_some() && self.features.tuning.sampling_any() => self.poll_tuning().await,
                _ = status_tick.tick() => self.status_tick().await,
                c = appl_digest.changed() => match c {
                    // The responder wrote APPL_STATE_DB: say so in the status row now, not at the
                    // next tick, so a plan made after the answers trusts the new digest.
                    Ok(()) => {
                        self.appl_digest = *appl_digest.borrow_and_update();
                        self.write_status().await.map_err(End::from)
                    }
                    Err(_) => Err(End::Resync("responder stopped".into())),
                },
                _ = usr1.recv() => {
                    self.health_line();
                    Ok(())
                }
                e = &mut responder_failed => Err(End::Resync(format!(
                    "answering keys: {}",
                    e.unwrap_or_else(|_| "responder stopped".into())
                ))),
            };
            if let Err(e) = result {
                break e;
            }
        };
        drop(tasks);
        // Answers already decided are written before the next session reads APPL_STATE_DB.
        responder.finish().await;
        end
    }

    async fn p4rt_tables(&self) -> Result<(Table, Table), SonicDbError> {
        let live = Table::new(self.sonic.connect(SonicDbId::ApplDb).await?, P4RT_TABLE)?;
        let state = Table::new(
            self.sonic.connect(SonicDbId::ApplStateDb).await?,
            P4RT_TABLE,
        )?;
        Ok((live, state))
    }

    /// Redis restart recovery and the pipeline push.
    async fn setup(&mut self, run_id: &str) -> Result<(), End> {
        let restarted = self
            .redis_run_id
            .as_deref()
            .is_some_and(|old| old != run_id);
        if restarted {
            // STATE_DB went with it: the controller must see every port again.
            let _ = self.port_tx.send(PortCmd::Republish).await;
        }
        if restarted && !self.engine.installed().is_empty() {
            // Redis came back empty: the controller's diff base (APPL_STATE_DB) is gone but the
            // switch still forwards. Put back what is installed, so nothing is torn down and a
            // re-apply finds it in place.
            let (live, state) = self.p4rt_tables().await?;
            let rows: Vec<(String, FieldValues)> = self
                .engine
                .installed()
                .iter()
                .map(|(k, inst)| (k.to_string(), inst.fields.clone()))
                .collect();
            live.replace_many(&rows, &[]).await?;
            state.replace_many(&rows, &[]).await?;
            self.counters.redis_restores += 1;
            tracing::warn!(
                keys = rows.len(),
                "Redis restarted empty: restored APPL_DB and APPL_STATE_DB P4RT_TABLE from the installed state"
            );
        }
        match self.client.set_pipeline(&self.pipeline).await {
            Ok(PipelinePush::Pushed) => {
                self.counters.pipeline_pushes += 1;
                self.engine.forget_switch();
                tracing::info!(
                    cookie = self.pipeline.cookie,
                    "pipeline pushed (the switch had another or none)"
                );
            }
            Ok(PipelinePush::Unchanged) => {}
            Err(e) => return Err(End::Resync(format!("pipeline push: {e}"))),
        }
        self.cookie = self.pipeline.cookie;
        Ok(())
    }

    fn owned_desired(&self) -> Result<crate::objects::Objects, End> {
        self.features
            .desired(self.info())
            .map_err(|e| End::Resync(format!("plugin-owned entries cannot be built: {e}")))
    }

    /// Reads CONFIG_DB into a new intent and configures the features. Returns whether the
    /// port map changed.
    async fn load_config(&mut self) -> Result<bool, End> {
        let conn = self.sonic.connect(SonicDbId::ConfigDb).await?;
        let mut rows: Vec<(&'static str, String, FieldValues)> = Vec::new();
        for name in config_tables() {
            for (k, f) in Table::new(conn.clone(), name)?.dump().await? {
                rows.push((name, k, f));
            }
        }
        // What CONFIG_DB holds, whatever of it the intent below takes or keeps: a hand edit
        // changes the digest, and `weft plan` then reads the rows.
        self.config_digest = Some(weft_sonic_schema::config::config_digest(
            rows.iter().map(|(t, k, f)| (*t, k.as_str(), f)),
        ));
        let intent = SwitchIntent::from_rows(
            rows.iter().map(|(t, k, f)| (*t, k.as_str(), f)),
            &self.cfg.queue,
        );
        if intent.ports.by_name.is_empty() && !self.features.intent.ports.by_name.is_empty() {
            // An empty CONFIG_DB (a restarted Redis) means "not configured yet", not "no ports":
            // keep programming what was configured until the controller writes it again.
            tracing::warn!("CONFIG_DB has no PORT rows; keeping the previous configuration");
            return Ok(false);
        }
        for w in &intent.warnings {
            tracing::warn!(problem = %w, "CONFIG_DB");
        }
        let changed = intent.ports.by_name != self.engine.translator.ports().by_name;
        self.engine.translator.set_ports(intent.ports.clone());
        let _ = self
            .port_tx
            .send(PortCmd::Config {
                ids: intent.ports.by_name.clone(),
                admin_down: intent.admin_down.clone(),
            })
            .await;
        // What an earlier run tuned, read only while this run has tuned nothing yet.
        let state = Table::new(
            self.sonic.connect(SonicDbId::StateDb).await?,
            EcnTuningState::TABLE,
        )?;
        let restored: BTreeMap<_, EcnTuningState> = if self.features.tuning.queues.is_empty() {
            state
                .dump()
                .await?
                .into_iter()
                .filter_map(|(k, f)| {
                    let r = EcnTuningState::from_fields(&k, &f).ok()?;
                    Some(((r.port.clone(), r.tc), r))
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        let publish = self.features.configure(intent, &restored);
        self.publish(&publish).await?;
        Ok(changed)
    }

    /// A CONFIG_DB change: batches in flight land first (the change may retranslate
    /// everything), then the change is read and applied.
    async fn config_changed(
        &mut self,
        pipe: &mut Pipe,
        responder: &mut Responder,
        appl_state: &Table,
    ) -> Result<(), End> {
        self.drain(pipe, responder).await?;
        responder.flush().await?;
        let before = self.config_digest;
        self.on_config_change(appl_state).await?;
        if self.config_digest != before {
            self.write_status().await?;
        }
        Ok(())
    }

    async fn on_config_change(&mut self, appl_state: &Table) -> Result<(), End> {
        let ports_changed = self.load_config().await?;
        let owned = self.owned_desired()?;
        if ports_changed {
            // Port names resolve to other ids now: retranslate everything.
            let state = appl_state.dump().await?;
            let r = self.engine.full_sync(&state, owned).await?;
            tracing::info!(updates = r.updates, "port map changed: resynced");
        } else {
            let n = self.engine.apply_owned(owned).await?;
            if n > 0 {
                tracing::info!(updates = n, "CONFIG_DB changed: QoS tables updated");
            }
        }
        Ok(())
    }

    async fn handle_batch(
        &mut self,
        batch: &[KeyOpFieldValues],
        responder: &mut Responder,
    ) -> Result<(), End> {
        let t0 = Instant::now();
        let results = self.engine.apply_batch(batch).await?;
        self.answer(results, batch.len(), t0, responder).await
    }

    /// Hands a batch's answers to the responder, with the APPL_DB rows of failed keys put back
    /// to what is installed (so APPL_DB and APPL_STATE_DB differ only while a key is in flight:
    /// what a restart replays).
    async fn answer(
        &mut self,
        results: Vec<EntryResult>,
        keys: usize,
        t0: Instant,
        responder: &mut Responder,
    ) -> Result<(), End> {
        let mut revert = Vec::new();
        let mut remove = Vec::new();
        for r in results.iter().filter(|r| !r.status.is_ok()) {
            match self.engine.installed().get(r.key.as_str()) {
                Some(inst) => revert.push((r.key.clone(), inst.fields.clone())),
                None => remove.push(r.key.clone()),
            }
        }
        let failed = results.iter().filter(|r| !r.status.is_ok()).count();
        for r in results.iter().filter(|r| !r.status.is_ok()).take(5) {
            tracing::warn!(key = %r.key, status = %r.status, error = %r.message, "entry refused");
        }
        tracing::debug!(
            keys,
            failed,
            ms = t0.elapsed().as_millis() as u64,
            "batch applied"
        );
        responder
            .send(Answered {
                results,
                revert,
                remove,
            })
            .await
    }

    /// A batch from the consumer: written at once when nothing is in flight; otherwise
    /// prepared now (when it touches no key of the batch in flight) and written next.
    fn take_batch(&mut self, pipe: &mut Pipe, batch: Vec<KeyOpFieldValues>) -> Result<(), End> {
        let t0 = Instant::now();
        self.last_batch = Some(t0);
        let keys = batch.len();
        let idle = pipe.inflight.is_none();
        let r = self.take_batch_inner(pipe, batch);
        tracing::debug!(
            keys,
            idle,
            ms = t0.elapsed().as_millis() as u64,
            "batch prepared"
        );
        r
    }

    fn take_batch_inner(
        &mut self,
        pipe: &mut Pipe,
        batch: Vec<KeyOpFieldValues>,
    ) -> Result<(), End> {
        match &pipe.inflight {
            None => {
                let p = self.engine.prepare(batch, &Pending::default());
                pipe.start(&self.engine, &self.client, p);
            }
            Some(_) if pipe.pending.disjoint(&batch) => {
                let p = self.engine.prepare(batch, &pipe.pending);
                pipe.next = Some(Next::Prepared(p));
            }
            Some(_) => pipe.next = Some(Next::Raw(batch)),
        }
        Ok(())
    }

    /// The batch in flight was written: commit and answer it, then start the next.
    async fn written(
        &mut self,
        pipe: &mut Pipe,
        (prepared, executed): (Prepared, Result<Executed<usize>, SwitchLost>),
        responder: &mut Responder,
    ) -> Result<(), End> {
        let t0 = Instant::now();
        let write_ms = pipe
            .started
            .take()
            .map_or(0, |t| t.elapsed().as_millis() as u64);
        let n = prepared.ops.len();
        let results = self.engine.commit(prepared, executed?).await?;
        tracing::debug!(keys = n, write_ms, "batch written");
        let bad = failed(&results) as u64;
        self.answer(results, n, t0, responder).await?;
        // From the switch write's start to the answers handed on.
        self.metrics.batch(
            write_ms as f64 / 1000.0 + t0.elapsed().as_secs_f64(),
            (n as u64).saturating_sub(bad),
            bad,
        );
        match pipe.next.take() {
            Some(Next::Prepared(p)) if !p.blocked() => pipe.start(&self.engine, &self.client, p),
            Some(Next::Prepared(p)) => {
                let p = self.engine.prepare(p.ops, &Pending::default());
                pipe.start(&self.engine, &self.client, p);
            }
            Some(Next::Raw(b)) => {
                let p = self.engine.prepare(b, &Pending::default());
                pipe.start(&self.engine, &self.client, p);
            }
            None => {}
        }
        Ok(())
    }

    /// Writes and answers whatever is in flight or queued.
    async fn drain(&mut self, pipe: &mut Pipe, responder: &mut Responder) -> Result<(), End> {
        while let Some(f) = pipe.inflight.take() {
            let w = f.await;
            self.written(pipe, w, responder).await?;
        }
        Ok(())
    }

    async fn read_cells(
        &self,
        reads: Vec<weft_p4rt::proto::p4::v1::Entity>,
        what: &str,
    ) -> Result<crate::counters::Cells, End> {
        if reads.is_empty() {
            return Ok(Default::default());
        }
        let res = self
            .client
            .read(reads)
            .await
            .map_err(|e| End::Resync(format!("{what} read: {e}")))?;
        Ok(crate::counters::cells(&res))
    }

    async fn poll_watchdog(&mut self) -> Result<(), End> {
        let cells = self
            .read_cells(self.features.watchdog_reads(self.info()), "watchdog")
            .await?;
        let (events, publish) = self.features.observe_watchdog(&cells, Instant::now());
        for ((port, prio), q) in &self.features.wd.queues {
            let new_storm = events
                .iter()
                .any(|(k, e)| k.0 == *port && k.1 == *prio && matches!(e, WdEvent::Stormed(_)));
            self.metrics.watchdog(port, *prio, q.stormed, new_storm);
        }
        if events.is_empty() {
            return Ok(());
        }
        self.engine.apply_owned(self.owned_desired()?).await?;
        for ((port, prio), ev) in &events {
            match ev {
                WdEvent::Stormed(a) => {
                    self.counters.wd_storms += 1;
                    tracing::warn!(%port, priority = prio, action = a.as_str(), "PFC storm detected");
                }
                WdEvent::Restored => {
                    tracing::info!(%port, priority = prio, "PFC storm over, queue restored")
                }
            }
        }
        self.publish(&publish).await?;
        Ok(())
    }

    async fn poll_counters(&mut self) -> Result<(), End> {
        let t0 = Instant::now();
        let ports = self.engine.translator.ports().clone();
        let nexthops = self.engine.nexthop_ids();
        let cells = self
            .read_cells(
                crate::counters::reads(self.info(), &ports, &nexthops),
                "counter",
            )
            .await?;
        let typed = crate::counters::rows(&ports, &nexthops, &cells);
        self.metrics
            .set_counters(weft_telemetry::SwitchSnapshot::from_rows(&typed));
        let rows: Vec<(String, FieldValues)> = typed.iter().map(crate::counters::wire).collect();
        let conn = self.sonic.connect(SonicDbId::CountersDb).await?;
        Table::new(conn.clone(), "COUNTERS")?
            .merge_many(&rows)
            .await?;
        let map = crate::counters::name_map(&ports);
        weft_sonic_db::merge_hash(&conn, PortNameMap::TABLE, &map.to_fields()).await?;
        self.counters.counter_polls += 1;
        self.metrics.counter_poll(t0.elapsed().as_secs_f64());
        Ok(())
    }

    /// A packet-in: a postcard is decoded and held for the next flush.
    fn on_packet_in(&mut self, p: &weft_p4rt::proto::p4::v1::PacketIn) {
        let Ok(d) = self.info().decode_packet_in(p) else {
            self.metrics.postcard("undecodable");
            return;
        };
        if d.get_u64(weft_p4::packet_metadata::packet_in::fields::reason::NAME)
            != Some(u64::from(weft_p4::constants::PACKET_IN_REASON_POSTCARD))
        {
            return;
        }
        let pc = match weft_telemetry::postcard::decode(&d.payload) {
            Ok(pc) => pc,
            Err(e) => {
                tracing::debug!(error = %e, "postcard not decoded");
                self.metrics.postcard("undecodable");
                return;
            }
        };
        if self.postcards.len() >= POSTCARD_BUFFER {
            self.metrics.postcard("dropped");
            return;
        }
        let ports = self.engine.translator.ports();
        let name = |id: u16| {
            ports
                .by_name
                .iter()
                .find(|(_, v)| **v == u32::from(id))
                .map(|(k, _)| k.clone())
        };
        let time_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let hop = pc.hop(&self.cfg.switch_name, name, time_us);
        self.postcards.push(hop);
    }

    /// Appends the held postcards to STATE_DB `WEFT_POSTCARDS` (a stream trimmed to the
    /// intent's `max_records`).
    async fn flush_postcards(&mut self) -> Result<(), End> {
        let hops = std::mem::take(&mut self.postcards);
        let max = self.features.intent.telemetry.map_or(10_000, |t| t.1);
        let mut conn = self.sonic.connect(SonicDbId::StateDb).await?;
        let mut pipe = redis::pipe();
        for h in &hops {
            let mut c = redis::cmd("XADD");
            c.arg(weft_sonic_schema::state::POSTCARD_STREAM)
                .arg("MAXLEN")
                .arg("~")
                .arg(max)
                .arg("*");
            for (f, v) in h.to_fields() {
                c.arg(f).arg(v);
            }
            pipe.add_command(c).ignore();
        }
        let r: Result<(), redis::RedisError> = pipe.query_async(conn.raw()).await;
        if let Err(e) = r {
            return Err(End::Resync(format!("writing postcards: {e}")));
        }
        for _ in &hops {
            self.metrics.postcard("stored");
        }
        Ok(())
    }

    /// One tuning interval: read counters, step the tuners, write changed thresholds to the
    /// switch and record them; publish the depth histograms.
    async fn poll_tuning(&mut self) -> Result<(), End> {
        let ports = self.engine.translator.ports().clone();
        let cells = self
            .read_cells(
                self.features.tuning.reads(self.info(), &ports),
                "tuning counter",
            )
            .await?;
        let (changes, publish, histograms) = self.features.observe_tuning(cells, Instant::now());
        let shift = u32::from(self.features.tuning.shift);
        for (port, h) in &histograms {
            self.metrics.set_depth(port, h, shift);
        }
        for ((port, q), ch) in &changes {
            self.metrics.tuner_move(port, *q, ch.reason.as_str());
        }
        if !changes.is_empty() {
            let n = self.engine.apply_owned(self.owned_desired()?).await?;
            for ((port, q), ch) in &changes {
                tracing::info!(
                    %port,
                    queue = q,
                    reason = ch.reason.as_str(),
                    kmin = ch.to.kmin,
                    kmax = ch.to.kmax,
                    pmax = ch.to.pmax,
                    from_kmin = ch.from.kmin,
                    from_kmax = ch.from.kmax,
                    from_pmax = ch.from.pmax,
                    switch_updates = n,
                    "ECN thresholds tuned"
                );
            }
        }
        self.publish(&publish).await?;
        Ok(())
    }

    async fn status_tick(&mut self) -> Result<(), End> {
        self.write_status().await?;
        let records = self.features.tuning_records();
        self.publish(&records).await?;
        let now = Instant::now();
        if audit_due(
            now,
            self.audited,
            self.started,
            self.audit_cost,
            self.last_batch,
        ) {
            self.audit().await?;
            self.audited = Some(now);
            self.audit_cost = now.elapsed();
        }
        Ok(())
    }

    /// Reads the switch back and records in STATE_DB `WEFT_DRIFT` the entries it no longer
    /// holds as installed (the next full sync repairs them; `weft diagnose` names them).
    async fn audit(&mut self) -> Result<(), End> {
        // A read-back that fails is no lost session: BMv2 refuses every Read while one of its
        // tables holds an entry written beside P4Runtime (its Thrift CLI), and ending the session
        // for that would resync every audit, forever. A switch really gone shows in the stream.
        let drift = match self.engine.audit().await {
            Ok(d) => {
                if self.audit_error.take().is_some() {
                    tracing::info!("switch read-back works again");
                }
                d
            }
            Err(e) => {
                let why = e.to_string();
                if self.audit_error.as_deref() != Some(why.as_str()) {
                    tracing::warn!(error = %why, "switch read-back failed; drift not audited");
                }
                self.audit_error = Some(why);
                return Ok(());
            }
        };
        let keys: Vec<String> = drift.iter().map(|(k, _)| k.clone()).collect();
        if drift.is_empty() && self.drifted.is_empty() {
            return Ok(());
        }
        use weft_sonic_schema::state::{DriftKind, DriftState};
        let mut p = Publish::default();
        for (k, state) in &drift {
            let row = DriftState {
                key: k.clone(),
                state: if *state == "missing" {
                    DriftKind::Missing
                } else {
                    DriftKind::Modified
                },
            };
            p.state
                .push((DriftState::TABLE, row.key(), row.to_fields()));
        }
        for k in &self.drifted {
            if !keys.contains(k) {
                p.state_delete.push((DriftState::TABLE, k.clone()));
            }
        }
        if !drift.is_empty() {
            tracing::warn!(entries = drift.len(), first = %drift[0].0, "the switch lost entries behind the plugin's back");
        }
        self.drifted = keys;
        self.publish(&p).await?;
        Ok(())
    }

    /// Writes what the features want published.
    async fn publish(&self, p: &Publish) -> Result<(), SonicDbError> {
        if p.is_empty() {
            return Ok(());
        }
        if !p.state.is_empty() || !p.state_delete.is_empty() {
            let conn = self.sonic.connect(SonicDbId::StateDb).await?;
            type Rows = Vec<(String, FieldValues)>;
            let mut by_table: BTreeMap<&str, (Rows, Vec<String>)> = BTreeMap::new();
            for (t, k, f) in &p.state {
                by_table
                    .entry(t)
                    .or_default()
                    .0
                    .push((k.clone(), f.clone()));
            }
            for (t, k) in &p.state_delete {
                by_table.entry(t).or_default().1.push(k.clone());
            }
            for (t, (rows, dels)) in by_table {
                Table::new(conn.clone(), t)?
                    .replace_many(&rows, &dels)
                    .await?;
            }
        }
        if !p.counters.is_empty() {
            let conn = self.sonic.connect(SonicDbId::CountersDb).await?;
            Table::new(conn, "COUNTERS")?
                .merge_many(&p.counters)
                .await?;
        }
        Ok(())
    }

    async fn status(&self) -> PluginStatus {
        let s = &self.engine.stats;
        let pending = pending_keys(&self.sonic).await.unwrap_or(0);
        let mut st = PluginStatus {
            name: PLUGIN_STATUS_KEY.into(),
            state: self.state,
            pid: std::process::id(),
            device_id: self.cfg.device_id,
            p4rt: self.cfg.p4rt.clone(),
            pipeline_cookie: self.cookie,
            switch_updates: s.switch_updates,
            batches: s.batches,
            keys_ok: s.keys_ok,
            keys_failed: s.keys_failed,
            syncs: s.syncs,
            last_sync_updates: s.last_sync_updates,
            sync_failures: s.sync_failures,
            installed_keys: self.engine.installed().len() as u64,
            pending_keys: pending,
            sessions: self.counters.sessions,
            pipeline_pushes: self.counters.pipeline_pushes,
            redis_restores: self.counters.redis_restores,
            ports_down: self.port_stats.ports_down.load(Ordering::Relaxed),
            port_mask_writes: self.port_stats.mask_writes.load(Ordering::Relaxed),
            link_events: self.port_stats.link_events.load(Ordering::Relaxed),
            pfc_wd_storms: self.counters.wd_storms,
            counter_polls: self.counters.counter_polls,
            uptime_s: self.started.elapsed().as_secs(),
            updated_ms: now_ms(),
            appl_state_digest: None,
            appl_state_rows: None,
            config_digest: None,
            config_rows: None,
        };
        if let (Some(entries), Some(config)) = (self.appl_digest, self.config_digest) {
            st.set_digests(&InstalledDigests { entries, config });
        }
        st
    }

    /// The status row, which expires unless refreshed: its presence says the plugin lives.
    async fn write_status(&self) -> Result<(), SonicDbError> {
        let st = self.status().await;
        let all: Vec<&str> = PluginState::ALL.iter().map(|s| s.as_str()).collect();
        self.metrics.state(self.state.as_str(), &all);
        self.metrics.backlog(st.pending_keys);
        let conn = self.sonic.connect(SonicDbId::StateDb).await?;
        // Expires after several missed refreshes, never before the next one is due.
        let ttl = Duration::from_millis(PLUGIN_STATUS_TTL_MS).max(self.cfg.status_interval * 3);
        Table::new(conn, PluginStatus::TABLE)?
            .replace_with_ttl(&st.key(), &st.to_fields(), ttl)
            .await
    }

    fn health_line(&self) {
        let s = &self.engine.stats;
        tracing::info!(
            state = %self.state,
            installed_keys = self.engine.installed().len(),
            keys_ok = s.keys_ok,
            keys_failed = s.keys_failed,
            syncs = s.syncs,
            sessions = self.counters.sessions,
            pipeline_pushes = self.counters.pipeline_pushes,
            ports_down = self.port_stats.ports_down.load(Ordering::Relaxed),
            pfc_wd_storms = self.counters.wd_storms,
            uptime_s = self.started.elapsed().as_secs(),
            "health"
        );
    }
}

type Write = std::pin::Pin<
    Box<dyn std::future::Future<Output = (Prepared, Result<Executed<usize>, SwitchLost>)> + Send>,
>;

/// The batch loop's pipeline: one batch being written to the switch, the next one prepared
/// (translated and planned) meanwhile, and the one before answered by the responder.
#[derive(Default)]
struct Pipe {
    inflight: Option<Write>,
    /// When the batch in flight was handed to the switch.
    started: Option<Instant>,
    /// What the batch in flight holds.
    pending: Pending,
    next: Option<Next>,
}

enum Next {
    Prepared(Prepared),
    /// Touches a key of the batch in flight: prepared once that one is committed.
    Raw(Vec<KeyOpFieldValues>),
}

impl Pipe {
    fn start(&mut self, engine: &Engine<Client>, client: &Client, p: Prepared) {
        self.pending = engine.pending(&p);
        self.started = Some(Instant::now());
        let client = client.clone();
        self.inflight = Some(Box::pin(async move {
            let r = crate::engine::execute(&client, &p.plan).await;
            (p, r)
        }));
    }
}

/// One batch's answers, as the batch loop decided them.
struct Answered {
    results: Vec<EntryResult>,
    /// APPL_DB rows of failed keys, back to what is installed...
    revert: Vec<(String, FieldValues)>,
    /// ...or gone when nothing is.
    remove: Vec<String>,
}

/// Answers batches in order (APPL_DB reverts, APPL_STATE_DB copies, then the notifications, as
/// swss-common's buffered ResponsePublisher does per batch) in a task of its own, so the batch
/// loop writes the next batch to the switch meanwhile.
struct Responder {
    tx: Option<mpsc::Sender<ToResponder>>,
    task: Option<JoinHandle<()>>,
}

enum ToResponder {
    Answer(Answered),
    /// Answered once everything before it is written.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl Responder {
    /// `appl_state` is what APPL_STATE_DB holds now: the digest on the watch channel starts
    /// from it and follows every write.
    async fn start(
        sonic: &SonicDb,
        appl_live: Table,
        appl_state: &BTreeMap<String, FieldValues>,
    ) -> Result<
        (
            Responder,
            tokio::sync::oneshot::Receiver<String>,
            tokio::sync::watch::Receiver<Option<Digest>>,
        ),
        SonicDbError,
    > {
        let mut publisher = ResponsePublisher::new(sonic, P4RT_TABLE).await?;
        publisher.track(appl_state);
        let (digest_tx, digest_rx) = tokio::sync::watch::channel(publisher.digest());
        let (tx, mut rx) = mpsc::channel::<ToResponder>(4);
        let (err_tx, err_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                let a = match m {
                    ToResponder::Answer(a) => a,
                    ToResponder::Flush(done) => {
                        let _ = done.send(());
                        continue;
                    }
                };
                let t0 = Instant::now();
                let r = async {
                    appl_live.replace_many(&a.revert, &a.remove).await?;
                    publisher.publish_batch(&a.results).await
                }
                .await;
                tracing::debug!(
                    keys = a.results.len(),
                    ms = t0.elapsed().as_millis() as u64,
                    "batch answered"
                );
                if let Err(e) = r {
                    let _ = err_tx.send(e.to_string());
                    return;
                }
                digest_tx.send_if_modified(|d| {
                    let now = publisher.digest();
                    let changed = *d != now;
                    *d = now;
                    changed
                });
            }
        });
        Ok((
            Responder {
                tx: Some(tx),
                task: Some(task),
            },
            err_rx,
            digest_rx,
        ))
    }

    async fn send(&mut self, a: Answered) -> Result<(), End> {
        match &self.tx {
            Some(tx) => tx
                .send(ToResponder::Answer(a))
                .await
                .map_err(|_| End::Resync("responder stopped".into())),
            None => Err(End::Resync("responder stopped".into())),
        }
    }

    /// Waits until every answer sent so far is in APPL_STATE_DB (before reading it).
    async fn flush(&mut self) -> Result<(), End> {
        let (done, wait) = tokio::sync::oneshot::channel();
        match &self.tx {
            Some(tx) if tx.send(ToResponder::Flush(done)).await.is_ok() => wait
                .await
                .map_err(|_| End::Resync("responder stopped".into())),
            _ => Err(End::Resync("responder stopped".into())),
        }
    }

    /// Writes what is queued, then stops.
    async fn finish(&mut self) {
        self.tx = None;
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
    }
}

/// Keys the previous run popped but never answered: APPL_DB's live rows that differ from
/// APPL_STATE_DB, and APPL_STATE_DB rows APPL_DB no longer has.
fn replay_list(
    live: &BTreeMap<String, FieldValues>,
    state: &BTreeMap<String, FieldValues>,
) -> Vec<KeyOpFieldValues> {
    let mut replay = Vec::new();
    for (k, f) in live {
        if state.get(k).is_none_or(|s| !same_fields(s, f)) {
            replay.push(KeyOpFieldValues {
                key: k.clone(),
                op: weft_sonic_db::Op::Set,
                fields: f.clone(),
            });
        }
    }
    for k in state.keys().filter(|k| !live.contains_key(*k)) {
        replay.push(KeyOpFieldValues::del(k.clone()));
    }
    replay
}

/// Aborts the session's tasks when the session ends.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

async fn redis_run_id(sonic: &SonicDb) -> Result<String, SonicDbError> {
    let mut conn = sonic.connect(SonicDbId::ApplDb).await?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn.raw())
        .await
        .map_err(|e| SonicDbError::Redis {
            context: "INFO server".into(),
            source: e,
        })?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .unwrap_or("")
        .trim()
        .to_string())
}

/// Keys in APPL_DB waiting to be popped (the backlog).
async fn pending_keys(sonic: &SonicDb) -> Result<u64, SonicDbError> {
    let names = StateTableNames::new(
        P4RT_TABLE,
        SonicDbId::ApplDb,
        sonic.db_number(SonicDbId::ApplDb),
    )?;
    let mut conn = sonic.connect(SonicDbId::ApplDb).await?;
    redis::cmd("SCARD")
        .arg(&names.key_set)
        .query_async(conn.raw())
        .await
        .map_err(|e| SonicDbError::Redis {
            context: "SCARD".into(),
            source: e,
        })
}

async fn consumer_task(
    sonic: SonicDb,
    batch_size: usize,
    poll: Duration,
    tx: mpsc::Sender<Result<Vec<KeyOpFieldValues>, SonicDbError>>,
) {
    let mut consumer = match ConsumerStateTable::new(&sonic, SonicDbId::ApplDb, P4RT_TABLE).await {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.send(Err(e)).await;
            return;
        }
    };
    consumer.set_poll_interval(poll);
    loop {
        // Waits for room first: a popped batch is only ever held here, never dropped.
        let Ok(permit) = tx.reserve().await else {
            return;
        };
        match consumer.next_batch(batch_size).await {
            Ok(batch) => permit.send(Ok(batch)),
            Err(e) => {
                permit.send(Err(e));
                return;
            }
        }
    }
}

async fn config_watch_task(sonic: SonicDb, tx: mpsc::Sender<()>) {
    let tables = config_tables();
    let run = async {
        let mut w = TableWatcher::new(&sonic, SonicDbId::ConfigDb, &tables).await?;
        loop {
            w.changed().await?;
            let _ = tx.try_send(());
        }
    };
    let Err(e): Result<std::convert::Infallible, SonicDbError> = run.await;
    tracing::warn!(error = %e, "CONFIG_DB watcher stopped");
}

/// Re-exported for tests: replays what a result list says (used by the bench too).
pub fn failed(results: &[EntryResult]) -> usize {
    results.iter().filter(|r| !r.status.is_ok()).count()
}

/// For tests: fields as a map.
pub fn fields_map(f: &FieldValues) -> BTreeMap<String, String> {
    f.iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_waits_while_batches_flow_and_spaces_itself_by_its_cost() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_millis(n);
        let cheap = Duration::from_millis(5);
        // Small tables, no batches: every AUDIT_INTERVAL, as before.
        assert!(audit_due(s(0), None, t0, Duration::ZERO, None));
        assert!(!audit_due(s(1_999), Some(s(0)), t0, cheap, None));
        assert!(audit_due(s(2_000), Some(s(0)), t0, cheap, None));
        // A batch within the last interval: the audit waits...
        assert!(!audit_due(s(10_000), Some(s(0)), t0, cheap, Some(s(9_000))));
        assert!(!audit_due(s(1_000), None, t0, cheap, Some(s(500))));
        // ...until the batches stop for an interval...
        assert!(audit_due(s(11_000), Some(s(0)), t0, cheap, Some(s(9_000))));
        // ...or for AUDIT_MAX_DEFER under constant churn, counted from the start when there
        // was no audit yet.
        assert!(audit_due(s(60_000), Some(s(0)), t0, cheap, Some(s(59_999))));
        assert!(audit_due(s(60_000), None, t0, cheap, Some(s(59_999))));
        // A read-back of 0.6 s (100k entries) runs at most every 12 s.
        let costly = Duration::from_millis(600);
        assert!(!audit_due(s(11_999), Some(s(0)), t0, costly, None));
        assert!(audit_due(s(12_000), Some(s(0)), t0, costly, None));
    }
}
