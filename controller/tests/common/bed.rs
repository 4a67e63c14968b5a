//! The emulated small leaf-spine fabric every BMv2 scenario runs on: prerequisites (SKIPPED
//! without them where BMv2 is not installed, a failure where it is), a private copy of the example, `weft testbed up`, `weft apply` until it
//! converges, and teardown when dropped, also on failure: every child this harness started
//! killed by PID, then the testbed's processes, namespaces and veths.
#![allow(dead_code)] // each scenario uses its own part of the harness

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weft_sonic_schema::state::PluginStatus;
use weft_testbed as tb;

pub const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// What a scenario needs besides root, BMv2 and `weft-plugin`.
#[derive(Default)]
pub struct Needs {
    /// BMv2's `simple_switch_CLI` next to it and Debian's python3-thrift it runs on.
    pub cli: bool,
    /// The project's `.venv` (scripts/setup.sh) with the `p4runtime` package: the independent
    /// read-back (`tests/scripts/p4rt_dump.py`) and the other P4Runtime-package checks.
    pub venv: bool,
    /// Debian's `prometheus`, its `promtool` and `curl` (scripts/setup.sh).
    pub prometheus: bool,
    /// Other workspace binaries next to `weft`, as (binary, package).
    pub bins: &'static [(&'static str, &'static str)],
}

/// The independent read-back, run with the project's `.venv`.
pub const P4RT_DUMP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/scripts/p4rt_dump.py");

/// Why the scenario cannot run (every missing prerequisite), empty when it can.
pub fn missing(needs: &Needs) -> Vec<String> {
    let mut why = Vec::new();
    let Some(bmv2) = weft_tests::bmv2::find_bmv2() else {
        return vec!["BMv2 simple_switch_grpc not found (looked on PATH and /opt/p4/bin)".into()];
    };
    if !super::is_root() {
        why.push("needs root for network namespaces".into());
    }
    let weft = Path::new(env!("CARGO_BIN_EXE_weft"));
    for (bin, pkg) in [("weft-plugin", "weft-sonic-plugin")]
        .iter()
        .chain(needs.bins)
    {
        if !weft.with_file_name(bin).exists() {
            why.push(format!(
                "{bin} not built next to weft (`cargo test --workspace` builds it; alone: cargo build -p {pkg})"
            ));
        }
    }
    if needs.cli {
        if !bmv2.with_file_name("simple_switch_CLI").exists() {
            why.push("BMv2's simple_switch_CLI not installed next to simple_switch_grpc".into());
        }
        if !succeeds(Command::new("/usr/bin/python3").args(["-c", "import thrift"])) {
            why.push("Debian python3-thrift missing (scripts/setup.sh)".into());
        }
    }
    if needs.venv {
        let python = Path::new(REPO).join(".venv/bin/python");
        let imports = succeeds(
            Command::new(&python)
                .args(["-c", "import grpc, p4.v1.p4runtime_pb2"])
                .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python"),
        );
        if !imports {
            why.push(format!(
                "{} cannot import grpc and p4runtime (scripts/setup.sh makes .venv)",
                python.display()
            ));
        }
    }
    if needs.prometheus {
        for tool in ["/usr/bin/prometheus", "/usr/bin/promtool", "/usr/bin/curl"] {
            if !Path::new(tool).exists() {
                why.push(format!("{tool} not installed (scripts/setup.sh)"));
            }
        }
    }
    why
}

fn succeeds(c: &mut Command) -> bool {
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The programs the testbed runs, or `None` after a loud SKIPPED line when something the
/// scenario needs is missing: a failure instead where BMv2 is installed (unless
/// `WEFT_REQUIRE_BMV2=0`), so an installed switch means every scenario runs or fails.
pub fn programs(test: &str, needs: &Needs) -> Option<tb::Programs> {
    let why = missing(needs);
    if !why.is_empty() {
        super::skip_or_fail(test, &why.join("; "));
        return None;
    }
    weft_tests::bmv2::ran(test);
    let weft = Path::new(env!("CARGO_BIN_EXE_weft"));
    Some(tb::Programs {
        redis: PathBuf::from("/usr/bin/redis-server"),
        plugin: weft.with_file_name("weft-plugin"),
        bmv2: weft_tests::bmv2::find_bmv2()?,
    })
}

/// The independent plan check: `tests/scripts/p4rt_plan_check.py`.
pub const P4RT_PLAN_CHECK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/scripts/p4rt_plan_check.py"
);

/// Checks what `switch` holds (`dump`, p4rt_dump.py's JSON) against the P4RT_TABLE entries the
/// offline plan `plan` (`weft plan --offline --output json`) gives it, entry by entry, with the
/// independent `tests/scripts/p4rt_plan_check.py` (port ids from the intent `topo`): its summary
/// line, or every difference. `dump` is p4rt_dump.py's text as printed ([`p4rt_dump_text`]: a
/// 128-bit address would not survive a trip through an f64). Scratch files go to `dir`.
pub fn check_against_plan(
    dir: &Path,
    topo: &weft_topology::Topology,
    plan: &serde_json::Value,
    switch: &str,
    dump: &str,
) -> Result<String, String> {
    let sw = plan["switches"]
        .as_array()
        .and_then(|s| s.iter().find(|x| x["name"] == switch))
        .ok_or_else(|| format!("{switch} not in the plan"))?;
    let entries = &sw["add"];
    let ports: Vec<String> = topo
        .switches
        .iter()
        .find(|s| s.name == switch)
        .map(|s| {
            s.ports
                .iter()
                .map(|p| format!("{}={}", p.name, p.id))
                .collect()
        })
        .unwrap_or_default();
    let (ef, df) = (
        dir.join(format!("plan-entries-{switch}.json")),
        dir.join(format!("dump-{switch}.json")),
    );
    std::fs::write(&ef, entries.to_string()).map_err(|e| e.to_string())?;
    std::fs::write(&df, dump).map_err(|e| e.to_string())?;
    let out = Command::new(format!("{REPO}/.venv/bin/python"))
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .arg(P4RT_PLAN_CHECK)
        .args(["--p4info", &format!("{REPO}/p4/build/weft.p4info.txtpb")])
        .arg("--entries")
        .arg(&ef)
        .arg("--dump")
        .arg(&df)
        .args(["--ports", &ports.join(",")])
        .output()
        .map_err(|e| format!("run p4rt_plan_check.py: {e}"))?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "p4rt_plan_check.py exit {:?}: {e}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let summary = format!(
        "{switch}: {} entries and groups expected from the plan, {} held in the controller's tables",
        v["compared"]["expected"], v["compared"]["held"]
    );
    if out.status.success() {
        Ok(summary)
    } else {
        Err(format!(
            "{summary}; missing {}; unexpected {}",
            v["missing"], v["unexpected"]
        ))
    }
}

/// Everything a P4Runtime switch holds, read in the fabric namespace `netns` by the independent
/// `tests/scripts/p4rt_dump.py` (the `p4runtime` package only, no Weft code): its JSON text.
pub fn p4rt_dump_text(netns: &str, addr: &str, device_id: u64) -> Result<String, String> {
    let out = Command::new("timeout")
        .args(["60", "ip", "netns", "exec", netns, "env"])
        .arg("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python")
        .arg(format!("{REPO}/.venv/bin/python"))
        .arg(P4RT_DUMP)
        .args(["--addr", addr, "--device-id", &device_id.to_string()])
        .args(["--p4info", &format!("{REPO}/p4/build/weft.p4info.txtpb")])
        .output()
        .map_err(|e| format!("run p4rt_dump.py: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "p4rt_dump.py exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// [`p4rt_dump_text`] parsed, integers too long for an f64 (IPv6 addresses) as strings.
pub fn p4rt_dump(netns: &str, addr: &str, device_id: u64) -> Result<serde_json::Value, String> {
    let text = p4rt_dump_text(netns, addr, device_id)?;
    serde_json::from_str(&quote_big_numbers(&text)).map_err(|e| format!("p4rt_dump.py JSON: {e}"))
}

/// Integers too long for an f64 (IPv6 addresses) as strings, so no two entries read alike.
pub fn quote_big_numbers(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut in_str = false;
    let mut escaped = false;
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        if digits.len() > 15 {
            out.push('"');
            out.push_str(digits);
            out.push('"');
        } else {
            out.push_str(digits);
        }
        digits.clear();
    };
    for c in json.chars() {
        if in_str {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            if c == '"' {
                in_str = true;
            }
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
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
        Bed::start(programs, prefix, edit, plugin_args, false)
    }

    /// [`Bed::up`] of the example as it is, every plugin also serving ZMQ beside its DB
    /// socket (what `weft testbed up --transport zmq` starts): the intent file says nothing of
    /// ZMQ, so only `--transport zmq` on the controller's command line sends entries over it.
    pub fn up_serving_zmq(programs: &tb::Programs, prefix: &str, plugin_args: &[&str]) -> Bed {
        Bed::start(programs, prefix, |t| t, plugin_args, true)
    }

    fn start(
        programs: &tb::Programs,
        prefix: &str,
        edit: impl FnOnce(String) -> String,
        plugin_args: &[&str],
        serve_zmq: bool,
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
        let mut served = bed.topo.clone();
        if serve_zmq {
            assert!(
                weft_topology::transport::serve_zmq(&mut served).is_empty(),
                "every testbed switch has a DB socket"
            );
        }
        tb::up(
            &served,
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

    /// `redis-cli HGET` against one switch's SONiC DB.
    pub fn hget(&self, switch: &str, db: u8, key: &str, field: &str) -> Option<String> {
        let st = self.state();
        let url = st.switch(switch)?.db.clone();
        let mut cmd = Command::new("redis-cli");
        if let Some(sock) = url.strip_prefix("unix://") {
            cmd.args(["-s", sock]);
        } else if let Some(hp) = url.strip_prefix("redis://") {
            let (h, p) = hp.trim_end_matches('/').rsplit_once(':')?;
            cmd.args(["-h", h, "-p", p]);
        }
        let out = cmd
            .args(["-n", &db.to_string(), "--raw", "HGET", key, field])
            .output()
            .ok()?;
        let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (!v.is_empty()).then_some(v)
    }

    pub fn hget_u64(&self, switch: &str, db: u8, key: &str, field: &str) -> u64 {
        self.hget(switch, db, key, field)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// `host` sends PFC PAUSE (priority 3, quanta 65535) every 5 ms for `seconds`, kept as
    /// "storm".
    pub fn start_storm(&mut self, host: &str, seconds: u32) {
        let log = std::fs::File::create(self.dir.join("storm.log")).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(host), "python3"])
            .arg(format!("{REPO}/tests/scripts/pfc_storm.py"))
            .args(["--iface", "eth0", "--priority", "3", "--quanta", "65535"])
            .args(["--interval-ms", "5", "--seconds", &seconds.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("pfc_storm.py");
        self.keep("storm", child);
    }

    /// Each switch's plugin status row as STATE_DB holds it now (`None`: no row).
    pub fn plugin_status(&self) -> Vec<(String, Option<PluginStatus>)> {
        plugin_status(&self.topo)
    }

    /// [`assert_entries_came_over`] on this testbed.
    pub fn assert_entries_came_over(&self, zmq: bool) {
        assert_entries_came_over(&self.topo, zmq);
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

/// Each switch's plugin status row as its STATE_DB holds it now (`None`: no row).
pub fn plugin_status(topo: &weft_topology::Topology) -> Vec<(String, Option<PluginStatus>)> {
    use weft_sonic_db::{SonicDb, SonicDbId, Table};
    use weft_sonic_schema::Row;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let read = |db: &str| {
        rt.block_on(async {
            let sonic = SonicDb::from_endpoint(db).ok()?;
            let conn = sonic.connect(SonicDbId::StateDb).await.ok()?;
            let row = Table::new(conn, PluginStatus::TABLE)
                .ok()?
                .get("status")
                .await
                .ok()??;
            PluginStatus::from_fields("status", &row).ok()
        })
    };
    topo.switches
        .iter()
        .map(|s| (s.name.clone(), read(&s.db)))
        .collect()
}

/// Asserts that every switch's plugin took P4RT entries over ZMQ (`zmq`: at least one request,
/// as its status row counts them) or serves no ZMQ endpoint at all.
pub fn assert_entries_came_over(topo: &weft_topology::Topology, zmq: bool) {
    for (sw, st) in plugin_status(topo) {
        let st = st.unwrap_or_else(|| panic!("{sw}: no plugin status row"));
        match (zmq, st.zmq_requests) {
            (true, Some(n)) if n > 0 => {}
            (false, None) => {}
            (_, n) => panic!(
                "{sw}: the plugin took {n:?} ZMQ requests; expected {}",
                if zmq { "some" } else { "no ZMQ endpoint" }
            ),
        }
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

/// The small example's `roce` class made lossy (PFC off): trimmable with `trim` (256 B, DSCP
/// 11, queue 7), drop-tail without; the run-time ECN tuner off, so thresholds do not move
/// between runs being compared.
pub fn lossy_roce(text: String, trim: bool) -> String {
    let text = text.replace("tuning: auto", "tuning: off");
    let i = text.find("  pfc:\n").expect("the example has a pfc block");
    let end = text[i + 7..]
        .find("\n\n")
        .map_or(text.len(), |e| i + 7 + e + 1);
    let pfc_block = text[i..end].to_string();
    let extra = if trim {
        "      trim: {size: 256B, dscp: 11, traffic_class: 7}\n"
    } else {
        ""
    };
    text.replace("      lossless: true\n", extra)
        .replace(&pfc_block, "  pfc:\n    enabled: false\n")
}
