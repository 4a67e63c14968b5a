//! The metric families of `weft-plugin --metrics` and `weft run --metrics`.
//!
//! Two kinds of series:
//! * **Mirrored** switch counters ([`SwitchSnapshot`]): the pipeline's own counters as the
//!   plugin's last counter poll read them (the same cells COUNTERS_DB gets). They are encoded
//!   from the snapshot at scrape time by a `prometheus-client` collector, so a switch restart
//!   shows as the counter reset Prometheus expects, not as a negative rate.
//! * **Observed** plugin and controller events (tuner moves, watchdog storms, batch latency,
//!   reconvergence latency, ...): ordinary `prometheus-client` counters, gauges and histograms.
//!
//! The names and label sets are listed in [`PLUGIN_FAMILIES`] and [`CONTROLLER_FAMILIES`]
//! (tested against what the registries encode; the README lists the same).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A label set: `switch` first, then the series' own labels.
pub type Labels = Vec<(String, String)>;

/// One metric family: name as exposed (with `_total` for counters), type, labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilyDoc {
    pub name: &'static str,
    pub kind: &'static str,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

const fn fam(
    name: &'static str,
    kind: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> FamilyDoc {
    FamilyDoc {
        name,
        kind,
        labels,
        help,
    }
}

const SP: &[&str] = &["switch", "port"];
const SPQ: &[&str] = &["switch", "port", "queue"];
const SPP: &[&str] = &["switch", "port", "priority"];
const S: &[&str] = &["switch"];

/// Every family `weft-plugin --metrics` serves.
pub const PLUGIN_FAMILIES: &[FamilyDoc] = &[
    fam(
        "weft_port_rx_packets_total",
        "counter",
        SP,
        "Packets received on the port (the pipeline's port_rx_counter).",
    ),
    fam(
        "weft_port_rx_bytes_total",
        "counter",
        SP,
        "Bytes received on the port.",
    ),
    fam(
        "weft_port_tx_packets_total",
        "counter",
        SP,
        "Packets sent on the port (port_tx_counter).",
    ),
    fam(
        "weft_port_tx_bytes_total",
        "counter",
        SP,
        "Bytes sent on the port.",
    ),
    fam(
        "weft_queue_tx_packets_total",
        "counter",
        SPQ,
        "Packets sent from the egress queue (queue_tx_counter).",
    ),
    fam(
        "weft_queue_tx_bytes_total",
        "counter",
        SPQ,
        "Bytes sent from the egress queue.",
    ),
    fam(
        "weft_queue_ecn_marked_packets_total",
        "counter",
        SPQ,
        "Packets the queue marked CE (ecn_mark_counter).",
    ),
    fam(
        "weft_queue_trimmed_packets_total",
        "counter",
        SPQ,
        "Packets of the queue trimmed because the port was congested (SAI_QUEUE_STAT_TRIM_PACKETS).",
    ),
    fam(
        "weft_pfc_pause_rx_frames_total",
        "counter",
        SPP,
        "PFC PAUSE frames received (pfc_rx_pause_counter).",
    ),
    fam(
        "weft_pfc_pause_tx_frames_total",
        "counter",
        SPP,
        "PFC PAUSE frames sent (pfc_tx_pause_counter).",
    ),
    fam(
        "weft_drops_packets_total",
        "counter",
        &["switch", "reason"],
        "Packets the pipeline dropped, by reason (drop_reason_counter).",
    ),
    fam(
        "weft_drops_bytes_total",
        "counter",
        &["switch", "reason"],
        "Bytes the pipeline dropped, by reason.",
    ),
    fam(
        "weft_multipath_member_packets_total",
        "counter",
        &["switch", "nexthop"],
        "Packets multipath groups sent through each member nexthop (path spread).",
    ),
    fam(
        "weft_multipath_member_bytes_total",
        "counter",
        &["switch", "nexthop"],
        "Bytes multipath groups sent through each member nexthop.",
    ),
    fam(
        "weft_queue_depth_packets",
        "histogram",
        SP,
        "Egress queue depth at enqueue, packets (the pipeline's per-port histogram; sum estimated from bucket midpoints).",
    ),
    fam(
        "weft_roce_psn_out_of_order_packets_total",
        "counter",
        S,
        "RoCE requests toward host ports whose PSN skipped ahead (psn_out_of_order_counter, summed over the ports).",
    ),
    fam(
        "weft_roce_psn_regressions_total",
        "counter",
        S,
        "RoCE packets toward host ports with an older PSN than seen (retransmissions or late packets).",
    ),
    fam(
        "weft_counters_poll_timestamp_seconds",
        "gauge",
        S,
        "Unix time of the counter poll the switch's counter families come from (the plugin's clock, as COUNTERS_DB's WEFT_POLL_TIME_MS): a reader times rates by it, not by the scrape.",
    ),
    fam(
        "weft_pfc_watchdog_stormed",
        "gauge",
        SPP,
        "1 while the PFC watchdog holds the queue stormed, else 0.",
    ),
    fam(
        "weft_pfc_watchdog_storms_total",
        "counter",
        SPP,
        "PFC storms the watchdog declared.",
    ),
    fam(
        "weft_pfc_paused",
        "gauge",
        SPP,
        "1 while the port's peer holds the priority's egress queue paused (BMv2: the plugin's hold from the PFC frames), else 0.",
    ),
    fam(
        "weft_pfc_pause_apply_seconds",
        "histogram",
        S,
        "From a PFC frame's packet-in to its hold or release being set on the switch (BMv2's Thrift API).",
    ),
    fam(
        "weft_ecn_tuner_moves_total",
        "counter",
        &["switch", "port", "queue", "reason"],
        "ECN threshold changes the run-time tuner made, by reason.",
    ),
    fam(
        "weft_p4rt_primary",
        "gauge",
        S,
        "1 while the plugin is the switch's primary P4Runtime client with the pipeline synced, else 0.",
    ),
    fam(
        "weft_plugin_state",
        "gauge",
        &["switch", "state"],
        "1 for the plugin's current state (starting, waiting-for-switch, ..., running).",
    ),
    fam(
        "weft_plugin_sessions_total",
        "counter",
        S,
        "P4Runtime/Redis sessions the plugin began (each reconnect is one).",
    ),
    fam(
        "weft_plugin_keys_total",
        "counter",
        &["switch", "result"],
        "APPL_DB keys answered, by result (ok, failed).",
    ),
    fam(
        "weft_plugin_batch_duration_seconds",
        "histogram",
        S,
        "One APPL_DB batch: switch write, commit and answer.",
    ),
    fam(
        "weft_appl_db_backlog_keys",
        "gauge",
        S,
        "APPL_DB P4RT_TABLE keys written but not yet taken by the plugin.",
    ),
    fam(
        "weft_counter_poll_duration_seconds",
        "histogram",
        S,
        "One counter poll (P4Runtime read and COUNTERS_DB write).",
    ),
    fam(
        "weft_postcards_total",
        "counter",
        &["switch", "result"],
        "Postcards received as packet-in, by result (stored, dropped: buffer full, undecodable; lagged: P4Runtime stream events the plugin's loop missed).",
    ),
];

/// Every family `weft run --metrics` serves.
pub const CONTROLLER_FAMILIES: &[FamilyDoc] = &[
    fam(
        "weft_reconvergence_duration_seconds",
        "histogram",
        &[],
        "From a batch's first port event to every affected switch's acknowledgement.",
    ),
    fam(
        "weft_reconvergences_total",
        "counter",
        &[],
        "Reconvergences (link changes that rewrote switches).",
    ),
    fam(
        "weft_controller_port_events_total",
        "counter",
        S,
        "STATE_DB PORT_TABLE changes seen, per switch.",
    ),
    fam(
        "weft_controller_writes_total",
        "counter",
        S,
        "Entries and rows written, per switch.",
    ),
    fam(
        "weft_controller_write_failures_total",
        "counter",
        S,
        "Writes refused or not answered, per switch.",
    ),
    fam(
        "weft_controller_switch_reachable",
        "gauge",
        S,
        "1 when the switch's DB and plugin answer (not unreachable or not ready), else 0.",
    ),
    fam(
        "weft_controller_switch_converged",
        "gauge",
        S,
        "1 when the switch holds what the intent wants, else 0.",
    ),
    fam(
        "weft_controller_links",
        "gauge",
        &[],
        "Links of the fabric.",
    ),
    fam(
        "weft_controller_links_down",
        "gauge",
        &[],
        "Links not in use (down, in hold-down or suppressed).",
    ),
    fam(
        "weft_controller_links_suppressed",
        "gauge",
        &[],
        "Links suppressed by flap damping.",
    ),
];

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A port's counters as one poll read them (`None`: not read).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PortSample {
    pub rx_packets: Option<u64>,
    pub rx_bytes: Option<u64>,
    pub tx_packets: Option<u64>,
    pub tx_bytes: Option<u64>,
    /// Per priority: (PAUSE received, PAUSE sent).
    pub pfc: [(Option<u64>, Option<u64>); 8],
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueSample {
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
    pub ecn_marked: Option<u64>,
    pub trimmed: Option<u64>,
}

/// A depth histogram: per bucket (inclusive upper edge in packets, packets in the bucket),
/// ascending; the last bucket is reported as `+Inf`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DepthHistogram {
    pub buckets: Vec<(f64, u64)>,
    /// Estimated from bucket midpoints.
    pub sum: f64,
}

/// What the plugin's last polls read from the switch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwitchSnapshot {
    pub ports: BTreeMap<String, PortSample>,
    pub queues: BTreeMap<(String, u8), QueueSample>,
    /// Reason → (packets, bytes).
    pub drops: BTreeMap<String, (u64, u64)>,
    /// Nexthop id → (packets, bytes).
    pub members: BTreeMap<u32, (u64, u64)>,
    pub depth: BTreeMap<String, DepthHistogram>,
    pub psn_out_of_order: Option<u64>,
    pub psn_regressions: Option<u64>,
    /// Unix ms of the poll that read these counters.
    pub poll_time_ms: Option<u64>,
}

impl SwitchSnapshot {
    /// The counter rows of one poll (the ones COUNTERS_DB gets).
    pub fn from_rows(rows: &[weft_sonic_schema::counters::CountersRow]) -> Self {
        use weft_sonic_schema::counters::CountersRow;
        let mut s = SwitchSnapshot::default();
        for r in rows {
            match r {
                CountersRow::Port(p) => {
                    let mut ps = PortSample {
                        rx_packets: p.rx_packets,
                        rx_bytes: p.rx_bytes,
                        tx_packets: p.tx_packets,
                        tx_bytes: p.tx_bytes,
                        ..Default::default()
                    };
                    for (i, c) in p.pfc.iter().enumerate().take(8) {
                        ps.pfc[i] = (c.rx_pause, c.tx_pause);
                    }
                    s.ports.insert(p.port.clone(), ps);
                }
                CountersRow::Queue(q) => {
                    s.queues.insert(
                        (q.port.clone(), q.queue),
                        QueueSample {
                            packets: q.packets,
                            bytes: q.bytes,
                            ecn_marked: q.ecn_marked,
                            trimmed: q.trimmed,
                        },
                    );
                }
                CountersRow::Switch(sw) => {
                    s.drops = sw.drops.clone();
                    s.psn_out_of_order = sw.psn_out_of_order;
                    s.psn_regressions = sw.psn_regressions;
                    s.poll_time_ms = sw.poll_time_ms;
                }
                CountersRow::Nexthop(n) => {
                    s.members.insert(n.nexthop_id, (n.packets, n.bytes));
                }
            }
        }
        s
    }

    /// A pipeline histogram of 16 buckets, bucket b counting depths in
    /// `[b << shift, (b+1) << shift)` packets (cumulative packet counts since the switch started).
    pub fn depth_from_buckets(counts: &[u64], shift: u32) -> DepthHistogram {
        let mut buckets = Vec::with_capacity(counts.len());
        let mut sum = 0.0;
        for (b, n) in counts.iter().enumerate() {
            let lo = (b as u64) << shift;
            let hi = ((b as u64 + 1) << shift).saturating_sub(1);
            sum += (*n as f64) * (lo + hi) as f64 / 2.0;
            buckets.push((hi as f64, *n));
        }
        DepthHistogram { buckets, sum }
    }
}

/// Encodes the mirrored switch counters at scrape time.
#[derive(Debug)]
struct SwitchCollector {
    switch: String,
    snap: Arc<Mutex<SwitchSnapshot>>,
}

fn counters<'a>(
    enc: &mut DescriptorEncoder,
    doc: &FamilyDoc,
    series: impl Iterator<Item = (Labels, u64)> + 'a,
) -> std::fmt::Result {
    let name = doc.name.trim_end_matches("_total");
    let mut m = enc.encode_descriptor(name, doc.help, None, MetricType::Counter)?;
    for (l, v) in series {
        m.encode_family(&l)?
            .encode_counter::<NoLabelSet, u64, u64>(&v, None)?;
    }
    Ok(())
}

fn doc(name: &str) -> &'static FamilyDoc {
    PLUGIN_FAMILIES
        .iter()
        .chain(CONTROLLER_FAMILIES)
        .find(|f| f.name == name)
        .unwrap_or(&PLUGIN_FAMILIES[0])
}

impl Collector for SwitchCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let snap = match self.snap.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        };
        let sw = self.switch.as_str();
        let port = |p: &str| labels(&[("switch", sw), ("port", p)]);
        type PortField = fn(&PortSample) -> Option<u64>;
        let port_fields: [(&str, PortField); 4] = [
            ("weft_port_rx_packets_total", |p| p.rx_packets),
            ("weft_port_rx_bytes_total", |p| p.rx_bytes),
            ("weft_port_tx_packets_total", |p| p.tx_packets),
            ("weft_port_tx_bytes_total", |p| p.tx_bytes),
        ];
        for (name, f) in port_fields {
            counters(
                &mut enc,
                doc(name),
                snap.ports
                    .iter()
                    .filter_map(|(n, p)| f(p).map(|v| (port(n), v))),
            )?;
        }
        let queue =
            |p: &str, q: u8| labels(&[("switch", sw), ("port", p), ("queue", &q.to_string())]);
        type QueueField = fn(&QueueSample) -> Option<u64>;
        let queue_fields: [(&str, QueueField); 4] = [
            ("weft_queue_tx_packets_total", |q| q.packets),
            ("weft_queue_tx_bytes_total", |q| q.bytes),
            ("weft_queue_ecn_marked_packets_total", |q| q.ecn_marked),
            ("weft_queue_trimmed_packets_total", |q| q.trimmed),
        ];
        for (name, f) in queue_fields {
            counters(
                &mut enc,
                doc(name),
                snap.queues
                    .iter()
                    .filter_map(|((p, q), s)| f(s).map(|v| (queue(p, *q), v))),
            )?;
        }
        let prio = |p: &str, i: usize| {
            labels(&[("switch", sw), ("port", p), ("priority", &i.to_string())])
        };
        for (name, rx) in [
            ("weft_pfc_pause_rx_frames_total", true),
            ("weft_pfc_pause_tx_frames_total", false),
        ] {
            counters(
                &mut enc,
                doc(name),
                snap.ports.iter().flat_map(|(n, p)| {
                    p.pfc.iter().enumerate().filter_map(move |(i, (r, t))| {
                        let v = if rx { *r } else { *t };
                        v.map(|v| (prio(n, i), v))
                    })
                }),
            )?;
        }
        let reason = |r: &str| labels(&[("switch", sw), ("reason", &r.to_ascii_lowercase())]);
        counters(
            &mut enc,
            doc("weft_drops_packets_total"),
            snap.drops.iter().map(|(r, (p, _))| (reason(r), *p)),
        )?;
        counters(
            &mut enc,
            doc("weft_drops_bytes_total"),
            snap.drops.iter().map(|(r, (_, b))| (reason(r), *b)),
        )?;
        let nh = |id: u32| labels(&[("switch", sw), ("nexthop", &format!("0x{id:x}"))]);
        counters(
            &mut enc,
            doc("weft_multipath_member_packets_total"),
            snap.members.iter().map(|(id, (p, _))| (nh(*id), *p)),
        )?;
        counters(
            &mut enc,
            doc("weft_multipath_member_bytes_total"),
            snap.members.iter().map(|(id, (_, b))| (nh(*id), *b)),
        )?;
        {
            let d = doc("weft_queue_depth_packets");
            let mut m = enc.encode_descriptor(d.name, d.help, None, MetricType::Histogram)?;
            for (p, h) in &snap.depth {
                // The encoder accumulates bucket counts itself; f64::MAX is its `+Inf`.
                let n = h.buckets.len();
                let count: u64 = h.buckets.iter().map(|(_, c)| c).sum();
                let buckets: Vec<(f64, u64)> = h
                    .buckets
                    .iter()
                    .enumerate()
                    .map(|(i, (le, c))| (if i + 1 == n { f64::MAX } else { *le }, *c))
                    .collect();
                m.encode_family(&port(p))?
                    .encode_histogram::<NoLabelSet>(h.sum, count, &buckets, None)?;
            }
        }
        switch_families(&mut enc, sw, &snap)
    }
}

/// The families of the switch as a whole: the poll the counters come from, and the RoCE PSN
/// anomalies summed over its ports.
fn switch_families(
    enc: &mut DescriptorEncoder,
    sw: &str,
    snap: &SwitchSnapshot,
) -> std::fmt::Result {
    let switch_only = labels(&[("switch", sw)]);
    if let Some(ms) = snap.poll_time_ms {
        let d = doc("weft_counters_poll_timestamp_seconds");
        let mut m = enc.encode_descriptor(d.name, d.help, None, MetricType::Gauge)?;
        m.encode_family(&switch_only)?
            .encode_gauge(&(ms as f64 / 1000.0))?;
    }
    counters(
        enc,
        doc("weft_roce_psn_out_of_order_packets_total"),
        snap.psn_out_of_order
            .map(|v| (switch_only.clone(), v))
            .into_iter(),
    )?;
    counters(
        enc,
        doc("weft_roce_psn_regressions_total"),
        snap.psn_regressions
            .map(|v| (switch_only.clone(), v))
            .into_iter(),
    )?;
    Ok(())
}

/// The plugin's registry and the handles its loops update.
#[derive(Debug)]
pub struct PluginMetrics {
    registry: Arc<Registry>,
    switch: String,
    snap: Arc<Mutex<SwitchSnapshot>>,
    wd_stormed: Family<Labels, Gauge>,
    wd_storms: Family<Labels, Counter>,
    pfc_paused: Family<Labels, Gauge>,
    pfc_apply: Family<Labels, Histogram>,
    tuner_moves: Family<Labels, Counter>,
    primary: Family<Labels, Gauge>,
    state: Family<Labels, Gauge>,
    sessions: Family<Labels, Counter>,
    keys: Family<Labels, Counter>,
    batch: Family<Labels, Histogram>,
    backlog: Family<Labels, Gauge>,
    poll: Family<Labels, Histogram>,
    postcards: Family<Labels, Counter>,
}

fn seconds_histogram() -> Histogram {
    // 0.5 ms .. ~8 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 15))
}

fn fast_histogram() -> Histogram {
    // 50 µs .. ~0.8 s.
    Histogram::new(exponential_buckets(0.00005, 2.0, 15))
}

fn register<M: EncodeMetric + prometheus_client::registry::Metric + Clone>(
    r: &mut Registry,
    name: &str,
    m: &M,
) {
    let d = doc(name);
    // prometheus-client appends `_total` to counters itself.
    let base = if d.kind == "counter" {
        name.trim_end_matches("_total")
    } else {
        name
    };
    r.register(base, d.help, m.clone());
}

impl PluginMetrics {
    /// A registry for switch `switch` (the `switch` label of every series).
    pub fn new(switch: impl Into<String>) -> Self {
        let switch = switch.into();
        let mut r = Registry::default();
        let snap = Arc::new(Mutex::new(SwitchSnapshot::default()));
        r.register_collector(Box::new(SwitchCollector {
            switch: switch.clone(),
            snap: snap.clone(),
        }));
        let m = PluginMetrics {
            registry: Arc::new(Registry::default()),
            switch,
            snap,
            wd_stormed: Family::default(),
            wd_storms: Family::default(),
            pfc_paused: Family::default(),
            pfc_apply: Family::new_with_constructor(fast_histogram),
            tuner_moves: Family::default(),
            primary: Family::default(),
            state: Family::default(),
            sessions: Family::default(),
            keys: Family::default(),
            batch: Family::new_with_constructor(seconds_histogram),
            backlog: Family::default(),
            poll: Family::new_with_constructor(seconds_histogram),
            postcards: Family::default(),
        };
        register(&mut r, "weft_pfc_watchdog_stormed", &m.wd_stormed);
        register(&mut r, "weft_pfc_watchdog_storms_total", &m.wd_storms);
        register(&mut r, "weft_pfc_paused", &m.pfc_paused);
        register(&mut r, "weft_pfc_pause_apply_seconds", &m.pfc_apply);
        register(&mut r, "weft_ecn_tuner_moves_total", &m.tuner_moves);
        register(&mut r, "weft_p4rt_primary", &m.primary);
        register(&mut r, "weft_plugin_state", &m.state);
        register(&mut r, "weft_plugin_sessions_total", &m.sessions);
        register(&mut r, "weft_plugin_keys_total", &m.keys);
        register(&mut r, "weft_plugin_batch_duration_seconds", &m.batch);
        register(&mut r, "weft_appl_db_backlog_keys", &m.backlog);
        register(&mut r, "weft_counter_poll_duration_seconds", &m.poll);
        register(&mut r, "weft_postcards_total", &m.postcards);
        for result in ["stored", "dropped", "undecodable", "lagged"] {
            let _ = m.postcards.get_or_create(&m.with(&[("result", result)]));
        }
        // Series that exist from the start (a scrape before the first event still sees them).
        m.primary.get_or_create(&m.sw()).set(0);
        let _ = m.sessions.get_or_create(&m.sw());
        let _ = m.backlog.get_or_create(&m.sw());
        for result in ["ok", "failed"] {
            let _ = m.keys.get_or_create(&m.with(&[("result", result)]));
        }
        PluginMetrics {
            registry: Arc::new(r),
            ..m
        }
    }

    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    fn sw(&self) -> Labels {
        labels(&[("switch", &self.switch)])
    }

    fn with(&self, more: &[(&str, &str)]) -> Labels {
        let mut l = self.sw();
        l.extend(labels(more));
        l
    }

    /// Replaces the mirrored counters with one poll's rows, keeping the depth histograms and
    /// PSN counts (read by other polls) unless `rows` replaces them.
    pub fn set_counters(&self, mut s: SwitchSnapshot) {
        let mut g = match self.snap.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if s.depth.is_empty() {
            s.depth = std::mem::take(&mut g.depth);
        }
        if s.psn_out_of_order.is_none() {
            s.psn_out_of_order = g.psn_out_of_order;
            s.psn_regressions = g.psn_regressions;
        }
        *g = s;
    }

    /// The depth histogram of one port (cumulative pipeline buckets).
    pub fn set_depth(&self, port: &str, counts: &[u64], shift: u32) {
        let h = SwitchSnapshot::depth_from_buckets(counts, shift);
        if let Ok(mut g) = self.snap.lock() {
            g.depth.insert(port.to_string(), h);
        }
    }

    pub fn set_psn(&self, out_of_order: u64, regressions: u64) {
        if let Ok(mut g) = self.snap.lock() {
            g.psn_out_of_order = Some(out_of_order);
            g.psn_regressions = Some(regressions);
        }
    }

    pub fn snapshot(&self) -> SwitchSnapshot {
        self.snap.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// The watchdog's view of one (port, priority): stormed or not, and a storm declared.
    pub fn watchdog(&self, port: &str, priority: u8, stormed: bool, new_storm: bool) {
        let l = self.with(&[("port", port), ("priority", &priority.to_string())]);
        self.wd_stormed.get_or_create(&l).set(i64::from(stormed));
        let c = self.wd_storms.get_or_create(&l);
        if new_storm {
            c.inc();
        }
    }

    /// A queue held paused (or released) on the switch, `seconds` after the frame's packet-in.
    pub fn pfc_paused(&self, port: &str, priority: u8, paused: bool, seconds: f64) {
        let l = self.with(&[("port", port), ("priority", &priority.to_string())]);
        self.pfc_paused.get_or_create(&l).set(i64::from(paused));
        self.pfc_apply.get_or_create(&self.sw()).observe(seconds);
    }

    pub fn tuner_move(&self, port: &str, queue: u8, reason: &str) {
        self.tuner_moves
            .get_or_create(&self.with(&[
                ("port", port),
                ("queue", &queue.to_string()),
                ("reason", reason),
            ]))
            .inc();
    }

    /// The plugin's state (`running` means primary with the pipeline synced).
    pub fn state(&self, state: &str, all: &[&str]) {
        for s in all {
            self.state
                .get_or_create(&self.with(&[("state", s)]))
                .set(i64::from(*s == state));
        }
        self.primary
            .get_or_create(&self.sw())
            .set(i64::from(state == "running"));
    }

    pub fn session(&self) {
        self.sessions.get_or_create(&self.sw()).inc();
    }

    pub fn batch(&self, seconds: f64, ok: u64, failed: u64) {
        self.batch.get_or_create(&self.sw()).observe(seconds);
        self.keys
            .get_or_create(&self.with(&[("result", "ok")]))
            .inc_by(ok);
        self.keys
            .get_or_create(&self.with(&[("result", "failed")]))
            .inc_by(failed);
    }

    pub fn backlog(&self, keys: u64) {
        self.backlog
            .get_or_create(&self.sw())
            .set(i64::try_from(keys).unwrap_or(i64::MAX));
    }

    /// Stream events missed by a slow loop (mostly postcards when they flow).
    pub fn postcards_lagged(&self, n: u64) {
        self.postcards
            .get_or_create(&self.with(&[("result", "lagged")]))
            .inc_by(n);
    }

    pub fn postcard(&self, result: &str) {
        self.postcards
            .get_or_create(&self.with(&[("result", result)]))
            .inc();
    }

    pub fn counter_poll(&self, seconds: f64) {
        self.poll.get_or_create(&self.sw()).observe(seconds);
    }
}

/// `weft_reconvergence_duration_seconds`'s buckets: (first upper edge, factor, count), 1 ms to
/// ~16 s. The alert rules compare with an edge of these.
pub const RECONVERGENCE_BUCKETS: (f64, f64, u16) = (0.001, 2.0, 15);

/// `weft run`'s registry.
#[derive(Debug)]
pub struct ControllerMetrics {
    registry: Arc<Registry>,
    reconvergence: Histogram,
    reconvergences: Counter,
    events: Family<Labels, Counter>,
    writes: Family<Labels, Counter>,
    failures: Family<Labels, Counter>,
    reachable: Family<Labels, Gauge>,
    converged: Family<Labels, Gauge>,
    links: Gauge,
    links_down: Gauge,
    links_suppressed: Gauge,
}

impl ControllerMetrics {
    /// A registry with a series per switch from the start.
    pub fn new<'a>(switches: impl IntoIterator<Item = &'a str>) -> Self {
        let mut r = Registry::default();
        let m = ControllerMetrics {
            registry: Arc::new(Registry::default()),
            reconvergence: Histogram::new(exponential_buckets(
                RECONVERGENCE_BUCKETS.0,
                RECONVERGENCE_BUCKETS.1,
                RECONVERGENCE_BUCKETS.2,
            )),
            reconvergences: Counter::default(),
            events: Family::default(),
            writes: Family::default(),
            failures: Family::default(),
            reachable: Family::default(),
            converged: Family::default(),
            links: Gauge::default(),
            links_down: Gauge::default(),
            links_suppressed: Gauge::default(),
        };
        register(
            &mut r,
            "weft_reconvergence_duration_seconds",
            &m.reconvergence,
        );
        register(&mut r, "weft_reconvergences_total", &m.reconvergences);
        register(&mut r, "weft_controller_port_events_total", &m.events);
        register(&mut r, "weft_controller_writes_total", &m.writes);
        register(&mut r, "weft_controller_write_failures_total", &m.failures);
        register(&mut r, "weft_controller_switch_reachable", &m.reachable);
        register(&mut r, "weft_controller_switch_converged", &m.converged);
        register(&mut r, "weft_controller_links", &m.links);
        register(&mut r, "weft_controller_links_down", &m.links_down);
        register(
            &mut r,
            "weft_controller_links_suppressed",
            &m.links_suppressed,
        );
        for s in switches {
            let l = labels(&[("switch", s)]);
            let _ = m.events.get_or_create(&l);
            let _ = m.writes.get_or_create(&l);
            let _ = m.failures.get_or_create(&l);
            let _ = m.reachable.get_or_create(&l);
            let _ = m.converged.get_or_create(&l);
        }
        ControllerMetrics {
            registry: Arc::new(r),
            ..m
        }
    }

    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    pub fn reconverged(&self, total_ms: f64) {
        self.reconvergences.inc();
        self.reconvergence.observe(total_ms / 1000.0);
    }

    pub fn port_event(&self, switch: &str) {
        self.events
            .get_or_create(&labels(&[("switch", switch)]))
            .inc();
    }

    pub fn written(&self, switch: &str, entries: u64, failed: u64) {
        let l = labels(&[("switch", switch)]);
        self.writes.get_or_create(&l).inc_by(entries);
        self.failures.get_or_create(&l).inc_by(failed);
    }

    pub fn switch_state(&self, switch: &str, reachable: bool, converged: bool) {
        let l = labels(&[("switch", switch)]);
        self.reachable.get_or_create(&l).set(i64::from(reachable));
        self.converged.get_or_create(&l).set(i64::from(converged));
    }

    pub fn links(&self, total: usize, down: usize, suppressed: usize) {
        let g = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.links.set(g(total));
        self.links_down.set(g(down));
        self.links_suppressed.set(g(suppressed));
    }
}

/// The OpenMetrics text of a registry.
pub fn encode(registry: &Registry) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut s, registry);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// `# TYPE name kind` lines and every sample's (name, label names).
    type Samples = Vec<(String, BTreeSet<String>)>;

    fn parse(text: &str) -> (BTreeMap<String, String>, Samples) {
        let mut types = BTreeMap::new();
        let mut samples = Vec::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let (n, k) = rest.split_once(' ').expect("TYPE line");
                types.insert(n.to_string(), k.to_string());
            } else if !l.starts_with('#') && !l.is_empty() {
                let name_end = l.find(['{', ' ']).expect("sample");
                let name = l[..name_end].to_string();
                let mut keys = BTreeSet::new();
                if let Some(open) = l.find('{') {
                    let close = l.find('}').expect("closing brace");
                    for kv in l[open + 1..close].split(',') {
                        let (k, _) = kv.split_once('=').expect("label");
                        keys.insert(k.to_string());
                    }
                }
                samples.push((name, keys));
            }
        }
        (types, samples)
    }

    /// The family a sample belongs to (`_total`, `_bucket`, `_sum`, `_count` suffixes).
    fn family_of<'a>(families: &'a [FamilyDoc], sample: &str) -> Option<&'a FamilyDoc> {
        families.iter().find(|f| {
            sample == f.name
                || (f.kind == "histogram"
                    && ["_bucket", "_sum", "_count", "_created"]
                        .iter()
                        .any(|s| sample.strip_suffix(s) == Some(f.name)))
        })
    }

    fn check(families: &[FamilyDoc], text: &str) {
        let (types, samples) = parse(text);
        assert!(
            text.ends_with("# EOF\n"),
            "OpenMetrics text ends with # EOF"
        );
        for f in families {
            let base = if f.kind == "counter" {
                f.name
                    .strip_suffix("_total")
                    .expect("counters end in _total")
            } else {
                f.name
            };
            assert_eq!(
                types.get(base).map(String::as_str),
                Some(f.kind),
                "{} should be a {} in:\n{text}",
                f.name,
                f.kind
            );
            assert!(f.name.starts_with("weft_"), "{}", f.name);
            let seen: Vec<_> = samples
                .iter()
                .filter(|(n, _)| family_of(families, n).is_some_and(|g| g.name == f.name))
                .collect();
            assert!(!seen.is_empty(), "no sample of {} in:\n{text}", f.name);
            for (n, keys) in seen {
                let want: BTreeSet<String> = f.labels.iter().map(|s| s.to_string()).collect();
                let mut got = keys.clone();
                got.remove("le");
                assert_eq!(got, want, "labels of {n}");
            }
        }
        for (n, _) in &samples {
            assert!(
                family_of(families, n).is_some(),
                "{n} is served but not documented"
            );
        }
    }

    #[test]
    fn plugin_families_have_the_documented_names_types_and_labels() {
        let m = PluginMetrics::new("leaf1");
        let mut s = SwitchSnapshot::default();
        s.ports.insert(
            "Ethernet0".into(),
            PortSample {
                rx_packets: Some(10),
                rx_bytes: Some(1000),
                tx_packets: Some(9),
                tx_bytes: Some(900),
                pfc: [(Some(1), Some(2)); 8],
            },
        );
        s.queues.insert(
            ("Ethernet0".into(), 3),
            QueueSample {
                packets: Some(5),
                bytes: Some(500),
                ecn_marked: Some(4),
                trimmed: Some(8),
            },
        );
        s.drops.insert("NO_ROUTE".into(), (7, 700));
        s.members.insert(5, (3, 300));
        s.poll_time_ms = Some(1_796_000_000_123);
        m.set_counters(s);
        m.pfc_paused("Ethernet0", 3, true, 0.002);
        m.set_depth(
            "Ethernet0",
            &[4, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            2,
        );
        m.set_psn(6, 1);
        m.watchdog("Ethernet0", 3, true, true);
        m.tuner_move("Ethernet0", 3, "marking-late");
        m.state("running", &["starting", "running"]);
        m.session();
        m.batch(0.002, 10, 1);
        m.backlog(3);
        m.counter_poll(0.01);
        let text = encode(&m.registry());
        check(PLUGIN_FAMILIES, &text);
        // Values: a few spot checks, with the labels Prometheus users will write in queries.
        for line in [
            r#"weft_queue_ecn_marked_packets_total{switch="leaf1",port="Ethernet0",queue="3"} 4"#,
            r#"weft_queue_trimmed_packets_total{switch="leaf1",port="Ethernet0",queue="3"} 8"#,
            r#"weft_drops_packets_total{switch="leaf1",reason="no_route"} 7"#,
            r#"weft_pfc_pause_rx_frames_total{switch="leaf1",port="Ethernet0",priority="3"} 1"#,
            r#"weft_multipath_member_packets_total{switch="leaf1",nexthop="0x5"} 3"#,
            r#"weft_queue_depth_packets_bucket{le="3.0",switch="leaf1",port="Ethernet0"} 4"#,
            r#"weft_queue_depth_packets_bucket{le="+Inf",switch="leaf1",port="Ethernet0"} 7"#,
            r#"weft_queue_depth_packets_count{switch="leaf1",port="Ethernet0"} 7"#,
            r#"weft_p4rt_primary{switch="leaf1"} 1"#,
            r#"weft_plugin_keys_total{switch="leaf1",result="failed"} 1"#,
            r#"weft_pfc_watchdog_storms_total{switch="leaf1",port="Ethernet0",priority="3"} 1"#,
            r#"weft_counters_poll_timestamp_seconds{switch="leaf1"} 1796000000.123"#,
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
    }

    #[test]
    fn a_switch_restart_is_a_counter_reset_not_a_negative_delta() {
        let m = PluginMetrics::new("s");
        let snap = |v: u64| {
            let mut s = SwitchSnapshot::default();
            s.queues.insert(
                ("Ethernet0".into(), 3),
                QueueSample {
                    ecn_marked: Some(v),
                    ..Default::default()
                },
            );
            s
        };
        m.set_counters(snap(100));
        m.set_counters(snap(2));
        let text = encode(&m.registry());
        assert!(text.contains(
            r#"weft_queue_ecn_marked_packets_total{switch="s",port="Ethernet0",queue="3"} 2"#
        ));
    }

    #[test]
    fn controller_families_have_the_documented_names_types_and_labels() {
        let m = ControllerMetrics::new(["leaf1", "spine1"]);
        m.reconverged(12.5);
        m.port_event("leaf1");
        m.written("leaf1", 4, 1);
        m.switch_state("leaf1", true, true);
        m.switch_state("spine1", false, false);
        m.links(8, 1, 0);
        let text = encode(&m.registry());
        check(CONTROLLER_FAMILIES, &text);
        for line in [
            "weft_reconvergence_duration_seconds_count 1",
            r#"weft_reconvergence_duration_seconds_bucket{le="0.016"} 1"#,
            r#"weft_reconvergence_duration_seconds_bucket{le="0.008"} 0"#,
            "weft_reconvergences_total 1",
            r#"weft_controller_writes_total{switch="leaf1"} 4"#,
            r#"weft_controller_switch_reachable{switch="spine1"} 0"#,
            "weft_controller_links_down 1",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
    }
}
