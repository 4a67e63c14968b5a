//! `weft trace FILE SRC DST`: postcards read and analysed by `weft_observe::trace` beside
//! the paths the compiled tables allow, printed.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use weft_compiler::check::allowed_paths;
use weft_observe::trace::{FlowFilter, TraceReport, analyse, parse_flow, read_postcards};

use super::Outcome;
use super::intent::load_valid_as;
use crate::args::{OutputFormat, parse_duration};
use crate::outln;

#[derive(Args, Debug)]
pub struct TraceArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// The sending host.
    pub src: String,
    /// The receiving host.
    pub dst: String,
    /// Only this flow: PROTO:SPORT:DPORT (udp, tcp or a number; * for any part).
    #[arg(long, value_name = "PROTO:SPORT:DPORT", value_parser = parse_flow, conflicts_with = "qp")]
    pub flow: Option<FlowFilter>,
    /// Only RoCE packets to this destination QP.
    #[arg(long, value_name = "N")]
    pub qp: Option<u32>,
    /// How far back to read postcards.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub since: Duration,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

pub async fn run(a: &TraceArgs) -> anyhow::Result<Outcome> {
    let file = &a.file;
    let Some(t) = load_valid_as(file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let host = |n: &str| {
        t.host_index(n).with_context(|| {
            let names: Vec<&str> = t.hosts.iter().map(|h| h.name.as_str()).collect();
            format!(
                "no host {n:?} in {file} (hosts: {})",
                names.iter().take(8).copied().collect::<Vec<_>>().join(", ")
            )
        })
    };
    let (s, d) = (host(&a.src)?, host(&a.dst)?);
    if s == d {
        bail!("source and destination are the same host");
    }
    let mut filter = a.flow.clone().unwrap_or_default();
    filter.qp = a.qp;
    let links = weft_compiler::LinkState::all_up(&t);
    let desired = weft_compiler::compile(&t, &links);
    let allowed = allowed_paths(&t, &desired, s, d, 256);
    let since_ms = weft_observe::now_ms().saturating_sub(a.since.as_millis() as u64);
    let (hops, unread) = read_postcards(&t, since_ms).await;
    let mut r = analyse(&t, s, d, &allowed, hops, &filter, a.since.as_secs_f64());
    r.set_unknown(unread);
    if a.output.structured() {
        crate::report::emit(a.output, Some(&t.name), &r)?;
    } else {
        print(&r);
    }
    let answer = if r.packets > 0 && r.mismatches == 0 {
        Outcome::Ok
    } else {
        Outcome::NotYet
    };
    Ok(super::verdict(&r.unknown, answer))
}

fn print(r: &TraceReport) {
    outln!(
        "trace {} → {} (last {:.0} s): {} packets traced, {} complete, {} with mismatches",
        r.src,
        r.dst,
        r.since_s,
        r.packets,
        r.complete,
        r.mismatches
    );
    match &r.allowed_error {
        Some(e) => outln!("allowed by the compiled tables: none ({e})"),
        None => {
            outln!(
                "allowed by the compiled tables ({} paths):",
                r.allowed_paths.len()
            );
            for p in &r.allowed_paths {
                outln!("  {p}");
            }
        }
    }
    if r.observed_paths.is_empty() {
        outln!(
            "observed: no postcards of this flow (is it watched? intent `telemetry: watch:`; is traffic flowing?)"
        );
    } else {
        outln!("observed (packets, path; per hop median queue depth in packets and latency):");
        for p in &r.observed_paths {
            let hops: Vec<String> = p
                .hops
                .iter()
                .map(|(s, d, l)| format!("{s} q{d} {l}µs"))
                .collect();
            outln!(
                "  {:>6}  {}{}\n          {}",
                p.packets,
                p.path,
                if p.allowed { "" } else { "   MISMATCH" },
                hops.join(", ")
            );
        }
    }
    if let Some(l) = &r.switch_latency_us {
        outln!(
            "in-switch latency per packet: p50 {} µs, p99 {} µs, max {} µs",
            l.p50,
            l.p99,
            l.max
        );
    }
    let mut shown = BTreeSet::new();
    for p in &r.problems {
        for pr in &p.problems {
            if shown.insert(pr.clone()) && shown.len() <= 10 {
                outln!("MISMATCH: {pr} ({})", p.flow);
            }
        }
    }
    super::print_unknown(&r.unknown);
}
