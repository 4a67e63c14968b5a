//! Weft's ZMQ ends against swss-common's own classes, both ways: their `ZmqClient` +
//! `ZmqProducerStateTable` into Weft's server, and Weft's producer into their `ZmqServer` +
//! `ZmqConsumerStateTable` answering as p4orch does. swss-common is not part of this
//! repository: the test runs when `WEFT_SWSS_COMMON_PEER` names a program built against it, and
//! prints SKIPPED otherwise. The program's contract (one line per record, tab-separated):
//!
//! * `PEER producer ENDPOINT req DB_CONFIG` sends one batch with `ZmqProducerStateTable::send`
//!   (table `P4RT_TABLE` of `APPL_DB`, written behind), waits for the reply
//!   (`ZmqProducerStateTable::wait`) and prints `REPLY-HEADER db table`, `REPLIES n`, then
//!   (n ≤ 10) `REPLY key op field=value...` per reply, then `DONE`;
//! * `PEER consumer ENDPOINT rep DB_CONFIG N` serves `ZmqConsumerStateTable` until it has
//!   popped N entries; per request it prints `MESSAGE n`, then (N ≤ 10) `ENTRY key op
//!   field=value...` per entry, and answers each entry as p4orch's `ResponsePublisher`
//!   does over ZMQ: (`SWSS_RC_SUCCESS`, "") then the entry's fields; then `DONE`.
//!
//! DB_CONFIG is swss-common's `database_config.json`, written here for a real redis-server.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use weft_sonic_db::zmq::{
    ProducerOptions, ServerOptions, ZmqEndpoint, ZmqMode, ZmqProducer, ZmqServer,
};
use weft_sonic_db::{EntryResult, KeyOpFieldValues, Op, StatusCode};
use weft_tests::redis::{RedisServer, RedisServerOptions};

const DEADLINE: Duration = Duration::from_secs(120);

fn peer_program() -> Option<PathBuf> {
    match std::env::var_os("WEFT_SWSS_COMMON_PEER") {
        Some(p) => {
            let p = PathBuf::from(p);
            assert!(
                p.exists(),
                "WEFT_SWSS_COMMON_PEER={} does not exist",
                p.display()
            );
            Some(p)
        }
        None => {
            println!(
                "SKIPPED: swss-common ZMQ peer: set WEFT_SWSS_COMMON_PEER to a program built against swss-common"
            );
            None
        }
    }
}

/// A redis-server on its unix socket and a loopback TCP port: swss-common's producer writes
/// APPL_DB behind over TCP.
fn redis() -> (RedisServer, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let options = RedisServerOptions {
        tcp_port: port,
        ..Default::default()
    };
    (
        RedisServer::start_with(options).expect("redis-server"),
        port,
    )
}

/// swss-common's database config for `redis`, in `dir`.
fn db_config(dir: &Path, redis: &RedisServer, port: u16) -> PathBuf {
    let db =
        |id: u8, sep: &str| serde_json::json!({"id": id, "separator": sep, "instance": "redis"});
    let cfg = serde_json::json!({
        "INSTANCES": {"redis": {
            "hostname": "127.0.0.1", "port": port,
            "unix_socket_path": redis.socket_path(),
        }},
        "DATABASES": {
            "APPL_DB": db(0, ":"), "CONFIG_DB": db(4, "|"), "STATE_DB": db(6, "|"),
            "APPL_STATE_DB": db(14, ":"),
        },
        "VERSION": "1.0",
    });
    let path = dir.join("database_config.json");
    std::fs::write(&path, cfg.to_string()).expect("write db config");
    path
}

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("weft-swss-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    Dir(d)
}

/// Runs the peer to its end (killed, by PID, past the deadline) and returns its stdout.
async fn run_peer(prog: PathBuf, args: Vec<String>) -> String {
    let child = tokio::process::Command::new(prog)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn swss-common peer");
    let out = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("swss-common peer {args:?}: no outcome within {DEADLINE:?}"))
        .expect("peer output");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "peer {args:?} failed: {}; {text}",
        out.status
    );
    text
}

/// `tag key op field=value...` records of the peer's output.
fn records(out: &str, tag: &str) -> Vec<KeyOpFieldValues> {
    out.lines()
        .filter_map(|l| l.strip_prefix(tag)?.strip_prefix('\t'))
        .map(|l| {
            let mut it = l.split('\t');
            let key = it.next().expect("key").to_string();
            let op = match it.next().expect("op") {
                "SET" => Op::Set,
                "DEL" => Op::Del,
                other => panic!("op {other}"),
            };
            let fields = it
                .map(|fv| {
                    let (f, v) = fv.split_once('=').expect("field=value");
                    (f.to_string(), v.to_string())
                })
                .collect();
            KeyOpFieldValues { key, op, fields }
        })
        .collect()
}

fn value(out: &str, tag: &str) -> Option<String> {
    out.lines()
        .find_map(|l| l.strip_prefix(tag)?.strip_prefix('\t'))
        .map(str::to_string)
}

/// Their producer's batch, as Weft's server reads it (every write as sent, a field count of 0
/// a DEL), answered per key; their `wait` reads the replies as Weft wrote them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swss_common_producer_into_weft_server_gets_per_key_replies() {
    let Some(prog) = peer_program() else { return };
    let dir = temp_dir("producer");
    let (redis, port) = redis();
    let cfg = db_config(&dir.0, &redis, port);
    let ep = ZmqEndpoint::ipc(dir.0.join("ep"));
    let opts = ServerOptions {
        mode: ZmqMode::RequestReply,
        ..Default::default()
    };
    let mut server = ZmqServer::bind(&ep, opts.serving("APPL_DB", "P4RT_TABLE")).expect("bind");
    let peer = tokio::spawn(run_peer(
        prog.clone(),
        vec![
            "producer".into(),
            ep.to_string(),
            "req".into(),
            cfg.display().to_string(),
        ],
    ));
    let req = tokio::time::timeout(DEADLINE, server.next())
        .await
        .expect("a request within the deadline")
        .expect("server open")
        .expect("a readable request");
    assert!(!req.entries.is_empty(), "their batch has entries");
    assert!(
        req.entries.iter().any(|e| e.op == Op::Del) && req.entries.iter().any(|e| e.op == Op::Set),
        "their batch carries both a SET and a DEL: {:?}",
        req.entries
    );
    // Weft's answers, each one different so that the reply is checked key by key.
    let answers: Vec<EntryResult> = req
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| match e.op {
            Op::Set => EntryResult::ok(e.key.clone(), e.op, e.fields.clone()),
            Op::Del => EntryResult::err(
                e.key.clone(),
                e.op,
                StatusCode::NotFound,
                format!("[OrchAgent] no such entry {i}"),
                vec![],
            ),
        })
        .collect();
    let sent = req.entries.clone();
    req.reply(&answers).expect("reply");
    let out = peer.await.expect("join");
    assert_eq!(
        value(&out, "REPLY-HEADER").as_deref(),
        Some("APPL_DB\tP4RT_TABLE"),
        "{out}"
    );
    assert_eq!(
        value(&out, "REPLIES"),
        Some(sent.len().to_string()),
        "{out}"
    );
    let replies = records(&out, "REPLY");
    assert_eq!(replies.len(), sent.len(), "{out}");
    for ((reply, entry), answer) in replies.iter().zip(&sent).zip(&answers) {
        assert_eq!(reply.key, entry.key);
        let (status, message) = reply.fields.first().expect("status first");
        assert_eq!(status, answer.status.as_str(), "{}", reply.key);
        assert_eq!(message, &answer.message, "{}", reply.key);
        assert_eq!(&reply.fields[1..], &answer.fields[..], "{}", reply.key);
    }
    assert!(out.lines().any(|l| l == "DONE"), "{out}");
    server.shutdown().await;
}

/// Weft's producer into their consumer, answering as p4orch: every entry read as Weft sent it
/// (a small batch printed whole; 10,000 routes counted), every key answered SUCCESS with its
/// fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weft_producer_into_swss_common_consumer_is_read_whole_and_answered_per_key() {
    let Some(prog) = peer_program() else { return };
    let dir = temp_dir("consumer");
    let (redis, port) = redis();
    let cfg = db_config(&dir.0, &redis, port);
    let small = vec![
        KeyOpFieldValues::set(
            r#"FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.0.0.0/24"}"#,
            [("action", "set_nexthop_id"), ("param/nexthop_id", "nh-1")],
        ),
        KeyOpFieldValues::del(r#"FIXED_NEXTHOP_TABLE:{"match/nexthop_id":"nh-0"}"#),
    ];
    let routes: Vec<KeyOpFieldValues> = (0..10_000u32)
        .map(|i| {
            KeyOpFieldValues::set(
                format!(
                    r#"FIXED_IPV4_TABLE:{{"match/ipv4_dst":"10.{}.{}.0/24"}}"#,
                    i >> 8,
                    i & 255
                ),
                [("action", "set_nexthop_id"), ("param/nexthop_id", "nh-1")],
            )
        })
        .collect();
    for (name, batch) in [("small", &small), ("10k", &routes)] {
        let ep = ZmqEndpoint::ipc(dir.0.join(format!("ep-{name}")));
        let peer = tokio::spawn(run_peer(
            prog.clone(),
            vec![
                "consumer".into(),
                ep.to_string(),
                "rep".into(),
                cfg.display().to_string(),
                batch.len().to_string(),
            ],
        ));
        let opts = ProducerOptions {
            reply_timeout: DEADLINE,
            ..Default::default()
        };
        let mut producer =
            ZmqProducer::connect(&ep, "APPL_DB", "P4RT_TABLE", opts).expect("connect");
        // Their server binds when the program starts: the request waits in libzmq's queue.
        let out = producer.send(batch).await.expect("per-key replies");
        assert!(out.all_ok(), "{name}: {:?}", out.failures().next());
        for e in batch.iter() {
            let r = &out.responses[&e.key];
            assert_eq!(r.status, StatusCode::Success, "{name} {}", e.key);
            assert_eq!(r.fields, e.fields, "{name} {}: fields echoed", e.key);
        }
        let text = peer.await.expect("join");
        let popped: usize = text
            .lines()
            .filter_map(|l| l.strip_prefix("MESSAGE\t"))
            .map(|n| n.parse::<usize>().expect("count"))
            .sum();
        assert_eq!(popped, batch.len(), "{name}: {text}");
        if batch.len() <= 10 {
            assert_eq!(&records(&text, "ENTRY"), batch, "{name}: read as sent");
        }
        drop(producer);
    }
}
