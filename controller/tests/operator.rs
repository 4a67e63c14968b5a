//! The operator's workflow through the real `weft` binary against real redis-servers, one per
//! switch as SONiC has, with a stand-in for each switch's plugin that answers P4RT_TABLE keys
//! and keeps a `WEFT_PLUGIN|status` row (the real plugin and BMv2 are exercised by the
//! scenario tests). Proves: plan files and their staleness check, the fabric lock, `weft run`'s
//! logs, lock and status file (also after a kill), `weft status`, `doctor`, `show queues` and
//! `show pfcwd`, canaries, the report of a plugin that never answers, and what a DB address
//! that is not Redis is called.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weft_sonic_db::{
    ConsumerStateTable, EntryResult, ResponsePublisher, SonicDb, SonicDbId, StatusCode, Table,
};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::PluginStatus;

#[path = "common/stand_in.rs"]
#[allow(dead_code)]
mod stand_in_plugin;

use stand_in_plugin::status_row;
use weft_tests::bmv2::ProcessGuard;
use weft_tests::redis::RedisServer;

const SWITCHES: [&str; 6] = ["spine1", "spine2", "leaf1", "leaf2", "leaf3", "leaf4"];

/// How a stand-in plugin behaves.
#[derive(Clone, Copy, PartialEq)]
enum Plugin {
    /// Answers every key SUCCESS.
    Answers,
    /// Refuses IPv6 routes.
    RefusesV6,
    /// Says it runs, pops keys, never answers.
    Silent,
}

async fn stand_in(url: String, kind: Plugin) {
    let Ok(sonic) = SonicDb::from_endpoint(&url) else {
        return;
    };
    let Ok(mut consumer) = ConsumerStateTable::new(&sonic, SonicDbId::ApplDb, "P4RT_TABLE").await
    else {
        return;
    };
    consumer.set_poll_interval(Duration::from_millis(20));
    let Ok(mut publisher) = ResponsePublisher::new(&sonic, "P4RT_TABLE").await else {
        return;
    };
    let Ok(conn) = sonic.connect(SonicDbId::StateDb).await else {
        return;
    };
    let Ok(table) = Table::new(conn, PluginStatus::TABLE) else {
        return;
    };
    let mut installed: BTreeSet<String> = BTreeSet::new();
    let st = status_row(0);
    if table.replace(&st.key(), &st.to_fields()).await.is_err() {
        return;
    }
    while let Ok(batch) = consumer.next_batch(1024).await {
        if kind == Plugin::Silent {
            continue;
        }
        let results: Vec<EntryResult> = batch
            .into_iter()
            .map(|k| {
                if kind == Plugin::RefusesV6 && k.key.starts_with("FIXED_IPV6_TABLE") {
                    EntryResult::err(
                        k.key,
                        k.op,
                        StatusCode::InvalidParam,
                        "stand-in refuses IPv6",
                        k.fields,
                    )
                } else {
                    match k.op {
                        weft_sonic_db::Op::Set => installed.insert(k.key.clone()),
                        weft_sonic_db::Op::Del => installed.remove(&k.key),
                    };
                    EntryResult::ok(k.key, k.op, k.fields)
                }
            })
            .collect();
        if publisher.publish_batch(&results).await.is_err() {
            return;
        }
        let st = status_row(installed.len() as u64);
        if table.replace(&st.key(), &st.to_fields()).await.is_err() {
            return;
        }
    }
}

/// Six redis-servers, the small example pointed at them, and stand-ins where asked.
struct Fabric {
    dir: PathBuf,
    name: String,
    file: PathBuf,
    dbs: Vec<RedisServer>,
    rt: tokio::runtime::Runtime,
}

impl Fabric {
    fn new(plugins: &[(&str, Plugin)]) -> Fabric {
        let (name, dir) = stand_in_plugin::scratch("op");
        let dbs = stand_in_plugin::redis_servers(SWITCHES.len());
        let urls: Vec<String> = dbs.iter().map(|r| r.url()).collect();
        let file = stand_in_plugin::example_on(&name, &dir, &SWITCHES, &urls);
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let f = Fabric {
            dir,
            name,
            file,
            dbs,
            rt,
        };
        for (s, kind) in plugins {
            let url = f.db(s).url();
            f.rt.spawn(stand_in(url, *kind));
        }
        // Every stand-in says it runs before a test plans: a plan made earlier sees no live
        // plugin and rightly refuses, which is not what the tests are about.
        for (s, _) in plugins {
            wait_for(
                &format!("{s}'s stand-in status row"),
                Duration::from_secs(30),
                || f.cli(s, 6, &["EXISTS", "WEFT_PLUGIN|status"]).trim() == "1",
            );
        }
        f
    }

    fn db(&self, switch: &str) -> &RedisServer {
        let i = SWITCHES.iter().position(|s| *s == switch).expect("switch");
        &self.dbs[i]
    }

    fn file(&self) -> String {
        self.file.to_string_lossy().into_owned()
    }

    fn weft(&self, args: &[&str]) -> (i32, String, String) {
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

    fn cli(&self, switch: &str, db: u8, args: &[&str]) -> String {
        self.db(switch).cli(db, args).expect("redis-cli")
    }

    fn lock_row(&self, switch: &str) -> String {
        self.cli(switch, 6, &["HGETALL", &format!("WEFT_LOCK|{}", self.name)])
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn all(kind: Plugin) -> Vec<(&'static str, Plugin)> {
    SWITCHES.iter().map(|s| (*s, kind)).collect()
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn plan_file_applies_exactly_its_plan_and_is_refused_once_a_switch_changed() {
    let f = Fabric::new(&all(Plugin::Answers));
    let plan = f.dir.join("plan.json");
    let p = plan.to_string_lossy().into_owned();
    let (code, out, err) = f.weft(&["plan", &f.file(), "-o", &p, "--detailed-exitcode"]);
    assert_eq!(code, 3, "changes to make: exit 3\n{out}{err}");
    assert!(out.contains("(P4RT entries: 116 to add;"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).expect("plan file")).expect("json");
    assert_eq!(v["weft_plan"], 2);
    assert!(
        v["intent"]["text"]
            .as_str()
            .is_some_and(|t| t.contains(&f.name))
    );
    assert_eq!(v["switches"].as_array().map(Vec::len), Some(6));
    assert!(v["switches"][0]["installed_digest"].is_string());

    // The intent file changes after the plan: the plan's own copy is what is applied.
    std::fs::write(&f.file, "fabric: {name: gone}\n").expect("overwrite intent");
    let (code, out, err) = f.weft(&["apply", &p, "--timeout", "10s", "--retry", "2s"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.lines().filter(|l| l.ends_with("  ok")).count() == 6,
        "{out}"
    );
    let routes = f.cli("leaf1", 14, &["KEYS", "P4RT_TABLE:FIXED_IPV4_TABLE:*"]);
    assert!(!routes.trim().is_empty(), "applied");

    // A plan made now has nothing to do; then leaf2 changes behind its back.
    let intent = f.dir.join("intent2.yaml");
    std::fs::write(&intent, v["intent"]["text"].as_str().expect("text")).expect("intent");
    let plan2 = f.dir.join("plan2.json");
    let p2 = plan2.to_string_lossy().into_owned();
    let (code, _, err) = f.weft(&[
        "plan",
        &intent.to_string_lossy(),
        "-o",
        &p2,
        "--detailed-exitcode",
    ]);
    assert_eq!(code, 0, "converged: exit 0 with --detailed-exitcode\n{err}");
    let key = "P4RT_TABLE:FIXED_IPV4_TABLE:{\"match/ipv4_dst\":\"10.0.0.2/32\"}";
    assert_eq!(
        f.cli("leaf2", 14, &["DEL", key]).trim(),
        "0",
        "no such route on leaf2"
    );
    let victim = f.cli("leaf2", 14, &["KEYS", "P4RT_TABLE:FIXED_IPV4_TABLE:*"]);
    let victim = victim.lines().next().expect("a route on leaf2").to_string();
    assert_eq!(f.cli("leaf2", 14, &["DEL", &victim]).trim(), "1");
    let (code, out, err) = f.weft(&["apply", &p2, "--timeout", "10s"]);
    assert_eq!(code, 1, "stale plan refused\n{out}{err}");
    assert!(err.contains("is stale; nothing was written"), "{err}");
    assert!(
        err.contains("leaf2: installed state changed since the plan"),
        "{err}"
    );
    assert!(
        !err.contains("leaf1:"),
        "only the changed switch is named: {err}"
    );
    assert_eq!(
        f.cli("leaf2", 14, &["EXISTS", &victim]).trim(),
        "0",
        "nothing was written"
    );
    // A fresh plan sees exactly that one entry.
    let (code, out, _) = f.weft(&[
        "plan",
        &intent.to_string_lossy(),
        "--switch",
        "leaf2",
        "--output",
        "json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("plan json");
    assert_eq!(v["switches"][0]["counts"]["add"], 1, "{v}");
    // Plan files fix their own selection.
    let (code, _, err) = f.weft(&["apply", &p2, "--switch", "leaf1"]);
    assert_eq!(code, 1);
    assert!(err.contains("is a plan file"), "{err}");
}

#[test]
fn the_lock_keeps_a_second_writer_out_until_it_is_stolen_or_its_holder_is_gone() {
    let f = Fabric::new(&all(Plugin::Answers));
    let key = format!("WEFT_LOCK|{}", f.name);
    // Another controller, on another host, holds leaf3.
    f.cli(
        "leaf3",
        6,
        &[
            "HSET",
            &key,
            "host",
            "ctl-b",
            "pid",
            "4242",
            "command",
            "weft run",
            "token",
            "ctl-b:4242:1",
            "acquired_ms",
            "1",
            "expires_ms",
            "2",
        ],
    );
    f.cli("leaf3", 6, &["PEXPIRE", &key, "60000"]);
    let (code, out, err) = f.weft(&["apply", &f.file(), "--timeout", "10s"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("is locked on leaf3 by weft run (pid 4242, host ctl-b)")
            && err.contains("--steal"),
        "{err}"
    );
    assert!(
        f.cli("leaf1", 14, &["KEYS", "*"]).trim().is_empty(),
        "nothing written"
    );
    let (code, out, _) = f.weft(&["apply", &f.file(), "--output", "json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON also when refused");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|e| e.contains("locked on leaf3")),
        "{v}"
    );
    assert_eq!(v["summary"]["switches"], 0, "{v}");
    assert!(
        f.lock_row("leaf1").trim().is_empty(),
        "what was taken is released"
    );
    // status shows the holder.
    let (_, out, _) = f.weft(&["status", &f.file(), "--output", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("status json");
    let leaf3 = v["switches"]
        .as_array()
        .expect("switches")
        .iter()
        .find(|s| s["switch"] == "leaf3")
        .expect("leaf3");
    assert!(
        leaf3["lock"].as_str().is_some_and(|l| l.contains("ctl-b")),
        "{leaf3}"
    );

    // --steal takes it; the pass releases it when done.
    let (code, out, err) = f.weft(&["apply", &f.file(), "--timeout", "10s", "--steal"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        f.lock_row("leaf3").trim().is_empty(),
        "released after the pass"
    );

    // A holder on this host whose process is gone is taken over without --steal.
    let mut gone = Command::new("true").spawn().expect("true");
    let dead = gone.id().to_string();
    gone.wait().expect("wait");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    f.cli(
        "spine2",
        6,
        &[
            "HSET",
            &key,
            "host",
            host.trim(),
            "pid",
            &dead,
            "command",
            "weft apply",
            "token",
            "x",
            "acquired_ms",
            "1",
            "expires_ms",
            "2",
        ],
    );
    f.cli("spine2", 6, &["PEXPIRE", &key, "60000"]);
    let (code, out, err) = f.weft(&["apply", &f.file(), "--timeout", "10s"]);
    assert_eq!(code, 0, "a dead holder does not block\n{out}{err}");
}

#[test]
fn run_logs_at_info_holds_the_lock_and_status_sees_it_live_then_stale_after_a_kill() {
    let f = Fabric::new(&all(Plugin::Answers));
    let status = f.dir.join("run.json");
    let log = f.dir.join("run.log");
    // Guarded: killed by PID if an assertion fails while it runs.
    let start = || {
        ProcessGuard::new(
            "weft run",
            Command::new(env!("CARGO_BIN_EXE_weft"))
                .args(["run", &f.file(), "--resync", "30s", "--status-file"])
                .arg(&status)
                .env_remove("WEFT_LOG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("log"))
                .spawn()
                .expect("weft run"),
        )
    };
    let mut run = start();
    wait_for("weft run to converge", Duration::from_secs(60), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("converged; following port state"))
    });
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        !text.contains('\u{1b}'),
        "no ANSI escapes in a file:\n{text}"
    );
    assert!(
        text.contains("INFO") && text.contains("lock taken"),
        "{text}"
    );
    assert!(
        !f.lock_row("leaf1").trim().is_empty(),
        "weft run holds the lock"
    );
    let (code, out, err) = f.weft(&[
        "status",
        &f.file(),
        "--status-file",
        &status.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let pid = run.pid().expect("running").to_string();
    assert!(out.contains(&format!("weft run pid {pid}")), "{out}");
    assert!(out.contains("6/6 switches converged"), "{out}");
    assert!(out.contains("lock held on 6/6"), "{out}");
    assert_eq!(out.matches(" in use").count(), 8, "8 links in use:\n{out}");
    // A second writer is kept out while it runs.
    let (code, _, err) = f.weft(&["apply", &f.file(), "--timeout", "5s"]);
    assert_eq!(code, 1);
    assert!(err.contains("by weft run (pid"), "{err}");

    // SIGTERM: stops, removes its status file, releases the lock.
    Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    let st = run.wait().expect("wait");
    assert!(st.success(), "{st:?}");
    assert!(!status.exists(), "status file removed on SIGTERM");
    assert!(
        f.lock_row("leaf1").trim().is_empty(),
        "lock released on SIGTERM"
    );

    // SIGKILL leaves both behind: status calls the file stale, a new run takes over.
    let mut run = start();
    wait_for(
        "the second run's status file",
        Duration::from_secs(60),
        || status.exists(),
    );
    run.kill();
    let (code, out, _) = f.weft(&[
        "status",
        &f.file(),
        "--status-file",
        &status.to_string_lossy(),
    ]);
    assert_eq!(code, 3, "not running: exit 3\n{out}");
    assert!(
        out.contains("weft run is not running (stale status file"),
        "{out}"
    );
    let (code, out, err) = f.weft(&["apply", &f.file(), "--timeout", "10s"]);
    assert_eq!(code, 0, "the dead run's lock is taken over\n{out}{err}");
}

#[test]
fn doctor_passes_a_converged_fabric_and_names_each_problem() {
    let mut f = Fabric::new(&[
        ("spine1", Plugin::Answers),
        ("spine2", Plugin::Answers),
        ("leaf1", Plugin::Answers),
        ("leaf2", Plugin::Answers),
        ("leaf3", Plugin::Answers),
        ("leaf4", Plugin::Silent),
    ]);
    let (code, _, _) = f.weft(&[
        "apply",
        &f.file(),
        "--timeout",
        "2s",
        "--switch",
        "spine*,leaf1,leaf2,leaf3",
    ]);
    assert_eq!(code, 0);
    let (code, out, err) = f.weft(&["doctor", &f.file(), "--switch", "spine*,leaf1,leaf2,leaf3"]);
    assert_eq!(code, 0, "a converged fabric has no findings\n{out}{err}");
    assert!(out.contains("0 problem(s)"), "{out}");
    // leaf4's plugin never answers; leaf3 loses its DB.
    let (code, _, _) = f.weft(&["apply", &f.file(), "--timeout", "1s", "--switch", "leaf4"]);
    assert_eq!(code, 1);
    f.dbs[4].stop();
    let (code, out, err) = f.weft(&["doctor", &f.file(), "--output", "json"]);
    assert_eq!(
        code, 1,
        "findings, and leaf3 could not be checked: incomplete, exit 1\n{out}{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("doctor json");
    let checks = |sw: &str| -> Vec<(String, bool)> {
        v["switches"]
            .as_array()
            .expect("switches")
            .iter()
            .find(|s| s["switch"] == sw)
            .expect("switch")["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .map(|c| {
                (
                    c["check"].as_str().unwrap_or("").to_string(),
                    c["ok"] == true,
                )
            })
            .collect()
    };
    assert_eq!(checks("leaf3"), [("db".to_string(), false)], "{v}");
    let leaf4 = checks("leaf4");
    assert!(leaf4.contains(&("unanswered".into(), false)), "{leaf4:?}");
    assert!(leaf4.contains(&("converged".into(), false)), "{leaf4:?}");
    assert!(leaf4.contains(&("plugin".into(), true)), "{leaf4:?}");
    assert!(checks("leaf1").iter().all(|c| c.1), "{:?}", checks("leaf1"));
    // The plugin dies: its status row goes.
    f.cli("leaf1", 6, &["DEL", "WEFT_PLUGIN|status"]);
    let (_, out, _) = f.weft(&["doctor", &f.file(), "--switch", "leaf1"]);
    assert!(
        out.contains("FAIL plugin      no WEFT_PLUGIN|status row: no live plugin"),
        "{out}"
    );
}

#[test]
fn apply_against_a_plugin_that_never_answers_says_so_in_one_line() {
    let f = Fabric::new(&[("leaf1", Plugin::Silent)]);
    let (code, out, err) = f.weft(&["apply", &f.file(), "--switch", "leaf1", "--timeout", "2s"]);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        out.contains("entries not answered within 2s (is the switch's plugin running?)"),
        "{out}"
    );
    assert!(
        !out.contains("TIMEOUT"),
        "no line per unanswered entry:\n{out}"
    );
    assert!(
        out.contains("entries not sent: a stage before them failed"),
        "{out}"
    );
    assert!(lines.len() < 8, "{out}");
    // No plugin at all: not ready, said once per switch however often it is retried.
    let (code, out, err) = f.weft(&["apply", &f.file(), "--switch", "leaf2", "--retry", "2s"]);
    assert_eq!(code, 1);
    assert_eq!(err.matches("leaf2: not ready").count(), 1, "{err}");
    assert!(out.contains("NOT READY"), "{out}");
}

/// A TCP port that answers like an HTTP server, whatever it is sent.
fn http_listener() -> (u16, std::thread::JoinHandle<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    l.set_nonblocking(false).expect("blocking");
    let h = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            // One thread per connection: the client opens several at once, and none may wait
            // behind another's read timeout on a loaded machine.
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            });
            if Instant::now() > deadline {
                return;
            }
        }
    });
    (port, h)
}

#[test]
fn a_db_address_that_is_not_redis_is_reported_as_such() {
    let f = Fabric::new(&[]);
    let (port, _h) = http_listener();
    let url = format!("redis://127.0.0.1:{port}");
    let text = std::fs::read_to_string(&f.file)
        .expect("intent")
        .replace(&f.db("leaf1").url(), &url);
    std::fs::write(&f.file, text).expect("intent");
    let (code, out, err) = f.weft(&["plan", &f.file(), "--switch", "leaf1"]);
    assert_eq!(code, 1, "{out}{err}");
    let row = out
        .lines()
        .find(|l| l.starts_with("leaf1 "))
        .expect("leaf1 row");
    assert!(
        row.contains(&format!("not a Redis server at {url}")),
        "{row}"
    );
    // The parser's own words (`Unexpected \`84\``), not any "84" (the random port may hold one).
    assert!(
        !out.contains("Unexpected") && !out.contains("`84`"),
        "{out}"
    );
    let (_, out, _) = f.weft(&["doctor", &f.file(), "--switch", "leaf1"]);
    assert!(out.contains("not a Redis server"), "{out}");
}

#[test]
fn show_queues_and_pfcwd_read_what_the_plugins_wrote() {
    // Running plugins (status rows) on leaf1 and leaf2; leaf1's counters as its poll leaves
    // them, stamped now.
    let f = Fabric::new(&[("leaf1", Plugin::Answers), ("leaf2", Plugin::Answers)]);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
        .to_string();
    f.cli(
        "leaf1",
        2,
        &[
            "HSET",
            "COUNTERS:WEFT_SWITCH",
            "WEFT_POLL_TIME_MS",
            &now_ms,
            "WEFT_POLL_INTERVAL_MS",
            "60000",
        ],
    );
    f.cli(
        "leaf1",
        2,
        &[
            "HSET",
            "COUNTERS:Ethernet0:3",
            "SAI_QUEUE_STAT_PACKETS",
            "1200",
            "SAI_QUEUE_STAT_BYTES",
            "9000000",
            "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS",
            "300",
        ],
    );
    f.cli(
        "leaf1",
        2,
        &[
            "HSET",
            "COUNTERS:Ethernet0",
            "SAI_PORT_STAT_PFC_3_TX_PKTS",
            "7",
        ],
    );
    f.cli(
        "leaf1",
        2,
        &[
            "HSET",
            "COUNTERS:Ethernet4:0",
            "SAI_QUEUE_STAT_PACKETS",
            "0",
        ],
    );
    f.cli(
        "leaf1",
        6,
        &[
            "HSET",
            "PFC_WD_STATE|Ethernet0|3",
            "status",
            "stormed",
            "action",
            "drop",
            "detected",
            "2",
            "restored",
            "1",
            "timestamp_ms",
            "1000",
        ],
    );
    let (code, out, err) = f.weft(&[
        "show",
        "queues",
        &f.file(),
        "--switch",
        "leaf1",
        "--output",
        "json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let q = &v["queues"][0];
    assert_eq!(
        (q["port"].as_str(), q["queue"].as_u64()),
        (Some("Ethernet0"), Some(3)),
        "{v}"
    );
    assert_eq!(
        (
            q["packets"].as_u64(),
            q["ecn_marked"].as_u64(),
            q["pfc_tx"].as_u64()
        ),
        (Some(1200), Some(300), Some(7))
    );
    let (_, out, _) = f.weft(&[
        "show",
        "queues",
        &f.file(),
        "--switch",
        "leaf1",
        "--nonzero",
    ]);
    assert_eq!(
        out.lines().count(),
        2,
        "header and the one queue that counted:\n{out}"
    );
    assert!(out.contains("UC3") && out.contains("1200"), "{out}");
    let (code, out, _) = f.weft(&["show", "pfcwd", &f.file(), "--switch", "leaf1"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("Ethernet0:3") && out.contains("stormed") && out.contains("drop"),
        "{out}"
    );
    // A switch that does not answer is named, and the exit status says so.
    let (code, out, _) = f.weft(&[
        "show",
        "pfcwd",
        &f.file(),
        "--switch",
        "leaf1,leaf2",
        "--output",
        "json",
    ]);
    assert_eq!(code, 0, "every DB answers here");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["queues"][0]["storms_detected"], 2);
    // Queues watched but never stormed have no STATE_DB row yet: listed from CONFIG_DB.
    let (code, out, err) = f.weft(&["apply", &f.file(), "--switch", "leaf2", "--no-wait"]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, out, _) = f.weft(&[
        "show",
        "pfcwd",
        &f.file(),
        "--switch",
        "leaf2",
        "--output",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let rows = v["queues"].as_array().expect("rows");
    assert!(!rows.is_empty(), "{v}");
    assert!(
        rows.iter().all(|r| r["status"] == "operational"
            && r["priority"] == 3
            && r["storms_detected"] == 0),
        "{v}"
    );
    assert!(
        rows.iter().any(|r| r["port"] == "Ethernet8"),
        "fabric ports are watched: {v}"
    );
}

#[test]
fn canary_first_then_the_rest_and_a_failing_canary_stops_the_rollout() {
    let f = Fabric::new(&[
        ("spine1", Plugin::RefusesV6),
        ("spine2", Plugin::Answers),
        ("leaf1", Plugin::Answers),
        ("leaf2", Plugin::Answers),
        ("leaf3", Plugin::Answers),
        ("leaf4", Plugin::Answers),
    ]);
    // Canaries: one leaf and one spine (leaf1, spine1); spine1 refuses its IPv6 routes.
    let (code, out, err) = f.weft(&["apply", &f.file(), "--canary", "2", "--timeout", "5s"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("canaries: spine1, leaf1"), "{err}");
    assert!(
        err.contains("canary check failed; the other 4 switch(es) were not written"),
        "{err}"
    );
    assert!(
        f.cli("leaf2", 0, &["KEYS", "*"]).trim().is_empty(),
        "leaf2 untouched"
    );
    assert!(
        out.contains("spine1 ") && out.contains("FAILED"),
        "the canaries' results:\n{out}"
    );
    let (code, out, _) = f.weft(&[
        "apply",
        &f.file(),
        "--canary",
        "2",
        "--timeout",
        "5s",
        "--output",
        "json",
    ]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|e| e.starts_with("canary check failed: spine1")),
        "{v}"
    );
    assert_eq!(v["canaries"], serde_json::json!(["spine1", "leaf1"]));
    assert_eq!(
        v["summary"]["switches"], 2,
        "only the canaries were written: {v}"
    );
    // Only the leaves, two canaries (leaf1, leaf2), then the rest: all answer.
    let (code, out, err) = f.weft(&[
        "apply",
        &f.file(),
        "--role",
        "leaf",
        "--canary",
        "2",
        "--timeout",
        "5s",
        "--output",
        "json",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["canaries"], serde_json::json!(["leaf1", "leaf2"]));
    assert_eq!(v["summary"]["switches"], 4);
    assert_eq!(v["summary"]["ok"], 4);
    let names: Vec<&str> = v["switches"]
        .as_array()
        .expect("switches")
        .iter()
        .filter_map(|s| s["switch"].as_str())
        .collect();
    assert_eq!(names, ["leaf1", "leaf2", "leaf3", "leaf4"]);
    assert!(err.contains("canaries verified"), "{err}");
    let _ = Path::new("");
}

#[test]
fn graph_colours_links_by_the_state_both_ends_report() {
    let f = Fabric::new(&[]);
    let up = [
        "HSET",
        "PORT_TABLE|Ethernet8",
        "oper_status",
        "up",
        "admin_status",
        "up",
    ];
    f.cli("leaf1", 6, &up);
    f.cli(
        "spine1",
        6,
        &[
            "HSET",
            "PORT_TABLE|Ethernet0",
            "oper_status",
            "up",
            "admin_status",
            "up",
        ],
    );
    f.cli("leaf2", 6, &up);
    f.cli(
        "spine1",
        6,
        &[
            "HSET",
            "PORT_TABLE|Ethernet4",
            "oper_status",
            "down",
            "admin_status",
            "up",
        ],
    );
    let (code, out, err) = f.weft(&["graph", &f.file()]);
    assert_eq!(code, 0, "{err}");
    let edge = |a: &str, b: &str| -> String {
        out.lines()
            .find(|l| l.contains(&format!("\"{a}\" -- \"{b}\"")) && l.contains("tooltip"))
            .unwrap_or_else(|| panic!("no edge {a} -- {b}:\n{out}"))
            .to_string()
    };
    assert!(
        edge("spine1", "leaf1").contains("#2e8b57"),
        "both up: green"
    );
    assert!(
        edge("spine1", "leaf2").contains("#d62728"),
        "an end down: red"
    );
    assert!(
        edge("spine2", "leaf1").contains("#9a9a9a"),
        "no state: grey"
    );
    // weft status shows the same ends.
    let (_, out, _) = f.weft(&["status", &f.file()]);
    let row = out
        .lines()
        .find(|l| l.starts_with("leaf2:Ethernet8 ↔ spine1:Ethernet4"))
        .expect("link row");
    assert!(row.contains("up/up") && row.contains("down/up"), "{row}");
}

#[test]
fn a_db_only_testbed_says_what_it_cannot_do_and_down_cleans_up() {
    let (name, dir) = stand_in_plugin::scratch("tb");
    let state = dir.join("state");
    let db_dir = dir.join("db");
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topology/examples/leaf-spine-small.yaml"
    ))
    .expect("example")
    .replace("name: small", &format!("name: {name}"))
    .replace(
        "    p4rt_address: 127.0.0.1:9559\n",
        &format!(
            "    p4rt_address: 127.0.0.1:9559\n    db_socket_dir: {}\n",
            db_dir.display()
        ),
    );
    let file = dir.join("fabric.yaml");
    std::fs::write(&file, text).expect("intent");
    let file = file.to_string_lossy().into_owned();
    let sd = state.to_string_lossy().into_owned();
    let weft = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(args)
            .args(if args[0] == "testbed" {
                vec!["--state-dir", &sd]
            } else {
                vec![]
            })
            .stdin(Stdio::null())
            .output()
            .expect("weft");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, out) = weft(&["testbed", "up", &file, "--db-only"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        db_dir.join("leaf1/redis.sock").exists(),
        "sockets where the intent says:\n{out}"
    );
    assert!(
        out.contains(&format!("next: weft apply {file} --no-wait")),
        "{out}"
    );
    for (args, why) in [
        (vec!["testbed", "ping", &file], "nothing to ping"),
        (
            vec!["testbed", "link", &file, "leaf1:Ethernet8", "down"],
            "nothing to take down or up",
        ),
        (
            vec!["testbed", "spread", &file, "leaf1-h1", "leaf3-h1"],
            "nothing to send traffic through",
        ),
    ] {
        let (code, out) = weft(&args);
        assert_eq!(code, 1, "{args:?}: {out}");
        assert!(
            out.contains("was started with --db-only") && out.contains(why),
            "{args:?}: {out}"
        );
    }
    let (code, out) = weft(&["apply", &file, "--no-wait"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = weft(&["testbed", "status", &file, "--output", "json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["db_only"], true);
    assert_eq!(v["processes"].as_array().map(Vec::len), Some(6));
    // One redis-server dies before `down`: it is reported as not running, not as stopped.
    let dead = v["processes"][0]["pid"].as_u64().expect("pid").to_string();
    let dead_name = v["processes"][0]["name"]
        .as_str()
        .expect("name")
        .to_string();
    Command::new("kill")
        .args(["-KILL", &dead])
        .status()
        .expect("kill");
    wait_for("the killed redis to go", Duration::from_secs(5), || {
        !Path::new(&format!("/proc/{dead}")).exists()
            || std::fs::read_to_string(format!("/proc/{dead}/stat"))
                .is_ok_and(|s| s.contains(") Z"))
    });
    let (code, out) = weft(&["testbed", "status", &file]);
    assert_eq!(code, 1, "a process is not running: {out}");
    let (code, out) = weft(&["testbed", "down", &file]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("{dead_name} (pid {dead}) was not running")),
        "{out}"
    );
    assert_eq!(out.matches("stopped redis").count(), 5, "{out}");
    assert!(
        !db_dir.join("leaf1").exists(),
        "socket directories removed:\n{out}"
    );
    assert!(!state.exists(), "state directory removed:\n{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
