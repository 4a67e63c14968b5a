//! What the daemon reads from the switch and publishes without deciding anything: the counter
//! poll (COUNTERS_DB), the PSN anomaly totals (their own task) and the postcards (packet-ins to
//! STATE_DB `WEFT_POSTCARDS`). The decisions taken on counters (PFC watchdog, ECN tuning) are the
//! core's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_appdb::PortMap;
use weft_p4rt::proto::p4::v1::{Entity, PacketIn};
use weft_p4rt::{Client, P4Info};
use weft_sonic_db::{FieldValues, SonicDb, SonicDbError, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{CountersRow, PortNameMap};
use weft_sonic_schema::snapshot::{CountersSnapshot, KEY};
use weft_sonic_schema::state::PostcardHop;
use weft_telemetry::PluginMetrics;

/// Postcards held for the next flush at most; more are dropped (and counted).
pub const POSTCARD_BUFFER: usize = 20_000;

/// Reads the PSN anomaly counters every `every` in a task of its own: the wildcard reads of
/// 2 × 4096 cells take long on BMv2, and the session loop must not wait on them (a CONFIG_DB
/// change and a batch queued behind one would race). Totals go to the metrics and to
/// COUNTERS:WEFT_SWITCH. Errors are logged at debug and retried next time: the session loop
/// notices a lost switch on its own.
pub async fn psn_task(
    client: Client,
    reads: Vec<Entity>,
    sonic: SonicDb,
    metrics: Arc<PluginMetrics>,
    every: Option<Duration>,
) {
    let Some(every) = every else { return };
    if reads.is_empty() {
        return;
    }
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let cells = match client.read(reads.clone()).await {
            Ok(r) => crate::counters::cells(&r),
            Err(e) => {
                tracing::debug!(error = %e, "PSN counter read");
                continue;
            }
        };
        let (ooo, reg) = crate::counters::psn_totals(&cells);
        metrics.set_psn(ooo, reg);
        let sw = weft_sonic_schema::counters::SwitchCounters {
            psn_out_of_order: Some(ooo),
            psn_regressions: Some(reg),
            ..Default::default()
        };
        let write = async {
            let conn = sonic.connect(SonicDbId::CountersDb).await?;
            Table::new(conn, "COUNTERS")?
                .merge_many(&[(sw.key(), sw.to_fields())])
                .await
        };
        if let Err(e) = write.await {
            tracing::debug!(error = %e, "PSN counters to COUNTERS_DB");
        }
    }
}

/// Why a poll of the switch failed.
#[derive(Debug, thiserror::Error)]
pub enum PollError {
    #[error("{what} read: {source}")]
    Read {
        what: &'static str,
        source: weft_p4rt::Error,
    },
    #[error(transparent)]
    Db(#[from] SonicDbError),
    #[error("writing postcards: {0}")]
    Postcards(#[source] redis::RedisError),
}

/// One counter poll: ports, queues and nexthop paths into COUNTERS_DB, and the port name map;
/// `COUNTERS:WEFT_SWITCH` is stamped with the poll's wall time and `interval`, so readers can
/// tell current counters from ones a dead or stuck poll left behind.
pub async fn poll_counters(
    client: &Client,
    info: &P4Info,
    sonic: &SonicDb,
    metrics: &PluginMetrics,
    ports: &PortMap,
    nexthops: &std::collections::BTreeSet<u32>,
    interval: Option<Duration>,
) -> Result<(), PollError> {
    let t0 = Instant::now();
    let polled_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let reads = crate::counters::reads(info, ports, nexthops);
    let cells = if reads.is_empty() {
        Default::default()
    } else {
        let res = client.read(reads).await.map_err(|source| PollError::Read {
            what: "counter",
            source,
        })?;
        crate::counters::cells(&res)
    };
    let typed = crate::counters::rows(ports, nexthops, &cells);
    metrics.set_counters(weft_telemetry::SwitchSnapshot {
        poll_time_ms: Some(polled_ms),
        ..weft_telemetry::SwitchSnapshot::from_rows(&typed)
    });
    let mut rows: Vec<(String, FieldValues)> = typed.iter().map(CountersRow::key_fields).collect();
    let stamp = weft_sonic_schema::counters::SwitchCounters {
        poll_time_ms: Some(polled_ms),
        poll_interval_ms: interval.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        ..Default::default()
    };
    rows.push((stamp.key(), stamp.to_fields()));
    let copy = CountersSnapshot::of_poll(&rows, polled_ms).to_fields();
    let map = crate::counters::name_map(ports).to_fields();
    let conn = sonic.connect(SonicDbId::CountersDb).await?;
    // One MULTI: a reader never sees this poll's rows beside another poll's copy.
    Table::new(conn, "COUNTERS")?
        .merge_many_with(&rows, &[(KEY, &copy), (PortNameMap::TABLE, &map)])
        .await?;
    metrics.counter_poll(t0.elapsed().as_secs_f64());
    Ok(())
}

/// Postcards decoded from packet-ins, held for the next flush.
#[derive(Debug, Default)]
pub struct Postcards {
    held: Vec<PostcardHop>,
}

impl Postcards {
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// A packet-in: a postcard is decoded and held for the next flush.
    pub fn packet_in(
        &mut self,
        info: &P4Info,
        p: &PacketIn,
        switch: &str,
        ports: &PortMap,
        metrics: &PluginMetrics,
    ) {
        let Ok(d) = info.decode_packet_in(p) else {
            metrics.postcard("undecodable");
            return;
        };
        if d.get_u64(weft_p4::packet_metadata::packet_in::fields::reason::NAME)
            != Some(u64::from(weft_p4::constants::PACKET_IN_REASON_POSTCARD))
        {
            return;
        }
        let pc = match weft_telemetry::postcard::decode(&d.payload) {
            Ok(pc) => pc,
            Err(e) => {
                tracing::debug!(error = %e, "postcard not decoded");
                metrics.postcard("undecodable");
                return;
            }
        };
        if self.held.len() >= POSTCARD_BUFFER {
            metrics.postcard("dropped");
            return;
        }
        let name = |id: u16| {
            ports
                .by_name
                .iter()
                .find(|(_, v)| **v == u32::from(id))
                .map(|(k, _)| k.clone())
        };
        let time_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        self.held.push(pc.hop(switch, name, time_us));
    }

    /// Appends the held postcards to STATE_DB `WEFT_POSTCARDS` (a stream trimmed to `max`
    /// records).
    pub async fn flush(
        &mut self,
        sonic: &SonicDb,
        max: u64,
        metrics: &PluginMetrics,
    ) -> Result<(), PollError> {
        let hops = std::mem::take(&mut self.held);
        let mut conn = sonic.connect(SonicDbId::StateDb).await?;
        let mut pipe = redis::pipe();
        for h in &hops {
            let mut c = redis::cmd("XADD");
            c.arg(weft_sonic_schema::state::POSTCARD_STREAM)
                .arg("MAXLEN")
                .arg("~")
                .arg(max)
                .arg("*");
            for (f, v) in h.to_fields() {
                c.arg(f).arg(v);
            }
            pipe.add_command(c).ignore();
        }
        let r: Result<(), redis::RedisError> = pipe.query_async(conn.raw()).await;
        r.map_err(PollError::Postcards)?;
        for _ in &hops {
            metrics.postcard("stored");
        }
        Ok(())
    }
}
