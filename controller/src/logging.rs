//! Logs on standard error: one line per event (errors on one line too), ANSI colours only on a
//! terminal, text or JSON. The level is `--log-level`, else the `WEFT_LOG` filter, else the
//! command's default (info for `weft run`, which must say what it does; warn for the others).
//!
//! What a command tells the operator on standard error (progress, "plan written to", a fatal
//! error, an intent's diagnostics) goes through [`say`], so `--log-format json` makes every
//! line of standard error one JSON object, in the shape of the tracing events beside them
//! (`timestamp`, `level`, `message`, then fields).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);

/// Whether standard error carries JSON lines.
pub fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// Makes [`say`] write JSON lines (set by [`init`]; before it, by `main` for a usage error).
pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

/// The level of a line told to the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Say {
    Info,
    Warn,
    Error,
}

impl Say {
    fn as_str(self) -> &'static str {
        match self {
            Say::Info => "INFO",
            Say::Warn => "WARN",
            Say::Error => "ERROR",
        }
    }
}

/// `2025-01-31T12:00:00.123456Z` (what tracing's JSON lines carry).
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// One line for the operator on standard error: as it is, or with `--log-format json` one
/// JSON object with `fields` beside the message. A multi-line text stays one object.
pub fn say(level: Say, text: &str, fields: &[(&str, serde_json::Value)]) {
    let mut err = std::io::stderr().lock();
    if !json() {
        let _ = writeln!(err, "{text}");
        return;
    }
    let mut m = serde_json::Map::new();
    m.insert(
        "timestamp".into(),
        rfc3339(std::time::SystemTime::now()).into(),
    );
    m.insert("level".into(), level.as_str().into());
    m.insert("message".into(), text.into());
    for (k, v) in fields {
        m.insert((*k).to_string(), v.clone());
    }
    let _ = writeln!(err, "{}", serde_json::Value::Object(m));
}

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
    set_json(format == LogFormat::Json);
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
    fn timestamps_are_rfc3339_in_utc() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_micros(951_782_400_000_001);
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00.000001Z");
        assert_eq!(
            rfc3339(std::time::UNIX_EPOCH),
            "1970-01-01T00:00:00.000000Z"
        );
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(4_107_542_399);
        assert_eq!(rfc3339(t), "2100-02-28T23:59:59.000000Z");
    }

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
