//! `weft diagnose FILE [--window 10s]`: every switch sampled over the window
//! (`weft_observe::diagnose`), the samples handed to the pure rules of `weft-diagnose`, the
//! findings printed ranked by confidence. Exit status 0 healthy (every switch judged, nothing
//! found), 3 findings, 1 a switch could not be judged (no current counters in two samples).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use weft_diagnose::{Finding, Thresholds, Window};
use weft_observe::diagnose::{Unreadable, fabric_mismatch, fabric_of, unknown};
use weft_observe::read::Unknown;
use weft_observe::source::{Source, watch};
use weft_topology::Topology;

use super::Outcome;
use super::intent::load_valid_as;
use crate::args::{OutputFormat, parse_duration};
use crate::outln;

#[derive(Args, Debug)]
pub struct DiagnoseArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// How long to watch the counters.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub window: Duration,
    /// Time between samples.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
    /// Write the samples (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Diagnose recorded samples instead of reading the switches.
    #[arg(long, value_name = "FILE", conflicts_with = "record")]
    pub replay: Option<PathBuf>,
    /// Also list findings below the reporting threshold (they do not change the exit status).
    #[arg(long)]
    pub all: bool,
    /// Where the counters come from: `db` (every switch's DBs) or `prometheus=http://HOST:PORT`
    /// (the plugins' metrics as a Prometheus scraping them holds them: the last WINDOW).
    #[arg(long, default_value = "db", value_name = "SOURCE")]
    pub source: Source,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    window_ms: u64,
    samples: usize,
    /// Every switch judged and nothing found.
    healthy: bool,
    findings: &'a [Finding],
    /// Switches the window could not judge (fewer than two samples with current counters).
    unknown: &'a [Unknown],
}

/// The window to judge: recorded (`--replay`, refused when it is of another fabric) or
/// sampled now; and why switches were not sampled.
async fn window(t: &Topology, a: &DiagnoseArgs) -> anyhow::Result<(Window, Unreadable)> {
    if let Some(p) = &a.replay {
        let text = std::fs::read_to_string(p)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))?;
        let w = serde_json::from_str::<Window>(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
        let differs = fabric_mismatch(&fabric_of(t), &w.fabric);
        if !differs.is_empty() {
            anyhow::bail!(
                "{} is a recording of another fabric than {}'s ({}); replay it with the intent it was recorded on",
                p.display(),
                t.name,
                differs.join("; ")
            );
        }
        return Ok((w, Unreadable::new()));
    }
    let (w, watched) = watch(t, &a.source, a.window, a.interval).await?;
    Ok((w, watched.unjudged))
}

fn print_text(t: &Topology, w: &Window, window_ms: u64, findings: &[Finding], unknown: &[Unknown]) {
    let over = format!(
        "over {:.1}s ({} samples of {} switches)",
        window_ms as f64 / 1000.0,
        w.samples.len(),
        t.switches.len()
    );
    match (findings.is_empty(), unknown.is_empty()) {
        (true, true) => outln!("healthy: nothing found {over}"),
        (true, false) => outln!(
            "{}: nothing found on the {} switch(es) judged {over}; {} switch(es) not judged:",
            crate::style::unknown("not healthy, not judged"),
            t.switches.len() - unknown.len(),
            unknown.len()
        ),
        (false, false) => outln!("{} switch(es) not judged {over}:", unknown.len()),
        (false, true) => {}
    }
    super::print_unknown(unknown);
    for (i, f) in findings.iter().enumerate() {
        outln!(
            "{}. {} {} (confidence {:.2})",
            i + 1,
            f.kind.as_str(),
            f.target,
            f.confidence
        );
        outln!("   {}", f.summary);
        for e in &f.evidence {
            outln!(
                "   evidence: {}{} {} +{} ({}/s)",
                e.switch,
                e.port
                    .as_deref()
                    .map(|p| format!(":{p}"))
                    .unwrap_or_default(),
                e.counter,
                e.delta,
                e.per_second
            );
        }
        if !f.victims.is_empty() {
            outln!("   affected: {}", weft_diagnose::summarize(&f.victims, 12));
        }
        outln!("   action: {}", f.action);
    }
}

pub async fn run(a: &DiagnoseArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let (w, errors) = window(&t, a).await?;
    let unknown = unknown(&fabric_of(&t), &w, &errors);
    if let Some(p) = &a.record {
        std::fs::write(p, serde_json::to_string(&w)? + "\n")
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?;
    }
    let th = Thresholds {
        loss_by_sample_time: a.replay.is_some() || a.source == Source::Db,
        ..Thresholds::default()
    };
    let findings = if a.all {
        weft_diagnose::all_findings(&w, &th)
    } else {
        weft_diagnose::diagnose(&w, &th)
    };
    let reported = findings
        .iter()
        .filter(|f| f.confidence >= th.report)
        .count();
    let window_ms = match (w.samples.first(), w.samples.last()) {
        (Some(f), Some(l)) => l.t_ms.saturating_sub(f.t_ms),
        _ => 0,
    };
    match a.output {
        o if o.structured() => crate::report::emit(
            o,
            Some(&t.name),
            &Report {
                window_ms,
                samples: w.samples.len(),
                healthy: reported == 0 && unknown.is_empty(),
                findings: &findings,
                unknown: &unknown,
            },
        )?,
        _ => print_text(&t, &w, window_ms, &findings, &unknown),
    }
    let answer = if reported == 0 {
        Outcome::Ok
    } else {
        Outcome::NotYet
    };
    Ok(super::verdict(&unknown, answer))
}
