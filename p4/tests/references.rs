//! `contract::references` and `contract::identities` on P4RT_TABLE entries as the plugin
//! receives them: what an entry needs to exist, and what it provides to others.

use weft_p4::contract::{self, Ref, RefError};
use weft_p4::tables as t;
use weft_sonic_db::{P4rtAction, P4rtEntry, P4rtKey, WeightedAction};

fn key(table: &str) -> P4rtKey {
    P4rtKey::new(table)
}

fn r(table_id: u32, table: &'static str, field: &'static str, value: &str) -> Ref {
    Ref {
        table_id,
        table,
        field,
        value: value.into(),
    }
}

fn nexthop_ref(v: &str) -> Ref {
    r(
        t::nexthop_table::ID,
        t::nexthop_table::ALIAS,
        "nexthop_id",
        v,
    )
}

fn group_ref(v: &str) -> Ref {
    r(
        t::wcmp_group_table::ID,
        t::wcmp_group_table::ALIAS,
        "wcmp_group_id",
        v,
    )
}

fn port_ref(v: &str) -> Ref {
    r(
        t::port_config_table::ID,
        t::port_config_table::ALIAS,
        "port",
        v,
    )
}

#[test]
fn a_route_to_a_nexthop_refers_to_that_nexthop_in_canonical_spelling() {
    let e = P4rtEntry::new(
        key(t::ipv4_table::SONIC_NAME).with_match("ipv4_dst", "10.0.0.0/24"),
        P4rtAction::new("set_nexthop_id").with_param("nexthop_id", "0x0005"),
    );
    let refs = contract::references(t::ipv4_table::ID, &e).expect("refs");
    assert_eq!(refs, vec![nexthop_ref("0x5")]);
    assert_eq!(refs[0].to_string(), "nexthop_table nexthop_id=0x5");
    // A route is nothing anyone refers to.
    assert!(
        contract::identities(t::ipv4_table::ID, &e)
            .expect("ids")
            .is_empty()
    );
}

#[test]
fn a_route_to_a_group_refers_to_the_group_and_a_drop_route_to_nothing() {
    let to_group = P4rtEntry::new(
        key(t::ipv6_table::SONIC_NAME).with_match("ipv6_dst", "fd00::/64"),
        P4rtAction::new("set_wcmp_group_id").with_param("wcmp_group_id", "0x7"),
    );
    assert_eq!(
        contract::references(t::ipv6_table::ID, &to_group).expect("refs"),
        vec![group_ref("0x7")]
    );
    let drop = P4rtEntry::new(
        key(t::ipv6_table::SONIC_NAME).with_match("ipv6_dst", "fd00::/64"),
        P4rtAction::new("drop_route"),
    );
    assert!(
        contract::references(t::ipv6_table::ID, &drop)
            .expect("refs")
            .is_empty()
    );
}

#[test]
fn a_group_refers_to_every_members_nexthop_and_port_once() {
    let member = |nh: &str, port: &str| WeightedAction {
        action: P4rtAction::new("set_wcmp_member")
            .with_param("nexthop_id", nh)
            .with_param("egress_port", port),
        weight: 1,
        watch_port: Some(port.into()),
    };
    let e = P4rtEntry::weighted(
        key(t::wcmp_group_table::SONIC_NAME).with_match("wcmp_group_id", "0x3"),
        vec![
            member("0x1", "Ethernet0"),
            member("0x2", "Ethernet4"),
            member("0x01", "Ethernet0"),
        ],
    );
    let refs = contract::references(t::wcmp_group_table::ID, &e).expect("refs");
    assert_eq!(
        refs,
        vec![
            port_ref("Ethernet0"),
            port_ref("Ethernet4"),
            nexthop_ref("0x1"),
            nexthop_ref("0x2"),
        ]
    );
    assert_eq!(
        contract::identities(t::wcmp_group_table::ID, &e).expect("ids"),
        vec![group_ref("0x3")]
    );
}

#[test]
fn a_multipath_mode_refers_to_its_group_by_its_key() {
    let e = P4rtEntry::new(
        key(t::multipath_mode_table::SONIC_NAME)
            .with_match("wcmp_group_id", "0x3")
            .with_match("traffic_class", "0x3&0x7")
            .with_priority(10),
        P4rtAction::new("set_multipath_mode")
            .with_param("mode", "0x3")
            .with_param("flowlet_gap_us", "0x32")
            .with_param("epoch", "0x1"),
    );
    assert_eq!(
        contract::references(t::multipath_mode_table::ID, &e).expect("refs"),
        vec![group_ref("0x3")]
    );
}

#[test]
fn a_nexthop_is_referable_by_its_id_and_refers_to_its_port() {
    let e = P4rtEntry::new(
        key(t::nexthop_table::SONIC_NAME).with_match("nexthop_id", "0x10"),
        P4rtAction::new("set_nexthop")
            .with_param("egress_port", "Ethernet8")
            .with_param("dst_mac", "02:57:46:00:00:02")
            .with_param("src_mac", "02:57:46:00:00:01"),
    );
    assert_eq!(
        contract::identities(t::nexthop_table::ID, &e).expect("ids"),
        vec![nexthop_ref("0x10")]
    );
    assert_eq!(
        contract::references(t::nexthop_table::ID, &e).expect("refs"),
        vec![port_ref("Ethernet8")]
    );
    let port = P4rtEntry::new(
        key(t::port_config_table::SONIC_NAME).with_match("port", "Ethernet8"),
        P4rtAction::new("set_port_config").with_param("router_mac", "02:57:46:00:00:01"),
    );
    assert_eq!(
        contract::identities(t::port_config_table::ID, &port).expect("ids"),
        vec![port_ref("Ethernet8")]
    );
}

#[test]
fn bad_values_and_unknown_tables_are_errors() {
    let e = P4rtEntry::new(
        key(t::ipv4_table::SONIC_NAME).with_match("ipv4_dst", "10.0.0.0/24"),
        P4rtAction::new("set_nexthop_id").with_param("nexthop_id", "5"),
    );
    let err = contract::references(t::ipv4_table::ID, &e).expect_err("not hex");
    assert!(
        matches!(err, RefError::Value { .. }) && err.to_string().contains("nexthop_id"),
        "{err}"
    );
    let err = contract::references(0x0200_00ff, &e).expect_err("no table");
    assert!(matches!(err, RefError::UnknownTable(0x0200_00ff)), "{err}");
}
