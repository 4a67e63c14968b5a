//! `weft plan FILE` and `weft apply FILE`.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use weft_topology::Topology;

use super::{Outcome, OutputFormat, load_valid};
use weft_compiler::{LinkState, compile, p4map};
use weft_reconcile::apply::{self, Progress, SwitchResult};
use weft_reconcile::plan::{self, Installed, Plan};

/// Parses `--down` port references into the links they name.
pub fn links_down(t: &Topology, down: &[String]) -> anyhow::Result<LinkState> {
    let mut ls = LinkState::all_up(t);
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
            weft_topology::Peer::Switch { link } => ls.set_down(link, true),
            _ => bail!("--down {d}: that port has no link to another switch"),
        }
    }
    Ok(ls)
}

/// Compiles and compares with every switch's installed state (`offline`: against empty).
pub async fn make_plan(t: &Topology, down: &[String], offline: bool) -> anyhow::Result<Plan> {
    let ls = links_down(t, down)?;
    let d = compile(t, &ls);
    let info = p4map::pipeline_p4info().context("the pipeline's P4Info")?;
    let mut installed: BTreeMap<String, Installed> = if offline {
        BTreeMap::new()
    } else {
        apply::read_all(
            t.switches
                .iter()
                .map(|s| (s.name.clone(), s.db.clone()))
                .collect(),
        )
        .await
    };
    let p = plan::plan(t, &d, &info, |name| {
        installed.remove(name).unwrap_or_else(|| Installed {
            source: "empty: not read (--offline)".into(),
            ..Installed::default()
        })
    })?;
    Ok(p)
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
    let p = make_plan(&t, down, offline).await?;
    match output {
        OutputFormat::Text => print!("{}", plan::render(&p, verbose)),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&p)?),
    }
    Ok(Outcome::Ok)
}

fn progress_reporter() -> Progress {
    if std::io::stderr().is_terminal() {
        let multi = indicatif::MultiProgress::new();
        let bars: std::sync::Mutex<BTreeMap<String, indicatif::ProgressBar>> =
            std::sync::Mutex::new(BTreeMap::new());
        let style = indicatif::ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
        Arc::new(move |sw: &str, done: usize, total: usize| {
            if let Ok(mut b) = bars.lock() {
                let bar = b.entry(sw.to_string()).or_insert_with(|| {
                    let pb = multi.add(indicatif::ProgressBar::new(total as u64));
                    pb.set_style(style.clone());
                    pb.set_prefix(sw.to_string());
                    pb
                });
                bar.set_position(done as u64);
            }
        })
    } else {
        Arc::new(|sw: &str, done: usize, total: usize| {
            eprintln!("{sw}: {done}/{total} entries answered")
        })
    }
}

pub fn print_results(results: &[SwitchResult]) -> bool {
    let mut ok = true;
    println!(
        "{:<20} {:>8} {:>8} {:>7} {:>8}  result",
        "switch", "written", "config", "failed", "ms"
    );
    for r in results {
        let status = match (&r.error, r.failed.is_empty()) {
            (Some(e), _) => format!("UNREACHABLE: {e}"),
            (None, true) => "ok".to_string(),
            (None, false) => "FAILED".to_string(),
        };
        ok &= r.ok();
        println!(
            "{:<20} {:>8} {:>8} {:>7} {:>8}  {status}",
            r.switch,
            r.written,
            r.config_written,
            r.failed.len(),
            r.millis
        );
        if r.unanswered > 0 {
            println!(
                "    {} entries written without waiting for an answer (--no-wait)",
                r.unanswered
            );
        }
        for f in r.failed.iter().take(20) {
            println!("    {} {}: {}", f.status, f.key, f.message);
        }
        if r.failed.len() > 20 {
            println!("    ... and {} more", r.failed.len() - 20);
        }
    }
    ok
}

pub async fn run_apply(
    file: &str,
    down: &[String],
    dry_run: bool,
    timeout: Option<Duration>,
    output: OutputFormat,
) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid(file)? else {
        return Ok(Outcome::Invalid);
    };
    let p = make_plan(&t, down, false).await?;
    if dry_run {
        match output {
            OutputFormat::Text => print!("{}", plan::render(&p, false)),
            OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&p)?),
        }
        return Ok(Outcome::Ok);
    }
    let results = apply::apply_all(p.switches, timeout, progress_reporter()).await;
    let ok = match output {
        OutputFormat::Text => print_results(&results),
        OutputFormat::Json => {
            println!("{}", serde_json::to_string_pretty(&results)?);
            results.iter().all(SwitchResult::ok)
        }
    };
    if ok {
        Ok(Outcome::Ok)
    } else {
        Ok(Outcome::Failed)
    }
}
