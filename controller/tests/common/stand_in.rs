//! Stand-in plugins for tests against real redis-servers without BMv2: a status row that says
//! "running, in sync" and publishes the digests of APPL_STATE_DB and the owned CONFIG_DB
//! tables as the real plugin does (the same shared code: `ResponsePublisher::track`,
//! `config_digest`, `TableWatcher`), and a loop that answers every P4RT_TABLE key SUCCESS,
//! which copies it into APPL_STATE_DB. With a ZMQ endpoint it also serves SONiC's ZMQ
//! channel as the plugin does: a batch of an older term than the switch's APPL_DB holds is
//! refused whole (`FAILED_PRECONDITION WEFT_FENCED …`, nothing written), any other is written
//! behind into APPL_DB and answered SUCCESS per key.

use std::time::Duration;

use weft_sonic_db::zmq::{AsyncDbUpdater, ServerOptions, ZmqError, ZmqRequest, ZmqServer};
use weft_sonic_db::{
    ConsumerStateTable, Digest, EntryResult, P4RT_TABLE, ResponsePublisher, SonicDb, SonicDbError,
    SonicDbId, StatusCode, Table, TableWatcher, dump_tables, held_term,
};
use weft_sonic_schema::Row;
use weft_sonic_schema::config::{config_digest, owned_tables};
use weft_sonic_schema::state::{InstalledDigests, PluginState, PluginStatus};

/// A fabric name unique to this process and call (`PREFIX<pid>x<n>`: short, it becomes Linux
/// and SONiC names) and its own new directory under the temporary directory.
pub fn scratch(prefix: &str) -> (String, std::path::PathBuf) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("{prefix}{}x{n}", std::process::id() % 100_000);
    let dir = std::env::temp_dir().join(format!("weft-{name}"));
    std::fs::create_dir_all(&dir).expect("dir");
    (name, dir)
}

/// `n` real redis-servers, one per switch, killed by PID when dropped.
pub fn redis_servers(n: usize) -> Vec<weft_tests::redis::RedisServer> {
    (0..n)
        .map(|_| {
            weft_tests::redis::RedisServer::start()
                .expect("redis-server (scripts/setup.sh installs it)")
        })
        .collect()
}

/// The small leaf-spine example as fabric `name`, the DB of `switches[i]` at `dbs[i]` (the
/// others' DBs in the fabric's own directory, `/run/weft/<name>`, which nobody serves),
/// written to `DIR/fabric.yaml`: its path.
pub fn example_on(
    name: &str,
    dir: &std::path::Path,
    switches: &[&str],
    dbs: &[String],
) -> std::path::PathBuf {
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../topology/examples/leaf-spine-small.yaml"
    ))
    .expect("example")
    .replace("name: small", &format!("name: {name}"));
    let mut text = format!("{base}\nswitches:\n");
    for (s, db) in switches.iter().zip(dbs) {
        text += &format!("  - name: {s}\n    db: {db}\n");
    }
    let file = dir.join("fabric.yaml");
    std::fs::write(&file, text).expect("intent");
    file
}

pub fn status_row(installed: u64) -> PluginStatus {
    PluginStatus {
        pipeline_cookie: weft_p4rt::cookie(weft_p4::P4INFO_BINARY, weft_p4::BMV2_JSON.as_bytes()),
        installed_keys: installed,
        ..PluginStatus::fresh(PluginState::Running, "stand-in")
    }
}

/// The status row with the digests a plugin publishes.
pub fn status_with_digests(d: &InstalledDigests) -> PluginStatus {
    let mut st = status_row(d.entries.count());
    st.set_digests(d);
    st
}

/// The digest of the owned CONFIG_DB tables as they are now (what the plugin computes each
/// time its CONFIG_DB watcher fires).
pub async fn read_config_digest(sonic: &SonicDb) -> Result<Digest, SonicDbError> {
    let conn = sonic.connect(SonicDbId::ConfigDb).await?;
    let tables = dump_tables(&conn, &owned_tables()).await?;
    Ok(config_digest(tables.iter().flat_map(|(t, rows)| {
        rows.iter().map(move |(k, f)| (t.as_str(), k.as_str(), f))
    })))
}

/// A publisher that keeps the digest of APPL_STATE_DB P4RT_TABLE, from what it holds now.
pub async fn tracking_publisher(sonic: &SonicDb) -> Result<ResponsePublisher, SonicDbError> {
    let state = Table::new(sonic.connect(SonicDbId::ApplStateDb).await?, P4RT_TABLE)?;
    let now = state.dump().await?;
    let mut publisher = ResponsePublisher::new(sonic, P4RT_TABLE).await?;
    publisher.track(&now);
    Ok(publisher)
}

/// Answers every key SUCCESS (copied into APPL_STATE_DB by the publisher), as a plugin does,
/// and rewrites its status row after every batch and every change of the owned CONFIG_DB
/// tables, with both digests.
pub async fn stand_in(url: String) {
    stand_in_serving(url, None).await;
}

/// [`stand_in`], also serving SONiC's ZMQ channel at `zmq` (an endpoint) when given.
pub async fn stand_in_serving(url: String, zmq: Option<String>) {
    let Ok(sonic) = SonicDb::from_endpoint(&url) else {
        return;
    };
    let mut zmq = match zmq {
        Some(ep) => match ZmqOn::serve(&sonic, &ep).await {
            Some(z) => Some(z),
            None => return,
        },
        None => None,
    };
    let Ok(mut consumer) = ConsumerStateTable::new(&sonic, SonicDbId::ApplDb, P4RT_TABLE).await
    else {
        return;
    };
    consumer.set_poll_interval(Duration::from_millis(20));
    // Pops in a task of their own: a pop cancelled by the select below would lose its keys.
    let (tx, mut batches) = tokio::sync::mpsc::channel(2);
    tokio::spawn(async move {
        while let Ok(b) = consumer.next_batch(1024).await {
            if tx.send(b).await.is_err() {
                return;
            }
        }
    });
    // Subscribed before the first read of CONFIG_DB: no change goes unseen.
    let Ok(mut watcher) = TableWatcher::new(&sonic, SonicDbId::ConfigDb, &owned_tables()).await
    else {
        return;
    };
    let Ok(mut publisher) = tracking_publisher(&sonic).await else {
        return;
    };
    let Ok(state) = sonic.connect(SonicDbId::StateDb).await else {
        return;
    };
    let Ok(table) = Table::new(state, PluginStatus::TABLE) else {
        return;
    };
    let Ok(mut config) = read_config_digest(&sonic).await else {
        return;
    };
    loop {
        let Some(entries) = publisher.digest() else {
            return;
        };
        let mut st = status_with_digests(&InstalledDigests { entries, config });
        // As the plugin counts them: requests over ZMQ, and keys refused (here only a fenced
        // ZMQ batch's).
        if let Some(z) = &zmq {
            st.zmq_requests = Some(z.requests);
            st.keys_failed = z.refused;
        }
        if table.replace(&st.key(), &st.to_fields()).await.is_err() {
            return;
        }
        tokio::select! {
            b = batches.recv() => {
                let Some(batch) = b else { return };
                let results: Vec<EntryResult> = batch
                    .into_iter()
                    .map(|k| EntryResult::ok(k.key, k.op, k.fields))
                    .collect();
                if publisher.publish_batch(&results).await.is_err() {
                    return;
                }
            }
            r = next_request(&mut zmq) => {
                let req = match r {
                    Some(Ok(req)) => req,
                    // Refused by the server, and answered there.
                    Some(Err(_)) => continue,
                    None => return,
                };
                let Some(z) = &mut zmq else { return };
                let Ok(results) = z.answer(&req).await else { return };
                z.requests += 1;
                let ok: Vec<EntryResult> = results
                    .iter()
                    .filter(|r| r.status == StatusCode::Success)
                    .cloned()
                    .collect();
                z.refused += (results.len() - ok.len()) as u64;
                if publisher.publish_batch(&ok).await.is_err() || req.reply(&results).is_err() {
                    return;
                }
            }
            c = watcher.changed() => {
                if c.is_err() {
                    return;
                }
                // Rows of one apply arrive together: take them as one change, as the plugin does.
                while let Ok(c) = tokio::time::timeout(Duration::from_millis(20), watcher.changed()).await {
                    if c.is_err() {
                        return;
                    }
                }
                match read_config_digest(&sonic).await {
                    Ok(d) => config = d,
                    Err(_) => return,
                }
            }
        }
    }
}

/// The ZMQ side of a stand-in: the server, APPL_DB written behind, and where the fencing term
/// is held.
struct ZmqOn {
    server: ZmqServer,
    behind: AsyncDbUpdater,
    appl: weft_sonic_db::DbConnection,
    requests: u64,
    refused: u64,
}

impl ZmqOn {
    async fn serve(sonic: &SonicDb, endpoint: &str) -> Option<ZmqOn> {
        let ep = endpoint.parse().ok()?;
        let server = ZmqServer::bind(&ep, ServerOptions::default()).ok()?;
        let behind = AsyncDbUpdater::start(sonic, SonicDbId::ApplDb, P4RT_TABLE)
            .await
            .ok()?;
        let appl = sonic.connect(SonicDbId::ApplDb).await.ok()?;
        Some(ZmqOn {
            server,
            behind,
            appl,
            requests: 0,
            refused: 0,
        })
    }

    /// Every key's answer: all refused when the batch's term is older than the one APPL_DB
    /// holds (nothing written), else all SUCCESS once APPL_DB holds them.
    async fn answer(&self, req: &ZmqRequest) -> Result<Vec<EntryResult>, SonicDbError> {
        let held = held_term(&self.appl).await?;
        if let Some(term) = req.term.filter(|&t| t < held) {
            return Ok(req
                .entries
                .iter()
                .map(|e| EntryResult::fenced(e.key.clone(), e.op, e.fields.clone(), term, held))
                .collect());
        }
        self.behind.set_fence(req.term);
        self.behind.update(req.entries.clone());
        self.behind.flush().await?;
        Ok(req
            .entries
            .iter()
            .map(|e| EntryResult::ok(e.key.clone(), e.op, e.fields.clone()))
            .collect())
    }
}

/// The next ZMQ request, never when there is no server.
async fn next_request(zmq: &mut Option<ZmqOn>) -> Option<Result<ZmqRequest, ZmqError>> {
    match zmq {
        Some(z) => z.server.next().await,
        None => std::future::pending().await,
    }
}
