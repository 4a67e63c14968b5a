//! The fabric's traffic, from the model (`weft-simulate`) on the compiler's real tables: a
//! background all-to-all, and the extra flows a fault adds (an incast's senders).
//!
//! An all-to-all's one step is every host to every other (4.3 billion flows at k=64): the
//! background places a sample of it, each host to `peers` destinations spread over the fabric
//! (strides of n/peers), hashed per switch as the pipeline hashes them. Loads are scaled so
//! that the busiest link runs at `peak` of its capacity: a fabric under load, not congested.

use std::net::Ipv4Addr;

use weft_compiler::{Desired, LinkState, compile};
use weft_simulate::compiled::{class_of, fib};
use weft_simulate::hash::FlowKey;
use weft_simulate::place::{FlowSpec, Placer};
use weft_simulate::{Fabric, Fib};
use weft_topology::{HostIdx, Topology};
use weft_traffic::bth::ROCEV2_PORT;
use weft_traffic::collective::{qp_number, source_port};

use crate::ports::{Peer, PortId, Ports};

/// Bytes per second per port: what it sends (egress) and receives (ingress).
#[derive(Debug, Clone, Default)]
pub struct Loads {
    pub egress: Vec<f64>,
    pub ingress: Vec<f64>,
}

/// The model's view of the fabric, kept to place a fault's flows later.
pub struct Model {
    pub fib: Fib,
    pub desired: Desired,
}

impl Model {
    pub fn new(t: &Topology) -> Result<Model, crate::TwinError> {
        let class = class_of(t, None).map_err(|e| crate::TwinError::Model(e.to_string()))?;
        let desired = compile(t, &LinkState::all_up(t));
        let fib = fib(t, &desired, &class);
        Ok(Model { fib, desired })
    }
}

fn flow(t: &Topology, src: HostIdx, dst: HostIdx, bytes: f64, id: u64) -> FlowSpec {
    let ip = |h: HostIdx| -> Ipv4Addr { t.hosts[h].ipv4 };
    FlowSpec {
        src,
        dst,
        bytes,
        key: FlowKey {
            src: ip(src),
            dst: ip(dst),
            src_port: source_port(qp_number(dst as u32, 0)),
            dst_port: ROCEV2_PORT,
            dst_qp: qp_number(src as u32, 0),
        },
        id,
        // Far apart: the flowlet never expires, as for a busy NIC's many QPs.
        packet_gap_ns: 1e9,
    }
}

/// Bytes per directed model link of `flows` (src, dst, bytes), as the model places them.
pub fn place(t: &Topology, m: &Model, flows: &[(HostIdx, HostIdx, f64)], seed: u64) -> Vec<f64> {
    let fab = Fabric::new(t, &vec![false; t.links.len()]);
    let mut placer = Placer::new(&fab, &m.fib, seed, true);
    for (i, (s, d, b)) in flows.iter().enumerate() {
        placer.place(&flow(
            t,
            *s,
            *d,
            *b,
            seed ^ (i as u64).wrapping_mul(0x9e37_79b9),
        ));
    }
    placer.finish().bytes
}

/// Per-port egress and ingress of directed model-link bytes `dir` (index as `weft-simulate`'s
/// fabric: switch links 2l/2l+1, then each host's up and down link).
pub fn per_port(t: &Topology, ports: &Ports, dir: &[f64]) -> Loads {
    let fab = Fabric::new(t, &vec![false; t.links.len()]);
    let mut out = Loads {
        egress: vec![0.0; ports.len()],
        ingress: vec![0.0; ports.len()],
    };
    for (id, p) in ports.ports.iter().enumerate() {
        if let Some((d, _)) = fab.port(p.switch, p.index) {
            out.egress[id] = dir.get(d as usize).copied().unwrap_or(0.0);
        }
        out.ingress[id] = match p.peer {
            Peer::None => 0.0,
            Peer::Host(h) => dir.get(fab.host_up(h) as usize).copied().unwrap_or(0.0),
            Peer::Switch(q) => {
                let qp = ports.get(q);
                fab.port(qp.switch, qp.index)
                    .and_then(|(d, _)| dir.get(d as usize).copied())
                    .unwrap_or(0.0)
            }
        };
    }
    out
}

/// The background: each host to `peers` others, scaled so the busiest port runs at `peak`.
pub fn background(
    t: &Topology,
    ports: &Ports,
    m: &Model,
    peers: u32,
    peak: f64,
    seed: u64,
) -> Loads {
    let n = t.hosts.len();
    let mut flows = Vec::with_capacity(n * peers as usize);
    if n > 1 {
        let peers = (peers as usize).clamp(1, n - 1);
        for s in 0..n {
            for j in 0..peers {
                let stride = 1 + j * (n - 1) / peers;
                flows.push((s, (s + stride) % n, 1.0));
            }
        }
    }
    let dir = place(t, m, &flows, seed);
    let mut l = per_port(t, ports, &dir);
    let worst = ports
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| l.egress[i].max(l.ingress[i]) / p.cap.max(1.0))
        .fold(0.0, f64::max);
    if worst > 0.0 {
        let k = peak / worst;
        l.egress.iter_mut().for_each(|x| *x *= k);
        l.ingress.iter_mut().for_each(|x| *x *= k);
    }
    l
}

/// Loads per port (bytes/s), only the ports that carry some.
pub type PortLoads = Vec<(PortId, f64)>;

/// The extra bytes per second per port of flows sending `rate` bytes/s in all from `senders`
/// to `dst` (an incast), as the model places them: (port, egress added) and (host port,
/// ingress added from its host).
pub fn extra(
    t: &Topology,
    ports: &Ports,
    m: &Model,
    senders: &[HostIdx],
    dst: HostIdx,
    rate: f64,
    seed: u64,
) -> (PortLoads, PortLoads) {
    let each = rate / senders.len().max(1) as f64;
    let flows: Vec<(HostIdx, HostIdx, f64)> = senders.iter().map(|s| (*s, dst, each)).collect();
    let dir = place(t, m, &flows, seed);
    let l = per_port(t, ports, &dir);
    let eg = (0..ports.len())
        .filter(|&i| l.egress[i] > 0.0)
        .map(|i| (i as PortId, l.egress[i]))
        .collect();
    let up = senders.iter().map(|s| (ports.of_host[*s], each)).collect();
    (eg, up)
}
