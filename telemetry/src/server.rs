//! The `/metrics` endpoint: axum (already in the dependency tree through tonic) on one
//! listener, serving the registry's OpenMetrics text at `/metrics` (and `/` for a browser).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;

/// OpenMetrics text, as Prometheus asks for it.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("metrics address {addr}: {reason}")]
    Address { addr: String, reason: String },
    #[error("listening for metrics on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

/// A running metrics server; dropping it stops it.
#[derive(Debug)]
pub struct MetricsServer {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn metrics(State(reg): State<Arc<Registry>>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        crate::metrics::encode(&reg),
    )
}

/// `HOST:PORT` (port 0: any free port); `:PORT` alone listens on every address.
pub fn parse_addr(addr: &str) -> Result<SocketAddr, ServeError> {
    let a = addr.trim();
    let full = if a.starts_with(':') {
        format!("0.0.0.0{a}")
    } else {
        a.to_string()
    };
    full.parse().map_err(|e| ServeError::Address {
        addr: addr.to_string(),
        reason: format!("{e} (expected HOST:PORT, e.g. 127.0.0.1:9464)"),
    })
}

/// Binds `addr` and serves `registry` until the returned server is dropped. Must be called
/// inside a tokio runtime.
pub async fn serve(addr: &str, registry: Arc<Registry>) -> Result<MetricsServer, ServeError> {
    let sa = parse_addr(addr)?;
    let listener = tokio::net::TcpListener::bind(sa)
        .await
        .map_err(|source| ServeError::Bind {
            addr: addr.to_string(),
            source,
        })?;
    let local = listener.local_addr().unwrap_or(sa);
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(metrics))
        .with_state(registry);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "metrics server stopped");
        }
    });
    tracing::info!(addr = %local, "serving metrics at /metrics");
    Ok(MetricsServer { addr: local, task })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn serves_openmetrics_text_over_http() {
        let m = crate::PluginMetrics::new("leaf1");
        m.session();
        let srv = serve("127.0.0.1:0", m.registry()).await.expect("serve");
        let mut s = tokio::net::TcpStream::connect(srv.addr)
            .await
            .expect("connect");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("request");
        let mut resp = String::new();
        s.read_to_string(&mut resp).await.expect("response");
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        assert!(
            resp.to_ascii_lowercase()
                .contains("content-type: application/openmetrics-text"),
            "{resp}"
        );
        assert!(
            resp.contains(r#"weft_plugin_sessions_total{switch="leaf1"} 1"#),
            "{resp}"
        );
    }

    #[test]
    fn addresses_are_host_port() {
        assert!(parse_addr("127.0.0.1:9464").is_ok());
        assert_eq!(parse_addr(":9464").expect("any address").port(), 9464);
        assert!(parse_addr("localhost").is_err());
    }
}
