//! Weft's test harness: the real processes Weft's tests run against, each started on private
//! loopback ports or sockets and killed by PID when its guard drops, also when a test fails.
//!
//! | module | what | missing binary |
//! |---|---|---|
//! | [`redis`] | `redis-server` on a Unix socket in a temporary directory (optionally TCP), one per test | a failure (setup installs it) |
//! | [`bmv2`] | BMv2 `simple_switch_grpc` without a program, on free ports; [`bmv2::ProcessGuard`] for any child | `SKIPPED`, a failure under `WEFT_REQUIRE_BMV2=1` |
//! | [`etcd`] | etcd with a short election timeout, data in a temporary directory | the caller decides (`WEFT_REQUIRE_ETCD=1` in `scripts/test.sh`) |
//! | [`process`] | the CPU a process has used (benches) | — |
//!
//! It depends on `std` only, so every crate takes it as a dev-dependency, low layers included.
//!
//! The tiers of tests, from fast to slow (`scripts/test.sh` runs them all):
//!
//! 1. unit tests beside the code, and golden files of the pure cores (compiler, reconciler,
//!    plugin steps): no process, no I/O;
//! 2. integration tests of one crate against a real `redis-server` (SONiC DB tables, the
//!    reconciler's and the plugin's I/O edges) or a real etcd (`weft run --ha`);
//! 3. P4Runtime and packet tests against real BMv2, one switch (`p4rt`, the plugin) or a whole
//!    emulated fabric (`weft testbed`: namespaces, veths, one BMv2, Redis and plugin per
//!    switch), skipped where BMv2 is not installed;
//! 4. the workspace's house rules (`tests/house.rs`): function length, typed library errors,
//!    crate layers, import cycles, the harness taken by dependency.

pub mod bmv2;
pub mod etcd;
pub mod process;
pub mod redis;
