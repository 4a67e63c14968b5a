//! A real BMv2 `simple_switch_grpc` for tests: found on PATH or in /opt/p4/bin, started without
//! a program on free loopback ports, killed by PID when the guard drops (also on test failure).
//!
//! Depends on `std` only, like all of `weft-tests`, so any crate can take it as a dev-dependency.
//!
//! ```no_run
//! # use weft_tests::bmv2::*;
//! let Some(bin) = bmv2_or_skip("my_test") else { return };
//! let sw = Bmv2::start(&bin, Bmv2Options { cpu_port: Some(255), ..Default::default() })
//!     .expect("start BMv2");
//! // connect a P4Runtime client to sw.grpc_addr()
//! ```

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const BMV2_BINARY: &str = "simple_switch_grpc";
/// Where the project installs BMv2, p4c and PI.
pub const P4_PREFIX_BIN: &str = "/opt/p4/bin";
/// How long a starting switch may take to listen on a loaded 2-core machine.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// `simple_switch_grpc` on PATH, else in /opt/p4/bin.
pub fn find_bmv2() -> Option<PathBuf> {
    find_tool(BMV2_BINARY)
}

/// A P4 tool (`simple_switch_grpc`, `p4c`, ...) on PATH, else in /opt/p4/bin.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| Some(Path::new(P4_PREFIX_BIN).join(name)).filter(|p| p.is_file()))
}

/// Whether a BMv2 test must run or fail rather than skip: `WEFT_REQUIRE_BMV2=1` always,
/// `WEFT_REQUIRE_BMV2=0` never (an explicit opt-out), and without either whenever BMv2 is
/// installed. Installed means every BMv2 test runs: a missing prerequisite beside it (root, a
/// Python module, a binary not built) is a failure, not a passing SKIPPED.
pub fn bmv2_required() -> bool {
    match std::env::var("WEFT_REQUIRE_BMV2").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => find_bmv2().is_some(),
    }
}

/// Why the policy requires BMv2 tests, for failure messages.
fn required_because() -> &'static str {
    match std::env::var("WEFT_REQUIRE_BMV2").as_deref() {
        Ok("1") => "WEFT_REQUIRE_BMV2=1",
        _ => "BMv2 is installed (WEFT_REQUIRE_BMV2=0 to allow skipping)",
    }
}

/// A BMv2 test that cannot run for `why`: a failure when [`bmv2_required`], else a loud
/// SKIPPED line (also on stderr, past cargo's capture) and a ledger record.
pub fn skip_or_fail(test: &str, why: &str) {
    if bmv2_required() {
        panic!("{}: {test} cannot run: {why}", required_because());
    }
    println!("SKIPPED: {test}: {why}");
    eprintln!("SKIPPED: {test}: {why}");
    ledger(test, Some(why));
}

/// Records that BMv2 test `test` runs (its prerequisites are all there).
pub fn ran(test: &str) {
    ledger(test, None);
}

/// Appends `ran\tTEST` or `skipped\tTEST\tWHY` to the file `WEFT_TEST_LEDGER` names (if set):
/// `scripts/test.sh` summarises it in one line. A test's last record counts.
fn ledger(test: &str, skipped: Option<&str>) {
    use std::io::Write;
    let Some(path) = std::env::var_os("WEFT_TEST_LEDGER") else {
        return;
    };
    let clean = |s: &str| s.replace(['\t', '\n'], " ");
    let line = match skipped {
        Some(why) => format!("skipped\t{}\t{}\n", clean(test), clean(why)),
        None => format!("ran\t{}\n", clean(test)),
    };
    // One write per line with O_APPEND: lines of tests running in parallel do not interleave.
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
}

/// The BMv2 binary (the test is recorded as run), or `None` after [`skip_or_fail`].
pub fn bmv2_or_skip(test: &str) -> Option<PathBuf> {
    match find_bmv2() {
        Some(p) => {
            ran(test);
            Some(p)
        }
        None => {
            skip_or_fail(
                test,
                &format!("BMv2 {BMV2_BINARY} not found (looked on PATH and {P4_PREFIX_BIN})"),
            );
            None
        }
    }
}

/// A free TCP port on 127.0.0.1 (bound, then released: good enough for tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral loopback port")
}

/// Kills and reaps a child process by PID when dropped.
#[derive(Debug)]
pub struct ProcessGuard {
    child: Option<Child>,
    name: String,
}

impl ProcessGuard {
    pub fn new(name: impl Into<String>, child: Child) -> Self {
        ProcessGuard {
            child: Some(child),
            name: name.into(),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits for the process to exit by itself (after a signal the caller sent) and reaps it;
    /// `None` when it was already reaped or cannot be waited for.
    pub fn wait(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        c.wait().ok()
    }

    /// SIGKILL and reap now.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[derive(Debug, Clone, Default)]
pub struct Bmv2Options {
    /// P4Runtime device id (default 1).
    pub device_id: Option<u64>,
    /// Port for P4Runtime packet-in/out (`--cpu-port`).
    pub cpu_port: Option<u32>,
    /// Dataplane ports `(port number, interface name)`: `-i N@IF`.
    pub interfaces: Vec<(u32, String)>,
    /// Serve `p4.bm.DataplaneInterface` on a free loopback port (then `interfaces` is ignored).
    pub dataplane_grpc: bool,
    /// Where BMv2 writes its log (`--log-file`; it appends `.txt`).
    pub log_file: Option<PathBuf>,
    /// Extra switch options (before `--`).
    pub extra_args: Vec<String>,
    /// Extra target options (after `--`).
    pub extra_target_args: Vec<String>,
}

/// A running `simple_switch_grpc` without a program; push one over P4Runtime.
#[derive(Debug)]
pub struct Bmv2 {
    bin: PathBuf,
    options: Bmv2Options,
    grpc_port: u16,
    thrift_port: u16,
    dataplane_port: Option<u16>,
    notifications: PathBuf,
    process: ProcessGuard,
}

/// Why a switch did not start.
#[derive(Debug)]
pub enum Bmv2Error {
    /// The process could not be spawned.
    Spawn {
        bin: PathBuf,
        source: std::io::Error,
    },
    /// It exited before P4Runtime listened.
    Exited { bin: PathBuf, addr: SocketAddr },
    /// P4Runtime did not listen within the deadline.
    NotListening {
        bin: PathBuf,
        addr: SocketAddr,
        within: Duration,
    },
}

impl std::fmt::Display for Bmv2Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bmv2Error::Spawn { bin, source } => {
                write!(f, "cannot start {}: {source}", bin.display())
            }
            Bmv2Error::Exited { bin, addr } => {
                write!(f, "{} exited before listening on {addr}", bin.display())
            }
            Bmv2Error::NotListening { bin, addr, within } => write!(
                f,
                "{} did not listen on {addr} within {within:?}",
                bin.display()
            ),
        }
    }
}

impl std::error::Error for Bmv2Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Bmv2Error::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}

static INSTANCE: AtomicU64 = AtomicU64::new(0);

impl Bmv2 {
    /// Starts the switch on free ports and waits until P4Runtime listens.
    pub fn start(bin: &Path, options: Bmv2Options) -> Result<Bmv2, Bmv2Error> {
        let grpc_port = free_port();
        let thrift_port = free_port();
        let dataplane_port = options.dataplane_grpc.then(free_port);
        let n = INSTANCE.fetch_add(1, Ordering::Relaxed);
        // BMv2's default notification socket is per device id; tests running in parallel
        // with the same id would collide.
        let notifications = std::env::temp_dir().join(format!(
            "weft-bmv2-{}-{n}-notifications.ipc",
            std::process::id()
        ));
        let process = spawn(
            bin,
            &options,
            grpc_port,
            thrift_port,
            dataplane_port,
            &notifications,
        )?;
        let mut sw = Bmv2 {
            bin: bin.to_path_buf(),
            options,
            grpc_port,
            thrift_port,
            dataplane_port,
            notifications,
            process,
        };
        sw.wait_listening()?;
        Ok(sw)
    }

    /// `127.0.0.1:PORT` of the P4Runtime server.
    pub fn grpc_addr(&self) -> String {
        format!("127.0.0.1:{}", self.grpc_port)
    }

    pub fn grpc_port(&self) -> u16 {
        self.grpc_port
    }

    pub fn thrift_port(&self) -> u16 {
        self.thrift_port
    }

    /// `127.0.0.1:PORT` of `p4.bm.DataplaneInterface`, if enabled.
    pub fn dataplane_addr(&self) -> Option<String> {
        self.dataplane_port.map(|p| format!("127.0.0.1:{p}"))
    }

    pub fn device_id(&self) -> u64 {
        self.options.device_id.unwrap_or(1)
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Kills the switch (if running) and starts it again on the same ports, empty.
    pub fn restart(&mut self) -> Result<(), Bmv2Error> {
        self.process.kill();
        let deadline = Instant::now() + START_DEADLINE;
        // The old listener may linger briefly; retry the spawn until the port is free.
        loop {
            self.process = spawn(
                &self.bin,
                &self.options,
                self.grpc_port,
                self.thrift_port,
                self.dataplane_port,
                &self.notifications,
            )?;
            match self.wait_listening() {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => {
                    self.process.kill();
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }

    fn wait_listening(&mut self) -> Result<(), Bmv2Error> {
        let addr: SocketAddr = ([127, 0, 0, 1], self.grpc_port).into();
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if !self.process.is_running() {
                return Err(Bmv2Error::Exited {
                    bin: self.bin.clone(),
                    addr,
                });
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Bmv2Error::NotListening {
                    bin: self.bin.clone(),
                    addr,
                    within: START_DEADLINE,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Bmv2 {
    fn drop(&mut self) {
        self.process.kill();
        let _ = std::fs::remove_file(&self.notifications);
    }
}

fn spawn(
    bin: &Path,
    o: &Bmv2Options,
    grpc_port: u16,
    thrift_port: u16,
    dataplane_port: Option<u16>,
    notifications: &Path,
) -> Result<ProcessGuard, Bmv2Error> {
    let mut cmd = Command::new(bin);
    cmd.arg("--no-p4")
        .arg("--device-id")
        .arg(o.device_id.unwrap_or(1).to_string())
        .arg("--thrift-port")
        .arg(thrift_port.to_string())
        .arg("--notifications-addr")
        .arg(format!("ipc://{}", notifications.display()));
    if dataplane_port.is_none() {
        for (port, iface) in &o.interfaces {
            cmd.arg("-i").arg(format!("{port}@{iface}"));
        }
    }
    if let Some(log) = &o.log_file {
        cmd.arg("--log-file").arg(log);
    }
    cmd.args(&o.extra_args);
    cmd.arg("--")
        .arg("--grpc-server-addr")
        .arg(format!("127.0.0.1:{grpc_port}"));
    if let Some(p) = dataplane_port {
        cmd.arg("--dp-grpc-server-addr")
            .arg(format!("127.0.0.1:{p}"));
    }
    if let Some(cpu) = o.cpu_port {
        cmd.arg("--cpu-port").arg(cpu.to_string());
    }
    cmd.args(&o.extra_target_args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let child = cmd.spawn().map_err(|source| Bmv2Error::Spawn {
        bin: bin.to_path_buf(),
        source,
    })?;
    Ok(ProcessGuard::new(BMV2_BINARY, child))
}

#[cfg(test)]
mod tests {
    // Paths, not imports: until every crate takes the harness as a dependency, a bench that
    // includes this file by `#[path]` compiles this module without its tests.
    #[test]
    fn a_switch_that_cannot_be_spawned_says_which_binary() {
        let bin = std::path::Path::new("/nonexistent/simple_switch_grpc");
        let err =
            super::Bmv2::start(bin, super::Bmv2Options::default()).expect_err("no such binary");
        assert!(matches!(err, super::Bmv2Error::Spawn { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("cannot start /nonexistent/simple_switch_grpc: "),
            "{err}"
        );
    }

    #[test]
    fn a_switch_that_exits_at_once_is_reported_before_the_deadline() {
        // `false` exits immediately: the harness must see that, not wait 30 s for a listener.
        let Some(bin) = super::find_tool("false") else {
            return;
        };
        let t = std::time::Instant::now();
        let err = super::Bmv2::start(&bin, super::Bmv2Options::default()).expect_err("exits");
        assert!(matches!(err, super::Bmv2Error::Exited { .. }), "{err:?}");
        assert!(t.elapsed() < super::START_DEADLINE);
    }
}
