//! The switch as the engine sees it: writes and reads of P4Runtime entities. The real one is
//! `weft_p4rt::Client`; unit tests use an in-memory switch.

use std::future::Future;

use weft_p4rt::proto::p4::v1::{Entity, Update};

pub trait SwitchIo: Send + Sync {
    fn write(&self, updates: &[Update]) -> impl Future<Output = weft_p4rt::Result<()>> + Send;
    fn read(
        &self,
        entities: Vec<Entity>,
    ) -> impl Future<Output = weft_p4rt::Result<Vec<Entity>>> + Send;
}

impl SwitchIo for weft_p4rt::Client {
    fn write(&self, updates: &[Update]) -> impl Future<Output = weft_p4rt::Result<()>> + Send {
        weft_p4rt::Client::write(self, updates)
    }
    fn read(
        &self,
        entities: Vec<Entity>,
    ) -> impl Future<Output = weft_p4rt::Result<Vec<Entity>>> + Send {
        weft_p4rt::Client::read(self, entities)
    }
}

#[cfg(test)]
pub mod fake {
    //! An in-memory switch with P4Runtime's insert/modify/delete rules, per-update errors,
    //! and a switch to make the next writes fail at the RPC level.

    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use weft_p4rt::proto::p4::v1::{Entity, Update, entity, update};
    use weft_p4rt::{Code, Error, UpdateError, WriteErrors};

    use crate::objects::{ObjKey, Objects};

    pub type RejectFn = Box<dyn Fn(&ObjKey) -> bool + Send>;

    #[derive(Default)]
    pub struct FakeSwitch {
        pub objects: Mutex<Objects>,
        pub updates: AtomicUsize,
        pub down: AtomicBool,
        /// Inserts of entities whose key matches this predicate fail with INVALID_ARGUMENT.
        pub reject: Mutex<Option<RejectFn>>,
    }

    impl FakeSwitch {
        pub fn snapshot(&self) -> Objects {
            self.objects.lock().map(|o| o.clone()).unwrap_or_default()
        }
    }

    impl super::SwitchIo for FakeSwitch {
        async fn write(&self, updates: &[Update]) -> weft_p4rt::Result<()> {
            if self.down.load(Ordering::SeqCst) {
                return Err(Error::Rpc {
                    op: "Write",
                    code: Code::Unavailable,
                    message: "switch down".into(),
                });
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

        async fn read(&self, entities: Vec<Entity>) -> weft_p4rt::Result<Vec<Entity>> {
            let objs = self.objects.lock().map_err(|_| Error::Closed)?;
            let mut out = Vec::new();
            for want in entities {
                for (k, e) in objs.iter() {
                    let hit = match (&want.entity, k) {
                        (Some(entity::Entity::TableEntry(t)), ObjKey::Entry { table_id, .. }) => {
                            !t.is_default_action && (t.table_id == 0 || t.table_id == *table_id)
                        }
                        (Some(entity::Entity::TableEntry(t)), ObjKey::Default { table_id }) => {
                            t.is_default_action && t.table_id == *table_id
                        }
                        (Some(entity::Entity::ActionProfileMember(_)), ObjKey::Member { .. }) => {
                            true
                        }
                        (Some(entity::Entity::ActionProfileGroup(_)), ObjKey::Group { .. }) => true,
                        (
                            Some(entity::Entity::PacketReplicationEngineEntry(_)),
                            ObjKey::CloneSession { .. },
                        ) => true,
                        _ => false,
                    };
                    if hit {
                        out.push(e.clone());
                    }
                }
            }
            Ok(out)
        }
    }
}
