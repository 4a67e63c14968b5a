//! `weft plan FILE` and `weft apply FILE|PLAN.json`: the options, the output (the plan, the
//! progress, the results table) and the exit status; planning, the plan file and the passes
//! are `weft_reconcile`'s (`planning`, `planfile`, `passes`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use weft_compiler::down::links_down;
use weft_reconcile::apply::Progress;
use weft_reconcile::core::{ErrorKind, SwitchResult, SwitchState, TIMEOUT};
use weft_reconcile::history::{Applied, History, converged_digests, drifted};
use weft_reconcile::lock::{FabricLock, LockOptions};
use weft_reconcile::passes::{ApplyRequest, PassEvent, Passes, apply_passes};
use weft_reconcile::planfile::{PlanFile, PlanIntent, read_plan_file};
use weft_reconcile::planning::{Format, PlanRequest, write_plan};
use weft_topology::{SwitchIdx, Topology};

use super::Outcome;
use super::intent::{label, load_valid_as, print_diagnostics, read_text};
use crate::args::{OutputFormat, Targets, TransportArg, parse_duration};

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Links to assume down, by either end (SWITCH:PORT), comma separated or repeated.
    #[arg(long, value_name = "SWITCH:PORT")]
    pub down: Vec<String>,
    /// Do not read the switches' DBs; compare against empty.
    #[arg(long)]
    pub offline: bool,
    /// List every changed key, with old → new fields of modifications.
    #[arg(long, short)]
    pub verbose: bool,
    /// text, json or yaml: the plan on standard output (README, "Plan JSON").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    /// Also write the plan as a plan file (JSON with the intent and every switch's installed
    /// digest) for `weft apply PLAN.json`.
    #[arg(long = "out", short = 'o', value_name = "PLAN.json")]
    pub out: Option<PathBuf>,
    /// Exit 0 when nothing would change, 3 when something would, 1 on failure.
    #[arg(long)]
    pub detailed_exitcode: bool,
    #[command(flatten)]
    pub targets: Targets,
}

#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// The intent file, or a plan file written by `weft plan -o`.
    #[arg(value_name = "FILE|PLAN.json")]
    pub file: String,
    /// Links to take as down, by either end (SWITCH:PORT), comma separated or repeated.
    #[arg(long, value_name = "SWITCH:PORT")]
    pub down: Vec<String>,
    /// Print the plan instead of writing it.
    #[arg(long)]
    pub dry_run: bool,
    /// Write without waiting for the switches to answer (no plugin running, e.g. without BMv2).
    #[arg(long)]
    pub no_wait: bool,
    /// How long to wait for a switch to answer one stage of entries.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// How long to retry a switch whose DB is unreachable or whose plugin is not in sync.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub retry: Duration,
    /// text, json or yaml (`summary`, `canaries`, `switches`; README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub targets: Targets,
    /// Switches read and written at once.
    #[arg(long, default_value = "64", value_name = "N")]
    pub parallelism: usize,
    /// First apply to N switches (one per role, then a second per role, ...), verify that
    /// each answered everything, its plugin runs and a re-read finds nothing to change; only
    /// then the rest. Verifying needs the answers: not with --no-wait.
    #[arg(long, value_name = "N", conflicts_with = "no_wait")]
    pub canary: Option<usize>,
    /// Apply again the last converged apply before the latest one (the fabric's history in
    /// --state-dir), refused when the fabric changed since the latest one. FILE names the
    /// fabric.
    #[arg(long, conflicts_with_all = ["dry_run", "down"])]
    pub previous: bool,
    /// Where converged applies are kept for --previous [default: /var/lib/weft/<fabric>].
    #[arg(long, value_name = "DIR", env = "WEFT_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Take the fabric's lock even if another weft holds it (that one stops at its next
    /// refresh).
    #[arg(long)]
    pub steal: bool,
    /// Write every switch's P4RT entries over this transport, whatever the intent says: zmq
    /// puts an endpoint the intent does not name beside the switch's DB socket (where
    /// `weft testbed up --transport zmq` starts the plugins' ZMQ servers); redis is the
    /// fallback. [default: what the intent says, else redis]
    #[arg(long, value_enum, value_name = "TRANSPORT")]
    pub transport: Option<TransportArg>,
}

impl ApplyArgs {
    /// How long to wait for answers; `None` with `--no-wait`.
    fn answer_timeout(&self) -> Option<Duration> {
        (!self.no_wait).then_some(self.timeout)
    }
}

fn format(o: OutputFormat) -> Format {
    if o.structured() {
        Format::Json
    } else {
        Format::Text
    }
}

/// The envelope's fields before a streamed plan's own (`weft plan --output json`).
fn json_lead() -> String {
    format!(
        "\"version\":{},\"command\":{},\"error\":null,",
        crate::report::VERSION,
        serde_json::Value::from(crate::report::command())
    )
}

/// Writes a plan (text, JSON, or YAML converted from the JSON) on standard output.
async fn write_plan_out(
    t: &Topology,
    output: OutputFormat,
    req: PlanRequest<'_>,
) -> anyhow::Result<weft_reconcile::planning::PlanStats> {
    if output == OutputFormat::Yaml {
        let mut buf = Vec::new();
        let stats = write_plan(t, req, &mut buf).await?;
        let v: serde_json::Value = serde_json::from_slice(&buf)?;
        crate::out!("{}", crate::report::render(output, &v)?);
        return Ok(stats);
    }
    let mut out = std::io::BufWriter::with_capacity(1 << 20, crate::out::stdout());
    let stats = write_plan(t, req, &mut out).await?;
    out.flush()?;
    Ok(stats)
}

pub async fn run_plan(a: &PlanArgs) -> anyhow::Result<Outcome> {
    let file = a.file.as_str();
    let Some(t) = load_valid_as(file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let selection = a.targets.select(&t)?;
    let down = links_down(&t, &a.down)?;
    let intent = match &a.out {
        Some(_) => Some(PlanIntent::new(label(file), read_text(file)?)),
        None => None,
    };
    let mut plan_file = match &a.out {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let lead = json_lead();
    let stats = write_plan_out(
        &t,
        a.output,
        PlanRequest {
            down: &down,
            offline: a.offline,
            format: format(a.output),
            verbose: a.verbose,
            selection: &selection,
            file: match (&mut plan_file, &intent) {
                (Some(f), Some(i)) => Some((f as &mut dyn Write, i, &a.down)),
                _ => None,
            },
            json_lead: &lead,
        },
    )
    .await?;
    if let Some(p) = &a.out {
        crate::infoln!(
            "weft: plan written to {}; apply exactly it with `weft apply {}`",
            p.display(),
            p.display()
        );
    }
    if stats.untrusted > 0 {
        crate::warnln!(
            "weft: {} switch(es) could not be read or their plugin is not in sync: their plan compares against what is shown in `installed state`",
            stats.untrusted
        );
        return Ok(Outcome::Failed);
    }
    Ok(if a.detailed_exitcode && stats.changed > 0 {
        Outcome::NotYet
    } else {
        Outcome::Ok
    })
}

/// Progress on standard error: a bar on a terminal; otherwise one line per switch when its
/// state first becomes a problem, and when it is done.
fn progress_reporter(total: usize) -> Progress {
    if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(total as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} switches")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix("applying");
        let seen = std::sync::Mutex::new(BTreeSet::new());
        Arc::new(move |sw: &str, st: &SwitchState| {
            if matches!(
                st,
                SwitchState::Converged | SwitchState::Failed { .. } | SwitchState::Refused { .. }
            ) && let Ok(mut s) = seen.lock()
                && s.insert(sw.to_string())
            {
                bar.inc(1);
            }
        })
    } else {
        // Backoff changes the state on every retry; say each kind of trouble once.
        let said = std::sync::Mutex::new(BTreeMap::<String, &'static str>::new());
        Arc::new(move |sw: &str, st: &SwitchState| {
            let (kind, line) = match st {
                SwitchState::Unreachable { reason, .. } => (
                    "unreachable",
                    format!("{sw}: unreachable ({reason}); retrying"),
                ),
                SwitchState::NotReady { reason, .. } => {
                    ("not-ready", format!("{sw}: not ready ({reason}); retrying"))
                }
                _ => return,
            };
            if let Ok(mut s) = said.lock()
                && s.insert(sw.to_string(), kind) != Some(kind)
            {
                crate::warnln!("{line}");
            }
        })
    }
}

/// What the passes say between passes, on standard error.
fn say(e: PassEvent<'_>) {
    match e {
        PassEvent::Stale { file, switches } => {
            crate::errln!("weft: {file} is stale; nothing was written. Make a new plan:");
            for s in switches {
                crate::errln!("  {s}");
            }
        }
        PassEvent::Canaries(names) => crate::infoln!("canaries: {}", names.join(", ")),
        PassEvent::CanaryFailed { others, problems } => {
            crate::errln!(
                "weft: canary check failed; the other {others} switch(es) were not written:"
            );
            for p in problems {
                crate::errln!("  {p}");
            }
        }
        PassEvent::CanariesVerified => {
            crate::infoln!("canaries verified: answered, plugin running, nothing left to plan")
        }
        PassEvent::LockLost(e) => crate::errln!(
            "weft: {e}; stopped writing (what was written is read back by the next plan)"
        ),
    }
}

/// The results' table: one line per switch, then what failed of it.
pub fn print_results(
    results: &[SwitchResult],
    answer_timeout: Option<Duration>,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    let mut ok = true;
    writeln!(
        out,
        "{:<20} {:>8} {:>8} {:>7} {:>8} {:>8}  result",
        "switch", "written", "config", "failed", "not sent", "ms"
    )?;
    for r in results {
        let status = match (&r.error, r.failed.is_empty()) {
            (Some(e), _) => match r.error_kind {
                Some(ErrorKind::Unreachable) => format!("UNREACHABLE: {e}"),
                Some(ErrorKind::NotReady) => format!("NOT READY: {e}"),
                _ => format!("FAILED: {e}"),
            },
            // Nothing answered: written is all that is known.
            (None, true) if r.unanswered > 0 => "written, not answered (--no-wait)".to_string(),
            (None, true) => "ok".to_string(),
            (None, false) => "FAILED".to_string(),
        };
        let status = crate::style::state(&status);
        ok &= r.ok();
        writeln!(
            out,
            "{:<20} {:>8} {:>8} {:>7} {:>8} {:>8}  {status}",
            r.switch,
            r.written,
            r.config_written,
            r.failed.len(),
            r.not_sent,
            r.millis
        )?;
        print_failures(r, answer_timeout, out)?;
    }
    if results
        .iter()
        .any(|r| r.error_kind == Some(ErrorKind::NotReady))
    {
        writeln!(
            out,
            "hint: a switch whose plugin is not running (primary and synced) cannot answer: start its weft-plugin, or write without waiting with --no-wait"
        )?;
    }
    Ok(ok)
}

/// A switch's entries not answered, refused and not sent.
fn print_failures(
    r: &SwitchResult,
    answer_timeout: Option<Duration>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if r.unanswered > 0 {
        writeln!(
            out,
            "    {} entries written without waiting for an answer (--no-wait)",
            r.unanswered
        )?;
    }
    // Unanswered entries are one fact, not one line each.
    let (timed_out, refused): (Vec<_>, Vec<_>) = r.failed.iter().partition(|f| f.status == TIMEOUT);
    if !timed_out.is_empty() {
        writeln!(
            out,
            "    {} entries not answered{} (is the switch's plugin running?), e.g. {}",
            timed_out.len(),
            answer_timeout.map_or(String::new(), |d| format!(
                " within {}",
                weft_observe::human_duration(d)
            )),
            timed_out[0].key
        )?;
    }
    for f in refused.iter().take(20) {
        writeln!(out, "    {} {}: {}", f.status, f.key, f.message)?;
    }
    if refused.len() > 20 {
        writeln!(out, "    ... and {} more refused", refused.len() - 20)?;
    }
    if r.not_sent > 0 {
        writeln!(
            out,
            "    {} entries not sent: a stage before them failed (make before break)",
            r.not_sent
        )?;
    }
    Ok(())
}

/// The results as text (the table) or a document (`summary`, `canaries`, `switches`, and in
/// `error` why the apply stopped before it was done: the lock, a stale plan, a failed canary).
fn report(
    fabric: &str,
    results: &[SwitchResult],
    canaries: &[String],
    error: Option<String>,
    a: &ApplyArgs,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    Ok(match a.output {
        OutputFormat::Text => {
            if results.is_empty() {
                true
            } else {
                print_results(results, a.answer_timeout(), out)?
            }
        }
        o => {
            let summary: BTreeMap<&str, usize> = [
                ("switches", results.len()),
                ("ok", results.iter().filter(|r| r.ok()).count()),
                ("written", results.iter().map(|r| r.written).sum()),
                ("failed", results.iter().map(|r| r.failed.len()).sum()),
                ("not_sent", results.iter().map(|r| r.not_sent).sum()),
            ]
            .into();
            let body = serde_json::json!({
                "summary": summary,
                "canaries": canaries,
                "switches": results,
            });
            let fabric = Some(fabric);
            match error {
                None => crate::report::emit(o, fabric, &body)?,
                Some(e) => crate::report::emit_error(
                    o,
                    fabric,
                    &crate::report::ErrorDoc {
                        kind: "failure",
                        message: e,
                        causes: Vec::new(),
                        errors: None,
                    },
                    body,
                )?,
            }
            results.iter().all(SwitchResult::ok)
        }
    })
}

/// What an apply writes: the intent (and its text, kept if the apply converges), the links it
/// takes down and the switches it selects.
struct ToApply {
    t: Topology,
    intent: PlanIntent,
    down: Vec<String>,
    targets: Targets,
}

/// Warns when the intent file a plan was made from is not what it was then: the plan applies
/// its own copy, which may no longer be what the operator means.
fn warn_if_intent_changed(p: &PlanFile) {
    let now = std::fs::read_to_string(&p.intent.file);
    match now {
        Ok(text) if weft_reconcile::planfile::text_digest(&text) == p.intent.digest => {}
        Ok(_) => crate::warnln!(
            "weft: warning: {} changed since this plan was made; the plan applies the intent as it was then (make a new plan to apply the file as it is now)",
            p.intent.file
        ),
        Err(e) => crate::warnln!(
            "weft: warning: {} cannot be read now ({e}); the plan applies the intent as it was when the plan was made",
            p.intent.file
        ),
    }
}

/// The intent to apply: a plan file's own (which fixes `--down` and the selection), or the
/// intent file.
fn intent_of(a: &ApplyArgs, plan_file: Option<&PlanFile>) -> anyhow::Result<Option<ToApply>> {
    let file = &a.file;
    let Some(p) = plan_file else {
        let Some(t) = load_valid_as(file, a.output)? else {
            return Ok(None);
        };
        return Ok(Some(ToApply {
            t,
            intent: PlanIntent::new(label(file), read_text(file)?),
            down: a.down.clone(),
            targets: a.targets.clone(),
        }));
    };
    if !a.down.is_empty() || !a.targets.switches.is_empty() || !a.targets.roles.is_empty() {
        bail!(
            "{file} is a plan file: it fixes --down, --switch and --role (make a new plan to change them)"
        );
    }
    if p.offline {
        bail!(
            "{file} was made with --offline: it says nothing about what the switches hold; make a plan without --offline"
        );
    }
    warn_if_intent_changed(p);
    let targets = Targets {
        switches: p.targets.clone().unwrap_or_default(),
        roles: a.targets.roles.clone(),
    };
    Ok(recorded(&p.intent, a.output)?.map(|t| ToApply {
        t,
        intent: p.intent.clone(),
        down: p.down.clone(),
        targets,
    }))
}

/// The topology of an intent kept in a plan file or a record.
fn recorded(i: &PlanIntent, output: OutputFormat) -> anyhow::Result<Option<Topology>> {
    match weft_topology::load_str(&i.text, &i.file) {
        Ok(t) => Ok(Some(t)),
        Err(weft_topology::LoadError::Invalid(d)) => {
            print_diagnostics(&d);
            if output.structured() {
                crate::report::emit_error(
                    output,
                    None,
                    &crate::report::ErrorDoc {
                        kind: "invalid-intent",
                        message: format!("the intent kept from {} is invalid", i.file),
                        causes: Vec::new(),
                        errors: None,
                    },
                    serde_json::Value::Null,
                )?;
            }
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The fabric's history: `--state-dir`, else its default directory.
fn history(a: &ApplyArgs, fabric: &str) -> History {
    History::new(
        a.state_dir
            .clone()
            .unwrap_or_else(|| weft_reconcile::history::default_dir(fabric)),
    )
}

/// `--previous`: the converged apply before the latest, if the fabric still holds what the
/// latest left.
async fn previous(a: &ApplyArgs) -> anyhow::Result<Option<ToApply>> {
    let Some(cur) = load_valid_as(&a.file, a.output)? else {
        return Ok(None);
    };
    let h = history(a, &cur.name);
    let (last, before) = h.last_two(&cur.name)?;
    let Some(tl) = recorded(&last.intent, a.output)? else {
        return Ok(None);
    };
    let drift = drifted(&tl, &last).await;
    if !drift.is_empty() {
        for d in &drift {
            crate::errln!("  {d}");
        }
        bail!(
            "fabric {} changed since its last converged apply ({}); not rolling back over changes nobody recorded: make a plan and apply what you mean",
            cur.name,
            weft_reconcile::lock::ago(last.applied_ms)
        );
    }
    crate::infoln!(
        "weft: rolling fabric {} back to its apply of {} ({}, intent digest {})",
        cur.name,
        weft_reconcile::lock::ago(before.applied_ms),
        before.intent.file,
        before.intent.digest
    );
    let Some(t) = recorded(&before.intent, a.output)? else {
        return Ok(None);
    };
    Ok(Some(ToApply {
        t,
        intent: before.intent.clone(),
        down: before.down.clone(),
        targets: Targets {
            switches: before.targets.clone().unwrap_or_default(),
            roles: Vec::new(),
        },
    }))
}

/// Keeps a converged apply for `--previous` (not one made without waiting for answers, nor one
/// whose switches do not all run their plugin in sync). A history that cannot be written is
/// said, not fatal: the fabric was applied.
async fn remember(a: &ApplyArgs, x: &ToApply, all: &BTreeSet<SwitchIdx>) {
    if a.no_wait {
        return;
    }
    let Some(switches) = converged_digests(&x.t, all).await else {
        return;
    };
    let h = history(a, &x.t.name);
    let rec = Applied {
        weft_applied: weft_reconcile::history::APPLIED_VERSION,
        fabric: x.t.name.clone(),
        applied_ms: weft_observe::now_ms(),
        intent: x.intent.clone(),
        down: x.down.clone(),
        targets: (!x.targets.switches.is_empty() || !x.targets.roles.is_empty())
            .then(|| all.iter().map(|&i| x.t.switches[i].name.clone()).collect()),
        switches,
    };
    if let Err(e) = h.record(&rec) {
        crate::warnln!(
            "weft: warning: this apply is not kept for `weft apply --previous`: {}",
            crate::report::one_line(&e.into())
        );
    }
}

/// `apply --dry-run`: the plan, as `weft plan` prints it.
async fn dry_run(a: &ApplyArgs, x: &ToApply) -> anyhow::Result<Outcome> {
    let selection = x.targets.select(&x.t)?;
    let down = links_down(&x.t, &x.down)?;
    let lead = json_lead();
    let stats = write_plan_out(
        &x.t,
        a.output,
        PlanRequest {
            down: &down,
            offline: false,
            format: format(a.output),
            verbose: false,
            selection: &selection,
            file: None,
            json_lead: &lead,
        },
    )
    .await?;
    Ok(if stats.untrusted > 0 {
        Outcome::Failed
    } else {
        Outcome::Ok
    })
}

pub async fn run_apply(a: &ApplyArgs) -> anyhow::Result<Outcome> {
    let file = a.file.as_str();
    let plan_file = if a.previous || file == "-" {
        None
    } else {
        read_plan_file(file)?
    };
    let x = if a.previous {
        previous(a).await?
    } else {
        intent_of(a, plan_file.as_ref())?
    };
    let Some(mut x) = x else {
        return Ok(Outcome::Invalid);
    };
    // The transport is an edge: it changes how entries travel, not which, so a plan file or
    // the history's record applies over either.
    TransportArg::apply(a.transport, &mut x.t)?;
    if a.dry_run {
        return dry_run(a, &x).await;
    }
    let t = &x.t;
    let selection = x.targets.select(t)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, crate::out::stdout());
    let down = links_down(t, &x.down)?;
    let all: BTreeSet<SwitchIdx> = weft_reconcile::targets::chosen(t, &selection);
    let lock =
        match FabricLock::acquire(t, Some(&all), LockOptions::new("weft apply", a.steal)).await {
            Ok(l) => l,
            Err(e) => {
                crate::errln!("weft: {e}");
                report(&t.name, &[], &[], Some(e.to_string()), a, &mut out)?;
                return Ok(Outcome::Failed);
            }
        };
    let req = ApplyRequest {
        file,
        plan_file: plan_file.as_ref(),
        down,
        answer_timeout: a.answer_timeout(),
        retry_for: a.retry,
        parallelism: a.parallelism,
        canary: a.canary,
    };
    let result = apply_passes(t, &req, &all, &lock, &progress_reporter, &say).await;
    lock.release().await;
    let (results, canaries, error) = match result? {
        Passes::Done { results, canaries } => (results, canaries, None),
        Passes::Refused {
            error,
            results,
            canaries,
        } => (results, canaries, Some(error)),
    };
    let ok = report(&t.name, &results, &canaries, error.clone(), a, &mut out)?;
    out.flush()?;
    if ok && error.is_none() {
        remember(a, &x, &all).await;
        Ok(Outcome::Ok)
    } else {
        Ok(Outcome::Failed)
    }
}
