//! The Lua scripts of the producer/consumer protocol and how they are run (SCRIPT LOAD once, EVALSHA
//! after; a Redis restart or SCRIPT FLUSH forgets them, so NOSCRIPT triggers one reload and retry).
//!
//! Keyspace layout for table `T` with separator `:` (swss-common's ProducerStateTable/ConsumerStateTable):
//!
//! ```text
//!   T_KEY_SET      set   keys with pending changes            (SADD by producer, SPOP by consumer)
//!   T_DEL_SET      set   keys whose pending change began with a delete
//!   _T:K           hash  staged fields of K                   (HSET/DEL by producer, read+DEL by consumer)
//!   T:K            hash  the live entry                       (written only by the consumer)
//!   T_CHANNEL@<db> chan  wake-up "G", published only when SADD added a key that was not pending
//! ```

use crate::db::DbConnection;
use crate::error::SonicDbError;

/// The body of the producer batch, with its first key (`K0`) and first per-key argument (`A0`)
/// set by what runs before it: [`PRODUCER_BATCH`] (swss-common's layout) or
/// [`PRODUCER_BATCH_FENCED`] (the same after a term check).
macro_rules! producer_body {
    () => {
        r#"
-- One SADD for the whole batch: set membership does not depend on order, and half the redis.call()s
-- is most of the script's cost.
local added = 0
local i = K0
while i <= #KEYS do
    local stop = math.min(i + 199, #KEYS)
    added = added + redis.call('SADD', KEYS[2], unpack(KEYS, i, stop))
    i = stop + 1
end
local a = A0
for i = K0, #KEYS do
    local k = KEYS[i]
    local n = tonumber(ARGV[a])
    a = a + 1
    if n == -1 then
        redis.call('SADD', KEYS[3], k)
        redis.call('DEL', KEYS[4] .. k)
    else
        if n < -1 then
            redis.call('SADD', KEYS[3], k)
            redis.call('DEL', KEYS[4] .. k)
            n = -2 - n
        end
        local last = a + 2 * n - 1
        -- HSET with many pairs at once, in slices that stay well inside Lua's stack limit.
        while a <= last do
            local stop = math.min(a + 199, last)
            redis.call('HSET', KEYS[4] .. k, unpack(ARGV, a, stop))
            a = stop + 1
        end
    end
end
if added > 0 then
    redis.call('PUBLISH', KEYS[1], ARGV[1])
end
"#
    };
}

/// Fencing of a writer elected by term (`weft run --ha`): the batch carries the writer's term and
/// is refused with `WEFT_FENCED` when the DB's term key holds a newer one; an equal or older
/// key is raised to it, so once a new leader has written (or claimed) a switch, a paused old
/// leader that wakes up writes nothing there. The term key is KEYS[TK], the term ARGV[TA].
macro_rules! fence_check {
    () => {
        r#"
local term = tonumber(ARGV[TA])
local held = tonumber(redis.call('GET', KEYS[TK]) or '0')
if term == nil or term < held then
    return redis.error_reply('WEFT_FENCED term ' .. tostring(ARGV[TA]) .. ' is older than ' .. held)
end
if term > held then
    redis.call('SET', KEYS[TK], ARGV[TA])
end
"#
    };
}

/// Producer batch. KEYS: channel, key set, del set, staging prefix (`_T:`), then one key per operation.
/// ARGV[1] is the wake-up message; then per key a field count followed by that many field/value pairs,
/// the count -1 for a delete, or -2 - n for a delete followed by a set of n pairs (a replace: the
/// consumer then drops the live row before moving the new fields in, so the row holds exactly
/// them). One script per batch keeps the batch atomic for the consumer.
pub(crate) const PRODUCER_BATCH: &str = concat!("local K0 = 5\nlocal A0 = 2\n", producer_body!());

/// [`PRODUCER_BATCH`] with a term check first: KEYS[5] the term key, ARGV[2] the term, the
/// operations' keys from KEYS[6] and their arguments from ARGV[3].
pub(crate) const PRODUCER_BATCH_FENCED: &str = concat!(
    "local K0 = 6\nlocal A0 = 3\nlocal TK = 5\nlocal TA = 2\n",
    fence_check!(),
    producer_body!()
);

/// Whole-row replaces of KEYS[K0..] (the script sets `K0` and `A0`): per row, from ARGV[A0] on, a
/// pair count n and n field/value pairs (the row deleted, then HSET in chunks under Lua's
/// unpack limit), or -1 to delete the row.
macro_rules! replace_rows {
    () => {
        r#"
local a = A0
for i = K0, #KEYS do
    local k = KEYS[i]
    local n = tonumber(ARGV[a])
    a = a + 1
    redis.call('DEL', k)
    if n > 0 then
        local last = a + 2 * n - 1
        while a <= last do
            local stop = math.min(a + 199, last)
            redis.call('HSET', k, unpack(ARGV, a, stop))
            a = stop + 1
        end
    end
end
"#
    };
}

/// A fenced replace of plain-table rows (CONFIG_DB): after the term check (KEYS[1], ARGV[1]),
/// per row key from KEYS[2] an argument count from ARGV[2] on: -1 deletes the row, n >= 0
/// replaces it with n field/value pairs.
pub(crate) const TABLE_REPLACE_FENCED: &str = concat!(
    "local TK = 1\nlocal TA = 1\n",
    fence_check!(),
    "local K0 = 2\nlocal A0 = 2\n",
    replace_rows!()
);

/// A claim of the term alone (a new leader's first act on each switch): the term check, then
/// the term held before. KEYS[1] the term key, ARGV[1] the term.
pub(crate) const CLAIM_TERM: &str = concat!(
    "local TK = 1\nlocal TA = 1\n",
    "local held0 = tonumber(redis.call('GET', KEYS[1]) or '0')\n",
    fence_check!(),
    "return held0\n"
);

/// The key of a DB's fencing term (in APPL_DB and in CONFIG_DB: each DB a leader writes).
pub const TERM_KEY: &str = "WEFT_LEADER_TERM";

/// Consumer pop. KEYS: key set, table prefix (`T:`), del set. ARGV: how many keys to pop, staging
/// prefix (`_`). What it does to the keys is swss-common's pop; what it returns is Weft's own:
/// one JSON text `[[key, f, v, ...], ...]` (a key alone: it was deleted). A single string, not
/// nested arrays of a reply per key and field: parsing 100k of those in redis-rs cost the plugin
/// more than anything else it does per key, and Redis encodes one string faster than it
/// writes thousands of replies.
pub(crate) const CONSUMER_POP: &str = r#"
if redis.replicate_commands then
    -- Redis < 5 replicates scripts verbatim and refuses writes after SPOP without this.
    redis.replicate_commands()
end
local out = {}
local popped = redis.call('SPOP', KEYS[1], ARGV[1])
-- Deletes are rare; skipping one SREM per key when there are none is a quarter of the script's work.
local any_del = redis.call('SCARD', KEYS[3]) > 0
for _, k in ipairs(popped) do
    local live = KEYS[2] .. k
    local staged = ARGV[2] .. KEYS[2] .. k
    if any_del and redis.call('SREM', KEYS[3], k) == 1 then
        redis.call('DEL', live)
    end
    local fv = redis.call('HGETALL', staged)
    local a = 1
    while a <= #fv do
        local stop = math.min(a + 199, #fv)
        redis.call('HSET', live, unpack(fv, a, stop))
        a = stop + 1
    end
    redis.call('DEL', staged)
    local entry = {k}
    for j = 1, #fv do
        entry[j + 1] = fv[j]
    end
    out[#out + 1] = entry
end
if #out == 0 then
    -- cjson writes an empty table as an object.
    return '[]'
end
return cjson.encode(out)
"#;

/// APPL_STATE_DB rows of answered keys, replaced as a batch (what swss-common's
/// ResponsePublisher writes per key: the row deleted, then HSET with the new fields). KEYS:
/// the rows. ARGV per row: a pair count n and n field/value pairs, or -1 to delete the row.
/// One script instead of a MULTI of two commands per key: Redis answers it once, not 2n + 2
/// times, and the writer parses one reply.
pub(crate) const STATE_REPLACE: &str = concat!("local K0 = 1\nlocal A0 = 1\n", replace_rows!());

/// The response notifications of a batch: one PUBLISH per message on channel ARGV[1], the
/// messages after it, in order (subscribers see exactly swss-common's per-key messages; the
/// publisher gets one reply for the batch instead of one per key). No KEYS: a channel is no
/// key, and an ACL user's key patterns must not have to cover it.
pub(crate) const PUBLISH_ALL: &str = r#"
for i = 2, #ARGV do
    redis.call('PUBLISH', ARGV[1], ARGV[i])
end
"#;

/// A script loaded into one Redis, remembered by SHA.
#[derive(Debug, Clone)]
pub(crate) struct LoadedScript {
    body: &'static str,
    sha: String,
}

impl LoadedScript {
    pub(crate) async fn load(
        conn: &mut DbConnection,
        body: &'static str,
    ) -> Result<Self, SonicDbError> {
        let sha = script_load(conn, body).await?;
        Ok(LoadedScript { body, sha })
    }

    pub(crate) fn sha(&self) -> &str {
        &self.sha
    }

    pub(crate) async fn reload(&mut self, conn: &mut DbConnection) -> Result<(), SonicDbError> {
        self.sha = script_load(conn, self.body).await?;
        Ok(())
    }
}

async fn script_load(conn: &mut DbConnection, body: &str) -> Result<String, SonicDbError> {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(body)
        .query_async(conn.raw())
        .await
        .map_err(|e| SonicDbError::redis("SCRIPT LOAD", e))
}

/// Runs `script` with `keys` and `args`, loading it again once if Redis forgot it (nothing ran
/// then, so the retry cannot apply anything twice).
pub(crate) async fn eval_loaded(
    conn: &mut DbConnection,
    script: &mut LoadedScript,
    keys: &[&str],
    args: &[&str],
    what: &str,
) -> Result<(), SonicDbError> {
    let mut reloaded = false;
    loop {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.sha()).arg(keys.len()).arg(keys).arg(args);
        match cmd.query_async::<()>(conn.raw()).await {
            Ok(()) => return Ok(()),
            Err(e) if is_noscript(&e) && !reloaded => {
                tracing::info!(what, "script missing in Redis, reloading");
                script.reload(conn).await?;
                reloaded = true;
            }
            Err(e) => return Err(SonicDbError::redis(what.to_string(), e)),
        }
    }
}

pub(crate) fn is_noscript(e: &redis::RedisError) -> bool {
    e.code() == Some("NOSCRIPT")
}
