//! ZMQ endpoints as swss-common names them: `tcp://HOST:PORT` (orchagent's route and DASH
//! channels, `tcp://localhost:8100`) and `ipc://PATH` (p4orch's
//! `ipc:///zmq_swss/p4orch_zmq_swss_ep`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::error::ZmqError;

/// Longest ipc path libzmq can bind or connect: `sun_path` holds 108 bytes with the final NUL.
pub const MAX_IPC_PATH: usize = 107;

/// Where a ZMQ server listens and a producer connects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ZmqEndpoint {
    /// `tcp://HOST:PORT`; port 0 (written `*`) binds any free port (see
    /// [`crate::zmq::ZmqServer::endpoint`] for the one chosen). HOST `*` binds every address.
    Tcp { host: String, port: u16 },
    /// `ipc://PATH`, a unix socket; its directory must exist.
    Ipc { path: PathBuf },
}

impl ZmqEndpoint {
    pub fn tcp(host: impl Into<String>, port: u16) -> Self {
        ZmqEndpoint::Tcp {
            host: host.into(),
            port,
        }
    }

    pub fn ipc(path: impl Into<PathBuf>) -> Self {
        ZmqEndpoint::Ipc { path: path.into() }
    }

    /// The unix socket's path, for an ipc endpoint.
    pub fn ipc_path(&self) -> Option<&Path> {
        match self {
            ZmqEndpoint::Ipc { path } => Some(path),
            ZmqEndpoint::Tcp { .. } => None,
        }
    }

    /// Checks what libzmq would refuse later with a bare EINVAL.
    pub(crate) fn check(&self) -> Result<(), ZmqError> {
        let bad = |reason: &str| {
            Err(ZmqError::InvalidEndpoint {
                endpoint: self.to_string(),
                reason: reason.to_string(),
            })
        };
        match self {
            ZmqEndpoint::Tcp { host, .. } => {
                if host.is_empty() {
                    return bad("no host (use * to bind every address)");
                }
                if host.chars().any(|c| c.is_whitespace() || c == '/') {
                    return bad("the host holds whitespace or '/'");
                }
            }
            ZmqEndpoint::Ipc { path } => {
                let len = path.as_os_str().len();
                if len == 0 {
                    return bad("no path");
                }
                if len > MAX_IPC_PATH {
                    return bad("the path is longer than the 107 bytes a unix socket can name");
                }
                if path.to_str().is_none() {
                    return bad("the path is not UTF-8");
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for ZmqEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZmqEndpoint::Tcp { host, port } => {
                let host = if host.contains(':') && !host.starts_with('[') {
                    format!("[{host}]")
                } else {
                    host.clone()
                };
                if *port == 0 {
                    write!(f, "tcp://{host}:*")
                } else {
                    write!(f, "tcp://{host}:{port}")
                }
            }
            ZmqEndpoint::Ipc { path } => write!(f, "ipc://{}", path.display()),
        }
    }
}

impl FromStr for ZmqEndpoint {
    type Err = ZmqError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| ZmqError::InvalidEndpoint {
            endpoint: s.to_string(),
            reason: reason.to_string(),
        };
        let endpoint = if let Some(rest) = s.strip_prefix("tcp://") {
            let (host, port) = rest
                .rsplit_once(':')
                .ok_or_else(|| bad("expected tcp://HOST:PORT"))?;
            let port = match port {
                "*" | "0" => 0,
                p => p
                    .parse::<u16>()
                    .map_err(|_| bad("the port is not a number from 1 to 65535"))?,
            };
            let host = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            ZmqEndpoint::tcp(host, port)
        } else if let Some(path) = s.strip_prefix("ipc://") {
            ZmqEndpoint::ipc(path)
        } else {
            return Err(bad(
                "expected tcp://HOST:PORT or ipc://PATH (the transports swss-common uses)",
            ));
        };
        endpoint.check()?;
        Ok(endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sonic_endpoints_parse_and_print_back() {
        for s in [
            "ipc:///zmq_swss/p4orch_zmq_swss_ep",
            "tcp://localhost:8100",
            "tcp://127.0.0.1:8101",
            "tcp://*:1234",
            "tcp://[::1]:8100",
        ] {
            let e: ZmqEndpoint = s.parse().expect(s);
            assert_eq!(e.to_string(), s);
        }
        assert_eq!(
            "tcp://127.0.0.1:*"
                .parse::<ZmqEndpoint>()
                .expect("any port"),
            ZmqEndpoint::tcp("127.0.0.1", 0)
        );
    }

    #[test]
    fn endpoints_libzmq_would_refuse_get_a_reason() {
        for (s, why) in [
            ("udp://1.2.3.4:5", "expected tcp://"),
            ("tcp://host", "expected tcp://HOST:PORT"),
            ("tcp://host:99999", "not a number"),
            ("tcp://:80", "no host"),
            ("ipc://", "no path"),
        ] {
            let err = s.parse::<ZmqEndpoint>().expect_err(s).to_string();
            assert!(err.contains(why), "{s}: {err}");
        }
        let long = format!("ipc:///{}", "d".repeat(MAX_IPC_PATH));
        let err = long.parse::<ZmqEndpoint>().expect_err("long").to_string();
        assert!(err.contains("107 bytes"), "{err}");
    }
}
