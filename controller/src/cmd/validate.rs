//! `weft validate FILE...`

use serde::Serialize;

use super::{Outcome, OutputFormat, load, print_diagnostics};

#[derive(Serialize)]
struct Report<'a> {
    file: &'a str,
    valid: bool,
    switches: usize,
    hosts: usize,
    links: usize,
    errors: Vec<weft_topology::Diagnostic>,
}

pub fn run(files: &[String], output: OutputFormat) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::Ok;
    let mut reports = Vec::new();
    for f in files {
        let r = match load(f)? {
            Ok(t) => Report {
                file: f,
                valid: true,
                switches: t.switches.len(),
                hosts: t.hosts.len(),
                links: t.links.len(),
                errors: Vec::new(),
            },
            Err(d) => {
                outcome = Outcome::Invalid;
                Report {
                    file: f,
                    valid: false,
                    switches: 0,
                    hosts: 0,
                    links: 0,
                    errors: d,
                }
            }
        };
        if output == OutputFormat::Text {
            if r.valid {
                println!(
                    "{}: valid ({} switches, {} hosts, {} links)",
                    r.file, r.switches, r.hosts, r.links
                );
            } else {
                print_diagnostics(&r.errors);
                eprintln!("{}: {} error(s)", r.file, r.errors.len());
            }
        }
        reports.push(r);
    }
    if output == OutputFormat::Json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    Ok(outcome)
}
