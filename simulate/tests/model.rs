//! The model on the compiler's real output: conservation, the ideal on full-bisection fabrics,
//! hash collisions predicted from the pipeline's hash, ECMP polarization across tiers, and
//! failures.

use weft_compiler::{LinkState, compile};
use weft_simulate::compiled::{fib, with_mode};
use weft_simulate::fabric::{Hop, LinkKind};
use weft_simulate::hash::FlowKey;
use weft_simulate::model::{Params, Workload, for_each_flow};
use weft_simulate::place::Placer;
use weft_simulate::{Fabric, simulate};
use weft_topology::{RoutingMode, Topology};
use weft_traffic::bth::ROCEV2_PORT;
use weft_traffic::collective::{Collective, Kind, qp_number, source_port};

/// Bandwidth only: no last-packet latency per step.
fn bw() -> Params {
    Params {
        latency: false,
        ..Params::default()
    }
}

const MODES: [RoutingMode; 5] = [
    RoutingMode::Ecmp,
    RoutingMode::Wcmp,
    RoutingMode::Flowlet,
    RoutingMode::Spray,
    RoutingMode::Adaptive,
];

fn small() -> Topology {
    weft_topology::load_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topology/examples/leaf-spine-small.yaml"
    ))
    .expect("example")
}

/// A 3-tier fat-tree whose NICs all take reordering (spray and adaptive apply everywhere).
fn fat_tree(k: u32) -> Topology {
    let text = format!(
        "fabric:\n  name: ft{k}\n  defaults: {{speed: 400G, ooo_tolerant: true}}\n  pools: {{hosts_v4: 10.0.0.0/9}}\ngenerators:\n  - {{kind: fat-tree, k: {k}}}\n"
    );
    weft_topology::load_str(&text, "fat-tree").expect("fat-tree")
}

fn all_hosts(t: &Topology, kind: Kind, size: u64) -> Workload {
    Workload {
        collective: Collective {
            kind,
            ranks: t.hosts.len() as u32,
            size,
        },
        groups: vec![(0..t.hosts.len()).collect()],
        lanes: 1,
    }
}

fn ranks(t: &Topology, names: &[&str], kind: Kind, size: u64) -> Workload {
    Workload {
        collective: Collective {
            kind,
            ranks: names.len() as u32,
            size,
        },
        groups: vec![
            names
                .iter()
                .map(|n| t.host_index(n).expect("host"))
                .collect(),
        ],
        lanes: 1,
    }
}

fn class(t: &Topology) -> String {
    t.qos
        .classes
        .iter()
        .find(|c| c.lossless)
        .expect("a lossless class")
        .name
        .clone()
}

/// Link loads of one step and the offered/delivered totals.
fn loads(
    t: &Topology,
    down: &[bool],
    mode: RoutingMode,
    w: &Workload,
) -> (Vec<f64>, f64, f64, Topology) {
    let c = class(t);
    let tm = with_mode(t, &c, mode);
    let mut ls = LinkState::all_up(&tm);
    for (l, d) in down.iter().enumerate() {
        ls.set_down(l, *d);
    }
    let f = fib(&tm, &compile(&tm, &ls), &c);
    let fab = Fabric::new(&tm, down);
    let mut p = Placer::new(&fab, &f, 1, true);
    for_each_flow(&fab, w, &bw(), 0, |fl| p.place(&fl));
    let l = p.finish();
    (l.bytes, l.offered, l.delivered, tm)
}

#[test]
fn every_byte_is_placed_once_and_every_switch_sends_on_what_it_receives_in_every_mode() {
    for t in [small(), fat_tree(4)] {
        let down = vec![false; t.links.len()];
        for mode in MODES {
            for kind in [Kind::AllToAll, Kind::AllReduce, Kind::Incast] {
                let w = all_hosts(&t, kind, 1 << 20);
                let (bytes, offered, delivered, tm) = loads(&t, &down, mode, &w);
                let c = w.collective;
                let expect: f64 = c.step_flows(0).map(|f| f.bytes as f64).sum();
                let what = format!("{} {mode} {kind}", t.name);
                assert!(
                    (offered - expect).abs() < 1e-6,
                    "{what}: offered {offered} of {expect}"
                );
                assert!(
                    (delivered - offered).abs() < 1e-6 * offered,
                    "{what}: {delivered} of {offered}"
                );
                let fab = Fabric::new(&tm, &down);
                let (mut up, mut dn) = (0.0, 0.0);
                let mut through = vec![0.0f64; tm.switches.len()];
                for (d, b) in bytes.iter().enumerate() {
                    match fab.kind[d] {
                        LinkKind::HostUp => up += b,
                        LinkKind::HostDown => dn += b,
                        LinkKind::Fabric => {}
                    }
                    let (from, to) = fab.endpoints(d as u32);
                    if let Hop::Switch(s) = to {
                        through[s] += b;
                    }
                    if let Hop::Switch(s) = from {
                        through[s] -= b;
                    }
                }
                assert!(
                    (up - offered).abs() < 1e-6 * offered,
                    "{what}: NICs sent {up}"
                );
                assert!(
                    (dn - delivered).abs() < 1e-6 * offered,
                    "{what}: NICs received {dn}"
                );
                for (s, x) in through.iter().enumerate() {
                    assert!(
                        x.abs() < 1e-6 * offered,
                        "{what}: {} keeps {x} bytes",
                        tm.switches[s].name
                    );
                }
            }
        }
    }
}

#[test]
fn on_a_full_bisection_fat_tree_spraying_reaches_the_nic_bound_and_ecmp_does_not() {
    let t = fat_tree(4);
    let n = t.hosts.len() as f64;
    let size = 16u64 << 20;
    let nic = 400e9 / 8.0;
    let links = LinkState::all_up(&t);
    let c = class(&t);
    for kind in [Kind::AllToAll, Kind::AllReduce] {
        let w = all_hosts(&t, kind, size);
        // Every NIC sends (n-1)/n of its buffer once (all-to-all), or 2(n-1) chunks of S/n.
        let bound = match kind {
            Kind::AllToAll => (n - 1.0) * (size as f64 / n) / nic,
            _ => 2.0 * (n - 1.0) * (size as f64 / n) / nic,
        };
        for mode in [RoutingMode::Spray, RoutingMode::Adaptive] {
            let o = weft_simulate::compiled::model(&t, &links, &c, mode, &w, &bw());
            assert!(
                (o.ideal_s - bound).abs() < 1e-9 * bound,
                "{kind}: ideal {} vs {bound}",
                o.ideal_s
            );
            assert!((o.ratio - 1.0).abs() < 1e-9, "{kind} {mode}: {}", o.ratio);
        }
    }
    let w = all_hosts(&t, Kind::AllToAll, size);
    let e = weft_simulate::compiled::model(&t, &links, &c, RoutingMode::Ecmp, &w, &bw());
    assert!(
        e.ratio > 1.2,
        "hashing 16×15 flows over 4 cores cannot be perfect: {}",
        e.ratio
    );
}

#[test]
fn with_a_leaf_uplink_down_the_ideal_is_what_leaves_the_leaf_over_its_last_uplink() {
    let t = small();
    let mut links = LinkState::all_up(&t);
    let l = t
        .switches
        .iter()
        .position(|s| s.name == "leaf1")
        .and_then(|s| t.switches[s].port_index("Ethernet8").map(|p| (s, p)))
        .and_then(|(s, p)| match t.switches[s].ports[p].peer {
            weft_topology::Peer::Switch { link } => Some(link),
            _ => None,
        })
        .expect("leaf1:Ethernet8");
    links.set_down(l, true);
    let size = 8u64 << 20;
    let w = all_hosts(&t, Kind::AllToAll, size);
    // leaf1's two hosts send 6 chunks of S/8 each off the leaf, over one 100G uplink.
    let bound = 2.0 * 6.0 * (size as f64 / 8.0) / (100e9 / 8.0);
    let c = class(&t);
    for mode in MODES {
        let o = weft_simulate::compiled::model(&t, &links, &c, mode, &w, &bw());
        assert!(
            (o.ideal_s - bound).abs() < 1e-9 * bound,
            "{mode}: {} vs {bound}",
            o.ideal_s
        );
        assert!(o.ratio >= 1.0 - 1e-9);
        assert!(
            (o.bytes_delivered - o.bytes_offered).abs() < 1.0,
            "{mode}: lost bytes"
        );
    }
}

/// The spine (0: spine1, 1: spine2) the pipeline's hash sends ring flow `src → src+1` to.
fn spine_of(t: &Topology, names: &[&str], src: usize) -> u16 {
    let dst = (src + 1) % names.len();
    let h = |n: &str| &t.hosts[t.host_index(n).expect("host")];
    let key = FlowKey {
        src: h(names[src]).ipv4,
        dst: h(names[dst]).ipv4,
        src_port: source_port(qp_number(dst as u32, 0)),
        dst_port: ROCEV2_PORT,
        dst_qp: qp_number(src as u32, 0),
    };
    // A leaf's group: its two uplinks, equal weights, members in nexthop order (spine1's port
    // first); BMv2 picks member crc16(flow hash × (seed | 1)) % 2, seed = the leaf's.
    let leaf = &t.switches[h(names[src]).switch];
    key.selector_hash(weft_simulate::hash::hash_seed(leaf.device_id)) % 2
}

#[test]
fn ring_flows_that_hash_onto_one_link_share_it_under_ecmp_and_spray_spreads_them() {
    let t = small();
    let links = LinkState::all_up(&t);
    let c = class(&t);
    let leaf = |n: &str| t.hosts[t.host_index(n).expect("host")].switch;
    let mut seen = (0, 0);
    for set in [
        ["leaf1-h1", "leaf1-h2", "leaf3-h1", "leaf3-h2"],
        ["leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf4-h1"],
        ["leaf1-h1", "leaf1-h2", "leaf2-h1", "leaf4-h2"],
    ] {
        for perm in permutations(&set) {
            // Each ring flow carries one chunk per step, as much as a NIC sends: the step lasts
            // as many chunks as the busiest link carries (its uplink or the spine's downlink).
            let mut count = std::collections::HashMap::new();
            for i in 0..4 {
                let (a, b) = (leaf(perm[i]), leaf(perm[(i + 1) % 4]));
                if a != b {
                    let s = spine_of(&t, &perm, i);
                    *count.entry((a, s, true)).or_insert(0) += 1;
                    *count.entry((b, s, false)).or_insert(0) += 1;
                }
            }
            let want = f64::from(count.values().copied().max().unwrap_or(1).max(1));
            let w = ranks(&t, &perm, Kind::AllReduce, 1 << 20);
            let e = weft_simulate::compiled::model(&t, &links, &c, RoutingMode::Ecmp, &w, &bw());
            let s = weft_simulate::compiled::model(&t, &links, &c, RoutingMode::Spray, &w, &bw());
            assert!(
                (e.ratio - want).abs() < 1e-9,
                "{perm:?}: ECMP {} want {want}",
                e.ratio
            );
            assert!((s.ratio - 1.0).abs() < 1e-9, "{perm:?}: spray {}", s.ratio);
            if want > 1.0 {
                seen.0 += 1;
            } else {
                seen.1 += 1;
            }
        }
    }
    assert!(
        seen.0 > 0 && seen.1 > 0,
        "collisions and none must both occur: {seen:?}"
    );
}

fn permutations<'a>(xs: &[&'a str; 4]) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    for a in 0..4 {
        for b in 0..4 {
            for c in 0..4 {
                for d in 0..4 {
                    let p = [a, b, c, d];
                    if (0..4).all(|i| p.contains(&i)) {
                        out.push(p.iter().map(|&i| xs[i]).collect());
                    }
                }
            }
        }
    }
    out
}

/// How many core uplinks each spine of a k=4 fat-tree uses for an all-to-all under ECMP, with
/// the switches' hash seeds as given.
fn spine_uplinks_used(t: &Topology) -> Vec<(String, usize, usize)> {
    let down = vec![false; t.links.len()];
    let w = all_hosts(t, Kind::AllToAll, 1 << 20);
    let (bytes, ..) = loads(t, &down, RoutingMode::Ecmp, &w);
    let fab = Fabric::new(t, &down);
    let mut out = Vec::new();
    for (s, sw) in t.switches.iter().enumerate() {
        if sw.role != weft_topology::Role::Spine {
            continue;
        }
        let ups: Vec<f64> = t
            .neighbours(s)
            .filter(|(_, _, e)| t.switches[e.switch].role == weft_topology::Role::Superspine)
            .map(|(_, pi, _)| bytes[fab.port(s, pi).expect("port").0 as usize])
            .collect();
        out.push((
            sw.name.clone(),
            ups.iter().filter(|b| **b > 0.0).count(),
            ups.len(),
        ));
    }
    out
}

#[test]
fn the_model_seeds_each_switch_like_the_pipeline() {
    // Pinned in weft_p4's tests too: the model and the plugin must agree on every seed.
    assert_eq!(weft_simulate::hash::hash_seed(0), 0x7b1d_cdaf);
    for id in [1u64, 7, 1 << 40] {
        assert_eq!(weft_simulate::hash::hash_seed(id), weft_p4::hash_seed(id));
    }
}

#[test]
fn per_switch_hash_seeds_keep_ecmp_from_polarizing_a_fat_tree() {
    // Unseeded (every switch hashing the same key the same way) a leaf sends a flow to its
    // i-th spine when crc16 % (k/2) = i, and that spine picks its i-th core uplink for it:
    // each spine uses one of its uplinks. With the per-switch seeds the plugin writes, the
    // spines' picks are independent of their leaves': every spine uses all its uplinks.
    let t = fat_tree(4);
    for (name, used, of) in spine_uplinks_used(&t) {
        assert_eq!(used, of, "{name} uses {used} of its {of} core uplinks");
    }
    // The same fabric with every switch's seed forced equal (what the seed is for): polarized.
    let mut same = fat_tree(4);
    let one = same.switches[0].device_id;
    same.switches.iter_mut().for_each(|s| s.device_id = one);
    for (name, used, _) in spine_uplinks_used(&same) {
        assert_eq!(used, 1, "{name}: equal seeds polarize");
    }
}

#[test]
fn every_step_of_a_ring_adds_its_last_packets_trip_store_and_forward_and_cable() {
    let t = small();
    let links = LinkState::all_up(&t);
    let c = class(&t);
    let w = all_hosts(&t, Kind::AllReduce, 1 << 20);
    let with =
        weft_simulate::compiled::model(&t, &links, &c, RoutingMode::Spray, &w, &Params::default());
    let without = weft_simulate::compiled::model(&t, &links, &c, RoutingMode::Spray, &w, &bw());
    // 14 steps; the ring crosses leaves: NIC link, leaf → spine, spine → leaf, leaf → NIC.
    let wire = (4096 + weft_traffic::bth::DATA_OVERHEAD + weft_traffic::bth::UDP_IP_ETH) as f64;
    let per_link = wire / (100e9 / 8.0) + 3.0 * 5e-9;
    let want = 14.0 * 4.0 * per_link;
    let got = with.completion_s - without.completion_s;
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    assert_eq!(with.ideal_s, without.ideal_s, "the ideal counts bytes only");
}

#[test]
fn random_failures_take_the_asked_share_of_links_reproducibly_and_traffic_avoids_them() {
    let t = fat_tree(8);
    let a = weft_simulate::random_down(&t, 1.0, 7);
    assert_eq!(a, weft_simulate::random_down(&t, 1.0, 7));
    assert_ne!(a, weft_simulate::random_down(&t, 1.0, 8));
    assert_eq!(a.len(), (t.links.len() as f64 * 0.01).round() as usize);
    let mut down = vec![false; t.links.len()];
    for &l in &a {
        down[l] = true;
    }
    let w = all_hosts(&t, Kind::AllToAll, 1 << 20);
    for mode in MODES {
        let (bytes, offered, delivered, _) = loads(&t, &down, mode, &w);
        assert!((delivered - offered).abs() < 1e-6 * offered, "{mode}");
        for &l in &a {
            assert_eq!(
                bytes[2 * l] + bytes[2 * l + 1],
                0.0,
                "{mode}: traffic on a dead link"
            );
        }
    }
}

#[test]
fn a_plane_fabric_runs_the_collective_on_every_plane_at_once() {
    let t = weft_topology::load_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topology/examples/multi-plane-8.yaml"
    ))
    .expect("example");
    let groups = weft_simulate::host_groups(&t);
    assert_eq!(groups.len(), 8);
    assert!(groups.iter().all(|g| g.len() == 128));
    let w = Workload {
        collective: Collective {
            kind: Kind::AllToAll,
            ranks: 128,
            size: 1 << 20,
        },
        groups,
        lanes: 1,
    };
    let links = LinkState::all_up(&t);
    let c = class(&t);
    let o = weft_simulate::compiled::model(&t, &links, &c, RoutingMode::Spray, &w, &bw());
    assert_eq!(o.bytes_unroutable, 0.0);
    assert!((o.bytes_delivered - o.bytes_offered).abs() < 1.0);
    assert!((o.ratio - 1.0).abs() < 1e-9, "{}", o.ratio);
    let _ = simulate;
}
