//! Weft's P4 pipeline for BMv2 `simple_switch_grpc`: the compiled artifacts (committed under
//! `p4/build/`, produced by `p4/compile.sh`), the table contract, and everything generated from
//! the P4Info.
//!
//! - [`BMV2_JSON`] and [`P4INFO_BINARY`] are what `SetForwardingPipelineConfig` pushes;
//!   [`p4info`] is the P4Info parsed into the run-time model (`weft_p4rt::P4Info`), the one
//!   model every crate uses.
//! - [`tables`], [`actions`], [`action_profiles`], [`counters`], [`direct_counters`],
//!   [`registers`], [`packet_metadata`] and [`constants`] are GENERATED from the P4Info and
//!   `p4/include/constants.p4` (see [`codegen`]): other crates use them instead of string
//!   literals of P4 names, so a renamed table breaks the build, not a switch.
//! - [`contract`]: who writes each table, what refers to what, and the write order derived from
//!   it (`tables::<t>::WRITE_RANK`); [`contract::references`] / [`contract::identities`] list
//!   an entry's references for the plugin's NOT_FOUND / IN_USE answers.
//! - `tables::<t>::{Key, Action, entry}` (tables the controller writes): typed P4RT_TABLE
//!   entries; [`wire`] is what they are made of.
//!
//! The contract these names describe (what each table does, who writes it, units) is in
//! `p4/README.md`.

pub mod codegen;
pub mod contract;
mod generated;
pub mod wire;

pub use generated::{
    action_profiles, actions, constants, counters, direct_counters, packet_metadata, registers,
    tables,
};
/// The types of the generated `KIND` and `UNIT` constants.
pub use weft_p4rt::{CounterUnit, MatchKind};

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

/// The pipeline's P4Info in the run-time model (annotations parsed and references resolved).
pub fn p4info() -> Result<weft_p4rt::P4Info, weft_p4rt::Error> {
    weft_p4rt::P4Info::from_bytes(P4INFO_BINARY)
}

/// The multipath hash seed of a switch (`set_switch_config`'s `hash_seed`, see
/// `p4/include/multipath.p4`): splitmix64's finaliser of the device id, low 32 bits. Distinct
/// switches get unrelated seeds, so HASH mode picks members independently hop after hop
/// instead of repeating the previous switch's choice (ECMP polarisation). Seed 0 would be the
/// unseeded hash; no device id maps to it in practice, and the pipeline uses `seed | 1` anyway.
pub fn hash_seed(device_id: u64) -> u32 {
    let mut z = device_id.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

#[cfg(test)]
mod tests;
