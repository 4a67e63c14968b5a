//! Where the page's readings come from: [`DbSource`] reads each switch's SONiC DBs (the rows
//! `weft status`, `top` and `diagnose` read, over connections kept between reads), and
//! [`PromSource`] asks Prometheus for the plugin's metric families (`weft_observe::promql`)
//! and each switch's STATE_DB for port state, which no metric carries. A [`Source`] gives one
//! [`Reading`] of every switch per call; what it could not read it says per switch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::future::BoxFuture;
use weft_observe::read::{READ_TIMEOUT, ReadError, SwitchRead, bounded};
use weft_sonic_db::{DbConnection, FieldValues, SonicDb, SonicDbError, SonicDbId, dump_tables};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::{PfcWdState, PluginStatus, PortState};
use weft_topology::Topology;

use crate::page::SourceInfo;
use crate::reading::{PluginInfo, Reading, SwitchReading};

/// Switches read at once.
const PARALLEL: usize = 64;

/// One reading of every switch per call.
pub trait Source: Send + Sync {
    fn info(&self) -> SourceInfo;
    fn read<'a>(&'a self, t: &'a Topology) -> BoxFuture<'a, Reading>;
}

/// Connections to one switch's DBs, opened on first use and dropped on an error (the next
/// read opens them again).
#[derive(Default)]
struct Conns {
    state: Option<DbConnection>,
    counters: Option<DbConnection>,
}

/// Each switch's SONiC DBs, the default source.
pub struct DbSource {
    conns: Vec<Arc<tokio::sync::Mutex<Conns>>>,
}

impl DbSource {
    pub fn new(t: &Topology) -> DbSource {
        DbSource {
            conns: (0..t.switches.len()).map(|_| Arc::default()).collect(),
        }
    }
}

/// The STATE_DB tables the page reads.
const STATE_TABLES: [&str; 4] = [
    PortState::TABLE,
    PluginStatus::TABLE,
    PfcWdState::TABLE,
    weft_observe::diagnose::DRIFT_TABLE,
];

type Tables = BTreeMap<String, BTreeMap<String, FieldValues>>;

async fn conn(
    slot: &mut Option<DbConnection>,
    db: &str,
    id: SonicDbId,
) -> Result<DbConnection, SonicDbError> {
    if let Some(c) = slot {
        return Ok(c.clone());
    }
    let c = SonicDb::from_endpoint(db)?.connect(id).await?;
    *slot = Some(c.clone());
    Ok(c)
}

/// `tables` of DB `id` over the kept connection, within [`READ_TIMEOUT`].
async fn read_db(
    slot: &mut Option<DbConnection>,
    db: &str,
    id: SonicDbId,
    tables: &[&str],
) -> Result<Tables, ReadError> {
    let r = bounded(db, READ_TIMEOUT, async {
        let c = conn(slot, db, id)
            .await
            .map_err(|e| ReadError::db(db, &e))?;
        dump_tables(&c, tables)
            .await
            .map_err(|e| ReadError::db(db, &e))
    })
    .await;
    if r.is_err() {
        *slot = None;
    }
    r
}

/// One switch: STATE_DB, then COUNTERS_DB.
async fn read_switch(t: &Topology, i: usize, c: &tokio::sync::Mutex<Conns>) -> SwitchReading {
    let sw = &t.switches[i];
    let mut c = c.lock().await;
    let state = read_db(&mut c.state, &sw.db, SonicDbId::StateDb, &STATE_TABLES).await;
    // A DB that did not answer for STATE_DB is not asked again for COUNTERS_DB in this read.
    let counters = match &state {
        Ok(_) => read_db(
            &mut c.counters,
            &sw.db,
            SonicDbId::CountersDb,
            &["COUNTERS"],
        )
        .await
        .map(|mut m| {
            m.remove("COUNTERS")
                .unwrap_or_default()
                .into_iter()
                .collect()
        }),
        Err(e) => Err(e.clone()),
    };
    let counters: Result<Vec<(String, FieldValues)>, ReadError> = counters;
    SwitchReading::from_rows(sw, state.as_ref(), counters.as_deref())
}

/// Every switch through `one`, [`PARALLEL`] at a time, in index order.
pub async fn read_all<'a, F, Fut>(t: &'a Topology, one: F) -> Reading
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = SwitchReading> + 'a,
{
    use futures::StreamExt;
    let started = Instant::now();
    let t_ms = weft_observe::now_ms();
    let switches = futures::stream::iter((0..t.switches.len()).map(one))
        .buffered(PARALLEL)
        .collect::<Vec<_>>()
        .await;
    Reading {
        t_ms,
        switches,
        took_ms: started.elapsed().as_millis() as u64,
    }
}

impl Source for DbSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            name: "switch DBs".into(),
            no_plugin: "no live plugin: no WEFT_PLUGIN|status row in STATE_DB".into(),
        }
    }

    fn read<'a>(&'a self, t: &'a Topology) -> BoxFuture<'a, Reading> {
        Box::pin(read_all(t, move |i| read_switch(t, i, &self.conns[i])))
    }
}

/// Prometheus for counters and plugins; STATE_DB (through a [`DbSource`]) for port state.
pub struct PromSource {
    client: weft_observe::promql::Client,
    db: DbSource,
    /// The last error talking to Prometheus, for the log (said once per change).
    last_error: Mutex<Option<String>>,
}

impl PromSource {
    pub fn new(t: &Topology, client: weft_observe::promql::Client) -> PromSource {
        PromSource {
            client,
            db: DbSource::new(t),
            last_error: Mutex::new(None),
        }
    }

    async fn read_prom(&self, t: &Topology) -> Reading {
        let prom = weft_observe::promql::read(&self.client, t).await;
        if let Ok(mut last) = self.last_error.lock() {
            let now = prom.as_ref().err().map(ToString::to_string);
            if now != *last {
                if let Some(e) = &now {
                    tracing::warn!(error = %e, "prometheus");
                }
                *last = now;
            }
        }
        let mut by_switch = match prom {
            Ok(m) => m,
            Err(e) => {
                let err = ReadError::Unreachable {
                    db: self.client.url().to_string(),
                    reason: e.to_string(),
                };
                return Reading {
                    t_ms: weft_observe::now_ms(),
                    switches: t
                        .switches
                        .iter()
                        .map(|_| SwitchReading::unread(err.clone()))
                        .collect(),
                    took_ms: 0,
                };
            }
        };
        let started = Instant::now();
        let t_ms = weft_observe::now_ms();
        let ports = self.db.read(t).await;
        let switches = ports
            .switches
            .into_iter()
            .zip(&t.switches)
            .map(|(from_db, sw)| {
                let m = by_switch.remove(&sw.name).unwrap_or_default();
                let (plugin, counters, sample) = prom_reading(&m, sw);
                SwitchReading {
                    ports: from_db.ports,
                    plugin,
                    counters,
                    sample,
                }
            })
            .collect();
        Reading {
            t_ms,
            switches,
            took_ms: started.elapsed().as_millis() as u64,
        }
    }
}

/// The plugin and counters of one switch as the page takes them.
fn prom_reading(
    m: &weft_observe::promql::SwitchMetrics,
    sw: &weft_topology::Switch,
) -> (
    SwitchRead<PluginInfo>,
    SwitchRead<crate::reading::CounterView>,
    Option<weft_diagnose::SwitchSample>,
) {
    let plugin = match m.plugin() {
        SwitchRead::Ok((state, ms)) => SwitchRead::Ok(PluginInfo {
            state,
            updated_ms: ms,
            pid: None,
            uptime_s: None,
            pending_keys: None,
        }),
        SwitchRead::Stale { data, why } => SwitchRead::Stale {
            data: PluginInfo {
                state: data.0,
                updated_ms: data.1,
                pid: None,
                uptime_s: None,
                pending_keys: None,
            },
            why,
        },
        SwitchRead::NoData => SwitchRead::NoData,
        SwitchRead::Unreachable(e) => SwitchRead::Unreachable(e),
    };
    let (rows, wd) = m.rows();
    if rows.is_empty() {
        return (plugin, SwitchRead::NoData, None);
    }
    let (v, s) = crate::reading::counters_of(sw, &rows, &wd, &[]);
    (plugin, SwitchRead::Ok(v), Some(s))
}

impl Source for PromSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            name: format!("prometheus {}", self.client.url()),
            no_plugin: "no weft_p4rt_primary series for this switch in Prometheus (not scraped?)"
                .into(),
        }
    }

    fn read<'a>(&'a self, t: &'a Topology) -> BoxFuture<'a, Reading> {
        Box::pin(self.read_prom(t))
    }
}
