//! Collectives on the testbed: one `weft-traffic` rank per host namespace, started together,
//! killed by PID if they overrun; their reports summed into what nccl-tests would print, plus
//! what the fabric did (reordering, retransmissions, CNPs, PFC PAUSEs from COUNTERS_DB).
//!
//! BMv2 forwards a few thousand packets per second at best, shared by every switch on the
//! machine, so [`set_port_rates`] limits every egress queue of every switch to one rate below
//! that: the fabric then behaves like one whose links all have that speed, queues build where
//! the traffic matrix overloads a link, and [`measure_rate`] finds what one flow really gets.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use weft_topology::Topology;
use weft_traffic::collective::{Collective, Kind};
use weft_traffic::engine::{RankPlan, RankReport, Timing};
use weft_traffic::receiver::Placement;

use crate::{Result, State, TestbedError, io, run};

/// Which receivers the ranks emulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Nic {
    /// Per host, the intent's `ooo_tolerant`.
    Intent,
    OutOfOrder,
    GoBackN,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    pub kind: Kind,
    /// Host names, in rank order.
    pub ranks: Vec<String>,
    pub size: u64,
    /// Iterations first run and left out of the results (DCQCN and the ranks' start settle).
    pub warmup: u32,
    pub iterations: u32,
    pub lanes: u32,
    pub mtu: usize,
    /// Each NIC's line rate, packets per second of `mtu` payload.
    pub rate_pps: f64,
    pub nic: Nic,
    /// DSCP of the data (the lossless class), of CNPs, and of ACKs.
    pub dscp: u8,
    pub cnp_dscp: u8,
    pub ack_dscp: u8,
    /// The data's traffic class, whose PFC PAUSE counters are read.
    pub traffic_class: u8,
    /// The DSCP the fabric gives a trimmed data packet (the intent's `trim.dscp` when the data's
    /// class is trimmable): the ranks answer such a packet with a NACK of its PSN. None: the
    /// fabric does not trim this class.
    #[serde(default)]
    pub trim_dscp: Option<u8>,
    /// The endpoints' timers in packet times instead of the NIC defaults tuned for BMv2 (see
    /// [`Timing`]): a run set up as another fabric is.
    #[serde(default)]
    pub timing: Option<Timing>,
    pub deadline: Duration,
}

impl Spec {
    /// Defaults from the intent: the DSCP and TC of its lossless class, else of its trimmable
    /// one, else of the class named `roce` (with the trimmed DSCP when that class trims), CNPs
    /// in the class named `cnp` (else DSCP 48), ACKs with the CNPs (the testbed's rate limit
    /// counts packets, and an ACK must not cost what a 4 KB data packet costs).
    pub fn new(t: &Topology, kind: Kind, ranks: Vec<String>, size: u64) -> Spec {
        let data = t
            .qos
            .classes
            .iter()
            .find(|c| c.lossless)
            .or_else(|| t.qos.classes.iter().find(|c| c.trimmable))
            .or_else(|| t.class("roce"));
        let dscp = data.and_then(|c| c.dscp.first().copied()).unwrap_or(26);
        let tc = data.map_or(3, |c| c.traffic_class);
        let trim_dscp = data
            .filter(|c| c.trimmable)
            .and_then(|_| t.qos.trim.map(|x| x.dscp));
        let cnp = t
            .class("cnp")
            .and_then(|c| c.dscp.first().copied())
            .unwrap_or(48);
        Spec {
            kind,
            ranks,
            size,
            warmup: 1,
            iterations: 3,
            lanes: 1,
            mtu: 4096,
            rate_pps: 150.0,
            nic: Nic::Intent,
            dscp,
            cnp_dscp: cnp,
            ack_dscp: cnp,
            traffic_class: tc,
            trim_dscp,
            timing: None,
            deadline: Duration::from_secs(60),
        }
    }

    pub fn collective(&self) -> Collective {
        Collective {
            kind: self.kind,
            ranks: self.ranks.len() as u32,
            size: self.size,
        }
    }

    pub fn line_rate(&self) -> f64 {
        self.rate_pps * RankPlan::wire_bytes(self.mtu) as f64
    }
}

/// Reads back what serde_json writes for a NaN (null): runs that did not finish have no time.
pub fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Iteration {
    pub seconds: f64,
    pub algbw: f64,
    pub busbw: f64,
}

/// The outcome of one workload run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub collective: Kind,
    pub ranks: Vec<String>,
    pub size: u64,
    pub iterations: Vec<Iteration>,
    /// Mean over iterations.
    #[serde(deserialize_with = "f64_or_nan")]
    pub seconds: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub algbw: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub busbw: f64,
    /// Per message (posted → acknowledged).
    pub message_p50_s: f64,
    pub message_p99_s: f64,
    pub bytes_expected: u64,
    pub bytes_received: u64,
    /// Every rank finished and received every byte it expected.
    pub complete: bool,
    pub out_of_order: u64,
    pub max_reorder_depth: u64,
    pub retransmitted: u64,
    pub timeouts: u64,
    pub losses_detected: u64,
    pub duplicates: u64,
    pub ce_marked: u64,
    pub cnps: u64,
    /// Trimmed headers the receivers got (each NACKed unless already placed), and the trim
    /// NACKs the senders got back (each resent at once).
    #[serde(default)]
    pub trimmed_received: u64,
    #[serde(default)]
    pub trim_naks: u64,
    /// PAUSE frames all switches sent on the lossless class (None: COUNTERS_DB unreadable).
    pub pfc_pauses: Option<u64>,
    pub errors: Vec<String>,
}

/// Where `weft-traffic` is: next to this program, or on PATH.
pub fn locate_traffic() -> Result<PathBuf> {
    let here = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    crate::find("weft-traffic", &[&here]).ok_or_else(|| {
        TestbedError::Missing(
            "weft-traffic",
            format!(
                "build it (cargo build -p weft-traffic); looked in {} and on PATH",
                here.display()
            ),
        )
    })
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Kills what is still running (by PID) when dropped, also on an early return.
struct Ranks(Vec<Child>);

impl Drop for Ranks {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if c.try_wait().ok().flatten().is_none() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

fn plans(st: &State, t: &Topology, spec: &Spec) -> Result<Vec<(String, RankPlan)>> {
    let mut addrs = Vec::new();
    let mut out = Vec::new();
    for name in &spec.ranks {
        let h = st
            .host(name)
            .ok_or_else(|| TestbedError::Other(format!("no host {name} in the testbed")))?;
        let a: Ipv4Addr = h
            .ipv4
            .parse()
            .map_err(|_| TestbedError::Other(format!("host {name}: bad address {}", h.ipv4)))?;
        addrs.push(a);
    }
    let c = spec.collective();
    for (r, name) in spec.ranks.iter().enumerate() {
        let ooo = t
            .host_index(name)
            .map(|i| t.hosts[i].ooo_tolerant)
            .unwrap_or(false);
        let placement = match spec.nic {
            Nic::OutOfOrder => Placement::OutOfOrder,
            Nic::GoBackN => Placement::GoBackN,
            Nic::Intent if ooo => Placement::OutOfOrder,
            Nic::Intent => Placement::GoBackN,
        };
        let mut p = RankPlan::defaults(
            r as u32,
            addrs.clone(),
            c,
            spec.line_rate(),
            spec.mtu,
            placement,
        );
        p.iterations = spec.warmup + spec.iterations;
        p.lanes = spec.lanes;
        p.dscp = spec.dscp;
        p.cnp_dscp = spec.cnp_dscp;
        p.ack_dscp = Some(spec.ack_dscp);
        p.trim_dscp = spec.trim_dscp;
        p.deadline_ms = spec.deadline.as_millis() as u64;
        if let Some(t) = &spec.timing {
            p.set_timing(t);
        }
        out.push((name.clone(), p));
    }
    Ok(out)
}

fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1e9
}

/// Sums rank reports into an outcome (pure; `pfc_pauses` filled in by the caller).
pub fn summarize(spec: &Spec, reports: &[RankReport], errors: Vec<String>) -> Outcome {
    let c = spec.collective();
    let n_iter = (spec.warmup + spec.iterations) as usize;
    let start = reports
        .iter()
        .filter_map(|r| r.iterations.first().map(|i| i.start_ns))
        .min()
        .unwrap_or(0);
    let mut prev = start;
    let mut iterations = Vec::new();
    for i in 0..n_iter {
        let ends: Vec<u64> = reports
            .iter()
            .filter_map(|r| r.iterations.get(i).map(|x| x.end_ns))
            .collect();
        if ends.len() != reports.len() || ends.contains(&0) {
            break;
        }
        let end = ends.into_iter().max().unwrap_or(prev);
        let s = end.saturating_sub(prev) as f64 / 1e9;
        prev = end;
        if i < spec.warmup as usize {
            continue;
        }
        iterations.push(Iteration {
            seconds: s,
            algbw: c.algbw(s),
            busbw: c.busbw(s),
        });
    }
    let seconds = if iterations.is_empty() {
        f64::NAN
    } else {
        iterations.iter().map(|i| i.seconds).sum::<f64>() / iterations.len() as f64
    };
    let mut msgs: Vec<u64> = reports
        .iter()
        .flat_map(|r| r.message_ns.iter().copied())
        .collect();
    msgs.sort_unstable();
    let sum = |f: fn(&RankReport) -> u64| reports.iter().map(f).sum::<u64>();
    let complete = reports.len() == spec.ranks.len()
        && reports
            .iter()
            .all(|r| r.complete && r.bytes_received >= r.bytes_expected)
        && iterations.len() == spec.iterations as usize;
    Outcome {
        collective: spec.kind,
        ranks: spec.ranks.clone(),
        size: spec.size,
        seconds,
        algbw: c.algbw(seconds),
        busbw: c.busbw(seconds),
        iterations,
        message_p50_s: percentile(&msgs, 0.5),
        message_p99_s: percentile(&msgs, 0.99),
        bytes_expected: sum(|r| r.bytes_expected),
        bytes_received: sum(|r| r.bytes_received),
        complete,
        out_of_order: sum(|r| r.rx.out_of_order),
        max_reorder_depth: reports
            .iter()
            .map(|r| r.rx.max_reorder_depth)
            .max()
            .unwrap_or(0),
        retransmitted: sum(|r| r.tx.retransmitted),
        timeouts: sum(|r| r.tx.timeouts),
        losses_detected: sum(|r| r.rx.losses_detected),
        duplicates: sum(|r| r.rx.duplicates),
        ce_marked: sum(|r| r.ce_marked),
        cnps: sum(|r| r.cnps_sent),
        trimmed_received: sum(|r| r.rx.trimmed),
        trim_naks: sum(|r| r.tx.trim_naks),
        pfc_pauses: None,
        errors,
    }
}

/// Runs one collective: every rank in its host's namespace, started together.
pub fn run_workload(st: &State, t: &Topology, traffic: &Path, spec: &Spec) -> Result<Outcome> {
    let dir = st.state_dir.join("workload");
    std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    let plans = plans(st, t, spec)?;
    let pauses_before = pfc_pauses(st, spec.traffic_class);
    // Long enough for every namespace's process to start on a loaded machine.
    let start_at = unix_ns() + 1_500_000_000;
    let mut ranks = Ranks(Vec::new());
    let mut outs = Vec::new();
    for (name, mut p) in plans {
        p.start_at_unix_ns = Some(start_at);
        let pf = dir.join(format!("rank-{}.json", p.rank));
        let text = serde_json::to_string(&p).map_err(|e| TestbedError::Other(e.to_string()))?;
        std::fs::write(&pf, text).map_err(io(format!("writing {}", pf.display())))?;
        let of = dir.join(format!("rank-{}.out", p.rank));
        let ef = dir.join(format!("rank-{}.err", p.rank));
        let out = std::fs::File::create(&of).map_err(io(format!("creating {}", of.display())))?;
        let err = std::fs::File::create(&ef).map_err(io(format!("creating {}", ef.display())))?;
        let ns = crate::host_netns(&st.fabric, &name);
        let child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(traffic)
            .arg("rank")
            .arg("--plan")
            .arg(&pf)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(io("starting weft-traffic"))?;
        tracing::debug!(rank = p.rank, host = %name, pid = child.id(), "rank started");
        ranks.0.push(child);
        outs.push((of, ef));
    }
    let deadline = Instant::now() + spec.deadline + Duration::from_secs(10);
    while ranks
        .0
        .iter_mut()
        .any(|c| c.try_wait().ok().flatten().is_none())
    {
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(ranks);
    let mut reports = Vec::new();
    let mut errors = Vec::new();
    for (r, (of, ef)) in outs.iter().enumerate() {
        let text = std::fs::read_to_string(of).unwrap_or_default();
        match serde_json::from_str::<RankReport>(text.trim()) {
            Ok(rep) => {
                if let Some(e) = &rep.error {
                    errors.push(format!("rank {r}: {e}"));
                }
                reports.push(rep);
            }
            Err(_) => errors.push(format!(
                "rank {r} ({}) left no report: {}",
                spec.ranks[r],
                std::fs::read_to_string(ef).unwrap_or_default().trim()
            )),
        }
    }
    let mut o = summarize(spec, &reports, errors);
    o.pfc_pauses = match (pauses_before, pfc_pauses(st, spec.traffic_class)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    Ok(o)
}

/// What one flow through one path sustains, payload bytes per second: `packets` packets from
/// `src` to `dst`, with nothing else running.
pub fn measure_rate(
    st: &State,
    t: &Topology,
    traffic: &Path,
    spec: &Spec,
    src: &str,
    dst: &str,
    packets: u64,
) -> Result<f64> {
    let mut s = spec.clone();
    s.kind = Kind::Incast;
    s.ranks = vec![dst.to_string(), src.to_string()];
    s.size = packets * spec.mtu as u64;
    s.warmup = 0;
    s.iterations = 1;
    s.lanes = 1;
    let o = run_workload(st, t, traffic, &s)?;
    if !o.complete || o.seconds.is_nan() || o.seconds <= 0.0 {
        return Err(TestbedError::Other(format!(
            "the rate measurement {src} → {dst} did not complete: {:?}",
            o.errors
        )));
    }
    Ok(s.size as f64 / o.seconds)
}

/// Limits every egress queue of every switch to `pps` packets per second (0: unlimited),
/// through BMv2's Thrift CLI (`simple_switch_CLI` next to BMv2).
pub fn set_port_rates(st: &State, cli: &Path, pps: u64) -> Result<()> {
    for sw in &st.switches {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &st.netns, "/usr/bin/python3"])
            .arg(cli)
            .args(["--thrift-port", &sw.thrift_port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io("starting simple_switch_CLI"))?;
        if let Some(mut i) = child.stdin.take() {
            use std::io::Write;
            let _ = writeln!(i, "set_queue_rate {pps}");
        }
        let out = child
            .wait_with_output()
            .map_err(io("running simple_switch_CLI"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || text.contains("Error") || text.contains("Could not connect") {
            return Err(TestbedError::Command {
                cmd: format!("set_queue_rate {pps} on {}", sw.name),
                stderr: text.trim().to_string(),
            });
        }
    }
    Ok(())
}

/// PAUSE frames every switch has sent on priority `tc` (COUNTERS_DB, as the plugin publishes
/// them), or None if a switch's DB cannot be read.
pub fn pfc_pauses(st: &State, tc: u8) -> Option<u64> {
    let field = format!("SAI_PORT_STAT_PFC_{tc}_TX_PKTS");
    counter_sum(st, |port| (format!("COUNTERS:{port}"), field.clone()))
}

/// Packets of traffic class `tc` every switch has trimmed (COUNTERS_DB
/// `SAI_QUEUE_STAT_TRIM_PACKETS`, counted under the class before trimming), or None if a
/// switch's DB cannot be read.
pub fn trimmed_packets(st: &State, tc: u8) -> Option<u64> {
    counter_sum(st, |port| {
        (
            format!("COUNTERS:{port}:{tc}"),
            "SAI_QUEUE_STAT_TRIM_PACKETS".to_string(),
        )
    })
}

/// One COUNTERS_DB field per port (`cell` names its key and field), summed over every port of
/// every switch; a field not there yet counts 0, a DB that cannot be read makes it None.
fn counter_sum(st: &State, cell: impl Fn(&str) -> (String, String)) -> Option<u64> {
    let mut total = 0;
    for sw in &st.switches {
        let mut args: Vec<String> = Vec::new();
        if let Some(sock) = sw.db.strip_prefix("unix://") {
            args.extend(["-s".into(), sock.into()]);
        } else if let Some(hp) = sw.db.strip_prefix("redis://") {
            let (h, p) = hp.trim_end_matches('/').rsplit_once(':')?;
            args.extend(["-h".into(), h.into(), "-p".into(), p.into()]);
        } else {
            return None;
        }
        args.extend(["-n".into(), "2".into(), "--raw".into()]);
        for port in sw.interfaces.keys() {
            let (key, field) = cell(port);
            let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
            a.extend(["HGET", &key, &field]);
            let out = run(&[&["redis-cli"][..], &a].concat()).ok()?;
            total += out.trim().parse::<u64>().unwrap_or(0);
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_traffic::engine::IterationTimes;

    fn report(rank: u32, iters: &[(u64, u64)], expected: u64, received: u64) -> RankReport {
        RankReport {
            rank,
            complete: true,
            iterations: iters
                .iter()
                .map(|&(s, e)| IterationTimes {
                    start_ns: s,
                    end_ns: e,
                })
                .collect(),
            bytes_expected: expected,
            bytes_received: received,
            message_ns: vec![u64::from(rank + 1) * 1_000_000],
            ..RankReport::default()
        }
    }

    fn spec(kind: Kind, n: usize) -> Spec {
        Spec {
            kind,
            ranks: (0..n).map(|i| format!("h{i}")).collect(),
            size: 8_000_000,
            warmup: 0,
            iterations: 2,
            lanes: 1,
            mtu: 4096,
            rate_pps: 300.0,
            nic: Nic::Intent,
            dscp: 26,
            cnp_dscp: 48,
            ack_dscp: 48,
            traffic_class: 3,
            trim_dscp: None,
            timing: None,
            deadline: Duration::from_secs(10),
        }
    }

    fn example(name: &str) -> Topology {
        weft_topology::load_file(
            concat!(env!("CARGO_MANIFEST_DIR"), "/../topology/examples/").to_string() + name,
        )
        .expect("example intent")
    }

    #[test]
    fn a_trimmable_class_gives_the_ranks_its_trimmed_dscp_and_a_lossless_one_none() {
        let s = Spec::new(&example("leaf-spine-trim.yaml"), Kind::Incast, vec![], 1);
        assert_eq!((s.dscp, s.traffic_class, s.trim_dscp), (26, 3, Some(11)));
        let s = Spec::new(&example("leaf-spine-small.yaml"), Kind::Incast, vec![], 1);
        assert_eq!((s.dscp, s.traffic_class, s.trim_dscp), (26, 3, None));
    }

    #[test]
    fn iterations_end_when_the_last_rank_ends_and_bandwidths_follow_nccl_tests() {
        let s = spec(Kind::AllReduce, 4);
        let r: Vec<RankReport> = (0..4)
            .map(|i| {
                report(
                    i,
                    &[(10, 1_000_000_000 + u64::from(i)), (0, 3_000_000_000)],
                    5,
                    5,
                )
            })
            .collect();
        let o = summarize(&s, &r, Vec::new());
        assert!(o.complete);
        assert_eq!(o.iterations.len(), 2);
        // First: from the earliest start (10 ns) to the last end; second: 2 s after it.
        assert!((o.iterations[0].seconds - (1_000_000_003.0 - 10.0) / 1e9).abs() < 1e-12);
        assert!((o.iterations[1].seconds - 1.999_999_997).abs() < 1e-9);
        let busbw = o.algbw * 2.0 * 3.0 / 4.0;
        assert!((o.busbw - busbw).abs() < 1e-6);
        assert!((o.algbw - 8e6 / o.seconds).abs() < 1e-6);
        assert_eq!(o.message_p50_s, 0.003);
        assert_eq!(o.message_p99_s, 0.004);
    }

    #[test]
    fn warmup_iterations_are_run_but_left_out_of_the_results() {
        let mut s = spec(Kind::AllToAll, 2);
        s.warmup = 1;
        s.iterations = 1;
        let r = vec![
            report(
                0,
                &[(0, 5_000_000_000), (5_000_000_000, 6_000_000_000)],
                5,
                5,
            ),
            report(
                1,
                &[(0, 5_000_000_000), (5_000_000_000, 6_000_000_000)],
                5,
                5,
            ),
        ];
        let o = summarize(&s, &r, Vec::new());
        assert!(o.complete);
        assert_eq!(o.iterations.len(), 1);
        assert!((o.seconds - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_rank_missing_bytes_or_an_iteration_makes_the_run_incomplete() {
        let s = spec(Kind::AllToAll, 2);
        let r = vec![
            report(0, &[(0, 10), (10, 20)], 5, 5),
            report(1, &[(0, 10), (10, 20)], 5, 4),
        ];
        assert!(!summarize(&s, &r, Vec::new()).complete);
        let r = vec![
            report(0, &[(0, 10), (10, 20)], 5, 5),
            report(1, &[(0, 10)], 5, 5),
        ];
        let o = summarize(&s, &r, Vec::new());
        assert!(!o.complete);
        assert_eq!(o.iterations.len(), 1);
        let r = vec![report(0, &[(0, 10), (10, 20)], 5, 5)];
        assert!(
            !summarize(&s, &r, Vec::new()).complete,
            "a rank left no report"
        );
    }
}
