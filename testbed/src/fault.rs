//! Faults injected into a running testbed, each reversible: `weft testbed fault FILE KIND …`.
//!
//! ```text
//!  kind            what it does                                        undone by
//!  ──────────────  ──────────────────────────────────────────────────  ─────────────────────────
//!  pfc-storm       the host sends PFC PAUSE every 5 ms (pfc_storm.py)   killing it (PID)
//!  stuck-receiver  the host's leaf port drains at --rate pkt/s and the  killing it, queue rate 0
//!                  host pauses it in 100 ms stretches every 500 ms
//!  loss            random loss both ways on the cable (user-space       killing the relays, the
//!                  relay in the wires namespace: no sch_netem needed)   tc redirects back
//!  slow            the switch port drains at --rate pkt/s (BMv2 queue   queue rate 0, tc qdisc del
//!                  rate: a port serialising slower) + tbf on the cable
//!  blackhole       the route deleted on the switch over P4Runtime with  re-inserting the saved
//!                  the plugin's election id (the plugin does not see)   entry
//!  incast          --senders hosts send --pps to the host (udp_probe);  killing them, queue rate 0
//!                  its leaf port runs at --line-pps
//!  reorder         --delay toward DST's leaf on one spine's cable (the   killing them, the
//!                  relay); RoCE traffic (weft-traffic) SRC → DST        tc redirect back
//! ```
//! Every fault is recorded in `<state-dir>/faults.json` with what undoes it, so `clear` (and
//! `down`) undo them all, also after the command that made them exited.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Result, State, TestbedError, io, kill, pid_alive, run, wires_netns};

/// What `weft testbed fault` can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    PfcStorm,
    StuckReceiver,
    Loss,
    Slow,
    Blackhole,
    Incast,
    Reorder,
    /// Show the faults in place.
    List,
    /// Undo every fault.
    Clear,
}

impl FaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::PfcStorm => "pfc-storm",
            FaultKind::StuckReceiver => "stuck-receiver",
            FaultKind::Loss => "loss",
            FaultKind::Slow => "slow",
            FaultKind::Blackhole => "blackhole",
            FaultKind::Incast => "incast",
            FaultKind::Reorder => "reorder",
            FaultKind::List => "list",
            FaultKind::Clear => "clear",
        }
    }
}

/// The knobs of the kinds (each kind reads its own).
#[derive(Debug, Clone)]
pub struct Params {
    pub priority: u8,
    pub percent: f64,
    pub rate_pps: u64,
    pub senders: u32,
    pub pps: u32,
    pub line_pps: u64,
    pub delay: Duration,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            priority: 3,
            percent: 10.0,
            rate_pps: 10,
            senders: 4,
            pps: 150,
            line_pps: 300,
            delay: Duration::from_millis(20),
        }
    }
}

/// One step that undoes part of a fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "undo", rename_all = "kebab-case")]
pub enum Undo {
    Kill {
        pid: u32,
        what: String,
    },
    /// `tc qdisc del dev DEV root` in `netns`.
    Qdisc {
        netns: String,
        dev: String,
    },
    /// BMv2 `set_queue_rate RATE PORT` on a switch: the port's emulated line rate again (0,
    /// in records of older testbeds: unlimited).
    QueueRate {
        switch: String,
        port_id: u32,
        #[serde(default)]
        rate: u64,
    },
    /// Re-insert a saved P4Runtime entity.
    Restore {
        switch: String,
        file: PathBuf,
    },
    /// Put back the tc redirect of a middle veth (`from` → `to`) in the wires namespace.
    Redirect {
        netns: String,
        from: String,
        to: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    /// What the fault hit, as the command named it (`leaf1-h1`, `leaf1:Ethernet8`, …).
    pub target: String,
    pub detail: String,
    pub started_unix_ms: f64,
    pub undo: Vec<Undo>,
}

fn faults_path(dir: &Path) -> PathBuf {
    dir.join("faults.json")
}

/// The faults in place.
pub fn list(dir: &Path) -> Vec<Fault> {
    fs::read_to_string(faults_path(dir))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn save(dir: &Path, faults: &[Fault]) -> Result<()> {
    let p = faults_path(dir);
    let text =
        serde_json::to_string_pretty(faults).map_err(|e| TestbedError::Other(e.to_string()))?;
    fs::write(&p, text).map_err(io(format!("writing {}", p.display())))
}

fn record(dir: &Path, f: Fault) -> Result<Fault> {
    let mut all = list(dir);
    all.push(f.clone());
    save(dir, &all)?;
    Ok(f)
}

fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Where BMv2's CLI and the Python with the `p4runtime` package are.
#[derive(Debug, Clone)]
pub struct Tools {
    pub bmv2_cli: PathBuf,
    pub p4rt_python: PathBuf,
    pub weft_traffic: PathBuf,
}

impl Tools {
    /// `simple_switch_CLI` next to BMv2 (PATH, /opt/p4/bin); the Python from `WEFT_P4RT_PYTHON`,
    /// else the repository's `.venv` (above the running binary, or above the working directory:
    /// a target directory outside the checkout), else `python3`; `weft-traffic` next to the
    /// running binary or on PATH.
    pub fn locate() -> Tools {
        let here = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let bmv2_cli = crate::find("simple_switch_CLI", &[Path::new("/opt/p4/bin")])
            .unwrap_or_else(|| PathBuf::from("simple_switch_CLI"));
        let cwd = std::env::current_dir().unwrap_or_default();
        let venv = here
            .ancestors()
            .chain(cwd.ancestors())
            .map(|a| a.join(".venv/bin/python"))
            .find(|p| p.exists());
        let p4rt_python = std::env::var_os("WEFT_P4RT_PYTHON")
            .map(PathBuf::from)
            .or(venv)
            .unwrap_or_else(|| PathBuf::from("python3"));
        let weft_traffic = crate::find("weft-traffic", &[&here, &here.join("..")])
            .unwrap_or_else(|| PathBuf::from("weft-traffic"));
        Tools {
            bmv2_cli,
            p4rt_python,
            weft_traffic,
        }
    }
}

/// The pfc storm script and the route script, written into the state directory.
pub const PFC_STORM: &str = include_str!("../../tests/scripts/pfc_storm.py");
pub const P4RT_ROUTE: &str = include_str!("../scripts/p4rt_route.py");
pub const WIRE_IMPAIR: &str = include_str!("../scripts/wire_impair.py");

/// One direction of a cable (frames arriving on middle veth `from`, leaving by `to`) through
/// the user-space relay instead of the tc redirect: the kernels the testbed runs on may lack
/// sch_netem (and every tc action but mirred).
fn impair(st: &State, from: &str, to: &str, args: &[String], undo: &mut Vec<Undo>) -> Result<()> {
    let ns = wires_netns(&st.fabric);
    let py = script(st, "wire_impair.py", WIRE_IMPAIR)?;
    run(&[
        "tc", "-n", &ns, "filter", "del", "dev", from, "parent", "ffff:",
    ])?;
    undo.push(Undo::Redirect {
        netns: ns.clone(),
        from: from.to_string(),
        to: to.to_string(),
    });
    let mut cmd: Vec<String> = [
        "ip", "netns", "exec", &ns, "python3", &py, "--in", from, "--out", to,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    cmd.extend(args.iter().cloned());
    undo.push(spawn_bg(st, &format!("wire {from}"), &cmd)?);
    Ok(())
}

fn script(st: &State, name: &str, text: &str) -> Result<String> {
    let p = st.state_dir.join(name);
    if !p.exists() {
        fs::write(&p, text).map_err(io(format!("writing {}", p.display())))?;
    }
    Ok(p.to_string_lossy().into_owned())
}

/// Starts a process that outlives this command (its output into the state directory).
fn spawn_bg(st: &State, what: &str, cmd: &[String]) -> Result<Undo> {
    let log = st
        .state_dir
        .join(format!("fault-{}.log", what.replace([' ', '/', ':'], "_")));
    let out = fs::File::create(&log).map_err(io(format!("creating {}", log.display())))?;
    let err = out.try_clone().map_err(io("log file"))?;
    let child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(io(format!("starting {}", cmd[0])))?;
    Ok(Undo::Kill {
        pid: child.id(),
        what: what.to_string(),
    })
}

fn host_ns<'a>(st: &'a State, host: &str) -> Result<&'a crate::HostState> {
    st.host(host)
        .ok_or_else(|| TestbedError::Other(format!("no host {host} in the testbed")))
}

/// `SW:PORT` → its switch and port, checked against the testbed.
fn switch_port(st: &State, target: &str) -> Result<(String, String)> {
    let (sw, port) = target
        .split_once(':')
        .ok_or_else(|| TestbedError::Other(format!("{target}: expected SWITCH:PORT")))?;
    let s = st
        .switch(sw)
        .ok_or_else(|| TestbedError::Other(format!("no switch {sw} in the testbed")))?;
    if !s.interfaces.contains_key(port) {
        return Err(TestbedError::Other(format!(
            "switch {sw} has no connected port {port}"
        )));
    }
    Ok((sw.to_string(), port.to_string()))
}

/// BMv2's port number of a switch port (its interface is `s<dev>p<id>`).
fn port_id(st: &State, sw: &str, port: &str) -> Result<u32> {
    st.switch(sw)
        .and_then(|s| s.interfaces.get(port))
        .and_then(|i| i.rsplit_once('p'))
        .and_then(|(_, id)| id.parse().ok())
        .ok_or_else(|| TestbedError::Other(format!("no BMv2 port for {sw}:{port}")))
}

/// The cable at an end, and which middle end faces it (index 0 = a, 1 = b).
fn wire_at<'a>(st: &'a State, node: &str, port: &str) -> Result<(&'a crate::WireState, usize)> {
    let at = (node.to_string(), port.to_string());
    st.wires
        .iter()
        .find_map(|w| {
            if w.a == at {
                Some((w, 0))
            } else if w.b == at {
                Some((w, 1))
            } else {
                None
            }
        })
        .ok_or_else(|| TestbedError::Other(format!("no cable at {node}:{port}")))
}

fn bmv2_cli(st: &State, tools: &Tools, sw: &str, line: &str) -> Result<()> {
    use std::io::Write;
    let s = st
        .switch(sw)
        .ok_or_else(|| TestbedError::Other(format!("no switch {sw}")))?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", &st.netns, "/usr/bin/python3"])
        .arg(&tools.bmv2_cli)
        .args(["--thrift-port", &s.thrift_port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io("starting simple_switch_CLI"))?;
    if let Some(mut i) = child.stdin.take() {
        let _ = writeln!(i, "{line}");
    }
    let out = child
        .wait_with_output()
        .map_err(io("running simple_switch_CLI"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || text.contains("Error") || text.contains("Could not connect") {
        return Err(TestbedError::Command {
            cmd: format!("{line} on {sw}"),
            stderr: text.trim().to_string(),
        });
    }
    Ok(())
}

fn set_rate(st: &State, tools: &Tools, sw: &str, port: &str, pps: u64) -> Result<Undo> {
    let id = port_id(st, sw, port)?;
    let rate = st.line_rate(sw, port).unwrap_or(0);
    bmv2_cli(st, tools, sw, &format!("set_queue_rate {pps} {id}"))?;
    Ok(Undo::QueueRate {
        switch: sw.to_string(),
        port_id: id,
        rate,
    })
}

fn qdisc(st: &State, dev: &str, spec: &str) -> Result<Undo> {
    let ns = wires_netns(&st.fabric);
    let mut cmd = vec!["tc", "-n", &ns, "qdisc", "replace", "dev", dev, "root"];
    cmd.extend(spec.split_whitespace());
    run(&cmd)?;
    Ok(Undo::Qdisc {
        netns: ns,
        dev: dev.to_string(),
    })
}

fn p4rt_route(st: &State, tools: &Tools, sw: &str, args: &[&str]) -> Result<String> {
    let s = st
        .switch(sw)
        .ok_or_else(|| TestbedError::Other(format!("no switch {sw}")))?;
    let py = script(st, "p4rt_route.py", P4RT_ROUTE)?;
    let t = weft_p4::tables::ipv4_table::ID.to_string();
    let f = weft_p4::tables::ipv4_table::fields::ipv4_dst::ID.to_string();
    let dev = s.device_id.to_string();
    let python = tools.p4rt_python.to_string_lossy().into_owned();
    let mut cmd: Vec<&str> = vec![
        "ip",
        "netns",
        "exec",
        &st.netns,
        "env",
        "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python",
        &python,
        &py,
        "--addr",
        &s.p4rt_address,
        "--device-id",
        &dev,
        "--table-id",
        &t,
        "--field-id",
        &f,
    ];
    cmd.extend(args);
    run(&cmd)
}

/// The IPv4 prefixes routed on a switch (read over P4Runtime).
pub fn routes(st: &State, tools: &Tools, sw: &str) -> Result<Vec<String>> {
    let text = p4rt_route(st, tools, sw, &["list"])?;
    serde_json::from_str(text.trim()).map_err(|e| TestbedError::Other(format!("routes: {e}")))
}

/// Injects one fault; returns what was recorded.
pub fn inject(
    st: &State,
    tools: &Tools,
    kind: FaultKind,
    targets: &[String],
    p: &Params,
) -> Result<Fault> {
    let n = match kind {
        FaultKind::PfcStorm
        | FaultKind::StuckReceiver
        | FaultKind::Loss
        | FaultKind::Slow
        | FaultKind::Incast => 1,
        FaultKind::Blackhole | FaultKind::Reorder => 2,
        FaultKind::List | FaultKind::Clear => return Err(not_a_fault(kind)),
    };
    if targets.len() != n {
        return Err(TestbedError::Other(format!(
            "{} takes {n} target(s), got {}",
            kind.as_str(),
            targets.len()
        )));
    }
    let mut undo = Vec::new();
    // On a failure half-way, what was done is undone.
    let done = match kind {
        FaultKind::PfcStorm | FaultKind::StuckReceiver => {
            pause_frames(st, tools, kind, targets, p, &mut undo)
        }
        FaultKind::Loss | FaultKind::Slow => impaired_cable(st, tools, kind, targets, p, &mut undo),
        FaultKind::Blackhole => blackhole(st, tools, targets, &mut undo),
        FaultKind::Incast => incast(st, tools, targets, p, &mut undo),
        FaultKind::Reorder => reorder(st, tools, targets, p, &mut undo),
        FaultKind::List | FaultKind::Clear => Err(not_a_fault(kind)),
    };
    match done {
        Ok((target, detail)) => record(
            &st.state_dir,
            Fault {
                kind,
                target,
                detail,
                started_unix_ms: now_ms(),
                undo,
            },
        ),
        Err(e) => {
            for u in undo.iter().rev() {
                let _ = apply_undo(st, tools, u);
            }
            Err(e)
        }
    }
}

fn not_a_fault(kind: FaultKind) -> TestbedError {
    TestbedError::Other(format!("{} is not a fault", kind.as_str()))
}

/// A PFC storm (PAUSE every 5 ms) from a host, or a stuck receiver (its leaf port drains
/// slowly and the host pauses it on and off).
fn pause_frames(
    st: &State,
    tools: &Tools,
    kind: FaultKind,
    targets: &[String],
    p: &Params,
    undo: &mut Vec<Undo>,
) -> Result<(String, String)> {
    let host = &targets[0];
    let h = host_ns(st, host)?;
    let py = script(st, "pfc_storm.py", PFC_STORM)?;
    let mut cmd: Vec<String> = ["ip", "netns", "exec", &h.netns, "python3", &py]
        .iter()
        .map(|s| s.to_string())
        .collect();
    cmd.extend(
        [
            "--iface",
            "eth0",
            "--priority",
            &p.priority.to_string(),
            "--quanta",
            "65535",
            "--seconds",
            "86400",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let detail = if kind == FaultKind::PfcStorm {
        cmd.extend(["--interval-ms".into(), "5".into()]);
        format!("PAUSE every 5 ms on priority {}", p.priority)
    } else {
        let (leaf, port) = st
            .wires
            .iter()
            .find_map(|w| (w.b.0 == *host).then(|| w.a.clone()))
            .ok_or_else(|| TestbedError::Other(format!("{host} has no cable")))?;
        undo.push(set_rate(st, tools, &leaf, &port, p.rate_pps)?);
        cmd.extend(
            ["--interval-ms", "10", "--on-ms", "100", "--off-ms", "400"]
                .iter()
                .map(|s| s.to_string()),
        );
        format!(
            "{leaf}:{port} drains at {} pkt/s; PAUSE on priority {} for 100 ms every 500 ms",
            p.rate_pps, p.priority
        )
    };
    // Onset is the first frame: wait for it (a loaded machine takes a while to
    // start Python), so what follows the command sees the fault.
    let ready = st.state_dir.join(format!("fault-{host}.ready"));
    let _ = fs::remove_file(&ready);
    cmd.extend(["--ready".to_string(), ready.to_string_lossy().into_owned()]);
    undo.push(spawn_bg(st, &format!("{} {host}", kind.as_str()), &cmd)?);
    crate::wait_for("the first PAUSE frame", Duration::from_secs(20), || {
        ready.exists()
    })?;
    let _ = fs::remove_file(&ready);
    Ok((host.clone(), detail))
}

/// Loss on both ways of a cable, or a slow port (drains at a rate, and a tbf toward its far
/// end).
fn impaired_cable(
    st: &State,
    tools: &Tools,
    kind: FaultKind,
    targets: &[String],
    p: &Params,
    undo: &mut Vec<Undo>,
) -> Result<(String, String)> {
    let (sw, port) = switch_port(st, &targets[0])?;
    let (w, side) = wire_at(st, &sw, &port)?;
    if kind == FaultKind::Loss {
        let args = vec!["--loss-percent".to_string(), p.percent.to_string()];
        impair(st, &w.middle[0], &w.middle[1], &args, undo)?;
        impair(st, &w.middle[1], &w.middle[0], &args, undo)?;
        Ok((
            format!("{sw}:{port}"),
            format!(
                "{}% loss both ways on the cable {}:{}–{}:{} (relays between {} and {})",
                p.percent, w.a.0, w.a.1, w.b.0, w.b.1, w.middle[0], w.middle[1]
            ),
        ))
    } else {
        undo.push(set_rate(st, tools, &sw, &port, p.rate_pps)?);
        // Toward the far end: out of the far end's middle veth.
        let far = &w.middle[1 - side];
        let bits = (p.rate_pps.max(1) * 1518 * 8).to_string();
        undo.push(qdisc(
            st,
            far,
            &format!("tbf rate {bits}bit burst 15180 latency 50ms"),
        )?);
        Ok((
            format!("{sw}:{port}"),
            format!(
                "{sw}:{port} drains at {} pkt/s; tbf {bits} bit/s on {far}",
                p.rate_pps
            ),
        ))
    }
}

/// A route deleted over P4Runtime (saved, to be written back).
fn blackhole(
    st: &State,
    tools: &Tools,
    targets: &[String],
    undo: &mut Vec<Undo>,
) -> Result<(String, String)> {
    let (sw, prefix) = (&targets[0], &targets[1]);
    let file = st
        .state_dir
        .join(format!("blackhole-{sw}-{}.txtpb", prefix.replace('/', "_")));
    let f = file.to_string_lossy().into_owned();
    p4rt_route(st, tools, sw, &["delete", prefix, "--save", &f])?;
    undo.push(Undo::Restore {
        switch: sw.clone(),
        file,
    });
    Ok((
        sw.clone(),
        format!("route {prefix} deleted on {sw} over P4Runtime"),
    ))
}

/// Senders on other hosts into one host's port, drained at line rate.
fn incast(
    st: &State,
    tools: &Tools,
    targets: &[String],
    p: &Params,
    undo: &mut Vec<Undo>,
) -> Result<(String, String)> {
    let host = &targets[0];
    let h = host_ns(st, host)?;
    let (leaf, port) = st
        .wires
        .iter()
        .find_map(|w| (w.b.0 == *host).then(|| w.a.clone()))
        .ok_or_else(|| TestbedError::Other(format!("{host} has no cable")))?;
    // Senders: the other hosts, those on other leaves first.
    let leaf_of = |n: &str| {
        st.wires
            .iter()
            .find_map(|w| (w.b.0 == n).then(|| w.a.0.clone()))
    };
    let mut others: Vec<&crate::HostState> = st.hosts.iter().filter(|x| x.name != *host).collect();
    others.sort_by_key(|x| (leaf_of(&x.name) == Some(leaf.clone()), x.name.clone()));
    let senders: Vec<&crate::HostState> = others.into_iter().take(p.senders as usize).collect();
    undo.push(set_rate(st, tools, &leaf, &port, p.line_pps)?);
    let probe = script(st, "udp_probe.py", crate::UDP_PROBE)?;
    let out = st.state_dir.join(format!("incast-{host}.json"));
    let recv: Vec<String> = [
        "ip",
        "netns",
        "exec",
        &h.netns,
        "python3",
        &probe,
        "recv",
        "--port",
        "5003",
        "--seconds",
        "86400",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([out.to_string_lossy().into_owned()])
    .collect();
    undo.push(spawn_bg(st, &format!("incast receiver {host}"), &recv)?);
    for s in &senders {
        let cmd: Vec<String> = [
            "ip",
            "netns",
            "exec",
            &s.netns,
            "python3",
            &probe,
            "send",
            "--dst",
            &h.ipv4,
            "--port",
            "5003",
            "--tos",
            "106",
            "--pps",
            &p.pps.to_string(),
            "--seconds",
            "86400",
            "--flows",
            "8",
            "--size",
            "512",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        undo.push(spawn_bg(st, &format!("incast sender {}", s.name), &cmd)?);
    }
    Ok((
        host.clone(),
        format!(
            "{} senders ({}) × {} pkt/s RoCE class into {leaf}:{port} at {} pkt/s",
            senders.len(),
            senders
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
            p.pps,
            p.line_pps
        ),
    ))
}

/// Extra delay on one uplink of the destination's leaf while RoCE traffic flows to it.
fn reorder(
    st: &State,
    tools: &Tools,
    targets: &[String],
    p: &Params,
    undo: &mut Vec<Undo>,
) -> Result<(String, String)> {
    let (src, dst) = (&targets[0], &targets[1]);
    let (hs, hd) = (host_ns(st, src)?, host_ns(st, dst)?);
    let dst_leaf = st
        .wires
        .iter()
        .find_map(|w| (w.b.0 == *dst).then(|| w.a.0.clone()))
        .ok_or_else(|| TestbedError::Other(format!("{dst} has no cable")))?;
    // The first uplink cable of DST's leaf: delay what flows toward the leaf.
    let up = crate::uplinks(st, &dst_leaf);
    let port = up
        .first()
        .ok_or_else(|| TestbedError::Other(format!("{dst_leaf} has no uplink")))?;
    let (w, side) = wire_at(st, &dst_leaf, port)?;
    let ms = p.delay.as_secs_f64() * 1e3;
    let args = vec!["--delay-ms".to_string(), ms.to_string()];
    impair(st, &w.middle[1 - side], &w.middle[side], &args, undo)?;
    // RoCE traffic SRC → DST (BTH, so the leaf tracks PSNs).
    let bytes = (1024u64 * 200 * 86400).to_string();
    let tr = tools.weft_traffic.to_string_lossy().into_owned();
    let common = [
        "--bytes",
        &bytes,
        "--rate-pps",
        "200",
        "--mtu",
        "1024",
        "--deadline-ms",
        "86400000",
    ];
    let recv: Vec<String> = [
        "ip", "netns", "exec", &hd.netns, &tr, "recv", "--bind", &hd.ipv4, "--from", &hs.ipv4,
    ]
    .iter()
    .chain(common.iter())
    .map(|s| s.to_string())
    .collect();
    undo.push(spawn_bg(st, &format!("reorder receiver {dst}"), &recv)?);
    std::thread::sleep(Duration::from_millis(300));
    let send: Vec<String> = [
        "ip", "netns", "exec", &hs.netns, &tr, "send", "--bind", &hs.ipv4, "--to", &hd.ipv4,
    ]
    .iter()
    .chain(common.iter())
    .map(|s| s.to_string())
    .collect();
    undo.push(spawn_bg(st, &format!("reorder sender {src}"), &send)?);
    Ok((
        dst.clone(),
        format!("{ms} ms extra delay toward {dst_leaf}:{port}; RoCE {src} → {dst} 200 pkt/s"),
    ))
}

fn apply_undo(st: &State, tools: &Tools, u: &Undo) -> Result<String> {
    match u {
        Undo::Kill { pid, what } => {
            if pid_alive(*pid) {
                kill(*pid, "-TERM");
                let t0 = std::time::Instant::now();
                while pid_alive(*pid) && t0.elapsed() < Duration::from_secs(3) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if pid_alive(*pid) {
                    kill(*pid, "-KILL");
                }
            }
            Ok(format!("stopped {what} (pid {pid})"))
        }
        Undo::Qdisc { netns, dev } => {
            run(&["tc", "-n", netns, "qdisc", "del", "dev", dev, "root"])?;
            Ok(format!("removed the qdisc of {dev}"))
        }
        Undo::QueueRate {
            switch,
            port_id,
            rate,
        } => {
            bmv2_cli(
                st,
                tools,
                switch,
                &format!("set_queue_rate {rate} {port_id}"),
            )?;
            Ok(format!(
                "{switch} port {port_id} drains at its line rate again ({rate} pkt/s, 0: unlimited)"
            ))
        }
        Undo::Redirect { netns, from, to } => {
            run(&[
                "tc", "-n", netns, "filter", "add", "dev", from, "parent", "ffff:", "protocol",
                "all", "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect",
                "dev", to,
            ])?;
            Ok(format!("{from} → {to} redirected in the kernel again"))
        }
        Undo::Restore { switch, file } => {
            let f = file.to_string_lossy().into_owned();
            let out = p4rt_route(st, tools, switch, &["restore", &f])?;
            let _ = fs::remove_file(file);
            Ok(format!("{switch}: {}", out.trim()))
        }
    }
}

/// Undoes every recorded fault, newest first; what could not be undone stays recorded.
pub fn clear(st: &State, tools: &Tools) -> Result<Vec<String>> {
    let mut done = Vec::new();
    let mut left = Vec::new();
    let mut faults = list(&st.state_dir);
    while let Some(mut f) = faults.pop() {
        let mut failed = Vec::new();
        for u in f.undo.iter().rev() {
            match apply_undo(st, tools, u) {
                Ok(line) => done.push(line),
                Err(e) => {
                    done.push(format!("could not undo {u:?}: {e}"));
                    failed.push(u.clone());
                }
            }
        }
        if !failed.is_empty() {
            failed.reverse();
            f.undo = failed;
            left.push(f);
        }
    }
    save(&st.state_dir, &left)?;
    if left.is_empty() {
        let _ = fs::remove_file(faults_path(&st.state_dir));
    }
    Ok(done)
}

/// For `down`: kill what faults started (namespaces go with the testbed; nothing else to undo).
pub fn stop_processes(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for f in list(dir) {
        for u in &f.undo {
            if let Undo::Kill { pid, what } = u
                && pid_alive(*pid)
            {
                kill(*pid, "-KILL");
                out.push(format!("killed {what} (pid {pid})"));
            }
        }
    }
    let _ = fs::remove_file(faults_path(dir));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Tools {
        Tools {
            bmv2_cli: PathBuf::from("/nonexistent/simple_switch_CLI"),
            p4rt_python: PathBuf::from("/nonexistent/python3"),
            weft_traffic: PathBuf::from("/nonexistent/weft-traffic"),
        }
    }

    #[test]
    fn a_fault_takes_its_number_of_targets_and_list_and_clear_are_none() {
        let dir = std::path::Path::new("/nonexistent-weft-state");
        let st = crate::fixtures::state(dir);
        let p = Params::default();
        let e = inject(&st, &tools(), FaultKind::Blackhole, &["leaf1".into()], &p)
            .expect_err("one target");
        assert_eq!(e.to_string(), "blackhole takes 2 target(s), got 1");
        let e = inject(&st, &tools(), FaultKind::Loss, &[], &p).expect_err("no target");
        assert_eq!(e.to_string(), "loss takes 1 target(s), got 0");
        let e = inject(&st, &tools(), FaultKind::List, &[], &p).expect_err("not a fault");
        assert_eq!(e.to_string(), "list is not a fault");
    }

    #[test]
    fn a_fault_on_something_the_testbed_lacks_is_refused_and_nothing_recorded() {
        let dir = std::env::temp_dir().join(format!("weft-testbed-fault-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let st = crate::fixtures::state(&dir);
        let p = Params::default();
        assert!(inject(&st, &tools(), FaultKind::PfcStorm, &["h9".into()], &p).is_err());
        assert!(
            inject(
                &st,
                &tools(),
                FaultKind::Loss,
                &["leaf1:Ethernet8".into()],
                &p
            )
            .is_err()
        );
        assert!(
            inject(
                &st,
                &tools(),
                FaultKind::Reorder,
                &["h1".into(), "h9".into()],
                &p
            )
            .is_err()
        );
        assert!(list(&dir).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
