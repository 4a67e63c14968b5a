//! One switch's write connections, by transport: the edge where a batch of the core
//! ([`crate::core::Batch`]) leaves for the switch and its answers come back. CONFIG_DB rows
//! always go to Redis; P4RT entries go through APPL_DB (swss-common's `ProducerStateTable`,
//! answers on the response channel) or SONiC's ZMQ channel (one request per batch, per-key
//! replies, APPL_DB written behind). The core does not know which: stages, make-before-break
//! and fencing are the same on both.
//!
//! ```text
//!                     ┌─ Redis ─ ProducerStateTable (fenced script) ─► APPL_DB ─► consumer pops
//!   Batch::Entries ───┤                    answers ◄── APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL
//!                     └─ ZMQ ─── ZmqProducer (REQ) ═══ one message ══► consumer (REP)
//!                                          answers ◄══ one reply ════
//!                           APPL_DB P4RT_TABLE ◄── written behind (weft-plugin: by the plugin
//!                                                   on receipt; SONiC's p4orch: by us, as the
//!                                                   P4RT app's AsyncDBUpdater does)
//! ```
//!
//! Fencing over ZMQ: weft-plugin gets the term in the message (a first entry
//! `WEFT_LEADER_TERM`) and refuses a batch of an older term whole, every key
//! FAILED_PRECONDITION `WEFT_FENCED …`, which comes back here as [`WriteError::Fenced`] like
//! the Redis script's refusal. SONiC's p4orch knows no term: the term is claimed in the
//! switch's APPL_DB (atomically checked and raised) before each batch is sent, and the rows
//! written behind are fenced like the Redis producer's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use weft_sonic_db::zmq::{
    AsyncDbUpdater, DEFAULT_REPLY_TIMEOUT, ProducerOptions, ZmqEndpoint, ZmqError, ZmqProducer,
    ZmqSendError,
};
use weft_sonic_db::{
    DbConnection, FieldValues, KeyOpFieldValues, P4RT_TABLE, ProducerStateTable, ResponseWaiter,
    SonicDb, SonicDbError, SonicDbId, StatusCode, Table, WaitOutcome, claim_term,
};
use weft_topology::{Consumer, Transport};

use crate::core::{Answer, AnswerStatus, Batch, SwitchError, TIMEOUT, UNANSWERED};

/// Where a switch's writes go.
#[derive(Debug, Clone)]
pub struct SwitchTarget {
    pub db: String,
    pub transport: Transport,
    pub consumer: Consumer,
}

/// Why a batch was not written, or not answered.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Db(#[from] SonicDbError),
    #[error("{0}")]
    Zmq(#[source] ZmqError),
    /// The switch holds a newer writer's term (over ZMQ, the consumer's refusal): said as the
    /// Redis path's fence says it, so an operator reads one message whichever way it came.
    #[error(
        "write refused: this writer's term {term} is older than the DB's term {held} (a newer leader took over)"
    )]
    Fenced { term: u64, held: u64 },
}

impl WriteError {
    /// As the core sees it.
    pub fn switch_error(&self, db: &str) -> SwitchError {
        match self {
            WriteError::Db(e) => crate::dberr::db_error(db, e),
            WriteError::Fenced { term, held } => SwitchError::Fenced {
                term: *term,
                held: *held,
            },
            WriteError::Zmq(e) => {
                let detail = crate::dberr::one_line(&e.to_string());
                match e {
                    ZmqError::ReplyTimeout { .. } | ZmqError::Full { .. } => {
                        SwitchError::TimedOut { detail }
                    }
                    _ => SwitchError::Unreachable { detail },
                }
            }
        }
    }

    pub fn is_fenced(&self) -> bool {
        matches!(
            self,
            WriteError::Fenced { .. } | WriteError::Db(SonicDbError::Fenced { .. })
        )
    }
}

/// How P4RT entries leave.
// One per switch for the life of a pass: the size of the Redis variant costs nothing.
#[allow(clippy::large_enum_variant)]
enum Entries {
    Redis {
        producer: ProducerStateTable,
        waiter: ResponseWaiter,
    },
    Zmq {
        producer: Box<ZmqProducer>,
        /// SONiC's p4orch: APPL_DB, where the term is claimed before each batch.
        claim: Option<DbConnection>,
    },
}

/// A switch's connections for writes, kept between batches so a reconvergence pays no connects.
pub struct Writer {
    entries: Entries,
    config: DbConnection,
    /// SONiC's p4orch: APPL_DB, whose rows of refused keys are put back after the answers.
    sonic_appl: Option<DbConnection>,
}

impl Writer {
    pub async fn open(
        target: &SwitchTarget,
        reply_timeout: Duration,
    ) -> Result<Writer, WriteError> {
        let sonic = SonicDb::from_endpoint(&target.db)?;
        let entries = match &target.transport {
            Transport::Redis => {
                // Subscribe before writing, or a fast consumer's answers are lost.
                let waiter = ResponseWaiter::subscribe(&sonic, P4RT_TABLE).await?;
                let producer =
                    ProducerStateTable::new(&sonic, SonicDbId::ApplDb, P4RT_TABLE).await?;
                Entries::Redis { producer, waiter }
            }
            Transport::Zmq { endpoint } => {
                let ep: ZmqEndpoint = endpoint.parse().map_err(WriteError::Zmq)?;
                let options = ProducerOptions {
                    reply_timeout,
                    ..ProducerOptions::default()
                };
                let mut producer = ZmqProducer::connect(&ep, "APPL_DB", P4RT_TABLE, options)
                    .map_err(WriteError::Zmq)?;
                let claim = match target.consumer {
                    // weft-plugin writes APPL_DB itself on receipt, before it applies.
                    Consumer::Weft => None,
                    Consumer::Sonic => {
                        // p4orch does not write APPL_DB (dbPersistence=false): the producer
                        // does, behind, as the P4RT app's ZmqProducerStateTable does.
                        let u =
                            AsyncDbUpdater::start(&sonic, SonicDbId::ApplDb, P4RT_TABLE).await?;
                        producer.persist_with(u);
                        Some(sonic.connect(SonicDbId::ApplDb).await?)
                    }
                };
                Entries::Zmq {
                    producer: Box::new(producer),
                    claim,
                }
            }
        };
        let sonic_appl = match target.consumer {
            Consumer::Weft => None,
            Consumer::Sonic => Some(sonic.connect(SonicDbId::ApplDb).await?),
        };
        Ok(Writer {
            entries,
            config: sonic.connect(SonicDbId::ConfigDb).await?,
            sonic_appl,
        })
    }

    pub async fn write(
        &mut self,
        batch: &Batch,
        answer_timeout: Option<Duration>,
        term: Option<u64>,
    ) -> Result<Vec<Answer>, WriteError> {
        match batch {
            Batch::Config { set, del } => {
                let rows: Vec<(&'static str, String, FieldValues)> = set
                    .iter()
                    .map(|c| (c.table(), c.key(), c.fields()))
                    .collect();
                Ok(write_config(&self.config, &rows, del, term).await?)
            }
            Batch::Entries {
                delete,
                ops,
                replace,
                ..
            } => {
                let kofv: Vec<KeyOpFieldValues> = ops
                    .iter()
                    .map(|(k, f)| {
                        if *delete {
                            KeyOpFieldValues::del(k.clone())
                        } else {
                            KeyOpFieldValues::set(k.clone(), f.iter().cloned())
                        }
                    })
                    .collect();
                let keys = || ops.iter().map(|(k, _)| k.clone());
                let before = match &self.sonic_appl {
                    Some(conn) => Some(rows_of(conn, ops.iter().map(|(k, _)| k.as_str())).await?),
                    None => None,
                };
                let outcome = match &mut self.entries {
                    Entries::Redis { producer, waiter } => {
                        if producer.fence() != term {
                            producer.set_fence(term).await?;
                        }
                        producer
                            .apply_replacing(&kofv, &|k| replace.contains(k))
                            .await?;
                        let Some(timeout) = answer_timeout else {
                            return Ok(unanswered(keys()));
                        };
                        (waiter.wait(keys(), timeout).await?, timeout)
                    }
                    Entries::Zmq { producer, claim } => {
                        let outcome = zmq_send(producer, claim.as_ref(), &kofv, term).await?;
                        let timeout = answer_timeout.unwrap_or(DEFAULT_REPLY_TIMEOUT);
                        (outcome, timeout)
                    }
                };
                let (outcome, timeout) = outcome;
                if let Some((t, held)) = fenced_answers(&outcome) {
                    return Err(WriteError::Fenced { term: t, held });
                }
                let answers = answers(ops.iter().map(|(k, _)| k.as_str()), &outcome, timeout);
                if let (Some(conn), Some(before)) = (&self.sonic_appl, before) {
                    self.put_back(conn, &answers, before, term).await?;
                }
                Ok(answers)
            }
        }
    }
}

impl Writer {
    /// SONiC's p4orch leaves APPL_DB alone for a key it refused, holding what the producer
    /// wrote (the pop, or the rows written behind): the producer puts back what was there, so
    /// APPL_DB P4RT_TABLE holds what p4orch applied, as sonic-pins' P4RT app keeps it.
    async fn put_back(
        &self,
        conn: &DbConnection,
        answers: &[Answer],
        mut before: BTreeMap<String, Option<FieldValues>>,
        term: Option<u64>,
    ) -> Result<(), WriteError> {
        let refused = refused(answers);
        if refused.is_empty() {
            return Ok(());
        }
        if let Entries::Zmq { producer, .. } = &self.entries
            && let Some(u) = producer.updater()
        {
            // The refused rows must be written behind before they are put back.
            u.flush().await?;
        }
        let mut rows = Vec::new();
        let mut dels = Vec::new();
        for k in refused {
            match before.remove(k).flatten() {
                Some(f) => rows.push((k.to_string(), f)),
                None => dels.push(k.to_string()),
            }
        }
        tracing::debug!(
            restored = rows.len(),
            removed = dels.len(),
            "APPL_DB rows of keys p4orch refused put back"
        );
        let t = Table::new(conn.clone(), P4RT_TABLE)?;
        match term {
            Some(term) => t.replace_many_fenced(term, &rows, &dels).await?,
            None => t.replace_many(&rows, &dels).await?,
        }
        Ok(())
    }
}

/// The rows `keys` have in `conn`'s P4RT_TABLE (`None`: no row), in one pipeline.
async fn rows_of<'a>(
    conn: &DbConnection,
    keys: impl Iterator<Item = &'a str>,
) -> Result<BTreeMap<String, Option<FieldValues>>, SonicDbError> {
    let keys: Vec<&str> = keys.collect();
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("HGETALL").arg(format!("{P4RT_TABLE}:{k}"));
    }
    let got: Vec<Vec<(String, String)>> =
        pipe.query_async(conn.clone().raw())
            .await
            .map_err(|e| SonicDbError::Redis {
                context: "HGETALL of a batch's keys".into(),
                source: e,
            })?;
    Ok(keys
        .into_iter()
        .zip(got)
        .map(|(k, f)| (k.to_string(), (!f.is_empty()).then_some(f)))
        .collect())
}

/// Sends one batch over ZMQ: the keys' replies, or why the batch as a whole failed (partial
/// replies are dropped: the core then reads the switch back, as after any lost write).
async fn zmq_send(
    producer: &mut ZmqProducer,
    claim: Option<&DbConnection>,
    kofv: &[KeyOpFieldValues],
    term: Option<u64>,
) -> Result<WaitOutcome, WriteError> {
    match claim {
        // weft-plugin: the term rides in the message.
        None => producer.set_fence(term),
        // p4orch: no term on the wire; claimed in APPL_DB first, the rows behind fenced.
        Some(conn) => {
            if let Some(t) = term {
                claim_term(conn, t).await?;
            }
            if let Some(u) = producer.updater() {
                u.set_fence(term);
            }
        }
    }
    producer
        .send(kofv)
        .await
        .map_err(|ZmqSendError { error, unsent, .. }| {
            tracing::debug!(error = %error, unsent = unsent.len(), "ZMQ batch failed");
            WriteError::Zmq(error)
        })
}

/// The term and the newer one held, when the consumer refused the batch as fenced (weft-plugin
/// over ZMQ: every key FAILED_PRECONDITION `WEFT_FENCED term T is older than H`).
fn fenced_answers(outcome: &WaitOutcome) -> Option<(u64, u64)> {
    let r = outcome.responses.values().next()?;
    if r.status != StatusCode::FailedPrecondition {
        return None;
    }
    weft_sonic_db::fenced_term(&r.message)
}

fn unanswered(keys: impl Iterator<Item = String>) -> Vec<Answer> {
    keys.map(|key| Answer {
        key,
        status: UNANSWERED,
        message: String::new(),
    })
    .collect()
}

/// Every key's answer: its response, or a timeout.
fn answers<'a>(
    keys: impl Iterator<Item = &'a str>,
    outcome: &WaitOutcome,
    timeout: Duration,
) -> Vec<Answer> {
    keys.map(|k| match outcome.responses.get(k) {
        Some(r) => answer_of(k, r),
        None => Answer {
            key: k.to_string(),
            status: TIMEOUT,
            message: format!("no answer within {timeout:?}: is the switch's plugin running?"),
        },
    })
    .collect()
}

/// CONFIG_DB rows, one table at a time in the batch's order (referenced rows first), each
/// table's rows in one atomic round trip.
async fn write_config(
    config: &DbConnection,
    set: &[(&'static str, String, FieldValues)],
    del: &[String],
    term: Option<u64>,
) -> Result<Vec<Answer>, SonicDbError> {
    type Rows = Vec<(String, FieldValues)>;
    let mut by_table: BTreeMap<&str, (Rows, Vec<String>)> = BTreeMap::new();
    for (t, k, f) in set {
        by_table
            .entry(t)
            .or_default()
            .0
            .push((k.clone(), f.clone()));
    }
    for k in del {
        if let Some((table, key)) = k.split_once('|') {
            by_table.entry(table).or_default().1.push(key.to_string());
        }
    }
    // Referenced rows first: the batch is sorted by rank, keep that order by table.
    let mut order: Vec<&str> = Vec::new();
    for (t, _, _) in set {
        if !order.contains(t) {
            order.push(t);
        }
    }
    for t in by_table.keys() {
        if !order.contains(t) {
            order.push(t);
        }
    }
    let mut answers = Vec::new();
    for table in order {
        let Some((rows, dels)) = by_table.get(table) else {
            continue;
        };
        let t = Table::new(config.clone(), table)?;
        match term {
            Some(term) => t.replace_many_fenced(term, rows, dels).await?,
            None => t.replace_many(rows, dels).await?,
        }
        answers.extend(rows.iter().map(|(k, _)| Answer::ok(format!("{table}|{k}"))));
        answers.extend(dels.iter().map(|k| Answer::ok(format!("{table}|{k}"))));
    }
    Ok(answers)
}

/// A switch's answer to one key. A code SONiC does not define is `SWSS_RC_UNKNOWN`, its text
/// kept in the message.
pub(crate) fn answer_of(key: &str, r: &weft_sonic_db::Response) -> Answer {
    let message = if r.status.as_str() == r.status_str {
        r.message.clone()
    } else {
        format!("{} {}", r.status_str, r.message)
            .trim_end()
            .to_string()
    };
    Answer {
        key: key.to_string(),
        status: AnswerStatus::Code(r.status),
        message,
    }
}

/// Keys of a batch that the switch's consumer refused.
fn refused(answers: &[Answer]) -> BTreeSet<&str> {
    answers
        .iter()
        .filter(|a| !a.is_ok())
        .map(|a| a.key.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use weft_sonic_db::Response;

    use super::*;

    fn outcome(status: StatusCode, message: &str) -> WaitOutcome {
        let mut o = WaitOutcome::default();
        o.responses.insert(
            "K".into(),
            Response {
                key: "K".into(),
                status,
                status_str: status.as_str().into(),
                message: message.into(),
                fields: Vec::new(),
            },
        );
        o
    }

    #[test]
    fn a_zmq_batch_refused_for_an_older_term_is_a_fenced_write() {
        let o = outcome(
            StatusCode::FailedPrecondition,
            "WEFT_FENCED term 3 is older than 5",
        );
        assert_eq!(fenced_answers(&o), Some((3, 5)));
        let e = WriteError::Fenced { term: 3, held: 5 };
        assert_eq!(
            e.switch_error("db"),
            SwitchError::Fenced { term: 3, held: 5 }
        );
        assert!(!e.switch_error("db").retried());
        // Another precondition is an answer, not fencing.
        let o = outcome(StatusCode::FailedPrecondition, "nexthop in use");
        assert_eq!(fenced_answers(&o), None);
        assert_eq!(fenced_answers(&outcome(StatusCode::Success, "")), None);
    }

    #[test]
    fn a_lost_zmq_server_is_retried_as_unreachable_or_timed_out() {
        let e = WriteError::Zmq(ZmqError::PeerDisconnected {
            endpoint: "tcp://127.0.0.1:1".into(),
        });
        let got = e.switch_error("db");
        assert!(matches!(got, SwitchError::Unreachable { .. }), "{got:?}");
        assert!(got.retried());
        let e = WriteError::Zmq(ZmqError::ReplyTimeout {
            endpoint: "tcp://127.0.0.1:1".into(),
            waited: Duration::from_secs(1),
        });
        assert!(matches!(e.switch_error("db"), SwitchError::TimedOut { .. }));
    }

    #[test]
    fn an_answer_with_a_code_sonic_does_not_define_keeps_its_text_in_the_message() {
        let r = |status_str: &str, message: &str| Response {
            key: "K".into(),
            status: StatusCode::from_swss(status_str),
            status_str: status_str.into(),
            message: message.into(),
            fields: Vec::new(),
        };
        let a = answer_of("K", &r("SWSS_RC_IN_USE", "used by a route"));
        assert_eq!(a.status, AnswerStatus::Code(StatusCode::InUse));
        assert_eq!(a.message, "used by a route");
        let a = answer_of("K", &r("SWSS_RC_NEW_THING", "odd"));
        assert_eq!(a.status, AnswerStatus::Code(StatusCode::Unknown));
        assert_eq!(a.message, "SWSS_RC_NEW_THING odd");
        assert!(!a.is_ok());
    }
}
