//! `weft plan FILE` and `weft apply FILE|PLAN.json`.
//!
//! A plan file (`weft plan -o plan.json`) is the plan JSON plus what identifies it: the intent's
//! text and digest, the `--down` links and `--switch`/`--role` selection it was made with, and
//! every switch's `installed_digest`. `weft apply plan.json` takes the lock, reads every switch
//! again and refuses (exit 1, naming the switch) when one changed since; otherwise it applies
//! exactly the embedded intent with the same links down and switches selected.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use weft_compiler::{Compiler, LinkState, p4map};
use weft_reconcile::apply::{self, ApplyOptions, Progress};
use weft_reconcile::core::{ErrorKind, SwitchError, SwitchResult, SwitchState, TIMEOUT};
use weft_reconcile::lock::{FabricLock, LockError, LockOptions};
use weft_reconcile::plan::{self, Installed};
use weft_topology::{LinkIdx, SwitchIdx, Topology};

use super::{Outcome, OutputFormat, load_valid_as, now_ms};
use crate::cli::Targets;
use crate::targets;

/// The plan file's format version (`weft_plan`). 2: `installed_digest` is the state digest
/// plugins publish (`weft_sonic_db::Digest`), no longer FNV-1a.
pub const PLAN_FILE_VERSION: u32 = 2;

/// Parses `--down` port references into the links they name.
pub fn links_down(t: &Topology, down: &[String]) -> anyhow::Result<BTreeSet<LinkIdx>> {
    let mut out = BTreeSet::new();
    for d in down
        .iter()
        .flat_map(|d| d.split(','))
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        let r: weft_topology::PortRef = d.parse()?;
        let sw = t
            .switch_index(&r.switch)
            .with_context(|| format!("--down {d}: no switch {}", r.switch))?;
        let pi = t.switches[sw]
            .port_index(&r.port)
            .with_context(|| format!("--down {d}: switch {} has no port {}", r.switch, r.port))?;
        match t.switches[sw].ports[pi].peer {
            weft_topology::Peer::Switch { link } => {
                out.insert(link);
            }
            _ => bail!("--down {d}: that port has no link to another switch"),
        }
    }
    Ok(out)
}

/// Link state with `down` taken down.
pub fn link_state(t: &Topology, down: &BTreeSet<LinkIdx>) -> LinkState {
    let mut ls = LinkState::all_up(t);
    for &l in down {
        ls.set_down(l, true);
    }
    ls
}

/// FNV-1a of a text, as hex (the plan file's intent digest).
pub fn text_digest(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Reads the installed state of the selected switches (the others stay "not read").
pub async fn read_selected(
    t: &Topology,
    sel: &Option<BTreeSet<SwitchIdx>>,
    parallel: usize,
) -> Vec<Installed> {
    weft_reconcile::io::read_all(t, |i| targets::selected(sel, i), parallel).await
}

/// What identifies a plan file's intent.
#[derive(Debug, Clone, serde::Serialize, Deserialize)]
pub struct PlanIntent {
    /// The intent file the plan was made from (as given).
    pub file: String,
    pub digest: String,
    /// The intent's text: `weft apply PLAN.json` applies exactly this.
    pub text: String,
}

/// Switches whose installed state `weft plan` reads at once.
const PARALLEL_READS: usize = 64;
/// Switches compiled ahead of the one whose plan is written next (their reads in flight).
const PLAN_WINDOW: usize = 2 * PARALLEL_READS;

/// A switch's installed state in `write_plan`: known (read, or by digest) or being read.
enum Pending {
    Ready(Box<Installed>),
    Reading(tokio::task::JoinHandle<Installed>),
}

/// The switch's installed state from its status row alone, when its plugin's digests say it
/// holds exactly `desired`.
fn by_digest(
    name: &str,
    status: weft_sonic_schema::state::PluginStatus,
    desired: &plan::DesiredSwitch,
) -> Option<Installed> {
    let want = desired.digests();
    let published = status.digests();
    let known = Installed::by_digest(status, &want);
    if known.is_none() {
        tracing::debug!(
            switch = %name,
            desired_entries = %want.entries,
            desired_config = %want.config,
            published = ?published,
            "digests differ or none published: reading the rows"
        );
    }
    known
}

/// What `write_plan` found.
#[derive(Debug, Default)]
pub struct PlanStats {
    /// Switches unreadable or whose plugin is not in sync.
    pub untrusted: usize,
    /// Switches with changes.
    pub changed: usize,
}

/// How to plan.
pub struct PlanRequest<'a> {
    pub down: &'a BTreeSet<LinkIdx>,
    pub offline: bool,
    pub output: OutputFormat,
    pub verbose: bool,
    pub selection: &'a Option<BTreeSet<SwitchIdx>>,
    /// Also write a plan file here (the JSON plan with `weft_plan`, `intent`, ...).
    pub file: Option<(&'a mut dyn Write, &'a PlanIntent, &'a [String])>,
}

fn json_header(
    out: &mut dyn Write,
    t: &Topology,
    links_down: &[String],
    notes: &[String],
) -> std::io::Result<()> {
    write!(
        out,
        "\"fabric\":{},\"links_down\":{},\"notes\":{},\"switches\":[",
        serde_json::to_string(&t.name)?,
        serde_json::to_string(links_down)?,
        serde_json::to_string(notes)?
    )
}

/// Compiles, reads what every selected switch has (unless `offline`), and writes the plan to
/// `out` one switch at a time (and to the plan file, when asked), so a fabric of thousands of
/// switches is never held whole in memory.
pub async fn write_plan(
    t: &Topology,
    req: PlanRequest<'_>,
    out: &mut dyn Write,
) -> anyhow::Result<PlanStats> {
    let PlanRequest {
        down,
        offline,
        output,
        verbose,
        selection,
        mut file,
    } = req;
    // Online, each switch's status row first, read while the fabric compiles: a plugin in sync
    // whose digests equal the desired state's holds exactly it, and its rows are not read.
    let status_reads = (!offline).then(|| {
        weft_reconcile::io::spawn_status_reads(
            t,
            |i| targets::selected(selection, i),
            PARALLEL_READS,
        )
    });
    let compiler = Compiler::new(t, link_state(t, down));
    let info = p4map::pipeline_p4info().context("the pipeline's P4Info")?;
    let mut statuses = match status_reads {
        None => Vec::new(),
        Some(h) => h.await.unwrap_or_else(|e| {
            (0..t.switches.len())
                .map(|_| {
                    Err(SwitchError::Unreachable {
                        detail: format!("status read failed ({e})"),
                    })
                })
                .collect()
        }),
    };
    let reads = Arc::new(tokio::sync::Semaphore::new(PARALLEL_READS));
    let mut notes: Vec<String> = compiler.notes();
    notes.sort();
    let links_down: Vec<String> = down
        .iter()
        .map(|&l| weft_reconcile::core::link_name(t, l))
        .collect();
    let mut stats = PlanStats::default();
    match output {
        OutputFormat::Text => {
            out.write_all(plan::render_header(&t.name, &links_down).as_bytes())?
        }
        OutputFormat::Json => {
            out.write_all(b"{")?;
            json_header(out, t, &links_down, &notes)?;
        }
    }
    if let Some((f, intent, down_args)) = file.as_mut() {
        let selected: Option<Vec<&str>> = selection.as_ref().map(|s| {
            s.iter()
                .map(|&i| t.switches[i].name.as_str())
                .collect::<Vec<_>>()
        });
        write!(
            f,
            "{{\"weft_plan\":{PLAN_FILE_VERSION},\"created_ms\":{},\"intent\":{},\"down\":{},\"targets\":{},\"offline\":{offline},",
            now_ms(),
            serde_json::to_string(intent)?,
            serde_json::to_string(down_args)?,
            serde_json::to_string(&selected)?,
        )?;
        json_header(*f, t, &links_down, &notes)?;
    }
    let mut fallbacks = BTreeSet::new();
    let mut totals = (0, 0, 0);
    let mut first = true;
    // Switches compiled, in order, whose installed state is known or being read: a plan is
    // written once its switch and every one before it are, so reads overlap compiling.
    let mut queue: VecDeque<(usize, plan::DesiredSwitch, Pending)> = VecDeque::new();
    let switches = compiler.switches();
    let mut next = switches
        .iter()
        .enumerate()
        .filter(|(si, _)| targets::selected(selection, *si));
    loop {
        let front_ready = matches!(queue.front(), Some((_, _, Pending::Ready(_))));
        let (si, desired, inst) = if !front_ready
            && queue.len() < PLAN_WINDOW
            && let Some((si, sw)) = next.next()
        {
            let desired = plan::desired_switch(t, &info, sw, si)?;
            let inst = if offline {
                Pending::Ready(Box::new(Installed::empty("not read (--offline)")))
            } else {
                match std::mem::replace(&mut statuses[si], Ok(None)) {
                    Err(e) => {
                        Pending::Ready(Box::new(Installed::empty(format!("DB unreachable ({e})"))))
                    }
                    Ok(status) => {
                        match status.and_then(|st| by_digest(&t.switches[si].name, st, &desired)) {
                            Some(i) => Pending::Ready(Box::new(i)),
                            None => {
                                let (db, sem) = (t.switches[si].db.clone(), reads.clone());
                                Pending::Reading(tokio::spawn(async move {
                                    let _permit = sem.acquire_owned().await;
                                    weft_reconcile::io::read_installed(&db)
                                        .await
                                        .unwrap_or_else(|e| {
                                            Installed::empty(format!("DB unreachable ({e})"))
                                        })
                                }))
                            }
                        }
                    }
                }
            };
            queue.push_back((si, desired, inst));
            continue;
        } else if let Some((si, desired, inst)) = queue.pop_front() {
            let inst = match inst {
                Pending::Ready(i) => *i,
                Pending::Reading(h) => h
                    .await
                    .unwrap_or_else(|e| Installed::empty(format!("read failed ({e})"))),
            };
            (si, desired, inst)
        } else {
            break;
        };
        let sw = &switches[si];
        if !offline && !inst.trusted() {
            stats.untrusted += 1;
        }
        let json = output == OutputFormat::Json || file.is_some();
        let views = if json {
            plan::Views::With
        } else {
            plan::Views::Without
        };
        let mut p = plan::diff(t, si, sw, desired, &inst, down, views);
        if json || verbose {
            // Readers and reviewers get rows in key order; the writers need no order.
            p.config_set
                .sort_by_cached_key(plan::ConfigChange::redis_key);
        }
        if !p.is_empty() {
            stats.changed += 1;
        }
        totals.0 += p.counts.add;
        totals.1 += p.counts.modify;
        totals.2 += p.counts.delete;
        match output {
            OutputFormat::Text => {
                plan::fallbacks(sw, &mut fallbacks);
                out.write_all(plan::render_switch(&p, verbose).as_bytes())?;
            }
            OutputFormat::Json => {
                if !first {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, &p)?;
            }
        }
        if let Some((f, _, _)) = file.as_mut() {
            if !first {
                f.write_all(b",")?;
            }
            serde_json::to_writer(&mut **f, &p)?;
        }
        first = false;
    }
    let n = selection.as_ref().map_or(t.switches.len(), BTreeSet::len);
    match output {
        OutputFormat::Text => {
            let shown = if verbose {
                notes.clone()
            } else {
                summarise_notes(t, &notes)
            };
            out.write_all(plan::render_footer(n, totals, &fallbacks, &shown, verbose).as_bytes())?;
        }
        OutputFormat::Json => out.write_all(b"]}\n")?,
    }
    if let Some((f, _, _)) = file.as_mut() {
        f.write_all(b"]}\n")?;
        f.flush()?;
    }
    out.flush()?;
    Ok(stats)
}

/// The compiler's notes for the text plan: "no path to leaf" between switches that share no
/// link at all (planes of a multi-plane fabric, by design) become one line; the rest stay.
/// `-v` and the JSON keep every note.
pub fn summarise_notes(t: &Topology, notes: &[String]) -> Vec<String> {
    let mut comp: Vec<usize> = (0..t.switches.len()).collect();
    fn root(c: &mut [usize], mut i: usize) -> usize {
        while c[i] != i {
            c[i] = c[c[i]];
            i = c[i];
        }
        i
    }
    for l in &t.links {
        let (a, b) = (root(&mut comp, l.a.switch), root(&mut comp, l.b.switch));
        comp[a] = b;
    }
    let mut apart = 0usize;
    let mut out = Vec::new();
    for n in notes {
        let pair = n.split_once(": no path to leaf ").and_then(|(src, rest)| {
            let dst = rest.split(';').next()?;
            Some((t.switch_index(src)?, t.switch_index(dst)?))
        });
        match pair {
            Some((a, b)) if root(&mut comp, a) != root(&mut comp, b) => apart += 1,
            _ => out.push(n.clone()),
        }
    }
    if apart > 0 {
        let planes: BTreeSet<usize> = (0..t.switches.len()).map(|i| root(&mut comp, i)).collect();
        out.insert(
            0,
            format!(
                "{apart} leaf pairs have no path between them because they share no link: the fabric is {} separate planes, by design (each host reaches the hosts of its plane; -v or --output json lists them)",
                planes.len()
            ),
        );
    }
    out
}

#[derive(Debug, Clone)]
pub struct PlanArgs {
    pub down: Vec<String>,
    pub offline: bool,
    pub output: OutputFormat,
    pub verbose: bool,
    pub out: Option<PathBuf>,
    pub detailed_exitcode: bool,
    pub targets: Targets,
}

pub async fn run_plan(file: &str, args: PlanArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(file, args.output)? else {
        return Ok(Outcome::Invalid);
    };
    let selection = targets::select(&t, &args.targets)?;
    let down = links_down(&t, &args.down)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, crate::out::stdout());
    let intent = match &args.out {
        Some(_) => {
            let text = weft_topology::read_intent(std::path::Path::new(file))?;
            Some(PlanIntent {
                file: file.to_string(),
                digest: text_digest(&text),
                text,
            })
        }
        None => None,
    };
    let mut plan_file = match &args.out {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let stats = write_plan(
        &t,
        PlanRequest {
            down: &down,
            offline: args.offline,
            output: args.output,
            verbose: args.verbose,
            selection: &selection,
            file: match (&mut plan_file, &intent) {
                (Some(f), Some(i)) => Some((f as &mut dyn Write, i, &args.down)),
                _ => None,
            },
        },
        &mut out,
    )
    .await?;
    drop(out);
    if let Some(p) = &args.out {
        crate::errln!(
            "weft: plan written to {}; apply exactly it with `weft apply {}`",
            p.display(),
            p.display()
        );
    }
    if stats.untrusted > 0 {
        crate::errln!(
            "weft: {} switch(es) could not be read or their plugin is not in sync: their plan compares against what is shown in `installed state`",
            stats.untrusted
        );
        return Ok(Outcome::Failed);
    }
    Ok(if args.detailed_exitcode && stats.changed > 0 {
        Outcome::NotYet
    } else {
        Outcome::Ok
    })
}

/// Progress on standard error: a bar on a terminal; otherwise one line per switch when its
/// state first becomes a problem, and when it is done.
fn progress_reporter(total: usize) -> Progress {
    if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(total as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} switches")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix("applying");
        let seen = std::sync::Mutex::new(BTreeSet::new());
        Arc::new(move |sw: &str, st: &SwitchState| {
            if matches!(
                st,
                SwitchState::Converged | SwitchState::Failed { .. } | SwitchState::Refused { .. }
            ) && let Ok(mut s) = seen.lock()
                && s.insert(sw.to_string())
            {
                bar.inc(1);
            }
        })
    } else {
        // Backoff changes the state on every retry; say each kind of trouble once.
        let said = std::sync::Mutex::new(BTreeMap::<String, &'static str>::new());
        Arc::new(move |sw: &str, st: &SwitchState| {
            let (kind, line) = match st {
                SwitchState::Unreachable { reason, .. } => (
                    "unreachable",
                    format!("{sw}: unreachable ({reason}); retrying"),
                ),
                SwitchState::NotReady { reason, .. } => {
                    ("not-ready", format!("{sw}: not ready ({reason}); retrying"))
                }
                _ => return,
            };
            if let Ok(mut s) = said.lock()
                && s.insert(sw.to_string(), kind) != Some(kind)
            {
                crate::errln!("{line}");
            }
        })
    }
}

pub fn print_results(
    results: &[SwitchResult],
    answer_timeout: Option<Duration>,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    let mut ok = true;
    writeln!(
        out,
        "{:<20} {:>8} {:>8} {:>7} {:>8} {:>8}  result",
        "switch", "written", "config", "failed", "not sent", "ms"
    )?;
    for r in results {
        let status = match (&r.error, r.failed.is_empty()) {
            (Some(e), _) => match r.error_kind {
                Some(ErrorKind::Unreachable) => format!("UNREACHABLE: {e}"),
                Some(ErrorKind::NotReady) => format!("NOT READY: {e}"),
                _ => format!("FAILED: {e}"),
            },
            (None, true) => "ok".to_string(),
            (None, false) => "FAILED".to_string(),
        };
        ok &= r.ok();
        writeln!(
            out,
            "{:<20} {:>8} {:>8} {:>7} {:>8} {:>8}  {status}",
            r.switch,
            r.written,
            r.config_written,
            r.failed.len(),
            r.not_sent,
            r.millis
        )?;
        if r.unanswered > 0 {
            writeln!(
                out,
                "    {} entries written without waiting for an answer (--no-wait)",
                r.unanswered
            )?;
        }
        // Unanswered entries are one fact, not one line each.
        let (timed_out, refused): (Vec<_>, Vec<_>) =
            r.failed.iter().partition(|f| f.status == TIMEOUT);
        if !timed_out.is_empty() {
            writeln!(
                out,
                "    {} entries not answered{} (is the switch's plugin running?), e.g. {}",
                timed_out.len(),
                answer_timeout.map_or(String::new(), |d| format!(
                    " within {}",
                    crate::cmd::human_duration(d)
                )),
                timed_out[0].key
            )?;
        }
        for f in refused.iter().take(20) {
            writeln!(out, "    {} {}: {}", f.status, f.key, f.message)?;
        }
        if refused.len() > 20 {
            writeln!(out, "    ... and {} more refused", refused.len() - 20)?;
        }
        if r.not_sent > 0 {
            writeln!(
                out,
                "    {} entries not sent: a stage before them failed (make before break)",
                r.not_sent
            )?;
        }
    }
    if results
        .iter()
        .any(|r| r.error_kind == Some(ErrorKind::NotReady))
    {
        writeln!(
            out,
            "hint: a switch whose plugin is not running (primary and synced) cannot answer: start its weft-plugin, or write without waiting with --no-wait"
        )?;
    }
    Ok(ok)
}

#[derive(Debug, Clone)]
pub struct ApplyArgs {
    pub down: Vec<String>,
    pub dry_run: bool,
    /// `None`: do not wait for answers.
    pub timeout: Option<Duration>,
    pub retry_for: Duration,
    pub output: OutputFormat,
    pub targets: Targets,
    pub parallelism: usize,
    pub canary: Option<usize>,
    pub steal: bool,
}

/// The part of a plan file `weft apply` needs (the rest is skipped unread).
#[derive(Debug, Deserialize)]
struct PlanFile {
    weft_plan: u32,
    intent: PlanIntent,
    #[serde(default)]
    down: Vec<String>,
    #[serde(default)]
    targets: Option<Vec<String>>,
    #[serde(default)]
    offline: bool,
    switches: Vec<PlanFileSwitch>,
}

#[derive(Debug, Deserialize)]
struct PlanFileSwitch {
    name: String,
    installed_digest: String,
}

/// A plan file: its header parsed, or `None` when `path` is an intent.
fn read_plan_file(path: &str) -> anyhow::Result<Option<PlanFile>> {
    let Ok(mut f) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let mut head = [0u8; 64];
    let n = std::io::Read::read(&mut f, &mut head).unwrap_or(0);
    let head = String::from_utf8_lossy(&head[..n]);
    if !head.trim_start().starts_with("{\"weft_plan\"") {
        return Ok(None);
    }
    let f = std::fs::File::open(path).with_context(|| format!("opening {path}"))?;
    let p: PlanFile = serde_json::from_reader(std::io::BufReader::new(f))
        .with_context(|| format!("{path}: not a plan file of this weft"))?;
    if p.weft_plan != PLAN_FILE_VERSION {
        bail!(
            "{path}: plan file version {} (this weft writes {PLAN_FILE_VERSION}); make a new plan",
            p.weft_plan
        );
    }
    if text_digest(&p.intent.text) != p.intent.digest {
        bail!(
            "{path}: the intent inside does not match its digest (edited by hand?); make a new plan"
        );
    }
    Ok(Some(p))
}

/// Whether the plan file still describes the switches: each one's installed digest now equals
/// the one the plan was made against. Returns the switches that changed, with why.
async fn stale_switches(
    t: &Topology,
    p: &PlanFile,
    sel: &Option<BTreeSet<SwitchIdx>>,
) -> Vec<String> {
    let now = read_selected(t, sel, 64).await;
    let mut stale = Vec::new();
    for ps in &p.switches {
        let Some(si) = t.switch_index(&ps.name) else {
            stale.push(format!("{}: not in the plan's intent", ps.name));
            continue;
        };
        let d = now[si].digest();
        if d != ps.installed_digest {
            stale.push(format!(
                "{}: installed state changed since the plan (digest {} then, {} now; {})",
                ps.name,
                ps.installed_digest,
                d,
                now[si].describe()
            ));
        }
    }
    stale
}

pub async fn run_apply(file: &str, mut args: ApplyArgs) -> anyhow::Result<Outcome> {
    let plan_file = read_plan_file(file)?;
    let t = match &plan_file {
        Some(p) => {
            if !args.down.is_empty()
                || !args.targets.switches.is_empty()
                || !args.targets.roles.is_empty()
            {
                bail!(
                    "{file} is a plan file: it fixes --down, --switch and --role (make a new plan to change them)"
                );
            }
            if p.offline {
                bail!(
                    "{file} was made with --offline: it says nothing about what the switches hold; make a plan without --offline"
                );
            }
            args.down = p.down.clone();
            args.targets.switches = p.targets.clone().unwrap_or_default();
            match weft_topology::load_str(&p.intent.text, &p.intent.file) {
                Ok(t) => t,
                Err(weft_topology::LoadError::Invalid(d)) => {
                    super::print_diagnostics(&d);
                    return Ok(Outcome::Invalid);
                }
                Err(e) => return Err(e.into()),
            }
        }
        None => match load_valid_as(file, args.output)? {
            Some(t) => t,
            None => return Ok(Outcome::Invalid),
        },
    };
    let selection = targets::select(&t, &args.targets)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, crate::out::stdout());
    let down = links_down(&t, &args.down)?;
    if args.dry_run {
        let stats = write_plan(
            &t,
            PlanRequest {
                down: &down,
                offline: false,
                output: args.output,
                verbose: false,
                selection: &selection,
                file: None,
            },
            &mut out,
        )
        .await?;
        return Ok(if stats.untrusted > 0 {
            Outcome::Failed
        } else {
            Outcome::Ok
        });
    }
    let all: BTreeSet<SwitchIdx> = selection
        .clone()
        .unwrap_or_else(|| (0..t.switches.len()).collect());
    let lock = match FabricLock::acquire(&t, Some(&all), LockOptions::new("weft apply", args.steal))
        .await
    {
        Ok(l) => l,
        Err(e) => {
            crate::errln!("weft: {e}");
            report(&[], &[], Some(e.to_string()), &args, &mut out)?;
            return Ok(Outcome::Failed);
        }
    };
    let result = apply_passes(&t, file, &args, plan_file.as_ref(), &all, down, &lock).await;
    lock.release().await;
    let (results, canaries, error) = match result? {
        Passes::Done { results, canaries } => (results, canaries, None),
        Passes::Refused {
            error,
            results,
            canaries,
        } => (results, canaries, Some(error)),
    };
    let ok = report(&results, &canaries, error.clone(), &args, &mut out)?;
    out.flush()?;
    Ok(if ok && error.is_none() {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

/// The results as text (the table) or JSON (`{summary, canaries, switches, error}`); `error`
/// says why the apply stopped before it was done (the lock, a stale plan, a failed canary).
fn report(
    results: &[SwitchResult],
    canaries: &[String],
    error: Option<String>,
    args: &ApplyArgs,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    Ok(match args.output {
        OutputFormat::Text => {
            if results.is_empty() {
                true
            } else {
                print_results(results, args.timeout, out)?
            }
        }
        OutputFormat::Json => {
            let summary: BTreeMap<&str, usize> = [
                ("switches", results.len()),
                ("ok", results.iter().filter(|r| r.ok()).count()),
                ("written", results.iter().map(|r| r.written).sum()),
                ("failed", results.iter().map(|r| r.failed.len()).sum()),
                ("not_sent", results.iter().map(|r| r.not_sent).sum()),
            ]
            .into();
            serde_json::to_writer_pretty(
                &mut *out,
                &serde_json::json!({
                    "summary": summary,
                    "canaries": canaries,
                    "switches": results,
                    "error": error,
                }),
            )?;
            writeln!(out)?;
            results.iter().all(SwitchResult::ok)
        }
    })
}

enum Passes {
    Done {
        results: Vec<SwitchResult>,
        canaries: Vec<String>,
    },
    /// Refused before anything was written, or stopped (the canaries failed, the lock was
    /// taken); what was written so far is in `results`.
    Refused {
        error: String,
        results: Vec<SwitchResult>,
        canaries: Vec<String>,
    },
}

async fn apply_passes(
    t: &Topology,
    file: &str,
    args: &ApplyArgs,
    plan_file: Option<&PlanFile>,
    all: &BTreeSet<SwitchIdx>,
    down: BTreeSet<LinkIdx>,
    lock: &Arc<FabricLock>,
) -> anyhow::Result<Passes> {
    let sel = Some(all.clone());
    if let Some(p) = plan_file {
        let stale = stale_switches(t, p, &sel).await;
        if !stale.is_empty() {
            crate::errln!("weft: {file} is stale; nothing was written. Make a new plan:");
            for s in &stale {
                crate::errln!("  {s}");
            }
            return Ok(Passes::Refused {
                error: format!("{file} is stale: {}", stale.join("; ")),
                results: Vec::new(),
                canaries: Vec::new(),
            });
        }
    }
    let info = Arc::new(p4map::pipeline_p4info().context("the pipeline's P4Info")?);
    let opts = |targets: BTreeSet<SwitchIdx>| ApplyOptions {
        answer_timeout: args.timeout,
        retry_for: args.retry_for,
        parallel: args.parallelism.max(1),
        down: down.clone(),
        targets: Some(targets),
    };
    let lock_lost = |e: LockError, results: Vec<SwitchResult>, canaries: Vec<String>| {
        crate::errln!(
            "weft: {e}; stopped writing (what was written is read back by the next plan)"
        );
        Passes::Refused {
            error: e.to_string(),
            results,
            canaries,
        }
    };
    let mut results = Vec::new();
    let mut canary_names = Vec::new();
    let mut rest = all.clone();
    if let Some(n) = args.canary.filter(|&n| n > 0 && n < all.len()) {
        let canaries = targets::canaries(t, all, n);
        canary_names = canaries
            .iter()
            .map(|&i| t.switches[i].name.clone())
            .collect();
        crate::errln!("canaries: {}", canary_names.join(", "));
        let r = match apply::apply_locked(
            t,
            info.clone(),
            opts(canaries.clone()),
            progress_reporter(canaries.len()),
            lock,
        )
        .await
        {
            Ok(r) => r,
            Err(e) => return Ok(lock_lost(e, Vec::new(), canary_names)),
        };
        let problems =
            verify_canaries(t, &info, &down, &canaries, &r, args.timeout.is_some()).await;
        if !problems.is_empty() {
            crate::errln!(
                "weft: canary check failed; the other {} switch(es) were not written:",
                all.len() - canaries.len()
            );
            for p in &problems {
                crate::errln!("  {p}");
            }
            return Ok(Passes::Refused {
                error: format!("canary check failed: {}", problems.join("; ")),
                results: r,
                canaries: canary_names,
            });
        }
        crate::errln!("canaries verified: answered, plugin running, nothing left to plan");
        rest = all.difference(&canaries).copied().collect();
        results.extend(r);
    }
    let r = match apply::apply_locked(
        t,
        info,
        opts(rest.clone()),
        progress_reporter(rest.len()),
        lock,
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return Ok(lock_lost(e, results, canary_names)),
    };
    results.extend(r);
    let order: BTreeMap<&str, usize> = t
        .switches
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.as_str(), i))
        .collect();
    results.sort_by_key(|r| order.get(r.switch.as_str()).copied().unwrap_or(usize::MAX));
    Ok(Passes::Done {
        results,
        canaries: canary_names,
    })
}

/// After the canary pass: every canary took everything, its plugin runs (when answers were
/// awaited), and reading it again leaves nothing to plan.
async fn verify_canaries(
    t: &Topology,
    info: &weft_p4rt::P4Info,
    down: &BTreeSet<LinkIdx>,
    canaries: &BTreeSet<SwitchIdx>,
    results: &[SwitchResult],
    waited: bool,
) -> Vec<String> {
    let mut problems: Vec<String> = results
        .iter()
        .filter(|r| !r.ok())
        .map(|r| {
            format!(
                "{}: {}",
                r.switch,
                r.error.clone().unwrap_or_else(|| format!(
                    "{} entries refused or not answered",
                    r.failed.len()
                ))
            )
        })
        .collect();
    if !problems.is_empty() {
        return problems;
    }
    if !waited {
        // --no-wait: no plugin answers, so APPL_STATE_DB says nothing to compare.
        return problems;
    }
    let sel = Some(canaries.clone());
    let now = read_selected(t, &sel, 64).await;
    let compiler = Compiler::new(t, link_state(t, down));
    for &si in canaries {
        let name = &t.switches[si].name;
        if !now[si].trusted() {
            problems.push(format!("{name}: {}", now[si].describe()));
            continue;
        }
        let sw = &compiler.switches()[si];
        match plan::desired_switch(t, info, sw, si) {
            Ok(d) => {
                let p = plan::diff(t, si, sw, d, &now[si], down, plan::Views::Without);
                if !p.is_empty() {
                    problems.push(format!(
                        "{name}: read back, {} changes are still to make",
                        p.changes()
                    ));
                }
            }
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_between_planes_are_one_line_and_others_stay() {
        let t = weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/multi-plane-8.yaml"
        ))
        .expect("example");
        let c = Compiler::new(&t, LinkState::all_up(&t));
        let notes = c.notes();
        assert!(notes.len() > 1000, "{}", notes.len());
        let mut with_other = notes.clone();
        with_other.push("something else".into());
        let s = summarise_notes(&t, &with_other);
        assert_eq!(s.len(), 2, "{:?}", &s[..s.len().min(3)]);
        assert!(
            s[0].starts_with(&format!("{} leaf pairs", notes.len())),
            "{}",
            s[0]
        );
        assert!(s[0].contains("8 separate planes"), "{}", s[0]);
        assert_eq!(s[1], "something else");
    }
}
