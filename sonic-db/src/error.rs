//! Error types of the SONiC DB layer.

use std::time::Duration;

/// Everything that can go wrong talking to a switch's SONiC Redis.
#[derive(Debug, thiserror::Error)]
pub enum SonicDbError {
    #[error("invalid Redis endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },

    #[error("cannot connect to Redis at {endpoint} ({db}): {source}")]
    Connect {
        endpoint: String,
        db: &'static str,
        #[source]
        source: redis::RedisError,
    },

    #[error("connecting to Redis at {endpoint} ({db}) timed out after {timeout:?}")]
    ConnectTimeout {
        endpoint: String,
        db: &'static str,
        timeout: Duration,
    },

    #[error("Redis command failed ({context}): {source}")]
    Redis {
        context: String,
        #[source]
        source: redis::RedisError,
    },

    #[error("unexpected reply from Redis ({context}): {detail}")]
    UnexpectedReply { context: String, detail: String },

    #[error("subscription to {channel} ended: the Redis connection was lost")]
    SubscriptionClosed { channel: String },

    #[error(
        "keyspace notifications are not enabled on this Redis (notify-keyspace-events={current:?}, \
         need K and the g and h classes or A) and could not be enabled: {reason}"
    )]
    KeyspaceNotificationsDisabled { current: String, reason: String },

    #[error("invalid table name {name:?}: {reason}")]
    InvalidTableName { name: String, reason: String },

    #[error("invalid key {key:?} for table {table}: {reason}")]
    InvalidKey {
        table: String,
        key: String,
        reason: String,
    },

    #[error(transparent)]
    P4rt(#[from] P4rtError),

    /// A fenced write refused: the DB's term key holds a newer leader's term.
    #[error(
        "write refused: this writer's term {term} is older than the DB's term {held} (a newer \
         leader took over)"
    )]
    Fenced { term: u64, held: u64 },
}

/// The (term, held) of a `WEFT_FENCED` error reply of the fencing scripts (alone, or among a
/// pipeline's failures).
pub(crate) fn fenced(e: &redis::RedisError) -> Option<(u64, u64)> {
    fenced_term(&e.to_string())
}

/// The reason every key of a batch from a writer whose term is over is refused with, over
/// either transport (the fencing scripts' error, a consumer's FAILED_PRECONDITION answer):
/// [`fenced_term`] reads it back.
pub fn fenced_reason(term: u64, held: u64) -> String {
    format!("WEFT_FENCED term {term} is older than {held}")
}

/// The (term, held) a fencing refusal names, if `text` is one ([`fenced_reason`]; a number it
/// does not give is 0).
pub fn fenced_term(text: &str) -> Option<(u64, u64)> {
    let at = text.find("WEFT_FENCED")?;
    // "… term <t> is older than <held>"
    let words: Vec<&str> = text[at..]
        .split(|c: char| c.is_whitespace() || c == ',' || c == ')')
        .filter(|w| !w.is_empty())
        .collect();
    let after = |w: &str| {
        words
            .iter()
            .position(|x| *x == w)
            .and_then(|i| words.get(i + 1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((after("term").unwrap_or(0), after("than").unwrap_or(0)))
}

impl SonicDbError {
    /// True when the error means the Redis connection is gone (server down, restarted or unreachable):
    /// the caller should reconnect, resubscribe and resync rather than retry the same handle.
    pub fn is_connection_error(&self) -> bool {
        match self {
            SonicDbError::Connect { .. }
            | SonicDbError::ConnectTimeout { .. }
            | SonicDbError::SubscriptionClosed { .. } => true,
            SonicDbError::Redis { source, .. } => {
                source.is_io_error()
                    || source.is_connection_dropped()
                    || source.is_connection_refusal()
                    || source.is_timeout()
                    || source.is_unrecoverable_error()
            }
            _ => false,
        }
    }

    pub(crate) fn redis(context: impl Into<String>, source: redis::RedisError) -> Self {
        SonicDbError::Redis {
            context: context.into(),
            source,
        }
    }
}

/// Why a credentials file (`USER PASSWORD` or `PASSWORD`) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("credentials file {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("credentials file {} is empty", .0.display())]
    Empty(std::path::PathBuf),
    #[error(
        "credentials file {}: expected `USER PASSWORD` or `PASSWORD` on one line",
        .0.display()
    )]
    Malformed(std::path::PathBuf),
}

/// A P4RT_TABLE key or entry that does not follow the SONiC P4RT app format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum P4rtError {
    #[error("P4RT key {key:?} has no ':' between the table name and the match JSON")]
    MissingSeparator { key: String },

    #[error("P4RT key {key:?} does not start with {prefix:?}")]
    WrongPrefix { key: String, prefix: &'static str },

    #[error("invalid P4RT table name {name:?}: {reason}")]
    InvalidTableName { name: String, reason: &'static str },

    #[error("P4RT key {key:?}: match JSON does not parse: {reason}")]
    KeyJson { key: String, reason: String },

    #[error("P4RT key {key:?}: {reason}")]
    KeyContent { key: String, reason: String },

    #[error("P4RT key {key:?} is not in canonical form (expected {canonical:?})")]
    NonCanonicalKey { key: String, canonical: String },

    #[error("P4RT entry {key}: {reason}")]
    Field { key: String, reason: String },

    #[error("P4RT entry {key}: field {field:?} is not part of the P4RT format")]
    UnknownField { key: String, field: String },

    #[error("P4RT entry {key}: field 'actions' is not a valid action set: {reason}")]
    ActionSet { key: String, reason: String },

    #[error(
        "P4 table {p4_name:?} maps to the SONiC name {sonic_name:?}, which {other:?} maps to as well"
    )]
    NameCollision {
        p4_name: String,
        other: String,
        sonic_name: String,
    },

    #[error("unknown P4RT table {name:?} (known: {known})")]
    UnknownTable { name: String, known: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_reason_reads_back_as_its_terms_alone_or_inside_another_message() {
        assert_eq!(fenced_term(&fenced_reason(3, 5)), Some((3, 5)));
        let script_error = format!(
            "An error was signalled by the server: {}",
            fenced_reason(7, 9)
        );
        assert_eq!(fenced_term(&script_error), Some((7, 9)));
        assert_eq!(fenced_term("SWSS_RC_INVALID_PARAM bad port"), None);
    }
}
