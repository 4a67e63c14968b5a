//! The forms of a switch's P4Runtime address and SONiC DB endpoint, checked where they are
//! written (per switch and under `fabric.defaults`), so what the plugin, the testbed and the
//! controller later parse is known to be well formed. The `?db_base=N` rule is the SONiC DB
//! client's own ([`weft_sonic_db::endpoint`]).

use std::net::{Ipv4Addr, Ipv6Addr};

pub use weft_sonic_db::endpoint::{EndpointError, db_identity};

/// Longest Unix socket path: `sun_path` holds 108 bytes with the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

/// Why a `HOST:PORT` address is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("the host is missing")]
    MissingHost,
    #[error("[{0}] is not an IPv6 address")]
    BadIpv6(String),
    #[error("an IPv6 address must be in brackets, e.g. [fd00::1]:9559")]
    UnbracketedIpv6,
    #[error("{0} is not an IPv4 address")]
    BadIpv4(String),
    /// The host as shown to an operator ([`crate::names::display_name`]).
    #[error("{0:?} is neither an IP address nor a host name")]
    BadHost(String),
    #[error("the port {0:?} is not a number")]
    PortNotANumber(String),
    #[error("the port {0} is outside 1..=65535")]
    PortOutOfRange(String),
    #[error("write HOST:PORT, without a scheme such as http://")]
    Scheme,
    #[error("missing :PORT after the bracketed IPv6 address")]
    MissingPortAfterIpv6,
    #[error("missing :PORT")]
    MissingPort,
}

/// Why a path cannot be a Unix socket's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SocketPathError {
    #[error("a socket path must be absolute")]
    Relative,
    #[error("the socket path contains spaces or control characters")]
    BadChar,
    #[error("a socket path names a file, not a directory")]
    Directory,
    #[error("the socket path is {0} bytes; Unix sockets allow at most {MAX_SOCKET_PATH}")]
    TooLong(usize),
}

/// Why a SONiC DB endpoint is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DbEndpointError {
    #[error(transparent)]
    Options(#[from] EndpointError),
    #[error(transparent)]
    SocketPath(#[from] SocketPathError),
    #[error(transparent)]
    Address(#[from] AddressError),
    #[error("expected redis://HOST:PORT, unix:///path/to/redis.sock or an absolute socket path")]
    Form,
    #[error("the database {0:?} after the port is not a number")]
    Database(String),
}

/// A host: an IPv4 address, a bracketed IPv6 address or a DNS name.
fn check_host(host: &str) -> Result<(), AddressError> {
    if host.is_empty() {
        return Err(AddressError::MissingHost);
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6
            .parse::<Ipv6Addr>()
            .map(|_| ())
            .map_err(|_| AddressError::BadIpv6(v6.to_string()));
    }
    if host.contains(':') {
        return Err(AddressError::UnbracketedIpv6);
    }
    if host.parse::<Ipv4Addr>().is_ok() {
        return Ok(());
    }
    let labels: Vec<&str> = host.split('.').collect();
    if labels.iter().all(|l| l.chars().all(|c| c.is_ascii_digit())) {
        return Err(AddressError::BadIpv4(host.to_string()));
    }
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if host.len() > 253 || !labels.iter().all(label_ok) {
        return Err(AddressError::BadHost(
            crate::names::display_name(host).to_string(),
        ));
    }
    Ok(())
}

/// A TCP port, 1..=65535, in plain decimal.
fn check_port(port: &str) -> Result<u16, AddressError> {
    if port.is_empty() || !port.chars().all(|c| c.is_ascii_digit()) {
        return Err(AddressError::PortNotANumber(port.to_string()));
    }
    match port.parse::<u32>() {
        Ok(p @ 1..=65535) => Ok(p as u16),
        _ => Err(AddressError::PortOutOfRange(port.to_string())),
    }
}

/// `HOST:PORT`, as P4Runtime servers are addressed; returns the host and the port.
pub fn check_host_port(s: &str) -> Result<(&str, u16), AddressError> {
    if s.contains("://") {
        return Err(AddressError::Scheme);
    }
    let (host, port) = if s.starts_with('[') {
        match s.find("]:") {
            Some(i) => (&s[..=i], &s[i + 2..]),
            None => return Err(AddressError::MissingPortAfterIpv6),
        }
    } else {
        match s.rsplit_once(':') {
            Some(hp) => hp,
            None => return Err(AddressError::MissingPort),
        }
    };
    check_host(host)?;
    Ok((host, check_port(port)?))
}

/// An absolute path a Unix socket can have.
pub fn check_socket_path(path: &str) -> Result<(), SocketPathError> {
    if !path.starts_with('/') {
        return Err(SocketPathError::Relative);
    }
    if path.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(SocketPathError::BadChar);
    }
    if path.ends_with('/') {
        return Err(SocketPathError::Directory);
    }
    if path.len() > MAX_SOCKET_PATH {
        return Err(SocketPathError::TooLong(path.len()));
    }
    Ok(())
}

/// A SONiC DB endpoint: `redis://[USER[:PASS]@]HOST:PORT[/[DB]]`, `unix:///path.sock[?…]` or an
/// absolute socket path (the forms the SONiC DB client accepts).
pub fn check_db(s: &str) -> Result<(), DbEndpointError> {
    let (s, _) = db_identity(s)?;
    if s.starts_with('/') {
        return Ok(check_socket_path(&s)?);
    }
    if let Some(rest) = s.strip_prefix("unix://") {
        let path = rest.split_once('?').map_or(rest, |(p, _)| p);
        return Ok(check_socket_path(path)?);
    }
    let Some(rest) = s.strip_prefix("redis://") else {
        return Err(DbEndpointError::Form);
    };
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let hostport = match rest.split_once('/') {
        Some((hp, db)) => {
            if !db.chars().all(|c| c.is_ascii_digit()) {
                return Err(DbEndpointError::Database(db.to_string()));
            }
            hp
        }
        None => rest,
    };
    check_host_port(hostport)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p4runtime_addresses_must_be_host_and_port() {
        assert_eq!(check_host_port("127.0.0.1:9559"), Ok(("127.0.0.1", 9559)));
        assert!(check_host_port("switch-1.example:9559").is_ok());
        assert!(check_host_port("[fd00::1]:9559").is_ok());
        for bad in [
            "localhost",
            ":70000",
            "127.0.0.1:70000",
            "127.0.0.1:0",
            "http://127.0.0.1:9559",
            "fd00::1:9559",
            "10.0.0.300:1",
            "a b:1",
            "host:+5",
            "host:",
        ] {
            assert!(check_host_port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn switches_sharing_a_server_are_told_apart_by_db_base_only() {
        assert_eq!(
            db_identity("redis://h:1?db_base=0"),
            db_identity("redis://h:1")
        );
        assert_ne!(
            db_identity("redis://h:1?db_base=16"),
            db_identity("redis://h:1")
        );
        assert_eq!(
            db_identity("unix:///r.sock?db_base=32"),
            Ok(("unix:///r.sock".to_string(), 32))
        );
    }

    #[test]
    fn db_endpoints_take_the_forms_the_client_reads() {
        for ok in [
            "redis://127.0.0.1:6379",
            "redis://127.0.0.1:6379/",
            "redis://weft:s3cret@10.0.0.1:6379/0",
            "unix:///run/weft/leaf1/redis.sock",
            "/run/weft/leaf1/redis.sock",
            "redis://127.0.0.1:6379?db_base=32",
            "unix:///run/weft/redis.sock?db_base=16",
        ] {
            assert_eq!(check_db(ok), Ok(()), "{ok}");
        }
        for bad in [
            "localhost",
            "http://10.0.0.1:6379",
            "redis://10.0.0.1",
            "redis://10.0.0.1:70000",
            "unix://relative/x.sock",
            "relative/x.sock",
            &format!("/{}", "x".repeat(200)),
            "redis://127.0.0.1:6379?db_base=17",
            "redis://127.0.0.1:6379?db_base=-16",
            "redis://127.0.0.1:6379?db_base=99999999999",
            "redis://127.0.0.1:6379?timeout=1",
        ] {
            assert!(check_db(bad).is_err(), "{bad}");
        }
    }
}
