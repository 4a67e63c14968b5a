//! The readers against real redis-servers (one per switch, as a switch's SONiC DB): a switch
//! that answers with rows, one that answers with nothing, one whose DB is not there, and one
//! that accepts the connection and never answers are told apart, and every verdict built on
//! them keeps them apart.

use std::collections::BTreeMap;
use weft_observe::read::{ReadError, SwitchRead};
use weft_observe::switch::{self, Want};
use weft_observe::{doctor, top};
use weft_sonic_db::{SonicDb, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{PortCounters, QueueCounters, SwitchCounters};
use weft_sonic_schema::state::{OperStatus, PluginState, PluginStatus, PortState};
use weft_tests::redis::RedisServer;
use weft_topology::Topology;

/// The small leaf-spine example with leaf1's and leaf2's DBs at `leaf1` and `leaf2`, spine2's
/// at `spine2`, and the others' in a directory nobody serves.
fn fabric(leaf1: &str, leaf2: &str, spine2: &str) -> (Topology, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("weft-observe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topology/examples/leaf-spine-small.yaml"
    ))
    .expect("example")
    .replace(
        "    p4rt_address: 127.0.0.1:9559\n",
        &format!(
            "    p4rt_address: 127.0.0.1:9559\n    db_socket_dir: {}/nowhere\n",
            dir.display()
        ),
    );
    let text = format!(
        "{text}\nswitches:\n  - name: leaf1\n    db: {leaf1}\n  - name: leaf2\n    db: {leaf2}\n  - name: spine2\n    db: {spine2}\n"
    );
    let t = weft_topology::load_str(&text, "observe-fabric.yaml").expect("valid intent");
    (t, dir)
}

/// A TCP port that accepts connections and never answers (a DB that hangs).
fn silent_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            held.push(s);
        }
    });
    port
}

/// leaf1 as its plugin leaves it: ports up, counters, a status row of Weft's pipeline.
async fn write_leaf1(url: &str) {
    let sonic = SonicDb::from_endpoint(url).expect("endpoint");
    let counters = Table::new(
        sonic
            .connect(SonicDbId::CountersDb)
            .await
            .expect("counters db"),
        "COUNTERS",
    )
    .expect("table");
    let port = PortCounters {
        port: "Ethernet0".into(),
        rx_packets: Some(10),
        tx_packets: Some(20),
        ..Default::default()
    };
    counters
        .set(&port.key(), &port.to_fields())
        .await
        .expect("port row");
    let q = QueueCounters {
        port: "Ethernet0".into(),
        queue: 3,
        packets: Some(5),
        ecn_marked: Some(2),
        ..Default::default()
    };
    counters
        .set(&q.key(), &q.to_fields())
        .await
        .expect("queue row");
    // The plugin stamps every poll: these counters are current.
    let poll = SwitchCounters {
        poll_time_ms: Some(weft_observe::now_ms()),
        poll_interval_ms: Some(1000),
        ..Default::default()
    };
    counters
        .set(&poll.key(), &poll.to_fields())
        .await
        .expect("switch row");
    let state = sonic.connect(SonicDbId::StateDb).await.expect("state db");
    let ports = Table::new(state.clone(), PortState::TABLE).expect("table");
    let up = PortState {
        port: "Ethernet0".into(),
        oper_status: OperStatus::Up,
        admin_status: None,
    };
    ports
        .set(&up.key(), &up.to_fields())
        .await
        .expect("port state");
    let status = PluginStatus {
        pipeline_cookie: doctor::expected_cookie(),
        counter_polls: 1,
        ..PluginStatus::fresh(PluginState::Running, "test")
    };
    Table::new(state, PluginStatus::TABLE)
        .expect("table")
        .set(&status.key(), &status.to_fields())
        .await
        .expect("status row");
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn rows_no_rows_and_no_answer_are_read_apart_and_none_of_them_but_current_rows_is_data() {
    let (a, b) = (
        RedisServer::start().expect("redis-server"),
        RedisServer::start().expect("redis-server"),
    );
    let silent = format!("redis://127.0.0.1:{}", silent_port());
    let (t, dir) = fabric(&a.url(), &b.url(), &silent);
    let rt = rt();
    rt.block_on(write_leaf1(&a.url()));
    let snap = rt.block_on(top::snapshot(&t));
    assert!(matches!(&snap.switches["leaf1"], SwitchRead::Ok(rows) if rows.len() == 3));
    assert_eq!(
        snap.switches["leaf2"],
        SwitchRead::NoData,
        "an empty COUNTERS_DB"
    );
    assert!(
        matches!(
            &snap.switches["spine1"],
            SwitchRead::Unreachable(ReadError::Unreachable { .. })
        ),
        "{:?}",
        snap.switches["spine1"]
    );
    // A DB that accepts and never answers: the driver's connection timeout (2 s, under the
    // read's 3 s) says so first.
    assert!(
        matches!(
            &snap.switches["spine2"],
            SwitchRead::Unreachable(ReadError::Unreachable { reason, .. }) if reason.contains("timed out")
        ),
        "{:?}",
        snap.switches["spine2"]
    );
    // `weft top` names every switch it could not use, why, and judges nothing of them.
    let v = top::view(
        &t,
        &snap,
        &snap,
        1.0,
        &BTreeMap::new(),
        top::Sort::Utilisation,
        "",
    );
    let unread: Vec<(&str, &str)> = v
        .unknown
        .iter()
        .map(|u| (u.switch.as_str(), u.data))
        .collect();
    assert_eq!(
        unread,
        [
            ("spine1", "unreachable"),
            ("spine2", "unreachable"),
            ("leaf2", "no-data"),
            ("leaf3", "unreachable"),
            ("leaf4", "unreachable")
        ]
    );
    assert!(
        v.unknown[1].detail.contains("timed out"),
        "{:?}",
        v.unknown[1]
    );
    assert!(!v.complete());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn doctor_fails_the_db_check_of_a_switch_not_read_and_the_plugin_check_of_one_without_a_plugin() {
    let (a, b) = (
        RedisServer::start().expect("redis-server"),
        RedisServer::start().expect("redis-server"),
    );
    let (t, dir) = fabric(&a.url(), &b.url(), "unix:///nonexistent/weft-observe.sock");
    let rt = rt();
    rt.block_on(write_leaf1(&a.url()));
    let want = Want {
        unanswered: true,
        lock: true,
        clock: true,
    };
    let views = rt.block_on(switch::read_all(&t, &None, want));
    let cookie = doctor::expected_cookie();
    let by = |name: &str| {
        let si = t.switch_index(name).expect("switch");
        let converged = || doctor::Check {
            check: "converged",
            ok: true,
            detail: String::new(),
        };
        doctor::checks(&t.switches[si], views.get(&si), cookie, converged)
    };
    let leaf1 = by("leaf1");
    let names: Vec<&str> = leaf1.iter().map(|c| c.check).collect();
    assert_eq!(
        names,
        [
            "db",
            "plugin",
            "pipeline",
            "drift",
            "transport",
            "unanswered",
            "clock",
            "converged"
        ]
    );
    assert!(leaf1.iter().all(|c| c.ok), "{leaf1:#?}");
    let leaf2 = by("leaf2");
    assert!(leaf2[0].ok, "the DB answers");
    assert!(!leaf2[1].ok && leaf2[1].detail.starts_with("no WEFT_PLUGIN|status row"));
    let spine2 = by("spine2");
    assert_eq!(
        spine2.len(),
        1,
        "nothing else is judged without the DB: {spine2:#?}"
    );
    assert!(!spine2[0].ok && spine2[0].detail.ends_with("(is its redis-server running?)"));
    // Link ends: up where STATE_DB says so, unknown where the switch was not read.
    assert_eq!(
        switch::end_state(
            views.get(&t.switch_index("leaf1").expect("leaf1")),
            "Ethernet0"
        ),
        "up/up"
    );
    assert_eq!(
        switch::end_state(
            views.get(&t.switch_index("spine2").expect("spine2")),
            "Ethernet0"
        ),
        "?"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_diagnose_sweep_holds_the_switches_with_current_counters_and_names_those_without() {
    let (a, b) = (
        RedisServer::start().expect("redis-server"),
        RedisServer::start().expect("redis-server"),
    );
    let (t, dir) = fabric(&a.url(), &b.url(), "unix:///nonexistent/weft-observe.sock");
    let rt = rt();
    rt.block_on(write_leaf1(&a.url()));
    let mut reader = weft_observe::source::db::Reader::new(&t);
    let s = rt.block_on(reader.sweep(weft_observe::now_ms()));
    let read: Vec<&str> = s.switches.keys().map(String::as_str).collect();
    assert_eq!(read, ["leaf1"], "no data is not an empty (healthy) sample");
    assert_eq!(s.switches["leaf1"].queues["Ethernet0:3"].ecn_marked, 2);
    let unread: Vec<(&str, &str)> = s
        .unjudged
        .iter()
        .map(|u| (u.switch.as_str(), u.data))
        .collect();
    assert_eq!(
        unread,
        [
            ("leaf2", "no-data"),
            ("leaf3", "unreachable"),
            ("leaf4", "unreachable"),
            ("spine1", "unreachable"),
            ("spine2", "unreachable")
        ]
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_sweep_takes_a_switchs_snapshot_only_when_its_stamp_is_the_current_polls_and_the_rows_otherwise()
 {
    use weft_sonic_schema::snapshot;
    let a = RedisServer::start().expect("redis-server");
    let (t, dir) = fabric(
        &a.url(),
        "unix:///nonexistent/weft-observe-b.sock",
        "unix:///nonexistent/weft-observe.sock",
    );
    let rt = rt();
    rt.block_on(async {
        write_leaf1(&a.url()).await;
        let sonic = SonicDb::from_endpoint(&a.url()).expect("endpoint");
        let mut conn = sonic.connect(SonicDbId::CountersDb).await.expect("db");
        let polled: String = redis::cmd("HGET")
            .arg("COUNTERS:WEFT_SWITCH")
            .arg(weft_sonic_schema::counters::POLL_TIME)
            .query_async(&mut conn.raw().clone())
            .await
            .expect("poll time");
        // A copy that differs from the rows, so which one was read shows.
        let copy = PortCounters {
            port: "Ethernet0".into(),
            rx_packets: Some(99),
            tx_packets: Some(20),
            ..Default::default()
        };
        let q = QueueCounters {
            port: "Ethernet0".into(),
            queue: 3,
            packets: Some(5),
            ecn_marked: Some(7),
            ..Default::default()
        };
        let packed = snapshot::pack(&[(copy.key(), copy.to_fields()), (q.key(), q.to_fields())]);
        let write = |stamp: String| {
            let conn = conn.clone();
            let packed = packed.clone();
            async move {
                weft_sonic_db::merge_hash(
                    &conn,
                    snapshot::KEY,
                    &vec![
                        (snapshot::POLL.to_string(), packed),
                        (snapshot::STAMP.to_string(), stamp),
                    ],
                )
                .await
                .expect("snapshot");
            }
        };
        let read = |rows_only: bool| {
            let t = t.clone();
            async move {
                let mut r = weft_observe::source::db::Reader::new(&t);
                if rows_only {
                    r = r.rows_only();
                }
                let s = r.sweep(weft_observe::now_ms()).await;
                let l = &s.switches["leaf1"];
                (
                    l.ports["Ethernet0"].rx_packets,
                    l.queues["Ethernet0:3"].ecn_marked,
                )
            }
        };
        write(polled.clone()).await;
        assert_eq!(read(false).await, (99, 7), "a current snapshot is read");
        assert_eq!(
            read(true).await,
            (10, 2),
            "a rows-only reader reads the rows"
        );
        let behind = (polled.parse::<u64>().expect("ms") - 1000).to_string();
        write(behind).await;
        assert_eq!(
            read(false).await,
            (10, 2),
            "a snapshot of another poll than the rows' is not read"
        );
    });
    let _ = std::fs::remove_dir_all(dir);
}
