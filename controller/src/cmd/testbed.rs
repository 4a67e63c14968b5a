//! `weft testbed up|down|status|link|ping|spread` (`workload` is in [`super::workload`]).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use weft_testbed as tb;

use super::{Outcome, OutputFormat, load_valid};
use crate::cli::LinkAction;
use crate::outln;

fn state_dir(dir: Option<PathBuf>, fabric: &str) -> PathBuf {
    dir.unwrap_or_else(|| tb::default_state_dir(fabric))
}

pub fn up(
    file: &str,
    dir: Option<PathBuf>,
    db_only: bool,
    acl: bool,
    tls: bool,
    plugin_args: Vec<String>,
) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid(file)? else {
        return Ok(Outcome::Invalid);
    };
    let programs = if db_only {
        tb::Programs::locate_db_only()?
    } else {
        tb::Programs::locate()?
    };
    let dir = state_dir(dir, &t.name);
    let opts = tb::UpOptions {
        state_dir: dir.clone(),
        plugin_args,
        db_only,
        acl,
        tls,
    };
    let st = tb::up(&t, &programs, &opts)?;
    if db_only {
        outln!(
            "testbed {} is up without switches: {} redis-servers (one SONiC DB per switch), no plugins, no hosts",
            st.fabric,
            st.switches.len()
        );
    } else {
        outln!(
            "testbed {} is up: {} switches (BMv2 + redis-server + plugin each), {} hosts, namespace {}",
            st.fabric,
            st.switches.len(),
            st.hosts.len(),
            st.netns
        );
    }
    outln!("state: {}", tb::State::path(&dir).display());
    if let Some(a) = tb::acl::files(&dir).filter(|_| acl) {
        outln!(
            "redis ACLs: default user off; plugins read {}; the controller reads the file named by {}:",
            a.plugin.display(),
            weft_sonic_db::CREDENTIALS_ENV
        );
        outln!(
            "  export {}={}",
            weft_sonic_db::CREDENTIALS_ENV,
            a.controller.display()
        );
    }
    if db_only {
        // Nothing answers entries without plugins: waiting for answers would only time out.
        outln!("next: weft apply {file} --no-wait");
    } else {
        outln!("next: weft apply {file}");
    }
    Ok(Outcome::Ok)
}

/// The fabric name of an intent file, or the name given as is.
fn fabric_of(file_or_name: &str) -> String {
    match weft_topology::load_file(file_or_name) {
        Ok(t) => t.name,
        Err(_) => file_or_name.to_string(),
    }
}

fn load_state(file_or_name: &str, dir: Option<PathBuf>) -> anyhow::Result<tb::State> {
    let fabric = fabric_of(file_or_name);
    let dir = state_dir(dir, &fabric);
    tb::State::load(&dir).with_context(|| {
        format!(
            "no testbed {fabric} (looked in {}; `weft testbed up` makes one)",
            dir.display()
        )
    })
}

/// Commands that need switches and hosts refuse a `--db-only` testbed with the reason.
fn need_switches(st: &tb::State, what: &str) -> anyhow::Result<()> {
    if st.db_only() {
        bail!(
            "testbed {} was started with --db-only: it has redis-servers only (no BMv2, no links, no hosts), so there is nothing to {what}",
            st.fabric
        );
    }
    Ok(())
}

pub fn prometheus_config(
    file_or_name: &str,
    dir: Option<PathBuf>,
    out: Option<PathBuf>,
    controller: &str,
    interval: Duration,
) -> anyhow::Result<Outcome> {
    let st = load_state(file_or_name, dir)?;
    need_switches(&st, "scrape")?;
    let ctl = (controller != "none").then_some(controller);
    if let Some(c) = ctl {
        weft_telemetry::server::parse_addr(c).context("--controller")?;
    }
    let text = tb::prometheus_config(&st, ctl, interval);
    match out {
        Some(p) => {
            std::fs::write(&p, &text).with_context(|| format!("writing {}", p.display()))?;
            let n = st.switches.iter().filter(|s| s.metrics.is_some()).count();
            outln!(
                "{}: {n} plugin targets{}; run Prometheus in the fabric namespace: ip netns exec {} prometheus --config.file={}",
                p.display(),
                ctl.map_or(String::new(), |c| format!(", weft run at {c}")),
                st.netns,
                p.display()
            );
        }
        None => crate::out!("{text}"),
    }
    Ok(Outcome::Ok)
}

pub fn down(file_or_name: &str, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let fabric = fabric_of(file_or_name);
    let dir = state_dir(dir, &fabric);
    for line in tb::down(&dir, &fabric)? {
        outln!("{line}");
    }
    outln!("testbed {fabric} is down");
    Ok(Outcome::Ok)
}

pub fn status(
    file_or_name: &str,
    dir: Option<PathBuf>,
    output: OutputFormat,
) -> anyhow::Result<Outcome> {
    let fabric = fabric_of(file_or_name);
    let dir = state_dir(dir, &fabric);
    let r = tb::status_report(&dir).with_context(|| {
        format!(
            "no testbed {fabric} (looked in {}; `weft testbed up` makes one)",
            dir.display()
        )
    })?;
    let all_running = r.processes.iter().all(|p| p.running);
    match output {
        OutputFormat::Json => outln!("{}", serde_json::to_string_pretty(&r)?),
        OutputFormat::Text => {
            outln!(
                "testbed {} (namespace {}, state {}){}",
                r.fabric,
                r.netns,
                r.state_dir.display(),
                if r.db_only { ", --db-only" } else { "" }
            );
            for p in &r.processes {
                outln!(
                    "  {:<24} pid {:<8} {}",
                    p.name,
                    p.pid,
                    if p.running {
                        "running".to_string()
                    } else {
                        match tb::chaos::restart_hint(&r.fabric, &p.name) {
                            Some(h) => format!("NOT RUNNING ({h}; log {})", p.log.display()),
                            None => "NOT RUNNING".to_string(),
                        }
                    }
                );
            }
            for h in &r.hosts {
                outln!(
                    "  host {:<19} {} {}",
                    h.name,
                    h.ipv4,
                    if h.netns_exists {
                        ""
                    } else {
                        "(namespace missing)"
                    }
                );
            }
        }
    }
    Ok(if all_running {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

pub fn link(
    file_or_name: &str,
    dir: Option<PathBuf>,
    port: &str,
    action: LinkAction,
    count: u32,
    interval: Duration,
) -> anyhow::Result<Outcome> {
    let st = load_state(file_or_name, dir)?;
    need_switches(&st, "take down or up")?;
    let r: weft_topology::PortRef = port.parse()?;
    let Some(sw) = st.switch(&r.switch) else {
        bail!("testbed {} has no switch {}", st.fabric, r.switch);
    };
    if !sw.interfaces.contains_key(&r.port) {
        bail!(
            "{} has no cabled port {} (cabled: {})",
            r.switch,
            r.port,
            sw.interfaces.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let done = match action {
        LinkAction::Down => {
            tb::set_link(&st, &r.switch, &r.port, false)?;
            "down"
        }
        LinkAction::Up => {
            tb::set_link(&st, &r.switch, &r.port, true)?;
            "up"
        }
        LinkAction::Flap => {
            tb::flap(&st, &r.switch, &r.port, count, interval)?;
            "flapped"
        }
    };
    outln!("{port}: {done}");
    Ok(Outcome::Ok)
}

pub fn ping(
    file_or_name: &str,
    dir: Option<PathBuf>,
    output: OutputFormat,
) -> anyhow::Result<Outcome> {
    let st = load_state(file_or_name, dir)?;
    need_switches(&st, "ping")?;
    if st.hosts.len() < 2 {
        bail!(
            "testbed {} has {} host(s): no pair to ping",
            st.fabric,
            st.hosts.len()
        );
    }
    let res = tb::ping_all(&st, 2);
    let ok = res.iter().filter(|r| r.2).count();
    match output {
        OutputFormat::Json => {
            let pairs: Vec<serde_json::Value> = res
                .iter()
                .map(|(a, b, good)| serde_json::json!({"from": a, "to": b, "ok": good}))
                .collect();
            outln!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "fabric": st.fabric, "pairs": res.len(), "answered": ok, "results": pairs
                }))?
            );
        }
        OutputFormat::Text => {
            for (a, b, good) in &res {
                if !good {
                    outln!("UNREACHABLE {a} -> {b}");
                }
            }
            outln!("reachability: {ok}/{} host pairs answer ping", res.len());
        }
    }
    Ok(if ok == res.len() {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

pub fn spread(file: &str, dir: Option<PathBuf>, src: &str, dst: &str) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid(file)? else {
        return Ok(Outcome::Invalid);
    };
    let st = load_state(file, dir)?;
    need_switches(&st, "send traffic through")?;
    for h in [src, dst] {
        if st.host(h).is_none() {
            bail!("testbed {} has no host {h}", st.fabric);
        }
    }
    let top = t.switches.iter().map(|s| s.role).max();
    let spines: Vec<String> = t
        .switches
        .iter()
        .filter(|s| Some(s.role) == top)
        .map(|s| s.name.clone())
        .collect();
    let (per, received) = tb::spread(&st, src, dst, 2000, 64, &spines)?;
    let total: u64 = per.iter().map(|p| p.1).sum();
    for (s, n) in &per {
        outln!(
            "  {s:<12} {n:>6} packets ({:.0}%)",
            *n as f64 * 100.0 / total.max(1) as f64
        );
    }
    outln!("  {received} of 2000 packets arrived at {dst}");
    Ok(if received >= 1900 && per.iter().all(|p| p.1 > 0) {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

/// `weft testbed kill FILE SWITCH plugin|bmv2|redis`: SIGKILL, as a crash.
pub fn kill(
    file_or_name: &str,
    dir: Option<PathBuf>,
    switch: &str,
    part: tb::chaos::Part,
) -> anyhow::Result<Outcome> {
    let st = load_state(file_or_name, dir)?;
    let pid = tb::chaos::kill(&st.state_dir, switch, part)?;
    outln!(
        "killed {} (pid {pid}); bring it back: weft testbed restart {} {switch} {}",
        part.process_name(switch),
        st.fabric,
        part.word()
    );
    Ok(Outcome::Ok)
}

/// `weft testbed restart FILE SWITCH plugin|bmv2|redis`: start it again as `up` did.
pub fn restart(
    file_or_name: &str,
    dir: Option<PathBuf>,
    switch: &str,
    part: tb::chaos::Part,
) -> anyhow::Result<Outcome> {
    let st = load_state(file_or_name, dir)?;
    let pid = tb::chaos::restart(&st.state_dir, switch, part)?;
    outln!(
        "restarted {} (pid {pid}, recorded in {})",
        part.process_name(switch),
        tb::State::path(&st.state_dir).display()
    );
    Ok(Outcome::Ok)
}

/// `weft testbed fault FILE KIND TARGET…`, `… list`, `… clear`.
pub fn fault(
    file_or_name: &str,
    dir: Option<PathBuf>,
    kind: tb::fault::FaultKind,
    targets: &[String],
    params: &tb::fault::Params,
    output: OutputFormat,
) -> anyhow::Result<Outcome> {
    use tb::fault::FaultKind;
    let st = load_state(file_or_name, dir)?;
    need_switches(&st, "inject faults into")?;
    let tools = tb::fault::Tools::locate();
    match kind {
        FaultKind::List => {
            let faults = tb::fault::list(&st.state_dir);
            match output {
                OutputFormat::Json => outln!("{}", serde_json::to_string_pretty(&faults)?),
                OutputFormat::Text => {
                    if faults.is_empty() {
                        outln!("no faults in place");
                    }
                    for f in &faults {
                        outln!("{} {}: {}", f.kind.as_str(), f.target, f.detail);
                    }
                }
            }
        }
        FaultKind::Clear => {
            let done = tb::fault::clear(&st, &tools)?;
            match output {
                OutputFormat::Json => outln!("{}", serde_json::to_string_pretty(&done)?),
                OutputFormat::Text => {
                    for l in &done {
                        outln!("{l}");
                    }
                    outln!("faults cleared");
                }
            }
            if !tb::fault::list(&st.state_dir).is_empty() {
                return Ok(Outcome::Failed);
            }
        }
        _ => {
            let f = tb::fault::inject(&st, &tools, kind, targets, params)?;
            match output {
                OutputFormat::Json => outln!("{}", serde_json::to_string_pretty(&f)?),
                OutputFormat::Text => {
                    outln!("{} {}: {}", f.kind.as_str(), f.target, f.detail);
                    outln!("undo: weft testbed fault {file_or_name} clear (or testbed down)");
                }
            }
        }
    }
    Ok(Outcome::Ok)
}
