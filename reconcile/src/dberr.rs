//! Redis errors as a switch's errors, for every edge that talks to a switch's DBs.

use weft_sonic_db::SonicDbError;

use crate::core::SwitchError;

/// A DB error by kind, with an operator-facing reason on one line: `not a Redis server at …`
/// when the peer answered in something other than the Redis protocol (an HTTP server, a wrong
/// port), rather than the parser's bytes.
pub fn db_error(db: &str, e: &SonicDbError) -> SwitchError {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<redis::RedisError>()
            && r.kind() == redis::ErrorKind::Parse
        {
            return SwitchError::Protocol { db: db.to_string() };
        }
        cause = c.source();
    }
    let detail = one_line(&e.to_string());
    match e {
        SonicDbError::Fenced { term, held } => SwitchError::Fenced {
            term: *term,
            held: *held,
        },
        SonicDbError::ConnectTimeout { .. } => SwitchError::TimedOut { detail },
        SonicDbError::Redis { source, .. } if source.is_timeout() => {
            SwitchError::TimedOut { detail }
        }
        _ => SwitchError::Unreachable { detail },
    }
}

/// Newlines and runs of blanks as single spaces: a log line or a table cell stays one line.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
