//! swss-common's `AsyncDBUpdater` (common/asyncdbupdater.cpp): the rows of a table written
//! behind the ZMQ channel, so readers of the DB (SONiC's tools, warm restart, `weft plan`, a
//! restarted consumer) see what went over it.
//!
//! Like swss-common's: a queue nobody waits on, a background writer, a SET replacing the row
//! (swss-common deletes it, then writes the fields), a DEL deleting it, and the queue drained
//! before the writer ends. Unlike it: every batch the writer finds queued is coalesced and
//! written by one script per 1024 rows (one atomic step each, where swss-common sends a DEL and
//! an HSET per row), a lost Redis connection is retried instead of ending the writer, and a
//! fenced writer's rows are refused whole when a newer leader holds the DB.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::wire;
use crate::db::{DbConnection, SonicDb, SonicDbId};
use crate::error::SonicDbError;
use crate::scripts::{LoadedScript, STATE_REPLACE, TABLE_REPLACE_FENCED, TERM_KEY, eval_loaded};
use crate::types::{KeyOpFieldValues, Op, check_table_name};

/// Rows per script: bounded so one script never holds Redis for long.
const ROWS_PER_SCRIPT: usize = 1024;

/// After its last handle is gone, how long the writer keeps retrying a lost Redis before it
/// gives up on what is left.
const GIVE_UP_AFTER: Duration = Duration::from_secs(30);

enum Job {
    Write {
        entries: Vec<KeyOpFieldValues>,
        term: Option<u64>,
    },
    Flush(oneshot::Sender<Result<(), SonicDbError>>),
}

struct Shared {
    queued: AtomicUsize,
    written: AtomicU64,
    dropped: AtomicU64,
    fence: Mutex<Option<u64>>,
}

/// A handle on one table's background writer. Cheap to clone; the writer ends once every
/// handle is gone and the queue is written.
#[derive(Clone)]
pub struct AsyncDbUpdater {
    tx: mpsc::UnboundedSender<Job>,
    shared: Arc<Shared>,
    db_name: String,
    table: String,
}

impl std::fmt::Debug for AsyncDbUpdater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncDbUpdater")
            .field("db", &self.db_name)
            .field("table", &self.table)
            .field("queued", &self.queue_size())
            .finish()
    }
}

impl AsyncDbUpdater {
    /// Starts the writer of `table` in `db` (needs a tokio runtime).
    pub async fn start(sonic: &SonicDb, db: SonicDbId, table: &str) -> Result<Self, SonicDbError> {
        check_table_name(table, db.separator())?;
        let mut conn = sonic.connect(db).await?;
        let scripts = Scripts {
            plain: LoadedScript::load(&mut conn, STATE_REPLACE).await?,
            fenced: LoadedScript::load(&mut conn, TABLE_REPLACE_FENCED).await?,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            queued: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            fence: Mutex::new(None),
        });
        let writer = Writer {
            sonic: sonic.clone(),
            db,
            conn,
            scripts,
            prefix: format!("{table}{}", db.separator()),
            shared: shared.clone(),
            rx,
            failure: None,
        };
        tokio::spawn(writer.run());
        Ok(AsyncDbUpdater {
            tx,
            shared,
            db_name: db.name().to_string(),
            table: table.to_string(),
        })
    }

    /// The DB's name as it travels on the wire (`APPL_DB`).
    pub fn db_name(&self) -> &str {
        &self.db_name
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Queues `entries` (never blocks, never fails: swss-common's `update`).
    pub fn update(&self, entries: Vec<KeyOpFieldValues>) {
        if entries.is_empty() {
            return;
        }
        let n = entries.len();
        let term = *self.shared.fence.lock().unwrap_or_else(|p| p.into_inner());
        self.shared.queued.fetch_add(n, Ordering::Relaxed);
        if self.tx.send(Job::Write { entries, term }).is_err() {
            self.shared.queued.fetch_sub(n, Ordering::Relaxed);
            self.shared.dropped.fetch_add(n as u64, Ordering::Relaxed);
            tracing::error!(table = %self.table, entries = n, "DB writer is gone; rows not written");
        }
    }

    /// Writes queued from now on carry `term`: refused whole (and counted as dropped) when the
    /// DB's `WEFT_LEADER_TERM` holds a newer one, like the fenced producer's batches.
    pub fn set_fence(&self, term: Option<u64>) {
        *self.shared.fence.lock().unwrap_or_else(|p| p.into_inner()) = term;
    }

    /// Entries queued and not written yet (swss-common's `dbUpdaterQueueSize`).
    pub fn queue_size(&self) -> usize {
        self.shared.queued.load(Ordering::Relaxed)
    }

    /// Rows written so far.
    pub fn written(&self) -> u64 {
        self.shared.written.load(Ordering::Relaxed)
    }

    /// Rows given up on so far (refused by Redis or fenced).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Waits until everything queued before the call is written. Err: the first write since
    /// the previous flush that Redis refused (a lost connection is retried, not an error).
    pub async fn flush(&self) -> Result<(), SonicDbError> {
        let (done, rx) = oneshot::channel();
        let gone = || SonicDbError::UnexpectedReply {
            context: format!("DB writer of {}", self.table),
            detail: "the writer has stopped".into(),
        };
        self.tx.send(Job::Flush(done)).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }
}

struct Scripts {
    plain: LoadedScript,
    fenced: LoadedScript,
}

struct Writer {
    sonic: SonicDb,
    db: SonicDbId,
    conn: DbConnection,
    scripts: Scripts,
    prefix: String,
    shared: Arc<Shared>,
    rx: mpsc::UnboundedReceiver<Job>,
    /// The first refused write since the last flush.
    failure: Option<SonicDbError>,
}

impl Writer {
    async fn run(mut self) {
        while let Some(first) = self.rx.recv().await {
            let mut jobs = vec![first];
            while let Ok(j) = self.rx.try_recv() {
                jobs.push(j);
            }
            // Consecutive writes of one term become one coalesced batch.
            let mut pending: Vec<KeyOpFieldValues> = Vec::new();
            let mut term = None;
            for job in jobs {
                match job {
                    Job::Write { entries, term: t } => {
                        if t != term && !pending.is_empty() {
                            self.write(std::mem::take(&mut pending), term).await;
                        }
                        term = t;
                        pending.extend(entries);
                    }
                    Job::Flush(done) => {
                        self.write(std::mem::take(&mut pending), term).await;
                        let _ = done.send(self.failure.take().map_or(Ok(()), Err));
                    }
                }
            }
            self.write(pending, term).await;
        }
    }

    async fn write(&mut self, entries: Vec<KeyOpFieldValues>, term: Option<u64>) {
        let queued = entries.len();
        if queued == 0 {
            return;
        }
        let (rows, _) = wire::coalesce(entries);
        for chunk in rows.chunks(ROWS_PER_SCRIPT) {
            match self.write_chunk(chunk, term).await {
                Ok(()) => {
                    self.shared
                        .written
                        .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::error!(prefix = %self.prefix, rows = chunk.len(), error = %e,
                        "rows not written behind the ZMQ channel");
                    self.shared
                        .dropped
                        .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    self.failure.get_or_insert(e);
                }
            }
        }
        self.shared.queued.fetch_sub(queued, Ordering::Relaxed);
    }

    /// One script; a lost connection is reopened and the script run again (it replaces rows
    /// whole, so running it twice leaves what running it once does).
    async fn write_chunk(
        &mut self,
        rows: &[KeyOpFieldValues],
        term: Option<u64>,
    ) -> Result<(), SonicDbError> {
        let term_arg = term.map(|t| t.to_string());
        let mut keys: Vec<String> = Vec::with_capacity(rows.len() + 1);
        let mut args: Vec<String> = Vec::with_capacity(rows.len() * 8 + 1);
        if let Some(t) = &term_arg {
            keys.push(TERM_KEY.to_string());
            args.push(t.clone());
        }
        for r in rows {
            keys.push(format!("{}{}", self.prefix, r.key));
            match r.op {
                Op::Del => args.push("-1".into()),
                Op::Set => {
                    args.push(r.fields.len().to_string());
                    for (f, v) in &r.fields {
                        args.push(f.clone());
                        args.push(v.clone());
                    }
                }
            }
        }
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut backoff = Duration::from_millis(100);
        let mut orphaned_since: Option<Instant> = None;
        loop {
            let script = if term.is_some() {
                &mut self.scripts.fenced
            } else {
                &mut self.scripts.plain
            };
            let err = match eval_loaded(&mut self.conn, script, &keys, &args, "DB write behind ZMQ")
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) if e.is_connection_error() => e,
                Err(e) => return Err(fenced_or(e)),
            };
            if self.rx.is_closed() {
                let since = *orphaned_since.get_or_insert_with(Instant::now);
                if since.elapsed() > GIVE_UP_AFTER {
                    return Err(err);
                }
            }
            tracing::warn!(error = %err, retry_in = ?backoff, "DB writer lost Redis; retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
            if let Ok(c) = self.sonic.connect(self.db).await {
                self.conn = c;
            }
        }
    }
}

/// A fencing refusal as [`SonicDbError::Fenced`], anything else as it is.
fn fenced_or(e: SonicDbError) -> SonicDbError {
    if let SonicDbError::Redis { source, .. } = &e
        && let Some((term, held)) = crate::error::fenced(source)
    {
        return SonicDbError::Fenced { term, held };
    }
    e
}
