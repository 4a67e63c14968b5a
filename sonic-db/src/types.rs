//! The (key, op, field/values) tuple that SONiC passes between producers and consumers.

use std::fmt;

use crate::error::SonicDbError;

/// A field/value list, in the order it was written or read.
pub type FieldValues = Vec<(String, String)>;

/// swss-common's SET / DEL operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Set,
    Del,
}

impl Op {
    pub const fn as_str(self) -> &'static str {
        match self {
            Op::Set => "SET",
            Op::Del => "DEL",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// swss-common's `KeyOpFieldsValuesTuple`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyOpFieldValues {
    pub key: String,
    pub op: Op,
    pub fields: FieldValues,
}

impl KeyOpFieldValues {
    pub fn set<K, F, V>(key: K, fields: impl IntoIterator<Item = (F, V)>) -> Self
    where
        K: Into<String>,
        F: Into<String>,
        V: Into<String>,
    {
        KeyOpFieldValues {
            key: key.into(),
            op: Op::Set,
            fields: fields
                .into_iter()
                .map(|(f, v)| (f.into(), v.into()))
                .collect(),
        }
    }

    pub fn del(key: impl Into<String>) -> Self {
        KeyOpFieldValues {
            key: key.into(),
            op: Op::Del,
            fields: Vec::new(),
        }
    }

    /// The value of `field`, if present.
    pub fn field(&self, field: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.as_str())
    }
}

/// Table names end up inside Redis keys, channels and glob patterns: refuse the characters that would
/// make them ambiguous there.
pub(crate) fn check_table_name(name: &str, separator: char) -> Result<(), SonicDbError> {
    let bad = |reason: &str| {
        Err(SonicDbError::InvalidTableName {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.contains(separator) {
        return bad("contains the database's key separator");
    }
    if name
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '*' | '?' | '[' | ']' | '\\'))
    {
        return bad("contains whitespace, control or glob characters");
    }
    Ok(())
}

/// Escapes glob metacharacters for SCAN MATCH / PSUBSCRIBE patterns.
pub(crate) fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Turns an HGETALL-style flat list into pairs.
pub(crate) fn pairs(flat: Vec<String>) -> FieldValues {
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(f), Some(v)) = (it.next(), it.next()) {
        out.push((f, v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_with_separator_or_glob_characters_are_refused() {
        assert!(check_table_name("P4RT_TABLE", ':').is_ok());
        assert!(check_table_name("PORT_TABLE", '|').is_ok());
        assert!(check_table_name("", ':').is_err());
        assert!(check_table_name("A:B", ':').is_err());
        assert!(check_table_name("A|B", '|').is_err());
        assert!(check_table_name("A*", ':').is_err());
        assert!(check_table_name("A B", ':').is_err());
    }

    #[test]
    fn glob_escape_escapes_metacharacters_only() {
        assert_eq!(glob_escape("PORT|Eth*[0]"), "PORT|Eth\\*\\[0\\]");
    }
}
