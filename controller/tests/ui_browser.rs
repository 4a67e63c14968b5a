//! `weft ui` in a real browser against a `--db-only` testbed (a redis-server per switch, no
//! BMv2, no plugin): the test writes what each plugin would (STATE_DB port rows and status row,
//! COUNTERS_DB rows every 300 ms) and reads the page's DOM through headless Chromium.
//!
//! Proves, from the DOM: with nothing written every switch is unknown, not healthy, and the
//! diagnosis judges nothing; with "plugins" running, every switch turns running; a port taken
//! down turns its link down within a few seconds and back up after; a host pausing its leaf
//! for the whole window becomes a `pfc_storm` finding with its evidence; a click opens the
//! link's chart; the server refuses anything but GET. It saves a screenshot
//! (`WEFT_UI_SCREENSHOT=PATH` writes it there too: the README's picture).
//!
//! On the BMv2 testbed (root, BMv2, `weft-plugin`; otherwise SKIPPED unless WEFT_REQUIRE_BMV2=1)
//! the second test proves the same from the real plugins: every switch running, a veth taken
//! down by `set_link` turns its link down on the page and back, and `weft testbed fault
//! pfc-storm` becomes the page's `pfc_storm` finding.
//!
//! Needs chromium and chromium-driver (scripts/setup.sh); without them SKIPPED, unless
//! WEFT_REQUIRE_BROWSER=1.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::bed::{self, Bed};
use common::browser::{Browser, http};
use weft_sonic_db::{SonicDb, SonicDbId, Table};
use weft_sonic_schema::Row;
use weft_sonic_schema::counters::{PortCounters, QueueCounters};
use weft_sonic_schema::state::{OperStatus, PluginState, PluginStatus, PortState};
use weft_testbed as tb;

const TEST: &str = "ui_browser";

/// What the stand-in plugins write.
#[derive(Default)]
struct Plan {
    plugins: bool,
    down: BTreeSet<(String, String)>,
    /// (switch, port): PAUSE frames/s received on priority 3.
    pause: Option<(String, String, u64)>,
    stop: bool,
}

/// Every switch's rows, as its plugin would write them, every 300 ms (counters grow with the
/// time since the start: a per-link load, ECN marks on the busiest, PAUSE where planned).
fn play(t: &weft_topology::Topology, plan: &Arc<Mutex<Plan>>) -> std::thread::JoinHandle<()> {
    let t = t.clone();
    let plan = plan.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let t0 = Instant::now();
            let mut pause_total = 0f64;
            let mut last = Instant::now();
            loop {
                let (plugins, down, pause) = {
                    let p = plan.lock().expect("plan");
                    if p.stop {
                        return;
                    }
                    (p.plugins, p.down.clone(), p.pause.clone())
                };
                let secs = t0.elapsed().as_secs_f64();
                if let Some((_, _, rate)) = &pause {
                    pause_total += *rate as f64 * last.elapsed().as_secs_f64();
                }
                last = Instant::now();
                if plugins {
                    for (si, sw) in t.switches.iter().enumerate() {
                        write_switch(sw, si, secs, &down, pause.as_ref(), pause_total as u64).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
    })
}

async fn write_switch(
    sw: &weft_topology::Switch,
    si: usize,
    secs: f64,
    down: &BTreeSet<(String, String)>,
    pause: Option<&(String, String, u64)>,
    pause_total: u64,
) {
    let db = SonicDb::from_endpoint(&sw.db).expect("endpoint");
    let state = db.connect(SonicDbId::StateDb).await.expect("STATE_DB");
    let counters = db
        .connect(SonicDbId::CountersDb)
        .await
        .expect("COUNTERS_DB");
    let ports = Table::new(state.clone(), PortState::TABLE).expect("table");
    let rows = Table::new(counters, "COUNTERS").expect("table");
    for (pi, p) in sw.ports.iter().enumerate() {
        let is_down = down.contains(&(sw.name.clone(), p.name.clone()));
        let ps = PortState {
            port: p.name.clone(),
            oper_status: if is_down {
                OperStatus::Down
            } else {
                OperStatus::Up
            },
            admin_status: None,
        };
        ports
            .set(&ps.key(), &ps.to_fields())
            .await
            .expect("port row");
        // A load that differs per port: 2%..62% of 100 Gb/s.
        let gbps = 2.0 + ((si * 7 + pi * 13) % 61) as f64;
        let bytes = (gbps * 1e9 / 8.0 * secs) as u64;
        let mut pc = PortCounters {
            port: p.name.clone(),
            tx_bytes: Some(bytes),
            rx_bytes: Some(bytes),
            tx_packets: Some(bytes / 4000),
            rx_packets: Some(bytes / 4000),
            ..Default::default()
        };
        if let Some((s, q, _)) = pause
            && *s == sw.name
            && *q == p.name
        {
            pc.pfc[3].rx_pause = Some(pause_total);
        }
        rows.set(&pc.key(), &pc.to_fields())
            .await
            .expect("port counters");
        let q = QueueCounters {
            port: p.name.clone(),
            queue: 3,
            packets: Some(bytes / 4000),
            ecn_marked: Some(if gbps > 50.0 {
                (secs * 800.0) as u64
            } else {
                0
            }),
            ..Default::default()
        };
        rows.set(&q.key(), &q.to_fields())
            .await
            .expect("queue counters");
    }
    let mut st = PluginStatus::fresh(PluginState::Running, &sw.p4rt_address);
    st.updated_ms = weft_observe::now_ms();
    st.uptime_s = secs as u64;
    Table::new(state, PluginStatus::TABLE)
        .expect("table")
        .set(&st.key(), &st.to_fields())
        .await
        .expect("status row");
}

/// The db-only testbed, `weft ui` and the player; all stopped when dropped.
struct Stand {
    dir: PathBuf,
    state_dir: PathBuf,
    fabric: String,
    ui: Option<Child>,
    plan: Arc<Mutex<Plan>>,
    player: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Stand {
    fn drop(&mut self) {
        if let Ok(mut p) = self.plan.lock() {
            p.stop = true;
        }
        if let Some(p) = self.player.take() {
            let _ = p.join();
        }
        if let Some(mut c) = self.ui.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = tb::down(&self.state_dir, &self.fabric);
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("files kept in {}", self.dir.display());
        }
    }
}

/// `weft ui FILE` on a free loopback port: the child and the page's URL.
fn start_ui(file: &std::path::Path, dir: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weft"))
        .arg("ui")
        .arg(file)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "500ms",
            "--window",
            "4s",
        ])
        .arg("--status-file")
        .arg(dir.join("no-weft-run.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("weft ui");
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .expect("first line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    (child, url)
}

const SWITCH_STATES: &str = "return Array.from(document.querySelectorAll('.sw[data-switch]')).map(e => e.dataset.switch + '=' + e.dataset.state).join(' ');";

fn link_state(name: &str) -> String {
    format!(
        "const e = document.querySelector('.link[data-link=\"{name}\"]'); return e ? e.dataset.state : null;"
    )
}

fn link_is(name: &str, state: &str) -> String {
    format!(
        "const e = document.querySelector('.link[data-link=\"{name}\"]'); return e !== null && e.dataset.state === '{state}';"
    )
}

#[test]
fn the_page_shows_unknown_without_data_a_flapped_link_down_and_back_and_a_storms_finding() {
    let (dir, fabric, text) = common::small_example("ui");
    let file = dir.join("fabric.yaml");
    std::fs::write(&file, text).expect("intent");
    let t = weft_topology::load_file(&file).expect("intent");
    let mut stand = Stand {
        state_dir: dir.join("state"),
        dir: dir.clone(),
        fabric,
        ui: None,
        plan: Arc::default(),
        player: None,
    };
    let programs = tb::Programs {
        redis: PathBuf::from("/usr/bin/redis-server"),
        plugin: PathBuf::new(),
        bmv2: PathBuf::new(),
    };
    tb::up(
        &t,
        &programs,
        &tb::UpOptions {
            state_dir: stand.state_dir.clone(),
            plugin_args: Vec::new(),
            db_only: true,
            acl: false,
            tls: false,
        },
    )
    .expect("db-only testbed");
    let (ui, url) = start_ui(&file, &dir);
    stand.ui = Some(ui);
    let port: u16 = url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let Some(b) = Browser::start(TEST, &dir) else {
        return;
    };
    b.goto(&url);

    // 1. Nothing written: every switch unknown, nothing healthy, nothing judged.
    assert!(
        b.wait(
            Duration::from_secs(20),
            "return +document.body.dataset.seq >= 3;"
        )
        .is_some(),
        "no frames reached the page"
    );
    let states = b.eval(SWITCH_STATES);
    println!("db-only: {states}");
    let states = states.as_str().unwrap_or_default().to_string();
    assert_eq!(
        states.matches("=unknown").count(),
        t.switches.len(),
        "{states}"
    );
    assert!(!states.contains("=running"), "{states}");
    assert_eq!(
        b.eval("return document.getElementById('sum-running').textContent;"),
        "0"
    );
    let diag = b.eval("return document.getElementById('diag-state').dataset.state;");
    assert!(
        diag == "no data" || diag == "collecting",
        "db-only diagnosis: {diag}"
    );
    let util = b.eval("return Array.from(document.querySelectorAll('.link')).filter(e => e.dataset.util !== 'unknown').length;");
    assert_eq!(util, 0, "a link with a utilisation while nothing counts");

    // 2. The plugins run: every switch running, links coloured.
    stand.plan.lock().expect("plan").plugins = true;
    stand.player = Some(play(&t, &stand.plan));
    let running = b.wait(
        Duration::from_secs(20),
        &format!(
            "return document.querySelectorAll('.sw[data-state=\"running\"]').length === {};",
            t.switches.len()
        ),
    );
    assert!(
        running.is_some(),
        "not every switch running: {}",
        b.eval(SWITCH_STATES)
    );
    assert!(
        b.wait(
            Duration::from_secs(10),
            "return document.querySelectorAll('.link[data-util=\"unknown\"]').length === 0;"
        )
        .is_some(),
        "links without utilisation while every plugin counts"
    );

    // 3. A flap: leaf1:Ethernet8 down, then up.
    let link = "leaf1:Ethernet8 ↔ spine1:Ethernet0";
    assert_eq!(b.eval(&link_state(link)), "up");
    let port_down = ("leaf1".to_string(), "Ethernet8".to_string());
    stand
        .plan
        .lock()
        .expect("plan")
        .down
        .insert(port_down.clone());
    let went_down = b
        .wait(Duration::from_secs(10), &link_is(link, "down"))
        .unwrap_or_else(|| panic!("{link} not down on the page: {}", b.eval(&link_state(link))));
    stand.plan.lock().expect("plan").down.remove(&port_down);
    let came_up = b
        .wait(Duration::from_secs(10), &link_is(link, "up"))
        .unwrap_or_else(|| panic!("{link} not back up: {}", b.eval(&link_state(link))));
    println!(
        "{link}: down on the page {:.1} s after the port row, up {:.1} s after",
        went_down.as_secs_f64(),
        came_up.as_secs_f64()
    );
    assert!(went_down < Duration::from_secs(5) && came_up < Duration::from_secs(5));
    let events = b.eval("return Array.from(document.querySelectorAll('#events li[data-kind=\"link\"]')).map(e => e.textContent).join('\\n');");
    assert!(
        events.as_str().unwrap_or_default().contains("up → down"),
        "timeline: {events}"
    );

    // 4. leaf1-h1 pauses its leaf 400 times a second: a PFC storm with evidence.
    stand.plan.lock().expect("plan").pause = Some(("leaf1".into(), "Ethernet0".into(), 400));
    let finding = "return document.querySelector('.finding[data-kind=\"pfc_storm\"][data-target=\"leaf1-h1\"]') !== null;";
    let found = b.wait(Duration::from_secs(30), finding).unwrap_or_else(|| {
        panic!(
            "no pfc_storm finding: {}",
            b.eval("return document.getElementById('side').innerText;")
        )
    });
    let text =
        b.eval("return document.querySelector('.finding[data-kind=\"pfc_storm\"]').innerText;");
    println!("finding after {:.1} s: {text}", found.as_secs_f64());
    assert!(
        text.as_str()
            .unwrap_or_default()
            .contains("leaf1:Ethernet0"),
        "{text}"
    );

    // 5. A drill-down: the host link's chart.
    b.eval("document.querySelector('.link[data-link=\"leaf1-h1 ↔ leaf1:Ethernet0\"]').dispatchEvent(new MouseEvent('click', {bubbles: true})); return true;");
    assert!(
        // Two reads make a line: the page may have read only once when the drill opens.
        b.wait(Duration::from_secs(20), "const d = document.getElementById('drill'); const l = d.querySelector('polyline'); return !d.hidden && l !== null && (l.getAttribute('points') || '').trim().split(' ').length >= 2;").is_some(),
        "the drill-down did not open with a chart of two points or more"
    );
    // Its lines are drawn: two or more points, every coordinate a number.
    let points = b.eval("return Array.from(document.querySelectorAll('#drill polyline')).map(e => e.getAttribute('points')).join(' | ');");
    println!("drill-down lines: {points}");
    let points = points.as_str().unwrap_or_default().to_string();
    let first = points.split(" | ").next().unwrap_or_default();
    assert!(
        first.split(' ').count() >= 2 && !points.contains("NaN") && !points.contains("Infinity"),
        "the chart's lines are not drawable: {points}"
    );
    let shot = dir.join("ui-fabric.png");
    b.screenshot(&shot);
    if let Some(p) = std::env::var_os("WEFT_UI_SCREENSHOT") {
        std::fs::copy(&shot, &p).expect("copy the screenshot");
        println!("screenshot written to {}", PathBuf::from(p).display());
    }

    // 6. Read-only: nothing but GET.
    for (method, path) in [
        ("POST", "/"),
        ("PUT", "/api/frame"),
        ("DELETE", "/api/link/0"),
    ] {
        let (code, _) = http(port, method, path, None);
        assert_eq!(code, 405, "{method} {path}");
    }
}

/// The page's switches all `running`, within `deadline`.
fn wait_all_running(b: &Browser, n: usize, deadline: Duration) {
    let all =
        format!("return document.querySelectorAll('.sw[data-state=\"running\"]').length === {n};");
    assert!(
        b.wait(deadline, &all).is_some(),
        "not every switch running: {}",
        b.eval(SWITCH_STATES)
    );
}

#[test]
fn on_the_bmv2_testbed_the_page_shows_running_plugins_a_link_down_and_back_and_an_injected_storm() {
    const TEST_BMV2: &str = "ui_browser_bmv2";
    let Some(programs) = bed::programs(TEST_BMV2, &bed::Needs::default()) else {
        return;
    };
    if !Browser::available(TEST_BMV2) {
        return;
    }
    let mut f = Bed::up_applied(&programs, "uib", |t| t, &["--counter-interval", "500ms"]);
    let (ui, url) = start_ui(&f.file, &f.dir);
    f.keep("ui", ui);
    let Some(b) = Browser::start(TEST_BMV2, &f.dir) else {
        return;
    };
    b.goto(&url);
    wait_all_running(&b, f.topo.switches.len(), Duration::from_secs(30));

    // A veth down and up: the plugin's PORT_TABLE row, read by the page.
    let link = "leaf1:Ethernet8 ↔ spine1:Ethernet0";
    assert!(
        b.wait(Duration::from_secs(10), &link_is(link, "up"))
            .is_some(),
        "{link} not up on the page: {}",
        b.eval(&link_state(link))
    );
    let st = f.state();
    tb::set_link(&st, "leaf1", "Ethernet8", false).expect("link down");
    let went_down = b.wait(Duration::from_secs(15), &link_is(link, "down"));
    tb::set_link(&st, "leaf1", "Ethernet8", true).expect("link up");
    let went_down = went_down
        .unwrap_or_else(|| panic!("{link} not down on the page: {}", b.eval(&link_state(link))));
    let came_up = b
        .wait(Duration::from_secs(15), &link_is(link, "up"))
        .unwrap_or_else(|| panic!("{link} not back up: {}", b.eval(&link_state(link))));
    println!(
        "bmv2: {link} down on the page {:.1} s after the veth, up {:.1} s after",
        went_down.as_secs_f64(),
        came_up.as_secs_f64()
    );

    // `weft testbed fault pfc-storm leaf1-h1`: PAUSE frames the pipeline counts.
    let file = f.file.to_string_lossy().to_string();
    let state = f.state_dir().to_string_lossy().to_string();
    let (code, out) = f.weft(&[
        "testbed",
        "fault",
        &file,
        "pfc-storm",
        "leaf1-h1",
        "--state-dir",
        &state,
    ]);
    assert_eq!(code, 0, "weft testbed fault: {out}");
    let finding = "return document.querySelector('.finding[data-kind=\"pfc_storm\"][data-target=\"leaf1-h1\"]') !== null;";
    let found = b.wait(Duration::from_secs(45), finding).unwrap_or_else(|| {
        panic!(
            "no pfc_storm finding: {}",
            b.eval("return document.getElementById('side').innerText;")
        )
    });
    println!(
        "bmv2: pfc_storm finding on the page {:.1} s after the fault",
        found.as_secs_f64()
    );
    let shot = f.dir.join("ui-fabric-bmv2.png");
    b.screenshot(&shot);
    if let Some(p) = std::env::var_os("WEFT_UI_SCREENSHOT_BMV2") {
        std::fs::copy(&shot, &p).expect("copy the screenshot");
        println!("screenshot written to {}", PathBuf::from(p).display());
    }
    let (code, out) = f.weft(&["testbed", "fault", &file, "clear", "--state-dir", &state]);
    assert_eq!(code, 0, "weft testbed fault clear: {out}");
}
