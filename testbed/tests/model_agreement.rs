//! The model against the testbed: reports `weft testbed workload --output json` recorded on
//! the small leaf-spine fabric (`tests/data/testbed-*.json`, commands in the README), the
//! model's ratio to the ideal recomputed now for every case with the report's parameters, and
//! held against every recorded run (three per setting), the worst case reported.
//!
//! The model shares links max-min fairly (an ideal congestion control). Which check a run gets
//! is decided by the testbed's own measurement, not by the model under test: a run whose
//! senders met no congestion (CE marks and retransmissions each at most 1% of its data packets,
//! no PFC PAUSE) must agree with the model within 15% both ways; a run whose senders were
//! slowed (DCQCN-like senders reacting over round trips of tens of packet times to 64-packet
//! queues leave part of a bottleneck idle, and a starved BMv2 drops) may be slower than the
//! model by what that costs, but the model may never be more than 15% slower than it, and a
//! case whose every run was congested must be one the model sees oversubscribed (a model that
//! always predicted the ideal fails there). Go-back-N receivers throwing reordered packets
//! away cost retransmissions the model does not see: one-sided. Flowlet paths are a random pick
//! per run (the pipeline's flowlet registers), which the model draws once: its prediction must
//! lie within the runs' range widened by 15%.

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

/// One recorded run of a case: its ratio to the ideal and what its senders met.
#[derive(Debug, Clone)]
struct Measured {
    file: String,
    ratio: f64,
    /// No congestion reaction: CE marks and retransmissions ≤ 1% of data packets, no PAUSE.
    clean: bool,
    why: String,
}

fn measured(file: &str, r: &Report, c: &weft_testbed::workload_report::Case) -> Measured {
    let run = &c.run;
    let packets = (run.bytes_expected as f64 / r.mtu.max(1) as f64).max(1.0);
    let pauses = run.pfc_pauses.unwrap_or(0);
    let clean = (run.ce_marked as f64) <= 0.01 * packets
        && (run.retransmitted as f64) <= 0.01 * packets
        && pauses == 0;
    Measured {
        file: file.rsplit('/').next().unwrap_or(file).to_string(),
        ratio: c.ratio,
        clean,
        why: format!(
            "{:.0} data packets, {} CE, {} retransmitted, {pauses} PAUSE",
            packets, run.ce_marked, run.retransmitted
        ),
    }
}

#[test]
fn the_model_agrees_with_every_uncongested_testbed_run_within_15_percent_and_is_never_15_percent_slower_than_a_congested_one()
 {
    let t = small();
    let class = "roce";
    let reports = reports();
    assert!(!reports.is_empty(), "no recorded reports");
    // Every run of a case (same collective, mode, links down, receivers, ranks) across files.
    type Key = (String, String, Vec<String>, String, Vec<String>);
    let mut runs: std::collections::BTreeMap<Key, (Vec<Measured>, usize)> = Default::default();
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
            e.0.push(measured(file, r, c));
        }
    }
    let mut failures = Vec::new();
    // The worst of each check: (relative difference, what).
    let mut worst_two_sided = (0.0f64, String::new());
    let mut worst_one_sided = (f64::MIN, String::new());
    let (mut clean_runs, mut congested_runs) = (0, 0);
    let mut model_of = std::collections::BTreeMap::new();
    for ((coll, m, links_down, nic, _), (ms, first)) in &runs {
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
        let model = model_outcome(&t, &links, class, mode(m), &spec, gap, true, r.hash_seeds).ratio;
        let bw = model_outcome(&t, &links, class, mode(m), &spec, gap, false, r.hash_seeds);
        let model_oversubscribed =
            bw.ratio > 1.0 + 1e-9 || !bw.steps.iter().all(|s| s.ideal_cut.contains("NIC"));
        let case = format!("{coll} {m} down {} nic {nic}", links_down.len());
        println!(
            "{case}: model {model:.2}{}; testbed {}",
            if model_oversubscribed {
                " (oversubscribed)"
            } else {
                ""
            },
            ms.iter()
                .map(|x| format!(
                    "{:.2} {}",
                    x.ratio,
                    if x.clean { "clean" } else { "congested" }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut sorted: Vec<f64> = ms.iter().map(|x| x.ratio).collect();
        sorted.sort_by(f64::total_cmp);
        model_of.insert(
            (coll.clone(), m.clone(), links_down.clone(), nic.clone()),
            (model, sorted[sorted.len() / 2]),
        );
        if m == "flowlet" {
            let (lo, hi) = (sorted[0], sorted[sorted.len() - 1]);
            if model < lo / 1.15 || model > hi * 1.15 {
                failures.push(format!(
                    "{case}: the model's flowlet draw {model:.2} is outside the runs' range {lo:.2}–{hi:.2} ±15%"
                ));
            }
            continue;
        }
        let gbn = nic.contains("GoBackN");
        for x in ms {
            let what = format!("{case}, {} ({:.2}; {})", x.file, x.ratio, x.why);
            // The model slower than the testbed by this fraction of the testbed's time.
            let slower = (model - x.ratio) / x.ratio;
            if slower > worst_one_sided.0 {
                worst_one_sided = (slower, what.clone());
            }
            if slower > 0.15 {
                failures.push(format!(
                    "{what}: the model ({model:.2}) is {:.0}% slower than the testbed",
                    slower * 100.0
                ));
            }
            if x.clean && !gbn {
                clean_runs += 1;
                let diff = (model - x.ratio).abs() / x.ratio;
                if diff > worst_two_sided.0 {
                    worst_two_sided = (diff, what.clone());
                }
                if diff > 0.15 {
                    failures.push(format!(
                        "{what}: an uncongested run {:.0}% away from the model ({model:.2})",
                        diff * 100.0
                    ));
                }
            } else {
                congested_runs += 1;
            }
        }
        if !gbn && ms.iter().all(|x| !x.clean) && !model_oversubscribed {
            failures.push(format!(
                "{case}: every run met congestion, the model foresaw none (ratio {:.2}, NIC-bound)",
                bw.ratio
            ));
        }
    }
    println!(
        "worst uncongested run against the model: {:.1}% ({}); worst one-sided (model slower than the testbed): {:+.1}% ({}); {clean_runs} uncongested and {congested_runs} congested runs checked",
        worst_two_sided.0 * 100.0,
        worst_two_sided.1,
        worst_one_sided.0 * 100.0,
        worst_one_sided.1
    );
    // Where the testbed ran ECMP slower than spraying (medians), the model foresaw the
    // collision; and where the model foresaw one, the testbed agrees.
    for ((coll, m, down, nic), (model, measured)) in &model_of {
        if m != "ecmp" {
            continue;
        }
        if let Some((sm, sr)) =
            model_of.get(&(coll.clone(), "spray".into(), down.clone(), nic.clone()))
        {
            if *measured > 1.2 * sr && *model <= *sm {
                failures.push(format!(
                    "{coll} down {down:?}: the testbed ran ECMP {measured:.2} against spray {sr:.2}; the model saw no collision ({model:.2} vs {sm:.2})"
                ));
            }
            if *model > 1.2 * sm && measured <= sr {
                failures.push(format!(
                    "{coll} down {down:?}: the model foresaw ECMP collisions, the testbed ran ECMP {measured:.2} ≤ spray {sr:.2}"
                ));
            }
        }
    }
    assert!(
        clean_runs > 0 && congested_runs > 0,
        "runs of both kinds: {clean_runs} uncongested, {congested_runs} congested"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
