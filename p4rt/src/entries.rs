//! Typed builders: names are resolved through the P4Info, values are checked against their
//! bitwidths and encoded canonically, so a built entry is what the switch will read back.
//!
//! ```no_run
//! # fn demo(info: &weft_p4rt::P4Info) -> weft_p4rt::Result<()> {
//! use std::net::Ipv4Addr;
//! let fwd = info.action_call("ingress.set_port")?.param("port", 3u16)?;
//! let entry = info
//!     .table_entry("ingress.route")?
//!     .lpm("hdr.ipv4.dst", Ipv4Addr::new(10, 0, 0, 0), 8)?
//!     .action(fwd)?
//!     .build()?;
//! # let _ = entry; Ok(()) }
//! ```

use std::collections::BTreeSet;

use p4runtime_proto::p4::v1::{
    self as p4, ActionProfileAction, ActionProfileActionSet, ActionProfileGroup,
    ActionProfileMember, CloneSessionEntry, CounterEntry, DirectCounterEntry, DirectMeterEntry,
    FieldMatch, Index, MeterConfig, MeterEntry, MulticastGroupEntry, PacketIn, PacketMetadata,
    PacketOut, PacketReplicationEngineEntry, RegisterEntry, Replica, TableAction, TableEntry,
    action_profile_action, action_profile_group, field_match, packet_replication_engine_entry,
    replica, table_action,
};

use crate::bytes::{self, IntoBitstring, fit};
use crate::error::{Error, MatchKind, Result};
use crate::p4info::{ActionInfo, ControllerHeaderInfo, MatchFieldInfo, P4Info, TableInfo};

/// Builds one table entry. Obtain with [`P4Info::table_entry`].
#[derive(Debug, Clone)]
pub struct TableEntryBuilder<'a> {
    info: &'a P4Info,
    table: &'a TableInfo,
    entry: TableEntry,
    seen: BTreeSet<u32>,
}

impl<'a> TableEntryBuilder<'a> {
    fn field(&mut self, name: &str, used: MatchKind) -> Result<&'a MatchFieldInfo> {
        let table: &'a TableInfo = self.table;
        let f = table.field(name)?;
        // Optional-match fields accept exact values too in spirit, but P4Runtime wants the
        // declared kind on the wire.
        if f.kind != used {
            return Err(Error::MatchKindMismatch {
                table: table.name.clone(),
                field: f.name.clone(),
                declared: f.kind,
                used,
            });
        }
        if !self.seen.insert(f.id) {
            return Err(Error::DuplicateMatch {
                table: table.name.clone(),
                field: f.name.clone(),
            });
        }
        Ok(f)
    }

    fn what(&self, f: &MatchFieldInfo) -> String {
        format!("match field {} of table {}", f.name, self.table.name)
    }

    fn push(&mut self, f: &MatchFieldInfo, m: field_match::FieldMatchType) {
        self.entry.r#match.push(FieldMatch {
            field_id: f.id,
            field_match_type: Some(m),
        });
    }

    pub fn exact(mut self, field: &str, value: impl IntoBitstring) -> Result<Self> {
        let f = self.field(field, MatchKind::Exact)?;
        let value = fit(value, f.bitwidth, || self.what(f))?;
        self.push(
            f,
            field_match::FieldMatchType::Exact(field_match::Exact { value }),
        );
        Ok(self)
    }

    /// A prefix of length 0 is a wildcard: the field is left out, as P4Runtime requires.
    pub fn lpm(mut self, field: &str, value: impl IntoBitstring, prefix_len: u32) -> Result<Self> {
        let f = self.field(field, MatchKind::Lpm)?;
        let value = fit(value, f.bitwidth, || self.what(f))?;
        let width = f.bitwidth.max(0) as u32;
        if prefix_len > width {
            return Err(Error::InvalidValue {
                what: self.what(f),
                problem: format!("prefix length {prefix_len} exceeds bitwidth {width}"),
            });
        }
        if prefix_len == 0 {
            return Ok(self);
        }
        if bytes::has_bits_outside(&value, &bytes::prefix_mask(width, prefix_len)) {
            return Err(Error::InvalidValue {
                what: self.what(f),
                problem: format!(
                    "{} has bits set beyond the /{prefix_len} prefix",
                    bytes::hex(&value)
                ),
            });
        }
        self.push(
            f,
            field_match::FieldMatchType::Lpm(field_match::Lpm {
                value,
                prefix_len: prefix_len as i32,
            }),
        );
        Ok(self)
    }

    /// A zero mask is a wildcard and leaves the field out.
    pub fn ternary(
        mut self,
        field: &str,
        value: impl IntoBitstring,
        mask: impl IntoBitstring,
    ) -> Result<Self> {
        let f = self.field(field, MatchKind::Ternary)?;
        let value = fit(value, f.bitwidth, || self.what(f))?;
        let mask = fit(mask, f.bitwidth, || format!("mask of {}", self.what(f)))?;
        if mask == [0] {
            return Ok(self);
        }
        if bytes::has_bits_outside(&value, &mask) {
            return Err(Error::InvalidValue {
                what: self.what(f),
                problem: format!(
                    "value {} has bits outside mask {}",
                    bytes::hex(&value),
                    bytes::hex(&mask)
                ),
            });
        }
        self.push(
            f,
            field_match::FieldMatchType::Ternary(field_match::Ternary { value, mask }),
        );
        Ok(self)
    }

    /// The full range of the field is a wildcard and leaves the field out.
    pub fn range(
        mut self,
        field: &str,
        low: impl IntoBitstring,
        high: impl IntoBitstring,
    ) -> Result<Self> {
        let f = self.field(field, MatchKind::Range)?;
        let low = fit(low, f.bitwidth, || format!("low bound of {}", self.what(f)))?;
        let high = fit(high, f.bitwidth, || {
            format!("high bound of {}", self.what(f))
        })?;
        let (lo, hi) = (bytes::to_u128(&low), bytes::to_u128(&high));
        if let (Some(lo), Some(hi)) = (lo, hi) {
            if lo > hi {
                return Err(Error::InvalidValue {
                    what: self.what(f),
                    problem: format!("low {lo} > high {hi}"),
                });
            }
            let width = f.bitwidth.max(0) as u32;
            let max = if width >= 128 {
                u128::MAX
            } else {
                (1u128 << width) - 1
            };
            if lo == 0 && hi == max {
                return Ok(self);
            }
        }
        self.push(
            f,
            field_match::FieldMatchType::Range(field_match::Range { low, high }),
        );
        Ok(self)
    }

    pub fn optional(mut self, field: &str, value: impl IntoBitstring) -> Result<Self> {
        let f = self.field(field, MatchKind::Optional)?;
        let value = fit(value, f.bitwidth, || self.what(f))?;
        self.push(
            f,
            field_match::FieldMatchType::Optional(field_match::Optional { value }),
        );
        Ok(self)
    }

    pub fn priority(mut self, priority: i32) -> Self {
        self.entry.priority = priority;
        self
    }

    /// A direct action. The action must be one the table allows (`@defaultonly` actions only
    /// on the default entry).
    pub fn action(mut self, call: ActionCall<'_>) -> Result<Self> {
        let id = call.action.id;
        let allowed = if self.entry.is_default_action {
            self.table.action_ids.contains(&id)
        } else {
            self.table.entry_action_ids().any(|a| a == id)
        };
        if !allowed {
            return Err(Error::ActionNotInTable {
                table: self.table.name.clone(),
                action: call.action.name.clone(),
            });
        }
        if self.table.action_profile_id.is_some() {
            return Err(Error::TableImplementation {
                table: self.table.name.clone(),
                problem:
                    "is implemented by an action profile: use member_id, group_id or action_set"
                        .into(),
            });
        }
        let action = call.finish()?;
        self.entry.action = Some(TableAction {
            r#type: Some(table_action::Type::Action(action)),
        });
        Ok(self)
    }

    fn profile_check(&self) -> Result<()> {
        if self.table.action_profile_id.is_none() {
            return Err(Error::TableImplementation {
                table: self.table.name.clone(),
                problem: "has no action profile: use a direct action".into(),
            });
        }
        Ok(())
    }

    pub fn member_id(mut self, member_id: u32) -> Result<Self> {
        self.profile_check()?;
        self.entry.action = Some(TableAction {
            r#type: Some(table_action::Type::ActionProfileMemberId(member_id)),
        });
        Ok(self)
    }

    pub fn group_id(mut self, group_id: u32) -> Result<Self> {
        self.profile_check()?;
        self.entry.action = Some(TableAction {
            r#type: Some(table_action::Type::ActionProfileGroupId(group_id)),
        });
        Ok(self)
    }

    /// A one-shot weighted action set (the switch makes the group).
    pub fn action_set(mut self, actions: Vec<WeightedAction<'_>>) -> Result<Self> {
        self.profile_check()?;
        let mut set = ActionProfileActionSet::default();
        for w in actions {
            if !self.table.action_ids.contains(&w.call.action.id) {
                return Err(Error::ActionNotInTable {
                    table: self.table.name.clone(),
                    action: w.call.action.name.clone(),
                });
            }
            set.action_profile_actions.push(ActionProfileAction {
                action: Some(w.call.finish()?),
                weight: w.weight,
                watch_kind: w
                    .watch_port
                    .map(action_profile_action::WatchKind::WatchPort),
            });
        }
        self.entry.action = Some(TableAction {
            r#type: Some(table_action::Type::ActionProfileActionSet(set)),
        });
        Ok(self)
    }

    /// Targets the table's default entry (MODIFY only; no match fields).
    pub fn default_entry(mut self) -> Self {
        self.entry.is_default_action = true;
        self
    }

    /// The entry. Match fields are sorted by id, as the switch reads them back.
    pub fn build(mut self) -> Result<TableEntry> {
        let has_priority_fields = self.table.needs_priority();
        if has_priority_fields && self.entry.priority <= 0 && !self.entry.is_default_action {
            return Err(Error::MissingPriority {
                table: self.table.name.clone(),
            });
        }
        self.entry.r#match.sort_by_key(|m| m.field_id);
        let _ = self.info;
        Ok(self.entry)
    }
}

/// An action with its parameters. Obtain with [`P4Info::action_call`].
#[derive(Debug, Clone)]
pub struct ActionCall<'a> {
    action: &'a ActionInfo,
    params: Vec<p4::action::Param>,
}

impl<'a> ActionCall<'a> {
    pub fn param(mut self, name: &str, value: impl IntoBitstring) -> Result<Self> {
        let p = self.action.param(name)?;
        if self.params.iter().any(|x| x.param_id == p.id) {
            return Err(Error::DuplicateParam {
                action: self.action.name.clone(),
                param: p.name.clone(),
            });
        }
        let value = fit(value, p.bitwidth, || {
            format!("parameter {} of action {}", p.name, self.action.name)
        })?;
        self.params.push(p4::action::Param {
            param_id: p.id,
            value,
        });
        Ok(self)
    }

    pub fn action_id(&self) -> u32 {
        self.action.id
    }

    fn finish(mut self) -> Result<p4::Action> {
        for p in &self.action.params {
            if !self.params.iter().any(|x| x.param_id == p.id) {
                return Err(Error::MissingParam {
                    action: self.action.name.clone(),
                    param: p.name.clone(),
                });
            }
        }
        self.params.sort_by_key(|p| p.param_id);
        Ok(p4::Action {
            action_id: self.action.id,
            params: self.params,
        })
    }
}

/// One action of a one-shot action set.
#[derive(Debug, Clone)]
pub struct WeightedAction<'a> {
    pub call: ActionCall<'a>,
    pub weight: i32,
    /// Port whose liveness gates this action, as a canonical bytestring.
    pub watch_port: Option<Vec<u8>>,
}

impl<'a> WeightedAction<'a> {
    pub fn new(call: ActionCall<'a>, weight: i32) -> Self {
        WeightedAction {
            call,
            weight,
            watch_port: None,
        }
    }
    pub fn watch_port(mut self, port: impl IntoBitstring) -> Self {
        self.watch_port = Some(bytes::canonical(&port.into_bitstring()));
        self
    }
}

/// Builds an action profile group. Obtain with [`P4Info::group`].
#[derive(Debug, Clone)]
pub struct GroupBuilder {
    group: ActionProfileGroup,
}

impl GroupBuilder {
    /// Adds a member with a weight; `watch_port` (if any) gates it on that port's liveness.
    pub fn member(
        mut self,
        member_id: u32,
        weight: i32,
        watch_port: Option<impl IntoBitstring>,
    ) -> Self {
        self.group.members.push(action_profile_group::Member {
            member_id,
            weight,
            watch_kind: watch_port.map(|p| {
                action_profile_group::member::WatchKind::WatchPort(bytes::canonical(
                    &p.into_bitstring(),
                ))
            }),
        });
        self
    }

    pub fn max_size(mut self, max_size: i32) -> Self {
        self.group.max_size = max_size;
        self
    }

    pub fn build(mut self) -> ActionProfileGroup {
        self.group.members.sort_by_key(|m| m.member_id);
        self.group
    }
}

/// Builds a packet-out. Obtain with [`P4Info::packet_out`].
#[derive(Debug, Clone)]
pub struct PacketOutBuilder<'a> {
    header: &'a ControllerHeaderInfo,
    packet: PacketOut,
}

impl PacketOutBuilder<'_> {
    pub fn meta(mut self, name: &str, value: impl IntoBitstring) -> Result<Self> {
        let m = self.header.field(name)?;
        let value = fit(value, m.bitwidth, || {
            format!("packet_out metadata {}", m.name)
        })?;
        self.packet.metadata.retain(|x| x.metadata_id != m.id);
        self.packet.metadata.push(PacketMetadata {
            metadata_id: m.id,
            value,
        });
        Ok(self)
    }

    /// Every metadata field of the header must be set.
    pub fn build(mut self) -> Result<PacketOut> {
        for m in &self.header.metadata {
            if !self.packet.metadata.iter().any(|x| x.metadata_id == m.id) {
                return Err(Error::MissingParam {
                    action: self.header.name.clone(),
                    param: m.name.clone(),
                });
            }
        }
        self.packet.metadata.sort_by_key(|m| m.metadata_id);
        Ok(self.packet)
    }
}

/// A packet-in with metadata names resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedPacketIn {
    pub payload: Vec<u8>,
    /// (name, canonical value) in metadata id order.
    pub metadata: Vec<(String, Vec<u8>)>,
}

impl DecodedPacketIn {
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.metadata
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
    pub fn get_u64(&self, name: &str) -> Option<u64> {
        self.get(name)
            .and_then(bytes::to_u128)
            .and_then(|v| u64::try_from(v).ok())
    }
}

impl P4Info {
    pub fn table_entry(&self, table: &str) -> Result<TableEntryBuilder<'_>> {
        let t = self.table(table)?;
        Ok(TableEntryBuilder {
            info: self,
            table: t,
            entry: TableEntry {
                table_id: t.id,
                ..Default::default()
            },
            seen: BTreeSet::new(),
        })
    }

    /// A wildcard read of every entry of `table` (or of all tables with `None`).
    pub fn table_wildcard(&self, table: Option<&str>) -> Result<TableEntry> {
        let table_id = match table {
            Some(t) => self.table(t)?.id,
            None => 0,
        };
        Ok(TableEntry {
            table_id,
            ..Default::default()
        })
    }

    pub fn action_call(&self, action: &str) -> Result<ActionCall<'_>> {
        Ok(ActionCall {
            action: self.action(action)?,
            params: Vec::new(),
        })
    }

    /// An action profile member. The action must be allowed in a table the profile serves.
    pub fn member(
        &self,
        profile: &str,
        member_id: u32,
        call: ActionCall<'_>,
    ) -> Result<ActionProfileMember> {
        let p = self.action_profile(profile)?;
        let allowed = p.table_ids.iter().any(|t| {
            self.table_by_id(*t)
                .is_ok_and(|t| t.action_ids.contains(&call.action.id))
        });
        if !allowed {
            return Err(Error::ActionNotInTable {
                table: format!("(tables of action profile {})", p.name),
                action: call.action.name.clone(),
            });
        }
        Ok(ActionProfileMember {
            action_profile_id: p.id,
            member_id,
            action: Some(call.finish()?),
        })
    }

    /// A member key only (for DELETE and reads).
    pub fn member_key(&self, profile: &str, member_id: u32) -> Result<ActionProfileMember> {
        let p = self.action_profile(profile)?;
        Ok(ActionProfileMember {
            action_profile_id: p.id,
            member_id,
            action: None,
        })
    }

    pub fn group(&self, profile: &str, group_id: u32) -> Result<GroupBuilder> {
        let p = self.action_profile(profile)?;
        Ok(GroupBuilder {
            group: ActionProfileGroup {
                action_profile_id: p.id,
                group_id,
                ..Default::default()
            },
        })
    }

    /// An indexed counter cell, or every cell with `index = None` (for reads).
    pub fn counter_entry(&self, counter: &str, index: Option<i64>) -> Result<CounterEntry> {
        let c = self.counter(counter)?;
        check_index(&c.name, index, c.size)?;
        Ok(CounterEntry {
            counter_id: c.id,
            index: index.map(|index| Index { index }),
            data: None,
        })
    }

    /// The direct counter of one entry; pass a [`P4Info::table_wildcard`] to read all of a table.
    pub fn direct_counter_entry(&self, entry: TableEntry) -> Result<DirectCounterEntry> {
        let t = self.table_by_id(entry.table_id)?;
        if t.direct_counter_id.is_none() {
            return Err(Error::TableImplementation {
                table: t.name.clone(),
                problem: "has no direct counter".into(),
            });
        }
        Ok(DirectCounterEntry {
            table_entry: Some(entry),
            data: None,
        })
    }

    /// An indexed meter cell, with a config to write or `None` to read (or reset on MODIFY).
    pub fn meter_entry(
        &self,
        meter: &str,
        index: Option<i64>,
        config: Option<MeterConfig>,
    ) -> Result<MeterEntry> {
        let m = self.meter(meter)?;
        check_index(&m.name, index, m.size)?;
        Ok(MeterEntry {
            meter_id: m.id,
            index: index.map(|index| Index { index }),
            config,
            counter_data: None,
        })
    }

    pub fn direct_meter_entry(
        &self,
        entry: TableEntry,
        config: Option<MeterConfig>,
    ) -> Result<DirectMeterEntry> {
        let t = self.table_by_id(entry.table_id)?;
        if t.direct_meter_id.is_none() {
            return Err(Error::TableImplementation {
                table: t.name.clone(),
                problem: "has no direct meter".into(),
            });
        }
        Ok(DirectMeterEntry {
            table_entry: Some(entry),
            config,
            counter_data: None,
        })
    }

    /// A register cell (or all with `None`) for a read. BMv2 answers UNIMPLEMENTED, which the
    /// client reports as [`Error::Unimplemented`].
    pub fn register_entry(&self, register: &str, index: Option<i64>) -> Result<RegisterEntry> {
        let r = self.register(register)?;
        check_index(&r.name, index, r.size)?;
        Ok(RegisterEntry {
            register_id: r.id,
            index: index.map(|index| Index { index }),
            data: None,
        })
    }

    /// A packet-out carrying the metadata of the P4Info's `packet_out` header.
    pub fn packet_out(&self, payload: Vec<u8>) -> Result<PacketOutBuilder<'_>> {
        let header = self.controller_header("packet_out")?;
        Ok(PacketOutBuilder {
            header,
            packet: PacketOut {
                payload,
                metadata: Vec::new(),
            },
        })
    }

    /// Names the metadata of a packet-in by the P4Info's `packet_in` header.
    pub fn decode_packet_in(&self, packet: &PacketIn) -> Result<DecodedPacketIn> {
        let header = self.controller_header("packet_in")?;
        let mut metadata = Vec::with_capacity(packet.metadata.len());
        for m in &packet.metadata {
            let info = header
                .metadata
                .iter()
                .find(|x| x.id == m.metadata_id)
                .ok_or_else(|| Error::UnknownId {
                    kind: crate::error::ObjectKind::PacketMetadata,
                    id: m.metadata_id,
                    scope: Some("controller header packet_in".into()),
                })?;
            metadata.push((info.name.clone(), bytes::canonical(&m.value)));
        }
        Ok(DecodedPacketIn {
            payload: packet.payload.clone(),
            metadata,
        })
    }
}

fn check_index(name: &str, index: Option<i64>, size: i64) -> Result<()> {
    match index {
        Some(i) if i < 0 || (size > 0 && i >= size) => Err(Error::InvalidValue {
            what: format!("index of {name}"),
            problem: format!("{i} is outside 0..{size}"),
        }),
        _ => Ok(()),
    }
}

/// A multicast group replicating to `(port, instance)` pairs. Ports are sent as canonical
/// bytestrings (`Replica.port`, P4Runtime ≥ 1.4; PI accepts it).
pub fn multicast_group(
    group_id: u32,
    replicas: impl IntoIterator<Item = (u32, u32)>,
) -> PacketReplicationEngineEntry {
    PacketReplicationEngineEntry {
        r#type: Some(packet_replication_engine_entry::Type::MulticastGroupEntry(
            MulticastGroupEntry {
                multicast_group_id: group_id,
                replicas: sorted_replicas(replicas),
                metadata: Vec::new(),
            },
        )),
    }
}

/// A clone session to `(port, instance)` pairs; `packet_length_bytes = 0` clones whole packets.
/// BMv2 (PI) refuses truncation (`packet_length_bytes != 0`) and a class of service other than 0.
pub fn clone_session(
    session_id: u32,
    replicas: impl IntoIterator<Item = (u32, u32)>,
    class_of_service: u32,
    packet_length_bytes: i32,
) -> PacketReplicationEngineEntry {
    PacketReplicationEngineEntry {
        r#type: Some(packet_replication_engine_entry::Type::CloneSessionEntry(
            CloneSessionEntry {
                session_id,
                replicas: sorted_replicas(replicas),
                class_of_service,
                packet_length_bytes,
            },
        )),
    }
}

fn sorted_replicas(replicas: impl IntoIterator<Item = (u32, u32)>) -> Vec<Replica> {
    let mut r: Vec<Replica> = replicas
        .into_iter()
        .map(|(p, i)| make_replica(p, i))
        .collect();
    crate::canon::sort_replicas(&mut r);
    r
}

fn make_replica(port: u32, instance: u32) -> Replica {
    Replica {
        instance,
        backup_replicas: Vec::new(),
        port_kind: Some(replica::PortKind::Port(bytes::canonical(
            &port.to_be_bytes(),
        ))),
    }
}
