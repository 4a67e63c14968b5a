//! QoS: traffic classes, routing policy per class, ECN and PFC. Two kinds of check:
//!
//! - contradictions in what is written (a lossless class with PFC off, one queue both lossless
//!   and lossy, xon above xoff, a flowlet gap of 0, ...), reported where they are written;
//! - the values every connected port would get ([`crate::qos::PortQos::problem`]): each port's
//!   own speed and cable length (its link's, or its host's) with the MTU, buffer and thresholds.
//!   A problem found in a derived value (headroom, pause threshold) is reported at the line
//!   that set the input responsible, naming the port.

use std::collections::{HashMap, HashSet};

use super::ctx::{Ctx, check_name_at};
use super::defaults::{
    DEFAULT_CABLE, DEFAULT_FLOWLET_GAP, DEFAULT_HOST_CABLE, DEFAULT_MTU, DEFAULT_SPEED,
    default_classes,
};
use super::origin::Src;
use crate::diag::suggest;
use crate::model::*;
use crate::names::display_name;
use crate::qos::{PortQos, QosInputs, QosProblem, port_qos};
use crate::topo::*;
use crate::units::{Bytes, Duration, Length, Speed};

fn class_path(q: &QosSpec, i: usize) -> String {
    if q.classes.is_some() {
        format!("qos.classes[{i}]")
    } else {
        "qos".into()
    }
}

pub(super) fn resolve_qos(cx: &mut Ctx, intent: &Intent) -> Qos {
    let q = &intent.qos;
    let specs = q.classes.clone().unwrap_or_else(default_classes);
    let classes = resolve_classes(cx, intent, &specs);
    let class_names: Vec<&str> = specs.iter().map(|c| c.name.as_str()).collect();
    check_routing_classes(cx, intent, &class_names);
    check_flowlet_gaps(cx, intent);
    check_shared_queues(cx, q, intent, &classes);
    let pfc_enabled = q.pfc.enabled.unwrap_or(true);
    check_lossless_needs_pfc(cx, q, &classes, pfc_enabled);
    let global = EcnOverride {
        kmin: q.ecn.kmin,
        kmax: q.ecn.kmax,
        pmax: q.ecn.pmax,
    };
    check_ecn(cx, "qos.ecn", &global);
    for (i, c) in classes.iter().enumerate() {
        check_ecn(cx, &format!("{}.ecn", class_path(q, i)), &c.ecn);
    }
    let watchdog = watchdog(cx, &q.pfc.watchdog);
    check_pfc_sizes(cx, &q.pfc);
    Qos {
        classes,
        ecn: global,
        tuning: q.ecn.tuning.unwrap_or_default(),
        pfc_enabled,
        xoff: q.pfc.xoff,
        xon: q.pfc.xon,
        port_buffer: q.pfc.port_buffer,
        watchdog,
        trim: None,
    }
}

/// The traffic classes as written (or the defaults): names, queues, DSCP values, each class's
/// routing policy. The class with `dscp: default` takes every DSCP value no other class takes.
fn resolve_classes(cx: &mut Ctx, intent: &Intent, specs: &[TrafficClassSpec]) -> Vec<TrafficClass> {
    let q = &intent.qos;
    let path = |i: usize| class_path(q, i);
    // SONiC profile names carry class names in capitals, so `roce` and `RoCE` would collide.
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut dscp_owner: HashMap<u8, String> = HashMap::new();
    let mut default_class: Option<usize> = None;
    let mut classes = Vec::new();
    for (i, c) in specs.iter().enumerate() {
        let item = format!("class {}", display_name(&c.name));
        if q.classes.is_some() {
            check_name_at(cx, &format!("{}.name", path(i)), "traffic class", &c.name);
        }
        match names.get(&c.name.to_ascii_lowercase()) {
            Some(&j) => cx.err(
                &format!("{}.name", path(i)),
                &item,
                format!(
                    "duplicate traffic class name (class {} is the same name: class names are compared without case, as SONiC profiles carry them in capitals)",
                    specs[j].name
                ),
            ),
            None => {
                names.insert(c.name.to_ascii_lowercase(), i);
            }
        }
        if c.traffic_class > 7 {
            cx.err(
                &format!("{}.traffic_class", path(i)),
                &item,
                format!("traffic class {} is outside 0..=7", c.traffic_class),
            );
        }
        let (dscp, is_default) = match &c.dscp {
            DscpSet::Values(v) => {
                check_dscp(
                    cx,
                    &format!("{}.dscp", path(i)),
                    &item,
                    c,
                    v,
                    &mut dscp_owner,
                );
                (v.clone(), false)
            }
            DscpSet::Keyword(DscpKeyword::Default) => {
                if default_class.replace(i).is_some() {
                    cx.err(
                        &format!("{}.dscp", path(i)),
                        &item,
                        "only one class can take `dscp: default`",
                    );
                }
                (Vec::new(), true)
            }
        };
        classes.push(traffic_class(intent, c, dscp, is_default));
    }
    if let Some(di) = default_class {
        let rest: Vec<u8> = (0..64).filter(|x| !dscp_owner.contains_key(x)).collect();
        classes[di].dscp = rest;
    }
    classes
}

/// A class's DSCP values: in range, listed once, taken by no other class.
fn check_dscp(
    cx: &mut Ctx,
    at: &str,
    item: &str,
    c: &TrafficClassSpec,
    values: &[u8],
    owner: &mut HashMap<u8, String>,
) {
    let mut own = HashSet::new();
    for &x in values {
        if x > 63 {
            cx.err(at, item, format!("DSCP {x} is outside 0..=63"));
        } else if !own.insert(x) {
            cx.err(at, item, format!("DSCP {x} is listed twice"));
        } else if let Some(o) = owner.insert(x, c.name.clone()) {
            cx.err(at, item, format!("DSCP {x} is already taken by class {o}"));
        }
    }
}

fn traffic_class(
    intent: &Intent,
    c: &TrafficClassSpec,
    dscp: Vec<u8>,
    is_default: bool,
) -> TrafficClass {
    let policy = intent
        .routing
        .classes
        .get(&c.name)
        .unwrap_or(&intent.routing.default);
    let ecn = c
        .ecn
        .as_ref()
        .map_or_else(EcnOverride::default, |e| EcnOverride {
            kmin: e.kmin,
            kmax: e.kmax,
            pmax: e.pmax,
        });
    TrafficClass {
        name: c.name.clone(),
        dscp,
        is_default,
        traffic_class: c.traffic_class,
        lossless: c.lossless.unwrap_or(false),
        ecn,
        routing: policy
            .mode
            .or(intent.routing.default.mode)
            .unwrap_or_default(),
        flowlet_gap: policy
            .flowlet_gap
            .or(intent.routing.default.flowlet_gap)
            .unwrap_or(DEFAULT_FLOWLET_GAP),
        trimmable: false,
    }
}

fn check_routing_classes(cx: &mut Ctx, intent: &Intent, class_names: &[&str]) {
    for name in intent.routing.classes.keys() {
        if !class_names.contains(&name.as_str()) {
            let msg = format!(
                "routing policy for unknown traffic class `{}`",
                display_name(name)
            );
            let p = format!("routing.classes.{name}");
            match suggest(name, class_names.iter().copied()) {
                Some(s) => cx.err_help(&p, &p, msg, format!("did you mean `{s}`?")),
                None => cx.err_help(
                    &p,
                    &p,
                    msg,
                    format!("classes are: {}", class_names.join(", ")),
                ),
            }
        }
    }
}

fn check_lossless_needs_pfc(cx: &mut Ctx, q: &QosSpec, classes: &[TrafficClass], pfc: bool) {
    let lossless: Vec<&str> = classes
        .iter()
        .filter(|c| c.lossless)
        .map(|c| c.name.as_str())
        .collect();
    if !pfc && !lossless.is_empty() {
        let which = if q.classes.is_some() {
            "class"
        } else {
            "default class"
        };
        cx.err_help(
            "qos.pfc.enabled",
            "qos.pfc.enabled",
            format!(
                "PFC is off, but {which} {} is lossless: only PFC keeps a class lossless",
                lossless.join(", ")
            ),
            "enable PFC, or mark the class `lossless: false` under qos.classes",
        );
    }
}

fn check_ecn(cx: &mut Ctx, p: &str, e: &EcnOverride) {
    if let Some(pm) = e.pmax
        && !(pm > 0.0 && pm <= 1.0)
    {
        cx.err(
            &format!("{p}.pmax"),
            format!("{p}.pmax"),
            format!("pmax {pm} must be in (0, 1]"),
        );
    }
    if let (Some(a), Some(b)) = (e.kmin, e.kmax)
        && a >= b
    {
        cx.err_help(
            &format!("{p}.kmin"),
            p.to_string(),
            format!("kmin {a} must be below kmax {b}"),
            "marking probability rises from kmin to kmax",
        );
    }
}

/// The PFC watchdog, within SONiC's ranges.
fn watchdog(cx: &mut Ctx, wd: &PfcWatchdogSpec) -> Watchdog {
    let watchdog = Watchdog {
        enabled: wd.enabled.unwrap_or(true),
        detection_time: wd.detection_time.unwrap_or(Duration::millis(200)),
        restoration_time: wd.restoration_time.unwrap_or(Duration::millis(400)),
        action: wd.action.unwrap_or_default(),
        poll_interval: wd.poll_interval.unwrap_or(Duration::millis(100)),
    };
    let range = |cx: &mut Ctx, f: &str, v: Duration, lo: u64, hi: u64| {
        if v.as_millis() < lo || v.as_millis() > hi || !v.as_nanos().is_multiple_of(1_000_000) {
            cx.err(&format!("qos.pfc.watchdog.{f}"), format!("qos.pfc.watchdog.{f}"), format!("{f} {v} must be whole milliseconds in {lo}ms..={hi}ms (SONiC's PFC watchdog range)"));
        }
    };
    range(cx, "detection_time", watchdog.detection_time, 100, 5000);
    range(
        cx,
        "restoration_time",
        watchdog.restoration_time,
        100,
        60000,
    );
    range(cx, "poll_interval", watchdog.poll_interval, 10, 1000);
    watchdog
}

fn check_pfc_sizes(cx: &mut Ctx, pfc: &PfcSpec) {
    for (f, v) in [
        ("xoff", pfc.xoff),
        ("xon", pfc.xon),
        ("port_buffer", pfc.port_buffer),
    ] {
        if v == Some(Bytes(0)) {
            cx.err(
                &format!("qos.pfc.{f}"),
                format!("qos.pfc.{f}"),
                format!("{f} must be positive"),
            );
        }
    }
    if let (Some(xoff), Some(xon)) = (pfc.xoff, pfc.xon)
        && xon > xoff
    {
        cx.err_help(
            "qos.pfc.xon",
            "qos.pfc.xon",
            format!("xon {xon} is above xoff {xoff}"),
            "a port resumes its peer (xon) below the level at which it paused it (xoff)",
        );
    }
}

/// A flowlet gap is a whole number of microseconds (the pipeline's unit), at least one: a gap
/// of 0 would move every packet, and the pipeline keeps 32 bits of it.
fn check_flowlet_gaps(cx: &mut Ctx, intent: &Intent) {
    let policies = std::iter::once(("routing.default".to_string(), &intent.routing.default)).chain(
        intent
            .routing
            .classes
            .iter()
            .map(|(k, v)| (format!("routing.classes.{k}"), v)),
    );
    for (p, pol) in policies {
        let Some(g) = pol.flowlet_gap else { continue };
        let at = format!("{p}.flowlet_gap");
        if g.as_nanos() < 1_000 || !g.as_nanos().is_multiple_of(1_000) {
            cx.err_help(
                &at,
                &at,
                format!("flowlet gap {g} is not a whole number of microseconds of at least 1us"),
                "typical gaps are 50us..500us, a few round-trip times",
            );
        } else if g.as_micros() > u64::from(u32::MAX) {
            cx.err(
                &at,
                &at,
                format!(
                    "flowlet gap {g} is longer than the pipeline can count ({}us)",
                    u32::MAX
                ),
            );
        }
    }
}

/// Classes that share a traffic class share one queue and one priority group: they must agree
/// on everything the queue has once (lossless or not, its marking profile, its multipath mode).
fn check_shared_queues(cx: &mut Ctx, q: &QosSpec, intent: &Intent, classes: &[TrafficClass]) {
    let mut first: HashMap<u8, usize> = HashMap::new();
    for (i, c) in classes.iter().enumerate() {
        let Some(&j) = first.get(&c.traffic_class) else {
            first.insert(c.traffic_class, i);
            continue;
        };
        let o = &classes[j];
        let p = class_path(q, i);
        let item = format!("class {}", display_name(&c.name));
        let tc = c.traffic_class;
        if c.lossless != o.lossless {
            let at = if cx.written(&format!("{p}.lossless")) {
                format!("{p}.lossless")
            } else {
                format!("{p}.traffic_class")
            };
            let (this, that) = if c.lossless {
                ("lossless", "lossy")
            } else {
                ("lossy", "lossless")
            };
            cx.err_help(
                &at,
                &item,
                format!("class {} makes traffic class {tc} {this}, but class {} makes it {that}: one queue cannot be both", c.name, o.name),
                "give the lossless class its own traffic_class",
            );
        } else if c.lossless {
            cx.err(
                &p,
                &item,
                format!("two lossless classes share traffic class {tc}"),
            );
        } else if (c.ecn.kmin, c.ecn.kmax) != (o.ecn.kmin, o.ecn.kmax)
            || c.ecn.pmax.map(f64::to_bits) != o.ecn.pmax.map(f64::to_bits)
        {
            cx.err_help(
                &format!("{p}.ecn"),
                &item,
                format!("classes {} and {} share traffic class {tc} but set different ECN thresholds: a queue has one marking profile", o.name, c.name),
                "give them the same `ecn`, or separate traffic classes",
            );
        }
        if (c.routing, c.flowlet_gap) != (o.routing, o.flowlet_gap) {
            let at = if intent.routing.classes.contains_key(&c.name) {
                format!("routing.classes.{}", c.name)
            } else {
                format!("routing.classes.{}", o.name)
            };
            cx.err_help(
                &at,
                &item,
                format!(
                    "classes {} and {} share traffic class {tc} but are routed differently ({} and {}): the pipeline picks the multipath mode by traffic class",
                    o.name, c.name, o.routing, c.routing
                ),
                "give them the same routing policy, or separate traffic classes",
            );
        }
    }
}

/// An input of a port's ECN/PFC values that a problem may be blamed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Cable,
    Speed,
    Mtu,
    Buffer,
    Xoff,
    Xon,
    Kmin,
    Kmax,
}

/// Which inputs could explain each problem, most likely first.
fn suspects(p: QosProblem) -> &'static [Input] {
    use Input::*;
    match p {
        QosProblem::KminNotBelowKmax => &[Kmin, Kmax, Speed],
        QosProblem::XonAboveXoff => &[Xon, Xoff, Cable, Mtu, Speed],
        QosProblem::HeadroomFillsBuffer => &[Cable, Buffer, Xoff, Xon, Mtu, Speed],
        QosProblem::EcnNotBeforePfc => &[Kmax, Cable, Buffer, Xoff, Xon, Mtu, Speed],
        QosProblem::KmaxAboveBuffer => &[Kmax, Buffer, Speed],
    }
}

/// One connected port as the checks see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Case {
    speed: Speed,
    speed_src: Src,
    cable: Length,
    cable_src: Src,
    /// Faces a host (whose default cable is shorter).
    host: bool,
}

struct Blamer<'a> {
    qos: &'a Qos,
    q: &'a QosSpec,
    mtu: u32,
    mtu_written: bool,
}

impl Blamer<'_> {
    /// Where `input` was written for this case and class, if it was.
    fn path(&self, input: Input, case: &Case, ci: usize) -> Option<String> {
        let c = &self.qos.classes[ci];
        let ecn = |class_set: bool, field: &str, global_set: bool| {
            if class_set {
                Some(format!("{}.ecn.{field}", class_path(self.q, ci)))
            } else if global_set {
                Some(format!("qos.ecn.{field}"))
            } else {
                None
            }
        };
        match input {
            Input::Cable => case.cable_src.path(),
            Input::Speed => case.speed_src.path(),
            Input::Mtu => self.mtu_written.then(|| "fabric.defaults.mtu".into()),
            Input::Buffer => self.qos.port_buffer.map(|_| "qos.pfc.port_buffer".into()),
            Input::Xoff => self.qos.xoff.map(|_| "qos.pfc.xoff".into()),
            Input::Xon => self.qos.xon.map(|_| "qos.pfc.xon".into()),
            Input::Kmin => ecn(c.ecn.kmin.is_some(), "kmin", self.qos.ecn.kmin.is_some()),
            Input::Kmax => ecn(c.ecn.kmax.is_some(), "kmax", self.qos.ecn.kmax.is_some()),
        }
    }

    fn inputs(&self, case: &Case, ci: usize) -> QosInputs {
        self.qos
            .inputs(case.speed, case.cable, self.mtu, &self.qos.classes[ci])
    }

    /// The inputs with `input` as if nobody had written it.
    fn reset(&self, mut i: QosInputs, input: Input, case: &Case, ci: usize) -> QosInputs {
        let c = &self.qos.classes[ci];
        match input {
            Input::Cable => {
                i.cable = if case.host {
                    DEFAULT_HOST_CABLE
                } else {
                    DEFAULT_CABLE
                }
            }
            Input::Speed => i.speed = DEFAULT_SPEED,
            Input::Mtu => i.mtu = DEFAULT_MTU,
            Input::Buffer => i.port_buffer = None,
            Input::Xoff => i.xoff = None,
            Input::Xon => i.xon = None,
            // A class's own value falls back to the fabric's, the fabric's to the derived one.
            Input::Kmin => i.kmin = c.ecn.kmin.and(self.qos.ecn.kmin),
            Input::Kmax => i.kmax = c.ecn.kmax.and(self.qos.ecn.kmax),
        }
        i
    }

    /// The problem of this case and class, and the line to blame (None: nobody wrote any of
    /// the inputs responsible).
    fn judge(&self, case: &Case, ci: usize) -> Option<(QosProblem, Option<String>)> {
        let lossless = self.qos.pfc_protects(&self.qos.classes[ci]);
        let base = self.inputs(case, ci);
        let problem = port_qos(&base).problem(lossless)?;
        if self.reported_as_written(problem, ci) {
            return None;
        }
        let written: Vec<(Input, String)> = suspects(problem)
            .iter()
            .filter_map(|&inp| Some((inp, self.path(inp, case, ci)?)))
            .collect();
        let fixes = written.iter().find(|(inp, _)| {
            port_qos(&self.reset(base, *inp, case, ci))
                .problem(lossless)
                .is_none()
        });
        let blame = fixes.or(written.first()).map(|(_, p)| p.clone());
        Some((problem, blame))
    }

    /// Contradictions between two written values are reported where they are written.
    fn reported_as_written(&self, p: QosProblem, ci: usize) -> bool {
        let c = &self.qos.classes[ci];
        match p {
            QosProblem::KminNotBelowKmax => {
                (c.ecn.kmin.is_some() && c.ecn.kmax.is_some())
                    || (c.ecn.kmin.is_none()
                        && c.ecn.kmax.is_none()
                        && self.qos.ecn.kmin.is_some()
                        && self.qos.ecn.kmax.is_some())
            }
            QosProblem::XonAboveXoff => self.qos.xon.is_some() && self.qos.xoff.is_some(),
            _ => false,
        }
    }
}

/// The connected ports: each switch's ports with their peers, and where each link's and host's
/// speed and cable length were set.
pub(super) struct Connected<'a> {
    pub(super) switches: &'a [Switch],
    pub(super) links: &'a [Link],
    pub(super) link_src: &'a [(Src, Src)],
    pub(super) hosts: &'a [Host],
    pub(super) host_src: &'a [(Src, Src)],
}

impl Connected<'_> {
    /// The case of port `p` (its peer's speed and cable, and their sources), and the item that
    /// connects it; `None` for an unconnected port.
    fn case(&self, p: &Port) -> Option<(Case, &String)> {
        Some(match p.peer {
            Peer::None => return None,
            Peer::Switch { link } => {
                let l = &self.links[link];
                let (ss, cs) = self.link_src[link];
                (
                    Case {
                        speed: l.speed,
                        speed_src: ss,
                        cable: l.cable_length,
                        cable_src: cs,
                        host: false,
                    },
                    &l.origin,
                )
            }
            Peer::Host { host } => {
                let h = &self.hosts[host];
                let (ss, cs) = self.host_src[host];
                (
                    Case {
                        speed: h.speed,
                        speed_src: ss,
                        cable: h.cable_length,
                        cable_src: cs,
                        host: true,
                    },
                    &h.origin,
                )
            }
        })
    }
}

/// One report per line to blame: its first problem (in the order of `QosProblem`, then of the
/// classes), the first port with it, and how many ports it affects.
struct Found {
    problem: QosProblem,
    class: usize,
    port: String,
    case: Case,
    ports: HashSet<(usize, usize)>,
}

/// Every connected port's ECN/PFC values, from its link's or host's speed and cable length;
/// a problem is reported at the line to blame, once, with the number of ports it affects.
pub(super) fn check_ports(cx: &mut Ctx, qos: &Qos, intent: &Intent, ports: &Connected, mtu: u32) {
    let b = Blamer {
        qos,
        q: &intent.qos,
        mtu,
        mtu_written: intent.fabric.defaults.mtu.is_some(),
    };
    for (at, f) in find(&b, ports) {
        let (problem, ci, port, case) = (f.problem, f.class, f.port, f.case);
        let more = match f.ports.len() {
            0 | 1 => String::new(),
            n => format!(", and {} more ports", n - 1),
        };
        let on = format!("{}, {} cable{more}", case.speed, length(case.cable));
        let pq = port_qos(&b.inputs(&case, ci));
        let (msg, help) = message(problem, &qos.classes[ci], &pq, &on);
        cx.err_help(&at, format!("port {port}"), msg, help);
    }
}

/// The problems of every connected port, by the line to blame.
fn find(b: &Blamer, ports: &Connected) -> std::collections::BTreeMap<String, Found> {
    type Verdict = Option<(QosProblem, Option<String>)>;
    let mut verdicts: HashMap<Case, Vec<Verdict>> = HashMap::new();
    let mut last: Option<(Case, Vec<Verdict>)> = None;
    let mut found: std::collections::BTreeMap<String, Found> = std::collections::BTreeMap::new();
    for (si, s) in ports.switches.iter().enumerate() {
        for (pi, p) in s.ports.iter().enumerate() {
            let Some((case, origin)) = ports.case(p) else {
                continue;
            };
            // Neighbouring ports are usually alike: skip the map for a repeat.
            if last.as_ref().is_none_or(|(c, _)| *c != case) {
                let v = verdicts
                    .entry(case)
                    .or_insert_with(|| {
                        (0..b.qos.classes.len())
                            .map(|ci| b.judge(&case, ci))
                            .collect()
                    })
                    .clone();
                last = Some((case, v));
            }
            let Some((_, v)) = &last else { continue };
            for (ci, v) in v.iter().enumerate() {
                let Some((problem, blame)) = v else { continue };
                let at = blame.clone().unwrap_or_else(|| origin.clone());
                let f = found.entry(at).or_insert_with(|| Found {
                    problem: *problem,
                    class: ci,
                    port: format!("{}:{}", s.name, p.name),
                    case,
                    ports: HashSet::new(),
                });
                if (*problem, ci) < (f.problem, f.class) {
                    (f.problem, f.class, f.case) = (*problem, ci, case);
                    f.port = format!("{}:{}", s.name, p.name);
                }
                f.ports.insert((si, pi));
            }
        }
    }
    found
}

/// The message and help for `problem` of class `c` on a port with values `pq`; `on` says the
/// port's speed and cable (and how many more ports share the problem).
fn message(problem: QosProblem, c: &TrafficClass, pq: &PortQos, on: &str) -> (String, String) {
    match problem {
        QosProblem::HeadroomFillsBuffer => (
            format!(
                "({on}): the PFC headroom of lossless class {} is {} (xoff {} + xon {}), as much as the port buffer of {}: the port would pause its peer before any queue builds",
                c.name,
                pq.headroom.size.human(),
                pq.headroom.xoff.human(),
                pq.headroom.xon.human(),
                pq.port_buffer.human()
            ),
            format!(
                "the headroom absorbs what is in flight on the cable after a pause: shorten the cable, or raise qos.pfc.port_buffer above {}",
                Bytes(pq.headroom.size.0.saturating_add(pq.ecn.kmax.0)).human()
            ),
        ),
        QosProblem::EcnNotBeforePfc => (
            format!(
                "({on}): ECN kmax {} of class {} is above the PFC pause threshold {} (buffer {} − headroom {}): ECN must act before PFC",
                pq.ecn.kmax.human(),
                c.name,
                pq.pause_threshold.human(),
                pq.port_buffer.human(),
                pq.headroom.size.human()
            ),
            "lower kmin/kmax or raise qos.pfc.port_buffer".to_string(),
        ),
        QosProblem::KminNotBelowKmax => (
            format!(
                "({on}): kmin {} must be below kmax {} for class {}",
                pq.ecn.kmin, pq.ecn.kmax, c.name
            ),
            "marking probability rises from kmin to kmax; set both, or neither (the defaults scale with speed)".to_string(),
        ),
        QosProblem::XonAboveXoff => (
            format!(
                "({on}): xon {} is above xoff {} for lossless class {}",
                pq.headroom.xon, pq.headroom.xoff, c.name
            ),
            "a port resumes its peer (xon) below the level at which it paused it (xoff); set both, or neither".to_string(),
        ),
        QosProblem::KmaxAboveBuffer => (
            format!(
                "({on}): ECN kmax {} of class {} is above the port buffer {}: the queue never gets that long, so marking never becomes certain",
                pq.ecn.kmax.human(),
                c.name,
                pq.port_buffer.human()
            ),
            "lower kmax below the buffer, or raise qos.pfc.port_buffer".to_string(),
        ),
    }
}

/// A cable length for messages: kilometres when long.
fn length(l: Length) -> String {
    if l.0 >= 1_000_000 {
        format!("{}km", l.0 as f64 / 1e6)
    } else {
        l.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors, first_help, valid};

    #[test]
    fn long_cables_are_blamed_on_the_line_that_set_the_cable_naming_the_port_and_its_speed() {
        let yaml = SMALL.replace("spine1:Ethernet0}", "spine1:Ethernet0, cable_length: 20km}");
        let e = errors(&yaml);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("12: (100G, 20km cable, and 1 more ports): the PFC headroom of lossless class roce is "),
            "{e:?}"
        );
        assert!(
            first_help(&yaml)
                .unwrap_or_default()
                .starts_with("the headroom absorbs what is in flight on the cable after a pause"),
        );
    }

    #[test]
    fn a_cable_length_never_written_is_blamed_on_the_item_that_connects_the_port() {
        let yaml = format!("qos:\n  pfc:\n    port_buffer: 10KB\n{SMALL}");
        let e = errors(&yaml);
        assert!(!e.is_empty());
        assert!(
            e.iter().all(|e| e.starts_with("3: (100G, 5m cable, and ")),
            "{e:?}"
        );
    }

    #[test]
    fn the_default_class_takes_every_dscp_value_no_other_class_takes() {
        let t = valid(SMALL);
        let default = t
            .qos
            .classes
            .iter()
            .find(|c| c.is_default)
            .expect("default");
        assert_eq!(default.dscp.len(), 62);
        assert!(!default.dscp.contains(&26) && !default.dscp.contains(&48));
    }

    #[test]
    fn written_classes_are_checked_for_names_queues_and_dscp() {
        let e = errors(&format!(
            "qos:\n  classes:\n    - {{name: roce, dscp: [26, 26, 64], traffic_class: 8, lossless: true}}\n    - {{name: RoCE, dscp: [26], traffic_class: 1}}\n    - {{name: rest, dscp: default, traffic_class: 0}}\n{SMALL}"
        ));
        assert_eq!(
            e,
            vec![
                "3: DSCP 26 is listed twice",
                "3: DSCP 64 is outside 0..=63",
                "3: traffic class 8 is outside 0..=7",
                "4: duplicate traffic class name (class roce is the same name: class names are compared without case, as SONiC profiles carry them in capitals)",
                "4: DSCP 26 is already taken by class roce",
            ]
        );
    }

    #[test]
    fn watchdog_times_and_pfc_thresholds_are_checked_in_range() {
        let e = errors(&format!(
            "qos:\n  pfc:\n    xoff: 100KB\n    xon: 200KB\n    watchdog:\n      detection_time: 50ms\n{SMALL}"
        ));
        assert_eq!(
            e,
            vec![
                "4: xon 200KB is above xoff 100KB",
                "6: detection_time 50ms must be whole milliseconds in 100ms..=5000ms (SONiC's PFC watchdog range)",
            ]
        );
    }
}
