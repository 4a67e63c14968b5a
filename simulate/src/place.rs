//! Placing one step's flows on the fabric, per the mode each group on their way has for the
//! simulated class. The result is bytes per directed link.
//!
//! Flows are walked one by one while their groups pick a single member per flow:
//! - **HASH** (ECMP, WCMP): the pipeline's selector hash of the flow's 5-tuple and QP
//!   ([`crate::hash`]), member `slots[hash % slots]` ([`crate::fib::Group::slots`]);
//! - **FLOWLET**, when the flow's packets come close enough together that its flowlet never
//!   expires (the sender's NIC serves few QPs): one pick for the whole flow, the pipeline's
//!   re-pick rule: a random member by weight, unless the group's last choice is less loaded.
//!
//! At the first group whose mode splits a flow's packets (**SPRAY**, **ADAPTIVE**, and
//! **FLOWLET** whose gaps exceed the flowlet gap, so every packet re-picks as adaptive does) the
//! flow becomes fluid: its bytes join those of every flow to the same destination there, and
//! the fluid is pushed through the rest of the routing DAG in topological order, split by
//! weight (spray; also a hash or sticky flowlet group met downstream, where many flows
//! average out), or as adaptive routing splits it.
//!
//! Adaptive routing (DRILL: the shorter of two local queues) sees queues, and a queue builds
//! only on a link asked to carry more than it can in the time the step must take anyway. The
//! model takes that time as the step's ideal (the cut bound, [`Placer::set_overload`]): a
//! member is *overloaded* once its bytes / capacity exceed it. Adaptive splits by weight while
//! no member would be overloaded, moves what would overload a member onto the others while
//! they have room, and levels the overload when all are full (water-filling). Sticky flowlets
//! compare the same overload between the sample and the group's last choice. Fluid to the
//! regular hosts of one leaf travels together (their routes agree everywhere but at the leaf)
//! and is shared at the leaf in proportion to each host's bytes.

use std::collections::HashMap;

use weft_topology::{HostIdx, SwitchIdx};

use crate::fabric::{DirLink, Fabric, Hop};
use crate::fib::{Fib, Mode, Next, Router};
use crate::hash::{FlowKey, Rng};

/// One flow of a step.
#[derive(Debug, Clone, Copy)]
pub struct FlowSpec {
    pub src: HostIdx,
    pub dst: HostIdx,
    pub bytes: f64,
    pub key: FlowKey,
    /// Seeds this flow's random picks.
    pub id: u64,
    /// Time between consecutive packets of the flow (its NIC serves its QPs in turn).
    pub packet_gap_ns: f64,
}

/// Bytes per directed link, and what was delivered or dropped.
#[derive(Debug, Clone)]
pub struct Loads {
    pub bytes: Vec<f64>,
    pub offered: f64,
    pub delivered: f64,
    pub dropped: f64,
}

const MAX_HOPS: usize = 64;

pub struct Placer<'a> {
    fab: &'a Fabric<'a>,
    router: Router<'a>,
    seed: u64,
    /// Each switch's hash seed (from its device id), by switch index.
    seeds: Vec<u32>,
    loads: Vec<f64>,
    offered: f64,
    delivered: f64,
    dropped: f64,
    /// Per switch, per group: the member chosen last (DRILL's memory).
    last: Vec<Vec<Option<u16>>>,
    /// Fluid per destination: (leaf or irregular host) → per switch bytes injected there.
    fluid: HashMap<FluidDest, Vec<f64>>,
    /// Fluid bytes per destination host, to share a leaf's arrivals.
    fluid_in: Vec<f64>,
    /// Seconds of load beyond which a link counts as overloaded (queues build).
    overload: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum FluidDest {
    Leaf(SwitchIdx),
    Host(HostIdx),
}

impl<'a> Placer<'a> {
    /// `hash_seeds`: each switch hashes with its seed (see [`crate::model::Params`]).
    pub fn new(fab: &'a Fabric<'a>, fib: &'a Fib, seed: u64, hash_seeds: bool) -> Placer<'a> {
        Placer {
            router: Router::new(fab.t, fib),
            last: fib
                .switches
                .iter()
                .map(|s| vec![None; s.groups.len()])
                .collect(),
            seeds: fab
                .t
                .switches
                .iter()
                .map(|s| {
                    if hash_seeds {
                        crate::hash::hash_seed(s.device_id)
                    } else {
                        0
                    }
                })
                .collect(),
            fab,
            seed,
            loads: vec![0.0; fab.len()],
            offered: 0.0,
            delivered: 0.0,
            dropped: 0.0,
            fluid: HashMap::new(),
            fluid_in: vec![0.0; fab.t.hosts.len()],
            overload: 0.0,
        }
    }

    /// The step's ideal time: links loaded beyond it are where queues build.
    pub fn set_overload(&mut self, seconds: f64) {
        self.overload = seconds.max(0.0);
    }

    /// How far a link is past the overload point (its queue, in seconds of work).
    fn queue(&self, d: DirLink) -> f64 {
        (self.norm(d) - self.overload).max(0.0)
    }

    fn norm(&self, d: DirLink) -> f64 {
        self.loads[d as usize] / self.fab.cap[d as usize].max(1.0)
    }

    /// Starts a new step; the groups' memories stay.
    pub fn reset(&mut self) {
        self.loads.iter_mut().for_each(|x| *x = 0.0);
        self.offered = 0.0;
        self.delivered = 0.0;
        self.dropped = 0.0;
        self.fluid.clear();
        self.fluid_in.iter_mut().for_each(|x| *x = 0.0);
    }

    /// A member by weight, from `r` in 0..1.
    fn by_weight(&self, s: SwitchIdx, g: u32, r: &mut Rng) -> Option<u16> {
        let grp = self.router.group(s, g)?;
        let live: Vec<(u16, u32)> = grp
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                self.fab
                    .port(s, m.port)
                    .is_some_and(|(d, _)| self.fab.live[d as usize])
            })
            .map(|(i, m)| (i as u16, m.weight.max(1)))
            .collect();
        let total: u64 = live.iter().map(|x| u64::from(x.1)).sum();
        if total == 0 {
            return None;
        }
        let mut pick = r.below(total);
        for (i, w) in live {
            if pick < u64::from(w) {
                return Some(i);
            }
            pick -= u64::from(w);
        }
        None
    }

    fn member_link(&self, s: SwitchIdx, g: u32, m: u16) -> Option<(DirLink, Hop)> {
        let grp = self.router.group(s, g)?;
        let mem = grp.members.get(m as usize)?;
        self.fab.port(s, mem.port)
    }

    pub fn place(&mut self, f: &FlowSpec) {
        self.offered += f.bytes;
        let up = self.fab.host_up(f.src);
        if !self.fab.live[up as usize] {
            self.dropped += f.bytes;
            return;
        }
        self.loads[up as usize] += f.bytes;
        let mut s = self.fab.t.hosts[f.src].switch;
        for _ in 0..MAX_HOPS {
            let h16 = f.key.selector_hash(self.seeds[s]);
            let port_link = match self.router.decide(s, f.dst) {
                Next::Drop => None,
                Next::Port(p) => self.fab.port(s, p),
                Next::Group(g) => {
                    let Some(grp) = self.router.group(s, g) else {
                        self.dropped += f.bytes;
                        return;
                    };
                    let m = match grp.mode {
                        Mode::Hash | Mode::Entropy => {
                            let h = if grp.mode == Mode::Entropy {
                                f.key.entropy_hash(self.seeds[s])
                            } else {
                                h16
                            };
                            let slots = self.router.slots(s, g);
                            let m = slots[h as usize % slots.len().max(1)];
                            // A dead sample: the pipeline falls back to a live member.
                            match self.member_link(s, g, m) {
                                Some((d, _)) if self.fab.live[d as usize] => Some(m),
                                _ => self.by_weight(s, g, &mut Rng::new(f.id ^ self.seed)),
                            }
                        }
                        Mode::Flowlet { gap_ns } if f.packet_gap_ns <= gap_ns as f64 => {
                            let mut r = Rng::new(
                                f.id ^ self.seed ^ ((s as u64) << 40) ^ (u64::from(g) << 20),
                            );
                            let sample = self.by_weight(s, g, &mut r);
                            let last = self.last[s][g as usize].filter(|&l| {
                                self.member_link(s, g, l)
                                    .is_some_and(|(d, _)| self.fab.live[d as usize])
                            });
                            let pick = match (sample, last) {
                                (Some(a), Some(b)) => {
                                    let qa = self.member_link(s, g, a).map(|x| self.queue(x.0));
                                    let qb = self.member_link(s, g, b).map(|x| self.queue(x.0));
                                    if qb < qa { Some(b) } else { Some(a) }
                                }
                                (a, b) => a.or(b),
                            };
                            self.last[s][g as usize] = pick;
                            pick
                        }
                        _ => {
                            self.inject(s, f);
                            return;
                        }
                    };
                    m.and_then(|m| self.member_link(s, g, m))
                }
            };
            let Some((d, hop)) = port_link else {
                self.dropped += f.bytes;
                return;
            };
            if !self.fab.live[d as usize] {
                self.dropped += f.bytes;
                return;
            }
            self.loads[d as usize] += f.bytes;
            match hop {
                Hop::Host(h) if h == f.dst => {
                    self.delivered += f.bytes;
                    return;
                }
                Hop::Host(_) => {
                    self.dropped += f.bytes;
                    return;
                }
                Hop::Switch(n) => s = n,
            }
        }
        self.dropped += f.bytes;
    }

    fn dest_of(&self, h: HostIdx) -> FluidDest {
        if self.router.irregular[h] {
            FluidDest::Host(h)
        } else {
            FluidDest::Leaf(self.fab.t.hosts[h].switch)
        }
    }

    fn inject(&mut self, s: SwitchIdx, f: &FlowSpec) {
        let key = self.dest_of(f.dst);
        let n = self.fab.t.switches.len();
        self.fluid.entry(key).or_insert_with(|| vec![0.0; n])[s] += f.bytes;
        self.fluid_in[f.dst] += f.bytes;
    }

    fn decide_fluid(&mut self, s: SwitchIdx, dest: FluidDest) -> Next {
        match dest {
            FluidDest::Leaf(l) => self.router.decide_leaf(s, l),
            FluidDest::Host(h) => self.router.decide(s, h),
        }
    }

    /// Where fluid at `s` goes next: (member or port, directed link, hop), for ordering.
    fn children(&mut self, s: SwitchIdx, dest: FluidDest) -> Vec<SwitchIdx> {
        if dest == FluidDest::Leaf(s) {
            return Vec::new();
        }
        let ports: Vec<usize> = match self.decide_fluid(s, dest) {
            Next::Drop => Vec::new(),
            Next::Port(p) => vec![p],
            Next::Group(g) => self
                .router
                .group(s, g)
                .map(|grp| grp.members.iter().map(|m| m.port).collect())
                .unwrap_or_default(),
        };
        ports
            .into_iter()
            .filter_map(|p| match self.fab.port(s, p) {
                Some((_, Hop::Switch(n))) => Some(n),
                _ => None,
            })
            .collect()
    }

    /// Pushes every destination's fluid through the fabric.
    pub fn flush(&mut self) {
        let mut dests: Vec<(FluidDest, Vec<f64>)> = self.fluid.drain().collect();
        dests.sort_by_key(|d| d.0);
        let n = self.fab.t.switches.len();
        let mut state = vec![0u8; n];
        for (dest, mut acc) in dests {
            // Reverse post-order of the DAG reachable from where fluid was injected.
            let mut post: Vec<SwitchIdx> = Vec::new();
            state.iter_mut().for_each(|x| *x = 0);
            let roots: Vec<SwitchIdx> = (0..n).filter(|&s| acc[s] > 0.0).collect();
            for r in roots {
                if state[r] != 0 {
                    continue;
                }
                let mut stack: Vec<(SwitchIdx, Vec<SwitchIdx>)> = vec![(r, self.children(r, dest))];
                state[r] = 1;
                while let Some((s, kids)) = stack.last_mut() {
                    if let Some(c) = kids.pop() {
                        if state[c] == 0 {
                            state[c] = 1;
                            let k = self.children(c, dest);
                            stack.push((c, k));
                        }
                    } else {
                        let s = *s;
                        state[s] = 2;
                        post.push(s);
                        stack.pop();
                    }
                }
            }
            for &s in post.iter().rev() {
                let amt = std::mem::take(&mut acc[s]);
                if amt <= 0.0 {
                    continue;
                }
                if dest == FluidDest::Leaf(s) {
                    self.deliver_leaf(s, amt);
                    continue;
                }
                match self.decide_fluid(s, dest) {
                    Next::Drop => self.dropped += amt,
                    Next::Port(p) => self.forward(s, p, amt, dest, &mut acc),
                    Next::Group(g) => self.split(s, g, amt, dest, &mut acc),
                }
            }
        }
    }

    fn deliver_leaf(&mut self, leaf: SwitchIdx, amt: f64) {
        let hosts: Vec<HostIdx> = self
            .fab
            .t
            .hosts
            .iter()
            .enumerate()
            .filter(|(h, x)| {
                x.switch == leaf && !self.router.irregular[*h] && self.fluid_in[*h] > 0.0
            })
            .map(|(h, _)| h)
            .collect();
        let total: f64 = hosts.iter().map(|&h| self.fluid_in[h]).sum();
        if total <= 0.0 {
            self.dropped += amt;
            return;
        }
        for h in hosts {
            let share = amt * self.fluid_in[h] / total;
            let d = self.fab.host_down(h);
            if self.fab.live[d as usize] {
                self.loads[d as usize] += share;
                self.delivered += share;
            } else {
                self.dropped += share;
            }
        }
    }

    fn forward(&mut self, s: SwitchIdx, p: usize, amt: f64, dest: FluidDest, acc: &mut [f64]) {
        match self.fab.port(s, p) {
            Some((d, hop)) if self.fab.live[d as usize] => {
                self.loads[d as usize] += amt;
                match hop {
                    Hop::Switch(n) => acc[n] += amt,
                    Hop::Host(h) if dest == FluidDest::Host(h) => self.delivered += amt,
                    Hop::Host(_) => self.dropped += amt,
                }
            }
            _ => self.dropped += amt,
        }
    }

    fn split(&mut self, s: SwitchIdx, g: u32, amt: f64, dest: FluidDest, acc: &mut [f64]) {
        let Some(grp) = self.router.group(s, g) else {
            self.dropped += amt;
            return;
        };
        // (port, link, capacity, weight) of live members.
        let live: Vec<(usize, DirLink, f64, f64)> = grp
            .members
            .iter()
            .filter_map(|m| {
                let (d, _) = self.fab.port(s, m.port)?;
                self.fab.live[d as usize].then(|| {
                    (
                        m.port,
                        d,
                        self.fab.cap[d as usize].max(1.0),
                        f64::from(m.weight.max(1)),
                    )
                })
            })
            .collect();
        if live.is_empty() {
            self.dropped += amt;
            return;
        }
        let adaptive = match grp.mode {
            Mode::Adaptive => true,
            Mode::Flowlet { .. } => true,
            Mode::Hash | Mode::Spray | Mode::Entropy => false,
        };
        let shares: Vec<f64> = if adaptive {
            adaptive_split(
                &live
                    .iter()
                    .map(|&(_, d, c, w)| (self.loads[d as usize], c, w))
                    .collect::<Vec<_>>(),
                amt,
                self.overload,
            )
        } else {
            let w: f64 = live.iter().map(|x| x.3).sum();
            live.iter().map(|x| amt * x.3 / w).collect()
        };
        for (&(p, ..), x) in live.iter().zip(shares) {
            if x > 0.0 {
                self.forward(s, p, x, dest, acc);
            }
        }
    }

    pub fn finish(&mut self) -> Loads {
        self.flush();
        Loads {
            bytes: self.loads.clone(),
            offered: self.offered,
            delivered: self.delivered,
            dropped: self.dropped,
        }
    }
}

/// Adaptive routing's split of `amt` over members (load, capacity, weight): by weight while
/// no member passes `overload` seconds of load; what would pass it goes to members with room
/// (by weight); once every member is full, the rest levels their overload.
pub fn adaptive_split(members: &[(f64, f64, f64)], amt: f64, overload: f64) -> Vec<f64> {
    let mut out = vec![0.0; members.len()];
    let room: Vec<f64> = members
        .iter()
        .map(|&(l, c, _)| (overload * c - l).max(0.0))
        .collect();
    let mut left = amt;
    let mut open: Vec<usize> = (0..members.len()).filter(|&i| room[i] > 0.0).collect();
    while left > amt * 1e-12 && !open.is_empty() {
        let w: f64 = open.iter().map(|&i| members[i].2).sum();
        let mut given = 0.0;
        let mut still = Vec::with_capacity(open.len());
        for &i in &open {
            let want = left * members[i].2 / w;
            let x = want.min(room[i] - out[i]);
            out[i] += x;
            given += x;
            if room[i] - out[i] > amt * 1e-12 {
                still.push(i);
            }
        }
        left -= given;
        if still.len() == open.len() {
            break;
        }
        open = still;
    }
    if left > amt * 1e-12 {
        let now: Vec<(f64, f64)> = members
            .iter()
            .zip(&out)
            .map(|(&(l, c, _), x)| (l + x, c))
            .collect();
        for (o, x) in out.iter_mut().zip(water_fill(&now, left)) {
            *o += x;
        }
    }
    out
}

/// Splits `amt` over members with (load, capacity) so that the fullest afterwards is as empty
/// as possible: raise a common level `λ` of load/capacity until `Σ max(0, λ·c − load) = amt`.
pub fn water_fill(members: &[(f64, f64)], amt: f64) -> Vec<f64> {
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&a, &b| {
        let (la, ca) = members[a];
        let (lb, cb) = members[b];
        (la / ca).total_cmp(&(lb / cb))
    });
    let mut out = vec![0.0; members.len()];
    let (mut cap_sum, mut load_sum) = (0.0, 0.0);
    let mut level = 0.0;
    for (k, &i) in order.iter().enumerate() {
        let (l, c) = members[i];
        cap_sum += c;
        load_sum += l;
        // Level if members order[..=k] share everything.
        level = (amt + load_sum) / cap_sum;
        let next = order
            .get(k + 1)
            .map(|&j| members[j].0 / members[j].1)
            .unwrap_or(f64::INFINITY);
        if level <= next {
            break;
        }
    }
    for &i in &order {
        let (l, c) = members[i];
        out[i] = (level * c - l).max(0.0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_splits_by_weight_below_overload_and_steers_only_what_would_queue() {
        // Room for everything: by weight (2:1), whatever the loads.
        let x = adaptive_split(&[(1.0, 1.0, 2.0), (0.0, 1.0, 1.0)], 3.0, 10.0);
        assert_eq!(x, [2.0, 1.0]);
        // The first has room for 1 only: the rest goes to the second.
        let x = adaptive_split(&[(9.0, 1.0, 1.0), (0.0, 1.0, 1.0)], 4.0, 10.0);
        assert!(
            (x[0] - 1.0).abs() < 1e-12 && (x[1] - 3.0).abs() < 1e-12,
            "{x:?}"
        );
        // Both full: the overload is levelled.
        let x = adaptive_split(&[(10.0, 1.0, 1.0), (8.0, 1.0, 1.0)], 4.0, 10.0);
        let lv = [(10.0 + x[0]), (8.0 + x[1])];
        assert!(
            (lv[0] - lv[1]).abs() < 1e-12 && (x[0] + x[1] - 4.0).abs() < 1e-12,
            "{x:?}"
        );
    }

    #[test]
    fn water_filling_fills_the_emptiest_first_and_levels_them() {
        // Loads 0, 2, 10 on equal capacity 1: 4 units raise the first two to level 3.
        let x = water_fill(&[(0.0, 1.0), (2.0, 1.0), (10.0, 1.0)], 4.0);
        assert_eq!(x, [3.0, 1.0, 0.0]);
        // Enough for everyone: all end at the same level.
        let x = water_fill(&[(0.0, 1.0), (2.0, 1.0), (10.0, 2.0)], 20.0);
        let lv: Vec<f64> = [(0.0, 1.0), (2.0, 1.0), (10.0, 2.0)]
            .iter()
            .zip(&x)
            .map(|((l, c), a)| (l + a) / c)
            .collect();
        assert!((lv[0] - lv[1]).abs() < 1e-12 && (lv[1] - lv[2]).abs() < 1e-12);
        assert!((x.iter().sum::<f64>() - 20.0).abs() < 1e-12);
    }
}
