//! Postcards end to end on the testbed (real BMv2, redis-server and plugins): the small
//! leaf-spine example with a `telemetry:` section watching leaf1-h1 → leaf3-h1 UDP port 5000.
//!
//! 1. 200 paced packets of the watched flow: `weft trace` finds every one of them, each with
//!    one record per hop (leaf, spine, leaf), every hop allowed by the compiled tables, and the
//!    in-switch latency (sum of the hops' BMv2 egress − ingress timestamps) within the one-way
//!    latency the receiver measured.
//! 2. A route changed behind Weft's back: a /32 toward leaf3-h1 that leaves by leaf1-h2's port,
//!    added on leaf1 beneath P4Runtime (BMv2's Thrift CLI; the nexthop is found with the
//!    independent `p4runtime`-package reader). `weft trace` flags the hop as one the tables do
//!    not allow, and exits 3.
//!
//! Needs root and BMv2; without them it prints SKIPPED (WEFT_REQUIRE_BMV2=1 fails).

mod common;

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::bed::{self, Bed, Needs, REPO};

const TEST: &str = "scenario_postcard_trace";

/// The watched flow and `weft trace` on the shared testbed.
impl Bed {
    /// `count` paced packets of the watched flow (connected sockets: distinct IPv4 ids); the
    /// receiver's report.
    fn send(&self, count: u32, pps: u32, tag: &str) -> serde_json::Value {
        let probe = format!("{REPO}/tests/scripts/udp_probe.py");
        let out = self.dir.join(format!("recv-{tag}.json"));
        let seconds = f64::from(count) / f64::from(pps);
        let mut recv = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns("leaf3-h1"),
                "python3",
                &probe,
                "recv",
            ])
            .args(["--port", "5000", "--seconds", &format!("{}", seconds + 3.0)])
            .arg("--out")
            .arg(&out)
            .spawn()
            .expect("receiver");
        std::thread::sleep(Duration::from_millis(500));
        let ip = self.host_ip("leaf3-h1");
        let mut send: Child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns("leaf1-h1"),
                "python3",
                &probe,
                "send",
            ])
            .args(["--dst", &ip, "--port", "5000", "--connect"])
            .args(["--pps", &pps.to_string(), "--seconds", &seconds.to_string()])
            .args(["--flows", "4", "--size", "200"])
            .spawn()
            .expect("sender");
        let _ = send.wait();
        let _ = recv.wait();
        std::fs::read_to_string(&out)
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    fn trace(&self, since: Duration) -> (i32, serde_json::Value) {
        let out = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args([
                "trace",
                &self.file.to_string_lossy(),
                "leaf1-h1",
                "leaf3-h1",
            ])
            .args(["--flow", "udp:*:5000", "--output", "json"])
            .args(["--since", &format!("{}ms", since.as_millis())])
            .output()
            .expect("weft trace");
        let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "weft trace JSON: {e}\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), v)
    }
}

#[test]
fn every_watched_packet_is_traced_hop_by_hop_and_a_route_changed_behind_wefts_back_is_flagged() {
    let needs = Needs {
        cli: true,
        venv: true,
        ..Needs::default()
    };
    let Some(programs) = bed::programs(TEST, &needs) else {
        return;
    };
    let watch = |text: String| {
        format!(
            "{text}\ntelemetry:\n  watch:\n    - {{src: leaf1-h1, dst: leaf3-h1, protocol: udp, dst_port: 5000}}\n"
        )
    };
    let f = Bed::up_applied(&programs, "pct", watch, &[]);

    // 1. Every packet of the watched flow, hop by hop.
    let t1 = Instant::now();
    let sent = 200u32;
    let rep = f.send(sent, 100, "watched");
    let received = rep["received"].as_u64().unwrap_or(0);
    assert_eq!(received, u64::from(sent), "the fabric lost packets: {rep}");
    let mut r = serde_json::Value::Null;
    let mut code = -1;
    let t_wait = Instant::now();
    while t_wait.elapsed() < Duration::from_secs(30) {
        (code, r) = f.trace(t1.elapsed() + Duration::from_secs(1));
        if r["packets"].as_u64() >= Some(u64::from(sent))
            && r["complete"].as_u64() >= Some(u64::from(sent))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let paths = r["observed_paths"].as_array().cloned().unwrap_or_default();
    println!(
        "watched flow leaf1-h1 → leaf3-h1: sent {sent}, received {received} (one-way latency \
         {}); weft trace: {} packets, {} complete, {} mismatches, in-switch latency {}; \
         allowed {}; observed {}",
        rep["latency_us"],
        r["packets"],
        r["complete"],
        r["mismatches"],
        r["switch_latency_us"],
        r["allowed_paths"],
        serde_json::Value::Array(
            paths
                .iter()
                .map(|p| serde_json::json!([p["packets"], p["path"]]))
                .collect()
        )
    );
    assert_eq!(code, 0, "weft trace exit status: {r}");
    assert_eq!(
        r["packets"].as_u64(),
        Some(u64::from(sent)),
        "every sent packet traced"
    );
    assert_eq!(
        r["complete"].as_u64(),
        Some(u64::from(sent)),
        "each with every hop"
    );
    assert_eq!(r["mismatches"].as_u64(), Some(0), "{:?}", r["problems"]);
    let total: u64 = paths.iter().filter_map(|p| p["packets"].as_u64()).sum();
    assert_eq!(total, u64::from(sent));
    for p in &paths {
        assert_eq!(
            p["hops"].as_array().map(Vec::len),
            Some(3),
            "leaf, spine, leaf: one record per hop: {p}"
        );
        assert_eq!(p["allowed"], true, "{p}");
    }
    let sw = &r["switch_latency_us"];
    let e2e = &rep["latency_us"];
    for q in ["p50", "max"] {
        let inside = sw[q].as_f64().unwrap_or(f64::MAX);
        let whole = e2e[q].as_f64().unwrap_or(0.0);
        assert!(
            inside <= whole,
            "{q}: in-switch latency {inside} µs exceeds the one-way latency {whole} µs"
        );
    }

    // 2. A route changed behind Weft's back on leaf1: leaf3-h1's address via leaf1-h2's port.
    let st = f.state();
    let leaf1 = st.switch("leaf1").expect("leaf1").clone();
    let h2 = f.topo.host_index("leaf1-h2").expect("leaf1-h2");
    let h2_port = {
        let h = &f.topo.hosts[h2];
        f.topo.switches[h.switch].ports[h.port].id
    };
    let out = Command::new("ip")
        .args(["netns", "exec", &st.netns, "env"])
        .arg("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python")
        .arg(format!("{REPO}/.venv/bin/python"))
        .arg(format!("{REPO}/tests/scripts/p4rt_nexthop.py"))
        .args(["--addr", &leaf1.p4rt_address])
        .args(["--device-id", &leaf1.device_id.to_string()])
        .args(["--p4info", &format!("{REPO}/p4/build/weft.p4info.txtpb")])
        .args(["--dst", &f.host_ip("leaf3-h1")])
        .args(["--port-id", &h2_port.to_string()])
        .output()
        .expect("p4rt_nexthop.py");
    assert!(
        out.status.success(),
        "p4rt_nexthop: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nh: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let nh_id = nh["nexthop_id"].as_u64().expect("nexthop id");
    let r = f.bmv2_cli(
        "leaf1",
        &format!(
            "table_add ingress.routing.ipv4_table ingress.routing.set_nexthop_id {}/32 => {nh_id}",
            f.host_ip("leaf3-h1")
        ),
    );
    assert!(r.contains("Entry has been added"), "table_add: {r}");
    let t2 = Instant::now();
    let rep2 = f.send(50, 50, "rerouted");
    let mut r2 = serde_json::Value::Null;
    let mut code2 = -1;
    let t_wait = Instant::now();
    while t_wait.elapsed() < Duration::from_secs(30) {
        (code2, r2) = f.trace(t2.elapsed() + Duration::from_millis(500));
        if r2["mismatches"].as_u64() >= Some(40) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let problems: Vec<String> = r2["problems"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .flat_map(|p| p["problems"].as_array().cloned().unwrap_or_default())
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    println!(
        "leaf1 route {} → nexthop {nh_id} (port {h2_port}, toward leaf1-h2) added beneath \
         P4Runtime (was {}): leaf3-h1 received {}; weft trace exit {code2}: {} packets, {} \
         mismatches: {:?}",
        f.host_ip("leaf3-h1"),
        nh["route"],
        rep2["received"],
        r2["packets"],
        r2["mismatches"],
        problems.iter().take(2).collect::<Vec<_>>()
    );
    assert_eq!(code2, 3, "a mismatch is exit status 3: {r2}");
    assert!(
        r2["mismatches"].as_u64() >= Some(40),
        "the rerouted packets were not flagged: {r2}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("leaf1 sent it out of") && p.contains("do not allow")),
        "{problems:?}"
    );
}
