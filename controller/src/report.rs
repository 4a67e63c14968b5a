//! Structured output: every `--output json` and `--output yaml` document has one shape, the
//! same for every command and for its errors (README, "Structured output"):
//!
//! ```text
//! {"version": 1, "command": "doctor", "fabric": "small", "error": null, ...the command's fields}
//! {"version": 1, "command": "plan", "fabric": null,
//!  "error": {"kind": "failure", "message": "cannot read nope.yaml", "causes": ["No such file ..."]}}
//! ```
//! `kind` is `invalid-intent` (exit 2, with the intent's `errors`), `failure` (exit 1) or
//! `usage` (exit 64). Exactly one document is printed per run: a command that already printed
//! its own does not get a second one for an error after it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use crate::args::OutputFormat;

/// The structured documents' format version (`version`).
pub const VERSION: u32 = 1;

struct Context {
    command: String,
    format: OutputFormat,
}

static CONTEXT: OnceLock<Context> = OnceLock::new();
static EMITTED: AtomicBool = AtomicBool::new(false);

/// The command running (`show queues`, `testbed status`) and the format its output asked for.
pub fn set_context(command: &str, format: OutputFormat) {
    let _ = CONTEXT.set(Context {
        command: command.to_string(),
        format,
    });
}

/// The command's name as documents carry it.
pub fn command() -> &'static str {
    CONTEXT.get().map_or("weft", |c| c.command.as_str())
}

/// The format of the command's output when it is structured (json or yaml).
pub fn structured() -> Option<OutputFormat> {
    CONTEXT
        .get()
        .map(|c| c.format)
        .filter(|f| *f != OutputFormat::Text)
}

/// Whether a document was printed already.
pub fn emitted() -> bool {
    EMITTED.load(Ordering::Relaxed)
}

/// What went wrong, in a document's `error`.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorDoc {
    /// `invalid-intent`, `failure` or `usage`.
    pub kind: &'static str,
    pub message: String,
    /// Why, outermost first (each cause once).
    pub causes: Vec<String>,
    /// The intent's problems (`invalid-intent`), each as `weft validate` reports them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<serde_json::Value>,
}

impl ErrorDoc {
    /// A failure from its error chain.
    pub fn failure(e: &anyhow::Error) -> ErrorDoc {
        let mut chain = causes(e);
        let message = chain.remove(0);
        ErrorDoc {
            kind: "failure",
            message,
            causes: chain,
            errors: None,
        }
    }
}

/// An error and its causes, each said once: error types that print their source in their own
/// message (`cannot read f: No such file`) would otherwise say it twice.
pub fn causes(e: &anyhow::Error) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in e.chain() {
        let text = c.to_string();
        if out.last().is_some_and(|prev| prev.contains(&text)) || text.is_empty() {
            continue;
        }
        out.push(text);
    }
    if out.is_empty() {
        out.push(e.to_string());
    }
    out
}

/// An error chain on one line, each cause once.
pub fn one_line(e: &anyhow::Error) -> String {
    causes(e).join(": ")
}

/// The document: the envelope's fields, then `body`'s (an object; anything else goes under
/// `result`).
pub fn document(
    fabric: Option<&str>,
    error: Option<&ErrorDoc>,
    body: serde_json::Value,
) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("version".into(), VERSION.into());
    m.insert("command".into(), command().into());
    m.insert(
        "fabric".into(),
        fabric.map_or(serde_json::Value::Null, Into::into),
    );
    m.insert(
        "error".into(),
        error
            .and_then(|e| serde_json::to_value(e).ok())
            .unwrap_or(serde_json::Value::Null),
    );
    match body {
        serde_json::Value::Object(b) => {
            for (k, v) in b {
                // The envelope's fields are the envelope's.
                m.entry(k).or_insert(v);
            }
        }
        serde_json::Value::Null => {}
        other => {
            m.insert("result".into(), other);
        }
    }
    serde_json::Value::Object(m)
}

/// A document as text in `format` (JSON pretty-printed, or YAML), ending with a newline.
pub fn render(format: OutputFormat, doc: &serde_json::Value) -> anyhow::Result<String> {
    Ok(match format {
        OutputFormat::Yaml => serde_yaml_ng::to_string(doc)?,
        _ => serde_json::to_string_pretty(doc)? + "\n",
    })
}

/// Prints the command's document on standard output.
pub fn emit(
    format: OutputFormat,
    fabric: Option<&str>,
    body: &impl Serialize,
) -> anyhow::Result<()> {
    let doc = document(fabric, None, serde_json::to_value(body)?);
    print(format, &doc)
}

/// Prints a document whose `error` says why the command did not do its job.
pub fn emit_error(
    format: OutputFormat,
    fabric: Option<&str>,
    error: &ErrorDoc,
    body: serde_json::Value,
) -> anyhow::Result<()> {
    let doc = document(fabric, Some(error), body);
    print(format, &doc)
}

fn print(format: OutputFormat, doc: &serde_json::Value) -> anyhow::Result<()> {
    use std::io::Write as _;
    EMITTED.store(true, Ordering::Relaxed);
    crate::out::stdout().write_all(render(format, doc)?.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_its_error_already_says_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let e = anyhow::Error::new(io).context("cannot read f.yaml: No such file");
        assert_eq!(one_line(&e), "cannot read f.yaml: No such file");
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let e = anyhow::Error::new(io).context("cannot read f.yaml");
        assert_eq!(one_line(&e), "cannot read f.yaml: No such file");
    }

    #[test]
    fn the_envelope_comes_first_and_keeps_its_fields() {
        let d = document(
            Some("small"),
            None,
            serde_json::json!({"fabric": "other", "switches": []}),
        );
        assert_eq!(d["version"], VERSION);
        assert_eq!(d["fabric"], "small", "the envelope's fabric wins");
        assert!(d["error"].is_null());
        assert!(d["switches"].is_array());
        let y = render(OutputFormat::Yaml, &d).expect("yaml");
        let back: serde_json::Value = serde_yaml_ng::from_str(&y).expect("parses");
        assert_eq!(back, d);
    }
}
