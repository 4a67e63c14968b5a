//! The contract between Weft's controller and each switch's plugin in SONiC's Redis DBs: one
//! struct per row Weft writes or reads, with its table, its database, the side that writes it,
//! and `to_fields` / `from_fields`. Field names are written here and nowhere else.
//!
//! ```text
//!   controller ── writes ─► CONFIG_DB  PORT, *_MAP, PORT_QOS_MAP, WRED_PROFILE, QUEUE,
//!        │                             CABLE_LENGTH, BUFFER_PROFILE, BUFFER_PG, PFC_WD,
//!        │                             WEFT_ECN_ENVELOPE                    ─► plugin reads
//!        ├── writes ─► STATE_DB     WEFT_LOCK (one apply/run at a time) ─► other controllers
//!        └── reads ◄── STATE_DB     PORT_TABLE, PFC_WD_STATE, WEFT_ECN_TUNING,
//!                                   WEFT_PLUGIN                             ◄─ plugin writes
//!                      COUNTERS_DB  COUNTERS:*, COUNTERS_PORT_NAME_MAP      ◄─ plugin writes
//! ```
//! (APPL_DB / APPL_STATE_DB `P4RT_TABLE` is typed in `weft-sonic-db`.)
//!
//! `SCHEMA.md` beside this crate is generated from [`catalogue`]; a test fails when a row
//! struct changes and the document does not (`WEFT_REGEN=1` rewrites it).

pub mod config;
pub mod counters;
mod field;
pub mod snapshot;
pub mod state;

pub use field::{ClassList, Field, Metres, Slot};
pub use weft_sonic_db::{FieldValues, SonicDbId};

/// Which side writes a table; the other side only reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Owner {
    /// `weft apply` / `weft run` write it; the plugin follows it.
    Controller,
    /// The switch's plugin writes it; the controller and the operator read it.
    Plugin,
}

impl Owner {
    pub const fn as_str(self) -> &'static str {
        match self {
            Owner::Controller => "controller",
            Owner::Plugin => "plugin",
        }
    }
}

/// A row that does not read as its struct.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("{table}|{key}: field `{field}` is missing")]
    Missing {
        table: &'static str,
        key: String,
        field: &'static str,
    },
    #[error("{table}|{key}: field `{field}` is {value:?}, expected {expected}")]
    Bad {
        table: &'static str,
        key: String,
        field: String,
        value: String,
        expected: &'static str,
    },
    #[error("{table}: key {key:?} is not of the form {form}")]
    Key {
        table: &'static str,
        key: String,
        form: &'static str,
    },
}

/// What the schema document says about one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDoc {
    pub name: &'static str,
    pub expected: &'static str,
    pub optional: bool,
    pub doc: &'static str,
}

/// One row type of one table.
pub trait Row: Sized {
    const TABLE: &'static str;
    const DB: SonicDbId;
    const OWNER: Owner;
    /// The key after `TABLE<separator>`, as the document shows it (`EthernetN|tc`).
    const KEY_FORM: &'static str;
    const DOC: &'static str;
    const FIELDS: &'static [FieldDoc];
    fn key(&self) -> String;
    fn to_fields(&self) -> FieldValues;
    fn from_fields(key: &str, fields: &FieldValues) -> Result<Self, SchemaError>;

    /// `TABLE<sep>key`, the Redis key of the row.
    fn redis_key(&self) -> String {
        format!("{}{}{}", Self::TABLE, Self::DB.separator(), self.key())
    }
}

/// Splits a key into exactly `n` parts at the database's separator.
pub fn key_parts<R: Row>(key: &str, n: usize) -> Result<Vec<&str>, SchemaError> {
    let parts: Vec<&str> = key.split(R::DB.separator()).collect();
    if parts.len() == n && parts.iter().all(|p| !p.is_empty()) {
        Ok(parts)
    } else {
        Err(SchemaError::Key {
            table: R::TABLE,
            key: key.to_string(),
            form: R::KEY_FORM,
        })
    }
}

/// Reads one key component of a row.
pub fn key_part<R: Row, T: Field>(key: &str, part: &str) -> Result<T, SchemaError> {
    T::parse(part).ok_or_else(|| SchemaError::Key {
        table: R::TABLE,
        key: key.to_string(),
        form: R::KEY_FORM,
    })
}

/// Reads one field of a row.
pub fn take<R: Row, T: Slot>(
    key: &str,
    fields: &FieldValues,
    name: &'static str,
) -> Result<T, SchemaError> {
    let raw = fields
        .iter()
        .rev()
        .find(|(f, _)| f == name)
        .map(|(_, v)| v.as_str());
    T::take(raw).map_err(|bad| match bad {
        None => SchemaError::Missing {
            table: R::TABLE,
            key: key.to_string(),
            field: name,
        },
        Some(value) => SchemaError::Bad {
            table: R::TABLE,
            key: key.to_string(),
            field: name.to_string(),
            value,
            expected: T::EXPECTED,
        },
    })
}

/// A row struct with fixed fields. Keys are one or more typed components joined by the
/// database's separator.
#[macro_export]
macro_rules! row {
    (
        $(#[doc = $doc:literal])*
        $vis:vis struct $name:ident in $db:ident $table:literal by $owner:ident, key $form:literal {
            $($kvis:vis $kname:ident: $kty:ty),+ ;
            $($(#[doc = $fdoc:literal])* $fvis:vis $field:ident: $fty:ty = $fname:literal),* $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, PartialEq)]
        $vis struct $name {
            $($kvis $kname: $kty,)+
            $($(#[doc = $fdoc])* $fvis $field: $fty,)*
        }
        impl $crate::Row for $name {
            const TABLE: &'static str = $table;
            const DB: $crate::SonicDbId = $crate::SonicDbId::$db;
            const OWNER: $crate::Owner = $crate::Owner::$owner;
            const KEY_FORM: &'static str = $form;
            const DOC: &'static str = concat!($($doc, "\n"),*);
            const FIELDS: &'static [$crate::FieldDoc] = &[$($crate::FieldDoc {
                name: $fname,
                expected: <$fty as $crate::Slot>::EXPECTED,
                optional: <$fty as $crate::Slot>::OPTIONAL,
                doc: concat!($($fdoc),*),
            }),*];
            fn key(&self) -> String {
                let mut k = String::new();
                $(
                    if !k.is_empty() {
                        k.push(<Self as $crate::Row>::DB.separator());
                    }
                    $crate::Field::render_into(&self.$kname, &mut k);
                )+
                k
            }
            #[allow(unused_mut)]
            fn to_fields(&self) -> $crate::FieldValues {
                let mut out = Vec::new();
                $($crate::Slot::put(&self.$field, $fname, &mut out);)*
                out
            }
            fn from_fields(key: &str, fields: &$crate::FieldValues) -> Result<Self, $crate::SchemaError> {
                let n = [$(stringify!($kname)),+].len();
                let parts = $crate::key_parts::<Self>(key, n)?;
                let mut parts = parts.into_iter();
                Ok($name {
                    $($kname: $crate::key_part::<Self, $kty>(key, parts.next().unwrap_or_default())?,)+
                    $($field: $crate::take::<Self, $fty>(key, fields, $fname)?,)*
                })
            }
        }
    };
}

/// A row whose fields are a map (`DSCP_TO_TC_MAP|WEFT`: `"26": "3"` for each DSCP value).
#[macro_export]
macro_rules! map_row {
    (
        $(#[doc = $doc:literal])*
        $vis:vis struct $name:ident in $db:ident $table:literal by $owner:ident,
        key $form:literal, map $kdoc:literal: $k:ty => $vdoc:literal: $v:ty
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, PartialEq, Default)]
        $vis struct $name {
            pub name: String,
            pub map: std::collections::BTreeMap<$k, $v>,
        }
        impl $crate::Row for $name {
            const TABLE: &'static str = $table;
            const DB: $crate::SonicDbId = $crate::SonicDbId::$db;
            const OWNER: $crate::Owner = $crate::Owner::$owner;
            const KEY_FORM: &'static str = $form;
            const DOC: &'static str = concat!($($doc, "\n"),*);
            const FIELDS: &'static [$crate::FieldDoc] = &[$crate::FieldDoc {
                name: $kdoc,
                expected: <$v as $crate::Field>::EXPECTED,
                optional: true,
                doc: $vdoc,
            }];
            fn key(&self) -> String {
                self.name.clone()
            }
            fn to_fields(&self) -> $crate::FieldValues {
                self.map
                    .iter()
                    .map(|(k, v)| ($crate::Field::render(k), $crate::Field::render(v)))
                    .collect()
            }
            fn from_fields(key: &str, fields: &$crate::FieldValues) -> Result<Self, $crate::SchemaError> {
                let mut map = std::collections::BTreeMap::new();
                for (f, v) in fields {
                    let bad = |what: &str| $crate::SchemaError::Bad {
                        table: $table,
                        key: key.to_string(),
                        field: f.clone(),
                        value: what.to_string(),
                        expected: concat!($kdoc, " → ", $vdoc),
                    };
                    let k = <$k as $crate::Field>::parse(f).ok_or_else(|| bad(f))?;
                    let v = <$v as $crate::Field>::parse(v).ok_or_else(|| bad(v))?;
                    map.insert(k, v);
                }
                Ok($name { name: key.to_string(), map })
            }
        }
    };
}

/// One table of the document.
#[derive(Debug, Clone)]
pub struct TableDoc {
    pub table: &'static str,
    pub db: SonicDbId,
    pub owner: Owner,
    pub key_form: &'static str,
    pub doc: &'static str,
    pub fields: &'static [FieldDoc],
}

pub fn doc_of<R: Row>() -> TableDoc {
    TableDoc {
        table: R::TABLE,
        db: R::DB,
        owner: R::OWNER,
        key_form: R::KEY_FORM,
        doc: R::DOC,
        fields: R::FIELDS,
    }
}

/// Every row type of the contract, in document order.
pub fn catalogue() -> Vec<TableDoc> {
    let mut v = config::catalogue();
    v.extend(state::catalogue());
    v.extend(counters::catalogue());
    v.push(crate::doc_of::<snapshot::CountersSnapshot>());
    v
}

/// The tables of one database that one side writes (for access rules and ownership checks).
pub fn tables_owned_by(owner: Owner, db: SonicDbId) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = catalogue()
        .into_iter()
        .filter(|t| t.owner == owner && t.db == db)
        .map(|t| t.table)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// `SCHEMA.md`: the catalogue as Markdown.
pub fn render_markdown() -> String {
    use std::fmt::Write as _;
    let mut o = String::from(
        "# Weft's SONiC DB contract\n\n\
         Generated from `sonic-schema/src` by `WEFT_REGEN=1 cargo test -p weft-sonic-schema`; \
         do not edit. Each table is written by one side (the owner) and read by the other. \
         APPL_DB / APPL_STATE_DB `P4RT_TABLE` entries follow SONiC's P4RT format \
         (`weft-sonic-db`) and the pipeline's P4Info (`p4/README.md`).\n",
    );
    for t in catalogue() {
        let _ = writeln!(
            o,
            "\n## {} `{}{}{}`\n\nwritten by the {}. {}\n",
            t.db,
            t.table,
            t.db.separator(),
            t.key_form,
            t.owner.as_str(),
            t.doc.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        let _ = writeln!(
            o,
            "| field | value | required | meaning |\n|---|---|---|---|"
        );
        for f in t.fields {
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} |",
                f.name,
                f.expected,
                if f.optional { "no" } else { "yes" },
                f.doc.trim()
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_md_is_generated_from_the_row_structs() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/SCHEMA.md");
        let fresh = render_markdown();
        if std::env::var_os("WEFT_REGEN").is_some() {
            std::fs::write(path, &fresh).expect("write SCHEMA.md");
            return;
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == fresh,
            "sonic-schema/SCHEMA.md is stale: a row struct changed; run `WEFT_REGEN=1 cargo test -p weft-sonic-schema`"
        );
    }

    #[test]
    fn every_table_has_one_owner() {
        let mut owners: std::collections::BTreeMap<(SonicDbId, &str), Owner> = Default::default();
        for t in catalogue() {
            let prev = owners.insert((t.db, t.table), t.owner);
            assert!(
                prev.is_none_or(|o| o == t.owner),
                "{} {} has two owners",
                t.db,
                t.table
            );
        }
    }
}
