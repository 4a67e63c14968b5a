//! `weft ui FILE [--listen 127.0.0.1:8088] [--source db|prometheus=URL]`: the live fabric page
//! (`weft_ui`), served until SIGTERM or ctrl-c.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use weft_ui::{DbSource, PromSource, Source, UiOptions};

use super::Outcome;
use super::intent::load_valid;
use crate::args::parse_duration;
use crate::outln;

/// Where the page reads the fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceArg {
    Db,
    Prometheus(String),
}

/// A `--source` that is neither `db` nor `prometheus=URL`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected db or prometheus=http://HOST:PORT")]
pub struct SourceError(String);

pub fn parse_source(s: &str) -> Result<SourceArg, SourceError> {
    match s.split_once('=') {
        None if s == "db" => Ok(SourceArg::Db),
        Some(("prometheus", url)) if url.starts_with("http://") || url.starts_with("https://") => {
            Ok(SourceArg::Prometheus(url.to_string()))
        }
        _ => Err(SourceError(s.to_string())),
    }
}

#[derive(Args, Debug)]
pub struct UiArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Serve the page here (HOST:PORT; an address beyond loopback serves it to the network).
    #[arg(long, default_value = "127.0.0.1:8088", value_parser = weft_ui::parse_listen, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Read the switch DBs (db) or a Prometheus that scrapes the plugins (prometheus=URL).
    #[arg(long, default_value = "db", value_parser = parse_source, value_name = "SOURCE")]
    pub source: SourceArg,
    /// Time between reads.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
    /// The diagnosis window (weft diagnose's rules over it, each read).
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub window: Duration,
    /// How far back the drill-down charts go.
    #[arg(long, default_value = "5min", value_parser = parse_duration, value_name = "DURATION")]
    pub history: Duration,
    /// `weft run`'s status file [default: /run/weft/<fabric>.controller.json].
    #[arg(long, value_name = "FILE")]
    pub status_file: Option<PathBuf>,
}

/// The page's source for `t`.
pub fn source(t: &weft_topology::Topology, s: &SourceArg) -> anyhow::Result<Box<dyn Source>> {
    Ok(match s {
        SourceArg::Db => Box::new(DbSource::new(t)),
        SourceArg::Prometheus(url) => Box::new(PromSource::new(
            t,
            weft_observe::promql::Client::new(url).context("--source")?,
        )),
    })
}

pub async fn run(a: &UiArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid(&a.file)? else {
        return Ok(Outcome::Invalid);
    };
    let status_file = a
        .status_file
        .clone()
        .unwrap_or_else(|| weft_reconcile::run::default_status_file(&t.name));
    let src = source(&t, &a.source)?;
    let server = weft_ui::serve(
        Arc::new(t),
        src,
        UiOptions {
            listen: a.listen,
            interval: a.interval.max(Duration::from_millis(100)),
            window: a.window,
            history: a.history,
            status_file,
        },
    )
    .await?;
    outln!(
        "fabric page: http://{}/ (read-only; ctrl-c stops)",
        server.addr
    );
    super::run::shutdown().await;
    drop(server);
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_db_or_prometheus_with_a_url() {
        assert_eq!(parse_source("db"), Ok(SourceArg::Db));
        assert_eq!(
            parse_source("prometheus=http://127.0.0.1:9090"),
            Ok(SourceArg::Prometheus("http://127.0.0.1:9090".into()))
        );
        for bad in ["prometheus", "prometheus=", "prom=http://x", "redis", ""] {
            assert!(parse_source(bad).is_err(), "{bad}");
        }
    }
}
