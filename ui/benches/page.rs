//! What one update of the fabric page costs at fat-tree scale: a fat-tree (k=32 by default:
//! 1,280 switches, 16,384 links, 8,192 host links) whose switches' DBs are real redis-servers
//! (several switches per server by `?db_base=`, as the operator bench does), each holding the
//! rows a running plugin writes (STATE_DB port rows and status row, COUNTERS_DB port rows, 8
//! queue rows per port, the switch row), the counters advanced between rounds. Per round: the
//! read of every switch (`DbSource`), the page's update (states, rates, history, timeline),
//! the diagnosis rules over the window, the frame's JSON; its size and the layout's; the
//! history's memory and the process's peak RSS.
//!
//! ```console
//! # cargo bench -j2 -p weft-ui --bench page
//! # WEFT_BENCH_K=16 WEFT_BENCH_SERVERS=8 WEFT_BENCH_ROUNDS=8 cargo bench -j2 -p weft-ui --bench page
//! ```

use std::time::{Duration, Instant};

use weft_sonic_db::{SonicDb, SonicDbId};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{PortCounters, QueueCounters, SwitchCounters};
use weft_sonic_schema::state::{OperStatus, PluginState, PluginStatus, PortState};
use weft_tests::redis::{RedisServer, RedisServerOptions};
use weft_topology::{Role, Topology};
use weft_ui::page::{Page, SourceInfo};
use weft_ui::run::RunSeen;
use weft_ui::{DbSource, Source};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn role(r: Role) -> &'static str {
    match r {
        Role::Leaf => "leaf",
        Role::Spine => "spine",
        Role::Superspine => "superspine",
    }
}

/// The fat-tree with every switch's DB in one of `servers`.
fn fabric(k: usize, servers: &[RedisServer]) -> Topology {
    let base = format!("fabric:\n  name: ui{k}\ngenerators:\n  - {{kind: fat-tree, k: {k}}}\n");
    let plain = weft_topology::load_str(&base, "bench.yaml").expect("fat-tree");
    let per = plain.switches.len().div_ceil(servers.len());
    let mut text = base + "switches:\n";
    for (i, s) in plain.switches.iter().enumerate() {
        let slot = (i % per) * 16;
        let url = servers[i / per].url();
        let db = if slot == 0 {
            url
        } else {
            format!("{url}?db_base={slot}")
        };
        text.push_str(&format!(
            "  - {{name: {}, role: {}, db: \"{db}\"}}\n",
            s.name,
            role(s.role)
        ));
    }
    weft_topology::load_str(&text, "bench.yaml").expect("fat-tree with DBs")
}

/// One switch's rows at round `r`: every port moving a per-port share of its speed.
async fn write(sw: &weft_topology::Switch, si: usize, r: u64, first: bool) {
    let db = SonicDb::from_endpoint(&sw.db).expect("endpoint");
    let mut counters = db
        .connect(SonicDbId::CountersDb)
        .await
        .expect("COUNTERS_DB");
    let mut pipe = redis::pipe();
    let hset = |pipe: &mut redis::Pipeline, key: String, f: Vec<(String, String)>| {
        let mut c = redis::cmd("HSET");
        c.arg(key);
        for (a, b) in f {
            c.arg(a).arg(b);
        }
        pipe.add_command(c).ignore();
    };
    for (pi, p) in sw.ports.iter().enumerate() {
        let share = ((si * 7 + pi * 13) % 90) as u64 + 1;
        let bytes = share * 125_000_000 * r;
        let mut pc = PortCounters {
            port: p.name.clone(),
            tx_bytes: Some(bytes),
            rx_bytes: Some(bytes),
            tx_packets: Some(bytes / 4096),
            rx_packets: Some(bytes / 4096),
            ..Default::default()
        };
        pc.pfc[3].rx_pause = Some(if share > 85 { 200 * r } else { 0 });
        hset(&mut pipe, format!("COUNTERS:{}", pc.key()), pc.to_fields());
        for q in 0..8u8 {
            let qc = QueueCounters {
                port: p.name.clone(),
                queue: q,
                packets: Some(if q == 3 { bytes / 4096 } else { r }),
                bytes: Some(if q == 3 { bytes } else { r * 64 }),
                ecn_marked: Some(if q == 3 && share > 70 { 50 * r } else { 0 }),
                ..Default::default()
            };
            hset(&mut pipe, format!("COUNTERS:{}", qc.key()), qc.to_fields());
        }
    }
    let mut swc = SwitchCounters::default();
    swc.drops.insert("no_route".into(), (r, r * 100));
    hset(
        &mut pipe,
        format!("COUNTERS:{}", swc.key()),
        swc.to_fields(),
    );
    let _: () = pipe.query_async(counters.raw()).await.expect("counters");
    if first {
        let mut state = db.connect(SonicDbId::StateDb).await.expect("STATE_DB");
        let mut pipe = redis::pipe();
        for p in &sw.ports {
            let ps = PortState {
                port: p.name.clone(),
                oper_status: OperStatus::Up,
                admin_status: None,
            };
            hset(
                &mut pipe,
                format!("PORT_TABLE|{}", ps.key()),
                ps.to_fields(),
            );
        }
        let st = PluginStatus::fresh(PluginState::Running, &sw.p4rt_address);
        hset(
            &mut pipe,
            format!("WEFT_PLUGIN|{}", st.key()),
            st.to_fields(),
        );
        let _: () = pipe.query_async(state.raw()).await.expect("state");
    }
}

async fn write_all(t: &Topology, r: u64) {
    use futures::StreamExt;
    futures::stream::iter(t.switches.iter().enumerate())
        .for_each_concurrent(32, |(si, sw)| write(sw, si, r, r == 1))
        .await;
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    let k = env("WEFT_BENCH_K", 32);
    let nservers = env("WEFT_BENCH_SERVERS", 16);
    let rounds = env("WEFT_BENCH_ROUNDS", 6).max(3);
    let switches = 5 * k * k / 4;
    let per = switches.div_ceil(nservers);
    let servers: Vec<RedisServer> = (0..nservers)
        .map(|_| {
            RedisServer::start_with(RedisServerOptions {
                databases: (per * 16).max(16) as u32,
                ..Default::default()
            })
            .expect("redis-server")
        })
        .collect();
    let t = fabric(k, &servers);
    println!(
        "fat-tree k={k}: {} switches, {} links, {} host links in {nservers} redis-servers (load average {})",
        t.switches.len(),
        t.links.len(),
        t.hosts.len(),
        load()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let source = DbSource::new(&t);
    let mut page = Page::new(
        &t,
        SourceInfo {
            name: "switch DBs".into(),
            no_plugin: String::new(),
        },
        10_000,
        300_000,
    );
    let layout = serde_json::to_string(&page.layout).expect("layout");
    let (mut reads, mut updates, mut diags, mut jsons, mut sizes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 1..=rounds as u64 {
        let w0 = Instant::now();
        rt.block_on(write_all(&t, r));
        let wrote = w0.elapsed();
        let t0 = Instant::now();
        let mut reading = rt.block_on(source.read(&t));
        let read = t0.elapsed();
        // Rounds a second apart as the page sees them, whatever the writing took.
        reading.t_ms = 1_700_000_000_000 + r * 1000;
        let t1 = Instant::now();
        let frame = page.update(&reading, &RunSeen::NotRunning, false);
        let update = t1.elapsed();
        let t2 = Instant::now();
        page.diagnose(reading.t_ms);
        let diag = t2.elapsed();
        let t3 = Instant::now();
        let json = serde_json::to_string(&frame).expect("frame");
        let ser = t3.elapsed();
        let ok = frame.cn.bytes().filter(|c| *c == b'o').count();
        println!(
            "  round {r}: wrote rows {:>6.2} s | read {:>6.3} s ({ok} switches' counters) | update {:>6.3} s | rules {:>6.3} s ({}, {} findings) | JSON {:>6.3} s, {:>7.1} KiB",
            wrote.as_secs_f64(),
            read.as_secs_f64(),
            update.as_secs_f64(),
            diag.as_secs_f64(),
            page.diagnosis().state,
            page.diagnosis().findings.len(),
            ser.as_secs_f64(),
            json.len() as f64 / 1024.0
        );
        if r > 1 {
            reads.push(read.as_secs_f64());
            updates.push(update.as_secs_f64());
            diags.push(diag.as_secs_f64());
            jsons.push(ser.as_secs_f64());
            sizes.push(json.len() as f64);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (read, update, diag, ser) = (median(reads), median(updates), median(diags), median(jsons));
    println!(
        "median of rounds 2..{rounds}: read {read:.3} s, update {update:.3} s, rules {diag:.3} s, JSON {ser:.3} s: {:.3} s per update with the rules, {:.3} s without",
        read + update + diag + ser,
        read + update + ser
    );
    println!(
        "frame {:.0} KiB per update; layout {:.0} KiB once; history {:.1} MiB; peak RSS {:.0} MiB (load average {})",
        median(sizes) / 1024.0,
        layout.len() as f64 / 1024.0,
        page.history.bytes() as f64 / (1024.0 * 1024.0),
        peak_rss_mib(),
        load()
    );
}
