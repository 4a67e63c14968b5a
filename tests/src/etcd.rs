//! A real etcd (Debian's `etcd-server`, scripts/setup.sh installs it) on loopback ports, with
//! its data in a temporary directory; killed by PID and its directory removed when dropped.
//! Its election timeout is short (500 ms, heartbeat 50 ms) so its minimum lease TTL is 1 s.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::bmv2::{ProcessGuard, free_port};

/// Why etcd did not start.
#[derive(Debug)]
pub enum EtcdError {
    NotFound,
    /// Its data directory or log could not be made.
    Io(std::io::Error),
    Spawn(std::io::Error),
    /// It exited or did not answer healthy within 30 s; its log.
    Unhealthy(String),
}

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EtcdError::NotFound => {
                f.write_str("etcd not found (scripts/setup.sh installs etcd-server)")
            }
            EtcdError::Io(e) => write!(f, "{e}"),
            EtcdError::Spawn(e) => write!(f, "etcd: {e}"),
            EtcdError::Unhealthy(log) => write!(f, "etcd did not become healthy:\n{log}"),
        }
    }
}

impl std::error::Error for EtcdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EtcdError::Io(e) | EtcdError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

pub struct Etcd {
    guard: ProcessGuard,
    dir: PathBuf,
    client_port: u16,
}

/// Where etcd is, if installed.
pub fn find_etcd() -> Option<PathBuf> {
    crate::redis::find_binary("etcd")
}

impl Etcd {
    pub fn start() -> Result<Etcd, EtcdError> {
        let bin = find_etcd().ok_or(EtcdError::NotFound)?;
        let client_port = free_port();
        let peer_port = free_port();
        let dir =
            std::env::temp_dir().join(format!("weft-etcd-{}-{client_port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(EtcdError::Io)?;
        let client = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log = std::fs::File::create(dir.join("etcd.log")).map_err(EtcdError::Io)?;
        let child = Command::new(bin)
            .args(["--name", "weft-test", "--data-dir"])
            .arg(dir.join("data"))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("weft-test={peer}")])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(EtcdError::Spawn)?;
        let mut e = Etcd {
            guard: ProcessGuard::new("etcd", child),
            dir,
            client_port,
        };
        let t0 = Instant::now();
        while !e.healthy() {
            if !e.guard.is_running() || t0.elapsed() > Duration::from_secs(30) {
                let log = std::fs::read_to_string(e.dir.join("etcd.log")).unwrap_or_default();
                return Err(EtcdError::Unhealthy(log));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(e)
    }

    fn healthy(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.client_port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"GET /health HTTP/1.0\r\n\r\n").is_err() {
            return false;
        }
        let mut body = String::new();
        let _ = s.read_to_string(&mut body);
        body.contains("\"health\":\"true\"")
    }

    /// `etcd://127.0.0.1:PORT`, as `weft run --ha` takes it.
    pub fn url(&self) -> String {
        format!("etcd://127.0.0.1:{}", self.client_port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.guard.pid()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.guard.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
