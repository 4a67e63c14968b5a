//! A real `redis-server` (Debian package) for tests: one private instance on a unix socket in its own
//! temporary directory, nothing persisted, killed by PID when the guard drops (also on test failure).
//!
//! Depends on `std` only, like all of `weft-tests`, so any crate can take it as a dev-dependency.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How to install the server when it is missing; quoted in errors.
pub const REDIS_INSTALL_HINT: &str = "apt-get install -y redis-server";

/// How long a starting server may take to answer on a loaded 2-core machine.
const START_DEADLINE: Duration = Duration::from_secs(20);

/// Options for [`RedisServer::start_with`].
#[derive(Debug, Clone, Default)]
pub struct RedisServerOptions {
    /// `requirepass` for the default user.
    pub password: Option<String>,
    /// An extra ACL user `(name, password)` with full rights.
    pub acl_user: Option<(String, String)>,
    /// `notify-keyspace-events` at start (empty: off, as a stock server).
    pub notify_keyspace_events: Option<String>,
    /// Also listen on this loopback TCP port (0: no TCP).
    pub tcp_port: u16,
    /// `databases` (0: Redis' default of 16), for several switches' DBs in one server.
    pub databases: u32,
}

/// A running private redis-server.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    dir: PathBuf,
    socket: PathBuf,
    options: RedisServerOptions,
}

/// Finds `name` on PATH.
pub fn find_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn unique_dir() -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    // Short on purpose: unix socket paths are limited to 107 bytes.
    std::env::temp_dir().join(format!("weft-redis-{}-{n}-{nanos:x}", std::process::id()))
}

impl RedisServer {
    /// Starts a server with default options.
    pub fn start() -> std::io::Result<RedisServer> {
        RedisServer::start_with(RedisServerOptions::default())
    }

    pub fn start_with(options: RedisServerOptions) -> std::io::Result<RedisServer> {
        let dir = unique_dir();
        std::fs::create_dir_all(&dir)?;
        let socket = dir.join("redis.sock");
        let mut server = RedisServer {
            child: None,
            dir,
            socket,
            options,
        };
        server.spawn()?;
        Ok(server)
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let bin = find_binary("redis-server").ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("redis-server not found on PATH; install it with `{REDIS_INSTALL_HINT}`"),
            )
        })?;
        let _ = std::fs::remove_file(&self.socket);
        let log = self.dir.join("redis.log");
        let mut cmd = Command::new(bin);
        cmd.arg("--port")
            .arg(self.options.tcp_port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--unixsocket")
            .arg(&self.socket)
            .arg("--unixsocketperm")
            .arg("700")
            .arg("--save")
            .arg("")
            .arg("--appendonly")
            .arg("no")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log)
            .arg("--daemonize")
            .arg("no");
        if let Some(p) = &self.options.password {
            cmd.arg("--requirepass").arg(p);
        }
        if let Some((user, pass)) = &self.options.acl_user {
            // One argument per ACL rule: redis-server joins them into the config line.
            cmd.arg("--user")
                .arg(user)
                .arg("on")
                .arg(format!(">{pass}"))
                .args(["~*", "&*", "+@all"]);
        }
        if self.options.databases > 0 {
            cmd.arg("--databases")
                .arg(self.options.databases.to_string());
        }
        if let Some(ev) = &self.options.notify_keyspace_events {
            cmd.arg("--notify-keyspace-events").arg(ev);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn()?;
        self.child = Some(child);
        self.wait_ready().inspect_err(|_| self.stop())
    }

    fn wait_ready(&mut self) -> std::io::Result<()> {
        let start = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                return Err(std::io::Error::other(format!(
                    "redis-server exited at start ({status}); log:\n{}",
                    self.log_tail()
                )));
            }
            if self.answers() {
                return Ok(());
            }
            if start.elapsed() > START_DEADLINE {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "redis-server did not answer on {} within {START_DEADLINE:?}; log:\n{}",
                        self.socket.display(),
                        self.log_tail()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// True once the server answers anything on its socket (a password-protected one answers NOAUTH).
    fn answers(&self) -> bool {
        let Ok(mut s) = UnixStream::connect(&self.socket) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 64];
        matches!(s.read(&mut buf), Ok(n) if n > 0)
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// `unix:///…/redis.sock`
    pub fn url(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// `redis://127.0.0.1:<port>` when started with a TCP port.
    pub fn tcp_url(&self) -> Option<String> {
        (self.options.tcp_port != 0).then(|| format!("redis://127.0.0.1:{}", self.options.tcp_port))
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Kills the server (SIGKILL, like a crash) and reaps it. Its data is gone.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops and starts again on the same socket with the same options: an empty Redis, as after a
    /// restart of a SONiC switch's database without persistence.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.stop();
        self.spawn()
    }

    /// Runs `redis-cli` against this server with `args`, returning its stdout (for tests that write
    /// exactly what another program would, command by command).
    pub fn cli(&self, db: u8, args: &[&str]) -> std::io::Result<String> {
        let bin = find_binary("redis-cli").ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("redis-cli not found on PATH; install it with `{REDIS_INSTALL_HINT}`"),
            )
        })?;
        let mut cmd = Command::new(bin);
        cmd.arg("-s")
            .arg(&self.socket)
            .arg("-n")
            .arg(db.to_string());
        if let Some(p) = &self.options.password {
            cmd.arg("--no-auth-warning").arg("-a").arg(p);
        }
        let out = cmd.args(args).stdin(Stdio::null()).output()?;
        if !out.status.success() {
            return Err(std::io::Error::other(format!(
                "redis-cli {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
