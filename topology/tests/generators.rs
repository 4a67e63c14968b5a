//! Generated fabrics have the sizes the literature gives and are internally consistent.

use weft_topology::{Peer, Role, Topology, load_str};

fn build(yaml: &str) -> Topology {
    match load_str(yaml, "test.yaml") {
        Ok(t) => t,
        Err(weft_topology::LoadError::Invalid(d)) => {
            panic!(
                "{}",
                d.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        }
        Err(e) => panic!("{e}"),
    }
}

fn count(t: &Topology, r: Role) -> usize {
    t.switches.iter().filter(|s| s.role == r).count()
}

/// Every port's peer points back at it, and every host sits where it says.
fn assert_consistent(t: &Topology) {
    for (li, l) in t.links.iter().enumerate() {
        for e in [l.a, l.b] {
            assert_eq!(
                t.switches[e.switch].ports[e.port].peer,
                Peer::Switch { link: li }
            );
        }
    }
    for (hi, h) in t.hosts.iter().enumerate() {
        assert_eq!(
            t.switches[h.switch].ports[h.port].peer,
            Peer::Host { host: hi }
        );
        let subnet = t.switches[h.switch].host_subnet_v4.expect("leaf subnet");
        assert!(
            subnet.contains(&h.ipv4),
            "{} {} outside {}",
            h.name,
            h.ipv4,
            subnet
        );
    }
}

#[test]
fn fat_tree_k_has_k_cubed_over_4_hosts_and_5k_squared_over_4_switches() {
    for k in [4u32, 8, 16] {
        let t = build(&format!("generators:\n  - kind: fat-tree\n    k: {k}\n"));
        let k = k as usize;
        assert_eq!(t.hosts.len(), k * k * k / 4);
        assert_eq!(t.switches.len(), 5 * k * k / 4);
        assert_eq!(count(&t, Role::Superspine), k * k / 4);
        assert_eq!(count(&t, Role::Leaf), k * k / 2);
        assert_eq!(t.links.len(), k * k * k / 2);
        assert_consistent(&t);
    }
}

#[test]
fn fat_tree_k64_is_the_65536_host_fabric() {
    let t = build("generators:\n  - kind: fat-tree\n    k: 64\n");
    assert_eq!(t.hosts.len(), 65_536);
    assert_eq!(t.switches.len(), 5_120);
    assert_eq!(t.links.len(), 131_072);
    // Every switch uses all 64 ports.
    assert!(
        t.switches
            .iter()
            .all(|s| s.ports.len() == 64 && s.ports.iter().all(|p| p.peer != Peer::None))
    );
}

#[test]
fn leaf_spine_connects_every_leaf_to_every_spine_with_parallel_uplinks() {
    let t = build(
        "generators:\n  - kind: leaf-spine\n    spines: 3\n    leaves: 5\n    hosts_per_leaf: 4\n    uplinks: 2\n",
    );
    assert_eq!(
        (count(&t, Role::Spine), count(&t, Role::Leaf), t.hosts.len()),
        (3, 5, 20)
    );
    assert_eq!(t.links.len(), 3 * 5 * 2);
    let leaf = t.switch_index("leaf2").expect("leaf2");
    let spines: Vec<String> = t
        .neighbours(leaf)
        .map(|(_, _, e)| t.switches[e.switch].name.clone())
        .collect();
    assert_eq!(spines.iter().filter(|s| *s == "spine3").count(), 2);
    assert_consistent(&t);
}

#[test]
fn multi_plane_puts_each_nic_of_a_server_on_its_own_plane() {
    let t = build("generators:\n  - kind: multi-plane\n    planes: 8\n    radix: 64\n");
    // DeepSeek-V3: 8 planes of 64-port switches reach 16,384 GPUs.
    assert_eq!(t.hosts.len(), 16_384);
    assert_eq!(t.switches.len(), 8 * (64 + 32));
    let nics: Vec<_> = t
        .hosts
        .iter()
        .filter(|h| h.name.starts_with("srv7-"))
        .collect();
    assert_eq!(nics.len(), 8);
    let mut planes: Vec<u32> = nics.iter().filter_map(|h| h.plane).collect();
    planes.sort_unstable();
    assert_eq!(planes, (0..8).collect::<Vec<_>>());
    assert!(nics.iter().all(|h| t.switches[h.switch].plane == h.plane));
    assert_consistent(&t);
}

#[test]
fn rail_optimized_wires_gpu_i_of_every_server_to_rail_i() {
    let t = build(
        "generators:\n  - kind: rail-optimized\n    servers: 32\n    gpus_per_server: 8\n    radix: 32\n",
    );
    assert_eq!(t.hosts.len(), 256);
    for h in &t.hosts {
        let rail = h.rail.expect("rail");
        assert!(
            t.switches[h.switch]
                .name
                .ends_with(&format!("-rail{}", rail + 1)),
            "{} on {}",
            h.name,
            t.switches[h.switch].name
        );
    }
    assert_consistent(&t);
}

#[test]
fn explicit_items_override_generated_ones_by_name() {
    let t = build(
        "generators:\n  - kind: leaf-spine\n    spines: 2\n    leaves: 2\n    hosts_per_leaf: 1\n\
         switches:\n  - name: leaf1\n    device_id: 77\n    p4rt_address: 10.9.9.9:9559\n    ports:\n      - {name: Ethernet4, cable_length: 30m}\n\
         hosts:\n  - {name: leaf2-h1, ipv4: 10.0.0.200, ooo_tolerant: true}\n\
         links:\n  - {a: leaf1:Ethernet4, b: spine1:Ethernet0, cable_length: 40m}\n",
    );
    let leaf1 = t.switch("leaf1").expect("leaf1");
    assert_eq!(leaf1.device_id, 77);
    assert_eq!(leaf1.p4rt_address, "10.9.9.9:9559");
    assert_eq!(leaf1.ports[1].cable_length.to_string(), "30m");
    let h = &t.hosts[t.host_index("leaf2-h1").expect("host")];
    assert_eq!(h.ipv4.to_string(), "10.0.0.200");
    assert!(h.ooo_tolerant);
    let l = t
        .links
        .iter()
        .find(|l| t.end_name(l.a) == "leaf1:Ethernet4")
        .expect("link");
    assert_eq!(l.cable_length.to_string(), "40m");
    // Generated ids never collide with the explicit one.
    let mut ids: Vec<u64> = t.switches.iter().map(|s| s.device_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), t.switches.len());
}

#[test]
fn generated_names_and_addresses_are_deterministic() {
    let y = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/leaf-spine-small.yaml"
    ))
    .expect("example");
    let a = serde_json::to_string(&build(&y)).expect("json");
    let b = serde_json::to_string(&build(&y)).expect("json");
    assert_eq!(a, b);
    let t = build(&y);
    let h = &t.hosts[t.host_index("leaf1-h1").expect("leaf1-h1")];
    assert_eq!(h.ipv4.to_string(), "10.0.0.2");
    assert_eq!(h.gateway_v4.to_string(), "10.0.0.1");
    assert_eq!(h.ipv6.map(|a| a.to_string()).as_deref(), Some("fd00:77::2"));
    assert_eq!(
        t.switch("leaf1")
            .and_then(|s| s.host_subnet_v4)
            .map(|n| n.to_string())
            .as_deref(),
        Some("10.0.0.0/29")
    );
}

/// The size check refuses fabrics from the generators' parameters alone, before generating:
/// its counts must be exactly what the generators then make.
#[test]
fn size_estimates_from_parameters_match_what_generators_make() {
    use weft_topology::generators::{GenContext, estimate, generate};
    use weft_topology::model::Generator;
    use weft_topology::units::{Length, Speed};
    let ctx = GenContext {
        speed: Speed::gbps(100),
        host_speed: Speed::gbps(100),
        cable: Length::metres(5),
        host_cable: Length::metres(2),
    };
    let gens = [
        "{kind: leaf-spine, spines: 3, leaves: 5, hosts_per_leaf: 4, uplinks: 2}",
        "{kind: leaf-spine, spines: 2, leaves: 4, hosts_per_leaf: 2, ports: 16}",
        "{kind: fat-tree, k: 8}",
        "{kind: fat-tree, k: 8, hosts_per_leaf: 2}",
        "{kind: multi-plane, planes: 3, radix: 8}",
        "{kind: rail-optimized, servers: 10, gpus_per_server: 4, radix: 16}",
    ];
    for text in gens {
        let g: Generator = serde_yaml_ng::from_str(text).expect("generator");
        let (c, _) = estimate(&g);
        let out = generate(&g, &ctx).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        let ports: usize = out.switches.iter().map(|s| s.ports.len()).sum();
        assert_eq!(
            (c.switches, c.hosts, c.links, c.ports),
            (
                out.switches.len() as u64,
                out.hosts.len() as u64,
                out.links.len() as u64,
                ports as u64
            ),
            "{text}"
        );
    }
}
