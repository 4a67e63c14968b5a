//! `weft`: the operator's command. The command line is `weft_controller::cli`, each command's
//! options and run a `weft_controller::cmd` module; this file parses, sets up logging and maps
//! outcomes to the exit status table (`weft_controller::cli::EXIT_CODES`).

use clap::Parser;
use weft_controller::cli::{Cli, Command};
use weft_controller::logging::{self, LogLevel};

/// Usage errors (sysexits' EX_USAGE), apart from 2 (invalid intent).
const EXIT_USAGE: i32 = 64;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version are not errors.
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let default = match cli.command {
        Command::Run(_) => LogLevel::Info,
        _ => LogLevel::Warn,
    };
    logging::init(cli.log.log_level, cli.log.log_format, default);
    match cli.command.run() {
        Ok(outcome) => std::process::exit(outcome.exit_code()),
        Err(e) => {
            // One line, the causes after colons; never a backtrace.
            weft_controller::errln!("weft: {e:#}");
            std::process::exit(1);
        }
    }
}
