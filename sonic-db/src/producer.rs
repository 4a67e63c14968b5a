//! swss-common's ProducerStateTable, wire-compatible: what it leaves in Redis is exactly what
//! swss-common's producer leaves (see [`crate::scripts`] for the layout), so a SONiC consumer
//! (orchagent, p4orch) or Weft's [`crate::ConsumerStateTable`] can take it.
//!
//! Writes are batched: many operations go into one Lua script (atomic, one wake-up PUBLISH at most),
//! and the scripts of a big batch are pipelined so 10,000 entries cost a handful of round trips.

use crate::db::{DbConnection, SonicDb, SonicDbId};
use crate::error::SonicDbError;
use crate::scripts::{LoadedScript, PRODUCER_BATCH, is_noscript};
use crate::types::{KeyOpFieldValues, Op, check_table_name};

/// swss-common's `SWSS_TABLE_UPDATE_NOTIFICATION`: the wake-up message; the data is in the key set.
pub const TABLE_UPDATE_NOTIFICATION: &str = "G";

/// Operations per Lua script. Bounded so a huge batch never blocks Redis for long in one script.
pub const DEFAULT_KEYS_PER_SCRIPT: usize = 512;
/// Scripts per pipelined round trip.
const SCRIPTS_PER_ROUND_TRIP: usize = 32;

/// The Redis names swss-common derives from a table name in one database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateTableNames {
    /// `T_KEY_SET`
    pub key_set: String,
    /// `T_DEL_SET`
    pub del_set: String,
    /// `T_CHANNEL@<db>`
    pub channel: String,
    /// `T<sep>`: prefix of the live hashes.
    pub table_prefix: String,
    /// `_T<sep>`: prefix of the staging hashes.
    pub staging_prefix: String,
}

impl StateTableNames {
    /// Names of `table` in SONiC database `db`, which Redis holds as database `number`
    /// ([`crate::SonicDb::db_number`]).
    pub fn new(table: &str, db: SonicDbId, number: u32) -> Result<Self, SonicDbError> {
        let sep = db.separator();
        check_table_name(table, sep)?;
        Ok(StateTableNames {
            key_set: format!("{table}_KEY_SET"),
            del_set: format!("{table}_DEL_SET"),
            channel: format!("{table}_CHANNEL@{number}"),
            table_prefix: format!("{table}{sep}"),
            staging_prefix: format!("_{table}{sep}"),
        })
    }
}

pub struct ProducerStateTable {
    conn: DbConnection,
    table: String,
    names: StateTableNames,
    script: LoadedScript,
    keys_per_script: usize,
}

impl ProducerStateTable {
    /// A producer for `table` in `db` (APPL_DB for P4RT_TABLE). Loads the script.
    pub async fn new(sonic: &SonicDb, db: SonicDbId, table: &str) -> Result<Self, SonicDbError> {
        let conn = sonic.connect(db).await?;
        Self::with_connection(conn, table).await
    }

    pub async fn with_connection(
        mut conn: DbConnection,
        table: &str,
    ) -> Result<Self, SonicDbError> {
        let names = StateTableNames::new(table, conn.db(), conn.number())?;
        let script = LoadedScript::load(&mut conn, PRODUCER_BATCH).await?;
        Ok(ProducerStateTable {
            conn,
            table: table.to_string(),
            names,
            script,
            keys_per_script: DEFAULT_KEYS_PER_SCRIPT,
        })
    }

    /// Changes how many operations share one Lua script (at least 1).
    pub fn set_keys_per_script(&mut self, n: usize) {
        self.keys_per_script = n.max(1);
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn names(&self) -> &StateTableNames {
        &self.names
    }

    /// Stages a SET of `key` with `fields` (merged into the live entry by the consumer, unless a
    /// delete of the key is pending too, in which case the entry is replaced).
    pub async fn set<F: AsRef<str>, V: AsRef<str>>(
        &mut self,
        key: &str,
        fields: &[(F, V)],
    ) -> Result<(), SonicDbError> {
        let op = KeyOpFieldValues {
            key: key.to_string(),
            op: Op::Set,
            fields: fields
                .iter()
                .map(|(f, v)| (f.as_ref().to_string(), v.as_ref().to_string()))
                .collect(),
        };
        self.apply(std::slice::from_ref(&op)).await
    }

    /// Stages a delete of `key`.
    pub async fn del(&mut self, key: &str) -> Result<(), SonicDbError> {
        self.apply(&[KeyOpFieldValues::del(key)]).await
    }

    /// Stages many operations, in order. Each run of up to `keys_per_script` operations is one atomic
    /// script; the scripts are pipelined.
    pub async fn apply(&mut self, ops: &[KeyOpFieldValues]) -> Result<(), SonicDbError> {
        self.apply_replacing(ops, &|_| false).await
    }

    /// As [`apply`](Self::apply), but a SET of a key for which `replace(key)` holds is staged as a
    /// delete followed by the set, atomically: SONiC's consumers then see a SET with exactly the
    /// new fields and the live row keeps none of the old ones (a SET alone merges fields into
    /// the row, so an action with fewer parameters would leave stale `param/…` fields behind).
    pub async fn apply_replacing(
        &mut self,
        ops: &[KeyOpFieldValues],
        replace: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<(), SonicDbError> {
        if let Some(bad) = ops.iter().find(|o| o.key.is_empty()) {
            return Err(SonicDbError::InvalidKey {
                table: self.table.clone(),
                key: bad.key.clone(),
                reason: format!("empty key (op {})", bad.op),
            });
        }
        // A consumer reads a SET without fields as a DEL (nothing staged): refuse the ambiguity.
        if let Some(bad) = ops.iter().find(|o| o.op == Op::Set && o.fields.is_empty()) {
            return Err(SonicDbError::InvalidKey {
                table: self.table.clone(),
                key: bad.key.clone(),
                reason: "SET without fields (a consumer would take it for a DEL)".into(),
            });
        }
        let per_trip = self.keys_per_script * SCRIPTS_PER_ROUND_TRIP;
        for trip in ops.chunks(per_trip) {
            self.run_round_trip(trip, replace).await?;
        }
        Ok(())
    }

    async fn run_round_trip(
        &mut self,
        ops: &[KeyOpFieldValues],
        replace: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<(), SonicDbError> {
        let mut reloaded = false;
        loop {
            let mut pipe = redis::pipe();
            for chunk in ops.chunks(self.keys_per_script) {
                pipe.add_command(self.batch_command(chunk, replace))
                    .ignore();
            }
            match pipe.query_async::<()>(self.conn.raw()).await {
                Ok(()) => return Ok(()),
                // Replaying after a reload is safe: the script only SADDs, HSETs and DELs.
                Err(e) if is_noscript(&e) && !reloaded => {
                    tracing::info!(table = %self.table, "producer script missing in Redis, reloading");
                    self.script.reload(&mut self.conn).await?;
                    reloaded = true;
                }
                Err(e) => {
                    return Err(SonicDbError::redis(
                        format!("producer {} batch of {}", self.table, ops.len()),
                        e,
                    ));
                }
            }
        }
    }

    fn batch_command(
        &self,
        ops: &[KeyOpFieldValues],
        replace: &(dyn Fn(&str) -> bool + Sync),
    ) -> redis::Cmd {
        let n = &self.names;
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.script.sha())
            .arg(4 + ops.len())
            .arg(&n.channel)
            .arg(&n.key_set)
            .arg(&n.del_set)
            .arg(&n.staging_prefix);
        for op in ops {
            cmd.arg(&op.key);
        }
        cmd.arg(TABLE_UPDATE_NOTIFICATION);
        for op in ops {
            match op.op {
                Op::Del => {
                    cmd.arg(-1);
                }
                Op::Set => {
                    let n = op.fields.len() as i64;
                    cmd.arg(if replace(&op.key) { -2 - n } else { n });
                    for (f, v) in &op.fields {
                        cmd.arg(f).arg(v);
                    }
                }
            }
        }
        cmd
    }

    /// How many keys are waiting for the consumer (`SCARD T_KEY_SET`).
    pub async fn pending(&mut self) -> Result<u64, SonicDbError> {
        redis::cmd("SCARD")
            .arg(&self.names.key_set)
            .query_async(self.conn.raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("SCARD {}", self.names.key_set), e))
    }
}
