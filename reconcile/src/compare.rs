//! `weft diff A.yaml B.yaml`: what would change, switch by switch, if a fabric holding A's
//! compiled state were given B (all links up in both). The same diff as `weft plan`, with A's
//! desired state in place of what a switch holds.

use std::collections::BTreeSet;

use weft_compiler::Compiler;
use weft_compiler::down::link_state;
use weft_compiler::p4map;
use weft_topology::Topology;

use crate::plan::{self, DesiredError, Installed, SwitchPlan};

/// Two intents compared.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Switches in both, each with B's changes over A (empty plans included).
    pub switches: Vec<SwitchPlan>,
    /// Switches only B has (everything of theirs is new) and only A has (all of it goes).
    pub only_b: Vec<String>,
    pub only_a: Vec<String>,
    /// Switches in both that B reaches elsewhere (another DB, P4Runtime address or device
    /// id): applying B writes the same state to another place.
    pub moved: Vec<Moved>,
}

/// One way B reaches a switch differently from A.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Moved {
    pub switch: String,
    /// `db`, `p4rt_address` or `device_id`.
    pub what: &'static str,
    pub a: String,
    pub b: String,
}

impl Comparison {
    /// Whether the two intents give every switch the same state.
    pub fn same(&self) -> bool {
        self.only_a.is_empty()
            && self.only_b.is_empty()
            && self.moved.is_empty()
            && self.switches.iter().all(SwitchPlan::is_empty)
    }
}

/// Why two intents could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("the pipeline's P4Info")]
    P4Info(#[source] weft_p4rt::Error),
    #[error(transparent)]
    Desired(#[from] DesiredError),
}

/// B's changes over A, per switch (by name; a switch both have is compared whatever else
/// about it changed).
pub fn compare(a: &Topology, b: &Topology) -> Result<Comparison, CompareError> {
    let info = p4map::pipeline_p4info().map_err(CompareError::P4Info)?;
    let ca = Compiler::new(a, link_state(a, &Default::default()));
    let cb = Compiler::new(b, link_state(b, &Default::default()));
    let names_a: BTreeSet<&str> = a.switches.iter().map(|s| s.name.as_str()).collect();
    let mut out = Comparison {
        switches: Vec::new(),
        only_b: Vec::new(),
        only_a: Vec::new(),
        moved: Vec::new(),
    };
    for (bi, s) in b.switches.iter().enumerate() {
        let Some(ai) = a.switch_index(&s.name) else {
            out.only_b.push(s.name.clone());
            continue;
        };
        out.moved.extend(moved(&a.switches[ai], s));
        let was = plan::desired_switch(a, &info, &ca.switches()[ai], ai)?;
        let want = plan::desired_switch(b, &info, &cb.switches()[bi], bi)?;
        let mut p = plan::diff(
            b,
            bi,
            &cb.switches()[bi],
            want,
            &Installed::holding(&was, None),
            &Default::default(),
            plan::Views::Without,
        );
        p.installed_from = String::new();
        out.switches.push(p);
    }
    let names_b: BTreeSet<&str> = b.switches.iter().map(|s| s.name.as_str()).collect();
    out.only_a = names_a
        .difference(&names_b)
        .map(|s| s.to_string())
        .collect();
    Ok(out)
}

fn moved(a: &weft_topology::Switch, b: &weft_topology::Switch) -> Vec<Moved> {
    let pairs = [
        ("db", a.db.clone(), b.db.clone()),
        (
            "p4rt_address",
            a.p4rt_address.clone(),
            b.p4rt_address.clone(),
        ),
        (
            "device_id",
            a.device_id.to_string(),
            b.device_id.to_string(),
        ),
    ];
    pairs
        .into_iter()
        .filter(|(_, x, y)| x != y)
        .map(|(what, a_, b_)| Moved {
            switch: b.name.clone(),
            what,
            a: a_,
            b: b_,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(edit: impl Fn(String) -> String) -> Topology {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topology/examples/leaf-spine-small.yaml"
        ))
        .expect("example");
        weft_topology::load_str(&edit(text), "small.yaml").expect("valid")
    }

    #[test]
    fn an_intent_compared_with_itself_changes_nothing_and_a_longer_cable_changes_pfc_headroom() {
        let a = small(|t| t);
        assert!(compare(&a, &a).expect("compare").same());
        let b = small(|t| t.replace("cable_length: 3m", "cable_length: 100m"));
        let c = compare(&a, &b).expect("compare");
        assert!(!c.same());
        assert!(c.only_a.is_empty() && c.only_b.is_empty());
        let rows: usize = c.switches.iter().map(|s| s.config_set.len()).sum();
        assert!(
            rows > 0,
            "headroom follows the cable: CONFIG_DB rows change"
        );
        assert!(
            c.switches
                .iter()
                .all(|s| s.add.is_empty() && s.delete.is_empty()),
            "routes do not"
        );
        let d = small(|t| t.replace("leaves: 4", "leaves: 3"));
        let c = compare(&a, &d).expect("compare");
        assert_eq!(c.only_a, ["leaf4"]);
        assert!(
            c.switches.iter().any(|s| !s.delete.is_empty()),
            "routes to leaf4 go"
        );
        let e = small(|t| t + "\nswitches:\n  - name: leaf2\n    db: redis://127.0.0.1:7777\n");
        let c = compare(&a, &e).expect("compare");
        assert!(!c.same(), "the same state, written elsewhere");
        assert!(c.switches.iter().all(SwitchPlan::is_empty));
        assert_eq!(c.moved.len(), 1);
        assert_eq!(
            (c.moved[0].switch.as_str(), c.moved[0].what),
            ("leaf2", "db")
        );
        assert_eq!(c.moved[0].b, "redis://127.0.0.1:7777");
    }
}
