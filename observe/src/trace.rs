//! `weft trace`'s analysis: the paths the compiled tables allow between two hosts (walked as
//! the checker walks them) beside the paths postcards say packets took, hop by hop with queue
//! depth and latency, and every mismatch: a hop the tables do not allow, or a switch that sent
//! no postcard where the path says one was due.
//!
//! The postcards are each switch's STATE_DB `WEFT_POSTCARDS` stream (written by its plugin).
//! Hops of one packet are joined by the flow (addresses, protocol, ports, QP) and the IPv4
//! identification or RoCE PSN, then ordered along the topology from the source's leaf.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;
use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;
use weft_compiler::check::PathHop;
use weft_sonic_db::{SonicDb, SonicDbId};
use weft_sonic_schema::Row;
use weft_sonic_schema::state::{POSTCARD_STREAM, PostcardHop};
use weft_topology::{HostIdx, Peer, SwitchIdx, Topology};

use crate::read::{ReadError, SwitchRead, bounded};

/// `--flow PROTO:SPORT:DPORT` (a `*` or empty part matches anything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowFilter {
    pub protocol: Option<u8>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub qp: Option<u32>,
}

/// A `--flow` that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    #[error("{0:?}: expected PROTO:SPORT:DPORT, e.g. udp:49152:4791 (* for any)")]
    Shape(String),
    #[error("{0:?}: protocol is udp, tcp or a number")]
    Protocol(String),
    #[error("{0:?} is not a port number")]
    Port(String),
}

pub fn parse_flow(s: &str) -> Result<FlowFilter, FlowError> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 3 {
        return Err(FlowError::Shape(s.to_string()));
    }
    let any = |p: &str| p.is_empty() || p == "*";
    let protocol = match parts[0] {
        p if any(p) => None,
        "udp" | "UDP" => Some(17),
        "tcp" | "TCP" => Some(6),
        p => Some(
            p.parse::<u8>()
                .map_err(|_| FlowError::Protocol(p.to_string()))?,
        ),
    };
    let port = |p: &str| -> Result<Option<u16>, FlowError> {
        if any(p) {
            Ok(None)
        } else {
            p.parse::<u16>()
                .map(Some)
                .map_err(|_| FlowError::Port(p.to_string()))
        }
    };
    Ok(FlowFilter {
        protocol,
        src_port: port(parts[1])?,
        dst_port: port(parts[2])?,
        qp: None,
    })
}

impl FlowFilter {
    fn matches(&self, h: &PostcardHop) -> bool {
        self.protocol.is_none_or(|p| p == h.protocol)
            && self.src_port.is_none_or(|p| Some(p) == h.src_port)
            && self.dst_port.is_none_or(|p| Some(p) == h.dst_port)
            && self.qp.is_none_or(|q| Some(q) == h.dst_qp)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ObservedHop {
    pub switch: String,
    pub ingress_port: String,
    pub egress_port: String,
    pub queue: u8,
    pub queue_depth: u32,
    pub queue_us: u32,
    pub hop_latency_us: u64,
    pub time_us: u64,
    /// The compiled tables send traffic toward the destination out of this port here.
    pub allowed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TracedPacket {
    pub flow: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_id: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psn: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qp: Option<u32>,
    pub hops: Vec<ObservedHop>,
    /// Time inside the switches: the sum of the hops' egress − ingress timestamps.
    pub switch_latency_us: u64,
    /// The last hop leaves toward the destination host.
    pub complete: bool,
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PathCount {
    pub path: String,
    pub packets: usize,
    pub allowed: bool,
    /// Per hop: median queue depth (packets) and median hop latency (µs).
    pub hops: Vec<(String, u32, u64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Percentiles {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    pub src: String,
    pub dst: String,
    pub since_s: f64,
    pub allowed_paths: Vec<String>,
    /// Why the compiled tables give no path, if they do not.
    pub allowed_error: Option<String>,
    pub observed_paths: Vec<PathCount>,
    pub packets: usize,
    pub complete: usize,
    pub mismatches: usize,
    /// In-switch latency per packet (complete packets).
    pub switch_latency_us: Option<Percentiles>,
    /// Up to 50 packets with problems.
    pub problems: Vec<TracedPacket>,
    /// Switches on the allowed paths whose postcards could not be read, or that no live plugin
    /// sends postcards for: a packet through them cannot be traced.
    pub unknown: Vec<crate::read::Unknown>,
}

impl TraceReport {
    /// Keeps of `unknown` the switches some allowed path crosses (the others do not matter to
    /// this trace).
    pub fn set_unknown(&mut self, unknown: Vec<crate::read::Unknown>) {
        let on_path = |sw: &str| {
            self.allowed_paths
                .iter()
                .any(|p| p.split(" | ").any(|hop| hop.split(' ').next() == Some(sw)))
        };
        self.unknown = unknown
            .into_iter()
            .filter(|u| self.allowed_paths.is_empty() || on_path(&u.switch))
            .collect();
    }
}

fn path_text(t: &Topology, path: &[PathHop]) -> String {
    path.iter()
        .map(|h| {
            let sw = &t.switches[h.switch];
            let name = |id: u32| {
                sw.ports
                    .iter()
                    .find(|p| p.id == id)
                    .map_or(format!("{id}"), |p| p.name.clone())
            };
            format!("{} {}→{}", sw.name, name(h.ingress), name(h.egress))
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

fn percentiles(mut v: Vec<u64>) -> Option<Percentiles> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Some(Percentiles {
        p50: at(0.5),
        p99: at(0.99),
        max: v[v.len() - 1],
    })
}

fn median<T: Copy + Ord>(mut v: Vec<T>) -> Option<T> {
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// What identifies one packet among the records of a flow.
type PacketKey = (
    u8,
    Option<u16>,
    Option<u16>,
    Option<u32>,
    Option<u16>,
    Option<u32>,
);

/// The records of the flow from `sip` to `dip` that `filter` selects, one group per packet.
fn packets(
    hops: Vec<PostcardHop>,
    sip: IpAddr,
    dip: IpAddr,
    filter: &FlowFilter,
) -> Vec<Vec<PostcardHop>> {
    let mut groups: BTreeMap<PacketKey, Vec<PostcardHop>> = BTreeMap::new();
    for h in hops {
        let same = |a: &str, b: IpAddr| a.parse::<IpAddr>().is_ok_and(|a| a == b);
        if !(same(&h.src, sip) && same(&h.dst, dip) && filter.matches(&h)) {
            continue;
        }
        let key = (h.protocol, h.src_port, h.dst_port, h.dst_qp, h.ip_id, h.psn);
        groups.entry(key).or_default().push(h);
    }
    // One key seen twice at a switch (an IP id reused): the k-th record of each switch is the
    // k-th packet.
    let mut packets: Vec<Vec<PostcardHop>> = Vec::new();
    for (_, mut g) in groups {
        g.sort_by_key(|h| h.time_us);
        let mut by_switch: BTreeMap<String, Vec<PostcardHop>> = BTreeMap::new();
        for h in g {
            by_switch.entry(h.switch.clone()).or_default().push(h);
        }
        let n = by_switch.values().map(Vec::len).max().unwrap_or(0);
        for k in 0..n {
            packets.push(
                by_switch
                    .values()
                    .filter_map(|v| v.get(k).cloned())
                    .collect(),
            );
        }
    }
    packets
}

/// The fabric, the two hosts, and the (switch, egress port id) pairs the tables allow.
struct Walk<'t> {
    t: &'t Topology,
    src: HostIdx,
    dst: HostIdx,
    ok_egress: BTreeSet<(SwitchIdx, u32)>,
}

impl Walk<'_> {
    fn port_id(&self, s: SwitchIdx, name: &str) -> Option<u32> {
        self.t.switches[s]
            .ports
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.id)
    }

    fn flow_of(first: &PostcardHop) -> String {
        format!(
            "{} {}:{} > {}:{}",
            match first.protocol {
                17 => "udp".to_string(),
                6 => "tcp".to_string(),
                p => format!("proto {p}"),
            },
            first.src,
            first.src_port.map_or("-".into(), |p| p.to_string()),
            first.dst,
            first.dst_port.map_or("-".into(), |p| p.to_string()),
        )
    }

    /// Follows one packet's records from the source's leaf along the topology: the hops in
    /// order, whether it reached the destination, and what went wrong.
    fn follow(
        &self,
        mut left: Vec<PostcardHop>,
    ) -> (Vec<(SwitchIdx, PostcardHop)>, bool, Vec<String>) {
        let t = self.t;
        let (hs, hd) = (&t.hosts[self.src], &t.hosts[self.dst]);
        let mut chain: Vec<(SwitchIdx, PostcardHop)> = Vec::new();
        let mut problems = Vec::new();
        let mut at = Some((hs.switch, t.switches[hs.switch].ports[hs.port].id));
        let mut complete = false;
        while let Some((s, ingress)) = at.take() {
            let name = &t.switches[s].name;
            let pos = left.iter().position(|h| {
                &h.switch == name && self.port_id(s, &h.ingress_port) == Some(ingress)
            });
            let Some(pos) = pos else {
                if chain.is_empty() {
                    problems.push(format!(
                        "no postcard from {name} (the source's leaf) for this packet"
                    ));
                } else {
                    problems.push(format!(
                        "no postcard from {name} where one was expected (after {})",
                        chain
                            .last()
                            .map(|(ps, h)| format!("{} {}", t.switches[*ps].name, h.egress_port))
                            .unwrap_or_default()
                    ));
                }
                break;
            };
            let h = left.remove(pos);
            let Some(eg) = self.port_id(s, &h.egress_port) else {
                problems.push(format!("{name}: egress port {} unknown", h.egress_port));
                chain.push((s, h));
                break;
            };
            if !self.ok_egress.contains(&(s, eg)) {
                problems.push(format!(
                    "{name} sent it out of {}, which the compiled tables do not allow toward {}",
                    h.egress_port, hd.name
                ));
            }
            let peer = t.switches[s]
                .ports
                .iter()
                .find(|p| p.id == eg)
                .map(|p| p.peer);
            chain.push((s, h));
            match peer {
                Some(Peer::Host { host }) if host == self.dst => complete = true,
                Some(Peer::Host { host }) => {
                    problems.push(format!(
                        "{name} delivered it to host {} instead of {}",
                        t.hosts[host].name, hd.name
                    ));
                }
                Some(Peer::Switch { link }) => {
                    let o = t.links[link].other(s);
                    at = Some((o.switch, t.switches[o.switch].ports[o.port].id));
                }
                _ => problems.push(format!("{name}: sent out of an unconnected port")),
            }
        }
        for h in &left {
            problems.push(format!(
                "postcard from {} ({}→{}) off the packet's path",
                h.switch, h.ingress_port, h.egress_port
            ));
        }
        (chain, complete, problems)
    }

    /// One packet from its records.
    fn packet(&self, recs: Vec<PostcardHop>) -> Option<TracedPacket> {
        let first = recs.first()?;
        let flow = Self::flow_of(first);
        let (ip_id, psn, qp) = (first.ip_id, first.psn, first.dst_qp);
        let (chain, complete, problems) = self.follow(recs);
        let hops: Vec<ObservedHop> = chain
            .iter()
            .map(|(s, h)| ObservedHop {
                switch: h.switch.clone(),
                ingress_port: h.ingress_port.clone(),
                egress_port: h.egress_port.clone(),
                queue: h.queue,
                queue_depth: h.queue_depth,
                queue_us: h.queue_us,
                hop_latency_us: h.hop_latency_us,
                time_us: h.time_us,
                allowed: self
                    .port_id(*s, &h.egress_port)
                    .is_some_and(|e| self.ok_egress.contains(&(*s, e))),
            })
            .collect();
        Some(TracedPacket {
            flow,
            ip_id,
            psn,
            qp,
            switch_latency_us: hops.iter().map(|h| h.hop_latency_us).sum(),
            hops,
            complete,
            problems,
        })
    }
}

/// Observed paths, most used first, with per hop the median queue depth and latency.
fn observed_paths(traced: &[TracedPacket]) -> Vec<PathCount> {
    let mut by_path: BTreeMap<String, Vec<&TracedPacket>> = BTreeMap::new();
    for p in traced {
        let key = p
            .hops
            .iter()
            .map(|h| format!("{} {}→{}", h.switch, h.ingress_port, h.egress_port))
            .collect::<Vec<_>>()
            .join(" | ");
        by_path.entry(key).or_default().push(p);
    }
    let mut observed: Vec<PathCount> = by_path
        .into_iter()
        .map(|(path, ps)| {
            let n = ps[0].hops.len();
            let hops = (0..n)
                .map(|i| {
                    let hop = &ps[0].hops[i];
                    (
                        hop.switch.clone(),
                        median(ps.iter().map(|p| p.hops[i].queue_depth).collect()).unwrap_or(0),
                        median(ps.iter().map(|p| p.hops[i].hop_latency_us).collect()).unwrap_or(0),
                    )
                })
                .collect();
            PathCount {
                allowed: ps.iter().all(|p| p.hops.iter().all(|h| h.allowed)),
                packets: ps.len(),
                path,
                hops,
            }
        })
        .collect();
    observed.sort_by(|a, b| b.packets.cmp(&a.packets).then(a.path.cmp(&b.path)));
    observed
}

/// The analysis, without I/O: `hops` are every record read (any flow), `allowed` the compiled
/// paths (or why there are none).
pub fn analyse<E: Display>(
    t: &Topology,
    src: HostIdx,
    dst: HostIdx,
    allowed: &Result<Vec<Vec<PathHop>>, E>,
    hops: Vec<PostcardHop>,
    filter: &FlowFilter,
    since_s: f64,
) -> TraceReport {
    let (hs, hd) = (&t.hosts[src], &t.hosts[dst]);
    let (sip, dip) = (IpAddr::V4(hs.ipv4), IpAddr::V4(hd.ipv4));
    let mut ok_egress: BTreeSet<(SwitchIdx, u32)> = BTreeSet::new();
    if let Ok(paths) = allowed {
        for p in paths {
            ok_egress.extend(p.iter().map(|h| (h.switch, h.egress)));
        }
    }
    let walk = Walk {
        t,
        src,
        dst,
        ok_egress,
    };
    let traced: Vec<TracedPacket> = packets(hops, sip, dip, filter)
        .into_iter()
        .filter_map(|recs| walk.packet(recs))
        .collect();
    let mismatches = traced.iter().filter(|p| !p.problems.is_empty()).count();
    TraceReport {
        src: hs.name.clone(),
        dst: hd.name.clone(),
        since_s,
        allowed_paths: allowed
            .as_ref()
            .map(|ps| ps.iter().map(|p| path_text(t, p)).collect())
            .unwrap_or_default(),
        allowed_error: allowed.as_ref().err().map(ToString::to_string),
        observed_paths: observed_paths(&traced),
        packets: traced.len(),
        complete: traced.iter().filter(|p| p.complete).count(),
        mismatches,
        switch_latency_us: percentiles(
            traced
                .iter()
                .filter(|p| p.complete)
                .map(|p| p.switch_latency_us)
                .collect(),
        ),
        problems: traced
            .iter()
            .filter(|p| !p.problems.is_empty())
            .take(50)
            .cloned()
            .collect(),
        unknown: Vec::new(),
    }
}

/// How long one switch may take to give its postcards.
pub const POSTCARD_TIMEOUT: Duration = Duration::from_secs(5);

/// One switch's postcards since `since_ms` (unix ms), as the stream holds them.
async fn switch_postcards(
    db: &str,
    since_ms: u64,
) -> Result<Vec<(String, Vec<String>)>, ReadError> {
    let unreachable = |reason: String| ReadError::Unreachable {
        db: db.to_string(),
        reason,
    };
    let sonic = SonicDb::from_endpoint(db).map_err(|e| unreachable(e.to_string()))?;
    let mut conn = sonic
        .connect(SonicDbId::StateDb)
        .await
        .map_err(|e| ReadError::db(db, &e))?;
    redis::cmd("XRANGE")
        .arg(POSTCARD_STREAM)
        .arg(format!("{since_ms}-0"))
        .arg("+")
        .query_async(conn.raw())
        .await
        .map_err(|e| unreachable(format!("XRANGE {POSTCARD_STREAM}: {e}")))
}

/// Every switch's postcards since `since_ms` (unix ms): records, and the switches not read.
pub async fn read_postcards(
    t: &Topology,
    since_ms: u64,
) -> (Vec<PostcardHop>, Vec<crate::read::Unknown>) {
    let mut out = Vec::new();
    let mut unread = Vec::new();
    for sw in &t.switches {
        // Postcards come from the plugin: without a live one, none is data.
        match crate::read::plugin_status(&sw.db).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                unread.extend(
                    SwitchRead::<()>::Stale {
                        data: (),
                        why: crate::read::Staleness::NoWriter,
                    }
                    .unknown(&sw.name, "postcards"),
                );
                continue;
            }
            Err(e) => {
                unread.extend(SwitchRead::<()>::Unreachable(e).unknown(&sw.name, "postcards"));
                continue;
            }
        }
        match bounded(&sw.db, POSTCARD_TIMEOUT, switch_postcards(&sw.db, since_ms)).await {
            Ok(rows) => {
                for (id, flat) in rows {
                    let fields: Vec<(String, String)> = flat
                        .chunks(2)
                        .filter_map(|c| Some((c.first()?.clone(), c.get(1)?.clone())))
                        .collect();
                    match PostcardHop::from_fields(&id, &fields) {
                        Ok(h) => out.push(h),
                        Err(e) => {
                            tracing::debug!(switch = %sw.name, %id, error = %e, "postcard record skipped")
                        }
                    }
                }
            }
            Err(e) => {
                unread.extend(SwitchRead::<()>::Unreachable(e).unknown(&sw.name, "postcards"))
            }
        }
    }
    (out, unread)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_compiler::check::allowed_paths;

    fn topo() -> Topology {
        weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example")
    }

    fn hop(t: &Topology, sw: &str, i: &str, e: &str, ip_id: u16, time: u64) -> PostcardHop {
        let (s, d) = (&t.hosts[0], &t.hosts[2]);
        PostcardHop {
            id: String::new(),
            version: 1,
            switch: sw.into(),
            switch_id: 1,
            reason: "watched".into(),
            ingress_port: i.into(),
            egress_port: e.into(),
            queue: 3,
            queue_depth: 2,
            queue_us: 5,
            ingress_ts_us: 0,
            egress_ts_us: 40,
            hop_latency_us: 40,
            time_us: time,
            src: s.ipv4.to_string(),
            dst: d.ipv4.to_string(),
            protocol: 17,
            src_port: Some(49152),
            dst_port: Some(5000),
            dst_qp: None,
            psn: None,
            ip_id: Some(ip_id),
            ttl: 64,
            flow_hash: 0,
        }
    }

    /// (src, dst) hosts on different leaves, and one allowed path between them as records.
    fn setup() -> (
        Topology,
        HostIdx,
        HostIdx,
        Result<Vec<Vec<PathHop>>, impl std::fmt::Display + std::fmt::Debug>,
    ) {
        let t = topo();
        let (s, d) = (0, 2);
        assert_ne!(t.hosts[s].switch, t.hosts[d].switch, "hosts on two leaves");
        let desired = weft_compiler::compile(&t, &weft_compiler::LinkState::all_up(&t));
        let allowed = allowed_paths(&t, &desired, s, d, 64);
        (t, s, d, allowed)
    }

    fn records_of(t: &Topology, path: &[PathHop], ip_id: u16) -> Vec<PostcardHop> {
        path.iter()
            .enumerate()
            .map(|(k, h)| {
                let sw = &t.switches[h.switch];
                let name = |id: u32| {
                    sw.ports
                        .iter()
                        .find(|p| p.id == id)
                        .map(|p| p.name.clone())
                        .expect("port")
                };
                hop(
                    t,
                    &sw.name,
                    &name(h.ingress),
                    &name(h.egress),
                    ip_id,
                    k as u64,
                )
            })
            .collect()
    }

    #[test]
    fn packets_on_allowed_paths_are_complete_and_without_mismatch() {
        let (t, s, d, allowed) = setup();
        let paths = allowed.as_ref().expect("paths");
        assert!(paths.len() >= 2, "ECMP over the spines: {paths:?}");
        let mut recs = records_of(&t, &paths[0], 1);
        recs.extend(records_of(&t, &paths[1], 2));
        recs.reverse();
        let r = analyse(&t, s, d, &allowed, recs, &FlowFilter::default(), 30.0);
        assert_eq!((r.packets, r.complete, r.mismatches), (2, 2, 0), "{r:#?}");
        assert_eq!(r.observed_paths.len(), 2);
        assert!(r.observed_paths.iter().all(|p| p.allowed));
        assert_eq!(
            r.switch_latency_us.as_ref().map(|l| l.p50),
            Some(40 * paths[0].len() as u64)
        );
    }

    #[test]
    fn a_hop_the_tables_do_not_allow_and_a_missing_hop_are_mismatches() {
        let (t, s, d, allowed) = setup();
        let paths = allowed.as_ref().expect("paths");
        // The source's leaf sends the packet to the other local host instead.
        let first = &paths[0][0];
        let leaf = &t.switches[first.switch];
        let wrong = leaf
            .ports
            .iter()
            .find(|p| matches!(p.peer, Peer::Host { host } if host != s))
            .expect("another host on the leaf");
        let mut recs = records_of(&t, &paths[0], 1);
        recs.truncate(1);
        recs[0].egress_port = wrong.name.clone();
        // A second packet whose middle hop is missing.
        let mut lost = records_of(&t, &paths[0], 2);
        lost.remove(1);
        recs.extend(lost);
        let r = analyse(&t, s, d, &allowed, recs, &FlowFilter::default(), 30.0);
        assert_eq!((r.packets, r.mismatches), (2, 2), "{r:#?}");
        let all: Vec<&String> = r.problems.iter().flat_map(|p| &p.problems).collect();
        assert!(all.iter().any(|p| p.contains("do not allow")), "{all:?}");
        assert!(
            all.iter().any(|p| p.contains("where one was expected")),
            "{all:?}"
        );
    }

    #[test]
    fn flow_filters_parse_and_select() {
        assert_eq!(
            parse_flow("udp:*:4791"),
            Ok(FlowFilter {
                protocol: Some(17),
                src_port: None,
                dst_port: Some(4791),
                qp: None
            })
        );
        assert!(parse_flow("udp:4791").is_err());
        assert!(parse_flow("sctp:1:2").is_err());
        let (t, s, d, allowed) = setup();
        let recs = records_of(&t, &allowed.as_ref().expect("paths")[0], 1);
        let f = parse_flow("udp:*:6000").expect("filter");
        let r = analyse(&t, s, d, &allowed, recs, &f, 30.0);
        assert_eq!(r.packets, 0, "another destination port");
    }
}
