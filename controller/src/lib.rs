//! The `weft` command's library, the shell around Weft's libraries: the command line
//! ([`cli`]), one module per subcommand with its options and output ([`cmd`]), the options
//! several share ([`args`]), logging and a standard output that survives a closed pipe. What
//! the commands do lives in the libraries: compiling (`weft-compiler`), planning and applying
//! (`weft-reconcile`), reading and judging a running fabric (`weft-observe`), the model
//! (`weft-simulate`) and the testbed (`weft-testbed`).

pub mod args;
pub mod cli;
pub mod cmd;
pub mod completion;
pub mod logging;
pub mod out;
pub mod report;
pub mod style;
