//! `weft plan FILE` and `weft apply FILE`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use weft_compiler::{Compiler, LinkState, p4map};
use weft_reconcile::apply::{self, ApplyOptions, Progress};
use weft_reconcile::core::{SwitchResult, SwitchState};
use weft_reconcile::plan::{self, Installed};
use weft_topology::{LinkIdx, Topology};

use super::{Outcome, OutputFormat, load_valid};

/// Parses `--down` port references into the links they name.
pub fn links_down(t: &Topology, down: &[String]) -> anyhow::Result<BTreeSet<LinkIdx>> {
    let mut out = BTreeSet::new();
    for d in down
        .iter()
        .flat_map(|d| d.split(','))
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        let r: weft_topology::PortRef = d.parse().map_err(|e: String| anyhow::anyhow!(e))?;
        let sw = t
            .switch_index(&r.switch)
            .with_context(|| format!("--down {d}: no switch {}", r.switch))?;
        let pi = t.switches[sw]
            .port_index(&r.port)
            .with_context(|| format!("--down {d}: switch {} has no port {}", r.switch, r.port))?;
        match t.switches[sw].ports[pi].peer {
            weft_topology::Peer::Switch { link } => {
                out.insert(link);
            }
            _ => bail!("--down {d}: that port has no link to another switch"),
        }
    }
    Ok(out)
}

/// Link state with `down` taken down.
pub fn link_state(t: &Topology, down: &BTreeSet<LinkIdx>) -> LinkState {
    let mut ls = LinkState::all_up(t);
    for &l in down {
        ls.set_down(l, true);
    }
    ls
}

/// Compiles, reads what every switch has (unless `offline`), and writes the plan to `out` one
/// switch at a time, so a fabric of thousands of switches is never held whole in memory.
/// Returns (switches unreadable or not in sync, switches with changes).
pub async fn write_plan(
    t: &Topology,
    down: &[String],
    offline: bool,
    output: OutputFormat,
    verbose: bool,
    out: &mut dyn Write,
) -> anyhow::Result<(usize, usize)> {
    let down = links_down(t, down)?;
    let compiler = Compiler::new(t, link_state(t, &down));
    let info = p4map::pipeline_p4info().context("the pipeline's P4Info")?;
    let mut installed: Vec<Installed> = if offline {
        (0..t.switches.len())
            .map(|_| Installed::empty("not read (--offline)"))
            .collect()
    } else {
        weft_reconcile::io::read_all(t, 64).await
    };
    let mut notes: Vec<String> = compiler.notes();
    let links_down: Vec<String> = down
        .iter()
        .map(|&l| weft_reconcile::core::link_name(t, l))
        .collect();
    let mut untrusted = 0;
    let mut changed = 0;
    match output {
        OutputFormat::Text => {
            out.write_all(plan::render_header(&t.name, &links_down).as_bytes())?
        }
        OutputFormat::Json => {
            write!(
                out,
                "{{\"fabric\":{},\"links_down\":{},\"notes\":{},\"switches\":[",
                serde_json::to_string(&t.name)?,
                serde_json::to_string(&links_down)?,
                serde_json::to_string(&notes)?
            )?;
        }
    }
    let mut fallbacks = BTreeSet::new();
    let mut totals = (0, 0, 0);
    for (si, sw) in compiler.switches().iter().enumerate() {
        let desired = plan::desired_switch(t, &info, sw, si)?;
        let inst = std::mem::take(&mut installed[si]);
        if !offline && !inst.trusted() {
            untrusted += 1;
        }
        let views = match output {
            OutputFormat::Json => plan::Views::With,
            OutputFormat::Text => plan::Views::Without,
        };
        let mut p = plan::diff(t, si, sw, desired, &inst, &down, views);
        if output == OutputFormat::Json || verbose {
            // Readers and reviewers get rows in key order; the writers need no order.
            p.config_set
                .sort_by_cached_key(plan::ConfigChange::redis_key);
        }
        if !p.is_empty() {
            changed += 1;
        }
        totals.0 += p.counts.add;
        totals.1 += p.counts.modify;
        totals.2 += p.counts.delete;
        match output {
            OutputFormat::Text => {
                plan::fallbacks(sw, &mut fallbacks);
                out.write_all(plan::render_switch(&p, verbose).as_bytes())?;
            }
            OutputFormat::Json => {
                if si > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, &p)?;
            }
        }
    }
    match output {
        OutputFormat::Text => {
            notes.sort();
            out.write_all(
                plan::render_footer(t.switches.len(), totals, &fallbacks, &notes, verbose)
                    .as_bytes(),
            )?;
        }
        OutputFormat::Json => out.write_all(b"]}\n")?,
    }
    out.flush()?;
    Ok((untrusted, changed))
}

pub async fn run_plan(
    file: &str,
    down: &[String],
    offline: bool,
    output: OutputFormat,
    verbose: bool,
) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid(file)? else {
        return Ok(Outcome::Invalid);
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    let (untrusted, _) = write_plan(&t, down, offline, output, verbose, &mut out).await?;
    if untrusted > 0 {
        eprintln!(
            "weft: {untrusted} switch(es) could not be read or their plugin is not in sync: their plan compares against what is shown in `installed state`"
        );
        return Ok(Outcome::Failed);
    }
    Ok(Outcome::Ok)
}

fn progress_reporter(t: &Topology) -> Progress {
    let total = t.switches.len();
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
        Arc::new(|sw: &str, st: &SwitchState| match st {
            SwitchState::Unreachable { reason, .. } => {
                eprintln!("{sw}: unreachable ({reason}); retrying")
            }
            SwitchState::NotReady { reason, .. } => {
                eprintln!("{sw}: not ready ({reason}); retrying")
            }
            _ => {}
        })
    }
}

pub fn print_results(results: &[SwitchResult], out: &mut dyn Write) -> anyhow::Result<bool> {
    let mut ok = true;
    writeln!(
        out,
        "{:<20} {:>8} {:>8} {:>7} {:>8} {:>8}  result",
        "switch", "written", "config", "failed", "not sent", "ms"
    )?;
    for r in results {
        let status = match (&r.error, r.failed.is_empty()) {
            (Some(e), _) => match r.error_kind {
                Some("unreachable") => format!("UNREACHABLE: {e}"),
                Some("not-ready") => format!("NOT READY: {e}"),
                _ => format!("FAILED: {e}"),
            },
            (None, true) => "ok".to_string(),
            (None, false) => "FAILED".to_string(),
        };
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
        if r.unanswered > 0 {
            writeln!(
                out,
                "    {} entries written without waiting for an answer (--no-wait)",
                r.unanswered
            )?;
        }
        for f in r.failed.iter().take(20) {
            writeln!(out, "    {} {}: {}", f.status, f.key, f.message)?;
        }
        if r.failed.len() > 20 {
            writeln!(out, "    ... and {} more", r.failed.len() - 20)?;
        }
        if r.not_sent > 0 {
            writeln!(
                out,
                "    {} entries not sent: a stage before them failed (make before break)",
                r.not_sent
            )?;
        }
    }
    Ok(ok)
}

#[derive(Debug, Clone)]
pub struct ApplyArgs {
    pub down: Vec<String>,
    pub dry_run: bool,
    /// `None`: do not wait for answers.
    pub timeout: Option<Duration>,
    pub retry_for: Duration,
    pub output: OutputFormat,
}

pub async fn run_apply(file: &str, args: ApplyArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid(file)? else {
        return Ok(Outcome::Invalid);
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    if args.dry_run {
        let (untrusted, _) =
            write_plan(&t, &args.down, false, args.output, false, &mut out).await?;
        return Ok(if untrusted > 0 {
            Outcome::Failed
        } else {
            Outcome::Ok
        });
    }
    let down = links_down(&t, &args.down)?;
    let info = Arc::new(p4map::pipeline_p4info().context("the pipeline's P4Info")?);
    let results = apply::apply(
        &t,
        info,
        ApplyOptions {
            answer_timeout: args.timeout,
            retry_for: args.retry_for,
            parallel: 64,
            down,
        },
        progress_reporter(&t),
    )
    .await;
    let ok = match args.output {
        OutputFormat::Text => print_results(&results, &mut out)?,
        OutputFormat::Json => {
            let summary: BTreeMap<&str, usize> = [
                ("switches", results.len()),
                ("ok", results.iter().filter(|r| r.ok()).count()),
                ("written", results.iter().map(|r| r.written).sum()),
                ("failed", results.iter().map(|r| r.failed.len()).sum()),
            ]
            .into();
            serde_json::to_writer_pretty(
                &mut out,
                &serde_json::json!({ "summary": summary, "switches": results }),
            )?;
            writeln!(out)?;
            results.iter().all(SwitchResult::ok)
        }
    };
    out.flush()?;
    Ok(if ok { Outcome::Ok } else { Outcome::Failed })
}
