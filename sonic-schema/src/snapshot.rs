//! `WEFT_COUNTERS_SNAPSHOT`: the COUNTERS rows a writer wrote at its last write, packed into one
//! string per writer, beside the rows themselves.
//!
//! Why: a reader of a whole fabric (5,120 switches at k=64, 64 ports and a few queues each)
//! that reads the rows reads over a million hashes a second, and the servers' work per hash,
//! not the bytes, bounds it. The snapshot is one hash per switch, so the same read is one
//! command per switch. The rows stay the contract every other reader (SONiC's tools, `weft
//! top`) uses; the snapshot is a copy a reader may take instead when its `stamp` is the
//! current poll's (`COUNTERS:WEFT_SWITCH` `WEFT_POLL_TIME_MS`) and must ignore otherwise. The
//! plugin writes each copy with its rows in one `MULTI`, so a reader never sees one without
//! the other; the stamp check is for writers that do not (an older plugin, a copy of another
//! poll).
//!
//! Packed format, line by line: `#name,name,…` starts a group of rows that all have exactly
//! those fields; each row after it is `key,value,…` in the header's order. `%`, `,`, and a line
//! break inside a key, name or value are written `%25`, `%2C`, `%0A`, `%0D`.

use std::borrow::Cow;

use crate::{FieldValues, map_row};

map_row! {
    /// A copy of the `COUNTERS` rows each writer wrote at its last write, packed one string per
    /// writer (`poll`: the counter poll's port, queue and switch rows; `hist`: the tuning
    /// tick's depth histograms), and `stamp`: the `WEFT_POLL_TIME_MS` of the poll that wrote
    /// `poll`. Each copy is written with its rows in one `MULTI`. A reader takes the copy only
    /// when `stamp` equals `COUNTERS:WEFT_SWITCH`'s poll time, and reads the rows otherwise. Format: lines; `#f1,f2,…` heads a group of rows with
    /// those fields, each row `key,v1,v2,…`; `%`, `,`, CR and LF escaped as `%25` `%2C` `%0D`
    /// `%0A`. The whole hash is the Redis key `WEFT_COUNTERS_SNAPSHOT`.
    pub struct CountersSnapshot in CountersDb "WEFT_COUNTERS_SNAPSHOT" by Plugin,
        key "(none)", map "poll | hist | stamp": String => "packed rows, or the poll's unix ms": String
}

/// The Redis key of the snapshot hash (COUNTERS_DB, outside the `COUNTERS:` rows so a reader
/// that walks them never takes it for a port).
pub const KEY: &str = "WEFT_COUNTERS_SNAPSHOT";
/// The counter poll's rows.
pub const POLL: &str = "poll";
/// The tuning tick's depth histograms.
pub const HIST: &str = "hist";
/// The poll time (`WEFT_POLL_TIME_MS`) of the poll that wrote [`POLL`].
pub const STAMP: &str = "stamp";

impl CountersSnapshot {
    /// The copy a counter poll writes beside its rows: `rows` packed, stamped with the poll's
    /// `WEFT_POLL_TIME_MS`.
    pub fn of_poll(rows: &[(String, FieldValues)], poll_time_ms: u64) -> CountersSnapshot {
        let mut map = std::collections::BTreeMap::new();
        map.insert(POLL.to_string(), pack(rows));
        map.insert(STAMP.to_string(), poll_time_ms.to_string());
        CountersSnapshot {
            name: KEY.to_string(),
            map,
        }
    }

    /// The copy a tuning tick writes beside its depth histogram rows (every port's last).
    pub fn of_hist(rows: &[(String, FieldValues)]) -> CountersSnapshot {
        let mut map = std::collections::BTreeMap::new();
        map.insert(HIST.to_string(), pack(rows));
        CountersSnapshot {
            name: KEY.to_string(),
            map,
        }
    }
}

fn escape(s: &str, out: &mut String) {
    if !s.contains(['%', ',', '\n', '\r']) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            ',' => out.push_str("%2C"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            c => out.push(c),
        }
    }
}

/// A key, name or value as it was before [`pack`] escaped it.
pub fn unescape(s: &str) -> Cow<'_, str> {
    if !s.contains('%') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3);
        let c = match code {
            Some("25") => Some('%'),
            Some("2C") => Some(','),
            Some("0A") => Some('\n'),
            Some("0D") => Some('\r'),
            _ => None,
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[i + 3..];
            }
            // Not an escape this format writes: kept as it stands.
            None => {
                out.push('%');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// `rows` packed: rows with the same field names (in the same order) share one header, their
/// group placed where its first row was; within a group the rows keep their order.
pub fn pack(rows: &[(String, FieldValues)]) -> String {
    let mut groups: Vec<(&FieldValues, Vec<usize>)> = Vec::new();
    for (i, (_, fields)) in rows.iter().enumerate() {
        let same = |h: &FieldValues| {
            h.len() == fields.len() && h.iter().zip(fields).all(|(a, b)| a.0 == b.0)
        };
        match groups.iter_mut().find(|(h, _)| same(h)) {
            Some((_, members)) => members.push(i),
            None => groups.push((fields, vec![i])),
        }
    }
    let mut out = String::with_capacity(rows.len() * 64);
    for (names, members) in groups {
        out.push('#');
        for (i, (name, _)) in names.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            escape(name, &mut out);
        }
        out.push('\n');
        for i in members {
            let (key, fields) = &rows[i];
            escape(key, &mut out);
            for (_, v) in fields {
                out.push(',');
                escape(v, &mut out);
            }
            out.push('\n');
        }
    }
    out
}

/// One line of a packed string, as [`unpack_with`] walks it.
pub enum Line<'b, 'a> {
    /// A group's field names.
    Header(&'b [Cow<'a, str>]),
    /// A row of the group: its key and values in the header's order.
    Row(Cow<'a, str>, &'b [Cow<'a, str>]),
}

/// One line of a packed string, still escaped (see [`unescape`]), as [`raw_lines`] yields it.
pub enum RawLine<'a> {
    /// A group's field names, `,`-separated.
    Header(&'a str),
    /// A row: its key, and its values `,`-separated in the header's order.
    Row(&'a str, &'a str),
}

/// The lines of a packed string, unsplit: for a reader that wants a few fields of a few rows
/// and would rather not split the others.
pub fn raw_lines(packed: &str) -> impl Iterator<Item = RawLine<'_>> {
    packed.split('\n').filter_map(|line| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            None
        } else if let Some(h) = line.strip_prefix('#') {
            Some(RawLine::Header(h))
        } else {
            Some(match line.split_once(',') {
                Some((k, v)) => RawLine::Row(k, v),
                None => RawLine::Row(line, ""),
            })
        }
    })
}

/// Walks a packed string line by line. A row with another count of values than its header,
/// or before any header, is skipped: the number of such rows is returned.
pub fn unpack_with<'a>(packed: &'a str, mut f: impl FnMut(Line<'_, 'a>)) -> usize {
    let mut names: Option<usize> = None;
    let mut values: Vec<Cow<'a, str>> = Vec::new();
    let mut bad = 0;
    for line in packed.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        values.clear();
        if let Some(h) = line.strip_prefix('#') {
            values.extend(h.split(',').filter(|n| !n.is_empty()).map(unescape));
            names = Some(values.len());
            f(Line::Header(&values));
            continue;
        }
        let mut parts = line.split(',');
        let key = unescape(parts.next().unwrap_or(""));
        values.extend(parts.map(unescape));
        match names {
            Some(n) if n == values.len() => f(Line::Row(key, &values)),
            _ => bad += 1,
        }
    }
    bad
}

/// A packed string back into rows.
pub fn unpack(packed: &str) -> Vec<(String, FieldValues)> {
    let mut names: Vec<String> = Vec::new();
    let mut out = Vec::new();
    unpack_with(packed, |line| match line {
        Line::Header(h) => names = h.iter().map(|n| n.to_string()).collect(),
        Line::Row(k, v) => out.push((
            k.into_owned(),
            names
                .iter()
                .cloned()
                .zip(v.iter().map(|x| x.to_string()))
                .collect(),
        )),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Row;
    use crate::counters::{PortCounters, QueueCounters, SwitchCounters};

    fn fv(v: &[(&str, &str)]) -> FieldValues {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn packed_rows_unpack_to_the_same_rows_with_awkward_characters_escaped() {
        let mut p = PortCounters {
            port: "Ethernet0".into(),
            rx_packets: Some(10),
            tx_packets: Some(0),
            ..Default::default()
        };
        p.pfc[3].rx_pause = Some(4);
        let q = QueueCounters {
            port: "Ethernet0".into(),
            queue: 3,
            ecn_marked: Some(2),
            ..Default::default()
        };
        let mut s = SwitchCounters {
            poll_time_ms: Some(123),
            ..Default::default()
        };
        s.drops.insert("no_route".into(), (7, 700));
        let rows = vec![
            (p.key(), p.to_fields()),
            (
                "Ethernet4".into(),
                fv(&[("SAI_PORT_STAT_IF_IN_UCAST_PKTS", "1")]),
            ),
            (q.key(), q.to_fields()),
            (s.key(), s.to_fields()),
            ("odd,key%".into(), fv(&[("a,b", "x\ny,%2C"), ("c", "")])),
        ];
        let packed = pack(&rows);
        let mut back = unpack(&packed);
        let mut want = rows.clone();
        back.sort();
        want.sort();
        assert_eq!(back, want);
        // One header per set of field names (the two port rows differ), not per row.
        assert_eq!(packed.lines().filter(|l| l.starts_with('#')).count(), 5);
        let many: Vec<_> = (0..10).flat_map(|_| rows[..3].to_vec()).collect();
        assert_eq!(
            pack(&many).lines().filter(|l| l.starts_with('#')).count(),
            3,
            "rows of one kind interleaved with others share their header"
        );
    }

    #[test]
    fn rows_that_do_not_match_their_header_are_skipped_and_counted() {
        let mut rows = 0;
        let bad = unpack_with("x,1\n#a,b\nk,1,2\nk2,1\n", |l| {
            if let Line::Row(..) = l {
                rows += 1
            }
        });
        assert_eq!((rows, bad), (1, 2));
    }
}
