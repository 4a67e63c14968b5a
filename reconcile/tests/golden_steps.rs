//! Golden steps of the reconciler's core, as holo tests its protocols: each case under
//! `tests/steps/NN-name/` is a list of timed inputs (`input.jsonl`) run against a simulated
//! fabric of SONiC DBs, and the core's every output (`output.jsonl`) must match. A case is one
//! line below; `WEFT_REGEN=1 cargo test -p weft-reconcile --test golden_steps` rewrites the
//! outputs (review the diff).
//!
//! Input lines (`t` in milliseconds, non-decreasing):
//!   {"t":0,"start":true}                                  the core starts (reads every switch)
//!   {"t":0,"prefill":true}                                every switch already holds its desired state
//!   {"t":5,"port":"leaf1:Ethernet4","up":false}           STATE_DB PORT_TABLE says so
//!   {"t":5,"unreachable":"leaf2"} / {"t":9,"reachable":"leaf2"}     the switch's Redis goes/comes
//!   {"t":5,"plugin":"leaf2","state":"reconnecting"}       the plugin's status row ("gone": no row)
//!   {"t":5,"fenced":"leaf2","held":7}                     the switch holds a newer leader's term
//!   {"t":5,"refuse":"leaf1","prefix":"FIXED_IPV4_TABLE"}  the plugin refuses such sets ("" stops)
//!   {"t":5,"stray":"leaf1","key":"FIXED_X:{...}"}         an entry nobody wants, in APPL_STATE_DB
//!   {"t":0,"override":"leaf1","key":"...","fields":[["action","x"]]}  an entry installed as given
//!   {"t":5,"drift_delete":"leaf1","prefix":"FIXED_NEXTHOP_TABLE"}   entries lost behind our back
//!   {"t":5,"drift_config":"leaf1","key":"PORT|Ethernet0","field":"mtu","value":"1500"}
//!   {"t":60000,"until":true}                              run timers up to t, then stop
//! The simulated fabric answers every request 1 ms later.

use std::collections::{BTreeMap, BinaryHeap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use weft_compiler::{Compiler, LinkState, p4map};
use weft_reconcile::core::{
    Answer, AnswerStatus, Batch, Core, CoreConfig, Input, Output, SwitchError, SwitchState,
};
use weft_reconcile::damping::Nanos;
use weft_reconcile::plan::{Installed, Source, desired_switch};
use weft_sonic_db::{FieldValues, StatusCode};
use weft_sonic_schema::state::{PluginState, PluginStatus};
use weft_topology::{End, Topology};

const MS: Nanos = 1_000_000;

#[derive(Default, Clone)]
struct FakeSwitch {
    unreachable: bool,
    /// None: no status row (no live plugin).
    plugin: Option<PluginState>,
    entries: BTreeMap<String, FieldValues>,
    config: BTreeMap<String, FieldValues>,
    refuse: Option<String>,
    /// A newer leader's term the switch holds: every write is refused.
    fenced: Option<u64>,
}

struct Harness<'t> {
    t: &'t Topology,
    core: Core<'t>,
    fabric: Vec<FakeSwitch>,
    queue: BinaryHeap<std::cmp::Reverse<(Nanos, u64, usize)>>,
    pending: Vec<Option<Input>>,
    seq: u64,
    now: Nanos,
    out: Vec<String>,
}

fn refused() -> SwitchError {
    SwitchError::Unreachable {
        detail: "connection refused".into(),
    }
}

fn status(state: PluginState) -> PluginStatus {
    PluginStatus::fresh(state, "fake")
}

impl<'t> Harness<'t> {
    fn new(t: &'t Topology) -> Self {
        let info = Arc::new(p4map::pipeline_p4info().expect("P4Info"));
        let mut core = Core::new(t, info, CoreConfig::run(30_000 * MS));
        core.measure = false;
        Harness {
            t,
            core,
            fabric: t
                .switches
                .iter()
                .map(|_| FakeSwitch {
                    plugin: Some(PluginState::Running),
                    ..Default::default()
                })
                .collect(),
            queue: BinaryHeap::new(),
            pending: Vec::new(),
            seq: 0,
            now: 0,
            out: Vec::new(),
        }
    }

    fn sw(&self, name: &str) -> usize {
        self.t
            .switch_index(name)
            .unwrap_or_else(|| panic!("no switch {name}"))
    }

    fn schedule(&mut self, at: Nanos, input: Input) {
        self.seq += 1;
        self.pending.push(Some(input));
        self.queue
            .push(std::cmp::Reverse((at, self.seq, self.pending.len() - 1)));
    }

    fn record(&mut self, outs: Vec<Output>) {
        let t_ms = self.now / MS;
        for o in outs {
            let line = match &o {
                Output::Read { switch, .. } => {
                    json!({"t": t_ms, "read": self.t.switches[*switch].name})
                }
                Output::Write { switch, batch, .. } => {
                    let name = &self.t.switches[*switch].name;
                    match &**batch {
                        Batch::Config { set, del } => json!({
                            "t": t_ms, "write": name, "config_set": set.len(), "config_del": del,
                        }),
                        Batch::Entries {
                            stage,
                            last,
                            delete,
                            ops,
                            replace,
                        } => {
                            let keys: Vec<&String> = ops.iter().map(|(k, _)| k).collect();
                            let stages = if stage == last {
                                format!("{stage:?}")
                            } else {
                                format!("{stage:?}..{last:?}")
                            };
                            let mut v = json!({"t": t_ms, "write": name, "stage": stages});
                            v[if *delete { "delete" } else { "set" }] = json!(keys);
                            if !replace.is_empty() {
                                v["replace"] = json!(replace);
                            }
                            v
                        }
                    }
                }
                Output::Switch { switch, state } => {
                    let mut v = serde_json::to_value(state).expect("state");
                    v["t"] = json!(t_ms);
                    v["switch"] = json!(self.t.switches[*switch].name);
                    v
                }
                Output::Reconverged(r) => json!({
                    "t": t_ms, "reconverged": r.changes, "switches": r.switches_changed,
                    "entries": r.entries_written, "failed": r.failed, "ms": r.total_ms,
                }),
            };
            self.out.push(line.to_string());
            self.answer(&o);
        }
    }

    /// The simulated fabric's reply to a request, 1 ms later.
    fn answer(&mut self, o: &Output) {
        let at = self.now + MS;
        match o {
            Output::Read { switch, ticket, .. } => {
                let f = &self.fabric[*switch];
                let result = if f.unreachable {
                    Err(refused())
                } else {
                    Ok(Box::new(Installed {
                        entries: f.entries.clone(),
                        config: f.config.clone(),
                        source: Source::ApplStateDb,
                        plugin: f.plugin.map(status),
                    }))
                };
                self.schedule(
                    at,
                    Input::ReadBack {
                        switch: *switch,
                        ticket: *ticket,
                        result,
                    },
                );
            }
            Output::Write {
                switch,
                ticket,
                batch,
            } => {
                let f = &mut self.fabric[*switch];
                let result = if f.unreachable {
                    Err(refused())
                } else if let Some(held) = f.fenced {
                    Err(SwitchError::Fenced { term: 1, held })
                } else {
                    let mut answers = Vec::new();
                    match &**batch {
                        Batch::Config { set, del } => {
                            for c in set {
                                let k = c.redis_key();
                                let mut fv = c.fields();
                                fv.sort();
                                f.config.insert(k.clone(), fv);
                                answers.push(Answer::ok(k));
                            }
                            for k in del {
                                f.config.remove(k);
                                answers.push(Answer::ok(k.clone()));
                            }
                        }
                        Batch::Entries { delete, ops, .. } => {
                            for (k, fields) in ops {
                                let refused = !delete
                                    && f.refuse.as_ref().is_some_and(|p| k.starts_with(p.as_str()));
                                if refused {
                                    answers.push(Answer {
                                        key: k.clone(),
                                        status: AnswerStatus::Code(StatusCode::InvalidParam),
                                        message: "refused by the test".into(),
                                    });
                                    continue;
                                }
                                if *delete {
                                    f.entries.remove(k);
                                } else {
                                    f.entries.insert(k.clone(), fields.clone());
                                }
                                answers.push(Answer::ok(k.clone()));
                            }
                        }
                    }
                    Ok(answers)
                };
                self.schedule(
                    at,
                    Input::Written {
                        switch: *switch,
                        ticket: *ticket,
                        result,
                    },
                );
            }
            _ => {}
        }
    }

    /// Runs queued inputs and timers up to `until`.
    fn run_until(&mut self, until: Nanos) {
        loop {
            let next_q = self.queue.peek().map(|r| r.0.0);
            let next_w = self.core.next_wake();
            let next = match (next_q, next_w) {
                (Some(q), Some(w)) => q.min(w),
                (Some(q), None) => q,
                (None, Some(w)) => w,
                (None, None) => break,
            };
            if next > until {
                break;
            }
            self.now = self.now.max(next);
            if next_q == Some(next) {
                let Some(std::cmp::Reverse((_, _, i))) = self.queue.pop() else {
                    break;
                };
                let Some(input) = self.pending[i].take() else {
                    continue;
                };
                let outs = self.core.step(self.now, input);
                self.record(outs);
            } else {
                let outs = self.core.step(self.now, Input::Tick);
                self.record(outs);
            }
        }
        self.now = self.now.max(until);
    }

    fn prefill(&mut self) {
        let info = p4map::pipeline_p4info().expect("P4Info");
        let c = Compiler::new(self.t, LinkState::all_up(self.t));
        for (si, sw) in c.switches().iter().enumerate() {
            let d = desired_switch(self.t, &info, sw, si).expect("desired");
            let f = &mut self.fabric[si];
            f.entries = d
                .entries
                .iter()
                .map(|(k, e)| (k.clone(), e.fields.clone()))
                .collect();
            f.config = d
                .config
                .iter()
                .map(|r| {
                    let mut fv = r.to_fields();
                    fv.sort();
                    (r.redis_key(), fv)
                })
                .collect();
        }
    }

    fn apply(&mut self, line: &Value) {
        let s = |k: &str| line[k].as_str().unwrap_or_default().to_string();
        if line.get("start").is_some() {
            let outs = self.core.step(self.now, Input::Start);
            self.record(outs);
        } else if line.get("prefill").is_some() {
            self.prefill();
        } else if let Some(p) = line["port"].as_str() {
            let (sw, port) = p.split_once(':').expect("SWITCH:PORT");
            let si = self.sw(sw);
            let outs = self.core.step(
                self.now,
                Input::Port {
                    port: End {
                        switch: si,
                        port: self.t.switches[si]
                            .port_index(port)
                            .unwrap_or_else(|| panic!("no port {p}")),
                    },
                    up: line["up"].as_bool().unwrap_or(true),
                    seen: self.now,
                },
            );
            self.record(outs);
        } else if line.get("unreachable").is_some() {
            let i = self.sw(&s("unreachable"));
            self.fabric[i].unreachable = true;
        } else if line.get("reachable").is_some() {
            let i = self.sw(&s("reachable"));
            self.fabric[i].unreachable = false;
        } else if line.get("plugin").is_some() {
            let i = self.sw(&s("plugin"));
            self.fabric[i].plugin = match s("state").as_str() {
                "gone" => None,
                "running" => Some(PluginState::Running),
                "reconnecting" => Some(PluginState::Reconnecting),
                other => panic!("plugin state {other}"),
            };
        } else if line.get("fenced").is_some() {
            let i = self.sw(&s("fenced"));
            self.fabric[i].fenced = line["held"].as_u64();
        } else if line.get("refuse").is_some() {
            let i = self.sw(&s("refuse"));
            let p = s("prefix");
            self.fabric[i].refuse = (!p.is_empty()).then_some(p);
        } else if line.get("stray").is_some() {
            let i = self.sw(&s("stray"));
            self.fabric[i]
                .entries
                .insert(s("key"), vec![("action".into(), "drop_route".into())]);
        } else if line.get("override").is_some() {
            let i = self.sw(&s("override"));
            let fields: FieldValues =
                serde_json::from_value(line["fields"].clone()).expect("fields: [[f, v], ...]");
            self.fabric[i].entries.insert(s("key"), fields);
        } else if line.get("drift_delete").is_some() {
            let i = self.sw(&s("drift_delete"));
            let p = s("prefix");
            self.fabric[i].entries.retain(|k, _| !k.starts_with(&p));
        } else if line.get("drift_config").is_some() {
            let i = self.sw(&s("drift_config"));
            let row = self.fabric[i].config.entry(s("key")).or_default();
            row.retain(|(f, _)| *f != s("field"));
            row.push((s("field"), s("value")));
            row.sort();
        } else if line.get("until").is_some() {
        } else {
            panic!("unknown input line {line}");
        }
    }
}

fn case(name: &str) {
    let dir: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/steps");
    let topo_path = if dir.join(name).join("fabric.yaml").exists() {
        dir.join(name).join("fabric.yaml")
    } else {
        dir.join("fabric.yaml")
    };
    let t = weft_topology::load_file(&topo_path).expect("the steps' fabric is valid");
    let input = std::fs::read_to_string(dir.join(name).join("input.jsonl")).expect("input.jsonl");
    let mut h = Harness::new(&t);
    for (n, line) in input.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{name}/input.jsonl:{}: {e}", n + 1));
        let at = v["t"].as_u64().unwrap_or(0) * MS;
        h.run_until(at);
        h.apply(&v);
    }
    let got = h.out.join("\n") + "\n";
    let path = dir.join(name).join("output.jsonl");
    if std::env::var_os("WEFT_REGEN").is_some() {
        std::fs::write(&path, &got).expect("write output.jsonl");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if want != got {
        let first = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| want.lines().count().min(got.lines().count()));
        panic!(
            "{name}: output differs at line {} (WEFT_REGEN=1 rewrites it; review the diff):\n  want: {}\n  got:  {}",
            first + 1,
            want.lines().nth(first).unwrap_or("<end>"),
            got.lines().nth(first).unwrap_or("<end>")
        );
    }
    let _ = SwitchState::Converged;
}

#[test]
fn s01_a_fresh_fabric_is_written_config_first_then_stage_by_stage() {
    case("01-start-converges");
}
#[test]
fn s02_a_restart_with_everything_installed_writes_nothing() {
    case("02-restart-all-installed");
}
#[test]
fn s03_link_down_moves_traffic_and_link_up_waits_for_hold_down() {
    case("03-link-down-up-hold-down");
}
#[test]
fn s04_a_flap_storm_is_suppressed_and_costs_bounded_writes() {
    case("04-flap-storm-suppression");
}
#[test]
fn s05_a_refused_stage_stops_later_stages_and_every_delete() {
    case("05-stage-refused-mid-apply");
}
#[test]
fn s06_an_unreachable_switch_is_retried_with_backoff_until_it_answers() {
    case("06-unreachable-then-reachable");
}
#[test]
fn s07_resync_repairs_p4rt_and_config_db_drift() {
    case("07-drift-repaired-by-resync");
}
#[test]
fn s08_a_plugin_not_in_sync_is_not_trusted_until_it_runs() {
    case("08-plugin-not-ready");
}
#[test]
fn s09_an_action_with_fewer_fields_is_written_as_a_replace() {
    case("09-replace-shrinking-entry");
}
#[test]
fn s10_a_switch_that_holds_a_newer_term_is_not_retried() {
    case("10-fenced-write-not-retried");
}
