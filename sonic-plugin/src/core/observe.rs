//! The core's reads: what a read of the switch found (a sync's current state, the watchdog's
//! and the tuner's counters, the drift audit) and the timers that ask for them.

use weft_p4rt::proto::p4::v1::Entity;
use weft_sonic_schema::Row;
use weft_sonic_schema::state::DriftState;

use super::{Core, Observed, Output, OwnedWant, Phase, ReadFor, Ticket, Timer, audit_due};
use crate::clock::Now;
use crate::counters::Cells;
use crate::engine::switch_objects;
use crate::features::Publish;
use crate::watchdog::WdEvent;

impl Core {
    pub(super) fn read(
        &mut self,
        now: Now,
        ticket: Ticket,
        result: Result<Vec<Entity>, weft_p4rt::Error>,
        out: &mut Vec<Output>,
    ) {
        let Some(purpose) = self.s.reads.remove(&ticket) else {
            return;
        };
        match (purpose, result) {
            (ReadFor::Sync, Ok(es)) => {
                if let Some(sync) = &mut self.s.sync {
                    sync.switch = Some(switch_objects(es));
                }
            }
            (ReadFor::Sync, Err(e)) => {
                self.resync(crate::exec::SwitchLost(e).to_string(), out);
            }
            (ReadFor::Watchdog, Ok(es)) => {
                self.observe_watchdog(now, &crate::counters::cells(&es), out)
            }
            (ReadFor::Watchdog, Err(e)) => self.resync(format!("watchdog read: {e}"), out),
            (ReadFor::Tuning, Ok(es)) => self.observe_tuning(now, crate::counters::cells(&es), out),
            (ReadFor::Tuning, Err(e)) => self.resync(format!("tuning counter read: {e}"), out),
            (ReadFor::Audit(t0), result) => {
                self.audit.last = Some(t0);
                self.audit.cost = now.at.saturating_duration_since(t0);
                self.audited(result, out);
            }
        }
    }

    pub(super) fn observe_watchdog(&mut self, now: Now, cells: &Cells, out: &mut Vec<Output>) {
        let (events, publish) = self.features.observe_watchdog(cells, now);
        let queues = self
            .features
            .wd
            .queues
            .iter()
            .map(|((port, prio), q)| {
                let new_storm = events
                    .iter()
                    .any(|(k, e)| k.0 == *port && k.1 == *prio && matches!(e, WdEvent::Stormed(_)));
                (port.clone(), *prio, q.stormed, new_storm)
            })
            .collect();
        out.push(Output::Observed(Observed::Watchdog(queues)));
        if events.is_empty() {
            return;
        }
        self.counters.wd_storms += events
            .iter()
            .filter(|(_, e)| matches!(e, WdEvent::Stormed(_)))
            .count() as u64;
        self.want_owned(OwnedWant {
            publish,
            storms: events,
            ..Default::default()
        });
    }

    pub(super) fn observe_tuning(&mut self, now: Now, cells: Cells, out: &mut Vec<Output>) {
        let (changes, publish, histograms) = self.features.observe_tuning(cells, now);
        let moves = changes
            .iter()
            .map(|((port, q), ch)| (port.clone(), *q, ch.reason.as_str()))
            .collect();
        out.push(Output::Observed(Observed::Tuning {
            histograms,
            shift: self.features.tuning.shift,
            moves,
        }));
        if changes.is_empty() {
            if !publish.is_empty() {
                out.push(Output::Publish(publish));
            }
            return;
        }
        self.want_owned(OwnedWant {
            publish,
            tuned: changes,
            ..Default::default()
        });
    }

    /// The read-back: entries the switch no longer holds as installed go to STATE_DB
    /// `WEFT_DRIFT` (the next full sync repairs them; `weft diagnose` names them). A read-back
    /// that fails is no lost session: BMv2 refuses every Read while one of its tables holds an
    /// entry written beside P4Runtime (its Thrift CLI), and ending the session for that would
    /// resync every audit, forever. A switch really gone shows in the stream.
    pub(super) fn audited(
        &mut self,
        result: Result<Vec<Entity>, weft_p4rt::Error>,
        out: &mut Vec<Output>,
    ) {
        let drift = match result {
            Ok(es) => {
                if self.audit.error.take().is_some() {
                    tracing::info!("switch read-back works again");
                }
                self.engine.audit(&switch_objects(es))
            }
            Err(e) => {
                let why = e.to_string();
                if self.audit.error.as_deref() != Some(why.as_str()) {
                    tracing::warn!(error = %why, "switch read-back failed; drift not audited");
                }
                self.audit.error = Some(why);
                return;
            }
        };
        let keys: Vec<String> = drift.iter().map(|(k, _)| k.clone()).collect();
        if drift.is_empty() && self.audit.drifted.is_empty() {
            return;
        }
        let mut p = Publish::default();
        for (k, state) in &drift {
            let row = DriftState {
                key: k.clone(),
                state: *state,
            };
            p.state
                .push((DriftState::TABLE, row.key(), row.to_fields()));
        }
        for k in &self.audit.drifted {
            if !keys.contains(k) {
                p.state_delete.push((DriftState::TABLE, k.clone()));
            }
        }
        if let Some((first, _)) = drift.first() {
            tracing::warn!(entries = drift.len(), %first, "the switch lost entries behind the plugin's back");
        }
        self.audit.drifted = keys;
        if !p.is_empty() {
            out.push(Output::Publish(p));
        }
    }

    pub(super) fn timer(&mut self, now: Now, t: Timer, out: &mut Vec<Output>) {
        match t {
            Timer::Status => {
                out.push(Output::Status);
                if self.s.phase != Phase::Running {
                    return;
                }
                let records = self.features.tuning_records();
                if !records.is_empty() {
                    out.push(Output::Publish(records));
                }
                let (a, started) = (&self.audit, self.started);
                if audit_due(now.at, a.last, started, a.cost, a.last_batch) {
                    self.s.audit_wanted = true;
                }
            }
            Timer::Watchdog => {
                if self.s.phase != Phase::Running || self.features.wd.queues.is_empty() {
                    return;
                }
                let reads = self.features.watchdog_reads(self.info());
                if reads.is_empty() {
                    self.observe_watchdog(now, &Cells::default(), out);
                } else {
                    self.read_switch(ReadFor::Watchdog, vec![reads], out);
                }
            }
            Timer::Tuning => {
                if self.s.phase != Phase::Running || !self.features.tuning.sampling_any() {
                    return;
                }
                let ports = self.engine.translator.ports();
                let reads = self.features.tuning.reads(self.info(), ports);
                if reads.is_empty() {
                    self.observe_tuning(now, Cells::default(), out);
                } else {
                    self.read_switch(ReadFor::Tuning, vec![reads], out);
                }
            }
        }
    }

    pub(super) fn read_switch(
        &mut self,
        purpose: ReadFor,
        reads: Vec<Vec<Entity>>,
        out: &mut Vec<Output>,
    ) {
        let ticket = self.ticket();
        self.s.reads.insert(ticket, purpose);
        out.push(Output::Read { ticket, reads });
    }
}
