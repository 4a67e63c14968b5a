//! The two ways P4RT entries reach the testbed's plugins, for scenarios that run on both.
#![allow(dead_code)] // each scenario uses its own part

/// How the controller hands P4RT entries to the testbed's plugins: every scenario that runs on
/// both runs the same body with each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// APPL_DB through swss-common's `ProducerStateTable` protocol (the default).
    Redis,
    /// SONiC's ZMQ request/reply channel, APPL_DB written behind.
    Zmq,
}

impl Transport {
    /// The intent `text` with this transport under `fabric.defaults` (Redis: unchanged), so
    /// the testbed's plugins serve it and `weft apply` / `weft run` write over it.
    pub fn intent(self, text: &str) -> String {
        match self {
            Transport::Redis => text.to_string(),
            Transport::Zmq => {
                assert!(text.contains("\n  defaults:\n"), "no fabric.defaults");
                text.replacen(
                    "\n  defaults:\n",
                    "\n  defaults:\n    p4rt_transport: zmq\n",
                    1,
                )
            }
        }
    }
    /// A short tag for fabric names and directories (`r` or `z`).
    pub fn tag(self) -> &'static str {
        match self {
            Transport::Redis => "r",
            Transport::Zmq => "z",
        }
    }
}

/// Taken by each testbed scenario that runs once per transport, so the two runs of one test
/// file do not share the 2 cores (their timings, e.g. a failover's loss window, are judged
/// against a machine running one fabric).
pub fn one_fabric_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
