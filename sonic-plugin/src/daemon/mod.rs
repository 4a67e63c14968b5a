//! The daemon: the edge around the plugin's core ([`crate::core`]). It feeds the core what
//! happens (sessions, batches, CONFIG_DB changes, P4Runtime results, timers) and carries out
//! what the core decides (writes and reads of the switch, answers, rows, status), and nothing
//! else decides here. Sessions of (primary on the switch + connected to Redis), each starting
//! with a pipeline check and a full sync, then an event loop; anything lost (switch restarted,
//! Redis restarted, mastership lost) ends the session and the next one reconciles from scratch,
//! after a jittered backoff (`weft-retry`).
//!
//! ```text
//!  tasks                               channel            session loop (Daemon::event_loop)
//!  ─────                               ───────            ─────────────────────────────────
//!  consumer (APPL_DB P4RT_TABLE pop) ──batch_rx (2)───►  Input::Batch ─┐
//!  CONFIG_DB keyspace watcher ─────────cfg_rx (1)─────►  ConfigChanged ├─► Core::step ─► outputs:
//!  P4Runtime stream (weft-p4rt) ───────events─────────►  end session   │   Write → write task (one)
//!  write task (one Write at a time) ──────────────────►  Written ──────┤   Read  → awaited here
//!  timers: watchdog, tuning, status, core wake-up ────►  Timer, Tick ──┘   Answer → responder task
//!          counter poll, postcards (polls.rs) ─────────► COUNTERS_DB, WEFT_POSTCARDS
//!  port thread (ports.rs, across sessions) ◄──PortCmd──── Ports(..)
//! ```
//! The write task runs a Write while the loop prepares the next batch (the core's pipeline);
//! the responder writes answers in batch order while the switch takes the next batch; before
//! the loop reads CONFIG_DB or APPL_STATE_DB it flushes the responder. The consumer and the
//! keyspace watcher run as tasks feeding channels, so no Redis command of theirs is ever
//! cancelled half-way by the select (a cancelled pop would lose keys). Every Redis write goes
//! through `weft-sonic-db` tables, with rows typed by `weft-sonic-schema`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use weft_p4rt::{Client, ClientConfig, Event, P4Info, PipelineConfig, PipelinePush};
use weft_retry::RetryPolicy;
use weft_sonic_db::zmq::{AsyncDbUpdater, ServerOptions, ZmqRequest, ZmqServer};
use weft_sonic_db::{
    Digest, FieldValues, KeyOpFieldValues, SonicDb, SonicDbConfig, SonicDbError, SonicDbId, Table,
};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::{
    EcnTuningState, InstalledDigests, PLUGIN_STATUS_KEY, PLUGIN_STATUS_TTL_MS, PluginState,
    PluginStatus,
};

use crate::clock::Now;
use crate::config::PluginConfig;
use crate::core::{
    Answered, Core, CoreConfig, Ended, Input, Observed, Output, Rows, Ticket, Timer,
};
use crate::features::Publish;
use crate::pause::{PauseConfig, QueueCmd};
use crate::pipeline::{self, owned_tables};
use crate::polls::Postcards;
use crate::ports::{self, PortCmd, PortStats};
use crate::translate::Translator;

mod tasks;
pub use tasks::config_tables;
use tasks::{
    Responder, Tasks, ZmqAnswer, config_watch_task, consumer_task, p4rt_tables, pending_keys,
    read_term, redis_run_id,
};

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
    #[error("SIGUSR1: {0}")]
    Signal(#[source] std::io::Error),
    #[error("metrics: {0}")]
    Metrics(#[source] std::io::Error),
    #[error("ZMQ endpoint: {0}")]
    Zmq(#[from] weft_sonic_db::zmq::ZmqError),
}

/// Why a session ended, as the edge saw it.
type End = Ended;

fn redis_lost(e: SonicDbError) -> End {
    Ended::Resync(format!("Redis: {e}"))
}

fn poll_lost(e: crate::polls::PollError) -> End {
    match e {
        crate::polls::PollError::Db(e) => redis_lost(e),
        other => Ended::Resync(other.to_string()),
    }
}

/// Between sessions: from 100 ms, doubling to 2 s, jittered; back to 100 ms after a session
/// that ran.
const SESSION_RETRY: RetryPolicy =
    RetryPolicy::doubling(Duration::from_millis(100), Duration::from_secs(2));

/// The PSN anomaly counters (two wildcard reads of every QP slot) are read every this many
/// counter intervals.
const PSN_EVERY: u32 = 1;

pub struct Daemon {
    cfg: PluginConfig,
    pipeline: PipelineConfig,
    client: Client,
    sonic: SonicDb,
    core: Core,
    port_tx: mpsc::Sender<PortCmd>,
    port_stats: Arc<PortStats>,
    metrics: Arc<weft_telemetry::PluginMetrics>,
    started: Instant,
    postcards: Postcards,
    counter_polls: u64,
    /// The digest of APPL_STATE_DB P4RT_TABLE as this session's responder last wrote it
    /// (`None` until the session read it): published in the status row, so `weft plan` reads
    /// the rows only when it differs from what it would write.
    appl_digest: Option<Digest>,
    /// The queue task (BMv2's Thrift API), with `--bmv2-thrift`.
    queues: Option<mpsc::UnboundedSender<QueueJob>>,
    /// Batches over SONiC's ZMQ channel (`--zmq-endpoint`), bound across sessions: a request
    /// that comes between two waits in its queue (the client waits for its reply).
    zmq: Option<ZmqServer>,
    /// Requests taken over `zmq` since start (the status row's `zmq_requests`).
    zmq_requests: u64,
}

/// One session's connections, tasks and channels.
struct Ctx {
    live: Table,
    state: Table,
    responder: Responder,
    responder_failed: tokio::sync::oneshot::Receiver<String>,
    appl_digest: tokio::sync::watch::Receiver<Option<Digest>>,
    batch_rx: mpsc::Receiver<Result<Vec<KeyOpFieldValues>, SonicDbError>>,
    cfg_rx: mpsc::Receiver<()>,
    /// The Write out, if any (the core never asks for two).
    write: Option<JoinHandle<(Ticket, Result<(), weft_p4rt::Error>)>>,
    /// Writes ZMQ batches into APPL_DB P4RT_TABLE on receipt (with `--zmq-endpoint`).
    behind: Option<AsyncDbUpdater>,
    /// ZMQ requests waiting for their answers, by [`Answered::batch`]. Dropped with the
    /// session: each key is then answered SWSS_RC_UNKNOWN (the batch is in APPL_DB; the next
    /// session replays it).
    zmq_waiting: BTreeMap<u64, ZmqAnswer>,
    /// The rest of a ZMQ request larger than a batch, fed one batch at a time as the core
    /// accepts them (before anything else), with its term and where its answers go.
    zmq_rest: VecDeque<(Vec<KeyOpFieldValues>, Option<u64>, ZmqAnswer)>,
    _tasks: Tasks,
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
        // The tuner's service rates: --line-rate, each port's --tuning-line-rate over it.
        let mut tuning_line_rate = cfg.line_rate.clone();
        tuning_line_rate.extend(cfg.tuning_line_rate.clone());
        let pfc = cfg.bmv2_thrift.as_ref().map(|_| PauseConfig {
            line_rate: cfg.line_rate.clone(),
            scale: cfg.queue.scale,
        });
        let core = Core::new(
            CoreConfig {
                queue: pfc.as_ref().map_or(cfg.queue, |p| p.model(cfg.queue)),
                tuning_line_rate,
                device_id: cfg.device_id,
                batch_size: cfg.batch_size,
                pfc,
            },
            translator,
            Now::read(),
        );
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
            metrics: Arc::new(weft_telemetry::PluginMetrics::new(cfg.switch_name.clone())),
            pipeline,
            client,
            sonic,
            core,
            port_tx,
            port_stats,
            started: Instant::now(),
            postcards: Postcards::default(),
            counter_polls: 0,
            appl_digest: None,
            queues: None,
            zmq: None,
            zmq_requests: 0,
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
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
                .map_err(DaemonError::Signal)?;
        let _metrics_server = match &self.cfg.metrics {
            Some(addr) => Some(
                weft_telemetry::serve(addr, self.metrics.registry())
                    .await
                    .map_err(|e| DaemonError::Metrics(std::io::Error::other(e.to_string())))?,
            ),
            None => None,
        };
        let _queue_task = self.cfg.bmv2_thrift.clone().map(|addr| {
            let (tx, rx) = mpsc::unbounded_channel();
            self.queues = Some(tx);
            tasks::AbortOnDrop(tokio::spawn(queue_task(addr, rx, self.metrics.clone())))
        });
        if let Some(ep) = &self.cfg.zmq_endpoint {
            let server = ZmqServer::bind(
                ep,
                ServerOptions::default().serving("APPL_DB", weft_sonic_db::P4RT_TABLE),
            )?;
            tracing::info!(endpoint = %server.endpoint(), "taking P4RT_TABLE batches over ZMQ too");
            self.zmq = Some(server);
        }
        let mut backoff = SESSION_RETRY.backoff();
        loop {
            self.metrics.session();
            let end = self.session(&mut events, &mut usr1, &mut shutdown).await;
            if self.core.running() {
                backoff = SESSION_RETRY.backoff();
            }
            let shut = end == Ended::Shutdown;
            for o in self.core.step(Now::read(), Input::SessionEnded(end)) {
                if matches!(o, Output::Status) {
                    let _ = self.write_status().await;
                }
            }
            if shut {
                return Ok(());
            }
            let wait = backoff.next().unwrap_or(SESSION_RETRY.max);
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Steps the core with an input that needs no session (yet), writing the status it asks
    /// for; anything else it asks is carried out in [`Daemon::open`].
    fn step(&mut self, input: Input) -> Vec<Output> {
        self.core.step(Now::read(), input)
    }

    /// Waits to be primary and for Redis, pushes the pipeline if needed.
    async fn connect(
        &mut self,
        events: &mut weft_p4rt::Events,
        shutdown: &mut std::pin::Pin<
            &mut futures::future::Fuse<impl std::future::Future<Output = ()>>,
        >,
    ) -> Result<Vec<Output>, End> {
        // What the last session wrote may change before this one reads APPL_STATE_DB again.
        self.appl_digest = None;
        let outs = self.step(Input::WaitingForSwitch);
        if outs.iter().any(|o| matches!(o, Output::Status)) {
            let _ = self.write_status().await;
        }
        loop {
            tokio::select! {
                _ = &mut *shutdown => return Err(Ended::Shutdown),
                r = self.client.wait_primary(Duration::from_secs(5)) => match r {
                    Ok(()) => break,
                    Err(e) => tracing::info!(p4rt = %self.cfg.p4rt, error = %e, mastership = ?self.client.mastership(), "waiting to be primary"),
                },
            }
        }
        // Events from before this point are what this session is about to handle anyway.
        while let Some(Some(_)) = events.next().now_or_never() {}
        self.step(Input::WaitingForRedis);
        let run_id = loop {
            tokio::select! {
                _ = &mut *shutdown => return Err(Ended::Shutdown),
                r = redis_run_id(&self.sonic) => match r {
                    Ok(id) => break id,
                    Err(e) => {
                        tracing::info!(redis = %self.cfg.redis, error = %e, "waiting for Redis");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                },
            }
        };
        let pushed = match self.client.set_pipeline(&self.pipeline).await {
            Ok(PipelinePush::Pushed) => true,
            Ok(PipelinePush::Unchanged) => false,
            Err(e) => return Err(Ended::Resync(format!("pipeline push: {e}"))),
        };
        Ok(self.step(Input::SessionUp {
            redis_run_id: run_id,
            pushed,
            cookie: self.pipeline.cookie,
        }))
    }

    async fn session(
        &mut self,
        events: &mut weft_p4rt::Events,
        usr1: &mut tokio::signal::unix::Signal,
        shutdown: &mut std::pin::Pin<
            &mut futures::future::Fuse<impl std::future::Future<Output = ()>>,
        >,
    ) -> End {
        let outs = match self.connect(events, shutdown).await {
            Ok(o) => o,
            Err(end) => return end,
        };
        let mut ctx = match self.open(outs).await {
            Ok(c) => c,
            Err(end) => return end,
        };
        let end = self.event_loop(&mut ctx, events, usr1, shutdown).await;
        // Answers already decided are written before the next session reads APPL_STATE_DB.
        if let Some(w) = ctx.write.take() {
            w.abort();
        }
        ctx.responder.finish().await;
        end
    }

    /// Carries out the session's first outputs up to its read of P4RT_TABLE, opens the
    /// session (tasks, responder) and feeds the core what it read.
    async fn open(&mut self, outs: Vec<Output>) -> Result<Ctx, End> {
        for o in outs {
            match o {
                Output::Restore(rows) => {
                    let (live, state) = p4rt_tables(&self.sonic).await.map_err(redis_lost)?;
                    live.replace_many(&rows, &[]).await.map_err(redis_lost)?;
                    state.replace_many(&rows, &[]).await.map_err(redis_lost)?;
                }
                Output::Ports(cmd) => {
                    let _ = self.port_tx.send(cmd).await;
                }
                Output::Status => {
                    let _ = self.write_status().await;
                }
                Output::Queue(c) => self.queue(c, Instant::now()),
                Output::ReadSession => {}
                other => {
                    tracing::debug!(output = ?other, "not expected before the session reads P4RT_TABLE")
                }
            }
        }
        let (live, state) = p4rt_tables(&self.sonic).await.map_err(redis_lost)?;
        let (live_rows, state_rows) =
            tokio::try_join!(live.dump(), state.dump()).map_err(redis_lost)?;
        let term = read_term(&self.sonic).await.map_err(redis_lost)?;
        let (batch_tx, batch_rx) = mpsc::channel(2);
        let (cfg_tx, cfg_rx) = mpsc::channel::<()>(1);
        let tasks = Tasks(vec![
            tokio::spawn(consumer_task(
                self.sonic.clone(),
                self.cfg.batch_size,
                self.cfg.consumer_poll,
                batch_tx,
            )),
            tokio::spawn(config_watch_task(self.sonic.clone(), cfg_tx)),
            tokio::spawn(crate::polls::psn_task(
                self.client.clone(),
                crate::counters::psn_reads(self.info()),
                self.sonic.clone(),
                self.metrics.clone(),
                self.cfg.counter_interval.map(|d| d * PSN_EVERY),
            )),
        ]);
        let behind = match &self.zmq {
            Some(_) => Some(
                AsyncDbUpdater::start(&self.sonic, SonicDbId::ApplDb, weft_sonic_db::P4RT_TABLE)
                    .await
                    .map_err(redis_lost)?,
            ),
            None => None,
        };
        let (responder, responder_failed, mut appl_digest) =
            Responder::start(&self.sonic, live.clone(), &state_rows, behind.clone())
                .await
                .map_err(redis_lost)?;
        self.appl_digest = *appl_digest.borrow_and_update();
        let mut ctx = Ctx {
            live,
            state,
            responder,
            responder_failed,
            appl_digest,
            batch_rx,
            cfg_rx,
            write: None,
            behind,
            zmq_waiting: BTreeMap::new(),
            zmq_rest: VecDeque::new(),
            _tasks: tasks,
        };
        let read = Input::SessionRead {
            live: live_rows,
            state: state_rows,
            term,
        };
        self.feed(&mut ctx, read).await?;
        Ok(ctx)
    }

    /// Steps the core and carries out everything it asks, feeding back what the reads found.
    async fn feed(&mut self, ctx: &mut Ctx, input: Input) -> Result<(), End> {
        let t0 = Instant::now();
        let mut todo: VecDeque<Output> = self.core.step(Now::read(), input).into();
        while let Some(o) = todo.pop_front() {
            if let Some(next) = self.carry_out(ctx, o, t0).await? {
                todo.extend(self.core.step(Now::read(), next));
            }
        }
        Ok(())
    }

    /// Carries out one output; a read's result is the next input.
    async fn carry_out(
        &mut self,
        ctx: &mut Ctx,
        o: Output,
        t0: Instant,
    ) -> Result<Option<Input>, End> {
        match o {
            Output::Write { ticket, updates } => {
                debug_assert!(ctx.write.is_none(), "one Write in flight");
                let client = self.client.clone();
                ctx.write = Some(tokio::spawn(async move {
                    (ticket, client.write(&updates).await)
                }));
            }
            Output::Read { ticket, reads } => {
                return Ok(Some(Input::Read {
                    ticket,
                    result: self.read_all(reads).await,
                }));
            }
            Output::ReadConfig { tuning_state } => {
                ctx.responder.flush().await?;
                let (rows, tuning) = self.read_config(tuning_state).await.map_err(redis_lost)?;
                return Ok(Some(Input::ConfigRead { rows, tuning }));
            }
            Output::ReadApplState => {
                ctx.responder.flush().await?;
                let rows = ctx.state.dump().await.map_err(redis_lost)?;
                return Ok(Some(Input::ApplState(rows)));
            }
            Output::ReadSession => {}
            Output::Answer(a) => self.answered(ctx, a, t0).await?,
            Output::Restore(rows) => {
                ctx.live
                    .replace_many(&rows, &[])
                    .await
                    .map_err(redis_lost)?;
                ctx.state
                    .replace_many(&rows, &[])
                    .await
                    .map_err(redis_lost)?;
            }
            Output::Publish(p) => self.publish(&p).await.map_err(redis_lost)?,
            Output::Ports(cmd) => {
                let _ = self.port_tx.send(cmd).await;
            }
            Output::Status => self.write_status().await.map_err(redis_lost)?,
            Output::Queue(c) => self.queue(c, t0),
            Output::Observed(obs) => self.observed(obs),
            Output::Resync(reason) => return Err(Ended::Resync(reason)),
        }
        Ok(None)
    }

    async fn read_all(
        &self,
        reads: Vec<Vec<weft_p4rt::proto::p4::v1::Entity>>,
    ) -> Result<Vec<weft_p4rt::proto::p4::v1::Entity>, weft_p4rt::Error> {
        let mut out = Vec::new();
        for r in reads {
            out.extend(self.client.read(r).await?);
        }
        Ok(out)
    }

    async fn answered(&mut self, ctx: &mut Ctx, a: Answered, t0: Instant) -> Result<(), End> {
        let keys = a.results.len();
        let failed = a.results.iter().filter(|r| !r.status.is_ok()).count();
        tracing::debug!(keys, write_ms = a.took.as_millis() as u64, "batch written");
        // From the switch write's start to the answers handed on.
        self.metrics.batch(
            a.took.as_secs_f64() + t0.elapsed().as_secs_f64(),
            (keys - failed) as u64,
            failed as u64,
        );
        let zmq = match a.batch {
            0 => None,
            n => ctx.zmq_waiting.remove(&n),
        };
        ctx.responder.send(a, zmq).await?;
        tracing::debug!(
            keys,
            failed,
            ms = t0.elapsed().as_millis() as u64,
            "batch applied"
        );
        Ok(())
    }

    fn observed(&self, obs: Observed) {
        match obs {
            Observed::Watchdog(queues) => {
                for (port, prio, stormed, new_storm) in queues {
                    self.metrics.watchdog(&port, prio, stormed, new_storm);
                }
            }
            Observed::Tuning {
                histograms,
                shift,
                moves,
            } => {
                for (port, h) in &histograms {
                    self.metrics.set_depth(port, h, u32::from(shift));
                }
                for (port, q, reason) in moves {
                    self.metrics.tuner_move(&port, q, reason);
                }
            }
        }
    }

    /// CONFIG_DB's watched tables, and STATE_DB's tuning records when asked.
    async fn read_config(
        &self,
        tuning_state: bool,
    ) -> Result<(Vec<crate::core::ConfigRow>, Option<Rows>), SonicDbError> {
        let conn = self.sonic.connect(SonicDbId::ConfigDb).await?;
        let mut rows = Vec::new();
        for name in config_tables() {
            for (k, f) in Table::new(conn.clone(), name)?.dump().await? {
                rows.push((name, k, f));
            }
        }
        let tuning = if tuning_state {
            let state = self.sonic.connect(SonicDbId::StateDb).await?;
            Some(Table::new(state, EcnTuningState::TABLE)?.dump().await?)
        } else {
            None
        };
        Ok((rows, tuning))
    }
}

/// The session loop's periodic timers.
struct Timers {
    wd: tokio::time::Interval,
    wd_poll: Duration,
    status: tokio::time::Interval,
    counter: tokio::time::Interval,
    tuning: tokio::time::Interval,
    postcard: tokio::time::Interval,
}

fn interval(d: Option<Duration>) -> tokio::time::Interval {
    let mut t = tokio::time::interval(d.unwrap_or(Duration::from_secs(3600)));
    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    t
}

impl Timers {
    fn new(cfg: &PluginConfig, wd_poll: Duration) -> Self {
        Timers {
            wd: interval(Some(wd_poll)),
            wd_poll,
            status: interval(Some(cfg.status_interval)),
            counter: interval(cfg.counter_interval),
            tuning: interval(cfg.tuning_interval),
            postcard: interval(Some(Duration::from_millis(100))),
        }
    }

    /// CONFIG_DB may have changed the watchdog's poll interval.
    fn follow(&mut self, wd_poll: Duration) {
        if wd_poll != self.wd_poll {
            self.wd_poll = wd_poll;
            self.wd = interval(Some(wd_poll));
        }
    }
}

/// What woke the session loop.
enum Woke {
    Input(Input),
    /// Handled on the edge (nothing for the core).
    Done,
}

impl Daemon {
    async fn event_loop(
        &mut self,
        ctx: &mut Ctx,
        events: &mut weft_p4rt::Events,
        usr1: &mut tokio::signal::unix::Signal,
        shutdown: &mut std::pin::Pin<
            &mut futures::future::Fuse<impl std::future::Future<Output = ()>>,
        >,
    ) -> End {
        let mut timers = Timers::new(&self.cfg, self.core.features().intent.wd_poll);
        loop {
            if self.core.accepts_batch()
                && let Some((ops, term, answer)) = ctx.zmq_rest.pop_front()
            {
                ctx.zmq_waiting.insert(self.core.batches_in() + 1, answer);
                if let Err(end) = self.feed(ctx, Input::Batch { ops, term }).await {
                    return end;
                }
                continue;
            }
            let wake = self.core.next_wake();
            let accepts = self.core.accepts_batch() && ctx.zmq_rest.is_empty();
            let woke: Result<Woke, End> = tokio::select! {
                _ = &mut *shutdown => Err(Ended::Shutdown),
                b = ctx.batch_rx.recv(), if accepts => match b {
                    Some(Ok(ops)) => self.batch(ctx, ops).await,
                    Some(Err(e)) => Err(redis_lost(e)),
                    None => Err(Ended::Resync("consumer task ended".into())),
                },
                z = next_zmq(&mut self.zmq), if accepts => match z {
                    Some(Ok(req)) => self.zmq_batch(ctx, req).await,
                    // Refused whole and already answered (malformed, too large, unknown table).
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "ZMQ message refused");
                        Ok(Woke::Done)
                    }
                    None => Err(Ended::Resync("ZMQ server stopped".into())),
                },
                w = async { match ctx.write.as_mut() { Some(h) => h.await, None => std::future::pending().await } } => {
                    ctx.write = None;
                    match w {
                        Ok((ticket, result)) => Ok(Woke::Input(Input::Written { ticket, result })),
                        Err(e) => Err(Ended::Resync(format!("switch write task: {e}"))),
                    }
                },
                c = ctx.cfg_rx.recv() => match c {
                    Some(()) => Ok(Woke::Input(Input::ConfigChanged)),
                    None => Err(Ended::Resync("CONFIG_DB watcher ended".into())),
                },
                _ = sleep_until(wake) => Ok(Woke::Input(Input::Tick)),
                ev = events.next() => self.stream_event(ev),
                _ = timers.postcard.tick(), if !self.postcards.is_empty() => self.flush_postcards().await,
                _ = timers.wd.tick(), if !self.core.features().wd.queues.is_empty() => Ok(Woke::Input(Input::Timer(Timer::Watchdog))),
                _ = timers.counter.tick(), if self.cfg.counter_interval.is_some() => self.poll_counters().await,
                _ = timers.tuning.tick(), if self.cfg.tuning_interval.is_some() && self.core.features().tuning.sampling_any() => Ok(Woke::Input(Input::Timer(Timer::Tuning))),
                _ = timers.status.tick() => Ok(Woke::Input(Input::Timer(Timer::Status))),
                c = ctx.appl_digest.changed() => match c {
                    // The responder wrote APPL_STATE_DB: say so in the status row now, not at the
                    // next tick, so a plan made after the answers trusts the new digest.
                    Ok(()) => {
                        self.appl_digest = *ctx.appl_digest.borrow_and_update();
                        self.write_status().await.map(|()| Woke::Done).map_err(redis_lost)
                    }
                    Err(_) => Err(Ended::Resync("responder stopped".into())),
                },
                _ = usr1.recv() => {
                    self.health_line();
                    Ok(Woke::Done)
                }
                e = &mut ctx.responder_failed => Err(Ended::Resync(format!(
                    "answering keys: {}",
                    e.unwrap_or_else(|_| "responder stopped".into())
                ))),
            };
            let result = match woke {
                Ok(Woke::Input(input)) => self.feed(ctx, input).await,
                Ok(Woke::Done) => Ok(()),
                Err(end) => Err(end),
            };
            if let Err(end) = result {
                return end;
            }
            timers.follow(self.core.features().intent.wd_poll);
        }
    }

    /// A batch from the consumer. A CONFIG_DB change already signalled goes first: the
    /// controller writes CONFIG_DB before APPL_DB, and this batch may name the ports it adds.
    async fn batch(&mut self, ctx: &mut Ctx, ops: Vec<KeyOpFieldValues>) -> Result<Woke, End> {
        if ctx.cfg_rx.try_recv().is_ok() {
            self.feed(ctx, Input::ConfigChanged).await?;
        }
        let t0 = Instant::now();
        let keys = ops.len();
        self.feed(ctx, Input::Batch { ops, term: None }).await?;
        tracing::debug!(keys, ms = t0.elapsed().as_millis() as u64, "batch prepared");
        Ok(Woke::Done)
    }

    /// A batch over ZMQ: written behind into APPL_DB (unless its term is over: a fenced batch
    /// leaves nothing anywhere), then fed to the core like a popped one, with its term; its
    /// answers go back as its reply.
    async fn zmq_batch(&mut self, ctx: &mut Ctx, mut req: ZmqRequest) -> Result<Woke, End> {
        if ctx.cfg_rx.try_recv().is_ok() {
            self.feed(ctx, Input::ConfigChanged).await?;
        }
        let fenced = matches!((req.term, self.core.term()), (Some(t), Some(held)) if t < held);
        if !fenced && let Some(u) = &ctx.behind {
            u.set_fence(req.term);
            u.update(req.entries.clone());
        }
        let term = req.term;
        self.zmq_requests += 1;
        tracing::debug!(
            keys = req.entries.len(),
            ?term,
            coalesced = req.coalesced,
            "ZMQ batch"
        );
        // A request larger than a batch goes to the core as several, like the APPL_DB
        // consumer's pops, so the switch write of one overlaps the preparation of the next
        // (one P4Runtime Write of 10,000 updates took BMv2 4× as long as 10 pipelined ones);
        // the reply goes once the last is answered.
        let id = self.core.batches_in() + 1;
        let size = self.cfg.batch_size.max(1);
        let mut entries = std::mem::take(&mut req.entries).into_iter();
        let mut parts: VecDeque<Vec<KeyOpFieldValues>> = VecDeque::new();
        loop {
            let part: Vec<KeyOpFieldValues> = entries.by_ref().take(size).collect();
            if part.is_empty() && !parts.is_empty() {
                break;
            }
            parts.push_back(part);
        }
        let first = parts.pop_front().unwrap_or_default();
        let mut last = Some(ZmqAnswer::Last(id, Box::new(req)));
        while let Some(part) = parts.pop_front() {
            let answer = match parts.is_empty() {
                true => last.take(),
                false => None,
            };
            ctx.zmq_rest
                .push_back((part, term, answer.unwrap_or(ZmqAnswer::Part(id))));
        }
        let answer = last.unwrap_or(ZmqAnswer::Part(id));
        ctx.zmq_waiting.insert(id, answer);
        self.feed(ctx, Input::Batch { ops: first, term }).await?;
        Ok(Woke::Done)
    }

    fn stream_event(&mut self, ev: Option<Event>) -> Result<Woke, End> {
        match ev {
            Some(Event::Disconnected { reason }) => {
                Err(Ended::Resync(format!("switch disconnected: {reason}")))
            }
            Some(Event::LostPrimary {
                primary_election_id,
            }) => Err(Ended::Resync(format!(
                "lost primary to election id {primary_election_id}"
            ))),
            Some(Event::Reconnected) => Err(Ended::Resync(
                "switch reconnected (it may have restarted)".into(),
            )),
            None => Err(Ended::Shutdown),
            Some(Event::PacketIn(p)) => {
                if let Some(input) = self.pfc_packet_in(&p) {
                    return Ok(Woke::Input(input));
                }
                let ports = self.core.engine().translator.ports();
                self.postcards.packet_in(
                    &self.pipeline.p4info,
                    &p,
                    &self.cfg.switch_name,
                    ports,
                    &self.metrics,
                );
                Ok(Woke::Done)
            }
            Some(Event::Lagged(n)) => {
                // Stream events (under load: packet-ins) this loop did not take in time.
                self.metrics.postcards_lagged(n);
                Ok(Woke::Done)
            }
            Some(_) => Ok(Woke::Done),
        }
    }

    async fn flush_postcards(&mut self) -> Result<Woke, End> {
        let max = self
            .core
            .features()
            .intent
            .telemetry
            .map_or(10_000, |t| t.1);
        self.postcards
            .flush(&self.sonic, max, &self.metrics)
            .await
            .map(|()| Woke::Done)
            .map_err(poll_lost)
    }

    async fn poll_counters(&mut self) -> Result<Woke, End> {
        let engine = self.core.engine();
        let ports = engine.translator.ports().clone();
        let nexthops = engine.nexthop_ids();
        crate::polls::poll_counters(
            &self.client,
            self.info(),
            &self.sonic,
            &self.metrics,
            &ports,
            &nexthops,
            self.cfg.counter_interval,
        )
        .await
        .map_err(poll_lost)?;
        self.counter_polls += 1;
        Ok(Woke::Done)
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
        if !p.counters.is_empty() || !p.snapshot.is_empty() {
            let conn = self.sonic.connect(SonicDbId::CountersDb).await?;
            // One MULTI: the histograms' copy never lags their rows.
            Table::new(conn, "COUNTERS")?
                .merge_many_with(
                    &p.counters,
                    &[(weft_sonic_schema::snapshot::KEY, &p.snapshot)],
                )
                .await?;
        }
        Ok(())
    }

    async fn status(&self) -> PluginStatus {
        let c = self.core.status();
        let s = &c.stats;
        let pending = pending_keys(&self.sonic).await.unwrap_or(0);
        let mut st = PluginStatus {
            name: PLUGIN_STATUS_KEY.into(),
            state: c.state,
            pid: std::process::id(),
            device_id: self.cfg.device_id,
            p4rt: self.cfg.p4rt.clone(),
            pipeline_cookie: c.cookie,
            switch_updates: s.switch_updates,
            batches: s.batches,
            keys_ok: s.keys_ok,
            keys_failed: s.keys_failed,
            syncs: s.syncs,
            last_sync_updates: s.last_sync_updates,
            sync_failures: s.sync_failures,
            installed_keys: c.installed_keys,
            pending_keys: pending,
            sessions: c.sessions,
            pipeline_pushes: c.pipeline_pushes,
            redis_restores: c.redis_restores,
            ports_down: self.port_stats.ports_down.load(Ordering::Relaxed),
            port_mask_writes: self.port_stats.mask_writes.load(Ordering::Relaxed),
            link_events: self.port_stats.link_events.load(Ordering::Relaxed),
            pfc_wd_storms: c.wd_storms,
            counter_polls: self.counter_polls,
            uptime_s: self.started.elapsed().as_secs(),
            updated_ms: Now::read().wall_ms,
            appl_state_digest: None,
            appl_state_rows: None,
            config_digest: None,
            config_rows: None,
            zmq_requests: self.zmq.as_ref().map(|_| self.zmq_requests),
        };
        if let (Some(entries), Some(config)) = (self.appl_digest, c.config_digest) {
            st.set_digests(&InstalledDigests { entries, config });
        }
        st
    }

    /// The status row, which expires unless refreshed: its presence says the plugin lives.
    async fn write_status(&self) -> Result<(), SonicDbError> {
        let st = self.status().await;
        let all: Vec<&str> = PluginState::ALL.iter().map(|s| s.as_str()).collect();
        self.metrics.state(st.state.as_str(), &all);
        self.metrics.backlog(st.pending_keys);
        let conn = self.sonic.connect(SonicDbId::StateDb).await?;
        // Expires after several missed refreshes, never before the next one is due.
        let ttl = Duration::from_millis(PLUGIN_STATUS_TTL_MS).max(self.cfg.status_interval * 3);
        Table::new(conn, PluginStatus::TABLE)?
            .replace_with_ttl(&st.key(), &st.to_fields(), ttl)
            .await
    }

    fn health_line(&self) {
        let c = self.core.status();
        let s = &c.stats;
        tracing::info!(
            state = %c.state,
            installed_keys = c.installed_keys,
            keys_ok = s.keys_ok,
            keys_failed = s.keys_failed,
            syncs = s.syncs,
            sessions = c.sessions,
            pipeline_pushes = c.pipeline_pushes,
            ports_down = self.port_stats.ports_down.load(Ordering::Relaxed),
            pfc_wd_storms = c.wd_storms,
            uptime_s = self.started.elapsed().as_secs(),
            "health"
        );
    }
}

/// A queue command for the queue task, with when the input that asked for it arrived.
type QueueJob = (QueueCmd, Instant, Option<String>);

impl Daemon {
    /// A packet-in that is a PFC frame (reason PFC): the core's input. Anything else is not.
    fn pfc_packet_in(&self, p: &weft_p4rt::proto::p4::v1::PacketIn) -> Option<Input> {
        use weft_p4::packet_metadata::packet_in::fields as f;
        let d = self.info().decode_packet_in(p).ok()?;
        if d.get_u64(f::reason::NAME) != Some(u64::from(weft_p4::constants::PACKET_IN_REASON_PFC)) {
            return None;
        }
        let port = d.get_u64(f::ingress_port::NAME)?;
        match crate::pause::decode(&d.payload) {
            Ok(frame) => Some(Input::PfcFrame {
                port: u32::try_from(port).ok()?,
                frame,
            }),
            Err(e) => {
                tracing::debug!(port, error = %e, "PFC packet-in not decoded");
                None
            }
        }
    }

    /// Hands a queue command to the queue task (none without --bmv2-thrift).
    fn queue(&self, c: QueueCmd, t0: Instant) {
        let Some(tx) = &self.queues else { return };
        let name = match &c {
            QueueCmd::Hold { port, .. } => self
                .core
                .features()
                .intent
                .ports
                .name(*port)
                .map(str::to_string),
            _ => None,
        };
        let _ = tx.send((c, t0, name));
    }
}

/// Carries out queue commands over BMv2's Thrift API, in order, one connection across
/// sessions (a call that fails is tried once more on a new connection: BMv2 restarted).
async fn queue_task(
    addr: String,
    mut rx: mpsc::UnboundedReceiver<QueueJob>,
    metrics: Arc<weft_telemetry::PluginMetrics>,
) {
    let mut t = crate::thrift::Bmv2Thrift::new(addr, Duration::from_millis(500));
    let mut failing = false;
    while let Some((cmd, t0, name)) = rx.recv().await {
        let mut r = apply_queue_cmd(&mut t, &cmd).await;
        if r.is_err() {
            r = apply_queue_cmd(&mut t, &cmd).await;
        }
        match r {
            Ok(()) => {
                if failing {
                    tracing::info!(thrift = %t.addr(), "BMv2 queue commands work again");
                    failing = false;
                }
                if let (QueueCmd::Hold { prio, held, .. }, Some(port)) = (&cmd, &name) {
                    metrics.pfc_paused(port, *prio, *held, t0.elapsed().as_secs_f64());
                    tracing::debug!(
                        port,
                        prio,
                        held,
                        us = t0.elapsed().as_micros() as u64,
                        "PFC hold"
                    );
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(error = %e, command = ?cmd, "BMv2 queue command failed; PFC pausing is off until it works");
                }
                failing = true;
            }
        }
    }
}

async fn apply_queue_cmd(
    t: &mut crate::thrift::Bmv2Thrift,
    cmd: &QueueCmd,
) -> Result<(), crate::thrift::ThriftError> {
    let reg = crate::pause::HOLD_REGISTER;
    match cmd {
        QueueCmd::Rates(rates) => {
            for (port, pps) in rates {
                t.set_queue_rate(*port, *pps).await?;
            }
            Ok(())
        }
        QueueCmd::ReleaseAll => t.register_reset(reg).await,
        QueueCmd::Rearm(cells) => {
            let state = crate::pause::STATE_REGISTER;
            let now = t.register_read_all(state).await?;
            let pausing: Vec<u32> = cells
                .iter()
                .copied()
                .filter(|c| now.get(*c as usize).is_some_and(|v| *v != 0))
                .collect();
            for c in &pausing {
                t.register_write(state, *c, 0).await?;
            }
            if !pausing.is_empty() {
                tracing::trace!(cells = ?pausing, "PFC state re-armed");
            }
            Ok(())
        }
        QueueCmd::Hold {
            port,
            prio,
            held,
            rate,
        } => {
            let index = crate::counters::queue_cell(*port, *prio);
            // Held: a finite rate first, so the queue never goes around at BMv2's full speed;
            // released: the hold first, the rate after.
            if let (true, Some(r)) = (held, rate) {
                t.set_priority_queue_rate(*port, *prio, *r).await?;
            }
            t.register_write(reg, index, i64::from(*held)).await?;
            if let (false, Some(r)) = (held, rate) {
                t.set_priority_queue_rate(*port, *prio, *r).await?;
            }
            Ok(())
        }
    }
}

async fn next_zmq(
    server: &mut Option<ZmqServer>,
) -> Option<Result<ZmqRequest, weft_sonic_db::zmq::ZmqError>> {
    match server {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// How many answers of a list are failures (used by the tests and the bench).
pub fn failed(results: &[weft_sonic_db::EntryResult]) -> usize {
    results.iter().filter(|r| !r.status.is_ok()).count()
}

/// For tests: fields as a map.
pub fn fields_map(f: &FieldValues) -> BTreeMap<String, String> {
    f.iter().cloned().collect()
}
