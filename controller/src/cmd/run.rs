//! `weft run FILE` and `weft status FILE` (what `weft run` sees, and each switch's tuned vs
//! static ECN thresholds from its STATE_DB `WEFT_ECN_TUNING`).

/// The plugins' STATE_DB table of tuned ECN thresholds (sonic-plugin's `tuning::TUNING_TABLE`).
const TUNING_TABLE: &str = "WEFT_ECN_TUNING";

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use weft_sonic_db::{SonicDb, SonicDbId, Table};

use super::{Outcome, OutputFormat, load_valid};
use weft_reconcile::run::{self, DaemonStatus, RunOptions};

pub async fn run(
    file: &str,
    resync: Duration,
    timeout: Duration,
    events_log: Option<PathBuf>,
    status_file: Option<PathBuf>,
) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid(file)? else {
        return Ok(Outcome::Invalid);
    };
    let status_file = status_file.unwrap_or_else(|| run::default_status_file(&t.name));
    let info = std::sync::Arc::new(
        weft_compiler::p4map::pipeline_p4info().context("the pipeline's P4Info")?,
    );
    run::run(
        &t,
        info,
        RunOptions {
            resync,
            timeout,
            status_file,
            events_log,
            parallel: 64,
        },
        shutdown(),
    )
    .await?;
    Ok(Outcome::Ok)
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

pub fn status(
    file: &str,
    status_file: Option<PathBuf>,
    output: OutputFormat,
) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid(file)? else {
        return Ok(Outcome::Invalid);
    };
    let path = status_file.unwrap_or_else(|| run::default_status_file(&t.name));
    // The run part needs `weft run`; the tuning part only the switches' DBs, so it is shown
    // either way.
    let run_status = std::fs::read_to_string(&path)
        .with_context(|| format!("no status at {} (is `weft run` running?)", path.display()))
        .and_then(|text| {
            serde_json::from_str::<serde_json::Value>(&text)
                .with_context(|| format!("{}", path.display()))
        });
    let tuning = ecn_tuning(&t);
    if output == OutputFormat::Json {
        let mut v = match &run_status {
            Ok(v) => v.clone(),
            Err(_) => serde_json::json!({}),
        };
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
        v["ecn_tuning"] = serde_json::Value::Object(per_switch);
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(Outcome::Ok);
    }
    match &run_status {
        Ok(v) => print_run_status(v),
        Err(e) => println!("{e:#}; showing ECN tuning only"),
    }
    print_tuning(&tuning);
    Ok(Outcome::Ok)
}

fn print_run_status(v: &serde_json::Value) {
    let _: DaemonStatus = serde_json::from_value(v.clone()).unwrap_or_default();
    println!(
        "fabric {} (weft run pid {})",
        v["fabric"].as_str().unwrap_or("?"),
        v["pid"]
    );
    let links = v["links"].as_array().cloned().unwrap_or_default();
    let not_in_use: Vec<&serde_json::Value> =
        links.iter().filter(|l| l["in_use"] != true).collect();
    println!(
        "links: {} in use, {} not in use",
        links.len() - not_in_use.len(),
        not_in_use.len()
    );
    for l in not_in_use {
        let why = if l["suppressed"] == true {
            format!(
                "SUPPRESSED (penalty {}, {} flaps)",
                l["penalty"], l["flaps"]
            )
        } else if l["oper_up"] == true {
            "up, in hold-down".to_string()
        } else {
            "down".to_string()
        };
        println!("  {}  {why}", l["link"].as_str().unwrap_or("?"));
    }
    println!(
        "reconvergences: {}, entries written since start: {}",
        v["reconvergences"], v["writes"]
    );
    if let Some(last) = v.get("last").filter(|x| !x.is_null()) {
        println!(
            "last: {} switches, {} entries, {:.2} ms ({})",
            last["switches_changed"],
            last["entries_written"],
            last["total_ms"].as_f64().unwrap_or(0.0),
            last["changes"]
        );
    }
}

/// Per switch: its STATE_DB `WEFT_ECN_TUNING` rows (port|queue → fields), or why not.
type SwitchTuning = Result<BTreeMap<String, BTreeMap<String, String>>, String>;

/// Reads every switch's tuning records (the plugins write them; see sonic-plugin's tuning
/// module). A switch whose DB does not answer within a second is reported, not fatal.
fn ecn_tuning(t: &weft_topology::Topology) -> BTreeMap<String, SwitchTuning> {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return t
                .switches
                .iter()
                .map(|s| (s.name.clone(), Err(format!("runtime: {e}"))))
                .collect();
        }
    };
    rt.block_on(async {
        let mut out = BTreeMap::new();
        for sw in &t.switches {
            let read = async {
                let db = SonicDb::from_endpoint(&sw.db).map_err(|e| e.to_string())?;
                let conn = db
                    .connect(SonicDbId::StateDb)
                    .await
                    .map_err(|e| e.to_string())?;
                let rows = Table::new(conn, TUNING_TABLE)
                    .map_err(|e| e.to_string())?
                    .dump()
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(
                    rows.into_iter()
                        .map(|(k, f)| (k, f.into_iter().collect()))
                        .collect(),
                )
            };
            let r = tokio::time::timeout(Duration::from_secs(1), read)
                .await
                .unwrap_or_else(|_| Err(format!("{} did not answer within 1 s", sw.db)));
            out.insert(sw.name.clone(), r);
        }
        out
    })
}

/// Bytes as KB with one decimal, the unit ECN thresholds are usually quoted in.
fn kb(v: Option<&String>) -> String {
    v.and_then(|s| s.parse::<f64>().ok())
        .map_or("?".into(), |b| format!("{:.1}", b / 1000.0))
}

fn print_tuning(all: &BTreeMap<String, SwitchTuning>) {
    println!("ECN tuning (tuned vs static, per port|queue; KB, Pmax):");
    for (sw, r) in all {
        match r {
            Err(e) => println!("  {sw}: no tuning state ({e})"),
            Ok(rows) if rows.is_empty() => println!("  {sw}: no tuning state"),
            Ok(rows) => {
                let tuned = rows
                    .values()
                    .filter(|f| f.get("changes").is_some_and(|c| c != "0"))
                    .count();
                println!("  {sw}: {} queues, {tuned} moved from static", rows.len());
                for (k, f) in rows {
                    let moved = f.get("kmin") != f.get("static_kmin")
                        || f.get("kmax") != f.get("static_kmax")
                        || f.get("pmax") != f.get("static_pmax");
                    if !moved && f.get("tuning").is_some_and(|t| t == "auto") {
                        continue;
                    }
                    let g = |n: &str| f.get(n).map_or("?", String::as_str);
                    println!(
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
    }
}
