//! `weft testbed up|down|status|link|ping|spread` (`workload` is in [`super::workload`]).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use weft_testbed as tb;

use super::{Outcome, load_valid};

fn state_dir(dir: Option<PathBuf>, fabric: &str) -> PathBuf {
    dir.unwrap_or_else(|| tb::default_state_dir(fabric))
}

pub fn up(
    file: &str,
    dir: Option<PathBuf>,
    db_only: bool,
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
    };
    let st = tb::up(&t, &programs, &opts)?;
    if db_only {
        println!(
            "testbed {} is up without switches: {} redis-servers (one SONiC DB per switch)",
            st.fabric,
            st.switches.len()
        );
    } else {
        println!(
            "testbed {} is up: {} switches (BMv2 + redis-server + plugin each), {} hosts, namespace {}",
            st.fabric,
            st.switches.len(),
            st.hosts.len(),
            st.netns
        );
    }
    println!("state: {}", tb::State::path(&dir).display());
    println!("next: weft apply {file}");
    Ok(Outcome::Ok)
}

/// The fabric name of an intent file, or the name given as is.
fn fabric_of(file_or_name: &str) -> String {
    match weft_topology::load_file(file_or_name) {
        Ok(t) => t.name,
        Err(_) => file_or_name.to_string(),
    }
}

pub fn down(file_or_name: &str, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let fabric = fabric_of(file_or_name);
    let dir = state_dir(dir, &fabric);
    for line in tb::down(&dir, &fabric)? {
        println!("{line}");
    }
    println!("testbed {fabric} is down");
    Ok(Outcome::Ok)
}

pub fn status(file_or_name: &str, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let fabric = fabric_of(file_or_name);
    let dir = state_dir(dir, &fabric);
    print!(
        "{}",
        tb::status(&dir)
            .with_context(|| format!("no testbed {fabric} (looked in {})", dir.display()))?
    );
    Ok(Outcome::Ok)
}

pub fn link(
    file_or_name: &str,
    dir: Option<PathBuf>,
    port: &str,
    action: &str,
    count: u32,
    interval_ms: u64,
) -> anyhow::Result<Outcome> {
    let fabric = fabric_of(file_or_name);
    let st = tb::State::load(&state_dir(dir, &fabric))?;
    let r: weft_topology::PortRef = port.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    match action {
        "down" => tb::set_link(&st, &r.switch, &r.port, false)?,
        "up" => tb::set_link(&st, &r.switch, &r.port, true)?,
        "flap" => tb::flap(
            &st,
            &r.switch,
            &r.port,
            count,
            Duration::from_millis(interval_ms),
        )?,
        other => anyhow::bail!("unknown link action {other:?}: use down, up or flap"),
    }
    println!("{port}: {action} done");
    Ok(Outcome::Ok)
}

pub fn ping(file_or_name: &str, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let fabric = fabric_of(file_or_name);
    let st = tb::State::load(&state_dir(dir, &fabric))?;
    let res = tb::ping_all(&st, 2);
    let ok = res.iter().filter(|r| r.2).count();
    for (a, b, good) in &res {
        if !good {
            println!("UNREACHABLE {a} -> {b}");
        }
    }
    println!("reachability: {ok}/{} host pairs answer ping", res.len());
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
    let st = tb::State::load(&state_dir(dir, &t.name))?;
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
        println!(
            "  {s:<12} {n:>6} packets ({:.0}%)",
            *n as f64 * 100.0 / total.max(1) as f64
        );
    }
    println!("  {received} of 2000 packets arrived at {dst}");
    Ok(if received >= 1900 && per.iter().all(|p| p.1 > 0) {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}
