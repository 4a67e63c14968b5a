//! swss-common's plain `Table`: hashes named `<TABLE><sep><key>` written directly (CONFIG_DB, STATE_DB,
//! APPL_STATE_DB, COUNTERS_DB; also reading the live side of an APPL_DB producer/consumer table).

use std::collections::BTreeMap;

use crate::db::{DbConnection, SonicDbId};
use crate::error::SonicDbError;
use crate::types::{FieldValues, check_table_name, glob_escape, pairs};

/// SCAN page size; big enough that a 100k-entry table is a few hundred round trips.
const SCAN_COUNT: usize = 1000;
/// HGETALLs pipelined per round trip when dumping a table.
const DUMP_CHUNK: usize = 1000;

#[derive(Debug, Clone)]
pub struct Table {
    conn: DbConnection,
    name: String,
    /// `<name><sep>`: prefix of every key of this table.
    prefix: String,
}

impl Table {
    pub fn new(conn: DbConnection, name: &str) -> Result<Self, SonicDbError> {
        let sep = conn.db().separator();
        check_table_name(name, sep)?;
        Ok(Table {
            prefix: format!("{name}{sep}"),
            name: name.to_string(),
            conn,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn db(&self) -> SonicDbId {
        self.conn.db()
    }

    /// The full Redis key of `key`, e.g. `PORT_TABLE|Ethernet0`.
    pub fn redis_key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The fields of `key`, or `None` when it does not exist.
    pub async fn get(&self, key: &str) -> Result<Option<FieldValues>, SonicDbError> {
        let rkey = self.redis_key(key);
        let flat: Vec<String> = redis::cmd("HGETALL")
            .arg(&rkey)
            .query_async(self.conn.clone().raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("HGETALL {rkey}"), e))?;
        Ok(if flat.is_empty() {
            None
        } else {
            Some(pairs(flat))
        })
    }

    /// One field of `key`.
    pub async fn hget(&self, key: &str, field: &str) -> Result<Option<String>, SonicDbError> {
        let rkey = self.redis_key(key);
        redis::cmd("HGET")
            .arg(&rkey)
            .arg(field)
            .query_async(self.conn.clone().raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("HGET {rkey} {field}"), e))
    }

    pub async fn exists(&self, key: &str) -> Result<bool, SonicDbError> {
        let rkey = self.redis_key(key);
        let n: i64 = redis::cmd("EXISTS")
            .arg(&rkey)
            .query_async(self.conn.clone().raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("EXISTS {rkey}"), e))?;
        Ok(n > 0)
    }

    /// HSET of the given fields (other fields of the hash stay, as in swss-common's `Table::set`).
    pub async fn set<F: AsRef<str>, V: AsRef<str>>(
        &self,
        key: &str,
        fields: &[(F, V)],
    ) -> Result<(), SonicDbError> {
        if fields.is_empty() {
            return Ok(());
        }
        let rkey = self.redis_key(key);
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&rkey);
        for (f, v) in fields {
            cmd.arg(f.as_ref()).arg(v.as_ref());
        }
        cmd.query_async::<()>(self.conn.clone().raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("HSET {rkey}"), e))
    }

    /// Replaces the hash atomically: afterwards it holds exactly `fields`.
    pub async fn replace<F: AsRef<str>, V: AsRef<str>>(
        &self,
        key: &str,
        fields: &[(F, V)],
    ) -> Result<(), SonicDbError> {
        let rkey = self.redis_key(key);
        let mut pipe = redis::pipe();
        pipe.atomic().del(&rkey).ignore();
        if !fields.is_empty() {
            let mut hset = redis::cmd("HSET");
            hset.arg(&rkey);
            for (f, v) in fields {
                hset.arg(f.as_ref()).arg(v.as_ref());
            }
            pipe.add_command(hset).ignore();
        }
        pipe.query_async::<()>(self.conn.clone().raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("replace {rkey}"), e))
    }

    /// Replaces the hash atomically and lets it expire after `ttl`: a row that is there was
    /// written within `ttl` (a heartbeat).
    pub async fn replace_with_ttl<F: AsRef<str>, V: AsRef<str>>(
        &self,
        key: &str,
        fields: &[(F, V)],
        ttl: std::time::Duration,
    ) -> Result<(), SonicDbError> {
        let rkey = self.redis_key(key);
        let mut pipe = redis::pipe();
        pipe.atomic().del(&rkey).ignore();
        let mut hset = redis::cmd("HSET");
        hset.arg(&rkey);
        for (f, v) in fields {
            hset.arg(f.as_ref()).arg(v.as_ref());
        }
        pipe.add_command(hset).ignore();
        pipe.cmd("PEXPIRE")
            .arg(&rkey)
            .arg(ttl.as_millis().max(1) as u64)
            .ignore();
        pipe.query_async::<()>(self.conn.clone().raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("replace {rkey} with expiry"), e))
    }

    /// Replaces many hashes and deletes others in one atomic round trip: afterwards each of
    /// `rows` holds exactly its fields and none of `deletes` exists.
    pub async fn replace_many(
        &self,
        rows: &[(String, FieldValues)],
        deletes: &[String],
    ) -> Result<(), SonicDbError> {
        if rows.is_empty() && deletes.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (key, fields) in rows {
            let rkey = self.redis_key(key);
            pipe.del(&rkey).ignore();
            if !fields.is_empty() {
                let mut hset = redis::cmd("HSET");
                hset.arg(&rkey);
                for (f, v) in fields {
                    hset.arg(f).arg(v);
                }
                pipe.add_command(hset).ignore();
            }
        }
        for key in deletes {
            pipe.del(self.redis_key(key)).ignore();
        }
        pipe.query_async::<()>(self.conn.clone().raw())
            .await
            .map_err(|e| {
                SonicDbError::redis(
                    format!("{} rows of {}", rows.len() + deletes.len(), self.name),
                    e,
                )
            })
    }

    /// [`Self::replace_many`] fenced by a leader's `term` (see [`crate::scripts`]'s fence):
    /// one Lua script that refuses the whole batch with [`SonicDbError::Fenced`] when the DB's
    /// term key is newer, and raises it otherwise.
    pub async fn replace_many_fenced(
        &self,
        term: u64,
        rows: &[(String, FieldValues)],
        deletes: &[String],
    ) -> Result<(), SonicDbError> {
        if rows.is_empty() && deletes.is_empty() {
            return Ok(());
        }
        let script = redis::Script::new(crate::scripts::TABLE_REPLACE_FENCED);
        let mut inv = script.prepare_invoke();
        inv.key(crate::scripts::TERM_KEY).arg(term);
        for (key, fields) in rows {
            inv.key(self.redis_key(key)).arg(fields.len());
            for (f, v) in fields {
                inv.arg(f).arg(v);
            }
        }
        for key in deletes {
            inv.key(self.redis_key(key)).arg(-1);
        }
        inv.invoke_async::<()>(self.conn.clone().raw())
            .await
            .map_err(|e| match crate::error::fenced(&e) {
                Some((term, held)) => SonicDbError::Fenced { term, held },
                None => SonicDbError::redis(
                    format!(
                        "fenced {} rows of {}",
                        rows.len() + deletes.len(),
                        self.name
                    ),
                    e,
                ),
            })
    }

    /// Merges fields into many hashes (`HSET`) in one round trip: for rows several writers
    /// share, such as COUNTERS_DB's.
    pub async fn merge_many(&self, rows: &[(String, FieldValues)]) -> Result<(), SonicDbError> {
        self.merge(rows, &[], false).await
    }

    /// [`merge_many`](Self::merge_many), and fields merged into whole hashes outside the table
    /// (`hashes`: key, fields), in one `MULTI`/`EXEC`: a reader sees the rows and the hashes
    /// of one write or of the other, never a mix (a packed copy of the rows stays their copy).
    pub async fn merge_many_with(
        &self,
        rows: &[(String, FieldValues)],
        hashes: &[(&str, &FieldValues)],
    ) -> Result<(), SonicDbError> {
        self.merge(rows, hashes, true).await
    }

    async fn merge(
        &self,
        rows: &[(String, FieldValues)],
        hashes: &[(&str, &FieldValues)],
        atomic: bool,
    ) -> Result<(), SonicDbError> {
        let mut pipe = redis::pipe();
        if atomic {
            pipe.atomic();
        }
        let keyed = rows.iter().map(|(k, f)| (self.redis_key(k), f));
        let whole = hashes.iter().map(|(k, f)| (k.to_string(), *f));
        let mut n = 0;
        for (key, fields) in keyed.chain(whole).filter(|(_, f)| !f.is_empty()) {
            let mut hset = redis::cmd("HSET");
            hset.arg(key);
            for (f, v) in fields {
                hset.arg(f).arg(v);
            }
            pipe.add_command(hset).ignore();
            n += 1;
        }
        if n == 0 {
            return Ok(());
        }
        pipe.query_async::<()>(self.conn.clone().raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("{n} rows of {}", self.name), e))
    }

    pub async fn hdel(&self, key: &str, fields: &[&str]) -> Result<(), SonicDbError> {
        if fields.is_empty() {
            return Ok(());
        }
        let rkey = self.redis_key(key);
        redis::cmd("HDEL")
            .arg(&rkey)
            .arg(fields)
            .query_async::<()>(self.conn.clone().raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("HDEL {rkey}"), e))
    }

    pub async fn del(&self, key: &str) -> Result<(), SonicDbError> {
        let rkey = self.redis_key(key);
        redis::cmd("DEL")
            .arg(&rkey)
            .query_async::<()>(self.conn.clone().raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("DEL {rkey}"), e))
    }

    /// All keys of the table (without the table prefix), sorted. Uses SCAN, so it does not block Redis
    /// the way `KEYS` would on a big database.
    pub async fn keys(&self) -> Result<Vec<String>, SonicDbError> {
        let pattern = format!("{}*", glob_escape(&self.prefix));
        let mut conn = self.conn.clone();
        let mut cursor: u64 = 0;
        let mut out = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(conn.raw())
                .await
                .map_err(|e| SonicDbError::redis(format!("SCAN MATCH {pattern}"), e))?;
            out.extend(
                batch
                    .into_iter()
                    .filter_map(|k| k.strip_prefix(&self.prefix).map(str::to_string)),
            );
            if next == 0 {
                break;
            }
            cursor = next;
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The whole table: key → fields. Keys that vanish between SCAN and HGETALL are left out.
    pub async fn dump(&self) -> Result<BTreeMap<String, FieldValues>, SonicDbError> {
        let keys = self.keys().await?;
        let mut out = BTreeMap::new();
        let mut conn = self.conn.clone();
        for chunk in keys.chunks(DUMP_CHUNK) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.cmd("HGETALL").arg(self.redis_key(k));
            }
            let replies: Vec<Vec<String>> = pipe
                .query_async(conn.raw())
                .await
                .map_err(|e| SonicDbError::redis(format!("dump {}", self.name), e))?;
            for (k, flat) in chunk.iter().zip(replies) {
                if !flat.is_empty() {
                    out.insert(k.clone(), pairs(flat));
                }
            }
        }
        Ok(out)
    }
}

/// One page of a server-side dump. ARGV: cursor, page size, MATCH pattern, then the key prefixes
/// wanted. Returns `{next cursor, key, {f, v, ...}, key, {...}, ...}` for the hashes on that
/// page whose key starts with one of the prefixes (other types are skipped, as a key that
/// vanished is).
const DUMP_PAGE: &str = r#"
local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[3], 'COUNT', ARGV[2])
local out = {r[1]}
for _, k in ipairs(r[2]) do
    for i = 4, #ARGV do
        local p = ARGV[i]
        if string.sub(k, 1, #p) == p then
            local fv = redis.pcall('HGETALL', k)
            if type(fv) == 'table' and fv.err == nil and #fv > 0 then
                out[#out + 1] = k
                out[#out + 1] = fv
            end
            break
        end
    end
end
return out
"#;

/// Every row of several tables of one database, read by a script a page at a time: one round
/// trip per page of keys instead of a SCAN and a pipelined HGETALL per table (reading a
/// switch's installed state is ~30 times fewer round trips). Keys are table → key → fields.
pub async fn dump_tables(
    conn: &DbConnection,
    tables: &[&str],
) -> Result<BTreeMap<String, BTreeMap<String, FieldValues>>, SonicDbError> {
    let sep = conn.db().separator();
    let mut prefixes = Vec::with_capacity(tables.len());
    for t in tables {
        check_table_name(t, sep)?;
        prefixes.push(format!("{t}{sep}"));
    }
    let mut out: BTreeMap<String, BTreeMap<String, FieldValues>> = tables
        .iter()
        .map(|t| (t.to_string(), BTreeMap::new()))
        .collect();
    if tables.is_empty() {
        return Ok(out);
    }
    // One table: let SCAN filter by its prefix; several: every key, filtered in the script.
    let pattern = match prefixes.as_slice() {
        [one] => format!("{}*", glob_escape(one)),
        _ => "*".to_string(),
    };
    let script = redis::Script::new(DUMP_PAGE);
    let mut conn = conn.clone();
    let mut cursor = "0".to_string();
    loop {
        let mut inv = script.prepare_invoke();
        inv.arg(&cursor).arg(SCAN_COUNT).arg(&pattern);
        for p in &prefixes {
            inv.arg(p);
        }
        let reply: redis::Value = inv
            .invoke_async(conn.raw())
            .await
            .map_err(|e| SonicDbError::redis(format!("dump {}", tables.join(",")), e))?;
        let bad = || SonicDbError::UnexpectedReply {
            context: format!("dump {}", tables.join(",")),
            detail: "not {cursor, key, fields, ...}".into(),
        };
        let redis::Value::Array(items) = reply else {
            return Err(bad());
        };
        let mut items = items.into_iter();
        cursor = match items.next() {
            Some(v) => redis::from_redis_value::<String>(v).map_err(|_| bad())?,
            None => return Err(bad()),
        };
        while let (Some(k), Some(fv)) = (items.next(), items.next()) {
            let k: String = redis::from_redis_value(k).map_err(|_| bad())?;
            let flat: Vec<String> = redis::from_redis_value(fv).map_err(|_| bad())?;
            if let Some((i, p)) = prefixes
                .iter()
                .enumerate()
                .find(|(_, p)| k.starts_with(p.as_str()))
            {
                let key = k[p.len()..].to_string();
                if let Some(t) = out.get_mut(tables[i]) {
                    t.insert(key, pairs(flat));
                }
            }
        }
        if cursor == "0" {
            break;
        }
    }
    Ok(out)
}

/// A P4RT_TABLE read back from Redis (APPL_STATE_DB for what is installed, APPL_DB for the live side).
#[derive(Debug, Clone, Default)]
pub struct P4rtSnapshot {
    pub entries: BTreeMap<crate::p4rt::P4rtKey, crate::p4rt::P4rtEntry>,
    /// Keys that are not in the P4RT format, with the reason; a diff should treat them as strays.
    pub malformed: Vec<(String, crate::error::P4rtError)>,
}

impl Table {
    /// Reads and parses every entry of a P4RT_TABLE (`Table::new(conn, P4RT_TABLE)`).
    pub async fn read_p4rt(&self) -> Result<P4rtSnapshot, SonicDbError> {
        let mut out = P4rtSnapshot::default();
        for (key, fields) in self.dump().await? {
            let parsed = crate::p4rt::P4rtKey::parse_table_key(&key)
                .and_then(|k| crate::p4rt::P4rtEntry::from_fields(k, &fields));
            match parsed {
                Ok(entry) => {
                    out.entries.insert(entry.key.clone(), entry);
                }
                Err(e) => out.malformed.push((key, e)),
            }
        }
        Ok(out)
    }
}

/// Merges fields into a hash that is a whole key rather than a table row (SONiC's
/// `COUNTERS_PORT_NAME_MAP`).
pub async fn merge_hash(
    conn: &DbConnection,
    key: &str,
    fields: &FieldValues,
) -> Result<(), SonicDbError> {
    if fields.is_empty() {
        return Ok(());
    }
    let mut hset = redis::cmd("HSET");
    hset.arg(key);
    for (f, v) in fields {
        hset.arg(f).arg(v);
    }
    hset.query_async::<()>(conn.clone().raw())
        .await
        .map_err(|e| SonicDbError::redis(format!("HSET {key}"), e))
}

/// Claims `term` on the DB of `conn` (a new leader's first act on a switch): raises the DB's term
/// key to `term` and returns the term it held before, or [`SonicDbError::Fenced`] when it holds a
/// newer one.
pub async fn claim_term(conn: &DbConnection, term: u64) -> Result<u64, SonicDbError> {
    redis::Script::new(crate::scripts::CLAIM_TERM)
        .key(crate::scripts::TERM_KEY)
        .arg(term)
        .invoke_async::<u64>(conn.clone().raw())
        .await
        .map_err(|e| match crate::error::fenced(&e) {
            Some((term, held)) => SonicDbError::Fenced { term, held },
            None => SonicDbError::redis(format!("claiming term {term}"), e),
        })
}

/// The term a DB's term key holds (0: none).
pub async fn held_term(conn: &DbConnection) -> Result<u64, SonicDbError> {
    let v: Option<u64> = redis::cmd("GET")
        .arg(crate::scripts::TERM_KEY)
        .query_async(conn.clone().raw())
        .await
        .map_err(|e| SonicDbError::redis("GET term", e))?;
    Ok(v.unwrap_or(0))
}
