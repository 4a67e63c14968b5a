//! One module per `weft` subcommand. Each returns an [`Outcome`] so the binary maps it to the
//! documented exit codes (`crate::cli::EXIT_CODES`): 0 ok, 1 failure, 2 invalid intent,
//! 3 "not yet" (changes found, problems found, not running).

pub mod counters;
pub mod diagnose;
pub mod doctor;
pub mod fabric;
pub mod graph;
pub mod plan;
pub mod run;
pub mod show;
pub mod simulate;
pub mod testbed;
pub mod top;
pub mod trace;
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
    /// The command worked and the answer is "not yet": changes to make
    /// (`--detailed-exitcode`), problems found (`doctor`), `weft run` not running (`status`).
    NotYet,
}

impl Outcome {
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Ok => 0,
            Outcome::Failed => 1,
            Outcome::Invalid => 2,
            Outcome::NotYet => 3,
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
    load_valid_as(path, OutputFormat::Text)
}

/// As [`load_valid`]; with `--output json` an invalid intent also prints its report on standard
/// output (`weft validate --output json`'s shape for one file), so a JSON reader always gets
/// JSON.
pub fn load_valid_as(
    path: &str,
    output: OutputFormat,
) -> anyhow::Result<Option<weft_topology::Topology>> {
    Ok(match load(path)? {
        Ok(t) => Some(t),
        Err(d) => {
            print_diagnostics(&d);
            if output == OutputFormat::Json {
                crate::outln!(
                    "{}",
                    serde_json::to_string_pretty(&validate::invalid_report(path, &d))?
                );
            }
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

/// Writes one man page per command (`weft.1`, `weft-plan.1`, `weft-testbed-up.1`, ...).
pub fn manpages(cmd: &clap::Command, dir: &std::path::Path) -> anyhow::Result<usize> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    fn walk(
        cmd: &clap::Command,
        prefix: &str,
        dir: &std::path::Path,
        n: &mut usize,
    ) -> anyhow::Result<()> {
        use anyhow::Context;
        let name = if prefix.is_empty() {
            cmd.get_name().to_string()
        } else {
            format!("{prefix}-{}", cmd.get_name())
        };
        let page = cmd.clone().display_name(name.clone());
        let mut buf = Vec::new();
        clap_mangen::Man::new(page).render(&mut buf)?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, buf).with_context(|| format!("writing {}", path.display()))?;
        *n += 1;
        for sub in cmd.get_subcommands() {
            if sub.get_name() != "help" {
                walk(sub, &name, dir, n)?;
            }
        }
        Ok(())
    }
    let mut n = 0;
    let mut cmd = cmd.clone();
    cmd.build();
    walk(&cmd, "", dir, &mut n)?;
    Ok(n)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `30s`, `50ms`, `1.5s`, `3m`: durations the way the flags take them.
pub fn human_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 && d.as_micros() > 0 {
        format!("{}us", d.as_micros())
    } else if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) && ms < 120_000 {
        format!("{}s", ms / 1000)
    } else if ms < 120_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m", ms / 60_000)
    }
}
