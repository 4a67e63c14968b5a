//! Regenerates `p4/src/generated.rs` from `p4/build/weft.p4info.bin` and
//! `p4/include/constants.p4` (run after `p4/compile.sh`).

use std::path::Path;

use anyhow::Context;

fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Read the files, not the copies compiled into the crate: they may be newer.
    let binary = std::fs::read(root.join("build/weft.p4info.bin"))
        .context("reading p4/build/weft.p4info.bin")?;
    let constants = std::fs::read_to_string(root.join("include/constants.p4"))
        .context("reading p4/include/constants.p4")?;
    let info = weft_p4rt::P4Info::from_bytes(&binary)?;
    let constants = weft_p4::codegen::parse_constants(&constants)?;
    let out = root.join("src/generated.rs");
    weft_p4::codegen::write_formatted(&out, &weft_p4::codegen::generate(&info, &constants)?)
        .with_context(|| format!("writing {}", out.display()))?;
    println!("wrote {}", out.display());
    Ok(())
}
