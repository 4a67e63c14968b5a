//! Faults the twin injects, what each does to the counters (as [`crate::effects`]), and what
//! `weft diagnose` must name for it.
//!
//! | fault | counters | named |
//! |---|---|---|
//! | lossy link | the receiving end counts `loss` less than the sender sent (one or both ways) | `lossy_link A:P—B:Q` |
//! | lossy switch | every port of the switch counts `loss` less than its peer sent (a linecard, flapping ports) | `lossy_link SWITCH` |
//! | slow link | the port sends `share` of its load, its queue deep and CE-marking; with `pfc`, its switch pauses the ports that feed it | `slow_link SW:PORT` |
//! | black hole | a spine's route to a leaf's subnet is gone: its port toward the leaf sends nothing, `no_route` drops, the read-back's `WEFT_DRIFT` row 2 s later | `black_hole SPINE` |
//! | PFC storm | a host pauses its leaf port continuously; with the watchdog, stormed after 200 ms and dropped; without, the PAUSE spreads hop by hop up the pause graph (`depth` hops: leaf → spines → other leaves and cores → their hosts and other pods) | `pfc_storm HOST` |
//! | slow receiver | a host pauses its leaf port in stretches (5–60 frames/s), the queue toward it deep | `slow_receiver HOST` |
//! | incast | `senders` hosts fill a host's port at line rate (the model places their flows); its queue CE-marks; with `pfc`, its leaf pauses the ports the incast arrives on | `congestion HOST` |
//! | reordering | a leaf counts RoCE packets out of order (`fraction` of what it sends its hosts) | `reordering LEAF` (the switch counts them in total) |
//!
//! The pause graph is the model's: a blocked egress is fed by the ports of its switch whose
//! arrivals routing may send out of it (valley-free: what came down goes on down), and those
//! carry load in the background.

use weft_diagnose::Kind;
use weft_topology::{HostIdx, SwitchIdx, Topology};

use crate::effects::{Effects, Fx, SwFx};
use crate::load::{Loads, Model, extra};
use crate::ports::{Peer, PortId, Ports};

/// Lossless packets' mean size on the wire (bytes): a 4 KiB RoCE payload and its headers.
pub const PACKET: f64 = 4160.0;
/// The PFC watchdog's detection time (the compiler's default).
pub const WD_DETECT_MS: u64 = 200;
/// How long a PAUSE takes to back a queue up to xoff, hop by hop.
pub const HOP_MS: u64 = 30;
/// The plugin's read-back interval (drift rows appear this long after the switch changed).
pub const READBACK_MS: u64 = 2000;

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    LossyLink {
        from: PortId,
        to: PortId,
        loss: f64,
        both: bool,
    },
    LossySwitch {
        switch: SwitchIdx,
        loss: f64,
    },
    SlowLink {
        port: PortId,
        share: f64,
        pfc: bool,
    },
    BlackHole {
        port: PortId,
    },
    PfcStorm {
        host: HostIdx,
        rate: f64,
        watchdog: bool,
        depth: u8,
    },
    SlowReceiver {
        host: HostIdx,
        rate: f64,
        watchdog: bool,
    },
    Incast {
        host: HostIdx,
        senders: Vec<HostIdx>,
        pfc: bool,
    },
    Reordering {
        leaf: SwitchIdx,
        fraction: f64,
    },
}

/// What a diagnosis must name for a fault: the finding's kind and target.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Truth {
    pub kind: Kind,
    pub target: String,
}

impl Truth {
    /// A finding's target as compared: a link's two ends in either order.
    pub fn normal(target: &str) -> String {
        match target.split_once('—') {
            Some((a, b)) if a > b => format!("{b}—{a}"),
            _ => target.to_string(),
        }
    }
    pub fn matches(&self, kind: Kind, target: &str) -> bool {
        self.kind == kind && Truth::normal(&self.target) == Truth::normal(target)
    }
}

/// The fabric a fault acts on.
pub struct Ctx<'a> {
    pub t: &'a Topology,
    pub ports: &'a Ports,
    pub loads: &'a Loads,
    pub model: &'a Model,
    pub seed: u64,
}

impl Fault {
    /// Short name of the fault's kind (the scored table's rows).
    pub fn name(&self) -> &'static str {
        match self {
            Fault::LossyLink { .. } => "lossy link",
            Fault::LossySwitch { .. } => "lossy switch",
            Fault::SlowLink { .. } => "slow link",
            Fault::BlackHole { .. } => "black hole",
            Fault::PfcStorm { depth, .. } if *depth > 1 => "PFC storm, spreading",
            Fault::PfcStorm { .. } => "PFC storm",
            Fault::SlowReceiver { .. } => "slow receiver",
            Fault::Incast { .. } => "incast",
            Fault::Reordering { .. } => "reordering",
        }
    }

    pub fn truth(&self, c: &Ctx<'_>) -> Truth {
        let (t, ports) = (c.t, c.ports);
        let (kind, target) = match self {
            Fault::LossyLink { from, to, .. } => (
                Kind::LossyLink,
                format!("{}—{}", ports.name(t, *from), ports.name(t, *to)),
            ),
            Fault::LossySwitch { switch, .. } => {
                (Kind::LossyLink, t.switches[*switch].name.clone())
            }
            Fault::SlowLink { port, .. } => (Kind::SlowLink, ports.name(t, *port)),
            Fault::BlackHole { port } => (
                Kind::BlackHole,
                t.switches[ports.get(*port).switch].name.clone(),
            ),
            Fault::PfcStorm { host, .. } => (Kind::PfcStorm, t.hosts[*host].name.clone()),
            Fault::SlowReceiver { host, .. } => (Kind::SlowReceiver, t.hosts[*host].name.clone()),
            Fault::Incast { host, .. } => (Kind::Congestion, t.hosts[*host].name.clone()),
            Fault::Reordering { leaf, .. } => (Kind::Reordering, t.switches[*leaf].name.clone()),
        };
        Truth { kind, target }
    }

    /// The fault's effects from `at` on (until [`Effects::end`]).
    pub fn inject(&self, c: &Ctx<'_>, e: &mut Effects, id: u32, at: u64) {
        const END: u64 = u64::MAX;
        let ports = c.ports;
        match self {
            Fault::LossyLink {
                from,
                to,
                loss,
                both,
            } => {
                e.port(id, *to, at, END, Fx::RxLoss(*loss));
                if *both {
                    e.port(id, *from, at, END, Fx::RxLoss(*loss));
                }
            }
            Fault::LossySwitch { switch, loss } => {
                for p in ports.of_switch[*switch].clone() {
                    e.port(id, p, at, END, Fx::RxLoss(*loss));
                }
            }
            Fault::SlowLink { port, share, pfc } => {
                e.port(id, *port, at, END, Fx::TxScale(*share));
                e.port(id, *port, at, END, Fx::Ecn(0.1 + 0.3 * (1.0 - share)));
                e.port(id, *port, at, END, Fx::Deep(0.6 + 0.3 * (1.0 - share)));
                if *pfc {
                    for f in ports.feeders(*port) {
                        if c.loads.ingress[f as usize] > 0.0 {
                            pause(c, e, id, f, at + HOP_MS, END, 200.0);
                        }
                    }
                }
            }
            Fault::BlackHole { port } => black_hole(c, e, id, *port, at),
            Fault::PfcStorm {
                host,
                rate,
                watchdog,
                depth,
            } => storm(c, e, id, *host, *rate, *watchdog, *depth, at),
            Fault::SlowReceiver {
                host,
                rate,
                watchdog,
            } => {
                let p = ports.of_host[*host];
                e.port(id, p, at, END, Fx::PauseRx(*rate));
                e.port(id, p, at, END, Fx::TxScale(0.5));
                e.port(id, p, at, END, Fx::Deep(0.7));
                e.port(id, p, at, END, Fx::Ecn(0.2));
                if *watchdog {
                    let sw = ports.get(p).switch;
                    let pps = 0.02 * c.loads.egress[p as usize] / PACKET;
                    e.switch(id, sw, at + 500, END, SwFx::Watchdog { port: p });
                    e.switch(
                        id,
                        sw,
                        at + 500,
                        END,
                        SwFx::Drops {
                            reason: "pfc_watchdog",
                            pps,
                        },
                    );
                }
            }
            Fault::Incast { host, senders, pfc } => incast(c, e, id, *host, senders, *pfc, at),
            Fault::Reordering { leaf, fraction } => {
                let sent: f64 = ports.of_switch[*leaf]
                    .clone()
                    .filter(|p| matches!(ports.get(*p).peer, Peer::Host(_)))
                    .map(|p| c.loads.egress[p as usize] / PACKET)
                    .sum();
                let ooo = fraction * sent;
                e.switch(
                    id,
                    *leaf,
                    at,
                    END,
                    SwFx::Psn {
                        ooo,
                        regress: 0.02 * ooo,
                    },
                );
            }
        }
    }
}

/// Port `f` pauses its peer at `rate` frames/s: the peer's egress toward `f` is held up (or,
/// a host, sends less).
fn pause(
    c: &Ctx<'_>,
    e: &mut Effects,
    id: u32,
    f: PortId,
    from: u64,
    to: u64,
    rate: f64,
) -> Option<PortId> {
    e.port(id, f, from, to, Fx::PauseTx(rate));
    match c.ports.get(f).peer {
        Peer::Switch(q) => {
            e.port(id, q, from, to, Fx::PauseRx(rate));
            e.port(id, q, from, to, Fx::TxScale(0.4));
            e.port(id, q, from, to, Fx::Deep(0.7));
            e.port(id, q, from, to, Fx::Ecn(0.3));
            Some(q)
        }
        Peer::Host(_) => {
            e.port(id, f, from, to, Fx::HostScale(0.4));
            None
        }
        Peer::None => None,
    }
}

fn black_hole(c: &Ctx<'_>, e: &mut Effects, id: u32, port: PortId, at: u64) {
    let (t, ports) = (c.t, c.ports);
    let p = ports.get(port);
    e.port(id, port, at, u64::MAX, Fx::TxScale(0.0));
    let pps = c.loads.egress[port as usize] / PACKET;
    e.switch(
        id,
        p.switch,
        at,
        u64::MAX,
        SwFx::Drops {
            reason: "no_route",
            pps,
        },
    );
    if let Peer::Switch(q) = p.peer {
        let leaf = &t.switches[ports.get(q).switch];
        if let Some(net) = leaf.host_subnet_v4 {
            let key = format!(
                "P4RT_TABLE:FIXED_IPV4_TABLE:{{\"match/ipv4_dst\":\"{net}\",\"match/vrf_id\":\"default\"}}"
            );
            e.switch(
                id,
                p.switch,
                at + READBACK_MS,
                u64::MAX,
                SwFx::Drift { key },
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn storm(
    c: &Ctx<'_>,
    e: &mut Effects,
    id: u32,
    host: HostIdx,
    rate: f64,
    watchdog: bool,
    depth: u8,
    at: u64,
) {
    const END: u64 = u64::MAX;
    let ports = c.ports;
    let p = ports.of_host[host];
    e.port(id, p, at, END, Fx::PauseRx(rate));
    // Only the lossless class stops; the rest of what goes to the host flows.
    e.port(id, p, at, END, Fx::TxScale(0.05));
    e.port(id, p, at, END, Fx::Deep(0.9));
    if watchdog {
        // Stormed after the detection time: the queue's packets are dropped, it stops backing
        // up, and what spread meanwhile stops too.
        let sw = ports.get(p).switch;
        let d = at + WD_DETECT_MS;
        let pps = 0.95 * c.loads.egress[p as usize] / PACKET;
        e.switch(id, sw, d, END, SwFx::Watchdog { port: p });
        e.switch(
            id,
            sw,
            d,
            END,
            SwFx::Drops {
                reason: "pfc_watchdog",
                pps,
            },
        );
        spread(c, e, id, p, depth.min(1), at + HOP_MS, d, rate.min(2000.0));
    } else {
        spread(c, e, id, p, depth, at + HOP_MS, END, rate.min(2000.0));
    }
}

/// The blocked egress `p` backs up: its switch pauses every port that feeds it, and so on up
/// the pause graph for `depth` hops, each `HOP_MS` later.
#[allow(clippy::too_many_arguments)]
fn spread(
    c: &Ctx<'_>,
    e: &mut Effects,
    id: u32,
    p: PortId,
    depth: u8,
    from: u64,
    to: u64,
    rate: f64,
) {
    if depth == 0 || from >= to {
        return;
    }
    for f in c.ports.feeders(p) {
        if c.loads.ingress[f as usize] <= 0.0 {
            continue;
        }
        if let Some(q) = pause(c, e, id, f, from, to, rate) {
            spread(c, e, id, q, depth - 1, from + HOP_MS, to, rate / 2.0);
        }
    }
}

fn incast(
    c: &Ctx<'_>,
    e: &mut Effects,
    id: u32,
    host: HostIdx,
    senders: &[HostIdx],
    pfc: bool,
    at: u64,
) {
    const END: u64 = u64::MAX;
    let ports = c.ports;
    let p = ports.of_host[host];
    let cap = ports.get(p).cap;
    // The senders fill the port: what it did not carry yet, spread over their paths.
    let room = (cap - c.loads.egress[p as usize]).max(0.0);
    let (eg, up) = extra(
        c.t,
        ports,
        c.model,
        senders,
        host,
        room,
        c.seed ^ u64::from(id),
    );
    for (q, b) in &eg {
        e.port(id, *q, at, END, Fx::Extra(*b));
    }
    for (q, b) in up {
        e.port(id, q, at, END, Fx::ExtraRx(b));
    }
    e.port(id, p, at, END, Fx::Ecn(0.15));
    e.port(id, p, at, END, Fx::Deep(0.8));
    if pfc {
        // The leaf's queue toward the host reaches xoff: it pauses where the incast arrives.
        let leaf = ports.get(p).switch;
        for (q, _) in &eg {
            for f in ports.feeders(p) {
                if let Peer::Switch(r) = ports.get(f).peer
                    && r == *q
                    && ports.get(f).switch == leaf
                {
                    pause(c, e, id, f, at + HOP_MS, END, 300.0);
                }
            }
        }
    }
}
