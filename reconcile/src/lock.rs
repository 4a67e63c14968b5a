//! The fabric's lock: at most one `weft apply` or `weft run` writes a fabric's switches at a
//! time. It lives where the writes go, in each switch's STATE_DB (`WEFT_LOCK|<fabric>`,
//! [`LockRow`]), so two controllers on two machines see each other.
//!
//! ```text
//!   acquire: per switch, atomically (one Lua script): no row, our token, or --steal → write the
//!            row with PEXPIRE ttl; another holder → its row comes back, nothing is written
//!   refresh: every ttl/3 the same script; a switch unreachable at acquire is locked when it
//!            answers; a row with another token means the lock was taken from us (lost)
//!   release: delete the row if it still carries our token
//! ```
//! A holder that dies leaves its rows to expire (`ttl`); one on this host whose pid is gone is
//! taken over at once.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use weft_sonic_db::{FieldValues, SonicDb, SonicDbError, SonicDbId};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::LockRow;
use weft_topology::{SwitchIdx, Topology};

use crate::core::SwitchError;
use crate::io::{CONNECT_TIMEOUT, db_error};

/// How long a row lives without a refresh.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);

/// Who takes the lock.
#[derive(Debug, Clone)]
pub struct LockOwner {
    pub host: String,
    pub pid: u32,
    pub command: String,
    pub token: String,
}

impl LockOwner {
    /// This process, running `command` (`weft apply`).
    pub fn this_process(command: &str) -> Self {
        let host = hostname();
        let pid = std::process::id();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        LockOwner {
            token: format!("{host}:{pid}:{nanos:x}"),
            host,
            pid,
            command: command.to_string(),
        }
    }
}

/// This machine's name (what a lock row says as `host`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            // The state follows the command name in parentheses: Z is a zombie.
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .is_none_or(|st| st != "Z")
        })
        .unwrap_or(false)
}

/// Why the lock could not be had.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "fabric {fabric} is locked on {switch} by {} since {}; wait for it, or take the lock with --steal",
        holder.holder(), ago(holder.acquired_ms)
    )]
    Held {
        fabric: String,
        switch: String,
        holder: LockRow,
    },
    #[error("the lock of fabric {fabric} on {switch} was taken by {}", holder.holder())]
    Lost {
        fabric: String,
        switch: String,
        holder: LockRow,
    },
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `12s ago`.
pub fn ago(ms: u64) -> String {
    let d = now_ms().saturating_sub(ms);
    if d < 120_000 {
        format!("{}s ago", d / 1000)
    } else {
        format!("{}m ago", d / 60_000)
    }
}

/// No row or our token or `steal`: write ours and return nothing. Otherwise the holder's row.
const TAKE: &str = r#"
local cur = redis.call('HGET', KEYS[1], 'token')
if cur and cur ~= ARGV[1] and ARGV[3] ~= 'steal' then
  return redis.call('HGETALL', KEYS[1])
end
redis.call('DEL', KEYS[1])
for i = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {}
"#;

const RELEASE: &str = r#"
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

/// One switch's answer to a take.
enum Take {
    Ours,
    Other(LockRow),
}

async fn take(
    db: &str,
    fabric: &str,
    owner: &LockOwner,
    acquired_ms: u64,
    ttl: Duration,
    steal: bool,
) -> Result<Take, SwitchError> {
    let row = LockRow {
        fabric: fabric.to_string(),
        host: owner.host.clone(),
        pid: owner.pid,
        command: owner.command.clone(),
        token: owner.token.clone(),
        acquired_ms,
        expires_ms: now_ms() + ttl.as_millis() as u64,
    };
    let run = async {
        let sonic = SonicDb::from_endpoint(db)?;
        let mut conn = sonic.connect(SonicDbId::StateDb).await?;
        let inv = redis::Script::new(TAKE);
        let mut inv = inv.key(row.redis_key());
        inv.arg(&owner.token)
            .arg(ttl.as_millis() as u64)
            .arg(if steal { "steal" } else { "take" });
        for (f, v) in row.to_fields() {
            inv.arg(f).arg(v);
        }
        let reply: Vec<String> =
            inv.invoke_async(conn.raw())
                .await
                .map_err(|e| SonicDbError::UnexpectedReply {
                    context: "WEFT_LOCK".into(),
                    detail: e.to_string(),
                })?;
        Ok::<_, SonicDbError>(reply)
    };
    let reply = match tokio::time::timeout(CONNECT_TIMEOUT, run).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(db_error(db, &e)),
        Err(_) => return Err(timed_out(db)),
    };
    if reply.is_empty() {
        return Ok(Take::Ours);
    }
    let fields: FieldValues = reply
        .chunks(2)
        .filter_map(|c| Some((c.first()?.clone(), c.get(1)?.clone())))
        .collect();
    let holder = LockRow::from_fields(fabric, &fields).unwrap_or_else(|_| LockRow {
        fabric: fabric.to_string(),
        host: "?".into(),
        pid: 0,
        command: "an unknown writer".into(),
        token: String::new(),
        acquired_ms: 0,
        expires_ms: 0,
    });
    Ok(Take::Other(holder))
}

/// The lock row on one switch, if any.
pub async fn read(db: &str, fabric: &str) -> Result<Option<LockRow>, SwitchError> {
    let run = async {
        let sonic = SonicDb::from_endpoint(db)?;
        let t =
            weft_sonic_db::Table::new(sonic.connect(SonicDbId::StateDb).await?, LockRow::TABLE)?;
        t.get(fabric).await
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, run).await {
        Ok(Ok(Some(f))) => Ok(LockRow::from_fields(fabric, &f).ok()),
        Ok(Ok(None)) => Ok(None),
        Ok(Err(e)) => Err(db_error(db, &e)),
        Err(_) => Err(timed_out(db)),
    }
}

fn timed_out(db: &str) -> SwitchError {
    SwitchError::TimedOut {
        detail: format!("{db} did not answer within {CONNECT_TIMEOUT:?}"),
    }
}

/// What to lock and how.
#[derive(Debug, Clone)]
pub struct LockOptions {
    pub owner: LockOwner,
    pub ttl: Duration,
    /// Take it even from another holder.
    pub steal: bool,
}

impl LockOptions {
    pub fn new(command: &str, steal: bool) -> Self {
        LockOptions {
            owner: LockOwner::this_process(command),
            ttl: DEFAULT_TTL,
            steal,
        }
    }
}

/// The lock, held on the switches that answered.
pub struct FabricLock {
    fabric: String,
    opts: LockOptions,
    acquired_ms: u64,
    /// (switch name, db) of every switch to lock.
    switches: Vec<(String, String)>,
    /// Indices into `switches` locked so far.
    held: Mutex<BTreeSet<usize>>,
}

impl FabricLock {
    /// Takes the lock on every targeted switch that answers. A switch held by another weft
    /// stops it (what was taken is released again) unless `steal`, or unless the holder is a
    /// dead process of this host. Unreachable switches are locked later, by [`Self::refresh`].
    pub async fn acquire(
        t: &Topology,
        targets: Option<&BTreeSet<SwitchIdx>>,
        opts: LockOptions,
    ) -> Result<Arc<FabricLock>, LockError> {
        let switches: Vec<(String, String)> = t
            .switches
            .iter()
            .enumerate()
            .filter(|(i, _)| targets.is_none_or(|s| s.contains(i)))
            .map(|(_, s)| (s.name.clone(), s.db.clone()))
            .collect();
        let lock = Arc::new(FabricLock {
            fabric: t.name.clone(),
            acquired_ms: now_ms(),
            opts,
            switches,
            held: Mutex::new(BTreeSet::new()),
        });
        if let Err(e) = lock.take_all(false).await {
            lock.release().await;
            return Err(e);
        }
        Ok(lock)
    }

    /// Switches locked / to lock.
    pub fn counts(&self) -> (usize, usize) {
        let held = self.held.lock().map_or(0, |h| h.len());
        (held, self.switches.len())
    }

    async fn take_all(&self, refreshing: bool) -> Result<(), LockError> {
        let mut tasks = tokio::task::JoinSet::new();
        for (i, (name, db)) in self.switches.iter().enumerate() {
            let (name, db, fabric) = (name.clone(), db.clone(), self.fabric.clone());
            let (owner, ttl, steal, acquired) = (
                self.opts.owner.clone(),
                self.opts.ttl,
                self.opts.steal && !refreshing,
                self.acquired_ms,
            );
            tasks.spawn(async move {
                let mut r = take(&db, &fabric, &owner, acquired, ttl, steal).await;
                if let Ok(Take::Other(h)) = &r
                    && h.host == owner.host
                    && h.pid != owner.pid
                    && !pid_alive(h.pid)
                {
                    tracing::info!(switch = %name, holder = %h.holder(), "taking over the lock of a process that is gone");
                    r = take(&db, &fabric, &owner, acquired, ttl, true).await;
                }
                (i, name, r)
            });
        }
        let mut first_err = None;
        while let Some(j) = tasks.join_next().await {
            let Ok((i, name, r)) = j else { continue };
            match r {
                Ok(Take::Ours) => {
                    if let Ok(mut h) = self.held.lock() {
                        h.insert(i);
                    }
                }
                Ok(Take::Other(holder)) => {
                    let was_ours = self.held.lock().is_ok_and(|mut h| h.remove(&i));
                    let e = if refreshing && was_ours {
                        LockError::Lost {
                            fabric: self.fabric.clone(),
                            switch: name,
                            holder,
                        }
                    } else {
                        LockError::Held {
                            fabric: self.fabric.clone(),
                            switch: name,
                            holder,
                        }
                    };
                    first_err.get_or_insert(e);
                }
                Err(reason) => {
                    tracing::debug!(switch = %name, %reason, "lock not taken: switch unreachable");
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Refreshes every row we hold and takes the switches not locked yet.
    pub async fn refresh(&self) -> Result<(), LockError> {
        self.take_all(true).await
    }

    /// Deletes our rows (another holder's are left alone).
    pub async fn release(&self) {
        let held: Vec<usize> = self
            .held
            .lock()
            .map(|mut h| std::mem::take(&mut *h).into_iter().collect())
            .unwrap_or_default();
        let mut tasks = tokio::task::JoinSet::new();
        for i in held {
            let (_, db) = self.switches[i].clone();
            let key = format!("{}|{}", LockRow::TABLE, self.fabric);
            let token = self.opts.owner.token.clone();
            tasks.spawn(async move {
                let run = async {
                    let sonic = SonicDb::from_endpoint(&db)?;
                    let mut conn = sonic.connect(SonicDbId::StateDb).await?;
                    let _: i64 = redis::Script::new(RELEASE)
                        .key(key)
                        .arg(token)
                        .invoke_async(conn.raw())
                        .await
                        .map_err(|e| SonicDbError::UnexpectedReply {
                            context: "WEFT_LOCK release".into(),
                            detail: e.to_string(),
                        })?;
                    Ok::<_, SonicDbError>(())
                };
                let _ = tokio::time::timeout(CONNECT_TIMEOUT, run).await;
            });
        }
        while tasks.join_next().await.is_some() {}
    }

    /// Refreshes every ttl/3 until the lock is lost; then resolves with why.
    pub async fn keep(self: Arc<Self>) -> LockError {
        let every = self.opts.ttl / 3;
        loop {
            tokio::time::sleep(every).await;
            match self.refresh().await {
                Ok(()) => {}
                Err(e @ LockError::Lost { .. }) => return e,
                Err(e) => {
                    // A switch that was unreachable at the start is held by someone else now.
                    tracing::error!(error = %e, "lock");
                    return e;
                }
            }
        }
    }
}
