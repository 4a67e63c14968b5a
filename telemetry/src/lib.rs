//! Weft's observability: the Prometheus metrics the plugin and the controller serve
//! ([`metrics`]), the alerting rules written from them ([`rules`]), and the tiny HTTP server
//! that serves them ([`server`]).
//!
//! Everything is encoded by `prometheus-client` (OpenMetrics text); names follow Prometheus
//! conventions: `weft_` prefix, base units in the name, counters end in `_total`, and every
//! switch-side series carries a `switch` label (plus `port`, `queue`, `priority` where they
//! apply), so one Prometheus scraping every plugin sees the whole fabric.

pub mod metrics;
pub mod postcard;
pub mod rules;
pub mod server;

pub use metrics::{ControllerMetrics, PluginMetrics, SwitchSnapshot};
pub use server::{MetricsServer, serve};
