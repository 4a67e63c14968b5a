//! Reading one switch's SONiC DBs, bounded in time, and what a read can give: a verdict built
//! on it keeps apart a switch that answered with data, one that answered with nothing, one
//! whose data is old, and one that did not answer ([`SwitchRead`]): unknown is never healthy.

use std::future::Future;
use std::time::Duration;

use weft_sonic_db::{FieldValues, SonicDb, SonicDbError, SonicDbId, Table};

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
    /// The DB answered with it.
    Ok(T),
    /// The DB answered and holds none of it: nothing wrote it (no plugin, or not yet).
    NoData,
    /// What the DB holds was written `age` ago, longer than the reader accepts: its writer
    /// stopped. (No reader tells this yet: COUNTERS_DB rows carry no time of writing.)
    Stale { data: T, age: Duration },
    /// The DB did not answer.
    Unreachable(ReadError),
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
            age: Duration::from_secs(60),
        };
        assert_eq!(
            old.rows_read(),
            [3],
            "stale data is still data, judged by the caller"
        );
    }
}
