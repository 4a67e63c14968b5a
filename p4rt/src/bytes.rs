//! P4Runtime bytestrings: big-endian values in the fewest bytes (P4Runtime 1.3 canonical form).
//!
//! Servers may return the canonical form on read whatever form was written (PI does), so this
//! client always writes canonical bytestrings and canonicalises what it reads: read-back then
//! compares equal to what was written.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::{Error, Result};

/// A value that can be sent as a P4Runtime bytestring (big-endian).
pub trait IntoBitstring {
    fn into_bitstring(self) -> Vec<u8>;
}

macro_rules! int_bitstring {
    ($($t:ty),*) => {$(
        impl IntoBitstring for $t {
            fn into_bitstring(self) -> Vec<u8> {
                self.to_be_bytes().to_vec()
            }
        }
    )*};
}
int_bitstring!(u8, u16, u32, u64, u128);

impl IntoBitstring for bool {
    fn into_bitstring(self) -> Vec<u8> {
        vec![u8::from(self)]
    }
}

impl IntoBitstring for &[u8] {
    fn into_bitstring(self) -> Vec<u8> {
        self.to_vec()
    }
}

impl IntoBitstring for Vec<u8> {
    fn into_bitstring(self) -> Vec<u8> {
        self
    }
}

impl IntoBitstring for &Vec<u8> {
    fn into_bitstring(self) -> Vec<u8> {
        self.clone()
    }
}

impl<const N: usize> IntoBitstring for [u8; N] {
    fn into_bitstring(self) -> Vec<u8> {
        self.to_vec()
    }
}

impl<const N: usize> IntoBitstring for &[u8; N] {
    fn into_bitstring(self) -> Vec<u8> {
        self.to_vec()
    }
}

impl IntoBitstring for Ipv4Addr {
    fn into_bitstring(self) -> Vec<u8> {
        self.octets().to_vec()
    }
}

impl IntoBitstring for Ipv6Addr {
    fn into_bitstring(self) -> Vec<u8> {
        self.octets().to_vec()
    }
}

/// The canonical form: leading zero bytes stripped, zero is one zero byte.
pub fn canonical(bytes: &[u8]) -> Vec<u8> {
    match bytes.iter().position(|b| *b != 0) {
        Some(i) => bytes[i..].to_vec(),
        None => vec![0],
    }
}

/// Canonicalises in place (no allocation when already canonical).
pub fn canonicalize(bytes: &mut Vec<u8>) {
    match bytes.iter().position(|b| *b != 0) {
        Some(0) => {}
        Some(i) => {
            bytes.drain(..i);
        }
        None => {
            bytes.clear();
            bytes.push(0);
        }
    }
}

/// Number of significant bits (0 for zero).
pub fn bit_len(bytes: &[u8]) -> u32 {
    match bytes.iter().position(|b| *b != 0) {
        Some(i) => (bytes.len() - i) as u32 * 8 - bytes[i].leading_zeros(),
        None => 0,
    }
}

/// Canonical bytestring of `value`, checked to fit `bitwidth` bits. A bitwidth of 0 marks a
/// P4Runtime-translated (string) type: the bytes pass unchanged.
pub fn fit(
    value: impl IntoBitstring,
    bitwidth: i32,
    what: impl FnOnce() -> String,
) -> Result<Vec<u8>> {
    let mut bytes = value.into_bitstring();
    if bitwidth <= 0 {
        return Ok(bytes);
    }
    let bits = bit_len(&bytes);
    if bits > bitwidth as u32 {
        return Err(Error::ValueTooWide {
            what: what(),
            bitwidth: bitwidth as u32,
            value_bits: bits,
        });
    }
    canonicalize(&mut bytes);
    Ok(bytes)
}

/// Big-endian integer value of a bytestring, if it fits in a u128.
pub fn to_u128(bytes: &[u8]) -> Option<u128> {
    let c = canonical(bytes);
    if c.len() > 16 {
        return None;
    }
    Some(c.iter().fold(0u128, |acc, b| (acc << 8) | u128::from(*b)))
}

/// A bytestring of `bitwidth` bits with the top `prefix_len` bits set (an LPM mask).
pub(crate) fn prefix_mask(bitwidth: u32, prefix_len: u32) -> Vec<u8> {
    let nbytes = bitwidth.div_ceil(8) as usize;
    let mut mask = vec![0u8; nbytes];
    // Bits are counted from the top of the field, which starts `pad` bits into the first byte.
    let pad = nbytes as u32 * 8 - bitwidth;
    for bit in pad..pad + prefix_len {
        mask[(bit / 8) as usize] |= 0x80 >> (bit % 8);
    }
    mask
}

/// Left-pads to `n` bytes (values already known to fit).
pub(crate) fn pad_to(bytes: &[u8], n: usize) -> Vec<u8> {
    let c = canonical(bytes);
    if c.len() >= n {
        return c[c.len() - n..].to_vec();
    }
    let mut out = vec![0u8; n - c.len()];
    out.extend_from_slice(&c);
    out
}

/// `value & !mask != 0`: bits set outside the mask.
pub(crate) fn has_bits_outside(value: &[u8], mask: &[u8]) -> bool {
    let n = value.len().max(mask.len());
    let (v, m) = (pad_to(value, n), pad_to(mask, n));
    v.iter().zip(&m).any(|(v, m)| v & !m != 0)
}

/// Lower-case hex, for naming values in errors and logs.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 + bytes.len() * 2);
    s.push_str("0x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_strips_leading_zeros_and_keeps_one_byte_for_zero() {
        assert_eq!(canonical(&[0, 0, 1, 0]), vec![1, 0]);
        assert_eq!(canonical(&[0, 0]), vec![0]);
        assert_eq!(canonical(&[]), vec![0]);
        assert_eq!(canonical(&[0x80]), vec![0x80]);
        let mut v = vec![0, 0, 5];
        canonicalize(&mut v);
        assert_eq!(v, vec![5]);
    }

    #[test]
    fn bit_len_counts_significant_bits() {
        assert_eq!(bit_len(&[0]), 0);
        assert_eq!(bit_len(&[1]), 1);
        assert_eq!(bit_len(&[0, 1, 0]), 9);
        assert_eq!(bit_len(&[0xff, 0xff]), 16);
    }

    #[test]
    fn fit_rejects_values_wider_than_bitwidth() {
        assert_eq!(fit(511u16, 9, || "port".into()).ok(), Some(vec![1, 0xff]));
        let err = fit(512u16, 9, || "param port".into()).err();
        assert!(
            matches!(err, Some(Error::ValueTooWide { bitwidth: 9, value_bits: 10, ref what }) if what == "param port")
        );
    }

    #[test]
    fn prefix_mask_counts_from_the_top_of_odd_widths() {
        assert_eq!(prefix_mask(32, 24), vec![0xff, 0xff, 0xff, 0]);
        assert_eq!(prefix_mask(9, 1), vec![1, 0]);
        assert_eq!(prefix_mask(9, 9), vec![1, 0xff]);
        assert_eq!(prefix_mask(12, 4), vec![0x0f, 0]);
    }

    #[test]
    fn bits_outside_mask_detected_across_lengths() {
        assert!(has_bits_outside(&[0x01], &[0xfe]));
        assert!(!has_bits_outside(&[0x10], &[0x00, 0xf0]));
        assert!(has_bits_outside(&[0x01, 0x00], &[0xff]));
    }
}
