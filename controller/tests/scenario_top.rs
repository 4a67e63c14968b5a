//! `weft top --once --output json` under load on the testbed (real BMv2, redis-server and
//! plugins): a heavy paced stream leaf1-h1 → leaf3-h1 and a light one leaf2-h1 → leaf4-h1; the
//! first link `weft top` names is one the heavy stream crosses, and every link of the heavy
//! path ranks above every link only the light one uses.
//!
//! Needs root and BMv2; without them it prints SKIPPED (WEFT_REQUIRE_BMV2=1 fails).

mod common;

use std::process::Command;
use std::time::Duration;

use common::bed::{self, Bed, Needs, REPO};

const TEST: &str = "scenario_top";

/// Paced background streams on the shared testbed.
impl Bed {
    fn stream(&mut self, src: &str, dst: &str, pps: u32, seconds: u32) {
        let probe = format!("{REPO}/tests/scripts/udp_probe.py");
        let ip = self.host_ip(dst);
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(src), "python3", &probe])
            .args(["send", "--dst", &ip, "--port", "5000", "--size", "1000"])
            .args(["--pps", &pps.to_string(), "--seconds", &seconds.to_string()])
            .spawn()
            .expect("sender");
        self.keep("stream", child);
    }
}

#[test]
fn weft_top_once_names_a_link_of_the_loaded_path_first() {
    let Some(programs) = bed::programs(TEST, &Needs::default()) else {
        return;
    };
    let mut f = Bed::up_applied(&programs, "top", |t| t, &["--counter-interval", "500ms"]);
    let file = f.file.clone();

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
