//! The `weft` command line, defined once: the binary parses it, `weft completions` and
//! `weft manpages` generate from it, and the tests walk it (every command's help begins with
//! examples, every flag has a help line).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::cmd::OutputFormat;
use crate::logging::{LogFormat, LogLevel};

/// The exit status table, shown by `weft --help` and in the README.
pub const EXIT_CODES: &str = "\
Exit status (every command):
  0   done: everything valid, applied, answered, reachable
  1   failure: a switch unreachable or not ready, an entry refused, a stale plan file, the
      fabric locked by another weft, a file that cannot be read
  2   invalid intent (the errors are printed with file:line:column)
  3   the command worked and the answer is \"not yet\": `plan --detailed-exitcode` found
      changes, `doctor` found problems, `status`: `weft run` is not running
  64  usage error (unknown flag, missing argument)";

/// Weft: a control plane for RoCE fabrics of AI clusters.
///
/// Examples:
///   weft validate topology/examples/*.yaml
///   weft show topology/examples/fat-tree-k4.yaml
///   weft plan topology/examples/leaf-spine-small.yaml -o plan.json
///   weft apply plan.json
///   weft run topology/examples/leaf-spine-small.yaml
///   weft status topology/examples/leaf-spine-small.yaml
///   weft doctor topology/examples/leaf-spine-small.yaml
///
/// Logs go to standard error: `--log-level` (or WEFT_LOG, a tracing filter such as
/// `info,weft_reconcile=debug`), `--log-format json` for one JSON object per line. Colours only
/// on a terminal.
#[derive(Parser, Debug)]
#[command(
    name = "weft",
    version,
    verbatim_doc_comment,
    after_help = EXIT_CODES,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub log: LogArgs,
}

#[derive(Args, Debug, Clone)]
pub struct LogArgs {
    /// Log level on standard error [default: info for `weft run`, warn otherwise; WEFT_LOG
    /// overrides the default].
    #[arg(long, global = true, value_enum, value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,
    /// Log format on standard error.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        value_name = "FORMAT"
    )]
    pub log_format: LogFormat,
}

/// Which switches a command reads and writes.
#[derive(Args, Debug, Clone, Default)]
pub struct Targets {
    /// Only these switches: names or globs (`leaf*`, `pod?-spine1`), comma separated or repeated.
    #[arg(long = "switch", value_name = "NAME|GLOB", value_delimiter = ',')]
    pub switches: Vec<String>,
    /// Only switches of these roles (leaf, spine, superspine), comma separated or repeated.
    #[arg(long = "role", value_name = "ROLE", value_delimiter = ',')]
    pub roles: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check intent files; every problem is reported with file:line:column.
    ///
    /// Examples:
    ///   weft validate fabric.yaml
    ///   weft validate topology/examples/*.yaml
    ///   weft validate --output json a.yaml b.yaml
    ///   cat fabric.yaml | weft validate -
    ///
    /// Exit status: 0 all valid, 2 some intent invalid, 1 some file could not be read.
    #[command(verbatim_doc_comment)]
    Validate {
        /// Intent files; `-` reads standard input.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
        /// text, or json: an array with one report per file.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Summarise a fabric, or show what its switches count (queues, PFC watchdog).
    ///
    /// Examples:
    ///   weft show fabric.yaml
    ///   weft show fabric.yaml --switches      (one line per switch)
    ///   weft show fabric.yaml --output json
    ///   weft show queues fabric.yaml --switch leaf1
    ///   weft show pfcwd fabric.yaml --output json
    ///
    /// `weft show FILE`: switches and hosts per role and tier, link speeds, oversubscription,
    /// bisection bandwidth and port use (from the intent alone).
    #[command(
        verbatim_doc_comment,
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true
    )]
    Show {
        #[command(subcommand)]
        what: Option<ShowCommand>,
        /// The intent file.
        #[arg(value_name = "FILE", required = true)]
        file: Option<String>,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
        /// List port use of every switch.
        #[arg(long)]
        switches: bool,
    },
    /// Compile the intent and show, per switch, what would be added, modified and deleted.
    ///
    /// Examples:
    ///   weft plan fabric.yaml
    ///   weft plan fabric.yaml -v                          (every change, old → new fields)
    ///   weft plan fabric.yaml -o plan.json                (then: weft apply plan.json)
    ///   weft plan fabric.yaml --detailed-exitcode         (exit 3 when there are changes)
    ///   weft plan fabric.yaml --switch 'leaf*' --down leaf1:Ethernet8
    ///   weft plan fabric.yaml --output json > plan.json   (format: README, "Plan JSON")
    ///
    /// Compared with what each switch's SONiC DB says is installed (APPL_STATE_DB and Weft's
    /// CONFIG_DB tables). A switch that cannot be read, or whose plugin is not in sync, is
    /// planned against what could be read (the plan says so) and the exit status is 1.
    #[command(verbatim_doc_comment)]
    Plan {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// Links to assume down, by either end (SWITCH:PORT), comma separated or repeated.
        #[arg(long, value_name = "SWITCH:PORT")]
        down: Vec<String>,
        /// Do not read the switches' DBs; compare against empty.
        #[arg(long)]
        offline: bool,
        /// List every changed key, with old → new fields of modifications.
        #[arg(long, short)]
        verbose: bool,
        /// text or json (the plan on standard output).
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
        /// Also write the plan as a plan file (JSON with the intent and every switch's installed
        /// digest) for `weft apply PLAN.json`.
        #[arg(long = "out", short = 'o', value_name = "PLAN.json")]
        out: Option<PathBuf>,
        /// Exit 0 when nothing would change, 3 when something would, 1 on failure.
        #[arg(long)]
        detailed_exitcode: bool,
        #[command(flatten)]
        targets: Targets,
    },
    /// Write the difference into every switch's SONiC DB and wait for each switch to answer.
    ///
    /// Examples:
    ///   weft apply fabric.yaml
    ///   weft apply plan.json                   (a plan file from `weft plan -o`; refused if a
    ///                                           switch changed since)
    ///   weft apply fabric.yaml --dry-run       (the plan)
    ///   weft apply fabric.yaml --canary 2      (2 switches first, verified, then the rest)
    ///   weft apply fabric.yaml --switch leaf1,leaf2 --parallelism 8
    ///   weft apply fabric.yaml --no-wait       (DBs without plugins: `testbed up --db-only`)
    ///
    /// CONFIG_DB rows first, then APPL_DB P4RT_TABLE entries in dependency order, stage by
    /// stage, each answered before the next (make before break). While it writes, apply holds
    /// the fabric's lock in every switch's STATE_DB (`WEFT_LOCK|<fabric>`); a lock another weft
    /// holds makes it stop with exit status 1 unless --steal.
    #[command(verbatim_doc_comment)]
    Apply {
        /// The intent file, or a plan file written by `weft plan -o`.
        #[arg(value_name = "FILE|PLAN.json")]
        file: String,
        /// Links to take as down, by either end (SWITCH:PORT), comma separated or repeated.
        #[arg(long, value_name = "SWITCH:PORT")]
        down: Vec<String>,
        /// Print the plan instead of writing it.
        #[arg(long)]
        dry_run: bool,
        /// Write without waiting for the switches to answer (no plugin running, e.g. without BMv2).
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for a switch to answer one stage of entries.
        #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
        timeout: Duration,
        /// How long to retry a switch whose DB is unreachable or whose plugin is not in sync.
        #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
        retry: Duration,
        /// text or json (`{"summary", "switches"}`).
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
        #[command(flatten)]
        targets: Targets,
        /// Switches read and written at once.
        #[arg(long, default_value = "64", value_name = "N")]
        parallelism: usize,
        /// First apply to N switches (one per role, then a second per role, ...), verify that
        /// each answered everything, its plugin runs and a re-read finds nothing to change; only
        /// then the rest.
        #[arg(long, value_name = "N")]
        canary: Option<usize>,
        /// Take the fabric's lock even if another weft holds it (that one stops at its next
        /// refresh).
        #[arg(long)]
        steal: bool,
    },
    /// Apply the intent, then keep the fabric converged as links go down and up.
    ///
    /// Examples:
    ///   weft run fabric.yaml
    ///   weft run fabric.yaml --events-log /tmp/reconvergence.jsonl
    ///   weft run fabric.yaml --metrics 127.0.0.1:19400   (Prometheus: reconvergence latency, ...)
    ///   weft run fabric.yaml --log-format json 2>>/var/log/weft.jsonl
    ///   weft run fabric.yaml --ha etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379 --id ctl-a
    ///
    /// Follows every switch's STATE_DB port state, recomputes only what a change affects,
    /// dampens flapping links (parameters under `failover:` in the intent) and resyncs
    /// periodically. Logs at info by default ("converged", "reconverged", "switch unreachable").
    /// Holds the fabric's lock in every switch's STATE_DB while it runs; SIGTERM or ctrl-c
    /// stops it, releases the lock and removes the status file.
    ///
    /// With --ha, replicas elect one writer on etcd (a lease of --ha-ttl): followers follow
    /// STATE_DB and keep their compiled routes but write nothing; the leader claims its term on
    /// every switch (a deposed leader's writes are then refused there), takes the lock over
    /// from a deposed replica and reads every switch; when nothing changed it writes nothing.
    /// A leader that loses its lease or is fenced stops (exit 1): restart it to rejoin.
    #[command(verbatim_doc_comment)]
    Run {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// Full resync of every switch this often.
        #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
        resync: Duration,
        /// How long to wait for a switch to answer.
        #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
        timeout: Duration,
        /// Append one JSON line per reconvergence here.
        #[arg(long, value_name = "FILE")]
        events_log: Option<PathBuf>,
        /// Where `weft status` reads the daemon's view [default: /run/weft/<fabric>.controller.json].
        #[arg(long, value_name = "FILE")]
        status_file: Option<PathBuf>,
        /// Switches read and written at once.
        #[arg(long, default_value = "64", value_name = "N")]
        parallelism: usize,
        /// Take the fabric's lock even if another weft holds it.
        #[arg(long)]
        steal: bool,
        /// Elect the writer among replicas on etcd: etcd://HOST:PORT[,HOST:PORT…].
        #[arg(long, value_name = "ETCD", requires = "id")]
        ha: Option<String>,
        /// This replica's name in the election (with --ha).
        #[arg(long, value_name = "NAME", requires = "ha")]
        id: Option<String>,
        /// The election lease's time to live (etcd rounds it up to its minimum).
        #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
        ha_ttl: Duration,
        /// Serve Prometheus/OpenMetrics metrics at http://ADDR/metrics (HOST:PORT).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
    },
    /// The fabric's state: every link's ends, plugins, pending keys, the lock, `weft run`.
    ///
    /// Examples:
    ///   weft status fabric.yaml
    ///   weft status fabric.yaml --output json
    ///
    /// Per link both ends' oper/admin state from STATE_DB PORT_TABLE and whether `weft run`
    /// uses it (in use, down, hold-down, suppressed); per switch its plugin's health, keys
    /// written but not answered, and who holds the lock; the last reconvergence; tuned ECN
    /// thresholds. Exit status 3 when `weft run` is not running (the rest is shown anyway).
    #[command(verbatim_doc_comment)]
    Status {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// The status file of `weft run` [default: /run/weft/<fabric>.controller.json].
        #[arg(long, value_name = "FILE")]
        status_file: Option<PathBuf>,
        /// Read the election from etcd too: leader, term and replicas (etcd://HOST:PORT[,…]).
        #[arg(long, value_name = "ETCD")]
        ha: Option<String>,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// A live view of the fabric: busiest links, ECN-marking and deep queues, PFC, drops.
    ///
    /// Examples:
    ///   weft top fabric.yaml
    ///   weft top fabric.yaml --filter leaf1 --sort packets
    ///   weft top fabric.yaml --once --output json | jq '.links[0]'
    ///
    /// Reads every switch's COUNTERS_DB every --interval and shows rates over it: links by
    /// utilisation (both directions, host links too), queues by ECN marks/s, the deepest
    /// queues (p99 of the pipeline's depth histogram, where the plugin publishes it), PFC
    /// PAUSE rates, drops by reason, and links `weft run` keeps out of use. Live keys (a
    /// letter then Enter): u/p sort by utilisation/packets, /TEXT filter, / clear, q quit.
    /// RoCE PSN out-of-order and regression counts per switch (since it started) too.
    #[command(verbatim_doc_comment)]
    Top {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// One view (two reads --interval apart), then exit.
        #[arg(long)]
        once: bool,
        /// Refresh interval (and the rate window).
        #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
        interval: Duration,
        /// How links are ranked.
        #[arg(long, value_enum, default_value = "util")]
        sort: TopSort,
        /// Only rows naming this text (a switch, port or host).
        #[arg(long, value_name = "TEXT")]
        filter: Option<String>,
        /// Rows per section in text output.
        #[arg(long, default_value = "10", value_name = "N")]
        rows: usize,
        /// text or json (json needs --once).
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Paths packets took between two hosts (from postcards) beside the paths the tables allow.
    ///
    /// Examples:
    ///   weft trace fabric.yaml leaf1-h1 leaf3-h1
    ///   weft trace fabric.yaml leaf1-h1 leaf3-h1 --flow udp:*:4791 --since 10s
    ///   weft trace fabric.yaml leaf1-h1 leaf3-h1 --qp 17 --output json
    ///
    /// Reads every switch's postcards (STATE_DB WEFT_POSTCARDS, written by the plugins for the
    /// intent's `telemetry:` watched flows and samples), joins each packet's hops (flow, IPv4
    /// id or RoCE PSN) along the topology, and compares them with the paths the compiled
    /// tables allow (every branch of every group): per path the packets, per hop the median
    /// queue depth and latency, in-switch latency percentiles, and a MISMATCH for a hop the
    /// tables do not allow or a switch that sent no postcard where one was due. Exit status 0
    /// packets traced and no mismatch, 3 a mismatch or nothing traced.
    #[command(verbatim_doc_comment)]
    Trace {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// The sending host.
        src: String,
        /// The receiving host.
        dst: String,
        /// Only this flow: PROTO:SPORT:DPORT (udp, tcp or a number; * for any part).
        #[arg(long, value_name = "PROTO:SPORT:DPORT", value_parser = crate::cmd::trace::parse_flow, conflicts_with = "qp")]
        flow: Option<crate::cmd::trace::FlowFilter>,
        /// Only RoCE packets to this destination QP.
        #[arg(long, value_name = "N")]
        qp: Option<u32>,
        /// How far back to read postcards.
        #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
        since: Duration,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Check every switch: DB reachable, plugin alive and primary, pipeline loaded, nothing stuck.
    ///
    /// Examples:
    ///   weft doctor fabric.yaml
    ///   weft doctor fabric.yaml --switch 'leaf*' --output json
    ///
    /// Checks per switch: the DB answers as Redis; the plugin's status row is there (it expires
    /// when the plugin dies) and says running (primary, pipeline pushed, synced); the pipeline's
    /// cookie is Weft's; no key written to APPL_DB is left unanswered; APPL_STATE_DB holds as
    /// many entries as the plugin says the switch holds; the installed state is the intent's
    /// (nothing to plan); the switch's clock (Redis TIME) within 1s of this machine's. Exit
    /// status 0 nothing found, 3 problems found, 1 the checks could not run.
    #[command(verbatim_doc_comment)]
    Doctor {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        #[command(flatten)]
        targets: Targets,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Name the root cause of what the counters show: PFC storms, congestion, bad links, drift.
    ///
    /// Examples:
    ///   weft diagnose fabric.yaml
    ///   weft diagnose fabric.yaml --window 3s --output json
    ///   weft diagnose fabric.yaml --record window.json      (keep the samples, to replay or test)
    ///   weft diagnose fabric.yaml --replay window.json
    ///
    /// Samples every switch's COUNTERS_DB and STATE_DB (PFC watchdog, drift) each --interval
    /// for --window, then applies the rules (crate weft-diagnose) to what moved: the pause
    /// graph followed to its origin, congested queues, links whose ends disagree, drops for
    /// lack of a route, RoCE PSN out-of-order counts. Findings are ranked by confidence, each
    /// with its evidence (which counters moved, where, by how much) and a suggested action.
    /// Exit status 0 healthy, 3 findings, 1 no switch could be read.
    #[command(verbatim_doc_comment)]
    Diagnose {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// How long to watch the counters.
        #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
        window: Duration,
        /// Time between samples.
        #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
        interval: Duration,
        /// Write the samples (JSON) here.
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// Diagnose recorded samples instead of reading the switches.
        #[arg(long, value_name = "FILE", conflicts_with = "record")]
        replay: Option<PathBuf>,
        /// Also list findings below the reporting threshold (they do not change the exit status).
        #[arg(long)]
        all: bool,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Draw the fabric: tiers laid out, links coloured by state when switches answer.
    ///
    /// Examples:
    ///   weft graph fabric.yaml > fabric.dot
    ///   weft graph fabric.yaml --format svg -o fabric.svg     (needs Graphviz: apt-get install graphviz)
    ///   weft graph fabric.yaml --offline --hosts --format svg -o fabric.svg
    ///
    /// Links: green both ends up, red an end down, grey unknown (a switch not answering, or
    /// --offline), dashed when administratively down in the intent.
    #[command(verbatim_doc_comment)]
    Graph {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// dot (Graphviz source) or svg (rendered by Graphviz's `dot`).
        #[arg(long, value_enum, default_value = "dot")]
        format: GraphFormat,
        /// Write here instead of standard output.
        #[arg(long = "out", short = 'o', value_name = "FILE")]
        out: Option<PathBuf>,
        /// Do not read link state from the switches.
        #[arg(long)]
        offline: bool,
        /// Draw the hosts too.
        #[arg(long)]
        hosts: bool,
    },
    /// Print the intent's JSON Schema (for editors: `# yaml-language-server: $schema=...`).
    ///
    /// Examples:
    ///   weft schema > intent.schema.json
    ///   weft schema | python3 -m json.tool | less
    #[command(verbatim_doc_comment)]
    Schema,
    /// Print a shell completion script.
    ///
    /// Examples:
    ///   weft completions bash > /etc/bash_completion.d/weft
    ///   weft completions zsh > "${fpath[1]}/_weft"
    ///   weft completions fish > ~/.config/fish/completions/weft.fish
    #[command(verbatim_doc_comment)]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write man pages (weft.1, weft-plan.1, ...) into a directory.
    ///
    /// Examples:
    ///   weft manpages target/man && man -l target/man/weft-apply.1
    #[command(verbatim_doc_comment, hide = true)]
    Manpages {
        /// The directory (created if missing).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// An emulated fabric on this machine (needs root; BMv2 unless --db-only).
    ///
    /// Examples:
    ///   weft testbed up topology/examples/leaf-spine-small.yaml
    ///   weft apply topology/examples/leaf-spine-small.yaml
    ///   weft testbed ping topology/examples/leaf-spine-small.yaml
    ///   weft testbed workload topology/examples/leaf-spine-small.yaml alltoall --modes ecmp,spray
    ///   weft testbed down topology/examples/leaf-spine-small.yaml
    #[command(verbatim_doc_comment)]
    Testbed {
        #[command(subcommand)]
        command: TestbedCommand,
        /// State directory [default: /run/weft/testbed/<fabric>].
        #[arg(long, global = true, value_name = "DIR")]
        state_dir: Option<PathBuf>,
    },
    /// Model a collective at fabric scale on the compiled tables.
    ///
    /// Examples:
    ///   weft simulate fabric.yaml alltoall
    ///   weft simulate fabric.yaml allreduce --modes ecmp,spray --down leaf1:Ethernet8
    ///   weft simulate fabric.yaml alltoall --random-down 1 --seed 7 --output json
    ///
    /// Flows placed per routing mode (ECMP/WCMP by the pipeline's real hash of the engine's
    /// 5-tuples and QPs, spray by weight, adaptive least-loaded, flowlet), completion under
    /// max-min fair sharing, and the ratio to the ideal the fabric's cuts allow.
    #[command(verbatim_doc_comment)]
    Simulate {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// allreduce, alltoall or incast.
        collective: weft_traffic::Kind,
        /// Routing modes to compare, comma separated.
        #[arg(long, default_value = "ecmp,wcmp,flowlet,spray,adaptive")]
        modes: String,
        /// Links to take down, by either end (SWITCH:PORT), comma separated or repeated.
        #[arg(long, value_name = "SWITCH:PORT")]
        down: Vec<String>,
        /// Also take this percentage of the switch-to-switch links down, drawn by --seed.
        #[arg(long, value_name = "PERCENT")]
        random_down: Option<f64>,
        /// Seed of --random-down.
        #[arg(long, default_value = "1")]
        seed: u64,
        /// Bytes per rank (nccl-tests' size): 1GiB, 64MB, 4096.
        #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
        size: u64,
        /// QPs per connection.
        #[arg(long, default_value = "1")]
        qps: u32,
        /// RoCE payload per packet, bytes.
        #[arg(long, default_value = "4096")]
        mtu: usize,
        /// Traffic class to simulate [default: the first lossless class].
        #[arg(long)]
        class: Option<String>,
        /// Hosts taking part, in rank order [default: every host; on a multi-plane fabric the
        /// collective runs on every plane at once].
        #[arg(long, value_delimiter = ',', value_name = "HOSTS")]
        ranks: Option<Vec<String>>,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
}

#[derive(Subcommand, Debug)]
pub enum ShowCommand {
    /// Queue counters of every switch port from COUNTERS_DB (SONiC's `show queue counters`).
    ///
    /// Examples:
    ///   weft show queues fabric.yaml
    ///   weft show queues fabric.yaml --switch leaf1 --nonzero
    ///   weft show queues fabric.yaml --output json
    #[command(verbatim_doc_comment)]
    Queues {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        #[command(flatten)]
        targets: Targets,
        /// Only queues that counted something.
        #[arg(long)]
        nonzero: bool,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// PFC watchdog state of every switch queue (SONiC's `show pfcwd stats`).
    ///
    /// Examples:
    ///   weft show pfcwd fabric.yaml
    ///   weft show pfcwd fabric.yaml --switch 'leaf*' --output json
    ///
    /// From each switch's STATE_DB PFC_WD_STATE, written by its plugin's watchdog.
    #[command(verbatim_doc_comment)]
    Pfcwd {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        #[command(flatten)]
        targets: Targets,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    Dot,
    Svg,
}

#[derive(Subcommand, Debug)]
pub enum TestbedCommand {
    /// Build the emulated fabric of an intent on this machine.
    ///
    /// Examples:
    ///   weft testbed up fabric.yaml
    ///   weft testbed up fabric.yaml --db-only          (no BMv2: then `weft apply --no-wait`)
    ///   weft testbed up fabric.yaml --plugin-arg=--bmv2-queue-scale --plugin-arg=0.18
    ///
    /// Per switch a BMv2, a redis-server (its SONiC DB) and a plugin; per host a network
    /// namespace cabled to its leaf.
    #[command(verbatim_doc_comment)]
    Up {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// Only each switch's redis-server (its SONiC DB), no BMv2, plugins or hosts: for
        /// machines without BMv2.
        #[arg(long)]
        db_only: bool,
        /// Redis ACL users per role (controller, plugin; `default` off), passwords in 0600
        /// files under the state directory, never on a command line.
        #[arg(long)]
        acl: bool,
        /// P4Runtime over mutual TLS between each plugin and its BMv2 (a CA, BMv2's and the
        /// plugins' certificates are made in the state directory with openssl).
        #[arg(long)]
        tls: bool,
        /// An extra argument for every plugin, repeated (e.g. --plugin-arg=--bmv2-queue-scale
        /// --plugin-arg=0.18).
        #[arg(long = "plugin-arg", allow_hyphen_values = true, value_name = "ARG")]
        plugin_args: Vec<String>,
    },
    /// Remove everything the testbed started (also after a crash).
    ///
    /// Examples:
    ///   weft testbed down fabric.yaml
    ///   weft testbed down small                        (by fabric name)
    #[command(verbatim_doc_comment)]
    Down {
        /// The intent file or the fabric's name.
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
    },
    /// Show what runs: every process with its pid, every host namespace.
    ///
    /// Examples:
    ///   weft testbed status fabric.yaml
    ///   weft testbed status small --output json
    #[command(verbatim_doc_comment)]
    Status {
        /// The intent file or the fabric's name.
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Kill one process of a switch with SIGKILL, as a crash would.
    ///
    /// Examples:
    ///   weft testbed kill fabric.yaml leaf1 plugin
    ///   weft testbed kill fabric.yaml spine2 redis
    #[command(verbatim_doc_comment)]
    Kill {
        /// The intent file or the fabric's name.
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
        /// The switch.
        #[arg(value_name = "SWITCH")]
        switch: String,
        /// plugin, bmv2 or redis.
        #[arg(value_name = "PROCESS")]
        part: weft_testbed::chaos::Part,
    },
    /// Start one process of a switch again (killed first if it runs), as `up` started it.
    ///
    /// Examples:
    ///   weft testbed restart fabric.yaml leaf1 plugin
    ///   weft testbed restart fabric.yaml leaf1 bmv2
    ///
    /// The new pid goes into the state file: `testbed down` stops it, `testbed status` sees it.
    /// A redis-server is waited for until it answers PING.
    #[command(verbatim_doc_comment)]
    Restart {
        /// The intent file or the fabric's name.
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
        /// The switch.
        #[arg(value_name = "SWITCH")]
        switch: String,
        /// plugin, bmv2 or redis.
        #[arg(value_name = "PROCESS")]
        part: weft_testbed::chaos::Part,
    },
    /// Take a link down or up, or flap it.
    ///
    /// Examples:
    ///   weft testbed link fabric.yaml leaf1:Ethernet8 down
    ///   weft testbed link fabric.yaml leaf1:Ethernet8 up
    ///   weft testbed link fabric.yaml leaf1:Ethernet8 flap --count 100 --interval 50ms
    #[command(verbatim_doc_comment)]
    Link {
        /// The intent file or the fabric's name.
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
        /// One end of the link.
        #[arg(value_name = "SWITCH:PORT")]
        port: String,
        /// down, up or flap.
        #[arg(value_enum)]
        action: LinkAction,
        /// Flaps (down and up again) for `flap`.
        #[arg(long, default_value = "1", value_name = "N")]
        count: u32,
        /// Time between changes of a flap (a bare number is milliseconds).
        #[arg(long, default_value = "100ms", value_parser = parse_duration_ms, value_name = "DURATION")]
        interval: Duration,
    },
    /// Show how traffic between two hosts spreads over the top-tier switches.
    ///
    /// Examples:
    ///   weft testbed spread fabric.yaml leaf1-h1 leaf3-h1
    ///
    /// Sends 2000 paced UDP packets over 64 flows and counts what each top-tier switch
    /// forwarded (from the kernel's counters of its ports).
    #[command(verbatim_doc_comment)]
    Spread {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// The sending host.
        src: String,
        /// The receiving host.
        dst: String,
    },
    /// Write a Prometheus scrape configuration for the testbed's plugins (and `weft run`).
    ///
    /// Examples:
    ///   weft testbed prometheus-config fabric.yaml prometheus.yml
    ///   ip netns exec weft-small prometheus --config.file=prometheus.yml --storage.tsdb.path=/tmp/p
    ///
    /// Every plugin of the testbed serves /metrics on the fabric namespace's loopback, so
    /// Prometheus runs in that namespace (`ip netns exec weft-<fabric>`), and so does
    /// `weft run --metrics` for the controller's job.
    #[command(verbatim_doc_comment)]
    PrometheusConfig {
        /// The intent file or the fabric's name.
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
        /// Where to write it [default: standard output].
        #[arg(value_name = "OUT")]
        out: Option<PathBuf>,
        /// The controller's job: where `weft run --metrics` listens (in the fabric namespace)
        /// ["none": no controller job].
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:19400")]
        controller: String,
        /// Scrape interval.
        #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
        interval: Duration,
    },
    /// Ping every host from every host.
    ///
    /// Examples:
    ///   weft testbed ping fabric.yaml
    ///   weft testbed ping fabric.yaml --output json
    #[command(verbatim_doc_comment)]
    Ping {
        /// The intent file or the fabric's name.
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Inject a fault (reversibly; recorded in the state directory) or clear them all.
    ///
    /// Examples:
    ///   weft testbed fault fabric.yaml pfc-storm leaf1-h1 --priority 3
    ///   weft testbed fault fabric.yaml stuck-receiver leaf2-h1
    ///   weft testbed fault fabric.yaml loss leaf1:Ethernet8 --percent 20
    ///   weft testbed fault fabric.yaml slow spine1:Ethernet4 --rate 10
    ///   weft testbed fault fabric.yaml blackhole spine1 10.0.0.24/29
    ///   weft testbed fault fabric.yaml incast leaf4-h1 --senders 4
    ///   weft testbed fault fabric.yaml reorder leaf1-h1 leaf3-h2 --delay 20ms
    ///   weft testbed fault fabric.yaml list
    ///   weft testbed fault fabric.yaml clear
    ///
    /// pfc-storm: the host sends PAUSE every 5 ms. stuck-receiver: the host's leaf port drains
    /// at --rate packets/s and the host pauses it in 100 ms stretches. loss: both directions of
    /// the cable through a relay in the wires namespace that drops --percent (netem's job, for
    /// kernels without sch_netem). slow: the switch port serialises at
    /// --rate packets/s (BMv2's queue rate, as a port trained at a lower speed) and tbf caps the
    /// cable at that rate of full-size frames. blackhole: the route is deleted on the switch
    /// over P4Runtime behind Weft's back (restored by clear). incast: --senders hosts send
    /// --pps each to the host, whose leaf port runs at --line-pps. reorder: --delay (the relay)
    /// on one path toward DST's leaf, and RoCE traffic SRC → DST (weft-traffic). `testbed down`
    /// clears them too.
    #[command(verbatim_doc_comment)]
    Fault {
        /// The intent file or the fabric's name.
        #[arg(value_name = "FILE|FABRIC")]
        fabric: String,
        /// What to inject (or list, clear).
        #[arg(value_enum)]
        kind: weft_testbed::fault::FaultKind,
        /// HOST, SWITCH:PORT, SWITCH PREFIX or SRC DST, as the kind takes.
        #[arg(value_name = "TARGET")]
        targets: Vec<String>,
        /// pfc-storm, stuck-receiver: the priority paused.
        #[arg(long, default_value = "3")]
        priority: u8,
        /// loss: percent of packets lost.
        #[arg(long, default_value = "10")]
        percent: f64,
        /// slow, stuck-receiver: packets per second the port drains.
        #[arg(long, default_value = "10")]
        rate: u64,
        /// incast: how many hosts send.
        #[arg(long, default_value = "4")]
        senders: u32,
        /// incast: packets per second per sender.
        #[arg(long, default_value = "150")]
        pps: u32,
        /// incast: the receiver's leaf port rate, packets/s (the emulated line rate).
        #[arg(long, default_value = "300")]
        line_pps: u64,
        /// reorder: extra latency of the slow path.
        #[arg(long, default_value = "20ms", value_parser = parse_duration, value_name = "DURATION")]
        delay: Duration,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Run collectives with RoCE-shaped traffic (`weft-traffic` in every host namespace).
    ///
    /// Examples:
    ///   weft testbed workload fabric.yaml allreduce
    ///   weft testbed workload fabric.yaml alltoall --ranks leaf1-h1,leaf2-h1,leaf3-h1 --size 256KiB
    ///   weft testbed workload fabric.yaml allreduce,alltoall --modes ecmp,wcmp,flowlet,spray,adaptive \
    ///       --down leaf1:Ethernet8 --output json > before.json
    ///   weft testbed workload fabric.yaml allreduce,alltoall --modes ecmp,spray --baseline before.json
    ///
    /// Reports completion, algbw and busbw as nccl-tests defines them, message p50/p99,
    /// reordering, retransmissions, CNPs and PFC PAUSEs; each as a ratio to the ideal at the
    /// rate one flow alone measured in the same run, next to `weft simulate`'s prediction.
    /// With --modes, every mode is applied in turn (the intent's lossless class rewritten and
    /// `weft apply` run), first with all links up, then with the --down links out of service.
    /// Exit status 1 if a run did not deliver everything or regressed against --baseline.
    #[command(verbatim_doc_comment)]
    Workload {
        /// The intent file.
        #[arg(value_name = "FILE")]
        file: String,
        /// allreduce, alltoall, incast, or several, comma separated.
        #[arg(value_name = "COLLECTIVE", value_delimiter = ',', required = true)]
        collectives: Vec<weft_traffic::Kind>,
        /// Hosts taking part, in rank order [default: every host].
        #[arg(long, value_delimiter = ',', value_name = "HOSTS")]
        ranks: Option<Vec<String>>,
        /// Bytes per rank (nccl-tests' size).
        #[arg(long, default_value = "512KiB", value_parser = parse_bytes)]
        size: u64,
        /// Iterations run first and left out (as nccl-tests' -w).
        #[arg(long, default_value = "1")]
        warmup: u32,
        /// Iterations measured.
        #[arg(long, default_value = "3")]
        iterations: u32,
        /// QPs per connection.
        #[arg(long, default_value = "1")]
        qps: u32,
        /// RoCE payload per packet, bytes.
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
        /// Routing modes to compare, comma separated [default: run as applied].
        #[arg(long)]
        modes: Option<String>,
        /// Also run with these links out of service (SWITCH:PORT, comma separated): compiled
        /// and applied as down (`weft apply --down`), as after the controller's failover.
        #[arg(long, value_name = "SWITCH:PORT", value_delimiter = ',')]
        down: Vec<String>,
        /// Flowlet gap for --modes flowlet, scaled to the testbed's packet time.
        #[arg(long, default_value = "100ms", value_name = "DURATION")]
        flowlet_gap: String,
        /// Compare with an earlier --output json result; regressions fail the run.
        #[arg(long, value_name = "RESULT.json")]
        baseline: Option<PathBuf>,
        /// Busbw lower than the baseline's by more than this fraction is a regression.
        #[arg(long, default_value = "0.15")]
        threshold: f64,
        /// Per run, and per weft apply stage.
        #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
        timeout: Duration,
        /// text or json.
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TopSort {
    /// The busier direction's bits/s over the link speed.
    Util,
    /// The busier direction's packets/s.
    Packets,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LinkAction {
    Down,
    Up,
    Flap,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum NicArg {
    Intent,
    Ooo,
    GoBackN,
}

/// `30s`, `100ms`, `2m`: the units the intent uses.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    s.parse::<weft_topology::units::Duration>()
        .map(|d| d.to_std())
        .map_err(|e| e.to_string())
}

/// A duration; a bare number is milliseconds (what `--interval 50` meant before units).
pub fn parse_duration_ms(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<u64>() {
        Ok(ms) => Ok(Duration::from_millis(ms)),
        Err(_) => parse_duration(s),
    }
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    crate::cmd::simulate::parse_size(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn walk(cmd: &clap::Command, path: &str, f: &mut dyn FnMut(&str, &clap::Command)) {
        let here = format!("{path} {}", cmd.get_name()).trim().to_string();
        f(&here, cmd);
        for s in cmd.get_subcommands() {
            if s.get_name() != "help" {
                walk(s, &here, f);
            }
        }
    }

    #[test]
    fn every_commands_help_begins_with_examples() {
        let mut cmd = Cli::command();
        cmd.build();
        let mut bad = Vec::new();
        walk(&cmd, "", &mut |path, c| {
            let help = c.clone().render_long_help().to_string();
            let lines: Vec<&str> = help.lines().collect();
            // A one-line summary, a blank line, then the examples.
            if lines.get(2).map(|l| l.trim()) != Some("Examples:")
                || !lines
                    .get(3)
                    .is_some_and(|l| l.trim_start().starts_with("weft "))
            {
                bad.push(format!(
                    "{path}:\n{}",
                    lines[..lines.len().min(5)].join("\n")
                ));
            }
        });
        assert!(
            bad.is_empty(),
            "help without examples first:\n{}",
            bad.join("\n\n")
        );
    }

    #[test]
    fn every_flag_and_argument_has_a_help_line() {
        let mut cmd = Cli::command();
        cmd.build();
        let mut bad = Vec::new();
        walk(&cmd, "", &mut |path, c| {
            for a in c.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                    bad.push(format!("{path} {id}"));
                }
            }
        });
        assert!(bad.is_empty(), "arguments without help: {bad:?}");
    }

    #[test]
    fn durations_take_units_and_a_bare_number_of_milliseconds_only_where_it_always_meant_that() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("50ms"), Ok(Duration::from_millis(50)));
        assert!(
            parse_duration("30").is_err(),
            "a duration without unit is ambiguous"
        );
        assert_eq!(parse_duration_ms("50"), Ok(Duration::from_millis(50)));
        assert_eq!(parse_duration_ms("2s"), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn show_takes_a_file_or_a_subcommand() {
        let c = Cli::try_parse_from(["weft", "show", "f.yaml", "--switches"]).expect("show FILE");
        assert!(matches!(
            c.command,
            Command::Show {
                what: None,
                file: Some(_),
                switches: true,
                ..
            }
        ));
        let c = Cli::try_parse_from(["weft", "show", "queues", "f.yaml", "--switch", "leaf1"])
            .expect("show queues FILE");
        assert!(matches!(
            c.command,
            Command::Show {
                what: Some(ShowCommand::Queues { .. }),
                ..
            }
        ));
        assert!(
            Cli::try_parse_from(["weft", "show"]).is_err(),
            "show needs a file"
        );
    }
}
