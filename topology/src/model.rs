//! The topology intent as an operator writes it (YAML). Every field an operator may omit is an
//! `Option` or has a documented default; `resolve` turns this into a complete [`crate::Topology`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::{Ipv4Net, Ipv6Net};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::units::{Bytes, Duration, Length, Speed};

/// The whole intent file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// Fabric-wide name, defaults and address pools.
    #[serde(default)]
    pub fabric: FabricSpec,
    /// Fabric generators; their items are merged with (and overridden by) the explicit ones below.
    #[serde(default)]
    pub generators: Vec<Generator>,
    #[serde(default)]
    pub switches: Vec<SwitchSpec>,
    #[serde(default)]
    pub hosts: Vec<HostSpec>,
    #[serde(default)]
    pub links: Vec<LinkSpec>,
    #[serde(default)]
    pub routing: RoutingSpec,
    #[serde(default)]
    pub qos: QosSpec,
    #[serde(default)]
    pub failover: FailoverSpec,
    /// Telemetry postcards (per-hop records of sampled and watched packets); no section: off.
    pub telemetry: Option<TelemetrySpec>,
}

/// Postcards: every switch sends one per-hop record (INT-XD style) for each watched packet and
/// for 1 in `sample` forwarded packets; the switch's plugin decodes them into STATE_DB.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySpec {
    /// A postcard for 1 in N forwarded packets at every switch; 0: watched flows only.
    /// Default 1000 (postcards then cost about 0.05% of the traffic's bytes per hop).
    pub sample: Option<u32>,
    /// Flows whose every packet gets a postcard at every hop.
    #[serde(default)]
    pub watch: Vec<WatchSpec>,
    /// Where postcards go: `packet-in` (to the switch's plugin over P4Runtime). Default
    /// `packet-in`.
    pub collector: Option<String>,
    /// Per-hop records each switch's plugin keeps (its STATE_DB `WEFT_POSTCARDS` stream; older
    /// ones are trimmed). Default 10000.
    pub max_records: Option<u64>,
}

/// A watched flow: every field given must match (a field left out matches anything).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchSpec {
    /// Source: a host's name or an IPv4/IPv6 address.
    pub src: Option<String>,
    /// Destination: a host's name or an IPv4/IPv6 address.
    pub dst: Option<String>,
    /// `udp`, `tcp` or an IP protocol number.
    pub protocol: Option<String>,
    /// Layer-4 destination port (4791 is RoCEv2).
    pub dst_port: Option<u16>,
    /// RoCEv2 destination queue pair (the BTH's 24-bit destination QP).
    pub qp: Option<u32>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FabricSpec {
    /// A name for the fabric, used in state files and reports.
    pub name: Option<String>,
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(default)]
    pub pools: Pools,
}

/// Values used wherever a port, link or switch does not say otherwise.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Port and link speed. Default 100G.
    pub speed: Option<Speed>,
    /// Maximum frame size in bytes on every port. Default 9100 (SONiC's default for RoCE).
    pub mtu: Option<u32>,
    /// Cable length. Default 5m (in-rack DAC).
    pub cable_length: Option<Length>,
    /// Host-facing speed for generated hosts. Default: `speed`.
    pub host_speed: Option<Speed>,
    /// Host-facing cable length. Default 2m.
    pub host_cable_length: Option<Length>,
    /// Where generated switches' P4Runtime servers listen: `HOST:BASE`; switch N gets BASE+N-1.
    /// Default `127.0.0.1:9559`.
    pub p4rt_address: Option<String>,
    /// Directory under which generated switches' SONiC Redis sockets live
    /// (`unix://DIR/<switch>/redis.sock`). Default `/run/weft/<fabric>`: each fabric its own.
    pub db_socket_dir: Option<String>,
    /// Whether hosts' NICs tolerate out-of-order delivery (out-of-order data placement). Default false.
    pub ooo_tolerant: Option<bool>,
    /// How P4RT entries reach each switch's consumer: `redis` (APPL_DB P4RT_TABLE, the default)
    /// or `zmq` (SONiC's ZMQ channel, APPL_DB still written behind).
    pub p4rt_transport: Option<P4rtTransport>,
    /// With `p4rt_transport: zmq`: `tcp://HOST:BASE` (switch N gets BASE+N-1) or `ipc:///DIR`
    /// (switch `S` gets `ipc:///DIR/S/p4rt_zmq.sock`). Default: `ipc://` beside each switch's
    /// generated DB socket.
    pub zmq_endpoint: Option<String>,
    /// Which program consumes P4RT entries on each switch: `weft` (weft-plugin, the default)
    /// or `sonic` (SONiC's own p4orch).
    pub consumer: Option<Consumer>,
}

/// How P4RT entries reach a switch's consumer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum P4rtTransport {
    /// swss-common's ProducerStateTable into APPL_DB P4RT_TABLE; answers on
    /// APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL.
    #[default]
    Redis,
    /// swss-common's ZMQ request/reply channel: one message per batch, per-key replies, APPL_DB
    /// written behind.
    Zmq,
}

impl P4rtTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            P4rtTransport::Redis => "redis",
            P4rtTransport::Zmq => "zmq",
        }
    }
}

/// Which program consumes a switch's P4RT entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Consumer {
    /// weft-plugin: its status row says when it is running, APPL_STATE_DB holds what it installed.
    #[default]
    Weft,
    /// SONiC's p4orch: ready when SONiC says so (ports initialised, no warm restart under way),
    /// installed state in APPL_DB P4RT_TABLE as p4orch leaves it (sonic-swss#3066).
    Sonic,
}

impl Consumer {
    pub fn as_str(self) -> &'static str {
        match self {
            Consumer::Weft => "weft",
            Consumer::Sonic => "sonic",
        }
    }
}

/// Address pools from which switch loopbacks and host addresses are allocated.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pools {
    /// Host IPv4 addresses, allocated one subnet per leaf. Default 10.0.0.0/10.
    #[schemars(with = "Option<Ipv4Cidr>")]
    pub hosts_v4: Option<Ipv4Net>,
    /// Host IPv6 addresses, one /64 per leaf. Default: none (IPv4 only).
    #[schemars(with = "Option<Ipv6Cidr>")]
    pub hosts_v6: Option<Ipv6Net>,
    /// Switch loopbacks. Default 10.255.0.0/16.
    #[schemars(with = "Option<Ipv4Cidr>")]
    pub loopbacks_v4: Option<Ipv4Net>,
}

/// Schema stand-ins for `ipnet` prefixes, which carry no schema of their own.
#[derive(JsonSchema)]
#[schemars(transparent)]
#[allow(dead_code)]
struct Ipv4Cidr(#[schemars(extend("format" = "ipv4-cidr"))] String);

#[derive(JsonSchema)]
#[schemars(transparent)]
#[allow(dead_code)]
struct Ipv6Cidr(#[schemars(extend("format" = "ipv6-cidr"))] String);

/// A fabric generator. Generated names are deterministic so intents and state files stay stable.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Generator {
    /// Two tiers: every leaf connects to every spine with `uplinks` parallel links.
    LeafSpine {
        spines: u32,
        leaves: u32,
        hosts_per_leaf: u32,
        /// Parallel links between each leaf and each spine. Default 1.
        uplinks: Option<u32>,
        /// Ports per switch. Default: just enough.
        ports: Option<u32>,
        /// Speed of leaf-spine links. Default: the fabric default.
        uplink_speed: Option<Speed>,
        /// Cable length of leaf-spine links. Default: the fabric default.
        uplink_cable_length: Option<Length>,
    },
    /// A three-tier fat-tree of radix k: k pods, k³/4 hosts, 5k²/4 switches.
    FatTree {
        k: u32,
        /// Hosts per edge switch. Default k/2 (no oversubscription).
        hosts_per_leaf: Option<u32>,
    },
    /// Two-tier fat-trees, one per plane; each server has one NIC port per plane (DeepSeek-V3).
    MultiPlane {
        planes: u32,
        /// Switch radix k: each plane has k leaves, k/2 spines and k²/2 servers.
        radix: u32,
    },
    /// Rail-optimized: GPU i of every server connects to rail i's leaf; spines join the rails.
    RailOptimized {
        servers: u32,
        gpus_per_server: u32,
        /// Switch radix. Default 64.
        radix: Option<u32>,
    },
}

/// Switch role. Tier numbers count from 1 at the host-facing layer.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Leaf,
    Spine,
    Superspine,
}

impl Role {
    pub fn tier(self) -> u8 {
        match self {
            Role::Leaf => 1,
            Role::Spine => 2,
            Role::Superspine => 3,
        }
    }
    pub fn from_tier(t: u8) -> Option<Role> {
        match t {
            1 => Some(Role::Leaf),
            2 => Some(Role::Spine),
            3 => Some(Role::Superspine),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leaf => "leaf",
            Role::Spine => "spine",
            Role::Superspine => "superspine",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    pub name: String,
    /// leaf, spine or superspine. Required unless the switch is generated or `tier` is given.
    pub role: Option<Role>,
    /// 1 (leaf), 2 (spine) or 3 (superspine); an alternative to `role`.
    pub tier: Option<u8>,
    /// P4Runtime device id. Default: allocated.
    pub device_id: Option<u64>,
    /// P4Runtime server address HOST:PORT.
    pub p4rt_address: Option<String>,
    /// The switch's SONiC Redis: `redis://HOST:PORT[/]`, `unix:///path.sock` or a socket path.
    pub db: Option<String>,
    /// `redis` or `zmq` (see `fabric.defaults.p4rt_transport`).
    pub p4rt_transport: Option<P4rtTransport>,
    /// The ZMQ endpoint of the switch's consumer: `tcp://HOST:PORT` or `ipc:///path`.
    pub zmq_endpoint: Option<String>,
    /// `weft` or `sonic` (see `fabric.defaults.consumer`).
    pub consumer: Option<Consumer>,
    pub router_mac: Option<MacAddr>,
    pub loopback: Option<Ipv4Addr>,
    /// Plane of a multi-plane fabric.
    pub plane: Option<u32>,
    /// Ports; generated switches already have theirs, and entries here override them by name.
    #[serde(default)]
    pub ports: Vec<PortSpec>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AdminState {
    #[default]
    Up,
    Down,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PortSpec {
    /// SONiC port name, `EthernetN`.
    pub name: String,
    /// P4Runtime port id (CONFIG_DB `PORT|EthernetN` field `id`). Default: N/4 + 1.
    pub id: Option<u32>,
    pub speed: Option<Speed>,
    pub cable_length: Option<Length>,
    pub admin: Option<AdminState>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub name: String,
    /// Where the NIC is cabled: `SWITCH:PORT`.
    pub attach: Option<PortRef>,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    pub mac: Option<MacAddr>,
    /// Rail index (GPU index within its server) of a rail-optimized fabric.
    pub rail: Option<u32>,
    /// Plane of a multi-plane fabric; hosts only need to reach hosts of their own plane.
    pub plane: Option<u32>,
    /// The NIC tolerates out-of-order delivery, so per-packet spraying toward it is allowed.
    pub ooo_tolerant: Option<bool>,
    pub speed: Option<Speed>,
    pub cable_length: Option<Length>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub a: PortRef,
    pub b: PortRef,
    /// Overrides the ports' speed (a 400G port run at 100G).
    pub speed: Option<Speed>,
    pub cable_length: Option<Length>,
}

/// How packets of a traffic class spread over equal-cost next hops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RoutingMode {
    /// Per-flow hash over the 5-tuple (plus RoCE destination QP), equal weights.
    #[default]
    Ecmp,
    /// Per-flow hash with weights proportional to reachable capacity.
    Wcmp,
    /// Per packet, round robin by weight. Only toward out-of-order tolerant NICs.
    Spray,
    /// Per packet, the member with the least egress queue. Only toward out-of-order tolerant NICs.
    Adaptive,
    /// Per flowlet: keep the member while packets arrive within `flowlet_gap`.
    Flowlet,
    /// The sender chooses the path: switches hash only the UDP source port (the entropy value
    /// RoCEv2 and Ultra Ethernet carry), so a sender that rotates it sprays its packets and
    /// one source port keeps one path.
    Entropy,
}

impl RoutingMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RoutingMode::Ecmp => "ecmp",
            RoutingMode::Wcmp => "wcmp",
            RoutingMode::Spray => "spray",
            RoutingMode::Adaptive => "adaptive",
            RoutingMode::Flowlet => "flowlet",
            RoutingMode::Entropy => "entropy",
        }
    }
    /// Whether the mode may reorder packets of one flow.
    pub fn per_packet(self) -> bool {
        matches!(self, RoutingMode::Spray | RoutingMode::Adaptive)
    }
}

impl fmt::Display for RoutingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutePolicy {
    pub mode: Option<RoutingMode>,
    /// Idle gap that ends a flowlet. Default 100us.
    pub flowlet_gap: Option<Duration>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutingSpec {
    /// Policy for traffic classes not listed in `classes`. Default mode ecmp.
    #[serde(default)]
    pub default: RoutePolicy,
    /// Per traffic class (by `qos.classes[].name`).
    #[serde(default)]
    pub classes: BTreeMap<String, RoutePolicy>,
    /// Aggregate host routes into per-leaf / per-pod prefixes where no blackhole can result. Default true.
    pub aggregate: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Tuning {
    /// The switch's plugin tunes ECN thresholds at run time inside the controller's envelope.
    #[default]
    Auto,
    /// The static thresholds stay.
    Off,
}

/// DCQCN-style RED/ECN marking.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EcnSpec {
    /// Queue depth where marking starts. Default from link speed (see README).
    pub kmin: Option<Bytes>,
    /// Queue depth where marking probability reaches `pmax`; every packet is marked above it.
    pub kmax: Option<Bytes>,
    /// Marking probability at `kmax`, 0 < pmax <= 1. Default 0.2.
    pub pmax: Option<f64>,
    pub tuning: Option<Tuning>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WatchdogAction {
    /// Drop the stormed queue's packets (SONiC's default).
    #[default]
    Drop,
    /// Ignore pause frames and forward.
    Forward,
    /// Only raise an alert.
    Alert,
}

impl WatchdogAction {
    pub fn as_str(self) -> &'static str {
        match self {
            WatchdogAction::Drop => "drop",
            WatchdogAction::Forward => "forward",
            WatchdogAction::Alert => "alert",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PfcWatchdogSpec {
    pub enabled: Option<bool>,
    /// Continuous pause before a storm is declared, 100ms..5s. Default 200ms.
    pub detection_time: Option<Duration>,
    /// Pause-free time before the queue is restored, 100ms..60s. Default 400ms.
    pub restoration_time: Option<Duration>,
    pub action: Option<WatchdogAction>,
    /// How often the plugin polls PFC counters. Default 100ms.
    pub poll_interval: Option<Duration>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PfcSpec {
    /// PFC on for the lossless classes. Default true.
    pub enabled: Option<bool>,
    /// Explicit xoff threshold; default from speed, cable length and MTU (SONiC's headroom model).
    pub xoff: Option<Bytes>,
    pub xon: Option<Bytes>,
    /// Buffer a port may fill for one lossless priority before it must pause its peer (the pause
    /// threshold is this less the headroom). Default 24KB per Gbps of port speed.
    pub port_buffer: Option<Bytes>,
    #[serde(default)]
    pub watchdog: PfcWatchdogSpec,
}

/// Which DSCP values a class takes: a list, or `default` for every value no other class takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum DscpSet {
    Values(Vec<u8>),
    Keyword(DscpKeyword),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DscpKeyword {
    Default,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrafficClassSpec {
    pub name: String,
    pub dscp: DscpSet,
    /// Traffic class / egress queue 0..7 (also the PFC priority when lossless).
    pub traffic_class: u8,
    /// Lossless (PFC-protected). RoCE data is usually class 3.
    pub lossless: Option<bool>,
    /// Per-class ECN overrides.
    pub ecn: Option<EcnSpec>,
    /// Lossy with packet trimming instead of lossless: a packet of this class that meets a
    /// congested queue is cut to `size` and sent on, re-marked, in a queue of its own, so the
    /// receiver asks for it again at once (Ultra Ethernet; SONiC's SWITCH_TRIMMING).
    pub trim: Option<TrimSpec>,
}

/// What a trimmed packet becomes. One setting per fabric (SONiC's is switch-wide): every
/// trimmable class names the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrimSpec {
    /// Bytes a trimmed packet keeps, Ethernet header included: at least the headers the
    /// receiver needs to ask for it again (Ethernet + IP + UDP + BTH + RETH: 70 bytes, 90 with
    /// IPv6), at most the MTU.
    pub size: Bytes,
    /// DSCP of the trimmed packet (every switch maps it to the trimmed queue).
    pub dscp: u8,
    /// Queue of the trimmed packet: one no class uses. Default: the highest free queue.
    pub traffic_class: Option<u8>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QosSpec {
    /// Traffic classes. Default: roce (DSCP 26, TC 3, lossless), cnp (DSCP 48, TC 6), default (TC 0).
    pub classes: Option<Vec<TrafficClassSpec>>,
    #[serde(default)]
    pub ecn: EcnSpec,
    #[serde(default)]
    pub pfc: PfcSpec,
}

/// Link-flap handling in `weft run`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailoverSpec {
    /// A link must stay up this long before traffic returns to it. Default 2s.
    pub hold_down: Option<Duration>,
    #[serde(default)]
    pub dampening: DampeningSpec,
}

/// Flap dampening as in BGP route-flap damping (RFC 2439) and SONiC link event damping.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DampeningSpec {
    pub enabled: Option<bool>,
    /// Penalty added per flap (down event). Default 1000.
    pub penalty: Option<u32>,
    /// Suppress the link when the penalty exceeds this. Default 2000.
    pub suppress: Option<u32>,
    /// Reuse the link when the penalty decays under this. Default 750.
    pub reuse: Option<u32>,
    /// Penalty half-life. Default 5s.
    pub half_life: Option<Duration>,
    /// Longest a link stays suppressed. Default 60s.
    pub max_suppress: Option<Duration>,
}

/// A switch port reference `SWITCH:PORT`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRef {
    pub switch: String,
    pub port: String,
}

impl PortRef {
    pub fn new(switch: impl Into<String>, port: impl Into<String>) -> Self {
        PortRef {
            switch: switch.into(),
            port: port.into(),
        }
    }
}

impl fmt::Display for PortRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.switch, self.port)
    }
}

/// A port reference that is not `SWITCH:PORT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid port reference {0:?}: expected SWITCH:PORT such as \"leaf1:Ethernet0\"")]
pub struct PortRefError(pub String);

impl FromStr for PortRef {
    type Err = PortRefError;
    fn from_str(s: &str) -> Result<Self, PortRefError> {
        match s.split_once(':') {
            Some((sw, p)) if !sw.is_empty() && !p.is_empty() && !p.contains(':') => {
                Ok(PortRef::new(sw, p))
            }
            _ => Err(PortRefError(s.to_string())),
        }
    }
}

impl Serialize for PortRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PortRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for PortRef {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("PortRef")
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "format": "port-ref", "examples": ["leaf1:Ethernet0"]})
    }
}

/// An Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub fn as_u64(self) -> u64 {
        self.0
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
    }
    pub fn from_u64(v: u64) -> Self {
        let b = v.to_be_bytes();
        MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// A MAC address not written as six two-digit hex bytes separated by `:`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid MAC address {0:?}")]
pub struct MacAddrError(pub String);

impl FromStr for MacAddr {
    type Err = MacAddrError;
    fn from_str(s: &str) -> Result<Self, MacAddrError> {
        let invalid = || MacAddrError(s.to_string());
        let mut out = [0u8; 6];
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return Err(invalid());
        }
        for (o, p) in out.iter_mut().zip(parts) {
            if p.len() != 2 {
                return Err(invalid());
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| invalid())?;
        }
        Ok(MacAddr(out))
    }
}

impl Serialize for MacAddr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for MacAddr {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("MacAddr")
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "format": "mac", "examples": ["02:00:00:00:00:01"]})
    }
}
