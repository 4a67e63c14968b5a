//! The commands an operator runs, whole, on fat-tree fabrics: wall time and peak RSS of the
//! release `weft` binary, as `/usr/bin/time` sees them.
//!
//! ```console
//! # cargo bench -j2 -p weft-controller --bench operator
//! # WEFT_BENCH_K=32,64 WEFT_BENCH_RUNS=3 WEFT_BENCH_ONLINE=16:320,32:16 cargo bench ... --bench operator
//! ```
//! Offline (`WEFT_BENCH_K`, default `32,64`): `weft validate`, `plan --offline` (text and JSON,
//! the JSON written to a file), `apply --dry-run` with every DB unreachable. Median and worst of
//! `WEFT_BENCH_RUNS` (default 3) runs each.
//!
//! Online (`WEFT_BENCH_ONLINE`, default `16:320,32:16`, entries `K:SERVERS`): a fat-tree whose
//! switches' SONiC DBs are real redis-servers — `SERVERS` of them, switches spread over them by
//! `?db_base=` when there are fewer servers than switches. `weft apply --no-wait` writes the
//! fabric; a responder in this bench then does what each switch's plugin does with it (pops
//! APPL_DB P4RT_TABLE, answers SUCCESS and copies the entries to APPL_STATE_DB), so every switch
//! holds its installed state, and publishes in its status row the digests of APPL_STATE_DB and
//! of the owned CONFIG_DB tables as the plugin does (the shared stand-in code). Then, in one
//! run: `weft plan --offline`, `weft plan` (reads every switch's status row and compares
//! digests, reading rows only where they differ: must find nothing to do), and `weft run` up
//! to its "converged" log line, and their ratios to the offline plan. Then `weft run` to
//! converged from empty: every DB flushed, a stand-in plugin per switch answering as entries
//! arrive (the shared stand-in code), so the run writes the whole fabric and waits for every
//! answer. `WEFT_BENCH_PERF=DIR` also records a `perf` profile of the online plan into DIR;
//! `WEFT_BENCH_RUN_LOG=FILE` keeps the log of `weft run` from empty (JSON lines).

#[path = "../tests/common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weft_sonic_db::{ConsumerStateTable, Digest, EntryResult, SonicDb, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::{InstalledDigests, PluginStatus};

#[path = "../tests/common/stand_in.rs"]
#[allow(dead_code)]
mod stand_in_plugin;
use weft_tests::redis::{RedisServer, RedisServerOptions};
use weft_topology::Role;

/// One run of a command: wall seconds, peak RSS in MiB, exit status, bytes on stdout.
#[derive(Debug, Clone, Copy)]
struct Sample {
    wall: f64,
    /// User + system CPU seconds: what the command costs, whatever else the machine runs.
    cpu: f64,
    rss_mib: f64,
    code: i32,
    out_bytes: u64,
}

/// Runs `weft ARGS` under GNU time, stdout into `out`.
fn timed(weft: &Path, args: &[&str], out: &Path) -> Sample {
    let time_file = out.with_extension("time");
    let stdout = std::fs::File::create(out).expect("output file");
    let t0 = Instant::now();
    let status = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%e %M %U %S")
        .arg("-o")
        .arg(&time_file)
        .arg(weft)
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::null())
        .status()
        .expect("/usr/bin/time (Debian package `time`, installed by scripts/setup.sh)");
    let wall = t0.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&time_file).unwrap_or_default();
    // The last line: GNU time prepends "Command exited with non-zero status N".
    let fields: Vec<f64> = text
        .lines()
        .last()
        .map(|l| {
            l.split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let kib = fields.get(1).copied().unwrap_or(f64::NAN);
    let cpu =
        fields.get(2).copied().unwrap_or(f64::NAN) + fields.get(3).copied().unwrap_or(f64::NAN);
    Sample {
        wall,
        cpu,
        rss_mib: kib / 1024.0,
        code: status.code().unwrap_or(-1),
        out_bytes: std::fs::metadata(out).map(|m| m.len()).unwrap_or(0),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(what: &str, samples: &[Sample]) -> f64 {
    let walls: Vec<f64> = samples.iter().map(|s| s.wall).collect();
    let worst = walls.iter().cloned().fold(0.0, f64::max);
    let rss = samples.iter().map(|s| s.rss_mib).fold(0.0, f64::max);
    let codes: Vec<i32> = samples.iter().map(|s| s.code).collect();
    let cpu = median(samples.iter().map(|s| s.cpu).collect());
    let m = median(walls);
    println!(
        "{what:<44} wall median {m:>6.2} s worst {worst:>6.2} s  CPU {cpu:>6.2} s  peak RSS {rss:>6.0} MiB  exit {codes:?}  stdout {:.1} MB",
        samples[0].out_bytes as f64 / 1e6
    );
    m
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn fat_tree(k: u32, name: &str, overrides: &str) -> String {
    format!(
        "fabric:\n  name: {name}\ngenerators:\n  - {{kind: fat-tree, k: {k}}}\nrouting:\n  default: {{mode: wcmp}}\n{overrides}"
    )
}

fn runs() -> usize {
    std::env::var("WEFT_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1)
}

fn offline(weft: &Path, dir: &Path, k: u32) {
    let file = dir.join(format!("k{k}.yaml"));
    // DBs nobody listens on: apply --dry-run must read them, find them unreachable, and say so.
    let text = fat_tree(
        k,
        &format!("k{k}"),
        &format!(
            "  # every DB under {}, where no server runs\n",
            dir.display()
        ),
    )
    .replace(
        "fabric:\n",
        &format!(
            "fabric:\n  defaults: {{db_socket_dir: {}}}\n",
            dir.join("nodb").display()
        ),
    );
    std::fs::write(&file, text).expect("intent");
    let f = file.to_str().expect("utf-8 path");
    println!("fat-tree k={k} (load average {})", load());
    for (what, args) in [
        ("weft validate", vec!["validate", f]),
        ("weft plan --offline", vec!["plan", "--offline", f]),
        (
            "weft plan --offline --output json",
            vec!["plan", "--offline", "--output", "json", f],
        ),
        (
            "weft apply --dry-run (DBs unreachable)",
            vec!["apply", "--dry-run", f],
        ),
    ] {
        let out = dir.join("out");
        let samples: Vec<Sample> = (0..runs()).map(|_| timed(weft, &args, &out)).collect();
        report(what, &samples);
    }
    let _ = std::fs::remove_file(dir.join("out"));
}

/// Switch names and roles of an intent, for the per-switch `db:` overrides.
fn switches(text: &str) -> Vec<(String, Role)> {
    let t = weft_topology::load_str(text, "bench.yaml").expect("valid intent");
    t.switches
        .iter()
        .map(|s| (s.name.clone(), s.role))
        .collect()
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Leaf => "leaf",
        Role::Spine => "spine",
        Role::Superspine => "superspine",
    }
}

/// Does what each switch's plugin does with what `weft apply` wrote: pops APPL_DB P4RT_TABLE
/// and answers SUCCESS, which copies each entry into APPL_STATE_DB; and says, in its status row,
/// that it runs in sync (without that row the reconciler trusts no APPL_STATE_DB), with the
/// digests of APPL_STATE_DB and of the owned CONFIG_DB tables a plugin publishes.
async fn respond(db: &str) -> usize {
    let sonic = SonicDb::from_endpoint(db).expect("endpoint");
    let (n, entries) = pop_and_answer(&sonic).await;
    let config = stand_in_plugin::read_config_digest(&sonic)
        .await
        .expect("CONFIG_DB digest");
    let status = stand_in_plugin::status_with_digests(&InstalledDigests { entries, config });
    let t = Table::new(
        sonic.connect(SonicDbId::StateDb).await.expect("STATE_DB"),
        PluginStatus::TABLE,
    )
    .expect("table");
    t.set(&status.key(), &status.to_fields())
        .await
        .expect("status row");
    n
}

/// Keys answered, and the digest of APPL_STATE_DB P4RT_TABLE after.
async fn pop_and_answer(sonic: &SonicDb) -> (usize, Digest) {
    let mut consumer = ConsumerStateTable::new(sonic, SonicDbId::ApplDb, "P4RT_TABLE")
        .await
        .expect("consumer");
    let mut publisher = stand_in_plugin::tracking_publisher(sonic)
        .await
        .expect("publisher");
    let mut n = 0;
    // Everything was staged before this consumer existed (no PUBLISH will come): pop until the
    // table holds nothing pending, however slow the machine.
    while consumer.pending().await.expect("pending") > 0 {
        let batch = consumer.pop(4096).await.expect("pop");
        n += batch.len();
        let results: Vec<EntryResult> = batch
            .into_iter()
            .map(|e| EntryResult::ok(e.key, e.op, e.fields))
            .collect();
        publisher.publish_batch(&results).await.expect("answer");
    }
    (n, publisher.digest().unwrap_or_default())
}

fn online(weft: &Path, dir: &Path, k: u32, servers: usize) {
    let base = fat_tree(k, &format!("on{k}"), "");
    let names = switches(&base);
    let per_server = names.len().div_ceil(servers.max(1));
    let databases = (per_server * 16) as u32;
    println!(
        "fat-tree k={k} online: {} switches in {servers} redis-servers ({per_server} per server; load average {})",
        names.len(),
        load()
    );
    let t0 = Instant::now();
    let mut started: Vec<RedisServer> = Vec::new();
    for _ in 0..servers {
        match RedisServer::start_with(RedisServerOptions {
            databases: databases.max(16),
            ..Default::default()
        }) {
            Ok(s) => started.push(s),
            Err(e) => panic!("cannot start redis-server: {e}"),
        }
    }
    println!(
        "  {servers} redis-servers started in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let mut overrides = String::from("switches:\n");
    let mut dbs = Vec::new();
    for (i, (name, role)) in names.iter().enumerate() {
        let srv = &started[i / per_server];
        let slot = (i % per_server) * 16;
        let db = if slot == 0 {
            srv.url()
        } else {
            format!("{}?db_base={slot}", srv.url())
        };
        overrides.push_str(&format!(
            "  - {{name: {name}, role: {}, db: \"{db}\"}}\n",
            role_name(*role)
        ));
        dbs.push(db);
    }
    let file = dir.join(format!("on{k}.yaml"));
    std::fs::write(&file, fat_tree(k, &format!("on{k}"), &overrides)).expect("intent");
    let f = file.to_str().expect("utf-8 path");
    let out = dir.join("out");

    let apply = timed(weft, &["apply", "--no-wait", f], &out);
    report("weft apply --no-wait (empty fabric, real DBs)", &[apply]);
    answer_all(&dbs);

    let mut off = Vec::new();
    let mut on = Vec::new();
    let mut run = Vec::new();
    for _ in 0..runs() {
        off.push(timed(weft, &["plan", "--offline", f], &out));
        on.push(timed(weft, &["plan", "--detailed-exitcode", f], &out));
        run.push(run_to_converged(weft, f, dir).0);
    }
    if let Some(perf) = std::env::var_os("WEFT_BENCH_PERF") {
        // A profile of the online plan, for `perf report -i FILE`.
        let _ = Command::new("perf")
            .args(["record", "-F", "999", "-g", "-o"])
            .arg(Path::new(&perf).join(format!("plan-online-k{k}.perf")))
            .arg("--")
            .arg(weft)
            .args(["plan", f])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let plan_text = std::fs::read_to_string(&out).unwrap_or_default();
    let m_off = report("weft plan --offline", &off);
    let m_on = report("weft plan (status rows, digests, diffs)", &on);
    let m_run = median(run.clone());
    println!(
        "{:<44} wall median {m_run:>6.2} s worst {:>6.2} s",
        "weft run, start to converged",
        run.iter().cloned().fold(0.0, f64::max)
    );
    println!(
        "  ratios to plan --offline: plan {:.2}x, run to converged {:.2}x",
        m_on / m_off,
        m_run / m_off
    );
    let empty = from_empty(weft, f, dir, &started, &dbs);
    let m_empty = median(empty.clone());
    println!(
        "{:<44} wall median {m_empty:>6.2} s worst {:>6.2} s (load average {})",
        "weft run, empty fabric to converged",
        empty.iter().cloned().fold(0.0, f64::max),
        load()
    );
    if on.iter().any(|s| s.code != 0) {
        eprintln!(
            "weft plan found changes on a fabric that holds its plan (exit {:?}):\n{}",
            on.iter().map(|s| s.code).collect::<Vec<_>>(),
            plan_text.lines().take(20).collect::<Vec<_>>().join("\n")
        );
        panic!("weft plan found changes on a fabric that holds its plan");
    }
    drop(started);
}

/// Answers every entry `weft apply` wrote into each switch's APPL_STATE_DB, as the plugins would.
fn answer_all(dbs: &[String]) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let t1 = Instant::now();
    let answered: usize = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        // A thousand connects at once time out on a loaded machine: a few dozen at a time.
        let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(CONNECTING));
        for db in dbs {
            let db = db.clone();
            let slots = slots.clone();
            set.spawn(async move {
                let _slot = slots.acquire_owned().await.expect("semaphore");
                respond(&db).await
            });
        }
        let mut n = 0;
        while let Some(r) = set.join_next().await {
            n += r.expect("responder");
        }
        n
    });
    println!(
        "  responder: {answered} entries answered into APPL_STATE_DB in {:.1} s",
        t1.elapsed().as_secs_f64()
    );
}

/// `weft run` to converged on a fabric that holds nothing, `runs()` times: before each, every
/// DB is flushed and a stand-in plugin per switch starts answering (as a plugin does, entries as
/// they arrive, its status row with both digests).
fn from_empty(
    weft: &Path,
    file: &str,
    dir: &Path,
    servers: &[RedisServer],
    dbs: &[String],
) -> Vec<f64> {
    let mut out = Vec::new();
    for _ in 0..runs() {
        for s in servers {
            s.cli(0, &["FLUSHALL"]).expect("FLUSHALL");
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        // Started a few dozen at a time (a thousand connects at once time out on a loaded
        // machine); the run starts once every stand-in has written its status row.
        for chunk in dbs.chunks(CONNECTING) {
            for db in chunk {
                rt.spawn(stand_in_plugin::stand_in(db.clone()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let t0 = Instant::now();
        loop {
            let missing = rt.block_on(status_rows_missing(dbs));
            if missing == 0 {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "{missing} stand-in plugins wrote no status row in 120 s"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        // Where the CPU went while it converged: `weft run` itself, this process (the
        // 1,280 stand-ins answering), the redis-servers.
        let (bench0, redis0) = (own_cpu(), servers_cpu(servers));
        let (wall, run_cpu) = run_to_converged(weft, file, dir);
        println!(
            "  from empty: {wall:.1} s wall; CPU: weft run {run_cpu:.1} s, stand-ins (this \
             bench) {:.1} s, redis-servers {:.1} s",
            own_cpu() - bench0,
            servers_cpu(servers) - redis0
        );
        out.push(wall);
        rt.shutdown_timeout(Duration::from_secs(5));
    }
    out
}

/// Connections opened at once by the bench's stand-ins and responders.
const CONNECTING: usize = 32;

/// How many switches have no plugin status row in STATE_DB (or could not be read).
async fn status_rows_missing(dbs: &[String]) -> usize {
    let key = stand_in_plugin::status_row(0).key();
    let mut missing = 0;
    for chunk in dbs.chunks(CONNECTING) {
        let mut set = tokio::task::JoinSet::new();
        for db in chunk {
            let (db, key) = (db.clone(), key.clone());
            set.spawn(async move {
                let sonic = SonicDb::from_endpoint(&db).ok()?;
                let t = Table::new(
                    sonic.connect(SonicDbId::StateDb).await.ok()?,
                    PluginStatus::TABLE,
                )
                .ok()?;
                t.exists(&key).await.ok()
            });
        }
        while let Some(r) = set.join_next().await {
            if !matches!(r, Ok(Some(true))) {
                missing += 1;
            }
        }
    }
    missing
}

fn own_cpu() -> f64 {
    weft_tests::process::cpu_seconds(std::process::id())
}

fn servers_cpu(servers: &[RedisServer]) -> f64 {
    servers
        .iter()
        .filter_map(|s| s.pid())
        .map(weft_tests::process::cpu_seconds)
        .sum()
}

/// Starts `weft run` and returns the seconds until it logs that the fabric converged, and the
/// CPU seconds it had used by then.
fn run_to_converged(weft: &Path, file: &str, dir: &Path) -> (f64, f64) {
    let status = dir.join("run-status.json");
    let t0 = Instant::now();
    let mut child = Command::new(weft)
        .args(["run", file, "--log-format", "json", "--status-file"])
        .arg(&status)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weft run");
    let stderr = child.stderr.take().expect("stderr");
    // WEFT_BENCH_RUN_LOG=FILE keeps the run's whole log (JSON lines), to see where the time went.
    let mut keep = std::env::var_os("WEFT_BENCH_RUN_LOG")
        .map(|f| std::fs::File::create(f).expect("WEFT_BENCH_RUN_LOG"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(f) = keep.as_mut() {
                let _ = writeln!(f, "{line}");
            }
            if line.contains("converged; following port state") {
                let _ = tx.send(Some(()));
            }
            if line.contains("\"ERROR\"") {
                eprintln!("weft run: {line}");
            }
        }
        let _ = tx.send(None);
    });
    let got = rx.recv_timeout(Duration::from_secs(600));
    let secs = t0.elapsed().as_secs_f64();
    let cpu = weft_tests::process::cpu_seconds(child.id());
    // SIGTERM, so it releases the fabric lock for the next run; then by PID for sure.
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    match got {
        Ok(Some(())) => (secs, cpu),
        // A panic, not exit: it unwinds, so the redis-servers this bench started are stopped.
        _ => panic!("weft run did not converge within 600 s"),
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let weft = PathBuf::from(env!("CARGO_BIN_EXE_weft"));
    let dir = std::env::temp_dir().join(format!("weft-operator-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ks: Vec<u32> = std::env::var("WEFT_BENCH_K")
        .unwrap_or_else(|_| "32,64".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    for k in ks {
        offline(&weft, &dir, k);
    }
    let online_cases = std::env::var("WEFT_BENCH_ONLINE").unwrap_or_else(|_| "16:320,32:16".into());
    for case in online_cases.split(',').filter(|s| !s.is_empty()) {
        let Some((k, n)) = case.split_once(':') else {
            continue;
        };
        let (Ok(k), Ok(n)) = (k.parse(), n.parse()) else {
            continue;
        };
        online(&weft, &dir, k, n);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
