//! What Weft reads of a running fabric and how it judges it, for every command and view that
//! shows an operator the fabric (`weft status`, `doctor`, `top`, `trace`, `show queues|pfcwd`,
//! `graph`, `diagnose`'s sampling):
//!
//! ```text
//!  each switch's SONiC DBs ──read──▶ read::SwitchRead (ok / no data / stale / unreachable)
//!    STATE_DB PORT_TABLE, plugin status, lock ─▶ switch::SwitchView ─▶ doctor::checks
//!    COUNTERS_DB ─▶ top::Snapshot ──two, dt apart──▶ top::view (rates, rankings)
//!                ─▶ counters::queue_rows, pfcwd_rows
//!    COUNTERS_DB + STATE_DB packed per switch, or Prometheus ─▶ source::{db, prometheus}
//!                ─▶ weft-diagnose (`diagnose`'s window, from a handful of switches to k=64)
//!    STATE_DB WEFT_POSTCARDS ─▶ trace::analyse (beside the compiled tables' paths)
//!  `weft run`'s status file ─▶ status::RunState, link usage
//!  Prometheus's HTTP API ─▶ promql::read: the plugin's families as COUNTERS_DB rows
//! ```
//! The readers do the I/O, bounded by a timeout per switch; the judging functions (`view`,
//! `analyse`, `checks`, `switch_sample`) are pure and tested on recorded inputs.

pub mod counters;
pub mod diagnose;
pub mod doctor;
pub mod promql;
pub mod read;
pub mod source;
pub mod status;
pub mod switch;
pub mod top;
pub mod trace;
pub mod views;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `30s`, `50ms`, `1.5s`, `3m`: durations the way the flags take them.
pub fn human_duration(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 && d.as_micros() > 0 {
        format!("{}us", d.as_micros())
    } else if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) && ms < 120_000 {
        format!("{}s", ms / 1000)
    } else if ms < 120_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m", ms / 60_000)
    }
}
