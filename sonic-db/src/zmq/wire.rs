//! swss-common's `BinarySerializer` (common/binaryserializer.h), byte for byte, and what Weft
//! adds on top of it: coalescing, splitting into messages that fit, the per-key reply of the
//! request/reply mode, and the optional term entry. Pure: no I/O.
//!
//! ```text
//!  u64 pairs                               native size_t; little-endian on amd64 and arm64
//!  u64 len, db name      u64 len, table    pair 1: the header
//!  u64 len, key          u64 len, "N"      per entry: the key and its field count as decimal text
//!  u64 len, field        u64 len, value    ... N pairs; N = 0 is a DEL, N > 0 a SET
//! ```

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;

use super::error::{WireError, ZmqError};
use crate::response::{EntryResult, Response, StatusCode};
use crate::scripts::TERM_KEY;
use crate::types::{FieldValues, KeyOpFieldValues, Op};

/// `MQ_RESPONSE_MAX_COUNT` (common/zmqserver.h): the receive buffer of `ZmqServer` and of
/// `ZmqClient::wait`, and the send buffer of `ZmqClient`. A message of this size or more is
/// refused by every swss-common end, so every message is smaller.
pub const MQ_RESPONSE_MAX_COUNT: usize = 16 * 1024 * 1024;

/// The field of the term entry (see [`ZmqBatch::term`]).
pub const TERM_FIELD: &str = "term";

/// Bytes of a length prefix: `size_t` on the 64-bit platforms SONiC runs on.
const LEN: usize = 8;

/// Room a reply leaves per key for the status string (the longest swss-common status,
/// `SWSS_RC_FAILED_PRECONDITION`, is 27 bytes) and the message, when a batch is split so that
/// its replies fit too.
const REPLY_ALLOWANCE: usize = LEN + 32 + LEN + 256;

/// Messages of replies too big for one message are cut to this many bytes.
const SHORT_MESSAGE: usize = 256;

/// One message: a batch of entries of one table of one database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZmqBatch {
    /// The database's name as swss-common's `DBConnector::getDbName` gives it (`APPL_DB`).
    pub db: String,
    pub table: String,
    /// Weft's fencing term, carried as a first entry `WEFT_LEADER_TERM` with one field
    /// `term`. Only Weft's producer sends it, and only when fenced: a swss-common consumer
    /// would take it for an entry.
    pub term: Option<u64>,
    pub entries: Vec<KeyOpFieldValues>,
}

fn item(len: usize) -> usize {
    LEN + len
}

fn digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

fn header_len(db: &str, table: &str, term: Option<u64>) -> usize {
    LEN + item(db.len()) + item(table.len()) + term.map_or(0, term_entry_len)
}

fn term_entry_len(term: u64) -> usize {
    item(TERM_KEY.len()) + item(1) + item(TERM_FIELD.len()) + item(term.to_string().len())
}

fn field_count(e: &KeyOpFieldValues) -> usize {
    match e.op {
        Op::Set => e.fields.len(),
        Op::Del => 0,
    }
}

fn fields_len(e: &KeyOpFieldValues) -> usize {
    match e.op {
        Op::Set => e
            .fields
            .iter()
            .map(|(f, v)| item(f.len()) + item(v.len()))
            .sum(),
        Op::Del => 0,
    }
}

/// Bytes `e` takes in a request.
pub fn entry_len(e: &KeyOpFieldValues) -> usize {
    item(e.key.len()) + item(digits(field_count(e))) + fields_len(e)
}

/// Bytes the reply to `e` may take: the request's entry with a (status, message) pair first.
fn reply_estimate(e: &KeyOpFieldValues) -> usize {
    item(e.key.len()) + item(digits(field_count(e) + 1)) + REPLY_ALLOWANCE + fields_len(e)
}

/// The size of the message [`encode`] makes.
pub fn encoded_len(batch: &ZmqBatch) -> usize {
    header_len(&batch.db, &batch.table, batch.term)
        + batch.entries.iter().map(entry_len).sum::<usize>()
}

struct Writer {
    out: Vec<u8>,
    pairs: u64,
}

impl Writer {
    fn new(capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity);
        out.extend_from_slice(&[0; LEN]);
        Writer { out, pairs: 0 }
    }

    fn put(&mut self, s: &[u8]) {
        self.out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        self.out.extend_from_slice(s);
    }

    fn pair(&mut self, a: &str, b: &str) {
        self.put(a.as_bytes());
        self.put(b.as_bytes());
        self.pairs += 1;
    }

    fn finish(mut self) -> Vec<u8> {
        self.out[..LEN].copy_from_slice(&self.pairs.to_le_bytes());
        self.out
    }
}

/// `BinarySerializer::serializeBuffer`: the header pair, then per entry (key, field count)
/// and its fields. A DEL's fields, if any, are not sent (the count is what says DEL).
pub fn encode(batch: &ZmqBatch) -> Vec<u8> {
    encode_parts(&batch.db, &batch.table, batch.term, &batch.entries)
}

pub(crate) fn encode_parts(
    db: &str,
    table: &str,
    term: Option<u64>,
    entries: &[KeyOpFieldValues],
) -> Vec<u8> {
    let size = header_len(db, table, term) + entries.iter().map(entry_len).sum::<usize>();
    let mut w = Writer::new(size);
    w.pair(db, table);
    if let Some(term) = term {
        w.pair(TERM_KEY, "1");
        w.pair(TERM_FIELD, &term.to_string());
    }
    let mut count = String::new();
    for e in entries {
        count.clear();
        count.push_str(&field_count(e).to_string());
        w.pair(&e.key, &count);
        if e.op == Op::Set {
            for (f, v) in &e.fields {
                w.pair(f, v);
            }
        }
    }
    w.finish()
}

/// Reads the pairs of a message, checking every length against what is left.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    pair: u64,
    pairs: u64,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Result<Self, WireError> {
        let Some(head) = buf.get(..LEN) else {
            return Err(WireError::NoPairCount { len: buf.len() });
        };
        let pairs = u64::from_le_bytes(head.try_into().unwrap_or([0; LEN]));
        // Every pair takes at least its two length prefixes.
        let max = ((buf.len() - LEN) / (2 * LEN)) as u64;
        if pairs > max {
            return Err(WireError::ImpossiblePairCount {
                pairs,
                len: buf.len(),
                max,
            });
        }
        Ok(Reader {
            buf,
            pos: LEN,
            pair: 0,
            pairs,
        })
    }

    fn left(&self) -> u64 {
        self.pairs - self.pair
    }

    fn truncated(&self, need: u64) -> WireError {
        WireError::Truncated {
            pair: self.pair + 1,
            pairs: self.pairs,
            offset: self.pos,
            need,
            have: self.buf.len() - self.pos,
        }
    }

    fn string(&mut self, which: &'static str) -> Result<&'a str, WireError> {
        let Some(prefix) = self.buf.get(self.pos..self.pos + LEN) else {
            return Err(self.truncated(LEN as u64));
        };
        let len = u64::from_le_bytes(prefix.try_into().unwrap_or([0; LEN]));
        let start = self.pos + LEN;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|&end| end <= self.buf.len());
        let Some(end) = end else {
            self.pos = start;
            return Err(self.truncated(len));
        };
        let s = std::str::from_utf8(&self.buf[start..end]).map_err(|_| WireError::NotUtf8 {
            pair: self.pair + 1,
            which,
        })?;
        self.pos = end;
        Ok(s)
    }

    fn next(
        &mut self,
        first: &'static str,
        second: &'static str,
    ) -> Result<(&'a str, &'a str), WireError> {
        let a = self.string(first)?;
        let b = self.string(second)?;
        self.pair += 1;
        Ok((a, b))
    }

    fn end(&self) -> Result<(), WireError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            extra => Err(WireError::TrailingBytes {
                extra,
                pairs: self.pairs,
            }),
        }
    }
}

fn parse_count(key: &str, value: &str) -> Result<usize, WireError> {
    let bad = || WireError::BadFieldCount {
        key: key.to_string(),
        value: value.to_string(),
    };
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    value.parse().map_err(|_| bad())
}

/// `BinarySerializer::deserializeBuffer`, strict where swss-common is lenient: a length that
/// runs past the end, a field count that is not a number, an entry whose fields are cut off
/// and bytes after the last pair are errors (swss-common throws on the first, drops the cut
/// entry silently and ignores the rest). The term entry is taken out into [`ZmqBatch::term`].
pub fn decode(buf: &[u8]) -> Result<ZmqBatch, WireError> {
    let mut r = Reader::new(buf)?;
    if r.pairs == 0 {
        return Err(WireError::NoHeader);
    }
    let (db, table) = r.next("the DB name", "the table name")?;
    let mut entries = Vec::with_capacity((r.left() / 2) as usize);
    while r.left() > 0 {
        let (key, count) = r.next("a key", "a field count")?;
        let n = parse_count(key, count)?;
        if (n as u64) > r.left() {
            return Err(WireError::MissingFields {
                key: key.to_string(),
                expected: n,
                got: r.left() as usize,
            });
        }
        let mut fields: FieldValues = Vec::with_capacity(n);
        for _ in 0..n {
            let (f, v) = r.next("a field", "a value")?;
            fields.push((f.to_string(), v.to_string()));
        }
        let op = if n == 0 { Op::Del } else { Op::Set };
        entries.push(KeyOpFieldValues {
            key: key.to_string(),
            op,
            fields,
        });
    }
    r.end()?;
    let term = take_term(&mut entries)?;
    Ok(ZmqBatch {
        db: db.to_string(),
        table: table.to_string(),
        term,
        entries,
    })
}

fn take_term(entries: &mut Vec<KeyOpFieldValues>) -> Result<Option<u64>, WireError> {
    let Some(first) = entries.first() else {
        return Ok(None);
    };
    if first.key != TERM_KEY {
        return Ok(None);
    }
    let value = first.field(TERM_FIELD).unwrap_or("");
    let term = value.parse::<u64>().map_err(|_| WireError::BadTerm {
        key: TERM_KEY.to_string(),
        value: value.to_string(),
    })?;
    entries.remove(0);
    Ok(Some(term))
}

/// Why an entry cannot go on the wire as it is, if it cannot.
pub fn check_entry(e: &KeyOpFieldValues) -> Result<(), ZmqError> {
    let bad = |reason| {
        Err(ZmqError::InvalidEntry {
            key: e.key.clone(),
            reason,
        })
    };
    if e.key.is_empty() {
        return bad(
            "the key is empty (a reply with an empty key is how a server refuses a whole message)",
        );
    }
    if e.key == TERM_KEY {
        return bad("the key is reserved for the fencing term");
    }
    if e.op == Op::Set && e.fields.is_empty() {
        // On the wire a field count of 0 is a DEL; swss-common writes ("NULL", "NULL") for a
        // row without attributes.
        return bad(
            "a SET without fields would arrive as a DEL (send (\"NULL\", \"NULL\") for an empty row)",
        );
    }
    Ok(())
}

/// The last write of each key, at the place of its last write: what applying the entries in
/// order leaves, given that a SET on the ZMQ path replaces the whole entry (swss-common's
/// `AsyncDBUpdater` deletes the row before it writes a SET; p4orch takes a SET as the full
/// entry). The Redis path gets this from its staging hash and key set; the ZMQ path of
/// swss-common delivers every write, so a DEL then SET of one key reaches the consumer as two
/// operations (sonic-net/sonic-swss#3978 lost a default route to exactly that). Returns the
/// entries kept and how many were dropped.
pub fn coalesce(entries: Vec<KeyOpFieldValues>) -> (Vec<KeyOpFieldValues>, usize) {
    match last_writes(&entries) {
        None => (entries, 0),
        Some(keep) => {
            let n = entries.len();
            let out: Vec<KeyOpFieldValues> = entries
                .into_iter()
                .zip(keep)
                .filter_map(|(e, k)| k.then_some(e))
                .collect();
            let dropped = n - out.len();
            (out, dropped)
        }
    }
}

/// [`coalesce`] of a borrowed batch: borrowed as it is when no key repeats (the usual case),
/// copied otherwise.
pub fn coalesce_ref(entries: &[KeyOpFieldValues]) -> (Cow<'_, [KeyOpFieldValues]>, usize) {
    match last_writes(entries) {
        None => (Cow::Borrowed(entries), 0),
        Some(keep) => {
            let out: Vec<KeyOpFieldValues> = entries
                .iter()
                .zip(keep)
                .filter(|(_, k)| *k)
                .map(|(e, _)| e.clone())
                .collect();
            let dropped = entries.len() - out.len();
            (Cow::Owned(out), dropped)
        }
    }
}

/// Which entries are the last write of their key; `None` when every key is written once.
fn last_writes(entries: &[KeyOpFieldValues]) -> Option<Vec<bool>> {
    let n = entries.len();
    let mut keep = vec![false; n];
    let mut seen: HashSet<&str> = HashSet::with_capacity(n);
    for (i, e) in entries.iter().enumerate().rev() {
        keep[i] = seen.insert(e.key.as_str());
    }
    (seen.len() < n).then_some(keep)
}

/// Cuts `entries` into runs that each make a message under `limit` bytes and, with
/// `replies`, whose reply (each entry with a status and a message of up to 256 bytes) is under
/// `limit` too. An entry that cannot fit alone is refused before anything is cut.
pub fn split(
    db: &str,
    table: &str,
    term: Option<u64>,
    entries: &[KeyOpFieldValues],
    limit: usize,
    replies: bool,
) -> Result<Vec<Range<usize>>, ZmqError> {
    let header = header_len(db, table, term);
    let max = limit.saturating_sub(1);
    let mut out = Vec::new();
    let (mut start, mut req, mut rep) = (0, header, header);
    for (i, e) in entries.iter().enumerate() {
        let r = entry_len(e);
        let q = if replies { reply_estimate(e) } else { 0 };
        if header + r.max(q) > max {
            return Err(ZmqError::EntryTooLarge {
                key: e.key.clone(),
                bytes: header + r.max(q),
                limit: max,
            });
        }
        if req + r > max || rep + q > max {
            out.push(start..i);
            (start, req, rep) = (i, header, header);
        }
        req += r;
        rep += q;
    }
    if start < entries.len() {
        out.push(start..entries.len());
    }
    Ok(out)
}

fn reply_entries(results: &[EntryResult], echo: bool, cut: bool) -> Vec<KeyOpFieldValues> {
    results
        .iter()
        .map(|r| {
            let mut message = r.message.as_str();
            if cut && message.len() > SHORT_MESSAGE {
                let mut end = SHORT_MESSAGE;
                while !message.is_char_boundary(end) {
                    end -= 1;
                }
                message = &message[..end];
            }
            let mut fields = Vec::with_capacity(1 + if echo { r.fields.len() } else { 0 });
            fields.push((r.status.as_str().to_string(), message.to_string()));
            if echo {
                fields.extend(r.fields.iter().cloned());
            }
            KeyOpFieldValues {
                key: r.key.clone(),
                op: Op::Set,
                fields,
            }
        })
        .collect()
}

/// The reply of the request/reply mode, as p4orch's `ResponsePublisher` sends it over ZMQ
/// (sonic-swss orchagent/response_publisher.cpp): per key, the status string and the message
/// as the first pair, then the entry's fields. If that would not fit in a message, the fields
/// are left out, then long messages cut: the status of every key always arrives.
pub fn encode_reply(db: &str, table: &str, results: &[EntryResult], limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for (echo, cut) in [(true, false), (false, false), (false, true)] {
        out = encode_parts(db, table, None, &reply_entries(results, echo, cut));
        if out.len() < limit {
            break;
        }
    }
    out
}

/// A reply refusing a whole message (Weft's servers only; swss-common's never refuses): one
/// entry with an empty key, whose first pair is the status and the reason.
pub fn encode_refusal(db: &str, table: &str, status: StatusCode, message: &str) -> Vec<u8> {
    let entry = KeyOpFieldValues {
        key: String::new(),
        op: Op::Set,
        fields: vec![(status.as_str().to_string(), message.to_string())],
    };
    encode_parts(db, table, None, std::slice::from_ref(&entry))
}

/// The per-key statuses of a reply to a request for `db`/`table`.
pub fn decode_reply(buf: &[u8], db: &str, table: &str) -> Result<Vec<Response>, ZmqError> {
    let batch = decode(buf)?;
    if let Some(refusal) = batch.entries.iter().find(|e| e.key.is_empty()) {
        let (status, message) = refusal.fields.first().cloned().unwrap_or_default();
        return Err(ZmqError::Refused {
            status: StatusCode::from_swss(&status),
            message,
        });
    }
    if batch.db != db || batch.table != table {
        return Err(ZmqError::ReplyMismatch {
            expected_db: db.to_string(),
            expected_table: table.to_string(),
            db: batch.db,
            table: batch.table,
        });
    }
    batch
        .entries
        .into_iter()
        .map(|e| {
            let mut fields = e.fields.into_iter();
            let Some((status_str, message)) = fields.next() else {
                return Err(WireError::EmptyReplyEntry { key: e.key }.into());
            };
            Ok(Response {
                key: e.key,
                status: StatusCode::from_swss(&status_str),
                status_str,
                message,
                fields: fields.collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(entries: Vec<KeyOpFieldValues>) -> ZmqBatch {
        ZmqBatch {
            db: "APPL_DB".into(),
            table: "P4RT_TABLE".into(),
            term: None,
            entries,
        }
    }

    /// The bytes of `BinarySerializer::serializeBuffer("DB", "T", {("k", SET, {("f", "v")}),
    /// ("d", DEL, {})})`, written out by hand from binaryserializer.h.
    fn swss_bytes() -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(4u64.to_le_bytes());
        for s in ["DB", "T", "k", "1", "f", "v", "d", "0"] {
            v.extend((s.len() as u64).to_le_bytes());
            v.extend(s.as_bytes());
        }
        v
    }

    #[test]
    fn encoding_is_swss_binary_serializer_byte_for_byte() {
        let b = ZmqBatch {
            db: "DB".into(),
            table: "T".into(),
            term: None,
            entries: vec![
                KeyOpFieldValues::set("k", [("f", "v")]),
                KeyOpFieldValues::del("d"),
            ],
        };
        assert_eq!(encode(&b), swss_bytes());
        assert_eq!(encoded_len(&b), swss_bytes().len());
        assert_eq!(decode(&swss_bytes()).expect("decode"), b);
    }

    #[test]
    fn round_trip_keeps_order_ops_and_many_fields() {
        let fields: Vec<(String, String)> = (0..300)
            .map(|i| (format!("param/f{i}"), format!("v{i}")))
            .collect();
        let b = batch(vec![
            KeyOpFieldValues::set("A:{\"x\":1}", fields.clone()),
            KeyOpFieldValues::del("B"),
            KeyOpFieldValues::set("C", [("NULL", "NULL")]),
        ]);
        let bytes = encode(&b);
        assert_eq!(bytes.len(), encoded_len(&b));
        assert_eq!(decode(&bytes).expect("decode"), b);
    }

    #[test]
    fn every_truncation_of_a_message_is_an_error_not_a_shorter_batch() {
        let bytes = encode(&batch(vec![
            KeyOpFieldValues::set("k1", [("f", "v"), ("g", "w")]),
            KeyOpFieldValues::del("k2"),
        ]));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut} decoded");
        }
    }

    #[test]
    fn malformed_messages_say_what_is_wrong() {
        let mut trailing = swss_bytes();
        trailing.push(0);
        let err = decode(&trailing).expect_err("trailing").to_string();
        assert!(err.contains("1 bytes after the last"), "{err}");

        let mut huge = 1u64.to_le_bytes().to_vec();
        huge.extend(u64::MAX.to_le_bytes());
        huge.extend([0; 8]);
        let err = decode(&huge).expect_err("huge length").to_string();
        assert!(err.contains("truncated"), "{err}");

        let mut lying = 1_000_000u64.to_le_bytes().to_vec();
        lying.extend([0; 16]);
        let err = decode(&lying).expect_err("pair count").to_string();
        assert!(err.contains("cannot hold more than 1"), "{err}");

        let mut bad_count = swss_bytes();
        let at = bad_count.len() - 1;
        bad_count[at] = b'x';
        let err = decode(&bad_count).expect_err("count").to_string();
        assert!(err.contains("\"x\" is not a decimal number"), "{err}");

        // An entry that announces more fields than the message holds: swss-common drops it
        // silently; here it is an error.
        let mut short = Vec::new();
        short.extend(2u64.to_le_bytes());
        for s in ["DB", "T", "k", "3"] {
            short.extend((s.len() as u64).to_le_bytes());
            short.extend(s.as_bytes());
        }
        let err = decode(&short).expect_err("missing fields").to_string();
        assert!(err.contains("announces 3 fields"), "{err}");
        assert!(matches!(
            decode(&[1, 2, 3]),
            Err(WireError::NoPairCount { len: 3 })
        ));
        assert!(matches!(decode(&[0; 8]), Err(WireError::NoHeader)));
    }

    #[test]
    fn the_term_travels_as_a_first_entry_and_is_taken_out() {
        let mut b = batch(vec![KeyOpFieldValues::del("k")]);
        b.term = Some(42);
        let bytes = encode(&b);
        assert_eq!(bytes.len(), encoded_len(&b));
        let plain = decode(&encode(&batch(vec![
            KeyOpFieldValues::set(TERM_KEY, [(TERM_FIELD, "42")]),
            KeyOpFieldValues::del("k"),
        ])))
        .expect("decode");
        assert_eq!(plain, b, "the term entry is an ordinary entry on the wire");
        assert_eq!(decode(&bytes).expect("decode"), b);
    }

    #[test]
    fn coalescing_keeps_the_last_write_of_each_key_where_it_was_last_written() {
        let (out, dropped) = coalesce(vec![
            KeyOpFieldValues::del("route"),
            KeyOpFieldValues::set("nh", [("f", "1")]),
            KeyOpFieldValues::set("route", [("nexthop", "nh")]),
            KeyOpFieldValues::set("gone", [("f", "1")]),
            KeyOpFieldValues::del("gone"),
            KeyOpFieldValues::set("twice", [("a", "1")]),
            KeyOpFieldValues::set("twice", [("b", "2")]),
        ]);
        assert_eq!(dropped, 3);
        assert_eq!(
            out,
            vec![
                KeyOpFieldValues::set("nh", [("f", "1")]),
                KeyOpFieldValues::set("route", [("nexthop", "nh")]),
                KeyOpFieldValues::del("gone"),
                KeyOpFieldValues::set("twice", [("b", "2")]),
            ]
        );
    }

    #[test]
    fn split_messages_and_their_replies_fit_under_the_limit() {
        let entries: Vec<KeyOpFieldValues> = (0..1000)
            .map(|i| KeyOpFieldValues::set(format!("key-{i}"), [("action", "a"), ("param/x", "1")]))
            .collect();
        let limit = 20_000;
        let runs = split("APPL_DB", "P4RT_TABLE", Some(7), &entries, limit, true).expect("split");
        assert!(runs.len() > 1);
        assert_eq!(runs.first().map(|r| r.start), Some(0));
        assert_eq!(runs.last().map(|r| r.end), Some(entries.len()));
        for w in runs.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        for r in runs {
            let results: Vec<EntryResult> = entries[r.clone()]
                .iter()
                .map(|e| {
                    EntryResult::err(
                        e.key.clone(),
                        e.op,
                        StatusCode::FailedPrecondition,
                        "m".repeat(256),
                        e.fields.clone(),
                    )
                })
                .collect();
            let req = encode_parts("APPL_DB", "P4RT_TABLE", Some(7), &entries[r]);
            assert!(req.len() < limit);
            assert!(encode_reply("APPL_DB", "P4RT_TABLE", &results, usize::MAX).len() < limit);
        }
        let big = KeyOpFieldValues::set("big", [("f", "x".repeat(limit))]);
        let err = split("APPL_DB", "P4RT_TABLE", None, &[big], limit, false).expect_err("too big");
        assert!(err.to_string().contains("entry \"big\" is"), "{err}");
    }

    #[test]
    fn replies_carry_status_and_message_first_and_a_refusal_is_an_error() {
        let results = vec![
            EntryResult::ok("k1", Op::Set, vec![("action".into(), "a".into())]),
            EntryResult::err(
                "k2",
                Op::Del,
                StatusCode::NotFound,
                "[OrchAgent] no such entry",
                vec![],
            ),
        ];
        let bytes = encode_reply("APPL_DB", "P4RT_TABLE", &results, MQ_RESPONSE_MAX_COUNT);
        let raw = decode(&bytes).expect("decode");
        assert_eq!(
            raw.entries[0].fields,
            vec![
                ("SWSS_RC_SUCCESS".to_string(), String::new()),
                ("action".to_string(), "a".to_string())
            ]
        );
        let replies = decode_reply(&bytes, "APPL_DB", "P4RT_TABLE").expect("reply");
        assert_eq!(replies[1].status, StatusCode::NotFound);
        assert_eq!(replies[1].message, "[OrchAgent] no such entry");
        assert!(matches!(
            decode_reply(&bytes, "APPL_DB", "OTHER"),
            Err(ZmqError::ReplyMismatch { .. })
        ));
        let refusal = encode_refusal("", "", StatusCode::InvalidParam, "malformed");
        match decode_reply(&refusal, "APPL_DB", "P4RT_TABLE") {
            Err(ZmqError::Refused { status, message }) => {
                assert_eq!(status, StatusCode::InvalidParam);
                assert_eq!(message, "malformed");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_reply_too_big_for_a_message_drops_echoed_fields_then_cuts_messages() {
        let results: Vec<EntryResult> = (0..100)
            .map(|i| {
                EntryResult::err(
                    format!("k{i}"),
                    Op::Set,
                    StatusCode::Internal,
                    "x".repeat(1000),
                    vec![("f".into(), "v".repeat(100))],
                )
            })
            .collect();
        let full = encode_reply("D", "T", &results, usize::MAX).len();
        let no_echo = encode_reply("D", "T", &results, full).len();
        assert!(no_echo < full);
        let cut = encode_reply("D", "T", &results, no_echo).len();
        assert!(cut < no_echo);
        let replies =
            decode_reply(&encode_reply("D", "T", &results, no_echo), "D", "T").expect("decode");
        assert_eq!(replies.len(), 100);
        assert!(
            replies
                .iter()
                .all(|r| r.status == StatusCode::Internal && r.message.len() == 256)
        );
    }

    #[test]
    fn entries_the_wire_cannot_carry_are_refused() {
        for (e, why) in [
            (KeyOpFieldValues::del(""), "empty"),
            (KeyOpFieldValues::del(TERM_KEY), "reserved"),
            (
                KeyOpFieldValues::set("k", Vec::<(String, String)>::new()),
                "would arrive as a DEL",
            ),
        ] {
            let err = check_entry(&e).expect_err(why).to_string();
            assert!(err.contains(why), "{err}");
        }
    }
}
