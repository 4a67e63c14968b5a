//! What `weft apply` converged, kept for `weft apply --previous`: each apply that every switch
//! answered is recorded in the fabric's state directory (`/var/lib/weft/<fabric>` unless told
//! otherwise) with its intent's text, the links it took down, the switches it selected, and
//! each switch's installed digest read back after it converged. Rolling back applies the
//! record before the last one, and only when the fabric still holds what the last one left
//! ([`drifted`]): a fabric changed since by hand or by another tool is not rolled over.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use weft_topology::Topology;

use crate::planfile::PlanIntent;

/// The record's format version (`weft_applied`).
pub const APPLIED_VERSION: u32 = 1;
/// Records kept per fabric: older ones are removed.
pub const KEEP: usize = 20;

/// One apply that converged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    pub weft_applied: u32,
    pub fabric: String,
    /// Unix time, milliseconds.
    pub applied_ms: u64,
    pub intent: PlanIntent,
    /// `--down` as given.
    pub down: Vec<String>,
    /// The switches selected (`None`: all).
    pub targets: Option<Vec<String>>,
    /// Each switch's installed digest after it converged.
    pub switches: Vec<(String, String)>,
}

/// Why the history cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a record of applies of this weft")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("no earlier converged apply of fabric {fabric} in {dir} to roll back to")]
    NothingBefore { fabric: String, dir: PathBuf },
}

/// The default state directory of a fabric.
pub fn default_dir(fabric: &str) -> PathBuf {
    PathBuf::from("/var/lib/weft").join(fabric)
}

/// The records of a fabric, in one directory.
#[derive(Debug, Clone)]
pub struct History {
    dir: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> HistoryError + '_ {
    move |source| HistoryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl History {
    pub fn new(dir: impl Into<PathBuf>) -> History {
        History { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every record, oldest first.
    pub fn list(&self) -> Result<Vec<Applied>, HistoryError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&self.dir)(e)),
        };
        let mut out = Vec::new();
        for e in entries {
            let path = e.map_err(io(&self.dir))?.path();
            let is_record = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("applied-") && n.ends_with(".json"));
            if !is_record {
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(io(&path))?;
            let a: Applied = serde_json::from_str(&text).map_err(|source| HistoryError::Parse {
                path: path.clone(),
                source,
            })?;
            out.push(a);
        }
        out.sort_by_key(|a| a.applied_ms);
        Ok(out)
    }

    /// Keeps `a` (written whole, then renamed: a record is never half there), and the last
    /// [`KEEP`] records.
    pub fn record(&self, a: &Applied) -> Result<PathBuf, HistoryError> {
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let path = self.dir.join(format!("applied-{:016}.json", a.applied_ms));
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(a).map_err(|source| HistoryError::Parse {
            path: path.clone(),
            source,
        })?;
        std::fs::write(&tmp, text + "\n").map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        let all = self.list()?;
        for old in all.iter().take(all.len().saturating_sub(KEEP)) {
            let p = self
                .dir
                .join(format!("applied-{:016}.json", old.applied_ms));
            let _ = std::fs::remove_file(p);
        }
        Ok(path)
    }

    /// The last record and the one before it: what the fabric should hold now, and what
    /// `--previous` goes back to.
    pub fn last_two(&self, fabric: &str) -> Result<(Applied, Applied), HistoryError> {
        let mut all = self.list()?;
        all.retain(|a| a.fabric == fabric);
        let last = all.pop();
        let before = all.pop();
        match (before, last) {
            (Some(b), Some(l)) => Ok((l, b)),
            _ => Err(HistoryError::NothingBefore {
                fabric: fabric.to_string(),
                dir: self.dir.clone(),
            }),
        }
    }
}

/// The switches whose installed state is not what `last` left, one line each (empty: none
/// drifted). Switches are read now; one that cannot be read has drifted as far as anyone knows.
pub async fn drifted(t: &Topology, last: &Applied) -> Vec<String> {
    let sel = Some(
        last.switches
            .iter()
            .filter_map(|(n, _)| t.switch_index(n))
            .collect(),
    );
    let now = crate::planning::read_selected(t, &sel, 64).await;
    let mut out = Vec::new();
    for (name, digest) in &last.switches {
        let Some(si) = t.switch_index(name) else {
            out.push(format!("{name}: not in the intent any more"));
            continue;
        };
        let d = now[si].digest();
        if !now[si].trusted() {
            out.push(format!("{name}: {}", now[si].describe()));
        } else if d != *digest {
            out.push(format!(
                "{name}: changed since the last apply (digest {digest} then, {d} now)"
            ));
        }
    }
    out
}

/// What `t`'s selected switches hold now, as a record's `switches`: only when every one is
/// trusted (its plugin running and in sync), else `None` (an apply that did not converge is not
/// a state to go back to).
pub async fn converged_digests(
    t: &Topology,
    sel: &std::collections::BTreeSet<weft_topology::SwitchIdx>,
) -> Option<Vec<(String, String)>> {
    let now = crate::planning::read_selected(t, &Some(sel.clone()), 64).await;
    sel.iter()
        .map(|&si| {
            now[si]
                .trusted()
                .then(|| (t.switches[si].name.clone(), now[si].digest()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(ms: u64, fabric: &str) -> Applied {
        Applied {
            weft_applied: APPLIED_VERSION,
            fabric: fabric.into(),
            applied_ms: ms,
            intent: PlanIntent::new("f.yaml", format!("fabric: {{name: {fabric}}} # {ms}\n")),
            down: Vec::new(),
            targets: None,
            switches: vec![("leaf1".into(), format!("{ms:032x}"))],
        }
    }

    #[test]
    fn records_come_back_oldest_first_and_the_one_before_the_last_is_the_rollback() {
        let dir = std::env::temp_dir().join(format!("weft-history-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let h = History::new(&dir);
        assert!(matches!(
            h.last_two("lab"),
            Err(HistoryError::NothingBefore { .. })
        ));
        for ms in [30, 10, 20] {
            h.record(&applied(ms, "lab")).expect("record");
        }
        h.record(&applied(40, "other")).expect("record");
        let all: Vec<u64> = h
            .list()
            .expect("list")
            .iter()
            .map(|a| a.applied_ms)
            .collect();
        assert_eq!(all, [10, 20, 30, 40]);
        let (last, before) = h.last_two("lab").expect("two");
        assert_eq!((last.applied_ms, before.applied_ms), (30, 20));
        for ms in 100..(100 + KEEP as u64) {
            h.record(&applied(ms, "lab")).expect("record");
        }
        assert_eq!(
            h.list().expect("list").len(),
            KEEP,
            "only the last are kept"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
