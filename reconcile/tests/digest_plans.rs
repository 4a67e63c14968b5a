//! The plan by digest (`Installed::by_digest`: the plugin in sync publishes digests equal to the
//! desired state's) is the plan a read of the rows gives: for every switch of a fat-tree, with
//! all links up and after links go down, the digests of what a switch holds equal the desired
//! ones exactly when the full diff is empty, and a plan made by digest serializes like the full
//! one (counts, `installed_from`, `installed_digest`).

use std::collections::BTreeSet;

use proptest::prelude::*;
use weft_compiler::{Compiler, LinkState, p4map};
use weft_reconcile::plan::{self, Installed, Source};
use weft_sonic_schema::state::{PluginState, PluginStatus};

/// What a switch that acknowledged `d` holds, as read back.
fn held(d: &plan::DesiredSwitch, plugin: Option<PluginStatus>) -> Installed {
    Installed {
        entries: d
            .entries
            .iter()
            .map(|(k, e)| {
                let mut f = e.fields.clone();
                f.reverse();
                (k.clone(), f)
            })
            .collect(),
        config: d
            .config
            .iter()
            .map(|r| (r.redis_key(), r.to_fields()))
            .collect(),
        source: Source::ApplStateDb,
        plugin,
    }
}

fn running() -> PluginStatus {
    PluginStatus::fresh(PluginState::Running, "fake")
}

#[test]
fn by_digest_needs_a_plugin_in_sync_that_publishes_exactly_the_desired_digests() {
    let t = weft_topology::load_str(
        "generators:\n  - kind: fat-tree\n    k: 4\nrouting:\n  default:\n    mode: wcmp\n",
        "k4.yaml",
    )
    .expect("valid");
    let info = p4map::pipeline_p4info().expect("P4Info");
    let c = Compiler::new(&t, LinkState::all_up(&t));
    let d = plan::desired_switch(&t, &info, &c.switches()[0], 0).expect("desired");
    let want = d.digests();
    assert!(
        Installed::by_digest(running(), &want).is_none(),
        "none published"
    );
    let mut st = running();
    st.set_digests(&want);
    assert!(Installed::by_digest(st.clone(), &want).is_some());
    let mut syncing = st.clone();
    syncing.state = PluginState::Syncing;
    assert!(
        Installed::by_digest(syncing, &want).is_none(),
        "not in sync"
    );
    let mut other = want;
    other
        .config
        .add("PORT|Ethernet999", &vec![("id".into(), "9".into())]);
    assert!(Installed::by_digest(st, &other).is_none(), "other digests");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn a_plan_by_digest_is_the_plan_of_the_rows_and_digests_differ_exactly_when_something_changes(
        downs in prop::collection::vec(0usize..1000, 0..4),
    ) {
        let t = weft_topology::load_str(
            "generators:\n  - kind: fat-tree\n    k: 4\nrouting:\n  default:\n    mode: wcmp\n",
            "k4.yaml",
        )
        .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let info = p4map::pipeline_p4info().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let before = Compiler::new(&t, LinkState::all_up(&t));
        let mut ls = LinkState::all_up(&t);
        for l in &downs {
            ls.set_down(l % t.links.len(), true);
        }
        let after = Compiler::new(&t, ls);
        let none = BTreeSet::new();
        for si in 0..t.switches.len() {
            let was = plan::desired_switch(&t, &info, &before.switches()[si], si)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let want = plan::desired_switch(&t, &info, &after.switches()[si], si)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            // The plugin of a switch holding `was` publishes the digests of what it holds.
            let mut st = running();
            st.set_digests(&held(&was, None).digests());
            prop_assert_eq!(held(&was, None).digests(), was.digests());
            let rows = held(&was, Some(st.clone()));
            let full = plan::diff(&t, si, &after.switches()[si], want.clone(), &rows, &none, plan::Views::With);
            match Installed::by_digest(st, &want.digests()) {
                Some(known) => {
                    prop_assert!(full.is_empty(), "switch {} equal digests but changes", si);
                    let fast = plan::diff(&t, si, &after.switches()[si], want, &known, &none, plan::Views::With);
                    prop_assert_eq!(
                        serde_json::to_value(&fast).map_err(|e| TestCaseError::fail(e.to_string()))?,
                        serde_json::to_value(&full).map_err(|e| TestCaseError::fail(e.to_string()))?
                    );
                }
                None => prop_assert!(!full.is_empty(), "switch {} digests differ but nothing changes", si),
            }
        }
    }
}
