//! Weft's topology intent: the YAML contract with network operators.
//!
//! ```text
//!   text ──(size limit, BOM)──yaml::parse──▶ marked tree ──structure::Checker──▶ (duplicate keys,
//!     │        (value and nesting limits)                   unknown fields, types, units)
//!     └──serde_yaml_ng──▶ Intent ──resolve──▶ Topology    (fabric size, generators, defaults,
//!                                                          names, addresses, duplicates, QoS
//!                                                          safety per port, reachability)
//! ```
//! Every problem becomes a [`Diagnostic`] with file, line, column and the item at fault; all of
//! them are reported at once (at most [`diag::MAX_REPORTED`]), none that only follows from
//! another. Nothing here does I/O except [`read_intent`]/[`read_limited`] reading the text, and
//! no input can make it use more than [`Limits`] allow.

pub mod diag;
pub mod formats;
pub mod generators;
pub mod model;
pub mod names;
pub mod qos;
mod resolve;
mod structure;
pub mod summary;
pub mod topo;
pub mod units;
pub mod yaml;

use std::path::Path;
use std::sync::OnceLock;

pub use diag::Diagnostic;
pub use model::{
    Intent, MacAddr, P4rtTransport, PortRef, Role, RoutingMode, TrimSpec, Tuning, WatchdogAction,
};
pub use names::{MAX_NAME_LEN, NameError, check_name, display_name, is_valid_name};
pub use resolve::transport::{self, ZMQ_SOCKET_NAME, check_zmq_endpoint};
pub use resolve::{
    DEFAULT_CABLE, DEFAULT_MTU, DEFAULT_POSTCARD_SAMPLE, DEFAULT_SPEED, MAX_WATCHED_FLOWS,
    min_trim_size,
};
pub use topo::*;

/// Why an intent could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{} error(s) in the intent", .0.len())]
    Invalid(Vec<Diagnostic>),
}

/// The intent's JSON Schema, generated from the model (also committed as `intent.schema.json`).
pub fn schema() -> &'static serde_json::Value {
    static SCHEMA: OnceLock<serde_json::Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut s = schemars::schema_for!(Intent);
        s.insert("title".into(), "Weft topology intent".into());
        s.to_value()
    })
}

/// Bounds on what one intent may ask of the machine. Everything past them is an intent error
/// naming the number and the limit, found before the work (or memory) it would take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Size of the intent text.
    pub max_bytes: usize,
    /// Values in the YAML tree (aliases counted as often as they repeat) and nesting depth.
    pub parse: yaml::ParseLimits,
    /// Switches, hosts, switch-to-switch links and ports of the whole fabric, counted from the
    /// generators' parameters before anything is generated.
    pub max_switches: u64,
    pub max_hosts: u64,
    pub max_links: u64,
    pub max_ports: u64,
}

impl Default for Limits {
    /// Four times a k=64 fat-tree (5,120 switches, 65,536 hosts, 131,072 links, 327,680 ports),
    /// the largest fabric the compiler is measured on; validating one at the limit takes a few
    /// seconds and well under 1 GiB.
    fn default() -> Self {
        Limits {
            max_bytes: 64 << 20,
            parse: yaml::ParseLimits::default(),
            max_switches: 16_384,
            max_hosts: 262_144,
            max_links: 524_288,
            max_ports: 1_048_576,
        }
    }
}

/// Reads and validates an intent file.
pub fn load_file(path: impl AsRef<Path>) -> Result<Topology, LoadError> {
    let path = path.as_ref();
    let text = read_intent(path)?;
    load_str(&text, &path.display().to_string())
}

/// Reads an intent file as text: not more than [`Limits::max_bytes`] (plus one byte, so that an
/// oversized file is recognised without reading all of it), invalid UTF-8 an intent error.
pub fn read_intent(path: &Path) -> Result<String, LoadError> {
    let io = |source| LoadError::Io {
        path: path.display().to_string(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    read_limited(f, &path.display().to_string()).map_err(|e| match e {
        ReadError::Io(source) => io(source),
        ReadError::Invalid(d) => LoadError::Invalid(d),
    })
}

/// Why [`read_limited`] failed.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    Invalid(Vec<Diagnostic>),
}

/// Reads intent text from `r` (a file, standard input), refusing more than
/// [`Limits::max_bytes`] and text that is not UTF-8; `file` names it in messages.
pub fn read_limited(r: impl std::io::Read, file: &str) -> Result<String, ReadError> {
    use std::io::Read;
    let max = Limits::default().max_bytes;
    let mut buf = Vec::new();
    r.take(max as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(ReadError::Io)?;
    if buf.len() > max {
        return Err(ReadError::Invalid(vec![file_error(
            file,
            format!(
                "the intent is larger than {} MiB, the most Weft reads",
                max >> 20
            ),
        )]));
    }
    String::from_utf8(buf).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        let col = at
            - bytes[..at]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1)
            + 1;
        ReadError::Invalid(vec![Diagnostic {
            file: file.to_string(),
            line,
            column: col,
            item: "intent".into(),
            message: "the intent is not UTF-8 text".into(),
            help: Some("save the file as UTF-8".into()),
        }])
    })
}

fn file_error(file: &str, message: String) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        line: 1,
        column: 1,
        item: "intent".into(),
        message,
        help: None,
    }
}

/// Validates intent text; `file` names it in messages.
pub fn load_str(text: &str, file: &str) -> Result<Topology, LoadError> {
    parse_intent(text, file).map(|(_, t)| t)
}

/// Parses, checks and resolves intent text, returning both the intent as written and the result.
pub fn parse_intent(text: &str, file: &str) -> Result<(Intent, Topology), LoadError> {
    parse_intent_with(text, file, &Limits::default())
}

/// [`parse_intent`] within explicit limits.
pub fn parse_intent_with(
    text: &str,
    file: &str,
    limits: &Limits,
) -> Result<(Intent, Topology), LoadError> {
    let invalid = |d: Diagnostic| LoadError::Invalid(vec![d]);
    if text.len() > limits.max_bytes {
        return Err(invalid(file_error(
            file,
            format!(
                "the intent is {:.1} MiB, larger than the {} MiB Weft reads",
                text.len() as f64 / f64::from(1u32 << 20),
                limits.max_bytes >> 20
            ),
        )));
    }
    // Editors on Windows start UTF-8 files with a byte-order mark; it is not part of the text.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let parsed = yaml::parse_with(text, limits.parse).map_err(|e| {
        invalid(Diagnostic {
            file: file.to_string(),
            line: e.pos.line,
            column: e.pos.col,
            item: "YAML".into(),
            message: if e.limit {
                e.message
            } else {
                format!("syntax error: {}", e.message)
            },
            help: None,
        })
    })?;
    if parsed.empty {
        return Err(LoadError::Invalid(vec![Diagnostic {
            help: Some(
                "describe the fabric: `switches:` and `links:`, or a generator under `generators:`"
                    .into(),
            ),
            ..file_error(file, "the intent is empty".into())
        }]));
    }
    let mut sink = diag::Sink::default();
    for d in &parsed.duplicates {
        sink.push_help(
            file,
            d.pos,
            d.path.clone(),
            format!(
                "duplicate key `{}` (first written at line {})",
                names::display_name(&d.key),
                d.first.line
            ),
            "YAML keeps only one of the two: remove or merge one",
        );
    }
    let tree = parsed.root;
    structure::Checker::new(schema(), file).check(&tree, &mut sink);
    if !sink.is_empty() {
        return Err(LoadError::Invalid(sink.finish()));
    }
    let intent: Intent = serde_yaml_ng::from_str(text).map_err(|e| {
        let (line, column) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
        invalid(Diagnostic {
            file: file.to_string(),
            line,
            column,
            item: "intent".into(),
            message: structure::operator_message(&e.to_string()),
            help: None,
        })
    })?;
    let idx = yaml::PathIndex::build(&tree);
    drop(tree);
    let topo = resolve::resolve(&intent, file, &idx, limits).map_err(LoadError::Invalid)?;
    Ok((intent, topo))
}
