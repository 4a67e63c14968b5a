//! A `WireMemo` that maps a whole link change (reusing the last delta's entries for a delta
//! like it, and each distinct route and group once) gives every switch the entries a memo of
//! its own would give it.

use weft_compiler::p4delta::WireMemo;
use weft_compiler::{Compiler, LinkState, p4map};

#[test]
fn one_memo_for_a_whole_change_maps_every_switch_as_a_memo_of_its_own_would() {
    let yaml = "generators:\n  - kind: fat-tree\n    k: 8\nrouting:\n  default:\n    mode: wcmp\n";
    let t = weft_topology::load_str(yaml, "k8.yaml").expect("fat-tree");
    let info = p4map::pipeline_p4info().expect("P4Info");
    let mut c = Compiler::new(&t, LinkState::all_up(&t));
    let leaf = t
        .links
        .iter()
        .position(|l| t.switches[l.a.switch].name.contains("leaf"))
        .expect("a leaf link");
    let core = t
        .links
        .iter()
        .position(|l| t.switches[l.b.switch].name.starts_with("core"))
        .expect("a core link");
    for (l, down) in [(leaf, true), (core, true), (leaf, false), (core, false)] {
        let deltas = c.set_link_delta(l, down);
        assert!(!deltas.is_empty());
        let mut memo = WireMemo::new(&t, &info);
        let mut reused = 0;
        let mut last = None;
        for d in &deltas {
            let sw = &c.switches()[d.switch];
            let shared = memo.entry_delta(sw, d).expect("mapped");
            let own = WireMemo::new(&t, &info).entry_delta(sw, d).expect("mapped");
            assert_eq!(
                shared, own,
                "switch {} after link {l} down={down}",
                d.switch
            );
            if last.as_ref() == Some(&shared) {
                reused += 1;
            }
            last = Some(shared);
        }
        // Switches that change alike (a pod's leaves) come one after the other.
        assert!(reused > 0, "link {l} down={down}: no two switches alike");
    }
}
