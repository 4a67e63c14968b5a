//! A small hand-made P4Info shared by the unit tests (the BMv2 tests use a compiled one).

#![allow(dead_code)]

use weft_p4rt::P4Info;
use weft_p4rt::proto::p4::config::v1 as cfg;

pub const ROUTE: u32 = 0x0200_0001;
pub const ACL: u32 = 0x0200_0002;
pub const ECMP: u32 = 0x0200_0003;
pub const SET_PORT: u32 = 0x0100_0001;
pub const DROP: u32 = 0x0100_0002;
pub const SET_NEXTHOP: u32 = 0x0100_0003;
pub const SELECTOR: u32 = 0x1100_0001;

fn pre(id: u32, name: &str) -> Option<cfg::Preamble> {
    let alias = name.rsplit('.').next().unwrap_or(name).to_string();
    Some(cfg::Preamble {
        id,
        name: name.into(),
        alias,
        ..Default::default()
    })
}

fn field(id: u32, name: &str, bitwidth: i32, kind: cfg::match_field::MatchType) -> cfg::MatchField {
    cfg::MatchField {
        id,
        name: name.into(),
        bitwidth,
        r#match: Some(cfg::match_field::Match::MatchType(kind as i32)),
        ..Default::default()
    }
}

fn aref(id: u32) -> cfg::ActionRef {
    cfg::ActionRef {
        id,
        ..Default::default()
    }
}

fn param(id: u32, name: &str, bitwidth: i32) -> cfg::action::Param {
    cfg::action::Param {
        id,
        name: name.into(),
        bitwidth,
        ..Default::default()
    }
}

fn meta(id: u32, name: &str, bitwidth: i32) -> cfg::controller_packet_metadata::Metadata {
    cfg::controller_packet_metadata::Metadata {
        id,
        name: name.into(),
        bitwidth,
        ..Default::default()
    }
}

pub fn raw_p4info() -> cfg::P4Info {
    use cfg::match_field::MatchType as M;
    cfg::P4Info {
        tables: vec![
            cfg::Table {
                preamble: pre(ROUTE, "ingress.route"),
                match_fields: vec![
                    field(1, "meta.vrf", 16, M::Exact),
                    field(2, "hdr.ipv4.dst", 32, M::Lpm),
                ],
                action_refs: vec![
                    aref(SET_PORT),
                    cfg::ActionRef {
                        id: DROP,
                        scope: cfg::action_ref::Scope::DefaultOnly as i32,
                        ..Default::default()
                    },
                ],
                size: 1024,
                ..Default::default()
            },
            cfg::Table {
                preamble: pre(ACL, "ingress.acl"),
                match_fields: vec![
                    field(1, "hdr.ipv4.dscp", 6, M::Ternary),
                    field(2, "hdr.udp.dport", 16, M::Range),
                    field(3, "std.ingress_port", 9, M::Optional),
                ],
                action_refs: vec![aref(SET_PORT), aref(DROP)],
                direct_resource_ids: vec![0x1300_0001],
                size: 64,
                ..Default::default()
            },
            cfg::Table {
                preamble: pre(ECMP, "ingress.ecmp"),
                match_fields: vec![field(1, "meta.nexthop_group", 16, M::Exact)],
                action_refs: vec![aref(SET_NEXTHOP)],
                implementation_id: SELECTOR,
                size: 256,
                ..Default::default()
            },
        ],
        actions: vec![
            cfg::Action {
                preamble: pre(SET_PORT, "ingress.set_port"),
                params: vec![param(1, "port", 9)],
            },
            cfg::Action {
                preamble: pre(DROP, "ingress.drop"),
                params: vec![],
            },
            cfg::Action {
                preamble: pre(SET_NEXTHOP, "ingress.set_nexthop"),
                params: vec![param(1, "port", 9), param(2, "dmac", 48)],
            },
        ],
        action_profiles: vec![cfg::ActionProfile {
            preamble: pre(SELECTOR, "ingress.ecmp_selector"),
            table_ids: vec![ECMP],
            with_selector: true,
            size: 1024,
            max_group_size: 16,
            ..Default::default()
        }],
        counters: vec![cfg::Counter {
            preamble: pre(0x1200_0001, "ingress.port_packets"),
            size: 512,
            ..Default::default()
        }],
        direct_counters: vec![cfg::DirectCounter {
            preamble: pre(0x1300_0001, "ingress.acl_hits"),
            direct_table_id: ACL,
            ..Default::default()
        }],
        meters: vec![cfg::Meter {
            preamble: pre(0x1400_0001, "ingress.rate"),
            size: 8,
            ..Default::default()
        }],
        registers: vec![cfg::Register {
            preamble: pre(0x1600_0001, "ingress.flowlet"),
            size: 16,
            ..Default::default()
        }],
        controller_packet_metadata: vec![
            cfg::ControllerPacketMetadata {
                preamble: pre(0x0400_0001, "packet_in"),
                metadata: vec![meta(1, "ingress_port", 9)],
            },
            cfg::ControllerPacketMetadata {
                preamble: pre(0x0400_0002, "packet_out"),
                metadata: vec![meta(1, "egress_port", 9), meta(2, "flags", 7)],
            },
        ],
        ..Default::default()
    }
}

pub fn p4info() -> P4Info {
    P4Info::new(raw_p4info()).expect("test P4Info is valid")
}
