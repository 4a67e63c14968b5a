//! Postcard telemetry: sampling and the watched flows.

use std::collections::HashMap;

use super::ctx::Ctx;
use super::defaults::{DEFAULT_POSTCARD_SAMPLE, MAX_WATCHED_FLOWS};
use crate::diag::suggest;
use crate::model::TelemetrySpec;
use crate::topo::{Host, HostIdx, Telemetry, Watch};

pub(super) fn resolve_telemetry(
    cx: &mut Ctx,
    t: &TelemetrySpec,
    hosts: &[Host],
    host_by_name: &HashMap<String, HostIdx>,
) -> Telemetry {
    if let Some(c) = &t.collector
        && c != "packet-in"
    {
        cx.err(
            "telemetry.collector",
            "telemetry",
            format!(
                "collector {c:?}: only `packet-in` (postcards to each switch's plugin) is supported"
            ),
        );
    }
    if t.max_records == Some(0) {
        cx.err(
            "telemetry.max_records",
            "telemetry",
            "max_records must be at least 1",
        );
    }
    if t.watch.len() > MAX_WATCHED_FLOWS {
        cx.err(
            "telemetry.watch",
            "telemetry",
            format!(
                "{} watched flows: the pipeline's postcard_watch_table holds {MAX_WATCHED_FLOWS}",
                t.watch.len()
            ),
        );
    }
    let mut watch = Vec::new();
    for (i, w) in t.watch.iter().enumerate() {
        let item = format!("telemetry.watch[{i}]");
        let addr = |cx: &mut Ctx, field: &str, v: &Option<String>| -> Option<std::net::IpAddr> {
            let v = v.as_ref()?;
            if let Some(&h) = host_by_name.get(v.as_str()) {
                return Some(std::net::IpAddr::V4(hosts[h].ipv4));
            }
            match v.parse::<std::net::IpAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
                    let hint = suggest(v, names.iter().copied())
                        .map_or(String::new(), |s| format!(" (did you mean {s}?)"));
                    cx.err(
                        &format!("{item}.{field}"),
                        &item,
                        format!(
                            "{field} {v:?} is neither a host of the fabric nor an IP address{hint}"
                        ),
                    );
                    None
                }
            }
        };
        let src = addr(cx, "src", &w.src);
        let dst = addr(cx, "dst", &w.dst);
        let protocol = match w.protocol.as_deref() {
            None => None,
            Some("udp" | "UDP") => Some(17),
            Some("tcp" | "TCP") => Some(6),
            Some(p) => match p.parse::<u8>() {
                Ok(n) => Some(n),
                Err(_) => {
                    cx.err(
                        &format!("{item}.protocol"),
                        &item,
                        format!("protocol {p:?}: expected udp, tcp or a number 0-255"),
                    );
                    None
                }
            },
        };
        if let Some(q) = w.qp
            && q > 0xff_ffff
        {
            cx.err(
                &format!("{item}.qp"),
                &item,
                format!("qp {q} does not fit the BTH's 24 bits"),
            );
        }
        if w.src.is_none()
            && w.dst.is_none()
            && w.protocol.is_none()
            && w.dst_port.is_none()
            && w.qp.is_none()
        {
            cx.err(
                &item,
                &item,
                "a watched flow needs at least one of src, dst, protocol, dst_port, qp (an empty one would watch every packet: use `sample: 1`)",
            );
        }
        if let (Some(s), Some(d)) = (src, dst)
            && s.is_ipv4() != d.is_ipv4()
        {
            cx.err(&item, &item, "src and dst are of different IP versions");
        }
        watch.push(Watch {
            src,
            dst,
            protocol,
            dst_port: w.dst_port,
            qp: w.qp,
        });
    }
    Telemetry {
        sample: t.sample.unwrap_or(DEFAULT_POSTCARD_SAMPLE),
        watch,
        max_records: t.max_records.unwrap_or(10_000).max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors, valid};

    #[test]
    fn watched_flows_name_hosts_or_addresses() {
        let t = valid(&format!(
            "{SMALL}telemetry:\n  watch:\n    - {{src: h1, dst: 10.9.9.9, protocol: udp, qp: 7}}\n"
        ));
        let tel = t.telemetry.expect("telemetry");
        assert_eq!(tel.sample, super::DEFAULT_POSTCARD_SAMPLE);
        assert_eq!(
            tel.watch[0].src,
            Some(std::net::IpAddr::V4(t.hosts[0].ipv4))
        );
        assert_eq!(tel.watch[0].protocol, Some(17));
        assert_eq!(tel.watch[0].qp, Some(7));
    }

    #[test]
    fn a_watched_flow_must_say_what_it_watches_in_range() {
        let e = errors(&format!(
            "{SMALL}telemetry:\n  watch:\n    - {{src: h1x, protocol: sctp, qp: 16777216}}\n    - {{dst_port: 4791}}\n    - {{}}\n"
        ));
        assert_eq!(
            e,
            vec![
                "19: src \"h1x\" is neither a host of the fabric nor an IP address (did you mean h1?)",
                "19: protocol \"sctp\": expected udp, tcp or a number 0-255",
                "19: qp 16777216 does not fit the BTH's 24 bits",
                "21: a watched flow needs at least one of src, dst, protocol, dst_port, qp (an empty one would watch every packet: use `sample: 1`)",
            ]
        );
    }
}
