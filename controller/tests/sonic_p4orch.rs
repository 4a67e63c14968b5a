//! `weft apply`, `weft apply --down` and `weft plan` against switches whose P4RT consumer is
//! SONiC's own p4orch (`consumer: sonic`), on both transports, with real redis-servers and a
//! consumer that does only what p4orch does (tests/scripts/p4orch_standin.py: swss-common's
//! pops and response notifications, or its ZMQ request/reply; the applied state written back
//! to APPL_DB; nothing before `PORT_TABLE:PortInitDone`). No Weft code answers.

mod common;
#[path = "common/stand_in.rs"]
#[allow(dead_code)]
mod stand_in;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stand_in::{example_on, redis_servers, scratch};
use weft_tests::redis::RedisServer;

const SWITCHES: [&str; 2] = ["leaf1", "spine1"];

/// The stand-in p4orch of one switch, killed by PID when dropped.
struct P4orch(Child);

impl Drop for P4orch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python() -> PathBuf {
    let p = Path::new(common::bed::REPO).join(".venv/bin/python");
    assert!(
        p.exists(),
        "{} missing: scripts/setup.sh makes it (redis-py and pyzmq for the p4orch stand-in)",
        p.display()
    );
    p
}

fn start_p4orch(redis: &RedisServer, zmq: Option<&str>, refuse: &[&str], log: &Path) -> P4orch {
    let mut cmd = Command::new(python());
    cmd.arg(format!(
        "{}/tests/scripts/p4orch_standin.py",
        common::bed::REPO
    ))
    .arg("--redis")
    .arg(redis.socket_path());
    if let Some(z) = zmq {
        cmd.args(["--zmq", z]);
    }
    for t in refuse {
        cmd.args(["--refuse-table", t]);
    }
    let log_file = std::fs::File::create(log).expect("log");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .expect("python3 p4orch_standin.py");
    // "ready" once it serves: the ZMQ socket is bound, the Redis consumer subscribed.
    let mut out = child.stdout.take().expect("stdout");
    let mut buf = [0u8; 6];
    use std::io::Read;
    let ready = out.read_exact(&mut buf).is_ok() && &buf == b"ready\n";
    let guard = P4orch(child);
    assert!(
        ready,
        "the p4orch stand-in did not start (see {})",
        log.display()
    );
    guard
}

/// The fabric with leaf1 and spine1 on `dbs`, both `consumer: sonic`, over ZMQ when `zmq` names
/// each switch's endpoint.
fn intent(name: &str, dir: &Path, dbs: &[String], zmq: Option<&[String]>) -> PathBuf {
    let file = example_on(name, dir, &SWITCHES, dbs);
    let mut text = std::fs::read_to_string(&file).expect("intent");
    for (i, s) in SWITCHES.iter().enumerate() {
        let at = format!("  - name: {s}\n");
        let mut extra = "    consumer: sonic\n".to_string();
        if let Some(eps) = zmq {
            extra += &format!("    p4rt_transport: zmq\n    zmq_endpoint: {}\n", eps[i]);
        }
        text = text.replacen(&at, &format!("{at}{extra}"), 1);
    }
    std::fs::write(&file, text).expect("intent");
    file
}

fn weft(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .output()
        .expect("run weft");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// `weft apply` of leaf1 and spine1, giving up after `timeout` (and, on a switch not ready,
/// after 2s of retries).
fn apply(file: &Path, timeout: &str, extra: &[&str]) -> (i32, String) {
    let f = file.to_string_lossy();
    let mut args = vec![
        "apply",
        &f,
        "--switch",
        "leaf1,spine1",
        "--timeout",
        timeout,
        "--retry",
        "2s",
    ];
    args.extend_from_slice(extra);
    weft(&args)
}

fn plan(file: &Path, extra: &[&str]) -> (i32, String) {
    let f = file.to_string_lossy();
    let mut args = vec!["plan", &f, "--switch", "leaf1,spine1"];
    args.extend_from_slice(extra);
    weft(&args)
}

fn p4rt_rows(r: &RedisServer, db: u8) -> usize {
    r.cli(db, &["KEYS", "P4RT_TABLE:*"])
        .expect("redis-cli")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

fn ports_init_done(r: &RedisServer) {
    r.cli(0, &["HSET", "PORT_TABLE:PortInitDone", "lanes", "0"])
        .expect("redis-cli");
}

fn wait_until(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < deadline, "{what} within {deadline:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Not ready before SONiC says so; then apply, a second apply writing nothing, apply --down,
/// and the plans after each: every switch in step with what p4orch left in APPL_DB.
fn apply_down_and_plan_against_p4orch(zmq: bool) {
    let (name, dir) = scratch(if zmq { "p4z" } else { "p4r" });
    let redis = redis_servers(SWITCHES.len());
    let dbs: Vec<String> = redis.iter().map(|r| r.url()).collect();
    let eps: Vec<String> = SWITCHES
        .iter()
        .map(|s| format!("ipc://{}/{s}.zmq", dir.display()))
        .collect();
    let file = intent(&name, &dir, &dbs, zmq.then_some(eps.as_slice()));
    let _p4orch: Vec<P4orch> = redis
        .iter()
        .zip(SWITCHES)
        .enumerate()
        .map(|(i, (r, s))| {
            let ep = zmq.then(|| eps[i].as_str());
            start_p4orch(r, ep, &[], &dir.join(format!("p4orch-{s}.log")))
        })
        .collect();

    // SONiC has not initialised its ports: p4orch takes nothing, so nothing is written.
    let (code, out) = apply(&file, "20s", &[]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("NOT READY") && out.contains("PortInitDone"),
        "not-ready switches must say why:\n{out}"
    );
    for r in &redis {
        assert_eq!(p4rt_rows(r, 0), 0, "nothing written before SONiC is ready");
    }

    for r in &redis {
        ports_init_done(r);
    }
    let (code, out) = apply(&file, "20s", &[]);
    assert_eq!(code, 0, "apply against p4orch:\n{out}");
    for r in &redis {
        assert!(p4rt_rows(r, 0) > 10, "APPL_DB holds what p4orch applied");
        assert_eq!(
            p4rt_rows(r, 14),
            0,
            "p4orch leaves nothing in APPL_STATE_DB"
        );
        assert_eq!(
            r.cli(6, &["EXISTS", "WEFT_PLUGIN|status"])
                .expect("cli")
                .trim(),
            "0"
        );
    }
    let (code, out) = plan(&file, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("total: 0 to add, 0 to modify, 0 to delete on 2 switches"),
        "{out}"
    );
    assert!(out.contains("APPL_DB (SONiC p4orch)"), "{out}");
    let (code, out) = apply(&file, "20s", &[]);
    assert_eq!(code, 0, "{out}");

    let down = ["--down", "leaf1:Ethernet8"];
    let (code, out) = apply(&file, "20s", &down);
    assert_eq!(code, 0, "apply --down against p4orch:\n{out}");
    let (code, out) = plan(&file, &down);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("total: 0 to add, 0 to modify, 0 to delete on 2 switches"),
        "the plan after apply --down:\n{out}"
    );
    let (_, out) = plan(&file, &[]);
    assert!(
        !out.contains("total: 0 to add, 0 to modify, 0 to delete"),
        "with the link back up there is something to write:\n{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn apply_apply_down_and_plan_hold_against_sonic_p4orch_over_redis() {
    apply_down_and_plan_against_p4orch(false);
}

#[test]
fn apply_apply_down_and_plan_hold_against_sonic_p4orch_over_zmq() {
    apply_down_and_plan_against_p4orch(true);
}

/// A table p4orch has no manager for: the key is refused with p4orch's own words, and its row
/// in APPL_DB is put back (nothing of it counts as installed, the next plan still adds it).
fn refused_table(zmq: bool) {
    let (name, dir) = scratch(if zmq { "p4fz" } else { "p4fr" });
    let redis = redis_servers(SWITCHES.len());
    let dbs: Vec<String> = redis.iter().map(|r| r.url()).collect();
    let eps: Vec<String> = SWITCHES
        .iter()
        .map(|s| format!("ipc://{}/{s}.zmq", dir.display()))
        .collect();
    let file = intent(&name, &dir, &dbs, zmq.then_some(eps.as_slice()));
    for r in &redis {
        ports_init_done(r);
    }
    let _p4orch: Vec<P4orch> = redis
        .iter()
        .zip(SWITCHES)
        .enumerate()
        .map(|(i, (r, s))| {
            let ep = zmq.then(|| eps[i].as_str());
            start_p4orch(
                r,
                ep,
                &["FIXED_IPV4_TABLE"],
                &dir.join(format!("p4orch-{s}.log")),
            )
        })
        .collect();
    let (code, out) = apply(&file, "8s", &[]);
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("Failed to find P4Orch Manager"),
        "p4orch's refusal reaches the operator:\n{out}"
    );
    wait_until("rows settle", Duration::from_secs(5), || {
        redis.iter().all(|r| {
            r.cli(0, &["KEYS", "P4RT_TABLE:FIXED_IPV4_TABLE:*"])
                .map(|o| o.trim().is_empty())
                .unwrap_or(false)
        })
    });
    let (_, out) = plan(&file, &[]);
    assert!(
        !out.contains("total: 0 to add"),
        "refused entries are not installed:\n{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_table_p4orch_does_not_know_is_refused_and_not_left_in_appl_db_over_redis() {
    refused_table(false);
}

#[test]
fn a_table_p4orch_does_not_know_is_refused_and_not_left_in_appl_db_over_zmq() {
    refused_table(true);
}
