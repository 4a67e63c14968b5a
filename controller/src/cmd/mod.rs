//! One module per `weft` subcommand: its options (a clap `Args` struct, parsed once and taken
//! as is) and its run, which calls the libraries and prints. Each returns an [`Outcome`] so
//! the binary maps it to the documented exit codes (`crate::cli::EXIT_CODES`): 0 ok, 1
//! failure, 2 invalid intent, 3 "not yet" (changes found, problems found, not running).
//!
//! One rule for every command that reads switches ([`verdict`]): a switch it needed and could
//! not use (no answer, no data, stale data) makes the answer incomplete, exit 1, whatever the
//! rest says; only a complete answer is 0 or 3.

pub mod counters;
pub mod diagnose;
pub mod diff;
pub mod doctor;
pub mod graph;
pub mod intent;
pub mod plan;
pub mod rules;
pub mod run;
pub mod show;
pub mod simulate;
pub mod status;
pub mod testbed;
pub mod top;
pub mod trace;
pub mod ui;
pub mod validate;
pub mod workload;

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

/// The exit rule for commands that read switches: 1 when any switch the answer needed could not
/// be used, else `answer`.
pub fn verdict(unknown: &[weft_observe::read::Unknown], answer: Outcome) -> Outcome {
    if unknown.is_empty() {
        answer
    } else {
        Outcome::Failed
    }
}

/// The switches a verdict could not use, one line each (`leaf1: NO DATA: ...`).
pub fn print_unknown(unknown: &[weft_observe::read::Unknown]) {
    for u in unknown {
        crate::outln!("{}", crate::style::unknown(&u.to_string()));
    }
}

/// Runs an async command on a runtime of two workers.
pub fn block_on<F: std::future::Future<Output = anyhow::Result<Outcome>>>(
    f: F,
) -> anyhow::Result<Outcome> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(f)
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
