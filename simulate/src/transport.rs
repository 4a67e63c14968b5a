//! A packet-level model of loss handling on a leaf-spine fabric: lossless PFC, lossy drop-tail
//! with timeout retransmission, and lossy packet trimming with NACKs, side by side on the same
//! traffic. Hosts run weft-traffic's real endpoints ([`weft_traffic::engine::Endpoint`]: PSN
//! tracking, out-of-order placement, DCQCN-like pacing, the trimmed-packet NACK and entropy
//! spraying); the model moves their datagrams through switch queues on explicit time. Pure: no
//! I/O, no clock.
//!
//! ```text
//!   host ─ NIC queue ─▶ leaf ─ up port (hash, or entropy: source port only) ─▶ spine ─▶ leaf ─▶ host
//!   every switch port: strict priority  trimmed (DSCP trim) > control (ACK/NACK/CNP) > data
//!     data enqueue:   ECN CE above kmin (RED to kmax, ECT only), then per arm
//!       Pfc       never dropped; each switch counts the data packets it holds per ingress
//!                 port: >= xoff sends PAUSE upstream (that port's data queue stops after the
//!                 link delay), <= xon sends RESUME; host NICs pause too
//!       DropTail  dropped when the data queue holds `queue_packets`
//!       Trim      at >= `trim_threshold` a data packet longer than `trim_bytes` is cut to
//!                 it, re-marked to the trimmed DSCP and queued in the trimmed queue (dropped
//!                 only if that is full); otherwise as DropTail
//! ```
//!
//! What it is not: a buffer-accurate switch (queues count packets, as BMv2's do; PFC headroom
//! is unbounded, so PFC never drops), nor the compiled tables (two tiers, hashing as the
//! pipeline's selector does). It compares loss handling on one fabric and one workload.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::Ipv4Addr;

use weft_traffic::bth::{Bth, DATA_OVERHEAD, ROCEV2_PORT, UDP_IP_ETH};
use weft_traffic::collective::{Collective, Kind};
use weft_traffic::dcqcn::Nanos;
use weft_traffic::engine::{Endpoint, Entropy, Out, RankPlan, Timing};
use weft_traffic::receiver::Placement;

use crate::hash::{FlowKey, Rng};

/// How switches handle a full data queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arm {
    /// Lossless: PFC pauses the upstream port instead of dropping.
    Pfc,
    /// Lossy: tail drop; the sender finds out by timeout (or a hole timer).
    DropTail,
    /// Lossy with trimming: the receiver NACKs the trimmed header at once.
    Trim,
}

impl Arm {
    pub fn as_str(self) -> &'static str {
        match self {
            Arm::Pfc => "lossless + PFC",
            Arm::DropTail => "lossy drop-tail + timeout",
            Arm::Trim => "lossy + trimming + NACK",
        }
    }
}

/// The fabric and the switches' queue settings (packets, as BMv2 counts).
#[derive(Debug, Clone, Copy)]
pub struct FabricSpec {
    pub spines: usize,
    pub leaves: usize,
    pub hosts_per_leaf: usize,
    pub link_gbps: f64,
    pub link_delay_ns: Nanos,
    /// RoCE payload per packet.
    pub mtu: usize,
    /// Capacity of a data queue (lossy arms) and of the trimmed queue.
    pub queue_packets: usize,
    pub trim_threshold: usize,
    pub trim_bytes: usize,
    pub xoff: usize,
    pub xon: usize,
    pub kmin: usize,
    pub kmax: usize,
    pub pmax: f64,
    /// The sender's smallest retransmission timeout and the receiver's hole timer.
    pub rto_ns: Nanos,
}

impl Default for FabricSpec {
    /// 2 spines, 4 leaves, 4 hosts per leaf at 100 Gb/s, 1 µs links, 4 KB payloads, 64-packet
    /// queues (BMv2's default) trimming at 48 (the plugin's three quarters) to 256 bytes, PFC
    /// xoff 24 / xon 16 packets per ingress port, ECN from 16 to 48 packets, a 1 ms minimum
    /// retransmission timeout.
    fn default() -> Self {
        FabricSpec {
            spines: 2,
            leaves: 4,
            hosts_per_leaf: 4,
            link_gbps: 100.0,
            link_delay_ns: 1_000,
            mtu: 4096,
            queue_packets: 64,
            trim_threshold: 48,
            trim_bytes: 256,
            xoff: 24,
            xon: 16,
            kmin: 16,
            kmax: 48,
            pmax: 0.2,
            rto_ns: 1_000_000,
        }
    }
}

/// DCQCN's notification point: at most one CNP per QP this often (a NIC's usual 50 µs).
const CNP_INTERVAL_NS: Nanos = 50_000;
/// DCQCN's alpha-update and rate-increase timers (the DCQCN paper's 55 µs).
const DCQCN_PERIOD_NS: Nanos = 55_000;
/// Unacknowledged packets per QP.
const MAX_OUTSTANDING: u32 = 64;

impl FabricSpec {
    /// One data packet's time on a link, ns.
    pub fn packet_ns(&self) -> f64 {
        (self.mtu + DATA_OVERHEAD + UDP_IP_ETH) as f64 * 8.0 / self.link_gbps
    }

    /// The endpoints' timers in this fabric's packet times, as the model runs them: at the
    /// defaults (100 Gb/s, 4 KB) a CNP gap of 150, DCQCN periods of 165 and a smallest
    /// retransmission timeout of 3,000 packet times.
    pub fn timing(&self) -> Timing {
        let pkt = self.packet_ns();
        Timing {
            rto: Some(self.rto_ns as f64 / pkt),
            cnp_interval: CNP_INTERVAL_NS as f64 / pkt,
            dcqcn_period: DCQCN_PERIOD_NS as f64 / pkt,
            max_outstanding: MAX_OUTSTANDING,
        }
    }
}

/// The traffic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// `senders` hosts on the first leaves send `bytes` each to the first host of the third
    /// leaf; with `victim`, a host of the first leaf sends to a host of the fourth leaf at the
    /// same time (its path shares the first leaf's uplinks and the spines, not the incast's
    /// last hop).
    Incast {
        senders: usize,
        bytes: u64,
        victim: bool,
    },
    /// Every host sends `bytes` to every other.
    AllToAll { bytes: u64 },
    /// Only the victim flow of [`Workload::Incast`] (its throughput without the incast).
    VictimAlone { bytes: u64 },
}

const DATA_DSCP: u8 = 26;
const CONTROL_DSCP: u8 = 48;
const TRIM_DSCP: u8 = 11;
/// Strict priorities of a port's queues.
const Q_TRIMMED: usize = 0;
const Q_CONTROL: usize = 1;
const Q_DATA: usize = 2;
/// A host NIC holds this many data packets before the endpoint waits for it.
const NIC_QUEUE: usize = 2;
const PFC_FRAME_BYTES: usize = 64;

/// What one run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Per message of the workload (victim excluded): posted → fully acknowledged, ns.
    pub completion_ns: Vec<u64>,
    /// When the last message of the workload completed.
    pub finish_ns: u64,
    pub retransmitted_bytes: u64,
    pub pause_frames: u64,
    pub dropped: u64,
    pub trimmed: u64,
    pub timeouts: u64,
    /// Victim goodput (payload its receiver placed) while the workload ran, Gb/s.
    pub victim_gbps: Option<f64>,
    /// Every rank completed.
    pub complete: bool,
}

impl Outcome {
    /// The `q`-quantile (0..=1) of the completion times, nearest rank.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        quantile(&self.completion_ns, q)
    }
}

/// The `q`-quantile (nearest rank) of `v`; 0 when empty.
pub fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let i = ((q.clamp(0.0, 1.0) * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[i]
}

#[derive(Debug, Clone)]
struct Pkt {
    src: usize,
    dst: usize,
    src_port: u16,
    tos: u8,
    data: Vec<u8>,
}

impl Pkt {
    fn wire(&self) -> usize {
        self.data.len() + UDP_IP_ETH
    }
    fn dscp(&self) -> u8 {
        self.tos >> 2
    }
    fn dst_qp(&self) -> u32 {
        Bth::decode(&self.data).map_or(0, |b| b.dest_qp)
    }
}

/// A directed link: its transmit side.
struct Port {
    node: usize,
    peer: usize,
    /// The port on the peer that sends back on this link.
    reverse: usize,
    queues: [VecDeque<(Pkt, usize)>; 3],
    busy_until: Nanos,
    busy: bool,
    /// PFC: the data queue is paused.
    paused: bool,
    /// PFC: this port's switch has paused the peer's data queue feeding it.
    paused_peer: bool,
    /// PFC: data packets that entered the node by this port and are still queued there.
    held: usize,
}

enum Ev {
    PortFree(usize),
    Arrive { port: usize, pkt: Pkt },
    Pause { port: usize, on: bool },
    Wake(usize),
}

struct Host {
    endpoint: Option<Endpoint>,
    addr: Ipv4Addr,
    wake_at: Option<Nanos>,
    victim_rx: bool,
}

struct Model {
    f: FabricSpec,
    arm: Arm,
    spray: bool,
    ports: Vec<Port>,
    /// Out-ports of each node (hosts first, then leaves, then spines).
    out: Vec<Vec<usize>>,
    hosts: Vec<Host>,
    by_addr: HashMap<Ipv4Addr, usize>,
    heap: BinaryHeap<Reverse<(Nanos, u64)>>,
    events: HashMap<u64, Ev>,
    seq: u64,
    rng: Rng,
    o: Outcome,
}

fn host_count(f: &FabricSpec) -> usize {
    f.leaves * f.hosts_per_leaf
}

impl Model {
    fn new(f: FabricSpec, arm: Arm, spray: bool, seed: u64) -> Model {
        let nh = host_count(&f);
        let nodes = nh + f.leaves + f.spines;
        let mut m = Model {
            f,
            arm,
            spray,
            ports: Vec::new(),
            out: vec![Vec::new(); nodes],
            hosts: (0..nh)
                .map(|h| Host {
                    endpoint: None,
                    addr: Ipv4Addr::new(
                        10,
                        0,
                        (h / f.hosts_per_leaf) as u8,
                        (h % f.hosts_per_leaf) as u8 + 2,
                    ),
                    wake_at: None,
                    victim_rx: false,
                })
                .collect(),
            by_addr: HashMap::new(),
            heap: BinaryHeap::new(),
            events: HashMap::new(),
            seq: 0,
            rng: Rng::new(seed),
            o: Outcome::default(),
        };
        for (i, h) in m.hosts.iter().enumerate() {
            m.by_addr.insert(h.addr, i);
        }
        for h in 0..nh {
            m.link(h, nh + h / f.hosts_per_leaf);
        }
        for l in 0..f.leaves {
            for s in 0..f.spines {
                m.link(nh + l, nh + f.leaves + s);
            }
        }
        m
    }

    fn link(&mut self, a: usize, b: usize) {
        let i = self.ports.len();
        for (node, peer, reverse) in [(a, b, i + 1), (b, a, i)] {
            self.out[node].push(self.ports.len());
            self.ports.push(Port {
                node,
                peer,
                reverse,
                queues: Default::default(),
                busy_until: 0,
                busy: false,
                paused: false,
                paused_peer: false,
                held: 0,
            });
        }
    }

    fn at(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.events.insert(self.seq, ev);
        self.heap.push(Reverse((t, self.seq)));
    }

    fn tx_ns(&self, bytes: usize) -> Nanos {
        ((bytes * 8) as f64 / self.f.link_gbps).ceil() as Nanos
    }

    fn leaf_of(&self, host: usize) -> usize {
        host_count(&self.f) + host / self.f.hosts_per_leaf
    }

    /// The port a packet at `node` leaves by.
    fn route(&self, node: usize, p: &Pkt) -> usize {
        let nh = host_count(&self.f);
        if node < nh {
            return self.out[node][0];
        }
        let dst_leaf = self.leaf_of(p.dst);
        if node >= nh + self.f.leaves {
            // A spine: its ports are in leaf order.
            return self.out[node][dst_leaf - nh];
        }
        if node == dst_leaf {
            return self.out[node][p.dst % self.f.hosts_per_leaf];
        }
        let key = FlowKey {
            src: self.hosts[p.src].addr,
            dst: self.hosts[p.dst].addr,
            src_port: p.src_port,
            dst_port: ROCEV2_PORT,
            dst_qp: p.dst_qp(),
        };
        let seed = crate::hash::hash_seed(node as u64);
        let h = if self.spray {
            key.entropy_hash(seed)
        } else {
            key.selector_hash(seed)
        };
        self.out[node][self.f.hosts_per_leaf + h as usize % self.f.spines]
    }

    fn queue_of(p: &Pkt) -> usize {
        match p.dscp() {
            TRIM_DSCP => Q_TRIMMED,
            DATA_DSCP => Q_DATA,
            _ => Q_CONTROL,
        }
    }

    /// A packet arriving at `node` by `in_port` (this node's port facing the sender; None:
    /// from its own endpoint) joins a queue.
    fn enqueue(&mut self, now: Nanos, node: usize, in_port: Option<usize>, mut p: Pkt) {
        let port = self.route(node, &p);
        let mut q = Self::queue_of(&p);
        let switch = node >= host_count(&self.f);
        if switch && q == Q_DATA {
            let depth = self.ports[port].queues[Q_DATA].len();
            self.ecn_mark(depth, &mut p);
            let full = depth >= self.f.queue_packets;
            match self.arm {
                Arm::Pfc => {}
                Arm::DropTail if full => {
                    self.o.dropped += 1;
                    return;
                }
                Arm::DropTail => {}
                Arm::Trim => {
                    let trim_at = UDP_IP_ETH.max(self.f.trim_bytes) - UDP_IP_ETH;
                    if depth >= self.f.trim_threshold && p.wire() > self.f.trim_bytes {
                        p.data.truncate(trim_at);
                        p.tos = (TRIM_DSCP << 2) | (p.tos & 3);
                        q = Q_TRIMMED;
                        self.o.trimmed += 1;
                        if self.ports[port].queues[Q_TRIMMED].len() >= self.f.queue_packets {
                            self.o.dropped += 1;
                            return;
                        }
                    } else if full {
                        self.o.dropped += 1;
                        return;
                    }
                }
            }
        }
        let held_by = match (self.arm, switch, q, in_port) {
            (Arm::Pfc, true, Q_DATA, Some(i)) => i,
            _ => usize::MAX,
        };
        self.ports[port].queues[q].push_back((p, held_by));
        if held_by != usize::MAX {
            self.ports[held_by].held += 1;
            self.pfc_check(now, held_by);
        }
        self.kick(now, port);
    }

    fn ecn_mark(&mut self, depth: usize, p: &mut Pkt) {
        if p.tos & 3 == 0 || depth <= self.f.kmin {
            return;
        }
        let mark = depth >= self.f.kmax || {
            let prob = self.f.pmax * (depth - self.f.kmin) as f64
                / (self.f.kmax - self.f.kmin).max(1) as f64;
            (self.rng.below(1 << 20) as f64) < prob * f64::from(1 << 20)
        };
        if mark {
            p.tos |= 3;
        }
    }

    /// PFC at the switch that owns `port` (the port facing the upstream): pause or resume the
    /// upstream's data queue toward it.
    fn pfc_check(&mut self, now: Nanos, port: usize) {
        let (held, paused) = (self.ports[port].held, self.ports[port].paused_peer);
        let on = if !paused && held >= self.f.xoff {
            true
        } else if paused && held <= self.f.xon {
            false
        } else {
            return;
        };
        self.ports[port].paused_peer = on;
        self.o.pause_frames += 1;
        let upstream = self.ports[port].reverse;
        let t = now + self.tx_ns(PFC_FRAME_BYTES) + self.f.link_delay_ns;
        self.at(t, Ev::Pause { port: upstream, on });
    }

    /// Starts the next transmission on `port` if it is idle.
    fn kick(&mut self, now: Nanos, port: usize) {
        if self.ports[port].busy {
            return;
        }
        let p = &mut self.ports[port];
        let next = [Q_TRIMMED, Q_CONTROL, Q_DATA]
            .into_iter()
            .find(|&q| !(p.queues[q].is_empty() || (q == Q_DATA && p.paused)));
        let Some(q) = next else { return };
        let Some((pkt, held_by)) = p.queues[q].pop_front() else {
            return;
        };
        let start = now.max(p.busy_until);
        let done = start + self.tx_ns(pkt.wire());
        let p = &mut self.ports[port];
        p.busy = true;
        p.busy_until = done;
        let node = p.node;
        if held_by != usize::MAX {
            self.ports[held_by].held -= 1;
            self.pfc_check(now, held_by);
        }
        self.at(done, Ev::PortFree(port));
        self.at(done + self.f.link_delay_ns, Ev::Arrive { port, pkt });
        if node < host_count(&self.f) && q == Q_DATA {
            self.wake(now, node);
        }
    }

    fn wake(&mut self, t: Nanos, host: usize) {
        let h = &mut self.hosts[host];
        if h.wake_at.is_none_or(|w| w > t) {
            h.wake_at = Some(t);
            self.at(t, Ev::Wake(host));
        }
    }

    /// The host's endpoint: timers, then data while its NIC has room.
    fn service(&mut self, now: Nanos, host: usize) {
        if self.hosts[host].wake_at != Some(now) {
            return;
        }
        self.hosts[host].wake_at = None;
        let Some(mut e) = self.hosts[host].endpoint.take() else {
            return;
        };
        let mut outs = e.poll(now);
        let nic = self.out[host][0];
        let room = NIC_QUEUE.saturating_sub(self.ports[nic].queues[Q_DATA].len());
        for _ in 0..room {
            match e.try_send(now) {
                Some(o) => outs.push(o),
                None => break,
            }
        }
        let next = e.next_deadline();
        self.hosts[host].endpoint = Some(e);
        self.send_outs(now, host, outs);
        // A full NIC wakes the host when a data packet leaves it (kick); timers wait for that,
        // as a paused NIC's would.
        if self.ports[nic].queues[Q_DATA].len() < NIC_QUEUE
            && let Some(t) = next
        {
            self.wake(t.max(now + 1), host);
        }
    }

    fn send_outs(&mut self, now: Nanos, host: usize, outs: Vec<Out>) {
        for o in outs {
            let Some(&dst) = self.by_addr.get(o.to.ip()) else {
                continue;
            };
            let pkt = Pkt {
                src: host,
                dst,
                src_port: o.src_port,
                tos: o.tos,
                data: o.data,
            };
            self.enqueue(now, host, None, pkt);
        }
    }

    fn deliver(&mut self, now: Nanos, host: usize, pkt: Pkt) {
        let Some(mut e) = self.hosts[host].endpoint.take() else {
            return;
        };
        let outs = e.on_datagram(now, pkt.tos, &pkt.data);
        let next = e.next_deadline();
        self.hosts[host].endpoint = Some(e);
        self.send_outs(now, host, outs);
        self.wake(next.map_or(now, |t| t.max(now)), host);
    }

    fn step(&mut self, now: Nanos, ev: Ev) {
        match ev {
            Ev::PortFree(port) => {
                self.ports[port].busy = false;
                self.kick(now, port);
            }
            Ev::Arrive { port, pkt } => {
                let node = self.ports[port].peer;
                if node < host_count(&self.f) {
                    self.deliver(now, node, pkt);
                } else {
                    // Arrived by the peer's side of this link: that is the ingress port.
                    let ingress = self.ports[port].reverse;
                    self.enqueue(now, node, Some(ingress), pkt);
                }
            }
            Ev::Pause { port, on } => {
                self.ports[port].paused = on;
                if !on {
                    self.kick(now, port);
                }
            }
            Ev::Wake(h) => self.service(now, h),
        }
    }
}

/// One rank set: the collective and the hosts of its ranks.
struct Job {
    collective: Collective,
    hosts: Vec<usize>,
    victim: bool,
}

fn jobs(f: &FabricSpec, w: Workload) -> Vec<Job> {
    let hpl = f.hosts_per_leaf;
    let victim = || Job {
        collective: Collective {
            kind: Kind::Incast,
            ranks: 2,
            size: 0,
        },
        // Receiver on the fourth leaf, sender on the first.
        hosts: vec![3 * hpl + hpl - 1, hpl - 1],
        victim: true,
    };
    match w {
        Workload::Incast {
            senders,
            bytes,
            victim: v,
        } => {
            // Receiver: first host of the third leaf; senders: the first two leaves' hosts
            // but the victim's, then the other hosts of the third leaf.
            let mut hosts = vec![2 * hpl];
            let candidates = (0..2 * hpl)
                .filter(|h| *h != hpl - 1)
                .chain(2 * hpl + 1..3 * hpl);
            hosts.extend(candidates.take(senders));
            let mut out = vec![Job {
                collective: Collective {
                    kind: Kind::Incast,
                    ranks: hosts.len() as u32,
                    size: bytes,
                },
                hosts,
                victim: false,
            }];
            if v {
                out.push(victim());
            }
            out
        }
        Workload::AllToAll { bytes } => vec![Job {
            collective: Collective {
                kind: Kind::AllToAll,
                ranks: host_count(f) as u32,
                size: bytes * host_count(f) as u64,
            },
            hosts: (0..host_count(f)).collect(),
            victim: false,
        }],
        Workload::VictimAlone { .. } => vec![victim()],
    }
}

fn plan(m: &Model, job: &Job, rank: usize, victim_bytes: u64) -> RankPlan {
    let f = &m.f;
    let line = f.link_gbps * 1e9 / 8.0;
    let addrs: Vec<Ipv4Addr> = job.hosts.iter().map(|h| m.hosts[*h].addr).collect();
    let mut c = job.collective;
    if job.victim {
        c.size = victim_bytes;
    }
    let mut p = RankPlan::defaults(rank as u32, addrs, c, line, f.mtu, Placement::OutOfOrder);
    let pkt_ns = ((f.mtu + DATA_OVERHEAD + UDP_IP_ETH) as f64 / line * 1e9) as Nanos;
    p.ack_dscp = Some(CONTROL_DSCP);
    p.cnp_dscp = CONTROL_DSCP;
    p.dscp = DATA_DSCP;
    p.set_timing(&f.timing());
    p.rx.ack_every = 4;
    p.rx.ack_delay_ns = 8 * pkt_ns;
    if m.arm == Arm::Trim {
        p.trim_dscp = Some(TRIM_DSCP);
    }
    if m.spray {
        p.entropy = Some(Entropy {
            values: 16,
            every: 1,
        });
    }
    p
}

/// Runs `w` on the fabric with `arm` (and entropy spraying if `spray`) until every rank is done
/// or `limit_ns` passes. `seed` draws the ECN marks.
pub fn run(
    f: FabricSpec,
    arm: Arm,
    spray: bool,
    w: Workload,
    seed: u64,
    limit_ns: Nanos,
) -> Outcome {
    let mut m = Model::new(f, arm, spray, seed);
    let victim_bytes = match w {
        Workload::VictimAlone { bytes } => bytes,
        // Longer than the incast, so it runs throughout.
        Workload::Incast { bytes, senders, .. } => bytes * senders as u64 * 4,
        Workload::AllToAll { .. } => 0,
    };
    let js = jobs(&f, w);
    for job in &js {
        for (rank, &h) in job.hosts.iter().enumerate() {
            let e = Endpoint::new(plan(&m, job, rank, victim_bytes), 0);
            m.hosts[h].endpoint = Some(e);
            m.hosts[h].victim_rx = job.victim && rank == 0;
            m.wake(0, h);
        }
    }
    let workload_hosts: Vec<usize> = js
        .iter()
        .filter(|j| !j.victim || matches!(w, Workload::VictimAlone { .. }))
        .flat_map(|j| j.hosts.iter().copied())
        .collect();
    let mut finish = None;
    while let Some(Reverse((t, id))) = m.heap.pop() {
        if t > limit_ns {
            break;
        }
        if let Some(ev) = m.events.remove(&id) {
            m.step(t, ev);
        }
        // The victim only matters while the workload runs.
        if workload_hosts
            .iter()
            .all(|h| m.hosts[*h].endpoint.as_ref().is_some_and(Endpoint::done))
        {
            finish = Some(t);
            break;
        }
    }
    let end = finish.unwrap_or(limit_ns);
    let mut o = std::mem::take(&mut m.o);
    o.finish_ns = end;
    o.complete = finish.is_some();
    for &h in &workload_hosts {
        if let Some(e) = &m.hosts[h].endpoint {
            let r = e.report(e.done());
            o.completion_ns.extend(r.message_ns.iter().copied());
            o.retransmitted_bytes += r.tx.retransmitted_bytes;
            o.timeouts += r.tx.timeouts;
        }
    }
    if let Some(e) = m
        .hosts
        .iter()
        .find(|h| h.victim_rx)
        .and_then(|h| h.endpoint.as_ref())
    {
        let placed = e.report(false).bytes_received;
        o.victim_gbps = Some(placed as f64 * 8.0 / end.max(1) as f64);
    }
    o
}
