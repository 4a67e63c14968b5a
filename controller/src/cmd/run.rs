//! `weft run FILE` and `weft status FILE`: the fabric as `show interfaces status` would show it
//! across switches (both ends of every link from STATE_DB, whether `weft run` uses it), each
//! switch's plugin, unanswered keys and lock, the last reconvergence, and tuned vs static ECN
//! thresholds from STATE_DB `WEFT_ECN_TUNING`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use weft_sonic_db::{SonicDb, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::EcnTuningState;

use super::fabric::{self, SwitchView, Want};
use super::{Outcome, OutputFormat, load_valid_as};
use crate::{out, outln};
use weft_reconcile::core::LinkStatus;
use weft_reconcile::ha::{HaOptions, HaView, parse_endpoints, read_view};
use weft_reconcile::lock::{LockError, LockOptions, ago};
use weft_reconcile::run::{self, DaemonStatus, RunError, RunOptions};

#[derive(Debug, Clone)]
pub struct RunArgs {
    pub resync: Duration,
    pub timeout: Duration,
    pub events_log: Option<PathBuf>,
    pub status_file: Option<PathBuf>,
    pub parallelism: usize,
    pub steal: bool,
    /// `--ha` endpoints, `--id`, `--ha-ttl`.
    pub ha: Option<(String, String, Duration)>,
    /// `--metrics`: serve Prometheus metrics here.
    pub metrics: Option<String>,
}

/// `weft run`'s metrics, fed by the reconciler's loop.
struct Observer(weft_telemetry::ControllerMetrics);

impl run::RunObserver for Observer {
    fn port_event(&self, switch: &str) {
        self.0.port_event(switch);
    }
    fn writing(&self, switch: &str, entries: usize) {
        self.0.written(switch, entries as u64, 0);
    }
    fn answered(&self, switch: &str, failed: usize) {
        self.0.written(switch, 0, failed as u64);
    }
    fn switch_state(&self, switch: &str, state: &weft_reconcile::core::SwitchState) {
        use weft_reconcile::core::SwitchState as S;
        let reachable = !matches!(state, S::Unreachable { .. } | S::NotReady { .. });
        self.0
            .switch_state(switch, reachable, matches!(state, S::Converged));
    }
    fn reconverged(&self, rec: &weft_reconcile::core::Reconvergence) {
        self.0.reconverged(rec.total_ms);
    }
    fn links(&self, links: &[LinkStatus]) {
        let down = links.iter().filter(|l| !l.in_use).count();
        let suppressed = links.iter().filter(|l| l.suppressed).count();
        self.0.links(links.len(), down, suppressed);
    }
}

pub async fn run(file: &str, a: RunArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(file, OutputFormat::Text)? else {
        return Ok(Outcome::Invalid);
    };
    let ha = match &a.ha {
        Some((eps, id, ttl)) => {
            if id.is_empty() || id.contains('/') {
                anyhow::bail!("--id {id:?}: a replica needs a name without '/'");
            }
            Some(HaOptions {
                endpoints: parse_endpoints(eps)?,
                id: id.clone(),
                ttl: *ttl,
            })
        }
        None => None,
    };
    // Replicas on one host each have their own status file.
    let status_file = a.status_file.unwrap_or_else(|| match &ha {
        Some(h) => run::default_status_file(&format!("{}.{}", t.name, h.id)),
        None => run::default_status_file(&t.name),
    });
    if let Some(prev) = read_daemon_status(&status_file)
        && prev.running
        && prev.status.pid != std::process::id()
    {
        anyhow::bail!(
            "weft run pid {} (host {}) is already running for fabric {} (status file {})",
            prev.status.pid,
            prev.status.host,
            t.name,
            status_file.display()
        );
    }
    let info = std::sync::Arc::new(
        weft_compiler::p4map::pipeline_p4info().context("the pipeline's P4Info")?,
    );
    let observer = Observer(weft_telemetry::ControllerMetrics::new(
        t.switches.iter().map(|s| s.name.as_str()),
    ));
    let _server = match &a.metrics {
        Some(addr) => Some(
            weft_telemetry::serve(addr, observer.0.registry())
                .await
                .context("weft run --metrics")?,
        ),
        None => None,
    };
    let r = run::run_observed(
        &t,
        info,
        RunOptions {
            resync: a.resync,
            timeout: a.timeout,
            status_file,
            events_log: a.events_log,
            parallel: a.parallelism.max(1),
            lock: Some(LockOptions::new(
                &match &ha {
                    Some(h) => format!("weft run --ha --id {}", h.id),
                    None => "weft run".to_string(),
                },
                a.steal,
            )),
            ha,
        },
        &observer,
        shutdown(),
    )
    .await;
    match r {
        Ok(()) => Ok(Outcome::Ok),
        Err(RunError::Lock(e @ LockError::Held { .. })) => {
            crate::errln!("weft: {e}");
            Ok(Outcome::Failed)
        }
        Err(e @ (RunError::LostLeadership { .. } | RunError::Fenced { .. })) => {
            crate::errln!("weft: {e}");
            Ok(Outcome::Failed)
        }
        Err(e) => Err(e.into()),
    }
}

async fn shutdown() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// The status file of `weft run`, and whether the process that wrote it still runs.
#[derive(Debug, Clone)]
pub struct RunState {
    pub status: DaemonStatus,
    pub running: bool,
    /// Why it is taken as not running.
    pub why: Option<String>,
}

fn pid_alive(pid: u32) -> bool {
    weft_testbed::pid_alive(pid)
}

/// Reads the status file; a file whose pid is gone (on this host) is stale: `weft run` was
/// killed without removing it.
pub fn read_daemon_status(path: &Path) -> Option<RunState> {
    let text = std::fs::read_to_string(path).ok()?;
    let status: DaemonStatus = serde_json::from_str(&text).ok()?;
    let here = weft_reconcile::lock::hostname();
    // A pid of another host cannot be checked from here: taken as running.
    let elsewhere = !status.host.is_empty() && status.host != here;
    let (running, why) = if elsewhere || pid_alive(status.pid) {
        (true, None)
    } else {
        (
            false,
            Some(format!(
                "stale status file {}: pid {} is gone (killed without cleaning up?)",
                path.display(),
                status.pid
            )),
        )
    };
    Some(RunState {
        status,
        running,
        why,
    })
}

#[derive(Serialize)]
struct LinkRow {
    link: String,
    a: String,
    b: String,
    /// STATE_DB oper/admin of each end (`up/up`, `down/up`, `?` unknown).
    a_state: String,
    b_state: String,
    /// `in use`, `down`, `hold-down`, `suppressed`, `admin-down`, or `unknown` without `weft run`.
    usage: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    penalty: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flaps: Option<u64>,
}

#[derive(Serialize)]
struct SwitchRow {
    switch: String,
    /// `null` when the DB answered; why not otherwise.
    error: Option<String>,
    plugin: Option<String>,
    plugin_state: Option<String>,
    queued: Option<u64>,
    unanswered: Option<usize>,
    lock: Option<String>,
}

pub async fn status(
    file: &str,
    status_file: Option<PathBuf>,
    ha: Option<String>,
    output: OutputFormat,
) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(file, output)? else {
        return Ok(Outcome::Invalid);
    };
    let election: Option<Result<HaView, String>> = match &ha {
        Some(eps) => Some(
            match tokio::time::timeout(
                Duration::from_secs(5),
                read_view(&parse_endpoints(eps)?, &t.name),
            )
            .await
            {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err(format!("{eps} did not answer within 5s")),
            },
        ),
        None => None,
    };
    let path = status_file.unwrap_or_else(|| run::default_status_file(&t.name));
    let daemon = read_daemon_status(&path);
    let run_error = match &daemon {
        None => Some(format!(
            "weft run is not running (no status file at {})",
            path.display()
        )),
        Some(d) if !d.running => Some(format!(
            "weft run is not running ({})",
            d.why.clone().unwrap_or_default()
        )),
        Some(_) => None,
    };
    let live = daemon.as_ref().filter(|d| d.running).map(|d| &d.status);
    let views = fabric::read_all(
        &t,
        &None,
        Want {
            unanswered: true,
            lock: true,
            clock: false,
        },
    )
    .await;
    let by_link: BTreeMap<&str, &LinkStatus> = live
        .map(|s| s.links.iter().map(|l| (l.link.as_str(), l)).collect())
        .unwrap_or_default();
    let links: Vec<LinkRow> = t
        .links
        .iter()
        .enumerate()
        .map(|(li, l)| {
            let name = weft_reconcile::core::link_name(&t, li);
            let pa = &t.switches[l.a.switch].ports[l.a.port].name;
            let pb = &t.switches[l.b.switch].ports[l.b.port].name;
            let st = by_link.get(name.as_str());
            let usage = if !t.link_admin_up(li) {
                "admin-down".to_string()
            } else if let Some(s) = st {
                if s.suppressed {
                    "suppressed".into()
                } else if !s.in_use && s.oper_up {
                    "hold-down".into()
                } else if !s.in_use {
                    "down".into()
                } else {
                    "in use".into()
                }
            } else if live.is_some() {
                // The status file lists only links not in use or that flapped.
                "in use".into()
            } else {
                "unknown".into()
            };
            LinkRow {
                a: t.end_name(l.a),
                b: t.end_name(l.b),
                a_state: fabric::end_state(views.get(&l.a.switch), pa),
                b_state: fabric::end_state(views.get(&l.b.switch), pb),
                usage,
                penalty: st.filter(|s| s.penalty > 0).map(|s| s.penalty),
                flaps: st.filter(|s| s.flaps > 0).map(|s| s.flaps),
                link: name,
            }
        })
        .collect();
    let switches: Vec<SwitchRow> = t
        .switches
        .iter()
        .enumerate()
        .map(|(i, s)| match views.get(&i) {
            Some(Ok(v)) => switch_row(&s.name, v),
            Some(Err(e)) => SwitchRow {
                switch: s.name.clone(),
                error: Some(e.clone()),
                plugin: None,
                plugin_state: None,
                queued: None,
                unanswered: None,
                lock: None,
            },
            None => SwitchRow {
                switch: s.name.clone(),
                error: Some("not read".into()),
                plugin: None,
                plugin_state: None,
                queued: None,
                unanswered: None,
                lock: None,
            },
        })
        .collect();
    let tuning = ecn_tuning(&t).await;
    if output == OutputFormat::Json {
        let per_switch: serde_json::Map<String, serde_json::Value> = tuning
            .iter()
            .map(|(sw, r)| {
                let v = match r {
                    Ok(rows) => serde_json::to_value(rows).unwrap_or_default(),
                    Err(e) => serde_json::json!({ "error": e }),
                };
                (sw.clone(), v)
            })
            .collect();
        let v = serde_json::json!({
            "fabric": t.name,
            "run": {
                "running": live.is_some(),
                "error": run_error,
                "status_file": path,
                "status": live,
            },
            "links": links,
            "switches": switches,
            "ecn_tuning": per_switch,
            "ha": election.as_ref().map(|r| match r {
                Ok(v) => serde_json::to_value(v).unwrap_or_default(),
                Err(e) => serde_json::json!({ "error": e }),
            }),
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        match &election {
            Some(Ok(v)) => outln!(
                "election: leader {} (term {}); replicas: {}",
                v.leader.as_deref().unwrap_or("none"),
                v.term,
                if v.members.is_empty() {
                    "none".to_string()
                } else {
                    v.members.join(", ")
                }
            ),
            Some(Err(e)) => outln!("election: unknown: {e}"),
            None => {}
        }
        match (&live, &run_error) {
            (Some(s), _) => print_run_status(s),
            (None, Some(e)) if election.is_none() => outln!("fabric {}: {e}", t.name),
            (None, _) => {}
        }
        print_links(&links);
        print_switches(&switches);
        print_tuning(&tuning);
    }
    Ok(if live.is_some() {
        Outcome::Ok
    } else {
        Outcome::NotYet
    })
}

fn switch_row(name: &str, v: &SwitchView) -> SwitchRow {
    SwitchRow {
        switch: name.to_string(),
        error: None,
        plugin: Some(fabric::plugin_summary(v.plugin.as_ref())),
        plugin_state: v.plugin.as_ref().map(|p| p.state.as_str().to_string()),
        queued: Some(v.queued),
        unanswered: Some(v.unanswered.len()),
        lock: v.lock.as_ref().map(|l| {
            format!(
                "{}, taken {}, expires in {}s",
                l.holder(),
                ago(l.acquired_ms),
                l.expires_ms.saturating_sub(super::now_ms()) / 1000
            )
        }),
    }
}

fn print_run_status(s: &DaemonStatus) {
    outln!(
        "fabric {}: weft run pid {} on {}, started {}, {}/{} switches converged{}",
        s.fabric,
        s.pid,
        if s.host.is_empty() { "?" } else { &s.host },
        ago(s.started_ms),
        s.switches_converged,
        s.switches_converged + s.switches.len(),
        s.locked
            .map_or(String::new(), |(h, n)| format!(", lock held on {h}/{n}"))
    );
    if let Some(h) = &s.ha {
        outln!(
            "  replica {}: {}; leader {} (term {}); replicas: {}",
            h.id,
            h.role,
            h.leader.as_deref().unwrap_or("none"),
            h.term,
            h.members.join(", ")
        );
    }
    for (name, st) in &s.switches {
        let state = st["state"].as_str().unwrap_or("?");
        match st["reason"].as_str() {
            Some(r) => outln!("  {name}: {state}: {r}"),
            None => outln!("  {name}: {state}"),
        }
    }
    out!(
        "reconvergences: {}, entries written since start: {}",
        s.reconvergences,
        s.writes
    );
    match &s.last {
        Some(last) => outln!(
            "; last: {} switches, {} entries, {:.2} ms ({})",
            last.switches_changed,
            last.entries_written,
            last.total_ms,
            last.changes.join(", ")
        ),
        None => outln!(),
    }
}

fn print_links(links: &[LinkRow]) {
    let w = links
        .iter()
        .map(|l| l.link.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    outln!();
    outln!(
        "{:<w$}  {:<11}{:<11}use",
        "link",
        "a oper/adm",
        "b oper/adm"
    );
    for l in links {
        let extra = match (l.penalty, l.flaps) {
            (Some(p), Some(f)) => format!(" (penalty {p}, {f} flaps)"),
            (None, Some(f)) => format!(" ({f} flaps)"),
            _ => String::new(),
        };
        outln!(
            "{:<w$}  {:<11}{:<11}{}{extra}",
            l.link,
            l.a_state,
            l.b_state,
            l.usage
        );
    }
}

fn print_switches(rows: &[SwitchRow]) {
    outln!();
    outln!(
        "{:<20} {:<32} {:>7} {:>10}  lock",
        "switch",
        "plugin",
        "queued",
        "unanswered"
    );
    for r in rows {
        match &r.error {
            Some(e) => outln!("{:<20} UNREACHABLE: {e}", r.switch),
            None => outln!(
                "{:<20} {:<32} {:>7} {:>10}  {}",
                r.switch,
                r.plugin.as_deref().unwrap_or("?"),
                r.queued.unwrap_or(0),
                r.unanswered.unwrap_or(0),
                r.lock.as_deref().unwrap_or("-")
            ),
        }
    }
}

/// Per switch: its STATE_DB `WEFT_ECN_TUNING` rows (port|queue → fields), or why not.
type SwitchTuning = Result<BTreeMap<String, BTreeMap<String, String>>, String>;

/// Reads every switch's tuning records (the plugins write them; see sonic-plugin's tuning
/// module). A switch whose DB does not answer within a second is reported, not fatal.
async fn ecn_tuning(t: &weft_topology::Topology) -> BTreeMap<String, SwitchTuning> {
    let mut out = BTreeMap::new();
    for sw in &t.switches {
        let read = async {
            let db = SonicDb::from_endpoint(&sw.db).map_err(|e| e.to_string())?;
            let conn = db
                .connect(SonicDbId::StateDb)
                .await
                .map_err(|e| weft_reconcile::io::describe_db_error(&sw.db, &e))?;
            let rows = Table::new(conn, EcnTuningState::TABLE)
                .map_err(|e| e.to_string())?
                .dump()
                .await
                .map_err(|e| weft_reconcile::io::describe_db_error(&sw.db, &e))?;
            Ok::<_, String>(
                rows.into_iter()
                    .map(|(k, f)| (k, f.into_iter().collect()))
                    .collect(),
            )
        };
        let r = tokio::time::timeout(Duration::from_secs(1), read)
            .await
            .unwrap_or_else(|_| Err(format!("{} did not answer within 1s", sw.db)));
        out.insert(sw.name.clone(), r);
    }
    out
}

/// Bytes as KB with one decimal, the unit ECN thresholds are usually quoted in.
fn kb(v: Option<&String>) -> String {
    v.and_then(|s| s.parse::<f64>().ok())
        .map_or("?".into(), |b| format!("{:.1}", b / 1000.0))
}

fn print_tuning(all: &BTreeMap<String, SwitchTuning>) {
    let rows: Vec<_> = all
        .iter()
        .filter_map(|(sw, r)| r.as_ref().ok().filter(|r| !r.is_empty()).map(|r| (sw, r)))
        .collect();
    outln!();
    if rows.is_empty() {
        outln!("ECN tuning: no switch reports tuning state");
        return;
    }
    outln!("ECN tuning (tuned vs static, per port|queue; KB, Pmax):");
    for (sw, rows) in rows {
        let tuned = rows
            .values()
            .filter(|f| f.get("changes").is_some_and(|c| c != "0"))
            .count();
        outln!("  {sw}: {} queues, {tuned} moved from static", rows.len());
        for (k, f) in rows {
            let moved = f.get("kmin") != f.get("static_kmin")
                || f.get("kmax") != f.get("static_kmax")
                || f.get("pmax") != f.get("static_pmax");
            if !moved && f.get("tuning").is_some_and(|t| t == "auto") {
                continue;
            }
            let g = |n: &str| f.get(n).map_or("?", String::as_str);
            outln!(
                "    {k:<14} {:<5} Kmin {} (static {})  Kmax {} (static {})  Pmax {} (static {})  {} changes, last: {}",
                g("tuning"),
                kb(f.get("kmin")),
                kb(f.get("static_kmin")),
                kb(f.get("kmax")),
                kb(f.get("static_kmax")),
                g("pmax"),
                g("static_pmax"),
                g("changes"),
                g("reason"),
            );
        }
    }
}
