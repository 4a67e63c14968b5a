use super::*;

fn info() -> weft_p4rt::P4Info {
    p4info().expect("committed P4Info parses")
}

/// The committed generated.rs must be what the committed P4Info gives; WEFT_REGEN=1 rewrites
/// it instead of failing.
#[test]
fn generated_rs_is_up_to_date_with_the_p4info() {
    let constants = codegen::parse_constants(CONSTANTS_P4).expect("constants parse");
    let fresh = codegen::generate(&info(), &constants).expect("generates");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/generated.rs");
    if std::env::var_os("WEFT_REGEN").is_some() {
        codegen::write_formatted(std::path::Path::new(path), &fresh).expect("write generated.rs");
        return;
    }
    let committed = std::fs::read_to_string(path).expect("read generated.rs");
    assert!(
        codegen::comparable(&committed) == codegen::comparable(&fresh),
        "p4/src/generated.rs is stale: run `WEFT_REGEN=1 cargo test -p weft-p4`"
    );
}

#[test]
fn lookup_by_alias_and_full_name_agree_with_generated_ids() {
    let info = info();
    let by_alias = info.table(tables::ipv4_table::ALIAS).expect("alias");
    let by_name = info.table(tables::ipv4_table::NAME).expect("name");
    assert_eq!(by_alias.id, tables::ipv4_table::ID);
    assert_eq!(by_name.id, tables::ipv4_table::ID);
    let field = by_name
        .field(tables::ipv4_table::fields::ipv4_dst::NAME)
        .expect("field");
    assert_eq!(field.bitwidth, 32);
    assert_eq!(field.kind, MatchKind::Lpm);
    let action = info.action(actions::set_nexthop::NAME).expect("action");
    let param = action
        .param(actions::set_nexthop::params::dst_mac::NAME)
        .expect("param");
    assert_eq!(param.bitwidth, 48);
}

#[test]
fn ids_follow_the_p4runtime_prefixes_of_ids_p4() {
    let info = info();
    for t in info.tables() {
        assert_eq!(t.id >> 24, 0x02, "table {}", t.name);
    }
    for c in info.counters() {
        assert_eq!(c.id >> 24, 0x12, "counter {}", c.name);
    }
    for r in info.registers() {
        assert_eq!(r.id >> 24, 0x16, "register {}", r.name);
    }
    // Every action of ours carries an explicit id (0x01000000 + n), none a p4c hash.
    for a in info.actions() {
        assert_eq!(
            a.id & 0xffff_0000,
            0x0100_0000,
            "action {} has no @id",
            a.name
        );
    }
}

#[test]
fn the_wcmp_selector_implements_exactly_the_wcmp_group_table() {
    // A selector shared by two tables crashes simple_switch_grpc (see include/multipath.p4).
    let p = &action_profiles::wcmp_group_selector::TABLE_IDS;
    assert_eq!(*p, [tables::wcmp_group_table::ID]);
    const { assert!(action_profiles::wcmp_group_selector::WITH_SELECTOR) };
    assert_eq!(
        tables::wcmp_group_table::ACTION_PROFILE_ID,
        Some(action_profiles::wcmp_group_selector::ID)
    );
}

#[test]
fn packet_metadata_is_byte_aligned_for_pi() {
    let info = info();
    for name in [
        packet_metadata::packet_in::NAME,
        packet_metadata::packet_out::NAME,
    ] {
        let m = info.controller_header(name).expect("present");
        let bits: i32 = m.metadata.iter().map(|f| f.bitwidth).sum();
        assert_eq!(bits % 8, 0, "{name} is {bits} bits");
    }
}

#[test]
fn p4info_text_binary_and_json_describe_the_same_tables() {
    // The binary form is what the model parses; the text and JSON forms must name the same
    // tables with the same ids.
    for (name, id) in tables::ALL {
        assert!(
            P4INFO_TEXT.contains(&format!("name: \"{name}\"")),
            "{name} not in txtpb"
        );
        assert!(
            P4INFO_TEXT.contains(&format!("id: {id}")),
            "{id} not in txtpb"
        );
        assert!(
            P4INFO_JSON.contains(&format!("\"{name}\"")),
            "{name} not in json"
        );
    }
    assert_eq!(info().tables().len(), tables::ALL.len());
    assert!(BMV2_JSON.contains(&format!("\"{}\"", tables::ipv4_table::NAME)));
}

// ---- the contract ----

#[test]
fn every_table_in_the_p4info_has_an_owner_and_a_write_rank() {
    let info = info();
    let ranks = contract::derive_ranks(&info).expect("ranks");
    assert_eq!(contract::tables().len(), info.tables().len());
    for t in info.tables() {
        assert!(t.owner.is_some(), "table {} has no @weft_owner", t.name);
        let c = contract::table(t.id).unwrap_or_else(|| panic!("{} has no contract", t.name));
        assert_eq!(c.name, t.name);
        assert_eq!(
            Some(&c.write_rank),
            ranks.tables.get(&t.id),
            "{}: generated rank differs from the derived one",
            t.name
        );
    }
    for p in info.action_profiles() {
        assert_eq!(
            contract::profile_ranks(p.id),
            ranks.profiles.get(&p.id).copied(),
            "{}",
            p.name
        );
    }
}

#[test]
fn every_refers_to_names_an_existing_key_field_of_the_same_width() {
    let info = info();
    let mut seen = 0;
    for t in contract::tables() {
        for r in t.refers_to {
            seen += 1;
            let target = contract::table(r.table_id)
                .unwrap_or_else(|| panic!("{}: refers to unknown table {:#x}", t.name, r.table_id));
            assert_eq!(target.alias, r.table);
            let key = target
                .key
                .iter()
                .find(|f| f.name == r.field && f.id == r.field_id)
                .unwrap_or_else(|| panic!("{}: {} has no key field {}", t.name, r.table, r.field));
            assert!(key.referable, "{}.{} is referred to", r.table, r.field);
            let from_bits = match r.source {
                contract::RefSource::Match { field, .. } => {
                    t.key.iter().find(|f| f.name == field).map(|f| f.bitwidth)
                }
                contract::RefSource::Param { action, param, .. } => t
                    .actions
                    .iter()
                    .find(|a| a.alias == action)
                    .and_then(|a| a.params.iter().find(|p| p.name == param))
                    .map(|p| p.bitwidth),
            };
            assert_eq!(from_bits, Some(key.bitwidth), "{}: {:?}", t.name, r.source);
        }
    }
    // The model also checks them when it loads (it refuses the P4Info otherwise): both agree
    // on how many there are.
    let in_model: usize = info
        .tables()
        .iter()
        .map(|t| {
            let keys: usize = t.match_fields.iter().map(|f| f.refers_to.len()).sum();
            let params: usize = t
                .entry_action_ids()
                .filter_map(|a| info.action_by_id(a).ok())
                .flat_map(|a| a.params.iter().map(|p| p.refers_to.len()))
                .sum();
            keys + params
        })
        .sum();
    assert_eq!(seen, in_model);
    assert!(seen >= 6, "the pipeline's references are declared ({seen})");
}

#[test]
fn ranks_respect_every_reference_and_action_profile() {
    let rank = |id: u32| contract::table(id).map(|t| t.write_rank).expect("table");
    for t in contract::tables() {
        for r in t.refers_to {
            // Through an action profile, the members carry the actions: they follow the target,
            // and the table follows its groups.
            let after = match (r.source, t.action_profile_id) {
                (contract::RefSource::Param { .. }, Some(p)) => {
                    contract::profile_ranks(p).expect("profile").0
                }
                _ => t.write_rank,
            };
            assert!(
                after > rank(r.table_id),
                "{} ({after}) must follow {} ({})",
                t.name,
                r.table,
                rank(r.table_id)
            );
            // A user of an entry follows every table keyed by that entry.
            if let contract::RefSource::Param { .. } = r.source {
                for ext in contract::tables() {
                    let keyed = ext.refers_to.iter().any(|e| {
                        e.table_id == r.table_id
                            && matches!(e.source, contract::RefSource::Match { .. })
                    });
                    if keyed && ext.id != t.id {
                        assert!(
                            after > ext.write_rank,
                            "{} must follow {}",
                            t.name,
                            ext.name
                        );
                    }
                }
            }
        }
        if let Some(p) = t.action_profile_id {
            let (member, group) = contract::profile_ranks(p).expect("profile");
            assert!(member < group && group < t.write_rank, "{}", t.name);
        }
    }
}

#[test]
fn the_write_order_is_port_config_nexthops_members_groups_wcmp_table_modes_routes() {
    use tables as t;
    let (member, group) = (
        action_profiles::wcmp_group_selector::MEMBER_RANK,
        action_profiles::wcmp_group_selector::GROUP_RANK,
    );
    let order = [
        t::port_config_table::WRITE_RANK,
        t::nexthop_table::WRITE_RANK,
        member,
        group,
        t::wcmp_group_table::WRITE_RANK,
        t::multipath_mode_table::WRITE_RANK,
        t::ipv4_table::WRITE_RANK,
    ];
    assert_eq!(order, [0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(t::ipv6_table::WRITE_RANK, t::ipv4_table::WRITE_RANK);
    // PSN tracking keys a physical port, not a port_config_table entry: it ranks with it.
    assert_eq!(t::psn_tracking_table::WRITE_RANK, 0);
    assert_eq!(contract::MAX_WRITE_RANK, 6);
}

#[test]
fn referred_by_is_the_inverse_of_refers_to() {
    for t in contract::tables() {
        let mut by: Vec<u32> = contract::tables()
            .iter()
            .filter(|u| u.refers_to.iter().any(|r| r.table_id == t.id))
            .map(|u| u.id)
            .collect();
        by.sort_unstable();
        assert_eq!(t.referred_by, by.as_slice(), "{}", t.name);
    }
    assert_eq!(
        tables::nexthop_table::REFERRED_BY,
        &[
            tables::ipv4_table::ID,
            tables::ipv6_table::ID,
            tables::wcmp_group_table::ID
        ]
    );
}

#[test]
fn the_plugin_owns_exactly_the_tables_annotated_for_it_with_their_reasons() {
    // As a set (by id): the generator lists tables in the P4Info's order.
    let mut owned: Vec<(u32, &str)> = contract::plugin_tables().collect();
    owned.sort_unstable();
    assert_eq!(
        owned,
        vec![
            (
                tables::switch_config_table::ID,
                "switch settings, DSCP classification and watchdog ports from CONFIG_DB and the device id"
            ),
            (
                tables::port_status_table::ID,
                "port down mask from link state"
            ),
            (tables::pfc_watchdog_table::ID, "the plugin's PFC watchdog"),
            (
                tables::queue_config_table::ID,
                "from CONFIG_DB WRED_PROFILE, QUEUE, BUFFER_PG, BUFFER_PROFILE and PORT_QOS_MAP"
            ),
            (
                tables::trim_config_table::ID,
                "packet trimming from CONFIG_DB SWITCH_TRIMMING and the queues whose BUFFER_PROFILE packet_discard_action is trim"
            ),
        ]
    );
}

#[test]
fn declared_formats_agree_with_the_fallback_rule_so_both_readers_agree() {
    // The plugin's translator still decides formats by width and name; the generated entries
    // by @format. On this pipeline the two must give the same format for every value.
    let info = info();
    let mut declared = 0;
    for t in info.tables() {
        for f in &t.match_fields {
            let rule = weft_appdb::format_of(&f.name, f.bitwidth as u32);
            assert_eq!(
                weft_appdb::format_of_field(f).expect("format"),
                rule,
                "{}.{}",
                t.name,
                f.name
            );
            declared += usize::from(f.format.is_some());
            if matches!(f.bitwidth, 9 | 48) {
                assert!(
                    f.format.is_some(),
                    "{}.{} declares no @format",
                    t.name,
                    f.name
                );
            }
        }
    }
    for a in info.actions() {
        for p in &a.params {
            let rule = weft_appdb::format_of(&p.name, p.bitwidth as u32);
            assert_eq!(
                weft_appdb::format_of_param(p).expect("format"),
                rule,
                "{}.{}",
                a.name,
                p.name
            );
            declared += usize::from(p.format.is_some());
            if matches!(p.bitwidth, 9 | 48) {
                assert!(
                    p.format.is_some(),
                    "{}.{} declares no @format",
                    a.name,
                    p.name
                );
            }
        }
    }
    assert!(declared >= 11, "{declared} declarations");
}

/// A P4Info changed in `edit`, as the generator would see it.
fn edited(edit: impl FnOnce(&mut weft_p4rt::proto::p4::config::v1::P4Info)) -> weft_p4rt::P4Info {
    let mut raw = info().raw().clone();
    edit(&mut raw);
    weft_p4rt::P4Info::new(raw).expect("still a valid P4Info")
}

fn generate(info: &weft_p4rt::P4Info) -> Result<String, codegen::CodegenError> {
    let constants = codegen::parse_constants(CONSTANTS_P4).expect("constants");
    codegen::generate(info, &constants)
}

#[test]
fn a_table_without_an_owner_fails_generation() {
    let info = edited(|raw| {
        let t = raw
            .tables
            .iter_mut()
            .find(|t| {
                t.preamble
                    .as_ref()
                    .is_some_and(|p| p.id == tables::nexthop_table::ID)
            })
            .expect("nexthop table");
        if let Some(p) = t.preamble.as_mut() {
            p.annotations.retain(|a| !a.starts_with("@weft_owner"));
        }
    });
    let err = generate(&info).expect_err("no owner");
    assert!(
        err.to_string().contains("nexthop_table has no @weft_owner"),
        "{err}"
    );
}

#[test]
fn a_reference_cycle_fails_generation() {
    // nexthop_table's key refers to the routes' targets' table: routes → groups → nexthops → groups.
    let info = edited(|raw| {
        let t = raw
            .tables
            .iter_mut()
            .find(|t| {
                t.preamble
                    .as_ref()
                    .is_some_and(|p| p.id == tables::nexthop_table::ID)
            })
            .expect("nexthop table");
        t.match_fields[0]
            .annotations
            .push("@refers_to(wcmp_group_table , wcmp_group_id)".into());
    });
    let err = generate(&info).expect_err("cycle");
    assert!(err.to_string().contains("cycle"), "{err}");
}

#[test]
fn the_ranks_move_when_the_references_do() {
    // Drop the nexthop's reference to its port: nexthops then rank with the port config, and
    // the generated code differs from the committed one (which the staleness test catches).
    let info = edited(|raw| {
        for a in raw.actions.iter_mut() {
            for p in a.params.iter_mut() {
                p.annotations
                    .retain(|x| !x.starts_with("@refers_to(port_config_table"));
            }
        }
    });
    let ranks = contract::derive_ranks(&info).expect("ranks");
    assert_eq!(ranks.tables[&tables::nexthop_table::ID], 0);
    let fresh = generate(&info).expect("generates");
    let committed = include_str!("generated.rs");
    assert_ne!(codegen::comparable(&fresh), codegen::comparable(committed));
}

#[test]
fn hash_seeds_of_neighbouring_device_ids_are_unrelated_and_stable() {
    // Pinned: the plugin writes it and weft-simulate models it; a change reshuffles every flow.
    assert_eq!(crate::hash_seed(0), 0x7b1d_cdaf);
    let seeds: std::collections::BTreeSet<u32> = (0..1000u64).map(crate::hash_seed).collect();
    assert_eq!(seeds.len(), 1000, "distinct devices, distinct seeds");
    let differing_bits = (crate::hash_seed(1) ^ crate::hash_seed(2)).count_ones();
    assert!((8..=24).contains(&differing_bits), "{differing_bits}");
}
