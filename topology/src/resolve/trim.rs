//! Packet trimming: which classes are trimmable and what a trimmed packet becomes. A class with
//! `trim:` is lossy, and a packet of it that meets a congested queue is cut to `size` bytes,
//! re-marked to `dscp` and sent on in the trimmed queue, so its receiver asks for exactly that
//! packet again (Ultra Ethernet's trimming; SONiC's `SWITCH_TRIMMING|GLOBAL` and the buffer
//! profile's `packet_discard_action: trim`).
//!
//! Refused, each at the line that wrote it: a class both lossless and trimmable (trimming is the
//! lossy alternative to PFC); trimmable classes that disagree on the setting (it is
//! switch-wide); a size below the headers the receiver needs ([`min_trim_size`]) or above the
//! MTU; a DSCP out of range or named by another class; a trimmed queue that a class uses (a
//! lossless one would pause trimmed packets, a trimmable one would trim them again, any other
//! would share their strict priority) or, when none is written, no free queue; a queue shared
//! by a trimmable and a non-trimmable class (trimming is per queue).

use super::ctx::Ctx;
use crate::model::{Intent, TrimSpec};
use crate::names::display_name;
use crate::topo::{TrafficClass, Trimming};
use crate::units::Bytes;

const ETHERNET: u64 = 14;
const IPV4: u64 = 20;
const IPV6: u64 = 40;
const UDP: u64 = 8;
const BTH: u64 = 12;
const RETH: u64 = 16;

/// The smallest trim size Weft accepts: Ethernet + IP + UDP + BTH + RETH. The BTH carries what
/// a NACK names (destination QP, PSN); the RETH (on every packet of weft-traffic, on the first
/// packet of an RDMA WRITE) tells the receiver where the lost payload belongs. IPv6 when any
/// host of the fabric has an IPv6 address.
pub fn min_trim_size(ipv6: bool) -> u64 {
    ETHERNET + if ipv6 { IPV6 } else { IPV4 } + UDP + BTH + RETH
}

fn spec_path(intent: &Intent, i: usize) -> String {
    if intent.qos.classes.is_some() {
        format!("qos.classes[{i}].trim")
    } else {
        "qos".into()
    }
}

/// Resolves trimming: marks the trimmable classes, takes the trimmed DSCP from a `dscp:
/// default` class, and returns the switch-wide setting (None: no class trims).
pub(super) fn resolve_trim(
    cx: &mut Ctx,
    intent: &Intent,
    classes: &mut [TrafficClass],
    mtu: u32,
    ipv6: bool,
) -> Option<Trimming> {
    let specs = intent.qos.classes.as_deref().unwrap_or_default();
    let written: Vec<(usize, &TrimSpec)> = specs
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some((i, c.trim.as_ref()?)))
        .collect();
    let (first_i, first) = *written.first()?;
    for &(i, t) in &written {
        let c = &classes[i];
        let at = spec_path(intent, i);
        let item = format!("class {}", display_name(&c.name));
        if c.lossless {
            cx.err_help(
                &at,
                &item,
                format!(
                    "class {} is lossless (PFC) and trimmable: trimming is the lossy alternative to PFC, a class is one or the other",
                    c.name
                ),
                "drop `lossless: true` (its receivers ask for trimmed packets again), or drop `trim`",
            );
        }
        if i != first_i && t != first {
            cx.err_help(
                &at,
                &item,
                format!(
                    "class {} trims to {} with DSCP {}, class {} to {} with DSCP {}: trimming is switch-wide (SONiC's SWITCH_TRIMMING|GLOBAL), one setting for the fabric",
                    c.name, t.size, t.dscp, classes[first_i].name, first.size, first.dscp
                ),
                "give every trimmable class the same `trim`",
            );
        }
        classes[i].trimmable = true;
    }
    let at = spec_path(intent, first_i);
    check_size(cx, &at, first.size, mtu, ipv6);
    let dscp_ok = check_dscp(cx, intent, &at, first.dscp, classes);
    let tc = trimmed_queue(cx, &at, first.traffic_class, classes);
    check_queues_agree(cx, intent, classes);
    if dscp_ok {
        for c in classes.iter_mut().filter(|c| c.is_default) {
            c.dscp.retain(|d| *d != first.dscp);
        }
    }
    Some(Trimming {
        size: first.size,
        dscp: first.dscp,
        traffic_class: tc.unwrap_or(0),
    })
}

fn check_size(cx: &mut Ctx, at: &str, size: Bytes, mtu: u32, ipv6: bool) {
    let min = min_trim_size(ipv6);
    let ip = if ipv6 { "IPv6 40" } else { "IPv4 20" };
    if size.0 < min {
        cx.err_help(
            &format!("{at}.size"),
            format!("{at}.size"),
            format!(
                "trim size {size} is smaller than the {min} bytes a receiver needs to ask for the packet again (Ethernet 14 + {ip} + UDP 8 + BTH 12 + RETH 16)"
            ),
            format!("use at least {min}B; 128B (SAI's default) or 256B leave room for more headers"),
        );
    } else if size.0 > u64::from(mtu) {
        cx.err_help(
            &format!("{at}.size"),
            format!("{at}.size"),
            format!(
                "trim size {size} is larger than the fabric MTU of {mtu} bytes: no packet would ever be trimmed"
            ),
            "a trimmed packet keeps its headers only: 128B or 256B",
        );
    }
}

/// The trimmed DSCP is in range and no class names it (a `dscp: default` class gives it up).
fn check_dscp(cx: &mut Ctx, intent: &Intent, at: &str, dscp: u8, classes: &[TrafficClass]) -> bool {
    if dscp > 63 {
        cx.err(
            &format!("{at}.dscp"),
            format!("{at}.dscp"),
            format!("DSCP {dscp} is outside 0..=63"),
        );
        return false;
    }
    let specs = intent.qos.classes.as_deref().unwrap_or_default();
    if let Some((c, _)) = classes.iter().zip(specs).find(|(c, s)| {
        !c.is_default && matches!(&s.dscp, crate::model::DscpSet::Values(v) if v.contains(&dscp))
    }) {
        cx.err_help(
            &format!("{at}.dscp"),
            format!("{at}.dscp"),
            format!(
                "DSCP {dscp} of trimmed packets is class {}'s: every switch must map it to the trimmed queue",
                c.name
            ),
            "pick a DSCP no class lists (11 is common)",
        );
        return false;
    }
    true
}

/// The trimmed queue: the one written, if no class uses it; else the highest free queue.
fn trimmed_queue(
    cx: &mut Ctx,
    at: &str,
    written: Option<u8>,
    classes: &[TrafficClass],
) -> Option<u8> {
    let used = |q: u8| classes.iter().find(|c| c.traffic_class == q);
    let free: Vec<u8> = (0..8).filter(|q| used(*q).is_none()).collect();
    let free_text = if free.is_empty() {
        "no queue is free: let two lossy classes share a traffic class to free one".to_string()
    } else {
        format!(
            "free queues: {}",
            free.iter()
                .map(u8::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let Some(q) = written else {
        if free.is_empty() {
            cx.err_help(
                at,
                at,
                "no queue is free for trimmed packets: the classes use all 8 traffic classes",
                "let two lossy classes share a traffic class, or name the queue with `traffic_class`",
            );
        }
        return free.last().copied();
    };
    let tc_at = format!("{at}.traffic_class");
    if q > 7 {
        cx.err(
            &tc_at,
            &tc_at,
            format!("traffic class {q} is outside 0..=7"),
        );
        return None;
    }
    if let Some(c) = used(q) {
        let why = if c.lossless {
            format!(
                "lossless class {}'s queue: PFC would pause trimmed packets",
                c.name
            )
        } else if c.trimmable {
            format!(
                "trimmable class {}'s queue: trimmed packets would be trimmed again",
                c.name
            )
        } else {
            format!(
                "class {}'s queue: trimmed packets need a queue of their own, whose strict priority serves nothing else",
                c.name
            )
        };
        cx.err_help(
            &tc_at,
            &tc_at,
            format!("traffic class {q} of trimmed packets is {why}"),
            free_text,
        );
        return None;
    }
    Some(q)
}

/// Trimming is per queue: classes sharing a traffic class are all trimmable or none is.
fn check_queues_agree(cx: &mut Ctx, intent: &Intent, classes: &[TrafficClass]) {
    for (i, c) in classes.iter().enumerate() {
        let Some(o) = classes[..i]
            .iter()
            .find(|o| o.traffic_class == c.traffic_class && o.trimmable != c.trimmable)
        else {
            continue;
        };
        let (t, n) = if c.trimmable { (c, o) } else { (o, c) };
        let at = if intent.qos.classes.is_some() {
            format!("qos.classes[{i}].traffic_class")
        } else {
            "qos".into()
        };
        cx.err_help(
            &at,
            format!("class {}", display_name(&c.name)),
            format!(
                "classes {} and {} share traffic class {} but only {} is trimmable: trimming is per queue",
                o.name, c.name, c.traffic_class, t.name
            ),
            format!("give {} its own traffic_class, or `trim` to both", n.name),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors, first_help, valid};

    fn classes(extra: &str) -> String {
        format!(
            "qos:\n  classes:\n    - {{name: roce, dscp: [26], traffic_class: 3{extra}}}\n    - {{name: cnp, dscp: [48], traffic_class: 6}}\n    - {{name: rest, dscp: default, traffic_class: 0}}\n{SMALL}"
        )
    }

    #[test]
    fn a_trimmable_class_is_lossy_and_its_dscp_maps_to_the_queue_written() {
        let t = valid(&classes(", trim: {size: 256B, dscp: 11, traffic_class: 7}"));
        let trim = t.qos.trim.expect("trimming");
        assert_eq!((trim.size.0, trim.dscp, trim.traffic_class), (256, 11, 7));
        let roce = &t.qos.classes[0];
        assert!(roce.trimmable && !roce.lossless);
        let rest = t
            .qos
            .classes
            .iter()
            .find(|c| c.is_default)
            .expect("default");
        assert!(
            !rest.dscp.contains(&11),
            "the default class gives up the trimmed DSCP"
        );
        assert!(!t.qos.classes[1].trimmable);
    }

    #[test]
    fn without_a_queue_written_the_highest_free_one_is_taken() {
        let t = valid(&classes(", trim: {size: 128B, dscp: 11}"));
        assert_eq!(t.qos.trim.map(|x| x.traffic_class), Some(7));
    }

    #[test]
    fn lossless_and_trimmable_is_refused_with_the_fix() {
        let yaml = classes(", lossless: true, trim: {size: 256B, dscp: 11}");
        let e = errors(&yaml);
        assert_eq!(
            e,
            vec![
                "3: class roce is lossless (PFC) and trimmable: trimming is the lossy alternative to PFC, a class is one or the other"
            ]
        );
        assert!(first_help(&yaml).is_some_and(|h| h.starts_with("drop `lossless: true`")));
    }

    #[test]
    fn sizes_below_the_headers_or_above_the_mtu_are_refused() {
        let e = errors(&classes(", trim: {size: 64B, dscp: 11}"));
        assert_eq!(
            e,
            vec![
                "3: trim size 64B is smaller than the 70 bytes a receiver needs to ask for the packet again (Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + RETH 16)"
            ]
        );
        let e = errors(&classes(", trim: {size: 10KB, dscp: 11}"));
        assert_eq!(
            e,
            vec![
                "3: trim size 10KB is larger than the fabric MTU of 9100 bytes: no packet would ever be trimmed"
            ]
        );
    }

    #[test]
    fn a_trimmed_queue_some_class_uses_is_refused_naming_the_free_ones() {
        let yaml = classes(", trim: {size: 256B, dscp: 11, traffic_class: 6}");
        assert_eq!(
            errors(&yaml),
            vec![
                "3: traffic class 6 of trimmed packets is class cnp's queue: trimmed packets need a queue of their own, whose strict priority serves nothing else"
            ]
        );
        assert_eq!(
            first_help(&yaml).as_deref(),
            Some("free queues: 1, 2, 4, 5, 7")
        );
        let e = errors(&classes(", trim: {size: 256B, dscp: 11, traffic_class: 3}"));
        assert!(e[0].contains("trimmable class roce's queue"), "{e:?}");
    }

    #[test]
    fn a_trimmed_dscp_another_class_lists_is_refused() {
        let e = errors(&classes(", trim: {size: 256B, dscp: 48}"));
        assert_eq!(
            e,
            vec![
                "3: DSCP 48 of trimmed packets is class cnp's: every switch must map it to the trimmed queue"
            ]
        );
    }

    #[test]
    fn no_free_queue_is_refused_when_none_is_written() {
        let mut yaml = String::from("qos:\n  classes:\n");
        yaml.push_str(
            "    - {name: c0, dscp: [0], traffic_class: 0, trim: {size: 256B, dscp: 11}}\n",
        );
        for q in 1..8 {
            yaml.push_str(&format!(
                "    - {{name: c{q}, dscp: [{}], traffic_class: {q}}}\n",
                q + 1
            ));
        }
        yaml.push_str(SMALL);
        let e = errors(&yaml);
        assert_eq!(
            e,
            vec!["3: no queue is free for trimmed packets: the classes use all 8 traffic classes"]
        );
    }
}
