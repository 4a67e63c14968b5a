//! Logs on standard error: one line per event (errors on one line too), ANSI colours only on a
//! terminal, text or JSON. The level is `--log-level`, else the `WEFT_LOG` filter, else the
//! command's default (info for `weft run`, which must say what it does; warn for the others).

use std::io::IsTerminal;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The filter in force: `--log-level` wins over `WEFT_LOG`, which wins over `default`.
pub fn filter(level: Option<LogLevel>, env: Option<&str>, default: LogLevel) -> String {
    match (level, env.map(str::trim).filter(|e| !e.is_empty())) {
        (Some(l), _) => l.as_str().to_string(),
        (None, Some(e)) => e.to_string(),
        (None, None) => default.as_str().to_string(),
    }
}

/// Installs the subscriber. A `WEFT_LOG` that does not parse falls back to `default` and says so.
pub fn init(level: Option<LogLevel>, format: LogFormat, default: LogLevel) {
    let env = std::env::var("WEFT_LOG").ok();
    let wanted = filter(level, env.as_deref(), default);
    let (f, bad) = match tracing_subscriber::EnvFilter::try_new(&wanted) {
        Ok(f) => (f, None),
        Err(e) => (
            tracing_subscriber::EnvFilter::new(default.as_str()),
            Some(format!(
                "WEFT_LOG={wanted:?} is not a log filter ({e}); using {default:?}"
            )),
        ),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(f)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
    if let Some(b) = bad {
        tracing::warn!("{b}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_over_the_environment_which_wins_over_the_default() {
        assert_eq!(
            filter(Some(LogLevel::Debug), Some("error"), LogLevel::Info),
            "debug"
        );
        assert_eq!(
            filter(None, Some("weft_reconcile=trace"), LogLevel::Info),
            "weft_reconcile=trace"
        );
        assert_eq!(filter(None, Some("  "), LogLevel::Warn), "warn");
        assert_eq!(filter(None, None, LogLevel::Info), "info");
    }
}
