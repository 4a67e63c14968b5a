//! A real browser for the page's tests: Debian's headless Chromium driven through chromedriver's
//! WebDriver HTTP API by a minimal client (std TcpStream, serde_json). chromedriver and the
//! Chromium it starts are killed by PID when the guard drops, also on failure.
//!
//! Without chromium and chromedriver (scripts/setup.sh installs them) a test prints SKIPPED,
//! unless WEFT_REQUIRE_BROWSER=1 (scripts/test.sh sets it) makes that a failure.
#![allow(dead_code)] // each test uses its own part of it

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// One HTTP/1.1 request: status and body. The body ends at its Content-Length, at the last
/// chunk, or where the server closes: chromedriver answers `Connection: close` but keeps the
/// socket open, so reading to the end would wait for the read timeout on every command.
pub fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).ok();
    let data = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{data}",
        data.len()
    );
    s.write_all(req.as_bytes()).expect("request");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let mut head: Option<(usize, String)> = None;
    loop {
        if let Some((split, h)) = &head {
            let got = &buf[split + 4..];
            let done = match content_length(h) {
                Some(n) => got.len() >= n,
                None => is_chunked(h) && got.ends_with(b"0\r\n\r\n"),
            };
            if done {
                break;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if head.is_none()
            && let Some(split) = buf.windows(4).position(|w| w == b"\r\n\r\n")
        {
            head = Some((
                split,
                String::from_utf8_lossy(&buf[..split]).to_ascii_lowercase(),
            ));
        }
    }
    let (split, head) = head.unwrap_or((buf.len(), String::new()));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut body = buf.get(split + 4..).unwrap_or_default().to_vec();
    if is_chunked(&head) {
        body = dechunk(&body);
    } else if let Some(n) = content_length(&head) {
        body.truncate(n);
    }
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Content-Length of a lower-cased response head.
fn content_length(head: &str) -> Option<usize> {
    head.lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
}

fn is_chunked(head: &str) -> bool {
    head.lines()
        .find_map(|l| l.strip_prefix("transfer-encoding:"))
        .is_some_and(|v| v.contains("chunked"))
}

fn dechunk(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(nl) = b[i..].windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&b[i..i + nl])
                .split(';')
                .next()
                .unwrap_or("0")
                .trim(),
            16,
        )
        .unwrap_or(0);
        i += nl + 2;
        if size == 0 || i + size > b.len() {
            break;
        }
        out.extend_from_slice(&b[i..i + size]);
        i += size + 2;
    }
    out
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Base64 (standard alphabet) to bytes, for screenshots.
fn unbase64(s: &str) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let digits: Vec<u32> = s.bytes().filter_map(val).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for c in digits.chunks(4) {
        let n = c
            .iter()
            .enumerate()
            .fold(0u32, |a, (i, d)| a | d << (18 - 6 * i));
        out.push((n >> 16) as u8);
        if c.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if c.len() > 3 {
            out.push(n as u8);
        }
    }
    out
}

/// Chromium and chromedriver, one session.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    profile: PathBuf,
}

impl Browser {
    /// Whether chromium and chromedriver are installed; if not, a loud SKIPPED line (a failure
    /// with WEFT_REQUIRE_BROWSER=1). For a test to ask before it builds what the browser loads.
    pub fn available(test: &str) -> bool {
        if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
            return true;
        }
        let why = "chromium and chromium-driver not installed (scripts/setup.sh)";
        if std::env::var_os("WEFT_REQUIRE_BROWSER").is_some_and(|v| v == "1") {
            panic!("WEFT_REQUIRE_BROWSER=1 but {why}");
        }
        println!("SKIPPED: {test}: {why}");
        eprintln!("SKIPPED: {test}: {why}");
        false
    }

    /// A headless Chromium session, or `None` after a loud SKIPPED when the browser is missing.
    pub fn start(test: &str, dir: &Path) -> Option<Browser> {
        if !Browser::available(test) {
            return None;
        }
        let port = free_port();
        let log = std::fs::File::create(dir.join("chromedriver.log")).expect("log");
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("chromedriver");
        let profile = dir.join("chromium-profile");
        std::fs::create_dir_all(&profile).expect("profile dir");
        let mut b = Browser {
            driver,
            port,
            session: String::new(),
            profile,
        };
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "chromedriver did not listen"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Without the background-networking flags Chromium's own connections are refused by
        // the closed network and slow it down.
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1500,950",
                format!("--user-data-dir={}", b.profile.display()),
            ]}
        }}});
        let (code, body) = http(port, "POST", "/session", Some(&caps));
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        assert_eq!(code, 200, "new session: {body}");
        b.session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Some(b)
    }

    fn cmd(&self, method: &str, what: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}/{what}", self.session);
        let (code, text) = http(self.port, method, &path, body.as_ref());
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        assert_eq!(code, 200, "{method} {what}: {text}");
        v["value"].clone()
    }

    pub fn goto(&self, url: &str) {
        self.cmd("POST", "url", Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body; `return` its answer) in the page.
    pub fn eval(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Polls `script` every 200 ms until it returns something truthy (how long that took) or
    /// `deadline` passes (`None`).
    pub fn wait(&self, deadline: Duration, script: &str) -> Option<Duration> {
        let t0 = Instant::now();
        while t0.elapsed() < deadline {
            let v = self.eval(script);
            let truthy = match &v {
                Value::Bool(b) => *b,
                Value::Null => false,
                Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return Some(t0.elapsed());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        None
    }

    /// A PNG of the window.
    pub fn screenshot(&self, path: &Path) {
        let v = self.cmd("GET", "screenshot", None);
        let png = unbase64(v.as_str().unwrap_or_default());
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, png).expect("screenshot");
    }

    /// PIDs of Chromium processes started with this session's profile directory.
    fn chromium_pids(&self) -> Vec<u32> {
        let marker = format!("--user-data-dir={}", self.profile.display());
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).split('\0').any(|a| a == marker))
                    .unwrap_or(false)
            })
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = http(
                self.port,
                "DELETE",
                &format!("/session/{}", self.session),
                None,
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // Whatever of this session's Chromium survived its driver, by PID.
        for pid in self.chromium_pids() {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
