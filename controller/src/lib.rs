//! The `weft` command's library: the command line ([`cli`]), one module per subcommand
//! ([`cmd`]), logging and a standard output that survives a closed pipe. The compiler and the
//! reconciler live in their own crates (`weft-compiler`, `weft-reconcile`), which know nothing
//! of the testbed.

pub mod cli;
pub mod cmd;
pub mod logging;
pub mod out;
pub mod targets;
