//! Small conveniences on the generated types, so callers write `Update::insert(entry)` instead
//! of nesting `Some(Entity { entity: Some(...) })` by hand.

use crate::p4::v1::{
    ActionProfileGroup, ActionProfileMember, CounterEntry, DirectCounterEntry, DirectMeterEntry,
    Entity, MeterEntry, PacketReplicationEngineEntry, RegisterEntry, TableEntry, Uint128, Update,
    entity, update,
};

macro_rules! into_entity {
    ($($ty:ident => $variant:ident),* $(,)?) => {
        $(impl From<$ty> for Entity {
            fn from(v: $ty) -> Self {
                Entity { entity: Some(entity::Entity::$variant(v)) }
            }
        })*
    };
}

into_entity!(
    TableEntry => TableEntry,
    ActionProfileMember => ActionProfileMember,
    ActionProfileGroup => ActionProfileGroup,
    MeterEntry => MeterEntry,
    DirectMeterEntry => DirectMeterEntry,
    CounterEntry => CounterEntry,
    DirectCounterEntry => DirectCounterEntry,
    PacketReplicationEngineEntry => PacketReplicationEngineEntry,
    RegisterEntry => RegisterEntry,
);

impl Update {
    pub fn new(kind: update::Type, entity: impl Into<Entity>) -> Self {
        Update {
            r#type: kind as i32,
            entity: Some(entity.into()),
        }
    }
    pub fn insert(entity: impl Into<Entity>) -> Self {
        Self::new(update::Type::Insert, entity)
    }
    pub fn modify(entity: impl Into<Entity>) -> Self {
        Self::new(update::Type::Modify, entity)
    }
    pub fn delete(entity: impl Into<Entity>) -> Self {
        Self::new(update::Type::Delete, entity)
    }
}

impl From<u128> for Uint128 {
    fn from(v: u128) -> Self {
        Uint128 {
            high: (v >> 64) as u64,
            low: v as u64,
        }
    }
}

impl From<Uint128> for u128 {
    fn from(v: Uint128) -> Self {
        (u128::from(v.high) << 64) | u128::from(v.low)
    }
}
