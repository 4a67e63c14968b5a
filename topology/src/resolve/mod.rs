//! Intent → Topology: expand generators, overlay explicit items, apply defaults, allocate ids and
//! addresses, and check everything that makes a fabric impossible or unsafe. All problems are
//! collected; a problem that follows from another one already reported is not reported again.
//!
//! ```text
//!   size (from generator parameters)                                  size.rs
//!     → fabric defaults (speed, cable length, and the lines that set them)  origin.rs
//!     → generators, explicit overlay                                  expand.rs
//!     → switches and ports → links → hosts          switches.rs, links.rs, hosts.rs (ends.rs)
//!     → explicit fields (names, addresses, MACs, endpoints)           fields.rs, endpoints.rs
//!     → allocation (explicit values reserved first) → uniqueness      alloc.rs
//!     → P4RT transport and consumer (ZMQ endpoints)                   transport.rs
//!     → QoS (contradictions; every connected port's ECN/PFC values)   qos.rs
//!     → packet trimming (trimmable classes, size, DSCP, trimmed queue) trim.rs
//!     → reachability (partition; valley-free paths), only when nothing above failed  reach.rs
//!     → failover, telemetry                                           failover.rs, telemetry.rs
//! ```
//!
//! Each stage takes what the stages before it made and nothing from this file, which only calls
//! them in order. A link's speed goes straight through: `fabric.defaults.speed` (or the
//! built-in 100G) and a generator's `uplink_speed` are where a port's speed starts
//! ([`origin::FabricDefaults`]); an explicit port, link or host speed replaces it
//! ([`expand`]); the port gets its value ([`switches`]), the link the speed both its ports run
//! at ([`links`]), and the ECN/PFC check of every connected port takes the link's speed with
//! the line that set it ([`qos::check_ports`]).

mod alloc;
mod ctx;
mod defaults;
pub mod endpoints;
mod ends;
mod expand;
mod failover;
mod fields;
mod hosts;
mod links;
mod origin;
mod qos;
mod reach;
mod size;
mod switches;
mod telemetry;
#[cfg(test)]
mod testing;
pub mod transport;
mod trim;

use std::collections::HashMap;

use crate::model::{Defaults, Intent};
use crate::topo::*;
use crate::yaml::PathIndex;
use crate::{Diagnostic, Limits};
use ctx::{Ctx, check_name_at};
use expand::Expanded;
use origin::{FabricDefaults, Src};

pub use trim::min_trim_size;

pub use defaults::{
    DEFAULT_CABLE, DEFAULT_MTU, DEFAULT_POSTCARD_SAMPLE, DEFAULT_SPEED, MAX_WATCHED_FLOWS,
};

/// The fabric's name (`fabric` when the intent gives none).
pub(super) fn fabric_name(intent: &Intent) -> &str {
    intent.fabric.name.as_deref().unwrap_or("fabric")
}

/// Resolves a deserialised intent. `idx` locates paths in the original text for messages.
pub fn resolve(
    intent: &Intent,
    file: &str,
    idx: &PathIndex,
    limits: &Limits,
) -> Result<Topology, Vec<Diagnostic>> {
    let mut cx = Ctx::new(file, idx);
    if let Some(n) = &intent.fabric.name {
        check_name_at(&mut cx, "fabric.name", "fabric", n);
    }
    if !size::check_size(&mut cx, intent, limits) {
        return Err(cx.finish());
    }
    let fabric = FabricDefaults::of(&intent.fabric.defaults);
    let before = cx.shape_errors();
    let drafts = expand::expand(&mut cx, intent, &fabric);
    if drafts.switches.is_empty() && cx.errors() == 0 {
        no_switches(&mut cx);
        return Err(cx.finish());
    }
    let mut built = Built::new(&mut cx, intent, &drafts, &fabric);
    // Problems with switches, links or hosts themselves: reachability is judged only without
    // them, as a switch or link left out would make it fail for no new reason.
    let structural_errors = cx.shape_errors().saturating_sub(before);
    let mtu = mtu(&mut cx, &intent.fabric.defaults);
    fields::check_explicit_fields(
        &mut cx,
        intent,
        &drafts.switches,
        &built.switches,
        &built.hosts,
    );
    fields::check_socket_dir(
        &mut cx,
        fabric_name(intent),
        &intent.fabric.defaults,
        &built.switches,
    );
    let pools = alloc::allocate(
        &mut cx,
        intent,
        &drafts.switches,
        &mut built.switches,
        &mut built.hosts,
    );
    transport::resolve_transport(
        &mut cx,
        &intent.fabric.defaults,
        &drafts.switches,
        &mut built.switches,
    );
    let mut qos = qos::resolve_qos(&mut cx, intent);
    let ipv6 = built.hosts.iter().any(|h| h.ipv6.is_some());
    qos.trim = trim::resolve_trim(&mut cx, intent, &mut qos.classes, mtu, ipv6);
    qos::check_ports(&mut cx, &qos, intent, &built.ports(), mtu);
    if structural_errors == 0 {
        reach::check(
            &mut cx,
            &drafts.switches,
            &built.switches,
            &built.links,
            &built.hosts,
        );
    }
    let failover = failover::resolve_failover(&mut cx, &intent.failover);
    let telemetry = intent
        .telemetry
        .as_ref()
        .map(|t| telemetry::resolve_telemetry(&mut cx, t, &built.hosts, &built.host_by_name));
    if !cx.is_empty() {
        return Err(cx.finish());
    }
    Ok(Topology {
        name: fabric_name(intent).to_string(),
        file: file.to_string(),
        mtu,
        switches: built.switches,
        hosts: built.hosts,
        links: built.links,
        qos,
        routing: Routing {
            aggregate: intent.routing.aggregate.unwrap_or(true),
        },
        failover,
        telemetry,
        pools,
        switch_by_name: built.switch_by_name,
        host_by_name: built.host_by_name,
    })
}

fn no_switches(cx: &mut Ctx) {
    let at = if cx.written("switches") {
        "switches"
    } else {
        ""
    };
    cx.err_help(
        at,
        "intent",
        "the intent describes no switches",
        "add `switches:` and `links:`, or a generator under `generators:`",
    );
}

fn mtu(cx: &mut Ctx, d: &Defaults) -> u32 {
    let mtu = d.mtu.unwrap_or(DEFAULT_MTU);
    if !(1280..=9216).contains(&mtu) {
        cx.err(
            "fabric.defaults.mtu",
            "fabric.defaults.mtu",
            format!("MTU {mtu} is outside 1280..=9216 bytes"),
        );
    }
    mtu
}

/// The switches with their ports, the links and the hosts, each link and host with where its
/// speed and cable length were set.
struct Built {
    switches: Vec<Switch>,
    switch_by_name: HashMap<String, SwitchIdx>,
    links: Vec<Link>,
    link_src: Vec<(Src, Src)>,
    hosts: Vec<Host>,
    host_by_name: HashMap<String, HostIdx>,
    host_src: Vec<(Src, Src)>,
}

impl Built {
    fn new(cx: &mut Ctx, intent: &Intent, x: &Expanded, fabric: &FabricDefaults) -> Self {
        let (mut switches, switch_by_name) =
            switches::build_switches(cx, &x.switches, &x.port_origins, fabric);
        let (links, link_src) = links::build_links(
            cx,
            &mut switches,
            &switch_by_name,
            &x.links,
            &x.link_src,
            &x.port_origins,
        );
        let (hosts, host_by_name, host_src) = hosts::attach_hosts(
            cx,
            &mut switches,
            &switch_by_name,
            &x.hosts,
            &x.host_src,
            &x.port_origins,
            intent.fabric.defaults.ooo_tolerant.unwrap_or(false),
        );
        Built {
            switches,
            switch_by_name,
            links,
            link_src,
            hosts,
            host_by_name,
            host_src,
        }
    }

    fn ports(&self) -> qos::Connected<'_> {
        qos::Connected {
            switches: &self.switches,
            links: &self.links,
            link_src: &self.link_src,
            hosts: &self.hosts,
            host_src: &self.host_src,
        }
    }
}
