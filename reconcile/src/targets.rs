//! Which switches a command reads and writes: `--switch NAME|GLOB` and `--role ROLE`.

use std::collections::BTreeSet;

use weft_topology::{SwitchIdx, Topology};

/// Why `--switch`/`--role` select nothing: a typo never means "all".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("--role {role}: no switch of fabric {fabric} has that role (roles: {known})")]
    NoRole {
        role: String,
        fabric: String,
        /// The roles the fabric has, comma separated.
        known: String,
    },
    #[error("--switch {pattern}: matches no switch of fabric {fabric}")]
    NoMatch { pattern: String, fabric: String },
    #[error("--switch and --role together select no switch")]
    Empty,
}

/// Shell-style match: `*` any run of characters, `?` one character, `[abc]`/`[a-z]` one of a
/// set; everything else literally.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    fn set(p: &[char], c: char) -> Option<(bool, usize)> {
        // p[0] == '['; returns (matches, length of the set in p).
        let mut i = 1;
        let negate = p.get(1) == Some(&'!');
        if negate {
            i += 1;
        }
        let mut hit = false;
        let start = i;
        while i < p.len() && (p[i] != ']' || i == start) {
            if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
                hit |= p[i] <= c && c <= p[i + 2];
                i += 3;
            } else {
                hit |= p[i] == c;
                i += 1;
            }
        }
        (i < p.len()).then_some((hit != negate, i + 1))
    }
    fn go(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len()).any(|k| go(&p[1..], &n[k..])),
            Some('?') => !n.is_empty() && go(&p[1..], &n[1..]),
            Some('[') => match (n.first(), set(p, *n.first().unwrap_or(&'\0'))) {
                (Some(_), Some((true, len))) => go(&p[len..], &n[1..]),
                (Some(_), Some((false, _))) | (None, _) => false,
                // No closing bracket: a literal '['.
                (Some(c), None) => *c == '[' && go(&p[1..], &n[1..]),
            },
            Some(c) => n.first() == Some(c) && go(&p[1..], &n[1..]),
        }
    }
    go(&p, &n)
}

/// The switches `switches` (names or globs) and `roles` select (`None`: every switch, neither
/// was given). A pattern or role that selects nothing is an error, so a typo never means "all".
pub fn select(
    t: &Topology,
    switches: &[String],
    roles: &[String],
) -> Result<Option<BTreeSet<SwitchIdx>>, SelectError> {
    if switches.is_empty() && roles.is_empty() {
        return Ok(None);
    }
    let patterns: Vec<&str> = switches
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    let roles: Vec<String> = roles
        .iter()
        .map(|r| r.trim().to_ascii_lowercase())
        .filter(|r| !r.is_empty())
        .collect();
    for r in &roles {
        if !t.switches.iter().any(|s| s.role.as_str() == r) {
            let known: BTreeSet<&str> = t.switches.iter().map(|s| s.role.as_str()).collect();
            return Err(SelectError::NoRole {
                role: r.clone(),
                fabric: t.name.clone(),
                known: known.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
    }
    for p in &patterns {
        if !t.switches.iter().any(|s| glob_match(p, &s.name)) {
            return Err(SelectError::NoMatch {
                pattern: p.to_string(),
                fabric: t.name.clone(),
            });
        }
    }
    let set: BTreeSet<SwitchIdx> = t
        .switches
        .iter()
        .enumerate()
        .filter(|(_, s)| patterns.is_empty() || patterns.iter().any(|p| glob_match(p, &s.name)))
        .filter(|(_, s)| roles.is_empty() || roles.iter().any(|r| r == s.role.as_str()))
        .map(|(i, _)| i)
        .collect();
    if set.is_empty() {
        return Err(SelectError::Empty);
    }
    Ok(Some(set))
}

/// Whether switch `si` is selected.
pub fn selected(sel: &Option<BTreeSet<SwitchIdx>>, si: SwitchIdx) -> bool {
    sel.as_ref().is_none_or(|s| s.contains(&si))
}

/// The selection as a set: every switch when nothing was selected.
pub fn chosen(t: &Topology, sel: &Option<BTreeSet<SwitchIdx>>) -> BTreeSet<SwitchIdx> {
    sel.clone()
        .unwrap_or_else(|| (0..t.switches.len()).collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob_match("leaf*", "leaf12"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("leaf*", "spine1"));
        assert!(glob_match("pod?-spine1", "pod3-spine1"));
        assert!(!glob_match("pod?-spine1", "pod13-spine1"));
        assert!(glob_match("leaf[13]", "leaf3"));
        assert!(!glob_match("leaf[13]", "leaf2"));
        assert!(glob_match("leaf[1-3]", "leaf2"));
        assert!(glob_match("leaf[!1-3]", "leaf4"));
        assert!(glob_match("leaf1", "leaf1"));
        assert!(!glob_match("leaf1", "leaf10"));
        assert!(glob_match("a[b", "a[b"));
    }

    pub(crate) fn small() -> Topology {
        weft_topology::load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example")
    }

    #[test]
    fn switch_and_role_select_their_intersection_and_typos_are_errors() {
        let t = small();
        let names = |s: &BTreeSet<SwitchIdx>| -> Vec<String> {
            s.iter().map(|&i| t.switches[i].name.clone()).collect()
        };
        let sel = |sw: &[&str], roles: &[&str]| {
            select(
                &t,
                &sw.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                &roles.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        assert!(sel(&[], &[]).expect("ok").is_none());
        let s = sel(&["leaf[12]"], &[]).expect("ok").expect("some");
        assert_eq!(names(&s), ["leaf1", "leaf2"]);
        let s = sel(&[], &["spine"]).expect("ok").expect("some");
        assert_eq!(names(&s), ["spine1", "spine2"]);
        assert!(sel(&["leaf9"], &[]).is_err());
        assert!(sel(&[], &["superspine"]).is_err());
        assert!(sel(&["leaf1"], &["spine"]).is_err());
    }
}
