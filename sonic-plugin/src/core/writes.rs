//! The core's writes: what the switch takes next (a rollback, the owned objects, a sync, a
//! CONFIG_DB read, the next batch) and what a finished write means (a commit and its answers).

use std::time::Duration;

use weft_sonic_db::EntryResult;
use weft_sonic_schema::state::PluginState;

use super::{
    Answered, Body, ConfigWant, Core, Output, OwnedWant, Phase, Queued, ReadFor, Ticket, Work,
};
use crate::clock::Now;
use crate::engine::{Pending, Run};
use crate::ports::PortCmd;
use crate::watchdog::WdEvent;

/// What [`Core::start_batch`] did with the first waiting batch.
enum Started {
    /// Its first Write is out.
    Writing,
    /// Held until CONFIG_DB is read again (an entry names a port the plugin does not know).
    Held,
    /// It wrote nothing (every entry refused, or nothing to change): answered already.
    Answered,
}

impl Core {
    pub(super) fn written(
        &mut self,
        now: Now,
        ticket: Ticket,
        result: Result<(), weft_p4rt::Error>,
        out: &mut Vec<Output>,
    ) {
        let Some((t, work)) = &mut self.s.work else {
            return;
        };
        if *t != ticket {
            tracing::debug!(ticket, "answer to a write no longer in flight");
            return;
        }
        if let Err(lost) = work.written(result) {
            self.resync(lost.to_string(), out);
            return;
        }
        if let Some(updates) = work.next_write() {
            let ticket = self.ticket();
            if let Some((t, _)) = &mut self.s.work {
                *t = ticket;
            }
            out.push(Output::Write { ticket, updates });
            return;
        }
        if let Some((_, work)) = self.s.work.take() {
            self.s.pending = Pending::default();
            self.finish(now, work, out);
        }
    }

    /// Starts writing `work`; when it has nothing to write it is finished at once.
    pub(super) fn start(&mut self, now: Now, mut work: Work, out: &mut Vec<Output>) -> bool {
        match work.next_write() {
            Some(updates) => {
                let ticket = self.ticket();
                self.s.work = Some((ticket, work));
                out.push(Output::Write { ticket, updates });
                true
            }
            None => {
                self.finish(now, work, out);
                false
            }
        }
    }

    pub(super) fn finish(&mut self, now: Now, work: Work, out: &mut Vec<Output>) {
        match work {
            Work::Batch {
                run,
                prepared,
                started,
                seq,
            } => {
                let executed = run.finish();
                // Only a failed key can have something to roll back.
                let keys: Option<Vec<String>> = (!executed.failed.is_empty())
                    .then(|| prepared.ops.iter().map(|o| o.key.clone()).collect());
                let committed = self.engine.commit(prepared, executed);
                if let Some(keys) = keys.filter(|_| !committed.undo.is_empty()) {
                    self.s.undo = Some(Work::Undo {
                        run: Run::new(committed.undo),
                        keys,
                    });
                }
                let took = now.at.saturating_duration_since(started);
                out.push(Output::Answer(self.answer(seq, committed.results, took)));
            }
            Work::Undo { run, keys } => self.engine.rolled_back(&keys, run.finish()),
            Work::Owned {
                run,
                desired,
                want,
                updates,
            } => {
                self.engine.owned_written(desired, run.finish());
                self.owned_done(want, updates, out);
            }
            Work::Sync {
                run,
                plan,
                t0,
                keys,
                initial,
            } => {
                let report = self.engine.sync_done(plan, run.finish());
                let ms = now.at.saturating_duration_since(t0).as_millis() as u64;
                if initial {
                    tracing::info!(
                        updates = report.updates,
                        failed = report.failed_updates,
                        keys,
                        untranslatable = report.untranslatable.len(),
                        ms,
                        "full sync done"
                    );
                    for (k, why) in report.untranslatable.iter().take(10) {
                        tracing::warn!(key = %k, reason = %why, "APPL_STATE_DB entry cannot be installed any more");
                    }
                    self.synced(out);
                } else {
                    tracing::info!(updates = report.updates, "port map changed: resynced");
                }
            }
        }
    }

    /// The session's first sync is done: the port thread may write, then the keys the last
    /// run popped but never answered are replayed.
    pub(super) fn synced(&mut self, out: &mut Vec<Output>) {
        out.push(Output::Ports(PortCmd::Arm));
        let replay = std::mem::take(&mut self.s.replay);
        if !replay.is_empty() {
            tracing::info!(
                keys = replay.len(),
                "replaying keys popped but never answered"
            );
        }
        for chunk in replay.chunks(self.cfg.batch_size.max(1)) {
            self.s.queue.push_back(Queued {
                seq: 0,
                body: Body::Raw(chunk.to_vec()),
            });
        }
        self.s.phase = Phase::Replaying;
    }

    /// A batch's answers: APPL_DB rows of failed keys go back to what is installed (so APPL_DB
    /// and APPL_STATE_DB differ only while a key is in flight: what a restart replays).
    pub(super) fn answer(&self, batch: u64, results: Vec<EntryResult>, took: Duration) -> Answered {
        let mut revert = Vec::new();
        let mut remove = Vec::new();
        for r in results.iter().filter(|r| !r.status.is_ok()) {
            match self.engine.installed().get(r.key.as_str()) {
                Some(inst) => revert.push((r.key.clone(), inst.fields.clone())),
                None => remove.push(r.key.clone()),
            }
        }
        for r in results.iter().filter(|r| !r.status.is_ok()).take(5) {
            tracing::warn!(key = %r.key, status = %r.status, error = %r.message, "entry refused");
        }
        Answered {
            batch,
            results,
            revert,
            remove,
            took,
        }
    }

    pub(super) fn owned_done(&mut self, want: OwnedWant, updates: usize, out: &mut Vec<Output>) {
        if want.config && updates > 0 {
            tracing::info!(updates, "CONFIG_DB changed: QoS tables updated");
        }
        for ((port, prio), ev) in &want.storms {
            match ev {
                WdEvent::Stormed(a) => {
                    tracing::warn!(%port, priority = prio, action = a.as_str(), "PFC storm detected");
                }
                WdEvent::Restored => {
                    tracing::info!(%port, priority = prio, "PFC storm over, queue restored")
                }
            }
        }
        for ((port, q), ch) in &want.tuned {
            tracing::info!(
                %port,
                queue = q,
                reason = ch.reason.as_str(),
                kmin = ch.to.kmin,
                kmax = ch.to.kmax,
                pmax = ch.to.pmax,
                from_kmin = ch.from.kmin,
                from_kmax = ch.from.kmax,
                from_pmax = ch.from.pmax,
                switch_updates = updates,
                "ECN thresholds tuned"
            );
        }
        if !want.publish.is_empty() {
            out.push(Output::Publish(want.publish));
        }
    }

    /// Starts the next thing the switch should take, when it takes nothing now (see the
    /// module doc for the order).
    pub(super) fn advance(&mut self, now: Now, out: &mut Vec<Output>) {
        loop {
            if !matches!(
                self.s.phase,
                Phase::Syncing | Phase::Replaying | Phase::Running
            ) || self.s.work.is_some()
            {
                return;
            }
            if let Some(undo) = self.s.undo.take() {
                if self.start(now, undo, out) {
                    return;
                }
                continue;
            }
            if let Some(want) = self.s.owned.take() {
                if self.start_owned(now, want, out) {
                    return;
                }
                continue;
            }
            if self.s.sync.is_some() {
                if !self.advance_sync(now, out) {
                    return;
                }
                continue;
            }
            if self.s.phase == Phase::Replaying && self.s.queue.is_empty() {
                self.s.phase = Phase::Running;
                self.state = PluginState::Running;
                out.push(Output::Status);
                continue;
            }
            match self.advance_config(now, out) {
                Some(true) => continue,
                Some(false) => return,
                None => {}
            }
            if !self.s.queue.is_empty() {
                match self.start_batch(now, out) {
                    Started::Writing => return,
                    Started::Held | Started::Answered => continue,
                }
            }
            if self.s.phase == Phase::Running && std::mem::take(&mut self.s.audit_wanted) {
                let reads = self.engine.switch_reads();
                self.read_switch(ReadFor::Audit(now.at), reads, out);
            }
            return;
        }
    }

    /// `Some(false)`: wait (a CONFIG_DB read is out or due later with nothing to drain);
    /// `Some(true)`: something changed, look again; `None`: go on with the batches.
    pub(super) fn advance_config(&mut self, now: Now, out: &mut Vec<Output>) -> Option<bool> {
        match self.s.config {
            ConfigWant::Idle => None,
            ConfigWant::Reading { .. } => Some(false),
            ConfigWant::Wanted { due, after } => {
                let front = self.s.queue.front().map(|q| q.seq);
                if front.is_some_and(|seq| seq <= after) {
                    // Batches that came before the change go first, as they would have.
                    return None;
                }
                // A batch that waits for the read has it now; otherwise the rows of one
                // apply are let settle.
                if front.is_some() || now.at >= due {
                    self.read_config(out);
                    return Some(false);
                }
                Some(false)
            }
        }
    }

    /// Issues the sync's reads, or plans and starts it once they are in. Returns whether to
    /// look again (it finished at once).
    pub(super) fn advance_sync(&mut self, now: Now, out: &mut Vec<Output>) -> bool {
        let Some(sync) = &mut self.s.sync else {
            return true;
        };
        if !sync.reading {
            sync.reading = true;
            let need_state = sync.appl_state.is_none();
            self.engine.sync_started();
            if need_state {
                out.push(Output::ReadApplState);
            }
            let reads = self.engine.switch_reads();
            self.read_switch(ReadFor::Sync, reads, out);
            return false;
        }
        if sync.appl_state.is_none() || sync.switch.is_none() {
            return false;
        }
        let Some(sync) = self.s.sync.take() else {
            return true;
        };
        let owned = match self.features.desired(self.info()) {
            Ok(o) => o,
            Err(e) => {
                self.resync(format!("plugin-owned entries cannot be built: {e}"), out);
                return false;
            }
        };
        let state = sync.appl_state.unwrap_or_default();
        let current = sync.switch.unwrap_or_default();
        let mut plan = self.engine.plan_sync(&state, owned, &current);
        let run = Run::new(std::mem::take(&mut plan.plan));
        let work = Work::Sync {
            run,
            plan,
            t0: sync.t0,
            keys: state.len(),
            initial: sync.initial,
        };
        !self.start(now, work, out)
    }

    pub(super) fn start_owned(&mut self, now: Now, want: OwnedWant, out: &mut Vec<Output>) -> bool {
        let desired = match self.features.desired(self.info()) {
            Ok(o) => o,
            Err(e) => {
                self.resync(format!("plugin-owned entries cannot be built: {e}"), out);
                return true;
            }
        };
        let plan = self.engine.plan_owned(&desired);
        let updates = plan.len();
        let work = Work::Owned {
            run: Run::new(plan),
            desired,
            want,
            updates,
        };
        self.start(now, work, out)
    }

    /// Starts the first waiting batch (see [`Started`]).
    fn start_batch(&mut self, now: Now, out: &mut Vec<Output>) -> Started {
        let Some(q) = self.s.queue.pop_front() else {
            return Started::Answered;
        };
        let mut p = match q.body {
            Body::Prepared(p, epoch) if epoch == self.s.config_epoch && !p.blocked() => p,
            Body::Prepared(p, _) => self.engine.prepare(p.ops, &Pending::default()),
            Body::Raw(ops) => self.engine.prepare(ops, &Pending::default()),
        };
        if !p.unknown_ports().is_empty() && q.seq > self.s.config_read_at {
            // See the module doc: CONFIG_DB is read again before this batch is answered.
            tracing::info!(
                ports = ?p.unknown_ports(),
                "entries name ports CONFIG_DB gave no id yet: reading CONFIG_DB before answering"
            );
            let after = q.seq - 1;
            self.s.config = match self.s.config {
                ConfigWant::Wanted { after: a, .. } => ConfigWant::Wanted {
                    due: now.at,
                    after: a.min(after),
                },
                _ => ConfigWant::Wanted { due: now.at, after },
            };
            self.s.queue.push_front(Queued {
                seq: q.seq,
                body: Body::Raw(p.ops),
            });
            return Started::Held;
        }
        let pending = self.engine.pending(&p);
        let run = Run::new(std::mem::take(&mut p.plan));
        let work = Work::Batch {
            run,
            prepared: p,
            started: now.at,
            seq: q.seq,
        };
        if self.start(now, work, out) {
            self.s.pending = pending;
            self.prepare_ahead();
            Started::Writing
        } else {
            Started::Answered
        }
    }
}
