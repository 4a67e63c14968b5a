//! SONiC's ZMQ channel (swss-common's `ZmqClient`/`ZmqServer`, `ZmqProducerStateTable`/
//! `ZmqConsumerStateTable`, `AsyncDBUpdater`), wire-compatible with swss-common, async.
//!
//! ```text
//!  controller                                         plugin (p4orch's role)
//!  ZmqProducer::send(batch) ─ REQ ══ one message per batch ══ REP ─ ZmqServer::next()
//!           ▲                                                     │ the plugin core
//!           └──── per-key statuses ◄══ one reply ══════════ ZmqRequest::reply(results)
//!  AsyncDbUpdater ─► APPL_DB P4RT_TABLE:K (written behind, on either side)
//! ```
//!
//! # The wire, as swss-common has it
//!
//! Read from sonic-net/sonic-swss-common at 85a39d8 (2026-07; request/reply since #1039,
//! 2026-03), sonic-net/sonic-swss at e6b0c5b (2026-08; p4orch on ZMQ since #4243, 2026-02)
//! and sonic-net/sonic-pins at b08b068 (2026-04; the P4RT app on ZMQ since #1619).
//!
//! * **Framing** (common/binaryserializer.h): one ZMQ frame per message. A `size_t` count of
//!   pairs, then per pair two strings, each a `size_t` length and its bytes: first (DB name,
//!   table name), then per entry (key, field count as decimal text) followed by that many
//!   (field, value) pairs. There is no op: a count of 0 is a DEL, anything else a SET (so a SET
//!   without fields arrives as a DEL; [`wire::check_entry`] refuses to send one). `size_t` is
//!   8 bytes, native order: little-endian on SONiC's amd64 and arm64 (a 32-bit armhf build
//!   would use 4 and cannot talk to these). The DB name is `DBConnector::getDbName()`:
//!   `APPL_DB`. The decoder throws on a length past the end, silently drops an entry whose
//!   fields are cut off, and `std::stoi`s the count.
//! * **Sockets** (common/zmqclient.cpp, zmqserver.cpp): the default mode is `ZMQ_PUSH` (client,
//!   connects) → `ZMQ_PULL` (server, binds). "One-to-one sync" (`ZmqClient(endpoint,
//!   waitTimeMs)` with waitTimeMs > 0, `ZmqServer(endpoint, vrf, lazyBind, true)`) is
//!   `ZMQ_REQ` → `ZMQ_REP`: the client sends with flags 0 and `wait()`s up to waitTimeMs with
//!   zmq_poll; the server's poll thread receives, hands the batch to the registered
//!   (db, table) handler and spins until the handler's `sendMsg` answers. A batch for a
//!   (db, table) without a handler is dropped (debug log) — in REP mode the client then waits
//!   out its timeout.
//! * **Replies** (sonic-swss orchagent/response_publisher.cpp, `ResponsePublisher::publish`
//!   with a `ZmqServer`, flushed per batch by p4orch): the same framing, DB name `APPL_DB`,
//!   the table (`P4RT_TABLE`), and per key one entry whose first pair is (status code string
//!   such as `SWSS_RC_SUCCESS`, message) — the message prefixed `[OrchAgent] ` or `[SAI] `
//!   on failure — then the entry's fields. sonic-pins' P4RT app (p4rt_app/sonic/
//!   response_handler.cc, `GetZmqResponses`) requires DB `APPL_DB`, table `P4RT_TABLE`, one
//!   reply per key sent, no duplicates, and reads only the first pair.
//! * **P4RT endpoint** (sonic-swss orchagent/orchdaemon.cpp, sonic-pins p4rt_app/p4rt.cc):
//!   `ipc:///zmq_swss/p4orch_zmq_swss_ep`, request/reply, the P4RT app waiting 10 minutes for
//!   a reply. Route and DASH channels use push/pull on tcp (`ORCH_ZMQ_PORT` 8100).
//! * **Limits** (common/zmqserver.h): `MQ_RESPONSE_MAX_COUNT` = 16 MiB is the buffer of each
//!   end: a message of that size or more makes the client throw before sending ("message was
//!   too big ... DROPPED") and the server throw after receiving ("message was truncated").
//!   `MQ_WATERMARK` = 10,000 messages: ZMQ_SNDHWM of a push client, ZMQ_RCVHWM of a pull
//!   server (request/reply sockets keep libzmq's 1000). ZMQ_MAXMSGSIZE is not set. `MQ_SIZE`
//!   (100) and `MQ_POLL_TIMEOUT` are defined but used nowhere (the poll thread wakes every
//!   1000 ms by a literal).
//! * **Full queue** (zmqclient.cpp `sendMsg`): push sends are non-blocking; on EAGAIN the
//!   client retries `MQ_MAX_RETRY` (10) more times, sleeping 20 ms doubling to 20.48 s
//!   (40.94 s in all), then throws `system_error` — the caller loses the message unless it
//!   keeps it (sonic-buildimage#28369: fpmsyncd routes lost that way). EINTR/EFSM retry at
//!   once; ETERM throws `connection_reset`.
//! * **Peers and reconnects**: ZMQ_LINGER 0 on the client; TCP keepalive (5 s idle, 1 s
//!   interval, 5 probes) on push and pull sockets; libzmq reconnects by itself (every
//!   100 ms). A REQ whose server died after receiving gets no reply: `wait()` times out and
//!   the next `send` fails EFSM until the client is rebuilt.
//! * **Writes behind** (common/asyncdbupdater.cpp): a queue and a low-priority thread writing
//!   each entry to the table in the DB: SET = DEL then HSET of the fields, DEL = DEL. The
//!   producer does it by default (`dbPersistence = true`, what the P4RT app uses); the
//!   consumer only if asked (p4orch does not).
//! * **Where p4orch's state goes**: since sonic-net/sonic-swss#3066 (2024-05, "APPL DB will be
//!   used as APPL STATE DB in P4Orch") p4orch's `ResponsePublisher` writes the applied entry
//!   back to **APPL_DB** `P4RT_TABLE` (the row written on success, deleted on a successful
//!   DEL, left alone on failure), not to APPL_STATE_DB; over ZMQ it publishes no Redis
//!   notification, the reply replaces it.
//!
//! # What Weft does on top
//!
//! * Repeated writes of one key in a batch are coalesced to the last ([`wire::coalesce`]),
//!   by the producer before sending and by the server on receipt (push mode: across every
//!   message that queued while the previous batch was handled). swss-common's ZMQ path loses
//!   the Redis path's coalescing; this restores it.
//! * A batch too big for one message is cut into messages that fit, replies included;
//!   an entry that cannot fit alone is refused before anything is sent.
//! * A malformed, multi-frame, truncated or oversized message is refused whole with a reason
//!   and the server goes on (swss-common's server thread dies on most of these). In
//!   request/reply mode the refusal is a reply with one entry of empty key; a batch for a
//!   table not served gets SWSS_RC_INVALID_PARAM per key.
//! * A request whose server goes away is reported at once ([`ZmqError::PeerDisconnected`],
//!   from libzmq's socket monitor) or after the reply timeout ([`ZmqError::ReplyTimeout`]),
//!   both "outcome unknown", and the socket is rebuilt. Nothing is re-sent on its own: the
//!   caller finds out what the switch holds and decides.
//! * An optional fencing term travels as a first entry `WEFT_LEADER_TERM` ([`ZmqBatch::term`]).

mod endpoint;
mod error;
mod producer;
mod server;
mod socket;
mod updater;
pub mod wire;

pub use endpoint::{MAX_IPC_PATH, ZmqEndpoint};
pub use error::{WireError, ZmqError, ZmqSendError};
pub use producer::{
    DEFAULT_REPLY_TIMEOUT, ProducerOptions, ProducerStats, SWSS_FULL_WAIT, ZmqProducer,
};
pub use server::{ServerOptions, ServerStats, ZmqRequest, ZmqServer};
pub use socket::{MQ_WATERMARK, ZmqMode};
pub use updater::AsyncDbUpdater;
pub use wire::{MQ_RESPONSE_MAX_COUNT, ZmqBatch};

/// Where p4orch serves the P4RT table (sonic-swss orchagent/orchdaemon.cpp).
pub const P4ORCH_ENDPOINT: &str = "ipc:///zmq_swss/p4orch_zmq_swss_ep";

/// `ORCH_ZMQ_PORT` (common/zmqserver.h): orchagent's tcp port for the route and DASH channels.
pub const ORCH_ZMQ_PORT: u16 = 8100;
