//! The core's PFC pausing ([`crate::pause`]): a PFC frame's packet-in holds or releases the
//! switch's queues, a hold runs out, the watchdog takes a stormed queue out of PFC, a session
//! begins with no queue held; and the pause durations go to COUNTERS_DB.

use std::collections::BTreeSet;

use weft_sonic_schema::Row;
use weft_sonic_schema::config::PfcWdAction;
use weft_sonic_schema::counters::PortCounters;

use super::{Core, Output, Phase};
use crate::clock::Now;
use crate::features::Publish;
use crate::intent::QueueKey;
use crate::pause::{PauseConfig, PfcFrame, QueueCmd};

impl Core {
    /// A PFC frame received on port `port_id`.
    pub(super) fn pfc_frame(
        &mut self,
        now: Now,
        port_id: u32,
        frame: &PfcFrame,
        out: &mut Vec<Output>,
    ) {
        let Some(cfg) = &self.cfg.pfc else { return };
        if matches!(self.s.phase, Phase::Down | Phase::Ending) {
            return;
        }
        let intent = &self.features.intent;
        let Some(port) = intent.ports.name(port_id).map(str::to_string) else {
            self.pauses.frames += 1;
            self.pauses.ignored += u64::from(frame.class_enable.count_ones());
            tracing::debug!(port_id, "PFC frame on a port CONFIG_DB does not name");
            return;
        };
        let wd = &self.features.wd;
        // A queue pauses when PFC is on for it (the pipeline then reads its hold), unless the
        // watchdog took it out of PFC (SONiC's drop and forward actions ignore PAUSE).
        let pause = |p: u8, q: u16| {
            let pfc_on = intent.queue(&port, p).is_some_and(|q| q.pause.is_some());
            let stormed = wd
                .queues
                .get(&(port.clone(), p))
                .is_some_and(|w| w.stormed && w.config.action != PfcWdAction::Alert);
            (pfc_on && !stormed).then(|| cfg.pause_time(intent, &port, p, q))
        };
        let hold_rate = cfg.line_rate(&port).is_none();
        let cmds = self
            .pauses
            .frame(now.at, &port, port_id, frame, &pause, hold_rate);
        self.queue_cmds(now, cmds, out);
    }

    /// Holds whose time is up are released.
    pub(super) fn expire_pauses(&mut self, now: Now, out: &mut Vec<Output>) {
        if self.pauses.next_deadline().is_some_and(|d| d <= now.at) {
            let cmds = self.pauses.expire(now.at);
            self.queue_cmds(now, cmds, out);
        }
    }

    /// A queue the watchdog declared stormed stops honouring PFC (drop and forward): released.
    pub(super) fn pfc_stormed(
        &mut self,
        now: Now,
        key: &QueueKey,
        action: PfcWdAction,
        out: &mut Vec<Output>,
    ) {
        if action == PfcWdAction::Alert {
            return;
        }
        if let Some(c) = self.pauses.release(now.at, key) {
            tracing::info!(port = %key.0, priority = key.1, "stormed: the queue no longer honours PAUSE");
            self.queue_cmds(now, vec![c], out);
        }
    }

    /// A session begins: the switch may hold queues an earlier run of the plugin held.
    pub(super) fn pfc_session_up(&mut self, now: Now, out: &mut Vec<Output>) {
        if self.cfg.pfc.is_none() {
            return;
        }
        self.pauses.forget(now.at);
        out.push(Output::Queue(QueueCmd::ReleaseAll));
    }

    /// CONFIG_DB was read: the ports' rates (each session gives them once, and again when
    /// they change), and holds of queues no longer pausing released.
    pub(super) fn pfc_configured(&mut self, now: Now, out: &mut Vec<Output>) {
        let Some(cfg) = &self.cfg.pfc else { return };
        let rates = cfg.rates(&self.features.intent);
        if self.s.rates.as_ref() != Some(&rates) {
            if !rates.is_empty() {
                out.push(Output::Queue(QueueCmd::Rates(rates.clone())));
            }
            self.s.rates = Some(rates);
        }
        let intent = &self.features.intent;
        self.s.rearm = cfg
            .rearm_period(intent, self.cfg.queue.pfc_quanta)
            .map(|period| (period, PauseConfig::pfc_cells(intent)));
        // A shorter period (a CONFIG_DB change) takes effect now, not after the old one.
        self.s.rearm_due = self.s.rearm.as_ref().map(|(period, _)| {
            let next = now.at + *period;
            self.s.rearm_due.map_or(next, |d| d.min(next))
        });
        let cmds = self.pauses.reconfigure(now.at, &self.features.intent);
        self.queue_cmds(now, cmds, out);
    }

    /// The pipeline's PFC state re-armed every half pause, so a queue that stays above xoff
    /// keeps its upstream paused ([`PauseConfig::rearm_period`]).
    pub(super) fn rearm_pauses(&mut self, now: Now, out: &mut Vec<Output>) {
        if matches!(self.s.phase, Phase::Down | Phase::Ending) {
            return;
        }
        let (Some((period, cells)), Some(due)) = (&self.s.rearm, self.s.rearm_due) else {
            return;
        };
        if due > now.at {
            return;
        }
        out.push(Output::Queue(QueueCmd::Rearm(cells.clone())));
        self.s.rearm_due = Some(now.at + *period);
    }

    /// The commands, and the pause durations of the ports whose queues were released.
    fn queue_cmds(&mut self, now: Now, cmds: Vec<QueueCmd>, out: &mut Vec<Output>) {
        let mut released = BTreeSet::new();
        for c in cmds {
            if let QueueCmd::Hold {
                port, held: false, ..
            } = &c
            {
                released.insert(*port);
            }
            out.push(Output::Queue(c));
        }
        if released.is_empty() {
            return;
        }
        let ports = &self.features.intent.ports;
        let names: BTreeSet<String> = released
            .iter()
            .filter_map(|id| ports.name(*id).map(str::to_string))
            .collect();
        let p = self.pause_durations(now, |port| names.contains(port));
        if !p.is_empty() {
            out.push(Output::Publish(p));
        }
    }

    /// COUNTERS_DB `SAI_PORT_STAT_PFC_<p>_RX_PAUSE_DURATION_US` of the ports `which` takes, for
    /// every priority that was ever held.
    pub(super) fn pause_durations(&self, now: Now, which: impl Fn(&str) -> bool) -> Publish {
        let mut rows: std::collections::BTreeMap<String, PortCounters> = Default::default();
        for key in self.pauses.known() {
            if !which(&key.0) {
                continue;
            }
            let us = self.pauses.duration_us(key, now.at);
            let row = rows.entry(key.0.clone()).or_insert_with(|| PortCounters {
                port: key.0.clone(),
                ..Default::default()
            });
            if let Some(c) = row.pfc.get_mut(usize::from(key.1)) {
                c.rx_pause_duration_us = Some(us);
            }
        }
        Publish {
            counters: rows.values().map(|r| (r.key(), r.to_fields())).collect(),
            ..Default::default()
        }
    }
}
