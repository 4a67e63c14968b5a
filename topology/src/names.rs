//! The one rule every name an operator writes must follow (fabric, switch, host, traffic class).
//!
//! Names end up in many places that each have their own restrictions:
//!
//! | where | what breaks |
//! |---|---|
//! | SONiC keys (`PORT\|Ethernet0`, `P4RT_TABLE:…`) | `\|` and `:` are key separators |
//! | port references `SWITCH:PORT` | `:` |
//! | `ip netns` names `weft-<fabric>-<host>`, files under `/run/netns` | `/`, `.`, `..`, NUL, length > 255 |
//! | state directories `/run/weft/testbed/<fabric>/<switch>`, Redis sockets `<dir>/<switch>/redis.sock` | `/`, `.`, `..`, a socket path over 107 bytes |
//! | command lines (`ip`, `redis-server`, BMv2) | a leading `-` reads as an option; spaces, quotes, control characters |
//! | terminals and logs | control characters, invisible or look-alike Unicode |
//!
//! So a name is 1 to [`MAX_NAME_LEN`] characters from `A–Z a–z 0–9 _ . -`, starting with a letter
//! or digit. 63 (a DNS label) keeps every derived name inside its limit: the longest namespace,
//! `weft-` + 24 characters of the fabric + `-` + 63 of the host, is 93 bytes (limit 255), and the
//! default socket directory `/run/weft/<fabric>` is shortened (its first characters and a digest
//! of the whole name) when a long fabric name would take `<dir>/<switch>/redis.sock` past 107
//! bytes; only a `db_socket_dir` the operator wrote can still be too long, and is reported where
//! it is written. Linux interface
//! names (IFNAMSIZ, 15 characters) are never made from names: the testbed names them
//! `s<device id>p<port id>`, which device ids up to 2³²−1 and port ids up to 510 keep at 15.

use std::fmt;

/// The longest name, in bytes (names are ASCII, so also in characters).
pub const MAX_NAME_LEN: usize = 63;

/// Why a name breaks the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("a name cannot be empty")]
    Empty,
    #[error("the name is {0} characters long; names have at most {MAX_NAME_LEN}")]
    TooLong(usize),
    #[error("the name must start with a letter or digit, not {}", describe(*.0))]
    BadStart(char),
    #[error("the name contains {}; names use only letters, digits, `_`, `.` and `-`", describe(*.0))]
    BadChar(char),
}

/// A character as an operator can read it in a message: visible ones quoted, others by code.
fn describe(c: char) -> String {
    match c {
        ' ' => "a space".into(),
        '\t' => "a tab".into(),
        '\n' | '\r' => "a line break".into(),
        '\0' => "a NUL character".into(),
        c if c.is_ascii_graphic() => format!("`{c}`"),
        c if c.is_control() || c.is_whitespace() => {
            format!("the invisible character U+{:04X}", c as u32)
        }
        c => format!("`{c}` (U+{:04X})", c as u32),
    }
}

/// Checks `name` against the rule. Every crate that turns a name into a key, a path or a
/// command-line argument can call this again as a guard.
pub fn check_name(name: &str) -> Result<(), NameError> {
    let Some(first) = name.chars().next() else {
        return Err(NameError::Empty);
    };
    // Report the character before the length: a 300-character name with a `/` has a worse
    // problem than its length.
    if !first.is_ascii_alphanumeric() {
        return Err(NameError::BadStart(first));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(NameError::BadChar(c));
    }
    let n = name.chars().count();
    if n > MAX_NAME_LEN {
        return Err(NameError::TooLong(n));
    }
    Ok(())
}

/// Whether `name` follows the rule.
pub fn is_valid_name(name: &str) -> bool {
    check_name(name).is_ok()
}

/// A name quoted for a message, cut short and with control characters escaped, so that a
/// hostile name cannot flood or garble the report.
pub fn display_name(name: &str) -> impl fmt::Display + '_ {
    struct D<'a>(&'a str);
    impl fmt::Display for D<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            if is_valid_name(self.0) {
                return f.write_str(self.0);
            }
            let mut shown = String::new();
            let mut chars = self.0.chars();
            for c in chars.by_ref().take(40) {
                shown.extend(c.escape_debug());
            }
            let rest = chars.count();
            if rest > 0 {
                write!(f, "\"{shown}…\" ({} more characters)", rest)
            } else {
                write!(f, "\"{shown}\"")
            }
        }
    }
    D(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_names_pass() {
        for n in [
            "leaf1",
            "pod1-leaf2-h3",
            "srv1.nic2",
            "A_b-9",
            &"x".repeat(MAX_NAME_LEN),
        ] {
            assert_eq!(check_name(n), Ok(()), "{n}");
        }
    }

    #[test]
    fn names_unsafe_somewhere_they_are_used_are_refused() {
        assert_eq!(check_name(""), Err(NameError::Empty));
        assert_eq!(check_name("."), Err(NameError::BadStart('.')));
        assert_eq!(check_name(".."), Err(NameError::BadStart('.')));
        assert_eq!(check_name("-rf"), Err(NameError::BadStart('-')));
        assert_eq!(check_name("../../etc"), Err(NameError::BadStart('.')));
        assert_eq!(check_name("h1/../x"), Err(NameError::BadChar('/')));
        assert_eq!(check_name("leaf:1"), Err(NameError::BadChar(':')));
        assert_eq!(check_name("a|b"), Err(NameError::BadChar('|')));
        assert_eq!(check_name("a b"), Err(NameError::BadChar(' ')));
        assert_eq!(check_name("a\tb"), Err(NameError::BadChar('\t')));
        assert_eq!(check_name("a\nb"), Err(NameError::BadChar('\n')));
        assert_eq!(check_name("a\0b"), Err(NameError::BadChar('\0')));
        assert_eq!(check_name("h🚀"), Err(NameError::BadChar('🚀')));
        assert_eq!(check_name(&"x".repeat(300)), Err(NameError::TooLong(300)));
    }

    #[test]
    fn messages_about_bad_names_stay_short_and_printable() {
        let long = format!("a\n{}", "b".repeat(1000));
        let shown = display_name(&long).to_string();
        assert!(shown.len() < 80, "{shown}");
        assert!(!shown.contains('\n'));
        assert_eq!(display_name("leaf1").to_string(), "leaf1");
    }
}
