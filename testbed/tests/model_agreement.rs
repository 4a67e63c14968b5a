//! The model against the testbed: reports `weft testbed workload --output json` recorded on
//! the small leaf-spine fabric (`tests/data/testbed-*.json`, commands in the README), the
//! model's ratio to the ideal recomputed now for every case with the report's parameters.
//!
//! Each case's measured ratio is its median over the recorded runs (three per setting).
//!
//! The model shares links max-min fairly (an ideal congestion control). Where no link must
//! carry more than its senders' NICs can offer it (spraying with every link up, and any
//! routing whose hash happens not to collide), the testbed's senders never need to slow down,
//! and model and testbed must agree within 15%. Where links are oversubscribed (a hash
//! collision, a link down, or go-back-N receivers throwing away reordered packets), the
//! testbed's DCQCN-like senders, reacting over round trips of tens of packet times to
//! 64-packet queues, leave part of the bottleneck idle: there the model may be as optimistic
//! as that costs, but never more than 15% slower than the testbed, and it must foresee which
//! routing collides.

use weft_compiler::LinkState;
use weft_testbed::workload_report::{Report, model_outcome, parse_duration, spec_of};
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

/// The median of a case's measured ratios over the recorded runs.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[test]
fn the_model_agrees_with_the_testbed_within_15_percent_without_oversubscription_and_is_never_15_percent_slower_with()
 {
    let t = small();
    let class = "roce";
    let reports = reports();
    assert!(!reports.is_empty(), "no recorded reports");
    // Every run of a case (same collective, mode, links down, receivers, ranks) across files.
    type Key = (String, String, Vec<String>, String, Vec<String>);
    let mut runs: std::collections::BTreeMap<Key, (Vec<f64>, usize)> = Default::default();
    for (i, (file, r)) in reports.iter().enumerate() {
        for c in &r.cases {
            let Some(m) = &c.mode else { continue };
            assert!(c.run.complete, "{file}: a recorded case is incomplete");
            let key = (
                c.collective.as_str().to_string(),
                m.clone(),
                c.links_down.clone(),
                format!("{:?}", r.nic),
                r.ranks.clone(),
            );
            let e = runs.entry(key).or_insert((Vec::new(), i));
            e.0.push(c.ratio);
        }
    }
    let (mut agreed, mut bounded) = (0, 0);
    let mut model_of = std::collections::BTreeMap::new();
    for ((coll, m, links_down, nic, _), (ratios, first)) in &runs {
        let r = &reports[*first].1;
        let gap = parse_duration(&r.flowlet_gap).expect("flowlet gap");
        let down: Vec<String> = links_down
            .iter()
            .filter_map(|l| l.split(" ↔ ").next().map(str::to_string))
            .collect();
        let links: LinkState = weft_compiler::down::link_state(
            &t,
            &weft_compiler::down::links_down(&t, &down).expect("links"),
        );
        let kind = coll.parse().expect("collective");
        let spec = spec_of(&t, r, kind);
        let with = model_outcome(&t, &links, class, mode(m), &spec, gap, true, r.hash_seeds);
        let bw = model_outcome(&t, &links, class, mode(m), &spec, gap, false, r.hash_seeds);
        let oversubscribed =
            bw.ratio > 1.0 + 1e-9 || !bw.steps.iter().all(|s| s.ideal_cut.contains("NIC"));
        let measured = median(ratios.clone());
        println!(
            "{coll:<9} {m:<8} down {} nic {nic}: testbed {measured:.2} (runs {}), model {:.2}{}",
            links_down.len(),
            ratios
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" "),
            with.ratio,
            if oversubscribed {
                " (oversubscribed)"
            } else {
                ""
            }
        );
        model_of.insert(
            (coll.clone(), m.clone(), links_down.clone(), nic.clone()),
            (with.ratio, measured),
        );
        if nic.contains("GoBackN") {
            // The model places bytes; go-back-N's retransmissions are what it cannot see.
            assert!(
                with.ratio <= measured * 1.15,
                "{coll} {m}: GBN below the model"
            );
            continue;
        }
        if oversubscribed {
            assert!(
                with.ratio <= measured * 1.15,
                "{coll} {m} down {links_down:?}: the model ({:.2}) is more than 15% slower than the testbed ({measured:.2})",
                with.ratio
            );
            bounded += 1;
        } else {
            assert!(
                (with.ratio - measured).abs() <= 0.15 * measured,
                "{coll} {m} down {links_down:?}: model {:.2} vs testbed {measured:.2}",
                with.ratio
            );
            agreed += 1;
        }
    }
    // Where the model says ECMP's hash collides and spraying does not, the testbed agrees.
    for ((coll, m, down, nic), (model, measured)) in &model_of {
        if m != "ecmp" {
            continue;
        }
        if let Some((sm, sr)) =
            model_of.get(&(coll.clone(), "spray".into(), down.clone(), nic.clone()))
            && *model > 1.2 * sm
        {
            assert!(
                measured > sr,
                "{coll} down {down:?}: the model foresaw ECMP collisions, the testbed ran ECMP {measured:.2} ≤ spray {sr:.2}"
            );
        }
    }
    assert!(
        agreed > 0 && bounded > 0,
        "cases of both kinds: {agreed} agreed, {bounded} bounded"
    );
}
