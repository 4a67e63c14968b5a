//! `weft show`: what an operator wants to know about a fabric at a glance.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::model::Role;
use crate::topo::{Peer, Topology};

#[derive(Debug, Serialize)]
pub struct Summary {
    pub name: String,
    pub switches: usize,
    pub hosts: usize,
    pub links: usize,
    pub roles: Vec<RoleSummary>,
    /// Switch-to-switch links by speed, e.g. {"400G": 128}.
    pub link_speeds: BTreeMap<String, usize>,
    /// Host attachments by speed.
    pub host_speeds: BTreeMap<String, usize>,
    /// Half the capacity across the narrowest tier boundary, in bits/s (see README).
    pub bisection_bps: u64,
    pub planes: usize,
    pub per_switch: Vec<SwitchUse>,
}

#[derive(Debug, Serialize)]
pub struct RoleSummary {
    pub role: Role,
    pub tier: u8,
    pub switches: usize,
    pub hosts_attached: usize,
    /// Capacity toward hosts and lower tiers, bits/s.
    pub down_bps: u64,
    /// Capacity toward higher tiers, bits/s.
    pub up_bps: u64,
    /// down / up; `None` at the top tier.
    pub oversubscription: Option<f64>,
    pub ports_used: usize,
    pub ports_total: usize,
}

#[derive(Debug, Serialize)]
pub struct SwitchUse {
    pub name: String,
    pub role: Role,
    pub device_id: u64,
    pub ports_used: usize,
    pub ports_total: usize,
    pub hosts: usize,
    pub uplinks: usize,
    pub downlinks: usize,
}

pub fn summarize(t: &Topology) -> Summary {
    let mut roles: BTreeMap<Role, RoleSummary> = BTreeMap::new();
    let mut per_switch = Vec::with_capacity(t.switches.len());
    for (si, s) in t.switches.iter().enumerate() {
        let r = roles.entry(s.role).or_insert_with(|| RoleSummary {
            role: s.role,
            tier: s.role.tier(),
            switches: 0,
            hosts_attached: 0,
            down_bps: 0,
            up_bps: 0,
            oversubscription: None,
            ports_used: 0,
            ports_total: 0,
        });
        r.switches += 1;
        r.ports_total += s.ports.len();
        let mut u = SwitchUse {
            name: s.name.clone(),
            role: s.role,
            device_id: s.device_id,
            ports_used: 0,
            ports_total: s.ports.len(),
            hosts: 0,
            uplinks: 0,
            downlinks: 0,
        };
        for p in &s.ports {
            match p.peer {
                Peer::None => {}
                Peer::Host { host } => {
                    u.ports_used += 1;
                    u.hosts += 1;
                    r.hosts_attached += 1;
                    r.down_bps += t.hosts[host].speed.bits_per_sec();
                }
                Peer::Switch { link } => {
                    u.ports_used += 1;
                    let l = &t.links[link];
                    let peer_tier = t.switches[l.other(si).switch].tier();
                    if peer_tier > s.tier() {
                        u.uplinks += 1;
                        r.up_bps += l.speed.bits_per_sec();
                    } else {
                        u.downlinks += 1;
                        r.down_bps += l.speed.bits_per_sec();
                    }
                }
            }
        }
        r.ports_used += u.ports_used;
        per_switch.push(u);
    }
    for r in roles.values_mut() {
        r.oversubscription = (r.up_bps > 0).then(|| r.down_bps as f64 / r.up_bps as f64);
    }
    let mut link_speeds = BTreeMap::new();
    for l in &t.links {
        *link_speeds.entry(l.speed.to_string()).or_insert(0) += 1;
    }
    let mut host_speeds = BTreeMap::new();
    for h in &t.hosts {
        *host_speeds.entry(h.speed.to_string()).or_insert(0) += 1;
    }
    // Every tier boundary carries all traffic that crosses the fabric's middle, so the bisection
    // is half of the narrowest boundary (hosts→leaves counts as one).
    let host_bps: u64 = t.hosts.iter().map(|h| h.speed.bits_per_sec()).sum();
    let narrowest = roles
        .values()
        .filter(|r| r.up_bps > 0)
        .map(|r| r.up_bps)
        .chain(std::iter::once(host_bps))
        .min()
        .unwrap_or(0);
    let mut planes: Vec<Option<u32>> = t.switches.iter().map(|s| s.plane).collect();
    planes.sort_unstable();
    planes.dedup();
    Summary {
        name: t.name.clone(),
        switches: t.switches.len(),
        hosts: t.hosts.len(),
        links: t.links.len(),
        roles: roles.into_values().collect(),
        link_speeds,
        host_speeds,
        bisection_bps: narrowest / 2,
        planes: planes.len(),
        per_switch,
    }
}

fn gbps(bps: u64) -> String {
    let g = bps as f64 / 1e9;
    if g >= 1000.0 {
        format!("{:.1} Tb/s", g / 1000.0)
    } else {
        format!("{g:.0} Gb/s")
    }
}

/// The operator-facing text. `all_switches` lists every switch's port use (long on big fabrics).
pub fn render(s: &Summary, all_switches: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "fabric {}: {} switches, {} hosts, {} links{}",
        s.name,
        s.switches,
        s.hosts,
        s.links,
        if s.planes > 1 {
            format!(", {} planes", s.planes)
        } else {
            String::new()
        }
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<11} {:>4} {:>8} {:>7} {:>12} {:>12} {:>8} {:>12}",
        "role", "tier", "switches", "hosts", "down", "up", "oversub", "ports used"
    );
    for r in &s.roles {
        let _ = writeln!(
            o,
            "{:<11} {:>4} {:>8} {:>7} {:>12} {:>12} {:>8} {:>12}",
            r.role.as_str(),
            r.tier,
            r.switches,
            r.hosts_attached,
            gbps(r.down_bps),
            if r.up_bps == 0 {
                "-".into()
            } else {
                gbps(r.up_bps)
            },
            r.oversubscription
                .map_or("-".into(), |x| format!("{x:.2}:1")),
            format!("{}/{}", r.ports_used, r.ports_total),
        );
    }
    let _ = writeln!(o);
    let speeds = |m: &BTreeMap<String, usize>| {
        m.iter()
            .map(|(k, v)| format!("{v} × {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(o, "fabric links: {}", speeds(&s.link_speeds));
    let _ = writeln!(o, "host links:   {}", speeds(&s.host_speeds));
    let _ = writeln!(o, "bisection bandwidth: {}", gbps(s.bisection_bps));
    if all_switches {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:<24} {:<10} {:>6} {:>10} {:>6} {:>8} {:>9}",
            "switch", "role", "dev id", "ports", "hosts", "uplinks", "downlinks"
        );
        for u in &s.per_switch {
            let _ = writeln!(
                o,
                "{:<24} {:<10} {:>6} {:>10} {:>6} {:>8} {:>9}",
                u.name,
                u.role.as_str(),
                u.device_id,
                format!("{}/{}", u.ports_used, u.ports_total),
                u.hosts,
                u.uplinks,
                u.downlinks
            );
        }
    }
    o
}
