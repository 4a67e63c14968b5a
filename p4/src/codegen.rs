//! The generator of `src/generated.rs`: a pure function from the P4Info JSON and the text of
//! `include/constants.p4` to Rust source. `WEFT_REGEN=1 cargo test -p weft-p4` or
//! `cargo run -p weft-p4 --bin weft-p4-gen` writes it; a unit test fails when the committed file
//! differs from what the current P4Info gives.

use std::fmt::Write as _;

use crate::p4info::{CounterUnit, MatchKind, P4Info, P4InfoError};

/// Errors of the generator.
#[derive(Debug, thiserror::Error)]
pub enum CodegenError {
    #[error(transparent)]
    P4Info(#[from] P4InfoError),
    #[error("include/constants.p4 line {line}: {message}: {text:?}")]
    Constant {
        line: usize,
        message: &'static str,
        text: String,
    },
}

/// A `const bit<W> NAME = VALUE;` of `include/constants.p4`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P4Constant {
    pub name: String,
    pub bitwidth: u32,
    pub value: u128,
}

/// Every `const bit<W> NAME = VALUE;` line of a P4 source (one declaration per line).
pub fn parse_constants(source: &str) -> Result<Vec<P4Constant>, CodegenError> {
    let mut out = Vec::new();
    for (i, raw) in source.lines().enumerate() {
        let line = raw.trim();
        let Some(rest) = line.strip_prefix("const bit<") else {
            continue;
        };
        let err = |message| CodegenError::Constant {
            line: i + 1,
            message,
            text: raw.to_string(),
        };
        let (width, rest) = rest.split_once('>').ok_or_else(|| err("no closing '>'"))?;
        let bitwidth: u32 = width.trim().parse().map_err(|_| err("bad width"))?;
        let (name, rest) = rest.split_once('=').ok_or_else(|| err("no '='"))?;
        let value = rest
            .trim()
            .strip_suffix(';')
            .ok_or_else(|| err("no ';'"))?
            .trim();
        let value = match value.strip_prefix("0x") {
            Some(hex) => u128::from_str_radix(hex, 16),
            None => value.parse(),
        }
        .map_err(|_| err("value is not a number"))?;
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(err("bad name"));
        }
        if bitwidth == 0 || bitwidth > 128 {
            return Err(err("width out of 1..=128"));
        }
        out.push(P4Constant {
            name: name.to_string(),
            bitwidth,
            value,
        });
    }
    Ok(out)
}

fn rust_uint(bitwidth: u32) -> &'static str {
    match bitwidth {
        0..=8 => "u8",
        9..=16 => "u16",
        17..=32 => "u32",
        33..=64 => "u64",
        _ => "u128",
    }
}

/// A P4Info name as a Rust module name.
fn ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s.to_ascii_lowercase()
}

fn kind_path(kind: MatchKind) -> &'static str {
    match kind {
        MatchKind::Exact => "crate::MatchKind::Exact",
        MatchKind::Lpm => "crate::MatchKind::Lpm",
        MatchKind::Ternary => "crate::MatchKind::Ternary",
        MatchKind::Range => "crate::MatchKind::Range",
        MatchKind::Optional => "crate::MatchKind::Optional",
        MatchKind::Other => "crate::MatchKind::Other",
    }
}

fn unit_path(unit: CounterUnit) -> &'static str {
    match unit {
        CounterUnit::Packets => "crate::CounterUnit::Packets",
        CounterUnit::Bytes => "crate::CounterUnit::Bytes",
        CounterUnit::Both => "crate::CounterUnit::Both",
        CounterUnit::Unspecified => "crate::CounterUnit::Unspecified",
    }
}

fn id_list(ids: &[u32]) -> String {
    ids.iter()
        .map(|id| format!("0x{id:08x}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A small indenting writer; the output is close to rustfmt's, and the staleness test ignores
/// whitespace anyway.
struct Out {
    text: String,
    depth: usize,
}

impl Out {
    fn line(&mut self, s: &str) {
        if s.is_empty() {
            self.text.push('\n');
        } else {
            for _ in 0..self.depth {
                self.text.push_str("    ");
            }
            self.text.push_str(s);
            self.text.push('\n');
        }
    }
    fn open(&mut self, s: &str) {
        self.line(s);
        self.depth += 1;
    }
    fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }
    /// NAME, ALIAS and ID of a P4Info object (ids in hex, with their type prefix).
    fn name_id(&mut self, name: &str, alias: Option<&str>, id: u32) {
        self.line(&format!("pub const NAME: &str = {name:?};"));
        if let Some(alias) = alias {
            self.line(&format!("pub const ALIAS: &str = {alias:?};"));
        }
        self.line(&format!("pub const ID: u32 = 0x{id:08x};"));
    }
    /// NAME and ID of a match field, parameter or metadata field (small ids, decimal).
    fn name_local_id(&mut self, name: &str, id: u32) {
        self.line(&format!("pub const NAME: &str = {name:?};"));
        self.line(&format!("pub const ID: u32 = {id};"));
    }
    fn all(&mut self, doc: &str, items: &[(String, u32)]) {
        self.line(&format!("/// {doc}"));
        self.open("pub const ALL: &[(&str, u32)] = &[");
        for (name, id) in items {
            self.line(&format!("({name:?}, 0x{id:08x}),"));
        }
        self.depth -= 1;
        self.line("];");
    }
}

/// Rust source of `src/generated.rs` for this P4Info and these constants.
pub fn generate(info: &P4Info, constants: &[P4Constant]) -> String {
    let mut o = Out {
        text: String::new(),
        depth: 0,
    };
    o.line("// @generated by weft-p4 (src/codegen.rs) from p4/build/weft.p4info.json and");
    o.line("// p4/include/constants.p4. DO NOT EDIT: regenerate with `WEFT_REGEN=1 cargo test -p");
    o.line("// weft-p4` or `cargo run -p weft-p4 --bin weft-p4-gen`.");
    o.line("");
    o.line("//! Names and P4Runtime ids of every object in Weft's P4Info, and the pipeline's");
    o.line("//! constants. Use these instead of string literals of P4 names.");

    // Tables.
    o.line("");
    o.line(
        "/// Tables: `NAME` (fully qualified), `ALIAS`, `ID`, `SIZE`, allowed `ACTION_IDS`, key",
    );
    o.line("/// `fields`.");
    o.open("pub mod tables {");
    for t in &info.tables {
        o.line(&format!("/// `{}`", t.name));
        o.open(&format!("pub mod {} {{", ident(&t.alias)));
        o.name_id(&t.name, Some(&t.alias), t.id);
        o.line(&format!("pub const SIZE: u64 = {};", t.size));
        let ids: Vec<u32> = t.actions.iter().map(|a| a.id).collect();
        o.line(&format!(
            "pub const ACTION_IDS: &[u32] = &[{}];",
            id_list(&ids)
        ));
        let profile = match t.implementation_id {
            0 => "None".to_string(),
            id => format!("Some(0x{id:08x})"),
        };
        o.line(&format!(
            "pub const ACTION_PROFILE_ID: Option<u32> = {profile};"
        ));
        o.line(&format!(
            "pub const NEEDS_PRIORITY: bool = {};",
            t.needs_priority()
        ));
        o.line("/// Key fields.");
        o.open("pub mod fields {");
        for f in &t.match_fields {
            o.line(&format!("/// {:?}, {} bits", f.kind, f.bitwidth));
            o.open(&format!("pub mod {} {{", ident(&f.name)));
            o.name_local_id(&f.name, f.id);
            o.line(&format!("pub const BITWIDTH: u32 = {};", f.bitwidth));
            o.line(&format!(
                "pub const KIND: crate::MatchKind = {};",
                kind_path(f.kind)
            ));
            o.close();
        }
        o.close();
        o.close();
    }
    let all: Vec<(String, u32)> = info.tables.iter().map(|t| (t.name.clone(), t.id)).collect();
    o.all("Every table: (fully qualified name, id).", &all);
    o.close();

    // Actions.
    o.line("");
    o.line("/// Actions: `NAME`, `ALIAS`, `ID`, `params` (each `NAME`, `ID`, `BITWIDTH`).");
    o.open("pub mod actions {");
    for a in &info.actions {
        o.line(&format!("/// `{}`", a.name));
        o.open(&format!("pub mod {} {{", ident(&a.alias)));
        o.name_id(&a.name, Some(&a.alias), a.id);
        o.line("/// Parameters.");
        o.open("pub mod params {");
        for p in &a.params {
            o.line(&format!("/// {} bits", p.bitwidth));
            o.open(&format!("pub mod {} {{", ident(&p.name)));
            o.name_local_id(&p.name, p.id);
            o.line(&format!("pub const BITWIDTH: u32 = {};", p.bitwidth));
            o.close();
        }
        o.close();
        o.close();
    }
    let all: Vec<(String, u32)> = info
        .actions
        .iter()
        .map(|t| (t.name.clone(), t.id))
        .collect();
    o.all("Every action: (fully qualified name, id).", &all);
    o.close();

    // Action profiles.
    o.line("");
    o.line("/// Action profiles and selectors.");
    o.open("pub mod action_profiles {");
    for p in &info.action_profiles {
        o.line(&format!("/// `{}`", p.name));
        o.open(&format!("pub mod {} {{", ident(&p.alias)));
        o.name_id(&p.name, Some(&p.alias), p.id);
        o.line(&format!(
            "pub const WITH_SELECTOR: bool = {};",
            p.with_selector
        ));
        o.line(&format!("pub const SIZE: u64 = {};", p.size));
        o.line(&format!(
            "pub const MAX_GROUP_SIZE: u32 = {};",
            p.max_group_size
        ));
        o.line(&format!(
            "pub const TABLE_IDS: &[u32] = &[{}];",
            id_list(&p.table_ids)
        ));
        o.close();
    }
    o.close();

    // Counters.
    o.line("");
    o.line("/// Indexed counters: `NAME`, `ALIAS`, `ID`, `SIZE`, `UNIT`.");
    o.open("pub mod counters {");
    for c in &info.counters {
        o.line(&format!("/// `{}`", c.name));
        o.open(&format!("pub mod {} {{", ident(&c.alias)));
        o.name_id(&c.name, Some(&c.alias), c.id);
        o.line(&format!("pub const SIZE: u64 = {};", c.size));
        o.line(&format!(
            "pub const UNIT: crate::CounterUnit = {};",
            unit_path(c.unit)
        ));
        o.close();
    }
    let all: Vec<(String, u32)> = info
        .counters
        .iter()
        .map(|t| (t.name.clone(), t.id))
        .collect();
    o.all("Every indexed counter: (fully qualified name, id).", &all);
    o.close();

    o.line("");
    o.line("/// Direct counters: `NAME`, `ALIAS`, `ID`, `TABLE_ID`, `UNIT`.");
    o.open("pub mod direct_counters {");
    for c in &info.direct_counters {
        o.line(&format!("/// `{}`", c.name));
        o.open(&format!("pub mod {} {{", ident(&c.alias)));
        o.name_id(&c.name, Some(&c.alias), c.id);
        o.line(&format!("pub const TABLE_ID: u32 = 0x{:08x};", c.table_id));
        o.line(&format!(
            "pub const UNIT: crate::CounterUnit = {};",
            unit_path(c.unit)
        ));
        o.close();
    }
    o.close();

    // Registers.
    o.line("");
    o.line("/// Registers (data-plane state: BMv2's P4Runtime server cannot read or write them).");
    o.open("pub mod registers {");
    for r in &info.registers {
        o.line(&format!("/// `{}`", r.name));
        o.open(&format!("pub mod {} {{", ident(&r.alias)));
        o.name_id(&r.name, Some(&r.alias), r.id);
        o.line(&format!("pub const SIZE: u64 = {};", r.size));
        o.line(&format!("pub const BITWIDTH: u32 = {};", r.bitwidth));
        o.close();
    }
    o.close();

    // Packet metadata.
    o.line("");
    o.line("/// Controller packet metadata (packet-in and packet-out headers).");
    o.open("pub mod packet_metadata {");
    for m in &info.packet_metadata {
        o.line(&format!("/// `{}`", m.name));
        o.open(&format!("pub mod {} {{", ident(&m.name)));
        o.name_id(&m.name, None, m.id);
        o.line("/// Metadata fields, in header order.");
        o.open("pub mod fields {");
        for f in &m.fields {
            o.line(&format!("/// {} bits", f.bitwidth));
            o.open(&format!("pub mod {} {{", ident(&f.name)));
            o.name_local_id(&f.name, f.id);
            o.line(&format!("pub const BITWIDTH: u32 = {};", f.bitwidth));
            o.close();
        }
        o.close();
        o.close();
    }
    o.close();

    // Constants.
    o.line("");
    o.line(
        "/// Constants of `p4/include/constants.p4` (modes, drop reasons, ports, sessions, ...).",
    );
    o.open("pub mod constants {");
    for c in constants {
        o.line(&format!(
            "pub const {}: {} = {};",
            c.name,
            rust_uint(c.bitwidth),
            c.value
        ));
    }
    o.line("/// Drop reasons by counter index, for naming `drop_reason_counter` entries.");
    o.open("pub const DROP_REASONS: &[(u8, &str)] = &[");
    for c in constants {
        if let Some(reason) = c.name.strip_prefix("DROP_REASON_") {
            let mut line = String::new();
            let _ = write!(line, "({}, {:?}),", c.value, reason.to_ascii_lowercase());
            o.line(&line);
        }
    }
    o.depth -= 1;
    o.line("];");
    o.close();
    o.text
}

/// Writes the generated source to `path`, then formats it with `rustfmt` when rustfmt is
/// installed (it picks up the workspace's rustfmt.toml), so `cargo fmt --check` stays clean.
pub fn write_formatted(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)?;
    // Best effort: without rustfmt the file is still correct, only not canonically formatted.
    let _ = std::process::Command::new("rustfmt")
        .arg("--edition")
        .arg("2024")
        .arg(path)
        .status();
    Ok(())
}

/// `s` without any whitespace: the staleness test compares this, so `cargo fmt` on the generated
/// file does not make it "stale".
pub fn without_whitespace(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_constants_reads_typed_consts_and_skips_other_lines() {
        let src = "// x\nconst bit<9> CPU_PORT = 255;\n#define X 1\n  const bit<48> MAC = 0x0180c2000001;\n";
        let c = parse_constants(src).expect("parses");
        assert_eq!(
            c,
            vec![
                P4Constant {
                    name: "CPU_PORT".into(),
                    bitwidth: 9,
                    value: 255
                },
                P4Constant {
                    name: "MAC".into(),
                    bitwidth: 48,
                    value: 0x0180c2000001
                },
            ]
        );
    }

    #[test]
    fn parse_constants_rejects_a_malformed_line_with_its_number() {
        let err = parse_constants("\nconst bit<8> A = zz;\n").expect_err("bad value");
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn ident_makes_module_names() {
        assert_eq!(ident("routing.set_nexthop_id"), "routing_set_nexthop_id");
        assert_eq!(ident("9x"), "_9x");
    }
}
