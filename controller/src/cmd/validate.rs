//! `weft validate FILE...`: every file is checked, whatever happens to the others; `-` reads
//! standard input.
//!
//! Exit status: 0 every intent valid; 2 some intent invalid; 1 some file could not be read
//! (whatever the others were). There are no warnings: whatever the compiler would have to
//! refuse or work around is an error.

use std::path::Path;

use clap::Args;
use weft_topology::{Diagnostic, LoadError, ReadError};

use super::Outcome;
use super::intent::{ErrorJson, Report, invalid, print_diagnostics};
use crate::args::OutputFormat;

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Intent files; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// text, or json: an array with one report per file.
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
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

fn report<'a>(file: &'a str, c: &'a Checked) -> Report<'a> {
    match c {
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
        } => crate::outln!("{file}: valid ({switches} switches, {hosts} hosts, {links} links)"),
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

pub fn run(a: &ValidateArgs) -> anyhow::Result<Outcome> {
    let checked: Vec<(&str, Checked)> = a.files.iter().map(|f| (f.as_str(), check(f))).collect();
    let mut reports = Vec::new();
    for (f, c) in &checked {
        let file = if *f == "-" { "<stdin>" } else { f };
        let r = report(file, c);
        if a.output == OutputFormat::Text {
            print_text(file, c, &r);
        }
        reports.push(r);
    }
    if a.output == OutputFormat::Json {
        crate::outln!("{}", serde_json::to_string_pretty(&reports)?);
    }
    let unreadable = checked
        .iter()
        .any(|(_, c)| matches!(c, Checked::Unreadable(_)));
    let invalid = checked
        .iter()
        .any(|(_, c)| matches!(c, Checked::Invalid(_)));
    Ok(if unreadable {
        Outcome::Failed
    } else if invalid {
        Outcome::Invalid
    } else {
        Outcome::Ok
    })
}
