//! Scoring `weft diagnose` on the twin: seeded faults (one to three at once), sliding windows
//! of samples taken every second, every finding of every window judged.
//!
//! A trial samples a healthy fabric under load for a few seconds, injects its faults at a
//! random instant, samples until every fault was named or `deadline` passed, clears them and
//! samples two more windows. After each sample the rules judge the window of the last
//! `window` samples. A finding is right when it names (kind and target) a fault in force at
//! some time in the window or within one poll interval before it (counters lag by up to one
//! poll); every other finding is wrong, in any window. A fault is localised when a window
//! ending within `deadline` of its onset names it; the time to localise is from its onset to
//! the end of that window plus the time the sample and the rules took.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use weft_diagnose::{Fabric, Finding, Kind, Sample, Thresholds, Window};
use weft_topology::SwitchIdx;

use crate::fault::Fault;
use crate::ports::Peer;
use crate::{Twin, TwinError};

/// A small deterministic generator (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        (!v.is_empty()).then(|| &v[self.below(v.len() as u64) as usize])
    }
}

/// The kinds of fault a campaign draws, in the table's order.
pub const KINDS: &[&str] = &[
    "lossy link",
    "lossy switch",
    "slow link",
    "black hole",
    "PFC storm",
    "PFC storm, spreading",
    "slow receiver",
    "incast",
    "reordering",
];

/// The pod of a fat-tree switch (`podN-…`), if it has one.
fn pod(name: &str) -> Option<&str> {
    name.split_once('-')
        .map(|(p, _)| p)
        .filter(|p| p.starts_with("pod"))
}

/// A fault of `kind` on switches in none of `avoid`'s pods (nor on those switches).
pub fn draw(twin: &Twin, rng: &mut Rng, kind: &str, avoid: &BTreeSet<SwitchIdx>) -> Option<Fault> {
    let t = &twin.topo;
    let ports = &twin.ports;
    let busy: BTreeSet<&str> = avoid
        .iter()
        .filter_map(|s| pod(&t.switches[*s].name))
        .collect();
    let free = |s: SwitchIdx| {
        !avoid.contains(&s) && pod(&t.switches[s].name).is_none_or(|p| !busy.contains(p))
    };
    let tier = |s: SwitchIdx| ports.tier[s];
    let switches: Vec<SwitchIdx> = (0..t.switches.len())
        .filter(|s| free(*s) && !twin.life[*s].missing)
        .collect();
    let hosts: Vec<usize> = (0..t.hosts.len())
        .filter(|h| free(t.hosts[*h].switch))
        .collect();
    // Switch–switch ports whose peer is free too, loaded.
    let links: Vec<u32> = switches
        .iter()
        .flat_map(|s| ports.of_switch[*s].clone())
        .filter(|p| match ports.get(*p).peer {
            Peer::Switch(q) => free(ports.get(q).switch) && twin.base.egress[*p as usize] > 0.0,
            _ => false,
        })
        .collect();
    let f = match kind {
        "lossy link" => {
            let from = *rng.pick(&links)?;
            let Peer::Switch(to) = ports.get(from).peer else {
                return None;
            };
            Fault::LossyLink {
                from,
                to,
                loss: rng.range(0.10, 0.30),
                both: rng.below(2) == 0,
            }
        }
        "lossy switch" => {
            let spines: Vec<SwitchIdx> =
                switches.iter().copied().filter(|s| tier(*s) > 1).collect();
            Fault::LossySwitch {
                switch: *rng.pick(&spines)?,
                loss: rng.range(0.10, 0.30),
            }
        }
        "slow link" => Fault::SlowLink {
            port: *rng.pick(&links)?,
            share: rng.range(0.05, 0.5),
            pfc: rng.below(2) == 0,
        },
        "black hole" => {
            // A spine's port down to a leaf: its route to the leaf's subnet goes.
            let down: Vec<u32> = links
                .iter()
                .copied()
                .filter(|p| tier(ports.get(*p).switch) == 2 && ports.peer_tier(*p) == Some(1))
                .collect();
            Fault::BlackHole {
                port: *rng.pick(&down)?,
            }
        }
        "PFC storm" | "PFC storm, spreading" => {
            let spreading = kind != "PFC storm";
            Fault::PfcStorm {
                host: *rng.pick(&hosts)?,
                rate: rng.range(500.0, 20_000.0),
                watchdog: !spreading,
                depth: if spreading { 1 + rng.below(3) as u8 } else { 1 },
            }
        }
        "slow receiver" => Fault::SlowReceiver {
            host: *rng.pick(&hosts)?,
            rate: rng.range(5.0, 60.0),
            watchdog: rng.below(3) == 0,
        },
        "incast" => {
            let host = *rng.pick(&hosts)?;
            let n = 4 + rng.below(13) as usize;
            let mut senders = BTreeSet::new();
            for _ in 0..n * 4 {
                if senders.len() >= n {
                    break;
                }
                let s = rng.below(t.hosts.len() as u64) as usize;
                if s != host {
                    senders.insert(s);
                }
            }
            Fault::Incast {
                host,
                senders: senders.into_iter().collect(),
                pfc: rng.below(2) == 0,
            }
        }
        "reordering" => {
            let leaves: Vec<SwitchIdx> =
                switches.iter().copied().filter(|s| tier(*s) == 1).collect();
            Fault::Reordering {
                leaf: *rng.pick(&leaves)?,
                fraction: rng.range(0.08, 0.3),
            }
        }
        _ => return None,
    };
    Some(f)
}

/// The switches a fault is on (to keep a trial's faults apart).
pub fn switches_of(twin: &Twin, f: &Fault) -> Vec<SwitchIdx> {
    let ports = &twin.ports;
    let sw = |p: u32| ports.get(p).switch;
    let host = |h: usize| twin.topo.hosts[h].switch;
    match f {
        Fault::LossyLink { from, to, .. } => vec![sw(*from), sw(*to)],
        Fault::LossySwitch { switch, .. } => vec![*switch],
        Fault::SlowLink { port, .. } | Fault::BlackHole { port } => {
            let mut v = vec![sw(*port)];
            if let Peer::Switch(q) = ports.get(*port).peer {
                v.push(sw(q));
            }
            v
        }
        Fault::PfcStorm { host: h, .. } | Fault::SlowReceiver { host: h, .. } => vec![host(*h)],
        Fault::Incast {
            host: h, senders, ..
        } => {
            let mut v = vec![host(*h)];
            v.extend(senders.iter().map(|s| host(*s)));
            v
        }
        Fault::Reordering { leaf, .. } => vec![*leaf],
    }
}

/// The table row a finding counts in when it names no fault.
fn row_of(kind: Kind, target: &str) -> &'static str {
    match kind {
        Kind::LossyLink if target.contains('—') => "lossy link",
        Kind::LossyLink => "lossy switch",
        Kind::SlowLink => "slow link",
        Kind::BlackHole => "black hole",
        Kind::PfcStorm => "PFC storm",
        Kind::SlowReceiver => "slow receiver",
        Kind::Congestion => "incast",
        Kind::Reordering => "reordering",
    }
}

/// One row of the scored table.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub faults: u32,
    pub localised: u32,
    /// Findings that named a fault of this kind, and findings of this kind that named none.
    pub right: u32,
    pub wrong: u32,
    /// Time to localise (s) of each fault localised.
    pub t2l: Vec<f64>,
}

impl Row {
    pub fn precision(&self) -> f64 {
        f64::from(self.right) / f64::from((self.right + self.wrong).max(1))
    }
    pub fn recall(&self) -> f64 {
        f64::from(self.localised) / f64::from(self.faults.max(1))
    }
}

#[derive(Debug, Clone, Default)]
pub struct Score {
    pub rows: BTreeMap<&'static str, Row>,
    pub windows: u32,
    /// Windows with two or more faults in force.
    pub multi: u32,
    pub healthy: u32,
    /// Findings in healthy windows (each is also wrong in its row).
    pub healthy_findings: u32,
    /// Examples of wrong findings, for the report.
    pub wrong_examples: Vec<String>,
    /// Fault id → seconds to localise.
    localised: BTreeMap<u32, f64>,
    /// The rules' time per window (s).
    pub rules_s: Vec<f64>,
    pub sample_s: Vec<f64>,
}

impl Score {
    /// Judges the findings of the window `[from, to]` (emulated ms); `latency_s`: what the
    /// last sample and the rules took.
    /// Returns how many of the findings were wrong.
    pub fn window(
        &mut self,
        twin: &Twin,
        (from, to): (u64, u64),
        findings: &[Finding],
        latency_s: f64,
        deadline_ms: u64,
    ) -> usize {
        let mut wrong = 0;
        let lag = twin.cfg.poll_ms;
        let active: Vec<&crate::Injected> = twin
            .faults
            .iter()
            .filter(|f| f.start <= to && f.end.is_none_or(|e| e + lag >= from))
            .collect();
        self.windows += 1;
        if active.len() >= 2 {
            self.multi += 1;
        }
        if active.is_empty() {
            self.healthy += 1;
            self.healthy_findings += findings.len() as u32;
        }
        for f in findings {
            match active.iter().find(|a| a.truth.matches(f.kind, &f.target)) {
                Some(a) => {
                    self.rows.entry(name_of(&a.fault)).or_default().right += 1;
                    if !self.localised.contains_key(&a.id) && to <= a.start + deadline_ms {
                        let s = to.saturating_sub(a.start) as f64 / 1000.0 + latency_s;
                        self.localised.insert(a.id, s);
                    }
                }
                None => {
                    wrong += 1;
                    self.rows
                        .entry(row_of(f.kind, &f.target))
                        .or_default()
                        .wrong += 1;
                    if self.wrong_examples.len() < 40 {
                        let faults: Vec<String> = active
                            .iter()
                            .map(|a| format!("{} {}", a.truth.kind.as_str(), a.truth.target))
                            .collect();
                        self.wrong_examples.push(format!(
                            "window {:.1}–{:.1}s: {} {} ({:.2}) with faults [{}]: {}",
                            from as f64 / 1000.0,
                            to as f64 / 1000.0,
                            f.kind.as_str(),
                            f.target,
                            f.confidence,
                            faults.join(", "),
                            f.summary
                        ));
                    }
                }
            }
        }
        wrong
    }

    /// Counts every fault injected, localised or not.
    pub fn finish(&mut self, twin: &Twin) {
        for f in &twin.faults {
            let r = self.rows.entry(name_of(&f.fault)).or_default();
            r.faults += 1;
            if let Some(s) = self.localised.get(&f.id) {
                r.localised += 1;
                r.t2l.push(*s);
            }
        }
    }

    pub fn total(&self) -> Row {
        let mut t = Row::default();
        for r in self.rows.values() {
            t.faults += r.faults;
            t.localised += r.localised;
            t.right += r.right;
            t.wrong += r.wrong;
            t.t2l.extend(r.t2l.iter().copied());
        }
        t
    }

    /// The table, one row per kind and the total, as the README shows it.
    pub fn table(&self) -> String {
        let med = |v: &[f64]| -> String {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            match (v.get(v.len() / 2), v.last()) {
                (Some(m), Some(x)) => format!("{m:.1} s ({x:.1} s)"),
                _ => "–".into(),
            }
        };
        let mut s = String::from(
            "| fault | injected | localised ≤ 10 s | precision | recall | time to localise, median (max) |\n|---|---|---|---|---|---|\n",
        );
        let line = |name: &str, r: &Row| {
            format!(
                "| {name} | {} | {} | {:.3} ({}/{}) | {:.3} | {} |\n",
                r.faults,
                r.localised,
                r.precision(),
                r.right,
                r.right + r.wrong,
                r.recall(),
                med(&r.t2l)
            )
        };
        for k in KINDS {
            if let Some(r) = self.rows.get(k) {
                s.push_str(&line(k, r));
            }
        }
        s.push_str(&line("**all**", &self.total()));
        s.push_str(&format!(
            "| healthy windows under load | {} | | findings in them: {} | | |\n",
            self.healthy, self.healthy_findings
        ));
        s
    }
}

fn name_of(f: &Fault) -> &'static str {
    f.name()
}

/// How a campaign samples the twin: writes (or serves) what changed and reads every switch.
pub trait Sampler {
    /// One sample as of now; `changed`: the switches whose rows changed since the last call.
    fn sample(
        &mut self,
        twin: &Twin,
        changed: &[SwitchIdx],
    ) -> impl std::future::Future<Output = Result<Sample, TwinError>>;
}

#[derive(Debug, Clone)]
pub struct Campaign {
    pub trials: usize,
    pub seed: u64,
    /// Share of trials with two or three faults at once.
    pub multi: f64,
    /// Samples per judged window (3: a 2 s window at 1 s sampling).
    pub window: usize,
    pub interval_ms: u64,
    pub deadline_ms: u64,
    /// Switch restarts and plugin deaths per trial, on average.
    pub restarts: f64,
    /// Where to keep the windows with a wrong finding and the last window of a fault not
    /// localised (JSON, as `weft diagnose --record` writes them).
    pub record: Option<std::path::PathBuf>,
}

impl Default for Campaign {
    fn default() -> Self {
        Campaign {
            trials: 10,
            seed: 1,
            multi: 0.35,
            window: 3,
            interval_ms: 1000,
            deadline_ms: 10_000,
            restarts: 0.3,
            record: None,
        }
    }
}

/// A campaign under way.
struct Run<'a, S> {
    twin: &'a mut Twin,
    fabric: &'a Arc<Fabric>,
    c: &'a Campaign,
    th: &'a Thresholds,
    sampler: &'a mut S,
    samples: std::collections::VecDeque<(u64, Sample)>,
    score: Score,
    t: u64,
    last: Option<Window>,
    recorded: usize,
}

impl<S: Sampler> Run<'_, S> {
    /// Advances one interval, samples, judges the last window; the time now.
    async fn step(&mut self) -> Result<u64, TwinError> {
        self.t += self.c.interval_ms;
        let now = self.t;
        let changed = self.twin.advance(now);
        let t0 = std::time::Instant::now();
        let s = self.sampler.sample(self.twin, &changed).await?;
        let sample_s = t0.elapsed().as_secs_f64();
        self.samples.push_back((now, s));
        while self.samples.len() > self.c.window {
            self.samples.pop_front();
        }
        if self.samples.len() == self.c.window {
            let w = Window {
                fabric: self.fabric.clone(),
                samples: self.samples.iter().map(|(_, s)| s.clone()).collect(),
            };
            let r0 = std::time::Instant::now();
            let found = weft_diagnose::diagnose(&w, self.th);
            let rules_s = r0.elapsed().as_secs_f64();
            self.score.rules_s.push(rules_s);
            self.score.sample_s.push(sample_s);
            let from = self.samples.front().map_or(now, |x| x.0);
            let deadline = self.c.deadline_ms;
            let wrong =
                self.score
                    .window(self.twin, (from, now), &found, sample_s + rules_s, deadline);
            if wrong > 0 {
                self.record("wrong", &w);
            }
            self.last = Some(w);
        }
        Ok(now)
    }

    fn record(&mut self, what: &str, w: &Window) {
        let Some(dir) = &self.c.record else { return };
        self.recorded += 1;
        let _ = std::fs::create_dir_all(dir);
        let p = dir.join(format!("{what}-{:03}.json", self.recorded));
        if let Ok(text) = serde_json::to_string(w) {
            let _ = std::fs::write(p, text + "\n");
        }
    }

    /// The faults of one trial, apart from each other.
    fn faults(&mut self, trial: usize, rng: &mut Rng) -> (Vec<Fault>, BTreeSet<SwitchIdx>) {
        let n = if rng.unit() < self.c.multi {
            2 + rng.below(2) as usize
        } else {
            1
        };
        let mut avoid = BTreeSet::new();
        let mut out = Vec::new();
        for i in 0..n {
            let kind = KINDS[(trial + i * 4) % KINDS.len()];
            // A storm that spreads over the fabric is a trial of its own.
            if n > 1 && kind == "PFC storm, spreading" {
                continue;
            }
            if let Some(f) = draw(self.twin, rng, kind, &avoid) {
                avoid.extend(switches_of(self.twin, &f));
                out.push(f);
            }
        }
        (out, avoid)
    }

    async fn trial(&mut self, trial: usize, rng: &mut Rng) -> Result<(), TwinError> {
        let (faults, avoid) = self.faults(trial, rng);
        life_events(self.twin, rng, self.c, self.t, &avoid);
        // Healthy under load first.
        for _ in 0..self.c.window {
            self.step().await?;
        }
        let at = self.t + rng.below(self.c.interval_ms);
        let ids: Vec<u32> = faults
            .into_iter()
            .map(|f| self.twin.inject(f, at))
            .collect();
        loop {
            let now = self.step().await?;
            let named = ids.iter().all(|id| self.score.localised.contains_key(id));
            if named || now > at + self.c.deadline_ms {
                if !named && let Some(w) = self.last.take() {
                    self.record("missed", &w);
                }
                for id in &ids {
                    self.twin.clear(*id, now);
                }
                break;
            }
        }
        // Two windows after the faults cleared.
        for _ in 0..2 {
            self.step().await?;
        }
        self.twin.prune(self.t.saturating_sub(20_000));
        Ok(())
    }
}

/// Runs `c` on `twin`, sampling with `sampler` and judging with the rules at `th`.
pub async fn run(
    twin: &mut Twin,
    fabric: &Arc<Fabric>,
    c: &Campaign,
    th: &Thresholds,
    sampler: &mut impl Sampler,
) -> Result<Score, TwinError> {
    let mut rng = Rng::new(c.seed);
    let t = twin.now();
    let mut r = Run {
        twin,
        fabric,
        c,
        th,
        sampler,
        samples: Default::default(),
        score: Score::default(),
        t,
        last: None,
        recorded: 0,
    };
    for trial in 0..c.trials {
        r.trial(trial, &mut rng).await?;
    }
    let mut score = r.score;
    score.finish(r.twin);
    Ok(score)
}

/// Now and then a switch restarts (counters from zero, 2 s without polls) or its plugin dies
/// for good, away from the trial's faults.
fn life_events(twin: &mut Twin, rng: &mut Rng, c: &Campaign, t: u64, avoid: &BTreeSet<SwitchIdx>) {
    if rng.unit() >= c.restarts {
        return;
    }
    let n = twin.topo.switches.len() as u64;
    let s = rng.below(n) as usize;
    if avoid.contains(&s) || twin.life[s].missing || twin.life[s].dead_from.is_some() {
        return;
    }
    let at = t + rng.below(4 * c.interval_ms);
    if rng.below(4) == 0 {
        twin.life[s].dead_from = Some(at);
    } else {
        twin.life[s].resets.push((at, 2000));
    }
}
