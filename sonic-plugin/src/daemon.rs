//! The daemon: sessions of (primary on the switch + connected to Redis), each starting with
//! a pipeline check and a full sync, then an event loop. Anything lost (switch restarted,
//! Redis restarted, mastership lost) ends the session; the next one reconciles from scratch.
//!
//! ```text
//!   run ─┬─ port task (lives across sessions): link events / sysfs / admin state
//!        │      └─► port_status_table default action + STATE_DB PORT_TABLE oper_status
//!        └─ loop session:
//!             wait primary ─► Redis up? (restarted: restore APPL_DB/APPL_STATE_DB from memory)
//!             ─► push pipeline if cookie differs ─► read CONFIG_DB ─► note unanswered keys
//!             ─► start consumer task + CONFIG_DB keyspace task ─► full sync ─► replay unanswered
//!             ─► select { batch | config change | switch event | watchdog tick | counter tick
//!                         | status tick | SIGUSR1 | shutdown }
//! ```
//!
//! The consumer and the keyspace watcher run as tasks feeding channels, so no Redis command
//! of theirs is ever cancelled half-way by the select (a cancelled pop would lose keys).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use weft_appdb::PortMap;
use weft_p4::{counters as c, tables as t};
use weft_p4rt::proto::p4::v1::{Update, update};
use weft_p4rt::{Client, ClientConfig, Event, P4Info, PipelineConfig, PipelinePush};
use weft_sonic_db::{
    ConsumerStateTable, EntryResult, FieldValues, KeyOpFieldValues, P4RT_TABLE, P4rtKey,
    ResponsePublisher, SonicDb, SonicDbConfig, SonicDbError, SonicDbId, Table,
};

use crate::config::PluginConfig;
use crate::engine::{Engine, same_fields};
use crate::objects::Objects;
use crate::pipeline::{self, owned_tables};
use crate::ports::{self, LinkEvent};
use crate::qos::{self, CONFIG_TABLES, ConfigView};
use crate::translate::Translator;
use crate::tuning::{self, Tuning};
use crate::watchdog::{self, Watchdog, WdEvent};

/// STATE_DB key of the plugin's status.
pub const STATUS_TABLE: &str = "WEFT_PLUGIN";
pub const STATUS_KEY: &str = "status";
/// STATE_DB table of the watchdog state per (port, priority).
pub const PFC_WD_STATE_TABLE: &str = "PFC_WD_STATE";

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Pipeline(#[from] pipeline::PipelineError),
    #[error(transparent)]
    P4rt(#[from] weft_p4rt::Error),
    #[error(transparent)]
    Db(#[from] SonicDbError),
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

/// Shared between the port task and the status line.
#[derive(Debug, Default)]
pub struct PortStats {
    pub ports_down: AtomicU64,
    pub mask_writes: AtomicU64,
    pub link_events: AtomicU64,
}

enum PortCmd {
    Config {
        ids: BTreeMap<String, u32>,
        admin_down: BTreeSet<String>,
    },
    Reassert,
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
    view: ConfigView,
    qos_objects: Objects,
    wd: Watchdog,
    wd_poll: Duration,
    tuning: Tuning,
    port_tx: mpsc::Sender<PortCmd>,
    port_stats: Arc<PortStats>,
    redis_run_id: Option<String>,
    counters: Counters,
    state: &'static str,
    started: Instant,
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

impl Daemon {
    pub fn new(cfg: PluginConfig) -> Result<Daemon, DaemonError> {
        let pipeline = pipeline::load(&cfg.pipeline)?;
        let client = Client::connect(ClientConfig::new(
            cfg.p4rt.clone(),
            cfg.device_id,
            cfg.election_id,
        ))?;
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
        tokio::spawn(port_task(
            client.clone(),
            pipeline.p4info.clone(),
            sonic.clone(),
            cfg.interfaces.clone(),
            port_rx,
            port_stats.clone(),
        ));
        Ok(Daemon {
            pipeline,
            client,
            engine,
            sonic,
            view: ConfigView::default(),
            qos_objects: Objects::new(),
            wd: Watchdog::default(),
            wd_poll: watchdog::DEFAULT_POLL,
            tuning: Tuning::new(cfg.queue, cfg.tuning_line_rate.clone()),
            port_tx,
            port_stats,
            redis_run_id: None,
            counters: Counters::default(),
            state: "starting",
            started: Instant::now(),
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
        let mut backoff = Duration::from_millis(100);
        loop {
            self.counters.sessions += 1;
            let end = self.session(&mut events, &mut usr1, &mut shutdown).await;
            match end {
                End::Shutdown => {
                    self.state = "stopped";
                    let _ = self.write_status().await;
                    tracing::info!("plugin stopped");
                    return Ok(());
                }
                End::Resync(reason) => {
                    self.state = "reconnecting";
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
        self.state = "waiting-for-switch";
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
        self.state = "waiting-for-redis";
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
        match self.setup(&run_id).await {
            Ok(()) => {}
            Err(end) => return end,
        }
        self.redis_run_id = Some(run_id);

        // 3. Consumers, sync, replay.
        self.state = "syncing";
        let (appl_live, appl_state) = match self.p4rt_tables().await {
            Ok(t) => t,
            Err(e) => return e.into(),
        };
        let (live, state) = match tokio::try_join!(appl_live.dump(), appl_state.dump()) {
            Ok(x) => x,
            Err(e) => return e.into(),
        };
        let mut replay = Vec::new();
        for (k, f) in &live {
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
        ]);
        let mut publisher = match ResponsePublisher::new(&self.sonic, P4RT_TABLE).await {
            Ok(p) => p,
            Err(e) => return e.into(),
        };
        // CONFIG_DB again, now that the watcher is subscribed: nothing changes unseen.
        if let Err(e) = self.reload_config().await {
            return e;
        }
        let t0 = Instant::now();
        let report = match self.engine.full_sync(&state, self.owned_desired()).await {
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
        let _ = self.port_tx.send(PortCmd::Reassert).await;
        if !replay.is_empty() {
            tracing::info!(
                keys = replay.len(),
                "replaying keys popped but never answered"
            );
            for chunk in replay.chunks(self.cfg.batch_size) {
                if let Err(e) = self.handle_batch(chunk, &mut publisher, &appl_live).await {
                    return e;
                }
            }
        }
        self.state = "running";
        let _ = self.write_status().await;

        // 4. Events.
        let mut wd_tick = tokio::time::interval(self.wd_poll);
        let mut status_tick = tokio::time::interval(self.cfg.status_interval);
        let mut counter_tick = tokio::time::interval(
            self.cfg
                .counter_interval
                .unwrap_or(Duration::from_secs(3600)),
        );
        let mut tuning_tick = tokio::time::interval(
            self.cfg
                .tuning_interval
                .unwrap_or(Duration::from_secs(3600)),
        );
        for t in [
            &mut wd_tick,
            &mut status_tick,
            &mut counter_tick,
            &mut tuning_tick,
        ] {
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }
        let end = loop {
            tokio::select! {
                _ = &mut *shutdown => break End::Shutdown,
                b = batch_rx.recv() => match b {
                    Some(Ok(batch)) => {
                        if let Err(e) = self.handle_batch(&batch, &mut publisher, &appl_live).await {
                            break e;
                        }
                    }
                    Some(Err(e)) => break e.into(),
                    None => break End::Resync("consumer task ended".into()),
                },
                c = cfg_rx.recv() => match c {
                    Some(()) => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        while cfg_rx.try_recv().is_ok() {}
                        if let Err(e) = self.on_config_change(&appl_state).await {
                            break e;
                        }
                        wd_tick = tokio::time::interval(self.wd_poll);
                    }
                    None => break End::Resync("CONFIG_DB watcher ended".into()),
                },
                ev = events.next() => match ev {
                    Some(Event::Disconnected { reason }) => break End::Resync(format!("switch disconnected: {reason}")),
                    Some(Event::LostPrimary { primary_election_id }) => break End::Resync(format!("lost primary to election id {primary_election_id}")),
                    Some(Event::Reconnected) => break End::Resync("switch reconnected (it may have restarted)".into()),
                    None => break End::Shutdown,
                    Some(_) => {}
                },
                _ = wd_tick.tick(), if !self.wd.queues.is_empty() => {
                    if let Err(e) = self.poll_watchdog().await {
                        break e;
                    }
                }
                _ = counter_tick.tick(), if self.cfg.counter_interval.is_some() => {
                    if let Err(e) = self.poll_counters().await {
                        break e;
                    }
                }
                _ = tuning_tick.tick(), if self.cfg.tuning_interval.is_some() && !self.tuning.queues.is_empty() => {
                    if let Err(e) = self.poll_tuning().await {
                        break e;
                    }
                }
                _ = status_tick.tick() => {
                    if let Err(e) = self.write_status().await {
                        break e.into();
                    }
                    if let Err(e) = self.write_tuning_records(None).await {
                        break e.into();
                    }
                }
                _ = usr1.recv() => self.health_line(),
            }
        };
        drop(tasks);
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
        if restarted && !self.engine.installed().is_empty() {
            // Redis came back empty: the controller's diff base (APPL_STATE_DB) is gone but the
            // switch still forwards. Put back what is installed, so nothing is torn down and a
            // re-apply finds it in place.
            let (live, state) = self.p4rt_tables().await?;
            let mut n = 0;
            for (k, inst) in self.engine.installed() {
                live.replace(k, &inst.fields).await?;
                state.replace(k, &inst.fields).await?;
                n += 1;
            }
            self.counters.redis_restores += 1;
            tracing::warn!(
                keys = n,
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
        Ok(())
    }

    fn owned_desired(&self) -> Objects {
        let mut o = self.qos_objects.clone();
        let ports = self.engine.translator.ports().clone();
        match self.wd.objects(self.info(), &|p| ports.id(p)) {
            Ok(w) => o.extend(w),
            Err(e) => tracing::error!(error = %e, "watchdog entries cannot be built"),
        }
        // Tuned ECN entries replace the static ones under the same key, so no re-apply of
        // unchanged QoS rows ever writes the static values back over tuned ones.
        match self.tuning.objects(self.info(), &ports, self.cfg.device_id) {
            Ok(es) => o.extend(
                es.into_iter()
                    .filter_map(|e| crate::objects::ObjKey::of(&e).map(|k| (k, e))),
            ),
            Err(e) => tracing::error!(error = %e, "tuned ECN entries cannot be built"),
        }
        o
    }

    /// Reads CONFIG_DB and recomputes ports, QoS objects and the watchdog. Returns whether the
    /// port map changed.
    async fn load_config(&mut self) -> Result<bool, SonicDbError> {
        let conn = self.sonic.connect(SonicDbId::ConfigDb).await?;
        let mut view = ConfigView::default();
        for name in CONFIG_TABLES {
            let rows = Table::new(conn.clone(), name)?.dump().await?;
            let rows = rows
                .into_iter()
                .map(|(k, f)| (k, f.into_iter().collect::<BTreeMap<_, _>>()))
                .collect();
            view.tables.insert(name.to_string(), rows);
        }
        let has_ports = view.rows("PORT").next().is_some();
        if !has_ports && self.view.rows("PORT").next().is_some() {
            // An empty CONFIG_DB (a restarted Redis) means "not configured yet", not "no ports":
            // keep programming what was configured until the controller writes it again.
            tracing::warn!("CONFIG_DB has no PORT rows; keeping the previous configuration");
            return Ok(false);
        }
        let (ports, warns) = view.port_map();
        for w in warns {
            tracing::warn!(problem = %w.0, "CONFIG_DB");
        }
        let changed = ports.by_name != self.engine.translator.ports().by_name;
        self.engine.translator.set_ports(ports.clone());
        match qos::plan(self.info(), &view, &self.cfg.queue, self.cfg.device_id) {
            Ok(p) => {
                for w in &p.warnings {
                    tracing::warn!(problem = %w.0, "QoS configuration");
                }
                self.qos_objects = p.objects;
                let (wd_cfg, poll, warns) = watchdog::configs(&view);
                for w in warns {
                    tracing::warn!(problem = %w, "PFC watchdog configuration");
                }
                let watched = p
                    .lossless
                    .iter()
                    .filter_map(|(port, prio)| {
                        wd_cfg.get(port).map(|c| ((port.clone(), *prio), *c))
                    })
                    .collect();
                self.wd.reconfigure(watched);
                self.wd_poll = poll;
            }
            Err(e) => tracing::error!(error = %e, "QoS entries cannot be built"),
        }
        self.reconfigure_tuning(&view).await?;
        let admin_down = view
            .rows("PORT")
            .filter(|(_, f)| f.get("admin_status").is_some_and(|s| s == "down"))
            .map(|(k, _)| k.clone())
            .collect();
        let _ = self
            .port_tx
            .send(PortCmd::Config {
                ids: ports.by_name.clone(),
                admin_down,
            })
            .await;
        self.view = view;
        Ok(changed)
    }

    /// Hands the new CONFIG_DB view to the tuner (see [`tuning`] for what is kept) and brings
    /// STATE_DB `WEFT_ECN_TUNING` in line.
    async fn reconfigure_tuning(&mut self, view: &ConfigView) -> Result<(), SonicDbError> {
        let table = Table::new(
            self.sonic.connect(SonicDbId::StateDb).await?,
            tuning::TUNING_TABLE,
        )?;
        // What an earlier run tuned, read only for queues this run has not seen yet.
        let restored = if self.tuning.queues.is_empty() {
            table
                .dump()
                .await?
                .into_iter()
                .map(|(k, f)| (k, f.into_iter().collect()))
                .collect()
        } else {
            BTreeMap::new()
        };
        let (write, gone, warns) = self.tuning.reconfigure(view, &restored);
        for w in warns {
            tracing::warn!(problem = %w, "ECN tuning configuration");
        }
        for (port, q) in gone {
            table.del(&format!("{port}|{q}")).await?;
        }
        self.write_tuning_records(Some(&write)).await
    }

    /// STATE_DB records of `keys` (all queues when `None`).
    async fn write_tuning_records(
        &self,
        keys: Option<&[tuning::QueueKey]>,
    ) -> Result<(), SonicDbError> {
        if self.tuning.queues.is_empty() || keys.is_some_and(|k| k.is_empty()) {
            return Ok(());
        }
        let table = Table::new(
            self.sonic.connect(SonicDbId::StateDb).await?,
            tuning::TUNING_TABLE,
        )?;
        for (k, st) in &self.tuning.queues {
            if keys.is_some_and(|ks| !ks.contains(k)) {
                continue;
            }
            table
                .replace(&format!("{}|{}", k.0, k.1), &st.record())
                .await?;
        }
        Ok(())
    }

    /// One tuning interval: read counters, step the tuners, write changed thresholds to the
    /// switch and record them; publish the depth histograms to COUNTERS_DB.
    async fn poll_tuning(&mut self) -> Result<(), End> {
        let ports: PortMap = self.engine.translator.ports().clone();
        let reads = self.tuning.reads(self.info(), &ports);
        if reads.is_empty() {
            return Ok(());
        }
        let res = self
            .client
            .read(reads)
            .await
            .map_err(|e| End::Resync(format!("tuning counter read: {e}")))?;
        let out = self
            .tuning
            .observe(crate::counters::cells(&res), Instant::now(), &ports);
        if !out.histograms.is_empty() {
            let mut conn = self.sonic.connect(SonicDbId::CountersDb).await?;
            let mut pipe = redis::pipe();
            for (port, hist) in &out.histograms {
                let mut cmd = redis::cmd("HSET");
                cmd.arg(format!("COUNTERS:{port}"))
                    .arg(tuning::HIST_SHIFT_FIELD)
                    .arg(self.tuning.shift);
                for (b, n) in hist.iter().enumerate() {
                    cmd.arg(format!("{}{b}_PKTS", tuning::HIST_FIELD_PREFIX))
                        .arg(n);
                }
                pipe.add_command(cmd).ignore();
            }
            pipe.query_async::<()>(conn.raw())
                .await
                .map_err(|e| End::Resync(format!("COUNTERS_DB write: {e}")))?;
        }
        if out.changes.is_empty() {
            return Ok(());
        }
        let n = self.engine.apply_owned(self.owned_desired()).await?;
        for ((port, q), ch) in &out.changes {
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
        let keys: Vec<tuning::QueueKey> = out.changes.iter().map(|(k, _)| k.clone()).collect();
        self.write_tuning_records(Some(&keys)).await?;
        Ok(())
    }

    async fn reload_config(&mut self) -> Result<(), End> {
        self.load_config().await?;
        Ok(())
    }

    async fn on_config_change(&mut self, appl_state: &Table) -> Result<(), End> {
        let ports_changed = self.load_config().await?;
        if ports_changed {
            // Port names resolve to other ids now: retranslate everything.
            let state = appl_state.dump().await?;
            let r = self.engine.full_sync(&state, self.owned_desired()).await?;
            tracing::info!(updates = r.updates, "port map changed: resynced");
        } else {
            let n = self.engine.apply_owned(self.owned_desired()).await?;
            if n > 0 {
                tracing::info!(updates = n, "CONFIG_DB changed: QoS tables updated");
            }
        }
        Ok(())
    }

    async fn handle_batch(
        &mut self,
        batch: &[KeyOpFieldValues],
        publisher: &mut ResponsePublisher,
        appl_live: &Table,
    ) -> Result<(), End> {
        let t0 = Instant::now();
        let results = self.engine.apply_batch(batch).await?;
        // A failed key's APPL_DB entry goes back to what is installed, so APPL_DB and
        // APPL_STATE_DB differ only while a key is in flight (what a restart replays).
        for r in results.iter().filter(|r| !r.status.is_ok()) {
            match self.engine.installed().get(&r.key) {
                Some(inst) => appl_live.replace(&r.key, &inst.fields).await?,
                None => appl_live.del(&r.key).await?,
            }
        }
        publisher.publish_batch(&results).await?;
        let failed = results.iter().filter(|r| !r.status.is_ok()).count();
        tracing::debug!(
            keys = batch.len(),
            failed,
            ms = t0.elapsed().as_millis() as u64,
            "batch applied"
        );
        for r in results.iter().filter(|r| !r.status.is_ok()).take(5) {
            tracing::warn!(key = %r.key, status = %r.status, error = %r.message, "entry refused");
        }
        Ok(())
    }

    async fn poll_watchdog(&mut self) -> Result<(), End> {
        let ports = self.engine.translator.ports().clone();
        let mut reads = Vec::new();
        let mut idx = Vec::new();
        for (port, prio) in self.wd.queues.keys() {
            if let Some(id) = ports.id(port) {
                let i = i64::from(id * crate::counters::QUEUES + u32::from(*prio));
                if let Ok(ce) = self
                    .info()
                    .counter_entry(c::pfc_rx_pause_counter::NAME, Some(i))
                {
                    reads.push(weft_p4rt::proto::p4::v1::Entity {
                        entity: Some(weft_p4rt::proto::p4::v1::entity::Entity::CounterEntry(ce)),
                    });
                    idx.push(((port.clone(), *prio), i));
                }
            }
        }
        let res = self
            .client
            .read(reads)
            .await
            .map_err(|e| End::Resync(format!("watchdog read: {e}")))?;
        let cells = crate::counters::cells(&res);
        let now = Instant::now();
        let mut changed = Vec::new();
        for (key, i) in idx {
            let count = cells
                .get(&(c::pfc_rx_pause_counter::ID, i))
                .map(|c| c.0)
                .unwrap_or(0);
            if let Some(q) = self.wd.queues.get_mut(&key)
                && let Some(ev) = q.observe(count, now)
            {
                changed.push((key, ev));
            }
        }
        if changed.is_empty() {
            return Ok(());
        }
        self.engine.apply_owned(self.owned_desired()).await?;
        let state = self.sonic.connect(SonicDbId::StateDb).await?;
        let state = Table::new(state, PFC_WD_STATE_TABLE)?;
        let counters = Table::new(self.sonic.connect(SonicDbId::CountersDb).await?, "COUNTERS")?;
        for ((port, prio), ev) in changed {
            let Some(q) = self.wd.queues.get(&(port.clone(), prio)) else {
                continue;
            };
            let status = if q.stormed { "stormed" } else { "operational" };
            match ev {
                WdEvent::Stormed(a) => {
                    self.counters.wd_storms += 1;
                    tracing::warn!(%port, priority = prio, action = a.as_str(), "PFC storm detected");
                }
                WdEvent::Restored => {
                    tracing::info!(%port, priority = prio, "PFC storm over, queue restored")
                }
            }
            let fields = [
                ("status", status.to_string()),
                ("action", q.config.action.as_str().to_string()),
                ("detected", q.detected.to_string()),
                ("restored", q.restored.to_string()),
                ("timestamp_ms", now_ms().to_string()),
            ];
            state.set(&format!("{port}|{prio}"), &fields).await?;
            counters
                .set(
                    &format!("{port}:{prio}"),
                    &[
                        ("PFC_WD_STATUS", status.to_string()),
                        ("PFC_WD_ACTION", q.config.action.as_str().to_string()),
                        (
                            "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED",
                            q.detected.to_string(),
                        ),
                        (
                            "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED",
                            q.restored.to_string(),
                        ),
                    ],
                )
                .await?;
        }
        Ok(())
    }

    fn nexthop_ids(&self) -> BTreeSet<u32> {
        let table = weft_sonic_db::sonic_table_name(
            t::nexthop_table::ALIAS,
            weft_sonic_db::P4rtTableKind::Fixed,
        );
        self.engine
            .installed()
            .keys()
            .filter(|k| k.starts_with(&format!("{table}:")))
            .filter_map(|k| P4rtKey::parse_table_key(k).ok())
            .filter_map(|k| {
                k.match_value(t::nexthop_table::fields::nexthop_id::NAME)
                    .and_then(|v| v.strip_prefix("0x"))
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
            })
            .collect()
    }

    async fn poll_counters(&mut self) -> Result<(), End> {
        let ports: PortMap = self.engine.translator.ports().clone();
        let nexthops = self.nexthop_ids();
        let reads = crate::counters::reads(self.info(), &ports, &nexthops);
        if reads.is_empty() {
            return Ok(());
        }
        let res = self
            .client
            .read(reads)
            .await
            .map_err(|e| End::Resync(format!("counter read: {e}")))?;
        let cells = crate::counters::cells(&res);
        let rows = crate::counters::rows(&ports, &nexthops, &cells);
        let mut conn = self.sonic.connect(SonicDbId::CountersDb).await?;
        let mut pipe = redis::pipe();
        for (key, fields) in &rows {
            if fields.is_empty() {
                continue;
            }
            let mut cmd = redis::cmd("HSET");
            cmd.arg(format!("COUNTERS:{key}"));
            for (f, v) in fields {
                cmd.arg(f).arg(v);
            }
            pipe.add_command(cmd).ignore();
        }
        for name in ports.by_name.keys() {
            pipe.cmd("HSET")
                .arg("COUNTERS_PORT_NAME_MAP")
                .arg(name)
                .arg(name)
                .ignore();
        }
        pipe.query_async::<()>(conn.raw())
            .await
            .map_err(|e| End::Resync(format!("COUNTERS_DB write: {e}")))?;
        self.counters.counter_polls += 1;
        Ok(())
    }

    fn status_fields(&self) -> Vec<(&'static str, String)> {
        let s = &self.engine.stats;
        vec![
            ("state", self.state.to_string()),
            ("pid", std::process::id().to_string()),
            ("device_id", self.cfg.device_id.to_string()),
            ("p4rt", self.cfg.p4rt.clone()),
            ("switch_updates", s.switch_updates.to_string()),
            ("batches", s.batches.to_string()),
            ("keys_ok", s.keys_ok.to_string()),
            ("keys_failed", s.keys_failed.to_string()),
            ("syncs", s.syncs.to_string()),
            ("last_sync_updates", s.last_sync_updates.to_string()),
            ("sync_failures", s.sync_failures.to_string()),
            ("installed_keys", self.engine.installed().len().to_string()),
            ("sessions", self.counters.sessions.to_string()),
            ("pipeline_pushes", self.counters.pipeline_pushes.to_string()),
            ("redis_restores", self.counters.redis_restores.to_string()),
            (
                "ports_down",
                self.port_stats
                    .ports_down
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "port_mask_writes",
                self.port_stats
                    .mask_writes
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "link_events",
                self.port_stats
                    .link_events
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            ("pfc_wd_storms", self.counters.wd_storms.to_string()),
            ("counter_polls", self.counters.counter_polls.to_string()),
            ("uptime_s", self.started.elapsed().as_secs().to_string()),
            ("updated_ms", now_ms().to_string()),
        ]
    }

    async fn write_status(&self) -> Result<(), SonicDbError> {
        let conn = self.sonic.connect(SonicDbId::StateDb).await?;
        Table::new(conn, STATUS_TABLE)?
            .replace(STATUS_KEY, &self.status_fields())
            .await
    }

    fn health_line(&self) {
        let f = self.status_fields();
        let line = f
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        tracing::info!(health = %line, "health");
    }
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
    let run = async {
        sonic.ensure_keyspace_notifications(true).await?;
        let mut pubsub = sonic.pubsub().await?;
        let prefix = format!("__keyspace@{}__:", SonicDbId::ConfigDb.number());
        pubsub
            .psubscribe(format!("{prefix}*"))
            .await
            .map_err(|e| SonicDbError::Redis {
                context: "PSUBSCRIBE CONFIG_DB keyspace".into(),
                source: e,
            })?;
        let mut stream = pubsub.on_message();
        while let Some(msg) = stream.next().await {
            let chan = msg.get_channel_name();
            let table = chan
                .strip_prefix(&prefix)
                .and_then(|k| k.split('|').next())
                .unwrap_or("");
            if CONFIG_TABLES.contains(&table) {
                let _ = tx.try_send(());
            }
        }
        Ok::<(), SonicDbError>(())
    };
    if let Err(e) = run.await {
        tracing::warn!(error = %e, "CONFIG_DB watcher stopped");
    }
}

/// Owns port_status_table and STATE_DB PORT_TABLE oper_status.
async fn port_task(
    client: Client,
    info: P4Info,
    sonic: SonicDb,
    interfaces: BTreeMap<String, String>,
    mut rx: mpsc::Receiver<PortCmd>,
    stats: Arc<PortStats>,
) {
    let by_if: BTreeMap<String, String> = interfaces
        .iter()
        .map(|(p, i)| (i.clone(), p.clone()))
        .collect();
    let (link_tx, mut link_rx) = mpsc::channel::<LinkEvent>(256);
    if !interfaces.is_empty() {
        let watched = interfaces.values().cloned().collect();
        if let Err(e) = ports::spawn_netlink_listener(watched, link_tx) {
            tracing::error!(error = %e, "netlink listener failed; link state from sysfs polls only");
        }
    }
    let mut oper: BTreeMap<String, bool> = interfaces
        .iter()
        .map(|(p, i)| (p.clone(), ports::sysfs_oper_up(i)))
        .collect();
    let mut ids: BTreeMap<String, u32> = BTreeMap::new();
    let mut admin_down: BTreeSet<String> = BTreeSet::new();
    let mut written: Option<BTreeSet<u32>> = None;
    // Only a session that has pushed the pipeline and synced may write: a write racing
    // SetForwardingPipelineConfig crashes simple_switch_grpc. The session's Reassert arms it.
    let mut armed = false;
    let mut published: BTreeMap<String, bool> = BTreeMap::new();
    let mut state_db: Option<Table> = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let mut force = false;
        let mut republish = false;
        tokio::select! {
            cmd = rx.recv() => match cmd {
                None => return,
                Some(PortCmd::Config { ids: i, admin_down: a }) => { ids = i; admin_down = a; }
                Some(PortCmd::Reassert) => { force = true; republish = true; armed = true; }
            },
            ev = link_rx.recv(), if !interfaces.is_empty() => {
                let Some(ev) = ev else { continue };
                stats.link_events.fetch_add(1, Ordering::Relaxed);
                if let Some(port) = by_if.get(&ev.ifname) {
                    tracing::info!(%port, ifname = %ev.ifname, up = ev.up, "link event");
                    oper.insert(port.clone(), ev.up);
                }
            }
            _ = tick.tick() => {
                // Catches events netlink dropped, and keeps STATE_DB filled after a Redis restart.
                for (p, i) in &interfaces {
                    oper.insert(p.clone(), ports::sysfs_oper_up(i));
                }
                republish = true;
            }
        }
        let is_up = |p: &str| !admin_down.contains(p) && oper.get(p).copied().unwrap_or(true);
        let down: BTreeSet<u32> = ids
            .iter()
            .filter(|(p, _)| !is_up(p))
            .map(|(_, id)| *id)
            .collect();
        if armed && (force || written.as_ref() != Some(&down)) {
            let t0 = Instant::now();
            let ok = match ports::port_status_entity(&info, &down) {
                Ok(e) => client
                    .write(&[Update {
                        r#type: update::Type::Modify as i32,
                        entity: Some(e),
                    }])
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match ok {
                Ok(()) => {
                    stats.mask_writes.fetch_add(1, Ordering::Relaxed);
                    stats.ports_down.store(down.len() as u64, Ordering::Relaxed);
                    tracing::info!(down = ?down, us = t0.elapsed().as_micros() as u64, "port down mask written");
                    written = Some(down);
                }
                // Not primary or switch away: the next session's Reassert writes it.
                Err(e) => {
                    armed = false;
                    tracing::debug!(error = %e, "port down mask not written");
                }
            }
        }
        let current: BTreeMap<String, bool> = ids.keys().map(|p| (p.clone(), is_up(p))).collect();
        if republish || current != published {
            if state_db.is_none() {
                state_db = match sonic.connect(SonicDbId::StateDb).await {
                    Ok(c) => Table::new(c, "PORT_TABLE").ok(),
                    Err(_) => None,
                };
            }
            if let Some(tbl) = &state_db {
                let mut ok = true;
                for (p, up) in &current {
                    if !republish && published.get(p) == Some(up) {
                        continue;
                    }
                    let status = if *up { "up" } else { "down" };
                    if tbl.set(p, &[("oper_status", status)]).await.is_err() {
                        ok = false;
                        break;
                    }
                }
                if ok {
                    published = current;
                } else {
                    state_db = None;
                }
            }
        }
    }
}

/// Re-exported for tests: replays what a result list says (used by the bench too).
pub fn failed(results: &[EntryResult]) -> usize {
    results.iter().filter(|r| !r.status.is_ok()).count()
}

/// For tests: fields as a map.
pub fn fields_map(f: &FieldValues) -> BTreeMap<String, String> {
    f.iter().cloned().collect()
}
