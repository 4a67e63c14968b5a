//! Scoring `weft diagnose` against faults injected with `weft testbed fault` on the emulated
//! small leaf-spine fabric: real BMv2, redis-server and plugin per switch, paced RoCE-class UDP
//! between every host and the next as background traffic. Needs root and BMv2; without them it
//! prints SKIPPED (WEFT_REQUIRE_BMV2=1 makes it fail).
//!
//! Per fault kind, WEFT_DIAGNOSE_TRIALS (default 3) trials with targets drawn from a seeded
//! generator (WEFT_DIAGNOSE_SEED, default 16), plus as many healthy windows. A trial injects the
//! fault, runs `weft diagnose --window W --output json` with W = 1 s, then 6 s, until a finding
//! names the injected kind and target (time to diagnosis: from the fault's onset, when `weft
//! testbed fault` returns, to the end of that run), clears the fault and waits until diagnose
//! sees a healthy fabric again.
//!
//! Every finding diagnose reports (all are above its reporting threshold) in every window run is
//! scored: one naming the injected kind and target is a true positive of that kind; any other —
//! another kind, or the right kind naming a bystander, in the 1 s window as in the 6 s one — is
//! a false positive of the kind it names. A reorder trial runs with extra background toward the
//! other host of the destination's leaf, heavier (250 pkt/s) than the injected RoCE stream
//! (200 pkt/s), so naming the host a leaf sends most to is wrong: reordering must be attributed
//! from the switch's own counts. Prints precision, recall and time to diagnosis per kind; fails
//! below 0.9 precision or recall overall, below 2/3 for any one kind (with 3 trials: one miss
//! at most), or on any finding in a healthy window.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::bed::{self, Bed, Needs, REPO};
use weft_testbed as tb;

const TEST: &str = "scenario_diagnose";
/// DSCP 26 (the lossless `roce` class) with ECT(0).
const TOS_ROCE_ECT0: &str = "106";
const WINDOWS: [&str; 2] = ["1s", "6s"];
/// Overall precision and recall at least this.
const MIN_OVERALL: f64 = 0.9;
/// Each kind's precision and recall at least this.
const MIN_PER_KIND: f64 = 0.66;
/// Background toward the reordered host's neighbour during a reorder trial, pkt/s: more than
/// the injected RoCE stream's 200.
const REORDER_DECOY_PPS: &str = "250";

/// A small deterministic generator (xorshift64*): the trials' targets are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[(self.next() % v.len() as u64) as usize]
    }
}

/// One injection: the fault command's arguments and what the top finding must say.
#[derive(Debug, Clone)]
struct Trial {
    kind: &'static str,
    args: Vec<String>,
    finding: &'static str,
    /// The finding's target must contain this.
    target: String,
}

#[derive(Debug, Default)]
struct Score {
    trials: u32,
    correct: u32,
    /// Findings of this kind reported (right or wrong, every window), and the wrong ones.
    reported: u32,
    wrong: u32,
    t2d: Vec<f64>,
}

impl Score {
    fn precision(&self) -> Option<f64> {
        (self.reported > 0)
            .then(|| f64::from(self.reported - self.wrong) / f64::from(self.reported))
    }
    fn recall(&self) -> Option<f64> {
        (self.trials > 0).then(|| f64::from(self.correct) / f64::from(self.trials))
    }
}

/// A switch's snapshot (`WEFT_COUNTERS_SNAPSHOT`) and its COUNTERS rows read in one script, so
/// both are of one moment: (the snapshot's stamp, the switch row's poll time, the packed poll,
/// every row, the packed histograms).
const SNAPSHOT_AND_ROWS: &str = r#"
local stamp = redis.call('HGET', KEYS[1], ARGV[1])
local polled = redis.call('HGET', 'COUNTERS:WEFT_SWITCH', ARGV[2])
local poll = redis.call('HGET', KEYS[1], ARGV[3])
local hist = redis.call('HGET', KEYS[1], ARGV[4])
local rows = {}
for _, k in ipairs(redis.call('KEYS', 'COUNTERS:*')) do
  rows[#rows + 1] = k
  rows[#rows + 1] = redis.call('HGETALL', k)
end
return {stamp or '', polled or '', poll or '', rows, hist or ''}
"#;

/// Reads switch `name`'s snapshot and rows at one moment and asserts the copies are the rows':
/// the snapshot's stamp is the current poll's, every field of every row they pack is in that
/// row with the same value (the rows hold more: other writers' fields), and every row with a
/// histogram has it in the copy. The plugin writes each copy with its rows in one MULTI, so
/// this holds at every moment, not only between writes. The rows compared.
fn copy_matches_rows(name: &str, endpoint: &str) -> usize {
    use weft_sonic_schema::snapshot;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let db = weft_sonic_db::SonicDb::from_endpoint(endpoint).expect("endpoint");
        let mut c = db
            .connect(weft_sonic_db::SonicDbId::CountersDb)
            .await
            .expect("COUNTERS_DB");
        let mut conn = c.raw().clone();
        type Reply = (
            String,
            String,
            String,
            Vec<(String, Vec<(String, String)>)>,
            String,
        );
        let (stamp, polled, poll, rows, hist): Reply = redis::Script::new(SNAPSHOT_AND_ROWS)
            .key(snapshot::KEY)
            .arg(snapshot::STAMP)
            .arg(weft_sonic_schema::counters::POLL_TIME)
            .arg(snapshot::POLL)
            .arg(snapshot::HIST)
            .invoke_async(&mut conn)
            .await
            .expect("snapshot and rows");
        let rows: BTreeMap<String, BTreeMap<String, String>> = rows
            .into_iter()
            .map(|(k, f)| (k, f.into_iter().collect()))
            .collect();
        let bucket = weft_sonic_schema::counters::bucket_name(0);
        let mut hists = snapshot::unpack(&hist);
        let with_hist = rows.values().filter(|f| f.contains_key(&bucket)).count();
        let mut all = snapshot::unpack(&poll);
        assert!(
            !stamp.is_empty() && stamp == polled,
            "{name}: the snapshot's stamp {stamp:?} is not the current poll's {polled:?}"
        );
        assert_eq!(
            hists.len(),
            with_hist,
            "{name}: {} histograms copied of {with_hist} rows with one",
            hists.len()
        );
        assert!(!all.is_empty(), "{name}: an empty snapshot");
        all.append(&mut hists);
        for (key, fields) in &all {
            let row = rows.get(&format!("COUNTERS:{key}"));
            assert!(
                row.is_some_and(|row| fields.iter().all(|(f, v)| row.get(f) == Some(v))),
                "{name}: copied row {key} differs from the DB's: {fields:?}\n{row:?}"
            );
        }
        all.len()
    })
}

/// Every finding of a diagnose run: (kind, target).
fn findings(v: &serde_json::Value) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            Some((
                f["kind"].as_str()?.to_string(),
                f["target"].as_str()?.to_string(),
            ))
        })
        .collect()
}

fn diagnose(weft: &Path, file: &Path, window: &str) -> serde_json::Value {
    diagnose_rec(weft, file, window, None)
}

/// With WEFT_DIAGNOSE_RECORD=DIR, where a window named `name` is recorded (the rule tests'
/// `diagnose/tests/data/<finding kind>--<target>--<n>.json` form).
fn record_path(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("WEFT_DIAGNOSE_RECORD")?;
    let _ = std::fs::create_dir_all(&dir);
    Some(PathBuf::from(dir).join(format!("{name}.json")))
}

fn diagnose_rec(
    weft: &Path,
    file: &Path,
    window: &str,
    record: Option<PathBuf>,
) -> serde_json::Value {
    let mut cmd = Command::new(weft);
    cmd.args(["diagnose", &file.to_string_lossy(), "--window", window])
        .args(["--interval", "500ms", "--output", "json"]);
    if let Some(r) = &record {
        cmd.arg("--record").arg(r);
    }
    let out = cmd.output().expect("weft diagnose");
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(3),
        "weft diagnose exit {code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("diagnose JSON");
    assert_eq!(
        v["healthy"].as_bool(),
        Some(code == Some(0)),
        "exit status and `healthy` disagree: {v}"
    );
    v
}

fn fault(weft: &Path, file: &Path, state: &Path, args: &[String]) {
    let out = Command::new(weft)
        .args(["testbed", "fault", &file.to_string_lossy()])
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .output()
        .expect("weft testbed fault");
    assert!(
        out.status.success(),
        "weft testbed fault {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn diagnose_names_each_injected_faults_kind_and_target_with_every_finding_scored_per_kind_and_nothing_in_healthy_windows()
 {
    let needs = Needs {
        cli: true,
        bins: &[("weft-traffic", "weft-traffic")],
        ..Needs::default()
    };
    let Some(programs) = bed::programs(TEST, &needs) else {
        return;
    };
    let weft = Path::new(env!("CARGO_BIN_EXE_weft"));
    let trials: u32 = std::env::var("WEFT_DIAGNOSE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let seed: u64 = std::env::var("WEFT_DIAGNOSE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);

    let t_up = Instant::now();
    let mut f = Bed::up_applied(&programs, "dgn", |t| t, &["--counter-interval", "300ms"]);
    let (dir, file, state) = (f.dir.clone(), f.file.clone(), f.state_dir());
    let st = f.state();
    println!("testbed up, applied and reachable in {:?}", t_up.elapsed());

    // Background: every host sends 40 pkt/s of RoCE-class ECT(0) UDP (8 flows) to the next.
    let probe = format!("{REPO}/tests/scripts/udp_probe.py");
    let hosts: Vec<tb::HostState> = st.hosts.clone();
    for h in &hosts {
        let c = Command::new("ip")
            .args(["netns", "exec", &h.netns, "python3", &probe, "recv"])
            .args(["--port", "5000", "--seconds", "3600", "--out"])
            .arg(dir.join(format!("bg-{}.json", h.name)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("receiver");
        f.keep("background", c);
    }
    for (i, h) in hosts.iter().enumerate() {
        let next = &hosts[(i + 1) % hosts.len()];
        let c = Command::new("ip")
            .args(["netns", "exec", &h.netns, "python3", &probe, "send"])
            .args([
                "--dst",
                &next.ipv4,
                "--port",
                "5000",
                "--tos",
                TOS_ROCE_ECT0,
            ])
            .args([
                "--pps",
                "40",
                "--seconds",
                "3600",
                "--flows",
                "8",
                "--size",
                "512",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("sender");
        f.keep("background", c);
    }
    std::thread::sleep(Duration::from_secs(3));
    // What diagnose reads of each switch, its plugin's packed copy of the poll, is current and
    // says what the rows say.
    for sw in &st.switches {
        let n = copy_matches_rows(&sw.name, &sw.db);
        println!("{}: the snapshot of its poll matches its {n} rows", sw.name);
    }

    // The trials, drawn from the seed.
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let host_names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    let fabric_ports: Vec<String> = st
        .switches
        .iter()
        .flat_map(|s| {
            tb::uplinks(&st, &s.name)
                .into_iter()
                .map(move |p| format!("{}:{p}", s.name))
        })
        .collect();
    let spines: Vec<String> = st
        .switches
        .iter()
        .filter(|s| s.name.starts_with("spine"))
        .map(|s| s.name.clone())
        .collect();
    let tools = tb::fault::Tools::locate();
    let leaf_of = |h: &str| h.split('-').next().unwrap_or(h).to_string();
    let mut plan: Vec<Trial> = Vec::new();
    for _ in 0..trials {
        let h = rng.pick(&host_names).clone();
        plan.push(Trial {
            kind: "pfc-storm",
            args: vec!["pfc-storm".into(), h.clone()],
            finding: "pfc_storm",
            target: h,
        });
        let h = rng.pick(&host_names).clone();
        plan.push(Trial {
            kind: "stuck-receiver",
            args: vec![
                "stuck-receiver".into(),
                h.clone(),
                "--rate".into(),
                "10".into(),
            ],
            finding: "slow_receiver",
            target: h,
        });
        let p = rng.pick(&fabric_ports).clone();
        let pct = 25 + rng.next() % 11;
        plan.push(Trial {
            kind: "loss",
            args: vec![
                "loss".into(),
                p.clone(),
                "--percent".into(),
                pct.to_string(),
            ],
            finding: "lossy_link",
            target: p,
        });
        let p = rng.pick(&fabric_ports).clone();
        plan.push(Trial {
            kind: "slow",
            args: vec!["slow".into(), p.clone(), "--rate".into(), "5".into()],
            finding: "slow_link",
            target: p,
        });
        let sw = rng.pick(&spines).clone();
        let routes = tb::fault::routes(&st, &tools, &sw).expect("routes over P4Runtime");
        let prefix = rng.pick(&routes).clone();
        plan.push(Trial {
            kind: "blackhole",
            args: vec!["blackhole".into(), sw.clone(), prefix],
            finding: "black_hole",
            target: sw,
        });
        let h = rng.pick(&host_names).clone();
        plan.push(Trial {
            kind: "incast",
            args: vec!["incast".into(), h.clone(), "--senders".into(), "4".into()],
            finding: "congestion",
            target: h,
        });
        let src = rng.pick(&host_names).clone();
        let others: Vec<String> = host_names
            .iter()
            .filter(|h| leaf_of(h) != leaf_of(&src))
            .cloned()
            .collect();
        let dst = rng.pick(&others).clone();
        plan.push(Trial {
            kind: "reorder",
            args: vec![
                "reorder".into(),
                src,
                dst.clone(),
                "--delay".into(),
                "20ms".into(),
            ],
            finding: "reordering",
            target: dst,
        });
    }

    let mut scores: BTreeMap<&'static str, Score> = BTreeMap::new();
    let mut healthy_findings = Vec::new();
    let settle = |what: &str| {
        // Until diagnose sees a healthy fabric again (a watchdog restoring, drift rows
        // cleared, queues drained: BMv2 keeps the departure times it gave the packets already
        // queued at a lowered rate, so a backlog drains at the old rate), at most 30 s.
        let t = Instant::now();
        loop {
            let v = diagnose(weft, &file, "4s");
            if v["healthy"].as_bool() == Some(true) {
                return;
            }
            if t.elapsed() > Duration::from_secs(30) {
                panic!("still not healthy 30 s after clearing {what}: {v}");
            }
        }
    };
    let t_trials = Instant::now();
    for i in 0..trials {
        // A healthy window first, then this round's faults.
        let v = diagnose_rec(
            weft,
            &file,
            WINDOWS[1],
            record_path(&format!("healthy--all--{i}")),
        );
        let found: Vec<String> = v["findings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| format!("{} {}", x["kind"], x["target"]))
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "healthy window {i}: {}",
            if found.is_empty() {
                "nothing found".to_string()
            } else {
                found.join("; ")
            }
        );
        if !found.is_empty() {
            healthy_findings.push((i, v.clone()));
            for (k, _) in findings(&v) {
                let s = scores.entry(kind_of_finding(&k)).or_default();
                s.reported += 1;
                s.wrong += 1;
            }
        }
        for t in plan.iter().skip(i as usize * 7).take(7) {
            if t.kind == "reorder" {
                f.keep("decoy", reorder_decoy(&hosts, &t.args[1], &t.target));
            }
            // Time to diagnosis counts from the fault's onset: when the command returns (the
            // PAUSE injectors return once their first frame is out).
            let t_cmd = Instant::now();
            fault(weft, &file, &state, &t.args);
            let took = t_cmd.elapsed();
            let injected = Instant::now();
            let mut hit = None;
            let mut seen = Vec::new();
            for w in WINDOWS {
                let rec = record_path(&format!("{}--{}--{i}--{w}", t.finding, t.target));
                let v = diagnose_rec(weft, &file, w, rec);
                let all = findings(&v);
                let right = |(k, tg): &(String, String)| k == t.finding && tg.contains(&t.target);
                // Every wrong finding counts, in whichever window it came.
                for (k, tg) in all.iter().filter(|x| !right(x)) {
                    let s = scores.entry(kind_of_finding(k)).or_default();
                    s.reported += 1;
                    s.wrong += 1;
                    seen.push(format!("{k} {tg} (wrong, {w} window)"));
                }
                if all.iter().any(right) {
                    hit = Some((injected.elapsed(), w));
                    break;
                }
            }
            let s = scores.entry(t.kind).or_default();
            s.trials += 1;
            if let Some((t2d, _)) = hit {
                s.correct += 1;
                s.reported += 1;
                s.t2d.push(t2d.as_secs_f64());
            }
            println!(
                "{:<15} {:<40} → {} (injecting took {:.1} s){}{}",
                t.kind,
                t.args[1..].join(" "),
                hit.map_or("MISSED".to_string(), |(t2d, w)| format!(
                    "{} {} in the {w} window, {:.1} s after onset",
                    t.finding,
                    t.target,
                    t2d.as_secs_f64()
                )),
                took.as_secs_f64(),
                if seen.is_empty() { "" } else { "; also: " },
                seen.join("; ")
            );
            fault(weft, &file, &state, &["clear".to_string()]);
            f.stop("decoy");
            settle(t.kind);
        }
    }
    let elapsed = t_trials.elapsed();

    println!(
        "\n{:<15} {:>6} {:>8} {:>9} {:>10} {:>7} {:>12} {:>12}",
        "kind", "trials", "correct", "reported", "precision", "recall", "t2d median", "t2d max"
    );
    let (mut tp, mut reported, mut total) = (0u32, 0u32, 0u32);
    let mut below = Vec::new();
    for (k, s) in &scores {
        let mut t = s.t2d.clone();
        t.sort_by(f64::total_cmp);
        let med = t.get(t.len() / 2).copied();
        let max = t.last().copied();
        println!(
            "{:<15} {:>6} {:>8} {:>9} {:>10} {:>7} {:>12} {:>12}",
            k,
            s.trials,
            s.correct,
            s.reported,
            ratio(s.reported - s.wrong, s.reported),
            ratio(s.correct, s.trials),
            med.map_or("-".into(), |x| format!("{x:.1} s")),
            max.map_or("-".into(), |x| format!("{x:.1} s")),
        );
        // A kind that was never injected but reported is all false positives (precision 0).
        for (what, v) in [("precision", s.precision()), ("recall", s.recall())] {
            if let Some(v) = v.filter(|v| *v < MIN_PER_KIND) {
                below.push(format!("{k}: {what} {v:.2} below {MIN_PER_KIND}"));
            }
        }
        tp += s.correct;
        reported += s.reported;
        total += s.trials;
    }
    let precision = f64::from(tp) / f64::from(reported.max(1));
    let recall = f64::from(tp) / f64::from(total.max(1));
    println!(
        "overall: {tp} of {total} trials named kind and target; {reported} findings reported; precision {precision:.2}, recall {recall:.2}; \
         {trials} healthy windows, {} with findings; trials took {:.0} s (seed {seed})",
        healthy_findings.len(),
        elapsed.as_secs_f64()
    );
    assert!(
        healthy_findings.is_empty(),
        "findings in healthy windows: {healthy_findings:?}"
    );
    assert!(
        precision >= MIN_OVERALL && recall >= MIN_OVERALL,
        "precision {precision:.2} recall {recall:.2} below {MIN_OVERALL}"
    );
    assert!(below.is_empty(), "{}", below.join("\n"));
}

/// Paced UDP (not RoCE: the PSN tracker does not see it) toward the other host of `dst`'s leaf,
/// from a host on neither `src`'s nor `dst`'s leaf, at [`REORDER_DECOY_PPS`]: the reordered
/// host is then not the one its leaf sends most to.
fn reorder_decoy(hosts: &[tb::HostState], src: &str, dst: &str) -> std::process::Child {
    let leaf_of = |h: &str| h.split('-').next().unwrap_or(h).to_string();
    let mate = hosts
        .iter()
        .find(|h| leaf_of(&h.name) == leaf_of(dst) && h.name != dst)
        .expect("another host on the destination's leaf");
    let from = hosts
        .iter()
        .find(|h| leaf_of(&h.name) != leaf_of(dst) && leaf_of(&h.name) != leaf_of(src))
        .expect("a host on a third leaf");
    let probe = format!("{REPO}/tests/scripts/udp_probe.py");
    Command::new("ip")
        .args(["netns", "exec", &from.netns, "python3", &probe, "send"])
        .args([
            "--dst",
            &mate.ipv4,
            "--port",
            "5000",
            "--tos",
            TOS_ROCE_ECT0,
        ])
        .args(["--pps", REORDER_DECOY_PPS, "--seconds", "600"])
        .args(["--flows", "8", "--size", "512"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("decoy sender")
}

/// The fault kind a finding kind stands for (a wrong top finding counts against its kind's
/// precision).
fn kind_of_finding(k: &str) -> &'static str {
    match k {
        "pfc_storm" => "pfc-storm",
        "slow_receiver" => "stuck-receiver",
        "lossy_link" => "loss",
        "slow_link" => "slow",
        "black_hole" => "blackhole",
        "congestion" => "incast",
        "reordering" => "reorder",
        _ => "other",
    }
}

fn ratio(a: u32, b: u32) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.2}", f64::from(a) / f64::from(b))
    }
}
