//! Port link state: Linux netlink link events (RTM_NEWLINK/RTM_DELLINK on the RTMGRP_LINK
//! multicast group) for the interfaces mapped to ports, `/sys/class/net/<if>/operstate` for
//! the initial state, and the pipeline's `port_status_table` down mask built from it.
//!
//! This is the fast failover path: BMv2 polls its interfaces only every 200 ms, while a
//! netlink event arrives as the kernel changes the link, and one default-action MODIFY then
//! makes every multipath mode avoid the port from the next packet on. It runs on a thread of
//! its own ([`spawn_port_thread`]: its own runtime, its own write-only P4Runtime connection, a
//! raised scheduling priority), so it never waits behind translation, batch writes, counter
//! polls or tuning, nor behind other work on a busy machine.
//!
//! ```text
//!   netlink thread ─LinkEvent─┐
//!   sysfs check (1 s, catches ┤──► oper state ─┐
//!   events netlink dropped)   │                ├─► down = !oper ∨ admin-down ─► port_status_table
//!   session ─PortCmd──────────┘  admin-down ───┘                                 (on change)
//!                                 (CONFIG_DB)   ─► STATE_DB PORT_TABLE oper_status, admin_status
//!                                                  (on change; all again after a Redis restart)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use weft_p4::{actions as a, tables as t};
use weft_p4rt::proto::p4::v1::{Entity, Update, entity, update};
use weft_p4rt::{Client, P4Info};
use weft_sonic_db::{SonicDb, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::config::AdminStatus;
use weft_sonic_schema::state::{OperStatus, PortState};

/// A link changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkEvent {
    pub ifname: String,
    pub up: bool,
}

/// Whether `ifname` is operationally up now, from sysfs. A missing interface is down.
pub fn sysfs_oper_up(ifname: &str) -> bool {
    let base = Path::new("/sys/class/net").join(ifname);
    match std::fs::read_to_string(base.join("operstate")) {
        Ok(s) => match s.trim() {
            "up" => true,
            // Some virtual links never report an oper state; carrier says it then.
            "unknown" => {
                std::fs::read_to_string(base.join("carrier")).is_ok_and(|c| c.trim() == "1")
            }
            _ => false,
        },
        Err(_) => false,
    }
}

const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const IFLA_IFNAME: u16 = 3;
const IFLA_OPERSTATE: u16 = 16;
const IF_OPER_UNKNOWN: u8 = 0;
const IF_OPER_UP: u8 = 6;
const IFF_UP: u32 = 0x1;
const IFF_LOWER_UP: u32 = 0x1_0000;
const RTMGRP_LINK: u32 = 1;

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(i..i + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

/// Link events in one netlink datagram (malformed parts are skipped).
pub fn parse_link_messages(buf: &[u8]) -> Vec<LinkEvent> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off + 16 <= buf.len() {
        let Some(len) = u32_at(buf, off).map(|l| l as usize) else {
            break;
        };
        let Some(ty) = u16_at(buf, off + 4) else {
            break;
        };
        if len < 16 || off + len > buf.len() {
            break;
        }
        let msg = &buf[off + 16..off + len];
        if (ty == RTM_NEWLINK || ty == RTM_DELLINK) && msg.len() >= 16 {
            let flags = u32_at(msg, 8).unwrap_or(0);
            let mut name = None;
            let mut oper = None;
            let mut a = 16usize;
            while a + 4 <= msg.len() {
                let alen = u16_at(msg, a).unwrap_or(0) as usize;
                let aty = u16_at(msg, a + 2).unwrap_or(0) & 0x3fff;
                if alen < 4 || a + alen > msg.len() {
                    break;
                }
                let data = &msg[a + 4..a + alen];
                match aty {
                    IFLA_IFNAME => {
                        let end = data.iter().position(|b| *b == 0).unwrap_or(data.len());
                        name = std::str::from_utf8(&data[..end]).ok().map(str::to_string);
                    }
                    IFLA_OPERSTATE => oper = data.first().copied(),
                    _ => {}
                }
                a += (alen + 3) & !3;
            }
            if let Some(ifname) = name {
                let up = ty == RTM_NEWLINK
                    && match oper {
                        Some(IF_OPER_UP) => true,
                        None | Some(IF_OPER_UNKNOWN) => {
                            flags & (IFF_UP | IFF_LOWER_UP) == (IFF_UP | IFF_LOWER_UP)
                        }
                        Some(_) => false,
                    };
                out.push(LinkEvent { ifname, up });
            }
        }
        off += (len + 3) & !3;
    }
    out
}

/// Listens to netlink link events on a thread of its own (the socket is blocking) and sends
/// those of `watched` interfaces. The thread ends when the receiver is gone.
pub fn spawn_netlink_listener(
    watched: BTreeSet<String>,
    tx: mpsc::Sender<LinkEvent>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind(&SocketAddr::new(0, RTMGRP_LINK))?;
    std::thread::Builder::new()
        .name("weft-netlink".into())
        .spawn(move || {
            raise_priority("weft-netlink");
            loop {
                let (buf, _) = match socket.recv_from_full() {
                    Ok(r) => r,
                    Err(e) => {
                        // ENOBUFS: events were lost; the periodic sysfs check catches up.
                        tracing::warn!(error = %e, "netlink receive failed");
                        if tx.is_closed() {
                            return;
                        }
                        continue;
                    }
                };
                for ev in parse_link_messages(&buf) {
                    if watched.contains(&ev.ifname) && tx.blocking_send(ev).is_err() {
                        return;
                    }
                }
            }
        })
}

/// The 512-bit down mask: bit p set = port p down, big-endian.
pub fn down_mask(down: &BTreeSet<u32>, bits: u32) -> Vec<u8> {
    let nbytes = bits.div_ceil(8) as usize;
    let mut out = vec![0u8; nbytes];
    for p in down.iter().filter(|p| **p < bits) {
        let byte = nbytes - 1 - (*p / 8) as usize;
        out[byte] |= 1 << (p % 8);
    }
    out
}

/// The port_status_table default entry with this down set.
pub fn port_status_entity(info: &P4Info, down: &BTreeSet<u32>) -> Result<Entity, weft_p4rt::Error> {
    let bits = a::set_port_down_mask::params::down_mask::BITWIDTH;
    let call = info.action_call(a::set_port_down_mask::NAME)?.param(
        a::set_port_down_mask::params::down_mask::NAME,
        down_mask(down, bits),
    )?;
    Ok(Entity {
        entity: Some(entity::Entity::TableEntry(
            info.table_entry(t::port_status_table::NAME)?
                .default_entry()
                .action(call)?
                .build()?,
        )),
    })
}

/// What the port task is told by the session.
#[derive(Debug)]
pub enum PortCmd {
    /// CONFIG_DB: port ids, and the ports the operator set admin-down.
    Config {
        ids: BTreeMap<String, u32>,
        admin_down: BTreeSet<String>,
    },
    /// The session pushed the pipeline and synced: the mask may be written (and is, once).
    Arm,
    /// Redis may have lost STATE_DB (restarted): publish every port again.
    Republish,
}

/// Shared with the status line.
#[derive(Debug, Default)]
pub struct PortStats {
    pub ports_down: AtomicU64,
    pub mask_writes: AtomicU64,
    pub link_events: AtomicU64,
}

/// How much the failover threads are favoured over the rest of the machine (a nice value). A
/// real switch runs its link-down path above management work for the same reason.
const FAILOVER_NICE: i32 = -10;

/// Raises the calling thread's priority; without the privilege it stays as it is (logged).
fn raise_priority(thread: &str) {
    // PRIO_PROCESS with a thread id changes only that thread on Linux.
    let tid = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(tid), FAILOVER_NICE) {
        tracing::warn!(thread, error = %e, "could not raise the thread's priority");
    }
}

/// Starts [`port_task`] on its own thread and runtime, with its own write-only connection to
/// the switch (same device and election id as the session).
pub fn spawn_port_thread(
    p4rt: weft_p4rt::ClientConfig,
    info: P4Info,
    sonic: SonicDb,
    interfaces: BTreeMap<String, String>,
    rx: mpsc::Receiver<PortCmd>,
    stats: Arc<PortStats>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("weft-ports".into())
        .spawn(move || {
            raise_priority("weft-ports");
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "port thread: no runtime; ports are not followed");
                    return;
                }
            };
            rt.block_on(async move {
                let client = match Client::connect_write_only(p4rt) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(error = %e, "port thread: no P4Runtime connection");
                        return;
                    }
                };
                client.set_p4info(info.clone());
                port_task(client, info, sonic, interfaces, rx, stats).await
            })
        })
}

/// Owns port_status_table and STATE_DB PORT_TABLE. Runs until `rx` closes.
pub async fn port_task(
    client: Client,
    info: P4Info,
    sonic: SonicDb,
    interfaces: BTreeMap<String, String>,
    mut rx: mpsc::Receiver<PortCmd>,
    stats: Arc<PortStats>,
) {
    let by_if: BTreeMap<String, String> = interfaces
        .iter()
        .map(|(p, i)| (i.clone(), p.clone()))
        .collect();
    let (link_tx, mut link_rx) = mpsc::channel::<LinkEvent>(256);
    if !interfaces.is_empty() {
        let watched = interfaces.values().cloned().collect();
        if let Err(e) = spawn_netlink_listener(watched, link_tx) {
            tracing::error!(error = %e, "netlink listener failed; link state from sysfs checks only");
        }
    }
    let mut oper: BTreeMap<String, bool> = interfaces
        .iter()
        .map(|(p, i)| (p.clone(), sysfs_oper_up(i)))
        .collect();
    let mut ids: BTreeMap<String, u32> = BTreeMap::new();
    let mut admin_down: BTreeSet<String> = BTreeSet::new();
    let mut written: Option<BTreeSet<u32>> = None;
    // Only a session that has pushed the pipeline and synced may write: a write racing
    // SetForwardingPipelineConfig crashes simple_switch_grpc. The session's Arm allows it.
    let mut armed = false;
    let mut published: BTreeMap<String, PortState> = BTreeMap::new();
    let mut state_db: Option<Table> = None;
    let mut check = tokio::time::interval(Duration::from_secs(1));
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut force_mask = false;
        tokio::select! {
            cmd = rx.recv() => match cmd {
                None => return,
                Some(PortCmd::Config { ids: i, admin_down: a }) => { ids = i; admin_down = a; }
                Some(PortCmd::Arm) => { force_mask = true; armed = true; }
                Some(PortCmd::Republish) => published.clear(),
            },
            ev = link_rx.recv(), if !interfaces.is_empty() => {
                let Some(ev) = ev else { continue };
                stats.link_events.fetch_add(1, Ordering::Relaxed);
                if let Some(port) = by_if.get(&ev.ifname) {
                    tracing::info!(%port, ifname = %ev.ifname, up = ev.up, "link event");
                    oper.insert(port.clone(), ev.up);
                }
            }
            _ = check.tick() => {
                for (p, i) in &interfaces {
                    oper.insert(p.clone(), sysfs_oper_up(i));
                }
            }
        }
        let oper_up = |p: &str| oper.get(p).copied().unwrap_or(true);
        let down: BTreeSet<u32> = ids
            .iter()
            .filter(|(p, _)| !oper_up(p) || admin_down.contains(*p))
            .map(|(_, id)| *id)
            .collect();
        // The data plane first: the mask, then STATE_DB for the controller.
        if armed && (force_mask || written.as_ref() != Some(&down)) {
            let t0 = Instant::now();
            let ok = match port_status_entity(&info, &down) {
                Ok(e) => client
                    .write(&[Update {
                        r#type: update::Type::Modify as i32,
                        entity: Some(e),
                    }])
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match ok {
                Ok(()) => {
                    stats.mask_writes.fetch_add(1, Ordering::Relaxed);
                    stats.ports_down.store(down.len() as u64, Ordering::Relaxed);
                    tracing::info!(down = ?down, us = t0.elapsed().as_micros() as u64, "port down mask written");
                    written = Some(down);
                }
                // Not primary or switch away: the next session's Arm writes it.
                Err(e) => {
                    armed = false;
                    tracing::debug!(error = %e, "port down mask not written");
                }
            }
        }
        let current: BTreeMap<String, PortState> = ids
            .keys()
            .map(|p| {
                (
                    p.clone(),
                    PortState {
                        port: p.clone(),
                        oper_status: if oper_up(p) {
                            OperStatus::Up
                        } else {
                            OperStatus::Down
                        },
                        admin_status: Some(if admin_down.contains(p) {
                            AdminStatus::Down
                        } else {
                            AdminStatus::Up
                        }),
                    },
                )
            })
            .collect();
        let changed: Vec<(String, weft_sonic_db::FieldValues)> = current
            .iter()
            .filter(|(p, s)| published.get(*p) != Some(*s))
            .map(|(_, s)| (s.key(), s.to_fields()))
            .collect();
        if changed.is_empty() {
            continue;
        }
        if state_db.is_none() {
            state_db = match sonic.connect(SonicDbId::StateDb).await {
                Ok(c) => Table::new(c, PortState::TABLE).ok(),
                Err(_) => None,
            };
        }
        let Some(tbl) = &state_db else { continue };
        match tbl.replace_many(&changed, &[]).await {
            Ok(()) => published = current,
            // Redis away: publish again once it is back (the next check retries).
            Err(_) => state_db = None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link_msg(ty: u16, flags: u32, name: &str, oper: Option<u8>) -> Vec<u8> {
        let mut attrs = Vec::new();
        let mut push = |aty: u16, data: &[u8]| {
            let len = 4 + data.len();
            attrs.extend_from_slice(&(len as u16).to_ne_bytes());
            attrs.extend_from_slice(&aty.to_ne_bytes());
            attrs.extend_from_slice(data);
            while attrs.len() % 4 != 0 {
                attrs.push(0);
            }
        };
        let mut n = name.as_bytes().to_vec();
        n.push(0);
        push(IFLA_IFNAME, &n);
        if let Some(o) = oper {
            push(IFLA_OPERSTATE, &[o]);
        }
        let mut ifi = vec![0u8; 16];
        ifi[8..12].copy_from_slice(&flags.to_ne_bytes());
        let len = 16 + ifi.len() + attrs.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(len as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend(ifi);
        m.extend(attrs);
        m
    }

    #[test]
    fn link_messages_give_name_and_oper_state() {
        let mut buf = link_msg(
            RTM_NEWLINK,
            IFF_UP | IFF_LOWER_UP,
            "veth1",
            Some(IF_OPER_UP),
        );
        buf.extend(link_msg(RTM_NEWLINK, IFF_UP, "veth3", Some(7)));
        buf.extend(link_msg(RTM_DELLINK, 0, "veth5", None));
        buf.extend(link_msg(
            RTM_NEWLINK,
            IFF_UP | IFF_LOWER_UP,
            "lo",
            Some(IF_OPER_UNKNOWN),
        ));
        let ev = parse_link_messages(&buf);
        let got: Vec<(&str, bool)> = ev.iter().map(|e| (e.ifname.as_str(), e.up)).collect();
        assert_eq!(
            got,
            vec![
                ("veth1", true),
                ("veth3", false),
                ("veth5", false),
                ("lo", true)
            ]
        );
    }

    #[test]
    fn truncated_netlink_data_is_ignored_not_a_panic() {
        let buf = link_msg(RTM_NEWLINK, 0, "veth1", Some(IF_OPER_UP));
        for cut in 0..buf.len() {
            let _ = parse_link_messages(&buf[..cut]);
        }
    }

    #[test]
    fn down_mask_sets_bit_p_for_port_p() {
        let m = down_mask(&[0, 9, 511].into(), 512);
        assert_eq!(m.len(), 64);
        assert_eq!(m[63], 0b1);
        assert_eq!(m[62], 0b10);
        assert_eq!(m[0], 0x80);
    }
}
