//! Run-time ECN tuning against static thresholds on the emulated small leaf-spine fabric: real
//! BMv2, redis-server and plugin per switch, hosts in network namespaces. Needs root and BMv2;
//! without them it prints SKIPPED (WEFT_REQUIRE_BMV2=1 makes it fail).
//!
//! The bottleneck is leaf4's port toward leaf4-h1, rate-limited with BMv2's Thrift
//! `set_queue_rate` (the plugin is told that rate with `--tuning-line-rate`, and maps byte
//! thresholds into the 64-packet queue with `--bmv2-queue-scale`, see [`QUEUE_SCALE`]). Traffic is
//! lossless-class RoCE-like UDP (DSCP 26, ECT(0)), paced, from senders that react to congestion
//! the way RoCE NICs do (DCQCN-like): the receiver answers CE marks with CNPs (DSCP 48), the
//! sender cuts its rate on a CNP and recovers additively. Without a reacting sender no ECN
//! setting could change a queue, so the loop is what is measured.
//!
//! "Off" is the same intent with `qos.ecn.tuning: off`, applied with `weft apply`; "on" is the
//! intent re-applied with `tuning: auto`. Both run in the same test on the same testbed:
//! incast (3 senders → 1) and mixed (2 elephants + paced mice bursts), in the order off, on,
//! on, off, each setting's two runs pooled.
//! Measured at the bottleneck: queue depth p50/p99 (the pipeline's depth histogram deltas,
//! published by the plugin to COUNTERS_DB), delivered packets/s at the receiver, CE-marked
//! fraction at the receiver, PFC PAUSE frames leaf4 sent.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::bed::{self, Bed, Needs};
use weft_sonic_db::{SonicDb, SonicDbId, Table};
use weft_testbed as tb;

const TEST: &str = "scenario_ecn_tuning";
/// The bottleneck's service rate (packets/s) and queue (packets).
const RATE_PPS: u32 = 250;
const QUEUE_PACKETS: u32 = 64;
/// `--bmv2-queue-scale`: maps the controller's byte thresholds into the 64-packet queue so the
/// whole envelope fits it (100G: Kmax up to 3.2 MB × 0.18 / 9100-byte cells ≈ 63 packets; static
/// Kmin/Kmax 400 KB/1.6 MB → 8/31 packets, floors 100 KB/400 KB → 2/7). At scale 1 everything
/// above 573 KB clamps to the queue's top and the tuner could only ever move down.
const QUEUE_SCALE: &str = "0.18";
/// Each load runs WARMUP + SECONDS; only the last SECONDS are measured (steady state under
/// each setting: the tuned runs then show where the tuner took the thresholds, the static runs
/// the static thresholds, neither the start-up transient of the senders).
const WARMUP: f64 = 2.0;
const SECONDS: f64 = 6.0;
const RECEIVER: &str = "leaf4-h1";
const BOTTLENECK_SWITCH: &str = "leaf4";
const BOTTLENECK_PORT: &str = "Ethernet0";
const LOSSLESS_TC: u8 = 3;

/// DCQCN-like paced sender and CNP-sending receiver (standard library only).
const TRAFFIC_PY: &str = r#"
import argparse, json, socket, struct, time
HDR = struct.Struct("!QQ")

def recv(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    s.bind(("0.0.0.0", a.port))
    s.settimeout(0.1)
    cnp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    cnp.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 48 << 2)
    end = time.monotonic() + a.seconds
    n = ce = cnps = wn = wce = 0
    first = last = None
    last_cnp = {}
    while time.monotonic() < end:
        try:
            data, anc, _f, addr = s.recvmsg(2048, socket.CMSG_SPACE(1))
        except socket.timeout:
            continue
        now = time.monotonic()
        n += 1
        first = first or now
        last = now
        marked = any(l == socket.IPPROTO_IP and t == socket.IP_TOS and v and (v[0] & 3) == 3
                     for l, t, v in anc)
        # The measurement window starts `warmup` seconds after the first packet.
        in_window = now - first >= a.warmup
        wn += in_window
        if marked:
            ce += 1
            wce += in_window
            # One CNP per sender per interval, as a RoCE NIC paces its CNPs.
            if now - last_cnp.get(addr[0], 0) >= a.cnp_gap:
                last_cnp[addr[0]] = now
                cnp.sendto(b"cnp", (addr[0], a.cnp_port))
                cnps += 1
    json.dump({"received": n, "ce_marked": ce, "cnps": cnps, "window_received": wn,
               "window_ce_marked": wce,
               "span": (last - first) if first else 0}, open(a.out, "w"))

def send(a):
    # A DCQCN-like reaction point: a CNP cuts the rate by alpha/2 (at most once per cut_gap,
    # alpha growing with every cut); every 10 ms without a cut, alpha decays and the rate grows
    # by `ai` (additive increase).
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, a.tos)
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    c.bind(("0.0.0.0", a.cnp_port))
    c.setblocking(False)
    pad = b"\0" * 48
    rate, alpha, g = a.rate, 1.0, 1.0 / 16
    t0 = time.monotonic()
    end = t0 + a.seconds
    nxt = t0
    tick = t0 + 0.01
    cut_in_tick = False
    last_cut = 0.0
    seq = cuts = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        while True:
            try:
                c.recv(64)
            except BlockingIOError:
                break
            if a.reactive and now - last_cut >= a.cut_gap:
                alpha = (1 - g) * alpha + g
                rate = max(a.min_rate, rate * (1 - alpha / 2))
                last_cut = now
                cut_in_tick = True
                cuts += 1
        if now >= tick:
            if a.reactive and not cut_in_tick:
                alpha *= (1 - g)
                rate = min(a.max_rate, rate + a.ai)
            cut_in_tick = False
            tick += 0.01
        if a.burst:
            # Mice: a burst of `burst` packets every `period` seconds.
            if now >= nxt:
                for _ in range(a.burst):
                    s.sendto(HDR.pack(seq, 0) + pad, (a.dst, a.port))
                    seq += 1
                nxt += a.period
        elif now >= nxt:
            s.sendto(HDR.pack(seq, 0) + pad, (a.dst, a.port))
            seq += 1
            nxt = max(nxt + 1.0 / rate, now - 0.02)
        time.sleep(max(0.0, min(nxt, tick, end) - time.monotonic()))
    print(json.dumps({"sent": seq, "cuts": cuts, "final_rate": rate}))

ap = argparse.ArgumentParser()
sub = ap.add_subparsers(dest="cmd", required=True)
r = sub.add_parser("recv")
r.add_argument("--port", type=int, default=5000)
r.add_argument("--seconds", type=float, default=8)
r.add_argument("--out", required=True)
r.add_argument("--cnp-port", type=int, default=5001)
r.add_argument("--cnp-gap", type=float, default=0.004)
r.add_argument("--warmup", type=float, default=0)
sd = sub.add_parser("send")
sd.add_argument("--dst", required=True)
sd.add_argument("--port", type=int, default=5000)
sd.add_argument("--seconds", type=float, default=5)
sd.add_argument("--tos", type=int, default=(26 << 2) | 2)
sd.add_argument("--rate", type=float, default=100)
sd.add_argument("--min-rate", type=float, default=10)
sd.add_argument("--max-rate", type=float, default=400)
sd.add_argument("--ai", type=float, default=1)
sd.add_argument("--reactive", type=int, default=1)
sd.add_argument("--cut-gap", type=float, default=0.01)
sd.add_argument("--cnp-port", type=int, default=5001)
sd.add_argument("--burst", type=int, default=0)
sd.add_argument("--period", type=float, default=0.1)
a = ap.parse_args()
recv(a) if a.cmd == "recv" else send(a)
"#;

/// The traffic script and the switches' DBs on the shared testbed.
impl Bed {
    fn script(&self) -> PathBuf {
        self.dir.join("traffic.py")
    }
    fn python(&self, host: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(host), "python3"])
            .arg(self.script());
        c
    }
    fn db(&self, switch: &str) -> SonicDb {
        let st = self.state();
        SonicDb::from_endpoint(&st.switch(switch).expect("switch").db).expect("db endpoint")
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn row(db: &SonicDb, id: SonicDbId, table: &str, key: &str) -> BTreeMap<String, String> {
    let conn = db.connect(id).await.expect("connect");
    Table::new(conn, table)
        .expect("table")
        .get(key)
        .await
        .expect("read")
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// The bottleneck's counters (cumulative) as the plugin publishes them.
#[derive(Debug, Clone, Default)]
struct Snapshot {
    hist: [u64; 16],
    shift: u32,
    pfc_tx: u64,
    marked: u64,
    queue_tx: u64,
}

fn snapshot(f: &Bed) -> Snapshot {
    let db = f.db(BOTTLENECK_SWITCH);
    let st = f.state();
    let ports: Vec<String> = st
        .switch(BOTTLENECK_SWITCH)
        .expect("switch")
        .interfaces
        .keys()
        .cloned()
        .collect();
    rt().block_on(async {
        let port = row(&db, SonicDbId::CountersDb, "COUNTERS", BOTTLENECK_PORT).await;
        let q = row(
            &db,
            SonicDbId::CountersDb,
            "COUNTERS",
            &format!("{BOTTLENECK_PORT}:{LOSSLESS_TC}"),
        )
        .await;
        let n = |m: &BTreeMap<String, String>, k: &str| {
            m.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        };
        let mut s = Snapshot {
            shift: n(&port, "WEFT_QUEUE_DEPTH_HISTOGRAM_SHIFT") as u32,
            marked: n(&q, "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS"),
            queue_tx: n(&q, "SAI_QUEUE_STAT_PACKETS"),
            ..Snapshot::default()
        };
        for (b, v) in s.hist.iter_mut().enumerate() {
            *v = n(&port, &format!("WEFT_QUEUE_DEPTH_BUCKET_{b}_PKTS"));
        }
        for p in &ports {
            let r = row(&db, SonicDbId::CountersDb, "COUNTERS", p).await;
            s.pfc_tx += n(&r, &format!("SAI_PORT_STAT_PFC_{LOSSLESS_TC}_TX_PKTS"));
        }
        s
    })
}

/// Upper edge (packets) of the bucket holding the p-quantile of the histogram deltas.
fn percentile(delta: &[u64; 16], shift: u32, p: f64) -> u32 {
    let total: u64 = delta.iter().sum();
    if total == 0 {
        return 0;
    }
    let rank = ((total as f64) * p).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (b, n) in delta.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return if b == 15 {
                QUEUE_PACKETS
            } else {
                (((b as u32) + 1) << shift) - 1
            };
        }
    }
    QUEUE_PACKETS
}

#[derive(Debug, Clone)]
struct Measured {
    label: String,
    p50: u32,
    p99: u32,
    pps: f64,
    marked: f64,
    pfc: u64,
    samples: u64,
    /// Depth histogram deltas, received and CE-marked packets: what runs pool from.
    hist: [u64; 16],
    shift: u32,
    received: u64,
    ce: u64,
    runs: u32,
}

/// Several runs of one load and setting as one measurement: histograms added (percentiles of
/// all their samples), throughput averaged, PAUSEs added.
fn pooled(label: &str, runs: &[&Measured]) -> Measured {
    let mut hist = [0u64; 16];
    for m in runs {
        for (h, v) in hist.iter_mut().zip(m.hist) {
            *h += v;
        }
    }
    let shift = runs.first().map_or(0, |m| m.shift);
    let received: u64 = runs.iter().map(|m| m.received).sum();
    let ce: u64 = runs.iter().map(|m| m.ce).sum();
    let n = runs.iter().map(|m| m.runs).sum::<u32>().max(1);
    Measured {
        label: label.to_string(),
        p50: percentile(&hist, shift, 0.5),
        p99: percentile(&hist, shift, 0.99),
        pps: received as f64 / (SECONDS * f64::from(n)),
        marked: ce as f64 / received.max(1) as f64,
        pfc: runs.iter().map(|m| m.pfc).sum(),
        samples: hist.iter().sum(),
        hist,
        shift,
        received,
        ce,
        runs: n,
    }
}

struct Flow<'a> {
    src: &'a str,
    args: Vec<String>,
}

/// Runs one load: a receiver on RECEIVER, the flows, then the deltas at the bottleneck.
fn run_load(f: &mut Bed, label: &str, flows: &[Flow]) -> Measured {
    let out = f.dir.join(format!("recv-{label}.json"));
    let recv = f
        .python(RECEIVER)
        .args([
            "recv",
            "--seconds",
            &format!("{}", WARMUP + SECONDS + 2.5),
            "--warmup",
            &WARMUP.to_string(),
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .spawn()
        .expect("receiver");
    f.keep("receiver", recv);
    std::thread::sleep(Duration::from_millis(500));
    let dst = f.host_ip(RECEIVER);
    let mut senders = Vec::new();
    for fl in flows {
        let c = f
            .python(fl.src)
            .args([
                "send",
                "--dst",
                &dst,
                "--seconds",
                &(WARMUP + SECONDS).to_string(),
            ])
            .args(&fl.args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("sender");
        senders.push(c);
    }
    std::thread::sleep(Duration::from_secs_f64(WARMUP));
    let before = snapshot(f);
    let mut sent = Vec::new();
    for c in senders {
        let o = c.wait_with_output().expect("sender");
        sent.push(String::from_utf8_lossy(&o.stdout).trim().to_string());
    }
    f.wait("receiver");
    // The senders are done: the window ends here (the queue drains in well under the 200 ms
    // the counters need to be published, so draining adds a few samples to both settings).
    std::thread::sleep(Duration::from_millis(400));
    let after = snapshot(f);
    let r: serde_json::Value = std::fs::read_to_string(&out)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(serde_json::Value::Null);
    let mut d = [0u64; 16];
    for (b, v) in d.iter_mut().enumerate() {
        *v = after.hist[b].saturating_sub(before.hist[b]);
    }
    let received = r["window_received"].as_u64().unwrap_or(0);
    let ce = r["window_ce_marked"].as_u64().unwrap_or(0);
    let m = Measured {
        label: label.to_string(),
        p50: percentile(&d, after.shift, 0.5),
        p99: percentile(&d, after.shift, 0.99),
        pps: received as f64 / SECONDS,
        marked: ce as f64 / received.max(1) as f64,
        pfc: after.pfc_tx.saturating_sub(before.pfc_tx),
        samples: d.iter().sum(),
        hist: d,
        shift: after.shift,
        received,
        ce,
        runs: 1,
    };
    println!(
        "{label}: receiver {r}, senders {sent:?}, pipeline marked {} of {} sent, depth histogram Δ {d:?} (shift {})",
        after.marked.saturating_sub(before.marked),
        after.queue_tx.saturating_sub(before.queue_tx),
        after.shift
    );
    m
}

fn incast() -> Vec<Flow<'static>> {
    ["leaf1-h1", "leaf2-h1", "leaf3-h1"]
        .into_iter()
        .map(|src| Flow {
            src,
            args: ["--rate", "120", "--max-rate", "300", "--ai", "1"]
                .map(String::from)
                .to_vec(),
        })
        .collect()
}

fn mixed() -> Vec<Flow<'static>> {
    vec![
        Flow {
            src: "leaf1-h1",
            args: ["--rate", "150", "--max-rate", "300", "--ai", "1"]
                .map(String::from)
                .to_vec(),
        },
        Flow {
            src: "leaf2-h1",
            args: ["--rate", "150", "--max-rate", "300", "--ai", "1"]
                .map(String::from)
                .to_vec(),
        },
        // Mice: 5-packet bursts every 100 ms, not rate-controlled.
        Flow {
            src: "leaf3-h2",
            args: ["--reactive", "0", "--burst", "5", "--period", "0.1"]
                .map(String::from)
                .to_vec(),
        },
    ]
}

#[test]
fn ecn_tuning_lowers_queue_depth_and_pfc_against_static_thresholds_on_a_bmv2_bottleneck() {
    let needs = Needs {
        cli: true,
        ..Needs::default()
    };
    let Some(programs) = bed::programs(TEST, &needs) else {
        return;
    };
    let t_start = Instant::now();
    // Brought up from the intent with tuning off; the same with tuning on beside it.
    let line_rate = format!("{BOTTLENECK_PORT}={RATE_PPS}");
    let mut f = Bed::up(
        &programs,
        "ecn",
        |t| {
            assert!(t.contains("tuning: auto"), "the example turns tuning on");
            t.replace("tuning: auto", "tuning: off")
        },
        &[
            "--counter-interval-ms",
            "200",
            "--bmv2-queue-scale",
            QUEUE_SCALE,
            "--tuning-line-rate",
            &line_rate,
        ],
    );
    let dir = f.dir.clone();
    let off = f.file.clone();
    let on = dir.join("fabric-on.yaml");
    std::fs::write(
        &on,
        std::fs::read_to_string(&off)
            .expect("intent")
            .replace("tuning: off", "tuning: auto"),
    )
    .expect("intent");
    std::fs::write(f.script(), TRAFFIC_PY).expect("script");

    // Tuning off first.
    f.apply(&off, "30s");
    let st = f.state();
    let port_id: u32 = st
        .switch(BOTTLENECK_SWITCH)
        .and_then(|s| s.interfaces.get(BOTTLENECK_PORT))
        .and_then(|i| i.rsplit('p').next())
        .and_then(|p| p.parse().ok())
        .expect("bottleneck port id");
    let cli = f.bmv2_cli(
        BOTTLENECK_SWITCH,
        &format!(
            "set_queue_rate {RATE_PPS} {port_id}\nset_queue_depth {QUEUE_PACKETS} {port_id}\n"
        ),
    );
    assert!(!cli.contains("Error") && !cli.contains("rror:"), "{cli}");
    // Every sender reaches the receiver.
    let dst = f.host_ip(RECEIVER);
    for src in ["leaf1-h1", "leaf2-h1", "leaf3-h1", "leaf3-h2"] {
        let t0 = Instant::now();
        loop {
            let ok = Command::new("ip")
                .args(["netns", "exec", &f.ns(src), "ping", "-c1", "-W1", &dst])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "{src} cannot reach {RECEIVER}; logs in {}",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    println!(
        "testbed ready after {:.1} s",
        t_start.elapsed().as_secs_f64()
    );

    let db = f.db(BOTTLENECK_SWITCH);
    let key = format!("{BOTTLENECK_PORT}|{LOSSLESS_TC}");
    let tuning_row = || rt().block_on(row(&db, SonicDbId::StateDb, "WEFT_ECN_TUNING", &key));
    let off_row = tuning_row();
    assert_eq!(
        off_row.get("tuning").map(String::as_str),
        Some("off"),
        "{off_row:?}"
    );

    // BMv2 on a shared 2-core machine is noisy, and other work on the machine comes and goes:
    // static and tuned are measured in an ABBA order (static, tuned, tuned, static), so that a
    // load that drifts linearly over the test weighs on both alike, and each setting's two runs
    // are pooled. One measurement, no retries.
    let wait_tuning = |mode: &str| {
        let t0 = Instant::now();
        while tuning_row().get("tuning").map(String::as_str) != Some(mode) {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "plugin never took tuning: {mode}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let mut runs = vec![
        run_load(&mut f, "incast, static", &incast()),
        run_load(&mut f, "mixed, static", &mixed()),
    ];
    let off_after = tuning_row();
    assert_eq!(
        (off_after.get("kmin"), off_after.get("kmax")),
        (off_after.get("static_kmin"), off_after.get("static_kmax")),
        "tuning off must keep the static values: {off_after:?}"
    );

    // Tuning on: the intent changed, so the tuners start from the static values.
    f.apply(&on, "30s");
    wait_tuning("auto");
    runs.push(run_load(&mut f, "incast, tuned", &incast()));
    let after_incast = tuning_row();
    runs.push(run_load(&mut f, "mixed, tuned", &mixed()));
    let tuned = tuning_row();

    // A re-apply of the same intent keeps the tuned values.
    f.apply(&on, "30s");
    std::thread::sleep(Duration::from_millis(500));
    let reapplied = tuning_row();
    let (_, status) = f.weft(&["status", &on.to_string_lossy()]);
    runs.push(run_load(&mut f, "incast, tuned", &incast()));
    runs.push(run_load(&mut f, "mixed, tuned", &mixed()));

    // Off again: the static values come back.
    f.apply(&off, "30s");
    wait_tuning("off");
    let off_again = tuning_row();
    assert_eq!(
        (off_again.get("kmin"), off_again.get("kmax")),
        (off_again.get("static_kmin"), off_again.get("static_kmax")),
        "tuning off again must restore the static values: {off_again:?}"
    );
    runs.push(run_load(&mut f, "incast, static", &incast()));
    runs.push(run_load(&mut f, "mixed, static", &mixed()));
    let results = vec![
        pooled("incast, static", &[&runs[0], &runs[6]]),
        pooled("mixed, static", &[&runs[1], &runs[7]]),
        pooled("incast, tuned", &[&runs[2], &runs[4]]),
        pooled("mixed, tuned", &[&runs[3], &runs[5]]),
    ];

    println!();
    println!(
        "bottleneck {BOTTLENECK_SWITCH}:{BOTTLENECK_PORT} at {RATE_PPS} pkt/s, {QUEUE_PACKETS}-packet queue, {SECONDS} s per run, 2 runs per row (order: static, tuned, tuned, static)"
    );
    println!(
        "| load | ECN | queue p50 (pkts) | queue p99 (pkts) | delivered (pkt/s) | CE-marked | PFC PAUSE sent |"
    );
    println!("|---|---|---|---|---|---|---|");
    for m in &results {
        let (load, mode) = m.label.split_once(", ").unwrap_or((&m.label, ""));
        println!(
            "| {load} | {mode} | {} | {} | {:.0} | {:.1}% | {} |",
            m.p50,
            m.p99,
            m.pps,
            m.marked * 100.0,
            m.pfc
        );
    }
    println!();
    println!(
        "each run: {:?}",
        runs.iter()
            .map(|m| (&m.label, m.p50, m.p99, m.pps.round(), m.pfc))
            .collect::<Vec<_>>()
    );
    println!("tuning record after incast: {after_incast:?}");
    println!("tuning record after mixed:  {tuned:?}");
    println!("weft status:\n{status}");
    println!("total {:.1} s", t_start.elapsed().as_secs_f64());

    // Outcomes.
    for m in &runs {
        assert!(m.samples > 0, "{}: the bottleneck saw no packets", m.label);
        assert!(m.pps > 0.5 * f64::from(RATE_PPS), "{}: {m:?}", m.label);
    }
    let changes: u64 = tuned
        .get("changes")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    assert!(changes >= 1, "tuning on made no change: {tuned:?}");
    assert!(
        ["pfc", "queue-high", "underutilized"].contains(&tuned.get("reason").map_or("", |r| r)),
        "{tuned:?}"
    );
    let env = rt().block_on(row(&db, SonicDbId::ConfigDb, "WEFT_ECN_ENVELOPE", &key));
    let n = |m: &BTreeMap<String, String>, k: &str| -> f64 {
        m.get(k).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    };
    for r in [&after_incast, &tuned, &reapplied] {
        assert!(
            (n(&env, "kmin_min")..=n(&env, "kmin_max")).contains(&n(r, "kmin"))
                && (n(&env, "kmax_min")..=n(&env, "kmax_max")).contains(&n(r, "kmax"))
                && (n(&env, "pmax_min") - 1e-9..=n(&env, "pmax_max") + 1e-9)
                    .contains(&n(r, "pmax")),
            "tuned values outside the envelope {env:?}: {r:?}"
        );
    }
    assert_eq!(
        (
            reapplied.get("kmin"),
            reapplied.get("kmax"),
            reapplied.get("pmax")
        ),
        (tuned.get("kmin"), tuned.get("kmax"), tuned.get("pmax")),
        "an identical re-apply must keep the tuned values"
    );
    assert!(
        status.contains(&key) && status.contains(BOTTLENECK_SWITCH),
        "weft status shows the tuned queue:\n{status}"
    );
    for p in f.state().processes {
        assert!(
            tb::pid_alive(p.pid),
            "{} died; logs in {}",
            p.name,
            dir.display()
        );
    }
    if let Err(e) = goal(&results) {
        panic!("goal missed: {e}");
    }
}

/// The goal, per load: queues shorter (median and p99), PAUSEs not more (and fewer over both
/// loads), throughput within 5%. `results` is [incast static, mixed static, incast tuned,
/// mixed tuned].
fn goal(results: &[Measured]) -> Result<(), String> {
    for (s, tu) in [(&results[0], &results[2]), (&results[1], &results[3])] {
        if tu.pps < 0.95 * s.pps {
            return Err(format!(
                "{}: throughput {:.0} vs static {:.0} pkt/s (more than 5% lost)",
                tu.label, tu.pps, s.pps
            ));
        }
        if !(tu.p50 < s.p50 && tu.p99 < s.p99 && tu.pfc <= s.pfc) {
            return Err(format!(
                "{}: p50 {} vs {}, p99 {} vs {}, PFC {} vs {}",
                tu.label, tu.p50, s.p50, tu.p99, s.p99, tu.pfc, s.pfc
            ));
        }
    }
    if results[2].pfc + results[3].pfc >= results[0].pfc + results[1].pfc {
        return Err(format!("tuning must cut PFC PAUSEs: {results:?}"));
    }
    Ok(())
}
