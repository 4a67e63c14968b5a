//! The plugin's configuration: command-line flags, optionally on top of a YAML or JSON file
//! (flags win), resolved into one [`PluginConfig`] with every default filled in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use serde::Deserialize;

/// Errors in the configuration; each names the setting.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config file {path}: {reason}")]
    Parse { path: String, reason: String },
    #[error("{setting}: {reason}")]
    Invalid {
        setting: &'static str,
        reason: String,
    },
}

const AFTER_HELP: &str = "\
A config file uses the long flag names with '_' for '-', and `ports` as a map:
    redis: unix:///tmp/sw1/redis.sock
    p4rt: 127.0.0.1:9559
    device_id: 1
    ports: { Ethernet0: veth0, Ethernet4: veth2 }
    counter_interval: 300ms
    bmv2_queue_scale: 0.05

Durations are written with their unit: 50ms, 1s, 2m (0 turns an interval off).
Logs: --log-level, else RUST_LOG or WEFT_LOG (a tracing filter), else info; colours only on a
terminal.
Signals: SIGUSR1 logs a health line; SIGTERM/SIGINT stop. Status: STATE_DB WEFT_PLUGIN|status.";

/// Per-switch Weft daemon (SONiC p4orch role): SONiC's DBs to the switch over P4Runtime.
///
/// Examples:
///   # BMv2 on 127.0.0.1:9559 (device 1), the switch's SONiC Redis on a unix socket:
///   weft-plugin --redis unix:///var/run/redis/redis.sock --p4rt 127.0.0.1:9559 --device-id 1
///
///   # Redis over TCP with a password, ports mapped to Linux interfaces (netlink port state):
///   weft-plugin --redis redis://127.0.0.1:6379 --redis-password s3cret \
///       --p4rt 127.0.0.1:9559 --port Ethernet0=veth0 --port Ethernet4=veth2
///
///   # Everything from a file (YAML or JSON; flags given as well override it):
///   weft-plugin --config /etc/weft/plugin.yaml --log-format json
///
/// APPL_DB P4RT_TABLE and CONFIG_DB QoS go to the switch; port state, PFC watchdog and
/// counters come back into SONiC's databases.
#[derive(Debug, Parser, Default)]
#[command(name = "weft-plugin", version, after_help = AFTER_HELP, verbatim_doc_comment)]
pub struct Cli {
    /// YAML or JSON config file (flags override its settings).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The switch's SONiC Redis: redis://[user:pass@]host:port, unix:///path or /path.
    #[arg(long, env = "WEFT_REDIS", value_name = "URL")]
    pub redis: Option<String>,
    /// Redis password (default user, or --redis-user).
    #[arg(
        long,
        env = "WEFT_REDIS_PASSWORD",
        value_name = "PASS",
        hide_env_values = true
    )]
    pub redis_password: Option<String>,
    /// Redis ACL user [default: none, the default user].
    #[arg(long, value_name = "USER")]
    pub redis_user: Option<String>,
    /// P4Runtime server of the switch, host:port.
    #[arg(long, env = "WEFT_P4RT", value_name = "ADDR")]
    pub p4rt: Option<String>,
    /// PEM of the CA that signed the switch's P4Runtime certificate: talk TLS [default: plaintext].
    #[arg(long, value_name = "FILE")]
    pub p4rt_ca_cert: Option<PathBuf>,
    /// PEM certificate of this plugin, for a switch that asks for one (mutual TLS).
    #[arg(long, value_name = "FILE", requires_all = ["p4rt_key", "p4rt_ca_cert"])]
    pub p4rt_cert: Option<PathBuf>,
    /// PEM key of --p4rt-cert.
    #[arg(long, value_name = "FILE", requires = "p4rt_cert")]
    pub p4rt_key: Option<PathBuf>,
    /// Name to verify in the switch's certificate [default: the --p4rt host].
    #[arg(long, value_name = "NAME", requires = "p4rt_ca_cert")]
    pub p4rt_tls_domain: Option<String>,
    /// P4Runtime device id (also the pipeline's switch_id) [default: 1].
    #[arg(long, value_name = "N")]
    pub device_id: Option<u64>,
    /// P4Runtime election id (higher wins arbitration) [default: 1].
    #[arg(long, value_name = "N")]
    pub election_id: Option<u128>,
    /// P4Info (binary protobuf) to push [default: Weft's pipeline built into this binary].
    #[arg(long, value_name = "FILE", requires = "bmv2_json")]
    pub p4info: Option<PathBuf>,
    /// BMv2 JSON to push with --p4info.
    #[arg(long, value_name = "FILE", requires = "p4info")]
    pub bmv2_json: Option<PathBuf>,
    /// Port to Linux interface, for netlink link state (repeatable): Ethernet0=veth0.
    #[arg(long = "port", value_name = "PORT=IF")]
    pub ports: Vec<String>,
    /// Keys taken from APPL_DB per batch [default: 4096].
    #[arg(long, value_name = "N")]
    pub batch_size: Option<usize>,
    /// How often the consumer pops even without a wake-up [default: 100ms].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub consumer_poll: Option<Duration>,
    /// Counter polling into COUNTERS_DB (0: off) [default: 1s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub counter_interval: Option<Duration>,
    /// STATE_DB WEFT_PLUGIN|status refresh [default: 1s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub status_interval: Option<Duration>,
    /// Run-time ECN tuning: sampling interval (0: off) [default: 50ms].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub tuning_interval: Option<Duration>,
    /// --consumer-poll in milliseconds (older spelling).
    #[arg(long, value_name = "MS", hide = true, conflicts_with = "consumer_poll")]
    pub consumer_poll_ms: Option<u64>,
    /// --counter-interval in milliseconds (older spelling).
    #[arg(
        long,
        value_name = "MS",
        hide = true,
        conflicts_with = "counter_interval"
    )]
    pub counter_interval_ms: Option<u64>,
    /// --status-interval in milliseconds (older spelling).
    #[arg(
        long,
        value_name = "MS",
        hide = true,
        conflicts_with = "status_interval"
    )]
    pub status_interval_ms: Option<u64>,
    /// --tuning-interval in milliseconds (older spelling).
    #[arg(
        long,
        value_name = "MS",
        hide = true,
        conflicts_with = "tuning_interval"
    )]
    pub tuning_interval_ms: Option<u64>,
    /// Multiplies queue thresholds (bytes → packets) before clamping to --queue-depth: BMv2's
    /// queues hold 64 packets, far less than a hardware buffer [default: 1].
    #[arg(long, value_name = "F")]
    pub bmv2_queue_scale: Option<f64>,
    /// Packets a BMv2 egress queue holds (thresholds are clamped below it) [default: 64].
    #[arg(long, value_name = "N")]
    pub queue_depth: Option<u32>,
    /// Bytes per queued packet for threshold conversion [default: the port's MTU].
    #[arg(long, value_name = "BYTES")]
    pub cell_bytes: Option<u32>,
    /// PFC pause quanta written to queue_config_table (set_queue_config_pfc) [default: 65535].
    #[arg(long, value_name = "N")]
    pub pfc_quanta: Option<u16>,
    /// Give BMv2 each member's watch_port. Off by default: PI crashes BMv2 when every watch
    /// port of a group is down (see p4/README.md); the down mask already fails over.
    #[arg(long)]
    pub watch_ports: bool,
    /// A port's service rate in packets/s for the tuner's utilization (repeatable; `*` for
    /// every port): on BMv2, the rate Thrift `set_queue_rate` gave it [default: PORT speed].
    #[arg(long = "tuning-line-rate", value_name = "PORT=PPS")]
    pub tuning_line_rate: Vec<String>,
    /// Serve Prometheus/OpenMetrics metrics at http://ADDR/metrics (HOST:PORT; `off`: none)
    /// [default: off].
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// The switch's name: the `switch` label of every metric [default: device-<device id>].
    #[arg(long, value_name = "NAME")]
    pub switch_name: Option<String>,
    /// Log format on standard error: text or json [default: text].
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// Log level: error, warn, info, debug or trace [default: RUST_LOG or WEFT_LOG, else info].
    #[arg(long, value_name = "LEVEL")]
    pub log_level: Option<String>,
}

/// `50ms`, `1s`, `2m`, `100us`; `0` alone is zero (an interval turned off).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{s:?} has no unit: write it as 50ms, 1s or 2m"))?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (50ms, 1s, 2m)"))?;
    let scale = match unit.trim() {
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        u => return Err(format!("{s:?}: unknown unit {u:?} (us, ms, s, m)")),
    };
    Duration::try_from_secs_f64(n * scale).map_err(|e| format!("{s:?}: {e}"))
}

/// A duration setting of the config file: `300ms`, or a number of milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileDuration(pub Duration);

impl<'de> Deserialize<'de> for FileDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Ms(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Ms(ms) => Ok(FileDuration(Duration::from_millis(ms))),
            Raw::Text(t) => parse_duration(&t)
                .map(FileDuration)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// The file form: the long flag names with `_`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub redis: Option<String>,
    pub redis_password: Option<String>,
    pub redis_user: Option<String>,
    pub p4rt: Option<String>,
    pub p4rt_ca_cert: Option<PathBuf>,
    pub p4rt_cert: Option<PathBuf>,
    pub p4rt_key: Option<PathBuf>,
    pub p4rt_tls_domain: Option<String>,
    pub device_id: Option<u64>,
    pub election_id: Option<u128>,
    pub p4info: Option<PathBuf>,
    pub bmv2_json: Option<PathBuf>,
    #[serde(default)]
    pub ports: BTreeMap<String, String>,
    pub batch_size: Option<usize>,
    pub consumer_poll: Option<FileDuration>,
    pub counter_interval: Option<FileDuration>,
    pub status_interval: Option<FileDuration>,
    pub tuning_interval: Option<FileDuration>,
    pub consumer_poll_ms: Option<u64>,
    pub counter_interval_ms: Option<u64>,
    pub status_interval_ms: Option<u64>,
    pub bmv2_queue_scale: Option<f64>,
    pub queue_depth: Option<u32>,
    pub cell_bytes: Option<u32>,
    pub pfc_quanta: Option<u16>,
    pub watch_ports: Option<bool>,
    pub tuning_interval_ms: Option<u64>,
    #[serde(default)]
    pub tuning_line_rate: BTreeMap<String, f64>,
    pub metrics: Option<String>,
    pub switch_name: Option<String>,
    pub log_format: Option<String>,
    pub log_level: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// How thresholds in bytes become BMv2 packets (see [`crate::qos`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueModel {
    pub scale: f64,
    pub queue_depth: u32,
    pub cell_bytes: Option<u32>,
    pub pfc_quanta: u16,
}

impl Default for QueueModel {
    fn default() -> Self {
        QueueModel {
            scale: 1.0,
            queue_depth: 64,
            cell_bytes: None,
            pfc_quanta: u16::MAX,
        }
    }
}

/// Where the pipeline comes from.
#[derive(Debug, Clone)]
pub enum PipelineSource {
    /// Weft's pipeline, compiled into the binary (weft-p4).
    Embedded,
    Files {
        p4info: PathBuf,
        bmv2_json: PathBuf,
    },
}

/// TLS to the switch: the CA to trust, this plugin's certificate and key (mutual TLS), the name
/// to verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P4rtTls {
    pub ca_cert: PathBuf,
    pub client: Option<(PathBuf, PathBuf)>,
    pub domain: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PluginConfig {
    pub redis: String,
    pub redis_user: Option<String>,
    pub redis_password: Option<String>,
    pub p4rt: String,
    /// TLS to the switch's P4Runtime server (`None`: plaintext).
    pub p4rt_tls: Option<P4rtTls>,
    pub device_id: u64,
    pub election_id: u128,
    pub pipeline: PipelineSource,
    /// SONiC port name → Linux interface.
    pub interfaces: BTreeMap<String, String>,
    pub batch_size: usize,
    pub consumer_poll: Duration,
    pub counter_interval: Option<Duration>,
    pub status_interval: Duration,
    pub queue: QueueModel,
    pub watch_ports: bool,
    /// Run-time ECN tuning interval (`None`: off).
    pub tuning_interval: Option<Duration>,
    /// Port (or `*`) → service rate in packets/s, overriding PORT speed.
    pub tuning_line_rate: BTreeMap<String, f64>,
    /// `--metrics`: where /metrics is served (`None`: off).
    pub metrics: Option<String>,
    /// `--switch-name`: the `switch` label of the metrics.
    pub switch_name: String,
    pub log_format: LogFormat,
    /// `--log-level` (`None`: RUST_LOG, WEFT_LOG, else info).
    pub log_level: Option<String>,
}

impl PluginConfig {
    /// A configuration with defaults for everything but the two endpoints.
    pub fn new(redis: impl Into<String>, p4rt: impl Into<String>) -> Self {
        PluginConfig {
            redis: redis.into(),
            redis_user: None,
            redis_password: None,
            p4rt: p4rt.into(),
            p4rt_tls: None,
            device_id: 1,
            election_id: 1,
            pipeline: PipelineSource::Embedded,
            interfaces: BTreeMap::new(),
            batch_size: 4096,
            consumer_poll: Duration::from_millis(100),
            counter_interval: Some(Duration::from_secs(1)),
            status_interval: Duration::from_secs(1),
            queue: QueueModel::default(),
            watch_ports: false,
            tuning_interval: Some(Duration::from_millis(50)),
            tuning_line_rate: BTreeMap::new(),
            metrics: None,
            switch_name: "device-1".into(),
            log_format: LogFormat::Text,
            log_level: None,
        }
    }

    /// Resolves flags over the file named by `--config` (if any).
    pub fn from_cli(cli: Cli) -> Result<Self, ConfigError> {
        let file = match &cli.config {
            Some(p) => load_file(p)?,
            None => FileConfig::default(),
        };
        Self::resolve(cli, file)
    }

    pub fn resolve(cli: Cli, file: FileConfig) -> Result<Self, ConfigError> {
        let missing = |setting: &'static str, flag: &str| ConfigError::Invalid {
            setting,
            reason: format!("required: give {flag} or set it in the config file"),
        };
        let redis = cli
            .redis
            .or(file.redis)
            .ok_or_else(|| missing("redis", "--redis"))?;
        let p4rt = cli
            .p4rt
            .or(file.p4rt)
            .ok_or_else(|| missing("p4rt", "--p4rt"))?;
        let mut c = PluginConfig::new(redis, p4rt);
        c.redis_user = cli.redis_user.or(file.redis_user);
        if let Some(ca) = cli.p4rt_ca_cert.or(file.p4rt_ca_cert) {
            let client = match (
                cli.p4rt_cert.or(file.p4rt_cert),
                cli.p4rt_key.or(file.p4rt_key),
            ) {
                (Some(c), Some(k)) => Some((c, k)),
                (None, None) => None,
                _ => {
                    return Err(ConfigError::Invalid {
                        setting: "p4rt_cert",
                        reason: "p4rt_cert and p4rt_key go together".into(),
                    });
                }
            };
            c.p4rt_tls = Some(P4rtTls {
                ca_cert: ca,
                client,
                domain: cli.p4rt_tls_domain.or(file.p4rt_tls_domain),
            });
        }
        c.redis_password = cli.redis_password.or(file.redis_password);
        if let Some(d) = cli.device_id.or(file.device_id) {
            c.device_id = d;
        }
        if let Some(e) = cli.election_id.or(file.election_id) {
            if e == 0 {
                return Err(ConfigError::Invalid {
                    setting: "election_id",
                    reason: "must be > 0 (0 means no election id in P4Runtime)".into(),
                });
            }
            c.election_id = e;
        }
        c.pipeline = match (cli.p4info.or(file.p4info), cli.bmv2_json.or(file.bmv2_json)) {
            (None, None) => PipelineSource::Embedded,
            (Some(p4info), Some(bmv2_json)) => PipelineSource::Files { p4info, bmv2_json },
            _ => {
                return Err(ConfigError::Invalid {
                    setting: "p4info",
                    reason: "p4info and bmv2_json go together".into(),
                });
            }
        };
        c.interfaces = file.ports;
        for p in &cli.ports {
            let Some((port, ifname)) = p.split_once('=') else {
                return Err(ConfigError::Invalid {
                    setting: "port",
                    reason: format!("{p:?} is not PORT=INTERFACE (e.g. Ethernet0=veth0)"),
                });
            };
            c.interfaces
                .insert(port.trim().to_string(), ifname.trim().to_string());
        }
        for (port, ifname) in &c.interfaces {
            if let Err(why) = check_port_name(port).and_then(|()| check_ifname(ifname)) {
                return Err(ConfigError::Invalid {
                    setting: "port",
                    reason: format!("{port:?}={ifname:?}: {why}"),
                });
            }
        }
        if let Some(b) = cli.batch_size.or(file.batch_size) {
            if b == 0 {
                return Err(ConfigError::Invalid {
                    setting: "batch_size",
                    reason: "must be > 0".into(),
                });
            }
            c.batch_size = b;
        }
        let ms = |v: Option<u64>| v.map(Duration::from_millis);
        let fd = |v: Option<FileDuration>| v.map(|d| d.0);
        if let Some(d) = cli
            .consumer_poll
            .or(ms(cli.consumer_poll_ms))
            .or(fd(file.consumer_poll))
            .or(ms(file.consumer_poll_ms))
        {
            c.consumer_poll = d.max(Duration::from_millis(1));
        }
        if let Some(d) = cli
            .counter_interval
            .or(ms(cli.counter_interval_ms))
            .or(fd(file.counter_interval))
            .or(ms(file.counter_interval_ms))
        {
            c.counter_interval = (!d.is_zero()).then_some(d);
        }
        if let Some(d) = cli
            .status_interval
            .or(ms(cli.status_interval_ms))
            .or(fd(file.status_interval))
            .or(ms(file.status_interval_ms))
        {
            c.status_interval = d.max(Duration::from_millis(10));
        }
        if let Some(s) = cli.bmv2_queue_scale.or(file.bmv2_queue_scale) {
            if !(s.is_finite() && s > 0.0) {
                return Err(ConfigError::Invalid {
                    setting: "bmv2_queue_scale",
                    reason: format!("{s} is not a positive number"),
                });
            }
            c.queue.scale = s;
        }
        if let Some(d) = cli.queue_depth.or(file.queue_depth) {
            if d < 4 {
                return Err(ConfigError::Invalid {
                    setting: "queue_depth",
                    reason: "must be at least 4 packets".into(),
                });
            }
            c.queue.queue_depth = d;
        }
        if let Some(cb) = cli.cell_bytes.or(file.cell_bytes) {
            if cb == 0 {
                return Err(ConfigError::Invalid {
                    setting: "cell_bytes",
                    reason: "must be > 0".into(),
                });
            }
            c.queue.cell_bytes = Some(cb);
        }
        if let Some(q) = cli.pfc_quanta.or(file.pfc_quanta) {
            c.queue.pfc_quanta = q;
        }
        c.watch_ports = cli.watch_ports || file.watch_ports.unwrap_or(false);
        if let Some(d) = cli
            .tuning_interval
            .or(ms(cli.tuning_interval_ms))
            .or(fd(file.tuning_interval))
            .or(ms(file.tuning_interval_ms))
        {
            c.tuning_interval = (!d.is_zero()).then(|| d.max(Duration::from_millis(5)));
        }
        c.tuning_line_rate = file.tuning_line_rate;
        for r in &cli.tuning_line_rate {
            let parsed = r
                .split_once('=')
                .and_then(|(p, v)| Some((p.trim(), v.trim().parse::<f64>().ok()?)));
            let Some((port, pps)) = parsed else {
                return Err(ConfigError::Invalid {
                    setting: "tuning_line_rate",
                    reason: format!("{r:?} is not PORT=PPS (e.g. Ethernet0=500 or *=500)"),
                });
            };
            c.tuning_line_rate.insert(port.to_string(), pps);
        }
        for (port, pps) in &c.tuning_line_rate {
            if port.is_empty() || !(pps.is_finite() && *pps > 0.0) {
                return Err(ConfigError::Invalid {
                    setting: "tuning_line_rate",
                    reason: format!("{port}={pps}: needs a port (or *) and a positive rate"),
                });
            }
        }
        c.metrics = cli
            .metrics
            .or(file.metrics)
            .filter(|m| !matches!(m.as_str(), "off" | "none"));
        if let Some(m) = &c.metrics {
            weft_telemetry::server::parse_addr(m).map_err(|e| ConfigError::Invalid {
                setting: "metrics",
                reason: e.to_string(),
            })?;
        }
        c.switch_name = cli
            .switch_name
            .or(file.switch_name)
            .unwrap_or_else(|| format!("device-{}", c.device_id));
        c.log_format = match cli.log_format.or(file.log_format).as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    setting: "log_format",
                    reason: format!("{other:?}: expected text or json"),
                });
            }
        };
        c.log_level = match cli.log_level.or(file.log_level) {
            None => None,
            Some(l) if ["error", "warn", "info", "debug", "trace"].contains(&l.as_str()) => Some(l),
            Some(other) => {
                return Err(ConfigError::Invalid {
                    setting: "log_level",
                    reason: format!("{other:?}: expected error, warn, info, debug or trace"),
                });
            }
        };
        Ok(c)
    }
}

/// Reads a YAML or JSON config file (JSON is YAML, so one parser reads both).
pub fn load_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    })?;
    serde_yaml_ng::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        let mut v = vec!["weft-plugin"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).expect("flags parse")
    }

    #[test]
    fn flags_override_the_file_and_defaults_fill_the_rest() {
        let file: FileConfig = serde_yaml_ng::from_str(
            "redis: unix:///tmp/r.sock\np4rt: 127.0.0.1:1\ndevice_id: 7\nports: {Ethernet0: veth0}\nbmv2_queue_scale: 0.1\n",
        )
        .expect("yaml");
        let c = PluginConfig::resolve(
            cli(&["--p4rt", "127.0.0.1:9559", "--port", "Ethernet4=veth2"]),
            file,
        )
        .expect("resolves");
        assert_eq!(c.p4rt, "127.0.0.1:9559");
        assert_eq!(c.redis, "unix:///tmp/r.sock");
        assert_eq!(c.device_id, 7);
        assert_eq!(c.interfaces.len(), 2);
        assert_eq!(c.queue.scale, 0.1);
        assert_eq!(c.batch_size, 4096);
        assert!(matches!(c.pipeline, PipelineSource::Embedded));
    }

    #[test]
    fn json_files_parse_too_and_unknown_settings_are_refused() {
        let ok: FileConfig =
            serde_yaml_ng::from_str(r#"{"redis": "/tmp/r.sock", "p4rt": "h:1", "device_id": 2}"#)
                .expect("json");
        assert_eq!(ok.device_id, Some(2));
        let bad = serde_yaml_ng::from_str::<FileConfig>("redis: x\nredis_pasword: y\n");
        assert!(bad.is_err(), "a misspelt setting must not be ignored");
    }

    #[test]
    fn bad_settings_name_the_setting() {
        let e = PluginConfig::resolve(cli(&["--p4rt", "h:1"]), FileConfig::default())
            .expect_err("no redis");
        assert!(e.to_string().starts_with("redis:"), "{e}");
        let e = PluginConfig::resolve(
            cli(&["--redis", "/r", "--p4rt", "h:1", "--port", "Ethernet0"]),
            FileConfig::default(),
        )
        .expect_err("bad port");
        assert!(e.to_string().contains("PORT=INTERFACE"), "{e}");
        let e = PluginConfig::resolve(
            cli(&["--redis", "/r", "--p4rt", "h:1", "--bmv2-queue-scale=-1"]),
            FileConfig::default(),
        )
        .expect_err("bad scale");
        assert!(e.to_string().contains("bmv2_queue_scale"), "{e}");
    }

    #[test]
    fn durations_are_written_with_units_and_the_older_ms_flags_still_work() {
        let base = ["--redis", "/r", "--p4rt", "h:1"];
        let with = |extra: &[&str]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            PluginConfig::resolve(cli(&v), FileConfig::default()).expect("resolves")
        };
        let c = with(&["--counter-interval", "300ms", "--tuning-interval", "0"]);
        assert_eq!(c.counter_interval, Some(Duration::from_millis(300)));
        assert_eq!(c.tuning_interval, None, "0 turns it off");
        let c = with(&["--counter-interval-ms", "300", "--status-interval", "2s"]);
        assert_eq!(c.counter_interval, Some(Duration::from_millis(300)));
        assert_eq!(c.status_interval, Duration::from_secs(2));
        assert!(parse_duration("300").is_err(), "a bare number has no unit");
        let file: FileConfig =
            serde_yaml_ng::from_str("counter_interval: 250ms\nconsumer_poll_ms: 20\n")
                .expect("yaml");
        let c = PluginConfig::resolve(cli(&base), file).expect("resolves");
        assert_eq!(c.counter_interval, Some(Duration::from_millis(250)));
        assert_eq!(c.consumer_poll, Duration::from_millis(20));
    }

    fn fmt_duration(d: Duration) -> String {
        if d.as_millis().is_multiple_of(1000) {
            format!("{}s", d.as_secs())
        } else {
            format!("{}ms", d.as_millis())
        }
    }

    #[test]
    fn help_shows_every_default_the_configuration_really_has() {
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        let d = PluginConfig::new("r", "p");
        let expect = [
            ("--device-id", d.device_id.to_string()),
            ("--election-id", d.election_id.to_string()),
            ("--batch-size", d.batch_size.to_string()),
            ("--consumer-poll", fmt_duration(d.consumer_poll)),
            (
                "--counter-interval",
                fmt_duration(d.counter_interval.unwrap_or_default()),
            ),
            ("--status-interval", fmt_duration(d.status_interval)),
            (
                "--tuning-interval",
                fmt_duration(d.tuning_interval.unwrap_or_default()),
            ),
            ("--bmv2-queue-scale", format!("{}", d.queue.scale)),
            ("--queue-depth", d.queue.queue_depth.to_string()),
            ("--pfc-quanta", d.queue.pfc_quanta.to_string()),
        ];
        let lines: Vec<&str> = help.lines().collect();
        for (flag, want) in expect {
            let at = lines
                .iter()
                .position(|l| l.trim_start().starts_with(&format!("{flag} <")))
                .unwrap_or_else(|| panic!("{flag} not in help:\n{help}"));
            let text: Vec<&str> = lines[at + 1..]
                .iter()
                .take_while(|l| !l.trim_start().starts_with('-'))
                .copied()
                .collect();
            let text = text
                .join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                text.contains(&format!("[default: {want}]")),
                "{flag}: help should say [default: {want}]: {text}"
            );
        }
        // Examples come first, right after the one-line summary.
        assert_eq!(lines.get(2).map(|l| l.trim()), Some("Examples:"), "{help}");
    }

    #[test]
    fn every_flag_has_a_help_line() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let bad: Vec<&str> = cmd
            .get_arguments()
            .filter(|a| a.get_help().is_none_or(|h| h.to_string().trim().is_empty()))
            .map(|a| a.get_id().as_str())
            .filter(|id| *id != "help" && *id != "version")
            .collect();
        assert!(bad.is_empty(), "flags without help: {bad:?}");
    }
}

/// A SONiC port name as it becomes part of DB keys (`PORT_TABLE:<port>`, `COUNTERS:<port>:<q>`):
/// the intent's name rule (1–63 of `A-Z a-z 0-9 _ . -`, letter or digit first), asserted again
/// here because the plugin takes it from its own command line or file.
fn check_port_name(port: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    match port.chars().next() {
        None => Err("empty port name".into()),
        Some(_) if port.len() > 63 => Err("a port name has at most 63 characters".into()),
        Some(c) if !c.is_ascii_alphanumeric() => {
            Err("a port name starts with a letter or digit".into())
        }
        Some(_) if !port.chars().all(ok_char) => {
            Err("a port name has only A-Z a-z 0-9 _ . - (it becomes part of SONiC DB keys)".into())
        }
        Some(_) => Ok(()),
    }
}

/// What Linux accepts as an interface name (`dev_valid_name`): 1–15 bytes, not `.` or `..`, no
/// `/`, `:` or whitespace.
fn check_ifname(ifname: &str) -> Result<(), String> {
    if ifname.is_empty() || ifname.len() > 15 {
        return Err("a Linux interface name has 1 to 15 bytes".into());
    }
    if ifname == "." || ifname == ".." {
        return Err("not a Linux interface name".into());
    }
    if ifname
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
    {
        return Err("a Linux interface name has no '/', ':', spaces or control characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn port_and_interface_names_that_would_break_keys_or_netlink_are_refused() {
        for ok in ["Ethernet0", "Ethernet124", "eth-1.2"] {
            assert_eq!(check_port_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", "Ethernet|0", "Eth:0", "Eth 0", "-Eth", &"E".repeat(64)] {
            assert!(check_port_name(bad).is_err(), "{bad:?}");
        }
        for ok in ["veth0", "s1p1", "s4294967p12345"] {
            assert_eq!(check_ifname(ok), Ok(()), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a:b", "a b", "abcdefghijklmnop"] {
            assert!(check_ifname(bad).is_err(), "{bad:?}");
        }
    }
}
