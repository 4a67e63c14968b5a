//! Small intents through the whole load, for the unit tests of each resolve stage: a stage is
//! judged by what an operator would see.

use crate::{LoadError, Topology, load_str};

/// The problems `yaml` has, as `LINE: MESSAGE` in report order (empty when it is valid).
pub(crate) fn errors(yaml: &str) -> Vec<String> {
    match load_str(yaml, "t.yaml") {
        Ok(_) => Vec::new(),
        Err(LoadError::Invalid(d)) => d
            .iter()
            .map(|d| format!("{}: {}", d.line, d.message))
            .collect(),
        Err(e) => vec![e.to_string()],
    }
}

/// The help of the first problem `yaml` has.
pub(crate) fn first_help(yaml: &str) -> Option<String> {
    match load_str(yaml, "t.yaml") {
        Err(LoadError::Invalid(d)) => d.first().and_then(|d| d.help.clone()),
        _ => None,
    }
}

/// The topology `yaml` resolves to; panics with the problems when it does not.
pub(crate) fn valid(yaml: &str) -> Topology {
    match load_str(yaml, "t.yaml") {
        Ok(t) => t,
        Err(LoadError::Invalid(d)) => panic!("{d:#?}"),
        Err(e) => panic!("{e}"),
    }
}

/// Two leaves under one spine, one host each: the smallest fabric with every kind of item.
pub(crate) const SMALL: &str = "switches:
  - name: spine1
    role: spine
    ports: [{name: Ethernet0}, {name: Ethernet4}]
  - name: leaf1
    role: leaf
    ports: [{name: Ethernet0}, {name: Ethernet4}]
  - name: leaf2
    role: leaf
    ports: [{name: Ethernet0}, {name: Ethernet4}]
links:
  - {a: leaf1:Ethernet4, b: spine1:Ethernet0}
  - {a: leaf2:Ethernet4, b: spine1:Ethernet4}
hosts:
  - {name: h1, attach: leaf1:Ethernet0}
  - {name: h2, attach: leaf2:Ethernet0}
";

/// Runs `stage` on `yaml`'s intent with a fresh context, for a stage's own output; returns it
/// and the problems the stage reported (`LINE: MESSAGE`).
pub(crate) fn stage<T>(
    yaml: &str,
    stage: impl FnOnce(&mut super::ctx::Ctx, &crate::Intent) -> T,
) -> (T, Vec<String>) {
    let tree = crate::yaml::parse(yaml).expect("YAML");
    let idx = crate::yaml::PathIndex::build(&tree);
    let intent: crate::Intent = serde_yaml_ng::from_str(yaml).expect("intent");
    let mut cx = super::ctx::Ctx::new("t.yaml", &idx);
    let out = stage(&mut cx, &intent);
    let problems = cx
        .finish()
        .iter()
        .map(|d| format!("{}: {}", d.line, d.message))
        .collect();
    (out, problems)
}
