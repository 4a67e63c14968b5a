//! `weft show FILE` (an intent's summary, or a plan file as `terraform show` shows one),
//! `weft show hosts|switches FILE`, `weft show routes FILE SWITCH [PREFIX]`, `weft show
//! queues FILE`, `weft show pfcwd FILE`.

use clap::{Args, Subcommand};
use weft_compiler::down::link_state;
use weft_observe::views::{self, RouteFilter, RoutesView};
use weft_reconcile::planfile::{read_plan_file, render_plan_file, text_digest};
use weft_topology::summary::{render, summarize};

use super::counters::{PfcwdArgs, QueuesArgs};
use super::intent::load_valid_as;
use super::{Outcome, block_on};
use crate::args::OutputFormat;
use crate::outln;

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(subcommand)]
    pub what: Option<ShowCommand>,
    /// The intent file, or a plan file (`weft plan -o`).
    #[arg(value_name = "FILE|PLAN.json", required = true)]
    pub file: Option<String>,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
    /// List port use of every switch.
    #[arg(long)]
    pub switches: bool,
    /// A plan file: every change, old → new fields.
    #[arg(long, short)]
    pub verbose: bool,
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
    Queues(QueuesArgs),
    /// PFC watchdog state of every switch queue (SONiC's `show pfcwd stats`).
    ///
    /// Examples:
    ///   weft show pfcwd fabric.yaml
    ///   weft show pfcwd fabric.yaml --switch 'leaf*' --output json
    ///
    /// From each switch's STATE_DB PFC_WD_STATE, written by its plugin's watchdog. A queue is
    /// `operational` only while a running plugin watches it; otherwise `unknown`, exit 1.
    #[command(verbatim_doc_comment)]
    Pfcwd(PfcwdArgs),
    /// Every host: addresses, MAC, the leaf port it is cabled to, its NIC's class.
    ///
    /// Examples:
    ///   weft show hosts fabric.yaml
    ///   weft show hosts fabric.yaml --output json
    #[command(verbatim_doc_comment)]
    Hosts(IntentArgs),
    /// Every switch: role, device id, loopback, router MAC, P4Runtime address, DB endpoint.
    ///
    /// Examples:
    ///   weft show switches fabric.yaml
    ///   weft show switches fabric.yaml --output yaml
    #[command(verbatim_doc_comment)]
    Switches(IntentArgs),
    /// A switch's routes: the compiled FIB with next hops and weights, and whether it holds them.
    ///
    /// Examples:
    ///   weft show routes fabric.yaml leaf1
    ///   weft show routes fabric.yaml leaf1 10.0.0.26          (the route that address takes)
    ///   weft show routes fabric.yaml spine1 10.0.0.0/28        (routes inside a prefix)
    ///   weft show routes fabric.yaml leaf1 --offline           (the intent alone)
    ///
    /// Against a live fabric each route says whether the switch holds it as compiled (`held`,
    /// `missing`, `differs`, from its APPL_STATE_DB while its plugin runs), and routes it holds
    /// that the intent does not give it are listed. Exit 0 all held, 3 some not, 1 the switch
    /// could not be judged (DB not answering, no running plugin).
    #[command(verbatim_doc_comment)]
    Routes(RoutesArgs),
}

#[derive(Args, Debug)]
pub struct IntentArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

#[derive(Args, Debug)]
pub struct RoutesArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// The switch.
    #[arg(value_name = "SWITCH")]
    pub switch: String,
    /// Only the route an address takes, or the routes inside a prefix.
    #[arg(value_name = "ADDRESS|PREFIX")]
    pub prefix: Option<RouteFilter>,
    /// Do not read the switch: the compiled routes alone.
    #[arg(long)]
    pub offline: bool,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

pub fn run(a: &ShowArgs) -> anyhow::Result<Outcome> {
    match &a.what {
        Some(ShowCommand::Queues(q)) => block_on(super::counters::queues(q)),
        Some(ShowCommand::Pfcwd(p)) => block_on(super::counters::pfcwd(p)),
        Some(ShowCommand::Hosts(h)) => hosts(h),
        Some(ShowCommand::Switches(s)) => switches(s),
        Some(ShowCommand::Routes(r)) => block_on(routes(r)),
        None => {
            let file = a.file.as_deref().unwrap_or("-");
            if file != "-"
                && let Some(p) = read_plan_file(file)?
            {
                return plan_file(file, &p, a);
            }
            summary(file, a.output, a.switches)
        }
    }
}

fn summary(file: &str, output: OutputFormat, all_switches: bool) -> anyhow::Result<Outcome> {
    let Some(topo) = load_valid_as(file, output)? else {
        return Ok(Outcome::Invalid);
    };
    let s = summarize(&topo);
    if output.structured() {
        let mut v = serde_json::to_value(&s)?;
        // The envelope names the fabric.
        if let Some(o) = v.as_object_mut() {
            o.remove("name");
        }
        crate::report::emit(output, Some(&topo.name), &v)?;
    } else {
        crate::out!("{}", render(&s, all_switches));
    }
    Ok(Outcome::Ok)
}

/// A plan file, as `weft plan` printed it, with where it came from and whether its intent
/// file changed since.
fn plan_file(
    file: &str,
    p: &weft_reconcile::planfile::PlanFile,
    a: &ShowArgs,
) -> anyhow::Result<Outcome> {
    let text = std::fs::read_to_string(file)?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    let now = std::fs::read_to_string(&p.intent.file)
        .ok()
        .map(|t| text_digest(&t));
    let intent_now = match &now {
        None => "gone (the plan applies its own copy)".to_string(),
        Some(d) if *d == p.intent.digest => "unchanged since".to_string(),
        Some(_) => crate::style::bad("CHANGED since (the plan applies its own copy)"),
    };
    if a.output.structured() {
        let mut doc = v.clone();
        if let Some(o) = doc.as_object_mut() {
            o.remove("fabric");
            o.insert(
                "intent_file_changed".into(),
                now.as_ref().map(|d| *d != p.intent.digest).into(),
            );
        }
        let fabric = v["fabric"].as_str().map(str::to_string);
        crate::report::emit(a.output, fabric.as_deref(), &doc)?;
        return Ok(Outcome::Ok);
    }
    outln!(
        "plan file {file}: made {} from {} (intent {intent_now})",
        v["created_ms"]
            .as_u64()
            .map_or("at an unknown time".into(), weft_reconcile::lock::ago),
        p.intent.file
    );
    if let Some(t) = &p.targets {
        outln!("switches selected: {}", t.join(", "));
    }
    crate::out!("{}", render_plan_file(&v, a.verbose));
    Ok(Outcome::Ok)
}

fn hosts(a: &IntentArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let rows = views::hosts(&t);
    if a.output.structured() {
        crate::report::emit(
            a.output,
            Some(&t.name),
            &serde_json::json!({ "hosts": rows }),
        )?;
        return Ok(Outcome::Ok);
    }
    outln!(
        "{:<16} {:<15} {:<24} {:<17} {:<18} {:>6}  nic",
        "host",
        "ipv4",
        "ipv6",
        "mac",
        "attached",
        "speed"
    );
    for h in &rows {
        outln!(
            "{:<16} {:<15} {:<24} {:<17} {:<18} {:>6}  {}{}",
            h.name,
            h.ipv4,
            h.ipv6.as_deref().unwrap_or("-"),
            h.mac,
            h.attached,
            h.speed,
            h.nic,
            match (h.rail, h.plane) {
                (Some(r), Some(p)) => format!(", rail {r}, plane {p}"),
                (Some(r), None) => format!(", rail {r}"),
                (None, Some(p)) => format!(", plane {p}"),
                (None, None) => String::new(),
            }
        );
    }
    Ok(Outcome::Ok)
}

fn switches(a: &IntentArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let rows = views::switches(&t);
    if a.output.structured() {
        crate::report::emit(
            a.output,
            Some(&t.name),
            &serde_json::json!({ "switches": rows }),
        )?;
        return Ok(Outcome::Ok);
    }
    outln!(
        "{:<16} {:<10} {:>6} {:<15} {:<17} {:<21} db",
        "switch",
        "role",
        "dev id",
        "loopback",
        "router mac",
        "p4rt"
    );
    for s in &rows {
        outln!(
            "{:<16} {:<10} {:>6} {:<15} {:<17} {:<21} {}",
            s.name,
            s.role,
            s.device_id,
            s.loopback,
            s.router_mac,
            s.p4rt,
            s.db
        );
    }
    Ok(Outcome::Ok)
}

async fn routes(a: &RoutesArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let Some(si) = t.switch_index(&a.switch) else {
        anyhow::bail!("no switch {:?} in {}", a.switch, a.file);
    };
    let compiled = weft_compiler::compile(&t, &link_state(&t, &Default::default()));
    let sw = &compiled.switches[si];
    let info = weft_compiler::p4map::pipeline_p4info()?;
    let desired: std::collections::BTreeMap<_, _> =
        weft_reconcile::plan::desired_switch(&t, &info, sw, si)?
            .entries
            .into_iter()
            .map(|(k, e)| (k, e.fields))
            .collect();
    let installed = if a.offline {
        None
    } else {
        Some(weft_reconcile::io::read_installed(&t.switches[si].db).await)
    };
    let filter = a.prefix.unwrap_or(RouteFilter::All);
    let v = views::routes_view(
        &t,
        si,
        sw,
        &desired,
        filter,
        installed.as_ref().map(Result::as_ref),
    );
    if a.output.structured() {
        crate::report::emit(a.output, Some(&t.name), &v)?;
    } else {
        print_routes(&v, a.offline);
    }
    let unknown: Vec<_> = v.unknown.iter().cloned().collect();
    let all_held = v
        .routes
        .iter()
        .all(|r| r.switch_holds.is_none_or(|h| h == "held"))
        && v.not_in_intent.is_empty();
    if let Some(p) = a.prefix.filter(|_| v.routes.is_empty()) {
        crate::warnln!("weft: {} has no route for {p}", v.switch);
    }
    Ok(super::verdict(
        &unknown,
        if all_held {
            Outcome::Ok
        } else {
            Outcome::NotYet
        },
    ))
}

fn print_routes(v: &RoutesView, offline: bool) {
    let live = !offline && v.unknown.is_none();
    outln!(
        "routes of {} ({}){}",
        v.switch,
        if offline {
            "compiled from the intent; --offline"
        } else {
            "compiled from the intent, beside what the switch holds"
        },
        v.installed_from
            .as_ref()
            .map_or(String::new(), |s| format!("; installed: {s}"))
    );
    outln!(
        "{:<22} {:<7} {:<10} next hops (neighbour port ×weight)",
        "prefix",
        "kind",
        if offline { "" } else { "switch" }
    );
    for r in &v.routes {
        let hops: Vec<String> = r
            .next_hops
            .iter()
            .map(|h| format!("{} {} ×{}", h.neighbour, h.port, h.weight))
            .collect();
        let holds = match r.switch_holds {
            Some(h) => crate::style::state(&format!("{h:<10}")),
            None if offline => format!("{:<10}", ""),
            None => crate::style::unknown(&format!("{:<10}", "unknown")),
        };
        outln!(
            "{:<22} {:<7} {holds} {}",
            r.prefix,
            r.kind,
            if hops.is_empty() {
                "-".to_string()
            } else {
                hops.join(", ")
            }
        );
        if !r.modes.is_empty() {
            let modes: Vec<String> = r
                .modes
                .iter()
                .map(|m| {
                    let mut s = format!("{} {}", m.class, m.mode);
                    if let Some(f) = &m.fallback_from {
                        s += &format!(" (for {f})");
                    }
                    s
                })
                .collect();
            outln!(
                "{:<22} {:<7} {:<10} modes: {}",
                "",
                "",
                "",
                modes.join(", ")
            );
        }
    }
    if live {
        for p in &v.not_in_intent {
            outln!(
                "{:<22} {:<7} {}",
                p,
                "-",
                crate::style::bad("held, not in the intent")
            );
        }
    }
    if let Some(u) = &v.unknown {
        super::print_unknown(std::slice::from_ref(u));
    }
}
