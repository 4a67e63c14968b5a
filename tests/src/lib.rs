//! placeholder
pub mod bmv2;
pub mod etcd;
pub mod redis;
