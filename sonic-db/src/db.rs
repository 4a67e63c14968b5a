//! The catalogue of SONiC databases, Redis endpoints and connections.
//!
//! ```text
//!   SonicDb (endpoint + credentials + timeouts)
//!     ├── connect(SonicDbId::ApplDb)      -> DbConnection (multiplexed, SELECT 0)
//!     ├── connect(SonicDbId::ConfigDb)    -> DbConnection (SELECT 4)
//!     └── pubsub()                        -> redis::aio::PubSub (channels are global, not per DB)
//! ```
//!
//! Connections do not reconnect by themselves on purpose: a Redis restart loses every table, so the
//! caller has to notice ([`SonicDbError::is_connection_error`]), reconnect, resubscribe and resync.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo};

use crate::endpoint::split_db_base;
use crate::error::{CredentialsError, SonicDbError};

/// The SONiC databases Weft uses, with their numbers and key separators
/// (sonic-swss-common `database_config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SonicDbId {
    ApplDb,
    AsicDb,
    CountersDb,
    ConfigDb,
    FlexCounterDb,
    StateDb,
    ApplStateDb,
}

impl SonicDbId {
    pub const ALL: [SonicDbId; 7] = [
        SonicDbId::ApplDb,
        SonicDbId::AsicDb,
        SonicDbId::CountersDb,
        SonicDbId::ConfigDb,
        SonicDbId::FlexCounterDb,
        SonicDbId::StateDb,
        SonicDbId::ApplStateDb,
    ];

    /// The Redis database number.
    pub const fn number(self) -> u8 {
        match self {
            SonicDbId::ApplDb => 0,
            SonicDbId::AsicDb => 1,
            SonicDbId::CountersDb => 2,
            SonicDbId::ConfigDb => 4,
            SonicDbId::FlexCounterDb => 5,
            SonicDbId::StateDb => 6,
            SonicDbId::ApplStateDb => 14,
        }
    }

    /// The separator between a table name and a key in this database.
    pub const fn separator(self) -> char {
        match self {
            SonicDbId::ConfigDb | SonicDbId::StateDb => '|',
            _ => ':',
        }
    }

    /// The SONiC name, as in `database_config.json`.
    pub const fn name(self) -> &'static str {
        match self {
            SonicDbId::ApplDb => "APPL_DB",
            SonicDbId::AsicDb => "ASIC_DB",
            SonicDbId::CountersDb => "COUNTERS_DB",
            SonicDbId::ConfigDb => "CONFIG_DB",
            SonicDbId::FlexCounterDb => "FLEX_COUNTER_DB",
            SonicDbId::StateDb => "STATE_DB",
            SonicDbId::ApplStateDb => "APPL_STATE_DB",
        }
    }

    /// Looks a database up by its SONiC name.
    pub fn from_name(name: &str) -> Option<SonicDbId> {
        SonicDbId::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for SonicDbId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a switch's Redis listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisEndpoint {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

impl RedisEndpoint {
    fn addr(&self) -> ConnectionAddr {
        match self {
            RedisEndpoint::Tcp { host, port } => ConnectionAddr::Tcp(host.clone(), *port),
            RedisEndpoint::Unix(path) => ConnectionAddr::Unix(path.clone()),
        }
    }

    /// Parses `redis://host:port`, `unix:///path`, or a plain socket path, and returns any username and
    /// password the URL carried (`redis://user:pass@host:port`, `unix:///path?user=u&pass=p`).
    /// A database number in the URL is ignored: each [`SonicDbId`] selects its own.
    pub fn parse_with_credentials(
        s: &str,
    ) -> Result<(RedisEndpoint, Option<String>, Option<String>), SonicDbError> {
        let invalid = |reason: String| SonicDbError::InvalidEndpoint {
            endpoint: s.to_string(),
            reason,
        };
        let trimmed = s.trim();
        if trimmed.is_empty() {
            return Err(invalid("empty".to_string()));
        }
        if trimmed.starts_with('/') {
            return Ok((RedisEndpoint::Unix(PathBuf::from(trimmed)), None, None));
        }
        if !trimmed.contains("://") {
            return Err(invalid(
                "expected redis://host:port, unix:///path/to/socket or an absolute socket path"
                    .to_string(),
            ));
        }
        if trimmed.starts_with("rediss://") {
            return Err(invalid("TLS (rediss://) is not supported".to_string()));
        }
        let info = trimmed
            .into_connection_info()
            .map_err(|e| invalid(e.to_string()))?;
        let endpoint = match info.addr() {
            ConnectionAddr::Tcp(host, port) => RedisEndpoint::Tcp {
                host: host.clone(),
                port: *port,
            },
            ConnectionAddr::Unix(path) => RedisEndpoint::Unix(path.clone()),
            other => return Err(invalid(format!("unsupported address {other}"))),
        };
        let settings = info.redis_settings();
        Ok((
            endpoint,
            settings.username().map(str::to_string),
            settings.password().map(str::to_string),
        ))
    }
}

impl FromStr for RedisEndpoint {
    type Err = SonicDbError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RedisEndpoint::parse_with_credentials(s).map(|(e, _, _)| e)
    }
}

impl fmt::Display for RedisEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisEndpoint::Tcp { host, port } if host.contains(':') => {
                write!(f, "redis://[{host}]:{port}")
            }
            RedisEndpoint::Tcp { host, port } => write!(f, "redis://{host}:{port}"),
            RedisEndpoint::Unix(path) => write!(f, "unix://{}", path.display()),
        }
    }
}

/// The environment variable naming a credentials file for every DB endpoint that carries none.
pub const CREDENTIALS_ENV: &str = "WEFT_DB_CREDENTIALS";

/// Reads a credentials file: one line `USER PASSWORD` (an ACL user), or `PASSWORD` alone (the
/// default user); `#` lines and blank lines are ignored.
pub fn read_credentials(
    path: &std::path::Path,
) -> Result<(Option<String>, String), CredentialsError> {
    let text = std::fs::read_to_string(path).map_err(|source| CredentialsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .ok_or_else(|| CredentialsError::Empty(path.to_path_buf()))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        [p] => Ok((None, (*p).to_string())),
        [u, p] => Ok((Some((*u).to_string()), (*p).to_string())),
        _ => Err(CredentialsError::Malformed(path.to_path_buf())),
    }
}

/// Takes `credentials=FILE` out of an endpoint's query.
fn split_credentials(endpoint: &str) -> (String, Option<PathBuf>) {
    let Some((head, query)) = endpoint.split_once('?') else {
        return (endpoint.to_string(), None);
    };
    let mut file = None;
    let mut rest = Vec::new();
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        match kv.strip_prefix("credentials=") {
            Some(v) => file = Some(PathBuf::from(v)),
            None => rest.push(kv),
        }
    }
    let endpoint = if rest.is_empty() {
        head.to_string()
    } else {
        format!("{head}?{}", rest.join("&"))
    };
    (endpoint, file)
}

/// How to reach one switch's SONiC Redis.
#[derive(Clone)]
pub struct SonicDbConfig {
    pub endpoint: RedisEndpoint,
    /// ACL user (Redis 6+); `None` is the `default` user.
    pub username: Option<String>,
    pub password: Option<String>,
    pub connect_timeout: Duration,
    /// Per-command timeout. Generous because a big Lua batch on a loaded machine can take a while.
    pub response_timeout: Duration,
    /// Where this switch's block of databases starts (`?db_base=N` in the endpoint): SONiC's
    /// database N is Redis database `db_base + N`, so several switches' DBs can share one
    /// redis-server (each takes [`crate::endpoint::DB_BLOCK`] databases). 0 on a real switch.
    pub db_base: u32,
}

impl fmt::Debug for SonicDbConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SonicDbConfig")
            .field("endpoint", &self.endpoint)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("db_base", &self.db_base)
            .finish()
    }
}

impl SonicDbConfig {
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
    pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

    pub fn new(endpoint: RedisEndpoint) -> Self {
        SonicDbConfig {
            endpoint,
            username: None,
            password: None,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            response_timeout: Self::DEFAULT_RESPONSE_TIMEOUT,
            db_base: 0,
        }
    }

    /// Parses an endpoint string (see [`RedisEndpoint::parse_with_credentials`]); credentials in the
    /// URL are kept. Credentials can come from a file instead, so that they are not on a command
    /// line (`ps` shows it): `?credentials=/path` in the endpoint, or else the file named by the
    /// environment variable [`CREDENTIALS_ENV`]; see [`read_credentials`] for its format.
    pub fn parse(endpoint: &str) -> Result<Self, SonicDbError> {
        let invalid = |reason: String| SonicDbError::InvalidEndpoint {
            endpoint: endpoint.to_string(),
            reason,
        };
        let (rest, db_base) = split_db_base(endpoint).map_err(|e| invalid(e.to_string()))?;
        let (rest, file) = split_credentials(&rest);
        let (endpoint, mut username, mut password) = RedisEndpoint::parse_with_credentials(&rest)?;
        let file = file.or_else(|| {
            std::env::var_os(CREDENTIALS_ENV)
                .filter(|_| password.is_none())
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        });
        if let Some(file) = file {
            let (u, p) = read_credentials(&file).map_err(|e| invalid(e.to_string()))?;
            username = u;
            password = Some(p);
        }
        Ok(SonicDbConfig {
            username,
            password,
            db_base,
            ..SonicDbConfig::new(endpoint)
        })
    }

    pub fn with_password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    pub fn with_user(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.username = Some(username.into());
        self.password = Some(password.into());
        self
    }
}

/// A handle on one switch's SONiC Redis; opens connections per database.
#[derive(Debug, Clone)]
pub struct SonicDb {
    config: SonicDbConfig,
}

impl SonicDb {
    pub fn new(config: SonicDbConfig) -> Self {
        SonicDb { config }
    }

    /// Shorthand for [`SonicDbConfig::parse`] with default timeouts.
    pub fn from_endpoint(endpoint: &str) -> Result<Self, SonicDbError> {
        Ok(SonicDb::new(SonicDbConfig::parse(endpoint)?))
    }

    pub fn config(&self) -> &SonicDbConfig {
        &self.config
    }

    pub fn endpoint(&self) -> &RedisEndpoint {
        &self.config.endpoint
    }

    /// The Redis database that holds SONiC database `db` of this switch.
    pub fn db_number(&self, db: SonicDbId) -> u32 {
        self.config.db_base + u32::from(db.number())
    }

    fn client(&self, db: u32) -> Result<redis::Client, SonicDbError> {
        let mut settings = RedisConnectionInfo::default()
            .set_db(i64::from(db))
            // CLIENT SETINFO only exists from Redis 7.2; older SONiC images answer it with an error.
            .set_skip_set_lib_name();
        if let Some(user) = &self.config.username {
            settings = settings.set_username(user);
        }
        if let Some(password) = &self.config.password {
            settings = settings.set_password(password);
        }
        let info = self
            .config
            .endpoint
            .addr()
            .into_connection_info()
            .map_err(|source| self.connect_error("client", source))?
            .set_redis_settings(settings);
        redis::Client::open(info).map_err(|source| self.connect_error("client", source))
    }

    fn connect_error(&self, db: &'static str, source: redis::RedisError) -> SonicDbError {
        SonicDbError::Connect {
            endpoint: self.config.endpoint.to_string(),
            db,
            source,
        }
    }

    /// Opens a multiplexed connection on `db` (cheap to clone; commands from clones are pipelined).
    pub async fn connect(&self, db: SonicDbId) -> Result<DbConnection, SonicDbError> {
        let number = self.db_number(db);
        let client = self.client(number)?;
        let cfg = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.config.connect_timeout))
            .set_response_timeout(Some(self.config.response_timeout));
        let fut = client.get_multiplexed_async_connection_with_config(&cfg);
        // The driver's own connection timeout does not cover AUTH/SELECT; bound the whole handshake.
        let conn = tokio::time::timeout(self.config.connect_timeout * 2, fut)
            .await
            .map_err(|_| SonicDbError::ConnectTimeout {
                endpoint: self.config.endpoint.to_string(),
                db: db.name(),
                timeout: self.config.connect_timeout * 2,
            })?
            .map_err(|source| self.connect_error(db.name(), source))?;
        Ok(DbConnection { conn, db, number })
    }

    /// Opens a pub/sub connection. Channels are global to the Redis instance; keyspace channels name
    /// their database (`__keyspace@<n>__:`).
    pub async fn pubsub(&self) -> Result<redis::aio::PubSub, SonicDbError> {
        let client = self.client(self.config.db_base)?;
        tokio::time::timeout(self.config.connect_timeout * 2, client.get_async_pubsub())
            .await
            .map_err(|_| SonicDbError::ConnectTimeout {
                endpoint: self.config.endpoint.to_string(),
                db: "pubsub",
                timeout: self.config.connect_timeout * 2,
            })?
            .map_err(|source| self.connect_error("pubsub", source))
    }

    /// Round trip to the server: Ok when Redis answers.
    pub async fn ping(&self) -> Result<(), SonicDbError> {
        let mut conn = self.connect(SonicDbId::ApplDb).await?;
        let pong: String = redis::cmd("PING")
            .query_async(conn.raw())
            .await
            .map_err(|e| SonicDbError::redis("PING", e))?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(SonicDbError::UnexpectedReply {
                context: "PING".into(),
                detail: pong,
            })
        }
    }

    /// Makes sure Redis publishes keyspace notifications for hash writes and deletes (needed by
    /// [`crate::SubscriberStateTable`]). SONiC's own redis.conf enables them (`AKE`); a bare
    /// redis-server does not, so this adds the missing classes with `CONFIG SET` when `allow_config_set`
    /// is true. Where CONFIG is forbidden (ACL, renamed command) the error says what to enable.
    pub async fn ensure_keyspace_notifications(
        &self,
        allow_config_set: bool,
    ) -> Result<(), SonicDbError> {
        let mut conn = self.connect(SonicDbId::ApplDb).await?;
        let reply: Vec<String> = match redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .query_async(conn.raw())
            .await
        {
            Ok(r) => r,
            Err(e) if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() => {
                return Err(SonicDbError::redis("CONFIG GET notify-keyspace-events", e));
            }
            // CONFIG forbidden (ACL) or renamed, as on locked-down switches: SONiC's own redis.conf
            // enables keyspace events there, so go on rather than refuse to run.
            Err(e) => {
                tracing::warn!(endpoint = %self.config.endpoint, error = %e,
                    "cannot read notify-keyspace-events; assuming SONiC's default (AKE)");
                return Ok(());
            }
        };
        let current = reply.get(1).cloned().unwrap_or_default();
        if let Some(wanted) = keyspace_flags_to_set(&current) {
            if !allow_config_set {
                return Err(SonicDbError::KeyspaceNotificationsDisabled {
                    current,
                    reason: "CONFIG SET not allowed by the caller".into(),
                });
            }
            let set: Result<(), _> = redis::cmd("CONFIG")
                .arg("SET")
                .arg("notify-keyspace-events")
                .arg(&wanted)
                .query_async(conn.raw())
                .await;
            if let Err(e) = set {
                return Err(SonicDbError::KeyspaceNotificationsDisabled {
                    current,
                    reason: format!("CONFIG SET notify-keyspace-events {wanted} failed: {e}"),
                });
            }
            tracing::info!(endpoint = %self.config.endpoint, from = %current, to = %wanted,
                "enabled Redis keyspace notifications");
        }
        Ok(())
    }
}

/// Returns the flags to set when `current` lacks keyspace events for hashes and generic commands,
/// or `None` when they are already on.
pub(crate) fn keyspace_flags_to_set(current: &str) -> Option<String> {
    let has = |c: char| current.contains(c);
    let classes_ok = has('A') || (has('g') && has('h'));
    if has('K') && classes_ok {
        return None;
    }
    let mut wanted: String = current.to_string();
    if !has('K') {
        wanted.push('K');
    }
    // 'A' already covers the g and h classes.
    if !has('A') {
        for c in ['g', 'h'] {
            if !has(c) {
                wanted.push(c);
            }
        }
    }
    Some(wanted)
}

/// A connection selected onto one SONiC database. Clone it freely.
#[derive(Clone)]
pub struct DbConnection {
    conn: MultiplexedConnection,
    db: SonicDbId,
    /// The Redis database number (the switch's `db_base` + the SONiC number).
    number: u32,
}

impl fmt::Debug for DbConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbConnection")
            .field("db", &self.db)
            .finish()
    }
}

impl DbConnection {
    pub fn db(&self) -> SonicDbId {
        self.db
    }

    /// The Redis database this connection selected.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// The underlying redis connection, for commands this crate does not wrap.
    pub fn raw(&mut self) -> &mut MultiplexedConnection {
        &mut self.conn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_numbers_and_separators_match_sonic_database_config() {
        let got: Vec<(&str, u8, char)> = SonicDbId::ALL
            .iter()
            .map(|d| (d.name(), d.number(), d.separator()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("APPL_DB", 0, ':'),
                ("ASIC_DB", 1, ':'),
                ("COUNTERS_DB", 2, ':'),
                ("CONFIG_DB", 4, '|'),
                ("FLEX_COUNTER_DB", 5, ':'),
                ("STATE_DB", 6, '|'),
                ("APPL_STATE_DB", 14, ':'),
            ]
        );
        assert_eq!(SonicDbId::from_name("STATE_DB"), Some(SonicDbId::StateDb));
        assert_eq!(SonicDbId::from_name("NOPE_DB"), None);
    }

    #[test]
    fn endpoints_parse_tcp_unix_url_and_plain_path() {
        let e: RedisEndpoint = "redis://127.0.0.1:6380".parse().expect("tcp");
        assert_eq!(
            e,
            RedisEndpoint::Tcp {
                host: "127.0.0.1".into(),
                port: 6380
            }
        );
        let e: RedisEndpoint = "unix:///var/run/redis/redis.sock"
            .parse()
            .expect("unix url");
        assert_eq!(e, RedisEndpoint::Unix("/var/run/redis/redis.sock".into()));
        let e: RedisEndpoint = "/tmp/x/redis.sock".parse().expect("path");
        assert_eq!(e, RedisEndpoint::Unix("/tmp/x/redis.sock".into()));
        assert_eq!(e.to_string(), "unix:///tmp/x/redis.sock");
    }

    #[test]
    fn endpoint_url_credentials_are_kept() {
        let cfg = SonicDbConfig::parse("redis://weft:s3cret@10.0.0.1:6379").expect("parse");
        assert_eq!(cfg.username.as_deref(), Some("weft"));
        assert_eq!(cfg.password.as_deref(), Some("s3cret"));
        assert!(
            !format!("{cfg:?}").contains("s3cret"),
            "password leaks into Debug"
        );
    }

    #[test]
    fn bad_endpoints_are_rejected_with_reason() {
        for bad in ["", "localhost:6379", "http://x:1", "rediss://h:1"] {
            let err = bad.parse::<RedisEndpoint>().expect_err(bad);
            assert!(
                matches!(err, SonicDbError::InvalidEndpoint { .. }),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn keyspace_flags_are_added_only_when_missing() {
        assert_eq!(keyspace_flags_to_set("AKE"), None);
        assert_eq!(keyspace_flags_to_set("Kgh"), None);
        assert_eq!(keyspace_flags_to_set("").as_deref(), Some("Kgh"));
        assert_eq!(keyspace_flags_to_set("Ex").as_deref(), Some("ExKgh"));
        assert_eq!(keyspace_flags_to_set("AE").as_deref(), Some("AEK"));
        assert_eq!(keyspace_flags_to_set("Kg").as_deref(), Some("Kgh"));
    }
}
