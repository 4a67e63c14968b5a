//! `--switch NAME|GLOB` and `--role ROLE`: which switches a command reads and writes, and the
//! canaries of `weft apply --canary N`.

use std::collections::BTreeSet;

use anyhow::bail;
use weft_topology::{SwitchIdx, Topology};

use crate::cli::Targets;

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

/// The switches `--switch` and `--role` select (`None`: every switch, neither was given).
/// A pattern or role that selects nothing is an error, so a typo never means "all".
pub fn select(t: &Topology, targets: &Targets) -> anyhow::Result<Option<BTreeSet<SwitchIdx>>> {
    if targets.switches.is_empty() && targets.roles.is_empty() {
        return Ok(None);
    }
    let patterns: Vec<&str> = targets
        .switches
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    let roles: Vec<String> = targets
        .roles
        .iter()
        .map(|r| r.trim().to_ascii_lowercase())
        .filter(|r| !r.is_empty())
        .collect();
    for r in &roles {
        if !t.switches.iter().any(|s| s.role.as_str() == r) {
            let known: BTreeSet<&str> = t.switches.iter().map(|s| s.role.as_str()).collect();
            bail!(
                "--role {r}: no switch of fabric {} has that role (roles: {})",
                t.name,
                known.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
    }
    for p in &patterns {
        if !t.switches.iter().any(|s| glob_match(p, &s.name)) {
            bail!("--switch {p}: matches no switch of fabric {}", t.name);
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
        bail!("--switch and --role together select no switch");
    }
    Ok(Some(set))
}

/// Whether switch `si` is selected.
pub fn selected(sel: &Option<BTreeSet<SwitchIdx>>, si: SwitchIdx) -> bool {
    sel.as_ref().is_none_or(|s| s.contains(&si))
}

/// `n` canaries among `among`, deterministically: the first switch of each role (lowest tier
/// first, in intent order), then the second of each role, and so on.
pub fn canaries(t: &Topology, among: &BTreeSet<SwitchIdx>, n: usize) -> BTreeSet<SwitchIdx> {
    let mut by_role: std::collections::BTreeMap<u8, Vec<SwitchIdx>> = Default::default();
    for &si in among {
        by_role
            .entry(t.switches[si].role.tier())
            .or_default()
            .push(si);
    }
    let mut out = BTreeSet::new();
    let mut round = 0;
    while out.len() < n.min(among.len()) {
        for list in by_role.values() {
            if out.len() >= n {
                break;
            }
            if let Some(&si) = list.get(round) {
                out.insert(si);
            }
        }
        round += 1;
    }
    out
}

#[cfg(test)]
mod tests {
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

    fn small() -> Topology {
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
                &Targets {
                    switches: sw.iter().map(|s| s.to_string()).collect(),
                    roles: roles.iter().map(|s| s.to_string()).collect(),
                },
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

    #[test]
    fn canaries_take_one_switch_per_role_before_a_second() {
        let t = small();
        let all: BTreeSet<SwitchIdx> = (0..t.switches.len()).collect();
        let c = canaries(&t, &all, 2);
        let roles: BTreeSet<&str> = c.iter().map(|&i| t.switches[i].role.as_str()).collect();
        assert_eq!(roles.len(), 2, "one leaf and one spine");
        assert_eq!(canaries(&t, &all, 3).len(), 3);
        assert_eq!(canaries(&t, &all, 100).len(), all.len());
        assert_eq!(canaries(&t, &all, 2), c, "deterministic");
    }
}
