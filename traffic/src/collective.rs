//! Collectives as per-rank schedules of steps, and the numbering of their QPs and UDP source
//! ports. Both the engine (what it sends) and the fabric model (what it places) read them from
//! here, so the model hashes exactly the 5-tuples and QP numbers the testbed puts on the wire.
//!
//! | collective | steps | per step, rank r |
//! |---|---|---|
//! | ring AllReduce | 2(n−1) | sends S/n to r+1, receives S/n from r−1 (each step needs the previous step's data) |
//! | AlltoAll | 1 | sends S/n to every other rank, receives S/n from every other |
//! | incast | 1 | every rank but the first sends S to the first |
//!
//! Bandwidths as nccl-tests defines them, for size S and time t: algbw = S/t; AllReduce
//! busbw = algbw·2(n−1)/n; AlltoAll busbw = algbw·(n−1)/n. Incast is not an NCCL collective:
//! its algbw is the bytes the root received over t, and busbw = algbw.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    AllReduce,
    AllToAll,
    Incast,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::AllReduce => "allreduce",
            Kind::AllToAll => "alltoall",
            Kind::Incast => "incast",
        }
    }
}

/// A collective name [`Kind`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown collective {0:?}: use allreduce, alltoall or incast")]
pub struct UnknownCollective(pub String);

impl std::str::FromStr for Kind {
    type Err = UnknownCollective;
    fn from_str(s: &str) -> Result<Kind, UnknownCollective> {
        match s {
            "allreduce" => Ok(Kind::AllReduce),
            "alltoall" => Ok(Kind::AllToAll),
            "incast" => Ok(Kind::Incast),
            o => Err(UnknownCollective(o.to_string())),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// QPs per peer connection the numbering leaves room for.
pub const MAX_LANES: u32 = 16;

/// The QP number a rank uses for its connection to `peer` (lane `lane`). The peer addresses
/// its packets on that connection to this number; this rank addresses the peer's packets to
/// `qp_number(own rank, lane)` at the peer.
pub fn qp_number(peer: u32, lane: u32) -> u32 {
    0x100 + peer * MAX_LANES + (lane % MAX_LANES)
}

/// UDP source port of the data a QP sends. RoCE NICs derive it from the QP so that QPs of one
/// host pair spread over paths; here: 0xC000 | the low 14 bits of the local QP number.
pub fn source_port(local_qp: u32) -> u16 {
    0xc000 | (local_qp & 0x3fff) as u16
}

/// Entropy values (UDP source ports) a QP may spray over: at most this many.
pub const MAX_ENTROPY_VALUES: u16 = 16;

/// UDP source port `k` (0..[`MAX_ENTROPY_VALUES`]) of a spraying QP: 0x8000 | the low 10 bits
/// of the local QP number << 4 | k, below [`source_port`]'s range, so a QP's entropy values are
/// its own (for QP numbers below 0x400: ranks up to 47 at 16 lanes).
pub fn entropy_port(local_qp: u32, k: u16) -> u16 {
    0x8000 | (((local_qp & 0x3ff) as u16) << 4) | (k % MAX_ENTROPY_VALUES)
}

/// One transfer of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub peer: u32,
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub send: Vec<Transfer>,
    pub recv: Vec<Transfer>,
}

/// A collective over `ranks` ranks with `size` bytes (nccl-tests' size: the buffer per rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collective {
    pub kind: Kind,
    pub ranks: u32,
    pub size: u64,
}

/// One flow of a step (for the model): src rank → dst rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
}

impl Collective {
    /// Bytes of one ring/all-to-all chunk: S/n, rounded up.
    pub fn chunk(&self) -> u64 {
        self.size.div_ceil(u64::from(self.ranks.max(1)))
    }

    pub fn steps(&self) -> u32 {
        match self.kind {
            Kind::AllReduce => 2 * self.ranks.saturating_sub(1),
            Kind::AllToAll | Kind::Incast => u32::from(self.ranks > 1),
        }
    }

    /// Rank `r`'s schedule.
    pub fn schedule(&self, r: u32) -> Vec<Step> {
        let n = self.ranks;
        if n < 2 {
            return Vec::new();
        }
        match self.kind {
            Kind::AllReduce => {
                let c = self.chunk();
                let step = Step {
                    send: vec![Transfer {
                        peer: (r + 1) % n,
                        bytes: c,
                    }],
                    recv: vec![Transfer {
                        peer: (r + n - 1) % n,
                        bytes: c,
                    }],
                };
                vec![step; self.steps() as usize]
            }
            Kind::AllToAll => {
                let c = self.chunk();
                let others: Vec<Transfer> = (0..n)
                    .filter(|&p| p != r)
                    .map(|peer| Transfer { peer, bytes: c })
                    .collect();
                vec![Step {
                    send: others.clone(),
                    recv: others,
                }]
            }
            Kind::Incast => {
                if r == 0 {
                    vec![Step {
                        send: Vec::new(),
                        recv: (1..n)
                            .map(|peer| Transfer {
                                peer,
                                bytes: self.size,
                            })
                            .collect(),
                    }]
                } else {
                    vec![Step {
                        send: vec![Transfer {
                            peer: 0,
                            bytes: self.size,
                        }],
                        recv: Vec::new(),
                    }]
                }
            }
        }
    }

    /// The flows of step `k` over all ranks.
    pub fn step_flows(&self, k: u32) -> impl Iterator<Item = Flow> + '_ {
        let n = self.ranks;
        let ring = matches!(self.kind, Kind::AllReduce);
        let all = matches!(self.kind, Kind::AllToAll);
        let c = self.chunk();
        let valid = k < self.steps();
        (0..n).filter(move |_| valid).flat_map(move |s| {
            let dsts: Box<dyn Iterator<Item = (u32, u64)>> = if ring {
                Box::new(std::iter::once(((s + 1) % n, c)))
            } else if all {
                Box::new((0..n).filter(move |&d| d != s).map(move |d| (d, c)))
            } else if s != 0 {
                Box::new(std::iter::once((0, self.size)))
            } else {
                Box::new(std::iter::empty())
            };
            dsts.map(move |(dst, bytes)| Flow { src: s, dst, bytes })
        })
    }

    /// Steps whose flows are identical, as (first step, how many in a row): a ring's 2(n−1)
    /// steps all carry the same flows.
    pub fn distinct_steps(&self) -> Vec<(u32, u32)> {
        match self.steps() {
            0 => Vec::new(),
            s => vec![(0, s)],
        }
    }

    /// Bytes one rank's buffer holds: what algbw divides by.
    pub fn algbw(&self, seconds: f64) -> f64 {
        let bytes = match self.kind {
            Kind::Incast => self.size * u64::from(self.ranks.saturating_sub(1)),
            _ => self.size,
        };
        bytes as f64 / seconds.max(f64::MIN_POSITIVE)
    }

    /// nccl-tests' bus bandwidth factor.
    pub fn busbw_factor(&self) -> f64 {
        let n = f64::from(self.ranks.max(1));
        match self.kind {
            Kind::AllReduce => 2.0 * (n - 1.0) / n,
            Kind::AllToAll => (n - 1.0) / n,
            Kind::Incast => 1.0,
        }
    }

    pub fn busbw(&self, seconds: f64) -> f64 {
        self.algbw(seconds) * self.busbw_factor()
    }

    /// Bytes every rank sends over the network in total (for conservation checks).
    pub fn network_bytes(&self) -> u64 {
        (0..self.steps())
            .flat_map(|k| self.step_flows(k))
            .map(|f| f.bytes)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_parse_by_name_and_an_unknown_one_says_which_exist() {
        for k in [Kind::AllReduce, Kind::AllToAll, Kind::Incast] {
            assert_eq!(k.as_str().parse::<Kind>(), Ok(k));
        }
        let e = "broadcast".parse::<Kind>().expect_err("unknown");
        assert_eq!(e, UnknownCollective("broadcast".into()));
        assert_eq!(
            e.to_string(),
            "unknown collective \"broadcast\": use allreduce, alltoall or incast"
        );
    }

    #[test]
    fn ring_allreduce_sends_2_n_minus_1_chunks_of_s_over_n_to_the_right_neighbour() {
        let c = Collective {
            kind: Kind::AllReduce,
            ranks: 4,
            size: 4000,
        };
        let s = c.schedule(3);
        assert_eq!(s.len(), 6);
        assert!(s.iter().all(|st| st.send
            == [Transfer {
                peer: 0,
                bytes: 1000
            }]
            && st.recv
                == [Transfer {
                    peer: 2,
                    bytes: 1000
                }]));
        assert_eq!(c.network_bytes(), 6 * 4 * 1000);
    }

    #[test]
    fn alltoall_sends_s_over_n_to_every_other_rank_in_one_step() {
        let c = Collective {
            kind: Kind::AllToAll,
            ranks: 3,
            size: 300,
        };
        let s = c.schedule(1);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].send.iter().map(|t| t.peer).collect::<Vec<_>>(), [0, 2]);
        let flows: Vec<(u32, u32)> = c.step_flows(0).map(|f| (f.src, f.dst)).collect();
        assert_eq!(flows, [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]);
        assert_eq!(c.step_flows(1).count(), 0);
    }

    #[test]
    fn incast_sends_everything_to_the_first_rank() {
        let c = Collective {
            kind: Kind::Incast,
            ranks: 4,
            size: 10,
        };
        assert_eq!(c.schedule(0)[0].recv.len(), 3);
        assert_eq!(c.schedule(2)[0].send, [Transfer { peer: 0, bytes: 10 }]);
        assert_eq!(c.network_bytes(), 30);
    }

    #[test]
    fn bus_bandwidth_follows_nccl_tests() {
        let ar = Collective {
            kind: Kind::AllReduce,
            ranks: 8,
            size: 1 << 20,
        };
        // 1 MiB in 1 ms: algbw 1.048576 GB/s, busbw × 2·7/8.
        assert!((ar.algbw(1e-3) - 1.048_576e9).abs() < 1.0);
        assert!((ar.busbw(1e-3) - 1.048_576e9 * 1.75).abs() < 1.0);
        let a2a = Collective {
            kind: Kind::AllToAll,
            ..ar
        };
        assert!((a2a.busbw(1e-3) - 1.048_576e9 * 0.875).abs() < 1.0);
    }

    #[test]
    fn qp_numbers_are_distinct_per_peer_and_lane_and_ports_follow_them() {
        let mut seen = std::collections::HashSet::new();
        for p in 0..64 {
            for l in 0..4 {
                assert!(seen.insert(qp_number(p, l)));
            }
        }
        assert_eq!(source_port(qp_number(0, 0)), 0xc100);
        assert!(source_port(qp_number(1000, 3)) >= 0xc000);
    }
}
