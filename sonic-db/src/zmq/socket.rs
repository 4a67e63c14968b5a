//! libzmq sockets set up as swss-common sets them up, and the small blocking helpers the
//! producer's and server's threads share.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::error::ZmqError;

/// `MQ_WATERMARK` (common/zmqserver.h): ZMQ_SNDHWM of a PUSH client and ZMQ_RCVHWM of a PULL
/// server, in messages. The request/reply sockets keep libzmq's default (1000); a REQ socket
/// has one message in flight at most anyway.
pub const MQ_WATERMARK: i32 = 10_000;

/// How a producer and a server talk, as swss-common's `ZmqClient`/`ZmqServer` choose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZmqMode {
    /// `ZMQ_REQ` → `ZMQ_REP` ("one-to-one sync", `ZmqClient(endpoint, waitTimeMs > 0)` and
    /// `ZmqServer(endpoint, vrf, lazyBind, oneToOneSync = true)`): one message in flight, and
    /// the server answers each with the per-key statuses. p4orch's P4RT channel.
    RequestReply,
    /// `ZMQ_PUSH` → `ZMQ_PULL` (the default): fire and forget, high-water marks of
    /// [`MQ_WATERMARK`] messages. orchagent's route and DASH channels.
    PushPull,
}

impl ZmqMode {
    pub(crate) fn client_kind(self) -> zmq::SocketType {
        match self {
            ZmqMode::RequestReply => zmq::REQ,
            ZmqMode::PushPull => zmq::PUSH,
        }
    }

    pub(crate) fn server_kind(self) -> zmq::SocketType {
        match self {
            ZmqMode::RequestReply => zmq::REP,
            ZmqMode::PushPull => zmq::PULL,
        }
    }
}

/// A context of its own for each producer and server, as swss-common has: closing it
/// (zmq_ctx_term) waits until libzmq has closed the socket's connections and listeners, so an
/// ipc socket file is gone and a tcp port free once a server's thread has ended.
pub(crate) fn context() -> zmq::Context {
    zmq::Context::new()
}

/// The socket options of one end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tuning {
    pub sndhwm: Option<i32>,
    pub rcvhwm: Option<i32>,
    /// ZMQ_MAXMSGSIZE: a peer sending a bigger message is disconnected by libzmq.
    pub max_message: Option<i64>,
}

/// Opens a socket of `kind` with swss-common's options: ZMQ_LINGER 0 (nothing left to send
/// holds a closing socket), TCP keepalive after 5 s idle, probes every 1 s, 5 probes (dead
/// peers noticed within ~10 s, zmqclient.cpp), and the high-water marks asked for.
pub(crate) fn open(
    ctx: &zmq::Context,
    kind: zmq::SocketType,
    endpoint: &str,
    tuning: Tuning,
) -> Result<zmq::Socket, ZmqError> {
    let err = |op| move |e| ZmqError::socket(endpoint, op, e);
    let s = ctx.socket(kind).map_err(err("socket"))?;
    s.set_linger(0).map_err(err("setsockopt ZMQ_LINGER"))?;
    s.set_tcp_keepalive(1)
        .map_err(err("setsockopt ZMQ_TCP_KEEPALIVE"))?;
    s.set_tcp_keepalive_idle(5)
        .map_err(err("setsockopt ZMQ_TCP_KEEPALIVE_IDLE"))?;
    s.set_tcp_keepalive_intvl(1)
        .map_err(err("setsockopt ZMQ_TCP_KEEPALIVE_INTVL"))?;
    s.set_tcp_keepalive_cnt(5)
        .map_err(err("setsockopt ZMQ_TCP_KEEPALIVE_CNT"))?;
    if let Some(hwm) = tuning.sndhwm {
        s.set_sndhwm(hwm).map_err(err("setsockopt ZMQ_SNDHWM"))?;
    }
    if let Some(hwm) = tuning.rcvhwm {
        s.set_rcvhwm(hwm).map_err(err("setsockopt ZMQ_RCVHWM"))?;
    }
    if let Some(max) = tuning.max_message {
        s.set_maxmsgsize(max)
            .map_err(err("setsockopt ZMQ_MAXMSGSIZE"))?;
    }
    Ok(s)
}

/// A PAIR socket that hears when `socket` loses a peer (ZMQ_EVENT_DISCONNECTED).
pub(crate) fn monitor(
    ctx: &zmq::Context,
    socket: &zmq::Socket,
    endpoint: &str,
) -> Result<zmq::Socket, ZmqError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let addr = format!(
        "inproc://weft-zmq-monitor-{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let err = |op| move |e| ZmqError::socket(endpoint, op, e);
    socket
        .monitor(&addr, zmq::SocketEvent::DISCONNECTED as i32)
        .map_err(err("monitor"))?;
    let pair = ctx.socket(zmq::PAIR).map_err(err("socket"))?;
    pair.set_linger(0).map_err(err("setsockopt ZMQ_LINGER"))?;
    pair.connect(&addr).map_err(err("connect monitor"))?;
    Ok(pair)
}

/// Reads the monitor's pending events without blocking; true if a peer was lost.
pub(crate) fn drain_disconnects(monitor: &zmq::Socket) -> bool {
    let mut lost = false;
    while let Ok(frames) = monitor.recv_multipart(zmq::DONTWAIT) {
        let event = frames
            .first()
            .and_then(|f| f.get(..2))
            .map(|b| u16::from_ne_bytes([b[0], b[1]]));
        lost |= event == Some(zmq::SocketEvent::DISCONNECTED as u16);
    }
    lost
}

/// Milliseconds left until `deadline`, for zmq_poll (0 when passed).
pub(crate) fn millis_until(deadline: Instant) -> i64 {
    let left = deadline.saturating_duration_since(Instant::now());
    i64::try_from(left.as_millis()).unwrap_or(i64::MAX)
}

/// Receives one message of any number of frames without blocking: the first frame, and how
/// many frames the message had.
pub(crate) fn recv_message(socket: &zmq::Socket) -> Result<(Vec<u8>, usize), zmq::Error> {
    let first = socket.recv_bytes(zmq::DONTWAIT)?;
    let mut frames = 1;
    while socket.get_rcvmore()? {
        socket.recv_bytes(0)?;
        frames += 1;
    }
    Ok((first, frames))
}

/// Sends `payload`, waiting up to `wait` while the queue is at its high-water mark. Returns
/// how long it waited when it gave up (`Ok(None)`: sent).
pub(crate) fn send_waiting(
    socket: &zmq::Socket,
    payload: &[u8],
    wait: Duration,
) -> Result<Option<Duration>, zmq::Error> {
    let start = Instant::now();
    let deadline = start + wait;
    loop {
        match socket.send(payload, zmq::DONTWAIT) {
            Ok(()) => return Ok(None),
            Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => {}
            Err(e) => return Err(e),
        }
        let left = millis_until(deadline);
        if left == 0 {
            return Ok(Some(start.elapsed()));
        }
        // POLLOUT: room below the high-water mark (or, for REQ, a peer pipe ready).
        match socket.poll(zmq::POLLOUT, left.min(100)) {
            Ok(_) | Err(zmq::Error::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}
