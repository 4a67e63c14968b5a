//! Property tests: random small fabrics with random failed links always compile to forwarding
//! state the independent checker accepts, and a live compiler fed link events one by one agrees
//! with a full compile. Besides the generators' regular fabrics, explicit ones with random
//! parallel links of random speeds between tiers (the case where a neighbour reached over k
//! links must count once, with their summed speed).

use std::collections::BTreeMap;

use proptest::prelude::*;
use weft_compiler::p4delta::{EntryDelta, WireMemo};
use weft_compiler::p4map::{self, Entries};
use weft_compiler::{Compiler, LinkState, SwitchDesired, check::check, compile};

fn fabric(kind: u8, a: u32, b: u32, c: u32, mode: &str) -> String {
    let generator = match kind {
        0 => format!(
            "  - kind: leaf-spine\n    spines: {}\n    leaves: {}\n    hosts_per_leaf: {}\n    uplinks: {}\n",
            a,
            b + 1,
            c % 3 + 1,
            c % 2 + 1
        ),
        1 => "  - kind: fat-tree\n    k: 4\n".to_string(),
        _ => format!(
            "  - kind: rail-optimized\n    servers: {}\n    gpus_per_server: {}\n    radix: 8\n",
            b + 2,
            a.min(2)
        ),
    };
    format!(
        "fabric:\n  defaults:\n    ooo_tolerant: true\ngenerators:\n{generator}routing:\n  default:\n    mode: {mode}\n"
    )
}

const SPEEDS: [&str; 3] = ["100G", "200G", "400G"];

/// A compiler fed link events one by one, next to what each switch's entries should be: after
/// every event its switches equal a full compile's, its deltas turn the previous switches into
/// the new ones, and the entries patched from the deltas alone equal a full mapping.
struct Live<'t> {
    t: &'t weft_topology::Topology,
    info: weft_p4rt::P4Info,
    inc: Compiler<'t>,
    ls: LinkState,
    entries: Vec<Entries>,
}

impl<'t> Live<'t> {
    /// `whole`: every changed table is built whole rather than patched.
    fn new(t: &'t weft_topology::Topology, whole: bool) -> Self {
        let info = p4map::pipeline_p4info().expect("P4Info");
        let mut inc = Compiler::new(t, LinkState::all_up(t));
        if whole {
            inc = inc.with_patch_limit(0);
        }
        let entries = inc
            .switches()
            .iter()
            .map(|s| p4map::entries(t, &info, s).expect("entries"))
            .collect();
        Live {
            t,
            info,
            inc,
            ls: LinkState::all_up(t),
            entries,
        }
    }

    fn event(&mut self, l: usize, down: bool) -> Result<(), TestCaseError> {
        let before: Vec<SwitchDesired> = self.inc.switches().to_vec();
        let deltas = self.inc.set_link_delta(l, down);
        self.ls.set_down(l, down);
        let full = compile(self.t, &self.ls);
        let mut memo = WireMemo::new(self.t, &self.info);
        for d in &deltas {
            // The delta alone turns the switch as it was into the switch as it is.
            let mut x = before[d.switch].clone();
            x.routes
                .retain(|r| !d.routes_old.iter().any(|o| o.prefix == r.prefix));
            x.routes.extend(d.routes_new.iter().cloned());
            x.routes
                .sort_by_key(|r| (r.prefix.network(), r.prefix.prefix_len()));
            for g in &d.groups_old {
                x.groups.remove(&g.id);
            }
            for id in &d.groups_new {
                let g = self.inc.switches()[d.switch].groups.get(id).cloned();
                prop_assert!(
                    g.is_some(),
                    "delta names group {} the switch does not hold",
                    id
                );
                x.groups.insert(*id, g.unwrap_or_else(|| unreachable!()));
            }
            prop_assert_eq!(
                serde_json::to_string(&x).unwrap_or_default(),
                serde_json::to_string(&self.inc.switches()[d.switch]).unwrap_or_default(),
                "switch {} patched from its delta",
                d.switch
            );
            let ed = memo
                .entry_delta(&self.inc.switches()[d.switch], d)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            // What the delta says was there is what the switch held.
            let e = &mut self.entries[d.switch];
            for m in &ed.removed {
                let held = e.remove(&m.0);
                prop_assert_eq!(
                    held.as_ref(),
                    Some(&m.1),
                    "switch {} removes {}",
                    d.switch,
                    &m.0
                );
            }
            for (m, was) in &ed.set {
                let held = e.insert(m.0.clone(), m.1.clone());
                prop_assert_eq!(
                    held.as_ref(),
                    was.as_ref().map(|w| &w.1),
                    "switch {} sets {}",
                    d.switch,
                    &m.0
                );
            }
        }
        for (i, (x, y)) in self.inc.switches().iter().zip(&full.switches).enumerate() {
            let xs = serde_json::to_string(x).unwrap_or_default();
            prop_assert_eq!(
                &xs,
                &serde_json::to_string(y).unwrap_or_default(),
                "switch {} after link {} down={}",
                i,
                l,
                down
            );
            if xs != serde_json::to_string(&before[i]).unwrap_or_default() {
                prop_assert!(
                    deltas.iter().any(|d| d.switch == i),
                    "switch {} changed but was not reported",
                    i
                );
            }
            let want: BTreeMap<_, _> = p4map::entries(self.t, &self.info, y)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(
                &self.entries[i],
                &want,
                "entries of switch {} after link {} down={}",
                i,
                l,
                down
            );
        }
        prop_assert_eq!(self.inc.notes(), full.notes.clone());
        Ok(())
    }

    /// Several link events handled together, as the reconciler does: each change's entry
    /// deltas mapped right after it, then composed per switch.
    fn together(&mut self, events: &[(usize, bool)]) -> Result<(), TestCaseError> {
        let mut composed: BTreeMap<usize, EntryDelta> = BTreeMap::new();
        for &(l, down) in events {
            let deltas = self.inc.set_link_delta(l, down);
            self.ls.set_down(l, down);
            let mut memo = WireMemo::new(self.t, &self.info);
            for d in &deltas {
                let ed = memo
                    .entry_delta(&self.inc.switches()[d.switch], d)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let c = composed.remove(&d.switch).unwrap_or_default();
                composed.insert(d.switch, c.then(ed));
            }
        }
        for (s, ed) in composed {
            let e = &mut self.entries[s];
            for m in &ed.removed {
                let held = e.remove(&m.0);
                prop_assert_eq!(held.as_ref(), Some(&m.1), "switch {} removes {}", s, &m.0);
            }
            for (m, was) in &ed.set {
                let held = e.insert(m.0.clone(), m.1.clone());
                prop_assert_eq!(
                    held.as_ref(),
                    was.as_ref().map(|w| &w.1),
                    "switch {} sets {}",
                    s,
                    &m.0
                );
            }
        }
        let full = compile(self.t, &self.ls);
        for (i, y) in full.switches.iter().enumerate() {
            let want: BTreeMap<_, _> = p4map::entries(self.t, &self.info, y)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(
                &self.entries[i],
                &want,
                "entries of switch {} after {:?}",
                i,
                events
            );
        }
        Ok(())
    }
}

/// An explicit two- or three-tier fabric: `spines` spines, `leaves` leaves, `tops` superspines
/// (0: two tiers). Between every lower and upper pair, `counts` picks 0..=3 parallel links (at
/// least one to the first upper switch, so the fabric is connected) and `speeds` their speeds.
fn parallel_fabric(
    spines: usize,
    leaves: usize,
    tops: usize,
    counts: &[u8],
    speeds: &[u8],
    mode: &str,
) -> String {
    let mut names: Vec<(String, &str)> = Vec::new();
    names.extend((1..=leaves).map(|i| (format!("leaf{i}"), "leaf")));
    names.extend((1..=spines).map(|i| (format!("spine{i}"), "spine")));
    names.extend((1..=tops).map(|i| (format!("top{i}"), "superspine")));
    let idx = |n: &str| names.iter().position(|x| x.0 == n).unwrap_or(0);
    let mut next = vec![0usize; names.len()];
    for n in next.iter_mut().take(leaves) {
        *n = 1; // Ethernet0 is the host's
    }
    let mut links = Vec::new();
    let mut k = 0usize;
    let mut tier =
        |lower: Vec<String>, upper: Vec<String>, links: &mut Vec<String>, next: &mut Vec<usize>| {
            for lo in &lower {
                for (ui, up) in upper.iter().enumerate() {
                    let c = counts[k % counts.len()] % 4;
                    let c = if ui == 0 { c.max(1) } else { c };
                    for _ in 0..c {
                        let sp = SPEEDS[usize::from(speeds[k % speeds.len()]) % SPEEDS.len()];
                        k += 1;
                        let (a, b) = (idx(lo), idx(up));
                        links.push(format!(
                            "  - {{a: {lo}:Ethernet{}, b: {up}:Ethernet{}, speed: {sp}}}",
                            next[a] * 4,
                            next[b] * 4
                        ));
                        next[a] += 1;
                        next[b] += 1;
                    }
                    k += 1;
                }
            }
        };
    let leaf_names: Vec<String> = (1..=leaves).map(|i| format!("leaf{i}")).collect();
    let spine_names: Vec<String> = (1..=spines).map(|i| format!("spine{i}")).collect();
    let top_names: Vec<String> = (1..=tops).map(|i| format!("top{i}")).collect();
    tier(leaf_names, spine_names.clone(), &mut links, &mut next);
    if tops > 0 {
        tier(spine_names, top_names, &mut links, &mut next);
    }
    let mut y = String::from("fabric:\n  defaults: {speed: 400G, ooo_tolerant: true}\nswitches:\n");
    for (i, (n, role)) in names.iter().enumerate() {
        let ports: Vec<String> = (0..next[i].max(1))
            .map(|p| format!("{{name: Ethernet{}}}", p * 4))
            .collect();
        y.push_str(&format!(
            "  - {{name: {n}, role: {role}, ports: [{}]}}\n",
            ports.join(", ")
        ));
    }
    y.push_str("links:\n");
    y.push_str(&links.join("\n"));
    y.push_str("\nhosts:\n");
    for i in 1..=leaves {
        y.push_str(&format!("  - {{name: h{i}, attach: leaf{i}:Ethernet0}}\n"));
    }
    y.push_str(&format!("routing:\n  default:\n    mode: {mode}\n"));
    y
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_fabrics_with_parallel_links_and_failures_route_by_capacity_per_neighbour(
        spines in 1usize..4,
        leaves in 2usize..5,
        tops in 0usize..3,
        counts in prop::collection::vec(any::<u8>(), 1..24),
        speeds in prop::collection::vec(any::<u8>(), 1..24),
        mode in prop::sample::select(vec!["wcmp", "ecmp", "spray"]),
        failures in prop::collection::vec(0usize..1000, 0..5),
    ) {
        let yaml = parallel_fabric(spines, leaves, tops, &counts, &speeds, mode);
        let t = weft_topology::load_str(&yaml, "prop.yaml").map_err(|e| TestCaseError::fail(format!("{e:?}\n{yaml}")))?;
        let mut ls = LinkState::all_up(&t);
        for f in failures {
            ls.set_down(f % t.links.len(), true);
        }
        let d = compile(&t, &ls);
        let r = check(&t, &ls, &d, 1);
        prop_assert!(r.problems.is_empty(), "{yaml}\ndown: {:?}\n{:#?}", d.down_links, r.problems);
    }

    /// Link events handled a few at a time, their entry deltas composed per switch, patch the
    /// entries into exactly a full mapping of the full compile.
    #[test]
    fn link_changes_handled_together_compose_into_a_full_mapping(
        kind in 0u8..3,
        a in 1u32..4,
        b in 1u32..5,
        c in 0u32..6,
        events in prop::collection::vec((0usize..1000, any::<bool>()), 1..10),
        group in 1usize..4,
    ) {
        let yaml = fabric(kind, a, b, c, "wcmp");
        let t = weft_topology::load_str(&yaml, "prop.yaml").map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let mut live = Live::new(&t, false);
        let events: Vec<(usize, bool)> = events.into_iter().map(|(l, d)| (l % t.links.len(), d)).collect();
        for chunk in events.chunks(group) {
            live.together(chunk)?;
        }
    }

    /// As below, on fabrics with parallel links of mixed speeds.
    #[test]
    fn incremental_link_changes_with_parallel_links_and_their_entries_equal_a_full_compile(
        spines in 1usize..4,
        leaves in 2usize..5,
        tops in 0usize..3,
        counts in prop::collection::vec(any::<u8>(), 1..24),
        speeds in prop::collection::vec(any::<u8>(), 1..24),
        events in prop::collection::vec((0usize..1000, any::<bool>()), 1..8),
        whole in any::<bool>(),
    ) {
        let yaml = parallel_fabric(spines, leaves, tops, &counts, &speeds, "wcmp");
        let t = weft_topology::load_str(&yaml, "prop.yaml").map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let mut live = Live::new(&t, whole);
        for (l, down) in events {
            live.event(l % t.links.len(), down)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_fabrics_with_random_failures_route_correctly(
        kind in 0u8..3,
        a in 1u32..4,
        b in 1u32..5,
        c in 0u32..6,
        mode in prop::sample::select(vec!["ecmp", "wcmp", "spray", "adaptive", "flowlet"]),
        failures in prop::collection::vec(0usize..1000, 0..4),
    ) {
        let yaml = fabric(kind, a, b, c, mode);
        let t = weft_topology::load_str(&yaml, "prop.yaml").map_err(|e| TestCaseError::fail(format!("{e:?}\n{yaml}")))?;
        let mut ls = LinkState::all_up(&t);
        for f in failures {
            if !t.links.is_empty() {
                ls.set_down(f % t.links.len(), true);
            }
        }
        let d = compile(&t, &ls);
        let r = check(&t, &ls, &d, 1);
        prop_assert!(r.problems.is_empty(), "{yaml}\ndown: {:?}\n{:#?}", d.down_links, r.problems);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Applying link events one by one to a live compiler gives exactly what a full compile of
    /// the final link state gives, says which switches changed and how, and the P4RT entries
    /// patched from those deltas alone equal a full mapping of the full compile; whether the
    /// changed tables are patched or (`whole`) built again and compared.
    #[test]
    fn incremental_link_changes_and_their_entries_equal_a_full_compile_and_mapping(
        kind in 0u8..3,
        a in 1u32..4,
        b in 1u32..5,
        c in 0u32..6,
        mode in prop::sample::select(vec!["ecmp", "wcmp", "adaptive"]),
        events in prop::collection::vec((0usize..1000, any::<bool>()), 1..8),
        whole in any::<bool>(),
    ) {
        let yaml = fabric(kind, a, b, c, mode);
        let t = weft_topology::load_str(&yaml, "prop.yaml").map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let mut live = Live::new(&t, whole);
        for (l, down) in events {
            live.event(l % t.links.len(), down)?;
        }
    }
}
