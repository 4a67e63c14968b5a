//! The plugin binary against a real redis-server and a real BMv2 running Weft's pipeline; the
//! switch is read back with the independent `tests/scripts/p4rt_dump.py` and compared, entry by
//! entry, with what was written (`tests/scripts/p4rt_plan_check.py`). The main test runs on
//! both transports a producer hands entries over: APPL_DB (swss-common's `ProducerStateTable`,
//! answers on the response channel) and SONiC's ZMQ request/reply channel (`--zmq-endpoint`,
//! per-key replies). Without BMv2: SKIPPED (`WEFT_REQUIRE_BMV2=1` fails instead).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weft_appdb::{Call, Encoder, Match, Value};
use weft_sonic_db::zmq::{ProducerOptions, ZmqEndpoint, ZmqProducer};
use weft_sonic_db::{
    Digest, KeyOpFieldValues, P4RT_TABLE, ProducerStateTable, ResponseWaiter, SonicDb, SonicDbId,
    StatusCode, Table, dump_tables,
};
use weft_tests::bmv2::{Bmv2, Bmv2Options, ProcessGuard, bmv2_or_skip};
use weft_tests::redis::RedisServer;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The plugin, also serving `zmq` when given.
fn start_plugin(
    redis: &RedisServer,
    sw: &Bmv2,
    zmq: Option<&ZmqEndpoint>,
    log: &PathBuf,
) -> ProcessGuard {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("plugin log");
    // WEFT_TEST_PLUGIN: another build of the plugin to hold to these tests (an earlier one's).
    let bin = std::env::var_os("WEFT_TEST_PLUGIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_weft-plugin").into());
    let mut cmd = Command::new(bin);
    if let Some(ep) = zmq {
        cmd.args(["--zmq-endpoint", &ep.to_string()]);
    }
    let child = cmd
        .args(["--redis", &redis.url(), "--p4rt", &sw.grpc_addr()])
        .args(["--device-id", &sw.device_id().to_string()])
        .args(["--consumer-poll-ms", "50", "--status-interval-ms", "200"])
        .args(["--counter-interval-ms", "500"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("spawn weft-plugin");
    ProcessGuard::new("weft-plugin", child)
}

/// Everything the switch holds, read by the independent `tests/scripts/p4rt_dump.py` (the
/// `p4runtime` package only): its JSON text as printed, or why the read failed (a switch just
/// restarted has no pipeline until the plugin pushes it).
fn try_dump_text(sw: &Bmv2) -> Result<String, String> {
    let out = Command::new(format!("{REPO}/.venv/bin/python"))
        .arg(format!("{REPO}/tests/scripts/p4rt_dump.py"))
        .args([
            "--addr",
            &sw.grpc_addr(),
            "--device-id",
            &sw.device_id().to_string(),
        ])
        .args(["--p4info", &format!("{REPO}/p4/build/weft.p4info.txtpb")])
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .output()
        .expect("run p4rt_dump.py");
    if !out.status.success() {
        return Err(format!(
            "p4rt_dump.py: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn dump_text(sw: &Bmv2) -> String {
    try_dump_text(sw).unwrap_or_else(|e| panic!("{e}"))
}

fn dump(sw: &Bmv2) -> serde_json::Value {
    serde_json::from_str(&dump_text(sw)).expect("p4rt_dump.py JSON")
}

/// Whether the switch holds exactly `ops` in the tables the controller writes (every match,
/// action, parameter and group member compared by the independent
/// `tests/scripts/p4rt_plan_check.py`, port ids from `write_config`), and as many entries as
/// the two ports' QoS rows give in the plugin's own `queue_config_table`: `Err` says what
/// differs.
fn holds(sw: &Bmv2, ops: &[KeyOpFieldValues]) -> Result<(), String> {
    let text = try_dump_text(sw)?;
    let dir = std::env::temp_dir();
    let tag = format!("{}-{}", std::process::id(), sw.grpc_port());
    let (ef, df) = (
        dir.join(format!("weft-plan-entries-{tag}.json")),
        dir.join(format!("weft-dump-{tag}.json")),
    );
    let entries: Vec<serde_json::Value> = ops
        .iter()
        .map(|o| serde_json::json!({"key": o.key, "fields": o.fields}))
        .collect();
    std::fs::write(&ef, serde_json::Value::from(entries).to_string()).expect("entries file");
    std::fs::write(&df, &text).expect("dump file");
    let out = Command::new(format!("{REPO}/.venv/bin/python"))
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .arg(format!("{REPO}/tests/scripts/p4rt_plan_check.py"))
        .args(["--p4info", &format!("{REPO}/p4/build/weft.p4info.txtpb")])
        .arg("--entries")
        .arg(&ef)
        .arg("--dump")
        .arg(&df)
        .args(["--ports", "Ethernet0=1,Ethernet4=2"])
        .output()
        .expect("run p4rt_plan_check.py");
    let _ = std::fs::remove_file(&ef);
    let _ = std::fs::remove_file(&df);
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!("{report}{}", String::from_utf8_lossy(&out.stderr)));
    }
    let d: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let queues = d["tables"][weft_p4::tables::queue_config_table::NAME]
        .as_array()
        .map_or(0, Vec::len);
    if queues != 2 {
        return Err(format!(
            "queue_config_table holds {queues} entries, not 2: {d}"
        ));
    }
    Ok(())
}

async fn status(sonic: &SonicDb, field: &str) -> u64 {
    let t = Table::new(
        sonic.connect(SonicDbId::StateDb).await.expect("state db"),
        "WEFT_PLUGIN",
    )
    .expect("table");
    t.hget("status", field)
        .await
        .ok()
        .flatten()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The plugin's status row publishes the digests of what APPL_STATE_DB P4RT_TABLE and the owned
/// CONFIG_DB tables hold now, as a reader computes them from the rows.
async fn digests_describe_the_dbs(sonic: &SonicDb) -> bool {
    use weft_sonic_schema::Row;
    use weft_sonic_schema::state::{InstalledDigests, PluginStatus};
    let read = async {
        let st = Table::new(
            sonic.connect(SonicDbId::StateDb).await?,
            PluginStatus::TABLE,
        )?
        .get("status")
        .await?;
        let state = sonic.connect(SonicDbId::ApplStateDb).await?;
        let entries = Table::new(state, P4RT_TABLE)?.dump().await?;
        let config = sonic.connect(SonicDbId::ConfigDb).await?;
        let tables = dump_tables(&config, &weft_sonic_schema::config::owned_tables()).await?;
        Ok::<_, weft_sonic_db::SonicDbError>((st, entries, tables))
    };
    let Ok((Some(st), entries, tables)) = read.await else {
        return false;
    };
    let read_back = InstalledDigests {
        entries: Digest::of(entries.iter().map(|(k, f)| (k.as_str(), f))),
        config: weft_sonic_schema::config::config_digest(
            tables
                .iter()
                .flat_map(|(t, rows)| rows.iter().map(move |(k, f)| (t.as_str(), k.as_str(), f))),
        ),
    };
    PluginStatus::from_fields("status", &st)
        .ok()
        .and_then(|s| s.digests())
        == Some(read_back)
}

/// Rows in the published APPL_STATE_DB digest.
async fn digest_rows(sonic: &SonicDb) -> u64 {
    status(sonic, "appl_state_rows").await
}

async fn wait_for_digests(sonic: &SonicDb, when: &str) {
    let t0 = Instant::now();
    while !digests_describe_the_dbs(sonic).await {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{when}: the published digests do not describe APPL_STATE_DB and CONFIG_DB"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_for<F: FnMut() -> bool>(what: &str, deadline: Duration, mut f: F) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn write_config(sonic: &SonicDb) {
    let conn = sonic.connect(SonicDbId::ConfigDb).await.expect("config db");
    let set = |t: &str, k: &str, f: &[(&str, &str)]| {
        let tbl = Table::new(conn.clone(), t).expect("table");
        let k = k.to_string();
        let f: Vec<(String, String)> = f
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        async move { tbl.set(&k, &f).await.expect("hset") }
    };
    set(
        "PORT",
        "Ethernet0",
        &[("id", "1"), ("mtu", "9100"), ("admin_status", "up")],
    )
    .await;
    set(
        "PORT",
        "Ethernet4",
        &[("id", "2"), ("mtu", "9100"), ("admin_status", "up")],
    )
    .await;
    set("DSCP_TO_TC_MAP", "WEFT", &[("0", "0"), ("26", "3")]).await;
    set(
        "PORT_QOS_MAP",
        "Ethernet0",
        &[("dscp_to_tc_map", "WEFT"), ("pfc_enable", "3")],
    )
    .await;
    set(
        "PORT_QOS_MAP",
        "Ethernet4",
        &[("dscp_to_tc_map", "WEFT"), ("pfc_enable", "")],
    )
    .await;
    set(
        "WRED_PROFILE",
        "WEFT_ROCE_100000",
        &[
            ("ecn", "ecn_all"),
            ("green_min_threshold", "409600"),
            ("green_max_threshold", "1638400"),
            ("green_drop_probability", "20"),
        ],
    )
    .await;
    set(
        "QUEUE",
        "Ethernet0|3",
        &[("wred_profile", "WEFT_ROCE_100000")],
    )
    .await;
    set(
        "QUEUE",
        "Ethernet4|3",
        &[("wred_profile", "WEFT_ROCE_100000")],
    )
    .await;
    set(
        "BUFFER_PROFILE",
        "pg_lossless_100000_5m_profile",
        &[("xon", "19456"), ("xoff", "51200"), ("size", "70656")],
    )
    .await;
    set(
        "BUFFER_PG",
        "Ethernet0|3",
        &[("profile", "pg_lossless_100000_5m_profile")],
    )
    .await;
}

fn intent(info: &weft_p4rt::P4Info) -> Vec<KeyOpFieldValues> {
    let enc = Encoder::new(info);
    let mac = |b: u8| Value::Mac([2, 0x57, 0x46, 0, 0, b]);
    let port = |p: &str| Value::Port(p.to_string());
    let mut out = Vec::new();
    for p in ["Ethernet0", "Ethernet4"] {
        let k = enc
            .key("port_config_table", &[Match::Exact("port", port(p))], 0)
            .expect("key");
        let c = Call {
            action: "set_port_config",
            params: vec![("router_mac", mac(0xaa))],
        };
        out.push(enc.entry(k, &c).expect("entry").to_set_op());
    }
    for (id, p) in [(1u128, "Ethernet0"), (2, "Ethernet4")] {
        let k = enc
            .key(
                "nexthop_table",
                &[Match::Exact("nexthop_id", Value::Uint(id))],
                0,
            )
            .expect("key");
        let c = Call {
            action: "set_nexthop",
            params: vec![
                ("egress_port", port(p)),
                ("dst_mac", mac(id as u8)),
                ("src_mac", mac(0xaa)),
            ],
        };
        out.push(enc.entry(k, &c).expect("entry").to_set_op());
    }
    let k = enc
        .key(
            "wcmp_group_table",
            &[Match::Exact("wcmp_group_id", Value::Uint(7))],
            0,
        )
        .expect("key");
    let members: Vec<(Call, u32, Option<String>)> = [(1u128, "Ethernet0"), (2, "Ethernet4")]
        .into_iter()
        .map(|(nh, p)| {
            (
                Call {
                    action: "set_wcmp_member",
                    params: vec![("nexthop_id", Value::Uint(nh)), ("egress_port", port(p))],
                },
                1,
                Some(p.to_string()),
            )
        })
        .collect();
    out.push(enc.group(k, &members).expect("group").to_set_op());
    let routes = [
        ("10.1.0.0", 16, "set_wcmp_group_id", "wcmp_group_id", 7u128),
        ("10.2.0.0", 16, "set_nexthop_id", "nexthop_id", 1),
    ];
    for (net, len, action, param, v) in routes {
        let k = enc
            .key(
                "ipv4_table",
                &[Match::Lpm(
                    "ipv4_dst",
                    Value::Ipv4(net.parse().expect("ip")),
                    len,
                )],
                0,
            )
            .expect("key");
        out.push(
            enc.entry(
                k,
                &Call {
                    action,
                    params: vec![(param, Value::Uint(v))],
                },
            )
            .expect("entry")
            .to_set_op(),
        );
    }
    out
}

/// `ops` handed to the plugin over ZMQ when `zmq` names its endpoint, else through APPL_DB:
/// every key's answer.
async fn apply(
    sonic: &SonicDb,
    zmq: Option<&ZmqEndpoint>,
    ops: &[KeyOpFieldValues],
) -> std::collections::BTreeMap<String, (StatusCode, String)> {
    let out = match zmq {
        Some(ep) => {
            let options = ProducerOptions {
                reply_timeout: Duration::from_secs(60),
                ..ProducerOptions::default()
            };
            let mut p = ZmqProducer::connect(ep, "APPL_DB", P4RT_TABLE, options).expect("connect");
            p.send(ops).await.expect("a reply")
        }
        None => apply_redis(sonic, ops).await,
    };
    assert!(out.missing.is_empty(), "no response for {:?}", out.missing);
    out.responses
        .into_iter()
        .map(|(k, r)| (k, (r.status, r.message)))
        .collect()
}

async fn apply_redis(sonic: &SonicDb, ops: &[KeyOpFieldValues]) -> weft_sonic_db::WaitOutcome {
    let mut waiter = ResponseWaiter::subscribe(sonic, P4RT_TABLE)
        .await
        .expect("subscribe");
    let mut prod = ProducerStateTable::new(sonic, SonicDbId::ApplDb, P4RT_TABLE)
        .await
        .expect("producer");
    prod.apply(ops).await.expect("produce");
    waiter
        .wait(ops.iter().map(|o| o.key.clone()), Duration::from_secs(60))
        .await
        .expect("responses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_programs_bmv2_answers_every_key_and_converges_after_restarts() {
    programs_answers_and_converges(
        "plugin_programs_bmv2_answers_every_key_and_converges_after_restarts",
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_programs_bmv2_answers_every_key_and_converges_after_restarts_over_zmq() {
    programs_answers_and_converges(
        "plugin_programs_bmv2_answers_every_key_and_converges_after_restarts_over_zmq",
        true,
    )
    .await;
}

/// Entries (good and bad) answered, read back from the switch, kept across restarts of the
/// plugin, BMv2 and Redis; handed over ZMQ when `zmq`, else through APPL_DB.
async fn programs_answers_and_converges(test: &str, zmq: bool) {
    let Some(bin) = bmv2_or_skip(test) else {
        return;
    };
    let mut redis = RedisServer::start().expect("redis-server");
    let mut sw = Bmv2::start(
        &bin,
        Bmv2Options {
            cpu_port: Some(255),
            device_id: Some(1),
            extra_target_args: vec!["--priority-queues".into(), "8".into()],
            ..Default::default()
        },
    )
    .expect("BMv2");
    let sonic = SonicDb::from_endpoint(&redis.url()).expect("endpoint");
    write_config(&sonic).await;
    let tag = if zmq { "zmq" } else { "redis" };
    let log =
        std::env::temp_dir().join(format!("weft-plugin-test-{tag}-{}.log", std::process::id()));
    let ep = zmq.then(|| {
        ZmqEndpoint::ipc(
            std::env::temp_dir().join(format!("weft-plugin-test-{}.zmq", std::process::id())),
        )
    });
    let ep = ep.as_ref();
    let mut plugin = start_plugin(&redis, &sw, ep, &log);
    let info = weft_sonic_plugin::pipeline::weft_p4info().expect("p4info");
    let mut ops = intent(&info);

    // Bad entries next to good ones: each gets its own error, the rest installs.
    let bad_route = KeyOpFieldValues::set(
        r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.9.0.0/16"}"#,
        [
            ("action", "set_nexthop_id"),
            ("param/nexthop_id", "0x10000"),
        ],
    );
    let bad_port = KeyOpFieldValues::set(
        r#"FIXED_NEXTHOP_TABLE:{"match/nexthop_id":"0x9"}"#,
        [
            ("action", "set_nexthop"),
            ("param/egress_port", "Ethernet77"),
            ("param/dst_mac", "02:00:00:00:00:01"),
            ("param/src_mac", "02:00:00:00:00:02"),
        ],
    );
    let unknown = KeyOpFieldValues::set(r#"FIXED_NOPE:{"match/x":"0x1"}"#, [("action", "x")]);
    let mut all = ops.clone();
    all.extend([bad_route.clone(), bad_port.clone(), unknown.clone()]);
    let res = apply(&sonic, ep, &all).await;
    for o in &ops {
        assert_eq!(
            res[&o.key].0,
            StatusCode::Success,
            "{}: {}",
            o.key,
            res[&o.key].1
        );
    }
    assert!(
        res[&bad_route.key].1.contains("does not fit in 16 bits"),
        "{:?}",
        res[&bad_route.key]
    );
    assert!(
        res[&bad_port.key].1.contains("Ethernet77"),
        "{:?}",
        res[&bad_port.key]
    );
    assert!(
        res[&unknown.key].1.contains("unknown table"),
        "{:?}",
        res[&unknown.key]
    );
    for k in [&bad_route, &bad_port, &unknown] {
        assert_eq!(res[&k.key].0, StatusCode::InvalidParam);
    }

    // An entry written by hand the way SONiC's P4RT app writes it.
    let key = r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.3.0.0/16"}"#;
    let mut waiter = ResponseWaiter::subscribe(&sonic, P4RT_TABLE)
        .await
        .expect("subscribe");
    // As swss-common's ProducerStateTable does: one Lua script (SADD, HSET, PUBLISH), so the
    // plugin can never pop the key before its fields are staged.
    let script = r#"redis.call('SADD', KEYS[1], ARGV[1]);
        redis.call('HSET', KEYS[2], 'action', 'set_nexthop_id', 'param/nexthop_id', '0x2');
        redis.call('PUBLISH', KEYS[3], 'G')"#;
    redis
        .cli(
            0,
            &[
                "EVAL",
                script,
                "3",
                "P4RT_TABLE_KEY_SET",
                &format!("_P4RT_TABLE:{key}"),
                "P4RT_TABLE_CHANNEL@0",
                key,
            ],
        )
        .expect("eval");
    let r = waiter
        .wait([key], Duration::from_secs(30))
        .await
        .expect("wait");
    assert!(r.all_ok(), "{r:?}");
    ops.push(KeyOpFieldValues::set(
        key,
        [("action", "set_nexthop_id"), ("param/nexthop_id", "0x2")],
    ));

    holds(&sw, &ops).unwrap_or_else(|e| panic!("switch after the first apply: {e}"));
    let g = &dump(&sw)["groups"];
    let group = g
        .as_object()
        .and_then(|p| p.values().next())
        .and_then(|m| m.get("7"))
        .expect("group 7");
    assert_eq!(group.as_array().map(Vec::len), Some(2));

    // SONiC's p4orch semantics for references: a route to a nexthop that does not exist is
    // NOT_FOUND and never reaches the switch; deleting a nexthop a route uses is IN_USE and the
    // nexthop stays. Read back by the independent p4rt-dump.
    let dangling = KeyOpFieldValues::set(
        r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.8.0.0/16"}"#,
        [("action", "set_nexthop_id"), ("param/nexthop_id", "0x77")],
    );
    let res = apply(&sonic, ep, std::slice::from_ref(&dangling)).await;
    assert_eq!(
        res[&dangling.key].0,
        StatusCode::NotFound,
        "{:?}",
        res[&dangling.key]
    );
    let used = r#"FIXED_NEXTHOP_TABLE:{"match/nexthop_id":"0x1"}"#;
    let res = apply(&sonic, ep, &[KeyOpFieldValues::del(used)]).await;
    assert_eq!(res[used].0, StatusCode::InUse, "{:?}", res[used]);
    holds(&sw, &ops).unwrap_or_else(|e| {
        panic!("a refused route installed nothing and a used nexthop was not deleted: {e}")
    });

    // Every answer so far (installs, refusals, the delete refused IN_USE) is in the digests.
    wait_for_digests(&sonic, "after the batches").await;

    // The entries came the way they were sent: the status row (rewritten every 200 ms) counts
    // the ZMQ requests (the first batch, the dangling route, the refused delete), and has no
    // such count when no endpoint is served.
    let want = zmq.then(|| "3".to_string());
    let state = Table::new(
        sonic.connect(SonicDbId::StateDb).await.expect("state db"),
        "WEFT_PLUGIN",
    )
    .expect("table");
    let t0 = Instant::now();
    loop {
        let got = state.hget("status", "zmq_requests").await.expect("status");
        if got == want {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "status row zmq_requests {got:?}, expected {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A second apply of the same entries writes nothing to the switch.
    let before = status(&sonic, "switch_updates").await;
    let res = apply(&sonic, ep, &ops).await;
    assert!(res.values().all(|(s, _)| *s == StatusCode::Success));
    assert_eq!(
        status(&sonic, "switch_updates").await,
        before,
        "second apply wrote to the switch"
    );

    // kill -9 the plugin, restart: converges, and its sync writes nothing.
    plugin.kill();
    plugin = start_plugin(&redis, &sw, ep, &log);
    let pid = u64::from(plugin.pid().expect("pid"));
    wait_for("plugin restart sync", Duration::from_secs(60), || {
        futures::executor::block_on(status(&sonic, "pid")) == pid
            && futures::executor::block_on(async {
                let t = Table::new(
                    sonic.connect(SonicDbId::StateDb).await.expect("db"),
                    "WEFT_PLUGIN",
                )
                .expect("t");
                t.hget("status", "state").await.ok().flatten().as_deref() == Some("running")
            })
    })
    .await;
    assert_eq!(
        status(&sonic, "last_sync_updates").await,
        0,
        "restart sync rewrote the switch"
    );
    holds(&sw, &ops).unwrap_or_else(|e| panic!("switch after plugin restart: {e}"));
    wait_for_digests(&sonic, "after the plugin restart").await;

    // BMv2 restarts empty: the plugin pushes the pipeline and replays everything.
    sw.restart().expect("BMv2 restart");
    wait_for("switch repopulated", Duration::from_secs(90), || {
        holds(&sw, &ops).is_ok()
    })
    .await;

    // Redis restarts empty: the plugin restores its tables; re-applying answers success and
    // the switch is untouched.
    redis.restart().expect("redis restart");
    write_config(&sonic).await;
    wait_for("APPL_STATE_DB restored", Duration::from_secs(60), || {
        futures::executor::block_on(async {
            match sonic.connect(SonicDbId::ApplStateDb).await {
                Ok(c) => {
                    Table::new(c, P4RT_TABLE)
                        .expect("t")
                        .keys()
                        .await
                        .map(|k| k.len())
                        .unwrap_or(0)
                        >= ops.len()
                }
                Err(_) => false,
            }
        })
    })
    .await;
    let res = apply(&sonic, ep, &ops).await;
    assert!(
        res.values().all(|(s, _)| *s == StatusCode::Success),
        "{res:?}"
    );
    holds(&sw, &ops).unwrap_or_else(|e| panic!("switch after Redis restart: {e}"));
    wait_for_digests(&sonic, "after the Redis restart").await;
    // A delete through APPL_DB takes its row out of the digest.
    let route = ops
        .iter()
        .find(|o| o.key.starts_with("FIXED_IPV4_TABLE"))
        .expect("a route")
        .key
        .clone();
    let before = digest_rows(&sonic).await;
    let res = apply(&sonic, ep, &[KeyOpFieldValues::del(&route)]).await;
    assert!(res.values().all(|(s, _)| s.is_ok()), "{res:?}");
    wait_for_digests(&sonic, "after a delete").await;
    assert_eq!(digest_rows(&sonic).await + 1, before, "one row fewer");

    // Port state is published for every configured port.
    let st = Table::new(
        sonic.connect(SonicDbId::StateDb).await.expect("db"),
        "PORT_TABLE",
    )
    .expect("t");
    wait_for("oper_status", Duration::from_secs(10), || {
        futures::executor::block_on(st.hget("Ethernet0", "oper_status"))
            .ok()
            .flatten()
            .as_deref()
            == Some("up")
    })
    .await;
    drop(plugin);
    let _ = std::fs::remove_file(&log);
    if let Some(ZmqEndpoint::Ipc { path }) = ep {
        let _ = std::fs::remove_file(path);
    }
}

/// The controller writes a switch's CONFIG_DB before the P4RT entries naming its ports, but the
/// plugin hears of CONFIG_DB changes through keyspace notifications on another connection, which
/// may come after the consumer popped the entries. Here the notification never comes (keyspace
/// events are off while the port is added), so only the plugin's own rule can find the port:
/// an entry naming a port it has no id for is answered after CONFIG_DB is read again. Without
/// that rule the nexthop is refused "unknown port"; with it, it is installed on the port's id,
/// read back from the switch by the independent p4rt-dump. A port CONFIG_DB really lacks is
/// still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_added_to_config_db_without_a_notification_is_found_before_its_entries_are_answered()
{
    let Some(bin) = bmv2_or_skip(
        "a_port_added_to_config_db_without_a_notification_is_found_before_its_entries_are_answered",
    ) else {
        return;
    };
    let redis = RedisServer::start().expect("redis-server");
    let sw = Bmv2::start(
        &bin,
        Bmv2Options {
            cpu_port: Some(255),
            device_id: Some(1),
            extra_target_args: vec!["--priority-queues".into(), "8".into()],
            ..Default::default()
        },
    )
    .expect("BMv2");
    let sonic = SonicDb::from_endpoint(&redis.url()).expect("endpoint");
    write_config(&sonic).await;
    let log = std::env::temp_dir().join(format!("weft-plugin-race-{}.log", std::process::id()));
    let plugin = start_plugin(&redis, &sw, None, &log);
    let info = weft_sonic_plugin::pipeline::weft_p4info().expect("p4info");
    // The plugin runs once it answers the port configs of the two ports it knows.
    let ports = intent(&info)[..2].to_vec();
    let res = apply(&sonic, None, &ports).await;
    assert!(
        res.values().all(|(s, _)| *s == StatusCode::Success),
        "{res:?}"
    );

    // Ethernet8 (id 3) is added while Redis publishes no keyspace events: the plugin is not told.
    let events = redis
        .cli(0, &["CONFIG", "GET", "notify-keyspace-events"])
        .expect("CONFIG GET");
    let events = events.lines().nth(1).unwrap_or("").trim().to_string();
    assert!(!events.is_empty(), "the plugin turned keyspace events on");
    redis
        .cli(0, &["CONFIG", "SET", "notify-keyspace-events", ""])
        .expect("events off");
    let config = Table::new(
        sonic.connect(SonicDbId::ConfigDb).await.expect("config db"),
        "PORT",
    )
    .expect("table");
    config
        .set(
            "Ethernet8",
            &[
                ("id".to_string(), "3".to_string()),
                ("mtu".to_string(), "9100".to_string()),
                ("admin_status".to_string(), "up".to_string()),
            ],
        )
        .await
        .expect("hset");
    redis
        .cli(0, &["CONFIG", "SET", "notify-keyspace-events", &events])
        .expect("events back on");

    let nexthop = |id: &str, port: &str| {
        KeyOpFieldValues::set(
            format!(r#"FIXED_NEXTHOP_TABLE:{{"match/nexthop_id":"{id}"}}"#),
            [
                ("action", "set_nexthop"),
                ("param/egress_port", port),
                ("param/dst_mac", "02:00:00:00:00:08"),
                ("param/src_mac", "02:00:00:00:00:aa"),
            ],
        )
    };
    let port_config = KeyOpFieldValues::set(
        r#"FIXED_PORT_CONFIG_TABLE:{"match/port":"Ethernet8"}"#,
        [
            ("action", "set_port_config"),
            ("param/router_mac", "02:00:00:00:00:aa"),
        ],
    );
    let known_now = nexthop("0x8", "Ethernet8");
    let never = nexthop("0x9", "Ethernet77");
    let res = apply(
        &sonic,
        None,
        &[port_config.clone(), known_now.clone(), never.clone()],
    )
    .await;
    assert_eq!(res[&port_config.key].0, StatusCode::Success, "{res:?}");
    assert_eq!(
        res[&known_now.key].0,
        StatusCode::Success,
        "{:?}; plugin log {}",
        res[&known_now.key],
        log.display()
    );
    assert_eq!(
        res[&never.key].0,
        StatusCode::InvalidParam,
        "{:?}",
        res[&never.key]
    );
    assert!(
        res[&never.key].1.contains("unknown port"),
        "{:?}",
        res[&never.key]
    );

    let d = dump(&sw);
    let on_port_3 = d["tables"]["ingress.nexthop.nexthop_table"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["match"]["nexthop_id"] == 8 && e["params"]["egress_port"] == 3);
    assert!(on_port_3, "nexthop 8 not on port 3: {d}");
    drop(plugin);
    let _ = std::fs::remove_file(&log);
}
