//! Benchmark: P4RT_TABLE routes (FIXED_IPV4_TABLE, action + 2 params) from a producer to a
//! consumer that answers every key, over the ZMQ channel and over the Redis path, in one run.
//!
//! * ZMQ request/reply (ipc and tcp on 127.0.0.1): `ZmqProducer::send` → `ZmqServer` → a
//!   consumer answering SUCCESS per key with the entry's fields (what p4orch sends) → every
//!   key's status back at the producer. Again with the rows written behind into APPL_DB
//!   (`AsyncDbUpdater`): the replies, and the time until APPL_DB holds every row.
//! * ZMQ push/pull (ipc): until the consumer holds every entry (no replies in this mode).
//! * Redis: `ProducerStateTable::apply` alone (what benches/producer.rs measures), and the
//!   whole answered path: apply → `ConsumerStateTable` pops → `ResponsePublisher` (APPL_STATE_DB
//!   + notifications) → `ResponseWaiter` has every key's status.
//!
//! Run: `cargo bench -j2 -p weft-sonic-db --bench zmq` (env WEFT_BENCH_ROUTES="10000,100000",
//! WEFT_BENCH_ROUNDS=5).

use weft_tests::redis as redis_server;

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use weft_sonic_db::zmq::wire::{self, ZmqBatch};
use weft_sonic_db::zmq::{
    AsyncDbUpdater, ProducerOptions, ServerOptions, ZmqEndpoint, ZmqMode, ZmqProducer, ZmqServer,
};
use weft_sonic_db::{
    ConsumerStateTable, EntryResult, KeyOpFieldValues, MAX_POP_PER_SCRIPT, P4rtAction, P4rtEntry,
    P4rtKey, ProducerStateTable, ResponsePublisher, ResponseWaiter, SonicDb, SonicDbId,
};

const TABLE: &str = "P4RT_TABLE";
const DEADLINE: Duration = Duration::from_secs(300);

fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| default.to_vec())
}

fn routes(n: usize) -> Vec<KeyOpFieldValues> {
    (0..n)
        .map(|i| {
            let key = P4rtKey::new("FIXED_IPV4_TABLE")
                .with_match(
                    "ipv4_dst",
                    format!("10.{}.{}.0/24", (i >> 8) & 0xff, i & 0xff),
                )
                .with_match("vrf_id", format!("vrf-{}", i >> 16));
            P4rtEntry::new(
                key,
                P4rtAction::new("set_nexthop_id")
                    .with_param("nexthop_id", format!("nh-{}", i % 64))
                    .with_param("route_metadata", "0x01"),
            )
            .to_set_op()
        })
        .collect()
}

fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// A consumer answering SUCCESS per key with the entry's fields, until the server stops.
fn answer(mut server: ZmqServer) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut n = 0;
        while let Some(Ok(r)) = server.next().await {
            n += r.entries.len();
            let results: Vec<EntryResult> = r
                .entries
                .iter()
                .map(|e| EntryResult::ok(e.key.clone(), e.op, e.fields.clone()))
                .collect();
            if r.reply(&results).is_err() {
                break;
            }
        }
        n
    })
}

/// Median and best of `times`.
fn stats(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[0])
}

/// Request/reply over `bind`: time to every key's status; with `persist`, also the time
/// until APPL_DB holds every row.
async fn zmq_request_reply(
    bind: &ZmqEndpoint,
    ops: &[KeyOpFieldValues],
    rounds: usize,
    persist: Option<&SonicDb>,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let server = ZmqServer::bind(bind, ServerOptions::default())?;
    let at = server.endpoint().clone();
    let consumer = answer(server);
    let opts = ProducerOptions {
        reply_timeout: DEADLINE,
        ..Default::default()
    };
    let mut producer = ZmqProducer::connect(&at, "APPL_DB", TABLE, opts)?;
    if let Some(db) = persist {
        producer.persist_with(AsyncDbUpdater::start(db, SonicDbId::ApplDb, TABLE).await?);
    }
    let (mut replied, mut written) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        if let Some(db) = persist {
            flush(db).await?;
        }
        let start = Instant::now();
        let outcome = producer.send(ops).await?;
        replied.push(start.elapsed());
        if !outcome.all_ok() || outcome.responses.len() != ops.len() {
            bail!("{} of {} answered", outcome.responses.len(), ops.len());
        }
        if let Some(u) = producer.updater() {
            u.flush().await?;
            written.push(start.elapsed());
            let rows = count_rows(persist.context("db")?).await?;
            if rows != ops.len() {
                bail!("{rows} rows in APPL_DB after writing {}", ops.len());
            }
        }
    }
    drop(producer);
    consumer.abort();
    Ok((replied, written))
}

/// Push/pull over `bind`: time until the consumer holds every entry.
async fn zmq_push_pull(
    bind: &ZmqEndpoint,
    ops: &[KeyOpFieldValues],
    rounds: usize,
) -> anyhow::Result<Vec<Duration>> {
    let opts = ServerOptions {
        mode: ZmqMode::PushPull,
        ..Default::default()
    };
    let mut server = ZmqServer::bind(bind, opts)?;
    let mut producer = ZmqProducer::connect(
        server.endpoint(),
        "APPL_DB",
        TABLE,
        ProducerOptions::push_pull(),
    )?;
    let mut times = Vec::new();
    for _ in 0..rounds {
        let start = Instant::now();
        producer.send(ops).await?;
        let mut got = 0;
        while got < ops.len() {
            let r = tokio::time::timeout(DEADLINE, server.next())
                .await?
                .context("server stopped")??;
            got += r.entries.len();
        }
        times.push(start.elapsed());
    }
    server.shutdown().await;
    Ok(times)
}

async fn flush(db: &SonicDb) -> anyhow::Result<()> {
    let mut c = db.connect(SonicDbId::ApplDb).await?;
    redis::cmd("FLUSHALL").query_async::<()>(c.raw()).await?;
    Ok(())
}

async fn count_rows(db: &SonicDb) -> anyhow::Result<usize> {
    let mut c = db.connect(SonicDbId::ApplDb).await?;
    Ok(redis::cmd("DBSIZE").query_async(c.raw()).await?)
}

/// The Redis producer alone.
async fn redis_apply(
    db: &SonicDb,
    ops: &[KeyOpFieldValues],
    rounds: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::new();
    for _ in 0..rounds {
        flush(db).await?;
        let mut producer = ProducerStateTable::new(db, SonicDbId::ApplDb, TABLE).await?;
        let start = Instant::now();
        producer.apply(ops).await?;
        times.push(start.elapsed());
    }
    Ok(times)
}

/// The Redis path answered: producer → consumer pops → responses → every key's status.
async fn redis_answered(
    db: &SonicDb,
    ops: &[KeyOpFieldValues],
    rounds: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::new();
    for _ in 0..rounds {
        flush(db).await?;
        let mut waiter = ResponseWaiter::subscribe(db, TABLE).await?;
        let mut producer = ProducerStateTable::new(db, SonicDbId::ApplDb, TABLE).await?;
        let mut consumer = ConsumerStateTable::new(db, SonicDbId::ApplDb, TABLE).await?;
        let mut publisher = ResponsePublisher::new(db, TABLE).await?;
        let n = ops.len();
        let consuming = tokio::spawn(async move {
            let mut got = 0;
            while got < n {
                let batch = consumer.next_batch(MAX_POP_PER_SCRIPT).await?;
                got += batch.len();
                let results: Vec<EntryResult> = batch
                    .into_iter()
                    .map(|e| EntryResult::ok(e.key, e.op, e.fields))
                    .collect();
                publisher.publish_batch(&results).await?;
            }
            anyhow::Ok(())
        });
        let start = Instant::now();
        producer.apply(ops).await?;
        let outcome = waiter
            .wait(ops.iter().map(|o| o.key.clone()), DEADLINE)
            .await?;
        times.push(start.elapsed());
        consuming.await??;
        if !outcome.all_ok() {
            bail!("redis path: {} keys unanswered", outcome.missing.len());
        }
    }
    Ok(times)
}

/// The codec alone (no sockets): median of `rounds` encodes and decodes of the request and of
/// its reply.
fn codec(ops: &[KeyOpFieldValues], rounds: usize) -> anyhow::Result<[Vec<Duration>; 2]> {
    let batch = ZmqBatch {
        db: "APPL_DB".into(),
        table: TABLE.into(),
        term: None,
        entries: ops.to_vec(),
    };
    let results: Vec<EntryResult> = ops
        .iter()
        .map(|e| EntryResult::ok(e.key.clone(), e.op, e.fields.clone()))
        .collect();
    let (mut enc, mut dec) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let bytes = wire::encode(&batch);
        let reply = wire::encode_reply("APPL_DB", TABLE, &results, usize::MAX);
        enc.push(t.elapsed());
        let t = Instant::now();
        let back = wire::decode(&bytes)?;
        let replies = wire::decode_reply(&reply, "APPL_DB", TABLE)?;
        dec.push(t.elapsed());
        if back.entries.len() != ops.len() || replies.len() != ops.len() {
            bail!("codec lost entries");
        }
    }
    Ok([enc, dec])
}

fn line(name: &str, n: usize, times: Vec<Duration>, base: Option<Duration>) -> Duration {
    let (median, best) = stats(times);
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    let vs = base.map_or(String::new(), |b| {
        format!(
            "  {:>5.1}x the Redis path",
            b.as_secs_f64() / median.as_secs_f64()
        )
    });
    println!(
        "  {name:<58} median {:>8.1} ms {:>9.0}/s  best {:>8.1} ms{vs}",
        median.as_secs_f64() * 1e3,
        rate(median),
        best.as_secs_f64() * 1e3,
    );
    median
}

async fn run(n: usize, rounds: usize, db: &SonicDb, dir: &std::path::Path) -> anyhow::Result<()> {
    let ops = routes(n);
    let ipc = ZmqEndpoint::ipc(dir.join(format!("bench-{n}")));
    let tcp = ZmqEndpoint::tcp("127.0.0.1", 0);
    let redis_full = redis_answered(db, &ops, rounds).await?;
    let redis_prod = redis_apply(db, &ops, rounds).await?;
    let (zmq_ipc, _) = zmq_request_reply(&ipc, &ops, rounds, None).await?;
    let (zmq_tcp, _) = zmq_request_reply(&tcp, &ops, rounds, None).await?;
    let (zmq_db, zmq_db_written) = zmq_request_reply(&ipc, &ops, rounds, Some(db)).await?;
    let push = zmq_push_pull(&ipc, &ops, rounds).await?;
    let [enc, dec] = codec(&ops, rounds)?;
    println!("{n} routes, {rounds} rounds (load {}):", uptime());
    let base = line(
        "Redis: apply → pop → APPL_STATE_DB + notify → all answered",
        n,
        redis_full,
        None,
    );
    line(
        "Redis: ProducerStateTable::apply alone (not answered)",
        n,
        redis_prod,
        None,
    );
    line(
        "ZMQ req/rep ipc: send → all answered",
        n,
        zmq_ipc,
        Some(base),
    );
    line(
        "ZMQ req/rep tcp 127.0.0.1: send → all answered",
        n,
        zmq_tcp,
        Some(base),
    );
    line(
        "ZMQ req/rep ipc + APPL_DB behind: all answered",
        n,
        zmq_db,
        Some(base),
    );
    line(
        "ZMQ req/rep ipc + APPL_DB behind: APPL_DB written",
        n,
        zmq_db_written,
        Some(base),
    );
    line(
        "ZMQ push/pull ipc: consumer holds all (no replies)",
        n,
        push,
        Some(base),
    );
    line("codec only: encode request + reply", n, enc, None);
    line("codec only: decode request + reply", n, dec, None);
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sizes = env_list("WEFT_BENCH_ROUTES", &[10_000, 100_000]);
    let rounds = env_list("WEFT_BENCH_ROUNDS", &[5])[0].max(1);
    let srv = redis_server::RedisServer::start().context("starting redis-server")?;
    let db = SonicDb::from_endpoint(&srv.url())?;
    let dir = std::env::temp_dir().join(format!("weft-zmq-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    println!(
        "weft-sonic-db ZMQ channel vs Redis path (redis-server on a unix socket; load at start {})",
        uptime()
    );
    let result = async {
        for n in sizes {
            run(n, rounds, &db, &dir).await?;
        }
        anyhow::Ok(())
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    println!("load at end {}", uptime());
    Ok(())
}
