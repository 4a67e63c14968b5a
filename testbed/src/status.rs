//! `status`: which of a testbed's processes run and which host namespaces exist.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::chaos;
use crate::error::Result;
use crate::exec::pid_alive;
use crate::names::netns_exists;
use crate::state::State;

/// A testbed's processes and hosts, for `weft testbed status --output json`.
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    pub fabric: String,
    pub netns: String,
    pub state_dir: PathBuf,
    /// Only redis-servers (`up --db-only`).
    pub db_only: bool,
    pub processes: Vec<ProcessStatus>,
    /// Every switch's DB: whether it answers where the intent says (a process that runs
    /// but whose socket is gone answers nobody).
    pub dbs: Vec<DbStatus>,
    pub hosts: Vec<HostStatus>,
}

impl StatusReport {
    /// Every process runs and every DB answers.
    pub fn healthy(&self) -> bool {
        self.processes.iter().all(|p| p.running) && self.dbs.iter().all(|d| d.answers)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DbStatus {
    pub switch: String,
    pub db: String,
    pub answers: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessStatus {
    pub name: String,
    pub pid: u32,
    pub running: bool,
    pub log: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
    pub name: String,
    pub ipv4: String,
    pub netns: String,
    pub netns_exists: bool,
}

/// What runs, as data.
pub fn status_report(state_dir: &Path) -> Result<StatusReport> {
    let st = State::load(state_dir)?;
    Ok(StatusReport {
        db_only: st.db_only(),
        processes: st
            .processes
            .iter()
            .map(|p| ProcessStatus {
                name: p.name.clone(),
                pid: p.pid,
                running: pid_alive(p.pid),
                log: p.log.clone(),
            })
            .collect(),
        dbs: st
            .switches
            .iter()
            .map(|s| DbStatus {
                switch: s.name.clone(),
                db: s.db.clone(),
                answers: crate::claims::db_answers(&s.db),
            })
            .collect(),
        hosts: st
            .hosts
            .iter()
            .map(|h| HostStatus {
                name: h.name.clone(),
                ipv4: h.ipv4.clone(),
                netns: h.netns.clone(),
                netns_exists: netns_exists(&h.netns),
            })
            .collect(),
        fabric: st.fabric,
        netns: st.netns,
        state_dir: st.state_dir,
    })
}

/// One line per process and host: alive or not.
pub fn status(state_dir: &Path) -> Result<String> {
    let st = State::load(state_dir)?;
    let mut o = format!(
        "testbed {} (namespace {}, state {})\n",
        st.fabric,
        st.netns,
        st.state_dir.display()
    );
    for p in &st.processes {
        o += &format!(
            "  {:<24} pid {:<8} {}\n",
            p.name,
            p.pid,
            if pid_alive(p.pid) {
                "running".to_string()
            } else {
                match chaos::restart_hint(&st.fabric, &p.name) {
                    Some(h) => format!("NOT RUNNING ({h}; log {})", p.log.display()),
                    None => "NOT RUNNING".to_string(),
                }
            }
        );
    }
    for h in &st.hosts {
        o += &format!(
            "  host {:<19} {} {}\n",
            h.name,
            h.ipv4,
            if netns_exists(&h.netns) {
                ""
            } else {
                "(namespace missing)"
            }
        );
    }
    Ok(o)
}
