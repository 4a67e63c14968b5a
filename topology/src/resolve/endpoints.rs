//! The forms of a switch's P4Runtime address and SONiC DB endpoint, checked where they are
//! written (per switch and under `fabric.defaults`), so what the plugin, the testbed and the
//! controller later parse is known to be well formed.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Longest Unix socket path: `sun_path` holds 108 bytes with the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

/// A host: an IPv4 address, a bracketed IPv6 address or a DNS name.
fn check_host(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("the host is missing".into());
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6
            .parse::<Ipv6Addr>()
            .map(|_| ())
            .map_err(|_| format!("[{v6}] is not an IPv6 address"));
    }
    if host.contains(':') {
        return Err("an IPv6 address must be in brackets, e.g. [fd00::1]:9559".into());
    }
    if host.parse::<Ipv4Addr>().is_ok() {
        return Ok(());
    }
    let labels: Vec<&str> = host.split('.').collect();
    if labels.iter().all(|l| l.chars().all(|c| c.is_ascii_digit())) {
        return Err(format!("{host} is not an IPv4 address"));
    }
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if host.len() > 253 || !labels.iter().all(label_ok) {
        return Err(format!(
            "{:?} is neither an IP address nor a host name",
            crate::names::display_name(host).to_string()
        ));
    }
    Ok(())
}

/// A TCP port, 1..=65535, in plain decimal.
fn check_port(port: &str) -> Result<u16, String> {
    if port.is_empty() || !port.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("the port {port:?} is not a number"));
    }
    match port.parse::<u32>() {
        Ok(p @ 1..=65535) => Ok(p as u16),
        _ => Err(format!("the port {port} is outside 1..=65535")),
    }
}

/// `HOST:PORT`, as P4Runtime servers are addressed; returns the host and the port.
pub fn check_host_port(s: &str) -> Result<(&str, u16), String> {
    if s.contains("://") {
        return Err("write HOST:PORT, without a scheme such as http://".into());
    }
    let (host, port) = if s.starts_with('[') {
        match s.find("]:") {
            Some(i) => (&s[..=i], &s[i + 2..]),
            None => return Err("missing :PORT after the bracketed IPv6 address".into()),
        }
    } else {
        match s.rsplit_once(':') {
            Some(hp) => hp,
            None => return Err("missing :PORT".into()),
        }
    };
    check_host(host)?;
    Ok((host, check_port(port)?))
}

/// An absolute path a Unix socket can have.
pub fn check_socket_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err("a socket path must be absolute".into());
    }
    if path.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("the socket path contains spaces or control characters".into());
    }
    if path.ends_with('/') {
        return Err("a socket path names a file, not a directory".into());
    }
    if path.len() > MAX_SOCKET_PATH {
        return Err(format!(
            "the socket path is {} bytes; Unix sockets allow at most {MAX_SOCKET_PATH}",
            path.len()
        ));
    }
    Ok(())
}

/// Redis databases one switch's SONiC DBs take when switches share a redis-server (`?db_base=N`).
pub const DB_BLOCK: u32 = 16;
/// The largest `db_base` (Redis must be started with `databases` above it + 15).
pub const MAX_DB_BASE: u32 = 1 << 20;

/// What a DB endpoint names: the server (the endpoint without `db_base=`) and the first of the 16
/// databases the switch uses there. Two switches whose identities are equal would overwrite each
/// other's tables. The same rule as the SONiC DB client's, which asserts it again on connect.
pub fn db_identity(s: &str) -> Result<(String, u32), String> {
    let Some((head, query)) = s.split_once('?') else {
        return Ok((s.to_string(), 0));
    };
    let mut base = 0;
    let mut rest = Vec::new();
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        match kv.strip_prefix("db_base=") {
            Some(v) => {
                base = v
                    .parse::<u32>()
                    .map_err(|_| format!("db_base {v:?} is not a number"))?;
                if base % DB_BLOCK != 0 || base > MAX_DB_BASE {
                    return Err(format!(
                        "db_base {base} must be a multiple of {DB_BLOCK} up to {MAX_DB_BASE} \
                         (each switch takes {DB_BLOCK} databases)"
                    ));
                }
            }
            None if s.starts_with("redis://") => {
                return Err(format!(
                    "unknown option {kv:?} (a redis:// endpoint takes only db_base=N)"
                ));
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

/// A SONiC DB endpoint: `redis://[USER[:PASS]@]HOST:PORT[/[DB]]`, `unix:///path.sock[?…]` or an
/// absolute socket path (the forms the SONiC DB client accepts).
pub fn check_db(s: &str) -> Result<(), String> {
    const FORMS: &str =
        "expected redis://HOST:PORT, unix:///path/to/redis.sock or an absolute socket path";
    let (s, _) = db_identity(s)?;
    if s.starts_with('/') {
        return check_socket_path(&s);
    }
    if let Some(rest) = s.strip_prefix("unix://") {
        let path = rest.split_once('?').map_or(rest, |(p, _)| p);
        return check_socket_path(path);
    }
    let Some(rest) = s.strip_prefix("redis://") else {
        return Err(FORMS.into());
    };
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let hostport = match rest.split_once('/') {
        Some((hp, db)) => {
            if !db.chars().all(|c| c.is_ascii_digit()) {
                return Err(format!(
                    "the database {db:?} after the port is not a number"
                ));
            }
            hp
        }
        None => rest,
    };
    check_host_port(hostport).map(|_| ())
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
