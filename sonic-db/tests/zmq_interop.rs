//! Weft's ZMQ ends against independent implementations, both ways: the native Rust ZMTP stack
//! (the `zeromq` crate, no libzmq at all) and pyzmq (its own libzmq build, in another
//! process). The swss-common framing on the other side is written here (Rust) and in the
//! Python script below from common/binaryserializer.h, not taken from `weft_sonic_db`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use weft_sonic_db::zmq::{
    ProducerOptions, ServerOptions, ZmqEndpoint, ZmqError, ZmqMode, ZmqProducer, ZmqServer,
};
use weft_sonic_db::{EntryResult, KeyOpFieldValues, Op, StatusCode};
use zeromq::{Socket, SocketRecv, SocketSend};

const DEADLINE: Duration = Duration::from_secs(60);

/// swss-common's BinarySerializer, independently: a u64 pair count, then (u64 length, bytes)
/// strings in pairs: (db, table), then per entry (key, field count) and the fields.
mod swss {
    pub type Entry = (String, Vec<(String, String)>);

    pub fn serialize(db: &str, table: &str, entries: &[Entry]) -> Vec<u8> {
        let mut strings: Vec<String> = vec![db.into(), table.into()];
        for (key, fields) in entries {
            strings.push(key.clone());
            strings.push(fields.len().to_string());
            for (f, v) in fields {
                strings.push(f.clone());
                strings.push(v.clone());
            }
        }
        let mut out = ((strings.len() / 2) as u64).to_le_bytes().to_vec();
        for s in strings {
            out.extend((s.len() as u64).to_le_bytes());
            out.extend(s.into_bytes());
        }
        out
    }

    pub fn deserialize(buf: &[u8]) -> (String, String, Vec<Entry>) {
        let u64_at = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
        let pairs = u64_at(0) as usize;
        let mut at = 8;
        let mut strings = Vec::new();
        for _ in 0..pairs * 2 {
            let len = u64_at(at) as usize;
            strings.push(String::from_utf8(buf[at + 8..at + 8 + len].to_vec()).expect("utf-8"));
            at += 8 + len;
        }
        assert_eq!(at, buf.len(), "the message ends with its last pair");
        let mut it = strings.into_iter();
        let (db, table) = (it.next().expect("db"), it.next().expect("table"));
        let mut entries = Vec::new();
        while let (Some(key), Some(n)) = (it.next(), it.next()) {
            let n: usize = n.parse().expect("count");
            let fields = (0..n)
                .map(|_| (it.next().expect("field"), it.next().expect("value")))
                .collect();
            entries.push((key, fields));
        }
        (db, table, entries)
    }
}

fn kfv(e: &swss::Entry) -> KeyOpFieldValues {
    KeyOpFieldValues {
        key: e.0.clone(),
        op: if e.1.is_empty() { Op::Del } else { Op::Set },
        fields: e.1.clone(),
    }
}

fn sample() -> Vec<swss::Entry> {
    vec![
        (
            "FIXED_IPV4_TABLE:{\"match/ipv4_dst\":\"10.0.0.0/24\"}".into(),
            vec![
                ("action".into(), "set_nexthop_id".into()),
                ("param/nexthop_id".into(), "nh-1".into()),
            ],
        ),
        (
            "FIXED_NEXTHOP_TABLE:{\"match/nexthop_id\":\"nh-0\"}".into(),
            vec![],
        ),
    ]
}

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "weft-zmqi-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// tcp on a free loopback port (the port known once bound) and ipc.
fn bind_points(dir: &TempDir) -> [ZmqEndpoint; 2] {
    [
        ZmqEndpoint::tcp("127.0.0.1", 0),
        ZmqEndpoint::ipc(dir.0.join("ep")),
    ]
}

/// How the native stack writes "any port": 0, not libzmq's `*`.
fn native(e: &ZmqEndpoint) -> String {
    e.to_string().replace(":*", ":0")
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no outcome within {DEADLINE:?}"))
}

/// Weft's server answering like p4orch: success for a SET, NOT_FOUND for a DEL.
fn answer(e: &KeyOpFieldValues) -> EntryResult {
    match e.op {
        Op::Set => EntryResult::ok(e.key.clone(), e.op, e.fields.clone()),
        Op::Del => EntryResult::err(
            e.key.clone(),
            e.op,
            StatusCode::NotFound,
            "[OrchAgent] no such entry",
            vec![],
        ),
    }
}

/// Serves one batch with [`answer`] and returns it.
async fn serve_one(server: &mut ZmqServer) -> Vec<KeyOpFieldValues> {
    let r = within("request", server.next())
        .await
        .expect("open")
        .expect("request");
    let entries = r.entries.clone();
    let results: Vec<EntryResult> = entries.iter().map(answer).collect();
    r.reply(&results).expect("reply");
    entries
}

fn check_reply(bytes: &[u8]) {
    let (db, table, replies) = swss::deserialize(bytes);
    assert_eq!((db.as_str(), table.as_str()), ("APPL_DB", "P4RT_TABLE"));
    let want: Vec<swss::Entry> = vec![
        (
            sample()[0].0.clone(),
            [
                vec![("SWSS_RC_SUCCESS".into(), String::new())],
                sample()[0].1.clone(),
            ]
            .concat(),
        ),
        (
            sample()[1].0.clone(),
            vec![(
                "SWSS_RC_NOT_FOUND".into(),
                "[OrchAgent] no such entry".into(),
            )],
        ),
    ];
    assert_eq!(
        replies, want,
        "per key: (status, message), then the entry's fields"
    );
}

fn rep_server(at: &ZmqEndpoint, mode: ZmqMode) -> ZmqServer {
    let opts = ServerOptions {
        mode,
        ..Default::default()
    };
    ZmqServer::bind(at, opts.serving("APPL_DB", "P4RT_TABLE")).expect("bind")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_rust_req_client_gets_per_key_replies_from_weft_server() {
    let dir = TempDir::new();
    for bind in bind_points(&dir) {
        let mut server = rep_server(&bind, ZmqMode::RequestReply);
        let at = server.endpoint().to_string();
        let mut client = zeromq::ReqSocket::new();
        within("connect", client.connect(&at))
            .await
            .expect("connect");
        let msg = swss::serialize("APPL_DB", "P4RT_TABLE", &sample());
        within("send", client.send(msg.into())).await.expect("send");
        let got = serve_one(&mut server).await;
        assert_eq!(got, sample().iter().map(kfv).collect::<Vec<_>>(), "{at}");
        let reply = within("reply", client.recv()).await.expect("reply");
        assert_eq!(reply.len(), 1, "one frame");
        check_reply(reply.get(0).expect("frame"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weft_producer_gets_per_key_replies_from_a_native_rust_rep_server() {
    let dir = TempDir::new();
    for bind in bind_points(&dir) {
        let mut rep = zeromq::RepSocket::new();
        let at = within("bind", rep.bind(&native(&bind)))
            .await
            .expect("bind");
        let at: ZmqEndpoint = at.to_string().parse().expect("endpoint");
        let serving = tokio::spawn(async move {
            let req = rep.recv().await.expect("request");
            let (db, table, entries) = swss::deserialize(req.get(0).expect("frame"));
            let replies: Vec<swss::Entry> = entries
                .iter()
                .map(|(k, f)| {
                    let status = if f.is_empty() {
                        "SWSS_RC_NOT_FOUND"
                    } else {
                        "SWSS_RC_SUCCESS"
                    };
                    let mut fields = vec![(status.to_string(), format!("for {k}"))];
                    fields.extend(f.iter().cloned());
                    (k.clone(), fields)
                })
                .collect();
            rep.send(swss::serialize(&db, &table, &replies).into())
                .await
                .expect("reply");
            (db, table, entries)
        });
        let opts = ProducerOptions {
            reply_timeout: DEADLINE,
            ..Default::default()
        };
        let mut producer =
            ZmqProducer::connect(&at, "APPL_DB", "P4RT_TABLE", opts).expect("connect");
        let batch: Vec<KeyOpFieldValues> = sample().iter().map(kfv).collect();
        let outcome = within("send", producer.send(&batch)).await.expect("send");
        let (db, table, entries) = within("served", serving).await.expect("join");
        assert_eq!((db.as_str(), table.as_str()), ("APPL_DB", "P4RT_TABLE"));
        assert_eq!(
            entries,
            sample(),
            "{at}: the native peer reads Weft's framing"
        );
        let set = &outcome.responses[&batch[0].key];
        assert_eq!(set.status, StatusCode::Success);
        assert_eq!(set.message, format!("for {}", batch[0].key));
        assert_eq!(set.fields, batch[0].fields);
        assert_eq!(
            outcome.responses[&batch[1].key].status,
            StatusCode::NotFound
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_cross_between_weft_and_a_native_rust_peer_both_ways() {
    let dir = TempDir::new();
    for bind in bind_points(&dir) {
        // native PUSH → Weft PULL
        let mut server = rep_server(&bind, ZmqMode::PushPull);
        let at = server.endpoint().to_string();
        let mut push = zeromq::PushSocket::new();
        within("connect", push.connect(&at)).await.expect("connect");
        for e in sample() {
            let msg = swss::serialize("APPL_DB", "P4RT_TABLE", std::slice::from_ref(&e));
            within("push", push.send(msg.into())).await.expect("push");
        }
        let mut got = Vec::new();
        while got.len() < 2 {
            let r = within("batch", server.next())
                .await
                .expect("open")
                .expect("batch");
            assert!(!r.expects_reply());
            got.extend(r.entries);
        }
        assert_eq!(got, sample().iter().map(kfv).collect::<Vec<_>>(), "{at}");
        server.shutdown().await;

        // Weft PUSH → native PULL
        let mut pull = zeromq::PullSocket::new();
        let at = within("bind", pull.bind(&native(&bind)))
            .await
            .expect("bind");
        let at: ZmqEndpoint = at.to_string().parse().expect("endpoint");
        let mut producer =
            ZmqProducer::connect(&at, "APPL_DB", "P4RT_TABLE", ProducerOptions::push_pull())
                .expect("connect");
        let batch: Vec<KeyOpFieldValues> = sample().iter().map(kfv).collect();
        within("push", producer.send(&batch)).await.expect("push");
        let msg = within("pull", pull.recv()).await.expect("pull");
        let (db, table, entries) = swss::deserialize(msg.get(0).expect("frame"));
        assert_eq!(
            (db.as_str(), table.as_str(), entries),
            ("APPL_DB", "P4RT_TABLE", sample())
        );
    }
}

/// The same framing in Python, and the peers the tests below run as separate processes.
const PY_PEER: &str = r#"
import json, os, struct, sys, zmq

def serialize(db, table, entries):
    strings = [db, table]
    for key, fields in entries:
        strings += [key, str(len(fields))]
        for f, v in fields:
            strings += [f, v]
    out = struct.pack('<Q', len(strings) // 2)
    for s in strings:
        b = s.encode()
        out += struct.pack('<Q', len(b)) + b
    return out

def deserialize(buf):
    (pairs,), at, strings = struct.unpack_from('<Q', buf, 0), 8, []
    for _ in range(2 * pairs):
        (n,) = struct.unpack_from('<Q', buf, at)
        strings.append(buf[at + 8:at + 8 + n].decode())
        at += 8 + n
    assert at == len(buf)
    db, table, rest, entries = strings[0], strings[1], strings[2:], []
    while rest:
        key, n, rest = rest[0], int(rest[1]), rest[2:]
        entries.append([key, [list(p) for p in zip(rest[0:2 * n:2], rest[1:2 * n:2])]])
        rest = rest[2 * n:]
    return db, table, entries

role, endpoint = sys.argv[1], sys.argv[2]
ctx = zmq.Context()
if role == 'req':
    s = ctx.socket(zmq.REQ)
    s.connect(endpoint)
    s.send(serialize('APPL_DB', 'P4RT_TABLE', json.loads(sys.argv[3])))
    print(json.dumps(deserialize(s.recv())))
else:
    s = ctx.socket(zmq.REP)
    s.bind(endpoint)
    db, table, entries = deserialize(s.recv())
    print(json.dumps([db, table, entries]), flush=True)
    if role == 'rep-then-die':
        os._exit(0)
    replies = [[k, [['SWSS_RC_SUCCESS' if f else 'SWSS_RC_NOT_FOUND', 'py ' + k]] + f]
               for k, f in entries]
    s.send(serialize(db, table, replies))
"#;

/// A Python peer, killed (by PID) if the test ends first.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Peer {
    /// Its stdout, once it has exited.
    async fn output(mut self) -> String {
        let mut out = self.0.stdout.take().expect("stdout");
        let text = tokio::task::spawn_blocking(move || {
            let mut s = String::new();
            out.read_to_string(&mut s).map(|_| s)
        });
        let text = within("peer output", text)
            .await
            .expect("join")
            .expect("read");
        let status = self.0.wait().expect("wait");
        assert!(status.success(), "peer failed: {status}; stdout {text}");
        text
    }
}

fn python() -> Option<PathBuf> {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    if !py.exists() {
        println!("SKIPPED: no .venv (scripts/setup.sh makes it, with pyzmq)");
        return None;
    }
    let ok = Command::new(&py)
        .args(["-c", "import zmq"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        ".venv has no pyzmq: run scripts/setup.sh (requirements.txt lists it)"
    );
    Some(py)
}

fn peer(py: &Path, args: &[&str]) -> Peer {
    let child = Command::new(py)
        .arg("-c")
        .arg(PY_PEER)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python");
    Peer(child)
}

type PyEntry = (String, Vec<(String, String)>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyzmq_in_another_process_and_weft_read_each_others_requests_and_replies() {
    let Some(py) = python() else { return };
    let dir = TempDir::new();
    for bind in bind_points(&dir) {
        // pyzmq REQ → Weft REP
        let mut server = rep_server(&bind, ZmqMode::RequestReply);
        let at = server.endpoint().to_string();
        let arg = serde_json::to_string(&sample()).expect("json");
        let client = peer(&py, &["req", &at, &arg]);
        let got = serve_one(&mut server).await;
        assert_eq!(got, sample().iter().map(kfv).collect::<Vec<_>>(), "{at}");
        let out = client.output().await;
        let (db, table, replies): (String, String, Vec<PyEntry>) =
            serde_json::from_str(out.trim()).expect("reply json");
        check_reply(&swss::serialize(&db, &table, &replies));
        server.shutdown().await;

        // Weft REQ → pyzmq REP
        let at = match &bind {
            ZmqEndpoint::Tcp { .. } => free_tcp().await,
            ZmqEndpoint::Ipc { .. } => bind.clone(),
        };
        let answering = peer(&py, &["rep", &at.to_string()]);
        let opts = ProducerOptions {
            reply_timeout: Duration::from_secs(3600),
            ..Default::default()
        };
        let mut producer =
            ZmqProducer::connect(&at, "APPL_DB", "P4RT_TABLE", opts.clone()).expect("connect");
        let batch: Vec<KeyOpFieldValues> = sample().iter().map(kfv).collect();
        let outcome = within("send", producer.send(&batch)).await.expect("send");
        let set = &outcome.responses[&batch[0].key];
        assert_eq!(
            (set.status, set.message.clone()),
            (StatusCode::Success, format!("py {}", batch[0].key))
        );
        assert_eq!(set.fields, batch[0].fields);
        assert_eq!(
            outcome.responses[&batch[1].key].status,
            StatusCode::NotFound
        );
        let out = answering.output().await;
        let (_, _, entries): (String, String, Vec<PyEntry>) =
            serde_json::from_str(out.trim()).expect("request json");
        assert_eq!(entries, sample(), "{at}: pyzmq read Weft's request");
        drop(producer);

        // Weft REQ → pyzmq REP that dies after reading: reported at once, outcome unknown.
        let at = match &bind {
            ZmqEndpoint::Tcp { .. } => free_tcp().await,
            ZmqEndpoint::Ipc { .. } => bind.clone(),
        };
        let dying = peer(&py, &["rep-then-die", &at.to_string()]);
        let mut producer =
            ZmqProducer::connect(&at, "APPL_DB", "P4RT_TABLE", opts).expect("connect");
        let err = within("send", producer.send(&batch))
            .await
            .expect_err("no reply");
        assert!(
            matches!(err.error, ZmqError::PeerDisconnected { .. }),
            "{at}: {err}"
        );
        let out = dying.output().await;
        let (_, _, entries): (String, String, Vec<PyEntry>) =
            serde_json::from_str(out.trim()).expect("request json");
        assert_eq!(entries, sample(), "{at}: pyzmq read Weft's request");
    }
}

/// A loopback tcp endpoint nothing listens on now.
async fn free_tcp() -> ZmqEndpoint {
    let probe = rep_server(&ZmqEndpoint::tcp("127.0.0.1", 0), ZmqMode::RequestReply);
    let at = probe.endpoint().clone();
    probe.shutdown().await;
    at
}
