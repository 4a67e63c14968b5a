//! `weft run --ha etcd://HOST:PORT[,…] --id NAME`: replicas of `weft run` elect one writer on
//! etcd. The leader's term fences its writes on every switch (see `weft_sonic_db`'s fenced
//! producer): a deposed leader that wakes up writes nothing.
//!
//! ```text
//!   every replica: lease (TTL --ha-ttl) kept alive every TTL/3
//!                  /weft/<fabric>/members/<id>  = member JSON   (on the lease: `weft status`)
//!   campaign:      txn  if create_revision(/weft/<fabric>/leader) == 0
//!                       then put(leader, id, lease)             → leader, term = that revision
//!                       else get(leader)                        → follower; watch it for delete
//!   leader:        lease lost (no keepalive answer within TTL, or TTL 0) or key gone → Lost
//! ```
//! A lost leadership ends `weft run` (a supervisor restarts it, and it campaigns as a follower);
//! the term is the leader key's create revision, so it only grows.

use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, PutOptions, Txn, TxnOp,
    WatchOptions,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// How `weft run` joins an election.
#[derive(Debug, Clone)]
pub struct HaOptions {
    /// `http://HOST:PORT` of each etcd member.
    pub endpoints: Vec<String>,
    /// This replica's name (unique among the fabric's replicas).
    pub id: String,
    /// The lease's time to live: how long a dead leader keeps the fabric leaderless (etcd
    /// rounds it up to its own minimum, 1.5 × its election timeout).
    pub ttl: Duration,
}

/// Why `--ha` could not be used.
#[derive(Debug, thiserror::Error)]
pub enum HaError {
    #[error("--ha {0}: expected etcd://HOST:PORT[,HOST:PORT…]")]
    Endpoints(String),
    #[error("etcd at {endpoints}: {source}")]
    Etcd {
        endpoints: String,
        #[source]
        source: etcd_client::Error,
    },
}

/// `etcd://a:2379,b:2379` → `["http://a:2379", "http://b:2379"]`.
pub fn parse_endpoints(s: &str) -> Result<Vec<String>, HaError> {
    let rest = s
        .strip_prefix("etcd://")
        .ok_or_else(|| HaError::Endpoints(s.to_string()))?;
    let eps: Vec<String> = rest
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (host, port) = e
                .rsplit_once(':')
                .ok_or_else(|| HaError::Endpoints(s.to_string()))?;
            if host.is_empty() || port.parse::<u16>().is_err() {
                return Err(HaError::Endpoints(s.to_string()));
            }
            Ok(format!("http://{e}"))
        })
        .collect::<Result<_, _>>()?;
    if eps.is_empty() {
        return Err(HaError::Endpoints(s.to_string()));
    }
    Ok(eps)
}

/// This replica's part, as the election task sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not (yet) the leader; `leader` is who is, if known.
    Follower { leader: Option<String> },
    /// The writer, fencing with `term`.
    Leader { term: u64 },
    /// Was the leader of `term` and is no more.
    Lost { term: u64, why: String },
}

/// One replica as it registers itself (`/weft/<fabric>/members/<id>`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub since_ms: u64,
}

/// The election as `weft status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq, Eq)]
pub struct HaView {
    /// This replica (empty when read from outside).
    #[serde(default)]
    pub id: String,
    /// `leader` or `follower` (this replica's), or empty when read from outside.
    #[serde(default)]
    pub role: String,
    pub leader: Option<String>,
    /// The leader's term (its key's create revision); 0 without a leader.
    pub term: u64,
    /// Every replica registered, the leader among them.
    pub members: Vec<String>,
}

fn leader_key(fabric: &str) -> String {
    format!("/weft/{fabric}/leader")
}

fn members_prefix(fabric: &str) -> String {
    format!("/weft/{fabric}/members/")
}

async fn connect(endpoints: &[String]) -> Result<Client, HaError> {
    Client::connect(
        endpoints,
        Some(
            ConnectOptions::new()
                .with_connect_timeout(Duration::from_secs(2))
                .with_timeout(Duration::from_secs(3)),
        ),
    )
    .await
    .map_err(|source| HaError::Etcd {
        endpoints: endpoints.join(","),
        source,
    })
}

/// Reads the election of `fabric` from etcd (for `weft status --ha`).
pub async fn read_view(endpoints: &[String], fabric: &str) -> Result<HaView, HaError> {
    let err = |source| HaError::Etcd {
        endpoints: endpoints.join(","),
        source,
    };
    let mut c = connect(endpoints).await?;
    let l = c.get(leader_key(fabric), None).await.map_err(err)?;
    let (leader, term) = l.kvs().first().map_or((None, 0), |kv| {
        (
            Some(String::from_utf8_lossy(kv.value()).into_owned()),
            kv.create_revision().max(0) as u64,
        )
    });
    let m = c
        .get(
            members_prefix(fabric),
            Some(GetOptions::new().with_prefix()),
        )
        .await
        .map_err(err)?;
    let members = m
        .kvs()
        .iter()
        .map(|kv| {
            serde_json::from_slice::<Member>(kv.value()).map_or_else(
                |_| String::from_utf8_lossy(kv.value()).into_owned(),
                |m| format!("{} (pid {} on {})", m.id, m.pid, m.host),
            )
        })
        .collect();
    Ok(HaView {
        leader,
        term,
        members,
        ..Default::default()
    })
}

/// The election task's handle: its role changes arrive on `role`.
pub struct Election {
    pub role: watch::Receiver<Role>,
    pub view: watch::Receiver<HaView>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Election {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Election {
    /// Joins the election of `fabric`; campaigns until leader, keeps trying on etcd errors.
    pub fn start(fabric: &str, opts: HaOptions) -> Election {
        let (role_tx, role) = watch::channel(Role::Follower { leader: None });
        let (view_tx, view) = watch::channel(HaView {
            id: opts.id.clone(),
            role: "follower".into(),
            ..Default::default()
        });
        let fabric = fabric.to_string();
        let task = tokio::spawn(async move {
            let mut backoff = Duration::from_millis(200);
            loop {
                match campaign(&fabric, &opts, &role_tx, &view_tx).await {
                    Ok(()) => return,
                    Err(e) => {
                        if let Role::Leader { term } = *role_tx.borrow() {
                            let _ = role_tx.send(Role::Lost {
                                term,
                                why: e.to_string(),
                            });
                            return;
                        }
                        tracing::warn!(error = %e, "etcd: election interrupted; retrying");
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        });
        Election { role, view, task }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One life of the election on one etcd connection and lease. `Ok` when leadership was lost
/// (reported on `role`); `Err` on an etcd error before that.
async fn campaign(
    fabric: &str,
    opts: &HaOptions,
    role_tx: &watch::Sender<Role>,
    view_tx: &watch::Sender<HaView>,
) -> Result<(), HaError> {
    let err = |source| HaError::Etcd {
        endpoints: opts.endpoints.join(","),
        source,
    };
    let mut c = connect(&opts.endpoints).await?;
    let ttl_s = opts.ttl.as_secs().max(1) as i64;
    let lease = c.lease_grant(ttl_s, None).await.map_err(err)?;
    let lease_id = lease.id();
    // etcd may grant more than asked (its minimum TTL): keep alive against what it granted.
    let granted = Duration::from_secs(lease.ttl().max(1) as u64);
    let member = Member {
        id: opts.id.clone(),
        host: crate::lock::hostname(),
        pid: std::process::id(),
        since_ms: now_ms(),
    };
    c.put(
        format!("{}{}", members_prefix(fabric), opts.id),
        serde_json::to_vec(&member).unwrap_or_default(),
        Some(PutOptions::new().with_lease(lease_id)),
    )
    .await
    .map_err(err)?;
    let (mut keeper, mut answers) = c.lease_keep_alive(lease_id).await.map_err(err)?;
    let mut last_alive = Instant::now();
    let mut tick = tokio::time::interval(granted / 3);
    let key = leader_key(fabric);
    let me = opts.id.clone();
    loop {
        // Campaign: the key is ours if nobody holds it.
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                me.clone(),
                Some(PutOptions::new().with_lease(lease_id)),
            )])
            .or_else([TxnOp::get(key.clone(), None)]);
        let r = c.txn(txn).await.map_err(err)?;
        let rev = r.header().map_or(0, |h| h.revision());
        // Leading only on our own lease: a key of an earlier life of this replica (same name,
        // killed) is another's, and goes when its lease expires.
        let (leader, term, watch_from, leading) = if r.succeeded() {
            (me.clone(), rev.max(0) as u64, rev + 1, true)
        } else {
            let mut holder = None;
            for op in r.op_responses() {
                if let etcd_client::TxnOpResponse::Get(g) = op
                    && let Some(kv) = g.kvs().first()
                {
                    holder = Some((
                        String::from_utf8_lossy(kv.value()).into_owned(),
                        kv.create_revision().max(0) as u64,
                        kv.lease(),
                    ));
                }
            }
            match holder {
                // Our own key from an earlier round on this lease: still ours.
                Some((_, t, l)) if l == lease_id => (me.clone(), t, rev + 1, true),
                Some((h, t, _)) => (h, t, rev + 1, false),
                // Gone between compare and get: campaign again.
                None => continue,
            }
        };
        if leading {
            tracing::info!(id = %me, term, "elected leader");
            let _ = role_tx.send(Role::Leader { term });
        } else {
            tracing::info!(id = %me, leader = %leader, term, "following");
            let _ = role_tx.send(Role::Follower {
                leader: Some(leader.clone()),
            });
        }
        // The view for `weft status`.
        if let Ok(v) = read_view(&opts.endpoints, fabric).await {
            let _ = view_tx.send(HaView {
                id: me.clone(),
                role: if leading { "leader" } else { "follower" }.into(),
                ..v
            });
        }
        let mut w = c
            .watch(
                key.clone(),
                Some(WatchOptions::new().with_start_revision(watch_from)),
            )
            .await
            .map_err(err)?;
        // Wait for the key to go (or change hands), keeping the lease alive meanwhile.
        'held: loop {
            tokio::select! {
                _ = tick.tick() => {
                    if last_alive.elapsed() >= granted {
                        let why = format!("no keepalive answer from etcd for {:?} (lease TTL {granted:?})", last_alive.elapsed());
                        if leading {
                            let _ = role_tx.send(Role::Lost { term, why });
                            return Ok(());
                        }
                        return Err(err(etcd_client::Error::LeaseKeepAliveError(why)));
                    }
                    keeper.keep_alive().await.map_err(err)?;
                }
                a = answers.message() => match a.map_err(err)? {
                    Some(a) if a.ttl() > 0 => last_alive = Instant::now(),
                    Some(_) | None => {
                        let why = "the lease expired".to_string();
                        if leading {
                            let _ = role_tx.send(Role::Lost { term, why });
                            return Ok(());
                        }
                        return Err(err(etcd_client::Error::LeaseKeepAliveError(why)));
                    }
                },
                m = w.message() => {
                    let Some(m) = m.map_err(err)? else {
                        return Err(err(etcd_client::Error::WatchError("watch closed".into())));
                    };
                    for ev in m.events() {
                        let gone = ev.event_type() == EventType::Delete
                            || ev.kv().is_some_and(|kv| kv.create_revision().max(0) as u64 != term);
                        if gone {
                            if leading {
                                let _ = role_tx.send(Role::Lost {
                                    term,
                                    why: "the leader key was deleted".into(),
                                });
                                return Ok(());
                            }
                            break 'held;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_from_etcd_urls_and_bad_ones_are_refused() {
        assert_eq!(
            parse_endpoints("etcd://127.0.0.1:2379,10.0.0.2:2379").expect("ok"),
            vec!["http://127.0.0.1:2379", "http://10.0.0.2:2379"]
        );
        for bad in [
            "127.0.0.1:2379",
            "etcd://",
            "etcd://host",
            "etcd://h:notaport",
        ] {
            assert!(parse_endpoints(bad).is_err(), "{bad}");
        }
    }
}
