//! A fake P4Runtime switch for the client's unit tests: just enough of PI's behaviour
//! (arbitration by highest election id, PERMISSION_DENIED for non-primary writes, per-update
//! errors in google.rpc.Status details, cookie-only pipeline reads, packet-out echoed as
//! packet-in) to exercise the client without BMv2. The BMv2 tests prove the real thing.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};
use weft_p4rt::proto::google::rpc::{Code as RpcCode, Status as RpcStatus};
use weft_p4rt::proto::p4::v1::p4_runtime_server::{P4Runtime, P4RuntimeServer};
use weft_p4rt::proto::p4::v1::*;

#[derive(Default)]
pub struct Stats {
    pub writes: AtomicUsize,
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    pub pipeline_pushes: AtomicUsize,
    pub max_batch: AtomicUsize,
}

struct Conn {
    id: usize,
    election_id: u128,
    tx: mpsc::Sender<Result<StreamMessageResponse, Status>>,
}

#[derive(Default)]
pub struct State {
    conns: Vec<Conn>,
    next_conn: usize,
    /// Encoded (table_id, match, priority) → entry.
    pub entries: BTreeMap<Vec<u8>, TableEntry>,
    pub cookie: Option<u64>,
    /// Entities returned by every Read, in addition to table entries (for size tests).
    pub extra_read: Vec<Entity>,
}

impl State {
    fn primary(&self) -> Option<u128> {
        self.conns.iter().map(|c| c.election_id).max()
    }

    fn notify_all(&self, device_id: u64) {
        let primary = self.primary().unwrap_or(0);
        for c in &self.conns {
            let (code, message) = if c.election_id == primary {
                (RpcCode::Ok, "Is primary")
            } else {
                (RpcCode::AlreadyExists, "Is backup")
            };
            let msg = StreamMessageResponse {
                update: Some(stream_message_response::Update::Arbitration(
                    MasterArbitrationUpdate {
                        device_id,
                        role: None,
                        election_id: Some(primary.into()),
                        status: Some(RpcStatus {
                            code: code as i32,
                            message: message.into(),
                            details: vec![],
                        }),
                    },
                )),
            };
            let _ = c.tx.try_send(Ok(msg));
        }
    }
}

#[derive(Clone, Default)]
pub struct FakeSwitch {
    pub state: Arc<Mutex<State>>,
    pub stats: Arc<Stats>,
    /// Delay per Write, so concurrency can build up.
    pub write_delay: Duration,
}

fn key(e: &TableEntry) -> Vec<u8> {
    TableEntry {
        table_id: e.table_id,
        r#match: e.r#match.clone(),
        priority: e.priority,
        ..Default::default()
    }
    .encode_to_vec()
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl P4Runtime for FakeSwitch {
    async fn write(
        &self,
        request: Request<WriteRequest>,
    ) -> Result<Response<WriteResponse>, Status> {
        let req = request.into_inner();
        let n = self.stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.stats.max_in_flight.fetch_max(n, Ordering::SeqCst);
        self.stats.writes.fetch_add(1, Ordering::SeqCst);
        self.stats
            .max_batch
            .fetch_max(req.updates.len(), Ordering::SeqCst);
        if !self.write_delay.is_zero() {
            tokio::time::sleep(self.write_delay).await;
        }
        let result = self.apply(req);
        self.stats.in_flight.fetch_sub(1, Ordering::SeqCst);
        result
    }

    type ReadStream = BoxStream<ReadResponse>;
    async fn read(
        &self,
        request: Request<ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        let req = request.into_inner();
        let st = self
            .state
            .lock()
            .map_err(|_| Status::internal("poisoned"))?;
        let mut entities = Vec::new();
        for e in &req.entities {
            match &e.entity {
                Some(entity::Entity::TableEntry(w)) => {
                    for t in st.entries.values() {
                        if w.table_id == 0 || w.table_id == t.table_id {
                            // PI returns canonical bytestrings; the fake pads instead, to prove
                            // the client normalises either way.
                            let mut t = t.clone();
                            for m in &mut t.r#match {
                                if let Some(field_match::FieldMatchType::Exact(x)) =
                                    &mut m.field_match_type
                                {
                                    x.value.insert(0, 0);
                                }
                            }
                            entities.push(Entity {
                                entity: Some(entity::Entity::TableEntry(t)),
                            });
                        }
                    }
                }
                Some(entity::Entity::RegisterEntry(_)) => {
                    return Err(Status::unimplemented(
                        "Register reads are not supported yet",
                    ));
                }
                _ => {}
            }
        }
        entities.extend(st.extra_read.iter().cloned());
        let resp = ReadResponse { entities };
        Ok(Response::new(Box::pin(futures::stream::iter(vec![Ok(
            resp,
        )]))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<SetForwardingPipelineConfigResponse>, Status> {
        let req = request.into_inner();
        let mut st = self
            .state
            .lock()
            .map_err(|_| Status::internal("poisoned"))?;
        if req.election_id.map(u128::from) != st.primary() {
            return Err(Status::permission_denied("Not primary"));
        }
        st.cookie = req.config.and_then(|c| c.cookie).map(|c| c.cookie);
        st.entries.clear();
        self.stats.pipeline_pushes.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        _request: Request<GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<GetForwardingPipelineConfigResponse>, Status> {
        let st = self
            .state
            .lock()
            .map_err(|_| Status::internal("poisoned"))?;
        match st.cookie {
            None => Err(Status::failed_precondition(
                "No forwarding pipeline config set for this device",
            )),
            Some(c) => Ok(Response::new(GetForwardingPipelineConfigResponse {
                config: Some(ForwardingPipelineConfig {
                    cookie: Some(forwarding_pipeline_config::Cookie { cookie: c }),
                    ..Default::default()
                }),
            })),
        }
    }

    type StreamChannelStream = BoxStream<StreamMessageResponse>;
    async fn stream_channel(
        &self,
        request: Request<Streaming<StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(1024);
        let state = self.state.clone();
        tokio::spawn(async move {
            let mut my_id: Option<(usize, u64)> = None;
            while let Ok(Some(msg)) = inbound.message().await {
                match msg.update {
                    Some(stream_message_request::Update::Arbitration(a)) => {
                        let Ok(mut st) = state.lock() else { break };
                        let election_id: u128 = a.election_id.map(u128::from).unwrap_or(0);
                        if my_id.is_none() {
                            if st.conns.iter().any(|c| c.election_id == election_id) {
                                let _ = tx.try_send(Err(Status::invalid_argument(
                                    "Election id already exists",
                                )));
                                break;
                            }
                            let id = st.next_conn;
                            st.next_conn += 1;
                            st.conns.push(Conn {
                                id,
                                election_id,
                                tx: tx.clone(),
                            });
                            my_id = Some((id, a.device_id));
                        }
                        st.notify_all(a.device_id);
                    }
                    Some(stream_message_request::Update::Packet(p)) => {
                        let echo = StreamMessageResponse {
                            update: Some(stream_message_response::Update::Packet(PacketIn {
                                payload: p.payload,
                                // Reported as the ingress port (packet_in id 1).
                                metadata: p
                                    .metadata
                                    .into_iter()
                                    .filter(|m| m.metadata_id == 1)
                                    .collect(),
                            })),
                        };
                        let _ = tx.send(Ok(echo)).await;
                    }
                    _ => {}
                }
            }
            if let (Some((id, device_id)), Ok(mut st)) = (my_id, state.lock()) {
                st.conns.retain(|c| c.id != id);
                st.notify_all(device_id);
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn capabilities(
        &self,
        _request: Request<CapabilitiesRequest>,
    ) -> Result<Response<CapabilitiesResponse>, Status> {
        Ok(Response::new(CapabilitiesResponse {
            p4runtime_api_version: "1.3.0".into(),
            experimental: None,
        }))
    }
}

impl FakeSwitch {
    fn apply(&self, req: WriteRequest) -> Result<Response<WriteResponse>, Status> {
        let mut st = self
            .state
            .lock()
            .map_err(|_| Status::internal("poisoned"))?;
        if req.election_id.map(u128::from) != st.primary() {
            return Err(Status::permission_denied("Not primary"));
        }
        let mut errors = Vec::with_capacity(req.updates.len());
        for u in req.updates {
            let Some(Entity {
                entity: Some(entity::Entity::TableEntry(t)),
            }) = u.entity
            else {
                errors.push(Error {
                    canonical_code: RpcCode::Unimplemented as i32,
                    ..Default::default()
                });
                continue;
            };
            let k = key(&t);
            let err = match update::Type::try_from(u.r#type) {
                Ok(update::Type::Insert) if st.entries.contains_key(&k) => {
                    Some((RpcCode::AlreadyExists, "Match entry exists"))
                }
                Ok(update::Type::Insert) | Ok(update::Type::Modify) => {
                    st.entries.insert(k, t);
                    None
                }
                Ok(update::Type::Delete) => st
                    .entries
                    .remove(&k)
                    .is_none()
                    .then_some((RpcCode::NotFound, "No such entry")),
                _ => Some((RpcCode::InvalidArgument, "bad update type")),
            };
            errors.push(match err {
                None => Error::default(),
                Some((code, msg)) => Error {
                    canonical_code: code as i32,
                    message: msg.into(),
                    space: "fake".into(),
                    code: 1,
                    details: None,
                },
            });
        }
        if errors.iter().all(|e| e.canonical_code == 0) {
            return Ok(Response::new(WriteResponse {}));
        }
        let status = RpcStatus {
            code: RpcCode::Unknown as i32,
            message: "Write failure.".into(),
            details: errors
                .iter()
                .map(|e| prost_types::Any {
                    type_url: "type.googleapis.com/p4.v1.Error".into(),
                    value: e.encode_to_vec(),
                })
                .collect(),
        };
        Err(Status::with_details(
            tonic::Code::Unknown,
            "Write failure.",
            status.encode_to_vec().into(),
        ))
    }
}

/// A running fake on its own runtime, so that stopping it drops every connection at once, as a
/// crashed switch would.
pub struct Running {
    pub addr: SocketAddr,
    pub fake: FakeSwitch,
    rt: Option<tokio::runtime::Runtime>,
}

impl Running {
    pub async fn stop(mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
        if let Ok(mut st) = self.fake.state.lock() {
            st.conns.clear();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

pub async fn start(fake: FakeSwitch, addr: SocketAddr, tls: Option<ServerTlsConfig>) -> Running {
    // Rebinding the port of a just-stopped fake can race with the kernel releasing it.
    let mut tries = 0;
    let listener = loop {
        match std::net::TcpListener::bind(addr) {
            Ok(l) => break l,
            Err(e) if tries < 100 => {
                tries += 1;
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("bind fake switch on {addr}: {e}"),
        }
    };
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("local addr");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("fake switch runtime");
    let svc = P4RuntimeServer::new(fake.clone())
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20);
    let mut builder = Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).expect("server TLS");
    }
    let router = builder.add_service(svc);
    rt.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let _ = router.serve_with_incoming(incoming).await;
    });
    Running {
        addr,
        fake,
        rt: Some(rt),
    }
}

pub fn server_tls(cert: &[u8], key: &[u8], client_ca: Option<&[u8]>) -> ServerTlsConfig {
    let mut t = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
    if let Some(ca) = client_ca {
        t = t.client_ca_root(tonic::transport::Certificate::from_pem(ca));
    }
    t
}
