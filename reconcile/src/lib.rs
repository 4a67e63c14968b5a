//! Weft's reconciler: what each switch should hold compared with what it has, and the loops
//! that write the difference (`weft apply` once, `weft run` for ever).

pub mod apply;
pub mod damping;
pub mod plan;
pub mod run;
