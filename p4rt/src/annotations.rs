//! The P4 source's declarations for its control plane, as p4c copies them into the P4Info
//! (`annotations` of a table preamble, a match field or an action parameter), parsed once when
//! the P4Info is loaded:
//!
//! | annotation | on | meaning |
//! |---|---|---|
//! | `@refers_to(table, field)` | match field, action parameter | the value names an entry of `table` by its key field `field` (sonic-pins' sai_p4 convention); may repeat |
//! | `@format(MAC_ADDRESS)`, `IPV4_ADDRESS`, `IPV6_ADDRESS`, `PORT_NAME` | match field, action parameter | how the value is written as text (SONiC P4RT_TABLE) |
//! | `@weft_owner("controller")`, `@weft_owner("plugin", "why")` | table | who writes the table's entries |
//!
//! p4c writes an annotation's tokens separated by spaces (`@refers_to(nexthop_table ,
//! nexthop_id)`, `@refers_to(builtin : : multicast_group_table , ...)`) and keeps string
//! literals quoted; [`args`] undoes both.

/// How a value is written as text, as declared by `@format(...)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeclaredFormat {
    /// `MAC_ADDRESS`: `02:57:46:00:00:01`.
    MacAddress,
    /// `IPV4_ADDRESS`: `10.0.0.2`.
    Ipv4Address,
    /// `IPV6_ADDRESS`: `fd00::2`.
    Ipv6Address,
    /// `PORT_NAME` (Weft's): a SONiC port name (`Ethernet8`), mapped to the P4Runtime port id
    /// through CONFIG_DB `PORT|EthernetN` `id`.
    PortName,
    /// Any other format name (sai_p4 also has `STRING` and `HEX_STRING`), kept for the caller
    /// to accept or refuse.
    Other(String),
}

/// A `@refers_to(table, field)`, resolved against the P4Info when it is loaded: the referenced
/// table and key field exist and have the width of the field or parameter that refers to them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefersTo {
    pub table_id: u32,
    /// Fully qualified name of the referenced table.
    pub table: String,
    pub field_id: u32,
    /// Name of the referenced key field.
    pub field: String,
}

/// Who writes a table's entries (`@weft_owner`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    /// The controller, through APPL_DB P4RT_TABLE.
    Controller,
    /// The switch's plugin itself (from CONFIG_DB or its own observations); `reason` is what a
    /// P4RT_TABLE writer of the table is told.
    Plugin { reason: String },
}

/// One argument of an annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// A string literal, unescaped.
    Str(String),
    /// Anything else, with the spaces p4c put between its tokens removed.
    Token(String),
}

impl Arg {
    fn as_str(&self) -> &str {
        match self {
            Arg::Str(s) | Arg::Token(s) => s,
        }
    }
}

/// Why an annotation the control plane reads is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationError {
    #[error("empty argument at the end of ({0})")]
    TrailingComma(String),
    #[error("unterminated string in ({0})")]
    UnterminatedString(String),
    #[error("a string inside an argument in ({0})")]
    StringInsideArgument(String),
    #[error("empty argument in ({0})")]
    EmptyArgument(String),
    #[error("unexpected {found:?} after an argument in ({body})")]
    AfterArgument { found: char, body: String },
    /// `@name` has `got` arguments; `takes` says what it takes.
    #[error("@{name} takes {takes}, got {got} argument(s)")]
    Arity {
        name: &'static str,
        takes: &'static str,
        got: usize,
    },
    #[error("@weft_owner takes (\"controller\") or (\"plugin\", \"why\"), got {0:?}")]
    Owner(Vec<Arg>),
    #[error("two @{0} annotations")]
    Twice(&'static str),
}

/// `(name, body)` of `@name` or `@name(body)`; `None` for text that is not an annotation.
pub fn split(text: &str) -> Option<(&str, Option<&str>)> {
    let rest = text.trim().strip_prefix('@')?;
    match rest.find('(') {
        None => Some((rest.trim(), None)),
        Some(open) => {
            let body = rest[open + 1..].strip_suffix(')')?;
            Some((rest[..open].trim(), Some(body)))
        }
    }
}

/// The comma-separated arguments of an annotation body. Commas inside string literals do not
/// separate; `\"` and `\\` in a literal are unescaped.
pub fn args(body: &str) -> Result<Vec<Arg>, AnnotationError> {
    let mut out = Vec::new();
    let mut chars = body.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            if !out.is_empty() {
                return Err(AnnotationError::TrailingComma(body.to_string()));
            }
            return Ok(out);
        }
        let arg = if chars.next_if_eq(&'"').is_some() {
            let mut s = String::new();
            loop {
                match chars.next() {
                    None => return Err(AnnotationError::UnterminatedString(body.to_string())),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some(c) => s.push(c),
                        None => return Err(AnnotationError::UnterminatedString(body.to_string())),
                    },
                    Some(c) => s.push(c),
                }
            }
            while chars.next_if(|c| c.is_whitespace()).is_some() {}
            Arg::Str(s)
        } else {
            let mut s = String::new();
            while let Some(c) = chars.next_if(|c| *c != ',') {
                if c == '"' {
                    return Err(AnnotationError::StringInsideArgument(body.to_string()));
                }
                if !c.is_whitespace() {
                    s.push(c);
                }
            }
            if s.is_empty() {
                return Err(AnnotationError::EmptyArgument(body.to_string()));
            }
            Arg::Token(s)
        };
        out.push(arg);
        match chars.next() {
            None => return Ok(out),
            Some(',') => {}
            Some(c) => {
                return Err(AnnotationError::AfterArgument {
                    found: c,
                    body: body.to_string(),
                });
            }
        }
    }
}

/// The arguments of every annotation called `name`.
fn all<'a>(
    annotations: &'a [String],
    name: &'a str,
) -> impl Iterator<Item = Result<Vec<Arg>, AnnotationError>> + 'a {
    annotations.iter().filter_map(move |a| match split(a) {
        Some((n, body)) if n == name => Some(args(body.unwrap_or(""))),
        _ => None,
    })
}

/// The `@refers_to(table, field)` annotations, unresolved (`table_id`/`field_id` 0; the P4Info
/// resolves them). References to `builtin::` objects (sai_p4's multicast groups) are not table
/// references and are left out.
pub fn refers_to(annotations: &[String]) -> Result<Vec<RefersTo>, AnnotationError> {
    let mut out = Vec::new();
    for a in all(annotations, "refers_to") {
        let a = a?;
        let [table, field] = a.as_slice() else {
            return Err(AnnotationError::Arity {
                name: "refers_to",
                takes: "(table, field)",
                got: a.len(),
            });
        };
        if table.as_str().starts_with("builtin::") {
            continue;
        }
        out.push(RefersTo {
            table_id: 0,
            table: table.as_str().to_string(),
            field_id: 0,
            field: field.as_str().to_string(),
        });
    }
    Ok(out)
}

/// The `@format(...)`, if any (at most one).
pub fn format(annotations: &[String]) -> Result<Option<DeclaredFormat>, AnnotationError> {
    let mut found = None;
    for a in all(annotations, "format") {
        let a = a?;
        let [f] = a.as_slice() else {
            return Err(AnnotationError::Arity {
                name: "format",
                takes: "one name",
                got: a.len(),
            });
        };
        let f = match f.as_str() {
            "MAC_ADDRESS" => DeclaredFormat::MacAddress,
            "IPV4_ADDRESS" => DeclaredFormat::Ipv4Address,
            "IPV6_ADDRESS" => DeclaredFormat::Ipv6Address,
            "PORT_NAME" => DeclaredFormat::PortName,
            other => DeclaredFormat::Other(other.to_string()),
        };
        if found.replace(f).is_some() {
            return Err(AnnotationError::Twice("format"));
        }
    }
    Ok(found)
}

/// The `@weft_owner(...)`, if any (at most one).
pub fn owner(annotations: &[String]) -> Result<Option<Owner>, AnnotationError> {
    let mut found = None;
    for a in all(annotations, "weft_owner") {
        let a = a?;
        let o = match a.as_slice() {
            [Arg::Str(c)] if c == "controller" => Owner::Controller,
            [Arg::Str(p), Arg::Str(reason)] if p == "plugin" && !reason.trim().is_empty() => {
                Owner::Plugin {
                    reason: reason.clone(),
                }
            }
            _ => return Err(AnnotationError::Owner(a)),
        };
        if found.replace(o).is_some() {
            return Err(AnnotationError::Twice("weft_owner"));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn refers_to_reads_p4c_spacing_and_skips_builtin_targets() {
        let r = refers_to(&v(&[
            "@refers_to(nexthop_table , nexthop_id)",
            "@format(PORT_NAME)",
            "@refers_to( builtin : : multicast_group_table , multicast_group_id )",
            "@refers_to(neighbor_table,router_interface_id)",
        ]))
        .expect("parses");
        let names: Vec<(&str, &str)> = r
            .iter()
            .map(|r| (r.table.as_str(), r.field.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("nexthop_table", "nexthop_id"),
                ("neighbor_table", "router_interface_id")
            ]
        );
    }

    #[test]
    fn owner_strings_keep_commas_and_quotes() {
        let o = owner(&v(&[
            r#"@weft_owner("plugin" , "from CONFIG_DB BUFFER_PG, BUFFER_PROFILE and \"x\"")"#,
        ]))
        .expect("parses");
        assert_eq!(
            o,
            Some(Owner::Plugin {
                reason: "from CONFIG_DB BUFFER_PG, BUFFER_PROFILE and \"x\"".into()
            })
        );
        assert_eq!(
            owner(&v(&[r#"@weft_owner("controller")"#])).expect("parses"),
            Some(Owner::Controller)
        );
        assert_eq!(owner(&v(&["@defaultonly"])).expect("none"), None);
    }

    #[test]
    fn malformed_declarations_are_errors_not_ignored() {
        assert!(
            owner(&v(&[r#"@weft_owner("plugin")"#])).is_err(),
            "no reason"
        );
        assert!(owner(&v(&[r#"@weft_owner("switch", "x")"#])).is_err());
        assert!(
            owner(&v(&[
                r#"@weft_owner("controller")"#,
                r#"@weft_owner("controller")"#
            ]))
            .is_err()
        );
        assert!(refers_to(&v(&["@refers_to(nexthop_table)"])).is_err());
        assert!(format(&v(&["@format(MAC_ADDRESS)", "@format(PORT_NAME)"])).is_err());
        assert!(args(r#""open"#).is_err());
        assert!(args("a, ").is_err());
    }

    #[test]
    fn errors_name_the_annotation_and_what_it_takes() {
        let e = |r: Result<Vec<RefersTo>, AnnotationError>| r.expect_err("malformed").to_string();
        assert_eq!(
            e(refers_to(&v(&["@refers_to(nexthop_table)"]))),
            "@refers_to takes (table, field), got 1 argument(s)"
        );
        assert_eq!(
            format(&v(&["@format(A, B)"])).expect_err("two").to_string(),
            "@format takes one name, got 2 argument(s)"
        );
        assert_eq!(
            owner(&v(&[r#"@weft_owner("switch")"#]))
                .expect_err("bad")
                .to_string(),
            r#"@weft_owner takes ("controller") or ("plugin", "why"), got [Str("switch")]"#
        );
        assert_eq!(
            args(r#"a "b""#).expect_err("quote").to_string(),
            r#"a string inside an argument in (a "b")"#
        );
        assert_eq!(
            args(r#""a" b"#).expect_err("after").to_string(),
            r#"unexpected 'b' after an argument in ("a" b)"#
        );
    }

    #[test]
    fn format_names_map_to_declared_formats() {
        assert_eq!(
            format(&v(&["@format(MAC_ADDRESS)"])).expect("ok"),
            Some(DeclaredFormat::MacAddress)
        );
        assert_eq!(
            format(&v(&["@format(HEX_STRING)"])).expect("ok"),
            Some(DeclaredFormat::Other("HEX_STRING".into()))
        );
        assert_eq!(format(&v(&[])).expect("ok"), None);
    }
}
