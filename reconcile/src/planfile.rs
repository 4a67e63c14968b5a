//! The plan file (`weft plan -o plan.json`): the plan JSON plus what identifies it: the intent's
//! text and digest, the `--down` links and `--switch`/`--role` selection it was made with, and
//! every switch's `installed_digest`. `weft apply plan.json` applies exactly the embedded intent
//! with the same links down and switches selected, and only if no switch changed since
//! ([`crate::passes`]).

use std::io::Write;

use serde::{Deserialize, Serialize};

/// The plan file's format version (`weft_plan`). 2: `installed_digest` is the state digest
/// plugins publish (`weft_sonic_db::Digest`), no longer FNV-1a.
pub const PLAN_FILE_VERSION: u32 = 2;

/// FNV-1a of a text, as hex (the plan file's intent digest).
pub fn text_digest(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// What identifies a plan file's intent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanIntent {
    /// The intent file the plan was made from (as given).
    pub file: String,
    pub digest: String,
    /// The intent's text: `weft apply PLAN.json` applies exactly this.
    pub text: String,
}

impl PlanIntent {
    pub fn new(file: &str, text: String) -> PlanIntent {
        PlanIntent {
            file: file.to_string(),
            digest: text_digest(&text),
            text,
        }
    }
}

/// The part of a plan file `weft apply` needs (the rest is skipped unread).
#[derive(Debug, Deserialize)]
pub struct PlanFile {
    pub weft_plan: u32,
    pub intent: PlanIntent,
    /// `--down` as given to `weft plan`.
    #[serde(default)]
    pub down: Vec<String>,
    /// The switches selected (`None`: all).
    #[serde(default)]
    pub targets: Option<Vec<String>>,
    #[serde(default)]
    pub offline: bool,
    pub switches: Vec<PlanFileSwitch>,
}

#[derive(Debug, Deserialize)]
pub struct PlanFileSwitch {
    pub name: String,
    pub installed_digest: String,
}

/// Why a plan file cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    #[error("opening {path}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a plan file of this weft")]
    Parse {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{path}: plan file version {found} (this weft writes {PLAN_FILE_VERSION}); make a new plan"
    )]
    Version { path: String, found: u32 },
    #[error(
        "{path}: the intent inside does not match its digest (edited by hand?); make a new plan"
    )]
    Digest { path: String },
}

/// A plan file: its header parsed, or `None` when `path` is not one (an intent).
pub fn read_plan_file(path: &str) -> Result<Option<PlanFile>, PlanFileError> {
    let Ok(mut f) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let mut head = [0u8; 64];
    let n = std::io::Read::read(&mut f, &mut head).unwrap_or(0);
    let head = String::from_utf8_lossy(&head[..n]);
    if !head.trim_start().starts_with("{\"weft_plan\"") {
        return Ok(None);
    }
    let f = std::fs::File::open(path).map_err(|source| PlanFileError::Open {
        path: path.to_string(),
        source,
    })?;
    let p: PlanFile = serde_json::from_reader(std::io::BufReader::new(f)).map_err(|source| {
        PlanFileError::Parse {
            path: path.to_string(),
            source,
        }
    })?;
    if p.weft_plan != PLAN_FILE_VERSION {
        return Err(PlanFileError::Version {
            path: path.to_string(),
            found: p.weft_plan,
        });
    }
    if text_digest(&p.intent.text) != p.intent.digest {
        return Err(PlanFileError::Digest {
            path: path.to_string(),
        });
    }
    Ok(Some(p))
}

/// The plan file's own fields, before the plan's: `{"weft_plan":…,"created_ms":…,"intent":…,
/// "down":…,"targets":…,"offline":…,` (the plan's header and switches follow).
pub fn write_file_header(
    f: &mut dyn Write,
    created_ms: u64,
    intent: &PlanIntent,
    down_args: &[String],
    selected: Option<Vec<&str>>,
    offline: bool,
) -> std::io::Result<()> {
    write!(
        f,
        "{{\"weft_plan\":{PLAN_FILE_VERSION},\"created_ms\":{created_ms},\"intent\":{},\"down\":{},\"targets\":{},\"offline\":{offline},",
        serde_json::to_string(intent)?,
        serde_json::to_string(down_args)?,
        serde_json::to_string(&selected)?,
    )
}

fn fields_of(v: &serde_json::Value) -> weft_sonic_db::FieldValues {
    match v {
        // Entries: `[["action", "..."], ...]`.
        serde_json::Value::Array(a) => a
            .iter()
            .filter_map(|p| {
                Some((
                    p.get(0)?.as_str()?.to_string(),
                    p.get(1)?.as_str()?.to_string(),
                ))
            })
            .collect(),
        // CONFIG_DB rows: `{"pfc_enable": "3", ...}`.
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), String::from),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// One switch of a plan file's JSON as the plan table shows it (`weft show PLAN.json`).
fn render_file_switch(
    s: &serde_json::Value,
    verbose: bool,
    totals: &mut crate::plan::Totals,
) -> String {
    use crate::plan::{ChangeLine, SwitchLine, render_lines};
    let n = |k: &str| s["counts"][k].as_u64().unwrap_or(0) as usize;
    let list = |k: &str| s[k].as_array().map(Vec::as_slice).unwrap_or_default();
    let config_modify = list("config_set")
        .iter()
        .filter(|c| c.get("old").is_some())
        .count();
    totals.add += n("add");
    totals.modify += n("modify");
    totals.delete += n("delete");
    totals.config_add += n("config_set") - config_modify.min(n("config_set"));
    totals.config_modify += config_modify;
    totals.config_delete += n("config_delete");
    let groups = list("add")
        .iter()
        .chain(list("modify"))
        .filter(|c| c["stage"] == "Group")
        .count();
    let line = SwitchLine {
        name: s["name"].as_str().unwrap_or("?"),
        entries: n("entries"),
        add: n("add"),
        modify: n("modify"),
        delete: n("delete"),
        config: n("config_set") + n("config_delete"),
        groups,
        installed_from: s["installed_from"].as_str().unwrap_or("?"),
    };
    let changes = verbose.then(|| {
        let entry = |sign: char, c: &serde_json::Value| ChangeLine {
            sign,
            key: c["key"].as_str().unwrap_or_default().to_string(),
            old: c.get("old").map(fields_of),
            new: fields_of(&c["fields"]),
        };
        let entries = list("add")
            .iter()
            .map(|c| entry('+', c))
            .chain(list("modify").iter().map(|c| entry('~', c)))
            .chain(list("delete").iter().map(|c| entry('-', c)))
            .collect();
        let rows = list("config_set")
            .iter()
            .map(|c| ChangeLine {
                sign: if c.get("old").is_some() { '~' } else { '+' },
                key: format!(
                    "{}|{}",
                    c["table"].as_str().unwrap_or_default(),
                    c["key"].as_str().unwrap_or_default()
                ),
                old: c.get("old").map(fields_of),
                new: fields_of(&c["fields"]),
            })
            .chain(list("config_delete").iter().map(|k| ChangeLine {
                sign: '-',
                key: k.as_str().unwrap_or_default().to_string(),
                old: None,
                new: Vec::new(),
            }))
            .collect();
        (entries, rows)
    });
    render_lines(&line, changes)
}

/// A plan file's plan as `weft plan` printed it (`weft show PLAN.json`), from its JSON.
pub fn render_plan_file(v: &serde_json::Value, verbose: bool) -> String {
    let strings = |k: &str| -> Vec<String> {
        v[k].as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut o =
        crate::plan::render_header(v["fabric"].as_str().unwrap_or("?"), &strings("links_down"));
    let mut totals = crate::plan::Totals::default();
    let switches = v["switches"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for s in switches {
        o.push_str(&render_file_switch(s, verbose, &mut totals));
    }
    o.push_str(&crate::plan::render_footer(
        switches.len(),
        &totals,
        &Default::default(),
        &strings("notes"),
        verbose,
    ));
    o
}
