//! `weft graph FILE --format dot|svg`: the fabric as Graphviz draws it, one rank per tier (top
//! tier at the top), links coloured by the state both ends report in STATE_DB.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use clap::Args;
use weft_observe::switch::{self, Want};
use weft_topology::Topology;

use super::Outcome;
use super::intent::load_valid;

#[derive(Args, Debug)]
pub struct GraphArgs {
    /// The intent file.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// dot (Graphviz source) or svg (rendered by Graphviz's `dot`) [default: from -o's
    /// extension (.svg, .dot, .gv), else dot].
    #[arg(long, value_enum)]
    pub format: Option<GraphFormat>,
    /// Write here instead of standard output (`.svg` renders SVG).
    #[arg(long = "out", short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Do not read link state from the switches.
    #[arg(long)]
    pub offline: bool,
    /// Draw the hosts too.
    #[arg(long)]
    pub hosts: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    Dot,
    Svg,
}

/// A DOT string. Names follow the name rule (no quotes, no backslashes); `\n` in a label is
/// DOT's line break and stays as it is.
fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\\\""))
}

/// The DOT text. `state[l]`: `Some(true)` both ends up, `Some(false)` an end down, `None` unknown.
pub fn dot(t: &Topology, state: &[Option<bool>], hosts: bool) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "graph {} {{", quote(&t.name));
    let _ = writeln!(
        o,
        "  graph [rankdir=TB, splines=line, nodesep=0.3, ranksep=1.2, label={}, labelloc=t];",
        quote(&format!(
            "fabric {}: {} switches, {} links",
            t.name,
            t.switches.len(),
            t.links.len()
        ))
    );
    let _ = writeln!(
        o,
        "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eef3fb\", fontname=\"Helvetica\"];"
    );
    let _ = writeln!(o, "  edge [penwidth=1.5];");
    let mut tiers: BTreeMap<std::cmp::Reverse<u8>, Vec<usize>> = BTreeMap::new();
    for (i, s) in t.switches.iter().enumerate() {
        tiers
            .entry(std::cmp::Reverse(s.role.tier()))
            .or_default()
            .push(i);
    }
    for (tier, list) in &tiers {
        let _ = writeln!(o, "  subgraph tier{} {{ rank=same;", tier.0);
        for &i in list {
            let s = &t.switches[i];
            let _ = writeln!(
                o,
                "    {} [label={}];",
                quote(&s.name),
                quote(&format!("{}\\n{} · id {}", s.name, s.role, s.device_id))
            );
        }
        let _ = writeln!(o, "  }}");
    }
    // Order within a rank as in the intent.
    for list in tiers.values() {
        if list.len() > 1 {
            let names: Vec<String> = list.iter().map(|&i| quote(&t.switches[i].name)).collect();
            let _ = writeln!(o, "  {} [style=invis];", names.join(" -- "));
        }
    }
    if hosts && !t.hosts.is_empty() {
        let _ = writeln!(o, "  subgraph hosts {{ rank=same;");
        for h in &t.hosts {
            let _ = writeln!(
                o,
                "    {} [shape=ellipse, fillcolor=\"#f7f7f7\", fontsize=10];",
                quote(&h.name)
            );
        }
        let _ = writeln!(o, "  }}");
    }
    for (li, l) in t.links.iter().enumerate() {
        // Upper tier first, so the edge points down the layout.
        let (up, down) = if t.switches[l.a.switch].role.tier() >= t.switches[l.b.switch].role.tier()
        {
            (l.a, l.b)
        } else {
            (l.b, l.a)
        };
        let color = match state.get(li).copied().flatten() {
            Some(true) => "#2e8b57",
            Some(false) => "#d62728",
            None => "#9a9a9a",
        };
        let style = if t.link_admin_up(li) {
            "solid"
        } else {
            "dashed"
        };
        let _ = writeln!(
            o,
            "  {} -- {} [color={}, style={style}, tooltip={}];",
            quote(&t.switches[up.switch].name),
            quote(&t.switches[down.switch].name),
            quote(color),
            quote(&format!("{} ↔ {}", t.end_name(up), t.end_name(down)))
        );
    }
    if hosts {
        for h in &t.hosts {
            let _ = writeln!(
                o,
                "  {} -- {} [color=\"#bbbbbb\", penwidth=1];",
                quote(&t.switches[h.switch].name),
                quote(&h.name)
            );
        }
    }
    let _ = writeln!(o, "}}");
    o
}

/// Renders DOT to SVG with Graphviz's `dot`.
pub fn svg(dot_text: &str) -> anyhow::Result<Vec<u8>> {
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running Graphviz `dot` (install it: apt-get install graphviz)")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(dot_text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "Graphviz `dot` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// The format asked for: `--format`, else `-o`'s extension; an extension of another format,
/// or one neither format has, is refused rather than written in the wrong format.
pub fn format_of(
    format: Option<GraphFormat>,
    out: Option<&std::path::Path>,
) -> anyhow::Result<GraphFormat> {
    let ext = out
        .and_then(|p| p.extension())
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let by_ext = match ext.as_deref() {
        None => None,
        Some("svg") => Some(GraphFormat::Svg),
        Some("dot" | "gv") => Some(GraphFormat::Dot),
        Some(other) => bail!(
            "{}: no graph format .{other} (use .svg or .dot, or --format)",
            out.map(|p| p.display().to_string()).unwrap_or_default()
        ),
    };
    match (format, by_ext) {
        (Some(f), Some(e)) if f != e => bail!(
            "--format {} but {} names another format",
            if f == GraphFormat::Svg { "svg" } else { "dot" },
            out.map(|p| p.display().to_string()).unwrap_or_default()
        ),
        (Some(f), _) => Ok(f),
        (None, e) => Ok(e.unwrap_or(GraphFormat::Dot)),
    }
}

pub async fn run(a: &GraphArgs) -> anyhow::Result<Outcome> {
    let Some(t) = load_valid(&a.file)? else {
        return Ok(Outcome::Invalid);
    };
    let format = format_of(a.format, a.out.as_deref())?;
    let mut unknown = Vec::new();
    let state: Vec<Option<bool>> = if a.offline {
        vec![None; t.links.len()]
    } else {
        let views = switch::read_all(&t, &None, Want::default()).await;
        for (si, v) in &views {
            if let Err(e) = v {
                unknown.push(weft_observe::read::Unknown {
                    switch: t.switches[*si].name.clone(),
                    data: "unreachable",
                    detail: e.to_string(),
                });
            }
        }
        switch::link_states(&t, &views)
    };
    // The drawing is still made (their links grey); the operator is told why they are.
    for u in &unknown {
        crate::warnln!("weft: {u} (its links are drawn grey: unknown)");
    }
    let text = dot(&t, &state, a.hosts);
    let bytes = match format {
        GraphFormat::Dot => text.into_bytes(),
        GraphFormat::Svg => svg(&text)?,
    };
    match &a.out {
        Some(p) => std::fs::write(p, bytes).with_context(|| format!("writing {}", p.display()))?,
        None => crate::out::stdout().write_all(&bytes)?,
    }
    Ok(super::verdict(&unknown, Outcome::Ok))
}
