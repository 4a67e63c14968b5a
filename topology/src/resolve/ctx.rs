//! What every resolve stage shares: where to report a problem, and the items as drafted.

use crate::Diagnostic;
use crate::diag::Sink;
use crate::names::{check_name, display_name};
use crate::yaml::PathIndex;

/// The problems found so far, each placed at the line that wrote the path it names.
pub(crate) struct Ctx<'a> {
    file: &'a str,
    idx: &'a PathIndex,
    sink: Sink,
    /// Names that break the rule: reported, but no reason to doubt the fabric's shape.
    bad_names: usize,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(file: &'a str, idx: &'a PathIndex) -> Self {
        Ctx {
            file,
            idx,
            sink: Sink::default(),
            bad_names: 0,
        }
    }
}

impl Ctx<'_> {
    pub(super) fn err(&mut self, path: &str, item: impl Into<String>, msg: impl Into<String>) {
        let pos = self.idx.locate(path);
        self.sink.push(self.file, pos, item, msg);
    }
    pub(super) fn err_help(
        &mut self,
        path: &str,
        item: impl Into<String>,
        msg: impl Into<String>,
        help: impl Into<String>,
    ) {
        let pos = self.idx.locate(path);
        self.sink.push_help(self.file, pos, item, msg, help);
    }
    /// Whether the file writes exactly `path`.
    pub(super) fn written(&self, path: &str) -> bool {
        self.idx.get(path).is_some()
    }
    pub(super) fn errors(&self) -> usize {
        self.sink.len()
    }
    /// Problems other than names that break the rule: those say nothing of the fabric's shape.
    pub(super) fn shape_errors(&self) -> usize {
        self.sink.len().saturating_sub(self.bad_names)
    }
    pub(super) fn is_empty(&self) -> bool {
        self.sink.is_empty()
    }
    pub(super) fn finish(self) -> Vec<Diagnostic> {
        self.sink.finish()
    }
}

pub(super) struct Draft<T> {
    pub(super) spec: T,
    /// `generators[i]`, `switches[i]`, ...: where the item was written.
    pub(super) origin: String,
    pub(super) generated: bool,
}

/// Reports `name` at `path` if it breaks the name rule.
pub(super) fn check_name_at(cx: &mut Ctx, path: &str, what: &str, name: &str) {
    if let Err(e) = check_name(name) {
        cx.bad_names += 1;
        cx.err_help(
            path,
            format!("{what} {}", display_name(name)),
            format!("invalid {what} name: {e}"),
            "names become SONiC keys, namespace and file names: use 1 to 63 of A-Z a-z 0-9 _ . - starting with a letter or digit",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{errors, valid};

    #[test]
    fn a_bad_name_is_reported_at_the_line_that_wrote_it() {
        let e = errors(
            "switches:\n  - name: spine1\n    role: spine\n    ports: [{name: Ethernet0}]\n  - name: 'leaf 1'\n    role: leaf\n    ports: [{name: Ethernet0}]\nlinks:\n  - {a: 'leaf 1:Ethernet0', b: spine1:Ethernet0}\n",
        );
        assert_eq!(
            e,
            vec![
                "5: invalid switch name: the name contains a space; names use only letters, digits, `_`, `.` and `-`"
            ]
        );
    }

    #[test]
    fn a_fabric_without_problems_reports_none() {
        let t =
            valid("generators:\n  - {kind: leaf-spine, spines: 1, leaves: 2, hosts_per_leaf: 1}\n");
        assert_eq!((t.switches.len(), t.hosts.len(), t.links.len()), (3, 2, 2));
    }
}
