//! The response path of SONiC's P4RT design (Redis variant): the consumer answers every key it took on
//! `APPL_DB_<TABLE>_RESPONSE_CHANNEL` and copies what it applied into APPL_STATE_DB.
//!
//! ```text
//!  controller                         Redis                               plugin (p4orch role)
//!  ResponseWaiter::subscribe ──SUBSCRIBE APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL
//!  ProducerStateTable::apply ──► P4RT_TABLE_KEY_SET, _P4RT_TABLE:K ──► ConsumerStateTable::next_batch
//!                                                                     program the switch
//!                                APPL_STATE_DB P4RT_TABLE:K  ◄──────── ResponsePublisher::publish_batch
//!  ResponseWaiter::wait ◄─PUBLISH ["SWSS_RC_SUCCESS","K","err_str","",f,v,...]
//! ```
//!
//! The message is swss-common's NotificationProducer format: a JSON array `[op, data, field, value, ...]`
//! with op = status code string, data = key, first pair `("err_str", message)`, then the entry's fields
//! (sonic-swss `orchagent/response_publisher.cpp`). The waiter subscribes before anything is written,
//! because Redis pub/sub does not keep messages for late subscribers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use futures::StreamExt;

use crate::db::{DbConnection, SonicDb, SonicDbId};
use crate::digest::{Digest, KeyedDigest};
use crate::error::SonicDbError;
use crate::scripts::{LoadedScript, PUBLISH_ALL, STATE_REPLACE};
use crate::types::{FieldValues, Op, check_table_name};

/// swss-common's `StatusCode` (`common/status_code_util.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatusCode {
    Success,
    InvalidParam,
    DeadlineExceeded,
    Unavail,
    NotFound,
    NoMemory,
    Exists,
    PermissionDenied,
    Full,
    InUse,
    Internal,
    Unimplemented,
    NotExecuted,
    FailedPrecondition,
    Unknown,
}

impl StatusCode {
    pub const ALL: [StatusCode; 15] = [
        StatusCode::Success,
        StatusCode::InvalidParam,
        StatusCode::DeadlineExceeded,
        StatusCode::Unavail,
        StatusCode::NotFound,
        StatusCode::NoMemory,
        StatusCode::Exists,
        StatusCode::PermissionDenied,
        StatusCode::Full,
        StatusCode::InUse,
        StatusCode::Internal,
        StatusCode::Unimplemented,
        StatusCode::NotExecuted,
        StatusCode::FailedPrecondition,
        StatusCode::Unknown,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            StatusCode::Success => "SWSS_RC_SUCCESS",
            StatusCode::InvalidParam => "SWSS_RC_INVALID_PARAM",
            StatusCode::DeadlineExceeded => "SWSS_RC_DEADLINE_EXCEEDED",
            StatusCode::Unavail => "SWSS_RC_UNAVAIL",
            StatusCode::NotFound => "SWSS_RC_NOT_FOUND",
            StatusCode::NoMemory => "SWSS_RC_NO_MEMORY",
            StatusCode::Exists => "SWSS_RC_EXISTS",
            StatusCode::PermissionDenied => "SWSS_RC_PERMISSION_DENIED",
            StatusCode::Full => "SWSS_RC_FULL",
            StatusCode::InUse => "SWSS_RC_IN_USE",
            StatusCode::Internal => "SWSS_RC_INTERNAL",
            StatusCode::Unimplemented => "SWSS_RC_UNIMPLEMENTED",
            StatusCode::NotExecuted => "SWSS_RC_NOT_EXECUTED",
            StatusCode::FailedPrecondition => "SWSS_RC_FAILED_PRECONDITION",
            StatusCode::Unknown => "SWSS_RC_UNKNOWN",
        }
    }

    /// Like swss-common's `strToStatusCode`: anything unrecognised is `Unknown`.
    pub fn from_swss(s: &str) -> StatusCode {
        StatusCode::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .unwrap_or(StatusCode::Unknown)
    }

    pub fn is_ok(self) -> bool {
        self == StatusCode::Success
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StatusCode {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(StatusCode::from_swss(s))
    }
}

/// The response channel of a table: `APPL_DB_<TABLE>_RESPONSE_CHANNEL`.
pub fn response_channel(table: &str) -> String {
    format!("APPL_DB_{table}_RESPONSE_CHANNEL")
}

/// The response channel of a table for a switch whose DBs start at Redis database `db_base`:
/// SONiC's name at 0 (a switch with a Redis of its own, as SONiC runs), else
/// `APPL_DB_<TABLE>_RESPONSE_CHANNEL@<db_base>`. Redis channels are server-wide, not per
/// database: switches sharing a server (`?db_base=`) on one channel would each take the others'
/// answers for the keys they share (the same route on two leaves) as their own, and decode
/// every answer of the server.
pub fn response_channel_at(db_base: u32, table: &str) -> String {
    match db_base {
        0 => response_channel(table),
        n => format!("{}@{n}", response_channel(table)),
    }
}

/// What the consumer reports for one key it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryResult {
    /// The key within the table (for P4RT_TABLE: `<TABLE>:<JSON>`).
    pub key: String,
    /// The operation that was requested.
    pub op: Op,
    pub status: StatusCode,
    /// Why it failed; empty on success.
    pub message: String,
    /// The requested fields (empty for a delete). Echoed in the response and, on success, copied to
    /// APPL_STATE_DB.
    pub fields: FieldValues,
}

impl EntryResult {
    pub fn ok(key: impl Into<String>, op: Op, fields: FieldValues) -> Self {
        EntryResult {
            key: key.into(),
            op,
            status: StatusCode::Success,
            message: String::new(),
            fields,
        }
    }

    /// `key` refused because its batch's writer holds `term` and the switch a newer `held`.
    pub fn fenced(
        key: impl Into<String>,
        op: Op,
        fields: FieldValues,
        term: u64,
        held: u64,
    ) -> Self {
        EntryResult::err(
            key,
            op,
            StatusCode::FailedPrecondition,
            crate::error::fenced_reason(term, held),
            fields,
        )
    }

    pub fn err(
        key: impl Into<String>,
        op: Op,
        status: StatusCode,
        message: impl Into<String>,
        fields: FieldValues,
    ) -> Self {
        EntryResult {
            key: key.into(),
            op,
            status,
            message: message.into(),
            fields,
        }
    }
}

/// The notification payload: `[status, key, "err_str", message, field, value, ...]`.
pub fn response_message(status: &str, key: &str, message: &str, fields: &FieldValues) -> String {
    let mut items: Vec<&str> = Vec::with_capacity(4 + 2 * fields.len());
    items.extend([status, key, "err_str", message]);
    for (f, v) in fields {
        items.push(f);
        items.push(v);
    }
    serde_json::to_string(&items).unwrap_or_else(|_| "[]".to_string())
}

/// swss-common's placeholder field (and value) of a row without attributes.
const NULL_FIELD: &str = "NULL";

fn null_fields() -> FieldValues {
    vec![(NULL_FIELD.to_string(), NULL_FIELD.to_string())]
}

/// Publishes responses and keeps APPL_STATE_DB in step (the plugin's side).
pub struct ResponsePublisher {
    appl: DbConnection,
    appl_state: DbConnection,
    state_script: LoadedScript,
    publish_script: LoadedScript,
    table: String,
    channel: String,
    /// `<TABLE>:` in APPL_STATE_DB.
    state_prefix: String,
    /// The digest of the APPL_STATE_DB table, when asked to keep one ([`Self::track`]).
    tracked: Option<KeyedDigest>,
}

impl ResponsePublisher {
    pub async fn new(sonic: &SonicDb, table: &str) -> Result<Self, SonicDbError> {
        check_table_name(table, SonicDbId::ApplStateDb.separator())?;
        let mut appl = sonic.connect(SonicDbId::ApplDb).await?;
        let mut appl_state = sonic.connect(SonicDbId::ApplStateDb).await?;
        Ok(ResponsePublisher {
            state_script: LoadedScript::load(&mut appl_state, STATE_REPLACE).await?,
            publish_script: LoadedScript::load(&mut appl, PUBLISH_ALL).await?,
            appl,
            appl_state,
            table: table.to_string(),
            channel: response_channel_at(sonic.config().db_base, table),
            state_prefix: format!("{table}{}", SonicDbId::ApplStateDb.separator()),
            tracked: None,
        })
    }

    /// Keeps a digest of the APPL_STATE_DB table from now on, starting from `rows` (what it
    /// holds now, keys within the table) and following every write of [`Self::publish_batch`]
    /// (the only writer of the table), so the digest is what a reader of the table would
    /// compute.
    pub fn track(&mut self, rows: &BTreeMap<String, FieldValues>) {
        self.tracked = Some(KeyedDigest::from_rows(rows));
    }

    /// The tracked table's digest (`None` unless [`Self::track`] was called).
    pub fn digest(&self) -> Option<Digest> {
        self.tracked.as_ref().map(KeyedDigest::digest)
    }

    pub fn channel(&self) -> &str {
        &self.channel
    }

    pub async fn publish(&mut self, result: &EntryResult) -> Result<(), SonicDbError> {
        self.publish_batch(std::slice::from_ref(result)).await
    }

    /// Writes APPL_STATE_DB for the successful results (one atomic script), then publishes every
    /// response (one script of a PUBLISH per key). State first, so a controller that hears
    /// SUCCESS and reads APPL_STATE_DB finds the entry.
    pub async fn publish_batch(&mut self, results: &[EntryResult]) -> Result<(), SonicDbError> {
        self.write_state(results).await?;
        self.notify(results).await
    }

    /// The APPL_STATE_DB half of [`Self::publish_batch`], without the notifications: a batch
    /// that came over ZMQ is answered by its reply, as p4orch's `ResponsePublisher` with a
    /// `ZmqServer` publishes nothing on the channel.
    pub async fn write_state(&mut self, results: &[EntryResult]) -> Result<(), SonicDbError> {
        if results.is_empty() {
            return Ok(());
        }
        let ok = results.iter().filter(|r| r.status.is_ok());
        let rows: Vec<String> = ok
            .clone()
            .map(|r| format!("{}{}", self.state_prefix, r.key))
            .collect();
        if !rows.is_empty() {
            let counts: Vec<String> = ok
                .clone()
                .map(|r| match r.op {
                    Op::Del => "-1".to_string(),
                    // swss-common's placeholder for an entry without attributes.
                    Op::Set if r.fields.is_empty() => "1".to_string(),
                    // Replace rather than merge: APPL_STATE_DB must hold exactly what is
                    // installed.
                    Op::Set => r.fields.len().to_string(),
                })
                .collect();
            let mut args: Vec<&str> = Vec::with_capacity(rows.len() * 5);
            for (r, n) in ok.zip(&counts) {
                args.push(n);
                if r.op == Op::Set {
                    if r.fields.is_empty() {
                        args.extend([NULL_FIELD, NULL_FIELD]);
                    }
                    for (f, v) in &r.fields {
                        args.push(f);
                        args.push(v);
                    }
                }
            }
            let keys: Vec<&str> = rows.iter().map(String::as_str).collect();
            crate::scripts::eval_loaded(
                &mut self.appl_state,
                &mut self.state_script,
                &keys,
                &args,
                &format!("APPL_STATE_DB update for {}", self.table),
            )
            .await?;
        }
        if let Some(t) = self.tracked.as_mut() {
            // After the write above: the digest says what APPL_STATE_DB holds.
            for r in results.iter().filter(|r| r.status.is_ok()) {
                match r.op {
                    Op::Del => t.del(&r.key),
                    Op::Set if r.fields.is_empty() => t.set(&r.key, &null_fields()),
                    Op::Set => t.set(&r.key, &r.fields),
                }
            }
        }
        Ok(())
    }

    /// The notifications half of [`Self::publish_batch`]: one response per key on the channel.
    pub async fn notify(&mut self, results: &[EntryResult]) -> Result<(), SonicDbError> {
        if results.is_empty() {
            return Ok(());
        }
        let messages: Vec<String> = results
            .iter()
            .map(|r| response_message(r.status.as_str(), &r.key, &r.message, &r.fields))
            .collect();
        let args: Vec<&str> = std::iter::once(self.channel.as_str())
            .chain(messages.iter().map(String::as_str))
            .collect();
        crate::scripts::eval_loaded(
            &mut self.appl,
            &mut self.publish_script,
            &[],
            &args,
            &format!("PUBLISH {}", self.channel),
        )
        .await
    }
}

/// A response as the controller receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub key: String,
    pub status: StatusCode,
    /// The status string as sent (differs from `status.as_str()` only for unknown codes).
    pub status_str: String,
    /// `err_str`: empty on success.
    pub message: String,
    /// The fields after `err_str`.
    pub fields: FieldValues,
}

/// Why a notification payload is not a response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseParseError {
    #[error("not a JSON array of strings: {0}")]
    NotStrings(String),
    #[error("expected [status, key, \"err_str\", message, field, value, ...], got {0} items")]
    Items(usize),
    #[error("first field is {0:?}, expected \"err_str\"")]
    FirstField(String),
}

impl Response {
    /// Parses a notification payload. Errors say what is wrong with it.
    pub fn parse(payload: &str) -> Result<Response, ResponseParseError> {
        let items: Vec<String> = serde_json::from_str(payload)
            .map_err(|e| ResponseParseError::NotStrings(e.to_string()))?;
        if items.len() < 4 || !items.len().is_multiple_of(2) {
            return Err(ResponseParseError::Items(items.len()));
        }
        let n = items.len();
        let mut it = items.into_iter();
        let (Some(status_str), Some(key), Some(first), Some(message)) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(ResponseParseError::Items(n));
        };
        if first != "err_str" {
            return Err(ResponseParseError::FirstField(first));
        }
        let rest: Vec<String> = it.collect();
        Ok(Response {
            key,
            status: StatusCode::from_swss(&status_str),
            status_str,
            message,
            fields: crate::types::pairs(rest),
        })
    }
}

/// What [`ResponseWaiter::wait`] found.
#[derive(Debug, Clone, Default)]
pub struct WaitOutcome {
    /// The first response for each awaited key.
    pub responses: BTreeMap<String, Response>,
    /// Awaited keys without a response before the deadline.
    pub missing: BTreeSet<String>,
}

impl WaitOutcome {
    pub fn all_ok(&self) -> bool {
        self.missing.is_empty() && self.responses.values().all(|r| r.status.is_ok())
    }

    /// Responses with a status other than success.
    pub fn failures(&self) -> impl Iterator<Item = &Response> {
        self.responses.values().filter(|r| !r.status.is_ok())
    }
}

/// Collects responses for the controller. Create it (which subscribes) before writing the keys.
pub struct ResponseWaiter {
    pubsub: redis::aio::PubSub,
    channel: String,
    /// Responses that arrived for keys nobody awaited yet (a later `wait` may want them).
    early: HashMap<String, Response>,
    malformed: u64,
}

/// Bound on responses kept for keys no `wait` asked for, so a foreign writer cannot grow memory forever.
const MAX_EARLY: usize = 1_000_000;

impl ResponseWaiter {
    pub async fn subscribe(sonic: &SonicDb, table: &str) -> Result<Self, SonicDbError> {
        check_table_name(table, ':')?;
        let channel = response_channel_at(sonic.config().db_base, table);
        let mut pubsub = sonic.pubsub().await?;
        pubsub
            .subscribe(&channel)
            .await
            .map_err(|e| SonicDbError::redis(format!("SUBSCRIBE {channel}"), e))?;
        Ok(ResponseWaiter {
            pubsub,
            channel,
            early: HashMap::new(),
            malformed: 0,
        })
    }

    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// How many messages on the channel could not be parsed so far.
    pub fn malformed_count(&self) -> u64 {
        self.malformed
    }

    /// Waits until every key in `keys` has a response or `timeout` passes. Keys without a response are
    /// listed in `missing`; only a lost connection is an error.
    pub async fn wait<I, K>(
        &mut self,
        keys: I,
        timeout: Duration,
    ) -> Result<WaitOutcome, SonicDbError>
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        let mut missing: BTreeSet<String> = keys.into_iter().map(Into::into).collect();
        let mut out = WaitOutcome::default();
        missing.retain(|k| match self.early.remove(k) {
            Some(r) => {
                out.responses.insert(k.clone(), r);
                false
            }
            None => true,
        });
        let deadline = tokio::time::Instant::now() + timeout;
        while !missing.is_empty() {
            let msg = match tokio::time::timeout_at(deadline, self.pubsub.on_message().next()).await
            {
                Err(_) => break,
                Ok(None) => {
                    return Err(SonicDbError::SubscriptionClosed {
                        channel: self.channel.clone(),
                    });
                }
                Ok(Some(msg)) => msg,
            };
            let payload: String = match msg.get_payload() {
                Ok(p) => p,
                Err(e) => {
                    self.malformed += 1;
                    tracing::warn!(channel = %self.channel, error = %e, "response payload is not a string");
                    continue;
                }
            };
            let response = match Response::parse(&payload) {
                Ok(r) => r,
                Err(reason) => {
                    self.malformed += 1;
                    tracing::warn!(channel = %self.channel, %reason, %payload, "malformed response");
                    continue;
                }
            };
            if missing.remove(&response.key) {
                out.responses.insert(response.key.clone(), response);
            } else if !out.responses.contains_key(&response.key) && self.early.len() < MAX_EARLY {
                self.early.insert(response.key.clone(), response);
            }
        }
        out.missing = missing;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_round_trip_their_swss_names() {
        for c in StatusCode::ALL {
            assert_eq!(StatusCode::from_swss(c.as_str()), c);
        }
        assert_eq!(
            StatusCode::from_swss("SWSS_RC_WHATEVER"),
            StatusCode::Unknown
        );
        assert_eq!(
            StatusCode::InvalidParam.to_string(),
            "SWSS_RC_INVALID_PARAM"
        );
        assert!(StatusCode::Success.is_ok());
        assert!(!StatusCode::NotExecuted.is_ok());
    }

    #[test]
    fn response_channel_follows_appl_db_naming() {
        assert_eq!(
            response_channel("P4RT_TABLE"),
            "APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL"
        );
        assert_eq!(
            response_channel_at(0, "P4RT_TABLE"),
            "APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL"
        );
        assert_eq!(
            response_channel_at(16, "P4RT_TABLE"),
            "APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL@16"
        );
    }

    #[test]
    fn response_message_is_notification_producer_json() {
        let fields = vec![("action".to_string(), "drop".to_string())];
        let msg = response_message(
            "SWSS_RC_INVALID_PARAM",
            r#"FIXED_T:{"match/a":"1"}"#,
            "[Weft] unknown action \"x\"",
            &fields,
        );
        assert_eq!(
            msg,
            r#"["SWSS_RC_INVALID_PARAM","FIXED_T:{\"match/a\":\"1\"}","err_str","[Weft] unknown action \"x\"","action","drop"]"#
        );
        let r = Response::parse(&msg).expect("parse");
        assert_eq!(r.status, StatusCode::InvalidParam);
        assert_eq!(r.key, r#"FIXED_T:{"match/a":"1"}"#);
        assert_eq!(r.message, "[Weft] unknown action \"x\"");
        assert_eq!(r.fields, fields);
    }

    #[test]
    fn malformed_response_payloads_are_rejected() {
        for bad in [
            "",
            "{}",
            r#"["SWSS_RC_SUCCESS","k"]"#,
            r#"["SWSS_RC_SUCCESS","k","msg","x"]"#,
            r#"["SWSS_RC_SUCCESS","k","err_str","","f"]"#,
            r#"["SWSS_RC_SUCCESS","k","err_str",1]"#,
        ] {
            assert!(Response::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
