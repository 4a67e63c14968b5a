//! An in-memory switch with P4Runtime's insert/modify/delete rules, per-update errors, a way to
//! make writes fail at the RPC level (the switch "gone") and one to refuse chosen inserts. It
//! answers the core's writes and reads in the engine's unit tests, the core's golden steps and
//! the core's benchmark; the real switch is BMv2 behind `weft_p4rt::Client` (the daemon), and
//! the BMv2 tests are the proof that the plugin programs one.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use weft_p4rt::proto::p4::v1::{Entity, Update, entity, update};
use weft_p4rt::{Code, Error, UpdateError, WriteErrors};

use crate::objects::{ObjKey, Objects};

pub type RejectFn = Box<dyn Fn(&ObjKey) -> bool + Send>;

#[derive(Default)]
pub struct SimSwitch {
    pub objects: Mutex<Objects>,
    /// Updates taken (writes while down are not counted).
    pub updates: AtomicUsize,
    /// Every write and read fails with UNAVAILABLE, as from a switch that went away.
    pub down: AtomicBool,
    /// Inserts of entities whose key matches this predicate fail with INVALID_ARGUMENT.
    pub reject: Mutex<Option<RejectFn>>,
}

fn unavailable(op: &'static str) -> Error {
    Error::Rpc {
        op,
        code: Code::Unavailable,
        message: "switch down".into(),
    }
}

impl SimSwitch {
    pub fn snapshot(&self) -> Objects {
        self.objects.lock().map(|o| o.clone()).unwrap_or_default()
    }

    /// One Write RPC: every update applied or refused on its own, as a P4Runtime server does.
    pub fn write(&self, updates: &[Update]) -> weft_p4rt::Result<()> {
        if self.down.load(Ordering::SeqCst) {
            return Err(unavailable("Write"));
        }
        self.updates.fetch_add(updates.len(), Ordering::SeqCst);
        let mut objs = self.objects.lock().map_err(|_| Error::Closed)?;
        let reject = self.reject.lock().map_err(|_| Error::Closed)?;
        let mut failed = Vec::new();
        for (i, u) in updates.iter().enumerate() {
            let Some(e) = u.entity.clone() else { continue };
            let Some(k) = ObjKey::of(&e) else { continue };
            let ty = update::Type::try_from(u.r#type).unwrap_or(update::Type::Unspecified);
            let err = |code: Code, m: &str| UpdateError {
                index: i,
                update_type: ty.as_str_name(),
                entity: format!("{k:?}"),
                code,
                message: m.to_string(),
                space: String::new(),
                target_code: 0,
            };
            let res = match ty {
                update::Type::Insert if reject.as_ref().is_some_and(|r| r(&k)) => {
                    Err(err(Code::InvalidArgument, "rejected by test"))
                }
                update::Type::Insert if objs.contains_key(&k) => {
                    Err(err(Code::AlreadyExists, "exists"))
                }
                update::Type::Insert => {
                    objs.insert(k, e);
                    Ok(())
                }
                update::Type::Modify
                    if objs.contains_key(&k) || matches!(k, ObjKey::Default { .. }) =>
                {
                    objs.insert(k, e);
                    Ok(())
                }
                update::Type::Delete if objs.remove(&k).is_some() => Ok(()),
                _ => Err(err(Code::NotFound, "not found")),
            };
            if let Err(e) = res {
                failed.push(e);
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(Error::Write(WriteErrors {
                total: updates.len(),
                failed,
            }))
        }
    }

    /// One Read RPC: what the wildcard entities select.
    pub fn read(&self, entities: &[Entity]) -> weft_p4rt::Result<Vec<Entity>> {
        if self.down.load(Ordering::SeqCst) {
            return Err(unavailable("Read"));
        }
        let objs = self.objects.lock().map_err(|_| Error::Closed)?;
        let mut out = Vec::new();
        for want in entities {
            for (k, e) in objs.iter() {
                if selects(want, k) {
                    out.push(e.clone());
                }
            }
        }
        Ok(out)
    }
}

fn selects(want: &Entity, k: &ObjKey) -> bool {
    match (&want.entity, k) {
        (Some(entity::Entity::TableEntry(t)), ObjKey::Entry { table_id, .. }) => {
            !t.is_default_action && (t.table_id == 0 || t.table_id == *table_id)
        }
        (Some(entity::Entity::TableEntry(t)), ObjKey::Default { table_id }) => {
            t.is_default_action && t.table_id == *table_id
        }
        (Some(entity::Entity::ActionProfileMember(_)), ObjKey::Member { .. }) => true,
        (Some(entity::Entity::ActionProfileGroup(_)), ObjKey::Group { .. }) => true,
        (Some(entity::Entity::PacketReplicationEngineEntry(_)), ObjKey::CloneSession { .. }) => {
            true
        }
        _ => false,
    }
}
