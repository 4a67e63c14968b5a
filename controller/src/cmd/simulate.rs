//! `weft simulate FILE COLLECTIVE`: the flow-level model (`weft-simulate`) on the compiler's
//! real output, per routing mode, with links down.

use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;
use weft_compiler::LinkState;
use weft_compiler::down::{link_state, links_down};
use weft_simulate::compiled::{class_of, model};
use weft_simulate::model::{Outcome as ModelOutcome, Params, Workload};
use weft_topology::{RoutingMode, Topology};
use weft_traffic::collective::{Collective, Kind};

use super::Outcome;
use super::intent::load_valid_as;
use crate::args::{OutputFormat, parse_modes, parse_size};

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// allreduce, alltoall or incast.
    pub collective: Kind,
    /// Routing modes to compare, comma separated.
    #[arg(long, default_value = "ecmp,wcmp,flowlet,spray,adaptive")]
    pub modes: String,
    /// Links to take down, by either end (SWITCH:PORT), comma separated or repeated.
    #[arg(long, value_name = "SWITCH:PORT")]
    pub down: Vec<String>,
    /// Also take this percentage (0–100) of the switch-to-switch links down, drawn by --seed.
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    pub random_down: Option<f64>,
    /// Seed of --random-down.
    #[arg(long, default_value = "1")]
    pub seed: u64,
    /// Bytes per rank (nccl-tests' size): 1GiB, 64MB, 4096.
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    pub size: u64,
    /// QPs per connection.
    #[arg(long, default_value = "1")]
    pub qps: u32,
    /// RoCE payload per packet, bytes.
    #[arg(long, default_value = "4096")]
    pub mtu: usize,
    /// Traffic class to simulate [default: the first lossless class].
    #[arg(long)]
    pub class: Option<String>,
    /// Hosts taking part, in rank order [default: every host; on a multi-plane fabric the
    /// collective runs on every plane at once].
    #[arg(long, value_delimiter = ',', value_name = "HOSTS")]
    pub ranks: Option<Vec<String>>,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

/// A percentage that can be one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0:?}: a percentage is a number from 0 to 100")]
pub struct PercentError(String);

fn parse_percent(s: &str) -> Result<f64, PercentError> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(PercentError(s.to_string())),
    }
}

#[derive(Serialize)]
struct ModeReport<'a> {
    mode: &'a str,
    /// Whether every byte reaches its destination: bytes between hosts no live path joins
    /// never arrive, so such a collective does not complete (its times are then `null`).
    completes: bool,
    #[serde(flatten)]
    outcome: &'a ModelOutcome,
}

/// Whether the collective completes in this mode: nothing unroutable.
fn completes(o: &ModelOutcome) -> bool {
    o.bytes_unroutable <= 0.0
}

#[derive(Serialize)]
struct Report<'a> {
    collective: &'a str,
    class: &'a str,
    ranks: usize,
    groups: usize,
    size: u64,
    links_down: Vec<String>,
    elapsed_s: f64,
    results: Vec<ModeReport<'a>>,
}

fn human_bw(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.1} GB/s", b / 1e9)
    } else {
        format!("{:.1} MB/s", b / 1e6)
    }
}

fn human_s(s: f64) -> String {
    // -0.0 (a sum of nothing) is 0.
    let s = s + 0.0;
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// The links down: `--down`, and `--random-down` percent of the others drawn by `--seed`.
fn links_of(t: &Topology, a: &SimulateArgs) -> anyhow::Result<LinkState> {
    let mut links = link_state(t, &links_down(t, &a.down)?);
    if let Some(p) = a.random_down {
        for l in weft_simulate::random_down(t, p, a.seed) {
            links.set_down(l, true);
        }
    }
    Ok(links)
}

/// The collective's ranks: `--ranks`, else every host (one group per plane).
fn workload(t: &Topology, a: &SimulateArgs) -> anyhow::Result<Workload> {
    let groups = match &a.ranks {
        Some(names) => vec![
            names
                .iter()
                .map(|n| {
                    t.host_index(n)
                        .with_context(|| format!("--ranks: no host {n}"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?,
        ],
        None => weft_simulate::host_groups(t),
    };
    let per_group = groups.first().map_or(0, Vec::len);
    if groups.iter().any(|g| g.len() != per_group) || per_group < 2 {
        bail!("the collective needs at least 2 hosts per group, all groups of one size");
    }
    Ok(Workload {
        collective: Collective {
            kind: a.collective,
            ranks: per_group as u32,
            size: a.size,
        },
        groups,
        lanes: a.qps,
    })
}

fn print_text(
    t: &Topology,
    a: &SimulateArgs,
    w: &Workload,
    down_names: &[String],
    elapsed_s: f64,
    class: &str,
    outcomes: &[(RoutingMode, ModelOutcome)],
) {
    crate::outln!(
        "{}: {} of {} bytes over {} ranks{} (class {class}), {} link(s) down, {:.1} s",
        t.name,
        a.collective,
        a.size,
        w.groups.iter().map(Vec::len).sum::<usize>(),
        if w.groups.len() > 1 {
            format!(" in {} groups", w.groups.len())
        } else {
            String::new()
        },
        down_names.len(),
        elapsed_s
    );
    crate::outln!(
        "{:<9} {:>11} {:>11} {:>7} {:>11} {:>11} {:>10} {:>10}  bottleneck",
        "mode",
        "completion",
        "ideal",
        "×ideal",
        "algbw",
        "busbw",
        "max link",
        "mean link"
    );
    for (m, o) in outcomes {
        if !completes(o) {
            crate::outln!(
                "{:<9} {:>11} {:>11} {:>7} {:>11} {:>11} {:>10} {:>10}  {}",
                m.as_str(),
                crate::style::bad("never"),
                human_s(o.ideal_s),
                "-",
                "-",
                "-",
                human_s(o.max_fabric_link_s),
                human_s(o.mean_fabric_link_s),
                "hosts with no live path between them"
            );
            crate::outln!(
                "          does not complete: {:.3}% of the bytes have no path{}",
                100.0 * o.bytes_unroutable / (o.bytes_offered + o.bytes_unroutable).max(1.0),
                if o.bytes_dropped > 0.0 {
                    format!(
                        ", {:.3}% of the rest dropped",
                        100.0 * o.bytes_dropped / o.bytes_offered.max(1.0)
                    )
                } else {
                    String::new()
                }
            );
            continue;
        }
        crate::outln!(
            "{:<9} {:>11} {:>11} {:>7.2} {:>11} {:>11} {:>10} {:>10}  {}",
            m.as_str(),
            human_s(o.completion_s),
            human_s(o.ideal_s),
            o.ratio,
            human_bw(o.algbw_bytes_per_s),
            human_bw(o.busbw_bytes_per_s),
            human_s(o.max_fabric_link_s),
            human_s(o.mean_fabric_link_s),
            o.bottleneck
        );
        if o.bytes_dropped > 0.0 || o.bytes_unroutable > 0.0 {
            crate::outln!(
                "          {:.3}% of the bytes dropped, {:.3}% unroutable",
                100.0 * o.bytes_dropped / o.bytes_offered.max(1.0),
                100.0 * o.bytes_unroutable / (o.bytes_offered + o.bytes_unroutable).max(1.0)
            );
        }
    }
}

pub fn run(a: &SimulateArgs) -> anyhow::Result<Outcome> {
    let modes = parse_modes(&a.modes)?;
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let class = class_of(&t, a.class.as_deref())?;
    let links = links_of(&t, a)?;
    let w = workload(&t, a)?;
    let p = Params {
        mtu: a.mtu,
        seed: a.seed,
        ..Params::default()
    };
    let t0 = std::time::Instant::now();
    let outcomes: Vec<(RoutingMode, ModelOutcome)> = modes
        .iter()
        .map(|&m| {
            let o = model(&t, &links, &class, m, &w, &p);
            tracing::info!(mode = %m, ratio = o.ratio, elapsed_s = t0.elapsed().as_secs_f64(), "simulated");
            (m, o)
        })
        .collect();
    let down_names: Vec<String> = links
        .down_links()
        .map(|l| weft_reconcile::core::link_name(&t, l))
        .collect();
    match a.output {
        o if o.structured() => {
            let r = Report {
                collective: a.collective.as_str(),
                class: &class,
                ranks: w.groups.iter().map(Vec::len).sum(),
                groups: w.groups.len(),
                size: a.size,
                links_down: down_names,
                elapsed_s: t0.elapsed().as_secs_f64(),
                results: outcomes
                    .iter()
                    .map(|(m, o)| ModeReport {
                        mode: m.as_str(),
                        completes: completes(o),
                        outcome: o,
                    })
                    .collect(),
            };
            let mut v = serde_json::to_value(&r)?;
            // A collective that does not complete has no completion time, nor a ratio to one.
            for m in v["results"].as_array_mut().into_iter().flatten() {
                if m["completes"] == false {
                    for k in [
                        "completion_s",
                        "ratio",
                        "algbw_bytes_per_s",
                        "busbw_bytes_per_s",
                    ] {
                        m[k] = serde_json::Value::Null;
                    }
                }
            }
            crate::report::emit(o, Some(&t.name), &v)?;
        }
        _ => {
            let elapsed = t0.elapsed().as_secs_f64();
            print_text(&t, a, &w, &down_names, elapsed, &class, &outcomes);
        }
    }
    // Hosts cut off: the collective does not complete, whatever the other modes do.
    Ok(if outcomes.iter().all(|(_, o)| completes(o)) {
        Outcome::Ok
    } else {
        Outcome::NotYet
    })
}
