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
#[derive(Debug, Clone, Serialize, Deserialize)]
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
