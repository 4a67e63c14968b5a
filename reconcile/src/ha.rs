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
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, LeaseKeepAliveStream,
    LeaseKeeper, PutOptions, Txn, TxnOp, WatchOptions, WatchStream,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use weft_retry::RetryPolicy;

/// How a replica whose etcd session broke joins the election again.
const ELECTION_RETRY: RetryPolicy =
    RetryPolicy::doubling(Duration::from_millis(200), Duration::from_secs(2));

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
            let mut backoff = ELECTION_RETRY.backoff();
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
                tokio::time::sleep(backoff.next().unwrap_or(ELECTION_RETRY.max)).await;
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

/// The etcd error of an election's endpoints.
fn etcd_error(opts: &HaOptions) -> impl Fn(etcd_client::Error) -> HaError + '_ {
    |source| HaError::Etcd {
        endpoints: opts.endpoints.join(","),
        source,
    }
}

/// One life of the election on one etcd connection and lease. `Ok` when leadership was lost
/// (reported on `role`); `Err` on an etcd error before that.
async fn campaign(
    fabric: &str,
    opts: &HaOptions,
    role_tx: &watch::Sender<Role>,
    view_tx: &watch::Sender<HaView>,
) -> Result<(), HaError> {
    let err = etcd_error(opts);
    let mut c = connect(&opts.endpoints).await?;
    let ttl_s = opts.ttl.as_secs().max(1) as i64;
    let lease = c.lease_grant(ttl_s, None).await.map_err(&err)?;
    let lease_id = lease.id();
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
    .map_err(&err)?;
    let (keeper, answers) = c.lease_keep_alive(lease_id).await.map_err(&err)?;
    // etcd may grant more than asked (its minimum TTL): keep alive against what it granted.
    let granted = Duration::from_secs(lease.ttl().max(1) as u64);
    let mut lease = Lease {
        keeper,
        answers,
        last_alive: Instant::now(),
        tick: tokio::time::interval(granted / 3),
        granted,
    };
    let key = leader_key(fabric);
    loop {
        let Some(seat) = contest(&mut c, &key, &opts.id, lease_id, &err).await? else {
            // Gone between compare and get: campaign again.
            continue;
        };
        let me = &opts.id;
        if seat.leading {
            tracing::info!(id = %me, term = seat.term, "elected leader");
            let _ = role_tx.send(Role::Leader { term: seat.term });
        } else {
            tracing::info!(id = %me, leader = %seat.leader, term = seat.term, "following");
            let _ = role_tx.send(Role::Follower {
                leader: Some(seat.leader.clone()),
            });
        }
        // The view for `weft status`.
        if let Ok(v) = read_view(&opts.endpoints, fabric).await {
            let _ = view_tx.send(HaView {
                id: me.clone(),
                role: if seat.leading { "leader" } else { "follower" }.into(),
                ..v
            });
        }
        let mut w = c
            .watch(
                key.clone(),
                Some(WatchOptions::new().with_start_revision(seat.watch_from)),
            )
            .await
            .map_err(&err)?;
        if hold(&mut lease, &mut w, &seat, role_tx, &err).await? {
            return Ok(());
        }
    }
}

/// Who holds the leader key after one campaign round.
struct Seat {
    leader: String,
    /// The leader key's create revision.
    term: u64,
    /// Where the watch of the key starts.
    watch_from: i64,
    /// This replica holds it.
    leading: bool,
}

/// One round: the key is ours if nobody holds it. `None`: it went between compare and get.
async fn contest(
    c: &mut Client,
    key: &str,
    me: &str,
    lease_id: i64,
    err: &impl Fn(etcd_client::Error) -> HaError,
) -> Result<Option<Seat>, HaError> {
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(
            key,
            me,
            Some(PutOptions::new().with_lease(lease_id)),
        )])
        .or_else([TxnOp::get(key, None)]);
    let r = c.txn(txn).await.map_err(err)?;
    let rev = r.header().map_or(0, |h| h.revision());
    if r.succeeded() {
        return Ok(Some(Seat {
            leader: me.to_string(),
            term: rev.max(0) as u64,
            watch_from: rev + 1,
            leading: true,
        }));
    }
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
    // Leading only on our own lease: a key of an earlier life of this replica (same name,
    // killed) is another's, and goes when its lease expires.
    Ok(holder.map(|(h, term, l)| Seat {
        // Our own key from an earlier round on this lease: still ours.
        leading: l == lease_id,
        leader: if l == lease_id { me.to_string() } else { h },
        term,
        watch_from: rev + 1,
    }))
}

/// This replica's lease and its keepalives.
struct Lease {
    keeper: LeaseKeeper,
    answers: LeaseKeepAliveStream,
    last_alive: Instant,
    tick: tokio::time::Interval,
    granted: Duration,
}

/// Waits for the leader key to go (or change hands), keeping the lease alive meanwhile.
/// `Ok(true)`: this replica's leadership was lost (reported on `role`); `Ok(false)`: the key
/// went, campaign again.
async fn hold(
    lease: &mut Lease,
    w: &mut WatchStream,
    seat: &Seat,
    role_tx: &watch::Sender<Role>,
    err: &impl Fn(etcd_client::Error) -> HaError,
) -> Result<bool, HaError> {
    let (term, leading) = (seat.term, seat.leading);
    let lost = |why: String| {
        if leading {
            let _ = role_tx.send(Role::Lost { term, why });
            Ok(true)
        } else {
            Err(err(etcd_client::Error::LeaseKeepAliveError(why)))
        }
    };
    loop {
        tokio::select! {
            _ = lease.tick.tick() => {
                if lease.last_alive.elapsed() >= lease.granted {
                    return lost(format!(
                        "no keepalive answer from etcd for {:?} (lease TTL {:?})",
                        lease.last_alive.elapsed(),
                        lease.granted
                    ));
                }
                lease.keeper.keep_alive().await.map_err(err)?;
            }
            a = lease.answers.message() => match a.map_err(err)? {
                Some(a) if a.ttl() > 0 => lease.last_alive = Instant::now(),
                Some(_) | None => return lost("the lease expired".to_string()),
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
                            return Ok(true);
                        }
                        return Ok(false);
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
