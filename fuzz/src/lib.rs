//! What the fuzz targets share: a broker built once per fuzzing process and the checks run on its
//! answers, and the seed corpora (requests of every advertised API at every advertised version,
//! encoded with `kafka-protocol`, so the fuzzer starts from well-formed frames).
//!
//! The broker is the real one (`sluice::server::start` on a temporary data directory, so the
//! group and transaction coordinator tasks run) and requests go through `sluice::api::handle`, the
//! seam that takes a frame's bytes and returns a reply or a close reason without a socket. Its
//! state grows with what the fuzzer creates (topics, groups, records), so it is replaced by a
//! fresh one every [`RESET_EVERY`] executions. A crash found here reproduces with the same input
//! against a fresh broker in most cases; `scripts/fuzz` prints how to rerun one.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreateTopicsRequest, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice::api::{Chunk, Reply};
use sluice::broker::Broker;
use sluice::config::{Config, Value};
use sluice::protocol::bounded;
use sluice::server::RunningBroker;

pub mod seeds;

/// Executions between two broker resets (bounds the state the fuzzer accumulates).
pub const RESET_EVERY: u64 = 20_000;
/// The topic every broker starts with (2 partitions), which the seeds produce to and fetch from.
pub const TOPIC: &str = "fuzz";
/// Most partitions one fuzz input may create; inputs asking for more are only decoded (creating
/// 100,000 partition directories per execution would measure the file system, not the decoder).
const MAX_CREATED_PARTITIONS: i64 = 64;
/// How long a barrier (produce under the flush policy) is awaited.
const BARRIER_WAIT: Duration = Duration::from_secs(5);

/// A runtime plus a running broker on a temporary directory.
pub struct Harness {
    rt: tokio::runtime::Runtime,
    running: Option<RunningBroker>,
    dir: Option<tempfile::TempDir>,
    runs: u64,
}

impl Harness {
    fn new() -> Harness {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let mut h = Harness {
            rt,
            running: None,
            dir: None,
            runs: 0,
        };
        h.start();
        h
    }

    fn start(&mut self) {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut entries = BTreeMap::new();
        entries.insert("listen".to_string(), Value::Str("127.0.0.1:0".into()));
        entries.insert(
            "data.dir".to_string(),
            Value::Str(dir.path().display().to_string()),
        );
        let config = Config::from_entries(&entries).expect("config");
        let running = self
            .rt
            .block_on(sluice::server::start(config))
            .expect("broker start");
        self.running = Some(running);
        self.dir = Some(dir);
        let create = CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_num_partitions(2)
                .with_replication_factor(1)])
            .with_timeout_ms(10_000);
        let frame = encode(ApiKey::CreateTopics, 7, 1, &create).expect("encode CreateTopics");
        match self.handle(&frame) {
            Some(Answer::Frame(_)) => {}
            _ => panic!("creating the fuzz topic failed"),
        }
    }

    fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            self.rt.block_on(r.shutdown());
        }
        self.dir = None;
    }

    /// The broker, replaced by a fresh one every [`RESET_EVERY`] calls.
    pub fn broker(&mut self) -> Arc<Broker> {
        self.runs += 1;
        if self.runs % RESET_EVERY == 0 {
            self.stop();
            self.start();
        }
        self.running.as_ref().expect("running").broker.clone()
    }

    /// Runs one request frame (without its length prefix) through `api::handle`, awaiting a
    /// deferred reply briefly. `None`: the broker closes the connection (or a deferred reply
    /// did not complete in time).
    pub fn handle(&mut self, frame: &[u8]) -> Option<Answer> {
        let broker = self.broker();
        let _guard = self.rt.enter();
        let reply = match sluice::api::handle(&broker, Bytes::copy_from_slice(frame)) {
            Ok(reply) => reply,
            Err(_) => return None,
        };
        self.resolve(reply)
    }

    fn resolve(&self, reply: Reply) -> Option<Answer> {
        match reply {
            Reply::Now(Some(f)) => Some(Answer::Frame(f)),
            Reply::Now(None) => Some(Answer::NoResponse),
            // Polled once: an answer the handler could give at once is checked; one waiting for
            // a coordinator task or a long-poll is dropped (waiting would cost each such input
            // milliseconds).
            Reply::Later(fut) => match self.rt.block_on(poll_once(fut)) {
                Some(Some(f)) => Some(Answer::Frame(f)),
                Some(None) | None => None,
            },
            Reply::LaterThrottled(fut) => match self.rt.block_on(poll_once(fut)) {
                Some((Some(f), _)) => Some(Answer::Frame(f)),
                Some((None, _)) | None => None,
            },
            // A client over its quota: the response is checked; the mute is the connection's.
            Reply::Throttled(_, inner) => self.resolve(*inner),
            Reply::Barrier(fut) => {
                match self.rt.block_on(tokio::time::timeout(BARRIER_WAIT, fut)) {
                    Ok(Ok(next)) => self.resolve(next),
                    Ok(Err(_)) => None,
                    Err(_) => panic!("a produce barrier did not complete in {BARRIER_WAIT:?}"),
                }
            }
        }
    }
}

/// Polls `fut` once: its output if it is ready, else `None`.
async fn poll_once<F: std::future::Future>(fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
        std::task::Poll::Ready(v) => std::task::Poll::Ready(Some(v)),
        std::task::Poll::Pending => std::task::Poll::Ready(None),
    })
    .await
}

/// What a request got back.
pub enum Answer {
    /// A response frame (length prefix included).
    Frame(Vec<Chunk>),
    /// A request that gets no response (acks=0 produce).
    NoResponse,
}

/// Runs `f` with the process's harness (built on first use).
pub fn with_harness<T>(f: impl FnOnce(&mut Harness) -> T) -> T {
    static HARNESS: OnceLock<Mutex<Harness>> = OnceLock::new();
    let h = HARNESS.get_or_init(|| Mutex::new(Harness::new()));
    // A panic inside `f` ends the process (libFuzzer reports it), so a poisoned lock is never seen.
    let mut guard = h.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut guard)
}

/// Checks a response frame: its length prefix counts exactly the bytes after it, and it starts
/// with the request's correlation id. Returns the frame's bytes when it has no file chunk.
pub fn check_response(frame: &[Chunk], correlation_id: i32) -> Option<Bytes> {
    let total: usize = frame.iter().map(Chunk::len).sum();
    let Some(Chunk::Bytes(first)) = frame.first() else {
        panic!("a response frame must start with bytes (length and header)");
    };
    assert!(first.len() >= 8, "response frame shorter than its header");
    let len = i32::from_be_bytes([first[0], first[1], first[2], first[3]]);
    assert_eq!(len as i64, total as i64 - 4, "response length prefix");
    let id = i32::from_be_bytes([first[4], first[5], first[6], first[7]]);
    assert_eq!(id, correlation_id, "response correlation id");
    let mut out = BytesMut::with_capacity(total);
    for c in frame {
        match c {
            Chunk::Bytes(b) => out.extend_from_slice(b),
            Chunk::File(_) => return None,
        }
    }
    Some(out.freeze())
}

/// Whether handling `frame` stays cheap: CreateTopics and CreatePartitions asking for more than
/// [`MAX_CREATED_PARTITIONS`] partitions are only decoded by the caller, never handled.
pub fn cheap_to_handle(frame: &[u8]) -> bool {
    if frame.len() < 4 {
        return true;
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let Ok(api) = ApiKey::try_from(key) else {
        return true;
    };
    if !matches!(api, ApiKey::CreateTopics | ApiKey::CreatePartitions) {
        return true;
    }
    let mut buf = Bytes::copy_from_slice(frame);
    if RequestHeader::decode(&mut buf, api.request_header_version(version)).is_err() {
        return true;
    }
    // the bounded decode, as the broker decodes (the crate's plain decode allocates from counts)
    let flexible = sluice::protocol::header::header_is_flexible(api, version);
    let partitions: i64 = match api {
        ApiKey::CreateTopics => {
            match bounded::decode::<CreateTopicsRequest>(&mut buf, version, flexible) {
                Ok(r) => r
                    .topics
                    .iter()
                    .map(|t| (t.num_partitions.max(1) as i64).max(t.assignments.len() as i64))
                    .sum(),
                Err(_) => return true,
            }
        }
        _ => match bounded::decode::<CreatePartitionsRequest>(&mut buf, version, flexible) {
            Ok(r) => r.topics.iter().map(|t| t.count.max(0) as i64).sum(),
            Err(_) => return true,
        },
    };
    partitions <= MAX_CREATED_PARTITIONS
}

/// Encodes a request frame without its length prefix (what `api::handle` takes).
pub fn encode<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Option<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("fuzz")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .ok()?;
    body.encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

/// Writes `seeds` into `dir` (one file per seed, named by content) unless already there.
pub fn write_seeds(dir: &Path, seeds: &[(String, Vec<u8>)]) {
    std::fs::create_dir_all(dir).expect("seed directory");
    for (name, bytes) in seeds {
        let path = dir.join(format!("{name}-{:016x}", fnv1a(bytes)));
        if !path.exists() {
            std::fs::write(&path, bytes).expect("write seed");
        }
    }
}

/// If `SLUICE_FUZZ_SEEDS` names a directory, writes `seeds()` into it (targets call this from
/// libFuzzer's initialisation, which runs before the corpus is read).
pub fn seeds_from_env(seeds: impl FnOnce() -> Vec<(String, Vec<u8>)>) {
    if let Some(dir) = std::env::var_os("SLUICE_FUZZ_SEEDS") {
        write_seeds(Path::new(&dir), &seeds());
    }
}

/// FNV-1a, 64 bits: stable seed file names.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}
