//! How each switch's P4RT entries reach its consumer: the transport (`redis`, the default, or
//! SONiC's `zmq` channel with its endpoint) and the consumer (`weft`, the default, or SONiC's
//! own `sonic` p4orch), per switch or under `fabric.defaults`. Runs after allocation: a ZMQ
//! endpoint left out is put beside the switch's generated DB socket.

use std::collections::HashMap;

use super::ctx::{Ctx, Draft};
use super::endpoints::{self, check_host_port};
use crate::model::{Defaults, P4rtTransport, SwitchSpec};
use crate::names::display_name;
use crate::topo::{Switch, Transport};

/// The file name of a switch's ipc endpoint, beside its DB socket or under a defaults directory.
pub const ZMQ_SOCKET_NAME: &str = "p4rt_zmq.sock";

/// Why a ZMQ endpoint is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZmqEndpointError {
    #[error("expected tcp://HOST:PORT or ipc:///path")]
    Form,
    #[error(transparent)]
    Address(#[from] endpoints::AddressError),
    #[error(transparent)]
    SocketPath(#[from] endpoints::SocketPathError),
}

/// A ZMQ endpoint a switch's consumer can bind and the controller connect to: `tcp://HOST:PORT`
/// or `ipc:///absolute/path` (the forms swss-common names).
pub fn check_zmq_endpoint(s: &str) -> Result<(), ZmqEndpointError> {
    if let Some(hp) = s.strip_prefix("tcp://") {
        check_host_port(hp)?;
        return Ok(());
    }
    if let Some(path) = s.strip_prefix("ipc://") {
        endpoints::check_socket_path(path)?;
        return Ok(());
    }
    Err(ZmqEndpointError::Form)
}

/// The endpoint `fabric.defaults.zmq_endpoint` gives switch number `i` (from 0) named `name`.
fn from_defaults(base: &str, i: usize, name: &str) -> Option<String> {
    if let Some(hp) = base.strip_prefix("tcp://") {
        let (host, port) = check_host_port(hp).ok()?;
        let port = u32::from(port) + i as u32;
        return (port <= 65535).then(|| format!("tcp://{host}:{port}"));
    }
    let dir = base.strip_prefix("ipc://")?.trim_end_matches('/');
    Some(format!("ipc://{dir}/{name}/{ZMQ_SOCKET_NAME}"))
}

/// Beside a switch's DB socket, when its DB is one.
fn beside_db(db: &str) -> Option<String> {
    let path = db.strip_prefix("unix://").unwrap_or(db);
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    if !path.starts_with('/') {
        return None;
    }
    let (dir, _) = path.rsplit_once('/')?;
    Some(format!("ipc://{dir}/{ZMQ_SOCKET_NAME}"))
}

/// Every switch that has no ZMQ endpoint gets one beside its DB socket, where it has one (the
/// testbed's and the controller's `--transport zmq`): what `fabric.defaults.p4rt_transport:
/// zmq` would give. Returns the switches left on Redis because their DB is not a socket path
/// (no place to put an endpoint: the intent must name one).
pub fn serve_zmq(t: &mut crate::Topology) -> Vec<String> {
    let mut left = Vec::new();
    for s in &mut t.switches {
        if !s.transport.is_redis() {
            continue;
        }
        match beside_db(&s.db) {
            Some(endpoint) => s.transport = Transport::Zmq { endpoint },
            None => left.push(s.name.clone()),
        }
    }
    left
}

/// Every switch's entries over Redis, whatever the intent says (`--transport redis`: the
/// fallback when a ZMQ endpoint does not answer; the plugins consume APPL_DB either way).
pub fn use_redis(t: &mut crate::Topology) {
    for s in &mut t.switches {
        s.transport = Transport::Redis;
    }
}

pub(super) fn resolve_transport(
    cx: &mut Ctx,
    d: &Defaults,
    drafts: &[Draft<SwitchSpec>],
    switches: &mut [Switch],
) {
    let dpath = "fabric.defaults.zmq_endpoint";
    let defaults_ok = match &d.zmq_endpoint {
        Some(e) => match check_zmq_endpoint(e)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                if e.starts_with("ipc://") || from_defaults(e, 0, "x").is_some() {
                    Ok(())
                } else {
                    Err("no port".into())
                }
            }) {
            Ok(()) => true,
            Err(why) => {
                cx.err_help(
                    dpath,
                    dpath,
                    format!("{e:?} is not a ZMQ endpoint: {why}"),
                    "write tcp://HOST:BASE (switch N gets BASE+N-1) or ipc:///DIR (switch S gets ipc:///DIR/S/p4rt_zmq.sock)",
                );
                false
            }
        },
        None => true,
    };
    let mut used: HashMap<String, usize> = HashMap::new();
    for (i, (dr, s)) in drafts.iter().zip(switches.iter_mut()).enumerate() {
        let spec = &dr.spec;
        let item = || format!("switch {}", display_name(&s.name));
        s.consumer = spec.consumer.or(d.consumer).unwrap_or_default();
        let kind = spec.p4rt_transport.or(d.p4rt_transport).unwrap_or_default();
        let epath = format!("{}.zmq_endpoint", dr.origin);
        if kind == P4rtTransport::Redis {
            if spec.zmq_endpoint.is_some() {
                cx.err_help(
                    &epath,
                    item(),
                    "zmq_endpoint is set but the switch's p4rt_transport is redis",
                    "add `p4rt_transport: zmq` (here or under fabric.defaults), or remove zmq_endpoint",
                );
            }
            s.transport = Transport::Redis;
            continue;
        }
        let endpoint = match &spec.zmq_endpoint {
            Some(e) => {
                if let Err(why) = check_zmq_endpoint(e) {
                    cx.err(
                        &epath,
                        item(),
                        format!("{e:?} is not a ZMQ endpoint: {why}"),
                    );
                    continue;
                }
                Some(e.clone())
            }
            None => match &d.zmq_endpoint {
                Some(base) if defaults_ok => from_defaults(base, i, &s.name),
                Some(_) => continue,
                None => beside_db(&s.db),
            },
        };
        let Some(endpoint) = endpoint else {
            cx.err_help(
                &dr.origin,
                item(),
                "p4rt_transport is zmq but no ZMQ endpoint is known (the switch's DB is not a local socket to put one beside)",
                "add zmq_endpoint: tcp://HOST:PORT (or ipc:///path) to the switch, or a base under fabric.defaults",
            );
            continue;
        };
        if let Some(path) = endpoint.strip_prefix("ipc://")
            && let Err(why) = endpoints::check_socket_path(path)
        {
            cx.err(&epath, item(), format!("ZMQ endpoint {endpoint}: {why}"));
            continue;
        }
        if let Some(&first) = used.get(&endpoint) {
            cx.err(
                &epath,
                item(),
                format!(
                    "ZMQ endpoint {endpoint} is also switch {}'s",
                    display_name(&drafts[first].spec.name)
                ),
            );
            continue;
        }
        used.insert(endpoint.clone(), i);
        s.transport = Transport::Zmq { endpoint };
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors, valid};
    use super::*;
    use crate::topo::Consumer;

    #[test]
    fn redis_and_weft_unless_the_intent_says_otherwise() {
        let t = valid(SMALL);
        assert!(t.switches.iter().all(|s| s.transport == Transport::Redis));
        assert!(t.switches.iter().all(|s| s.consumer == Consumer::Weft));
    }

    #[test]
    fn zmq_in_defaults_puts_each_endpoint_beside_the_switch_db_socket() {
        let t = valid(&format!(
            "fabric:\n  defaults:\n    p4rt_transport: zmq\n    consumer: sonic\n{SMALL}"
        ));
        let leaf1 = &t.switches[t.switch_by_name["leaf1"]];
        assert_eq!(
            leaf1.transport.zmq_endpoint(),
            Some("ipc:///run/weft/fabric/leaf1/p4rt_zmq.sock")
        );
        assert_eq!(leaf1.consumer, Consumer::Sonic);
    }

    #[test]
    fn serve_zmq_gives_every_redis_switch_what_zmq_in_defaults_would_and_names_those_it_cannot() {
        let by_defaults = valid(&format!(
            "fabric:\n  defaults:\n    p4rt_transport: zmq\n{SMALL}"
        ));
        let mut t = valid(SMALL);
        assert!(serve_zmq(&mut t).is_empty());
        for (a, b) in t.switches.iter().zip(&by_defaults.switches) {
            assert_eq!(a.transport, b.transport, "{}", a.name);
        }
        // A DB over TCP leaves no socket directory to put the endpoint in.
        t.switches[0].db = "redis://127.0.0.1:6380".into();
        t.switches[0].transport = Transport::Redis;
        assert_eq!(serve_zmq(&mut t), vec![t.switches[0].name.clone()]);
        assert!(t.switches[0].transport.is_redis());
        use_redis(&mut t);
        assert!(t.switches.iter().all(|s| s.transport.is_redis()));
    }

    #[test]
    fn a_tcp_base_in_defaults_gives_switch_n_base_plus_n_minus_one_and_a_switch_may_say_otherwise()
    {
        let yaml = format!(
            "fabric:\n  defaults:\n    p4rt_transport: zmq\n    zmq_endpoint: tcp://127.0.0.1:8100\n{}",
            SMALL.replacen(
                "  - name: leaf1\n",
                "  - name: leaf1\n    p4rt_transport: redis\n",
                1
            )
        );
        let t = valid(&yaml);
        let eps: Vec<Option<&str>> = t
            .switches
            .iter()
            .map(|s| s.transport.zmq_endpoint())
            .collect();
        assert_eq!(
            eps,
            vec![
                Some("tcp://127.0.0.1:8100"),
                None,
                Some("tcp://127.0.0.1:8102")
            ]
        );
    }

    /// SMALL with `extra` lines under switch `name`.
    fn with(name: &str, extra: &str) -> String {
        let at = format!("  - name: {name}\n");
        SMALL.replacen(&at, &format!("{at}{extra}"), 1)
    }

    #[test]
    fn a_bad_or_shared_or_orphan_endpoint_is_refused_where_written() {
        let shared = "    p4rt_transport: zmq\n    zmq_endpoint: tcp://10.0.0.1:8100\n";
        let yaml = with("spine1", shared).replacen(
            "  - name: leaf1\n",
            &format!("  - name: leaf1\n{shared}"),
            1,
        );
        let yaml = yaml.replacen(
            "  - name: leaf2\n",
            "  - name: leaf2\n    zmq_endpoint: tcp://10.0.0.2:8100\n",
            1,
        );
        let e = errors(&yaml);
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].contains("is also switch spine1's"), "{e:?}");
        assert!(
            e[1].contains("zmq_endpoint is set but the switch's p4rt_transport is redis"),
            "{e:?}"
        );
        let e = errors(&with(
            "spine1",
            "    p4rt_transport: zmq\n    zmq_endpoint: ipc://relative\n",
        ));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("is not a ZMQ endpoint"), "{e:?}");
    }

    #[test]
    fn a_generated_switch_takes_the_transport_and_consumer_written_for_it() {
        let yaml = "generators:\n  - kind: leaf-spine\n    spines: 1\n    leaves: 2\n    hosts_per_leaf: 1\nswitches:\n  - name: leaf1\n    consumer: sonic\n    p4rt_transport: zmq\n    zmq_endpoint: tcp://127.0.0.1:8100\n";
        let t = valid(yaml);
        let leaf1 = &t.switches[t.switch_by_name["leaf1"]];
        assert_eq!(leaf1.consumer, Consumer::Sonic);
        assert_eq!(leaf1.transport.zmq_endpoint(), Some("tcp://127.0.0.1:8100"));
        let leaf2 = &t.switches[t.switch_by_name["leaf2"]];
        assert_eq!(leaf2.consumer, Consumer::Weft);
        assert!(leaf2.transport.is_redis());
    }

    #[test]
    fn zmq_without_a_local_db_socket_needs_an_endpoint() {
        let e = errors(&with(
            "spine1",
            "    p4rt_transport: zmq\n    db: redis://127.0.0.1:6379\n",
        ));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("no ZMQ endpoint is known"), "{e:?}");
    }
}
