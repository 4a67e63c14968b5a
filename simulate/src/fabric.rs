//! The fabric as directed links with capacities: every switch-to-switch link in both
//! directions, every host's NIC link up (host → leaf) and down (leaf → host).

use weft_topology::{HostIdx, LinkIdx, Peer, SwitchIdx, Topology};

pub type DirLink = u32;

/// Where a port leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    Switch(SwitchIdx),
    Host(HostIdx),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    Fabric,
    HostUp,
    HostDown,
}

pub struct Fabric<'t> {
    pub t: &'t Topology,
    /// Per switch, per port index: the directed link out of it and what is behind it.
    ports: Vec<Vec<Option<(DirLink, Hop)>>>,
    /// Bytes per second.
    pub cap: Vec<f64>,
    pub live: Vec<bool>,
    pub kind: Vec<LinkKind>,
    links: usize,
}

impl<'t> Fabric<'t> {
    /// `down[l]`: topology link `l` is down (links administratively down count as down too).
    pub fn new(t: &'t Topology, down: &[bool]) -> Fabric<'t> {
        let l = t.links.len();
        let n = 2 * l + 2 * t.hosts.len();
        let mut cap = vec![0.0; n];
        let mut live = vec![true; n];
        let mut kind = vec![LinkKind::Fabric; n];
        for (i, link) in t.links.iter().enumerate() {
            let bps = link.speed.bits_per_sec() as f64 / 8.0;
            let up = t.link_admin_up(i) && !down.get(i).copied().unwrap_or(false);
            for d in [2 * i, 2 * i + 1] {
                cap[d] = bps;
                live[d] = up;
            }
        }
        for (h, host) in t.hosts.iter().enumerate() {
            let bps = host.speed.bits_per_sec() as f64 / 8.0;
            let up = t.switches[host.switch].ports[host.port].admin_up;
            for (d, k) in [
                (Self::up_of(l, h), LinkKind::HostUp),
                (Self::down_of(l, h), LinkKind::HostDown),
            ] {
                cap[d as usize] = bps;
                live[d as usize] = up;
                kind[d as usize] = k;
            }
        }
        let ports = t
            .switches
            .iter()
            .enumerate()
            .map(|(s, sw)| {
                sw.ports
                    .iter()
                    .enumerate()
                    .map(|(pi, p)| match p.peer {
                        Peer::None => None,
                        Peer::Host { host } => Some((Self::down_of(l, host), Hop::Host(host))),
                        Peer::Switch { link } => {
                            let lk = &t.links[link];
                            let d = if lk.a.switch == s && lk.a.port == pi {
                                2 * link
                            } else {
                                2 * link + 1
                            };
                            Some((d as DirLink, Hop::Switch(lk.other(s).switch)))
                        }
                    })
                    .collect()
            })
            .collect();
        Fabric {
            t,
            ports,
            cap,
            live,
            kind,
            links: l,
        }
    }

    fn up_of(links: usize, h: HostIdx) -> DirLink {
        (2 * links + 2 * h) as DirLink
    }
    fn down_of(links: usize, h: HostIdx) -> DirLink {
        (2 * links + 2 * h + 1) as DirLink
    }

    pub fn len(&self) -> usize {
        self.cap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.cap.is_empty()
    }

    pub fn host_up(&self, h: HostIdx) -> DirLink {
        Self::up_of(self.links, h)
    }
    pub fn host_down(&self, h: HostIdx) -> DirLink {
        Self::down_of(self.links, h)
    }

    /// The directed link out of `port` of switch `s`, and where it leads.
    pub fn port(&self, s: SwitchIdx, port: usize) -> Option<(DirLink, Hop)> {
        self.ports
            .get(s)
            .and_then(|p| p.get(port))
            .copied()
            .flatten()
    }

    /// Where a directed link starts and ends.
    pub fn endpoints(&self, d: DirLink) -> (Hop, Hop) {
        let t = self.t;
        let d = d as usize;
        if d < 2 * self.links {
            let l = &t.links[d / 2];
            let (a, b) = (Hop::Switch(l.a.switch), Hop::Switch(l.b.switch));
            if d.is_multiple_of(2) { (a, b) } else { (b, a) }
        } else {
            let h = (d - 2 * self.links) / 2;
            let leaf = Hop::Switch(t.hosts[h].switch);
            if d.is_multiple_of(2) {
                (Hop::Host(h), leaf)
            } else {
                (leaf, Hop::Host(h))
            }
        }
    }

    /// The topology link of a directed switch link.
    pub fn topology_link(&self, d: DirLink) -> Option<LinkIdx> {
        ((d as usize) < 2 * self.links).then_some(d as usize / 2)
    }

    /// All capacities set to `bytes_per_sec` (the testbed, where one rate limits every port).
    pub fn with_uniform_capacity(mut self, bytes_per_sec: f64) -> Self {
        self.cap.iter_mut().for_each(|c| *c = bytes_per_sec);
        self
    }

    /// `leaf1:Ethernet8→spine1`, `h1→leaf1`, `leaf1→h1`.
    pub fn name(&self, d: DirLink) -> String {
        let t = self.t;
        let d = d as usize;
        if d < 2 * self.links {
            let l = &t.links[d / 2];
            let (from, to) = if d.is_multiple_of(2) {
                (l.a, l.b)
            } else {
                (l.b, l.a)
            };
            format!("{}→{}", t.end_name(from), t.switches[to.switch].name)
        } else {
            let h = (d - 2 * self.links) / 2;
            let host = &t.hosts[h];
            let leaf = &t.switches[host.switch].name;
            if d.is_multiple_of(2) {
                format!("{}→{leaf}", host.name)
            } else {
                format!("{leaf}→{}", host.name)
            }
        }
    }
}
