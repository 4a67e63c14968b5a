//! Faults on purpose. `weft testbed kill|restart` on a `--db-only` testbed (redis-servers
//! only: runs everywhere), and the chaos trials on the full testbed (BMv2, plugins, two
//! `weft run --ha` replicas on a real etcd): each trial starts a flap storm on a random link,
//! kills -9 one of {a plugin, a BMv2, a redis-server, the leader} at a random moment of it,
//! restarts it, waits until the fabric has converged and `weft plan --detailed-exitcode` has
//! nothing to do, then reads every switch back with the independent p4rt_dump.py and compares
//! entry by entry with what the switches held after the first clean apply (itself checked
//! against the plan): 0 lost, 0 stray, 0 duplicate entries, every trial. Before the trials, a
//! paced stream runs while no controller runs at all (fail-static) and loses nothing.
//!
//! The baseline itself is checked against the compiled plan (`weft plan --offline --output
//! json`) by the independent `tests/scripts/p4rt_plan_check.py`, entry by entry in every table
//! the controller writes: what `weft plan --detailed-exitcode` says compares only the digests the
//! plugins publish.
//!
//! Seeded: WEFT_CHAOS_SEED (default 18) and WEFT_CHAOS_TRIALS (default 4 here; the full run is
//! `WEFT_CHAOS_TRIALS=50 cargo test -p weft-controller --test chaos_trials -- --nocapture`). The
//! fault kinds come in shuffled rounds of all four, so every 4 trials kill each kind once; a
//! leader trial kills the replica that leads at that moment (none leading is a failure).
//!
//! The same trials run with the controller writing over SONiC's ZMQ channel (the testbed
//! brought up with `--transport zmq`, the replicas' intent saying `p4rt_transport: zmq`): by
//! default a leaner set, 2 trials that kill a plugin and the leader, the two peers of the
//! channel (WEFT_CHAOS_TRIALS runs more, in rounds of those two; WEFT_CHAOS_KINDS=plugin,bmv2,
//! redis,leader all four).
//! Needs root, BMv2, etcd and the `.venv`; without BMv2 it prints SKIPPED, where BMv2 is
//! installed anything missing is a failure.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::transport::{Transport, one_fabric_at_a_time};
use weft_testbed as tb;
use weft_testbed::chaos::Part;

fn weft(sd: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .args(if args[0] == "testbed" {
            vec!["--state-dir".to_string(), sd.to_string_lossy().into_owned()]
        } else {
            vec![]
        })
        .env_remove("WEFT_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("weft");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn pid_in_state(sd: &Path, name: &str) -> u32 {
    tb::State::load(sd)
        .expect("state")
        .processes
        .iter()
        .find(|p| p.name == name)
        .map(|p| p.pid)
        .expect("process")
}

#[test]
fn testbed_kill_and_restart_record_the_new_pid_so_status_and_down_see_it() {
    let (dir, fabric, text) = common::small_example("kr");
    let sd = dir.join("state");
    let file = dir.join("fabric.yaml");
    std::fs::write(&file, text).expect("intent");
    let f = file.to_string_lossy().into_owned();
    struct Down(PathBuf, PathBuf, String);
    impl Drop for Down {
        fn drop(&mut self) {
            let _ = tb::down(&self.0, &self.2);
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let _down = Down(sd.clone(), dir.clone(), fabric.clone());
    let (code, out) = weft(&sd, &["testbed", "up", &f, "--db-only"]);
    assert_eq!(code, 0, "{out}");
    let old = pid_in_state(&sd, "redis leaf2");

    let (code, out) = weft(&sd, &["testbed", "kill", &f, "leaf2", "redis"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("killed redis leaf2 (pid {old})")),
        "{out}"
    );
    assert!(!tb::pid_alive(old));
    let (_, out) = weft(&sd, &["testbed", "status", &f]);
    let line = out
        .lines()
        .find(|l| l.contains("redis leaf2"))
        .unwrap_or_default();
    assert!(
        line.contains(&format!(
            "NOT RUNNING (restart: weft testbed restart {fabric} leaf2 redis"
        )),
        "{out}"
    );
    // Outside the switch's processes: refused with a reason.
    let (code, out) = weft(&sd, &["testbed", "kill", &f, "leaf2", "bmv2"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("runs no bmv2 on leaf2 (--db-only)"), "{out}");
    let (code, out) = weft(&sd, &["testbed", "kill", &f, "leaf9", "redis"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("has no switch leaf9"), "{out}");

    let (code, out) = weft(&sd, &["testbed", "restart", &f, "leaf2", "redis"]);
    assert_eq!(code, 0, "{out}");
    let new = pid_in_state(&sd, "redis leaf2");
    assert_ne!(new, old);
    assert!(tb::pid_alive(new));
    let (_, out) = weft(&sd, &["testbed", "status", &f]);
    assert!(!out.contains("NOT RUNNING"), "{out}");
    // The restarted redis-server answers: an apply reaches all six switches.
    let (code, out) = weft(&sd, &["apply", &f, "--no-wait"]);
    assert_eq!(code, 0, "{out}");
    // A restart of a running process replaces it.
    let (code, out) = weft(&sd, &["testbed", "restart", &f, "leaf2", "redis"]);
    assert_eq!(code, 0, "{out}");
    let newer = pid_in_state(&sd, "redis leaf2");
    assert!(newer != new && !tb::pid_alive(new) && tb::pid_alive(newer));

    let (code, out) = weft(&sd, &["testbed", "down", &f]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("stopped redis leaf2 (pid {newer})")),
        "{out}"
    );
    assert!(!tb::pid_alive(newer), "down stops the restarted process");
}

/// A small deterministic generator (xorshift64*): the trials replay from their seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Everything a switch holds, as the independent p4rt_dump.py reads it: one canonical line per
/// table entry, action-profile member and group, and the text as printed.
fn dump(st: &tb::State, switch: &str) -> Result<(Vec<String>, String), String> {
    let sw = st.switch(switch).ok_or("no switch")?;
    let text = common::bed::p4rt_dump_text(&st.netns, &sw.p4rt_address, sw.device_id)?;
    let v: serde_json::Value = serde_json::from_str(&common::bed::quote_big_numbers(&text))
        .map_err(|e| format!("p4rt_dump.py JSON: {e}"))?;
    let mut lines = Vec::new();
    if let Some(tables) = v["tables"].as_object() {
        for (t, entries) in tables {
            for e in entries.as_array().into_iter().flatten() {
                lines.push(format!("table {t} {e}"));
            }
        }
    }
    for kind in ["members", "groups"] {
        if let Some(profiles) = v[kind].as_object() {
            for (p, items) in profiles {
                for (id, item) in items.as_object().into_iter().flatten() {
                    let item = match item.as_array() {
                        // A group's members in any order are the same group.
                        Some(ms) => {
                            let mut ms: Vec<String> = ms.iter().map(|m| m.to_string()).collect();
                            ms.sort();
                            ms.join(",")
                        }
                        None => item.to_string(),
                    };
                    lines.push(format!("{kind} {p} {id} {item}"));
                }
            }
        }
    }
    lines.sort();
    Ok((lines, text))
}

/// The match of a table line (what makes two entries the same entry).
fn entry_key(line: &str) -> String {
    let Some(rest) = line.strip_prefix("table ") else {
        return line.split(' ').take(3).collect::<Vec<_>>().join(" ");
    };
    let (t, json) = rest.split_once(' ').unwrap_or((rest, "{}"));
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    format!("{t} {} {}", v["match"], v["priority"])
}

#[derive(Default, Debug)]
struct Diff {
    lost: usize,
    stray: usize,
    duplicate: usize,
    detail: Vec<String>,
}

fn compare(want: &[String], got: &[String]) -> Diff {
    let w: BTreeSet<&String> = want.iter().collect();
    let g: BTreeSet<&String> = got.iter().collect();
    let mut d = Diff::default();
    for x in w.difference(&g) {
        d.lost += 1;
        d.detail.push(format!("lost {x}"));
    }
    for x in g.difference(&w) {
        d.stray += 1;
        d.detail.push(format!("stray {x}"));
    }
    let mut keys: BTreeMap<String, usize> = BTreeMap::new();
    for x in got {
        *keys.entry(entry_key(x)).or_default() += 1;
    }
    for (k, n) in keys {
        if n > 1 {
            d.duplicate += n - 1;
            d.detail.push(format!("duplicate ×{n} {k}"));
        }
    }
    d
}

struct Replica {
    id: String,
    child: Option<Child>,
    status: PathBuf,
}

impl Replica {
    fn start(id: &str, file: &str, etcd: &str, dir: &Path) -> Replica {
        let status = dir.join(format!("{id}.json"));
        let log = dir.join(format!("{id}.log"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args([
                "run",
                file,
                "--resync",
                "5s",
                "--timeout",
                "5s",
                "--ha",
                etcd,
            ])
            .args(["--id", id, "--ha-ttl", "1s", "--status-file"])
            .arg(&status)
            .env("WEFT_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("weft run --ha");
        Replica {
            id: id.to_string(),
            child: Some(child),
            status,
        }
    }
    fn status(&self) -> serde_json::Value {
        std::fs::read_to_string(&self.status)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }
    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
    fn leading(&mut self) -> bool {
        self.running() && self.status()["ha"]["role"] == "leader"
    }
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill9();
    }
}

struct Bed {
    sd: PathBuf,
    dir: PathBuf,
    fabric: String,
}

impl Drop for Bed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let keep = std::env::temp_dir().join(format!("weft-failed-{}", self.fabric));
            let _ = Command::new("cp")
                .arg("-r")
                .arg(&self.dir)
                .arg(&keep)
                .status();
            eprintln!("logs kept in {}", keep.display());
        }
        let _ = tb::down(&self.sd, &self.fabric);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The fault kinds of the trials: a plugin, a BMv2, a redis-server, the leading replica.
const PLUGIN: u64 = 0;
const LEADER: u64 = 3;
const KIND_NAMES: [&str; 4] = ["plugin", "bmv2", "redis", "leader"];

#[test]
fn chaos_trials_kill_a_plugin_bmv2_redis_or_the_leader_mid_storm_and_lose_nothing() {
    chaos_trials(
        "chaos_trials_kill_a_plugin_bmv2_redis_or_the_leader_mid_storm_and_lose_nothing",
        Transport::Redis,
        &[0, 1, 2, 3],
    );
}

#[test]
fn chaos_trials_over_zmq_kill_a_plugin_or_the_leader_mid_storm_and_lose_nothing() {
    chaos_trials(
        "chaos_trials_over_zmq_kill_a_plugin_or_the_leader_mid_storm_and_lose_nothing",
        Transport::Zmq,
        &[PLUGIN, LEADER],
    );
}

/// The trials over `transport`, killing the fault `kinds` in shuffled rounds (by default one
/// round: WEFT_CHAOS_TRIALS says how many trials; WEFT_CHAOS_KINDS, e.g. `plugin,bmv2`, which
/// kinds).
fn chaos_trials(test: &str, transport: Transport, kinds: &[u64]) {
    let _turn = one_fabric_at_a_time();
    let named: Option<Vec<u64>> = std::env::var("WEFT_CHAOS_KINDS").ok().map(|v| {
        v.split(',')
            .map(|k| {
                let i = KIND_NAMES.iter().position(|n| *n == k.trim());
                i.unwrap_or_else(|| panic!("WEFT_CHAOS_KINDS: {k:?} is not one of {KIND_NAMES:?}"))
                    as u64
            })
            .collect()
    });
    let kinds = named.as_deref().unwrap_or(kinds);
    let needs = common::bed::Needs {
        venv: true,
        ..Default::default()
    };
    if common::bed::programs(test, &needs).is_none() {
        return;
    }
    let trials: u64 = std::env::var("WEFT_CHAOS_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(kinds.len() as u64);
    let seed: u64 = std::env::var("WEFT_CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(18);
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let etcd = weft_tests::etcd::Etcd::start().expect("etcd (scripts/setup.sh installs it)");

    let (dir, fabric, text) = common::small_example(&format!("ch{}", transport.tag()));
    let sd = dir.join("state");
    // The testbed comes up from the example as it is, told the transport on its command line;
    // the replicas (and `weft plan`) read the intent that says it.
    let up_file = dir.join("testbed.yaml");
    std::fs::write(&up_file, &text).expect("intent");
    let file = dir.join("fabric.yaml");
    std::fs::write(&file, transport.intent(&text)).expect("intent");
    let f = file.to_string_lossy().into_owned();
    let bed = Bed {
        sd: sd.clone(),
        dir: dir.clone(),
        fabric: fabric.clone(),
    };
    let flag = match transport {
        Transport::Redis => "redis",
        Transport::Zmq => "zmq",
    };
    let (code, out) = weft(
        &sd,
        &[
            "testbed",
            "up",
            &up_file.to_string_lossy(),
            "--transport",
            flag,
        ],
    );
    assert_eq!(code, 0, "{out}");
    let st = tb::State::load(&sd).expect("state");
    let switches: Vec<String> = st.switches.iter().map(|s| s.name.clone()).collect();
    // Every cabled port of every leaf: the storm's links.
    let mut ports: Vec<(String, String)> = Vec::new();
    for s in &st.switches {
        if s.name.starts_with("leaf") {
            for p in tb::uplinks(&st, &s.name) {
                ports.push((s.name.clone(), p));
            }
        }
    }
    let mut replicas: Vec<Replica> = ["ctl-a", "ctl-b"]
        .iter()
        .map(|id| Replica::start(id, &f, &etcd.url(), &dir))
        .collect();

    let converged = |replicas: &mut Vec<Replica>, deadline: Duration| -> Option<Duration> {
        let t0 = Instant::now();
        while t0.elapsed() < deadline {
            let lead = replicas.iter_mut().position(|r| r.leading());
            if let Some(i) = lead {
                let s = replicas[i].status();
                let settled = s["switches"].as_array().is_some_and(|v| v.is_empty())
                    && s["switches_converged"].as_u64() == Some(6)
                    && s["links"]
                        .as_array()
                        .is_some_and(|ls| ls.iter().all(|l| l["in_use"] == true));
                if settled && weft(&bed.sd, &["plan", &f, "--detailed-exitcode"]).0 == 0 {
                    return Some(t0.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        None
    };
    assert!(
        converged(&mut replicas, Duration::from_secs(180)).is_some(),
        "the first leader converges the fabric"
    );
    let topo = weft_topology::load_file(&file).expect("intent");
    common::bed::assert_entries_came_over(&topo, transport == Transport::Zmq);
    // What every switch holds after a clean apply that the plan finds nothing to add to.
    let st = tb::State::load(&sd).expect("state");
    let dumps: BTreeMap<String, (Vec<String>, String)> = switches
        .iter()
        .map(|s| (s.clone(), dump(&st, s).expect("p4rt_dump.py")))
        .collect();
    // The baseline is what the compiled plan says, entry by entry (the switches' own digests,
    // which `weft plan` compares, are not a witness): checked by the independent reader.
    let (code, plan) = weft(&sd, &["plan", &f, "--offline", "--output", "json"]);
    assert_eq!(code, 0, "weft plan --offline: {plan}");
    let plan: serde_json::Value = serde_json::from_str(&plan).expect("plan JSON");
    for (s, (lines, text)) in &dumps {
        let d = compare(lines, lines);
        assert_eq!(d.duplicate, 0, "{s}: {:?}", d.detail);
        match common::bed::check_against_plan(&dir, &topo, &plan, s, text) {
            Ok(summary) => eprintln!("baseline {summary}: identical"),
            Err(diff) => panic!("baseline differs from the compiled plan: {diff}"),
        }
    }
    let baseline: BTreeMap<String, Vec<String>> = dumps
        .into_iter()
        .map(|(s, (lines, _))| (s, lines))
        .collect();
    let total: usize = baseline.values().map(Vec::len).sum();
    eprintln!(
        "chaos over {transport:?}: seed {seed}, {trials} trials; baseline {total} entries on 6 switches"
    );

    // Fail-static: with no controller at all (both replicas killed -9) the switches keep every
    // entry and a paced stream fares as well as with the controller up (a control run first:
    // BMv2 on a loaded 2-core machine drops a few packets on its own).
    let st = tb::State::load(&sd).expect("state");
    let hosts: Vec<String> = st.hosts.iter().map(|h| h.name.clone()).collect();
    let (src, dst) = (hosts[0].clone(), hosts[hosts.len() - 1].clone());
    let paced = |port: u16| tb::Stream {
        src: &src,
        dst: &dst,
        port,
        pps: 100,
        seconds: 6.0,
        flows: 4,
    };
    let (control, ()) = tb::stream(&st, &paced(9717), || ()).expect("paced stream");
    let (r, ()) = tb::stream(&st, &paced(9718), || {
        std::thread::sleep(Duration::from_secs(1));
        for r in replicas.iter_mut() {
            r.kill9();
        }
        std::thread::sleep(Duration::from_secs(3));
    })
    .expect("paced stream");
    eprintln!(
        "fail-static: {src} → {dst} 100 pps × 6 s: with the controller {} received, {} lost; with no controller for ≥ 4 s {} received, {} lost",
        control.unique, control.lost, r.unique, r.lost
    );
    for s in &switches {
        let d = compare(&baseline[s], &dump(&st, s).expect("p4rt_dump.py").0);
        assert!(
            d.detail.is_empty(),
            "{s} changed with no controller: {:?}",
            d.detail
        );
    }
    assert!(
        r.lost <= (2 * control.lost).max(r.unique / 100),
        "no controller lost more than the control run: {r:?} vs {control:?}"
    );
    replicas = ["ctl-a", "ctl-b"]
        .iter()
        .map(|id| Replica::start(id, &f, &etcd.url(), &dir))
        .collect();
    assert!(
        converged(&mut replicas, Duration::from_secs(120)).is_some(),
        "the restarted replicas lead again"
    );

    let mut faults: BTreeMap<String, u32> = BTreeMap::new();
    let mut times: Vec<f64> = Vec::new();
    let mut bad = Vec::new();
    // The fault kinds in shuffled rounds of all of `kinds`: any round's worth of consecutive
    // trials from a round's start kill each kind once, so CI's default trials cover them all.
    let mut round: Vec<u64> = Vec::new();
    for trial in 0..trials {
        if round.is_empty() {
            round = kinds.to_vec();
            for i in (1..round.len()).rev() {
                round.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        let (sw, port) = ports[rng.below(ports.len() as u64) as usize].clone();
        let flaps = 3 + rng.below(8) as u32;
        let interval = Duration::from_millis(40 + rng.below(60));
        let storm_ms = u64::from(flaps) * 2 * interval.as_millis() as u64;
        let at = Duration::from_millis(rng.below(storm_ms.max(1)));
        let kind = round.remove(0);
        let victim = switches[rng.below(switches.len() as u64) as usize].clone();
        let down_for = Duration::from_millis(rng.below(1000));
        let st = tb::State::load(&sd).expect("state");
        let storm = {
            let (st, sw, port) = (st.clone(), sw.clone(), port.clone());
            std::thread::spawn(move || tb::flap(&st, &sw, &port, flaps, interval))
        };
        std::thread::sleep(at);
        let what = match kind {
            0..=2 => {
                let part = Part::ALL[kind as usize];
                tb::chaos::kill(&sd, &victim, part).expect("kill");
                std::thread::sleep(down_for);
                tb::chaos::restart(&sd, &victim, part).expect("restart");
                format!("{} {victim}", part.word())
            }
            _ => {
                // The replica leading now, whatever its status file says a moment later; a
                // trial without one kills nothing and counts as no leader trial.
                let t_lead = Instant::now();
                let leader = loop {
                    if let Some(i) = replicas.iter_mut().position(|r| r.leading()) {
                        break Some(i);
                    }
                    if t_lead.elapsed() > Duration::from_secs(10) {
                        break None;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                };
                match leader {
                    Some(i) => {
                        let id = replicas[i].id.clone();
                        replicas[i].kill9();
                        std::thread::sleep(down_for);
                        replicas[i] = Replica::start(&id, &f, &etcd.url(), &dir);
                        format!("leader {id}")
                    }
                    None => {
                        bad.push(format!(
                            "trial {trial}: no replica led for 10 s during the storm: no leader was killed"
                        ));
                        "none (no leader to kill)".to_string()
                    }
                }
            }
        };
        *faults
            .entry(what.split(' ').next().unwrap_or("?").to_string())
            .or_default() += 1;
        let _ = storm.join();
        let t0 = Instant::now();
        let took = converged(&mut replicas, Duration::from_secs(120));
        let took = match took {
            Some(_) => t0.elapsed(),
            None => {
                bad.push(format!(
                    "trial {trial} ({what}): did not converge within 120 s"
                ));
                continue;
            }
        };
        times.push(took.as_secs_f64());
        let st = tb::State::load(&sd).expect("state");
        let mut sum = Diff::default();
        for s in &switches {
            match dump(&st, s) {
                Ok((got, _)) => {
                    let d = compare(&baseline[s], &got);
                    sum.lost += d.lost;
                    sum.stray += d.stray;
                    sum.duplicate += d.duplicate;
                    sum.detail
                        .extend(d.detail.into_iter().map(|x| format!("{s}: {x}")));
                }
                Err(e) => sum.detail.push(format!("{s}: p4rt_dump.py failed: {e}")),
            }
        }
        eprintln!(
            "trial {trial}: storm {flaps}×{interval:?} on {sw}:{port}, kill -9 {what} at {at:?} for {down_for:?}: converged in {:.1} s; lost {} stray {} duplicate {}",
            took.as_secs_f64(),
            sum.lost,
            sum.stray,
            sum.duplicate
        );
        if !sum.detail.is_empty() {
            bad.push(format!(
                "trial {trial} ({what}): {}",
                sum.detail
                    .iter()
                    .take(10)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    times.sort_by(f64::total_cmp);
    eprintln!(
        "chaos: {} trials, faults {faults:?}, converge p50 {:.1} s p99 {:.1} s (after the storm ended)",
        trials,
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
    if trials >= kinds.len() as u64 {
        for kind in kinds.iter().map(|&k| KIND_NAMES[k as usize]) {
            if !faults.contains_key(kind) {
                bad.push(format!("no trial killed a {kind}: {faults:?}"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    drop(replicas);
    drop(bed);
}
