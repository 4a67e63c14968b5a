//! Typed P4Runtime client for Weft: arbitration, pipeline push, batched and pipelined writes,
//! reads, packet I/O, over plain TCP, TLS or mutual TLS.
//!
//! - [`Client`]: one device; [`Client::connect`], [`Client::wait_primary`], [`Client::events`],
//!   [`Client::set_pipeline`], [`Client::write`], [`Client::read`], [`Client::send_packet`].
//! - [`P4Info`]: names ↔ ids, and typed builders ([`P4Info::table_entry`],
//!   [`P4Info::action_call`], [`P4Info::member`], [`P4Info::group`], counters, meters,
//!   registers, packet-out / packet-in).
//! - Bytestrings are always canonical ([`bytes`]), so read-back equals what was written.

pub mod annotations;
pub mod bytes;
mod canon;
mod client;
mod entries;
mod error;
mod p4info;
mod pipeline;

pub use annotations::{DeclaredFormat, Owner, RefersTo};
pub use canon::{
    canonicalize_entity, canonicalize_table_entry, describe_entity, describe_table_entry,
};
pub use client::{
    Client, ClientConfig, Event, Events, Mastership, PipelinePush, TlsConfig, WriteOptions,
};
pub use entries::{
    ActionCall, DecodedPacketIn, GroupBuilder, PacketOutBuilder, TableEntryBuilder, WeightedAction,
    clone_session, multicast_group,
};
pub use error::{Error, MatchKind, ObjectKind, Result, UpdateError, WriteErrors};
pub use p4info::{
    ActionInfo, ActionProfileInfo, ArrayInfo, ControllerHeaderInfo, CounterUnit, DirectInfo,
    MatchFieldInfo, P4Info, PacketMetadataInfo, ParamInfo, TableInfo,
};
/// The generated P4Runtime types, re-exported.
pub use p4runtime_proto as proto;
pub use pipeline::{PipelineConfig, cookie};
pub use tonic::Code;
