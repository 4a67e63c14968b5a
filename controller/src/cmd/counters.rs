//! `weft show queues FILE` (SONiC's `show queue counters`, across switches) and
//! `weft show pfcwd FILE` (`show pfcwd stats`), read by `weft_observe::counters`.

use clap::Args;
use weft_observe::counters::{Unread, pfcwd_rows, queue_rows};

use super::Outcome;
use super::intent::load_valid_as;
use crate::args::{OutputFormat, Targets};
use crate::outln;

#[derive(Args, Debug)]
pub struct QueuesArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    #[command(flatten)]
    pub targets: Targets,
    /// Only queues that counted something.
    #[arg(long)]
    pub nonzero: bool,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

#[derive(Args, Debug)]
pub struct PfcwdArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    #[command(flatten)]
    pub targets: Targets,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

fn outcome(unknown: &Unread) -> Outcome {
    super::verdict(unknown, Outcome::Ok)
}

pub async fn queues(a: &QueuesArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let (rows, errors) = queue_rows(&t, &a.targets.chosen(&t)?, a.nonzero).await;
    let n = |v: Option<u64>| v.map_or("N/A".to_string(), |v| v.to_string());
    match a.output {
        o if o.structured() => crate::report::emit(
            o,
            Some(&t.name),
            &serde_json::json!({"queues": rows, "unknown": errors}),
        )?,
        _ => {
            outln!(
                "{:<16} {:<12} {:>3} {:>12} {:>14} {:>10} {:>8} {:>8}",
                "switch",
                "port",
                "txq",
                "packets",
                "bytes",
                "ecn_marked",
                "pfc_tx",
                "pfc_rx"
            );
            for r in &rows {
                outln!(
                    "{:<16} {:<12} {:>3} {:>12} {:>14} {:>10} {:>8} {:>8}",
                    r.switch,
                    r.port,
                    format!("UC{}", r.queue),
                    n(r.packets),
                    n(r.bytes),
                    n(r.ecn_marked),
                    n(r.pfc_tx),
                    n(r.pfc_rx)
                );
            }
            super::print_unknown(&errors);
        }
    }
    Ok(outcome(&errors))
}

pub async fn pfcwd(a: &PfcwdArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let (rows, errors) = pfcwd_rows(&t, &a.targets.chosen(&t)?).await;
    match a.output {
        o if o.structured() => crate::report::emit(
            o,
            Some(&t.name),
            &serde_json::json!({"queues": rows, "unknown": errors}),
        )?,
        _ => {
            outln!(
                "{:<16} {:<16} {:<12} {:<8} {:>14} {:>14}  last change",
                "switch",
                "queue",
                "status",
                "action",
                "storm detected",
                "storm restored"
            );
            for r in &rows {
                outln!(
                    "{:<16} {:<16} {} {:<8} {:>14} {:>14}  {}",
                    r.switch,
                    format!("{}:{}", r.port, r.priority),
                    crate::style::state(&format!("{:<12}", r.status)),
                    r.action,
                    r.storms_detected,
                    r.storms_restored,
                    if r.last_change_ms == 0 {
                        "-".to_string()
                    } else {
                        weft_reconcile::lock::ago(r.last_change_ms)
                    }
                );
            }
            if rows.is_empty() && errors.is_empty() {
                outln!(
                    "(no queue watched: no PFC_WD rows in CONFIG_DB; has the intent been applied?)"
                );
            }
            super::print_unknown(&errors);
        }
    }
    Ok(outcome(&errors))
}
