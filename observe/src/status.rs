//! What `weft status` and `weft top` know of `weft run` and of the fabric's links and switches:
//! the daemon's status file (and whether it still runs), each link's use, each switch's plugin,
//! unanswered keys and lock, the election, and the tuned ECN thresholds (STATE_DB
//! `WEFT_ECN_TUNING`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use weft_reconcile::core::{LinkStatus, link_name};
use weft_reconcile::ha::{HaError, HaView, read_view};
use weft_reconcile::lock::ago;
use weft_reconcile::run::{DaemonStatus, default_status_file};
use weft_sonic_db::{SonicDb, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::EcnTuningState;
use weft_topology::{SwitchIdx, Topology};

use crate::read::{ReadError, bounded};
use crate::switch::{SwitchView, ViewRead, end_state, plugin_summary};

/// The status file of `weft run`, and whether the process that wrote it still runs.
#[derive(Debug, Clone)]
pub struct RunState {
    pub status: DaemonStatus,
    pub running: bool,
    /// Why it is taken as not running.
    pub why: Option<String>,
}

/// Whether process `pid` of this host runs (a zombie does not).
fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
            .unwrap_or(false)
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

/// How `weft run` uses a link it reports: `suppressed`, `hold-down`, `down` or `in use`.
pub fn usage(l: &LinkStatus) -> &'static str {
    if l.suppressed {
        "suppressed"
    } else if !l.in_use && l.oper_up {
        "hold-down"
    } else if !l.in_use {
        "down"
    } else {
        "in use"
    }
}

/// `weft run`'s view of the links it reports (suppressed, down, ...) by link name, if it runs
/// with its default status file; empty otherwise.
pub fn run_usage(t: &Topology) -> BTreeMap<String, String> {
    let path = default_status_file(&t.name);
    let Some(st) = read_daemon_status(&path).filter(|s| s.running) else {
        return BTreeMap::new();
    };
    st.status
        .links
        .iter()
        .map(|l| (l.link.clone(), usage(l).to_string()))
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct LinkRow {
    pub link: String,
    pub a: String,
    pub b: String,
    /// STATE_DB oper/admin of each end (`up/up`, `down/up`, `?` unknown).
    pub a_state: String,
    pub b_state: String,
    /// `in use`, `down`, `hold-down`, `suppressed`, `admin-down`, or `unknown` without `weft run`.
    pub usage: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub penalty: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flaps: Option<u64>,
}

/// Every link with both ends' state and its use by `live` (`weft run` when it runs).
pub fn link_rows(
    t: &Topology,
    live: Option<&DaemonStatus>,
    views: &BTreeMap<SwitchIdx, ViewRead>,
) -> Vec<LinkRow> {
    let by_link: BTreeMap<&str, &LinkStatus> = live
        .map(|s| s.links.iter().map(|l| (l.link.as_str(), l)).collect())
        .unwrap_or_default();
    t.links
        .iter()
        .enumerate()
        .map(|(li, l)| {
            let name = link_name(t, li);
            let pa = &t.switches[l.a.switch].ports[l.a.port].name;
            let pb = &t.switches[l.b.switch].ports[l.b.port].name;
            let st = by_link.get(name.as_str());
            let usage = if !t.link_admin_up(li) {
                "admin-down".to_string()
            } else if let Some(s) = st {
                usage(s).to_string()
            } else if live.is_some() {
                // The status file lists only links not in use or that flapped.
                "in use".into()
            } else {
                "unknown".into()
            };
            LinkRow {
                a: t.end_name(l.a),
                b: t.end_name(l.b),
                a_state: end_state(views.get(&l.a.switch), pa),
                b_state: end_state(views.get(&l.b.switch), pb),
                usage,
                penalty: st.filter(|s| s.penalty > 0).map(|s| s.penalty),
                flaps: st.filter(|s| s.flaps > 0).map(|s| s.flaps),
                link: name,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct SwitchRow {
    pub switch: String,
    /// `null` when the DB answered; why not otherwise.
    pub error: Option<String>,
    pub plugin: Option<String>,
    pub plugin_state: Option<String>,
    pub queued: Option<u64>,
    pub unanswered: Option<usize>,
    pub lock: Option<String>,
}

impl SwitchRow {
    fn unread(name: &str, error: String) -> SwitchRow {
        SwitchRow {
            switch: name.to_string(),
            error: Some(error),
            plugin: None,
            plugin_state: None,
            queued: None,
            unanswered: None,
            lock: None,
        }
    }

    fn of(name: &str, v: &SwitchView) -> SwitchRow {
        SwitchRow {
            switch: name.to_string(),
            error: None,
            plugin: Some(plugin_summary(v.plugin.as_ref())),
            plugin_state: v.plugin.as_ref().map(|p| p.state.as_str().to_string()),
            queued: Some(v.queued),
            unanswered: Some(v.unanswered.len()),
            lock: v.lock.as_ref().map(|l| {
                format!(
                    "{}, taken {}, expires in {}s",
                    l.holder(),
                    ago(l.acquired_ms),
                    l.expires_ms.saturating_sub(crate::now_ms()) / 1000
                )
            }),
        }
    }
}

/// Every switch's plugin, unanswered keys and lock (or why it was not read).
pub fn switch_rows(t: &Topology, views: &BTreeMap<SwitchIdx, ViewRead>) -> Vec<SwitchRow> {
    t.switches
        .iter()
        .enumerate()
        .map(|(i, s)| match views.get(&i) {
            Some(Ok(v)) => SwitchRow::of(&s.name, v),
            Some(Err(e)) => SwitchRow::unread(&s.name, e.to_string()),
            None => SwitchRow::unread(&s.name, "not read".into()),
        })
        .collect()
}

/// Why the election could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    #[error(transparent)]
    Etcd(#[from] HaError),
    #[error("{endpoints} did not answer within 5s")]
    Timeout { endpoints: String },
}

/// The election on etcd (leader, term, replicas), within 5 s.
pub async fn read_election(
    given: &str,
    endpoints: &[String],
    fabric: &str,
) -> Result<HaView, ElectionError> {
    match tokio::time::timeout(Duration::from_secs(5), read_view(endpoints, fabric)).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(ElectionError::Timeout {
            endpoints: given.to_string(),
        }),
    }
}

/// One switch's STATE_DB `WEFT_ECN_TUNING` rows (port|queue → fields), or why not.
pub type SwitchTuning = Result<BTreeMap<String, BTreeMap<String, String>>, ReadError>;

/// How long one switch may take to give its tuning records.
const TUNING_TIMEOUT: Duration = Duration::from_secs(1);

async fn switch_tuning(db: &str) -> SwitchTuning {
    let sonic = SonicDb::from_endpoint(db).map_err(|e| ReadError::Unreachable {
        db: db.to_string(),
        reason: e.to_string(),
    })?;
    let conn = sonic
        .connect(SonicDbId::StateDb)
        .await
        .map_err(|e| ReadError::db(db, &e))?;
    let rows = Table::new(conn, EcnTuningState::TABLE)
        .map_err(|e| ReadError::Unreachable {
            db: db.to_string(),
            reason: e.to_string(),
        })?
        .dump()
        .await
        .map_err(|e| ReadError::db(db, &e))?;
    Ok(rows
        .into_iter()
        .map(|(k, f)| (k, f.into_iter().collect()))
        .collect())
}

/// Every switch's tuning records (the plugins write them; see sonic-plugin's tuning module). A
/// switch whose DB does not answer within a second is reported, not fatal.
pub async fn ecn_tuning(t: &Topology) -> BTreeMap<String, SwitchTuning> {
    let mut out = BTreeMap::new();
    for sw in &t.switches {
        let r = bounded(&sw.db, TUNING_TIMEOUT, switch_tuning(&sw.db)).await;
        out.insert(sw.name.clone(), r);
    }
    out
}
