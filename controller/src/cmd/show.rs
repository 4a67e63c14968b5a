//! `weft show FILE`, `weft show queues FILE`, `weft show pfcwd FILE`.

use clap::{Args, Subcommand};
use weft_topology::summary::{render, summarize};

use super::counters::{PfcwdArgs, QueuesArgs};
use super::intent::load_valid_as;
use super::{Outcome, block_on};
use crate::args::OutputFormat;

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(subcommand)]
    pub what: Option<ShowCommand>,
    /// The intent file.
    #[arg(value_name = "FILE", required = true)]
    pub file: Option<String>,
    /// text or json.
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    /// List port use of every switch.
    #[arg(long)]
    pub switches: bool,
}

#[derive(Subcommand, Debug)]
pub enum ShowCommand {
    /// Queue counters of every switch port from COUNTERS_DB (SONiC's `show queue counters`).
    ///
    /// Examples:
    ///   weft show queues fabric.yaml
    ///   weft show queues fabric.yaml --switch leaf1 --nonzero
    ///   weft show queues fabric.yaml --output json
    #[command(verbatim_doc_comment)]
    Queues(QueuesArgs),
    /// PFC watchdog state of every switch queue (SONiC's `show pfcwd stats`).
    ///
    /// Examples:
    ///   weft show pfcwd fabric.yaml
    ///   weft show pfcwd fabric.yaml --switch 'leaf*' --output json
    ///
    /// From each switch's STATE_DB PFC_WD_STATE, written by its plugin's watchdog.
    #[command(verbatim_doc_comment)]
    Pfcwd(PfcwdArgs),
}

pub fn run(a: &ShowArgs) -> anyhow::Result<Outcome> {
    match &a.what {
        Some(ShowCommand::Queues(q)) => block_on(super::counters::queues(q)),
        Some(ShowCommand::Pfcwd(p)) => block_on(super::counters::pfcwd(p)),
        None => summary(a.file.as_deref().unwrap_or("-"), a.output, a.switches),
    }
}

fn summary(file: &str, output: OutputFormat, all_switches: bool) -> anyhow::Result<Outcome> {
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
