//! `weft`: the operator's command. Logic lives in the `weft_controller` library.

use clap::{Parser, Subcommand};
use weft_controller::cmd::{self, OutputFormat};

/// Weft: a control plane for RoCE fabrics of AI clusters.
///
/// Examples:
///   weft validate topology/examples/*.yaml
///   weft show topology/examples/leaf-spine-small.yaml
///   weft show topology/examples/fat-tree-k4.yaml --output json
#[derive(Parser)]
#[command(name = "weft", version, verbatim_doc_comment)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check intent files; every problem is reported with file:line:column.
    ///
    /// Exit status: 0 all valid, 2 some intent invalid, 1 other failure (unreadable file).
    ///
    ///   weft validate fabric.yaml
    ///   weft validate --output json a.yaml b.yaml
    #[command(verbatim_doc_comment)]
    Validate {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
    },
    /// Summarise a fabric: switches and hosts per role and tier, link speeds, oversubscription,
    /// bisection bandwidth and port use.
    ///
    ///   weft show fabric.yaml
    ///   weft show fabric.yaml --switches      (one line per switch)
    ///   weft show fabric.yaml --output json
    #[command(verbatim_doc_comment)]
    Show {
        #[arg(value_name = "FILE")]
        file: String,
        #[arg(long, value_enum, default_value = "text")]
        output: OutputFormat,
        /// List port use of every switch.
        #[arg(long)]
        switches: bool,
    },
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("WEFT_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate { files, output } => cmd::validate::run(&files, output),
        Command::Show {
            file,
            output,
            switches,
        } => cmd::show::run(&file, output, switches),
    };
    match result {
        Ok(outcome) => std::process::exit(outcome.exit_code()),
        Err(e) => {
            eprintln!("weft: {e:#}");
            std::process::exit(1);
        }
    }
}
