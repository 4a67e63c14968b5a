//! Weft's per-switch daemon (the SONiC p4orch role): it takes APPL_DB `P4RT_TABLE` and the
//! CONFIG_DB QoS tables of one switch's SONiC Redis and programs Weft's pipeline over
//! P4Runtime, answers every key, and reports port state, PFC watchdog state and counters back.
//! What it decides is [`crate::core`] (no I/O, explicit time, golden-stepped); [`daemon`] is the edge
//! that feeds it and carries out what it asks.
//!
//! ```text
//!            SONiC Redis (one per switch)                         weft-plugin                          switch
//!  APPL_DB P4RT_TABLE ──consumer task──► Batch ─► core (translate, diff, stages: engine) ─P4Runtime─► BMv2
//!  APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL ◄── ResponsePublisher ◄─ Answer                                │
//!  APPL_STATE_DB P4RT_TABLE ◄──────────────┘  (and APPL_DB reverted for failed keys)                  │
//!  CONFIG_DB (PORT, QoS, PFC_WD) ──keyspace task──► core: intent, features ─► owned objects ─────────►│
//!  STATE_DB PORT_TABLE|EthernetN ◄── port thread (PortCore) ◄── netlink / sysfs ─ port_status_table ──►│
//!  STATE_DB PFC_WD_STATE, COUNTERS_DB ◄── watchdog + counter polls ◄──────────── counter reads ◄─────────┘
//!  STATE_DB WEFT_PLUGIN|status ◄── status tick; SIGUSR1 → health line in the log
//! ```
//!
//! Start-up and every reconnect (switch restarted, Redis restarted, plugin restarted): become
//! primary, push the pipeline if the cookie differs, full sync (switch := APPL_STATE_DB +
//! plugin-owned state), then replay keys the previous run popped but never answered (APPL_DB
//! live table ≠ APPL_STATE_DB), then consume.

pub mod clock;
pub mod config;
pub mod core;
pub mod counters;
pub mod daemon;
pub mod engine;
pub mod exec;
pub mod features;
pub mod intent;
pub mod objects;
pub mod pipeline;
pub mod polls;
pub mod ports;
pub mod qos;
pub mod sim;
pub mod translate;
pub mod tuning;
pub mod watchdog;

pub use weft_sonic_db::StatusCode;
