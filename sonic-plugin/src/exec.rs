//! A plan written stage by stage, as a state machine: [`Run::next_write`] gives the next
//! stage's updates (one pipelined Write), [`Run::written`] takes what the switch did with them,
//! [`Run::finish`] says who failed and what their earlier stages did (what a rollback undoes).
//! No I/O: the caller writes, so the same run serves the daemon (BMv2 over P4Runtime), the
//! golden steps and the unit tests (an in-memory switch).
//!
//! ```text
//!   stage k: owners whose dependency failed in an earlier stage are refused unwritten,
//!            failed owners' updates skipped; the rest is one Write ──► per-update errors:
//!            the first per owner is its answer; an RPC error (switch gone) aborts the run
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use weft_p4rt::proto::p4::v1::Update;
use weft_p4rt::{Code, Error as P4Error};
use weft_sonic_db::StatusCode;

use crate::objects::{Plan, PlannedUpdate, Stage};

/// The switch could not be written at all (gone, not primary): resync after reconnecting.
#[derive(Debug, thiserror::Error)]
#[error("switch unavailable: {0}")]
pub struct SwitchLost(#[from] pub P4Error);

/// Maps a switch's per-update gRPC code to SONiC's status.
pub fn status_of(code: Code) -> StatusCode {
    match code {
        Code::InvalidArgument | Code::OutOfRange => StatusCode::InvalidParam,
        Code::NotFound => StatusCode::NotFound,
        Code::AlreadyExists => StatusCode::Exists,
        Code::ResourceExhausted => StatusCode::Full,
        Code::Unimplemented => StatusCode::Unimplemented,
        Code::FailedPrecondition => StatusCode::FailedPrecondition,
        Code::PermissionDenied => StatusCode::PermissionDenied,
        Code::Unavailable => StatusCode::Unavail,
        Code::DeadlineExceeded => StatusCode::DeadlineExceeded,
        Code::Internal => StatusCode::Internal,
        _ => StatusCode::Unknown,
    }
}

/// What the switch did with a plan.
#[derive(Debug)]
pub struct Executed<O> {
    /// The first failure per owner (its later stages were skipped).
    pub failed: HashMap<O, (StatusCode, String)>,
    /// The updates the switch took for the owners in `failed` (what a rollback undoes); the
    /// others' are not copied.
    pub done: Vec<PlannedUpdate<O>>,
    /// Updates sent.
    pub sent: u64,
}

/// The stage whose Write is out: which of its updates it holds.
#[derive(Debug)]
struct Out {
    stage: usize,
    /// Indices into the stage of the updates written, in the Write's order.
    todo: Vec<usize>,
}

/// A plan being written (see the module doc).
#[derive(Debug)]
pub struct Run<O> {
    stages: Vec<Stage<O>>,
    deps: HashMap<O, Vec<(O, StatusCode, String)>>,
    /// Stages whose whole update list went out: the updates live in the Arc the Write got.
    taken: Vec<Option<Arc<Vec<Update>>>>,
    next: usize,
    out: Option<Out>,
    failed: HashMap<O, (StatusCode, String)>,
    /// Updates not taken by the switch (skipped, or refused), by (stage, index): the rest of
    /// a failed owner's updates are what it did.
    not_done: HashSet<(usize, usize)>,
    sent: u64,
}

impl<O: Clone + Eq + std::hash::Hash> Run<O> {
    pub fn new(plan: Plan<O>) -> Self {
        let Plan { stages, deps } = plan;
        let stages: Vec<Stage<O>> = stages.into_values().collect();
        Run {
            taken: vec![None; stages.len()],
            stages,
            deps,
            next: 0,
            out: None,
            failed: HashMap::new(),
            not_done: HashSet::new(),
            sent: 0,
        }
    }

    /// Whether a Write of this run is out (its result not yet taken).
    pub fn writing(&self) -> bool {
        self.out.is_some()
    }

    /// The next stage's Write, or `None` when the plan is done. One at a time: call
    /// [`Run::written`] with its result first.
    pub fn next_write(&mut self) -> Option<Arc<Vec<Update>>> {
        debug_assert!(self.out.is_none(), "a Write of this run is out");
        while self.next < self.stages.len() {
            let s = self.next;
            self.next += 1;
            self.refuse_dependents(s);
            let stage = &mut self.stages[s];
            // Nobody failed yet (the usual case): the stage is written as planned.
            let skip =
                |i: usize| !self.failed.is_empty() && self.failed.contains_key(&stage.owners[i]);
            let todo: Vec<usize> = (0..stage.len()).filter(|i| !skip(*i)).collect();
            self.not_done
                .extend((0..stage.len()).filter(|i| skip(*i)).map(|i| (s, i)));
            if todo.is_empty() {
                continue;
            }
            let updates = if todo.len() == stage.len() {
                let all = Arc::new(std::mem::take(&mut stage.updates));
                self.taken[s] = Some(all.clone());
                all
            } else {
                Arc::new(todo.iter().map(|i| stage.updates[*i].clone()).collect())
            };
            self.sent += updates.len() as u64;
            self.out = Some(Out { stage: s, todo });
            return Some(updates);
        }
        None
    }

    /// An owner whose dependency failed in an earlier stage is refused, unwritten.
    fn refuse_dependents(&mut self, s: usize) {
        if self.deps.is_empty() {
            return;
        }
        for o in &self.stages[s].owners {
            if self.failed.contains_key(o) {
                continue;
            }
            let why = self
                .deps
                .get(o)
                .into_iter()
                .flatten()
                .find(|(d, _, _)| self.failed.contains_key(d));
            if let Some((_, status, msg)) = why {
                self.failed.insert(o.clone(), (*status, msg.clone()));
            }
        }
    }

    /// What the switch did with the Write [`Run::next_write`] gave: per-update errors are
    /// answers; any other error means the switch is gone (the run is over, nothing answered).
    pub fn written(&mut self, result: Result<(), P4Error>) -> Result<(), SwitchLost> {
        let Some(Out { stage: s, todo }) = self.out.take() else {
            return Ok(());
        };
        match result {
            Ok(()) => Ok(()),
            Err(P4Error::Write(we)) => {
                for e in we.failed {
                    let Some(&i) = todo.get(e.index) else {
                        continue;
                    };
                    self.not_done.insert((s, i));
                    self.failed
                        .entry(self.stages[s].owners[i].clone())
                        .or_insert_with(|| (status_of(e.code), e.to_string()));
                }
                Ok(())
            }
            Err(e) => Err(SwitchLost(e)),
        }
    }

    /// Who failed and what the switch took for them.
    pub fn finish(self) -> Executed<O> {
        let mut done = Vec::new();
        if !self.failed.is_empty() {
            for (s, stage) in self.stages.iter().enumerate() {
                let updates = self.taken[s].as_deref().unwrap_or(&stage.updates);
                for (i, o) in stage.owners.iter().enumerate() {
                    if self.failed.contains_key(o) && !self.not_done.contains(&(s, i)) {
                        done.push(PlannedUpdate {
                            key: stage.keys[i].clone(),
                            update: updates[i].clone(),
                            owner: o.clone(),
                        });
                    }
                }
            }
        }
        Executed {
            failed: self.failed,
            done,
            sent: self.sent,
        }
    }
}
