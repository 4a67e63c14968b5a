//! Every destination leaf prefix, and the tree of supernets that sibling prefixes may merge
//! into. Built once per fabric; per switch, merging is then one pass of integer compares
//! instead of prefix arithmetic over thousands of routes ([`MergePlan::evaluate`]), and after a
//! link change only the paths from the changed leaves to the root are looked at again
//! ([`MergePlan::patch`]).
//!
//! A switch's routes toward destination leaves are the tree's *emitted* nodes: a node whose
//! leaves all have one key (next-hop set, per-packet allowed) while its parent's do not. The
//! emitted nodes of a switch are disjoint, and a node's key is that of the emitted node at or
//! above it (none: its leaves disagree), which is all a patch needs to know of the rest of the
//! tree.

use ipnet::IpNet;

/// A leaf's or node's key packed as `set << 1 | per-packet allowed`; [`ABSENT`] for none.
pub(crate) type Packed = u64;
/// No key: the switch's own leaf, or a node whose leaves disagree.
pub(crate) const ABSENT: Packed = u64::MAX;

pub(crate) fn pack(set: u32, ok: bool) -> Packed {
    u64::from(set) << 1 | u64::from(ok)
}

pub(crate) fn unpack(v: Packed) -> (u32, bool) {
    ((v >> 1) as u32, v & 1 == 1)
}

const NONE: u32 = u32::MAX;

/// A change of one emitted node: (node, key before, key after); `None`: not emitted.
pub(crate) type NodeChange = (u32, Option<Packed>, Option<Packed>);

#[derive(Debug, Default)]
pub(crate) struct MergePlan {
    /// (prefix, destination index), sorted by address after `build`.
    pub leaves: Vec<(IpNet, u32)>,
    /// Every node: the leaves first, then the supernets (a parent after its children).
    pub nodes: Vec<IpNet>,
    /// Bottom-up merges: (left child, right child, parent).
    ops: Vec<(u32, u32, u32)>,
    parent: Vec<u32>,
    /// Children of supernet `leaves.len() + i`.
    children: Vec<(u32, u32)>,
    /// Leaf nodes of each destination (IPv4 and IPv6 prefix).
    of_dest: Vec<Vec<u32>>,
}

impl MergePlan {
    pub fn build(&mut self, dests: usize) {
        self.leaves
            .sort_by_key(|(n, _)| (n.network(), n.prefix_len()));
        self.nodes = self.leaves.iter().map(|l| l.0).collect();
        // The same one-pass stack merge as a per-switch aggregation, ignoring next hops: every
        // pair of sibling prefixes present gets a parent node.
        let mut stack: Vec<u32> = Vec::with_capacity(self.nodes.len());
        for i in 0..self.leaves.len() as u32 {
            stack.push(i);
            while stack.len() >= 2 {
                let (r, l) = (stack[stack.len() - 1], stack[stack.len() - 2]);
                let (a, b) = (self.nodes[l as usize], self.nodes[r as usize]);
                match (a.supernet(), b.supernet()) {
                    (Some(pa), Some(pb))
                        if a != b && a.prefix_len() == b.prefix_len() && pa == pb =>
                    {
                        let p = self.nodes.len() as u32;
                        self.nodes.push(pa);
                        self.ops.push((l, r, p));
                        self.children.push((l, r));
                        stack.truncate(stack.len() - 2);
                        stack.push(p);
                    }
                    _ => break,
                }
            }
        }
        self.parent = vec![NONE; self.nodes.len()];
        for &(l, r, p) in &self.ops {
            self.parent[l as usize] = p;
            self.parent[r as usize] = p;
        }
        self.of_dest = vec![Vec::new(); dests];
        for (i, &(_, d)) in self.leaves.iter().enumerate() {
            self.of_dest[d as usize].push(i as u32);
        }
    }

    /// The leaf nodes of destination `d`.
    pub fn leaves_of(&self, d: usize) -> &[u32] {
        &self.of_dest[d]
    }

    fn is_leaf(&self, n: u32) -> bool {
        (n as usize) < self.leaves.len()
    }

    /// The emitted nodes of one switch, ascending: `key(dest)` is its packed key toward a
    /// destination, [`ABSENT`] for its own leaf (never merged, never routed).
    pub fn evaluate(
        &self,
        key: impl Fn(u32) -> Packed,
        aggregate: bool,
        out: &mut Vec<(u32, Packed)>,
    ) {
        thread_local! {
            static VALS: std::cell::RefCell<Vec<Packed>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        VALS.with_borrow_mut(|vals| {
            vals.clear();
            vals.extend(self.leaves.iter().map(|&(_, d)| key(d)));
            if !aggregate {
                out.extend(
                    vals.iter()
                        .enumerate()
                        .filter(|(_, v)| **v != ABSENT)
                        .map(|(n, v)| (n as u32, *v)),
                );
                return;
            }
            vals.resize(self.nodes.len(), ABSENT);
            for &(l, r, p) in &self.ops {
                let (a, b) = (vals[l as usize], vals[r as usize]);
                vals[p as usize] = if a == b { a } else { ABSENT };
            }
            for (n, &v) in vals.iter().enumerate() {
                if v != ABSENT {
                    let p = self.parent[n];
                    if p == NONE || vals[p as usize] == ABSENT {
                        out.push((n as u32, v));
                    }
                }
            }
        });
    }

    /// What changes among a switch's emitted nodes `merged` (ascending) when the leaves
    /// `changed` take the keys `key(leaf node)`: only the changed leaves, their ancestors and
    /// those ancestors' other children can start or stop being emitted. Pushes every change
    /// onto `out`; `affected` is scratch.
    pub fn patch(
        &self,
        merged: &[(u32, Packed)],
        changed: &[u32],
        key: impl Fn(u32) -> Packed,
        aggregate: bool,
        affected: &mut Vec<Affected>,
        out: &mut Vec<NodeChange>,
    ) {
        let old = |n: u32| {
            merged
                .binary_search_by_key(&n, |e| e.0)
                .ok()
                .map(|i| merged[i].1)
        };
        if !aggregate {
            for &n in changed {
                let v = key(n);
                let new = (v != ABSENT).then_some(v);
                let was = old(n);
                if was != new {
                    out.push((n, was, new));
                }
            }
            return;
        }
        // The changed leaves and all their ancestors, ascending (a parent's id is above its
        // children's, so ascending is bottom-up).
        affected.clear();
        for &leaf in changed {
            let mut n = leaf;
            while n != NONE {
                affected.push(Affected {
                    node: n,
                    cover: ABSENT,
                    now: ABSENT,
                });
                n = self.parent[n as usize];
            }
        }
        affected.sort_unstable_by_key(|a| a.node);
        affected.dedup_by_key(|a| a.node);
        let find = |a: &[Affected], n: u32| a.binary_search_by_key(&n, |e| e.node).ok();
        // Top-down: the key each affected node had, and the key of the emitted node at or above
        // it (every ancestor of an affected node is affected).
        for i in (0..affected.len()).rev() {
            let n = affected[i].node;
            let p = self.parent[n as usize];
            let above = match find(affected, p) {
                Some(j) if p != NONE => affected[j].cover,
                _ => ABSENT,
            };
            affected[i].cover = old(n).unwrap_or(above);
        }
        // An unaffected child of an affected node keeps its key: its own if it is emitted, else
        // that of the emitted node above it, else none.
        let unaffected = |a: &[Affected], c: u32| {
            old(c)
                .unwrap_or_else(|| find(a, self.parent[c as usize]).map_or(ABSENT, |j| a[j].cover))
        };
        // Bottom-up: the new keys.
        for i in 0..affected.len() {
            let n = affected[i].node;
            affected[i].now = if self.is_leaf(n) {
                key(n)
            } else {
                let (l, r) = self.children[n as usize - self.leaves.len()];
                let val = |c: u32| match find(&affected[..i], c) {
                    Some(j) => affected[j].now,
                    None => unaffected(affected, c),
                };
                let (a, b) = (val(l), val(r));
                if a == b { a } else { ABSENT }
            };
        }
        // Whether a node is emitted depends on its key and its parent's.
        let parent_now = |a: &[Affected], c: u32| {
            let p = self.parent[c as usize];
            if p == NONE {
                ABSENT
            } else {
                find(a, p).map_or(ABSENT, |j| a[j].now)
            }
        };
        for i in 0..affected.len() {
            let n = affected[i].node;
            let v = affected[i].now;
            let emitted = (v != ABSENT && parent_now(affected, n) == ABSENT).then_some(v);
            let was = old(n);
            if was != emitted {
                out.push((n, was, emitted));
            }
            if !self.is_leaf(n) {
                let (l, r) = self.children[n as usize - self.leaves.len()];
                for c in [l, r] {
                    if find(affected, c).is_some() {
                        continue;
                    }
                    let v = unaffected(affected, c);
                    let emitted = (v != ABSENT && affected[i].now == ABSENT).then_some(v);
                    let was = old(c);
                    if was != emitted {
                        out.push((c, was, emitted));
                    }
                }
            }
        }
    }
}

/// One node on the paths from changed leaves to the root, during [`MergePlan::patch`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Affected {
    node: u32,
    /// Its key before: that of the emitted node at or above it, if any.
    cover: Packed,
    /// Its key after.
    now: Packed,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(prefixes: &[&str]) -> MergePlan {
        let mut m = MergePlan::default();
        for (d, p) in prefixes.iter().enumerate() {
            m.leaves.push((p.parse().expect("prefix"), d as u32));
        }
        m.build(prefixes.len());
        m
    }

    fn apply(merged: &mut Vec<(u32, Packed)>, changes: &[NodeChange]) {
        for &(n, _, new) in changes {
            merged.retain(|e| e.0 != n);
            if let Some(v) = new {
                merged.push((n, v));
            }
        }
        merged.sort_unstable();
    }

    #[test]
    fn a_patch_of_changed_leaves_gives_what_a_whole_evaluation_gives() {
        let prefixes: Vec<String> = (0..16).map(|i| format!("10.0.{i}.0/24")).collect();
        let refs: Vec<&str> = prefixes.iter().map(String::as_str).collect();
        let m = plan(&refs);
        // Every sequence of single-leaf changes over keys {0, 1, 2, absent}.
        let mut keys: Vec<Packed> = vec![pack(0, true); 16];
        keys[5] = ABSENT; // the switch's own leaf
        for aggregate in [true, false] {
            let mut merged = Vec::new();
            m.evaluate(|d| keys[d as usize], aggregate, &mut merged);
            let mut k = keys.clone();
            let mut x: u64 = 7;
            for _ in 0..500 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let leaf = (x >> 33) as usize % 16;
                if leaf == 5 {
                    continue;
                }
                k[leaf] = pack((x >> 20) as u32 % 3, true);
                let node = m.leaves_of(leaf)[0];
                let mut changes = Vec::new();
                let mut scratch = Vec::new();
                m.patch(
                    &merged,
                    &[node],
                    |n| k[m.leaves[n as usize].1 as usize],
                    aggregate,
                    &mut scratch,
                    &mut changes,
                );
                apply(&mut merged, &changes);
                let mut whole = Vec::new();
                m.evaluate(|d| k[d as usize], aggregate, &mut whole);
                assert_eq!(merged, whole, "after leaf {leaf} → {:?}", k[leaf]);
            }
        }
    }
}
