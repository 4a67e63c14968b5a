//! The producing end: swss-common's `ZmqClient` + `ZmqProducerStateTable`, async.
//!
//! A dedicated thread owns the libzmq socket (libzmq sockets are not thread-safe, and their
//! calls block); [`ZmqProducer::send`] hands it one message at a time and awaits the outcome,
//! so a full queue or a slow server holds the caller, never the runtime.

use std::collections::BTreeMap;
use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::endpoint::ZmqEndpoint;
use super::error::{ZmqError, ZmqSendError};
use super::socket::{self, MQ_WATERMARK, Tuning, ZmqMode};
use super::updater::AsyncDbUpdater;
use super::wire::{self, MQ_RESPONSE_MAX_COUNT};
use crate::response::WaitOutcome;
use crate::types::KeyOpFieldValues;

/// swss-common's `ZmqClient::sendMsg` retries a full queue `MQ_MAX_RETRY` (10) + 1 times,
/// sleeping 20 ms doubling to 20.48 s between tries: 40.94 s before it gives up.
pub const SWSS_FULL_WAIT: Duration = Duration::from_millis(40_940);

/// How long a request waits for its reply by default. sonic-pins' P4RT app waits 10 minutes;
/// Weft's controller would rather learn sooner and find out what the switch holds.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// How a [`ZmqProducer`] behaves.
#[derive(Debug, Clone)]
pub struct ProducerOptions {
    pub mode: ZmqMode,
    /// Request/reply: how long to wait for each reply.
    pub reply_timeout: Duration,
    /// How long a send waits while the queue is at its high-water mark before it gives up
    /// with [`ZmqError::Full`] (the message then was not sent).
    pub full_wait: Duration,
    /// ZMQ_SNDHWM of a push socket, in messages.
    pub sndhwm: i32,
    /// Every message (and, in request/reply mode, its reply) stays under this many bytes.
    pub max_message: usize,
}

impl Default for ProducerOptions {
    fn default() -> Self {
        ProducerOptions {
            mode: ZmqMode::RequestReply,
            reply_timeout: DEFAULT_REPLY_TIMEOUT,
            full_wait: SWSS_FULL_WAIT,
            sndhwm: MQ_WATERMARK,
            max_message: MQ_RESPONSE_MAX_COUNT,
        }
    }
}

impl ProducerOptions {
    pub fn push_pull() -> Self {
        ProducerOptions {
            mode: ZmqMode::PushPull,
            ..Default::default()
        }
    }
}

/// What the socket thread did with one message.
struct Exchanged {
    /// The message left through libzmq (the server may have it even if `result` is an error).
    sent: bool,
    /// The reply's bytes (request/reply), `None` (push).
    result: Result<Option<Vec<u8>>, ZmqError>,
}

struct Job {
    payload: Vec<u8>,
    done: oneshot::Sender<Exchanged>,
}

/// Counters of a producer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProducerStats {
    pub messages: u64,
    pub entries: u64,
    /// Writes dropped by coalescing: a later write of the same key in the same batch.
    pub coalesced: u64,
    /// Replies for keys that were not asked (ignored).
    pub unexpected_replies: u64,
}

/// Sends batches of one table to a ZMQ server: [`Self::send`] coalesces a batch, cuts it into
/// messages under the size limit and, in request/reply mode, returns every key's status.
pub struct ZmqProducer {
    endpoint: ZmqEndpoint,
    db: String,
    table: String,
    options: ProducerOptions,
    jobs: std_mpsc::Sender<Job>,
    fence: Option<u64>,
    updater: Option<AsyncDbUpdater>,
    stats: ProducerStats,
}

impl ZmqProducer {
    /// Connects to `endpoint` for `table` of the database named `db` (`APPL_DB`). Like
    /// libzmq's connect, this succeeds before any server is there: messages wait for it (a
    /// push socket queues up to its high-water mark; a request waits up to its reply timeout).
    pub fn connect(
        endpoint: &ZmqEndpoint,
        db: &str,
        table: &str,
        options: ProducerOptions,
    ) -> Result<Self, ZmqError> {
        endpoint.check()?;
        let conn = Connection::open(endpoint, &options)?;
        let (jobs, rx) = std_mpsc::channel();
        let opts = options.clone();
        let ep = endpoint.clone();
        thread::Builder::new()
            .name("weft-zmq-producer".into())
            .spawn(move || run(conn, ep, opts, rx))
            .map_err(|_| ZmqError::Closed {
                what: "producer thread (could not be started)",
            })?;
        Ok(ZmqProducer {
            endpoint: endpoint.clone(),
            db: db.to_string(),
            table: table.to_string(),
            options,
            jobs,
            fence: None,
            updater: None,
            stats: ProducerStats::default(),
        })
    }

    pub fn endpoint(&self) -> &ZmqEndpoint {
        &self.endpoint
    }

    pub fn mode(&self) -> ZmqMode {
        self.options.mode
    }

    pub fn stats(&self) -> ProducerStats {
        self.stats
    }

    /// Sends `term` with every later message (see [`wire::ZmqBatch::term`]); `None`: no term,
    /// as swss-common sends (what a SONiC consumer expects).
    pub fn set_fence(&mut self, term: Option<u64>) {
        self.fence = term;
        if let Some(u) = &self.updater {
            u.set_fence(term);
        }
    }

    /// Writes every entry that leaves for the server into the DB behind it, as swss-common's
    /// `ZmqProducerStateTable` does with `dbPersistence` (its default, and what sonic-pins'
    /// P4RT app uses): the row replaced on a SET, deleted on a DEL.
    pub fn persist_with(&mut self, updater: AsyncDbUpdater) {
        updater.set_fence(self.fence);
        self.updater = Some(updater);
    }

    pub fn updater(&self) -> Option<&AsyncDbUpdater> {
        self.updater.as_ref()
    }

    /// Sends `entries` and, in request/reply mode, returns each key's reply. Push mode has no
    /// replies: `Ok` once every message is queued, with every key `missing` (no verdict comes
    /// back that way; what the consumer did shows in the DB). Repeated writes of a key keep
    /// the last ([`wire::coalesce`]). Entries the wire cannot carry, or that cannot fit in a
    /// message, are refused before anything is sent. Messages go one at a time, in order; on
    /// a failure the error holds the replies so far, and every other key is `missing`.
    pub async fn send(
        &mut self,
        entries: &[KeyOpFieldValues],
    ) -> Result<WaitOutcome, ZmqSendError> {
        // `from`: the first entry not handed to ZMQ.
        let fail = |error, keys: &[KeyOpFieldValues], answered, from: usize| ZmqSendError {
            error,
            partial: outcome_of(answered, keys),
            unsent: keys[from..].iter().map(|e| e.key.clone()).collect(),
        };
        if let Some(e) = entries.iter().find_map(|e| wire::check_entry(e).err()) {
            return Err(fail(e, entries, BTreeMap::new(), 0));
        }
        let (entries, dropped) = wire::coalesce_ref(entries);
        self.stats.coalesced += dropped as u64;
        let runs = wire::split(
            &self.db,
            &self.table,
            self.fence,
            &entries,
            self.options.max_message,
            self.options.mode == ZmqMode::RequestReply,
        )
        .map_err(|e| fail(e, &entries, BTreeMap::new(), 0))?;
        let mut answered = BTreeMap::new();
        for run in runs {
            let part = &entries[run.clone()];
            let payload = wire::encode_parts(&self.db, &self.table, self.fence, part);
            let done = self.exchange(payload).await;
            let next = if done.sent { run.end } else { run.start };
            if done.sent {
                self.stats.messages += 1;
                self.stats.entries += part.len() as u64;
                if let Some(u) = &self.updater {
                    u.update(part.to_vec());
                }
            }
            let reply = match done.result {
                Ok(Some(reply)) => reply,
                Ok(None) => continue,
                Err(e) => return Err(fail(e, &entries, answered, next)),
            };
            match wire::decode_reply(&reply, &self.db, &self.table) {
                Ok(replies) => {
                    for r in replies {
                        answered.insert(r.key.clone(), r);
                    }
                }
                Err(e) => return Err(fail(e, &entries, answered, next)),
            }
        }
        let asked = answered.len();
        let outcome = outcome_of(answered, &entries);
        self.stats.unexpected_replies += asked.saturating_sub(outcome.responses.len()) as u64;
        Ok(outcome)
    }

    async fn exchange(&self, payload: Vec<u8>) -> Exchanged {
        let (done, rx) = oneshot::channel();
        let closed = || Exchanged {
            sent: false,
            result: Err(ZmqError::Closed {
                what: "producer thread",
            }),
        };
        if self.jobs.send(Job { payload, done }).is_err() {
            return closed();
        }
        rx.await.unwrap_or_else(|_| closed())
    }
}

/// The replies of the keys asked, and the keys asked without one.
fn outcome_of(
    mut answered: BTreeMap<String, crate::response::Response>,
    keys: &[KeyOpFieldValues],
) -> WaitOutcome {
    let mut outcome = WaitOutcome::default();
    for e in keys {
        match answered.remove(&e.key) {
            Some(r) => {
                outcome.responses.insert(e.key.clone(), r);
            }
            None => {
                if !outcome.responses.contains_key(&e.key) {
                    outcome.missing.insert(e.key.clone());
                }
            }
        }
    }
    if !answered.is_empty() {
        tracing::warn!(
            keys = answered.len(),
            "ZMQ reply answered keys that were not in the request; ignored"
        );
    }
    outcome
}

/// The socket and, for a request socket, its disconnect monitor.
struct Connection {
    socket: zmq::Socket,
    monitor: Option<zmq::Socket>,
    /// Dropped last (fields drop in order): terminating it waits for the sockets to close.
    _context: zmq::Context,
}

impl Connection {
    fn open(endpoint: &ZmqEndpoint, options: &ProducerOptions) -> Result<Self, ZmqError> {
        let ep = endpoint.to_string();
        let tuning = Tuning {
            sndhwm: (options.mode == ZmqMode::PushPull).then_some(options.sndhwm),
            rcvhwm: None,
            // A reply bigger than this is no reply of a swss-common server; drop the peer
            // rather than hold it.
            max_message: Some(4 * options.max_message as i64),
        };
        let context = socket::context();
        let socket = socket::open(&context, options.mode.client_kind(), &ep, tuning)?;
        let monitor = match options.mode {
            ZmqMode::RequestReply => Some(socket::monitor(&context, &socket, &ep)?),
            ZmqMode::PushPull => None,
        };
        socket
            .connect(&ep)
            .map_err(|e| ZmqError::socket(&ep, "connect", e))?;
        Ok(Connection {
            socket,
            monitor,
            _context: context,
        })
    }
}

fn run(
    mut conn: Connection,
    endpoint: ZmqEndpoint,
    options: ProducerOptions,
    jobs: std_mpsc::Receiver<Job>,
) {
    let ep = endpoint.to_string();
    while let Ok(job) = jobs.recv() {
        let (done, reset) = match options.mode {
            ZmqMode::PushPull => (push(&conn, &ep, &options, &job.payload), false),
            ZmqMode::RequestReply => request(&conn, &ep, &options, &job.payload),
        };
        // The caller may have given up (dropped the future); the exchange is complete anyway.
        let _ = job.done.send(done);
        if reset {
            // A REQ socket whose reply will never come refuses to send again (EFSM):
            // swss-common's client is stuck there until it is rebuilt. Start afresh.
            drop(conn);
            conn = match Connection::open(&endpoint, &options) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(endpoint = %ep, error = %e, "cannot reopen the ZMQ socket");
                    return;
                }
            };
        }
    }
}

fn push(conn: &Connection, ep: &str, options: &ProducerOptions, payload: &[u8]) -> Exchanged {
    match socket::send_waiting(&conn.socket, payload, options.full_wait) {
        Ok(None) => Exchanged {
            sent: true,
            result: Ok(None),
        },
        Ok(Some(waited)) => Exchanged {
            sent: false,
            result: Err(ZmqError::Full {
                endpoint: ep.to_string(),
                hwm: options.sndhwm,
                waited,
            }),
        },
        Err(e) => Exchanged {
            sent: false,
            result: Err(ZmqError::socket(ep, "send", e)),
        },
    }
}

/// One request and its reply. Returns whether the socket must be rebuilt.
fn request(
    conn: &Connection,
    ep: &str,
    options: &ProducerOptions,
    payload: &[u8],
) -> (Exchanged, bool) {
    // Whatever failed, the REQ socket's state is no longer known: rebuild it.
    let failed = |sent, e| {
        (
            Exchanged {
                sent,
                result: Err(e),
            },
            true,
        )
    };
    if let Some(m) = &conn.monitor {
        // Losses from before this request concern no request.
        socket::drain_disconnects(m);
    }
    match socket::send_waiting(&conn.socket, payload, options.full_wait) {
        Ok(None) => {}
        Ok(Some(waited)) => {
            let e = ZmqError::Full {
                endpoint: ep.to_string(),
                hwm: 1,
                waited,
            };
            return failed(false, e);
        }
        Err(e) => return failed(false, ZmqError::socket(ep, "send", e)),
    }
    match await_reply(conn, ep, options.reply_timeout) {
        Ok(reply) => (
            Exchanged {
                sent: true,
                result: Ok(Some(reply)),
            },
            false,
        ),
        Err(e) => failed(true, e),
    }
}

fn await_reply(conn: &Connection, ep: &str, timeout: Duration) -> Result<Vec<u8>, ZmqError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = socket::millis_until(deadline);
        let (readable, lost) = {
            let mut items = vec![conn.socket.as_poll_item(zmq::POLLIN)];
            if let Some(m) = &conn.monitor {
                items.push(m.as_poll_item(zmq::POLLIN));
            }
            match zmq::poll(&mut items, left) {
                Ok(_) | Err(zmq::Error::EINTR) => {}
                Err(e) => return Err(ZmqError::socket(ep, "poll", e)),
            }
            (
                items[0].is_readable(),
                items.get(1).is_some_and(|m| m.is_readable()),
            )
        };
        if readable {
            return match socket::recv_message(&conn.socket) {
                Ok((reply, 1)) => Ok(reply),
                Ok((_, frames)) => Err(super::error::WireError::MultiPart { frames }.into()),
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => continue,
                Err(e) => Err(ZmqError::socket(ep, "recv", e)),
            };
        }
        if lost && conn.monitor.as_ref().is_some_and(socket::drain_disconnects) {
            // The reply, if it came before the loss, is readable now.
            if conn.socket.poll(zmq::POLLIN, 0).unwrap_or(0) > 0 {
                continue;
            }
            return Err(ZmqError::PeerDisconnected {
                endpoint: ep.to_string(),
            });
        }
        if left == 0 {
            return Err(ZmqError::ReplyTimeout {
                endpoint: ep.to_string(),
                waited: timeout,
            });
        }
    }
}
