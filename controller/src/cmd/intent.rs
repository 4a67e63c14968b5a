//! Loading the intent a command names (`-`: standard input): its problems printed the way
//! compilers print them (and as the command's document when its output is structured), an
//! invalid intent exit status 2, a file that cannot be read exit status 1.

use std::sync::OnceLock;

use serde::Serialize;
use weft_topology::diag::total_count;
use weft_topology::{Diagnostic, LoadError, ReadError, Topology};

use crate::args::OutputFormat;

/// One problem as `--output json` prints it: every key always present.
#[derive(Serialize)]
pub struct ErrorJson<'a> {
    pub file: &'a str,
    /// `null` when the problem is the file as a whole (it cannot be read).
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub item: &'a str,
    pub message: &'a str,
    pub help: Option<&'a str>,
}

/// One file's result. Counts are `null` unless the intent is valid.
#[derive(Serialize)]
pub struct Report<'a> {
    pub file: &'a str,
    pub valid: bool,
    pub switches: Option<usize>,
    pub hosts: Option<usize>,
    pub links: Option<usize>,
    /// All errors found, also those not listed (only the first 200 are).
    pub error_count: usize,
    pub errors: Vec<ErrorJson<'a>>,
}

/// One invalid file's report.
pub fn invalid<'a>(file: &'a str, d: &'a [Diagnostic]) -> Report<'a> {
    Report {
        file,
        valid: false,
        switches: None,
        hosts: None,
        links: None,
        error_count: total_count(d),
        errors: d
            .iter()
            .map(|d| ErrorJson {
                file: &d.file,
                line: Some(d.line),
                column: Some(d.column),
                item: &d.item,
                message: &d.message,
                help: d.help.as_deref(),
            })
            .collect(),
    }
}

/// One invalid file's report, as `weft validate --output json` prints it (for commands whose
/// `--output json` meets an invalid intent).
pub fn invalid_report(file: &str, d: &[Diagnostic]) -> serde_json::Value {
    serde_json::to_value(invalid(file, d)).unwrap_or_default()
}

/// Prints diagnostics the way compilers do, one block per problem, on stderr (with
/// `--log-format json` one JSON line each, its position and help as fields).
pub fn print_diagnostics(diags: &[Diagnostic]) {
    for d in diags {
        crate::logging::say(
            crate::logging::Say::Error,
            &d.to_string(),
            &[
                ("file", d.file.clone().into()),
                ("line", d.line.into()),
                ("column", d.column.into()),
                ("item", d.item.clone().into()),
                ("help", d.help.clone().into()),
            ],
        );
    }
}

/// Loads an intent; prints its diagnostics and gives `None` when it is invalid (exit 2).
pub fn load_valid(path: &str) -> anyhow::Result<Option<Topology>> {
    load_valid_as(path, OutputFormat::Text)
}

/// As [`load_valid`]; with `--output json|yaml` an invalid intent is also the command's
/// document, its `error` of kind `invalid-intent` listing every problem as `weft validate`
/// does, so a reader of structured output always gets a document.
pub fn load_valid_as(path: &str, output: OutputFormat) -> anyhow::Result<Option<Topology>> {
    Ok(match load(path)? {
        Ok(t) => Some(t),
        Err(d) => {
            print_diagnostics(&d);
            if output.structured() {
                let label = label(path);
                let err = crate::report::ErrorDoc {
                    kind: "invalid-intent",
                    message: format!("{} error(s) in {label}", total_count(&d)),
                    causes: Vec::new(),
                    errors: Some(invalid_report(label, &d)["errors"].take()),
                };
                crate::report::emit_error(output, None, &err, serde_json::Value::Null)?;
            }
            None
        }
    })
}

/// How a file is named in messages: `-` is standard input.
pub fn label(path: &str) -> &str {
    if path == "-" { "<stdin>" } else { path }
}

/// Standard input, read once whoever asks first (`weft plan - -o plan.json` reads it for the
/// intent and for the plan file's copy of it).
fn stdin_text() -> Result<String, LoadError> {
    enum Read {
        Text(String),
        Invalid(Vec<Diagnostic>),
        Failed(String, std::io::ErrorKind),
    }
    static TEXT: OnceLock<Read> = OnceLock::new();
    let r = TEXT.get_or_init(|| {
        match weft_topology::read_limited(std::io::stdin().lock(), "<stdin>") {
            Ok(t) => Read::Text(t),
            Err(ReadError::Invalid(d)) => Read::Invalid(d),
            Err(ReadError::Io(e)) => Read::Failed(e.to_string(), e.kind()),
        }
    });
    match r {
        Read::Text(t) => Ok(t.clone()),
        Read::Invalid(d) => Err(LoadError::Invalid(d.clone())),
        Read::Failed(e, kind) => Err(LoadError::Io {
            path: "<stdin>".into(),
            source: std::io::Error::new(*kind, e.clone()),
        }),
    }
}

/// An intent's text: the file's, or standard input's for `-`.
pub fn read_text(path: &str) -> Result<String, LoadError> {
    if path == "-" {
        stdin_text()
    } else {
        weft_topology::read_intent(std::path::Path::new(path))
    }
}

/// Splits load errors into diagnostics (exit 2) and real failures (exit 1).
pub fn load(path: &str) -> anyhow::Result<Result<Topology, Vec<Diagnostic>>> {
    match read_text(path).and_then(|text| weft_topology::load_str(&text, label(path))) {
        Ok(t) => Ok(Ok(t)),
        Err(LoadError::Invalid(d)) => Ok(Err(d)),
        Err(e @ LoadError::Io { .. }) => Err(e.into()),
    }
}
