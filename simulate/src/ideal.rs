//! The ideal: a lower bound on the time any routing needs for a traffic matrix, from cuts the
//! fabric cannot avoid. Every byte leaving a host crosses its NIC; every byte between a host
//! inside and one outside a *block* crosses the block's links to higher tiers, where a block
//! of tier t is a connected set of live switches of tier ≤ t (a leaf; a pod of leaves and
//! spines; ...) with its hosts. The bound is the largest (bytes across a cut) / (its live
//! capacity) in either direction. It depends on the topology and the links that are down, not
//! on any routing; on a fat-tree with every link up it is what perfect spraying achieves.

use weft_topology::HostIdx;

use crate::fabric::Fabric;

/// Blocks per tier below the top, with their live capacity up (= down: links are symmetric).
pub struct Cuts {
    /// Per level: block of each switch (u32::MAX: the switch is above this level).
    block: Vec<Vec<u32>>,
    cap_out: Vec<Vec<f64>>,
    cap_in: Vec<Vec<f64>>,
    /// Connected component of each switch over all live links.
    component: Vec<u32>,
    leaf: Vec<usize>,
    nic_up: Vec<f64>,
    nic_down: Vec<f64>,
}

fn find(p: &mut [u32], mut x: u32) -> u32 {
    while p[x as usize] != x {
        p[x as usize] = p[p[x as usize] as usize];
        x = p[x as usize];
    }
    x
}

impl Cuts {
    pub fn new(fab: &Fabric) -> Cuts {
        let t = fab.t;
        let n = t.switches.len();
        let mut tiers: Vec<u8> = t.switches.iter().map(|s| s.tier()).collect();
        tiers.sort_unstable();
        tiers.dedup();
        let live = |l: usize| fab.live[2 * l];
        let mut block = Vec::new();
        let mut cap_out = Vec::new();
        let mut cap_in = Vec::new();
        for &tier in tiers.iter().take(tiers.len().saturating_sub(1)) {
            let mut p: Vec<u32> = (0..n as u32).collect();
            for (l, link) in t.links.iter().enumerate() {
                let (a, b) = (link.a.switch, link.b.switch);
                if live(l) && t.switches[a].tier() <= tier && t.switches[b].tier() <= tier {
                    let (ra, rb) = (find(&mut p, a as u32), find(&mut p, b as u32));
                    p[ra as usize] = rb;
                }
            }
            let b: Vec<u32> = (0..n)
                .map(|s| {
                    if t.switches[s].tier() <= tier {
                        find(&mut p, s as u32)
                    } else {
                        u32::MAX
                    }
                })
                .collect();
            let mut out = vec![0.0; n];
            let mut inn = vec![0.0; n];
            for (l, link) in t.links.iter().enumerate() {
                if !live(l) {
                    continue;
                }
                let (a, z) = (link.a.switch, link.b.switch);
                for (lo, hi, d_up, d_down) in [(a, z, 2 * l, 2 * l + 1), (z, a, 2 * l + 1, 2 * l)] {
                    if t.switches[lo].tier() <= tier && t.switches[hi].tier() > tier {
                        out[b[lo] as usize] += fab.cap[d_up];
                        inn[b[lo] as usize] += fab.cap[d_down];
                    }
                }
            }
            block.push(b);
            cap_out.push(out);
            cap_in.push(inn);
        }
        let mut p: Vec<u32> = (0..n as u32).collect();
        for (l, link) in t.links.iter().enumerate() {
            if live(l) {
                let (ra, rb) = (
                    find(&mut p, link.a.switch as u32),
                    find(&mut p, link.b.switch as u32),
                );
                p[ra as usize] = rb;
            }
        }
        let component = (0..n as u32).map(|s| find(&mut p, s)).collect();
        let leaf = t.hosts.iter().map(|h| h.switch).collect();
        let nic_up = (0..t.hosts.len())
            .map(|h| {
                let d = fab.host_up(h) as usize;
                if fab.live[d] { fab.cap[d] } else { 0.0 }
            })
            .collect();
        let nic_down = (0..t.hosts.len())
            .map(|h| {
                let d = fab.host_down(h) as usize;
                if fab.live[d] { fab.cap[d] } else { 0.0 }
            })
            .collect();
        Cuts {
            block,
            cap_out,
            cap_in,
            component,
            leaf,
            nic_up,
            nic_down,
        }
    }

    /// Whether some live path can join the two hosts.
    pub fn routable(&self, a: HostIdx, b: HostIdx) -> bool {
        self.component[self.leaf[a]] == self.component[self.leaf[b]]
            && self.nic_up[a] > 0.0
            && self.nic_down[b] > 0.0
    }

    /// Accumulates the bytes of a traffic matrix over the cuts.
    pub fn tally(&self) -> Tally<'_> {
        Tally {
            c: self,
            up: vec![0.0; self.nic_up.len()],
            down: vec![0.0; self.nic_down.len()],
            out: self.block.iter().map(|b| vec![0.0; b.len()]).collect(),
            inn: self.block.iter().map(|b| vec![0.0; b.len()]).collect(),
            unroutable: 0.0,
        }
    }
}

pub struct Tally<'c> {
    c: &'c Cuts,
    up: Vec<f64>,
    down: Vec<f64>,
    out: Vec<Vec<f64>>,
    inn: Vec<Vec<f64>>,
    /// Bytes between hosts no live path joins (left out of the bound).
    pub unroutable: f64,
}

impl Tally<'_> {
    pub fn add(&mut self, a: HostIdx, b: HostIdx, bytes: f64) {
        if a == b {
            return;
        }
        if !self.c.routable(a, b) {
            self.unroutable += bytes;
            return;
        }
        self.up[a] += bytes;
        self.down[b] += bytes;
        let (la, lb) = (self.c.leaf[a], self.c.leaf[b]);
        for (lvl, blk) in self.c.block.iter().enumerate() {
            let (x, y) = (blk[la], blk[lb]);
            if x != y {
                self.out[lvl][x as usize] += bytes;
                self.inn[lvl][y as usize] += bytes;
            }
        }
    }

    /// Seconds the busiest cut needs, and which cut it is.
    pub fn bound(&self) -> (f64, Cut) {
        let mut best = (0.0, Cut::None);
        let mut take = |v: f64, c: f64, cut: Cut| {
            if v > 0.0 && c > 0.0 && v / c > best.0 {
                best = (v / c, cut);
            }
        };
        for h in 0..self.up.len() {
            take(self.up[h], self.c.nic_up[h], Cut::NicSend(h));
            take(self.down[h], self.c.nic_down[h], Cut::NicReceive(h));
        }
        for (lvl, (o, i)) in self.out.iter().zip(&self.inn).enumerate() {
            for b in 0..o.len() {
                take(o[b], self.c.cap_out[lvl][b], Cut::BlockUp(lvl, b));
                take(i[b], self.c.cap_in[lvl][b], Cut::BlockDown(lvl, b));
            }
        }
        best
    }
}

/// A cut of the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    None,
    NicSend(HostIdx),
    NicReceive(HostIdx),
    /// (level below the top tier, block = a member switch's index)
    BlockUp(usize, usize),
    BlockDown(usize, usize),
}

impl Cut {
    pub fn describe(&self, t: &weft_topology::Topology) -> String {
        match *self {
            Cut::None => "none".into(),
            Cut::NicSend(h) => format!("{} NIC (send)", t.hosts[h].name),
            Cut::NicReceive(h) => format!("{} NIC (receive)", t.hosts[h].name),
            Cut::BlockUp(l, b) => format!(
                "uplinks of the tier-{} block of {}",
                l + 1,
                t.switches[b].name
            ),
            Cut::BlockDown(l, b) => {
                format!(
                    "downlinks into the tier-{} block of {}",
                    l + 1,
                    t.switches[b].name
                )
            }
        }
    }
}
