//! The shell around [`crate::core`]: carries out its reads and writes against each switch's
//! SONiC DBs and feeds the results back, with the time.
//!
//! Requests for one switch never overlap (the core keeps one in flight per switch), so each
//! switch's connections sit behind an uncontended lock; a semaphore bounds how many switches
//! are read or written at once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, Semaphore, mpsc};
use weft_sonic_db::zmq::DEFAULT_REPLY_TIMEOUT;
use weft_sonic_db::{P4RT_TABLE, SonicDb, SonicDbError, SonicDbId, Table, dump_tables};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::{InstalledDigests, PLUGIN_STATUS_KEY, PluginStatus};
use weft_topology::{Consumer, SwitchIdx, Topology};

use crate::core::{Batch, Input, Output, SwitchError};
use crate::damping::Nanos;
pub use crate::dberr::{db_error, one_line};
use crate::plan::{Installed, SonicReadiness, Source};
use crate::writer::{SwitchTarget, Writer};

/// How long to wait for a DB at all before calling the switch unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Time since the shell started, as the core counts it.
#[derive(Debug, Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    pub fn start() -> Self {
        Clock(Instant::now())
    }
    pub fn now(&self) -> Nanos {
        self.0.elapsed().as_nanos() as Nanos
    }
    pub fn instant(&self, at: Nanos) -> Instant {
        self.0 + Duration::from_nanos(at)
    }
}

/// [`db_error`]'s reason alone.
pub fn describe_db_error(db: &str, e: &SonicDbError) -> String {
    db_error(db, e).to_string()
}

async fn with_timeout<T>(
    db: &str,
    what: &str,
    f: impl std::future::Future<Output = Result<T, SonicDbError>>,
) -> Result<T, SwitchError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(db_error(db, &e)),
        Err(_) => Err(SwitchError::TimedOut {
            detail: format!("{db} did not answer {what} within {CONNECT_TIMEOUT:?}"),
        }),
    }
}

/// What the switch behind `db` has: APPL_STATE_DB P4RT_TABLE, Weft's CONFIG_DB tables, and
/// its plugin's status row.
pub async fn read_installed(db: &str) -> Result<Installed, SwitchError> {
    read_installed_of(db, Consumer::Weft).await
}

/// What the switch behind `db` has, as its consumer leaves it: weft-plugin's APPL_STATE_DB
/// and status row, or SONiC p4orch's APPL_DB P4RT_TABLE and SONiC's readiness.
pub async fn read_installed_of(db: &str, consumer: Consumer) -> Result<Installed, SwitchError> {
    with_timeout(db, "a read", read_installed_inner(db, consumer)).await
}

/// SONiC's own signals that p4orch takes entries ([`SonicReadiness`]).
pub async fn read_sonic_readiness(sonic: &SonicDb) -> Result<SonicReadiness, SonicDbError> {
    let ports = Table::new(sonic.connect(SonicDbId::ApplDb).await?, "PORT_TABLE")?;
    let warm = Table::new(
        sonic.connect(SonicDbId::StateDb).await?,
        "WARM_RESTART_TABLE",
    )?;
    Ok(SonicReadiness {
        ports_ready: ports.exists("PortInitDone").await?,
        warm_restart: warm.hget("orchagent", "state").await?,
    })
}

async fn read_installed_inner(db: &str, consumer: Consumer) -> Result<Installed, SonicDbError> {
    let sonic = SonicDb::from_endpoint(db)?;
    // p4orch writes what it applied back to APPL_DB P4RT_TABLE since sonic-swss#3066.
    let from = match consumer {
        Consumer::Weft => SonicDbId::ApplStateDb,
        Consumer::Sonic => SonicDbId::ApplDb,
    };
    let state = sonic.connect(from).await?;
    let mut entries = dump_tables(&state, &[P4RT_TABLE])
        .await?
        .remove(P4RT_TABLE)
        .unwrap_or_default();
    for f in entries.values_mut() {
        f.sort();
    }
    let mut config = BTreeMap::new();
    let conn = sonic.connect(SonicDbId::ConfigDb).await?;
    for (table, rows) in dump_tables(&conn, &weft_sonic_schema::config::owned_tables()).await? {
        for (k, mut v) in rows {
            v.sort();
            config.insert(format!("{table}|{k}"), v);
        }
    }
    let (source, plugin) = match consumer {
        Consumer::Weft => (Source::ApplStateDb, status_row(&sonic).await?),
        Consumer::Sonic => (
            Source::SonicApplDb(read_sonic_readiness(&sonic).await?),
            None,
        ),
    };
    Ok(Installed {
        entries,
        config,
        source,
        plugin,
    })
}

/// The plugin's status row of the switch behind `db` (`None`: no live plugin), and nothing
/// else: with its digests, `weft plan` knows whether the rows need reading at all.
pub async fn read_status(db: &str) -> Result<Option<PluginStatus>, SwitchError> {
    with_timeout(db, "a read", async {
        let sonic = SonicDb::from_endpoint(db)?;
        status_row(&sonic).await
    })
    .await
}

async fn status_row(sonic: &SonicDb) -> Result<Option<PluginStatus>, SonicDbError> {
    let status = Table::new(
        sonic.connect(SonicDbId::StateDb).await?,
        PluginStatus::TABLE,
    )?;
    Ok(status
        .get(PLUGIN_STATUS_KEY)
        .await?
        .and_then(|f| PluginStatus::from_fields(PLUGIN_STATUS_KEY, &f).ok()))
}

/// The status rows ([`read_status`]) of the switches `selected` says, a bounded number at a
/// time, read in a task of their own (the caller compiles meanwhile); the others are
/// `Ok(None)`.
pub fn spawn_status_reads(
    t: &Topology,
    selected: impl Fn(usize) -> bool,
    parallel: usize,
) -> tokio::task::JoinHandle<Vec<Result<Option<PluginStatus>, SwitchError>>> {
    let n = t.switches.len();
    let wanted: Vec<(usize, String, String)> = t
        .switches
        .iter()
        .enumerate()
        .filter(|(i, _)| selected(*i))
        .map(|(i, s)| (i, s.db.clone(), s.name.clone()))
        .collect();
    tokio::spawn(read_statuses(n, wanted, parallel))
}

async fn read_statuses(
    n: usize,
    wanted: Vec<(usize, String, String)>,
    parallel: usize,
) -> Vec<Result<Option<PluginStatus>, SwitchError>> {
    let sem = Arc::new(Semaphore::new(parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, db, name) in wanted {
        let sem = sem.clone();
        tasks.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let r = read_status(&db).await;
            match &r {
                Ok(st) => tracing::debug!(
                    switch = %name,
                    state = st.as_ref().map_or("no live plugin", |s| s.state.as_str()),
                    digests = st.as_ref().is_some_and(|s| s.digests().is_some()),
                    "status read"
                ),
                Err(e) => tracing::debug!(switch = %name, error = %e, "status read failed"),
            }
            (i, r)
        });
    }
    let mut out: Vec<Result<Option<PluginStatus>, SwitchError>> =
        (0..n).map(|_| Ok(None)).collect();
    while let Some(r) = tasks.join_next().await {
        if let Ok((i, r)) = r {
            out[i] = r;
        }
    }
    out
}

/// Reads the installed state of the switches `selected` says, a bounded number at a time; the
/// others stay "not read" (`Installed::default()`).
pub async fn read_all(
    t: &Topology,
    selected: impl Fn(usize) -> bool,
    parallel: usize,
) -> Vec<Installed> {
    let sem = Arc::new(Semaphore::new(parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, s) in t.switches.iter().enumerate() {
        if !selected(i) {
            continue;
        }
        let sem = sem.clone();
        let (db, name, consumer) = (s.db.clone(), s.name.clone(), s.consumer);
        tasks.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let r = read_installed_of(&db, consumer).await;
            match &r {
                Ok(inst) => tracing::debug!(switch = %name, installed = %inst.describe(), entries = inst.entries.len(), "read"),
                Err(e) => tracing::debug!(switch = %name, error = %e, "read failed"),
            }
            (i, r)
        });
    }
    let mut out: Vec<Installed> = (0..t.switches.len())
        .map(|_| Installed::default())
        .collect();
    while let Some(r) = tasks.join_next().await {
        if let Ok((i, r)) = r {
            out[i] = r.unwrap_or_else(|e| Installed::empty(format!("DB unreachable ({e})")));
        }
    }
    out
}

/// The fencing of an elected writer (`weft run --ha`): the term every write batch carries, and
/// a signal raised when a switch refused one (a newer leader took over).
#[derive(Debug, Default)]
pub struct Fence {
    term: std::sync::atomic::AtomicU64,
    pub refused: tokio::sync::Notify,
}

impl Fence {
    /// Writes carry `term` from now on (0: none may be written).
    pub fn set(&self, term: u64) {
        self.term.store(term, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn term(&self) -> u64 {
        self.term.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// How long to wait for a switch to answer one batch; `None`: do not wait (`--no-wait`).
    pub answer_timeout: Option<Duration>,
    /// Switches read or written at once.
    pub parallel: usize,
    /// Keep each switch's write connections between batches (`weft run`).
    pub keep_connections: bool,
    /// Fence every write with the leader's term (`weft run --ha`); `None`: unfenced.
    pub fence: Option<Arc<Fence>>,
}

/// Carries out the core's requests; results arrive on the channel given to [`Executor::new`].
pub struct Executor {
    targets: Vec<SwitchTarget>,
    writers: Vec<Arc<Mutex<Option<Writer>>>>,
    sem: Arc<Semaphore>,
    opts: ExecOptions,
    tx: mpsc::UnboundedSender<(Nanos, Input)>,
    clock: Clock,
}

impl Executor {
    pub fn new(
        t: &Topology,
        opts: ExecOptions,
        clock: Clock,
        tx: mpsc::UnboundedSender<(Nanos, Input)>,
    ) -> Self {
        Executor {
            targets: t
                .switches
                .iter()
                .map(|s| SwitchTarget {
                    db: s.db.clone(),
                    transport: s.transport.clone(),
                    consumer: s.consumer,
                })
                .collect(),
            writers: t
                .switches
                .iter()
                .map(|_| Arc::new(Mutex::new(None)))
                .collect(),
            sem: Arc::new(Semaphore::new(opts.parallel.max(1))),
            opts,
            tx,
            clock,
        }
    }

    /// Starts carrying out `out` if it is a request; others are the caller's to report.
    pub fn dispatch(&self, out: &Output) {
        match out {
            Output::Switch { switch, state }
                if !self.opts.keep_connections
                    && !matches!(state, crate::core::SwitchState::Writing { .. }) =>
            {
                // One pass: a switch done with writing needs its connections no more.
                if let Ok(mut g) = self.writers[*switch].try_lock() {
                    *g = None;
                }
            }
            Output::Read {
                switch,
                ticket,
                expect,
            } => self.read(*switch, *ticket, *expect),
            Output::Write {
                switch,
                ticket,
                batch,
            } => self.write(*switch, *ticket, batch.clone()),
            _ => {}
        }
    }

    fn read(&self, switch: SwitchIdx, ticket: u64, expect: Option<InstalledDigests>) {
        let db = self.targets[switch].db.clone();
        let consumer = self.targets[switch].consumer;
        let sem = self.sem.clone();
        let tx = self.tx.clone();
        let clock = self.clock;
        tokio::spawn(async move {
            let _permit = sem.acquire_owned().await;
            // The status row first: a plugin in sync publishing the expected digests saves
            // reading every row (a fabric's start and every resync).
            let known = match expect {
                Some(want) if consumer == Consumer::Weft => read_status(&db)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|st| Installed::by_digest(st, &want)),
                _ => None,
            };
            let result = match known {
                Some(k) => Ok(Box::new(k)),
                None => read_installed_of(&db, consumer).await.map(Box::new),
            };
            let _ = tx.send((
                clock.now(),
                Input::ReadBack {
                    switch,
                    ticket,
                    result,
                },
            ));
        });
    }

    fn write(&self, switch: SwitchIdx, ticket: u64, batch: Arc<Batch>) {
        let target = self.targets[switch].clone();
        let sem = self.sem.clone();
        let tx = self.tx.clone();
        let clock = self.clock;
        let slot = self.writers[switch].clone();
        let opts = self.opts.clone();
        tokio::spawn(async move {
            let _permit = sem.acquire_owned().await;
            let mut guard = slot.lock().await;
            let db = target.db.as_str();
            let result = async {
                if guard.is_none() {
                    let reply = opts.answer_timeout.unwrap_or(DEFAULT_REPLY_TIMEOUT);
                    let open = async {
                        Writer::open(&target, reply)
                            .await
                            .map_err(|e| e.switch_error(db))
                    };
                    *guard = Some(match tokio::time::timeout(CONNECT_TIMEOUT, open).await {
                        Ok(w) => w?,
                        Err(_) => {
                            return Err(SwitchError::TimedOut {
                                detail: format!(
                                    "{db} did not answer a connect within {CONNECT_TIMEOUT:?}"
                                ),
                            });
                        }
                    });
                }
                let Some(w) = guard.as_mut() else {
                    return Err(SwitchError::Unreachable {
                        detail: "no connection".into(),
                    });
                };
                let term = opts.fence.as_ref().map(|f| f.term());
                if term == Some(0) {
                    return Err(SwitchError::NotLeader);
                }
                match w.write(&batch, opts.answer_timeout, term).await {
                    Ok(a) => Ok(a),
                    Err(e) if e.is_fenced() => {
                        tracing::error!(switch_db = %db, error = %e, "write fenced");
                        if let Some(f) = &opts.fence {
                            f.refused.notify_one();
                        }
                        Err(e.switch_error(db))
                    }
                    Err(e) => Err(e.switch_error(db)),
                }
            }
            .await;
            if result.is_err() {
                *guard = None;
            }
            drop(guard);
            let _ = tx.send((
                clock.now(),
                Input::Written {
                    switch,
                    ticket,
                    result,
                },
            ));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_that_does_not_speak_redis_is_a_protocol_error_said_in_the_operators_words() {
        let db = "redis://127.0.0.1:8080";
        let e = SonicDbError::Connect {
            endpoint: db.into(),
            db: "APPL_DB",
            source: redis::RedisError::from((redis::ErrorKind::Parse, "Unexpected `84`")),
        };
        let got = db_error(db, &e);
        assert_eq!(got, SwitchError::Protocol { db: db.into() });
        assert!(
            got.to_string()
                .starts_with("not a Redis server at redis://127.0.0.1:8080:"),
            "{got}"
        );
        assert!(!got.to_string().contains("Unexpected"), "{got}");
    }

    #[test]
    fn a_fenced_write_keeps_its_terms_and_the_db_layers_words_and_is_not_retried() {
        let e = SonicDbError::Fenced { term: 3, held: 5 };
        let got = db_error("redis://x:6379", &e);
        assert_eq!(got, SwitchError::Fenced { term: 3, held: 5 });
        assert_eq!(got.to_string(), one_line(&e.to_string()));
        assert!(!got.retried());
        assert!(!SwitchError::NotLeader.retried());
    }

    #[test]
    fn a_connect_timeout_is_timed_out_and_a_refused_connection_unreachable_both_retried() {
        let timeout = SonicDbError::ConnectTimeout {
            endpoint: "redis://x:6379".into(),
            db: "STATE_DB",
            timeout: Duration::from_secs(3),
        };
        let got = db_error("redis://x:6379", &timeout);
        assert!(matches!(got, SwitchError::TimedOut { .. }), "{got:?}");
        assert_eq!(got.to_string(), timeout.to_string());
        assert!(got.retried());
        let refused = SonicDbError::Connect {
            endpoint: "redis://x:6379".into(),
            db: "STATE_DB",
            source: redis::RedisError::from(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused,
            )),
        };
        let got = db_error("redis://x:6379", &refused);
        assert!(matches!(got, SwitchError::Unreachable { .. }), "{got:?}");
        assert_eq!(got.to_string(), one_line(&refused.to_string()));
        assert!(got.retried());
    }
}
