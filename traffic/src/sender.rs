//! The requester side of one QP: messages become a PSN stream, paced by the QP's DCQCN rate,
//! acknowledged cumulatively, repeated from a NAK'd PSN or after a timeout (go-back-N), and
//! packet by packet when the receiver NACKs a trimmed one: that PSN alone goes out again
//! before any new data, without waiting for a timeout and whatever the window.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::bth::{PSN_MASK, Reth, opcode, psn_add, psn_diff};
use crate::dcqcn::{Dcqcn, DcqcnParams, Nanos};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TxParams {
    /// Payload bytes per packet (the RoCE path MTU).
    pub mtu: usize,
    /// The first and smallest retransmission timeout: with no ACK for the oldest unacknowledged
    /// packet this long, go back to it. Once ACKs come, the timeout follows the measured round
    /// trip (srtt + 4·rttvar, RFC 6298 with Karn's rule) and doubles on every expiry, so a
    /// slow emulated fabric does not trigger spurious go-backs.
    pub rto_ns: Nanos,
    /// Packets sent and not yet acknowledged, at most.
    pub max_outstanding: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxCounters {
    pub packets: u64,
    pub payload_bytes: u64,
    pub retransmitted: u64,
    pub naks: u64,
    pub timeouts: u64,
    pub cnps: u64,
    /// Payload bytes sent again (go-back-N, timeouts and trimmed packets together).
    #[serde(default)]
    pub retransmitted_bytes: u64,
    /// NACKs of trimmed packets received (each asks for one PSN).
    #[serde(default)]
    pub trim_naks: u64,
}

#[derive(Debug, Clone, Copy)]
struct Message {
    id: u32,
    len: u64,
    first_psn: u32,
    packets: u32,
    posted: Nanos,
}

/// A message fully acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completed {
    pub id: u32,
    pub posted: Nanos,
    pub acked: Nanos,
}

/// A data packet to put on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataOut {
    pub opcode: u8,
    pub psn: u32,
    pub reth: Reth,
    pub payload: usize,
    pub ack_req: bool,
}

#[derive(Debug, Clone)]
pub struct QpSender {
    p: TxParams,
    pub rate: Dcqcn,
    messages: VecDeque<Message>,
    /// First unacknowledged PSN.
    acked: u32,
    /// Next PSN to send (behind `stream_end` after a go-back).
    next: u32,
    /// Next PSN never sent.
    stream_end: u32,
    /// Next PSN to assign to a posted message.
    tail: u32,
    /// PSNs the receiver reported trimmed, to send again before anything else.
    resend: VecDeque<u32>,
    resend_set: BTreeSet<u32>,
    /// When each unacknowledged PSN (from `acked` on) was last sent: the retransmission timer
    /// runs from the oldest, so a QP waiting its turn at a shared NIC does not time out.
    sent_at: VecDeque<(Nanos, bool)>,
    srtt: Option<f64>,
    rttvar: f64,
    backoff: u32,
    last_progress: Nanos,
    next_allowed: Nanos,
    pub counters: TxCounters,
    pub completed: Vec<Completed>,
}

impl QpSender {
    pub fn new(p: TxParams, rate: DcqcnParams, first_psn: u32, now: Nanos) -> QpSender {
        let first = first_psn & PSN_MASK;
        QpSender {
            p,
            rate: Dcqcn::new(rate, now),
            messages: VecDeque::new(),
            acked: first,
            next: first,
            stream_end: first,
            tail: first,
            resend: VecDeque::new(),
            resend_set: BTreeSet::new(),
            sent_at: VecDeque::new(),
            srtt: None,
            rttvar: 0.0,
            backoff: 0,
            last_progress: now,
            next_allowed: now,
            counters: TxCounters::default(),
            completed: Vec::new(),
        }
    }

    /// Queues a message of `len` bytes (at least one packet, also for 0 bytes).
    pub fn post(&mut self, now: Nanos, id: u32, len: u64) {
        let mtu = self.p.mtu.max(1) as u64;
        let packets = len.div_ceil(mtu).max(1) as u32;
        self.messages.push_back(Message {
            id,
            len,
            first_psn: self.tail,
            packets,
            posted: now,
        });
        self.tail = psn_add(self.tail, packets);
    }

    pub fn idle(&self) -> bool {
        self.messages.is_empty()
    }

    fn outstanding(&self) -> u32 {
        psn_diff(self.next, self.acked).max(0) as u32
    }

    fn has_data(&self) -> bool {
        psn_diff(self.tail, self.next) > 0
    }

    /// The oldest trimmed PSN still unacknowledged, taken off the resend queue.
    fn take_resend(&mut self) -> Option<u32> {
        while let Some(psn) = self.resend.pop_front() {
            self.resend_set.remove(&psn);
            if psn_diff(psn, self.acked) >= 0 && psn_diff(psn, self.stream_end) < 0 {
                return Some(psn);
            }
        }
        None
    }

    /// The next packet, if the QP's rate and window allow one now: a trimmed packet the
    /// receiver asked for again comes first (the window does not hold it back: it is already
    /// counted as outstanding), then the stream. `wire` is the packet's size on the link for
    /// `payload` bytes, which the pacing accounts.
    pub fn next_packet(&mut self, now: Nanos, wire: impl Fn(usize) -> usize) -> Option<DataOut> {
        if now < self.next_allowed {
            return None;
        }
        if let Some(psn) = self.take_resend() {
            self.rate.advance(now);
            return self.packet_at(now, psn, false, &wire);
        }
        if !self.has_data() || self.outstanding() >= self.p.max_outstanding {
            return None;
        }
        self.rate.advance(now);
        let psn = self.next;
        self.packet_at(now, psn, true, &wire)
    }

    /// Builds and accounts the packet of `psn`; `in_stream`: it is `next` (advanced past it),
    /// not a resend of a trimmed packet out of turn.
    fn packet_at(
        &mut self,
        now: Nanos,
        psn: u32,
        in_stream: bool,
        wire: &impl Fn(usize) -> usize,
    ) -> Option<DataOut> {
        let m = *self.messages.iter().find(|m| {
            psn_diff(psn, m.first_psn) >= 0 && psn_diff(psn, m.first_psn) < m.packets as i32
        })?;
        let i = psn_diff(psn, m.first_psn) as u32;
        let mtu = self.p.mtu.max(1) as u64;
        let offset = u64::from(i) * mtu;
        let payload = (m.len.saturating_sub(offset)).min(mtu) as usize;
        let last = i + 1 == m.packets;
        let op = match (i == 0, last) {
            (true, true) => opcode::RC_WRITE_ONLY,
            (true, false) => opcode::RC_WRITE_FIRST,
            (false, true) => opcode::RC_WRITE_LAST,
            (false, false) => opcode::RC_WRITE_MIDDLE,
        };
        let retransmission = psn_diff(psn, self.stream_end) < 0;
        if retransmission {
            self.counters.retransmitted += 1;
            self.counters.retransmitted_bytes += payload as u64;
        } else {
            self.stream_end = psn_add(psn, 1);
        }
        let idx = psn_diff(psn, self.acked).max(0) as usize;
        if idx < self.sent_at.len() {
            self.sent_at[idx] = (now, true);
        } else {
            self.sent_at.push_back((now, retransmission));
        }
        if in_stream {
            self.next = psn_add(psn, 1);
        }
        self.counters.packets += 1;
        self.counters.payload_bytes += payload as u64;
        let gap = (wire(payload) as f64 / self.rate.rate().max(1.0) * 1e9) as Nanos;
        // A late wake-up may catch up two packets, so the rate holds on a busy machine; an idle
        // QP earns no more credit than that.
        self.next_allowed = self.next_allowed.max(now.saturating_sub(2 * gap)) + gap;
        Some(DataOut {
            opcode: op,
            psn,
            reth: Reth {
                va: offset,
                rkey: Reth::rkey_for(m.id, retransmission),
                len: m.len.min(u64::from(u32::MAX)) as u32,
            },
            payload,
            ack_req: last,
        })
    }

    /// A cumulative ACK of every PSN up to and including `psn`.
    pub fn on_ack(&mut self, now: Nanos, psn: u32) {
        let new_acked = psn_add(psn, 1);
        let ahead = psn_diff(new_acked, self.acked);
        if ahead <= 0 || psn_diff(new_acked, self.stream_end) > 0 {
            return;
        }
        self.acked = new_acked;
        let n = (ahead as usize).min(self.sent_at.len());
        // Karn: only a packet sent once gives a round-trip sample.
        if n > 0
            && let Some(&(t, false)) = self.sent_at.get(n - 1)
        {
            self.sample_rtt(now.saturating_sub(t) as f64);
        }
        self.sent_at.drain(..n);
        self.backoff = 0;
        if psn_diff(self.next, self.acked) < 0 {
            self.next = self.acked;
            self.sent_at.clear();
        }
        self.last_progress = now;
        while let Some(m) = self.messages.front() {
            let end = psn_add(m.first_psn, m.packets);
            if psn_diff(self.acked, end) >= 0 {
                self.completed.push(Completed {
                    id: m.id,
                    posted: m.posted,
                    acked: now,
                });
                self.messages.pop_front();
            } else {
                break;
            }
        }
    }

    /// NACK of a trimmed packet: `psn` alone is sent again, next, whatever else is in flight
    /// (the receiver places out of order: nothing after it needs repeating). A trimmed packet
    /// met a queue over the trim threshold: the rate is cut as for a CNP (once per round trip,
    /// DCQCN's rule), or the repeat meets the same queue and is trimmed again.
    pub fn on_trim_nak(&mut self, now: Nanos, psn: u32) {
        self.counters.trim_naks += 1;
        self.rate.on_cnp(now);
        if psn_diff(psn, self.acked) >= 0
            && psn_diff(psn, self.stream_end) < 0
            && self.resend_set.insert(psn)
        {
            self.resend.push_back(psn);
        }
    }

    /// NAK: the receiver holds everything before `psn` and wants `psn` again.
    pub fn on_nak(&mut self, now: Nanos, psn: u32) {
        self.counters.naks += 1;
        if psn_diff(psn, self.acked) > 0 {
            self.on_ack(now, psn_add(psn, PSN_MASK));
        }
        if psn_diff(psn, self.acked) >= 0 && psn_diff(psn, self.stream_end) <= 0 {
            self.next = psn;
            self.sent_at.truncate(psn_diff(psn, self.acked) as usize);
            self.last_progress = now;
        }
    }

    fn sample_rtt(&mut self, r: f64) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
        if let Some(s) = self.srtt {
            self.rate.set_round_trip(s as Nanos);
        }
    }

    /// The current retransmission timeout.
    pub fn rto(&self) -> Nanos {
        let base = self
            .srtt
            .map_or(0.0, |s| s + 4.0 * self.rttvar)
            .max(self.p.rto_ns as f64) as Nanos;
        base.saturating_mul(1 << self.backoff.min(6))
    }

    pub fn on_cnp(&mut self, now: Nanos) {
        self.counters.cnps += 1;
        self.rate.on_cnp(now);
    }

    /// The retransmission timer.
    pub fn poll(&mut self, now: Nanos) {
        if let Some(t) = self.rto_deadline()
            && now >= t
        {
            self.counters.timeouts += 1;
            self.next = self.acked;
            // Going back covers every PSN a trimmed packet's NACK asked for.
            self.resend.clear();
            self.resend_set.clear();
            self.sent_at.clear();
            self.last_progress = now;
            self.backoff += 1;
        }
    }

    /// When this QP may next send a packet (None: nothing to send, or the window is full).
    pub fn send_deadline(&self) -> Option<Nanos> {
        ((self.has_data() && self.outstanding() < self.p.max_outstanding)
            || !self.resend.is_empty())
        .then_some(self.next_allowed)
    }

    /// When the retransmission timer fires, if anything is unacknowledged: `rto` after the
    /// oldest unacknowledged packet was sent (after a go-back, after the go-back).
    pub fn rto_deadline(&self) -> Option<Nanos> {
        (psn_diff(self.stream_end, self.acked) > 0)
            .then(|| self.sent_at.front().map_or(self.last_progress, |x| x.0) + self.rto())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sender() -> QpSender {
        let tx = TxParams {
            mtu: 1000,
            rto_ns: 1_000_000,
            max_outstanding: 8,
        };
        // 1 MB/s: a 1000-byte packet every ms.
        let mut r = DcqcnParams::for_line_rate(1e6, 1000);
        r.min_rate = 1e3;
        QpSender::new(tx, r, 100, 0)
    }

    fn drain(s: &mut QpSender, now: Nanos) -> Vec<DataOut> {
        let mut v = Vec::new();
        while let Some(p) = s.next_packet(now, |n| n) {
            v.push(p);
        }
        v
    }

    #[test]
    fn a_message_becomes_first_middle_last_packets_with_offsets_and_ack_request_on_the_last() {
        let mut s = sender();
        s.post(0, 7, 2500);
        let mut out = Vec::new();
        for t in 0..3 {
            out.extend(drain(&mut s, t * 1_000_000));
        }
        let ops: Vec<u8> = out.iter().map(|p| p.opcode).collect();
        assert_eq!(
            ops,
            [
                opcode::RC_WRITE_FIRST,
                opcode::RC_WRITE_MIDDLE,
                opcode::RC_WRITE_LAST
            ]
        );
        assert_eq!(
            out.iter()
                .map(|p| (p.psn, p.reth.va, p.payload))
                .collect::<Vec<_>>(),
            [(100, 0, 1000), (101, 1000, 1000), (102, 2000, 500)]
        );
        assert_eq!(
            out.iter().map(|p| p.ack_req).collect::<Vec<_>>(),
            [false, false, true]
        );
        assert!(
            out.iter()
                .all(|p| p.reth.len == 2500 && p.reth.message() == 7)
        );
        s.on_ack(5_000_000, 102);
        assert_eq!(
            s.completed,
            [Completed {
                id: 7,
                posted: 0,
                acked: 5_000_000
            }]
        );
        assert!(s.idle());
    }

    #[test]
    fn pacing_holds_packets_to_the_rate_and_a_cnp_slows_it() {
        let mut s = sender();
        s.post(0, 1, 100_000);
        // At 1 MB/s one 1000-byte packet per ms: 0..=9 ms gives 10.
        let mut n = 0;
        for t in 0..10 {
            n += drain(&mut s, t * 1_000_000).len();
            s.on_ack(t * 1_000_000, psn_add(100, n as u32) - 1);
        }
        assert_eq!(n, 10);
        s.on_cnp(10_000_000);
        let mut m = 0;
        for t in 10..20 {
            m += drain(&mut s, t * 1_000_000).len();
            s.on_ack(t * 1_000_000, psn_add(100, (n + m) as u32) - 1);
        }
        assert!(m < 10, "a CNP must slow the sender: {m} packets in 10 ms");
        assert_eq!(s.counters.cnps, 1);
    }

    #[test]
    fn the_window_limits_unacknowledged_packets() {
        let mut s = sender();
        s.post(0, 1, 50_000);
        let mut n = 0;
        for t in 0..30 {
            n += drain(&mut s, t * 1_000_000).len();
        }
        assert_eq!(n, 8);
        assert_eq!(s.send_deadline(), None);
        assert_eq!(s.rto_deadline(), Some(1_000_000));
    }

    #[test]
    fn a_nak_goes_back_to_its_psn_and_counts_retransmissions() {
        let mut s = sender();
        s.post(0, 1, 5000);
        let mut sent = Vec::new();
        for t in 0..5 {
            sent.extend(drain(&mut s, t * 1_000_000).iter().map(|p| p.psn));
        }
        assert_eq!(sent, [100, 101, 102, 103, 104]);
        s.on_nak(5_000_000, 102);
        let mut again = Vec::new();
        for t in 5..9 {
            again.extend(drain(&mut s, t * 1_000_000));
        }
        assert_eq!(
            again.iter().map(|p| p.psn).collect::<Vec<_>>(),
            [102, 103, 104]
        );
        assert!(again.iter().all(|p| p.reth.retransmission()));
        assert_eq!(s.counters.retransmitted, 3);
        assert_eq!(s.counters.naks, 1);
        // The NAK acknowledged 100 and 101 implicitly: a stale ACK changes nothing.
        s.on_ack(9_000_000, 100);
        s.on_ack(9_000_000, 104);
        assert!(s.idle());
    }

    #[test]
    fn the_timeout_runs_from_the_oldest_unacknowledged_send_and_goes_back_to_it() {
        let mut s = sender();
        s.post(0, 1, 3000);
        drain(&mut s, 0);
        drain(&mut s, 1_000_000);
        s.on_ack(1_500_000, 100);
        // 101 left at 1 ms: the timer runs from then, for the timeout the ACK of 100 implies.
        let rto = s.rto();
        assert_eq!(s.rto_deadline(), Some(1_000_000 + rto));
        drain(&mut s, 2_000_000);
        s.poll(1_000_000 + rto - 1);
        assert_eq!(s.counters.timeouts, 0);
        s.poll(1_000_000 + rto);
        assert_eq!(s.counters.timeouts, 1);
        let p = drain(&mut s, 1_000_000 + rto);
        assert_eq!(p[0].psn, 101);
        assert!(p.iter().all(|p| p.reth.retransmission()));
    }

    #[test]
    fn a_message_waiting_for_its_turn_at_the_nic_does_not_time_out() {
        let mut s = sender();
        s.post(0, 1, 3000);
        // Nothing sent yet: no timer, however long the NIC serves other QPs.
        s.poll(50_000_000);
        assert_eq!((s.counters.timeouts, s.rto_deadline()), (0, None));
        drain(&mut s, 50_000_000);
        assert_eq!(s.rto_deadline(), Some(51_000_000));
    }

    #[test]
    fn the_timeout_follows_the_measured_round_trip_and_backs_off_on_expiry() {
        let mut s = sender();
        assert_eq!(s.rto(), 1_000_000);
        s.post(0, 1, 20_000);
        // Every packet acknowledged 10 ms after it left: the timeout grows past 10 ms.
        for i in 0..10u64 {
            let t = i * 1_000_000;
            drain(&mut s, t);
            s.on_ack(t + 10_000_000, 100 + i as u32);
        }
        assert!(s.rto() > 10_000_000, "{}", s.rto());
        let before = s.rto();
        drain(&mut s, 30_000_000);
        s.poll(30_000_000 + before);
        assert_eq!(s.counters.timeouts, 1);
        assert_eq!(s.rto(), 2 * before);
    }

    #[test]
    fn a_trim_nack_resends_that_psn_alone_next_even_with_the_window_full() {
        let mut s = sender();
        s.post(0, 1, 20_000);
        let mut sent = Vec::new();
        for t in 0..10 {
            sent.extend(drain(&mut s, t * 1_000_000).iter().map(|p| p.psn));
        }
        // The window (8) is full: nothing new goes out.
        assert_eq!(sent, (100..108).collect::<Vec<_>>());
        assert_eq!(s.send_deadline(), None);
        s.on_trim_nak(10_000_000, 103);
        s.on_trim_nak(10_000_000, 103);
        assert!(s.send_deadline().is_some());
        let again = drain(&mut s, 10_000_000);
        assert_eq!(
            again.len(),
            1,
            "one NACK, one packet, however often it came"
        );
        assert_eq!((again[0].psn, again[0].reth.va), (103, 3000));
        assert!(again[0].reth.retransmission());
        assert_eq!(s.counters.retransmitted, 1);
        assert_eq!(s.counters.retransmitted_bytes, 1000);
        assert_eq!(s.counters.trim_naks, 2);
        assert_eq!(s.counters.timeouts, 0);
        // A trimmed packet is congestion: the rate was cut, as for a CNP.
        assert!(s.rate.rate() < 1e6, "{}", s.rate.rate());
        // The stream goes on where it was once the window opens: no go-back.
        s.on_ack(11_000_000, 107);
        let next = drain(&mut s, 20_000_000);
        assert_eq!(next.first().map(|p| p.psn), Some(108));
        assert!(!next[0].reth.retransmission());
    }

    #[test]
    fn a_trim_nack_for_a_psn_already_acknowledged_or_never_sent_sends_nothing() {
        let mut s = sender();
        s.post(0, 1, 5000);
        drain(&mut s, 0);
        drain(&mut s, 1_000_000);
        s.on_ack(2_000_000, 100);
        s.on_trim_nak(2_000_000, 100);
        s.on_trim_nak(2_000_000, 150);
        assert!(
            drain(&mut s, 2_000_000)
                .iter()
                .all(|p| !p.reth.retransmission())
        );
        assert_eq!(s.counters.retransmitted, 0);
    }

    #[test]
    fn acks_for_psns_never_sent_are_ignored() {
        let mut s = sender();
        s.post(0, 1, 3000);
        drain(&mut s, 0);
        s.on_ack(0, 102);
        assert!(!s.idle());
        s.on_ack(0, 100);
        assert!(!s.idle());
    }
}
