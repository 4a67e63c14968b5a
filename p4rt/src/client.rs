//! The P4Runtime client: one stream channel per device with arbitration, pipeline push,
//! batched and pipelined writes, reads, packet I/O.
//!
//! ```text
//!   Client (clone = same connection)
//!     │ unary RPCs (Write, Read, Set/GetForwardingPipelineConfig, Capabilities)
//!     │      └─ tonic Channel (reconnects by itself)
//!     │ send_packet ──► current stream sender ─┐
//!     │                                        ▼
//!   stream task: open StreamChannel, send MasterArbitrationUpdate, read responses
//!     ├─ arbitration → role watch (Primary / Backup / Disconnected) + events
//!     ├─ packet-in   → events
//!     └─ stream ends → Disconnected (+ LostPrimary), retry with jittered exponential
//!                      backoff (weft-retry), Reconnected once the switch answers again
//! ```
//!
//! After a switch restart its pipeline and tables are gone; a caller watching for
//! [`Event::Reconnected`] pushes the pipeline again ([`Client::set_pipeline`] compares
//! cookies) and replays its entries.

use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use p4runtime_proto::google::rpc::Status as RpcStatus;
use p4runtime_proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use p4runtime_proto::p4::v1::{
    CapabilitiesRequest, Entity, ForwardingPipelineConfig, GetForwardingPipelineConfigRequest,
    MasterArbitrationUpdate, PacketIn, PacketOut, ReadRequest, Role,
    SetForwardingPipelineConfigRequest, StreamError, StreamMessageRequest, Uint128, Update,
    WriteRequest, get_forwarding_pipeline_config_request, set_forwarding_pipeline_config_request,
    stream_message_request, stream_message_response, update, write_request,
};
use prost::Message;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tracing::{debug, info, warn};
use weft_retry::RetryPolicy;

use crate::canon::{canonicalize_entity, describe_entity};
use crate::error::{Error, Result, UpdateError, WriteErrors};
use crate::p4info::P4Info;
use crate::pipeline::PipelineConfig;

/// TLS settings. Without a client certificate it is server-authenticated TLS; with one, mutual TLS.
#[derive(Debug, Clone, Default)]
pub struct TlsConfig {
    /// PEM of the CA that signed the switch's certificate.
    pub ca_cert_pem: Vec<u8>,
    /// PEM certificate and key of this client (mutual TLS).
    pub client_identity: Option<(Vec<u8>, Vec<u8>)>,
    /// Name to verify in the switch's certificate, if not the endpoint host.
    pub domain: Option<String>,
}

impl TlsConfig {
    pub fn from_files(
        ca_cert: impl AsRef<Path>,
        client: Option<(&Path, &Path)>,
        domain: Option<String>,
    ) -> Result<Self> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| Error::File {
                path: p.display().to_string(),
                source,
            })
        };
        let client_identity = match client {
            Some((cert, key)) => Some((read(cert)?, read(key)?)),
            None => None,
        };
        Ok(TlsConfig {
            ca_cert_pem: read(ca_cert.as_ref())?,
            client_identity,
            domain,
        })
    }
}

/// How writes are split and pipelined.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Updates per WriteRequest.
    pub max_batch_updates: usize,
    /// Encoded bytes per WriteRequest (well below the switch's 4 MiB receive limit).
    pub max_batch_bytes: usize,
    /// WriteRequests in flight at once; BMv2 takes ~1.5× more entries/s with 8 than with 1.
    pub max_in_flight: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            max_batch_updates: 1000,
            max_batch_bytes: 1 << 20,
            max_in_flight: 8,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `host:port`, or a URI with `http://` / `https://`.
    pub endpoint: String,
    pub device_id: u64,
    /// Higher wins the arbitration; must differ between controllers of one device.
    pub election_id: u128,
    /// Role name; `None` is the default (full-access) role.
    pub role: Option<String>,
    pub tls: Option<TlsConfig>,
    pub connect_timeout: Duration,
    /// Deadline of each unary RPC.
    pub rpc_timeout: Duration,
    /// gRPC message size limit both ways: a 100k-entry read is one ~4.6 MB response,
    /// above gRPC's 4 MiB default.
    pub max_message_size: usize,
    /// Bounds of the stream's reconnect backoff ([`RetryPolicy::doubling`]; each wait is
    /// jittered up to twice its base).
    pub reconnect_initial: Duration,
    pub reconnect_max: Duration,
    pub write: WriteOptions,
    /// Events buffered per subscriber before it lags.
    pub event_capacity: usize,
}

impl ClientConfig {
    pub fn new(endpoint: impl Into<String>, device_id: u64, election_id: u128) -> Self {
        ClientConfig {
            endpoint: endpoint.into(),
            device_id,
            election_id,
            role: None,
            tls: None,
            connect_timeout: Duration::from_secs(5),
            rpc_timeout: Duration::from_secs(120),
            max_message_size: 256 << 20,
            reconnect_initial: Duration::from_millis(100),
            reconnect_max: Duration::from_secs(5),
            write: WriteOptions::default(),
            event_capacity: 4096,
        }
    }

    pub fn with_tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    pub fn with_role(mut self, role: impl Into<String>) -> Self {
        self.role = Some(role.into());
        self
    }
}

/// Where this client stands in the device's arbitration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mastership {
    /// No stream channel to the switch (yet, or any more).
    Disconnected,
    /// Connected; another controller (`primary_election_id`, 0 if none) is primary.
    Backup {
        primary_election_id: u128,
    },
    Primary,
}

/// What the stream channel reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The stream channel is up for the first time.
    Connected,
    BecamePrimary,
    LostPrimary {
        primary_election_id: u128,
    },
    Disconnected {
        reason: String,
    },
    /// The stream channel is up again after a disconnection; the switch may have restarted.
    Reconnected,
    PacketIn(PacketIn),
    /// The switch reported a stream error (e.g. a rejected packet-out).
    StreamError(StreamError),
    /// This subscriber fell behind and missed `n` events.
    Lagged(u64),
}

/// A subscription to [`Event`]s.
#[derive(Debug)]
pub struct Events {
    rx: broadcast::Receiver<Event>,
}

impl Events {
    /// The next event; `None` once the client is gone.
    pub async fn next(&mut self) -> Option<Event> {
        match self.rx.recv().await {
            Ok(e) => Some(e),
            Err(broadcast::error::RecvError::Lagged(n)) => Some(Event::Lagged(n)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

/// Whether [`Client::set_pipeline`] pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipelinePush {
    Pushed,
    /// The switch already runs a pipeline with our cookie.
    Unchanged,
}

/// State shared with the stream task (which must not keep the client alive).
struct StreamState {
    mastership: watch::Sender<Mastership>,
    events: broadcast::Sender<Event>,
    /// Sender into the current stream channel, while one is open.
    current: Mutex<Option<mpsc::Sender<StreamMessageRequest>>>,
}

struct Shared {
    cfg: ClientConfig,
    rpc: P4RuntimeClient<Channel>,
    stream: Arc<StreamState>,
    p4info: RwLock<Option<P4Info>>,
    /// The stream channel's task; none for a write-only client.
    task: Option<JoinHandle<()>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// A P4Runtime client for one device. Cloning shares the connection; the stream channel
/// closes when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.shared.cfg.endpoint)
            .field("device_id", &self.shared.cfg.device_id)
            .field("election_id", &self.shared.cfg.election_id)
            .field("mastership", &self.mastership())
            .finish()
    }
}

fn endpoint(cfg: &ClientConfig) -> Result<Endpoint> {
    let uri = if cfg.endpoint.contains("://") {
        cfg.endpoint.clone()
    } else if cfg.tls.is_some() {
        format!("https://{}", cfg.endpoint)
    } else {
        format!("http://{}", cfg.endpoint)
    };
    let mut ep = Endpoint::from_shared(uri.clone())
        .map_err(|e| Error::Config(format!("endpoint {uri}: {e}")))?
        .connect_timeout(cfg.connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(20))
        .keep_alive_while_idle(true);
    if let Some(tls) = &cfg.tls {
        let mut t = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&tls.ca_cert_pem));
        if let Some((cert, key)) = &tls.client_identity {
            t = t.identity(Identity::from_pem(cert, key));
        }
        if let Some(d) = &tls.domain {
            t = t.domain_name(d.clone());
        }
        ep = ep
            .tls_config(t)
            .map_err(|e| Error::Config(format!("TLS: {e}")))?;
    }
    Ok(ep)
}

impl Client {
    /// Starts the client: the stream channel is opened in the background and retried with
    /// backoff until the switch answers, so this only fails on a bad configuration. Use
    /// [`Client::wait_primary`] or [`Client::events`] to learn when it is up.
    pub fn connect(cfg: ClientConfig) -> Result<Client> {
        Client::start(cfg, true)
    }

    /// A second connection to a switch this process is already primary on, for writes only:
    /// its own HTTP/2 connection (so a write here never queues behind a large batch or read on
    /// the main one) and no stream channel (the switch checks a write's election id against the
    /// primary's, not the connection it came on). It must run on the runtime that uses it.
    pub fn connect_write_only(cfg: ClientConfig) -> Result<Client> {
        Client::start(cfg, false)
    }

    fn start(cfg: ClientConfig, stream_channel: bool) -> Result<Client> {
        if cfg.write.max_in_flight == 0 || cfg.write.max_batch_updates == 0 {
            return Err(Error::Config(
                "write batch size and in-flight count must be > 0".into(),
            ));
        }
        let channel = endpoint(&cfg)?.connect_lazy();
        let rpc = P4RuntimeClient::new(channel)
            .max_decoding_message_size(cfg.max_message_size)
            .max_encoding_message_size(cfg.max_message_size);
        let (mastership, _) = watch::channel(Mastership::Disconnected);
        let (events, _) = broadcast::channel(cfg.event_capacity.max(16));
        let stream = Arc::new(StreamState {
            mastership,
            events,
            current: Mutex::new(None),
        });
        let task = stream_channel
            .then(|| tokio::spawn(stream_task(cfg.clone(), rpc.clone(), stream.clone())));
        Ok(Client {
            shared: Arc::new(Shared {
                cfg,
                rpc,
                stream,
                p4info: RwLock::new(None),
                task,
            }),
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.shared.cfg
    }

    pub fn mastership(&self) -> Mastership {
        *self.shared.stream.mastership.borrow()
    }

    pub fn is_primary(&self) -> bool {
        self.mastership() == Mastership::Primary
    }

    /// A receiver that sees every mastership change.
    pub fn watch_mastership(&self) -> watch::Receiver<Mastership> {
        self.shared.stream.mastership.subscribe()
    }

    /// Waits until this client is primary.
    pub async fn wait_primary(&self, timeout: Duration) -> Result<()> {
        let mut rx = self.watch_mastership();
        match tokio::time::timeout(timeout, rx.wait_for(|m| *m == Mastership::Primary)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::Timeout(timeout, "primary")),
        }
    }

    /// Waits until the stream channel is up (primary or backup).
    pub async fn wait_connected(&self, timeout: Duration) -> Result<Mastership> {
        let mut rx = self.watch_mastership();
        match tokio::time::timeout(timeout, rx.wait_for(|m| *m != Mastership::Disconnected)).await {
            Ok(Ok(m)) => Ok(*m),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::Timeout(timeout, "stream channel")),
        }
    }

    /// Subscribes to events from now on.
    pub fn events(&self) -> Events {
        Events {
            rx: self.shared.stream.events.subscribe(),
        }
    }

    /// The P4Info used to name entries in errors (set by [`Client::set_pipeline`]).
    pub fn p4info(&self) -> Option<P4Info> {
        self.shared.p4info.read().ok().and_then(|g| g.clone())
    }

    pub fn set_p4info(&self, info: P4Info) {
        if let Ok(mut g) = self.shared.p4info.write() {
            *g = Some(info);
        }
    }

    fn election_id(&self) -> Option<Uint128> {
        Some(self.shared.cfg.election_id.into())
    }

    fn role(&self) -> String {
        self.shared.cfg.role.clone().unwrap_or_default()
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.set_timeout(self.shared.cfg.rpc_timeout);
        r
    }

    /// The P4Runtime API version the switch implements.
    pub async fn capabilities(&self) -> Result<String> {
        let mut rpc = self.shared.rpc.clone();
        let resp = rpc
            .capabilities(self.request(CapabilitiesRequest {
                device_id: self.shared.cfg.device_id,
            }))
            .await
            .map_err(|s| Error::from_status("Capabilities", &s))?;
        Ok(resp.into_inner().p4runtime_api_version)
    }

    pub async fn get_pipeline(
        &self,
        response_type: get_forwarding_pipeline_config_request::ResponseType,
    ) -> Result<Option<ForwardingPipelineConfig>> {
        let mut rpc = self.shared.rpc.clone();
        let req = GetForwardingPipelineConfigRequest {
            device_id: self.shared.cfg.device_id,
            response_type: response_type as i32,
        };
        match rpc.get_forwarding_pipeline_config(self.request(req)).await {
            Ok(r) => Ok(r.into_inner().config),
            // PI answers FAILED_PRECONDITION while no pipeline is set.
            Err(s) if s.code() == Code::FailedPrecondition => Ok(None),
            Err(s) => Err(Error::from_status("GetForwardingPipelineConfig", &s)),
        }
    }

    /// The cookie of the switch's pipeline; `None` when it has none (or no cookie).
    pub async fn pipeline_cookie(&self) -> Result<Option<u64>> {
        let cfg = self
            .get_pipeline(get_forwarding_pipeline_config_request::ResponseType::CookieOnly)
            .await?;
        Ok(cfg.and_then(|c| c.cookie).map(|c| c.cookie))
    }

    /// Pushes the pipeline with VERIFY_AND_COMMIT unless the switch already has our cookie.
    /// Either way the P4Info becomes the one used to name entries in errors.
    pub async fn set_pipeline(&self, pipeline: &PipelineConfig) -> Result<PipelinePush> {
        self.set_p4info(pipeline.p4info.clone());
        if self.pipeline_cookie().await? == Some(pipeline.cookie) {
            debug!(cookie = pipeline.cookie, "pipeline unchanged, not pushed");
            return Ok(PipelinePush::Unchanged);
        }
        self.force_set_pipeline(pipeline).await?;
        Ok(PipelinePush::Pushed)
    }

    /// Pushes the pipeline with VERIFY_AND_COMMIT (BMv2 then starts with empty tables).
    pub async fn force_set_pipeline(&self, pipeline: &PipelineConfig) -> Result<()> {
        self.set_p4info(pipeline.p4info.clone());
        let mut rpc = self.shared.rpc.clone();
        #[allow(deprecated)]
        let req = SetForwardingPipelineConfigRequest {
            device_id: self.shared.cfg.device_id,
            role_id: 0,
            role: self.role(),
            election_id: self.election_id(),
            action: set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
            config: Some(pipeline.to_proto()),
        };
        rpc.set_forwarding_pipeline_config(self.request(req))
            .await
            .map_err(|s| Error::from_status("SetForwardingPipelineConfig", &s))?;
        info!(
            cookie = pipeline.cookie,
            device_id = self.shared.cfg.device_id,
            "pipeline pushed"
        );
        Ok(())
    }

    /// Writes `updates` in batches (by count and size) with several WriteRequests in flight,
    /// CONTINUE_ON_ERROR. Updates in different batches may apply in any order: write
    /// dependencies (members before groups before routes) in separate calls.
    ///
    /// Errors: [`Error::Write`] lists each refused update (named from the P4Info); an RPC-level
    /// failure of a whole batch (not primary, switch gone) is returned as such, in which case
    /// other batches may or may not have been applied.
    pub async fn write(&self, updates: &[Update]) -> Result<()> {
        self.write_with(updates, &self.shared.cfg.write).await
    }

    pub async fn write_with(&self, updates: &[Update], opts: &WriteOptions) -> Result<()> {
        if updates.is_empty() {
            return Ok(());
        }
        let batches = split_batches(updates, opts);
        let results: Vec<(usize, std::result::Result<(), tonic::Status>)> =
            futures::stream::iter(batches)
                .map(|(start, end)| {
                    let mut rpc = self.shared.rpc.clone();
                    #[allow(deprecated)]
                    let req = WriteRequest {
                        device_id: self.shared.cfg.device_id,
                        role_id: 0,
                        role: self.role(),
                        election_id: self.election_id(),
                        updates: updates[start..end].to_vec(),
                        atomicity: write_request::Atomicity::ContinueOnError as i32,
                    };
                    let req = self.request(req);
                    async move { (start, rpc.write(req).await.map(|_| ())) }
                })
                .buffer_unordered(opts.max_in_flight.max(1))
                .collect()
                .await;

        let info = self.p4info();
        let mut failed = Vec::new();
        let mut rpc_error: Option<Error> = None;
        let mut batches_sorted = results;
        batches_sorted.sort_by_key(|(start, _)| *start);
        for (start, res) in batches_sorted {
            let Err(status) = res else { continue };
            let end = batch_end(updates, start, opts);
            match per_update_errors(&status, end - start) {
                Some(errors) => {
                    for (i, e) in errors.into_iter().enumerate() {
                        let Some(e) = e else { continue };
                        let idx = start + i;
                        failed.push(update_error(info.as_ref(), idx, &updates[idx], e));
                    }
                }
                None => {
                    warn!(code = ?status.code(), message = status.message(), "write batch failed");
                    rpc_error.get_or_insert_with(|| Error::from_status("Write", &status));
                }
            }
        }
        if let Some(e) = rpc_error {
            return Err(e);
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

    /// Reads entities (wildcards allowed: zero ids/fields match everything). Results are
    /// canonicalised ([`crate::canonicalize_entity`]).
    pub async fn read(&self, entities: Vec<Entity>) -> Result<Vec<Entity>> {
        let mut rpc = self.shared.rpc.clone();
        let req = ReadRequest {
            device_id: self.shared.cfg.device_id,
            role: self.role(),
            entities,
        };
        let mut stream = rpc
            .read(self.request(req))
            .await
            .map_err(|s| Error::from_status("Read", &s))?
            .into_inner();
        let mut out = Vec::new();
        while let Some(resp) = stream
            .message()
            .await
            .map_err(|s| Error::from_status("Read", &s))?
        {
            out.reserve(resp.entities.len());
            for mut e in resp.entities {
                canonicalize_entity(&mut e);
                out.push(e);
            }
        }
        Ok(out)
    }

    /// Sends a packet-out on the stream channel.
    pub async fn send_packet(&self, packet: PacketOut) -> Result<()> {
        let tx = self
            .shared
            .stream
            .current
            .lock()
            .ok()
            .and_then(|g| g.clone())
            .ok_or(Error::Disconnected)?;
        tx.send(StreamMessageRequest {
            update: Some(stream_message_request::Update::Packet(packet)),
        })
        .await
        .map_err(|_| Error::Disconnected)
    }

    /// Closes the stream channel now (other clones stop working too).
    pub fn close(&self) {
        if let Some(t) = &self.shared.task {
            t.abort();
        }
        if let Ok(mut g) = self.shared.stream.current.lock() {
            *g = None;
        }
        self.shared
            .stream
            .mastership
            .send_replace(Mastership::Disconnected);
    }
}

/// Batch boundaries as (start, end) indices into `updates`.
fn split_batches(updates: &[Update], opts: &WriteOptions) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < updates.len() {
        let end = batch_end(updates, start, opts);
        out.push((start, end));
        start = end;
    }
    out
}

fn batch_end(updates: &[Update], start: usize, opts: &WriteOptions) -> usize {
    let mut bytes = 0usize;
    let mut end = start;
    while end < updates.len() && end - start < opts.max_batch_updates {
        // Tag + length prefix of each repeated element: at most 6 bytes.
        let size = updates[end].encoded_len() + 6;
        if end > start && bytes + size > opts.max_batch_bytes {
            break;
        }
        bytes += size;
        end += 1;
    }
    end
}

/// Per-update errors from a failed Write: one `p4.v1.Error` per update in the status details
/// (`None` for the ones that succeeded). `None` overall when the status has no such details,
/// i.e. the whole request failed.
fn per_update_errors(
    status: &tonic::Status,
    n: usize,
) -> Option<Vec<Option<p4runtime_proto::p4::v1::Error>>> {
    let details = status.details();
    if details.is_empty() {
        return None;
    }
    let rpc = RpcStatus::decode(details).ok()?;
    if rpc.details.len() != n {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for any in rpc.details {
        if !any.type_url.ends_with("p4.v1.Error") {
            return None;
        }
        let e = p4runtime_proto::p4::v1::Error::decode(any.value.as_slice()).ok()?;
        out.push((e.canonical_code != Code::Ok as i32).then_some(e));
    }
    Some(out)
}

fn update_error(
    info: Option<&P4Info>,
    index: usize,
    u: &Update,
    e: p4runtime_proto::p4::v1::Error,
) -> UpdateError {
    let update_type = match update::Type::try_from(u.r#type) {
        Ok(update::Type::Insert) => "INSERT",
        Ok(update::Type::Modify) => "MODIFY",
        Ok(update::Type::Delete) => "DELETE",
        _ => "UNSPECIFIED",
    };
    let entity = u
        .entity
        .as_ref()
        .map_or_else(|| "no entity".to_string(), |e| describe_entity(info, e));
    UpdateError {
        index,
        update_type,
        entity,
        code: Code::from_i32(e.canonical_code),
        message: e.message,
        space: e.space,
        target_code: e.code,
    }
}

fn arbitration_request(cfg: &ClientConfig) -> StreamMessageRequest {
    StreamMessageRequest {
        update: Some(stream_message_request::Update::Arbitration(
            MasterArbitrationUpdate {
                device_id: cfg.device_id,
                #[allow(deprecated)]
                role: cfg.role.as_ref().map(|name| Role {
                    id: 0,
                    name: name.clone(),
                    config: None,
                }),
                election_id: Some(cfg.election_id.into()),
                status: None,
            },
        )),
    }
}

async fn stream_task(cfg: ClientConfig, rpc: P4RuntimeClient<Channel>, st: Arc<StreamState>) {
    // Jittered, so that switches that lost their controller together do not all come back at
    // the same instant; a new backoff after each successful connect.
    let policy = RetryPolicy::doubling(cfg.reconnect_initial, cfg.reconnect_max);
    let mut backoff = policy.backoff();
    let mut ever_connected = false;
    let mut reported_down = false;
    loop {
        let (tx, rx) = mpsc::channel::<StreamMessageRequest>(1024);
        // Queued before the call: the switch answers headers only once it has read something.
        if tx.send(arbitration_request(&cfg)).await.is_err() {
            return;
        }
        let mut client = rpc.clone();
        let mut inbound = match client.stream_channel(ReceiverStream::new(rx)).await {
            Ok(r) => r.into_inner(),
            Err(status) => {
                debug!(endpoint = %cfg.endpoint, code = ?status.code(), message = status.message(), "stream channel failed");
                if ever_connected && !reported_down {
                    reported_down = true;
                    let _ = st.events.send(Event::Disconnected {
                        reason: status.message().to_string(),
                    });
                }
                tokio::time::sleep(backoff.next().unwrap_or(policy.max)).await;
                continue;
            }
        };
        if let Ok(mut g) = st.current.lock() {
            *g = Some(tx);
        }
        backoff = policy.backoff();
        let _ = st.events.send(if ever_connected {
            Event::Reconnected
        } else {
            Event::Connected
        });
        info!(endpoint = %cfg.endpoint, device_id = cfg.device_id, reconnect = ever_connected, "stream channel up");
        ever_connected = true;
        st.mastership.send_if_modified(|m| {
            if *m == Mastership::Disconnected {
                *m = Mastership::Backup {
                    primary_election_id: 0,
                };
                true
            } else {
                false
            }
        });

        let reason = loop {
            match inbound.message().await {
                Ok(Some(msg)) => handle_stream_message(&cfg, &st, msg),
                Ok(None) => break "stream closed by the switch".to_string(),
                Err(status) => break format!("{:?}: {}", status.code(), status.message()),
            }
        };
        if let Ok(mut g) = st.current.lock() {
            *g = None;
        }
        let was = st.mastership.send_replace(Mastership::Disconnected);
        warn!(endpoint = %cfg.endpoint, device_id = cfg.device_id, %reason, "stream channel down");
        if was == Mastership::Primary {
            let _ = st.events.send(Event::LostPrimary {
                primary_election_id: 0,
            });
        }
        let _ = st.events.send(Event::Disconnected { reason });
        reported_down = true;
        tokio::time::sleep(backoff.next().unwrap_or(policy.max)).await;
    }
}

fn handle_stream_message(
    cfg: &ClientConfig,
    st: &StreamState,
    msg: p4runtime_proto::p4::v1::StreamMessageResponse,
) {
    use stream_message_response::Update as U;
    match msg.update {
        Some(U::Arbitration(arb)) => {
            let primary_id: u128 = arb.election_id.map(u128::from).unwrap_or(0);
            let is_primary = arb
                .status
                .as_ref()
                .is_some_and(|s| s.code == Code::Ok as i32)
                && primary_id == cfg.election_id;
            let new = if is_primary {
                Mastership::Primary
            } else {
                Mastership::Backup {
                    primary_election_id: primary_id,
                }
            };
            let old = st.mastership.send_replace(new);
            debug!(device_id = cfg.device_id, ?old, ?new, "arbitration update");
            match (old == Mastership::Primary, is_primary) {
                (false, true) => {
                    info!(
                        device_id = cfg.device_id,
                        election_id = cfg.election_id,
                        "became primary"
                    );
                    let _ = st.events.send(Event::BecamePrimary);
                }
                (true, false) => {
                    warn!(
                        device_id = cfg.device_id,
                        primary_election_id = primary_id,
                        "lost primary"
                    );
                    let _ = st.events.send(Event::LostPrimary {
                        primary_election_id: primary_id,
                    });
                }
                _ => {}
            }
        }
        Some(U::Packet(p)) => {
            let _ = st.events.send(Event::PacketIn(p));
        }
        Some(U::Error(e)) => {
            warn!(code = e.canonical_code, message = %e.message, "stream error from switch");
            let _ = st.events.send(Event::StreamError(e));
        }
        Some(other) => debug!(?other, "ignored stream message"),
        None => debug!("empty stream message"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p4runtime_proto::p4::v1::{TableEntry, WriteRequest};

    fn entry(i: u32) -> Update {
        Update::insert(TableEntry {
            table_id: 1,
            priority: i as i32,
            ..Default::default()
        })
    }

    #[test]
    fn batches_split_by_count_and_by_size_and_cover_every_update() {
        let updates: Vec<Update> = (0..2500).map(entry).collect();
        let by_count = split_batches(
            &updates,
            &WriteOptions {
                max_batch_updates: 1000,
                ..Default::default()
            },
        );
        assert_eq!(by_count, vec![(0, 1000), (1000, 2000), (2000, 2500)]);

        let one = updates[0].encoded_len() + 6;
        let opts = WriteOptions {
            max_batch_updates: 1000,
            max_batch_bytes: one * 10,
            max_in_flight: 1,
        };
        let by_size = split_batches(&updates, &opts);
        assert!(by_size.len() >= 250, "{}", by_size.len());
        assert_eq!(by_size.first().map(|b| b.0), Some(0));
        assert_eq!(by_size.last().map(|b| b.1), Some(2500));
        assert!(by_size.windows(2).all(|w| w[0].1 == w[1].0));
        for (s, e) in by_size {
            let req = WriteRequest {
                updates: updates[s..e].to_vec(),
                ..Default::default()
            };
            assert!(
                req.encoded_len() <= opts.max_batch_bytes,
                "batch {s}..{e} is {} bytes",
                req.encoded_len()
            );
        }
    }

    #[test]
    fn an_update_larger_than_the_size_limit_still_goes_alone() {
        let updates: Vec<Update> = (0..3).map(entry).collect();
        let opts = WriteOptions {
            max_batch_updates: 10,
            max_batch_bytes: 1,
            max_in_flight: 1,
        };
        assert_eq!(split_batches(&updates, &opts), vec![(0, 1), (1, 2), (2, 3)]);
    }
}
