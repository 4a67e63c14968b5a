//! What a testbed takes on this machine, so two testbeds never take the same: each switch's DB
//! socket or TCP port, and the namespaces. `up` refuses to start when another live testbed
//! (a state file whose processes run) claims one of them, naming that testbed, or when
//! something else already serves one; `down` removes only the socket directories its own
//! `up` made; `status` asks every switch's DB to answer.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use weft_topology::Topology;

use crate::exec::pid_alive;
use crate::names::{fabric_netns, host_netns, netns_exists, tcp_port, unix_path, wires_netns};
use crate::state::State;

/// Where testbeds keep their state unless told otherwise: every live testbed is found here.
pub const STATE_ROOT: &str = "/run/weft/testbed";

/// The sockets, TCP ports and namespaces of one testbed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claims {
    pub sockets: BTreeSet<PathBuf>,
    pub ports: BTreeSet<u16>,
    pub namespaces: BTreeSet<String>,
}

impl Claims {
    fn add_db(&mut self, db: &str) {
        if let Some(p) = unix_path(db) {
            self.sockets.insert(p);
        } else if let Some(p) = tcp_port(db) {
            self.ports.insert(p);
        }
    }

    /// What `up` of `t` would take.
    pub fn of_topology(t: &Topology, db_only: bool) -> Claims {
        let mut c = Claims::default();
        for s in &t.switches {
            c.add_db(&s.db);
        }
        if !db_only {
            c.namespaces.insert(fabric_netns(&t.name));
            c.namespaces.insert(wires_netns(&t.name));
            for h in &t.hosts {
                c.namespaces.insert(host_netns(&t.name, &h.name));
            }
        }
        c
    }

    /// What a running testbed took.
    pub fn of_state(st: &State) -> Claims {
        let mut c = Claims::default();
        for s in &st.switches {
            c.add_db(&s.db);
        }
        if !st.db_only() {
            c.namespaces.insert(st.netns.clone());
            c.namespaces.insert(wires_netns(&st.fabric));
        }
        for h in &st.hosts {
            c.namespaces.insert(h.netns.clone());
        }
        c
    }

    /// What both claim, one line each.
    pub fn overlap(&self, other: &Claims) -> Vec<String> {
        let mut out: Vec<String> = self
            .sockets
            .intersection(&other.sockets)
            .map(|s| format!("socket {}", s.display()))
            .collect();
        out.extend(
            self.ports
                .intersection(&other.ports)
                .map(|p| format!("TCP port {p}")),
        );
        out.extend(
            self.namespaces
                .intersection(&other.namespaces)
                .map(|n| format!("namespace {n}")),
        );
        out
    }
}

/// Every testbed with a state file in a directory under one of `roots` that still runs a
/// process, but the one in `except`.
pub fn live_testbeds(roots: &[&Path], except: &Path) -> Vec<State> {
    let dirs: Vec<PathBuf> = roots
        .iter()
        .flat_map(|root| {
            std::fs::read_dir(root)
                .map(|rd| rd.flatten().map(|e| e.path()).collect::<Vec<_>>())
                .unwrap_or_default()
        })
        .collect();
    let except = except
        .canonicalize()
        .unwrap_or_else(|_| except.to_path_buf());
    let mut seen = BTreeSet::new();
    dirs.into_iter()
        .filter(|d| d.canonicalize().unwrap_or_else(|_| d.clone()) != except)
        .filter_map(|d| State::load(&d).ok())
        .filter(|st| seen.insert(st.state_dir.clone()))
        .filter(|st| st.processes.iter().any(|p| pid_alive(p.pid)))
        .collect()
}

/// Why `mine` cannot start beside the live testbeds `others`: one line per testbed whose
/// claims overlap, naming it and what both want. Pure.
pub fn conflicts(mine: &Claims, others: &[State]) -> Vec<String> {
    others
        .iter()
        .filter_map(|st| {
            let both = mine.overlap(&Claims::of_state(st));
            (!both.is_empty()).then(|| {
                format!(
                    "testbed {} (state {}) has {}",
                    st.fabric,
                    st.state_dir.display(),
                    both.join(", ")
                )
            })
        })
        .collect()
}

/// Whether something answers on a Unix socket (a server, whoever started it).
pub fn socket_answers(p: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(p).is_ok()
}

/// Whether a loopback TCP port is taken.
fn port_taken(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_err()
}

/// What of `mine` something outside any testbed already serves or holds, one line each.
pub fn in_use(mine: &Claims) -> Vec<String> {
    let mut out: Vec<String> = mine
        .sockets
        .iter()
        .filter(|s| socket_answers(s))
        .map(|s| format!("socket {} (something answers on it)", s.display()))
        .collect();
    out.extend(
        mine.ports
            .iter()
            .filter(|p| port_taken(**p))
            .map(|p| format!("TCP port {p} (in use)")),
    );
    out.extend(
        mine.namespaces
            .iter()
            .filter(|n| netns_exists(n))
            .map(|n| format!("namespace {n} (exists)")),
    );
    out
}

/// Whether a switch's DB answers PING: its redis-server runs *and* is reachable where the
/// intent says (a socket removed behind its back leaves the process running and unreachable).
pub fn db_answers(db: &str) -> bool {
    use std::io::{Read, Write};
    let ping = |s: &mut dyn ReadWrite| {
        let mut buf = [0u8; 16];
        s.write_all(b"PING\r\n").is_ok()
            && s.read(&mut buf)
                .is_ok_and(|n| buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"))
    };
    trait ReadWrite: Read + Write {}
    impl<T: Read + Write> ReadWrite for T {}
    let timeout = Some(Duration::from_secs(2));
    if let Some(p) = unix_path(db) {
        return std::os::unix::net::UnixStream::connect(p).is_ok_and(|mut s| {
            let _ = s.set_read_timeout(timeout);
            ping(&mut s)
        });
    }
    if let Some(port) = tcp_port(db) {
        return std::net::TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
            let _ = s.set_read_timeout(timeout);
            ping(&mut s)
        });
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn a_testbed_whose_sockets_another_holds_is_told_which_and_whose() {
        let dir = Path::new("/nonexistent/a");
        let a = fixtures::state(dir);
        let mine = Claims::of_state(&a);
        let c = conflicts(&mine, std::slice::from_ref(&a));
        assert_eq!(c.len(), 1);
        assert!(
            c[0].starts_with(&format!(
                "testbed {} (state /nonexistent/a) has socket",
                a.fabric
            )),
            "{c:?}"
        );
        let mut other = a.clone();
        for s in &mut other.switches {
            s.db = format!("unix:///elsewhere/{}/redis.sock", s.name);
        }
        other.netns = "weft-other".into();
        other.fabric = "other".into();
        for h in &mut other.hosts {
            h.netns = format!("weft-other:{}", h.name);
        }
        assert!(conflicts(&mine, &[other]).is_empty(), "nothing shared");
    }
}
