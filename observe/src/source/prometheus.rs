//! A window of every switch's counters from Prometheus: the plugins' metric families
//! (`weft_telemetry::metrics`) as PromQL range selectors evaluated at the window's end, which
//! return every raw sample with its scrape time. Each switch's samples are placed on a common
//! grid (the last scrape at or before each grid point, as PromQL's lookback does) and carry
//! the time of the counter poll they came from (`weft_counters_poll_timestamp_seconds`; the
//! scrape time from a plugin that does not publish it) as the switch's poll time, so the rules
//! time each switch by its own polls, as they do reading the DBs.
//!
//! What Prometheus does not have: the plugin's read-back drift (a black hole is named by its
//! drops only), and anything a scrape interval hides (a window must span two scrapes of each
//! switch to judge a rate).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use weft_diagnose::{PortSample, QueueSample, Sample, SwitchSample, Window};
use weft_topology::Topology;

use super::Unjudged;
use super::http::{self, HttpError, Url};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("Prometheus answered {status} to {query}: {detail}")]
    Query {
        query: String,
        status: u16,
        detail: String,
    },
}

/// A base URL, checked.
pub struct Base;

impl Base {
    pub fn parse(u: &str) -> Result<Url, PromError> {
        Ok(Url::parse(u)?)
    }
}

/// How long one query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// One series: its labels and raw samples (unix ms, value).
#[derive(Debug, Clone, Default)]
struct Series {
    name: String,
    labels: BTreeMap<String, String>,
    values: Vec<(u64, f64)>,
}

impl Series {
    fn label(&self, k: &str) -> &str {
        self.labels.get(k).map_or("", String::as_str)
    }
    /// The last value at or before `t` (ms), and its time.
    fn at(&self, t: u64) -> Option<(u64, f64)> {
        let i = self.values.partition_point(|(ts, _)| *ts <= t);
        i.checked_sub(1).map(|i| self.values[i])
    }
}

pub struct Prometheus {
    url: Url,
}

/// The families the rules use, with the label matchers that keep only what they read.
fn selectors(lossless: &[u8], queues: &[u8]) -> Vec<String> {
    let alt = |v: &[u8]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("|")
    };
    vec![
        r#"{__name__=~"weft_port_(rx|tx)_(packets|bytes)_total"}"#.to_string(),
        format!(
            r#"{{__name__=~"weft_pfc_pause_(rx|tx)_frames_total|weft_pfc_watchdog_stormed|weft_pfc_watchdog_storms_total",priority=~"{}"}}"#,
            alt(lossless)
        ),
        format!(
            r#"{{__name__=~"weft_queue_(tx|ecn_marked)_packets_total",queue=~"{}"}}"#,
            alt(queues)
        ),
        "weft_queue_depth_packets_bucket".to_string(),
        r#"{__name__=~"weft_drops_packets_total|weft_roce_psn_(out_of_order_packets|regressions)_total"}"#.to_string(),
        "weft_counters_poll_timestamp_seconds".to_string(),
    ]
}

fn parse_result(v: &serde_json::Value) -> Vec<Series> {
    let Some(rs) = v["data"]["result"].as_array() else {
        return Vec::new();
    };
    rs.iter()
        .map(|r| {
            let labels: BTreeMap<String, String> = r["metric"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default();
            let values = r["values"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|p| {
                            let ts = p.get(0)?.as_f64()?;
                            let v: f64 = p.get(1)?.as_str()?.parse().ok()?;
                            Some(((ts * 1000.0).round() as u64, v))
                        })
                        .collect()
                })
                .unwrap_or_default();
            Series {
                name: labels.get("__name__").cloned().unwrap_or_default(),
                labels,
                values,
            }
        })
        .collect()
}

/// Bucket counts of a cumulative histogram's series (`le` ascending, `+Inf` last) at `t`, and
/// the bucket width's shift (the first bucket's upper edge is `(1 << shift) - 1`).
fn histogram(buckets: &[&Series], t: u64) -> Option<(Vec<u64>, u8)> {
    let mut les: Vec<(f64, u64)> = buckets
        .iter()
        .filter_map(|s| {
            let le = match s.label("le") {
                "+Inf" => f64::INFINITY,
                x => x.parse().ok()?,
            };
            Some((le, s.at(t)?.1 as u64))
        })
        .collect();
    les.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first = les.first()?.0;
    let shift = if first.is_finite() {
        (first + 1.0).log2().round().clamp(0.0, 32.0) as u8
    } else {
        0
    };
    let mut prev = 0;
    let counts = les
        .iter()
        .map(|(_, c)| {
            let n = c.saturating_sub(prev);
            prev = (*c).max(prev);
            n
        })
        .collect();
    Some((counts, shift))
}

/// One switch's sample at grid point `t` from its series; `None` if it had no scrape by then.
fn switch_at(series: &[&Series], t: u64) -> Option<SwitchSample> {
    let mut s = SwitchSample::default();
    let mut last = None::<u64>;
    let mut polled = None::<u64>;
    let mut hist: BTreeMap<&str, Vec<&Series>> = BTreeMap::new();
    for x in series {
        let Some((ts, raw)) = x.at(t) else { continue };
        last = Some(last.map_or(ts, |l: u64| l.max(ts)));
        if x.name == "weft_counters_poll_timestamp_seconds" {
            polled = Some((raw.max(0.0) * 1000.0).round() as u64);
            continue;
        }
        let v = raw.max(0.0) as u64;
        let port = x.label("port");
        let prio = |s: &Series| s.label("priority").parse::<usize>().ok().filter(|p| *p < 8);
        match x.name.as_str() {
            "weft_port_rx_packets_total" => s.ports.entry(port.into()).or_default().rx_packets = v,
            "weft_port_tx_packets_total" => s.ports.entry(port.into()).or_default().tx_packets = v,
            "weft_port_rx_bytes_total" => s.ports.entry(port.into()).or_default().rx_bytes = v,
            "weft_port_tx_bytes_total" => s.ports.entry(port.into()).or_default().tx_bytes = v,
            "weft_pfc_pause_rx_frames_total" | "weft_pfc_pause_tx_frames_total" => {
                if let Some(p) = prio(x) {
                    let ps: &mut PortSample = s.ports.entry(port.into()).or_default();
                    if x.name.contains("_rx_") {
                        ps.pfc_rx_pause[p] = v;
                    } else {
                        ps.pfc_tx_pause[p] = v;
                    }
                }
            }
            "weft_pfc_watchdog_stormed" | "weft_pfc_watchdog_storms_total" => {
                let q: &mut QueueSample = s
                    .queues
                    .entry(format!("{port}:{}", x.label("priority")))
                    .or_default();
                if x.name.ends_with("_stormed") {
                    q.wd_stormed = v > 0;
                } else {
                    q.wd_detected = v;
                }
            }
            "weft_queue_tx_packets_total" | "weft_queue_ecn_marked_packets_total" if v > 0 => {
                let q = s
                    .queues
                    .entry(format!("{port}:{}", x.label("queue")))
                    .or_default();
                if x.name.contains("ecn") {
                    q.ecn_marked = v;
                } else {
                    q.packets = v;
                }
            }
            "weft_queue_depth_packets_bucket" => hist.entry(port).or_default().push(x),
            "weft_drops_packets_total" => {
                s.drops.insert(x.label("reason").to_string(), v);
            }
            "weft_roce_psn_out_of_order_packets_total" => s.psn_out_of_order = v,
            "weft_roce_psn_regressions_total" => s.psn_regressions = v,
            _ => {}
        }
    }
    for (port, b) in hist {
        if let (Some((h, shift)), Some(ps)) = (histogram(&b, t), s.ports.get_mut(port)) {
            ps.depth_histogram = h;
            ps.histogram_shift = shift;
        }
    }
    // The poll the counters came from, when the plugin says it (the scrape is later by up to
    // a scrape interval, and by a different amount on each switch): rates between two switches'
    // samples are then timed as the counters were read.
    s.poll_ms = polled.or(last);
    last.map(|_| s)
}

impl Prometheus {
    pub fn new(url: &str) -> Result<Prometheus, PromError> {
        Ok(Prometheus {
            url: Base::parse(url)?,
        })
    }

    /// Every raw sample of `selector` over `range_s` seconds before `end_s`.
    async fn raw(
        &self,
        selector: &str,
        range_s: u64,
        end_s: f64,
    ) -> Result<Vec<Series>, PromError> {
        let q = format!("{selector}[{range_s}s]");
        let path = format!("/api/v1/query?query={}&time={end_s:.3}", http::encode(&q));
        let (status, body) = http::get(&self.url, &path, QUERY_TIMEOUT).await?;
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if status != 200 || v["status"] != "success" {
            return Err(PromError::Query {
                query: q,
                status,
                detail: v["error"].as_str().map_or_else(
                    || String::from_utf8_lossy(&body).chars().take(200).collect(),
                    str::to_string,
                ),
            });
        }
        Ok(parse_result(&v))
    }

    /// The last `window` before `end_ms` (unix ms), sampled on a grid of `step`: the window the
    /// rules take, and the intent's switches Prometheus has nothing current of.
    pub async fn window_at(
        &self,
        t: &Topology,
        window: Duration,
        step: Duration,
        end_ms: u64,
    ) -> Result<(Window, Vec<Unjudged>), PromError> {
        let spec = super::db::Spec::of(t);
        let step_ms = step.as_millis().max(100) as u64;
        let win_ms = (window.as_millis() as u64).max(step_ms);
        // A scrape before the window's first grid point too.
        let range_s = (win_ms + 2 * step_ms).div_ceil(1000).max(1);
        let mut all = Vec::new();
        for sel in selectors(&spec.lossless, &spec.queues) {
            all.extend(self.raw(&sel, range_s, end_ms as f64 / 1000.0).await?);
        }
        let names: BTreeSet<&str> = t.switches.iter().map(|s| s.name.as_str()).collect();
        let mut by: BTreeMap<String, Vec<&Series>> = BTreeMap::new();
        for s in &all {
            if names.contains(s.label("switch")) {
                by.entry(s.label("switch").to_string()).or_default().push(s);
            }
        }
        let start = end_ms - win_ms;
        let grid: Vec<u64> = (0..=win_ms / step_ms)
            .map(|j| start + j * step_ms)
            .collect();
        let mut samples = Vec::new();
        for g in &grid {
            let mut sample = Sample {
                t_ms: g - start,
                switches: BTreeMap::new(),
            };
            for (sw, series) in &by {
                if let Some(s) = switch_at(series, *g) {
                    sample.switches.insert(sw.clone(), s);
                }
            }
            samples.push(sample);
        }
        let stale_after = (3 * step_ms).max(3000);
        let mut unjudged = Vec::new();
        for sw in &t.switches {
            let last = by
                .get(&sw.name)
                .and_then(|v| v.iter().filter_map(|s| s.values.last().map(|x| x.0)).max());
            let why = match last {
                None => Some((
                    "no-data",
                    "no series in Prometheus over the window".to_string(),
                )),
                Some(l) if end_ms.saturating_sub(l) > stale_after => Some((
                    "stale",
                    format!(
                        "last scraped {} before the window's end",
                        crate::human_duration(Duration::from_millis(end_ms - l))
                    ),
                )),
                Some(_) => None,
            };
            if let Some((data, detail)) = why {
                for s in &mut samples {
                    s.switches.remove(&sw.name);
                }
                unjudged.push(Unjudged {
                    switch: sw.name.clone(),
                    data,
                    detail,
                });
            }
        }
        Ok((
            Window {
                fabric: crate::diagnose::fabric_of(t).into(),
                samples,
            },
            unjudged,
        ))
    }

    /// The last `window` before `end_ms` on a one-second grid.
    pub async fn window(
        &self,
        t: &Topology,
        window: Duration,
        end_ms: u64,
    ) -> Result<(Window, Vec<Unjudged>), PromError> {
        self.window_at(t, window, Duration::from_secs(1), end_ms)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, labels: &[(&str, &str)], values: &[(u64, f64)]) -> Series {
        Series {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            values: values.to_vec(),
        }
    }

    #[test]
    fn a_cumulative_histogram_becomes_the_plugins_buckets_and_shift() {
        let b = [
            series("h", &[("le", "3.0")], &[(0, 5.0)]),
            series("h", &[("le", "7.0")], &[(0, 9.0)]),
            series("h", &[("le", "+Inf")], &[(0, 10.0)]),
        ];
        let refs: Vec<&Series> = b.iter().collect();
        assert_eq!(histogram(&refs, 10), Some((vec![5, 4, 1], 2)));
    }

    #[test]
    fn a_switch_at_a_grid_point_takes_each_series_last_scrape_and_its_time() {
        let s = [
            series(
                "weft_port_tx_packets_total",
                &[("switch", "leaf1"), ("port", "Ethernet0")],
                &[(1000, 10.0), (2000, 20.0)],
            ),
            series(
                "weft_pfc_pause_rx_frames_total",
                &[
                    ("switch", "leaf1"),
                    ("port", "Ethernet0"),
                    ("priority", "3"),
                ],
                &[(1000, 1.0), (2000, 4.0)],
            ),
            series(
                "weft_queue_ecn_marked_packets_total",
                &[("switch", "leaf1"), ("port", "Ethernet0"), ("queue", "3")],
                &[(2000, 7.0)],
            ),
        ];
        let refs: Vec<&Series> = s.iter().collect();
        assert!(switch_at(&refs, 999).is_none());
        let a = switch_at(&refs, 1500).expect("scraped by then");
        assert_eq!(a.poll_ms, Some(1000));
        assert_eq!(a.ports["Ethernet0"].tx_packets, 10);
        assert!(a.queues.is_empty());
        let b = switch_at(&refs, 2500).expect("scraped");
        assert_eq!(
            (
                b.ports["Ethernet0"].pfc_rx_pause[3],
                b.queues["Ethernet0:3"].ecn_marked
            ),
            (4, 7)
        );
        assert_eq!(b.poll_ms, Some(2000));
    }

    #[test]
    fn a_switch_is_timed_by_the_poll_its_plugin_publishes_not_by_the_scrape() {
        let s = [
            series(
                "weft_port_tx_packets_total",
                &[("switch", "leaf1"), ("port", "Ethernet0")],
                &[(1000, 10.0), (2000, 20.0)],
            ),
            // Scraped at 1000 and 2000; the counters were polled at 620 and 1910.
            series(
                "weft_counters_poll_timestamp_seconds",
                &[("switch", "leaf1")],
                &[(1000, 0.62), (2000, 1.91)],
            ),
        ];
        let refs: Vec<&Series> = s.iter().collect();
        let a = switch_at(&refs, 1500).expect("scraped by then");
        assert_eq!(
            (a.poll_ms, a.ports["Ethernet0"].tx_packets),
            (Some(620), 10)
        );
        let b = switch_at(&refs, 2500).expect("scraped");
        assert_eq!(
            (b.poll_ms, b.ports["Ethernet0"].tx_packets),
            (Some(1910), 20)
        );
        // The gauge is a time, not a port's or a queue's counter.
        assert_eq!(b.ports.len(), 1);
        assert!(b.queues.is_empty());
    }
}
