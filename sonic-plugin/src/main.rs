//! `weft-plugin`: the per-switch daemon. See `weft-plugin --help`.

use anyhow::Context;
use clap::Parser;
use weft_sonic_plugin::config::{Cli, LogFormat, PluginConfig};
use weft_sonic_plugin::daemon::Daemon;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let cfg = PluginConfig::from_cli(cli).context("configuration")?;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    match cfg.log_format {
        LogFormat::Json => builder.json().init(),
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
