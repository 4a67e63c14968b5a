//! Property tests: random small fabrics with random failed links always compile to forwarding
//! state the independent checker accepts.

use proptest::prelude::*;
use weft_compiler::{LinkState, check::check, compile};

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
    /// the final link state gives, and says which switches changed.
    #[test]
    fn incremental_link_changes_equal_a_full_compile(
        kind in 0u8..3,
        a in 1u32..4,
        b in 1u32..5,
        c in 0u32..6,
        mode in prop::sample::select(vec!["ecmp", "wcmp", "adaptive"]),
        events in prop::collection::vec((0usize..1000, any::<bool>()), 1..8),
    ) {
        let yaml = fabric(kind, a, b, c, mode);
        let t = weft_topology::load_str(&yaml, "prop.yaml").map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let mut inc = weft_compiler::Compiler::new(&t, LinkState::all_up(&t));
        let mut ls = LinkState::all_up(&t);
        for (l, down) in events {
            let l = l % t.links.len();
            let before: Vec<String> = inc.switches().iter().map(|s| serde_json::to_string(s).unwrap_or_default()).collect();
            let changed = inc.set_link(l, down);
            ls.set_down(l, down);
            let full = compile(&t, &ls);
            for (i, (x, y)) in inc.switches().iter().zip(&full.switches).enumerate() {
                let xs = serde_json::to_string(x).unwrap_or_default();
                prop_assert_eq!(&xs, &serde_json::to_string(y).unwrap_or_default(), "switch {} after link {} down={}\n{}", i, l, down, yaml);
                if xs != before[i] {
                    prop_assert!(changed.contains(&i), "switch {} changed but was not reported", i);
                }
            }
        }
    }
}
