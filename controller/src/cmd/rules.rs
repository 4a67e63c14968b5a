//! `weft prometheus-rules [-o FILE]`: the alerting rules of the plugin's and `weft run`'s
//! metric families (`weft_telemetry::rules`), for Prometheus's `rule_files:`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use weft_telemetry::rules::{RuleOptions, rules_yaml};

use super::Outcome;
use crate::args::parse_duration;
use crate::outln;

#[derive(Args, Debug)]
pub struct RulesArgs {
    /// Write the rules here [default: standard output].
    #[arg(long = "out", short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// PAUSE frames/s received on a port's priority that count as sustained ...
    #[arg(long, default_value = "100", value_name = "PER_SECOND")]
    pub pause_rate: f64,
    /// ... held this long.
    #[arg(long, default_value = "2min", value_parser = parse_duration, value_name = "DURATION")]
    pub pause_for: Duration,
    /// CE marks/s on one queue that alert ...
    #[arg(long, default_value = "1000", value_name = "PER_SECOND")]
    pub ecn_rate: f64,
    /// ... held this long.
    #[arg(long, default_value = "5min", value_parser = parse_duration, value_name = "DURATION")]
    pub ecn_for: Duration,
    /// A reconvergence slower than this alerts (rounded up to a bucket edge of the histogram).
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub reconvergence_bound: Duration,
    /// Drops/s of one reason on one switch that alert ...
    #[arg(long, default_value = "1", value_name = "PER_SECOND")]
    pub drop_rate: f64,
    /// ... held this long.
    #[arg(long, default_value = "5min", value_parser = parse_duration, value_name = "DURATION")]
    pub drops_for: Duration,
    /// How long a plugin not primary, a switch not converged or unreachable, a link out of use
    /// or absent metrics last before they alert.
    #[arg(long = "for", default_value = "1min", value_parser = parse_duration, value_name = "DURATION")]
    pub state_for: Duration,
    /// The scrape job of the plugins' /metrics.
    #[arg(long, default_value = "weft-plugin", value_name = "JOB")]
    pub plugin_job: String,
}

impl RulesArgs {
    pub fn options(&self) -> RuleOptions {
        RuleOptions {
            pause_rate: self.pause_rate,
            pause_for: self.pause_for,
            ecn_rate: self.ecn_rate,
            ecn_for: self.ecn_for,
            reconvergence_bound: self.reconvergence_bound.as_secs_f64(),
            drop_rate: self.drop_rate,
            drops_for: self.drops_for,
            state_for: self.state_for,
            plugin_job: self.plugin_job.clone(),
        }
    }
}

/// What heads a rules file.
pub const HEADER: &str = "Alerting rules for Weft's metrics, written by `weft prometheus-rules`.\n\
    Load them with `rule_files:` in prometheus.yml; check with `promtool check rules FILE`.";

pub fn run(a: &RulesArgs) -> anyhow::Result<Outcome> {
    let text = rules_yaml(&a.options(), HEADER)?;
    match &a.out {
        Some(p) => {
            std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?;
            outln!(
                "{}: {} alerting rules; add it to rule_files: in prometheus.yml",
                p.display(),
                text.matches("- alert: ").count()
            );
        }
        None => crate::out!("{text}"),
    }
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    #[test]
    fn the_commands_defaults_are_the_rules_defaults() {
        let c = Cli::try_parse_from(["weft", "prometheus-rules"]).expect("parses");
        let Command::PrometheusRules(a) = c.command else {
            panic!("not prometheus-rules");
        };
        let (o, d) = (a.options(), weft_telemetry::rules::RuleOptions::default());
        assert_eq!(
            (
                o.pause_rate,
                o.pause_for,
                o.ecn_rate,
                o.ecn_for,
                o.drop_rate,
                o.drops_for
            ),
            (
                d.pause_rate,
                d.pause_for,
                d.ecn_rate,
                d.ecn_for,
                d.drop_rate,
                d.drops_for
            )
        );
        assert_eq!(
            (o.reconvergence_bound, o.state_for, o.plugin_job),
            (d.reconvergence_bound, d.state_for, d.plugin_job)
        );
    }
}
