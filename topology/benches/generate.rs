//! Parse + validate + generate large fabrics. Run: `cargo bench -p weft-topology --bench generate`.
//!
//! Reports the median of several runs and the process's peak RSS (VmHWM), which includes every
//! run, so it is an upper bound for one.

use std::time::Instant;

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

fn bench(label: &str, yaml: &str, runs: usize) -> f64 {
    let mut times = Vec::with_capacity(runs);
    let mut sizes = (0, 0, 0);
    for _ in 0..runs {
        let t0 = Instant::now();
        let topo = match weft_topology::load_str(yaml, label) {
            Ok(t) => t,
            Err(e) => panic!("{label}: {e}"),
        };
        times.push(t0.elapsed().as_secs_f64());
        sizes = (topo.switches.len(), topo.hosts.len(), topo.links.len());
        drop(topo);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    println!(
        "{label:<22} {:>6} switches {:>7} hosts {:>7} links   median {:>8.1} ms   min {:>8.1} ms   peak RSS {:>7.1} MiB",
        sizes.0,
        sizes.1,
        sizes.2,
        median * 1e3,
        times[0] * 1e3,
        peak_rss_mib()
    );
    median
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    let k32 = bench(
        "fat-tree k=32",
        "generators:\n  - kind: fat-tree\n    k: 32\n",
        7,
    );
    let k64 = bench(
        "fat-tree k=64",
        "generators:\n  - kind: fat-tree\n    k: 64\n",
        5,
    );
    bench(
        "multi-plane 8×64",
        "generators:\n  - kind: multi-plane\n    planes: 8\n    radix: 64\n",
        5,
    );
    println!("k=64 / k=32 time ratio: {:.2} (8× the hosts)", k64 / k32);
}
