//! `weft run --ha` against a real etcd (started on loopback, killed by PID) and real
//! redis-servers, one per switch, with a stand-in plugin per switch that answers every
//! P4RT_TABLE key (the real plugin and BMv2 are the chaos trials' part). Proves: one of three
//! replicas writes; after `kill -9` of the leader another claims its term on every switch
//! (the time is printed) and its first reconcile writes nothing; `weft status --ha` names the
//! leader, term and replicas; a leader whose switches a newer term has claimed (as a newer
//! leader's claim does while the old one still believes it leads) has every batch it tries
//! refused by the fence itself, changes nothing though it had rows to write that nobody else
//! wrote, and stops; a leader frozen by SIGSTOP while another takes over writes nothing when
//! SIGCONT wakes it, and stops. The fencing tests run on both transports: over SONiC's ZMQ
//! channel the stand-ins serve it as the plugin does (a batch of an older term refused whole),
//! and the refusal must come back from there.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[allow(dead_code)] // this file serves every switch with `stand_in_serving`
#[path = "common/stand_in.rs"]
mod stand_in_plugin;
#[path = "common/transport.rs"]
mod transport;

use stand_in_plugin::stand_in_serving;
use transport::Transport;
use weft_tests::etcd::{Etcd, find_etcd};
use weft_tests::redis::RedisServer;

const SWITCHES: [&str; 6] = ["spine1", "spine2", "leaf1", "leaf2", "leaf3", "leaf4"];

/// Six redis-servers with stand-ins, the small example pointed at them, and etcd.
struct Fabric {
    dir: PathBuf,
    file: PathBuf,
    dbs: Vec<RedisServer>,
    etcd: Etcd,
    _rt: tokio::runtime::Runtime,
}

impl Fabric {
    /// Over `transport`: the intent says it, and each stand-in serves ZMQ at the endpoint the
    /// intent gives its switch.
    fn new(transport: Transport) -> Option<Fabric> {
        if find_etcd().is_none() {
            eprintln!("SKIPPED: etcd not installed (scripts/setup.sh installs etcd-server)");
            assert!(
                std::env::var("WEFT_REQUIRE_ETCD").is_err(),
                "WEFT_REQUIRE_ETCD is set but etcd is missing"
            );
            return None;
        }
        let (name, dir) = stand_in_plugin::scratch(&format!("ha{}", transport.tag()));
        let dbs = stand_in_plugin::redis_servers(SWITCHES.len());
        let urls: Vec<String> = dbs.iter().map(|r| r.url()).collect();
        let file = stand_in_plugin::example_on(&name, &dir, &SWITCHES, &urls);
        let text = std::fs::read_to_string(&file).expect("intent");
        std::fs::write(&file, transport.intent(&text)).expect("intent");
        let topo = weft_topology::load_file(&file).expect("valid intent");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        for (s, r) in SWITCHES.iter().zip(&dbs) {
            let sw = topo.switch(s).expect("switch in the intent");
            let zmq = sw.transport.zmq_endpoint().map(str::to_string);
            assert_eq!(zmq.is_some(), transport == Transport::Zmq, "{s}");
            rt.spawn(stand_in_serving(r.url(), zmq));
        }
        let etcd = Etcd::start().expect("etcd");
        Some(Fabric {
            dir,
            file,
            dbs,
            etcd,
            _rt: rt,
        })
    }

    /// A field of every switch's plugin status row (STATE_DB `WEFT_PLUGIN|status`), 0 if absent.
    fn status_field(&self, field: &str) -> Vec<u64> {
        SWITCHES
            .iter()
            .map(|s| {
                self.cli(s, 6, &["HGET", "WEFT_PLUGIN|status", field])
                    .trim()
                    .parse()
                    .unwrap_or(0)
            })
            .collect()
    }

    fn file(&self) -> String {
        self.file.to_string_lossy().into_owned()
    }

    fn db(&self, switch: &str) -> &RedisServer {
        let i = SWITCHES.iter().position(|s| *s == switch).expect("switch");
        &self.dbs[i]
    }

    fn cli(&self, switch: &str, db: u8, args: &[&str]) -> String {
        self.db(switch).cli(db, args).expect("redis-cli")
    }

    /// Every switch's APPL_DB term key.
    fn terms(&self) -> Vec<u64> {
        SWITCHES
            .iter()
            .map(|s| {
                self.cli(s, 0, &["GET", "WEFT_LEADER_TERM"])
                    .trim()
                    .parse()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Every switch's APPL_DB P4RT_TABLE rows and key set, as they stand.
    fn appl_db(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for s in SWITCHES {
            let keys = self.cli(s, 0, &["KEYS", "*P4RT_TABLE*"]);
            let mut keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            keys.sort();
            for k in keys {
                let v = if k.ends_with("KEY_SET") || k.ends_with("DEL_SET") {
                    let m = self.cli(s, 0, &["SMEMBERS", k]);
                    let mut m: Vec<&str> = m.lines().collect();
                    m.sort();
                    m.join(",")
                } else {
                    let m = self.cli(s, 0, &["HGETALL", k]);
                    let m: Vec<&str> = m.lines().collect();
                    let mut pairs: Vec<String> = m.chunks(2).map(|c| c.join("=")).collect();
                    pairs.sort();
                    pairs.join(",")
                };
                out.insert(format!("{s}/{k}"), v);
            }
        }
        out
    }

    fn replica(&self, id: &str) -> Replica {
        let status = self.dir.join(format!("{id}.json"));
        let log = self.dir.join(format!("{id}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args([
                "run",
                &self.file(),
                "--resync",
                "60s",
                "--ha",
                &self.etcd.url(),
            ])
            .args(["--id", id, "--ha-ttl", "1s", "--status-file"])
            .arg(&status)
            .env_remove("WEFT_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("weft run --ha");
        Replica {
            id: id.to_string(),
            child: Some(child),
            status,
            log,
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Replica {
    id: String,
    child: Option<Child>,
    status: PathBuf,
    log: PathBuf,
}

impl Replica {
    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }
    fn status(&self) -> serde_json::Value {
        std::fs::read_to_string(&self.status)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }
    fn role(&self) -> String {
        self.status()["ha"]["role"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    fn converged(&self) -> bool {
        self.log().contains("converged; following port state")
    }
    fn signal(&self, sig: &str) {
        Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("kill");
    }
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    /// Its exit status once it has stopped within `timeout`.
    fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(st)) = c.try_wait()
            {
                self.child = None;
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            // A frozen replica must be woken to die cleanly.
            let _ = Command::new("kill")
                .args(["-CONT", &c.id().to_string()])
                .status();
        }
        self.kill9();
    }
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn leader_of(rs: &[Replica]) -> Option<usize> {
    rs.iter()
        .position(|r| r.child.is_some() && r.role() == "leader" && r.converged())
}

#[test]
fn of_three_replicas_one_writes_and_after_kill_9_another_takes_over_without_rewriting() {
    let Some(f) = Fabric::new(Transport::Redis) else {
        return;
    };
    let mut rs: Vec<Replica> = ["ctl-a", "ctl-b", "ctl-c"]
        .iter()
        .map(|id| f.replica(id))
        .collect();
    wait_for("a leader to converge", Duration::from_secs(90), || {
        leader_of(&rs).is_some()
    });
    let first = leader_of(&rs).expect("leader");
    let term = rs[first].status()["ha"]["term"].as_u64().expect("term");
    assert!(
        rs[first].status()["writes"].as_u64().unwrap_or(0) > 0,
        "the first leader wrote the fabric"
    );
    assert_eq!(
        f.terms(),
        vec![term; 6],
        "the leader's term is claimed on every switch"
    );
    for (i, r) in rs.iter().enumerate() {
        if i != first {
            // A replica that joined after the leader converged reports its role once it has
            // read the election's view: wait for that, then hold it to having written nothing.
            wait_for(
                &format!("{} to report itself a follower", r.id),
                Duration::from_secs(30),
                || r.role() == "follower",
            );
            assert_eq!(
                r.status()["writes"].as_u64(),
                Some(0),
                "a follower writes nothing"
            );
        }
    }
    let before = f.appl_db();
    let (code, out, err) = weft(&["status", &f.file(), "--ha", &f.etcd.url()]);
    assert!(code == 0 || code == 3, "{out}{err}");
    assert!(
        out.contains(&format!("election: leader {} (term {term})", rs[first].id)),
        "{out}"
    );
    for r in &rs {
        assert!(out.contains(&format!("{} (pid {}", r.id, r.pid())), "{out}");
    }

    // kill -9 the leader: another claims a newer term on every switch.
    let t0 = Instant::now();
    rs[first].kill9();
    wait_for(
        "a new term on every switch",
        Duration::from_secs(30),
        || f.terms().iter().all(|&t| t > term),
    );
    let takeover = t0.elapsed();
    eprintln!(
        "takeover: kill -9 of the leader to its successor's term on all 6 switches: {:.0} ms (lease TTL 1 s, etcd election timeout 500 ms)",
        takeover.as_secs_f64() * 1000.0
    );
    wait_for(
        "the new leader to converge",
        Duration::from_secs(60),
        || leader_of(&rs).is_some(),
    );
    let second = leader_of(&rs).expect("new leader");
    assert_ne!(second, first);
    let st = rs[second].status();
    assert_eq!(
        st["writes"].as_u64(),
        Some(0),
        "nothing changed: the new leader's first reconcile writes no entry\n{}",
        rs[second].log()
    );
    assert_eq!(f.appl_db(), before, "APPL_DB untouched by the takeover");
    let new_term = st["ha"]["term"].as_u64().expect("term");
    let (_, out, _) = weft(&["status", &f.file(), "--ha", &f.etcd.url()]);
    assert!(
        out.contains(&format!(
            "election: leader {} (term {new_term})",
            rs[second].id
        )),
        "{out}"
    );
    assert!(
        !out.contains(&rs[first].id),
        "the dead replica's lease is gone:\n{out}"
    );
}

/// Claims `term` on every switch's APPL_DB and CONFIG_DB, as a new leader's first act does.
fn claim_everywhere(f: &Fabric, term: u64) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        for r in &f.dbs {
            let sonic = weft_sonic_db::SonicDb::from_endpoint(&r.url()).expect("endpoint");
            for id in [
                weft_sonic_db::SonicDbId::ApplDb,
                weft_sonic_db::SonicDbId::ConfigDb,
            ] {
                let conn = sonic.connect(id).await.expect("connect");
                weft_sonic_db::claim_term(&conn, term)
                    .await
                    .expect("claim a newer term");
            }
        }
    });
}

#[test]
fn a_leader_whose_switches_a_newer_term_claimed_has_its_writes_refused_by_the_fence_and_stops_over_redis()
 {
    a_leader_whose_switches_a_newer_term_claimed_is_fenced(Transport::Redis);
}

#[test]
fn a_leader_whose_switches_a_newer_term_claimed_has_its_writes_refused_by_the_fence_and_stops_over_zmq()
 {
    a_leader_whose_switches_a_newer_term_claimed_is_fenced(Transport::Zmq);
}

/// Over ZMQ, every switch took the leader's entries as ZMQ requests (none over Redis's key
/// set would count), so a ZMQ run that fell back to Redis fails.
fn assert_entries_came_over(f: &Fabric, transport: Transport) {
    let n = f.status_field("zmq_requests");
    match transport {
        Transport::Zmq => assert!(n.iter().all(|&n| n > 0), "ZMQ requests per switch: {n:?}"),
        Transport::Redis => assert!(n.iter().all(|&n| n == 0), "{n:?}"),
    }
}

fn a_leader_whose_switches_a_newer_term_claimed_is_fenced(transport: Transport) {
    let Some(f) = Fabric::new(transport) else {
        return;
    };
    let mut rs = vec![f.replica("old")];
    wait_for("the leader to converge", Duration::from_secs(90), || {
        leader_of(&rs).is_some()
    });
    assert_entries_came_over(&f, transport);
    let term = rs[0].status()["ha"]["term"].as_u64().expect("term");
    // A newer leader claims every switch while this one still holds its lease in etcd (cut off
    // from etcd, or about to learn it lost): only the fence stands between it and the switches.
    claim_everywhere(&f, term + 1);
    let claimed = f.appl_db();
    // A link goes down: the leader has rows to write, and nobody else writes them, so a write
    // that got through would change APPL_DB.
    f.cli(
        "leaf1",
        6,
        &[
            "HSET",
            "PORT_TABLE|Ethernet8",
            "oper_status",
            "down",
            "admin_status",
            "up",
        ],
    );
    let st = rs[0]
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("the fenced leader stops\n{}", rs[0].log()));
    let log = rs[0].log();
    assert_eq!(st.code(), Some(1), "{log}");
    let refused = log.matches("write fenced").count();
    assert!(
        refused > 0,
        "the leader stopped without a write refused by the fence:\n{log}"
    );
    assert!(
        log.contains("stopping: a switch holds a newer leader's term"),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "this writer's term {term} is older than the DB's term {}",
            term + 1
        )),
        "the refusal names both terms:\n{log}"
    );
    eprintln!("fenced leader over {transport:?}: {refused} batches refused, then it stopped");
    if transport == Transport::Zmq {
        // The refusal came back over the channel: the switch refused the batch's keys.
        let failed: u64 = f.status_field("keys_failed").iter().sum();
        assert!(failed > 0, "no switch refused a ZMQ batch:\n{log}");
    }
    assert_eq!(f.appl_db(), claimed, "a refused batch changed APPL_DB");
    assert_eq!(
        f.terms(),
        vec![term + 1; 6],
        "the newer term holds every switch"
    );
}

#[test]
fn a_leader_frozen_by_sigstop_writes_nothing_when_it_wakes_after_a_takeover_and_stops_over_redis() {
    a_leader_frozen_by_sigstop_writes_nothing_when_it_wakes(Transport::Redis);
}

#[test]
fn a_leader_frozen_by_sigstop_writes_nothing_when_it_wakes_after_a_takeover_and_stops_over_zmq() {
    a_leader_frozen_by_sigstop_writes_nothing_when_it_wakes(Transport::Zmq);
}

fn a_leader_frozen_by_sigstop_writes_nothing_when_it_wakes(transport: Transport) {
    let Some(f) = Fabric::new(transport) else {
        return;
    };
    let mut rs: Vec<Replica> = ["old", "new"].iter().map(|id| f.replica(id)).collect();
    wait_for("a leader to converge", Duration::from_secs(90), || {
        leader_of(&rs).is_some()
    });
    assert_entries_came_over(&f, transport);
    let old = leader_of(&rs).expect("leader");
    let new = 1 - old;
    let term = rs[old].status()["ha"]["term"].as_u64().expect("term");
    rs[old].signal("-STOP");
    wait_for(
        "the other replica's term on every switch",
        Duration::from_secs(30),
        || f.terms().iter().all(|&t| t > term),
    );
    wait_for(
        "the new leader to converge",
        Duration::from_secs(60),
        || rs[new].role() == "leader" && rs[new].converged(),
    );
    // A link goes down while the old leader sleeps: the new one reroutes, and the old one
    // finds the event waiting when it wakes.
    f.cli(
        "leaf1",
        6,
        &[
            "HSET",
            "PORT_TABLE|Ethernet8",
            "oper_status",
            "down",
            "admin_status",
            "up",
        ],
    );
    wait_for("the new leader to reroute", Duration::from_secs(60), || {
        rs[new].status()["writes"].as_u64().unwrap_or(0) > 0
            && rs[new].status()["switches"]
                .as_array()
                .is_some_and(|s| s.is_empty())
    });
    let settled = f.appl_db();
    let new_term = f.terms()[0];

    rs[old].signal("-CONT");
    let st = rs[old]
        .wait_exit(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("the woken leader stops\n{}", rs[old].log()));
    assert_eq!(st.code(), Some(1), "{}", rs[old].log());
    let log = rs[old].log();
    assert!(
        log.contains("leadership lost") || log.contains("newer leader"),
        "{log}"
    );
    let fenced = log.contains("write fenced");
    eprintln!(
        "woken leader: {}",
        if fenced {
            "tried to write with its old term and was refused (fenced)"
        } else {
            "saw its lease gone before writing"
        }
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(f.appl_db(), settled, "the woken leader changed APPL_DB");
    assert_eq!(f.terms(), vec![new_term; 6]);
    assert!(rs[new].child.is_some() && rs[new].role() == "leader");
}

fn weft(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .env_remove("WEFT_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run weft");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
