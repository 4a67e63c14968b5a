//! `weft top FILE`: a live view of the fabric (`weft_observe::top`), refreshed every
//! interval on a terminal. `--once`, structured output, or an output that is not a terminal
//! (a pipe, a file) print one view, without screen escapes, and exit.
//!
//! Keys (a letter, then Enter: the terminal stays in line mode): `u` sort links by utilisation,
//! `p` by packet rate, `/TEXT` show only rows naming TEXT, `/` alone clears the filter, `q`
//! quits.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use clap::Args;
use weft_observe::status::run_usage;
use weft_observe::top::{Sort, TopView, snapshot, view};

use super::Outcome;
use super::intent::load_valid_as;
use crate::args::{OutputFormat, parse_duration};
use crate::outln;

#[derive(Args, Debug)]
pub struct TopArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// One view (two reads --interval apart), then exit (also when the output is not a
    /// terminal).
    #[arg(long)]
    pub once: bool,
    /// Refresh interval (and the rate window).
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
    /// How links are ranked.
    #[arg(long, value_enum, default_value = "util")]
    pub sort: TopSort,
    /// Only rows naming this text (a switch, port or host).
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// Rows per section in text output.
    #[arg(long, default_value = "10", value_name = "N")]
    pub rows: usize,
    /// text, json or yaml (one view, as --once).
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TopSort {
    /// The busier direction's bits/s over the link speed.
    Util,
    /// The busier direction's packets/s.
    Packets,
}

fn si(v: f64, unit: &str) -> String {
    let (d, p) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    format!("{d:.1}{p}{unit}")
}

fn rate(v: Option<f64>, unit: &str) -> String {
    v.map_or("-".to_string(), |v| si(v, unit))
}

fn count(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.0}"))
}

fn render(v: &TopView, rows: usize) {
    outln!(
        "weft top {}: rates over {:.1} s (keys: u/p sort links, /TEXT filter, q quit)",
        v.fabric,
        v.interval_s
    );
    outln!();
    outln!(
        "{:<48} {:>7} {:>10} {:>10} {:>9} {:>9}  state",
        "busiest links",
        "util",
        "a→b",
        "b→a",
        "a→b pps",
        "b→a pps"
    );
    for l in v.links.iter().take(rows) {
        outln!(
            "{:<48} {:>7} {:>10} {:>10} {:>9} {:>9}  {}",
            l.link,
            l.utilisation
                .map_or("-".to_string(), |u| format!("{:.3}%", u * 100.0)),
            rate(l.a_to_b_bps, "b/s"),
            rate(l.b_to_a_bps, "b/s"),
            count(l.a_to_b_pps),
            count(l.b_to_a_pps),
            crate::style::state(&l.state)
        );
    }
    outln!();
    outln!(
        "{:<24} {:>5} {:>10} {:>12} {:>10}",
        "queues (by ECN marks, trims)",
        "queue",
        "tx pps",
        "ECN marks/s",
        "trimmed/s"
    );
    for q in v.queues.iter().take(rows) {
        outln!(
            "{:<24} {:>5} {:>10.0} {:>12.1} {:>10.1}",
            format!("{}:{}", q.switch, q.port),
            q.queue,
            q.tx_pps,
            q.ecn_marked_per_s,
            q.trimmed_per_s
        );
    }
    if !v.depth.is_empty() {
        outln!();
        outln!(
            "{:<24} {:>10} {:>10}",
            "deepest queues",
            "p99 pkts",
            "packets"
        );
        for d in v.depth.iter().take(rows) {
            outln!(
                "{:<24} {:>10} {:>10}",
                format!("{}:{}", d.switch, d.port),
                d.depth_p99,
                d.packets
            );
        }
    }
    outln!();
    // "None" only when every switch was read twice with current counters.
    let unread = || {
        let names: Vec<&str> = v.unknown.iter().map(|u| u.switch.as_str()).collect();
        crate::style::unknown(&format!("unknown on {}", names.join(", ")))
    };
    if v.pfc.is_empty() && v.complete() {
        outln!("PFC: no PAUSE frames");
    } else if v.pfc.is_empty() {
        outln!("PFC: no PAUSE frames on the switches read; {}", unread());
    } else {
        outln!(
            "{:<24} {:>4} {:>12} {:>12}",
            "PFC",
            "prio",
            "rx PAUSE/s",
            "tx PAUSE/s"
        );
        for p in v.pfc.iter().take(rows) {
            outln!(
                "{:<24} {:>4} {:>12.1} {:>12.1}",
                format!("{}:{}", p.switch, p.port),
                p.priority,
                p.rx_pause_per_s,
                p.tx_pause_per_s
            );
        }
    }
    if v.drops.is_empty() && v.complete() {
        outln!("drops: none");
    } else if v.drops.is_empty() {
        outln!("drops: none on the switches read; {}", unread());
    } else {
        for d in v.drops.iter().take(rows) {
            outln!("drops: {} {} {:.1} pps", d.switch, d.reason, d.pps);
        }
    }
    let ooo: Vec<String> = v
        .out_of_order
        .iter()
        .filter(|o| o.out_of_order + o.regressions > 0)
        .take(rows)
        .map(|o| format!("{} {}/{}", o.switch, o.out_of_order, o.regressions))
        .collect();
    if !ooo.is_empty() {
        outln!(
            "RoCE PSN out of order/regressions (since start): {}",
            ooo.join(", ")
        );
    }
    if !v.out_of_use.is_empty() {
        outln!("links out of use: {}", v.out_of_use.join(", "));
    }
    super::print_unknown(&v.unknown);
}

/// Lines typed on standard input (a key, then Enter), read on a thread of their own.
fn keys() -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            if tx.send(line.trim().to_string()).is_err() {
                return;
            }
            line.clear();
        }
    });
    rx
}

pub async fn run(a: &TopArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid_as(&a.file, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let once = a.once || a.output.structured() || !std::io::stdout().is_terminal();
    let interval = a.interval.max(Duration::from_millis(100));
    let mut prev = snapshot(&t).await;
    let mut at = Instant::now();
    let mut sort = match a.sort {
        TopSort::Util => Sort::Utilisation,
        TopSort::Packets => Sort::Packets,
    };
    let mut filter = a.filter.clone().unwrap_or_default();
    let keys = (!once).then(keys);
    loop {
        tokio::time::sleep(interval.saturating_sub(at.elapsed())).await;
        let cur = snapshot(&t).await;
        let dt = at.elapsed().as_secs_f64();
        at = Instant::now();
        let v = view(&t, &prev, &cur, dt, &run_usage(&t), sort, &filter);
        if once {
            if a.output.structured() {
                crate::report::emit(a.output, Some(&t.name), &v)?;
            } else {
                render(&v, a.rows);
            }
            return Ok(super::verdict(&v.unknown, Outcome::Ok));
        }
        crate::out!("\x1b[H\x1b[2J");
        render(&v, a.rows);
        prev = cur;
        if let Some(rx) = &keys {
            while let Ok(k) = rx.try_recv() {
                match k.as_str() {
                    "q" => return Ok(Outcome::Ok),
                    "u" => sort = Sort::Utilisation,
                    "p" => sort = Sort::Packets,
                    f if f.starts_with('/') => filter = f[1..].to_string(),
                    _ => {}
                }
            }
        }
    }
}
