//! One rank's engine: its QPs (requester and responder halves), the NIC that serialises their
//! packets at line rate, and the collective schedule that posts messages step by step.
//!
//! [`Endpoint`] is the state machine on explicit time (`on_datagram`, `poll`, `try_send`);
//! [`run`] drives it over a [`Net`] in real time.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::bth::{Aeth, Bth, DATA_OVERHEAD, Packet, ROCEV2_PORT, UDP_IP_ETH, opcode, syndrome};
use crate::collective::{
    Collective, MAX_ENTROPY_VALUES, Step, entropy_port, qp_number, source_port,
};
use crate::dcqcn::{DcqcnParams, Nanos};
use crate::net::Net;
use crate::receiver::{Placement, PsnTracker, Reply, RxCounters, RxParams};
use crate::sender::{QpSender, TxCounters, TxParams};

/// ECN codepoints in the TOS byte.
pub const ECT0: u8 = 0b10;
pub const CE: u8 = 0b11;

/// Everything one rank needs to run (the JSON the testbed hands to `weft-traffic rank`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankPlan {
    pub rank: u32,
    /// Every rank's address, by rank (this rank's included); each engine listens on
    /// `<address>:port`.
    pub addresses: Vec<Ipv4Addr>,
    #[serde(default = "default_port")]
    pub port: u16,
    pub collective: Collective,
    pub iterations: u32,
    /// QPs per peer connection; a message is split over them.
    #[serde(default = "one")]
    pub lanes: u32,
    /// DSCP of data and ACKs (the lossless class); sent ECT(0).
    pub dscp: u8,
    /// DSCP of CNPs.
    pub cnp_dscp: u8,
    /// DSCP of ACKs and NAKs (None: the data's).
    #[serde(default)]
    pub ack_dscp: Option<u8>,
    /// The NIC's line rate in bytes per second on the wire.
    pub line_rate: f64,
    pub tx: TxParams,
    pub rx: RxParams,
    /// None: [`DcqcnParams::for_line_rate`].
    #[serde(default)]
    pub dcqcn: Option<DcqcnParams>,
    /// At most one CNP per QP this often (DCQCN's notification point).
    pub cnp_interval_ns: Nanos,
    /// Start at this wall-clock time (ns since the Unix epoch), so ranks in different
    /// namespaces start together; None: at once.
    #[serde(default)]
    pub start_at_unix_ns: Option<u64>,
    /// Give up (and report `complete: false`) after this long.
    pub deadline_ms: u64,
    /// After finishing, keep answering peers (ACKs to retransmissions) this long.
    pub linger_ms: u64,
    /// DSCP switches give a trimmed packet (the fabric's `trim.dscp`): a data packet arriving
    /// with it lost its payload on the way and is answered with a NACK of its PSN at once.
    /// None: the fabric does not trim.
    #[serde(default)]
    pub trim_dscp: Option<u8>,
    /// Spray each QP's packets over several UDP source ports (entropy values): a fabric that
    /// hashes the 5-tuple puts each value on its own path. None: one source port per QP.
    #[serde(default)]
    pub entropy: Option<Entropy>,
}

/// How a QP sprays: its packets take source port [`entropy_port`]`(qp, k)`, k going round
/// `values` values, moving on every `every` packets (1: per packet; the window of a flowlet-like
/// burst otherwise). Round robin, not random, so every value carries the same share and a
/// retransmission takes the value after the one that was trimmed: usually another path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entropy {
    /// 1..=16.
    pub values: u16,
    /// Packets per value before the next, at least 1.
    pub every: u32,
}

fn default_port() -> u16 {
    ROCEV2_PORT
}
fn one() -> u32 {
    1
}

impl RankPlan {
    /// Defaults for `mtu`-byte payloads at `line_rate` bytes/s, toward a NIC of `placement`.
    pub fn defaults(
        rank: u32,
        addresses: Vec<Ipv4Addr>,
        collective: Collective,
        line_rate: f64,
        mtu: usize,
        placement: Placement,
    ) -> RankPlan {
        let pkt_ns = ((mtu + DATA_OVERHEAD + UDP_IP_ETH) as f64 / line_rate.max(1.0) * 1e9) as u64;
        RankPlan {
            rank,
            addresses,
            port: ROCEV2_PORT,
            collective,
            iterations: 1,
            lanes: 1,
            dscp: 26,
            cnp_dscp: 48,
            ack_dscp: None,
            line_rate,
            tx: TxParams {
                mtu,
                // The smallest timeout; it grows with the measured round trip.
                rto_ns: (30 * pkt_ns).max(20_000_000),
                max_outstanding: 256,
            },
            rx: RxParams {
                placement,
                window: 1024,
                // Long enough to outlast an emulated switch starved of CPU for a while: a hole
                // declared lost too early costs a go-back-N of everything after it.
                loss_timeout_ns: (60 * pkt_ns).max(20_000_000),
                nak_timeout_ns: (120 * pkt_ns).max(40_000_000),
                // Coalesced: every ACK costs an emulated switch as much as a data packet.
                ack_every: 16,
                ack_delay_ns: (16 * pkt_ns).max(1_000_000),
            },
            dcqcn: None,
            // DCQCN's notification point waits about one rate-update period between CNPs.
            cnp_interval_ns: (4 * pkt_ns).max(1_000_000),
            start_at_unix_ns: None,
            deadline_ms: 60_000,
            // Longer than a retransmission timeout: a peer that missed our last ACK retries.
            linger_ms: (8 * (30 * pkt_ns).max(20_000_000)) / 1_000_000 + 200,
            trim_dscp: None,
            entropy: None,
        }
    }

    pub fn wire_bytes(payload: usize) -> usize {
        payload + DATA_OVERHEAD + UDP_IP_ETH
    }
}

/// The endpoints' timers and window in packet times (one `mtu` data packet at the line rate), so
/// the timing of one fabric can be carried to another of a different speed. The packet model's
/// 100 Gb/s fabric (`weft_simulate::transport::FabricSpec::timing`) reacts to ECN 150 packet times
/// after a mark at the earliest; the testbed's defaults ([`RankPlan::defaults`]) react within 4,
/// which no NIC does at line rate, and so keep an incast from ever filling a queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// The smallest retransmission timeout and the receiver's hole timer (its NAK timer is
    /// twice it). None: keep the plan's.
    #[serde(default)]
    pub rto: Option<f64>,
    /// The notification point's least gap between two CNPs of one QP.
    pub cnp_interval: f64,
    /// DCQCN's alpha-update and rate-increase periods.
    pub dcqcn_period: f64,
    /// Unacknowledged packets one QP may have in flight.
    pub max_outstanding: u32,
}

impl RankPlan {
    /// One data packet's time on the wire at the plan's line rate, ns.
    pub fn packet_ns(&self) -> f64 {
        Self::wire_bytes(self.tx.mtu) as f64 / self.line_rate.max(1.0) * 1e9
    }

    /// Sets the timers of `t`, converted at this plan's packet time.
    pub fn set_timing(&mut self, t: &Timing) {
        let pkt = self.packet_ns();
        let ns = |x: f64| (x * pkt).round().max(1.0) as Nanos;
        if let Some(rto) = t.rto {
            self.tx.rto_ns = ns(rto);
            self.rx.loss_timeout_ns = ns(rto);
            self.rx.nak_timeout_ns = 2 * ns(rto);
            // A peer that missed the last ACK retries after a timeout: stay for a few.
            self.linger_ms = self.linger_ms.max(3 * ns(rto) / 1_000_000 + 200);
        }
        self.cnp_interval_ns = ns(t.cnp_interval);
        let mut d = DcqcnParams::for_line_rate(self.line_rate, Self::wire_bytes(self.tx.mtu));
        d.alpha_period_ns = ns(t.dcqcn_period);
        d.increase_period_ns = ns(t.dcqcn_period);
        self.dcqcn = Some(d);
        self.tx.max_outstanding = t.max_outstanding;
    }
}

/// Start and end of one iteration, ns after the common start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IterationTimes {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// What `weft-traffic` prints: one rank's outcome.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    pub rank: u32,
    pub address: String,
    /// Every iteration finished (all data received, all sends acknowledged).
    pub complete: bool,
    pub error: Option<String>,
    pub iterations: Vec<IterationTimes>,
    /// Per message this rank sent: posted → fully acknowledged, ns.
    pub message_ns: Vec<u64>,
    /// Payload bytes this rank expected and received (placed).
    pub bytes_expected: u64,
    pub bytes_received: u64,
    pub tx: TxCounters,
    pub rx: RxCounters,
    pub ce_marked: u64,
    pub cnps_sent: u64,
    /// DCQCN rate cuts over all QPs: one per CNP received, except CNPs within one round trip
    /// of the previous cut (those are `stale_cnps`, as in DCQCN).
    pub rate_cuts: u64,
    #[serde(default)]
    pub stale_cnps: u64,
    pub bad_packets: u64,
    /// How late this rank really started, ns after the common start (wake-up delay).
    pub start_skew_ns: u64,
}

/// A datagram for the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    pub src_port: u16,
    pub to: SocketAddrV4,
    pub tos: u8,
    pub data: Vec<u8>,
}

struct Qp {
    local: u32,
    remote: u32,
    /// Data packets sent (the entropy value rotates on it).
    sent: u64,
    peer_addr: SocketAddrV4,
    src_port: u16,
    tx: QpSender,
    rx: PsnTracker,
    last_cnp: Option<Nanos>,
    /// Payload placed per message id.
    received: HashMap<u32, u64>,
}

pub struct Endpoint {
    plan: RankPlan,
    schedule: Vec<Step>,
    qps: Vec<Qp>,
    by_local: HashMap<u32, usize>,
    /// QPs of each peer, by lane.
    by_peer: HashMap<u32, Vec<usize>>,
    nic_free: Nanos,
    rr: usize,
    iter: u32,
    step: u32,
    posted: bool,
    times: Vec<IterationTimes>,
    done_at: Option<Nanos>,
    ce_marked: u64,
    cnps_sent: u64,
    bad_packets: u64,
    bytes_expected: u64,
}

impl Endpoint {
    pub fn new(plan: RankPlan, now: Nanos) -> Endpoint {
        let schedule = plan.collective.schedule(plan.rank);
        let mut peers: Vec<u32> = schedule
            .iter()
            .flat_map(|s| s.send.iter().chain(s.recv.iter()).map(|t| t.peer))
            .collect();
        peers.sort_unstable();
        peers.dedup();
        let rate = plan.dcqcn.unwrap_or_else(|| {
            DcqcnParams::for_line_rate(plan.line_rate, RankPlan::wire_bytes(plan.tx.mtu))
        });
        let mut qps = Vec::new();
        let mut by_local = HashMap::new();
        let mut by_peer: HashMap<u32, Vec<usize>> = HashMap::new();
        let lanes = plan.lanes.clamp(1, crate::collective::MAX_LANES);
        for &p in &peers {
            let Some(&ip) = plan.addresses.get(p as usize) else {
                continue;
            };
            for lane in 0..lanes {
                let local = qp_number(p, lane);
                let remote = qp_number(plan.rank, lane);
                by_local.insert(local, qps.len());
                by_peer.entry(p).or_default().push(qps.len());
                qps.push(Qp {
                    local,
                    remote,
                    sent: 0,
                    peer_addr: SocketAddrV4::new(ip, plan.port),
                    src_port: source_port(local),
                    // Both halves start at PSN 0: the PSN of a connection is agreed at setup.
                    tx: QpSender::new(plan.tx, rate, 0, now),
                    rx: PsnTracker::new(plan.rx, 0),
                    last_cnp: None,
                    received: HashMap::new(),
                });
            }
        }
        let per_iter: u64 = schedule
            .iter()
            .flat_map(|s| s.recv.iter())
            .map(|t| t.bytes)
            .sum();
        let mut e = Endpoint {
            bytes_expected: per_iter * u64::from(plan.iterations),
            plan,
            schedule,
            qps,
            by_local,
            by_peer,
            nic_free: now,
            rr: 0,
            iter: 0,
            step: 0,
            posted: false,
            times: Vec::new(),
            done_at: None,
            ce_marked: 0,
            cnps_sent: 0,
            bad_packets: 0,
        };
        e.progress(now);
        e
    }

    fn lanes(&self) -> u32 {
        self.plan.lanes.clamp(1, crate::collective::MAX_LANES)
    }

    fn message_id(&self, iter: u32, step: u32) -> u32 {
        iter * self.schedule.len().max(1) as u32 + step
    }

    /// Bytes lane `lane` of a `bytes`-byte transfer carries.
    fn lane_share(bytes: u64, lanes: u32, lane: u32) -> u64 {
        let l = u64::from(lanes);
        bytes / l + u64::from(u64::from(lane) < bytes % l)
    }

    pub fn done(&self) -> bool {
        self.done_at.is_some()
    }
    pub fn done_at(&self) -> Option<Nanos> {
        self.done_at
    }

    fn recvs_complete(&self, iter: u32, step: u32) -> bool {
        let id = self.message_id(iter, step);
        let lanes = self.lanes();
        self.schedule[step as usize].recv.iter().all(|t| {
            self.by_peer.get(&t.peer).is_some_and(|qs| {
                qs.iter().enumerate().all(|(lane, &q)| {
                    let want = Self::lane_share(t.bytes, lanes, lane as u32);
                    self.qps[q].received.get(&id).copied().unwrap_or(0) >= want
                })
            })
        })
    }

    fn sends_idle(&self) -> bool {
        self.qps.iter().all(|q| q.tx.idle())
    }

    /// Posts what the schedule allows now.
    fn progress(&mut self, now: Nanos) {
        loop {
            if self.done_at.is_some() {
                return;
            }
            if self.iter >= self.plan.iterations || self.schedule.is_empty() {
                if self.sends_idle() {
                    self.done_at = Some(now);
                }
                return;
            }
            if !self.posted {
                if self.step == 0 {
                    self.times.push(IterationTimes {
                        start_ns: now,
                        end_ns: 0,
                    });
                }
                let id = self.message_id(self.iter, self.step);
                let lanes = self.lanes();
                let sends = self.schedule[self.step as usize].send.clone();
                for t in sends {
                    if let Some(qs) = self.by_peer.get(&t.peer) {
                        for (lane, &q) in qs.iter().enumerate() {
                            let b = Self::lane_share(t.bytes, lanes, lane as u32);
                            self.qps[q].tx.post(now, id, b);
                        }
                    }
                }
                self.posted = true;
            }
            if !self.recvs_complete(self.iter, self.step) {
                return;
            }
            if (self.step as usize) + 1 < self.schedule.len() {
                self.step += 1;
                self.posted = false;
                continue;
            }
            if !self.sends_idle() {
                return;
            }
            if let Some(t) = self.times.last_mut() {
                t.end_ns = now;
            }
            self.iter += 1;
            self.step = 0;
            self.posted = false;
        }
    }

    fn tos(&self) -> u8 {
        (self.plan.dscp << 2) | ECT0
    }

    fn reply(&self, q: &Qp, r: Reply, buf: &mut Vec<u8>) -> Out {
        let (psn, syn) = match r {
            Reply::Ack { psn } => (psn, syndrome::ACK),
            Reply::Nak { psn } => (psn, syndrome::NAK_PSN_SEQUENCE),
            Reply::Trimmed { psn } => (psn, syndrome::NAK_TRIMMED),
        };
        Packet::Ack {
            bth: Bth {
                opcode: opcode::RC_ACK,
                dest_qp: q.remote,
                psn,
                pkey: 0xffff,
                ..Bth::default()
            },
            aeth: Aeth {
                syndrome: syn,
                msn: 0,
            },
        }
        .encode(buf);
        Out {
            src_port: self.plan.port,
            to: q.peer_addr,
            tos: (self.plan.ack_dscp.unwrap_or(self.plan.dscp) << 2) | ECT0,
            data: buf.clone(),
        }
    }

    /// One arriving datagram; returns what to send back.
    pub fn on_datagram(&mut self, now: Nanos, tos: u8, data: &[u8]) -> Vec<Out> {
        if self.plan.trim_dscp == Some(tos >> 2) {
            return self.on_trimmed(now, data);
        }
        let mut out = Vec::new();
        let Ok(pkt) = Packet::decode(data) else {
            self.bad_packets += 1;
            return out;
        };
        let Some(&qi) = self.by_local.get(&pkt.bth().dest_qp) else {
            self.bad_packets += 1;
            return out;
        };
        let mut buf = Vec::with_capacity(64);
        match pkt {
            Packet::Data { bth, reth, payload } => {
                if tos & 0b11 == CE {
                    self.ce_marked += 1;
                    let interval = self.plan.cnp_interval_ns;
                    let q = &mut self.qps[qi];
                    if q.last_cnp.is_none_or(|t| now.saturating_sub(t) >= interval) {
                        q.last_cnp = Some(now);
                        Packet::Cnp {
                            bth: Bth {
                                opcode: opcode::CNP,
                                becn: true,
                                dest_qp: q.remote,
                                pkey: 0xffff,
                                ..Bth::default()
                            },
                        }
                        .encode(&mut buf);
                        out.push(Out {
                            src_port: self.plan.port,
                            to: q.peer_addr,
                            tos: self.plan.cnp_dscp << 2,
                            data: buf.clone(),
                        });
                        self.cnps_sent += 1;
                    }
                }
                let q = &mut self.qps[qi];
                let a =
                    q.rx.on_data(now, bth.psn, payload, reth.retransmission(), bth.ack_req);
                if a.placed {
                    *q.received.entry(reth.message()).or_insert(0) += payload as u64;
                }
                if let Some(r) = a.reply {
                    let o = self.reply(&self.qps[qi], r, &mut buf);
                    out.push(o);
                }
            }
            Packet::Ack { bth, aeth } => {
                let q = &mut self.qps[qi];
                match aeth.syndrome {
                    syndrome::ACK => q.tx.on_ack(now, bth.psn),
                    syndrome::NAK_TRIMMED => q.tx.on_trim_nak(now, bth.psn),
                    _ => q.tx.on_nak(now, bth.psn),
                }
            }
            Packet::Cnp { .. } => self.qps[qi].tx.on_cnp(now),
        }
        self.progress(now);
        out
    }

    /// A data packet a switch trimmed: only its BTH is needed (the trim size may have cut the
    /// RETH and the ICRC); the reply is the NACK of its PSN.
    fn on_trimmed(&mut self, now: Nanos, data: &[u8]) -> Vec<Out> {
        let bth = match Bth::decode(data) {
            Ok(b) if (opcode::RC_WRITE_FIRST..=opcode::RC_WRITE_ONLY).contains(&b.opcode) => b,
            _ => {
                self.bad_packets += 1;
                return Vec::new();
            }
        };
        let Some(&qi) = self.by_local.get(&bth.dest_qp) else {
            self.bad_packets += 1;
            return Vec::new();
        };
        let mut buf = Vec::with_capacity(64);
        let reply = self.qps[qi].rx.on_trimmed(now, bth.psn);
        reply
            .map(|r| self.reply(&self.qps[qi], r, &mut buf))
            .into_iter()
            .collect()
    }

    /// Timers (retransmission, loss detection); returns NAKs to send.
    pub fn poll(&mut self, now: Nanos) -> Vec<Out> {
        let mut out = Vec::new();
        let mut buf = Vec::with_capacity(64);
        for i in 0..self.qps.len() {
            self.qps[i].tx.poll(now);
            if let Some(r) = self.qps[i].rx.poll(now) {
                let o = self.reply(&self.qps[i], r, &mut buf);
                out.push(o);
            }
        }
        self.progress(now);
        out
    }

    /// The next data packet, if the NIC is free and a QP may send.
    pub fn try_send(&mut self, now: Nanos) -> Option<Out> {
        if now < self.nic_free || self.qps.is_empty() {
            return None;
        }
        let n = self.qps.len();
        let entropy = self.plan.entropy;
        for k in 0..n {
            let i = (self.rr + k) % n;
            let q = &mut self.qps[i];
            if let Some(d) = q.tx.next_packet(now, RankPlan::wire_bytes) {
                self.rr = i + 1;
                let src_port = match entropy {
                    Some(e) => {
                        let values = u64::from(e.values.clamp(1, MAX_ENTROPY_VALUES));
                        let v = (q.sent / u64::from(e.every.max(1))) % values;
                        entropy_port(q.local, v as u16)
                    }
                    None => q.src_port,
                };
                q.sent += 1;
                let mut buf = Vec::with_capacity(d.payload + DATA_OVERHEAD);
                Packet::Data {
                    bth: Bth {
                        opcode: d.opcode,
                        dest_qp: q.remote,
                        psn: d.psn,
                        ack_req: d.ack_req,
                        pkey: 0xffff,
                        ..Bth::default()
                    },
                    reth: d.reth,
                    payload: d.payload,
                }
                .encode(&mut buf);
                let wire = RankPlan::wire_bytes(d.payload) as f64;
                let t = (wire / self.plan.line_rate.max(1.0) * 1e9) as Nanos;
                // As the QPs' pacing: a late wake-up catches up at most two packets.
                self.nic_free = self.nic_free.max(now.saturating_sub(2 * t)) + t;
                return Some(Out {
                    src_port,
                    to: q.peer_addr,
                    tos: self.tos(),
                    data: buf,
                });
            }
        }
        None
    }

    /// When the engine next has something to do (None: only an arriving packet).
    pub fn next_deadline(&self) -> Option<Nanos> {
        let mut d: Option<Nanos> = None;
        let mut take = |t: Nanos| d = Some(d.map_or(t, |x: Nanos| x.min(t)));
        for q in &self.qps {
            if let Some(t) = q.tx.send_deadline() {
                take(t.max(self.nic_free));
            }
            if let Some(t) = q.tx.rto_deadline() {
                take(t);
            }
            if let Some(t) = q.rx.next_deadline() {
                take(t);
            }
        }
        d
    }

    pub fn report(&self, complete: bool) -> RankReport {
        let mut tx = TxCounters::default();
        let mut rx = RxCounters::default();
        let mut message_ns = Vec::new();
        let mut bytes_received = 0;
        for q in &self.qps {
            let t = q.tx.counters;
            tx.packets += t.packets;
            tx.payload_bytes += t.payload_bytes;
            tx.retransmitted += t.retransmitted;
            tx.naks += t.naks;
            tx.timeouts += t.timeouts;
            tx.cnps += t.cnps;
            tx.retransmitted_bytes += t.retransmitted_bytes;
            tx.trim_naks += t.trim_naks;
            let r = q.rx.counters;
            rx.packets += r.packets;
            rx.placed += r.placed;
            rx.bytes_placed += r.bytes_placed;
            rx.duplicates += r.duplicates;
            rx.out_of_order += r.out_of_order;
            rx.max_reorder_depth = rx.max_reorder_depth.max(r.max_reorder_depth);
            rx.sequence_drops += r.sequence_drops;
            rx.beyond_window += r.beyond_window;
            rx.losses_detected += r.losses_detected;
            rx.naks += r.naks;
            rx.trimmed += r.trimmed;
            message_ns.extend(q.tx.completed.iter().map(|c| c.acked - c.posted));
            bytes_received += q.received.values().sum::<u64>();
        }
        RankReport {
            rank: self.plan.rank,
            address: self
                .plan
                .addresses
                .get(self.plan.rank as usize)
                .map(|a| a.to_string())
                .unwrap_or_default(),
            complete,
            error: None,
            iterations: self.times.clone(),
            message_ns,
            bytes_expected: self.bytes_expected,
            bytes_received,
            tx,
            rx,
            ce_marked: self.ce_marked,
            cnps_sent: self.cnps_sent,
            rate_cuts: self.qps.iter().map(|q| q.tx.rate.cuts).sum(),
            stale_cnps: self.qps.iter().map(|q| q.tx.rate.stale_cnps).sum(),
            bad_packets: self.bad_packets,
            start_skew_ns: 0,
        }
    }
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Runs one rank to completion (or its deadline) over `net`.
pub fn run(plan: RankPlan, net: &mut dyn Net) -> RankReport {
    // Wait for the common start, sleeping most of the way and spinning the last millisecond.
    let mut skew = 0;
    if let Some(at) = plan.start_at_unix_ns {
        loop {
            let now = unix_ns();
            if now >= at {
                skew = now - at;
                break;
            }
            let left = at - now;
            if left > 2_000_000 {
                std::thread::sleep(Duration::from_nanos(left - 1_000_000));
            } else {
                std::hint::spin_loop();
            }
        }
    }
    let t0 = Instant::now();
    let clock = move || t0.elapsed().as_nanos() as Nanos + skew;
    let deadline = plan.deadline_ms * 1_000_000;
    let linger = plan.linger_ms * 1_000_000;
    let mut e = Endpoint::new(plan, clock());
    let mut buf = vec![0u8; 65536];
    let mut error = None;
    let send_all = |net: &mut dyn Net, outs: Vec<Out>, error: &mut Option<String>| {
        for o in outs {
            if let Err(err) = net.send(o.src_port, o.to, o.tos, &o.data) {
                error.get_or_insert_with(|| format!("send to {}: {err}", o.to));
            }
        }
    };
    loop {
        let now = clock();
        let outs = e.poll(now);
        send_all(net, outs, &mut error);
        while let Some(o) = e.try_send(clock()) {
            send_all(net, vec![o], &mut error);
        }
        let now = clock();
        if let Some(d) = e.done_at()
            && now.saturating_sub(d) >= linger
        {
            break;
        }
        if now >= deadline {
            break;
        }
        let mut wake = e.next_deadline().unwrap_or(now + 20_000_000).min(deadline);
        if let Some(d) = e.done_at() {
            wake = wake.min(d + linger);
        }
        // Short waits only: a packet may arrive any time, and the socket wakes us for it.
        let wait = Duration::from_nanos(wake.saturating_sub(now).clamp(20_000, 20_000_000));
        let mut timeout = wait;
        loop {
            match net.recv(&mut buf, timeout) {
                Ok(Some(r)) => {
                    let now = clock();
                    let outs = e.on_datagram(now, r.tos, &buf[..r.len]);
                    send_all(net, outs, &mut error);
                    // Drain what else is queued, without waiting.
                    timeout = Duration::ZERO;
                }
                Ok(None) => break,
                Err(err) => {
                    error.get_or_insert_with(|| format!("receive: {err}"));
                    break;
                }
            }
        }
    }
    let mut r = e.report(e.done());
    r.error = error;
    r.start_skew_ns = skew;
    r
}
