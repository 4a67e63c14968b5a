//! The rules on windows of counter snapshots: synthetic ones built here (one fault each on the
//! small leaf-spine fabric, over healthy background traffic) and recorded ones from the testbed
//! (`tests/data/*.json`, written by `weft diagnose --record`). Each window's findings are
//! compared with its golden file in `tests/golden/`; `WEFT_REGEN=1` rewrites the golden files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use weft_diagnose::{
    Drift, End, Fabric, Finding, Kind, Link, PortSample, QueueSample, Sample, SwitchSample,
    Thresholds, Window, diagnose,
};

const DIR: &str = env!("CARGO_MANIFEST_DIR");
const SECS: u64 = 10;

/// 2 spines, 4 leaves, 2 hosts per leaf: leafN Ethernet0/4 → leafN-h1/h2, Ethernet8/12 →
/// spine1/spine2 Ethernet(4·(N-1)).
fn fabric() -> Fabric {
    let mut f = Fabric {
        switches: vec!["spine1".into(), "spine2".into()],
        lossless: vec![3],
        routing: [
            ("default".to_string(), "ecmp".to_string()),
            ("roce".into(), "adaptive".into()),
        ]
        .into(),
        tiers: [("spine1".to_string(), 2), ("spine2".to_string(), 2)].into(),
        ..Default::default()
    };
    for l in 1..=4 {
        let leaf = format!("leaf{l}");
        f.switches.push(leaf.clone());
        f.tiers.insert(leaf.clone(), 1);
        for h in 1..=2 {
            let host = format!("leaf{l}-h{h}");
            f.hosts.push(host.clone());
            f.links.push(Link {
                a: End::new(&leaf, &format!("Ethernet{}", 4 * (h - 1))),
                b: End::new(&host, "eth0"),
            });
        }
        for s in 1..=2 {
            f.links.push(Link {
                a: End::new(&leaf, &format!("Ethernet{}", 8 + 4 * (s - 1))),
                b: End::new(&format!("spine{s}"), &format!("Ethernet{}", 4 * (l - 1))),
            });
        }
    }
    f
}

/// Counter increments over the window, applied to a zero start.
#[derive(Default)]
struct Moves {
    ports: BTreeMap<(String, String), PortSample>,
    queues: BTreeMap<(String, String), QueueSample>,
    drops: BTreeMap<(String, String), u64>,
    /// Switch-wide PSN counts only (a plugin without per-port counts).
    psn: BTreeMap<String, (u64, u64)>,
    /// PSN counts per (switch, port); when any is set, every host port publishes them (zero
    /// where nothing moved) and the switch's total is their sum.
    psn_ports: BTreeMap<(String, String), (u64, u64)>,
    drift: BTreeMap<String, Vec<Drift>>,
    storm_now: Vec<(String, String)>,
    /// Queue-depth histogram increments (shift 2: bucket b is depth 4b..4b+3).
    hist: BTreeMap<(String, String), Vec<u64>>,
}

impl Moves {
    fn port(&mut self, sw: &str, p: &str) -> &mut PortSample {
        self.ports.entry((sw.into(), p.into())).or_default()
    }
    fn queue(&mut self, sw: &str, key: &str) -> &mut QueueSample {
        self.queues.entry((sw.into(), key.into())).or_default()
    }
    /// `pkts` packets from `a` to `b` over one cable: tx at a, rx at b.
    fn wire(&mut self, f: &Fabric, a: &End, pkts: u64, lost: u64) {
        if !f.is_host(&a.node) {
            self.port(&a.node, &a.port).tx_packets += pkts;
            self.queue(&a.node, &format!("{}:3", a.port)).packets += pkts;
        }
        if let Some(b) = f.peer(a).cloned()
            && !f.is_host(&b.node)
        {
            self.port(&b.node, &b.port).rx_packets += pkts - lost;
        }
    }
    /// A flow of `pkts` from one host to another, through spine `via`.
    fn flow(&mut self, f: &Fabric, src: &str, dst: &str, pkts: u64, via: u32) {
        let (sl, dl) = (leaf_of(src), leaf_of(dst));
        self.wire(f, &End::new(src, "eth0"), pkts, 0);
        if sl != dl {
            let up = End::new(&sl, &format!("Ethernet{}", 8 + 4 * (via - 1)));
            self.wire(f, &up, pkts, 0);
            let down = f
                .peer(&End::new(&dl, &format!("Ethernet{}", 8 + 4 * (via - 1))))
                .cloned();
            if let Some(d) = down {
                self.wire(f, &d, pkts, 0);
            }
        }
        let hp = f.host_port(dst).expect("host");
        self.wire(f, &hp, pkts, 0);
    }
}

fn leaf_of(host: &str) -> String {
    host.split('-').next().unwrap_or(host).to_string()
}

/// Healthy background: a ring of flows, every host to the next, 40 pkt/s, half via each spine.
fn background(f: &Fabric, m: &mut Moves) {
    let hosts = f.hosts.clone();
    for (i, h) in hosts.iter().enumerate() {
        let next = &hosts[(i + 1) % hosts.len()];
        m.flow(f, h, next, 20 * SECS, 1);
        m.flow(f, h, next, 20 * SECS, 2);
    }
}

fn window(f: Fabric, m: &Moves) -> Window {
    let mut start = Sample::default();
    let mut end = Sample {
        t_ms: SECS * 1000,
        ..Default::default()
    };
    // Every switch port exists in both samples, with some history at the start.
    for sw in &f.switches {
        let mut s = SwitchSample::default();
        for l in &f.links {
            for e in [&l.a, &l.b] {
                if &e.node == sw {
                    s.ports.insert(
                        e.port.clone(),
                        PortSample {
                            rx_packets: 1000,
                            tx_packets: 1000,
                            ..Default::default()
                        },
                    );
                }
            }
        }
        start.switches.insert(sw.clone(), s.clone());
        end.switches.insert(sw.clone(), s);
    }
    for ((sw, p), d) in &m.ports {
        let e = end
            .switches
            .entry(sw.clone())
            .or_default()
            .ports
            .entry(p.clone())
            .or_default();
        e.rx_packets += d.rx_packets;
        e.tx_packets += d.tx_packets;
        for q in 0..8 {
            e.pfc_rx_pause[q] += d.pfc_rx_pause[q];
            e.pfc_tx_pause[q] += d.pfc_tx_pause[q];
        }
    }
    for ((sw, k), d) in &m.queues {
        start
            .switches
            .entry(sw.clone())
            .or_default()
            .queues
            .insert(k.clone(), QueueSample::default());
        end.switches
            .entry(sw.clone())
            .or_default()
            .queues
            .insert(k.clone(), d.clone());
    }
    for ((sw, r), n) in &m.drops {
        end.switches
            .entry(sw.clone())
            .or_default()
            .drops
            .insert(r.clone(), *n);
        start
            .switches
            .entry(sw.clone())
            .or_default()
            .drops
            .insert(r.clone(), 0);
    }
    for (sw, (o, r)) in &m.psn {
        let s = end.switches.entry(sw.clone()).or_default();
        s.psn_out_of_order = *o;
        s.psn_regressions = *r;
    }
    if !m.psn_ports.is_empty() {
        for l in f.links.iter().filter(|l| f.is_host(&l.b.node)) {
            let (sw, p) = (&l.a.node, &l.a.port);
            let (o, r) = m
                .psn_ports
                .get(&(sw.clone(), p.clone()))
                .copied()
                .unwrap_or((0, 0));
            for (s, (o, r)) in [(&mut start, (0, 0)), (&mut end, (o, r))] {
                let ss = s.switches.entry(sw.clone()).or_default();
                ss.psn_out_of_order += o;
                ss.psn_regressions += r;
                let ps = ss.ports.entry(p.clone()).or_default();
                ps.psn_out_of_order = Some(o);
                ps.psn_regressions = Some(r);
            }
        }
    }
    for (sw, d) in &m.drift {
        end.switches.entry(sw.clone()).or_default().drift = d.clone();
    }
    for ((sw, p), h) in &m.hist {
        for (s, v) in [(&mut start, vec![0; h.len()]), (&mut end, h.clone())] {
            if let Some(ps) = s.switches.get_mut(sw).and_then(|x| x.ports.get_mut(p)) {
                ps.depth_histogram = v;
                ps.histogram_shift = 2;
            }
        }
    }
    for (sw, k) in &m.storm_now {
        if let Some(q) = end.switches.get_mut(sw).and_then(|s| s.queues.get_mut(k)) {
            q.wd_stormed = true;
        }
    }
    Window {
        fabric: f.into(),
        samples: vec![start, end],
    }
}

fn scenario(name: &str) -> Window {
    let f = fabric();
    let mut m = Moves::default();
    background(&f, &mut m);
    match name {
        "healthy" => {}
        "pfc_storm" => {
            // leaf2-h1 pauses leaf2 Ethernet0 every 5 ms; the watchdog declares it stormed and
            // drops what is sent toward it.
            m.port("leaf2", "Ethernet0").pfc_rx_pause[3] += 200 * SECS;
            let q = m.queue("leaf2", "Ethernet0:3");
            q.wd_detected = 1;
            m.storm_now.push(("leaf2".into(), "Ethernet0:3".into()));
            m.drops.insert(("leaf2".into(), "pfc_watchdog".into()), 150);
        }
        "pfc_storm_spreading" => {
            // A storm without the watchdog (alert only), spreading: leaf2 pauses both spines,
            // spine1 pauses leaf1.
            m.port("leaf2", "Ethernet0").pfc_rx_pause[3] += 180 * SECS;
            m.port("leaf2", "Ethernet8").pfc_tx_pause[3] += 40 * SECS;
            m.port("spine1", "Ethernet4").pfc_rx_pause[3] += 40 * SECS;
            m.port("leaf2", "Ethernet12").pfc_tx_pause[3] += 30 * SECS;
            m.port("spine2", "Ethernet4").pfc_rx_pause[3] += 30 * SECS;
            m.port("spine1", "Ethernet0").pfc_tx_pause[3] += 10 * SECS;
            m.port("leaf1", "Ethernet8").pfc_rx_pause[3] += 10 * SECS;
        }
        "stuck_receiver" => {
            // leaf3-h2 pauses in stretches (20 frames/s) and its queue marks, leaf3 pauses
            // upstream.
            m.port("leaf3", "Ethernet4").pfc_rx_pause[3] += 20 * SECS;
            let q = m.queue("leaf3", "Ethernet4:3");
            q.ecn_marked += 8 * SECS;
            m.port("leaf3", "Ethernet8").pfc_tx_pause[3] += 3 * SECS;
            m.port("spine1", "Ethernet8").pfc_rx_pause[3] += 3 * SECS;
        }
        "incast" => {
            for s in ["leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf1-h2"] {
                m.flow(&f, s, "leaf4-h1", 125 * SECS, 1);
                m.flow(&f, s, "leaf4-h1", 125 * SECS, 2);
            }
            let q = m.queue("leaf4", "Ethernet0:3");
            q.ecn_marked += 300 * SECS;
        }
        "incast_few_pauses" => {
            // The incast's queue, and its host paused the port 3 times in the window (fewer
            // than min_pauses): a slow receiver's first window, or a stray frame.
            for s in ["leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf1-h2"] {
                m.flow(&f, s, "leaf4-h1", 125 * SECS, 1);
                m.flow(&f, s, "leaf4-h1", 125 * SECS, 2);
            }
            m.queue("leaf4", "Ethernet0:3").ecn_marked += 300 * SECS;
            m.port("leaf4", "Ethernet0").pfc_rx_pause[3] += 3;
        }
        "incast_with_pfc" => {
            for s in ["leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf4-h2"] {
                m.flow(&f, s, "leaf4-h1", 125 * SECS, 1);
                m.flow(&f, s, "leaf4-h1", 125 * SECS, 2);
            }
            m.queue("leaf4", "Ethernet0:3").ecn_marked += 100 * SECS;
            m.port("leaf4", "Ethernet8").pfc_tx_pause[3] += 20 * SECS;
            m.port("spine1", "Ethernet12").pfc_rx_pause[3] += 20 * SECS;
        }
        "incast_trimmed" => {
            // The lossy trimmed class: leaf4 trims what it cannot queue toward leaf4-h1; no
            // ECN marks, no PAUSE.
            for s in ["leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf1-h2"] {
                m.flow(&f, s, "leaf4-h1", 125 * SECS, 1);
                m.flow(&f, s, "leaf4-h1", 125 * SECS, 2);
            }
            m.queue("leaf4", "Ethernet0:3").trimmed += 60 * SECS;
        }
        "stray_trims" => {
            // A handful of trims under heavy traffic: one burst, not congestion.
            m.flow(&f, "leaf1-h1", "leaf4-h1", 100 * SECS, 1);
            m.flow(&f, "leaf1-h1", "leaf4-h1", 100 * SECS, 2);
            m.queue("leaf4", "Ethernet0:3").trimmed += 6;
        }
        "lossy_link" => {
            // 20% of what spine2 sends to leaf3 is lost on the cable, both ways.
            m.flow(&f, "leaf1-h1", "leaf3-h2", 50 * SECS, 2);
            m.flow(&f, "leaf1-h1", "leaf3-h1", 50 * SECS, 1);
            let tx_sp = m.port("spine2", "Ethernet8").tx_packets;
            m.port("leaf3", "Ethernet12").rx_packets -= tx_sp / 5;
            let tx_lf = m.port("leaf3", "Ethernet12").tx_packets;
            m.port("spine2", "Ethernet8").rx_packets -= tx_lf / 5;
        }
        "loss_everywhere" => {
            // A starved software switch: what three spine ports sent, their leaves saw 60% of.
            for (sp, p, lf, q) in [
                ("spine1", "Ethernet0", "leaf1", "Ethernet8"),
                ("spine1", "Ethernet8", "leaf3", "Ethernet8"),
                ("spine1", "Ethernet12", "leaf4", "Ethernet8"),
            ] {
                let tx = m.port(sp, p).tx_packets;
                m.port(lf, q).rx_packets -= tx * 2 / 5;
            }
        }
        "slow_link" => {
            // leaf1 → spine2 drains at 10 pkt/s: its queue marks, spine2 does not pause.
            m.queue("leaf1", "Ethernet12:3").ecn_marked += 6 * SECS;
            let p = m.port("leaf1", "Ethernet12");
            p.tx_packets = 10 * SECS;
            let q = m.queue("leaf1", "Ethernet12:3");
            q.packets = 10 * SECS;
            m.port("spine2", "Ethernet0").rx_packets = 10 * SECS;
        }
        "slow_link_queue" => {
            // spine2 → leaf3 drains at 5 pkt/s: no ECN marks (thresholds above the queue),
            // but most departures found 8+ packets queued.
            let p = m.port("spine2", "Ethernet8");
            p.tx_packets = 5 * SECS;
            m.port("leaf3", "Ethernet12").rx_packets = 5 * SECS;
            m.hist.insert(
                ("spine2".into(), "Ethernet8".into()),
                vec![5, 4, 6, 7, 8, 7, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0],
            );
        }
        "slow_link_steered" => {
            // leaf4 → spine2 drains at 2 pkt/s: adaptive routing sends nearly everything
            // through spine1, so no queue builds; the group is lopsided.
            m.flow(&f, "leaf4-h1", "leaf1-h2", 50 * SECS, 1);
            m.queue("leaf4", "Ethernet12:3").packets = 2 * SECS;
            m.port("leaf4", "Ethernet12").tx_packets = 2 * SECS;
            m.port("spine2", "Ethernet12").rx_packets = 2 * SECS;
        }
        "black_hole" => {
            m.drops
                .insert(("spine1".into(), "no_route".into()), 20 * SECS);
            m.drift.insert(
                "spine1".into(),
                vec![Drift {
                    key: "P4RT_TABLE:FIXED_IPV4_TABLE:{\"match/ipv4_dst\":\"10.0.0.24/29\",\"match/vrf_id\":\"default\"}".into(),
                    state: "missing".into(),
                }],
            );
        }
        "reordering" => {
            m.flow(&f, "leaf1-h1", "leaf2-h2", 150 * SECS, 1);
            m.flow(&f, "leaf1-h1", "leaf2-h2", 150 * SECS, 2);
            m.psn_ports
                .insert(("leaf2".into(), "Ethernet4".into()), (120 * SECS, 3 * SECS));
        }
        "reordering_under_heavier_traffic" => {
            // leaf2-h1 gets twice the packets leaf2-h2 gets, in order; only leaf2-h2's port
            // counts reordering: the host that sees it is named, not the busiest one.
            m.flow(&f, "leaf1-h1", "leaf2-h2", 100 * SECS, 1);
            m.flow(&f, "leaf1-h1", "leaf2-h2", 100 * SECS, 2);
            m.flow(&f, "leaf3-h1", "leaf2-h1", 200 * SECS, 1);
            m.flow(&f, "leaf3-h1", "leaf2-h1", 200 * SECS, 2);
            m.psn_ports
                .insert(("leaf2".into(), "Ethernet4".into()), (60 * SECS, 0));
        }
        "reordering_switch_total_only" => {
            // A plugin that publishes only the switch's total: the switch is named, its hosts
            // the victims; no host is guessed.
            m.flow(&f, "leaf1-h1", "leaf2-h2", 150 * SECS, 1);
            m.flow(&f, "leaf1-h1", "leaf2-h2", 150 * SECS, 2);
            m.psn.insert("leaf2".into(), (120 * SECS, 3 * SECS));
        }
        other => panic!("no scenario {other}"),
    }
    window(f, &m)
}

const SCENARIOS: &[(&str, Option<(Kind, &str)>)] = &[
    ("healthy", None),
    ("pfc_storm", Some((Kind::PfcStorm, "leaf2-h1"))),
    ("pfc_storm_spreading", Some((Kind::PfcStorm, "leaf2-h1"))),
    ("stuck_receiver", Some((Kind::SlowReceiver, "leaf3-h2"))),
    ("incast", Some((Kind::Congestion, "leaf4-h1"))),
    ("incast_with_pfc", Some((Kind::Congestion, "leaf4-h1"))),
    ("incast_trimmed", Some((Kind::Congestion, "leaf4-h1"))),
    ("stray_trims", None),
    ("lossy_link", Some((Kind::LossyLink, "spine2:Ethernet8"))),
    // spine1 drops on three of its four links: one finding on the switch, not three cables.
    ("loss_everywhere", Some((Kind::LossyLink, "spine1"))),
    ("slow_link", Some((Kind::SlowLink, "leaf1:Ethernet12"))),
    (
        "slow_link_queue",
        Some((Kind::SlowLink, "spine2:Ethernet8")),
    ),
    (
        "slow_link_steered",
        Some((Kind::SlowLink, "leaf4:Ethernet12")),
    ),
    ("black_hole", Some((Kind::BlackHole, "spine1"))),
    ("reordering", Some((Kind::Reordering, "leaf2-h2"))),
    (
        "reordering_under_heavier_traffic",
        Some((Kind::Reordering, "leaf2-h2")),
    ),
    (
        "reordering_switch_total_only",
        Some((Kind::Reordering, "leaf2")),
    ),
];

fn golden(name: &str, findings: &[Finding]) {
    let path = PathBuf::from(DIR)
        .join("tests/golden")
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(findings).expect("findings as JSON") + "\n";
    if std::env::var_os("WEFT_REGEN").is_some() {
        std::fs::write(&path, &text).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (WEFT_REGEN=1 writes it)", path.display()));
    assert_eq!(
        text,
        want,
        "{name}: findings differ from {} (WEFT_REGEN=1 rewrites it)",
        path.display()
    );
}

#[test]
fn each_synthetic_fault_is_the_top_finding_naming_its_target_and_healthy_has_none() {
    let th = Thresholds::default();
    for (name, want) in SCENARIOS {
        let found = diagnose(&scenario(name), &th);
        match want {
            None => assert!(found.is_empty(), "{name}: {found:#?}"),
            Some((kind, target)) => {
                let top = found
                    .first()
                    .unwrap_or_else(|| panic!("{name}: no finding"));
                assert_eq!(top.kind, *kind, "{name}: {found:#?}");
                assert!(
                    top.target.contains(target),
                    "{name}: target {} not {target}",
                    top.target
                );
                assert!(!top.evidence.is_empty(), "{name}: no evidence");
                assert!(!top.action.is_empty());
                if name.starts_with("reordering") {
                    // Every reordering finding is the injected one: none names a bystander.
                    assert_eq!(found.len(), 1, "{name}: {found:#?}");
                }
            }
        }
    }
}

#[test]
fn a_storm_names_its_origin_and_the_victims_along_the_pause_graph() {
    let found = diagnose(&scenario("pfc_storm_spreading"), &Thresholds::default());
    let top = &found[0];
    assert_eq!(top.kind, Kind::PfcStorm);
    assert_eq!(top.target, "leaf2-h1");
    for v in [
        "leaf2:Ethernet0",
        "spine1:Ethernet4",
        "spine2:Ethernet4",
        "leaf1:Ethernet8",
    ] {
        assert!(
            top.victims.iter().any(|x| x == v),
            "{v} not among {:?}",
            top.victims
        );
    }
    // The victims are not reported as origins.
    assert!(
        found
            .iter()
            .all(|f| f.kind != Kind::PfcStorm || f.target == "leaf2-h1")
    );
}

#[test]
fn incast_tells_whether_ecn_acts_before_pfc_and_names_the_senders() {
    let th = Thresholds::default();
    let a = &diagnose(&scenario("incast"), &th)[0];
    assert!(a.summary.contains("ECN acts before PFC"), "{}", a.summary);
    for s in ["leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf1-h2"] {
        assert!(
            a.victims.iter().any(|v| v.starts_with(s)),
            "{s} not in {:?}",
            a.victims
        );
    }
    let b = &diagnose(&scenario("incast_with_pfc"), &th)[0];
    assert!(b.summary.contains("PFC engaged too"), "{}", b.summary);
}

#[test]
fn a_congested_port_whose_host_paused_it_a_few_times_is_neither_an_incast_nor_yet_a_slow_receiver()
{
    let th = Thresholds::default();
    let named = |w: &str| -> Vec<String> {
        diagnose(&scenario(w), &th)
            .iter()
            .filter(|f| f.target == "leaf4-h1")
            .map(|f| f.kind.as_str().to_string())
            .collect()
    };
    assert_eq!(named("incast"), ["congestion"]);
    assert!(
        named("incast_few_pauses").is_empty(),
        "{:?}",
        named("incast_few_pauses")
    );
}

#[test]
fn persistent_trimming_is_congestion_evidence_and_a_stray_burst_is_not() {
    let th = Thresholds::default();
    let f = &diagnose(&scenario("incast_trimmed"), &th)[0];
    assert!(
        f.summary.contains("600 packets trimmed") && f.summary.contains("trimming acted"),
        "{}",
        f.summary
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.counter.starts_with("SAI_QUEUE_STAT_TRIM_PACKETS") && e.delta == 600),
        "{:?}",
        f.evidence
    );
    assert!(diagnose(&scenario("stray_trims"), &th).is_empty());
}

#[test]
fn a_lossy_link_reports_its_loss_rate_on_both_directions() {
    let f = &diagnose(&scenario("lossy_link"), &Thresholds::default())[0];
    assert!(f.summary.contains("20.0%"), "{}", f.summary);
    assert!(
        f.summary.contains("spine2:Ethernet8 → leaf3:Ethernet12"),
        "{}",
        f.summary
    );
    assert!(
        f.summary.contains("leaf3:Ethernet12 → spine2:Ethernet8"),
        "{}",
        f.summary
    );
}

#[test]
fn a_black_hole_names_the_entry_the_switch_lost() {
    let f = &diagnose(&scenario("black_hole"), &Thresholds::default())[0];
    assert!(f.summary.contains("10.0.0.24/29"), "{}", f.summary);
    assert!(f.confidence > 0.95);
}

#[test]
fn synthetic_windows_match_their_golden_findings() {
    let th = Thresholds::default();
    for (name, _) in SCENARIOS {
        golden(
            &format!("synthetic-{name}"),
            &diagnose(&scenario(name), &th),
        );
    }
}

/// What each recorded window (file name `<kind>-<target>-….json` or `healthy-….json`) must
/// yield as its top finding.
fn recorded(dir: &Path) -> Vec<(String, Window)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p).expect("recorded window");
            let w: Window =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push((stem, w));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn recorded_testbed_windows_match_their_golden_findings() {
    let th = Thresholds::default();
    let windows = recorded(&PathBuf::from(DIR).join("tests/data"));
    for (name, w) in &windows {
        let found = diagnose(w, &th);
        // The file name says what was injected: `<kind>--<target>--<n>`, and `--early` for a
        // window too short to name it yet (it may find nothing, but nothing else either).
        let mut parts = name.split("--");
        let kind = parts.next().unwrap_or_default();
        let target = parts.next().unwrap_or_default();
        let early = name.ends_with("--early");
        if kind == "healthy" {
            assert!(found.is_empty(), "{name}: {found:#?}");
        } else {
            // Every finding above the reporting threshold is the injected fault: a second one
            // (another kind, or the same kind naming a bystander) would be a false positive.
            assert!(early || !found.is_empty(), "{name}: no finding");
            for f in &found {
                assert_eq!(f.kind.as_str(), kind, "{name}: {found:#?}");
                assert!(
                    f.target.contains(target),
                    "{name}: {} not {target}: {found:#?}",
                    f.target
                );
            }
        }
        golden(&format!("recorded-{name}"), &found);
    }
    println!("{} recorded windows", windows.len());
}

/// Packets a flow has sent by `ms`: `before` packets/s until `step_ms`, then `after`.
fn sent_by(ms: u64, before: f64, after: f64, step_ms: u64) -> u64 {
    let head = ms.min(step_ms) as f64 / 1000.0 * before;
    let tail = ms.saturating_sub(step_ms) as f64 / 1000.0 * after;
    (head + tail) as u64
}

/// One cable spine1:Ethernet0 → leaf1:Ethernet8 over three samples 1 s apart, each switch
/// polling on its own clock: spine1 900 ms before each sample, leaf1 10 ms before. The spine
/// sends `before` packets/s, then `after` from `step_ms`; the leaf receives `delivered` of it.
fn skewed_cable(before: f64, after: f64, step_ms: u64, delivered: f64) -> Window {
    let fabric = Fabric {
        switches: vec!["spine1".into(), "leaf1".into()],
        tiers: [("spine1".to_string(), 2), ("leaf1".to_string(), 1)].into(),
        links: vec![Link {
            a: End::new("leaf1", "Ethernet8"),
            b: End::new("spine1", "Ethernet0"),
        }],
        ..Default::default()
    };
    let samples = [10_000u64, 11_000, 12_000]
        .iter()
        .map(|&t| {
            let spine_poll = t - 900;
            let leaf_poll = t - 10;
            let spine = SwitchSample {
                ports: [(
                    "Ethernet0".to_string(),
                    PortSample {
                        tx_packets: sent_by(spine_poll, before, after, step_ms),
                        ..Default::default()
                    },
                )]
                .into(),
                poll_ms: Some(spine_poll),
                ..Default::default()
            };
            let got = sent_by(leaf_poll, before, after, step_ms) as f64 * delivered;
            let leaf = SwitchSample {
                ports: [(
                    "Ethernet8".to_string(),
                    PortSample {
                        rx_packets: got as u64,
                        ..Default::default()
                    },
                )]
                .into(),
                poll_ms: Some(leaf_poll),
                ..Default::default()
            };
            Sample {
                t_ms: t,
                switches: [("spine1".to_string(), spine), ("leaf1".to_string(), leaf)].into(),
            }
        })
        .collect();
    Window {
        fabric: fabric.into(),
        samples,
    }
}

#[test]
fn a_cable_whose_sender_paused_mid_window_is_not_lossy_when_its_ends_polled_far_apart() {
    // A PAUSE stopped the spine's sending mid-window; nothing was lost. Judged by the samples'
    // times, the spine's counters (polled 890 ms before the leaf's) "lost" three quarters.
    let w = skewed_cable(1_000_000.0, 0.0, 10_300, 1.0);
    let found = diagnose(&w, &Thresholds::default());
    assert!(
        found.iter().all(|f| f.kind != Kind::LossyLink),
        "{found:#?}"
    );
    // The same ends losing 12% at a steady rate are still named, by their poll times.
    let w = skewed_cable(1_000_000.0, 1_000_000.0, 0, 0.88);
    let found = diagnose(&w, &Thresholds::default());
    assert!(
        found.iter().any(|f| f.kind == Kind::LossyLink
            && f.summary.contains("spine1:Ethernet0 → leaf1:Ethernet8")),
        "{found:#?}"
    );
}
