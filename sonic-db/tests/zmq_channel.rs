//! The ZMQ channel over real libzmq sockets (tcp on 127.0.0.1 and ipc in a temporary
//! directory): Weft's producer against Weft's server, raw libzmq sockets for what a producer
//! would never send, and a real redis-server for the rows written behind.

use weft_tests::redis as redis_server;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use weft_sonic_db::zmq::wire::{self, ZmqBatch};
use weft_sonic_db::zmq::{
    AsyncDbUpdater, MQ_RESPONSE_MAX_COUNT, ProducerOptions, ServerOptions, ZmqEndpoint, ZmqError,
    ZmqMode, ZmqProducer, ZmqRequest, ZmqServer,
};
use weft_sonic_db::{
    EntryResult, KeyOpFieldValues, Op, SonicDb, SonicDbError, SonicDbId, StatusCode,
};

/// Generous: the machine is shared with long builds.
const DEADLINE: Duration = Duration::from_secs(60);
const DB: &str = "APPL_DB";
const TABLE: &str = "P4RT_TABLE";

/// A temporary directory for ipc sockets, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "weft-zmq-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    fn ipc(&self) -> ZmqEndpoint {
        ZmqEndpoint::ipc(self.0.join("ep"))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where a test binds: tcp on a free loopback port, and ipc.
fn bind_points() -> Vec<(ZmqEndpoint, TempDir)> {
    let dir = TempDir::new();
    let ipc = dir.ipc();
    vec![
        (ZmqEndpoint::tcp("127.0.0.1", 0), TempDir::new()),
        (ipc, dir),
    ]
}

fn rep(mode: ZmqMode) -> ServerOptions {
    ServerOptions {
        mode,
        ..Default::default()
    }
    .serving(DB, TABLE)
}

fn req() -> ProducerOptions {
    ProducerOptions {
        reply_timeout: DEADLINE,
        ..Default::default()
    }
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no outcome within {DEADLINE:?}"))
}

/// What a served request held.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    table: String,
    term: Option<u64>,
    entries: Vec<KeyOpFieldValues>,
    coalesced: usize,
}

/// p4orch's answer: SET and DEL succeed, echoing the fields, except keys starting with
/// "bad", which fail.
fn p4orch_like(e: &KeyOpFieldValues) -> EntryResult {
    if e.key.starts_with("bad") {
        EntryResult::err(
            e.key.clone(),
            e.op,
            StatusCode::InvalidParam,
            format!("[OrchAgent] {} is bad", e.key),
            e.fields.clone(),
        )
    } else {
        EntryResult::ok(e.key.clone(), e.op, e.fields.clone())
    }
}

/// Serves until aborted, answering with `p4orch_like`; what it received (and refused) comes
/// out of the channels.
fn serve(
    mut server: ZmqServer,
) -> (
    JoinHandle<()>,
    mpsc::UnboundedReceiver<Seen>,
    mpsc::UnboundedReceiver<String>,
) {
    let (seen_tx, seen) = mpsc::unbounded_channel();
    let (err_tx, errors) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        while let Some(item) = server.next().await {
            match item {
                Ok(r) => {
                    let _ = seen_tx.send(Seen {
                        table: r.table.clone(),
                        term: r.term,
                        entries: r.entries.clone(),
                        coalesced: r.coalesced,
                    });
                    let results: Vec<EntryResult> = r.entries.iter().map(p4orch_like).collect();
                    r.reply(&results).expect("reply");
                }
                Err(e) => {
                    let _ = err_tx.send(e.to_string());
                }
            }
        }
    });
    (task, seen, errors)
}

fn routes(n: usize, fields: usize) -> Vec<KeyOpFieldValues> {
    (0..n)
        .map(|i| {
            let key = format!(
                "FIXED_IPV4_TABLE:{{\"match/ipv4_dst\":\"10.{}.{}.0/24\"}}",
                i >> 8,
                i & 0xff
            );
            if i % 7 == 3 {
                KeyOpFieldValues::del(key)
            } else {
                let mut f = vec![("action".to_string(), "set_nexthop_id".to_string())];
                f.extend((0..fields).map(|j| (format!("param/p{j}"), format!("v{i}-{j} ü"))));
                KeyOpFieldValues::set(key, f)
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sets_and_deletes_with_many_fields_round_trip_with_a_reply_per_key() {
    for (bind, _dir) in bind_points() {
        let server = ZmqServer::bind(&bind, rep(ZmqMode::RequestReply)).expect("bind");
        let at = server.endpoint().clone();
        let (task, mut seen, _) = serve(server);
        let mut producer = ZmqProducer::connect(&at, DB, TABLE, req()).expect("connect");
        let mut batch = routes(500, 40);
        batch.push(KeyOpFieldValues::set("bad:1", [("action", "x")]));
        batch.push(KeyOpFieldValues::del("bad:2"));
        let outcome = within("send", producer.send(&batch)).await.expect("send");

        let got = seen.recv().await.expect("a request");
        assert_eq!(got.table, TABLE);
        assert_eq!(
            got.entries, batch,
            "{at}: the server got every entry as sent, in order"
        );
        assert!(outcome.missing.is_empty(), "{at}: {:?}", outcome.missing);
        assert_eq!(outcome.responses.len(), batch.len());
        for e in &batch {
            let r = &outcome.responses[&e.key];
            if e.key.starts_with("bad") {
                assert_eq!(r.status, StatusCode::InvalidParam);
                assert_eq!(r.message, format!("[OrchAgent] {} is bad", e.key));
            } else {
                assert_eq!((r.status, r.message.as_str()), (StatusCode::Success, ""));
            }
            assert_eq!(r.fields, e.fields, "the reply echoes the entry's fields");
        }
        assert_eq!(producer.stats().messages, 1);
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_bigger_than_a_message_goes_as_several_and_every_key_is_answered() {
    let (bind, _dir) = bind_points().remove(1);
    let limit = 64 * 1024;
    let mut opts = rep(ZmqMode::RequestReply);
    opts.max_message = limit;
    let server = ZmqServer::bind(&bind, opts).expect("bind");
    let (task, mut seen, mut errors) = serve(server);
    let mut popts = req();
    popts.max_message = limit;
    let mut producer = ZmqProducer::connect(&bind, DB, TABLE, popts).expect("connect");
    let batch = routes(5_000, 3);
    let outcome = within("send", producer.send(&batch)).await.expect("send");
    assert!(outcome.all_ok(), "{:?}", outcome.missing);
    assert_eq!(outcome.responses.len(), batch.len());
    let messages = producer.stats().messages;
    assert!(messages > 1, "{messages} message(s)");
    let mut received = Vec::new();
    for _ in 0..messages {
        received.extend(seen.recv().await.expect("request").entries);
    }
    assert_eq!(
        received, batch,
        "the messages together are the batch, in order"
    );
    assert!(errors.try_recv().is_err(), "no message was refused");
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_writes_of_a_key_reach_the_server_as_the_last_one() {
    let (bind, _dir) = bind_points().remove(0);
    let server = ZmqServer::bind(&bind, rep(ZmqMode::RequestReply)).expect("bind");
    let at = server.endpoint().clone();
    let (task, mut seen, _) = serve(server);
    let mut producer = ZmqProducer::connect(&at, DB, TABLE, req()).expect("connect");
    let batch = vec![
        KeyOpFieldValues::del("default"),
        KeyOpFieldValues::set("nh", [("action", "a")]),
        KeyOpFieldValues::set("default", [("nexthop", "nh")]),
    ];
    let outcome = within("send", producer.send(&batch)).await.expect("send");
    let got = seen.recv().await.expect("request");
    assert_eq!(
        got.entries,
        batch[1..].to_vec(),
        "DEL then SET of one key: one SET"
    );
    assert_eq!(producer.stats().coalesced, 1);
    assert_eq!(outcome.responses.len(), 2, "one reply per key");

    // A producer that does not coalesce (swss-common's sends every write): the server does.
    let raw = raw_socket(zmq::REQ, &at);
    let msg = wire::encode(&ZmqBatch {
        db: DB.into(),
        table: TABLE.into(),
        term: None,
        entries: batch.clone(),
    });
    raw.send(msg, 0).expect("send");
    let got = seen.recv().await.expect("request");
    assert_eq!(got.entries, batch[1..].to_vec());
    assert_eq!(got.coalesced, 1);
    let reply = within("reply", raw_recv(raw)).await;
    let replies = wire::decode_reply(&reply, DB, TABLE).expect("reply");
    assert_eq!(replies.len(), 2);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_producer_sends_its_term_and_the_server_takes_it_out_of_the_entries() {
    let (bind, _dir) = bind_points().remove(1);
    let server = ZmqServer::bind(&bind, rep(ZmqMode::RequestReply)).expect("bind");
    let (task, mut seen, _) = serve(server);
    let mut producer = ZmqProducer::connect(&bind, DB, TABLE, req()).expect("connect");
    producer.set_fence(Some(9));
    let batch = vec![KeyOpFieldValues::del("k")];
    let outcome = within("send", producer.send(&batch)).await.expect("send");
    let got = seen.recv().await.expect("request");
    assert_eq!((got.term, got.entries), (Some(9), batch));
    assert_eq!(outcome.responses.len(), 1);
    task.abort();
}

/// A raw libzmq socket connected to `at`, for what Weft's producer never sends.
fn raw_socket(kind: zmq::SocketType, at: &ZmqEndpoint) -> zmq::Socket {
    let ctx = zmq::Context::new();
    let s = ctx.socket(kind).expect("socket");
    s.set_linger(0).expect("linger");
    s.connect(&at.to_string()).expect("connect");
    s
}

async fn raw_recv(s: zmq::Socket) -> Vec<u8> {
    tokio::task::spawn_blocking(move || s.recv_bytes(0).expect("recv"))
        .await
        .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_truncated_messages_are_refused_with_a_reason_and_the_server_goes_on() {
    for (bind, _dir) in bind_points() {
        let server = ZmqServer::bind(&bind, rep(ZmqMode::RequestReply)).expect("bind");
        let at = server.endpoint().clone();
        let (task, mut seen, mut errors) = serve(server);
        let good = wire::encode(&ZmqBatch {
            db: DB.into(),
            table: TABLE.into(),
            term: None,
            entries: vec![KeyOpFieldValues::set("k", [("f", "v")])],
        });
        let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
            (
                vec![b"hello".to_vec()],
                "shorter than its 8-byte pair count",
            ),
            (vec![good[..good.len() - 3].to_vec()], "truncated"),
            (
                vec![[good.clone(), vec![7]].concat()],
                "1 bytes after the last",
            ),
            (vec![good.clone(), good.clone()], "2 frames"),
            (vec![vec![0xff; 64]], "cannot hold more than"),
        ];
        for (frames, why) in cases {
            let raw = raw_socket(zmq::REQ, &at);
            raw.send_multipart(frames, 0).expect("send");
            let reply = within("refusal", raw_recv(raw)).await;
            match wire::decode_reply(&reply, DB, TABLE) {
                Err(ZmqError::Refused { status, message }) => {
                    assert_eq!(status, StatusCode::InvalidParam);
                    assert!(message.contains(why), "{at}: {message}");
                    assert!(message.contains("nothing applied"), "{message}");
                }
                other => panic!("{at}: {why}: {other:?}"),
            }
            let err = within("error", errors.recv()).await.expect("error");
            assert!(err.contains(why), "{err}");
        }
        assert!(
            seen.try_recv().is_err(),
            "nothing malformed reached the consumer"
        );
        // Still serving.
        let mut producer = ZmqProducer::connect(&at, DB, TABLE, req()).expect("connect");
        let outcome = within("send", producer.send(&[KeyOpFieldValues::del("after")]))
            .await
            .expect("send");
        assert!(outcome.all_ok());
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_for_a_table_not_served_gets_invalid_param_per_key() {
    let (bind, _dir) = bind_points().remove(1);
    let server = ZmqServer::bind(&bind, rep(ZmqMode::RequestReply)).expect("bind");
    let (task, mut seen, mut errors) = serve(server);
    let mut other = ZmqProducer::connect(&bind, DB, "ROUTE_TABLE", req()).expect("connect");
    let outcome = within(
        "send",
        other.send(&[KeyOpFieldValues::del("r1"), KeyOpFieldValues::del("r2")]),
    )
    .await
    .expect("send");
    assert_eq!(outcome.responses.len(), 2);
    for r in outcome.responses.values() {
        assert_eq!(r.status, StatusCode::InvalidParam);
        assert!(
            r.message.contains("no handler for table ROUTE_TABLE"),
            "{}",
            r.message
        );
    }
    let err = within("error", errors.recv()).await.expect("error");
    assert!(err.contains("ROUTE_TABLE"), "{err}");
    assert!(seen.try_recv().is_err());
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_over_the_size_limit_are_refused_whole_at_either_end() {
    let (bind, _dir) = bind_points().remove(1);
    let server = ZmqServer::bind(&bind, rep(ZmqMode::RequestReply)).expect("bind");
    let (task, mut seen, mut errors) = serve(server);

    // The producer: an entry that cannot fit in a message refuses the whole batch, before
    // anything is sent.
    let mut producer = ZmqProducer::connect(&bind, DB, TABLE, req()).expect("connect");
    let mut batch = routes(100, 2);
    batch.insert(
        50,
        KeyOpFieldValues::set("huge", [("blob", "x".repeat(MQ_RESPONSE_MAX_COUNT))]),
    );
    let err = within("send", producer.send(&batch))
        .await
        .expect_err("too large");
    assert!(matches!(err.error, ZmqError::EntryTooLarge { .. }), "{err}");
    assert!(err.to_string().contains("entry \"huge\" is"), "{err}");
    assert!(err.partial.responses.is_empty());
    assert_eq!(err.partial.missing.len(), batch.len());
    assert_eq!(
        err.unsent.len(),
        batch.len(),
        "every key certainly not applied"
    );
    assert_eq!(producer.stats().messages, 0, "nothing was sent");

    // The server: a message of MQ_RESPONSE_MAX_COUNT bytes or more (what swss-common's ends
    // cannot take) is refused with a reason.
    let big = wire::encode(&ZmqBatch {
        db: DB.into(),
        table: TABLE.into(),
        term: None,
        entries: vec![KeyOpFieldValues::set(
            "big",
            [("blob", "y".repeat(MQ_RESPONSE_MAX_COUNT))],
        )],
    });
    let raw = raw_socket(zmq::REQ, &bind);
    raw.send(big, 0).expect("send");
    match wire::decode_reply(&within("refusal", raw_recv(raw)).await, DB, TABLE) {
        Err(ZmqError::Refused { message, .. }) => {
            assert!(
                message.contains("over the limit of 16777216 bytes"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(within("error", errors.recv()).await.is_some());
    assert!(seen.try_recv().is_err(), "nothing half-applied");
    let outcome = within("send", producer.send(&batch[..10]))
        .await
        .expect("send");
    assert!(outcome.all_ok());
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_at_the_high_water_mark_waits_then_reports_full_and_loses_nothing() {
    for (bind, _dir) in bind_points() {
        // A fixed endpoint to push to before anything serves it.
        let at = match &bind {
            ZmqEndpoint::Tcp { .. } => {
                let probe = ZmqServer::bind(&bind, rep(ZmqMode::PushPull)).expect("probe");
                let at = probe.endpoint().clone();
                probe.shutdown().await;
                at
            }
            ZmqEndpoint::Ipc { .. } => bind.clone(),
        };
        let opts = ProducerOptions {
            sndhwm: 4,
            full_wait: Duration::from_millis(300),
            ..ProducerOptions::push_pull()
        };
        let mut producer = ZmqProducer::connect(&at, DB, TABLE, opts).expect("connect");
        let mut sent = Vec::new();
        let refused = loop {
            let key = format!("k{}", sent.len());
            match within("push", producer.send(&[KeyOpFieldValues::del(key.clone())])).await {
                Ok(_) => sent.push(key),
                Err(e) => break (key, e),
            }
            assert!(sent.len() <= 100, "{at}: the queue never filled");
        };
        assert!(
            matches!(refused.1.error, ZmqError::Full { hwm: 4, .. }),
            "{}",
            refused.1
        );
        assert!(!sent.is_empty());
        assert_eq!(refused.1.partial.missing.len(), 1);
        assert!(
            refused.1.unsent.contains(&refused.0),
            "a full queue took nothing"
        );

        let server = ZmqServer::bind(&at, rep(ZmqMode::PushPull)).expect("bind");
        let (task, mut seen, _) = serve(server);
        let mut got = Vec::new();
        while got.len() < sent.len() {
            let s = within("pushed", seen.recv()).await.expect("batch");
            got.extend(s.entries.into_iter().map(|e| e.key));
        }
        assert_eq!(got, sent, "{at}: every accepted push arrives, in order");
        // The refused one was not sent: it arrives only when sent again.
        within(
            "push",
            producer.send(&[KeyOpFieldValues::del(refused.0.clone())]),
        )
        .await
        .expect("push");
        let s = within("pushed", seen.recv()).await.expect("batch");
        assert_eq!(s.entries, vec![KeyOpFieldValues::del(refused.0)]);
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_nobody_answers_times_out_as_outcome_unknown_and_is_never_delivered_late() {
    let dir = TempDir::new();
    let at = dir.ipc();
    let opts = ProducerOptions {
        reply_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let mut producer = ZmqProducer::connect(&at, DB, TABLE, opts).expect("connect");
    let err = within("send", producer.send(&[KeyOpFieldValues::del("early")]))
        .await
        .expect_err("no server");
    assert!(matches!(err.error, ZmqError::ReplyTimeout { .. }), "{err}");
    assert!(err.error.outcome_unknown());

    let server = ZmqServer::bind(&at, rep(ZmqMode::RequestReply)).expect("bind");
    let (task, mut seen, _) = serve(server);
    let outcome = within("send", producer.send(&[KeyOpFieldValues::del("late")]))
        .await
        .expect("the rebuilt socket sends again");
    assert!(outcome.all_ok());
    let s = within("request", seen.recv()).await.expect("request");
    assert_eq!(
        s.entries,
        vec![KeyOpFieldValues::del("late")],
        "the timed-out request was dropped"
    );
    task.abort();
}

/// Binds again where `server` was, once it is gone.
async fn restart(server: ZmqServer, mode: ZmqMode) -> ZmqServer {
    let at = server.endpoint().clone();
    server.shutdown().await;
    if let Some(path) = at.ipc_path() {
        assert!(!path.exists(), "the ipc socket file goes with the server");
    }
    ZmqServer::bind(&at, rep(mode)).expect("rebind")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_gone_mid_request_is_reported_at_once_and_a_restarted_one_is_reached_again() {
    for (bind, _dir) in bind_points() {
        let mut server = ZmqServer::bind(&bind, rep(ZmqMode::RequestReply)).expect("bind");
        let at = server.endpoint().clone();
        // A reply timeout far beyond the test's deadline: only the disconnect can end the wait.
        let opts = ProducerOptions {
            reply_timeout: Duration::from_secs(3600),
            ..Default::default()
        };
        let mut producer = ZmqProducer::connect(&at, DB, TABLE, opts).expect("connect");
        let sending = tokio::spawn(async move {
            let r = producer.send(&[KeyOpFieldValues::del("mid")]).await;
            (producer, r)
        });
        let request = within("request", server.next())
            .await
            .expect("open")
            .expect("request");
        assert_eq!(request.entries.len(), 1);
        // Stop without answering, as a process killed mid-batch would.
        let server = restart(server, ZmqMode::RequestReply).await;
        drop(request);
        let (mut producer, result) = within("send", sending).await.expect("join");
        let err = result.expect_err("no reply");
        assert!(
            matches!(err.error, ZmqError::PeerDisconnected { .. }),
            "{at}: {err}"
        );
        assert!(err.error.outcome_unknown());
        assert_eq!(err.partial.missing.len(), 1);
        assert!(
            err.unsent.is_empty(),
            "the request left: its outcome is unknown"
        );

        let (task, mut seen, _) = serve(server);
        let outcome = within("send", producer.send(&[KeyOpFieldValues::del("after")]))
            .await
            .expect("reconnected");
        assert!(outcome.all_ok(), "{at}");
        let s = within("request", seen.recv()).await.expect("request");
        assert_eq!(s.entries, vec![KeyOpFieldValues::del("after")]);
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dropped_unanswered_gets_unknown_for_every_key() {
    let (bind, _dir) = bind_points().remove(1);
    let mut server = ZmqServer::bind(&bind, rep(ZmqMode::RequestReply)).expect("bind");
    let mut producer = ZmqProducer::connect(&bind, DB, TABLE, req()).expect("connect");
    let sending = tokio::spawn(async move {
        producer
            .send(&[KeyOpFieldValues::del("a"), KeyOpFieldValues::del("b")])
            .await
    });
    let request: ZmqRequest = within("request", server.next())
        .await
        .expect("open")
        .expect("request");
    drop(request);
    let outcome = within("send", sending)
        .await
        .expect("join")
        .expect("a reply");
    assert_eq!(outcome.responses.len(), 2);
    for r in outcome.responses.values() {
        assert_eq!(r.status, StatusCode::Unknown, "{r:?}");
        assert!(r.message.contains("no verdict"));
    }
}

fn redis() -> (redis_server::RedisServer, SonicDb) {
    let srv = redis_server::RedisServer::start().expect("redis-server");
    let db = SonicDb::from_endpoint(&srv.url()).expect("endpoint");
    (srv, db)
}

async fn row(db: &SonicDb, key: &str) -> Vec<(String, String)> {
    let mut c = db.connect(SonicDbId::ApplDb).await.expect("connect");
    let mut fields: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(format!("{TABLE}:{key}"))
        .query_async(c.raw())
        .await
        .expect("HGETALL");
    fields.sort();
    fields
}

async fn cli(db: &SonicDb, args: &[&str]) {
    let mut c = db.connect(SonicDbId::ApplDb).await.expect("connect");
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async::<()>(c.raw()).await.expect("command");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_are_written_behind_as_swss_async_db_updater_writes_them() {
    let (_srv, db) = redis();
    cli(
        &db,
        &["HSET", "P4RT_TABLE:r1", "stale", "1", "action", "old"],
    )
    .await;
    cli(&db, &["HSET", "P4RT_TABLE:r2", "action", "x"]).await;
    let (bind, _dir) = bind_points().remove(1);
    let server = ZmqServer::bind(&bind, rep(ZmqMode::RequestReply)).expect("bind");
    let (task, _seen, _) = serve(server);
    let mut producer = ZmqProducer::connect(&bind, DB, TABLE, req()).expect("connect");
    let updater = AsyncDbUpdater::start(&db, SonicDbId::ApplDb, TABLE)
        .await
        .expect("updater");
    producer.persist_with(updater.clone());
    let batch = vec![
        KeyOpFieldValues::set("r1", [("action", "new"), ("param/a", "1")]),
        KeyOpFieldValues::del("r2"),
        KeyOpFieldValues::set("r3", [("action", "y")]),
    ];
    within("send", producer.send(&batch)).await.expect("send");
    within("flush", updater.flush()).await.expect("written");
    assert_eq!(updater.queue_size(), 0);
    assert_eq!(
        row(&db, "r1").await,
        vec![
            ("action".into(), "new".into()),
            ("param/a".into(), "1".into())
        ],
        "a SET replaces the row: the stale field is gone"
    );
    assert!(row(&db, "r2").await.is_empty(), "a DEL deletes the row");
    assert_eq!(row(&db, "r3").await, vec![("action".into(), "y".into())]);
    task.abort();

    // Fenced: a newer leader's term in the DB refuses the rows whole.
    cli(&db, &["SET", "WEFT_LEADER_TERM", "7"]).await;
    updater.set_fence(Some(5));
    updater.update(vec![KeyOpFieldValues::del("r1")]);
    match within("flush", updater.flush()).await {
        Err(SonicDbError::Fenced { term: 5, held: 7 }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(row(&db, "r1").await.len(), 2, "nothing written");
    assert_eq!(updater.dropped(), 1);
    updater.set_fence(Some(7));
    updater.update(vec![KeyOpFieldValues::del("r1")]);
    within("flush", updater.flush()).await.expect("written");
    assert!(row(&db, "r1").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_can_write_what_it_accepts_behind_it_too() {
    let (_srv, db) = redis();
    let updater = AsyncDbUpdater::start(&db, SonicDbId::ApplDb, TABLE)
        .await
        .expect("updater");
    let (bind, _dir) = bind_points().remove(1);
    let mut opts = rep(ZmqMode::PushPull);
    opts.persist = Some(updater.clone());
    let server = ZmqServer::bind(&bind, opts).expect("bind");
    let (task, mut seen, _) = serve(server);
    let mut producer =
        ZmqProducer::connect(&bind, DB, TABLE, ProducerOptions::push_pull()).expect("connect");
    let batch: Vec<KeyOpFieldValues> = routes(300, 2);
    within("push", producer.send(&batch)).await.expect("push");
    let mut n = 0;
    while n < batch.len() {
        n += within("pushed", seen.recv())
            .await
            .expect("batch")
            .entries
            .len();
    }
    within("flush", updater.flush()).await.expect("written");
    for e in &batch {
        let got = row(&db, &e.key).await;
        match e.op {
            Op::Del => assert!(got.is_empty()),
            Op::Set => {
                let mut want = e.fields.clone();
                want.sort();
                assert_eq!(got, want);
            }
        }
    }
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_where_it_cannot_says_why() {
    let dir = TempDir::new();
    let missing = ZmqEndpoint::ipc(dir.0.join("no-such-dir/ep"));
    let err = ZmqServer::bind(&missing, rep(ZmqMode::RequestReply))
        .err()
        .expect("no directory");
    assert!(
        err.to_string()
            .contains("directory of the ipc socket does not exist"),
        "{err}"
    );

    let first = ZmqServer::bind(
        &ZmqEndpoint::tcp("127.0.0.1", 0),
        rep(ZmqMode::RequestReply),
    )
    .expect("bind");
    let err = ZmqServer::bind(first.endpoint(), rep(ZmqMode::RequestReply))
        .err()
        .expect("in use");
    assert!(
        err.to_string()
            .contains("another process serves this endpoint"),
        "{err}"
    );
    first.shutdown().await;
}
