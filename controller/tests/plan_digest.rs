//! `weft plan` against switches whose plugin publishes the digests of what it holds
//! (APPL_STATE_DB P4RT_TABLE, the owned CONFIG_DB tables): through the real `weft` binary
//! against one real redis-server per switch, with the shared stand-in plugin (the real plugin
//! on BMv2 is checked in the scenario tests). Rows being read shows in each server's
//! `INFO commandstats` as SCAN calls (the dump script pages with SCAN; the status row is one
//! HGETALL and the stand-in's pops scan nothing).

#[path = "common/stand_in.rs"]
#[allow(dead_code)]
mod stand_in_plugin;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weft_sonic_db::{ProducerStateTable, SonicDb, SonicDbId};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::PluginStatus;
use weft_tests::redis::RedisServer;

const SWITCHES: [&str; 6] = ["spine1", "spine2", "leaf1", "leaf2", "leaf3", "leaf4"];
const CONFIG_DB: u8 = 4;
const STATE_DB: u8 = 6;
const APPL_STATE_DB: u8 = 14;

/// Six redis-servers with a stand-in plugin each, the small example pointed at them, applied.
struct Fabric {
    dir: PathBuf,
    file: String,
    dbs: Vec<RedisServer>,
    _rt: tokio::runtime::Runtime,
}

impl Fabric {
    fn applied() -> Fabric {
        let (name, dir) = stand_in_plugin::scratch("dg");
        let dbs = stand_in_plugin::redis_servers(SWITCHES.len());
        let urls: Vec<String> = dbs.iter().map(|r| r.url()).collect();
        let file = stand_in_plugin::example_on(&name, &dir, &SWITCHES, &urls);
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        for r in &dbs {
            rt.spawn(stand_in_plugin::stand_in(r.url()));
        }
        let f = Fabric {
            dir,
            file: file.to_string_lossy().into_owned(),
            dbs,
            _rt: rt,
        };
        for s in SWITCHES {
            f.wait_for(&format!("{s}'s status row"), || {
                f.status(s).is_some_and(|st| st.digests().is_some())
            });
        }
        let (code, out, err) = f.weft(&["apply", &f.file, "--timeout", "20s"]);
        assert_eq!(code, 0, "apply\n{out}{err}");
        // The answers are published before the stand-in rewrites its status row.
        for s in SWITCHES {
            f.wait_for(&format!("{s}'s digests to describe its DBs"), || {
                f.published_matches_read_back(s)
            });
        }
        f
    }

    fn db(&self, switch: &str) -> &RedisServer {
        let i = SWITCHES.iter().position(|s| *s == switch).expect("switch");
        &self.dbs[i]
    }

    fn cli(&self, switch: &str, db: u8, args: &[&str]) -> String {
        self.db(switch).cli(db, args).expect("redis-cli")
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

    fn plan_json(&self, extra: &[&str]) -> (i32, serde_json::Value) {
        let mut args = vec!["plan", "--detailed-exitcode", "--output", "json"];
        args.extend_from_slice(extra);
        args.push(&self.file);
        let (code, out, err) = self.weft(&args);
        let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}{err}"));
        (code, v)
    }

    fn status(&self, switch: &str) -> Option<PluginStatus> {
        let flat = self.cli(switch, STATE_DB, &["HGETALL", "WEFT_PLUGIN|status"]);
        let lines: Vec<&str> = flat.lines().collect();
        let fields: Vec<(String, String)> = lines
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (c[0].to_string(), c[1].to_string()))
            .collect();
        PluginStatus::from_fields("status", &fields).ok()
    }

    /// What the switch's DBs hold, read as `weft plan` reads them when it must.
    fn read_back(&self, switch: &str) -> weft_reconcile::plan::Installed {
        let url = self.db(switch).url();
        self._rt
            .block_on(weft_reconcile::io::read_installed(&url))
            .expect("read")
    }

    fn published_matches_read_back(&self, switch: &str) -> bool {
        let read = self.read_back(switch).digests();
        self.status(switch)
            .and_then(|s| s.digests())
            .is_some_and(|d| d == read)
    }

    /// Zeroes every server's command counters, once the stand-ins are done rereading CONFIG_DB
    /// (they scan it after each change): then only a plan's reads count.
    fn reset_stats(&self) {
        self.wait_for("the stand-ins to stop scanning", || {
            for s in SWITCHES {
                assert_eq!(self.cli(s, 0, &["CONFIG", "RESETSTAT"]).trim(), "OK");
            }
            std::thread::sleep(Duration::from_millis(300));
            SWITCHES.iter().all(|s| self.scans(s) == 0)
        });
    }

    /// SCAN calls on the switch's server since the last reset: a read of its rows pages
    /// through its keys with SCAN, nothing else here does.
    fn scans(&self, switch: &str) -> u64 {
        let info = self.cli(switch, 0, &["INFO", "commandstats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_scan:calls="))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    fn wait_for(&self, what: &str, mut ok: impl FnMut() -> bool) {
        let t0 = Instant::now();
        while !ok() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Takes the digest fields out of every status row, as an older plugin writes it: `weft
    /// plan` must read every switch's rows.
    fn forget_digests(&self) {
        for s in SWITCHES {
            self.cli(
                s,
                STATE_DB,
                &[
                    "HDEL",
                    "WEFT_PLUGIN|status",
                    "appl_state_digest",
                    "appl_state_rows",
                    "config_digest",
                    "config_rows",
                ],
            );
            assert!(self.status(s).is_some_and(|st| st.digests().is_none()));
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn switch<'a>(plan: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    plan["switches"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("{name} in the plan"))
}

fn changes(s: &serde_json::Value) -> u64 {
    ["add", "modify", "delete", "config_set", "config_delete"]
        .iter()
        .map(|c| s["counts"][*c].as_u64().unwrap_or(u64::MAX))
        .sum()
}

#[test]
fn a_plan_against_plugins_whose_digests_match_reads_no_rows_and_finds_nothing_to_do() {
    let f = Fabric::applied();
    f.reset_stats();
    let (code, plan) = f.plan_json(&[]);
    assert_eq!(code, 0, "nothing to do\n{plan:#}");
    for s in SWITCHES {
        assert_eq!(f.scans(s), 0, "{s}: rows were read");
        let p = switch(&plan, s);
        assert_eq!(changes(p), 0, "{s}: {p:#}");
        assert_eq!(p["installed_from"], "APPL_STATE_DB");
        assert_eq!(p["installed_trusted"], true);
        // Counts and digest are what a plan that read the rows says.
        let read = f.read_back(s);
        assert_eq!(
            p["counts"]["entries"].as_u64(),
            Some(read.entries.len() as u64)
        );
        assert_eq!(
            p["counts"]["config_rows"].as_u64(),
            Some(read.config.len() as u64)
        );
        assert!(!read.entries.is_empty() && !read.config.is_empty());
        assert_eq!(p["installed_digest"].as_str(), Some(read.digest().as_str()));
    }
    // The same plan from a read of every switch's rows (status rows without digests), which
    // the counters see.
    f.forget_digests();
    f.reset_stats();
    let (code, full) = f.plan_json(&[]);
    assert_eq!(code, 0, "{full:#}");
    for s in SWITCHES {
        assert!(f.scans(s) > 0, "{s}: a plan without digests reads the rows");
    }
    assert_eq!(full, plan, "the digest shortcut and a full read plan alike");
}

#[test]
fn a_hand_edited_config_row_makes_plan_read_that_switch_and_name_the_row() {
    let f = Fabric::applied();
    let before = f
        .status("leaf1")
        .and_then(|s| s.digests())
        .expect("digests");
    let port = f.cli("leaf1", CONFIG_DB, &["KEYS", "PORT|*"]);
    let port = port.lines().next().expect("a PORT row").trim().to_string();
    assert_eq!(
        f.cli("leaf1", CONFIG_DB, &["HSET", &port, "mtu", "1500"])
            .trim(),
        "0",
        "an existing field rewritten"
    );
    // The stand-in's CONFIG_DB watcher rereads the tables and republishes.
    f.wait_for("leaf1's config digest to change", || {
        f.status("leaf1")
            .and_then(|s| s.digests())
            .is_some_and(|d| d.config != before.config && d.entries == before.entries)
    });
    assert!(f.published_matches_read_back("leaf1"));
    f.reset_stats();
    let (code, plan) = f.plan_json(&[]);
    assert_eq!(code, 3, "changes to make\n{plan:#}");
    let leaf1 = switch(&plan, "leaf1");
    assert_eq!(changes(leaf1), 1, "{leaf1:#}");
    let set = &leaf1["config_set"][0];
    assert_eq!(
        format!(
            "{}|{}",
            set["table"].as_str().unwrap_or(""),
            set["key"].as_str().unwrap_or("")
        ),
        port
    );
    assert_eq!(set["old"]["mtu"], "1500");
    assert_eq!(set["fields"]["mtu"], "9100");
    assert!(f.scans("leaf1") > 0, "leaf1's rows were read");
    for s in SWITCHES.iter().filter(|s| **s != "leaf1") {
        assert_eq!(changes(switch(&plan, s)), 0, "{s}");
        assert_eq!(f.scans(s), 0, "{s}: rows were read");
    }
}

#[test]
fn a_deleted_entry_or_another_desired_state_makes_plan_read_and_report_what_a_full_read_does() {
    let f = Fabric::applied();
    // An entry leaf2 holds goes (deleted through APPL_DB, answered, gone from APPL_STATE_DB).
    let keys = f.cli(
        "leaf2",
        APPL_STATE_DB,
        &["KEYS", "P4RT_TABLE:FIXED_IPV4_TABLE:*"],
    );
    let gone = keys
        .lines()
        .next()
        .and_then(|k| k.trim().strip_prefix("P4RT_TABLE:"))
        .expect("a route on leaf2")
        .to_string();
    let before = f
        .status("leaf2")
        .and_then(|s| s.digests())
        .expect("digests");
    f._rt.block_on(async {
        let sonic = SonicDb::from_endpoint(&f.db("leaf2").url()).expect("endpoint");
        let mut p = ProducerStateTable::new(&sonic, SonicDbId::ApplDb, "P4RT_TABLE")
            .await
            .expect("producer");
        p.del(&gone).await.expect("delete");
    });
    f.wait_for("leaf2's entry digest to change", || {
        f.status("leaf2")
            .and_then(|s| s.digests())
            .is_some_and(|d| d.entries.count() + 1 == before.entries.count())
    });
    assert!(f.published_matches_read_back("leaf2"));
    f.reset_stats();
    let (code, plan) = f.plan_json(&[]);
    assert_eq!(code, 3, "{plan:#}");
    let leaf2 = switch(&plan, "leaf2");
    assert_eq!(changes(leaf2), 1, "{leaf2:#}");
    assert_eq!(leaf2["add"][0]["key"].as_str(), Some(gone.as_str()));
    assert!(f.scans("leaf2") > 0);
    for s in SWITCHES.iter().filter(|s| **s != "leaf2") {
        assert_eq!(f.scans(s), 0, "{s}: rows were read");
    }

    // Another desired state: a spine link down changes the entries of the switches it touches.
    let (_, offline) = f.plan_json(&["--offline"]);
    let link = switch(&offline, "spine1")["links"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["peer_kind"] == "switch"))
        .and_then(|l| l["port"].as_str())
        .expect("a spine1 fabric port")
        .to_string();
    let down = format!("spine1:{link}");
    f.reset_stats();
    let (code, with_digests) = f.plan_json(&["--down", &down]);
    assert_eq!(code, 3);
    let mut read = 0;
    for s in SWITCHES {
        let p = switch(&with_digests, s);
        if f.scans(s) > 0 {
            read += 1;
        } else {
            assert_eq!(
                changes(p),
                0,
                "{s} was planned unread, so it has nothing to do"
            );
        }
    }
    assert!(
        read >= 2,
        "at least leaf2 and the switches the link touches were read"
    );
    assert!(changes(switch(&with_digests, "spine1")) > 0);
    // Exactly what a plan that reads every switch's rows says.
    f.forget_digests();
    let (_, full) = f.plan_json(&["--down", &down]);
    assert_eq!(with_digests, full);
}
