//! Raw-wire conformance tests for Sluice live in `tests/`; this library holds their shared helpers.
//!
//! - [`TestBroker`]: a broker started in-process on a free port with a temporary data directory.
//! - [`Client`]: a tiny Kafka client over one TCP connection. It frames requests with
//!   `kafka-protocol`'s `RequestHeader` + `Encodable`, decodes responses with `ResponseHeader` +
//!   `Decodable` (checking correlation ids and that no bytes are left over), and can also send raw
//!   bytes and tell whether the broker closed the connection.
//! - Builders for the requests most tests need (create topic, produce one batch, fetch, list offsets).
//!
//! Every read has a timeout, so a broker that never answers fails the test instead of hanging it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, CreateTopicsRequest, FetchRequest, FetchResponse,
    InitProducerIdRequest, ListOffsetsRequest, MetadataRequest, MetadataResponse, ProduceRequest,
    ProducerId, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use sluice::config::{Config, Value};
use sluice::server::RunningBroker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
pub use uuid::Uuid;

pub mod counting_alloc;
pub mod share;

pub use kafka_protocol;

/// How long any single response may take before the test fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a broker may take to close a connection it must close.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A broker running in this process. Owns its temporary data directory.
pub struct TestBroker {
    pub running: Option<RunningBroker>,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
}

impl TestBroker {
    /// Starts a broker on 127.0.0.1 with a free port and a fresh data directory.
    pub async fn start() -> Result<TestBroker> {
        Self::start_with(&[]).await
    }

    /// Like [`TestBroker::start`] with extra `server.properties`-style entries.
    pub async fn start_with(extra: &[(&str, Value)]) -> Result<TestBroker> {
        let dir = tempfile::tempdir()?;
        let running = start_broker(dir.path(), extra).await?;
        Ok(TestBroker {
            addr: running.local_addr,
            running: Some(running),
            dir,
        })
    }

    /// Stops the broker (flushing logs) and starts a new one on the same data directory.
    pub async fn restart(&mut self, extra: &[(&str, Value)]) -> Result<()> {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
        let running = start_broker(self.dir.path(), extra).await?;
        self.addr = running.local_addr;
        self.running = Some(running);
        Ok(())
    }

    pub async fn connect(&self) -> Result<Client> {
        Client::connect(self.addr).await
    }

    /// The running broker's shared state, for tests that drive a coordinator in-process (for
    /// example writing a transaction marker before the wire API that does so exists).
    pub fn broker(&self) -> Result<std::sync::Arc<sluice::broker::Broker>> {
        Ok(self
            .running
            .as_ref()
            .context("broker stopped")?
            .broker
            .clone())
    }

    /// The running broker's network edge: its memory pool, connection quotas and counters.
    pub fn network(&self) -> Result<std::sync::Arc<sluice::server::Network>> {
        Ok(self
            .running
            .as_ref()
            .context("broker stopped")?
            .network
            .clone())
    }

    pub async fn shutdown(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

/// Starts a broker on `127.0.0.1:0` over `data_dir`.
pub async fn start_broker(data_dir: &Path, extra: &[(&str, Value)]) -> Result<RunningBroker> {
    let mut entries = BTreeMap::new();
    entries.insert("listen".to_string(), Value::Str("127.0.0.1:0".into()));
    entries.insert(
        "data.dir".to_string(),
        Value::Str(data_dir.display().to_string()),
    );
    for (k, v) in extra {
        entries.insert(k.to_string(), v.clone());
    }
    let config = Config::from_entries(&entries)?;
    Ok(sluice::server::start(config).await?)
}

/// The response header version the broker must use for `key` at `version`.
pub fn response_header_version(key: ApiKey, version: i16) -> i16 {
    if key == ApiKey::ApiVersions {
        0
    } else {
        key.response_header_version(version)
    }
}

/// The client id requests carry unless a [`Client`] is given another.
pub const CLIENT_ID: &str = "protocol-tests";

/// Encodes a whole request frame (length prefix, request header, body).
pub fn encode_request<R: Request>(correlation_id: i32, version: i16, request: &R) -> Result<Bytes> {
    encode_request_as(Some(CLIENT_ID), correlation_id, version, request)
}

/// [`encode_request`] with the header's client id `client_id` (`None`: a null string).
pub fn encode_request_as<R: Request>(
    client_id: Option<&str>,
    correlation_id: i32,
    version: i16,
    request: &R,
) -> Result<Bytes> {
    let key = ApiKey::try_from(R::KEY).map_err(|_| anyhow::anyhow!("unknown key {}", R::KEY))?;
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(client_id.map(|c| StrBytes::from_string(c.to_string())));
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0, 0, 0, 0]);
    header.encode(&mut buf, key.request_header_version(version))?;
    request.encode(&mut buf, version)?;
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    capture_frame(key, version, &buf[4..]);
    Ok(buf.freeze())
}

/// With `SLUICE_CAPTURE_FRAMES=<dir>`, writes every request frame the tests encode (without its
/// length prefix) into `<dir>`, one file per distinct frame: seeds for the fuzz targets
/// (`scripts/fuzz`). A failed write is ignored: capturing never changes a test's outcome.
fn capture_frame(key: ApiKey, version: i16, frame: &[u8]) {
    let Some(dir) = std::env::var_os("SLUICE_CAPTURE_FRAMES") else {
        return;
    };
    let hash = frame.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    let dir = Path::new(&dir);
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(dir.join(format!("{key:?}-v{version}-{hash:016x}")), frame);
}

/// Builds a frame from a raw header (key, version, correlation id, client id "t", header v1) and body.
pub fn raw_frame(key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut inner = Vec::new();
    inner.extend_from_slice(&key.to_be_bytes());
    inner.extend_from_slice(&version.to_be_bytes());
    inner.extend_from_slice(&correlation_id.to_be_bytes());
    inner.extend_from_slice(&1i16.to_be_bytes());
    inner.push(b't');
    inner.extend_from_slice(body);
    let mut out = (inner.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&inner);
    out
}

/// One client connection.
pub struct Client {
    stream: TcpStream,
    next_correlation_id: i32,
    client_id: Option<String>,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Result<Client> {
        let stream = tokio::time::timeout(READ_TIMEOUT, TcpStream::connect(addr))
            .await
            .context("connect timed out")??;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            next_correlation_id: 1,
            client_id: Some(CLIENT_ID.to_string()),
        })
    }

    /// Connects from `local` (a loopback address such as 127.0.0.2), for per-address limits.
    pub async fn connect_from(addr: SocketAddr, local: std::net::IpAddr) -> Result<Client> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(local, 0))?;
        let stream = tokio::time::timeout(READ_TIMEOUT, socket.connect(addr))
            .await
            .context("connect timed out")??;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            next_correlation_id: 1,
            client_id: Some(CLIENT_ID.to_string()),
        })
    }

    /// The broker's address this connection is to (to open another one to it).
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        Ok(self.stream.peer_addr()?)
    }

    /// This connection's requests carry `client_id` from now on (`None`: a null string).
    pub fn with_client_id(mut self, client_id: Option<&str>) -> Client {
        self.client_id = client_id.map(str::to_string);
        self
    }

    /// Sends `request` at `version`; returns the correlation id used.
    pub async fn send<R: Request>(&mut self, version: i16, request: &R) -> Result<i32> {
        let id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let frame = encode_request_as(self.client_id.as_deref(), id, version, request)?;
        self.stream.write_all(&frame).await?;
        Ok(id)
    }

    /// Sends raw bytes as they are.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    /// Closes our write side (the broker then reads EOF).
    pub async fn shutdown_write(&mut self) -> Result<()> {
        self.stream.shutdown().await?;
        Ok(())
    }

    /// Reads one response frame (without its length prefix).
    pub async fn read_frame(&mut self) -> Result<Bytes> {
        tokio::time::timeout(READ_TIMEOUT, self.read_frame_inner())
            .await
            .context("timed out waiting for a response frame")?
    }

    async fn read_frame_inner(&mut self) -> Result<Bytes> {
        let len = self
            .stream
            .read_i32()
            .await
            .context("reading frame length")?;
        ensure!(len >= 4, "response frame length {len} is too small");
        let mut buf = vec![0u8; len as usize];
        self.stream
            .read_exact(&mut buf)
            .await
            .context("reading frame body")?;
        Ok(Bytes::from(buf))
    }

    /// Reads one response and decodes it as `R::Response`, checking the correlation id, the header
    /// version and that the body is consumed exactly.
    pub async fn recv<R: Request>(
        &mut self,
        version: i16,
        correlation_id: i32,
    ) -> Result<R::Response> {
        let key = ApiKey::try_from(R::KEY).map_err(|_| anyhow::anyhow!("unknown key"))?;
        let mut frame = self.read_frame().await?;
        decode_response::<R>(key, version, correlation_id, &mut frame)
    }

    /// Sends a request and reads its response.
    pub async fn call<R: Request>(&mut self, version: i16, request: &R) -> Result<R::Response> {
        let id = self.send(version, request).await?;
        self.recv::<R>(version, id).await
    }

    /// A fresh idempotent producer (InitProducerId v4 without a transactional id): its producer id,
    /// checked to come with no error and epoch 0.
    pub async fn init_idempotent_producer(&mut self) -> Result<i64> {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let r = self.call(4, &req).await?;
        ensure!(r.error_code == 0, "InitProducerId error {}", r.error_code);
        ensure!(
            r.producer_epoch == 0,
            "InitProducerId epoch {}",
            r.producer_epoch
        );
        Ok(r.producer_id.0)
    }

    /// Waits until the broker closes the connection: a read returns EOF or a reset within
    /// [`CLOSE_TIMEOUT`]. Any bytes that arrive first are an error (the broker answered instead).
    pub async fn expect_closed(&mut self) -> Result<()> {
        self.expect_closed_within(CLOSE_TIMEOUT).await
    }

    /// [`Client::expect_closed`] with its own bound on the wait.
    pub async fn expect_closed_within(&mut self, bound: Duration) -> Result<()> {
        let mut buf = [0u8; 1024];
        match tokio::time::timeout(bound, self.stream.read(&mut buf)).await {
            Err(_) => bail!("connection still open after {bound:?}"),
            Ok(Ok(0)) => Ok(()),
            Ok(Ok(n)) => bail!(
                "expected a closed connection, got {n} bytes: {:?}",
                &buf[..n]
            ),
            Ok(Err(e)) if is_reset(&e) => Ok(()),
            Ok(Err(e)) => Err(e.into()),
        }
    }

    /// Reads everything until the broker closes the connection (EOF or reset).
    pub async fn read_until_closed(&mut self) -> Result<Vec<u8>> {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match tokio::time::timeout(CLOSE_TIMEOUT, self.stream.read(&mut buf)).await {
                Err(_) => bail!("connection still open after {CLOSE_TIMEOUT:?}"),
                Ok(Ok(0)) => return Ok(all),
                Ok(Ok(n)) => all.extend_from_slice(&buf[..n]),
                Ok(Err(e)) if is_reset(&e) => return Ok(all),
                Ok(Err(e)) => return Err(e.into()),
            }
        }
    }

    /// ApiVersions v3 round trip; fails unless the broker answers with error 0.
    pub async fn api_versions_ok(&mut self) -> Result<()> {
        let r = self.call(3, &api_versions_request()).await?;
        ensure!(r.error_code == 0, "ApiVersions error {}", r.error_code);
        ensure!(!r.api_keys.is_empty(), "ApiVersions returned no APIs");
        Ok(())
    }
}

/// Waits until `cond` holds, checking every few milliseconds, for at most [`EVENT_TIMEOUT`]: for
/// events the broker reports through counters (a test may wait for an event; it never asserts
/// how fast it came).
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) -> Result<()> {
    let deadline = tokio::time::Instant::now() + EVENT_TIMEOUT;
    while !cond() {
        ensure!(
            tokio::time::Instant::now() < deadline,
            "still waiting after {EVENT_TIMEOUT:?} for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// The most [`wait_until`] waits.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

fn is_reset(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
    )
}

/// Decodes a response frame for request type `R`.
pub fn decode_response<R: Request>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    frame: &mut Bytes,
) -> Result<R::Response> {
    let header = ResponseHeader::decode(frame, response_header_version(key, version))
        .with_context(|| format!("decoding {key:?} v{version} response header"))?;
    ensure!(
        header.correlation_id == correlation_id,
        "correlation id {} != expected {correlation_id}",
        header.correlation_id
    );
    let body = R::Response::decode(frame, version)
        .with_context(|| format!("decoding {key:?} v{version} response body"))?;
    ensure!(
        !frame.has_remaining(),
        "{} bytes left over after the {key:?} v{version} response",
        frame.remaining()
    );
    Ok(body)
}

// ---- request builders -------------------------------------------------------------------------

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

pub fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("sluice-protocol-tests"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"))
}

pub fn metadata_request(topics: &[&str], auto_create: bool) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(Some(
            topics
                .iter()
                .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(auto_create)
}

pub fn create_topics_request(
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(replication_factor)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string(k.to_string()))
                            .with_value(Some(StrBytes::from_string(v.to_string())))
                    })
                    .collect(),
            )])
}

/// Creates a topic (CreateTopics v7) and returns its result; fails unless error 0.
pub async fn create_topic(
    client: &mut Client,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> Result<CreatableTopicResult> {
    let r = client
        .call(7, &create_topics_request(name, partitions, 1, configs))
        .await?;
    let t = r.topics.into_iter().next().context("no topic result")?;
    ensure!(
        t.error_code == 0,
        "creating {name}: error {} {:?}",
        t.error_code,
        t.error_message
    );
    Ok(t)
}

/// Metadata v12 for one topic (no auto-creation).
pub async fn metadata(client: &mut Client, topic: &str) -> Result<MetadataResponse> {
    client.call(12, &metadata_request(&[topic], false)).await
}

pub fn produce_request(topic: &str, partition: i32, acks: i16, batch: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])])
}

/// Produces one batch (acks=1) at `version` and returns the single partition response.
pub async fn produce(
    client: &mut Client,
    version: i16,
    topic: &str,
    partition: i32,
    batch: Vec<u8>,
) -> Result<PartitionProduceResponse> {
    let r = client
        .call(
            version,
            &produce_request(topic, partition, 1, Bytes::from(batch)),
        )
        .await?;
    ensure!(
        r.responses.len() == 1,
        "{} topic responses",
        r.responses.len()
    );
    let t = r.responses.into_iter().next().context("no topic")?;
    ensure!(
        t.partition_responses.len() == 1,
        "{} partition responses",
        t.partition_responses.len()
    );
    t.partition_responses
        .into_iter()
        .next()
        .context("no partition")
}

/// A plain (non-idempotent) batch of `values`.
pub fn batch(values: &[&[u8]]) -> Vec<u8> {
    let records: Vec<_> = values.iter().map(|v| (None, Some(*v))).collect();
    sluice::record::build_batch(0, 1_700_000_000_000, (-1, -1, -1), &records)
}

/// A Fetch request for one partition. `topic_id` is used (and the name left empty) from v13.
pub fn fetch_request(
    version: i16,
    topic: &str,
    topic_id: Uuid,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
    min_bytes: i32,
) -> FetchRequest {
    let t = if version >= 13 {
        FetchTopic::default().with_topic_id(topic_id)
    } else {
        FetchTopic::default().with_topic(topic_name(topic))
    };
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(50 * 1024 * 1024)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![t.with_partitions(vec![FetchPartition::default()
            .with_partition(partition)
            .with_current_leader_epoch(-1)
            .with_fetch_offset(offset)
            .with_log_start_offset(-1)
            .with_partition_max_bytes(10 * 1024 * 1024)])])
}

/// The single partition of a single-topic Fetch response.
pub fn only_partition(r: FetchResponse) -> Result<PartitionData> {
    ensure!(r.error_code == 0, "fetch top-level error {}", r.error_code);
    ensure!(r.responses.len() == 1, "{} topics", r.responses.len());
    let t = r.responses.into_iter().next().context("no topic")?;
    ensure!(t.partitions.len() == 1, "{} partitions", t.partitions.len());
    t.partitions.into_iter().next().context("no partition")
}

/// ListOffsets for one partition at `version`; returns the partition response.
pub async fn list_offsets(
    client: &mut Client,
    version: i16,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> Result<ListOffsetsPartitionResponse> {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])]);
    let r = client.call(version, &req).await?;
    ensure!(r.topics.len() == 1, "{} topics", r.topics.len());
    let t = r.topics.into_iter().next().context("no topic")?;
    ensure!(t.partitions.len() == 1, "{} partitions", t.partitions.len());
    t.partitions.into_iter().next().context("no partition")
}

/// Splits a magic-2 record set into its batches (by each header's length field).
pub fn split_batches(mut records: &[u8]) -> Result<Vec<&[u8]>> {
    let mut out = Vec::new();
    while !records.is_empty() {
        ensure!(records.len() >= 12, "trailing {} bytes", records.len());
        let len = i32::from_be_bytes([records[8], records[9], records[10], records[11]]);
        ensure!(len > 0, "batch length {len}");
        let total = 12 + len as usize;
        ensure!(total <= records.len(), "partial batch");
        out.push(&records[..total]);
        records = &records[total..];
    }
    Ok(out)
}

/// The base offset field of a batch.
pub fn base_offset_of(batch: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&batch[..8]);
    i64::from_be_bytes(a)
}

/// Resident set size of this process in KiB (the broker runs in-process).
pub fn vm_rss_kib() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS line")?;
    let kib = line
        .split_whitespace()
        .nth(1)
        .context("malformed VmRSS line")?
        .parse()?;
    Ok(kib)
}

/// A small deterministic PRNG (xorshift64*) for the garbage-frame tests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}
