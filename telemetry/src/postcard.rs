//! Postcards as the pipeline sends them (`p4/include/telemetry.p4`), decoded into per-hop
//! records (STATE_DB `WEFT_POSTCARDS`, typed as [`PostcardHop`]).
//!
//! A postcard is a truncated clone of the forwarded packet, sent to the CPU port as a
//! packet-in: `Ethernet (EtherType 0x88b5) | postcard header (40 bytes) | the original L3 and
//! L4 headers`. Field meanings follow INT-XD / Telemetry Report v2.0 where they fit:
//!
//! | postcard field | INT metadata | record field |
//! |---|---|---|
//! | `switch_id` | node id | `switch_id` (and the plugin's `switch` name) |
//! | `ingress_port`, `egress_port` | level-1 ingress / egress interface id | port names |
//! | `queue` | queue id | `queue` |
//! | `enq_qdepth` | queue occupancy (INT: cells/bytes; here **packets**) | `queue_depth` |
//! | `deq_timedelta` | - (INT has hop latency only) | `queue_us` |
//! | `ingress_ts`, `egress_ts` | ingress / egress timestamp (INT: ns; here **µs**, BMv2's clock) | `*_ts_us`, `hop_latency_us` |
//! | `flow_hash` | - | `flow_hash` |
//! | `flags` | report type (watched = INT-XD "watchlist", sampled) | `reason` |
//!
//! Differences from INT-XD: no Telemetry Report header and no UDP encapsulation (the report
//! travels as a P4Runtime packet-in, not to a remote collector), queue occupancy in packets,
//! timestamps in microseconds of each switch's own clock (hop latency is only meaningful
//! within one switch), and the inner packet is the clone truncated to 160 bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use weft_sonic_schema::state::{POSTCARD_HOP_VERSION, PostcardHop};

/// `ETHERTYPE_POSTCARD` in `p4/include/constants.p4`.
pub const ETHERTYPE_POSTCARD: u16 = 0x88b5;
/// Bytes of the postcard header.
pub const POSTCARD_LEN: usize = 40;
/// The RoCEv2 UDP port.
pub const ROCE_PORT: u16 = 4791;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostcardError {
    #[error("{0} bytes: too short for {1}")]
    Short(usize, &'static str),
    #[error("EtherType {0:#06x} is not a postcard's (0x88b5)")]
    NotPostcard(u16),
    #[error("postcard version {0} (this plugin reads version 1)")]
    Version(u8),
}

/// One decoded postcard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Postcard {
    pub flags: u8,
    pub switch_id: u32,
    pub ingress_port: u16,
    pub egress_port: u16,
    pub queue: u8,
    pub enq_qdepth: u32,
    pub deq_timedelta_us: u32,
    pub ingress_ts_us: u64,
    pub egress_ts_us: u64,
    pub flow_hash: u32,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    pub ttl: u8,
    pub ip_id: Option<u16>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub dst_qp: Option<u32>,
    pub psn: Option<u32>,
}

fn be(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |a, x| (a << 8) | u64::from(*x))
}

fn need(b: &[u8], n: usize, what: &'static str) -> Result<(), PostcardError> {
    if b.len() < n {
        Err(PostcardError::Short(b.len(), what))
    } else {
        Ok(())
    }
}

/// Decodes a packet-in payload (starting at the Ethernet header).
pub fn decode(p: &[u8]) -> Result<Postcard, PostcardError> {
    need(p, 14, "an Ethernet header")?;
    let et = be(&p[12..14]) as u16;
    if et != ETHERTYPE_POSTCARD {
        return Err(PostcardError::NotPostcard(et));
    }
    let c = &p[14..];
    need(c, POSTCARD_LEN, "a postcard header")?;
    if c[0] != 1 {
        return Err(PostcardError::Version(c[0]));
    }
    let next = be(&c[2..4]) as u16;
    let l3 = &c[POSTCARD_LEN..];
    let (src, dst, protocol, ttl, ip_id, l4): (IpAddr, IpAddr, u8, u8, Option<u16>, &[u8]) =
        match next {
            0x0800 => {
                need(l3, 20, "an IPv4 header")?;
                let ihl = usize::from(l3[0] & 0x0f) * 4;
                let mut a = [0u8; 4];
                a.copy_from_slice(&l3[12..16]);
                let mut b = [0u8; 4];
                b.copy_from_slice(&l3[16..20]);
                (
                    IpAddr::V4(Ipv4Addr::from(a)),
                    IpAddr::V4(Ipv4Addr::from(b)),
                    l3[9],
                    l3[8],
                    Some(be(&l3[4..6]) as u16),
                    l3.get(ihl.max(20)..).unwrap_or(&[]),
                )
            }
            0x86dd => {
                need(l3, 40, "an IPv6 header")?;
                let mut a = [0u8; 16];
                a.copy_from_slice(&l3[8..24]);
                let mut b = [0u8; 16];
                b.copy_from_slice(&l3[24..40]);
                (
                    IpAddr::V6(Ipv6Addr::from(a)),
                    IpAddr::V6(Ipv6Addr::from(b)),
                    l3[6],
                    l3[7],
                    None,
                    &l3[40..],
                )
            }
            other => return Err(PostcardError::NotPostcard(other)),
        };
    let (mut src_port, mut dst_port, mut dst_qp, mut psn) = (None, None, None, None);
    if matches!(protocol, 6 | 17) && l4.len() >= 4 {
        src_port = Some(be(&l4[0..2]) as u16);
        dst_port = Some(be(&l4[2..4]) as u16);
    }
    // RoCEv2: UDP to 4791, then the BTH (opcode, flags, pkey, reserved, dest QP, ack, PSN).
    if protocol == 17 && dst_port == Some(ROCE_PORT) && l4.len() >= 8 + 12 {
        let bth = &l4[8..20];
        dst_qp = Some(be(&bth[5..8]) as u32);
        psn = Some(be(&bth[9..12]) as u32);
    }
    Ok(Postcard {
        flags: c[1],
        switch_id: be(&c[4..8]) as u32,
        ingress_port: be(&c[8..10]) as u16,
        egress_port: be(&c[10..12]) as u16,
        queue: c[12],
        enq_qdepth: be(&c[16..20]) as u32,
        deq_timedelta_us: be(&c[20..24]) as u32,
        ingress_ts_us: be(&c[24..30]),
        egress_ts_us: be(&c[30..36]),
        flow_hash: be(&c[36..40]) as u32,
        src,
        dst,
        protocol,
        ttl,
        ip_id,
        src_port,
        dst_port,
        dst_qp,
        psn,
    })
}

impl Postcard {
    /// The STATE_DB record of this hop; `port` names a port id (or `None`: the id in hex).
    pub fn hop(
        &self,
        switch: &str,
        port: impl Fn(u16) -> Option<String>,
        time_us: u64,
    ) -> PostcardHop {
        let name = |id: u16| port(id).unwrap_or_else(|| format!("{id:#x}"));
        PostcardHop {
            id: String::new(),
            version: POSTCARD_HOP_VERSION,
            switch: switch.to_string(),
            switch_id: self.switch_id,
            reason: if self.flags & 1 != 0 {
                "watched".into()
            } else {
                "sampled".into()
            },
            ingress_port: name(self.ingress_port),
            egress_port: name(self.egress_port),
            queue: self.queue,
            queue_depth: self.enq_qdepth,
            queue_us: self.deq_timedelta_us,
            ingress_ts_us: self.ingress_ts_us,
            egress_ts_us: self.egress_ts_us,
            hop_latency_us: self.egress_ts_us.saturating_sub(self.ingress_ts_us),
            time_us,
            src: self.src.to_string(),
            dst: self.dst.to_string(),
            protocol: self.protocol,
            src_port: self.src_port,
            dst_port: self.dst_port,
            dst_qp: self.dst_qp,
            psn: self.psn,
            ip_id: self.ip_id,
            ttl: self.ttl,
            flow_hash: self.flow_hash,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A postcard as the pipeline builds it, around an IPv4/UDP RoCE packet.
    pub fn sample() -> Vec<u8> {
        let mut p = vec![0u8; 12];
        p.extend_from_slice(&0x88b5u16.to_be_bytes());
        let mut c = vec![1u8, 1];
        c.extend_from_slice(&0x0800u16.to_be_bytes());
        c.extend_from_slice(&3u32.to_be_bytes()); // switch id
        c.extend_from_slice(&1u16.to_be_bytes()); // ingress port
        c.extend_from_slice(&3u16.to_be_bytes()); // egress port
        c.extend_from_slice(&[3, 0, 0, 0]); // queue, reserved
        c.extend_from_slice(&7u32.to_be_bytes()); // depth
        c.extend_from_slice(&55u32.to_be_bytes()); // deq timedelta
        c.extend_from_slice(&1_000u64.to_be_bytes()[2..]); // ingress ts (48 bits)
        c.extend_from_slice(&1_080u64.to_be_bytes()[2..]); // egress ts
        c.extend_from_slice(&0xdead_beefu32.to_be_bytes());
        assert_eq!(c.len(), POSTCARD_LEN);
        p.extend(c);
        let mut ip = vec![0x45, 0x68, 0, 60, 0x12, 0x34, 0, 0, 63, 17, 0, 0];
        ip.extend_from_slice(&[10, 0, 1, 1, 10, 0, 3, 1]);
        p.extend(ip);
        p.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb7, 0, 40, 0, 0]); // 49152 → 4791
        p.extend_from_slice(&[4, 0, 0xff, 0xff, 0, 0, 0, 17, 0, 0, 0x01, 0x02]); // BTH qp 17 psn 258
        p
    }

    #[test]
    fn a_roce_postcard_decodes_into_hop_fields() {
        let pc = decode(&sample()).expect("decodes");
        assert_eq!(pc.switch_id, 3);
        assert_eq!((pc.ingress_port, pc.egress_port, pc.queue), (1, 3, 3));
        assert_eq!((pc.enq_qdepth, pc.deq_timedelta_us), (7, 55));
        assert_eq!((pc.ingress_ts_us, pc.egress_ts_us), (1000, 1080));
        assert_eq!(pc.src, "10.0.1.1".parse::<IpAddr>().expect("ip"));
        assert_eq!(pc.dst, "10.0.3.1".parse::<IpAddr>().expect("ip"));
        assert_eq!((pc.protocol, pc.ttl, pc.ip_id), (17, 63, Some(0x1234)));
        assert_eq!((pc.src_port, pc.dst_port), (Some(49152), Some(4791)));
        assert_eq!((pc.dst_qp, pc.psn), (Some(17), Some(258)));
        let h = pc.hop("leaf1", |id| (id == 1).then(|| "Ethernet0".to_string()), 5);
        assert_eq!(h.ingress_port, "Ethernet0");
        assert_eq!(h.egress_port, "0x3", "an unknown port id is kept, in hex");
        assert_eq!(h.hop_latency_us, 80);
        assert_eq!(h.reason, "watched");
    }

    #[test]
    fn truncated_and_foreign_packets_are_errors_not_panics() {
        let p = sample();
        for n in 0..p.len().min(14 + POSTCARD_LEN + 20) {
            assert!(decode(&p[..n]).is_err(), "{n} bytes");
        }
        let mut other = p.clone();
        other[12] = 0x08;
        other[13] = 0x00;
        assert_eq!(decode(&other), Err(PostcardError::NotPostcard(0x0800)));
    }
}
