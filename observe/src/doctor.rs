//! `weft doctor`'s checks: every check an operator would make by hand on each switch, with
//! what to do about each problem. [`checks`] judges what was read; [`examine`] reads and
//! judges every selected switch.

use std::collections::BTreeSet;

use serde::Serialize;
use weft_compiler::down::link_state;
use weft_compiler::{Compiler, p4map};
use weft_reconcile::plan::{self, Installed};
use weft_reconcile::planning::read_selected;
use weft_reconcile::targets::chosen;
use weft_sonic_schema::state::PluginStatus;
use weft_topology::{Switch, SwitchIdx, Topology, Transport};

use crate::switch::{self, SwitchView, ViewRead, Want};

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
    /// Whether its DB answered: the other checks ran only then.
    pub reachable: bool,
    pub checks: Vec<Check>,
}

impl SwitchReport {
    /// Checks that failed.
    pub fn problems(&self) -> usize {
        self.checks.iter().filter(|c| !c.ok).count()
    }
}

/// One failed check, as `weft doctor --output json` lists them.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub switch: String,
    pub check: &'static str,
    pub detail: String,
}

/// Every failed check of switches that answered (the others are [`unknown`]).
pub fn findings(reports: &[SwitchReport]) -> Vec<Finding> {
    reports
        .iter()
        .filter(|r| r.reachable)
        .flat_map(|r| {
            r.checks.iter().filter(|c| !c.ok).map(|c| Finding {
                switch: r.switch.clone(),
                check: c.check,
                detail: c.detail.clone(),
            })
        })
        .collect()
}

/// The switches whose DB did not answer: nothing was checked on them.
pub fn unknown(reports: &[SwitchReport]) -> Vec<crate::read::Unknown> {
    reports
        .iter()
        .filter(|r| !r.reachable)
        .map(|r| crate::read::Unknown {
            switch: r.switch.clone(),
            data: "unreachable",
            detail: r
                .checks
                .first()
                .map_or_else(|| "not read".into(), |c| c.detail.clone()),
        })
        .collect()
}

/// Why the checks could not run.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    #[error("the pipeline's P4Info")]
    P4Info(#[source] weft_p4rt::Error),
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

/// The plugin's status row: there, running, Weft's pipeline, agreeing with APPL_STATE_DB, and
/// serving the transport the intent writes over.
fn plugin_checks(v: &SwitchView, transport: &Transport, cookie: u64, checks: &mut Vec<Check>) {
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
    let Some(p) = &v.plugin else { return };
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
    checks.push(transport_check(transport, p));
}

/// How entries reach the plugin: over ZMQ only if it serves an endpoint (its status row counts
/// ZMQ requests only then), else every write waits for answers that never come.
fn transport_check(transport: &Transport, p: &PluginStatus) -> Check {
    match (transport.zmq_endpoint(), p.zmq_requests) {
        (Some(ep), None) => check(
            "transport",
            false,
            format!(
                "entries go over ZMQ to {ep}, but the plugin serves no ZMQ endpoint: start weft-plugin with --zmq-endpoint {ep}, or write over Redis (weft apply/run --transport redis)"
            ),
        ),
        (Some(ep), Some(n)) => check(
            "transport",
            true,
            format!("over ZMQ to {ep} ({n} requests taken)"),
        ),
        (None, Some(_)) => check(
            "transport",
            true,
            "over Redis (APPL_DB); the plugin also serves ZMQ (weft apply/run --transport zmq would use it)",
        ),
        (None, None) => check("transport", true, "over Redis (APPL_DB)"),
    }
}

/// Keys not answered, the switch's clock, and who holds the lock.
fn db_checks(v: &SwitchView, checks: &mut Vec<Check>) {
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
}

/// Whether what switch `si` holds is the intent's (nothing to plan).
pub fn converged(
    t: &Topology,
    info: &weft_p4rt::P4Info,
    compiler: &Compiler,
    si: SwitchIdx,
    installed: &Installed,
) -> Check {
    let sw = &compiler.switches()[si];
    match plan::desired_switch(t, info, sw, si) {
        Ok(d) => {
            let p = plan::diff(
                t,
                si,
                sw,
                d,
                installed,
                &Default::default(),
                plan::Views::Without,
            );
            if p.is_empty() {
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
            }
        }
        Err(e) => check("converged", false, e.to_string()),
    }
}

/// One switch's checks from its view (`None`: not read) and, once its DB answered, whether
/// it converged (computed only then).
pub fn checks(
    sw: &Switch,
    view: Option<&ViewRead>,
    cookie: u64,
    converged: impl FnOnce() -> Check,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let v = match view {
        Some(Ok(v)) => v,
        None | Some(Err(_)) => {
            let e = match view {
                Some(Err(e)) => e.to_string(),
                _ => "not read".into(),
            };
            checks.push(check(
                "db",
                false,
                format!("{e} (is its redis-server running?)"),
            ));
            return checks;
        }
    };
    checks.push(check("db", true, format!("{} answers as Redis", sw.db)));
    plugin_checks(v, &sw.transport, cookie, &mut checks);
    db_checks(v, &mut checks);
    checks.push(converged());
    checks
}

/// Reads every selected switch (`None`: all) and checks it.
pub async fn examine(
    t: &Topology,
    sel: &Option<BTreeSet<SwitchIdx>>,
) -> Result<Vec<SwitchReport>, DoctorError> {
    let want = Want {
        unanswered: true,
        lock: true,
        clock: true,
    };
    let views = switch::read_all(t, sel, want).await;
    let installed = read_selected(t, sel, 64).await;
    let compiler = Compiler::new(t, link_state(t, &Default::default()));
    let info = p4map::pipeline_p4info().map_err(DoctorError::P4Info)?;
    let cookie = expected_cookie();
    Ok(chosen(t, sel)
        .into_iter()
        .map(|si| {
            let s = &t.switches[si];
            SwitchReport {
                switch: s.name.clone(),
                db: s.db.clone(),
                reachable: matches!(views.get(&si), Some(Ok(_))),
                checks: checks(s, views.get(&si), cookie, || {
                    converged(t, &info, &compiler, si, &installed[si])
                }),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_sonic_schema::state::PluginState;

    fn plugin(zmq_requests: Option<u64>) -> PluginStatus {
        PluginStatus {
            zmq_requests,
            ..PluginStatus::fresh(PluginState::Running, "127.0.0.1:9559")
        }
    }

    #[test]
    fn zmq_in_the_intent_to_a_plugin_serving_no_endpoint_fails_and_says_how_to_fix_it() {
        let zmq = Transport::Zmq {
            endpoint: "ipc:///run/weft/f/leaf1/p4rt_zmq.sock".into(),
        };
        let c = transport_check(&zmq, &plugin(None));
        assert!(!c.ok, "{c:?}");
        assert!(
            c.detail
                .contains("--zmq-endpoint ipc:///run/weft/f/leaf1/p4rt_zmq.sock"),
            "{c:?}"
        );
        assert!(c.detail.contains("--transport redis"), "{c:?}");
        assert!(transport_check(&zmq, &plugin(Some(0))).ok);
        // Over Redis the plugin consumes APPL_DB whether or not it also serves ZMQ.
        assert!(transport_check(&Transport::Redis, &plugin(None)).ok);
        let both = transport_check(&Transport::Redis, &plugin(Some(3)));
        assert!(
            both.ok && both.detail.contains("--transport zmq"),
            "{both:?}"
        );
    }
}
