//! `weft run FILE` and `weft status FILE`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use super::{Outcome, OutputFormat, load_valid};
use crate::run::{self, DaemonStatus, RunOptions};

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
    run::run(
        &t,
        RunOptions {
            resync,
            timeout,
            status_file,
            events_log,
        },
    )
    .await?;
    Ok(Outcome::Ok)
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
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("no status at {} (is `weft run` running?)", path.display()))?;
    let s: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
    if output == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(Outcome::Ok);
    }
    let st: DaemonStatus = serde_json::from_value(s).unwrap_or_default();
    let _ = &st;
    let v: serde_json::Value = serde_json::from_str(&text)?;
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
    Ok(Outcome::Ok)
}
