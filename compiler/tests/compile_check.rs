//! The compiled tables of every example fabric pass the independent checker: no loops, no
//! blackholes, full reachability, shortest valley-free paths, weights that match capacities;
//! also after link failures.

use weft_compiler::{LinkState, Target, check::check, compile};
use weft_topology::Topology;

fn example(name: &str) -> Topology {
    let p = format!("{}/../topology/examples/{name}", env!("CARGO_MANIFEST_DIR"));
    weft_topology::load_file(&p).unwrap_or_else(|e| panic!("{p}: {e:?}"))
}

fn assert_clean(t: &Topology, ls: &LinkState, stride: usize) {
    let d = compile(t, ls);
    let r = check(t, ls, &d, stride);
    assert!(r.pairs_checked > 0);
    assert!(
        r.problems.is_empty(),
        "{} problems, first: {:#?}",
        r.problems.len(),
        &r.problems[..r.problems.len().min(10)]
    );
}

#[test]
fn every_example_compiles_to_loop_free_shortest_full_reachability() {
    for ex in [
        "leaf-spine-small.yaml",
        "fat-tree-k4.yaml",
        "rail-optimized.yaml",
        "multi-plane-8.yaml",
    ] {
        let t = example(ex);
        let stride = if t.hosts.len() > 64 { 17 } else { 1 };
        assert_clean(&t, &LinkState::all_up(&t), stride);
    }
}

#[test]
fn every_single_link_failure_of_the_fat_tree_keeps_everything_reachable_and_weighted() {
    let t = example("fat-tree-k4.yaml");
    for l in 0..t.links.len() {
        let mut ls = LinkState::all_up(&t);
        ls.set_down(l, true);
        assert_clean(&t, &ls, 1);
    }
}

#[test]
fn two_failures_make_wcmp_weights_follow_remaining_capacity() {
    let t = example("fat-tree-k4.yaml");
    let mut ls = LinkState::all_up(&t);
    // Take down both links of pod1-spine1 toward the cores: pod1's leaves must stop using it
    // for other pods, and the cores above it must stop sending pod1 traffic through it.
    for (i, l) in t.links.iter().enumerate() {
        if t.end_name(l.a).starts_with("pod1-spine1:")
            && t.switches[l.b.switch].name.starts_with("core")
        {
            ls.set_down(i, true);
        }
    }
    assert_eq!(ls.down_links().count(), 2);
    assert_clean(&t, &ls, 1);
    let d = compile(&t, &ls);
    let leaf = d
        .switches
        .iter()
        .find(|s| s.name == "pod1-leaf1")
        .expect("leaf");
    let remote = t
        .hosts
        .iter()
        .find(|h| h.name.starts_with("pod3"))
        .expect("remote host");
    let r = weft_compiler::lookup(&leaf.routes, remote.ipv4.into()).expect("route");
    match r.target {
        Target::Nexthop(id) => assert_eq!(&*leaf.nexthops[&id].neighbour, "pod1-spine2"),
        other => panic!("expected the single live uplink, got {other:?}"),
    }
}

#[test]
fn leaf_spine_routes_aggregate_and_groups_are_shared() {
    let t = example("leaf-spine-small.yaml");
    let d = compile(&t, &LinkState::all_up(&t));
    let leaf1 = d
        .switches
        .iter()
        .find(|s| s.name == "leaf1")
        .expect("leaf1");
    // Every remote leaf goes through the same two spines: one group, and the remote /29s merge
    // where their addresses allow.
    assert_eq!(leaf1.groups.len(), 1, "{:#?}", leaf1.groups);
    let g = leaf1.groups.values().next().expect("group");
    assert_eq!(g.members.len(), 2);
    let remote_v4: Vec<_> = leaf1
        .routes
        .iter()
        .filter(|r| r.prefix.prefix_len() < 32 && r.prefix.addr().is_ipv4())
        .collect();
    assert!(
        remote_v4.len() < 3,
        "3 remote leaf /29s should aggregate: {remote_v4:#?}"
    );
    // Two directly attached hosts, each with a /32 and a /128.
    let direct = leaf1
        .routes
        .iter()
        .filter(|r| matches!(r.target, Target::Nexthop(_)) && r.prefix.prefix_len() >= 32)
        .count();
    assert_eq!(direct, 4);
}

#[test]
fn checker_catches_blackholes_loops_and_wrong_weights() {
    let t = example("fat-tree-k4.yaml");
    let ls = LinkState::all_up(&t);
    let good = compile(&t, &ls);

    // A blackhole: drop pod1-leaf1's routes toward everything remote.
    let mut d = good.clone();
    let leaf = d
        .switches
        .iter_mut()
        .find(|s| s.name == "pod1-leaf1")
        .expect("leaf");
    for r in &mut leaf.routes {
        if r.prefix.prefix_len() < 32 && r.prefix.addr().is_ipv4() {
            r.target = Target::Drop;
        }
    }
    assert!(
        check(&t, &ls, &d, 1)
            .problems
            .iter()
            .any(|p| p.contains("drops traffic"))
    );

    // A loop: a spine sends pod2 traffic back down to a pod1 leaf, which sends it up again.
    let mut d = good.clone();
    let dst = t
        .hosts
        .iter()
        .find(|h| h.name.starts_with("pod2-leaf1"))
        .expect("pod2 host");
    let spine = d
        .switches
        .iter_mut()
        .find(|s| s.name == "pod1-spine1")
        .expect("spine");
    let back = spine
        .nexthops
        .values()
        .find(|n| &*n.neighbour == "pod1-leaf1")
        .expect("down nexthop")
        .id;
    let r = weft_compiler::lookup(&spine.routes, dst.ipv4.into())
        .expect("route")
        .prefix;
    spine.routes.retain(|x| x.prefix != r);
    spine.routes.push(weft_compiler::Route {
        prefix: r,
        target: Target::Nexthop(back),
    });
    let problems = check(&t, &ls, &d, 1).problems;
    assert!(problems.iter().any(|p| p.contains("loop")), "{problems:#?}");

    // Wrong weights: skew one group of a wcmp fabric.
    let mut d = good;
    let leaf = d
        .switches
        .iter_mut()
        .find(|s| s.name == "pod1-leaf1")
        .expect("leaf");
    let g = leaf.groups.values_mut().next().expect("group");
    g.members[0].weight = 5;
    assert!(
        check(&t, &ls, &d, 1)
            .problems
            .iter()
            .any(|p| p.contains("weight share"))
    );
}
