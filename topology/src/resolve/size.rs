//! The fabric's size, counted from the generators' parameters before anything is generated.

use super::ctx::Ctx;
use crate::Limits;
use crate::generators;
use crate::model::Intent;
use crate::units::thousands;

/// Refuses a fabric larger than `limits` before any of it is generated (a fat-tree of k=1024
/// would be 1.3 million switches). True when within limits.
pub(super) fn check_size(cx: &mut Ctx, intent: &Intent, limits: &Limits) -> bool {
    let per_gen: Vec<(generators::Counts, &'static str)> =
        intent.generators.iter().map(generators::estimate).collect();
    let explicit = generators::Counts {
        switches: intent.switches.len() as u64,
        hosts: intent.hosts.len() as u64,
        links: intent.links.len() as u64,
        ports: intent.switches.iter().map(|s| s.ports.len() as u64).sum(),
    };
    let total = per_gen
        .iter()
        .fold(explicit, |acc, (c, _)| acc.saturating_add(*c));
    type Pick = fn(&generators::Counts) -> u64;
    let quantities: [(&str, Pick, u64); 4] = [
        ("switches", |c| c.switches, limits.max_switches),
        ("hosts", |c| c.hosts, limits.max_hosts),
        ("switch-to-switch links", |c| c.links, limits.max_links),
        ("ports", |c| c.ports, limits.max_ports),
    ];
    for (what, pick, max) in quantities {
        let n = pick(&total);
        if n <= max {
            continue;
        }
        // Blame the generator that contributes most, or the explicit list.
        let worst = per_gen
            .iter()
            .enumerate()
            .max_by_key(|(_, (c, _))| pick(c))
            .filter(|(_, (c, _))| pick(c) >= pick(&explicit));
        let (path, item) = match worst {
            Some((i, (_, param))) => (
                format!("generators[{i}].{param}"),
                format!("generators[{i}]"),
            ),
            None => {
                let list = match what {
                    "hosts" => "hosts",
                    "switch-to-switch links" => "links",
                    _ => "switches",
                };
                (list.to_string(), list.to_string())
            }
        };
        cx.err_help(
            &path,
            item,
            format!(
                "the fabric would have {} {what}; Weft handles at most {}",
                thousands(n),
                thousands(max)
            ),
            "split the fabric into several intents, or use smaller generator parameters",
        );
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::testing::{errors, first_help};

    #[test]
    fn a_generator_too_large_is_refused_before_it_runs_naming_its_parameter() {
        let yaml = "generators:\n  - kind: fat-tree\n    k: 1024\n";
        let e = errors(yaml);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with(
                "3: the fabric would have 1,310,720 switches; Weft handles at most 16,384"
            ),
            "{e:?}"
        );
        assert_eq!(
            first_help(yaml).as_deref(),
            Some("split the fabric into several intents, or use smaller generator parameters")
        );
    }
}
