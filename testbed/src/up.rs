//! `up` and `down`: namespaces, cables and host interfaces, then the switches' processes; and
//! everything removed again, from the state file or from the namespace names.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use weft_topology::{Host, Topology};

use crate::claims::{Claims, STATE_ROOT, conflicts, in_use, live_testbeds};
use crate::error::{Result, TestbedError, io};
use crate::exec::{kill, pid_alive, run};
use crate::fault;
use crate::names::{fabric_netns, host_netns, iface, netns_exists, unix_path, wires_netns};
use crate::programs::Programs;
use crate::state::{HostState, State, WireState};
use crate::switches::{UpOptions, start_switches};
use crate::wires::WireCommands;

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
    check_free(t, opts)?;
    fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let mut st = State {
        fabric: t.name.clone(),
        netns: ns.clone(),
        state_dir: dir.clone(),
        processes: Vec::new(),
        switches: Vec::new(),
        hosts: Vec::new(),
        wires: Vec::new(),
        made_dirs: Vec::new(),
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

/// Refuses a testbed that would take a socket, port or namespace another live testbed holds
/// (naming it), or that something else already serves.
fn check_free(t: &Topology, opts: &UpOptions) -> Result<()> {
    let mine = Claims::of_topology(t, opts.db_only);
    let root = Path::new(STATE_ROOT);
    let mut roots = vec![root];
    if let Some(parent) = opts.state_dir.parent().filter(|p| *p != root) {
        roots.push(parent);
    }
    let taken = conflicts(&mine, &live_testbeds(&roots, &opts.state_dir));
    let busy = if taken.is_empty() {
        in_use(&mine)
    } else {
        Vec::new()
    };
    if taken.is_empty() && busy.is_empty() {
        return Ok(());
    }
    let why = if taken.is_empty() {
        format!("already in use: {}", busy.join("; "))
    } else {
        format!("another testbed runs there: {}", taken.join("; "))
    };
    Err(TestbedError::Other(format!(
        "testbed {} not started: {why}. Each fabric needs its own sockets: leave `fabric.defaults.db_socket_dir` out (sockets go to /run/weft/{}/) or give this intent a directory of its own",
        t.name, t.name
    )))
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
    let wires_ns = wires_netns(&t.name);
    run(&["ip", "netns", "add", &wires_ns])?;
    st.save()?;
    let interfaces = lay_cables(t, st)?;
    for (hi, h) in t.hosts.iter().enumerate() {
        for c in host_commands(t, hi, h) {
            let c: Vec<&str> = c.iter().map(String::as_str).collect();
            run(&c)?;
        }
    }
    start_switches(t, programs, opts, st, &interfaces)
}

/// Every cable, and a namespace per host: returns each switch's interfaces (SONiC port name →
/// interface in the fabric namespace).
fn lay_cables(t: &Topology, st: &mut State) -> Result<Vec<BTreeMap<String, String>>> {
    let ns = st.netns.clone();
    let wires_ns = wires_netns(&t.name);
    let mtu = t.mtu.to_string();
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
    Ok(interfaces)
}

/// The commands that set up host `hi`'s interface (`h<hi>` until renamed `eth0`) in its
/// namespace: its MAC, a /32 (and /128) with an on-link default route to the leaf's router MAC
/// (a static neighbour), no DAD, no router solicitations, software checksums.
pub fn host_commands(t: &Topology, hi: usize, h: &Host) -> Vec<Vec<String>> {
    let sw = &t.switches[h.switch];
    let tmp = format!("h{hi}");
    let hns = host_netns(&t.name, &h.name);
    let gw_mac = sw.router_mac.to_string();
    let (mac, addr, gw) = (
        h.mac.to_string(),
        format!("{}/32", h.ipv4),
        h.gateway_v4.to_string(),
    );
    let strings = |c: &[&str]| c.iter().map(|a| a.to_string()).collect::<Vec<String>>();
    let mut out: Vec<Vec<String>> = [
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
    ]
    .iter()
    .map(|c| strings(c))
    .collect();
    if let (Some(a6), Some(g6)) = (h.ipv6, h.gateway_v6) {
        out.extend(
            [
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
            ]
            .iter()
            .map(|c| strings(c)),
        );
    }
    out
}

/// The testbed's sockets and the directories its `up` made for them, never what another live
/// testbed holds (a state file of an older weft does not say which directories it made: then
/// the socket's directory and its parent, when empty, as before).
fn remove_sockets(st: &State, state_dir: &Path, done: &mut Vec<String>) {
    let others = live_testbeds(&[Path::new(STATE_ROOT)], state_dir);
    let held: std::collections::BTreeSet<std::path::PathBuf> = others
        .iter()
        .flat_map(|o| Claims::of_state(o).sockets)
        .collect();
    for sw in &st.switches {
        let Some(sock) = unix_path(&sw.db) else {
            continue;
        };
        if held.contains(&sock) {
            done.push(format!(
                "left {}: another running testbed uses it",
                sock.display()
            ));
            continue;
        }
        let _ = fs::remove_file(&sock);
        if st.made_dirs.is_empty() {
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
    // Deepest first: a switch's directory before the fabric's.
    let mut made = st.made_dirs.clone();
    made.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in made {
        if fs::remove_dir(&d).is_ok() {
            done.push(format!("removed {}", d.display()));
        }
    }
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
        remove_sockets(st, state_dir, &mut done);
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const FABRIC: &str = "fabric: {name: lab, pools: {hosts_v6: 'fd00::/48'}}
switches:
  - {name: s1, role: spine, ports: [{name: Ethernet0}]}
  - {name: l1, role: leaf, ports: [{name: Ethernet0}, {name: Ethernet4}]}
links:
  - {a: l1:Ethernet4, b: s1:Ethernet0}
hosts:
  - {name: h1, attach: l1:Ethernet0}
";

    #[test]
    fn a_host_gets_its_address_and_a_route_to_its_leaf_router_mac() {
        let t = weft_topology::load_str(FABRIC, "lab.yaml").expect("intent");
        let h = &t.hosts[0];
        let cmds: Vec<String> = host_commands(&t, 0, h)
            .iter()
            .map(|c| c.join(" "))
            .collect();
        let mac = t.switches[1].router_mac.to_string();
        let want = [
            "ip -n weft-lab:h1 link set h0 name eth0".to_string(),
            format!("ip -n weft-lab:h1 link set eth0 address {}", h.mac),
            format!("ip -n weft-lab:h1 addr add {}/32 dev eth0", h.ipv4),
            format!(
                "ip -n weft-lab:h1 neigh replace {} lladdr {mac} dev eth0 nud permanent",
                h.gateway_v4
            ),
            format!(
                "ip -n weft-lab:h1 route add default via {} dev eth0 onlink",
                h.gateway_v4
            ),
            format!(
                "ip -n weft-lab:h1 -6 addr add {}/128 dev eth0 nodad",
                h.ipv6.expect("IPv6 from the pool")
            ),
        ];
        for w in want {
            assert!(cmds.contains(&w), "{w} not in {cmds:#?}");
        }
        assert_eq!(cmds.len(), 12);
    }

    #[test]
    fn a_testbed_that_exists_is_not_made_again() {
        let dir = std::env::temp_dir().join(format!("weft-testbed-up-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let t = weft_topology::load_str(FABRIC, "lab.yaml").expect("intent");
        crate::fixtures::state(&dir).save().expect("save");
        let opts = UpOptions {
            state_dir: dir.clone(),
            plugin_args: Vec::new(),
            db_only: true,
            acl: false,
            tls: false,
        };
        let programs = Programs {
            bmv2: PathBuf::new(),
            redis: PathBuf::from("/nonexistent/redis-server"),
            plugin: PathBuf::new(),
        };
        let e = up(&t, &programs, &opts).expect_err("exists");
        assert!(
            e.to_string().starts_with("testbed lab already exists"),
            "{e}"
        );
        // Nothing was started or removed: the state file is still there.
        assert!(State::path(&dir).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
