//! SONiC's Redis databases as Weft uses them: the database catalogue, swss-common's producer/consumer
//! state tables (wire-compatible), plain tables, keyspace-notification subscribers, the P4RT_TABLE entry
//! format of SONiC's P4RT app, and the response path (notifications + APPL_STATE_DB).
//!
//! ```text
//!  weft (controller)                          switch Redis                       sonic-plugin
//!  P4rtEntry ─► ProducerStateTable ─► APPL_DB P4RT_TABLE (_KEY_SET, _T:K) ─► ConsumerStateTable
//!  ResponseWaiter ◄── APPL_DB_P4RT_TABLE_RESPONSE_CHANNEL ◄────────────────── ResponsePublisher
//!  Table (diff base) ◄─ APPL_STATE_DB P4RT_TABLE:K ◄──────────────────────────┘
//!  Table ─► CONFIG_DB QoS tables ─────────────────────────────────────────► SubscriberStateTable
//!  SubscriberStateTable ◄─ STATE_DB PORT_TABLE|EthernetN ◄────────────────── Table
//! ```
//!
//! Keyspace notifications: [`SubscriberStateTable`] needs `notify-keyspace-events` to include `K` and the
//! `g` and `h` classes (SONiC ships `AKE`). A plain redis-server has them off; the subscriber turns them on
//! with `CONFIG SET` unless told not to ([`SubscriberOptions::allow_config_set`]).

mod consumer;
mod db;
pub mod digest;
mod error;
mod p4rt;
mod producer;
mod response;
mod scripts;
mod subscriber;
mod table;
mod types;
pub mod zmq;

pub use consumer::{ConsumerStateTable, DEFAULT_POLL_INTERVAL, MAX_POP_PER_SCRIPT};
pub use db::{
    CREDENTIALS_ENV, DbConnection, RedisEndpoint, SonicDb, SonicDbConfig, SonicDbId,
    read_credentials,
};
pub use digest::{Digest, KeyedDigest};
pub use error::{P4rtError, SonicDbError};
pub use p4rt::{
    FIELD_ACTION, FIELD_ACTIONS, FIELD_CONTROLLER_METADATA, FIELD_METER_CBURST, FIELD_METER_CIR,
    FIELD_METER_PBURST, FIELD_METER_PIR, MATCH_PREFIX, P4RT_TABLE, P4rtAction, P4rtActionSpec,
    P4rtEntry, P4rtKey, P4rtMeter, P4rtTableKind, P4rtTableNames, PARAM_PREFIX, WeightedAction,
    action_set_json, sonic_table_name,
};
pub use producer::{
    DEFAULT_KEYS_PER_SCRIPT, ProducerStateTable, StateTableNames, TABLE_UPDATE_NOTIFICATION,
};
pub use response::{
    EntryResult, Response, ResponsePublisher, ResponseWaiter, StatusCode, WaitOutcome,
    response_channel, response_message,
};
pub use scripts::TERM_KEY;
pub use subscriber::{SubscriberOptions, SubscriberStateTable, TableWatcher};
pub use table::{P4rtSnapshot, Table, claim_term, dump_tables, held_term, merge_hash};
pub use types::{FieldValues, KeyOpFieldValues, Op};
