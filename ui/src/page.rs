//! The page's state and what each update sends: [`Page::update`] takes one [`Reading`] and
//! `weft run`'s view and returns a [`Frame`] — every switch's state, every link's state and
//! utilisation, what moved (ECN, PAUSE, drops), the diagnosis and the timeline. Pure: time
//! comes in with the reading; the tests feed it made-up readings.
//!
//! Nothing is green without data: a switch is `running` only when its plugin says so, a
//! link's utilisation is known only from counters a live plugin keeps, and a diagnosis with
//! fewer than two samples, or over switches that were not read, says so.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;
use weft_diagnose::{Fabric, Finding, Sample, Thresholds, Window};
use weft_observe::read::{Staleness, SwitchRead};
use weft_topology::Topology;

use crate::history::{self, History};
use crate::layout::{Layout, layout};
use crate::rates::{self, Counters, LinkRates, SwitchRates};
use crate::reading::{Reading, SwitchReading};
use crate::run::{Event, RunSeen, RunSummary, Timeline, reconvergence_event};

/// Events in a frame.
const FRAME_EVENTS: usize = 60;

/// What the page's source is, for the words it uses.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    /// `switch DBs`, `prometheus http://…`.
    pub name: String,
    /// Why a switch has no plugin data (`no WEFT_PLUGIN|status row: no live plugin`).
    pub no_plugin: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub running: usize,
    pub not_in_sync: usize,
    pub unknown: usize,
    pub unreachable: usize,
    pub links_up: usize,
    pub links_down: usize,
    pub links_out: usize,
    pub links_unknown: usize,
    pub counters_ok: usize,
}

/// What moved on a link this interval (only links where something did).
#[derive(Debug, Clone, Serialize)]
pub struct Hot {
    #[serde(skip_serializing_if = "is_zero")]
    pub ecn: f64,
    #[serde(skip_serializing_if = "is_zero")]
    pub pause: f64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub storm: bool,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The rules' verdict over the page's window.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// `findings`, `nothing found`, `collecting` (fewer than two samples), `no data`.
    pub state: &'static str,
    pub samples: usize,
    pub span_s: f64,
    /// Switches sampled at both ends of the window, of all.
    pub switches_sampled: usize,
    pub switches_total: usize,
    pub as_of_ms: u64,
    pub findings: Vec<Finding>,
}

/// One update, as sent to the browser. Per-switch and per-link values are indexed as
/// [`Layout::switches`] and [`Layout::links`].
#[derive(Debug, Clone, Serialize)]
pub struct Frame {
    pub seq: u64,
    pub t_ms: u64,
    /// How long the read took.
    pub took_ms: u64,
    /// Seconds the rates span (0: the first read, no rates yet).
    pub interval_s: f64,
    pub source: String,
    pub run: RunSummary,
    /// Per switch: `R` running, `N` not in sync, `U` unknown (no plugin data), `X` unreachable.
    pub sw: String,
    /// Per switch, its counters: `o` read, `n` none there, `s` stale (no live writer), `x` not
    /// answered.
    pub cn: String,
    /// Why a switch is not `R`.
    pub why: BTreeMap<usize, String>,
    /// Per link: `u` up, `d` down, `s` suppressed, `h` hold-down, `a` admin-down, `?` unknown.
    pub ls: String,
    /// Per link: utilisation of the busier direction in ‰, -1 unknown.
    pub lu: Vec<i32>,
    pub hot: BTreeMap<usize, Hot>,
    /// Drops/s by reason, per switch that dropped.
    pub drops: BTreeMap<usize, BTreeMap<String, f64>>,
    pub totals: Totals,
    pub diagnosis: Diagnosis,
    /// Newest first.
    pub events: Vec<Event>,
}

/// Everything the page remembers between reads.
pub struct Page {
    pub layout: Layout,
    /// One for every window the page diagnoses: its lookups are built once.
    fabric: std::sync::Arc<Fabric>,
    source: SourceInfo,
    prev: Option<Counters>,
    /// The counters at the last history point.
    hist_base: Option<Counters>,
    pub history: History,
    /// Milliseconds between history points.
    bucket_ms: u64,
    timeline: Timeline,
    window: VecDeque<Sample>,
    window_ms: u64,
    t0_ms: Option<u64>,
    diagnosis: Diagnosis,
    /// The last frame's per-link and per-switch states, for the timeline.
    last_ls: Option<Vec<u8>>,
    last_sw: Option<Vec<u8>>,
    last_reconvergences: Option<u64>,
    /// `weft run` reports its reconvergences itself ([`Page::push_event`]).
    pub live_reconvergences: bool,
    seq: u64,
    /// The last rates, for the drill-downs.
    pub link_rates: Vec<LinkRates>,
    pub switch_rates: Vec<Option<SwitchRates>>,
    /// The last read's plugins and port states, for the drill-downs.
    pub plugins: Vec<SwitchRead<crate::reading::PluginInfo>>,
    pub ports: Vec<SwitchRead<Vec<Option<bool>>>>,
    pub last: Option<Frame>,
}

impl Page {
    /// A page of `t` read from `source`, diagnosing over `window_ms`, keeping `history_ms`.
    pub fn new(t: &Topology, source: SourceInfo, window_ms: u64, history_ms: u64) -> Page {
        let layout = layout(t);
        Page {
            diagnosis: Diagnosis {
                state: "collecting",
                samples: 0,
                span_s: 0.0,
                switches_sampled: 0,
                switches_total: t.switches.len(),
                as_of_ms: 0,
                findings: Vec::new(),
            },
            layout,
            fabric: weft_observe::diagnose::fabric_of(t).into(),
            source,
            prev: None,
            hist_base: None,
            history: History::default(),
            bucket_ms: (history_ms / history::POINTS as u64).max(1),
            timeline: Timeline::default(),
            window: VecDeque::new(),
            window_ms: window_ms.max(1),
            t0_ms: None,
            last_ls: None,
            last_sw: None,
            last_reconvergences: None,
            live_reconvergences: false,
            seq: 0,
            link_rates: Vec::new(),
            switch_rates: Vec::new(),
            plugins: Vec::new(),
            ports: Vec::new(),
            last: None,
        }
    }

    /// The last diagnosis.
    pub fn diagnosis(&self) -> &Diagnosis {
        &self.diagnosis
    }

    pub fn push_event(&mut self, e: Event) {
        self.timeline.push(e);
    }

    /// Counters a live writer keeps, and which switches' counters those are.
    fn usable(&self, r: &Reading) -> (Counters, String) {
        let mut cn = String::with_capacity(r.switches.len());
        let switches = r
            .switches
            .iter()
            .map(|s| match (&s.counters, &s.plugin) {
                // Rows with nobody writing them are old, however they look.
                (SwitchRead::Ok(_), SwitchRead::NoData) => {
                    cn.push('s');
                    None
                }
                (SwitchRead::Ok(v), _) => {
                    cn.push('o');
                    Some(v.clone())
                }
                (SwitchRead::Stale { .. }, _) => {
                    cn.push('s');
                    None
                }
                (SwitchRead::NoData, _) => {
                    cn.push('n');
                    None
                }
                (SwitchRead::Unreachable(_), _) => {
                    cn.push('x');
                    None
                }
            })
            .collect();
        (
            Counters {
                t_ms: r.t_ms,
                switches,
            },
            cn,
        )
    }

    /// Each switch's state letter and why it is not running.
    fn switch_states(&self, r: &Reading, run: &RunSeen) -> (Vec<u8>, BTreeMap<usize, String>) {
        let not_converged = run.not_converged();
        let mut why = BTreeMap::new();
        let states = r
            .switches
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let name = self.layout.switches[i].name.as_str();
                let (c, w) = switch_state(s, not_converged.get(name), &self.source.no_plugin);
                if let Some(w) = w {
                    why.insert(i, w);
                }
                c
            })
            .collect();
        (states, why)
    }

    /// Each link's state letter.
    fn link_states(&self, r: &Reading, run: &RunSeen) -> Vec<u8> {
        let reported = run.links();
        let running = run.status().is_some();
        let end = |sw: usize, p: usize| -> Option<bool> {
            r.switches
                .get(sw)
                .and_then(|s| s.ports.data())
                .and_then(|v| v.get(p).copied().flatten())
        };
        self.layout
            .links
            .iter()
            .map(|k| {
                if k.admin_down {
                    return b'a';
                }
                let a = end(k.a, k.ap);
                let b = if k.host { a } else { end(k.b, k.bp) };
                if a == Some(false) || b == Some(false) {
                    return b'd';
                }
                if running && !k.host {
                    match reported
                        .get(k.name.as_str())
                        .map(|l| weft_observe::status::usage(l))
                    {
                        Some("suppressed") => return b's',
                        Some("hold-down") => return b'h',
                        Some("down") => return b'd',
                        _ => {}
                    }
                }
                if a == Some(true) && b == Some(true) {
                    b'u'
                } else {
                    b'?'
                }
            })
            .collect()
    }

    /// The diagnosis window: the new sample kept, samples thinned so that at most a few
    /// remain (the rules compare the first two with the last two), older ones dropped.
    fn keep_sample(&mut self, r: &Reading) {
        let t0 = *self.t0_ms.get_or_insert(r.t_ms);
        let mut s = Sample {
            t_ms: r.t_ms.saturating_sub(t0),
            switches: BTreeMap::new(),
        };
        for (i, sw) in r.switches.iter().enumerate() {
            // Counters nobody writes any more would only look idle.
            if sw.plugin.data().is_none() {
                continue;
            }
            if let Some(x) = &sw.sample {
                s.switches
                    .insert(self.layout.switches[i].name.clone(), x.clone());
            }
        }
        let now = s.t_ms;
        self.window.push_back(s);
        let spacing = self.window_ms / 4;
        let n = self.window.len();
        if n >= 3
            && self.window[n - 2]
                .t_ms
                .saturating_sub(self.window[n - 3].t_ms)
                < spacing
        {
            self.window.remove(n - 2);
        }
        while self.window.len() > 2 && now.saturating_sub(self.window[1].t_ms) >= self.window_ms {
            self.window.pop_front();
        }
    }

    /// The rules over the window (`weft diagnose`'s, with its default thresholds).
    pub fn diagnose(&mut self, now_ms: u64) {
        let samples: Vec<Sample> = self.window.iter().cloned().collect();
        let (first, last) = (samples.first(), samples.last());
        let sampled = match (first, last) {
            (Some(f), Some(l)) => f
                .switches
                .keys()
                .filter(|k| l.switches.contains_key(*k))
                .count(),
            _ => 0,
        };
        let span_s = match (first, last) {
            (Some(f), Some(l)) => l.t_ms.saturating_sub(f.t_ms) as f64 / 1000.0,
            _ => 0.0,
        };
        let n = samples.len();
        let w = Window {
            fabric: self.fabric.clone(),
            samples,
        };
        let findings = if n >= 2 && sampled > 0 {
            weft_diagnose::diagnose(&w, &Thresholds::default())
        } else {
            Vec::new()
        };
        self.diagnosis = Diagnosis {
            state: if !findings.is_empty() {
                "findings"
            } else if n < 2 {
                "collecting"
            } else if sampled == 0 {
                "no data"
            } else {
                "nothing found"
            },
            samples: n,
            span_s,
            switches_sampled: sampled,
            switches_total: self.layout.switches.len(),
            as_of_ms: now_ms,
            findings,
        };
    }

    /// Timeline entries for what changed since the last frame.
    fn note_changes(&mut self, t_ms: u64, sw: &[u8], ls: &[u8], run: &RunSeen) {
        if let Some(prev) = &self.last_ls {
            for (i, (a, b)) in prev.iter().zip(ls).enumerate() {
                if a != b {
                    self.timeline.push(Event {
                        t_ms,
                        kind: "link",
                        subject: self.layout.links[i].name.clone(),
                        detail: format!("{} → {}", link_word(*a), link_word(*b)),
                    });
                }
            }
        }
        if let Some(prev) = &self.last_sw {
            for (i, (a, b)) in prev.iter().zip(sw).enumerate() {
                if a != b {
                    self.timeline.push(Event {
                        t_ms,
                        kind: "switch",
                        subject: self.layout.switches[i].name.clone(),
                        detail: format!("{} → {}", switch_word(*a), switch_word(*b)),
                    });
                }
            }
        }
        if let Some(s) = run.status() {
            let before = self.last_reconvergences.unwrap_or(s.reconvergences);
            if s.reconvergences > before
                && !self.live_reconvergences
                && let Some(last) = &s.last
            {
                let more = s.reconvergences - before - 1;
                self.timeline.push(reconvergence_event(t_ms, last, more));
            }
            self.last_reconvergences = Some(s.reconvergences);
        }
        self.last_ls = Some(ls.to_vec());
        self.last_sw = Some(sw.to_vec());
    }

    /// A history point when a bucket has passed since the last one.
    fn record(&mut self, cur: &Counters) {
        let Some(base) = &self.hist_base else {
            self.hist_base = Some(cur.clone());
            return;
        };
        if cur.t_ms.saturating_sub(base.t_ms) < self.bucket_ms {
            return;
        }
        let lr = rates::links(&self.layout, base, cur);
        let sr = rates::switches(base, cur);
        let mut links = Vec::with_capacity(lr.len() * history::LINK_VALUES);
        for r in &lr {
            links.extend([
                history::encode(r.ab_bps),
                history::encode(r.ba_bps),
                history::encode(r.ecn),
                history::encode(r.pause),
            ]);
        }
        let mut switches = Vec::with_capacity(sr.len() * history::SWITCH_VALUES);
        for r in &sr {
            let v = |f: fn(&SwitchRates) -> f64| history::encode(r.as_ref().map(f));
            switches.extend([
                v(|s| s.rx_bps),
                v(|s| s.tx_bps),
                v(|s| s.ecn),
                v(|s| s.pause_rx),
                v(|s| s.drops.values().sum()),
            ]);
        }
        self.history.push(
            cur.t_ms,
            links.into_boxed_slice(),
            switches.into_boxed_slice(),
        );
        self.hist_base = Some(cur.clone());
    }

    /// One update: the frame of `r` (read at `r.t_ms`) with `weft run` as `run` shows it;
    /// with `diagnose`, the rules run over the window first (else the frame carries the last
    /// diagnosis, with its time).
    pub fn update(&mut self, r: &Reading, run: &RunSeen, diagnose: bool) -> Frame {
        self.seq += 1;
        let (cur, cn) = self.usable(r);
        let (sw, why) = self.switch_states(r, run);
        let ls = self.link_states(r, run);
        let (interval_s, lr, sr) = match &self.prev {
            Some(p) => (
                cur.t_ms.saturating_sub(p.t_ms) as f64 / 1000.0,
                rates::links(&self.layout, p, &cur),
                rates::switches(p, &cur),
            ),
            None => (
                0.0,
                vec![LinkRates::default(); self.layout.links.len()],
                vec![None; r.switches.len()],
            ),
        };
        self.keep_sample(r);
        if diagnose {
            self.diagnose(r.t_ms);
        }
        self.note_changes(r.t_ms, &sw, &ls, run);
        self.record(&cur);
        let frame = self.frame(r, run, (sw, cn, why, ls), interval_s, &lr, &sr);
        self.prev = Some(cur);
        self.link_rates = lr;
        self.switch_rates = sr;
        self.plugins = r.switches.iter().map(|s| s.plugin.clone()).collect();
        self.ports = r.switches.iter().map(|s| s.ports.clone()).collect();
        self.last = Some(frame.clone());
        frame
    }

    fn frame(
        &self,
        r: &Reading,
        run: &RunSeen,
        (sw, cn, why, ls): (Vec<u8>, String, BTreeMap<usize, String>, Vec<u8>),
        interval_s: f64,
        lr: &[LinkRates],
        sr: &[Option<SwitchRates>],
    ) -> Frame {
        let mut hot = BTreeMap::new();
        let lu = lr
            .iter()
            .zip(&self.layout.links)
            .enumerate()
            .map(|(i, (x, k))| {
                let (ecn, pause) = (x.ecn.unwrap_or(0.0), x.pause.unwrap_or(0.0));
                if ecn > 0.0 || pause > 0.0 || x.storm {
                    hot.insert(
                        i,
                        Hot {
                            ecn: round1(ecn),
                            pause: round1(pause),
                            storm: x.storm,
                        },
                    );
                }
                x.utilisation(k.gbps)
                    .map_or(-1, |u| (u * 1000.0).round().min(99_999.0) as i32)
            })
            .collect();
        let drops = sr
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let d = &s.as_ref()?.drops;
                (!d.is_empty())
                    .then(|| (i, d.iter().map(|(k, v)| (k.clone(), round1(*v))).collect()))
            })
            .collect();
        let count = |v: &[u8], c: &[u8]| v.iter().filter(|x| c.contains(x)).count();
        let totals = Totals {
            running: count(&sw, b"R"),
            not_in_sync: count(&sw, b"N"),
            unknown: count(&sw, b"U"),
            unreachable: count(&sw, b"X"),
            links_up: count(&ls, b"u"),
            links_down: count(&ls, b"d"),
            links_out: count(&ls, b"sha"),
            links_unknown: count(&ls, b"?"),
            counters_ok: cn.bytes().filter(|c| *c == b'o').count(),
        };
        Frame {
            seq: self.seq,
            t_ms: r.t_ms,
            took_ms: r.took_ms,
            interval_s,
            source: self.source.name.clone(),
            run: RunSummary::of(run),
            sw: String::from_utf8_lossy(&sw).into_owned(),
            cn,
            why,
            ls: String::from_utf8_lossy(&ls).into_owned(),
            lu,
            hot,
            drops,
            totals,
            diagnosis: self.diagnosis.clone(),
            events: self.timeline.last(FRAME_EVENTS),
        }
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// A switch's letter and why it is not running: only a plugin that says `running` (and that
/// `weft run`, when it runs, has converged) is `R`.
fn switch_state(
    s: &SwitchReading,
    not_converged: Option<&String>,
    no_plugin: &str,
) -> (u8, Option<String>) {
    match &s.plugin {
        SwitchRead::Unreachable(e) => (b'X', Some(format!("unreachable: {e}"))),
        SwitchRead::NoData => (b'U', Some(no_plugin.to_string())),
        SwitchRead::Stale {
            why: Staleness::Old { age, .. },
            ..
        } => (
            b'U',
            Some(format!(
                "plugin last heard of {} ago",
                weft_observe::human_duration(*age)
            )),
        ),
        SwitchRead::Stale { why, .. } => (b'U', Some(format!("plugin: {why}"))),
        SwitchRead::Ok(p) if p.state == "running" => match not_converged {
            Some(w) => (b'N', Some(w.clone())),
            None => (b'R', None),
        },
        SwitchRead::Ok(p) => (b'N', Some(format!("plugin {}", p.state))),
    }
}

fn link_word(c: u8) -> &'static str {
    match c {
        b'u' => "up",
        b'd' => "down",
        b's' => "suppressed",
        b'h' => "hold-down",
        b'a' => "admin-down",
        _ => "unknown",
    }
}

fn switch_word(c: u8) -> &'static str {
    match c {
        b'R' => "running",
        b'N' => "not in sync",
        b'X' => "unreachable",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests;
