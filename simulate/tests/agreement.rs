//! The model against the testbed: reports `weft testbed workload --output json` recorded on
//! the small leaf-spine fabric (`tests/data/testbed-*.json`, commands in the README), the
//! model's ratio to the ideal recomputed now for every case with the report's parameters.
//!
//! The model shares links max-min fairly (an ideal congestion control). Where no link must
//! carry more than its senders' NICs can offer it (spraying with every link up, and any
//! routing whose hash happens not to collide), the testbed's senders never need to slow down,
//! and model and testbed must agree within 15%. Where links are oversubscribed (a hash
//! collision, or a link down), the testbed's DCQCN-like senders, reacting over round trips of
//! tens of packet times to 64-packet queues, leave part of the bottleneck idle: there the
//! model must be a lower bound, and must foresee which routing collides.

use weft_controller::cmd::workload::{Report, model_outcome, parse_duration, spec_of};
use weft_controller::compile::LinkState;
use weft_topology::{RoutingMode, Topology};

fn small() -> Topology {
    weft_topology::load_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topology/examples/leaf-spine-small.yaml"
    ))
    .expect("example")
}

fn reports() -> Vec<(String, Report)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let mut out: Vec<(String, Report)> = std::fs::read_dir(dir)
        .expect("tests/data")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("testbed-"))
        })
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("report");
            let r: Report = serde_json::from_str(&text).expect("a workload report");
            (p.display().to_string(), r)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn mode(s: &str) -> RoutingMode {
    match s {
        "ecmp" => RoutingMode::Ecmp,
        "wcmp" => RoutingMode::Wcmp,
        "flowlet" => RoutingMode::Flowlet,
        "spray" => RoutingMode::Spray,
        _ => RoutingMode::Adaptive,
    }
}

#[test]
fn the_model_agrees_with_the_testbed_within_15_percent_without_oversubscription_and_bounds_it_below_with()
 {
    let t = small();
    let class = "roce";
    let reports = reports();
    assert!(!reports.is_empty(), "no recorded reports");
    let (mut agreed, mut bounded) = (0, 0);
    for (file, r) in &reports {
        let gap = parse_duration(&r.flowlet_gap).expect("flowlet gap");
        for c in &r.cases {
            let Some(m) = c.mode.as_deref().map(mode) else {
                continue;
            };
            assert!(c.run.complete, "{file}: a recorded case is incomplete");
            let down: Vec<String> = c
                .links_down
                .iter()
                .filter_map(|l| l.split(" ↔ ").next().map(str::to_string))
                .collect();
            let links: LinkState =
                weft_controller::cmd::plan::links_down(&t, &down).expect("links");
            let spec = spec_of(&t, r, c.collective);
            let with = model_outcome(&t, &links, class, m, &spec, gap, true);
            let bw = model_outcome(&t, &links, class, m, &spec, gap, false);
            let oversubscribed =
                bw.ratio > 1.0 + 1e-9 || !bw.steps.iter().all(|s| s.ideal_cut.contains("NIC"));
            let measured = c.ratio;
            println!(
                "{:<9} {:<8} down {} nic {:?}: testbed {measured:.2}, model {:.2}{}",
                c.collective.as_str(),
                m.as_str(),
                c.links_down.len(),
                r.nic,
                with.ratio,
                if oversubscribed {
                    " (oversubscribed)"
                } else {
                    ""
                }
            );
            if oversubscribed {
                assert!(
                    with.ratio <= measured * 1.05,
                    "{file}: {} {m} down {:?}: the model ({:.2}) must not be slower than the testbed ({measured:.2})",
                    c.collective,
                    c.links_down,
                    with.ratio
                );
                bounded += 1;
            } else {
                assert!(
                    (with.ratio - measured).abs() <= 0.15 * measured,
                    "{file}: {} {m} down {:?}: model {:.2} vs testbed {measured:.2}",
                    c.collective,
                    c.links_down,
                    with.ratio
                );
                agreed += 1;
            }
        }
        // Where the model says the hash collides and spraying does not, so does the testbed.
        for c in &r.cases {
            if c.mode.as_deref() != Some("ecmp") {
                continue;
            }
            let Some(s) = r.cases.iter().find(|s| {
                s.mode.as_deref() == Some("spray")
                    && s.collective == c.collective
                    && s.links_down == c.links_down
            }) else {
                continue;
            };
            if c.model_ratio.unwrap_or(0.0) > 1.2 * s.model_ratio.unwrap_or(f64::MAX) {
                assert!(
                    c.ratio > s.ratio,
                    "{file}: {} down {:?}: the model foresaw ECMP collisions, the testbed ran ECMP {:.2} ≤ spray {:.2}",
                    c.collective,
                    c.links_down,
                    c.ratio,
                    s.ratio
                );
            }
        }
    }
    assert!(
        agreed > 0 && bounded > 0,
        "cases of both kinds: {agreed} agreed, {bounded} bounded"
    );
}
