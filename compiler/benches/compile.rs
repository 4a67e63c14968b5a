//! Full compile of large fabrics, the mapping of every switch's desired state to P4RT_TABLE
//! entries (what `weft plan` does for each switch), and the delta after one link goes down.
//! Run: `cargo bench -p weft-compiler --bench compile`.

use std::time::Instant;

use weft_compiler::{Compiler, LinkState, compile, p4map};

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    for (k, runs) in [(32u32, 5usize), (64, 3)] {
        let yaml = format!(
            "generators:\n  - kind: fat-tree\n    k: {k}\nrouting:\n  default:\n    mode: wcmp\n"
        );
        let t = weft_topology::load_str(&yaml, "bench").unwrap_or_else(|e| panic!("{e}"));
        let ls = LinkState::all_up(&t);
        let mut times = Vec::new();
        let mut entries = 0;
        for _ in 0..runs {
            let t0 = Instant::now();
            let d = compile(&t, &ls);
            times.push(t0.elapsed().as_secs_f64());
            entries = d
                .switches
                .iter()
                .map(|s| s.routes.len() + s.nexthops.len() + s.groups.len())
                .sum::<usize>();
        }
        let full = median(times);
        // P4RT_TABLE entries of every switch, one switch at a time (as `weft plan` streams them).
        let d = compile(&t, &ls);
        let info = p4map::pipeline_p4info().unwrap_or_else(|e| panic!("{e}"));
        let mut map_times = Vec::new();
        let mut mapped = 0usize;
        for _ in 0..runs {
            let t0 = Instant::now();
            mapped = 0;
            for sw in &d.switches {
                let e = p4map::entries(&t, &info, sw).unwrap_or_else(|e| panic!("{e}"));
                mapped += e.len();
            }
            map_times.push(t0.elapsed().as_secs_f64());
        }
        let map = median(map_times);
        println!(
            "fat-tree k={k}: mapping every switch to P4RT_TABLE entries: median {:.1} ms, {mapped} entries ({:.0} ns per entry, {:.1} us per switch)",
            map * 1e3,
            map * 1e9 / mapped.max(1) as f64,
            map * 1e6 / d.switches.len().max(1) as f64,
        );
        drop(d);
        println!(
            "fat-tree k={k}: {} switches, {} hosts: full compile median {:.1} ms, {} route+nexthop+group entries, peak RSS {:.0} MiB",
            t.switches.len(),
            t.hosts.len(),
            full * 1e3,
            entries,
            peak_rss_mib()
        );
        // One link down (and back up), recomputing only what changes.
        let mut inc = Compiler::new(&t, ls.clone());
        let picks = [
            (
                "leaf-spine link",
                t.links
                    .iter()
                    .position(|l| t.switches[l.a.switch].name.contains("leaf"))
                    .unwrap_or(0),
            ),
            (
                "spine-core link",
                t.links
                    .iter()
                    .position(|l| t.switches[l.b.switch].name.starts_with("core"))
                    .unwrap_or(0),
            ),
        ];
        for (what, l) in picks {
            let mut down_t = Vec::new();
            let mut up_t = Vec::new();
            let mut changed = 0;
            for _ in 0..5 {
                let t0 = Instant::now();
                changed = inc.set_link(l, true).len();
                down_t.push(t0.elapsed().as_secs_f64());
                let t0 = Instant::now();
                inc.set_link(l, false);
                up_t.push(t0.elapsed().as_secs_f64());
            }
            let d = median(down_t);
            println!(
                "  k={k} one {what} down: {:.2} ms ({changed} switches changed), back up: {:.2} ms; full/incremental = {:.0}x",
                d * 1e3,
                median(up_t) * 1e3,
                full / d
            );
        }
    }
}
