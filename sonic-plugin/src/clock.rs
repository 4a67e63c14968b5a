//! Time as the plugin's decisions take it: explicitly, as an input. The daemon reads the clocks;
//! the core and the features only compare what they are given, so the golden steps replay the
//! same decisions at the same simulated times.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// One moment: the monotonic instant (intervals, deadlines) and the wall clock in milliseconds
/// since the Unix epoch (what records in STATE_DB carry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    pub at: Instant,
    pub wall_ms: u64,
}

impl Now {
    /// The clocks as they are (the daemon's edge only).
    pub fn read() -> Now {
        Now {
            at: Instant::now(),
            wall_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        }
    }
}
