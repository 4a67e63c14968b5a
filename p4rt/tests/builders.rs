//! P4Info index and typed builders: names resolve, widths are enforced, wildcards are left
//! out, and what is built equals its canonicalised read-back.

mod common;

use std::net::Ipv4Addr;

use weft_p4rt::proto::p4::v1::{Entity, PacketIn, PacketMetadata, field_match, table_action};
use weft_p4rt::{
    Error, MatchKind, ObjectKind, WeightedAction, canonicalize_entity, describe_entity,
};

#[test]
fn names_and_aliases_resolve_to_ids_and_back() {
    let info = common::p4info();
    assert_eq!(
        info.table("ingress.route").map(|t| t.id).ok(),
        Some(common::ROUTE)
    );
    assert_eq!(info.table("route").map(|t| t.id).ok(), Some(common::ROUTE));
    assert_eq!(
        info.table_by_id(common::ACL).map(|t| t.name.as_str()).ok(),
        Some("ingress.acl")
    );
    assert_eq!(
        info.action("set_nexthop").map(|a| a.params.len()).ok(),
        Some(2)
    );
    assert_eq!(
        info.action_profile("ecmp_selector").map(|p| p.id).ok(),
        Some(common::SELECTOR)
    );
    assert_eq!(
        info.counter("ingress.port_packets").map(|c| c.size).ok(),
        Some(512)
    );
    assert_eq!(info.register("flowlet").map(|r| r.size).ok(), Some(16));
    assert_eq!(
        info.table("ingress.acl")
            .ok()
            .and_then(|t| t.direct_counter_id),
        Some(0x1300_0001)
    );
    assert_eq!(
        info.table("ingress.ecmp")
            .ok()
            .and_then(|t| t.action_profile_id),
        Some(common::SELECTOR)
    );
    let field = info
        .table("route")
        .and_then(|t| t.field("hdr.ipv4.dst").map(|f| (f.id, f.bitwidth, f.kind)));
    assert_eq!(field.ok(), Some((2, 32, MatchKind::Lpm)));
}

#[test]
fn unknown_names_are_typed_errors_with_the_nearest_name() {
    let info = common::p4info();
    match info.table("ingress.rout") {
        Err(Error::UnknownName {
            kind: ObjectKind::Table,
            name,
            suggestion,
            ..
        }) => {
            assert_eq!(name, "ingress.rout");
            assert_eq!(suggestion.as_deref(), Some("ingress.route"));
        }
        other => panic!("expected UnknownName, got {other:?}"),
    }
    let err = info
        .table_entry("ingress.route")
        .and_then(|b| b.exact("meta.vfr", 1u16))
        .err();
    match err {
        Some(Error::UnknownName {
            kind: ObjectKind::MatchField,
            scope,
            suggestion,
            ..
        }) => {
            assert_eq!(scope.as_deref(), Some("table ingress.route"));
            assert_eq!(suggestion.as_deref(), Some("meta.vrf"));
        }
        other => panic!("expected UnknownName, got {other:?}"),
    }
    let err = info
        .action_call("ingress.set_port")
        .and_then(|a| a.param("prot", 1u8))
        .err();
    assert!(
        matches!(&err, Some(Error::UnknownName { kind: ObjectKind::ActionParam, suggestion: Some(s), .. }) if s == "port"),
        "{err:?}"
    );
    assert!(
        err.map(|e| e.to_string())
            .unwrap_or_default()
            .contains("did you mean `port`")
    );
    assert!(matches!(
        info.table("zzzzzzzzzzzzzzzz"),
        Err(Error::UnknownName {
            suggestion: None,
            ..
        })
    ));
}

#[test]
fn values_wider_than_the_bitwidth_are_refused() {
    let info = common::p4info();
    let err = info
        .action_call("ingress.set_port")
        .and_then(|a| a.param("port", 512u32))
        .err();
    assert!(
        matches!(
            err,
            Some(Error::ValueTooWide {
                bitwidth: 9,
                value_bits: 10,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(
        info.action_call("ingress.set_port")
            .and_then(|a| a.param("port", 511u32))
            .is_ok()
    );
    let err = info
        .table_entry("ingress.acl")
        .and_then(|b| b.ternary("hdr.ipv4.dscp", 64u8, 0x3fu8))
        .err();
    assert!(
        matches!(err, Some(Error::ValueTooWide { bitwidth: 6, .. })),
        "{err:?}"
    );
}

#[test]
fn table_entry_with_exact_and_lpm_is_canonical_and_sorted() {
    let info = common::p4info();
    let entry = info
        .table_entry("ingress.route")
        .and_then(|b| b.lpm("hdr.ipv4.dst", Ipv4Addr::new(10, 81, 8, 0), 24))
        .and_then(|b| b.exact("meta.vrf", 0u16))
        .and_then(|b| b.action(info.action_call("ingress.set_port")?.param("port", 3u16)?))
        .and_then(|b| b.build())
        .expect("entry");
    assert_eq!(entry.table_id, common::ROUTE);
    assert_eq!(
        entry.r#match.iter().map(|m| m.field_id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    match &entry.r#match[0].field_match_type {
        Some(field_match::FieldMatchType::Exact(x)) => assert_eq!(x.value, vec![0]),
        other => panic!("{other:?}"),
    }
    match &entry.action.as_ref().and_then(|a| a.r#type.clone()) {
        Some(table_action::Type::Action(a)) => assert_eq!(a.params[0].value, vec![3]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn lpm_rejects_host_bits_and_drops_zero_length_prefixes() {
    let info = common::p4info();
    let err = info
        .table_entry("ingress.route")
        .and_then(|b| b.lpm("hdr.ipv4.dst", Ipv4Addr::new(10, 0, 0, 1), 24))
        .err();
    assert!(matches!(err, Some(Error::InvalidValue { .. })), "{err:?}");
    let err = info
        .table_entry("ingress.route")
        .and_then(|b| b.lpm("hdr.ipv4.dst", 0u32, 33))
        .err();
    assert!(matches!(err, Some(Error::InvalidValue { .. })), "{err:?}");
    let default_route = info
        .table_entry("ingress.route")
        .and_then(|b| b.exact("meta.vrf", 1u16))
        .and_then(|b| b.lpm("hdr.ipv4.dst", 0u32, 0))
        .and_then(|b| b.build())
        .expect("entry");
    assert_eq!(
        default_route.r#match.len(),
        1,
        "a /0 LPM is a wildcard and must be omitted"
    );
}

#[test]
fn ternary_range_optional_need_priority_and_omit_wildcards() {
    let info = common::p4info();
    let no_priority = info
        .table_entry("ingress.acl")
        .and_then(|b| b.ternary("hdr.ipv4.dscp", 0x18u8, 0x3cu8))
        .and_then(|b| b.build())
        .err();
    assert!(
        matches!(no_priority, Some(Error::MissingPriority { .. })),
        "{no_priority:?}"
    );

    let outside = info
        .table_entry("ingress.acl")
        .and_then(|b| b.ternary("hdr.ipv4.dscp", 0x19u8, 0x3cu8))
        .err();
    assert!(
        matches!(outside, Some(Error::InvalidValue { .. })),
        "{outside:?}"
    );

    let reversed = info
        .table_entry("ingress.acl")
        .and_then(|b| b.range("hdr.udp.dport", 5u16, 4u16))
        .err();
    assert!(
        matches!(reversed, Some(Error::InvalidValue { .. })),
        "{reversed:?}"
    );

    let entry = info
        .table_entry("ingress.acl")
        .and_then(|b| b.ternary("hdr.ipv4.dscp", 0u8, 0u8))
        .and_then(|b| b.range("hdr.udp.dport", 0u16, 0xffffu16))
        .and_then(|b| b.optional("std.ingress_port", 3u16))
        .and_then(|b| b.action(info.action_call("drop")?))
        .map(|b| b.priority(10))
        .and_then(|b| b.build())
        .expect("entry");
    assert_eq!(
        entry.r#match.len(),
        1,
        "zero mask and full range are wildcards: {entry:?}"
    );
    assert_eq!(entry.priority, 10);

    let full = info
        .table_entry("ingress.acl")
        .and_then(|b| b.range("hdr.udp.dport", 4791u16, 4791u16))
        .and_then(|b| b.ternary("hdr.ipv4.dscp", 0x18u8, 0x3cu8))
        .map(|b| b.priority(1))
        .and_then(|b| b.build())
        .expect("entry");
    assert_eq!(
        full.r#match.iter().map(|m| m.field_id).collect::<Vec<_>>(),
        vec![1, 2]
    );
}

#[test]
fn wrong_match_kind_action_and_duplicates_are_refused() {
    let info = common::p4info();
    let e = info
        .table_entry("ingress.route")
        .and_then(|b| b.exact("hdr.ipv4.dst", 1u32))
        .err();
    assert!(
        matches!(
            e,
            Some(Error::MatchKindMismatch {
                declared: MatchKind::Lpm,
                used: MatchKind::Exact,
                ..
            })
        ),
        "{e:?}"
    );
    let e = info
        .table_entry("ingress.route")
        .and_then(|b| b.exact("meta.vrf", 1u16))
        .and_then(|b| b.exact("meta.vrf", 2u16))
        .err();
    assert!(matches!(e, Some(Error::DuplicateMatch { .. })), "{e:?}");
    let e = info
        .table_entry("ingress.route")
        .and_then(|b| {
            b.action(
                info.action_call("ingress.set_nexthop")?
                    .param("port", 1u8)?
                    .param("dmac", 1u8)?,
            )
        })
        .err();
    assert!(matches!(e, Some(Error::ActionNotInTable { .. })), "{e:?}");
    let e = info
        .table_entry("ingress.route")
        .and_then(|b| b.action(info.action_call("ingress.set_port")?))
        .err();
    assert!(
        matches!(e, Some(Error::MissingParam { ref param, .. }) if param == "port"),
        "{e:?}"
    );
    let e = info
        .table_entry("ingress.route")
        .and_then(|b| b.group_id(1))
        .err();
    assert!(
        matches!(e, Some(Error::TableImplementation { .. })),
        "{e:?}"
    );
    let e = info
        .table_entry("ingress.ecmp")
        .and_then(|b| b.action(info.action_call("ingress.set_nexthop")?))
        .err();
    assert!(
        matches!(e, Some(Error::TableImplementation { .. })),
        "{e:?}"
    );
}

#[test]
fn members_groups_and_action_sets_carry_weights_and_watch_ports() {
    let info = common::p4info();
    let call = || {
        info.action_call("ingress.set_nexthop")?
            .param("port", 2u16)?
            .param("dmac", [0, 0, 0, 0, 0, 2])
    };
    let member = info
        .member("ingress.ecmp_selector", 7, call().expect("call"))
        .expect("member");
    assert_eq!(member.action_profile_id, common::SELECTOR);
    assert_eq!(
        member.action.as_ref().map(|a| a.params[1].value.clone()),
        Some(vec![2])
    );
    let bad = info
        .member(
            "ingress.ecmp_selector",
            8,
            info.action_call("ingress.drop").expect("drop"),
        )
        .err();
    assert!(
        matches!(bad, Some(Error::ActionNotInTable { .. })),
        "{bad:?}"
    );

    let group = info
        .group("ingress.ecmp_selector", 100)
        .expect("group")
        .member(9, 1, Some(2u32))
        .member(7, 3, None::<u32>)
        .max_size(16)
        .build();
    assert_eq!(
        group
            .members
            .iter()
            .map(|m| (m.member_id, m.weight))
            .collect::<Vec<_>>(),
        vec![(7, 3), (9, 1)]
    );
    use weft_p4rt::proto::p4::v1::action_profile_group::member::WatchKind;
    assert_eq!(
        group.members[1].watch_kind,
        Some(WatchKind::WatchPort(vec![2]))
    );

    let set = info
        .table_entry("ingress.ecmp")
        .and_then(|b| b.exact("meta.nexthop_group", 1u16))
        .and_then(|b| b.action_set(vec![WeightedAction::new(call()?, 2).watch_port(0x0102u16)]))
        .and_then(|b| b.build())
        .expect("action set entry");
    match set.action.and_then(|a| a.r#type) {
        Some(table_action::Type::ActionProfileActionSet(s)) => {
            assert_eq!(s.action_profile_actions[0].weight, 2);
            use weft_p4rt::proto::p4::v1::action_profile_action::WatchKind as W;
            assert_eq!(
                s.action_profile_actions[0].watch_kind,
                Some(W::WatchPort(vec![1, 2]))
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn counters_meters_registers_check_their_index() {
    let info = common::p4info();
    assert!(info.counter_entry("port_packets", Some(511)).is_ok());
    assert!(matches!(
        info.counter_entry("port_packets", Some(512)),
        Err(Error::InvalidValue { .. })
    ));
    assert!(
        info.counter_entry("port_packets", None)
            .is_ok_and(|c| c.index.is_none())
    );
    assert!(info.register_entry("flowlet", Some(3)).is_ok());
    assert!(info.meter_entry("rate", Some(7), None).is_ok());
    let wildcard = info.table_wildcard(Some("ingress.acl")).expect("wildcard");
    assert!(info.direct_counter_entry(wildcard).is_ok());
    let route = info
        .table_wildcard(Some("ingress.route"))
        .expect("wildcard");
    assert!(matches!(
        info.direct_counter_entry(route),
        Err(Error::TableImplementation { .. })
    ));
}

#[test]
fn packet_out_needs_every_metadata_field_and_packet_in_is_named() {
    let info = common::p4info();
    let missing = info
        .packet_out(vec![1, 2, 3])
        .and_then(|b| b.meta("egress_port", 3u16))
        .and_then(|b| b.build());
    assert!(
        matches!(missing, Err(Error::MissingParam { ref param, .. }) if param == "flags"),
        "{missing:?}"
    );
    let out = info
        .packet_out(vec![1, 2, 3])
        .and_then(|b| b.meta("flags", 1u8))
        .and_then(|b| b.meta("egress_port", 3u16))
        .and_then(|b| b.build())
        .expect("packet out");
    assert_eq!(
        out.metadata
            .iter()
            .map(|m| (m.metadata_id, m.value.clone()))
            .collect::<Vec<_>>(),
        vec![(1, vec![3]), (2, vec![1])]
    );

    let pin = PacketIn {
        payload: vec![9],
        metadata: vec![PacketMetadata {
            metadata_id: 1,
            value: vec![0, 5],
        }],
    };
    let decoded = info.decode_packet_in(&pin).expect("decode");
    assert_eq!(decoded.get_u64("ingress_port"), Some(5));
    assert_eq!(decoded.get("ingress_port"), Some(&[5u8][..]));
    let unknown = PacketIn {
        payload: vec![],
        metadata: vec![PacketMetadata {
            metadata_id: 9,
            value: vec![1],
        }],
    };
    assert!(matches!(
        info.decode_packet_in(&unknown),
        Err(Error::UnknownId { id: 9, .. })
    ));
}

#[test]
fn full_width_read_back_canonicalises_to_the_built_entry() {
    let info = common::p4info();
    let built = info
        .table_entry("ingress.route")
        .and_then(|b| b.exact("meta.vrf", 1u16))
        .and_then(|b| b.lpm("hdr.ipv4.dst", Ipv4Addr::new(10, 0, 0, 0), 8))
        .and_then(|b| b.action(info.action_call("set_port")?.param("port", 3u16)?))
        .and_then(|b| b.build())
        .expect("entry");
    // What a target keeping full-width values might return: padded, fields in another order.
    let mut read = built.clone();
    read.r#match.reverse();
    for m in &mut read.r#match {
        match &mut m.field_match_type {
            Some(field_match::FieldMatchType::Exact(x)) => x.value = vec![0, 1],
            Some(field_match::FieldMatchType::Lpm(x)) => x.value = vec![10, 0, 0, 0],
            _ => {}
        }
    }
    if let Some(table_action::Type::Action(a)) =
        read.action.as_mut().and_then(|a| a.r#type.as_mut())
    {
        a.params[0].value = vec![0, 3];
    }
    let mut read = Entity::from(read);
    assert_ne!(read, Entity::from(built.clone()));
    canonicalize_entity(&mut read);
    assert_eq!(read, Entity::from(built));
}

#[test]
fn entities_are_described_with_p4info_names() {
    let info = common::p4info();
    let e = info
        .table_entry("ingress.acl")
        .and_then(|b| b.ternary("hdr.ipv4.dscp", 0x18u8, 0x3cu8))
        .and_then(|b| b.range("hdr.udp.dport", 4791u16, 4792u16))
        .map(|b| b.priority(5))
        .and_then(|b| b.build())
        .expect("entry");
    let text = describe_entity(Some(&info), &Entity::from(e.clone()));
    assert_eq!(
        text,
        "table ingress.acl {hdr.ipv4.dscp=0x18&&&0x3c, hdr.udp.dport=0x12b7..0x12b8} priority 5"
    );
    let anonymous = describe_entity(None, &Entity::from(e));
    assert!(
        anonymous.starts_with(&format!("table {} {{1=0x18", common::ACL)),
        "{anonymous}"
    );
}
