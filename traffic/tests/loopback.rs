//! Engines over real UDP on loopback addresses (no namespaces, no root): a shim around the
//! receiver's socket drops, reorders or CE-marks chosen packets, so go-back-N and out-of-order
//! placement, loss detection and the CNP loop are exercised end to end.
//!
//! Each test uses its own 127.0.x.0/24 addresses: tests run in parallel and every engine binds
//! port 4791 on its address.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use weft_traffic::bth::{Packet, opcode};
use weft_traffic::collective::{Collective, Kind};
use weft_traffic::engine::{CE, RankPlan, RankReport, run};
use weft_traffic::net::{Net, Recv, UdpNet};
use weft_traffic::receiver::Placement;

/// What the shim does with one arriving packet.
enum Act {
    Pass,
    Drop,
    /// Deliver after this many later packets.
    Hold(u32),
    MarkCe,
    /// What a trimming switch does: cut to `TRIM_SIZE` on the wire, re-mark to `TRIM_DSCP`.
    Trim,
}

/// The fabric's trim size (Ethernet included) and trimmed DSCP.
const TRIM_SIZE: usize = 128;
const TRIM_DSCP: u8 = 11;
/// Ethernet + IPv4 + UDP: what the trim size covers besides the datagram.
const ETH_IP_UDP: usize = 14 + 20 + 8;

type Rule = Box<dyn FnMut(&Packet) -> Act + Send>;

struct Shim {
    inner: UdpNet,
    rule: Rule,
    held: Vec<(u32, Recv, Vec<u8>)>,
    ready: VecDeque<(Recv, Vec<u8>)>,
}

impl Net for Shim {
    fn local(&self) -> SocketAddrV4 {
        self.inner.local()
    }
    fn send(&mut self, p: u16, to: SocketAddrV4, tos: u8, d: &[u8]) -> io::Result<()> {
        self.inner.send(p, to, tos, d)
    }
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<Recv>> {
        if let Some((r, d)) = self.ready.pop_front() {
            buf[..d.len()].copy_from_slice(&d);
            return Ok(Some(r));
        }
        let Some(mut r) = self.inner.recv(buf, timeout)? else {
            return Ok(None);
        };
        let mut data = buf[..r.len].to_vec();
        let act = match Packet::decode(&data) {
            Ok(p) => (self.rule)(&p),
            Err(_) => Act::Pass,
        };
        match act {
            Act::Drop => return Ok(None),
            Act::Hold(n) => {
                self.held.push((n, r, data));
                return Ok(None);
            }
            Act::MarkCe => r.tos |= CE,
            Act::Trim => {
                data.truncate(TRIM_SIZE - ETH_IP_UDP);
                r.len = data.len();
                r.tos = (TRIM_DSCP << 2) | (r.tos & 3);
            }
            Act::Pass => {}
        }
        self.ready.push_back((r, data));
        for h in &mut self.held {
            h.0 = h.0.saturating_sub(1);
        }
        while let Some(i) = self.held.iter().position(|h| h.0 == 0) {
            let (_, r, d) = self.held.remove(i);
            self.ready.push_back((r, d));
        }
        let (r, d) = self.ready.pop_front().expect("just pushed");
        buf[..d.len()].copy_from_slice(&d);
        Ok(Some(r))
    }
}

/// First transmission of a data packet with this PSN (retransmissions carry the RETH flag).
fn original(p: &Packet, psn: u32) -> bool {
    matches!(p, Packet::Data { bth, reth, .. } if bth.psn == psn && !reth.retransmission())
}

const PPS: f64 = 2000.0;
const MTU: usize = 1024;

fn plans(kind: Kind, addrs: &[Ipv4Addr], size: u64, placement: Placement) -> Vec<RankPlan> {
    let c = Collective {
        kind,
        ranks: addrs.len() as u32,
        size,
    };
    (0..addrs.len() as u32)
        .map(|r| {
            let mut p = RankPlan::defaults(
                r,
                addrs.to_vec(),
                c,
                PPS * RankPlan::wire_bytes(MTU) as f64,
                MTU,
                placement,
            );
            p.deadline_ms = 20_000;
            p.linger_ms = 300;
            p.tx.rto_ns = 200_000_000;
            p.rx.loss_timeout_ns = 30_000_000;
            p.rx.nak_timeout_ns = 60_000_000;
            p
        })
        .collect()
}

/// Runs every plan in its own thread; `rules[i]` shims rank i's socket.
fn run_all(plans: Vec<RankPlan>, mut rules: Vec<Option<Rule>>) -> Vec<RankReport> {
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64
        + 200_000_000;
    rules.resize_with(plans.len(), || None);
    let handles: Vec<_> = plans
        .into_iter()
        .zip(rules)
        .map(|(mut p, rule)| {
            p.start_at_unix_ns = Some(start);
            std::thread::spawn(move || {
                let addr = p.addresses[p.rank as usize];
                let net = UdpNet::bind(addr, p.port).expect("bind loopback");
                match rule {
                    Some(rule) => {
                        let mut s = Shim {
                            inner: net,
                            rule,
                            held: Vec::new(),
                            ready: VecDeque::new(),
                        };
                        run(p, &mut s)
                    }
                    None => {
                        let mut net = net;
                        run(p, &mut net)
                    }
                }
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("engine thread"))
        .collect()
}

fn addrs(net: u8, n: u8) -> Vec<Ipv4Addr> {
    (0..n).map(|i| Ipv4Addr::new(127, 0, net, 2 + i)).collect()
}

/// One transfer of `packets` packets from rank 1 to rank 0 (incast of two).
fn transfer(
    net: u8,
    packets: u64,
    placement: Placement,
    rule: Option<Rule>,
) -> (RankReport, RankReport) {
    let p = plans(
        Kind::Incast,
        &addrs(net, 2),
        packets * MTU as u64,
        placement,
    );
    let mut r = run_all(p, vec![rule]);
    let tx = r.pop().expect("sender");
    let rx = r.pop().expect("receiver");
    assert!(rx.error.is_none() && tx.error.is_none(), "{rx:?} {tx:?}");
    (rx, tx)
}

#[test]
fn a_clean_transfer_arrives_whole_in_order_without_retransmissions() {
    let (rx, tx) = transfer(31, 200, Placement::GoBackN, None);
    assert!(rx.complete && tx.complete, "{rx:?}\n{tx:?}");
    assert_eq!(rx.bytes_received, 200 * MTU as u64);
    assert_eq!(rx.bytes_received, rx.bytes_expected);
    assert_eq!(tx.tx.packets, 200);
    assert_eq!(tx.tx.retransmitted, 0);
    assert_eq!(rx.rx.out_of_order, 0);
    assert_eq!(tx.message_ns.len(), 1);
    assert_eq!(rx.iterations.len(), 1);
}

#[test]
fn a_lost_packet_costs_go_back_n_the_window_behind_it_and_ooo_placement_only_itself() {
    let drop_psn_40 = || -> Option<Rule> {
        Some(Box::new(|p: &Packet| {
            if original(p, 40) {
                Act::Drop
            } else {
                Act::Pass
            }
        }))
    };
    let (gbn_rx, gbn_tx) = transfer(32, 200, Placement::GoBackN, drop_psn_40());
    let (ooo_rx, ooo_tx) = transfer(33, 200, Placement::OutOfOrder, drop_psn_40());
    for (rx, tx) in [(&gbn_rx, &gbn_tx), (&ooo_rx, &ooo_tx)] {
        assert!(rx.complete && tx.complete, "{rx:?}\n{tx:?}");
        assert_eq!(
            rx.bytes_received,
            200 * MTU as u64,
            "every byte delivered once"
        );
        assert_eq!(rx.rx.losses_detected, 1, "{rx:?}");
        assert!(tx.tx.naks >= 1);
    }
    // Go-back-N threw away what came after the hole and had it sent again.
    assert!(gbn_rx.rx.sequence_drops > 0, "{gbn_rx:?}");
    assert!(gbn_tx.tx.retransmitted > 1, "{gbn_tx:?}");
    // Out-of-order placement kept it: only the hole's go-back repeats it, and the
    // repeats of packets it had already placed are duplicates, not data.
    assert_eq!(ooo_rx.rx.sequence_drops, 0);
    assert_eq!(
        ooo_rx.rx.duplicates + 1,
        ooo_tx.tx.retransmitted,
        "{ooo_rx:?} {ooo_tx:?}"
    );
}

#[test]
fn a_trimmed_packet_is_nacked_and_sent_again_at_once_without_a_timeout_or_a_go_back() {
    let trim = || -> Option<Rule> {
        Some(Box::new(|p: &Packet| {
            if original(p, 40) || original(p, 41) || original(p, 120) {
                Act::Trim
            } else {
                Act::Pass
            }
        }))
    };
    let mut p = plans(
        Kind::Incast,
        &addrs(37, 2),
        200 * MTU as u64,
        Placement::OutOfOrder,
    );
    for x in &mut p {
        x.trim_dscp = Some(TRIM_DSCP);
    }
    let mut r = run_all(p, vec![trim()]);
    let tx = r.pop().expect("sender");
    let rx = r.pop().expect("receiver");
    assert!(rx.complete && tx.complete, "{rx:?}\n{tx:?}");
    assert_eq!(
        rx.bytes_received,
        200 * MTU as u64,
        "every byte delivered once"
    );
    assert_eq!(rx.rx.trimmed, 3, "{rx:?}");
    assert_eq!(tx.tx.trim_naks, 3, "{tx:?}");
    // Exactly the three trimmed packets again: no timeout, no go-back-N, no loss declared.
    assert_eq!(tx.tx.retransmitted, 3, "{tx:?}");
    assert_eq!(tx.tx.retransmitted_bytes, 3 * MTU as u64);
    assert_eq!((tx.tx.timeouts, tx.tx.naks), (0, 0), "{tx:?}");
    assert_eq!(rx.rx.losses_detected, 0, "{rx:?}");
    assert_eq!(rx.bad_packets, 0);
}

#[test]
fn a_spraying_sender_rotates_its_source_port_per_packet_over_its_entropy_values() {
    let ports = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = ports.clone();
    let mut p = plans(
        Kind::Incast,
        &addrs(38, 2),
        40 * MTU as u64,
        Placement::OutOfOrder,
    );
    for x in &mut p {
        x.entropy = Some(weft_traffic::engine::Entropy {
            values: 4,
            every: 1,
        });
    }
    let rank0 = std::thread::spawn({
        let p0 = p[0].clone();
        move || {
            let net = UdpNet::bind(p0.addresses[0], p0.port).expect("bind");
            let mut s = PortLog { inner: net, seen };
            run(p0, &mut s)
        }
    });
    let tx = run_all(vec![p[1].clone()], vec![]).pop().expect("sender");
    let rx = rank0.join().expect("receiver");
    assert!(rx.complete && tx.complete, "{rx:?}\n{tx:?}");
    let ports = ports.lock().expect("log").clone();
    assert_eq!(ports.len(), 40, "{ports:?}");
    let qp = weft_traffic::collective::qp_number(0, 0);
    let want: Vec<u16> = (0..40)
        .map(|i| weft_traffic::collective::entropy_port(qp, (i % 4) as u16))
        .collect();
    assert_eq!(ports, want);
}

/// Logs the source port of every data packet rank 0 receives.
struct PortLog {
    inner: UdpNet,
    seen: std::sync::Arc<std::sync::Mutex<Vec<u16>>>,
}

impl Net for PortLog {
    fn local(&self) -> SocketAddrV4 {
        self.inner.local()
    }
    fn send(&mut self, p: u16, to: SocketAddrV4, tos: u8, d: &[u8]) -> io::Result<()> {
        self.inner.send(p, to, tos, d)
    }
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<Recv>> {
        let r = self.inner.recv(buf, timeout)?;
        if let Some(r) = &r
            && let Ok(Packet::Data { reth, .. }) = Packet::decode(&buf[..r.len])
            && !reth.retransmission()
            && let Ok(mut v) = self.seen.lock()
        {
            v.push(r.from.port());
        }
        Ok(r)
    }
}

#[test]
fn reordering_is_free_for_ooo_placement_and_costs_go_back_n_retransmissions() {
    // PSN 20 arrives after the next three packets: reorder depth 3.
    let late_20 = || -> Option<Rule> {
        Some(Box::new(|p: &Packet| {
            if original(p, 20) {
                Act::Hold(3)
            } else {
                Act::Pass
            }
        }))
    };
    let (ooo_rx, ooo_tx) = transfer(34, 100, Placement::OutOfOrder, late_20());
    assert!(ooo_rx.complete && ooo_tx.complete);
    assert_eq!(ooo_rx.rx.out_of_order, 1);
    assert_eq!(ooo_rx.rx.max_reorder_depth, 3);
    assert_eq!(ooo_tx.tx.retransmitted, 0, "{ooo_tx:?}");
    assert_eq!(ooo_rx.rx.losses_detected, 0);

    let (gbn_rx, gbn_tx) = transfer(35, 100, Placement::GoBackN, late_20());
    assert!(gbn_rx.complete && gbn_tx.complete);
    // The first packet after the late one is a sequence error: dropped, NAK'd, and the sender
    // goes back (how many originals it sent meanwhile depends on the NAK's round trip, and
    // with it how deep the late packet finally lands).
    assert_eq!(gbn_rx.rx.out_of_order, 1);
    assert!(gbn_rx.rx.max_reorder_depth >= 1);
    assert!(gbn_rx.rx.sequence_drops >= 1, "{gbn_rx:?}");
    assert!(gbn_tx.tx.retransmitted >= 1, "{gbn_tx:?}");
    assert_eq!(gbn_rx.rx.losses_detected, 1);
    assert_eq!(gbn_rx.bytes_received, 100 * MTU as u64);
}

#[test]
fn ce_marks_draw_paced_cnps_and_the_sender_cuts_its_rate() {
    let mark_all: Option<Rule> = Some(Box::new(|p: &Packet| {
        if p.bth().opcode != opcode::RC_ACK && matches!(p, Packet::Data { .. }) {
            Act::MarkCe
        } else {
            Act::Pass
        }
    }));
    let (rx, tx) = transfer(36, 100, Placement::OutOfOrder, mark_all);
    assert!(rx.complete && tx.complete);
    assert_eq!(rx.ce_marked, rx.rx.packets);
    assert!(rx.cnps_sent > 0);
    // At most one CNP per QP per CNP interval: fewer CNPs than marked packets.
    assert!(rx.cnps_sent < rx.ce_marked, "{rx:?}");
    assert_eq!(tx.tx.cnps, rx.cnps_sent, "every CNP reached the sender");
    // Each CNP cuts the rate, unless it came within a round trip of the previous cut (paced
    // CNPs on a loopback can bunch up when the machine is busy).
    assert!(tx.rate_cuts >= 1, "{tx:?}");
    assert_eq!(tx.rate_cuts + tx.stale_cnps, tx.tx.cnps, "{tx:?}");

    let (clean_rx, _) = transfer(37, 100, Placement::OutOfOrder, None);
    assert_eq!(clean_rx.cnps_sent, 0);
}

#[test]
fn ring_allreduce_and_alltoall_over_four_engines_deliver_every_byte_in_every_iteration() {
    for (i, kind) in [Kind::AllReduce, Kind::AllToAll].into_iter().enumerate() {
        let a = addrs(40 + i as u8, 4);
        let mut p = plans(kind, &a, 4 * 8 * MTU as u64, Placement::OutOfOrder);
        for x in &mut p {
            x.iterations = 2;
        }
        let c = p[0].collective;
        let r = run_all(p, Vec::new());
        let total: u64 = r.iter().map(|x| x.bytes_received).sum();
        assert_eq!(total, 2 * c.network_bytes(), "{kind}");
        for x in &r {
            assert!(x.complete, "{kind}: {x:?}");
            assert_eq!(x.bytes_received, x.bytes_expected);
            assert_eq!(x.iterations.len(), 2);
            assert!(x.iterations[0].end_ns <= x.iterations[1].start_ns);
            assert_eq!(x.tx.retransmitted, 0);
        }
    }
}
