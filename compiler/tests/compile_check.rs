//! The compiled tables of every example fabric pass the independent checker: no loops, no
//! blackholes, full reachability, shortest valley-free paths, weights that match capacities;
//! also after link failures.

use weft_compiler::{LinkState, Target, check::check, compile};
use weft_sonic_schema::config::ConfigRow;
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

/// Two spines between a sending and a receiving leaf, with parallel links: `(a, b)` 100G links
/// leaf1–spineA and leaf1–spineB, `(c, d)` spineA–leaf2 and spineB–leaf2.
fn parallel(a: usize, b: usize, c: usize, d: usize) -> Topology {
    let ports = |n: usize| {
        (0..n)
            .map(|i| format!("{{name: Ethernet{}}}", i * 4))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut links = Vec::new();
    let mut next = [0usize; 4]; // leaf1, leaf2, spineA, spineB: next free port (after hosts)
    next[0] = 1;
    next[1] = 1;
    let mut add = |links: &mut Vec<String>, x: usize, y: usize, n: usize| {
        let names = ["leaf1", "leaf2", "spineA", "spineB"];
        for _ in 0..n {
            links.push(format!(
                "  - {{a: {}:Ethernet{}, b: {}:Ethernet{}}}",
                names[x],
                next[x] * 4,
                names[y],
                next[y] * 4
            ));
            next[x] += 1;
            next[y] += 1;
        }
    };
    add(&mut links, 0, 2, a);
    add(&mut links, 0, 3, b);
    add(&mut links, 1, 2, c);
    add(&mut links, 1, 3, d);
    let yaml = format!(
        "switches:\n  - {{name: leaf1, role: leaf, ports: [{}]}}\n  - {{name: leaf2, role: leaf, ports: [{}]}}\n  - {{name: spineA, role: spine, ports: [{}]}}\n  - {{name: spineB, role: spine, ports: [{}]}}\nlinks:\n{}\nhosts:\n  - {{name: h1, attach: leaf1:Ethernet0}}\n  - {{name: h2, attach: leaf2:Ethernet0}}\nrouting:\n  default: {{mode: wcmp}}\n",
        ports(1 + a + b),
        ports(1 + c + d),
        ports(a + c),
        ports(b + d),
        links.join("\n")
    );
    weft_topology::load_str(&yaml, "parallel.yaml").unwrap_or_else(|e| panic!("{e:?}\n{yaml}"))
}

/// leaf1's weights toward h2, summed per spine and listed per link.
fn leaf1_weights(t: &Topology, d: &weft_compiler::Desired) -> Vec<(String, u32)> {
    let leaf = d
        .switches
        .iter()
        .find(|s| s.name == "leaf1")
        .expect("leaf1");
    let h2 = t.hosts.iter().find(|h| h.name == "h2").expect("h2");
    let r = weft_compiler::lookup(&leaf.routes, h2.ipv4.into()).expect("route");
    let Target::Group(g) = r.target else {
        panic!("expected a group, got {:?}", r.target)
    };
    let mut w: Vec<(String, u32)> = leaf.groups[&g]
        .members
        .iter()
        .map(|m| (m.neighbour.to_string(), m.weight))
        .collect();
    w.sort();
    w
}

#[test]
fn a_neighbour_behind_parallel_links_counts_once_with_their_summed_speed() {
    // Two links to spineA, which carries on 100G; one to spineB, which carries on 200G: the
    // capacity behind the three links is 1:1:2, not 1:1:1.
    let t = parallel(2, 1, 1, 2);
    let ls = LinkState::all_up(&t);
    assert_clean(&t, &ls, 1);
    let d = compile(&t, &ls);
    assert_eq!(
        leaf1_weights(&t, &d),
        vec![
            ("spineA".into(), 1),
            ("spineA".into(), 1),
            ("spineB".into(), 2)
        ]
    );
}

#[test]
fn a_failure_behind_a_double_linked_spine_shrinks_its_share() {
    let t = parallel(2, 2, 2, 2);
    let mut ls = LinkState::all_up(&t);
    let d = compile(&t, &ls);
    assert!(leaf1_weights(&t, &d).iter().all(|(_, w)| *w == 1));
    // One of spineA's two links to leaf2 fails: spineA carries on 100G, spineB 200G.
    let l = t
        .links
        .iter()
        .position(|l| {
            t.end_name(l.a).starts_with("leaf2:") && t.end_name(l.b).starts_with("spineA:")
        })
        .expect("leaf2–spineA link");
    ls.set_down(l, true);
    assert_clean(&t, &ls, 1);
    let d = compile(&t, &ls);
    assert_eq!(
        leaf1_weights(&t, &d),
        vec![
            ("spineA".into(), 1),
            ("spineA".into(), 1),
            ("spineB".into(), 2),
            ("spineB".into(), 2)
        ]
    );
}

#[test]
fn checker_refuses_weights_that_count_a_parallel_neighbour_per_link() {
    let t = parallel(2, 1, 1, 2);
    let ls = LinkState::all_up(&t);
    let mut d = compile(&t, &ls);
    // What per-link capacities gave: every link min(100G, what its spine carries on) = 1:1:1.
    let leaf = d
        .switches
        .iter_mut()
        .find(|s| s.name == "leaf1")
        .expect("leaf1");
    for g in leaf.groups.values_mut() {
        for m in &mut g.members {
            m.weight = 1;
        }
    }
    let problems = check(&t, &ls, &d, 1).problems;
    assert!(
        problems.iter().any(|p| p.contains("weight share")),
        "{problems:#?}"
    );
}

#[test]
fn checker_refuses_a_group_that_leaves_out_a_live_parallel_link() {
    let t = parallel(2, 1, 1, 2);
    let ls = LinkState::all_up(&t);
    let mut d = compile(&t, &ls);
    let leaf = d
        .switches
        .iter_mut()
        .find(|s| s.name == "leaf1")
        .expect("leaf1");
    for g in leaf.groups.values_mut() {
        if let Some(i) = g.members.iter().position(|m| &*m.neighbour == "spineA") {
            g.members.remove(i);
        }
    }
    let problems = check(&t, &ls, &d, 1).problems;
    assert!(
        problems
            .iter()
            .any(|p| p.contains("uses 1 of the 2 live links to spineA")),
        "{problems:#?}"
    );
}

/// The compiler never emits QoS rows that break the ECN/PFC rules validation enforces: on every
/// example and every tricky valid intent, each lossless profile's headroom stays under the
/// port's buffer and each envelope has a positive pause threshold above its Kmax.
#[test]
fn compiled_qos_rows_keep_ecn_before_pfc_on_every_valid_intent() {
    let root = format!("{}/..", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["topology/examples", "tests/valid"] {
        for e in std::fs::read_dir(format!("{root}/{dir}"))
            .expect("dir")
            .flatten()
        {
            if e.path().extension().is_some_and(|x| x == "yaml") {
                files.push(e.path());
            }
        }
    }
    assert!(files.len() > 10);
    for f in files {
        let t = weft_topology::load_file(&f).unwrap_or_else(|e| panic!("{}: {e:?}", f.display()));
        for s in 0..t.switches.len() {
            let rows = weft_compiler::qos::compile_switch(&t, s).unwrap_or_else(|e| {
                panic!("{}: a valid intent's QoS is refused: {e}", f.display())
            });
            for row in rows {
                match &row {
                    ConfigRow::EcnEnvelope(e) => {
                        let lossless =
                            t.qos.classes.iter().any(|c| {
                                c.lossless && t.qos.pfc_enabled && e.tc == c.traffic_class
                            });
                        assert!(e.kmin_min <= e.kmin_max, "{}: {row:?}", f.display());
                        assert!(e.kmax_min <= e.kmax_max, "{}: {row:?}", f.display());
                        assert!(e.kmin_max < e.kmax_max, "{}: {row:?}", f.display());
                        if lossless {
                            assert!(
                                e.pause_threshold > e.kmax_max.min(1),
                                "{}: {row:?}",
                                f.display()
                            );
                            assert!(e.kmax_max <= e.pause_threshold, "{}: {row:?}", f.display());
                        }
                    }
                    ConfigRow::BufferProfile(b) => {
                        let (xon, xoff, size) =
                            (b.xon.unwrap_or(0), b.xoff.unwrap_or(0), b.size.unwrap_or(0));
                        assert!(xon <= xoff, "{}: {row:?}", f.display());
                        assert_eq!(size, xon + xoff, "{}: {row:?}", f.display());
                    }
                    _ => {}
                }
            }
        }
    }
}
