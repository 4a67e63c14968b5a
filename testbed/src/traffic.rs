//! Traffic between hosts: pings, paced UDP streams (`udp_probe.py`), what they lost, and the
//! ports of a switch they crossed.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Result, TestbedError, io};
use crate::exec::{Reap, run, wait_for};
use crate::state::State;
use crate::wires::set_link;

/// Pings every other host from every host (IPv4, one echo each). Returns (from, to, ok).
pub fn ping_all(st: &State, timeout_s: u32) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for a in &st.hosts {
        for b in &st.hosts {
            if a.name == b.name {
                continue;
            }
            let ok = run(&[
                "ip",
                "netns",
                "exec",
                &a.netns,
                "ping",
                "-c",
                "1",
                "-W",
                &timeout_s.to_string(),
                "-q",
                &b.ipv4,
            ])
            .is_ok();
            out.push((a.name.clone(), b.name.clone(), ok));
        }
    }
    out
}

/// The paced UDP probe (sender and receiver), run inside host namespaces.
pub const UDP_PROBE: &str = include_str!("../../tests/scripts/udp_probe.py");

pub(crate) fn probe_path(st: &State) -> Result<PathBuf> {
    let p = st.state_dir.join("udp_probe.py");
    if !p.exists() {
        fs::write(&p, UDP_PROBE).map_err(io(format!("writing {}", p.display())))?;
    }
    Ok(p)
}

/// Packets BMv2 sent out of each connected port of `switch` (the tx count of the port's
/// interface, as the kernel counts it: independent of the pipeline's own counters).
pub fn port_tx(st: &State, switch: &str) -> Result<BTreeMap<String, u64>> {
    let sw = st
        .switch(switch)
        .ok_or_else(|| TestbedError::Other(format!("no switch {switch}")))?;
    let mut out = BTreeMap::new();
    for (port, i) in &sw.interfaces {
        let text = run(&[
            "ip",
            "netns",
            "exec",
            &st.netns,
            "cat",
            &format!("/sys/class/net/{i}/statistics/tx_packets"),
        ])?;
        let n = text.trim().parse::<u64>().map_err(|e| {
            TestbedError::Other(format!("tx_packets of {i}: {e}: {:?}", text.trim()))
        })?;
        out.insert(port.clone(), n);
    }
    Ok(out)
}

/// Packets BMv2 sent out of all connected ports of `switch`.
pub fn port_tx_packets(st: &State, switch: &str) -> Result<u64> {
    Ok(port_tx(st, switch)?.values().sum())
}

/// Sends `packets` from `src` to `dst` over `flows` UDP flows at a paced rate and returns, per
/// spine, how many packets it forwarded meanwhile, and how many arrived.
pub fn spread(
    st: &State,
    src: &str,
    dst: &str,
    packets: u32,
    flows: u32,
    spines: &[String],
) -> Result<(Vec<(String, u64)>, u64)> {
    let before: Vec<u64> = spines
        .iter()
        .map(|s| port_tx_packets(st, s))
        .collect::<Result<_>>()?;
    let pps = 500;
    let (res, ()) = stream(
        st,
        &Stream {
            src,
            dst,
            port: 5001,
            pps,
            seconds: f64::from(packets) / f64::from(pps),
            flows,
        },
        || (),
    )?;
    let after: Vec<u64> = spines
        .iter()
        .map(|s| port_tx_packets(st, s))
        .collect::<Result<_>>()?;
    Ok((
        spines
            .iter()
            .cloned()
            .zip(before.iter().zip(after).map(|(b, a)| a.saturating_sub(*b)))
            .collect(),
        res.received,
    ))
}

/// What the receiving side of a paced stream counted (`udp_probe.py recv`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StreamResult {
    pub received: u64,
    pub unique: u64,
    pub max_seq: i64,
    pub lost: u64,
    pub max_gap_ms: Option<f64>,
    pub ce_marked: u64,
    /// The longest loss window on the sender's clock (0 without loss).
    #[serde(default)]
    pub outage_ms: f64,
    /// When it began (ms since the epoch), to line it up with logs.
    #[serde(default)]
    pub outage_from_unix_ms: Option<f64>,
    /// Every run of lost packets (the first 100).
    #[serde(default)]
    pub loss_runs: Vec<LossRun>,
    /// The largest gap between two arrivals by the kernel's receive timestamps (a receiver
    /// scheduled late does not widen it), when it began (ms since the epoch) and the sequence
    /// number that arrived before it.
    #[serde(default)]
    pub max_kernel_gap_ms: Option<f64>,
    #[serde(default)]
    pub kernel_gap_from_unix_ms: Option<f64>,
    #[serde(default)]
    pub kernel_gap_after_seq: Option<u64>,
    /// What the sender reported (absent from receivers' reports; [`stream`] adds it).
    #[serde(default)]
    pub sender: Option<SenderReport>,
}

/// The sending side of a paced stream (`udp_probe.py send --out`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SenderReport {
    /// Datagrams the kernel accepted.
    pub sent: u64,
    /// Sends that failed (an ICMP error reported on the socket, no buffer): not sent.
    pub errors: u64,
    /// The furthest any send fell behind its schedule (the pacing then catches up in a burst).
    pub max_late_ms: f64,
    /// Every send more than 2 ms behind its schedule (the first 200).
    pub late: Vec<LateSend>,
}

/// A send behind its schedule.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LateSend {
    pub seq: u64,
    pub unix_ms: f64,
    pub late_ms: f64,
}

/// Consecutive packets that did not arrive.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LossRun {
    /// The last sequence number that arrived before the run.
    pub after_seq: u64,
    pub lost: u64,
    /// When the packet before the run was sent (ms since the epoch).
    pub from_unix_ms: f64,
    /// From that packet's sending to the sending of the first one after the run.
    pub ms: f64,
    /// The path's delay (kernel arrival − send) of the packet before the run: far above its
    /// usual fraction of a millisecond, a switch's queue was building up.
    #[serde(default)]
    pub delay_before_ms: Option<f64>,
    /// How many of the 20 sends before the run left less than 0.2 ms apart (a sender catching
    /// up on its schedule).
    #[serde(default)]
    pub burst_before: Option<u32>,
}

/// A paced UDP stream between two hosts.
#[derive(Debug, Clone)]
pub struct Stream<'a> {
    pub src: &'a str,
    pub dst: &'a str,
    pub port: u16,
    pub pps: u32,
    pub seconds: f64,
    pub flows: u32,
}

/// Runs `s` (receiver first, then the sender) with `during` called while it flows; returns
/// what arrived, what the sender reported, and what `during` returned. Every datagram's
/// sequence number, send time, kernel arrival and read time are left in the state directory
/// (`stream-SRC-DST-PORT.packets.csv`).
pub fn stream<R>(
    st: &State,
    s: &Stream<'_>,
    during: impl FnOnce() -> R,
) -> Result<(StreamResult, R)> {
    let probe = probe_path(st)?;
    let probe = probe.to_string_lossy().into_owned();
    let host = |n: &str| {
        st.host(n)
            .ok_or_else(|| TestbedError::Other(format!("no host {n} in the testbed")))
    };
    let (hs, hd) = (host(s.src)?, host(s.dst)?);
    let out = st
        .state_dir
        .join(format!("stream-{}-{}-{}.json", s.src, s.dst, s.port));
    let _ = fs::remove_file(&out);
    let ready = out.with_extension("ready");
    let _ = fs::remove_file(&ready);
    let sent = out.with_extension("sender.json");
    let _ = fs::remove_file(&sent);
    let log = out.with_extension("packets.csv");
    let port = s.port.to_string();
    let recv = Command::new("ip")
        .args(["netns", "exec", &hd.netns, "python3", &probe, "recv"])
        .args([
            "--port",
            &port,
            "--seconds",
            &format!("{}", s.seconds + 2.0),
        ])
        .arg("--out")
        .arg(&out)
        .arg("--ready")
        .arg(&ready)
        .arg("--log")
        .arg(&log)
        .stdin(Stdio::null())
        .spawn()
        .map_err(io("starting the receiver"))?;
    let mut recv = Reap(recv);
    // A receiver still starting (slow on a busy machine) would count the first packets lost.
    wait_for("the stream's receiver", Duration::from_secs(20), || {
        ready.exists()
    })?;
    let send = Command::new("ip")
        .args(["netns", "exec", &hs.netns, "python3", &probe, "send"])
        .args(["--dst", &hd.ipv4, "--port", &port])
        .args(["--pps", &s.pps.to_string()])
        .args(["--seconds", &s.seconds.to_string()])
        .args(["--flows", &s.flows.to_string()])
        .arg("--out")
        .arg(&sent)
        .stdin(Stdio::null())
        .spawn()
        .map_err(io("starting the sender"))?;
    let mut send = Reap(send);
    let r = during();
    let _ = send.0.wait();
    let _ = recv.0.wait();
    let text = fs::read_to_string(&out).map_err(io(format!(
        "reading the receiver's result {}",
        out.display()
    )))?;
    let mut res: StreamResult = serde_json::from_str(&text)
        .map_err(|e| TestbedError::Other(format!("{}: {e}", out.display())))?;
    // A sender that died before reporting leaves `sender` unknown, not zero.
    res.sender = fs::read_to_string(&sent)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    Ok((res, r))
}

/// The port of `candidates` on `switch` that sent the most packets during `window` (which
/// link a running stream's flow hashed onto), with that count.
pub fn busiest_port(
    st: &State,
    switch: &str,
    candidates: &[String],
    window: Duration,
) -> Result<(String, u64)> {
    let a = port_tx(st, switch)?;
    std::thread::sleep(window);
    let b = port_tx(st, switch)?;
    candidates
        .iter()
        .map(|p| {
            let d = b.get(p).copied().unwrap_or(0) - a.get(p).copied().unwrap_or(0);
            (p.clone(), d)
        })
        .max_by_key(|(_, d)| *d)
        .ok_or_else(|| TestbedError::Other(format!("{switch}: no candidate ports")))
}

/// One failover measurement: a one-flow stream from `stream.src`; while it flows, the cable of
/// the `uplinks` port of `switch` that carries it is pulled at `fail_at` after the start (so
/// the failure always hits the traffic). The cable stays pulled; the caller plugs it back.
#[derive(Debug, Clone)]
pub struct FailoverTrial {
    pub port: String,
    /// Packets the pulled port carried in the sampling window before (proof it was the path).
    pub carried: u64,
    /// When the command that pulls the cable started (ms since the epoch).
    pub pulled_at_unix_ms: f64,
    /// When it returned: the cable went down in between (under load the `ip` processes that
    /// pull it may take a while to run).
    pub pull_done_unix_ms: f64,
    pub result: StreamResult,
}

pub fn failover_trial(
    st: &State,
    s: &Stream<'_>,
    switch: &str,
    uplinks: &[String],
    fail_at: Duration,
) -> Result<FailoverTrial> {
    let (res, chosen) = stream(st, s, || -> Result<(String, u64, f64, f64)> {
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(300));
        let window = fail_at
            .saturating_sub(Duration::from_millis(500))
            .max(Duration::from_millis(100));
        let (port, carried) = busiest_port(st, switch, uplinks, window)?;
        if carried == 0 {
            return Err(TestbedError::Other(format!(
                "the stream {} → {} crossed none of {switch}'s ports {uplinks:?}",
                s.src, s.dst
            )));
        }
        if let Some(rest) = fail_at.checked_sub(t0.elapsed()) {
            std::thread::sleep(rest);
        }
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3);
        set_link(st, switch, &port, false)?;
        let done = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3);
        Ok((port, carried, at, done))
    })?;
    let (port, carried, pulled_at_unix_ms, pull_done_unix_ms) = chosen?;
    Ok(FailoverTrial {
        port,
        carried,
        pulled_at_unix_ms,
        pull_done_unix_ms,
        result: res,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_report_without_the_newer_fields_still_reads() {
        let r: StreamResult = serde_json::from_str(
            r#"{"received": 10, "unique": 10, "max_seq": 9, "lost": 0, "max_gap_ms": 2.5, "ce_marked": 1}"#,
        )
        .expect("old report");
        assert_eq!((r.received, r.lost, r.ce_marked), (10, 0, 1));
        assert_eq!(r.outage_ms, 0.0);
        assert!(r.loss_runs.is_empty() && r.outage_from_unix_ms.is_none());
    }

    /// The probe itself on loopback (no namespaces): both of its reports read as the testbed
    /// reads them, the sender's count and the per-datagram log agree with what arrived.
    #[test]
    fn the_probes_reports_and_packet_log_read_back_on_loopback() {
        let dir = std::env::temp_dir().join(format!("weft-testbed-lo-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let script = dir.join("udp_probe.py");
        fs::write(&script, UDP_PROBE).expect("script");
        let port = (20_000 + std::process::id() % 20_000).to_string();
        let (out, sent, log, ready) = (
            dir.join("r.json"),
            dir.join("s.json"),
            dir.join("p.csv"),
            dir.join("ready"),
        );
        let recv = Command::new("python3")
            .arg(&script)
            .args(["recv", "--port", &port, "--seconds", "4", "--out"])
            .arg(&out)
            .arg("--log")
            .arg(&log)
            .arg("--ready")
            .arg(&ready)
            .spawn()
            .expect("python3");
        let mut recv = Reap(recv);
        wait_for("the receiver", Duration::from_secs(20), || ready.exists()).expect("ready");
        let status = Command::new("python3")
            .arg(&script)
            .args(["send", "--dst", "127.0.0.1", "--port", &port])
            .args(["--pps", "500", "--seconds", "0.4", "--out"])
            .arg(&sent)
            .status()
            .expect("sender");
        assert!(status.success());
        let _ = recv.0.wait();
        let r: StreamResult =
            serde_json::from_str(&fs::read_to_string(&out).expect("report")).expect("receiver");
        let s: SenderReport =
            serde_json::from_str(&fs::read_to_string(&sent).expect("report")).expect("sender");
        assert_eq!((s.sent, s.errors), (200, 0));
        assert_eq!((r.unique, r.lost), (200, 0), "loopback loses nothing");
        assert!(r.max_kernel_gap_ms.is_some_and(|g| g > 0.0) && r.kernel_gap_after_seq.is_some());
        let lines = fs::read_to_string(&log).expect("packet log");
        assert_eq!(
            lines.lines().count(),
            201,
            "a header and one line per datagram"
        );
        assert!(
            lines.lines().skip(1).all(|l| l
                .split(',')
                .filter(|f| f.parse::<u64>().is_ok_and(|v| v > 0))
                .count()
                >= 3),
            "sent, kernel and read times are all there"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_probe_script_is_written_once_into_the_state_directory() {
        let dir = std::env::temp_dir().join(format!("weft-testbed-probe-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let st = crate::fixtures::state(&dir);
        let p = probe_path(&st).expect("probe");
        assert_eq!(p, dir.join("udp_probe.py"));
        assert_eq!(fs::read_to_string(&p).expect("read"), UDP_PROBE);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stream_between_unknown_hosts_is_refused_before_anything_starts() {
        let dir = std::env::temp_dir().join(format!("weft-testbed-stream-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let st = crate::fixtures::state(&dir);
        let s = Stream {
            src: "h1",
            dst: "h9",
            port: 5001,
            pps: 10,
            seconds: 1.0,
            flows: 1,
        };
        let e = stream(&st, &s, || ()).expect_err("no such host");
        assert_eq!(e.to_string(), "no host h9 in the testbed");
        assert!(!dir.join("stream-h1-h9-5001.json").exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
