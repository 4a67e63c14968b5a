//! The model at fabric scale: `cargo bench -p weft-simulate --bench simulate`.
//!
//! Every (fabric, links down, collective, mode) of the README's table, timed; 1 GiB per rank.
//! `WEFT_BENCH_FABRICS=k16,k32,planes` picks fabrics (default all), `WEFT_BENCH_DOWN=none,1,1%`
//! the link sets (default all; "1" is the README's leaf uplink: `pod1-leaf1:Ethernet32` at k=16,
//! `plane1-leaf1:Ethernet32` on the planes, `pod1-leaf1:Ethernet64` at k=32);
//! `WEFT_BENCH_JSON=FILE` also writes every outcome as JSON lines.

use std::io::Write;
use std::time::Instant;

use weft_compiler::LinkState;
use weft_simulate::compiled::{class_of, model};
use weft_simulate::model::{Params, Workload};
use weft_topology::{RoutingMode, Topology};
use weft_traffic::collective::{Collective, Kind};

/// The leaf uplink the README's "1 (leaf uplink)" rows take down on fabric `name`.
fn leaf_uplink(name: &str) -> &'static str {
    match name {
        "k16" => "pod1-leaf1:Ethernet32",
        "k32" => "pod1-leaf1:Ethernet64",
        _ => "plane1-leaf1:Ethernet32",
    }
}

fn load(name: &str) -> Topology {
    let path = match name {
        "k16" => concat!(env!("CARGO_MANIFEST_DIR"), "/fabrics/fat-tree-k16.yaml"),
        "k32" => concat!(env!("CARGO_MANIFEST_DIR"), "/fabrics/fat-tree-k32.yaml"),
        _ => concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/multi-plane-8.yaml"
        ),
    };
    weft_topology::load_file(path).expect("fabric")
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    let fabrics: Vec<String> = std::env::var("WEFT_BENCH_FABRICS")
        .unwrap_or_else(|_| "k16,planes,k32".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let sets: Vec<String> = std::env::var("WEFT_BENCH_DOWN")
        .unwrap_or_else(|_| "none,1,1%".into())
        .split(',')
        .map(str::to_string)
        .collect();
    let mut json = std::env::var_os("WEFT_BENCH_JSON").and_then(|p| std::fs::File::create(p).ok());
    let modes = [
        RoutingMode::Ecmp,
        RoutingMode::Wcmp,
        RoutingMode::Flowlet,
        RoutingMode::Spray,
        RoutingMode::Adaptive,
    ];
    println!(
        "{:<14} {:<10} {:<9} {:<9} {:>7} {:>9} {:>9} {:>9} {:>9}",
        "fabric", "down", "collect.", "mode", "×ideal", "max/mean", "time", "ranks", "RSS MiB"
    );
    for name in &fabrics {
        let t = load(name);
        let class = class_of(&t, None).expect("class");
        let groups = weft_simulate::host_groups(&t);
        let ranks = groups[0].len() as u32;
        let uplink = weft_compiler::down::links_down(&t, &[leaf_uplink(name).to_string()])
            .expect("the README's leaf uplink is a link of the fabric");
        for (label, down) in [
            ("none", Vec::new()),
            ("1 link", uplink.into_iter().collect()),
            ("1%", weft_simulate::random_down(&t, 1.0, 1)),
        ] {
            let key = label.split(' ').next().unwrap_or(label);
            if !sets.iter().any(|s| s == key) {
                continue;
            }
            let mut ls = LinkState::all_up(&t);
            for &l in &down {
                ls.set_down(l, true);
            }
            for kind in [Kind::AllReduce, Kind::AllToAll] {
                let w = Workload {
                    collective: Collective {
                        kind,
                        ranks,
                        size: 1 << 30,
                    },
                    groups: groups.clone(),
                    lanes: 1,
                };
                for m in modes {
                    let t0 = Instant::now();
                    let o = model(&t, &ls, &class, m, &w, &Params::default());
                    let dt = t0.elapsed().as_secs_f64();
                    println!(
                        "{:<14} {:<10} {:<9} {:<9} {:>7.2} {:>9.2} {:>8.1}s {:>9} {:>9.0}",
                        t.name,
                        label,
                        kind.as_str(),
                        m.as_str(),
                        o.ratio,
                        o.max_fabric_link_s / o.mean_fabric_link_s.max(f64::MIN_POSITIVE),
                        dt,
                        groups.iter().map(Vec::len).sum::<usize>(),
                        peak_rss_mib()
                    );
                    if let Some(f) = json.as_mut() {
                        let _ = writeln!(
                            f,
                            "{}",
                            serde_json::json!({
                                "fabric": t.name, "down": label, "links_down": down.len(),
                                "collective": kind.as_str(), "mode": m.as_str(),
                                "seconds": dt, "outcome": o,
                            })
                        );
                    }
                }
            }
        }
    }
}
