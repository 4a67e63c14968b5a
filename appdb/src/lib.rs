//! Weft's P4RT_TABLE codec: how match fields and action parameters are written as strings in
//! SONiC's APPL_DB, in both directions, decided by the P4Info alone.
//!
//! As in SONiC's P4RT app, a value's format is its `@format` annotation in the P4 source
//! ([`format_of_field`], [`format_of_param`]); Weft's pipeline declares one on every port, MAC
//! and address field. A field without one falls back to the rule by width and name
//! ([`format_of`]), which agrees with every declaration of the pipeline (a `weft-p4` test checks
//! it), so a reader on either rule reads what the other wrote:
//!
//! | `@format` | fallback: field | written as | example |
//! |---|---|---|---|
//! | `PORT_NAME` | 9 bits (v1model `port_t`) | SONiC port name; the switch maps it through CONFIG_DB `PORT\|EthernetN` `id` | `Ethernet8` |
//! | `MAC_ADDRESS` | 48 bits | MAC address | `02:57:46:00:00:01` |
//! | `IPV4_ADDRESS` | 32 bits named `*ipv4*` | IPv4 address | `10.0.0.2` |
//! | `IPV6_ADDRESS` | 128 bits named `*ipv6*` | IPv6 address | `fd00::2` |
//! | none | anything else | lowercase hex without leading zeros | `0x1f` |
//!
//! LPM values add `/len`; ternary values are `value&mask`; optional values are the value alone.
//! A table's SONiC name is its P4Info alias upper-cased with the `FIXED_` prefix
//! (`ipv4_table` → `FIXED_IPV4_TABLE`); actions and parameters use their P4Info names
//! (aliases for actions).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use weft_p4rt::{DeclaredFormat, MatchFieldInfo, P4Info, ParamInfo};
use weft_sonic_db::{
    P4rtAction, P4rtEntry, P4rtKey, P4rtTableKind, WeightedAction, sonic_table_name,
};

/// How a field's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Port,
    Mac,
    Ipv4,
    Ipv6,
    Hex,
}

/// The fallback rule of the table above (by width and name), for fields without `@format`.
pub fn format_of(name: &str, bitwidth: u32) -> Format {
    let lname = name.to_ascii_lowercase();
    match bitwidth {
        9 => Format::Port,
        48 => Format::Mac,
        32 if lname.contains("ipv4") => Format::Ipv4,
        128 if lname.contains("ipv6") => Format::Ipv6,
        _ => Format::Hex,
    }
}

impl Format {
    /// The format a `@format` declaration names; `None` for formats this codec does not write.
    pub fn declared(d: &DeclaredFormat) -> Option<Format> {
        match d {
            DeclaredFormat::MacAddress => Some(Format::Mac),
            DeclaredFormat::Ipv4Address => Some(Format::Ipv4),
            DeclaredFormat::Ipv6Address => Some(Format::Ipv6),
            DeclaredFormat::PortName => Some(Format::Port),
            DeclaredFormat::Other(_) => None,
        }
    }

    /// The declared format, else the fallback rule.
    fn resolve(
        field: &str,
        declared: Option<&DeclaredFormat>,
        bitwidth: i32,
    ) -> Result<Format, CodecError> {
        match declared {
            Some(d) => Format::declared(d).ok_or_else(|| CodecError::UnsupportedFormat {
                field: field.to_string(),
                format: format!("{d:?}"),
            }),
            None => Ok(format_of(field, u32::try_from(bitwidth).unwrap_or(0))),
        }
    }
}

/// How a match field's value is written: its `@format`, else [`format_of`].
pub fn format_of_field(f: &MatchFieldInfo) -> Result<Format, CodecError> {
    Format::resolve(&f.name, f.format.as_ref(), f.bitwidth)
}

/// How an action parameter's value is written: its `@format`, else [`format_of`].
pub fn format_of_param(p: &ParamInfo) -> Result<Format, CodecError> {
    Format::resolve(&p.name, p.format.as_ref(), p.bitwidth)
}

/// Writers of the text forms of the table above; [`Value`] and the code `weft-p4` generates for
/// typed entries both write through these, so the two cannot differ.
pub mod text {
    use std::fmt::Write as _;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const HEX: &[u8; 16] = b"0123456789abcdef";

    /// `02:57:46:00:00:01`.
    pub fn push_mac(out: &mut String, mac: &[u8; 6]) {
        for (i, b) in mac.iter().enumerate() {
            if i > 0 {
                out.push(':');
            }
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }

    /// `0x1f`: lowercase, no leading zeros, `0x0` for zero.
    pub fn push_hex<T: std::fmt::LowerHex>(out: &mut String, v: T) {
        // Writing into a String cannot fail.
        let _ = write!(out, "{v:#x}");
    }

    pub fn push_ipv4(out: &mut String, a: Ipv4Addr) {
        let _ = write!(out, "{a}");
    }

    /// RFC 5952 form (`fd00::2`), as `Ipv6Addr`'s `Display` writes it.
    pub fn push_ipv6(out: &mut String, a: Ipv6Addr) {
        let _ = write!(out, "{a}");
    }
}

/// A typed value, as the controller has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A SONiC port name.
    Port(String),
    Mac([u8; 6]),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    Uint(u128),
}

impl Value {
    fn render(&self, fmt: Format, field: &str) -> Result<String, CodecError> {
        let bad = |v: &Value| CodecError::WrongFormat {
            field: field.to_string(),
            value: format!("{v:?}"),
            format: fmt,
        };
        let mut out = String::new();
        match (fmt, self) {
            (Format::Port, Value::Port(p)) => out.push_str(p),
            (Format::Mac, Value::Mac(m)) => text::push_mac(&mut out, m),
            (Format::Mac, Value::Uint(u)) if *u < (1 << 48) => {
                let b = u.to_be_bytes();
                let mut m = [0u8; 6];
                m.copy_from_slice(&b[10..16]);
                text::push_mac(&mut out, &m);
            }
            (Format::Ipv4, Value::Ipv4(a)) => text::push_ipv4(&mut out, *a),
            (Format::Ipv6, Value::Ipv6(a)) => text::push_ipv6(&mut out, *a),
            (Format::Hex, Value::Uint(u)) => text::push_hex(&mut out, *u),
            (_, v) => return Err(bad(v)),
        }
        Ok(out)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error(transparent)]
    P4Info(#[from] weft_p4rt::Error),
    #[error(transparent)]
    Db(#[from] weft_sonic_db::P4rtError),
    #[error("{field}: value {value} cannot be written in {format:?} format")]
    WrongFormat {
        field: String,
        value: String,
        format: Format,
    },
    #[error("{field}: {value:?} is not a valid {what}")]
    Parse {
        field: String,
        value: String,
        what: &'static str,
    },
    #[error("{field}: value {value:#x} does not fit in {bitwidth} bits")]
    TooWide {
        field: String,
        value: u128,
        bitwidth: u32,
    },
    #[error("{field}: unknown port {port:?} (no CONFIG_DB PORT entry with an id)")]
    UnknownPort { field: String, port: String },
    #[error("{field}: @format {format} is not a format this codec writes")]
    UnsupportedFormat { field: String, format: String },
}

/// A parsed value: the bitstring as an integer, and for LPM the prefix length, for ternary the
/// mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub value: u128,
    pub prefix_len: Option<u32>,
    pub mask: Option<u128>,
}

/// Parses one string of P4RT_TABLE into an integer of `bitwidth` bits, in the format of the
/// fallback rule ([`format_of`]); `port_id` resolves port names.
pub fn parse_value(
    field: &str,
    bitwidth: u32,
    text: &str,
    port_id: &dyn Fn(&str) -> Option<u32>,
) -> Result<Parsed, CodecError> {
    parse_value_as(format_of(field, bitwidth), field, bitwidth, text, port_id)
}

/// [`parse_value`] in a given format (for example [`format_of_field`]'s).
pub fn parse_value_as(
    fmt: Format,
    field: &str,
    bitwidth: u32,
    text: &str,
    port_id: &dyn Fn(&str) -> Option<u32>,
) -> Result<Parsed, CodecError> {
    let (body, prefix_len, mask_text) = if let Some((v, m)) = text.split_once('&') {
        (v, None, Some(m))
    } else if let Some((v, l)) = text.rsplit_once('/') {
        let len = l.parse::<u32>().map_err(|_| CodecError::Parse {
            field: field.into(),
            value: text.into(),
            what: "prefix length",
        })?;
        if len > bitwidth {
            return Err(CodecError::Parse {
                field: field.into(),
                value: text.into(),
                what: "prefix length for this field",
            });
        }
        (v, Some(len), None)
    } else {
        (text, None, None)
    };
    let one = |s: &str| -> Result<u128, CodecError> {
        let perr = |what| CodecError::Parse {
            field: field.into(),
            value: s.into(),
            what,
        };
        let v = match fmt {
            Format::Port => match port_id(s) {
                Some(id) => u128::from(id),
                None if s.starts_with("0x") => parse_hex(s).ok_or(perr("port"))?,
                None => {
                    return Err(CodecError::UnknownPort {
                        field: field.into(),
                        port: s.into(),
                    });
                }
            },
            Format::Mac => {
                let parts: Vec<&str> = s.split(':').collect();
                if parts.len() != 6 {
                    return Err(perr("MAC address"));
                }
                let mut v = 0u128;
                for p in parts {
                    let b = u8::from_str_radix(p, 16).map_err(|_| perr("MAC address"))?;
                    if p.len() != 2 {
                        return Err(perr("MAC address"));
                    }
                    v = (v << 8) | u128::from(b);
                }
                v
            }
            Format::Ipv4 => u128::from(u32::from(
                Ipv4Addr::from_str(s).map_err(|_| perr("IPv4 address"))?,
            )),
            Format::Ipv6 => u128::from(Ipv6Addr::from_str(s).map_err(|_| perr("IPv6 address"))?),
            Format::Hex => parse_hex(s).ok_or(perr("hex value (0x...)"))?,
        };
        if bitwidth < 128 && v >> bitwidth != 0 {
            return Err(CodecError::TooWide {
                field: field.into(),
                value: v,
                bitwidth,
            });
        }
        Ok(v)
    };
    let value = one(body)?;
    let mask = mask_text.map(one).transpose()?;
    Ok(Parsed {
        value,
        prefix_len,
        mask,
    })
}

/// The one spelling of an exact value in its format, so that two entries naming the same value
/// compare equal as text (`0x05` and `0x5`, `02:AB:..` and `02:ab:..`, `fd00:0::2` and
/// `fd00::2`). Port names are their own spelling (a port given as a hex id stays hex: without
/// CONFIG_DB the two cannot be matched).
pub fn canonical_text(
    fmt: Format,
    field: &str,
    bitwidth: u32,
    text: &str,
) -> Result<String, CodecError> {
    if fmt == Format::Port && !text.starts_with("0x") {
        if text.is_empty() {
            return Err(CodecError::Parse {
                field: field.into(),
                value: text.into(),
                what: "port name",
            });
        }
        return Ok(text.to_string());
    }
    if text.contains(['/', '&']) {
        return Err(CodecError::Parse {
            field: field.into(),
            value: text.into(),
            what: "exact value",
        });
    }
    let v = parse_value_as(fmt, field, bitwidth, text, &|_| None)?.value;
    let mut out = String::new();
    match fmt {
        Format::Port | Format::Hex => text::push_hex(&mut out, v),
        Format::Mac => {
            let b = v.to_be_bytes();
            let mut m = [0u8; 6];
            m.copy_from_slice(&b[10..16]);
            text::push_mac(&mut out, &m);
        }
        // parse_value_as checked the width, so these conversions cannot lose bits.
        Format::Ipv4 => text::push_ipv4(&mut out, Ipv4Addr::from(v as u32)),
        Format::Ipv6 => text::push_ipv6(&mut out, Ipv6Addr::from(v)),
    }
    Ok(out)
}

fn parse_hex(s: &str) -> Option<u128> {
    let h = s.strip_prefix("0x")?;
    if h.is_empty() {
        return None;
    }
    u128::from_str_radix(h, 16).ok()
}

/// Builds P4RT_TABLE entries for Weft's pipeline from typed values, checking every name and
/// width against the P4Info.
pub struct Encoder<'a> {
    info: &'a P4Info,
}

/// One match field of a key to encode.
pub enum Match<'a> {
    Exact(&'a str, Value),
    Lpm(&'a str, Value, u32),
    Ternary(&'a str, Value, Value),
}

/// One action with its parameters.
pub struct Call<'a> {
    pub action: &'a str,
    pub params: Vec<(&'a str, Value)>,
}

impl<'a> Encoder<'a> {
    pub fn new(info: &'a P4Info) -> Self {
        Encoder { info }
    }

    /// The SONiC table name of a P4 table (full name or alias).
    pub fn table_name(&self, table: &str) -> Result<String, CodecError> {
        let t = self.info.table(table)?;
        Ok(sonic_table_name(&t.alias, P4rtTableKind::Fixed))
    }

    pub fn key(
        &self,
        table: &str,
        matches: &[Match],
        priority: u32,
    ) -> Result<P4rtKey, CodecError> {
        let t = self.info.table(table)?;
        let mut key =
            P4rtKey::new(sonic_table_name(&t.alias, P4rtTableKind::Fixed)).with_priority(priority);
        for m in matches {
            let (name, text) = match m {
                Match::Exact(f, v) => {
                    let fi = t.field(f)?;
                    (fi.name.clone(), v.render(format_of_field(fi)?, f)?)
                }
                Match::Lpm(f, v, len) => {
                    let fi = t.field(f)?;
                    (
                        fi.name.clone(),
                        format!("{}/{len}", v.render(format_of_field(fi)?, f)?),
                    )
                }
                Match::Ternary(f, v, mask) => {
                    let fi = t.field(f)?;
                    let fmt = format_of_field(fi)?;
                    (
                        fi.name.clone(),
                        format!("{}&{}", v.render(fmt, f)?, mask.render(fmt, f)?),
                    )
                }
            };
            key = key.with_match(&name, text);
        }
        Ok(key)
    }

    fn action(&self, call: &Call) -> Result<P4rtAction, CodecError> {
        let a = self.info.action(call.action)?;
        let mut out = P4rtAction::new(a.alias.clone());
        for (p, v) in &call.params {
            let pi = a.param(p)?;
            out = out.with_param(pi.name.clone(), v.render(format_of_param(pi)?, p)?);
        }
        Ok(out)
    }

    pub fn entry(&self, key: P4rtKey, call: &Call) -> Result<P4rtEntry, CodecError> {
        Ok(P4rtEntry::new(key, self.action(call)?))
    }

    /// A weighted action set (a WCMP group): (call, weight, watch port).
    pub fn group(
        &self,
        key: P4rtKey,
        members: &[(Call, u32, Option<String>)],
    ) -> Result<P4rtEntry, CodecError> {
        let mut out = Vec::with_capacity(members.len());
        for (c, w, watch) in members {
            out.push(WeightedAction {
                action: self.action(c)?,
                weight: *w,
                watch_port: watch.clone(),
            });
        }
        Ok(P4rtEntry::weighted(key, out))
    }
}

/// Port name → P4Runtime port id, as CONFIG_DB `PORT|EthernetN` `id` says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PortMap {
    pub by_name: BTreeMap<String, u32>,
}

impl PortMap {
    pub fn id(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }
    pub fn name(&self, id: u32) -> Option<&str> {
        self.by_name
            .iter()
            .find(|(_, v)| **v == id)
            .map(|(k, _)| k.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports(name: &str) -> Option<u32> {
        name.strip_prefix("Ethernet")
            .and_then(|n| n.parse::<u32>().ok())
            .map(|n| n / 4 + 1)
    }

    #[test]
    fn formats_follow_width_and_name() {
        assert_eq!(format_of("egress_port", 9), Format::Port);
        assert_eq!(format_of("dst_mac", 48), Format::Mac);
        assert_eq!(format_of("ipv4_dst", 32), Format::Ipv4);
        assert_eq!(format_of("ipv6_dst", 128), Format::Ipv6);
        assert_eq!(format_of("nexthop_id", 16), Format::Hex);
        assert_eq!(format_of("kmin", 32), Format::Hex);
    }

    #[test]
    fn values_round_trip_through_their_strings() {
        let v = Value::Mac([2, 0x57, 0x46, 0, 0, 1])
            .render(Format::Mac, "m")
            .expect("mac");
        assert_eq!(v, "02:57:46:00:00:01");
        assert_eq!(
            parse_value("m", 48, &v, &ports).expect("parse").value,
            0x0257_4600_0001
        );
        let p = parse_value("ipv4_dst", 32, "10.0.0.0/29", &ports).expect("lpm");
        assert_eq!((p.value, p.prefix_len), (0x0a00_0000, Some(29)));
        let p = parse_value("ipv6_dst", 128, "fd00:77::/64", &ports).expect("lpm6");
        assert_eq!(p.prefix_len, Some(64));
        assert_eq!(
            parse_value("egress_port", 9, "Ethernet8", &ports)
                .expect("port")
                .value,
            3
        );
        let t = parse_value("traffic_class", 3, "0x3&0x7", &ports).expect("ternary");
        assert_eq!((t.value, t.mask), (3, Some(7)));
        assert_eq!(
            Value::Uint(31).render(Format::Hex, "x").expect("hex"),
            "0x1f"
        );
    }

    #[test]
    fn canonical_text_gives_one_spelling_per_value() {
        let c = |fmt, bits, t: &str| canonical_text(fmt, "f", bits, t).expect(t);
        assert_eq!(c(Format::Hex, 16, "0x0005"), "0x5");
        assert_eq!(c(Format::Hex, 16, "0x0"), "0x0");
        assert_eq!(c(Format::Mac, 48, "02:AB:46:00:00:01"), "02:ab:46:00:00:01");
        assert_eq!(c(Format::Ipv6, 128, "fd00:0:0::2"), "fd00::2");
        assert_eq!(c(Format::Ipv4, 32, "10.0.0.2"), "10.0.0.2");
        assert_eq!(c(Format::Port, 9, "Ethernet8"), "Ethernet8");
        assert_eq!(c(Format::Port, 9, "0x03"), "0x3");
        assert!(canonical_text(Format::Hex, "f", 16, "0x10000").is_err());
        assert!(canonical_text(Format::Ipv4, "f", 32, "10.0.0.0/8").is_err());
        assert!(canonical_text(Format::Hex, "f", 3, "0x1&0x7").is_err());
        assert!(canonical_text(Format::Port, "f", 9, "").is_err());
    }

    #[test]
    fn declared_formats_map_to_codec_formats_and_unknown_ones_are_errors() {
        assert_eq!(
            Format::declared(&DeclaredFormat::PortName),
            Some(Format::Port)
        );
        assert_eq!(
            Format::declared(&DeclaredFormat::MacAddress),
            Some(Format::Mac)
        );
        let e = Format::resolve("f", Some(&DeclaredFormat::Other("STRING".into())), 8)
            .expect_err("unsupported");
        assert!(e.to_string().contains("STRING"), "{e}");
        // Without a declaration, the fallback rule decides.
        assert_eq!(
            Format::resolve("dst_mac", None, 48).expect("fallback"),
            Format::Mac
        );
    }

    #[test]
    fn bad_values_name_the_field_and_the_problem() {
        let e = parse_value("nexthop_id", 16, "0x10000", &ports).expect_err("too wide");
        assert!(e.to_string().contains("does not fit in 16 bits"), "{e}");
        let e = parse_value("egress_port", 9, "Ethernet999x", &ports).expect_err("unknown port");
        assert!(e.to_string().contains("unknown port"), "{e}");
        let e = parse_value("dst_mac", 48, "02:57:46:00:01", &ports).expect_err("short mac");
        assert!(e.to_string().contains("MAC address"), "{e}");
        let e = parse_value("ipv4_dst", 32, "10.0.0.0/40", &ports).expect_err("prefix");
        assert!(e.to_string().contains("prefix length"), "{e}");
        assert!(parse_value("x", 16, "12", &ports).is_err(), "hex needs 0x");
    }
}
