//! placeholder
pub mod bmv2;
pub mod redis;
