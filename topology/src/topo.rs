//! The resolved topology: every switch, port, host and link with all defaults applied and all
//! addresses allocated. This is what the compiler, the testbed and `weft show` work on.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};
use serde::Serialize;

pub use crate::model::Consumer;
use crate::model::{MacAddr, Role, RoutingMode, Tuning, WatchdogAction};
use crate::qos;
use crate::units::{Bytes, Duration, Length, Speed};

pub type SwitchIdx = usize;
pub type HostIdx = usize;
pub type LinkIdx = usize;

#[derive(Debug, Clone, Serialize)]
pub struct Topology {
    pub name: String,
    /// The intent file this came from, for messages.
    pub file: String,
    pub mtu: u32,
    pub switches: Vec<Switch>,
    pub hosts: Vec<Host>,
    pub links: Vec<Link>,
    pub qos: Qos,
    pub routing: Routing,
    pub failover: Failover,
    /// Postcards (`None`: the intent has no `telemetry:` section, postcards are off).
    pub telemetry: Option<Telemetry>,
    pub pools: ResolvedPools,
    #[serde(skip)]
    pub(crate) switch_by_name: HashMap<String, SwitchIdx>,
    #[serde(skip)]
    pub(crate) host_by_name: HashMap<String, HostIdx>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ResolvedPools {
    pub hosts_v4: Ipv4Net,
    pub hosts_v6: Option<Ipv6Net>,
    pub loopbacks_v4: Ipv4Net,
}

#[derive(Debug, Clone, Serialize)]
pub struct Switch {
    pub name: String,
    pub role: Role,
    pub device_id: u64,
    pub p4rt_address: String,
    pub db: String,
    /// How P4RT entries reach the switch's consumer (Redis unless the intent says ZMQ).
    #[serde(skip_serializing_if = "Transport::is_redis")]
    pub transport: Transport,
    #[serde(skip_serializing_if = "is_weft")]
    pub consumer: Consumer,
    pub router_mac: MacAddr,
    pub loopback: Ipv4Addr,
    pub plane: Option<u32>,
    pub ports: Vec<Port>,
    /// The subnet all hosts of this leaf were allocated from (aggregatable), if any.
    pub host_subnet_v4: Option<Ipv4Net>,
    pub host_subnet_v6: Option<Ipv6Net>,
    #[serde(skip)]
    pub origin: String,
}

/// A switch's P4RT transport, resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Transport {
    #[default]
    Redis,
    /// `tcp://HOST:PORT` or `ipc:///path`.
    Zmq { endpoint: String },
}

impl Transport {
    pub fn is_redis(&self) -> bool {
        matches!(self, Transport::Redis)
    }

    /// The ZMQ endpoint, for a ZMQ transport.
    pub fn zmq_endpoint(&self) -> Option<&str> {
        match self {
            Transport::Zmq { endpoint } => Some(endpoint),
            Transport::Redis => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Transport::Redis => "redis",
            Transport::Zmq { .. } => "zmq",
        }
    }
}

fn is_weft(c: &Consumer) -> bool {
    *c == Consumer::Weft
}

impl Switch {
    pub fn tier(&self) -> u8 {
        self.role.tier()
    }

    /// Index of the port named `name`. Generated ports sit at index N/4, so look there first.
    pub fn port_index(&self, name: &str) -> Option<usize> {
        if let Some(n) = name
            .strip_prefix("Ethernet")
            .and_then(|n| n.parse::<usize>().ok())
            && let Some(p) = self.ports.get(n / 4)
            && p.name == name
        {
            return Some(n / 4);
        }
        self.ports.iter().position(|p| p.name == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Peer {
    None,
    Switch { link: LinkIdx },
    Host { host: HostIdx },
}

#[derive(Debug, Clone, Serialize)]
pub struct Port {
    pub name: String,
    pub id: u32,
    pub speed: Speed,
    pub cable_length: Length,
    pub admin_up: bool,
    pub peer: Peer,
}

#[derive(Debug, Clone, Serialize)]
pub struct Host {
    pub name: String,
    pub switch: SwitchIdx,
    pub port: usize,
    pub ipv4: Ipv4Addr,
    pub ipv6: Option<Ipv6Addr>,
    pub mac: MacAddr,
    /// The on-link gateway address the host's default route points at (the leaf answers for it).
    pub gateway_v4: Ipv4Addr,
    pub gateway_v6: Option<Ipv6Addr>,
    pub rail: Option<u32>,
    pub plane: Option<u32>,
    pub ooo_tolerant: bool,
    pub speed: Speed,
    pub cable_length: Length,
    #[serde(skip)]
    pub origin: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct End {
    pub switch: SwitchIdx,
    pub port: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Link {
    pub a: End,
    pub b: End,
    pub speed: Speed,
    pub cable_length: Length,
    #[serde(skip)]
    pub origin: String,
}

impl Link {
    /// The end on the other side from `sw`.
    pub fn other(&self, sw: SwitchIdx) -> End {
        if self.a.switch == sw { self.b } else { self.a }
    }
    pub fn end_at(&self, sw: SwitchIdx) -> End {
        if self.a.switch == sw { self.a } else { self.b }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TrafficClass {
    pub name: String,
    pub dscp: Vec<u8>,
    /// Takes every DSCP value no other class takes.
    pub is_default: bool,
    pub traffic_class: u8,
    pub lossless: bool,
    pub ecn: EcnOverride,
    pub routing: RoutingMode,
    pub flowlet_gap: Duration,
    /// Trimmed rather than dropped when a queue is congested ([`Qos::trim`] says how).
    pub trimmable: bool,
}

/// Packet trimming, switch-wide (SONiC's `SWITCH_TRIMMING|GLOBAL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Trimming {
    /// Bytes a trimmed packet keeps, Ethernet header included.
    pub size: Bytes,
    /// DSCP of trimmed packets.
    pub dscp: u8,
    /// The queue (traffic class) trimmed packets take: no class uses it.
    pub traffic_class: u8,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct EcnOverride {
    pub kmin: Option<Bytes>,
    pub kmax: Option<Bytes>,
    pub pmax: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Watchdog {
    pub enabled: bool,
    pub detection_time: Duration,
    pub restoration_time: Duration,
    pub action: WatchdogAction,
    pub poll_interval: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct Qos {
    pub classes: Vec<TrafficClass>,
    pub ecn: EcnOverride,
    pub tuning: Tuning,
    pub pfc_enabled: bool,
    pub xoff: Option<Bytes>,
    pub xon: Option<Bytes>,
    pub port_buffer: Option<Bytes>,
    pub watchdog: Watchdog,
    /// Packet trimming, when a class is trimmable.
    pub trim: Option<Trimming>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Routing {
    pub aggregate: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Dampening {
    pub enabled: bool,
    pub penalty: u32,
    pub suppress: u32,
    pub reuse: u32,
    pub half_life: Duration,
    pub max_suppress: Duration,
}

/// The resolved `telemetry:` section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Telemetry {
    /// 1 in N forwarded packets (0: watched flows only).
    pub sample: u32,
    pub watch: Vec<Watch>,
    pub max_records: u64,
}

/// A watched flow with host names resolved to addresses (`None`: any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Watch {
    pub src: Option<std::net::IpAddr>,
    pub dst: Option<std::net::IpAddr>,
    pub protocol: Option<u8>,
    pub dst_port: Option<u16>,
    pub qp: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Failover {
    pub hold_down: Duration,
    pub dampening: Dampening,
}

pub use crate::qos::{PortQos, QosProblem};

impl Qos {
    /// What decides the ECN/PFC values of a port of `speed` and `cable` length for `class`.
    pub fn inputs(
        &self,
        speed: Speed,
        cable: Length,
        mtu: u32,
        class: &TrafficClass,
    ) -> qos::QosInputs {
        qos::QosInputs {
            speed,
            cable,
            mtu,
            port_buffer: self.port_buffer,
            xoff: self.xoff,
            xon: self.xon,
            kmin: class.ecn.kmin.or(self.ecn.kmin),
            kmax: class.ecn.kmax.or(self.ecn.kmax),
            pmax: class.ecn.pmax.or(self.ecn.pmax),
        }
    }

    /// Resolved ECN/PFC parameters of a port of `speed` and `cable` length for class `tc`.
    pub fn port_qos(&self, speed: Speed, cable: Length, mtu: u32, class: &TrafficClass) -> PortQos {
        qos::port_qos(&self.inputs(speed, cable, mtu, class))
    }

    /// Whether PFC protects `class` (lossless, and PFC on).
    pub fn pfc_protects(&self, class: &TrafficClass) -> bool {
        class.lossless && self.pfc_enabled
    }

    /// The safety rule the values of such a port would break ([`PortQos::problem`]); `None` on
    /// every connected port of a validated topology.
    pub fn port_problem(
        &self,
        speed: Speed,
        cable: Length,
        mtu: u32,
        class: &TrafficClass,
    ) -> Option<QosProblem> {
        self.port_qos(speed, cable, mtu, class)
            .problem(self.pfc_protects(class))
    }
}

impl Topology {
    pub fn switch_index(&self, name: &str) -> Option<SwitchIdx> {
        self.switch_by_name.get(name).copied()
    }
    pub fn host_index(&self, name: &str) -> Option<HostIdx> {
        self.host_by_name.get(name).copied()
    }
    pub fn switch(&self, name: &str) -> Option<&Switch> {
        self.switch_index(name).map(|i| &self.switches[i])
    }
    /// The links at a switch, as (link index, local port index, peer end).
    pub fn neighbours(&self, sw: SwitchIdx) -> impl Iterator<Item = (LinkIdx, usize, End)> + '_ {
        self.switches[sw]
            .ports
            .iter()
            .enumerate()
            .filter_map(move |(pi, p)| match p.peer {
                Peer::Switch { link } => Some((link, pi, self.links[link].other(sw))),
                _ => None,
            })
    }
    /// Whether both ends of a link are administratively up.
    pub fn link_admin_up(&self, l: LinkIdx) -> bool {
        let l = &self.links[l];
        self.switches[l.a.switch].ports[l.a.port].admin_up
            && self.switches[l.b.switch].ports[l.b.port].admin_up
    }
    /// `SWITCH:PORT` of a link end.
    pub fn end_name(&self, e: End) -> String {
        let s = &self.switches[e.switch];
        format!("{}:{}", s.name, s.ports[e.port].name)
    }
    pub fn class(&self, name: &str) -> Option<&TrafficClass> {
        self.qos.classes.iter().find(|c| c.name == name)
    }
}
