//! Switch-to-switch links: their ends, and the speed and cable length each runs at (its own,
//! else its ports'; a port faster than its peer runs at the peer's speed only when the link says
//! so).

use std::collections::HashMap;

use super::ctx::{Ctx, Draft};
use super::ends::{end_name, resolve_end};
use super::origin::{ItemSrc, PortOrigins, Src};
use crate::model::LinkSpec;
use crate::topo::*;
use crate::units::{Length, Speed};

pub(super) fn build_links(
    cx: &mut Ctx,
    switches: &mut [Switch],
    by_name: &HashMap<String, SwitchIdx>,
    drafts: &[Draft<LinkSpec>],
    srcs: &[ItemSrc],
    port_src: &[PortOrigins],
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
        let ends = [
            (
                &switches[ea.switch].ports[ea.port],
                port_src[ea.switch].src[ea.port],
            ),
            (
                &switches[eb.switch].ports[eb.port],
                port_src[eb.switch].src[eb.port],
            ),
        ];
        let ((link_speed, speed_src), (link_cable, cable_src)) = run_at(cx, d, src, ends);
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

/// The speed and the cable length a link runs at, and the line that set each: the link's own,
/// else its ports' (the slower port's speed, after reporting the mismatch; the longer cable).
fn run_at(
    cx: &mut Ctx,
    d: &Draft<LinkSpec>,
    src: &ItemSrc,
    [(pa, sa), (pb, sb)]: [(&Port, (Src, Src)); 2],
) -> ((Speed, Src), (Length, Src)) {
    let l = &d.spec;
    let item = || format!("link {} ↔ {}", l.a, l.b);
    let speed = match l.speed {
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
    let cable = match l.cable_length {
        Some(c) => (c, src.1.unwrap_or(Src::Builtin)),
        None if pa.cable_length >= pb.cable_length => (pa.cable_length, sa.1),
        None => (pb.cable_length, sb.1),
    };
    (speed, cable)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors, valid};
    use crate::units::{Length, Speed};

    #[test]
    fn a_link_runs_at_its_ports_speed_and_the_longer_cable() {
        let yaml = SMALL
            .replacen(
                "{name: Ethernet4}]",
                "{name: Ethernet4, cable_length: 30m}]",
                2,
            )
            .replace("spine1:Ethernet0}", "spine1:Ethernet0, speed: 100G}");
        let t = valid(&yaml);
        let l = &t.links[0];
        assert_eq!(
            (l.speed, l.cable_length),
            (Speed::gbps(100), Length::metres(30))
        );
    }

    #[test]
    fn a_link_slower_than_its_ports_runs_at_its_own_speed() {
        let t = valid(&SMALL.replace("spine1:Ethernet0}", "spine1:Ethernet0, speed: 25G}"));
        assert_eq!(t.links[0].speed, Speed::gbps(25));
        assert_eq!(t.links[1].speed, Speed::gbps(100));
    }

    #[test]
    fn a_link_faster_than_its_ports_or_between_ports_of_two_speeds_is_refused() {
        let e = errors(&SMALL.replace("spine1:Ethernet0}", "spine1:Ethernet0, speed: 400G}"));
        assert_eq!(
            e,
            vec!["12: link speed 400G is faster than its ports (100G and 100G)"]
        );
        let e = errors(&SMALL.replacen(
            "ports: [{name: Ethernet0}, {name: Ethernet4}]\n  - name: leaf2",
            "ports: [{name: Ethernet0}, {name: Ethernet4, speed: 400G}]\n  - name: leaf2",
            1,
        ));
        assert_eq!(
            e,
            vec!["12: speed mismatch: leaf1:Ethernet4 is 400G but spine1:Ethernet0 is 100G"]
        );
    }

    #[test]
    fn a_port_joins_one_link_and_a_link_two_switches() {
        let e = errors(&SMALL.replace(
            "{a: leaf2:Ethernet4, b: spine1:Ethernet4}",
            "{a: leaf2:Ethernet4, b: spine1:Ethernet0}",
        ));
        assert_eq!(
            e[0],
            "13: port spine1:Ethernet0 is already used by the link leaf1:Ethernet4 ↔ spine1:Ethernet0"
        );
        let e = errors(&SMALL.replace("b: spine1:Ethernet0}", "b: leaf1:Ethernet0}"));
        assert_eq!(e[0], "12: a link must join two different switches");
    }
}
