//! Weft's P4 pipeline for BMv2 `simple_switch_grpc`: the compiled artifacts (committed under
//! `p4/build/`, produced by `p4/compile.sh`) and the names and ids of everything in its P4Info.
//!
//! - [`BMV2_JSON`] and [`P4INFO_BINARY`] are what `SetForwardingPipelineConfig` pushes.
//! - [`tables`], [`actions`], [`action_profiles`], [`counters`], [`direct_counters`],
//!   [`registers`], [`packet_metadata`] and [`constants`] are GENERATED from the P4Info and
//!   `p4/include/constants.p4` (see [`codegen`]): other crates use them instead of string
//!   literals of P4 names, so a renamed table breaks the build, not a switch.
//! - [`P4Info`] resolves names known only at run time (for example from a P4RT_TABLE key).
//!
//! The contract these names describe (what each table does, who writes it, units) is in
//! `p4/README.md`.

pub mod codegen;
mod generated;
mod p4info;

pub use generated::{
    action_profiles, actions, constants, counters, direct_counters, packet_metadata, registers,
    tables,
};
pub use p4info::{
    Action, ActionProfile, ActionRef, ActionScope, Counter, CounterUnit, DirectCounter, MatchField,
    MatchKind, P4Info, P4InfoError, PacketMetadata, PacketMetadataField, Param, Register, Table,
    check_width,
};

/// BMv2 JSON of the pipeline (`p4/build/weft.json`).
pub const BMV2_JSON: &str = include_str!("../build/weft.json");
/// P4Info in protobuf text format (`p4/build/weft.p4info.txtpb`).
pub const P4INFO_TEXT: &str = include_str!("../build/weft.p4info.txtpb");
/// P4Info in protobuf JSON form (`p4/build/weft.p4info.json`).
pub const P4INFO_JSON: &str = include_str!("../build/weft.p4info.json");
/// P4Info as a serialized `p4.config.v1.P4Info` message (`p4/build/weft.p4info.bin`).
pub const P4INFO_BINARY: &[u8] = include_bytes!("../build/weft.p4info.bin");
/// The P4 source of the constants the generator reads.
pub const CONSTANTS_P4: &str = include_str!("../include/constants.p4");

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> P4Info {
        P4Info::weft().expect("committed P4Info parses")
    }

    /// The committed generated.rs must be what the committed P4Info gives; WEFT_REGEN=1 rewrites
    /// it instead of failing.
    #[test]
    fn generated_rs_is_up_to_date_with_the_p4info() {
        let constants = codegen::parse_constants(CONSTANTS_P4).expect("constants parse");
        let fresh = codegen::generate(&info(), &constants);
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/generated.rs");
        if std::env::var_os("WEFT_REGEN").is_some() {
            codegen::write_formatted(std::path::Path::new(path), &fresh)
                .expect("write generated.rs");
            return;
        }
        let committed = std::fs::read_to_string(path).expect("read generated.rs");
        assert!(
            codegen::without_whitespace(&committed) == codegen::without_whitespace(&fresh),
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
    fn unknown_names_are_errors_that_say_what_was_looked_up() {
        let info = info();
        let err = info.table("ipv4_lpm").expect_err("no such table");
        assert!(err.to_string().contains("table \"ipv4_lpm\""), "{err}");
        let table = info.table(tables::nexthop_table::NAME).expect("table");
        let err = table.field("dst_mac").expect_err("no such field");
        assert!(err.to_string().contains("nexthop_table"), "{err}");
        let action = info.action(actions::set_nexthop::NAME).expect("action");
        assert!(action.param("mac").is_err());
    }

    #[test]
    fn ids_follow_the_p4runtime_prefixes_of_ids_p4() {
        let info = info();
        for t in &info.tables {
            assert_eq!(t.id >> 24, 0x02, "table {}", t.name);
        }
        for c in &info.counters {
            assert_eq!(c.id >> 24, 0x12, "counter {}", c.name);
        }
        for r in &info.registers {
            assert_eq!(r.id >> 24, 0x16, "register {}", r.name);
        }
        // Every action of ours carries an explicit id (0x01000000 + n), none a p4c hash.
        for a in &info.actions {
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
    fn check_width_rejects_values_wider_than_the_field() {
        assert!(check_width("port", 511, 9).is_ok());
        let err = check_width("port", 512, 9).expect_err("too wide");
        assert!(err.to_string().contains("9 bits"), "{err}");
    }

    #[test]
    fn packet_metadata_is_byte_aligned_for_pi() {
        let info = info();
        for name in [
            packet_metadata::packet_in::NAME,
            packet_metadata::packet_out::NAME,
        ] {
            let m = info.packet_metadata(name).expect("present");
            let bits: u32 = m.fields.iter().map(|f| f.bitwidth).sum();
            assert_eq!(bits % 8, 0, "{name} is {bits} bits");
        }
    }

    #[test]
    fn p4info_text_binary_and_json_describe_the_same_tables() {
        // Cheap cross-check without a protobuf decoder: every table name and id appears in the
        // text form, and the binary form contains every table name.
        for (name, id) in tables::ALL {
            assert!(
                P4INFO_TEXT.contains(&format!("name: \"{name}\"")),
                "{name} not in txtpb"
            );
            assert!(
                P4INFO_TEXT.contains(&format!("id: {id}")),
                "{id} not in txtpb"
            );
            let found = P4INFO_BINARY
                .windows(name.len())
                .any(|w| w == name.as_bytes());
            assert!(found, "{name} not in the binary P4Info");
        }
        assert!(BMV2_JSON.contains(&format!("\"{}\"", tables::ipv4_table::NAME)));
    }
}
