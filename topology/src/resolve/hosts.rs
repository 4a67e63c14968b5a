//! Hosts attached to switch ports: a host's NIC runs at its port's speed and cable length unless
//! it says otherwise (and a different speed is a mismatch).

use std::collections::HashMap;
use std::net::Ipv4Addr;

use super::ctx::{Ctx, Draft, check_name_at};
use super::ends::resolve_end;
use super::origin::{ItemSrc, PortOrigins, Src};
use crate::model::{HostSpec, MacAddr};
use crate::names::display_name;
use crate::topo::*;

#[allow(clippy::type_complexity)]
pub(super) fn attach_hosts(
    cx: &mut Ctx,
    switches: &mut [Switch],
    by_name: &HashMap<String, SwitchIdx>,
    drafts: &[Draft<HostSpec>],
    srcs: &[ItemSrc],
    port_src: &[PortOrigins],
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
        let ps = port_src[e.switch].src[e.port];
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

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors, valid};
    use crate::units::{Length, Speed};

    #[test]
    fn a_host_runs_at_its_port_speed_and_cable_unless_it_says_otherwise() {
        let t = valid(&SMALL.replace(
            "{name: h2, attach: leaf2:Ethernet0}",
            "{name: h2, attach: leaf2:Ethernet0, cable_length: 1m}",
        ));
        let h = |i: usize| (t.hosts[i].speed, t.hosts[i].cable_length);
        assert_eq!(h(0), (Speed::gbps(100), Length::metres(5)));
        assert_eq!(h(1), (Speed::gbps(100), Length::metres(1)));
        assert_eq!((t.hosts[1].switch, t.hosts[1].port), (2, 0));
    }

    #[test]
    fn a_nic_of_another_speed_than_its_port_is_a_mismatch() {
        let e = errors(&SMALL.replace(
            "{name: h2, attach: leaf2:Ethernet0}",
            "{name: h2, attach: leaf2:Ethernet0, speed: 25G}",
        ));
        assert_eq!(
            e,
            vec!["16: speed mismatch: the NIC is 25G but leaf2:Ethernet0 is 100G"]
        );
    }

    #[test]
    fn a_port_takes_one_host_and_no_host_on_a_link_port() {
        let e = errors(&SMALL.replace("attach: leaf2:Ethernet0", "attach: leaf1:Ethernet0"));
        assert_eq!(e[0], "16: port leaf1:Ethernet0 is already used by host h1");
        let e = errors(&SMALL.replace("attach: leaf2:Ethernet0", "attach: leaf2:Ethernet4"));
        assert_eq!(
            e[0],
            "16: port leaf2:Ethernet4 is already used by a link to another switch"
        );
        let e = errors(&SMALL.replace("{name: h2, attach: leaf2:Ethernet0}", "{name: h2}"));
        assert_eq!(e[0], "16: missing field `attach`");
    }
}
