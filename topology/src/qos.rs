//! ECN and PFC arithmetic: pure functions of speed, cable length and MTU.
//!
//! Headroom follows the shape of SONiC's dynamic buffer model (`buffermgrdyn`, one vendor's
//! `buffer_headroom_*.lua`): after a port sends PAUSE it must still absorb the bytes on the cable
//! (both directions), the frame being sent, and what the peer sends while it reacts.
//!
//! ```text
//!   xoff = ceil_KiB( MTU + MTU + cable_bytes + response_bytes )
//!          cable_bytes    = 2 × length × speed / 198,000 km/s / 8
//!          response_bytes = 2.2 µs × speed / 8        (PHY/MAC delay + peer pause response)
//!   xon  = ceil_KiB( 1.4 × MTU + 65 B per Gbps )      (pipeline latency)
//!   size = xoff + xon
//! ```
//! With MTU 9100 this gives 100G/40m → xoff 51,200 B, xon 19,456 B (the published values exactly)
//! and 400G/300m → xoff 280,576 B (+3% over the published 272,384 B), xon 38,912 B.
//!
//! ECN defaults scale with speed as in the HPCC/DCQCN simulators (25G 100/400 KB, 100G
//! 400/1600 KB): Kmin = 4 KB per Gbps, Kmax = 16 KB per Gbps, Pmax = 0.2. PFC must be the last
//! resort, so the pause threshold (port buffer − headroom) must lie above Kmax.

use crate::units::{Bytes, Length, Speed};

/// Signal propagation in fibre and copper, metres per second.
const PROPAGATION_M_PER_S: f64 = 198_000_000.0;
/// PHY/MAC delay plus the peer's pause response time, seconds.
const RESPONSE_S: f64 = 2.2e-6;

fn ceil_kib(bytes: f64) -> u64 {
    let b = bytes.max(0.0).ceil() as u64;
    b.div_ceil(1024) * 1024
}

/// Lossless headroom for one port and priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Headroom {
    pub xoff: Bytes,
    pub xon: Bytes,
    pub size: Bytes,
}

pub fn headroom(speed: Speed, cable: Length, mtu: u32) -> Headroom {
    let bytes_per_s = speed.bits_per_sec() as f64 / 8.0;
    let cable_bytes = 2.0 * cable.as_metres() / PROPAGATION_M_PER_S * bytes_per_s;
    let response_bytes = RESPONSE_S * bytes_per_s;
    let mtu = f64::from(mtu);
    let xoff = ceil_kib(2.0 * mtu + cable_bytes + response_bytes);
    let xon = ceil_kib(1.4 * mtu + 65.0 * speed.as_gbps());
    Headroom {
        xoff: Bytes(xoff),
        xon: Bytes(xon),
        size: Bytes(xoff + xon),
    }
}

/// DCQCN-style marking parameters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct EcnParams {
    pub kmin: Bytes,
    pub kmax: Bytes,
    pub pmax: f64,
}

pub const DEFAULT_PMAX: f64 = 0.2;

pub fn default_ecn(speed: Speed) -> EcnParams {
    let g = speed.as_gbps();
    EcnParams {
        kmin: Bytes((4_000.0 * g).round() as u64),
        kmax: Bytes((16_000.0 * g).round() as u64),
        pmax: DEFAULT_PMAX,
    }
}

/// Buffer one port may fill for one lossless priority, by default.
pub fn default_port_buffer(speed: Speed) -> Bytes {
    Bytes((24_000.0 * speed.as_gbps()).round() as u64)
}

/// Queue depth at which the port pauses its peer: the buffer share less the headroom it must keep.
pub fn pause_threshold(port_buffer: Bytes, h: Headroom) -> Bytes {
    Bytes(port_buffer.0.saturating_sub(h.size.0))
}

/// Everything the ECN/PFC values of one port and class depend on: the port's effective speed
/// and cable length (its link's or host's), the MTU, and what the intent sets explicitly (`None`:
/// derived).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QosInputs {
    pub speed: Speed,
    pub cable: Length,
    pub mtu: u32,
    pub port_buffer: Option<Bytes>,
    pub xoff: Option<Bytes>,
    pub xon: Option<Bytes>,
    pub kmin: Option<Bytes>,
    pub kmax: Option<Bytes>,
    pub pmax: Option<f64>,
}

/// ECN and PFC values for one (port, class).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PortQos {
    pub ecn: EcnParams,
    pub headroom: Headroom,
    pub port_buffer: Bytes,
    pub pause_threshold: Bytes,
}

/// The values the compiler emits for `i`.
pub fn port_qos(i: &QosInputs) -> PortQos {
    let d = default_ecn(i.speed);
    let ecn = EcnParams {
        kmin: i.kmin.unwrap_or(d.kmin),
        kmax: i.kmax.unwrap_or(d.kmax),
        pmax: i.pmax.unwrap_or(d.pmax),
    };
    let mut h = headroom(i.speed, i.cable, i.mtu);
    if let Some(x) = i.xoff {
        h.xoff = x;
    }
    if let Some(x) = i.xon {
        h.xon = x;
    }
    h.size = Bytes(h.xoff.0.saturating_add(h.xon.0));
    let port_buffer = i
        .port_buffer
        .unwrap_or_else(|| default_port_buffer(i.speed));
    PortQos {
        ecn,
        headroom: h,
        port_buffer,
        pause_threshold: pause_threshold(port_buffer, h),
    }
}

/// What makes the values of one (port, class) unsafe to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QosProblem {
    /// Marking would start at or above where it is certain.
    KminNotBelowKmax,
    /// The port would resume its peer above the level at which it paused it.
    XonAboveXoff,
    /// The headroom alone fills the port's buffer: the pause threshold is 0.
    HeadroomFillsBuffer,
    /// The queue reaches the pause threshold before ECN marks every packet.
    EcnNotBeforePfc,
    /// Marking is certain only above the buffer the queue can use: it never is.
    KmaxAboveBuffer,
}

impl PortQos {
    /// The first safety rule these values break, if any; `lossless` is whether PFC protects the
    /// class. Validation refuses every intent for which some connected port has one, and the
    /// compiler checks again before it emits a profile or envelope.
    pub fn problem(&self, lossless: bool) -> Option<QosProblem> {
        if self.ecn.kmin >= self.ecn.kmax {
            return Some(QosProblem::KminNotBelowKmax);
        }
        if lossless {
            if self.headroom.xon > self.headroom.xoff {
                return Some(QosProblem::XonAboveXoff);
            }
            if self.headroom.size >= self.port_buffer {
                return Some(QosProblem::HeadroomFillsBuffer);
            }
            if self.ecn.kmax >= self.pause_threshold {
                return Some(QosProblem::EcnNotBeforePfc);
            }
        } else if self.ecn.kmax > self.port_buffer {
            return Some(QosProblem::KmaxAboveBuffer);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_matches_sonic_published_values_for_mtu_9100() {
        let h = headroom(Speed::gbps(100), Length::metres(40), 9100);
        assert_eq!(h.xoff, Bytes(51_200));
        assert_eq!(h.xon, Bytes(19_456));
        assert_eq!(h.size, Bytes(70_656));
        let h = headroom(Speed::gbps(400), Length::metres(300), 9100);
        assert_eq!(h.xon, Bytes(38_912));
        let err = (h.xoff.0 as f64 - 272_384.0).abs() / 272_384.0;
        assert!(
            err < 0.05,
            "400G/300m xoff {} is {:.1}% off",
            h.xoff,
            err * 100.0
        );
    }

    #[test]
    fn headroom_grows_with_cable_length_and_speed() {
        let short = headroom(Speed::gbps(100), Length::metres(5), 9100);
        let long = headroom(Speed::gbps(100), Length::metres(300), 9100);
        let fast = headroom(Speed::gbps(400), Length::metres(5), 9100);
        assert!(long.xoff > short.xoff);
        assert!(fast.xoff > short.xoff);
    }

    fn inputs(speed: u64, cable_m: u64) -> QosInputs {
        QosInputs {
            speed: Speed::gbps(speed),
            cable: Length::metres(cable_m),
            mtu: 9100,
            port_buffer: None,
            xoff: None,
            xon: None,
            kmin: None,
            kmax: None,
            pmax: None,
        }
    }

    #[test]
    fn default_values_are_safe_up_to_a_few_kilometres_and_unsafe_beyond() {
        for g in [25, 100, 400, 800] {
            assert_eq!(port_qos(&inputs(g, 300)).problem(true), None, "{g}G/300m");
        }
        // 100G over 40 km: the cable alone holds ~5 MB in flight, twice the 2.4 MB buffer.
        let long = port_qos(&inputs(100, 40_000));
        assert_eq!(long.pause_threshold, Bytes(0));
        assert_eq!(long.problem(true), Some(QosProblem::HeadroomFillsBuffer));
        // A lossy class needs no headroom.
        assert_eq!(long.problem(false), None);
    }

    #[test]
    fn each_safety_rule_is_detected() {
        let mut i = inputs(100, 5);
        i.kmin = Some(Bytes(2_000_000));
        assert_eq!(
            port_qos(&i).problem(false),
            Some(QosProblem::KminNotBelowKmax)
        );
        let mut i = inputs(100, 5);
        i.xon = Some(Bytes(60_000));
        i.xoff = Some(Bytes(50_000));
        assert_eq!(port_qos(&i).problem(true), Some(QosProblem::XonAboveXoff));
        let mut i = inputs(100, 5);
        i.kmax = Some(Bytes(2_350_000));
        assert_eq!(
            port_qos(&i).problem(true),
            Some(QosProblem::EcnNotBeforePfc)
        );
        let mut i = inputs(100, 5);
        i.kmax = Some(Bytes(3_000_000));
        assert_eq!(
            port_qos(&i).problem(false),
            Some(QosProblem::KmaxAboveBuffer)
        );
    }

    #[test]
    fn default_ecn_follows_hpcc_table_and_acts_before_pfc() {
        let e = default_ecn(Speed::gbps(25));
        assert_eq!((e.kmin, e.kmax), (Bytes(100_000), Bytes(400_000)));
        let e = default_ecn(Speed::gbps(100));
        assert_eq!((e.kmin, e.kmax), (Bytes(400_000), Bytes(1_600_000)));
        for g in [25, 50, 100, 200, 400, 800] {
            let s = Speed::gbps(g);
            let pause = pause_threshold(
                default_port_buffer(s),
                headroom(s, Length::metres(300), 9100),
            );
            assert!(
                default_ecn(s).kmax < pause,
                "{g}G: kmax must be under the pause threshold"
            );
        }
    }
}
