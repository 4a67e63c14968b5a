//! Allocation of everything an operator may leave out (device ids, P4Runtime addresses, router
//! MACs, loopbacks, host addresses and MACs), and the uniqueness of the result.
//!
//! Every explicit value is reserved before anything is allocated, so the allocator never hands
//! out again what the intent already gave to someone: a duplicate is always two explicit values
//! (or an explicit value and one derived from a name), reported where the explicit one is written.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

use super::{Ctx, DEFAULT_DB_SOCKET_DIR, DEFAULT_P4RT_ADDRESS, Draft, endpoints};
use crate::model::{Defaults, MacAddr, SwitchSpec};
use crate::names::display_name;
use crate::topo::{Host, HostIdx, ResolvedPools, Switch};

const ROUTER_MAC_BASE: u64 = 0x0257_4600_0000;
const HOST_MAC_BASE: u64 = 0x0257_4800_0000;

pub(super) fn default_hosts_v4() -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::new(10, 0, 0, 0), 10).unwrap_or_default()
}
pub(super) fn default_loopbacks_v4() -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::new(10, 255, 0, 0), 16).unwrap_or_default()
}

/// Which values the intent wrote (per switch and host, in topology order).
pub(super) struct Explicit {
    device_id: Vec<Option<u64>>,
    p4rt: Vec<bool>,
    db: Vec<bool>,
    router_mac: Vec<bool>,
    loopback: Vec<bool>,
    host_v4: Vec<bool>,
    host_v6: Vec<bool>,
    host_mac: Vec<bool>,
    /// Every explicit IPv4 address (loopbacks and hosts), which no allocation may hand out.
    v4: HashSet<u32>,
    v6: HashSet<u128>,
}

impl Explicit {
    /// Before allocation: a switch's or host's value is explicit exactly when it is set.
    pub(super) fn collect(
        drafts: &[Draft<SwitchSpec>],
        switches: &[Switch],
        hosts: &[Host],
    ) -> Self {
        let mut v4: HashSet<u32> = HashSet::new();
        let mut v6: HashSet<u128> = HashSet::new();
        for s in switches {
            if !s.loopback.is_unspecified() {
                v4.insert(u32::from(s.loopback));
            }
        }
        for h in hosts {
            if !h.ipv4.is_unspecified() {
                v4.insert(u32::from(h.ipv4));
            }
            if let Some(a) = h.ipv6 {
                v6.insert(u128::from(a));
            }
        }
        Explicit {
            device_id: drafts.iter().map(|d| d.spec.device_id).collect(),
            p4rt: switches
                .iter()
                .map(|s| !s.p4rt_address.is_empty())
                .collect(),
            db: switches.iter().map(|s| !s.db.is_empty()).collect(),
            router_mac: switches
                .iter()
                .map(|s| s.router_mac != MacAddr([0; 6]))
                .collect(),
            loopback: switches
                .iter()
                .map(|s| !s.loopback.is_unspecified())
                .collect(),
            host_v4: hosts.iter().map(|h| !h.ipv4.is_unspecified()).collect(),
            host_v6: hosts.iter().map(|h| h.ipv6.is_some()).collect(),
            host_mac: hosts.iter().map(|h| h.mac != MacAddr([0; 6])).collect(),
            v4,
            v6,
        }
    }
}

pub(super) fn allocate_switches(
    cx: &mut Ctx,
    switches: &mut [Switch],
    ex: &Explicit,
    d: &Defaults,
    pools: &ResolvedPools,
) {
    let used_ids: HashSet<u64> = ex.device_id.iter().flatten().copied().collect();
    for (s, id) in switches.iter_mut().zip(&ex.device_id) {
        if let Some(id) = id {
            s.device_id = *id;
        }
    }
    let base_addr = d.p4rt_address.as_deref().unwrap_or(DEFAULT_P4RT_ADDRESS);
    // A malformed base is reported where it is written; allocate from the default meanwhile.
    let (base_host, base_port) = endpoints::check_host_port(base_addr)
        .map(|(h, p)| (h.to_string(), u32::from(p)))
        .unwrap_or_else(|_| ("127.0.0.1".into(), 9559));
    let mut used_p4rt: HashSet<String> = switches
        .iter()
        .filter(|s| !s.p4rt_address.is_empty())
        .map(|s| s.p4rt_address.clone())
        .collect();
    let mut used_macs: HashSet<u64> = switches
        .iter()
        .zip(&ex.router_mac)
        .filter(|(_, e)| **e)
        .map(|(s, _)| s.router_mac.as_u64())
        .collect();
    let sock_dir = d
        .db_socket_dir
        .as_deref()
        .unwrap_or(DEFAULT_DB_SOCKET_DIR)
        .trim_end_matches('/');

    let lo = pools.loopbacks_v4;
    let wanted = ex.loopback.iter().filter(|e| !**e).count() as u64;
    let (lo_first, lo_last) = (u32::from(lo.network()), u32::from(lo.broadcast()));
    let reserved_in_pool = ex
        .v4
        .iter()
        .filter(|&&a| a > lo_first && a < lo_last)
        .count() as u64;
    let room = u64::from(lo_last - lo_first)
        .saturating_sub(1)
        .saturating_sub(reserved_in_pool);
    if wanted > room {
        cx.err_help(
            "fabric.pools.loopbacks_v4",
            "fabric.pools.loopbacks_v4",
            format!("{lo} has room for {room} more loopbacks but {wanted} switches need one"),
            "use a larger pool",
        );
    }
    let mut next_lo = lo_first.saturating_add(1);

    let mut next_id = 1u64;
    let mut port_overflow = false;
    for (i, s) in switches.iter_mut().enumerate() {
        if ex.device_id[i].is_none() {
            while used_ids.contains(&next_id) {
                next_id += 1;
            }
            s.device_id = next_id;
            next_id += 1;
        }
        if s.p4rt_address.is_empty() {
            // Switch N gets BASE+N−1, or the next port no explicit address takes.
            let mut port = base_port + i as u32;
            loop {
                let a = format!("{base_host}:{port}");
                if port > 65535 {
                    port_overflow = true;
                    break;
                }
                if used_p4rt.insert(a.clone()) {
                    s.p4rt_address = a;
                    break;
                }
                port += 1;
            }
        }
        if s.db.is_empty() {
            s.db = format!("unix://{sock_dir}/{}/redis.sock", s.name);
        }
        if !ex.router_mac[i] {
            // Device ids past 32 bits are reported; keep the MAC within 48 bits meanwhile.
            let mut m = ROUTER_MAC_BASE.wrapping_add(s.device_id) & 0xffff_ffff_ffff;
            while !used_macs.insert(m) {
                m = (m + 1) & 0xffff_ffff_ffff;
            }
            s.router_mac = MacAddr::from_u64(m);
        }
        if !ex.loopback[i] {
            while next_lo < lo_last && ex.v4.contains(&next_lo) {
                next_lo += 1;
            }
            if next_lo < lo_last {
                s.loopback = Ipv4Addr::from(next_lo);
                next_lo += 1;
            }
        }
    }
    if port_overflow {
        cx.err_help(
            "fabric.defaults.p4rt_address",
            "fabric.defaults.p4rt_address",
            format!(
                "{} switches counting up from port {base_port} run past port 65535",
                switches.len()
            ),
            "use a lower base port, or set p4rt_address per switch",
        );
    }
}

/// One subnet per leaf (network, gateway, hosts, broadcast), sized for the busiest leaf, so
/// every leaf's hosts aggregate into one prefix and pods into a contiguous range. Explicit
/// addresses are skipped; when they take so much of a subnet that its hosts no longer fit,
/// every subnet grows.
pub(super) fn allocate_hosts(
    cx: &mut Ctx,
    switches: &mut [Switch],
    hosts: &mut [Host],
    ex: &Explicit,
    pools: &ResolvedPools,
) {
    let mut per_switch: Vec<Vec<HostIdx>> = vec![Vec::new(); switches.len()];
    for (i, h) in hosts.iter().enumerate() {
        per_switch[h.switch].push(i);
    }
    let leaves: Vec<usize> = (0..switches.len())
        .filter(|&s| !per_switch[s].is_empty())
        .collect();
    let max_hosts = leaves
        .iter()
        .map(|&s| per_switch[s].len())
        .max()
        .unwrap_or(0);
    if max_hosts == 0 {
        return;
    }
    let mut v6_pool = pools.hosts_v6;
    if let Some(p6) = pools.hosts_v6 {
        let len = p6.prefix_len();
        let fits = len <= 64 && (64 - len >= 63 || leaves.len() as u64 <= 1u64 << (64 - len));
        if !fits {
            cx.err_help(
                "fabric.pools.hosts_v6",
                "fabric.pools.hosts_v6",
                format!("{p6} is too small: {} leaves need a /64 each", leaves.len()),
                "use a shorter prefix, e.g. /48",
            );
            v6_pool = None;
        }
    }
    // In u64: a subnet at the top of the address space ends at 2^32.
    let base = u64::from(u32::from(pools.hosts_v4.network()));
    let pool_len = u32::from(pools.hosts_v4.prefix_len());
    let mut bits = (max_hosts as u64 + 3)
        .next_power_of_two()
        .trailing_zeros()
        .max(2);
    let taken = |a: u64| u32::try_from(a).is_ok_and(|a| ex.v4.contains(&a));
    // (host, address) pairs to assign, found by trying subnet sizes from the smallest.
    let plan: Vec<(usize, u64)> = loop {
        if bits > 32 - pool_len || (leaves.len() as u64) > (1u64 << (32 - bits - pool_len)) {
            let need = 32u32.saturating_sub(bits.min(32));
            cx.err_help(
                "fabric.pools.hosts_v4",
                "fabric.pools.hosts_v4",
                format!(
                    "{} is too small: {} {} a /{need} each",
                    pools.hosts_v4,
                    leaves.len(),
                    if leaves.len() == 1 {
                        "leaf needs"
                    } else {
                        "leaves need"
                    }
                ),
                "use a larger pool",
            );
            return;
        }
        let size = 1u64 << bits;
        let mut plan = Vec::new();
        let mut fits = true;
        'leaf: for (slot, &s) in leaves.iter().enumerate() {
            let net = base + ((slot as u64) << bits);
            let last = net + size - 1; // broadcast
            let mut next = net + 2;
            for &hi in &per_switch[s] {
                if ex.host_v4[hi] {
                    continue;
                }
                while next < last && taken(next) {
                    next += 1;
                }
                if next >= last {
                    fits = false;
                    break 'leaf;
                }
                plan.push((hi, next));
                next += 1;
            }
        }
        if fits {
            break plan;
        }
        bits += 1;
    };
    let size = 1u64 << bits;
    let v4_len = (32 - bits) as u8;
    let v4 = |a: u64| Ipv4Addr::from(u32::try_from(a).unwrap_or(u32::MAX));
    for (hi, a) in plan {
        hosts[hi].ipv4 = v4(a);
    }

    // The network, gateway and broadcast address of every leaf subnet belong to nobody.
    let special = |a: Ipv4Addr| -> Option<(usize, &'static str)> {
        let off = u64::from(u32::from(a)).checked_sub(base)?;
        let slot = usize::try_from(off >> bits).ok()?;
        let s = *leaves.get(slot)?;
        match off & (size - 1) {
            0 => Some((s, "network")),
            1 => Some((s, "gateway")),
            x if x == size - 1 => Some((s, "broadcast")),
            _ => None,
        }
    };
    let special6 = |a: u128| -> Option<(usize, &'static str)> {
        let p6 = v6_pool?;
        let off = a.checked_sub(u128::from(p6.network()))?;
        let slot = usize::try_from(off >> 64).ok()?;
        let s = *leaves.get(slot)?;
        match off & u128::from(u64::MAX) {
            0 => Some((s, "network")),
            1 => Some((s, "gateway")),
            _ => None,
        }
    };
    let subnet_of = |s: usize| {
        let slot = leaves.iter().position(|&x| x == s).unwrap_or(0) as u64;
        Ipv4Net::new(v4(base + (slot << bits)), v4_len).unwrap_or_default()
    };
    for (hi, h) in hosts.iter().enumerate() {
        if ex.host_v4[hi]
            && let Some((s, what)) = special(h.ipv4)
        {
            cx.err_help(
                &format!("{}.ipv4", h.origin),
                format!("host {}", display_name(&h.name)),
                format!(
                    "{} is the {what} address of {}'s host subnet {}",
                    h.ipv4,
                    switches[s].name,
                    subnet_of(s)
                ),
                "hosts take addresses from the third of their subnet on (the second is the gateway); leave `ipv4` out to have one allocated",
            );
        }
        if ex.host_v6[hi]
            && let Some(a) = h.ipv6
            && let Some((s, what)) = special6(u128::from(a))
        {
            cx.err_help(
                &format!("{}.ipv6", h.origin),
                format!("host {}", display_name(&h.name)),
                format!("{a} is the {what} address of {}'s /64", switches[s].name),
                "leave `ipv6` out to have one allocated",
            );
        }
    }
    for (si, s) in switches.iter().enumerate() {
        if ex.loopback[si]
            && let Some((l, what)) = special(s.loopback)
        {
            cx.err_help(
                &format!("{}.loopback", s.origin),
                format!("switch {}", display_name(&s.name)),
                format!(
                    "loopback {} is the {what} address of {}'s host subnet {}",
                    s.loopback,
                    switches[l].name,
                    subnet_of(l)
                ),
                "leave `loopback` out to have one allocated from loopbacks_v4",
            );
        }
    }

    for (slot, &si) in leaves.iter().enumerate() {
        let net_addr = base + ((slot as u64) << bits);
        let subnet = Ipv4Net::new(v4(net_addr), v4_len).unwrap_or_default();
        let v6_subnet = v6_pool.and_then(|p| {
            Ipv6Net::new(
                Ipv6Addr::from(u128::from(p.network()) + ((slot as u128) << 64)),
                64,
            )
            .ok()
        });
        let mut all_inside = true;
        let mut next6 = v6_subnet.map(|n| u128::from(n.network()) + 2);
        for &hi in &per_switch[si] {
            let h = &mut hosts[hi];
            if !subnet.contains(&h.ipv4) {
                all_inside = false;
            }
            h.gateway_v4 = v4(net_addr + 1);
            if let (Some(n6), Some(next)) = (v6_subnet, next6.as_mut()) {
                if h.ipv6.is_none() {
                    while ex.v6.contains(next) {
                        *next += 1;
                    }
                    h.ipv6 = Some(Ipv6Addr::from(*next));
                    *next += 1;
                }
                h.gateway_v6 = Some(Ipv6Addr::from(u128::from(n6.network()) + 1));
            }
        }
        if all_inside {
            switches[si].host_subnet_v4 = Some(subnet);
            switches[si].host_subnet_v6 = v6_subnet;
        }
    }
}

/// Host MACs: counted up from a base by host, skipping explicit ones.
pub(super) fn allocate_host_macs(hosts: &mut [Host], ex: &Explicit) {
    let mut used_macs: HashSet<u64> = hosts
        .iter()
        .zip(&ex.host_mac)
        .filter(|(_, e)| **e)
        .map(|(h, _)| h.mac.as_u64())
        .collect();
    for (hi, h) in hosts.iter_mut().enumerate() {
        if !ex.host_mac[hi] {
            let mut m = HOST_MAC_BASE + hi as u64 + 1;
            while !used_macs.insert(m) {
                m += 1;
            }
            h.mac = MacAddr::from_u64(m);
        }
    }
}

/// Who holds a value: a switch or a host, by index.
#[derive(Clone, Copy)]
enum Who {
    Switch(usize),
    Host(usize),
}

/// Reports values held twice. `items` are (value, holder, explicit?); `field` is where the
/// holder writes it. Names and paths are made only for the duplicates.
fn dup<K: std::hash::Hash + Eq + std::fmt::Display>(
    cx: &mut Ctx,
    switches: &[Switch],
    hosts: &[Host],
    what: &str,
    field: &dyn Fn(Who) -> &'static str,
    items: impl Iterator<Item = (K, Who, bool)>,
) {
    let owner = |w: Who| match w {
        Who::Switch(i) => format!("switch {}", display_name(&switches[i].name)),
        Who::Host(i) => format!("host {}", display_name(&hosts[i].name)),
    };
    let path = |w: Who| match w {
        Who::Switch(i) => format!("{}.{}", switches[i].origin, field(w)),
        Who::Host(i) => format!("{}.{}", hosts[i].origin, field(w)),
    };
    let mut seen: HashMap<K, (Who, bool)> = HashMap::new();
    let mut reported: HashSet<String> = HashSet::new();
    for (k, who, explicit) in items {
        match seen.get(&k) {
            Some(&(first, first_explicit)) => {
                // Point at an explicit value: a derived one only collides because of it.
                let (at, other) = if explicit || !first_explicit {
                    (who, first)
                } else {
                    (first, who)
                };
                let p = path(at);
                if reported.insert(p.clone()) {
                    let msg = format!("duplicate {what} {k} (also used by {})", owner(other));
                    cx.err_help(
                        &p,
                        owner(at),
                        msg,
                        format!(
                            "give each its own {what}, or leave `{}` out to have one allocated",
                            field(at)
                        ),
                    );
                }
            }
            None => {
                seen.insert(k, (who, explicit));
            }
        }
    }
}

pub(super) fn check_unique(cx: &mut Ctx, switches: &[Switch], hosts: &[Host], ex: &Explicit) {
    let sws = || switches.iter().enumerate();
    dup(
        cx,
        switches,
        hosts,
        "device id",
        &|_| "device_id",
        sws().map(|(i, s)| (s.device_id, Who::Switch(i), ex.device_id[i].is_some())),
    );
    dup(
        cx,
        switches,
        hosts,
        "P4Runtime address",
        &|_| "p4rt_address",
        sws()
            .filter(|(_, s)| !s.p4rt_address.is_empty())
            .map(|(i, s)| (s.p4rt_address.as_str(), Who::Switch(i), ex.p4rt[i])),
    );
    dup(
        cx,
        switches,
        hosts,
        "SONiC DB endpoint",
        &|_| "db",
        // Compared by what they name: `?db_base=0` is the endpoint without it.
        sws().map(|(i, s)| {
            let id = match super::endpoints::db_identity(&s.db) {
                Ok((server, 0)) => server,
                Ok((server, base)) => format!("{server}?db_base={base}"),
                Err(_) => s.db.clone(),
            };
            (id, Who::Switch(i), ex.db[i])
        }),
    );
    dup(
        cx,
        switches,
        hosts,
        "router MAC",
        &|_| "router_mac",
        sws().map(|(i, s)| (s.router_mac, Who::Switch(i), ex.router_mac[i])),
    );
    let addrs = sws()
        .filter(|(_, s)| !s.loopback.is_unspecified())
        .map(|(i, s)| {
            (
                std::net::IpAddr::V4(s.loopback),
                Who::Switch(i),
                ex.loopback[i],
            )
        })
        .chain(
            hosts
                .iter()
                .enumerate()
                .filter(|(_, h)| !h.ipv4.is_unspecified())
                .map(|(i, h)| (std::net::IpAddr::V4(h.ipv4), Who::Host(i), ex.host_v4[i])),
        );
    dup(
        cx,
        switches,
        hosts,
        "address",
        &|w| match w {
            Who::Switch(_) => "loopback",
            Who::Host(_) => "ipv4",
        },
        addrs,
    );
    dup(
        cx,
        switches,
        hosts,
        "address",
        &|_| "ipv6",
        hosts
            .iter()
            .enumerate()
            .filter_map(|(i, h)| Some((h.ipv6?, Who::Host(i), ex.host_v6[i]))),
    );
    dup(
        cx,
        switches,
        hosts,
        "MAC",
        &|_| "mac",
        hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.mac, Who::Host(i), ex.host_mac[i])),
    );
}
