//! `weft doctor FILE`: every check an operator would make by hand on each switch
//! (`weft_observe::doctor`), with what to do about each problem. Exit 0 nothing found, 3
//! problems found, 1 a switch's DB did not answer (nothing could be checked there).

use clap::Args;
use weft_observe::doctor::{examine, findings, unknown};

use super::Outcome;
use super::intent::load_valid_as;
use crate::args::{OutputFormat, Targets};
use crate::outln;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    #[command(flatten)]
    pub targets: Targets,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

pub async fn run(a: &DoctorArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let sel = a.targets.select(&t)?;
    let reports = examine(&t, &sel).await?;
    let found = findings(&reports);
    let unknown = unknown(&reports);
    match a.output {
        o if o.structured() => crate::report::emit(
            o,
            Some(&t.name),
            &serde_json::json!({
                "findings": found,
                "unknown": unknown,
                "switches": reports,
            }),
        )?,
        _ => {
            for r in &reports {
                let bad = r.problems();
                let head = if !r.reachable {
                    crate::style::bad("NOT CHECKED: its DB does not answer")
                } else if bad == 0 {
                    "ok".to_string()
                } else {
                    crate::style::bad(&format!("{bad} problem(s)"))
                };
                outln!("{} ({}): {head}", r.switch, r.db);
                for c in &r.checks {
                    outln!(
                        "  {} {:<11} {}",
                        if c.ok {
                            "ok  ".to_string()
                        } else {
                            crate::style::bad("FAIL")
                        },
                        c.check,
                        c.detail
                    );
                }
            }
            outln!(
                "{} problem(s) on {} switch(es){}",
                found.len(),
                reports
                    .iter()
                    .filter(|r| r.reachable && r.problems() > 0)
                    .count(),
                if unknown.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} switch(es) not checked (DB not answering)",
                        unknown.len()
                    )
                }
            );
        }
    }
    let answer = if found.is_empty() {
        Outcome::Ok
    } else {
        Outcome::NotYet
    };
    Ok(super::verdict(&unknown, answer))
}
