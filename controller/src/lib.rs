//! The Weft controller: validation and reporting commands now; compiler, plan and apply next.

pub mod apply;
pub mod cmd;
pub mod compile;
pub mod damping;
pub mod plan;
pub mod run;
