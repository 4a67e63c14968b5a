//! The `weft` command line, defined once: each command's options are its module's `Args`
//! struct (`crate::cmd`), which the command takes as parsed; the binary parses it, `weft
//! completions` and `weft manpages` generate from it, and the tests walk it (every command's
//! help begins with examples, every flag has a help line).

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::args::OutputFormat;
use crate::cmd::{self, Outcome, block_on};
use crate::logging::{LogFormat, LogLevel};
use crate::outln;

/// The exit status table, shown by `weft --help` and in the README.
pub const EXIT_CODES: &str = "\
Exit status (every command; 1 wins: only a complete answer is 0 or 3):
  0   done: everything valid, applied, answered, reachable, read with current data
  1   failure or an incomplete answer: a switch unreachable, not ready or without current
      data (no running plugin, stale counters: shown as unknown), an entry refused, a stale
      plan file, the fabric locked by another weft, a file that cannot be read
  2   invalid intent (the errors are printed with file:line:column)
  3   the command worked and the answer is \"not yet\": `plan --detailed-exitcode` or `diff`
      found changes, `doctor` or `diagnose` found problems, `show routes` a route not held,
      `simulate` a collective that does not complete, `status`: `weft run` is not running
  64  usage error (unknown flag, missing argument, a duration without its unit, options that
      cannot go together such as `--canary` with `--no-wait`)";

/// `weft --version`: the package version and the build (commit, profile, target).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("WEFT_BUILD"), ")");

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
    version = VERSION,
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
    Validate(cmd::validate::ValidateArgs),
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
    Show(cmd::show::ShowArgs),
    /// Compile the intent and show, per switch, what would be added, modified and deleted.
    ///
    /// Examples:
    ///   weft plan fabric.yaml
    ///   weft plan fabric.yaml -v                          (every change, old → new fields)
    ///   weft plan fabric.yaml -o plan.json                (then: weft apply plan.json)
    ///   weft plan fabric.yaml --detailed-exitcode         (exit 3 when there are changes)
    ///   weft plan fabric.yaml --switch 'leaf*' --down leaf1:Ethernet8
    ///   weft plan fabric.yaml --output json > plan.json   (format: docs/apply.md, "Plan JSON")
    ///
    /// Compared with what each switch's SONiC DB says is installed (APPL_STATE_DB and Weft's
    /// CONFIG_DB tables). A switch that cannot be read, or whose plugin is not in sync, is
    /// planned against what could be read (the plan says so) and the exit status is 1.
    #[command(verbatim_doc_comment)]
    Plan(cmd::plan::PlanArgs),
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
    ///   weft apply fabric.yaml --previous      (back to the converged apply before the last)
    ///
    /// CONFIG_DB rows first, then APPL_DB P4RT_TABLE entries in dependency order, stage by
    /// stage, each answered before the next (make before break). While it writes, apply holds
    /// the fabric's lock in every switch's STATE_DB (`WEFT_LOCK|<fabric>`); a lock another weft
    /// holds makes it stop with exit status 1 unless --steal.
    ///
    /// Each apply every switch answered is kept in --state-dir (`/var/lib/weft/<fabric>`);
    /// --previous applies the one before the latest again, refused when a switch changed
    /// since the latest. `weft apply PLAN.json` warns when the plan's intent file changed.
    #[command(verbatim_doc_comment)]
    Apply(cmd::plan::ApplyArgs),
    /// What would change between two intents, switch by switch.
    ///
    /// Examples:
    ///   weft diff fabric.yaml fabric-new.yaml
    ///   weft diff fabric.yaml fabric-new.yaml --quiet       (the table only)
    ///   weft diff fabric.yaml fabric-new.yaml --output json
    ///
    /// Both are compiled with every link up; per switch the P4RT entries and CONFIG_DB rows B
    /// adds, modifies and deletes over A, as `weft plan -v` shows them, and the switches B
    /// reaches elsewhere (another DB, P4Runtime address or device id). Exit 0 no difference,
    /// 3 differences.
    #[command(verbatim_doc_comment)]
    Diff(cmd::diff::DiffArgs),
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
    Run(cmd::run::RunArgs),
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
    Status(cmd::status::StatusArgs),
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
    Top(cmd::top::TopArgs),
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
    Trace(cmd::trace::TraceArgs),
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
    Doctor(cmd::doctor::DoctorArgs),
    /// Name the root cause of what the counters show: PFC storms, congestion, bad links, drift.
    ///
    /// Examples:
    ///   weft diagnose fabric.yaml
    ///   weft diagnose fabric.yaml --window 3s --output json
    ///   weft diagnose fabric.yaml --record window.json      (keep the samples, to replay or test)
    ///   weft diagnose fabric.yaml --replay window.json
    ///   weft diagnose fabric.yaml --source prometheus=http://prom:9090 --window 5s
    ///
    /// Samples every switch's COUNTERS_DB and STATE_DB (PFC watchdog, drift) each --interval
    /// for --window (or, with --source prometheus=URL, takes the last --window of the plugins'
    /// metrics from a Prometheus that scrapes them), then applies the rules (crate weft-diagnose) to what moved: the pause
    /// graph followed to its origin, congested queues, links whose ends disagree, drops for
    /// lack of a route, RoCE PSN out-of-order counts. Findings are ranked by confidence, each
    /// with its evidence (which counters moved, where, by how much) and a suggested action.
    /// Exit status 0 healthy, 3 findings, 1 no switch could be read.
    #[command(verbatim_doc_comment)]
    Diagnose(cmd::diagnose::DiagnoseArgs),
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
    Graph(cmd::graph::GraphArgs),
    /// Serve a live page of the fabric: link use, ECN, PAUSE, drops, plugins, diagnosis.
    ///
    /// Examples:
    ///   weft ui fabric.yaml                                  (then open http://127.0.0.1:8088/)
    ///   weft ui fabric.yaml --listen 127.0.0.1:9000 --interval 2s
    ///   weft ui fabric.yaml --source prometheus=http://127.0.0.1:9090
    ///   weft run fabric.yaml --ui 127.0.0.1:8088              (the same page from weft run)
    ///
    /// One page, served by this binary with its script and style inside (no network needed):
    /// the fabric by tiers as `weft graph` draws it (a large fabric folded by pod, opened on
    /// click), links coloured by utilisation over the last interval with ECN marks, PAUSE and
    /// drops on hover, down and suppressed links marked, switches by plugin state (running, not
    /// in sync, unknown: never green without data), `weft diagnose`'s findings over the last
    /// --window with their evidence, a timeline of link events and reconvergences, and per link
    /// and per switch the last --history of counters as charts. Updated by server-sent events.
    /// Read-only: the server answers GET only and nothing on the page acts on the fabric. It
    /// listens on loopback unless --listen says otherwise (it has no authentication).
    #[command(verbatim_doc_comment)]
    Ui(cmd::ui::UiArgs),
    /// Write Prometheus alerting rules for the plugins' and weft run's metrics.
    ///
    /// Examples:
    ///   weft prometheus-rules -o /etc/prometheus/weft-alerts.yml
    ///   weft prometheus-rules --pause-rate 500 --reconvergence-bound 500ms --for 2min
    ///   promtool check rules /etc/prometheus/weft-alerts.yml
    ///
    /// Alerts: PFC storm (the watchdog stormed), sustained PAUSE, ECN marking above a rate,
    /// drops by reason, links out of use and suppressed, a plugin not primary, a switch not
    /// converged or unreachable, a reconvergence slower than a bound, a switch's metrics
    /// absent, a plugin target down. Written from the metric families' definitions.
    #[command(verbatim_doc_comment)]
    PrometheusRules(cmd::rules::RulesArgs),
    /// Print the intent's JSON Schema (for editors: `# yaml-language-server: $schema=...`).
    ///
    /// Examples:
    ///   weft schema > intent.schema.json
    ///   weft schema | python3 -m json.tool | less
    #[command(verbatim_doc_comment)]
    Schema,
    /// Print a shell completion script (it asks `weft` itself, so it knows the intent's names).
    ///
    /// Examples:
    ///   weft completions bash > /etc/bash_completion.d/weft
    ///   weft completions zsh > "${fpath[1]}/_weft"
    ///   weft completions fish > ~/.config/fish/completions/weft.fish
    ///   source <(COMPLETE=bash weft)                  (the same, for this shell only)
    ///
    /// After an intent file on the command line, `--switch le<TAB>` offers its leaves, `--down`
    /// its SWITCH:PORTs, host arguments its hosts. The `weft` on PATH answers.
    #[command(verbatim_doc_comment)]
    Completions(CompletionsArgs),
    /// Write man pages (weft.1, weft-plan.1, ...) into a directory.
    ///
    /// Examples:
    ///   weft manpages target/man && man -l target/man/weft-apply.1
    #[command(verbatim_doc_comment)]
    Manpages(ManpagesArgs),
    /// An emulated fabric on this machine (needs root; BMv2 unless --db-only).
    ///
    /// Examples:
    ///   weft testbed up topology/examples/leaf-spine-small.yaml
    ///   weft apply topology/examples/leaf-spine-small.yaml
    ///   weft testbed ping topology/examples/leaf-spine-small.yaml
    ///   weft testbed workload topology/examples/leaf-spine-small.yaml alltoall --modes ecmp,spray
    ///   weft testbed down topology/examples/leaf-spine-small.yaml
    #[command(verbatim_doc_comment)]
    Testbed(cmd::testbed::TestbedArgs),
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
    Simulate(cmd::simulate::SimulateArgs),
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The registration script of `shell`: the shell then runs `COMPLETE=<shell> weft -- ...` for
/// every completion (`crate::completion`).
fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    use clap_complete::Shell;
    use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Zsh};
    let s: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
        Shell::Elvish => &Elvish,
        Shell::PowerShell => &Powershell,
        other => anyhow::bail!("no completions for {other}"),
    };
    s.write_registration(
        "COMPLETE",
        "weft",
        "weft",
        "weft",
        &mut crate::out::stdout(),
    )?;
    Ok(())
}

#[derive(Args, Debug)]
pub struct ManpagesArgs {
    /// The directory (created if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

impl Command {
    /// The command's name as structured documents carry it, and its `--output`.
    pub fn context(&self) -> (String, OutputFormat) {
        use cmd::show::ShowCommand as S;
        use cmd::testbed::TestbedCommand as T;
        let text = OutputFormat::Text;
        let (name, format): (&str, OutputFormat) = match self {
            Command::Validate(a) => ("validate", a.output),
            Command::Show(a) => match &a.what {
                Some(S::Queues(q)) => ("show queues", q.output),
                Some(S::Pfcwd(p)) => ("show pfcwd", p.output),
                Some(S::Hosts(h)) => ("show hosts", h.output),
                Some(S::Switches(w)) => ("show switches", w.output),
                Some(S::Routes(r)) => ("show routes", r.output),
                None => ("show", a.output),
            },
            Command::Plan(a) => ("plan", a.output),
            Command::Apply(a) => ("apply", a.output),
            Command::Diff(a) => ("diff", a.output),
            Command::Run(_) => ("run", text),
            Command::Status(a) => ("status", a.output),
            Command::Top(a) => ("top", a.output),
            Command::Trace(a) => ("trace", a.output),
            Command::Doctor(a) => ("doctor", a.output),
            Command::Diagnose(a) => ("diagnose", a.output),
            Command::Graph(_) => ("graph", text),
            Command::Ui(_) => ("ui", text),
            Command::PrometheusRules(_) => ("prometheus-rules", text),
            Command::Schema => ("schema", text),
            Command::Completions(_) => ("completions", text),
            Command::Manpages(_) => ("manpages", text),
            Command::Testbed(a) => match &a.command {
                T::Status(c) => ("testbed status", c.output),
                T::Ping(c) => ("testbed ping", c.output),
                T::Fault(c) => ("testbed fault", c.output),
                T::Workload(c) => ("testbed workload", c.output),
                _ => ("testbed", text),
            },
            Command::Simulate(a) => ("simulate", a.output),
        };
        (name.to_string(), format)
    }

    /// Runs the command; the outcome maps to the exit status.
    pub fn run(self) -> anyhow::Result<Outcome> {
        match self {
            Command::Validate(a) => cmd::validate::run(&a),
            Command::Show(a) => cmd::show::run(&a),
            Command::Plan(a) => block_on(cmd::plan::run_plan(&a)),
            Command::Apply(a) => block_on(cmd::plan::run_apply(&a)),
            Command::Diff(a) => cmd::diff::run(&a),
            Command::Run(a) => block_on(cmd::run::run(&a)),
            Command::Status(a) => block_on(cmd::status::status(&a)),
            Command::Top(a) => block_on(cmd::top::run(&a)),
            Command::Trace(a) => block_on(cmd::trace::run(&a)),
            Command::Doctor(a) => block_on(cmd::doctor::run(&a)),
            Command::Diagnose(a) => block_on(cmd::diagnose::run(&a)),
            Command::Graph(a) => block_on(cmd::graph::run(&a)),
            Command::Ui(a) => block_on(cmd::ui::run(&a)),
            Command::PrometheusRules(a) => cmd::rules::run(&a),
            Command::Schema => {
                outln!("{}", serde_json::to_string_pretty(weft_topology::schema())?);
                Ok(Outcome::Ok)
            }
            Command::Completions(a) => {
                completions(a.shell)?;
                Ok(Outcome::Ok)
            }
            Command::Manpages(a) => {
                let n = cmd::manpages(&Cli::command(), &a.dir)?;
                outln!("{n} man pages in {}", a.dir.display());
                Ok(Outcome::Ok)
            }
            Command::Testbed(a) => cmd::testbed::run(&a),
            Command::Simulate(a) => cmd::simulate::run(&a),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn show_takes_a_file_or_a_subcommand() {
        let c = Cli::try_parse_from(["weft", "show", "f.yaml", "--switches"]).expect("show FILE");
        assert!(matches!(
            c.command,
            Command::Show(cmd::show::ShowArgs {
                what: None,
                file: Some(_),
                switches: true,
                ..
            })
        ));
        let c = Cli::try_parse_from(["weft", "show", "queues", "f.yaml", "--switch", "leaf1"])
            .expect("show queues FILE");
        assert!(matches!(
            c.command,
            Command::Show(cmd::show::ShowArgs {
                what: Some(cmd::show::ShowCommand::Queues(_)),
                ..
            })
        ));
        assert!(
            Cli::try_parse_from(["weft", "show"]).is_err(),
            "show needs a file"
        );
    }
}
