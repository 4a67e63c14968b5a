//! The diff of a link change's entry deltas (what `weft run` computes for a switch that holds
//! all it should) equals the whole diff of the new desired state, batches included; and
//! every switch the compiler does not report has nothing to write.

use proptest::prelude::*;
use weft_compiler::p4delta::WireMemo;
use weft_compiler::{Compiler, LinkState, p4map};
use weft_reconcile::core::batches;
use weft_reconcile::plan::{self, Installed, SwitchPlan};

fn fabric(kind: u8, a: u32, b: u32) -> String {
    let generator = match kind {
        0 => format!(
            "  - kind: leaf-spine\n    spines: {}\n    leaves: {}\n    hosts_per_leaf: 2\n    uplinks: {}\n",
            a + 1,
            b + 2,
            a % 2 + 1
        ),
        _ => "  - kind: fat-tree\n    k: 4\n".to_string(),
    };
    format!("generators:\n{generator}routing:\n  default:\n    mode: wcmp\n")
}

fn held(d: &plan::DesiredSwitch) -> Installed {
    Installed::holding(d, None)
}

fn changes(p: &SwitchPlan) -> String {
    let row = |c: &plan::EntryChange| format!("{} {:?} {:?} {:?}", c.key, c.stage, c.fields, c.old);
    let mut out: Vec<String> = p.add.iter().map(|c| format!("+{}", row(c))).collect();
    out.extend(p.modify.iter().map(|c| format!("~{}", row(c))));
    out.extend(p.delete.iter().map(|c| format!("-{}", row(c))));
    out.extend(p.config_set.iter().map(|c| format!("c{}", c.redis_key())));
    out.extend(p.config_delete.iter().map(|k| format!("c-{k}")));
    out.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_diff_of_a_link_changes_entry_deltas_is_the_whole_diff_of_a_switch_that_held_everything(
        kind in 0u8..2,
        a in 0u32..3,
        b in 0u32..3,
        events in prop::collection::vec((0usize..1000, any::<bool>()), 1..8),
    ) {
        let yaml = fabric(kind, a, b);
        let t = weft_topology::load_str(&yaml, "prop.yaml").map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let info = p4map::pipeline_p4info().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut c = Compiler::new(&t, LinkState::all_up(&t));
        let whole = |c: &Compiler, si: usize| {
            plan::desired_switch(&t, &info, &c.switches()[si], si).map_err(|e| TestCaseError::fail(e.to_string()))
        };
        let mut installed: Vec<Installed> = (0..t.switches.len())
            .map(|si| whole(&c, si).map(|d| held(&d)))
            .collect::<Result<_, _>>()?;
        let none = std::collections::BTreeSet::new();
        for (l, down) in events {
            let l = l % t.links.len();
            let deltas = c.set_link_delta(l, down);
            let mut memo = WireMemo::new(&t, &info);
            for (si, inst) in installed.iter_mut().enumerate() {
                let full = plan::diff(&t, si, &c.switches()[si], whole(&c, si)?, inst, &none, plan::Views::Without);
                match deltas.iter().find(|d| d.switch == si) {
                    Some(d) => {
                        let ed = memo.entry_delta(&c.switches()[si], d).map_err(|e| TestCaseError::fail(e.to_string()))?;
                        let fast = plan::diff_delta(&t, si, &ed, inst);
                        prop_assert_eq!(changes(&fast), changes(&full), "switch {} after link {} down={}", si, l, down);
                        prop_assert_eq!(fast.counts.entries, full.counts.entries);
                        prop_assert_eq!(batches(fast), batches(full));
                    }
                    None => prop_assert!(full.is_empty(), "switch {} not reported but has:\n{}", si, changes(&full)),
                }
                *inst = held(&whole(&c, si)?);
            }
        }
    }
}
