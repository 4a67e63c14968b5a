//! Errors of the ZMQ channel.

use std::time::Duration;

use crate::response::{StatusCode, WaitOutcome};

/// A message that does not follow swss-common's `BinarySerializer` layout (or Weft's rules on
/// top of it). Each says where the message went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("message of {len} bytes is shorter than its 8-byte pair count")]
    NoPairCount { len: usize },

    #[error(
        "message truncated: pair {pair} of {pairs} needs {need} bytes at offset {offset}, {have} left"
    )]
    Truncated {
        pair: u64,
        pairs: u64,
        offset: usize,
        need: u64,
        have: usize,
    },

    #[error("message claims {pairs} pairs but {len} bytes cannot hold more than {max}")]
    ImpossiblePairCount { pairs: u64, len: usize, max: u64 },

    #[error("{extra} bytes after the last of the message's {pairs} pairs")]
    TrailingBytes { extra: usize, pairs: u64 },

    #[error("message has no pairs: the first pair must be the DB name and the table name")]
    NoHeader,

    #[error("pair {pair}: {which} is not UTF-8")]
    NotUtf8 { pair: u64, which: &'static str },

    #[error("entry {key:?}: field count {value:?} is not a decimal number")]
    BadFieldCount { key: String, value: String },

    #[error("entry {key:?} announces {expected} fields but the message ends after {got}")]
    MissingFields {
        key: String,
        expected: usize,
        got: usize,
    },

    #[error("message has {frames} frames; swss-common sends exactly one")]
    MultiPart { frames: usize },

    #[error("message of {bytes} bytes is over the limit of {limit} bytes (MQ_RESPONSE_MAX_COUNT)")]
    TooLarge { bytes: usize, limit: usize },

    #[error("term entry {key:?} is not a decimal term: {value:?}")]
    BadTerm { key: String, value: String },

    #[error("reply entry {key:?} has no (status, message) pair")]
    EmptyReplyEntry { key: String },
}

/// Everything that can go wrong on the ZMQ channel.
#[derive(Debug, thiserror::Error)]
pub enum ZmqError {
    #[error("invalid ZMQ endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },

    #[error("ZMQ {op} on {endpoint} failed: {source}{hint}")]
    Socket {
        endpoint: String,
        op: &'static str,
        #[source]
        source: zmq::Error,
        /// What the operator can do about it (empty when nothing specific).
        hint: &'static str,
    },

    #[error("malformed ZMQ message: {0}")]
    Wire(#[from] WireError),

    #[error("entry {key:?} is {bytes} bytes encoded; one message holds at most {limit}")]
    EntryTooLarge {
        key: String,
        bytes: usize,
        limit: usize,
    },

    #[error("entry {key:?} cannot be sent: {reason}")]
    InvalidEntry { key: String, reason: &'static str },

    #[error(
        "{endpoint}: the send queue stayed full (high-water mark {hwm} messages) for {waited:?}; \
         the message was not sent"
    )]
    Full {
        endpoint: String,
        hwm: i32,
        waited: Duration,
    },

    #[error(
        "{endpoint}: no reply within {waited:?}; the server may or may not have applied the message"
    )]
    ReplyTimeout { endpoint: String, waited: Duration },

    #[error(
        "{endpoint}: the server went away before it replied; it may or may not have applied the \
         message"
    )]
    PeerDisconnected { endpoint: String },

    #[error("the server refused the whole message with {status}: {message}")]
    Refused { status: StatusCode, message: String },

    #[error("reply is for {db}/{table}, the request was for {expected_db}/{expected_table}")]
    ReplyMismatch {
        expected_db: String,
        expected_table: String,
        db: String,
        table: String,
    },

    #[error("no handler for table {table} of {db} on this server")]
    UnknownTable { db: String, table: String },

    #[error("the ZMQ {what} is closed")]
    Closed { what: &'static str },
}

impl ZmqError {
    /// True when the message may have reached the server and been applied although no reply
    /// says so: the caller must find out what the switch holds before it trusts either outcome.
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            ZmqError::ReplyTimeout { .. } | ZmqError::PeerDisconnected { .. }
        )
    }

    pub(crate) fn socket(endpoint: &str, op: &'static str, source: zmq::Error) -> Self {
        let hint = match (op, source) {
            ("bind", zmq::Error::EADDRINUSE) => {
                " (another process serves this endpoint; stop it or choose another)"
            }
            ("bind", zmq::Error::ENOENT) => {
                " (the directory of the ipc socket does not exist: create it first)"
            }
            ("bind", zmq::Error::EACCES) => {
                " (no permission on the ipc socket's directory or the tcp port)"
            }
            ("connect" | "bind", zmq::Error::EINVAL) => " (libzmq does not accept this endpoint)",
            _ => "",
        };
        ZmqError::Socket {
            endpoint: endpoint.to_string(),
            op,
            source,
            hint,
        }
    }
}

/// A batch that was not (wholly) answered: why, and what is known.
#[derive(Debug, thiserror::Error)]
#[error("{error} ({} of {} keys answered)", .partial.responses.len(), .partial.responses.len() + .partial.missing.len())]
pub struct ZmqSendError {
    #[source]
    pub error: ZmqError,
    /// The replies received before the failure; `missing` holds every other key (sent without
    /// an answer, or not sent): no verdict for those.
    pub partial: WaitOutcome,
    /// The keys never handed to ZMQ (refused before sending, or in messages after the one
    /// that failed): certainly not applied. The other missing keys left and may have been.
    pub unsent: std::collections::BTreeSet<String>,
}
