//! A link change's write batches, shared among the switches whose entry deltas are the same
//! (`core::BatchMemo`), are each switch's own: equal to the batches of the whole diff of its new
//! desired state; and on a fat-tree they are actually shared (fewer distinct deltas diffed than
//! switches changed).

use proptest::prelude::*;
use weft_compiler::p4delta::WireMemo;
use weft_compiler::{Compiler, LinkState, p4map};
use weft_reconcile::core::{BatchMemo, batches};
use weft_reconcile::plan::{self, Installed};

fn held(d: &plan::DesiredSwitch) -> Installed {
    Installed::holding(d, None)
}

/// Applies link events one by one; returns, per event, (switches changed, deltas diffed).
fn run(yaml: &str, events: &[(usize, bool)]) -> Result<Vec<(usize, usize)>, TestCaseError> {
    let fail = |e: String| TestCaseError::fail(e);
    let t = weft_topology::load_str(yaml, "shared.yaml").map_err(|e| fail(format!("{e:?}")))?;
    let info = p4map::pipeline_p4info().map_err(|e| fail(e.to_string()))?;
    let mut c = Compiler::new(&t, LinkState::all_up(&t));
    let whole = |c: &Compiler, si: usize| {
        plan::desired_switch(&t, &info, &c.switches()[si], si).map_err(|e| fail(e.to_string()))
    };
    let mut installed: Vec<Installed> = (0..t.switches.len())
        .map(|si| whole(&c, si).map(|d| held(&d)))
        .collect::<Result<_, _>>()?;
    let none = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for &(l, down) in events {
        let l = l % t.links.len();
        let deltas = c.set_link_delta(l, down);
        let mut memo = WireMemo::new(&t, &info);
        let mut shared = BatchMemo::default();
        for d in &deltas {
            let si = d.switch;
            let ed = memo
                .entry_delta(&c.switches()[si], d)
                .map_err(|e| fail(e.to_string()))?;
            let got = shared.batches(&t, si, &ed, &installed[si]);
            let full = plan::diff(
                &t,
                si,
                &c.switches()[si],
                whole(&c, si)?,
                &installed[si],
                &none,
                plan::Views::Without,
            );
            let want = batches(full);
            prop_assert!(
                got.iter().map(|b| &**b).eq(want.iter()),
                "switch {} after link {} down={}: shared batches differ from its own",
                si,
                l,
                down
            );
        }
        for d in &deltas {
            installed[d.switch] = held(&whole(&c, d.switch)?);
        }
        out.push((deltas.len(), shared.diffed));
    }
    Ok(out)
}

#[test]
fn a_leaf_spine_link_change_on_a_fat_tree_shares_batches_among_switches_that_change_alike() {
    let yaml = "generators:\n  - kind: fat-tree\n    k: 8\nrouting:\n  default:\n    mode: wcmp\n";
    let t = weft_topology::load_str(yaml, "k8.yaml").expect("fat-tree");
    let l = t
        .links
        .iter()
        .position(|l| t.switches[l.a.switch].name.contains("leaf"))
        .expect("a leaf link");
    let counts = run(yaml, &[(l, true), (l, false)]).expect("same batches");
    for (changed, diffed) in counts {
        assert!(changed > 20, "{changed} switches changed");
        assert!(
            diffed * 2 < changed,
            "{diffed} distinct deltas diffed for {changed} switches"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn shared_batches_equal_every_switchs_own_whole_diff(
        kind in 0u8..2,
        a in 0u32..3,
        b in 0u32..3,
        events in prop::collection::vec((0usize..1000, any::<bool>()), 1..6),
    ) {
        let generator = match kind {
            0 => format!(
                "  - kind: leaf-spine\n    spines: {}\n    leaves: {}\n    hosts_per_leaf: 2\n    uplinks: {}\n",
                a + 1,
                b + 2,
                a % 2 + 1
            ),
            _ => "  - kind: fat-tree\n    k: 4\n".to_string(),
        };
        let yaml = format!("generators:\n{generator}routing:\n  default:\n    mode: wcmp\n");
        run(&yaml, &events)?;
    }
}
