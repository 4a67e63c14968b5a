//! The compiler's output as the model takes it: the compiled tables of every switch as a
//! [`Fib`] for one traffic class, and one routing mode's model run on an intent with links
//! down (what `weft simulate`, the benches and the testbed's workloads compare).

use std::collections::HashMap;

use ipnet::IpNet;
use weft_compiler::{Desired, LinkState, Target, compile};
use weft_topology::{RoutingMode, Topology};

use crate::model::{Outcome, Params, Workload};
use crate::{Fabric, Fib, Group, Member, Mode, Next, SwitchFib};

/// Why no traffic class can be simulated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClassError {
    #[error("--class {0}: no such traffic class")]
    Unknown(String),
    #[error("the intent has no traffic class")]
    None,
}

/// The class whose traffic is simulated: the one asked for, else the first lossless class.
pub fn class_of(t: &Topology, class: Option<&str>) -> Result<String, ClassError> {
    match class {
        Some(c) => t
            .class(c)
            .map(|c| c.name.clone())
            .ok_or_else(|| ClassError::Unknown(c.to_string())),
        None => t
            .qos
            .classes
            .iter()
            .find(|c| c.lossless)
            .or_else(|| t.qos.classes.first())
            .map(|c| c.name.clone())
            .ok_or(ClassError::None),
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
        .map(|(s, sd)| switch_fib(t, s, sd, class))
        .collect();
    Fib { switches }
}

fn switch_fib(t: &Topology, s: usize, sd: &weft_compiler::SwitchDesired, class: &str) -> SwitchFib {
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
                    Target::Nexthop(id) => nh_port.get(&id).map_or(Next::Drop, |&p| Next::Port(p)),
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
}

/// One mode's model run on `t` with `links` down.
pub fn model(
    t: &Topology,
    links: &LinkState,
    class: &str,
    mode: RoutingMode,
    w: &Workload,
    p: &Params,
) -> Outcome {
    let tm = with_mode(t, class, mode);
    let d = compile(&tm, links);
    let f = fib(&tm, &d, class);
    let down: Vec<bool> = (0..t.links.len()).map(|l| links.is_down(l)).collect();
    let mut fab = Fabric::new(&tm, &down);
    if let Some(c) = p.uniform_capacity {
        fab = fab.with_uniform_capacity(c);
    }
    crate::simulate(&fab, &f, w, p)
}
