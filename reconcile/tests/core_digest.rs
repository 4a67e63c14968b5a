//! `weft run`'s core reading by digest: at the start (and every resync) a switch whose plugin,
//! in sync, publishes the desired state's digests is known without its rows; the core then
//! behaves exactly as if it had read them (no write at the start, the same write batches after
//! a link goes down), and a digest that no longer matches makes it read the rows.

use std::sync::Arc;

use weft_compiler::{Compiler, LinkState, p4map};
use weft_reconcile::core::{Answer, Batch, Core, CoreConfig, Input, Output};
use weft_reconcile::plan::{Installed, Source, desired_switch};
use weft_sonic_schema::state::{InstalledDigests, PluginState, PluginStatus};
use weft_topology::Topology;

const MS: u64 = 1_000_000;

/// Write batches as they were asked for: (switch, batch).
type Writes = Vec<(usize, Arc<Batch>)>;
/// Reads as they were asked for: (switch, whether digests were expected).
type Reads = Vec<(usize, bool)>;

fn topology() -> Topology {
    weft_topology::load_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/steps/fabric.yaml"
    ))
    .expect("the steps' fabric is valid")
}

fn running(d: Option<&InstalledDigests>) -> PluginStatus {
    let mut s = PluginStatus::fresh(PluginState::Running, "test");
    if let Some(d) = d {
        s.set_digests(d);
    }
    s
}

/// Every write the outputs ask for, as (switch, batch), answered at once; reads answered by
/// `read` (switch, expected digests) → what the switch returns.
fn settle(
    c: &mut Core,
    now: u64,
    mut outs: Vec<Output>,
    read: &mut dyn FnMut(usize, Option<InstalledDigests>) -> Installed,
    writes: &mut Writes,
    reads: &mut Reads,
) {
    while !outs.is_empty() {
        let mut next = Vec::new();
        for o in outs {
            match o {
                Output::Read {
                    switch,
                    ticket,
                    expect,
                } => {
                    reads.push((switch, expect.is_some()));
                    next.extend(c.step(
                        now,
                        Input::ReadBack {
                            switch,
                            ticket,
                            result: Ok(Box::new(read(switch, expect))),
                        },
                    ))
                }
                Output::Write {
                    switch,
                    ticket,
                    batch,
                } => {
                    let answers = match &*batch {
                        Batch::Config { set, del } => set
                            .iter()
                            .map(|r| Answer::ok(r.redis_key()))
                            .chain(del.iter().map(Answer::ok))
                            .collect(),
                        Batch::Entries { ops, .. } => {
                            ops.iter().map(|(k, _)| Answer::ok(k.clone())).collect()
                        }
                    };
                    writes.push((switch, batch.clone()));
                    next.extend(c.step(
                        now,
                        Input::Written {
                            switch,
                            ticket,
                            result: Ok(answers),
                        },
                    ))
                }
                _ => {}
            }
        }
        outs = next;
    }
}

/// The core started on a fabric that holds its desired state, its reads answered by digest
/// (`by_digest`) or by the rows; then one leaf uplink down. Returns the reads (switch, whether
/// a digest was expected) and the writes after the link went down.
fn start_then_link_down(t: &Topology, by_digest: bool) -> (Reads, Writes, usize) {
    let info = Arc::new(p4map::pipeline_p4info().expect("P4Info"));
    let c0 = Compiler::new(t, LinkState::all_up(t));
    let held: Vec<_> = c0
        .switches()
        .iter()
        .enumerate()
        .map(|(si, sw)| desired_switch(t, &info, sw, si).expect("desired"))
        .collect();
    let mut c = Core::new(t, info.clone(), CoreConfig::run(3_600_000 * MS));
    let (mut reads, mut start_writes) = (Vec::new(), Vec::new());
    let mut read = |si: usize, expect: Option<InstalledDigests>| {
        let d = held[si].digests();
        let status = running(Some(&d));
        match expect {
            Some(want) if by_digest => {
                Installed::by_digest(status, &want).expect("the published digests match")
            }
            _ => Installed::holding(&held[si], Some(status)),
        }
    };
    let outs = c.step(0, Input::Start);
    settle(&mut c, 0, outs, &mut read, &mut start_writes, &mut reads);
    let started = start_writes.len();
    // A leaf's uplink goes down.
    let leaf = t
        .switches
        .iter()
        .position(|s| s.name == "leaf1")
        .expect("leaf1");
    let port = t
        .links
        .iter()
        .find_map(|l| (l.a.switch == leaf).then_some(l.a))
        .expect("a link of leaf1");
    let outs = c.step(
        MS,
        Input::Port {
            port,
            up: false,
            seen: MS,
        },
    );
    let mut writes = Vec::new();
    settle(&mut c, MS, outs, &mut read, &mut writes, &mut reads);
    (reads, writes, started)
}

#[test]
fn a_fabric_known_by_digest_writes_nothing_at_start_and_the_same_batches_after_a_link_down() {
    let t = topology();
    let (reads_d, writes_d, started_d) = start_then_link_down(&t, true);
    let (_, writes_r, started_r) = start_then_link_down(&t, false);
    assert!(
        reads_d.iter().all(|(_, expected)| *expected),
        "every start read asks for digests: {reads_d:?}"
    );
    assert_eq!(reads_d.len(), t.switches.len(), "one read per switch");
    assert_eq!(started_d, 0, "nothing differs: nothing is written at start");
    assert_eq!(started_r, 0);
    assert!(!writes_r.is_empty(), "a link down changes routes");
    let show = |w: &[(usize, Arc<Batch>)]| format!("{w:?}");
    assert_eq!(
        show(&writes_d),
        show(&writes_r),
        "known by digest, the core writes what it writes after reading the rows"
    );
}

#[test]
fn a_digest_that_no_longer_matches_makes_the_core_read_the_rows() {
    let t = topology();
    let info = Arc::new(p4map::pipeline_p4info().expect("P4Info"));
    let mut c = Core::new(&t, info, CoreConfig::run(3_600_000 * MS));
    let outs = c.step(0, Input::Start);
    let mut again = Vec::new();
    for o in outs {
        if let Output::Read {
            switch,
            ticket,
            expect: Some(want),
        } = o
        {
            // The read found digests matching what was expected, but the answer carries other
            // ones (the desired state moved while it was under way).
            let mut other = want;
            other
                .config
                .add("PORT|Ethernet999", &vec![("mtu".into(), "1500".into())]);
            let mut inst = Installed::by_digest(running(Some(&want)), &want).expect("match");
            inst.source = Source::Digest(other);
            again.extend(c.step(
                0,
                Input::ReadBack {
                    switch,
                    ticket,
                    result: Ok(Box::new(inst)),
                },
            ));
        }
    }
    let rows: Vec<_> = again
        .iter()
        .filter_map(|o| match o {
            Output::Read { switch, expect, .. } => Some((*switch, expect.is_none())),
            _ => None,
        })
        .collect();
    assert_eq!(rows.len(), t.switches.len(), "each switch is read again");
    assert!(
        rows.iter().all(|(_, by_rows)| *by_rows),
        "by its rows: {rows:?}"
    );
}
