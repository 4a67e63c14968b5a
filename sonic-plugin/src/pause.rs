//! PFC that pauses, on BMv2: which egress queues the switch's peers hold paused, and until when.
//! Pure: time comes in with every call; what the switch must do comes out as [`QueueCmd`]s,
//! which the daemon carries out over BMv2's Thrift API ([`crate::thrift`]).
//!
//! ```text
//!  PFC frame on port P ─► pipeline (PfcRx: counted, packet-in) ─► plugin core:
//!     per enabled priority p with PFC on (P, p), not stormed by the watchdog:
//!        quanta q > 0: held until now + q × 512 bit times at P's speed (a later frame
//!                      replaces the deadline, as 802.1Qbb reloads the timer)
//!        quanta 0:     released now
//!     deadline passed: released
//!  ─► QueueCmd::Hold ─► Thrift: pfc_hold_reg[P × 8 + p] (and a finite queue rate while held)
//! ```
//!
//! A port's speed is what the testbed emulates: with a line rate of R packets/s (`--line-rate`),
//! one queued packet stands for `cell / scale` bytes (the same cell and scale that turn byte
//! thresholds into packets, [`crate::qos`]), so the port runs at `R × 8 × cell / scale` bit/s
//! and a pause lasts as many packet times as it would on the real port. Without a line rate the
//! port's CONFIG_DB speed counts (then 65535 quanta at 100G are 335 µs: shorter than the
//! plugin's reaction, so such a pause is hardly felt).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::intent::{QueueKey, SwitchIntent};

/// Bit times per pause quantum (802.1Qbb).
pub const QUANTUM_BITS: f64 = 512.0;
/// MAC control EtherType and the PFC opcode.
pub const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;
pub const PFC_OPCODE: u16 = 0x0101;
/// A held queue goes around (one pipeline pass per packet) at its queue rate; a port without a
/// line rate has none (BMv2: unlimited), so while held its queue gets this one.
pub const HOLD_RATE_PPS: u64 = 1000;
/// The register the pipeline reads a queue's hold from (`p4/include/port_egress.p4`).
pub const HOLD_REGISTER: &str = weft_p4::registers::pfc_hold_reg::NAME;
/// The register of each queue's PFC state: 0, or 1 + the upstream port it paused.
pub const STATE_REGISTER: &str = weft_p4::registers::pfc_state_reg::NAME;
/// Re-arming more often than this is not done: a pause shorter than twice this is shorter than
/// the plugin's reaction anyway (see the module doc).
pub const REARM_FLOOR: Duration = Duration::from_millis(10);

/// Packets a lossless queue keeps free above xoff on BMv2: what the fastest of `line_rate`
/// (packets/s) brings in `reaction_ms`, the time a PAUSE takes to stop the upstream queue
/// (egress clone, the wire, packet-in, the upstream plugin's Thrift hold). A real switch's
/// headroom covers the cable and its MAC, microseconds; here the pause goes through software,
/// milliseconds, and without this the queue overflows before the pause holds: xoff at the
/// queue's end loses the lossless class's packets. At most half the queue, so ECN and xon keep
/// room below.
pub fn headroom(line_rate: &BTreeMap<String, f64>, reaction_ms: u32, queue_depth: u32) -> u32 {
    let fastest = line_rate
        .values()
        .copied()
        .filter(|r| r.is_finite() && *r > 0.0)
        .fold(0.0_f64, f64::max);
    let packets = (fastest * f64::from(reaction_ms) / 1000.0).ceil();
    (packets.min(f64::from(u32::MAX)) as u32).min(queue_depth / 2)
}

/// A PFC frame as it arrived: the priorities it names and their pause quanta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcFrame {
    /// Bit p set: the frame applies to priority p.
    pub class_enable: u8,
    pub quanta: [u16; 8],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("{0} bytes: shorter than a PFC frame (32)")]
    Short(usize),
    #[error("EtherType {0:#06x}, not MAC control (0x8808)")]
    NotMacControl(u16),
    #[error("MAC control opcode {0:#06x}, not PFC (0x0101)")]
    NotPfc(u16),
}

/// Decodes a frame from its Ethernet header on (the packet-in's payload).
pub fn decode(frame: &[u8]) -> Result<PfcFrame, FrameError> {
    if frame.len() < 32 {
        return Err(FrameError::Short(frame.len()));
    }
    let be = |i: usize| u16::from_be_bytes([frame[i], frame[i + 1]]);
    if be(12) != ETHERTYPE_MAC_CONTROL {
        return Err(FrameError::NotMacControl(be(12)));
    }
    if be(14) != PFC_OPCODE {
        return Err(FrameError::NotPfc(be(14)));
    }
    let mut quanta = [0u16; 8];
    for (p, q) in quanta.iter_mut().enumerate() {
        *q = be(18 + 2 * p);
    }
    // The upper byte of the class-enable vector is reserved (802.1Qbb): ignored.
    Ok(PfcFrame {
        class_enable: (be(16) & 0xff) as u8,
        quanta,
    })
}

/// What the switch's queues must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueCmd {
    /// Every priority queue of each port drains at the port's line rate, packets/s.
    Rates(Vec<(u32, u64)>),
    /// Hold or release priority `prio` of `port`. `rate`: the queue's rate to set first when
    /// holding (a port without a line rate), or back when releasing (0: unlimited).
    Hold {
        port: u32,
        prio: u8,
        held: bool,
        rate: Option<u64>,
    },
    /// Release every queue: a new session, and holds an earlier one may have left.
    ReleaseAll,
    /// Of these PFC state cells (`port × 8 + priority`), set those pausing back to "not
    /// pausing", so the next packet that leaves the queue at or above xoff sends a fresh
    /// PAUSE ([`PauseConfig::rearm_period`]).
    Rearm(Vec<u32>),
}

/// How ports' speeds are emulated: line rates in packets/s (port name or `*`), and the queue
/// model's scale.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PauseConfig {
    pub line_rate: BTreeMap<String, f64>,
    pub scale: f64,
}

impl PauseConfig {
    /// The line rate of `port`, packets/s, when it has one.
    pub fn line_rate(&self, port: &str) -> Option<f64> {
        self.line_rate
            .get(port)
            .or_else(|| self.line_rate.get("*"))
            .copied()
            .filter(|r| r.is_finite() && *r > 0.0)
    }

    /// How long `quanta` pause `port` (see the module doc).
    pub fn pause_time(&self, intent: &SwitchIntent, port: &str, prio: u8, quanta: u16) -> Duration {
        let q = intent.queue(port, prio);
        let bps = match (self.line_rate(port), q) {
            (Some(pps), Some(q)) => pps * 8.0 * f64::from(q.cell) / self.scale.max(1e-9),
            (_, Some(q)) => q.speed_mbps as f64 * 1e6,
            (_, None) => 100e9,
        };
        Duration::from_secs_f64(f64::from(quanta) * QUANTUM_BITS / bps.max(1.0))
    }

    /// `model` as the plugin pausing with these line rates uses it: with the [`headroom`] its
    /// pauses need kept free above xoff.
    pub fn model(&self, mut model: crate::config::QueueModel) -> crate::config::QueueModel {
        model.pfc_headroom = headroom(&self.line_rate, model.pfc_reaction_ms, model.queue_depth);
        model
    }

    /// How often the pipeline's PFC state is re-armed: half the shortest pause of a PFC queue
    /// (`quanta` at its port's speed), at least [`REARM_FLOOR`]; `None` without PFC queues.
    ///
    /// The pipeline sends one PAUSE when a queue crosses xoff and one RESUME when it falls to
    /// xon. A PAUSE lasts its quanta, so a queue that stays above xon for longer would let its
    /// upstream send again while it is still full, and a lossless queue would overflow: 802.1Qbb
    /// switches send the PAUSE again while they stay above xoff. Setting the state back to "not
    /// pausing" every half pause does that with the pipeline as it is: the next packet leaving
    /// at or above xoff sends a fresh PAUSE (counted like any other). A queue between xon and
    /// xoff then sends none, and its upstream resumes when its last PAUSE runs out.
    pub fn rearm_period(&self, intent: &SwitchIntent, quanta: u16) -> Option<Duration> {
        intent
            .queues
            .iter()
            .filter(|(_, q)| q.pause.is_some() && q.port_id.is_some())
            .map(|((port, prio), _)| self.pause_time(intent, port, *prio, quanta) / 2)
            .min()
            .map(|d| d.max(REARM_FLOOR))
    }

    /// The PFC state cells of `intent`'s PFC queues (`port × 8 + priority`).
    pub fn pfc_cells(intent: &SwitchIntent) -> Vec<u32> {
        intent
            .queues
            .iter()
            .filter(|(_, q)| q.pause.is_some())
            .filter_map(|((_, prio), q)| Some(crate::counters::queue_cell(q.port_id?, *prio)))
            .collect()
    }

    /// The queue rates the ports of `intent` run at (ports with a line rate only).
    pub fn rates(&self, intent: &SwitchIntent) -> Vec<(u32, u64)> {
        intent
            .ports
            .by_name
            .iter()
            .filter_map(|(name, id)| Some((*id, self.line_rate(name)?.round().max(1.0) as u64)))
            .collect()
    }
}

#[derive(Debug, Clone)]
struct Held {
    port: u32,
    since: Instant,
    until: Instant,
    /// The rate the queue was given while held (to take back on release).
    rate: Option<u64>,
}

/// The queues held now, and how long each has been held in all.
#[derive(Debug, Default, Clone)]
pub struct Pauses {
    held: BTreeMap<QueueKey, Held>,
    /// Microseconds each queue was held (SAI_PORT_STAT_PFC_<p>_RX_PAUSE_DURATION_US), closed
    /// holds only: [`Pauses::duration_us`] adds the open one.
    done_us: BTreeMap<QueueKey, u64>,
    /// Frames taken, and priorities in them that were not acted on (PFC off on the queue, or
    /// the watchdog holds it stormed).
    pub frames: u64,
    pub ignored: u64,
}

impl Pauses {
    /// Whether `key` is held now.
    pub fn is_held(&self, key: &QueueKey) -> bool {
        self.held.contains_key(key)
    }

    pub fn held(&self) -> impl Iterator<Item = &QueueKey> {
        self.held.keys()
    }

    /// When the next hold runs out.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.held.values().map(|h| h.until).min()
    }

    /// Microseconds `key` has been held in all, up to `now`.
    pub fn duration_us(&self, key: &QueueKey, now: Instant) -> u64 {
        let open = self.held.get(key).map_or(0, |h| {
            now.saturating_duration_since(h.since).as_micros() as u64
        });
        self.done_us.get(key).copied().unwrap_or(0) + open
    }

    /// Every queue with a hold in its history.
    pub fn known(&self) -> impl Iterator<Item = &QueueKey> {
        self.done_us.keys().chain(self.held.keys())
    }

    /// A frame received on `port` (id `port_id`). `pause(p, quanta)`: how long `quanta` hold
    /// priority p, `None` when p does not pause this port (PFC off, or stormed); `hold_rate`:
    /// the port has no line rate, so a held queue gets [`HOLD_RATE_PPS`]. Returns the holds
    /// and releases, in priority order.
    pub fn frame(
        &mut self,
        now: Instant,
        port: &str,
        port_id: u32,
        f: &PfcFrame,
        pause: &dyn Fn(u8, u16) -> Option<Duration>,
        hold_rate: bool,
    ) -> Vec<QueueCmd> {
        self.frames += 1;
        let mut out = Vec::new();
        for p in (0..8u8).filter(|p| f.class_enable & (1 << p) != 0) {
            let q = f.quanta[usize::from(p)];
            let Some(time) = pause(p, q) else {
                self.ignored += 1;
                continue;
            };
            let key = (port.to_string(), p);
            if q == 0 {
                out.extend(self.release(now, &key));
                continue;
            }
            let until = now + time;
            match self.held.get_mut(&key) {
                Some(h) => h.until = until,
                None => {
                    let rate = hold_rate.then_some(HOLD_RATE_PPS);
                    self.held.insert(
                        key,
                        Held {
                            port: port_id,
                            since: now,
                            until,
                            rate,
                        },
                    );
                    out.push(QueueCmd::Hold {
                        port: port_id,
                        prio: p,
                        held: true,
                        rate,
                    });
                }
            }
        }
        out
    }

    /// Releases `key` if it is held.
    pub fn release(&mut self, now: Instant, key: &QueueKey) -> Option<QueueCmd> {
        let h = self.held.remove(key)?;
        let us = now.saturating_duration_since(h.since).as_micros() as u64;
        *self.done_us.entry(key.clone()).or_default() += us;
        Some(QueueCmd::Hold {
            port: h.port,
            prio: key.1,
            held: false,
            rate: h.rate.map(|_| 0),
        })
    }

    /// Releases every hold whose time is up.
    pub fn expire(&mut self, now: Instant) -> Vec<QueueCmd> {
        let due: Vec<QueueKey> = self
            .held
            .iter()
            .filter(|(_, h)| h.until <= now)
            .map(|(k, _)| k.clone())
            .collect();
        due.iter().filter_map(|k| self.release(now, k)).collect()
    }

    /// Forgets every hold (a new session releases them all on the switch), counting their
    /// time up to `now`.
    pub fn forget(&mut self, now: Instant) {
        let keys: Vec<QueueKey> = self.held.keys().cloned().collect();
        for k in keys {
            let _ = self.release(now, &k);
        }
    }

    /// Releases holds of ports that are gone or no longer have PFC on the queue (a CONFIG_DB
    /// change).
    pub fn reconfigure(&mut self, now: Instant, intent: &SwitchIntent) -> Vec<QueueCmd> {
        let gone: Vec<QueueKey> = self
            .held
            .keys()
            .filter(|(port, p)| intent.queue(port, *p).is_none_or(|q| q.pause.is_none()))
            .cloned()
            .collect();
        gone.iter().filter_map(|k| self.release(now, k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn pfc_frame(class_enable: u16, quanta: [u16; 8]) -> Vec<u8> {
        let mut f = vec![
            0x01, 0x80, 0xc2, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0x88, 0x08, 0x01, 0x01,
        ];
        f.extend_from_slice(&class_enable.to_be_bytes());
        for q in quanta {
            f.extend_from_slice(&q.to_be_bytes());
        }
        f.resize(60, 0);
        f
    }

    #[test]
    fn a_pfc_frame_decodes_and_anything_else_is_refused() {
        let f = pfc_frame(0x0108, [0, 0, 0, 65535, 7, 0, 0, 0]);
        assert_eq!(
            decode(&f),
            Ok(PfcFrame {
                class_enable: 0x08,
                quanta: [0, 0, 0, 65535, 7, 0, 0, 0]
            })
        );
        assert_eq!(decode(&f[..20]), Err(FrameError::Short(20)));
        let mut pause = f.clone();
        pause[15] = 0x01;
        pause[14] = 0x00;
        assert_eq!(decode(&pause), Err(FrameError::NotPfc(0x0001)));
        let mut ip = f;
        ip[12] = 0x08;
        ip[13] = 0x00;
        assert_eq!(decode(&ip), Err(FrameError::NotMacControl(0x0800)));
    }

    fn pfc_intent(ports: &[(&str, u32)]) -> SwitchIntent {
        let mut i = SwitchIntent::default();
        for (name, id) in ports {
            i.ports.by_name.insert((*name).to_string(), *id);
            i.queues.insert(
                ((*name).to_string(), 3),
                crate::intent::QueueIntent {
                    port_id: Some(*id),
                    cell: 9100,
                    speed_mbps: 100_000,
                    ecn: None,
                    envelope: None,
                    tuning: weft_sonic_schema::config::Tuning::Off,
                    pause: Some((51_200, 19_456)),
                    watchdog: None,
                },
            );
        }
        i
    }

    #[test]
    fn the_pfc_state_is_re_armed_every_half_of_the_shortest_pause() {
        let intent = pfc_intent(&[("Ethernet0", 1), ("Ethernet4", 2)]);
        let cfg = PauseConfig {
            line_rate: [("*".to_string(), 1000.0), ("Ethernet4".to_string(), 4000.0)].into(),
            scale: 1.0,
        };
        // 65535 × 512 bits at 4000 × 9100 × 8 bit/s = 115.2 ms: re-armed every 57.6 ms.
        let p = cfg.rearm_period(&intent, u16::MAX).expect("PFC queues");
        assert_eq!(p.as_micros(), 57_613, "{p:?}");
        assert_eq!(PauseConfig::pfc_cells(&intent), vec![11, 19]);
        // A pause shorter than the plugin can follow: re-armed at the floor, not faster.
        assert_eq!(cfg.rearm_period(&intent, 10), Some(REARM_FLOOR));
        // No PFC queue, nothing to re-arm.
        assert_eq!(cfg.rearm_period(&SwitchIntent::default(), u16::MAX), None);
    }

    #[test]
    fn headroom_is_what_the_fastest_port_brings_while_a_pause_takes_effect() {
        let rates: BTreeMap<String, f64> =
            [("*".to_string(), 2000.0), ("Ethernet8".to_string(), 3000.0)].into();
        assert_eq!(headroom(&rates, 10, 64), 30);
        assert_eq!(headroom(&rates, 1, 64), 3);
        // Never more than half the queue.
        assert_eq!(headroom(&rates, 100, 64), 32);
        // No line rate: nothing is emulated, nothing kept.
        assert_eq!(headroom(&BTreeMap::new(), 10, 64), 0);
    }
}
