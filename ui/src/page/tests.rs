//! The page on made-up readings of the small leaf-spine fabric, built from the rows a plugin
//! writes (STATE_DB PORT_TABLE and status row, COUNTERS_DB port rows) through the same
//! conversion the sources use.

use super::*;
use weft_sonic_db::FieldValues;
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::PortCounters;
use weft_sonic_schema::state::{OperStatus, PluginState, PluginStatus, PortState};

fn topo() -> Topology {
    weft_topology::load_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topology/examples/leaf-spine-small.yaml"
    ))
    .expect("example")
}

fn info() -> SourceInfo {
    SourceInfo {
        name: "test".into(),
        no_plugin: "no live plugin".into(),
    }
}

/// What the fabric's switches hold at `t_s` seconds.
#[derive(Clone)]
struct Fabric {
    plugin: bool,
    counters: bool,
    /// (switch, port) whose carrier is down.
    down: Vec<(String, String)>,
    /// Every port sends this many bytes/s.
    bytes_per_s: u64,
    /// (switch, port): PAUSE frames/s received on priority 3.
    pausing: Vec<(String, String, u64)>,
}

impl Default for Fabric {
    fn default() -> Self {
        Fabric {
            plugin: true,
            counters: true,
            down: Vec::new(),
            bytes_per_s: 1_000_000,
            pausing: Vec::new(),
        }
    }
}

type Tables = BTreeMap<String, BTreeMap<String, FieldValues>>;

fn reading(t: &Topology, f: &Fabric, t_s: u64) -> Reading {
    let switches = t
        .switches
        .iter()
        .map(|sw| {
            let mut state = Tables::new();
            let mut counters = Vec::new();
            for p in &sw.ports {
                let down = f.down.iter().any(|(s, q)| *s == sw.name && *q == p.name);
                let ps = PortState {
                    port: p.name.clone(),
                    oper_status: if down {
                        OperStatus::Down
                    } else {
                        OperStatus::Up
                    },
                    admin_status: None,
                };
                state
                    .entry(PortState::TABLE.to_string())
                    .or_default()
                    .insert(ps.key(), ps.to_fields());
                let mut pc = PortCounters {
                    port: p.name.clone(),
                    tx_bytes: Some(f.bytes_per_s * t_s),
                    rx_bytes: Some(f.bytes_per_s * t_s),
                    tx_packets: Some(f.bytes_per_s * t_s / 1000),
                    rx_packets: Some(f.bytes_per_s * t_s / 1000),
                    ..Default::default()
                };
                if let Some((_, _, rate)) = f
                    .pausing
                    .iter()
                    .find(|(s, q, _)| *s == sw.name && *q == p.name)
                {
                    pc.pfc[3].rx_pause = Some(rate * t_s);
                }
                counters.push((pc.key(), pc.to_fields()));
            }
            if f.plugin {
                let mut st = PluginStatus::fresh(PluginState::Running, "127.0.0.1:9559");
                st.updated_ms = t_s * 1000;
                state
                    .entry(PluginStatus::TABLE.to_string())
                    .or_default()
                    .insert(st.key(), st.to_fields());
            }
            if !f.counters {
                counters.clear();
            }
            SwitchReading::from_rows(sw, Ok(&state), Ok(&counters))
        })
        .collect();
    Reading {
        t_ms: 1_700_000_000_000 + t_s * 1000,
        switches,
        took_ms: 1,
    }
}

fn link_index(p: &Page, name: &str) -> usize {
    p.layout
        .links
        .iter()
        .position(|l| l.name == name)
        .unwrap_or_else(|| panic!("no link {name}"))
}

#[test]
fn a_db_only_fabric_shows_every_switch_unknown_every_link_unknown_and_judges_nothing() {
    let t = topo();
    let mut p = Page::new(&t, info(), 10_000, 300_000);
    let db_only = Fabric {
        plugin: false,
        counters: false,
        ..Default::default()
    };
    let mut f = p.update(&reading(&t, &db_only, 1), &RunSeen::NotRunning, true);
    assert_eq!(f.diagnosis.state, "collecting");
    f = p.update(&reading(&t, &db_only, 2), &RunSeen::NotRunning, true);
    assert_eq!(f.sw, "U".repeat(t.switches.len()), "{:?}", f.why);
    assert_eq!(f.totals.running, 0);
    assert!(f.why.values().all(|w| w == "no live plugin"));
    assert!(
        f.lu.iter().all(|u| *u == -1),
        "no utilisation without counters"
    );
    assert_eq!(f.cn, "n".repeat(t.switches.len()));
    assert_eq!(f.diagnosis.state, "no data", "{:?}", f.diagnosis);
    assert!(f.diagnosis.findings.is_empty());
    // Ports read up, but no plugin: the links' ends are up (STATE_DB says so), their use and
    // load are not known.
    assert!(f.ls.bytes().all(|c| c == b'u'), "{}", f.ls);
}

#[test]
fn counters_nobody_writes_any_more_are_stale_and_give_no_rate() {
    let t = topo();
    let mut p = Page::new(&t, info(), 10_000, 300_000);
    let orphaned = Fabric {
        plugin: false,
        ..Default::default()
    };
    p.update(&reading(&t, &orphaned, 1), &RunSeen::NotRunning, false);
    let f = p.update(&reading(&t, &orphaned, 2), &RunSeen::NotRunning, false);
    assert_eq!(f.cn, "s".repeat(t.switches.len()));
    assert!(f.lu.iter().all(|u| *u == -1));
    assert_eq!(f.totals.counters_ok, 0);
}

#[test]
fn rates_come_with_the_second_read_and_a_port_going_down_is_a_down_link_and_an_event() {
    let t = topo();
    let mut p = Page::new(&t, info(), 10_000, 300_000);
    let mut fab = Fabric::default();
    let first = p.update(&reading(&t, &fab, 1), &RunSeen::NotRunning, false);
    assert_eq!(first.sw, "R".repeat(t.switches.len()));
    assert!(first.lu.iter().all(|u| *u == -1), "one read has no rate");
    let second = p.update(&reading(&t, &fab, 2), &RunSeen::NotRunning, false);
    let li = link_index(&p, "leaf1:Ethernet8 ↔ spine1:Ethernet0");
    // 1 MB/s = 8 Mb/s on 100 Gb/s: 0.08‰ rounds to 0, known.
    assert_eq!(second.lu[li], 0);
    assert_eq!(second.ls.as_bytes()[li], b'u');
    fab.bytes_per_s = 6_250_000_000; // 50 Gb/s from t=2 on: the counters jump.
    let third = p.update(&reading(&t, &fab, 3), &RunSeen::NotRunning, false);
    assert!(third.lu[li] > 900, "{}", third.lu[li]);
    fab.down.push(("leaf1".into(), "Ethernet8".into()));
    let down = p.update(&reading(&t, &fab, 4), &RunSeen::NotRunning, false);
    assert_eq!(down.ls.as_bytes()[li], b'd');
    assert_eq!(down.totals.links_down, 1);
    let e = &down.events[0];
    assert_eq!(
        (e.kind, e.subject.as_str(), e.detail.as_str()),
        ("link", "leaf1:Ethernet8 ↔ spine1:Ethernet0", "up → down")
    );
    fab.down.clear();
    let up = p.update(&reading(&t, &fab, 5), &RunSeen::NotRunning, false);
    assert_eq!(up.ls.as_bytes()[li], b'u');
    assert_eq!(up.events[0].detail, "down → up");
    let drill = crate::drill::link(&p, &t, li).expect("link");
    assert_eq!(drill["ends"][0]["switch"], "leaf1");
    assert!(
        drill["series"]["t"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
}

#[test]
fn weft_runs_view_marks_suppressed_links_unconverged_switches_and_reconvergences() {
    use weft_reconcile::core::{LinkStatus, Reconvergence};
    use weft_reconcile::run::DaemonStatus;
    let t = topo();
    let mut p = Page::new(&t, info(), 10_000, 300_000);
    let fab = Fabric::default();
    let name = "leaf2:Ethernet8 ↔ spine1:Ethernet4";
    let status = |n: u64| DaemonStatus {
        fabric: t.name.clone(),
        pid: 1,
        host: "h".into(),
        started_ms: 0,
        locked: None,
        links_total: t.links.len(),
        links: vec![LinkStatus {
            link: name.into(),
            oper_up: true,
            in_use: false,
            suppressed: true,
            penalty: 3000,
            flaps: 9,
        }],
        switches: vec![(
            "spine2".into(),
            serde_json::json!({"state": "not-ready", "reason": "plugin syncing"}),
        )],
        switches_converged: 5,
        reconvergences: n,
        writes: 0,
        last: Some(Reconvergence {
            changes: vec![format!("{name} down")],
            switches_changed: 4,
            entries_written: 12,
            failed: 0,
            compute_us: 10,
            total_ms: 84.0,
        }),
        ha: None,
    };
    p.update(
        &reading(&t, &fab, 1),
        &RunSeen::Running(Box::new(status(3))),
        false,
    );
    let f = p.update(
        &reading(&t, &fab, 2),
        &RunSeen::Running(Box::new(status(5))),
        false,
    );
    let li = link_index(&p, name);
    assert_eq!(f.ls.as_bytes()[li], b's');
    let spine2 = t.switch_index("spine2").expect("spine2");
    assert_eq!(f.sw.as_bytes()[spine2], b'N');
    assert!(f.why[&spine2].contains("plugin syncing"), "{:?}", f.why);
    assert_eq!(f.run.state, "running");
    let rec = f
        .events
        .iter()
        .find(|e| e.kind == "reconvergence")
        .expect("a reconvergence event");
    assert!(
        rec.detail.contains("84 ms") && rec.detail.contains("1 more"),
        "{}",
        rec.detail
    );
}

#[test]
fn a_host_pausing_its_leaf_for_the_whole_window_is_a_pfc_storm_finding_with_evidence() {
    let t = topo();
    let mut p = Page::new(&t, info(), 4_000, 300_000);
    let fab = Fabric {
        pausing: vec![("leaf1".into(), "Ethernet0".into(), 400)],
        ..Default::default()
    };
    let mut f = p.update(&reading(&t, &fab, 1), &RunSeen::NotRunning, true);
    for s in 2..=6 {
        f = p.update(&reading(&t, &fab, s), &RunSeen::NotRunning, true);
    }
    assert_eq!(f.diagnosis.state, "findings", "{:?}", f.diagnosis);
    let top = &f.diagnosis.findings[0];
    assert_eq!(top.kind, weft_diagnose::Kind::PfcStorm);
    assert_eq!(top.target, "leaf1-h1");
    assert!(top.evidence.iter().any(|e| e.switch == "leaf1"));
    assert!(
        f.diagnosis.samples <= 7,
        "the window is thinned: {}",
        f.diagnosis.samples
    );
    let host_link = link_index(&p, "leaf1-h1 ↔ leaf1:Ethernet0");
    assert!(
        f.hot[&host_link].pause >= 399.0,
        "{:?}",
        f.hot.get(&host_link)
    );
}
