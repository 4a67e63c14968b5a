//! `weft-traffic`: one rank of RoCE-shaped traffic, run inside a host's namespace. Prints its
//! report as JSON on stdout.

use std::net::Ipv4Addr;

use anyhow::Context;
use clap::{Parser, Subcommand};
use weft_traffic::collective::{Collective, Kind};
use weft_traffic::engine::{RankPlan, run};
use weft_traffic::net::UdpNet;
use weft_traffic::receiver::Placement;

/// RoCE-shaped traffic: RoCEv2 over UDP port 4791, DCQCN-like pacing, PSN tracking.
///
/// Examples:
///   weft-traffic recv --bind 10.0.0.18 --from 10.0.0.2 --bytes 1048576 --rate-pps 300
///   weft-traffic send --bind 10.0.0.2 --to 10.0.0.18 --bytes 1048576 --rate-pps 300
///   weft-traffic send ... --spray 8 --trim-dscp 11   (lossy trimmed class, source port per packet)
///   weft-traffic rank --plan rank3.json          (a collective's rank; `weft testbed workload`
///                                                 writes the plans)
#[derive(Parser)]
#[command(name = "weft-traffic", version, verbatim_doc_comment)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one rank of a collective from a JSON plan (`-` reads stdin).
    Rank {
        #[arg(long)]
        plan: String,
    },
    /// Send one message of --bytes to a `recv` peer.
    Send {
        #[arg(long)]
        bind: Ipv4Addr,
        #[arg(long)]
        to: Ipv4Addr,
        #[command(flatten)]
        opts: Transfer,
    },
    /// Receive one message of --bytes from a `send` peer.
    Recv {
        #[arg(long)]
        bind: Ipv4Addr,
        #[arg(long)]
        from: Ipv4Addr,
        /// Classic RoCE NIC: any gap means go-back-N (default: out-of-order placement).
        #[arg(long)]
        go_back_n: bool,
        #[command(flatten)]
        opts: Transfer,
    },
}

#[derive(clap::Args)]
struct Transfer {
    #[arg(long)]
    bytes: u64,
    /// Line rate in packets per second of --mtu payload.
    #[arg(long, default_value = "300")]
    rate_pps: f64,
    #[arg(long, default_value = "4096")]
    mtu: usize,
    #[arg(long, default_value = "26")]
    dscp: u8,
    /// Start at this Unix time in ns (both ends the same), else at once.
    #[arg(long)]
    start_at: Option<u64>,
    /// DSCP switches give trimmed packets (the fabric's `trim.dscp`): answered with a NACK of
    /// their PSN at once.
    #[arg(long)]
    trim_dscp: Option<u8>,
    /// Rotate the UDP source port over this many entropy values (1..=16), one per packet.
    #[arg(long)]
    spray: Option<u16>,
    #[arg(long, default_value = "60000")]
    deadline_ms: u64,
}

fn transfer_plan(rank: u32, addresses: Vec<Ipv4Addr>, t: &Transfer, p: Placement) -> RankPlan {
    let line = t.rate_pps * RankPlan::wire_bytes(t.mtu) as f64;
    let c = Collective {
        kind: Kind::Incast,
        ranks: 2,
        size: t.bytes,
    };
    let mut plan = RankPlan::defaults(rank, addresses, c, line, t.mtu, p);
    plan.dscp = t.dscp;
    plan.start_at_unix_ns = t.start_at;
    plan.trim_dscp = t.trim_dscp;
    plan.entropy = t
        .spray
        .map(|values| weft_traffic::engine::Entropy { values, every: 1 });
    plan.deadline_ms = t.deadline_ms;
    plan
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("WEFT_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let plan = match cli.command {
        Cmd::Rank { plan } => {
            let text = if plan == "-" {
                std::io::read_to_string(std::io::stdin()).context("reading the plan from stdin")?
            } else {
                std::fs::read_to_string(&plan).with_context(|| format!("reading {plan}"))?
            };
            serde_json::from_str::<RankPlan>(&text).with_context(|| format!("plan {plan}"))?
        }
        // Incast of two ranks: rank 0 receives, rank 1 sends.
        Cmd::Send { bind, to, opts } => {
            transfer_plan(1, vec![to, bind], &opts, Placement::OutOfOrder)
        }
        Cmd::Recv {
            bind,
            from,
            go_back_n,
            opts,
        } => {
            let p = if go_back_n {
                Placement::GoBackN
            } else {
                Placement::OutOfOrder
            };
            transfer_plan(0, vec![bind, from], &opts, p)
        }
    };
    let addr = *plan
        .addresses
        .get(plan.rank as usize)
        .context("the plan has no address for its own rank")?;
    let mut net =
        UdpNet::bind(addr, plan.port).with_context(|| format!("binding {addr}:{}", plan.port))?;
    tracing::info!(rank = plan.rank, %addr, collective = %plan.collective.kind, "starting");
    let report = run(plan, &mut net);
    println!("{}", serde_json::to_string(&report)?);
    if !report.complete {
        std::process::exit(3);
    }
    Ok(())
}
