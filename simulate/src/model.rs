//! A collective on a compiled fabric: its steps' flows placed per mode, each step's time under
//! max-min fair sharing, the ideal, and the link loads.
//!
//! A step lasts `max_l bytes_l / c_l` (the bottleneck's drain, exact for max-min sharing of
//! equal flows; see [`crate::maxmin`]) plus the time its last packet needs to cross the path
//! after it (store-and-forward at each link, and the cables): a step cannot start before the
//! previous one's data has arrived. At 400G that is ~0.5 µs on a 3-tier path, which matters for
//! rings of thousands of small steps; the ideal counts bytes only.

use serde::Serialize;
use weft_topology::HostIdx;
use weft_traffic::bth::{DATA_OVERHEAD, ROCEV2_PORT, UDP_IP_ETH};
use weft_traffic::collective::{Collective, Kind, qp_number, source_port};

use crate::fabric::{Fabric, LinkKind};
use crate::fib::Fib;
use crate::hash::FlowKey;
use crate::ideal::Cuts;
use crate::place::{FlowSpec, Loads, Placer};

/// The same collective on every group of hosts at once (one group: all ranks; on a
/// multi-plane fabric, one group per plane).
#[derive(Debug, Clone)]
pub struct Workload {
    /// `ranks` is the size of one group.
    pub collective: Collective,
    pub groups: Vec<Vec<HostIdx>>,
    /// QPs per connection.
    pub lanes: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// RoCE payload per packet.
    pub mtu: usize,
    /// Bytes per second a sending NIC serialises (None: its link speed): with the number of
    /// QPs it serves, how far apart one QP's packets are, against the flowlet gap.
    pub nic_rate: Option<f64>,
    pub seed: u64,
    /// Add each step's last-packet latency (store-and-forward and cables) to its time.
    pub latency: bool,
    /// Every link at this many bytes per second instead of its speed (the testbed, where one
    /// rate limits every port); the caller builds the fabric with it.
    pub uniform_capacity: Option<f64>,
    /// Each switch hashes HASH-mode flows with its own seed (`hash::hash_seed` of its device
    /// id), as the plugin sets it; false: every switch unseeded, as the pipeline ran before it
    /// had a seed (reports recorded then).
    pub hash_seeds: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            mtu: 4096,
            nic_rate: None,
            seed: 1,
            latency: true,
            uniform_capacity: None,
            hash_seeds: true,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct StepOutcome {
    pub first_step: u32,
    pub repeat: u32,
    pub seconds: f64,
    /// Of `seconds`: the last packet's trip after the bottleneck drained.
    pub latency_seconds: f64,
    pub ideal_seconds: f64,
    pub bottleneck: String,
    pub ideal_cut: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub completion_s: f64,
    pub ideal_s: f64,
    /// completion / ideal.
    pub ratio: f64,
    pub algbw_bytes_per_s: f64,
    pub busbw_bytes_per_s: f64,
    pub bytes_offered: f64,
    pub bytes_delivered: f64,
    pub bytes_dropped: f64,
    /// Bytes between hosts no live path joins (never offered).
    pub bytes_unroutable: f64,
    /// Over live switch-to-switch links: seconds of work over the whole collective.
    pub max_fabric_link_s: f64,
    pub mean_fabric_link_s: f64,
    pub fabric_links: usize,
    pub bottleneck: String,
    pub steps: Vec<StepOutcome>,
}

fn lane_share(bytes: u64, lanes: u32, lane: u32) -> u64 {
    let l = u64::from(lanes.max(1));
    bytes / l + u64::from(u64::from(lane) < bytes % l)
}

fn mix(a: u64, b: u64) -> u64 {
    let mut r = crate::hash::Rng::new(a ^ b.rotate_left(29));
    r.next_u64()
}

/// QPs a rank's NIC serves at once in a step of `kind`.
fn qps_at_nic(c: &Collective, lanes: u32) -> u32 {
    let per = match c.kind {
        Kind::AllToAll => c.ranks.saturating_sub(1),
        Kind::AllReduce | Kind::Incast => 1,
    };
    per.max(1) * lanes.max(1)
}

/// Calls `f` for every flow of step `k` over all groups.
pub fn for_each_flow(fab: &Fabric, w: &Workload, p: &Params, k: u32, mut f: impl FnMut(FlowSpec)) {
    let t = fab.t;
    let lanes = w.lanes.max(1);
    let qps = qps_at_nic(&w.collective, lanes);
    for (gi, hosts) in w.groups.iter().enumerate() {
        let mut c = w.collective;
        c.ranks = hosts.len() as u32;
        for fl in c.step_flows(k) {
            let (src, dst) = (hosts[fl.src as usize], hosts[fl.dst as usize]);
            let nic = p
                .nic_rate
                .unwrap_or(t.hosts[src].speed.bits_per_sec() as f64 / 8.0)
                .max(1.0);
            let pkt_ns = (p.mtu + DATA_OVERHEAD + UDP_IP_ETH) as f64 / nic * 1e9;
            for lane in 0..lanes {
                let key = FlowKey {
                    src: t.hosts[src].ipv4,
                    dst: t.hosts[dst].ipv4,
                    src_port: source_port(qp_number(fl.dst, lane)),
                    dst_port: ROCEV2_PORT,
                    dst_qp: qp_number(fl.src, lane),
                };
                let id = mix(
                    (gi as u64) << 48 | u64::from(fl.src) << 24 | u64::from(fl.dst),
                    u64::from(lane),
                );
                f(FlowSpec {
                    src,
                    dst,
                    bytes: lane_share(fl.bytes, lanes, lane) as f64,
                    key,
                    id,
                    packet_gap_ns: f64::from(qps) * pkt_ns,
                });
            }
        }
    }
}

/// Hop counts between leaves over live switch links (u32::MAX: not connected), for the
/// latency of a step's last packet.
struct Distances {
    leaf: Vec<u32>,
    d: Vec<Vec<u32>>,
}

impl Distances {
    fn new(fab: &Fabric) -> Distances {
        let t = fab.t;
        let n = t.switches.len();
        let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (l, link) in t.links.iter().enumerate() {
            if fab.live[2 * l] {
                adj[link.a.switch].push(link.b.switch);
                adj[link.b.switch].push(link.a.switch);
            }
        }
        let mut leaf = vec![u32::MAX; n];
        let mut leaves = Vec::new();
        for h in &t.hosts {
            if leaf[h.switch] == u32::MAX {
                leaf[h.switch] = leaves.len() as u32;
                leaves.push(h.switch);
            }
        }
        let d = leaves
            .iter()
            .map(|&src| {
                let mut dist = vec![u32::MAX; n];
                dist[src] = 0;
                let mut q = std::collections::VecDeque::from([src]);
                while let Some(s) = q.pop_front() {
                    for &x in &adj[s] {
                        if dist[x] == u32::MAX {
                            dist[x] = dist[s] + 1;
                            q.push_back(x);
                        }
                    }
                }
                leaves.iter().map(|&l| dist[l]).collect()
            })
            .collect();
        Distances { leaf, d }
    }

    /// Links from host to host: the NIC link, the switch hops, the last link.
    fn links(&self, t: &weft_topology::Topology, a: HostIdx, b: HostIdx) -> Option<u32> {
        let (la, lb) = (self.leaf[t.hosts[a].switch], self.leaf[t.hosts[b].switch]);
        let d = *self.d.get(la as usize)?.get(lb as usize)?;
        (d != u32::MAX).then_some(d + 2)
    }
}

/// Runs the workload.
pub fn simulate(fab: &Fabric, fib: &Fib, w: &Workload, p: &Params) -> Outcome {
    let cuts = Cuts::new(fab);
    let dist = Distances::new(fab);
    let t = fab.t;
    // One packet's store-and-forward time at the slowest link (host links are the slowest in
    // every generated fabric), and 5 ns per metre of the longest cable.
    let slowest = fab
        .cap
        .iter()
        .copied()
        .filter(|c| *c > 0.0)
        .fold(f64::INFINITY, f64::min);
    let wire = (p.mtu + DATA_OVERHEAD + UDP_IP_ETH) as f64;
    let cable = t
        .links
        .iter()
        .map(|l| l.cable_length.as_metres())
        .chain(t.hosts.iter().map(|h| h.cable_length.as_metres()))
        .fold(0.0, f64::max)
        * 5e-9;
    let link_latency = if p.latency && slowest.is_finite() {
        wire / slowest + cable
    } else {
        0.0
    };
    let mut placer = Placer::new(fab, fib, p.seed, p.hash_seeds);
    let mut steps = Vec::new();
    let mut per_link = vec![0.0; fab.len()];
    let (mut offered, mut delivered, mut dropped, mut unroutable) = (0.0, 0.0, 0.0, 0.0);
    for (first, repeat) in w.collective.distinct_steps() {
        placer.reset();
        let mut tally = cuts.tally();
        // The ideal first: adaptive routing reacts to what exceeds it.
        for_each_flow(fab, w, p, first, |f| tally.add(f.src, f.dst, f.bytes));
        placer.set_overload(tally.bound().0);
        let mut hops = 0u32;
        for_each_flow(fab, w, p, first, |f| {
            if cuts.routable(f.src, f.dst) {
                placer.place(&f);
                hops = hops.max(dist.links(t, f.src, f.dst).unwrap_or(0));
            }
        });
        let latency = f64::from(hops) * link_latency;
        let Loads {
            bytes,
            offered: o,
            delivered: d,
            dropped: x,
        } = placer.finish();
        let r = f64::from(repeat);
        offered += o * r;
        delivered += d * r;
        dropped += x * r;
        unroutable += tally.unroutable * r;
        let mut worst = (0.0, 0usize);
        for (l, b) in bytes.iter().enumerate() {
            if *b > 0.0 {
                let s = b / fab.cap[l].max(1.0);
                per_link[l] += s * r;
                if s > worst.0 {
                    worst = (s, l);
                }
            }
        }
        let (ideal, cut) = tally.bound();
        steps.push(StepOutcome {
            first_step: first,
            repeat,
            seconds: worst.0 + latency,
            latency_seconds: latency,
            ideal_seconds: ideal,
            bottleneck: fab.name(worst.1 as u32),
            ideal_cut: cut.describe(fab.t),
        });
    }
    let completion: f64 = steps.iter().map(|s| s.seconds * f64::from(s.repeat)).sum();
    let ideal: f64 = steps
        .iter()
        .map(|s| s.ideal_seconds * f64::from(s.repeat))
        .sum();
    let fabric: Vec<usize> = (0..fab.len())
        .filter(|&l| fab.kind[l] == LinkKind::Fabric && fab.live[l])
        .collect();
    let (max_l, arg) = fabric
        .iter()
        .map(|&l| (per_link[l], l))
        .fold((0.0, usize::MAX), |a, b| if b.0 > a.0 { b } else { a });
    let mean = fabric.iter().map(|&l| per_link[l]).sum::<f64>() / fabric.len().max(1) as f64;
    let mut c = w.collective;
    c.ranks = w.groups.first().map_or(0, |g| g.len() as u32);
    Outcome {
        completion_s: completion,
        ideal_s: ideal,
        ratio: if ideal > 0.0 {
            completion / ideal
        } else {
            f64::NAN
        },
        algbw_bytes_per_s: c.algbw(completion),
        busbw_bytes_per_s: c.busbw(completion),
        bytes_offered: offered,
        bytes_delivered: delivered,
        bytes_dropped: dropped,
        bytes_unroutable: unroutable,
        max_fabric_link_s: max_l,
        mean_fabric_link_s: mean,
        fabric_links: fabric.len(),
        bottleneck: if arg == usize::MAX {
            "none".into()
        } else {
            fab.name(arg as u32)
        },
        steps,
    }
}
