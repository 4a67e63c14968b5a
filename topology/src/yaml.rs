//! A YAML tree that remembers where every node came from.
//!
//! serde deserialisation stops at the first problem and forgets positions; operators want every
//! problem at once, each with a line and column. So the text is parsed twice: once here into a
//! marked tree (for the structural check and for locating items named by semantic checks), and
//! once by serde into the typed model.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Map(Vec<(String, Pos, Node)>, Pos),
    Seq(Vec<Node>, Pos),
    Scalar(Scalar, Pos),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Null,
    Bool(bool),
    Int(i128),
    /// An integer too large for any field (beyond `i128`), kept as written.
    BigInt(String),
    Float(f64),
    Str(String),
}

impl Scalar {
    pub fn type_name(&self) -> &'static str {
        match self {
            Scalar::Null => "null",
            Scalar::Bool(_) => "boolean",
            Scalar::Int(_) | Scalar::BigInt(_) => "integer",
            Scalar::Float(_) => "number",
            Scalar::Str(_) => "string",
        }
    }
}

impl Node {
    pub fn pos(&self) -> Pos {
        match self {
            Node::Map(_, p) | Node::Seq(_, p) | Node::Scalar(_, p) => *p,
        }
    }
    pub fn type_name(&self) -> &'static str {
        match self {
            Node::Map(..) => "mapping",
            Node::Seq(..) => "list",
            Node::Scalar(s, _) => s.type_name(),
        }
    }
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries, _) => entries.iter().find(|(k, _, _)| k == key).map(|e| &e.2),
            _ => None,
        }
    }
}

/// A syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub pos: Pos,
    pub message: String,
    /// The text is well formed but would build more than [`ParseLimits`] allow.
    pub limit: bool,
}

/// Resolves a plain scalar the way YAML 1.2's core schema does (which is also what the serde
/// parser does for the values this model uses).
fn resolve_plain(v: &str) -> Scalar {
    match v {
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        "true" | "True" | "TRUE" => return Scalar::Bool(true),
        "false" | "False" | "FALSE" => return Scalar::Bool(false),
        _ => {}
    }
    if let Ok(i) = v.parse::<i128>() {
        return Scalar::Int(i);
    }
    let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
    if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
        return Scalar::BigInt(v.to_string());
    }
    if let Some(hex) = v.strip_prefix("0x")
        && let Ok(i) = i128::from_str_radix(hex, 16)
    {
        return Scalar::Int(i);
    }
    let looks_numeric = v
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && v.chars().any(|c| c.is_ascii_digit());
    if looks_numeric && let Ok(f) = v.parse::<f64>() {
        return Scalar::Float(f);
    }
    Scalar::Str(v.to_string())
}

enum Frame {
    Map {
        pos: Pos,
        anchor: usize,
        /// Node count when the mapping started, to size it for aliases that repeat it.
        start: usize,
        entries: Vec<(String, Pos, Node)>,
        pending_key: Option<(String, Pos)>,
        /// Keys seen so far, to report a duplicate at its own line.
        keys: HashMap<String, Pos>,
    },
    Seq {
        pos: Pos,
        anchor: usize,
        start: usize,
        items: Vec<Node>,
    },
}

/// A key written twice in one mapping: `pos` is the second, `first` the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    pub key: String,
    /// Item path of the duplicate, e.g. `routing.classes.roce`.
    pub path: String,
    pub pos: Pos,
    pub first: Pos,
}

/// Bounds on what one intent may make the parser build, so that no input can exhaust memory or
/// the stack: an alias-expansion bomb of a few hundred bytes, or nesting thousands deep.
#[derive(Debug, Clone, Copy)]
pub struct ParseLimits {
    /// Nodes in the tree, counting every node an alias repeats.
    pub max_nodes: usize,
    /// Nesting of mappings and lists.
    pub max_depth: usize,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            // An explicit k=64 fat-tree (every port, host and link written out) is about 2.5 M
            // nodes; the tree then takes about 100 bytes a node.
            max_nodes: 5_000_000,
            // Intents nest about 6 deep.
            max_depth: 64,
        }
    }
}

struct Builder {
    stack: Vec<Frame>,
    /// Anchored nodes with the number of nodes each stands for.
    anchors: HashMap<usize, (Node, usize)>,
    root: Option<Node>,
    error: Option<SyntaxError>,
    duplicates: Vec<DuplicateKey>,
    documents: usize,
    nodes: usize,
    limits: ParseLimits,
}

fn pos_of(m: &Marker) -> Pos {
    Pos {
        line: m.line(),
        col: m.col() + 1,
    }
}

fn key_text(s: Scalar) -> String {
    match s {
        Scalar::Str(s) => s,
        Scalar::Int(i) => i.to_string(),
        Scalar::BigInt(s) => s,
        Scalar::Float(f) => f.to_string(),
        Scalar::Bool(b) => b.to_string(),
        Scalar::Null => "null".to_string(),
    }
}

impl Builder {
    fn new(limits: ParseLimits) -> Self {
        Builder {
            stack: Vec::new(),
            anchors: HashMap::new(),
            root: None,
            error: None,
            duplicates: Vec::new(),
            documents: 0,
            nodes: 0,
            limits,
        }
    }

    fn fail(&mut self, pos: Pos, message: String, limit: bool) {
        if self.error.is_none() {
            self.error = Some(SyntaxError {
                pos,
                message,
                limit,
            });
        }
    }

    /// Counts `n` more nodes; false (and an error) once the tree would grow past the limit.
    fn count(&mut self, n: usize, pos: Pos, alias: bool) -> bool {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > self.limits.max_nodes {
            let max = self.limits.max_nodes;
            let msg = if alias {
                format!(
                    "YAML aliases here expand the intent past {} values (an alias-expansion bomb?); write the repeated items out, or repeat fewer",
                    crate::units::thousands(max as u64)
                )
            } else {
                format!(
                    "the intent has more than {} YAML values, more than Weft accepts",
                    crate::units::thousands(max as u64)
                )
            };
            self.fail(pos, msg, true);
            return false;
        }
        true
    }

    /// The item path of the value being built in the innermost frame's parent chain, e.g.
    /// `routing.classes` while a key of that mapping is read.
    fn current_path(&self) -> String {
        let mut path = String::new();
        let n = self.stack.len();
        for (i, f) in self.stack.iter().enumerate() {
            if i + 1 == n {
                break;
            }
            match f {
                Frame::Map {
                    pending_key: Some((k, _)),
                    ..
                } => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(k);
                }
                Frame::Seq { items, .. } => path.push_str(&format!("[{}]", items.len())),
                Frame::Map { .. } => {}
            }
        }
        path
    }

    fn push_node(&mut self, node: Node, anchor: usize, size: usize) {
        let dup_path = match self.stack.last() {
            Some(Frame::Map {
                pending_key: Some((k, _)),
                keys,
                ..
            }) if keys.contains_key(k) => Some(self.current_path()),
            _ => None,
        };
        if anchor > 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
            }
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries,
                pending_key,
                keys,
                ..
            }) => match pending_key.take() {
                Some((k, kpos)) => {
                    match (keys.get(&k), dup_path) {
                        (Some(&first), Some(parent)) => self.duplicates.push(DuplicateKey {
                            path: if parent.is_empty() {
                                k.clone()
                            } else {
                                format!("{parent}.{k}")
                            },
                            key: k.clone(),
                            pos: kpos,
                            first,
                        }),
                        _ => {
                            keys.insert(k.clone(), kpos);
                        }
                    }
                    entries.push((k, kpos, node));
                }
                None => match node {
                    Node::Scalar(s, p) => *pending_key = Some((key_text(s), p)),
                    other => {
                        let p = other.pos();
                        *pending_key = Some((String::new(), p));
                        self.fail(p, "mapping keys must be plain strings".into(), false);
                    }
                },
            },
        }
    }

    fn on_event(&mut self, ev: Event, mark: Marker) {
        let pos = pos_of(&mark);
        match ev {
            Event::DocumentStart => self.documents += 1,
            Event::Scalar(v, style, anchor, tag) => {
                if !self.count(1, pos, false) {
                    return;
                }
                let explicit_str = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let s = if style == TScalarStyle::Plain && !explicit_str {
                    resolve_plain(&v)
                } else {
                    Scalar::Str(v)
                };
                self.push_node(Node::Scalar(s, pos), anchor, 1);
            }
            Event::Alias(id) => {
                let size = self.anchors.get(&id).map_or(1, |a| a.1);
                // Count before cloning: the clone is what a bomb would make expensive.
                if !self.count(size, pos, true) {
                    return;
                }
                let node = self
                    .anchors
                    .get(&id)
                    .map_or(Node::Scalar(Scalar::Null, pos), |a| a.0.clone());
                self.push_node(node, 0, size);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if !self.count(1, pos, false) {
                    return;
                }
                if self.stack.len() >= self.limits.max_depth {
                    let max = self.limits.max_depth;
                    self.fail(
                        pos,
                        format!("mappings and lists nest more than {max} deep here; intents need a handful of levels"),
                        true,
                    );
                    return;
                }
                let start = self.nodes;
                self.stack.push(if matches!(ev, Event::SequenceStart(..)) {
                    Frame::Seq {
                        pos,
                        anchor,
                        start,
                        items: Vec::new(),
                    }
                } else {
                    Frame::Map {
                        pos,
                        anchor,
                        start,
                        entries: Vec::new(),
                        pending_key: None,
                        keys: HashMap::new(),
                    }
                });
            }
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Seq {
                    pos,
                    anchor,
                    start,
                    items,
                }) => {
                    let size = self.nodes - start + 1;
                    self.push_node(Node::Seq(items, pos), anchor, size)
                }
                Some(Frame::Map {
                    pos,
                    anchor,
                    start,
                    entries,
                    ..
                }) => {
                    // The parser marks a block mapping where its first value starts; operators
                    // look for the item at its first key.
                    let pos = entries.first().map_or(pos, |e| e.1);
                    let size = self.nodes - start + 1;
                    self.push_node(Node::Map(entries, pos), anchor, size)
                }
                None => {}
            },
            _ => {}
        }
    }
}

/// A parsed intent: its tree, and every key written twice in one mapping.
#[derive(Debug)]
pub struct Parsed {
    pub root: Node,
    pub duplicates: Vec<DuplicateKey>,
    /// The document holds nothing (empty, only comments, or `~`).
    pub empty: bool,
}

/// Parses YAML text into a marked tree. An empty document is an empty mapping.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    parse_with(text, ParseLimits::default()).map(|p| p.root)
}

/// Parses YAML text within `limits`.
pub fn parse_with(text: &str, limits: ParseLimits) -> Result<Parsed, SyntaxError> {
    let mut b = Builder::new(limits);
    let mut parser = Parser::new_from_str(text);
    // Events one by one rather than `Parser::load`, whose recursion follows the nesting, so
    // that the first limit crossed ends the parse.
    loop {
        match parser.next_token() {
            Ok((Event::StreamEnd, _)) => break,
            Ok((ev, mark)) => b.on_event(ev, mark),
            Err(e) => {
                let m = e.marker();
                // The scanner's own bound on `[`/`{` nesting, in the same words as ours.
                let limit = e.info() == "recursion limit exceeded";
                return Err(SyntaxError {
                    pos: pos_of(m),
                    message: if limit {
                        "flow mappings and lists ([ ], { }) nest more than 255 deep here; intents need a handful of levels".into()
                    } else {
                        e.info().to_string()
                    },
                    limit,
                });
            }
        }
        if b.error.is_some() {
            break;
        }
    }
    if let Some(e) = b.error {
        return Err(e);
    }
    if b.documents > 1 {
        return Err(SyntaxError {
            pos: Pos { line: 1, col: 1 },
            message: "the intent must be a single YAML document (found several `---`)".into(),
            limit: false,
        });
    }
    let (root, empty) = match b.root {
        None | Some(Node::Scalar(Scalar::Null, _)) => {
            (Node::Map(Vec::new(), Pos { line: 1, col: 1 }), true)
        }
        Some(n) => (n, false),
    };
    Ok(Parsed {
        root,
        duplicates: b.duplicates,
        empty,
    })
}

/// Maps item paths such as `switches[2].ports[0].speed` to positions, for locating errors that
/// semantic checks find on the typed model.
#[derive(Debug, Default, Clone)]
pub struct PathIndex {
    map: HashMap<String, Pos>,
}

impl PathIndex {
    pub fn build(root: &Node) -> Self {
        let mut idx = PathIndex::default();
        idx.walk(root, String::new());
        idx
    }

    fn walk(&mut self, node: &Node, path: String) {
        self.map.insert(path.clone(), node.pos());
        match node {
            Node::Map(entries, _) => {
                for (k, kpos, v) in entries {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    // The key is where an operator looks for the item, not its value.
                    self.walk(v, p.clone());
                    self.map.insert(p, *kpos);
                }
            }
            Node::Seq(items, _) => {
                for (i, v) in items.iter().enumerate() {
                    self.walk(v, format!("{path}[{i}]"));
                }
            }
            Node::Scalar(..) => {}
        }
    }

    /// The position of exactly `path`, if the file writes it.
    pub fn get(&self, path: &str) -> Option<Pos> {
        self.map.get(path).copied()
    }

    /// The position of `path`, or of its nearest ancestor that exists in the file.
    pub fn locate(&self, path: &str) -> Pos {
        let mut p = path;
        loop {
            if let Some(pos) = self.map.get(p) {
                return *pos;
            }
            match p.rfind(['.', '[']) {
                Some(i) => p = &p[..i],
                None => return self.map.get("").copied().unwrap_or(Pos { line: 1, col: 1 }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_lines_and_columns_of_keys_and_items() {
        let text = "fabric:\n  name: x\nswitches:\n  - name: leaf1\n    role: leaf\n";
        let root = parse(text).expect("valid yaml");
        let idx = PathIndex::build(&root);
        assert_eq!(idx.locate("fabric.name"), Pos { line: 2, col: 3 });
        assert_eq!(idx.locate("switches[0]"), Pos { line: 4, col: 5 });
        assert_eq!(idx.locate("switches[0].role"), Pos { line: 5, col: 5 });
        // Unknown paths fall back to the nearest ancestor.
        assert_eq!(idx.locate("switches[0].ports[3]"), Pos { line: 4, col: 5 });
    }

    #[test]
    fn plain_scalars_resolve_to_typed_values_and_quoted_ones_stay_strings() {
        let root = parse("a: 9100\nb: '9100'\nc: true\nd: 0.2\ne: 400G\n").expect("valid");
        assert_eq!(root.get("a").map(Node::type_name), Some("integer"));
        assert_eq!(root.get("b").map(Node::type_name), Some("string"));
        assert_eq!(root.get("c").map(Node::type_name), Some("boolean"));
        assert_eq!(root.get("d").map(Node::type_name), Some("number"));
        assert_eq!(root.get("e").map(Node::type_name), Some("string"));
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = parse("a: [1, 2\nb: 3\n").expect_err("unterminated flow sequence");
        assert!(err.pos.line >= 1);
        assert!(!err.message.is_empty());
    }

    #[test]
    fn a_duplicate_key_is_reported_at_its_own_line_with_the_first() {
        let p = parse_with(
            "a: 1\nroutes:\n  x: 1\n  y: 2\n  x: 3\n",
            ParseLimits::default(),
        )
        .expect("valid yaml");
        assert_eq!(
            p.duplicates,
            vec![DuplicateKey {
                key: "x".into(),
                path: "routes.x".into(),
                pos: Pos { line: 5, col: 3 },
                first: Pos { line: 3, col: 3 },
            }]
        );
    }

    #[test]
    fn aliases_count_every_value_they_repeat() {
        let limits = ParseLimits {
            max_nodes: 100,
            max_depth: 64,
        };
        // 10 × 10 = 100 repeated scalars, plus the lists: past 100.
        let bomb =
            "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n";
        let e = parse_with(bomb, limits).expect_err("bomb");
        assert!(e.limit && e.message.contains("alias"), "{e:?}");
        // The same aliases a few times are fine.
        assert!(parse_with("a: &a [x, x]\nb: [*a, *a]\n", limits).is_ok());
    }

    #[test]
    fn nesting_past_the_limit_is_refused_and_empty_documents_are_flagged() {
        let limits = ParseLimits {
            max_nodes: 1000,
            max_depth: 3,
        };
        let e = parse_with("a:\n  b:\n    c:\n      d: 1\n", limits).expect_err("too deep");
        assert!(e.limit, "{e:?}");
        for empty in ["", "# only a comment\n", "~\n"] {
            assert!(
                parse_with(empty, limits).expect("parses").empty,
                "{empty:?}"
            );
        }
        assert!(!parse_with("{}\n", limits).expect("parses").empty);
    }
}
