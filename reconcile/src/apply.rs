//! The I/O edge of plan and apply: read what each switch has from its SONiC DB, and write the
//! difference (CONFIG_DB rows, then P4RT_TABLE entries stage by stage, waiting for every
//! response before the next stage: make before break).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::Semaphore;
use weft_sonic_db::{
    KeyOpFieldValues, ProducerStateTable, ResponseWaiter, SonicDb, SonicDbError, SonicDbId, Table,
};

use crate::plan::{Installed, OWNED_CONFIG_TABLES, SwitchPlan};
use weft_compiler::p4map::Stage;

pub const P4RT_TABLE: &str = "P4RT_TABLE";

/// How long to wait for the DB at all before calling a switch unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

async fn read_installed_inner(endpoint: &str) -> Result<Installed, SonicDbError> {
    let sonic = SonicDb::from_endpoint(endpoint)?;
    let state = Table::new(sonic.connect(SonicDbId::ApplStateDb).await?, P4RT_TABLE)?;
    let snap = state.read_p4rt().await?;
    let mut config = BTreeMap::new();
    let conn = sonic.connect(SonicDbId::ConfigDb).await?;
    for table in OWNED_CONFIG_TABLES {
        let t = Table::new(conn.clone(), table)?;
        for (k, v) in t.dump().await? {
            config.insert(format!("{table}|{k}"), v);
        }
    }
    Ok(Installed {
        entries: snap.entries,
        malformed: snap.malformed.into_iter().map(|(k, _)| k).collect(),
        config,
        source: "APPL_STATE_DB".into(),
    })
}

/// What the switch behind `endpoint` has; empty (and saying why) when its DB cannot be read.
pub async fn read_installed(endpoint: &str) -> Installed {
    match tokio::time::timeout(CONNECT_TIMEOUT, read_installed_inner(endpoint)).await {
        Ok(Ok(i)) => i,
        Ok(Err(e)) => Installed {
            source: format!("empty: DB unreachable ({e})"),
            ..Installed::default()
        },
        Err(_) => Installed {
            source: "empty: DB did not answer in 3s".into(),
            ..Installed::default()
        },
    }
}

/// Reads every switch's installed state, a bounded number at a time.
pub async fn read_all(endpoints: Vec<(String, String)>) -> BTreeMap<String, Installed> {
    let sem = Arc::new(Semaphore::new(64));
    let mut tasks = tokio::task::JoinSet::new();
    for (name, ep) in endpoints {
        let sem = sem.clone();
        tasks.spawn(async move {
            let _permit = sem.acquire_owned().await;
            (name, read_installed(&ep).await)
        });
    }
    let mut out = BTreeMap::new();
    while let Some(r) = tasks.join_next().await {
        if let Ok((n, i)) = r {
            out.insert(n, i);
        }
    }
    out
}

#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub key: String,
    pub status: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct SwitchResult {
    pub switch: String,
    pub written: usize,
    pub config_written: usize,
    /// Written without waiting for an answer (`--no-wait`).
    pub unanswered: usize,
    pub failed: Vec<Failure>,
    /// The switch could not be written at all.
    pub error: Option<String>,
    pub millis: u128,
}

impl SwitchResult {
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.failed.is_empty()
    }
}

/// Rows that others refer to (maps, profiles, ports) are written before the rows that refer to
/// them, so a switch watching CONFIG_DB never sees a dangling reference.
fn config_rank(table: &str) -> u8 {
    match table {
        "DSCP_TO_TC_MAP"
        | "TC_TO_QUEUE_MAP"
        | "TC_TO_PRIORITY_GROUP_MAP"
        | "WRED_PROFILE"
        | "BUFFER_PROFILE" => 0,
        "PORT" | "CABLE_LENGTH" => 1,
        _ => 2,
    }
}

/// Progress reports while a switch is written: (switch, done, total).
pub type Progress = Arc<dyn Fn(&str, usize, usize) + Send + Sync>;

async fn apply_inner(
    plan: &SwitchPlan,
    timeout: Option<Duration>,
    progress: &Progress,
    r: &mut SwitchResult,
) -> Result<(), SonicDbError> {
    let sonic = SonicDb::from_endpoint(&plan.db)?;
    // Subscribe before writing, or a fast plugin's answers are lost.
    let mut waiter = ResponseWaiter::subscribe(&sonic, P4RT_TABLE).await?;
    let total = plan.counts.add + plan.counts.modify + plan.counts.delete;

    // CONFIG_DB first: the plugin resolves port names in entries through PORT|EthernetN.
    let conn = sonic.connect(SonicDbId::ConfigDb).await?;
    let mut rows: Vec<&weft_compiler::qos::ConfigRow> = plan.config_set.iter().collect();
    rows.sort_by_key(|r| config_rank(&r.table));
    for row in rows {
        let t = Table::new(conn.clone(), &row.table)?;
        let fields: Vec<(&str, &str)> = row
            .fields
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        t.replace(&row.key, &fields).await?;
        r.config_written += 1;
    }
    for k in &plan.config_delete {
        if let Some((table, key)) = k.split_once('|') {
            Table::new(conn.clone(), table)?.del(key).await?;
            r.config_written += 1;
        }
    }

    let mut producer = ProducerStateTable::new(&sonic, SonicDbId::ApplDb, P4RT_TABLE).await?;
    let mut done = 0;
    let mut sets: BTreeMap<Stage, Vec<KeyOpFieldValues>> = BTreeMap::new();
    for c in plan.add.iter().chain(&plan.modify) {
        if let Some(e) = &c.entry {
            sets.entry(c.stage).or_default().push(e.to_set_op());
        }
    }
    let mut dels: BTreeMap<Stage, Vec<KeyOpFieldValues>> = BTreeMap::new();
    for c in &plan.delete {
        dels.entry(c.stage)
            .or_default()
            .push(KeyOpFieldValues::del(c.key.clone()));
    }
    let batches = sets.into_values().chain(dels.into_values().rev());
    for ops in batches {
        // A failed earlier stage would leave later entries dangling (a route to a missing
        // group): stop and report instead.
        if !r.failed.is_empty() {
            break;
        }
        producer.apply(&ops).await?;
        let keys: Vec<String> = ops.iter().map(|o| o.key.clone()).collect();
        let Some(timeout) = timeout else {
            // Not waiting: nothing says the switch took them.
            r.written += keys.len();
            r.unanswered += keys.len();
            continue;
        };
        let outcome = waiter.wait(keys.clone(), timeout).await?;
        for k in &keys {
            match outcome.responses.get(k) {
                Some(resp) if resp.status.is_ok() => r.written += 1,
                Some(resp) => r.failed.push(Failure {
                    key: k.clone(),
                    status: resp.status_str.clone(),
                    message: resp.message.clone(),
                }),
                None => r.failed.push(Failure {
                    key: k.clone(),
                    status: "TIMEOUT".into(),
                    message: format!(
                        "no response within {timeout:?}: is the switch's plugin running?"
                    ),
                }),
            }
        }
        done += ops.len();
        progress(&plan.name, done, total);
    }
    Ok(())
}

/// Writes one switch's plan and waits for every response.
pub async fn apply_switch(
    plan: &SwitchPlan,
    timeout: Option<Duration>,
    progress: &Progress,
) -> SwitchResult {
    let t0 = Instant::now();
    let mut r = SwitchResult {
        switch: plan.name.clone(),
        ..SwitchResult::default()
    };
    if let Err(e) = apply_inner(plan, timeout, progress, &mut r).await {
        r.error = Some(e.to_string());
    }
    r.millis = t0.elapsed().as_millis();
    r
}

/// Writes every switch concurrently (a bounded number at once); one unreachable switch does not
/// stop the others.
pub async fn apply_all(
    plans: Vec<SwitchPlan>,
    timeout: Option<Duration>,
    progress: Progress,
) -> Vec<SwitchResult> {
    let sem = Arc::new(Semaphore::new(64));
    let mut tasks = tokio::task::JoinSet::new();
    for p in plans {
        let sem = sem.clone();
        let progress = progress.clone();
        tasks.spawn(async move {
            let _permit = sem.acquire_owned().await;
            apply_switch(&p, timeout, &progress).await
        });
    }
    let mut out = Vec::new();
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(x) => out.push(x),
            Err(e) => out.push(SwitchResult {
                error: Some(format!("task failed: {e}")),
                ..SwitchResult::default()
            }),
        }
    }
    out.sort_by(|a, b| a.switch.cmp(&b.switch));
    out
}
