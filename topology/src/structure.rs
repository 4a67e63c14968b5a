//! Structural check of the marked YAML tree against the intent's JSON Schema (generated from the
//! model), so unknown fields, wrong types and malformed units are all reported in one pass, each
//! with its position, before serde sees the text.

use serde_json::Value;

use crate::diag::{Sink, suggestion};
use crate::formats::check_format;
use crate::yaml::{Node, Pos, Scalar};

pub struct Checker<'a> {
    root: &'a Value,
    file: &'a str,
}

impl<'a> Checker<'a> {
    pub fn new(schema: &'a Value, file: &'a str) -> Self {
        Checker { root: schema, file }
    }

    pub fn check(&self, node: &Node, sink: &mut Sink) {
        self.check_at(node, self.root, "", sink);
    }

    fn resolve(&self, mut s: &'a Value) -> &'a Value {
        // Bounded: a schema generated from Rust types has no reference cycles without an object
        // in between, but never trust that blindly.
        for _ in 0..16 {
            match s.get("$ref").and_then(Value::as_str) {
                Some(r) => {
                    let name = r.rsplit('/').next().unwrap_or_default();
                    match self.root.get("$defs").and_then(|d| d.get(name)) {
                        Some(t) => s = t,
                        None => return s,
                    }
                }
                None => return s,
            }
        }
        s
    }

    fn errors_for(&self, node: &Node, schema: &'a Value, path: &str) -> Sink {
        let mut sink = Sink::default();
        self.check_at(node, schema, path, &mut sink);
        sink
    }

    fn check_at(&self, node: &Node, schema: &'a Value, path: &str, sink: &mut Sink) {
        let schema = self.resolve(schema);
        let item = if path.is_empty() { "intent" } else { path };

        let branches = schema
            .get("oneOf")
            .or_else(|| schema.get("anyOf"))
            .and_then(Value::as_array);
        if let Some(branches) = branches {
            self.check_branches(node, schema, branches, path, sink);
            return;
        }

        if let Some(c) = schema.get("const") {
            if !scalar_equals(node, c) {
                sink.push(self.file, node.pos(), item, format!("expected {c}"));
            }
            return;
        }

        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            if !values.iter().any(|v| scalar_equals(node, v)) {
                let names: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
                self.report_choice(node, &names, item, sink);
            }
            return;
        }

        if !type_matches(node, schema) {
            let msg = format!("expected {}, found {}", describe(schema), found(node));
            let wants_text = types_of(schema) == ["string"] && schema.get("format").is_none();
            match node {
                // `name: 5` or `name: yes` read as a number or a boolean in YAML.
                Node::Scalar(
                    Scalar::Int(_) | Scalar::BigInt(_) | Scalar::Float(_) | Scalar::Bool(_),
                    _,
                ) if wants_text => sink.push_help(
                    self.file,
                    node.pos(),
                    item,
                    msg,
                    "put it in quotes to make it text",
                ),
                _ => sink.push(self.file, node.pos(), item, msg),
            }
            return;
        }

        match node {
            Node::Map(entries, _) => self.check_map(node, entries, schema, path, sink),
            Node::Seq(items, _) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, v) in items.iter().enumerate() {
                        self.check_at(v, item_schema, &format!("{path}[{i}]"), sink);
                    }
                }
            }
            Node::Scalar(..) => self.check_scalar(node, schema, item, sink),
        }
    }

    /// A mapping's keys against the schema's properties (unknown ones named with the nearest
    /// known one), its values against theirs, and the required keys.
    fn check_map(
        &self,
        node: &Node,
        entries: &[(String, Pos, Node)],
        schema: &'a Value,
        path: &str,
        sink: &mut Sink,
    ) {
        let item = if path.is_empty() { "intent" } else { path };
        let props = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        for (key, kpos, value) in entries {
            let child = join(path, key);
            match props.and_then(|p| p.get(key)) {
                Some(s) => self.check_at(value, s, &child, sink),
                None => match additional {
                    Some(Value::Bool(false)) => {
                        let known: Vec<&str> = props
                            .map(|p| p.keys().map(String::as_str).collect())
                            .unwrap_or_default();
                        let msg = format!("unknown field `{key}`");
                        match suggestion(key, known.iter().copied()) {
                            Some(s) => sink.push_help(
                                self.file,
                                *kpos,
                                &child,
                                msg,
                                format!("did you mean {s}?"),
                            ),
                            None => sink.push_help(
                                self.file,
                                *kpos,
                                &child,
                                msg,
                                format!("known fields here: {}", known.join(", ")),
                            ),
                        }
                    }
                    Some(s @ Value::Object(_)) => self.check_at(value, s, &child, sink),
                    _ => {}
                },
            }
        }
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for r in req.iter().filter_map(Value::as_str) {
                if node.get(r).is_none() {
                    sink.push(self.file, node.pos(), item, format!("missing field `{r}`"));
                }
            }
        }
    }

    /// A scalar's format (units, addresses) and integer bounds.
    fn check_scalar(&self, node: &Node, schema: &'a Value, item: &str, sink: &mut Sink) {
        match node {
            Node::Scalar(Scalar::Str(s), pos) => {
                if let Some(f) = schema.get("format").and_then(Value::as_str)
                    && let Some(expected) = check_format(f, s)
                {
                    sink.push(self.file, *pos, item, format!("{s:?} is not {expected}"));
                }
            }
            Node::Scalar(Scalar::Int(i), pos) => {
                let (min, max) = int_bounds(schema);
                if min.is_some_and(|m| *i < m) {
                    let m = min.unwrap_or_default();
                    sink.push(
                        self.file,
                        *pos,
                        item,
                        format!("{i} is too small: the least is {m}"),
                    );
                } else if max.is_some_and(|m| *i > m) {
                    let m = max.unwrap_or_default();
                    sink.push(
                        self.file,
                        *pos,
                        item,
                        format!("{i} is too large: the most is {m}"),
                    );
                }
            }
            Node::Scalar(Scalar::BigInt(b), pos) => {
                let (_, max) = int_bounds(schema);
                let m = max.unwrap_or_default();
                let msg = if b.starts_with('-') {
                    format!("{b} is too small for any setting")
                } else {
                    format!("{b} is too large: the most is {m}")
                };
                sink.push(self.file, *pos, item, msg);
            }
            _ => {}
        }
    }

    fn check_branches(
        &self,
        node: &Node,
        schema: &'a Value,
        branches: &'a [Value],
        path: &str,
        sink: &mut Sink,
    ) {
        let item = if path.is_empty() { "intent" } else { path };
        let resolved: Vec<&Value> = branches.iter().map(|b| self.resolve(b)).collect();

        // Internally tagged enums (generators): pick the branch by its `kind`.
        let tags: Vec<(&str, &Value)> = resolved
            .iter()
            .filter_map(|b| {
                let k = b.get("properties")?.get("kind")?;
                let k = self.resolve(k);
                let tag = k
                    .get("const")
                    .and_then(Value::as_str)
                    .or_else(|| k.get("enum")?.as_array()?.first()?.as_str())?;
                Some((tag, *b))
            })
            .collect();
        if !tags.is_empty() && matches!(node, Node::Map(..)) {
            let names: Vec<&str> = tags.iter().map(|t| t.0).collect();
            match node.get("kind") {
                Some(Node::Scalar(Scalar::Str(k), kpos)) => match tags.iter().find(|t| t.0 == k) {
                    Some((_, b)) => self.check_at(node, b, path, sink),
                    None => self.report_unknown(k, *kpos, &names, &join(path, "kind"), sink),
                },
                _ => sink.push_help(
                    self.file,
                    node.pos(),
                    item,
                    "missing field `kind`",
                    format!("one of: {}", names.join(", ")),
                ),
            }
            return;
        }

        let mut attempts: Vec<Sink> = Vec::new();
        for b in &resolved {
            let s = self.errors_for(node, b, path);
            if s.is_empty() {
                return;
            }
            attempts.push(s);
        }

        // Enums of documented unit variants come out as a `oneOf` of string constants.
        let consts: Vec<&str> = resolved
            .iter()
            .filter_map(|b| b.get("const").and_then(Value::as_str))
            .chain(resolved.iter().filter_map(|b| {
                b.get("enum")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str))
                    .into_iter()
                    .flatten()
                    .next()
            }))
            .collect();
        if consts.len() == resolved.len() {
            let all: Vec<&str> = resolved
                .iter()
                .flat_map(|b| {
                    b.get("const").and_then(Value::as_str).into_iter().chain(
                        b.get("enum")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str),
                    )
                })
                .collect();
            self.report_choice(node, &all, item, sink);
            return;
        }

        // `Option<T>`: the null branch never explains anything; report T's problems.
        let shaped: Vec<usize> = resolved
            .iter()
            .enumerate()
            .filter(|(_, b)| type_matches(node, b) && !is_null_schema(b))
            .map(|(i, _)| i)
            .collect();
        if shaped.len() == 1
            && let Some(s) = attempts.get_mut(shaped[0])
        {
            sink.items.append(&mut s.items);
            return;
        }
        let expected: Vec<String> = resolved
            .iter()
            .filter(|b| !is_null_schema(b))
            .map(|b| describe(b))
            .collect();
        let _ = schema;
        sink.push(
            self.file,
            node.pos(),
            item,
            format!("expected {}, found {}", expected.join(" or "), found(node)),
        );
    }

    fn report_choice(&self, node: &Node, names: &[&str], item: &str, sink: &mut Sink) {
        match node {
            Node::Scalar(Scalar::Str(s), pos) => self.report_unknown(s, *pos, names, item, sink),
            other => sink.push(
                self.file,
                other.pos(),
                item,
                format!(
                    "expected one of {}, found {}",
                    names.join(", "),
                    found(other)
                ),
            ),
        }
    }

    fn report_unknown(
        &self,
        value: &str,
        pos: crate::yaml::Pos,
        names: &[&str],
        item: &str,
        sink: &mut Sink,
    ) {
        let msg = format!("unknown value {value:?}");
        match suggestion(value, names.iter().copied()) {
            Some(s) => sink.push_help(self.file, pos, item, msg, format!("did you mean {s}?")),
            None => sink.push_help(
                self.file,
                pos,
                item,
                msg,
                format!("one of: {}", names.join(", ")),
            ),
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn is_null_schema(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("null")
}

fn types_of(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn type_matches(node: &Node, schema: &Value) -> bool {
    let types = types_of(schema);
    if types.is_empty() {
        return true;
    }
    types.iter().any(|t| {
        matches!(
            (*t, node),
            ("object", Node::Map(..))
                | ("array", Node::Seq(..))
                | ("string", Node::Scalar(Scalar::Str(_), _))
                | (
                    "integer",
                    Node::Scalar(Scalar::Int(_) | Scalar::BigInt(_), _)
                )
                | (
                    "number",
                    Node::Scalar(Scalar::Int(_) | Scalar::BigInt(_) | Scalar::Float(_), _)
                )
                | ("boolean", Node::Scalar(Scalar::Bool(_), _))
                | ("null", Node::Scalar(Scalar::Null, _))
        )
    })
}

fn describe(schema: &Value) -> String {
    // Unit types describe their notation; other formats (uint32, ...) are just numbers.
    let unit_format = schema
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| check_format(f, "").is_some());
    if unit_format && let Some(d) = schema.get("description").and_then(Value::as_str) {
        return d.to_string();
    }
    let types = types_of(schema);
    let words: Vec<&str> = types
        .iter()
        .filter(|t| **t != "null")
        .map(|t| match *t {
            "object" => "a mapping",
            "array" => "a list",
            "string" => "a string",
            "integer" => "an integer",
            "number" => "a number",
            "boolean" => "true or false",
            _ => "a value",
        })
        .collect();
    if words.is_empty() {
        "a value".into()
    } else {
        words.join(" or ")
    }
}

fn found(node: &Node) -> String {
    match node {
        Node::Scalar(Scalar::Str(s), _) => format!("string {s:?}"),
        Node::Scalar(Scalar::Int(i), _) => format!("integer {i}"),
        Node::Scalar(Scalar::BigInt(i), _) => format!("integer {i}"),
        Node::Scalar(Scalar::Float(f), _) => format!("number {f}"),
        Node::Scalar(Scalar::Bool(b), _) => format!("{b}"),
        Node::Scalar(Scalar::Null, _) => "nothing (null)".into(),
        other => other.type_name().into(),
    }
}

fn scalar_equals(node: &Node, v: &Value) -> bool {
    match (node, v) {
        (Node::Scalar(Scalar::Str(s), _), Value::String(t)) => s == t,
        (Node::Scalar(Scalar::Bool(a), _), Value::Bool(b)) => a == b,
        (Node::Scalar(Scalar::Int(i), _), Value::Number(n)) => n.as_f64() == Some(*i as f64),
        (Node::Scalar(Scalar::Null, _), Value::Null) => true,
        _ => false,
    }
}

/// The integer range a schema allows: its `minimum`/`maximum`, else what its `format` (the Rust
/// type it was generated from) can hold, so that serde never meets a number it cannot store.
fn int_bounds(schema: &Value) -> (Option<i128>, Option<i128>) {
    let by_format: (Option<i128>, Option<i128>) = match schema.get("format").and_then(Value::as_str)
    {
        Some("uint8") => (Some(0), Some(u8::MAX.into())),
        Some("uint16") => (Some(0), Some(u16::MAX.into())),
        Some("uint32") => (Some(0), Some(u32::MAX.into())),
        Some("uint64" | "uint" | "size") => (Some(0), Some(u64::MAX.into())),
        Some("int8") => (Some(i8::MIN.into()), Some(i8::MAX.into())),
        Some("int16") => (Some(i16::MIN.into()), Some(i16::MAX.into())),
        Some("int32") => (Some(i32::MIN.into()), Some(i32::MAX.into())),
        _ => (Some(i64::MIN.into()), Some(u64::MAX.into())),
    };
    let num = |k: &str| {
        schema.get(k).and_then(|v| {
            v.as_i64()
                .map(i128::from)
                .or_else(|| v.as_u64().map(i128::from))
                .or_else(|| v.as_f64().map(|f| f as i128))
        })
    };
    (
        num("minimum").or(by_format.0),
        num("maximum").or(by_format.1),
    )
}

/// A serde error rephrased for operators: no Rust type names, no "invalid type", no position
/// (the diagnostic has it).
pub fn operator_message(raw: &str) -> String {
    let mut m = raw.to_string();
    if let Some(i) = m.find(" at line ") {
        m.truncate(i);
    }
    for ty in [
        " as u128", " as i128", " as u64", " as i64", " as u32", " as f64",
    ] {
        m = m.replace(ty, "");
    }
    if m.contains("repetition limit exceeded") {
        return "YAML aliases repeat values here more often than Weft expands".into();
    }
    if m.contains("recursion limit exceeded") {
        return "mappings and lists nest too deeply here".into();
    }
    if m.contains("did not match any variant of untagged enum") {
        return "this value has none of the accepted forms".into();
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = m.strip_prefix(prefix)
            && let Some((found, expected)) = rest.split_once(", expected ")
        {
            let expected = expected.replace("any value", "a value");
            return format!("expected {expected}, found {found}");
        }
    }
    if let Some(rest) = m.strip_prefix("unknown variant ") {
        return format!("unknown value {rest}");
    }
    m
}
