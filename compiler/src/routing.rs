//! Valley-free shortest-path multipath routing with capacity weights.
//!
//! Every switch forwards on the destination leaf alone (an LPM route per leaf subnet), so a path
//! must never turn upward after going down: a switch that can reach the destination leaf
//! downward uses only its downward next hops; one that cannot sends upward, to neighbours that
//! can reach it. Per destination leaf D:
//!
//! ```text
//!   down[s]  hops from s to D using only downward links      (BFS from D over up-neighbours)
//!   reach[s] = down[s] if finite, else 1 + min reach[u] over up-neighbours u (highest tier first)
//!   next hops of s = down-neighbours n with down[n] = down[s]−1   if down[s] finite
//!                    up-neighbours   u with reach[u] = reach[s]−1  otherwise
//!   via[s,n] = min(Σ speeds of the live links s–n, cap[n])      (parallel links share it)
//!   cap[s]   = Σ over next-hop neighbours n of via[s,n];  cap[D] = ∞
//!   weight of link l to n at s ∝ via[s,n] × speed(l) / Σ speeds of the live links s–n
//! ```
//! A neighbour reached over k parallel links counts once, with the sum of their speeds: what it
//! can carry on does not grow with the number of cables to it.
//! Such paths are loop-free (reach strictly decreases), shortest among valley-free paths, and a
//! next hop that lost its way to D (cap 0, or no path) is never chosen. Links between switches
//! of the same tier carry no routes.

use weft_topology::{LinkIdx, Peer, SwitchIdx, Topology};

pub const UNREACHABLE: u32 = u32::MAX;

/// One live link as seen from one of its switches. Links to the same neighbour are adjacent in
/// a list; the first of them carries their summed speed in `total`, the others 0. (16 bytes, as
/// every routing pass reads all adjacency: per-neighbour sums must not cost memory traffic.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adj {
    pub nb: u32,
    pub link: u32,
    /// Σ speeds of the live links to `nb` on the first of them, 0 on the others.
    pub total: u64,
}

/// Sorts one adjacency list by neighbour and recomputes `total`.
fn regroup(list: &mut [Adj], speed: &[u64]) {
    list.sort_unstable_by_key(|e| (e.nb, e.link));
    let mut i = 0;
    while i < list.len() {
        let mut j = i;
        let mut total = 0u64;
        while j < list.len() && list[j].nb == list[i].nb {
            total = total.saturating_add(speed[list[j].link as usize]);
            list[j].total = 0;
            j += 1;
        }
        list[i].total = total;
        i = j;
    }
}

/// Live fabric links, as compact adjacency.
pub struct Graph {
    /// Per link: its speed, bits/s.
    pub speed: Vec<u64>,
    /// Per switch: links toward higher tiers.
    pub up: Vec<Vec<Adj>>,
    /// Per switch: links toward lower tiers.
    pub down: Vec<Vec<Adj>>,
    pub tier: Vec<u8>,
    /// Switches ordered by tier, highest first.
    pub by_tier_desc: Vec<u32>,
}

impl Graph {
    /// Adds or removes one link (both directions), as when it goes up or down.
    pub fn set_link(&mut self, t: &Topology, link: LinkIdx, up: bool) {
        let l = &t.links[link];
        let (a, b) = (l.a.switch, l.b.switch);
        for (s, o) in [(a, b), (b, a)] {
            let list = if self.tier[o] > self.tier[s] {
                &mut self.up[s]
            } else if self.tier[o] < self.tier[s] {
                &mut self.down[s]
            } else {
                continue;
            };
            list.retain(|e| e.link as usize != link);
            if up {
                list.push(Adj {
                    nb: o as u32,
                    link: link as u32,
                    total: 0,
                });
            }
            regroup(list, &self.speed);
        }
    }

    pub fn build(t: &Topology, link_up: &dyn Fn(LinkIdx) -> bool) -> Graph {
        let n = t.switches.len();
        let mut up = vec![Vec::new(); n];
        let mut down = vec![Vec::new(); n];
        let tier: Vec<u8> = t.switches.iter().map(|s| s.tier()).collect();
        for (si, s) in t.switches.iter().enumerate() {
            for p in &s.ports {
                if let Peer::Switch { link } = p.peer {
                    if !link_up(link) {
                        continue;
                    }
                    let l = &t.links[link];
                    let o = l.other(si).switch;
                    let e = Adj {
                        nb: o as u32,
                        link: link as u32,
                        total: 0,
                    };
                    if tier[o] > tier[si] {
                        up[si].push(e);
                    } else if tier[o] < tier[si] {
                        down[si].push(e);
                    }
                }
            }
        }
        let speed: Vec<u64> = t.links.iter().map(|l| l.speed.bits_per_sec()).collect();
        for list in up.iter_mut().chain(down.iter_mut()) {
            regroup(list, &speed);
        }
        let mut by_tier_desc: Vec<u32> = (0..n as u32).collect();
        by_tier_desc.sort_by_key(|&s| std::cmp::Reverse(tier[s as usize]));
        Graph {
            speed,
            up,
            down,
            tier,
            by_tier_desc,
        }
    }
}

/// Per-destination routing state: kept per class of leaves so a link change can be propagated
/// instead of recomputed.
#[derive(Clone)]
pub struct Scratch {
    down: Vec<u32>,
    reach: Vec<u32>,
    cap: Vec<u64>,
    queue: Vec<u32>,
}

impl Scratch {
    pub fn new(n: usize) -> Self {
        Scratch {
            down: vec![UNREACHABLE; n],
            reach: vec![UNREACHABLE; n],
            cap: vec![0; n],
            queue: Vec::with_capacity(n),
        }
    }
}

/// Per-switch flags [`update`] uses, kept between calls so a link change does not allocate and
/// clear them once per destination class; every flag is clear again after each call.
#[derive(Debug, Default)]
pub struct Marks {
    queued: Vec<bool>,
    moved: Vec<bool>,
    set: Vec<u32>,
}

/// One next hop of a switch toward a destination: the link, and via[s,n], what its neighbour
/// carries on through it and its parallel links together. Hops to one neighbour are adjacent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hop {
    pub link: u32,
    pub neighbour: u32,
    pub capacity: u64,
}

#[inline]
fn hop(e: &Adj, via: u64) -> Hop {
    Hop {
        link: e.link,
        neighbour: e.nb,
        capacity: via,
    }
}

/// Computes, for destination leaf `dest`, every switch's next hops, calling `emit(s, hops)` for
/// each switch other than `dest` (hops empty when `dest` is unreachable from `s`).
pub fn route_to(g: &Graph, dest: SwitchIdx, sc: &mut Scratch, mut emit: impl FnMut(usize, &[Hop])) {
    let n = g.tier.len();
    sc.down.fill(UNREACHABLE);
    sc.reach.fill(UNREACHABLE);
    sc.cap.fill(0);
    sc.queue.clear();

    // Downward distances: BFS from dest over up-neighbours (the reverse of down links).
    sc.down[dest] = 0;
    sc.cap[dest] = u64::MAX;
    sc.queue.push(dest as u32);
    let mut head = 0;
    let mut hops: Vec<Hop> = Vec::with_capacity(64);
    while head < sc.queue.len() {
        let s = sc.queue[head] as usize;
        head += 1;
        for e in &g.up[s] {
            let u = e.nb as usize;
            if sc.down[u] == UNREACHABLE {
                sc.down[u] = sc.down[s] + 1;
                sc.queue.push(u as u32);
            }
        }
    }
    // BFS order is increasing distance, so a switch's down-neighbours are final before it.
    for qi in 1..sc.queue.len() {
        let s = sc.queue[qi] as usize;
        let want = sc.down[s] - 1;
        hops.clear();
        let mut cap = 0u64;
        let mut via = 0u64;
        for e in &g.down[s] {
            let m = e.nb as usize;
            if sc.down[m] == want && sc.cap[m] > 0 {
                // The first link to a neighbour sets via[s,n]; its parallels share it.
                if e.total != 0 {
                    via = e.total.min(sc.cap[m]);
                    cap = cap.saturating_add(via);
                }
                hops.push(hop(e, via));
            }
        }
        sc.cap[s] = cap;
        sc.reach[s] = sc.down[s];
        emit(s, &hops);
    }
    sc.reach[dest] = 0;

    // Everyone else goes up: highest tier first, so up-neighbours are final before.
    for &s in &g.by_tier_desc {
        let s = s as usize;
        if sc.down[s] != UNREACHABLE {
            continue;
        }
        let best = g.up[s]
            .iter()
            .filter(|e| sc.cap[e.nb as usize] > 0)
            .map(|e| sc.reach[e.nb as usize])
            .min()
            .unwrap_or(UNREACHABLE);
        hops.clear();
        let mut cap = 0u64;
        if best != UNREACHABLE {
            let mut via = 0u64;
            for e in &g.up[s] {
                let u = e.nb as usize;
                if sc.reach[u] == best && sc.cap[u] > 0 {
                    if e.total != 0 {
                        via = e.total.min(sc.cap[u]);
                        cap = cap.saturating_add(via);
                    }
                    hops.push(hop(e, via));
                }
            }
            sc.reach[s] = best + 1;
        }
        sc.cap[s] = cap;
        emit(s, &hops);
    }
    debug_assert!(n == sc.down.len());
}

/// The next hops of `s` toward `dest` under the state in `sc` (empty: unreachable).
pub fn hops_at(g: &Graph, sc: &Scratch, dest: SwitchIdx, s: SwitchIdx, out: &mut Vec<Hop>) {
    out.clear();
    if s == dest {
        return;
    }
    let mut via = 0u64;
    if sc.down[s] != UNREACHABLE {
        let want = sc.down[s] - 1;
        for e in &g.down[s] {
            let mi = e.nb as usize;
            if sc.down[mi] == want && sc.cap[mi] > 0 {
                if e.total != 0 {
                    via = e.total.min(sc.cap[mi]);
                }
                out.push(hop(e, via));
            }
        }
    } else if sc.reach[s] != UNREACHABLE {
        let want = sc.reach[s] - 1;
        for e in &g.up[s] {
            let ui = e.nb as usize;
            if sc.reach[ui] == want && sc.cap[ui] > 0 {
                if e.total != 0 {
                    via = e.total.min(sc.cap[ui]);
                }
                out.push(hop(e, via));
            }
        }
    }
}

/// Propagates a change of the links at switches `touched` through the state of destination
/// `dest`, calling `changed(s)` for every switch whose next hops may differ. Down distances only
/// depend on lower tiers and upward reach only on higher ones, so one pass up the tiers and one
/// pass down settle everything exactly.
pub fn update(
    g: &Graph,
    sc: &mut Scratch,
    marks: &mut Marks,
    dest: SwitchIdx,
    touched: &[SwitchIdx],
    changed: impl FnMut(usize),
) {
    let n = g.tier.len();
    marks.queued.resize(n, false);
    marks.moved.resize(n, false);
    let phase_b = settle_down(g, sc, marks, dest, touched);
    settle_up(g, sc, marks, dest, touched, phase_b, changed);
    // Every queued switch was popped (so unqueued); clear what moved for the next call.
    for &s in marks.set.iter() {
        marks.moved[s as usize] = false;
    }
    marks.set.clear();
}

/// Phase A of [`update`]: downward distances and capacities, lowest tier first. Returns the
/// switches phase B must visit.
fn settle_down(
    g: &Graph,
    sc: &mut Scratch,
    marks: &mut Marks,
    dest: SwitchIdx,
    touched: &[SwitchIdx],
) -> Vec<usize> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let Marks {
        queued,
        moved,
        set: moved_list,
    } = marks;
    let mut phase_b: Vec<usize> = touched.to_vec();
    let mut heap: BinaryHeap<Reverse<(u8, u32)>> = BinaryHeap::new();
    for &s in touched {
        if !queued[s] {
            queued[s] = true;
            heap.push(Reverse((g.tier[s], s as u32)));
        }
    }
    while let Some(Reverse((_, s))) = heap.pop() {
        let s = s as usize;
        queued[s] = false;
        if s == dest {
            continue;
        }
        let down = g.down[s]
            .iter()
            .map(|e| sc.down[e.nb as usize])
            .filter(|&d| d != UNREACHABLE)
            .min()
            .map_or(UNREACHABLE, |d| d + 1);
        let cap = if down == UNREACHABLE {
            sc.cap[s] // settled in phase B
        } else {
            g.down[s]
                .iter()
                .filter(|e| {
                    e.total != 0 && sc.down[e.nb as usize] == down - 1 && sc.cap[e.nb as usize] > 0
                })
                .fold(0u64, |a, e| {
                    a.saturating_add(e.total.min(sc.cap[e.nb as usize]))
                })
        };
        // Its hop set may differ even when its totals do not (one neighbour lost what another
        // gained), so phase B revisits it either way.
        phase_b.push(s);
        if down != sc.down[s] || (down != UNREACHABLE && cap != sc.cap[s]) {
            if !moved[s] {
                moved[s] = true;
                moved_list.push(s as u32);
            }
            let was_down = sc.down[s];
            sc.down[s] = down;
            if down != UNREACHABLE {
                sc.cap[s] = cap;
                sc.reach[s] = down;
            } else if was_down != UNREACHABLE {
                sc.reach[s] = UNREACHABLE;
                sc.cap[s] = 0;
            }
            for e in &g.up[s] {
                let u = e.nb as usize;
                if !queued[u] {
                    queued[u] = true;
                    heap.push(Reverse((g.tier[u], u as u32)));
                }
            }
        }
    }
    phase_b
}

/// Phase B of [`update`]: upward reach and capacities, highest tier first, from the switches
/// `phase_b`; `changed(s)` for every switch whose next hops may differ.
fn settle_up(
    g: &Graph,
    sc: &mut Scratch,
    marks: &mut Marks,
    dest: SwitchIdx,
    touched: &[SwitchIdx],
    phase_b: Vec<usize>,
    mut changed: impl FnMut(usize),
) {
    use std::collections::BinaryHeap;
    let Marks {
        queued,
        moved,
        set: moved_list,
    } = marks;
    let mut heap: BinaryHeap<(u8, u32)> = BinaryHeap::new();
    for s in phase_b {
        if !queued[s] {
            queued[s] = true;
            heap.push((g.tier[s], s as u32));
        }
    }
    while let Some((_, s)) = heap.pop() {
        let s = s as usize;
        queued[s] = false;
        if s == dest {
            continue;
        }
        let (reach, cap) = reach_up(g, sc, s);
        let now_moved = reach != sc.reach[s] || cap != sc.cap[s];
        sc.reach[s] = reach;
        sc.cap[s] = cap;
        if now_moved && !moved[s] {
            moved[s] = true;
            moved_list.push(s as u32);
        }
        // Its next hops read its down-neighbours (going down) or up-neighbours (going up).
        let relevant = if sc.down[s] != UNREACHABLE {
            &g.down[s]
        } else {
            &g.up[s]
        };
        if moved[s] || touched.contains(&s) || relevant.iter().any(|e| moved[e.nb as usize]) {
            changed(s);
        }
        // Phase A already stored its new totals, so `moved` (not just this comparison) decides
        // whether the switches that read it must look again.
        if moved[s] || touched.contains(&s) {
            for e in &g.down[s] {
                let m = e.nb as usize;
                if !queued[m] {
                    queued[m] = true;
                    heap.push((g.tier[m], m as u32));
                }
            }
        }
    }
}

/// Switch `s`'s (reach, capacity) toward the destination: its down distance if it has one,
/// else one more than its best up-neighbour's reach, with their capacity.
fn reach_up(g: &Graph, sc: &Scratch, s: usize) -> (u32, u64) {
    if sc.down[s] != UNREACHABLE {
        return (sc.down[s], sc.cap[s]);
    }
    let best = g.up[s]
        .iter()
        .filter(|e| sc.cap[e.nb as usize] > 0)
        .map(|e| sc.reach[e.nb as usize])
        .min()
        .unwrap_or(UNREACHABLE);
    if best == UNREACHABLE {
        return (UNREACHABLE, 0);
    }
    let cap = g.up[s]
        .iter()
        .filter(|e| e.total != 0 && sc.reach[e.nb as usize] == best && sc.cap[e.nb as usize] > 0)
        .fold(0u64, |a, e| {
            a.saturating_add(e.total.min(sc.cap[e.nb as usize]))
        });
    (best + 1, cap)
}

/// Reduces raw capacities to small integer weights whose sum fits a group (`max_sum`), keeping
/// their ratios as closely as integers allow.
pub fn weights(caps: &[u64], max_sum: u32) -> Vec<u32> {
    reduce(caps.iter().map(|&c| u128::from(c)).collect(), max_sum)
}

/// Weights of the links of one next-hop set in which some neighbour is reached over parallel
/// links: each link's share of what its neighbour carries on, `via × speed / Σ speeds of the
/// links to that neighbour`, reduced like [`weights`]. Exact fractions where the numbers allow
/// (speeds are multiples of a common unit in practice), else rounded shares.
pub fn link_weights(hops: &[Hop], speed_of: impl Fn(u32) -> u64, max_sum: u32) -> Vec<u32> {
    let speed: Vec<u64> = hops.iter().map(|h| speed_of(h.link)).collect();
    // Every live link to a next-hop neighbour is in the set, so its parallels sum here.
    let total: Vec<u64> = hops
        .iter()
        .map(|h| {
            hops.iter()
                .zip(&speed)
                .filter(|(o, _)| o.neighbour == h.neighbour)
                .fold(0u64, |a, (_, s)| a.saturating_add(*s))
        })
        .collect();
    let unit = hops
        .iter()
        .zip(speed.iter().zip(&total))
        .fold(0u64, |g, (h, (s, t))| gcd(gcd(gcd(g, h.capacity), *s), *t))
        .max(1);
    let exact = || -> Option<Vec<u128>> {
        let mut den: u128 = 1;
        for t in &total {
            let t = u128::from(t / unit).max(1);
            den = den.checked_mul(t / gcd128(den, t))?;
        }
        hops.iter()
            .zip(speed.iter().zip(&total))
            .map(|(h, (s, t))| {
                let t = u128::from(t / unit).max(1);
                u128::from(h.capacity / unit)
                    .checked_mul(u128::from(s / unit))?
                    .checked_mul(den / t)
            })
            .collect()
    };
    let nums = exact().unwrap_or_else(|| {
        let shares: Vec<f64> = hops
            .iter()
            .zip(speed.iter().zip(&total))
            .map(|(h, (s, t))| h.capacity as f64 * *s as f64 / (*t).max(1) as f64)
            .collect();
        let top = shares
            .iter()
            .copied()
            .fold(0.0, f64::max)
            .max(f64::MIN_POSITIVE);
        shares
            .iter()
            .map(|x| ((x / top) * 1e9).round().max(1.0) as u128)
            .collect()
    });
    reduce(nums, max_sum)
}

/// Whether some neighbour appears twice in a next-hop set (hops to one neighbour are adjacent).
pub fn has_parallel(hops: &[Hop]) -> bool {
    hops.windows(2).any(|w| w[0].neighbour == w[1].neighbour)
}

fn reduce(caps: Vec<u128>, max_sum: u32) -> Vec<u32> {
    if caps.is_empty() {
        return Vec::new();
    }
    // The common case (every next hop equally good) needs no arithmetic.
    if caps.iter().all(|&c| c == caps[0]) {
        return vec![1; caps.len()];
    }
    let mut g = 0u128;
    for &c in &caps {
        g = gcd128(g, c);
        if g == 1 {
            break;
        }
    }
    let g = g.max(1);
    let mut w: Vec<u128> = caps.iter().map(|c| c / g).collect();
    let sum: u128 = w.iter().fold(0u128, |a, &x| a.saturating_add(x));
    let limit = u128::from(max_sum.max(caps.len() as u32));
    if sum > limit {
        // Largest remainders: the weights sum to exactly `limit` and each is within one unit of
        // its ideal share, so no share is off by more than 1/limit. (Flooring alone loses up to
        // one unit per member, which shifts every share.)
        let scale = limit as f64 / sum as f64;
        let ideal: Vec<f64> = w.iter().map(|&x| x as f64 * scale).collect();
        w = ideal.iter().map(|&x| (x.floor() as u128).max(1)).collect();
        let mut total: u128 = w.iter().sum();
        let mut order: Vec<usize> = (0..w.len()).collect();
        order.sort_by(|&a, &b| {
            let ra = ideal[a] - w[a] as f64;
            let rb = ideal[b] - w[b] as f64;
            rb.total_cmp(&ra).then(a.cmp(&b))
        });
        for &i in &order {
            if total >= limit {
                break;
            }
            if ideal[i] > w[i] as f64 {
                w[i] += 1;
                total += 1;
            }
        }
        // Members raised to 1 may leave the sum above the limit: take from the most over.
        while total > limit {
            let Some(i) = (0..w.len())
                .filter(|&i| w[i] > 1)
                .max_by(|&a, &b| (w[a] as f64 - ideal[a]).total_cmp(&(w[b] as f64 - ideal[b])))
            else {
                break;
            };
            w[i] -= 1;
            total -= 1;
        }
    }
    w.into_iter()
        .map(|x| x.min(u128::from(u32::MAX)) as u32)
        .collect()
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn gcd128(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_keep_ratios_and_fit_the_group() {
        assert_eq!(weights(&[100, 100, 100], 256), vec![1, 1, 1]);
        assert_eq!(weights(&[400, 200], 256), vec![2, 1]);
        assert_eq!(weights(&[31, 32], 256), vec![31, 32]);
        let w = weights(&[1_000_003, 1_000_000, 7], 16);
        assert!(w.iter().sum::<u32>() <= 16, "{w:?}");
        assert!(w.iter().all(|&x| x >= 1));
        // Scaled down, every weight stays within one unit of its ideal share of the group.
        let caps = [49u64, 49, 98, 48, 12, 24];
        let w = weights(&caps, 256);
        assert_eq!(w.iter().sum::<u32>(), 256, "{w:?}");
        for (c, w) in caps.iter().zip(&w) {
            let ideal = *c as f64 * 256.0 / 280.0;
            assert!((f64::from(*w) - ideal).abs() < 1.0, "{w} vs {ideal}");
        }
    }

    fn h(link: u32, nb: u32, capacity: u64) -> Hop {
        Hop {
            link,
            neighbour: nb,
            capacity,
        }
    }

    #[test]
    fn parallel_links_share_their_neighbours_capacity_by_speed() {
        const G: u64 = 1_000_000_000;
        // Two 100G links to a spine that carries on 100G, one to a spine that carries on 200G:
        // the capacity behind them is 1:2, so the links split 1:1:2 (not 1:1:1).
        let hops = [h(0, 1, 100 * G), h(1, 1, 100 * G), h(2, 2, 100 * G)];
        assert!(has_parallel(&hops));
        assert_eq!(link_weights(&hops, |_| 100 * G, 256), vec![1, 1, 2]);
        // A 100G and a 400G link to one neighbour carrying on 250G, and a 100G link elsewhere:
        // shares 50G, 200G and 100G.
        let speeds = [100 * G, 400 * G, 100 * G];
        let hops = [h(0, 1, 250 * G), h(1, 1, 250 * G), h(2, 2, 100 * G)];
        assert_eq!(
            link_weights(&hops, |l| speeds[l as usize], 256),
            vec![1, 4, 2]
        );
    }

    #[test]
    fn without_parallel_links_the_shares_are_the_capacities() {
        const G: u64 = 1_000_000_000;
        let hops = [h(0, 1, 400 * G), h(1, 2, 200 * G)];
        assert!(!has_parallel(&hops));
        assert_eq!(
            link_weights(&hops, |_| 400 * G, 256),
            weights(&[400 * G, 200 * G], 256)
        );
    }
}
