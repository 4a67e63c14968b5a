//! Fabric generators. Each expands into plain switch, host and link specs with deterministic names
//! and port numbers, so a generated fabric is exactly what the same items written by hand would be.
//!
//! Port `i` of a generated switch is `Ethernet{4i}` with P4Runtime id `i+1` (SONiC numbers ports
//! by first lane; four lanes per port).

use crate::model::{Generator, HostSpec, LinkSpec, PortRef, PortSpec, Role, SwitchSpec};
use crate::units::{Length, Speed};

/// SONiC name of the port with index `i`.
pub fn port_name(i: u32) -> String {
    format!("Ethernet{}", i * 4)
}

/// Generated items, and generator parameter problems as (field, message).
#[derive(Default)]
pub struct Generated {
    pub switches: Vec<SwitchSpec>,
    pub hosts: Vec<HostSpec>,
    pub links: Vec<LinkSpec>,
}

pub struct GenContext {
    pub speed: Speed,
    pub host_speed: Speed,
    pub cable: Length,
    pub host_cable: Length,
}

fn switch(name: String, role: Role, ports: u32, speed: Speed, plane: Option<u32>) -> SwitchSpec {
    SwitchSpec {
        name,
        role: Some(role),
        plane,
        ports: (0..ports)
            .map(|i| PortSpec {
                name: port_name(i),
                id: Some(i + 1),
                speed: Some(speed),
                ..PortSpec::default()
            })
            .collect(),
        ..SwitchSpec::default()
    }
}

fn link(
    a: &str,
    ap: u32,
    b: &str,
    bp: u32,
    speed: Option<Speed>,
    cable: Option<Length>,
) -> LinkSpec {
    LinkSpec {
        a: PortRef::new(a, port_name(ap)),
        b: PortRef::new(b, port_name(bp)),
        speed,
        cable_length: cable,
    }
}

fn host(name: String, sw: &str, port: u32, ctx: &GenContext) -> HostSpec {
    HostSpec {
        name,
        attach: Some(PortRef::new(sw, port_name(port))),
        speed: Some(ctx.host_speed),
        cable_length: Some(ctx.host_cable),
        ..HostSpec::default()
    }
}

/// The most ports a switch can have: P4Runtime port ids 1..=510 (BMv2's port numbers; 511 is
/// its drop port).
pub const MAX_SWITCH_PORTS: u32 = 510;

/// How much a generator would create, computed from its parameters alone, so that a fabric too
/// large to handle is refused before any of it is built. Saturating: parameters near `u32::MAX`
/// give `u64::MAX`, not an overflow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub switches: u64,
    pub hosts: u64,
    pub links: u64,
    pub ports: u64,
}

impl Counts {
    pub fn saturating_add(self, o: Counts) -> Counts {
        Counts {
            switches: self.switches.saturating_add(o.switches),
            hosts: self.hosts.saturating_add(o.hosts),
            links: self.links.saturating_add(o.links),
            ports: self.ports.saturating_add(o.ports),
        }
    }
}

/// What `g` would generate (see [`Counts`]), and the parameter that sets its size.
pub fn estimate(g: &Generator) -> (Counts, &'static str) {
    let m = |a: u64, b: u64| a.saturating_mul(b);
    let p = |a: u64, b: u64| a.saturating_add(b);
    match g {
        Generator::LeafSpine {
            spines,
            leaves,
            hosts_per_leaf,
            uplinks,
            ports,
            ..
        } => {
            let (s, l, h, u) = (
                u64::from(*spines),
                u64::from(*leaves),
                u64::from(*hosts_per_leaf),
                u64::from(uplinks.unwrap_or(1)),
            );
            let leaf_ports = ports.map_or(p(h, m(s, u)), u64::from);
            let spine_ports = ports.map_or(m(l, u), u64::from);
            let c = Counts {
                switches: p(s, l),
                hosts: m(l, h),
                links: m(m(l, s), u),
                ports: p(m(l, leaf_ports), m(s, spine_ports)),
            };
            (c, if s > l { "spines" } else { "leaves" })
        }
        Generator::FatTree { k, hosts_per_leaf } => {
            let k = u64::from(*k);
            let half = k / 2;
            let hpl = hosts_per_leaf.map_or(half, u64::from);
            let switches = p(m(half, half), m(m(k, half), 2));
            let c = Counts {
                switches,
                hosts: m(m(k, half), hpl),
                links: m(m(m(k, half), half), 2),
                ports: m(switches, k),
            };
            (c, "k")
        }
        Generator::MultiPlane { planes, radix } => {
            let (q, r) = (u64::from(*planes), u64::from(*radix));
            let half = r / 2;
            let switches = m(q, p(half, r));
            let c = Counts {
                switches,
                hosts: m(m(q, r), half),
                links: m(m(q, r), half),
                ports: m(switches, r),
            };
            (c, if q > r { "planes" } else { "radix" })
        }
        Generator::RailOptimized {
            servers,
            gpus_per_server,
            radix,
        } => {
            let (srv, g, r) = (
                u64::from(*servers),
                u64::from(*gpus_per_server),
                u64::from(radix.unwrap_or(64)),
            );
            let half = (r / 2).max(1);
            let leaves = m(srv.div_ceil(half), g);
            let switches = p(half, leaves);
            let c = Counts {
                switches,
                hosts: m(srv, g),
                links: m(leaves, half),
                ports: m(switches, r),
            };
            (c, "servers")
        }
    }
}

fn even_radix(field: &str, k: u32) -> Result<(), (String, String)> {
    if k < 2 || !k.is_multiple_of(2) {
        return Err((
            field.to_string(),
            format!(
                "{field} must be an even number of at least 2 (got {k}): half the ports face down, half up"
            ),
        ));
    }
    if k > MAX_SWITCH_PORTS {
        return Err((
            field.to_string(),
            format!(
                "{field} {k} needs {k} ports per switch; a switch has at most {MAX_SWITCH_PORTS} (P4Runtime port ids 1..=510)"
            ),
        ));
    }
    Ok(())
}

/// Expands one generator. Errors name the parameter at fault.
pub fn generate(g: &Generator, ctx: &GenContext) -> Result<Generated, (String, String)> {
    match g {
        Generator::LeafSpine {
            spines,
            leaves,
            hosts_per_leaf,
            uplinks,
            ports,
            uplink_speed,
            uplink_cable_length,
        } => leaf_spine(
            *spines,
            *leaves,
            *hosts_per_leaf,
            uplinks.unwrap_or(1),
            *ports,
            uplink_speed.unwrap_or(ctx.speed),
            uplink_cable_length.unwrap_or(ctx.cable),
            ctx,
        ),
        Generator::FatTree { k, hosts_per_leaf } => fat_tree(*k, *hosts_per_leaf, ctx),
        Generator::MultiPlane { planes, radix } => multi_plane(*planes, *radix, ctx),
        Generator::RailOptimized {
            servers,
            gpus_per_server,
            radix,
        } => rail_optimized(*servers, *gpus_per_server, radix.unwrap_or(64), ctx),
    }
}

#[allow(clippy::too_many_arguments)]
fn leaf_spine(
    spines: u32,
    leaves: u32,
    hosts_per_leaf: u32,
    uplinks: u32,
    ports: Option<u32>,
    uplink_speed: Speed,
    uplink_cable: Length,
    ctx: &GenContext,
) -> Result<Generated, (String, String)> {
    for (f, v) in [("spines", spines), ("leaves", leaves), ("uplinks", uplinks)] {
        if v == 0 {
            return Err((f.into(), format!("{f} must be at least 1")));
        }
    }
    let leaf_ports = u64::from(hosts_per_leaf) + u64::from(spines) * u64::from(uplinks);
    let spine_ports = u64::from(leaves) * u64::from(uplinks);
    if let Some(p) = ports {
        if p > MAX_SWITCH_PORTS {
            return Err((
                "ports".into(),
                format!(
                    "{p} ports per switch is more than a switch has: at most {MAX_SWITCH_PORTS} (P4Runtime port ids 1..=510)"
                ),
            ));
        }
        if u64::from(p) < leaf_ports {
            return Err((
                "ports".into(),
                format!(
                    "each leaf needs {leaf_ports} ports ({hosts_per_leaf} hosts + {spines} spines × {uplinks} uplinks) but switches have {p}"
                ),
            ));
        }
        if u64::from(p) < spine_ports {
            return Err((
                "ports".into(),
                format!(
                    "each spine needs {spine_ports} ports ({leaves} leaves × {uplinks} uplinks) but switches have {p}"
                ),
            ));
        }
    }
    let most = u64::from(MAX_SWITCH_PORTS);
    if leaf_ports > most || spine_ports > most {
        let (field, n) = if leaf_ports > most {
            ("spines", leaf_ports)
        } else {
            ("leaves", spine_ports)
        };
        return Err((
            field.into(),
            format!(
                "a switch would need {n} ports; a switch has at most {MAX_SWITCH_PORTS} (P4Runtime port ids 1..=510)"
            ),
        ));
    }
    let mut g = Generated::default();
    let up_speed = (uplink_speed != ctx.speed).then_some(uplink_speed);
    let up_cable = (uplink_cable != ctx.cable).then_some(uplink_cable);
    for s in 1..=spines {
        g.switches.push(switch(
            format!("spine{s}"),
            Role::Spine,
            ports.unwrap_or(spine_ports as u32),
            uplink_speed,
            None,
        ));
    }
    for l in 1..=leaves {
        let name = format!("leaf{l}");
        let mut sw = switch(
            name.clone(),
            Role::Leaf,
            ports.unwrap_or(leaf_ports as u32),
            uplink_speed,
            None,
        );
        for p in sw.ports.iter_mut().take(hosts_per_leaf as usize) {
            p.speed = Some(ctx.host_speed);
        }
        g.switches.push(sw);
        for h in 0..hosts_per_leaf {
            g.hosts
                .push(host(format!("leaf{l}-h{}", h + 1), &name, h, ctx));
        }
        for s in 0..spines {
            for u in 0..uplinks {
                g.links.push(link(
                    &name,
                    hosts_per_leaf + s * uplinks + u,
                    &format!("spine{}", s + 1),
                    (l - 1) * uplinks + u,
                    up_speed,
                    up_cable,
                ));
            }
        }
    }
    Ok(g)
}

fn fat_tree(
    k: u32,
    hosts_per_leaf: Option<u32>,
    ctx: &GenContext,
) -> Result<Generated, (String, String)> {
    even_radix("k", k)?;
    let half = k / 2;
    let hpl = hosts_per_leaf.unwrap_or(half);
    if hpl + half > k {
        return Err((
            "hosts_per_leaf".into(),
            format!(
                "an edge switch of radix {k} has {k} ports: {hpl} hosts + {half} uplinks do not fit"
            ),
        ));
    }
    let mut g = Generated::default();
    let core_name = |a: u32, c: u32| format!("core{}", a * half + c + 1);
    for a in 0..half {
        for c in 0..half {
            g.switches.push(switch(
                core_name(a, c),
                Role::Superspine,
                k,
                ctx.speed,
                None,
            ));
        }
    }
    for p in 0..k {
        for a in 0..half {
            let agg = format!("pod{}-spine{}", p + 1, a + 1);
            g.switches
                .push(switch(agg.clone(), Role::Spine, k, ctx.speed, None));
            for c in 0..half {
                g.links
                    .push(link(&agg, half + c, &core_name(a, c), p, None, None));
            }
        }
        for e in 0..half {
            let edge = format!("pod{}-leaf{}", p + 1, e + 1);
            let mut sw = switch(edge.clone(), Role::Leaf, k, ctx.speed, None);
            for port in sw.ports.iter_mut().take(hpl as usize) {
                port.speed = Some(ctx.host_speed);
            }
            g.switches.push(sw);
            for h in 0..hpl {
                g.hosts
                    .push(host(format!("{edge}-h{}", h + 1), &edge, h, ctx));
            }
            for a in 0..half {
                let agg = format!("pod{}-spine{}", p + 1, a + 1);
                g.links.push(link(&edge, hpl + a, &agg, e, None, None));
            }
        }
    }
    Ok(g)
}

fn multi_plane(planes: u32, radix: u32, ctx: &GenContext) -> Result<Generated, (String, String)> {
    even_radix("radix", radix)?;
    if planes == 0 || planes > 64 {
        return Err((
            "planes".into(),
            format!("planes must be 1..=64 (got {planes})"),
        ));
    }
    let half = radix / 2;
    let servers = radix * half;
    let mut g = Generated::default();
    for q in 0..planes {
        for s in 0..half {
            g.switches.push(switch(
                format!("plane{}-spine{}", q + 1, s + 1),
                Role::Spine,
                radix,
                ctx.speed,
                Some(q),
            ));
        }
        for l in 0..radix {
            let leaf = format!("plane{}-leaf{}", q + 1, l + 1);
            let mut sw = switch(leaf.clone(), Role::Leaf, radix, ctx.speed, Some(q));
            for port in sw.ports.iter_mut().take(half as usize) {
                port.speed = Some(ctx.host_speed);
            }
            g.switches.push(sw);
            for s in 0..half {
                g.links.push(link(
                    &leaf,
                    half + s,
                    &format!("plane{}-spine{}", q + 1, s + 1),
                    l,
                    None,
                    None,
                ));
            }
        }
        for srv in 0..servers {
            let leaf = format!("plane{}-leaf{}", q + 1, srv / half + 1);
            let mut h = host(
                format!("srv{}-nic{}", srv + 1, q + 1),
                &leaf,
                srv % half,
                ctx,
            );
            h.plane = Some(q);
            g.hosts.push(h);
        }
    }
    Ok(g)
}

fn rail_optimized(
    servers: u32,
    gpus: u32,
    radix: u32,
    ctx: &GenContext,
) -> Result<Generated, (String, String)> {
    even_radix("radix", radix)?;
    if servers == 0 {
        return Err(("servers".into(), "servers must be at least 1".into()));
    }
    if gpus == 0 || gpus > 64 {
        return Err((
            "gpus_per_server".into(),
            format!("gpus_per_server must be 1..=64 (got {gpus})"),
        ));
    }
    let half = radix / 2;
    let units = servers.div_ceil(half);
    let leaves = u64::from(units) * u64::from(gpus);
    if leaves > u64::from(radix) {
        return Err((
            "servers".into(),
            format!(
                "{servers} servers × {gpus} rails need {leaves} rail leaves, but a spine of radix {radix} reaches only {radix}; use a larger radix or fewer servers"
            ),
        ));
    }
    let mut g = Generated::default();
    for s in 0..half {
        g.switches.push(switch(
            format!("spine{}", s + 1),
            Role::Spine,
            radix,
            ctx.speed,
            None,
        ));
    }
    let mut leaf_index = 0;
    for u in 0..units {
        for r in 0..gpus {
            let leaf = format!("su{}-rail{}", u + 1, r + 1);
            let mut sw = switch(leaf.clone(), Role::Leaf, radix, ctx.speed, None);
            for port in sw.ports.iter_mut().take(half as usize) {
                port.speed = Some(ctx.host_speed);
            }
            g.switches.push(sw);
            for s in 0..half {
                g.links.push(link(
                    &leaf,
                    half + s,
                    &format!("spine{}", s + 1),
                    leaf_index,
                    None,
                    None,
                ));
            }
            leaf_index += 1;
            for i in 0..half {
                let srv = u * half + i;
                if srv >= servers {
                    break;
                }
                let mut h = host(format!("srv{}-gpu{}", srv + 1, r + 1), &leaf, i, ctx);
                h.rail = Some(r);
                g.hosts.push(h);
            }
        }
    }
    Ok(g)
}
