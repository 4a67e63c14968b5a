//! The plugin's decisions alone, without Redis or a switch: N routes (and the port configs and
//! nexthops they name) through translation, reference checks, planning and commit, in the
//! batch loop's order (batch N+1 prepared while N is "on the switch"), against a switch that
//! takes every write at once. Then every route deleted the same way. What this measures is the
//! plugin's own CPU per entry: the end-to-end bench (`e2e_routes`) adds Redis and BMv2.
//!
//! `cargo bench -p weft-sonic-plugin --bench core_batches [-- --routes N] [--batch N]`
//! (default 100000 routes, batches of 4096 keys: the plugin's default).
//! The plugin's decisions are the core's ([`weft_sonic_plugin::core`]): this drives it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::Context;
use weft_appdb::{Call, Encoder, Match, Value};
use weft_p4::{actions as a, tables as t};
use weft_sonic_db::{FieldValues, KeyOpFieldValues};
use weft_sonic_plugin::clock::Now;
use weft_sonic_plugin::config::QueueModel;
use weft_sonic_plugin::core::{Core, CoreConfig, Input, Output};
use weft_sonic_plugin::pipeline::{owned_tables, weft_p4info};
use weft_sonic_plugin::translate::Translator;

const PORTS: [(&str, u32); 2] = [("Ethernet0", 1), ("Ethernet4", 2)];

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

/// A core whose session is up, synced against an empty switch, with the ports configured.
fn core(batch: usize) -> anyhow::Result<Core> {
    let tr = Translator::new(weft_p4info()?, owned_tables(), false);
    let cfg = CoreConfig {
        queue: QueueModel::default(),
        tuning_line_rate: Default::default(),
        device_id: 1,
        batch_size: batch,
    };
    let mut core = Core::new(cfg, tr, Now::read());
    let port = |id: u32| -> FieldValues { vec![("id".into(), id.to_string())] };
    let rows = PORTS
        .iter()
        .map(|(n, id)| ("PORT", n.to_string(), port(*id)))
        .collect();
    let mut todo: VecDeque<Input> = [
        Input::WaitingForSwitch,
        Input::SessionUp {
            redis_run_id: "bench".into(),
            pushed: true,
            cookie: 1,
        },
        Input::SessionRead {
            live: Default::default(),
            state: Default::default(),
            term: None,
        },
        Input::ConfigRead { rows, tuning: None },
    ]
    .into();
    while let Some(i) = todo.pop_front() {
        for o in core.step(Now::read(), i) {
            match o {
                Output::Read { ticket, .. } => todo.push_back(Input::Read {
                    ticket,
                    result: Ok(Vec::new()),
                }),
                Output::Write { ticket, .. } => todo.push_back(Input::Written {
                    ticket,
                    result: Ok(()),
                }),
                _ => {}
            }
        }
    }
    anyhow::ensure!(core.running(), "the core did not start");
    Ok(core)
}

/// CPU time (user + system) this process has used so far: on a shared machine the wall time
/// of a run says as much about the others as about the core.
fn cpu_now() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5), the 12th and 13th after the name.
    let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis((num(11) + num(12)) * 10)
}

/// Every batch through the core as the daemon feeds it: the next batch taken while the Write
/// of the one before is out (the core prepares it meanwhile), every Write taken by the switch
/// at once. Returns (time, CPU time, keys refused).
fn run(core: &mut Core, ops: &[KeyOpFieldValues], batch: usize) -> (Duration, Duration, usize) {
    let t0 = Instant::now();
    let c0 = cpu_now();
    let mut refused = 0;
    let mut batches = ops.chunks(batch);
    let mut write = None;
    loop {
        let mut input = None;
        if core.accepts_batch()
            && let Some(b) = batches.next()
        {
            input = Some(Input::Batch {
                ops: b.to_vec(),
                term: None,
            });
        }
        let input = match (input, write.take()) {
            (Some(i), w) => {
                write = w;
                i
            }
            (None, Some(ticket)) => Input::Written {
                ticket,
                result: Ok(()),
            },
            (None, None) => break,
        };
        for o in core.step(Now::read(), input) {
            match o {
                Output::Write { ticket, .. } => write = Some(ticket),
                Output::Answer(a) => {
                    refused += a.results.iter().filter(|r| !r.status.is_ok()).count()
                }
                _ => {}
            }
        }
    }
    (t0.elapsed(), cpu_now().saturating_sub(c0), refused)
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
    let ops = entries(routes)?;
    let dels: Vec<KeyOpFieldValues> = ops
        .iter()
        .skip(2 * PORTS.len())
        .rev()
        .map(|o| KeyOpFieldValues::del(o.key.clone()))
        .collect();
    let mut core = core(batch)?;
    let (set, set_cpu, refused_set) = run(&mut core, &ops, batch);
    let (del, del_cpu, refused_del) = run(&mut core, &dels, batch);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    println!("core_batches: {routes} routes, batches of {batch}, no Redis, no switch");
    let per_key = |cpu: Duration, n: usize| cpu.as_secs_f64() * 1e6 / n as f64;
    println!(
        "  install: {set:.2?} = {:.0} keys/s, CPU {set_cpu:.2?} = {:.1} µs per key ({refused_set} refused)",
        ops.len() as f64 / set.as_secs_f64(),
        per_key(set_cpu, ops.len())
    );
    println!(
        "  delete:  {del:.2?} = {:.0} keys/s, CPU {del_cpu:.2?} = {:.1} µs per key ({refused_del} refused)",
        dels.len() as f64 / del.as_secs_f64(),
        per_key(del_cpu, dels.len())
    );
    println!("  load average {}", load.join(" "));
    anyhow::ensure!(refused_set == 0, "{refused_set} entries refused");
    Ok(())
}
