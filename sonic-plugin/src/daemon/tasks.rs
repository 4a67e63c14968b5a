//! What each session runs beside its loop (the APPL_DB consumer, the CONFIG_DB watcher, the
//! responder that answers batches in order) and the Redis reads the session needs.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use weft_sonic_db::zmq::{AsyncDbUpdater, ZmqRequest};
use weft_sonic_db::{
    ConsumerStateTable, Digest, EntryResult, FieldValues, KeyOpFieldValues, P4RT_TABLE,
    ResponsePublisher, SonicDb, SonicDbError, SonicDbId, StateTableNames, TERM_KEY, Table,
    TableWatcher,
};

use crate::core::{Answered, Ended};

type End = Ended;

/// CONFIG_DB tables the plugin follows.
pub fn config_tables() -> Vec<&'static str> {
    weft_sonic_schema::config::owned_tables()
}

/// Answers batches in order (APPL_DB reverts, APPL_STATE_DB copies, then the notifications, as
/// swss-common's buffered ResponsePublisher does per batch, or the ZMQ reply for a batch that
/// came over ZMQ) in a task of its own, so the batch loop writes the next batch to the switch
/// meanwhile.
pub(super) struct Responder {
    tx: Option<mpsc::Sender<ToResponder>>,
    task: Option<JoinHandle<()>>,
}

/// Where the answers of a batch that came over ZMQ go, besides APPL_STATE_DB.
pub(super) enum ZmqAnswer {
    /// A part of the request whose first batch is `.0`: its answers wait for the last part.
    Part(u64),
    /// The last part: the reply goes with the answers of every part.
    Last(u64, Box<ZmqRequest>),
}

enum ToResponder {
    /// A batch's answers, and the ZMQ request they answer when it came that way.
    Answer(Answered, Option<ZmqAnswer>),
    /// Answered once everything before it is written.
    Flush(tokio::sync::oneshot::Sender<()>),
}

pub(super) type ResponderParts = (
    Responder,
    tokio::sync::oneshot::Receiver<String>,
    tokio::sync::watch::Receiver<Option<Digest>>,
);

impl Responder {
    /// `appl_state` is what APPL_STATE_DB holds now: the digest on the watch channel starts
    /// from it and follows every write.
    /// `behind` writes the ZMQ batches into APPL_DB: it is flushed before a ZMQ batch's
    /// answers are written, so APPL_DB never lags APPL_STATE_DB (a restart would take a row
    /// APPL_DB lacks for a delete to replay).
    pub(super) async fn start(
        sonic: &SonicDb,
        appl_live: Table,
        appl_state: &BTreeMap<String, FieldValues>,
        behind: Option<AsyncDbUpdater>,
    ) -> Result<ResponderParts, SonicDbError> {
        let mut publisher = ResponsePublisher::new(sonic, P4RT_TABLE).await?;
        publisher.track(appl_state);
        let (digest_tx, digest_rx) = tokio::sync::watch::channel(publisher.digest());
        let (tx, mut rx) = mpsc::channel::<ToResponder>(4);
        let (err_tx, err_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            // The answers of a ZMQ request's parts so far, by its first batch.
            let mut gathered: Option<(u64, Vec<EntryResult>)> = None;
            while let Some(m) = rx.recv().await {
                let (a, zmq) = match m {
                    ToResponder::Answer(a, zmq) => (a, zmq),
                    ToResponder::Flush(done) => {
                        let _ = done.send(());
                        continue;
                    }
                };
                let t0 = Instant::now();
                let r = async {
                    if let (Some(_), Some(u)) = (&zmq, &behind) {
                        u.flush().await?;
                    }
                    appl_live.replace_many(&a.revert, &a.remove).await?;
                    match zmq {
                        None => publisher.publish_batch(&a.results).await,
                        Some(z) => {
                            publisher.write_state(&a.results).await?;
                            let (id, req) = match z {
                                ZmqAnswer::Part(id) => (id, None),
                                ZmqAnswer::Last(id, req) => (id, Some(req)),
                            };
                            let mut all = match gathered.take() {
                                Some((g, all)) if g == id => all,
                                _ => Vec::new(),
                            };
                            all.extend(a.results.iter().cloned());
                            match req {
                                // The reply replaces the notifications (p4orch over ZMQ).
                                Some(req) => {
                                    if let Err(e) = req.reply(&all) {
                                        tracing::warn!(error = %e, "ZMQ reply not sent");
                                    }
                                }
                                None => gathered = Some((id, all)),
                            }
                            Ok(())
                        }
                    }
                }
                .await;
                tracing::debug!(
                    keys = a.results.len(),
                    ms = t0.elapsed().as_millis() as u64,
                    "batch answered"
                );
                if let Err(e) = r {
                    let _ = err_tx.send(e.to_string());
                    return;
                }
                digest_tx.send_if_modified(|d| {
                    let now = publisher.digest();
                    let changed = *d != now;
                    *d = now;
                    changed
                });
            }
        });
        Ok((
            Responder {
                tx: Some(tx),
                task: Some(task),
            },
            err_rx,
            digest_rx,
        ))
    }

    pub(super) async fn send(&mut self, a: Answered, zmq: Option<ZmqAnswer>) -> Result<(), End> {
        match &self.tx {
            Some(tx) => tx
                .send(ToResponder::Answer(a, zmq))
                .await
                .map_err(|_| Ended::Resync("responder stopped".into())),
            None => Err(Ended::Resync("responder stopped".into())),
        }
    }

    /// Waits until every answer sent so far is in APPL_STATE_DB (before reading it).
    pub(super) async fn flush(&mut self) -> Result<(), End> {
        let (done, wait) = tokio::sync::oneshot::channel();
        match &self.tx {
            Some(tx) if tx.send(ToResponder::Flush(done)).await.is_ok() => wait
                .await
                .map_err(|_| Ended::Resync("responder stopped".into())),
            _ => Err(Ended::Resync("responder stopped".into())),
        }
    }

    /// Writes what is queued, then stops.
    pub(super) async fn finish(&mut self) {
        self.tx = None;
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
    }
}

/// Aborts a task when dropped.
pub(super) struct AbortOnDrop(pub(super) JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Aborts the session's tasks when the session ends.
pub(super) struct Tasks(pub(super) Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

pub(super) async fn p4rt_tables(sonic: &SonicDb) -> Result<(Table, Table), SonicDbError> {
    let live = Table::new(sonic.connect(SonicDbId::ApplDb).await?, P4RT_TABLE)?;
    let state = Table::new(sonic.connect(SonicDbId::ApplStateDb).await?, P4RT_TABLE)?;
    Ok((live, state))
}

/// The term of the writer that last wrote APPL_DB (fencing), if any.
pub(super) async fn read_term(sonic: &SonicDb) -> Result<Option<u64>, SonicDbError> {
    let mut conn = sonic.connect(SonicDbId::ApplDb).await?;
    let v: Option<String> = redis::cmd("GET")
        .arg(TERM_KEY)
        .query_async(conn.raw())
        .await
        .map_err(|e| SonicDbError::Redis {
            context: "GET term".into(),
            source: e,
        })?;
    Ok(v.and_then(|t| t.trim().parse().ok()))
}

pub(super) async fn redis_run_id(sonic: &SonicDb) -> Result<String, SonicDbError> {
    let mut conn = sonic.connect(SonicDbId::ApplDb).await?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn.raw())
        .await
        .map_err(|e| SonicDbError::Redis {
            context: "INFO server".into(),
            source: e,
        })?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .unwrap_or("")
        .trim()
        .to_string())
}

/// Keys in APPL_DB waiting to be popped (the backlog).
pub(super) async fn pending_keys(sonic: &SonicDb) -> Result<u64, SonicDbError> {
    let names = StateTableNames::new(
        P4RT_TABLE,
        SonicDbId::ApplDb,
        sonic.db_number(SonicDbId::ApplDb),
    )?;
    let mut conn = sonic.connect(SonicDbId::ApplDb).await?;
    redis::cmd("SCARD")
        .arg(&names.key_set)
        .query_async(conn.raw())
        .await
        .map_err(|e| SonicDbError::Redis {
            context: "SCARD".into(),
            source: e,
        })
}

pub(super) async fn consumer_task(
    sonic: SonicDb,
    batch_size: usize,
    poll: Duration,
    tx: mpsc::Sender<Result<Vec<KeyOpFieldValues>, SonicDbError>>,
) {
    let mut consumer = match ConsumerStateTable::new(&sonic, SonicDbId::ApplDb, P4RT_TABLE).await {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.send(Err(e)).await;
            return;
        }
    };
    consumer.set_poll_interval(poll);
    loop {
        // Waits for room first: a popped batch is only ever held here, never dropped.
        let Ok(permit) = tx.reserve().await else {
            return;
        };
        match consumer.next_batch(batch_size).await {
            Ok(batch) => permit.send(Ok(batch)),
            Err(e) => {
                permit.send(Err(e));
                return;
            }
        }
    }
}

pub(super) async fn config_watch_task(sonic: SonicDb, tx: mpsc::Sender<()>) {
    let tables = config_tables();
    let run = async {
        let mut w = TableWatcher::new(&sonic, SonicDbId::ConfigDb, &tables).await?;
        loop {
            w.changed().await?;
            let _ = tx.try_send(());
        }
    };
    let Err(e): Result<std::convert::Infallible, SonicDbError> = run.await;
    tracing::warn!(error = %e, "CONFIG_DB watcher stopped");
}
