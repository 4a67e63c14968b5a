//! The cables: each is a veth from either end to a middle end in the wires namespace, the two
//! middle ends joined by a tc redirect; pulling a cable takes the middle ends down.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::TestbedError;
use crate::error::Result;
use crate::exec::run_input;
use crate::names::wires_netns;
use crate::state::State;

/// The commands that lay every cable, batched per namespace: one `ip`/`tc` process per
/// namespace instead of ten per cable.
#[derive(Default)]
pub(crate) struct WireCommands {
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
    pub(crate) fn end(&mut self, ns: &str, name: &str, middle: &str, mtu: &str, up: bool) {
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
    pub(crate) fn join(&mut self, a: &str, b: &str, up: bool) {
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

    pub(crate) fn run(&self, wires_ns: &str) -> Result<()> {
        let batch = |lines: &[String]| lines.join("\n") + "\n";
        run_input(&["ip", "-n", wires_ns, "-batch", "-"], &batch(&self.links))?;
        for (ns, lines) in &self.ends {
            run_input(&["ip", "-n", ns, "-batch", "-"], &batch(lines))?;
        }
        run_input(&["tc", "-n", wires_ns, "-batch", "-"], &batch(&self.tc))?;
        run_input(&["ip", "-n", wires_ns, "-batch", "-"], &batch(&self.ups))
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn a_cable_is_two_veths_joined_by_redirects_both_ways_and_up_only_when_plugged() {
        let mut w = WireCommands::default();
        w.end("weft-lab", "s1p1", "w0a", "9100", true);
        w.end("weft-lab:h1", "h0", "w0b", "9100", false);
        w.join("w0a", "w0b", false);
        assert_eq!(
            w.links,
            vec![
                "link add w0a index 100000 mtu 9100 type veth peer name s1p1 mtu 9100 netns weft-lab",
                "link add w0b index 100001 mtu 9100 type veth peer name h0 mtu 9100 netns weft-lab:h1",
            ]
        );
        assert_eq!(w.ends["weft-lab"], vec!["link set s1p1 up"]);
        assert!(!w.ends.contains_key("weft-lab:h1"));
        assert_eq!(w.tc.len(), 4);
        assert!(
            w.tc[1].ends_with("action mirred egress redirect dev w0b"),
            "{:?}",
            w.tc
        );
        assert!(
            w.tc[3].ends_with("action mirred egress redirect dev w0a"),
            "{:?}",
            w.tc
        );
        assert!(w.ups.is_empty());
        w.join("w1a", "w1b", true);
        assert_eq!(w.ups, vec!["link set w1a up", "link set w1b up"]);
    }

    #[test]
    fn a_port_knows_its_far_end_and_its_switch_neighbours() {
        let st = fixtures::state(std::path::Path::new("/tmp"));
        assert_eq!(
            peer(&st, "leaf1", "Ethernet4"),
            Some(("spine1".into(), "Ethernet0".into()))
        );
        assert_eq!(
            peer(&st, "spine1", "Ethernet0"),
            Some(("leaf1".into(), "Ethernet4".into()))
        );
        assert_eq!(
            peer(&st, "leaf1", "Ethernet0"),
            Some(("h1".into(), "eth0".into()))
        );
        assert_eq!(peer(&st, "leaf1", "Ethernet8"), None);
        assert_eq!(uplinks(&st, "leaf1"), vec!["Ethernet4"]);
        assert_eq!(uplinks(&st, "spine1"), vec!["Ethernet0"]);
    }

    #[test]
    fn a_cable_is_pulled_only_at_a_connected_port_of_a_known_switch() {
        let st = fixtures::state(std::path::Path::new("/tmp"));
        let e = set_link(&st, "leaf9", "Ethernet0", false).expect_err("no switch");
        assert_eq!(e.to_string(), "no switch leaf9 in the testbed");
        let e = set_link(&st, "leaf1", "Ethernet8", false).expect_err("no port");
        assert_eq!(
            e.to_string(),
            "switch leaf1 has no connected port Ethernet8"
        );
        let mut old = st.clone();
        old.wires.clear();
        let e = set_link(&old, "leaf1", "Ethernet0", false).expect_err("no cable");
        assert!(e.to_string().contains("made by an older weft?"), "{e}");
    }
}
