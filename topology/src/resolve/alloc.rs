//! Allocation of everything an operator may leave out (device ids, P4Runtime addresses, router
//! MACs, loopbacks, host addresses and MACs), and the uniqueness of the result.
//!
//! Every explicit value is reserved before anything is allocated, so the allocator never hands
//! out again what the intent already gave to someone: a duplicate is always two explicit values
//! (or an explicit value and one derived from a name), reported where the explicit one is written.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

use super::ctx::{Ctx, Draft};
use super::defaults::{DEFAULT_DB_SOCKET_DIR, DEFAULT_P4RT_ADDRESS};
use super::endpoints;
use crate::model::{Defaults, Intent, MacAddr, SwitchSpec};
use crate::names::display_name;
use crate::topo::{Host, HostIdx, ResolvedPools, Switch};

const ROUTER_MAC_BASE: u64 = 0x0257_4600_0000;
const HOST_MAC_BASE: u64 = 0x0257_4800_0000;

/// Everything an operator may leave out, from the pools the intent names (or the defaults), and
/// the uniqueness of the result.
pub(super) fn allocate(
    cx: &mut Ctx,
    intent: &Intent,
    drafts: &[Draft<SwitchSpec>],
    switches: &mut [Switch],
    hosts: &mut [Host],
) -> ResolvedPools {
    let p = &intent.fabric.pools;
    let pools = ResolvedPools {
        hosts_v4: p.hosts_v4.unwrap_or_else(default_hosts_v4),
        hosts_v6: p.hosts_v6,
        loopbacks_v4: p.loopbacks_v4.unwrap_or_else(default_loopbacks_v4),
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
    let explicit = Explicit::collect(drafts, switches, hosts);
    let sock_dir = socket_dir(super::fabric_name(intent), &intent.fabric.defaults);
    allocate_switches(
        cx,
        switches,
        &explicit,
        &intent.fabric.defaults,
        &pools,
        &sock_dir,
    );
    hosts_outside_loopbacks(cx, hosts, &explicit, pools.loopbacks_v4);
    allocate_hosts(cx, switches, hosts, &explicit, &pools);
    allocate_host_macs(hosts, &explicit);
    check_unique(cx, switches, hosts, &explicit);
    pools
}

fn default_hosts_v4() -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::new(10, 0, 0, 0), 10).unwrap_or_default()
}
fn default_loopbacks_v4() -> Ipv4Net {
    Ipv4Net::new(Ipv4Addr::new(10, 255, 0, 0), 16).unwrap_or_default()
}

/// Which values the intent wrote (per switch and host, in topology order).
struct Explicit {
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
    fn collect(drafts: &[Draft<SwitchSpec>], switches: &[Switch], hosts: &[Host]) -> Self {
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

/// Where the switches' DB sockets go unless a switch names its `db`: the intent's
/// `db_socket_dir`, else `/run/weft/<fabric>` (a fabric's own directory: two fabrics on one
/// machine never share sockets unless told to).
pub(super) fn socket_dir(fabric: &str, d: &Defaults) -> String {
    match d.db_socket_dir.as_deref() {
        Some(dir) => dir.trim_end_matches('/').to_string(),
        None => format!("{DEFAULT_DB_SOCKET_DIR}/{}", fabric_dir(fabric)),
    }
}

/// The longest fabric directory that keeps `/run/weft/<fabric>/<switch>/redis.sock` within a
/// Unix socket's 107 bytes for any valid switch name (63 bytes).
const FABRIC_DIR_MAX: usize = 107
    - DEFAULT_DB_SOCKET_DIR.len()
    - "/".len()
    - "/".len()
    - crate::names::MAX_NAME_LEN
    - "/redis.sock".len();

/// The fabric's own directory name: the name itself, or, when it is too long for every socket
/// path under it to fit, its first characters and a digest of the whole name (still one
/// directory per fabric). A default Weft chose never makes a valid intent invalid.
fn fabric_dir(fabric: &str) -> String {
    if fabric.len() <= FABRIC_DIR_MAX {
        return fabric.to_string();
    }
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let digest = fabric.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let head: String = fabric.chars().take(FABRIC_DIR_MAX - 7).collect();
    format!("{head}-{:06x}", digest & 0xff_ffff)
}

fn allocate_switches(
    cx: &mut Ctx,
    switches: &mut [Switch],
    ex: &Explicit,
    d: &Defaults,
    pools: &ResolvedPools,
    sock_dir: &str,
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

/// The host subnets: one per switch with hosts (a leaf, in topology order), each `2^bits`
/// addresses from `base`, and a /64 per leaf from the IPv6 pool when there is one.
struct Layout {
    leaves: Vec<usize>,
    base: u64,
    bits: u32,
    v6_pool: Option<Ipv6Net>,
}

impl Layout {
    fn size(&self) -> u64 {
        1u64 << self.bits
    }

    fn v4(a: u64) -> Ipv4Addr {
        Ipv4Addr::from(u32::try_from(a).unwrap_or(u32::MAX))
    }

    fn subnet(&self, slot: usize) -> Ipv4Net {
        let net = self.base + ((slot as u64) << self.bits);
        Ipv4Net::new(Self::v4(net), (32 - self.bits) as u8).unwrap_or_default()
    }

    fn subnet_of(&self, s: usize) -> Ipv4Net {
        self.subnet(self.leaves.iter().position(|&x| x == s).unwrap_or(0))
    }

    /// The leaf whose network, gateway or broadcast address `a` is.
    fn special(&self, a: Ipv4Addr) -> Option<(usize, &'static str)> {
        let off = u64::from(u32::from(a)).checked_sub(self.base)?;
        let slot = usize::try_from(off >> self.bits).ok()?;
        let s = *self.leaves.get(slot)?;
        match off & (self.size() - 1) {
            0 => Some((s, "network")),
            1 => Some((s, "gateway")),
            x if x == self.size() - 1 => Some((s, "broadcast")),
            _ => None,
        }
    }

    /// The leaf whose IPv6 network or gateway address `a` is.
    fn special6(&self, a: u128) -> Option<(usize, &'static str)> {
        let p6 = self.v6_pool?;
        let off = a.checked_sub(u128::from(p6.network()))?;
        let slot = usize::try_from(off >> 64).ok()?;
        let s = *self.leaves.get(slot)?;
        match off & u128::from(u64::MAX) {
            0 => Some((s, "network")),
            1 => Some((s, "gateway")),
            _ => None,
        }
    }
}

/// One subnet per leaf (network, gateway, hosts, broadcast), sized for the busiest leaf, so
/// every leaf's hosts aggregate into one prefix and pods into a contiguous range. Explicit
/// addresses are skipped; when they take so much of a subnet that its hosts no longer fit,
/// every subnet grows.
fn allocate_hosts(
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
    let v6_pool = v6_pool(cx, pools, leaves.len());
    let mut layout = Layout {
        leaves,
        // In u64: a subnet at the top of the address space ends at 2^32.
        base: u64::from(u32::from(pools.hosts_v4.network())),
        bits: (max_hosts as u64 + 3)
            .next_power_of_two()
            .trailing_zeros()
            .max(2),
        v6_pool,
    };
    let Some(plan) = plan_v4(cx, &mut layout, &per_switch, ex, pools) else {
        return;
    };
    for (hi, a) in plan {
        hosts[hi].ipv4 = Layout::v4(a);
    }
    check_special(cx, &layout, switches, hosts, ex);
    assign_subnets(&layout, switches, hosts, &per_switch, ex);
}

/// The IPv6 host pool if it has a /64 for every leaf (else reported, and no IPv6 addresses).
fn v6_pool(cx: &mut Ctx, pools: &ResolvedPools, leaves: usize) -> Option<Ipv6Net> {
    let p6 = pools.hosts_v6?;
    let len = p6.prefix_len();
    let fits = len <= 64 && (64 - len >= 63 || leaves as u64 <= 1u64 << (64 - len));
    if !fits {
        cx.err_help(
            "fabric.pools.hosts_v6",
            "fabric.pools.hosts_v6",
            format!("{p6} is too small: {leaves} leaves need a /64 each"),
            "use a shorter prefix, e.g. /48",
        );
        return None;
    }
    Some(p6)
}

/// The (host, address) pairs to assign, found by trying subnet sizes from the smallest
/// (`layout.bits` ends at the size that fits); `None` when the pool is too small (reported).
fn plan_v4(
    cx: &mut Ctx,
    layout: &mut Layout,
    per_switch: &[Vec<HostIdx>],
    ex: &Explicit,
    pools: &ResolvedPools,
) -> Option<Vec<(usize, u64)>> {
    let pool_len = u32::from(pools.hosts_v4.prefix_len());
    let leaves = &layout.leaves;
    let taken = |a: u64| u32::try_from(a).is_ok_and(|a| ex.v4.contains(&a));
    loop {
        let bits = layout.bits;
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
            return None;
        }
        let size = 1u64 << bits;
        let mut plan = Vec::new();
        let mut fits = true;
        'leaf: for (slot, &s) in leaves.iter().enumerate() {
            let net = layout.base + ((slot as u64) << bits);
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
            return Some(plan);
        }
        layout.bits += 1;
    }
}

/// The loopback pool is the switches': a host given an address in it holds what the pool hands
/// a switch (the allocator would only move the switches around it).
fn hosts_outside_loopbacks(cx: &mut Ctx, hosts: &[Host], ex: &Explicit, pool: Ipv4Net) {
    for (hi, h) in hosts.iter().enumerate() {
        if ex.host_v4[hi] && pool.contains(&h.ipv4) {
            cx.err_help(
                &format!("{}.ipv4", h.origin),
                format!("host {}", display_name(&h.name)),
                format!(
                    "{} is in the switches' loopback pool {pool} (fabric.pools.loopbacks_v4): a host and a switch loopback would share the pool",
                    h.ipv4
                ),
                "give the host an address of its leaf's host subnet, or leave `ipv4` out to have one allocated",
            );
        }
    }
}

/// The network, gateway and broadcast address of every leaf subnet belong to nobody.
fn check_special(
    cx: &mut Ctx,
    layout: &Layout,
    switches: &[Switch],
    hosts: &[Host],
    ex: &Explicit,
) {
    for (hi, h) in hosts.iter().enumerate() {
        if ex.host_v4[hi]
            && let Some((s, what)) = layout.special(h.ipv4)
        {
            cx.err_help(
                &format!("{}.ipv4", h.origin),
                format!("host {}", display_name(&h.name)),
                format!(
                    "{} is the {what} address of {}'s host subnet {}",
                    h.ipv4,
                    switches[s].name,
                    layout.subnet_of(s)
                ),
                "hosts take addresses from the third of their subnet on (the second is the gateway); leave `ipv4` out to have one allocated",
            );
        }
        if ex.host_v6[hi]
            && let Some(a) = h.ipv6
            && let Some((s, what)) = layout.special6(u128::from(a))
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
            && let Some((l, what)) = layout.special(s.loopback)
        {
            cx.err_help(
                &format!("{}.loopback", s.origin),
                format!("switch {}", display_name(&s.name)),
                format!(
                    "loopback {} is the {what} address of {}'s host subnet {}",
                    s.loopback,
                    switches[l].name,
                    layout.subnet_of(l)
                ),
                "leave `loopback` out to have one allocated from loopbacks_v4",
            );
        }
    }
}

/// Each host's gateways and IPv6 address, and each leaf's subnets when all its hosts are in them.
fn assign_subnets(
    layout: &Layout,
    switches: &mut [Switch],
    hosts: &mut [Host],
    per_switch: &[Vec<HostIdx>],
    ex: &Explicit,
) {
    for (slot, &si) in layout.leaves.iter().enumerate() {
        let subnet = layout.subnet(slot);
        let v6_subnet = layout.v6_pool.and_then(|p| {
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
            h.gateway_v4 = Layout::v4(layout.base + ((slot as u64) << layout.bits) + 1);
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
fn allocate_host_macs(hosts: &mut [Host], ex: &Explicit) {
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

fn check_unique(cx: &mut Ctx, switches: &[Switch], hosts: &[Host], ex: &Explicit) {
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
            let id = match endpoints::db_identity(&s.db) {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors, valid};
    use super::*;

    #[test]
    fn a_leaf_subnet_reserves_its_network_gateway_and_broadcast() {
        let l = Layout {
            leaves: vec![1, 2],
            base: u64::from(u32::from(Ipv4Addr::new(10, 0, 0, 0))),
            bits: 2,
            v6_pool: None,
        };
        assert_eq!(l.subnet(1), "10.0.0.4/30".parse::<Ipv4Net>().expect("net"));
        assert_eq!(l.subnet_of(2), l.subnet(1));
        assert_eq!(l.special(Ipv4Addr::new(10, 0, 0, 4)), Some((2, "network")));
        assert_eq!(l.special(Ipv4Addr::new(10, 0, 0, 5)), Some((2, "gateway")));
        assert_eq!(l.special(Ipv4Addr::new(10, 0, 0, 6)), None);
        assert_eq!(
            l.special(Ipv4Addr::new(10, 0, 0, 7)),
            Some((2, "broadcast"))
        );
        assert_eq!(l.special(Ipv4Addr::new(10, 0, 0, 8)), None);
    }

    #[test]
    fn hosts_get_the_third_address_of_their_leaf_subnet_on() {
        let t = valid(SMALL);
        let h: Vec<(Ipv4Addr, Ipv4Addr)> = t.hosts.iter().map(|h| (h.ipv4, h.gateway_v4)).collect();
        assert_eq!(
            h,
            vec![
                (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1)),
                (Ipv4Addr::new(10, 0, 0, 6), Ipv4Addr::new(10, 0, 0, 5)),
            ]
        );
        let ids: Vec<u64> = t.switches.iter().map(|s| s.device_id).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        assert_eq!(t.switches[1].p4rt_address, "127.0.0.1:9560");
        assert_eq!(
            t.switches[1].db,
            format!("unix:///run/weft/{}/leaf1/redis.sock", t.name)
        );
    }

    #[test]
    fn an_explicit_value_is_never_allocated_again_and_duplicates_are_reported_where_written() {
        let t = valid(&SMALL.replace(
            "{name: h2, attach: leaf2:Ethernet0}",
            "{name: h2, attach: leaf2:Ethernet0, ipv4: 10.0.0.2}",
        ));
        assert_ne!(t.hosts[0].ipv4, Ipv4Addr::new(10, 0, 0, 2));
        let e = errors(&SMALL.replacen("role: leaf\n", "role: leaf\n    device_id: 1\n", 2));
        assert_eq!(
            e,
            vec!["11: duplicate device id 1 (also used by switch leaf1)"]
        );
    }

    #[test]
    fn overlapping_pools_are_refused() {
        let e = errors(&format!(
            "fabric:\n  pools:\n    hosts_v4: 10.0.0.0/8\n    loopbacks_v4: 10.1.0.0/16\n{SMALL}"
        ));
        assert_eq!(
            e,
            vec!["2: address pools overlap: hosts_v4 10.0.0.0/8 and loopbacks_v4 10.1.0.0/16"]
        );
    }

    #[test]
    fn a_fabric_name_too_long_for_its_sockets_gets_a_short_directory_of_its_own() {
        let d = Defaults::default();
        assert_eq!(socket_dir("small", &d), "/run/weft/small");
        let long = "a_aa_aaA_a0-_aAA-_-Aa_a_A-_";
        let other = "a_aa_aaA_a0-_aAA-_-Aa_a_A-_x";
        let (a, b) = (socket_dir(long, &d), socket_dir(other, &d));
        assert_ne!(a, b, "two fabrics, two directories");
        for dir in [&a, &b] {
            let sock = format!(
                "{dir}/{}/redis.sock",
                "s".repeat(crate::names::MAX_NAME_LEN)
            );
            assert!(sock.len() <= 107, "{sock}: {} bytes", sock.len());
        }
        assert!(a.starts_with("/run/weft/a_aa_aaA_a0-_aA"), "{a}");
    }
}
