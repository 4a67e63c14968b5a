//! The part of a switch's SONiC DB endpoint syntax that needs no Redis client: the block of
//! databases a switch takes on a redis-server it shares with other switches (`?db_base=N`).
//! The client reads it when it connects ([`crate::SonicDbConfig::parse`]); the intent checker
//! reads it to tell two switches' endpoints apart, without the client's dependencies (this
//! module is all the crate has without its `client` feature).
//!
//! ```text
//!   unix:///run/weft/redis.sock?db_base=32   →  server unix:///run/weft/redis.sock,
//!                                               SONiC database N is Redis database 32 + N
//! ```

/// Redis databases one switch takes: SONiC numbers its databases 0–15.
pub const DB_BLOCK: u32 = 16;
/// The largest `db_base` accepted (Redis needs `databases` above base + 15).
pub const MAX_DB_BASE: u32 = 1 << 20;

/// Why an endpoint's options are not what a SONiC DB endpoint takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("db_base {0:?} is not a number")]
    DbBaseNotANumber(String),
    #[error(
        "db_base {0} must be a multiple of {DB_BLOCK} up to {MAX_DB_BASE} (each switch takes \
         {DB_BLOCK} databases)"
    )]
    DbBaseOutOfRange(u32),
    #[error("unknown option {0:?} (a redis:// endpoint takes only db_base=N)")]
    UnknownOption(String),
}

/// What other options than `db_base` an endpoint may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Others {
    /// Any: the client takes more (`credentials=FILE`, a Unix socket's `user=`/`pass=`).
    Kept,
    /// None on a `redis://` endpoint: what an intent may write.
    RefusedOnTcp,
}

/// Takes `db_base=N` out of an endpoint's query string: (endpoint without it, N). N must be a
/// multiple of [`DB_BLOCK`] up to [`MAX_DB_BASE`], so two switches' blocks never overlap.
pub fn split_db_base(endpoint: &str) -> Result<(String, u32), EndpointError> {
    split(endpoint, Others::Kept)
}

/// What an intent's DB endpoint names: the server (the endpoint without `db_base=`) and the first
/// of the [`DB_BLOCK`] databases the switch uses there. Two switches whose identities are equal
/// would overwrite each other's tables. [`split_db_base`], and no other option on a `redis://`
/// endpoint.
pub fn db_identity(endpoint: &str) -> Result<(String, u32), EndpointError> {
    split(endpoint, Others::RefusedOnTcp)
}

fn split(endpoint: &str, others: Others) -> Result<(String, u32), EndpointError> {
    let Some((head, query)) = endpoint.split_once('?') else {
        return Ok((endpoint.to_string(), 0));
    };
    let mut base = 0;
    let mut rest = Vec::new();
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        match kv.strip_prefix("db_base=") {
            Some(v) => {
                base = v
                    .parse::<u32>()
                    .map_err(|_| EndpointError::DbBaseNotANumber(v.to_string()))?;
                if base % DB_BLOCK != 0 || base > MAX_DB_BASE {
                    return Err(EndpointError::DbBaseOutOfRange(base));
                }
            }
            None if others == Others::RefusedOnTcp && endpoint.starts_with("redis://") => {
                return Err(EndpointError::UnknownOption(kv.to_string()));
            }
            None => rest.push(kv),
        }
    }
    let head = if rest.is_empty() {
        head.to_string()
    } else {
        format!("{head}?{}", rest.join("&"))
    };
    Ok((head, base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_base_is_taken_out_and_other_options_kept() {
        assert_eq!(
            split_db_base("unix:///r.sock?user=u&db_base=32&pass=p"),
            Ok(("unix:///r.sock?user=u&pass=p".to_string(), 32))
        );
        assert_eq!(
            split_db_base("redis://h:1?credentials=/c"),
            Ok(("redis://h:1?credentials=/c".to_string(), 0))
        );
        assert_eq!(split_db_base("/r.sock"), Ok(("/r.sock".to_string(), 0)));
    }

    #[test]
    fn db_base_must_be_a_block_boundary_within_range() {
        assert_eq!(
            split_db_base("redis://h:1?db_base=x"),
            Err(EndpointError::DbBaseNotANumber("x".into()))
        );
        assert_eq!(
            split_db_base("redis://h:1?db_base=17"),
            Err(EndpointError::DbBaseOutOfRange(17))
        );
        assert_eq!(
            EndpointError::DbBaseOutOfRange(17).to_string(),
            "db_base 17 must be a multiple of 16 up to 1048576 (each switch takes 16 databases)"
        );
        assert!(split_db_base(&format!("redis://h:1?db_base={}", MAX_DB_BASE + DB_BLOCK)).is_err());
        assert!(split_db_base(&format!("redis://h:1?db_base={MAX_DB_BASE}")).is_ok());
    }

    #[test]
    fn an_intents_redis_endpoint_takes_no_other_option() {
        assert_eq!(
            db_identity("redis://h:1?timeout=1&db_base=16"),
            Err(EndpointError::UnknownOption("timeout=1".into()))
        );
        assert_eq!(
            db_identity("unix:///r.sock?timeout=1&db_base=16"),
            Ok(("unix:///r.sock?timeout=1".to_string(), 16))
        );
        assert_eq!(
            db_identity("redis://h:1?db_base=0"),
            db_identity("redis://h:1")
        );
    }
}
