//! Weft's reconciler: what each switch should hold compared with what it has ([`plan`]), one
//! core state machine that writes the difference ([`core`]), and the shell that carries its
//! requests out against each switch's SONiC DBs ([`io`]): `weft apply` is one pass of it,
//! `weft run` the loop; [`lock`] keeps two of them from writing one fabric at once.

pub mod apply;
pub mod canary;
pub mod compare;
pub mod core;
pub mod damping;
mod dberr;
pub mod ha;
pub mod history;
pub mod io;
pub mod lock;
pub mod passes;
pub mod plan;
pub mod planfile;
pub mod planning;
pub mod run;
pub mod targets;
pub mod writer;
