//! A port reference `SWITCH:PORT` looked up among the switches.

use std::collections::HashMap;

use super::ctx::Ctx;
use crate::diag::suggest;
use crate::model::PortRef;
use crate::names::display_name;
use crate::topo::{End, Switch, SwitchIdx};

pub(super) fn end_name(sw: &[Switch], e: End) -> String {
    format!("{}:{}", sw[e.switch].name, sw[e.switch].ports[e.port].name)
}

/// The end `r` names, or why it names none (message, help); the caller reports it, so that the
/// path and item strings are only made for errors.
fn find_end(
    switches: &[Switch],
    by_name: &HashMap<String, SwitchIdx>,
    r: &PortRef,
) -> Result<End, (String, Option<String>)> {
    let Some(&si) = by_name.get(&r.switch) else {
        let msg = format!("unknown switch `{}`", display_name(&r.switch));
        let help = suggest(&r.switch, by_name.keys().map(String::as_str))
            .map(|s| format!("did you mean `{s}`?"));
        return Err((msg, help));
    };
    let sw = &switches[si];
    match sw.port_index(&r.port) {
        Some(pi) => Ok(End {
            switch: si,
            port: pi,
        }),
        // Port names differ only in digits, so a nearest-name guess would mislead; list them.
        None => Err((
            format!("switch {} has no port `{}`", sw.name, display_name(&r.port)),
            Some(format!(
                "it has {} ports: {}",
                sw.ports.len(),
                summarize_ports(sw)
            )),
        )),
    }
}

pub(super) fn resolve_end(
    cx: &mut Ctx,
    switches: &[Switch],
    by_name: &HashMap<String, SwitchIdx>,
    r: &PortRef,
    path: impl Fn() -> String,
    item: impl Fn() -> String,
) -> Option<End> {
    match find_end(switches, by_name, r) {
        Ok(e) => Some(e),
        Err((msg, help)) => {
            match help {
                Some(h) => cx.err_help(&path(), item(), msg, h),
                None => cx.err(&path(), item(), msg),
            }
            None
        }
    }
}

fn summarize_ports(sw: &Switch) -> String {
    match (sw.ports.first(), sw.ports.last()) {
        (Some(a), Some(b)) if sw.ports.len() > 2 => format!("{} … {}", a.name, b.name),
        _ => sw
            .ports
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{SMALL, errors};

    #[test]
    fn an_unknown_switch_is_reported_with_the_nearest_name() {
        let e = errors(&SMALL.replace("{a: leaf2:Ethernet4", "{a: leaf3:Ethernet4"));
        assert_eq!(e, vec!["13: unknown switch `leaf3`"]);
    }

    #[test]
    fn an_unknown_port_is_reported_with_the_ports_the_switch_has() {
        let yaml = SMALL.replace("attach: leaf2:Ethernet0", "attach: leaf2:Ethernet8");
        assert_eq!(
            errors(&yaml),
            vec!["16: switch leaf2 has no port `Ethernet8`"]
        );
        assert_eq!(
            super::super::testing::first_help(&yaml).as_deref(),
            Some("it has 2 ports: Ethernet0, Ethernet4")
        );
    }
}
