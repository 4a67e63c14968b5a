//! The plugin's options, defined once. [`Options`] is at the same time the command line (clap:
//! flags, and the environment for the few with `env`), and the config file (serde: the long flag
//! names with `_`, `ports` and `tuning_line_rate` as maps). The layers are taken file < env <
//! flags ([`Options::over`], generated from the one field list), then [`Options::resolve`] checks
//! them and fills in the defaults, which live in one place ([`PluginConfig::new`]; the help text
//! states them and a test holds it to them).

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
    #[error("config file {path}: {source}")]
    Parse {
        path: String,
        source: serde_yaml_ng::Error,
    },
    #[error("{setting}: {reason}")]
    Invalid {
        setting: &'static str,
        reason: String,
    },
    #[error("port: {port:?}={ifname:?}: {source}")]
    Name {
        port: String,
        ifname: String,
        source: NameError,
    },
}

fn invalid(setting: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        setting,
        reason: reason.into(),
    }
}

/// A duration that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{0:?} has no unit: write it as 50ms, 1s or 2m")]
    NoUnit(String),
    #[error("{0:?} is not a duration (50ms, 1s, 2m)")]
    NotANumber(String),
    #[error("{text:?}: unknown unit {unit:?} (us, ms, s, m)")]
    Unit { text: String, unit: String },
    #[error("{0:?}: out of range")]
    Range(String),
}

/// A port or interface name that would break DB keys or netlink.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("empty port name")]
    EmptyPort,
    #[error("a port name has at most 63 characters")]
    PortTooLong,
    #[error("a port name starts with a letter or digit")]
    PortStart,
    #[error("a port name has only A-Z a-z 0-9 _ . - (it becomes part of SONiC DB keys)")]
    PortChars,
    #[error("a Linux interface name has 1 to 15 bytes")]
    IfLength,
    #[error("not a Linux interface name")]
    IfDots,
    #[error("a Linux interface name has no '/', ':', spaces or control characters")]
    IfChars,
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

/// How one layer of options goes over another: a value given wins, lists add up (a later
/// `PORT=...` replaces an earlier one for the same port), a switch is on if either turns it on.
pub trait Layer {
    fn over(self, below: Self) -> Self;
}

impl<T> Layer for Option<T> {
    fn over(self, below: Self) -> Self {
        self.or(below)
    }
}

impl<T> Layer for Vec<T> {
    fn over(self, below: Self) -> Self {
        let mut v = below;
        v.extend(self);
        v
    }
}

impl Layer for bool {
    fn over(self, below: Self) -> Self {
        self || below
    }
}

/// Defines [`Options`] from one list of fields, and [`Options::over`] from the same list.
macro_rules! options {
    (
        $(#[$sm:meta])*
        pub struct Options {
            $( $(#[$fm:meta])* pub $name:ident : $ty:ty, )*
        }
    ) => {
        $(#[$sm])*
        pub struct Options {
            $( $(#[$fm])* pub $name: $ty, )*
        }

        impl Options {
            /// These options over `below` (this layer wins).
            pub fn over(self, below: Options) -> Options {
                Options { $( $name: Layer::over(self.$name, below.$name), )* }
            }
        }
    };
}

options! {
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
    ///   # Entries over SONiC's ZMQ channel (request/reply, per-key replies) as well as APPL_DB:
    ///   weft-plugin --redis unix:///var/run/redis/redis.sock --p4rt 127.0.0.1:9559 \
    ///       --zmq-endpoint ipc:///zmq_swss/p4orch_zmq_swss_ep
    ///
    ///   # Everything from a file (YAML or JSON; flags given as well override it):
    ///   weft-plugin --config /etc/weft/plugin.yaml --log-format json
    ///
    /// APPL_DB P4RT_TABLE and CONFIG_DB QoS go to the switch; port state, PFC watchdog and
    /// counters come back into SONiC's databases.
    #[derive(Debug, Parser, Default, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    #[command(name = "weft-plugin", version, after_help = AFTER_HELP, verbatim_doc_comment)]
    pub struct Options {
        /// YAML or JSON config file (flags override its settings).
        #[arg(long, value_name = "FILE")]
        #[serde(skip)]
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
        #[serde(deserialize_with = "map_entries")]
        pub ports: Vec<String>,
        /// Also take batches over SONiC's ZMQ channel (request/reply), bound here: tcp://HOST:PORT
        /// or ipc:///path (p4orch's is ipc:///zmq_swss/p4orch_zmq_swss_ep). APPL_DB P4RT_TABLE
        /// is still consumed and each batch is written there behind [default: Redis only].
        #[arg(long, env = "WEFT_ZMQ_ENDPOINT", value_name = "ENDPOINT")]
        pub zmq_endpoint: Option<String>,
        /// Keys taken from APPL_DB per batch [default: 4096].
        #[arg(long, value_name = "N")]
        pub batch_size: Option<usize>,
        /// How often the consumer pops even without a wake-up [default: 100ms].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        #[serde(deserialize_with = "file_duration")]
        pub consumer_poll: Option<Duration>,
        /// Counter polling into COUNTERS_DB (0: off) [default: 1s].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        #[serde(deserialize_with = "file_duration")]
        pub counter_interval: Option<Duration>,
        /// STATE_DB WEFT_PLUGIN|status refresh [default: 1s].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        #[serde(deserialize_with = "file_duration")]
        pub status_interval: Option<Duration>,
        /// Run-time ECN tuning: sampling interval (0: off) [default: 50ms].
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        #[serde(deserialize_with = "file_duration")]
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
        /// How long a PAUSE takes to stop the upstream queue on BMv2 (egress clone, the wire,
        /// packet-in, the upstream plugin's Thrift hold), ms: with --bmv2-thrift and a
        /// --line-rate, xoff is kept this long at the fastest line rate below the queue's end,
        /// so what arrives meanwhile still fits [default: 10].
        #[arg(long, value_name = "MS")]
        pub pfc_reaction_ms: Option<u32>,
        /// Give BMv2 each member's watch_port. Off by default: PI crashes BMv2 when every watch
        /// port of a group is down (see p4/README.md); the down mask already fails over.
        #[arg(long)]
        pub watch_ports: bool,
        /// A port's service rate in packets/s for the tuner's utilization (repeatable; `*` for
        /// every port): on BMv2, the rate Thrift `set_queue_rate` gave it [default: --line-rate,
        /// else PORT speed].
        #[arg(long = "tuning-line-rate", value_name = "PORT=PPS")]
        #[serde(deserialize_with = "map_entries")]
        pub tuning_line_rate: Vec<String>,
        /// BMv2's Thrift server (simple_switch --thrift-port), HOST:PORT: the plugin then
        /// pauses the switch's egress queues on the PFC frames they receive, and gives ports
        /// their --line-rate [default: off: the switch pauses by itself, or not at all].
        #[arg(long, value_name = "ADDR")]
        pub bmv2_thrift: Option<String>,
        /// A port's emulated line rate in packets/s (repeatable; `*` for every port): with
        /// --bmv2-thrift, its BMv2 queue rate, and the speed PFC pause quanta are timed at
        /// (one packet = the cell of --cell-bytes / --bmv2-queue-scale) [default: none: PORT
        /// speed, queues unlimited].
        #[arg(long = "line-rate", value_name = "PORT=PPS")]
        #[serde(deserialize_with = "map_entries")]
        pub line_rate: Vec<String>,
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
}

/// `50ms`, `1s`, `2m`, `100us`; `0` alone is zero (an interval turned off).
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| DurationError::NoUnit(s.into()))?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().map_err(|_| DurationError::NotANumber(s.into()))?;
    let scale = match unit.trim() {
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        u => {
            return Err(DurationError::Unit {
                text: s.into(),
                unit: u.into(),
            });
        }
    };
    Duration::try_from_secs_f64(n * scale).map_err(|_| DurationError::Range(s.into()))
}

/// A duration setting of the config file: `300ms`, or a number of milliseconds.
fn file_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Ms(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::Ms(ms)) => Ok(Some(Duration::from_millis(ms))),
        Some(Raw::Text(t)) => parse_duration(&t)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// A map of the config file (`ports`, `tuning_line_rate`) as the flag's `KEY=VALUE` list.
fn map_entries<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Value {
        Text(String),
        Number(f64),
    }
    let m = BTreeMap::<String, Value>::deserialize(d)?;
    Ok(m.into_iter()
        .map(|(k, v)| match v {
            Value::Text(t) => format!("{k}={t}"),
            Value::Number(n) => format!("{k}={n}"),
        })
        .collect())
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
    /// `--pfc-reaction-ms`.
    pub pfc_reaction_ms: u32,
    /// Packets kept free above xoff for what arrives while a PAUSE takes effect
    /// ([`crate::pause::headroom`]); 0 where the switch pauses by itself.
    pub pfc_headroom: u32,
}

impl Default for QueueModel {
    fn default() -> Self {
        QueueModel {
            scale: 1.0,
            queue_depth: 64,
            cell_bytes: None,
            pfc_quanta: u16::MAX,
            pfc_reaction_ms: 10,
            pfc_headroom: 0,
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

/// The options resolved: every default filled in, every value checked.
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
    /// Where batches are also taken over ZMQ (`None`: APPL_DB only).
    pub zmq_endpoint: Option<weft_sonic_db::zmq::ZmqEndpoint>,
    pub counter_interval: Option<Duration>,
    pub status_interval: Duration,
    pub queue: QueueModel,
    pub watch_ports: bool,
    /// Run-time ECN tuning interval (`None`: off).
    pub tuning_interval: Option<Duration>,
    /// Port (or `*`) → service rate in packets/s, overriding PORT speed.
    pub tuning_line_rate: BTreeMap<String, f64>,
    /// `--bmv2-thrift`: BMv2's Thrift server, for PFC pausing and queue rates (`None`: off).
    pub bmv2_thrift: Option<String>,
    /// Port (or `*`) → emulated line rate in packets/s.
    pub line_rate: BTreeMap<String, f64>,
    /// `--metrics`: where /metrics is served (`None`: off).
    pub metrics: Option<String>,
    /// `--switch-name`: the `switch` label of the metrics.
    pub switch_name: String,
    pub log_format: LogFormat,
    /// `--log-level` (`None`: RUST_LOG, WEFT_LOG, else info).
    pub log_level: Option<String>,
}

impl PluginConfig {
    /// A configuration with defaults for everything but the two endpoints: the one place the
    /// defaults are written.
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
            zmq_endpoint: None,
            counter_interval: Some(Duration::from_secs(1)),
            status_interval: Duration::from_secs(1),
            queue: QueueModel::default(),
            watch_ports: false,
            tuning_interval: Some(Duration::from_millis(50)),
            tuning_line_rate: BTreeMap::new(),
            bmv2_thrift: None,
            line_rate: BTreeMap::new(),
            metrics: None,
            switch_name: "device-1".into(),
            log_format: LogFormat::Text,
            log_level: None,
        }
    }

    /// The flags (and environment) over the file named by `--config`, resolved.
    pub fn from_options(flags: Options) -> Result<Self, ConfigError> {
        let file = match &flags.config {
            Some(p) => load_file(p)?,
            None => Options::default(),
        };
        Self::resolve(flags, file)
    }

    /// `flags` over `file`, resolved.
    pub fn resolve(flags: Options, file: Options) -> Result<Self, ConfigError> {
        flags.fold_ms().over(file.fold_ms()).resolve()
    }
}

/// An older `*_ms` spelling stands for the duration setting of its layer when that one is
/// not given.
fn with_ms(d: Option<Duration>, ms: Option<u64>) -> Option<Duration> {
    d.or(ms.map(Duration::from_millis))
}

impl Options {
    /// The older `*_ms` settings folded into the durations of the same layer, so a layer's
    /// `counter_interval_ms` still goes over a lower layer's `counter_interval`.
    fn fold_ms(mut self) -> Self {
        self.consumer_poll = with_ms(self.consumer_poll, self.consumer_poll_ms.take());
        self.counter_interval = with_ms(self.counter_interval, self.counter_interval_ms.take());
        self.status_interval = with_ms(self.status_interval, self.status_interval_ms.take());
        self.tuning_interval = with_ms(self.tuning_interval, self.tuning_interval_ms.take());
        self
    }

    /// Checks the settings and fills in the defaults.
    pub fn resolve(self) -> Result<PluginConfig, ConfigError> {
        let missing = |setting: &'static str, flag: &str| {
            invalid(
                setting,
                format!("required: give {flag} or set it in the config file"),
            )
        };
        let o = self;
        let redis = o.redis.clone().ok_or_else(|| missing("redis", "--redis"))?;
        let p4rt = o.p4rt.clone().ok_or_else(|| missing("p4rt", "--p4rt"))?;
        let mut c = PluginConfig::new(redis, p4rt);
        o.switch_and_tls(&mut c)?;
        o.ports_into(&mut c)?;
        o.intervals_into(&mut c)?;
        o.queue_into(&mut c)?;
        o.tuning_into(&mut c)?;
        o.output_into(&mut c)?;
        Ok(c)
    }

    fn switch_and_tls(&self, c: &mut PluginConfig) -> Result<(), ConfigError> {
        c.redis_user = self.redis_user.clone();
        c.redis_password = self.redis_password.clone();
        if let Some(ca) = &self.p4rt_ca_cert {
            let client = match (&self.p4rt_cert, &self.p4rt_key) {
                (Some(c), Some(k)) => Some((c.clone(), k.clone())),
                (None, None) => None,
                _ => return Err(invalid("p4rt_cert", "p4rt_cert and p4rt_key go together")),
            };
            c.p4rt_tls = Some(P4rtTls {
                ca_cert: ca.clone(),
                client,
                domain: self.p4rt_tls_domain.clone(),
            });
        }
        if let Some(d) = self.device_id {
            c.device_id = d;
        }
        if let Some(e) = self.election_id {
            if e == 0 {
                return Err(invalid(
                    "election_id",
                    "must be > 0 (0 means no election id in P4Runtime)",
                ));
            }
            c.election_id = e;
        }
        c.pipeline = match (&self.p4info, &self.bmv2_json) {
            (None, None) => PipelineSource::Embedded,
            (Some(p4info), Some(bmv2_json)) => PipelineSource::Files {
                p4info: p4info.clone(),
                bmv2_json: bmv2_json.clone(),
            },
            _ => return Err(invalid("p4info", "p4info and bmv2_json go together")),
        };
        Ok(())
    }

    fn ports_into(&self, c: &mut PluginConfig) -> Result<(), ConfigError> {
        for p in &self.ports {
            let Some((port, ifname)) = p.split_once('=') else {
                return Err(invalid(
                    "port",
                    format!("{p:?} is not PORT=INTERFACE (e.g. Ethernet0=veth0)"),
                ));
            };
            c.interfaces
                .insert(port.trim().to_string(), ifname.trim().to_string());
        }
        for (port, ifname) in &c.interfaces {
            if let Err(source) = check_port_name(port).and_then(|()| check_ifname(ifname)) {
                return Err(ConfigError::Name {
                    port: port.clone(),
                    ifname: ifname.clone(),
                    source,
                });
            }
        }
        if let Some(b) = self.batch_size {
            if b == 0 {
                return Err(invalid("batch_size", "must be > 0"));
            }
            c.batch_size = b;
        }
        if let Some(e) = &self.zmq_endpoint {
            c.zmq_endpoint = Some(e.parse().map_err(|e: weft_sonic_db::zmq::ZmqError| {
                invalid("zmq_endpoint", e.to_string())
            })?);
        }
        c.watch_ports = self.watch_ports;
        Ok(())
    }

    fn intervals_into(&self, c: &mut PluginConfig) -> Result<(), ConfigError> {
        if let Some(d) = self.consumer_poll {
            c.consumer_poll = d.max(Duration::from_millis(1));
        }
        if let Some(d) = self.counter_interval {
            c.counter_interval = (!d.is_zero()).then_some(d);
        }
        if let Some(d) = self.status_interval {
            c.status_interval = d.max(Duration::from_millis(10));
        }
        if let Some(d) = self.tuning_interval {
            c.tuning_interval = (!d.is_zero()).then(|| d.max(Duration::from_millis(5)));
        }
        Ok(())
    }

    fn queue_into(&self, c: &mut PluginConfig) -> Result<(), ConfigError> {
        if let Some(s) = self.bmv2_queue_scale {
            if !(s.is_finite() && s > 0.0) {
                return Err(invalid(
                    "bmv2_queue_scale",
                    format!("{s} is not a positive number"),
                ));
            }
            c.queue.scale = s;
        }
        if let Some(d) = self.queue_depth {
            if d < 4 {
                return Err(invalid("queue_depth", "must be at least 4 packets"));
            }
            c.queue.queue_depth = d;
        }
        if let Some(cb) = self.cell_bytes {
            if cb == 0 {
                return Err(invalid("cell_bytes", "must be > 0"));
            }
            c.queue.cell_bytes = Some(cb);
        }
        if let Some(q) = self.pfc_quanta {
            c.queue.pfc_quanta = q;
        }
        if let Some(ms) = self.pfc_reaction_ms {
            c.queue.pfc_reaction_ms = ms;
        }
        Ok(())
    }

    fn tuning_into(&self, c: &mut PluginConfig) -> Result<(), ConfigError> {
        c.tuning_line_rate = rates("tuning_line_rate", &self.tuning_line_rate)?;
        c.line_rate = rates("line_rate", &self.line_rate)?;
        if let Some(a) = &self.bmv2_thrift {
            let ok = a
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
            if !ok {
                return Err(invalid(
                    "bmv2_thrift",
                    format!("{a:?} is not HOST:PORT (e.g. 127.0.0.1:9090)"),
                ));
            }
            c.bmv2_thrift = Some(a.clone());
        }
        Ok(())
    }

    fn output_into(&self, c: &mut PluginConfig) -> Result<(), ConfigError> {
        c.metrics = self
            .metrics
            .clone()
            .filter(|m| !matches!(m.as_str(), "off" | "none"));
        if let Some(m) = &c.metrics {
            weft_telemetry::server::parse_addr(m).map_err(|e| invalid("metrics", e.to_string()))?;
        }
        c.switch_name = self
            .switch_name
            .clone()
            .unwrap_or_else(|| format!("device-{}", c.device_id));
        c.log_format = match self.log_format.as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => {
                return Err(invalid(
                    "log_format",
                    format!("{other:?}: expected text or json"),
                ));
            }
        };
        c.log_level = match &self.log_level {
            None => None,
            Some(l) if ["error", "warn", "info", "debug", "trace"].contains(&l.as_str()) => {
                Some(l.clone())
            }
            Some(other) => {
                return Err(invalid(
                    "log_level",
                    format!("{other:?}: expected error, warn, info, debug or trace"),
                ));
            }
        };
        Ok(())
    }
}

/// `PORT=PPS` entries (a later one for the same port wins) as a map of positive rates.
fn rates(setting: &'static str, entries: &[String]) -> Result<BTreeMap<String, f64>, ConfigError> {
    let mut out = BTreeMap::new();
    for r in entries {
        let parsed = r
            .split_once('=')
            .and_then(|(p, v)| Some((p.trim(), v.trim().parse::<f64>().ok()?)));
        let Some((port, pps)) = parsed else {
            return Err(invalid(
                setting,
                format!("{r:?} is not PORT=PPS (e.g. Ethernet0=500 or *=500)"),
            ));
        };
        if port.is_empty() || !(pps.is_finite() && pps > 0.0) {
            return Err(invalid(
                setting,
                format!("{port}={pps}: needs a port (or *) and a positive rate"),
            ));
        }
        out.insert(port.to_string(), pps);
    }
    Ok(out)
}

/// Reads a YAML or JSON config file (JSON is YAML, so one parser reads both).
pub fn load_file(path: &Path) -> Result<Options, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    })?;
    serde_yaml_ng::from_str(&text).map_err(|source| ConfigError::Parse {
        path: path.display().to_string(),
        source,
    })
}

/// A SONiC port name as it becomes part of DB keys (`PORT_TABLE:<port>`, `COUNTERS:<port>:<q>`):
/// the intent's name rule (1–63 of `A-Z a-z 0-9 _ . -`, letter or digit first), asserted again
/// here because the plugin takes it from its own command line or file.
fn check_port_name(port: &str) -> Result<(), NameError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    match port.chars().next() {
        None => Err(NameError::EmptyPort),
        Some(_) if port.len() > 63 => Err(NameError::PortTooLong),
        Some(c) if !c.is_ascii_alphanumeric() => Err(NameError::PortStart),
        Some(_) if !port.chars().all(ok_char) => Err(NameError::PortChars),
        Some(_) => Ok(()),
    }
}

/// What Linux accepts as an interface name (`dev_valid_name`): 1–15 bytes, not `.` or `..`, no
/// `/`, `:` or whitespace.
fn check_ifname(ifname: &str) -> Result<(), NameError> {
    if ifname.is_empty() || ifname.len() > 15 {
        return Err(NameError::IfLength);
    }
    if ifname == "." || ifname == ".." {
        return Err(NameError::IfDots);
    }
    if ifname
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
    {
        return Err(NameError::IfChars);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Options {
        let mut v = vec!["weft-plugin"];
        v.extend_from_slice(args);
        Options::try_parse_from(v).expect("flags parse")
    }

    #[test]
    fn flags_override_the_file_and_defaults_fill_the_rest() {
        let file: Options = serde_yaml_ng::from_str(
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
        let ok: Options =
            serde_yaml_ng::from_str(r#"{"redis": "/tmp/r.sock", "p4rt": "h:1", "device_id": 2}"#)
                .expect("json");
        assert_eq!(ok.device_id, Some(2));
        let bad = serde_yaml_ng::from_str::<Options>("redis: x\nredis_pasword: y\n");
        assert!(bad.is_err(), "a misspelt setting must not be ignored");
    }

    #[test]
    fn bad_settings_name_the_setting() {
        let e = PluginConfig::resolve(cli(&["--p4rt", "h:1"]), Options::default())
            .expect_err("no redis");
        assert!(e.to_string().starts_with("redis:"), "{e}");
        let e = PluginConfig::resolve(
            cli(&["--redis", "/r", "--p4rt", "h:1", "--port", "Ethernet0"]),
            Options::default(),
        )
        .expect_err("bad port");
        assert!(e.to_string().contains("PORT=INTERFACE"), "{e}");
        let e = PluginConfig::resolve(
            cli(&["--redis", "/r", "--p4rt", "h:1", "--bmv2-queue-scale=-1"]),
            Options::default(),
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
            PluginConfig::resolve(cli(&v), Options::default()).expect("resolves")
        };
        let c = with(&["--counter-interval", "300ms", "--tuning-interval", "0"]);
        assert_eq!(c.counter_interval, Some(Duration::from_millis(300)));
        assert_eq!(c.tuning_interval, None, "0 turns it off");
        let c = with(&["--counter-interval-ms", "300", "--status-interval", "2s"]);
        assert_eq!(c.counter_interval, Some(Duration::from_millis(300)));
        assert_eq!(c.status_interval, Duration::from_secs(2));
        assert!(parse_duration("300").is_err(), "a bare number has no unit");
        let file: Options =
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
        let help = Options::command().render_long_help().to_string();
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
            ("--pfc-reaction-ms", d.queue.pfc_reaction_ms.to_string()),
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
        let cmd = Options::command();
        let bad: Vec<&str> = cmd
            .get_arguments()
            .filter(|a| a.get_help().is_none_or(|h| h.to_string().trim().is_empty()))
            .map(|a| a.get_id().as_str())
            .filter(|id| *id != "help" && *id != "version")
            .collect();
        assert!(bad.is_empty(), "flags without help: {bad:?}");
    }
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

#[cfg(test)]
mod layer_tests {
    use super::*;

    #[test]
    fn a_layer_goes_over_the_one_below_field_by_field_and_lists_add_up() {
        let file: Options = serde_yaml_ng::from_str(
            "redis: /file\np4rt: h:1\nports: {Ethernet0: veth0, Ethernet4: veth4}\nwatch_ports: true\nconsumer_poll: 2s\n",
        )
        .expect("yaml");
        let flags = Options::try_parse_from([
            "weft-plugin",
            "--redis",
            "/flag",
            "--port",
            "Ethernet4=eth9",
            "--consumer-poll-ms",
            "30",
        ])
        .expect("flags");
        let c = PluginConfig::resolve(flags, file).expect("resolves");
        assert_eq!(c.redis, "/flag", "a flag goes over the file");
        assert_eq!(c.p4rt, "h:1", "the file fills what no flag gives");
        assert_eq!(c.interfaces["Ethernet0"], "veth0");
        assert_eq!(
            c.interfaces["Ethernet4"], "eth9",
            "a flag's PORT= replaces the file's"
        );
        assert!(c.watch_ports, "a switch stays on when the file turns it on");
        assert_eq!(
            c.consumer_poll,
            Duration::from_millis(30),
            "the older ms spelling of a flag still goes over the file"
        );
    }
}
