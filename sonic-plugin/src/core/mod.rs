//! The plugin's core: every decision the daemon takes, as one state machine with no I/O and no
//! clock. Each input carries its time ([`Now`]); each output is a request for the daemon
//! ([`crate::daemon`], the edge) to carry out, whose result comes back as an input. The same
//! inputs give the same outputs, which is what the golden steps (`tests/steps/NN-*`) replay.
//!
//! ```text
//!        edge (daemon.rs: tokio tasks, Redis, P4Runtime)            core (this module)
//!  session: primary, Redis, pipeline ─SessionUp/SessionEnded──►  session phases, status
//!  APPL_DB dumps, TERM ──────────────SessionRead─────────────►  replay list, held term
//!  consumer task (APPL_DB pops) ─────Batch { ops, term }─────►  fence, queue, prepare ──► Write
//!  keyspace watcher ─────────────────ConfigChanged───────────►  debounce, drain ─────────► ReadConfig
//!  CONFIG_DB read ───────────────────ConfigRead──────────────►  intent, features ────────► Ports, Publish
//!  P4Runtime Write (one at a time) ──Written { ticket }──────►  next stage | commit ─────► Answer
//!  P4Runtime Read ───────────────────Read { ticket }─────────►  sync | watchdog | tuning | audit
//!  timers ───────────────────────────Timer(Watchdog|Tuning|Status), Tick (next_wake)
//!  responder task ◄── Answer (APPL_DB reverts, APPL_STATE_DB, per-key responses)
//!  port thread ◄── Ports(PortCmd);  STATE_DB/COUNTERS_DB ◄── Publish;  status row ◄── Status
//! ```
//!
//! ## Session
//!
//! ```text
//!   Down ─WaitingForSwitch─► … ─SessionUp─► Reading ─SessionRead─► Configuring ─ConfigRead─►
//!   Syncing (read the switch, write the diff to APPL_STATE_DB ∪ owned) ─► Replaying (keys popped
//!   but never answered) ─► Running ──(write/read RPC lost)──► Resync ─SessionEnded─► Down
//! ```
//!
//! ## The batch pipeline (what makes the plugin fast), and the orders it keeps
//!
//! * One Write in flight, ever: the core emits [`Output::Write`] only when the last one was
//!   answered. A batch is written stage by stage ([`crate::exec::Run`]); the next batch reaches
//!   the switch only after every stage of the last one was answered and committed, so the
//!   controller's make-before-break staging holds across batches as within one.
//! * The next batch is prepared (translated, checked, planned) while the current one is on the
//!   switch, against what the batch in flight will change ([`Pending`]); it is kept only when
//!   that cannot change its outcome, and prepared again after the commit otherwise.
//! * Answers are decided at commit, from what the switch did; a failed key's earlier stages
//!   are rolled back before anything else is written. The responder (a task of the edge)
//!   writes them in order while the next batch goes to the switch.
//! * Between batches, in this order: a rollback, the plugin-owned objects (QoS, watchdog,
//!   tuning) when they changed, a full sync when one is due, a CONFIG_DB read when one is due.
//!
//! ## A port the plugin does not know yet: CONFIG_DB is read again before the answer
//!
//! An entry naming a port (`param/egress_port`, a match on a port, a member's `watch_port`) that
//! has no id in the CONFIG_DB the plugin last read is not refused at once. The controller writes
//! a switch's CONFIG_DB (its `PORT|EthernetN` rows) before the P4RT entries that name the ports,
//! but the plugin learns of CONFIG_DB changes from keyspace notifications on another connection,
//! which may arrive after the consumer popped the entries. So a batch with such an entry is held
//! (nothing of it is written, the batches after it wait) and CONFIG_DB is read again at once;
//! the batch is then prepared with what that read found, and an entry whose port is still
//! unknown is refused (INVALID_PARAM, "unknown port"). The read needs no timeout and no retry:
//! Redis applies commands in order, so a read issued after the pop of an entry sees every row
//! written before the entry was. One read covers every batch popped before it was issued; a
//! batch popped later with an unknown port causes another. Why here and not in the controller:
//! any writer of P4RT_TABLE (SONiC's own P4RT application too) gets the same answer, without a
//! readiness protocol between them.
//!
//! ## Fencing
//!
//! A batch may carry its writer's term (a transport that delivers batches itself, like ZMQ,
//! does; through Redis the producer's script fences, and batches arrive without one). A batch
//! from a term older than the one the plugin holds (APPL_DB `WEFT_LEADER_TERM` at session start,
//! raised by newer batches) is refused whole: every key FAILED_PRECONDITION, nothing written,
//! nothing of it in APPL_DB or APPL_STATE_DB.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_p4rt::P4Info;
use weft_p4rt::proto::p4::v1::{Entity, Update};
use weft_sonic_db::{Digest, EntryResult, FieldValues, KeyOpFieldValues};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::{EcnTuningState, PluginState};

use crate::clock::Now;
use crate::config::QueueModel;
use crate::engine::{Engine, EngineStats, Pending, Prepared, Run, SyncPlan, same_fields};
use crate::features::{DepthHistograms, Features, Publish};
use crate::intent::{QueueKey, SwitchIntent};
use crate::objects::{ObjKey, Objects};
use crate::pause::{PauseConfig, Pauses, PfcFrame, QueueCmd};
use crate::ports::PortCmd;
use crate::translate::Translator;
use crate::watchdog::WdEvent;

mod observe;
mod pfc;
mod writes;

/// Which request an input answers.
pub type Ticket = u64;

/// P4RT_TABLE rows by key.
pub type Rows = BTreeMap<String, FieldValues>;

/// A CONFIG_DB row: table, key, fields.
pub type ConfigRow = (&'static str, String, FieldValues);

/// How long a CONFIG_DB change waits for the rest of the rows of one apply (they arrive
/// together), unless a batch is waiting for it.
pub const CONFIG_SETTLE: Duration = Duration::from_millis(20);

/// How often the plugin reads the switch back and compares it with what it installed, at
/// most (see [`audit_due`]).
const AUDIT_INTERVAL: Duration = Duration::from_secs(2);
/// An audit is at most this share of the plugin's time: the next one waits this many times
/// the last one's duration.
const AUDIT_COST_FACTOR: u32 = 20;
/// While batches flow, the audit waits, but never longer than this.
const AUDIT_MAX_DEFER: Duration = Duration::from_secs(60);

/// What the core is built with (from the plugin's configuration).
#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub queue: QueueModel,
    /// Port (or `*`) → service rate in packets/s, for the tuner.
    pub tuning_line_rate: BTreeMap<String, f64>,
    pub device_id: u64,
    /// Keys per replayed batch.
    pub batch_size: usize,
    /// PFC pausing of the switch's queues by the plugin (BMv2), with the ports' emulated
    /// speeds; `None`: the switch pauses by itself (or not at all).
    pub pfc: Option<PauseConfig>,
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The switch or Redis was lost (or the core said so): the next session resyncs.
    Resync(String),
    Shutdown,
}

/// A periodic timer of the edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    Watchdog,
    Tuning,
    Status,
}

#[derive(Debug)]
pub enum Input {
    /// A session begins: waiting to be primary on the switch.
    WaitingForSwitch,
    /// Primary; waiting for Redis.
    WaitingForRedis,
    /// Primary on the switch, Redis reachable (its run id), the pipeline checked: `pushed`
    /// when the switch had another or none (it holds nothing now), with its cookie.
    SessionUp {
        redis_run_id: String,
        pushed: bool,
        cookie: u64,
    },
    /// Answer to [`Output::ReadSession`]: APPL_DB's live P4RT_TABLE, APPL_STATE_DB's, and the
    /// term of the writer that last wrote APPL_DB (`None`: never fenced).
    SessionRead {
        live: Rows,
        state: Rows,
        term: Option<u64>,
    },
    /// CONFIG_DB's watched tables changed (a keyspace notification).
    ConfigChanged,
    /// Answer to [`Output::ReadConfig`]: the rows, and STATE_DB WEFT_ECN_TUNING when asked.
    ConfigRead {
        rows: Vec<ConfigRow>,
        tuning: Option<Rows>,
    },
    /// Answer to [`Output::ReadApplState`].
    ApplState(Rows),
    /// A batch of P4RT_TABLE operations, with its writer's term when the transport has one.
    Batch {
        ops: Vec<KeyOpFieldValues>,
        term: Option<u64>,
    },
    /// Answer to [`Output::Write`]: per-update errors are answers; any other error means the
    /// switch is gone.
    Written {
        ticket: Ticket,
        result: Result<(), weft_p4rt::Error>,
    },
    /// Answer to [`Output::Read`]: every request's entities, or the first error.
    Read {
        ticket: Ticket,
        result: Result<Vec<Entity>, weft_p4rt::Error>,
    },
    Timer(Timer),
    /// [`Core::next_wake`] passed.
    Tick,
    /// A PFC frame the switch received on port `port` (its packet-in).
    PfcFrame {
        port: u32,
        frame: PfcFrame,
    },
    /// The session is over: the edge lost the switch or Redis, or was told to stop.
    SessionEnded(Ended),
}

/// A batch's answers, as decided at its commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// Which batch: the session's count of [`Input::Batch`]es when it came ([`Core::batches_in`]
    /// right after), 0 for keys a restart replays. Answers come in batch order, except a fenced
    /// batch's, which come at once.
    pub batch: u64,
    pub results: Vec<EntryResult>,
    /// APPL_DB rows of failed keys, back to what is installed...
    pub revert: Vec<(String, FieldValues)>,
    /// ...or gone when nothing is.
    pub remove: Vec<String>,
    /// From the batch's first write (or its start, when it wrote nothing) to its answers.
    pub took: Duration,
}

/// What a poll found, for the metrics.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// Every watched queue: (port, priority, stormed, stormed by this poll).
    Watchdog(Vec<(String, u8, bool, bool)>),
    /// A tuning tick: the depth histograms (with their bucket shift) and the tuners' moves.
    Tuning {
        histograms: DepthHistograms,
        shift: u8,
        moves: Vec<(String, u8, &'static str)>,
    },
}

#[derive(Debug)]
pub enum Output {
    /// Write these updates to the switch in one Write; answer with [`Input::Written`]. Never
    /// while another is unanswered.
    Write {
        ticket: Ticket,
        updates: Arc<Vec<Update>>,
    },
    /// Read from the switch, one Read per inner list; answer with [`Input::Read`].
    Read {
        ticket: Ticket,
        reads: Vec<Vec<Entity>>,
    },
    /// Read APPL_DB's and APPL_STATE_DB's P4RT_TABLE and APPL_DB's term; answer with
    /// [`Input::SessionRead`].
    ReadSession,
    /// Read CONFIG_DB's watched tables (and STATE_DB WEFT_ECN_TUNING with `tuning_state`);
    /// answer with [`Input::ConfigRead`].
    ReadConfig {
        tuning_state: bool,
    },
    /// Read APPL_STATE_DB P4RT_TABLE (every answer given so far written first); answer with
    /// [`Input::ApplState`].
    ReadApplState,
    /// Answer a batch, in order after the ones before.
    Answer(Answered),
    /// Put these rows back into APPL_DB and APPL_STATE_DB P4RT_TABLE (Redis came back empty).
    Restore(Vec<(String, FieldValues)>),
    /// Write STATE_DB / COUNTERS_DB rows.
    Publish(Publish),
    /// Tell the port thread.
    Ports(PortCmd),
    /// Hold, release or rate the switch's queues (BMv2's Thrift API), in order.
    Queue(QueueCmd),
    /// Write the status row now ([`Core::status`]).
    Status,
    Observed(Observed),
    /// The switch cannot be used: end the session (answer with [`Input::SessionEnded`]).
    Resync(String),
}

/// The core's part of the status row.
#[derive(Debug, Clone)]
pub struct CoreStatus {
    pub state: PluginState,
    /// The pipeline this session found or pushed (0: none yet).
    pub cookie: u64,
    pub stats: EngineStats,
    pub installed_keys: u64,
    pub sessions: u64,
    pub pipeline_pushes: u64,
    pub redis_restores: u64,
    pub wd_storms: u64,
    /// The digest of the watched CONFIG_DB tables as last read.
    pub config_digest: Option<Digest>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Phase {
    #[default]
    Down,
    Reading,
    Configuring,
    Syncing,
    Replaying,
    Running,
    /// The core asked for a resync: nothing more until the session ends.
    Ending,
}

/// A batch waiting for the switch.
struct Queued {
    /// The order batches came in (replayed ones: 0, older than every batch of the session).
    seq: u64,
    body: Body,
}

enum Body {
    Raw(Vec<KeyOpFieldValues>),
    /// Prepared while the batch before it was in flight, with the CONFIG_DB it saw.
    Prepared(Prepared, u64),
}

impl Body {
    fn ops(&self) -> &[KeyOpFieldValues] {
        match self {
            Body::Raw(ops) => ops,
            Body::Prepared(p, _) => &p.ops,
        }
    }
}

/// What is being written to the switch.
enum Work {
    Batch {
        run: Run<usize>,
        prepared: Prepared,
        started: Instant,
        seq: u64,
    },
    Undo {
        run: Run<usize>,
        keys: Vec<String>,
    },
    Owned {
        run: Run<ObjKey>,
        desired: Objects,
        want: OwnedWant,
        updates: usize,
    },
    Sync {
        run: Run<ObjKey>,
        plan: SyncPlan,
        t0: Instant,
        keys: usize,
        initial: bool,
    },
}

impl Work {
    fn next_write(&mut self) -> Option<Arc<Vec<Update>>> {
        match self {
            Work::Batch { run, .. } | Work::Undo { run, .. } => run.next_write(),
            Work::Owned { run, .. } | Work::Sync { run, .. } => run.next_write(),
        }
    }

    fn written(&mut self, r: Result<(), weft_p4rt::Error>) -> Result<(), crate::exec::SwitchLost> {
        match self {
            Work::Batch { run, .. } | Work::Undo { run, .. } => run.written(r),
            Work::Owned { run, .. } | Work::Sync { run, .. } => run.written(r),
        }
    }
}

/// Why the plugin-owned objects are written again, and what to publish once they are.
#[derive(Debug, Default)]
struct OwnedWant {
    publish: Publish,
    tuned: Vec<(QueueKey, weft_tuning::Change)>,
    storms: Vec<(QueueKey, WdEvent)>,
    config: bool,
}

impl OwnedWant {
    fn merge(&mut self, o: OwnedWant) {
        self.publish.state.extend(o.publish.state);
        self.publish.state_delete.extend(o.publish.state_delete);
        self.publish.counters.extend(o.publish.counters);
        self.tuned.extend(o.tuned);
        self.storms.extend(o.storms);
        self.config |= o.config;
    }
}

/// A full sync under way: what it has read so far.
struct SyncWant {
    initial: bool,
    appl_state: Option<Rows>,
    switch: Option<Objects>,
    reading: bool,
    t0: Instant,
}

#[derive(Debug, Default, Clone, Copy)]
enum ConfigWant {
    #[default]
    Idle,
    /// Read CONFIG_DB at `due` (sooner when a batch waits for it), once the batches that came
    /// up to `after` are answered.
    Wanted { due: Instant, after: u64 },
    /// Read; `again` when it changed meanwhile.
    Reading { again: Option<(Instant, u64)> },
}

#[derive(Debug, Clone, Copy)]
enum ReadFor {
    Sync,
    Watchdog,
    Tuning,
    Audit(Instant),
}

#[derive(Default)]
struct Session {
    phase: Phase,
    /// APPL_STATE_DB as the session read it, until its first sync takes it.
    state_rows: Option<Rows>,
    replay: Vec<KeyOpFieldValues>,
    work: Option<(Ticket, Work)>,
    /// What the batch in flight changes (the batch prepared meanwhile is checked against it).
    pending: Pending,
    undo: Option<Work>,
    owned: Option<OwnedWant>,
    sync: Option<SyncWant>,
    config: ConfigWant,
    queue: VecDeque<Queued>,
    reads: HashMap<Ticket, ReadFor>,
    audit_wanted: bool,
    batches_in: u64,
    /// Batches received up to the last CONFIG_DB read issued: they were popped before it.
    config_read_at: u64,
    /// CONFIG_DB reads applied: a batch prepared before the last one is prepared again.
    config_epoch: u64,
    /// The queue rates this session gave the switch.
    rates: Option<Vec<(u32, u64)>>,
    /// The PFC state's re-arming ([`crate::pause::PauseConfig::rearm_period`]): its period
    /// and cells, from the last CONFIG_DB read, and when it is due next.
    rearm: Option<(Duration, Vec<u32>)>,
    rearm_due: Option<Instant>,
}

/// The drift audit's state.
#[derive(Debug, Default)]
struct Audit {
    last: Option<Instant>,
    cost: Duration,
    last_batch: Option<Instant>,
    drifted: Vec<String>,
    /// Why the last read-back failed, while it keeps failing (logged once).
    error: Option<String>,
}

#[derive(Debug, Default, Clone)]
struct Counters {
    sessions: u64,
    pipeline_pushes: u64,
    redis_restores: u64,
    wd_storms: u64,
}

/// The plugin's decisions (see the module doc).
pub struct Core {
    engine: Engine,
    features: Features,
    cfg: CoreConfig,
    state: PluginState,
    cookie: u64,
    counters: Counters,
    redis_run_id: Option<String>,
    config_digest: Option<Digest>,
    /// The newest writer term seen (fencing).
    term: Option<u64>,
    started: Instant,
    audit: Audit,
    next_ticket: Ticket,
    /// The switch's queues its peers hold paused (with [`CoreConfig::pfc`]).
    pauses: Pauses,
    s: Session,
}

/// Keys the previous run popped but never answered: APPL_DB's live rows that differ from
/// APPL_STATE_DB, and APPL_STATE_DB rows APPL_DB no longer has.
fn replay_list(live: &Rows, state: &Rows) -> Vec<KeyOpFieldValues> {
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
    // The rows come in key order (FIXED_IPV4_TABLE before FIXED_NEXTHOP_TABLE), and a replay
    // longer than a batch goes to the switch as several: each batch must hold what its keys
    // refer to or come after it, as the controller orders its own writes.
    replay.sort_by_key(replay_order);
    replay
}

/// Where a replayed key goes: sets by ascending write rank (what a key refers to first), then
/// deletes by descending rank (a user before what it used). Stable: key order within a rank.
fn replay_order(k: &KeyOpFieldValues) -> (u8, u8) {
    use weft_p4::contract;
    let table = k.key.split_once(':').map_or(k.key.as_str(), |(t, _)| t);
    let rank =
        contract::table_by_sonic_name(table).map_or(contract::MAX_WRITE_RANK, |t| t.write_rank);
    match k.op {
        weft_sonic_db::Op::Set => (0, rank),
        weft_sonic_db::Op::Del => (1, contract::MAX_WRITE_RANK - rank),
    }
}

/// Whether the drift audit runs now. It reads the whole switch back and nothing is written
/// meanwhile (a batch committed during the read would show as drift), so it must not stall a
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

/// The answers of a batch from a writer whose term is over: every key refused, nothing of it
/// anywhere.
fn fenced(batch: u64, ops: Vec<KeyOpFieldValues>, term: u64, held: u64) -> Answered {
    Answered {
        batch,
        results: ops
            .into_iter()
            .map(|o| EntryResult::fenced(o.key, o.op, o.fields, term, held))
            .collect(),
        revert: Vec::new(),
        remove: Vec::new(),
        took: Duration::ZERO,
    }
}

impl Core {
    pub fn new(cfg: CoreConfig, translator: Translator, now: Now) -> Core {
        Core {
            engine: Engine::new(translator),
            features: Features::new(cfg.queue, cfg.tuning_line_rate.clone(), cfg.device_id),
            cfg,
            state: PluginState::Starting,
            cookie: 0,
            counters: Counters::default(),
            redis_run_id: None,
            config_digest: None,
            term: None,
            started: now.at,
            audit: Audit::default(),
            next_ticket: 0,
            pauses: Pauses::default(),
            s: Session::default(),
        }
    }

    /// The queues held paused now and what was held before.
    pub fn pauses(&self) -> &Pauses {
        &self.pauses
    }

    pub fn info(&self) -> &P4Info {
        self.engine.translator.info()
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn features(&self) -> &Features {
        &self.features
    }

    /// The newest writer term the plugin has seen.
    pub fn term(&self) -> Option<u64> {
        self.term
    }

    /// Whether the edge may feed a batch now (the consumer's batches wait in their channel
    /// otherwise, never dropped).
    pub fn accepts_batch(&self) -> bool {
        self.s.phase == Phase::Running && self.s.queue.is_empty()
    }

    /// How many batches this session was fed: the [`Answered::batch`] of the last one.
    pub fn batches_in(&self) -> u64 {
        self.s.batches_in
    }

    /// Whether the session is running (synced, replayed).
    pub fn running(&self) -> bool {
        self.s.phase == Phase::Running
    }

    /// When the core wants an [`Input::Tick`]: a CONFIG_DB read that waits only for time. While
    /// the switch takes a write, its answer wakes the core anyway (and a deadline already past
    /// would wake the edge in a loop).
    /// A paused queue's hold running out wakes the core whatever else it waits for.
    pub fn next_wake(&self) -> Option<Instant> {
        let waiting = matches!(
            self.s.phase,
            Phase::Syncing | Phase::Replaying | Phase::Running
        ) && self.s.work.is_none();
        let config = match self.s.config {
            ConfigWant::Wanted { due, .. } if waiting => Some(due),
            _ => None,
        };
        let rearm = self
            .s
            .rearm_due
            .filter(|_| !matches!(self.s.phase, Phase::Down | Phase::Ending));
        [config, self.pauses.next_deadline(), rearm]
            .into_iter()
            .flatten()
            .min()
    }

    pub fn status(&self) -> CoreStatus {
        CoreStatus {
            state: self.state,
            cookie: self.cookie,
            stats: self.engine.stats.clone(),
            installed_keys: self.engine.installed().len() as u64,
            sessions: self.counters.sessions,
            pipeline_pushes: self.counters.pipeline_pushes,
            redis_restores: self.counters.redis_restores,
            wd_storms: self.counters.wd_storms,
            config_digest: self.config_digest,
        }
    }

    fn ticket(&mut self) -> Ticket {
        self.next_ticket += 1;
        self.next_ticket
    }

    /// Takes one input; returns what to do, in order.
    pub fn step(&mut self, now: Now, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        if self.s.phase == Phase::Ending && !matches!(input, Input::SessionEnded(_)) {
            return out;
        }
        self.expire_pauses(now, &mut out);
        self.rearm_pauses(now, &mut out);
        match input {
            Input::WaitingForSwitch => {
                self.counters.sessions += 1;
                self.s = Session::default();
                self.state = PluginState::WaitingForSwitch;
                out.push(Output::Status);
            }
            Input::WaitingForRedis => self.state = PluginState::WaitingForRedis,
            Input::SessionUp {
                redis_run_id,
                pushed,
                cookie,
            } => self.session_up(now, redis_run_id, pushed, cookie, &mut out),
            Input::SessionRead { live, state, term } => {
                self.session_read(now, &live, state, term, &mut out)
            }
            Input::ConfigChanged => self.config_changed(now),
            Input::ConfigRead { rows, tuning } => self.config_read(now, rows, tuning, &mut out),
            Input::ApplState(rows) => {
                if let Some(sync) = &mut self.s.sync {
                    sync.appl_state = Some(rows);
                }
            }
            Input::Batch { ops, term } => self.batch(now, ops, term, &mut out),
            Input::Written { ticket, result } => self.written(now, ticket, result, &mut out),
            Input::Read { ticket, result } => self.read(now, ticket, result, &mut out),
            Input::Timer(t) => self.timer(now, t, &mut out),
            Input::Tick => {}
            Input::PfcFrame { port, frame } => self.pfc_frame(now, port, &frame, &mut out),
            Input::SessionEnded(ended) => self.session_ended(ended, &mut out),
        }
        self.advance(now, &mut out);
        out
    }

    fn resync(&mut self, reason: String, out: &mut Vec<Output>) {
        self.s.phase = Phase::Ending;
        out.push(Output::Resync(reason));
    }

    fn session_up(
        &mut self,
        now: Now,
        run_id: String,
        pushed: bool,
        cookie: u64,
        out: &mut Vec<Output>,
    ) {
        let restarted = self
            .redis_run_id
            .as_deref()
            .is_some_and(|old| old != run_id);
        if restarted {
            // STATE_DB went with it: the controller must see every port again.
            out.push(Output::Ports(PortCmd::Republish));
        }
        if restarted && !self.engine.installed().is_empty() {
            // Redis came back empty: the controller's diff base (APPL_STATE_DB) is gone but the
            // switch still forwards. Put back what is installed, so nothing is torn down and a
            // re-apply finds it in place.
            let rows: Vec<(String, FieldValues)> = self
                .engine
                .installed()
                .iter()
                .map(|(k, inst)| (k.to_string(), inst.fields.clone()))
                .collect();
            self.counters.redis_restores += 1;
            tracing::warn!(
                keys = rows.len(),
                "Redis restarted empty: restored APPL_DB and APPL_STATE_DB P4RT_TABLE from the installed state"
            );
            out.push(Output::Restore(rows));
        }
        if pushed {
            self.counters.pipeline_pushes += 1;
            self.engine.forget_switch();
            tracing::info!(cookie, "pipeline pushed (the switch had another or none)");
        }
        self.cookie = cookie;
        self.redis_run_id = Some(run_id);
        self.state = PluginState::Syncing;
        self.s.phase = Phase::Reading;
        out.push(Output::Status);
        self.pfc_session_up(now, out);
        out.push(Output::ReadSession);
    }

    fn session_read(
        &mut self,
        now: Now,
        live: &Rows,
        state: Rows,
        term: Option<u64>,
        out: &mut Vec<Output>,
    ) {
        if self.s.phase != Phase::Reading {
            return;
        }
        self.s.replay = replay_list(live, &state);
        self.s.state_rows = Some(state);
        self.term = self.term.max(term);
        self.s.phase = Phase::Configuring;
        self.read_config(out);
        let _ = now;
    }

    fn read_config(&mut self, out: &mut Vec<Output>) {
        self.s.config = ConfigWant::Reading { again: None };
        self.s.config_read_at = self.s.batches_in;
        out.push(Output::ReadConfig {
            tuning_state: self.features.tuning.queues.is_empty(),
        });
    }

    fn config_changed(&mut self, now: Now) {
        let due = now.at + CONFIG_SETTLE;
        let after = self.s.batches_in;
        self.s.config = match self.s.config {
            ConfigWant::Idle => ConfigWant::Wanted { due, after },
            w @ ConfigWant::Wanted { .. } => w,
            ConfigWant::Reading { again } => ConfigWant::Reading {
                again: again.or(Some((due, after))),
            },
        };
    }

    fn config_read(
        &mut self,
        now: Now,
        rows: Vec<ConfigRow>,
        tuning: Option<Rows>,
        out: &mut Vec<Output>,
    ) {
        let ConfigWant::Reading { again } = self.s.config else {
            return;
        };
        self.s.config = match again {
            Some((due, after)) => ConfigWant::Wanted { due, after },
            None => ConfigWant::Idle,
        };
        self.s.config_epoch += 1;
        let before = self.config_digest;
        let ports_changed = self.load_config(now, &rows, tuning, out);
        if self.s.phase == Phase::Configuring {
            self.s.phase = Phase::Syncing;
            self.s.sync = Some(SyncWant {
                initial: true,
                appl_state: self.s.state_rows.take(),
                switch: None,
                reading: false,
                t0: now.at,
            });
            return;
        }
        if ports_changed {
            // Port names resolve to other ids now: retranslate everything.
            self.s.sync = Some(SyncWant {
                initial: false,
                appl_state: None,
                switch: None,
                reading: false,
                t0: now.at,
            });
        } else {
            self.want_owned(OwnedWant {
                config: true,
                ..Default::default()
            });
        }
        if self.config_digest != before {
            out.push(Output::Status);
        }
    }

    /// Takes CONFIG_DB into a new intent and configures the features. Returns whether the
    /// port map changed.
    fn load_config(
        &mut self,
        now: Now,
        rows: &[ConfigRow],
        tuning: Option<Rows>,
        out: &mut Vec<Output>,
    ) -> bool {
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
            return false;
        }
        for w in &intent.warnings {
            tracing::warn!(problem = %w, "CONFIG_DB");
        }
        let changed = intent.ports.by_name != self.engine.translator.ports().by_name;
        self.engine.translator.set_ports(intent.ports.clone());
        out.push(Output::Ports(PortCmd::Config {
            ids: intent.ports.by_name.clone(),
            admin_down: intent.admin_down.clone(),
        }));
        // What an earlier run tuned, taken only while this run has tuned nothing yet.
        let restored: BTreeMap<_, EcnTuningState> = match tuning {
            Some(rows) if self.features.tuning.queues.is_empty() => rows
                .iter()
                .filter_map(|(k, f)| {
                    let r = EcnTuningState::from_fields(k, f).ok()?;
                    Some(((r.port.clone(), r.tc), r))
                })
                .collect(),
            _ => BTreeMap::new(),
        };
        let publish = self.features.configure(intent, &restored);
        if !publish.is_empty() {
            out.push(Output::Publish(publish));
        }
        self.pfc_configured(now, out);
        changed
    }

    fn want_owned(&mut self, want: OwnedWant) {
        match &mut self.s.owned {
            Some(w) => w.merge(want),
            None => self.s.owned = Some(want),
        }
    }

    fn batch(
        &mut self,
        now: Now,
        ops: Vec<KeyOpFieldValues>,
        term: Option<u64>,
        out: &mut Vec<Output>,
    ) {
        self.s.batches_in += 1;
        self.audit.last_batch = Some(now.at);
        if let (Some(t), Some(held)) = (term, self.term)
            && t < held
        {
            tracing::warn!(
                keys = ops.len(),
                term = t,
                held,
                "batch from an older term refused"
            );
            out.push(Output::Answer(fenced(self.s.batches_in, ops, t, held)));
            return;
        }
        self.term = self.term.max(term);
        self.s.queue.push_back(Queued {
            seq: self.s.batches_in,
            body: Body::Raw(ops),
        });
        self.prepare_ahead();
    }

    /// Whether the configuration holds the batch `seq` back (it waits for a CONFIG_DB read).
    fn config_holds(&self, seq: u64) -> bool {
        match self.s.config {
            ConfigWant::Idle => false,
            ConfigWant::Wanted { after, .. } => seq > after,
            ConfigWant::Reading { .. } => true,
        }
    }

    /// Prepares the first waiting batch while the one in flight is on the switch, when it
    /// shares no key with it.
    fn prepare_ahead(&mut self) {
        if !matches!(self.s.work, Some((_, Work::Batch { .. }))) {
            return;
        }
        let Some(front) = self.s.queue.front() else {
            return;
        };
        if self.config_holds(front.seq) || !self.s.pending.disjoint(front.body.ops()) {
            return;
        }
        let Some(q) = self.s.queue.front_mut() else {
            return;
        };
        if let Body::Raw(ops) = &mut q.body {
            let p = self.engine.prepare(std::mem::take(ops), &self.s.pending);
            q.body = Body::Prepared(p, self.s.config_epoch);
        }
    }
}

impl Core {
    fn session_ended(&mut self, ended: Ended, out: &mut Vec<Output>) {
        self.s = Session::default();
        match ended {
            Ended::Resync(reason) => {
                self.state = PluginState::Reconnecting;
                self.cookie = 0;
                tracing::warn!(%reason, "session ended; reconnecting and resyncing");
            }
            Ended::Shutdown => {
                self.state = PluginState::Stopped;
                tracing::info!("plugin stopped");
            }
        }
        out.push(Output::Status);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_replay_sets_what_keys_refer_to_first_and_deletes_users_first() {
        use weft_p4::tables as t;
        let key = |sonic: &str, n: u32| format!("{sonic}:{{\"match/x\":\"{n}\"}}");
        let f = |v: &str| vec![("action".to_string(), v.to_string())];
        let (route, nexthop) = (t::ipv4_table::SONIC_NAME, t::nexthop_table::SONIC_NAME);
        let live: super::Rows = [
            (key(route, 1), f("set_nexthop_id")),
            (key(route, 2), f("set_nexthop_id")),
            (key(nexthop, 1), f("set_nexthop")),
        ]
        .into_iter()
        .collect();
        let state: super::Rows = [
            (key(route, 9), f("drop")),
            (key(nexthop, 9), f("set_nexthop")),
        ]
        .into_iter()
        .collect();
        let order: Vec<(String, weft_sonic_db::Op)> = super::replay_list(&live, &state)
            .into_iter()
            .map(|k| (k.key, k.op))
            .collect();
        use weft_sonic_db::Op::{Del, Set};
        assert_eq!(
            order,
            vec![
                (key(nexthop, 1), Set),
                (key(route, 1), Set),
                (key(route, 2), Set),
                (key(route, 9), Del),
                (key(nexthop, 9), Del),
            ]
        );
    }

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
