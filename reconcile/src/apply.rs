//! `weft apply`: one pass of the reconciler's core over every switch.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use weft_p4rt::P4Info;
use weft_topology::{LinkIdx, SwitchIdx, Topology};

use crate::core::{Core, CoreConfig, Input, Output, SwitchResult, SwitchState};
use crate::io::{Clock, ExecOptions, Executor};
use crate::lock::{FabricLock, LockError};

#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// How long to wait for a switch to answer one stage; `None`: write without waiting.
    pub answer_timeout: Option<Duration>,
    /// How long an unreachable switch, or one whose plugin is not in sync, is retried.
    pub retry_for: Duration,
    /// Switches written at once.
    pub parallel: usize,
    /// Links taken as down (`--down`).
    pub down: BTreeSet<LinkIdx>,
    /// Only these switches are read and written (`--switch`, `--role`, canaries); `None`: all.
    pub targets: Option<BTreeSet<SwitchIdx>>,
}

/// Reports a switch's state changes while the pass runs.
pub type Progress = Arc<dyn Fn(&str, &SwitchState) + Send + Sync>;

/// Converges every switch once; returns what each switch took, refused or never got.
pub async fn apply(
    t: &Topology,
    info: Arc<P4Info>,
    opts: ApplyOptions,
    progress: Progress,
) -> Vec<SwitchResult> {
    let clock = Clock::start();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let exec = Executor::new(
        t,
        ExecOptions {
            answer_timeout: opts.answer_timeout,
            parallel: opts.parallel,
            keep_connections: false,
        },
        clock,
        tx,
    );
    let mut cfg = CoreConfig::once(opts.retry_for.as_nanos() as u64);
    cfg.require_plugin = opts.answer_timeout.is_some();
    cfg.forced_down = opts.down.clone();
    cfg.targets = opts.targets.clone();
    let mut core = Core::new(t, info, cfg);
    let mut outs = core.step(clock.now(), Input::Start);
    loop {
        for o in &outs {
            exec.dispatch(o);
            if let Output::Switch { switch, state } = o {
                progress(&t.switches[*switch].name, state);
            }
        }
        if core.done() {
            break;
        }
        let wake = core.next_wake().map(|w| clock.instant(w));
        outs = tokio::select! {
            r = rx.recv() => match r {
                Some((_, input)) => core.step(clock.now(), input),
                None => break,
            },
            _ = sleep_until(wake) => core.step(clock.now(), Input::Tick),
        };
    }
    match &opts.targets {
        None => core.results(),
        Some(only) => core
            .results()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| only.contains(i))
            .map(|(_, r)| r)
            .collect(),
    }
}

/// One pass while `lock` is held: the lock is refreshed meanwhile, and a pass whose lock is
/// taken away (another weft with `--steal`) stops at once, with what was written unknown to
/// this pass (the next plan reads it back).
pub async fn apply_locked(
    t: &Topology,
    info: Arc<P4Info>,
    opts: ApplyOptions,
    progress: Progress,
    lock: &Arc<FabricLock>,
) -> Result<Vec<SwitchResult>, LockError> {
    tokio::select! {
        r = apply(t, info, opts, progress) => Ok(r),
        e = lock.clone().keep() => Err(e),
    }
}

/// Sleeps until `at`, or for ever.
pub async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
