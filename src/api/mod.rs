//! Request handlers: one file per API family, each mapping a typed request plus broker state to a
//! typed response. No sockets and no files here; `server` frames bytes, `replica` owns the data.
//!
//! [`handle`] is the single entry point: it decodes the body with `kafka-protocol` (through
//! `protocol::bounded`, so no array count larger than the frame is ever allocated), runs the
//! handler and encodes the response frame (length prefix, response header, body). Replies that must
//! wait (fetch long-poll) come back as a future; the connection keeps them in request order.

pub mod admin;
pub mod api_versions;
mod broker_configs;
pub mod cluster_info;
pub mod configs;
pub mod consumer_group;
pub mod error;
pub mod features;
pub mod fetch;
pub mod fetch_encode;
pub mod find_coordinator;
pub mod forward;
pub mod group;
pub mod image_view;
pub mod implicit_add;
pub mod list_offsets;
pub mod metadata;
pub mod offsets;
pub mod produce;
mod produce_wait;
pub mod producer_id;
pub mod quotas;
pub mod replicas;
pub mod scram;
pub mod share_ack_wait;
pub mod share_fetch;
pub mod share_fetch_encode;
pub mod share_group;
pub mod share_offsets;
mod share_preload;
pub mod share_state_rpc;
pub mod topics;
pub mod txn;
pub mod txn_log;
pub mod txn_offsets;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Encodable;

use crate::broker::Broker;
use crate::log::{FileRecords, Records};
use crate::protocol::{bounded, share_v2, versions};

/// The bytes of one response frame, as chunks written in order (bytes with vectored writes, file
/// ranges with `sendfile`).
pub type Frame = Vec<Chunk>;

/// One piece of a response frame. Handlers never send anything: a [`Chunk::File`] is a range of an
/// open log file the connection writer sends from the page cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    Bytes(Bytes),
    File(FileRecords),
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::File(f) => f.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Bytes> for Chunk {
    fn from(b: Bytes) -> Chunk {
        Chunk::Bytes(b)
    }
}

impl From<Records> for Chunk {
    fn from(r: Records) -> Chunk {
        match r {
            Records::Memory(b) => Chunk::Bytes(b),
            Records::File(f) => Chunk::File(f),
        }
    }
}

/// What a request produces.
pub enum Reply {
    /// A response ready now; `None` when the request gets no response (acks=0 produce).
    Now(Option<Frame>),
    /// A response that completes later (fetch long-poll). `None` closes the connection: a
    /// deferred reply that cannot be encoded must not leave the client waiting.
    Later(Pin<Box<dyn Future<Output = Option<Frame>> + Send>>),
    /// A response the connection's reader awaits before it reads the next request: a produce
    /// under the flush policy, answered once its fsync (on the runtime's blocking pool) is done.
    /// The connection's later requests then find the data durable and visible, as in Kafka, which
    /// handles one request per connection at a time; no runtime worker waits for the disk.
    /// Its `Err` closes the connection.
    Barrier(Pin<Box<dyn Future<Output = Result<Reply, CloseReason>> + Send>>),
    /// A client over its quota (`client_quota`): the reply (its response carries the throttle
    /// time already, or there is none: acks=0), after which the connection reads no request
    /// for the throttle time. KIP-219: Kafka answers at once and mutes the channel.
    Throttled(Duration, Box<Reply>),
    /// A deferred reply whose throttle time is known only when it completes (a consumer Fetch
    /// long-poll: the quota is charged with the bytes of the answer): the frame (`None` closes
    /// the connection, as for `Later`) and the throttle time (zero: none).
    LaterThrottled(Pin<Box<dyn Future<Output = (Option<Frame>, Duration)> + Send>>),
}

impl Reply {
    /// `reply`, muting the connection for `throttle_ms` after it when above 0.
    pub fn throttled(throttle_ms: i32, reply: Reply) -> Reply {
        match u64::try_from(throttle_ms) {
            Ok(ms) if ms > 0 => Reply::Throttled(Duration::from_millis(ms), Box::new(reply)),
            _ => reply,
        }
    }

    /// The response frame, however the reply delivers it, ignoring throttling (in-process
    /// callers that hold no connection to mute: forwarding, nested handlers).
    pub async fn resolve(mut self) -> Result<Option<Frame>, CloseReason> {
        loop {
            return Ok(match self {
                Reply::Now(frame) => frame,
                Reply::Later(answer) => answer.await,
                Reply::LaterThrottled(answer) => answer.await.0,
                Reply::Barrier(next) => {
                    self = next.await?;
                    continue;
                }
                Reply::Throttled(_, inner) => {
                    self = *inner;
                    continue;
                }
            });
        }
    }
}

/// Why a request closes its connection (Kafka closes on these too).
#[derive(Debug, thiserror::Error)]
pub enum CloseReason {
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("unsupported version {version} of {key:?}")]
    UnsupportedVersion { key: ApiKey, version: i16 },
    #[error("malformed {key:?} v{version} request: {reason}")]
    Malformed {
        key: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("malformed request header: {0}")]
    Header(#[from] crate::protocol::HeaderError),
    #[error("encoding {key:?} v{version} response failed: {reason}")]
    Encode {
        key: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("{key:?} v{version} handler failed: {reason}")]
    HandlerFailed {
        key: ApiKey,
        version: i16,
        reason: String,
    },
}

/// The parts of the request header a handler may need.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<Bytes>,
    /// The client's address, when the request came over a socket.
    pub peer: Option<std::net::SocketAddr>,
    /// The listener the request arrived on (index into `broker.config.listeners`), when known.
    pub listener: Option<usize>,
    /// Forwarded by another broker (`api::forward`), which made the receiving broker's checks.
    pub forwarded: bool,
}

impl RequestContext {
    /// The client id as text (Kafka decodes it as UTF-8; a byte that is not becomes U+FFFD),
    /// `None` when the header has none (a null string).
    pub fn client_id_str(&self) -> Option<std::borrow::Cow<'_, str>> {
        self.client_id.as_deref().map(String::from_utf8_lossy)
    }

    /// The client's address as Kafka reports it in group descriptions ("/127.0.0.1"; empty when
    /// unknown). Built on demand: most requests never need it.
    pub fn client_host(&self) -> String {
        self.peer
            .map(|p| format!("/{}", p.ip()))
            .unwrap_or_default()
    }

    /// The endpoint this broker advertises to this client: that of the listener the client
    /// connected through (Kafka's rule), else (controller listener, in-process calls) the primary
    /// listener's.
    pub fn advertised<'a>(&self, broker: &'a Broker) -> (&'a str, i32) {
        self.listener
            .and_then(|i| broker.config.listeners.get(i))
            .and_then(|l| l.advertised.as_ref())
            .map(|(host, port)| (host.as_str(), i32::from(*port)))
            .unwrap_or((
                broker.identity.advertised_host.as_str(),
                broker.identity.advertised_port,
            ))
    }
}

/// Handles one request frame (the whole frame after the length prefix).
pub fn handle(broker: &Arc<Broker>, frame: Bytes) -> Result<Reply, CloseReason> {
    handle_from(broker, frame, None)
}

/// [`handle`] for a request that arrived from `peer`.
pub fn handle_from(
    broker: &Arc<Broker>,
    frame: Bytes,
    peer: Option<std::net::SocketAddr>,
) -> Result<Reply, CloseReason> {
    handle_on(broker, frame, peer, None)
}

/// [`handle`] for a request from `peer` that arrived on the socket bound to `local` (which
/// names the listener, hence the endpoints this client is told about).
pub fn handle_on(
    broker: &Arc<Broker>,
    frame: Bytes,
    peer: Option<std::net::SocketAddr>,
    local: Option<std::net::SocketAddr>,
) -> Result<Reply, CloseReason> {
    handle_inner(broker, frame, peer, local, false)
}

/// The dispatch. `forwarded`: the request came from another broker (`api::forward`) and is
/// decided here, never forwarded again.
pub(crate) fn handle_inner(
    broker: &Arc<Broker>,
    mut frame: Bytes,
    peer: Option<std::net::SocketAddr>,
    local: Option<std::net::SocketAddr>,
    forwarded: bool,
) -> Result<Reply, CloseReason> {
    let whole = frame.clone();
    let (key, version, correlation_id) = crate::protocol::parse_request_header(&mut frame)?;
    let api_key = ApiKey::try_from(key).map_err(|_| CloseReason::UnknownApiKey(key))?;
    if api_key == ApiKey::ApiVersions && !versions::is_usable(api_key, version) {
        // Kafka's downgrade rule: do not parse the body; answer in v0 with UNSUPPORTED_VERSION.
        return Ok(Reply::Now(Some(api_versions::unsupported_version_frame(
            correlation_id,
        ))));
    }
    if !versions::is_usable(api_key, version) {
        return Err(CloseReason::UnsupportedVersion {
            key: api_key,
            version,
        });
    }
    let flexible = crate::protocol::header::header_is_flexible(api_key, version);
    let client_id = crate::protocol::header::parse_header_rest(&mut frame, flexible)?;
    let ctx = RequestContext {
        api_key,
        api_version: version,
        correlation_id,
        client_id,
        peer,
        listener: local.and_then(|l| listener_at(&broker.config.listeners, l)),
        forwarded,
    };
    if !forwarded {
        let request = forward::Request {
            key: api_key,
            version,
            flexible,
            body: &frame,
            whole: &whole,
        };
        if let Some(reply) = forward::maybe_forward(broker, request, peer, local) {
            return Ok(reply);
        }
    }
    let malformed = |e: anyhow::Error| CloseReason::Malformed {
        key: api_key,
        version,
        reason: e.to_string(),
    };
    match api_key {
        ApiKey::ApiVersions => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            respond(&ctx, &api_versions::handle(&ctx, r, &broker.image()))
        }
        ApiKey::Metadata => {
            let r: kafka_protocol::messages::MetadataRequest =
                bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            if metadata::may_create_topics(broker, &r) {
                let broker = broker.clone();
                let c = ctx.clone();
                on_blocking_pool(ctx, move || metadata::handle(&broker, &c, r))
            } else {
                respond(&ctx, &metadata::handle(broker, &ctx, r))
            }
        }
        ApiKey::Produce => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            produce::handle(broker, ctx, r, whole.len())
        }
        ApiKey::Fetch => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(fetch::handle(broker.clone(), ctx, r))
        }
        ApiKey::ListOffsets => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            respond(&ctx, &list_offsets::handle(broker, &ctx, r))
        }
        ApiKey::CreateTopics => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            let c = ctx.clone();
            Ok(barrier(ctx, topics::create(broker.clone(), c, r)))
        }
        ApiKey::DeleteTopics => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            let c = ctx.clone();
            Ok(barrier(ctx, topics::delete(broker.clone(), c, r)))
        }
        ApiKey::DescribeQuorum => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(barrier(
                ctx,
                forward::describe_quorum_here(broker.clone(), version, r),
            ))
        }
        ApiKey::InitProducerId => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(producer_id::handle(broker, ctx, r))
        }
        ApiKey::FindCoordinator => {
            let r: kafka_protocol::messages::FindCoordinatorRequest =
                bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            if find_coordinator::needs_topic(broker, &r, version) {
                let (broker, c) = (broker.clone(), ctx.clone());
                Ok(barrier(ctx, async move {
                    find_coordinator::ensure_topic(&broker, r.key_type).await;
                    find_coordinator::handle(&broker, &c, r)
                }))
            } else {
                respond(&ctx, &find_coordinator::handle(broker, &ctx, r))
            }
        }
        ApiKey::JoinGroup => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(group::join(broker, ctx, r))
        }
        ApiKey::SyncGroup => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(group::sync(broker, ctx, r))
        }
        ApiKey::Heartbeat => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(group::heartbeat(broker, ctx, r))
        }
        ApiKey::LeaveGroup => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(group::leave(broker, ctx, r))
        }
        ApiKey::DescribeGroups => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(group::describe(broker, ctx, r))
        }
        ApiKey::ListGroups => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(group::list(broker, ctx, r))
        }
        ApiKey::DeleteGroups => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(group::delete(broker, ctx, r))
        }
        ApiKey::OffsetCommit => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(offsets::commit(broker, ctx, r))
        }
        ApiKey::OffsetFetch => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(offsets::fetch(broker, ctx, r))
        }
        ApiKey::OffsetDelete => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(offsets::delete(broker, ctx, r))
        }
        ApiKey::TxnOffsetCommit => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(txn_offsets::commit(broker, ctx, r))
        }
        ApiKey::ConsumerGroupHeartbeat => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(consumer_group::heartbeat(broker, ctx, r))
        }
        ApiKey::ConsumerGroupDescribe => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(consumer_group::describe(broker, ctx, r))
        }
        ApiKey::AddPartitionsToTxn => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(txn::add_partitions(broker, ctx, r))
        }
        ApiKey::AddOffsetsToTxn => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(txn::add_offsets(broker, ctx, r))
        }
        ApiKey::EndTxn => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(txn::end_txn(broker, ctx, r))
        }
        ApiKey::DescribeTransactions => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(txn::describe(broker, ctx, r))
        }
        ApiKey::ListTransactions => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(txn::list(broker, ctx, r))
        }
        ApiKey::DescribeClientQuotas => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            respond(&ctx, &quotas::describe(broker, r))
        }
        ApiKey::AlterClientQuotas => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(barrier(ctx.clone(), quotas::alter(broker.clone(), r)))
        }
        // The share coordinator's RPCs: served whatever `share.version` is, as Kafka does.
        ApiKey::InitializeShareGroupState => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(share_state_rpc::initialize(broker, ctx, r))
        }
        ApiKey::ReadShareGroupState => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(share_state_rpc::read(broker, ctx, r))
        }
        ApiKey::WriteShareGroupState => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(share_state_rpc::write(broker, ctx, r))
        }
        ApiKey::DeleteShareGroupState => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(share_state_rpc::delete(broker, ctx, r))
        }
        ApiKey::ReadShareGroupStateSummary => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(share_state_rpc::summary(broker, ctx, r))
        }
        key if versions::SHARE_APIS.contains(&key)
            && broker
                .image()
                .finalized_level(api_versions::SHARE_VERSION_FEATURE)
                < 1 =>
        {
            Err(CloseReason::UnsupportedVersion { key, version })
        }
        ApiKey::ShareGroupHeartbeat => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(share_group::heartbeat(broker, ctx, r))
        }
        ApiKey::ShareGroupDescribe => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(share_group::describe(broker, ctx, r))
        }
        ApiKey::ShareFetch => {
            let r = share_v2::decode_share_fetch(&mut frame, version).map_err(malformed)?;
            Ok(share_fetch::fetch(broker.clone(), ctx, r))
        }
        ApiKey::ShareAcknowledge => {
            let r = share_v2::decode_share_acknowledge(&mut frame, version).map_err(malformed)?;
            share_fetch::acknowledge(broker, &ctx, r)
        }
        ApiKey::DescribeShareGroupOffsets => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(share_offsets::describe(broker, ctx, r))
        }
        ApiKey::AlterShareGroupOffsets => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(share_offsets::alter(broker, ctx, r))
        }
        ApiKey::DeleteShareGroupOffsets => {
            let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
            Ok(share_offsets::delete(broker, ctx, r))
        }
        key if admin::HANDLED.contains(&key) => admin::dispatch(broker, &ctx, &mut frame),
        _ => Err(CloseReason::UnsupportedVersion {
            key: api_key,
            version,
        }),
    }
}

fn respond(ctx: &RequestContext, response: &impl Encodable) -> Result<Reply, CloseReason> {
    encode_response(ctx, response).map(|f| Reply::Now(Some(f)))
}

/// Runs a handler that makes topic directories and files (CreateTopics, CreatePartitions,
/// Metadata auto-creation) on tokio's blocking pool, answered as a [`Reply::Barrier`]: no runtime
/// worker waits for the disk, and the connection reads its next request only once the topic
/// exists, so what it sends next finds it (Kafka handles one request per connection at a time).
/// Outside a runtime (direct calls) the handler runs here.
pub(crate) fn on_blocking_pool<T>(
    ctx: RequestContext,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<Reply, CloseReason>
where
    T: Encodable + Send + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return respond(&ctx, &work());
    };
    Ok(Reply::Barrier(Box::pin(async move {
        match runtime.spawn_blocking(work).await {
            Ok(response) => respond(&ctx, &response),
            Err(e) => Err(CloseReason::HandlerFailed {
                key: ctx.api_key,
                version: ctx.api_version,
                reason: e.to_string(),
            }),
        }
    })))
}

/// A handler that waits for the controller (topic admin), answered as a [`Reply::Barrier`]: the
/// connection reads its next request only once the change is in this broker's image, so what
/// it sends next sees it.
pub(crate) fn barrier<T>(
    ctx: RequestContext,
    answer: impl std::future::Future<Output = T> + Send + 'static,
) -> Reply
where
    T: Encodable + Send + 'static,
{
    Reply::Barrier(Box::pin(async move { respond(&ctx, &answer.await) }))
}

/// Encodes a whole response frame: length, response header (v0 or v1 by API and version), body.
pub fn encode_response(
    ctx: &RequestContext,
    response: &impl Encodable,
) -> Result<Frame, CloseReason> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    put_response_header(&mut buf, ctx);
    response
        .encode(&mut buf, ctx.api_version)
        .map_err(|e| CloseReason::Encode {
            key: ctx.api_key,
            version: ctx.api_version,
            reason: e.to_string(),
        })?;
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(vec![Chunk::Bytes(buf.freeze())])
}

/// Writes the response header for `ctx` (correlation id, plus empty tagged fields for v1).
pub fn put_response_header(buf: &mut BytesMut, ctx: &RequestContext) {
    buf.put_i32(ctx.correlation_id);
    // ApiVersions always answers with header v0, even when its body is flexible.
    if ctx.api_key != ApiKey::ApiVersions
        && ctx.api_key.response_header_version(ctx.api_version) >= 1
    {
        buf.put_u8(0);
    }
}

/// Milliseconds since the epoch.
pub(crate) fn now_ms() -> i64 {
    crate::broker::now_ms()
}

/// The listener whose socket accepted a connection with local address `local`: the one bound to
/// that port and that address (or to the wildcard address).
fn listener_at(
    listeners: &[crate::config::Listener],
    local: std::net::SocketAddr,
) -> Option<usize> {
    listeners.iter().position(|l| {
        l.bind.port() == local.port() && (l.bind.ip() == local.ip() || l.bind.ip().is_unspecified())
    })
}
