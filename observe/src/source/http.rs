//! The little HTTP/1.1 a Prometheus query API needs: one GET, the body back (whole, chunked or
//! to the end of the connection), over a TCP connection of its own. No TLS: for Prometheus on
//! loopback or a trusted network (a TLS-terminating proxy in front of it otherwise).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("{0} is not an http://HOST:PORT URL (https is not supported: use a local proxy)")]
    Url(String),
    #[error("{addr}: {reason}")]
    Io { addr: String, reason: String },
    #[error("{addr} did not answer within {after:?}")]
    Timeout { addr: String, after: Duration },
    #[error("{addr}: malformed HTTP response: {reason}")]
    Malformed { addr: String, reason: String },
}

/// Where a base URL points: `host:port` and a path prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    pub prefix: String,
}

impl Url {
    pub fn parse(u: &str) -> Result<Url, HttpError> {
        let bad = || HttpError::Url(u.to_string());
        let rest = u.strip_prefix("http://").ok_or_else(bad)?;
        let (hostport, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad())?),
            None => (hostport, 80),
        };
        if host.is_empty() {
            return Err(bad());
        }
        Ok(Url {
            host: host.trim_matches(|c| c == '[' || c == ']').to_string(),
            port,
            prefix: path.to_string(),
        })
    }

    fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// `s` percent-encoded for a query string.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn find(h: &[u8], pat: &[u8]) -> Option<usize> {
    h.windows(pat.len()).position(|w| w == pat)
}

/// The body of a chunked transfer.
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(b.len());
    loop {
        let line = find(b, b"\r\n")?;
        let size_text = std::str::from_utf8(&b[..line]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        b = &b[line + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

/// GET `path_and_query` (after the URL's prefix): (status, body).
pub async fn get(
    url: &Url,
    path_and_query: &str,
    after: Duration,
) -> Result<(u16, Vec<u8>), HttpError> {
    let addr = url.addr();
    let io = |e: std::io::Error| HttpError::Io {
        addr: addr.clone(),
        reason: e.to_string(),
    };
    let run = async {
        let mut s = TcpStream::connect(&addr).await.map_err(io)?;
        let req = format!(
            "GET {}{path_and_query} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
            url.prefix
        );
        s.write_all(req.as_bytes()).await.map_err(io)?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.map_err(io)?;
        Ok::<_, HttpError>(buf)
    };
    let buf = tokio::time::timeout(after, run)
        .await
        .map_err(|_| HttpError::Timeout {
            addr: addr.clone(),
            after,
        })??;
    let bad = |reason: &str| HttpError::Malformed {
        addr: addr.clone(),
        reason: reason.to_string(),
    };
    let end = find(&buf, b"\r\n\r\n").ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| bad("headers not text"))?;
    let status: u16 = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_ascii_lowercase())
        })
    };
    let raw = &buf[end + 4..];
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        dechunk(raw).ok_or_else(|| bad("broken chunked body"))?
    } else if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        raw.get(..n)
            .ok_or_else(|| bad("body shorter than Content-Length"))?
            .to_vec()
    } else {
        raw.to_vec()
    };
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_queries_and_chunked_bodies() {
        assert_eq!(
            Url::parse("http://127.0.0.1:9090/prom/").expect("url"),
            Url {
                host: "127.0.0.1".into(),
                port: 9090,
                prefix: "/prom".into()
            }
        );
        assert_eq!(Url::parse("http://h").expect("url").port, 80);
        assert!(Url::parse("https://h:1").is_err());
        assert!(Url::parse("http://:1").is_err());
        assert_eq!(encode("a{b=\"c\"}[5s]"), "a%7Bb%3D%22c%22%7D%5B5s%5D");
        assert_eq!(
            dechunk(b"4\r\nwi\r\n\r\n3;x=1\r\nkip\r\n0\r\n\r\n").as_deref(),
            Some(&b"wi\r\nkip"[..])
        );
        assert_eq!(dechunk(b"4\r\nwi"), None);
    }

    #[test]
    fn a_get_reads_status_and_body_from_a_real_socket() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let port = l.local_addr().expect("addr").port();
            let server = tokio::spawn(async move {
                let (mut s, _) = l.accept().await.expect("accept");
                let mut req = vec![0u8; 1024];
                let n = s.read(&mut req).await.expect("read");
                let line = String::from_utf8_lossy(&req[..n])
                    .lines()
                    .next()
                    .map(str::to_string);
                s.write_all(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                )
                .await
                .expect("write");
                line
            });
            let url = Url::parse(&format!("http://127.0.0.1:{port}")).expect("url");
            let (code, body) = get(&url, "/api/v1/query?query=up", Duration::from_secs(5))
                .await
                .expect("get");
            assert_eq!((code, body.as_slice()), (200, &b"{}"[..]));
            let line = server.await.expect("server");
            assert_eq!(line.as_deref(), Some("GET /api/v1/query?query=up HTTP/1.1"));
            let closed = get(&url, "/", Duration::from_secs(5))
                .await
                .expect_err("nobody listens");
            assert!(matches!(closed, HttpError::Io { .. }), "{closed}");
        });
    }
}
