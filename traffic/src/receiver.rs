//! The responder side of one QP: PSN order, placement, loss detection.
//!
//! Two kinds of NIC, chosen per receiver by the intent's `ooo_tolerant`:
//! - [`Placement::GoBackN`] (classic RoCE): only the expected PSN is accepted. The first packet
//!   beyond it is a sequence error: it and everything after is dropped, one NAK asks the
//!   sender to go back to the expected PSN (repeated if nothing arrives for `nak_timeout`).
//! - [`Placement::OutOfOrder`] (NICs with out-of-order placement): any packet within the
//!   window is placed by its PSN; a hole that stays unfilled for `loss_timeout` is declared
//!   lost and a NAK asks for go-back-N from the hole (packets already placed come again and are
//!   counted as duplicates).
//!
//! A trimmed packet (a switch cut it to its headers under congestion and re-marked it) carries
//! no payload to place: either kind answers it at once with a NACK of its PSN alone
//! ([`Reply::Trimmed`]), and the hole it leaves is filled by that one retransmission; the loss
//! timers stay as the fallback for a NACK that is itself lost.
//!
//! Independent of the kind, network reordering is measured on first transmissions: a packet
//! whose PSN is below the highest PSN already seen is out of order, by `highest − psn`
//! (its reorder depth, RFC 4737's extent).

use serde::Serialize;

use crate::bth::{PSN_MASK, psn_add, psn_diff};
use crate::dcqcn::Nanos;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    GoBackN,
    OutOfOrder,
}

#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize)]
pub struct RxParams {
    pub placement: Placement,
    /// Packets above the expected PSN that out-of-order placement can hold.
    pub window: u32,
    pub loss_timeout_ns: Nanos,
    pub nak_timeout_ns: Nanos,
    /// Coalesced ACK every this many accepted packets (and always on `ack_req`)...
    pub ack_every: u32,
    /// ...or once the oldest packet not yet acknowledged has waited this long.
    #[serde(default = "default_ack_delay")]
    pub ack_delay_ns: Nanos,
}

fn default_ack_delay() -> Nanos {
    5_000_000
}

/// Counters of one receiver (summed over its QPs in reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RxCounters {
    pub packets: u64,
    pub placed: u64,
    pub bytes_placed: u64,
    pub duplicates: u64,
    /// First transmissions that arrived after a higher PSN.
    pub out_of_order: u64,
    pub max_reorder_depth: u64,
    /// Packets dropped by a go-back-N receiver for being ahead of the expected PSN.
    pub sequence_drops: u64,
    pub beyond_window: u64,
    /// Holes declared lost (out-of-order placement) or sequence errors (go-back-N).
    pub losses_detected: u64,
    pub naks: u64,
    /// Trimmed packets received (each answered with a NACK of its PSN, unless already placed).
    #[serde(default)]
    pub trimmed: u64,
}

/// What the receiver wants sent back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Cumulative: every PSN before `psn + 1` is placed.
    Ack { psn: u32 },
    /// Go back to `psn`.
    Nak { psn: u32 },
    /// Send `psn` again, only it: it arrived trimmed.
    Trimmed { psn: u32 },
}

/// What happened to one arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The payload was placed now (first time).
    pub placed: bool,
    pub reply: Option<Reply>,
}

#[derive(Debug, Clone)]
pub struct PsnTracker {
    p: RxParams,
    /// Next PSN not yet placed.
    expected: u32,
    /// Placed PSNs above `expected`, as a ring bitmap over the window.
    held: Vec<bool>,
    highest_original: Option<u32>,
    hole_since: Option<Nanos>,
    nak_outstanding: Option<Nanos>,
    since_ack: u32,
    /// When the oldest packet placed since the last ACK arrived.
    unacked_since: Option<Nanos>,
    pub counters: RxCounters,
}

impl PsnTracker {
    pub fn new(p: RxParams, first_psn: u32) -> PsnTracker {
        PsnTracker {
            // A power of two, so PSN modulo the ring stays consistent across the 24-bit wrap.
            held: vec![false; p.window.max(1).next_power_of_two() as usize],
            p,
            expected: first_psn & PSN_MASK,
            highest_original: None,
            hole_since: None,
            nak_outstanding: None,
            since_ack: 0,
            unacked_since: None,
            counters: RxCounters::default(),
        }
    }

    pub fn expected(&self) -> u32 {
        self.expected
    }

    fn slot(&self, psn: u32) -> usize {
        psn as usize % self.held.len()
    }

    /// One data packet: `retransmission` from the RETH flag, `ack_req` from the BTH.
    pub fn on_data(
        &mut self,
        now: Nanos,
        psn: u32,
        bytes: usize,
        retransmission: bool,
        ack_req: bool,
    ) -> Arrival {
        self.counters.packets += 1;
        if !retransmission {
            match self.highest_original {
                Some(h) if psn_diff(psn, h) < 0 => {
                    self.counters.out_of_order += 1;
                    let depth = (-psn_diff(psn, h)) as u64;
                    self.counters.max_reorder_depth = self.counters.max_reorder_depth.max(depth);
                }
                Some(h) if psn_diff(psn, h) == 0 => {}
                _ => self.highest_original = Some(psn),
            }
        }
        let d = psn_diff(psn, self.expected);
        if d < 0 {
            self.counters.duplicates += 1;
            // The sender may have missed our ACK: repeat it.
            return Arrival {
                placed: false,
                reply: Some(Reply::Ack {
                    psn: psn_add(self.expected, PSN_MASK),
                }),
            };
        }
        match self.p.placement {
            Placement::GoBackN => {
                if d > 0 {
                    self.counters.sequence_drops += 1;
                    if self.nak_outstanding.is_none() {
                        self.nak_outstanding = Some(now);
                        self.counters.losses_detected += 1;
                        self.counters.naks += 1;
                        return Arrival {
                            placed: false,
                            reply: Some(Reply::Nak { psn: self.expected }),
                        };
                    }
                    return Arrival {
                        placed: false,
                        reply: None,
                    };
                }
                self.nak_outstanding = None;
                self.place(bytes);
                self.expected = psn_add(self.expected, 1);
            }
            Placement::OutOfOrder => {
                if d as u32 >= self.p.window {
                    self.counters.beyond_window += 1;
                    return Arrival {
                        placed: false,
                        reply: None,
                    };
                }
                let s = self.slot(psn);
                if d > 0 {
                    if self.held[s] {
                        self.counters.duplicates += 1;
                        return Arrival {
                            placed: false,
                            reply: None,
                        };
                    }
                    self.held[s] = true;
                    self.place(bytes);
                    if self.hole_since.is_none() {
                        self.hole_since = Some(now);
                    }
                } else {
                    self.place(bytes);
                    self.expected = psn_add(self.expected, 1);
                    loop {
                        let s = self.slot(self.expected);
                        if !self.held[s] {
                            break;
                        }
                        self.held[s] = false;
                        self.expected = psn_add(self.expected, 1);
                    }
                    let any_held = self.held.iter().any(|h| *h);
                    self.hole_since = any_held.then_some(now);
                    self.nak_outstanding = None;
                }
            }
        }
        self.since_ack += 1;
        let reply = if ack_req || self.since_ack >= self.p.ack_every {
            self.ack()
        } else {
            self.unacked_since.get_or_insert(now);
            None
        };
        Arrival {
            placed: true,
            reply,
        }
    }

    /// A trimmed packet of `psn`: nothing is placed; a NACK asks for exactly that PSN unless
    /// it is already placed (then the ACK is repeated) or beyond what the receiver can hold.
    pub fn on_trimmed(&mut self, now: Nanos, psn: u32) -> Option<Reply> {
        self.counters.packets += 1;
        self.counters.trimmed += 1;
        let d = psn_diff(psn, self.expected);
        if d < 0
            || (d > 0 && self.p.placement == Placement::OutOfOrder && {
                let s = self.slot(psn);
                (d as u32) < self.p.window && self.held[s]
            })
        {
            self.counters.duplicates += 1;
            return Some(Reply::Ack {
                psn: psn_add(self.expected, PSN_MASK),
            });
        }
        if d as u32 >= self.p.window {
            self.counters.beyond_window += 1;
            return None;
        }
        if d > 0 && self.hole_since.is_none() {
            self.hole_since = Some(now);
        }
        self.counters.naks += 1;
        Some(Reply::Trimmed { psn })
    }

    fn ack(&mut self) -> Option<Reply> {
        self.since_ack = 0;
        self.unacked_since = None;
        Some(Reply::Ack {
            psn: psn_add(self.expected, PSN_MASK),
        })
    }

    fn place(&mut self, bytes: usize) {
        self.counters.placed += 1;
        self.counters.bytes_placed += bytes as u64;
    }

    /// Timers: a hole unfilled for `loss_timeout` (out-of-order placement), or a NAK without
    /// progress for `nak_timeout` (both kinds), asks for go-back-N again.
    pub fn poll(&mut self, now: Nanos) -> Option<Reply> {
        if let Some(t) = self.unacked_since
            && now.saturating_sub(t) >= self.p.ack_delay_ns
        {
            return self.ack();
        }
        if let Some(t) = self.nak_outstanding {
            if now.saturating_sub(t) >= self.p.nak_timeout_ns {
                self.nak_outstanding = Some(now);
                self.counters.naks += 1;
                return Some(Reply::Nak { psn: self.expected });
            }
            return None;
        }
        if let Some(t) = self.hole_since
            && now.saturating_sub(t) >= self.p.loss_timeout_ns
        {
            self.counters.losses_detected += 1;
            self.counters.naks += 1;
            self.nak_outstanding = Some(now);
            self.hole_since = Some(now);
            return Some(Reply::Nak { psn: self.expected });
        }
        None
    }

    /// The earliest time [`PsnTracker::poll`] may have something to do.
    pub fn next_deadline(&self) -> Option<Nanos> {
        let loss = match (self.nak_outstanding, self.hole_since) {
            (Some(t), _) => Some(t + self.p.nak_timeout_ns),
            (None, Some(t)) => Some(t + self.p.loss_timeout_ns),
            _ => None,
        };
        let ack = self.unacked_since.map(|t| t + self.p.ack_delay_ns);
        match (loss, ack) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(placement: Placement) -> RxParams {
        RxParams {
            placement,
            window: 64,
            loss_timeout_ns: 1000,
            nak_timeout_ns: 500,
            ack_every: 4,
            ack_delay_ns: 1_000_000,
        }
    }

    fn feed(t: &mut PsnTracker, now: Nanos, psns: &[u32]) -> Vec<Arrival> {
        psns.iter()
            .map(|&p| t.on_data(now, p, 100, false, false))
            .collect()
    }

    #[test]
    fn in_order_arrivals_are_placed_and_acked_every_n_packets() {
        let mut t = PsnTracker::new(params(Placement::GoBackN), 10);
        let a = feed(&mut t, 0, &[10, 11, 12, 13, 14]);
        assert!(a.iter().all(|x| x.placed));
        assert_eq!(a[3].reply, Some(Reply::Ack { psn: 13 }));
        assert_eq!(a[4].reply, None);
        // The last packet of a message asks for an ACK.
        assert_eq!(
            t.on_data(0, 15, 100, false, true).reply,
            Some(Reply::Ack { psn: 15 })
        );
        assert_eq!(t.counters.out_of_order, 0);
        assert_eq!(t.counters.bytes_placed, 600);
    }

    #[test]
    fn go_back_n_drops_everything_after_a_gap_and_naks_once() {
        let mut t = PsnTracker::new(params(Placement::GoBackN), 0);
        feed(&mut t, 0, &[0, 1]);
        // 2 is late: 3 and 4 arrive first.
        let a = feed(&mut t, 10, &[3, 4]);
        assert_eq!(a[0].reply, Some(Reply::Nak { psn: 2 }));
        assert_eq!(a[1].reply, None);
        assert!(!a[0].placed && !a[1].placed);
        let a = feed(&mut t, 20, &[2]);
        assert!(a[0].placed);
        assert_eq!(t.counters.sequence_drops, 2);
        assert_eq!(t.counters.losses_detected, 1);
        // Reordering is measured regardless of the kind: 2 came after 4.
        assert_eq!(t.counters.out_of_order, 1);
        assert_eq!(t.counters.max_reorder_depth, 2);
        // The sender goes back: 3 and 4 again, now in order.
        for p in [3, 4] {
            assert!(t.on_data(30, p, 100, true, false).placed);
        }
        assert_eq!(t.expected(), 5);
        assert_eq!(t.counters.out_of_order, 1);
    }

    #[test]
    fn out_of_order_placement_fills_holes_without_asking_for_anything() {
        let mut t = PsnTracker::new(params(Placement::OutOfOrder), 0);
        let a = feed(&mut t, 0, &[0, 2, 3, 1, 4]);
        assert!(a.iter().all(|x| x.placed));
        assert!(
            a.iter()
                .all(|x| !matches!(x.reply, Some(Reply::Nak { .. })))
        );
        assert_eq!(t.expected(), 5);
        assert_eq!(t.counters.out_of_order, 1);
        assert_eq!(t.counters.max_reorder_depth, 2);
        assert_eq!(t.counters.naks, 0);
        assert_eq!(t.poll(10_000), None);
        // A duplicate inside the window is counted, not placed.
        assert!(!t.on_data(0, 3, 100, true, false).placed);
        assert_eq!(t.counters.duplicates, 1);
    }

    #[test]
    fn an_unfilled_hole_is_declared_lost_after_the_timeout_and_naked_again_without_progress() {
        let mut t = PsnTracker::new(params(Placement::OutOfOrder), 0);
        feed(&mut t, 0, &[0, 2, 3]);
        assert_eq!(t.next_deadline(), Some(1000));
        assert_eq!(t.poll(999), None);
        assert_eq!(t.poll(1000), Some(Reply::Nak { psn: 1 }));
        assert_eq!(t.counters.losses_detected, 1);
        // No answer: the NAK is repeated after nak_timeout, not declared a second loss.
        assert_eq!(t.poll(1400), None);
        assert_eq!(t.poll(1500), Some(Reply::Nak { psn: 1 }));
        assert_eq!(t.counters.losses_detected, 1);
        assert_eq!(t.counters.naks, 2);
        // The retransmission arrives: 1 placed, 2 and 3 come again as duplicates.
        assert!(t.on_data(1600, 1, 100, true, false).placed);
        assert_eq!(t.expected(), 4);
        assert!(!t.on_data(1600, 2, 100, true, false).placed);
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn placed_packets_are_acknowledged_after_the_ack_delay_without_waiting_for_more() {
        let mut t = PsnTracker::new(params(Placement::GoBackN), 0);
        assert_eq!(t.on_data(0, 0, 100, false, false).reply, None);
        assert_eq!(t.on_data(10, 1, 100, false, false).reply, None);
        assert_eq!(t.next_deadline(), Some(1_000_000));
        assert_eq!(t.poll(999_999), None);
        assert_eq!(t.poll(1_000_000), Some(Reply::Ack { psn: 1 }));
        assert_eq!(t.poll(5_000_000), None);
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn packets_beyond_the_window_are_dropped() {
        let mut p = params(Placement::OutOfOrder);
        p.window = 4;
        let mut t = PsnTracker::new(p, 0);
        assert!(!t.on_data(0, 4, 100, false, false).placed);
        assert_eq!(t.counters.beyond_window, 1);
        assert!(t.on_data(0, 3, 100, false, false).placed);
    }

    #[test]
    fn a_trimmed_packet_is_nacked_alone_and_its_retransmission_fills_the_hole() {
        let mut t = PsnTracker::new(params(Placement::OutOfOrder), 0);
        feed(&mut t, 0, &[0, 1]);
        assert_eq!(t.on_trimmed(5, 2), Some(Reply::Trimmed { psn: 2 }));
        // What follows is placed: nothing is dropped and nothing else is asked for.
        let a = feed(&mut t, 6, &[3, 4]);
        assert!(
            a.iter()
                .all(|x| x.placed && !matches!(x.reply, Some(Reply::Nak { .. })))
        );
        assert_eq!(t.expected(), 2);
        assert!(t.on_data(7, 2, 100, true, false).placed);
        assert_eq!(t.expected(), 5);
        assert_eq!(t.counters.trimmed, 1);
        assert_eq!(t.counters.losses_detected, 0);
        assert_eq!(t.poll(2_000_000), Some(Reply::Ack { psn: 4 }));
        assert_eq!(t.next_deadline(), None, "no loss timer left running");
    }

    #[test]
    fn a_trimmed_copy_of_a_placed_packet_repeats_the_ack_instead() {
        let mut t = PsnTracker::new(params(Placement::OutOfOrder), 0);
        feed(&mut t, 0, &[0, 2]);
        assert_eq!(t.on_trimmed(1, 0), Some(Reply::Ack { psn: 0 }));
        assert_eq!(t.on_trimmed(1, 2), Some(Reply::Ack { psn: 0 }));
        assert_eq!(t.on_trimmed(1, 1), Some(Reply::Trimmed { psn: 1 }));
        assert_eq!(t.on_trimmed(1, 65), None, "beyond the window");
    }

    #[test]
    fn psns_wrap_around_the_24_bit_space() {
        let mut t = PsnTracker::new(params(Placement::OutOfOrder), PSN_MASK - 1);
        let a = feed(&mut t, 0, &[PSN_MASK - 1, 0, PSN_MASK, 1]);
        assert!(a.iter().all(|x| x.placed));
        assert_eq!(t.expected(), 2);
        assert_eq!(t.counters.out_of_order, 1);
        assert_eq!(t.counters.max_reorder_depth, 1);
    }
}
