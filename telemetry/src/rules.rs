//! Prometheus alerting rules for the plugin's and the controller's metric families, written by
//! `weft prometheus-rules` (a real fabric) and `weft testbed prometheus-config` (a testbed).
//!
//! Every metric an expression names is looked up in [`PLUGIN_FAMILIES`] and
//! [`CONTROLLER_FAMILIES`] ([`RulesError::UnknownFamily`] otherwise), and the reconvergence
//! bound is rounded up to an edge of [`RECONVERGENCE_BUCKETS`]: renaming a family or changing
//! its buckets breaks the rules' tests (`telemetry/tests/alert_rules.rs` runs `promtool check
//! rules` and `promtool test rules` on them), not an alert in production.

use std::fmt::Write as _;
use std::time::Duration;

use crate::metrics::{CONTROLLER_FAMILIES, FamilyDoc, PLUGIN_FAMILIES, RECONVERGENCE_BUCKETS};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RulesError {
    #[error("alert rule names {0:?}, which is not a metric family of the plugin or weft run")]
    UnknownFamily(String),
    #[error(
        "reconvergence bound {bound}s is above the histogram's last bucket edge ({last}s): no rule could tell"
    )]
    BoundTooLarge { bound: f64, last: f64 },
    #[error("{what} must be a positive number (got {value})")]
    NotPositive { what: &'static str, value: f64 },
}

/// The thresholds of the rules.
#[derive(Debug, Clone)]
pub struct RuleOptions {
    /// PAUSE frames/s received on one (switch, port, priority) ...
    pub pause_rate: f64,
    /// ... for this long is a sustained PAUSE.
    pub pause_for: Duration,
    /// CE marks/s on one queue ...
    pub ecn_rate: f64,
    /// ... for this long.
    pub ecn_for: Duration,
    /// A reconvergence slower than this (seconds, rounded up to a bucket edge) alerts.
    pub reconvergence_bound: f64,
    /// Drops/s of one reason on one switch ...
    pub drop_rate: f64,
    /// ... for this long.
    pub drops_for: Duration,
    /// A plugin not primary, a switch not converged or unreachable, a link down or metrics
    /// absent this long alerts.
    pub state_for: Duration,
    /// The scrape job of the plugins (`up{job=...}`).
    pub plugin_job: String,
}

impl Default for RuleOptions {
    fn default() -> Self {
        RuleOptions {
            // `weft diagnose` takes 100 PAUSE/s from one origin as a storm.
            pause_rate: 100.0,
            pause_for: Duration::from_secs(120),
            ecn_rate: 1000.0,
            ecn_for: Duration::from_secs(300),
            reconvergence_bound: 1.0,
            drop_rate: 1.0,
            drops_for: Duration::from_secs(300),
            state_for: Duration::from_secs(60),
            plugin_job: "weft-plugin".into(),
        }
    }
}

/// One alerting rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    pub name: &'static str,
    pub expr: String,
    pub for_: Duration,
    /// `critical` (traffic is or will be hurt) or `warning`.
    pub severity: &'static str,
    pub summary: String,
    pub description: String,
}

fn family(name: &str) -> Result<&'static FamilyDoc, RulesError> {
    PLUGIN_FAMILIES
        .iter()
        .chain(CONTROLLER_FAMILIES)
        .find(|f| f.name == name)
        .ok_or_else(|| RulesError::UnknownFamily(name.to_string()))
}

/// A family's name as a query names it (`_bucket`/`_count` of a histogram by `suffix`).
fn m(name: &str) -> Result<&'static str, RulesError> {
    Ok(family(name)?.name)
}

/// The histogram's bucket edges, as the exposition writes them.
pub fn reconvergence_edges() -> Vec<f64> {
    let (start, factor, n) = RECONVERGENCE_BUCKETS;
    (0..i32::from(n)).map(|i| start * factor.powi(i)).collect()
}

/// `1m`, `90s`, `0s`: Prometheus durations.
fn dur(d: Duration) -> String {
    let s = d.as_secs();
    if s > 0 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

fn positive(what: &'static str, value: f64) -> Result<(), RulesError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(RulesError::NotPositive { what, value })
    }
}

/// PFC, ECN and drops: the traffic rules.
fn traffic(o: &RuleOptions) -> Result<Vec<Alert>, RulesError> {
    Ok(vec![
        Alert {
            name: "WeftPfcStorm",
            expr: format!(
                "max by (switch, port, priority) ({}) > 0",
                m("weft_pfc_watchdog_stormed")?
            ),
            for_: Duration::ZERO,
            severity: "critical",
            summary: "PFC storm on {{ $labels.switch }}:{{ $labels.port }} priority {{ $labels.priority }}".into(),
            description: "The PFC watchdog holds the queue stormed: the device beyond the port keeps pausing it. Find the origin with weft diagnose; the watchdog's action applies meanwhile.".into(),
        },
        Alert {
            name: "WeftSustainedPause",
            expr: format!(
                "sum by (switch, port, priority) (rate({}[1m])) > {}",
                m("weft_pfc_pause_rx_frames_total")?,
                o.pause_rate
            ),
            for_: o.pause_for,
            severity: "warning",
            summary: "{{ $labels.switch }}:{{ $labels.port }} receives {{ $value | humanize }} PAUSE/s on priority {{ $labels.priority }}".into(),
            description: format!(
                "PAUSE frames above {}/s for {}: the device beyond the port cannot drain (a slow receiver or a storm). weft diagnose names the origin.",
                o.pause_rate,
                dur(o.pause_for)
            ),
        },
        Alert {
            name: "WeftEcnMarking",
            expr: format!(
                "sum by (switch, port, queue) (rate({}[1m])) > {}",
                m("weft_queue_ecn_marked_packets_total")?,
                o.ecn_rate
            ),
            for_: o.ecn_for,
            severity: "warning",
            summary: "{{ $labels.switch }}:{{ $labels.port }} queue {{ $labels.queue }} marks {{ $value | humanize }} packets/s CE".into(),
            description: format!(
                "ECN marking above {}/s for {}: sustained congestion toward this port (incast, a slow link). weft top and weft diagnose show where it comes from.",
                o.ecn_rate,
                dur(o.ecn_for)
            ),
        },
        Alert {
            name: "WeftDrops",
            expr: format!(
                "sum by (switch, reason) (rate({}[5m])) > {}",
                m("weft_drops_packets_total")?,
                o.drop_rate
            ),
            for_: o.drops_for,
            severity: "warning",
            summary: "{{ $labels.switch }} drops {{ $value | humanize }} packets/s ({{ $labels.reason }})".into(),
            description: format!(
                "Drops of one reason above {}/s for {}: no_route or no_nexthop is a black hole (weft plan shows drift), pfc_watchdog a storm being contained.",
                o.drop_rate,
                dur(o.drops_for)
            ),
        },
    ])
}

/// Links, plugins, switches, reconvergence, absent metrics: the state rules.
fn state(o: &RuleOptions) -> Result<Vec<Alert>, RulesError> {
    positive("reconvergence bound", o.reconvergence_bound)?;
    let edges = reconvergence_edges();
    let last = edges.last().copied().unwrap_or(0.0);
    let edge = edges
        .iter()
        .copied()
        .find(|e| *e >= o.reconvergence_bound * (1.0 - 1e-9))
        .ok_or(RulesError::BoundTooLarge {
            bound: o.reconvergence_bound,
            last,
        })?;
    let rec = m("weft_reconvergence_duration_seconds")?;
    let f = dur(o.state_for);
    Ok(vec![
        Alert {
            name: "WeftLinkDown",
            expr: format!("{} > 0", m("weft_controller_links_down")?),
            for_: o.state_for,
            severity: "warning",
            summary: "{{ $value }} link(s) out of use".into(),
            description: format!("weft run keeps links out of use (down, in hold-down or suppressed) for {f}: weft status lists them."),
        },
        Alert {
            name: "WeftLinkSuppressed",
            expr: format!("{} > 0", m("weft_controller_links_suppressed")?),
            for_: Duration::ZERO,
            severity: "warning",
            summary: "{{ $value }} link(s) suppressed by flap damping".into(),
            description: "A link flapped until damping suppressed it: check the optic or cable; weft status shows its penalty.".into(),
        },
        Alert {
            name: "WeftPluginNotPrimary",
            expr: format!("{} == 0", m("weft_p4rt_primary")?),
            for_: o.state_for,
            severity: "critical",
            summary: "{{ $labels.switch }}'s plugin is not the primary P4Runtime client with the pipeline in sync".into(),
            description: format!("For {f} the plugin has not been running (primary, pipeline pushed, synced): writes to the switch wait. weft doctor tells why."),
        },
        Alert {
            name: "WeftSwitchNotConverged",
            expr: format!("{} == 0", m("weft_controller_switch_converged")?),
            for_: o.state_for,
            severity: "warning",
            summary: "{{ $labels.switch }} does not hold what the intent wants".into(),
            description: format!("weft run has not converged the switch for {f}: weft status shows its state, weft plan the difference."),
        },
        Alert {
            name: "WeftSwitchUnreachable",
            expr: format!("{} == 0", m("weft_controller_switch_reachable")?),
            for_: o.state_for,
            severity: "critical",
            summary: "weft run cannot reach {{ $labels.switch }} (its DB or plugin)".into(),
            description: format!("For {f} the switch's DB did not answer or its plugin was not ready: weft doctor checks it."),
        },
        Alert {
            name: "WeftSlowReconvergence",
            expr: format!(
                "(increase({rec}_count[10m]) - ignoring(le) increase({rec}_bucket{{le=\"{edge}\"}}[10m])) > 0"
            ),
            for_: Duration::ZERO,
            severity: "warning",
            summary: format!("{{{{ $value | humanize }}}} reconvergence(s) slower than {edge}s in 10m"),
            description: "From a link's first port event to every affected switch's acknowledgement took longer than the bound: weft run's events log (--events-log) has each one's time.".into(),
        },
        Alert {
            name: "WeftSwitchMetricsAbsent",
            expr: format!(
                "group by (switch) ({}) unless on (switch) group by (switch) ({})",
                m("weft_controller_switch_reachable")?,
                m("weft_p4rt_primary")?
            ),
            for_: o.state_for,
            severity: "warning",
            summary: "no metrics from {{ $labels.switch }}'s plugin".into(),
            description: format!("weft run knows the switch but Prometheus has had none of its plugin's series for {f}: the plugin runs without --metrics, is not scraped, or is down."),
        },
        Alert {
            name: "WeftPluginTargetDown",
            expr: format!("up{{job=\"{}\"}} == 0", o.plugin_job.replace('"', "")),
            for_: o.state_for,
            severity: "warning",
            summary: "Prometheus cannot scrape {{ $labels.instance }}".into(),
            description: format!("A plugin's /metrics has not answered for {f}: every alert about that switch is blind meanwhile."),
        },
    ])
}

/// Every alert, traffic first.
pub fn alerts(o: &RuleOptions) -> Result<Vec<Alert>, RulesError> {
    positive("PAUSE rate", o.pause_rate)?;
    positive("ECN rate", o.ecn_rate)?;
    positive("drop rate", o.drop_rate)?;
    let mut v = traffic(o)?;
    v.extend(state(o)?);
    Ok(v)
}

/// A single-quoted YAML scalar.
fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The rules file (`rule_files:` of a Prometheus configuration).
pub fn rules_yaml(o: &RuleOptions, header: &str) -> Result<String, RulesError> {
    let mut out = String::new();
    for l in header.lines() {
        let _ = writeln!(out, "# {l}");
    }
    out.push_str("groups:\n  - name: weft\n    rules:\n");
    for a in alerts(o)? {
        let _ = write!(
            out,
            "      - alert: {}\n        expr: {}\n        for: {}\n        labels:\n          severity: {}\n        annotations:\n          summary: {}\n          description: {}\n",
            a.name,
            q(&a.expr),
            dur(a.for_),
            a.severity,
            q(&a.summary),
            q(&a.description)
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_the_rules_name_is_a_family_and_a_made_up_one_is_refused() {
        let all = alerts(&RuleOptions::default()).expect("rules");
        assert_eq!(all.len(), 12);
        for a in &all {
            for word in a.expr.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                if let Some(base) = word.strip_prefix("weft_") {
                    let name = format!("weft_{base}");
                    let name = name
                        .strip_suffix("_bucket")
                        .or_else(|| name.strip_suffix("_count"))
                        .unwrap_or(&name);
                    assert!(family(name).is_ok(), "{}: {name}", a.name);
                }
            }
        }
        assert_eq!(
            m("weft_no_such_thing_total"),
            Err(RulesError::UnknownFamily("weft_no_such_thing_total".into()))
        );
    }

    #[test]
    fn the_reconvergence_bound_is_rounded_up_to_a_bucket_edge_and_a_bound_past_them_is_refused() {
        let a = alerts(&RuleOptions::default()).expect("rules");
        let slow = a
            .iter()
            .find(|x| x.name == "WeftSlowReconvergence")
            .expect("rule");
        assert!(slow.expr.contains("le=\"1.024\""), "{}", slow.expr);
        let e = alerts(&RuleOptions {
            reconvergence_bound: 100.0,
            ..Default::default()
        })
        .expect_err("past the last edge");
        assert!(matches!(e, RulesError::BoundTooLarge { .. }), "{e}");
        assert!(
            alerts(&RuleOptions {
                pause_rate: 0.0,
                ..Default::default()
            })
            .is_err()
        );
    }

    #[test]
    fn yaml_quotes_what_it_must_and_names_every_alert() {
        let y =
            rules_yaml(&RuleOptions::default(), "written by a test\nsecond line").expect("yaml");
        assert!(
            y.starts_with("# written by a test\n# second line\ngroups:\n"),
            "{y}"
        );
        assert!(y.contains("      - alert: WeftPfcStorm\n"), "{y}");
        assert!(
            y.contains("summary: '{{ $labels.switch }}''s plugin is not"),
            "{y}"
        );
        assert!(y.contains("        for: 2m\n"), "{y}");
    }
}
