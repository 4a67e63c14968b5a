//! `weft testbed up|down|status|link|ping`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use weft_testbed as tb;

use super::{Outcome, load, print_diagnostics};

fn state_dir(dir: Option<PathBuf>, fabric: &str) -> PathBuf {
    dir.unwrap_or_else(|| tb::default_state_dir(fabric))
}

pub fn up(file: &str, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let t = match load(file)? {
        Ok(t) => t,
        Err(d) => {
            print_diagnostics(&d);
            return Ok(Outcome::Invalid);
        }
    };
    let programs = tb::Programs::locate()?;
    let dir = state_dir(dir, &t.name);
    let st = tb::up(
        &t,
        &programs,
        &tb::UpOptions {
            state_dir: dir.clone(),
            plugin_args: Vec::new(),
        },
    )?;
    println!(
        "testbed {} is up: {} switches (BMv2 + redis-server + plugin each), {} hosts, namespace {}",
        st.fabric,
        st.switches.len(),
        st.hosts.len(),
        st.netns
    );
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
