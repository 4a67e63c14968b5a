//! A YAML tree that remembers where every node came from.
//!
//! serde deserialisation stops at the first problem and forgets positions; operators want every
//! problem at once, each with a line and column. So the text is parsed twice: once here into a
//! marked tree (for the structural check and for locating items named by semantic checks), and
//! once by serde into the typed model.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
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
    Float(f64),
    Str(String),
}

impl Scalar {
    pub fn type_name(&self) -> &'static str {
        match self {
            Scalar::Null => "null",
            Scalar::Bool(_) => "boolean",
            Scalar::Int(_) => "integer",
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
        entries: Vec<(String, Pos, Node)>,
        pending_key: Option<(String, Pos)>,
    },
    Seq {
        pos: Pos,
        anchor: usize,
        items: Vec<Node>,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
    error: Option<SyntaxError>,
    documents: usize,
}

fn pos_of(m: &Marker) -> Pos {
    Pos {
        line: m.line(),
        col: m.col() + 1,
    }
}

impl Builder {
    fn push_node(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
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
                ..
            }) => match pending_key.take() {
                Some((k, kpos)) => entries.push((k, kpos, node)),
                None => match node {
                    Node::Scalar(s, p) => {
                        let key = match s {
                            Scalar::Str(s) => s,
                            Scalar::Int(i) => i.to_string(),
                            Scalar::Float(f) => f.to_string(),
                            Scalar::Bool(b) => b.to_string(),
                            Scalar::Null => "null".to_string(),
                        };
                        *pending_key = Some((key, p));
                    }
                    other => {
                        if self.error.is_none() {
                            self.error = Some(SyntaxError {
                                pos: other.pos(),
                                message: "mapping keys must be plain strings".into(),
                            });
                        }
                        *pending_key = Some((String::new(), other.pos()));
                    }
                },
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let pos = pos_of(&mark);
        match ev {
            Event::DocumentStart => self.documents += 1,
            Event::Scalar(v, style, anchor, _tag) => {
                let s = if style == TScalarStyle::Plain {
                    resolve_plain(&v)
                } else {
                    Scalar::Str(v)
                };
                self.push_node(Node::Scalar(s, pos), anchor);
            }
            Event::Alias(id) => {
                let node = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .unwrap_or(Node::Scalar(Scalar::Null, pos));
                self.push_node(node, 0);
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Frame::Seq {
                pos,
                anchor,
                items: Vec::new(),
            }),
            Event::MappingStart(anchor, _) => self.stack.push(Frame::Map {
                pos,
                anchor,
                entries: Vec::new(),
                pending_key: None,
            }),
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Seq { pos, anchor, items }) => {
                    self.push_node(Node::Seq(items, pos), anchor)
                }
                Some(Frame::Map {
                    pos,
                    anchor,
                    entries,
                    ..
                }) => {
                    // The parser marks a block mapping where its first value starts; operators
                    // look for the item at its first key.
                    let pos = entries.first().map_or(pos, |e| e.1);
                    self.push_node(Node::Map(entries, pos), anchor)
                }
                None => {}
            },
            _ => {}
        }
    }
}

/// Parses YAML text into a marked tree. An empty document is an empty mapping.
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut b = Builder::default();
    let mut parser = Parser::new_from_str(text);
    if let Err(e) = parser.load(&mut b, true) {
        let m = e.marker();
        return Err(SyntaxError {
            pos: pos_of(m),
            message: e.info().to_string(),
        });
    }
    if let Some(e) = b.error {
        return Err(e);
    }
    if b.documents > 1 {
        return Err(SyntaxError {
            pos: Pos { line: 1, col: 1 },
            message: "the intent must be a single YAML document (found several `---`)".into(),
        });
    }
    Ok(match b.root {
        None | Some(Node::Scalar(Scalar::Null, _)) => {
            Node::Map(Vec::new(), Pos { line: 1, col: 1 })
        }
        Some(n) => n,
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
}
