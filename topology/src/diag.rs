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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
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

/// Collects diagnostics with positions resolved through a [`crate::yaml::PathIndex`].
#[derive(Debug, Default)]
pub struct Sink {
    pub items: Vec<Diagnostic>,
}

impl Sink {
    pub fn push(
        &mut self,
        file: &str,
        pos: Pos,
        item: impl Into<String>,
        message: impl Into<String>,
    ) {
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

    /// Sorted by position so the report reads top to bottom.
    pub fn finish(mut self) -> Vec<Diagnostic> {
        self.items.sort_by(|a, b| {
            (a.file.as_str(), a.line, a.column).cmp(&(b.file.as_str(), b.line, b.column))
        });
        self.items.dedup();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestion_finds_typos_and_ignores_unrelated_names() {
        let known = ["cable_length", "speed", "mtu"];
        assert_eq!(suggest("cable_lenght", known), Some("cable_length"));
        assert_eq!(suggest("sped", known), Some("speed"));
        assert_eq!(suggest("frobnicate", known), None);
    }
}
