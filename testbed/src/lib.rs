//! An emulated fabric on one machine, built from the same intent the controller compiles.
//!
//! ```text
//!  root namespace                    fabric namespace  weft-<fabric>
//!  ──────────────                    ──────────────────────────────────────────────────
//!  redis-server per switch  ◀─unix─▶ weft-plugin per switch ──P4Runtime──▶ BMv2 per switch
//!  (the switch's SONiC DB,            (netlink sees the veths)               -i <id>@s<dev>p<id>
//!   at the intent's `db`)                                                      │
//!                                    s1p3 ═══ veth ═══ s4p1   (switch-to-switch links)
//!                                    s3p1 ═══ veth ═══╗
//!  host namespace weft-<fabric>-<host>: eth0 ═════════╝  /32 address, default route to the
//!                                                        leaf's router MAC (static neighbour)
//! ```
//! Everything started is recorded in `<state-dir>/state.json` (PIDs, namespaces), so `down`
//! removes it all, also after a crash. BMv2 and the plugins live in the fabric namespace, whose
//! loopback carries P4Runtime; the controller reaches the switches only through their Redis.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use weft_topology::Topology;

pub mod acl;
pub mod campaign;
pub mod chaos;
pub mod fault;
pub mod tls;
pub mod workload;
pub mod workload_report;

#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{cmd}` failed: {stderr}")]
    Command { cmd: String, stderr: String },
    #[error("{0} not found: {1}")]
    Missing(&'static str, String),
    #[error("{0}")]
    Other(String),
}

type Result<T> = std::result::Result<T, TestbedError>;

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TestbedError {
    let what = what.into();
    move |source| TestbedError::Io { what, source }
}

/// Runs a command to completion; its stderr becomes the error.
pub fn run(cmd: &[&str]) -> Result<String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(io(format!("running {}", cmd[0])))?;
    if !out.status.success() {
        return Err(TestbedError::Command {
            cmd: cmd.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command with `input` on its stdin (`ip -batch -`, `tc -batch -`).
fn run_input(cmd: &[&str], input: &str) -> Result<()> {
    use std::io::Write;
    let mut child = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io(format!("running {}", cmd[0])))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(io(format!("writing to {}", cmd[0])))?;
    }
    let out = child
        .wait_with_output()
        .map_err(io(format!("running {}", cmd[0])))?;
    if !out.status.success() {
        return Err(TestbedError::Command {
            cmd: cmd.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// The commands that lay every cable, batched per namespace: one `ip`/`tc` process per
/// namespace instead of ten per cable.
#[derive(Default)]
struct WireCommands {
    /// `ip link` lines in the wires namespace: the veths (made from the middle end), then the
    /// middle ends up.
    links: Vec<String>,
    ups: Vec<String>,
    /// Far-end namespace → `ip link` lines run there (far ends up).
    ends: BTreeMap<String, Vec<String>>,
    /// `tc` lines in the wires namespace.
    tc: Vec<String>,
}

/// Middle ends get interface indexes from here on. A veth whose index equals its peer's
/// index (easy with the peer in another namespace: both count from 2) is no "urgent" link
/// event for the kernel's linkwatch, which then reports its carrier changes at most once a
/// second: a flap storm would reach the plugin as a trickle.
const MIDDLE_INDEX_BASE: usize = 100_000;

impl WireCommands {
    /// The veth from a middle end to a far end (a switch port or a host's interface, in `ns`).
    fn end(&mut self, ns: &str, name: &str, middle: &str, mtu: &str, up: bool) {
        let index = MIDDLE_INDEX_BASE + self.links.len();
        self.links.push(format!(
            "link add {middle} index {index} mtu {mtu} type veth peer name {name} mtu {mtu} netns {ns}"
        ));
        if up {
            self.ends
                .entry(ns.to_string())
                .or_default()
                .push(format!("link set {name} up"));
        }
    }

    /// Joins two middle ends both ways; `up` plugs the cable in.
    fn join(&mut self, a: &str, b: &str, up: bool) {
        for (from, to) in [(a, b), (b, a)] {
            self.tc.push(format!("qdisc add dev {from} ingress"));
            self.tc.push(format!(
                "filter add dev {from} parent ffff: protocol all u32 match u32 0 0 \
                 action mirred egress redirect dev {to}"
            ));
            if up {
                self.ups.push(format!("link set {from} up"));
            }
        }
    }

    fn run(&self, wires_ns: &str) -> Result<()> {
        let batch = |lines: &[String]| lines.join("\n") + "\n";
        run_input(&["ip", "-n", wires_ns, "-batch", "-"], &batch(&self.links))?;
        for (ns, lines) in &self.ends {
            run_input(&["ip", "-n", ns, "-batch", "-"], &batch(lines))?;
        }
        run_input(&["tc", "-n", wires_ns, "-batch", "-"], &batch(&self.tc))?;
        run_input(&["ip", "-n", wires_ns, "-batch", "-"], &batch(&self.ups))
    }
}

/// One cable of the testbed: its two ends (switch and port, or host and `eth0`) and the two
/// middle interfaces in the wires namespace that carry it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireState {
    pub a: (String, String),
    pub b: (String, String),
    pub middle: [String; 2],
}

/// Where to find the programs the testbed starts.
#[derive(Debug, Clone)]
pub struct Programs {
    pub bmv2: PathBuf,
    pub redis: PathBuf,
    pub plugin: PathBuf,
}

fn find(name: &str, extra: &[&Path]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    extra
        .iter()
        .map(|d| d.join(name))
        .chain(std::env::split_paths(&path).map(|d| d.join(name)))
        .find(|p| p.is_file())
}

impl Programs {
    /// Only redis-server, for [`UpOptions::db_only`].
    pub fn locate_db_only() -> Result<Programs> {
        let redis = find("redis-server", &[])
            .ok_or_else(|| TestbedError::Missing("redis-server", "run scripts/setup.sh".into()))?;
        Ok(Programs {
            bmv2: PathBuf::new(),
            redis,
            plugin: PathBuf::new(),
        })
    }

    /// BMv2 from PATH or /opt/p4/bin; redis-server from PATH; the plugin next to this program
    /// or on PATH.
    pub fn locate() -> Result<Programs> {
        let here = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let bmv2 = find("simple_switch_grpc", &[Path::new("/opt/p4/bin")]).ok_or_else(|| {
            TestbedError::Missing(
                "BMv2 simple_switch_grpc",
                "looked on PATH and in /opt/p4/bin; build p4lang/PI and behavioral-model (README, \"BMv2 and p4c\")".into(),
            )
        })?;
        let redis = find("redis-server", &[])
            .ok_or_else(|| TestbedError::Missing("redis-server", "run scripts/setup.sh".into()))?;
        let plugin = find("weft-plugin", &[&here]).ok_or_else(|| {
            TestbedError::Missing(
                "weft-plugin",
                format!(
                    "build it (cargo build -p weft-sonic-plugin); looked in {} and on PATH",
                    here.display()
                ),
            )
        })?;
        Ok(Programs {
            bmv2,
            redis,
            plugin,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcState {
    pub name: String,
    pub pid: u32,
    pub log: PathBuf,
    /// The command line, so a killed process can be started again the same way.
    pub cmd: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchState {
    pub name: String,
    pub device_id: u64,
    pub p4rt_address: String,
    pub db: String,
    pub thrift_port: u16,
    /// SONiC port name → interface in the fabric namespace.
    pub interfaces: BTreeMap<String, String>,
    /// The plugin's `--metrics` address, inside the fabric namespace (none in state files of
    /// older testbeds and in `--db-only` ones).
    #[serde(default)]
    pub metrics: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostState {
    pub name: String,
    pub netns: String,
    pub ipv4: String,
    pub ipv6: Option<String>,
}

/// Everything a testbed started, for `status` and `down`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    pub fabric: String,
    pub netns: String,
    pub state_dir: PathBuf,
    pub processes: Vec<ProcState>,
    pub switches: Vec<SwitchState>,
    pub hosts: Vec<HostState>,
    /// The cables, for `link down/up` (empty in state files of older testbeds).
    #[serde(default)]
    pub wires: Vec<WireState>,
}

impl State {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("state.json")
    }
    pub fn load(dir: &Path) -> Result<State> {
        let p = State::path(dir);
        let text = fs::read_to_string(&p).map_err(io(format!("reading {}", p.display())))?;
        serde_json::from_str(&text)
            .map_err(|e| TestbedError::Other(format!("{}: {e}", p.display())))
    }
    fn save(&self) -> Result<()> {
        let p = State::path(&self.state_dir);
        let text =
            serde_json::to_string_pretty(self).map_err(|e| TestbedError::Other(e.to_string()))?;
        fs::write(&p, text).map_err(io(format!("writing {}", p.display())))
    }
    pub fn switch(&self, name: &str) -> Option<&SwitchState> {
        self.switches.iter().find(|s| s.name == name)
    }
    pub fn host(&self, name: &str) -> Option<&HostState> {
        self.hosts.iter().find(|h| h.name == name)
    }
}

/// The fabric's namespace (BMv2, plugins, switch ports). Names never contain `:`, so
/// `weft-<fabric>:…` belongs to exactly one fabric: a fabric `a` and a fabric `a-b` cannot
/// claim each other's namespaces.
pub fn fabric_netns(fabric: &str) -> String {
    format!("weft-{fabric}")
}

/// A host's namespace.
pub fn host_netns(fabric: &str, host: &str) -> String {
    format!("{}:{host}", fabric_netns(fabric))
}

/// The namespace the cables run through. Host names start with a letter or digit, so no host
/// namespace can be called this.
pub fn wires_netns(fabric: &str) -> String {
    format!("{}:_wires", fabric_netns(fabric))
}

fn iface(device_id: u64, port_id: u32) -> String {
    format!("s{device_id}p{port_id}")
}

/// The default state directory of a fabric.
pub fn default_state_dir(fabric: &str) -> PathBuf {
    PathBuf::from("/run/weft/testbed").join(fabric)
}

fn unix_path(db: &str) -> Option<PathBuf> {
    db.strip_prefix("unix://")
        .map(PathBuf::from)
        .or_else(|| db.starts_with('/').then(|| PathBuf::from(db)))
}

fn tcp_port(db: &str) -> Option<u16> {
    db.strip_prefix("redis://")?
        .trim_end_matches('/')
        .rsplit(':')
        .next()?
        .split('/')
        .next()?
        .parse()
        .ok()
}

fn spawn(name: &str, cmd: &[String], log: &Path) -> Result<ProcState> {
    let out = fs::File::create(log).map_err(io(format!("creating {}", log.display())))?;
    let err = out.try_clone().map_err(io("log file"))?;
    let child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(io(format!("starting {}", cmd[0])))?;
    Ok(ProcState {
        name: name.to_string(),
        pid: child.id(),
        log: log.to_path_buf(),
        cmd: cmd.to_vec(),
    })
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) -> Result<()> {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(TestbedError::Other(format!(
        "timed out after {timeout:?} waiting for {what}"
    )))
}

/// Options of `up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub state_dir: PathBuf,
    /// Extra plugin arguments (e.g. intervals).
    pub plugin_args: Vec<String>,
    /// Only each switch's redis-server (its SONiC DB): for machines without BMv2, where the
    /// controller can still compile and write everything.
    pub db_only: bool,
    /// Redis ACL users per role (see [`acl`]): `default` off; the plugins read their password
    /// from a file, the controller from the file `WEFT_DB_CREDENTIALS` names.
    pub acl: bool,
    /// P4Runtime over mutual TLS between each plugin and its BMv2 (see [`tls`]).
    pub tls: bool,
}

/// Builds the fabric. On any failure, whatever was started is torn down again.
pub fn up(t: &Topology, programs: &Programs, opts: &UpOptions) -> Result<State> {
    // Validated with the intent already; asserted again here, where names become namespaces.
    for name in std::iter::once(&t.name).chain(t.hosts.iter().map(|h| &h.name)) {
        weft_topology::check_name(name).map_err(|e| {
            TestbedError::Other(format!("name {}: {e}", weft_topology::display_name(name)))
        })?;
    }
    let ns = fabric_netns(&t.name);
    let dir = &opts.state_dir;
    if State::path(dir).exists() || netns_exists(&ns) {
        return Err(TestbedError::Other(format!(
            "testbed {} already exists (state {}); run `weft testbed down` first",
            t.name,
            dir.display()
        )));
    }
    fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let mut st = State {
        fabric: t.name.clone(),
        netns: ns.clone(),
        state_dir: dir.clone(),
        processes: Vec::new(),
        switches: Vec::new(),
        hosts: Vec::new(),
        wires: Vec::new(),
    };
    match build(t, programs, opts, &mut st) {
        Ok(()) => Ok(st),
        Err(e) => {
            let _ = st.save();
            let _ = down(dir, &t.name);
            Err(e)
        }
    }
}

fn netns_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

fn build(t: &Topology, programs: &Programs, opts: &UpOptions, st: &mut State) -> Result<()> {
    let ns = st.netns.clone();
    if opts.db_only {
        return start_switches(t, programs, opts, st, &[]);
    }
    run(&["ip", "netns", "add", &ns])?;
    st.save()?;
    run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
    // The kernel's own IPv6 chatter (ND, MLD) on switch ports would only load BMv2.
    run(&[
        "ip",
        "netns",
        "exec",
        &ns,
        "sysctl",
        "-qw",
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ])?;
    let mtu = t.mtu.to_string();

    let wires_ns = wires_netns(&t.name);
    run(&["ip", "netns", "add", &wires_ns])?;
    st.save()?;

    // Every cable is three veth pairs' worth of wire: switch end ═ middle end, in the wires
    // namespace joined to the other middle end by a tc redirect, ═ far end. Pulling the cable
    // takes the two middle ends down: both far ends lose carrier, as with a real cable, while the
    // interfaces BMv2 captures on stay up (BMv2 stops receiving on *every* port after one of its
    // own interfaces goes admin-down).
    let mut interfaces: Vec<BTreeMap<String, String>> = vec![BTreeMap::new(); t.switches.len()];
    let mut wire_cmds = WireCommands::default();
    for l in &t.links {
        let (sa, sb) = (&t.switches[l.a.switch], &t.switches[l.b.switch]);
        let (pa, pb) = (&sa.ports[l.a.port], &sb.ports[l.b.port]);
        let (ia, ib) = (iface(sa.device_id, pa.id), iface(sb.device_id, pb.id));
        let w = st.wires.len();
        let (ma, mb) = (format!("w{w}a"), format!("w{w}b"));
        wire_cmds.end(&ns, &ia, &ma, &mtu, true);
        wire_cmds.end(&ns, &ib, &mb, &mtu, true);
        wire_cmds.join(&ma, &mb, pa.admin_up && pb.admin_up);
        st.wires.push(WireState {
            a: (sa.name.clone(), pa.name.clone()),
            b: (sb.name.clone(), pb.name.clone()),
            middle: [ma, mb],
        });
        interfaces[l.a.switch].insert(pa.name.clone(), ia);
        interfaces[l.b.switch].insert(pb.name.clone(), ib);
    }
    for (hi, h) in t.hosts.iter().enumerate() {
        let sw = &t.switches[h.switch];
        let p = &sw.ports[h.port];
        let si = iface(sw.device_id, p.id);
        let hns = host_netns(&t.name, &h.name);
        run(&["ip", "netns", "add", &hns])?;
        st.hosts.push(HostState {
            name: h.name.clone(),
            netns: hns.clone(),
            ipv4: h.ipv4.to_string(),
            ipv6: h.ipv6.map(|a| a.to_string()),
        });
        st.save()?;
        let w = st.wires.len();
        let (ma, mb) = (format!("w{w}a"), format!("w{w}b"));
        let tmp = format!("h{hi}");
        wire_cmds.end(&ns, &si, &ma, &mtu, true);
        wire_cmds.end(&hns, &tmp, &mb, &mtu, false);
        wire_cmds.join(&ma, &mb, p.admin_up);
        st.wires.push(WireState {
            a: (sw.name.clone(), p.name.clone()),
            b: (h.name.clone(), "eth0".into()),
            middle: [ma, mb],
        });
        interfaces[h.switch].insert(p.name.clone(), si);
    }
    wire_cmds.run(&wires_ns)?;
    st.save()?;
    for (hi, h) in t.hosts.iter().enumerate() {
        let sw = &t.switches[h.switch];
        let tmp = format!("h{hi}");
        let hns = host_netns(&t.name, &h.name);
        let gw_mac = sw.router_mac.to_string();
        let (mac, addr, gw) = (
            h.mac.to_string(),
            format!("{}/32", h.ipv4),
            h.gateway_v4.to_string(),
        );
        for c in [
            &["ip", "-n", &hns, "link", "set", "lo", "up"][..],
            &["ip", "-n", &hns, "link", "set", &tmp, "name", "eth0"],
            &["ip", "-n", &hns, "link", "set", "eth0", "address", &mac],
            &[
                "ip",
                "netns",
                "exec",
                &hns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.accept_dad=0",
                "net.ipv6.conf.default.accept_dad=0",
                "net.ipv6.conf.all.router_solicitations=0",
                "net.ipv6.conf.default.router_solicitations=0",
            ],
            &["ip", "-n", &hns, "link", "set", "eth0", "up"],
            // Veths offload UDP/TCP checksums to "hardware": the frame carries only a partial
            // sum, which BMv2 forwards as is and the receiver drops. Checksum in software.
            &[
                "ip", "netns", "exec", &hns, "ethtool", "-K", "eth0", "tx", "off",
            ],
            // A /32 and an on-link default route: every packet goes to the leaf, never ARPs
            // for a neighbour host.
            &["ip", "-n", &hns, "addr", "add", &addr, "dev", "eth0"],
            &[
                "ip",
                "-n",
                &hns,
                "neigh",
                "replace",
                &gw,
                "lladdr",
                &gw_mac,
                "dev",
                "eth0",
                "nud",
                "permanent",
            ],
            &[
                "ip", "-n", &hns, "route", "add", "default", "via", &gw, "dev", "eth0", "onlink",
            ],
        ] {
            run(c)?;
        }
        if let (Some(a6), Some(g6)) = (h.ipv6, h.gateway_v6) {
            for c in [
                vec![
                    "ip",
                    "-n",
                    &hns,
                    "-6",
                    "addr",
                    "add",
                    &format!("{a6}/128"),
                    "dev",
                    "eth0",
                    "nodad",
                ],
                vec![
                    "ip",
                    "-n",
                    &hns,
                    "-6",
                    "neigh",
                    "replace",
                    &g6.to_string(),
                    "lladdr",
                    &gw_mac,
                    "dev",
                    "eth0",
                    "nud",
                    "permanent",
                ],
                vec![
                    "ip",
                    "-n",
                    &hns,
                    "-6",
                    "route",
                    "add",
                    "default",
                    "via",
                    &g6.to_string(),
                    "dev",
                    "eth0",
                    "onlink",
                ],
            ] {
                run(&c)?;
            }
        }
    }

    start_switches(t, programs, opts, st, &interfaces)
}

/// The nice value BMv2 runs at (the plugin's failover threads run at -10).
const BMV2_NICE: i32 = -5;

fn start_switches(
    t: &Topology,
    programs: &Programs,
    opts: &UpOptions,
    st: &mut State,
    interfaces: &[BTreeMap<String, String>],
) -> Result<()> {
    let ns = st.netns.clone();
    let dir = opts.state_dir.clone();
    let tls = if opts.tls && !opts.db_only {
        Some(tls::write_files(&dir)?)
    } else {
        None
    };
    let acl = if opts.acl {
        Some(acl::write_files(&dir)?)
    } else {
        None
    };
    for (si, sw) in t.switches.iter().enumerate() {
        let sdir = dir.join(&sw.name);
        fs::create_dir_all(&sdir).map_err(io(format!("creating {}", sdir.display())))?;
        // The switch's SONiC DB.
        let mut redis: Vec<String> = vec![programs.redis.to_string_lossy().into_owned()];
        match (unix_path(&sw.db), tcp_port(&sw.db)) {
            (Some(sock), _) => {
                if let Some(parent) = sock.parent() {
                    fs::create_dir_all(parent)
                        .map_err(io(format!("creating {}", parent.display())))?;
                }
                let _ = fs::remove_file(&sock);
                redis.extend([
                    "--port".into(),
                    "0".into(),
                    "--unixsocket".into(),
                    sock.to_string_lossy().into_owned(),
                    "--unixsocketperm".into(),
                    "700".into(),
                ]);
            }
            (None, Some(port)) => redis.extend([
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
            ]),
            _ => {
                return Err(TestbedError::Other(format!(
                    "switch {}: db {:?} is neither unix:// nor redis://host:port",
                    sw.name, sw.db
                )));
            }
        }
        redis.extend(
            [
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--notify-keyspace-events",
                "AKE",
                "--dir",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        redis.push(sdir.to_string_lossy().into_owned());
        if let Some(a) = &acl {
            redis.push("--aclfile".into());
            redis.push(a.acl.to_string_lossy().into_owned());
        }
        st.processes.push(spawn(
            &format!("redis {}", sw.name),
            &redis,
            &sdir.join("redis.log"),
        )?);
        st.save()?;
        if opts.db_only {
            st.switches.push(SwitchState {
                name: sw.name.clone(),
                device_id: sw.device_id,
                p4rt_address: sw.p4rt_address.clone(),
                db: sw.db.clone(),
                thrift_port: 0,
                interfaces: BTreeMap::new(),
                metrics: None,
            });
            st.save()?;
            continue;
        }

        let thrift = 9090 + si as u16;
        // BMv2 stands in for the switch's ASIC, which never waits for the CPU: favour it over
        // whatever else runs on the machine, or under load it builds a backlog that a link
        // failure then throws away (and drops packets on its own).
        let mut bm: Vec<String> = vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            ns.clone(),
            "nice".into(),
            "-n".into(),
            BMV2_NICE.to_string(),
            programs.bmv2.to_string_lossy().into_owned(),
        ];
        // Default logging formats every message even with no log sink: half the packet rate.
        bm.extend([
            "--log-level".into(),
            "off".into(),
            "--device-id".into(),
            sw.device_id.to_string(),
            "--thrift-port".into(),
            thrift.to_string(),
        ]);
        for p in &sw.ports {
            if let Some(i) = interfaces[si].get(&p.name) {
                bm.extend(["-i".into(), format!("{}@{}", p.id, i)]);
            }
        }
        bm.extend([
            "--no-p4".into(),
            "--".into(),
            "--grpc-server-addr".into(),
            sw.p4rt_address.clone(),
            "--cpu-port".into(),
            "255".into(),
            "--priority-queues".into(),
            "8".into(),
        ]);
        if let Some(t) = &tls {
            bm.extend(tls::bmv2_args(t));
        }
        st.processes.push(spawn(
            &format!("bmv2 {}", sw.name),
            &bm,
            &sdir.join("bmv2.log"),
        )?);
        st.save()?;

        let port_map: Vec<String> = interfaces[si]
            .iter()
            .map(|(p, i)| format!("{p}={i}"))
            .collect();
        let mut pl: Vec<String> = vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            ns.clone(),
            programs.plugin.to_string_lossy().into_owned(),
        ];
        let db = match &acl {
            Some(a) => acl::with_credentials(&sw.db, &a.plugin),
            None => sw.db.clone(),
        };
        pl.extend(plugin_args(sw.device_id, &db, &sw.p4rt_address, &port_map));
        if let Some(t) = &tls {
            pl.extend(tls::plugin_args(t));
        }
        // Metrics on a port of the fabric namespace, unless the caller's plugin arguments
        // say otherwise (`--metrics off` turns them off).
        let own = opts
            .plugin_args
            .iter()
            .position(|a| a == "--metrics" || a.starts_with("--metrics="));
        let metrics = match own {
            None => {
                let m = plugin_metrics_addr(si);
                pl.extend(["--metrics".into(), m.clone()]);
                Some(m)
            }
            Some(i) => opts.plugin_args[i]
                .strip_prefix("--metrics=")
                .or(opts.plugin_args.get(i + 1).map(String::as_str))
                .filter(|m| !matches!(*m, "off" | "none"))
                .map(String::from),
        };
        pl.extend(["--switch-name".into(), sw.name.clone()]);
        pl.extend(opts.plugin_args.iter().cloned());
        st.processes.push(spawn(
            &format!("plugin {}", sw.name),
            &pl,
            &sdir.join("plugin.log"),
        )?);
        st.switches.push(SwitchState {
            name: sw.name.clone(),
            device_id: sw.device_id,
            p4rt_address: sw.p4rt_address.clone(),
            db: sw.db.clone(),
            thrift_port: thrift,
            interfaces: interfaces[si].clone(),
            metrics,
        });
        st.save()?;
    }
    for p in &st.processes {
        if !pid_alive(p.pid) {
            return Err(TestbedError::Other(format!(
                "{} exited at start; see {}",
                p.name,
                p.log.display()
            )));
        }
    }
    // Redis first: the controller needs it; the plugins connect on their own.
    for sw in &t.switches {
        if let Some(sock) = unix_path(&sw.db) {
            wait_for(
                &format!("{}'s redis at {}", sw.name, sock.display()),
                Duration::from_secs(20),
                || sock.exists(),
            )?;
        }
    }
    Ok(())
}

/// Where the testbed's plugin of switch `index` serves its metrics: a port on the fabric
/// namespace's loopback (each fabric has its own, so fabrics do not clash).
pub fn plugin_metrics_addr(index: usize) -> String {
    format!("127.0.0.1:{}", METRICS_BASE_PORT as usize + 1 + index)
}

/// Ports from here on (in the fabric namespace) are the testbed's metrics endpoints: the
/// controller's suggested `weft run --metrics` address is this one, the plugins' follow.
pub const METRICS_BASE_PORT: u16 = 19400;

/// The address `weft testbed prometheus-config` expects `weft run --metrics` on.
pub fn controller_metrics_addr() -> String {
    format!("127.0.0.1:{METRICS_BASE_PORT}")
}

/// A Prometheus configuration scraping every plugin of the testbed (and `weft run` at
/// `controller`, when given), every `interval`. Prometheus has to run in the fabric namespace
/// (`ip netns exec <netns> prometheus ...`): that is where the plugins listen.
pub fn prometheus_config(st: &State, controller: Option<&str>, interval: Duration) -> String {
    let secs = format!("{}ms", interval.as_millis().max(100));
    let mut out = format!(
        "# Prometheus scrape configuration for Weft testbed {fabric}, written by\n\
         # `weft testbed prometheus-config`. The plugins listen in the fabric's network\n\
         # namespace, so run Prometheus there:\n\
         #   ip netns exec {ns} prometheus --config.file=THIS_FILE --storage.tsdb.path=DIR\n\
         #   and weft run with --metrics {ctl} (also in {ns}) for the controller's job.\n\
         global:\n  scrape_interval: {secs}\n  evaluation_interval: {secs}\n\
         scrape_configs:\n",
        fabric = st.fabric,
        ns = st.netns,
        ctl = controller.unwrap_or("127.0.0.1:19400"),
    );
    out.push_str("  - job_name: weft-plugin\n    honor_labels: true\n    static_configs:\n");
    let targets: Vec<&SwitchState> = st.switches.iter().filter(|s| s.metrics.is_some()).collect();
    if targets.is_empty() {
        out.push_str("      []\n");
    }
    for s in targets {
        let addr = s.metrics.as_deref().unwrap_or_default();
        out.push_str(&format!(
            "      - targets: ['{addr}']\n        labels: {{ weft_switch: '{}' }}\n",
            s.name
        ));
    }
    if let Some(c) = controller {
        out.push_str(&format!(
            "  - job_name: weft-controller\n    honor_labels: true\n    static_configs:\n      - targets: ['{c}']\n        labels: {{ fabric: '{}' }}\n",
            st.fabric
        ));
    }
    out
}

/// The plugin's command line for one switch.
pub fn plugin_args(device_id: u64, db: &str, p4rt: &str, port_map: &[String]) -> Vec<String> {
    let mut v = vec![
        "--redis".to_string(),
        db.to_string(),
        "--p4rt".to_string(),
        p4rt.to_string(),
        "--device-id".to_string(),
        device_id.to_string(),
    ];
    for m in port_map {
        v.push("--port".into());
        v.push(m.clone());
    }
    v
}

pub fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
            .unwrap_or(false)
}

fn kill(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// Kills one process of the testbed (`bmv2 leaf1`, `plugin leaf1`, `redis leaf1`) with
/// SIGKILL, as a crash would.
pub fn kill_process(dir: &Path, name: &str) -> Result<u32> {
    let st = State::load(dir)?;
    let p = st
        .processes
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| TestbedError::Other(format!("no process {name}")))?;
    kill(p.pid, "-KILL");
    let t0 = Instant::now();
    while pid_alive(p.pid) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(p.pid)
}

/// Starts a process of the testbed again with its recorded command line (after a crash or a
/// kill), appending to its log, and records the new PID.
pub fn restart_process(dir: &Path, name: &str) -> Result<u32> {
    let mut st = State::load(dir)?;
    let p = st
        .processes
        .iter_mut()
        .find(|p| p.name == name)
        .ok_or_else(|| TestbedError::Other(format!("no process {name}")))?;
    if pid_alive(p.pid) {
        return Err(TestbedError::Other(format!(
            "{name} is still running (pid {})",
            p.pid
        )));
    }
    let log = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&p.log)
        .map_err(io(format!("opening {}", p.log.display())))?;
    let err = log.try_clone().map_err(io("log file"))?;
    let child = Command::new(&p.cmd[0])
        .args(&p.cmd[1..])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .map_err(io(format!("starting {}", p.cmd[0])))?;
    p.pid = child.id();
    let pid = p.pid;
    st.save()?;
    Ok(pid)
}

/// Removes everything a testbed started: processes by PID, namespaces (with their veths), and
/// the state file. Works from the state file, and without one from the namespace names.
pub fn down(state_dir: &Path, fabric: &str) -> Result<Vec<String>> {
    // What faults started first (their qdiscs, queue rates and routes go with the namespaces
    // and switches).
    let mut done = fault::stop_processes(state_dir);
    let st = State::load(state_dir).ok();
    if let Some(st) = &st {
        let alive: Vec<bool> = st.processes.iter().map(|p| pid_alive(p.pid)).collect();
        for (p, was) in st.processes.iter().zip(&alive) {
            if *was {
                kill(p.pid, "-TERM");
            }
        }
        let t0 = Instant::now();
        while st.processes.iter().any(|p| pid_alive(p.pid)) && t0.elapsed() < Duration::from_secs(3)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        for (p, was) in st.processes.iter().zip(&alive) {
            if pid_alive(p.pid) {
                kill(p.pid, "-KILL");
            }
            done.push(if *was {
                format!("stopped {} (pid {})", p.name, p.pid)
            } else {
                format!("{} (pid {}) was not running", p.name, p.pid)
            });
        }
        for sw in &st.switches {
            if let Some(sock) = unix_path(&sw.db) {
                let _ = fs::remove_file(&sock);
                // The directory `up` made for the socket, and its parents up to the fabric's
                // (`/run/weft/<fabric>/<switch>`, then `/run/weft/<fabric>`), when empty.
                let mut dir = sock.parent().map(Path::to_path_buf);
                for _ in 0..2 {
                    let Some(d) = dir else { break };
                    if fs::remove_dir(&d).is_ok() {
                        done.push(format!("removed {}", d.display()));
                    }
                    dir = d.parent().map(Path::to_path_buf);
                }
            }
        }
    }
    let prefix = fabric_netns(st.as_ref().map_or(fabric, |s| s.fabric.as_str()));
    if let Ok(list) = run(&["ip", "netns", "list"]) {
        for ns in list.lines().filter_map(|l| l.split_whitespace().next()) {
            if ns == prefix || ns.starts_with(&format!("{prefix}:")) {
                // Processes still inside (a crashed testbed without a state file) go first.
                if let Ok(pids) = run(&["ip", "netns", "pids", ns]) {
                    for pid in pids
                        .split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok())
                    {
                        kill(pid, "-KILL");
                    }
                }
                match run(&["ip", "netns", "del", ns]) {
                    Ok(_) => done.push(format!("deleted namespace {ns}")),
                    Err(e) => done.push(format!("could not delete namespace {ns}: {e}")),
                }
            }
        }
    }
    let _ = fs::remove_file(State::path(state_dir));
    // The per-switch directories (logs, redis dirs) and the state directory itself.
    if let Some(st) = &st {
        for sw in &st.switches {
            let _ = fs::remove_dir_all(state_dir.join(&sw.name));
        }
        let _ = fs::remove_file(state_dir.join("udp_probe.py"));
        let _ = fs::remove_file(state_dir.join("spread-recv.json"));
        // What faults left: their scripts, logs, saved entries, receiver reports.
        if let Ok(rd) = fs::read_dir(state_dir) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.starts_with("fault-")
                    || n.starts_with("blackhole-")
                    || n.starts_with("incast-")
                    || n == "pfc_storm.py"
                    || n == "p4rt_route.py"
                    || n == "wire_impair.py"
                {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        if fs::remove_dir(state_dir).is_ok() {
            done.push(format!("removed {}", state_dir.display()));
        }
    }
    Ok(done)
}

/// A testbed's processes and hosts, for `weft testbed status --output json`.
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    pub fabric: String,
    pub netns: String,
    pub state_dir: PathBuf,
    /// Only redis-servers (`up --db-only`).
    pub db_only: bool,
    pub processes: Vec<ProcessStatus>,
    pub hosts: Vec<HostStatus>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessStatus {
    pub name: String,
    pub pid: u32,
    pub running: bool,
    pub log: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
    pub name: String,
    pub ipv4: String,
    pub netns: String,
    pub netns_exists: bool,
}

impl State {
    /// Started with `--db-only`: redis-servers and nothing else.
    pub fn db_only(&self) -> bool {
        self.hosts.is_empty() && self.processes.iter().all(|p| p.name.starts_with("redis "))
    }
}

/// What runs, as data.
pub fn status_report(state_dir: &Path) -> Result<StatusReport> {
    let st = State::load(state_dir)?;
    Ok(StatusReport {
        db_only: st.db_only(),
        processes: st
            .processes
            .iter()
            .map(|p| ProcessStatus {
                name: p.name.clone(),
                pid: p.pid,
                running: pid_alive(p.pid),
                log: p.log.clone(),
            })
            .collect(),
        hosts: st
            .hosts
            .iter()
            .map(|h| HostStatus {
                name: h.name.clone(),
                ipv4: h.ipv4.clone(),
                netns: h.netns.clone(),
                netns_exists: netns_exists(&h.netns),
            })
            .collect(),
        fabric: st.fabric,
        netns: st.netns,
        state_dir: st.state_dir,
    })
}

/// One line per process and host: alive or not.
pub fn status(state_dir: &Path) -> Result<String> {
    let st = State::load(state_dir)?;
    let mut o = format!(
        "testbed {} (namespace {}, state {})\n",
        st.fabric,
        st.netns,
        st.state_dir.display()
    );
    for p in &st.processes {
        o += &format!(
            "  {:<24} pid {:<8} {}\n",
            p.name,
            p.pid,
            if pid_alive(p.pid) {
                "running".to_string()
            } else {
                match chaos::restart_hint(&st.fabric, &p.name) {
                    Some(h) => format!("NOT RUNNING ({h}; log {})", p.log.display()),
                    None => "NOT RUNNING".to_string(),
                }
            }
        );
    }
    for h in &st.hosts {
        o += &format!(
            "  host {:<19} {} {}\n",
            h.name,
            h.ipv4,
            if netns_exists(&h.netns) {
                ""
            } else {
                "(namespace missing)"
            }
        );
    }
    Ok(o)
}

/// Pulls (or plugs back) the cable at a switch port: both middle ends of its wire go down, so
/// the switch port and the far end lose carrier together, and nothing BMv2 owns is touched.
pub fn set_link(st: &State, switch: &str, port: &str, up: bool) -> Result<()> {
    let sw = st
        .switch(switch)
        .ok_or_else(|| TestbedError::Other(format!("no switch {switch} in the testbed")))?;
    if !sw.interfaces.contains_key(port) {
        return Err(TestbedError::Other(format!(
            "switch {switch} has no connected port {port}"
        )));
    }
    let at = (switch.to_string(), port.to_string());
    let wire = st
        .wires
        .iter()
        .find(|w| w.a == at || w.b == at)
        .ok_or_else(|| {
            TestbedError::Other(format!(
                "the testbed's state has no cable at {switch}:{port} (made by an older weft?); \
                 recreate it with `weft testbed down` and `up`"
            ))
        })?;
    let state = if up { "up" } else { "down" };
    let lines: String = wire
        .middle
        .iter()
        .map(|m| format!("link set dev {m} {state}\n"))
        .collect();
    run_input(
        &["ip", "-n", &wires_netns(&st.fabric), "-batch", "-"],
        &lines,
    )
}

/// Flaps a link `count` times, `interval` between each change.
pub fn flap(st: &State, switch: &str, port: &str, count: u32, interval: Duration) -> Result<()> {
    for _ in 0..count {
        set_link(st, switch, port, false)?;
        std::thread::sleep(interval);
        set_link(st, switch, port, true)?;
        std::thread::sleep(interval);
    }
    Ok(())
}

/// Pings every other host from every host (IPv4, one echo each). Returns (from, to, ok).
pub fn ping_all(st: &State, timeout_s: u32) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for a in &st.hosts {
        for b in &st.hosts {
            if a.name == b.name {
                continue;
            }
            let ok = run(&[
                "ip",
                "netns",
                "exec",
                &a.netns,
                "ping",
                "-c",
                "1",
                "-W",
                &timeout_s.to_string(),
                "-q",
                &b.ipv4,
            ])
            .is_ok();
            out.push((a.name.clone(), b.name.clone(), ok));
        }
    }
    out
}

/// The paced UDP probe (sender and receiver), run inside host namespaces.
pub const UDP_PROBE: &str = include_str!("../../tests/scripts/udp_probe.py");

fn probe_path(st: &State) -> Result<PathBuf> {
    let p = st.state_dir.join("udp_probe.py");
    if !p.exists() {
        fs::write(&p, UDP_PROBE).map_err(io(format!("writing {}", p.display())))?;
    }
    Ok(p)
}

/// Packets BMv2 sent out of each connected port of `switch` (the tx count of the port's
/// interface, as the kernel counts it: independent of the pipeline's own counters).
pub fn port_tx(st: &State, switch: &str) -> Result<BTreeMap<String, u64>> {
    let sw = st
        .switch(switch)
        .ok_or_else(|| TestbedError::Other(format!("no switch {switch}")))?;
    let mut out = BTreeMap::new();
    for (port, i) in &sw.interfaces {
        let text = run(&[
            "ip",
            "netns",
            "exec",
            &st.netns,
            "cat",
            &format!("/sys/class/net/{i}/statistics/tx_packets"),
        ])?;
        let n = text.trim().parse::<u64>().map_err(|e| {
            TestbedError::Other(format!("tx_packets of {i}: {e}: {:?}", text.trim()))
        })?;
        out.insert(port.clone(), n);
    }
    Ok(out)
}

/// Packets BMv2 sent out of all connected ports of `switch`.
pub fn port_tx_packets(st: &State, switch: &str) -> Result<u64> {
    Ok(port_tx(st, switch)?.values().sum())
}

/// The far end of the cable at `switch:port`: a switch and port, or a host and `eth0`.
pub fn peer(st: &State, switch: &str, port: &str) -> Option<(String, String)> {
    let at = (switch.to_string(), port.to_string());
    st.wires.iter().find_map(|w| {
        if w.a == at {
            Some(w.b.clone())
        } else if w.b == at {
            Some(w.a.clone())
        } else {
            None
        }
    })
}

/// and returns, per spine, how many packets it forwarded meanwhile, and how many arrived.
pub fn spread(
    st: &State,
    src: &str,
    dst: &str,
    packets: u32,
    flows: u32,
    spines: &[String],
) -> Result<(Vec<(String, u64)>, u64)> {
    let before: Vec<u64> = spines
        .iter()
        .map(|s| port_tx_packets(st, s))
        .collect::<Result<_>>()?;
    let pps = 500;
    let (res, ()) = stream(
        st,
        &Stream {
            src,
            dst,
            port: 5001,
            pps,
            seconds: f64::from(packets) / f64::from(pps),
            flows,
        },
        || (),
    )?;
    let after: Vec<u64> = spines
        .iter()
        .map(|s| port_tx_packets(st, s))
        .collect::<Result<_>>()?;
    Ok((
        spines
            .iter()
            .cloned()
            .zip(before.iter().zip(after).map(|(b, a)| a.saturating_sub(*b)))
            .collect(),
        res.received,
    ))
}

/// What the receiving side of a paced stream counted (`udp_probe.py recv`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StreamResult {
    pub received: u64,
    pub unique: u64,
    pub max_seq: i64,
    pub lost: u64,
    pub max_gap_ms: Option<f64>,
    pub ce_marked: u64,
    /// The longest loss window on the sender's clock (0 without loss).
    #[serde(default)]
    pub outage_ms: f64,
    /// When it began (ms since the epoch), to line it up with logs.
    #[serde(default)]
    pub outage_from_unix_ms: Option<f64>,
    /// Every run of lost packets (the first 100).
    #[serde(default)]
    pub loss_runs: Vec<LossRun>,
}

/// Consecutive packets that did not arrive.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LossRun {
    /// The last sequence number that arrived before the run.
    pub after_seq: u64,
    pub lost: u64,
    /// When the packet before the run was sent (ms since the epoch).
    pub from_unix_ms: f64,
    /// From that packet's sending to the sending of the first one after the run.
    pub ms: f64,
}

/// A paced UDP stream between two hosts.
#[derive(Debug, Clone)]
pub struct Stream<'a> {
    pub src: &'a str,
    pub dst: &'a str,
    pub port: u16,
    pub pps: u32,
    pub seconds: f64,
    pub flows: u32,
}

/// Kills a child by PID if it is still running when dropped (a failed step must not leave a
/// receiver behind in a host namespace).
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Runs `s` (receiver first, then the sender) with `during` called while it flows; returns
/// what arrived and what `during` returned.
pub fn stream<R>(
    st: &State,
    s: &Stream<'_>,
    during: impl FnOnce() -> R,
) -> Result<(StreamResult, R)> {
    let probe = probe_path(st)?;
    let probe = probe.to_string_lossy().into_owned();
    let host = |n: &str| {
        st.host(n)
            .ok_or_else(|| TestbedError::Other(format!("no host {n} in the testbed")))
    };
    let (hs, hd) = (host(s.src)?, host(s.dst)?);
    let out = st
        .state_dir
        .join(format!("stream-{}-{}-{}.json", s.src, s.dst, s.port));
    let _ = fs::remove_file(&out);
    let ready = out.with_extension("ready");
    let _ = fs::remove_file(&ready);
    let port = s.port.to_string();
    let recv = Command::new("ip")
        .args(["netns", "exec", &hd.netns, "python3", &probe, "recv"])
        .args([
            "--port",
            &port,
            "--seconds",
            &format!("{}", s.seconds + 2.0),
        ])
        .arg("--out")
        .arg(&out)
        .arg("--ready")
        .arg(&ready)
        .stdin(Stdio::null())
        .spawn()
        .map_err(io("starting the receiver"))?;
    let mut recv = Reap(recv);
    // A receiver still starting (slow on a busy machine) would count the first packets lost.
    wait_for("the stream's receiver", Duration::from_secs(20), || {
        ready.exists()
    })?;
    let send = Command::new("ip")
        .args(["netns", "exec", &hs.netns, "python3", &probe, "send"])
        .args(["--dst", &hd.ipv4, "--port", &port])
        .args(["--pps", &s.pps.to_string()])
        .args(["--seconds", &s.seconds.to_string()])
        .args(["--flows", &s.flows.to_string()])
        .stdin(Stdio::null())
        .spawn()
        .map_err(io("starting the sender"))?;
    let mut send = Reap(send);
    let r = during();
    let _ = send.0.wait();
    let _ = recv.0.wait();
    let text = fs::read_to_string(&out).map_err(io(format!(
        "reading the receiver's result {}",
        out.display()
    )))?;
    let res = serde_json::from_str(&text)
        .map_err(|e| TestbedError::Other(format!("{}: {e}", out.display())))?;
    Ok((res, r))
}

/// The port of `candidates` on `switch` that sent the most packets during `window` (which
/// link a running stream's flow hashed onto), with that count.
pub fn busiest_port(
    st: &State,
    switch: &str,
    candidates: &[String],
    window: Duration,
) -> Result<(String, u64)> {
    let a = port_tx(st, switch)?;
    std::thread::sleep(window);
    let b = port_tx(st, switch)?;
    candidates
        .iter()
        .map(|p| {
            let d = b.get(p).copied().unwrap_or(0) - a.get(p).copied().unwrap_or(0);
            (p.clone(), d)
        })
        .max_by_key(|(_, d)| *d)
        .ok_or_else(|| TestbedError::Other(format!("{switch}: no candidate ports")))
}

/// One failover measurement: a one-flow stream from `stream.src`; while it flows, the cable of
/// the `uplinks` port of `switch` that carries it is pulled at `fail_at` after the start (so
/// the failure always hits the traffic). The cable stays pulled; the caller plugs it back.
#[derive(Debug, Clone)]
pub struct FailoverTrial {
    pub port: String,
    /// Packets the pulled port carried in the sampling window before (proof it was the path).
    pub carried: u64,
    /// When the cable was pulled (ms since the epoch).
    pub pulled_at_unix_ms: f64,
    pub result: StreamResult,
}

pub fn failover_trial(
    st: &State,
    s: &Stream<'_>,
    switch: &str,
    uplinks: &[String],
    fail_at: Duration,
) -> Result<FailoverTrial> {
    let (res, chosen) = stream(st, s, || -> Result<(String, u64, f64)> {
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(300));
        let window = fail_at
            .saturating_sub(Duration::from_millis(500))
            .max(Duration::from_millis(100));
        let (port, carried) = busiest_port(st, switch, uplinks, window)?;
        if carried == 0 {
            return Err(TestbedError::Other(format!(
                "the stream {} → {} crossed none of {switch}'s ports {uplinks:?}",
                s.src, s.dst
            )));
        }
        if let Some(rest) = fail_at.checked_sub(t0.elapsed()) {
            std::thread::sleep(rest);
        }
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3);
        set_link(st, switch, &port, false)?;
        Ok((port, carried, at))
    })?;
    let (port, carried, pulled_at_unix_ms) = chosen?;
    Ok(FailoverTrial {
        port,
        carried,
        pulled_at_unix_ms,
        result: res,
    })
}

/// The ports of `switch` cabled to another switch.
pub fn uplinks(st: &State, switch: &str) -> Vec<String> {
    let is_switch = |n: &str| st.switch(n).is_some();
    st.wires
        .iter()
        .filter_map(|w| {
            if w.a.0 == switch && is_switch(&w.b.0) {
                Some(w.a.1.clone())
            } else if w.b.0 == switch && is_switch(&w.a.0) {
                Some(w.b.1.clone())
            } else {
                None
            }
        })
        .collect()
}
