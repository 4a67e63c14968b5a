//! swss-common's ConsumerStateTable: pops pending keys atomically and moves staged fields into the
//! live table (`T:K`), exactly as swss-common's consumer does, so Weft's plugin can stand in for a
//! SONiC consumer and take what SONiC's producers (the P4RT app) write.
//!
//! Waking: it subscribes to `T_CHANNEL@<db>` before its first pop, so a wake-up published after an empty
//! pop is never missed; it also pops every `poll_interval` anyway, because keys staged while no consumer
//! was subscribed (or by a producer that skipped PUBLISH because the key was already pending) would
//! otherwise wait for the next unrelated wake-up.

use std::time::Duration;

use futures::{FutureExt, StreamExt};

use crate::db::{DbConnection, SonicDb, SonicDbId};
use crate::error::SonicDbError;
use crate::producer::StateTableNames;
use crate::scripts::{CONSUMER_POP, LoadedScript, is_noscript};
use crate::types::{KeyOpFieldValues, Op, pairs};

/// swss-common refuses to pop more than this many keys in one script, to keep Redis responsive.
pub const MAX_POP_PER_SCRIPT: usize = 1024;
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);

pub struct ConsumerStateTable {
    conn: DbConnection,
    table: String,
    names: StateTableNames,
    script: LoadedScript,
    pubsub: redis::aio::PubSub,
    poll_interval: Duration,
}

impl ConsumerStateTable {
    /// Subscribes to the table's channel, then loads the pop script.
    pub async fn new(sonic: &SonicDb, db: SonicDbId, table: &str) -> Result<Self, SonicDbError> {
        let names = StateTableNames::new(table, db, sonic.db_number(db))?;
        let mut pubsub = sonic.pubsub().await?;
        pubsub
            .subscribe(&names.channel)
            .await
            .map_err(|e| SonicDbError::redis(format!("SUBSCRIBE {}", names.channel), e))?;
        let mut conn = sonic.connect(db).await?;
        let script = LoadedScript::load(&mut conn, CONSUMER_POP).await?;
        Ok(ConsumerStateTable {
            conn,
            table: table.to_string(),
            names,
            script,
            pubsub,
            poll_interval: DEFAULT_POLL_INTERVAL,
        })
    }

    pub fn set_poll_interval(&mut self, interval: Duration) {
        self.poll_interval = interval.max(Duration::from_millis(1));
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn names(&self) -> &StateTableNames {
        &self.names
    }

    /// Pops up to `max` pending keys now (possibly none). Order within a batch is not the write order,
    /// and several writes to one key arrive merged (SONiC's documented caveats).
    pub async fn pop(&mut self, max: usize) -> Result<Vec<KeyOpFieldValues>, SonicDbError> {
        let mut out = Vec::new();
        let mut left = max;
        while left > 0 {
            let want = left.min(MAX_POP_PER_SCRIPT);
            let got = self.pop_once(want).await?;
            let n = got.len();
            out.extend(got);
            if n < want {
                break;
            }
            left -= n;
        }
        Ok(out)
    }

    async fn pop_once(&mut self, count: usize) -> Result<Vec<KeyOpFieldValues>, SonicDbError> {
        let mut reloaded = false;
        let raw: String = loop {
            let result = redis::cmd("EVALSHA")
                .arg(self.script.sha())
                .arg(3)
                .arg(&self.names.key_set)
                .arg(&self.names.table_prefix)
                .arg(&self.names.del_set)
                .arg(count)
                .arg("_")
                .query_async(self.conn.raw())
                .await;
            match result {
                Ok(v) => break v,
                // Nothing ran (the script did not exist), so retrying cannot pop a key twice.
                Err(e) if is_noscript(&e) && !reloaded => {
                    tracing::info!(table = %self.table, "consumer script missing in Redis, reloading");
                    self.script.reload(&mut self.conn).await?;
                    reloaded = true;
                }
                Err(e) => {
                    return Err(SonicDbError::redis(format!("pop {}", self.table), e));
                }
            }
        };
        let entries: Vec<Vec<String>> =
            serde_json::from_str(&raw).map_err(|e| SonicDbError::UnexpectedReply {
                context: format!("pop {}", self.table),
                detail: format!("not [[key, f, v, ...], ...]: {e}"),
            })?;
        Ok(entries
            .into_iter()
            .filter_map(|mut flat| {
                if flat.is_empty() {
                    return None;
                }
                let key = flat.remove(0);
                let fields = pairs(flat);
                let op = if fields.is_empty() { Op::Del } else { Op::Set };
                Some(KeyOpFieldValues { key, op, fields })
            })
            .collect())
    }

    /// Waits until at least one key is pending, then pops up to `max`. Errors when the connection or
    /// the subscription is lost (the caller reconnects and resyncs).
    pub async fn next_batch(&mut self, max: usize) -> Result<Vec<KeyOpFieldValues>, SonicDbError> {
        loop {
            self.drain_wakeups()?;
            let batch = self.pop(max).await?;
            if !batch.is_empty() {
                return Ok(batch);
            }
            let poll = tokio::time::sleep(self.poll_interval);
            let mut wakeups = self.pubsub.on_message();
            tokio::select! {
                msg = wakeups.next() => {
                    if msg.is_none() {
                        return Err(SonicDbError::SubscriptionClosed { channel: self.names.channel.clone() });
                    }
                }
                _ = poll => {}
            }
        }
    }

    /// Like [`Self::next_batch`] but gives up after `timeout` with an empty batch.
    pub async fn next_batch_timeout(
        &mut self,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<KeyOpFieldValues>, SonicDbError> {
        match tokio::time::timeout(timeout, self.next_batch(max)).await {
            Ok(r) => r,
            Err(_) => Ok(Vec::new()),
        }
    }

    /// Wake-ups already queued are covered by the pop that follows; dropping them saves empty pops.
    fn drain_wakeups(&mut self) -> Result<(), SonicDbError> {
        let mut stream = self.pubsub.on_message();
        while let Some(msg) = stream.next().now_or_never() {
            if msg.is_none() {
                return Err(SonicDbError::SubscriptionClosed {
                    channel: self.names.channel.clone(),
                });
            }
        }
        Ok(())
    }

    /// How many keys are pending (`SCARD T_KEY_SET`).
    pub async fn pending(&mut self) -> Result<u64, SonicDbError> {
        redis::cmd("SCARD")
            .arg(&self.names.key_set)
            .query_async(self.conn.raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("SCARD {}", self.names.key_set), e))
    }
}
