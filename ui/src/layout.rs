//! The fabric as the page draws it, computed once from the intent: tiers top to bottom and
//! switches in intent order within a tier (as `weft graph` ranks them), every link (switch to
//! switch, then host links), and the groups a large fabric is folded into — pods (the switches
//! below the top tier that reach each other without it), planes, and top-tier switches that
//! serve the same position in every pod — so that k=32 (1,280 switches) opens as 32 pods and
//! 16 core groups, each expanded on click. Pure: tested on the examples and a k=32 fat-tree.

use std::collections::BTreeMap;

use serde::Serialize;
use weft_topology::{Peer, Topology};

/// Above this many switches the page opens with groups folded.
pub const FOLD_ABOVE: usize = 64;
/// Hosts are drawn (below their leaf) up to this many.
pub const HOSTS_DRAWN: usize = 64;
/// A tier without structure is folded into chunks of this many switches.
const CHUNK: usize = 16;

#[derive(Debug, Clone, Serialize)]
pub struct NodeL {
    pub name: String,
    pub role: &'static str,
    pub tier: u8,
    /// Index into [`Layout::groups`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupL {
    pub name: String,
    /// Switch indices, in intent order.
    pub members: Vec<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LinkL {
    /// `leaf1:Ethernet8 ↔ spine1:Ethernet0` (`weft status`'s name; for a host link
    /// `leaf1-h1 ↔ leaf1:Ethernet0`, `weft top`'s).
    pub name: String,
    /// Switch index of end a.
    pub a: usize,
    /// Switch index of end b, or host index when `host`.
    pub b: usize,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub host: bool,
    /// Port index at each switch end (b's is 0 for a host link).
    #[serde(skip)]
    pub ap: usize,
    #[serde(skip)]
    pub bp: usize,
    pub gbps: f64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub admin_down: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostL {
    pub name: String,
    pub leaf: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Layout {
    pub fabric: String,
    /// Tiers present, top first.
    pub tiers: Vec<u8>,
    pub switches: Vec<NodeL>,
    pub groups: Vec<GroupL>,
    /// Switch links first (index = the topology's link index), then one per host.
    pub links: Vec<LinkL>,
    pub hosts: Vec<HostL>,
    /// Open with groups folded.
    pub fold: bool,
    /// Draw the hosts.
    pub draw_hosts: bool,
}

/// Union-find over switch indices.
struct Sets(Vec<usize>);

impl Sets {
    fn find(&mut self, i: usize) -> usize {
        let mut r = i;
        while self.0[r] != r {
            r = self.0[r];
        }
        let mut j = i;
        while self.0[j] != r {
            let next = self.0[j];
            self.0[j] = r;
            j = next;
        }
        r
    }
    fn join(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.0[ra.max(rb)] = ra.min(rb);
        }
    }
}

/// `pod3` when every member is named `pod3-…`; else `first … last`.
fn group_name(t: &Topology, members: &[usize]) -> String {
    let names: Vec<&str> = members
        .iter()
        .map(|&i| t.switches[i].name.as_str())
        .collect();
    if let Some(prefix) = names.first().and_then(|n| n.split_once('-')).map(|p| p.0)
        && names
            .iter()
            .all(|n| n.split_once('-').is_some_and(|p| p.0 == prefix))
    {
        return prefix.to_string();
    }
    match (names.first(), names.last()) {
        (Some(a), Some(b)) if names.len() > 1 => format!("{a} … {b}"),
        (Some(a), _) => a.to_string(),
        _ => String::new(),
    }
}

/// Groups: planes where the intent has them; else, with three tiers or more, the pods (switches
/// below the top tier connected without it) and the top tier by the position its neighbours
/// hold in their pods; what is left, in chunks of [`CHUNK`] per tier.
fn groups(t: &Topology) -> Vec<Vec<usize>> {
    let n = t.switches.len();
    let top = t.switches.iter().map(|s| s.tier()).max().unwrap_or(1);
    let tiers = {
        let mut v: Vec<u8> = t.switches.iter().map(|s| s.tier()).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    let mut keyed: BTreeMap<(u8, String), Vec<usize>> = BTreeMap::new();
    if t.switches.iter().any(|s| s.plane.is_some()) {
        for (i, s) in t.switches.iter().enumerate() {
            if let Some(p) = s.plane {
                keyed.entry((0, format!("{p:08}"))).or_default().push(i);
            }
        }
    } else if tiers >= 3 {
        let mut sets = Sets((0..n).collect());
        for l in &t.links {
            let (a, b) = (l.a.switch, l.b.switch);
            if t.switches[a].tier() < top && t.switches[b].tier() < top {
                sets.join(a, b);
            }
        }
        // Position of each switch within its pod's tier.
        let mut rank = vec![0usize; n];
        let mut seen: BTreeMap<(usize, u8), usize> = BTreeMap::new();
        for (i, s) in t.switches.iter().enumerate() {
            if s.tier() < top {
                let root = sets.find(i);
                keyed.entry((1, format!("{root:08}"))).or_default().push(i);
                let c = seen.entry((root, s.tier())).or_default();
                rank[i] = *c;
                *c += 1;
            }
        }
        for (i, s) in t.switches.iter().enumerate() {
            if s.tier() == top {
                let mut sig: Vec<usize> = t
                    .neighbours(i)
                    .filter(|(_, _, e)| t.switches[e.switch].tier() < top)
                    .map(|(_, _, e)| rank[e.switch])
                    .collect();
                sig.sort_unstable();
                sig.dedup();
                keyed.entry((2, format!("{sig:?}"))).or_default().push(i);
            }
        }
    }
    let mut out: Vec<Vec<usize>> = keyed.into_values().filter(|g| g.len() > 1).collect();
    let mut in_group = vec![false; n];
    for g in &out {
        for &i in g {
            in_group[i] = true;
        }
    }
    let mut rest: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
    for (i, s) in t.switches.iter().enumerate() {
        if !in_group[i] {
            rest.entry(s.tier()).or_default().push(i);
        }
    }
    for list in rest.values() {
        if list.len() > CHUNK {
            out.extend(list.chunks(CHUNK).map(<[usize]>::to_vec));
        }
    }
    // Intent order: groups by their first member.
    out.sort_by_key(|g| g.first().copied().unwrap_or(usize::MAX));
    out
}

/// The page's layout of `t`.
pub fn layout(t: &Topology) -> Layout {
    let mut switches: Vec<NodeL> = t
        .switches
        .iter()
        .map(|s| NodeL {
            name: s.name.clone(),
            role: s.role.as_str(),
            tier: s.tier(),
            group: None,
        })
        .collect();
    let mut gl = Vec::new();
    for members in groups(t) {
        let gi = gl.len();
        for &i in &members {
            switches[i].group = Some(gi);
        }
        gl.push(GroupL {
            name: group_name(t, &members),
            members,
        });
    }
    let mut tiers: Vec<u8> = t.switches.iter().map(|s| s.tier()).collect();
    tiers.sort_unstable_by(|a, b| b.cmp(a));
    tiers.dedup();
    let mut links: Vec<LinkL> = t
        .links
        .iter()
        .enumerate()
        .map(|(li, l)| LinkL {
            name: weft_reconcile::core::link_name(t, li),
            a: l.a.switch,
            b: l.b.switch,
            host: false,
            ap: l.a.port,
            bp: l.b.port,
            gbps: l.speed.bits_per_sec() as f64 / 1e9,
            admin_down: !t.link_admin_up(li),
        })
        .collect();
    let mut hosts = Vec::new();
    for (hi, h) in t.hosts.iter().enumerate() {
        let sw = &t.switches[h.switch];
        let port = &sw.ports[h.port];
        if !matches!(port.peer, Peer::Host { .. }) {
            continue;
        }
        links.push(LinkL {
            name: format!("{} ↔ {}:{}", h.name, sw.name, port.name),
            a: h.switch,
            b: hi,
            host: true,
            ap: h.port,
            bp: 0,
            gbps: h.speed.bits_per_sec() as f64 / 1e9,
            admin_down: !port.admin_up,
        });
        hosts.push(HostL {
            name: h.name.clone(),
            leaf: h.switch,
        });
    }
    let fold = t.switches.len() > FOLD_ABOVE;
    Layout {
        fabric: t.name.clone(),
        tiers,
        switches,
        groups: gl,
        draw_hosts: !fold && hosts.len() <= HOSTS_DRAWN,
        links,
        hosts,
        fold,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> Topology {
        weft_topology::load_file(format!(
            "{}/../topology/examples/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("example")
    }

    #[test]
    fn the_small_fabric_is_drawn_whole_with_its_hosts_and_weft_status_link_names() {
        let t = example("leaf-spine-small.yaml");
        let l = layout(&t);
        assert!(!l.fold && l.draw_hosts);
        assert_eq!(l.tiers, vec![2, 1]);
        assert_eq!(l.links.len(), t.links.len() + t.hosts.len());
        assert_eq!(l.links[0].name, weft_reconcile::core::link_name(&t, 0));
        let host = l.links.iter().find(|x| x.host).expect("a host link");
        assert!(
            host.name.starts_with("leaf1-h1 ↔ leaf1:Ethernet"),
            "{}",
            host.name
        );
        assert!(l.groups.is_empty(), "nothing to fold: {:?}", l.groups);
    }

    #[test]
    fn a_k4_fat_tree_has_its_four_pods_and_two_core_groups() {
        let t = example("fat-tree-k4.yaml");
        let l = layout(&t);
        assert!(!l.fold, "20 switches are drawn whole");
        let names: Vec<&str> = l.groups.iter().map(|g| g.name.as_str()).collect();
        assert!(
            names.contains(&"pod1") && names.contains(&"pod4"),
            "{names:?}"
        );
        assert_eq!(l.groups.len(), 6, "{names:?}");
        for g in &l.groups {
            assert_eq!(
                g.members.len(),
                if g.name.starts_with("pod") { 4 } else { 2 }
            );
        }
    }

    #[test]
    fn a_k32_fat_tree_folds_into_32_pods_and_16_core_groups_whose_cores_reach_every_pod() {
        let t = weft_topology::load_str(
            "fabric:\n  name: k32\ngenerators:\n  - {kind: fat-tree, k: 32}\n",
            "k32.yaml",
        )
        .expect("k=32");
        let l = layout(&t);
        assert_eq!(l.switches.len(), 1280);
        assert!(l.fold && !l.draw_hosts);
        let pods: Vec<&GroupL> = l
            .groups
            .iter()
            .filter(|g| g.name.starts_with("pod"))
            .collect();
        assert_eq!(pods.len(), 32);
        assert!(pods.iter().all(|g| g.members.len() == 32));
        let cores: Vec<&GroupL> = l
            .groups
            .iter()
            .filter(|g| !g.name.starts_with("pod"))
            .collect();
        assert_eq!(
            cores.len(),
            16,
            "{:?}",
            cores.iter().map(|g| &g.name).collect::<Vec<_>>()
        );
        // Each core group serves one spine position: its cores all reach the same spine of
        // every pod, so the folded picture has one bundle per (core group, pod).
        for g in cores {
            assert_eq!(g.members.len(), 16);
            let mut spines: Vec<String> = g
                .members
                .iter()
                .flat_map(|&c| t.neighbours(c).map(|(_, _, e)| e.switch))
                .map(|s| {
                    t.switches[s]
                        .name
                        .split('-')
                        .nth(1)
                        .unwrap_or("")
                        .to_string()
                })
                .collect();
            spines.sort();
            spines.dedup();
            assert_eq!(spines.len(), 1, "{}: {spines:?}", g.name);
        }
        assert!(l.switches.iter().all(|s| s.group.is_some()));
    }
}
