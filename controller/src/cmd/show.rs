//! `weft show FILE`

use weft_topology::summary::{render, summarize};

use super::{Outcome, OutputFormat, load_valid_as};

pub fn run(file: &str, output: OutputFormat, all_switches: bool) -> anyhow::Result<Outcome> {
    let Some(topo) = load_valid_as(file, output)? else {
        return Ok(Outcome::Invalid);
    };
    let s = summarize(&topo);
    match output {
        OutputFormat::Text => crate::out!("{}", render(&s, all_switches)),
        OutputFormat::Json => crate::outln!("{}", serde_json::to_string_pretty(&s)?),
    }
    Ok(Outcome::Ok)
}
