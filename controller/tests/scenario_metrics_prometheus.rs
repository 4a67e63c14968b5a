//! Metrics end to end with a real Prometheus: the small leaf-spine example on the testbed
//! (real BMv2, redis-server and plugins, each plugin serving `/metrics`), `weft run --metrics`,
//! and Debian's `prometheus` scraping them with the configuration `weft testbed
//! prometheus-config` writes. Everything runs in the fabric's namespace (where the plugins
//! listen); Prometheus is on that namespace's loopback with a temporary TSDB, killed by PID.
//!
//! Asserted through Prometheus' HTTP query API:
//! 1. every plugin and the controller are scraped (`up == 1`);
//! 2. an incast toward leaf4-h1 (its leaf port drained at 100 pps) makes
//!    `rate(weft_queue_ecn_marked_packets_total[..])` rise on exactly leaf4 / Ethernet0 /
//!    queue 3 (the lossless RoCE class), the top series fabric-wide;
//! 3. a link flap is counted by the controller's `weft_reconvergence_duration_seconds`;
//! 4. a PFC storm from one host, an incast toward another, a stuck receiver: `weft diagnose
//!    --source db` over 5 s names each, and `--source prometheus=URL` over the 5 s just passed gives the
//!    same findings.
//!
//! Needs root, BMv2, prometheus and promtool; without BMv2 it prints SKIPPED, and where BMv2 is
//! installed anything missing is a failure.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::bed::{self, Bed, Needs, wait_until};
use weft_testbed as tb;

const TEST: &str = "scenario_metrics_prometheus";
/// DSCP 26 (the example's lossless `roce` class) with ECT(0).
const TOS_ROCE_ECT0: &str = "106";
/// Prometheus' own address, in the fabric namespace.
const PROM: &str = "127.0.0.1:19490";

/// Prometheus' HTTP query API, from the fabric namespace.
impl Bed {
    /// One instant query (at `time`, unix seconds, or now); the result vector.
    fn query(&self, q: &str, time: Option<f64>) -> Vec<serde_json::Value> {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &tb::fabric_netns(&self.fabric), "curl"])
            .args(["-sS", "--max-time", "10", "-G"])
            .arg(format!("http://{PROM}/api/v1/query"))
            .arg("--data-urlencode")
            .arg(format!("query={q}"));
        if let Some(t) = time {
            cmd.arg("--data-urlencode").arg(format!("time={t:.3}"));
        }
        let Ok(out) = cmd.output() else {
            return Vec::new();
        };
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if v["status"] != "success" {
            return Vec::new();
        }
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The value of a query's only (or first) series.
    fn scalar(&self, q: &str, time: Option<f64>) -> Option<f64> {
        self.query(q, time)
            .first()
            .and_then(|s| s["value"][1].as_str())
            .and_then(|v| v.parse().ok())
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[test]
fn prometheus_sees_ecn_marks_rise_on_the_incast_queue_the_controller_count_a_link_flap_and_diagnose_a_storm_an_incast_and_a_stuck_receiver_as_the_dbs_do()
 {
    let needs = Needs {
        cli: true,
        prometheus: true,
        ..Needs::default()
    };
    let Some(programs) = bed::programs(TEST, &needs) else {
        return;
    };
    let prometheus = PathBuf::from("/usr/bin/prometheus");
    let mut f = Bed::up_applied(&programs, "prm", |t| t, &["--counter-interval", "300ms"]);
    let dir = f.dir.clone();
    let weft = env!("CARGO_BIN_EXE_weft");

    // The controller, in the fabric namespace (the scrape config's controller target).
    let file_s = f.file.to_string_lossy().into_owned();
    let status_file = dir.join("status.json").to_string_lossy().into_owned();
    let ctl = tb::controller_metrics_addr();
    f.spawn_in_fabric(
        "weft-run",
        &[
            weft,
            "run",
            &file_s,
            "--resync",
            "10s",
            "--status-file",
            &status_file,
            "--metrics",
            &ctl,
        ],
    );
    // Prometheus with the generated configuration and a private TSDB.
    let config = dir.join("prometheus.yml");
    let out = Command::new(weft)
        .args(["testbed", "prometheus-config", &file_s])
        .arg(&config)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .output()
        .expect("weft testbed prometheus-config");
    assert!(
        out.status.success(),
        "prometheus-config: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg_text = std::fs::read_to_string(&config).expect("config written");
    let check = Command::new("/usr/bin/promtool")
        .args(["check", "config"])
        .arg(&config)
        .output()
        .expect("run promtool");
    assert!(
        check.status.success(),
        "promtool rejects the generated config:\n{cfg_text}\n{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let tsdb = dir.join("tsdb").to_string_lossy().into_owned();
    let config_s = config.to_string_lossy().into_owned();
    f.spawn_in_fabric(
        "prometheus",
        &[
            &prometheus.to_string_lossy(),
            &format!("--config.file={config_s}"),
            &format!("--storage.tsdb.path={tsdb}"),
            &format!("--web.listen-address={PROM}"),
        ],
    );

    // 1. Every target is up.
    let switches = f.topo.switches.len() as f64;
    let scraped = wait_until(Duration::from_secs(60), || {
        f.scalar(r#"sum(up{job="weft-plugin"})"#, None) == Some(switches)
            && f.scalar(r#"up{job="weft-controller"}"#, None) == Some(1.0)
    });
    let targets = f.query("up", None);
    println!("targets: {}", serde_json::Value::Array(targets.clone()));
    assert!(
        scraped.is_some(),
        "not every target is up after 60 s: {targets:?}\nconfig:\n{cfg_text}"
    );
    // The plugins' counters arrive (the counter poll ran and was scraped).
    assert!(
        wait_until(Duration::from_secs(30), || {
            f.scalar(r#"count(weft_port_rx_packets_total{switch="leaf4"})"#, None)
                .is_some_and(|c| c > 0.0)
        })
        .is_some(),
        "no port counters from leaf4's plugin"
    );

    // 2. Incast toward leaf4-h1 through a port drained at 100 pps.
    let (rx_sw, rx_port) = ("leaf4", "Ethernet0");
    let pid4 = f.port_id(rx_sw, rx_port);
    let r = f.bmv2_cli(rx_sw, &format!("set_queue_rate 100 {pid4}"));
    assert!(!r.contains("Error"), "set_queue_rate: {r}");
    let senders = ["leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf4-h2"];
    let t_start = unix_now();
    let rep = f.incast(&senders, "leaf4-h1", 250, 4.0, TOS_ROCE_ECT0);
    let t_end = unix_now();
    f.bmv2_cli(rx_sw, &format!("set_queue_rate 0 {pid4}"));
    assert!(
        rep["ce_marked"].as_u64().unwrap_or(0) > 0,
        "no CE marks at the receiver: {rep}"
    );
    // Give the last counter poll and scrape time to land, then look back at the incast.
    let sel = format!(r#"{{switch="{rx_sw}",port="{rx_port}",queue="3"}}"#);
    let window = (t_end - t_start).ceil() as u64 + 2;
    let rate_q = format!("rate(weft_queue_ecn_marked_packets_total{sel}[{window}s])");
    let mut during = None;
    wait_until(Duration::from_secs(20), || {
        during = f.scalar(&rate_q, Some(t_end + 1.0)).filter(|v| *v > 0.0);
        during.is_some()
    });
    let before = f.scalar(&rate_q, Some(t_start - 1.0)).unwrap_or(0.0);
    let top = f.query(
        &format!("topk(3, rate(weft_queue_ecn_marked_packets_total[{window}s]))"),
        Some(t_end + 1.0),
    );
    println!(
        "incast {} → leaf4-h1 (4 × 250 pps for 4 s into 100 pps): receiver {}/{} CE-marked; \
         Prometheus {rate_q}: before {before:.1}/s, during {during:?}/s; top queues by ECN \
         mark rate: {}",
        senders.join("+"),
        rep["ce_marked"],
        rep["received"],
        serde_json::Value::Array(top.clone())
    );
    let during = during.expect("rate(ECN marked) did not rise on leaf4 Ethernet0 queue 3");
    assert!(during > before, "rate did not rise: {before} → {during}");
    // The incast's queue is among the three marking most, and each of them is on the incast's
    // path: the bottleneck, or a spine's queue toward leaf4 that the bottleneck's PAUSE holds
    // (PFC that holds moves the backlog upstream, where it is marked too). A queue off the path
    // means Prometheus put the marks on the wrong switch, port or queue.
    let st = f.state();
    let toward_rx: Vec<(String, String)> = tb::uplinks(&st, rx_sw)
        .iter()
        .filter_map(|up| tb::peer(&st, rx_sw, up))
        .collect();
    let on_path = |m: &serde_json::Value| {
        let (sw, port) = (m["switch"].as_str(), m["port"].as_str());
        m["queue"].as_str() == Some("3")
            && ((sw, port) == (Some(rx_sw), Some(rx_port))
                || toward_rx
                    .iter()
                    .any(|(s, p)| (sw, port) == (Some(s.as_str()), Some(p.as_str()))))
    };
    assert!(
        top.iter().any(|q| {
            let m = &q["metric"];
            (
                m["switch"].as_str(),
                m["port"].as_str(),
                m["queue"].as_str(),
            ) == (Some(rx_sw), Some(rx_port), Some("3"))
        }),
        "the incast's queue is not among the three marking most: {top:?}"
    );
    assert!(
        top.iter().all(|q| on_path(&q["metric"])),
        "a queue off the incast's path (the bottleneck, the spines toward {rx_sw}: {toward_rx:?}) is among the three marking most: {top:?}"
    );

    // 3. A link flap: the controller's reconvergence histogram counts it.
    let count_q = "weft_reconvergence_duration_seconds_count";
    let count_before = f.scalar(count_q, None).unwrap_or(0.0);
    let st = f.state();
    let uplink = tb::uplinks(&st, "leaf1")
        .into_iter()
        .next()
        .expect("leaf1 has uplinks");
    tb::set_link(&st, "leaf1", &uplink, false).expect("link down");
    std::thread::sleep(Duration::from_secs(2));
    tb::set_link(&st, "leaf1", &uplink, true).expect("link up");
    let mut count_after = count_before;
    wait_until(Duration::from_secs(30), || {
        count_after = f.scalar(count_q, None).unwrap_or(0.0);
        count_after >= count_before + 2.0
    });
    let p50 = f.scalar(
        "histogram_quantile(0.5, weft_reconvergence_duration_seconds_bucket)",
        None,
    );
    let events = f.scalar(
        r#"sum(weft_controller_port_events_total{switch="leaf1"})"#,
        None,
    );
    println!(
        "flap leaf1:{uplink} down 2 s, up: {count_q} {count_before} → {count_after}; \
         median reconvergence bucket {p50:?} s; leaf1 port events {events:?}"
    );
    assert!(
        count_after >= count_before + 1.0,
        "the reconvergence histogram did not count the flap ({count_before} → {count_after}); \
         logs in {}",
        dir.display()
    );

    // 4. One fault at a time, two sources: each fault diagnosed from the switches' DBs and then
    // from this Prometheus over the seconds just passed gives the same findings. A PFC storm (the
    // pause rule), an incast (the queue rule: depth histogram, ECN marks, departures) and a
    // stuck receiver (the pause rule again: a host pausing in stretches, not continuously).
    let state_s = f.state_dir().to_string_lossy().into_owned();
    let faults: [(&[&str], (&str, &str)); 3] = [
        (&["pfc-storm", "leaf2-h1"], ("pfc_storm", "leaf2-h1")),
        (
            &["incast", "leaf3-h1", "--senders", "4"],
            ("congestion", "leaf3-h1"),
        ),
        (
            &["stuck-receiver", "leaf4-h2", "--rate", "10"],
            ("slow_receiver", "leaf4-h2"),
        ),
    ];
    for (i, (args, (kind, target))) in faults.iter().enumerate() {
        if i > 0 {
            // The fault before is cleared: wait until the DBs see nothing (its queues drained).
            let mut last = Vec::new();
            let quiet = wait_until(Duration::from_secs(40), || {
                last = f.diagnose(&file_s, "db");
                last.is_empty()
            });
            assert!(quiet.is_some(), "still found after clearing: {last:?}");
        }
        let out = Command::new(weft)
            .args(["testbed", "fault", &file_s])
            .args(*args)
            .args(["--state-dir", &state_s])
            .output()
            .expect("weft testbed fault");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Counters polled and scraped with the fault under way before either window starts.
        std::thread::sleep(Duration::from_secs(3));
        let from_db = f.diagnose(&file_s, "db");
        let from_prom = f.diagnose(&file_s, &format!("prometheus=http://{PROM}"));
        let _ = Command::new(weft)
            .args([
                "testbed",
                "fault",
                &file_s,
                "clear",
                "--state-dir",
                &state_s,
            ])
            .output();
        println!("{args:?}: from the DBs {from_db:?}; from Prometheus {from_prom:?}");
        assert!(
            from_db.contains(&(kind.to_string(), target.to_string())),
            "the DBs' window does not name {kind} {target}: {from_db:?}"
        );
        assert_eq!(
            from_prom, from_db,
            "the two sources disagree on the same seconds of {args:?}"
        );
    }
}

impl Bed {
    /// `weft diagnose FILE --source SOURCE --window 5s`, in the fabric namespace (where
    /// Prometheus listens): every finding as (kind, target), sorted.
    fn diagnose(&self, file: &str, source: &str) -> Vec<(String, String)> {
        let out = Command::new("ip")
            .args(["netns", "exec", &tb::fabric_netns(&self.fabric)])
            .args([env!("CARGO_BIN_EXE_weft"), "diagnose", file])
            .args(["--source", source, "--window", "5s", "--output", "json"])
            .output()
            .expect("weft diagnose");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "weft diagnose --source {source}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let mut found: Vec<(String, String)> = v["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| Some((f["kind"].as_str()?.into(), f["target"].as_str()?.into())))
            .collect();
        found.sort();
        found
    }
}
