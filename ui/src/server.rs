//! The page's HTTP server: the embedded page, its JSON, and server-sent events carrying one
//! frame per read. GET only (any other method is refused by the router: nothing on the page
//! acts on the fabric). Reads go on in one task; each frame is computed on a blocking thread
//! and sent to every open page as one `frame` event.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use weft_topology::Topology;

use crate::page::Page;
use crate::run::{RunSeen, reconvergence_event};
use crate::source::Source;

const INDEX: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// A `--listen` or `--ui` value that is not an address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected HOST:PORT with HOST an IP address or localhost (e.g. 127.0.0.1:8088)")]
pub struct ListenError(pub String);

/// `127.0.0.1:8088`, `[::1]:8088`, `localhost:8088`, `0.0.0.0:8088` (port 0: any free port).
pub fn parse_listen(s: &str) -> Result<SocketAddr, ListenError> {
    let t = s.trim();
    if let Some(port) = t.strip_prefix("localhost:") {
        return port
            .parse::<u16>()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p)))
            .map_err(|_| ListenError(s.to_string()));
    }
    t.parse().map_err(|_| ListenError(s.to_string()))
}

#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// The cause is in the message, not a `source`: printed once, with what to do.
    #[error("listening on {addr}: {error}{}", hint(error))]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

fn hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            " (another process listens there: choose another port with --listen)"
        }
        std::io::ErrorKind::AddrNotAvailable => " (no interface of this host has that address)",
        std::io::ErrorKind::PermissionDenied => " (ports below 1024 need privileges)",
        _ => "",
    }
}

/// How the page reads and remembers.
#[derive(Debug, Clone)]
pub struct UiOptions {
    pub listen: SocketAddr,
    /// Between reads.
    pub interval: Duration,
    /// The diagnosis window.
    pub window: Duration,
    /// How far back the drill-down charts go.
    pub history: Duration,
    /// `weft run`'s status file.
    pub status_file: PathBuf,
}

struct Shared {
    topo: Arc<Topology>,
    page: Mutex<Page>,
    layout: String,
    frames: tokio::sync::watch::Sender<Arc<str>>,
}

impl Shared {
    fn page(&self) -> std::sync::MutexGuard<'_, Page> {
        match self.page.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

/// A running page; dropping it stops the server and the reads.
pub struct UiServer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for UiServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// What `weft run` tells the page as it happens (its reconvergences, exactly, rather than
/// the last one of its status file).
#[derive(Clone)]
pub struct UiHook(Arc<Shared>);

impl UiHook {
    pub fn reconverged(&self, r: &weft_reconcile::core::Reconvergence) {
        self.0
            .page()
            .push_event(reconvergence_event(weft_observe::now_ms(), r, 0));
    }
}

impl UiServer {
    /// The hook for `weft run`; from then on reconvergences come from it only.
    pub fn hook(&self) -> UiHook {
        self.shared.page().live_reconvergences = true;
        UiHook(self.shared.clone())
    }
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

fn json_response(body: String) -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}

async fn frame(State(s): State<Arc<Shared>>) -> Response {
    json_response(s.frames.borrow().to_string())
}

async fn events(
    State(s): State<Arc<Shared>>,
) -> Sse<impl futures::Stream<Item = Result<Event, Infallible>>> {
    let rx = s.frames.subscribe();
    // The current frame first, then each new one.
    let stream = futures::stream::unfold((rx, true), |(mut rx, first)| async move {
        if !first {
            rx.changed().await.ok()?;
        }
        let data = rx.borrow_and_update().clone();
        Some((
            Ok(Event::default().event("frame").data(&*data)),
            (rx, false),
        ))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

async fn link(State(s): State<Arc<Shared>>, Path(i): Path<usize>) -> Response {
    match crate::drill::link(&s.page(), &s.topo, i) {
        Some(v) => json_response(v.to_string()),
        None => (StatusCode::NOT_FOUND, "no such link").into_response(),
    }
}

async fn switch(State(s): State<Arc<Shared>>, Path(i): Path<usize>) -> Response {
    match crate::drill::switch(&s.page(), &s.topo, i) {
        Some(v) => json_response(v.to_string()),
        None => (StatusCode::NOT_FOUND, "no such switch").into_response(),
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route(
            "/api/layout",
            get(|s: State<Arc<Shared>>| async move { json_response(s.layout.clone()) }),
        )
        .route("/api/frame", get(frame))
        .route("/api/events", get(events))
        .route("/api/link/{i}", get(link))
        .route("/api/switch/{i}", get(switch))
        .with_state(shared)
}

/// Reads every `interval`, one frame each. The rules run with every frame unless they take
/// more than half an interval; then every few frames, so reads keep their pace.
async fn poll(shared: Arc<Shared>, source: Box<dyn Source>, opts: UiOptions) {
    let mut diag_every = 1u64;
    let mut n = 0u64;
    let mut next = tokio::time::Instant::now();
    loop {
        let reading = source.read(&shared.topo).await;
        let run = RunSeen::of(weft_observe::status::read_daemon_status(&opts.status_file));
        let s = shared.clone();
        let diagnose = n.is_multiple_of(diag_every);
        let interval = opts.interval;
        let done = tokio::task::spawn_blocking(move || {
            let mut page = s.page();
            let t0 = Instant::now();
            let frame = page.update(&reading, &run, diagnose);
            let took = t0.elapsed();
            (serde_json::to_string(&frame).unwrap_or_default(), took)
        })
        .await;
        if let Ok((json, took)) = done {
            if diagnose {
                // Rules and frame together may take half an interval at most.
                diag_every = (took.as_secs_f64() * 2.0 / interval.as_secs_f64())
                    .ceil()
                    .max(1.0) as u64;
            }
            shared.frames.send_replace(Arc::from(json));
        }
        n += 1;
        next += opts.interval;
        let now = tokio::time::Instant::now();
        if next < now {
            next = now;
        }
        tokio::time::sleep_until(next).await;
    }
}

/// Binds `opts.listen` and serves the page of `t` read from `source` until the returned server
/// is dropped. Must be called inside a tokio runtime.
pub async fn serve(
    t: Arc<Topology>,
    source: Box<dyn Source>,
    opts: UiOptions,
) -> Result<UiServer, UiError> {
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|error| UiError::Bind {
            addr: opts.listen,
            error,
        })?;
    let addr = listener.local_addr().unwrap_or(opts.listen);
    let page = Page::new(
        &t,
        source.info(),
        opts.window.as_millis() as u64,
        opts.history.as_millis() as u64,
    );
    let layout = serde_json::to_string(&page.layout).unwrap_or_default();
    let (frames, _) = tokio::sync::watch::channel(Arc::from("null"));
    let shared = Arc::new(Shared {
        topo: t,
        page: Mutex::new(page),
        layout,
        frames,
    });
    let app = router(shared.clone());
    let serve = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "fabric page server stopped");
        }
    });
    let reads = tokio::spawn(poll(shared.clone(), source, opts));
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the fabric page is served beyond this host: it is read-only and has no authentication");
    }
    tracing::info!(url = %format!("http://{addr}/"), "serving the fabric page");
    Ok(UiServer {
        addr,
        shared,
        tasks: vec![serve, reads],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_are_ip_port_or_localhost_port() {
        assert_eq!(
            parse_listen("127.0.0.1:8088"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 8088)))
        );
        assert_eq!(
            parse_listen("localhost:0"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 0)))
        );
        assert!(parse_listen("[::1]:8088").is_ok());
        for bad in ["8088", "127.0.0.1", "example.com:80", "127.0.0.1:99999", ""] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
    }
}
