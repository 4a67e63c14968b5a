//! Colour for the words an operator must not miss (FAIL, down, unknown) on a terminal only:
//! never in a pipe or a file, never with `NO_COLOR` set (no-color.org). Text is padded before it
//! is painted, so columns line up either way.

use std::io::IsTerminal;
use std::sync::OnceLock;

/// Whether standard output gets colour.
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            && std::env::var("TERM").map_or(true, |t| t != "dumb")
    })
}

fn paint(code: &str, s: &str) -> String {
    if enabled() {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

/// A failure, a link down, a switch not read.
pub fn bad(s: &str) -> String {
    paint("1;31", s)
}

/// Unknown: neither good nor bad, and not to be read as either.
pub fn unknown(s: &str) -> String {
    paint("33", s)
}

/// A word for a state: red for what is wrong, yellow for unknown, as it is otherwise.
pub fn state(s: &str) -> String {
    let padded_word = s.trim();
    match padded_word {
        "FAIL" | "down" | "DOWN" | "UNREACHABLE" | "suppressed" | "stormed" | "admin-down"
        | "missing" | "differs" => bad(s),
        "unknown" | "?" | "no data" | "stale" | "unreachable" => unknown(s),
        w if w.starts_with("FAILED")
            || w.starts_with("UNREACHABLE")
            || w.starts_with("NOT READY") =>
        {
            bad(s)
        }
        _ => s.to_string(),
    }
}
