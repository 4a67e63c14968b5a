//! What `weft testbed workload` reports: every collective under every mode, with links up and
//! down, each as a ratio to the ideal at the rate one flow measured in the same run, next to the
//! fabric model's prediction for the same traffic ([`model_outcome`]); baselines compared by
//! busbw ([`regressions`]) and the report as text ([`render`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use weft_simulate::Fabric;
use weft_simulate::compiled::model;
use weft_simulate::ideal::Cuts;
use weft_simulate::model::{Params, Workload as ModelWorkload};
use weft_topology::units::UnitError;
use weft_topology::{RoutingMode, Topology};
use weft_traffic::collective::Kind;

use crate::workload::{Nic, Outcome as Run, Spec};

/// One collective under one mode and one set of links down.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Case {
    pub collective: Kind,
    /// None: whatever was applied before (no `--modes`).
    pub mode: Option<String>,
    pub links_down: Vec<String>,
    pub run: Run,
    pub ideal_s: f64,
    /// Measured mean iteration time / ideal.
    #[serde(deserialize_with = "crate::workload::f64_or_nan")]
    pub ratio: f64,
    /// The fabric model's completion / ideal for the same traffic, mode and links.
    pub model_ratio: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub fabric: String,
    pub ranks: Vec<String>,
    pub size: u64,
    #[serde(default)]
    pub warmup: u32,
    pub iterations: u32,
    pub rate_pps: f64,
    #[serde(default)]
    pub port_rate: u64,
    #[serde(default = "default_mtu")]
    pub mtu: usize,
    #[serde(default = "one")]
    pub qps: u32,
    #[serde(default)]
    pub flowlet_gap: String,
    #[serde(default = "intent_nic")]
    pub nic: Nic,
    /// Payload bytes/s one flow sustained alone (the ideal's link rate).
    pub measured_bytes_per_s: f64,
    pub measured_between: (String, String),
    pub cases: Vec<Case>,
    /// Cases worse than the baseline by more than the threshold.
    #[serde(default)]
    pub regressions: Vec<String>,
    /// Whether the switches hashed with per-switch seeds (the plugin sets them); reports
    /// recorded before the pipeline had seeds lack the field: false.
    #[serde(default)]
    pub hash_seeds: bool,
}

fn default_mtu() -> usize {
    4096
}
fn one() -> u32 {
    1
}
fn intent_nic() -> Nic {
    Nic::Intent
}

/// Seconds the cut bound allows for one iteration at `rate` payload bytes/s on every link.
pub fn ideal(t: &Topology, down: &[bool], spec: &Spec, rate: f64) -> f64 {
    let fab = Fabric::new(t, down).with_uniform_capacity(rate);
    let cuts = Cuts::new(&fab);
    let hosts: Vec<usize> = spec.ranks.iter().filter_map(|n| t.host_index(n)).collect();
    let c = spec.collective();
    let mut total = 0.0;
    for (first, repeat) in c.distinct_steps() {
        let mut tally = cuts.tally();
        for f in c.step_flows(first) {
            tally.add(hosts[f.src as usize], hosts[f.dst as usize], f.bytes as f64);
        }
        total += tally.bound().0 * f64::from(repeat);
    }
    total
}

/// The model's outcome for the testbed's traffic: links at the NICs' rate, the class's flowlet
/// gap as applied.
#[allow(clippy::too_many_arguments)]
pub fn model_outcome(
    t: &Topology,
    links: &weft_compiler::LinkState,
    class: &str,
    mode: RoutingMode,
    spec: &Spec,
    gap: Duration,
    latency: bool,
    hash_seeds: bool,
) -> weft_simulate::Outcome {
    let mut t = t.clone();
    for c in &mut t.qos.classes {
        if c.name == class {
            c.flowlet_gap = weft_topology::units::Duration(gap.as_nanos() as u64);
        }
    }
    let hosts: Vec<usize> = spec.ranks.iter().filter_map(|n| t.host_index(n)).collect();
    let w = ModelWorkload {
        collective: spec.collective(),
        groups: vec![hosts],
        lanes: spec.lanes,
    };
    let p = Params {
        mtu: spec.mtu,
        nic_rate: Some(spec.line_rate()),
        uniform_capacity: Some(spec.line_rate()),
        latency,
        hash_seeds,
        ..Params::default()
    };
    model(&t, links, class, mode, &w, &p)
}

/// The model's completion / ideal for the testbed's traffic, with last-packet latency and the
/// switches' hash seeds, as the testbed runs.
pub fn model_ratio(
    t: &Topology,
    links: &weft_compiler::LinkState,
    class: &str,
    mode: RoutingMode,
    spec: &Spec,
    gap: Duration,
) -> f64 {
    model_outcome(t, links, class, mode, spec, gap, true, true).ratio
}

/// The spec a report's runs used (for recomputing the model from a recorded report).
pub fn spec_of(t: &Topology, r: &Report, kind: Kind) -> Spec {
    let mut s = Spec::new(t, kind, r.ranks.clone(), r.size);
    s.warmup = r.warmup;
    s.iterations = r.iterations;
    s.lanes = r.qps;
    s.mtu = r.mtu;
    s.rate_pps = r.rate_pps;
    s.nic = r.nic;
    s
}

/// A flowlet gap that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{given}: {source}")]
pub struct GapError {
    pub given: String,
    pub source: UnitError,
}

/// `100ms`, `20us`: the flowlet gap as the report and `--flowlet-gap` give it.
pub fn parse_duration(s: &str) -> Result<Duration, GapError> {
    s.parse::<weft_topology::units::Duration>()
        .map(|d| d.to_std())
        .map_err(|source| GapError {
            given: s.to_string(),
            source,
        })
}

/// The key a baseline is matched by.
fn key(c: &Case) -> String {
    format!(
        "{} {} [{}]",
        c.collective,
        c.mode.as_deref().unwrap_or("as applied"),
        c.links_down.join(", ")
    )
}

/// Cases whose busbw fell by more than `threshold` (a fraction) against the baseline.
pub fn regressions(now: &Report, base: &Report, threshold: f64) -> Vec<String> {
    let mut out = Vec::new();
    for c in &now.cases {
        if let Some(b) = base.cases.iter().find(|b| key(b) == key(c)) {
            if !c.run.complete {
                out.push(format!(
                    "{}: incomplete (baseline complete: {})",
                    key(c),
                    b.run.complete
                ));
            } else if b.run.busbw > 0.0 && c.run.busbw < b.run.busbw * (1.0 - threshold) {
                out.push(format!(
                    "{}: busbw {:.3} MB/s, {:.1}% below the baseline's {:.3} MB/s",
                    key(c),
                    c.run.busbw / 1e6,
                    100.0 * (1.0 - c.run.busbw / b.run.busbw),
                    b.run.busbw / 1e6
                ));
            }
        }
    }
    out
}

/// The report as the text table `weft testbed workload` prints.
pub fn render(r: &Report) -> String {
    let mut o = format!(
        "{}: {} ranks, {} bytes per rank, {} iteration(s) after {} warm-up; one flow {} → {} alone: {:.0} KB/s ({:.0} packets/s)\n",
        r.fabric,
        r.ranks.len(),
        r.size,
        r.iterations,
        r.warmup,
        r.measured_between.0,
        r.measured_between.1,
        r.measured_bytes_per_s / 1e3,
        r.rate_pps
    );
    o += &format!(
        "{:<10} {:<9} {:<6} {:>9} {:>9} {:>7} {:>7} {:>10} {:>10} {:>9} {:>9} {:>6} {:>6} {:>5} {:>5} {:>5}\n",
        "collective",
        "mode",
        "down",
        "time",
        "ideal",
        "×ideal",
        "model",
        "algbw",
        "busbw",
        "msg p50",
        "msg p99",
        "ooo",
        "depth",
        "retx",
        "cnps",
        "pause"
    );
    for c in &r.cases {
        o += &render_case(c);
    }
    for reg in &r.regressions {
        o += &format!("REGRESSION {reg}\n");
    }
    o
}

fn render_case(c: &Case) -> String {
    format!(
        "{:<10} {:<9} {:<6} {:>8.3}s {:>8.3}s {:>7.2} {:>7} {:>7.0}KB/s {:>7.0}KB/s {:>8.3}s {:>8.3}s {:>6} {:>6} {:>5} {:>5} {:>5}{}\n",
        c.collective.as_str(),
        c.mode.as_deref().unwrap_or("-"),
        if c.links_down.is_empty() {
            "none".to_string()
        } else {
            c.links_down.len().to_string()
        },
        c.run.seconds,
        c.ideal_s,
        c.ratio,
        c.model_ratio.map_or("-".into(), |m| format!("{m:.2}")),
        c.run.algbw / 1e3,
        c.run.busbw / 1e3,
        c.run.message_p50_s,
        c.run.message_p99_s,
        c.run.out_of_order,
        c.run.max_reorder_depth,
        c.run.retransmitted,
        c.run.cnps,
        c.run.pfc_pauses.map_or("n/a".into(), |p| p.to_string()),
        if c.run.complete { "" } else { "  INCOMPLETE" }
    )
}
