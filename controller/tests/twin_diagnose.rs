//! `weft diagnose` on the telemetry twin of a fat-tree (k=8: 80 switches, 128 hosts) whose
//! switches' DBs are real redis-servers, written as the plugins write them (each switch polling
//! on its own phase, counters that reset, switches missing or whose plugin dies), driven by the
//! fabric model's loads under a background all-to-all, with faults injected:
//!
//! 1. what the reader reads through the DBs is what the rows say (the decoding the bench's
//!    in-memory path uses);
//! 2. a small seeded campaign of faults, one to three at once, scored on every finding of
//!    every window: precision ≥ 0.95 and recall ≥ 0.9 overall, no finding in a healthy window,
//!    every fault localised within 10 s (the full campaign, ≥ 200 faults at k=32, is the twin
//!    bench's: `cargo bench -p weft-controller --bench twin`);
//! 3. the real `weft diagnose` command against the twin running on the wall clock names an
//!    injected fault, and says healthy (exit 0) with the switches it could not judge named.
//!
//! Needs redis-server (scripts/setup.sh installs it). `WEFT_TWIN_TRIALS` (default 10) and
//! `WEFT_TWIN_SEED` change the campaign.

mod common;
#[path = "common/twin.rs"]
#[allow(dead_code)]
mod twin_common;

use std::process::Command;
use std::time::{Duration, Instant};

use twin_common::{Bed, Direct, Through, load, unix_ms};
use weft_diagnose::{Kind, Thresholds};
use weft_twin::Config;
use weft_twin::fault::Fault;
use weft_twin::score::{Campaign, run};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("weft-twin-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn what_the_reader_reads_through_the_dbs_is_what_the_rows_say_and_missing_or_dead_switches_are_named()
 {
    let dir = temp("reader");
    let bed = Bed::start(4, "tw4", 2, &dir);
    let rt = runtime();
    rt.block_on(async {
        let cfg = Config {
            epoch_ms: 1_000_000,
            ..Default::default()
        };
        let mut twin = twin_common::twin(&bed.topo, cfg, &[3]);
        twin.life[5].dead_from = Some(2500);
        let mut through = Through::new(&twin).await;
        // The same DBs read row by row: the snapshots must say what the rows say.
        let mut rows_only = weft_observe::source::db::Reader::new(&twin.topo).rows_only();
        let direct = Direct::new(&twin.topo);
        let host = 2;
        twin.inject(
            Fault::PfcStorm {
                host,
                rate: 900.0,
                watchdog: true,
                depth: 1,
            },
            1500,
        );
        for t in [1000, 2000, 3000, 6000] {
            let changed = twin.advance(t);
            through.writer.write(&twin, &changed).await.expect("write");
            let sweep = through.reader.sweep(twin.cfg.epoch_ms + t).await;
            let by_rows = rows_only.sweep(twin.cfg.epoch_ms + t).await;
            for (s, sw) in twin.topo.switches.iter().enumerate() {
                let want = direct.switch(&twin, s);
                assert_eq!(
                    sweep.switches.get(&sw.name),
                    want.as_ref(),
                    "{} at {t} ms, from its snapshot",
                    sw.name
                );
                assert_eq!(
                    by_rows.switches.get(&sw.name),
                    want.as_ref(),
                    "{} at {t} ms, from its rows",
                    sw.name
                );
            }

            // Every switch written (all but the one never written) was read from its snapshot.
            assert_eq!(
                (sweep.from_snapshot, by_rows.from_snapshot),
                (twin.topo.switches.len() - 1, 0),
                "at {t} ms"
            );
            let names: Vec<&str> = sweep.unjudged.iter().map(|u| u.switch.as_str()).collect();
            assert!(
                names.contains(&twin.topo.switches[3].name.as_str()),
                "{names:?}"
            );
            assert_eq!(
                names.contains(&twin.topo.switches[5].name.as_str()),
                t >= 3000,
                "a dead plugin's switch is unknown from its death on: {:?}",
                sweep.unjudged
            );
        }
        // The storm's leaf holds the watchdog's record and the PAUSE count.
        let leaf = &twin.topo.switches[twin.topo.hosts[host].switch].name;
        let sweep = through.reader.sweep(twin.cfg.epoch_ms + 6000).await;
        let s = &sweep.switches[leaf];
        assert!(
            s.queues
                .values()
                .any(|q| q.wd_stormed && q.wd_detected == 1),
            "{s:?}"
        );
        assert!(s.ports.values().any(|p| p.pfc_rx_pause[3] > 1000), "{s:?}");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_small_seeded_campaign_of_faults_on_a_k8_twin_is_named_with_no_finding_in_healthy_windows() {
    let dir = temp("campaign");
    let bed = Bed::start(8, "tw8", 4, &dir);
    let rt = runtime();
    let trials = env("WEFT_TWIN_TRIALS", 10) as usize;
    let seed = env("WEFT_TWIN_SEED", 7);
    let t0 = Instant::now();
    let score = rt.block_on(async {
        let cfg = Config {
            seed,
            epoch_ms: 1_000_000,
            ..Default::default()
        };
        // Two switches never written (their plugin never ran).
        let mut twin = twin_common::twin(&bed.topo, cfg, &[7, 41]);
        let fabric = std::sync::Arc::new(weft_observe::diagnose::fabric_of(&twin.topo));
        let mut through = Through::new(&twin).await;
        let c = Campaign {
            trials,
            seed,
            // Half the trials with two or three faults at once, so that a small campaign
            // has its share of multi-fault windows.
            multi: 0.5,
            record: std::env::var_os("WEFT_TWIN_RECORD").map(Into::into),
            ..Default::default()
        };
        run(&mut twin, &fabric, &c, &Thresholds::default(), &mut through)
            .await
            .expect("campaign")
    });
    println!(
        "k=8 twin, {trials} trials, seed {seed}: {:.1} s (load {})\n{}",
        t0.elapsed().as_secs_f64(),
        load(),
        score.table()
    );
    println!(
        "windows {}, with two or more faults {} ({:.0}%)",
        score.windows,
        score.multi,
        100.0 * f64::from(score.multi) / f64::from(score.windows.max(1))
    );
    for w in &score.wrong_examples {
        println!("wrong: {w}");
    }
    let all = score.total();
    assert!(all.faults as usize >= trials, "{} faults", all.faults);
    assert_eq!(score.healthy_findings, 0, "findings in healthy windows");
    assert!(all.precision() >= 0.95, "precision {:.3}", all.precision());
    // A fault or two of a small campaign may go unnamed (the bench scores ≥ 200).
    assert!(all.recall() >= 0.9, "recall {:.3}", all.recall());
    assert!(
        all.t2l.iter().all(|s| *s <= 10.5),
        "a fault took longer than 10 s: {:?}",
        all.t2l
    );
    let faulty = score.windows - score.healthy;
    assert!(
        f64::from(score.multi) >= 0.2 * f64::from(faulty),
        "{} of {faulty} windows with faults had two or more",
        score.multi
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The twin on the wall clock, written every 100 ms, until `stop`.
async fn live(
    twin: std::sync::Arc<tokio::sync::Mutex<weft_twin::Twin>>,
    mut through: Through,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let epoch = twin.lock().await.cfg.epoch_ms;
    while !*stop.borrow() {
        {
            let mut t = twin.lock().await;
            let now = unix_ms().saturating_sub(epoch);
            let changed = t.advance(now);
            let _ = through.writer.write(&t, &changed).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn diagnose(file: &std::path::Path) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args([
            "diagnose",
            &file.to_string_lossy(),
            "--window",
            "3s",
            "--interval",
            "1s",
        ])
        .args(["--output", "json"])
        .output()
        .expect("weft diagnose");
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "diagnose JSON: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn the_weft_diagnose_command_on_a_live_twin_names_an_injected_lossy_link_and_healthy_says_so() {
    let dir = temp("live");
    let bed = Bed::start(4, "twl", 2, &dir);
    let rt = runtime();
    let cfg = Config {
        epoch_ms: unix_ms(),
        ..Default::default()
    };
    let twin = twin_common::twin(&bed.topo, cfg, &[]);
    let (from, to) = {
        let p = (0..twin.ports.len() as u32)
            .find(|p| {
                twin.ports.tier[twin.ports.get(*p).switch] == 2
                    && matches!(twin.ports.get(*p).peer, weft_twin::ports::Peer::Switch(_))
                    && twin.base.egress[*p as usize] > 0.0
            })
            .expect("a loaded spine port");
        let weft_twin::ports::Peer::Switch(q) = twin.ports.get(p).peer else {
            unreachable!()
        };
        (p, q)
    };
    let want = format!(
        "{}—{}",
        twin.ports.name(&twin.topo, from),
        twin.ports.name(&twin.topo, to)
    );
    let twin = std::sync::Arc::new(tokio::sync::Mutex::new(twin));
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let writer = {
        let t = twin.clone();
        rt.spawn(async move {
            let through = Through::new(&*t.lock().await).await;
            live(t, through, stop).await;
        })
    };
    std::thread::sleep(Duration::from_secs(3));
    let (code, healthy) = diagnose(&bed.file);
    assert_eq!(code, 0, "healthy twin: {healthy}");
    assert_eq!(healthy["healthy"], true, "{healthy}");
    rt.block_on(async {
        let mut t = twin.lock().await;
        let now = unix_ms() - t.cfg.epoch_ms;
        t.inject(
            Fault::LossyLink {
                from,
                to,
                loss: 0.15,
                both: false,
            },
            now,
        );
    });
    std::thread::sleep(Duration::from_secs(1));
    let (code, v) = diagnose(&bed.file);
    let _ = stop_tx.send(true);
    let _ = rt.block_on(writer);
    assert_eq!(code, 3, "{v}");
    let findings = v["findings"].as_array().expect("findings");
    assert!(
        findings
            .iter()
            .any(|f| f["kind"] == Kind::LossyLink.as_str()
                && weft_twin::fault::Truth::normal(f["target"].as_str().unwrap_or(""))
                    == weft_twin::fault::Truth::normal(&want)),
        "{want} not named: {v}"
    );
    assert_eq!(findings.len(), 1, "one fault, one finding: {v}");
    let _ = std::fs::remove_dir_all(&dir);
}
