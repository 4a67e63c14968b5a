//! swss-common's SubscriberStateTable: follows a plain table (CONFIG_DB, STATE_DB) through Redis keyspace
//! notifications (`__keyspace@<db>__:<TABLE><sep>*`). It subscribes first and then takes the initial
//! dump, so nothing written in between is missed (it may be seen twice, which is harmless: every event
//! carries the whole current entry).
//!
//! Redis must publish keyspace events for hashes and generic commands: [`SubscriberStateTable::new`]
//! enables them with `CONFIG SET notify-keyspace-events` when the caller allows it (see
//! [`SonicDb::ensure_keyspace_notifications`]).

use std::time::Duration;

use futures::{FutureExt, StreamExt};

use crate::db::{SonicDb, SonicDbId};
use crate::error::SonicDbError;
use crate::table::Table;
use crate::types::{KeyOpFieldValues, glob_escape};

/// Options for [`SubscriberStateTable::new`].
#[derive(Debug, Clone, Copy)]
pub struct SubscriberOptions {
    /// Allow `CONFIG SET notify-keyspace-events` when the needed classes are off.
    pub allow_config_set: bool,
}

impl Default for SubscriberOptions {
    fn default() -> Self {
        SubscriberOptions {
            allow_config_set: true,
        }
    }
}

pub struct SubscriberStateTable {
    table: Table,
    pubsub: redis::aio::PubSub,
    pattern: String,
    /// `__keyspace@<n>__:<TABLE><sep>`
    channel_prefix: String,
}

impl SubscriberStateTable {
    pub async fn new(
        sonic: &SonicDb,
        db: SonicDbId,
        table: &str,
        options: SubscriberOptions,
    ) -> Result<Self, SonicDbError> {
        let conn = sonic.connect(db).await?;
        let table = Table::new(conn, table)?;
        sonic
            .ensure_keyspace_notifications(options.allow_config_set)
            .await?;
        let channel_prefix = format!(
            "__keyspace@{}__:{}{}",
            sonic.db_number(db),
            table.name(),
            db.separator()
        );
        let pattern = format!("{}*", glob_escape(&channel_prefix));
        let mut pubsub = sonic.pubsub().await?;
        pubsub
            .psubscribe(&pattern)
            .await
            .map_err(|e| SonicDbError::redis(format!("PSUBSCRIBE {pattern}"), e))?;
        Ok(SubscriberStateTable {
            table,
            pubsub,
            pattern,
            channel_prefix,
        })
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Every entry of the table now, as SET events (sorted by key). Call after `new`.
    pub async fn initial_dump(&self) -> Result<Vec<KeyOpFieldValues>, SonicDbError> {
        Ok(self
            .table
            .dump()
            .await?
            .into_iter()
            .map(|(key, fields)| KeyOpFieldValues {
                key,
                op: crate::types::Op::Set,
                fields,
            })
            .collect())
    }

    /// The next change: a DEL, or a SET with all current fields of the entry. Errors when the
    /// subscription is lost.
    pub async fn next(&mut self) -> Result<KeyOpFieldValues, SonicDbError> {
        loop {
            let msg = self.pubsub.on_message().next().await;
            let Some(msg) = msg else {
                return Err(SonicDbError::SubscriptionClosed {
                    channel: self.pattern.clone(),
                });
            };
            if let Some(event) = self.resolve(&msg).await? {
                return Ok(event);
            }
        }
    }

    /// Like [`Self::next`], `None` after `timeout` without a change.
    pub async fn next_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<KeyOpFieldValues>, SonicDbError> {
        match tokio::time::timeout(timeout, self.next()).await {
            Ok(r) => r.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Waits for one change, then takes every change already queued (up to `max`).
    pub async fn next_batch(&mut self, max: usize) -> Result<Vec<KeyOpFieldValues>, SonicDbError> {
        let mut out = vec![self.next().await?];
        while out.len() < max {
            let msg = match self.pubsub.on_message().next().now_or_never() {
                None => break,
                Some(None) => {
                    return Err(SonicDbError::SubscriptionClosed {
                        channel: self.pattern.clone(),
                    });
                }
                Some(Some(msg)) => msg,
            };
            if let Some(event) = self.resolve(&msg).await? {
                out.push(event);
            }
        }
        Ok(out)
    }

    async fn resolve(&self, msg: &redis::Msg) -> Result<Option<KeyOpFieldValues>, SonicDbError> {
        let Some(key) = msg.get_channel_name().strip_prefix(&self.channel_prefix) else {
            tracing::warn!(channel = msg.get_channel_name(), pattern = %self.pattern,
                "keyspace event outside the subscribed table");
            return Ok(None);
        };
        let Ok(event) = msg.get_payload::<String>() else {
            return Ok(None);
        };
        Ok(match keyspace_event_kind(&event) {
            EventKind::Gone => Some(KeyOpFieldValues::del(key)),
            // None: written and removed again before we looked; the removal has its own event.
            EventKind::Changed => self.table.get(key).await?.map(|fields| KeyOpFieldValues {
                key: key.to_string(),
                op: crate::types::Op::Set,
                fields,
            }),
            EventKind::Ignored => None,
        })
    }
}

#[derive(Debug, PartialEq, Eq)]
enum EventKind {
    Gone,
    Changed,
    Ignored,
}

fn keyspace_event_kind(event: &str) -> EventKind {
    match event {
        "del" | "expired" | "evicted" | "unlink" => EventKind::Gone,
        // Events that do not change a hash's content.
        "expire" | "persist" | "rename_from" => EventKind::Ignored,
        _ => EventKind::Changed,
    }
}

/// Follows several tables of one database for changes, without reading them: each
/// [`TableWatcher::changed`] returns once some row of one of them was written or deleted (the
/// caller reads what it needs). Subscribed when [`TableWatcher::new`] returns, so a read after
/// it misses no change.
pub struct TableWatcher {
    pubsub: redis::aio::PubSub,
    /// `__keyspace@<n>__:`
    prefix: String,
    tables: Vec<String>,
    separator: char,
}

impl TableWatcher {
    /// Turns keyspace notifications on when they are off (see
    /// [`SonicDb::ensure_keyspace_notifications`]).
    pub async fn new(
        sonic: &SonicDb,
        db: SonicDbId,
        tables: &[&str],
    ) -> Result<TableWatcher, SonicDbError> {
        sonic.ensure_keyspace_notifications(true).await?;
        let mut pubsub = sonic.pubsub().await?;
        let prefix = format!("__keyspace@{}__:", sonic.db_number(db));
        pubsub
            .psubscribe(format!("{prefix}*"))
            .await
            .map_err(|e| SonicDbError::redis(format!("PSUBSCRIBE {db:?} keyspace"), e))?;
        Ok(TableWatcher {
            pubsub,
            prefix,
            tables: tables.iter().map(|t| t.to_string()).collect(),
            separator: db.separator(),
        })
    }

    /// Waits for a change of a watched table; an error when the subscription ended.
    pub async fn changed(&mut self) -> Result<(), SonicDbError> {
        let mut stream = self.pubsub.on_message();
        while let Some(msg) = stream.next().await {
            let table = msg
                .get_channel_name()
                .strip_prefix(&self.prefix)
                .and_then(|k| k.split(self.separator).next())
                .unwrap_or("");
            if self.tables.iter().any(|t| t == table) {
                return Ok(());
            }
        }
        Err(SonicDbError::UnexpectedReply {
            context: "keyspace subscription".into(),
            detail: "the subscription ended".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_events_map_to_ops() {
        assert_eq!(keyspace_event_kind("del"), EventKind::Gone);
        assert_eq!(keyspace_event_kind("expired"), EventKind::Gone);
        assert_eq!(keyspace_event_kind("hset"), EventKind::Changed);
        assert_eq!(keyspace_event_kind("hdel"), EventKind::Changed);
        assert_eq!(keyspace_event_kind("rename_to"), EventKind::Changed);
        assert_eq!(keyspace_event_kind("expire"), EventKind::Ignored);
    }
}
