//! `weft diff A.yaml B.yaml`: what would change between two intents, per switch
//! (`weft_reconcile::compare`), printed as `weft plan -v` prints changes. Exit 0 the same
//! state everywhere, 3 differences.

use clap::Args;
use weft_reconcile::compare::compare;
use weft_reconcile::plan::{Totals, render_header, render_switch};

use super::Outcome;
use super::intent::{label, load_valid_as};
use crate::args::OutputFormat;

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The intent as it is (or was).
    #[arg(value_name = "A.yaml")]
    pub a: String,
    /// The intent as it would be.
    #[arg(value_name = "B.yaml")]
    pub b: String,
    /// Only the table, one line per switch (no keys and fields).
    #[arg(long, short)]
    pub quiet: bool,
    /// text, json or yaml (README, "Structured output").
    #[arg(long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

pub fn run(a: &DiffArgs) -> anyhow::Result<Outcome> {
    let Some(ta) = load_valid_as(&a.a, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let Some(tb) = load_valid_as(&a.b, a.output)? else {
        return Ok(Outcome::Invalid);
    };
    let c = compare(&ta, &tb)?;
    let changed: Vec<_> = c.switches.iter().filter(|s| !s.is_empty()).collect();
    if a.output.structured() {
        crate::report::emit(
            a.output,
            Some(&tb.name),
            &serde_json::json!({
                "a": {"file": label(&a.a), "fabric": ta.name},
                "b": {"file": label(&a.b), "fabric": tb.name},
                "same": c.same(),
                "only_a": c.only_a,
                "only_b": c.only_b,
                "moved": c.moved,
                "switches": changed,
            }),
        )?;
    } else {
        crate::outln!("{} → {}", label(&a.a), label(&a.b));
        if ta.name != tb.name {
            crate::outln!("fabric name: {} → {}", ta.name, tb.name);
        }
        crate::out!(
            "{}",
            render_header(&tb.name, &[])
                .lines()
                .skip(1)
                .collect::<Vec<_>>()
                .join("\n")
                + "\n"
        );
        let mut totals = Totals::default();
        for s in &changed {
            crate::out!("{}", render_switch(s, !a.quiet));
            totals.count(s);
        }
        for s in &c.only_b {
            crate::outln!("{s:<20} only in {}: everything of it is new", label(&a.b));
        }
        for s in &c.only_a {
            crate::outln!("{s:<20} only in {}: everything of it goes", label(&a.a));
        }
        for m in &c.moved {
            crate::outln!(
                "{:<20} {}: {} → {} (its state written there)",
                m.switch,
                m.what,
                m.a,
                m.b
            );
        }
        let moved: std::collections::BTreeSet<&str> =
            c.moved.iter().map(|m| m.switch.as_str()).collect();
        if c.same() {
            crate::outln!("no differences: both give every switch the same state");
        } else if changed.is_empty() && c.only_a.is_empty() && c.only_b.is_empty() {
            crate::outln!(
                "the same state on every switch; {} switch(es) reached elsewhere",
                moved.len()
            );
        } else {
            crate::outln!(
                "{} of {} switches in both differ; {}",
                changed.len(),
                c.switches.len(),
                totals.line(changed.len())
            );
        }
    }
    Ok(if c.same() {
        Outcome::Ok
    } else {
        Outcome::NotYet
    })
}
