//! Diagnostics: one per problem, each naming file, line, column and the offending item.

use std::fmt;

use serde::Serialize;

use crate::yaml::Pos;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// The item at fault, as a path into the intent (`switches[2].ports[0]`) or a name
    /// (`switch leaf1`).
    pub item: String,
    pub message: String,
    /// How to fix it, where that is obvious (`null` in JSON otherwise).
    pub help: Option<String>,
}

/// At most this many diagnostics are reported for one intent; a last one says how many more
/// there were. Millions of errors help nobody and would cost gigabytes.
pub const MAX_REPORTED: usize = 200;

/// The item of the diagnostic that stands for the ones not reported.
pub const OMITTED_ITEM: &str = "more errors";

/// How many diagnostics a list stands for: those in it, plus those its last one says were left
/// out.
pub fn total_count(diags: &[Diagnostic]) -> usize {
    match diags.last() {
        Some(d) if d.item == OMITTED_ITEM => {
            let more: usize = d
                .message
                .split_whitespace()
                .find_map(|w| w.replace(',', "").parse().ok())
                .unwrap_or(0);
            diags.len() - 1 + more
        }
        _ => diags.len(),
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: error: {}: {}",
            self.file, self.line, self.column, self.item, self.message
        )?;
        if let Some(h) = &self.help {
            write!(f, "\n    help: {h}")?;
        }
        Ok(())
    }
}

/// Collects diagnostics with positions resolved through a [`crate::yaml::PathIndex`]. Keeps the
/// [`MAX_REPORTED`] first in the file and counts the rest, so memory stays bounded however many
/// problems an input has.
#[derive(Debug, Default)]
pub struct Sink {
    pub items: Vec<Diagnostic>,
    /// Distinct diagnostics dropped past the limit.
    dropped: usize,
}

impl Sink {
    pub fn push(
        &mut self,
        file: &str,
        pos: Pos,
        item: impl Into<String>,
        message: impl Into<String>,
    ) {
        if self.items.len() >= 4 * MAX_REPORTED {
            self.compact();
        }
        self.items.push(Diagnostic {
            file: file.to_string(),
            line: pos.line,
            column: pos.col,
            item: item.into(),
            message: message.into(),
            help: None,
        });
    }

    pub fn push_help(
        &mut self,
        file: &str,
        pos: Pos,
        item: impl Into<String>,
        message: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.push(file, pos, item, message);
        if let Some(last) = self.items.last_mut() {
            last.help = Some(help.into());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of diagnostics so far (kept or dropped).
    pub fn len(&self) -> usize {
        self.items.len() + self.dropped
    }

    fn sort(&mut self) {
        // Messages break ties, so the report does not depend on hash order.
        self.items.sort_by(|a, b| {
            (a.file.as_str(), a.line, a.column, &a.item, &a.message).cmp(&(
                b.file.as_str(),
                b.line,
                b.column,
                &b.item,
                &b.message,
            ))
        });
        self.items.dedup();
    }

    fn compact(&mut self) {
        self.sort();
        if self.items.len() > MAX_REPORTED {
            self.dropped += self.items.len() - MAX_REPORTED;
            self.items.truncate(MAX_REPORTED);
        }
    }

    /// Sorted by position so the report reads top to bottom; past [`MAX_REPORTED`], one last
    /// diagnostic says how many more there are.
    pub fn finish(mut self) -> Vec<Diagnostic> {
        self.compact();
        if self.dropped > 0
            && let Some(last) = self.items.last()
        {
            let d = Diagnostic {
                file: last.file.clone(),
                line: last.line,
                column: last.column,
                item: OMITTED_ITEM.into(),
                message: format!(
                    "{} more errors not shown (only the first {MAX_REPORTED} are reported)",
                    self.dropped
                ),
                help: Some("fix these and run again".into()),
            };
            self.items.push(d);
        }
        self.items
    }
}

/// The closest known name to `wrong`, if it is close enough to be a plausible typo.
pub fn suggest<'a>(wrong: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wrong_l = wrong.to_ascii_lowercase();
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(&wrong_l, &k.to_ascii_lowercase()), k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// The known names nearest to `wrong`, every one as near as the nearest (`ip` is as near to
/// `ipv4` as to `ipv6`: naming one would be a coin toss), as a help text's words: `` `ipv4` `` or
/// `` `ipv4` or `ipv6` ``.
pub fn suggestion<'a>(wrong: &str, known: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let wrong_l = wrong.to_ascii_lowercase();
    let scored: Vec<(f64, &str)> = known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(&wrong_l, &k.to_ascii_lowercase()), k))
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    let best = scored.iter().map(|s| s.0).fold(f64::NAN, f64::max);
    let mut names: Vec<&str> = scored
        .iter()
        .filter(|(s, _)| (best - s).abs() < 1e-9)
        .map(|(_, k)| *k)
        .collect();
    names.sort_unstable();
    names.dedup();
    match names.as_slice() {
        [] => None,
        [one] => Some(format!("`{one}`")),
        [init @ .., last] => Some(format!(
            "{} or `{last}`",
            init.iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_near_as_each_other_are_all_suggested() {
        let host = ["name", "ipv4", "ipv6", "mac", "attach"];
        assert_eq!(suggestion("ip", host).as_deref(), Some("`ipv4` or `ipv6`"));
        assert_eq!(
            suggestion("ipv5", ["ipv4", "name"]).as_deref(),
            Some("`ipv4`")
        );
        assert_eq!(suggestion("frobnicate", host), None);
    }

    #[test]
    fn suggestion_finds_typos_and_ignores_unrelated_names() {
        let known = ["cable_length", "speed", "mtu"];
        assert_eq!(suggest("cable_lenght", known), Some("cable_length"));
        assert_eq!(suggest("sped", known), Some("speed"));
        assert_eq!(suggest("frobnicate", known), None);
    }
}
