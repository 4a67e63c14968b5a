//! `weft`: the operator's command. Logic lives in the `weft_controller` library.

use clap::{Parser, Subcommand};
use weft_controller::cmd::{self, OutputFormat};

/// Weft: a control plane for RoCE fabrics of AI clusters.
///
/// Examples:
///   weft validate topology/examples/*.yaml
///   weft show topology/examples/leaf-spine-small.yaml
///   weft show topology/examples/fat-tree-k4.yaml --output json
///   weft plan topology/examples/leaf-spine-small.yaml --down leaf1:Ethernet8
///   weft apply topology/examples/leaf-spine-small.yaml
#[derive(Parser)]
#[command(name = "weft", version, verbatim_doc_comment)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check intent files; every problem is reported with file:line:column.
    ///
    /// Exit status: 0 all valid, 2 some intent invalid, 1 other failure (unreadable file).
    ///
    ///   weft validate fabric.yaml
    ///   weft validate --output json a.yaml b.yaml
    #[command(verbatim_doc_comment)]
    Validate {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Summarise a fabric: switches and hosts per role and tier, link speeds, oversubscription,
    /// bisection bandwidth and port use.
    ///
    ///   weft show fabric.yaml
    ///   weft show fabric.yaml --switches      (one line per switch)
    ///   weft show fabric.yaml --output json
    #[command(verbatim_doc_comment)]
    Show {
        #[arg(value_name = "FILE")]
        file: String,
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
        /// List port use of every switch.
        #[arg(long)]
        switches: bool,
    },
    /// Compile the intent and show, per switch, what would be added, modified and deleted
    /// compared with what the switch's SONiC DB says is installed (APPL_STATE_DB; an
    /// unreachable DB counts as empty, and the plan says so).
    ///
    ///   weft plan fabric.yaml
    ///   weft plan fabric.yaml --down leaf1:Ethernet8,spine2:Ethernet0
    ///   weft plan fabric.yaml --output json > plan.json     (format: README, "Plan JSON")
    #[command(verbatim_doc_comment)]
    Plan {
        #[arg(value_name = "FILE")]
        file: String,
        /// Links to assume down, by either end (SWITCH:PORT), comma separated or repeated.
        #[arg(long, value_name = "SWITCH:PORT")]
        down: Vec<String>,
        /// Do not read the switches' DBs; compare against empty.
        #[arg(long)]
        offline: bool,
        /// List every changed key.
        #[arg(long, short)]
        verbose: bool,
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Apply the intent, then keep the fabric converged as links go down and up: follows every
    /// switch's STATE_DB port state, recomputes only what a change affects, dampens flapping
    /// links (parameters under `failover:` in the intent) and resyncs periodically.
    ///
    ///   weft run fabric.yaml
    ///   weft run fabric.yaml --events-log /tmp/reconvergence.jsonl
    #[command(verbatim_doc_comment)]
    Run {
        #[arg(value_name = "FILE")]
        file: String,
        /// Full resync of every switch this often.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        resync: std::time::Duration,
        /// How long to wait for a switch to answer.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        timeout: std::time::Duration,
        /// Append one JSON line per reconvergence here.
        #[arg(long)]
        events_log: Option<std::path::PathBuf>,
        /// Where `weft status` reads the daemon's view (default /run/weft/<fabric>.controller.json).
        #[arg(long)]
        status_file: Option<std::path::PathBuf>,
    },
    /// What `weft run` sees: links in use, down or suppressed (flap dampening), and the last
    /// reconvergence.
    ///
    ///   weft status fabric.yaml
    #[command(verbatim_doc_comment)]
    Status {
        #[arg(value_name = "FILE")]
        file: String,
        #[arg(long)]
        status_file: Option<std::path::PathBuf>,
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// An emulated fabric on this machine (needs root and BMv2).
    ///
    ///   weft testbed up topology/examples/leaf-spine-small.yaml
    ///   weft apply topology/examples/leaf-spine-small.yaml
    ///   weft testbed ping topology/examples/leaf-spine-small.yaml
    ///   weft testbed workload topology/examples/leaf-spine-small.yaml alltoall --modes ecmp,spray
    ///   weft testbed down topology/examples/leaf-spine-small.yaml
    #[command(verbatim_doc_comment)]
    Testbed {
        #[command(subcommand)]
        command: TestbedCommand,
        /// State directory (default /run/weft/testbed/<fabric>).
        #[arg(long, global = true)]
        state_dir: Option<std::path::PathBuf>,
    },
    /// Model a collective at fabric scale on the compiled tables: flows placed per routing
    /// mode (ECMP/WCMP by the pipeline's real hash of the engine's 5-tuples and QPs, spray by
    /// weight, adaptive least-loaded, flowlet), completion under max-min fair sharing, and the
    /// ratio to the ideal the fabric's cuts allow.
    ///
    ///   weft simulate fabric.yaml alltoall
    ///   weft simulate fabric.yaml allreduce --modes ecmp,spray --down leaf1:Ethernet8
    ///   weft simulate fabric.yaml alltoall --random-down 1 --seed 7 --output json
    #[command(verbatim_doc_comment)]
    Simulate {
        #[arg(value_name = "FILE")]
        file: String,
        /// allreduce, alltoall or incast
        collective: weft_traffic::Kind,
        #[arg(long, default_value = "ecmp,wcmp,flowlet,spray,adaptive")]
        modes: String,
        /// Links to take down, by either end (SWITCH:PORT), comma separated or repeated.
        #[arg(long, value_name = "SWITCH:PORT")]
        down: Vec<String>,
        /// Also take this percentage of the switch-to-switch links down, drawn by --seed.
        #[arg(long, value_name = "PERCENT")]
        random_down: Option<f64>,
        #[arg(long, default_value = "1")]
        seed: u64,
        /// Bytes per rank (nccl-tests' size): 1GiB, 64MB, 4096.
        #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
        size: u64,
        /// QPs per connection.
        #[arg(long, default_value = "1")]
        qps: u32,
        /// RoCE payload per packet.
        #[arg(long, default_value = "4096")]
        mtu: usize,
        /// Traffic class to simulate (default: the first lossless class).
        #[arg(long)]
        class: Option<String>,
        /// Hosts taking part, in rank order (default: every host; on a multi-plane fabric the
        /// collective runs on every plane at once).
        #[arg(long, value_delimiter = ',', value_name = "HOSTS")]
        ranks: Option<Vec<String>>,
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Write the difference into every switch's SONiC DB (CONFIG_DB QoS rows, APPL_DB
    /// P4RT_TABLE in dependency order) and wait for each switch to answer every entry.
    ///
    /// Exit status: 0 everything answered SUCCESS, 1 a switch unreachable or an entry refused,
    /// 2 invalid intent.
    ///
    ///   weft apply fabric.yaml
    ///   weft apply fabric.yaml --dry-run          (the plan)
    ///   weft apply fabric.yaml --timeout 60s
    #[command(verbatim_doc_comment)]
    Apply {
        #[arg(value_name = "FILE")]
        file: String,
        #[arg(long, value_name = "SWITCH:PORT")]
        down: Vec<String>,
        #[arg(long)]
        dry_run: bool,
        /// Write without waiting for the switches to answer (no plugin running, e.g. without BMv2).
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for a switch to answer one stage of entries.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        timeout: std::time::Duration,
        /// How long to retry a switch whose DB is unreachable or whose plugin is not in sync.
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        retry: std::time::Duration,
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
}

#[derive(Subcommand)]
enum TestbedCommand {
    /// Build the emulated fabric: per switch a BMv2, a redis-server (its SONiC DB) and a plugin;
    /// per host a network namespace cabled to its leaf.
    Up {
        #[arg(value_name = "FILE")]
        file: String,
        /// Only each switch's redis-server (its SONiC DB), no BMv2 or plugins: for machines
        /// without BMv2.
        #[arg(long)]
        db_only: bool,
        /// An extra argument for every plugin, repeated (e.g. --plugin-arg=--bmv2-queue-scale
        /// --plugin-arg=0.18).
        #[arg(long = "plugin-arg", allow_hyphen_values = true, value_name = "ARG")]
        plugin_args: Vec<String>,
    },
    /// Remove everything the testbed started (also after a crash).
    Down {
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
    },
    /// Show what runs.
    Status {
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
    },
    /// Take a link down or up, or flap it.
    ///
    ///   weft testbed link fabric.yaml leaf1:Ethernet8 down
    ///   weft testbed link fabric.yaml leaf1:Ethernet8 flap --count 100 --interval 50
    #[command(verbatim_doc_comment)]
    Link {
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
        #[arg(value_name = "SWITCH:PORT")]
        port: String,
        /// down, up or flap
        action: String,
        #[arg(long, default_value = "1")]
        count: u32,
        /// Milliseconds between changes of a flap.
        #[arg(long, default_value = "100")]
        interval: u64,
    },
    /// Send 2000 paced UDP packets over 64 flows from one host to another and show how many
    /// each top-tier switch forwarded (from the kernel's counters of its ports).
    Spread {
        #[arg(value_name = "FILE")]
        file: String,
        src: String,
        dst: String,
    },
    /// Ping every host from every host.
    Ping {
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
    },
    /// Run collectives with RoCE-shaped traffic (`weft-traffic` in every host namespace) and
    /// report completion, algbw and busbw as nccl-tests defines them, message p50/p99,
    /// reordering, retransmissions, CNPs and PFC PAUSEs; each as a ratio to the ideal at the
    /// rate one flow alone measured in the same run, next to `weft simulate`'s prediction.
    ///
    ///   weft testbed workload fabric.yaml allreduce
    ///   weft testbed workload fabric.yaml alltoall --ranks leaf1-h1,leaf2-h1,leaf3-h1 --size 256KiB
    ///   weft testbed workload fabric.yaml allreduce,alltoall --modes ecmp,wcmp,flowlet,spray,adaptive \
    ///       --down leaf1:Ethernet8 --output json > before.json
    ///   weft testbed workload fabric.yaml allreduce,alltoall --modes ecmp,spray --baseline before.json
    ///
    /// With --modes, every mode is applied in turn (the intent's lossless class rewritten and
    /// `weft apply` run), first with all links up, then with the --down links out of service.
    /// Exit status 1 if a run did not deliver everything or regressed against --baseline.
    #[command(verbatim_doc_comment)]
    Workload {
        #[arg(value_name = "FILE")]
        file: String,
        /// allreduce, alltoall, incast, or several, comma separated
        #[arg(value_name = "COLLECTIVE", value_delimiter = ',', required = true)]
        collectives: Vec<weft_traffic::Kind>,
        /// Hosts taking part, in rank order (default: every host).
        #[arg(long, value_delimiter = ',', value_name = "HOSTS")]
        ranks: Option<Vec<String>>,
        /// Bytes per rank (nccl-tests' size).
        #[arg(long, default_value = "512KiB", value_parser = parse_bytes)]
        size: u64,
        /// Iterations run first and left out (as nccl-tests' -w).
        #[arg(long, default_value = "1")]
        warmup: u32,
        #[arg(long, default_value = "3")]
        iterations: u32,
        /// QPs per connection.
        #[arg(long, default_value = "1")]
        qps: u32,
        /// RoCE payload per packet.
        #[arg(long, default_value = "4096")]
        mtu: usize,
        /// Every NIC's line rate, packets per second.
        #[arg(long, default_value = "150")]
        rate_pps: f64,
        /// First limit every switch queue to this many packets/s (0: leave them as they are).
        #[arg(long, default_value = "150")]
        port_rate: u64,
        /// The receivers' kind: as the intent's ooo_tolerant says, or all out-of-order
        /// placement, or all go-back-N (what spraying costs toward classic RoCE NICs).
        #[arg(long, value_enum, default_value = "intent")]
        nic: NicArg,
        /// Routing modes to compare, comma separated (default: run as applied).
        #[arg(long)]
        modes: Option<String>,
        /// Also run with these links out of service (SWITCH:PORT, comma separated): compiled
        /// and applied as down (`weft apply --down`), as after the controller's failover.
        #[arg(long, value_name = "SWITCH:PORT", value_delimiter = ',')]
        down: Vec<String>,
        /// Flowlet gap for --modes flowlet, scaled to the testbed's packet time.
        #[arg(long, default_value = "100ms")]
        flowlet_gap: String,
        /// Compare with an earlier --output json result; regressions fail the run.
        #[arg(long, value_name = "RESULT.json")]
        baseline: Option<std::path::PathBuf>,
        /// Busbw lower than the baseline's by more than this fraction is a regression.
        #[arg(long, default_value = "0.15")]
        threshold: f64,
        /// Per run, and per weft apply stage.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        timeout: std::time::Duration,
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum NicArg {
    Intent,
    Ooo,
    GoBackN,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    s.parse::<weft_topology::units::Duration>()
        .map(|d| d.to_std())
        .map_err(|e| e.to_string())
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    cmd::simulate::parse_size(s)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("WEFT_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate { files, output } => cmd::validate::run(&files, output),
        Command::Show {
            file,
            output,
            switches,
        } => cmd::show::run(&file, output, switches),
        Command::Plan {
            file,
            down,
            offline,
            verbose,
            output,
        } => runtime().and_then(|rt| {
            rt.block_on(cmd::plan::run_plan(&file, &down, offline, output, verbose))
        }),
        Command::Testbed { command, state_dir } => match command {
            TestbedCommand::Up {
                file,
                db_only,
                plugin_args,
            } => cmd::testbed::up(&file, state_dir, db_only, plugin_args),
            TestbedCommand::Down { fabric } => cmd::testbed::down(&fabric, state_dir),
            TestbedCommand::Status { fabric } => cmd::testbed::status(&fabric, state_dir),
            TestbedCommand::Link {
                fabric,
                port,
                action,
                count,
                interval,
            } => cmd::testbed::link(&fabric, state_dir, &port, &action, count, interval),
            TestbedCommand::Ping { fabric } => cmd::testbed::ping(&fabric, state_dir),
            TestbedCommand::Spread { file, src, dst } => {
                cmd::testbed::spread(&file, state_dir, &src, &dst)
            }
            TestbedCommand::Workload {
                file,
                collectives,
                ranks,
                size,
                warmup,
                iterations,
                qps,
                mtu,
                rate_pps,
                port_rate,
                nic,
                modes,
                down,
                flowlet_gap,
                baseline,
                threshold,
                timeout,
                output,
            } => cmd::workload::run(
                &file,
                state_dir,
                &cmd::workload::WorkloadArgs {
                    collectives,
                    ranks,
                    size,
                    warmup,
                    iterations,
                    qps,
                    mtu,
                    rate_pps,
                    port_rate,
                    nic: match nic {
                        NicArg::Intent => weft_testbed::workload::Nic::Intent,
                        NicArg::Ooo => weft_testbed::workload::Nic::OutOfOrder,
                        NicArg::GoBackN => weft_testbed::workload::Nic::GoBackN,
                    },
                    modes,
                    down,
                    flowlet_gap,
                    baseline,
                    threshold,
                    timeout,
                },
                output,
            ),
        },
        Command::Run {
            file,
            resync,
            timeout,
            events_log,
            status_file,
        } => runtime().and_then(|rt| {
            rt.block_on(cmd::run::run(
                &file,
                resync,
                timeout,
                events_log,
                status_file,
            ))
        }),
        Command::Status {
            file,
            status_file,
            output,
        } => cmd::run::status(&file, status_file, output),
        Command::Simulate {
            file,
            collective,
            modes,
            down,
            random_down,
            seed,
            size,
            qps,
            mtu,
            class,
            ranks,
            output,
        } => cmd::simulate::parse_modes(&modes).and_then(|modes| {
            cmd::simulate::run(
                &file,
                &cmd::simulate::SimulateArgs {
                    collective,
                    modes,
                    down,
                    random_down,
                    seed,
                    size,
                    lanes: qps,
                    mtu,
                    class,
                    ranks,
                },
                output,
            )
        }),
        Command::Apply {
            file,
            down,
            dry_run,
            no_wait,
            timeout,
            retry,
            output,
        } => runtime().and_then(|rt| {
            rt.block_on(cmd::plan::run_apply(
                &file,
                cmd::plan::ApplyArgs {
                    down,
                    dry_run,
                    timeout: (!no_wait).then_some(timeout),
                    retry_for: retry,
                    output,
                },
            ))
        }),
    };
    match result {
        Ok(outcome) => std::process::exit(outcome.exit_code()),
        Err(e) => {
            eprintln!("weft: {e:#}");
            std::process::exit(1);
        }
    }
}
