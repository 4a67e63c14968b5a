//! Shared setup of the BMv2 tests: the switch (harness from weft-tests), the pipeline under
//! test, and entries synthesised from its P4Info so every table, action profile and counter
//! of whatever pipeline is pushed gets exercised without naming P4 objects here.

#![allow(dead_code)]

pub use weft_tests::bmv2;

use std::path::PathBuf;
use std::time::Duration;

use bmv2::{Bmv2, Bmv2Options};
use weft_p4rt::proto::p4::v1::{ActionProfileGroup, ActionProfileMember, TableEntry, Update};
use weft_p4rt::{Client, ClientConfig, MatchKind, P4Info, PipelineConfig, TableInfo};

pub const T: Duration = Duration::from_secs(60);
/// The pipeline's CPU port (Weft's `CPU_PORT`); BMv2 must be started with the same.
pub const CPU_PORT: u32 = 255;

/// The pipeline under test: `WEFT_P4RT_TEST_P4INFO` + `WEFT_P4RT_TEST_JSON`, else Weft's
/// committed p4/build/weft.{p4info.bin,json}.
pub fn pipeline_files() -> (PathBuf, PathBuf) {
    match (
        std::env::var_os("WEFT_P4RT_TEST_P4INFO"),
        std::env::var_os("WEFT_P4RT_TEST_JSON"),
    ) {
        (Some(i), Some(j)) => (i.into(), j.into()),
        _ => {
            let build = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../p4/build");
            (build.join("weft.p4info.bin"), build.join("weft.json"))
        }
    }
}

/// BMv2 binary and pipeline, or `None` after printing SKIPPED (a failure where BMv2 is
/// installed, unless `WEFT_REQUIRE_BMV2=0`).
pub fn setup(test: &str) -> Option<(PathBuf, PipelineConfig)> {
    let bin = bmv2::bmv2_or_skip(test)?;
    let (p4info, json) = pipeline_files();
    if !p4info.is_file() || !json.is_file() {
        let why = format!(
            "pipeline {} / {} not built",
            p4info.display(),
            json.display()
        );
        bmv2::skip_or_fail(test, &why);
        return None;
    }
    let pipeline = PipelineConfig::from_files(&p4info, &json).expect("pipeline files");
    Some((bin, pipeline))
}

pub fn start_switch(bin: &std::path::Path) -> Bmv2 {
    Bmv2::start(
        bin,
        Bmv2Options {
            cpu_port: Some(CPU_PORT),
            ..Default::default()
        },
    )
    .expect("start BMv2")
}

pub fn client_config(sw: &Bmv2, election_id: u128) -> ClientConfig {
    let mut c = ClientConfig::new(sw.grpc_addr(), sw.device_id(), election_id);
    c.reconnect_initial = Duration::from_millis(50);
    c.reconnect_max = Duration::from_millis(500);
    c
}

/// A primary client with the pipeline pushed.
pub async fn primary_with_pipeline(sw: &Bmv2, pipeline: &PipelineConfig) -> Client {
    let client = Client::connect(client_config(sw, 10)).expect("connect");
    client.wait_primary(T).await.expect("primary");
    client.set_pipeline(pipeline).await.expect("push pipeline");
    client
}

/// A value of `bitwidth` bits derived from `seed`, never zero.
pub fn value(bitwidth: i32, seed: u64) -> u128 {
    let bw = bitwidth.clamp(1, 64) as u32;
    let max: u128 = (1u128 << bw) - 1;
    1 + u128::from(seed) % max.max(1)
}

/// Same width, different value (bit 0 flipped, so also for 1-bit fields).
pub fn other_value(bitwidth: i32, seed: u64) -> u128 {
    value(bitwidth, seed) ^ 1
}

fn bytes_of(v: u128, bitwidth: i32) -> Vec<u8> {
    let n = ((bitwidth.max(1) + 7) / 8) as usize;
    v.to_be_bytes()[16 - n.min(16)..].to_vec()
}

/// One synthesised entry of a table, with what it needs first (members, groups) and a
/// modified variant.
#[derive(Debug, Clone)]
pub struct Planned {
    pub table: String,
    pub prerequisites: Vec<Update>,
    pub entry: TableEntry,
    pub modified: TableEntry,
    /// Members and groups to delete after the entry (reverse dependency order).
    pub cleanup: Vec<Update>,
}

/// Tables the tests can write: not const, with match fields, with an action they can use.
pub fn writable_tables(info: &P4Info) -> Vec<&TableInfo> {
    info.tables()
        .iter()
        .filter(|t| {
            !t.is_const && !t.match_fields.is_empty() && t.entry_action_ids().next().is_some()
        })
        .filter(|t| t.match_fields.iter().all(|f| f.kind != MatchKind::Other))
        .collect()
}

/// An entry for `table` built with the typed builders from its P4Info, all names looked up.
pub fn plan(info: &P4Info, table: &TableInfo, seed: u64) -> Planned {
    let action_id = table.entry_action_ids().next().expect("usable action");
    let action = info.action_by_id(action_id).expect("action");
    let call = |modified: bool| {
        let mut c = info.action_call(&action.name).expect("action call");
        for p in &action.params {
            let v = if modified {
                other_value(p.bitwidth, seed)
            } else {
                value(p.bitwidth, seed)
            };
            c = c.param(&p.name, bytes_of(v, p.bitwidth)).expect("param");
        }
        c
    };
    let key = || {
        let mut b = info.table_entry(&table.name).expect("table");
        for f in &table.match_fields {
            let v = bytes_of(value(f.bitwidth, seed + u64::from(f.id)), f.bitwidth);
            let full = bytes_of(u128::MAX >> (128 - f.bitwidth.clamp(1, 128)), f.bitwidth);
            b = match f.kind {
                MatchKind::Exact => b.exact(&f.name, v),
                MatchKind::Lpm => b.lpm(&f.name, v, f.bitwidth as u32),
                MatchKind::Ternary => b.ternary(&f.name, v, full),
                MatchKind::Range => {
                    let lo = value(f.bitwidth, seed) & !1;
                    b.range(
                        &f.name,
                        bytes_of(lo, f.bitwidth),
                        bytes_of(lo | 1, f.bitwidth),
                    )
                }
                MatchKind::Optional => b.optional(&f.name, v),
                MatchKind::Other => unreachable!("filtered out"),
            }
            .expect("match field");
        }
        if table.needs_priority() {
            b.priority(10)
        } else {
            b
        }
    };

    let Some(profile_id) = table.action_profile_id else {
        let entry = key()
            .action(call(false))
            .and_then(|b| b.build())
            .expect("entry");
        let modified = key()
            .action(call(true))
            .and_then(|b| b.build())
            .expect("entry");
        return Planned {
            table: table.name.clone(),
            prerequisites: vec![],
            entry,
            modified,
            cleanup: vec![],
        };
    };

    let profile = info.action_profile_by_id(profile_id).expect("profile");
    let m1 = (seed as u32) * 2 + 1;
    let m2 = m1 + 1;
    let member = |id: u32, modified: bool| -> ActionProfileMember {
        info.member(&profile.name, id, call(modified))
            .expect("member")
    };
    let mut prerequisites = vec![
        Update::insert(member(m1, false)),
        Update::insert(member(m2, true)),
    ];
    let mut cleanup = vec![];
    let (entry, modified) = if profile.with_selector {
        let gid = seed as u32 + 1;
        let group: ActionProfileGroup = info
            .group(&profile.name, gid)
            .expect("group")
            .member(m1, 1, Some(1u32))
            .member(m2, 2, Some(2u32))
            .build();
        prerequisites.push(Update::insert(group.clone()));
        cleanup.push(Update::delete(group));
        let e = key().group_id(gid).and_then(|b| b.build()).expect("entry");
        let m = key().member_id(m2).and_then(|b| b.build()).expect("entry");
        (e, m)
    } else {
        let e = key().member_id(m1).and_then(|b| b.build()).expect("entry");
        let m = key().member_id(m2).and_then(|b| b.build()).expect("entry");
        (e, m)
    };
    cleanup.push(Update::delete(member(m1, false)));
    cleanup.push(Update::delete(member(m2, true)));
    Planned {
        table: table.name.clone(),
        prerequisites,
        entry,
        modified,
        cleanup,
    }
}

/// The packet_in header as it would sit in front of a payload: fields packed big-endian in
/// P4Info order (so a packet-out to the CPU port comes back as a packet-in carrying them).
pub fn pack_header(fields: &[(i32, u128)]) -> Vec<u8> {
    let total: i32 = fields.iter().map(|(w, _)| *w).sum();
    assert!(
        total % 8 == 0,
        "controller header of {total} bits is not byte aligned"
    );
    let mut acc: Vec<bool> = Vec::new();
    for (w, v) in fields {
        for bit in (0..*w).rev() {
            acc.push((v >> bit) & 1 == 1);
        }
    }
    acc.chunks(8)
        .map(|c| c.iter().fold(0u8, |b, bit| (b << 1) | u8::from(*bit)))
        .collect()
}

/// The table benchmarks and bulk tests fill: the largest table keyed by one LPM or exact field
/// of ≥ 24 bits with a direct action that has parameters.
#[derive(Debug, Clone)]
pub struct BulkTable {
    pub table_id: u32,
    pub table: String,
    pub field: String,
    pub field_bits: i32,
    pub kind: MatchKind,
    pub action: String,
    pub params: Vec<(String, i32)>,
}

pub fn bench_table(info: &P4Info) -> Option<BulkTable> {
    info.tables()
        .iter()
        .filter(|t| {
            !t.is_const
                && t.action_profile_id.is_none()
                && t.size >= 5000
                && t.match_fields.len() == 1
        })
        .filter(|t| {
            matches!(t.match_fields[0].kind, MatchKind::Lpm | MatchKind::Exact)
                && t.match_fields[0].bitwidth >= 24
        })
        .filter_map(|t| {
            let action = t
                .entry_action_ids()
                .filter_map(|a| info.action_by_id(a).ok())
                .find(|a| !a.params.is_empty())?;
            Some((t, action))
        })
        .max_by_key(|(t, _)| t.size)
        .map(|(t, a)| BulkTable {
            table_id: t.id,
            table: t.name.clone(),
            field: t.match_fields[0].name.clone(),
            field_bits: t.match_fields[0].bitwidth,
            kind: t.match_fields[0].kind,
            action: a.name.clone(),
            params: a
                .params
                .iter()
                .map(|p| (p.name.clone(), p.bitwidth))
                .collect(),
        })
}

impl BulkTable {
    /// Entry `i`: key 10.0.0.0 + i (full prefix when LPM), every param = i masked to its width.
    pub fn entry(&self, info: &P4Info, i: u32) -> TableEntry {
        let key = (10u128 << (self.field_bits - 8)) + u128::from(i);
        let key = bytes_of(key, self.field_bits);
        let b = info.table_entry(&self.table).expect("table");
        let b = match self.kind {
            MatchKind::Lpm => b.lpm(&self.field, key, self.field_bits as u32),
            _ => b.exact(&self.field, key),
        }
        .expect("key");
        let mut call = info.action_call(&self.action).expect("action");
        for (name, bits) in &self.params {
            let mask = (1u128 << (*bits).clamp(1, 64)) - 1;
            call = call
                .param(name, bytes_of(u128::from(i) & mask, *bits))
                .expect("param");
        }
        b.action(call).and_then(|b| b.build()).expect("entry")
    }
}
