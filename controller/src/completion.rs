//! Completions that know the fabric: `COMPLETE=bash weft` (what `weft completions bash`
//! prints) makes the shell ask `weft` itself, which offers the switch, host and port names of
//! the intent file already on the command line for `--switch`, `--down`, host arguments and
//! `show routes SWITCH`.

use std::ffi::OsStr;

use clap::CommandFactory;
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};
use weft_topology::Topology;

use crate::cli::Cli;

/// The first intent file named on the command line being completed (the shell passes it after
/// `--`), if it loads.
fn intent_on_line() -> Option<Topology> {
    std::env::args_os()
        .skip(1)
        .filter(|a| {
            let p = std::path::Path::new(a);
            matches!(p.extension().and_then(OsStr::to_str), Some("yaml" | "yml")) && p.is_file()
        })
        .find_map(|a| weft_topology::load_file(std::path::Path::new(&a)).ok())
}

fn candidates(names: impl Iterator<Item = (String, String)>) -> Vec<CompletionCandidate> {
    names
        .map(|(n, help)| CompletionCandidate::new(n).help(Some(help.into())))
        .collect()
}

fn switches() -> Vec<CompletionCandidate> {
    let Some(t) = intent_on_line() else {
        return Vec::new();
    };
    candidates(
        t.switches
            .iter()
            .map(|s| (s.name.clone(), s.role.as_str().to_string())),
    )
}

fn hosts() -> Vec<CompletionCandidate> {
    let Some(t) = intent_on_line() else {
        return Vec::new();
    };
    candidates(
        t.hosts
            .iter()
            .map(|h| (h.name.clone(), t.switches[h.switch].name.clone())),
    )
}

/// `SWITCH:PORT` of every connected port.
fn ports() -> Vec<CompletionCandidate> {
    let Some(t) = intent_on_line() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for l in &t.links {
        for (e, f) in [(l.a, l.b), (l.b, l.a)] {
            out.push((t.end_name(e), format!("to {}", t.end_name(f))));
        }
    }
    candidates(out.into_iter())
}

fn roles() -> Vec<CompletionCandidate> {
    candidates(
        ["leaf", "spine", "superspine"]
            .iter()
            .map(|r| (r.to_string(), String::new())),
    )
}

/// The argument ids that take names, and what they take.
fn completer(id: &str) -> Option<fn() -> Vec<CompletionCandidate>> {
    Some(match id {
        "switches" | "switch" => switches,
        "roles" => roles,
        "down" => ports,
        "src" | "dst" | "ranks" => hosts,
        _ => return None,
    })
}

fn with_names(cmd: clap::Command) -> clap::Command {
    // In place: `mut_arg` would move the argument to the end, reordering positionals.
    let mut cmd = cmd.mut_args(|a| match completer(a.get_id().as_str()) {
        Some(f) => a.add(ArgValueCandidates::new(f)),
        None => a,
    });
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for s in subs {
        cmd = cmd.mut_subcommand(s, with_names);
    }
    cmd
}

/// The command line with name completers on the arguments that take names.
pub fn command() -> clap::Command {
    with_names(Cli::command())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_with_completers_keeps_its_positionals_in_order() {
        let cmd = super::command();
        cmd.clone().debug_assert();
        let routes = cmd
            .find_subcommand("show")
            .and_then(|s| s.find_subcommand("routes"))
            .expect("show routes");
        let order: Vec<&str> = routes
            .get_positionals()
            .map(|a| a.get_id().as_str())
            .collect();
        assert_eq!(order, ["file", "switch", "prefix"]);
    }
}
