//! `weft simulate FILE COLLECTIVE`: the flow-level model (`weft-simulate`) on the compiler's
//! real output, per routing mode, with links down.

use std::collections::HashMap;

use anyhow::{Context, bail};
use ipnet::IpNet;
use serde::Serialize;
use weft_simulate::model::{Outcome as ModelOutcome, Params, Workload};
use weft_simulate::{Fabric, Fib, Group, Member, Mode, Next, SwitchFib};
use weft_topology::{RoutingMode, Topology};
use weft_traffic::collective::{Collective, Kind};

use super::{Outcome, OutputFormat, load_valid_as};
use weft_compiler::{Desired, LinkState, Target, compile};

/// The class whose traffic is simulated: the one asked for, else the first lossless class.
pub fn class_of(t: &Topology, class: Option<&str>) -> anyhow::Result<String> {
    match class {
        Some(c) => t
            .class(c)
            .map(|c| c.name.clone())
            .with_context(|| format!("--class {c}: no such traffic class")),
        None => t
            .qos
            .classes
            .iter()
            .find(|c| c.lossless)
            .or_else(|| t.qos.classes.first())
            .map(|c| c.name.clone())
            .context("the intent has no traffic class"),
    }
}

/// The intent with `class` routed by `mode` (every other class as it was).
pub fn with_mode(t: &Topology, class: &str, mode: RoutingMode) -> Topology {
    let mut t = t.clone();
    for c in &mut t.qos.classes {
        if c.name == class {
            c.routing = mode;
        }
    }
    t
}

fn mode_of(m: RoutingMode, gap_us: u32) -> Mode {
    match m {
        RoutingMode::Ecmp | RoutingMode::Wcmp => Mode::Hash,
        RoutingMode::Spray => Mode::Spray,
        RoutingMode::Adaptive => Mode::Adaptive,
        RoutingMode::Flowlet => Mode::Flowlet {
            gap_ns: u64::from(gap_us) * 1000,
        },
        RoutingMode::Entropy => Mode::Entropy,
    }
}

/// What the model needs of the compiled tables, for traffic of `class`.
pub fn fib(t: &Topology, d: &Desired, class: &str) -> Fib {
    let switches = d
        .switches
        .iter()
        .enumerate()
        .map(|(s, sd)| {
            let port_index: HashMap<u32, usize> = t.switches[s]
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| (p.id, i))
                .collect();
            let nh_port: HashMap<u16, usize> = sd
                .nexthops
                .values()
                .filter_map(|n| port_index.get(&n.port_id).map(|&i| (n.id, i)))
                .collect();
            let mut group_index = HashMap::new();
            let groups: Vec<Group> = sd
                .groups
                .values()
                .enumerate()
                .map(|(i, g)| {
                    group_index.insert(g.id, i as u32);
                    let mode = g
                        .modes
                        .iter()
                        .find(|m| &*m.class == class)
                        .map_or(Mode::Hash, |m| mode_of(m.mode, m.flowlet_gap_us));
                    Group {
                        members: g
                            .members
                            .iter()
                            .filter_map(|m| {
                                port_index.get(&m.port_id).map(|&port| Member {
                                    port,
                                    weight: m.weight,
                                })
                            })
                            .collect(),
                        mode,
                    }
                })
                .collect();
            let routes = sd
                .routes
                .iter()
                .filter_map(|r| match r.prefix {
                    IpNet::V4(n) => Some((
                        n,
                        match r.target {
                            Target::Nexthop(id) => {
                                nh_port.get(&id).map_or(Next::Drop, |&p| Next::Port(p))
                            }
                            Target::Group(id) => {
                                group_index.get(&id).map_or(Next::Drop, |&g| Next::Group(g))
                            }
                            Target::Drop => Next::Drop,
                        },
                    )),
                    IpNet::V6(_) => None,
                })
                .collect();
            SwitchFib { routes, groups }
        })
        .collect();
    Fib { switches }
}

/// One mode's model run on `t` with `links` down.
pub fn model(
    t: &Topology,
    links: &LinkState,
    class: &str,
    mode: RoutingMode,
    w: &Workload,
    p: &Params,
) -> ModelOutcome {
    let tm = with_mode(t, class, mode);
    let d = compile(&tm, links);
    let f = fib(&tm, &d, class);
    let down: Vec<bool> = (0..t.links.len()).map(|l| links.is_down(l)).collect();
    let mut fab = Fabric::new(&tm, &down);
    if let Some(c) = p.uniform_capacity {
        fab = fab.with_uniform_capacity(c);
    }
    weft_simulate::simulate(&fab, &f, w, p)
}

/// `4096`, `64KB`, `1MiB`, `1GiB`, `2GB` (K/M/G decimal, KiB/MiB/GiB binary).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let i = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(i);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a size such as 4096, 64KB, 1MiB or 1GiB"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        u => {
            return Err(format!(
                "{s:?}: unknown unit {u:?} (use KB, MB, GB, KiB, MiB, GiB)"
            ));
        }
    };
    let b = v * scale;
    if !(1.0..1e18).contains(&b) {
        return Err(format!("{s:?}: out of range"));
    }
    Ok(b.round() as u64)
}

pub fn parse_modes(s: &str) -> anyhow::Result<Vec<RoutingMode>> {
    s.split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| match m {
            "ecmp" => Ok(RoutingMode::Ecmp),
            "wcmp" => Ok(RoutingMode::Wcmp),
            "flowlet" => Ok(RoutingMode::Flowlet),
            "spray" => Ok(RoutingMode::Spray),
            "adaptive" => Ok(RoutingMode::Adaptive),
            o => bail!("unknown mode {o:?}: use ecmp, wcmp, flowlet, spray, adaptive"),
        })
        .collect()
}

#[derive(Debug, Clone)]
pub struct SimulateArgs {
    pub collective: Kind,
    pub modes: Vec<RoutingMode>,
    pub down: Vec<String>,
    pub random_down: Option<f64>,
    pub seed: u64,
    pub size: u64,
    pub lanes: u32,
    pub mtu: usize,
    pub class: Option<String>,
    /// Hosts taking part, in rank order (None: every host, one group per plane).
    pub ranks: Option<Vec<String>>,
}

#[derive(Serialize)]
struct ModeReport<'a> {
    mode: &'a str,
    #[serde(flatten)]
    outcome: &'a ModelOutcome,
}

#[derive(Serialize)]
struct Report<'a> {
    fabric: &'a str,
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
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

pub fn run(file: &str, a: &SimulateArgs, output: OutputFormat) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(file, output)? else {
        return Ok(Outcome::Invalid);
    };
    let class = class_of(&t, a.class.as_deref())?;
    let mut links = super::plan::link_state(&t, &super::plan::links_down(&t, &a.down)?);
    if let Some(p) = a.random_down {
        for l in weft_simulate::random_down(&t, p, a.seed) {
            links.set_down(l, true);
        }
    }
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
        None => weft_simulate::host_groups(&t),
    };
    let per_group = groups.first().map_or(0, Vec::len);
    if groups.iter().any(|g| g.len() != per_group) || per_group < 2 {
        bail!("the collective needs at least 2 hosts per group, all groups of one size");
    }
    let w = Workload {
        collective: Collective {
            kind: a.collective,
            ranks: per_group as u32,
            size: a.size,
        },
        groups,
        lanes: a.lanes,
    };
    let p = Params {
        mtu: a.mtu,
        seed: a.seed,
        ..Params::default()
    };
    let t0 = std::time::Instant::now();
    let outcomes: Vec<(RoutingMode, ModelOutcome)> = a
        .modes
        .iter()
        .map(|&m| {
            let o = model(&t, &links, &class, m, &w, &p);
            tracing::info!(mode = %m, ratio = o.ratio, elapsed_s = t0.elapsed().as_secs_f64(), "simulated");
            (m, o)
        })
        .collect();
    let down_names: Vec<String> = links
        .down_links()
        .map(|l| {
            format!(
                "{} ↔ {}",
                t.end_name(t.links[l].a),
                t.end_name(t.links[l].b)
            )
        })
        .collect();
    match output {
        OutputFormat::Json => {
            let r = Report {
                fabric: &t.name,
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
                        outcome: o,
                    })
                    .collect(),
            };
            crate::outln!("{}", serde_json::to_string_pretty(&r)?);
        }
        OutputFormat::Text => {
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
                t0.elapsed().as_secs_f64()
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
            for (m, o) in &outcomes {
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
                        100.0 * o.bytes_unroutable
                            / (o.bytes_offered + o.bytes_unroutable).max(1.0)
                    );
                }
            }
        }
    }
    Ok(Outcome::Ok)
}
