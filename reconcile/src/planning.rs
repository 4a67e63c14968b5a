//! `weft plan`: compiles, reads what every selected switch has (unless offline) and writes the
//! plan one switch at a time, as text or JSON and into a plan file ([`crate::planfile`]), so a
//! fabric of thousands of switches is never held whole in memory.

use std::collections::{BTreeSet, VecDeque};
use std::io::Write;
use std::sync::Arc;

use weft_compiler::Compiler;
use weft_compiler::down::link_state;
use weft_compiler::p4map;
use weft_sonic_schema::state::PluginStatus;
use weft_topology::{LinkIdx, SwitchIdx, Topology};

use crate::plan::{self, DesiredError, Installed};
use crate::planfile::{PlanIntent, write_file_header};
use crate::targets::selected;

/// Switches whose installed state `weft plan` reads at once.
const PARALLEL_READS: usize = 64;
/// Switches compiled ahead of the one whose plan is written next (their reads in flight).
const PLAN_WINDOW: usize = 2 * PARALLEL_READS;

/// Reads the installed state of the selected switches (the others stay "not read").
pub async fn read_selected(
    t: &Topology,
    sel: &Option<BTreeSet<SwitchIdx>>,
    parallel: usize,
) -> Vec<Installed> {
    crate::io::read_all(t, |i| selected(sel, i), parallel).await
}

/// How the plan is written on the command's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// Why a plan could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("the pipeline's P4Info")]
    P4Info(#[source] weft_p4rt::Error),
    #[error(transparent)]
    Desired(#[from] DesiredError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
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
    pub format: Format,
    pub verbose: bool,
    pub selection: &'a Option<BTreeSet<SwitchIdx>>,
    /// Also write a plan file here, with its intent and `--down` as given.
    pub file: Option<(&'a mut dyn Write, &'a PlanIntent, &'a [String])>,
    /// JSON written right after the plan's opening brace (the caller's envelope fields, each
    /// followed by a comma); empty for none.
    pub json_lead: &'a str,
}

/// A switch's installed state in `write_plan`: known (read, or by digest) or being read.
enum Pending {
    Ready(Box<Installed>),
    Reading(tokio::task::JoinHandle<Installed>),
}

/// A switch's status row as read before planning, or why it could not be read.
enum StatusRead {
    Row(Option<Box<PluginStatus>>),
    Failed(String),
}

/// The switch's installed state from its status row alone, when its plugin's digests say it
/// holds exactly `desired`.
fn by_digest(name: &str, status: PluginStatus, desired: &plan::DesiredSwitch) -> Option<Installed> {
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

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One `write_plan`: what it was asked, what it compiled and read, what it wrote so far.
struct Planner<'a, 'r> {
    t: &'a Topology,
    req: PlanRequest<'r>,
    info: weft_p4rt::P4Info,
    statuses: Vec<StatusRead>,
    reads: Arc<tokio::sync::Semaphore>,
    notes: Vec<String>,
    links_down: Vec<String>,
    stats: PlanStats,
    fallbacks: BTreeSet<String>,
    totals: plan::Totals,
    first: bool,
}

impl<'a, 'r> Planner<'a, 'r> {
    /// Writes the headers of the plan and of the plan file.
    fn header(&mut self, out: &mut dyn Write) -> Result<(), PlanError> {
        let t = self.t;
        match self.req.format {
            Format::Text => {
                out.write_all(plan::render_header(&t.name, &self.links_down).as_bytes())?
            }
            Format::Json => {
                out.write_all(b"{")?;
                out.write_all(self.req.json_lead.as_bytes())?;
                json_header(out, t, &self.links_down, &self.notes)?;
            }
        }
        if let Some((f, intent, down_args)) = self.req.file.as_mut() {
            let selected: Option<Vec<&str>> = self.req.selection.as_ref().map(|s| {
                s.iter()
                    .map(|&i| t.switches[i].name.as_str())
                    .collect::<Vec<_>>()
            });
            write_file_header(*f, now_ms(), intent, down_args, selected, self.req.offline)?;
            json_header(*f, t, &self.links_down, &self.notes)?;
        }
        Ok(())
    }

    /// Switch `si`'s installed state: empty offline, by its plugin's digests when they match
    /// `desired`, else read (in a task of its own, a bounded number at a time).
    fn installed(&mut self, si: SwitchIdx, desired: &plan::DesiredSwitch) -> Pending {
        if self.req.offline {
            return Pending::Ready(Box::new(Installed::empty("not read (--offline)")));
        }
        let status = std::mem::replace(&mut self.statuses[si], StatusRead::Row(None));
        let status = match status {
            StatusRead::Failed(e) => {
                return Pending::Ready(Box::new(Installed::empty(format!("DB unreachable ({e})"))));
            }
            StatusRead::Row(status) => status,
        };
        let name = &self.t.switches[si].name;
        match status.and_then(|st| by_digest(name, *st, desired)) {
            Some(i) => Pending::Ready(Box::new(i)),
            None => {
                let sw = &self.t.switches[si];
                let (db, consumer, sem) = (sw.db.clone(), sw.consumer, self.reads.clone());
                Pending::Reading(tokio::spawn(async move {
                    let _permit = sem.acquire_owned().await;
                    crate::io::read_installed_of(&db, consumer)
                        .await
                        .unwrap_or_else(|e| Installed::empty(format!("DB unreachable ({e})")))
                }))
            }
        }
    }

    /// Writes switch `si`'s plan.
    fn switch(
        &mut self,
        si: SwitchIdx,
        sw: &weft_compiler::SwitchDesired,
        desired: plan::DesiredSwitch,
        inst: &Installed,
        out: &mut dyn Write,
    ) -> Result<(), PlanError> {
        let req = &mut self.req;
        if !req.offline && !inst.trusted() {
            self.stats.untrusted += 1;
        }
        let json = req.format == Format::Json || req.file.is_some();
        let views = if json {
            plan::Views::With
        } else {
            plan::Views::Without
        };
        let mut p = plan::diff(self.t, si, sw, desired, inst, req.down, views);
        if json || req.verbose {
            // Readers and reviewers get rows in key order; the writers need no order.
            p.config_set
                .sort_by_cached_key(plan::ConfigChange::redis_key);
        }
        if !p.is_empty() {
            self.stats.changed += 1;
        }
        self.totals.count(&p);
        match req.format {
            Format::Text => {
                plan::fallbacks(sw, &mut self.fallbacks);
                out.write_all(plan::render_switch(&p, req.verbose).as_bytes())?;
            }
            Format::Json => {
                if !self.first {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, &p)?;
            }
        }
        if let Some((f, _, _)) = req.file.as_mut() {
            if !self.first {
                f.write_all(b",")?;
            }
            serde_json::to_writer(&mut **f, &p)?;
        }
        self.first = false;
        Ok(())
    }

    /// Writes the totals and notes (text) or closes the JSON, and the plan file.
    fn footer(&mut self, out: &mut dyn Write) -> Result<(), PlanError> {
        let t = self.t;
        let n = self
            .req
            .selection
            .as_ref()
            .map_or(t.switches.len(), BTreeSet::len);
        match self.req.format {
            Format::Text => {
                let shown = if self.req.verbose {
                    self.notes.clone()
                } else {
                    summarise_notes(t, &self.notes)
                };
                out.write_all(
                    plan::render_footer(n, &self.totals, &self.fallbacks, &shown, self.req.verbose)
                        .as_bytes(),
                )?;
            }
            Format::Json => out.write_all(b"]}\n")?,
        }
        if let Some((f, _, _)) = self.req.file.as_mut() {
            f.write_all(b"]}\n")?;
            f.flush()?;
        }
        out.flush()?;
        Ok(())
    }
}

/// Compiles, reads what every selected switch has (unless `offline`), and writes the plan to
/// `out` one switch at a time (and to the plan file, when asked), so a fabric of thousands of
/// switches is never held whole in memory.
pub async fn write_plan(
    t: &Topology,
    req: PlanRequest<'_>,
    out: &mut dyn Write,
) -> Result<PlanStats, PlanError> {
    // Online, each switch's status row first, read while the fabric compiles: a plugin in sync
    // whose digests equal the desired state's holds exactly it, and its rows are not read.
    let status_reads = (!req.offline)
        .then(|| crate::io::spawn_status_reads(t, |i| selected(req.selection, i), PARALLEL_READS));
    let compiler = Compiler::new(t, link_state(t, req.down));
    let info = p4map::pipeline_p4info().map_err(PlanError::P4Info)?;
    let statuses = match status_reads {
        None => Vec::new(),
        Some(h) => match h.await {
            Ok(rs) => rs
                .into_iter()
                .map(|r| match r {
                    Ok(row) => StatusRead::Row(row.map(Box::new)),
                    Err(e) => StatusRead::Failed(e.to_string()),
                })
                .collect(),
            Err(e) => (0..t.switches.len())
                .map(|_| StatusRead::Failed(format!("status read failed ({e})")))
                .collect(),
        },
    };
    let mut notes: Vec<String> = compiler.notes();
    notes.sort();
    let links_down: Vec<String> = req
        .down
        .iter()
        .map(|&l| crate::core::link_name(t, l))
        .collect();
    let mut p = Planner {
        t,
        req,
        info,
        statuses,
        reads: Arc::new(tokio::sync::Semaphore::new(PARALLEL_READS)),
        notes,
        links_down,
        stats: PlanStats::default(),
        fallbacks: BTreeSet::new(),
        totals: plan::Totals::default(),
        first: true,
    };
    p.header(out)?;
    // Switches compiled, in order, whose installed state is known or being read: a plan is
    // written once its switch and every one before it are, so reads overlap compiling.
    let mut queue: VecDeque<(usize, plan::DesiredSwitch, Pending)> = VecDeque::new();
    let switches = compiler.switches();
    let selection = p.req.selection;
    let mut next = switches
        .iter()
        .enumerate()
        .filter(|(si, _)| selected(selection, *si));
    loop {
        let front_ready = matches!(queue.front(), Some((_, _, Pending::Ready(_))));
        if !front_ready
            && queue.len() < PLAN_WINDOW
            && let Some((si, sw)) = next.next()
        {
            let desired = plan::desired_switch(t, &p.info, sw, si)?;
            let inst = p.installed(si, &desired);
            queue.push_back((si, desired, inst));
            continue;
        }
        let Some((si, desired, inst)) = queue.pop_front() else {
            break;
        };
        let inst = match inst {
            Pending::Ready(i) => *i,
            Pending::Reading(h) => h
                .await
                .unwrap_or_else(|e| Installed::empty(format!("read failed ({e})"))),
        };
        p.switch(si, &switches[si], desired, &inst, out)?;
    }
    p.footer(out)?;
    Ok(p.stats)
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

#[cfg(test)]
mod tests {
    use super::*;
    use weft_compiler::LinkState;

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
