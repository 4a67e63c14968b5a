//! `weft run`: the reconciler's core as a loop. It converges every switch, then follows each
//! switch's STATE_DB `PORT_TABLE` and keeps the fabric converged while links flap.
//!
//! ```text
//!   per switch: STATE_DB PORT_TABLE watch task ──Input::Port──┐
//!   read / write tasks (crate::io) ──ReadBack / Written────────┤
//!   timer at Core::next_wake ──Tick─────────────────────────────┤
//!                                                               ▼
//!                            Core::step ──► Read / Write requests ──► io tasks
//!                                      └──► Reconverged, switch states ──► status file, log,
//!                                                                          events log
//! ```
//! Events that arrive together are handled together, so a burst costs one recomputation; a
//! suppressed link costs nothing however often it flaps.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;
use weft_p4rt::P4Info;
use weft_retry::RetryPolicy;
use weft_sonic_db::{
    KeyOpFieldValues, Op, SonicDb, SonicDbId, SubscriberOptions, SubscriberStateTable,
};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::PortState;
use weft_topology::{End, SwitchIdx, Topology};

use crate::apply::sleep_until;
use crate::core::{Core, CoreConfig, Input, LinkStatus, Output, Reconvergence, SwitchState};
use crate::damping::Nanos;
use crate::ha::{Election, HaOptions, HaView, Role};
use crate::io::{Clock, ExecOptions, Executor, Fence};
use crate::lock::{FabricLock, LockError, LockOptions};

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub resync: Duration,
    pub timeout: Duration,
    /// Where `weft status` finds the daemon's view.
    pub status_file: PathBuf,
    /// One JSON line per reconvergence.
    pub events_log: Option<PathBuf>,
    pub parallel: usize,
    /// The fabric's lock, held while running (`None`: run unlocked, as the golden tests do).
    pub lock: Option<LockOptions>,
    /// Elect the writer among replicas on etcd (`--ha`): until elected, this replica follows
    /// STATE_DB and keeps its compiled state, but neither locks nor reads nor writes a switch.
    pub ha: Option<HaOptions>,
}

/// What `weft status` reads while `weft run` runs.
#[derive(Debug, Clone, Serialize, serde::Deserialize, Default)]
pub struct DaemonStatus {
    pub fabric: String,
    pub pid: u32,
    /// The host `weft run` runs on (its pid means something there only).
    #[serde(default)]
    pub host: String,
    /// Unix time `weft run` started, milliseconds.
    #[serde(default)]
    pub started_ms: u64,
    /// Switches whose lock `weft run` holds, of those it writes.
    #[serde(default)]
    pub locked: Option<(usize, usize)>,
    /// Links in the fabric.
    #[serde(default)]
    pub links_total: usize,
    /// Links not in use, suppressed, or that have flapped (the others are up and in use).
    pub links: Vec<LinkStatus>,
    /// Switches not converged, with their state as the reconciler sees it.
    #[serde(default)]
    pub switches: Vec<(String, serde_json::Value)>,
    #[serde(default)]
    pub switches_converged: usize,
    pub reconvergences: u64,
    pub writes: u64,
    pub last: Option<Reconvergence>,
    /// The election (`--ha`): this replica's role, the leader, its term, the replicas.
    #[serde(default)]
    pub ha: Option<HaView>,
}

/// What `weft run` reports as it goes (its metrics); every method defaults to nothing.
pub trait RunObserver: Send + Sync {
    /// A STATE_DB PORT_TABLE change of `switch`.
    fn port_event(&self, _switch: &str) {}
    /// Entries (or CONFIG_DB rows) sent to `switch` in one batch.
    fn writing(&self, _switch: &str, _entries: usize) {}
    /// The answers to one batch: how many were not successes (a batch not written at all: 1).
    fn answered(&self, _switch: &str, _failed: usize) {}
    fn switch_state(&self, _switch: &str, _state: &SwitchState) {}
    fn reconverged(&self, _rec: &Reconvergence) {}
    /// Every link, each time the status file is written.
    fn links(&self, _links: &[LinkStatus]) {}
}

struct NoObserver;
impl RunObserver for NoObserver {}

fn batch_len(b: &crate::core::Batch) -> usize {
    match b {
        crate::core::Batch::Config { set, del } => set.len() + del.len(),
        crate::core::Batch::Entries { ops, .. } => ops.len(),
    }
}

fn observe_input(obs: &dyn RunObserver, t: &Topology, input: &Input) {
    match input {
        Input::Port { port, .. } => obs.port_event(&t.switches[port.switch].name),
        Input::Written { switch, result, .. } => {
            let failed = match result {
                Ok(answers) => answers
                    .iter()
                    .filter(|a| a.status != crate::core::SUCCESS)
                    .count(),
                Err(_) => 1,
            };
            obs.answered(&t.switches[*switch].name, failed);
        }
        _ => {}
    }
}

/// Why `weft run` stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("every STATE_DB watcher stopped")]
    WatchersGone,
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("leadership of term {term} lost ({why}); stopped writing")]
    LostLeadership { term: u64, why: String },
    #[error("a switch refused a write of term {term}: a newer leader took over; stopped writing")]
    Fenced { term: u64 },
}

/// How a lost STATE_DB watch is reconnected.
const WATCH_RETRY: RetryPolicy =
    RetryPolicy::doubling(Duration::from_millis(100), Duration::from_secs(5));
/// How an elected leader waits for the fabric's lock held by another command.
const LOCK_RETRY: RetryPolicy =
    RetryPolicy::doubling(Duration::from_millis(200), Duration::from_secs(2));

/// One switch's STATE_DB PORT_TABLE, followed for ever: its ports' changes go to the core as
/// [`Input::Port`]s of the topology's ports.
struct PortWatch {
    switch: SwitchIdx,
    name: String,
    db: String,
    /// The switch's port indices by name.
    ports: HashMap<String, usize>,
    clock: Clock,
    tx: mpsc::UnboundedSender<(Nanos, Input)>,
}

impl PortWatch {
    fn new(
        t: &Topology,
        switch: SwitchIdx,
        clock: Clock,
        tx: mpsc::UnboundedSender<(Nanos, Input)>,
    ) -> Self {
        let s = &t.switches[switch];
        PortWatch {
            switch,
            name: s.name.clone(),
            db: s.db.clone(),
            ports: s
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| (p.name.clone(), i))
                .collect(),
            clock,
            tx,
        }
    }

    async fn run(self) {
        let mut backoff = WATCH_RETRY.backoff();
        loop {
            let r: Result<(), weft_sonic_db::SonicDbError> = async {
                let sonic = SonicDb::from_endpoint(&self.db)?;
                let mut sub = SubscriberStateTable::new(
                    &sonic,
                    SonicDbId::StateDb,
                    PortState::TABLE,
                    SubscriberOptions {
                        allow_config_set: true,
                    },
                )
                .await?;
                // The dump after subscribing: nothing between the two is lost.
                for k in sub.initial_dump().await? {
                    self.send(&k);
                }
                backoff = WATCH_RETRY.backoff();
                loop {
                    let k = sub.next().await?;
                    self.send(&k);
                }
            }
            .await;
            if self.tx.is_closed() {
                return;
            }
            if let Err(e) = r {
                tracing::warn!(switch = %self.name, error = %crate::io::describe_db_error(&self.db, &e), "STATE_DB watch lost; reconnecting");
            }
            tokio::time::sleep(backoff.next().unwrap_or(WATCH_RETRY.max)).await;
        }
    }

    fn send(&self, k: &KeyOpFieldValues) {
        let Some(&port) = self.ports.get(&k.key) else {
            // Not a port of the intent: no link of the fabric goes through it.
            tracing::debug!(switch = %self.name, port = %k.key, "STATE_DB PORT_TABLE row of a port not in the intent");
            return;
        };
        let up = match k.op {
            // A port whose row is gone is not known to be down.
            Op::Del => true,
            Op::Set => match PortState::from_fields(&k.key, &k.fields) {
                Ok(p) => p.is_up(),
                Err(e) => {
                    tracing::warn!(error = %e, "STATE_DB PORT_TABLE row ignored");
                    return;
                }
            },
        };
        let seen = self.clock.now();
        let port = End {
            switch: self.switch,
            port,
        };
        let _ = self.tx.send((seen, Input::Port { port, up, seen }));
    }
}

/// Takes the fabric's lock. A leader elected on etcd takes it over from a deposed replica of
/// its election (`weft run --ha …`): the election decided, and fencing keeps the deposed one's
/// writes out. Anyone else's lock (`weft apply`) is waited for, as without `--ha`.
async fn take_lock(t: &Topology, l: &LockOptions, ha: bool) -> Result<Arc<FabricLock>, LockError> {
    let mut wait = LOCK_RETRY.backoff();
    loop {
        match FabricLock::acquire(t, None, l.clone()).await {
            Ok(lock) => return Ok(lock),
            Err(LockError::Held { holder, .. })
                if ha && holder.command.starts_with("weft run --ha") =>
            {
                tracing::info!(holder = %holder.holder(), "taking the lock over from a deposed leader");
                let mut l = l.clone();
                l.steal = true;
                return FabricLock::acquire(t, None, l).await;
            }
            Err(e @ LockError::Held { .. }) if ha => {
                tracing::warn!(error = %e, "elected, waiting for the fabric's lock");
                tokio::time::sleep(wait.next().unwrap_or(LOCK_RETRY.max)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Claims `term` on every switch's APPL_DB and CONFIG_DB (a new leader's first act): from then
/// on a deposed leader's batches are refused there even before this one writes anything.
/// Switches that do not answer are claimed by the first write that reaches them. `Err`: the
/// newer term a switch holds.
async fn claim_everywhere(t: &Topology, term: u64) -> Result<(), u64> {
    let mut tasks = tokio::task::JoinSet::new();
    for s in &t.switches {
        let db = s.db.clone();
        let name = s.name.clone();
        tasks.spawn(async move {
            let run = async {
                let sonic = SonicDb::from_endpoint(&db)?;
                let mut held = 0;
                for id in [SonicDbId::ApplDb, SonicDbId::ConfigDb] {
                    let conn = sonic.connect(id).await?;
                    held = held.max(weft_sonic_db::claim_term(&conn, term).await?);
                }
                Ok::<u64, weft_sonic_db::SonicDbError>(held)
            };
            (
                name,
                tokio::time::timeout(crate::io::CONNECT_TIMEOUT, run).await,
            )
        });
    }
    let mut newer = None;
    while let Some(j) = tasks.join_next().await {
        let Ok((name, r)) = j else { continue };
        match r {
            Ok(Ok(prev)) => tracing::debug!(switch = %name, term, prev, "term claimed"),
            Ok(Err(weft_sonic_db::SonicDbError::Fenced { held, .. })) => {
                tracing::error!(switch = %name, term, held, "a newer term holds this switch");
                newer = Some(held);
            }
            Ok(Err(e)) => {
                tracing::warn!(switch = %name, error = %e, "term not claimed: switch unreachable")
            }
            Err(_) => tracing::warn!(switch = %name, "term not claimed: switch did not answer"),
        }
    }
    newer.map_or(Ok(()), Err)
}

/// Runs until interrupted.
pub async fn run(
    t: &Topology,
    info: Arc<P4Info>,
    opts: RunOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    run_observed(t, info, opts, &NoObserver, shutdown).await
}

/// [`run`], telling `obs` what happens.
pub async fn run_observed(
    t: &Topology,
    info: Arc<P4Info>,
    opts: RunOptions,
    obs: &dyn RunObserver,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    let election = opts.ha.clone().map(|h| Election::start(&t.name, h));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut sh = Shell::start(t, info, &opts, obs, election.is_some(), tx).await?;
    let mut shutdown = std::pin::pin!(shutdown);
    // A follower feeds the core port events and ticks only: without Start it neither reads nor
    // writes a switch, but its dampers and compiled routes follow the fabric.
    let mut outs = if election.is_none() {
        sh.core.step(sh.clock.now(), Input::Start)
    } else {
        Vec::new()
    };
    let (mut role_rx, mut view_rx) = match &election {
        Some(e) => (Some(e.role.clone()), Some(e.view.clone())),
        None => (None, None),
    };
    if election.is_none() {
        tracing::info!(fabric = %t.name, switches = t.switches.len(), resync = ?opts.resync, "weft run: reading every switch");
    } else {
        tracing::info!(fabric = %t.name, switches = t.switches.len(), "weft run --ha: campaigning; following STATE_DB until elected");
    }
    loop {
        sh.carry_out(&outs);
        // Take everything that is already there: a burst of events is one step each, but one
        // recomputation writes them all (the core batches by switch).
        let wake = sh.core.next_wake().map(|w| sh.clock.instant(w));
        let fence = sh.fence.clone();
        let refused = async {
            match &fence {
                Some(f) => f.refused.notified().await,
                None => std::future::pending().await,
            }
        };
        outs = tokio::select! {
            r = rx.recv() => match r {
                Some((_, input)) => sh.inputs(input, &mut rx),
                None => return Err(RunError::WatchersGone),
            },
            _ = sleep_until(wake) => sh.core.step(sh.clock.now(), Input::Tick),
            _ = sleep_until(sh.status_at()) => {
                sh.write_status();
                Vec::new()
            }
            role = changed(&mut role_rx) => match role {
                Role::Leader { term } if sh.term == 0 => sh.lead(term).await?,
                Role::Lost { term, why } => {
                    sh.unfence();
                    tracing::error!(term, %why, "stopping: leadership lost");
                    sh.stop().await;
                    return Err(RunError::LostLeadership { term, why });
                }
                _ => Vec::new(),
            },
            v = changed(&mut view_rx) => {
                sh.status.ha = Some(v);
                sh.first = true;
                Vec::new()
            }
            () = refused => {
                sh.unfence();
                tracing::error!(term = sh.term, "stopping: a switch holds a newer leader's term");
                sh.stop().await;
                return Err(RunError::Fenced { term: sh.term });
            }
            e = lost(&mut sh.keeper) => {
                tracing::error!(error = %e, "stopping: the lock was taken");
                sh.stop().await;
                return Err(e.into());
            }
            _ = &mut shutdown => {
                tracing::info!("stopping");
                sh.unfence();
                sh.stop().await;
                return Ok(());
            }
        };
    }
}

/// The next value of a watched election channel; never, without one (or once it closed).
async fn changed<T: Clone>(rx: &mut Option<tokio::sync::watch::Receiver<T>>) -> T {
    match rx {
        Some(r) => {
            if r.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            r.borrow_and_update().clone()
        }
        None => std::future::pending().await,
    }
}

/// Why the lock keeper stopped; never, without one.
async fn lost(keeper: &mut Option<tokio::task::JoinHandle<LockError>>) -> LockError {
    match keeper {
        Some(k) => match k.await {
            Ok(e) => e,
            Err(_) => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// The status file (and the per-link metrics) at most this often while the fabric changes.
const STATUS_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// `weft run`'s shell around the core between two steps: the requests it carries out, what it
/// reports, the lock and the term it writes under.
struct Shell<'a> {
    t: &'a Topology,
    opts: &'a RunOptions,
    obs: &'a dyn RunObserver,
    core: Core<'a>,
    exec: Executor,
    clock: Clock,
    status: DaemonStatus,
    /// The term every write carries (`--ha`).
    fence: Option<Arc<Fence>>,
    lock: Option<Arc<FabricLock>>,
    keeper: Option<tokio::task::JoinHandle<LockError>>,
    /// The term this replica leads (0: none yet).
    term: u64,
    /// Write the status file even without a change.
    first: bool,
    /// The status file is behind the core (written at most every [`STATUS_EVERY`]).
    status_due: bool,
    status_written: Option<std::time::Instant>,
    /// Whether the status file last written showed the fabric converged.
    status_converged: bool,
    announced: bool,
    ha: bool,
    /// Switches whose last state was a trouble (for "converged again").
    troubled: BTreeSet<String>,
}

impl<'a> Shell<'a> {
    /// Takes the lock (without `--ha`: with it, once elected), starts the executor and a
    /// STATE_DB watch per switch.
    async fn start(
        t: &'a Topology,
        info: Arc<P4Info>,
        opts: &'a RunOptions,
        obs: &'a dyn RunObserver,
        ha: bool,
        tx: mpsc::UnboundedSender<(Nanos, Input)>,
    ) -> Result<Shell<'a>, RunError> {
        let fence = ha.then(|| Arc::new(Fence::default()));
        let mut sh_lock = None;
        let mut keeper = None;
        if !ha && let Some(l) = &opts.lock {
            let l = take_lock(t, l, false).await?;
            let (held, all) = l.counts();
            tracing::info!(fabric = %t.name, locked = held, switches = all, "lock taken");
            keeper = Some(tokio::spawn(l.clone().keep()));
            sh_lock = Some(l);
        }
        let clock = Clock::start();
        let exec = Executor::new(
            t,
            ExecOptions {
                answer_timeout: Some(opts.timeout),
                parallel: opts.parallel,
                keep_connections: true,
                fence: fence.clone(),
            },
            clock,
            tx.clone(),
        );
        for si in 0..t.switches.len() {
            tokio::spawn(PortWatch::new(t, si, clock, tx.clone()).run());
        }
        let core = Core::new(t, info, CoreConfig::run(opts.resync.as_nanos() as u64));
        let status = DaemonStatus {
            fabric: t.name.clone(),
            pid: std::process::id(),
            host: crate::lock::hostname(),
            started_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            ..Default::default()
        };
        Ok(Shell {
            t,
            opts,
            obs,
            core,
            exec,
            clock,
            status,
            fence,
            lock: sh_lock,
            keeper,
            term: 0,
            first: true,
            status_due: false,
            status_written: None,
            status_converged: false,
            announced: false,
            ha,
            troubled: BTreeSet::new(),
        })
    }

    /// Carries out the core's requests and reports the rest (log, observer, status file).
    fn carry_out(&mut self, outs: &[Output]) {
        let t = self.t;
        let mut dirty = false;
        let mut reconverged = false;
        for o in outs {
            self.exec.dispatch(o);
            match o {
                Output::Write { switch, batch, .. } => {
                    self.obs
                        .writing(&t.switches[*switch].name, batch_len(batch));
                }
                Output::Switch { switch, state } => {
                    self.obs.switch_state(&t.switches[*switch].name, state);
                    dirty = true;
                    log_state(&t.switches[*switch].name, state, &mut self.troubled);
                }
                Output::Reconverged(rec) => {
                    dirty = true;
                    reconverged = true;
                    tracing::info!(
                        changes = ?rec.changes,
                        switches = rec.switches_changed,
                        entries = rec.entries_written,
                        failed = rec.failed,
                        compute_us = rec.compute_us,
                        total_ms = rec.total_ms,
                        "reconverged"
                    );
                    self.obs.reconverged(rec);
                    append_event(self.opts, rec);
                    self.status.last = Some(rec.clone());
                }
                _ => {}
            }
        }
        if dirty || !outs.is_empty() || self.first {
            self.first = false;
            self.status_due = true;
        }
        let converged = self.core.converged();
        // What an operator acts on is in the file at once, before it is logged: the fabric
        // converging or leaving it, and each reconvergence. Only the flood of per-batch states
        // in between waits for the next write.
        let milestone = converged != self.status_converged || reconverged;
        if self.status_due
            && (milestone
                || self
                    .status_at()
                    .is_some_and(|at| at <= std::time::Instant::now()))
        {
            self.write_status();
        }
        if !self.announced && (!self.ha || self.term > 0) && converged {
            self.announced = true;
            tracing::info!(fabric = %t.name, switches = t.switches.len(), term = self.term, "converged; following port state");
        }
    }

    /// When the status file is next due: never if it is current. Written at most every
    /// [`STATUS_EVERY`]: each write is the whole fabric (every link's state for the metrics),
    /// and a fabric converging from empty answers thousands of batches a second.
    fn status_at(&self) -> Option<std::time::Instant> {
        self.status_due.then(|| {
            self.status_written
                .map_or_else(std::time::Instant::now, |w| w + STATUS_EVERY)
        })
    }

    fn write_status(&mut self) {
        self.status_due = false;
        self.status_converged = self.core.converged();
        self.status_written = Some(std::time::Instant::now());
        self.status.locked = self.lock.as_ref().map(|l| l.counts());
        write_status(
            self.opts,
            &mut self.core,
            &mut self.status,
            self.clock.now(),
            self.obs,
        );
    }

    /// Steps the core with `first` and every input already waiting.
    fn inputs(
        &mut self,
        first: Input,
        rx: &mut mpsc::UnboundedReceiver<(Nanos, Input)>,
    ) -> Vec<Output> {
        observe_input(self.obs, self.t, &first);
        let mut o = self.core.step(self.clock.now(), first);
        while let Ok((_, input)) = rx.try_recv() {
            observe_input(self.obs, self.t, &input);
            o.extend(self.core.step(self.clock.now(), input));
        }
        o
    }

    /// Elected leader of `term`: claims it on every switch, takes the lock, reads every switch.
    async fn lead(&mut self, term: u64) -> Result<Vec<Output>, RunError> {
        let t = self.t;
        self.term = term;
        let elected = std::time::Instant::now();
        tracing::info!(term, "leader: claiming the term on every switch");
        if let Err(held) = claim_everywhere(t, term).await {
            self.unfence();
            self.stop().await;
            return Err(RunError::Fenced {
                term: held.min(term),
            });
        }
        if let Some(f) = &self.fence {
            f.set(term);
        }
        if let Some(l) = &self.opts.lock {
            let l = take_lock(t, l, true).await?;
            let (held, all) = l.counts();
            tracing::info!(fabric = %t.name, locked = held, switches = all, "lock taken");
            self.keeper = Some(tokio::spawn(l.clone().keep()));
            self.lock = Some(l);
        }
        tracing::info!(
            term,
            claimed_ms = elected.elapsed().as_millis() as u64,
            "leader: reading every switch"
        );
        Ok(self.core.step(self.clock.now(), Input::Start))
    }

    /// No write may go out from now on.
    fn unfence(&self) {
        if let Some(f) = &self.fence {
            f.set(0);
        }
    }

    /// Removes the status file and releases the lock (only rows still carrying our token go).
    async fn stop(&self) {
        let _ = std::fs::remove_file(&self.opts.status_file);
        if let Some(l) = &self.lock {
            l.release().await;
        }
    }
}

fn log_state(switch: &str, state: &SwitchState, troubled: &mut BTreeSet<String>) {
    match state {
        SwitchState::Unreachable { .. }
        | SwitchState::NotReady { .. }
        | SwitchState::Refused { .. }
        | SwitchState::Failed { .. } => {
            troubled.insert(switch.to_string());
        }
        SwitchState::Converged if troubled.remove(switch) => {
            tracing::info!(%switch, "switch converged again");
        }
        _ => {}
    }
    match state {
        SwitchState::Unreachable { reason, .. } => {
            tracing::warn!(%switch, %reason, "switch unreachable; retrying")
        }
        SwitchState::NotReady { reason, .. } => {
            tracing::warn!(%switch, %reason, "switch not ready; retrying")
        }
        SwitchState::Refused { entries, .. } => {
            tracing::warn!(%switch, entries, "entries refused; re-planning later")
        }
        SwitchState::Failed { reason } => tracing::error!(%switch, %reason, "switch failed"),
        SwitchState::Converged => tracing::debug!(%switch, "converged"),
        SwitchState::Skipped => {}
        SwitchState::Reading | SwitchState::Writing { .. } => {}
    }
}

fn append_event(opts: &RunOptions, rec: &Reconvergence) {
    let Some(p) = &opts.events_log else { return };
    use std::io::Write as _;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        && let Ok(line) = serde_json::to_string(rec)
    {
        let _ = writeln!(f, "{line}");
    }
}

fn write_status(
    opts: &RunOptions,
    core: &mut Core,
    status: &mut DaemonStatus,
    now: Nanos,
    obs: &dyn RunObserver,
) {
    let links = core.link_status(now);
    obs.links(&links);
    status.links_total = links.len();
    status.links = links
        .into_iter()
        .filter(|l| !l.in_use || l.suppressed || l.flaps > 0 || !l.oper_up)
        .collect();
    status.reconvergences = core.stats.reconvergences;
    status.writes = core.stats.writes;
    let t = core.topology();
    status.switches_converged = core
        .states()
        .filter(|(_, s)| **s == SwitchState::Converged)
        .count();
    status.switches = core
        .states()
        .filter(|(_, s)| **s != SwitchState::Converged)
        .map(|(i, s)| {
            (
                t.switches[i].name.clone(),
                serde_json::to_value(s).unwrap_or_default(),
            )
        })
        .collect();
    if let Some(parent) = opts.status_file.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let tmp = opts.status_file.with_extension("tmp");
    if let Ok(text) = serde_json::to_string_pretty(status)
        && std::fs::write(&tmp, text).is_ok()
    {
        let _ = std::fs::rename(&tmp, &opts.status_file);
    }
}

/// Default place of the daemon's status file.
pub fn default_status_file(fabric: &str) -> PathBuf {
    PathBuf::from("/run/weft").join(format!("{fabric}.controller.json"))
}
