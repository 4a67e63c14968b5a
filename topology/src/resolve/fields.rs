//! Fields an operator wrote on switches and hosts: endpoints, MACs, addresses, device ids.

use std::net::Ipv4Addr;

use super::ctx::{Ctx, Draft};
use super::defaults::MAX_DEVICE_ID;
use super::endpoints;
use crate::model::{Defaults, Intent, MacAddr, SwitchSpec};
use crate::names::{check_name, display_name};
use crate::topo::{Host, Switch};

/// A MAC that can be a unicast source and destination: not all zeros, not group (multicast or
/// broadcast).
fn mac_problem(m: MacAddr) -> Option<&'static str> {
    if m == MacAddr([0; 6]) {
        Some("the all-zero MAC is not an address")
    } else if m.0[0] & 1 == 1 {
        Some(if m == MacAddr([0xff; 6]) {
            "the broadcast MAC cannot be one device's address"
        } else {
            "a multicast MAC (lowest bit of the first byte set) cannot be one device's address"
        })
    } else {
        None
    }
}

fn v4_problem(a: Ipv4Addr) -> Option<&'static str> {
    if a.is_unspecified() {
        Some("0.0.0.0 is not an address")
    } else if a.is_broadcast() {
        Some("the broadcast address cannot be one device's address")
    } else if a.is_multicast() {
        Some("a multicast address cannot be one device's address")
    } else if a.is_loopback() {
        Some("127.0.0.0/8 is the loopback network of every machine")
    } else {
        None
    }
}

fn v6_problem(a: std::net::Ipv6Addr) -> Option<&'static str> {
    if a.is_unspecified() {
        Some(":: is not an address")
    } else if a.is_multicast() {
        Some("a multicast address cannot be one device's address")
    } else if a.is_loopback() {
        Some("::1 is the loopback address of every machine")
    } else {
        None
    }
}

/// Fields an operator wrote on switches and hosts: endpoints, MACs, addresses, device ids.
pub(super) fn check_explicit_fields(
    cx: &mut Ctx,
    intent: &Intent,
    drafts: &[Draft<SwitchSpec>],
    switches: &[Switch],
    hosts: &[Host],
) {
    let d = &intent.fabric.defaults;
    if let Some(a) = &d.p4rt_address
        && let Err(why) = endpoints::check_host_port(a)
    {
        cx.err_help(
            "fabric.defaults.p4rt_address",
            "fabric.defaults.p4rt_address",
            format!("{:?} is not a P4Runtime address: {why}", a),
            "write HOST:PORT, e.g. 127.0.0.1:9559 (switch N gets PORT+N-1)",
        );
    }
    for (dr, s) in drafts.iter().zip(switches) {
        if dr.generated {
            continue;
        }
        let item = || format!("switch {}", display_name(&s.name));
        let spec = &dr.spec;
        if let Some(a) = &spec.p4rt_address
            && let Err(why) = endpoints::check_host_port(a)
        {
            cx.err_help(
                &format!("{}.p4rt_address", dr.origin),
                item(),
                format!("{:?} is not a P4Runtime address: {why}", a),
                "write HOST:PORT, e.g. 127.0.0.1:9600",
            );
        }
        if let Some(db) = &spec.db
            && let Err(why) = endpoints::check_db(db)
        {
            cx.err_help(
                &format!("{}.db", dr.origin),
                item(),
                format!("{db:?} is not a SONiC DB endpoint: {why}"),
                "write redis://HOST:PORT, unix:///path/to/redis.sock or /path/to/redis.sock",
            );
        }
        if let Some(m) = spec.router_mac
            && let Some(why) = mac_problem(m)
        {
            cx.err_help(
                &format!("{}.router_mac", dr.origin),
                item(),
                format!("router MAC {m}: {why}"),
                "leave `router_mac` out to have one allocated from the device id",
            );
        }
        if let Some(a) = spec.loopback
            && let Some(why) = v4_problem(a)
        {
            cx.err_help(
                &format!("{}.loopback", dr.origin),
                item(),
                format!("loopback {a}: {why}"),
                "leave `loopback` out to have one allocated from fabric.pools.loopbacks_v4",
            );
        }
        if let Some(id) = spec.device_id
            && id > MAX_DEVICE_ID
        {
            cx.err_help(
                &format!("{}.device_id", dr.origin),
                item(),
                format!("device id {id} is larger than {MAX_DEVICE_ID} (32 bits, so the testbed's interface names s<device>p<port> fit Linux's 15 characters)"),
                "leave `device_id` out to have one allocated (they count from 1)",
            );
        }
    }
    for h in hosts {
        if !h.origin.starts_with("hosts[") {
            continue;
        }
        let item = || format!("host {}", display_name(&h.name));
        // An explicit zero value reads as "allocate" here, so the file is asked.
        let mac_path = format!("{}.mac", h.origin);
        if cx.written(&mac_path)
            && let Some(why) = mac_problem(h.mac)
        {
            cx.err_help(
                &mac_path,
                item(),
                format!("MAC {}: {why}", h.mac),
                "leave `mac` out to have one allocated",
            );
        }
        let v4_path = format!("{}.ipv4", h.origin);
        if cx.written(&v4_path)
            && let Some(why) = v4_problem(h.ipv4)
        {
            cx.err_help(
                &v4_path,
                item(),
                format!("address {}: {why}", h.ipv4),
                "leave `ipv4` out to have one allocated from fabric.pools.hosts_v4",
            );
        }
        if let Some(a) = h.ipv6
            && let Some(why) = v6_problem(a)
        {
            cx.err_help(
                &format!("{}.ipv6", h.origin),
                item(),
                format!("address {a}: {why}"),
                "leave `ipv6` out to have one allocated from fabric.pools.hosts_v6",
            );
        }
    }
}

/// Generated SONiC DB sockets must fit a Unix socket path.
pub(super) fn check_socket_dir(cx: &mut Ctx, fabric: &str, d: &Defaults, switches: &[Switch]) {
    let given = d.db_socket_dir.is_some();
    // The default directory is made of the fabric's name: a bad name is reported as such.
    if !given && check_name(fabric).is_err() {
        return;
    }
    let dir = super::alloc::socket_dir(fabric, d);
    let dir = dir.as_str();
    let path = if given {
        "fabric.defaults.db_socket_dir"
    } else {
        "fabric.name"
    };
    if given && (!dir.starts_with('/') || dir.chars().any(|c| c.is_control() || c.is_whitespace()))
    {
        cx.err(
            path,
            path,
            format!("{dir:?} must be an absolute directory path without spaces"),
        );
        return;
    }
    let longest = switches
        .iter()
        .filter(|s| s.db.is_empty() && check_name(&s.name).is_ok())
        .max_by_key(|s| s.name.len());
    if let Some(s) = longest {
        let sock = format!("{}/{}/redis.sock", dir.trim_end_matches('/'), s.name);
        if let Err(why) = endpoints::check_socket_path(&sock) {
            cx.err_help(
                path,
                path,
                format!("switch {}'s DB socket {sock}: {why}", display_name(&s.name)),
                if given {
                    "use a shorter directory"
                } else {
                    "use shorter fabric and switch names, or set fabric.defaults.db_socket_dir"
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors};
    use super::*;

    #[test]
    fn only_unicast_addresses_can_be_one_devices() {
        assert_eq!(mac_problem(MacAddr([2, 0, 0, 0, 0, 1])), None);
        assert!(mac_problem(MacAddr([0; 6])).is_some());
        assert!(
            mac_problem(MacAddr([0xff; 6]))
                .unwrap_or_default()
                .contains("broadcast")
        );
        assert!(
            mac_problem(MacAddr([1, 0, 0x5e, 0, 0, 1]))
                .unwrap_or_default()
                .contains("multicast")
        );
        assert_eq!(v4_problem(Ipv4Addr::new(10, 0, 0, 1)), None);
        for bad in ["0.0.0.0", "255.255.255.255", "224.0.0.1", "127.0.0.2"] {
            assert!(v4_problem(bad.parse().expect("v4")).is_some(), "{bad}");
        }
        assert_eq!(v6_problem("fd00::1".parse().expect("v6")), None);
        for bad in ["::", "ff02::1", "::1"] {
            assert!(v6_problem(bad.parse().expect("v6")).is_some(), "{bad}");
        }
    }

    #[test]
    fn written_endpoints_addresses_and_ids_are_checked_where_written() {
        let yaml = SMALL.replacen(
            "role: leaf\n",
            "role: leaf\n    p4rt_address: localhost\n    db: http://10.0.0.1:6379\n    router_mac: ff:ff:ff:ff:ff:ff\n    loopback: 127.0.0.1\n    device_id: 4294967296\n",
            1,
        );
        let e = errors(&yaml);
        assert_eq!(
            e,
            vec![
                "7: \"localhost\" is not a P4Runtime address: missing :PORT",
                "8: \"http://10.0.0.1:6379\" is not a SONiC DB endpoint: expected redis://HOST:PORT, unix:///path/to/redis.sock or an absolute socket path",
                "9: router MAC ff:ff:ff:ff:ff:ff: the broadcast MAC cannot be one device's address",
                "10: loopback 127.0.0.1: 127.0.0.0/8 is the loopback network of every machine",
                "11: device id 4294967296 is larger than 4294967295 (32 bits, so the testbed's interface names s<device>p<port> fit Linux's 15 characters)",
            ]
        );
    }

    #[test]
    fn a_socket_directory_too_long_for_the_longest_switch_name_is_refused() {
        let dir = format!("/{}", "d".repeat(90));
        let e = errors(&format!(
            "fabric:\n  defaults:\n    db_socket_dir: {dir}\n{SMALL}"
        ));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with(&format!("3: switch spine1's DB socket {dir}/spine1/redis.sock: the socket path is 109 bytes; Unix sockets allow at most 107")),
            "{e:?}"
        );
        let e = errors(&format!(
            "fabric:\n  defaults:\n    db_socket_dir: run/weft\n{SMALL}"
        ));
        assert_eq!(
            e,
            vec!["3: \"run/weft\" must be an absolute directory path without spaces"]
        );
    }
}
