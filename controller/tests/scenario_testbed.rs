//! End-to-end scenarios on the small leaf-spine example, emulated: real BMv2 per switch, real
//! redis-server per switch, real plugins, real `weft run`, hosts in network namespaces.
//! Needs root and BMv2; without BMv2 it prints SKIPPED (WEFT_REQUIRE_BMV2=1 makes it fail).
//!
//! One test body drives the phases in order on one testbed (bringing it up takes most of the
//! time): reachability, multipath spread, failover loss window under a link failure, a flap
//! storm, and recovery after the controller and a plugin are killed. It runs twice, once per
//! transport the controller writes P4RT entries over (APPL_DB over Redis; SONiC's ZMQ channel),
//! with the same assertions; the two runs take turns, never sharing the cores. Over ZMQ the
//! intent is the example as it is: the plugins serve ZMQ as `weft testbed up --transport zmq`
//! makes them, and `weft run --transport zmq` must be what sends the entries that way.

mod common;

use std::process::{Command, Stdio};

use common::bed::{self, Bed, Needs};
use common::transport::{Transport, one_fabric_at_a_time};
use std::time::Duration;

use weft_testbed as tb;

/// `weft run` on the shared testbed.
impl Bed {
    fn start_run(&mut self, transport: Transport) {
        let log = std::fs::File::create(self.dir.join("run.log")).expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args([
                "run",
                &self.file.to_string_lossy(),
                "--resync",
                "5s",
                "--timeout",
                "5s",
            ])
            .args(match transport {
                Transport::Redis => &[][..],
                Transport::Zmq => &["--transport", "zmq"][..],
            })
            .arg("--events-log")
            .arg(self.dir.join("events.jsonl"))
            .arg("--status-file")
            .arg(self.dir.join("status.json"))
            .env("WEFT_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start weft run");
        self.keep("run", child);
    }
    fn status(&self) -> serde_json::Value {
        std::fs::read_to_string(self.dir.join("status.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or(serde_json::Value::Null)
    }
    fn all_reachable(&self) -> (usize, usize) {
        let r = tb::ping_all(&self.state(), 1);
        (r.iter().filter(|x| x.2).count(), r.len())
    }
}

#[test]
fn leaf_spine_testbed_reachability_spread_failover_flaps_and_restarts_over_redis() {
    reachability_spread_failover_flaps_and_restarts(Transport::Redis);
}

#[test]
fn leaf_spine_testbed_reachability_spread_failover_flaps_and_restarts_over_zmq() {
    reachability_spread_failover_flaps_and_restarts(Transport::Zmq);
}

fn reachability_spread_failover_flaps_and_restarts(transport: Transport) {
    let _turn = one_fabric_at_a_time();
    let test = format!("scenario_testbed over {transport:?}");
    let Some(programs) = bed::programs(&test, &Needs::default()) else {
        return;
    };
    // `weft run` applies (no `weft apply`): what the plugins hold is what it wrote, over
    // `transport`. Over ZMQ the intent says nothing of it: the testbed serves ZMQ as
    // `testbed up --transport zmq` does and `weft run --transport zmq` writes over it (the
    // chaos trials cover the intent's `p4rt_transport: zmq`).
    let prefix = format!("scn{}", transport.tag());
    let mut f = match transport {
        Transport::Redis => Bed::up(&programs, &prefix, |t| t, &[]),
        Transport::Zmq => Bed::up_serving_zmq(&programs, &prefix, &[]),
    };
    let (dir, file) = (f.dir.clone(), f.file.clone());
    f.start_run(transport);

    // 1. All hosts reach all hosts.
    let (ok, n) = f.wait_all_reachable(Duration::from_secs(90));
    println!("reachability: {ok}/{n} host pairs");
    assert_eq!(
        ok,
        n,
        "not all host pairs reachable; logs in {}",
        dir.display()
    );
    f.assert_entries_came_over(transport == Transport::Zmq);

    // 2. Traffic between two leaves spreads over both spines (counted by the kernel on the
    // spines' veths, independent of the pipeline's own counters).
    let spines = vec!["spine1".to_string(), "spine2".to_string()];
    let (per, received) =
        tb::spread(&f.state(), "leaf1-h1", "leaf3-h1", 2000, 64, &spines).expect("spread");
    println!("spread leaf1-h1 → leaf3-h1, 64 flows: {per:?}, {received}/2000 received");
    assert!(received >= 1900, "{received}/2000 arrived");
    assert!(
        per.iter().all(|(_, n)| *n >= 400),
        "both spines must carry a fair share: {per:?}"
    );

    // 3. The link carrying a paced stream fails: measure the loss window and the controller's
    // reconvergence time. (Which of leaf1's uplinks the flow hashed onto is read from the
    // kernel's counters while it flows; that one is pulled.)
    let state = f.state();
    let up = tb::uplinks(&state, "leaf1");
    let trial = tb::failover_trial(
        &state,
        &tb::Stream {
            src: "leaf1-h1",
            dst: "leaf3-h1",
            port: 5000,
            pps: 1000,
            seconds: 4.0,
            flows: 1,
        },
        "leaf1",
        &up,
        Duration::from_millis(1500),
    )
    .expect("failover trial");
    let r = &trial.result;
    std::thread::sleep(Duration::from_secs(1));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
    let last = events
        .lines()
        .rfind(|l| l.contains("down"))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    println!(
        "failover: leaf1:{} (carried {} packets in the 1 s before) pulled; lost {} of {} \
         packets, largest arrival gap {:?} ms; controller: {}",
        trial.port,
        trial.carried,
        r.lost,
        r.max_seq + 1,
        r.max_gap_ms,
        last.as_ref()
            .map_or("no reconvergence logged".into(), |v| v.to_string())
    );
    // Outcomes, not timings: the stream kept flowing and (almost) nothing was lost; the loss
    // window and the controller's time are measured by `cargo bench --bench failover`.
    assert!(r.received > 3000, "{r:?}");
    assert!(r.lost <= 50, "too many packets lost on failover: {r:?}");
    let last = last.expect("weft run logged the reconvergence");
    assert!(last["failed"].as_u64() == Some(0), "{last}");
    assert!(
        last["changes"]
            .to_string()
            .contains(&format!("leaf1:{}", trial.port)),
        "the reconvergence logged is not the pulled link's: {last}"
    );
    tb::set_link(&state, "leaf1", &trial.port, true).expect("link up");
    assert_eq!(
        f.wait_all_reachable(Duration::from_secs(30)).0,
        f.all_reachable().1
    );

    // 4. A flap storm: 100 flaps in 10 s. No crash, the link is suppressed, writes stay bounded,
    // and every host still reaches every other.
    let writes_before = f.status()["reconvergences"].as_u64().unwrap_or(0);
    tb::flap(&state, "leaf2", "Ethernet8", 100, Duration::from_millis(50)).expect("flap");
    std::thread::sleep(Duration::from_secs(1));
    let st = f.status();
    let reconv = st["reconvergences"].as_u64().unwrap_or(0) - writes_before;
    let link = st["links"].as_array().and_then(|l| {
        l.iter()
            .find(|x| {
                x["link"]
                    .as_str()
                    .is_some_and(|s| s.contains("leaf2:Ethernet8"))
            })
            .cloned()
    });
    println!(
        "flap storm: {reconv} reconvergences for 200 link events; link now {}",
        link.clone().unwrap_or_default()
    );
    assert!(f.running("run"), "weft run died during the storm");
    assert!(
        link.is_some_and(|l| l["suppressed"] == true),
        "the flapping link must be suppressed"
    );
    assert!(
        reconv <= 20,
        "{reconv} reconvergences: writes are not bounded"
    );
    // Both ends of the flapped cable keep forwarding on every other port. (When the testbed
    // pulled a cable by setting BMv2's own interface admin-down, BMv2 stopped receiving on all
    // its ports.) Counted by the kernel on the switches' interfaces.
    let (far_sw, far_port) = tb::peer(&state, "leaf2", "Ethernet8").expect("cable at leaf2");
    let tx0 = [
        tb::port_tx(&state, "leaf2").expect("counters"),
        tb::port_tx(&state, &far_sw).expect("counters"),
    ];
    let (ok, n) = f.wait_all_reachable(Duration::from_secs(30));
    assert_eq!(ok, n, "reachability after the storm");
    // Many flows between the other leaves, so that hashing puts some on every port of the far
    // switch too (64 flows per pair: the chance a port gets none is below 2^-60).
    for (a, b) in [
        ("leaf1-h1", "leaf3-h1"),
        ("leaf3-h1", "leaf4-h1"),
        ("leaf4-h1", "leaf1-h1"),
    ] {
        let (_, received) = tb::spread(&state, a, b, 400, 64, &[]).expect("spread");
        assert!(received >= 380, "{a} → {b}: {received}/400 after the storm");
    }
    let tx1 = [
        tb::port_tx(&state, "leaf2").expect("counters"),
        tb::port_tx(&state, &far_sw).expect("counters"),
    ];
    for (i, (sw, flapped)) in [("leaf2", "Ethernet8"), (far_sw.as_str(), far_port.as_str())]
        .into_iter()
        .enumerate()
    {
        for (port, after) in &tx1[i] {
            let sent = after - tx0[i].get(port).copied().unwrap_or(0);
            println!("after the storm: {sw}:{port} sent {sent} packets");
            if port != flapped {
                assert!(
                    sent > 0,
                    "{sw}:{port} stopped forwarding after the flap storm"
                );
            }
        }
    }

    // 5. The controller killed and restarted converges; a plugin killed and restarted converges.
    f.stop("run");
    f.start_run(transport);
    let (ok, n) = f.wait_all_reachable(Duration::from_secs(60));
    assert_eq!(ok, n, "after controller restart");
    let sdir = dir.join("state");
    tb::kill_process(&sdir, "plugin leaf3").expect("kill plugin");
    tb::restart_process(&sdir, "plugin leaf3").expect("restart plugin");
    let (ok, n) = f.wait_all_reachable(Duration::from_secs(60));
    assert_eq!(ok, n, "after plugin restart");
    let (code, out) = f.weft(&["plan", &file.to_string_lossy()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("total: 0 to add, 0 to modify, 0 to delete"),
        "not converged:\n{out}"
    );
    // The real plugins and BMv2 pass every check of `weft doctor`, and `weft status` sees the
    // running `weft run` holding the lock with every link in use.
    let (code, out) = f.weft(&["doctor", &file.to_string_lossy()]);
    assert_eq!(
        code, 0,
        "doctor found problems on a converged testbed:\n{out}"
    );
    assert!(out.contains("held by weft run"), "{out}");
    let status = f.dir.join("status.json");
    let (code, out) = f.weft(&[
        "status",
        &file.to_string_lossy(),
        "--status-file",
        &status.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("lock held on 6/6"), "{out}");
    assert_eq!(
        out.matches("up/up      up/up      in use").count(),
        8,
        "{out}"
    );
}
