//! `weft show FILE`

use weft_topology::summary::{render, summarize};

use super::{Outcome, OutputFormat, load_valid};

pub fn run(file: &str, output: OutputFormat, all_switches: bool) -> anyhow::Result<Outcome> {
    let Some(topo) = load_valid(file)? else {
        return Ok(Outcome::Invalid);
    };
    let s = summarize(&topo);
    match output {
        OutputFormat::Text => print!("{}", render(&s, all_switches)),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&s)?),
    }
    Ok(Outcome::Ok)
}
