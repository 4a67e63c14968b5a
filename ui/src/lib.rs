//! The live fabric page (`weft ui FILE`, `weft run FILE --ui ADDR`): one read-only page served
//! by the binary, its script and style embedded, updated by server-sent events.
//!
//! ```text
//!  Source (switch DBs | Prometheus + STATE_DB) ──read each interval──▶ reading::Reading
//!    ─▶ page::Page::update (pure): switch and link states, rates (rates), the diagnosis
//!       window (weft-diagnose's rules), the timeline (run), the history (history)
//!    ─▶ page::Frame ──JSON──▶ server: `frame` events to every open page; drill-downs (drill)
//!  layout::layout(topology): tiers and groups, once
//! ```
//!
//! Nothing on the page acts on the fabric: the server answers GET only. Unknown is its own
//! state everywhere: a switch without plugin data is `unknown`, a link without counters from a
//! live plugin has no utilisation, a diagnosis over fewer than two samples says it is
//! collecting.

pub mod drill;
pub mod history;
pub mod layout;
pub mod page;
pub mod rates;
pub mod reading;
pub mod run;
pub mod server;
pub mod source;

pub use server::{ListenError, UiError, UiHook, UiOptions, UiServer, parse_listen, serve};
pub use source::{DbSource, PromSource, Source};
