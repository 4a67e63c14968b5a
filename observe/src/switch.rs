//! What the switches say, read from each one's SONiC DBs with a short timeout: port state,
//! plugin health, the lock, keys not answered. Shared by `status`, `doctor`, `graph` and
//! `show`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use weft_sonic_db::{FieldValues, P4RT_TABLE, SonicDb, SonicDbError, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::{LockRow, PLUGIN_STATUS_KEY, PluginStatus, PortState};
use weft_topology::{SwitchIdx, Topology};

use crate::read::{READ_TIMEOUT, ReadError, bounded};

/// What to read besides port state and the plugin's status row.
#[derive(Debug, Clone, Copy, Default)]
pub struct Want {
    /// APPL_DB vs APPL_STATE_DB P4RT_TABLE: keys written and not (yet) acknowledged.
    pub unanswered: bool,
    pub lock: bool,
    /// The switch's clock (Redis TIME).
    pub clock: bool,
}

/// One switch as its DBs describe it.
#[derive(Debug, Clone, Default)]
pub struct SwitchView {
    /// STATE_DB PORT_TABLE by port.
    pub ports: BTreeMap<String, PortState>,
    /// `None`: no row (no live plugin: the row expires when the plugin dies).
    pub plugin: Option<PluginStatus>,
    pub lock: Option<LockRow>,
    /// Keys waiting in APPL_DB for the plugin to pop (`P4RT_TABLE_KEY_SET`).
    pub queued: u64,
    /// APPL_DB P4RT_TABLE keys whose APPL_STATE_DB copy is missing or different: written and
    /// not acknowledged (refused, or never answered).
    pub unanswered: Vec<String>,
    /// APPL_STATE_DB P4RT_TABLE entries.
    pub acknowledged: usize,
    /// Switch clock minus ours, milliseconds.
    pub clock_skew_ms: Option<i64>,
}

/// One switch's view, or why it could not be read.
pub type ViewRead = Result<SwitchView, ReadError>;

fn same(a: &FieldValues, b: &FieldValues) -> bool {
    weft_reconcile::plan::same_fields(a, b)
}

async fn read_inner(db: &str, fabric: &str, want: Want) -> Result<SwitchView, SonicDbError> {
    let sonic = SonicDb::from_endpoint(db)?;
    let state = sonic.connect(SonicDbId::StateDb).await?;
    let mut v = SwitchView::default();
    for (k, f) in Table::new(state.clone(), PortState::TABLE)?.dump().await? {
        if let Ok(p) = PortState::from_fields(&k, &f) {
            v.ports.insert(k, p);
        }
    }
    v.plugin = Table::new(state.clone(), PluginStatus::TABLE)?
        .get(PLUGIN_STATUS_KEY)
        .await?
        .and_then(|f| PluginStatus::from_fields(PLUGIN_STATUS_KEY, &f).ok());
    if want.lock {
        v.lock = Table::new(state.clone(), LockRow::TABLE)?
            .get(fabric)
            .await?
            .and_then(|f| LockRow::from_fields(fabric, &f).ok());
    }
    let mut appl = sonic.connect(SonicDbId::ApplDb).await?;
    v.queued = redis::cmd("SCARD")
        .arg(format!("{P4RT_TABLE}_KEY_SET"))
        .query_async(appl.raw())
        .await
        .unwrap_or(0);
    if want.unanswered {
        let written = Table::new(appl.clone(), P4RT_TABLE)?.dump().await?;
        let acked = Table::new(sonic.connect(SonicDbId::ApplStateDb).await?, P4RT_TABLE)?
            .dump()
            .await?;
        v.acknowledged = acked.len();
        v.unanswered = written
            .iter()
            .filter(|(k, f)| acked.get(*k).is_none_or(|a| !same(a, f)))
            .map(|(k, _)| k.clone())
            .collect();
    }
    if want.clock {
        let t0 = crate::now_ms();
        let time: Result<(String, String), _> = redis::cmd("TIME").query_async(appl.raw()).await;
        let t1 = crate::now_ms();
        if let Ok((s, us)) = time
            && let (Ok(s), Ok(us)) = (s.parse::<i64>(), us.parse::<i64>())
        {
            let theirs = s * 1000 + us / 1000;
            v.clock_skew_ms = Some(theirs - ((t0 + t1) / 2) as i64);
        }
    }
    Ok(v)
}

/// Reads one switch.
pub async fn read(db: &str, fabric: &str, want: Want) -> ViewRead {
    bounded(db, READ_TIMEOUT, async {
        read_inner(db, fabric, want)
            .await
            .map_err(|e| ReadError::db(db, &e))
    })
    .await
}

/// Reads the selected switches, 64 at a time.
pub async fn read_all(
    t: &Topology,
    sel: &Option<BTreeSet<SwitchIdx>>,
    want: Want,
) -> BTreeMap<SwitchIdx, ViewRead> {
    let sem = Arc::new(tokio::sync::Semaphore::new(64));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, s) in t.switches.iter().enumerate() {
        if !weft_reconcile::targets::selected(sel, i) {
            continue;
        }
        let (sem, db, fabric) = (sem.clone(), s.db.clone(), t.name.clone());
        tasks.spawn(async move {
            let _p = sem.acquire_owned().await;
            (i, read(&db, &fabric, want).await)
        });
    }
    let mut out = BTreeMap::new();
    while let Some(r) = tasks.join_next().await {
        if let Ok((i, r)) = r {
            out.insert(i, r);
        }
    }
    out
}

/// One end of a link as STATE_DB says: `up/up`, `down/up` (oper/admin), `?` unknown.
pub fn end_state(view: Option<&ViewRead>, port: &str) -> String {
    match view {
        Some(Ok(v)) => match v.ports.get(port) {
            Some(p) => format!(
                "{}/{}",
                p.oper_status.as_str(),
                p.admin_status.map_or("up", |a| a.as_str())
            ),
            None => "no row".into(),
        },
        _ => "?".into(),
    }
}

/// Whether an end is known to be up (`Some(true)`), down, or unknown.
pub fn end_up(view: Option<&ViewRead>, port: &str) -> Option<bool> {
    match view {
        Some(Ok(v)) => v.ports.get(port).map(PortState::is_up),
        _ => None,
    }
}

/// Every link's state from both ends: `Some(true)` both up, `Some(false)` an end down, `None`
/// unknown (a switch not read, or no row for the port).
pub fn link_states(t: &Topology, views: &BTreeMap<SwitchIdx, ViewRead>) -> Vec<Option<bool>> {
    t.links
        .iter()
        .map(|l| {
            let a = end_up(
                views.get(&l.a.switch),
                &t.switches[l.a.switch].ports[l.a.port].name,
            );
            let b = end_up(
                views.get(&l.b.switch),
                &t.switches[l.b.switch].ports[l.b.port].name,
            );
            match (a, b) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            }
        })
        .collect()
}

/// `running (pid 12, up 3m)`, `NO LIVE PLUGIN`.
pub fn plugin_summary(p: Option<&PluginStatus>) -> String {
    match p {
        None => "NO LIVE PLUGIN".into(),
        Some(p) => format!(
            "{} (pid {}, up {})",
            p.state.as_str(),
            p.pid,
            crate::human_duration(Duration::from_secs(p.uptime_s))
        ),
    }
}
