//! CONFIG_DB rows the controller writes from the intent and the plugin turns into pipeline
//! tables (SONiC's own names and units, so a SONiC switch could take the same rows).

use crate::{ClassList, Metres, Row, TableDoc, doc_of, map_row, row, word_enum};

word_enum! {
    /// `admin_status` of a port.
    pub enum AdminStatus { Up = "up", Down = "down" }
}

word_enum! {
    /// What a WRED profile does to ECN-capable packets.
    pub enum EcnMode {
        /// Mark green, yellow and red packets.
        All = "ecn_all",
        Green = "ecn_green",
        None = "ecn_none",
    }
}

word_enum! {
    /// The PFC watchdog's action on a stormed queue.
    pub enum PfcWdAction { Drop = "drop", Forward = "forward", Alert = "alert" }
}

word_enum! {
    /// What a queue does with a packet its buffer cannot admit (SONiC's packet trimming).
    pub enum DiscardAction {
        Drop = "drop",
        /// Trim it to `SWITCH_TRIMMING|GLOBAL` `size` and send it on, re-marked.
        Trim = "trim",
    }
}

word_enum! {
    /// Whether the plugin may move the ECN thresholds at run time.
    pub enum Tuning { Auto = "auto", Off = "off" }
}

/// The QoS maps Weft writes are all named this.
pub const MAP_NAME: &str = "WEFT";
/// The one `CABLE_LENGTH` row.
pub const CABLE_LENGTH_NAME: &str = "AZURE";
/// The one `PFC_WD` row that is not a port.
pub const PFC_WD_GLOBAL: &str = "GLOBAL";
/// The one `SWITCH_TRIMMING` row.
pub const SWITCH_TRIMMING_KEY: &str = "GLOBAL";
/// The buffer profile of trimmable queues (SONiC's own example name).
pub const TRIM_PROFILE: &str = "q_lossy_trim_profile";

row! {
    /// A front-panel port. The plugin maps SONiC port names in P4RT entries to P4Runtime port
    /// ids through `id`.
    pub struct Port in ConfigDb "PORT" by Controller, key "EthernetN" {
        pub port: String;
        /// P4Runtime port id (BMv2 port number).
        pub id: u32 = "id",
        /// Mb/s.
        pub speed: Option<u64> = "speed",
        /// Bytes.
        pub mtu: Option<u32> = "mtu",
        /// Only an explicit `down` takes the port out of use.
        pub admin_status: Option<AdminStatus> = "admin_status",
    }
}

map_row! {
    /// DSCP → traffic class.
    pub struct DscpToTcMap in ConfigDb "DSCP_TO_TC_MAP" by Controller,
        key "WEFT", map "<dscp 0..63>": u8 => "traffic class": u8
}

map_row! {
    /// Traffic class → egress queue.
    pub struct TcToQueueMap in ConfigDb "TC_TO_QUEUE_MAP" by Controller,
        key "WEFT", map "<tc>": u8 => "queue": u8
}

map_row! {
    /// Traffic class → ingress priority group.
    pub struct TcToPriorityGroupMap in ConfigDb "TC_TO_PRIORITY_GROUP_MAP" by Controller,
        key "WEFT", map "<tc>": u8 => "priority group": u8
}

row! {
    /// The maps a port uses and the classes PFC protects on it (empty: none).
    pub struct PortQosMap in ConfigDb "PORT_QOS_MAP" by Controller, key "EthernetN" {
        pub port: String;
        pub dscp_to_tc_map: Option<String> = "dscp_to_tc_map",
        pub tc_to_queue_map: Option<String> = "tc_to_queue_map",
        pub tc_to_pg_map: Option<String> = "tc_to_pg_map",
        pub pfc_enable: Option<ClassList> = "pfc_enable",
    }
}

row! {
    /// RED-style ECN marking: no mark under the min threshold, probability rising to
    /// `green_drop_probability` at the max, every packet above.
    pub struct WredProfile in ConfigDb "WRED_PROFILE" by Controller, key "NAME" {
        pub name: String;
        /// Without it, no ECN marking.
        pub ecn: Option<EcnMode> = "ecn",
        pub wred_green_enable: Option<bool> = "wred_green_enable",
        /// Bytes.
        pub green_min_threshold: Option<u64> = "green_min_threshold",
        /// Bytes.
        pub green_max_threshold: Option<u64> = "green_max_threshold",
        /// Percent (SONiC's default 100).
        pub green_drop_probability: Option<f64> = "green_drop_probability",
    }
}

row! {
    /// A queue's WRED profile. SONiC allows a class range (`3-4`) in the key.
    pub struct Queue in ConfigDb "QUEUE" by Controller, key "EthernetN|tc" {
        pub port: String,
        pub queues: ClassList;
        pub wred_profile: Option<String> = "wred_profile",
    }
}

map_row! {
    /// Cable length per port (the headroom model's input).
    pub struct CableLength in ConfigDb "CABLE_LENGTH" by Controller,
        key "AZURE", map "<port>": String => "length": Metres
}

row! {
    /// PFC headroom of a lossless priority group, from the headroom model.
    pub struct BufferProfile in ConfigDb "BUFFER_PROFILE" by Controller, key "NAME" {
        pub name: String;
        pub pool: Option<String> = "pool",
        /// Bytes.
        pub xon: Option<u64> = "xon",
        /// Bytes.
        pub xoff: Option<u64> = "xoff",
        /// Bytes.
        pub size: Option<u64> = "size",
        pub dynamic_th: Option<i32> = "dynamic_th",
        /// `trim`: a packet the queue cannot admit is trimmed (SONiC's packet trimming),
        /// otherwise dropped.
        pub packet_discard_action: Option<DiscardAction> = "packet_discard_action",
    }
}

row! {
    /// A queue's buffer profile (its `packet_discard_action` makes it trimmable). SONiC allows a
    /// class range (`3-4`) in the key.
    pub struct BufferQueue in ConfigDb "BUFFER_QUEUE" by Controller, key "EthernetN|tc" {
        pub port: String,
        pub queues: ClassList;
        pub profile: String = "profile",
    }
}

row! {
    /// Packet trimming, switch-wide (SONiC's packet trimming design): what a trimmed packet
    /// keeps and where it goes. Which queues trim is their buffer profile's
    /// `packet_discard_action`.
    pub struct SwitchTrimming in ConfigDb "SWITCH_TRIMMING" by Controller, key "GLOBAL" {
        pub name: String;
        /// Bytes a trimmed packet keeps (a shorter packet is sent whole).
        pub size: u32 = "size",
        /// DSCP of trimmed packets.
        pub dscp_value: u8 = "dscp_value",
        /// Queue trimmed packets leave by.
        pub queue_index: u8 = "queue_index",
    }
}

row! {
    /// A priority group's buffer profile. SONiC allows a class range (`3-4`) in the key.
    pub struct BufferPg in ConfigDb "BUFFER_PG" by Controller, key "EthernetN|tc" {
        pub port: String,
        pub classes: ClassList;
        pub profile: String = "profile",
    }
}

row! {
    /// The PFC watchdog of a port's lossless queues.
    pub struct PfcWd in ConfigDb "PFC_WD" by Controller, key "EthernetN" {
        pub port: String;
        /// SONiC's default: drop.
        pub action: Option<PfcWdAction> = "action",
        /// Milliseconds (SONiC: 100–5000; default 200).
        pub detection_time: Option<u32> = "detection_time",
        /// Milliseconds (SONiC: 100–60000; default 200).
        pub restoration_time: Option<u32> = "restoration_time",
    }
}

row! {
    /// The PFC watchdog's poll interval (the row keyed `GLOBAL` of `PFC_WD`).
    pub struct PfcWdGlobal in ConfigDb "PFC_WD" by Controller, key "GLOBAL" {
        pub name: String;
        /// Milliseconds (SONiC's default 100).
        pub poll_interval: Option<u32> = "POLL_INTERVAL",
    }
}

row! {
    /// Bounds within which the plugin's ECN tuner may move a queue's thresholds (Weft's own
    /// table): never past the PFC pause threshold, so ECN acts before PFC.
    pub struct EcnEnvelope in ConfigDb "WEFT_ECN_ENVELOPE" by Controller, key "EthernetN|tc" {
        pub port: String,
        pub tc: u8;
        /// Bytes.
        pub kmin_min: u64 = "kmin_min",
        /// Bytes.
        pub kmin_max: u64 = "kmin_max",
        /// Bytes.
        pub kmax_min: u64 = "kmax_min",
        /// Bytes.
        pub kmax_max: u64 = "kmax_max",
        /// Probability 0–1.
        pub pmax_min: f64 = "pmax_min",
        /// Probability 0–1.
        pub pmax_max: f64 = "pmax_max",
        /// Bytes of queue at which PFC pauses (port buffer minus headroom).
        pub pause_threshold: u64 = "pause_threshold",
        pub tuning: Tuning = "tuning",
    }
}

/// The one `WEFT_TELEMETRY` row.
pub const TELEMETRY_KEY: &str = "GLOBAL";

row! {
    /// Telemetry postcards (Weft's own table, from the intent's `telemetry:` section; no row:
    /// postcards off). The plugin sets the pipeline's sampling and postcard clone session from
    /// it, decodes the postcards it receives as packet-in and appends one record per hop to
    /// STATE_DB `WEFT_POSTCARDS`. Watched flows are `postcard_watch_table` entries in P4RT_TABLE.
    pub struct Telemetry in ConfigDb "WEFT_TELEMETRY" by Controller, key "GLOBAL" {
        pub name: String;
        /// A postcard for 1 in N forwarded packets at every switch; 0: only watched flows.
        pub sample_n: u32 = "postcard_sample_n",
        /// Records the plugin keeps in STATE_DB `WEFT_POSTCARDS` (older ones are trimmed).
        pub max_records: u64 = "postcard_max_records",
    }
}

/// Every CONFIG_DB row of one switch, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigRow {
    Port(Port),
    DscpToTcMap(DscpToTcMap),
    TcToQueueMap(TcToQueueMap),
    TcToPriorityGroupMap(TcToPriorityGroupMap),
    PortQosMap(PortQosMap),
    WredProfile(WredProfile),
    Queue(Queue),
    CableLength(CableLength),
    BufferProfile(BufferProfile),
    BufferPg(BufferPg),
    PfcWd(PfcWd),
    PfcWdGlobal(PfcWdGlobal),
    EcnEnvelope(EcnEnvelope),
    Telemetry(Telemetry),
    BufferQueue(BufferQueue),
    SwitchTrimming(SwitchTrimming),
}

macro_rules! each_row {
    ($self:ident, $r:ident => $e:expr) => {
        match $self {
            ConfigRow::Port($r) => $e,
            ConfigRow::DscpToTcMap($r) => $e,
            ConfigRow::TcToQueueMap($r) => $e,
            ConfigRow::TcToPriorityGroupMap($r) => $e,
            ConfigRow::PortQosMap($r) => $e,
            ConfigRow::WredProfile($r) => $e,
            ConfigRow::Queue($r) => $e,
            ConfigRow::CableLength($r) => $e,
            ConfigRow::BufferProfile($r) => $e,
            ConfigRow::BufferPg($r) => $e,
            ConfigRow::PfcWd($r) => $e,
            ConfigRow::PfcWdGlobal($r) => $e,
            ConfigRow::EcnEnvelope($r) => $e,
            ConfigRow::Telemetry($r) => $e,
            ConfigRow::BufferQueue($r) => $e,
            ConfigRow::SwitchTrimming($r) => $e,
        }
    };
}

fn table_of<R: Row>(_: &R) -> &'static str {
    R::TABLE
}

impl ConfigRow {
    pub fn table(&self) -> &'static str {
        each_row!(self, r => table_of(r))
    }
    pub fn key(&self) -> String {
        each_row!(self, r => r.key())
    }
    pub fn to_fields(&self) -> crate::FieldValues {
        each_row!(self, r => r.to_fields())
    }
    /// `TABLE|key`.
    pub fn redis_key(&self) -> String {
        each_row!(self, r => r.redis_key())
    }

    /// Reads a row of any controller-owned table.
    pub fn from_fields(
        table: &str,
        key: &str,
        fields: &crate::FieldValues,
    ) -> Option<Result<ConfigRow, crate::SchemaError>> {
        Some(match table {
            "PORT" => Port::from_fields(key, fields).map(ConfigRow::Port),
            "DSCP_TO_TC_MAP" => DscpToTcMap::from_fields(key, fields).map(ConfigRow::DscpToTcMap),
            "TC_TO_QUEUE_MAP" => {
                TcToQueueMap::from_fields(key, fields).map(ConfigRow::TcToQueueMap)
            }
            "TC_TO_PRIORITY_GROUP_MAP" => {
                TcToPriorityGroupMap::from_fields(key, fields).map(ConfigRow::TcToPriorityGroupMap)
            }
            "PORT_QOS_MAP" => PortQosMap::from_fields(key, fields).map(ConfigRow::PortQosMap),
            "WRED_PROFILE" => WredProfile::from_fields(key, fields).map(ConfigRow::WredProfile),
            "QUEUE" => Queue::from_fields(key, fields).map(ConfigRow::Queue),
            "CABLE_LENGTH" => CableLength::from_fields(key, fields).map(ConfigRow::CableLength),
            "BUFFER_PROFILE" => {
                BufferProfile::from_fields(key, fields).map(ConfigRow::BufferProfile)
            }
            "BUFFER_PG" => BufferPg::from_fields(key, fields).map(ConfigRow::BufferPg),
            "PFC_WD" if key == PFC_WD_GLOBAL => {
                PfcWdGlobal::from_fields(key, fields).map(ConfigRow::PfcWdGlobal)
            }
            "PFC_WD" => PfcWd::from_fields(key, fields).map(ConfigRow::PfcWd),
            "WEFT_ECN_ENVELOPE" => {
                EcnEnvelope::from_fields(key, fields).map(ConfigRow::EcnEnvelope)
            }
            "WEFT_TELEMETRY" => Telemetry::from_fields(key, fields).map(ConfigRow::Telemetry),
            "BUFFER_QUEUE" => BufferQueue::from_fields(key, fields).map(ConfigRow::BufferQueue),
            "SWITCH_TRIMMING" => {
                SwitchTrimming::from_fields(key, fields).map(ConfigRow::SwitchTrimming)
            }
            _ => return None,
        })
    }

    /// Rows others refer to (maps, profiles) before the rows that refer to them, then ports,
    /// then per-port rows: a plugin following CONFIG_DB never sees a dangling reference.
    pub fn write_rank(&self) -> u8 {
        match self {
            ConfigRow::DscpToTcMap(_)
            | ConfigRow::TcToQueueMap(_)
            | ConfigRow::TcToPriorityGroupMap(_)
            | ConfigRow::WredProfile(_)
            | ConfigRow::BufferProfile(_) => 0,
            ConfigRow::Port(_)
            | ConfigRow::CableLength(_)
            | ConfigRow::PfcWdGlobal(_)
            | ConfigRow::Telemetry(_)
            | ConfigRow::SwitchTrimming(_) => 1,
            ConfigRow::PortQosMap(_)
            | ConfigRow::Queue(_)
            | ConfigRow::BufferPg(_)
            | ConfigRow::PfcWd(_)
            | ConfigRow::EcnEnvelope(_)
            | ConfigRow::BufferQueue(_) => 2,
        }
    }
}

/// The digest of CONFIG_DB rows (table, key within it, fields), each keyed `TABLE|key` as
/// [`ConfigRow::redis_key`] renders it: the plugin's of the owned tables as it read them, the
/// controller's of the rows it would write. Equal digests, equal rows.
pub fn config_digest<T, K, F>(rows: impl IntoIterator<Item = (T, K, F)>) -> weft_sonic_db::Digest
where
    T: AsRef<str>,
    K: AsRef<str>,
    F: std::borrow::Borrow<crate::FieldValues>,
{
    let sep = crate::SonicDbId::ConfigDb.separator();
    let mut d = weft_sonic_db::Digest::default();
    let mut key = String::new();
    for (t, k, f) in rows {
        key.clear();
        key.push_str(t.as_ref());
        key.push(sep);
        key.push_str(k.as_ref());
        d.add(&key, f.borrow());
    }
    d
}

/// The CONFIG_DB tables the controller owns: rows there that the intent does not produce are
/// removed.
pub fn owned_tables() -> Vec<&'static str> {
    crate::tables_owned_by(crate::Owner::Controller, crate::SonicDbId::ConfigDb)
}

/// One switch's CONFIG_DB, parsed once: what the plugin's features read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigDb {
    pub ports: std::collections::BTreeMap<String, Port>,
    pub dscp_to_tc: std::collections::BTreeMap<String, DscpToTcMap>,
    pub port_qos: std::collections::BTreeMap<String, PortQosMap>,
    pub wred: std::collections::BTreeMap<String, WredProfile>,
    pub queues: Vec<Queue>,
    pub buffer_profiles: std::collections::BTreeMap<String, BufferProfile>,
    pub buffer_pgs: Vec<BufferPg>,
    pub pfc_wd: std::collections::BTreeMap<String, PfcWd>,
    pub pfc_wd_global: Option<PfcWdGlobal>,
    pub envelopes: std::collections::BTreeMap<(String, u8), EcnEnvelope>,
    pub cable_length: Option<CableLength>,
    pub telemetry: Option<Telemetry>,
    pub buffer_queues: Vec<BufferQueue>,
    pub switch_trimming: Option<SwitchTrimming>,
    /// Rows that did not parse; the rest is used.
    pub errors: Vec<crate::SchemaError>,
}

impl ConfigDb {
    /// From `(table, key, fields)` rows, e.g. a dump of every owned table.
    pub fn from_rows<'a>(
        rows: impl IntoIterator<Item = (&'a str, &'a str, &'a crate::FieldValues)>,
    ) -> ConfigDb {
        let mut db = ConfigDb::default();
        for (table, key, fields) in rows {
            match ConfigRow::from_fields(table, key, fields) {
                None => {}
                Some(Err(e)) => db.errors.push(e),
                Some(Ok(row)) => db.insert(row),
            }
        }
        db
    }

    pub fn insert(&mut self, row: ConfigRow) {
        match row {
            ConfigRow::Port(r) => {
                self.ports.insert(r.port.clone(), r);
            }
            ConfigRow::DscpToTcMap(r) => {
                self.dscp_to_tc.insert(r.name.clone(), r);
            }
            ConfigRow::TcToQueueMap(_) | ConfigRow::TcToPriorityGroupMap(_) => {}
            ConfigRow::PortQosMap(r) => {
                self.port_qos.insert(r.port.clone(), r);
            }
            ConfigRow::WredProfile(r) => {
                self.wred.insert(r.name.clone(), r);
            }
            ConfigRow::Queue(r) => self.queues.push(r),
            ConfigRow::CableLength(r) => self.cable_length = Some(r),
            ConfigRow::BufferProfile(r) => {
                self.buffer_profiles.insert(r.name.clone(), r);
            }
            ConfigRow::BufferPg(r) => self.buffer_pgs.push(r),
            ConfigRow::PfcWd(r) => {
                self.pfc_wd.insert(r.port.clone(), r);
            }
            ConfigRow::PfcWdGlobal(r) => self.pfc_wd_global = Some(r),
            ConfigRow::EcnEnvelope(r) => {
                self.envelopes.insert((r.port.clone(), r.tc), r);
            }
            ConfigRow::Telemetry(r) => self.telemetry = Some(r),
            ConfigRow::BufferQueue(r) => self.buffer_queues.push(r),
            ConfigRow::SwitchTrimming(r) => self.switch_trimming = Some(r),
        }
    }

    /// The WRED profile of `(port, queue)`, through `QUEUE`.
    pub fn wred_of(&self, port: &str, queue: u8) -> Option<&WredProfile> {
        self.queues
            .iter()
            .filter(|q| q.port == port && q.queues.contains(queue))
            .find_map(|q| self.wred.get(q.wred_profile.as_deref()?))
    }

    /// The buffer profile of `(port, class)`, through `BUFFER_PG`.
    pub fn buffer_profile_of(&self, port: &str, class: u8) -> Option<&BufferProfile> {
        self.buffer_pgs
            .iter()
            .filter(|b| b.port == port && b.classes.contains(class))
            .find_map(|b| self.buffer_profiles.get(&b.profile))
    }

    /// Whether `(port, queue)` trims: its `BUFFER_QUEUE` profile's `packet_discard_action` is
    /// `trim` (without `SWITCH_TRIMMING|GLOBAL` nothing trims).
    pub fn trims(&self, port: &str, queue: u8) -> bool {
        self.switch_trimming.is_some()
            && self
                .buffer_queues
                .iter()
                .filter(|b| b.port == port && b.queues.contains(queue))
                .filter_map(|b| self.buffer_profiles.get(&b.profile))
                .any(|p| p.packet_discard_action == Some(DiscardAction::Trim))
    }

    /// Classes PFC protects on `port`.
    pub fn pfc_enabled(&self, port: &str) -> ClassList {
        self.port_qos
            .get(port)
            .and_then(|q| q.pfc_enable.clone())
            .unwrap_or_default()
    }

    /// The MTU of `port`, when configured.
    pub fn mtu(&self, port: &str) -> Option<u32> {
        self.ports.get(port).and_then(|p| p.mtu).filter(|m| *m > 0)
    }
}

pub(crate) fn catalogue() -> Vec<TableDoc> {
    vec![
        doc_of::<Port>(),
        doc_of::<DscpToTcMap>(),
        doc_of::<TcToQueueMap>(),
        doc_of::<TcToPriorityGroupMap>(),
        doc_of::<PortQosMap>(),
        doc_of::<WredProfile>(),
        doc_of::<Queue>(),
        doc_of::<CableLength>(),
        doc_of::<BufferProfile>(),
        doc_of::<BufferPg>(),
        doc_of::<PfcWd>(),
        doc_of::<PfcWdGlobal>(),
        doc_of::<EcnEnvelope>(),
        doc_of::<Telemetry>(),
        doc_of::<BufferQueue>(),
        doc_of::<SwitchTrimming>(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_through_their_fields() {
        let rows = [
            ConfigRow::Port(Port {
                port: "Ethernet8".into(),
                id: 3,
                speed: Some(400_000),
                mtu: Some(9100),
                admin_status: Some(AdminStatus::Up),
            }),
            ConfigRow::Queue(Queue {
                port: "Ethernet8".into(),
                queues: ClassList::single(3),
                wred_profile: Some("WEFT_ROCE_400G".into()),
            }),
            ConfigRow::PfcWdGlobal(PfcWdGlobal {
                name: PFC_WD_GLOBAL.into(),
                poll_interval: Some(100),
            }),
            ConfigRow::WredProfile(WredProfile {
                name: "W".into(),
                ecn: Some(EcnMode::All),
                wred_green_enable: Some(true),
                green_min_threshold: Some(400_000),
                green_max_threshold: Some(1_600_000),
                green_drop_probability: Some(20.0),
            }),
        ];
        for r in rows {
            let back = ConfigRow::from_fields(r.table(), &r.key(), &r.to_fields())
                .expect("known table")
                .expect("parses");
            assert_eq!(back, r);
        }
    }

    #[test]
    fn the_config_digest_of_typed_rows_equals_that_of_the_rows_as_read_back() {
        let rows = [
            ConfigRow::Port(Port {
                port: "Ethernet8".into(),
                id: 3,
                speed: Some(400_000),
                mtu: Some(9100),
                admin_status: Some(AdminStatus::Up),
            }),
            ConfigRow::Queue(Queue {
                port: "Ethernet8".into(),
                queues: ClassList::single(3),
                wred_profile: Some("WEFT_ROCE_400G".into()),
            }),
        ];
        let typed = config_digest(rows.iter().map(|r| (r.table(), r.key(), r.to_fields())));
        // What a reader of CONFIG_DB has: `TABLE|key` → fields in another order.
        let read: Vec<(String, crate::FieldValues)> = rows
            .iter()
            .map(|r| {
                let mut f = r.to_fields();
                f.reverse();
                (r.redis_key(), f)
            })
            .collect();
        assert_eq!(
            typed,
            weft_sonic_db::Digest::of(read.iter().map(|(k, f)| (k.as_str(), f)))
        );
        assert_eq!(typed.count(), 2);
        let one_less = config_digest(
            rows[..1]
                .iter()
                .map(|r| (r.table(), r.key(), r.to_fields())),
        );
        assert_ne!(typed, one_less);
    }

    #[test]
    fn a_bad_value_names_the_table_key_field_and_what_was_expected() {
        let f = vec![
            ("id".to_string(), "three".to_string()),
            ("speed".into(), "1000".into()),
            ("mtu".into(), "9100".into()),
            ("admin_status".into(), "up".into()),
        ];
        let e = Port::from_fields("Ethernet0", &f).expect_err("bad id");
        let e2 = Port::from_fields("Ethernet0", &vec![]).expect_err("no id");
        assert!(e2.to_string().contains("`id` is missing"), "{e2}");
        let s = e.to_string();
        assert!(
            s.contains("PORT|Ethernet0") && s.contains("`id`") && s.contains("three"),
            "{s}"
        );
        let e = Queue::from_fields("Ethernet0", &vec![]).expect_err("key has no queue");
        assert!(e.to_string().contains("EthernetN|tc"), "{e}");
    }

    #[test]
    fn trimming_rows_read_like_sonics_design_writes_them_and_say_which_queues_trim() {
        // SONiC's packet trimming design, "Data sample" / "Configuration sample".
        let f = |v: &[(&str, &str)]| -> crate::FieldValues {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let rows = [
            (
                "SWITCH_TRIMMING",
                "GLOBAL",
                f(&[("size", "128"), ("dscp_value", "48"), ("queue_index", "6")]),
            ),
            (
                "BUFFER_PROFILE",
                "q_lossy_trim_profile",
                f(&[
                    ("dynamic_th", "3"),
                    ("pool", "egress_lossy_pool"),
                    ("size", "0"),
                    ("packet_discard_action", "trim"),
                ]),
            ),
            (
                "BUFFER_QUEUE",
                "Ethernet0|3",
                f(&[("profile", "q_lossy_trim_profile")]),
            ),
        ];
        let db = ConfigDb::from_rows(rows.iter().map(|(t, k, v)| (*t, *k, v)));
        assert!(db.errors.is_empty(), "{:?}", db.errors);
        let st = db.switch_trimming.clone().expect("global row");
        assert_eq!((st.size, st.dscp_value, st.queue_index), (128, 48, 6));
        assert!(db.trims("Ethernet0", 3));
        assert!(!db.trims("Ethernet0", 4) && !db.trims("Ethernet4", 3));
        for r in [
            ConfigRow::SwitchTrimming(st),
            ConfigRow::BufferQueue(db.buffer_queues[0].clone()),
            ConfigRow::BufferProfile(db.buffer_profiles[TRIM_PROFILE].clone()),
        ] {
            let back = ConfigRow::from_fields(r.table(), &r.key(), &r.to_fields())
                .expect("known table")
                .expect("parses");
            assert_eq!(back, r);
        }
        // Without the switch-wide row, a trim profile trims nothing.
        let db = ConfigDb::from_rows(rows[1..].iter().map(|(t, k, v)| (*t, *k, v)));
        assert!(!db.trims("Ethernet0", 3));
        let bad = f(&[("packet_discard_action", "shred")]);
        let e = BufferProfile::from_fields("p", &bad).expect_err("unknown action");
        assert!(e.to_string().contains("shred"), "{e}");
    }

    #[test]
    fn class_ranges_in_keys_are_read_like_sonic_writes_them() {
        let q = Queue::from_fields("Ethernet0|3-4", &vec![("wred_profile".into(), "W".into())])
            .expect("range key");
        assert!(q.queues.contains(3) && q.queues.contains(4) && !q.queues.contains(5));
    }

    #[test]
    fn the_controller_owns_every_config_table_it_writes() {
        let owned = owned_tables();
        for t in [
            "PORT",
            "QUEUE",
            "PFC_WD",
            "WEFT_ECN_ENVELOPE",
            "CABLE_LENGTH",
        ] {
            assert!(owned.contains(&t), "{t}");
        }
    }
}
