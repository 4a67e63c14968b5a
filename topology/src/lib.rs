//! Weft's topology intent: the YAML contract with network operators.
//!
//! ```text
//!   text ──yaml::parse──▶ marked tree ──structure::Checker──▶ (unknown fields, types, units)
//!     └──serde_yaml_ng──▶ Intent ──resolve──▶ Topology     (generators, defaults, addresses,
//!                                                          duplicates, partitions, QoS sanity)
//! ```
//! Every problem becomes a [`Diagnostic`] with file, line, column and the item at fault; all of
//! them are reported at once. Nothing here does I/O except [`load_file`] reading the file.

pub mod diag;
pub mod generators;
pub mod model;
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
pub use model::{Intent, MacAddr, PortRef, Role, RoutingMode, Tuning, WatchdogAction};
pub use resolve::{DEFAULT_CABLE, DEFAULT_MTU, DEFAULT_SPEED};
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

/// Reads and validates an intent file.
pub fn load_file(path: impl AsRef<Path>) -> Result<Topology, LoadError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    load_str(&text, &path.display().to_string())
}

/// Validates intent text; `file` names it in messages.
pub fn load_str(text: &str, file: &str) -> Result<Topology, LoadError> {
    parse_intent(text, file).map(|(_, t)| t)
}

/// Parses, checks and resolves intent text, returning both the intent as written and the result.
pub fn parse_intent(text: &str, file: &str) -> Result<(Intent, Topology), LoadError> {
    let tree = yaml::parse(text).map_err(|e| {
        LoadError::Invalid(vec![Diagnostic {
            file: file.to_string(),
            line: e.pos.line,
            column: e.pos.col,
            item: "YAML".into(),
            message: format!("syntax error: {}", e.message),
            help: None,
        }])
    })?;
    let mut sink = diag::Sink::default();
    structure::Checker::new(schema(), file).check(&tree, &mut sink);
    if !sink.is_empty() {
        return Err(LoadError::Invalid(sink.finish()));
    }
    let intent: Intent = if tree == yaml::Node::Map(Vec::new(), tree.pos()) {
        Intent::default()
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
            LoadError::Invalid(vec![Diagnostic {
                file: file.to_string(),
                line,
                column,
                item: "intent".into(),
                message: e.to_string(),
                help: None,
            }])
        })?
    };
    let idx = yaml::PathIndex::build(&tree);
    let topo = resolve::resolve(&intent, file, &idx).map_err(LoadError::Invalid)?;
    Ok((intent, topo))
}
