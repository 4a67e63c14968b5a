//! The reconciler's core: one state machine for `weft apply` (one pass) and `weft run` (the
//! loop). No I/O and no clock: every input carries its time, every output is a request for the
//! shell (`crate::io`) to carry out, whose result comes back as an input.
//!
//! ```text
//!               ┌──────────────────────── shell (crate::io, tokio tasks) ─────────────────────┐
//!   STATE_DB    │ port watch task ──Input::Port──┐                                             │
//!   PORT_TABLE ─┤                                ▼                                             │
//!               │ timer (Core::next_wake) ─Input::Tick─► Core::step ─► Output::Read  ─► read task ─┐
//!               │                                ▲            │      Output::Write ─► write task ─┤
//!               │ read task ──Input::ReadBack────┤            └────► Output::Reconverged,        │
//!               │ write task ─Input::Written─────┘                   status (file, log, metrics) │
//!               └───────────────────────────────────────────────────────────────────────────────┘
//!   read task:  APPL_STATE_DB P4RT_TABLE + Weft's CONFIG_DB tables + STATE_DB WEFT_PLUGIN|status
//!   write task: one batch (CONFIG_DB rows, or the P4RT entries of one stage), then the answers
//! ```
//!
//! Per switch:
//!
//! ```text
//!   Unknown ─read─► Reading ─ok, plugin in sync─► plan: diff(desired, installed)
//!                     │ error / plugin not in sync        │ empty: Converged
//!                     ▼                                    ▼
//!                   Backoff(at) ──at──► read again      Writing: CONFIG_DB rows, then P4RT sets
//!                     ▲                                  stage by stage (ascending), then deletes
//!                     │ write error (state unknown)      (descending), one batch in flight
//!                     └──────────────────────────────────  │ a refused entry: stop here (no later
//!                                                          │ stage, no delete); Backoff, re-plan
//!                                                          ▼ all answered: Converged
//! ```
//! One failure policy for both commands: only acknowledged entries count as installed; a stage
//! with a refused entry stops that switch's later stages and all its deletes (make before break);
//! an unreachable switch, or one whose plugin is not primary and synced, is retried by the one
//! retry policy (`weft_retry`: exponential backoff, jittered per switch and attempt; `weft
//! apply`: until its deadline), unless its error says a retry cannot help (another writer's
//! term, [`SwitchError::retried`]); CONFIG_DB drift is repaired like
//! P4RT drift, because both are read back and diffed the same way. A desired state that changes
//! while a switch is being written is re-planned from what was acknowledged, after the batch in
//! flight.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use weft_compiler::p4delta::{EntryDelta, WireMemo};
use weft_compiler::p4map::Stage;
use weft_compiler::{Compiler, LinkState};
use weft_p4rt::P4Info;
use weft_retry::{RetryPolicy, unit_from};
use weft_sonic_db::{FieldValues, StatusCode};
use weft_sonic_schema::state::InstalledDigests;
use weft_topology::{End, LinkIdx, Peer, SwitchIdx, Topology};

use crate::damping::{LinkDamper, Nanos};
use crate::plan::{self, ConfigChange, DesiredSwitch, Installed, Source, SwitchPlan};

const MS: Nanos = 1_000_000;

/// One pass or for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `weft apply`: converge once; a switch still failing at the deadline is reported.
    Once { deadline: Nanos },
    /// `weft run`: converge, then follow link state; resync every `resync`.
    Run { resync: Nanos },
}

#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub mode: Mode,
    /// A switch's APPL_STATE_DB counts as installed state only while its plugin says it is
    /// running. Off for DBs without a plugin (`weft apply --no-wait`).
    pub require_plugin: bool,
    /// How a switch that cannot be read or written is retried (jittered per switch and
    /// attempt, reproducibly: the core has no randomness of its own).
    pub retry: RetryPolicy,
    /// Links to take as down whatever the switches say (`--down`).
    pub forced_down: BTreeSet<LinkIdx>,
    /// Only these switches are read and written (`--switch`, `--role`, canaries); `None`: all.
    pub targets: Option<BTreeSet<SwitchIdx>>,
}

impl CoreConfig {
    pub fn once(deadline: Nanos) -> Self {
        CoreConfig {
            mode: Mode::Once { deadline },
            require_plugin: true,
            retry: RetryPolicy::doubling(Duration::from_millis(100), Duration::from_secs(5)),
            forced_down: BTreeSet::new(),
            targets: None,
        }
    }

    pub fn run(resync: Nanos) -> Self {
        CoreConfig {
            mode: Mode::Run { resync },
            require_plugin: true,
            retry: RetryPolicy::doubling(Duration::from_millis(100), Duration::from_secs(30)),
            forced_down: BTreeSet::new(),
            targets: None,
        }
    }
}

/// Which request a result answers.
pub type Ticket = u64;

/// One write: CONFIG_DB rows, or the P4RT_TABLE sets or deletes of one stage.
#[derive(Debug, Clone, PartialEq)]
pub enum Batch {
    Config {
        set: Vec<ConfigChange>,
        /// `TABLE|key`.
        del: Vec<String>,
    },
    Entries {
        /// The stages the batch holds, first to last (one, unless merged: see [`batches`]).
        stage: Stage,
        last: Stage,
        /// Deletes: keys only; sets: keys and fields.
        delete: bool,
        ops: Vec<(String, FieldValues)>,
        /// Keys whose row holds fields the new value does not have: written as a delete and a
        /// set in one batch, so SONiC's consumers see exactly the new fields.
        replace: BTreeSet<String>,
    },
}

impl Batch {
    pub fn len(&self) -> usize {
        match self {
            Batch::Config { set, del } => set.len() + del.len(),
            Batch::Entries { ops, .. } => ops.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The switch's answer to one entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    pub key: String,
    pub status: AnswerStatus,
    pub message: String,
}

impl Answer {
    pub fn ok(key: impl Into<String>) -> Self {
        Answer {
            key: key.into(),
            status: SUCCESS,
            message: String::new(),
        }
    }
    pub fn is_ok(&self) -> bool {
        matches!(self.status, SUCCESS | UNANSWERED)
    }
}

/// What became of one entry of a batch. Written (and serialized) as SONiC writes its codes:
/// `SWSS_RC_SUCCESS`, another `SWSS_RC_*`, `TIMEOUT` or `UNANSWERED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerStatus {
    /// The switch's plugin answered with this code.
    Code(StatusCode),
    /// No answer in time: whether the switch took it is unknown.
    Timeout,
    /// Written without waiting for an answer (`--no-wait`).
    Unanswered,
}

impl AnswerStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            AnswerStatus::Code(c) => c.as_str(),
            AnswerStatus::Timeout => "TIMEOUT",
            AnswerStatus::Unanswered => "UNANSWERED",
        }
    }
}

impl fmt::Display for AnswerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for AnswerStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

pub const SUCCESS: AnswerStatus = AnswerStatus::Code(StatusCode::Success);
pub const UNANSWERED: AnswerStatus = AnswerStatus::Unanswered;
pub const TIMEOUT: AnswerStatus = AnswerStatus::Timeout;

/// Why a switch's DBs could not be read or written, by kind: the retry policy decides on the
/// kind ([`SwitchError::retried`]); the text is what an operator reads (one line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SwitchError {
    /// No connection, or it broke: refused, reset, unresolvable, a Redis error.
    #[error("{detail}")]
    Unreachable { detail: String },
    /// It did not answer in time.
    #[error("{detail}")]
    TimedOut { detail: String },
    /// Something answered, but not in the Redis protocol (a wrong port, another server).
    #[error(
        "not a Redis server at {db}: it answered, but not in the Redis protocol (is `db` the switch's SONiC Redis?)"
    )]
    Protocol { db: String },
    /// A fenced write refused: the switch holds a newer leader's term.
    #[error(
        "write refused: this writer's term {term} is older than the DB's term {held} (a newer leader took over)"
    )]
    Fenced { term: u64, held: u64 },
    /// This replica leads no term (`weft run --ha`): nothing is written.
    #[error("not the leader: nothing is written")]
    NotLeader,
}

impl SwitchError {
    /// Whether waiting and trying again can help. A switch that refused our term belongs to
    /// another writer: retrying it is what fencing is there to stop.
    pub fn retried(&self) -> bool {
        match self {
            SwitchError::Unreachable { .. }
            | SwitchError::TimedOut { .. }
            | SwitchError::Protocol { .. } => true,
            SwitchError::Fenced { .. } | SwitchError::NotLeader => false,
        }
    }
}

/// Why `weft apply` gave up on a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// Its DB could not be read or written.
    Unreachable,
    /// Its plugin is not primary and synced.
    NotReady,
    /// Its desired state does not compile.
    Invalid,
    /// Another writer holds it (a newer leader's term).
    Fenced,
}

#[derive(Debug, Clone)]
pub enum Input {
    /// Begin: read every switch.
    Start,
    /// A port of a switch went up or down (STATE_DB PORT_TABLE), seen at `seen` (the
    /// reconvergence it starts is timed from there).
    Port { port: End, up: bool, seen: Nanos },
    /// Time passed (deadlines, backoff, resync).
    Tick,
    ReadBack {
        switch: SwitchIdx,
        ticket: Ticket,
        result: Result<Box<Installed>, SwitchError>,
    },
    /// The answers to a batch (CONFIG_DB batches: one answer per row), or why it could not be
    /// written at all.
    Written {
        switch: SwitchIdx,
        ticket: Ticket,
        result: Result<Vec<Answer>, SwitchError>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Read what the switch holds. With `expect` (the desired state's digests), a plugin in
    /// sync that publishes exactly these makes the rows unnecessary: the read may answer with
    /// [`Installed::by_digest`] instead of the rows, and the core takes the desired state as
    /// what the switch holds.
    Read {
        switch: SwitchIdx,
        ticket: Ticket,
        expect: Option<InstalledDigests>,
    },
    Write {
        switch: SwitchIdx,
        ticket: Ticket,
        /// Shared with the core, which applies the answers to it (a link change writes
        /// thousands of entries: they are not copied for the shell).
        batch: Arc<Batch>,
    },
    /// Every switch a link change affected has acknowledged its new state.
    Reconverged(Reconvergence),
    /// A switch's state changed (for logs and status).
    Switch {
        switch: SwitchIdx,
        state: SwitchState,
    },
}

/// What a reconvergence cost.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, Default)]
pub struct Reconvergence {
    /// Links whose use changed, `A:port ↔ B:port` with `down`/`up`.
    pub changes: Vec<String>,
    pub switches_changed: usize,
    pub entries_written: usize,
    pub failed: usize,
    /// Wall time of the recomputation (0 when not measured).
    pub compute_us: u64,
    /// From the first port event of the batch to every affected switch's acknowledgement.
    pub total_ms: f64,
}

/// A switch as the reconciler sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum SwitchState {
    Reading,
    Writing {
        remaining: usize,
    },
    Converged,
    /// Its DB could not be read or written; retried at `retry_ms`.
    Unreachable {
        reason: String,
        retry_ms: u64,
    },
    /// Its plugin is not primary and synced; retried at `retry_ms`.
    NotReady {
        reason: String,
        retry_ms: u64,
    },
    /// Entries were refused; re-planned at `retry_ms` (`weft run`) or reported (`weft apply`).
    Refused {
        entries: usize,
        retry_ms: u64,
    },
    /// `weft apply` gave up on it at its deadline.
    Failed {
        reason: String,
    },
    /// Not a target of this run (`--switch`, `--role`).
    Skipped,
}

/// What `weft apply` reports per switch.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SwitchResult {
    pub switch: String,
    /// Entries acknowledged (or written without waiting).
    pub written: usize,
    pub config_written: usize,
    /// Written without waiting for an answer (`--no-wait`).
    pub unanswered: usize,
    /// Entries planned but never sent because an earlier stage failed.
    pub not_sent: usize,
    pub failed: Vec<Answer>,
    /// The switch could not be written at all.
    pub error: Option<String>,
    /// Why: `unreachable` (its DB), `not-ready` (its plugin), `invalid` (its desired state),
    /// `fenced` (another writer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ErrorKind>,
    pub millis: u64,
}

impl SwitchResult {
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.failed.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Then {
    Read,
    Plan,
}

#[derive(Debug)]
enum Phase {
    Unknown,
    Reading(Ticket),
    Idle,
    Writing {
        ticket: Ticket,
        batch: Arc<Batch>,
        /// Shared with every switch a link change gave the same entry changes.
        rest: Vec<Arc<Batch>>,
    },
    Wait {
        at: Nanos,
        then: Then,
    },
    /// `weft apply` is done with it.
    Done,
    /// Not a target of this run: never read or written.
    Skipped,
}

struct Sw {
    phase: Phase,
    installed: Option<Installed>,
    desired: Option<Arc<DesiredSwitch>>,
    /// `desired` is no longer the compiler's: built again when a whole plan needs it. (Kept
    /// until then: freeing thousands of switches' entries would cost a link change more than
    /// its diff.)
    desired_stale: bool,
    /// Desired state changed since the last plan.
    dirty: bool,
    /// `installed` is exactly the compiler's desired state (acknowledged whole, and neither
    /// changed since): a link change's diff is then the change's entries alone.
    synced: bool,
    /// Retries since it last answered (the retry policy's attempt).
    attempt: u32,
    state: SwitchState,
    result: SwitchResult,
    started: Option<Nanos>,
}

/// The reconciler.
pub struct Core<'t> {
    t: &'t Topology,
    info: Arc<P4Info>,
    cfg: CoreConfig,
    compiler: Compiler<'t>,
    sw: Vec<Sw>,
    next_ticket: Ticket,
    // Link state.
    link_of: BTreeMap<End, LinkIdx>,
    end_up: BTreeMap<End, bool>,
    dampers: Vec<LinkDamper>,
    /// Per link: administratively up and not forced down (fixed for the core's life; looked up
    /// for every link on every change, where the topology's ports are far apart in memory).
    may_use: Vec<bool>,
    next_resync: Option<Nanos>,
    /// The open reconvergence: (first event time, changes, switches it waits for, compute).
    open: Option<OpenReconvergence>,
    pub stats: CoreStats,
    /// Measure compute time with the wall clock (off in golden tests).
    pub measure: bool,
}

struct OpenReconvergence {
    since: Nanos,
    changes: Vec<String>,
    waiting: BTreeSet<SwitchIdx>,
    switches: usize,
    written: usize,
    failed: usize,
    compute_us: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CoreStats {
    pub reconvergences: u64,
    pub writes: u64,
    pub failed_writes: u64,
    pub events: u64,
}

/// Why the core could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error(transparent)]
    Desired(#[from] plan::DesiredError),
}

impl<'t> Core<'t> {
    pub fn new(t: &'t Topology, info: Arc<P4Info>, cfg: CoreConfig) -> Self {
        let mut links = LinkState::all_up(t);
        for &l in &cfg.forced_down {
            links.set_down(l, true);
        }
        let compiler = Compiler::new(t, links);
        let mut link_of = BTreeMap::new();
        for (switch, s) in t.switches.iter().enumerate() {
            for (port, p) in s.ports.iter().enumerate() {
                if let Peer::Switch { link } = p.peer {
                    link_of.insert(End { switch, port }, link);
                }
            }
        }
        let targeted = |i: usize| cfg.targets.as_ref().is_none_or(|t| t.contains(&i));
        let sw = t
            .switches
            .iter()
            .enumerate()
            .map(|(i, s)| Sw {
                phase: if targeted(i) {
                    Phase::Unknown
                } else {
                    Phase::Skipped
                },
                installed: None,
                desired: None,
                desired_stale: false,
                dirty: targeted(i),
                synced: false,
                attempt: 0,
                state: if targeted(i) {
                    SwitchState::Reading
                } else {
                    SwitchState::Skipped
                },
                result: SwitchResult {
                    switch: s.name.clone(),
                    ..Default::default()
                },
                started: None,
            })
            .collect();
        Core {
            t,
            info,
            compiler,
            sw,
            next_ticket: 1,
            link_of,
            end_up: BTreeMap::new(),
            dampers: (0..t.links.len()).map(|_| LinkDamper::new(true)).collect(),
            may_use: (0..t.links.len())
                .map(|l| t.link_admin_up(l) && !cfg.forced_down.contains(&l))
                .collect(),
            next_resync: None,
            open: None,
            stats: CoreStats::default(),
            measure: true,
            cfg,
        }
    }

    pub fn topology(&self) -> &'t Topology {
        self.t
    }

    pub fn compiler(&self) -> &Compiler<'t> {
        &self.compiler
    }

    /// Every switch's state, by index.
    pub fn states(&self) -> impl Iterator<Item = (SwitchIdx, &SwitchState)> {
        self.sw.iter().enumerate().map(|(i, s)| (i, &s.state))
    }

    /// `weft apply`'s per-switch results.
    pub fn results(&self) -> Vec<SwitchResult> {
        self.sw.iter().map(|s| s.result.clone()).collect()
    }

    /// `weft apply` is finished: every switch converged or given up.
    pub fn done(&self) -> bool {
        self.sw
            .iter()
            .all(|s| matches!(s.phase, Phase::Done | Phase::Idle | Phase::Skipped) && !s.dirty)
    }

    /// Every switch holds its desired state.
    pub fn converged(&self) -> bool {
        self.sw
            .iter()
            .all(|s| matches!(s.state, SwitchState::Converged | SwitchState::Skipped) && !s.dirty)
    }

    /// The earliest time a [`Input::Tick`] has something to do.
    pub fn next_wake(&mut self) -> Option<Nanos> {
        let cfg = &self.t.failover.dampening;
        let hold = self.t.failover.hold_down.to_std();
        let mut next: Option<Nanos> = self.next_resync;
        let mut consider = |t: Nanos| next = Some(next.map_or(t, |n| n.min(t)));
        for d in &self.dampers {
            if let Some(t) = d.next_deadline(cfg, hold) {
                consider(t);
            }
        }
        for s in &self.sw {
            if let Phase::Wait { at, .. } = s.phase {
                consider(at);
            }
        }
        if let Mode::Once { deadline } = self.cfg.mode
            && !self.done()
        {
            consider(deadline);
        }
        next
    }

    /// Links not in use and why (for `weft status`).
    pub fn link_status(&mut self, now: Nanos) -> Vec<LinkStatus> {
        let t = self.t;
        let cfg = &t.failover.dampening;
        self.dampers
            .iter_mut()
            .enumerate()
            .map(|(l, d)| LinkStatus {
                link: link_name(t, l),
                oper_up: d.up,
                in_use: !self.compiler.link_state().is_down(l),
                suppressed: d.suppressed(cfg, now),
                penalty: d.penalty.round() as u32,
                flaps: d.flaps,
            })
            .collect()
    }

    fn ticket(&mut self) -> Ticket {
        self.next_ticket += 1;
        self.next_ticket
    }

    pub fn step(&mut self, now: Nanos, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        match input {
            Input::Start => {
                if let Mode::Run { resync } = self.cfg.mode {
                    self.next_resync = Some(now + resync);
                }
                for si in 0..self.sw.len() {
                    if !matches!(self.sw[si].phase, Phase::Skipped) {
                        self.read(si, now, &mut out);
                    }
                }
            }
            Input::Port { port, up, seen } => {
                self.stats.events += 1;
                if let Some(&l) = self.link_of.get(&port) {
                    self.end_up.insert(port, up);
                    let link = &self.t.links[l];
                    let up = [link.a, link.b]
                        .iter()
                        .all(|e| *self.end_up.get(e).unwrap_or(&true));
                    self.dampers[l].event(&self.t.failover.dampening, now, up);
                    if self.open.is_none() {
                        // The reconvergence this event starts is timed from here.
                        self.open = Some(OpenReconvergence {
                            since: seen.min(now),
                            changes: Vec::new(),
                            waiting: BTreeSet::new(),
                            switches: 0,
                            written: 0,
                            failed: 0,
                            compute_us: 0,
                        });
                    }
                }
                self.links_changed(now, &mut out);
            }
            Input::Tick => self.tick(now, &mut out),
            Input::ReadBack {
                switch,
                ticket,
                result,
            } => self.read_back(switch, ticket, result, now, &mut out),
            Input::Written {
                switch,
                ticket,
                result,
            } => self.written(switch, ticket, result, now, &mut out),
        }
        self.finish_reconvergence(now, &mut out);
        out
    }

    fn tick(&mut self, now: Nanos, out: &mut Vec<Output>) {
        self.links_changed(now, out);
        for si in 0..self.sw.len() {
            if let Phase::Wait { at, then } = &self.sw[si].phase
                && *at <= now
            {
                match then {
                    Then::Read => self.read(si, now, out),
                    Then::Plan => {
                        self.sw[si].phase = Phase::Idle;
                        self.sw[si].dirty = true;
                        self.plan(si, now, out);
                    }
                }
            }
        }
        if let Mode::Once { deadline } = self.cfg.mode
            && now >= deadline
        {
            for si in 0..self.sw.len() {
                if matches!(self.sw[si].phase, Phase::Wait { .. } | Phase::Unknown) {
                    let reason = match &self.sw[si].state {
                        SwitchState::Unreachable { reason, .. }
                        | SwitchState::NotReady { reason, .. } => reason.clone(),
                        s => format!("{s:?}"),
                    };
                    self.give_up(si, reason, now, out);
                }
            }
        }
        if let Some(at) = self.next_resync
            && at <= now
            && let Mode::Run { resync } = self.cfg.mode
        {
            self.next_resync = Some(now + resync);
            // Repair drift: what each switch really holds becomes the base of the diff.
            for si in 0..self.sw.len() {
                if matches!(self.sw[si].phase, Phase::Idle) {
                    self.read(si, now, out);
                }
            }
        }
    }

    /// Applies every link whose usability differs from what the compiler assumes.
    fn links_changed(&mut self, now: Nanos, out: &mut Vec<Output>) {
        let t = self.t;
        let cfg = &t.failover.dampening;
        let hold = t.failover.hold_down.to_std();
        let t0 = self.measure.then(std::time::Instant::now);
        let mut changed: BTreeSet<SwitchIdx> = BTreeSet::new();
        let mut changes = Vec::new();
        // Each changed switch's entry changes, mapped while the compiler holds the state they
        // lead to (`None`: not mapped, plan it whole).
        let info = self.info.clone();
        let mut memo = WireMemo::new(t, &info);
        let mut deltas: BTreeMap<SwitchIdx, Option<EntryDelta>> = BTreeMap::new();
        let mut shared = BatchMemo::default();
        for l in 0..self.dampers.len() {
            let usable = self.dampers[l].usable(cfg, hold, now) && self.may_use[l];
            if self.compiler.link_state().is_down(l) == usable {
                for d in self.compiler.set_link_delta(l, !usable) {
                    changed.insert(d.switch);
                    let s = &self.sw[d.switch];
                    let fast = s.synced && matches!(s.phase, Phase::Idle);
                    let ed = fast
                        .then(|| {
                            memo.entry_delta(&self.compiler.switches()[d.switch], &d)
                                .ok()
                        })
                        .flatten();
                    let merged = match (deltas.remove(&d.switch), ed) {
                        (None, ed) => ed,
                        (Some(Some(before)), Some(ed)) => Some(before.then(ed)),
                        _ => None,
                    };
                    deltas.insert(d.switch, merged);
                }
                changes.push(format!(
                    "{} {}",
                    link_name(t, l),
                    if usable { "up" } else { "down" }
                ));
            }
        }
        if changes.is_empty() {
            if self.open.as_ref().is_some_and(|o| o.changes.is_empty()) {
                // Events that changed nothing (a suppressed link flapping) open nothing.
                self.open = None;
            }
            return;
        }
        let compute_us = t0.map_or(0, |t0| t0.elapsed().as_micros() as u64);
        let open = self.open.get_or_insert(OpenReconvergence {
            since: now,
            changes: Vec::new(),
            waiting: BTreeSet::new(),
            switches: 0,
            written: 0,
            failed: 0,
            compute_us: 0,
        });
        open.changes.extend(changes);
        open.compute_us += compute_us;
        open.switches += changed.len();
        open.waiting.extend(
            changed
                .iter()
                .copied()
                .filter(|&si| !matches!(self.sw[si].phase, Phase::Skipped)),
        );
        for si in changed {
            let s = &mut self.sw[si];
            if matches!(s.phase, Phase::Skipped) {
                continue;
            }
            s.desired_stale = true;
            s.dirty = true;
            match deltas.remove(&si).flatten() {
                Some(ed) if s.synced && matches!(s.phase, Phase::Idle) => {
                    self.plan_delta(si, &ed, &mut shared, now, out)
                }
                _ => {
                    self.sw[si].synced = false;
                    if matches!(self.sw[si].phase, Phase::Idle) {
                        self.plan(si, now, out);
                    }
                }
            }
        }
    }

    /// Plans a switch that holds exactly its desired state from before a link change: only
    /// the entries the change names are compared (its desired state is built again only when
    /// a whole plan needs it).
    fn plan_delta(
        &mut self,
        si: SwitchIdx,
        ed: &EntryDelta,
        memo: &mut BatchMemo,
        now: Nanos,
        out: &mut Vec<Output>,
    ) {
        self.sw[si].dirty = false;
        let Some(installed) = &self.sw[si].installed else {
            self.read(si, now, out);
            return;
        };
        let shared = memo.batches(self.t, si, ed, installed);
        let Some((first, rest)) = shared.split_first() else {
            self.mark_converged(si, now, out);
            return;
        };
        self.send(si, first.clone(), rest.to_vec(), out);
    }

    fn read(&mut self, si: SwitchIdx, now: Nanos, out: &mut Vec<Output>) {
        let ticket = self.ticket();
        let s = &mut self.sw[si];
        s.synced = false;
        s.started.get_or_insert(now);
        s.phase = Phase::Reading(ticket);
        self.set_state(si, SwitchState::Reading, out);
        // A switch already known to differ, or whose desired state does not compile, is read
        // row by row.
        let expect = match self.desired(si) {
            Ok(d) => Some(d.digests()),
            Err(_) => None,
        };
        out.push(Output::Read {
            switch: si,
            ticket,
            expect,
        });
    }

    /// A read that must return the rows (no digest to compare with).
    fn read_rows(&mut self, si: SwitchIdx, _now: Nanos, out: &mut Vec<Output>) {
        let ticket = self.ticket();
        self.sw[si].phase = Phase::Reading(ticket);
        out.push(Output::Read {
            switch: si,
            ticket,
            expect: None,
        });
    }

    fn retry(
        &mut self,
        si: SwitchIdx,
        then: Then,
        state: impl FnOnce(u64) -> SwitchState,
        now: Nanos,
        out: &mut Vec<Output>,
    ) {
        if let Some(o) = &mut self.open {
            // A reconvergence does not wait for a switch that cannot take it now.
            o.waiting.remove(&si);
        }
        let s = &mut self.sw[si];
        // Jittered per switch and attempt, so a fabric that lost its DBs at once does not come
        // back in lock step, and reproducibly: the same inputs give the same times.
        let u = unit_from(((si as u64) << 32) | u64::from(s.attempt));
        let at = now + self.cfg.retry.delay(s.attempt, u).as_nanos() as Nanos;
        s.attempt = s.attempt.saturating_add(1);
        s.phase = Phase::Wait { at, then };
        let st = state(at / MS);
        self.set_state(si, st, out);
        if let Mode::Once { deadline } = self.cfg.mode
            && at > deadline
        {
            let reason = match &self.sw[si].state {
                SwitchState::Unreachable { reason, .. } | SwitchState::NotReady { reason, .. } => {
                    reason.clone()
                }
                s => format!("{s:?}"),
            };
            self.give_up(si, reason, now, out);
        }
    }

    fn give_up(&mut self, si: SwitchIdx, reason: String, now: Nanos, out: &mut Vec<Output>) {
        let s = &mut self.sw[si];
        s.result.error_kind.get_or_insert(match s.state {
            SwitchState::Unreachable { .. } => ErrorKind::Unreachable,
            SwitchState::NotReady { .. } => ErrorKind::NotReady,
            _ => ErrorKind::Invalid,
        });
        s.phase = Phase::Done;
        s.dirty = false;
        s.result.error.get_or_insert(reason.clone());
        s.result.millis = now.saturating_sub(s.started.unwrap_or(now)) / MS;
        self.set_state(si, SwitchState::Failed { reason }, out);
    }

    fn read_back(
        &mut self,
        si: SwitchIdx,
        ticket: Ticket,
        result: Result<Box<Installed>, SwitchError>,
        now: Nanos,
        out: &mut Vec<Output>,
    ) {
        if !matches!(self.sw[si].phase, Phase::Reading(t) if t == ticket) {
            return;
        }
        match result {
            Err(e) => {
                self.sw[si].installed = None;
                self.unreachable(si, e, now, out);
            }
            Ok(inst) if self.cfg.require_plugin && !inst.trusted() => {
                let reason = inst.describe();
                self.sw[si].installed = None;
                self.retry(
                    si,
                    Then::Read,
                    |retry_ms| SwitchState::NotReady { reason, retry_ms },
                    now,
                    out,
                );
            }
            Ok(inst) => {
                let inst = match &inst.source {
                    // Known by digest: the switch holds the desired state, which becomes the
                    // base of later (delta) diffs as if it had been read.
                    Source::Digest(d) => match self.desired(si) {
                        Ok(want) if want.digests() == *d => {
                            Installed::holding(&want, inst.plugin.clone())
                        }
                        // The desired state moved since the read was asked for: read the rows.
                        _ => {
                            self.read_rows(si, now, out);
                            return;
                        }
                    },
                    _ => *inst,
                };
                let s = &mut self.sw[si];
                s.installed = Some(inst);
                s.attempt = 0;
                s.phase = Phase::Idle;
                s.dirty = true;
                self.plan(si, now, out);
            }
        }
    }

    /// The switch's desired state, compiled to what is written.
    fn desired(&mut self, si: SwitchIdx) -> Result<Arc<DesiredSwitch>, plan::DesiredError> {
        if let Some(d) = &self.sw[si].desired
            && !self.sw[si].desired_stale
        {
            return Ok(d.clone());
        }
        self.sw[si].desired = None;
        let d = Arc::new(plan::desired_switch(
            self.t,
            &self.info,
            &self.compiler.switches()[si],
            si,
        )?);
        self.sw[si].desired = Some(d.clone());
        self.sw[si].desired_stale = false;
        Ok(d)
    }

    /// Diffs an idle switch and starts writing what differs.
    fn plan(&mut self, si: SwitchIdx, now: Nanos, out: &mut Vec<Output>) {
        if !matches!(self.sw[si].phase, Phase::Idle) {
            return;
        }
        self.sw[si].dirty = false;
        let desired = match self.desired(si) {
            Ok(d) => d,
            Err(e) => {
                // The intent cannot be compiled for this switch: nothing is written to it.
                self.give_up(si, e.to_string(), now, out);
                return;
            }
        };
        let Some(installed) = &self.sw[si].installed else {
            self.read(si, now, out);
            return;
        };
        // Without views the plan does not look at links (collecting the down ones would cost a
        // pass over every link of the fabric per switch).
        let p = plan::diff(
            self.t,
            si,
            &self.compiler.switches()[si],
            (*desired).clone(),
            installed,
            &BTreeSet::new(),
            plan::Views::Without,
        );
        let mut batches: Vec<Arc<Batch>> = batches(p).into_iter().map(Arc::new).collect();
        if batches.is_empty() {
            self.mark_converged(si, now, out);
            return;
        }
        let first = batches.remove(0);
        self.send(si, first, batches, out);
    }

    fn send(
        &mut self,
        si: SwitchIdx,
        batch: Arc<Batch>,
        rest: Vec<Arc<Batch>>,
        out: &mut Vec<Output>,
    ) {
        let ticket = self.ticket();
        let remaining = batch.len() + rest.iter().map(|b| b.len()).sum::<usize>();
        self.sw[si].synced = false;
        self.sw[si].phase = Phase::Writing {
            ticket,
            batch: batch.clone(),
            rest,
        };
        self.set_state(si, SwitchState::Writing { remaining }, out);
        out.push(Output::Write {
            switch: si,
            ticket,
            batch,
        });
    }

    fn mark_converged(&mut self, si: SwitchIdx, now: Nanos, out: &mut Vec<Output>) {
        let once = matches!(self.cfg.mode, Mode::Once { .. });
        let s = &mut self.sw[si];
        s.phase = if once { Phase::Done } else { Phase::Idle };
        // Everything planned is acknowledged: the switch holds its desired state.
        s.synced = true;
        s.attempt = 0;
        s.result.millis = now.saturating_sub(s.started.unwrap_or(now)) / MS;
        if let Some(o) = &mut self.open {
            o.waiting.remove(&si);
        }
        self.set_state(si, SwitchState::Converged, out);
    }

    /// A read or write that failed as a whole: what the switch holds is unknown, so it is read
    /// again after the retry policy's wait, unless retrying cannot help.
    fn unreachable(&mut self, si: SwitchIdx, e: SwitchError, now: Nanos, out: &mut Vec<Output>) {
        if !e.retried() {
            if let Some(o) = &mut self.open {
                o.waiting.remove(&si);
            }
            self.sw[si].result.error_kind = Some(ErrorKind::Fenced);
            self.give_up(si, e.to_string(), now, out);
            return;
        }
        let reason = e.to_string();
        self.retry(
            si,
            Then::Read,
            |retry_ms| SwitchState::Unreachable { reason, retry_ms },
            now,
            out,
        );
    }

    fn written(
        &mut self,
        si: SwitchIdx,
        ticket: Ticket,
        result: Result<Vec<Answer>, SwitchError>,
        now: Nanos,
        out: &mut Vec<Output>,
    ) {
        let (batch, rest) = match std::mem::replace(&mut self.sw[si].phase, Phase::Unknown) {
            Phase::Writing {
                ticket: t,
                batch,
                rest,
            } if t == ticket => (batch, rest),
            other => {
                self.sw[si].phase = other;
                return;
            }
        };
        let answers = match result {
            Ok(a) => a,
            Err(e) => {
                // What the switch took is unknown: read it again before anything else.
                self.sw[si].installed = None;
                self.stats.failed_writes += 1;
                self.unreachable(si, e, now, out);
                return;
            }
        };
        let Some(refused) = self.take_answers(si, &batch, &answers) else {
            // Not reachable: a batch is only sent with the installed state known.
            self.read(si, now, out);
            return;
        };
        self.stats.writes += (batch.len() - refused.len()) as u64;
        if !refused.is_empty() {
            self.refused(si, refused, &rest, now, out);
            return;
        }
        self.sw[si].result.failed.clear();
        self.sw[si].phase = Phase::Idle;
        if self.sw[si].dirty {
            // The desired state moved while this batch was in flight: plan again from what the
            // switch acknowledged.
            self.plan(si, now, out);
            return;
        }
        let mut rest = rest;
        if rest.is_empty() {
            self.mark_converged(si, now, out);
        } else {
            let next = rest.remove(0);
            self.send(si, next, rest, out);
        }
    }

    /// Applies a batch's answers to what the switch is known to hold; returns the entries it
    /// did not take (`None`: the installed state is not known).
    fn take_answers(
        &mut self,
        si: SwitchIdx,
        batch: &Batch,
        answers: &[Answer],
    ) -> Option<Vec<Answer>> {
        let by_key: BTreeMap<&str, &Answer> = answers.iter().map(|a| (a.key.as_str(), a)).collect();
        let s = &mut self.sw[si];
        let mut refused = Vec::new();
        let inst = s.installed.as_mut()?;
        match batch {
            Batch::Config { set, del } => {
                for c in set {
                    let k = c.redis_key();
                    if by_key.get(k.as_str()).is_some_and(|a| a.is_ok()) {
                        let mut f = c.fields();
                        f.sort();
                        inst.config.insert(k, f);
                        s.result.config_written += 1;
                    } else {
                        refused.push(answer_for(&by_key, &k));
                    }
                }
                for k in del {
                    if by_key.get(k.as_str()).is_some_and(|a| a.is_ok()) {
                        inst.config.remove(k);
                        s.result.config_written += 1;
                    } else {
                        refused.push(answer_for(&by_key, k));
                    }
                }
            }
            Batch::Entries { delete, ops, .. } => {
                for (k, fields) in ops {
                    match by_key.get(k.as_str()) {
                        Some(a) if a.is_ok() => {
                            if *delete {
                                inst.entries.remove(k);
                            } else {
                                inst.entries.insert(k.clone(), fields.clone());
                            }
                            s.result.written += 1;
                            if a.status == UNANSWERED {
                                s.result.unanswered += 1;
                            }
                            if let Some(o) = &mut self.open {
                                o.written += 1;
                            }
                        }
                        _ => refused.push(answer_for(&by_key, k)),
                    }
                }
            }
        }
        Some(refused)
    }

    /// Entries of a batch were refused or not answered. Make before break: nothing that depends
    /// on this stage, and no delete, is sent.
    fn refused(
        &mut self,
        si: SwitchIdx,
        refused: Vec<Answer>,
        rest: &[Arc<Batch>],
        now: Nanos,
        out: &mut Vec<Output>,
    ) {
        let n = refused.len();
        self.stats.failed_writes += n as u64;
        if let Some(o) = &mut self.open {
            o.failed += n;
        }
        let once = matches!(self.cfg.mode, Mode::Once { .. });
        let s = &mut self.sw[si];
        s.result.not_sent += rest.iter().map(|b| b.len()).sum::<usize>();
        s.result.failed = refused;
        if once {
            // One pass reports what was refused or not answered; it does not retry.
            s.phase = Phase::Done;
            s.result.millis = now.saturating_sub(s.started.unwrap_or(now)) / MS;
            if let Some(o) = &mut self.open {
                o.waiting.remove(&si);
            }
            self.set_state(
                si,
                SwitchState::Refused {
                    entries: n,
                    retry_ms: 0,
                },
                out,
            );
            return;
        }
        let timed_out = s.result.failed.iter().any(|a| a.status == TIMEOUT);
        if timed_out {
            // An answer may still come: what the switch holds is whatever it answered.
            s.installed = None;
            let reason = format!("{n} entries not answered in time");
            self.retry(
                si,
                Then::Read,
                |retry_ms| SwitchState::Unreachable { reason, retry_ms },
                now,
                out,
            );
        } else {
            self.retry(
                si,
                Then::Plan,
                |retry_ms| SwitchState::Refused {
                    entries: n,
                    retry_ms,
                },
                now,
                out,
            );
        }
    }

    fn set_state(&mut self, si: SwitchIdx, state: SwitchState, out: &mut Vec<Output>) {
        if self.sw[si].state != state {
            self.sw[si].state = state.clone();
            out.push(Output::Switch { switch: si, state });
        }
    }

    fn finish_reconvergence(&mut self, now: Nanos, out: &mut Vec<Output>) {
        let Some(o) = &self.open else { return };
        if o.changes.is_empty() || !o.waiting.is_empty() {
            return;
        }
        let Some(o) = self.open.take() else { return };
        self.stats.reconvergences += 1;
        out.push(Output::Reconverged(Reconvergence {
            changes: o.changes,
            switches_changed: o.switches,
            entries_written: o.written,
            failed: o.failed,
            compute_us: o.compute_us,
            total_ms: now.saturating_sub(o.since) as f64 / MS as f64,
        }));
    }
}

/// Pushes the stages in the order given, as one batch when they fit [`MERGE_UP_TO`].
fn push_stages(
    out: &mut Vec<Batch>,
    stages: Vec<(Stage, Vec<(String, FieldValues)>)>,
    replace: &mut BTreeMap<Stage, BTreeSet<String>>,
    delete: bool,
    may_merge: bool,
) {
    let total: usize = stages.iter().map(|(_, ops)| ops.len()).sum();
    if total == 0 {
        return;
    }
    if may_merge && total <= MERGE_UP_TO {
        let (first, last) = (stages[0].0, stages[stages.len() - 1].0);
        let mut ops = Vec::with_capacity(total);
        let mut rep = BTreeSet::new();
        for (stage, o) in stages {
            ops.extend(o);
            rep.extend(replace.remove(&stage).unwrap_or_default());
        }
        out.push(Batch::Entries {
            stage: first,
            last,
            delete,
            ops,
            replace: rep,
        });
        return;
    }
    for (stage, ops) in stages {
        out.push(Batch::Entries {
            stage,
            last: stage,
            delete,
            ops,
            replace: replace.remove(&stage).unwrap_or_default(),
        });
    }
}

fn answer_for(by_key: &BTreeMap<&str, &Answer>, key: &str) -> Answer {
    by_key.get(key).map_or_else(
        || Answer {
            key: key.to_string(),
            status: TIMEOUT,
            message: "no answer".into(),
        },
        |a| (*a).clone(),
    )
}

/// `A:port ↔ B:port` of link `l`.
pub fn link_name(t: &Topology, l: LinkIdx) -> String {
    format!(
        "{} ↔ {}",
        t.end_name(t.links[l].a),
        t.end_name(t.links[l].b)
    )
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

/// Stages whose entries fit one producer script may go as one batch (the consumer pops a
/// script's keys together and the plugin writes a batch in rank order): a link change touches a
/// handful of entries per switch, and one round trip instead of one per stage is most of its
/// latency. Sets are merged only where no stage but the last adds a key: every entry of the
/// batch then names only what is installed already, so none depends on another and a refusal
/// leaves nothing dangling. Deletes are merged whole: the plugin refuses a delete of something
/// still used (IN_USE), so a refused delete keeps what depends on it. An initial apply (adds in
/// every stage) goes stage by stage.
pub const MERGE_UP_TO: usize = weft_sonic_db::DEFAULT_KEYS_PER_SCRIPT;

/// One switch's write batches, first to last, shared with the switches that change alike.
pub type SharedBatches = Arc<[Arc<Batch>]>;

/// The write batches of the entry deltas of one link change, by delta: most switches a change
/// touches change alike (every leaf stops using the spine that lost its way to one leaf), and
/// their deltas, mapped through one [`WireMemo`], hold the same shared entries. The batches of a
/// synced switch depend on its delta alone ([`plan::diff_delta`]), so each distinct delta is
/// diffed and batched once and its batches are shared, not copied entry by entry.
#[derive(Default)]
pub struct BatchMemo {
    /// By a hash of the delta's entry pointers; the deltas kept to tell collisions apart.
    by_delta: std::collections::HashMap<u64, Vec<(EntryDelta, SharedBatches)>>,
    /// Distinct deltas diffed (for benchmarks: the rest were found here).
    pub diffed: usize,
}

impl BatchMemo {
    /// The batches of `ed` at switch `si`, which holds exactly what it should have held before
    /// the change (see [`plan::diff_delta`]).
    pub fn batches(
        &mut self,
        t: &Topology,
        si: SwitchIdx,
        ed: &EntryDelta,
        installed: &Installed,
    ) -> SharedBatches {
        let h = delta_hash(ed);
        if let Some((_, b)) = self
            .by_delta
            .get(&h)
            .and_then(|v| v.iter().find(|(d, _)| same_entries(d, ed)))
        {
            // What a diff of this switch would give (which also checks what it holds).
            debug_assert!(
                batches(plan::diff_delta(t, si, ed, installed))
                    .iter()
                    .eq(b.iter().map(|b| &**b)),
                "switch {si}: shared batches differ from its own"
            );
            return b.clone();
        }
        self.diffed += 1;
        let b: SharedBatches = batches(plan::diff_delta(t, si, ed, installed))
            .into_iter()
            .map(Arc::new)
            .collect();
        self.by_delta
            .entry(h)
            .or_default()
            .push((ed.clone(), b.clone()));
        b
    }
}

/// A hash of which shared entries a delta holds, where.
fn delta_hash(ed: &EntryDelta) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |x: usize| {
        h = (h ^ x as u64)
            .wrapping_mul(0x0100_0000_01b3)
            .rotate_left(17)
    };
    eat(ed.removed.len());
    for m in &ed.removed {
        eat(Arc::as_ptr(m) as usize);
    }
    for (m, was) in &ed.set {
        eat(Arc::as_ptr(m) as usize);
        eat(was.as_ref().map_or(0, |w| Arc::as_ptr(w) as usize));
    }
    h
}

/// The same entries, as the same shared values.
fn same_entries(a: &EntryDelta, b: &EntryDelta) -> bool {
    a.removed.len() == b.removed.len()
        && a.set.len() == b.set.len()
        && a.removed
            .iter()
            .zip(&b.removed)
            .all(|(x, y)| Arc::ptr_eq(x, y))
        && a.set.iter().zip(&b.set).all(|((x, w), (y, v))| {
            Arc::ptr_eq(x, y)
                && match (w, v) {
                    (Some(w), Some(v)) => Arc::ptr_eq(w, v),
                    (None, None) => true,
                    _ => false,
                }
        })
}

/// A switch plan as write batches in make-before-break order: CONFIG_DB rows (referenced rows
/// first), P4RT sets by ascending stage, P4RT deletes by descending stage (each merged into one
/// batch when it fits [`MERGE_UP_TO`]), CONFIG_DB deletes. Deletes are sent only once every set
/// was acknowledged.
pub fn batches(p: SwitchPlan) -> Vec<Batch> {
    // The plan is taken apart, not copied: after a link change it holds thousands of entries.
    let mut out = Vec::new();
    if !p.config_set.is_empty() {
        let mut set = p.config_set;
        set.sort_by_key(|c| c.rank());
        out.push(Batch::Config {
            set,
            del: Vec::new(),
        });
    }
    let mut sets: BTreeMap<Stage, Vec<(String, FieldValues)>> = BTreeMap::new();
    let mut replace: BTreeMap<Stage, BTreeSet<String>> = BTreeMap::new();
    let n = p.add.len() + p.modify.len();
    // The stages holding an add (decides whether the sets may go as one batch).
    let add_stages: BTreeSet<Stage> = p.add.iter().map(|c| c.stage).collect();
    for c in p.add.into_iter().chain(p.modify) {
        // A plan's change carries what the switch has under its key (nothing for an add): no
        // lookup in the installed state, which after a link change is cold in memory.
        if let Some(old) = &c.old
            && old
                .iter()
                .any(|(f, _)| !c.fields.iter().any(|(g, _)| g == f))
        {
            replace.entry(c.stage).or_default().insert(c.key.clone());
        }
        sets.entry(c.stage)
            .or_insert_with(|| Vec::with_capacity(n))
            .push((c.key, c.fields));
    }
    let mut dels: BTreeMap<Stage, Vec<(String, FieldValues)>> = BTreeMap::new();
    for c in p.delete {
        dels.entry(c.stage).or_default().push((c.key, Vec::new()));
    }
    let sets: Vec<(Stage, Vec<(String, FieldValues)>)> = sets.into_iter().collect();
    let adds_before_last = sets
        .last()
        .is_some_and(|(last, _)| add_stages.iter().any(|s| s < last));
    push_stages(&mut out, sets, &mut replace, false, !adds_before_last);
    push_stages(
        &mut out,
        dels.into_iter().rev().collect(),
        &mut replace,
        true,
        true,
    );
    if !p.config_delete.is_empty() {
        out.push(Batch::Config {
            set: Vec::new(),
            del: p.config_delete,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn answers_and_error_kinds_serialize_as_sonic_and_weft_apply_write_them() {
        let a = Answer {
            key: "K".into(),
            status: AnswerStatus::Code(StatusCode::InvalidParam),
            message: "m".into(),
        };
        assert_eq!(
            serde_json::to_value(&a).expect("json"),
            json!({"key": "K", "status": "SWSS_RC_INVALID_PARAM", "message": "m"})
        );
        let s = |st: AnswerStatus| serde_json::to_value(st).expect("json");
        assert_eq!(s(SUCCESS), json!("SWSS_RC_SUCCESS"));
        assert_eq!(s(TIMEOUT), json!("TIMEOUT"));
        assert_eq!(s(UNANSWERED), json!("UNANSWERED"));
        assert_eq!(TIMEOUT.to_string(), "TIMEOUT");
        let k = |k: ErrorKind| serde_json::to_value(k).expect("json");
        assert_eq!(k(ErrorKind::Unreachable), json!("unreachable"));
        assert_eq!(k(ErrorKind::NotReady), json!("not-ready"));
        assert_eq!(k(ErrorKind::Invalid), json!("invalid"));
    }

    #[test]
    fn only_success_and_unwaited_answers_count_as_taken() {
        let with = |status| Answer {
            key: "K".into(),
            status,
            message: String::new(),
        };
        assert!(with(SUCCESS).is_ok());
        assert!(with(UNANSWERED).is_ok());
        assert!(!with(TIMEOUT).is_ok());
        assert!(!with(AnswerStatus::Code(StatusCode::Unknown)).is_ok());
    }
}
