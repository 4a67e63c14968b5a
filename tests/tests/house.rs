//! House rules of the workspace, checked from the source text so that they hold after every
//! change, not only on the day a review looked:
//!
//! * no non-generated function is longer than [`MAX_FN_LINES`] lines;
//! * no library signature returns `Result<_, String>` (errors are typed: the retry policies
//!   match on their kinds);
//! * crates depend only on crates of a lower layer ([`LAYERS`]), dev-dependencies included, and
//!   no file of a crate takes names from a file that (through others) takes names from it;
//! * integration tests and benches take the shared harness as the `weft-tests` dev-dependency,
//!   not by `#[path]` includes of its files.
//!
//! `WEFT_HOUSE_REPORT=1 cargo test -p weft-tests --test house -- --nocapture` prints the longest
//! functions, the signatures and the cycles, whether or not they break a rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FN_LINES: usize = 120;

/// The crate layers, bottom first. A crate may depend on crates of lower layers only.
const LAYERS: &[&[&str]] = &[
    // The harness: std only, a dev-dependency of any crate.
    &["weft-tests"],
    &[
        "weft-retry",
        "p4runtime-proto",
        "weft-sonic-db",
        "weft-tuning",
        "weft-traffic",
    ],
    &["weft-topology", "weft-p4rt", "weft-sonic-schema"],
    &["weft-appdb", "weft-telemetry", "weft-diagnose"],
    &["weft-p4"],
    &["weft-compiler"],
    &["weft-simulate", "weft-reconcile", "weft-sonic-plugin"],
    &["weft-testbed", "weft-observe", "weft-twin"],
    &["weft-ui"],
    &["weft-controller"],
    &["weft-fuzz"],
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name != "target" && !name.starts_with('.') {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Workspace member directories (from the root manifest's `members`).
fn members() -> Vec<PathBuf> {
    let text = std::fs::read_to_string(root().join("Cargo.toml")).expect("root Cargo.toml");
    let start = text.find("members").expect("members");
    let list = &text[start..text[start..].find(']').map(|e| start + e).expect("]")];
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(|m| root().join(m))
        .collect()
}

fn is_generated(text: &str) -> bool {
    text.lines()
        .take(5)
        .any(|l| l.contains("generated") && l.contains("do not edit"))
}

/// Replaces the contents of comments, strings and char literals with spaces (newlines kept), so
/// that braces and `fn` inside them are not counted.
fn blank_non_code(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let keep = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // Raw string r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == '#' {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            for &ch in &b[i..j] {
                out.push(keep(ch));
            }
            i = j;
            while i < b.len() {
                if b[i] == '"' && (0..hashes).all(|h| b.get(i + 1 + h) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += 1 + hashes;
                    break;
                }
                out.push(keep(b[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() {
                if b[i] == '\\' {
                    out.push(' ');
                    if i + 1 < b.len() {
                        out.push(keep(b[i + 1]));
                    }
                    i += 2;
                    continue;
                }
                if b[i] == '"' {
                    out.push(' ');
                    i += 1;
                    break;
                }
                out.push(keep(b[i]));
                i += 1;
            }
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only the former is blanked.
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                for _ in i..=j.min(b.len() - 1) {
                    out.push(' ');
                }
                i = j + 1;
            } else if b.get(i + 2) == Some(&'\'') {
                out.push_str("   ");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[derive(Debug)]
struct Function {
    file: PathBuf,
    line: usize,
    name: String,
    lines: usize,
}

/// The functions with a body in `code` (already blanked), with their length in lines from the
/// `fn` line to the closing brace.
fn functions(file: &Path, code: &str) -> Vec<Function> {
    let lines: Vec<&str> = code.lines().collect();
    let mut starts = Vec::new();
    let mut offset = 0;
    let mut line_of = Vec::with_capacity(code.len());
    for (n, l) in lines.iter().enumerate() {
        for _ in 0..=l.len() {
            line_of.push(n);
        }
        let t = l.trim_start();
        if let Some(pos) = find_fn_keyword(t) {
            let name: String = t[pos + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                starts.push((offset + (l.len() - t.len()) + pos, n, name));
            }
        }
        offset += l.len() + 1;
    }
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for (at, line, name) in starts {
        // The body opens at the first `{` outside parentheses/brackets/angles after the name;
        // a `;` first means a declaration without a body.
        let mut i = at;
        let mut paren = 0i32;
        let mut body = None;
        while i < bytes.len() {
            match bytes[i] {
                b'(' | b'[' => paren += 1,
                b')' | b']' => paren -= 1,
                b';' if paren == 0 => break,
                b'{' if paren == 0 => {
                    body = Some(i);
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let Some(open) = body else { continue };
        let mut depth = 0;
        let mut j = open;
        while j < bytes.len() {
            match bytes[j] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        let end = line_of.get(j).copied().unwrap_or(lines.len());
        out.push(Function {
            file: file.to_path_buf(),
            line: line + 1,
            name,
            lines: end - line + 1,
        });
    }
    out
}

/// Where `fn ` starts in a trimmed line that declares a function (after visibility and
/// qualifiers), if it does.
fn find_fn_keyword(t: &str) -> Option<usize> {
    let mut rest = t;
    let mut pos = 0;
    loop {
        if rest.starts_with("fn ") {
            return Some(pos);
        }
        let word_end = if rest.starts_with("pub(") {
            rest.find(')')? + 1
        } else {
            let w = rest.split_whitespace().next()?;
            match w {
                "pub" | "const" | "async" | "unsafe" | "default" => w.len(),
                "extern" => {
                    let after = rest[6..].trim_start();
                    if after.starts_with("fn ") {
                        6
                    } else {
                        let q = after.find(' ')?;
                        rest.len() - after.len() + q
                    }
                }
                _ => return None,
            }
        };
        let skipped = &rest[word_end..];
        let trimmed = skipped.trim_start();
        pos += word_end + (skipped.len() - trimmed.len());
        rest = trimmed;
    }
}

/// Source files that count: each member's `src/`, `benches/` and `build.rs`.
fn source_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for m in members() {
        rust_files(&m.join("src"), &mut files);
        rust_files(&m.join("benches"), &mut files);
        let build = m.join("build.rs");
        if build.exists() {
            files.push(build);
        }
    }
    files
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

fn report() -> bool {
    std::env::var_os("WEFT_HOUSE_REPORT").is_some()
}

#[test]
fn no_non_generated_function_is_longer_than_120_lines() {
    let mut all = Vec::new();
    for f in source_files() {
        let text = std::fs::read_to_string(&f).expect("read source");
        if is_generated(&text) {
            continue;
        }
        all.extend(functions(&f, &blank_non_code(&text)));
    }
    all.sort_by_key(|f| std::cmp::Reverse(f.lines));
    if report() {
        println!("longest functions ({} in all):", all.len());
        for f in all.iter().take(30) {
            println!("  {:4} {}:{} {}", f.lines, rel(&f.file), f.line, f.name);
        }
    }
    let long: Vec<String> = all
        .iter()
        .filter(|f| f.lines > MAX_FN_LINES)
        .map(|f| format!("{} lines: {}:{} {}", f.lines, rel(&f.file), f.line, f.name))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// Library files: `src/` of every member except binaries' entry points (`main.rs`, `src/bin/`),
/// which are the edges where a `String` error may still be turned into a message.
fn library_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for m in members() {
        rust_files(&m.join("src"), &mut files);
    }
    files.retain(|f| {
        let r = rel(f);
        !r.ends_with("/main.rs") && !r.contains("/src/bin/")
    });
    files
}

#[test]
fn no_library_signature_returns_a_string_error() {
    let mut hits = Vec::new();
    for f in library_files() {
        let text = std::fs::read_to_string(&f).expect("read source");
        if is_generated(&text) {
            continue;
        }
        let code = blank_non_code(&text);
        for (n, l) in code.lines().enumerate() {
            let squeezed: String = l.chars().filter(|c| !c.is_whitespace()).collect();
            if squeezed.contains(",String>") && squeezed.contains("Result<") {
                // Only `Result<T, String>` (the error type), not `Result<String, E>` or a
                // `BTreeMap<_, String>` inside the Ok type.
                if let Some(pos) = squeezed.find("Result<") {
                    let inner = &squeezed[pos + 7..];
                    if error_type(inner).is_some_and(|e| e == "String") {
                        hits.push(format!("{}:{}: {}", rel(&f), n + 1, l.trim()));
                    }
                }
            }
        }
    }
    if report() {
        println!("Result<_, String> in libraries: {}", hits.len());
        for h in &hits {
            println!("  {h}");
        }
    }
    assert!(
        hits.is_empty(),
        "library code with Result<_, String>:\n{}",
        hits.join("\n")
    );
}

/// The second type argument of `Result<A, B>` given the text after `Result<`.
fn error_type(inner: &str) -> Option<String> {
    let mut depth = 0;
    let mut comma = None;
    for (i, c) in inner.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' if depth == 0 => {
                return comma.map(|s: usize| inner[s..i].to_string());
            }
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => comma = Some(i + 1),
            _ => {}
        }
    }
    None
}

/// The `weft-*` (and `p4runtime-proto`) crates a manifest names, in any dependency section.
fn manifest_deps(manifest: &str) -> (String, BTreeSet<String>) {
    let mut name = String::new();
    let mut deps = BTreeSet::new();
    let mut section = String::new();
    for l in manifest.lines() {
        let t = l.trim();
        if t.starts_with('[') {
            section = t.to_string();
            continue;
        }
        if section == "[package]" {
            if let Some(v) = t.strip_prefix("name") {
                name = v
                    .trim_start_matches([' ', '='])
                    .trim_matches('"')
                    .to_string();
            }
        } else if section.contains("dependencies") {
            let key = t.split(['=', '.', ' ']).next().unwrap_or("");
            if key.starts_with("weft-") || key == "p4runtime-proto" {
                deps.insert(key.to_string());
            }
        }
    }
    (name, deps)
}

fn layer_of(krate: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&krate))
}

#[test]
fn crates_depend_only_on_lower_layers() {
    let mut bad = Vec::new();
    let mut dirs = members();
    dirs.push(root().join("fuzz"));
    for m in dirs {
        let Ok(text) = std::fs::read_to_string(m.join("Cargo.toml")) else {
            continue;
        };
        let (name, deps) = manifest_deps(&text);
        let Some(mine) = layer_of(&name) else {
            bad.push(format!("{name}: not in LAYERS (add it to a layer)"));
            continue;
        };
        for d in deps {
            match layer_of(&d) {
                Some(l) if l < mine => {}
                _ => bad.push(format!("{name} (layer {mine}) depends on {d}")),
            }
        }
    }
    assert!(
        bad.is_empty(),
        "dependencies against the layering:\n{}",
        bad.join("\n")
    );
}

#[test]
fn tests_and_benches_take_the_harness_as_a_dependency_not_by_path() {
    let mut hits = Vec::new();
    for m in members() {
        for dir in ["tests", "benches"] {
            let mut files = Vec::new();
            rust_files(&m.join(dir), &mut files);
            for f in files {
                let text = std::fs::read_to_string(&f).expect("read");
                for (n, l) in text.lines().enumerate() {
                    if l.trim_start().starts_with("#[path") && l.contains("tests/src/") {
                        hits.push(format!("{}:{}: {}", rel(&f), n + 1, l.trim()));
                    }
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "#[path] includes of the harness:\n{}",
        hits.join("\n")
    );
}

/// Module path of a source file relative to its crate's `src/`: `a/b.rs` and `a/b/mod.rs` are
/// `a::b`; `lib.rs` and `main.rs` are the root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let r = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = r
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The files of one crate that each file takes names from (`crate::`, `super::` paths).
fn file_graph(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.retain(|f| !f.starts_with(src.join("bin")));
    let by_module: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let mut graph = BTreeMap::new();
    for f in &files {
        let me = module_of(src, f);
        if me.is_empty() {
            continue; // the crate root declares every module; that is not taking names
        }
        let text = std::fs::read_to_string(f).expect("read");
        let code = blank_non_code(&text);
        let code = strip_test_modules(&code);
        let mut edges = BTreeSet::new();
        for (prefix, base) in [("crate::", Vec::new()), ("super::", parent_of(&me, f))] {
            for (pos, _) in code.match_indices(prefix) {
                if pos > 0 {
                    let before = code.as_bytes()[pos - 1];
                    if before.is_ascii_alphanumeric() || before == b'_' || before == b':' {
                        continue;
                    }
                }
                let path: Vec<String> = code[pos + prefix.len()..]
                    .split("::")
                    .map(|s| {
                        s.chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect()
                    })
                    .take_while(|s: &String| !s.is_empty())
                    .collect();
                let mut full = base.clone();
                full.extend(path);
                // The longest prefix that is a file of this crate.
                while !full.is_empty() {
                    if let Some(target) = by_module.get(&full) {
                        if target != f {
                            edges.insert(target.clone());
                        }
                        break;
                    }
                    full.pop();
                }
            }
        }
        graph.insert(f.clone(), edges);
    }
    graph
}

/// The module `super::` names from file `f` of module `me`.
fn parent_of(me: &[String], f: &Path) -> Vec<String> {
    let is_mod_file = f.file_name().is_some_and(|n| n == "mod.rs");
    let _ = is_mod_file;
    me[..me.len().saturating_sub(1)].to_vec()
}

/// Cuts `#[cfg(test)] mod ... { ... }` blocks: a unit test may use what it likes.
fn strip_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let Some(open_rel) = out[at..].find('{') else {
            break;
        };
        let open = at + open_rel;
        let semi = out[at..open].find(';');
        if semi.is_some() {
            out.replace_range(at..at + 12, "");
            continue;
        }
        let bytes = out.as_bytes();
        let mut depth = 0;
        let mut j = open;
        while j < bytes.len() {
            match bytes[j] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        out.replace_range(at..(j + 1).min(out.len()), "");
    }
    out
}

/// Strongly connected components with more than one file (Tarjan).
fn cycles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct T<'g> {
        g: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'g PathBuf, usize>,
        low: BTreeMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        on: BTreeSet<&'g PathBuf>,
        next: usize,
        out: Vec<Vec<PathBuf>>,
    }
    impl<'g> T<'g> {
        fn visit(&mut self, v: &'g PathBuf) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on.insert(v);
            if let Some(ws) = self.g.get(v) {
                for w in ws {
                    if !self.g.contains_key(w) {
                        continue;
                    }
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let lw = self.low[w];
                        let lv = self.low[v];
                        self.low.insert(v, lv.min(lw));
                    } else if self.on.contains(w) {
                        let iw = self.index[w];
                        let lv = self.low[v];
                        self.low.insert(v, lv.min(iw));
                    }
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn no_file_of_a_crate_takes_names_from_a_file_that_takes_names_from_it() {
    let mut all = Vec::new();
    for m in members() {
        for c in cycles(&file_graph(&m.join("src"))) {
            all.push(c.iter().map(|p| rel(p)).collect::<Vec<_>>().join(" ↔ "));
        }
    }
    if report() {
        println!("import cycles inside crates: {}", all.len());
        for c in &all {
            println!("  {c}");
        }
    }
    assert!(
        all.is_empty(),
        "import cycles inside crates:\n{}",
        all.join("\n")
    );
}

#[cfg(test)]
mod scanner {
    use super::*;

    #[test]
    fn a_function_is_measured_from_its_fn_line_to_its_closing_brace_ignoring_braces_in_strings() {
        let src = "pub async fn f(\n    a: u32,\n) -> u32 {\n    let s = \"}{\";\n    let c = '}';\n    // }\n    a\n}\nfn g() {}\n";
        let fs = functions(Path::new("x.rs"), &blank_non_code(src));
        let got: Vec<(String, usize)> = fs.iter().map(|f| (f.name.clone(), f.lines)).collect();
        assert_eq!(got, vec![("f".to_string(), 8), ("g".to_string(), 1)]);
    }

    #[test]
    fn trait_declarations_without_a_body_are_not_functions() {
        let src = "trait T {\n    fn a(&self) -> u8;\n    fn b(&self) -> u8 { 1 }\n}\n";
        let fs = functions(Path::new("x.rs"), &blank_non_code(src));
        assert_eq!(fs.len(), 1);
        assert_eq!(fs[0].name, "b");
    }

    #[test]
    fn only_the_error_type_of_a_result_counts_as_a_string_error() {
        assert_eq!(error_type("u8,String>").as_deref(), Some("String"));
        assert_eq!(error_type("String,Error>").as_deref(), Some("Error"));
        assert_eq!(error_type("BTreeMap<u8,String>,E>").as_deref(), Some("E"));
        assert_eq!(error_type("T>"), None);
    }

    #[test]
    fn lifetimes_are_not_taken_for_char_literals() {
        let src = "fn f<'a>(x: &'a str) -> &'a str {\n    x\n}\n";
        let fs = functions(Path::new("x.rs"), &blank_non_code(src));
        assert_eq!(fs[0].lines, 3);
    }
}
