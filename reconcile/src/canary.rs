//! `weft apply --canary N`: which switches go first ([`canaries`]) and what they must show
//! before the rest is written ([`verify`]).

use std::collections::{BTreeMap, BTreeSet};

use weft_compiler::Compiler;
use weft_compiler::down::link_state;
use weft_topology::{LinkIdx, SwitchIdx, Topology};

use crate::core::SwitchResult;
use crate::plan;

/// `n` canaries among `among`, deterministically: the first switch of each role (lowest tier
/// first, in intent order), then the second of each role, and so on.
pub fn canaries(t: &Topology, among: &BTreeSet<SwitchIdx>, n: usize) -> BTreeSet<SwitchIdx> {
    let mut by_role: BTreeMap<u8, Vec<SwitchIdx>> = Default::default();
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

/// After the canary pass: every canary took everything, its plugin runs and reading it again
/// leaves nothing to plan. Returns the problems, one line each; a pass that did not wait for
/// answers is one (nothing was verified).
pub async fn verify(
    t: &Topology,
    info: &weft_p4rt::P4Info,
    down: &BTreeSet<LinkIdx>,
    canaries: &BTreeSet<SwitchIdx>,
    results: &[SwitchResult],
    waited: bool,
) -> Vec<String> {
    let mut problems: Vec<String> = results
        .iter()
        .filter(|r| !r.ok())
        .map(|r| {
            format!(
                "{}: {}",
                r.switch,
                r.error.clone().unwrap_or_else(|| format!(
                    "{} entries refused or not answered",
                    r.failed.len()
                ))
            )
        })
        .collect();
    if !problems.is_empty() {
        return problems;
    }
    if !waited {
        // Without answers nothing says a canary took its entries: never "verified".
        problems.push(
            "canaries cannot be verified without waiting for their plugins' answers (--no-wait)"
                .into(),
        );
        return problems;
    }
    let sel = Some(canaries.clone());
    let now = crate::planning::read_selected(t, &sel, 64).await;
    let compiler = Compiler::new(t, link_state(t, down));
    for &si in canaries {
        let name = &t.switches[si].name;
        if !now[si].trusted() {
            problems.push(format!("{name}: {}", now[si].describe()));
            continue;
        }
        let sw = &compiler.switches()[si];
        match plan::desired_switch(t, info, sw, si) {
            Ok(d) => {
                let p = plan::diff(t, si, sw, d, &now[si], down, plan::Views::Without);
                if !p.is_empty() {
                    problems.push(format!(
                        "{name}: read back, {} changes are still to make",
                        p.changes()
                    ));
                }
            }
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canaries_take_one_switch_per_role_before_a_second() {
        let t = crate::targets::tests::small();
        let all: BTreeSet<SwitchIdx> = (0..t.switches.len()).collect();
        let c = canaries(&t, &all, 2);
        let roles: BTreeSet<&str> = c.iter().map(|&i| t.switches[i].role.as_str()).collect();
        assert_eq!(roles.len(), 2, "one leaf and one spine");
        assert_eq!(canaries(&t, &all, 3).len(), 3);
        assert_eq!(canaries(&t, &all, 100).len(), all.len());
        assert_eq!(canaries(&t, &all, 2), c, "deterministic");
    }
}
