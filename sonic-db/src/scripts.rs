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

/// Producer batch. KEYS: channel, key set, del set, staging prefix (`_T:`), then one key per operation.
/// ARGV[1] is the wake-up message; then per key a field count followed by that many field/value pairs,
/// the count -1 for a delete, or -2 - n for a delete followed by a set of n pairs (a replace: the
/// consumer then drops the live row before moving the new fields in, so the row holds exactly
/// them). One script per batch keeps the batch atomic for the consumer.
pub(crate) const PRODUCER_BATCH: &str = r#"
-- One SADD for the whole batch: set membership does not depend on order, and half the redis.call()s
-- is most of the script's cost.
local added = 0
local i = 5
while i <= #KEYS do
    local stop = math.min(i + 199, #KEYS)
    added = added + redis.call('SADD', KEYS[2], unpack(KEYS, i, stop))
    i = stop + 1
end
local a = 2
for i = 5, #KEYS do
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
"#;

/// Consumer pop. KEYS: key set, table prefix (`T:`), del set. ARGV: how many keys to pop, staging
/// prefix (`_`). Returns `{{key, {f, v, ...}}, ...}`; an empty field list means the key was deleted.
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
    out[#out + 1] = {k, fv}
end
return out
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

pub(crate) fn is_noscript(e: &redis::RedisError) -> bool {
    e.code() == Some("NOSCRIPT")
}
