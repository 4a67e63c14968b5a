//! `weft validate FILE...`: every file is checked, whatever happens to the others; `-` reads
//! standard input.
//!
//! Exit status: 0 every intent valid; 2 some intent invalid; 1 some file could not be read
//! (whatever the others were). There are no warnings: whatever the compiler would have to
//! refuse or work around is an error.

use std::path::Path;

use serde::Serialize;
use weft_topology::diag::total_count;
use weft_topology::{Diagnostic, LoadError, ReadError};

use super::{Outcome, OutputFormat, print_diagnostics};

/// One problem as `--output json` prints it: every key always present.
#[derive(Serialize)]
struct ErrorJson<'a> {
    file: &'a str,
    /// `null` when the problem is the file as a whole (it cannot be read).
    line: Option<usize>,
    column: Option<usize>,
    item: &'a str,
    message: &'a str,
    help: Option<&'a str>,
}

/// One file's result. Counts are `null` unless the intent is valid.
#[derive(Serialize)]
struct Report<'a> {
    file: &'a str,
    valid: bool,
    switches: Option<usize>,
    hosts: Option<usize>,
    links: Option<usize>,
    /// All errors found, also those not listed (only the first 200 are).
    error_count: usize,
    errors: Vec<ErrorJson<'a>>,
}

enum Checked {
    Valid {
        switches: usize,
        hosts: usize,
        links: usize,
    },
    Invalid(Vec<Diagnostic>),
    Unreadable(String),
}

fn check(f: &str) -> Checked {
    let (label, text) = if f == "-" {
        let label = "<stdin>";
        (
            label,
            weft_topology::read_limited(std::io::stdin().lock(), label).map_err(|e| match e {
                ReadError::Io(e) => LoadError::Io {
                    path: label.into(),
                    source: e,
                },
                ReadError::Invalid(d) => LoadError::Invalid(d),
            }),
        )
    } else {
        (f, weft_topology::read_intent(Path::new(f)))
    };
    let result = text.and_then(|text| weft_topology::load_str(&text, label));
    match result {
        Ok(t) => Checked::Valid {
            switches: t.switches.len(),
            hosts: t.hosts.len(),
            links: t.links.len(),
        },
        Err(LoadError::Invalid(d)) => Checked::Invalid(d),
        Err(e @ LoadError::Io { .. }) => Checked::Unreadable(e.to_string()),
    }
}

pub fn run(files: &[String], output: OutputFormat) -> anyhow::Result<Outcome> {
    let mut invalid = false;
    let mut unreadable = false;
    let checked: Vec<(&str, Checked)> = files.iter().map(|f| (f.as_str(), check(f))).collect();
    let mut reports = Vec::new();
    for (f, c) in &checked {
        let file = if *f == "-" { "<stdin>" } else { f };
        let r = match c {
            Checked::Valid {
                switches,
                hosts,
                links,
            } => Report {
                file,
                valid: true,
                switches: Some(*switches),
                hosts: Some(*hosts),
                links: Some(*links),
                error_count: 0,
                errors: Vec::new(),
            },
            Checked::Invalid(d) => {
                invalid = true;
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
            Checked::Unreadable(msg) => {
                unreadable = true;
                Report {
                    file,
                    valid: false,
                    switches: None,
                    hosts: None,
                    links: None,
                    error_count: 1,
                    errors: vec![ErrorJson {
                        file,
                        line: None,
                        column: None,
                        item: "file",
                        message: msg,
                        help: None,
                    }],
                }
            }
        };
        if output == OutputFormat::Text {
            match c {
                Checked::Valid {
                    switches,
                    hosts,
                    links,
                } => crate::outln!(
                    "{file}: valid ({switches} switches, {hosts} hosts, {links} links)"
                ),
                Checked::Invalid(d) => {
                    print_diagnostics(d);
                    if r.error_count > d.len() {
                        crate::errln!(
                            "{file}: {} error(s), the first {} shown",
                            r.error_count,
                            d.len() - 1
                        );
                    } else {
                        crate::errln!("{file}: {} error(s)", r.error_count);
                    }
                }
                Checked::Unreadable(msg) => crate::errln!("{file}: error: {msg}"),
            }
        }
        reports.push(r);
    }
    if output == OutputFormat::Json {
        crate::outln!("{}", serde_json::to_string_pretty(&reports)?);
    }
    Ok(if unreadable {
        Outcome::Failed
    } else if invalid {
        Outcome::Invalid
    } else {
        Outcome::Ok
    })
}

/// One invalid file's report, as `weft validate --output json` prints it (for commands whose
/// `--output json` meets an invalid intent).
pub fn invalid_report(file: &str, d: &[Diagnostic]) -> serde_json::Value {
    let r = Report {
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
    };
    serde_json::to_value(&r).unwrap_or_default()
}
