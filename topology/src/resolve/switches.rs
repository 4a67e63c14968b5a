//! Switches and their ports: role, names, P4Runtime port ids, each port's speed and cable
//! length (its own, else the fabric's).

use std::collections::HashMap;
use std::net::Ipv4Addr;

use super::ctx::{Ctx, Draft, check_name_at};
use super::origin::{FabricDefaults, PortOrigins};
use crate::generators::MAX_SWITCH_PORTS;
use crate::model::*;
use crate::names::display_name;
use crate::topo::*;

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

pub(super) fn build_switches(
    cx: &mut Ctx,
    drafts: &[Draft<SwitchSpec>],
    origins: &[PortOrigins],
    fabric: &FabricDefaults,
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
        let ports = build_ports(cx, d, po, fabric);
        by_name.insert(s.name.clone(), si);
        out.push(Switch {
            name: s.name.clone(),
            role,
            device_id: s.device_id.unwrap_or(0),
            p4rt_address: s.p4rt_address.clone().unwrap_or_default(),
            db: s.db.clone().unwrap_or_default(),
            transport: Transport::Redis,
            consumer: Consumer::Weft,
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

/// One switch's ports: the P4Runtime id (written, else from the lane, else the position), the
/// speed and cable length (written, else the fabric's).
fn build_ports(
    cx: &mut Ctx,
    d: &Draft<SwitchSpec>,
    po: &PortOrigins,
    fabric: &FabricDefaults,
) -> Vec<Port> {
    let s = &d.spec;
    // Past the id space every further port is wrong for the same reason: say it once.
    let too_many = s.ports.len() > MAX_SWITCH_PORTS as usize;
    if too_many {
        cx.err_help(
            &format!("{}.ports", d.origin),
            format!("switch {}", display_name(&s.name)),
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
            speed: p.speed.unwrap_or(fabric.values.speed),
            cable_length: p.cable_length.unwrap_or(fabric.values.cable),
            admin_up: p.admin.unwrap_or_default() == AdminState::Up,
            peer: Peer::None,
        });
    }
    ports
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors, valid};
    use super::*;
    use crate::units::Speed;

    #[test]
    fn a_port_lane_is_read_only_from_sonic_port_names() {
        assert_eq!(lane_of("Ethernet0"), Some(0));
        assert_eq!(lane_of("Ethernet124"), Some(124));
        for bad in ["Ethernet", "Ethernet04", "Ethernet+4", "eth0", "Ethernet4a"] {
            assert_eq!(lane_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_port_id_comes_from_the_lane_unless_written() {
        let t = valid(&SMALL.replace(
            "ports: [{name: Ethernet0}, {name: Ethernet4}]\n  - name: leaf2",
            "ports: [{name: Ethernet0, id: 7}, {name: Ethernet4}]\n  - name: leaf2",
        ));
        let ids = |s: usize| t.switches[s].ports.iter().map(|p| p.id).collect::<Vec<_>>();
        assert_eq!(ids(0), vec![1, 2]);
        assert_eq!(ids(1), vec![7, 2]);
    }

    #[test]
    fn a_port_takes_its_own_speed_else_the_fabric_default() {
        let yaml = format!(
            "fabric:\n  defaults: {{speed: 400G}}\n{}",
            SMALL.replacen("{name: Ethernet0}", "{name: Ethernet0, speed: 200G}", 1)
        );
        let t = valid(&yaml.replace("spine1:Ethernet0}", "spine1:Ethernet0, speed: 200G}"));
        let speeds: Vec<Speed> = t.switches[0].ports.iter().map(|p| p.speed).collect();
        assert_eq!(speeds, vec![Speed::gbps(200), Speed::gbps(400)]);
    }

    #[test]
    fn role_and_tier_must_agree() {
        let e = errors(&SMALL.replacen("role: spine", "role: spine\n    tier: 1", 1));
        assert_eq!(e, vec!["4: tier 1 contradicts role spine (tier 2)"]);
        let e = errors(&SMALL.replacen("role: spine", "tier: 4", 1));
        assert_eq!(
            e,
            vec!["3: tier 4 is not 1 (leaf), 2 (spine) or 3 (superspine)"]
        );
    }

    #[test]
    fn port_names_and_ids_are_unique_per_switch() {
        let e = errors(&SMALL.replacen(
            "ports: [{name: Ethernet0}, {name: Ethernet4}]",
            "ports: [{name: Ethernet0}, {name: Ethernet4}, {name: Ethernet4}, {name: Ethernet8, id: 1}, {name: eth9}]",
            1,
        ));
        assert_eq!(
            e,
            vec![
                "4: P4Runtime port id 2 is used by another port of this switch (Ethernet4)",
                "4: duplicate port name (also port 2 of this switch)",
                "4: P4Runtime port id 1 is used by another port of this switch (Ethernet0)",
                "4: port names are SONiC names: eth9 is not `Ethernet` and a number",
            ]
        );
    }
}
