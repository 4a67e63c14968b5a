//! The state file (`<state-dir>/state.json`): everything a testbed started, for `status`,
//! `down` and every later command. Data only: what reads it lives with what it does.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, TestbedError, io};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcState {
    pub name: String,
    pub pid: u32,
    pub log: PathBuf,
    /// The command line, so a killed process can be started again the same way.
    pub cmd: Vec<String>,
}

/// One cable of the testbed: its two ends (switch and port, or host and `eth0`) and the two
/// middle interfaces in the wires namespace that carry it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireState {
    pub a: (String, String),
    pub b: (String, String),
    pub middle: [String; 2],
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchState {
    pub name: String,
    pub device_id: u64,
    pub p4rt_address: String,
    pub db: String,
    pub thrift_port: u16,
    /// SONiC port name → interface in the fabric namespace.
    pub interfaces: BTreeMap<String, String>,
    /// The plugin's `--metrics` address, inside the fabric namespace (none in state files of
    /// older testbeds and in `--db-only` ones).
    #[serde(default)]
    pub metrics: Option<String>,
    /// Each port's emulated line rate, packets/s: its BMv2 queue rate, which the plugin sets
    /// (`--line-rate`) and times PFC pauses at (none in state files of older testbeds).
    #[serde(default)]
    pub line_rates: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostState {
    pub name: String,
    pub netns: String,
    pub ipv4: String,
    pub ipv6: Option<String>,
}

/// Everything a testbed started, for `status` and `down`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    pub fabric: String,
    pub netns: String,
    pub state_dir: PathBuf,
    pub processes: Vec<ProcState>,
    pub switches: Vec<SwitchState>,
    pub hosts: Vec<HostState>,
    /// The cables, for `link down/up` (empty in state files of older testbeds).
    #[serde(default)]
    pub wires: Vec<WireState>,
    /// The socket directories `up` made (and `down` removes): none that were there before.
    #[serde(default)]
    pub made_dirs: Vec<PathBuf>,
}

impl State {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("state.json")
    }
    pub fn load(dir: &Path) -> Result<State> {
        let p = State::path(dir);
        let text = fs::read_to_string(&p).map_err(io(format!("reading {}", p.display())))?;
        serde_json::from_str(&text)
            .map_err(|e| TestbedError::Other(format!("{}: {e}", p.display())))
    }
    pub(crate) fn save(&self) -> Result<()> {
        let p = State::path(&self.state_dir);
        let text =
            serde_json::to_string_pretty(self).map_err(|e| TestbedError::Other(e.to_string()))?;
        fs::write(&p, text).map_err(io(format!("writing {}", p.display())))
    }
    pub fn switch(&self, name: &str) -> Option<&SwitchState> {
        self.switches.iter().find(|s| s.name == name)
    }
    pub fn host(&self, name: &str) -> Option<&HostState> {
        self.hosts.iter().find(|h| h.name == name)
    }
    /// The emulated line rate of `switch:port`, packets/s.
    pub fn line_rate(&self, switch: &str, port: &str) -> Option<u64> {
        self.switch(switch)?.line_rates.get(port).copied()
    }

    /// Started with `--db-only`: redis-servers and nothing else.
    pub fn db_only(&self) -> bool {
        self.hosts.is_empty() && self.processes.iter().all(|p| p.name.starts_with("redis "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("weft-testbed-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("scratch dir");
        d
    }

    #[test]
    fn the_state_file_reads_back_what_was_saved() {
        let dir = scratch("state");
        let st = fixtures::state(&dir);
        st.save().expect("save");
        let back = State::load(&dir).expect("load");
        assert_eq!(
            serde_json::to_value(&back).expect("json"),
            serde_json::to_value(&st).expect("json")
        );
        assert_eq!(back.switch("leaf1").map(|s| s.device_id), Some(2));
        assert_eq!(back.host("h1").map(|h| h.ipv4.as_str()), Some("10.0.0.2"));
        assert!(back.switch("leaf9").is_none());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_state_file_of_an_older_testbed_without_cables_or_metrics_still_loads() {
        let dir = scratch("old-state");
        let mut v = serde_json::to_value(fixtures::state(&dir)).expect("json");
        v.as_object_mut().expect("object").remove("wires");
        for s in v["switches"].as_array_mut().expect("switches") {
            s.as_object_mut().expect("switch").remove("metrics");
        }
        fs::write(State::path(&dir), v.to_string()).expect("write");
        let st = State::load(&dir).expect("load");
        assert!(st.wires.is_empty());
        assert!(st.switches.iter().all(|s| s.metrics.is_none()));
        fs::write(State::path(&dir), "{").expect("write");
        let e = State::load(&dir).expect_err("truncated");
        assert!(
            e.to_string()
                .starts_with(&State::path(&dir).display().to_string()),
            "{e}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_testbed_of_redis_servers_only_is_db_only() {
        let dir = Path::new("/nonexistent");
        let mut st = fixtures::state(dir);
        assert!(!st.db_only());
        st.hosts.clear();
        st.processes.retain(|p| p.name.starts_with("redis "));
        assert!(st.db_only());
    }
}
