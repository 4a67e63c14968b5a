//! `weft doctor FILE`: every check an operator would make by hand on each switch
//! (`weft_observe::doctor`), with what to do about each problem.

use clap::Args;
use weft_observe::doctor::examine;

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
    /// text or json.
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

pub async fn run(a: &DoctorArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let sel = a.targets.select(&t)?;
    let reports = examine(&t, &sel).await?;
    let findings: usize = reports.iter().map(|r| r.problems()).sum();
    match a.output {
        OutputFormat::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "fabric": t.name,
                "findings": findings,
                "switches": reports,
            }))?
        ),
        OutputFormat::Text => {
            for r in &reports {
                let bad = r.problems();
                outln!(
                    "{} ({}): {}",
                    r.switch,
                    r.db,
                    if bad == 0 {
                        "ok".to_string()
                    } else {
                        format!("{bad} problem(s)")
                    }
                );
                for c in &r.checks {
                    outln!(
                        "  {:<4} {:<11} {}",
                        if c.ok { "ok" } else { "FAIL" },
                        c.check,
                        c.detail
                    );
                }
            }
            outln!(
                "{findings} problem(s) on {} switch(es)",
                reports.iter().filter(|r| r.problems() > 0).count()
            );
        }
    }
    Ok(if findings == 0 {
        Outcome::Ok
    } else {
        Outcome::NotYet
    })
}
