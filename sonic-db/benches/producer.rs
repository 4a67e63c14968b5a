//! Benchmark: 10,000 routes (P4RT_TABLE FIXED_IPV4_TABLE entries, action + 2 params) through the
//! ProducerStateTable into a real redis-server, against a ceiling measured in the same run with
//! `redis-benchmark` running a pipelined Lua EVAL shaped like the producer's (SADD + HSET of the fields).
//!
//! Run: `cargo bench -j2 -p weft-sonic-db --bench producer` (env WEFT_BENCH_ROUTES, WEFT_BENCH_ROUNDS).

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use weft_sonic_db::{
    ConsumerStateTable, KeyOpFieldValues, MAX_POP_PER_SCRIPT, P4rtAction, P4rtEntry, P4rtKey,
    ProducerStateTable, SonicDb, SonicDbId,
};
use weft_tests::redis::RedisServer;

const GOAL_PER_S: f64 = 200_000.0;

// What an operator would use instead: swss-common's ProducerStateTable. Its Lua scripts,
// verbatim from sonic-net/sonic-swss-common common/producerstatetable.cpp (Apache-2.0, commit
// 85a39d8), issued the way its C++ issues them (default flushPub = false: the PUBLISH is inside
// each script). Driven from Rust here, not the C++ library itself; an independent measurement
// of the C++ library on this machine gave 60-110k entries/s batched.
const SWSS_LUA_SET: &str = "local added = redis.call('SADD', KEYS[2], ARGV[2])\n\
    for i = 0, #KEYS - 3 do\n\
        redis.call('HSET', KEYS[3 + i], ARGV[3 + i * 2], ARGV[4 + i * 2])\n\
    end\n\
    if added > 0 then \n\
        redis.call('PUBLISH', KEYS[1], ARGV[1])\n\
    end\n";
const SWSS_LUA_BATCHED_SET: &str = "local added = 0\n\
    local idx = 2\n\
    for i = 0, #KEYS - 4 do\n\
        added = added + redis.call('SADD', KEYS[2], KEYS[4 + i])\n\
        for j = 0, tonumber(ARGV[idx]) - 1 do\n\
            local attr = ARGV[idx + j * 2 + 1]\n\
            local val = ARGV[idx + j * 2 + 2]\n\
            redis.call('HSET', KEYS[3] .. KEYS[4 + i], attr, val)\n\
        end\n\
        idx = idx + tonumber(ARGV[idx]) * 2 + 1\n\
    end\n\
    if added > 0 then \n\
        redis.call('PUBLISH', KEYS[1], ARGV[1])\n\
    end\n";
/// swss-common's RedisPipeline default: flush every 128 commands.
const SWSS_PIPELINE: usize = 128;

/// How swss-common's ProducerStateTable writes `ops`.
#[derive(Debug, Clone, Copy)]
enum Swss {
    /// `set(key, values)` per entry on a buffered RedisPipeline (one EVALSHA per entry, flushed
    /// every 128): what orchagent-style producers do.
    PerEntryBuffered,
    /// `set(key, values)` per entry, unbuffered: one round trip per entry (the default
    /// `ProducerStateTable(db, table)` constructor).
    PerEntry,
    /// `set(vector<KeyOpFieldsValuesTuple>)`: one EVALSHA for the whole vector.
    Batched,
}

async fn swss_write(db: &SonicDb, ops: &[KeyOpFieldValues], how: Swss) -> anyhow::Result<()> {
    let mut c = db.connect(SonicDbId::ApplDb).await?;
    let load = |lua: &str| redis::cmd("SCRIPT").arg("LOAD").arg(lua).clone();
    let sha_set: String = load(SWSS_LUA_SET).query_async(c.raw()).await?;
    let sha_batched: String = load(SWSS_LUA_BATCHED_SET).query_async(c.raw()).await?;
    let (channel, key_set) = ("P4RT_TABLE_CHANNEL@0", "P4RT_TABLE_KEY_SET");
    let one = |op: &KeyOpFieldValues| {
        let hash = format!("_P4RT_TABLE:{}", op.key);
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&sha_set)
            .arg(op.fields.len() + 2)
            .arg(channel)
            .arg(key_set);
        for _ in &op.fields {
            cmd.arg(&hash);
        }
        cmd.arg("G").arg(&op.key);
        for (f, v) in &op.fields {
            cmd.arg(f).arg(v);
        }
        cmd
    };
    match how {
        Swss::PerEntryBuffered => {
            for chunk in ops.chunks(SWSS_PIPELINE) {
                let mut pipe = redis::pipe();
                for op in chunk {
                    pipe.add_command(one(op)).ignore();
                }
                pipe.query_async::<()>(c.raw()).await?;
            }
        }
        Swss::PerEntry => {
            for op in ops {
                one(op).query_async::<()>(c.raw()).await?;
            }
        }
        Swss::Batched => {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(&sha_batched)
                .arg(ops.len() + 3)
                .arg(channel)
                .arg(key_set)
                .arg("_P4RT_TABLE:");
            for op in ops {
                cmd.arg(&op.key);
            }
            cmd.arg("G");
            for op in ops {
                cmd.arg(op.fields.len());
                for (f, v) in &op.fields {
                    cmd.arg(f).arg(v);
                }
            }
            cmd.query_async::<()>(c.raw()).await?;
        }
    }
    Ok(())
}

/// Best and median of `rounds` runs of swss-common's way, checked like the producer's.
async fn measure_swss(
    db: &SonicDb,
    ops: &[KeyOpFieldValues],
    how: Swss,
    rounds: usize,
) -> anyhow::Result<(Duration, Duration)> {
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        flush(db).await?;
        let start = Instant::now();
        swss_write(db, ops, how).await?;
        times.push(start.elapsed());
        let mut producer = ProducerStateTable::new(db, SonicDbId::ApplDb, "P4RT_TABLE").await?;
        let pending = producer.pending().await?;
        if pending != ops.len() as u64 {
            bail!(
                "swss {how:?}: {pending} keys pending after writing {}",
                ops.len()
            );
        }
    }
    times.sort();
    Ok((times[0], times[times.len() / 2]))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn routes(n: usize) -> Vec<P4rtEntry> {
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
        })
        .collect()
}

async fn flush(db: &SonicDb) -> anyhow::Result<()> {
    let mut c = db.connect(SonicDbId::ApplDb).await?;
    redis::cmd("FLUSHALL").query_async::<()>(c.raw()).await?;
    Ok(())
}

/// Microseconds Redis spent in EVALSHA since the last CONFIG RESETSTAT (INFO commandstats).
async fn redis_evalsha_usec(db: &SonicDb) -> anyhow::Result<u64> {
    let mut c = db.connect(SonicDbId::ApplDb).await?;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(c.raw())
        .await?;
    let usec = info
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|kv| kv.strip_prefix("usec=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Ok(usec)
}

/// Median time for a consumer to pop `ops.len()` pending keys (what the plugin does first).
async fn measure_consumer(
    db: &SonicDb,
    ops: &[KeyOpFieldValues],
    rounds: usize,
) -> anyhow::Result<(Duration, Duration)> {
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        flush(db).await?;
        let mut producer = ProducerStateTable::new(db, SonicDbId::ApplDb, "P4RT_TABLE").await?;
        producer.apply(ops).await?;
        let mut consumer = ConsumerStateTable::new(db, SonicDbId::ApplDb, "P4RT_TABLE").await?;
        let mut c = db.connect(SonicDbId::ApplDb).await?;
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async::<()>(c.raw())
            .await?;
        let start = Instant::now();
        let mut got = 0;
        while got < ops.len() {
            let batch = consumer.pop(MAX_POP_PER_SCRIPT).await?;
            if batch.is_empty() {
                bail!("consumer found {got} of {} keys", ops.len());
            }
            got += batch.len();
        }
        let elapsed = start.elapsed();
        times.push((
            elapsed,
            Duration::from_micros(redis_evalsha_usec(db).await?),
        ));
    }
    times.sort();
    Ok(times[times.len() / 2])
}

struct ProducerRun {
    best: Duration,
    median: Duration,
    /// Redis time inside the scripts during the median run.
    median_redis: Duration,
}

/// Best and median of `rounds` timed runs of the producer.
async fn measure_producer(
    db: &SonicDb,
    ops: &[KeyOpFieldValues],
    keys_per_script: usize,
    rounds: usize,
) -> anyhow::Result<ProducerRun> {
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        flush(db).await?;
        let mut producer = ProducerStateTable::new(db, SonicDbId::ApplDb, "P4RT_TABLE").await?;
        producer.set_keys_per_script(keys_per_script);
        let mut c = db.connect(SonicDbId::ApplDb).await?;
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async::<()>(c.raw())
            .await?;
        let start = Instant::now();
        producer.apply(ops).await?;
        let elapsed = start.elapsed();
        let redis_time = Duration::from_micros(redis_evalsha_usec(db).await?);
        times.push((elapsed, redis_time));
        let pending = producer.pending().await?;
        if pending != ops.len() as u64 {
            bail!("{pending} keys pending after writing {}", ops.len());
        }
    }
    times.sort();
    let (median, median_redis) = times[times.len() / 2];
    Ok(ProducerRun {
        best: times[0].0,
        median,
        median_redis,
    })
}

/// requests/s of redis-benchmark running one EVAL per entry (SADD to the key set + HSET of the
/// entry's fields into its staging hash), pipelined, on a random key per request.
const CEILING_SCRIPT: &str = "redis.call('SADD', KEYS[1], ARGV[1]) \
    redis.call('HSET', '_P4RT_TABLE:' .. ARGV[1], unpack(ARGV, 2)) \
    return 0";

fn redis_benchmark_ceiling(
    srv: &RedisServer,
    script_cmd: &[&str],
    sample: &KeyOpFieldValues,
    requests: usize,
    pipeline: usize,
) -> anyhow::Result<f64> {
    let bin = weft_tests::redis::find_binary("redis-benchmark")
        .context("redis-benchmark not found (apt-get install -y redis-tools)")?;
    // Same key length and shape as the producer's, made unique per request by redis-benchmark.
    let key_template = sample.key.replace("10.0.0.0/24", "__rand_int__");
    let mut cmd = Command::new(bin);
    cmd.arg("-s")
        .arg(srv.socket_path())
        .arg("-n")
        .arg(requests.to_string())
        .arg("-P")
        .arg(pipeline.to_string())
        .arg("-r")
        .arg("100000000")
        .arg("-c")
        .arg("1")
        .arg("--csv")
        .args(script_cmd)
        .arg("1")
        .arg("P4RT_TABLE_KEY_SET")
        .arg(&key_template);
    for (f, v) in &sample.fields {
        cmd.arg(f).arg(v);
    }
    let out = cmd.output().context("running redis-benchmark")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "redis-benchmark failed: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // CSV: header line, then `"<test>","rps",<6 latency columns>`; the test name holds commas and
    // quotes, so count columns from the end.
    let line = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .nth(1)
        .with_context(|| format!("unexpected redis-benchmark output: {stdout}"))?;
    let cols: Vec<&str> = line.rsplitn(8, ',').collect();
    let rps = cols
        .get(6)
        .map(|s| s.trim_matches('"'))
        .and_then(|s| s.parse::<f64>().ok())
        .with_context(|| format!("no rps in redis-benchmark line: {line}"))?;
    Ok(rps)
}

/// The ceiling's runs, as many as the producer's: (best, median) entries/s of redis-benchmark
/// running the ceiling script with EVAL and with EVALSHA on `op`, so the producer is compared
/// with it statistic for statistic (median with median, best with best).
async fn ceilings(
    db: &SonicDb,
    srv: &RedisServer,
    op: &KeyOpFieldValues,
    requests: usize,
    rounds: usize,
) -> anyhow::Result<((f64, f64), (f64, f64))> {
    let mut eval = Vec::new();
    let mut evalsha = Vec::new();
    for _ in 0..rounds {
        flush(db).await?;
        eval.push(redis_benchmark_ceiling(
            srv,
            &["EVAL", CEILING_SCRIPT],
            op,
            requests,
            64,
        )?);
        let sha: String = {
            let mut c = db.connect(SonicDbId::ApplDb).await?;
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(CEILING_SCRIPT)
                .query_async(c.raw())
                .await?
        };
        flush(db).await?;
        evalsha.push(redis_benchmark_ceiling(
            srv,
            &["EVALSHA", &sha],
            op,
            requests,
            64,
        )?);
    }
    let best_median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| b.total_cmp(a));
        (v[0], v[v.len() / 2])
    };
    Ok((best_median(eval), best_median(evalsha)))
}

/// Everything one run measured.
struct Measured {
    n: usize,
    rounds: usize,
    encode: Duration,
    batched: ProducerRun,
    single: ProducerRun,
    consume: (Duration, Duration),
    swss: [(&'static str, (Duration, Duration)); 3],
    ceiling_requests: usize,
    /// (best, median) entries/s.
    ceiling: (f64, f64),
    ceiling_sha: (f64, f64),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let n = env_usize("WEFT_BENCH_ROUTES", 10_000);
    let rounds = env_usize("WEFT_BENCH_ROUNDS", 7).max(1);
    let srv = RedisServer::start().context("starting redis-server")?;
    let db = SonicDb::from_endpoint(&srv.url())?;

    let entries = routes(n);
    let t = Instant::now();
    let ops: Vec<KeyOpFieldValues> = entries.iter().map(P4rtEntry::to_set_op).collect();
    let encode = t.elapsed();

    let batched =
        measure_producer(&db, &ops, weft_sonic_db::DEFAULT_KEYS_PER_SCRIPT, rounds).await?;
    let single = measure_producer(&db, &ops, 1, rounds.min(3)).await?;
    let consume = measure_consumer(&db, &ops, rounds.min(3)).await?;
    let swss_buffered = measure_swss(&db, &ops, Swss::PerEntryBuffered, rounds).await?;
    let swss_batched = measure_swss(&db, &ops, Swss::Batched, rounds).await?;
    let swss_single = measure_swss(&db, &ops, Swss::PerEntry, rounds.min(3)).await?;
    flush(&db).await?;

    let ceiling_requests = n.max(100_000);
    let (ceiling, ceiling_sha) = ceilings(&db, &srv, &ops[0], ceiling_requests, rounds).await?;
    report(
        &Measured {
            n,
            rounds,
            encode,
            batched,
            single,
            consume,
            swss: [
                (
                    "swss-common set(key) per entry, pipelined 128",
                    swss_buffered,
                ),
                ("swss-common set(vector), one script", swss_batched),
                ("swss-common set(key) per entry, unbuffered", swss_single),
            ],
            ceiling_requests,
            ceiling,
            ceiling_sha,
        },
        &ops[0],
    );
    Ok(())
}

fn report(m: &Measured, op: &KeyOpFieldValues) {
    let Measured {
        n,
        rounds,
        encode,
        ceiling_requests,
        ceiling,
        ceiling_sha,
        ..
    } = *m;
    let (best, median) = (m.batched.best, m.batched.median);
    let (best1, median1) = (m.single.best, m.single.median);
    let consume = m.consume;
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    println!(
        "weft-sonic-db producer benchmark (redis-server on a unix socket, {n} routes, {rounds} rounds)"
    );
    println!("  entry: {} fields {:?}", op.key, op.fields);
    println!(
        "  encode P4rtEntry -> key/fields:      {:>8.1} ms  ({:>9.0} entries/s)",
        encode.as_secs_f64() * 1e3,
        rate(encode)
    );
    println!(
        "  producer, {} keys/script (default): best {:>7.1} ms  {:>9.0} entries/s; median {:>7.1} ms  {:>9.0} entries/s",
        weft_sonic_db::DEFAULT_KEYS_PER_SCRIPT,
        best.as_secs_f64() * 1e3,
        rate(best),
        median.as_secs_f64() * 1e3,
        rate(median)
    );
    println!(
        "    of the median run, Redis executing the scripts: {:.1} ms ({:.0}%); the rest is client encoding and transfer",
        m.batched.median_redis.as_secs_f64() * 1e3,
        100.0 * m.batched.median_redis.as_secs_f64() / median.as_secs_f64()
    );
    println!(
        "  producer, 1 key/script:              best {:>7.1} ms  {:>9.0} entries/s; median {:>7.1} ms  {:>9.0} entries/s",
        best1.as_secs_f64() * 1e3,
        rate(best1),
        median1.as_secs_f64() * 1e3,
        rate(median1)
    );
    println!(
        "  consumer pop ({MAX_POP_PER_SCRIPT} keys/script), median: {:>7.1} ms  {:>9.0} entries/s (Redis in scripts {:.1} ms)",
        consume.0.as_secs_f64() * 1e3,
        rate(consume.0),
        consume.1.as_secs_f64() * 1e3
    );
    println!(
        "  ceiling: redis-benchmark EVAL per entry (SADD + HSET {} fields), -P 64, {ceiling_requests} requests, {rounds} runs: best {:>9.0} entries/s; median {:>9.0} entries/s",
        op.fields.len(),
        ceiling.0,
        ceiling.1
    );
    println!(
        "  ceiling: same with EVALSHA, {rounds} runs:                                best {:>9.0} entries/s; median {:>9.0} entries/s",
        ceiling_sha.0, ceiling_sha.1
    );
    let (top_best, top_median) = (ceiling.0.max(ceiling_sha.0), ceiling.1.max(ceiling_sha.1));
    println!(
        "  ratio producer/ceiling: median/median {:.2}, best/best {:.2}   (1 key/script: {:.2}, {:.2})",
        rate(median) / top_median,
        rate(best) / top_best,
        rate(median1) / top_median,
        rate(best1) / top_best
    );
    for (name, (b, m)) in m.swss {
        println!(
            "  {name:<46} best {:>7.1} ms  {:>9.0} entries/s; median {:>7.1} ms  {:>9.0} entries/s; producer/this (medians) {:.2}",
            b.as_secs_f64() * 1e3,
            rate(b),
            m.as_secs_f64() * 1e3,
            rate(m),
            rate(median) / rate(m)
        );
    }
    println!(
        "  goal >= {GOAL_PER_S:.0}/s: {}",
        if rate(median) >= GOAL_PER_S {
            "met"
        } else {
            "NOT met"
        }
    );
}
