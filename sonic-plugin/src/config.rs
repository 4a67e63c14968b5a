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
Examples:
  # BMv2 on 127.0.0.1:9559 (device 1), the switch's SONiC Redis on a unix socket:
  weft-plugin --redis unix:///var/run/redis/redis.sock --p4rt 127.0.0.1:9559 --device-id 1

  # Redis over TCP with a password, ports mapped to Linux interfaces (netlink port state):
  weft-plugin --redis redis://127.0.0.1:6379 --redis-password s3cret \\
      --p4rt 127.0.0.1:9559 --port Ethernet0=veth0 --port Ethernet4=veth2

  # Everything from a file (YAML or JSON; flags given as well override it):
  weft-plugin --config /etc/weft/plugin.yaml

  A config file uses the long flag names with '_' for '-', and `ports` as a map:
    redis: unix:///tmp/sw1/redis.sock
    p4rt: 127.0.0.1:9559
    device_id: 1
    ports: { Ethernet0: veth0, Ethernet4: veth2 }
    bmv2_queue_scale: 0.05

Signals: SIGUSR1 logs a health line; SIGTERM/SIGINT stop. Status: STATE_DB WEFT_PLUGIN|status.";

/// Per-switch Weft daemon (SONiC p4orch role): APPL_DB P4RT_TABLE and CONFIG_DB QoS to the
/// switch over P4Runtime, port state, PFC watchdog and counters back into SONiC's databases.
#[derive(Debug, Parser, Default)]
#[command(name = "weft-plugin", version, after_help = AFTER_HELP)]
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
    /// Redis ACL user.
    #[arg(long, value_name = "USER")]
    pub redis_user: Option<String>,
    /// P4Runtime server of the switch, host:port.
    #[arg(long, env = "WEFT_P4RT", value_name = "ADDR")]
    pub p4rt: Option<String>,
    /// P4Runtime device id (also the pipeline's switch_id).
    #[arg(long, value_name = "N")]
    pub device_id: Option<u64>,
    /// P4Runtime election id (higher wins arbitration).
    #[arg(long, value_name = "N")]
    pub election_id: Option<u128>,
    /// P4Info (binary protobuf) to push; default: Weft's pipeline built into this binary.
    #[arg(long, value_name = "FILE", requires = "bmv2_json")]
    pub p4info: Option<PathBuf>,
    /// BMv2 JSON to push with --p4info.
    #[arg(long, value_name = "FILE", requires = "p4info")]
    pub bmv2_json: Option<PathBuf>,
    /// Port to Linux interface, for netlink link state (repeatable): Ethernet0=veth0.
    #[arg(long = "port", value_name = "PORT=IF")]
    pub ports: Vec<String>,
    /// Keys taken from APPL_DB per batch.
    #[arg(long, value_name = "N")]
    pub batch_size: Option<usize>,
    /// How often the consumer pops even without a wake-up, in ms.
    #[arg(long, value_name = "MS")]
    pub consumer_poll_ms: Option<u64>,
    /// Counter polling into COUNTERS_DB, in ms (0: off).
    #[arg(long, value_name = "MS")]
    pub counter_interval_ms: Option<u64>,
    /// STATE_DB WEFT_PLUGIN|status refresh, in ms.
    #[arg(long, value_name = "MS")]
    pub status_interval_ms: Option<u64>,
    /// Multiplies queue thresholds (bytes → packets) before clamping to --queue-depth: BMv2's
    /// queues hold 64 packets, far less than a hardware buffer.
    #[arg(long, value_name = "F")]
    pub bmv2_queue_scale: Option<f64>,
    /// Packets a BMv2 egress queue holds (thresholds are clamped below it).
    #[arg(long, value_name = "N")]
    pub queue_depth: Option<u32>,
    /// Bytes per queued packet for threshold conversion (default: the port's MTU).
    #[arg(long, value_name = "BYTES")]
    pub cell_bytes: Option<u32>,
    /// PFC pause quanta written to queue_config_table (set_queue_config_pfc).
    #[arg(long, value_name = "N")]
    pub pfc_quanta: Option<u16>,
    /// Give BMv2 each member's watch_port. Off by default: PI crashes BMv2 when every watch
    /// port of a group is down (see p4/README.md); the down mask already fails over.
    #[arg(long)]
    pub watch_ports: bool,
    /// Run-time ECN tuning: sampling interval in ms (0: off; default 50).
    #[arg(long, value_name = "MS")]
    pub tuning_interval_ms: Option<u64>,
    /// A port's service rate in packets/s for the tuner's utilization (repeatable; `*` for
    /// every port): on BMv2, the rate Thrift `set_queue_rate` gave it. Default: PORT speed.
    #[arg(long = "tuning-line-rate", value_name = "PORT=PPS")]
    pub tuning_line_rate: Vec<String>,
    /// Log format: text or json.
    #[arg(long, value_name = "FMT")]
    pub log_format: Option<String>,
}

/// The file form: the long flag names with `_`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub redis: Option<String>,
    pub redis_password: Option<String>,
    pub redis_user: Option<String>,
    pub p4rt: Option<String>,
    pub device_id: Option<u64>,
    pub election_id: Option<u128>,
    pub p4info: Option<PathBuf>,
    pub bmv2_json: Option<PathBuf>,
    #[serde(default)]
    pub ports: BTreeMap<String, String>,
    pub batch_size: Option<usize>,
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
    pub log_format: Option<String>,
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

#[derive(Debug, Clone)]
pub struct PluginConfig {
    pub redis: String,
    pub redis_user: Option<String>,
    pub redis_password: Option<String>,
    pub p4rt: String,
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
    pub log_format: LogFormat,
}

impl PluginConfig {
    /// A configuration with defaults for everything but the two endpoints.
    pub fn new(redis: impl Into<String>, p4rt: impl Into<String>) -> Self {
        PluginConfig {
            redis: redis.into(),
            redis_user: None,
            redis_password: None,
            p4rt: p4rt.into(),
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
            log_format: LogFormat::Text,
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
            if port.is_empty() || ifname.is_empty() || ifname.len() > 15 || ifname.contains('/') {
                return Err(ConfigError::Invalid {
                    setting: "port",
                    reason: format!("{port}={ifname}: not a port name and a Linux interface name"),
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
        if let Some(ms) = cli.consumer_poll_ms.or(file.consumer_poll_ms) {
            c.consumer_poll = Duration::from_millis(ms.max(1));
        }
        if let Some(ms) = cli.counter_interval_ms.or(file.counter_interval_ms) {
            c.counter_interval = (ms > 0).then(|| Duration::from_millis(ms));
        }
        if let Some(ms) = cli.status_interval_ms.or(file.status_interval_ms) {
            c.status_interval = Duration::from_millis(ms.max(10));
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
        if let Some(ms) = cli.tuning_interval_ms.or(file.tuning_interval_ms) {
            c.tuning_interval = (ms > 0).then(|| Duration::from_millis(ms.max(5)));
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
}
