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
//!
//! Without the default `client` feature the crate is only [`endpoint`], the endpoint syntax that
//! needs no Redis client (for the intent checker, which must not build one).

#[cfg(feature = "client")]
mod consumer;
#[cfg(feature = "client")]
mod db;
#[cfg(feature = "client")]
pub mod digest;
pub mod endpoint;
#[cfg(feature = "client")]
mod error;
#[cfg(feature = "client")]
mod p4rt;
#[cfg(feature = "client")]
mod producer;
#[cfg(feature = "client")]
mod response;
#[cfg(feature = "client")]
mod scripts;
#[cfg(feature = "client")]
mod subscriber;
#[cfg(feature = "client")]
mod table;
#[cfg(feature = "client")]
mod types;
#[cfg(feature = "client")]
pub mod zmq;

#[cfg(feature = "client")]
pub use consumer::{ConsumerStateTable, DEFAULT_POLL_INTERVAL, MAX_POP_PER_SCRIPT};
#[cfg(feature = "client")]
pub use db::{
    CREDENTIALS_ENV, DbConnection, RedisEndpoint, SonicDb, SonicDbConfig, SonicDbId,
    read_credentials,
};
#[cfg(feature = "client")]
pub use digest::{Digest, KeyedDigest};
#[cfg(feature = "client")]
pub use error::{CredentialsError, P4rtError, SonicDbError, fenced_reason, fenced_term};
#[cfg(feature = "client")]
pub use p4rt::{
    FIELD_ACTION, FIELD_ACTIONS, FIELD_CONTROLLER_METADATA, FIELD_METER_CBURST, FIELD_METER_CIR,
    FIELD_METER_PBURST, FIELD_METER_PIR, MATCH_PREFIX, P4RT_TABLE, P4rtAction, P4rtActionSpec,
    P4rtEntry, P4rtKey, P4rtMeter, P4rtTableKind, P4rtTableNames, PARAM_PREFIX, WeightedAction,
    action_set_json, sonic_table_name,
};
#[cfg(feature = "client")]
pub use producer::{
    DEFAULT_KEYS_PER_SCRIPT, ProducerStateTable, StateTableNames, TABLE_UPDATE_NOTIFICATION,
};
#[cfg(feature = "client")]
pub use response::{
    EntryResult, Response, ResponseParseError, ResponsePublisher, ResponseWaiter, StatusCode,
    WaitOutcome, response_channel, response_channel_at, response_message,
};
#[cfg(feature = "client")]
pub use scripts::TERM_KEY;
#[cfg(feature = "client")]
pub use subscriber::{SubscriberOptions, SubscriberStateTable, TableWatcher};
#[cfg(feature = "client")]
pub use table::{P4rtSnapshot, Table, claim_term, dump_tables, held_term, merge_hash};
#[cfg(feature = "client")]
pub use types::{FieldValues, KeyOpFieldValues, Op};
