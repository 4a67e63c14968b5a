//! Weft's P4RT_TABLE codec: how match fields and action parameters are written as strings in
//! SONiC's APPL_DB, in both directions, decided by the P4Info alone.
//!
//! SONiC's P4RT app formats a value by its `@format` annotation; Weft's pipeline has none, so
//! the format follows from the field's width (and name), the same rule on both sides:
//!
//! | field | written as | example |
//! |---|---|---|
//! | 9 bits (v1model `port_t`) | SONiC port name; the switch maps it through CONFIG_DB `PORT\|EthernetN` `id` | `Ethernet8` |
//! | 48 bits | MAC address | `02:57:46:00:00:01` |
//! | 32 bits named `*ipv4*` | IPv4 address | `10.0.0.2` |
//! | 128 bits named `*ipv6*` | IPv6 address | `fd00::2` |
//! | anything else | lowercase hex without leading zeros | `0x1f` |
//!
//! LPM values add `/len`; ternary values are `value&mask`; optional values are the value alone.
//! A table's SONiC name is its P4Info alias upper-cased with the `FIXED_` prefix
//! (`ipv4_table` → `FIXED_IPV4_TABLE`); actions and parameters use their P4Info names
//! (aliases for actions).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use weft_p4rt::P4Info;
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

/// The format rule of the table above.
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
        Ok(match (fmt, self) {
            (Format::Port, Value::Port(p)) => p.clone(),
            (Format::Mac, Value::Mac(m)) => m
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":"),
            (Format::Mac, Value::Uint(u)) if *u < (1 << 48) => {
                let b = u.to_be_bytes();
                b[10..16]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(":")
            }
            (Format::Ipv4, Value::Ipv4(a)) => a.to_string(),
            (Format::Ipv6, Value::Ipv6(a)) => a.to_string(),
            (Format::Hex, Value::Uint(u)) => format!("{u:#x}"),
            (_, v) => return Err(bad(v)),
        })
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
}

/// A parsed value: the bitstring as an integer, and for LPM the prefix length, for ternary the
/// mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub value: u128,
    pub prefix_len: Option<u32>,
    pub mask: Option<u128>,
}

/// Parses one string of P4RT_TABLE into an integer of `bitwidth` bits; `port_id` resolves port
/// names.
pub fn parse_value(
    field: &str,
    bitwidth: u32,
    text: &str,
    port_id: &dyn Fn(&str) -> Option<u32>,
) -> Result<Parsed, CodecError> {
    let fmt = format_of(field, bitwidth);
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
                    (
                        fi.name.clone(),
                        v.render(format_of(&fi.name, fi.bitwidth as u32), f)?,
                    )
                }
                Match::Lpm(f, v, len) => {
                    let fi = t.field(f)?;
                    (
                        fi.name.clone(),
                        format!(
                            "{}/{len}",
                            v.render(format_of(&fi.name, fi.bitwidth as u32), f)?
                        ),
                    )
                }
                Match::Ternary(f, v, mask) => {
                    let fi = t.field(f)?;
                    let fmt = format_of(&fi.name, fi.bitwidth as u32);
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
            out = out.with_param(
                pi.name.clone(),
                v.render(format_of(&pi.name, pi.bitwidth as u32), p)?,
            );
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
