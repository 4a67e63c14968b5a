//! An emulated fabric on one machine, built from the same intent the controller compiles.
//!
//! ```text
//!  root namespace                    fabric namespace  weft-<fabric>
//!  ──────────────                    ──────────────────────────────────────────────────
//!  redis-server per switch  ◀─unix─▶ weft-plugin per switch ──P4Runtime──▶ BMv2 per switch
//!  (the switch's SONiC DB,            (netlink sees the veths)               -i <id>@s<dev>p<id>
//!   at the intent's `db`)                                                      │
//!                                    s1p3 ═══ veth ═══ s4p1   (switch-to-switch links)
//!                                    s3p1 ═══ veth ═══╗
//!  host namespace weft-<fabric>:<host>: eth0 ═════════╝  /32 address, default route to the
//!                                                        leaf's router MAC (static neighbour)
//! ```
//! Everything started is recorded in `<state-dir>/state.json` (PIDs, namespaces), so `down`
//! removes it all, also after a crash. BMv2 and the plugins live in the fabric namespace, whose
//! loopback carries P4Runtime; the controller reaches the switches only through their Redis.
//!
//! | module | what |
//! |---|---|
//! | [`up`] | `up` and `down`: namespaces, cables, host interfaces, then the switches |
//! | [`switches`] | each switch's Redis, BMv2 and plugin: options, command lines, start, kill, restart |
//! | [`wires`] | the cables: veths through the wires namespace, pulled and plugged back |
//! | [`claims`] | the sockets, ports and namespaces a testbed takes; refusing to take another's |
//! | [`names`] | namespace, interface and directory names; where a switch's Redis listens |
//! | [`state`] | the state file: what a testbed started |
//! | [`status`] | which of its processes run, which host namespaces exist |
//! | [`exec`] | commands and processes: run, spawn with a log, wait, signal |
//! | [`programs`] | where BMv2, redis-server and the plugin are |
//! | [`prometheus`] | a scrape configuration for the plugins and the controller |
//! | [`traffic`] | pings, paced UDP streams, failover trials |
//! | [`fault`], [`chaos`], [`workload`] | faults, chaos trials and workloads on a running testbed |
//! | [`acl`], [`tls`] | Redis ACL users and P4Runtime mutual TLS |

pub mod acl;
pub mod campaign;
pub mod chaos;
pub mod claims;
mod error;
pub mod exec;
pub mod fault;
#[cfg(test)]
mod fixtures;
pub mod names;
pub mod programs;
pub mod prometheus;
pub mod state;
pub mod status;
pub mod switches;
pub mod tls;
pub mod traffic;
pub mod up;
pub mod wires;
pub mod workload;
pub mod workload_report;

pub use error::TestbedError;
pub(crate) use error::{Result, io};
pub(crate) use exec::{kill, wait_for};
pub use exec::{pid_alive, run};
pub use names::{default_state_dir, fabric_netns, host_netns, wires_netns};
pub(crate) use names::{tcp_port, unix_path};
pub use programs::Programs;
pub(crate) use programs::find;
pub use prometheus::prometheus_config;
pub use state::{HostState, ProcState, State, SwitchState, WireState};
pub use status::{DbStatus, HostStatus, ProcessStatus, StatusReport, status, status_report};
pub use switches::{
    METRICS_BASE_PORT, UpOptions, controller_metrics_addr, kill_process, plugin_args,
    plugin_metrics_addr, restart_process,
};
pub use traffic::{
    FailoverTrial, LateSend, LossRun, SenderReport, Stream, StreamResult, UDP_PROBE, busiest_port,
    failover_trial, ping_all, port_tx, port_tx_packets, spread, stream,
};
pub use up::{down, up};
pub use wires::{flap, peer, set_link, uplinks};
