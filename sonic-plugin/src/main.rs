//! `weft-plugin`: the per-switch daemon. See `weft-plugin --help`.

use std::io::IsTerminal;

use anyhow::Context;
use clap::Parser;
use weft_sonic_plugin::config::{LogFormat, Options, PluginConfig};
use weft_sonic_plugin::daemon::Daemon;

/// `--log-level`, else RUST_LOG, else WEFT_LOG (the controller's name for it), else info.
fn log_filter(level: Option<&str>) -> tracing_subscriber::EnvFilter {
    let from_env = ["RUST_LOG", "WEFT_LOG"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|v| !v.trim().is_empty());
    match (level, from_env) {
        (Some(l), _) => tracing_subscriber::EnvFilter::new(l),
        (None, Some(e)) => tracing_subscriber::EnvFilter::try_new(&e)
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        (None, None) => tracing_subscriber::EnvFilter::new("info"),
    }
}

fn main() {
    if let Err(e) = run() {
        // One line, causes after colons; never a backtrace.
        eprintln!("weft-plugin: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let flags = Options::parse();
    let cfg = PluginConfig::from_options(flags).context("configuration")?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(log_filter(cfg.log_level.as_deref()))
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    match cfg.log_format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("tokio runtime")?;
    rt.block_on(async move {
        tracing::info!(redis = %cfg.redis, p4rt = %cfg.p4rt, device_id = cfg.device_id, "weft-plugin starting");
        let daemon = Daemon::new(cfg).context("start")?;
        daemon.run(shutdown()).await.context("run")
    })
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
