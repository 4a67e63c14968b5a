//! STATE_DB rows the plugin writes: what the switch observes. The controller follows
//! `PORT_TABLE`; operators and `weft status` read the rest.

use crate::config::{AdminStatus, PfcWdAction, Tuning};
use crate::{TableDoc, doc_of, row, word_enum};
use weft_sonic_db::Digest;

word_enum! {
    /// A port's operational (carrier) state.
    pub enum OperStatus { Up = "up", Down = "down" }
}

word_enum! {
    /// A PFC-watchdog queue's state.
    pub enum WdStatus { Operational = "operational", Stormed = "stormed" }
}

word_enum! {
    /// What the plugin is doing. Only `running` means APPL_STATE_DB is what the switch holds.
    pub enum PluginState {
        Starting = "starting",
        WaitingForSwitch = "waiting-for-switch",
        WaitingForRedis = "waiting-for-redis",
        Syncing = "syncing",
        Running = "running",
        Reconnecting = "reconnecting",
        Stopped = "stopped",
    }
}

/// The key of the plugin's status row.
pub const PLUGIN_STATUS_KEY: &str = "status";
/// The status row expires unless the plugin refreshes it: a row that is there was written by a
/// live plugin within this many milliseconds.
pub const PLUGIN_STATUS_TTL_MS: u64 = 5_000;

row! {
    /// A port's state as the switch sees it: carrier (`oper_status`) and configuration
    /// (`admin_status`) apart, so a port taken down by the operator is not mistaken for a cable
    /// fault. Written when either changes, and again after a Redis restart.
    pub struct PortState in StateDb "PORT_TABLE" by Plugin, key "EthernetN" {
        pub port: String;
        pub oper_status: OperStatus = "oper_status",
        pub admin_status: Option<AdminStatus> = "admin_status",
    }
}

impl PortState {
    /// Usable for forwarding: carrier up and not administratively down.
    pub fn is_up(&self) -> bool {
        self.oper_status == OperStatus::Up && self.admin_status != Some(AdminStatus::Down)
    }
}

row! {
    /// The PFC watchdog's state of one (port, priority).
    pub struct PfcWdState in StateDb "PFC_WD_STATE" by Plugin, key "EthernetN|priority" {
        pub port: String,
        pub priority: u8;
        pub status: WdStatus = "status",
        pub action: PfcWdAction = "action",
        /// Storms declared so far.
        pub detected: u64 = "detected",
        /// Storms over so far.
        pub restored: u64 = "restored",
        /// Unix time of the last change, milliseconds.
        pub timestamp_ms: u64 = "timestamp_ms",
    }
}

row! {
    /// A queue's ECN thresholds as the tuner has set them, beside the intent's static values.
    pub struct EcnTuningState in StateDb "WEFT_ECN_TUNING" by Plugin, key "EthernetN|tc" {
        pub port: String,
        pub tc: u8;
        /// Bytes.
        pub kmin: u64 = "kmin",
        /// Bytes.
        pub kmax: u64 = "kmax",
        pub pmax: f64 = "pmax",
        /// Bytes.
        pub static_kmin: u64 = "static_kmin",
        /// Bytes.
        pub static_kmax: u64 = "static_kmax",
        pub static_pmax: f64 = "static_pmax",
        pub tuning: Tuning = "tuning",
        /// Why the last move (`pfc`, `queue-high`, `idle-marking`, `static`, ...).
        pub reason: String = "reason",
        /// Unix time of the last move, milliseconds.
        pub changed_at: u64 = "changed_at",
        pub changes: u64 = "changes",
        /// Last sample: mean queue depth, bytes.
        pub depth_mean: Option<u64> = "depth_mean",
        /// Last sample: p99 queue depth, bytes.
        pub depth_p99: Option<u64> = "depth_p99",
        /// Last sample: departures over the line rate, 0–1.
        pub utilization: Option<f64> = "utilization",
        /// Last sample: CE-marked share of departures.
        pub marked_fraction: Option<f64> = "marked_fraction",
        pub pfc_sent: Option<u64> = "pfc_sent",
        pub pfc_received: Option<u64> = "pfc_received",
    }
}

row! {
    /// The plugin's health. Refreshed every status interval with an expiry of
    /// `PLUGIN_STATUS_TTL_MS`, so a missing row means no live plugin.
    pub struct PluginStatus in StateDb "WEFT_PLUGIN" by Plugin, key "status" {
        pub name: String;
        pub state: PluginState = "state",
        pub pid: u32 = "pid",
        pub device_id: u64 = "device_id",
        /// The P4Runtime address the plugin programs.
        pub p4rt: String = "p4rt",
        /// Cookie of the pipeline the switch runs (0: none pushed yet).
        pub pipeline_cookie: u64 = "pipeline_cookie",
        pub switch_updates: u64 = "switch_updates",
        pub batches: u64 = "batches",
        pub keys_ok: u64 = "keys_ok",
        pub keys_failed: u64 = "keys_failed",
        pub syncs: u64 = "syncs",
        pub last_sync_updates: u64 = "last_sync_updates",
        pub sync_failures: u64 = "sync_failures",
        pub installed_keys: u64 = "installed_keys",
        /// Keys waiting in APPL_DB that the plugin has not popped yet.
        pub pending_keys: u64 = "pending_keys",
        pub sessions: u64 = "sessions",
        pub pipeline_pushes: u64 = "pipeline_pushes",
        pub redis_restores: u64 = "redis_restores",
        pub ports_down: u64 = "ports_down",
        pub port_mask_writes: u64 = "port_mask_writes",
        pub link_events: u64 = "link_events",
        pub pfc_wd_storms: u64 = "pfc_wd_storms",
        pub counter_polls: u64 = "counter_polls",
        pub uptime_s: u64 = "uptime_s",
        /// Unix time of this row, milliseconds.
        pub updated_ms: u64 = "updated_ms",
        /// Digest (`weft_sonic_db::Digest`, 32 hex digits) of APPL_STATE_DB `P4RT_TABLE` as the
        /// plugin last wrote it, keys within the table; rewritten right after every write.
        /// `weft plan` reads the rows only when it differs from the desired entries' digest.
        /// Absent from an older plugin.
        pub appl_state_digest: Option<String> = "appl_state_digest",
        /// Rows in that digest.
        pub appl_state_rows: Option<u64> = "appl_state_rows",
        /// Digest of the controller-owned CONFIG_DB tables (rows keyed `TABLE|key`) as the
        /// plugin last read them: its keyspace watcher rereads them on every change.
        pub config_digest: Option<String> = "config_digest",
        /// Rows in that digest.
        pub config_rows: Option<u64> = "config_rows",
        /// Requests (batches of P4RT_TABLE entries) taken over SONiC's ZMQ channel since the
        /// plugin started: what says entries come that way and not through APPL_DB's
        /// consumer. Absent when the plugin serves no ZMQ endpoint (or is older).
        pub zmq_requests: Option<u64> = "zmq_requests",
    }
}

/// The STATE_DB key of each switch's postcard stream.
pub const POSTCARD_STREAM: &str = "WEFT_POSTCARDS";
/// The version of [`PostcardHop`]'s field set (`v`): fields are only ever added.
pub const POSTCARD_HOP_VERSION: u8 = 1;

row! {
    /// One hop of a packet that got a telemetry postcard (a watched flow, or sampled), as the
    /// switch's plugin decoded it: an entry of the Redis stream `WEFT_POSTCARDS` (XADD, trimmed
    /// to `WEFT_TELEMETRY` `postcard_max_records`), not a hash; the key is the stream entry id
    /// (`<unix ms>-<n>`). Hops of one packet are joined across switches by the flow fields and
    /// `ip_id` (IPv4) or `psn` (RoCE). Stable: fields are only added (`v` counts versions).
    pub struct PostcardHop in StateDb "WEFT_POSTCARDS" by Plugin, key "<stream entry id>" {
        pub id: String;
        /// Record format version (1).
        pub version: u8 = "v",
        /// The switch's name (`weft-plugin --switch-name`).
        pub switch: String = "switch",
        /// The pipeline's switch id (the P4Runtime device id).
        pub switch_id: u32 = "switch_id",
        /// `watched` (postcard_watch_table) or `sampled` (1 in N).
        pub reason: String = "reason",
        /// Port name (or the P4Runtime port id in hex when the port map lacks it).
        pub ingress_port: String = "ingress_port",
        pub egress_port: String = "egress_port",
        /// Egress queue (= traffic class).
        pub queue: u8 = "queue",
        /// Packets in the egress queue when this packet was enqueued.
        pub queue_depth: u32 = "queue_depth",
        /// Microseconds the packet spent in the queue.
        pub queue_us: u32 = "queue_us",
        /// Switch clock (µs since the switch started): ingress.
        pub ingress_ts_us: u64 = "ingress_ts_us",
        /// Switch clock: egress (after the queue).
        pub egress_ts_us: u64 = "egress_ts_us",
        /// egress_ts_us − ingress_ts_us: the time the packet spent in the switch.
        pub hop_latency_us: u64 = "hop_latency_us",
        /// Unix time (µs) the plugin received the postcard.
        pub time_us: u64 = "time_us",
        /// Source address of the packet (IPv4 or IPv6).
        pub src: String = "src",
        pub dst: String = "dst",
        /// IP protocol (17 UDP, 6 TCP).
        pub protocol: u8 = "protocol",
        pub src_port: Option<u16> = "src_port",
        pub dst_port: Option<u16> = "dst_port",
        /// RoCEv2 BTH destination QP.
        pub dst_qp: Option<u32> = "dst_qp",
        /// RoCEv2 BTH packet sequence number.
        pub psn: Option<u32> = "psn",
        /// IPv4 identification.
        pub ip_id: Option<u16> = "ip_id",
        /// IPv4 TTL / IPv6 hop limit as the packet left this switch.
        pub ttl: u8 = "ttl",
        /// The pipeline's crc32 of the flow key.
        pub flow_hash: u32 = "flow_hash",
    }
}

impl PluginStatus {
    /// The row of a plugin in `state` that has done nothing yet (one session, one sync, every
    /// counter zero, no digests): what stand-ins and tests publish before they fill in what
    /// they know.
    pub fn fresh(state: PluginState, p4rt: &str) -> PluginStatus {
        PluginStatus {
            name: PLUGIN_STATUS_KEY.into(),
            state,
            pid: std::process::id(),
            device_id: 0,
            p4rt: p4rt.into(),
            pipeline_cookie: 1,
            switch_updates: 0,
            batches: 0,
            keys_ok: 0,
            keys_failed: 0,
            syncs: 1,
            last_sync_updates: 0,
            sync_failures: 0,
            installed_keys: 0,
            pending_keys: 0,
            sessions: 1,
            pipeline_pushes: 0,
            redis_restores: 0,
            ports_down: 0,
            port_mask_writes: 0,
            link_events: 0,
            pfc_wd_storms: 0,
            counter_polls: 0,
            uptime_s: 0,
            updated_ms: 0,
            appl_state_digest: None,
            appl_state_rows: None,
            config_digest: None,
            config_rows: None,
            zmq_requests: None,
        }
    }

    /// APPL_STATE_DB is what the switch holds only while the plugin runs (primary, pipeline
    /// pushed, synced).
    pub fn in_sync(&self) -> bool {
        self.state == PluginState::Running
    }

    /// The published digests of APPL_STATE_DB `P4RT_TABLE` and of the owned CONFIG_DB tables,
    /// when the row has both (an older plugin publishes none).
    pub fn digests(&self) -> Option<InstalledDigests> {
        let entries = Digest::from_hex(self.appl_state_digest.as_deref()?, self.appl_state_rows?)?;
        let config = Digest::from_hex(self.config_digest.as_deref()?, self.config_rows?)?;
        Some(InstalledDigests { entries, config })
    }

    /// Publishes `d` in the row.
    pub fn set_digests(&mut self, d: &InstalledDigests) {
        self.appl_state_digest = Some(d.entries.hex());
        self.appl_state_rows = Some(d.entries.count());
        self.config_digest = Some(d.config.hex());
        self.config_rows = Some(d.config.count());
    }
}

/// What a plugin publishes of a switch's installed state, and what the controller computes of
/// its desired state to compare: the digest of the P4RT entries (APPL_STATE_DB keys within
/// `P4RT_TABLE`) and of the owned CONFIG_DB rows ([`crate::config::config_digest`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InstalledDigests {
    pub entries: Digest,
    pub config: Digest,
}

impl InstalledDigests {
    /// Both as one (the plan's `installed_digest`).
    pub fn combined(&self) -> Digest {
        self.entries.merged(&self.config)
    }
}

/// The STATE_DB table of the controller's lock ([`LockRow`]).
pub const LOCK_TABLE: &str = "WEFT_LOCK";

row! {
    /// Who writes this switch for a fabric: `weft apply` for its pass, `weft run` while it
    /// runs. Taken atomically only when no other holder's `token` is there, refreshed every
    /// third of its expiry (a Redis PEXPIRE), deleted on release; a holder that dies leaves it
    /// to expire, and one on the same host whose pid is gone is taken over at once.
    pub struct LockRow in StateDb "WEFT_LOCK" by Controller, key "fabric" {
        pub fabric: String;
        /// The holder's host name.
        pub host: String = "host",
        pub pid: u32 = "pid",
        /// `weft apply`, `weft run`.
        pub command: String = "command",
        /// Unique per holder: only the holder refreshes or releases it.
        pub token: String = "token",
        /// Unix time it was taken, milliseconds.
        pub acquired_ms: u64 = "acquired_ms",
        /// Unix time it expires unless refreshed, milliseconds.
        pub expires_ms: u64 = "expires_ms",
    }
}

impl LockRow {
    /// `weft run (pid 12, host a)`.
    pub fn holder(&self) -> String {
        format!("{} (pid {}, host {})", self.command, self.pid, self.host)
    }
}

word_enum! {
    /// How an installed entry differs on the switch.
    pub enum DriftKind { Missing = "missing", Modified = "modified" }
}

row! {
    /// An entry APPL_STATE_DB holds as installed that the switch no longer holds so: removed
    /// (`missing`) or rewritten (`modified`) behind the plugin's back. The plugin's periodic
    /// read-back writes it and deletes it once the switch agrees again.
    pub struct DriftState in StateDb "WEFT_DRIFT" by Plugin, key "P4RT_TABLE key" {
        pub key: String;
        pub state: DriftKind = "state",
    }
}

pub(crate) fn catalogue() -> Vec<TableDoc> {
    vec![
        doc_of::<PortState>(),
        doc_of::<PfcWdState>(),
        doc_of::<EcnTuningState>(),
        doc_of::<PluginStatus>(),
        doc_of::<LockRow>(),
        doc_of::<PostcardHop>(),
        doc_of::<DriftState>(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Row;

    #[test]
    fn an_admin_down_port_with_carrier_is_not_up() {
        let p = PortState {
            port: "Ethernet0".into(),
            oper_status: OperStatus::Up,
            admin_status: Some(AdminStatus::Down),
        };
        assert!(!p.is_up());
        let back = PortState::from_fields("Ethernet0", &p.to_fields()).expect("parses");
        assert_eq!(back, p);
        // Written by an older plugin or by SONiC: no admin_status.
        let bare = PortState::from_fields("Ethernet0", &vec![("oper_status".into(), "up".into())])
            .expect("parses");
        assert!(bare.is_up());
    }
}
