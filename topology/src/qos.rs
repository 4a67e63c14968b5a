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
