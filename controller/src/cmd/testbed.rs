//! `weft testbed up|down|status|kill|restart|link|spread|prometheus-config|ping|fault`
//! (`workload` is in [`super::workload`]): the options, and the testbed crate's answers
//! printed.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use weft_testbed as tb;

use super::Outcome;
use super::intent::load_valid;
use crate::args::{OutputFormat, TransportArg, parse_duration, parse_duration_ms};
use crate::outln;

#[derive(Args, Debug)]
pub struct TestbedArgs {
    #[command(subcommand)]
    pub command: TestbedCommand,
    /// State directory [default: /run/weft/testbed/<fabric>].
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
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
    Up(UpArgs),
    /// Remove everything the testbed started (also after a crash).
    ///
    /// Examples:
    ///   weft testbed down fabric.yaml
    ///   weft testbed down small                        (by fabric name)
    #[command(verbatim_doc_comment)]
    Down(DownArgs),
    /// Show what runs: every process with its pid, every host namespace.
    ///
    /// Examples:
    ///   weft testbed status fabric.yaml
    ///   weft testbed status small --output json
    #[command(verbatim_doc_comment)]
    Status(StatusArgs),
    /// Kill one process of a switch with SIGKILL, as a crash would.
    ///
    /// Examples:
    ///   weft testbed kill fabric.yaml leaf1 plugin
    ///   weft testbed kill fabric.yaml spine2 redis
    #[command(verbatim_doc_comment)]
    Kill(KillArgs),
    /// Start one process of a switch again (killed first if it runs), as `up` started it.
    ///
    /// Examples:
    ///   weft testbed restart fabric.yaml leaf1 plugin
    ///   weft testbed restart fabric.yaml leaf1 bmv2
    ///
    /// The new pid goes into the state file: `testbed down` stops it, `testbed status` sees it.
    /// A redis-server is waited for until it answers PING.
    #[command(verbatim_doc_comment)]
    Restart(RestartArgs),
    /// Take a link down or up, or flap it.
    ///
    /// Examples:
    ///   weft testbed link fabric.yaml leaf1:Ethernet8 down
    ///   weft testbed link fabric.yaml leaf1:Ethernet8 up
    ///   weft testbed link fabric.yaml leaf1:Ethernet8 flap --count 100 --interval 50ms
    #[command(verbatim_doc_comment)]
    Link(LinkArgs),
    /// Show how traffic between two hosts spreads over the top-tier switches.
    ///
    /// Examples:
    ///   weft testbed spread fabric.yaml leaf1-h1 leaf3-h1
    ///
    /// Sends 2000 paced UDP packets over 64 flows and counts what each top-tier switch
    /// forwarded (from the kernel's counters of its ports).
    #[command(verbatim_doc_comment)]
    Spread(SpreadArgs),
    /// Write a Prometheus scrape configuration for the testbed's plugins (and `weft run`).
    ///
    /// Examples:
    ///   weft testbed prometheus-config fabric.yaml prometheus.yml
    ///   ip netns exec weft-small prometheus --config.file=prometheus.yml --storage.tsdb.path=/tmp/p
    ///
    /// Every plugin of the testbed serves /metrics on the fabric namespace's loopback, so
    /// Prometheus runs in that namespace (`ip netns exec weft-<fabric>`), and so does
    /// `weft run --metrics` for the controller's job. With OUT, the alerting rules of
    /// `weft prometheus-rules` go beside it (weft-alerts.yml) and the configuration loads them.
    #[command(verbatim_doc_comment)]
    PrometheusConfig(PrometheusConfigArgs),
    /// Ping every host from every host.
    ///
    /// Examples:
    ///   weft testbed ping fabric.yaml
    ///   weft testbed ping fabric.yaml --output json
    #[command(verbatim_doc_comment)]
    Ping(PingArgs),
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
    Fault(FaultArgs),
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
    Workload(super::workload::WorkloadArgs),
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// Only each switch's redis-server (its SONiC DB), no BMv2, plugins or hosts: for
    /// machines without BMv2.
    #[arg(long)]
    pub db_only: bool,
    /// Redis ACL users per role (controller, plugin; `default` off), passwords in 0600
    /// files under the state directory, never on a command line.
    #[arg(long)]
    pub acl: bool,
    /// P4Runtime over mutual TLS between each plugin and its BMv2 (a CA, BMv2's and the
    /// plugins' certificates are made in the state directory with openssl).
    #[arg(long)]
    pub tls: bool,
    /// An extra argument for every plugin, repeated (e.g. --plugin-arg=--bmv2-queue-scale
    /// --plugin-arg=0.18).
    #[arg(long = "plugin-arg", allow_hyphen_values = true, value_name = "ARG")]
    pub plugin_args: Vec<String>,
    /// zmq: every plugin also serves SONiC's ZMQ channel (beside its DB socket, unless the
    /// intent names an endpoint), as if `fabric.defaults.p4rt_transport: zmq` were written.
    /// The controller writes over ZMQ where the intent it is given says so, or with `weft
    /// apply --transport zmq` / `weft run --transport zmq`.
    /// [default: what the intent says, else redis]
    #[arg(long, value_enum, value_name = "TRANSPORT")]
    pub transport: Option<TransportArg>,
}

#[derive(Args, Debug)]
pub struct DownArgs {
    /// The intent file or the fabric's name.
    #[arg(value_name = "FILE|FABRIC")]
    pub fabric: String,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The intent file or the fabric's name.
    #[arg(value_name = "FILE|FABRIC")]
    pub fabric: String,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

#[derive(Args, Debug)]
pub struct KillArgs {
    /// The intent file or the fabric's name.
    #[arg(value_name = "FILE|FABRIC")]
    pub fabric: String,
    /// The switch.
    #[arg(value_name = "SWITCH")]
    pub switch: String,
    /// plugin, bmv2 or redis.
    #[arg(value_name = "PROCESS")]
    pub part: weft_testbed::chaos::Part,
}

#[derive(Args, Debug)]
pub struct RestartArgs {
    /// The intent file or the fabric's name.
    #[arg(value_name = "FILE|FABRIC")]
    pub fabric: String,
    /// The switch.
    #[arg(value_name = "SWITCH")]
    pub switch: String,
    /// plugin, bmv2 or redis.
    #[arg(value_name = "PROCESS")]
    pub part: weft_testbed::chaos::Part,
}

#[derive(Args, Debug)]
pub struct LinkArgs {
    /// The intent file or the fabric's name.
    #[arg(value_name = "FILE|FABRIC")]
    pub fabric: String,
    /// One end of the link.
    #[arg(value_name = "SWITCH:PORT")]
    pub port: String,
    /// down, up or flap.
    #[arg(value_enum)]
    pub action: LinkAction,
    /// Flaps (down and up again) for `flap`.
    #[arg(long, default_value = "1", value_name = "N")]
    pub count: u32,
    /// Time between changes of a flap (a bare number is milliseconds).
    #[arg(long, default_value = "100ms", value_parser = parse_duration_ms, value_name = "DURATION")]
    pub interval: Duration,
}

#[derive(Args, Debug)]
pub struct SpreadArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// The sending host.
    pub src: String,
    /// The receiving host.
    pub dst: String,
}

#[derive(Args, Debug)]
pub struct PrometheusConfigArgs {
    /// The intent file or the fabric's name.
    #[arg(value_name = "FILE|FABRIC")]
    pub fabric: String,
    /// Where to write it [default: standard output].
    #[arg(value_name = "OUT")]
    pub out: Option<PathBuf>,
    /// The controller's job: where `weft run --metrics` listens (in the fabric namespace)
    /// ["none": no controller job].
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:19400")]
    pub controller: String,
    /// Scrape interval.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
    /// Also write the alerting rules (`weft prometheus-rules`) here and load them from the
    /// configuration [default with OUT: weft-alerts.yml beside it; "none": no rules].
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PingArgs {
    /// The intent file or the fabric's name.
    #[arg(value_name = "FILE|FABRIC")]
    pub fabric: String,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

#[derive(Args, Debug)]
pub struct FaultArgs {
    /// The intent file or the fabric's name.
    #[arg(value_name = "FILE|FABRIC")]
    pub fabric: String,
    /// What to inject (or list, clear).
    #[arg(value_enum)]
    pub kind: weft_testbed::fault::FaultKind,
    /// HOST, SWITCH:PORT, SWITCH PREFIX or SRC DST, as the kind takes.
    #[arg(value_name = "TARGET")]
    pub targets: Vec<String>,
    /// pfc-storm, stuck-receiver: the priority paused.
    #[arg(long, default_value = "3")]
    pub priority: u8,
    /// loss: percent of packets lost.
    #[arg(long, default_value = "10")]
    pub percent: f64,
    /// slow, stuck-receiver: packets per second the port drains.
    #[arg(long, default_value = "10")]
    pub rate: u64,
    /// incast: how many hosts send.
    #[arg(long, default_value = "4")]
    pub senders: u32,
    /// incast: packets per second per sender.
    #[arg(long, default_value = "150")]
    pub pps: u32,
    /// incast: the receiver's leaf port rate, packets/s (the emulated line rate).
    #[arg(long, default_value = "300")]
    pub line_pps: u64,
    /// reorder: extra latency of the slow path.
    #[arg(long, default_value = "20ms", value_parser = parse_duration, value_name = "DURATION")]
    pub delay: Duration,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LinkAction {
    Down,
    Up,
    Flap,
}

pub fn run(a: &TestbedArgs) -> anyhow::Result<Outcome> {
    let dir = a.state_dir.clone();
    match &a.command {
        TestbedCommand::Up(c) => up(c, dir),
        TestbedCommand::Down(c) => down(c, dir),
        TestbedCommand::Status(c) => status(c, dir),
        TestbedCommand::Kill(c) => kill(c, dir),
        TestbedCommand::Restart(c) => restart(c, dir),
        TestbedCommand::Link(c) => link(c, dir),
        TestbedCommand::Spread(c) => spread(c, dir),
        TestbedCommand::PrometheusConfig(c) => prometheus_config(c, dir),
        TestbedCommand::Ping(c) => ping(c, dir),
        TestbedCommand::Fault(c) => fault(c, dir),
        TestbedCommand::Workload(c) => super::workload::run(c, dir),
    }
}

fn state_dir(dir: Option<PathBuf>, fabric: &str) -> PathBuf {
    dir.unwrap_or_else(|| tb::default_state_dir(fabric))
}

pub fn up(a: &UpArgs, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let (file, db_only, acl) = (&a.file, a.db_only, a.acl);
    let Some(mut t) = load_valid(file)? else {
        return Ok(Outcome::Invalid);
    };
    if a.transport == Some(TransportArg::Zmq) {
        // A switch whose DB is not a socket keeps Redis here: the plugin serves only what the
        // intent names for it.
        weft_topology::transport::serve_zmq(&mut t);
    }
    let programs = if db_only {
        tb::Programs::locate_db_only()?
    } else {
        tb::Programs::locate()?
    };
    let dir = state_dir(dir, &t.name);
    let opts = tb::UpOptions {
        state_dir: dir.clone(),
        plugin_args: a.plugin_args.clone(),
        db_only,
        acl,
        tls: a.tls,
    };
    let st = tb::up(&t, &programs, &opts)?;
    if db_only {
        outln!(
            "testbed {} is up without switches: {} redis-servers (one SONiC DB per switch), no plugins, no hosts",
            st.fabric,
            st.switches.len()
        );
    } else {
        outln!(
            "testbed {} is up: {} switches (BMv2 + redis-server + plugin each), {} hosts, namespace {}",
            st.fabric,
            st.switches.len(),
            st.hosts.len(),
            st.netns
        );
    }
    let zmq = t
        .switches
        .iter()
        .filter(|s| s.transport.zmq_endpoint().is_some())
        .count();
    if zmq > 0 && !db_only {
        outln!(
            "{zmq} plugins also take P4RT entries over ZMQ (weft apply/run use it with --transport zmq, or where the intent says p4rt_transport: zmq)"
        );
    }
    outln!("state: {}", tb::State::path(&dir).display());
    if let Some(a) = tb::acl::files(&dir).filter(|_| acl) {
        outln!(
            "redis ACLs: default user off; plugins read {}; the controller reads the file named by {}:",
            a.plugin.display(),
            weft_sonic_db::CREDENTIALS_ENV
        );
        outln!(
            "  export {}={}",
            weft_sonic_db::CREDENTIALS_ENV,
            a.controller.display()
        );
    }
    if db_only {
        // Nothing answers entries without plugins: waiting for answers would only time out.
        outln!("next: weft apply {file} --no-wait");
    } else {
        outln!("next: weft apply {file}");
    }
    Ok(Outcome::Ok)
}

/// The fabric name of an intent file, or the name given as is.
fn fabric_of(file_or_name: &str) -> String {
    match weft_topology::load_file(file_or_name) {
        Ok(t) => t.name,
        Err(_) => file_or_name.to_string(),
    }
}

fn load_state(file_or_name: &str, dir: Option<PathBuf>) -> anyhow::Result<tb::State> {
    let fabric = fabric_of(file_or_name);
    let dir = state_dir(dir, &fabric);
    tb::State::load(&dir).with_context(|| {
        format!(
            "no testbed {fabric} (looked in {}; `weft testbed up` makes one)",
            dir.display()
        )
    })
}

/// Commands that need switches and hosts refuse a `--db-only` testbed with the reason.
fn need_switches(st: &tb::State, what: &str) -> anyhow::Result<()> {
    if st.db_only() {
        bail!(
            "testbed {} was started with --db-only: it has redis-servers only (no BMv2, no links, no hosts), so there is nothing to {what}",
            st.fabric
        );
    }
    Ok(())
}

pub fn prometheus_config(
    a: &PrometheusConfigArgs,
    dir: Option<PathBuf>,
) -> anyhow::Result<Outcome> {
    let (controller, interval) = (a.controller.as_str(), a.interval);
    let st = load_state(&a.fabric, dir)?;
    need_switches(&st, "scrape")?;
    let ctl = (controller != "none").then_some(controller);
    if let Some(c) = ctl {
        weft_telemetry::server::parse_addr(c).context("--controller")?;
    }
    let rules = match (&a.rules, &a.out) {
        (Some(r), _) if r.as_os_str() == "none" => None,
        (Some(r), _) => Some(r.clone()),
        (None, Some(out)) => Some(out.with_file_name("weft-alerts.yml")),
        (None, None) => None,
    };
    // Prometheus reads a relative rule file from its own working directory: name it whole.
    let rules = match rules {
        Some(r) if r.is_relative() => Some(std::env::current_dir()?.join(r)),
        r => r,
    };
    if let Some(r) = &rules {
        let text = weft_telemetry::rules::rules_yaml(
            &weft_telemetry::rules::RuleOptions::default(),
            super::rules::HEADER,
        )?;
        std::fs::write(r, text).with_context(|| format!("writing {}", r.display()))?;
    }
    let text = tb::prometheus_config(&st, ctl, interval, rules.as_deref());
    match &a.out {
        Some(p) => {
            std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?;
            let n = st.switches.iter().filter(|s| s.metrics.is_some()).count();
            outln!(
                "{}: {n} plugin targets{}{}; run Prometheus in the fabric namespace: ip netns exec {} prometheus --config.file={}",
                p.display(),
                ctl.map_or(String::new(), |c| format!(", weft run at {c}")),
                rules.as_ref().map_or(String::new(), |r| format!(
                    ", alerting rules in {}",
                    r.display()
                )),
                st.netns,
                p.display()
            );
        }
        None => crate::out!("{text}"),
    }
    Ok(Outcome::Ok)
}

pub fn down(a: &DownArgs, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let fabric = fabric_of(&a.fabric);
    let dir = state_dir(dir, &fabric);
    for line in tb::down(&dir, &fabric)? {
        outln!("{line}");
    }
    outln!("testbed {fabric} is down");
    Ok(Outcome::Ok)
}

pub fn status(a: &StatusArgs, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let output = a.output;
    let fabric = fabric_of(&a.fabric);
    let dir = state_dir(dir, &fabric);
    let r = tb::status_report(&dir).with_context(|| {
        format!(
            "no testbed {fabric} (looked in {}; `weft testbed up` makes one)",
            dir.display()
        )
    })?;
    match output {
        o if o.structured() => crate::report::emit(o, Some(&r.fabric), &r)?,
        _ => {
            outln!(
                "testbed {} (namespace {}, state {}){}",
                r.fabric,
                r.netns,
                r.state_dir.display(),
                if r.db_only { ", --db-only" } else { "" }
            );
            for p in &r.processes {
                outln!(
                    "  {:<24} pid {:<8} {}",
                    p.name,
                    p.pid,
                    if p.running {
                        "running".to_string()
                    } else {
                        crate::style::bad(&match tb::chaos::restart_hint(&r.fabric, &p.name) {
                            Some(h) => format!("NOT RUNNING ({h}; log {})", p.log.display()),
                            None => "NOT RUNNING".to_string(),
                        })
                    }
                );
            }
            for d in &r.dbs {
                outln!(
                    "  db {:<21} {} {}",
                    d.switch,
                    d.db,
                    if d.answers {
                        "answers".to_string()
                    } else {
                        crate::style::bad(
                            "NOT ANSWERING (its socket gone, or its redis-server stopped)",
                        )
                    }
                );
            }
            for h in &r.hosts {
                outln!(
                    "  host {:<19} {} {}",
                    h.name,
                    h.ipv4,
                    if h.netns_exists {
                        ""
                    } else {
                        "(namespace missing)"
                    }
                );
            }
        }
    }
    Ok(if r.healthy() {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

pub fn link(a: &LinkArgs, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let (port, count, interval) = (a.port.as_str(), a.count, a.interval);
    let st = load_state(&a.fabric, dir)?;
    need_switches(&st, "take down or up")?;
    let r: weft_topology::PortRef = port.parse()?;
    let Some(sw) = st.switch(&r.switch) else {
        bail!("testbed {} has no switch {}", st.fabric, r.switch);
    };
    if !sw.interfaces.contains_key(&r.port) {
        bail!(
            "{} has no cabled port {} (cabled: {})",
            r.switch,
            r.port,
            sw.interfaces.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let done = match a.action {
        LinkAction::Down => {
            tb::set_link(&st, &r.switch, &r.port, false)?;
            "down"
        }
        LinkAction::Up => {
            tb::set_link(&st, &r.switch, &r.port, true)?;
            "up"
        }
        LinkAction::Flap => {
            tb::flap(&st, &r.switch, &r.port, count, interval)?;
            "flapped"
        }
    };
    outln!("{port}: {done}");
    Ok(Outcome::Ok)
}

pub fn ping(a: &PingArgs, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let output = a.output;
    let st = load_state(&a.fabric, dir)?;
    need_switches(&st, "ping")?;
    if st.hosts.len() < 2 {
        bail!(
            "testbed {} has {} host(s): no pair to ping",
            st.fabric,
            st.hosts.len()
        );
    }
    let res = tb::ping_all(&st, 2);
    let ok = res.iter().filter(|r| r.2).count();
    match output {
        o if o.structured() => {
            let pairs: Vec<serde_json::Value> = res
                .iter()
                .map(|(a, b, good)| serde_json::json!({"from": a, "to": b, "ok": good}))
                .collect();
            crate::report::emit(
                o,
                Some(&st.fabric),
                &serde_json::json!({"pairs": res.len(), "answered": ok, "results": pairs}),
            )?;
        }
        _ => {
            for (a, b, good) in &res {
                if !good {
                    outln!("UNREACHABLE {a} -> {b}");
                }
            }
            outln!("reachability: {ok}/{} host pairs answer ping", res.len());
        }
    }
    Ok(if ok == res.len() {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

pub fn spread(a: &SpreadArgs, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let (file, src, dst) = (a.file.as_str(), a.src.as_str(), a.dst.as_str());
    let Some(t) = load_valid(file)? else {
        return Ok(Outcome::Invalid);
    };
    let st = load_state(file, dir)?;
    need_switches(&st, "send traffic through")?;
    for h in [src, dst] {
        if st.host(h).is_none() {
            bail!("testbed {} has no host {h}", st.fabric);
        }
    }
    let top = t.switches.iter().map(|s| s.role).max();
    let spines: Vec<String> = t
        .switches
        .iter()
        .filter(|s| Some(s.role) == top)
        .map(|s| s.name.clone())
        .collect();
    let (per, received) = tb::spread(&st, src, dst, 2000, 64, &spines)?;
    let total: u64 = per.iter().map(|p| p.1).sum();
    for (s, n) in &per {
        outln!(
            "  {s:<12} {n:>6} packets ({:.0}%)",
            *n as f64 * 100.0 / total.max(1) as f64
        );
    }
    outln!("  {received} of 2000 packets arrived at {dst}");
    Ok(if received >= 1900 && per.iter().all(|p| p.1 > 0) {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

/// `weft testbed kill FILE SWITCH plugin|bmv2|redis`: SIGKILL, as a crash.
pub fn kill(a: &KillArgs, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let (switch, part) = (a.switch.as_str(), a.part);
    let st = load_state(&a.fabric, dir)?;
    let pid = tb::chaos::kill(&st.state_dir, switch, part)?;
    outln!(
        "killed {} (pid {pid}); bring it back: weft testbed restart {} {switch} {}",
        part.process_name(switch),
        st.fabric,
        part.word()
    );
    Ok(Outcome::Ok)
}

/// `weft testbed restart FILE SWITCH plugin|bmv2|redis`: start it again as `up` did.
pub fn restart(a: &RestartArgs, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let (switch, part) = (a.switch.as_str(), a.part);
    let st = load_state(&a.fabric, dir)?;
    let pid = tb::chaos::restart(&st.state_dir, switch, part)?;
    outln!(
        "restarted {} (pid {pid}, recorded in {})",
        part.process_name(switch),
        tb::State::path(&st.state_dir).display()
    );
    Ok(Outcome::Ok)
}

/// `weft testbed fault FILE KIND TARGET…`, `… list`, `… clear`.
pub fn fault(a: &FaultArgs, dir: Option<PathBuf>) -> anyhow::Result<Outcome> {
    use tb::fault::FaultKind;
    let (file_or_name, output) = (a.fabric.as_str(), a.output);
    let params = tb::fault::Params {
        priority: a.priority,
        percent: a.percent,
        rate_pps: a.rate,
        senders: a.senders,
        pps: a.pps,
        line_pps: a.line_pps,
        delay: a.delay,
    };
    let st = load_state(file_or_name, dir)?;
    need_switches(&st, "inject faults into")?;
    let tools = tb::fault::Tools::locate();
    match a.kind {
        FaultKind::List => {
            let faults = tb::fault::list(&st.state_dir);
            match output {
                o if o.structured() => crate::report::emit(
                    o,
                    Some(&st.fabric),
                    &serde_json::json!({ "faults": faults }),
                )?,
                _ => {
                    if faults.is_empty() {
                        outln!("no faults in place");
                    }
                    for f in &faults {
                        outln!("{} {}: {}", f.kind.as_str(), f.target, f.detail);
                    }
                }
            }
        }
        FaultKind::Clear => {
            let done = tb::fault::clear(&st, &tools)?;
            match output {
                o if o.structured() => crate::report::emit(
                    o,
                    Some(&st.fabric),
                    &serde_json::json!({ "cleared": done }),
                )?,
                _ => {
                    for l in &done {
                        outln!("{l}");
                    }
                    outln!("faults cleared");
                }
            }
            if !tb::fault::list(&st.state_dir).is_empty() {
                return Ok(Outcome::Failed);
            }
        }
        _ => {
            let f = tb::fault::inject(&st, &tools, a.kind, &a.targets, &params)?;
            match output {
                o if o.structured() => {
                    crate::report::emit(o, Some(&st.fabric), &serde_json::json!({ "fault": f }))?
                }
                _ => {
                    outln!("{} {}: {}", f.kind.as_str(), f.target, f.detail);
                    outln!("undo: weft testbed fault {file_or_name} clear (or testbed down)");
                }
            }
        }
    }
    Ok(Outcome::Ok)
}
