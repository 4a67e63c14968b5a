//! The string formats the intent's JSON Schema names (`"format": "speed"`, `"mac"`, …), checked
//! by the structural validator so that it reports every malformed value in one pass.

use std::str::FromStr;

use crate::model::{MacAddr, PortRef};
use crate::units::{Bytes, Duration, Length, Speed};

/// Checks a string against a unit format named in the JSON Schema (`"format": "speed"`), so the
/// structural validator can report every malformed quantity in one pass.
pub fn check_format(format: &str, value: &str) -> Option<&'static str> {
    let ok = match format {
        "speed" => Speed::parse(value).is_some(),
        "length" => Length::parse(value).is_some(),
        "size" => Bytes::parse(value).is_some(),
        "duration" => Duration::parse(value).is_some(),
        "mac" => MacAddr::from_str(value).is_ok(),
        "port-ref" => PortRef::from_str(value).is_ok(),
        "ipv4" => value.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => value.parse::<std::net::Ipv6Addr>().is_ok(),
        "ipv4-cidr" => value.parse::<ipnet::Ipv4Net>().is_ok(),
        "ipv6-cidr" => value.parse::<ipnet::Ipv6Net>().is_ok(),
        _ => return None,
    };
    if ok {
        None
    } else {
        Some(match format {
            "speed" => Speed::EXPECTED,
            "length" => Length::EXPECTED,
            "size" => Bytes::EXPECTED,
            "duration" => Duration::EXPECTED,
            "mac" => "a MAC address such as \"02:00:00:00:00:01\"",
            "ipv4" => "an IPv4 address such as \"10.0.0.2\"",
            "ipv6" => "an IPv6 address such as \"fd00::2\"",
            "ipv4-cidr" => "an IPv4 prefix such as \"10.0.0.0/16\"",
            "ipv6-cidr" => "an IPv6 prefix such as \"fd00::/48\"",
            _ => "a port reference SWITCH:PORT such as \"leaf1:Ethernet0\"",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_check_names_the_expected_notation() {
        assert_eq!(check_format("speed", "100G"), None);
        assert!(
            check_format("speed", "100")
                .unwrap_or_default()
                .contains("400G")
        );
        assert_eq!(check_format("unknown-format", "x"), None);
    }

    #[test]
    fn model_formats_are_checked_by_their_parsers() {
        assert_eq!(check_format("mac", "02:00:00:00:00:01"), None);
        assert!(check_format("mac", "02:00").is_some());
        assert_eq!(check_format("port-ref", "leaf1:Ethernet0"), None);
        assert!(
            check_format("port-ref", "leaf1")
                .unwrap_or_default()
                .contains("SWITCH:PORT")
        );
    }
}
