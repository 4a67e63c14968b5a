//! A fabric for the operator's commands through the real `weft` binary: the small example
//! with one real redis-server per switch (its SONiC DB), no plugin unless a test starts a
//! stand-in or writes a plugin's rows itself. `WEFT_TEST_BIN` runs the tests against another
//! build of `weft` (an older one, to see a test fail before its fix).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use weft_sonic_db::{SonicDb, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{PortCounters, QueueCounters, SwitchCounters};
use weft_sonic_schema::state::{PluginState, PluginStatus};
use weft_tests::redis::RedisServer;

pub const SWITCHES: [&str; 6] = ["spine1", "spine2", "leaf1", "leaf2", "leaf3", "leaf4"];

/// The `weft` under test.
pub fn bin() -> String {
    std::env::var("WEFT_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_weft").to_string())
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

pub fn example(name: &str) -> String {
    repo()
        .join("topology/examples")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// What a run of `weft` gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub out: String,
    pub err: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.out)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{self:?}"))
    }
}

/// Runs `weft` with `args` (and `stdin`), in the repository, without WEFT_LOG, with `env`.
pub fn weft_with(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Run {
    let mut c = Command::new(bin());
    c.args(args)
        .current_dir(repo())
        .env_remove("WEFT_LOG")
        .env_remove("WEFT_STATE_DIR")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("run weft");
    if let (Some(text), Some(mut i)) = (stdin, child.stdin.take()) {
        let _ = i.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().expect("weft output");
    Run {
        code: out.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn weft(args: &[&str]) -> Run {
    weft_with(args, None, &[])
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Six redis-servers and the small example on them (`DIR/fabric.yaml`).
pub struct Lab {
    pub dir: PathBuf,
    pub name: String,
    pub file: PathBuf,
    pub dbs: Vec<RedisServer>,
    pub rt: tokio::runtime::Runtime,
}

impl Lab {
    pub fn new(prefix: &str) -> Lab {
        let (name, dir) = super::stand_in_plugin::scratch(prefix);
        let dbs = super::stand_in_plugin::redis_servers(SWITCHES.len());
        let urls: Vec<String> = dbs.iter().map(|r| r.url()).collect();
        let file = super::stand_in_plugin::example_on(&name, &dir, &SWITCHES, &urls);
        Lab {
            dir,
            name,
            file,
            dbs,
            rt: tokio::runtime::Runtime::new().expect("runtime"),
        }
    }

    /// The same fabric with every DB somewhere nobody serves.
    pub fn gone(prefix: &str) -> (PathBuf, PathBuf) {
        let (name, dir) = super::stand_in_plugin::scratch(prefix);
        let urls: Vec<String> = SWITCHES
            .iter()
            .map(|s| format!("unix://{}/gone/{s}.sock", dir.display()))
            .collect();
        let file = super::stand_in_plugin::example_on(&name, &dir, &SWITCHES, &urls);
        (dir, file)
    }

    pub fn file(&self) -> String {
        self.file.to_string_lossy().into_owned()
    }

    pub fn db(&self, switch: &str) -> &RedisServer {
        let i = SWITCHES.iter().position(|s| *s == switch).expect("switch");
        &self.dbs[i]
    }

    pub fn cli(&self, switch: &str, db: u8, args: &[&str]) -> String {
        self.db(switch).cli(db, args).expect("redis-cli")
    }

    /// `weft` with this lab's history directory.
    pub fn weft(&self, args: &[&str]) -> Run {
        let state = self.dir.join("state");
        weft_with(args, None, &[("WEFT_STATE_DIR", &state.to_string_lossy())])
    }

    /// A stand-in plugin on every switch (answers every key; status row in sync).
    pub fn stand_ins(&self) {
        for s in SWITCHES {
            self.rt
                .spawn(super::stand_in_plugin::stand_in(self.db(s).url()));
        }
        for s in SWITCHES {
            let t0 = std::time::Instant::now();
            while self.cli(s, 6, &["EXISTS", "WEFT_PLUGIN|status"]).trim() != "1" {
                assert!(t0.elapsed() < Duration::from_secs(30), "{s}'s stand-in");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// What a running plugin leaves in `switch`'s DBs: a status row, and counters of a poll
    /// made `age_ms` ago (port and queue rows of every port, a little traffic on Ethernet0).
    pub fn plugin_rows(&self, switch: &str, age_ms: u64, packets: u64) {
        let url = self.db(switch).url();
        self.rt.block_on(async move {
            let sonic = SonicDb::from_endpoint(&url).expect("endpoint");
            let counters = Table::new(
                sonic.connect(SonicDbId::CountersDb).await.expect("db"),
                "COUNTERS",
            )
            .expect("table");
            let mut rows = Vec::new();
            for p in ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"] {
                let pc = PortCounters {
                    port: p.into(),
                    rx_packets: Some(packets),
                    rx_bytes: Some(packets * 1000),
                    tx_packets: Some(packets),
                    tx_bytes: Some(packets * 1000),
                    ..Default::default()
                };
                rows.push((pc.key(), pc.to_fields()));
                let q = QueueCounters {
                    port: p.into(),
                    queue: 3,
                    packets: Some(packets),
                    ecn_marked: Some(0),
                    ..Default::default()
                };
                rows.push((q.key(), q.to_fields()));
            }
            let sw = SwitchCounters {
                poll_time_ms: Some(now_ms().saturating_sub(age_ms)),
                poll_interval_ms: Some(1000),
                ..Default::default()
            };
            rows.push((sw.key(), sw.to_fields()));
            counters.merge_many(&rows).await.expect("counters");
            let st = PluginStatus {
                counter_polls: 1 + packets,
                ..PluginStatus::fresh(PluginState::Running, "lab")
            };
            Table::new(
                sonic.connect(SonicDbId::StateDb).await.expect("state db"),
                PluginStatus::TABLE,
            )
            .expect("table")
            .set(&st.key(), &st.to_fields())
            .await
            .expect("status row");
        });
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
