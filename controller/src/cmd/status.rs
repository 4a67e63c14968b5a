//! `weft status FILE`: the fabric as `show interfaces status` would show it across switches
//! (both ends of every link from STATE_DB, whether `weft run` uses it), each switch's plugin,
//! unanswered keys and lock, the last reconvergence, and tuned vs static ECN thresholds from
//! STATE_DB `WEFT_ECN_TUNING`; read and judged by `weft_observe`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;
use weft_observe::read::Unknown;
use weft_observe::status::{
    ElectionError, LinkRow, SwitchRow, SwitchTuning, ecn_tuning, link_rows, read_daemon_status,
    read_election, switch_rows,
};
use weft_observe::switch::{self, Want};
use weft_reconcile::ha::{HaView, parse_endpoints};
use weft_reconcile::lock::ago;
use weft_reconcile::run::{self, DaemonStatus};
use weft_topology::Topology;

use super::Outcome;
use super::intent::load_valid_as;
use crate::args::OutputFormat;
use crate::{out, outln};

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// The status file of `weft run` [default: /run/weft/<fabric>.controller.json].
    #[arg(long, value_name = "FILE")]
    pub status_file: Option<PathBuf>,
    /// Read the election from etcd too: leader, term and replicas (etcd://HOST:PORT[,…]).
    #[arg(long, value_name = "ETCD")]
    pub ha: Option<String>,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

/// The election's view, or why it could not be read.
type Election = Result<HaView, ElectionError>;

/// The election (with `--ha`).
async fn election(t: &Topology, ha: Option<&str>) -> anyhow::Result<Option<Election>> {
    let Some(eps) = ha else {
        return Ok(None);
    };
    let endpoints = parse_endpoints(eps)?;
    Ok(Some(read_election(eps, &endpoints, &t.name).await))
}

pub async fn status(a: &StatusArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let election = election(&t, a.ha.as_deref()).await?;
    let path = a
        .status_file
        .clone()
        .unwrap_or_else(|| run::default_status_file(&t.name));
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
    let want = Want {
        unanswered: true,
        lock: true,
        clock: false,
    };
    let views = switch::read_all(&t, &None, want).await;
    let links = link_rows(&t, live, &views);
    let switches = switch_rows(&t, &views);
    let tuning = ecn_tuning(&t).await;
    let unknown: Vec<Unknown> = switches
        .iter()
        .filter_map(|r| {
            r.error.as_ref().map(|e| Unknown {
                switch: r.switch.clone(),
                data: "unreachable",
                detail: e.clone(),
            })
        })
        .collect();
    if a.output.structured() {
        let per_switch: serde_json::Map<String, serde_json::Value> = tuning
            .iter()
            .map(|(sw, r)| {
                let v = match r {
                    Ok(rows) => serde_json::to_value(rows).unwrap_or_default(),
                    Err(e) => serde_json::json!({ "error": e.to_string() }),
                };
                (sw.clone(), v)
            })
            .collect();
        let v = serde_json::json!({
            "unknown": unknown,
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
                Err(e) => serde_json::json!({ "error": e.to_string() }),
            }),
        });
        crate::report::emit(a.output, Some(&t.name), &v)?;
    } else {
        print_election(election.as_ref());
        match (&live, &run_error) {
            (Some(s), _) => print_run_status(s),
            (None, Some(e)) if election.is_none() => outln!("fabric {}: {e}", t.name),
            (None, _) => {}
        }
        print_links(&links);
        print_switches(&switches);
        print_tuning(&tuning);
    }
    let answer = if live.is_some() {
        Outcome::Ok
    } else {
        Outcome::NotYet
    };
    Ok(super::verdict(&unknown, answer))
}

fn print_election(election: Option<&Election>) {
    match election {
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

/// One end's `oper/admin` in its column, red when down, yellow when unknown.
fn end(state: &str) -> String {
    let padded = format!("{state:<11}");
    if state.starts_with("down") || state.ends_with("/down") {
        crate::style::bad(&padded)
    } else if state == "?" || state == "no row" {
        crate::style::unknown(&padded)
    } else {
        padded
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
            "{:<w$}  {}{}{}{extra}",
            l.link,
            end(&l.a_state),
            end(&l.b_state),
            crate::style::state(&l.usage)
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
            Some(e) => outln!(
                "{:<20} {}",
                r.switch,
                crate::style::bad(&format!("UNREACHABLE: {e}"))
            ),
            None => outln!(
                "{:<20} {} {:>7} {:>10}  {}",
                r.switch,
                plugin_cell(r.plugin.as_deref().unwrap_or("?")),
                r.queued.unwrap_or(0),
                r.unanswered.unwrap_or(0),
                r.lock.as_deref().unwrap_or("-")
            ),
        }
    }
}

fn plugin_cell(p: &str) -> String {
    let padded = format!("{p:<32}");
    if p.starts_with("running") {
        padded
    } else {
        crate::style::bad(&padded)
    }
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
