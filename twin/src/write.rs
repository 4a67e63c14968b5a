//! The twin's rows into real SONiC DBs: one connection per redis-server (switches share a
//! server by `?db_base=`), each switch's changed rows pipelined after a `SELECT` of its
//! database. A first write holds every field, as a plugin's first poll; later ones the fields
//! that changed (what the DB then holds is the same as after a full write). The plugin's
//! status row is written while it lives and deleted when it dies; drift rows as the read-back
//! finds them and deleted when gone.

use std::collections::{BTreeMap, BTreeSet};

use redis::aio::MultiplexedConnection;
use weft_sonic_db::{SonicDb, SonicDbId};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{CountersRow, PortNameMap};
use weft_sonic_schema::snapshot::CountersSnapshot;
use weft_sonic_schema::state::PLUGIN_STATUS_KEY;
use weft_topology::SwitchIdx;

use crate::counters::{Written, port_rows};
use crate::{Twin, TwinError};

/// Commands per pipeline round trip.
const CHUNK: usize = 20_000;

struct Server {
    endpoint: String,
    conn: MultiplexedConnection,
}

/// What the writer has written, to write only what changed.
pub struct Writer {
    servers: Vec<Server>,
    /// Per switch: its server, COUNTERS_DB and STATE_DB numbers (`None`: not written).
    at: Vec<Option<(usize, u32, u32)>>,
    written: Vec<Option<Written>>,
    first: Vec<bool>,
    state_keys: Vec<BTreeSet<String>>,
}

/// What one write did.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteStats {
    pub switches: usize,
    pub commands: usize,
}

fn hset(pipe: &mut redis::Pipeline, key: String, f: &weft_sonic_db::FieldValues) -> usize {
    if f.is_empty() {
        return 0;
    }
    let mut c = redis::cmd("HSET");
    c.arg(key);
    for (n, v) in f {
        c.arg(n).arg(v);
    }
    pipe.add_command(c).ignore();
    1
}

impl Writer {
    /// Connects to every server the switches' DBs are on; `skip` switches are never written.
    pub async fn connect(twin: &Twin) -> Result<Writer, TwinError> {
        let mut servers: Vec<Server> = Vec::new();
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        let mut at = Vec::new();
        for (s, sw) in twin.topo.switches.iter().enumerate() {
            if twin.life[s].missing {
                at.push(None);
                continue;
            }
            let db = |source: weft_sonic_db::SonicDbError| TwinError::Db {
                endpoint: sw.db.clone(),
                source,
            };
            let sonic = SonicDb::from_endpoint(&sw.db).map_err(db)?;
            let (server, _) = weft_sonic_db::endpoint::db_identity(&sw.db)
                .map_err(|e| TwinError::Model(format!("{}: {e}", sw.db)))?;
            let i = match by.get(&server) {
                Some(i) => *i,
                None => {
                    let mut c = sonic.connect(SonicDbId::CountersDb).await.map_err(db)?;
                    servers.push(Server {
                        endpoint: server.clone(),
                        conn: c.raw().clone(),
                    });
                    by.insert(server, servers.len() - 1);
                    servers.len() - 1
                }
            };
            at.push(Some((
                i,
                sonic.db_number(SonicDbId::CountersDb),
                sonic.db_number(SonicDbId::StateDb),
            )));
        }
        Ok(Writer {
            servers,
            at,
            written: vec![None; twin.ports.len()],
            first: vec![true; twin.topo.switches.len()],
            state_keys: vec![BTreeSet::new(); twin.topo.switches.len()],
        })
    }

    /// Queues switch `s`'s changed rows on `pipe`; the commands queued.
    fn switch(&mut self, twin: &Twin, s: SwitchIdx, pipe: &mut redis::Pipeline) -> usize {
        let Some((_, cdb, sdb)) = self.at[s] else {
            return 0;
        };
        if twin.polled(s).is_none() {
            return 0;
        }
        let sw = &twin.topo.switches[s];
        let mut n = 1;
        pipe.cmd("SELECT").arg(cdb).ignore();
        for p in twin.ports.of_switch[s].clone() {
            let w = twin.written(p);
            let prev = self.written[p as usize];
            if prev == Some(w) {
                continue;
            }
            let name = &sw.ports[twin.ports.get(p).index].name;
            for r in port_rows(name, &w, prev.as_ref(), twin.classes.lossless) {
                let (k, f) = r.key_fields();
                n += hset(pipe, format!("COUNTERS:{k}"), &f);
            }
            self.written[p as usize] = Some(w);
        }
        // The switch row (drops, PSN, the poll's stamp) and the watchdog's queue fields.
        let rows = twin.counters_rows(s);
        for r in rows.iter().filter(|r| {
            matches!(r, CountersRow::Switch(_))
                || matches!(r, CountersRow::Queue(q) if q.wd_status.is_some())
        }) {
            let (k, f) = r.key_fields();
            n += hset(pipe, format!("COUNTERS:{k}"), &f);
        }
        // The poll's packed copy, as the plugin writes it with its rows: every port, queue and
        // switch row of the poll in full (the watchdog's fields are not the poll's).
        let polled: Vec<_> = rows
            .iter()
            .filter(|r| !matches!(r, CountersRow::Queue(q) if q.wd_status.is_some()))
            .map(CountersRow::key_fields)
            .collect();
        let stamp = rows.iter().find_map(|r| match r {
            CountersRow::Switch(sw) => sw.poll_time_ms,
            _ => None,
        });
        if let Some(stamp) = stamp {
            let copy = CountersSnapshot::of_poll(&polled, stamp);
            n += hset(pipe, copy.key(), &copy.to_fields());
        }
        if self.first[s] {
            let map = PortNameMap {
                name: String::new(),
                map: sw
                    .ports
                    .iter()
                    .map(|p| (p.name.clone(), p.name.clone()))
                    .collect(),
            };
            n += hset(pipe, PortNameMap::TABLE.to_string(), &map.to_fields());
            self.first[s] = false;
        }
        n + self.state(twin, s, sdb, pipe)
    }

    /// STATE_DB: the watchdog's rows, drift, the status row; deletes those gone.
    fn state(&mut self, twin: &Twin, s: SwitchIdx, sdb: u32, pipe: &mut redis::Pipeline) -> usize {
        let (wd, drift, status) = twin.state_rows(s);
        let mut rows: Vec<(String, weft_sonic_db::FieldValues)> = Vec::new();
        for w in &wd {
            rows.push((
                format!(
                    "{}|{}",
                    weft_sonic_schema::state::PfcWdState::TABLE,
                    w.key()
                ),
                w.to_fields(),
            ));
        }
        for d in &drift {
            rows.push((
                format!(
                    "{}|{}",
                    weft_sonic_schema::state::DriftState::TABLE,
                    d.key()
                ),
                d.to_fields(),
            ));
        }
        if let Some(st) = &status {
            rows.push((
                format!(
                    "{}|{PLUGIN_STATUS_KEY}",
                    weft_sonic_schema::state::PluginStatus::TABLE
                ),
                st.to_fields(),
            ));
        }
        let keys: BTreeSet<String> = rows.iter().map(|(k, _)| k.clone()).collect();
        let gone: Vec<String> = self.state_keys[s].difference(&keys).cloned().collect();
        let mut n = 1;
        pipe.cmd("SELECT").arg(sdb).ignore();
        for k in gone {
            pipe.cmd("DEL").arg(k).ignore();
            n += 1;
        }
        for (k, f) in &rows {
            n += hset(pipe, k.clone(), f);
        }
        self.state_keys[s] = keys;
        n
    }

    /// Writes what changed of `switches` (as the twin stands), every server at once.
    pub async fn write(
        &mut self,
        twin: &Twin,
        switches: &[SwitchIdx],
    ) -> Result<WriteStats, TwinError> {
        let mut per: Vec<Vec<redis::Pipeline>> = vec![vec![redis::pipe()]; self.servers.len()];
        let mut counts: Vec<usize> = vec![0; self.servers.len()];
        let mut stats = WriteStats::default();
        for &s in switches {
            let Some((srv, ..)) = self.at[s] else {
                continue;
            };
            if counts[srv] >= CHUNK {
                per[srv].push(redis::pipe());
                counts[srv] = 0;
            }
            let mut pipe = per[srv].pop().unwrap_or_default();
            let n = self.switch(twin, s, &mut pipe);
            per[srv].push(pipe);
            counts[srv] += n;
            stats.commands += n;
            stats.switches += 1;
        }
        let jobs = self.servers.iter().zip(per).map(|(srv, pipes)| {
            let mut conn = srv.conn.clone();
            let endpoint = srv.endpoint.clone();
            async move {
                for p in pipes {
                    p.query_async::<()>(&mut conn)
                        .await
                        .map_err(|source| TwinError::Redis {
                            endpoint: endpoint.clone(),
                            what: "writing counters".into(),
                            source,
                        })?;
                }
                Ok::<(), TwinError>(())
            }
        });
        for r in futures::future::join_all(jobs).await {
            r?;
        }
        Ok(stats)
    }
}
