//! `weft testbed workload FILE COLLECTIVE`: collectives on the running testbed
//! (`weft_testbed::campaign`), optionally under several routing modes, with all links up and
//! with links down, reported (`weft_testbed::workload_report`) and compared with a baseline.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use weft_testbed as tb;
use weft_testbed::campaign::{Bench, Options};
use weft_testbed::workload::Nic;
use weft_testbed::workload_report::{Report, parse_duration as parse_gap, regressions, render};
use weft_traffic::collective::Kind;

use super::Outcome;
use super::intent::load_valid_as;
use crate::args::{OutputFormat, parse_duration, parse_modes, parse_size};

#[derive(Args, Debug)]
pub struct WorkloadArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// allreduce, alltoall, incast, or several, comma separated.
    #[arg(value_name = "COLLECTIVE", value_delimiter = ',', required = true)]
    pub collectives: Vec<Kind>,
    /// Hosts taking part, in rank order [default: every host].
    #[arg(long, value_delimiter = ',', value_name = "HOSTS")]
    pub ranks: Option<Vec<String>>,
    /// Bytes per rank (nccl-tests' size).
    #[arg(long, default_value = "512KiB", value_parser = parse_size)]
    pub size: u64,
    /// Iterations run first and left out (as nccl-tests' -w).
    #[arg(long, default_value = "1")]
    pub warmup: u32,
    /// Iterations measured.
    #[arg(long, default_value = "3")]
    pub iterations: u32,
    /// QPs per connection.
    #[arg(long, default_value = "1")]
    pub qps: u32,
    /// RoCE payload per packet, bytes.
    #[arg(long, default_value = "4096")]
    pub mtu: usize,
    /// Every NIC's line rate, packets per second.
    #[arg(long, default_value = "150")]
    pub rate_pps: f64,
    /// First limit every switch queue to this many packets/s (0: leave them as they are).
    #[arg(long, default_value = "150")]
    pub port_rate: u64,
    /// The receivers' kind: as the intent's ooo_tolerant says, or all out-of-order
    /// placement, or all go-back-N (what spraying costs toward classic RoCE NICs).
    #[arg(long, value_enum, default_value = "intent")]
    pub nic: NicArg,
    /// Routing modes to compare, comma separated [default: run as applied].
    #[arg(long)]
    pub modes: Option<String>,
    /// Also run with these links out of service (SWITCH:PORT, comma separated): compiled
    /// and applied as down (`weft apply --down`), as after the controller's failover.
    #[arg(long, value_name = "SWITCH:PORT", value_delimiter = ',')]
    pub down: Vec<String>,
    /// Flowlet gap for --modes flowlet, scaled to the testbed's packet time.
    #[arg(long, default_value = "100ms", value_name = "DURATION")]
    pub flowlet_gap: String,
    /// Compare with an earlier --output json result; regressions fail the run.
    #[arg(long, value_name = "RESULT.json")]
    pub baseline: Option<PathBuf>,
    /// Busbw lower than the baseline's by more than this fraction is a regression.
    #[arg(long, default_value = "0.15")]
    pub threshold: f64,
    /// Per run, and per weft apply stage.
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum NicArg {
    Intent,
    Ooo,
    GoBackN,
}

impl WorkloadArgs {
    fn options(&self) -> anyhow::Result<Options> {
        Ok(Options {
            collectives: self.collectives.clone(),
            ranks: self.ranks.clone(),
            size: self.size,
            warmup: self.warmup,
            iterations: self.iterations,
            qps: self.qps,
            mtu: self.mtu,
            rate_pps: self.rate_pps,
            port_rate: self.port_rate,
            nic: match self.nic {
                NicArg::Intent => Nic::Intent,
                NicArg::Ooo => Nic::OutOfOrder,
                NicArg::GoBackN => Nic::GoBackN,
            },
            modes: self.modes.as_deref().map(parse_modes).transpose()?,
            down: self.down.clone(),
            flowlet_gap: self.flowlet_gap.clone(),
            gap: parse_gap(&self.flowlet_gap)?,
            timeout: self.timeout,
        })
    }
}

pub fn run(a: &WorkloadArgs, state_dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let file = &a.file;
    let Some(t) = load_valid_as(file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
    let dir = state_dir.unwrap_or_else(|| tb::default_state_dir(&t.name));
    let st = tb::State::load(&dir).with_context(|| {
        format!(
            "no testbed {} (looked in {}); weft testbed up {file}",
            t.name,
            dir.display()
        )
    })?;
    let traffic = tb::workload::locate_traffic()?;
    let weft = std::env::current_exe().context("locating weft")?;
    let bench = Bench {
        t: &t,
        text: &text,
        st: &st,
        dir: &dir,
        traffic: &traffic,
        weft: &weft,
    };
    let mut report = bench.run(&a.options()?)?;
    if let Some(b) = &a.baseline {
        let base: Report = serde_json::from_str(
            &std::fs::read_to_string(b).with_context(|| format!("reading {}", b.display()))?,
        )
        .with_context(|| format!("{}: not a workload report (--output json)", b.display()))?;
        report.regressions = regressions(&report, &base, a.threshold);
    }
    match a.output {
        o if o.structured() => crate::report::emit(o, Some(&report.fabric.clone()), &report)?,
        _ => crate::out!("{}", render(&report)),
    }
    let ok = report.cases.iter().all(|c| c.run.complete) && report.regressions.is_empty();
    Ok(if ok { Outcome::Ok } else { Outcome::Failed })
}
