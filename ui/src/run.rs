//! What the page knows of `weft run`: its status file (link use, switches not converged,
//! reconvergences), read as `weft status` reads it, and a timeline of link events and
//! reconvergences.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;
use weft_reconcile::core::{LinkStatus, Reconvergence};
use weft_reconcile::run::DaemonStatus;

/// `weft run` as the page sees it.
#[derive(Debug, Clone, Default)]
pub enum RunSeen {
    /// No status file: link use is not known (a link both ends report up is shown up).
    #[default]
    NotRunning,
    /// A status file whose process is gone.
    Stale(String),
    Running(Box<DaemonStatus>),
}

impl RunSeen {
    /// From `weft_observe::status::read_daemon_status`.
    pub fn of(st: Option<weft_observe::status::RunState>) -> RunSeen {
        match st {
            None => RunSeen::NotRunning,
            Some(s) if s.running => RunSeen::Running(Box::new(s.status)),
            Some(s) => RunSeen::Stale(s.why.unwrap_or_else(|| "not running".into())),
        }
    }

    pub fn status(&self) -> Option<&DaemonStatus> {
        match self {
            RunSeen::Running(s) => Some(s),
            _ => None,
        }
    }

    /// Links `weft run` reports (the others are in use while it runs), by name.
    pub fn links(&self) -> BTreeMap<&str, &LinkStatus> {
        self.status()
            .map(|s| s.links.iter().map(|l| (l.link.as_str(), l)).collect())
            .unwrap_or_default()
    }

    /// Switches `weft run` has not converged, with why.
    pub fn not_converged(&self) -> BTreeMap<&str, String> {
        self.status()
            .map(|s| {
                s.switches
                    .iter()
                    .map(|(n, v)| {
                        let state = v.get("state").and_then(|x| x.as_str()).unwrap_or("?");
                        let why = v.get("reason").and_then(|x| x.as_str());
                        (
                            n.as_str(),
                            match why {
                                Some(r) => format!("weft run: {state}: {r}"),
                                None => format!("weft run: {state}"),
                            },
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `weft run` in a frame.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// `running`, `not running`, `stale`.
    pub state: &'static str,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconvergences: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_ms: Option<f64>,
}

impl RunSummary {
    pub fn of(r: &RunSeen) -> RunSummary {
        match r {
            RunSeen::NotRunning => RunSummary {
                state: "not running",
                detail: "no weft run status file: link use unknown".into(),
                reconvergences: None,
                last_ms: None,
            },
            RunSeen::Stale(why) => RunSummary {
                state: "stale",
                detail: why.clone(),
                reconvergences: None,
                last_ms: None,
            },
            RunSeen::Running(s) => RunSummary {
                state: "running",
                detail: format!(
                    "pid {} on {}, {} of {} switches converged, {} links reported",
                    s.pid,
                    s.host,
                    s.switches_converged,
                    s.switches_converged + s.switches.len(),
                    s.links.len()
                ),
                reconvergences: Some(s.reconvergences),
                last_ms: s.last.as_ref().map(|l| l.total_ms),
            },
        }
    }
}

/// One entry of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub t_ms: u64,
    /// `link`, `switch`, `reconvergence`, `weft run`.
    pub kind: &'static str,
    pub subject: String,
    pub detail: String,
}

/// The last events, oldest first.
#[derive(Debug, Default)]
pub struct Timeline {
    events: VecDeque<Event>,
}

/// Events kept.
pub const EVENTS: usize = 200;

impl Timeline {
    pub fn push(&mut self, e: Event) {
        self.events.push_back(e);
        while self.events.len() > EVENTS {
            self.events.pop_front();
        }
    }

    /// The last `n`, newest first.
    pub fn last(&self, n: usize) -> Vec<Event> {
        self.events.iter().rev().take(n).cloned().collect()
    }
}

/// A reconvergence as the timeline says it.
pub fn reconvergence_event(t_ms: u64, r: &Reconvergence, more: u64) -> Event {
    let changes = if r.changes.is_empty() {
        "resync".to_string()
    } else {
        r.changes.join(", ")
    };
    Event {
        t_ms,
        kind: "reconvergence",
        subject: changes,
        detail: format!(
            "{} switches, {} entries{} in {:.0} ms{}",
            r.switches_changed,
            r.entries_written,
            if r.failed > 0 {
                format!(", {} FAILED", r.failed)
            } else {
                String::new()
            },
            r.total_ms,
            if more > 0 {
                format!(" ({more} more since the last read)")
            } else {
                String::new()
            }
        ),
    }
}
