//! Intent → Topology: expand generators, overlay explicit items, apply defaults, allocate ids and
//! addresses, and check everything that makes a fabric impossible or unsafe. All problems are
//! collected; a problem that follows from another one already reported is not reported again.
//!
//! ```text
//!   size (from generator parameters) → generators → explicit overlay → switches and ports
//!     → links → hosts → explicit fields (names, addresses, MACs, endpoints)
//!     → allocation (explicit values reserved first) → uniqueness
//!     → QoS (contradictions; every connected port's ECN/PFC values)
//!     → reachability (partition; valley-free paths), only when nothing above failed
//! ```

mod alloc;
pub mod endpoints;
mod qos;
mod reach;

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use crate::diag::{Sink, suggest};
use crate::generators::{self, GenContext, MAX_SWITCH_PORTS};
use crate::model::*;
use crate::names::{check_name, display_name};
use crate::topo::*;
use crate::units::{Duration, Length, Speed};
use crate::yaml::PathIndex;
use crate::{Diagnostic, Limits};

pub const DEFAULT_SPEED: Speed = Speed::gbps(100);
pub const DEFAULT_MTU: u32 = 9100;
pub const DEFAULT_CABLE: Length = Length::metres(5);
pub const DEFAULT_HOST_CABLE: Length = Length::metres(2);
pub const DEFAULT_P4RT_ADDRESS: &str = "127.0.0.1:9559";
pub const DEFAULT_DB_SOCKET_DIR: &str = "/run/weft";
pub const DEFAULT_FLOWLET_GAP: Duration = Duration::micros(100);
/// Device ids stay within 32 bits so that the testbed's interface names `s<device>p<port>` fit
/// Linux's 15 characters.
pub const MAX_DEVICE_ID: u64 = u32::MAX as u64;

pub(crate) struct Ctx<'a> {
    file: &'a str,
    idx: &'a PathIndex,
    sink: Sink,
    /// Names that break the rule: reported, but no reason to doubt the fabric's shape.
    bad_names: usize,
}

impl Ctx<'_> {
    fn err(&mut self, path: &str, item: impl Into<String>, msg: impl Into<String>) {
        let pos = self.idx.locate(path);
        self.sink.push(self.file, pos, item, msg);
    }
    fn err_help(
        &mut self,
        path: &str,
        item: impl Into<String>,
        msg: impl Into<String>,
        help: impl Into<String>,
    ) {
        let pos = self.idx.locate(path);
        self.sink.push_help(self.file, pos, item, msg, help);
    }
    /// Whether the file writes exactly `path`.
    fn written(&self, path: &str) -> bool {
        self.idx.get(path).is_some()
    }
    fn errors(&self) -> usize {
        self.sink.len()
    }
}

/// Which line set a speed or a cable length, so that a problem found in a value derived from it
/// (headroom, pause threshold) points there. `Builtin` is a default nobody wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Src {
    Builtin,
    DefaultsSpeed,
    DefaultsHostSpeed,
    DefaultsCable,
    DefaultsHostCable,
    GenUplinkSpeed(u32),
    GenUplinkCable(u32),
    PortSpeed(u32, u32),
    PortCable(u32, u32),
    LinkSpeed(u32),
    LinkCable(u32),
    HostSpeed(u32),
    HostCable(u32),
}

impl Src {
    pub(crate) fn path(self) -> Option<String> {
        Some(match self {
            Src::Builtin => return None,
            Src::DefaultsSpeed => "fabric.defaults.speed".into(),
            Src::DefaultsHostSpeed => "fabric.defaults.host_speed".into(),
            Src::DefaultsCable => "fabric.defaults.cable_length".into(),
            Src::DefaultsHostCable => "fabric.defaults.host_cable_length".into(),
            Src::GenUplinkSpeed(g) => format!("generators[{g}].uplink_speed"),
            Src::GenUplinkCable(g) => format!("generators[{g}].uplink_cable_length"),
            Src::PortSpeed(s, p) => format!("switches[{s}].ports[{p}].speed"),
            Src::PortCable(s, p) => format!("switches[{s}].ports[{p}].cable_length"),
            Src::LinkSpeed(l) => format!("links[{l}].speed"),
            Src::LinkCable(l) => format!("links[{l}].cable_length"),
            Src::HostSpeed(h) => format!("hosts[{h}].speed"),
            Src::HostCable(h) => format!("hosts[{h}].cable_length"),
        })
    }
}

struct Draft<T> {
    spec: T,
    /// `generators[i]`, `switches[i]`, ...: where the item was written.
    origin: String,
    generated: bool,
}

/// Per switch draft: where each port's speed and cable length came from, and at which index
/// of the explicit switch's `ports` the port was written (if it was).
struct PortOrigins {
    src: Vec<(Src, Src)>,
    written_at: Vec<Option<u32>>,
}

/// Where a link's or host's own speed and cable length came from; `None`: from its port(s).
type ItemSrc = (Option<Src>, Option<Src>);

fn default_classes() -> Vec<TrafficClassSpec> {
    vec![
        TrafficClassSpec {
            name: "roce".into(),
            dscp: DscpSet::Values(vec![26]),
            traffic_class: 3,
            lossless: Some(true),
            ecn: None,
        },
        TrafficClassSpec {
            name: "cnp".into(),
            dscp: DscpSet::Values(vec![48]),
            traffic_class: 6,
            lossless: Some(false),
            ecn: None,
        },
        TrafficClassSpec {
            name: "default".into(),
            dscp: DscpSet::Keyword(DscpKeyword::Default),
            traffic_class: 0,
            lossless: Some(false),
            ecn: None,
        },
    ]
}

/// Reports `name` at `path` if it breaks the name rule.
fn check_name_at(cx: &mut Ctx, path: &str, what: &str, name: &str) {
    if let Err(e) = check_name(name) {
        cx.bad_names += 1;
        cx.err_help(
            path,
            format!("{what} {}", display_name(name)),
            format!("invalid {what} name: {e}"),
            "names become SONiC keys, namespace and file names: use 1 to 63 of A-Z a-z 0-9 _ . - starting with a letter or digit",
        );
    }
}

/// The lane number of a SONiC port name: `Ethernet` and a decimal number, written the way
/// SONiC writes it (no sign, no leading zeros).
fn lane_of(name: &str) -> Option<u32> {
    let n = name.strip_prefix("Ethernet")?;
    if n.is_empty() || !n.chars().all(|c| c.is_ascii_digit()) || (n.len() > 1 && n.starts_with('0'))
    {
        return None;
    }
    n.parse().ok()
}

/// Resolves a deserialised intent. `idx` locates paths in the original text for messages.
pub fn resolve(
    intent: &Intent,
    file: &str,
    idx: &PathIndex,
    limits: &Limits,
) -> Result<Topology, Vec<Diagnostic>> {
    let mut cx = Ctx {
        file,
        idx,
        sink: Sink::default(),
        bad_names: 0,
    };
    let d = &intent.fabric.defaults;
    if let Some(n) = &intent.fabric.name {
        check_name_at(&mut cx, "fabric.name", "fabric", n);
    }
    let speed = d.speed.unwrap_or(DEFAULT_SPEED);
    let mtu = d.mtu.unwrap_or(DEFAULT_MTU);
    if !check_size(&mut cx, intent, limits) {
        return Err(cx.sink.finish());
    }
    let cable = d.cable_length.unwrap_or(DEFAULT_CABLE);
    let gen_ctx = GenContext {
        speed,
        host_speed: d.host_speed.unwrap_or(speed),
        cable,
        host_cable: d.host_cable_length.unwrap_or(DEFAULT_HOST_CABLE),
    };

    let before = cx.errors().saturating_sub(cx.bad_names);
    let Expanded {
        switches,
        port_origins,
        hosts,
        host_src,
        links,
        link_src,
    } = expand(&mut cx, intent, &gen_ctx);
    if switches.is_empty() && cx.errors() == 0 {
        let at = if cx.written("switches") {
            "switches"
        } else {
            ""
        };
        cx.err_help(
            at,
            "intent",
            "the intent describes no switches",
            "add `switches:` and `links:`, or a generator under `generators:`",
        );
        return Err(cx.sink.finish());
    }
    let (mut out_switches, switch_by_name) =
        build_switches(&mut cx, &switches, &port_origins, speed, cable);
    let port_src: Vec<Vec<(Src, Src)>> = port_origins.into_iter().map(|p| p.src).collect();
    let (out_links, out_link_src) = build_links(
        &mut cx,
        &mut out_switches,
        &switch_by_name,
        &links,
        &link_src,
        &port_src,
    );
    let ooo_default = d.ooo_tolerant.unwrap_or(false);
    let (mut out_hosts, host_by_name, out_host_src) = attach_hosts(
        &mut cx,
        &mut out_switches,
        &switch_by_name,
        &hosts,
        &host_src,
        &port_src,
        ooo_default,
    );
    drop(port_src);
    // Problems with switches, links or hosts themselves: reachability is judged only without
    // them, as a switch or link left out would make it fail for no new reason.
    let structural_errors = cx.errors().saturating_sub(cx.bad_names + before);
    if !(1280..=9216).contains(&mtu) {
        cx.err(
            "fabric.defaults.mtu",
            "fabric.defaults.mtu",
            format!("MTU {mtu} is outside 1280..=9216 bytes"),
        );
    }

    check_explicit_fields(&mut cx, intent, &switches, &out_switches, &out_hosts);
    check_socket_dir(&mut cx, d, &out_switches);

    // Pools and allocation.
    let pools = ResolvedPools {
        hosts_v4: intent
            .fabric
            .pools
            .hosts_v4
            .unwrap_or_else(alloc::default_hosts_v4),
        hosts_v6: intent.fabric.pools.hosts_v6,
        loopbacks_v4: intent
            .fabric
            .pools
            .loopbacks_v4
            .unwrap_or_else(alloc::default_loopbacks_v4),
    };
    if pools.hosts_v4.contains(&pools.loopbacks_v4) || pools.loopbacks_v4.contains(&pools.hosts_v4)
    {
        cx.err(
            "fabric.pools",
            "fabric.pools",
            format!(
                "address pools overlap: hosts_v4 {} and loopbacks_v4 {}",
                pools.hosts_v4, pools.loopbacks_v4
            ),
        );
    }
    let explicit = alloc::Explicit::collect(&switches, &out_switches, &out_hosts);
    alloc::allocate_switches(&mut cx, &mut out_switches, &explicit, d, &pools);
    alloc::allocate_hosts(
        &mut cx,
        &mut out_switches,
        &mut out_hosts,
        &explicit,
        &pools,
    );
    alloc::allocate_host_macs(&mut out_hosts, &explicit);
    alloc::check_unique(&mut cx, &out_switches, &out_hosts, &explicit);

    // QoS, routing, failover.
    let qos = qos::resolve_qos(&mut cx, intent);
    qos::check_ports(
        &mut cx,
        &qos,
        intent,
        &out_switches,
        &out_links,
        &out_link_src,
        &out_hosts,
        &out_host_src,
        mtu,
    );
    if structural_errors == 0 {
        reach::check(&mut cx, &switches, &out_switches, &out_links, &out_hosts);
    }
    let failover = resolve_failover(&mut cx, &intent.failover);
    let telemetry = intent
        .telemetry
        .as_ref()
        .map(|t| resolve_telemetry(&mut cx, t, &out_hosts, &host_by_name));

    if !cx.sink.is_empty() {
        return Err(cx.sink.finish());
    }
    Ok(Topology {
        name: intent
            .fabric
            .name
            .clone()
            .unwrap_or_else(|| "fabric".into()),
        file: file.to_string(),
        mtu,
        switches: out_switches,
        hosts: out_hosts,
        links: out_links,
        qos,
        routing: Routing {
            aggregate: intent.routing.aggregate.unwrap_or(true),
        },
        failover,
        telemetry,
        pools,
        switch_by_name,
        host_by_name,
    })
}

/// `1234567` as `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Refuses a fabric larger than `limits` before any of it is generated (a fat-tree of k=1024
/// would be 1.3 million switches). True when within limits.
fn check_size(cx: &mut Ctx, intent: &Intent, limits: &Limits) -> bool {
    let per_gen: Vec<(generators::Counts, &'static str)> =
        intent.generators.iter().map(generators::estimate).collect();
    let explicit = generators::Counts {
        switches: intent.switches.len() as u64,
        hosts: intent.hosts.len() as u64,
        links: intent.links.len() as u64,
        ports: intent.switches.iter().map(|s| s.ports.len() as u64).sum(),
    };
    let total = per_gen
        .iter()
        .fold(explicit, |acc, (c, _)| acc.saturating_add(*c));
    type Pick = fn(&generators::Counts) -> u64;
    let quantities: [(&str, Pick, u64); 4] = [
        ("switches", |c| c.switches, limits.max_switches),
        ("hosts", |c| c.hosts, limits.max_hosts),
        ("switch-to-switch links", |c| c.links, limits.max_links),
        ("ports", |c| c.ports, limits.max_ports),
    ];
    for (what, pick, max) in quantities {
        let n = pick(&total);
        if n <= max {
            continue;
        }
        // Blame the generator that contributes most, or the explicit list.
        let worst = per_gen
            .iter()
            .enumerate()
            .max_by_key(|(_, (c, _))| pick(c))
            .filter(|(_, (c, _))| pick(c) >= pick(&explicit));
        let (path, item) = match worst {
            Some((i, (_, param))) => (
                format!("generators[{i}].{param}"),
                format!("generators[{i}]"),
            ),
            None => {
                let list = match what {
                    "hosts" => "hosts",
                    "switch-to-switch links" => "links",
                    _ => "switches",
                };
                (list.to_string(), list.to_string())
            }
        };
        cx.err_help(
            &path,
            item,
            format!(
                "the fabric would have {} {what}; Weft handles at most {}",
                thousands(n),
                thousands(max)
            ),
            "split the fabric into several intents, or use smaller generator parameters",
        );
        return false;
    }
    true
}

struct Expanded {
    switches: Vec<Draft<SwitchSpec>>,
    port_origins: Vec<PortOrigins>,
    hosts: Vec<Draft<HostSpec>>,
    host_src: Vec<ItemSrc>,
    links: Vec<Draft<LinkSpec>>,
    link_src: Vec<ItemSrc>,
}

fn default_speed_src(d: &Defaults) -> Src {
    if d.speed.is_some() {
        Src::DefaultsSpeed
    } else {
        Src::Builtin
    }
}
fn default_cable_src(d: &Defaults) -> Src {
    if d.cable_length.is_some() {
        Src::DefaultsCable
    } else {
        Src::Builtin
    }
}

/// Where a generated port's speed came from, told by its value: the generator sets uplink
/// ports to `uplink_speed` and host ports to `host_speed`.
fn gen_port_speed_src(g: &Generator, gi: u32, v: Speed, ctx: &GenContext, d: &Defaults) -> Src {
    if let Generator::LeafSpine {
        uplink_speed: Some(u),
        ..
    } = g
        && v == *u
        && !(d.host_speed.is_some() && v == ctx.host_speed)
    {
        return Src::GenUplinkSpeed(gi);
    }
    if d.host_speed.is_some() && v == ctx.host_speed && v != ctx.speed {
        return Src::DefaultsHostSpeed;
    }
    default_speed_src(d)
}

fn pair(l: &LinkSpec) -> (PortRef, PortRef) {
    let (a, b) = (l.a.clone(), l.b.clone());
    if a <= b { (a, b) } else { (b, a) }
}

/// Generators, then explicit items on top.
fn expand(cx: &mut Ctx, intent: &Intent, gen_ctx: &GenContext) -> Expanded {
    let d = &intent.fabric.defaults;
    let mut switches: Vec<Draft<SwitchSpec>> = Vec::new();
    let mut port_origins: Vec<PortOrigins> = Vec::new();
    let mut hosts: Vec<Draft<HostSpec>> = Vec::new();
    let mut host_src: Vec<ItemSrc> = Vec::new();
    let mut links: Vec<Draft<LinkSpec>> = Vec::new();
    let mut link_src: Vec<ItemSrc> = Vec::new();
    let mut sw_pos: HashMap<String, usize> = HashMap::new();
    let mut host_pos: HashMap<String, usize> = HashMap::new();
    let gen_host_speed = if d.host_speed.is_some() {
        Src::DefaultsHostSpeed
    } else {
        default_speed_src(d)
    };
    let gen_host_cable = if d.host_cable_length.is_some() {
        Src::DefaultsHostCable
    } else {
        Src::Builtin
    };
    for (i, g) in intent.generators.iter().enumerate() {
        let gi = i as u32;
        let origin = format!("generators[{i}]");
        let out = match generators::generate(g, gen_ctx) {
            Ok(out) => out,
            Err((field, msg)) => {
                cx.err(
                    &format!("{origin}.{field}"),
                    format!("{origin}.{field}"),
                    msg,
                );
                continue;
            }
        };
        // A second generator of the same kind makes the same names: report it once, keep the
        // first generator's items, and drop what would only collide with them.
        let mut again: Vec<(String, String)> = Vec::new();
        let mut dropped: HashSet<String> = HashSet::new();
        for spec in out.switches {
            if let Some(&j) = sw_pos.get(&spec.name) {
                again.push((spec.name.clone(), switches[j].origin.clone()));
                dropped.insert(spec.name);
                continue;
            }
            sw_pos.insert(spec.name.clone(), switches.len());
            let src = spec
                .ports
                .iter()
                .map(|p| {
                    (
                        gen_port_speed_src(g, gi, p.speed.unwrap_or(gen_ctx.speed), gen_ctx, d),
                        default_cable_src(d),
                    )
                })
                .collect();
            port_origins.push(PortOrigins {
                src,
                written_at: vec![None; spec.ports.len()],
            });
            switches.push(Draft {
                spec,
                origin: origin.clone(),
                generated: true,
            });
        }
        for spec in out.hosts {
            let on_dropped = spec
                .attach
                .as_ref()
                .is_some_and(|a| dropped.contains(&a.switch));
            if on_dropped || host_pos.contains_key(&spec.name) {
                if !on_dropped {
                    let j = host_pos[&spec.name];
                    again.push((spec.name.clone(), hosts[j].origin.clone()));
                }
                continue;
            }
            host_pos.insert(spec.name.clone(), hosts.len());
            hosts.push(Draft {
                spec,
                origin: origin.clone(),
                generated: true,
            });
            host_src.push((Some(gen_host_speed), Some(gen_host_cable)));
        }
        for spec in out.links {
            if dropped.contains(&spec.a.switch) || dropped.contains(&spec.b.switch) {
                continue;
            }
            link_src.push((
                spec.speed.map(|_| Src::GenUplinkSpeed(gi)),
                spec.cable_length.map(|_| Src::GenUplinkCable(gi)),
            ));
            links.push(Draft {
                spec,
                origin: origin.clone(),
                generated: true,
            });
        }
        if let Some((name, first)) = again.first() {
            let more = if again.len() > 1 {
                format!(" (and {} more names)", again.len() - 1)
            } else {
                String::new()
            };
            cx.err_help(
                &origin,
                &origin,
                format!("this generator makes `{name}` again, which {first} already makes{more}"),
                "generators name their items by a fixed pattern (spineN, leafN, …): use one generator per fabric, or write the extra switches by hand",
            );
        }
    }

    for (i, s) in intent.switches.iter().enumerate() {
        let origin = format!("switches[{i}]");
        match sw_pos.get(&s.name) {
            Some(&j) if switches[j].generated => {
                overlay_switch(&mut switches[j].spec, &mut port_origins[j], s, i as u32);
                switches[j].origin = origin;
                switches[j].generated = false;
            }
            Some(&j) => cx.err(
                &format!("{origin}.name"),
                format!("switch {}", display_name(&s.name)),
                format!("duplicate switch name (first at {})", switches[j].origin),
            ),
            None => {
                sw_pos.insert(s.name.clone(), switches.len());
                let src = s
                    .ports
                    .iter()
                    .enumerate()
                    .map(|(j, p)| {
                        (
                            if p.speed.is_some() {
                                Src::PortSpeed(i as u32, j as u32)
                            } else {
                                default_speed_src(d)
                            },
                            if p.cable_length.is_some() {
                                Src::PortCable(i as u32, j as u32)
                            } else {
                                default_cable_src(d)
                            },
                        )
                    })
                    .collect();
                port_origins.push(PortOrigins {
                    src,
                    written_at: (0..s.ports.len() as u32).map(Some).collect(),
                });
                switches.push(Draft {
                    spec: s.clone(),
                    origin,
                    generated: false,
                });
            }
        }
    }
    for (i, h) in intent.hosts.iter().enumerate() {
        let origin = format!("hosts[{i}]");
        let own = |generated: ItemSrc| {
            (
                if h.speed.is_some() {
                    Some(Src::HostSpeed(i as u32))
                } else {
                    generated.0
                },
                if h.cable_length.is_some() {
                    Some(Src::HostCable(i as u32))
                } else {
                    generated.1
                },
            )
        };
        match host_pos.get(&h.name) {
            Some(&j) if hosts[j].generated => {
                overlay_host(&mut hosts[j].spec, h);
                hosts[j].origin = origin;
                hosts[j].generated = false;
                host_src[j] = own(host_src[j]);
            }
            Some(&j) => cx.err(
                &format!("{origin}.name"),
                format!("host {}", display_name(&h.name)),
                format!("duplicate host name (first at {})", hosts[j].origin),
            ),
            None => {
                host_pos.insert(h.name.clone(), hosts.len());
                hosts.push(Draft {
                    spec: h.clone(),
                    origin,
                    generated: false,
                });
                host_src.push(own((None, None)));
            }
        }
    }
    // Only explicit links need the lookup; skip building it for purely generated fabrics.
    let mut link_pos: HashMap<(PortRef, PortRef), usize> = if intent.links.is_empty() {
        HashMap::new()
    } else {
        links
            .iter()
            .enumerate()
            .map(|(i, l)| (pair(&l.spec), i))
            .collect()
    };
    for (i, l) in intent.links.iter().enumerate() {
        let origin = format!("links[{i}]");
        let own = (
            l.speed.map(|_| Src::LinkSpeed(i as u32)),
            l.cable_length.map(|_| Src::LinkCable(i as u32)),
        );
        match link_pos.get(&pair(l)) {
            Some(&j) if links[j].generated => {
                if l.speed.is_some() {
                    links[j].spec.speed = l.speed;
                    link_src[j].0 = own.0;
                }
                if l.cable_length.is_some() {
                    links[j].spec.cable_length = l.cable_length;
                    link_src[j].1 = own.1;
                }
                links[j].origin = origin;
                links[j].generated = false;
            }
            Some(&j) => cx.err(
                &origin,
                format!("link {} ↔ {}", l.a, l.b),
                format!("duplicate link (first at {})", links[j].origin),
            ),
            None => {
                link_pos.insert(pair(l), links.len());
                links.push(Draft {
                    spec: l.clone(),
                    origin,
                    generated: false,
                });
                link_src.push(own);
            }
        }
    }
    for (name, &si) in &sw_pos {
        if let Some(&h) = host_pos.get(name) {
            let o = if hosts[h].generated {
                switches[si].origin.clone()
            } else {
                format!("{}.name", hosts[h].origin)
            };
            cx.err(
                &o,
                format!("host {}", display_name(name)),
                "a host and a switch share this name",
            );
        }
    }
    Expanded {
        switches,
        port_origins,
        hosts,
        host_src,
        links,
        link_src,
    }
}

fn role_of(cx: &mut Ctx, d: &Draft<SwitchSpec>, item: impl Fn() -> String) -> Role {
    let s = &d.spec;
    match (s.role, s.tier) {
        (Some(r), Some(t)) if r.tier() != t => {
            cx.err(
                &format!("{}.tier", d.origin),
                item(),
                format!("tier {t} contradicts role {r} (tier {})", r.tier()),
            );
            r
        }
        (Some(r), _) => r,
        (None, Some(t)) => match Role::from_tier(t) {
            Some(r) => r,
            None => {
                cx.err(
                    &format!("{}.tier", d.origin),
                    item(),
                    format!("tier {t} is not 1 (leaf), 2 (spine) or 3 (superspine)"),
                );
                Role::Leaf
            }
        },
        (None, None) => {
            cx.err_help(
                &d.origin,
                item(),
                "missing role",
                "add `role: leaf`, `role: spine` or `role: superspine` (or `tier: N`)",
            );
            Role::Leaf
        }
    }
}

fn build_switches(
    cx: &mut Ctx,
    drafts: &[Draft<SwitchSpec>],
    origins: &[PortOrigins],
    speed: Speed,
    cable: Length,
) -> (Vec<Switch>, HashMap<String, SwitchIdx>) {
    let mut out: Vec<Switch> = Vec::with_capacity(drafts.len());
    let mut by_name: HashMap<String, SwitchIdx> = HashMap::with_capacity(drafts.len());
    for (si, (d, po)) in drafts.iter().zip(origins).enumerate() {
        let s = &d.spec;
        let item = || format!("switch {}", display_name(&s.name));
        let role = role_of(cx, d, item);
        if !d.generated {
            check_name_at(cx, &format!("{}.name", d.origin), "switch", &s.name);
        }
        // Past the id space every further port is wrong for the same reason: say it once.
        let too_many = s.ports.len() > MAX_SWITCH_PORTS as usize;
        if too_many {
            cx.err_help(
                &format!("{}.ports", d.origin),
                item(),
                format!(
                    "{} ports; a switch has at most {MAX_SWITCH_PORTS} (P4Runtime port ids 1..=510)",
                    s.ports.len()
                ),
                "list only the ports the switch has",
            );
        }
        let mut ports = Vec::with_capacity(s.ports.len());
        let mut port_names: HashMap<&str, usize> = HashMap::with_capacity(s.ports.len());
        let mut port_ids: HashMap<u32, usize> = HashMap::with_capacity(s.ports.len());
        for (pi, p) in s.ports.iter().enumerate() {
            let ppath = |field: &str| match po.written_at[pi] {
                Some(j) => format!("{}.ports[{j}].{field}", d.origin),
                None => d.origin.clone(),
            };
            let lane = lane_of(&p.name);
            let id =
                p.id.unwrap_or_else(|| lane.map_or(pi as u32 + 1, |l| l / 4 + 1));
            if !too_many {
                let pitem = || format!("port {}:{}", display_name(&s.name), display_name(&p.name));
                if lane.is_none() {
                    cx.err_help(
                        &ppath("name"),
                        pitem(),
                        format!("port names are SONiC names: {} is not `Ethernet` and a number", display_name(&p.name)),
                        "write `EthernetN` with N the first lane, e.g. `Ethernet0`, `Ethernet4` (no sign, no leading zeros)",
                    );
                }
                if let Some(&first) = port_names.get(p.name.as_str()) {
                    cx.err(
                        &ppath("name"),
                        pitem(),
                        format!(
                            "duplicate port name (also port {} of this switch)",
                            first + 1
                        ),
                    );
                } else {
                    port_names.insert(&p.name, pi);
                }
                if id == 0 || id > MAX_SWITCH_PORTS {
                    cx.err(&ppath("id"), pitem(), format!("P4Runtime port id {id} is outside 1..=510 (BMv2 port numbers; 511 is the drop port)"));
                } else if let Some(&first) = port_ids.get(&id) {
                    cx.err(
                        &ppath("id"),
                        pitem(),
                        format!(
                            "P4Runtime port id {id} is used by another port of this switch ({})",
                            s.ports[first].name
                        ),
                    );
                } else {
                    port_ids.insert(id, pi);
                }
            }
            ports.push(Port {
                name: p.name.clone(),
                id,
                speed: p.speed.unwrap_or(speed),
                cable_length: p.cable_length.unwrap_or(cable),
                admin_up: p.admin.unwrap_or_default() == AdminState::Up,
                peer: Peer::None,
            });
        }
        by_name.insert(s.name.clone(), si);
        out.push(Switch {
            name: s.name.clone(),
            role,
            device_id: s.device_id.unwrap_or(0),
            p4rt_address: s.p4rt_address.clone().unwrap_or_default(),
            db: s.db.clone().unwrap_or_default(),
            router_mac: s.router_mac.unwrap_or(MacAddr([0; 6])),
            loopback: s.loopback.unwrap_or(Ipv4Addr::UNSPECIFIED),
            plane: s.plane,
            ports,
            host_subnet_v4: None,
            host_subnet_v6: None,
            origin: d.origin.clone(),
        });
    }
    (out, by_name)
}

fn build_links(
    cx: &mut Ctx,
    switches: &mut [Switch],
    by_name: &HashMap<String, SwitchIdx>,
    drafts: &[Draft<LinkSpec>],
    srcs: &[ItemSrc],
    port_src: &[Vec<(Src, Src)>],
) -> (Vec<Link>, Vec<(Src, Src)>) {
    let mut out: Vec<Link> = Vec::with_capacity(drafts.len());
    let mut out_src: Vec<(Src, Src)> = Vec::with_capacity(drafts.len());
    for (d, src) in drafts.iter().zip(srcs) {
        let l = &d.spec;
        let item = || format!("link {} ↔ {}", l.a, l.b);
        let ea = resolve_end(
            cx,
            switches,
            by_name,
            &l.a,
            || format!("{}.a", d.origin),
            item,
        );
        let eb = resolve_end(
            cx,
            switches,
            by_name,
            &l.b,
            || format!("{}.b", d.origin),
            item,
        );
        let (Some(ea), Some(eb)) = (ea, eb) else {
            continue;
        };
        if ea.switch == eb.switch {
            cx.err(&d.origin, item(), "a link must join two different switches");
            continue;
        }
        let li = out.len();
        let mut taken = false;
        for e in [ea, eb] {
            let port = &mut switches[e.switch].ports[e.port];
            match port.peer {
                Peer::None => port.peer = Peer::Switch { link: li },
                Peer::Switch { link } => {
                    taken = true;
                    let other = &out[link];
                    let msg = format!(
                        "port {}:{} is already used by the link {} ↔ {}",
                        switches[e.switch].name,
                        switches[e.switch].ports[e.port].name,
                        end_name(switches, other.a),
                        end_name(switches, other.b)
                    );
                    cx.err(&d.origin, item(), msg);
                }
                // Hosts are attached after links, so a link never finds a host here.
                Peer::Host { .. } => {}
            }
        }
        if taken {
            // Undo a half-made attachment so the port is not reported again for this link.
            for e in [ea, eb] {
                let port = &mut switches[e.switch].ports[e.port];
                if port.peer == (Peer::Switch { link: li }) {
                    port.peer = Peer::None;
                }
            }
            continue;
        }
        let pa = &switches[ea.switch].ports[ea.port];
        let pb = &switches[eb.switch].ports[eb.port];
        let (sa, sb) = (port_src[ea.switch][ea.port], port_src[eb.switch][eb.port]);
        let (link_speed, speed_src) = match l.speed {
            Some(s) if s > pa.speed || s > pb.speed => {
                cx.err(
                    &format!("{}.speed", d.origin),
                    item(),
                    format!(
                        "link speed {s} is faster than its ports ({} and {})",
                        pa.speed, pb.speed
                    ),
                );
                (s, src.0.unwrap_or(Src::Builtin))
            }
            Some(s) => (s, src.0.unwrap_or(Src::Builtin)),
            None if pa.speed != pb.speed => {
                cx.err_help(&d.origin, item(), format!("speed mismatch: {} is {} but {} is {}", l.a, pa.speed, l.b, pb.speed), "set the same speed on both ports, or `speed:` on the link to run both at the lower one");
                if pa.speed < pb.speed {
                    (pa.speed, sa.0)
                } else {
                    (pb.speed, sb.0)
                }
            }
            None => (pa.speed, sa.0),
        };
        let (link_cable, cable_src) = match l.cable_length {
            Some(c) => (c, src.1.unwrap_or(Src::Builtin)),
            None if pa.cable_length >= pb.cable_length => (pa.cable_length, sa.1),
            None => (pb.cable_length, sb.1),
        };
        out.push(Link {
            a: ea,
            b: eb,
            speed: link_speed,
            cable_length: link_cable,
            origin: d.origin.clone(),
        });
        out_src.push((speed_src, cable_src));
    }
    (out, out_src)
}

#[allow(clippy::type_complexity)]
fn attach_hosts(
    cx: &mut Ctx,
    switches: &mut [Switch],
    by_name: &HashMap<String, SwitchIdx>,
    drafts: &[Draft<HostSpec>],
    srcs: &[ItemSrc],
    port_src: &[Vec<(Src, Src)>],
    ooo_default: bool,
) -> (Vec<Host>, HashMap<String, HostIdx>, Vec<(Src, Src)>) {
    let mut out: Vec<Host> = Vec::with_capacity(drafts.len());
    let mut out_src: Vec<(Src, Src)> = Vec::with_capacity(drafts.len());
    let mut by_host: HashMap<String, HostIdx> = HashMap::with_capacity(drafts.len());
    for (d, src) in drafts.iter().zip(srcs) {
        let h = &d.spec;
        let item = || format!("host {}", display_name(&h.name));
        if !d.generated {
            check_name_at(cx, &format!("{}.name", d.origin), "host", &h.name);
        }
        let Some(att) = &h.attach else {
            cx.err_help(
                &d.origin,
                item(),
                "missing field `attach`",
                "say where the NIC is cabled, e.g. `attach: leaf1:Ethernet0`",
            );
            continue;
        };
        let Some(e) = resolve_end(
            cx,
            switches,
            by_name,
            att,
            || format!("{}.attach", d.origin),
            item,
        ) else {
            continue;
        };
        let hi = out.len();
        let port = &mut switches[e.switch].ports[e.port];
        match port.peer {
            Peer::None => port.peer = Peer::Host { host: hi },
            Peer::Switch { .. } => {
                cx.err(
                    &format!("{}.attach", d.origin),
                    item(),
                    format!("port {att} is already used by a link to another switch"),
                );
                continue;
            }
            Peer::Host { host } => {
                cx.err(
                    &format!("{}.attach", d.origin),
                    item(),
                    format!("port {att} is already used by host {}", out[host].name),
                );
                continue;
            }
        }
        let pspeed = port.speed;
        let pcable = port.cable_length;
        let host_speed = h.speed.unwrap_or(pspeed);
        if host_speed != pspeed {
            let at = if d.generated {
                d.origin.clone()
            } else {
                format!("{}.speed", d.origin)
            };
            cx.err(
                &at,
                item(),
                format!("speed mismatch: the NIC is {host_speed} but {att} is {pspeed}"),
            );
        }
        let ps = port_src[e.switch][e.port];
        by_host.insert(h.name.clone(), hi);
        out_src.push((
            if h.speed.is_some() {
                src.0.unwrap_or(ps.0)
            } else {
                ps.0
            },
            if h.cable_length.is_some() {
                src.1.unwrap_or(ps.1)
            } else {
                ps.1
            },
        ));
        out.push(Host {
            name: h.name.clone(),
            switch: e.switch,
            port: e.port,
            ipv4: h.ipv4.unwrap_or(Ipv4Addr::UNSPECIFIED),
            ipv6: h.ipv6,
            mac: h.mac.unwrap_or(MacAddr([0; 6])),
            gateway_v4: Ipv4Addr::UNSPECIFIED,
            gateway_v6: None,
            rail: h.rail,
            plane: h.plane.or(switches[e.switch].plane),
            ooo_tolerant: h.ooo_tolerant.unwrap_or(ooo_default),
            speed: host_speed,
            cable_length: h.cable_length.unwrap_or(pcable),
            origin: d.origin.clone(),
        });
    }
    (out, by_host, out_src)
}

/// A MAC that can be a unicast source and destination: not all zeros, not group (multicast or
/// broadcast).
fn mac_problem(m: MacAddr) -> Option<&'static str> {
    if m == MacAddr([0; 6]) {
        Some("the all-zero MAC is not an address")
    } else if m.0[0] & 1 == 1 {
        Some(if m == MacAddr([0xff; 6]) {
            "the broadcast MAC cannot be one device's address"
        } else {
            "a multicast MAC (lowest bit of the first byte set) cannot be one device's address"
        })
    } else {
        None
    }
}

fn v4_problem(a: Ipv4Addr) -> Option<&'static str> {
    if a.is_unspecified() {
        Some("0.0.0.0 is not an address")
    } else if a.is_broadcast() {
        Some("the broadcast address cannot be one device's address")
    } else if a.is_multicast() {
        Some("a multicast address cannot be one device's address")
    } else if a.is_loopback() {
        Some("127.0.0.0/8 is the loopback network of every machine")
    } else {
        None
    }
}

fn v6_problem(a: std::net::Ipv6Addr) -> Option<&'static str> {
    if a.is_unspecified() {
        Some(":: is not an address")
    } else if a.is_multicast() {
        Some("a multicast address cannot be one device's address")
    } else if a.is_loopback() {
        Some("::1 is the loopback address of every machine")
    } else {
        None
    }
}

/// Fields an operator wrote on switches and hosts: endpoints, MACs, addresses, device ids.
fn check_explicit_fields(
    cx: &mut Ctx,
    intent: &Intent,
    drafts: &[Draft<SwitchSpec>],
    switches: &[Switch],
    hosts: &[Host],
) {
    let d = &intent.fabric.defaults;
    if let Some(a) = &d.p4rt_address
        && let Err(why) = endpoints::check_host_port(a)
    {
        cx.err_help(
            "fabric.defaults.p4rt_address",
            "fabric.defaults.p4rt_address",
            format!("{:?} is not a P4Runtime address: {why}", a),
            "write HOST:PORT, e.g. 127.0.0.1:9559 (switch N gets PORT+N-1)",
        );
    }
    for (dr, s) in drafts.iter().zip(switches) {
        if dr.generated {
            continue;
        }
        let item = || format!("switch {}", display_name(&s.name));
        let spec = &dr.spec;
        if let Some(a) = &spec.p4rt_address
            && let Err(why) = endpoints::check_host_port(a)
        {
            cx.err_help(
                &format!("{}.p4rt_address", dr.origin),
                item(),
                format!("{:?} is not a P4Runtime address: {why}", a),
                "write HOST:PORT, e.g. 127.0.0.1:9600",
            );
        }
        if let Some(db) = &spec.db
            && let Err(why) = endpoints::check_db(db)
        {
            cx.err_help(
                &format!("{}.db", dr.origin),
                item(),
                format!("{db:?} is not a SONiC DB endpoint: {why}"),
                "write redis://HOST:PORT, unix:///path/to/redis.sock or /path/to/redis.sock",
            );
        }
        if let Some(m) = spec.router_mac
            && let Some(why) = mac_problem(m)
        {
            cx.err_help(
                &format!("{}.router_mac", dr.origin),
                item(),
                format!("router MAC {m}: {why}"),
                "leave `router_mac` out to have one allocated from the device id",
            );
        }
        if let Some(a) = spec.loopback
            && let Some(why) = v4_problem(a)
        {
            cx.err_help(
                &format!("{}.loopback", dr.origin),
                item(),
                format!("loopback {a}: {why}"),
                "leave `loopback` out to have one allocated from fabric.pools.loopbacks_v4",
            );
        }
        if let Some(id) = spec.device_id
            && id > MAX_DEVICE_ID
        {
            cx.err_help(
                &format!("{}.device_id", dr.origin),
                item(),
                format!("device id {id} is larger than {MAX_DEVICE_ID} (32 bits, so the testbed's interface names s<device>p<port> fit Linux's 15 characters)"),
                "leave `device_id` out to have one allocated (they count from 1)",
            );
        }
    }
    for h in hosts {
        if !h.origin.starts_with("hosts[") {
            continue;
        }
        let item = || format!("host {}", display_name(&h.name));
        // An explicit zero value reads as "allocate" here, so the file is asked.
        let mac_path = format!("{}.mac", h.origin);
        if cx.written(&mac_path)
            && let Some(why) = mac_problem(h.mac)
        {
            cx.err_help(
                &mac_path,
                item(),
                format!("MAC {}: {why}", h.mac),
                "leave `mac` out to have one allocated",
            );
        }
        let v4_path = format!("{}.ipv4", h.origin);
        if cx.written(&v4_path)
            && let Some(why) = v4_problem(h.ipv4)
        {
            cx.err_help(
                &v4_path,
                item(),
                format!("address {}: {why}", h.ipv4),
                "leave `ipv4` out to have one allocated from fabric.pools.hosts_v4",
            );
        }
        if let Some(a) = h.ipv6
            && let Some(why) = v6_problem(a)
        {
            cx.err_help(
                &format!("{}.ipv6", h.origin),
                item(),
                format!("address {a}: {why}"),
                "leave `ipv6` out to have one allocated from fabric.pools.hosts_v6",
            );
        }
    }
}

/// Generated SONiC DB sockets must fit a Unix socket path.
fn check_socket_dir(cx: &mut Ctx, d: &Defaults, switches: &[Switch]) {
    // With the default directory every valid name fits (see `names`); bad names are reported
    // as such.
    let Some(dir) = d.db_socket_dir.as_deref() else {
        return;
    };
    let path = "fabric.defaults.db_socket_dir";
    if !dir.starts_with('/') || dir.chars().any(|c| c.is_control() || c.is_whitespace()) {
        cx.err(
            path,
            path,
            format!("{dir:?} must be an absolute directory path without spaces"),
        );
        return;
    }
    let longest = switches
        .iter()
        .filter(|s| s.db.is_empty() && check_name(&s.name).is_ok())
        .max_by_key(|s| s.name.len());
    if let Some(s) = longest {
        let sock = format!("{}/{}/redis.sock", dir.trim_end_matches('/'), s.name);
        if let Err(why) = endpoints::check_socket_path(&sock) {
            cx.err_help(
                path,
                path,
                format!("switch {}'s DB socket {sock}: {why}", display_name(&s.name)),
                "use a shorter directory",
            );
        }
    }
}

fn end_name(sw: &[Switch], e: End) -> String {
    format!("{}:{}", sw[e.switch].name, sw[e.switch].ports[e.port].name)
}

/// The end `r` names, or why it names none (message, help); the caller reports it, so that the
/// path and item strings are only made for errors.
fn find_end(
    switches: &[Switch],
    by_name: &HashMap<String, SwitchIdx>,
    r: &PortRef,
) -> Result<End, (String, Option<String>)> {
    let Some(&si) = by_name.get(&r.switch) else {
        let msg = format!("unknown switch `{}`", display_name(&r.switch));
        let help = suggest(&r.switch, by_name.keys().map(String::as_str))
            .map(|s| format!("did you mean `{s}`?"));
        return Err((msg, help));
    };
    let sw = &switches[si];
    match sw.port_index(&r.port) {
        Some(pi) => Ok(End {
            switch: si,
            port: pi,
        }),
        // Port names differ only in digits, so a nearest-name guess would mislead; list them.
        None => Err((
            format!("switch {} has no port `{}`", sw.name, display_name(&r.port)),
            Some(format!(
                "it has {} ports: {}",
                sw.ports.len(),
                summarize_ports(sw)
            )),
        )),
    }
}

fn resolve_end(
    cx: &mut Ctx,
    switches: &[Switch],
    by_name: &HashMap<String, SwitchIdx>,
    r: &PortRef,
    path: impl Fn() -> String,
    item: impl Fn() -> String,
) -> Option<End> {
    match find_end(switches, by_name, r) {
        Ok(e) => Some(e),
        Err((msg, help)) => {
            match help {
                Some(h) => cx.err_help(&path(), item(), msg, h),
                None => cx.err(&path(), item(), msg),
            }
            None
        }
    }
}

fn summarize_ports(sw: &Switch) -> String {
    match (sw.ports.first(), sw.ports.last()) {
        (Some(a), Some(b)) if sw.ports.len() > 2 => format!("{} … {}", a.name, b.name),
        _ => sw
            .ports
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn overlay_switch(base: &mut SwitchSpec, origins: &mut PortOrigins, o: &SwitchSpec, si: u32) {
    macro_rules! take {
        ($($f:ident),*) => {$( if o.$f.is_some() { base.$f = o.$f.clone(); } )*};
    }
    take!(
        role,
        tier,
        device_id,
        p4rt_address,
        db,
        router_mac,
        loopback,
        plane
    );
    // By name through a map: a switch with thousands of ports must not cost their square.
    let mut at: HashMap<String, usize> = base
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.clone(), i))
        .collect();
    for (j, p) in o.ports.iter().enumerate() {
        let j32 = j as u32;
        match at.get(&p.name) {
            Some(&b) if origins.written_at[b].is_none() => {
                let bp = &mut base.ports[b];
                if p.id.is_some() {
                    bp.id = p.id;
                }
                if p.speed.is_some() {
                    bp.speed = p.speed;
                    origins.src[b].0 = Src::PortSpeed(si, j32);
                }
                if p.cable_length.is_some() {
                    bp.cable_length = p.cable_length;
                    origins.src[b].1 = Src::PortCable(si, j32);
                }
                if p.admin.is_some() {
                    bp.admin = p.admin;
                }
                origins.written_at[b] = Some(j32);
            }
            // A second entry of the same name is a duplicate port: keep it, to be reported.
            _ => {
                at.insert(p.name.clone(), base.ports.len());
                base.ports.push(p.clone());
                let inherited = origins
                    .src
                    .first()
                    .copied()
                    .unwrap_or((Src::Builtin, Src::Builtin));
                origins.src.push((
                    if p.speed.is_some() {
                        Src::PortSpeed(si, j32)
                    } else {
                        inherited.0
                    },
                    if p.cable_length.is_some() {
                        Src::PortCable(si, j32)
                    } else {
                        inherited.1
                    },
                ));
                origins.written_at.push(Some(j32));
            }
        }
    }
}

fn overlay_host(base: &mut HostSpec, o: &HostSpec) {
    macro_rules! take {
        ($($f:ident),*) => {$( if o.$f.is_some() { base.$f = o.$f.clone(); } )*};
    }
    take!(
        attach,
        ipv4,
        ipv6,
        mac,
        rail,
        plane,
        ooo_tolerant,
        speed,
        cable_length
    );
}

/// The intent's default `telemetry.sample`: a postcard for 1 in 1000 packets.
pub const DEFAULT_POSTCARD_SAMPLE: u32 = 1000;

/// Most watched flows the pipeline's postcard_watch_table holds.
pub const MAX_WATCHED_FLOWS: usize = 256; // p4/include/sizes.p4 POSTCARD_WATCH_TABLE_SIZE (the compiler asserts it)

fn resolve_telemetry(
    cx: &mut Ctx,
    t: &TelemetrySpec,
    hosts: &[Host],
    host_by_name: &HashMap<String, HostIdx>,
) -> Telemetry {
    if let Some(c) = &t.collector
        && c != "packet-in"
    {
        cx.err(
            "telemetry.collector",
            "telemetry",
            format!(
                "collector {c:?}: only `packet-in` (postcards to each switch's plugin) is supported"
            ),
        );
    }
    if t.max_records == Some(0) {
        cx.err(
            "telemetry.max_records",
            "telemetry",
            "max_records must be at least 1",
        );
    }
    if t.watch.len() > MAX_WATCHED_FLOWS {
        cx.err(
            "telemetry.watch",
            "telemetry",
            format!(
                "{} watched flows: the pipeline's postcard_watch_table holds {MAX_WATCHED_FLOWS}",
                t.watch.len()
            ),
        );
    }
    let mut watch = Vec::new();
    for (i, w) in t.watch.iter().enumerate() {
        let item = format!("telemetry.watch[{i}]");
        let addr = |cx: &mut Ctx, field: &str, v: &Option<String>| -> Option<std::net::IpAddr> {
            let v = v.as_ref()?;
            if let Some(&h) = host_by_name.get(v.as_str()) {
                return Some(std::net::IpAddr::V4(hosts[h].ipv4));
            }
            match v.parse::<std::net::IpAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
                    let hint = suggest(v, names.iter().copied())
                        .map_or(String::new(), |s| format!(" (did you mean {s}?)"));
                    cx.err(
                        &format!("{item}.{field}"),
                        &item,
                        format!(
                            "{field} {v:?} is neither a host of the fabric nor an IP address{hint}"
                        ),
                    );
                    None
                }
            }
        };
        let src = addr(cx, "src", &w.src);
        let dst = addr(cx, "dst", &w.dst);
        let protocol = match w.protocol.as_deref() {
            None => None,
            Some("udp" | "UDP") => Some(17),
            Some("tcp" | "TCP") => Some(6),
            Some(p) => match p.parse::<u8>() {
                Ok(n) => Some(n),
                Err(_) => {
                    cx.err(
                        &format!("{item}.protocol"),
                        &item,
                        format!("protocol {p:?}: expected udp, tcp or a number 0-255"),
                    );
                    None
                }
            },
        };
        if let Some(q) = w.qp
            && q > 0xff_ffff
        {
            cx.err(
                &format!("{item}.qp"),
                &item,
                format!("qp {q} does not fit the BTH's 24 bits"),
            );
        }
        if w.src.is_none()
            && w.dst.is_none()
            && w.protocol.is_none()
            && w.dst_port.is_none()
            && w.qp.is_none()
        {
            cx.err(
                &item,
                &item,
                "a watched flow needs at least one of src, dst, protocol, dst_port, qp (an empty one would watch every packet: use `sample: 1`)",
            );
        }
        if let (Some(s), Some(d)) = (src, dst)
            && s.is_ipv4() != d.is_ipv4()
        {
            cx.err(&item, &item, "src and dst are of different IP versions");
        }
        watch.push(Watch {
            src,
            dst,
            protocol,
            dst_port: w.dst_port,
            qp: w.qp,
        });
    }
    Telemetry {
        sample: t.sample.unwrap_or(DEFAULT_POSTCARD_SAMPLE),
        watch,
        max_records: t.max_records.unwrap_or(10_000).max(1),
    }
}

fn resolve_failover(cx: &mut Ctx, f: &FailoverSpec) -> Failover {
    let d = &f.dampening;
    let damp = Dampening {
        enabled: d.enabled.unwrap_or(true),
        penalty: d.penalty.unwrap_or(1000),
        suppress: d.suppress.unwrap_or(2000),
        reuse: d.reuse.unwrap_or(750),
        half_life: d.half_life.unwrap_or(Duration::millis(5000)),
        max_suppress: d.max_suppress.unwrap_or(Duration::millis(60_000)),
    };
    if damp.reuse >= damp.suppress {
        let at = if d.reuse.is_some() || d.suppress.is_none() {
            "failover.dampening.reuse"
        } else {
            "failover.dampening.suppress"
        };
        cx.err(
            at,
            "failover.dampening",
            format!(
                "reuse {} must be below suppress {}",
                damp.reuse, damp.suppress
            ),
        );
    }
    if damp.half_life.as_nanos() == 0 {
        cx.err(
            "failover.dampening.half_life",
            "failover.dampening",
            "half_life must be positive",
        );
    }
    Failover {
        hold_down: f.hold_down.unwrap_or(Duration::millis(2000)),
        dampening: damp,
    }
}
