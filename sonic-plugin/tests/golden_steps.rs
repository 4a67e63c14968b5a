//! Golden steps of the plugin's core, as the reconciler's are tested (and holo tests its
//! protocols): each case under `tests/steps/NN-name/` is a list of timed inputs (`input.jsonl`)
//! run against a simulated switch (P4Runtime's insert/modify/delete rules) and simulated SONiC
//! DBs, and every output of the core and of the port thread's core (`output.jsonl`) must match.
//! A case is one line below; `WEFT_REGEN=1 cargo test -p weft-sonic-plugin --test golden_steps`
//! rewrites the outputs (review the diff).
//!
//! Input lines (`t` in milliseconds, non-decreasing):
//!   {"t":0,"config":{"PORT|Ethernet0":{"id":"1"},"PORT|Ethernet8":null}}   CONFIG_DB rows written
//!       (null: deleted), the keyspace notification delivered at once, or `"notify_after":ms`
//!       later, or never with `"notify":false`
//!   {"t":0,"start":true}                         a session: primary, Redis up, pipeline checked
//!   {"t":5,"batch":[["SET","KEY",{"f":"v"}],["DEL","KEY"]]}   the controller writes APPL_DB;
//!       the consumer pops it as one batch (`"term":N`: a batch that carries its writer's term,
//!       as over ZMQ; then APPL_DB is not written by the producer)
//!   {"t":5,"link":"veth0","up":false}            a netlink link event (Ethernet0=veth0,
//!       Ethernet4=veth4, Ethernet8=veth8)
//!   {"t":5,"switch":"lost"} / {"t":9,"switch":"back"}   every Write and Read fails UNAVAILABLE
//!   {"t":5,"refuse":"ipv4_table"}                the switch refuses inserts into that table
//!       ("" stops)
//!   {"t":5,"drift_delete":"ipv4_table"}          the table's entries vanish behind our back
//!   {"t":5,"term":7}                             APPL_DB's WEFT_LEADER_TERM (a writer's claim)
//!   {"t":5,"timer":"status"}                     a periodic timer (status, watchdog, tuning)
//!   {"t":5,"restart":"plugin"}                   the plugin restarts (its memory is gone)
//!   {"t":5,"redis":"restart"}                    Redis restarts empty (the session ends)
//!   {"t":0,"pfc_emulation":{"*":1000}}           the plugin pauses queues itself (BMv2 over
//!       Thrift) with these line rates (packets/s, port or *): a new core, before "start"
//!   {"t":5,"pfc":"Ethernet0","enable":8,"quanta":[0,0,0,65535,0,0,0,0]}   a PFC frame
//!       received on the port (its packet-in)
//!   {"t":60000,"until":true}                     run the simulation up to t, then stop
//! The simulated switch answers each Write 1 ms later; reads and Redis are answered at once
//! (the daemon awaits them).

use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_p4rt::P4Info;
use weft_p4rt::proto::p4::v1::{Update, update};
use weft_sonic_db::{FieldValues, KeyOpFieldValues, Op};
use weft_sonic_plugin::clock::Now;
use weft_sonic_plugin::config::QueueModel;
use weft_sonic_plugin::core::{Core, CoreConfig, Ended, Input, Output, Rows, Timer};
use weft_sonic_plugin::features::Publish;
use weft_sonic_plugin::objects::ObjKey;
use weft_sonic_plugin::pause::{PauseConfig, PfcFrame, QueueCmd};
use weft_sonic_plugin::pipeline::{owned_tables, weft_p4info};
use weft_sonic_plugin::ports::{LinkEvent, PortCore, PortInput, PortOutput};
use weft_sonic_plugin::sim::SimSwitch;
use weft_sonic_plugin::translate::Translator;

const WALL0: u64 = 1_700_000_000_000;

fn interfaces() -> BTreeMap<String, String> {
    [
        ("Ethernet0", "veth0"),
        ("Ethernet4", "veth4"),
        ("Ethernet8", "veth8"),
    ]
    .into_iter()
    .map(|(p, i)| (p.to_string(), i.to_string()))
    .collect()
}

/// SONiC's DBs as the plugin sees them.
#[derive(Default)]
struct Dbs {
    live: Rows,
    appl_state: Rows,
    /// (table, key) → fields.
    config: BTreeMap<(String, String), FieldValues>,
    state_db: BTreeMap<(String, String), FieldValues>,
    term: Option<u64>,
}

enum Event {
    Line(Value),
    Input(Input),
    Notify,
}

struct Harness {
    info: P4Info,
    core: Core,
    ports: PortCore,
    switch: SimSwitch,
    pipeline: bool,
    dbs: Dbs,
    /// Batches popped by the consumer, waiting for the core to take them.
    consumer: VecDeque<(Vec<KeyOpFieldValues>, Option<u64>)>,
    queue: BinaryHeap<std::cmp::Reverse<(u64, u64)>>,
    events: BTreeMap<u64, Event>,
    seq: u64,
    base: Instant,
    now: u64,
    /// The session's keyspace watcher is subscribed (from its read of P4RT_TABLE on): a
    /// CONFIG_DB change is notified only then.
    watching: bool,
    ticked: Option<u64>,
    /// Redis' run id: a restarted Redis has another.
    run_id: u32,
    out: Vec<String>,
    /// The PFC pausing the core is built with.
    pfc: Option<PauseConfig>,
}

fn new_core(info: &P4Info, base: Instant, pfc: Option<PauseConfig>) -> Core {
    let cfg = CoreConfig {
        // As the daemon builds it: the pausing plugin keeps headroom above xoff.
        queue: pfc
            .as_ref()
            .map_or(QueueModel::default(), |p| p.model(QueueModel::default())),
        tuning_line_rate: BTreeMap::new(),
        device_id: 1,
        batch_size: 4096,
        pfc,
    };
    let tr = Translator::new(info.clone(), owned_tables(), false);
    Core::new(
        cfg,
        tr,
        Now {
            at: base,
            wall_ms: WALL0,
        },
    )
}

fn new_ports() -> PortCore {
    let ifs = interfaces();
    let up = ifs.keys().map(|p| (p.clone(), true)).collect();
    PortCore::new(&ifs, up)
}

impl Harness {
    fn new() -> Self {
        let info = weft_p4info().expect("P4Info");
        let base = Instant::now();
        Harness {
            core: new_core(&info, base, None),
            pfc: None,
            info,
            ports: new_ports(),
            switch: SimSwitch::default(),
            pipeline: false,
            dbs: Dbs::default(),
            consumer: VecDeque::new(),
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            seq: 0,
            base,
            now: 0,
            watching: false,
            ticked: None,
            run_id: 1,
            out: Vec::new(),
        }
    }

    fn clock(&self) -> Now {
        Now {
            at: self.base + Duration::from_millis(self.now),
            wall_ms: WALL0 + self.now,
        }
    }

    fn schedule(&mut self, at: u64, e: Event) {
        self.seq += 1;
        self.events.insert(self.seq, e);
        self.queue.push(std::cmp::Reverse((at, self.seq)));
    }

    fn record(&mut self, mut v: Value) {
        v["t"] = json!(self.now);
        self.out.push(v.to_string());
    }

    /// Steps the core and carries out what it asks, as the daemon does: reads answered at
    /// once, Writes 1 ms later.
    fn feed(&mut self, input: Input) {
        let mut todo: VecDeque<Output> = self.core.step(self.clock(), input).into();
        while let Some(o) = todo.pop_front() {
            if let Some(next) = self.carry_out(o) {
                todo.extend(self.core.step(self.clock(), next));
            }
        }
    }

    fn carry_out(&mut self, o: Output) -> Option<Input> {
        match o {
            Output::Write { ticket, updates } => {
                self.record(json!({"write": render::updates(&self.info, &updates)}));
                let result = self.switch.write(&updates);
                self.schedule(
                    self.now + 1,
                    Event::Input(Input::Written { ticket, result }),
                );
            }
            Output::Read { ticket, reads } => {
                self.record(json!({"read": "switch"}));
                let mut result = Ok(Vec::new());
                for r in &reads {
                    result = result.and_then(|mut v: Vec<_>| {
                        v.extend(self.switch.read(r)?);
                        Ok(v)
                    });
                }
                return Some(Input::Read { ticket, result });
            }
            Output::ReadSession => {
                self.watching = true;
                self.record(json!({"read": "session"}));
                return Some(Input::SessionRead {
                    live: self.dbs.live.clone(),
                    state: self.dbs.appl_state.clone(),
                    term: self.dbs.term,
                });
            }
            Output::ReadConfig { tuning_state } => {
                self.record(json!({"read": "config"}));
                let _ = tuning_state;
                return Some(Input::ConfigRead {
                    rows: self.config_rows(),
                    tuning: None,
                });
            }
            Output::ReadApplState => {
                self.record(json!({"read": "appl_state"}));
                return Some(Input::ApplState(self.dbs.appl_state.clone()));
            }
            Output::Answer(a) => self.answer(a),
            Output::Restore(rows) => {
                self.record(json!({"restore": rows.len()}));
                for (k, f) in rows {
                    self.dbs.live.insert(k.clone(), f.clone());
                    self.dbs.appl_state.insert(k, f);
                }
            }
            Output::Publish(p) => self.publish(p),
            Output::Ports(cmd) => {
                self.record(json!({"ports": format!("{cmd:?}")}));
                let outs = self.ports.step(PortInput::Cmd(cmd));
                self.port_outputs(outs);
            }
            Output::Status => {
                let st = self.core.status();
                self.record(json!({"status": st.state.as_str()}));
            }
            Output::Queue(c) => self.record(json!({ "queue": render::queue(&c) })),
            Output::Observed(_) => {}
            Output::Resync(reason) => {
                self.watching = false;
                self.record(json!({"resync": reason}));
                return Some(Input::SessionEnded(Ended::Resync(reason)));
            }
        }
        None
    }

    fn config_rows(&self) -> Vec<(&'static str, String, FieldValues)> {
        let tables = weft_sonic_schema::config::owned_tables();
        self.dbs
            .config
            .iter()
            .filter_map(|((t, k), f)| {
                let t = tables.iter().find(|x| **x == t.as_str())?;
                Some((*t, k.clone(), f.clone()))
            })
            .collect()
    }

    /// The responder: failed keys' APPL_DB rows back to what is installed, APPL_STATE_DB for
    /// the rest, one response per key.
    fn answer(&mut self, a: weft_sonic_plugin::core::Answered) {
        let answers: Vec<Value> = a
            .results
            .iter()
            .map(|r| {
                if r.status.is_ok() {
                    json!([r.key, r.status.as_str()])
                } else {
                    json!([r.key, r.status.as_str(), r.message])
                }
            })
            .collect();
        let mut v = json!({ "answer": answers });
        if !a.revert.is_empty() {
            v["revert"] = json!(a.revert.iter().map(|(k, _)| k).collect::<Vec<_>>());
        }
        if !a.remove.is_empty() {
            v["remove"] = json!(a.remove);
        }
        self.record(v);
        for (k, f) in a.revert {
            self.dbs.live.insert(k, f);
        }
        for k in a.remove {
            self.dbs.live.remove(&k);
        }
        for r in a.results.iter().filter(|r| r.status.is_ok()) {
            match r.op {
                Op::Set => {
                    self.dbs.appl_state.insert(r.key.clone(), r.fields.clone());
                }
                Op::Del => {
                    self.dbs.appl_state.remove(&r.key);
                }
            }
        }
    }

    fn publish(&mut self, p: Publish) {
        let rows: Vec<Value> = p
            .state
            .iter()
            .map(|(t, k, f)| json!([t, k, render::fields(f)]))
            .collect();
        let mut v = json!({ "publish": rows });
        if !p.state_delete.is_empty() {
            v["delete"] = json!(p.state_delete);
        }
        if !p.counters.is_empty() {
            v["counters"] = json!(p.counters.len());
        }
        self.record(v);
        for (t, k, f) in p.state {
            self.dbs.state_db.insert((t.to_string(), k), f);
        }
        for (t, k) in p.state_delete {
            self.dbs.state_db.remove(&(t.to_string(), k));
        }
    }

    /// The port thread: the mask through its own connection, rows into STATE_DB.
    fn port_outputs(&mut self, outs: Vec<PortOutput>) {
        for o in outs {
            match o {
                PortOutput::WriteMask(down) => {
                    self.record(json!({ "mask_down": down }));
                    let e = weft_sonic_plugin::ports::port_status_entity(&self.info, &down)
                        .expect("mask entity");
                    let ok = self
                        .switch
                        .write(&[Update {
                            r#type: update::Type::Modify as i32,
                            entity: Some(e),
                        }])
                        .is_ok();
                    self.ports.mask_written(down, ok);
                }
                PortOutput::Publish(rows) => {
                    let v: Vec<Value> = rows
                        .iter()
                        .map(|s| {
                            json!([
                                s.port,
                                s.oper_status.as_str(),
                                s.admin_status.map(|a| a.as_str())
                            ])
                        })
                        .collect();
                    self.record(json!({ "port_state": v }));
                    self.ports.published(true);
                }
            }
        }
    }

    /// A keyspace notification, if the session's watcher is there to get it.
    fn notify(&mut self) {
        if self.watching {
            self.feed(Input::ConfigChanged);
        }
    }

    /// Gives the core the batches the consumer popped, while it takes them.
    fn consume(&mut self) {
        while self.core.accepts_batch() {
            let Some((ops, term)) = self.consumer.pop_front() else {
                return;
            };
            self.feed(Input::Batch { ops, term });
        }
    }

    fn start(&mut self) {
        self.feed(Input::WaitingForSwitch);
        self.feed(Input::WaitingForRedis);
        let pushed = !self.pipeline;
        self.pipeline = true;
        self.feed(Input::SessionUp {
            redis_run_id: format!("redis-{}", self.run_id),
            pushed,
            cookie: 7,
        });
    }
}

impl Harness {
    fn line(&mut self, v: &Value) {
        if v.get("start").is_some() {
            self.start();
        } else if let Some(cfg) = v.get("config") {
            self.config(cfg, v);
        } else if let Some(b) = v.get("batch") {
            self.batch(b, v.get("term").and_then(Value::as_u64));
        } else if let Some(ifname) = v.get("link").and_then(Value::as_str) {
            let up = v["up"].as_bool().expect("up");
            let outs = self.ports.step(PortInput::Link(LinkEvent {
                ifname: ifname.into(),
                up,
            }));
            self.port_outputs(outs);
        } else if let Some(s) = v.get("switch").and_then(Value::as_str) {
            self.switch.down.store(s == "lost", Ordering::SeqCst);
        } else if let Some(t) = v.get("refuse").and_then(Value::as_str) {
            self.refuse(t);
        } else if let Some(t) = v.get("drift_delete").and_then(Value::as_str) {
            let id = self.info.table(t).expect("table").id;
            if let Ok(mut objs) = self.switch.objects.lock() {
                objs.retain(|k, _| k.table_id() != Some(id));
            }
        } else if let Some(t) = v.get("term").and_then(Value::as_u64) {
            self.dbs.term = Some(t);
        } else if let Some(t) = v.get("timer").and_then(Value::as_str) {
            let t = match t {
                "status" => Timer::Status,
                "watchdog" => Timer::Watchdog,
                "tuning" => Timer::Tuning,
                other => panic!("timer {other}"),
            };
            self.feed(Input::Timer(t));
        } else if v.get("redis").is_some() {
            // Redis restarted empty: the edge loses its connections and ends the session.
            self.dbs = Dbs::default();
            self.run_id += 1;
            self.watching = false;
            self.consumer.clear();
            self.feed(Input::SessionEnded(Ended::Resync(
                "Redis: connection lost".into(),
            )));
        } else if let Some(rates) = v.get("pfc_emulation") {
            let line_rate = rates
                .as_object()
                .expect("rates")
                .iter()
                .map(|(p, r)| (p.clone(), r.as_f64().expect("pps")))
                .collect();
            self.pfc = Some(PauseConfig {
                line_rate,
                scale: 1.0,
            });
            self.core = new_core(&self.info, self.base, self.pfc.clone());
        } else if let Some(port) = v.get("pfc").and_then(Value::as_str) {
            let id = self
                .core
                .features()
                .intent
                .ports
                .id(port)
                .expect("a port CONFIG_DB names");
            let mut quanta = [0u16; 8];
            for (q, x) in quanta
                .iter_mut()
                .zip(v["quanta"].as_array().expect("quanta"))
            {
                *q = x.as_u64().expect("quanta") as u16;
            }
            let frame = PfcFrame {
                class_enable: v["enable"].as_u64().expect("enable") as u8,
                quanta,
            };
            self.feed(Input::PfcFrame { port: id, frame });
        } else if v.get("restart").is_some() {
            self.watching = false;
            self.core = new_core(&self.info, self.base, self.pfc.clone());
            self.ports = new_ports();
            self.consumer.clear();
        } else {
            panic!("unknown input line {v}");
        }
    }

    fn config(&mut self, cfg: &Value, v: &Value) {
        for (k, f) in cfg.as_object().expect("config rows") {
            let (t, key) = k.split_once('|').expect("TABLE|key");
            let at = (t.to_string(), key.to_string());
            match f.as_object() {
                Some(fields) => {
                    let fv: FieldValues = fields
                        .iter()
                        .map(|(a, b)| (a.clone(), b.as_str().unwrap_or_default().to_string()))
                        .collect();
                    self.dbs.config.insert(at, fv);
                }
                None => {
                    self.dbs.config.remove(&at);
                }
            }
        }
        if v.get("notify").and_then(Value::as_bool) == Some(false) {
            return;
        }
        match v.get("notify_after").and_then(Value::as_u64) {
            Some(after) => self.schedule(self.now + after, Event::Notify),
            None => self.notify(),
        }
    }

    fn batch(&mut self, b: &Value, term: Option<u64>) {
        let mut ops = Vec::new();
        for op in b.as_array().expect("ops") {
            let key = op[1].as_str().expect("key").to_string();
            match op[0].as_str() {
                Some("SET") => {
                    let fields: FieldValues = op[2]
                        .as_object()
                        .expect("fields")
                        .iter()
                        .map(|(a, b)| (a.clone(), b.as_str().unwrap_or_default().to_string()))
                        .collect();
                    if term.is_none() {
                        self.dbs.live.insert(key.clone(), fields.clone());
                    }
                    ops.push(KeyOpFieldValues {
                        key,
                        op: Op::Set,
                        fields,
                    });
                }
                Some("DEL") => {
                    if term.is_none() {
                        self.dbs.live.remove(&key);
                    }
                    ops.push(KeyOpFieldValues::del(key));
                }
                other => panic!("op {other:?}"),
            }
        }
        self.consumer.push_back((ops, term));
    }

    fn refuse(&mut self, table: &str) {
        let reject: Option<weft_sonic_plugin::sim::RejectFn> = if table.is_empty() {
            None
        } else {
            let id = self.info.table(table).expect("table").id;
            Some(Box::new(move |k: &ObjKey| k.table_id() == Some(id)))
        };
        if let Ok(mut r) = self.switch.reject.lock() {
            *r = reject;
        }
    }

    /// Runs events (input lines, write answers, notifications, the core's wake-ups) in time
    /// order up to `until`.
    fn run_until(&mut self, until: u64) {
        loop {
            let next_q = self.queue.peek().map(|r| r.0.0);
            // A wake-up already given at this time asks for nothing new.
            let next_w = self
                .core
                .next_wake()
                // Rounded up: a deadline inside a millisecond is due at its end, not before it.
                .map(|w| {
                    w.saturating_duration_since(self.base)
                        .as_nanos()
                        .div_ceil(1_000_000) as u64
                })
                .filter(|w| *w > self.now || self.ticked != Some(self.now));
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
                let Some(std::cmp::Reverse((_, seq))) = self.queue.pop() else {
                    break;
                };
                match self.events.remove(&seq) {
                    Some(Event::Line(v)) => self.line(&v),
                    Some(Event::Input(i)) => self.feed(i),
                    Some(Event::Notify) => self.notify(),
                    None => {}
                }
            } else {
                self.ticked = Some(self.now);
                self.feed(Input::Tick);
            }
            self.consume();
        }
        self.now = self.now.max(until);
    }
}

fn run_case(dir: &Path) -> String {
    let input = std::fs::read_to_string(dir.join("input.jsonl")).expect("input.jsonl");
    let mut h = Harness::new();
    let mut until = 0;
    for line in input
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let t = v["t"].as_u64().expect("t");
        if v.get("until").is_some() {
            until = until.max(t);
            continue;
        }
        h.schedule(t, Event::Line(v));
        until = until.max(t);
    }
    h.run_until(until);
    let mut text = h.out.join("\n");
    text.push('\n');
    text
}

fn steps_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/steps")
}

fn check(name: &str) {
    let dir = steps_dir().join(name);
    let got = run_case(&dir);
    let path = dir.join("output.jsonl");
    if std::env::var_os("WEFT_REGEN").is_some() {
        std::fs::write(&path, &got).expect("write output.jsonl");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if got != want {
        let first = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "{name}: output differs from {} at line {}:\n got: {}\nwant: {}\n(WEFT_REGEN=1 rewrites it; review the diff)",
            path.display(),
            first + 1,
            got.lines().nth(first).unwrap_or("<end>"),
            want.lines().nth(first).unwrap_or("<end>"),
        );
    }
}

#[test]
fn every_case_directory_has_a_test() {
    let listed: BTreeSet<&str> = CASES.iter().copied().collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(steps_dir())
        .expect("steps dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let on_disk: BTreeSet<&str> = on_disk.iter().map(String::as_str).collect();
    assert_eq!(listed, on_disk, "tests/steps and CASES differ");
}

const CASES: &[&str] = &[
    "01-batch-accepted",
    "02-batch-with-a-refused-entry",
    "03-missing-nexthop",
    "04-delete-in-use-nexthop",
    "05-port-down-member-masked",
    "06-config-before-the-batch-naming-it",
    "07-session-lost-mid-batch",
    "08-read-back-drift",
    "09-restart-with-everything-installed",
    "10-fenced-term",
    "11-next-batch-prepared-while-one-is-in-flight",
    "12-qos-change-writes-the-owned-tables",
    "13-redis-restarted-empty",
    "14-pfc-pause-holds-the-queue-and-zero-quanta-resumes",
    "15-pfc-hold-runs-out-at-the-ports-speed",
    "16-pfc-re-pause-extends-the-deadline",
];

#[test]
fn batch_accepted() {
    check("01-batch-accepted");
}
#[test]
fn batch_with_a_refused_entry() {
    check("02-batch-with-a-refused-entry");
}
#[test]
fn missing_nexthop() {
    check("03-missing-nexthop");
}
#[test]
fn delete_in_use_nexthop() {
    check("04-delete-in-use-nexthop");
}
#[test]
fn port_down_member_masked() {
    check("05-port-down-member-masked");
}
#[test]
fn config_before_the_batch_naming_it() {
    check("06-config-before-the-batch-naming-it");
}
#[test]
fn session_lost_mid_batch() {
    check("07-session-lost-mid-batch");
}
#[test]
fn read_back_drift() {
    check("08-read-back-drift");
}
#[test]
fn restart_with_everything_installed() {
    check("09-restart-with-everything-installed");
}
#[test]
fn fenced_term() {
    check("10-fenced-term");
}
#[test]
fn next_batch_prepared_while_one_is_in_flight() {
    check("11-next-batch-prepared-while-one-is-in-flight");
}
#[test]
fn qos_change_writes_the_owned_tables() {
    check("12-qos-change-writes-the-owned-tables");
}
#[test]
fn redis_restarted_empty() {
    check("13-redis-restarted-empty");
}
#[test]
fn pfc_pause_holds_the_queue_and_zero_quanta_resumes() {
    check("14-pfc-pause-holds-the-queue-and-zero-quanta-resumes");
}
#[test]
fn pfc_hold_runs_out_at_the_ports_speed() {
    check("15-pfc-hold-runs-out-at-the-ports-speed");
}
#[test]
fn pfc_re_pause_extends_the_deadline() {
    check("16-pfc-re-pause-extends-the-deadline");
}

/// Updates and rows as short lines: names from the P4Info, values in hex.
mod render {
    use serde_json::{Value, json};
    use weft_p4rt::P4Info;
    use weft_p4rt::proto::p4::v1::field_match::FieldMatchType;
    use weft_p4rt::proto::p4::v1::table_action::Type as ActionType;
    use weft_p4rt::proto::p4::v1::{
        Action, Entity, TableEntry, Update, entity, packet_replication_engine_entry, update,
    };
    use weft_sonic_db::FieldValues;

    fn hex(b: &[u8]) -> String {
        let s: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let s = s.trim_start_matches('0');
        format!("0x{}", if s.is_empty() { "0" } else { s })
    }

    fn action(info: &P4Info, a: &Action) -> String {
        let Ok(ai) = info.action_by_id(a.action_id) else {
            return format!("action {:#x}", a.action_id);
        };
        let params: Vec<String> = a
            .params
            .iter()
            .map(|p| {
                let name = ai.param_by_id(p.param_id).map_or("?", |x| x.name.as_str());
                format!("{name}={}", hex(&p.value))
            })
            .collect();
        format!("{}({})", ai.alias, params.join(","))
    }

    fn table_entry(info: &P4Info, t: &TableEntry) -> String {
        let Ok(ti) = info.table_by_id(t.table_id) else {
            return format!("table {:#x}", t.table_id);
        };
        let matches: Vec<String> = t
            .r#match
            .iter()
            .map(|m| {
                let name = ti.field_by_id(m.field_id).map_or("?", |f| f.name.as_str());
                let v = match &m.field_match_type {
                    Some(FieldMatchType::Exact(x)) => hex(&x.value),
                    Some(FieldMatchType::Lpm(x)) => format!("{}/{}", hex(&x.value), x.prefix_len),
                    Some(FieldMatchType::Ternary(x)) => {
                        format!("{}&{}", hex(&x.value), hex(&x.mask))
                    }
                    Some(FieldMatchType::Optional(x)) => hex(&x.value),
                    _ => "?".into(),
                };
                format!("{name}={v}")
            })
            .collect();
        let act = match t.action.as_ref().and_then(|a| a.r#type.as_ref()) {
            Some(ActionType::Action(a)) => action(info, a),
            Some(ActionType::ActionProfileGroupId(g)) => format!("group {g}"),
            Some(ActionType::ActionProfileMemberId(m)) => format!("member {m:#x}"),
            _ => String::new(),
        };
        let key = if t.is_default_action {
            "default".to_string()
        } else {
            format!("{{{}}}", matches.join(","))
        };
        format!("{} {key} {act}", ti.alias).trim_end().to_string()
    }

    fn entity(info: &P4Info, e: &Entity) -> String {
        let profile = |id: u32| {
            info.action_profile_by_id(id)
                .map_or_else(|_| format!("{id:#x}"), |p| p.name.clone())
        };
        match &e.entity {
            Some(entity::Entity::TableEntry(t)) => table_entry(info, t),
            Some(entity::Entity::ActionProfileMember(m)) => format!(
                "member {} {:#x} {}",
                profile(m.action_profile_id),
                m.member_id,
                m.action
                    .as_ref()
                    .map(|a| action(info, a))
                    .unwrap_or_default()
            )
            .trim_end()
            .to_string(),
            Some(entity::Entity::ActionProfileGroup(g)) => {
                let ms: Vec<String> = g
                    .members
                    .iter()
                    .map(|m| format!("{:#x}x{}", m.member_id, m.weight))
                    .collect();
                format!(
                    "group {} {} [{}]",
                    profile(g.action_profile_id),
                    g.group_id,
                    ms.join(",")
                )
            }
            Some(entity::Entity::PacketReplicationEngineEntry(p)) => match &p.r#type {
                Some(packet_replication_engine_entry::Type::CloneSessionEntry(c)) => {
                    format!("clone_session {}", c.session_id)
                }
                _ => "replication".into(),
            },
            _ => "?".into(),
        }
    }

    pub fn updates(info: &P4Info, us: &[Update]) -> Vec<String> {
        us.iter()
            .map(|u| {
                let ty = update::Type::try_from(u.r#type).map_or("?", |t| t.as_str_name());
                let e = u
                    .entity
                    .as_ref()
                    .map(|e| entity(info, e))
                    .unwrap_or_default();
                format!("{ty} {e}")
            })
            .collect()
    }

    pub fn queue(c: &super::QueueCmd) -> String {
        match c {
            super::QueueCmd::Rates(r) => format!("rates {r:?}"),
            super::QueueCmd::ReleaseAll => "release all".into(),
            super::QueueCmd::Rearm(cells) => format!("rearm {cells:?}"),
            super::QueueCmd::Hold {
                port,
                prio,
                held,
                rate,
            } => format!(
                "{} {port}/{prio}{}",
                if *held { "hold" } else { "release" },
                rate.map(|r| format!(" rate {r}")).unwrap_or_default()
            ),
        }
    }

    pub fn fields(f: &FieldValues) -> Value {
        let m: serde_json::Map<String, Value> =
            f.iter().map(|(a, b)| (a.clone(), json!(b))).collect();
        Value::Object(m)
    }
}
