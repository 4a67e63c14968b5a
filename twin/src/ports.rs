//! Every switch port of the fabric as one flat table (a k=64 fat-tree has 327,680): what is at
//! its far end, its capacity, and which of its switch's ports feed it.

use std::ops::Range;

use weft_topology::{HostIdx, Peer as TopoPeer, SwitchIdx, Topology};

/// A port's index in [`Ports`].
pub type PortId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    None,
    Host(HostIdx),
    Switch(PortId),
}

#[derive(Debug, Clone)]
pub struct Port {
    pub switch: SwitchIdx,
    /// The port's index among its switch's ports.
    pub index: usize,
    pub peer: Peer,
    /// Bytes per second.
    pub cap: f64,
}

#[derive(Debug, Clone, Default)]
pub struct Ports {
    pub ports: Vec<Port>,
    /// Per switch, its ports' ids.
    pub of_switch: Vec<Range<PortId>>,
    /// Per host, the leaf port it hangs off.
    pub of_host: Vec<PortId>,
    /// Per switch, its tier (1 = leaf).
    pub tier: Vec<u8>,
}

impl Ports {
    pub fn new(t: &Topology) -> Ports {
        let mut of_switch = Vec::with_capacity(t.switches.len());
        let mut n: PortId = 0;
        for s in &t.switches {
            of_switch.push(n..n + s.ports.len() as PortId);
            n += s.ports.len() as PortId;
        }
        let mut of_host = vec![0; t.hosts.len()];
        let mut ports = Vec::with_capacity(n as usize);
        for (si, s) in t.switches.iter().enumerate() {
            for (pi, p) in s.ports.iter().enumerate() {
                let peer = match p.peer {
                    TopoPeer::None => Peer::None,
                    TopoPeer::Host { host } => {
                        of_host[host] = of_switch[si].start + pi as PortId;
                        Peer::Host(host)
                    }
                    TopoPeer::Switch { link } => {
                        let o = t.links[link].other(si);
                        Peer::Switch(of_switch[o.switch].start + o.port as PortId)
                    }
                };
                ports.push(Port {
                    switch: si,
                    index: pi,
                    peer,
                    cap: p.speed.bits_per_sec() as f64 / 8.0,
                });
            }
        }
        Ports {
            ports,
            of_switch,
            of_host,
            tier: t.switches.iter().map(|s| s.tier()).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.ports.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    pub fn get(&self, p: PortId) -> &Port {
        &self.ports[p as usize]
    }

    /// The tier of what is behind `p` (0: a host, none: nothing).
    pub fn peer_tier(&self, p: PortId) -> Option<u8> {
        match self.get(p).peer {
            Peer::None => None,
            Peer::Host(_) => Some(0),
            Peer::Switch(q) => Some(self.tier[self.get(q).switch]),
        }
    }

    /// The ports of `p`'s switch whose arrivals may leave through `p` (valley-free routing: a
    /// packet that came down goes on down only): what a PAUSE-blocked egress `p` holds up.
    pub fn feeders(&self, p: PortId) -> Vec<PortId> {
        let sw = self.get(p).switch;
        let tier = self.tier[sw];
        let (Some(out_tier), range) = (self.peer_tier(p), self.of_switch[sw].clone()) else {
            return Vec::new();
        };
        range
            .filter(|&i| i != p)
            .filter(|&i| match self.peer_tier(i) {
                None => false,
                // Going up: only what came from below.
                Some(from) if out_tier > tier => from < tier,
                Some(_) => true,
            })
            .collect()
    }

    /// `switch:port` of `p`.
    pub fn name(&self, t: &Topology, p: PortId) -> String {
        let x = self.get(p);
        format!(
            "{}:{}",
            t.switches[x.switch].name, t.switches[x.switch].ports[x.index].name
        )
    }
}
