//! The `weft` command's library: one module per subcommand. The compiler and the reconciler
//! live in their own crates (`weft-compiler`, `weft-reconcile`), which know nothing of the
//! testbed.

pub mod cmd;
