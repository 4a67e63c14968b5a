//! One module per `weft` subcommand. Each returns an [`Outcome`] so the binary maps it to the
//! documented exit codes: 0 ok, 2 invalid intent, 1 anything else.

pub mod plan;
pub mod run;
pub mod show;
pub mod simulate;
pub mod testbed;
pub mod validate;
pub mod workload;

use std::io::Write;

use weft_topology::{Diagnostic, LoadError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

/// What a command achieved, for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Invalid,
    /// Something was not done (a switch unreachable, an entry refused).
    Failed,
}

impl Outcome {
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Ok => 0,
            Outcome::Invalid => 2,
            Outcome::Failed => 1,
        }
    }
}

/// Prints diagnostics the way compilers do, one block per problem, on stderr.
pub fn print_diagnostics(diags: &[Diagnostic]) {
    let mut err = std::io::stderr().lock();
    for d in diags {
        let _ = writeln!(err, "{d}");
    }
}

/// Loads an intent; prints its diagnostics and gives `None` when it is invalid (exit 2).
pub fn load_valid(path: &str) -> anyhow::Result<Option<weft_topology::Topology>> {
    Ok(match load(path)? {
        Ok(t) => Some(t),
        Err(d) => {
            print_diagnostics(&d);
            None
        }
    })
}

/// Splits load errors into diagnostics (exit 2) and real failures (exit 1).
pub fn load(path: &str) -> anyhow::Result<Result<weft_topology::Topology, Vec<Diagnostic>>> {
    match weft_topology::load_file(path) {
        Ok(t) => Ok(Ok(t)),
        Err(LoadError::Invalid(d)) => Ok(Err(d)),
        Err(e @ LoadError::Io { .. }) => Err(e.into()),
    }
}
