//! Quantities with units as operators write them: `400G`, `5m`, `1600KB`, `100us`.
//!
//! Each type parses from a string (sizes also from a bare integer of bytes) and prints back in a
//! canonical form, so a generated or normalised intent reads like a hand-written one.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a quantity did not parse; the message names what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {input:?}: expected {expected}")]
pub struct UnitError {
    pub kind: &'static str,
    pub input: String,
    pub expected: &'static str,
}

/// Splits `"1.6MB"` into (1.6, "MB"). The number may have a fraction; no sign.
fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let value: f64 = s[..end].parse().ok()?;
    if !value.is_finite() {
        return None;
    }
    Some((value, s[end..].trim()))
}

fn scaled(value: f64, scale: f64) -> Option<u64> {
    let v = (value * scale).round();
    (v >= 0.0 && v < u64::MAX as f64).then_some(v as u64)
}

macro_rules! unit_type {
    ($name:ident, $kind:literal, $format:literal, $expected:literal, $example:literal) => {
        impl FromStr for $name {
            type Err = UnitError;
            fn from_str(s: &str) -> Result<Self, UnitError> {
                Self::parse(s).ok_or_else(|| UnitError {
                    kind: $kind,
                    input: s.to_string(),
                    expected: $expected,
                })
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({
                    "type": "string",
                    "format": $format,
                    "description": $expected,
                    "examples": [$example],
                })
            }
        }

        impl $name {
            /// What the validator says when a value of this kind is malformed.
            pub const EXPECTED: &'static str = $expected;
        }
    };
}

/// A link or port speed in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Speed(pub u64);

impl Speed {
    pub const fn gbps(g: u64) -> Self {
        Speed(g * 1_000_000_000)
    }
    pub fn bits_per_sec(self) -> u64 {
        self.0
    }
    pub fn as_gbps(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// The speeds a port can train at: those IEEE 802.3 defines for Ethernet (10 Mb/s to
    /// 1.6 Tb/s). Anything else is a typo or a speed no port has.
    pub const ETHERNET: [Speed; 14] = [
        Speed(10_000_000),
        Speed(100_000_000),
        Speed::gbps(1),
        Speed(2_500_000_000),
        Speed::gbps(5),
        Speed::gbps(10),
        Speed::gbps(25),
        Speed::gbps(40),
        Speed::gbps(50),
        Speed::gbps(100),
        Speed::gbps(200),
        Speed::gbps(400),
        Speed::gbps(800),
        Speed::gbps(1600),
    ];

    pub(crate) fn parse(s: &str) -> Option<Self> {
        let (v, unit) = split_number(s)?;
        let unit = unit.to_ascii_lowercase();
        // `400G`, `400Gbps`, `400Gb/s` (as `weft show` prints), `400Gbit/s`.
        let unit = ["bps", "b/s", "bit/s"]
            .iter()
            .find_map(|suffix| unit.strip_suffix(suffix))
            .unwrap_or(&unit)
            .trim();
        let scale = match unit {
            "m" => 1e6,
            "g" => 1e9,
            "t" => 1e12,
            _ => return None,
        };
        let bits = Speed(scaled(v, scale)?);
        Speed::ETHERNET.contains(&bits).then_some(bits)
    }
}

impl fmt::Display for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b.is_multiple_of(1_000_000_000_000) {
            write!(f, "{}T", b / 1_000_000_000_000)
        } else if b.is_multiple_of(1_000_000_000) {
            write!(f, "{}G", b / 1_000_000_000)
        } else if b.is_multiple_of(1_000_000) {
            write!(f, "{}M", b / 1_000_000)
        } else {
            write!(f, "{}G", b as f64 / 1e9)
        }
    }
}

unit_type!(
    Speed,
    "speed",
    "speed",
    "an Ethernet speed (IEEE 802.3: 10M, 100M, 1G, 2.5G, 5G, 10G, 25G, 40G, 50G, 100G, 200G, 400G, 800G or 1.6T), written \"400G\", \"400Gbps\" or \"400Gb/s\"",
    "400G"
);

/// A cable length, kept in millimetres so lengths compare exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Length(pub u64);

impl Length {
    pub const fn metres(m: u64) -> Self {
        Length(m * 1000)
    }
    pub fn as_metres(self) -> f64 {
        self.0 as f64 / 1000.0
    }
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let (v, unit) = split_number(s)?;
        let scale = match unit.to_ascii_lowercase().as_str() {
            "mm" => 1.0,
            "cm" => 10.0,
            "m" => 1000.0,
            "km" => 1_000_000.0,
            _ => return None,
        };
        // A cable has a length: 0 would make the PFC headroom it needs look free.
        scaled(v, scale).filter(|&mm| mm > 0).map(Length)
    }
}

impl fmt::Display for Length {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(1000) {
            write!(f, "{}m", self.0 / 1000)
        } else {
            write!(f, "{}m", self.as_metres())
        }
    }
}

unit_type!(
    Length,
    "length",
    "length",
    "a cable length such as \"5m\", \"300m\" or \"2km\" (mm, cm, m or km; more than 0)",
    "5m"
);

/// A buffer size or threshold in bytes. `KB`/`MB` are decimal (1000), `KiB`/`MiB` binary, as
/// switch vendors and the DCQCN/HPCC papers quote thresholds in decimal kilobytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl Bytes {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let (v, unit) = split_number(s)?;
        let scale = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "kb" | "k" => 1e3,
            "mb" | "m" => 1e6,
            "kib" => 1024.0,
            "mib" => 1024.0 * 1024.0,
            _ => return None,
        };
        scaled(v, scale).map(Bytes)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 1_000_000 && b.is_multiple_of(1_000_000) {
            write!(f, "{}MB", b / 1_000_000)
        } else if b >= 1000 && b.is_multiple_of(1000) {
            write!(f, "{}KB", b / 1000)
        } else {
            write!(f, "{b}B")
        }
    }
}

impl Bytes {
    /// For messages: three significant digits, not exact.
    pub fn human(self) -> String {
        let b = self.0 as f64;
        if b >= 1e6 {
            format!("{:.2}MB", b / 1e6)
        } else if b >= 1e3 {
            format!("{:.1}KB", b / 1e3)
        } else {
            format!("{}B", self.0)
        }
    }
}

impl FromStr for Bytes {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        Self::parse(s).ok_or_else(|| UnitError {
            kind: "size",
            input: s.to_string(),
            expected: Self::EXPECTED,
        })
    }
}

impl Bytes {
    pub const EXPECTED: &'static str =
        "a size such as \"400KB\", \"1.6MB\" or a number of bytes (KB/MB decimal, KiB/MiB binary)";
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl JsonSchema for Bytes {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Bytes")
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["string", "integer"],
            "format": "size",
            "minimum": 0,
            "description": Self::EXPECTED,
            "examples": ["400KB"],
        })
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(Bytes(n)),
            Raw::Str(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// A time interval, kept in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Duration {
    pub const fn millis(ms: u64) -> Self {
        Duration(ms * 1_000_000)
    }
    pub const fn micros(us: u64) -> Self {
        Duration(us * 1_000)
    }
    pub fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    pub fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let (v, unit) = split_number(s)?;
        let scale = match unit.to_ascii_lowercase().as_str() {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "min" => 60e9,
            _ => return None,
        };
        scaled(v, scale).map(Duration)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n != 0 && n.is_multiple_of(1_000_000_000) {
            write!(f, "{}s", n / 1_000_000_000)
        } else if n != 0 && n.is_multiple_of(1_000_000) {
            write!(f, "{}ms", n / 1_000_000)
        } else if n.is_multiple_of(1_000) {
            write!(f, "{}us", n / 1_000)
        } else {
            write!(f, "{n}ns")
        }
    }
}

unit_type!(
    Duration,
    "duration",
    "duration",
    "a duration such as \"50us\", \"100ms\" or \"2s\" (ns, us, ms, s or min)",
    "100ms"
);

macro_rules! string_deserialize {
    ($($name:ident),*) => {$(
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    )*};
}
string_deserialize!(Speed, Length, Duration);

/// `1234567` as `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_parse_in_operator_notation_and_print_canonically() {
        assert_eq!("400G".parse::<Speed>(), Ok(Speed::gbps(400)));
        assert_eq!("400Gbps".parse::<Speed>(), Ok(Speed::gbps(400)));
        assert_eq!("1.6T".parse::<Speed>(), Ok(Speed::gbps(1600)));
        assert_eq!(Speed::gbps(1600).to_string(), "1600G");
        assert_eq!(Speed::gbps(25).to_string(), "25G");
        assert!("400".parse::<Speed>().is_err());
        assert!("fast".parse::<Speed>().is_err());
        assert!("0G".parse::<Speed>().is_err());
        assert_eq!(
            "100Gb/s".parse::<Speed>(),
            Ok(Speed::gbps(100)),
            "as `show` prints"
        );
        assert_eq!("400 Gbit/s".parse::<Speed>(), Ok(Speed::gbps(400)));
        assert_eq!("2.5G".parse::<Speed>(), Ok(Speed(2_500_000_000)));
        assert!("123G".parse::<Speed>().is_err(), "no Ethernet standard");
        assert!("100Tbps".parse::<Speed>().is_err(), "no port is that fast");
        assert!("0m".parse::<Length>().is_err(), "a cable has a length");
        assert_eq!("1mm".parse::<Length>(), Ok(Length(1)));
    }

    #[test]
    fn lengths_sizes_and_durations_round_trip() {
        assert_eq!("5m".parse::<Length>(), Ok(Length::metres(5)));
        assert_eq!("0.5m".parse::<Length>(), Ok(Length(500)));
        assert_eq!(Length(500).to_string(), "0.5m");
        assert_eq!("2km".parse::<Length>(), Ok(Length::metres(2000)));
        assert!("5".parse::<Length>().is_err());
        assert_eq!("1.6MB".parse::<Bytes>(), Ok(Bytes(1_600_000)));
        assert_eq!("400KiB".parse::<Bytes>(), Ok(Bytes(409_600)));
        assert_eq!(Bytes(400_000).to_string(), "400KB");
        assert_eq!("100us".parse::<Duration>(), Ok(Duration::micros(100)));
        assert_eq!(Duration::millis(200).to_string(), "200ms");
        assert!("100".parse::<Duration>().is_err());
    }

    #[test]
    fn counts_are_written_with_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
