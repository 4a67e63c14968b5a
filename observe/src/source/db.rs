//! A window's samples from every switch's own DBs, at fabric scale: one connection per
//! redis-server (switches that share a server by `?db_base=` share it), one round trip per
//! server per sample, and per switch one server-side script that reads only what the rules
//! use and returns it packed in one string.
//!
//! What is read, per port: packets and octets in and out, PAUSE received and sent on the
//! lossless priorities, the queue-depth histogram; per queue of a traffic class: departures,
//! CE marks and the watchdog's fields; the switch row (drops, PSN anomalies, the poll's time);
//! STATE_DB's watchdog and drift rows and the plugin's status row. PAUSE on a priority no class
//! is lossless on is not read (no port honours it), nor the queues no class uses.
//!
//! A switch is left out of a sample, and named with why, when its DB does not answer, holds no
//! counters, or its counters are not current: no live plugin (no status row, or not running),
//! or the last poll older than three of its intervals (at least 3 s).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use redis::aio::MultiplexedConnection;
use weft_diagnose::{Drift, PortSample, QueueSample, SwitchSample};
use weft_sonic_db::{FieldValues, SonicDb, SonicDbId};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{self as sc, HIST_BUCKETS, SwitchCounters};
use weft_sonic_schema::snapshot as snap;
use weft_sonic_schema::state::{PfcWdState, PluginStatus, WdStatus};
use weft_topology::Topology;

use super::Unjudged;
use crate::read::ReadError;

/// Reads one switch: ARGV = COUNTERS_DB, STATE_DB, the snapshot's key (empty: read the rows),
/// its stamp field, the switch row's poll-time field, #port fields, port fields…, #queues, queues…, #queue fields, queue fields…, ports….
/// Returns {packed values (`,`-separated, empty for a field the row lacks, port by port: its
/// fields, then each queue's; empty when the snapshot was taken), the switch row, {watchdog
/// key, fields}…, {drift key, state}…, the status row, the snapshot's fields (empty when the
/// rows were read)}. The snapshot is taken only when its stamp is the switch row's poll time:
/// one hash instead of one per port and queue, the servers' work at fabric scale.
const READ: &str = r#"
local i = 1
local function arg() local v = ARGV[i]; i = i + 1; return v end
local cdb, sdb, snapkey, stampf, pollf = arg(), arg(), arg(), arg(), arg()
local pf, qs, qf = {}, {}, {}
for _ = 1, tonumber(arg()) do pf[#pf + 1] = arg() end
for _ = 1, tonumber(arg()) do qs[#qs + 1] = arg() end
for _ = 1, tonumber(arg()) do qf[#qf + 1] = arg() end
local out = {}
redis.call('SELECT', cdb)
local sw = redis.call('HGETALL', 'COUNTERS:WEFT_SWITCH')
local snap = {}
if snapkey ~= '' then
  local stamp = redis.call('HGET', snapkey, stampf)
  local polled = redis.call('HGET', 'COUNTERS:WEFT_SWITCH', pollf)
  if stamp and polled and stamp == polled then
    snap = redis.call('HGETALL', snapkey)
  end
end
if #snap == 0 then
  while i <= #ARGV do
    local port = arg()
    local v = redis.call('HMGET', 'COUNTERS:' .. port, unpack(pf))
    for j = 1, #pf do out[#out + 1] = v[j] or '' end
    for _, q in ipairs(qs) do
      local w = redis.call('HMGET', 'COUNTERS:' .. port .. ':' .. q, unpack(qf))
      for j = 1, #qf do out[#out + 1] = w[j] or '' end
    end
  end
end
redis.call('SELECT', sdb)
local wd = {}
for _, k in ipairs(redis.call('KEYS', 'PFC_WD_STATE|*')) do
  wd[#wd + 1] = k
  wd[#wd + 1] = redis.call('HGETALL', k)
end
local dr = {}
for _, k in ipairs(redis.call('KEYS', 'WEFT_DRIFT|*')) do
  dr[#dr + 1] = k
  dr[#dr + 1] = redis.call('HGET', k, 'state') or ''
end
local st = redis.call('HGETALL', 'WEFT_PLUGIN|status')
return {table.concat(out, ','), sw, wd, dr, st, snap}
"#;

/// A switch's ports in the intent's order, where each is in it, and its queues' keys, built
/// once: every sample of the switch decodes against them (5,120 switches a second at k=64).
#[derive(Debug, Clone, Default)]
pub struct SwitchPorts {
    pub names: Vec<String>,
    index: HashMap<String, usize>,
    /// Port positions in name order (a sample's maps are built sorted, in one pass).
    by_name: Vec<usize>,
    /// `port:q` per port and class queue (`port * queues + k`), and their positions in name
    /// order.
    queue_keys: Vec<String>,
    queues_by_name: Vec<usize>,
}

impl SwitchPorts {
    /// `queues`: the class queues read ([`Spec::queues`]).
    pub fn new(names: Vec<String>, queues: &[u8]) -> SwitchPorts {
        let index = names
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), i))
            .collect();
        let mut by_name: Vec<usize> = (0..names.len()).collect();
        by_name.sort_by(|a, b| names[*a].cmp(&names[*b]));
        let queue_keys: Vec<String> = names
            .iter()
            .flat_map(|p| queues.iter().map(move |q| format!("{p}:{q}")))
            .collect();
        let mut queues_by_name: Vec<usize> = (0..queue_keys.len()).collect();
        queues_by_name.sort_by(|a, b| queue_keys[*a].cmp(&queue_keys[*b]));
        SwitchPorts {
            names,
            index,
            by_name,
            queue_keys,
            queues_by_name,
        }
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
}

/// What is read of each switch, from the intent.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Lossless priorities (PFC is read on them).
    pub lossless: Vec<u8>,
    /// Queues of the traffic classes.
    pub queues: Vec<u8>,
    port_fields: Vec<String>,
    queue_fields: Vec<String>,
    /// Each field read: its place among the port fields and among the queue fields (a
    /// snapshot's headers are mapped name by name, every switch, every sample).
    slots: HashMap<String, (Option<usize>, Option<usize>)>,
}

/// Port fields before the PFC ones: rx packets, tx packets, rx octets, tx octets.
const PORT_HEAD: usize = 4;
const QUEUE_FIELDS: usize = 5;

impl Spec {
    pub fn of(t: &Topology) -> Spec {
        let mut lossless: Vec<u8> = t
            .qos
            .classes
            .iter()
            .filter(|c| c.lossless && t.qos.pfc_enabled)
            .map(|c| c.traffic_class)
            .collect();
        lossless.sort_unstable();
        lossless.dedup();
        let mut queues: Vec<u8> = t.qos.classes.iter().map(|c| c.traffic_class).collect();
        queues.sort_unstable();
        queues.dedup();
        Spec::new(lossless, queues)
    }

    pub fn new(lossless: Vec<u8>, queues: Vec<u8>) -> Spec {
        let mut port_fields: Vec<String> = [sc::RX_PKTS, sc::TX_PKTS, sc::RX_OCTETS, sc::TX_OCTETS]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for p in &lossless {
            let [rx, tx, ..] = sc::pfc_names(usize::from(*p));
            port_fields.push(rx);
            port_fields.push(tx);
        }
        port_fields.extend((0..HIST_BUCKETS).map(sc::bucket_name));
        port_fields.push(sc::HIST_SHIFT.to_string());
        port_fields.push(sc::PSN_OOO.to_string());
        port_fields.push(sc::PSN_REGRESSION.to_string());
        let queue_fields: Vec<String> = [
            sc::Q_PKTS,
            sc::Q_ECN,
            sc::WD_STATUS,
            sc::WD_DETECTED,
            sc::Q_TRIM,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut slots: HashMap<String, (Option<usize>, Option<usize>)> = HashMap::new();
        for (i, f) in port_fields.iter().enumerate() {
            slots.entry(f.clone()).or_default().0.get_or_insert(i);
        }
        for (i, f) in queue_fields.iter().enumerate() {
            slots.entry(f.clone()).or_default().1.get_or_insert(i);
        }
        Spec {
            lossless,
            queues,
            port_fields,
            queue_fields,
            slots,
        }
    }

    /// Values per port in a packed reply.
    fn per_port(&self) -> usize {
        self.port_fields.len() + self.queues.len() * QUEUE_FIELDS
    }

    /// The script's arguments for a switch of `ports` with DBs `cdb`, `sdb`; `snapshot`: take
    /// the switch's snapshot when it is current.
    fn args(&self, cdb: u32, sdb: u32, snapshot: bool, ports: &[String]) -> Vec<String> {
        let mut a = vec![
            cdb.to_string(),
            sdb.to_string(),
            if snapshot { snap::KEY } else { "" }.to_string(),
            snap::STAMP.to_string(),
            sc::POLL_TIME.to_string(),
            self.port_fields.len().to_string(),
        ];
        a.extend(self.port_fields.iter().cloned());
        a.push(self.queues.len().to_string());
        a.extend(self.queues.iter().map(|q| q.to_string()));
        a.push(self.queue_fields.len().to_string());
        a.extend(self.queue_fields.iter().cloned());
        a.extend(ports.iter().cloned());
        a
    }

    /// The values of a switch of `ports` from its snapshot's fields (`WEFT_COUNTERS_SNAPSHOT`
    /// field, packed rows; the stamp is not rows), laid out as the script's packed values of
    /// its rows are. Fields are taken in name order, a later one's value winning, as the rows'
    /// writers' would; a row of no port or queue read here is passed over.
    pub fn snapshot_values<'a>(
        &self,
        sp: &SwitchPorts,
        fields: &[(&str, &'a str)],
    ) -> Vec<Option<Cow<'a, str>>> {
        let per = self.per_port();
        let npf = self.port_fields.len();
        let ports = &sp.names;
        let mut out: Vec<Option<Cow<'a, str>>> = vec![None; ports.len() * per];
        let mut fields: Vec<&(&str, &'a str)> =
            fields.iter().filter(|(f, _)| *f != snap::STAMP).collect();
        fields.sort_by_key(|(f, _)| *f);
        // Per column of the current header: where its value goes (port or queue field).
        let mut port_cols: Vec<Option<usize>> = Vec::new();
        let mut queue_cols: Vec<Option<usize>> = Vec::new();
        let mut ends: Vec<usize> = Vec::new();
        // Rows come port by port: the last port found is tried before the map.
        let mut last = 0usize;
        let mut find = |name: &str| -> Option<usize> {
            let hit = [last, last + 1]
                .into_iter()
                .find(|i| ports.get(*i).is_some_and(|p| p == name))
                .or_else(|| sp.find(name));
            if let Some(i) = hit {
                last = i;
            }
            hit
        };
        for (_, packed) in fields {
            for line in snap::raw_lines(packed) {
                let (key, values) = match line {
                    snap::RawLine::Header(h) => {
                        let names = h.split(',').map(snap::unescape);
                        (port_cols, queue_cols) = names
                            .map(|n| self.slots.get(n.as_ref()).copied().unwrap_or_default())
                            .unzip();
                        continue;
                    }
                    snap::RawLine::Row(k, v) => (snap::unescape(k), v),
                };
                let slot = match key.rsplit_once(':') {
                    Some((port, q)) => q
                        .parse::<u8>()
                        .ok()
                        .and_then(|q| self.queues.iter().position(|x| *x == q))
                        .and_then(|k| {
                            let i = find(port)?;
                            Some((i * per + npf + k * QUEUE_FIELDS, &queue_cols))
                        }),
                    None => find(&key).map(|i| (i * per, &port_cols)),
                };
                let Some((base, cols)) = slot else { continue };
                // One pass over the row's bytes: where its values end, and whether any is
                // escaped (rows are short values; a search call per value cost more).
                ends.clear();
                let mut escaped = false;
                for (at, b) in values.bytes().enumerate() {
                    match b {
                        b',' => ends.push(at),
                        b'%' => escaped = true,
                        _ => {}
                    }
                }
                ends.push(values.len());
                // A row with another count of values than its header is not taken.
                if ends.len() != cols.len() {
                    continue;
                }
                let mut start = 0;
                for (end, c) in ends.iter().zip(cols.iter()) {
                    if let (Some(j), true) = (c, *end > start) {
                        let v = &values[start..*end];
                        out[base + j] = Some(if escaped {
                            snap::unescape(v)
                        } else {
                            Cow::Borrowed(v)
                        });
                    }
                    start = end + 1;
                }
            }
        }
        out
    }

    /// The packed values of one port's rows (`port`, and `port:q` per queue), as the script
    /// returns them: the in-process equivalent of the script, for rows already in hand.
    /// Rows of one key merge, the later fields winning (as `HSET`s of them would).
    pub fn values_of(
        &self,
        rows: &HashMap<&str, Vec<&FieldValues>>,
        port: &str,
        out: &mut Vec<Option<String>>,
    ) {
        let pick = |row: Option<&Vec<&FieldValues>>, f: &str| -> Option<String> {
            row?.iter()
                .rev()
                .find_map(|r| r.iter().rev().find(|(n, _)| n == f).map(|(_, v)| v.clone()))
        };
        let pr = rows.get(port);
        out.extend(self.port_fields.iter().map(|f| pick(pr, f)));
        for q in &self.queues {
            let qr = rows.get(format!("{port}:{q}").as_str());
            out.extend(self.queue_fields.iter().map(|f| pick(qr, f)));
        }
    }
}

fn num(v: Option<&str>) -> Option<u64> {
    let s = v.filter(|s| !s.is_empty())?;
    // Writers write bare digits; a padded value is still read.
    s.parse().ok().or_else(|| s.trim().parse().ok())
}

/// One switch's read: the packed values (`ports` in order), the switch row, STATE_DB's rows.
pub struct SwitchRows<'a> {
    pub values: Vec<Option<Cow<'a, str>>>,
    pub switch: FieldValues,
    pub wd: Vec<(String, FieldValues)>,
    pub drift: Vec<(String, String)>,
    pub status: Option<PluginStatus>,
}

/// Whether switch `name`'s counters are current at `now_ms` (`Err`: unjudged, with why).
pub fn judge(name: &str, r: &SwitchRows<'_>, now_ms: u64) -> Result<(), Unjudged> {
    let un = |data: &'static str, detail: String| Unjudged {
        switch: name.to_string(),
        data,
        detail,
    };
    if r.values.iter().all(Option::is_none) && r.switch.is_empty() {
        return Err(un(
            "no-data",
            "no counters in its DB (no plugin has written any)".into(),
        ));
    }
    match crate::read::judge_counters((), Some(&r.switch), r.status.as_ref(), now_ms)
        .unknown(name, "counters")
    {
        Some(u) => Err(u),
        None => Ok(()),
    }
}

/// The rules' sample of one switch of ports `sp` from what was read.
pub fn decode(spec: &Spec, sp: &SwitchPorts, r: &SwitchRows<'_>) -> SwitchSample {
    let mut s = SwitchSample::default();
    let per = spec.per_port();
    let nl = spec.lossless.len();
    let nq = spec.queues.len();
    let mut ports: Vec<Option<PortSample>> = vec![None; sp.names.len()];
    let mut queues: Vec<Option<QueueSample>> = vec![None; sp.queue_keys.len()];
    for i in 0..sp.names.len() {
        let Some(v) = r.values.get(i * per..(i + 1) * per) else {
            break;
        };
        let pf = &v[..spec.port_fields.len()];
        if pf.iter().any(Option::is_some) {
            let n = |j: usize| num(pf[j].as_deref()).unwrap_or(0);
            let mut ps = PortSample {
                rx_packets: n(0),
                tx_packets: n(1),
                rx_bytes: n(2),
                tx_bytes: n(3),
                ..Default::default()
            };
            for (k, p) in spec.lossless.iter().enumerate() {
                let p = usize::from(*p).min(7);
                ps.pfc_rx_pause[p] = n(PORT_HEAD + 2 * k);
                ps.pfc_tx_pause[p] = n(PORT_HEAD + 2 * k + 1);
            }
            let h0 = PORT_HEAD + 2 * nl;
            let mut hist = [None; HIST_BUCKETS];
            for (b, h) in hist.iter_mut().enumerate() {
                *h = num(pf[h0 + b].as_deref());
            }
            if hist.iter().all(Option::is_some) {
                ps.depth_histogram = hist.into_iter().flatten().collect();
                ps.histogram_shift = n(h0 + HIST_BUCKETS).min(32) as u8;
            }
            let psn = h0 + HIST_BUCKETS + 1;
            ps.psn_out_of_order = num(pf[psn].as_deref());
            ps.psn_regressions = num(pf[psn + 1].as_deref());
            ports[i] = Some(ps);
        }
        for k in 0..nq {
            let qv = &v[spec.port_fields.len() + k * QUEUE_FIELDS..][..QUEUE_FIELDS];
            let (pk, ecn, det, trimmed) = (
                num(qv[0].as_deref()).unwrap_or(0),
                num(qv[1].as_deref()).unwrap_or(0),
                num(qv[3].as_deref()).unwrap_or(0),
                num(qv[4].as_deref()).unwrap_or(0),
            );
            // A queue that never carried anything says nothing (as `diagnose::switch_sample`).
            if pk == 0 && ecn == 0 && det == 0 && trimmed == 0 {
                continue;
            }
            queues[i * nq + k] = Some(QueueSample {
                packets: pk,
                ecn_marked: ecn,
                trimmed,
                wd_stormed: qv[2].as_deref() == Some(WdStatus::Stormed.as_str()),
                wd_detected: det,
            });
        }
    }
    // In name order, so each map is built in one pass rather than by inserts.
    s.ports = sp
        .by_name
        .iter()
        .filter_map(|i| Some((sp.names[*i].clone(), ports[*i].take()?)))
        .collect();
    s.queues = sp
        .queues_by_name
        .iter()
        .filter_map(|i| Some((sp.queue_keys[*i].clone(), queues[*i].take()?)))
        .collect();
    if let Ok(sw) = SwitchCounters::from_fields(sc::SWITCH_KEY, &r.switch) {
        s.drops = sw.drops.iter().map(|(k, (p, _))| (k.clone(), *p)).collect();
        s.psn_out_of_order = sw.psn_out_of_order.unwrap_or(0);
        s.psn_regressions = sw.psn_regressions.unwrap_or(0);
        s.poll_ms = sw.poll_time_ms;
    }
    // STATE_DB PFC_WD_STATE is the watchdog's own record; it wins over the COUNTERS copy.
    for (k, f) in &r.wd {
        if let Ok(w) = PfcWdState::from_fields(k, f) {
            let q = s
                .queues
                .entry(format!("{}:{}", w.port, w.priority))
                .or_default();
            q.wd_stormed = w.status == WdStatus::Stormed;
            q.wd_detected = q.wd_detected.max(w.detected);
        }
    }
    for (key, state) in &r.drift {
        s.drift.push(Drift {
            key: key.clone(),
            state: if state.is_empty() {
                "differs".into()
            } else {
                state.clone()
            },
        });
    }
    s
}

/// One switch's sample from its rows already in hand (COUNTERS rows by key, STATE_DB's
/// watchdog and drift rows, the status row), judged at `now_ms` as a read of its DB would be:
/// what [`Reader`] returns for a switch whose DB holds exactly these rows. `ports`: the switch's
/// ports, built once by the caller ([`SwitchPorts::new`] with [`Spec::queues`]).
#[allow(clippy::too_many_arguments)]
pub fn sample_of_rows(
    spec: &Spec,
    name: &str,
    ports: &SwitchPorts,
    counters: &[(String, FieldValues)],
    wd: Vec<(String, FieldValues)>,
    drift: Vec<(String, String)>,
    status: Option<PluginStatus>,
    now_ms: u64,
) -> Result<SwitchSample, Unjudged> {
    let mut by: HashMap<&str, Vec<&FieldValues>> = HashMap::new();
    for (k, f) in counters {
        by.entry(k.as_str()).or_default().push(f);
    }
    let mut owned = Vec::with_capacity(ports.names.len() * spec.per_port());
    for p in &ports.names {
        spec.values_of(&by, p, &mut owned);
    }
    let rows = SwitchRows {
        values: owned.into_iter().map(|v| v.map(Cow::Owned)).collect(),
        switch: by
            .get(sc::SWITCH_KEY)
            .map(|v| v.iter().flat_map(|f| f.iter().cloned()).collect())
            .unwrap_or_default(),
        wd,
        drift,
        status,
    };
    judge(name, &rows, now_ms)?;
    Ok(decode(spec, ports, &rows))
}

/// A redis-server and the switches on it: (switch index, COUNTERS_DB, STATE_DB).
struct Server {
    endpoint: String,
    db: SonicDb,
    conn: Option<MultiplexedConnection>,
    switches: Vec<(usize, u32, u32)>,
    /// Every switch's read, encoded once (the arguments never change between samples).
    pipe: Arc<redis::Pipeline>,
}

/// One sample of every switch, and the switches it could not judge.
#[derive(Debug, Clone, Default)]
pub struct Sweep {
    pub switches: BTreeMap<String, SwitchSample>,
    pub unjudged: Vec<Unjudged>,
    /// Bytes of replies read.
    pub bytes: usize,
    /// Switches read from their snapshot (the others' rows were read).
    pub from_snapshot: usize,
}

/// Reads every switch of a fabric, sample after sample, over connections kept open.
pub struct Reader {
    spec: Arc<Spec>,
    names: Arc<Vec<String>>,
    ports: Arc<Vec<SwitchPorts>>,
    servers: Vec<Server>,
    /// Switches whose endpoint could not even be parsed.
    bad: Vec<Unjudged>,
    /// Whether a switch's current snapshot is taken instead of its rows.
    snapshots: bool,
}

fn flat_pairs(v: &Value) -> FieldValues {
    let Value::Array(a) = v else {
        return Vec::new();
    };
    a.chunks(2)
        .filter_map(|c| match c {
            [k, v] => Some((text(k), text(v))),
            _ => None,
        })
        .collect()
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        _ => String::new(),
    }
}

/// A switch's script reply, decoded and judged.
fn switch_of(
    spec: &Spec,
    name: &str,
    ports: &SwitchPorts,
    reply: &Value,
    now_ms: u64,
) -> Result<SwitchSample, Unjudged> {
    let Value::Array(parts) = reply else {
        return Err(Unjudged {
            switch: name.to_string(),
            data: "unreachable",
            detail: format!("unexpected reply to the read script: {reply:?}"),
        });
    };
    let packed = match parts.first() {
        Some(Value::BulkString(b)) => std::str::from_utf8(b).unwrap_or(""),
        _ => "",
    };
    let snapshot: Vec<(&str, &str)> = match parts.get(5) {
        Some(Value::Array(a)) => a
            .chunks(2)
            .filter_map(|c| match c {
                [Value::BulkString(k), Value::BulkString(v)] => Some((
                    std::str::from_utf8(k).unwrap_or(""),
                    std::str::from_utf8(v).unwrap_or(""),
                )),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let values: Vec<Option<Cow<'_, str>>> = if !snapshot.is_empty() {
        spec.snapshot_values(ports, &snapshot)
    } else if packed.is_empty() {
        Vec::new()
    } else {
        packed
            .split(',')
            .map(|v| (!v.is_empty()).then_some(Cow::Borrowed(v)))
            .collect()
    };
    let pairs = |i: usize| -> Vec<(String, Value)> {
        match parts.get(i) {
            Some(Value::Array(a)) => a
                .chunks(2)
                .filter_map(|c| match c {
                    [k, v] => Some((text(k), v.clone())),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    };
    let strip = |k: &str, t: &str| {
        k.strip_prefix(t)
            .and_then(|r| r.strip_prefix('|'))
            .unwrap_or(k)
            .to_string()
    };
    let status = parts
        .get(4)
        .map(flat_pairs)
        .filter(|f| !f.is_empty())
        .and_then(|f| {
            PluginStatus::from_fields(weft_sonic_schema::state::PLUGIN_STATUS_KEY, &f).ok()
        });
    let rows = SwitchRows {
        values,
        switch: parts.get(1).map(flat_pairs).unwrap_or_default(),
        wd: pairs(2)
            .into_iter()
            .map(|(k, v)| (strip(&k, PfcWdState::TABLE), flat_pairs(&v)))
            .collect(),
        drift: pairs(3)
            .into_iter()
            .map(|(k, v)| {
                (
                    strip(&k, weft_sonic_schema::state::DriftState::TABLE),
                    text(&v),
                )
            })
            .collect(),
        status,
    };
    judge(name, &rows, now_ms)?;
    Ok(decode(spec, ports, &rows))
}

/// Bytes of a reply (what crossed the wire, about).
fn size(v: &Value) -> usize {
    match v {
        Value::BulkString(b) => b.len() + 8,
        Value::Array(a) => a.iter().map(size).sum::<usize>() + 8,
        _ => 8,
    }
}

impl Reader {
    /// Plans the reads of every switch of `t`: the servers its switches are on (connected at
    /// the first sample, again after a failure).
    pub fn new(t: &Topology) -> Reader {
        let mut servers: Vec<Server> = Vec::new();
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        let mut bad = Vec::new();
        for (i, s) in t.switches.iter().enumerate() {
            let parsed = SonicDb::from_endpoint(&s.db)
                .map_err(|e| e.to_string())
                .and_then(|db| {
                    weft_sonic_db::endpoint::db_identity(&s.db)
                        .map(|(srv, _)| (db, srv))
                        .map_err(|e| e.to_string())
                });
            let (db, server) = match parsed {
                Ok(x) => x,
                Err(e) => {
                    bad.push(Unjudged {
                        switch: s.name.clone(),
                        data: "unreachable",
                        detail: e,
                    });
                    continue;
                }
            };
            let k = *by.entry(server.clone()).or_insert_with(|| {
                servers.push(Server {
                    endpoint: server,
                    db: db.clone(),
                    conn: None,
                    switches: Vec::new(),
                    pipe: Arc::default(),
                });
                servers.len() - 1
            });
            servers[k].switches.push((
                i,
                db.db_number(SonicDbId::CountersDb),
                db.db_number(SonicDbId::StateDb),
            ));
        }
        let spec = Spec::of(t);
        let mut r = Reader {
            names: Arc::new(t.switches.iter().map(|s| s.name.clone()).collect()),
            ports: Arc::new(
                t.switches
                    .iter()
                    .map(|s| {
                        let names = s.ports.iter().map(|p| p.name.clone()).collect();
                        SwitchPorts::new(names, &spec.queues)
                    })
                    .collect(),
            ),
            spec: Arc::new(spec),
            servers,
            bad,
            snapshots: true,
        };
        r.plan();
        r
    }

    /// Encodes each server's reads (one script call per switch).
    fn plan(&mut self) {
        let hash = redis::Script::new(READ).get_hash().to_string();
        for srv in &mut self.servers {
            let mut pipe = redis::pipe();
            for (i, c, s) in &srv.switches {
                let args = self
                    .spec
                    .args(*c, *s, self.snapshots, &self.ports[*i].names);
                pipe.cmd("EVALSHA").arg(&hash).arg(0).arg(args);
            }
            srv.pipe = Arc::new(pipe);
        }
    }

    /// A reader of the rows only, never the snapshots (what a reader did before them: the
    /// benches compare the two, the tests prove them the same).
    pub fn rows_only(mut self) -> Reader {
        self.snapshots = false;
        self.plan();
        self
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Servers the switches are on.
    pub fn servers(&self) -> usize {
        self.servers.len()
    }

    /// One sample of every switch, judged current at `now_ms` (Unix ms: the plugins' clock).
    pub async fn sweep(&mut self, now_ms: u64) -> Sweep {
        let script = redis::Script::new(READ);
        let mut jobs = Vec::new();
        for srv in &mut self.servers {
            let conn = match &srv.conn {
                Some(c) => Ok(c.clone()),
                None => connect(&srv.db, &srv.endpoint, &script).await,
            };
            srv.conn = conn.as_ref().ok().cloned();
            let plan: Vec<usize> = srv.switches.iter().map(|(i, ..)| *i).collect();
            let (spec, names, ports) = (self.spec.clone(), self.names.clone(), self.ports.clone());
            let endpoint = srv.endpoint.clone();
            let pipe = srv.pipe.clone();
            jobs.push(tokio::spawn(async move {
                read_server(conn, &endpoint, &pipe, plan, &spec, &names, &ports, now_ms).await
            }));
        }
        let mut out = Sweep {
            unjudged: self.bad.clone(),
            ..Default::default()
        };
        for (srv, j) in self.servers.iter_mut().zip(jobs) {
            match j.await {
                Ok((got, (bytes, snaps), ok)) => {
                    if !ok {
                        srv.conn = None;
                    }
                    out.bytes += bytes;
                    out.from_snapshot += snaps;
                    for r in got {
                        match r {
                            Ok((name, s)) => {
                                out.switches.insert(name, s);
                            }
                            Err(u) => out.unjudged.push(u),
                        }
                    }
                }
                Err(e) => {
                    srv.conn = None;
                    for (i, ..) in &srv.switches {
                        out.unjudged.push(Unjudged {
                            switch: self.names[*i].clone(),
                            data: "unreachable",
                            detail: format!("reading {}: {e}", srv.endpoint),
                        });
                    }
                }
            }
        }
        out.unjudged.sort_by(|a, b| a.switch.cmp(&b.switch));
        out
    }
}

/// A connection to a server with the read script loaded, or why not (its switches are then
/// unreachable for this sample, with that reason, and the next sample connects again).
async fn connect(
    db: &SonicDb,
    endpoint: &str,
    script: &redis::Script,
) -> Result<MultiplexedConnection, ReadError> {
    let mut c = db
        .connect(SonicDbId::CountersDb)
        .await
        .map_err(|e| ReadError::db(endpoint, &e))?;
    let conn = c.raw().clone();
    let mut load = conn.clone();
    script
        .prepare_invoke()
        .load_async(&mut load)
        .await
        .map_err(|e| ReadError::Unreachable {
            db: endpoint.to_string(),
            reason: format!("{endpoint}: loading the read script: {e}"),
        })?;
    Ok(conn)
}

type Read = Vec<Result<(String, SwitchSample), Unjudged>>;

/// One server's switches in one round trip: (each switch's sample or why not, (bytes read,
/// switches read from their snapshot), whether the connection is still good).
#[allow(clippy::too_many_arguments)]
async fn read_server(
    conn: Result<MultiplexedConnection, ReadError>,
    endpoint: &str,
    pipe: &redis::Pipeline,
    plan: Vec<usize>,
    spec: &Spec,
    names: &[String],
    ports: &[SwitchPorts],
    now_ms: u64,
) -> (Read, (usize, usize), bool) {
    let fail = |detail: String| -> Read {
        plan.iter()
            .map(|i| {
                Err(Unjudged {
                    switch: names[*i].clone(),
                    data: "unreachable",
                    detail: detail.clone(),
                })
            })
            .collect()
    };
    let mut conn = match conn {
        Ok(c) => c,
        Err(why) => return (fail(why.to_string()), (0, 0), false),
    };
    let bound = crate::read::READ_TIMEOUT + Duration::from_millis(20 * plan.len() as u64);
    let replies: Vec<Value> = match tokio::time::timeout(bound, pipe.query_async(&mut conn)).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return (fail(format!("{endpoint}: {e}")), (0, 0), false),
        Err(_) => {
            return (
                fail(format!(
                    "{endpoint} did not answer within {}",
                    crate::human_duration(bound)
                )),
                (0, 0),
                false,
            );
        }
    };
    let bytes = replies.iter().map(size).sum();
    let snaps = replies
        .iter()
        .filter(|r| matches!(r, Value::Array(p) if matches!(p.get(5), Some(Value::Array(f)) if !f.is_empty())))
        .count();
    let got = plan
        .iter()
        .zip(&replies)
        .map(|(i, v)| {
            switch_of(spec, &names[*i], &ports[*i], v, now_ms).map(|s| (names[*i].clone(), s))
        })
        .collect();
    (got, (bytes, snaps), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_sonic_schema::counters::{PortCounters, QueueCounters};

    #[test]
    fn a_snapshot_gives_the_values_its_rows_give_whichever_writer_packed_which_rows() {
        let spec = Spec::new(vec![3], vec![0, 3]);
        let ports = vec!["Ethernet0".to_string(), "Ethernet4".to_string()];
        let mut p0 = PortCounters {
            port: "Ethernet0".into(),
            rx_packets: Some(10),
            tx_bytes: Some(4096),
            psn_out_of_order: Some(0),
            ..Default::default()
        };
        p0.pfc[3].rx_pause = Some(7);
        p0.pfc[5].tx_pause = Some(9);
        let hist = PortCounters {
            port: "Ethernet0".into(),
            depth_histogram: Some([3; HIST_BUCKETS]),
            histogram_shift: Some(2),
            ..Default::default()
        };
        let q = |port: &str, queue: u8, ecn: u64| QueueCounters {
            port: port.into(),
            queue,
            packets: Some(100),
            ecn_marked: Some(ecn),
            trimmed: Some(1),
            ..Default::default()
        };
        let poll: Vec<(String, FieldValues)> = vec![
            (p0.key(), p0.to_fields()),
            (q("Ethernet0", 3, 5).key(), q("Ethernet0", 3, 5).to_fields()),
            // A queue no class uses, a port the intent does not have: not read.
            (q("Ethernet0", 6, 1).key(), q("Ethernet0", 6, 1).to_fields()),
            (q("Ethernet9", 3, 1).key(), q("Ethernet9", 3, 1).to_fields()),
            (q("Ethernet4", 0, 2).key(), q("Ethernet4", 0, 2).to_fields()),
        ];
        let hists = vec![(hist.key(), hist.to_fields())];
        let mut by: HashMap<&str, Vec<&FieldValues>> = HashMap::new();
        for (k, f) in poll.iter().chain(&hists) {
            by.entry(k.as_str()).or_default().push(f);
        }
        let mut from_rows = Vec::new();
        for p in &ports {
            spec.values_of(&by, p, &mut from_rows);
        }
        let (mut pp, hp) = (snap::pack(&poll), snap::pack(&hists));
        // A row cut short (a value missing) is not taken, not misplaced.
        pp.push_str("Ethernet4:0,1,2\n");
        let fields = [
            (snap::POLL, pp.as_str()),
            (snap::STAMP, "123"),
            (snap::HIST, hp.as_str()),
        ];
        let from_snapshot: Vec<Option<String>> = spec
            .snapshot_values(&SwitchPorts::new(ports.clone(), &spec.queues), &fields)
            .into_iter()
            .map(|v| v.map(Cow::into_owned))
            .collect();
        assert_eq!(from_snapshot, from_rows);
        assert!(from_rows.iter().filter(|v| v.is_some()).count() > 20);
    }
}
