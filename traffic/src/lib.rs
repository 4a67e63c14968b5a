//! A RoCE-shaped traffic engine for Weft's testbed: RoCEv2 packets (UDP to port 4791, a BTH
//! with opcode, destination QP and PSN) sent from ordinary UDP sockets in the lossless class's
//! DSCP with ECT(0), paced in software per QP and cut on CNPs (DCQCN-like), received with PSN
//! tracking by either kind of NIC (out-of-order placement, or go-back-N), and collectives
//! (ring AllReduce, AlltoAll, incast) scheduled on top.
//!
//! ```text
//!   collective::Collective ── schedule(rank) ──▶ engine::Endpoint ── Out ──▶ net::Net (UDP)
//!                                                 per QP: sender::QpSender (PSNs, pacing,
//!                                                         dcqcn::Dcqcn, go-back-N)
//!                                                         receiver::PsnTracker (order,
//!                                                         placement, loss, ACK/NAK)
//! ```
//! Everything but [`net`] and [`engine::run`] works on explicit time and does no I/O.

pub mod bth;
pub mod collective;
pub mod dcqcn;
pub mod engine;
pub mod net;
pub mod receiver;
pub mod sender;

pub use collective::{Collective, Kind};
pub use engine::{RankPlan, RankReport, run};
pub use receiver::Placement;
