//! Normalising what the switch returns and naming entities for humans.
//!
//! [`canonicalize_entity`] puts an entity into the form the builders produce (canonical
//! bytestrings, match fields and params sorted by id, group members by member id), so a
//! read-back compares equal to what was written.

use std::fmt::Write as _;

use p4runtime_proto::p4::v1::{
    Action, Entity, FieldMatch, TableAction, TableEntry, action_profile_action,
    action_profile_group, entity, field_match, packet_replication_engine_entry, replica,
    table_action,
};

use crate::bytes::{canonicalize, hex};
use crate::p4info::P4Info;

pub fn canonicalize_entity(e: &mut Entity) {
    use entity::Entity as E;
    match &mut e.entity {
        Some(E::TableEntry(t)) => canonicalize_table_entry(t),
        Some(E::ActionProfileMember(m)) => {
            if let Some(a) = &mut m.action {
                canonicalize_action(a);
            }
        }
        Some(E::ActionProfileGroup(g)) => {
            for m in &mut g.members {
                if let Some(action_profile_group::member::WatchKind::WatchPort(p)) =
                    &mut m.watch_kind
                {
                    canonicalize(p);
                }
            }
            g.members.sort_by_key(|m| m.member_id);
        }
        Some(E::DirectCounterEntry(d)) => {
            if let Some(t) = &mut d.table_entry {
                canonicalize_table_entry(t);
            }
        }
        Some(E::DirectMeterEntry(d)) => {
            if let Some(t) = &mut d.table_entry {
                canonicalize_table_entry(t);
            }
        }
        Some(E::PacketReplicationEngineEntry(p)) => {
            use packet_replication_engine_entry::Type;
            let replicas = match &mut p.r#type {
                Some(Type::MulticastGroupEntry(m)) => &mut m.replicas,
                Some(Type::CloneSessionEntry(c)) => &mut c.replicas,
                None => return,
            };
            for r in replicas.iter_mut() {
                if let Some(replica::PortKind::Port(p)) = &mut r.port_kind {
                    canonicalize(p);
                }
            }
            // Replicas are a set; PI reads them back in its own order.
            sort_replicas(replicas);
        }
        _ => {}
    }
}

/// The order builders use and reads are normalised to: by port, then instance.
pub(crate) fn sort_replicas(replicas: &mut [p4runtime_proto::p4::v1::Replica]) {
    fn port_key(r: &p4runtime_proto::p4::v1::Replica) -> (u128, u32) {
        let port = match &r.port_kind {
            Some(replica::PortKind::Port(p)) => crate::bytes::to_u128(p).unwrap_or(u128::MAX),
            #[allow(deprecated)]
            Some(replica::PortKind::EgressPort(p)) => u128::from(*p),
            None => 0,
        };
        (port, r.instance)
    }
    replicas.sort_by_key(port_key);
}

pub fn canonicalize_table_entry(t: &mut TableEntry) {
    for m in &mut t.r#match {
        canonicalize_match(m);
    }
    t.r#match.sort_by_key(|m| m.field_id);
    if let Some(TableAction { r#type: Some(a) }) = &mut t.action {
        match a {
            table_action::Type::Action(a) => canonicalize_action(a),
            table_action::Type::ActionProfileActionSet(set) => {
                for x in &mut set.action_profile_actions {
                    if let Some(a) = &mut x.action {
                        canonicalize_action(a);
                    }
                    if let Some(action_profile_action::WatchKind::WatchPort(p)) = &mut x.watch_kind
                    {
                        canonicalize(p);
                    }
                }
            }
            _ => {}
        }
    }
}

fn canonicalize_match(m: &mut FieldMatch) {
    use field_match::FieldMatchType as M;
    match &mut m.field_match_type {
        Some(M::Exact(x)) => canonicalize(&mut x.value),
        Some(M::Lpm(x)) => canonicalize(&mut x.value),
        Some(M::Ternary(x)) => {
            canonicalize(&mut x.value);
            canonicalize(&mut x.mask);
        }
        Some(M::Range(x)) => {
            canonicalize(&mut x.low);
            canonicalize(&mut x.high);
        }
        Some(M::Optional(x)) => canonicalize(&mut x.value),
        _ => {}
    }
}

fn canonicalize_action(a: &mut Action) {
    for p in &mut a.params {
        canonicalize(&mut p.value);
    }
    a.params.sort_by_key(|p| p.param_id);
}

/// A short human description, with names from `info` where it knows them:
/// `table ingress.route {hdr.ipv4.dst=0x0a000000/8} priority 0`.
pub fn describe_entity(info: Option<&P4Info>, e: &Entity) -> String {
    use entity::Entity as E;
    match &e.entity {
        Some(E::TableEntry(t)) => describe_table_entry(info, t),
        Some(E::ActionProfileMember(m)) => {
            format!(
                "action profile {} member {}",
                profile_name(info, m.action_profile_id),
                m.member_id
            )
        }
        Some(E::ActionProfileGroup(g)) => {
            let members: Vec<String> = g
                .members
                .iter()
                .map(|m| format!("{}x{}", m.member_id, m.weight))
                .collect();
            format!(
                "action profile {} group {} [{}]",
                profile_name(info, g.action_profile_id),
                g.group_id,
                members.join(", ")
            )
        }
        Some(E::CounterEntry(c)) => {
            let name = info
                .and_then(|i| i.counter_by_id(c.counter_id).ok())
                .map_or_else(|| c.counter_id.to_string(), |x| x.name.clone());
            format!(
                "counter {name}[{}]",
                c.index
                    .as_ref()
                    .map_or("*".to_string(), |i| i.index.to_string())
            )
        }
        Some(E::DirectCounterEntry(d)) => match &d.table_entry {
            Some(t) => format!("direct counter of {}", describe_table_entry(info, t)),
            None => "direct counter".into(),
        },
        Some(E::MeterEntry(m)) => {
            let name = info
                .and_then(|i| i.meter_by_id(m.meter_id).ok())
                .map_or_else(|| m.meter_id.to_string(), |x| x.name.clone());
            format!(
                "meter {name}[{}]",
                m.index
                    .as_ref()
                    .map_or("*".to_string(), |i| i.index.to_string())
            )
        }
        Some(E::DirectMeterEntry(d)) => match &d.table_entry {
            Some(t) => format!("direct meter of {}", describe_table_entry(info, t)),
            None => "direct meter".into(),
        },
        Some(E::RegisterEntry(r)) => {
            let name = info
                .and_then(|i| i.register_by_id(r.register_id).ok())
                .map_or_else(|| r.register_id.to_string(), |x| x.name.clone());
            format!(
                "register {name}[{}]",
                r.index
                    .as_ref()
                    .map_or("*".to_string(), |i| i.index.to_string())
            )
        }
        Some(E::PacketReplicationEngineEntry(p)) => match &p.r#type {
            Some(packet_replication_engine_entry::Type::MulticastGroupEntry(m)) => {
                format!("multicast group {}", m.multicast_group_id)
            }
            Some(packet_replication_engine_entry::Type::CloneSessionEntry(c)) => {
                format!("clone session {}", c.session_id)
            }
            None => "packet replication entry".into(),
        },
        Some(other) => format!("{other:?}").chars().take(120).collect(),
        None => "empty entity".into(),
    }
}

fn profile_name(info: Option<&P4Info>, id: u32) -> String {
    info.and_then(|i| i.action_profile_by_id(id).ok())
        .map_or_else(|| id.to_string(), |p| p.name.clone())
}

pub fn describe_table_entry(info: Option<&P4Info>, t: &TableEntry) -> String {
    let table = info.and_then(|i| i.table_by_id(t.table_id).ok());
    let mut s = format!(
        "table {}",
        table.map_or_else(|| t.table_id.to_string(), |t| t.name.clone())
    );
    if t.is_default_action {
        s.push_str(" default entry");
        return s;
    }
    s.push_str(" {");
    for (i, m) in t.r#match.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let name = table
            .and_then(|tab| tab.field_by_id(m.field_id))
            .map_or_else(|| m.field_id.to_string(), |f| f.name.clone());
        use field_match::FieldMatchType as M;
        let _ = match &m.field_match_type {
            Some(M::Exact(x)) => write!(s, "{name}={}", hex(&x.value)),
            Some(M::Lpm(x)) => write!(s, "{name}={}/{}", hex(&x.value), x.prefix_len),
            Some(M::Ternary(x)) => write!(s, "{name}={}&&&{}", hex(&x.value), hex(&x.mask)),
            Some(M::Range(x)) => write!(s, "{name}={}..{}", hex(&x.low), hex(&x.high)),
            Some(M::Optional(x)) => write!(s, "{name}={}?", hex(&x.value)),
            _ => write!(s, "{name}=?"),
        };
    }
    s.push('}');
    if t.priority != 0 {
        let _ = write!(s, " priority {}", t.priority);
    }
    s
}
