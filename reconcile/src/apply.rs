//! `weft apply`: one pass of the reconciler's core over every switch.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use weft_p4rt::P4Info;
use weft_topology::{LinkIdx, Topology};

use crate::core::{Core, CoreConfig, Input, Output, SwitchResult, SwitchState};
use crate::io::{Clock, ExecOptions, Executor};

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
    core.results()
}

/// Sleeps until `at`, or for ever.
pub async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
