//! PFC watchdog, as SONiC's pfcwd: every POLL_INTERVAL the plugin reads the PFC PAUSE frames
//! received per (port, priority); a queue whose peer kept pausing it (frames arrived in every
//! poll) for `detection_time` is declared stormed and gets the configured action in
//! `pfc_watchdog_table` (drop: its packets are dropped instead of piling up behind the pause;
//! forward: they are sent regardless; alert: only recorded). It is restored once no PAUSE
//! arrived for `restoration_time`. Pure: time comes in with each sample.
//!
//! ```text
//!   operational ──(PAUSE in every poll for detection_time)──► stormed ──(no PAUSE for restoration_time)──► operational
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use weft_p4::{actions as a, tables as t};
use weft_p4rt::P4Info;
use weft_p4rt::proto::p4::v1::{Entity, entity};
use weft_sonic_schema::config::PfcWdAction as WdAction;

pub use crate::intent::WdConfig;
use crate::intent::{DEFAULT_WD_POLL, SwitchIntent};
use crate::objects::{ObjKey, Objects};

/// SONiC's default poll interval.
pub const DEFAULT_POLL: std::time::Duration = DEFAULT_WD_POLL;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WdEvent {
    Stormed(WdAction),
    Restored,
}

/// One watched queue.
#[derive(Debug, Clone)]
pub struct QueueWd {
    pub config: WdConfig,
    last_count: Option<u64>,
    last_sample: Option<Instant>,
    pausing_since: Option<Instant>,
    last_pause: Option<Instant>,
    pub stormed: bool,
    pub detected: u64,
    pub restored: u64,
}

impl QueueWd {
    pub fn new(config: WdConfig) -> Self {
        QueueWd {
            config,
            last_count: None,
            last_sample: None,
            pausing_since: None,
            last_pause: None,
            stormed: false,
            detected: 0,
            restored: 0,
        }
    }

    /// Feeds one sample of the PAUSE-received counter.
    pub fn observe(&mut self, count: u64, now: Instant) -> Option<WdEvent> {
        let increased = self.last_count.is_some_and(|c| count > c);
        let previous = self.last_sample.replace(now);
        self.last_count = Some(count);
        if increased {
            self.last_pause = Some(now);
        }
        if !self.stormed {
            if !increased {
                self.pausing_since = None;
                return None;
            }
            // Frames counted now arrived since the previous sample.
            let since = *self.pausing_since.get_or_insert(previous.unwrap_or(now));
            if now.duration_since(since) >= self.config.detection {
                self.stormed = true;
                self.detected += 1;
                self.pausing_since = None;
                return Some(WdEvent::Stormed(self.config.action));
            }
            None
        } else {
            let quiet_since = self.last_pause.unwrap_or(now);
            if !increased && now.duration_since(quiet_since) >= self.config.restoration {
                self.stormed = false;
                self.restored += 1;
                return Some(WdEvent::Restored);
            }
            None
        }
    }
}

/// All watched queues, by (port name, priority).
#[derive(Debug, Default, Clone)]
pub struct Watchdog {
    pub queues: BTreeMap<(String, u8), QueueWd>,
}

impl Watchdog {
    /// Keeps the state of queues that stay watched (with their new config), adds and drops
    /// the others.
    pub fn reconfigure(&mut self, intent: &SwitchIntent) {
        let watched: BTreeMap<(String, u8), WdConfig> = intent
            .queues
            .iter()
            .filter_map(|(k, q)| Some((k.clone(), q.watchdog?)))
            .collect();
        self.queues.retain(|k, _| watched.contains_key(k));
        for (k, cfg) in watched {
            self.queues
                .entry(k)
                .and_modify(|q| q.config = cfg)
                .or_insert_with(|| QueueWd::new(cfg));
        }
    }

    /// The egress ports with pfc_watchdog_table entries (the switch config's
    /// `watchdog_ports`: only their lossless packets look the table up).
    pub fn ports_with_entries(&self, port_id: &dyn Fn(&str) -> Option<u32>) -> BTreeSet<u32> {
        self.queues
            .iter()
            .filter(|(_, q)| q.stormed && q.config.action != WdAction::Alert)
            .filter_map(|((port, _), _)| port_id(port))
            .collect()
    }

    /// pfc_watchdog_table entries for the stormed queues (`alert` installs nothing).
    pub fn objects(
        &self,
        info: &P4Info,
        port_id: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<Objects, weft_p4rt::Error> {
        let mut out = Objects::new();
        for ((port, prio), q) in &self.queues {
            if !q.stormed {
                continue;
            }
            let action = match q.config.action {
                WdAction::Drop => a::pfc_watchdog_drop::NAME,
                WdAction::Forward => a::pfc_watchdog_forward::NAME,
                WdAction::Alert => continue,
            };
            let Some(id) = port_id(port) else { continue };
            let te = info
                .table_entry(t::pfc_watchdog_table::NAME)?
                .exact(t::pfc_watchdog_table::fields::port::NAME, id)?
                .exact(t::pfc_watchdog_table::fields::priority::NAME, *prio)?
                .action(info.action_call(action)?)?
                .build()?;
            let e = Entity {
                entity: Some(entity::Entity::TableEntry(te)),
            };
            if let Some(k) = ObjKey::of(&e) {
                out.insert(k, e);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cfg() -> WdConfig {
        WdConfig {
            action: WdAction::Drop,
            detection: Duration::from_millis(200),
            restoration: Duration::from_millis(300),
        }
    }

    #[test]
    fn continuous_pause_for_detection_time_storms_and_quiet_for_restoration_time_restores() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut q = QueueWd::new(cfg());
        assert_eq!(q.observe(0, ms(0)), None);
        assert_eq!(q.observe(5, ms(100)), None);
        assert_eq!(
            q.observe(9, ms(200)),
            Some(WdEvent::Stormed(WdAction::Drop))
        );
        assert_eq!(q.observe(12, ms(300)), None, "still pausing");
        assert_eq!(q.observe(12, ms(400)), None);
        assert_eq!(q.observe(12, ms(500)), None);
        assert_eq!(q.observe(12, ms(600)), Some(WdEvent::Restored));
        assert_eq!((q.detected, q.restored), (1, 1));
    }

    #[test]
    fn an_interrupted_pause_does_not_storm() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut q = QueueWd::new(cfg());
        q.observe(0, ms(0));
        assert_eq!(q.observe(3, ms(100)), None);
        assert_eq!(q.observe(3, ms(200)), None, "a quiet poll resets detection");
        assert_eq!(q.observe(6, ms(300)), None);
        assert!(!q.stormed);
    }
}
