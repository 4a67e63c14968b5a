//! One link down (and back up) on large fat-trees, the way `weft run` handles it: the compiler's
//! link change, every changed switch's new P4RT entries, the diff against what the switch
//! acknowledged, the write batches.
//! Run: `cargo bench -p weft-reconcile --bench link_down` (`WEFT_BENCH_K=64` for one size,
//! `WEFT_BENCH_RUNS=N` repetitions, `WEFT_BENCH_FULL=1` also the whole-switch path).
//!
//! Each time is printed as p50 and worst over the repetitions, on the wall clock and on the
//! bench thread's CPU clock: on a busy machine most of the wall time is other processes' turns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_compiler::p4delta::WireMemo;
use weft_compiler::{Compiler, LinkState, p4map};
use weft_reconcile::core::{self, Core, CoreConfig, Input, Output};
use weft_reconcile::plan::{self, Installed};
use weft_sonic_schema::state::{PluginState, PluginStatus};
use weft_topology::{LinkIdx, Topology};

const MS: u64 = 1_000_000;

/// A point in time on the wall clock and on this thread's CPU clock.
#[derive(Clone, Copy)]
struct Stamp {
    wall: Instant,
    cpu: Duration,
}

impl Stamp {
    fn now() -> Stamp {
        let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Stamp {
            wall: Instant::now(),
            cpu: Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
        }
    }
}

/// Seconds from `a` to `b`: (wall, CPU).
fn between(a: Stamp, b: Stamp) -> (f64, f64) {
    (
        (b.wall - a.wall).as_secs_f64(),
        b.cpu.saturating_sub(a.cpu).as_secs_f64(),
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn worst(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// `p50 X ms, worst Y ms` of samples in seconds.
fn summary(v: &[f64]) -> String {
    format!(
        "p50 {:7.2} ms, worst {:7.2} ms",
        median(v.to_vec()) * 1e3,
        worst(v) * 1e3
    )
}

/// Wall and CPU samples of one measurement.
#[derive(Default)]
struct Samples {
    wall: Vec<f64>,
    cpu: Vec<f64>,
}

impl Samples {
    fn push(&mut self, (wall, cpu): (f64, f64)) {
        self.wall.push(wall);
        self.cpu.push(cpu);
    }

    fn show(&self) -> String {
        format!("wall {} | CPU {}", summary(&self.wall), summary(&self.cpu))
    }
}

fn running() -> PluginStatus {
    PluginStatus::fresh(PluginState::Running, "bench")
}

/// What a switch holding `d` reads back as.
fn installed_of(d: &plan::DesiredSwitch) -> Installed {
    Installed::holding(d, Some(running()))
}

fn picks(t: &Topology) -> [(&'static str, LinkIdx); 2] {
    [
        (
            "leaf-spine",
            t.links
                .iter()
                .position(|l| t.switches[l.a.switch].name.contains("leaf"))
                .unwrap_or(0),
        ),
        (
            "spine-core",
            t.links
                .iter()
                .position(|l| t.switches[l.b.switch].name.starts_with("core"))
                .unwrap_or(0),
        ),
    ]
}

/// The switch acknowledges every entry of `batches`.
fn acknowledge(inst: &mut Installed, batches: &[Arc<core::Batch>]) {
    for b in batches {
        if let core::Batch::Entries { delete, ops, .. } = &**b {
            for (k, f) in ops {
                if *delete {
                    inst.entries.remove(k);
                } else {
                    inst.entries.insert(k.clone(), f.clone());
                }
            }
        }
    }
}

/// Each changed switch's write batches, the time (wall, CPU) after the compiler, after the
/// mapping and after the diff and batches, and how many things were mapped and diffed.
type Changed = (
    Vec<(usize, Arc<[Arc<core::Batch>]>)>,
    [(f64, f64); 3],
    (usize, usize),
);

#[derive(Clone, Copy, PartialEq)]
enum Path {
    /// Every changed switch mapped whole and diffed whole (what `weft run` did before deltas).
    Full,
    /// Only the changed routes and groups mapped, only their entries diffed.
    Delta,
}

/// One link change the way `path` handles it.
fn change(
    t: &Topology,
    info: &weft_p4rt::P4Info,
    c: &mut Compiler,
    installed: &[Installed],
    l: LinkIdx,
    down: bool,
    path: Path,
) -> Changed {
    let none = std::collections::BTreeSet::new();
    let t0 = Stamp::now();
    match path {
        Path::Full => {
            let changed = c.set_link(l, down);
            let t1 = Stamp::now();
            let desired: Vec<plan::DesiredSwitch> = changed
                .iter()
                .map(|&si| {
                    plan::desired_switch(t, info, &c.switches()[si], si)
                        .unwrap_or_else(|e| panic!("{e}"))
                })
                .collect();
            let t2 = Stamp::now();
            let plans: Vec<_> = changed
                .iter()
                .zip(desired)
                .map(|(&si, ds)| {
                    let p = plan::diff(
                        t,
                        si,
                        &c.switches()[si],
                        ds,
                        &installed[si],
                        &none,
                        plan::Views::Without,
                    );
                    (si, core::batches(p).into_iter().map(Arc::new).collect())
                })
                .collect();
            let t3 = Stamp::now();
            let n = plans.len();
            (plans, [t1, t2, t3].map(|t| between(t0, t)), (n, n))
        }
        Path::Delta => {
            let deltas = c.set_link_delta(l, down);
            let t1 = Stamp::now();
            let mut memo = WireMemo::new(t, info);
            let entries: Vec<_> = deltas
                .iter()
                .map(|d| {
                    memo.entry_delta(&c.switches()[d.switch], d)
                        .unwrap_or_else(|e| panic!("{e}"))
                })
                .collect();
            let t2 = Stamp::now();
            // As `weft run`'s core does: each distinct delta diffed once, its batches shared.
            let mut shared = core::BatchMemo::default();
            let plans: Vec<_> = deltas
                .iter()
                .zip(&entries)
                .map(|(d, ed)| {
                    (
                        d.switch,
                        shared.batches(t, d.switch, ed, &installed[d.switch]),
                    )
                })
                .collect();
            let t3 = Stamp::now();
            (
                plans,
                [t1, t2, t3].map(|t| between(t0, t)),
                (memo.mapped, shared.diffed),
            )
        }
    }
}

/// The compiler alone, then with the mapping of every changed switch, then with the diff and
/// batches.
fn staged(t: &Topology, info: &weft_p4rt::P4Info, runs: usize, path: Path) {
    let mut c = Compiler::new(t, LinkState::all_up(t));
    let mut installed: Vec<Installed> = c
        .switches()
        .iter()
        .enumerate()
        .map(|(si, sw)| {
            installed_of(&plan::desired_switch(t, info, sw, si).unwrap_or_else(|e| panic!("{e}")))
        })
        .collect();
    for (what, l) in picks(t) {
        for down in [true, false] {
            let mut times: [Samples; 3] = Default::default();
            let (mut n, mut writes, mut mapped) = (0, 0, (0, 0));
            for _ in 0..runs {
                // Start from the other state, acknowledged by every switch.
                let (plans, _, _) = change(t, info, &mut c, &installed, l, !down, Path::Delta);
                for (si, p) in &plans {
                    acknowledge(&mut installed[*si], p);
                }
                let (plans, at, m) = change(t, info, &mut c, &installed, l, down, path);
                for (v, x) in times.iter_mut().zip(at) {
                    v.push(x);
                }
                n = plans.len();
                mapped = m;
                writes = plans
                    .iter()
                    .flat_map(|(_, b)| b.iter().map(|b| b.len()))
                    .sum::<usize>();
                for (si, p) in &plans {
                    acknowledge(&mut installed[*si], p);
                }
            }
            let [a, b, d] = times.each_ref().map(|s| median(s.cpu.clone()));
            println!(
                "  {:<5} {what:<10} {:<4}: CPU p50 set_link {:7.2} ms, + map {:7.2} ms, + diff and batches {:7.2} ms; all of it: {} ({n} switches, {writes} entries to write, {} {} mapped, {} diffed)",
                if path == Path::Full { "full" } else { "delta" },
                if down { "down" } else { "up" },
                a * 1e3,
                b * 1e3,
                d * 1e3,
                times[2].show(),
                mapped.0,
                if path == Path::Full {
                    "switches"
                } else {
                    "distinct routes/groups"
                },
                if path == Path::Full {
                    format!("{} switches", mapped.1)
                } else {
                    format!("{} distinct deltas", mapped.1)
                },
            );
        }
        let (plans, _, _) = change(t, info, &mut c, &installed, l, false, Path::Delta);
        for (si, p) in &plans {
            acknowledge(&mut installed[*si], p);
        }
    }
}

/// The simulated fabric of [`core_path`]: takes every write and answers at once, until the
/// core asks for nothing more.
fn settle(c: &mut Core, now: u64, mut outs: Vec<Output>, fabric: &mut [Installed]) {
    while !outs.is_empty() {
        let mut next = Vec::new();
        for o in outs {
            match o {
                Output::Read { switch, ticket, .. } => next.extend(c.step(
                    now,
                    Input::ReadBack {
                        switch,
                        ticket,
                        result: Ok(Box::new(fabric[switch].clone())),
                    },
                )),
                Output::Write {
                    switch,
                    ticket,
                    batch,
                } => {
                    let answers = take(&batch, &mut fabric[switch]);
                    next.extend(c.step(
                        now,
                        Input::Written {
                            switch,
                            ticket,
                            result: Ok(answers),
                        },
                    ))
                }
                _ => {}
            }
        }
        outs = next;
    }
}

/// A switch of the simulated fabric takes a batch whole.
fn take(batch: &core::Batch, sw: &mut Installed) -> Vec<core::Answer> {
    let mut answers = Vec::new();
    match batch {
        core::Batch::Config { set, del } => {
            for s in set {
                let mut f = s.fields();
                f.sort();
                answers.push(core::Answer::ok(s.redis_key()));
                sw.config.insert(s.redis_key(), f);
            }
            for k in del {
                answers.push(core::Answer::ok(k.clone()));
                sw.config.remove(k);
            }
        }
        core::Batch::Entries { delete, ops, .. } => {
            for (k, f) in ops {
                answers.push(core::Answer::ok(k.clone()));
                if *delete {
                    sw.entries.remove(k);
                } else {
                    sw.entries.insert(k.clone(), f.clone());
                }
            }
        }
    }
    answers
}

/// `weft run`'s core on a converged fabric: the port event (or the tick after hold-down that
/// brings the link back) until every write batch is out.
fn core_path(t: &Topology, info: Arc<weft_p4rt::P4Info>, runs: usize) {
    let mut c = Core::new(t, info.clone(), CoreConfig::run(3_600_000 * MS));
    c.measure = false;
    let mut now = 0;
    // Every switch already holds what it should.
    let c0 = Compiler::new(t, LinkState::all_up(t));
    let mut fabric: Vec<Installed> = c0
        .switches()
        .iter()
        .enumerate()
        .map(|(si, sw)| {
            installed_of(&plan::desired_switch(t, &info, sw, si).unwrap_or_else(|e| panic!("{e}")))
        })
        .collect();
    drop(c0);
    let pending = c.step(now, Input::Start);
    settle(&mut c, now, pending, &mut fabric);
    assert!(c.converged(), "the prefilled fabric converges at once");
    let hold = t.failover.hold_down.to_std().as_nanos() as u64;
    for (what, l) in picks(t) {
        let port = t.links[l].a;
        let (mut down_t, mut up_t) = (Samples::default(), Samples::default());
        let mut writes = 0;
        for _ in 0..runs {
            now += 1_000 * MS;
            let t0 = Stamp::now();
            let outs = c.step(
                now,
                Input::Port {
                    port,
                    up: false,
                    seen: now,
                },
            );
            down_t.push(between(t0, Stamp::now()));
            writes = outs
                .iter()
                .filter(|o| matches!(o, Output::Write { .. }))
                .count();
            settle(&mut c, now, outs, &mut fabric);
            now += 1_000 * MS;
            let outs = c.step(
                now,
                Input::Port {
                    port,
                    up: true,
                    seen: now,
                },
            );
            settle(&mut c, now, outs, &mut fabric);
            // Back in use once the hold-down has passed.
            now += hold + MS;
            let t0 = Stamp::now();
            let outs = c.step(now, Input::Tick);
            up_t.push(between(t0, Stamp::now()));
            settle(&mut c, now, outs, &mut fabric);
            assert!(c.converged());
            // Let the dampening penalty decay so every run starts alike.
            now += 3_600_000 * MS;
            let outs = c.step(now, Input::Tick);
            settle(&mut c, now, outs, &mut fabric);
        }
        println!(
            "  weft run core {what:<10} port down → batches out ({writes} switches written, {runs} runs): {}",
            down_t.show()
        );
        println!(
            "  weft run core {what:<10} hold-down over → batches out:                     {}",
            up_t.show()
        );
    }
}

fn main() {
    let info = Arc::new(p4map::pipeline_p4info().unwrap_or_else(|e| panic!("{e}")));
    let only: Option<u32> = std::env::var("WEFT_BENCH_K")
        .ok()
        .and_then(|k| k.parse().ok());
    let runs: Option<usize> = std::env::var("WEFT_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0);
    for (k, default_runs) in [(32u32, 15usize), (64, 11)] {
        if only.is_some_and(|o| o != k) {
            continue;
        }
        let runs = runs.unwrap_or(default_runs);
        let yaml = format!(
            "generators:\n  - kind: fat-tree\n    k: {k}\nrouting:\n  default:\n    mode: wcmp\n"
        );
        let t = weft_topology::load_str(&yaml, "bench").unwrap_or_else(|e| panic!("{e}"));
        println!(
            "fat-tree k={k}: {} switches, {} hosts",
            t.switches.len(),
            t.hosts.len()
        );
        staged(&t, &info, runs.min(5), Path::Delta);
        core_path(&t, info.clone(), runs);
        if std::env::var_os("WEFT_BENCH_FULL").is_some() {
            staged(&t, &info, runs.min(3), Path::Full);
        }
    }
}
