//! A small testbed's state, as `up` records it, for the unit tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::state::{HostState, ProcState, State, SwitchState, WireState};

fn switch(name: &str, device: u64, ports: &[(&str, &str)], metrics: Option<&str>) -> SwitchState {
    SwitchState {
        name: name.into(),
        device_id: device,
        p4rt_address: format!("127.0.0.1:{}", 9558 + device),
        db: format!("unix:///run/weft/{name}/redis.sock"),
        thrift_port: 9089 + device as u16,
        interfaces: ports
            .iter()
            .map(|(p, i)| (p.to_string(), i.to_string()))
            .collect::<BTreeMap<_, _>>(),
        metrics: metrics.map(String::from),
        line_rates: ports.iter().map(|(p, _)| (p.to_string(), 2000)).collect(),
    }
}

fn proc(name: &str, pid: u32, dir: &Path) -> ProcState {
    ProcState {
        name: name.into(),
        pid,
        log: dir.join("x.log"),
        cmd: vec!["true".into()],
    }
}

/// spine1 — leaf1 — h1, state in `dir`: every kind of process and cable.
pub(crate) fn state(dir: &Path) -> State {
    State {
        fabric: "lab".into(),
        netns: "weft-lab".into(),
        state_dir: PathBuf::from(dir),
        processes: vec![
            proc("redis spine1", 1, dir),
            proc("bmv2 spine1", 2, dir),
            proc("plugin spine1", 3, dir),
        ],
        switches: vec![
            switch(
                "spine1",
                1,
                &[("Ethernet0", "s1p1")],
                Some("127.0.0.1:19401"),
            ),
            switch(
                "leaf1",
                2,
                &[("Ethernet0", "s2p1"), ("Ethernet4", "s2p2")],
                None,
            ),
        ],
        hosts: vec![HostState {
            name: "h1".into(),
            netns: "weft-lab:h1".into(),
            ipv4: "10.0.0.2".into(),
            ipv6: None,
        }],
        wires: vec![
            WireState {
                a: ("leaf1".into(), "Ethernet4".into()),
                b: ("spine1".into(), "Ethernet0".into()),
                middle: ["w0a".into(), "w0b".into()],
            },
            WireState {
                a: ("leaf1".into(), "Ethernet0".into()),
                b: ("h1".into(), "eth0".into()),
                middle: ["w1a".into(), "w1b".into()],
            },
        ],
        made_dirs: Vec::new(),
    }
}
