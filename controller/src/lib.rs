//! The Weft controller: validation and reporting commands now; compiler, plan and apply next.

pub mod cmd;
pub mod compile;
