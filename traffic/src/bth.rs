//! RoCEv2 wire format: what follows the UDP header (destination port 4791).
//!
//! ```text
//!  data   BTH(12) RETH(16) payload ICRC(4)      opcode RC RDMA WRITE FIRST/MIDDLE/LAST/ONLY
//!  ack    BTH(12) AETH(4) ICRC(4)               opcode RC ACKNOWLEDGE, AETH syndrome ACK or NAK
//!  cnp    BTH(12) reserved(16) ICRC(4)          opcode 0x81, BECN set
//! ```
//! Every data packet carries a RETH, not only the first of a message as in the specification:
//! its virtual address is the offset of the packet's payload in the message, so a receiver with
//! out-of-order placement can put any packet where it belongs without per-message state (NICs
//! that place out of order carry the equivalent). The top bit of the RETH's R_Key marks a
//! retransmission, so receivers count network reordering only on first transmissions. The ICRC
//! is sent as zeros: the kernel's UDP checksum already covers the payload.

use thiserror::Error;

/// The IANA port of RoCEv2.
pub const ROCEV2_PORT: u16 = 4791;
pub const BTH_LEN: usize = 12;
pub const RETH_LEN: usize = 16;
pub const AETH_LEN: usize = 4;
pub const ICRC_LEN: usize = 4;
/// Bytes a data packet adds to its payload (inside UDP).
pub const DATA_OVERHEAD: usize = BTH_LEN + RETH_LEN + ICRC_LEN;
/// UDP + IPv4 + Ethernet headers (no FCS), for wire-size accounting.
pub const UDP_IP_ETH: usize = 8 + 20 + 14;

pub mod opcode {
    pub const RC_WRITE_FIRST: u8 = 0x06;
    pub const RC_WRITE_MIDDLE: u8 = 0x07;
    pub const RC_WRITE_LAST: u8 = 0x08;
    pub const RC_WRITE_ONLY: u8 = 0x0a;
    pub const RC_ACK: u8 = 0x11;
    pub const CNP: u8 = 0x81;
}

/// AETH syndromes used here: ACK, and NAK "PSN sequence error" (the requester goes back to the
/// PSN in the BTH).
pub mod syndrome {
    pub const ACK: u8 = 0x00;
    pub const NAK_PSN_SEQUENCE: u8 = 0x60;
    /// NACK of a trimmed packet: send this PSN again, only it (Ultra Ethernet's NACK; a NAK
    /// code IBA leaves reserved, so a RoCE NIC never sends it).
    pub const NAK_TRIMMED: u8 = 0x7f;
}

/// The 24-bit PSN space.
pub const PSN_MASK: u32 = 0x00ff_ffff;
const RETRANSMIT_FLAG: u32 = 0x8000_0000;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("packet of {0} bytes is too short for a {1}")]
    Short(usize, &'static str),
    #[error("unknown opcode {0:#04x}")]
    Opcode(u8),
}

/// Base Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bth {
    pub opcode: u8,
    pub solicited: bool,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    /// 24 bits.
    pub dest_qp: u32,
    pub ack_req: bool,
    /// 24 bits.
    pub psn: u32,
}

impl Bth {
    pub fn encode(&self, out: &mut [u8]) {
        out[0] = self.opcode;
        // SE, MigReq=1, PadCnt=0, TVer=0
        out[1] = (u8::from(self.solicited) << 7) | 0x40;
        out[2..4].copy_from_slice(&self.pkey.to_be_bytes());
        out[4] = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6);
        let qp = (self.dest_qp & PSN_MASK).to_be_bytes();
        out[5..8].copy_from_slice(&qp[1..4]);
        out[8] = u8::from(self.ack_req) << 7;
        let psn = (self.psn & PSN_MASK).to_be_bytes();
        out[9..12].copy_from_slice(&psn[1..4]);
    }

    pub fn decode(b: &[u8]) -> Result<Bth, WireError> {
        if b.len() < BTH_LEN {
            return Err(WireError::Short(b.len(), "BTH"));
        }
        Ok(Bth {
            opcode: b[0],
            solicited: b[1] & 0x80 != 0,
            pkey: u16::from_be_bytes([b[2], b[3]]),
            fecn: b[4] & 0x80 != 0,
            becn: b[4] & 0x40 != 0,
            dest_qp: u32::from_be_bytes([0, b[5], b[6], b[7]]),
            ack_req: b[8] & 0x80 != 0,
            psn: u32::from_be_bytes([0, b[9], b[10], b[11]]),
        })
    }
}

/// RDMA Extended Transport Header (here on every data packet, see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reth {
    /// Offset of this packet's payload in its message.
    pub va: u64,
    /// Message id; the top bit marks a retransmission.
    pub rkey: u32,
    /// Length of the whole message.
    pub len: u32,
}

impl Reth {
    pub fn message(&self) -> u32 {
        self.rkey & !RETRANSMIT_FLAG
    }
    pub fn retransmission(&self) -> bool {
        self.rkey & RETRANSMIT_FLAG != 0
    }
    pub fn rkey_for(message: u32, retransmission: bool) -> u32 {
        (message & !RETRANSMIT_FLAG) | if retransmission { RETRANSMIT_FLAG } else { 0 }
    }
}

/// ACK Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aeth {
    pub syndrome: u8,
    /// 24 bits: messages completed.
    pub msn: u32,
}

/// A decoded RoCEv2 packet (the part after UDP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet {
    Data {
        bth: Bth,
        reth: Reth,
        payload: usize,
    },
    Ack {
        bth: Bth,
        aeth: Aeth,
    },
    Cnp {
        bth: Bth,
    },
}

impl Packet {
    pub fn bth(&self) -> &Bth {
        match self {
            Packet::Data { bth, .. } | Packet::Ack { bth, .. } | Packet::Cnp { bth } => bth,
        }
    }

    /// Writes the packet into `out` (payload bytes are left as they are, zero on a fresh
    /// buffer) and returns its length.
    pub fn encode(&self, out: &mut Vec<u8>) -> usize {
        out.clear();
        let mut hdr = [0u8; BTH_LEN];
        self.bth().encode(&mut hdr);
        out.extend_from_slice(&hdr);
        match self {
            Packet::Data { reth, payload, .. } => {
                out.extend_from_slice(&reth.va.to_be_bytes());
                out.extend_from_slice(&reth.rkey.to_be_bytes());
                out.extend_from_slice(&reth.len.to_be_bytes());
                out.resize(out.len() + payload, 0);
            }
            Packet::Ack { aeth, .. } => {
                let m = (aeth.msn & PSN_MASK).to_be_bytes();
                out.extend_from_slice(&[aeth.syndrome, m[1], m[2], m[3]]);
            }
            Packet::Cnp { .. } => out.resize(out.len() + 16, 0),
        }
        out.resize(out.len() + ICRC_LEN, 0);
        out.len()
    }

    pub fn decode(b: &[u8]) -> Result<Packet, WireError> {
        let bth = Bth::decode(b)?;
        let rest = &b[BTH_LEN..];
        match bth.opcode {
            opcode::RC_WRITE_FIRST
            | opcode::RC_WRITE_MIDDLE
            | opcode::RC_WRITE_LAST
            | opcode::RC_WRITE_ONLY => {
                if rest.len() < RETH_LEN + ICRC_LEN {
                    return Err(WireError::Short(b.len(), "RDMA WRITE"));
                }
                let va = u64::from_be_bytes(rest[0..8].try_into().unwrap_or_default());
                let rkey = u32::from_be_bytes(rest[8..12].try_into().unwrap_or_default());
                let len = u32::from_be_bytes(rest[12..16].try_into().unwrap_or_default());
                Ok(Packet::Data {
                    bth,
                    reth: Reth { va, rkey, len },
                    payload: rest.len() - RETH_LEN - ICRC_LEN,
                })
            }
            opcode::RC_ACK => {
                if rest.len() < AETH_LEN + ICRC_LEN {
                    return Err(WireError::Short(b.len(), "ACK"));
                }
                Ok(Packet::Ack {
                    bth,
                    aeth: Aeth {
                        syndrome: rest[0],
                        msn: u32::from_be_bytes([0, rest[1], rest[2], rest[3]]),
                    },
                })
            }
            opcode::CNP => {
                if rest.len() < 16 + ICRC_LEN {
                    return Err(WireError::Short(b.len(), "CNP"));
                }
                Ok(Packet::Cnp { bth })
            }
            other => Err(WireError::Opcode(other)),
        }
    }
}

/// `a - b` in the 24-bit PSN space, as a signed distance (within half the space).
pub fn psn_diff(a: u32, b: u32) -> i32 {
    let d = a.wrapping_sub(b) & PSN_MASK;
    if d & 0x0080_0000 != 0 {
        d as i32 - (1 << 24)
    } else {
        d as i32
    }
}

pub fn psn_add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & PSN_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bth_fields_survive_encode_and_decode_at_their_bit_positions() {
        let b = Bth {
            opcode: opcode::RC_WRITE_MIDDLE,
            solicited: true,
            pkey: 0xffff,
            fecn: false,
            becn: true,
            dest_qp: 0x00ab_cdef,
            ack_req: true,
            psn: 0x0012_3456,
        };
        let mut w = [0u8; BTH_LEN];
        b.encode(&mut w);
        // Byte layout of IBA vol. 1 §9.2: opcode, SE|M|Pad|TVer, P_Key, F|B|resv, DestQP, A|resv, PSN.
        assert_eq!(
            w,
            [
                0x07, 0xc0, 0xff, 0xff, 0x40, 0xab, 0xcd, 0xef, 0x80, 0x12, 0x34, 0x56
            ]
        );
        assert_eq!(Bth::decode(&w), Ok(b));
    }

    #[test]
    fn data_ack_and_cnp_packets_round_trip_and_short_ones_are_rejected() {
        let mut buf = Vec::new();
        let data = Packet::Data {
            bth: Bth {
                opcode: opcode::RC_WRITE_FIRST,
                dest_qp: 0x101,
                psn: 7,
                ..Bth::default()
            },
            reth: Reth {
                va: 4096,
                rkey: Reth::rkey_for(42, true),
                len: 65536,
            },
            payload: 1000,
        };
        let n = data.encode(&mut buf);
        assert_eq!(n, DATA_OVERHEAD + 1000);
        let back = Packet::decode(&buf).expect("data decodes");
        assert_eq!(back, data);
        let Packet::Data { reth, .. } = back else {
            unreachable!()
        };
        assert_eq!((reth.message(), reth.retransmission()), (42, true));

        let ack = Packet::Ack {
            bth: Bth {
                opcode: opcode::RC_ACK,
                dest_qp: 0x102,
                psn: PSN_MASK,
                ..Bth::default()
            },
            aeth: Aeth {
                syndrome: syndrome::NAK_PSN_SEQUENCE,
                msn: 3,
            },
        };
        ack.encode(&mut buf);
        assert_eq!(Packet::decode(&buf), Ok(ack));
        let cnp = Packet::Cnp {
            bth: Bth {
                opcode: opcode::CNP,
                becn: true,
                dest_qp: 9,
                ..Bth::default()
            },
        };
        cnp.encode(&mut buf);
        assert_eq!(Packet::decode(&buf), Ok(cnp));
        assert!(matches!(
            Packet::decode(&buf[..10]),
            Err(WireError::Short(10, "BTH"))
        ));
        assert!(matches!(
            Packet::decode(&buf[..BTH_LEN + 3]),
            Err(WireError::Short(_, "CNP"))
        ));
        buf[0] = 0x64;
        assert_eq!(Packet::decode(&buf), Err(WireError::Opcode(0x64)));
    }

    #[test]
    fn psn_distance_wraps_around_the_24_bit_space() {
        assert_eq!(psn_diff(5, 3), 2);
        assert_eq!(psn_diff(3, 5), -2);
        assert_eq!(psn_diff(1, PSN_MASK), 2);
        assert_eq!(psn_diff(PSN_MASK, 1), -2);
        assert_eq!(psn_add(PSN_MASK, 3), 2);
    }
}
