//! PFC that pauses, on the testbed: a PAUSE storm from one host spreads hop by hop, `weft
//! diagnose` names its origin and victims from the switches' counters, and the watchdog's drop
//! action stops the spreading. Real BMv2 per switch, real redis-server per switch, real plugins,
//! hosts in network namespaces; needs root and BMv2 (SKIPPED without, WEFT_REQUIRE_BMV2=1 fails).
//!
//! The chain it proves, on the small leaf-spine example (2 spines, 4 leaves, 2 hosts each):
//!
//! ```text
//!  leaf1-h1 PAUSE ─► leaf1 holds its queue 3 toward h1 ─► lossless traffic to h1 backs up
//!   ─► leaf1 over xoff: PAUSE to the spines ─► the spines hold their queues toward leaf1
//!   ─► the spines over xoff: PAUSE to leaf2..4 ─► their uplink queues hold, and a flow that
//!      never goes near leaf1 (leaf2-h2 → leaf3-h2, same class) is stuck behind them
//! ```
//!
//! Without the hold (a pipeline that only counts PAUSE) leaf1's queue never backs up and no
//! spine is ever paused, so every assertion of the first phase fails.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::bed::{self, Bed, Needs, REPO, wait_until};

const TEST: &str = "scenario_pfc_spread";
/// DSCP 26: the example's lossless `roce` class (priority 3).
const TOS_ROCE: &str = "104";
const PFC3_RX: &str = "SAI_PORT_STAT_PFC_3_RX_PKTS";
const PFC3_TX: &str = "SAI_PORT_STAT_PFC_3_TX_PKTS";

impl Bed {
    /// A PFC counter of priority 3 summed over `switch`'s ports that `keep` accepts.
    fn pfc3(&self, switch: &str, field: &str, keep: impl Fn(&str) -> bool) -> u64 {
        let sw = self
            .topo
            .switches
            .iter()
            .find(|s| s.name == switch)
            .expect("switch in the example");
        sw.ports
            .iter()
            .filter(|p| keep(&p.name))
            .map(|p| self.hget_u64(switch, 2, &format!("COUNTERS:{}", p.name), field))
            .sum()
    }

    /// The port of `switch` cabled to `peer` (a switch), if any.
    fn port_toward(&self, switch: &str, peer: &str) -> Option<String> {
        self.state().wires.iter().find_map(|w| {
            if w.a.0 == switch && w.b.0 == peer {
                Some(w.a.1.clone())
            } else if w.b.0 == switch && w.a.0 == peer {
                Some(w.b.1.clone())
            } else {
                None
            }
        })
    }

    /// `src` sends paced lossless-class UDP to `dst` for `seconds`, in the background.
    fn feed(&mut self, src: &str, dst: &str, pps: u32, seconds: u32) {
        let ip = self.host_ip(dst);
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(src), "python3"])
            .arg(format!("{REPO}/tests/scripts/udp_probe.py"))
            .args(["send", "--dst", &ip, "--port", "5001", "--tos", TOS_ROCE])
            .args(["--pps", &pps.to_string(), "--seconds", &seconds.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("udp_probe.py send");
        self.keep("feed", child);
    }

    fn diagnose(&self) -> serde_json::Value {
        let out = Command::new(env!("CARGO_BIN_EXE_weft"))
            .arg("diagnose")
            .arg(&self.file)
            .args(["--window", "2s", "--interval", "500ms", "--output", "json"])
            .output()
            .expect("weft diagnose");
        let code = out.status.code();
        assert!(
            code == Some(0) || code == Some(3),
            "weft diagnose exit {code:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("diagnose JSON")
    }
}

/// Each leaf's and spine's PAUSE counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Spread {
    /// leaf1 → spines.
    leaf1_tx_up: u64,
    /// spines ← leaf1.
    spines_rx_from_leaf1: u64,
    /// spines → leaf2..4.
    spines_tx_to_others: u64,
    /// leaf2..4 ← spines.
    others_rx_up: u64,
}

/// The largest one-way latency of a probe run, ms (0 when nothing arrived).
fn max_latency_ms(rep: &serde_json::Value) -> f64 {
    rep["latency_us"]["max"].as_f64().unwrap_or(0.0) / 1000.0
}

fn spread(f: &Bed) -> Spread {
    let spines = ["spine1", "spine2"];
    let others = ["leaf2", "leaf3", "leaf4"];
    let st = f.state();
    let up = |sw: &str| weft_testbed::uplinks(&st, sw);
    let leaf1_up = up("leaf1");
    let mut s = Spread {
        leaf1_tx_up: f.pfc3("leaf1", PFC3_TX, |p| leaf1_up.iter().any(|u| u == p)),
        ..Spread::default()
    };
    for sp in spines {
        let to_leaf1 = f.port_toward(sp, "leaf1");
        let is_leaf1 = |p: &str| to_leaf1.as_deref() == Some(p);
        s.spines_rx_from_leaf1 += f.pfc3(sp, PFC3_RX, is_leaf1);
        s.spines_tx_to_others += f.pfc3(sp, PFC3_TX, |p| !is_leaf1(p));
    }
    for l in others {
        let u = up(l);
        s.others_rx_up += f.pfc3(l, PFC3_RX, |p| u.iter().any(|x| x == p));
    }
    s
}

#[test]
fn a_pfc_storm_from_one_host_spreads_leaf_to_spine_to_other_leaves_is_diagnosed_and_the_watchdog_stops_it()
 {
    let needs = Needs {
        venv: true,
        ..Needs::default()
    };
    let Some(programs) = bed::programs(TEST, &needs) else {
        return;
    };
    // Phase 1: the watchdog only alerts, so the storm spreads as it would without one.
    let alert = |t: String| t.replace("      action: drop\n", "      action: alert\n");
    let mut f = Bed::up_applied(&programs, "pfs", alert, &["--counter-interval-ms", "300"]);

    // Before the storm: what a victim flow that never touches leaf1 gets.
    let baseline = f.incast(&["leaf2-h2"], "leaf3-h2", 150, 2.0, TOS_ROCE);
    let base_rx = baseline["received"].as_u64().unwrap_or(0);
    let base_max = max_latency_ms(&baseline);
    println!(
        "before the storm: leaf2-h2 → leaf3-h2 received {base_rx} of 300, latency {}",
        baseline["latency_us"]
    );
    assert!(
        base_rx >= 270,
        "the victim flow is not healthy before the storm: {baseline}"
    );
    let before = spread(&f);

    // Lossless traffic toward the storming host from every other leaf, then the storm.
    for src in ["leaf2-h1", "leaf3-h1", "leaf4-h1"] {
        f.feed(src, "leaf1-h1", 300, 60);
    }
    std::thread::sleep(Duration::from_secs(1));
    f.start_storm("leaf1-h1", 60);
    // The victim runs from the storm's onset while the spreading is watched: same class,
    // never routed through leaf1, held up behind the paused uplinks. Lossless: nothing is
    // lost, it waits (a pause of 65535 quanta lasts 230 ms here).
    let mut now = before;
    let (spread_in, during) = std::thread::scope(|s| {
        let victim = s.spawn(|| f.incast(&["leaf2-h2"], "leaf3-h2", 150, 8.0, TOS_ROCE));
        let spread_in = wait_until(Duration::from_secs(30), || {
            now = spread(&f);
            now.leaf1_tx_up > before.leaf1_tx_up
                && now.spines_rx_from_leaf1 > before.spines_rx_from_leaf1
                && now.spines_tx_to_others > before.spines_tx_to_others
                && now.others_rx_up > before.others_rx_up
        });
        (spread_in, victim.join().expect("victim probe"))
    });
    println!("PAUSE counters before {before:?}\n           after {now:?} ({spread_in:?})");
    assert!(
        spread_in.is_some(),
        "the storm did not spread leaf1 → spines → other leaves: before {before:?}, after {now:?}; logs in {}",
        f.dir.display()
    );
    let during_max = max_latency_ms(&during);
    println!("during the storm: leaf2-h2 → leaf3-h2: {during}");

    // Diagnosis from the counters: the origin host, and victims beyond its own leaf.
    let v = f.diagnose();
    let storms: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .map(|a| a.iter().filter(|x| x["kind"] == "pfc_storm").collect())
        .unwrap_or_default();
    println!(
        "weft diagnose: {}",
        serde_json::to_string_pretty(&v["findings"]).unwrap_or_default()
    );
    let top = storms
        .first()
        .expect("no pfc_storm finding during a spreading storm");
    assert_eq!(
        top["target"], "leaf1-h1",
        "the storm's origin is not the top storm finding: {storms:?}"
    );
    let victims: Vec<&str> = top["victims"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    assert!(
        victims.iter().any(|x| x.starts_with("spine")),
        "no spine among the storm's victims: {victims:?}"
    );
    assert!(
        victims
            .iter()
            .any(|x| ["leaf2", "leaf3", "leaf4"].iter().any(|l| x.starts_with(l))),
        "no other leaf among the storm's victims: {victims:?}"
    );
    assert!(
        during_max >= 50.0_f64.max(2.0 * base_max),
        "the victim flow was not held up (latency max {during_max:.1} ms, {base_max:.1} ms before): the pauses do not hold"
    );

    // Phase 2: the watchdog drops. leaf1 takes the stormed queue out of PFC, its queue drains,
    // it stops pausing the spines, and the victim flow recovers.
    let text = std::fs::read_to_string(&f.file).expect("intent");
    std::fs::write(
        &f.file,
        text.replace("      action: alert\n", "      action: drop\n"),
    )
    .expect("intent");
    f.apply(&f.file.clone(), "60s");
    let quiet = wait_until(Duration::from_secs(30), || {
        let a = spread(&f);
        std::thread::sleep(Duration::from_millis(1500));
        let b = spread(&f);
        b.spines_rx_from_leaf1 == a.spines_rx_from_leaf1 && b.others_rx_up == a.others_rx_up
    });
    println!("watchdog drop: the spreading stopped after {quiet:?}");
    assert!(
        quiet.is_some(),
        "the spines are still paused with the watchdog dropping: {:?}",
        spread(&f)
    );
    let after = f.incast(&["leaf2-h2"], "leaf3-h2", 150, 2.0, TOS_ROCE);
    let after_rx = after["received"].as_u64().unwrap_or(0);
    let after_max = max_latency_ms(&after);
    println!("storm dropped by the watchdog: leaf2-h2 → leaf3-h2: {after}");
    assert!(
        after_rx * 10 >= base_rx * 9 && after_max < during_max / 2.0,
        "the victim flow did not recover (received {after_rx} against {base_rx}, latency max {after_max:.1} ms against {during_max:.1} ms during the storm): {after}"
    );
    f.stop("storm");
    f.stop("feed");
}
