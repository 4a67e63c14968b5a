//! A flow-level model of collectives on a Weft fabric at scale, driven by the compiler's real
//! output. Pure: no I/O; `weft simulate` feeds it.
//!
//! ```text
//!   Topology + links down ─▶ fabric::Fabric (directed links, capacities)
//!   compiled tables        ─▶ fib::Fib ─▶ fib::Router (LPM decisions, BMv2 member order)
//!   weft_traffic::Collective + ranks ─▶ model::for_each_flow (the engine's 5-tuples and QPs)
//!        │ place::Placer: hash / sticky flowlet per flow, spray / adaptive as fluid
//!        ▼
//!   bytes per link ─▶ step time = max_l bytes_l / c_l (exact for max-min fair sharing of
//!                     equal flows, see maxmin) ; ideal::Cuts lower bound ─▶ model::Outcome
//! ```

pub mod compiled;
pub mod fabric;
pub mod fib;
pub mod hash;
pub mod ideal;
pub mod maxmin;
pub mod model;
pub mod place;
pub mod transport;

pub use fabric::Fabric;
pub use fib::{Fib, Group, Member, Mode, Next, SwitchFib};
pub use model::{Outcome, Params, Workload, simulate};

use weft_topology::{LinkIdx, Topology};

/// `percent`% of the switch-to-switch links, drawn without replacement by `seed`.
pub fn random_down(t: &Topology, percent: f64, seed: u64) -> Vec<LinkIdx> {
    let mut links: Vec<LinkIdx> = (0..t.links.len()).collect();
    let n = ((links.len() as f64) * percent / 100.0).round() as usize;
    let mut r = hash::Rng::new(seed);
    for i in 0..n.min(links.len()) {
        let j = i + r.below((links.len() - i) as u64) as usize;
        links.swap(i, j);
    }
    links.truncate(n.min(links.len()));
    links.sort_unstable();
    links
}

/// Ranks of a collective over every host; on a fabric of planes, one group per plane (a
/// NIC reaches only the NICs of its plane).
pub fn host_groups(t: &Topology) -> Vec<Vec<weft_topology::HostIdx>> {
    let mut planes: std::collections::BTreeMap<Option<u32>, Vec<usize>> = Default::default();
    for (i, h) in t.hosts.iter().enumerate() {
        planes.entry(h.plane).or_default().push(i);
    }
    planes.into_values().collect()
}
