//! The emulated small leaf-spine fabric every BMv2 scenario runs on: prerequisites (SKIPPED
//! without them), a private copy of the example, `weft testbed up`, `weft apply` until it
//! converges, and teardown when dropped, also on failure: every child this harness started
//! killed by PID, then the testbed's processes, namespaces and veths.
#![allow(dead_code)] // each scenario uses its own part of the harness

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weft_testbed as tb;

pub const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// What a scenario needs besides root, BMv2 and `weft-plugin`.
#[derive(Default)]
pub struct Needs {
    /// BMv2's `simple_switch_CLI` next to it and Debian's python3-thrift it runs on.
    pub cli: bool,
    /// The project's `.venv` (scripts/setup.sh), for the P4Runtime-package checks.
    pub venv: bool,
    /// Other workspace binaries next to `weft`, as (binary, package).
    pub bins: &'static [(&'static str, &'static str)],
}

/// The programs the testbed runs, or `None` after a loud SKIPPED line (a failure with
/// WEFT_REQUIRE_BMV2=1) when something the scenario needs is missing.
pub fn programs(test: &str, needs: &Needs) -> Option<tb::Programs> {
    let Some(bmv2) = weft_tests::bmv2::find_bmv2() else {
        super::skip_or_fail(
            test,
            "BMv2 simple_switch_grpc not found (looked on PATH and /opt/p4/bin)",
        );
        return None;
    };
    if !super::is_root() {
        super::skip_or_fail(test, "needs root for network namespaces");
        return None;
    }
    let weft = Path::new(env!("CARGO_BIN_EXE_weft"));
    for (bin, pkg) in [("weft-plugin", "weft-sonic-plugin")]
        .iter()
        .chain(needs.bins)
    {
        if !weft.with_file_name(bin).exists() {
            super::skip_or_fail(
                test,
                &format!("{bin} not built next to weft (cargo build -p {pkg})"),
            );
            return None;
        }
    }
    if needs.cli {
        let thrift = Command::new("/usr/bin/python3")
            .args(["-c", "import thrift"])
            .status()
            .is_ok_and(|s| s.success());
        if !thrift || !bmv2.with_file_name("simple_switch_CLI").exists() {
            super::skip_or_fail(
                test,
                "BMv2's simple_switch_CLI or Debian python3-thrift missing (scripts/setup.sh)",
            );
            return None;
        }
    }
    if needs.venv && !Path::new(REPO).join(".venv/bin/python").exists() {
        super::skip_or_fail(test, ".venv missing (scripts/setup.sh)");
        return None;
    }
    Some(tb::Programs {
        redis: PathBuf::from("/usr/bin/redis-server"),
        plugin: weft.with_file_name("weft-plugin"),
        bmv2,
    })
}

/// One scenario's testbed.
pub struct Bed {
    pub dir: PathBuf,
    pub fabric: String,
    /// The intent the testbed was brought up from (`DIR/fabric.yaml`).
    pub file: PathBuf,
    pub topo: weft_topology::Topology,
    cli: PathBuf,
    children: Vec<(String, Child)>,
}

impl Bed {
    /// A private copy of the small leaf-spine example (`prefix` names its fabric and
    /// directory), changed by `edit`, written to `DIR/fabric.yaml` and brought up with every
    /// plugin given `plugin_args`. Nothing is applied yet.
    pub fn up(
        programs: &tb::Programs,
        prefix: &str,
        edit: impl FnOnce(String) -> String,
        plugin_args: &[&str],
    ) -> Bed {
        let (dir, fabric, text) = super::small_example(prefix);
        let file = dir.join("fabric.yaml");
        std::fs::write(&file, edit(text)).expect("intent");
        let topo = weft_topology::load_file(&file).expect("valid intent");
        // Built before `up`, so a failing `up` is torn down by Drop.
        let bed = Bed {
            dir,
            fabric,
            file,
            topo,
            cli: programs.bmv2.with_file_name("simple_switch_CLI"),
            children: Vec::new(),
        };
        tb::up(
            &bed.topo,
            programs,
            &tb::UpOptions {
                state_dir: bed.state_dir(),
                plugin_args: plugin_args.iter().map(|s| s.to_string()).collect(),
                db_only: false,
                acl: false,
                tls: false,
            },
        )
        .expect("testbed up");
        bed
    }

    /// [`Bed::up`], `weft apply` of the intent, and every host pair reachable.
    pub fn up_applied(
        programs: &tb::Programs,
        prefix: &str,
        edit: impl FnOnce(String) -> String,
        plugin_args: &[&str],
    ) -> Bed {
        let bed = Bed::up(programs, prefix, edit, plugin_args);
        bed.apply(&bed.file, "60s");
        bed.assert_all_reachable(Duration::from_secs(90));
        bed
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }
    pub fn state(&self) -> tb::State {
        tb::State::load(&self.state_dir()).expect("testbed state")
    }
    pub fn ns(&self, host: &str) -> String {
        tb::host_netns(&self.fabric, host)
    }
    pub fn host_ip(&self, host: &str) -> String {
        self.state()
            .host(host)
            .map(|h| h.ipv4.clone())
            .expect("host")
    }
    /// The port id `switch:port` has in the intent (BMv2's port number).
    pub fn port_id(&self, switch: &str, port: &str) -> u32 {
        self.topo
            .switches
            .iter()
            .find(|s| s.name == switch)
            .and_then(|s| s.ports.iter().find(|p| p.name == port))
            .map(|p| p.id)
            .expect("port in the example")
    }

    /// `weft ARGS`: exit code and stdout + stderr.
    pub fn weft(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(args)
            .output()
            .expect("run weft");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// `weft apply FILE --timeout T`, once: an operator's first apply after `testbed up` (or a
    /// plugin restart) must succeed, so a failure is a failure.
    pub fn apply(&self, file: &Path, timeout: &str) {
        let (code, out) = self.weft(&["apply", &file.to_string_lossy(), "--timeout", timeout]);
        assert_eq!(code, 0, "weft apply {} failed:\n{out}", file.display());
    }

    /// Pings every host pair until all answer or `deadline` passes: (reachable, pairs).
    pub fn wait_all_reachable(&self, deadline: Duration) -> (usize, usize) {
        let t0 = Instant::now();
        loop {
            let r = tb::ping_all(&self.state(), 1);
            let (ok, n) = (r.iter().filter(|x| x.2).count(), r.len());
            if ok == n || t0.elapsed() > deadline {
                return (ok, n);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    pub fn assert_all_reachable(&self, deadline: Duration) {
        let (ok, n) = self.wait_all_reachable(deadline);
        assert_eq!(
            ok,
            n,
            "not all host pairs reachable; logs in {}",
            self.dir.display()
        );
    }

    /// `commands` (one per line) through BMv2's Thrift CLI on `switch`, in the fabric
    /// namespace: what it printed.
    pub fn bmv2_cli(&self, switch: &str, commands: &str) -> String {
        let st = self.state();
        let port = st.switch(switch).expect("switch").thrift_port.to_string();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &st.netns, "/usr/bin/python3"])
            .arg(&self.cli)
            .args(["--thrift-port", &port])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("simple_switch_CLI");
        if let Some(mut i) = child.stdin.take() {
            use std::io::Write;
            let _ = writeln!(i, "{commands}");
        }
        let out = child.wait_with_output().expect("simple_switch_CLI");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }

    /// Paced UDP (`udp_probe.py`, 8 flows, 512-byte datagrams, IP TOS `tos`) from every sender
    /// to one receiver at once for `seconds`: the receiver's report (`null` if it wrote none).
    pub fn incast(
        &self,
        senders: &[&str],
        dst: &str,
        pps: u32,
        seconds: f64,
        tos: &str,
    ) -> serde_json::Value {
        use std::sync::atomic::{AtomicU32, Ordering};
        static RUN: AtomicU32 = AtomicU32::new(0);
        let probe = format!("{REPO}/tests/scripts/udp_probe.py");
        let out = self.dir.join(format!(
            "recv-{dst}-{}.json",
            RUN.fetch_add(1, Ordering::Relaxed)
        ));
        let mut recv = Command::new("ip")
            .args(["netns", "exec", &self.ns(dst), "python3", &probe, "recv"])
            .args(["--port", "5000", "--seconds", &format!("{}", seconds + 2.5)])
            .arg("--out")
            .arg(&out)
            .spawn()
            .expect("receiver");
        std::thread::sleep(Duration::from_millis(500));
        let ip = self.host_ip(dst);
        let mut sends: Vec<Child> = senders
            .iter()
            .map(|src| {
                Command::new("ip")
                    .args(["netns", "exec", &self.ns(src), "python3", &probe, "send"])
                    .args(["--dst", &ip, "--port", "5000", "--tos", tos])
                    .args(["--pps", &pps.to_string(), "--seconds", &seconds.to_string()])
                    .args(["--flows", "8", "--size", "512"])
                    .spawn()
                    .expect("sender")
            })
            .collect();
        for s in &mut sends {
            let _ = s.wait();
        }
        let _ = recv.wait();
        std::fs::read_to_string(&out)
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Keeps `child` until [`Bed::stop`] or the end: killed by PID either way.
    pub fn keep(&mut self, name: &str, child: Child) {
        self.children.push((name.to_string(), child));
    }

    /// Starts `args` in the fabric namespace (where the switches' DBs and plugins are),
    /// logging to `DIR/<name>.log`, kept like [`Bed::keep`].
    pub fn spawn_in_fabric(&mut self, name: &str, args: &[&str]) {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &tb::fabric_netns(&self.fabric)])
            .args(args)
            .env("WEFT_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        self.keep(name, child);
    }

    /// Kills (by PID) and reaps every kept child called `name`.
    pub fn stop(&mut self, name: &str) {
        for (_, c) in self.children.iter_mut().filter(|(n, _)| n == name) {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.children.retain(|(n, _)| n != name);
    }

    /// Waits for every kept child called `name` to end by itself, and forgets it.
    pub fn wait(&mut self, name: &str) {
        for (_, c) in self.children.iter_mut().filter(|(n, _)| n == name) {
            let _ = c.wait();
        }
        self.children.retain(|(n, _)| n != name);
    }

    /// Whether a kept child called `name` is still running.
    pub fn running(&mut self, name: &str) -> bool {
        self.children
            .iter_mut()
            .any(|(n, c)| n == name && matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        // By PID: children started through `ip netns exec` exec the program itself.
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // The logs of a failed run, or when asked (WEFT_KEEP_LOGS=1), outlive the testbed.
        if std::thread::panicking() || std::env::var_os("WEFT_KEEP_LOGS").is_some_and(|v| v == "1")
        {
            let keep = std::env::temp_dir().join(format!("weft-logs-{}", self.fabric));
            let _ = Command::new("cp")
                .arg("-r")
                .arg(&self.dir)
                .arg(&keep)
                .status();
            eprintln!("logs kept in {}", keep.display());
        }
        let _ = tb::down(&self.state_dir(), &self.fabric);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Polls `ok` every 50 ms until it holds (how long that took) or `deadline` passes (`None`).
pub fn wait_until(deadline: Duration, mut ok: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < deadline {
        if ok() {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}
