//! Reading one switch's SONiC DBs, bounded in time, and what a read can give: a verdict built
//! on it keeps apart a switch that answered with data, one that answered with nothing, one
//! whose data is old, and one that did not answer ([`SwitchRead`]): unknown is never healthy.
//!
//! Counters are current only while a plugin writes them: [`read_counters`] reads COUNTERS_DB
//! with the plugin's status row and [`judge_counters`] calls them stale when no live plugin
//! writes them, or when the poll that wrote them (`COUNTERS:WEFT_SWITCH` `WEFT_POLL_TIME_MS`)
//! is older than a few polling intervals ([`stale_after`]).

use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use weft_sonic_db::{FieldValues, SonicDb, SonicDbError, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{POLL_INTERVAL, POLL_TIME, SWITCH_KEY};
use weft_sonic_schema::state::{PLUGIN_STATUS_KEY, PluginState, PluginStatus};

/// How long one switch may take to answer everything asked of it.
pub const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a switch's DB could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Refused, no such socket, not Redis, a failed command: the DB's own words, on one line.
    #[error("{reason}")]
    Unreachable { db: String, reason: String },
    /// Nothing came back within `after`.
    #[error("{db} did not answer within {}", crate::human_duration(*after))]
    Timeout { db: String, after: Duration },
}

impl ReadError {
    /// A DB error as an operator reads it (see `weft_reconcile::io::describe_db_error`).
    pub fn db(db: &str, e: &SonicDbError) -> ReadError {
        ReadError::Unreachable {
            db: db.to_string(),
            reason: weft_reconcile::io::describe_db_error(db, e),
        }
    }
}

/// `f` with `after` to answer.
pub async fn bounded<T>(
    db: &str,
    after: Duration,
    f: impl Future<Output = Result<T, ReadError>>,
) -> Result<T, ReadError> {
    tokio::time::timeout(after, f).await.unwrap_or_else(|_| {
        Err(ReadError::Timeout {
            db: db.to_string(),
            after,
        })
    })
}

/// One switch's read of something it should hold.
#[derive(Debug, Clone, PartialEq)]
pub enum SwitchRead<T> {
    /// The DB answered with it, and it is current.
    Ok(T),
    /// The DB answered and holds none of it: nothing wrote it (no plugin, or not yet).
    NoData,
    /// What the DB holds is not current: its writer stopped, or wrote it too long ago.
    Stale { data: T, why: Staleness },
    /// The DB did not answer.
    Unreachable(ReadError),
}

/// Why what a switch's DB holds is not current.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Staleness {
    /// Written `age` ago, more than `limit` (a few of its writer's intervals).
    Old { age: Duration, limit: Duration },
    /// No live plugin writes it: its status row expired (the plugin died or never ran).
    NoWriter,
    /// The plugin lives but is not running (`state`): it does not poll now.
    NotRunning(String),
    /// The plugin has not polled since it started: the rows are a previous plugin's.
    NotPolled,
}

impl std::fmt::Display for Staleness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Staleness::Old { age, limit } => write!(
                f,
                "last written {} ago (more than {}: its plugin stopped polling?)",
                crate::human_duration(*age),
                crate::human_duration(*limit)
            ),
            Staleness::NoWriter => write!(
                f,
                "no live plugin writes it (no WEFT_PLUGIN|status row: the plugin died or never ran)"
            ),
            Staleness::NotRunning(s) => {
                write!(
                    f,
                    "its plugin is {s}, not running: what is there is not current"
                )
            }
            Staleness::NotPolled => write!(
                f,
                "its plugin has not polled since it started: what is there is a previous plugin's"
            ),
        }
    }
}

/// A switch whose data a verdict could not use, as every command reports it (`unknown`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unknown {
    pub switch: String,
    /// `no-data`, `stale` or `unreachable`.
    pub data: &'static str,
    /// Why, for the operator.
    pub detail: String,
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.switch,
            self.data.to_ascii_uppercase().replace('-', " "),
            self.detail
        )
    }
}

impl<R> SwitchRead<Vec<R>> {
    /// Rows read, `NoData` when there are none.
    pub fn rows(r: Result<Vec<R>, ReadError>) -> SwitchRead<Vec<R>> {
        match r {
            Ok(v) if v.is_empty() => SwitchRead::NoData,
            Ok(v) => SwitchRead::Ok(v),
            Err(e) => SwitchRead::Unreachable(e),
        }
    }

    /// The rows read (old ones too); none when there were none or the DB did not answer.
    pub fn rows_read(&self) -> &[R] {
        self.data().map_or(&[], Vec::as_slice)
    }
}

impl<T> SwitchRead<T> {
    /// Current data (not stale), if any.
    pub fn current(&self) -> Option<&T> {
        match self {
            SwitchRead::Ok(d) => Some(d),
            _ => None,
        }
    }

    /// Why a verdict cannot use this read (`None`: it can), as an [`Unknown`] of `switch`;
    /// `what` names the data (`counters`, `watchdog state`).
    pub fn unknown(&self, switch: &str, what: &str) -> Option<Unknown> {
        let (data, detail) = match self {
            SwitchRead::Ok(_) => return None,
            SwitchRead::NoData => (
                "no-data",
                format!("no {what} in its DB (no plugin has written any)"),
            ),
            SwitchRead::Stale { why, .. } => ("stale", format!("{what}: {why}")),
            SwitchRead::Unreachable(e) => ("unreachable", e.to_string()),
        };
        Some(Unknown {
            switch: switch.to_string(),
            data,
            detail,
        })
    }

    /// What was read (old data too), if anything.
    pub fn data(&self) -> Option<&T> {
        match self {
            SwitchRead::Ok(d) | SwitchRead::Stale { data: d, .. } => Some(d),
            SwitchRead::NoData | SwitchRead::Unreachable(_) => None,
        }
    }

    /// Why the DB could not be read, if it could not.
    pub fn error(&self) -> Option<&ReadError> {
        match self {
            SwitchRead::Unreachable(e) => Some(e),
            _ => None,
        }
    }
}

/// Every row of `table` in DB `id` of the switch whose DB is `db`, within [`READ_TIMEOUT`].
pub async fn dump(
    db: &str,
    id: SonicDbId,
    table: &str,
) -> Result<Vec<(String, FieldValues)>, ReadError> {
    let run = async {
        let sonic = SonicDb::from_endpoint(db)?;
        let t = Table::new(sonic.connect(id).await?, table)?;
        Ok::<_, SonicDbError>(t.dump().await?.into_iter().collect())
    };
    bounded(db, READ_TIMEOUT, async {
        run.await.map_err(|e| ReadError::db(db, &e))
    })
    .await
}

/// How old counters may be before they are stale: three of the plugin's polls, at least 10 s
/// (an unknown interval counts as 1 s, the plugin's default). The stamp is taken when a poll
/// starts and a poll of a loaded software switch can take seconds: a tighter floor would call
/// a slow but live poll stale.
pub fn stale_after(interval: Option<Duration>) -> Duration {
    (interval.unwrap_or(Duration::from_secs(1)) * 3).max(Duration::from_secs(10))
}

fn field(f: &FieldValues, name: &str) -> Option<u64> {
    f.iter()
        .rev()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.trim().parse().ok())
}

/// Whether COUNTERS_DB's `rows` are current at `now_ms`, given the plugin's status row
/// (`None`: no live plugin). Pure: the readers and the tests call it.
pub fn judge_counters<T>(
    rows: T,
    poll: Option<&FieldValues>,
    plugin: Option<&PluginStatus>,
    now_ms: u64,
) -> SwitchRead<T> {
    match staleness(poll, plugin, now_ms) {
        Some(why) => SwitchRead::Stale { data: rows, why },
        None => SwitchRead::Ok(rows),
    }
}

fn staleness(
    poll: Option<&FieldValues>,
    plugin: Option<&PluginStatus>,
    now_ms: u64,
) -> Option<Staleness> {
    let Some(p) = plugin else {
        return Some(Staleness::NoWriter);
    };
    if p.state != PluginState::Running {
        return Some(Staleness::NotRunning(p.state.as_str().to_string()));
    }
    let time = poll.and_then(|f| field(f, POLL_TIME));
    let interval = poll
        .and_then(|f| field(f, POLL_INTERVAL))
        .map(Duration::from_millis);
    match time {
        Some(t) => {
            let age = Duration::from_millis(now_ms.saturating_sub(t));
            let limit = stale_after(interval);
            (age > limit).then_some(Staleness::Old { age, limit })
        }
        // A plugin too old to stamp its polls: current while it lives and has polled.
        None if p.counter_polls == 0 => Some(Staleness::NotPolled),
        None => None,
    }
}

/// The plugin's status row of the switch whose DB is `db` (`None`: no live plugin).
pub async fn plugin_status(db: &str) -> Result<Option<PluginStatus>, ReadError> {
    let run = async {
        let sonic = SonicDb::from_endpoint(db)?;
        let t = Table::new(
            sonic.connect(SonicDbId::StateDb).await?,
            PluginStatus::TABLE,
        )?;
        Ok::<_, SonicDbError>(
            t.get(PLUGIN_STATUS_KEY)
                .await?
                .and_then(|f| PluginStatus::from_fields(PLUGIN_STATUS_KEY, &f).ok()),
        )
    };
    bounded(db, READ_TIMEOUT, async {
        run.await.map_err(|e| ReadError::db(db, &e))
    })
    .await
}

/// Every COUNTERS_DB `COUNTERS` row of the switch whose DB is `db`, judged current or not.
pub async fn read_counters(db: &str) -> SwitchRead<Vec<(String, FieldValues)>> {
    let rows = match dump(db, SonicDbId::CountersDb, "COUNTERS").await {
        Ok(r) if r.is_empty() => return SwitchRead::NoData,
        Ok(r) => r,
        Err(e) => return SwitchRead::Unreachable(e),
    };
    let plugin = match plugin_status(db).await {
        Ok(p) => p,
        Err(e) => return SwitchRead::Unreachable(e),
    };
    let poll = rows
        .iter()
        .find(|(k, _)| k == SWITCH_KEY)
        .map(|(_, f)| f.clone());
    judge_counters(rows, poll.as_ref(), plugin.as_ref(), crate::now_ms())
}

impl<T> SwitchRead<T> {
    /// The same judgement over data made from this read's.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> SwitchRead<U> {
        match self {
            SwitchRead::Ok(d) => SwitchRead::Ok(f(d)),
            SwitchRead::Stale { data, why } => SwitchRead::Stale { data: f(data), why },
            SwitchRead::NoData => SwitchRead::NoData,
            SwitchRead::Unreachable(e) => SwitchRead::Unreachable(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_that_does_not_finish_in_time_is_a_timeout_naming_the_db_and_the_bound() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let never = std::future::pending::<Result<(), ReadError>>();
        let e = rt
            .block_on(bounded("unix:///x.sock", Duration::from_millis(20), never))
            .expect_err("times out");
        assert_eq!(
            e,
            ReadError::Timeout {
                db: "unix:///x.sock".into(),
                after: Duration::from_millis(20)
            }
        );
        assert_eq!(e.to_string(), "unix:///x.sock did not answer within 20ms");
    }

    #[test]
    fn rows_tell_no_data_from_data_and_keep_the_error_of_a_db_not_read() {
        let none: SwitchRead<Vec<u8>> = SwitchRead::rows(Ok(Vec::new()));
        assert_eq!(none, SwitchRead::NoData);
        assert!(none.rows_read().is_empty() && none.error().is_none());
        let some = SwitchRead::rows(Ok(vec![1u8, 2]));
        assert_eq!(some.rows_read(), [1, 2]);
        let e = ReadError::Unreachable {
            db: "db".into(),
            reason: "connection refused".into(),
        };
        let not = SwitchRead::<Vec<u8>>::rows(Err(e.clone()));
        assert_eq!(not.error(), Some(&e));
        assert!(not.data().is_none());
        let old = SwitchRead::Stale {
            data: vec![3u8],
            why: Staleness::NoWriter,
        };
        assert_eq!(
            old.rows_read(),
            [3],
            "stale data is still data, judged by the caller"
        );
        assert!(old.current().is_none(), "but not current");
        assert_eq!(
            old.unknown("leaf1", "counters").map(|u| u.data),
            Some("stale")
        );
    }

    fn poll(at_ms: u64, interval_ms: u64) -> FieldValues {
        vec![
            (POLL_TIME.to_string(), at_ms.to_string()),
            (POLL_INTERVAL.to_string(), interval_ms.to_string()),
        ]
    }

    #[test]
    fn counters_are_current_only_while_a_running_plugin_stamps_recent_polls() {
        let running = PluginStatus {
            counter_polls: 5,
            ..PluginStatus::fresh(PluginState::Running, "t")
        };
        let now = 1_000_000;
        // Written 2 s ago by a plugin polling every second: current.
        let r = judge_counters((), Some(&poll(now - 2_000, 1_000)), Some(&running), now);
        assert_eq!(r, SwitchRead::Ok(()));
        // 11 s ago: more than three polls (and the 10 s floor): stale, saying how old.
        let r = judge_counters((), Some(&poll(now - 11_000, 1_000)), Some(&running), now);
        assert_eq!(
            r,
            SwitchRead::Stale {
                data: (),
                why: Staleness::Old {
                    age: Duration::from_secs(11),
                    limit: Duration::from_secs(10)
                }
            }
        );
        // 8 s ago: over three polls of 1 s, under the floor a slow poll of a loaded switch gets.
        let r = judge_counters((), Some(&poll(now - 8_000, 1_000)), Some(&running), now);
        assert_eq!(r, SwitchRead::Ok(()));
        // A slower poller is given three of its intervals.
        let r = judge_counters((), Some(&poll(now - 25_000, 10_000)), Some(&running), now);
        assert_eq!(r, SwitchRead::Ok(()));
        // No live plugin: whatever the stamp says, nobody writes them any more.
        let r = judge_counters((), Some(&poll(now, 1_000)), None, now);
        assert!(matches!(
            r,
            SwitchRead::Stale {
                why: Staleness::NoWriter,
                ..
            }
        ));
        // A plugin that is not running does not poll.
        let syncing = PluginStatus::fresh(PluginState::Syncing, "t");
        let r = judge_counters((), Some(&poll(now, 1_000)), Some(&syncing), now);
        assert!(matches!(
            r,
            SwitchRead::Stale {
                why: Staleness::NotRunning(_),
                ..
            }
        ));
        // An older plugin without stamps: current once it has polled.
        assert_eq!(
            judge_counters((), None, Some(&running), now),
            SwitchRead::Ok(())
        );
        let unpolled = PluginStatus::fresh(PluginState::Running, "t");
        let r = judge_counters((), None, Some(&unpolled), now);
        assert!(matches!(
            r,
            SwitchRead::Stale {
                why: Staleness::NotPolled,
                ..
            }
        ));
    }
}
