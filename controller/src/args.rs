//! Options and value parsers several commands share: `--output`, `--switch`/`--role`,
//! durations, sizes, routing modes.

use std::collections::BTreeSet;
use std::time::Duration;

use clap::Args;
use weft_reconcile::targets::{SelectError, select};
use weft_topology::units::UnitError;
use weft_topology::{RoutingMode, SwitchIdx, Topology};

/// `--output`: text for people; json or yaml (one document, README "Structured output") for
/// tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    Yaml,
}

impl OutputFormat {
    /// JSON or YAML.
    pub fn structured(self) -> bool {
        self != OutputFormat::Text
    }
}

/// Which switches a command reads and writes.
#[derive(Args, Debug, Clone, Default)]
pub struct Targets {
    /// Only these switches: names or globs (`leaf*`, `pod?-spine1`), comma separated or repeated.
    #[arg(long = "switch", value_name = "NAME|GLOB", value_delimiter = ',')]
    pub switches: Vec<String>,
    /// Only switches of these roles (leaf, spine, superspine), comma separated or repeated.
    #[arg(long = "role", value_name = "ROLE", value_delimiter = ',')]
    pub roles: Vec<String>,
}

impl Targets {
    /// The switches selected (`None`: every switch, neither option was given).
    pub fn select(&self, t: &Topology) -> Result<Option<BTreeSet<SwitchIdx>>, SelectError> {
        select(t, &self.switches, &self.roles)
    }

    /// The switches selected, every switch when neither option was given.
    pub fn chosen(&self, t: &Topology) -> Result<BTreeSet<SwitchIdx>, SelectError> {
        Ok(weft_reconcile::targets::chosen(t, &self.select(t)?))
    }
}

/// `--transport`: how P4RT entries reach the plugins, whatever the intent says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportArg {
    Redis,
    Zmq,
}

/// A switch `--transport zmq` cannot put on ZMQ.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--transport zmq: {}: DB reached over TCP, no socket directory to put a ZMQ endpoint in; give each a zmq_endpoint in the intent (or fabric.defaults.zmq_endpoint: tcp://HOST:PORT)",
    .0.join(", ")
)]
pub struct NoZmqEndpoint(pub Vec<String>);

impl TransportArg {
    /// Sets every switch's transport in `t`: ZMQ where the intent names no endpoint puts it
    /// beside the switch's DB socket, as `weft testbed up --transport zmq` does for the plugins.
    pub fn apply(opt: Option<TransportArg>, t: &mut Topology) -> Result<(), NoZmqEndpoint> {
        match opt {
            None => Ok(()),
            Some(TransportArg::Redis) => {
                weft_topology::transport::use_redis(t);
                Ok(())
            }
            Some(TransportArg::Zmq) => {
                let left = weft_topology::transport::serve_zmq(t);
                if left.is_empty() {
                    Ok(())
                } else {
                    Err(NoZmqEndpoint(left))
                }
            }
        }
    }
}

/// `30s`, `100ms`, `2m`: the units the intent uses.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    s.parse::<weft_topology::units::Duration>()
        .map(|d| d.to_std())
}

/// A duration; a bare number is milliseconds (what `--interval 50` meant before units).
pub fn parse_duration_ms(s: &str) -> Result<Duration, UnitError> {
    match s.trim().parse::<u64>() {
        Ok(ms) => Ok(Duration::from_millis(ms)),
        Err(_) => parse_duration(s),
    }
}

/// A size that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("{0:?}: expected a size such as 4096, 64KB, 1MiB or 1GiB")]
    Number(String),
    #[error("{given:?}: unknown unit {unit:?} (use KB, MB, GB, KiB, MiB, GiB)")]
    Unit { given: String, unit: String },
    #[error("{0:?}: out of range")]
    Range(String),
}

/// `4096`, `64KB`, `1MiB`, `1GiB`, `2GB` (K/M/G decimal, KiB/MiB/GiB binary).
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let s = s.trim();
    let i = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(i);
    let v: f64 = num.parse().map_err(|_| SizeError::Number(s.to_string()))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        u => {
            return Err(SizeError::Unit {
                given: s.to_string(),
                unit: u.to_string(),
            });
        }
    };
    let b = v * scale;
    if !(1.0..1e18).contains(&b) {
        return Err(SizeError::Range(s.to_string()));
    }
    Ok(b.round() as u64)
}

/// A routing mode that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {0:?}: use ecmp, wcmp, flowlet, spray, adaptive")]
pub struct ModeError(pub String);

/// `ecmp,spray`: routing modes, comma separated.
pub fn parse_modes(s: &str) -> Result<Vec<RoutingMode>, ModeError> {
    s.split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| match m {
            "ecmp" => Ok(RoutingMode::Ecmp),
            "wcmp" => Ok(RoutingMode::Wcmp),
            "flowlet" => Ok(RoutingMode::Flowlet),
            "spray" => Ok(RoutingMode::Spray),
            "adaptive" => Ok(RoutingMode::Adaptive),
            o => Err(ModeError(o.to_string())),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_a_bare_number_of_milliseconds_only_where_it_always_meant_that() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("50ms"), Ok(Duration::from_millis(50)));
        assert!(
            parse_duration("30").is_err(),
            "a duration without unit is ambiguous"
        );
        assert_eq!(parse_duration_ms("50"), Ok(Duration::from_millis(50)));
        assert_eq!(parse_duration_ms("2s"), Ok(Duration::from_secs(2)));
    }
}
