//! Loading the intent a command names: its problems printed the way compilers print them
//! (and as `weft validate --output json` does when the command's output is JSON), an invalid
//! intent exit status 2, a file that cannot be read exit status 1.

use std::io::Write;

use serde::Serialize;
use weft_topology::diag::total_count;
use weft_topology::{Diagnostic, LoadError, Topology};

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

/// Prints diagnostics the way compilers do, one block per problem, on stderr.
pub fn print_diagnostics(diags: &[Diagnostic]) {
    let mut err = std::io::stderr().lock();
    for d in diags {
        let _ = writeln!(err, "{d}");
    }
}

/// Loads an intent; prints its diagnostics and gives `None` when it is invalid (exit 2).
pub fn load_valid(path: &str) -> anyhow::Result<Option<Topology>> {
    load_valid_as(path, OutputFormat::Text)
}

/// As [`load_valid`]; with `--output json` an invalid intent also prints its report on standard
/// output (`weft validate --output json`'s shape for one file), so a JSON reader always gets
/// JSON.
pub fn load_valid_as(path: &str, output: OutputFormat) -> anyhow::Result<Option<Topology>> {
    Ok(match load(path)? {
        Ok(t) => Some(t),
        Err(d) => {
            print_diagnostics(&d);
            if output == OutputFormat::Json {
                crate::outln!(
                    "{}",
                    serde_json::to_string_pretty(&invalid_report(path, &d))?
                );
            }
            None
        }
    })
}

/// Splits load errors into diagnostics (exit 2) and real failures (exit 1).
pub fn load(path: &str) -> anyhow::Result<Result<Topology, Vec<Diagnostic>>> {
    match weft_topology::load_file(path) {
        Ok(t) => Ok(Ok(t)),
        Err(LoadError::Invalid(d)) => Ok(Err(d)),
        Err(e @ LoadError::Io { .. }) => Err(e.into()),
    }
}
