//! Routes end to end, APPL_DB → weft-plugin → BMv2: a real redis-server, a real
//! `simple_switch_grpc` running Weft's pipeline and the real plugin binary, beside BMv2's own
//! ceiling for the same entries (a fresh BMv2, the client's 8 Writes in flight) measured in the
//! same run, and their ratio.
//!
//! `cargo bench -p weft-sonic-plugin --bench e2e_routes [-- --routes N[,N...]]` (default
//! 10000,100000)
//!
//! Measured, in order:
//! * end to end: the producer's first write → the last route's SUCCESS response;
//! * producer: the ProducerStateTable write of all routes into APPL_DB (the plugin already
//!   consumes while it runs);
//! * plugin busy: the sum of the plugin's own per-batch times (its `batch applied ... ms=` debug
//!   log: translate + P4Runtime write + responses), and its batch count;
//! * the stages alone, in this process, on the same entries: the plugin's translation
//!   (`Translator::translate_set`), and the P4Runtime write of the translated entries into a
//!   second, fresh BMv2 the way the plugin writes them (one Write per batch of 1,024 keys,
//!   one batch after the other) and pipelined (all at once, the client's 8 Writes in flight);
//!   the Redis side on a table of its own: the consumer's pops and the responses with their
//!   APPL_STATE_DB copies, in the plugin's batch size.
//!
//! * the same routes over SONiC's ZMQ channel (a fresh switch, Redis and plugin with
//!   `--zmq-endpoint`, one request of all routes as `weft apply` sends a stage, per-key
//!   replies): its time, its ratio to the ceiling, and each process's CPU per entry beside the
//!   Redis path's.
//!
//! Without BMv2 it prints SKIPPED and exits 0 (`WEFT_REQUIRE_BMV2=1` fails instead).
//! `WEFT_BENCH_PLUGIN=PATH` measures another build of `weft-plugin` (an earlier commit's) with
//! the same bench. `WEFT_BENCH_REDIS_STATS=1` also prints redis-server's per-command CPU (`INFO commandstats`,
//! reset before the routes) for the end-to-end phase alone: where Redis' time goes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use weft_appdb::{Call, Encoder, Match, PortMap, Value};
use weft_p4::{actions as a, tables as t};
use weft_p4rt::proto::p4::v1::{Update, update};
use weft_p4rt::{Client, ClientConfig};
use weft_sonic_db::zmq::{ProducerOptions, ZmqEndpoint, ZmqProducer};
use weft_sonic_db::{
    ConsumerStateTable, EntryResult, KeyOpFieldValues, Op, P4RT_TABLE, ProducerStateTable,
    ResponsePublisher, ResponseWaiter, SonicDb, SonicDbId, Table,
};
use weft_sonic_plugin::config::PipelineSource;
use weft_sonic_plugin::translate::Translator;
use weft_tests::bmv2::{Bmv2, Bmv2Options, ProcessGuard, bmv2_or_skip};
use weft_tests::redis::RedisServer;

const BENCH: &str = "e2e_routes";
/// The plugin's default batch size (keys per consumer pop, one P4Runtime Write each).
const PLUGIN_BATCH: usize = 1024;
const PORTS: [(&str, u32); 2] = [("Ethernet0", 1), ("Ethernet4", 2)];

fn main() -> anyhow::Result<()> {
    let mut routes = vec![10_000usize, 100_000];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--routes" {
            routes = args
                .next()
                .unwrap_or_default()
                .split(',')
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=120_000).contains(n))
                })
                .collect::<Option<Vec<usize>>>()
                .context("--routes takes numbers in 1..=120000 (the IPv4 table holds 131072)")?;
        }
    }
    let Some(bin) = bmv2_or_skip(BENCH) else {
        return Ok(());
    };
    // WEFT_BENCH_PLUGIN: another build of the plugin to measure (an earlier commit's, for a
    // before/after in one run of the same bench).
    let plugin_path = std::env::var_os("WEFT_BENCH_PLUGIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_weft-plugin").into());
    let plugin = plugin_path.as_path();
    if !plugin.exists() {
        println!(
            "SKIPPED: {BENCH}: {} not built; build it with `cargo build --release -p weft-sonic-plugin`",
            plugin.display()
        );
        return Ok(());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for n in routes {
        rt.block_on(run(&bin, plugin, n))?;
    }
    Ok(())
}

fn start_switch(bin: &Path) -> anyhow::Result<Bmv2> {
    Bmv2::start(
        bin,
        Bmv2Options {
            cpu_port: Some(255),
            device_id: Some(1),
            extra_target_args: vec!["--priority-queues".into(), "8".into()],
            ..Default::default()
        },
    )
    .map_err(|e| anyhow::anyhow!("BMv2: {e}"))
}

/// Port config and two nexthops (what the routes need), then `n` /24 routes over them.
fn entries(n: usize) -> anyhow::Result<(Vec<KeyOpFieldValues>, Vec<KeyOpFieldValues>)> {
    let info = weft_sonic_plugin::pipeline::weft_p4info()?;
    let enc = Encoder::new(&info);
    let mac = |b: u8| Value::Mac([2, 0x57, 0x46, 0, 0, b]);
    let mut base = Vec::new();
    for (p, _) in PORTS {
        let k = enc.key(
            t::port_config_table::NAME,
            &[Match::Exact(
                t::port_config_table::fields::port::NAME,
                Value::Port(p.into()),
            )],
            0,
        )?;
        let c = Call {
            action: a::set_port_config::NAME,
            params: vec![(a::set_port_config::params::router_mac::NAME, mac(0xaa))],
        };
        base.push(enc.entry(k, &c)?.to_set_op());
    }
    for (i, (p, _)) in PORTS.iter().enumerate() {
        let id = i as u8 + 1;
        let k = enc.key(
            t::nexthop_table::NAME,
            &[Match::Exact(
                t::nexthop_table::fields::nexthop_id::NAME,
                Value::Uint(u128::from(id)),
            )],
            0,
        )?;
        let c = Call {
            action: a::set_nexthop::NAME,
            params: vec![
                (
                    a::set_nexthop::params::egress_port::NAME,
                    Value::Port(p.to_string()),
                ),
                (a::set_nexthop::params::dst_mac::NAME, mac(id)),
                (a::set_nexthop::params::src_mac::NAME, mac(0xaa)),
            ],
        };
        base.push(enc.entry(k, &c)?.to_set_op());
    }
    let mut routes = Vec::with_capacity(n);
    for i in 0..n as u32 {
        let net = std::net::Ipv4Addr::from(0x0a00_0000u32.wrapping_add(i << 8));
        let k = enc.key(
            t::ipv4_table::NAME,
            &[Match::Lpm(
                t::ipv4_table::fields::ipv4_dst::NAME,
                Value::Ipv4(net),
                24,
            )],
            0,
        )?;
        let c = Call {
            action: a::set_nexthop_id::NAME,
            params: vec![(
                a::set_nexthop_id::params::nexthop_id::NAME,
                Value::Uint(u128::from(i % 2 + 1)),
            )],
        };
        routes.push(enc.entry(k, &c)?.to_set_op());
    }
    Ok((base, routes))
}

async fn produce_and_wait(
    sonic: &SonicDb,
    ops: &[KeyOpFieldValues],
) -> anyhow::Result<(Duration, Duration)> {
    let mut waiter = ResponseWaiter::subscribe(sonic, P4RT_TABLE).await?;
    let mut prod = ProducerStateTable::new(sonic, SonicDbId::ApplDb, P4RT_TABLE).await?;
    let t0 = Instant::now();
    prod.apply(ops).await?;
    let produced = t0.elapsed();
    let out = waiter
        .wait(ops.iter().map(|o| o.key.clone()), Duration::from_secs(300))
        .await?;
    let total = t0.elapsed();
    if !out.all_ok() {
        let first = out.failures().next().map(|r| format!("{r:?}"));
        bail!(
            "{} keys without a response, first failure: {first:?}",
            out.missing.len()
        );
    }
    Ok((produced, total))
}

/// (batches, keys, ms) from the plugin's `batch applied` debug lines.
fn plugin_batches(log: &Path) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out = (0, 0, 0);
    for raw in text.lines().filter(|l| l.contains("batch applied")) {
        let line = strip_ansi(raw);
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.0 += 1;
        out.1 += field("keys=");
        out.2 += field("ms=");
    }
    out
}

/// The plugin colours its log on a terminal only, but be safe if it does anyway.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut esc = false;
    for c in s.chars() {
        match (esc, c) {
            (false, '\u{1b}') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, c) => out.push(c),
        }
    }
    out
}

/// `(command, calls, usec)` from `INFO commandstats`, most CPU first.
fn commandstats_top(info: &str) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = info
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |f: &str| {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(f)?.strip_prefix('='))
                    .and_then(|v| v.trim().parse::<u64>().ok())
            };
            Some((name.to_string(), field("calls")?, field("usec")?))
        })
        .collect();
    out.sort_by_key(|x| std::cmp::Reverse(x.2));
    out
}

/// CPU time (user + system) a process has used so far.
fn cpu_of(pid: Option<u32>) -> Duration {
    pid.map_or(Duration::ZERO, |p| {
        Duration::from_secs_f64(weft_tests::process::cpu_seconds(p))
    })
}

fn rate(n: usize, d: Duration) -> String {
    format!("{:.0}/s", n as f64 / d.as_secs_f64().max(1e-9))
}

/// The switch, its Redis and the plugin under test, the ports configured.
struct Bed {
    redis: RedisServer,
    sw: Bmv2,
    sonic: SonicDb,
    plugin: ProcessGuard,
    log: std::path::PathBuf,
}

/// `zmq`: the plugin also takes batches over ZMQ there.
async fn start_bed(
    bin: &Path,
    plugin_bin: &Path,
    zmq: Option<&ZmqEndpoint>,
) -> anyhow::Result<Bed> {
    let redis = RedisServer::start().context("redis-server")?;
    let sw = start_switch(bin)?;
    let sonic = SonicDb::from_endpoint(&redis.url())?;
    let config = Table::new(sonic.connect(SonicDbId::ConfigDb).await?, "PORT")?;
    for (name, id) in PORTS {
        config
            .set(
                name,
                &[
                    ("id", id.to_string()),
                    ("mtu", "9100".to_string()),
                    ("admin_status", "up".to_string()),
                ],
            )
            .await?;
    }
    let log = std::env::temp_dir().join(format!(
        "weft-e2e-routes-{}{}.log",
        std::process::id(),
        if zmq.is_some() { "-zmq" } else { "" }
    ));
    let out = std::fs::File::create(&log)?;
    let mut cmd = Command::new(plugin_bin);
    if let Some(ep) = zmq {
        cmd.args(["--zmq-endpoint", &ep.to_string()]);
    }
    let child = cmd
        .args(["--redis", &redis.url(), "--p4rt", &sw.grpc_addr()])
        .args(["--device-id", &sw.device_id().to_string()])
        // The per-batch timing lines, nothing else at debug.
        .env("RUST_LOG", "info,weft_sonic_plugin::daemon=debug")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .context("spawn weft-plugin")?;
    let plugin = ProcessGuard::new("weft-plugin", child);
    Ok(Bed {
        redis,
        sw,
        sonic,
        plugin,
        log,
    })
}

/// The end-to-end phase: setup entries answered (the plugin is ready), then the routes.
struct E2e {
    ready: Duration,
    produced: Duration,
    total: Duration,
    /// CPU per process while the routes went through.
    cpu: Vec<(&'static str, Duration)>,
    commandstats: Option<String>,
    /// (batches, keys, ms) of the plugin's own batch lines.
    batches: (u64, u64, u64),
}

/// Over ZMQ: one request per batch (what `weft apply` sends for a stage), per-key replies.
async fn send_and_wait(
    producer: &mut ZmqProducer,
    ops: &[KeyOpFieldValues],
) -> anyhow::Result<(Duration, Duration)> {
    let t0 = Instant::now();
    let out = producer
        .send(ops)
        .await
        .map_err(|e| anyhow::anyhow!("ZMQ send: {}", e.error))?;
    let total = t0.elapsed();
    if !out.all_ok() {
        let first = out.failures().next().map(|r| format!("{r:?}"));
        bail!(
            "{} keys without a reply, first failure: {first:?}",
            out.missing.len()
        );
    }
    Ok((total, total))
}

/// Where a phase sends its entries.
enum Via<'a> {
    Redis,
    Zmq(&'a mut ZmqProducer),
}

impl Via<'_> {
    async fn send(
        &mut self,
        sonic: &SonicDb,
        ops: &[KeyOpFieldValues],
    ) -> anyhow::Result<(Duration, Duration)> {
        match self {
            Via::Redis => produce_and_wait(sonic, ops).await,
            Via::Zmq(p) => send_and_wait(p, ops).await,
        }
    }
}

async fn end_to_end(
    bed: &Bed,
    base: &[KeyOpFieldValues],
    routes: &[KeyOpFieldValues],
    mut via: Via<'_>,
) -> anyhow::Result<E2e> {
    let sonic = &bed.sonic;
    let log = &bed.log;
    // The plugin is up (primary, pipeline pushed, synced) once it answers these.
    let t_ready = Instant::now();
    loop {
        match via.send(sonic, base).await {
            Ok(_) => break,
            // A ZMQ request before the plugin's session runs waits in its queue; one that
            // timed out is sent again.
            Err(e)
                if t_ready.elapsed() < Duration::from_secs(120) && matches!(via, Via::Zmq(_)) =>
            {
                tracing_free_note(&e);
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("setup entries; plugin log {}", log.display()));
            }
        }
    }
    let ready = t_ready.elapsed();
    // The plugin logs a batch after answering it: let the setup batch's line land first.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = plugin_batches(log);
    let pids = [
        ("redis-server", bed.redis.pid()),
        ("BMv2", bed.sw.pid()),
        ("weft-plugin", bed.plugin.pid()),
        (
            "this bench (producer + response waiter)",
            Some(std::process::id()),
        ),
    ];
    let redis_stats = std::env::var_os("WEFT_BENCH_REDIS_STATS").is_some();
    if redis_stats {
        let mut c = sonic.connect(SonicDbId::ApplDb).await?;
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async::<()>(c.raw())
            .await?;
    }
    let cpu0: Vec<Duration> = pids.iter().map(|(_, p)| cpu_of(*p)).collect();
    let (produced, total) = via
        .send(sonic, routes)
        .await
        .with_context(|| format!("routes; plugin log {}", log.display()))?;
    let cpu = pids
        .iter()
        .zip(&cpu0)
        .map(|((name, p), c0)| (*name, cpu_of(*p).saturating_sub(*c0)))
        .collect();
    let commandstats = if redis_stats {
        let mut c = sonic.connect(SonicDbId::ApplDb).await?;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(c.raw())
            .await?;
        Some(info)
    } else {
        None
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = plugin_batches(log);
    Ok(E2e {
        ready,
        produced,
        total,
        cpu,
        commandstats,
        batches: (after.0 - before.0, after.1 - before.1, after.2 - before.2),
    })
}

fn tracing_free_note(e: &anyhow::Error) {
    eprintln!("{BENCH}: setup over ZMQ not answered yet ({e}); sending again");
}

/// The Redis side alone, on the same redis-server under a table of its own: the consumer's
/// pops in batches, then the responses with APPL_STATE_DB (a waiter listening, as the
/// controller would), and redis-server's CPU per stage.
struct RedisStages {
    pops: Duration,
    respond: Duration,
    cpu_produce: Duration,
    cpu_pops: Duration,
    cpu_respond: Duration,
}

async fn redis_stages(bed: &Bed, routes: &[KeyOpFieldValues]) -> anyhow::Result<RedisStages> {
    let n = routes.len();
    let sonic = &bed.sonic;
    let bench_table = "WEFT_BENCH_TABLE";
    let mut prod = ProducerStateTable::new(sonic, SonicDbId::ApplDb, bench_table).await?;
    // redis-server's CPU per stage alone: what each side of the protocol costs Redis.
    let redis_cpu = || cpu_of(bed.redis.pid());
    let r0 = redis_cpu();
    prod.apply(routes).await?;
    let cpu_produce = redis_cpu().saturating_sub(r0);
    let mut cons = ConsumerStateTable::new(sonic, SonicDbId::ApplDb, bench_table).await?;
    let t0 = Instant::now();
    let mut popped = Vec::with_capacity(n);
    while popped.len() < n {
        let b = cons.pop(PLUGIN_BATCH).await?;
        if b.is_empty() {
            bail!("the consumer found {} of {n} keys", popped.len());
        }
        popped.extend(b);
    }
    let pops = t0.elapsed();
    let cpu_pops = redis_cpu().saturating_sub(r0 + cpu_produce);
    let results: Vec<EntryResult> = popped
        .into_iter()
        .map(|o| EntryResult::ok(o.key, Op::Set, o.fields))
        .collect();
    let mut waiter = ResponseWaiter::subscribe(sonic, bench_table).await?;
    let mut publisher = ResponsePublisher::new(sonic, bench_table).await?;
    let t0 = Instant::now();
    for chunk in results.chunks(PLUGIN_BATCH) {
        publisher.publish_batch(chunk).await?;
    }
    let respond = t0.elapsed();
    let cpu_respond = redis_cpu().saturating_sub(r0 + cpu_produce + cpu_pops);
    let heard = waiter
        .wait(
            results.iter().map(|r| r.key.clone()),
            Duration::from_secs(60),
        )
        .await?;
    if !heard.missing.is_empty() {
        bail!("{} bench responses lost", heard.missing.len());
    }
    Ok(RedisStages {
        pops,
        respond,
        cpu_produce,
        cpu_pops,
        cpu_respond,
    })
}

/// The plugin's translation of the routes alone, and what it yields.
fn translate(routes: &[KeyOpFieldValues]) -> anyhow::Result<(Duration, Vec<Update>)> {
    let info = weft_sonic_plugin::pipeline::weft_p4info()?;
    let mut tr = Translator::new(info, weft_sonic_plugin::pipeline::owned_tables(), false);
    let mut ports = PortMap::default();
    for (name, id) in PORTS {
        ports.by_name.insert(name.to_string(), id);
    }
    tr.set_ports(ports);
    let t0 = Instant::now();
    let mut entities = Vec::with_capacity(routes.len());
    for o in routes {
        let objs = tr
            .translate_set(&o.key, &o.fields)
            .map_err(|e| anyhow::anyhow!("{}: {}", o.key, e.message))?;
        entities.extend(objs.into_values());
    }
    let took = t0.elapsed();
    let updates = entities
        .into_iter()
        .map(|e| Update {
            r#type: update::Type::Insert as i32,
            entity: Some(e),
        })
        .collect();
    Ok((took, updates))
}

/// The P4Runtime write of the translated entries into a fresh BMv2, the way the plugin writes
/// them (one Write per batch, one after the other) and pipelined (BMv2's ceiling).
async fn p4rt_alone(
    bin: &Path,
    updates: &[Update],
) -> anyhow::Result<Vec<(&'static str, Duration)>> {
    let pipeline = weft_sonic_plugin::pipeline::load(&PipelineSource::Embedded)?;
    let mut out = Vec::new();
    for mode in ["one Write per 1,024 keys, in sequence", "pipelined"] {
        let sw2 = start_switch(bin)?;
        let client = Client::connect(ClientConfig::new(sw2.grpc_addr(), sw2.device_id(), 1))?;
        client.wait_primary(Duration::from_secs(30)).await?;
        client.set_pipeline(&pipeline).await?;
        let t0 = Instant::now();
        if mode == "pipelined" {
            client.write(updates).await?;
        } else {
            for chunk in updates.chunks(PLUGIN_BATCH) {
                client.write(chunk).await?;
            }
        }
        out.push((mode, t0.elapsed()));
    }
    Ok(out)
}

async fn run(bin: &Path, plugin_bin: &Path, n: usize) -> anyhow::Result<()> {
    let (base, routes) = entries(n)?;
    let bed = start_bed(bin, plugin_bin, None).await?;
    let e2e = end_to_end(&bed, &base, &routes, Via::Redis).await?;
    let stages = redis_stages(&bed, &routes).await?;
    finish(bed);
    // The same routes over SONiC's ZMQ channel, into a fresh switch, Redis and plugin.
    let ep = ZmqEndpoint::ipc(
        std::env::temp_dir().join(format!("weft-e2e-routes-{}.zmq", std::process::id())),
    );
    let zbed = start_bed(bin, plugin_bin, Some(&ep)).await?;
    let options = ProducerOptions {
        reply_timeout: Duration::from_secs(300),
        ..ProducerOptions::default()
    };
    let mut producer = ZmqProducer::connect(&ep, "APPL_DB", P4RT_TABLE, options)?;
    let zmq = end_to_end(&zbed, &base, &routes, Via::Zmq(&mut producer)).await?;
    drop(producer);
    finish(zbed);
    let (translate, updates) = translate(&routes)?;
    let p4rt = p4rt_alone(bin, &updates).await?;
    report(n, &e2e, &stages, translate, &p4rt);
    report_zmq(n, &e2e, &zmq, p4rt[1].1);
    Ok(())
}

fn finish(bed: Bed) {
    let Bed { sw, log, .. } = bed;
    drop(sw);
    if std::env::var_os("WEFT_BENCH_KEEP_LOG").is_some() {
        println!("  plugin log kept: {}", log.display());
    } else {
        let _ = std::fs::remove_file(&log);
    }
}

/// The ZMQ phase beside the Redis one: time, ratio to BMv2's ceiling, CPU per entry.
fn report_zmq(n: usize, redis: &E2e, zmq: &E2e, ceiling: Duration) {
    let ratio = |e: &E2e| ceiling.as_secs_f64() / e.total.as_secs_f64().max(1e-9);
    println!(
        "  over ZMQ (one request, per-key replies, APPL_DB written behind by the plugin): {:.2?} = {}; end to end / ceiling = {:.2} (Redis: {:.2?}, {:.2}); ZMQ {:.1}x Redis",
        zmq.total,
        rate(n, zmq.total),
        ratio(zmq),
        redis.total,
        ratio(redis),
        redis.total.as_secs_f64() / zmq.total.as_secs_f64().max(1e-9)
    );
    let (batches, keys, busy_ms) = zmq.batches;
    println!(
        "    plugin busy over ZMQ: {busy_ms} ms in {batches} batches ({keys} keys); ready in {:.2?}",
        zmq.ready
    );
    println!("    CPU per entry (µs), Redis | ZMQ:");
    for ((name, r), (_, z)) in redis.cpu.iter().zip(&zmq.cpu) {
        println!(
            "      {name:<42} {:>7.1} | {:>7.1}",
            r.as_secs_f64() * 1e6 / n as f64,
            z.as_secs_f64() * 1e6 / n as f64
        );
    }
}

fn report(
    n: usize,
    e2e: &E2e,
    st: &RedisStages,
    translate: Duration,
    p4rt_alone: &[(&'static str, Duration)],
) {
    let E2e {
        ready,
        produced,
        total,
        ..
    } = *e2e;
    let (batches, keys, busy_ms) = e2e.batches;
    let seq = p4rt_alone[0].1;
    let ceiling = p4rt_alone[1].1;
    let busy = Duration::from_millis(busy_ms);
    let rest = busy.saturating_sub(translate + seq + st.respond);
    println!("{BENCH}: {n} FIXED_IPV4_TABLE routes, APPL_DB → weft-plugin → BMv2");
    println!("  plugin ready (primary, pipeline pushed, first 4 entries answered): {ready:.2?}");
    println!(
        "  end to end: {total:.2?} = {} (first producer write → last SUCCESS response)",
        rate(n, total)
    );
    println!(
        "  BMv2's own ceiling, same entries, fresh BMv2, 8 Writes in flight: {ceiling:.2?} = {}; end to end / ceiling = {:.2}",
        rate(n, ceiling),
        ceiling.as_secs_f64() / total.as_secs_f64().max(1e-9)
    );
    println!(
        "  CPU used meanwhile: {} (2 cores: {:.2?} of CPU time available)",
        e2e.cpu
            .iter()
            .map(|(name, d)| format!("{name} {:.2}s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", "),
        total * 2
    );
    println!(
        "  1. producer write into APPL_DB: {produced:.2?} ({}; the plugin consumes meanwhile)",
        rate(n, produced)
    );
    println!(
        "  2-4. plugin busy in its batches (prepare + commit; the switch write of one batch overlaps the next's preparation and the previous one's answers): {busy:.2?} in {batches} batches ({keys} keys)",
    );
    println!(
        "    2. translation (measured alone, Translator::translate_set): {translate:.2?} ({})",
        rate(n, translate)
    );
    for (mode, d) in p4rt_alone {
        println!(
            "    3. P4Runtime write (measured alone into a fresh BMv2, {mode}): {d:.2?} ({})",
            rate(n, *d)
        );
    }
    println!(
        "    4. responses + APPL_STATE_DB (measured alone, ResponsePublisher, batches of {PLUGIN_BATCH}): {:.2?} ({})",
        st.respond,
        rate(n, st.respond)
    );
    println!(
        "    5. the rest (busy − 2 − 3 − 4): ≈ {rest:.2?}: the engine's diff, and the 2 cores shared by redis, BMv2, plugin and producer while all run at once"
    );
    println!(
        "  consumer pops alone (ConsumerStateTable, batches of {PLUGIN_BATCH}; a task beside the batches): {:.2?} ({})",
        st.pops,
        rate(n, st.pops)
    );
    report_redis(e2e, st);
    let limit = [
        ("translation", translate),
        ("P4Runtime write into BMv2", seq),
        ("responses + APPL_STATE_DB", st.respond),
    ]
    .into_iter()
    .max_by_key(|(_, d)| *d)
    .unwrap_or(("?", Duration::ZERO));
    println!(
        "  largest piece measured alone: {} ({:.2?}); load average {}",
        limit.0,
        limit.1,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    );
}

fn report_redis(e2e: &E2e, st: &RedisStages) {
    if let Some(info) = &e2e.commandstats {
        println!("  redis-server per command, end-to-end phase (calls, CPU, µs per call):");
        for (name, calls, usec) in commandstats_top(info) {
            println!(
                "    {name:<12} {calls:>9} {:>8.3}s {:>7.2}",
                usec as f64 / 1e6,
                usec as f64 / calls.max(1) as f64
            );
        }
    }
    println!(
        "  redis-server CPU per stage alone: producer {:.2}s, consumer pops {:.2}s, responses + APPL_STATE_DB {:.2}s",
        st.cpu_produce.as_secs_f64(),
        st.cpu_pops.as_secs_f64(),
        st.cpu_respond.as_secs_f64()
    );
}
