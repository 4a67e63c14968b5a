//! Generators, then the explicit items on top of what they made: an explicit switch, host or
//! link named like a generated one replaces the fields it writes; each port's, link's and host's
//! speed and cable length keep the source ([`Src`]) that set them.

use std::collections::{HashMap, HashSet};

use super::ctx::{Ctx, Draft};
use super::origin::{FabricDefaults, ItemSrc, PortOrigins, Src};
use crate::generators::{self, Generated};
use crate::model::*;
use crate::names::display_name;

/// The items of the fabric as written and generated, not yet checked against each other.
#[derive(Default)]
pub(super) struct Expanded {
    pub(super) switches: Vec<Draft<SwitchSpec>>,
    pub(super) port_origins: Vec<PortOrigins>,
    pub(super) hosts: Vec<Draft<HostSpec>>,
    pub(super) host_src: Vec<ItemSrc>,
    pub(super) links: Vec<Draft<LinkSpec>>,
    pub(super) link_src: Vec<ItemSrc>,
    sw_pos: HashMap<String, usize>,
    host_pos: HashMap<String, usize>,
}

fn pair(l: &LinkSpec) -> (PortRef, PortRef) {
    let (a, b) = (l.a.clone(), l.b.clone());
    if a <= b { (a, b) } else { (b, a) }
}

/// Generators, then explicit items on top.
pub(super) fn expand(cx: &mut Ctx, intent: &Intent, fabric: &FabricDefaults) -> Expanded {
    let mut x = Expanded::default();
    for (i, g) in intent.generators.iter().enumerate() {
        let origin = format!("generators[{i}]");
        match generators::generate(g, &fabric.values) {
            Ok(out) => x.generated(cx, g, i as u32, out, fabric),
            Err((field, msg)) => cx.err(
                &format!("{origin}.{field}"),
                format!("{origin}.{field}"),
                msg,
            ),
        }
    }
    x.explicit_switches(cx, intent, fabric);
    x.explicit_hosts(cx, intent);
    x.explicit_links(cx, intent);
    x.check_shared_names(cx);
    x
}

impl Expanded {
    /// One generator's items. A second generator of the same kind makes the same names: report
    /// it once, keep the first generator's items, and drop what would only collide with them.
    fn generated(
        &mut self,
        cx: &mut Ctx,
        g: &Generator,
        gi: u32,
        out: Generated,
        fabric: &FabricDefaults,
    ) {
        let origin = format!("generators[{gi}]");
        let mut again: Vec<(String, String)> = Vec::new();
        let mut dropped: HashSet<String> = HashSet::new();
        for spec in out.switches {
            if let Some(&j) = self.sw_pos.get(&spec.name) {
                again.push((spec.name.clone(), self.switches[j].origin.clone()));
                dropped.insert(spec.name);
                continue;
            }
            self.sw_pos.insert(spec.name.clone(), self.switches.len());
            let src = spec
                .ports
                .iter()
                .map(|p| {
                    let speed = p.speed.unwrap_or(fabric.values.speed);
                    (fabric.generated_port_speed(g, gi, speed), fabric.cable)
                })
                .collect();
            self.port_origins.push(PortOrigins {
                src,
                written_at: vec![None; spec.ports.len()],
            });
            self.switches.push(Draft {
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
            if on_dropped || self.host_pos.contains_key(&spec.name) {
                if !on_dropped {
                    let j = self.host_pos[&spec.name];
                    again.push((spec.name.clone(), self.hosts[j].origin.clone()));
                }
                continue;
            }
            self.host_pos.insert(spec.name.clone(), self.hosts.len());
            self.hosts.push(Draft {
                spec,
                origin: origin.clone(),
                generated: true,
            });
            self.host_src
                .push((Some(fabric.host_speed), Some(fabric.host_cable)));
        }
        for spec in out.links {
            if dropped.contains(&spec.a.switch) || dropped.contains(&spec.b.switch) {
                continue;
            }
            self.link_src.push((
                spec.speed.map(|_| Src::GenUplinkSpeed(gi)),
                spec.cable_length.map(|_| Src::GenUplinkCable(gi)),
            ));
            self.links.push(Draft {
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

    fn explicit_switches(&mut self, cx: &mut Ctx, intent: &Intent, fabric: &FabricDefaults) {
        for (i, s) in intent.switches.iter().enumerate() {
            let origin = format!("switches[{i}]");
            match self.sw_pos.get(&s.name) {
                Some(&j) if self.switches[j].generated => {
                    let d = &mut self.switches[j];
                    overlay_switch(&mut d.spec, &mut self.port_origins[j], s, i as u32);
                    d.origin = origin;
                    d.generated = false;
                }
                Some(&j) => cx.err(
                    &format!("{origin}.name"),
                    format!("switch {}", display_name(&s.name)),
                    format!(
                        "duplicate switch name (first at {})",
                        self.switches[j].origin
                    ),
                ),
                None => {
                    self.sw_pos.insert(s.name.clone(), self.switches.len());
                    let src = s
                        .ports
                        .iter()
                        .enumerate()
                        .map(|(j, p)| {
                            (
                                if p.speed.is_some() {
                                    Src::PortSpeed(i as u32, j as u32)
                                } else {
                                    fabric.speed
                                },
                                if p.cable_length.is_some() {
                                    Src::PortCable(i as u32, j as u32)
                                } else {
                                    fabric.cable
                                },
                            )
                        })
                        .collect();
                    self.port_origins.push(PortOrigins {
                        src,
                        written_at: (0..s.ports.len() as u32).map(Some).collect(),
                    });
                    self.switches.push(Draft {
                        spec: s.clone(),
                        origin,
                        generated: false,
                    });
                }
            }
        }
    }

    fn explicit_hosts(&mut self, cx: &mut Ctx, intent: &Intent) {
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
            match self.host_pos.get(&h.name) {
                Some(&j) if self.hosts[j].generated => {
                    overlay_host(&mut self.hosts[j].spec, h);
                    self.hosts[j].origin = origin;
                    self.hosts[j].generated = false;
                    self.host_src[j] = own(self.host_src[j]);
                }
                Some(&j) => cx.err(
                    &format!("{origin}.name"),
                    format!("host {}", display_name(&h.name)),
                    format!("duplicate host name (first at {})", self.hosts[j].origin),
                ),
                None => {
                    self.host_pos.insert(h.name.clone(), self.hosts.len());
                    self.hosts.push(Draft {
                        spec: h.clone(),
                        origin,
                        generated: false,
                    });
                    self.host_src.push(own((None, None)));
                }
            }
        }
    }

    fn explicit_links(&mut self, cx: &mut Ctx, intent: &Intent) {
        // Only explicit links need the lookup; skip building it for purely generated fabrics.
        let mut link_pos: HashMap<(PortRef, PortRef), usize> = if intent.links.is_empty() {
            HashMap::new()
        } else {
            self.links
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
                Some(&j) if self.links[j].generated => {
                    let (d, src) = (&mut self.links[j], &mut self.link_src[j]);
                    if l.speed.is_some() {
                        d.spec.speed = l.speed;
                        src.0 = own.0;
                    }
                    if l.cable_length.is_some() {
                        d.spec.cable_length = l.cable_length;
                        src.1 = own.1;
                    }
                    d.origin = origin;
                    d.generated = false;
                }
                Some(&j) => cx.err(
                    &origin,
                    format!("link {} ↔ {}", l.a, l.b),
                    format!("duplicate link (first at {})", self.links[j].origin),
                ),
                None => {
                    link_pos.insert(pair(l), self.links.len());
                    self.links.push(Draft {
                        spec: l.clone(),
                        origin,
                        generated: false,
                    });
                    self.link_src.push(own);
                }
            }
        }
    }

    fn check_shared_names(&self, cx: &mut Ctx) {
        for (name, &si) in &self.sw_pos {
            if let Some(&h) = self.host_pos.get(name) {
                let o = if self.hosts[h].generated {
                    self.switches[si].origin.clone()
                } else {
                    format!("{}.name", self.hosts[h].origin)
                };
                cx.err(
                    &o,
                    format!("host {}", display_name(name)),
                    "a host and a switch share this name",
                );
            }
        }
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
        p4rt_transport,
        zmq_endpoint,
        consumer,
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

#[cfg(test)]
mod tests {
    use super::super::origin::FabricDefaults;
    use super::super::testing::stage;
    use super::*;
    use crate::units::Speed;

    fn expanded(yaml: &str) -> (Expanded, Vec<String>) {
        stage(yaml, |cx, intent| {
            expand(cx, intent, &FabricDefaults::of(&intent.fabric.defaults))
        })
    }

    const GENERATED: &str = "generators:\n  - {kind: leaf-spine, spines: 1, leaves: 2, hosts_per_leaf: 1, uplink_speed: 400G}\n";

    #[test]
    fn generated_items_keep_the_generator_as_their_origin_and_speed_source() {
        let (x, e) = expanded(GENERATED);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!((x.switches.len(), x.hosts.len(), x.links.len()), (3, 2, 2));
        assert!(
            x.switches
                .iter()
                .all(|s| s.generated && s.origin == "generators[0]")
        );
        assert_eq!(x.link_src[0], (Some(Src::GenUplinkSpeed(0)), None));
        assert_eq!(x.host_src[0], (Some(Src::Builtin), Some(Src::Builtin)));
    }

    #[test]
    fn an_explicit_port_over_a_generated_one_replaces_its_speed_and_the_speed_source() {
        let yaml = format!(
            "{GENERATED}switches:\n  - name: leaf1\n    ports: [{{name: Ethernet0, speed: 200G}}]\n"
        );
        let (x, e) = expanded(&yaml);
        assert!(e.is_empty(), "{e:?}");
        let leaf = x.sw_pos["leaf1"];
        let d = &x.switches[leaf];
        assert_eq!((d.origin.as_str(), d.generated), ("switches[0]", false));
        let p = d.spec.ports.iter().position(|p| p.name == "Ethernet0");
        let p = p.expect("Ethernet0");
        assert_eq!(d.spec.ports[p].speed, Some(Speed::gbps(200)));
        assert_eq!(x.port_origins[leaf].src[p].0, Src::PortSpeed(0, 0));
        assert_eq!(x.port_origins[leaf].written_at[p], Some(0));
    }

    #[test]
    fn an_explicit_link_over_a_generated_one_replaces_its_speed_in_either_direction() {
        let (x, _) = expanded(GENERATED);
        let l = &x.links[0].spec;
        let yaml = format!(
            "{GENERATED}links:\n  - {{a: '{}', b: '{}', speed: 100G}}\n",
            l.b, l.a
        );
        let (x, e) = expanded(&yaml);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(x.links.len(), 2);
        assert_eq!(x.links[0].spec.speed, Some(Speed::gbps(100)));
        assert_eq!(x.link_src[0].0, Some(Src::LinkSpeed(0)));
        assert_eq!(x.links[0].origin, "links[0]");
    }

    #[test]
    fn a_second_generator_of_the_same_names_is_reported_once_and_adds_nothing() {
        let yaml = "generators:\n  - {kind: leaf-spine, spines: 1, leaves: 2, hosts_per_leaf: 1}\n  - {kind: leaf-spine, spines: 1, leaves: 2, hosts_per_leaf: 1}\n";
        let (x, e) = expanded(yaml);
        assert_eq!((x.switches.len(), x.hosts.len(), x.links.len()), (3, 2, 2));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("3: this generator makes `"), "{e:?}");
        assert!(
            e[0].ends_with("which generators[0] already makes (and 2 more names)"),
            "{e:?}"
        );
    }

    #[test]
    fn duplicates_among_explicit_items_name_the_first() {
        let yaml = "switches:\n  - {name: s1, role: leaf}\n  - {name: s1, role: leaf}\nhosts:\n  - {name: s1, attach: 's1:Ethernet0'}\n";
        let (_, e) = expanded(yaml);
        assert_eq!(
            e,
            vec![
                "3: duplicate switch name (first at switches[0])",
                "5: a host and a switch share this name"
            ]
        );
    }
}
