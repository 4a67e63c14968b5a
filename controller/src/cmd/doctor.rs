//! `weft doctor FILE`: every check an operator would make by hand on each switch, with what to
//! do about each problem.

use std::collections::BTreeSet;
use std::sync::Arc;

use anyhow::Context;
use serde::Serialize;
use weft_compiler::{Compiler, p4map};
use weft_reconcile::plan;
use weft_topology::SwitchIdx;

use super::fabric::{self, Want};
use super::plan::{link_state, read_selected};
use super::{Outcome, OutputFormat, load_valid_as};
use crate::cli::Targets;
use crate::outln;

/// Clocks further apart than this are a finding.
pub const MAX_CLOCK_SKEW_MS: i64 = 1_000;

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub check: &'static str,
    pub ok: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SwitchReport {
    pub switch: String,
    pub db: String,
    pub checks: Vec<Check>,
}

/// The cookie of Weft's pipeline as the plugin pushes it.
pub fn expected_cookie() -> u64 {
    weft_p4rt::cookie(weft_p4::P4INFO_BINARY, weft_p4::BMV2_JSON.as_bytes())
}

fn check(name: &'static str, ok: bool, detail: impl Into<String>) -> Check {
    Check {
        check: name,
        ok,
        detail: detail.into(),
    }
}

pub async fn run(file: &str, targets: &Targets, output: OutputFormat) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(file, output)? else {
        return Ok(Outcome::Invalid);
    };
    let sel = crate::targets::select(&t, targets)?;
    let views = fabric::read_all(
        &t,
        &sel,
        Want {
            unanswered: true,
            lock: true,
            clock: true,
        },
    )
    .await;
    let installed = read_selected(&t, &sel, 64).await;
    let compiler = Compiler::new(&t, link_state(&t, &Default::default()));
    let info = Arc::new(p4map::pipeline_p4info().context("the pipeline's P4Info")?);
    let cookie = expected_cookie();
    let mut reports = Vec::new();
    let chosen: BTreeSet<SwitchIdx> = sel
        .clone()
        .unwrap_or_else(|| (0..t.switches.len()).collect());
    for si in chosen {
        let s = &t.switches[si];
        let mut checks = Vec::new();
        match views.get(&si) {
            None | Some(Err(_)) => {
                let e = match views.get(&si) {
                    Some(Err(e)) => e.clone(),
                    _ => "not read".into(),
                };
                checks.push(check(
                    "db",
                    false,
                    format!("{e} (is its redis-server running?)"),
                ));
            }
            Some(Ok(v)) => {
                checks.push(check("db", true, format!("{} answers as Redis", s.db)));
                match &v.plugin {
                    None => checks.push(check(
                        "plugin",
                        false,
                        "no WEFT_PLUGIN|status row: no live plugin (the row expires 5s after it dies); start weft-plugin for this switch",
                    )),
                    Some(p) if !p.in_sync() => checks.push(check(
                        "plugin",
                        false,
                        format!(
                            "plugin pid {} is {} (not primary and synced): APPL_STATE_DB is not what the switch holds",
                            p.pid,
                            p.state.as_str()
                        ),
                    )),
                    Some(p) => checks.push(check(
                        "plugin",
                        true,
                        format!("pid {} running, primary and synced", p.pid),
                    )),
                }
                if let Some(p) = &v.plugin {
                    checks.push(if p.pipeline_cookie == cookie {
                        check("pipeline", true, format!("Weft's pipeline (cookie {cookie:#x})"))
                    } else if p.pipeline_cookie == 0 {
                        check("pipeline", false, "no pipeline pushed yet (cookie 0)")
                    } else {
                        check(
                            "pipeline",
                            false,
                            format!(
                                "cookie {:#x}, not this weft's pipeline ({cookie:#x}): plugin and controller from different builds?",
                                p.pipeline_cookie
                            ),
                        )
                    });
                    let acked = v.acknowledged as u64;
                    checks.push(if p.installed_keys == acked {
                        check(
                            "drift",
                            true,
                            format!("APPL_STATE_DB and the plugin agree on {acked} entries"),
                        )
                    } else {
                        check(
                            "drift",
                            false,
                            format!(
                                "APPL_STATE_DB holds {acked} entries, the plugin says the switch holds {}",
                                p.installed_keys
                            ),
                        )
                    });
                }
                let stuck = v.unanswered.len() as u64 + v.queued;
                checks.push(if stuck == 0 {
                    check("unanswered", true, "every key written was answered")
                } else {
                    check(
                        "unanswered",
                        false,
                        format!(
                            "{} keys not popped by the plugin, {} written and not acknowledged (refused or unanswered){}",
                            v.queued,
                            v.unanswered.len(),
                            v.unanswered
                                .first()
                                .map_or(String::new(), |k| format!(", e.g. {k}"))
                        ),
                    )
                });
                match v.clock_skew_ms {
                    Some(d) if d.abs() <= MAX_CLOCK_SKEW_MS => {
                        checks.push(check("clock", true, format!("{d:+} ms from this machine")))
                    }
                    Some(d) => checks.push(check(
                        "clock",
                        false,
                        format!("{d:+} ms from this machine (more than {MAX_CLOCK_SKEW_MS} ms: expiries and timestamps lie)"),
                    )),
                    None => checks.push(check("clock", false, "Redis TIME did not answer")),
                }
                if let Some(l) = &v.lock {
                    checks.push(check("lock", true, format!("held by {}", l.holder())));
                }
                let sw = &compiler.switches()[si];
                match plan::desired_switch(&t, &info, sw, si) {
                    Ok(d) => {
                        let p = plan::diff(
                            &t,
                            si,
                            sw,
                            d,
                            &installed[si],
                            &Default::default(),
                            plan::Views::Without,
                        );
                        checks.push(if p.is_empty() {
                            check("converged", true, "installed state is the intent's")
                        } else {
                            check(
                                "converged",
                                false,
                                format!(
                                    "{} changes to make (weft plan shows them; weft apply makes them)",
                                    p.changes()
                                ),
                            )
                        });
                    }
                    Err(e) => checks.push(check("converged", false, e.to_string())),
                }
            }
        }
        reports.push(SwitchReport {
            switch: s.name.clone(),
            db: s.db.clone(),
            checks,
        });
    }
    let findings: usize = reports
        .iter()
        .map(|r| r.checks.iter().filter(|c| !c.ok).count())
        .sum();
    match output {
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
                let bad = r.checks.iter().filter(|c| !c.ok).count();
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
                reports
                    .iter()
                    .filter(|r| r.checks.iter().any(|c| !c.ok))
                    .count()
            );
        }
    }
    Ok(if findings == 0 {
        Outcome::Ok
    } else {
        Outcome::NotYet
    })
}
