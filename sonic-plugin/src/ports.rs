//! Port link state: Linux netlink link events (RTM_NEWLINK/RTM_DELLINK on the RTMGRP_LINK
//! multicast group, decoded by `netlink-packet-route`) for the interfaces mapped to ports,
//! `/sys/class/net/<if>/operstate` for the initial state, and the pipeline's
//! `port_status_table` down mask built from it.
//!
//! This is the fast failover path: BMv2 polls its interfaces only every 200 ms, while a
//! netlink event arrives as the kernel changes the link, and one default-action MODIFY then
//! makes every multipath mode avoid the port from the next packet on. It runs on a thread of
//! its own ([`spawn_port_thread`]: its own runtime, its own write-only P4Runtime connection, a
//! raised scheduling priority), so it never waits behind translation, batch writes, counter
//! polls or tuning, nor behind other work on a busy machine. What it decides is [`PortCore`]'s
//! (no I/O, golden-stepped with the plugin's core); the thread only carries it out.
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

use netlink_packet_core::{NetlinkBuffer, NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage, State};
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

const RTMGRP_LINK: u32 = 1;

/// A link message's interface and whether it is up: the oper state when the kernel gives one,
/// else (unknown, or none: virtual links) the flags UP and LOWER_UP; a deleted link is down.
fn link_event(msg: &LinkMessage, deleted: bool) -> Option<LinkEvent> {
    let mut name = None;
    let mut oper = None;
    for a in &msg.attributes {
        match a {
            LinkAttribute::IfName(n) => name = Some(n.clone()),
            LinkAttribute::OperState(s) => oper = Some(*s),
            _ => {}
        }
    }
    let flags = msg.header.flags;
    let up = !deleted
        && match oper {
            Some(State::Up) => true,
            None | Some(State::Unknown) => flags.contains(LinkFlags::Up | LinkFlags::LowerUp),
            Some(_) => false,
        };
    Some(LinkEvent { ifname: name?, up })
}

/// Link events in one netlink datagram (messages that do not decode are skipped: the periodic
/// sysfs check catches up with what they said).
pub fn parse_link_messages(buf: &[u8]) -> Vec<LinkEvent> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < buf.len() {
        let Ok(nb) = NetlinkBuffer::new_checked(&buf[off..]) else {
            break;
        };
        let len = nb.length() as usize;
        if len == 0 {
            break;
        }
        match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[off..off + len]) {
            Ok(m) => match m.payload {
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) => {
                    out.extend(link_event(&l, false));
                }
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelLink(l)) => {
                    out.extend(link_event(&l, true));
                }
                _ => {}
            },
            Err(e) => tracing::debug!(error = %e, "netlink message not decoded"),
        }
        // Messages are 4-byte aligned in a datagram.
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
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// What the port thread feeds [`PortCore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortInput {
    Cmd(PortCmd),
    /// A netlink link event.
    Link(LinkEvent),
    /// The periodic check of every mapped interface: (port, up).
    Checked(Vec<(String, bool)>),
}

/// What [`PortCore`] asks the port thread to do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum PortOutput {
    /// Write the down mask (the port ids down); answer with [`PortCore::mask_written`].
    WriteMask(BTreeSet<u32>),
    /// Write these STATE_DB PORT_TABLE rows; answer with [`PortCore::published`].
    Publish(Vec<PortState>),
}

/// The port thread's decisions: from link state, port ids and admin state to the down mask and
/// STATE_DB rows, each written when it changed. No I/O.
#[derive(Debug, Default)]
pub struct PortCore {
    by_if: BTreeMap<String, String>,
    oper: BTreeMap<String, bool>,
    ids: BTreeMap<String, u32>,
    admin_down: BTreeSet<String>,
    written: Option<BTreeSet<u32>>,
    /// Only a session that has pushed the pipeline and synced may write: a write racing
    /// SetForwardingPipelineConfig crashes simple_switch_grpc. The session's Arm allows it.
    armed: bool,
    published: BTreeMap<String, PortState>,
}

impl PortCore {
    /// `oper`: each mapped port's link state at start (port → up); `interfaces`: port → Linux
    /// interface.
    pub fn new(interfaces: &BTreeMap<String, String>, oper: BTreeMap<String, bool>) -> Self {
        PortCore {
            by_if: interfaces
                .iter()
                .map(|(p, i)| (i.clone(), p.clone()))
                .collect(),
            oper,
            ..Default::default()
        }
    }

    /// The ports down now: link down (a port without a link state counts as up) or set
    /// admin-down.
    pub fn down(&self) -> BTreeSet<u32> {
        let oper_up = |p: &str| self.oper.get(p).copied().unwrap_or(true);
        self.ids
            .iter()
            .filter(|(p, _)| !oper_up(p) || self.admin_down.contains(*p))
            .map(|(_, id)| *id)
            .collect()
    }

    pub fn step(&mut self, input: PortInput) -> Vec<PortOutput> {
        let mut force_mask = false;
        match input {
            PortInput::Cmd(PortCmd::Config { ids, admin_down }) => {
                self.ids = ids;
                self.admin_down = admin_down;
            }
            PortInput::Cmd(PortCmd::Arm) => {
                force_mask = true;
                self.armed = true;
            }
            PortInput::Cmd(PortCmd::Republish) => self.published.clear(),
            PortInput::Link(ev) => {
                if let Some(port) = self.by_if.get(&ev.ifname) {
                    tracing::info!(%port, ifname = %ev.ifname, up = ev.up, "link event");
                    self.oper.insert(port.clone(), ev.up);
                }
            }
            PortInput::Checked(states) => self.oper.extend(states),
        }
        let mut out = Vec::new();
        // The data plane first: the mask, then STATE_DB for the controller.
        let down = self.down();
        if self.armed && (force_mask || self.written.as_ref() != Some(&down)) {
            out.push(PortOutput::WriteMask(down));
        }
        let changed: Vec<PortState> = self
            .current()
            .into_values()
            .filter(|s| self.published.get(&s.port) != Some(s))
            .collect();
        if !changed.is_empty() {
            out.push(PortOutput::Publish(changed));
        }
        out
    }

    /// Every configured port's state as STATE_DB shows it.
    fn current(&self) -> BTreeMap<String, PortState> {
        let oper_up = |p: &str| self.oper.get(p).copied().unwrap_or(true);
        self.ids
            .keys()
            .map(|p| {
                let st = PortState {
                    port: p.clone(),
                    oper_status: if oper_up(p) {
                        OperStatus::Up
                    } else {
                        OperStatus::Down
                    },
                    admin_status: Some(if self.admin_down.contains(p) {
                        AdminStatus::Down
                    } else {
                        AdminStatus::Up
                    }),
                };
                (p.clone(), st)
            })
            .collect()
    }

    /// The mask write of `down` succeeded, or did not (not primary, switch away: the next
    /// session's Arm writes it).
    pub fn mask_written(&mut self, down: BTreeSet<u32>, ok: bool) {
        if ok {
            self.written = Some(down);
        } else {
            self.armed = false;
        }
    }

    /// The rows were written (or Redis was away: they are published again on the next check).
    pub fn published(&mut self, ok: bool) {
        if ok {
            self.published = self.current();
        }
    }
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

/// Starts the port task on its own thread and runtime, with its own write-only connection to
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
                let io = PortIo {
                    client,
                    info,
                    sonic,
                    stats,
                    state_db: None,
                };
                port_task(io, interfaces, rx).await
            })
        })
}

/// What the port thread writes with.
struct PortIo {
    client: Client,
    info: P4Info,
    sonic: SonicDb,
    stats: Arc<PortStats>,
    state_db: Option<Table>,
}

impl PortIo {
    async fn carry_out(&mut self, core: &mut PortCore, outs: Vec<PortOutput>) {
        for o in outs {
            match o {
                PortOutput::WriteMask(down) => {
                    let ok = self.write_mask(&down).await;
                    core.mask_written(down, ok);
                }
                PortOutput::Publish(rows) => {
                    let ok = self.publish(&rows).await;
                    core.published(ok);
                }
            }
        }
    }

    async fn write_mask(&self, down: &BTreeSet<u32>) -> bool {
        let t0 = Instant::now();
        let r = match port_status_entity(&self.info, down) {
            Ok(e) => self
                .client
                .write(&[Update {
                    r#type: update::Type::Modify as i32,
                    entity: Some(e),
                }])
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match r {
            Ok(()) => {
                self.stats.mask_writes.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .ports_down
                    .store(down.len() as u64, Ordering::Relaxed);
                tracing::info!(down = ?down, us = t0.elapsed().as_micros() as u64, "port down mask written");
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, "port down mask not written");
                false
            }
        }
    }

    async fn publish(&mut self, rows: &[PortState]) -> bool {
        if self.state_db.is_none() {
            self.state_db = match self.sonic.connect(SonicDbId::StateDb).await {
                Ok(c) => Table::new(c, PortState::TABLE).ok(),
                Err(_) => None,
            };
        }
        let Some(tbl) = &self.state_db else {
            return false;
        };
        let rows: Vec<(String, weft_sonic_db::FieldValues)> =
            rows.iter().map(|s| (s.key(), s.to_fields())).collect();
        match tbl.replace_many(&rows, &[]).await {
            Ok(()) => true,
            // Redis away: publish again once it is back (the next check retries).
            Err(_) => {
                self.state_db = None;
                false
            }
        }
    }
}

/// Owns port_status_table and STATE_DB PORT_TABLE: feeds [`PortCore`] link events, the
/// periodic sysfs check and the session's commands, and carries out what it decides. Runs
/// until `rx` closes.
async fn port_task(
    mut io: PortIo,
    interfaces: BTreeMap<String, String>,
    mut rx: mpsc::Receiver<PortCmd>,
) {
    let (link_tx, mut link_rx) = mpsc::channel::<LinkEvent>(256);
    if !interfaces.is_empty() {
        let watched = interfaces.values().cloned().collect();
        if let Err(e) = spawn_netlink_listener(watched, link_tx) {
            tracing::error!(error = %e, "netlink listener failed; link state from sysfs checks only");
        }
    }
    let check = || -> Vec<(String, bool)> {
        interfaces
            .iter()
            .map(|(p, i)| (p.clone(), sysfs_oper_up(i)))
            .collect()
    };
    let mut core = PortCore::new(&interfaces, check().into_iter().collect());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let input = tokio::select! {
            cmd = rx.recv() => match cmd {
                None => return,
                Some(c) => PortInput::Cmd(c),
            },
            ev = link_rx.recv(), if !interfaces.is_empty() => {
                let Some(ev) = ev else { continue };
                io.stats.link_events.fetch_add(1, Ordering::Relaxed);
                PortInput::Link(ev)
            }
            _ = tick.tick() => PortInput::Checked(check()),
        };
        let outs = core.step(input);
        io.carry_out(&mut core, outs).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTM_NEWLINK: u16 = 16;
    const RTM_DELLINK: u16 = 17;
    const IFLA_IFNAME: u16 = 3;
    const IFLA_OPERSTATE: u16 = 16;
    const IF_OPER_UNKNOWN: u8 = 0;
    const IF_OPER_UP: u8 = 6;
    const IFF_UP: u32 = 0x1;
    const IFF_LOWER_UP: u32 = 0x1_0000;

    /// A link message as the kernel lays it out (built by hand here, so the test does not
    /// check the parser against itself).
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

    #[test]
    fn the_mask_is_written_once_armed_and_then_only_on_change() {
        let ifs: BTreeMap<String, String> = [("Ethernet0".into(), "veth0".into())].into();
        let mut core = PortCore::new(&ifs, [("Ethernet0".into(), true)].into());
        let ids = [("Ethernet0".to_string(), 1), ("Ethernet4".to_string(), 2)].into();
        let out = core.step(PortInput::Cmd(PortCmd::Config {
            ids,
            admin_down: ["Ethernet4".to_string()].into(),
        }));
        assert!(
            matches!(&out[..], [PortOutput::Publish(rows)] if rows.len() == 2),
            "not armed: rows only, no mask: {out:?}"
        );
        core.published(true);
        let out = core.step(PortInput::Cmd(PortCmd::Arm));
        assert_eq!(out, vec![PortOutput::WriteMask([2].into())]);
        core.mask_written([2].into(), true);
        let out = core.step(PortInput::Link(LinkEvent {
            ifname: "veth0".into(),
            up: false,
        }));
        assert_eq!(out[0], PortOutput::WriteMask([1, 2].into()));
        core.mask_written([1, 2].into(), true);
        core.published(true);
        assert!(
            core.step(PortInput::Checked(vec![("Ethernet0".into(), false)]))
                .is_empty(),
            "nothing changed"
        );
    }
}
