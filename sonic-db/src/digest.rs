//! An order-independent digest of a set of rows (key → fields), kept incrementally by the side
//! that writes the rows (the plugin, for APPL_STATE_DB and what it read of CONFIG_DB) and
//! computed from scratch by the side that wants to compare without reading them (the
//! controller, from what it would write). Equal digests mean equal row sets, so `weft plan`
//! reads a switch's rows only when its plugin's digest differs from the desired one.
//!
//! Each row is hashed on its own (xxh3-128 of [`item_bytes`], the one canonical encoding),
//! and the row hashes are summed lane by lane (two 64-bit lanes, wrapping): a sum does not
//! depend on order and a row is taken out again by subtracting its hash. The row count is
//! kept beside the sum.

use std::collections::HashMap;

use crate::types::FieldValues;

/// The hash of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ItemHash([u64; 2]);

/// The canonical bytes of one row: the key, then its fields sorted (Redis hashes have no
/// order), every string length-prefixed so no two different rows encode alike.
pub fn item_bytes(key: &str, fields: &FieldValues) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&mut out, key, fields);
    out
}

fn encode(out: &mut Vec<u8>, key: &str, fields: &FieldValues) {
    let mut put = |s: &str| {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    put(key);
    // Rows as written are mostly sorted already (the compiler sorts them): no copy then.
    if fields.is_sorted() {
        for (f, v) in fields {
            put(f);
            put(v);
        }
    } else {
        let mut sorted: Vec<(&str, &str)> = fields
            .iter()
            .map(|(f, v)| (f.as_str(), v.as_str()))
            .collect();
        sorted.sort_unstable();
        for (f, v) in sorted {
            put(f);
            put(v);
        }
    }
}

impl ItemHash {
    pub fn of(key: &str, fields: &FieldValues) -> ItemHash {
        thread_local! {
            // One buffer per thread: hashing a switch's 100k rows allocates nothing.
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let h = BUF.with(|b| {
            let mut b = b.borrow_mut();
            b.clear();
            encode(&mut b, key, fields);
            xxhash_rust::xxh3::xxh3_128(&b)
        });
        ItemHash([h as u64, (h >> 64) as u64])
    }
}

/// The digest of a set of rows: the wrapping lane-wise sum of their [`ItemHash`]es, and how
/// many there are. The empty set is `Digest::default()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Digest {
    sum: [u64; 2],
    count: u64,
}

impl Digest {
    /// The digest of `rows`.
    pub fn of<'a>(rows: impl IntoIterator<Item = (&'a str, &'a FieldValues)>) -> Digest {
        let mut d = Digest::default();
        for (k, f) in rows {
            d.add(k, f);
        }
        d
    }

    pub fn add(&mut self, key: &str, fields: &FieldValues) {
        self.add_item(ItemHash::of(key, fields));
    }

    /// Takes out a row added before (with the same fields).
    pub fn remove(&mut self, key: &str, fields: &FieldValues) {
        self.remove_item(ItemHash::of(key, fields));
    }

    pub fn add_item(&mut self, h: ItemHash) {
        self.sum[0] = self.sum[0].wrapping_add(h.0[0]);
        self.sum[1] = self.sum[1].wrapping_add(h.0[1]);
        self.count = self.count.wrapping_add(1);
    }

    pub fn remove_item(&mut self, h: ItemHash) {
        self.sum[0] = self.sum[0].wrapping_sub(h.0[0]);
        self.sum[1] = self.sum[1].wrapping_sub(h.0[1]);
        self.count = self.count.wrapping_sub(1);
    }

    /// The digest of the union of two disjoint row sets.
    pub fn merged(mut self, other: &Digest) -> Digest {
        self.sum[0] = self.sum[0].wrapping_add(other.sum[0]);
        self.sum[1] = self.sum[1].wrapping_add(other.sum[1]);
        self.count = self.count.wrapping_add(other.count);
        self
    }

    /// Rows in the set.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The sum as 32 hex digits (high lane first).
    pub fn hex(&self) -> String {
        format!("{:016x}{:016x}", self.sum[1], self.sum[0])
    }

    /// The digest published as `hex` (from [`Digest::hex`]) and `count`; `None` when `hex` is
    /// not 32 hex digits.
    pub fn from_hex(hex: &str, count: u64) -> Option<Digest> {
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let hi = u64::from_str_radix(hex.get(..16)?, 16).ok()?;
        let lo = u64::from_str_radix(hex.get(16..)?, 16).ok()?;
        Some(Digest {
            sum: [lo, hi],
            count,
        })
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} rows)", self.hex(), self.count)
    }
}

/// A [`Digest`] kept in step with a table as rows are written and deleted one by one: it
/// remembers each key's row hash, so a rewrite or a delete takes out what was there.
#[derive(Debug, Clone, Default)]
pub struct KeyedDigest {
    items: HashMap<String, ItemHash>,
    digest: Digest,
}

impl KeyedDigest {
    /// Starts from a table's whole content.
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = (&'a String, &'a FieldValues)>) -> Self {
        let mut d = KeyedDigest::default();
        for (k, f) in rows {
            d.set(k, f);
        }
        d
    }

    /// `key` now holds `fields` (whatever it held before).
    pub fn set(&mut self, key: &str, fields: &FieldValues) {
        let h = ItemHash::of(key, fields);
        if let Some(old) = self.items.insert(key.to_string(), h) {
            self.digest.remove_item(old);
        }
        self.digest.add_item(h);
    }

    /// `key` is gone.
    pub fn del(&mut self, key: &str) {
        if let Some(old) = self.items.remove(key) {
            self.digest.remove_item(old);
        }
    }

    pub fn digest(&self) -> Digest {
        self.digest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fv(pairs: &[(&str, &str)]) -> FieldValues {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn rows() -> Vec<(String, FieldValues)> {
        (0..50)
            .map(|i| {
                (
                    format!("FIXED_IPV4_TABLE:{{\"match/dst\":\"10.0.{i}.0/24\"}}"),
                    fv(&[("action", "set_nexthop"), ("param/id", &i.to_string())]),
                )
            })
            .collect()
    }

    #[test]
    fn the_digest_does_not_depend_on_row_order() {
        let r = rows();
        let forward = Digest::of(r.iter().map(|(k, f)| (k.as_str(), f)));
        let backward = Digest::of(r.iter().rev().map(|(k, f)| (k.as_str(), f)));
        assert_eq!(forward, backward);
        assert_eq!(forward.count(), 50);
        assert_ne!(forward, Digest::default());
    }

    #[test]
    fn removing_a_row_undoes_adding_it() {
        let r = rows();
        let all = Digest::of(r.iter().map(|(k, f)| (k.as_str(), f)));
        let mut d = all;
        d.add("extra", &fv(&[("a", "b")]));
        assert_ne!(d, all);
        d.remove("extra", &fv(&[("a", "b")]));
        assert_eq!(d, all);
        let mut empty = all;
        for (k, f) in &r {
            empty.remove(k, f);
        }
        assert_eq!(empty, Digest::default());
    }

    #[test]
    fn the_encoding_sorts_fields_whatever_order_they_come_in() {
        let sorted = fv(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let shuffled = fv(&[("c", "3"), ("a", "1"), ("b", "2")]);
        assert_eq!(item_bytes("k", &sorted), item_bytes("k", &shuffled));
        assert_eq!(ItemHash::of("k", &sorted), ItemHash::of("k", &shuffled));
    }

    #[test]
    fn field_order_is_irrelevant() {
        let a = Digest::of([("k", &fv(&[("x", "1"), ("y", "2")]))]);
        let b = Digest::of([("k", &fv(&[("y", "2"), ("x", "1")]))]);
        assert_eq!(a, b);
    }

    #[test]
    fn different_values_keys_or_splits_differ() {
        let base = Digest::of([("k", &fv(&[("x", "1")]))]);
        assert_ne!(base, Digest::of([("k", &fv(&[("x", "2")]))]));
        assert_ne!(base, Digest::of([("j", &fv(&[("x", "1")]))]));
        assert_ne!(base, Digest::of([("k", &fv(&[("x", "1"), ("y", "")]))]));
        // The encoding is length-prefixed: moving bytes between key, field and value shows.
        assert_ne!(
            Digest::of([("ab", &fv(&[("c", "d")]))]),
            Digest::of([("a", &fv(&[("bc", "d")]))])
        );
        assert_ne!(
            Digest::of([("k", &fv(&[("ab", "c")]))]),
            Digest::of([("k", &fv(&[("a", "bc")]))])
        );
        // Two rows swapping their values is a different set.
        let one = Digest::of([("a", &fv(&[("v", "1")])), ("b", &fv(&[("v", "2")]))]);
        let two = Digest::of([("a", &fv(&[("v", "2")])), ("b", &fv(&[("v", "1")]))]);
        assert_ne!(one, two);
    }

    #[test]
    fn hex_round_trips_and_rejects_junk() {
        let d = Digest::of(rows().iter().map(|(k, f)| (k.as_str(), f)));
        assert_eq!(d.hex().len(), 32);
        assert_eq!(Digest::from_hex(&d.hex(), d.count()), Some(d));
        assert_eq!(Digest::from_hex("xyz", 1), None);
        assert_eq!(Digest::from_hex(&"g".repeat(32), 1), None);
        assert_eq!(Digest::default().hex(), "0".repeat(32));
    }

    #[test]
    fn a_keyed_digest_follows_rewrites_and_deletes() {
        let r = rows();
        let mut kd = KeyedDigest::from_rows(r.iter().map(|(k, f)| (k, f)));
        let all = Digest::of(r.iter().map(|(k, f)| (k.as_str(), f)));
        assert_eq!(kd.digest(), all);
        // Rewrite a row and put it back: the digest returns to where it was.
        kd.set(&r[3].0, &fv(&[("action", "drop")]));
        assert_ne!(kd.digest(), all);
        assert_eq!(kd.digest().count(), 50);
        kd.set(&r[3].0, &r[3].1);
        assert_eq!(kd.digest(), all);
        // A delete equals the digest of the rest; deleting what is not there changes nothing.
        kd.del(&r[7].0);
        kd.del("not there");
        let rest = Digest::of(
            r.iter()
                .enumerate()
                .filter(|(i, _)| *i != 7)
                .map(|(_, (k, f))| (k.as_str(), f)),
        );
        assert_eq!(kd.digest(), rest);
    }

    #[test]
    fn merged_is_the_digest_of_the_union() {
        let r = rows();
        let (a, b) = r.split_at(20);
        let da = Digest::of(a.iter().map(|(k, f)| (k.as_str(), f)));
        let db = Digest::of(b.iter().map(|(k, f)| (k.as_str(), f)));
        assert_eq!(
            da.merged(&db),
            Digest::of(r.iter().map(|(k, f)| (k.as_str(), f)))
        );
    }
}
