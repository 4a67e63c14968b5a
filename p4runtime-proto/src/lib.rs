//! P4Runtime protobuf messages and gRPC client/server stubs.
//!
//! Compiled at build time from `p4runtime.fds.bin`, a FileDescriptorSet extracted from the PyPI
//! packages `p4runtime` and `googleapis-common-protos` by `gen-fds.py` (the schema is never
//! copied from `.proto` text). Modules follow the protobuf packages: [`p4::v1`],
//! [`p4::config::v1`], [`google::rpc`]. `google.protobuf.Any` maps to [`prost_types::Any`].

#![allow(clippy::all, missing_docs, rustdoc::all)]

include!(concat!(env!("OUT_DIR"), "/p4runtime_includes.rs"));

mod ext;

pub use prost;
pub use prost_types;
pub use tonic;

/// The serialized FileDescriptorSet this crate was compiled from.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("../p4runtime.fds.bin");
