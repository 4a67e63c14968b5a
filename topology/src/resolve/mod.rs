//! Intent → Topology: expand generators, overlay explicit items, apply defaults, allocate ids and
//! addresses, and check everything that makes a fabric impossible. All problems are collected.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

use crate::diag::{Sink, suggest};
use crate::generators::{self, GenContext};
use crate::model::*;
use crate::topo::*;
use crate::units::{Duration, Length, Speed};
use crate::yaml::PathIndex;

pub const DEFAULT_SPEED: Speed = Speed::gbps(100);
pub const DEFAULT_MTU: u32 = 9100;
pub const DEFAULT_CABLE: Length = Length::metres(5);
pub const DEFAULT_HOST_CABLE: Length = Length::metres(2);
pub const DEFAULT_P4RT_ADDRESS: &str = "127.0.0.1:9559";
pub const DEFAULT_DB_SOCKET_DIR: &str = "/run/weft";
pub const DEFAULT_FLOWLET_GAP: Duration = Duration::micros(100);
const ROUTER_MAC_BASE: u64 = 0x0257_4600_0000;
const HOST_MAC_BASE: u64 = 0x0257_4800_0000;

fn default_hosts_v4() -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::new(10, 0, 0, 0), 10).unwrap_or_default()
}
fn default_loopbacks_v4() -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::new(10, 255, 0, 0), 16).unwrap_or_default()
}

struct Ctx<'a> {
    file: &'a str,
    idx: &'a PathIndex,
    sink: Sink,
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
}

struct Draft<T> {
    spec: T,
    origin: String,
    generated: bool,
}

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

/// Resolves a deserialised intent. `idx` locates paths in the original text for messages.
pub fn resolve(
    intent: &Intent,
    file: &str,
    idx: &PathIndex,
) -> Result<Topology, Vec<crate::Diagnostic>> {
    let mut cx = Ctx {
        file,
        idx,
        sink: Sink::default(),
    };
    let d = &intent.fabric.defaults;
    let speed = d.speed.unwrap_or(DEFAULT_SPEED);
    let mtu = d.mtu.unwrap_or(DEFAULT_MTU);
    if !(1280..=9216).contains(&mtu) {
        cx.err(
            "fabric.defaults.mtu",
            "fabric.defaults.mtu",
            format!("MTU {mtu} is outside 1280..=9216 bytes"),
        );
    }
    let cable = d.cable_length.unwrap_or(DEFAULT_CABLE);
    let gen_ctx = GenContext {
        speed,
        host_speed: d.host_speed.unwrap_or(speed),
        cable,
        host_cable: d.host_cable_length.unwrap_or(DEFAULT_HOST_CABLE),
    };

    // 1. Generators, then explicit items on top.
    let mut switches: Vec<Draft<SwitchSpec>> = Vec::new();
    let mut hosts: Vec<Draft<HostSpec>> = Vec::new();
    let mut links: Vec<Draft<LinkSpec>> = Vec::new();
    for (i, g) in intent.generators.iter().enumerate() {
        let origin = format!("generators[{i}]");
        match generators::generate(g, &gen_ctx) {
            Ok(out) => {
                switches.extend(out.switches.into_iter().map(|spec| Draft {
                    spec,
                    origin: origin.clone(),
                    generated: true,
                }));
                hosts.extend(out.hosts.into_iter().map(|spec| Draft {
                    spec,
                    origin: origin.clone(),
                    generated: true,
                }));
                links.extend(out.links.into_iter().map(|spec| Draft {
                    spec,
                    origin: origin.clone(),
                    generated: true,
                }));
            }
            Err((field, msg)) => cx.err(
                &format!("{origin}.{field}"),
                format!("{origin}.{field}"),
                msg,
            ),
        }
    }
    let mut sw_pos: HashMap<String, usize> = HashMap::with_capacity(switches.len());
    for (i, s) in switches.iter().enumerate() {
        if sw_pos.insert(s.spec.name.clone(), i).is_some() {
            cx.err(&s.origin, format!("switch {}", s.spec.name), "generators produce the same switch name twice; give the generators distinct fabrics or rename by hand");
        }
    }
    for (i, s) in intent.switches.iter().enumerate() {
        let origin = format!("switches[{i}]");
        match sw_pos.get(&s.name) {
            Some(&j) if switches[j].generated => {
                overlay_switch(&mut switches[j].spec, s);
                switches[j].origin = origin;
                switches[j].generated = false;
            }
            Some(_) => cx.err(
                &format!("{origin}.name"),
                format!("switch {}", s.name),
                "duplicate switch name",
            ),
            None => {
                sw_pos.insert(s.name.clone(), switches.len());
                switches.push(Draft {
                    spec: s.clone(),
                    origin,
                    generated: false,
                });
            }
        }
    }
    let mut host_pos: HashMap<String, usize> = HashMap::with_capacity(hosts.len());
    for (i, h) in hosts.iter().enumerate() {
        if host_pos.insert(h.spec.name.clone(), i).is_some() {
            cx.err(
                &h.origin,
                format!("host {}", h.spec.name),
                "generators produce the same host name twice",
            );
        }
    }
    for (i, h) in intent.hosts.iter().enumerate() {
        let origin = format!("hosts[{i}]");
        match host_pos.get(&h.name) {
            Some(&j) if hosts[j].generated => {
                overlay_host(&mut hosts[j].spec, h);
                hosts[j].origin = origin;
                hosts[j].generated = false;
            }
            Some(_) => cx.err(
                &format!("{origin}.name"),
                format!("host {}", h.name),
                "duplicate host name",
            ),
            None => {
                host_pos.insert(h.name.clone(), hosts.len());
                hosts.push(Draft {
                    spec: h.clone(),
                    origin,
                    generated: false,
                });
            }
        }
    }
    let pair = |l: &LinkSpec| {
        let (a, b) = (l.a.clone(), l.b.clone());
        if a <= b { (a, b) } else { (b, a) }
    };
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
        match link_pos.get(&pair(l)) {
            Some(&j) if links[j].generated => {
                if l.speed.is_some() {
                    links[j].spec.speed = l.speed;
                }
                if l.cable_length.is_some() {
                    links[j].spec.cable_length = l.cable_length;
                }
                links[j].origin = origin;
                links[j].generated = false;
            }
            Some(_) => cx.err(&origin, format!("link {} ↔ {}", l.a, l.b), "duplicate link"),
            None => {
                link_pos.insert(pair(l), links.len());
                links.push(Draft {
                    spec: l.clone(),
                    origin,
                    generated: false,
                });
            }
        }
    }
    for name in sw_pos.keys() {
        if let Some(&h) = host_pos.get(name) {
            let o = hosts[h].origin.clone();
            cx.err(
                &o,
                format!("host {name}"),
                "a host and a switch share this name",
            );
        }
    }

    // 2. Switches and ports.
    let mut out_switches: Vec<Switch> = Vec::with_capacity(switches.len());
    let mut switch_by_name: HashMap<String, SwitchIdx> = HashMap::with_capacity(switches.len());
    for (si, d) in switches.iter().enumerate() {
        let s = &d.spec;
        let item = format!("switch {}", s.name);
        let role = match (s.role, s.tier) {
            (Some(r), Some(t)) if r.tier() != t => {
                cx.err(
                    &format!("{}.tier", d.origin),
                    &item,
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
                        &item,
                        format!("tier {t} is not 1 (leaf), 2 (spine) or 3 (superspine)"),
                    );
                    Role::Leaf
                }
            },
            (None, None) => {
                cx.err_help(
                    &d.origin,
                    &item,
                    "missing role",
                    "add `role: leaf`, `role: spine` or `role: superspine` (or `tier: N`)",
                );
                Role::Leaf
            }
        };
        if s.name.is_empty() || s.name.contains([':', '|', '/', ' ']) {
            cx.err(&format!("{}.name", d.origin), &item, "switch names must be non-empty and contain no ':', '|', '/' or spaces (they appear in port references and Redis keys)");
        }
        let mut ports = Vec::with_capacity(s.ports.len());
        let mut port_names: HashSet<&str> = HashSet::with_capacity(s.ports.len());
        let mut port_ids: HashSet<u32> = HashSet::with_capacity(s.ports.len());
        for (pi, p) in s.ports.iter().enumerate() {
            let ppath = if d.generated {
                d.origin.clone()
            } else {
                port_path(&d.origin, intent, &s.name, pi, &p.name)
                    .unwrap_or_else(|| d.origin.clone())
            };
            let lane = p
                .name
                .strip_prefix("Ethernet")
                .and_then(|n| n.parse::<u32>().ok());
            let pitem = format!("port {}:{}", s.name, p.name);
            if lane.is_none() {
                cx.err_help(
                    &format!("{ppath}.name"),
                    &pitem,
                    "port names are SONiC names",
                    "write `EthernetN`, e.g. `Ethernet0`, `Ethernet4`",
                );
            }
            if !port_names.insert(&p.name) {
                cx.err(&format!("{ppath}.name"), &pitem, "duplicate port name");
            }
            let id =
                p.id.unwrap_or_else(|| lane.map_or(pi as u32 + 1, |l| l / 4 + 1));
            if id == 0 || id >= 511 {
                cx.err(&format!("{ppath}.id"), &pitem, format!("P4Runtime port id {id} is outside 1..=510 (BMv2 port numbers; 511 is the drop port)"));
            }
            if !port_ids.insert(id) {
                cx.err(
                    &format!("{ppath}.id"),
                    &pitem,
                    format!("P4Runtime port id {id} is used by another port of this switch"),
                );
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
        switch_by_name.insert(s.name.clone(), si);
        out_switches.push(Switch {
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

    // 3. Links.
    let mut out_links: Vec<Link> = Vec::with_capacity(links.len());
    for d in &links {
        let l = &d.spec;
        let item = format!("link {} ↔ {}", l.a, l.b);
        let ea = resolve_end(
            &mut cx,
            &out_switches,
            &switch_by_name,
            &l.a,
            &format!("{}.a", d.origin),
            &item,
        );
        let eb = resolve_end(
            &mut cx,
            &out_switches,
            &switch_by_name,
            &l.b,
            &format!("{}.b", d.origin),
            &item,
        );
        let (Some(ea), Some(eb)) = (ea, eb) else {
            continue;
        };
        if ea.switch == eb.switch {
            cx.err(&d.origin, &item, "a link must join two different switches");
            continue;
        }
        let li = out_links.len();
        let mut taken = false;
        for e in [ea, eb] {
            let port = &mut out_switches[e.switch].ports[e.port];
            match port.peer {
                Peer::None => port.peer = Peer::Switch { link: li },
                Peer::Switch { link } => {
                    taken = true;
                    let other = &out_links[link];
                    let msg = format!(
                        "port {}:{} is already used by the link {} ↔ {}",
                        out_switches[e.switch].name,
                        out_switches[e.switch].ports[e.port].name,
                        end_name(&out_switches, other.a),
                        end_name(&out_switches, other.b)
                    );
                    cx.err(&d.origin, &item, msg);
                }
                // Hosts are attached after links, so a link never finds a host here.
                Peer::Host { .. } => {}
            }
        }
        if taken {
            continue;
        }
        let pa = &out_switches[ea.switch].ports[ea.port];
        let pb = &out_switches[eb.switch].ports[eb.port];
        let link_speed = match l.speed {
            Some(s) if s > pa.speed || s > pb.speed => {
                cx.err(
                    &format!("{}.speed", d.origin),
                    &item,
                    format!(
                        "link speed {s} is faster than its ports ({} and {})",
                        pa.speed, pb.speed
                    ),
                );
                s
            }
            Some(s) => s,
            None if pa.speed != pb.speed => {
                cx.err_help(&d.origin, &item, format!("speed mismatch: {} is {} but {} is {}", l.a, pa.speed, l.b, pb.speed), "set the same speed on both ports, or `speed:` on the link to run both at the lower one");
                pa.speed.min(pb.speed)
            }
            None => pa.speed,
        };
        let link_cable = l
            .cable_length
            .unwrap_or(pa.cable_length.max(pb.cable_length));
        out_links.push(Link {
            a: ea,
            b: eb,
            speed: link_speed,
            cable_length: link_cable,
            origin: d.origin.clone(),
        });
    }

    // 4. Hosts.
    let ooo_default = d.ooo_tolerant.unwrap_or(false);
    let mut out_hosts: Vec<Host> = Vec::with_capacity(hosts.len());
    let mut host_by_name: HashMap<String, HostIdx> = HashMap::with_capacity(hosts.len());
    for d in &hosts {
        let h = &d.spec;
        let item = format!("host {}", h.name);
        let Some(att) = &h.attach else {
            cx.err_help(
                &d.origin,
                &item,
                "missing field `attach`",
                "say where the NIC is cabled, e.g. `attach: leaf1:Ethernet0`",
            );
            continue;
        };
        let Some(e) = resolve_end(
            &mut cx,
            &out_switches,
            &switch_by_name,
            att,
            &format!("{}.attach", d.origin),
            &item,
        ) else {
            continue;
        };
        let hi = out_hosts.len();
        let port = &mut out_switches[e.switch].ports[e.port];
        match port.peer {
            Peer::None => port.peer = Peer::Host { host: hi },
            Peer::Switch { .. } => {
                cx.err(
                    &format!("{}.attach", d.origin),
                    &item,
                    format!("port {att} is already used by a link to another switch"),
                );
                continue;
            }
            Peer::Host { host } => {
                cx.err(
                    &format!("{}.attach", d.origin),
                    &item,
                    format!(
                        "port {att} is already used by host {}",
                        out_hosts[host].name
                    ),
                );
                continue;
            }
        }
        let pspeed = port.speed;
        let host_speed = h.speed.unwrap_or(pspeed);
        if host_speed != pspeed {
            cx.err(
                &d.origin,
                &item,
                format!("speed mismatch: the NIC is {host_speed} but {att} is {pspeed}"),
            );
        }
        host_by_name.insert(h.name.clone(), hi);
        out_hosts.push(Host {
            name: h.name.clone(),
            switch: e.switch,
            port: e.port,
            ipv4: h.ipv4.unwrap_or(Ipv4Addr::UNSPECIFIED),
            ipv6: h.ipv6,
            mac: h.mac.unwrap_or(MacAddr([0; 6])),
            gateway_v4: Ipv4Addr::UNSPECIFIED,
            gateway_v6: None,
            rail: h.rail,
            plane: h.plane.or(out_switches[e.switch].plane),
            ooo_tolerant: h.ooo_tolerant.unwrap_or(ooo_default),
            speed: host_speed,
            cable_length: h
                .cable_length
                .unwrap_or(out_switches[e.switch].ports[e.port].cable_length),
            origin: d.origin.clone(),
        });
    }

    // 5. Pools and allocation.
    let pools = ResolvedPools {
        hosts_v4: intent
            .fabric
            .pools
            .hosts_v4
            .unwrap_or_else(default_hosts_v4),
        hosts_v6: intent.fabric.pools.hosts_v6,
        loopbacks_v4: intent
            .fabric
            .pools
            .loopbacks_v4
            .unwrap_or_else(default_loopbacks_v4),
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
    allocate_switches(&mut cx, &mut out_switches, d, &pools);
    allocate_hosts(&mut cx, &mut out_switches, &mut out_hosts, &pools);
    check_unique(&mut cx, &out_switches, &out_hosts);
    check_partition(&mut cx, &out_switches, &out_links, &out_hosts);

    // 6. QoS, routing, failover.
    let qos = resolve_qos(&mut cx, intent);
    check_ecn_before_pfc(&mut cx, &qos, &out_switches, mtu);
    let failover = resolve_failover(&mut cx, &intent.failover);

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
        pools,
        switch_by_name,
        host_by_name,
    })
}

/// Where port `pi` of an explicit switch was written: at the same index when the switch is purely
/// explicit, else wherever the overlay names it.
fn port_path(origin: &str, intent: &Intent, sw: &str, pi: usize, port: &str) -> Option<String> {
    let i: usize = origin
        .strip_prefix("switches[")?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    let s = intent.switches.get(i).filter(|s| s.name == sw)?;
    let at = match s.ports.get(pi) {
        Some(p) if p.name == port => pi,
        _ => s.ports.iter().position(|p| p.name == port)?,
    };
    Some(format!("{origin}.ports[{at}]"))
}

fn end_name(sw: &[Switch], e: End) -> String {
    format!("{}:{}", sw[e.switch].name, sw[e.switch].ports[e.port].name)
}

fn resolve_end(
    cx: &mut Ctx,
    switches: &[Switch],
    by_name: &HashMap<String, SwitchIdx>,
    r: &PortRef,
    path: &str,
    item: &str,
) -> Option<End> {
    let Some(&si) = by_name.get(&r.switch) else {
        let msg = format!("unknown switch `{}`", r.switch);
        match suggest(&r.switch, by_name.keys().map(String::as_str)) {
            Some(s) => cx.err_help(path, item, msg, format!("did you mean `{s}`?")),
            None => cx.err(path, item, msg),
        }
        return None;
    };
    let sw = &switches[si];
    match sw.port_index(&r.port) {
        Some(pi) => Some(End {
            switch: si,
            port: pi,
        }),
        None => {
            // Port names differ only in digits, so a nearest-name guess would mislead; list them.
            let msg = format!("switch {} has no port `{}`", sw.name, r.port);
            cx.err_help(
                path,
                item,
                msg,
                format!("it has {} ports: {}", sw.ports.len(), summarize_ports(sw)),
            );
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

fn overlay_switch(base: &mut SwitchSpec, o: &SwitchSpec) {
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
    for p in &o.ports {
        match base.ports.iter_mut().find(|b| b.name == p.name) {
            Some(b) => {
                if p.id.is_some() {
                    b.id = p.id;
                }
                if p.speed.is_some() {
                    b.speed = p.speed;
                }
                if p.cable_length.is_some() {
                    b.cable_length = p.cable_length;
                }
                if p.admin.is_some() {
                    b.admin = p.admin;
                }
            }
            None => base.ports.push(p.clone()),
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

fn allocate_switches(cx: &mut Ctx, switches: &mut [Switch], d: &Defaults, pools: &ResolvedPools) {
    let used: HashSet<u64> = switches
        .iter()
        .map(|s| s.device_id)
        .filter(|&id| id != 0)
        .collect();
    let base_addr = d.p4rt_address.as_deref().unwrap_or(DEFAULT_P4RT_ADDRESS);
    let (base_host, base_port) = match base_addr
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u32>().ok()?)))
    {
        Some(x) => x,
        None => {
            cx.err(
                "fabric.defaults.p4rt_address",
                "fabric.defaults.p4rt_address",
                format!("{base_addr:?} is not HOST:PORT"),
            );
            ("127.0.0.1", 9559)
        }
    };
    let sock_dir = d
        .db_socket_dir
        .as_deref()
        .unwrap_or(DEFAULT_DB_SOCKET_DIR)
        .trim_end_matches('/');
    let lo_hosts = pools.loopbacks_v4.hosts();
    let lo_capacity = u64::from(
        u32::from(pools.loopbacks_v4.broadcast()) - u32::from(pools.loopbacks_v4.network()),
    );
    if (switches.len() as u64) >= lo_capacity {
        cx.err(
            "fabric.pools.loopbacks_v4",
            "fabric.pools.loopbacks_v4",
            format!(
                "{} has room for {} loopbacks but the fabric has {} switches",
                pools.loopbacks_v4,
                lo_capacity.saturating_sub(1),
                switches.len()
            ),
        );
    }
    let mut lo_iter = lo_hosts;
    let mut next_id = 1u64;
    for (i, s) in switches.iter_mut().enumerate() {
        if s.device_id == 0 {
            while used.contains(&next_id) {
                next_id += 1;
            }
            s.device_id = next_id;
            next_id += 1;
        }
        if s.p4rt_address.is_empty() {
            let port = u64::from(base_port) + i as u64;
            if port > 65535 {
                cx.err(&s.origin, format!("switch {}", s.name), "no P4Runtime port left after fabric.defaults.p4rt_address; set p4rt_address per switch");
            }
            s.p4rt_address = format!("{base_host}:{port}");
        }
        if s.db.is_empty() {
            s.db = format!("unix://{sock_dir}/{}/redis.sock", s.name);
        }
        if s.router_mac == MacAddr([0; 6]) {
            s.router_mac = MacAddr::from_u64(ROUTER_MAC_BASE + s.device_id);
        }
        if s.loopback.is_unspecified() {
            s.loopback = lo_iter.next().unwrap_or(Ipv4Addr::UNSPECIFIED);
        }
    }
}

fn allocate_hosts(
    cx: &mut Ctx,
    switches: &mut [Switch],
    hosts: &mut [Host],
    pools: &ResolvedPools,
) {
    // One subnet per leaf (network, gateway, hosts, broadcast), sized for the busiest leaf, so every leaf's hosts aggregate into one
    // prefix and pods into a contiguous range.
    let mut per_switch: Vec<Vec<HostIdx>> = vec![Vec::new(); switches.len()];
    for (i, h) in hosts.iter().enumerate() {
        per_switch[h.switch].push(i);
    }
    let max_hosts = per_switch.iter().map(Vec::len).max().unwrap_or(0);
    if max_hosts == 0 {
        return;
    }
    let bits = (max_hosts as u64 + 3)
        .next_power_of_two()
        .trailing_zeros()
        .max(2) as u8;
    let v4_len = 32 - bits;
    let leaves_with_hosts = per_switch.iter().filter(|v| !v.is_empty()).count() as u64;
    let pool_len = pools.hosts_v4.prefix_len();
    if v4_len < pool_len || (leaves_with_hosts > (1u64 << (v4_len - pool_len))) {
        cx.err(
            "fabric.pools.hosts_v4",
            "fabric.pools.hosts_v4",
            format!(
                "{} is too small: {leaves_with_hosts} leaves need a /{v4_len} each",
                pools.hosts_v4
            ),
        );
        return;
    }
    let base = u32::from(pools.hosts_v4.network());
    let v6_base = pools.hosts_v6.map(|p| u128::from(p.network()));
    let mut slot = 0u32;
    for (si, list) in per_switch.iter().enumerate() {
        if list.is_empty() {
            continue;
        }
        let net_addr = base + (slot << bits);
        slot += 1;
        let subnet = Ipv4Net::new(Ipv4Addr::from(net_addr), v4_len).unwrap_or_default();
        let v6_subnet = v6_base
            .and_then(|b| Ipv6Net::new(Ipv6Addr::from(b + (u128::from(slot - 1) << 64)), 64).ok());
        let mut all_inside = true;
        for (k, &hi) in list.iter().enumerate() {
            let h = &mut hosts[hi];
            if h.ipv4.is_unspecified() {
                h.ipv4 = Ipv4Addr::from(net_addr + 2 + k as u32);
            } else if !subnet.contains(&h.ipv4) {
                all_inside = false;
            }
            h.gateway_v4 = Ipv4Addr::from(net_addr + 1);
            if let Some(n6) = v6_subnet {
                let b6 = u128::from(n6.network());
                if h.ipv6.is_none() {
                    h.ipv6 = Some(Ipv6Addr::from(b6 + 2 + k as u128));
                }
                if h.ipv6.is_some() {
                    h.gateway_v6 = Some(Ipv6Addr::from(b6 + 1));
                }
            }
            if h.mac == MacAddr([0; 6]) {
                h.mac = MacAddr::from_u64(HOST_MAC_BASE + hi as u64 + 1);
            }
        }
        if all_inside {
            switches[si].host_subnet_v4 = Some(subnet);
            switches[si].host_subnet_v6 = v6_subnet;
        }
    }
}

fn check_unique(cx: &mut Ctx, switches: &[Switch], hosts: &[Host]) {
    fn dup<K: std::hash::Hash + Eq + std::fmt::Display>(
        cx: &mut Ctx,
        what: &str,
        items: impl Iterator<Item = (K, String, String)>,
    ) {
        let mut seen: HashMap<K, String> = HashMap::new();
        for (k, name, origin) in items {
            // Unallocated values (a pool ran out) are reported once, where the pool is.
            if matches!(k.to_string().as_str(), "0.0.0.0" | "00:00:00:00:00:00") {
                continue;
            }
            if let Some(first) = seen.get(&k) {
                let msg = format!("duplicate {what} {k} (also used by {first})");
                cx.err(&origin, name, msg);
            } else {
                seen.insert(k, name);
            }
        }
    }
    let sw = |f: fn(&Switch) -> String| {
        switches
            .iter()
            .map(move |s| (f(s), format!("switch {}", s.name), s.origin.clone()))
    };
    dup(cx, "device id", sw(|s| s.device_id.to_string()));
    dup(cx, "P4Runtime address", sw(|s| s.p4rt_address.clone()));
    dup(cx, "SONiC DB endpoint", sw(|s| s.db.clone()));
    dup(cx, "router MAC", sw(|s| s.router_mac.to_string()));
    let addrs = switches
        .iter()
        .map(|s| {
            (
                IpAddr::V4(s.loopback),
                format!("switch {}", s.name),
                s.origin.clone(),
            )
        })
        .chain(hosts.iter().map(|h| {
            (
                IpAddr::V4(h.ipv4),
                format!("host {}", h.name),
                h.origin.clone(),
            )
        }))
        .chain(hosts.iter().filter_map(|h| {
            Some((
                IpAddr::V6(h.ipv6?),
                format!("host {}", h.name),
                h.origin.clone(),
            ))
        }));
    dup(cx, "address", addrs);
    dup(
        cx,
        "MAC",
        hosts.iter().map(|h| {
            (
                h.mac.to_string(),
                format!("host {}", h.name),
                h.origin.clone(),
            )
        }),
    );
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

fn check_partition(cx: &mut Ctx, switches: &[Switch], links: &[Link], hosts: &[Host]) {
    let mut parent: Vec<usize> = (0..switches.len()).collect();
    for l in links {
        let up = switches[l.a.switch].ports[l.a.port].admin_up
            && switches[l.b.switch].ports[l.b.port].admin_up;
        if up {
            let (a, b) = (find(&mut parent, l.a.switch), find(&mut parent, l.b.switch));
            parent[a] = b;
        }
    }
    // Hosts of different planes never need to meet; within a plane all must.
    let mut first_of_plane: HashMap<Option<u32>, (usize, usize)> = HashMap::new();
    let mut reported: HashSet<(Option<u32>, usize)> = HashSet::new();
    for (hi, h) in hosts.iter().enumerate() {
        let comp = find(&mut parent, h.switch);
        match first_of_plane.get(&h.plane) {
            None => {
                first_of_plane.insert(h.plane, (hi, comp));
            }
            Some(&(first, c)) if c != comp && reported.insert((h.plane, comp)) => {
                let msg = format!(
                    "host {} cannot reach host {}: the fabric is partitioned (no path of up links between {} and {})",
                    h.name,
                    hosts[first].name,
                    switches[h.switch].name,
                    switches[hosts[first].switch].name
                );
                cx.err(&h.origin, format!("host {}", h.name), msg);
            }
            Some(_) => {}
        }
    }
}

fn resolve_qos(cx: &mut Ctx, intent: &Intent) -> Qos {
    let q = &intent.qos;
    let specs = q.classes.clone().unwrap_or_else(default_classes);
    let path = |i: usize| {
        if q.classes.is_some() {
            format!("qos.classes[{i}]")
        } else {
            "qos".into()
        }
    };
    let mut names = HashSet::new();
    let mut dscp_owner: HashMap<u8, String> = HashMap::new();
    let mut default_class: Option<usize> = None;
    let mut classes = Vec::new();
    for (i, c) in specs.iter().enumerate() {
        let item = format!("class {}", c.name);
        if !names.insert(c.name.clone()) {
            cx.err(
                &format!("{}.name", path(i)),
                &item,
                "duplicate traffic class name",
            );
        }
        if c.traffic_class > 7 {
            cx.err(
                &format!("{}.traffic_class", path(i)),
                &item,
                format!("traffic class {} is outside 0..=7", c.traffic_class),
            );
        }
        let (dscp, is_default) = match &c.dscp {
            DscpSet::Values(v) => {
                for &x in v {
                    if x > 63 {
                        cx.err(
                            &format!("{}.dscp", path(i)),
                            &item,
                            format!("DSCP {x} is outside 0..=63"),
                        );
                    } else if let Some(o) = dscp_owner.insert(x, c.name.clone()) {
                        cx.err(
                            &format!("{}.dscp", path(i)),
                            &item,
                            format!("DSCP {x} is already taken by class {o}"),
                        );
                    }
                }
                (v.clone(), false)
            }
            DscpSet::Keyword(DscpKeyword::Default) => {
                if default_class.replace(i).is_some() {
                    cx.err(
                        &format!("{}.dscp", path(i)),
                        &item,
                        "only one class can take `dscp: default`",
                    );
                }
                (Vec::new(), true)
            }
        };
        let policy = intent
            .routing
            .classes
            .get(&c.name)
            .unwrap_or(&intent.routing.default);
        let ecn = c
            .ecn
            .as_ref()
            .map_or_else(EcnOverride::default, |e| EcnOverride {
                kmin: e.kmin,
                kmax: e.kmax,
                pmax: e.pmax,
            });
        classes.push(TrafficClass {
            name: c.name.clone(),
            dscp,
            is_default,
            traffic_class: c.traffic_class,
            lossless: c.lossless.unwrap_or(false),
            ecn,
            routing: policy
                .mode
                .or(intent.routing.default.mode)
                .unwrap_or_default(),
            flowlet_gap: policy
                .flowlet_gap
                .or(intent.routing.default.flowlet_gap)
                .unwrap_or(DEFAULT_FLOWLET_GAP),
        });
    }
    if let Some(di) = default_class {
        let rest: Vec<u8> = (0..64).filter(|x| !dscp_owner.contains_key(x)).collect();
        classes[di].dscp = rest;
    }
    let class_names: Vec<&str> = specs.iter().map(|c| c.name.as_str()).collect();
    for name in intent.routing.classes.keys() {
        if !class_names.contains(&name.as_str()) {
            let msg = format!("routing policy for unknown traffic class `{name}`");
            let p = format!("routing.classes.{name}");
            match suggest(name, class_names.iter().copied()) {
                Some(s) => cx.err_help(&p, &p, msg, format!("did you mean `{s}`?")),
                None => cx.err_help(
                    &p,
                    &p,
                    msg,
                    format!("classes are: {}", class_names.join(", ")),
                ),
            }
        }
    }
    let mut lossless_tc = HashSet::new();
    for (i, c) in classes.iter().enumerate() {
        if c.lossless && !lossless_tc.insert(c.traffic_class) {
            cx.err(
                &path(i),
                format!("class {}", c.name),
                format!(
                    "two lossless classes share traffic class {}",
                    c.traffic_class
                ),
            );
        }
    }
    let check_ecn = |cx: &mut Ctx, p: &str, e: &EcnOverride| {
        if let Some(pm) = e.pmax
            && !(pm > 0.0 && pm <= 1.0)
        {
            cx.err(
                &format!("{p}.pmax"),
                format!("{p}.pmax"),
                format!("pmax {pm} must be in (0, 1]"),
            );
        }
        if let (Some(a), Some(b)) = (e.kmin, e.kmax)
            && a >= b
        {
            cx.err_help(
                &format!("{p}.kmin"),
                p.to_string(),
                format!("kmin {a} must be below kmax {b}"),
                "marking probability rises from kmin to kmax",
            );
        }
    };
    let global = EcnOverride {
        kmin: q.ecn.kmin,
        kmax: q.ecn.kmax,
        pmax: q.ecn.pmax,
    };
    check_ecn(cx, "qos.ecn", &global);
    for (i, c) in classes.iter().enumerate() {
        check_ecn(cx, &format!("{}.ecn", path(i)), &c.ecn);
    }
    let wd = &q.pfc.watchdog;
    let watchdog = Watchdog {
        enabled: wd.enabled.unwrap_or(true),
        detection_time: wd.detection_time.unwrap_or(Duration::millis(200)),
        restoration_time: wd.restoration_time.unwrap_or(Duration::millis(400)),
        action: wd.action.unwrap_or_default(),
        poll_interval: wd.poll_interval.unwrap_or(Duration::millis(100)),
    };
    let range = |cx: &mut Ctx, f: &str, v: Duration, lo: u64, hi: u64| {
        if v.as_millis() < lo || v.as_millis() > hi || !v.as_nanos().is_multiple_of(1_000_000) {
            cx.err(&format!("qos.pfc.watchdog.{f}"), format!("qos.pfc.watchdog.{f}"), format!("{f} {v} must be whole milliseconds in {lo}ms..={hi}ms (SONiC's PFC watchdog range)"));
        }
    };
    range(cx, "detection_time", watchdog.detection_time, 100, 5000);
    range(
        cx,
        "restoration_time",
        watchdog.restoration_time,
        100,
        60000,
    );
    range(cx, "poll_interval", watchdog.poll_interval, 10, 1000);
    if let (Some(xoff), Some(xon)) = (q.pfc.xoff, q.pfc.xon)
        && xon.0 == 0
    {
        cx.err(
            "qos.pfc.xon",
            "qos.pfc.xon",
            format!("xon must be positive (xoff is {xoff})"),
        );
    }
    Qos {
        classes,
        ecn: global,
        tuning: q.ecn.tuning.unwrap_or_default(),
        pfc_enabled: q.pfc.enabled.unwrap_or(true),
        xoff: q.pfc.xoff,
        xon: q.pfc.xon,
        port_buffer: q.pfc.port_buffer,
        watchdog,
    }
}

/// ECN must mark long before PFC pauses: on every port speed in use, each lossless class's Kmax
/// must stay under the pause threshold.
fn check_ecn_before_pfc(cx: &mut Ctx, qos: &Qos, switches: &[Switch], mtu: u32) {
    if !qos.pfc_enabled {
        return;
    }
    let mut seen: HashSet<(Speed, Length)> = HashSet::new();
    for s in switches {
        for p in &s.ports {
            if !seen.insert((p.speed, p.cable_length)) {
                continue;
            }
            for (i, c) in qos.classes.iter().enumerate() {
                if !c.lossless {
                    continue;
                }
                let pq = qos.port_qos(p.speed, p.cable_length, mtu, c);
                if pq.ecn.kmin >= pq.ecn.kmax {
                    continue; // reported by the ECN check
                }
                if pq.ecn.kmax > pq.pause_threshold {
                    let at = if c.ecn.kmax.is_some() {
                        format!("qos.classes[{i}].ecn.kmax")
                    } else {
                        "qos.ecn.kmax".into()
                    };
                    cx.err_help(
                        &at,
                        format!("class {}", c.name),
                        format!(
                            "ECN kmax {} is above the PFC pause threshold {} on {} {} ports (buffer {} − headroom {}): ECN must act before PFC",
                            pq.ecn.kmax.human(), pq.pause_threshold.human(), p.speed, p.cable_length, pq.port_buffer.human(), pq.headroom.size.human()
                        ),
                        "lower kmin/kmax or raise qos.pfc.port_buffer",
                    );
                    return;
                }
            }
        }
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
        cx.err(
            "failover.dampening.reuse",
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
