//! `weft top --once --output json` under load on the testbed (real BMv2, redis-server and
//! plugins): a heavy paced stream leaf1-h1 → leaf3-h1 and a light one leaf2-h1 → leaf4-h1; the
//! first link `weft top` names is one the heavy stream crosses, and every link of the heavy
//! path ranks above every link only the light one uses.
//!
//! Needs root and BMv2; without them it prints SKIPPED (WEFT_REQUIRE_BMV2=1 fails).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use weft_testbed as tb;

const TEST: &str = "scenario_top";
const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

struct Fixture {
    dir: PathBuf,
    fabric: String,
    children: Vec<Child>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            let keep = std::env::temp_dir().join(format!("weft-failed-{}", self.fabric));
            let _ = Command::new("cp")
                .arg("-r")
                .arg(&self.dir)
                .arg(&keep)
                .status();
            eprintln!("logs kept in {}", keep.display());
        }
        let _ = tb::down(&self.dir.join("state"), &self.fabric);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Fixture {
    fn state(&self) -> tb::State {
        tb::State::load(&self.dir.join("state")).expect("testbed state")
    }
    fn wait_all_reachable(&self, deadline: Duration) -> (usize, usize) {
        let t0 = Instant::now();
        loop {
            let r = tb::ping_all(&self.state(), 1);
            let (ok, n) = (r.iter().filter(|x| x.2).count(), r.len());
            if ok == n || t0.elapsed() > deadline {
                return (ok, n);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    fn stream(&mut self, src: &str, dst: &str, pps: u32, seconds: u32) {
        let probe = format!("{REPO}/tests/scripts/udp_probe.py");
        let ip = self
            .state()
            .host(dst)
            .map(|h| h.ipv4.clone())
            .expect("host");
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &tb::host_netns(&self.fabric, src),
                "python3",
                &probe,
            ])
            .args(["send", "--dst", &ip, "--port", "5000", "--size", "1000"])
            .args(["--pps", &pps.to_string(), "--seconds", &seconds.to_string()])
            .spawn()
            .expect("sender");
        self.children.push(child);
    }
}

#[test]
fn weft_top_once_names_a_link_of_the_loaded_path_first() {
    let Some(bmv2) = weft_tests::bmv2::find_bmv2() else {
        common::skip_or_fail(
            TEST,
            "BMv2 simple_switch_grpc not found (looked on PATH and /opt/p4/bin)",
        );
        return;
    };
    if !common::is_root() {
        common::skip_or_fail(TEST, "needs root for network namespaces");
        return;
    }
    let plugin = Path::new(env!("CARGO_BIN_EXE_weft")).with_file_name("weft-plugin");
    if !plugin.exists() {
        common::skip_or_fail(TEST, "weft-plugin not built");
        return;
    }
    let programs = tb::Programs {
        bmv2,
        redis: PathBuf::from("/usr/bin/redis-server"),
        plugin,
    };
    let (dir, fabric, text) = common::small_example("top");
    let file = dir.join("fabric.yaml");
    std::fs::write(&file, text).expect("intent");
    let topo = weft_topology::load_file(&file).expect("valid intent");
    let mut f = Fixture {
        dir: dir.clone(),
        fabric: fabric.clone(),
        children: Vec::new(),
    };
    tb::up(
        &topo,
        &programs,
        &tb::UpOptions {
            state_dir: dir.join("state"),
            plugin_args: vec!["--counter-interval".into(), "500ms".into()],
            db_only: false,
            acl: false,
            tls: false,
        },
    )
    .expect("testbed up");
    let mut last = String::new();
    let applied = (0..3).any(|_| {
        let o = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["apply", &file.to_string_lossy(), "--timeout", "60s"])
            .output()
            .expect("weft apply");
        last =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        if !o.status.success() {
            std::thread::sleep(Duration::from_secs(3));
        }
        o.status.success()
    });
    assert!(applied, "weft apply failed:\n{last}");
    let (ok, n) = f.wait_all_reachable(Duration::from_secs(90));
    assert_eq!(ok, n, "not all host pairs reachable");

    f.stream("leaf1-h1", "leaf3-h1", 300, 12);
    f.stream("leaf2-h1", "leaf4-h1", 30, 12);
    std::thread::sleep(Duration::from_secs(3));
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args([
            "top",
            &file.to_string_lossy(),
            "--once",
            "--interval",
            "4s",
            "--output",
            "json",
        ])
        .output()
        .expect("weft top");
    assert!(
        out.status.success(),
        "weft top: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let links = v["links"].as_array().cloned().unwrap_or_default();
    let heavy = |l: &str| {
        l.contains("leaf1-h1 ↔")
            || l.contains("leaf3-h1 ↔")
            || (l.starts_with("leaf1:") && l.contains("spine"))
            || (l.contains("spine") && l.contains("leaf3:"))
    };
    let light_only = |l: &str| {
        l.contains("leaf2-h1 ↔")
            || l.contains("leaf4-h1 ↔")
            || (l.starts_with("leaf2:") && l.contains("spine"))
            || (l.contains("spine") && l.contains("leaf4:"))
    };
    let show: Vec<String> = links
        .iter()
        .take(6)
        .map(|l| {
            format!(
                "{} {:.0}/{:.0} pps",
                l["link"].as_str().unwrap_or("?"),
                l["a_to_b_pps"].as_f64().unwrap_or(0.0),
                l["b_to_a_pps"].as_f64().unwrap_or(0.0)
            )
        })
        .collect();
    println!("weft top under 300 pps leaf1-h1 → leaf3-h1 and 30 pps leaf2-h1 → leaf4-h1: {show:?}");
    let first = links
        .first()
        .and_then(|l| l["link"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        heavy(&first),
        "first link {first} is not on the loaded path: {show:?}"
    );
    let rank = |pred: &dyn Fn(&str) -> bool, busy: bool| {
        links
            .iter()
            .enumerate()
            .filter(|(_, l)| {
                let name = l["link"].as_str().unwrap_or_default();
                let pps = l["a_to_b_pps"]
                    .as_f64()
                    .unwrap_or(0.0)
                    .max(l["b_to_a_pps"].as_f64().unwrap_or(0.0));
                pred(name) && (!busy || pps > 100.0)
            })
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    let heavy_busy = rank(&heavy, true);
    let light = rank(&light_only, false);
    // The heavy path: two host links, an uplink and a downlink carry ~300 pps.
    assert!(
        heavy_busy.len() >= 4,
        "the loaded path's links are not busy: {show:?}"
    );
    let worst_heavy = heavy_busy
        .iter()
        .take(4)
        .max()
        .copied()
        .unwrap_or(usize::MAX);
    assert!(
        light.iter().all(|&i| i > worst_heavy),
        "a link of the light stream ranks above the loaded path: {show:?}"
    );
}
