//! The plugin's decisions alone, without Redis or a switch: N routes (and the port configs and
//! nexthops they name) through translation, reference checks, planning and commit, in the
//! batch loop's order (batch N+1 prepared while N is "on the switch"), against a switch that
//! takes every write at once. Then every route deleted the same way. What this measures is the
//! plugin's own CPU per entry: the end-to-end bench (`e2e_routes`) adds Redis and BMv2.
//!
//! `cargo bench -p weft-sonic-plugin --bench core_batches [-- --routes N] [--batch N]`
//! (default 100000 routes, batches of 4096 keys: the plugin's default).

use std::time::{Duration, Instant};

use anyhow::Context;
use weft_appdb::{Call, Encoder, Match, PortMap, Value};
use weft_p4::{actions as a, tables as t};
use weft_p4rt::proto::p4::v1::{Entity, Update};
use weft_sonic_db::KeyOpFieldValues;
use weft_sonic_plugin::engine::{Engine, Pending, execute};
use weft_sonic_plugin::pipeline::{owned_tables, weft_p4info};
use weft_sonic_plugin::switch::SwitchIo;
use weft_sonic_plugin::translate::Translator;

const PORTS: [(&str, u32); 2] = [("Ethernet0", 1), ("Ethernet4", 2)];

/// Takes every write, holds nothing.
struct NullSwitch;

impl SwitchIo for NullSwitch {
    async fn write(&self, _: &[Update]) -> weft_p4rt::Result<()> {
        Ok(())
    }
    async fn read(&self, _: Vec<Entity>) -> weft_p4rt::Result<Vec<Entity>> {
        Ok(Vec::new())
    }
}

fn entries(n: usize) -> anyhow::Result<Vec<KeyOpFieldValues>> {
    let info = weft_p4info()?;
    let enc = Encoder::new(&info);
    let mac = |b: u8| Value::Mac([2, 0x57, 0x46, 0, 0, b]);
    let mut out = Vec::new();
    for (p, _) in PORTS {
        let k = enc.key(
            t::port_config_table::NAME,
            &[Match::Exact(
                t::port_config_table::fields::port::NAME,
                Value::Port(p.into()),
            )],
            0,
        )?;
        let c = Call {
            action: a::set_port_config::NAME,
            params: vec![(a::set_port_config::params::router_mac::NAME, mac(0xaa))],
        };
        out.push(enc.entry(k, &c)?.to_set_op());
    }
    for (i, (p, _)) in PORTS.iter().enumerate() {
        let id = i as u8 + 1;
        let k = enc.key(
            t::nexthop_table::NAME,
            &[Match::Exact(
                t::nexthop_table::fields::nexthop_id::NAME,
                Value::Uint(u128::from(id)),
            )],
            0,
        )?;
        let c = Call {
            action: a::set_nexthop::NAME,
            params: vec![
                (
                    a::set_nexthop::params::egress_port::NAME,
                    Value::Port(p.to_string()),
                ),
                (a::set_nexthop::params::dst_mac::NAME, mac(id)),
                (a::set_nexthop::params::src_mac::NAME, mac(0xaa)),
            ],
        };
        out.push(enc.entry(k, &c)?.to_set_op());
    }
    for i in 0..n as u32 {
        let net = std::net::Ipv4Addr::from(0x0a00_0000u32.wrapping_add(i << 8));
        let k = enc.key(
            t::ipv4_table::NAME,
            &[Match::Lpm(
                t::ipv4_table::fields::ipv4_dst::NAME,
                Value::Ipv4(net),
                24,
            )],
            0,
        )?;
        let c = Call {
            action: a::set_nexthop_id::NAME,
            params: vec![(
                a::set_nexthop_id::params::nexthop_id::NAME,
                Value::Uint(u128::from(i % 2 + 1)),
            )],
        };
        out.push(enc.entry(k, &c)?.to_set_op());
    }
    Ok(out)
}

fn engine() -> anyhow::Result<Engine<NullSwitch>> {
    let mut tr = Translator::new(weft_p4info()?, owned_tables(), false);
    let mut ports = PortMap::default();
    for (name, id) in PORTS {
        ports.by_name.insert(name.to_string(), id);
    }
    tr.set_ports(ports);
    Ok(Engine::new(NullSwitch, tr))
}

/// Every batch through the engine as the batch loop runs them: the next prepared before the
/// one "in flight" is committed when they share no key. Returns (time, keys refused).
async fn run(e: &mut Engine<NullSwitch>, ops: &[KeyOpFieldValues], batch: usize) -> (Duration, usize) {
    let t0 = Instant::now();
    let mut refused = 0;
    let mut chunks = ops.chunks(batch);
    let mut inflight = chunks.next().map(|c| e.prepare(c.to_vec(), &Pending::default()));
    while let Some(p) = inflight.take() {
        let pending = e.pending(&p);
        let next = chunks.next().map(|c| e.prepare(c.to_vec(), &pending));
        let x = execute(&e.switch, &p.plan).await.expect("null switch");
        let r = e.commit(p, x).await.expect("null switch");
        refused += r.iter().filter(|r| !r.status.is_ok()).count();
        inflight = next.map(|n| {
            if n.blocked() {
                e.prepare(n.ops, &Pending::default())
            } else {
                n
            }
        });
    }
    (t0.elapsed(), refused)
}

fn main() -> anyhow::Result<()> {
    let mut routes = 100_000usize;
    let mut batch = 4096usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = || -> anyhow::Result<usize> {
            args.next()
                .and_then(|v| v.parse().ok())
                .filter(|n| *n > 0)
                .context("a positive number")
        };
        match a.as_str() {
            "--routes" => routes = num()?,
            "--batch" => batch = num()?,
            _ => {}
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let ops = entries(routes)?;
    let dels: Vec<KeyOpFieldValues> = ops
        .iter()
        .skip(2 * PORTS.len())
        .rev()
        .map(|o| KeyOpFieldValues::del(o.key.clone()))
        .collect();
    let mut e = engine()?;
    let (set, refused_set) = rt.block_on(run(&mut e, &ops, batch));
    let (del, refused_del) = rt.block_on(run(&mut e, &dels, batch));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    println!("core_batches: {routes} routes, batches of {batch}, no Redis, no switch");
    println!(
        "  install: {set:.2?} = {:.0} keys/s ({refused_set} refused)",
        ops.len() as f64 / set.as_secs_f64()
    );
    println!(
        "  delete:  {del:.2?} = {:.0} keys/s ({refused_del} refused)",
        dels.len() as f64 / del.as_secs_f64()
    );
    println!("  load average {}", load.join(" "));
    anyhow::ensure!(refused_set == 0, "{refused_set} entries refused");
    Ok(())
}
