//! What the generated typed entries (`tables::<table>::{Key, Action, entry}`) are made of, and
//! how they are written: the P4RT_TABLE key `FIXED_X:{json}` and the sorted field list, exactly
//! as `weft_appdb::Encoder` + `weft_sonic_db::P4rtEntry` write them (a test compares the two on
//! every table the controller writes).
//!
//! A value's Rust type is its format, so a wrong kind of value does not compile:
//!
//! | `@format` / field | type |
//! |---|---|
//! | `PORT_NAME` | [`PortName`] |
//! | `MAC_ADDRESS` | `[u8; 6]` |
//! | `IPV4_ADDRESS` / `IPV6_ADDRESS` | `Ipv4Addr` / `Ipv6Addr` |
//! | other | the smallest unsigned integer holding the width (values wider than the field are a [`WireError`]) |
//!
//! LPM fields are [`Lpm`], ternary fields `Option<`[`Ternary`]`>` (`None`: wildcard, left out of
//! the key), optional fields `Option<T>`.

use std::net::{Ipv4Addr, Ipv6Addr};

use weft_appdb::text;
use weft_sonic_db::FieldValues;

/// A SONiC port name (`Ethernet8`): the switch maps it to its P4Runtime port id through
/// CONFIG_DB `PORT|EthernetN` `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortName<'a>(pub &'a str);

/// An LPM value: the address and the prefix length (written `addr/len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lpm<A> {
    pub addr: A,
    pub prefix_len: u8,
}

/// A ternary value: value and mask (written `value&mask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ternary<T> {
    pub value: T,
    pub mask: T,
}

/// One member of a weighted action set (an action-profile table's entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Weighted<'a, A> {
    pub action: A,
    /// At least 1.
    pub weight: u32,
    /// The port whose oper-down prunes the member.
    pub watch_port: Option<PortName<'a>>,
}

/// One P4RT_TABLE entry as written: the key within `P4RT_TABLE` and the fields, sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wire {
    /// `FIXED_X:{"match/f":"v",...}`.
    pub key: String,
    pub fields: FieldValues,
}

/// A value that cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("{table}: {field}: value {value:#x} does not fit in {bitwidth} bits")]
    TooWide {
        table: &'static str,
        field: &'static str,
        value: u128,
        bitwidth: u32,
    },
    #[error("{table}: prefix length {prefix_len} is longer than the {bitwidth}-bit {field}")]
    PrefixTooLong {
        table: &'static str,
        field: &'static str,
        prefix_len: u8,
        bitwidth: u32,
    },
}

/// A value's text form (its format follows from its type).
pub trait Text {
    fn push_text(&self, out: &mut String);

    /// As a JSON string. Only port names can hold characters JSON escapes.
    fn push_json(&self, out: &mut String) {
        out.push('"');
        self.push_text(out);
        out.push('"');
    }
}

impl Text for PortName<'_> {
    fn push_text(&self, out: &mut String) {
        out.push_str(self.0);
    }

    fn push_json(&self, out: &mut String) {
        push_json_str(out, self.0);
    }
}

impl Text for [u8; 6] {
    fn push_text(&self, out: &mut String) {
        text::push_mac(out, self);
    }
}

impl Text for Ipv4Addr {
    fn push_text(&self, out: &mut String) {
        text::push_ipv4(out, *self);
    }
}

impl Text for Ipv6Addr {
    fn push_text(&self, out: &mut String) {
        text::push_ipv6(out, *self);
    }
}

macro_rules! hex_text {
    ($($t:ty),*) => {$(
        impl Text for $t {
            fn push_text(&self, out: &mut String) {
                text::push_hex(out, *self);
            }
        }
    )*};
}
hex_text!(u8, u16, u32, u64, u128);

impl<A: Text> Text for Lpm<A> {
    fn push_text(&self, out: &mut String) {
        self.addr.push_text(out);
        out.push('/');
        push_decimal(out, u32::from(self.prefix_len));
    }
}

impl<T: Text> Text for Ternary<T> {
    fn push_text(&self, out: &mut String) {
        self.value.push_text(out);
        out.push('&');
        self.mask.push_text(out);
    }
}

/// `s` as a JSON string, escaped exactly as serde_json escapes it (the P4RT_TABLE key is
/// serde_json's output in `weft_sonic_db`, and must be byte-identical).
pub fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        // Rare (port names are plain); serde_json itself decides the escapes.
        match serde_json::to_string(s) {
            Ok(j) => out.push_str(&j),
            // Serialising a &str cannot fail; an empty string is the safe form if it ever did.
            Err(_) => out.push_str("\"\""),
        }
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

/// A value's text form, as a P4RT_TABLE field holds it.
pub fn to_text(v: &impl Text) -> String {
    let mut s = String::new();
    v.push_text(&mut s);
    s
}

/// A decimal number (priorities, weights, prefix lengths).
pub fn push_decimal(out: &mut String, n: u32) {
    use std::fmt::Write as _;
    let _ = write!(out, "{n}");
}

/// `Err` when `value` has bits above `bitwidth` (for fields narrower than their Rust type).
pub fn check_width(
    table: &'static str,
    field: &'static str,
    value: u128,
    bitwidth: u32,
) -> Result<(), WireError> {
    if bitwidth >= 128 || value >> bitwidth == 0 {
        Ok(())
    } else {
        Err(WireError::TooWide {
            table,
            field,
            value,
            bitwidth,
        })
    }
}

/// `Err` when an LPM prefix is longer than the field.
pub fn check_prefix(
    table: &'static str,
    field: &'static str,
    prefix_len: u8,
    bitwidth: u32,
) -> Result<(), WireError> {
    if u32::from(prefix_len) <= bitwidth {
        Ok(())
    } else {
        Err(WireError::PrefixTooLong {
            table,
            field,
            prefix_len,
            bitwidth,
        })
    }
}

/// Closes a key JSON object: `"priority":N` when N > 0 (it sorts after every `match/` name),
/// then `}`.
pub fn finish_key(out: &mut String, first: bool, priority: u32) {
    if priority > 0 {
        if !first {
            out.push(',');
        }
        out.push_str("\"priority\":");
        push_decimal(out, priority);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped_exactly_as_serde_json_escapes_them() {
        let mut cases: Vec<String> = (0u32..0x80)
            .filter_map(char::from_u32)
            .map(|c| format!("Eth{c}x"))
            .collect();
        cases.extend(["Ethernet0", "é\u{2028}ü", "", "\"\\"].map(String::from));
        for s in cases {
            let mut ours = String::new();
            push_json_str(&mut ours, &s);
            assert_eq!(ours, serde_json::to_string(&s).expect("json"), "{s:?}");
        }
    }

    #[test]
    fn values_are_written_in_their_formats() {
        let t = |v: &dyn Text| {
            let mut s = String::new();
            v.push_text(&mut s);
            s
        };
        assert_eq!(t(&[2u8, 0x57, 0x46, 0, 0, 0xab]), "02:57:46:00:00:ab");
        assert_eq!(t(&0u16), "0x0");
        assert_eq!(t(&0x1fu8), "0x1f");
        assert_eq!(
            t(&Lpm {
                addr: Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0),
                prefix_len: 64
            }),
            "fd00:77::/64"
        );
        assert_eq!(
            t(&Ternary {
                value: 3u8,
                mask: 7
            }),
            "0x3&0x7"
        );
        assert_eq!(t(&PortName("Ethernet8")), "Ethernet8");
    }

    #[test]
    fn widths_and_prefixes_beyond_the_field_are_errors() {
        assert!(check_width("t", "f", 7, 3).is_ok());
        let e = check_width("t", "traffic_class", 8, 3).expect_err("too wide");
        assert!(e.to_string().contains("does not fit in 3 bits"), "{e}");
        assert!(check_prefix("t", "f", 32, 32).is_ok());
        assert!(check_prefix("t", "f", 33, 32).is_err());
    }
}
