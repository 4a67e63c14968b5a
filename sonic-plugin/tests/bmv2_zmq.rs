//! The plugin taking batches over SONiC's ZMQ channel (`--zmq-endpoint`), against a real
//! redis-server and a real BMv2: per-key replies in SONiC's form, APPL_DB written behind and
//! APPL_STATE_DB as over Redis, and nothing lost or half-applied when a peer dies or sends
//! what cannot be read. Without BMv2: SKIPPED (`WEFT_REQUIRE_BMV2=1` fails instead).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weft_appdb::{Call, Encoder, Match, Value};
use weft_sonic_db::zmq::{ProducerOptions, ZmqBatch, ZmqEndpoint, ZmqError, ZmqProducer, wire};
use weft_sonic_db::{
    FieldValues, KeyOpFieldValues, P4RT_TABLE, SonicDb, SonicDbId, StatusCode, Table, WaitOutcome,
};
use weft_tests::bmv2::{Bmv2, Bmv2Options, ProcessGuard, bmv2_or_skip};
use weft_tests::redis::RedisServer;

fn start_plugin(redis: &RedisServer, sw: &Bmv2, zmq: &ZmqEndpoint, log: &Path) -> ProcessGuard {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("plugin log");
    let child = Command::new(env!("CARGO_BIN_EXE_weft-plugin"))
        .args(["--redis", &redis.url(), "--p4rt", &sw.grpc_addr()])
        .args(["--device-id", &sw.device_id().to_string()])
        .args(["--zmq-endpoint", &zmq.to_string()])
        .args(["--consumer-poll", "50ms", "--status-interval", "200ms"])
        // Requests larger than a batch go to the switch as several, answered in one reply.
        .args(["--batch-size", "1000"])
        .args(["--counter-interval", "0s", "--tuning-interval", "0s"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("spawn weft-plugin");
    ProcessGuard::new("weft-plugin", child)
}

async fn write_ports(sonic: &SonicDb) {
    let conn = sonic.connect(SonicDbId::ConfigDb).await.expect("config db");
    let t = Table::new(conn, "PORT").expect("table");
    for (p, id) in [("Ethernet0", "1"), ("Ethernet4", "2")] {
        t.set(p, &[("id", id), ("mtu", "9100"), ("admin_status", "up")])
            .await
            .expect("hset");
    }
}

/// Both ports' router MAC, two nexthops, then `routes` /32 routes over them.
fn entries(info: &weft_p4rt::P4Info, routes: u32) -> Vec<KeyOpFieldValues> {
    let enc = Encoder::new(info);
    let mac = |b: u8| Value::Mac([2, 0x57, 0x46, 0, 0, b]);
    let mut out = Vec::new();
    for p in ["Ethernet0", "Ethernet4"] {
        let k = enc
            .key(
                "port_config_table",
                &[Match::Exact("port", Value::Port(p.into()))],
                0,
            )
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
                ("egress_port", Value::Port(p.into())),
                ("dst_mac", mac(id as u8)),
                ("src_mac", mac(0xaa)),
            ],
        };
        out.push(enc.entry(k, &c).expect("entry").to_set_op());
    }
    for i in 0..routes {
        out.push(route(&enc, 0x0a40_0000 + i, 1 + u128::from(i % 2)));
    }
    out
}

fn route(enc: &Encoder, addr: u32, nexthop: u128) -> KeyOpFieldValues {
    let k = enc
        .key(
            "ipv4_table",
            &[Match::Lpm("ipv4_dst", Value::Ipv4(addr.into()), 32)],
            0,
        )
        .expect("key");
    let c = Call {
        action: "set_nexthop_id",
        params: vec![("nexthop_id", Value::Uint(nexthop))],
    };
    enc.entry(k, &c).expect("entry").to_set_op()
}

async fn rows(sonic: &SonicDb, db: SonicDbId) -> BTreeMap<String, FieldValues> {
    let t = Table::new(sonic.connect(db).await.expect("db"), P4RT_TABLE).expect("table");
    let mut rows = t.dump().await.expect("dump");
    for f in rows.values_mut() {
        f.sort();
    }
    rows
}

fn sorted(e: &KeyOpFieldValues) -> FieldValues {
    let mut f = e.fields.clone();
    f.sort();
    f
}

async fn running(sonic: &SonicDb) -> bool {
    let Ok(conn) = sonic.connect(SonicDbId::StateDb).await else {
        return false;
    };
    let Ok(t) = Table::new(conn, "WEFT_PLUGIN") else {
        return false;
    };
    matches!(t.hget("status", "state").await, Ok(Some(s)) if s == "running")
}

async fn wait_until<F, Fut>(what: &str, deadline: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t0 = Instant::now();
    while !f().await {
        assert!(t0.elapsed() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn producer(ep: &ZmqEndpoint, reply: Duration) -> ZmqProducer {
    let options = ProducerOptions {
        reply_timeout: reply,
        full_wait: Duration::from_millis(500),
        ..ProducerOptions::default()
    };
    ZmqProducer::connect(ep, "APPL_DB", P4RT_TABLE, options).expect("connect")
}

fn all_ok(out: &WaitOutcome, keys: &[KeyOpFieldValues]) {
    assert!(out.missing.is_empty(), "no reply for {:?}", out.missing);
    for e in keys {
        let r = &out.responses[&e.key];
        assert_eq!(r.status, StatusCode::Success, "{}: {}", e.key, r.message);
    }
}

/// One raw request on a fresh REQ socket: the reply's bytes.
fn raw_request(ep: &ZmqEndpoint, payload: &[u8]) -> Vec<u8> {
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::REQ).expect("socket");
    s.set_linger(0).expect("linger");
    s.set_rcvtimeo(30_000).expect("rcvtimeo");
    s.connect(&ep.to_string()).expect("connect");
    s.send(payload, 0).expect("send");
    s.recv_bytes(0).expect("a reply within 30s")
}

struct Bed {
    redis: RedisServer,
    sw: Bmv2,
    sonic: SonicDb,
    ep: ZmqEndpoint,
    log: PathBuf,
    plugin: ProcessGuard,
    info: weft_p4rt::P4Info,
}

impl Bed {
    async fn up(bin: &Path, name: &str) -> Bed {
        let redis = RedisServer::start().expect("redis-server");
        let sw = Bmv2::start(
            bin,
            Bmv2Options {
                cpu_port: Some(255),
                device_id: Some(1),
                extra_target_args: vec!["--priority-queues".into(), "8".into()],
                ..Default::default()
            },
        )
        .expect("BMv2");
        let sonic = SonicDb::from_endpoint(&redis.url()).expect("endpoint");
        write_ports(&sonic).await;
        let dir = std::env::temp_dir();
        let pid = std::process::id();
        let ep = ZmqEndpoint::ipc(dir.join(format!("weft-{name}-{pid}.zmq")));
        let log = dir.join(format!("weft-{name}-{pid}.log"));
        let plugin = start_plugin(&redis, &sw, &ep, &log);
        wait_until("plugin running", Duration::from_secs(60), || {
            running(&sonic)
        })
        .await;
        let info = weft_sonic_plugin::pipeline::weft_p4info().expect("p4info");
        Bed {
            redis,
            sw,
            sonic,
            ep,
            log,
            plugin,
            info,
        }
    }

    fn restart(&mut self) {
        self.plugin = start_plugin(&self.redis, &self.sw, &self.ep, &self.log);
    }
}

/// Per-key replies in SONiC's form, one reply for a request of several of the plugin's
/// batches; APPL_DB written behind and APPL_STATE_DB as over Redis; a
/// refused key (unknown table, unknown port) left in neither; repeated writes of one key
/// coalesced (sonic-swss#3978: a DEL then a SET of the default route must not lose it); a
/// batch of an older term refused whole and left nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zmq_batches_are_answered_per_key_written_behind_coalesced_and_fenced() {
    let Some(bin) =
        bmv2_or_skip("zmq_batches_are_answered_per_key_written_behind_coalesced_and_fenced")
    else {
        return;
    };
    let bed = Bed::up(&bin, "zmq-replies").await;
    // Three of the plugin's batches (1,000 keys) in one request: one reply for all.
    let ops = entries(&bed.info, 2500);
    let unknown = KeyOpFieldValues::set(r#"FIXED_NOPE:{"match/x":"0x1"}"#, [("action", "x")]);
    let bad_port = KeyOpFieldValues::set(
        r#"FIXED_NEXTHOP_TABLE:{"match/nexthop_id":"0x9"}"#,
        [
            ("action", "set_nexthop"),
            ("param/egress_port", "Ethernet77"),
            ("param/dst_mac", "02:00:00:00:00:01"),
            ("param/src_mac", "02:00:00:00:00:02"),
        ],
    );
    let mut p = producer(&bed.ep, Duration::from_secs(60));
    p.set_fence(Some(5));
    let mut all = ops.clone();
    all.extend([unknown.clone(), bad_port.clone()]);
    let out = p.send(&all).await.expect("a reply");
    all_ok(&out, &ops);
    for bad in [&unknown, &bad_port] {
        let r = &out.responses[&bad.key];
        assert!(!r.status.is_ok(), "{}: refused", bad.key);
        assert!(!r.message.is_empty(), "a refusal says why");
    }
    let appl = rows(&bed.sonic, SonicDbId::ApplDb).await;
    let state = rows(&bed.sonic, SonicDbId::ApplStateDb).await;
    for e in &ops {
        assert_eq!(
            state.get(&e.key),
            Some(&sorted(e)),
            "APPL_STATE_DB {}",
            e.key
        );
        assert_eq!(
            appl.get(&e.key),
            Some(&sorted(e)),
            "APPL_DB behind {}",
            e.key
        );
    }
    for bad in [&unknown, &bad_port] {
        assert!(!appl.contains_key(&bad.key) && !state.contains_key(&bad.key));
    }

    // The default route deleted and set again in one batch: one SET reaches the switch.
    let enc = Encoder::new(&bed.info);
    let default = route(&enc, 0x0a40_0000, 2);
    let twice = [KeyOpFieldValues::del(default.key.clone()), default.clone()];
    let before = p.stats().coalesced;
    let out = p.send(&twice).await.expect("a reply");
    all_ok(&out, std::slice::from_ref(&default));
    assert_eq!(
        p.stats().coalesced,
        before + 1,
        "the DEL was coalesced away"
    );
    let state = rows(&bed.sonic, SonicDbId::ApplStateDb).await;
    assert_eq!(state.get(&default.key), Some(&sorted(&default)));

    // An older writer: refused whole, nothing of it in either DB.
    let stale = route(&enc, 0x0a7f_0001, 1);
    p.set_fence(Some(3));
    let out = p.send(std::slice::from_ref(&stale)).await.expect("a reply");
    let r = &out.responses[&stale.key];
    assert_eq!(r.status, StatusCode::FailedPrecondition);
    assert!(
        r.message.contains("WEFT_FENCED term 3 is older than 5"),
        "{}",
        r.message
    );
    p.set_fence(Some(5));
    let out = p
        .send(&[route(&enc, 0x0a7f_0002, 1)])
        .await
        .expect("a reply");
    assert!(out.responses.values().all(|r| r.status.is_ok()));
    let appl = rows(&bed.sonic, SonicDbId::ApplDb).await;
    let state = rows(&bed.sonic, SonicDbId::ApplStateDb).await;
    assert!(!appl.contains_key(&stale.key) && !state.contains_key(&stale.key));
}

/// What cannot be read is refused whole with a reason, the plugin goes on, and nothing of it
/// is applied: a malformed frame, a truncated one, one over MQ_RESPONSE_MAX_COUNT, a batch for
/// a table the plugin does not serve. A request with no server to take it is "outcome
/// unknown", nothing of it applied; the batch then goes through once the plugin is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_messages_are_refused_whole_and_a_request_without_a_server_is_outcome_unknown() {
    let Some(bin) = bmv2_or_skip(
        "unreadable_messages_are_refused_whole_and_a_request_without_a_server_is_outcome_unknown",
    ) else {
        return;
    };
    let mut bed = Bed::up(&bin, "zmq-refusals").await;
    let ops = entries(&bed.info, 20);
    let batch = |table: &str, entries: Vec<KeyOpFieldValues>| ZmqBatch {
        db: "APPL_DB".into(),
        table: table.into(),
        term: None,
        entries,
    };
    let good = wire::encode(&batch(P4RT_TABLE, ops.clone()));
    let refusal = |reply: &[u8]| match wire::decode_reply(reply, "APPL_DB", P4RT_TABLE) {
        Err(ZmqError::Refused { status, message }) => (status, message),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let (s, m) = refusal(&raw_request(&bed.ep, b"not a swss-common message"));
    assert_eq!(s, StatusCode::InvalidParam);
    assert!(m.contains("nothing applied"), "{m}");
    let (_, m) = refusal(&raw_request(&bed.ep, &good[..good.len() - 7]));
    assert!(m.contains("truncated") || m.contains("ends after"), "{m}");
    let mut huge = vec![0u8; weft_sonic_db::zmq::MQ_RESPONSE_MAX_COUNT + 8];
    huge[..8].copy_from_slice(&1u64.to_le_bytes());
    let (_, m) = refusal(&raw_request(&bed.ep, &huge));
    assert!(m.contains("over the limit"), "{m}");
    let other = wire::encode(&batch("ROUTE_TABLE", ops.clone()));
    let reply = raw_request(&bed.ep, &other);
    let per_key = wire::decode_reply(&reply, "APPL_DB", "ROUTE_TABLE").expect("per-key reply");
    assert!(per_key.iter().all(|r| r.status == StatusCode::InvalidParam));
    assert!(
        rows(&bed.sonic, SonicDbId::ApplDb).await.is_empty(),
        "nothing written behind"
    );
    assert!(
        rows(&bed.sonic, SonicDbId::ApplStateDb).await.is_empty(),
        "nothing applied"
    );

    // The plugin went on: the same batch, readable, is applied.
    let reply = raw_request(&bed.ep, &good);
    let per_key = wire::decode_reply(&reply, "APPL_DB", P4RT_TABLE).expect("reply");
    assert!(per_key.iter().all(|r| r.status.is_ok()));

    // No server: libzmq queues the request for a peer that may yet come (a request/reply
    // socket holds one message; the high-water mark of push sockets is sonic-db's test), so
    // the producer cannot know whether it will be applied: after its reply timeout it says
    // "outcome unknown" and drops the socket (and the queued message with it). Nothing was
    // applied; once the plugin is back the same batch is.
    bed.plugin.kill();
    let mut p = producer(&bed.ep, Duration::from_secs(3));
    let more = vec![route(&Encoder::new(&bed.info), 0x0a50_0001, 1)];
    let e = p.send(&more).await.expect_err("no server");
    assert!(e.error.outcome_unknown(), "{e:?}");
    assert!(e.partial.missing.contains(&more[0].key), "{e:?}");
    bed.restart();
    let sonic = bed.sonic.clone();
    let key = more[0].key.clone();
    // The restarted plugin answers once its session runs; until then a request times out
    // as "outcome unknown" and is sent again (writes are idempotent).
    let t0 = std::time::Instant::now();
    let out = loop {
        match p.send(&more).await {
            Ok(out) => break out,
            Err(e) => {
                assert!(e.error.outcome_unknown(), "{e:?}");
                assert!(
                    t0.elapsed() < Duration::from_secs(180),
                    "the restarted plugin never answered; log {}",
                    bed.log.display()
                );
            }
        }
    };
    all_ok(&out, &more);
    assert!(
        rows(&sonic, SonicDbId::ApplStateDb)
            .await
            .contains_key(&key)
    );
}

/// The plugin killed with a batch in hand, and the producer gone after sending: nothing lost.
/// What reached the plugin is in APPL_DB (written on receipt), and the restarted plugin
/// installs it (APPL_STATE_DB ends equal to APPL_DB, every key of the batch in it), so the
/// controller's next pass finds nothing to write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_killed_mid_batch_or_a_producer_gone_loses_nothing() {
    let Some(bin) = bmv2_or_skip("a_plugin_killed_mid_batch_or_a_producer_gone_loses_nothing")
    else {
        return;
    };
    let mut bed = Bed::up(&bin, "zmq-kill").await;
    let ops = entries(&bed.info, 3000);
    let mut p = producer(&bed.ep, Duration::from_secs(120));
    let ep = bed.ep.clone();
    let sent = ops.clone();
    let send = tokio::spawn(async move {
        let r = p.send(&sent).await;
        drop(p);
        r.map(|_| ()).map_err(|e| e.error)
    });
    // Killed once the batch is in APPL_DB (it was received), most likely before it is applied.
    let sonic = bed.sonic.clone();
    wait_until("the batch received", Duration::from_secs(60), || {
        let sonic = sonic.clone();
        async move { rows(&sonic, SonicDbId::ApplDb).await.len() >= 3004 }
    })
    .await;
    bed.plugin.kill();
    match send.await.expect("join") {
        Ok(()) => {} // applied and answered before the kill
        Err(e) => assert!(
            e.outcome_unknown(),
            "a lost server is 'outcome unknown': {e}"
        ),
    }
    bed.restart();
    let sonic = bed.sonic.clone();
    // The killed plugin's status row says "running" until it expires: wait for the rows.
    wait_until(
        "the batch installed after restart",
        Duration::from_secs(120),
        || {
            let sonic = sonic.clone();
            async move { rows(&sonic, SonicDbId::ApplStateDb).await.len() >= 3004 }
        },
    )
    .await;
    let state = rows(&bed.sonic, SonicDbId::ApplStateDb).await;
    for e in &ops {
        assert_eq!(
            state.get(&e.key),
            Some(&sorted(e)),
            "{} installed after restart",
            e.key
        );
    }
    assert_eq!(rows(&bed.sonic, SonicDbId::ApplDb).await, state);

    // A producer that sends and exits without waiting for its reply (a controller killed
    // mid-batch): the plugin applies the batch whole and answers nobody.
    let late = vec![
        route(&Encoder::new(&bed.info), 0x0a60_0001, 1),
        route(&Encoder::new(&bed.info), 0x0a60_0002, 2),
    ];
    let payload = wire::encode(&ZmqBatch {
        db: "APPL_DB".into(),
        table: P4RT_TABLE.into(),
        term: None,
        entries: late.clone(),
    });
    {
        let ctx = zmq::Context::new();
        let s = ctx.socket(zmq::REQ).expect("socket");
        s.connect(&ep.to_string()).expect("connect");
        s.send(&payload, 0).expect("send");
        // Dropped here, reply unread; linger lets the message leave.
    }
    let sonic = bed.sonic.clone();
    let keys: Vec<String> = late.iter().map(|e| e.key.clone()).collect();
    wait_until(
        "the orphaned batch applied",
        Duration::from_secs(30),
        || {
            let (sonic, keys) = (sonic.clone(), keys.clone());
            async move {
                let s = rows(&sonic, SonicDbId::ApplStateDb).await;
                keys.iter().all(|k| s.contains_key(k))
            }
        },
    )
    .await;
    let _ = bed.sw.grpc_addr();
}
