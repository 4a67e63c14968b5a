//! The few calls of BMv2's Thrift API the plugin needs (`simple_switch --thrift-port`), over
//! Thrift's binary protocol on a buffered TCP transport, as `simple_switch_CLI` speaks it:
//! queue rates (`SimpleSwitch.set_egress_queue_rate`, `set_egress_priority_queue_rate`) and the
//! PFC hold register (`Standard.bm_register_write`, `bm_register_reset`). BMv2's P4Runtime server
//! cannot write registers and has no queue rates, hence this second channel.
//!
//! ```text
//!  call:  i32 0x80010001 (version 1, CALL) · string "service:method" · i32 seq · args struct
//!  reply: i32 0x80010002 (REPLY) or 0x80010003 (EXCEPTION) · string · i32 seq · result struct
//!  struct: (u8 type · i16 id · value)* · u8 0;  strings: i32 length · bytes;  big endian
//! ```
//! BMv2 registers its services under a multiplexed processor (`standard`, `simple_switch`),
//! so the method name carries the service. One connection, one call at a time; a call that
//! fails drops the connection and the next one connects again.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const VERSION_1: u32 = 0x8001_0000;
const CALL: u32 = 1;
const REPLY: u32 = 2;
const EXCEPTION: u32 = 3;

const T_STOP: u8 = 0;
const T_BOOL: u8 = 2;
const T_BYTE: u8 = 3;
const T_DOUBLE: u8 = 4;
const T_I16: u8 = 6;
const T_I32: u8 = 8;
const T_I64: u8 = 10;
const T_STRING: u8 = 11;
const T_STRUCT: u8 = 12;
const T_MAP: u8 = 13;
const T_SET: u8 = 14;
const T_LIST: u8 = 15;

/// Replies larger than this are not BMv2's answer to these calls (a whole register of 4,096
/// cells is 32 KiB).
const MAX_REPLY: usize = 1 << 17;
/// Nesting deeper than this is not a reply to these calls either.
const MAX_DEPTH: u32 = 8;

#[derive(Debug, thiserror::Error)]
pub enum ThriftError {
    #[error("BMv2 Thrift {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("BMv2 Thrift {addr}: no answer within {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("BMv2 Thrift {method}: {message}")]
    Application { method: String, message: String },
    #[error("BMv2 Thrift {method}: refused ({what} code {code})")]
    Refused {
        method: String,
        what: &'static str,
        code: i32,
    },
    #[error("BMv2 Thrift {method}: malformed reply: {why}")]
    Malformed { method: String, why: String },
}

/// Why bytes are not a reply to the call: what [`ThriftError::Malformed`] says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(pub String);

impl From<String> for WireError {
    fn from(s: String) -> Self {
        WireError(s)
    }
}

impl From<&str> for WireError {
    fn from(s: &str) -> Self {
        WireError(s.to_string())
    }
}

/// An argument of a call (field ids are the argument positions, from 1).
#[derive(Debug, Clone, PartialEq)]
pub enum Arg<'a> {
    I32(i32),
    I64(i64),
    Str(&'a str),
}

/// The bytes of one call.
pub fn encode_call(method: &str, seq: i32, args: &[Arg<'_>]) -> Vec<u8> {
    let mut b = Vec::with_capacity(32 + method.len());
    b.extend_from_slice(&(VERSION_1 | CALL).to_be_bytes());
    b.extend_from_slice(&(method.len() as u32).to_be_bytes());
    b.extend_from_slice(method.as_bytes());
    b.extend_from_slice(&seq.to_be_bytes());
    for (i, a) in args.iter().enumerate() {
        let id = (i + 1) as i16;
        match a {
            Arg::I32(v) => {
                b.push(T_I32);
                b.extend_from_slice(&id.to_be_bytes());
                b.extend_from_slice(&v.to_be_bytes());
            }
            Arg::I64(v) => {
                b.push(T_I64);
                b.extend_from_slice(&id.to_be_bytes());
                b.extend_from_slice(&v.to_be_bytes());
            }
            Arg::Str(s) => {
                b.push(T_STRING);
                b.extend_from_slice(&id.to_be_bytes());
                b.extend_from_slice(&(s.len() as u32).to_be_bytes());
                b.extend_from_slice(s.as_bytes());
            }
        }
    }
    b.push(T_STOP);
    b
}

/// What a reply's result struct held: field 0 (the return value) as an integer when it is
/// one, or the id and first i32 of an exception field (BMv2's exceptions carry their code
/// first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok(Option<i64>),
    /// Field 0 was a list of i64 (`bm_register_read_all`).
    Ints(Vec<i64>),
    Thrown {
        field: i16,
        code: i32,
    },
}

/// A reply as it came off the wire: an outcome, or a Thrift application exception's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Result { seq: i32, outcome: Outcome },
    Application { seq: i32, message: String },
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], WireError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.b.len());
        let Some(end) = end else {
            return Err(WireError(format!(
                "{} bytes wanted at {}, {} there",
                n,
                self.at,
                self.b.len()
            )));
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn i16(&mut self) -> Result<i16, WireError> {
        let s = self.take(2)?;
        Ok(i16::from_be_bytes([s[0], s[1]]))
    }
    fn i32(&mut self) -> Result<i32, WireError> {
        let s = self.take(4)?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn i64(&mut self) -> Result<i64, WireError> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(i64::from_be_bytes(a))
    }
    fn len(&mut self) -> Result<usize, WireError> {
        let n = self.i32()?;
        usize::try_from(n).map_err(|_| WireError(format!("negative length {n}")))
    }
    fn string(&mut self) -> Result<String, WireError> {
        let n = self.len()?;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    /// Skips one value of type `t`.
    fn skip(&mut self, t: u8, depth: u32) -> Result<(), WireError> {
        if depth > MAX_DEPTH {
            return Err(WireError::from("nested too deep"));
        }
        match t {
            T_BOOL | T_BYTE => self.take(1).map(drop),
            T_I16 => self.take(2).map(drop),
            T_I32 => self.take(4).map(drop),
            T_DOUBLE | T_I64 => self.take(8).map(drop),
            T_STRING => {
                let n = self.len()?;
                self.take(n).map(drop)
            }
            T_STRUCT => loop {
                let ft = self.u8()?;
                if ft == T_STOP {
                    return Ok(());
                }
                self.i16()?;
                self.skip(ft, depth + 1)?;
            },
            T_MAP => {
                let (k, v) = (self.u8()?, self.u8()?);
                for _ in 0..self.len()? {
                    self.skip(k, depth + 1)?;
                    self.skip(v, depth + 1)?;
                }
                Ok(())
            }
            T_SET | T_LIST => {
                let e = self.u8()?;
                for _ in 0..self.len()? {
                    self.skip(e, depth + 1)?;
                }
                Ok(())
            }
            other => Err(format!("unknown field type {other}").into()),
        }
    }

    /// A result struct: the return value (field 0) or the first exception field set.
    fn result(&mut self) -> Result<Outcome, WireError> {
        let mut outcome = Outcome::Ok(None);
        loop {
            let t = self.u8()?;
            if t == T_STOP {
                return Ok(outcome);
            }
            let id = self.i16()?;
            match (id, t) {
                (0, T_I32) => outcome = Outcome::Ok(Some(i64::from(self.i32()?))),
                (0, T_I64) => outcome = Outcome::Ok(Some(self.i64()?)),
                (0, T_LIST) => {
                    let e = self.u8()?;
                    let n = self.len()?;
                    if e != T_I64 {
                        for _ in 0..n {
                            self.skip(e, 1)?;
                        }
                        continue;
                    }
                    // Each value is 8 bytes: a length the reply cannot hold is refused before
                    // anything is allocated for it.
                    if n > (self.b.len() - self.at) / 8 {
                        return Err(format!(
                            "a list of {n} i64 in {} bytes",
                            self.b.len() - self.at
                        )
                        .into());
                    }
                    let mut v = Vec::with_capacity(n);
                    for _ in 0..n {
                        v.push(self.i64()?);
                    }
                    outcome = Outcome::Ints(v);
                }
                (0, _) => self.skip(t, 0)?,
                (field, T_STRUCT) => {
                    let mut code = 0;
                    loop {
                        let ft = self.u8()?;
                        if ft == T_STOP {
                            break;
                        }
                        let fid = self.i16()?;
                        if fid == 1 && ft == T_I32 {
                            code = self.i32()?;
                        } else {
                            self.skip(ft, 1)?;
                        }
                    }
                    outcome = Outcome::Thrown { field, code };
                }
                (_, _) => self.skip(t, 0)?,
            }
        }
    }

    /// A TApplicationException: message (1) and type (2).
    fn application(&mut self) -> Result<String, WireError> {
        let mut message = String::new();
        let mut kind = 0;
        loop {
            let t = self.u8()?;
            if t == T_STOP {
                break;
            }
            match (self.i16()?, t) {
                (1, T_STRING) => message = self.string()?,
                (2, T_I32) => kind = self.i32()?,
                (_, t) => self.skip(t, 0)?,
            }
        }
        Ok(format!("{message} (application exception type {kind})"))
    }
}

/// Decodes one complete reply to `method`. `Err` with the reason when the bytes are not one
/// (yet): [`reply_len`] says how many bytes a reply needs.
pub fn decode_reply(bytes: &[u8], method: &str) -> Result<Reply, WireError> {
    let mut c = Cursor { b: bytes, at: 0 };
    let head = c.i32()? as u32;
    if head & 0xffff_0000 != VERSION_1 {
        return Err(format!("not a binary-protocol message (header {head:#x})").into());
    }
    let name = c.string()?;
    let seq = c.i32()?;
    // A multiplexed server answers with the bare method name.
    let bare = method.rsplit(':').next().unwrap_or(method);
    if name != bare && name != method {
        return Err(format!("reply to {name:?}").into());
    }
    match head & 0xff {
        REPLY => Ok(Reply::Result {
            seq,
            outcome: c.result()?,
        }),
        EXCEPTION => Ok(Reply::Application {
            seq,
            message: c.application()?,
        }),
        t => Err(format!("message type {t}").into()),
    }
}

/// Whether `bytes` hold a whole reply: `Some(len)` once they do, `None` while more must come.
/// Walks the message the way [`decode_reply`] reads it.
pub fn reply_len(bytes: &[u8]) -> Option<usize> {
    let mut c = Cursor { b: bytes, at: 0 };
    c.i32().ok()?;
    c.string().ok()?;
    c.i32().ok()?;
    c.skip(T_STRUCT, 0).ok()?;
    Some(c.at)
}

/// A connection to one BMv2's Thrift server (context 0).
pub struct Bmv2Thrift {
    addr: String,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
    seq: i32,
}

impl Bmv2Thrift {
    pub fn new(addr: impl Into<String>, timeout: Duration) -> Self {
        Bmv2Thrift {
            addr: addr.into(),
            timeout,
            conn: None,
            seq: 0,
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Every priority queue of `port` drains at `pps` packets/s (0: unlimited).
    pub async fn set_queue_rate(&mut self, port: u32, pps: u64) -> Result<(), ThriftError> {
        let rate = i64::try_from(pps).unwrap_or(i64::MAX);
        self.call(
            "simple_switch:set_egress_queue_rate",
            &[Arg::I32(port as i32), Arg::I64(rate)],
        )
        .await
        .map(drop)
    }

    /// Priority queue `priority` of `port` drains at `pps` packets/s (0: unlimited).
    pub async fn set_priority_queue_rate(
        &mut self,
        port: u32,
        priority: u8,
        pps: u64,
    ) -> Result<(), ThriftError> {
        let rate = i64::try_from(pps).unwrap_or(i64::MAX);
        self.call(
            "simple_switch:set_egress_priority_queue_rate",
            &[
                Arg::I32(port as i32),
                Arg::I32(i32::from(priority)),
                Arg::I64(rate),
            ],
        )
        .await
        .map(drop)
    }

    /// Writes cell `index` of register array `name` (the pipeline's JSON name).
    pub async fn register_write(
        &mut self,
        name: &str,
        index: u32,
        value: i64,
    ) -> Result<(), ThriftError> {
        self.call(
            "standard:bm_register_write",
            &[
                Arg::I32(0),
                Arg::Str(name),
                Arg::I32(index as i32),
                Arg::I64(value),
            ],
        )
        .await
        .map(drop)
    }

    /// Every cell of register array `name`, in index order.
    pub async fn register_read_all(&mut self, name: &str) -> Result<Vec<i64>, ThriftError> {
        let method = "standard:bm_register_read_all";
        match self
            .call_outcome(method, &[Arg::I32(0), Arg::Str(name)])
            .await?
        {
            Outcome::Ints(v) => Ok(v),
            other => Err(ThriftError::Malformed {
                method: method.into(),
                why: format!("not a list of integers: {other:?}"),
            }),
        }
    }

    /// Every cell of register array `name` back to 0.
    pub async fn register_reset(&mut self, name: &str) -> Result<(), ThriftError> {
        self.call("standard:bm_register_reset", &[Arg::I32(0), Arg::Str(name)])
            .await
            .map(drop)
    }

    /// One call: the return value when it is an integer.
    pub async fn call(
        &mut self,
        method: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<i64>, ThriftError> {
        match self.call_outcome(method, args).await? {
            Outcome::Ok(v) => Ok(v),
            _ => Ok(None),
        }
    }

    /// One call: what it returned (never [`Outcome::Thrown`], which is an error).
    pub async fn call_outcome(
        &mut self,
        method: &str,
        args: &[Arg<'_>],
    ) -> Result<Outcome, ThriftError> {
        let timeout = self.timeout;
        let addr = self.addr.clone();
        match tokio::time::timeout(timeout, self.exchange(method, args)).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                if matches!(e, ThriftError::Io { .. } | ThriftError::Malformed { .. }) {
                    self.conn = None;
                }
                Err(e)
            }
            Err(_) => {
                // The stream may hold half a reply now.
                self.conn = None;
                Err(ThriftError::Timeout { addr, timeout })
            }
        }
    }

    async fn exchange(&mut self, method: &str, args: &[Arg<'_>]) -> Result<Outcome, ThriftError> {
        let io = |addr: &str| {
            let addr = addr.to_string();
            move |source| ThriftError::Io { addr, source }
        };
        if self.conn.is_none() {
            let s = TcpStream::connect(&self.addr)
                .await
                .map_err(io(&self.addr))?;
            let _ = s.set_nodelay(true);
            self.conn = Some(BufReader::new(s));
        }
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let bytes = encode_call(method, seq, args);
        let addr = self.addr.clone();
        let Some(conn) = self.conn.as_mut() else {
            return Err(ThriftError::Io {
                addr,
                source: std::io::Error::other("not connected"),
            });
        };
        conn.get_mut().write_all(&bytes).await.map_err(io(&addr))?;
        let mut buf = Vec::with_capacity(64);
        let mut chunk = [0u8; 8192];
        let len = loop {
            if let Some(n) = reply_len(&buf) {
                break n;
            }
            if buf.len() > MAX_REPLY {
                return Err(ThriftError::Malformed {
                    method: method.into(),
                    why: format!("no reply within {MAX_REPLY} bytes"),
                });
            }
            let n = conn.read(&mut chunk).await.map_err(io(&addr))?;
            if n == 0 {
                return Err(ThriftError::Io {
                    addr,
                    source: std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "connection closed",
                    ),
                });
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let malformed = |why: String| ThriftError::Malformed {
            method: method.into(),
            why,
        };
        if buf.len() > len {
            return Err(malformed(format!(
                "{} bytes after the reply",
                buf.len() - len
            )));
        }
        match decode_reply(&buf, method).map_err(|e| malformed(e.0))? {
            Reply::Application { message, .. } => Err(ThriftError::Application {
                method: method.into(),
                message,
            }),
            Reply::Result { seq: s, .. } if s != seq => {
                Err(malformed(format!("sequence {s}, asked {seq}")))
            }
            Reply::Result {
                outcome: Outcome::Thrown { field, code },
                ..
            } => Err(ThriftError::Refused {
                method: method.into(),
                what: if field == 1 { "ouch" } else { "exception" },
                code,
            }),
            Reply::Result { outcome, .. } => Ok(outcome),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_encoded_as_simple_switch_cli_sends_it() {
        // What Thrift 0.17's Python client (BMv2's sswitch_runtime, which simple_switch_CLI
        // uses) writes for set_egress_queue_rate(3, 250) through TMultiplexedProtocol.
        let got = encode_call(
            "simple_switch:set_egress_queue_rate",
            0,
            &[Arg::I32(3), Arg::I64(250)],
        );
        let mut want = vec![0x80, 0x01, 0x00, 0x01, 0, 0, 0, 35];
        want.extend_from_slice(b"simple_switch:set_egress_queue_rate");
        want.extend_from_slice(&[0, 0, 0, 0]);
        want.extend_from_slice(&[8, 0, 1, 0, 0, 0, 3]);
        want.extend_from_slice(&[10, 0, 2, 0, 0, 0, 0, 0, 0, 0, 250]);
        want.push(0);
        assert_eq!(got, want);
    }

    fn reply(name: &str, seq: i32, kind: u32, body: &[u8]) -> Vec<u8> {
        let mut b = (VERSION_1 | kind).to_be_bytes().to_vec();
        b.extend_from_slice(&(name.len() as u32).to_be_bytes());
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(&seq.to_be_bytes());
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn replies_decode_to_a_value_an_exception_or_an_application_error() {
        let m = "simple_switch:set_egress_queue_rate";
        // i32 0 returned.
        let ok = reply("set_egress_queue_rate", 4, REPLY, &[8, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(reply_len(&ok), Some(ok.len()));
        assert_eq!(
            decode_reply(&ok, m),
            Ok(Reply::Result {
                seq: 4,
                outcome: Outcome::Ok(Some(0))
            })
        );
        // void: an empty result struct.
        let void = reply("bm_register_write", 1, REPLY, &[0]);
        assert_eq!(
            decode_reply(&void, "standard:bm_register_write"),
            Ok(Reply::Result {
                seq: 1,
                outcome: Outcome::Ok(None)
            })
        );
        // InvalidRegisterOperation { code: INVALID_REGISTER_NAME (1) } in field 1.
        let thrown = reply(
            "bm_register_write",
            2,
            REPLY,
            &[12, 0, 1, 8, 0, 1, 0, 0, 0, 1, 0, 0],
        );
        assert_eq!(
            decode_reply(&thrown, "standard:bm_register_write"),
            Ok(Reply::Result {
                seq: 2,
                outcome: Outcome::Thrown { field: 1, code: 1 }
            })
        );
        let mut app = vec![11, 0, 1, 0, 0, 0, 7];
        app.extend_from_slice(b"unknown");
        app.extend_from_slice(&[8, 0, 2, 0, 0, 0, 1, 0]);
        let app = reply("nope", 3, EXCEPTION, &app);
        assert_eq!(
            decode_reply(&app, "standard:nope"),
            Ok(Reply::Application {
                seq: 3,
                message: "unknown (application exception type 1)".into()
            })
        );
    }

    #[test]
    fn a_list_of_integers_is_a_registers_cells_and_a_list_longer_than_its_bytes_is_refused() {
        let mut body = vec![T_LIST, 0, 0, T_I64];
        body.extend_from_slice(&3i32.to_be_bytes());
        for v in [0i64, 5, 0] {
            body.extend_from_slice(&v.to_be_bytes());
        }
        body.push(T_STOP);
        let r = reply("bm_register_read_all", 7, REPLY, &body);
        assert_eq!(reply_len(&r), Some(r.len()));
        assert_eq!(
            decode_reply(&r, "standard:bm_register_read_all"),
            Ok(Reply::Result {
                seq: 7,
                outcome: Outcome::Ints(vec![0, 5, 0])
            })
        );
        let mut lying = vec![T_LIST, 0, 0, T_I64];
        lying.extend_from_slice(&1_000_000i32.to_be_bytes());
        lying.extend_from_slice(&1i64.to_be_bytes());
        lying.push(T_STOP);
        let r = reply("bm_register_read_all", 8, REPLY, &lying);
        assert!(decode_reply(&r, "standard:bm_register_read_all").is_err());
    }

    #[test]
    fn a_partial_or_foreign_reply_is_not_taken() {
        let ok = reply("set_egress_queue_rate", 4, REPLY, &[8, 0, 0, 0, 0, 0, 0, 0]);
        for n in 0..ok.len() {
            assert_eq!(reply_len(&ok[..n]), None, "{n} bytes");
        }
        assert!(decode_reply(&ok, "simple_switch:set_egress_priority_queue_rate").is_err());
        assert!(decode_reply(b"HTTP/1.1 400 Bad Request\r\n", "standard:x").is_err());
        // A length that does not fit is refused, not allocated.
        let mut huge = (VERSION_1 | REPLY).to_be_bytes().to_vec();
        huge.extend_from_slice(&0x7fff_fff0u32.to_be_bytes());
        assert_eq!(reply_len(&huge), None);
    }
}
