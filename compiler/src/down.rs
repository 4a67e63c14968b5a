//! Links taken down by name: `--down SWITCH:PORT` (either end of a switch-to-switch link), as
//! `weft plan`, `weft apply`, `weft simulate` and the testbed's workloads take them, and the
//! link state they give the compiler.

use std::collections::BTreeSet;

use weft_topology::{LinkIdx, Peer, PortRef, Topology};

use crate::LinkState;

/// Why a `--down` reference names no link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownError {
    /// Not `SWITCH:PORT` (the parser's message).
    #[error("{0}")]
    Syntax(String),
    #[error("--down {given}: no switch {switch}")]
    NoSwitch { given: String, switch: String },
    #[error("--down {given}: switch {switch} has no port {port}")]
    NoPort {
        given: String,
        switch: String,
        port: String,
    },
    #[error("--down {given}: that port has no link to another switch")]
    NotALink { given: String },
}

/// The links `down` names, by either end; each item may be a comma-separated list.
pub fn links_down(t: &Topology, down: &[String]) -> Result<BTreeSet<LinkIdx>, DownError> {
    let mut out = BTreeSet::new();
    for d in down
        .iter()
        .flat_map(|d| d.split(','))
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        let r: PortRef = d
            .parse()
            .map_err(|e: <PortRef as std::str::FromStr>::Err| DownError::Syntax(e.to_string()))?;
        let sw = t
            .switch_index(&r.switch)
            .ok_or_else(|| DownError::NoSwitch {
                given: d.to_string(),
                switch: r.switch.clone(),
            })?;
        let pi = t.switches[sw]
            .port_index(&r.port)
            .ok_or_else(|| DownError::NoPort {
                given: d.to_string(),
                switch: r.switch.clone(),
                port: r.port.clone(),
            })?;
        match t.switches[sw].ports[pi].peer {
            Peer::Switch { link } => {
                out.insert(link);
            }
            _ => {
                return Err(DownError::NotALink {
                    given: d.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// Every link up except `down`.
pub fn link_state(t: &Topology, down: &BTreeSet<LinkIdx>) -> LinkState {
    let mut ls = LinkState::all_up(t);
    for &l in down {
        ls.set_down(l, true);
    }
    ls
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Topology {
        weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example")
    }

    #[test]
    fn either_end_names_the_link_and_what_names_none_says_why() {
        let t = small();
        let l = &t.links[0];
        let end = |e: weft_topology::End| {
            format!(
                "{}:{}",
                t.switches[e.switch].name, t.switches[e.switch].ports[e.port].name
            )
        };
        let both = links_down(&t, &[format!("{}, {}", end(l.a), end(l.b))]).expect("links");
        assert_eq!(both.into_iter().collect::<Vec<_>>(), [0]);
        assert!(link_state(&t, &[0].into()).is_down(0));
        assert!(matches!(
            links_down(&t, &["nope:Ethernet0".into()]),
            Err(DownError::NoSwitch { .. })
        ));
        assert!(matches!(
            links_down(&t, &["leaf1:Ethernet999".into()]),
            Err(DownError::NoPort { .. })
        ));
        assert!(matches!(
            links_down(&t, &["leaf1".into()]),
            Err(DownError::Syntax(_))
        ));
        let host_port = t.hosts[0].port;
        let host_leaf = &t.switches[t.hosts[0].switch];
        assert_eq!(
            links_down(
                &t,
                &[format!(
                    "{}:{}",
                    host_leaf.name, host_leaf.ports[host_port].name
                )]
            )
            .map_err(|e| e.to_string()),
            Err(format!(
                "--down {}:{}: that port has no link to another switch",
                host_leaf.name, host_leaf.ports[host_port].name
            ))
        );
    }
}
