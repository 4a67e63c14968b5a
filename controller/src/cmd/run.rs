//! `weft run FILE`: the reconciler's loop (`weft_reconcile::run`) with its metrics, its lock
//! and, with `--ha`, its election; stopped by SIGTERM or ctrl-c.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use weft_observe::status::read_daemon_status;
use weft_reconcile::core::LinkStatus;
use weft_reconcile::ha::{HaOptions, parse_endpoints};
use weft_reconcile::lock::{LockError, LockOptions};
use weft_reconcile::run::{self, RunError, RunOptions};

use super::Outcome;
use super::intent::load_valid;
use crate::args::{TransportArg, parse_duration};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Full resync of every switch this often.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub resync: Duration,
    /// How long to wait for a switch to answer.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// Write every switch's P4RT entries over this transport, whatever the intent says: zmq
    /// puts an endpoint the intent does not name beside the switch's DB socket (where
    /// `weft testbed up --transport zmq` starts the plugins' ZMQ servers); redis is the
    /// fallback. [default: what the intent says, else redis]
    #[arg(long, value_enum, value_name = "TRANSPORT")]
    pub transport: Option<TransportArg>,
    /// Append one JSON line per reconvergence here.
    #[arg(long, value_name = "FILE")]
    pub events_log: Option<PathBuf>,
    /// Where `weft status` reads the daemon's view [default: /run/weft/<fabric>.controller.json].
    #[arg(long, value_name = "FILE")]
    pub status_file: Option<PathBuf>,
    /// Switches read and written at once.
    #[arg(long, default_value = "64", value_name = "N")]
    pub parallelism: usize,
    /// Take the fabric's lock even if another weft holds it.
    #[arg(long)]
    pub steal: bool,
    /// Elect the writer among replicas on etcd: etcd://HOST:PORT[,HOST:PORT…].
    #[arg(long, value_name = "ETCD", requires = "id")]
    pub ha: Option<String>,
    /// This replica's name in the election (with --ha).
    #[arg(long, value_name = "NAME", requires = "ha")]
    pub id: Option<String>,
    /// The election lease's time to live (etcd rounds it up to its minimum).
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub ha_ttl: Duration,
    /// Serve Prometheus/OpenMetrics metrics at http://ADDR/metrics (HOST:PORT).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Serve the live fabric page (as `weft ui`) at http://ADDR/ (HOST:PORT, e.g. 127.0.0.1:8088).
    #[arg(long, value_name = "ADDR", value_parser = weft_ui::parse_listen)]
    pub ui: Option<std::net::SocketAddr>,
}

/// `weft run`'s metrics (and its page, with `--ui`), fed by the reconciler's loop.
struct Observer(weft_telemetry::ControllerMetrics, Option<weft_ui::UiHook>);

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
        if let Some(ui) = &self.1 {
            ui.reconverged(rec);
        }
    }
    fn links(&self, links: &[LinkStatus]) {
        let down = links.iter().filter(|l| !l.in_use).count();
        let suppressed = links.iter().filter(|l| l.suppressed).count();
        self.0.links(links.len(), down, suppressed);
    }
}

pub async fn run(a: &RunArgs) -> anyhow::Result<Outcome> {
    let Some(mut t) = load_valid(&a.file)? else {
        return Ok(Outcome::Invalid);
    };
    TransportArg::apply(a.transport, &mut t)?;
    let ha = match &a.ha {
        Some(eps) => {
            let id = a.id.clone().unwrap_or_default();
            if id.is_empty() || id.contains('/') {
                anyhow::bail!("--id {id:?}: a replica needs a name without '/'");
            }
            Some(HaOptions {
                endpoints: parse_endpoints(eps)?,
                id,
                ttl: a.ha_ttl,
            })
        }
        None => None,
    };
    // Replicas on one host each have their own status file.
    let status_file = a.status_file.clone().unwrap_or_else(|| match &ha {
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
    let ui = match a.ui {
        Some(listen) => Some(
            weft_ui::serve(
                std::sync::Arc::new(t.clone()),
                Box::new(weft_ui::DbSource::new(&t)),
                weft_ui::UiOptions {
                    listen,
                    interval: Duration::from_secs(1),
                    window: Duration::from_secs(10),
                    history: Duration::from_secs(300),
                    status_file: status_file.clone(),
                },
            )
            .await
            .context("weft run --ui")?,
        ),
        None => None,
    };
    let observer = Observer(
        weft_telemetry::ControllerMetrics::new(t.switches.iter().map(|s| s.name.as_str())),
        ui.as_ref().map(|u| u.hook()),
    );
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
            events_log: a.events_log.clone(),
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

/// SIGTERM or ctrl-c.
pub(crate) async fn shutdown() {
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
