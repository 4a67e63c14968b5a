//! Reading the plugin's metric families back from Prometheus: a small client of Prometheus's
//! HTTP API (`/api/v1/query`, `/api/v1/query_range`; plain HTTP/1.0 on one connection per
//! query, no TLS: put a local Prometheus or a proxy in front of a remote one), and [`read`],
//! which turns one evaluation of the families into, per switch, the rows the plugin writes to
//! COUNTERS_DB ([`SwitchMetrics::rows`]) and its state, so that whatever judges COUNTERS_DB
//! rows (the live page, the diagnosis rules) judges Prometheus's data alike.
//!
//! The family names are `weft_telemetry`'s ([`FAMILIES`] is checked against its tables in a
//! test): a renamed metric breaks that test, not this reader.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft_sonic_db::FieldValues;
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{PortCounters, QueueCounters, SwitchCounters};
use weft_sonic_schema::state::WdStatus;
use weft_topology::Topology;

use crate::read::SwitchRead;

/// How long one query may take, connection included.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// A switch whose metrics Prometheus last scraped longer ago than this is stale.
pub const STALE_AFTER: Duration = Duration::from_secs(120);
/// Largest answer read (a k=64 fabric's port counters are ~40 MB of JSON).
const MAX_BODY: usize = 512 << 20;

/// The plugin families [`read`] asks for, each with the labels it expects.
pub const FAMILIES: &[(&str, &[&str])] = &[
    ("weft_port_rx_packets_total", &["switch", "port"]),
    ("weft_port_rx_bytes_total", &["switch", "port"]),
    ("weft_port_tx_packets_total", &["switch", "port"]),
    ("weft_port_tx_bytes_total", &["switch", "port"]),
    ("weft_queue_tx_packets_total", &["switch", "port", "queue"]),
    (
        "weft_queue_ecn_marked_packets_total",
        &["switch", "port", "queue"],
    ),
    (
        "weft_pfc_pause_rx_frames_total",
        &["switch", "port", "priority"],
    ),
    (
        "weft_pfc_pause_tx_frames_total",
        &["switch", "port", "priority"],
    ),
    ("weft_drops_packets_total", &["switch", "reason"]),
    ("weft_roce_psn_out_of_order_packets_total", &["switch"]),
    ("weft_roce_psn_regressions_total", &["switch"]),
    ("weft_pfc_watchdog_stormed", &["switch", "port", "priority"]),
    (
        "weft_pfc_watchdog_storms_total",
        &["switch", "port", "priority"],
    ),
    ("weft_plugin_state", &["switch", "state"]),
    ("weft_p4rt_primary", &["switch"]),
];

#[derive(Debug, thiserror::Error)]
pub enum PromError {
    #[error("prometheus URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error("prometheus {url}: {source}")]
    Connect { url: String, source: std::io::Error },
    #[error("prometheus {url} did not answer within {}", crate::human_duration(*after))]
    Timeout { url: String, after: Duration },
    #[error("prometheus {url}: HTTP {status}: {body}")]
    Http {
        url: String,
        status: u16,
        body: String,
    },
    #[error("prometheus {url}: {kind}: {message}")]
    Api {
        url: String,
        kind: String,
        message: String,
    },
    #[error("prometheus {url}: unexpected answer: {reason}")]
    Decode { url: String, reason: String },
}

/// One series at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    /// Seconds since the epoch.
    pub t: f64,
    pub value: f64,
}

/// One series over a range.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<(f64, f64)>,
}

/// A Prometheus server's HTTP API.
#[derive(Debug, Clone)]
pub struct Client {
    url: String,
    host: String,
    port: u16,
    prefix: String,
    timeout: Duration,
}

/// `%XX` for every byte but the unreserved ones.
fn encode(s: &str) -> String {
    let mut o = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

impl Client {
    /// `http://HOST[:PORT][/PREFIX]` (PORT 80 when not given).
    pub fn new(url: &str) -> Result<Client, PromError> {
        let bad = |reason: &str| PromError::Url {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        if url.starts_with("https://") {
            return Err(bad(
                "https is not supported by the built-in reader: use a local Prometheus or a proxy",
            ));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("expected http://HOST:PORT"))?;
        let (hostport, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (
                h.trim_start_matches('[').trim_end_matches(']'),
                p.parse::<u16>()
                    .map_err(|_| bad("the port is not a number"))?,
            ),
            _ => (hostport, 80),
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Client {
            url: url.trim_end_matches('/').to_string(),
            host: host.to_string(),
            port,
            prefix: prefix.to_string(),
            timeout: QUERY_TIMEOUT,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The JSON `data` of `GET {prefix}{path}?{query}`.
    async fn get(&self, path: &str, query: &str) -> Result<serde_json::Value, PromError> {
        let run = async {
            let mut s = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|source| PromError::Connect {
                    url: self.url.clone(),
                    source,
                })?;
            // HTTP/1.0: the server closes after the body, never chunks it.
            let req = format!(
                "GET {}{path}?{query} HTTP/1.0\r\nHost: {}\r\nAccept: application/json\r\n\r\n",
                self.prefix, self.host
            );
            let io = |source| PromError::Connect {
                url: self.url.clone(),
                source,
            };
            s.write_all(req.as_bytes()).await.map_err(io)?;
            let mut buf = Vec::new();
            (&mut s)
                .take(MAX_BODY as u64)
                .read_to_end(&mut buf)
                .await
                .map_err(io)?;
            Ok::<_, PromError>(buf)
        };
        let buf = tokio::time::timeout(self.timeout, run)
            .await
            .map_err(|_| PromError::Timeout {
                url: self.url.clone(),
                after: self.timeout,
            })??;
        self.answer(&buf)
    }

    /// The `data` of an API answer, or its error.
    fn answer(&self, buf: &[u8]) -> Result<serde_json::Value, PromError> {
        let decode = |reason: String| PromError::Decode {
            url: self.url.clone(),
            reason,
        };
        let split = buf
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| decode("no HTTP header".into()))?;
        let head = String::from_utf8_lossy(&buf[..split]);
        let body = &buf[split + 4..];
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| decode(format!("status line {:?}", head.lines().next())))?;
        let v: serde_json::Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) if status == 200 => return Err(decode(e.to_string())),
            Err(_) => {
                return Err(PromError::Http {
                    url: self.url.clone(),
                    status,
                    body: String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
                });
            }
        };
        if v["status"] != "success" {
            return Err(PromError::Api {
                url: self.url.clone(),
                kind: v["errorType"].as_str().unwrap_or("error").to_string(),
                message: v["error"].as_str().unwrap_or("no message").to_string(),
            });
        }
        Ok(v["data"].clone())
    }

    /// An instant query at `time` (seconds since the epoch; now when `None`).
    pub async fn query(&self, expr: &str, time: Option<f64>) -> Result<Vec<Sample>, PromError> {
        let mut q = format!("query={}", encode(expr));
        if let Some(t) = time {
            q.push_str(&format!("&time={t:.3}"));
        }
        let data = self.get("/api/v1/query", &q).await?;
        let decode = |reason: &str| PromError::Decode {
            url: self.url.clone(),
            reason: reason.to_string(),
        };
        if data["resultType"] != "vector" {
            return Err(decode(
                "not a vector (an instant query of a range selector?)",
            ));
        }
        let mut out = Vec::new();
        for r in data["result"].as_array().into_iter().flatten() {
            let (t, value) = point(&r["value"]).ok_or_else(|| decode("a sample without value"))?;
            out.push(Sample {
                labels: labels(&r["metric"]),
                t,
                value,
            });
        }
        Ok(out)
    }

    /// A range query from `start` to `end` (seconds since the epoch) every `step`.
    pub async fn query_range(
        &self,
        expr: &str,
        start: f64,
        end: f64,
        step: Duration,
    ) -> Result<Vec<Series>, PromError> {
        let q = format!(
            "query={}&start={start:.3}&end={end:.3}&step={:.3}",
            encode(expr),
            step.as_secs_f64().max(0.001)
        );
        let data = self.get("/api/v1/query_range", &q).await?;
        let mut out = Vec::new();
        for r in data["result"].as_array().into_iter().flatten() {
            out.push(Series {
                labels: labels(&r["metric"]),
                points: r["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(point)
                    .collect(),
            });
        }
        Ok(out)
    }
}

fn labels(m: &serde_json::Value) -> BTreeMap<String, String> {
    m.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// `[1700000000.123, "42"]`.
fn point(v: &serde_json::Value) -> Option<(f64, f64)> {
    let t = v.get(0)?.as_f64()?;
    let x = v.get(1)?.as_str()?.parse().ok()?;
    Some((t, x))
}

/// Rows of a SONiC table: key, fields.
pub type Rows = Vec<(String, FieldValues)>;

/// One switch's metrics at one instant, in the form the plugin writes COUNTERS_DB.
#[derive(Debug, Clone, Default)]
pub struct SwitchMetrics {
    ports: BTreeMap<String, PortCounters>,
    queues: BTreeMap<(String, u8), QueueCounters>,
    switch: SwitchCounters,
    has_switch_row: bool,
    plugin_state: Option<String>,
    /// When Prometheus last scraped the switch's plugin (Unix ms).
    scraped_ms: Option<u64>,
    /// The evaluation time (Unix ms).
    at_ms: u64,
}

impl SwitchMetrics {
    /// The plugin's state and when it was scraped: `NoData` without any of its series, stale
    /// after [`STALE_AFTER`].
    pub fn plugin(&self) -> SwitchRead<(String, u64)> {
        let Some(ms) = self.scraped_ms else {
            return SwitchRead::NoData;
        };
        let state = self
            .plugin_state
            .clone()
            .unwrap_or_else(|| "unknown (no weft_plugin_state series)".into());
        let age = Duration::from_millis(self.at_ms.saturating_sub(ms));
        if age > STALE_AFTER {
            SwitchRead::Stale {
                data: (state, ms),
                why: crate::read::Staleness::Old {
                    age,
                    limit: STALE_AFTER,
                },
            }
        } else {
            SwitchRead::Ok((state, ms))
        }
    }

    /// COUNTERS_DB `COUNTERS` rows (ports, queues with the watchdog's state, the switch row),
    /// and STATE_DB `PFC_WD_STATE` rows (none: the queue rows carry the watchdog's state).
    pub fn rows(&self) -> (Rows, Rows) {
        let mut out: Rows = self
            .ports
            .values()
            .map(|p| (p.key(), p.to_fields()))
            .collect();
        out.extend(self.queues.values().map(|q| (q.key(), q.to_fields())));
        if self.has_switch_row {
            out.push((self.switch.key(), self.switch.to_fields()));
        }
        (out, Vec::new())
    }

    /// Takes one sample of family `name`.
    fn add(&mut self, name: &str, s: &Sample) {
        let label = |k: &str| s.labels.get(k).cloned().unwrap_or_default();
        let v = (s.value.max(0.0)) as u64;
        let port = label("port");
        let prio = |k: &str| label(k).parse::<u8>().ok().filter(|p| *p < 8);
        match name {
            "weft_port_rx_packets_total" => self.port(&port).rx_packets = Some(v),
            "weft_port_rx_bytes_total" => self.port(&port).rx_bytes = Some(v),
            "weft_port_tx_packets_total" => self.port(&port).tx_packets = Some(v),
            "weft_port_tx_bytes_total" => self.port(&port).tx_bytes = Some(v),
            "weft_queue_tx_packets_total" | "weft_queue_ecn_marked_packets_total" => {
                if let Some(q) = prio("queue") {
                    let row = self.queue(&port, q);
                    if name == "weft_queue_tx_packets_total" {
                        row.packets = Some(v);
                    } else {
                        row.ecn_marked = Some(v);
                    }
                }
            }
            "weft_pfc_pause_rx_frames_total" | "weft_pfc_pause_tx_frames_total" => {
                if let Some(q) = prio("priority") {
                    let c = &mut self.port(&port).pfc[usize::from(q)];
                    if name == "weft_pfc_pause_rx_frames_total" {
                        c.rx_pause = Some(v);
                    } else {
                        c.tx_pause = Some(v);
                    }
                }
            }
            "weft_pfc_watchdog_stormed" | "weft_pfc_watchdog_storms_total" => {
                if let Some(q) = prio("priority") {
                    let row = self.queue(&port, q);
                    if name == "weft_pfc_watchdog_stormed" {
                        row.wd_status = Some(if v > 0 {
                            WdStatus::Stormed
                        } else {
                            WdStatus::Operational
                        });
                    } else {
                        row.wd_detected = Some(v);
                    }
                }
            }
            "weft_drops_packets_total" => {
                self.has_switch_row = true;
                self.switch.drops.insert(label("reason"), (v, 0));
            }
            "weft_roce_psn_out_of_order_packets_total" => {
                self.has_switch_row = true;
                self.switch.psn_out_of_order = Some(v);
            }
            "weft_roce_psn_regressions_total" => {
                self.has_switch_row = true;
                self.switch.psn_regressions = Some(v);
            }
            "weft_plugin_state" => self.plugin_state = Some(label("state")),
            "timestamp(weft_p4rt_primary)" => self.scraped_ms = Some((s.value * 1000.0) as u64),
            _ => {}
        }
    }

    fn port(&mut self, port: &str) -> &mut PortCounters {
        self.ports
            .entry(port.to_string())
            .or_insert_with(|| PortCounters {
                port: port.to_string(),
                ..Default::default()
            })
    }

    fn queue(&mut self, port: &str, q: u8) -> &mut QueueCounters {
        self.queues
            .entry((port.to_string(), q))
            .or_insert_with(|| QueueCounters {
                port: port.to_string(),
                queue: q,
                ..Default::default()
            })
    }
}

/// The queries [`read`] makes: each family, only the series that say something where zeros
/// are the rule (idle queues, no PAUSE, no storm), and when each plugin was last scraped.
pub fn queries() -> Vec<(&'static str, String)> {
    FAMILIES
        .iter()
        .map(|(name, _)| match *name {
            "weft_queue_tx_packets_total"
            | "weft_queue_ecn_marked_packets_total"
            | "weft_pfc_pause_rx_frames_total"
            | "weft_pfc_pause_tx_frames_total"
            | "weft_pfc_watchdog_stormed"
            | "weft_pfc_watchdog_storms_total" => (*name, format!("{name} > 0")),
            "weft_plugin_state" => (*name, format!("{name} == 1")),
            "weft_p4rt_primary" => ("timestamp(weft_p4rt_primary)", format!("timestamp({name})")),
            _ => (*name, name.to_string()),
        })
        .collect()
}

/// Every switch of `t` that Prometheus has metrics of, at one evaluation time, by name.
/// Switches of the intent without any series are absent (their plugin was never scraped).
pub async fn read(c: &Client, t: &Topology) -> Result<BTreeMap<String, SwitchMetrics>, PromError> {
    let at_ms = crate::now_ms();
    let at = at_ms as f64 / 1000.0;
    let qs = queries();
    let answers = futures::future::join_all(qs.iter().map(|(_, q)| c.query(q, Some(at)))).await;
    let mut out: BTreeMap<String, SwitchMetrics> = BTreeMap::new();
    let known: std::collections::BTreeSet<&str> =
        t.switches.iter().map(|s| s.name.as_str()).collect();
    for ((name, _), a) in qs.iter().zip(answers) {
        for s in a? {
            let Some(sw) = s
                .labels
                .get("switch")
                .filter(|n| known.contains(n.as_str()))
            else {
                continue;
            };
            out.entry(sw.clone())
                .or_insert_with(|| SwitchMetrics {
                    at_ms,
                    ..Default::default()
                })
                .add(name, &s);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_http_host_port_with_an_optional_prefix_and_https_is_refused_with_the_reason() {
        let c = Client::new("http://127.0.0.1:9090").expect("plain");
        assert_eq!(
            (c.host.as_str(), c.port, c.prefix.as_str()),
            ("127.0.0.1", 9090, "")
        );
        let c = Client::new("http://prom.example:8080/prometheus/").expect("prefix");
        assert_eq!((c.port, c.prefix.as_str()), (8080, "/prometheus"));
        let c = Client::new("http://[::1]:9090").expect("v6");
        assert_eq!((c.host.as_str(), c.port), ("::1", 9090));
        assert_eq!(Client::new("http://prom").expect("no port").port, 80);
        let e = Client::new("https://prom:9090").expect_err("https");
        assert!(e.to_string().contains("https is not supported"), "{e}");
        assert!(Client::new("prom:9090").is_err());
        assert!(Client::new("http://prom:x").is_err());
    }

    #[test]
    fn every_family_read_is_one_the_plugin_serves_with_the_labels_read() {
        for (name, labels) in FAMILIES {
            let f = weft_telemetry::metrics::PLUGIN_FAMILIES
                .iter()
                .find(|f| f.name == *name)
                .unwrap_or_else(|| panic!("{name} is not a plugin family"));
            assert_eq!(f.labels, *labels, "{name}");
        }
        // Every query names its family.
        for (name, q) in queries() {
            assert!(q.contains(name.trim_start_matches("timestamp(").trim_end_matches(')')));
        }
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(encode("a{b=\"c\"} > 0"), "a%7Bb%3D%22c%22%7D%20%3E%200");
    }

    #[test]
    fn api_answers_and_errors_are_told_apart() {
        let c = Client::new("http://127.0.0.1:9").expect("url");
        let ok = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}";
        assert_eq!(c.answer(ok).expect("data")["resultType"], "vector");
        let bad = b"HTTP/1.0 400 Bad Request\r\n\r\n{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error\"}";
        let e = c.answer(bad).expect_err("api error");
        assert!(matches!(e, PromError::Api { .. }), "{e}");
        assert!(e.to_string().contains("bad_data: parse error"), "{e}");
        let html = b"HTTP/1.0 502 Bad Gateway\r\n\r\n<html>gateway</html>";
        assert!(matches!(
            c.answer(html),
            Err(PromError::Http { status: 502, .. })
        ));
    }

    fn sample(labels: &[(&str, &str)], value: f64) -> Sample {
        Sample {
            labels: labels
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            t: 0.0,
            value,
        }
    }

    #[test]
    fn samples_become_the_plugins_counters_rows_and_the_rules_read_them_alike() {
        let mut m = SwitchMetrics {
            at_ms: 100_000,
            ..Default::default()
        };
        let sp = [("switch", "leaf1"), ("port", "Ethernet0")];
        m.add("weft_port_tx_packets_total", &sample(&sp, 20.0));
        m.add("weft_port_rx_packets_total", &sample(&sp, 10.0));
        let q = [("switch", "leaf1"), ("port", "Ethernet0"), ("queue", "3")];
        m.add("weft_queue_ecn_marked_packets_total", &sample(&q, 2.0));
        m.add("weft_queue_tx_packets_total", &sample(&q, 5.0));
        let p = [
            ("switch", "leaf1"),
            ("port", "Ethernet0"),
            ("priority", "3"),
        ];
        m.add("weft_pfc_pause_rx_frames_total", &sample(&p, 7.0));
        m.add("weft_pfc_watchdog_stormed", &sample(&p, 1.0));
        m.add("weft_pfc_watchdog_storms_total", &sample(&p, 1.0));
        m.add(
            "weft_drops_packets_total",
            &sample(&[("switch", "leaf1"), ("reason", "no_route")], 4.0),
        );
        m.add(
            "weft_plugin_state",
            &sample(&[("switch", "leaf1"), ("state", "running")], 1.0),
        );
        m.add(
            "timestamp(weft_p4rt_primary)",
            &sample(&[("switch", "leaf1")], 99.5),
        );
        assert_eq!(m.plugin(), SwitchRead::Ok(("running".into(), 99_500)));
        let (rows, wd) = m.rows();
        let s = crate::diagnose::switch_sample(&rows, &wd, &[]);
        let port = &s.ports["Ethernet0"];
        assert_eq!(
            (port.rx_packets, port.tx_packets, port.pfc_rx_pause[3]),
            (10, 20, 7)
        );
        assert_eq!(s.queues["Ethernet0:3"].ecn_marked, 2);
        assert!(s.queues["Ethernet0:3"].wd_stormed);
        assert_eq!(s.drops["no_route"], 4);
        let old = SwitchMetrics {
            at_ms: 1_000_000,
            scraped_ms: Some(1_000),
            ..Default::default()
        };
        assert!(matches!(old.plugin(), SwitchRead::Stale { .. }));
        assert_eq!(SwitchMetrics::default().plugin(), SwitchRead::NoData);
    }
}
