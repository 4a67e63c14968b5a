//! The generated typed entries write exactly what `weft_appdb::Encoder` + `weft_sonic_db`
//! write for the same values (the plugin parses with weft_appdb; the plan's golden files were
//! made with the encoder), for every table the controller writes, on random values.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use weft_appdb::{Call, Encoder, Match, Value};
use weft_p4::tables as t;
use weft_p4::wire::{Lpm, PortName, Ternary, Weighted, Wire};
use weft_sonic_db::P4rtEntry;

fn info() -> weft_p4rt::P4Info {
    weft_p4::p4info().expect("p4info")
}

/// The encoder's entry as the compiler wrote it: key within P4RT_TABLE, fields sorted.
fn encoded(e: P4rtEntry) -> Wire {
    let mut fields = e.to_fields();
    fields.sort();
    Wire {
        key: e.key.to_table_key(),
        fields,
    }
}

fn port_name() -> impl Strategy<Value = String> {
    // Mostly plain names; sometimes characters JSON must escape.
    prop_oneof![
        4 => (0u32..512).prop_map(|n| format!("Ethernet{}", n * 4)),
        1 => "[ -~\u{7f}é\"\\\\\n]{1,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn port_config_and_psn_tracking(port in port_name(), mac in any::<[u8; 6]>()) {
        let info = info();
        let enc = Encoder::new(&info);
        let ours = t::port_config_table::entry(
            &t::port_config_table::Key { port: PortName(&port) },
            &t::port_config_table::Action::SetPortConfig { router_mac: mac },
        ).expect("typed");
        let key = enc.key(t::port_config_table::NAME, &[Match::Exact("port", Value::Port(port.clone()))], 0).expect("key");
        let theirs = enc.entry(key, &Call { action: "set_port_config", params: vec![("router_mac", Value::Mac(mac))] }).expect("entry");
        prop_assert_eq!(ours, encoded(theirs));

        let ours = t::psn_tracking_table::entry(
            &t::psn_tracking_table::Key { port: PortName(&port) },
            &t::psn_tracking_table::Action::EnablePsnTracking,
        ).expect("typed");
        let key = enc.key(t::psn_tracking_table::NAME, &[Match::Exact("port", Value::Port(port.clone()))], 0).expect("key");
        let theirs = enc.entry(key, &Call { action: "enable_psn_tracking", params: vec![] }).expect("entry");
        prop_assert_eq!(ours, encoded(theirs));
    }

    #[test]
    fn nexthop(id in any::<u16>(), port in port_name(), dst in any::<[u8; 6]>(), src in any::<[u8; 6]>()) {
        let info = info();
        let enc = Encoder::new(&info);
        let ours = t::nexthop_table::entry(
            &t::nexthop_table::Key { nexthop_id: id },
            &t::nexthop_table::Action::SetNexthop { egress_port: PortName(&port), dst_mac: dst, src_mac: src },
        ).expect("typed");
        let key = enc.key(t::nexthop_table::NAME, &[Match::Exact("nexthop_id", Value::Uint(id.into()))], 0).expect("key");
        let theirs = enc.entry(key, &Call { action: "set_nexthop", params: vec![
            ("egress_port", Value::Port(port.clone())), ("dst_mac", Value::Mac(dst)), ("src_mac", Value::Mac(src)),
        ] }).expect("entry");
        prop_assert_eq!(ours, encoded(theirs));
    }

    #[test]
    fn wcmp_group(id in any::<u16>(), members in prop::collection::vec((any::<u16>(), port_name(), 1u32..300, any::<bool>()), 1..6)) {
        let info = info();
        let enc = Encoder::new(&info);
        let typed: Vec<Weighted<'_, t::wcmp_group_table::Action<'_>>> = members.iter().map(|(nh, p, w, watch)| Weighted {
            action: t::wcmp_group_table::Action::SetWcmpMember { egress_port: PortName(p), nexthop_id: *nh },
            weight: *w,
            watch_port: watch.then_some(PortName(p)),
        }).collect();
        let ours = t::wcmp_group_table::entry(&t::wcmp_group_table::Key { wcmp_group_id: id }, &typed).expect("typed");
        let calls: Vec<(Call, u32, Option<String>)> = members.iter().map(|(nh, p, w, watch)| (
            Call { action: "set_wcmp_member", params: vec![("nexthop_id", Value::Uint((*nh).into())), ("egress_port", Value::Port(p.clone()))] },
            *w,
            watch.then(|| p.clone()),
        )).collect();
        let key = enc.key(t::wcmp_group_table::NAME, &[Match::Exact("wcmp_group_id", Value::Uint(id.into()))], 0).expect("key");
        prop_assert_eq!(ours, encoded(enc.group(key, &calls).expect("group")));
    }

    #[test]
    fn multipath_mode(id in any::<u16>(), tc in proptest::option::of((0u8..8, 0u8..8)), priority in 0u32..20,
                      mode in any::<u8>(), gap in any::<u32>(), epoch in any::<u16>()) {
        let info = info();
        let enc = Encoder::new(&info);
        let ours = t::multipath_mode_table::entry(
            &t::multipath_mode_table::Key { wcmp_group_id: id, traffic_class: tc.map(|(value, mask)| Ternary { value, mask }) },
            priority,
            &t::multipath_mode_table::Action::SetMultipathMode { epoch, flowlet_gap_us: gap, mode },
        ).expect("typed");
        let mut m = vec![Match::Exact("wcmp_group_id", Value::Uint(id.into()))];
        if let Some((v, mask)) = tc {
            m.push(Match::Ternary("traffic_class", Value::Uint(v.into()), Value::Uint(mask.into())));
        }
        let key = enc.key(t::multipath_mode_table::NAME, &m, priority).expect("key");
        let theirs = enc.entry(key, &Call { action: "set_multipath_mode", params: vec![
            ("mode", Value::Uint(mode.into())), ("flowlet_gap_us", Value::Uint(gap.into())), ("epoch", Value::Uint(epoch.into())),
        ] }).expect("entry");
        prop_assert_eq!(ours, encoded(theirs));
    }

    #[test]
    fn routes(v4 in any::<u32>(), len4 in 0u8..=32, v6 in any::<u128>(), len6 in 0u8..=128, target in 0u8..3, id in any::<u16>()) {
        let info = info();
        let enc = Encoder::new(&info);
        let (a4, c4) = match target {
            0 => (t::ipv4_table::Action::SetNexthopId { nexthop_id: id }, Call { action: "set_nexthop_id", params: vec![("nexthop_id", Value::Uint(id.into()))] }),
            1 => (t::ipv4_table::Action::SetWcmpGroupId { wcmp_group_id: id }, Call { action: "set_wcmp_group_id", params: vec![("wcmp_group_id", Value::Uint(id.into()))] }),
            _ => (t::ipv4_table::Action::DropRoute, Call { action: "drop_route", params: vec![] }),
        };
        let ours = t::ipv4_table::entry(&t::ipv4_table::Key { ipv4_dst: Lpm { addr: Ipv4Addr::from(v4), prefix_len: len4 } }, &a4).expect("typed");
        let key = enc.key(t::ipv4_table::NAME, &[Match::Lpm("ipv4_dst", Value::Ipv4(Ipv4Addr::from(v4)), len4.into())], 0).expect("key");
        prop_assert_eq!(ours, encoded(enc.entry(key, &c4).expect("entry")));

        let a6 = match a4 {
            t::ipv4_table::Action::SetNexthopId { nexthop_id } => t::ipv6_table::Action::SetNexthopId { nexthop_id },
            t::ipv4_table::Action::SetWcmpGroupId { wcmp_group_id } => t::ipv6_table::Action::SetWcmpGroupId { wcmp_group_id },
            t::ipv4_table::Action::DropRoute => t::ipv6_table::Action::DropRoute,
        };
        let ours = t::ipv6_table::entry(&t::ipv6_table::Key { ipv6_dst: Lpm { addr: Ipv6Addr::from(v6), prefix_len: len6 } }, &a6).expect("typed");
        let key = enc.key(t::ipv6_table::NAME, &[Match::Lpm("ipv6_dst", Value::Ipv6(Ipv6Addr::from(v6)), len6.into())], 0).expect("key");
        prop_assert_eq!(ours, encoded(enc.entry(key, &c4).expect("entry")));
    }

    #[test]
    fn postcard_watch(src in proptest::option::of(any::<(u128, u128)>()), qp in proptest::option::of((0u32..1 << 24, 0u32..1 << 24)),
                      proto in proptest::option::of(any::<(u8, u8)>()), priority in 1u32..100) {
        let info = info();
        let enc = Encoder::new(&info);
        let tern = |x: Option<(u128, u128)>| x.map(|(value, mask)| Ternary { value, mask });
        let ours = t::postcard_watch_table::entry(
            &t::postcard_watch_table::Key {
                src_addr: tern(src), dst_addr: None,
                dst_qp: qp.map(|(value, mask)| Ternary { value, mask }),
                ip_protocol: proto.map(|(value, mask)| Ternary { value, mask }),
                l4_dst_port: None,
            },
            priority,
            &t::postcard_watch_table::Action::WatchPostcard,
        ).expect("typed");
        let mut m = Vec::new();
        if let Some((v, k)) = src { m.push(Match::Ternary("src_addr", Value::Uint(v), Value::Uint(k))); }
        if let Some((v, k)) = qp { m.push(Match::Ternary("dst_qp", Value::Uint(v.into()), Value::Uint(k.into()))); }
        if let Some((v, k)) = proto { m.push(Match::Ternary("ip_protocol", Value::Uint(v.into()), Value::Uint(k.into()))); }
        let key = enc.key(t::postcard_watch_table::NAME, &m, priority).expect("key");
        prop_assert_eq!(ours, encoded(enc.entry(key, &Call { action: "watch_postcard", params: vec![] }).expect("entry")));
    }
}

#[test]
fn a_value_wider_than_its_field_is_an_error_not_a_wrong_entry() {
    let err = t::multipath_mode_table::entry(
        &t::multipath_mode_table::Key {
            wcmp_group_id: 1,
            traffic_class: Some(Ternary { value: 8, mask: 7 }),
        },
        10,
        &t::multipath_mode_table::Action::SetMultipathMode {
            epoch: 0,
            flowlet_gap_us: 0,
            mode: 0,
        },
    )
    .expect_err("8 does not fit in 3 bits");
    assert!(err.to_string().contains("traffic_class"), "{err}");
    let err = t::postcard_watch_table::Key {
        src_addr: None,
        dst_addr: None,
        dst_qp: Some(Ternary {
            value: 1 << 24,
            mask: 0,
        }),
        ip_protocol: None,
        l4_dst_port: None,
    }
    .table_key(1)
    .expect_err("25 bits");
    assert!(err.to_string().contains("dst_qp"), "{err}");
}

#[test]
fn a_known_entry_is_written_as_the_golden_plans_show() {
    let w = t::multipath_mode_table::entry(
        &t::multipath_mode_table::Key {
            wcmp_group_id: 1,
            traffic_class: Some(Ternary { value: 3, mask: 7 }),
        },
        10,
        &t::multipath_mode_table::Action::SetMultipathMode {
            epoch: 0x2a,
            flowlet_gap_us: 50,
            mode: 3,
        },
    )
    .expect("entry");
    assert_eq!(
        w.key,
        r#"FIXED_MULTIPATH_MODE_TABLE:{"match/traffic_class":"0x3&0x7","match/wcmp_group_id":"0x1","priority":10}"#
    );
    assert_eq!(
        w.fields,
        vec![
            ("action".to_string(), "set_multipath_mode".to_string()),
            ("param/epoch".to_string(), "0x2a".to_string()),
            ("param/flowlet_gap_us".to_string(), "0x32".to_string()),
            ("param/mode".to_string(), "0x3".to_string()),
        ]
    );
}
