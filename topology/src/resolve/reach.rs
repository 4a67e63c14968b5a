//! Reachability as the compiler will route: every host must reach every host of its plane over
//! a *valley-free* path of administratively up links — up the tiers, then down, never along a
//! link between two switches of the same tier (such paths are what keeps PFC free of deadlock).
//!
//! Two hosts' switches A and B are joined by such a path exactly when some switch lies above
//! both (reachable by going only up from each); and then also some *top* switch (one with no
//! up link) does. So each switch gets the set of top switches above it as a bit set, computed
//! highest tier first, and two switches connect when their sets meet. Switches with the same
//! set form one group; only groups are compared.

use std::collections::HashMap;

use super::ctx::{Ctx, Draft};
use crate::model::{Role, SwitchSpec};
use crate::names::display_name;
use crate::topo::{Host, Link, Switch};

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

fn link_up(switches: &[Switch], l: &Link) -> bool {
    switches[l.a.switch].ports[l.a.port].admin_up && switches[l.b.switch].ports[l.b.port].admin_up
}

pub(super) fn check(
    cx: &mut Ctx,
    drafts: &[Draft<SwitchSpec>],
    switches: &[Switch],
    links: &[Link],
    hosts: &[Host],
) {
    if check_partition(cx, switches, links, hosts) {
        check_valley_free(cx, drafts, switches, links, hosts);
    }
}

/// Hosts of one plane in different components of up links. True when there are none.
fn check_partition(cx: &mut Ctx, switches: &[Switch], links: &[Link], hosts: &[Host]) -> bool {
    let mut parent: Vec<usize> = (0..switches.len()).collect();
    for l in links {
        if link_up(switches, l) {
            let (a, b) = (find(&mut parent, l.a.switch), find(&mut parent, l.b.switch));
            parent[a] = b;
        }
    }
    // Hosts of different planes never need to meet; within a plane all must.
    let mut first_of_plane: HashMap<Option<u32>, (usize, usize)> = HashMap::new();
    let mut reported: std::collections::HashSet<(Option<u32>, usize)> = Default::default();
    let mut ok = true;
    for (hi, h) in hosts.iter().enumerate() {
        let comp = find(&mut parent, h.switch);
        match first_of_plane.get(&h.plane) {
            None => {
                first_of_plane.insert(h.plane, (hi, comp));
            }
            Some(&(first, c)) if c != comp => {
                ok = false;
                if reported.insert((h.plane, comp)) {
                    let msg = format!(
                        "host {} cannot reach host {}: the fabric is partitioned (no path of up links between {} and {})",
                        h.name,
                        hosts[first].name,
                        switches[h.switch].name,
                        switches[hosts[first].switch].name
                    );
                    cx.err(&h.origin, format!("host {}", h.name), msg);
                }
            }
            Some(_) => {}
        }
    }
    ok
}

/// A set of switches over which some switches' top switches are grouped.
struct Group {
    plane: Option<u32>,
    /// Offset of its bits in the bit array.
    bits: usize,
    switches: Vec<usize>,
    host: usize,
}

fn check_valley_free(
    cx: &mut Ctx,
    drafts: &[Draft<SwitchSpec>],
    switches: &[Switch],
    links: &[Link],
    hosts: &[Host],
) {
    let n = switches.len();
    let tier: Vec<u8> = switches.iter().map(Switch::tier).collect();
    let mut up: Vec<Vec<u32>> = vec![Vec::new(); n];
    for l in links {
        let (a, b) = (l.a.switch, l.b.switch);
        if !link_up(switches, l) || tier[a] == tier[b] {
            continue;
        }
        let (lo, hi) = if tier[a] < tier[b] { (a, b) } else { (b, a) };
        up[lo].push(hi as u32);
    }
    let mut top_id = vec![u32::MAX; n];
    let mut tops = 0u32;
    for s in 0..n {
        if up[s].is_empty() {
            top_id[s] = tops;
            tops += 1;
        }
    }
    let words = (tops as usize).div_ceil(64).max(1);
    let mut bits = vec![0u64; n * words];
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&s| std::cmp::Reverse(tier[s]));
    for &s in &order {
        if top_id[s] != u32::MAX {
            let t = top_id[s] as usize;
            bits[s * words + t / 64] |= 1 << (t % 64);
            continue;
        }
        for &u in &up[s] {
            let u = u as usize;
            for w in 0..words {
                bits[s * words + w] |= bits[u * words + w];
            }
        }
    }

    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<(Option<u32>, &[u64]), usize> = HashMap::new();
    let mut seen: HashMap<(Option<u32>, usize), ()> = HashMap::new();
    for (hi, h) in hosts.iter().enumerate() {
        if seen.insert((h.plane, h.switch), ()).is_some() {
            continue;
        }
        let key = (h.plane, &bits[h.switch * words..(h.switch + 1) * words]);
        match index.get(&key) {
            Some(&g) => groups[g].switches.push(h.switch),
            None => {
                index.insert(key, groups.len());
                groups.push(Group {
                    plane: h.plane,
                    bits: h.switch * words,
                    switches: vec![h.switch],
                    host: hi,
                });
            }
        }
    }
    let meets = |a: &Group, b: &Group| (0..words).any(|w| bits[a.bits + w] & bits[b.bits + w] != 0);
    // Groups that cannot reach each other; then report, one at a time, the group cut off from
    // the most others (the odd one out), until what remains is connected.
    let mut apart: Vec<Vec<usize>> = vec![Vec::new(); groups.len()];
    for i in 0..groups.len() {
        for j in i + 1..groups.len() {
            if groups[i].plane == groups[j].plane && !meets(&groups[i], &groups[j]) {
                apart[i].push(j);
                apart[j].push(i);
            }
        }
    }
    let mut removed = vec![false; groups.len()];
    loop {
        let live = |g: usize, removed: &[bool]| apart[g].iter().filter(|&&o| !removed[o]).count();
        let worst = (0..groups.len())
            .filter(|&g| !removed[g])
            .map(|g| {
                (
                    live(g, &removed),
                    std::cmp::Reverse(groups[g].switches.len()),
                    g,
                )
            })
            .filter(|x| x.0 > 0)
            .max();
        let Some((_, _, g)) = worst else { break };
        let other = apart[g].iter().copied().find(|&o| !removed[o]).unwrap_or(g);
        removed[g] = true;
        report(cx, drafts, switches, hosts, &groups[g], &groups[other]);
    }
}

fn report(
    cx: &mut Ctx,
    drafts: &[Draft<SwitchSpec>],
    switches: &[Switch],
    hosts: &[Host],
    g: &Group,
    other: &Group,
) {
    let s = g.switches[0];
    let sw = &switches[s];
    let o = &switches[other.switches[0]];
    let more = if g.switches.len() > 1 {
        format!(" (and {} more switches alike)", g.switches.len() - 1)
    } else {
        String::new()
    };
    let msg = format!(
        "hosts on {} cannot reach hosts on {} (e.g. {} → {}){more}: no valley-free path joins the two switches (up the tiers, then down, never along a link between two switches of the same tier)",
        sw.name, o.name, hosts[g.host].name, hosts[other.host].name
    );
    let d = &drafts[s];
    let role_path = ["role", "tier"]
        .iter()
        .map(|f| format!("{}.{f}", d.origin))
        .find(|p| cx.written(p));
    let (at, help) = match role_path {
        Some(p) if sw.role != Role::Leaf => (
            p,
            format!(
                "{} is a {} here: with hosts on it, it needs a link to a higher tier than its own, or `role: leaf`",
                display_name(&sw.name),
                sw.role
            ),
        ),
        _ => (
            sw.origin.clone(),
            "routes follow valley-free paths only (against PFC deadlock): give both switches a common switch above them".to_string(),
        ),
    };
    cx.err_help(&at, format!("switch {}", display_name(&sw.name)), msg, help);
}
