//! `weft apply`'s passes while it holds the fabric's lock: a plan file checked against what
//! every switch holds now (refused, nothing written, when one changed since), the canaries
//! written and verified first (`--canary N`), then the rest.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use weft_compiler::p4map;
use weft_topology::{LinkIdx, SwitchIdx, Topology};

use crate::apply::{self, ApplyOptions, Progress};
use crate::canary;
use crate::core::SwitchResult;
use crate::lock::{FabricLock, LockError};
use crate::planfile::PlanFile;
use crate::planning::read_selected;

/// How to apply.
pub struct ApplyRequest<'a> {
    /// The file applied (an intent or a plan file), as given: named in messages.
    pub file: &'a str,
    /// The plan file's switches and digests, when `file` is one.
    pub plan_file: Option<&'a PlanFile>,
    pub down: BTreeSet<LinkIdx>,
    /// How long to wait for a switch to answer one stage; `None`: write without waiting.
    pub answer_timeout: Option<Duration>,
    /// How long an unreachable switch, or one whose plugin is not in sync, is retried.
    pub retry_for: Duration,
    /// Switches read and written at once.
    pub parallelism: usize,
    /// Switches written and verified first.
    pub canary: Option<usize>,
}

/// What the passes tell the operator as they go.
#[derive(Debug)]
pub enum PassEvent<'a> {
    /// The plan file no longer describes these switches (one line each, with why).
    Stale {
        file: &'a str,
        switches: &'a [String],
    },
    /// The canaries, about to be written.
    Canaries(&'a [String]),
    /// A canary failed its check: the other `others` switches are not written.
    CanaryFailed {
        others: usize,
        problems: &'a [String],
    },
    CanariesVerified,
    /// Another weft took the lock: writing stopped.
    LockLost(&'a LockError),
}

pub enum Passes {
    Done {
        results: Vec<SwitchResult>,
        canaries: Vec<String>,
    },
    /// Refused before anything was written, or stopped (the canaries failed, the lock was
    /// taken); what was written so far is in `results`.
    Refused {
        error: String,
        results: Vec<SwitchResult>,
        canaries: Vec<String>,
    },
}

/// Why the passes could not start.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("the pipeline's P4Info")]
    P4Info(#[source] weft_p4rt::Error),
}

/// Whether the plan file still describes the switches: each one's installed digest now equals
/// the one the plan was made against. Returns the switches that changed, with why.
pub async fn stale_switches(
    t: &Topology,
    p: &PlanFile,
    sel: &Option<BTreeSet<SwitchIdx>>,
) -> Vec<String> {
    let now = read_selected(t, sel, 64).await;
    let mut stale = Vec::new();
    for ps in &p.switches {
        let Some(si) = t.switch_index(&ps.name) else {
            stale.push(format!("{}: not in the plan's intent", ps.name));
            continue;
        };
        let d = now[si].digest();
        if d != ps.installed_digest {
            stale.push(format!(
                "{}: installed state changed since the plan (digest {} then, {} now; {})",
                ps.name,
                ps.installed_digest,
                d,
                now[si].describe()
            ));
        }
    }
    stale
}

/// The passes over `all` while `lock` is held. `progress(n)` reports on a pass over `n`
/// switches; `event` says what happens between passes.
pub async fn apply_passes(
    t: &Topology,
    req: &ApplyRequest<'_>,
    all: &BTreeSet<SwitchIdx>,
    lock: &Arc<FabricLock>,
    progress: &dyn Fn(usize) -> Progress,
    event: &dyn Fn(PassEvent<'_>),
) -> Result<Passes, PassError> {
    let sel = Some(all.clone());
    if let Some(p) = req.plan_file {
        let stale = stale_switches(t, p, &sel).await;
        if !stale.is_empty() {
            event(PassEvent::Stale {
                file: req.file,
                switches: &stale,
            });
            return Ok(Passes::Refused {
                error: format!("{} is stale: {}", req.file, stale.join("; ")),
                results: Vec::new(),
                canaries: Vec::new(),
            });
        }
    }
    let info = Arc::new(p4map::pipeline_p4info().map_err(PassError::P4Info)?);
    let opts = |targets: BTreeSet<SwitchIdx>| ApplyOptions {
        answer_timeout: req.answer_timeout,
        retry_for: req.retry_for,
        parallel: req.parallelism.max(1),
        down: req.down.clone(),
        targets: Some(targets),
    };
    let lock_lost = |e: LockError, results: Vec<SwitchResult>, canaries: Vec<String>| {
        event(PassEvent::LockLost(&e));
        Passes::Refused {
            error: e.to_string(),
            results,
            canaries,
        }
    };
    let mut results = Vec::new();
    let mut canary_names = Vec::new();
    let mut rest = all.clone();
    if let Some(n) = req.canary.filter(|&n| n > 0 && n < all.len()) {
        let canaries = canary::canaries(t, all, n);
        canary_names = canaries
            .iter()
            .map(|&i| t.switches[i].name.clone())
            .collect();
        event(PassEvent::Canaries(&canary_names));
        let pass = apply::apply_locked(
            t,
            info.clone(),
            opts(canaries.clone()),
            progress(canaries.len()),
            lock,
        );
        let r = match pass.await {
            Ok(r) => r,
            Err(e) => return Ok(lock_lost(e, Vec::new(), canary_names)),
        };
        let waited = req.answer_timeout.is_some();
        let problems = canary::verify(t, &info, &req.down, &canaries, &r, waited).await;
        if !problems.is_empty() {
            event(PassEvent::CanaryFailed {
                others: all.len() - canaries.len(),
                problems: &problems,
            });
            return Ok(Passes::Refused {
                error: format!("canary check failed: {}", problems.join("; ")),
                results: r,
                canaries: canary_names,
            });
        }
        event(PassEvent::CanariesVerified);
        rest = all.difference(&canaries).copied().collect();
        results.extend(r);
    }
    let pass = apply::apply_locked(t, info, opts(rest.clone()), progress(rest.len()), lock);
    match pass.await {
        Ok(r) => results.extend(r),
        Err(e) => return Ok(lock_lost(e, results, canary_names)),
    }
    let order: BTreeMap<&str, usize> = t
        .switches
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    results.sort_by_key(|r| order.get(r.switch.as_str()).copied().unwrap_or(usize::MAX));
    Ok(Passes::Done {
        results,
        canaries: canary_names,
    })
}
