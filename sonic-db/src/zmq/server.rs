//! The serving end: swss-common's `ZmqServer` + `ZmqConsumerStateTable`, async.
//!
//! A dedicated thread owns the libzmq socket (as swss-common's `mqPollThread` does). It
//! decodes each message, refuses what is malformed, too large or for a table it does not
//! serve (answering a request/reply client at once, so none waits out its timeout), and hands
//! the rest to [`ZmqServer::next`]. In request/reply mode the next request is read only once
//! the current one is answered ([`ZmqRequest::reply`]), as ZMQ_REP requires.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use tokio::sync::mpsc;

use super::endpoint::ZmqEndpoint;
use super::error::{WireError, ZmqError};
use super::socket::{self, MQ_WATERMARK, Tuning, ZmqMode};
use super::updater::AsyncDbUpdater;
use super::wire::{self, MQ_RESPONSE_MAX_COUNT, ZmqBatch};
use crate::response::{EntryResult, StatusCode};
use crate::types::KeyOpFieldValues;

/// How often the thread looks up from an idle socket to see whether it should stop
/// (swss-common's poll thread: every 1000 ms).
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// How a [`ZmqServer`] behaves.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub mode: ZmqMode,
    /// The (DB name, table) pairs served (swss-common registers one handler per pair); empty:
    /// every pair.
    pub tables: Vec<(String, String)>,
    /// Messages of this many bytes or more are refused (swss-common cannot receive them).
    pub max_message: usize,
    /// ZMQ_RCVHWM of a pull socket, in messages.
    pub rcvhwm: i32,
    /// Push mode: at most this many entries are gathered into one batch from the messages
    /// that queued while the previous batch was being handled.
    pub max_batch: usize,
    /// Writes each accepted batch of the updater's table into its DB, as swss-common's
    /// `ZmqConsumerStateTable` does with `dbPersistence`.
    pub persist: Option<AsyncDbUpdater>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            mode: ZmqMode::RequestReply,
            tables: Vec::new(),
            max_message: MQ_RESPONSE_MAX_COUNT,
            rcvhwm: MQ_WATERMARK,
            max_batch: 100_000,
            persist: None,
        }
    }
}

impl ServerOptions {
    /// Serves only `table` of the database named `db`.
    pub fn serving(mut self, db: &str, table: &str) -> Self {
        self.tables.push((db.to_string(), table.to_string()));
        self
    }

    fn serves(&self, db: &str, table: &str) -> bool {
        self.tables.is_empty() || self.tables.iter().any(|(d, t)| d == db && t == table)
    }
}

/// A batch the server received.
#[derive(Debug)]
pub struct ZmqRequest {
    pub db: String,
    pub table: String,
    /// The writer's fencing term, when it sent one.
    pub term: Option<u64>,
    /// The entries, one per key (repeated writes of a key coalesced to the last).
    pub entries: Vec<KeyOpFieldValues>,
    /// Writes dropped by that coalescing.
    pub coalesced: usize,
    /// How many messages the batch gathers (push mode: those that queued meanwhile).
    pub messages: usize,
    reply: Option<std_mpsc::SyncSender<Vec<u8>>>,
    max_message: usize,
}

impl ZmqRequest {
    /// True in request/reply mode: the client waits for [`Self::reply`].
    pub fn expects_reply(&self) -> bool {
        self.reply.is_some()
    }

    /// Answers every key (request/reply mode; push mode: nothing to do). A request dropped
    /// unanswered is answered with SWSS_RC_UNKNOWN for every key (no verdict).
    pub fn reply(mut self, results: &[EntryResult]) -> Result<(), ZmqError> {
        let Some(tx) = self.reply.take() else {
            return Ok(());
        };
        let bytes = wire::encode_reply(&self.db, &self.table, results, self.max_message);
        tx.send(bytes).map_err(|_| ZmqError::Closed {
            what: "server (the request's client is no longer served)",
        })
    }
}

/// Counters of a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub messages: u64,
    pub entries: u64,
    /// Messages refused whole (malformed, too large, unknown table).
    pub refused: u64,
    pub coalesced: u64,
}

#[derive(Default)]
struct Counters {
    messages: AtomicU64,
    entries: AtomicU64,
    refused: AtomicU64,
    coalesced: AtomicU64,
}

type Incoming = Result<ZmqRequest, ZmqError>;

/// Receives batches on an endpoint. Drop it (or [`Self::shutdown`]) to close the socket.
pub struct ZmqServer {
    endpoint: ZmqEndpoint,
    rx: mpsc::Receiver<Incoming>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
}

impl ZmqServer {
    /// Binds `endpoint` (an ipc path's directory must exist; a stale socket file is replaced)
    /// and starts serving.
    pub fn bind(endpoint: &ZmqEndpoint, options: ServerOptions) -> Result<Self, ZmqError> {
        endpoint.check()?;
        let ep = endpoint.to_string();
        let tuning = Tuning {
            sndhwm: None,
            rcvhwm: (options.mode == ZmqMode::PushPull).then_some(options.rcvhwm),
            // Messages up to 4× the limit are read and refused with a reason; bigger ones
            // make libzmq drop the peer instead of this process holding them.
            max_message: Some(4 * options.max_message as i64),
        };
        let context = socket::context();
        let sock = socket::open(&context, options.mode.server_kind(), &ep, tuning)?;
        sock.bind(&ep)
            .map_err(|e| ZmqError::socket(&ep, "bind", e))?;
        let bound = sock
            .get_last_endpoint()
            .ok()
            .and_then(|r| r.ok())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| endpoint.clone());
        // libzmq leaves an ipc socket's file behind when it closes; remember which file this
        // bind made, to remove that one and no other.
        let ipc_file = bound.ipc_path().and_then(|p| {
            let ino = std::fs::metadata(p).ok()?.ino();
            Some((p.to_path_buf(), ino))
        });
        let (tx, rx) = mpsc::channel(1);
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let ctx = Ctx {
            socket: sock,
            _context: context,
            ipc_file,
            options,
            tx,
            stop: stop.clone(),
            counters: counters.clone(),
        };
        let thread = thread::Builder::new()
            .name("weft-zmq-server".into())
            .spawn(move || ctx.run())
            .map_err(|_| ZmqError::Closed {
                what: "server thread (could not be started)",
            })?;
        Ok(ZmqServer {
            endpoint: bound,
            rx,
            stop,
            counters,
            thread: Some(thread),
        })
    }

    /// The endpoint bound (for `tcp://HOST:*`, with the port chosen).
    pub fn endpoint(&self) -> &ZmqEndpoint {
        &self.endpoint
    }

    /// The next batch, or why a message was refused (already answered, if a client waits).
    /// `None` once the server has stopped.
    pub async fn next(&mut self) -> Option<Result<ZmqRequest, ZmqError>> {
        self.rx.recv().await
    }

    pub fn stats(&self) -> ServerStats {
        let c = &self.counters;
        ServerStats {
            messages: c.messages.load(Ordering::Relaxed),
            entries: c.entries.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            coalesced: c.coalesced.load(Ordering::Relaxed),
        }
    }

    /// Stops serving and waits until the socket is closed and its ipc socket file removed,
    /// so the endpoint can be bound again. A request being handled gets no reply: its client
    /// learns that the server went away.
    pub async fn shutdown(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.rx.close();
        if let Some(t) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

impl Drop for ZmqServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What the server thread owns.
struct Ctx {
    socket: zmq::Socket,
    /// Dropped after the socket: terminating it waits until libzmq has closed the listener.
    _context: zmq::Context,
    /// The ipc socket file this server made (path, inode).
    ipc_file: Option<(PathBuf, u64)>,
    options: ServerOptions,
    tx: mpsc::Sender<Incoming>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
}

impl Ctx {
    fn run(self) {
        let ep = self.socket.get_last_endpoint().ok().and_then(|r| r.ok());
        loop {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            match self
                .socket
                .poll(zmq::POLLIN, POLL_INTERVAL.as_millis() as i64)
            {
                Ok(n) if n > 0 => {}
                Ok(_) | Err(zmq::Error::EINTR) => continue,
                Err(e) => {
                    tracing::error!(endpoint = ?ep, error = %e, "ZMQ poll failed; server stops");
                    break;
                }
            }
            let go_on = match self.options.mode {
                ZmqMode::RequestReply => self.answer_one(),
                ZmqMode::PushPull => self.gather(),
            };
            if !go_on {
                break;
            }
        }
        tracing::debug!(endpoint = ?ep, "ZMQ server thread ends");
        let Ctx {
            socket,
            _context,
            ipc_file,
            ..
        } = self;
        drop(socket);
        drop(_context);
        if let Some((path, ino)) = ipc_file
            && std::fs::metadata(&path).is_ok_and(|m| m.ino() == ino)
        {
            let _ = std::fs::remove_file(&path);
        }
    }

    /// A message's batch, or why it is refused.
    fn decode(&self, bytes: &[u8], frames: usize) -> Result<ZmqBatch, ZmqError> {
        if frames != 1 {
            return Err(WireError::MultiPart { frames }.into());
        }
        if bytes.len() >= self.options.max_message {
            return Err(WireError::TooLarge {
                bytes: bytes.len(),
                limit: self.options.max_message,
            }
            .into());
        }
        Ok(wire::decode(bytes)?)
    }

    fn refused(&self, error: &ZmqError) {
        self.counters.refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(error = %error, "ZMQ message refused");
    }

    fn accepted(&self, request: &ZmqRequest) {
        let c = &self.counters;
        c.messages
            .fetch_add(request.messages as u64, Ordering::Relaxed);
        c.entries
            .fetch_add(request.entries.len() as u64, Ordering::Relaxed);
        c.coalesced
            .fetch_add(request.coalesced as u64, Ordering::Relaxed);
    }

    /// What to write behind for `request`, if this server writes its table behind.
    fn to_persist(&self, request: &ZmqRequest) -> Option<(AsyncDbUpdater, Vec<KeyOpFieldValues>)> {
        let u = self.options.persist.as_ref()?;
        (u.db_name() == request.db && u.table() == request.table)
            .then(|| (u.clone(), request.entries.clone()))
    }

    /// Hands `item` to the consumer once it has room, queueing its entries to be written
    /// behind first: only what the consumer gets reaches the DB, and a consumer that flushes
    /// the writer after taking a batch finds the batch written. False when the consumer is
    /// gone.
    fn deliver(&self, item: Incoming, permit: Option<mpsc::Permit<'_, Incoming>>) -> bool {
        let permit = match permit {
            Some(p) => p,
            None => match futures::executor::block_on(self.tx.reserve()) {
                Ok(p) => p,
                Err(_) => return false,
            },
        };
        if let Ok(r) = &item {
            self.accepted(r);
            if let Some((u, entries)) = self.to_persist(r) {
                u.update(entries);
            }
        }
        permit.send(item);
        true
    }

    fn send(&self, bytes: &[u8]) {
        if let Err(e) = self.socket.send(bytes, 0) {
            tracing::warn!(error = %e, "ZMQ reply could not be sent");
        }
    }

    fn request(&self, batch: ZmqBatch, messages: usize) -> ZmqRequest {
        let (entries, coalesced) = wire::coalesce(batch.entries);
        ZmqRequest {
            db: batch.db,
            table: batch.table,
            term: batch.term,
            entries,
            coalesced,
            messages,
            reply: None,
            max_message: self.options.max_message,
        }
    }

    /// Request/reply: reads one request and sees that it gets exactly one reply. Returns
    /// false when the server should stop.
    fn answer_one(&self) -> bool {
        let (bytes, frames) = match socket::recv_message(&self.socket) {
            Ok(m) => m,
            Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => return true,
            Err(e) => {
                tracing::error!(error = %e, "ZMQ recv failed; server stops");
                return false;
            }
        };
        let batch = match self.decode(&bytes, frames) {
            Ok(b) => b,
            Err(e) => {
                self.refused(&e);
                let reason = format!("message refused, nothing applied: {e}");
                self.send(&wire::encode_refusal(
                    "",
                    "",
                    StatusCode::InvalidParam,
                    &reason,
                ));
                return self.tx.blocking_send(Err(e)).is_ok();
            }
        };
        if !self.options.serves(&batch.db, &batch.table) {
            let e = ZmqError::UnknownTable {
                db: batch.db.clone(),
                table: batch.table.clone(),
            };
            self.refused(&e);
            self.send(&self.per_key(&batch, StatusCode::InvalidParam, &e.to_string()));
            return self.tx.blocking_send(Err(e)).is_ok();
        }
        let (reply_tx, reply_rx) = std_mpsc::sync_channel(1);
        let mut request = self.request(batch, 1);
        request.reply = Some(reply_tx);
        let (db, table, keys) = (
            request.db.clone(),
            request.table.clone(),
            request
                .entries
                .iter()
                .map(|e| e.key.clone())
                .collect::<Vec<_>>(),
        );
        if !self.deliver(Ok(request), None) {
            let refusal = wire::encode_refusal(
                &db,
                &table,
                StatusCode::Unavail,
                "the server is shutting down; nothing applied",
            );
            self.send(&refusal);
            return false;
        }
        self.await_answer(&reply_rx, &db, &table, &keys)
    }

    fn await_answer(
        &self,
        reply_rx: &std_mpsc::Receiver<Vec<u8>>,
        db: &str,
        table: &str,
        keys: &[String],
    ) -> bool {
        loop {
            match reply_rx.recv_timeout(POLL_INTERVAL) {
                Ok(bytes) => {
                    self.send(&bytes);
                    return true;
                }
                // Stopping while the request is handled: no reply at all, so the client
                // learns the server went away (outcome unknown), never a false "refused".
                Err(std_mpsc::RecvTimeoutError::Timeout) => {
                    if self.stop.load(Ordering::Relaxed) {
                        return false;
                    }
                }
                Err(std_mpsc::RecvTimeoutError::Disconnected) => {
                    let results: Vec<EntryResult> = keys
                        .iter()
                        .map(|k| {
                            EntryResult::err(
                                k.clone(),
                                crate::types::Op::Set,
                                StatusCode::Unknown,
                                "the server dropped the request without answering; no verdict",
                                Vec::new(),
                            )
                        })
                        .collect();
                    self.send(&wire::encode_reply(
                        db,
                        table,
                        &results,
                        self.options.max_message,
                    ));
                    return true;
                }
            }
        }
    }

    /// A reply giving every key of `batch` the same status.
    fn per_key(&self, batch: &ZmqBatch, status: StatusCode, message: &str) -> Vec<u8> {
        let results: Vec<EntryResult> = batch
            .entries
            .iter()
            .map(|e| EntryResult::err(e.key.clone(), e.op, status, message, Vec::new()))
            .collect();
        wire::encode_reply(&batch.db, &batch.table, &results, self.options.max_message)
    }

    /// Push/pull: waits until the consumer can take a batch, then gathers every message
    /// queued by then (up to `max_batch` entries) into batches per table, each coalesced:
    /// what a Redis consumer's pop of the accumulated keys gives. Returns false when the
    /// server should stop.
    fn gather(&self) -> bool {
        let Ok(permit) = futures::executor::block_on(self.tx.reserve()) else {
            return false;
        };
        let mut received: Vec<Result<ZmqBatch, ZmqError>> = Vec::new();
        let mut taken = 0;
        while taken < self.options.max_batch.max(1) {
            let (bytes, frames) = match socket::recv_message(&self.socket) {
                Ok(m) => m,
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                Err(e) => {
                    tracing::error!(error = %e, "ZMQ recv failed; server stops");
                    return false;
                }
            };
            let item = match self.decode(&bytes, frames) {
                Ok(b) if self.options.serves(&b.db, &b.table) => {
                    taken += b.entries.len();
                    Ok(b)
                }
                Ok(b) => Err(ZmqError::UnknownTable {
                    db: b.db,
                    table: b.table,
                }),
                Err(e) => Err(e),
            };
            received.push(item);
        }
        let out: Vec<Incoming> = merge_runs(received)
            .into_iter()
            .map(|r| match r {
                Ok((batch, n)) => Ok(self.request(batch, n)),
                Err(e) => {
                    self.refused(&e);
                    Err(e)
                }
            })
            .collect();
        let mut items = out.into_iter();
        let Some(first) = items.next() else {
            return true;
        };
        self.deliver(first, Some(permit)) && items.all(|item| self.deliver(item, None))
    }
}

/// Consecutive batches of one table (and term) as one, with how many messages each gathers;
/// refusals stay where they were.
fn merge_runs(
    received: Vec<Result<ZmqBatch, ZmqError>>,
) -> Vec<Result<(ZmqBatch, usize), ZmqError>> {
    let mut out: Vec<Result<(ZmqBatch, usize), ZmqError>> = Vec::new();
    for item in received {
        match (item, out.last_mut()) {
            (Ok(b), Some(Ok((cur, n))))
                if (&cur.db, &cur.table, cur.term) == (&b.db, &b.table, b.term) =>
            {
                cur.entries.extend(b.entries);
                *n += 1;
            }
            (Ok(b), _) => out.push(Ok((b, 1))),
            (Err(e), _) => out.push(Err(e)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(table: &str, term: Option<u64>, entries: Vec<KeyOpFieldValues>) -> ZmqBatch {
        ZmqBatch {
            db: "APPL_DB".into(),
            table: table.into(),
            term,
            entries,
        }
    }

    #[test]
    fn queued_pushes_of_one_table_gather_into_one_coalesced_batch() {
        let received = vec![
            Ok(batch(
                "ROUTE_TABLE",
                None,
                vec![KeyOpFieldValues::del("default")],
            )),
            Ok(batch(
                "ROUTE_TABLE",
                None,
                vec![KeyOpFieldValues::set("default", [("nexthop", "10.0.0.1")])],
            )),
            Err(ZmqError::Wire(WireError::NoHeader)),
            Ok(batch(
                "ROUTE_TABLE",
                None,
                vec![KeyOpFieldValues::del("other")],
            )),
            Ok(batch(
                "ROUTE_TABLE",
                Some(3),
                vec![KeyOpFieldValues::del("x")],
            )),
            Ok(batch(
                "VNET_TABLE",
                Some(3),
                vec![KeyOpFieldValues::del("y")],
            )),
        ];
        let merged = merge_runs(received);
        assert_eq!(merged.len(), 5);
        let Ok((first, n)) = &merged[0] else {
            panic!("{:?}", merged[0]);
        };
        assert_eq!(*n, 2);
        let (entries, dropped) = wire::coalesce(first.entries.clone());
        assert_eq!(dropped, 1);
        assert_eq!(
            entries,
            vec![KeyOpFieldValues::set("default", [("nexthop", "10.0.0.1")])],
            "the consumer sees one SET, not a DEL then a SET"
        );
        assert!(merged[1].is_err());
        let tables: Vec<(String, Option<u64>)> = merged[2..]
            .iter()
            .map(|r| match r {
                Ok((b, _)) => (b.table.clone(), b.term),
                Err(e) => panic!("{e}"),
            })
            .collect();
        assert_eq!(
            tables,
            vec![
                ("ROUTE_TABLE".into(), None),
                ("ROUTE_TABLE".into(), Some(3)),
                ("VNET_TABLE".into(), Some(3))
            ]
        );
    }
}
