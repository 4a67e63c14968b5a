//! `weft testbed workload`'s runs: the rate one flow sustains alone, then every collective
//! under every routing mode (the intent's lossless class rewritten and applied with the `weft`
//! binary, as an operator would), first with every link up, then with the `--down` links out of
//! service; each run beside the ideal and the model ([`crate::workload_report`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use weft_compiler::down::{DownError, link_state, links_down};
use weft_simulate::compiled::{ClassError, class_of};
use weft_topology::{RoutingMode, Topology};
use weft_traffic::collective::Kind;

use crate::workload::{Nic, Spec};
use crate::workload_report::{Case, Report, ideal, model_ratio};
use crate::{Programs, State, TestbedError, workload};

/// What to run (the options of `weft testbed workload`, parsed).
#[derive(Debug, Clone)]
pub struct Options {
    pub collectives: Vec<Kind>,
    /// Hosts taking part, in rank order (None: every host).
    pub ranks: Option<Vec<String>>,
    pub size: u64,
    pub warmup: u32,
    pub iterations: u32,
    pub qps: u32,
    pub mtu: usize,
    pub rate_pps: f64,
    /// Limit every switch queue to this many packets/s first (0: leave the switches as they are).
    pub port_rate: u64,
    pub nic: Nic,
    /// Routing modes to compare (None: run as applied).
    pub modes: Option<Vec<RoutingMode>>,
    /// Links also run out of service (SWITCH:PORT).
    pub down: Vec<String>,
    /// The flowlet gap for `flowlet`, as given (it goes into the rewritten intent).
    pub flowlet_gap: String,
    pub gap: Duration,
    pub timeout: Duration,
}

/// Why the runs could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    #[error(transparent)]
    Testbed(#[from] TestbedError),
    #[error(transparent)]
    Class(#[from] ClassError),
    #[error(transparent)]
    Down(#[from] DownError),
    #[error("--ranks: a collective needs at least 2 hosts")]
    TooFewRanks,
    #[error("--ranks: no host {0} in the testbed")]
    NoHost(String),
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("weft apply {file} failed:\n{stdout}{stderr}")]
    Apply {
        file: String,
        stdout: String,
        stderr: String,
    },
    #[error("{0}")]
    Intent(&'static str),
    #[error("{what}")]
    Yaml {
        what: &'static str,
        #[source]
        source: serde_yaml_ng::Error,
    },
}

/// The intent text with `class` routed by `mode` (and its flowlet gap), everything else kept.
pub fn rewrite_routing(
    text: &str,
    class: &str,
    mode: RoutingMode,
    gap: &str,
) -> Result<String, CampaignError> {
    let yaml = |what| move |source| CampaignError::Yaml { what, source };
    let mut v: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).map_err(yaml("parsing the intent"))?;
    let root = v
        .as_mapping_mut()
        .ok_or(CampaignError::Intent("the intent is not a mapping"))?;
    let routing = root
        .entry("routing".into())
        .or_insert_with(|| serde_yaml_ng::Value::Mapping(Default::default()));
    let routing = routing
        .as_mapping_mut()
        .ok_or(CampaignError::Intent("routing: not a mapping"))?;
    let classes = routing
        .entry("classes".into())
        .or_insert_with(|| serde_yaml_ng::Value::Mapping(Default::default()));
    let classes = classes
        .as_mapping_mut()
        .ok_or(CampaignError::Intent("routing.classes: not a mapping"))?;
    let mut policy = serde_yaml_ng::Mapping::new();
    policy.insert("mode".into(), mode.as_str().into());
    if mode == RoutingMode::Flowlet {
        policy.insert("flowlet_gap".into(), gap.into());
    }
    classes.insert(class.into(), serde_yaml_ng::Value::Mapping(policy));
    serde_yaml_ng::to_string(&v).map_err(yaml("writing the intent"))
}

/// `weft apply FILE [--down ...]` with the `weft` binary at `weft`.
fn apply(
    weft: &Path,
    file: &Path,
    down: &[String],
    timeout: Duration,
) -> Result<(), CampaignError> {
    let mut c = std::process::Command::new(weft);
    c.arg("apply").arg(file);
    if !down.is_empty() {
        c.arg("--down").arg(down.join(","));
    }
    c.args(["--timeout", &format!("{}s", timeout.as_secs().max(1))]);
    let out = c.output().map_err(|source| CampaignError::Io {
        what: "running weft apply".into(),
        source,
    })?;
    if !out.status.success() {
        return Err(CampaignError::Apply {
            file: file.display().to_string(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(())
}

/// A testbed to run on: its intent (and the intent's text, rewritten per mode), its state, and
/// the programs the runs use.
pub struct Bench<'a> {
    pub t: &'a Topology,
    pub text: &'a str,
    pub st: &'a State,
    /// Where the rewritten intents are written (the testbed's state directory).
    pub dir: &'a Path,
    /// `weft-traffic`, run in every host namespace.
    pub traffic: &'a Path,
    /// `weft`, whose `apply` applies each mode.
    pub weft: &'a Path,
}

impl Bench<'_> {
    /// Rewrites the intent for mode `m` and applies it with `down` links down.
    fn apply_mode(
        &self,
        o: &Options,
        class: &str,
        m: RoutingMode,
        down: &[String],
    ) -> Result<PathBuf, CampaignError> {
        let v = rewrite_routing(self.text, class, m, &o.flowlet_gap)?;
        let p = self
            .dir
            .join(format!("workload-intent-{}.yaml", m.as_str()));
        std::fs::write(&p, v).map_err(|source| CampaignError::Io {
            what: format!("writing {}", p.display()),
            source,
        })?;
        apply(self.weft, &p, down, o.timeout)?;
        Ok(p)
    }

    /// The ranks, checked against the testbed, and the spec every run starts from.
    fn spec(&self, o: &Options) -> Result<Spec, CampaignError> {
        let ranks = o
            .ranks
            .clone()
            .unwrap_or_else(|| self.t.hosts.iter().map(|h| h.name.clone()).collect());
        if ranks.len() < 2 {
            return Err(CampaignError::TooFewRanks);
        }
        if let Some(r) = ranks.iter().find(|r| self.st.host(r).is_none()) {
            return Err(CampaignError::NoHost(r.clone()));
        }
        let mut spec = Spec::new(self.t, Kind::AllToAll, ranks, o.size);
        spec.warmup = o.warmup;
        spec.iterations = o.iterations;
        spec.lanes = o.qps;
        spec.mtu = o.mtu;
        spec.rate_pps = o.rate_pps;
        spec.nic = o.nic;
        spec.deadline = o.timeout;
        Ok(spec)
    }

    /// The rate one flow sustains alone, from the first rank to a rank on another leaf: about
    /// 1.5 s of one flow, three times, the best kept (other processes on the machine can only
    /// make a run slower, never faster).
    fn one_flow(&self, o: &Options, spec: &Spec) -> Result<(f64, String, String), CampaignError> {
        let t = self.t;
        let leaf = |n: &str| t.host_index(n).map(|i| t.hosts[i].switch);
        let ranks = &spec.ranks;
        let src = ranks[0].clone();
        let dst = ranks
            .iter()
            .find(|r| leaf(r) != leaf(&src))
            .unwrap_or(&ranks[1])
            .clone();
        let packets = (o.rate_pps * 1.5).clamp(64.0, 3000.0) as u64;
        let mut rate: f64 = 0.0;
        for _ in 0..3 {
            let r = workload::measure_rate(self.st, t, self.traffic, spec, &src, &dst, packets)?;
            tracing::info!(%src, %dst, rate_bytes_per_s = r, "one flow alone");
            rate = rate.max(r);
        }
        Ok((rate, src, dst))
    }

    /// Every collective under every mode with `down` links out of service.
    fn cases(
        &self,
        o: &Options,
        class: &str,
        spec: &Spec,
        rate: f64,
        down: &[String],
    ) -> Result<Vec<Case>, CampaignError> {
        let t = self.t;
        let links = link_state(t, &links_down(t, down)?);
        let down_mask: Vec<bool> = (0..t.links.len()).map(|l| links.is_down(l)).collect();
        let names: Vec<String> = links
            .down_links()
            .map(|l| {
                format!(
                    "{} ↔ {}",
                    t.end_name(t.links[l].a),
                    t.end_name(t.links[l].b)
                )
            })
            .collect();
        let list: Vec<Option<RoutingMode>> = match &o.modes {
            Some(ms) => ms.iter().copied().map(Some).collect(),
            None => vec![None],
        };
        let mut cases = Vec::new();
        for m in list {
            if let Some(m) = m {
                self.apply_mode(o, class, m, down)?;
            }
            for &k in &o.collectives {
                let mut s = spec.clone();
                s.kind = k;
                let r = workload::run_workload(self.st, t, self.traffic, &s)?;
                let ideal_s = ideal(t, &down_mask, &s, rate);
                let mr = m.map(|m| model_ratio(t, &links, class, m, &s, o.gap));
                tracing::info!(collective = %k, mode = ?m, seconds = r.seconds, ideal_s, "case done");
                cases.push(Case {
                    collective: k,
                    mode: m.map(|m| m.as_str().to_string()),
                    links_down: names.clone(),
                    ratio: r.seconds / ideal_s,
                    ideal_s,
                    model_ratio: mr,
                    run: r,
                });
            }
        }
        Ok(cases)
    }

    /// Runs everything `o` asks for and reports it (without baseline regressions).
    pub fn run(&self, o: &Options) -> Result<Report, CampaignError> {
        let class = class_of(self.t, None)?;
        let spec = self.spec(o)?;
        if o.port_rate > 0 {
            let bmv2 = Programs::locate()?.bmv2;
            let cli = bmv2.with_file_name("simple_switch_CLI");
            workload::set_port_rates(self.st, &cli, o.port_rate)?;
        }
        if let Some(m) = o.modes.as_ref().and_then(|m| m.first()) {
            self.apply_mode(o, &class, *m, &[])?;
        }
        let (rate, src, dst) = self.one_flow(o, &spec)?;
        let mut states: Vec<Vec<String>> = vec![Vec::new()];
        if !o.down.is_empty() {
            states.push(o.down.clone());
        }
        let mut cases = Vec::new();
        for down in &states {
            cases.extend(self.cases(o, &class, &spec, rate, down)?);
        }
        if !o.down.is_empty()
            && let Some(m) = o.modes.as_ref().and_then(|m| m.last())
        {
            // Leave the fabric as the last mode with every link up.
            self.apply_mode(o, &class, *m, &[])?;
        }
        Ok(Report {
            fabric: self.t.name.clone(),
            ranks: spec.ranks.clone(),
            size: o.size,
            warmup: o.warmup,
            iterations: o.iterations,
            rate_pps: o.rate_pps,
            port_rate: o.port_rate,
            mtu: o.mtu,
            qps: o.qps,
            flowlet_gap: o.flowlet_gap.clone(),
            nic: o.nic,
            measured_bytes_per_s: rate,
            measured_between: (src, dst),
            cases,
            regressions: Vec::new(),
            hash_seeds: true,
        })
    }
}
