//! `weft testbed workload FILE COLLECTIVE`: collectives on the running testbed, optionally
//! under several routing modes (rewriting the intent's `routing` and running `weft apply`),
//! with all links up and with links down, each as a ratio to the ideal at the rate one flow
//! measured in the same run, next to the fabric model's prediction for the same traffic.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use weft_simulate::Fabric;
use weft_simulate::ideal::Cuts;
use weft_simulate::model::{Params, Workload as ModelWorkload};
use weft_testbed as tb;
use weft_testbed::workload::{Nic, Outcome as Run, Spec};
use weft_topology::{RoutingMode, Topology};
use weft_traffic::collective::Kind;

use super::simulate::{class_of, model, parse_modes};
use super::{Outcome, OutputFormat, load_valid_as};

#[derive(Debug, Clone)]
pub struct WorkloadArgs {
    pub collectives: Vec<Kind>,
    pub ranks: Option<Vec<String>>,
    pub size: u64,
    pub warmup: u32,
    pub iterations: u32,
    pub qps: u32,
    pub mtu: usize,
    pub rate_pps: f64,
    /// Limit every switch queue to this many packets/s first (0: leave the switches as they are).
    pub port_rate: u64,
    pub nic: Nic,
    pub modes: Option<String>,
    pub down: Vec<String>,
    pub flowlet_gap: String,
    pub baseline: Option<PathBuf>,
    pub threshold: f64,
    pub timeout: Duration,
}

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
    #[serde(deserialize_with = "tb::workload::f64_or_nan")]
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

fn mode_name(m: RoutingMode) -> &'static str {
    m.as_str()
}

/// The intent text with `class` routed by `mode` (and its flowlet gap), everything else kept.
pub fn rewrite_routing(
    text: &str,
    class: &str,
    mode: RoutingMode,
    gap: &str,
) -> anyhow::Result<String> {
    let mut v: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).context("parsing the intent")?;
    let root = v.as_mapping_mut().context("the intent is not a mapping")?;
    let routing = root
        .entry("routing".into())
        .or_insert_with(|| serde_yaml_ng::Value::Mapping(Default::default()));
    let routing = routing.as_mapping_mut().context("routing: not a mapping")?;
    let classes = routing
        .entry("classes".into())
        .or_insert_with(|| serde_yaml_ng::Value::Mapping(Default::default()));
    let classes = classes
        .as_mapping_mut()
        .context("routing.classes: not a mapping")?;
    let mut policy = serde_yaml_ng::Mapping::new();
    policy.insert("mode".into(), mode_name(mode).into());
    if mode == RoutingMode::Flowlet {
        policy.insert("flowlet_gap".into(), gap.into());
    }
    classes.insert(class.into(), serde_yaml_ng::Value::Mapping(policy));
    Ok(serde_yaml_ng::to_string(&v)?)
}

fn apply(weft: &Path, file: &Path, down: &[String], timeout: Duration) -> anyhow::Result<()> {
    let mut c = std::process::Command::new(weft);
    c.arg("apply").arg(file);
    if !down.is_empty() {
        c.arg("--down").arg(down.join(","));
    }
    c.args(["--timeout", &format!("{}s", timeout.as_secs().max(1))]);
    let out = c.output().context("running weft apply")?;
    if !out.status.success() {
        bail!(
            "weft apply {} failed:\n{}{}",
            file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
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

fn model_ratio(
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

pub fn parse_duration(s: &str) -> anyhow::Result<Duration> {
    s.parse::<weft_topology::units::Duration>()
        .map(|d| d.to_std())
        .map_err(|e| anyhow::anyhow!("{s}: {e}"))
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

pub fn run(
    file: &str,
    state_dir: Option<PathBuf>,
    a: &WorkloadArgs,
    output: OutputFormat,
) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(file, output)? else {
        return Ok(Outcome::Invalid);
    };
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
    let dir = state_dir.unwrap_or_else(|| tb::default_state_dir(&t.name));
    let st = tb::State::load(&dir).with_context(|| {
        format!(
            "no testbed {} (looked in {}); weft testbed up {file}",
            t.name,
            dir.display()
        )
    })?;
    let traffic = tb::workload::locate_traffic()?;
    let weft = std::env::current_exe().context("locating weft")?;
    let class = class_of(&t, None)?;
    let ranks = a
        .ranks
        .clone()
        .unwrap_or_else(|| t.hosts.iter().map(|h| h.name.clone()).collect());
    if ranks.len() < 2 {
        bail!("--ranks: a collective needs at least 2 hosts");
    }
    for r in &ranks {
        if st.host(r).is_none() {
            bail!("--ranks: no host {r} in the testbed");
        }
    }
    let mut spec = Spec::new(&t, Kind::AllToAll, ranks.clone(), a.size);
    spec.warmup = a.warmup;
    spec.iterations = a.iterations;
    spec.lanes = a.qps;
    spec.mtu = a.mtu;
    spec.rate_pps = a.rate_pps;
    spec.nic = a.nic;
    spec.deadline = a.timeout;
    if a.port_rate > 0 {
        let bmv2 = tb::Programs::locate()?.bmv2;
        let cli = bmv2.with_file_name("simple_switch_CLI");
        tb::workload::set_port_rates(&st, &cli, a.port_rate)?;
    }
    let gap = parse_duration(&a.flowlet_gap)?;
    let modes = a.modes.as_deref().map(parse_modes).transpose()?;

    // The rate one flow sustains alone: from the first rank to a rank on another leaf.
    let leaf = |n: &str| t.host_index(n).map(|i| t.hosts[i].switch);
    let src = ranks[0].clone();
    let dst = ranks
        .iter()
        .find(|r| leaf(r) != leaf(&src))
        .unwrap_or(&ranks[1])
        .clone();
    let apply_mode = |m: RoutingMode, down: &[String]| -> anyhow::Result<PathBuf> {
        let v = rewrite_routing(&text, &class, m, &a.flowlet_gap)?;
        let p = dir.join(format!("workload-intent-{}.yaml", m.as_str()));
        std::fs::write(&p, v).with_context(|| format!("writing {}", p.display()))?;
        apply(&weft, &p, down, a.timeout)?;
        Ok(p)
    };
    if let Some(m) = modes.as_ref().and_then(|m| m.first()) {
        apply_mode(*m, &[])?;
    }
    // About 1.5 s of one flow, three times: the best is what the fabric sustains (other
    // processes on the machine can only make a run slower, never faster).
    let packets = (a.rate_pps * 1.5).clamp(64.0, 3000.0) as u64;
    let mut rate: f64 = 0.0;
    for _ in 0..3 {
        let r = tb::workload::measure_rate(&st, &t, &traffic, &spec, &src, &dst, packets)?;
        tracing::info!(%src, %dst, rate_bytes_per_s = r, "one flow alone");
        rate = rate.max(r);
    }

    let mut states: Vec<Vec<String>> = vec![Vec::new()];
    if !a.down.is_empty() {
        states.push(a.down.clone());
    }
    let mut cases = Vec::new();
    for down in &states {
        let links = super::plan::link_state(&t, &super::plan::links_down(&t, down)?);
        let down_mask: Vec<bool> = (0..t.links.len()).map(|l| links.is_down(l)).collect();
        let names: Vec<String> = links
            .down_links()
            .map(|l| {
                format!(
                    "{} ↔ {}",
                    t.end_name(t.links[l].a),
                    t.end_name(t.links[l].b)
                )
            })
            .collect();
        let list: Vec<Option<RoutingMode>> = match &modes {
            Some(ms) => ms.iter().copied().map(Some).collect(),
            None => vec![None],
        };
        for m in list {
            if let Some(m) = m {
                apply_mode(m, down)?;
            }
            for &k in &a.collectives {
                let mut s = spec.clone();
                s.kind = k;
                let r = tb::workload::run_workload(&st, &t, &traffic, &s)?;
                let ideal_s = ideal(&t, &down_mask, &s, rate);
                let mr = m.map(|m| model_ratio(&t, &links, &class, m, &s, gap));
                tracing::info!(collective = %k, mode = ?m, seconds = r.seconds, ideal_s, "case done");
                cases.push(Case {
                    collective: k,
                    mode: m.map(|m| m.as_str().to_string()),
                    links_down: names.clone(),
                    ratio: r.seconds / ideal_s,
                    ideal_s,
                    model_ratio: mr,
                    run: r,
                });
            }
        }
    }
    if !a.down.is_empty()
        && let Some(m) = modes.as_ref().and_then(|m| m.last())
    {
        // Leave the fabric as the last mode with every link up.
        apply_mode(*m, &[])?;
    }
    let mut report = Report {
        fabric: t.name.clone(),
        ranks,
        size: a.size,
        warmup: a.warmup,
        iterations: a.iterations,
        rate_pps: a.rate_pps,
        port_rate: a.port_rate,
        mtu: a.mtu,
        qps: a.qps,
        flowlet_gap: a.flowlet_gap.clone(),
        nic: a.nic,
        measured_bytes_per_s: rate,
        measured_between: (src, dst),
        cases,
        regressions: Vec::new(),
        hash_seeds: true,
    };
    if let Some(b) = &a.baseline {
        let base: Report = serde_json::from_str(
            &std::fs::read_to_string(b).with_context(|| format!("reading {}", b.display()))?,
        )
        .with_context(|| format!("{}: not a workload report (--output json)", b.display()))?;
        report.regressions = regressions(&report, &base, a.threshold);
    }
    match output {
        OutputFormat::Json => crate::outln!("{}", serde_json::to_string_pretty(&report)?),
        OutputFormat::Text => crate::out!("{}", render(&report)),
    }
    let ok = report.cases.iter().all(|c| c.run.complete) && report.regressions.is_empty();
    Ok(if ok { Outcome::Ok } else { Outcome::Failed })
}

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
        o += &format!(
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
        );
    }
    for reg in &r.regressions {
        o += &format!("REGRESSION {reg}\n");
    }
    o
}
