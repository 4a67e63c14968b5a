//! The pipeline's multipath hash, bit for bit (`p4/include/flow.p4`, `multipath.p4`):
//!
//! 1. `flow_hash = crc32(key) % 0xffffffff` over the 40-byte key `flow_src(128) flow_dst(128)
//!    ip_proto(8) l4_src_port(16) l4_dst_port(16) dst_qp(24)`, IPv4 addresses zero-extended,
//!    fields concatenated big-endian (BMv2 deparses the field list into bytes; every field is
//!    byte-aligned). `hash(..., base 0, max 0xffffffff)` is `base + crc % max`.
//! 2. HASH mode puts `flow_hash × (seed | 1)` (mod 2³²) into the 32-bit selector key, `seed`
//!    being the switch's hash seed (`weft_p4::hash_seed` of its device id, which the plugin
//!    writes into `set_switch_config`); the action selector hashes that key with crc16
//!    (4 bytes, big-endian) and picks member `crc16 % group size` among the group's member
//!    handles in handle order (BMv2's `GroupMgr::get_from_hash`).
//!
//! BMv2's crc32 is CRC-32/ISO-HDLC (reflected, poly 0x04C11DB7, init and xorout 0xFFFFFFFF);
//! its crc16 is CRC-16/ARC (reflected, poly 0x8005, init 0, xorout 0): `calculations.cpp`.
//! Every switch computes the same key with the same functions; without the seed successive
//! hops of one flow made correlated choices (ECMP polarization, see the README). The seed
//! multiplies rather than XORs: both CRCs are affine over GF(2), so an XORed seed would only
//! permute the members and keep the correlation.

use std::net::Ipv4Addr;

const fn crc32_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

const fn crc16_table() -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u16;
        let mut k = 0;
        while k < 8 {
            // 0xA001 is 0x8005 reflected.
            c = if c & 1 != 0 {
                0xa001 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CRC32: [u32; 256] = crc32_table();
static CRC16: [u16; 256] = crc16_table();

pub fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in data {
        c = CRC32[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

pub fn crc16(data: &[u8]) -> u16 {
    let mut c = 0u16;
    for &b in data {
        c = CRC16[((c ^ u16::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    c
}

/// A RoCEv2 flow as the pipeline keys it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
    pub dst_qp: u32,
}

pub const IP_PROTO_UDP: u8 = 17;

impl FlowKey {
    pub fn bytes(&self) -> [u8; 40] {
        let mut b = [0u8; 40];
        b[12..16].copy_from_slice(&self.src.octets());
        b[28..32].copy_from_slice(&self.dst.octets());
        b[32] = IP_PROTO_UDP;
        b[33..35].copy_from_slice(&self.src_port.to_be_bytes());
        b[35..37].copy_from_slice(&self.dst_port.to_be_bytes());
        let qp = (self.dst_qp & 0x00ff_ffff).to_be_bytes();
        b[37..40].copy_from_slice(&qp[1..4]);
        b
    }

    /// `meta.flow_hash`.
    pub fn flow_hash(&self) -> u32 {
        // `hash(..., 32w0, ..., 32w0xffffffff)`: base + crc % max.
        (u64::from(crc32(&self.bytes())) % 0xffff_ffff) as u32
    }

    /// The action selector's hash of the selector key in HASH mode on a switch with hash seed
    /// `seed` (0: the unseeded hash, `crc16(flow_hash)`).
    pub fn selector_hash(&self, seed: u32) -> u16 {
        crc16(&self.flow_hash().wrapping_mul(seed | 1).to_be_bytes())
    }

    /// The selector's hash in ENTROPY mode: the UDP source port alone, times `seed | 1`.
    pub fn entropy_hash(&self, seed: u32) -> u16 {
        crc16(
            &u32::from(self.src_port)
                .wrapping_mul(seed | 1)
                .to_be_bytes(),
        )
    }
}

/// The hash seed of the switch with `device_id`: must equal `weft_p4::hash_seed` (a test in
/// `tests/model.rs` checks it), repeated here so the model does not depend on the pipeline crate.
pub fn hash_seed(device_id: u64) -> u32 {
    let mut z = device_id.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

/// splitmix64: the model's deterministic randomness (spray samples, flowlet picks, random
/// link failures), seeded by the caller.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crcs_match_the_standard_check_values_of_their_catalogue_entries() {
        // reveng's catalogue: CRC-32/ISO-HDLC check 0xCBF43926, CRC-16/ARC check 0xBB3D.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc16(b"123456789"), 0xbb3d);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn the_flow_key_is_40_bytes_with_fields_at_their_p4_offsets() {
        let k = FlowKey {
            src: Ipv4Addr::new(10, 0, 0, 2),
            dst: Ipv4Addr::new(10, 0, 0, 18),
            src_port: 0xc110,
            dst_port: 4791,
            dst_qp: 0x0001_0203,
        };
        let b = k.bytes();
        assert_eq!(&b[..12], &[0; 12]);
        assert_eq!(&b[12..16], &[10, 0, 0, 2]);
        assert_eq!(&b[28..32], &[10, 0, 0, 18]);
        assert_eq!(&b[32..40], &[17, 0xc1, 0x10, 0x12, 0xb7, 0x01, 0x02, 0x03]);
    }

    #[test]
    fn different_qps_of_one_host_pair_hash_apart() {
        let k = |qp| FlowKey {
            src: Ipv4Addr::new(10, 0, 0, 2),
            dst: Ipv4Addr::new(10, 0, 0, 18),
            src_port: 0xc000,
            dst_port: 4791,
            dst_qp: qp,
        };
        let spread: std::collections::HashSet<u16> =
            (0..64).map(|q| k(q).selector_hash(0) % 2).collect();
        assert_eq!(spread.len(), 2);
    }

    #[test]
    fn the_rng_is_deterministic_and_covers_its_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let xs: Vec<u64> = (0..1000).map(|_| a.below(10)).collect();
        let ys: Vec<u64> = (0..1000).map(|_| b.below(10)).collect();
        assert_eq!(xs, ys);
        assert!((0..10).all(|v| xs.contains(&v)));
    }
}
