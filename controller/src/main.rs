//! `weft`: the operator's command. The command line is `weft_controller::cli`, each command's
//! options and run a `weft_controller::cmd` module; this file parses, sets up logging and maps
//! outcomes to the exit status table (`weft_controller::cli::EXIT_CODES`).

use clap::Parser;
use weft_controller::args::OutputFormat;
use weft_controller::cli::{Cli, Command};
use weft_controller::logging::{self, LogLevel};
use weft_controller::report;

/// Usage errors (sysexits' EX_USAGE), apart from 2 (invalid intent).
const EXIT_USAGE: i32 = 64;

/// The value of `--NAME VALUE` or `--NAME=VALUE` in the raw arguments (for a command line that
/// did not parse: its error is still told in the format it asked for).
fn raw_option(args: &[String], name: &str) -> Option<String> {
    let flag = format!("--{name}");
    let eq = format!("--{name}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if *a == flag {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix(&eq).map(str::to_string)
        }
    })
}

/// A command line that does not parse: the error in the formats asked for, exit 64.
fn usage_error(e: &clap::Error) -> ! {
    let args: Vec<String> = std::env::args().collect();
    logging::set_json(raw_option(&args, "log-format").as_deref() == Some("json"));
    let text = e.render().to_string();
    let format = match raw_option(&args, "output").as_deref() {
        Some("json") => Some(OutputFormat::Json),
        Some("yaml") => Some(OutputFormat::Yaml),
        _ => None,
    };
    if let Some(f) = format {
        let command: Vec<&str> = args
            .iter()
            .skip(1)
            .take_while(|a| !a.starts_with('-') && !a.contains('.'))
            .map(String::as_str)
            .take(2)
            .collect();
        report::set_context(&command.join(" "), f);
        let first = text.lines().next().unwrap_or_default();
        let err = report::ErrorDoc {
            kind: "usage",
            message: first.trim_start_matches("error: ").to_string(),
            causes: Vec::new(),
            errors: None,
        };
        let _ = report::emit_error(f, None, &err, serde_json::Value::Null);
    }
    logging::say(logging::Say::Error, text.trim_end(), &[]);
    std::process::exit(EXIT_USAGE);
}

fn main() {
    // `COMPLETE=bash weft ...`: the shell asks for completions (names from the intent too).
    clap_complete::CompleteEnv::with_factory(weft_controller::completion::command).complete();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            // --help and --version are not errors.
            let _ = e.print();
            std::process::exit(0);
        }
        Err(e) => usage_error(&e),
    };
    let default = match cli.command {
        Command::Run(_) => LogLevel::Info,
        _ => LogLevel::Warn,
    };
    logging::init(cli.log.log_level, cli.log.log_format, default);
    let (name, format) = cli.command.context();
    report::set_context(&name, format);
    match cli.command.run() {
        Ok(outcome) => std::process::exit(outcome.exit_code()),
        Err(e) => {
            if let Some(f) = report::structured().filter(|_| !report::emitted()) {
                let _ = report::emit_error(
                    f,
                    None,
                    &report::ErrorDoc::failure(&e),
                    serde_json::Value::Null,
                );
            }
            // One line, each cause once; never a backtrace.
            weft_controller::errln!("weft: {}", report::one_line(&e));
            std::process::exit(1);
        }
    }
}
