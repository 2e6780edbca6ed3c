//! The broker's channel to the active controller (Kafka's `NodeToControllerChannelManager`):
//! sends a `kafka-protocol` request to whichever voter leads the quorum and returns its response.
//!
//! The target is the leader hint when there is one (the local quorum's `leader()` watch in
//! combined mode), else the voters of `controller.quorum.voters` in turn. A broker-only node
//! configured with `controller.quorum.bootstrap.servers` alone starts from those addresses (ids
//! unknown) and learns the leader's endpoint from the Fetch answers its observer gets (Kafka's
//! `NodeEndpoints`, [`ControllerEndpoints::learn`]); every channel of the node shares them. One connection is kept
//! open; requests carry increasing correlation ids and each attempt has `request_timeout`. A
//! NOT_CONTROLLER answer, a refused or lost connection, a timeout or a malformed response moves
//! on (next voter, or the hint's new leader) after a backoff (`retry.backoff.ms` 100 doubling to
//! `retry.backoff.max.ms` 1000, Kafka's defaults) until the caller's deadline. Failures are data
//! ([`ChannelError`]); nothing here panics on what a controller sends.
//!
//! Owned by one task (methods take `&mut self`); not shared, so no lock is held across a send.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AllocateProducerIdsResponse, AlterPartitionResponse, ApiKey, BrokerHeartbeatResponse,
    BrokerRegistrationResponse, DescribeQuorumResponse, FetchResponse, FetchSnapshotResponse,
    ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, HeaderVersion, Request};
use parking_lot::RwLock;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::protocol::bounded;
use crate::protocol::header::header_is_flexible;
use crate::quorum::LeaderAndEpoch;

/// Largest response accepted from a controller. Its answers are small but for an observer's
/// Fetch, which holds at least one whole metadata entry (at most
/// [`super::driver::MAX_ENTRY_BYTES`], checked below).
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
const _: () = assert!(MAX_RESPONSE_BYTES >= 2 * super::driver::MAX_ENTRY_BYTES);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_millis(1000);

/// A response whose top-level error code tells NOT_CONTROLLER apart (retried elsewhere).
pub trait ControllerResponse {
    fn error_code(&self) -> i16;
}

macro_rules! controller_response {
    ($($t:ty),*) => {$(
        impl ControllerResponse for $t {
            fn error_code(&self) -> i16 {
                self.error_code
            }
        }
    )*};
}
controller_response!(
    AlterPartitionResponse,
    BrokerRegistrationResponse,
    BrokerHeartbeatResponse,
    AllocateProducerIdsResponse,
    DescribeQuorumResponse,
    FetchResponse,
    FetchSnapshotResponse
);

/// Why a request got no answer before its deadline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// The deadline passed; `last` says what the last attempt ran into.
    #[error("no controller answered before the deadline (last attempt: {last})")]
    Timeout { last: String },
    #[error("no controller voters are known")]
    NoVoters,
    #[error("cannot encode the request: {0}")]
    Encode(String),
}

/// The controllers a node can reach, as (id, "host:port"): the voters of
/// `controller.quorum.voters`, or the `controller.quorum.bootstrap.servers` (ids not known yet:
/// -1, -2, ...) plus the endpoints learned since. Clones share one list.
#[derive(Debug, Clone, Default)]
pub struct ControllerEndpoints(Arc<RwLock<Vec<(i32, String)>>>);

impl ControllerEndpoints {
    /// Bootstrap addresses, whose node ids are not known yet.
    pub fn bootstrap(addresses: &[String]) -> ControllerEndpoints {
        let list = (1..)
            .zip(addresses)
            .map(|(i, a)| (-i, a.clone()))
            .collect::<Vec<_>>();
        ControllerEndpoints(Arc::new(RwLock::new(list)))
    }

    /// The endpoints of `config`: its voters, else its bootstrap servers, else this node alone
    /// (`Config::effective_quorum_voters`).
    pub fn of_config(config: &crate::config::Config) -> ControllerEndpoints {
        if config.quorum_voters.is_empty() && !config.quorum_bootstrap_servers.is_empty() {
            return Self::bootstrap(&config.quorum_bootstrap_servers);
        }
        config
            .effective_quorum_voters()
            .iter()
            .map(|v| (v.id, v.address()))
            .collect::<Vec<_>>()
            .into()
    }

    /// Records that node `id` (>= 0) answers at `address` (a Fetch answer's `NodeEndpoints`).
    /// Returns whether the list changed.
    pub fn learn(&self, id: i32, address: String) -> bool {
        if id < 0 {
            return false;
        }
        let mut list = self.0.write();
        match list.iter_mut().find(|(v, _)| *v == id) {
            Some((_, a)) if *a == address => false,
            Some((_, a)) => {
                *a = address;
                true
            }
            None => {
                list.push((id, address));
                true
            }
        }
    }

    /// The address of node `id`, if known.
    pub fn address_of(&self, id: i32) -> Option<String> {
        let list = self.0.read();
        list.iter().find(|(v, _)| *v == id).map(|(_, a)| a.clone())
    }

    /// The `i`th endpoint (modulo the count), None when there are none.
    pub fn nth(&self, i: usize) -> Option<(i32, String)> {
        let list = self.0.read();
        (!list.is_empty()).then(|| list[i % list.len()].clone())
    }

    pub fn len(&self) -> usize {
        self.0.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `id@host:port` each (bootstrap entries with their placeholder ids), for log lines.
    pub fn describe(&self) -> String {
        let list = self.0.read();
        list.iter()
            .map(|(id, a)| format!("{id}@{a}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl From<Vec<(i32, String)>> for ControllerEndpoints {
    fn from(list: Vec<(i32, String)>) -> ControllerEndpoints {
        ControllerEndpoints(Arc::new(RwLock::new(list)))
    }
}

/// What the channel needs to know.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// The controllers to ask (shared with the node's other channels; see [`ControllerEndpoints`]).
    pub voters: ControllerEndpoints,
    /// Each attempt's limit (Kafka's `request.timeout.ms` for controller requests is 30 s; a
    /// broker's heartbeats want less).
    pub request_timeout: Duration,
    pub client_id: String,
}

/// See the module doc.
pub struct ControllerChannel {
    config: ChannelConfig,
    hint: Option<watch::Receiver<LeaderAndEpoch>>,
    /// Index into `config.voters` of the endpoint tried when no hint names a known leader.
    rotation: usize,
    conn: Option<(i32, TcpStream)>,
    correlation_id: i32,
}

/// One attempt's failure.
enum Attempt {
    /// Try another controller after a backoff.
    Retry(String),
    /// Retrying cannot help.
    Fatal(ChannelError),
}

impl ControllerChannel {
    /// A channel to `config.voters`, following `hint` (the local quorum's leader watch) when given.
    pub fn new(config: ChannelConfig, hint: Option<watch::Receiver<LeaderAndEpoch>>) -> Self {
        ControllerChannel {
            config,
            hint,
            rotation: 0,
            conn: None,
            correlation_id: 0,
        }
    }

    /// The voter the connection is open to, if any.
    pub fn connected_to(&self) -> Option<i32> {
        self.conn.as_ref().map(|(id, _)| *id)
    }

    /// Sends `request` at `version` to the active controller and returns its answer, retrying
    /// on NOT_CONTROLLER and connection failures until `deadline`.
    pub async fn send<R>(
        &mut self,
        request: &R,
        version: i16,
        deadline: Instant,
    ) -> Result<R::Response, ChannelError>
    where
        R: Request,
        R::Response: ControllerResponse,
    {
        if self.config.voters.is_empty() {
            return Err(ChannelError::NoVoters);
        }
        let key = ApiKey::try_from(R::KEY).map_err(|_| ChannelError::Encode(R::KEY.to_string()))?;
        let mut backoff = BACKOFF_MIN;
        loop {
            let last = match self.attempt(request, key, version, deadline).await {
                Ok(response) if response.error_code() == ResponseError::NotController.code() => {
                    let at = self.connected_to();
                    self.move_on();
                    format!("NOT_CONTROLLER from node {at:?}")
                }
                Ok(response) => return Ok(response),
                Err(Attempt::Retry(why)) => {
                    self.move_on();
                    why
                }
                Err(Attempt::Fatal(e)) => return Err(e),
            };
            let now = Instant::now();
            if now + backoff >= deadline {
                return Err(ChannelError::Timeout { last });
            }
            tracing::debug!("controller channel: {last}; retrying in {backoff:?}");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// Drops the connection and, without a hint, rotates to the next voter (an observer whose
    /// voter answered that it does not lead and knows no leader).
    pub fn move_on(&mut self) {
        self.conn = None;
        self.rotation = (self.rotation + 1) % self.config.voters.len().max(1);
    }

    /// The controller to talk to now: the hinted leader when its address is known, else the
    /// endpoint the rotation is at.
    fn target(&self) -> Option<(i32, String)> {
        let hinted = self
            .hint
            .as_ref()
            .and_then(|h| h.borrow().leader_id)
            .and_then(|id| Some((id, self.config.voters.address_of(id)?)));
        hinted.or_else(|| self.config.voters.nth(self.rotation))
    }

    async fn attempt<R>(
        &mut self,
        request: &R,
        key: ApiKey,
        version: i16,
        deadline: Instant,
    ) -> Result<R::Response, Attempt>
    where
        R: Request,
    {
        let limit = (Instant::now() + self.config.request_timeout).min(deadline);
        let frame = self.encode_request(request, key, version)?;
        let correlation_id = self.correlation_id;
        let (id, addr) = self
            .target()
            .ok_or(Attempt::Fatal(ChannelError::NoVoters))?;
        if self.connected_to() != Some(id) {
            self.conn = None;
            let stream = tokio::time::timeout_at(limit, TcpStream::connect(&addr))
                .await
                .map_err(|_| Attempt::Retry(format!("connecting to node {id} ({addr}) timed out")))?
                .map_err(|e| Attempt::Retry(format!("connecting to node {id} ({addr}): {e}")))?;
            let _ = stream.set_nodelay(true);
            self.conn = Some((id, stream));
        }
        let Some((_, stream)) = self.conn.as_mut() else {
            return Err(Attempt::Retry("no connection".into()));
        };
        let exchange = async {
            stream.write_all(&frame).await?;
            let size = stream.read_i32().await?;
            let size = usize::try_from(size)
                .ok()
                .filter(|s| *s >= 4 && *s <= MAX_RESPONSE_BYTES)
                .ok_or_else(|| std::io::Error::other(format!("response size {size}")))?;
            let mut body = vec![0u8; size];
            stream.read_exact(&mut body).await?;
            Ok::<Bytes, std::io::Error>(Bytes::from(body))
        };
        let mut body = tokio::time::timeout_at(limit, exchange)
            .await
            .map_err(|_| Attempt::Retry(format!("node {id} did not answer in time")))?
            .map_err(|e| Attempt::Retry(format!("node {id}: {e}")))?;
        let header_version = R::Response::header_version(version);
        let header = ResponseHeader::decode(&mut body, header_version)
            .map_err(|e| Attempt::Retry(format!("node {id}: bad response header: {e}")))?;
        if header.correlation_id != correlation_id {
            return Err(Attempt::Retry(format!(
                "node {id} answered correlation id {} to {correlation_id}",
                header.correlation_id
            )));
        }
        let flexible = header_is_flexible(key, version);
        bounded::decode::<R::Response>(&mut body, version, flexible)
            .map_err(|e| Attempt::Retry(format!("node {id}: bad {key:?} response: {e}")))
    }

    /// `[size][request header][body]` with the next correlation id.
    fn encode_request<R: Request>(
        &mut self,
        request: &R,
        key: ApiKey,
        version: i16,
    ) -> Result<Bytes, Attempt> {
        self.correlation_id = self.correlation_id.wrapping_add(1) & i32::MAX;
        let mut buf = BytesMut::with_capacity(128);
        buf.put_i32(0);
        buf.put_i16(R::KEY);
        buf.put_i16(version);
        buf.put_i32(self.correlation_id);
        let client = self.config.client_id.as_bytes();
        buf.put_i16(i16::try_from(client.len()).unwrap_or(0));
        if client.len() <= i16::MAX as usize {
            buf.put_slice(client);
        }
        if header_is_flexible(key, version) {
            buf.put_u8(0); // no tagged fields
        }
        request.encode(&mut buf, version).map_err(|e| {
            Attempt::Fatal(ChannelError::Encode(format!("{key:?} v{version}: {e}")))
        })?;
        let len = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        Ok(buf.freeze())
    }
}

#[cfg(test)]
#[path = "channel_tests.rs"]
mod tests;
