//! Each switch's processes: its Redis (the SONiC DB), BMv2 and plugin, their command lines,
//! and a process killed or started again.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weft_topology::{Switch, Topology};

use crate::error::{Result, TestbedError, io};
use crate::exec::{kill, pid_alive, spawn, wait_for};
use crate::names::{tcp_port, unix_path};
use crate::programs::Programs;
use crate::state::{State, SwitchState};
use crate::{acl, tls};

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

/// The nice value BMv2 runs at (the plugin's failover threads run at -10).
const BMV2_NICE: i32 = -5;

/// Emulated line rate per Gb/s of port speed, packets/s: a 100G port drains 2000 packets/s.
/// Time on the testbed runs that much slower than on the real port for a packet of the MTU
/// (9100 bytes take 0.73 µs at 100G, 0.5 ms here), PFC pause quanta included: the plugin times
/// them at this rate (65535 quanta: 335 µs at 100G, 230 ms here).
pub const PPS_PER_GBPS: u64 = 20;

/// The emulated line rate of a port of `speed`, packets/s (at least 1).
pub fn line_rate_pps(speed: weft_topology::units::Speed) -> u64 {
    (speed.bits_per_sec() / (1_000_000_000 / PPS_PER_GBPS)).max(1)
}

/// Each connected port of `sw` and its emulated line rate.
pub fn line_rates(sw: &Switch, interfaces: &BTreeMap<String, String>) -> BTreeMap<String, u64> {
    sw.ports
        .iter()
        .filter(|p| interfaces.contains_key(&p.name))
        .map(|p| (p.name.clone(), line_rate_pps(p.speed)))
        .collect()
}

pub(crate) fn start_switches(
    t: &Topology,
    programs: &Programs,
    opts: &UpOptions,
    st: &mut State,
    interfaces: &[BTreeMap<String, String>],
) -> Result<()> {
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
        if let Some(sock) = unix_path(&sw.db) {
            if let Some(parent) = sock.parent() {
                // Which of its directories this testbed makes (and only those, `down` removes).
                let mut new: Vec<std::path::PathBuf> = parent
                    .ancestors()
                    .take_while(|d| !d.exists())
                    .map(Path::to_path_buf)
                    .collect();
                fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
                st.made_dirs.append(&mut new);
            }
            // A socket file nobody answers on is a dead server's (`up` checked that none
            // answers): it would keep the new server from binding.
            let _ = fs::remove_file(&sock);
        }
        let redis = redis_cmd(&programs.redis, sw, &sdir, acl.as_ref())?;
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
                line_rates: BTreeMap::new(),
            });
            st.save()?;
            continue;
        }
        let p = SwitchProcesses {
            programs,
            netns: &st.netns,
            tls: tls.as_ref(),
            acl: acl.as_ref(),
            plugin_args: &opts.plugin_args,
        };
        let thrift = 9090 + si as u16;
        let bm = p.bmv2_cmd(sw, thrift, &interfaces[si]);
        let (pl, metrics) = p.plugin_cmd(sw, si, &interfaces[si], thrift);
        st.processes.push(spawn(
            &format!("bmv2 {}", sw.name),
            &bm,
            &sdir.join("bmv2.log"),
        )?);
        st.save()?;
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
            line_rates: line_rates(sw, &interfaces[si]),
        });
        st.save()?;
    }
    check_started(st)?;
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

fn check_started(st: &State) -> Result<()> {
    for p in &st.processes {
        if !pid_alive(p.pid) {
            return Err(TestbedError::Other(format!(
                "{} exited at start; see {}",
                p.name,
                p.log.display()
            )));
        }
    }
    Ok(())
}

/// The switch's redis-server: on the Unix socket or TCP port of its `db`, nothing persisted,
/// keyspace events on (as SONiC's), with the ACL file when there is one.
pub fn redis_cmd(
    redis_server: &Path,
    sw: &Switch,
    dir: &Path,
    acl: Option<&acl::AclFiles>,
) -> Result<Vec<String>> {
    let mut redis: Vec<String> = vec![redis_server.to_string_lossy().into_owned()];
    match (unix_path(&sw.db), tcp_port(&sw.db)) {
        (Some(sock), _) => redis.extend([
            "--port".into(),
            "0".into(),
            "--unixsocket".into(),
            sock.to_string_lossy().into_owned(),
            "--unixsocketperm".into(),
            "700".into(),
        ]),
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
    redis.push(dir.to_string_lossy().into_owned());
    if let Some(a) = acl {
        redis.push("--aclfile".into());
        redis.push(a.acl.to_string_lossy().into_owned());
    }
    Ok(redis)
}

/// What a switch's BMv2 and plugin command lines are made from.
pub struct SwitchProcesses<'a> {
    pub programs: &'a Programs,
    /// The fabric namespace they run in.
    pub netns: &'a str,
    pub tls: Option<&'a tls::TlsFiles>,
    pub acl: Option<&'a acl::AclFiles>,
    /// Extra plugin arguments ([`UpOptions::plugin_args`]).
    pub plugin_args: &'a [String],
}

impl SwitchProcesses<'_> {
    /// BMv2 in the fabric namespace, niced up, with the switch's interfaces (`-i ID@IFACE`),
    /// P4Runtime on the switch's address, CPU port 255 and 8 priority queues.
    pub fn bmv2_cmd(
        &self,
        sw: &Switch,
        thrift: u16,
        interfaces: &BTreeMap<String, String>,
    ) -> Vec<String> {
        // BMv2 stands in for the switch's ASIC, which never waits for the CPU: favour it over
        // whatever else runs on the machine, or under load it builds a backlog that a link
        // failure then throws away (and drops packets on its own).
        let mut bm: Vec<String> = vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            self.netns.to_string(),
            "nice".into(),
            "-n".into(),
            BMV2_NICE.to_string(),
            self.programs.bmv2.to_string_lossy().into_owned(),
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
            if let Some(i) = interfaces.get(&p.name) {
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
        if let Some(t) = self.tls {
            bm.extend(tls::bmv2_args(t));
        }
        bm
    }

    /// The plugin of switch `index` in the fabric namespace, and where it serves its metrics:
    /// [`plugin_metrics_addr`] unless the extra arguments say otherwise (`--metrics off` turns
    /// them off). It pauses its BMv2's queues on the PFC frames they receive (BMv2's Thrift
    /// API on port `thrift`) and gives every port its emulated line rate ([`line_rate_pps`]).
    pub fn plugin_cmd(
        &self,
        sw: &Switch,
        index: usize,
        interfaces: &BTreeMap<String, String>,
        thrift: u16,
    ) -> (Vec<String>, Option<String>) {
        let port_map: Vec<String> = interfaces.iter().map(|(p, i)| format!("{p}={i}")).collect();
        let mut pl: Vec<String> = vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            self.netns.to_string(),
            self.programs.plugin.to_string_lossy().into_owned(),
        ];
        let db = match self.acl {
            Some(a) => acl::with_credentials(&sw.db, &a.plugin),
            None => sw.db.clone(),
        };
        pl.extend(plugin_args(sw.device_id, &db, &sw.p4rt_address, &port_map));
        pl.extend(["--bmv2-thrift".into(), format!("127.0.0.1:{thrift}")]);
        for (port, pps) in line_rates(sw, interfaces) {
            pl.extend(["--line-rate".into(), format!("{port}={pps}")]);
        }
        if let Some(ep) = sw.transport.zmq_endpoint() {
            pl.extend(["--zmq-endpoint".into(), ep.to_string()]);
        }
        if let Some(t) = self.tls {
            pl.extend(tls::plugin_args(t));
        }
        let own = self
            .plugin_args
            .iter()
            .position(|a| a == "--metrics" || a.starts_with("--metrics="));
        let metrics = match own {
            None => {
                let m = plugin_metrics_addr(index);
                pl.extend(["--metrics".into(), m.clone()]);
                Some(m)
            }
            Some(i) => self.plugin_args[i]
                .strip_prefix("--metrics=")
                .or(self.plugin_args.get(i + 1).map(String::as_str))
                .filter(|m| !matches!(*m, "off" | "none"))
                .map(String::from),
        };
        pl.extend(["--switch-name".into(), sw.name.clone()]);
        pl.extend(self.plugin_args.iter().cloned());
        (pl, metrics)
    }
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const FABRIC: &str = "fabric: {name: lab}
switches:
  - name: s1
    role: spine
    ports: [{name: Ethernet0}, {name: Ethernet4}]
  - name: l1
    role: leaf
    db: redis://127.0.0.1:6390
    ports: [{name: Ethernet0}, {name: Ethernet4}]
links:
  - {a: l1:Ethernet4, b: s1:Ethernet0}
hosts:
  - {name: h1, attach: l1:Ethernet0}
";

    fn topology() -> Topology {
        weft_topology::load_str(FABRIC, "lab.yaml").expect("intent")
    }

    fn programs() -> Programs {
        Programs {
            bmv2: PathBuf::from("/opt/p4/bin/simple_switch_grpc"),
            redis: PathBuf::from("/usr/bin/redis-server"),
            plugin: PathBuf::from("/usr/bin/weft-plugin"),
        }
    }

    #[test]
    fn redis_listens_where_the_intent_puts_the_switch_db() {
        let t = topology();
        let dir = Path::new("/run/weft/testbed/lab/s1");
        let unix = redis_cmd(Path::new("redis-server"), &t.switches[0], dir, None).expect("unix");
        assert_eq!(
            unix[..7],
            [
                "redis-server",
                "--port",
                "0",
                "--unixsocket",
                "/run/weft/lab/s1/redis.sock",
                "--unixsocketperm",
                "700"
            ]
        );
        assert_eq!(
            unix.last().map(String::as_str),
            Some("/run/weft/testbed/lab/s1")
        );
        let tcp = redis_cmd(Path::new("redis-server"), &t.switches[1], dir, None).expect("tcp");
        assert_eq!(tcp[1..5], ["--port", "6390", "--bind", "127.0.0.1"]);
        assert!(
            tcp.windows(2)
                .any(|w| w == ["--notify-keyspace-events", "AKE"])
        );
        let mut other = t.switches[0].clone();
        other.db = "tcp://h:1".into();
        assert!(redis_cmd(Path::new("redis-server"), &other, dir, None).is_err());
    }

    #[test]
    fn bmv2_takes_the_switch_interfaces_by_port_id_and_its_p4runtime_address() {
        let t = topology();
        let p = programs();
        let sp = SwitchProcesses {
            programs: &p,
            netns: "weft-lab",
            tls: None,
            acl: None,
            plugin_args: &[],
        };
        let ifaces: BTreeMap<String, String> =
            [("Ethernet4".to_string(), "s2p2".to_string())].into();
        let cmd = sp.bmv2_cmd(&t.switches[1], 9091, &ifaces);
        assert_eq!(
            cmd[..8],
            [
                "ip",
                "netns",
                "exec",
                "weft-lab",
                "nice",
                "-n",
                "-5",
                "/opt/p4/bin/simple_switch_grpc"
            ]
        );
        assert!(cmd.windows(2).any(|w| w == ["-i", "2@s2p2"]));
        assert!(
            !cmd.iter().any(|a| a.starts_with("1@")),
            "unconnected port given: {cmd:?}"
        );
        assert!(
            cmd.windows(2)
                .any(|w| w == ["--grpc-server-addr", "127.0.0.1:9560"])
        );
        assert!(cmd.windows(2).any(|w| w == ["--thrift-port", "9091"]));
    }

    #[test]
    fn the_plugin_serves_metrics_on_its_own_port_unless_told_otherwise() {
        let t = topology();
        let p = programs();
        let ifaces: BTreeMap<String, String> =
            [("Ethernet0".to_string(), "s1p1".to_string())].into();
        let with = |extra: &[String]| {
            SwitchProcesses {
                programs: &p,
                netns: "weft-lab",
                tls: None,
                acl: None,
                plugin_args: extra,
            }
            .plugin_cmd(&t.switches[0], 3, &ifaces, 9093)
        };
        let (cmd, metrics) = with(&[]);
        assert_eq!(metrics.as_deref(), Some("127.0.0.1:19404"));
        assert!(cmd.windows(2).any(|w| w == ["--port", "Ethernet0=s1p1"]));
        assert!(
            cmd.windows(2)
                .any(|w| w == ["--bmv2-thrift", "127.0.0.1:9093"])
        );
        let speed = t.switches[0].ports[0].speed;
        assert!(
            cmd.windows(2)
                .any(|w| w[0] == "--line-rate"
                    && w[1] == format!("Ethernet0={}", line_rate_pps(speed))),
            "{cmd:?}"
        );
        assert!(cmd.windows(2).any(|w| w == ["--switch-name", "s1"]));
        assert_eq!(with(&["--metrics".into(), "off".into()]).1, None);
        let (cmd, metrics) = with(&["--metrics=127.0.0.1:1".into()]);
        assert_eq!(metrics.as_deref(), Some("127.0.0.1:1"));
        assert_eq!(cmd.iter().filter(|a| a.starts_with("--metrics")).count(), 1);
    }
}
