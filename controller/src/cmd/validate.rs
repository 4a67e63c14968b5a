//! `weft validate FILE...`: every file is checked, whatever happens to the others; `-` reads
//! standard input.
//!
//! Exit status: 0 every intent valid; 2 some intent invalid; 1 some file could not be read
//! (whatever the others were). There are no warnings: whatever the compiler would have to
//! refuse or work around is an error.

use clap::Args;
use weft_topology::{Diagnostic, LoadError};

use super::Outcome;
use super::intent::{ErrorJson, Report, invalid, label, print_diagnostics, read_text};
use crate::args::OutputFormat;

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Intent files; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// text, json or yaml: `files`, one report per file (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

enum Checked {
    Valid {
        fabric: String,
        switches: usize,
        hosts: usize,
        links: usize,
    },
    Invalid(Vec<Diagnostic>),
    Unreadable(String),
}

fn check(f: &str) -> Checked {
    let result = read_text(f).and_then(|text| weft_topology::load_str(&text, label(f)));
    match result {
        Ok(t) => Checked::Valid {
            fabric: t.name.clone(),
            switches: t.switches.len(),
            hosts: t.hosts.len(),
            links: t.links.len(),
        },
        Err(LoadError::Invalid(d)) => Checked::Invalid(d),
        Err(e @ LoadError::Io { .. }) => Checked::Unreadable(e.to_string()),
    }
}

fn report<'a>(file: &'a str, c: &'a Checked) -> Report<'a> {
    match c {
        Checked::Valid {
            switches,
            hosts,
            links,
            ..
        } => Report {
            file,
            valid: true,
            switches: Some(*switches),
            hosts: Some(*hosts),
            links: Some(*links),
            error_count: 0,
            errors: Vec::new(),
        },
        Checked::Invalid(d) => invalid(file, d),
        Checked::Unreadable(msg) => Report {
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
        },
    }
}

fn print_text(file: &str, c: &Checked, r: &Report) {
    match c {
        Checked::Valid {
            switches,
            hosts,
            links,
            ..
        } => crate::outln!("{file}: valid ({switches} switches, {hosts} hosts, {links} links)"),
        Checked::Invalid(d) => {
            print_diagnostics(d);
            if r.error_count > d.len() {
                crate::warnln!(
                    "{file}: {} error(s), the first {} shown",
                    r.error_count,
                    d.len() - 1
                );
            } else {
                crate::warnln!("{file}: {} error(s)", r.error_count);
            }
        }
        Checked::Unreadable(msg) => crate::errln!("{file}: error: {msg}"),
    }
}

pub fn run(a: &ValidateArgs) -> anyhow::Result<Outcome> {
    let checked: Vec<(&str, Checked)> = a.files.iter().map(|f| (f.as_str(), check(f))).collect();
    let mut reports = Vec::new();
    for (f, c) in &checked {
        let file = label(f);
        let r = report(file, c);
        if a.output == OutputFormat::Text {
            print_text(file, c, &r);
        }
        reports.push(r);
    }
    let unreadable = checked
        .iter()
        .any(|(_, c)| matches!(c, Checked::Unreadable(_)));
    let invalid = checked
        .iter()
        .any(|(_, c)| matches!(c, Checked::Invalid(_)));
    if a.output.structured() {
        emit(a.output, &checked, &reports, unreadable, invalid)?;
    }
    Ok(if unreadable {
        Outcome::Failed
    } else if invalid {
        Outcome::Invalid
    } else {
        Outcome::Ok
    })
}

/// The document: every file's report under `files`; `fabric` when one file was given and is
/// valid; `error` as every command has it (`failure` when a file could not be read, else
/// `invalid-intent` with the problems of every invalid file).
fn emit(
    output: OutputFormat,
    checked: &[(&str, Checked)],
    reports: &[Report],
    unreadable: bool,
    invalid: bool,
) -> anyhow::Result<()> {
    let fabric = match checked {
        [(_, Checked::Valid { fabric, .. })] => Some(fabric.as_str()),
        _ => None,
    };
    let bad: Vec<&Report> = reports.iter().filter(|r| !r.valid).collect();
    let errors: Vec<&ErrorJson> = bad.iter().flat_map(|r| &r.errors).collect();
    let count: usize = bad.iter().map(|r| r.error_count).sum();
    let message = format!(
        "{count} error(s) in {} of {} file(s)",
        bad.len(),
        reports.len()
    );
    let error = (unreadable || invalid).then(|| crate::report::ErrorDoc {
        kind: if unreadable {
            "failure"
        } else {
            "invalid-intent"
        },
        message,
        causes: Vec::new(),
        errors: serde_json::to_value(&errors).ok(),
    });
    let body = serde_json::json!({ "files": reports });
    match error {
        Some(e) => crate::report::emit_error(output, fabric, &e, body),
        None => crate::report::emit(output, fabric, &body),
    }
}
