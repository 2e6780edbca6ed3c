//! The broker as a client of another broker for transactions: one WriteTxnMarkers (v1) request
//! to a partition leader's inter-broker endpoint, its per-partition answer back; and (KIP-890
//! Transactions V2) one AddPartitionsToTxn (v5, batched) from a partition leader to the
//! transaction's coordinator, adding the partitions a Produce or TxnOffsetCommit writes.
//!
//! One connection per request (markers are rare next to produce traffic; no pool yet), bounded by
//! [`MARKER_TIMEOUT`] for connect, write and read together, and a response frame larger than
//! [`MAX_RESPONSE_BYTES`] is refused before it is read. Any failure is a [`ChannelError`]: the
//! caller retries every partition of the request. What the codes mean is decided in
//! [`super::markers`]; this module only moves bytes.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ProducerId, RequestHeader, ResponseHeader, TopicName, WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::markers::TxnPartition;
use super::MarkerJob;
use crate::record::ControlType;

/// The WriteTxnMarkers version spoken (flexible; the only one Sluice and Kafka 4.x both serve).
const VERSION: i16 = 1;
/// The AddPartitionsToTxn version a leader sends for a Transactions V2 producer (Kafka's
/// `AddPartitionsToTxnManager`: v5 tells the coordinator the client speaks V2).
pub const ADD_PARTITIONS_VERSION: i16 = 5;
/// How long one request may take, connect included, before it counts as failed.
pub const MARKER_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read (a marker answer is a few bytes per partition).
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Why a request produced no answer.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("connecting or talking to {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("{addr} did not answer within {MARKER_TIMEOUT:?}")]
    Timeout { addr: String },
    #[error("{addr} sent an invalid answer: {reason}")]
    Invalid { addr: String, reason: String },
}

/// The WriteTxnMarkers request for `partitions` of `job` (one marker, topics grouped by name in
/// first-seen order).
pub fn request(job: &MarkerJob, partitions: &[TxnPartition]) -> WriteTxnMarkersRequest {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for (name, p) in partitions {
        match topics.iter_mut().find(|t| t.name.as_str() == name) {
            Some(t) => t.partition_indexes.push(*p),
            None => topics.push(
                WritableTxnMarkerTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name.clone())))
                    .with_partition_indexes(vec![*p]),
            ),
        }
    }
    WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(job.producer_id))
        .with_producer_epoch(job.producer_epoch)
        .with_transaction_result(job.control == ControlType::Commit)
        .with_topics(topics)
        .with_coordinator_epoch(job.coordinator_epoch)])
}

/// The listener whose endpoints other brokers are reached on: the one of this broker's primary
/// endpoint (`inter.broker.listener.name`, else the first client listener).
pub fn inter_broker_listener(config: &crate::config::Config) -> String {
    config
        .listeners
        .iter()
        .find(|l| !l.controller && l.bind == config.listen)
        .or_else(|| config.listeners.iter().find(|l| !l.controller))
        .map_or_else(|| "PLAINTEXT".to_string(), |l| l.name.clone())
}

/// The AddPartitionsToTxn v5 a partition leader sends for one V2 producer: add `partitions`.
pub fn add_partitions_request(
    who: &super::driver::Identity,
    partitions: &[TxnPartition],
) -> kafka_protocol::messages::AddPartitionsToTxnRequest {
    use kafka_protocol::messages::add_partitions_to_txn_request::{
        AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
    };
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (name, p) in partitions {
        match topics.iter_mut().find(|t| t.name.as_str() == name) {
            Some(t) => t.partitions.push(*p),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name.clone())))
                    .with_partitions(vec![*p]),
            ),
        }
    }
    kafka_protocol::messages::AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(kafka_protocol::messages::TransactionalId(
                StrBytes::from_string(who.transactional_id.clone()),
            ))
            .with_producer_id(ProducerId(who.producer_id))
            .with_producer_epoch(who.producer_epoch)
            .with_verify_only(false)
            .with_topics(topics),
    ])
}

/// The one code of an AddPartitionsToTxn answer: the top-level error, else the first
/// partition's error (a coordinator answers one code for a whole transaction's add).
pub fn add_partitions_code(r: &kafka_protocol::messages::AddPartitionsToTxnResponse) -> i16 {
    if r.error_code != 0 {
        return r.error_code;
    }
    r.results_by_transaction
        .iter()
        .flat_map(|t| &t.topic_results)
        .flat_map(|t| &t.results_by_partition)
        .map(|p| p.partition_error_code)
        .find(|&c| c != 0)
        .unwrap_or(0)
}

/// Every `(partition, code)` of an answer.
pub fn codes(response: &WriteTxnMarkersResponse) -> Vec<(TxnPartition, i16)> {
    response
        .markers
        .iter()
        .flat_map(|m| &m.topics)
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    (t.name.as_str().to_string(), p.partition_index),
                    p.error_code,
                )
            })
        })
        .collect()
}

/// Sends the markers `request` to `host:port` as broker `client_id` and returns the answer.
pub async fn send(
    host: &str,
    port: u16,
    client_id: &str,
    request: &WriteTxnMarkersRequest,
) -> Result<WriteTxnMarkersResponse, ChannelError> {
    call(host, port, client_id, VERSION, request).await
}

/// Sends `request` at `version` to `host:port` as broker `client_id` and returns the answer,
/// within [`MARKER_TIMEOUT`].
pub async fn call<R: Request>(
    host: &str,
    port: u16,
    client_id: &str,
    version: i16,
    request: &R,
) -> Result<R::Response, ChannelError> {
    let addr = format!("{host}:{port}");
    let exchange = exchange(&addr, client_id, version, request);
    match tokio::time::timeout(MARKER_TIMEOUT, exchange).await {
        Ok(answer) => answer,
        Err(_) => Err(ChannelError::Timeout { addr }),
    }
}

async fn exchange<R: Request>(
    addr: &str,
    client_id: &str,
    version: i16,
    request: &R,
) -> Result<R::Response, ChannelError> {
    let io = |source| ChannelError::Io {
        addr: addr.to_string(),
        source,
    };
    let invalid = |reason: String| ChannelError::Invalid {
        addr: addr.to_string(),
        reason,
    };
    const CORRELATION_ID: i32 = 1;
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(CORRELATION_ID)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut buf = BytesMut::with_capacity(128);
    buf.put_i32(0);
    header
        .encode(&mut buf, R::header_version(version))
        .and_then(|_| request.encode(&mut buf, version))
        .map_err(|e| invalid(format!("encoding the request: {e}")))?;
    let len = i32::try_from(buf.len() - 4).map_err(|e| invalid(e.to_string()))?;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    let mut stream = TcpStream::connect(addr).await.map_err(io)?;
    stream.write_all(&buf).await.map_err(io)?;
    let size = stream.read_i32().await.map_err(io)?;
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s <= MAX_RESPONSE_BYTES)
        .ok_or_else(|| invalid(format!("answer size {size}")))?;
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body).await.map_err(io)?;
    let mut body = Bytes::from(body);
    let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
        .map_err(|e| invalid(e.to_string()))?;
    if header.correlation_id != CORRELATION_ID {
        return Err(invalid(format!("correlation id {}", header.correlation_id)));
    }
    let response = R::Response::decode(&mut body, version).map_err(|e| invalid(e.to_string()))?;
    if body.has_remaining() {
        return Err(invalid(format!("{} trailing bytes", body.remaining())));
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> MarkerJob {
        MarkerJob {
            transactional_id: "x".into(),
            producer_id: 7,
            producer_epoch: 3,
            coordinator_epoch: 2,
            control: ControlType::Abort,
            partitions: vec![],
        }
    }

    #[test]
    fn request_groups_partitions_by_topic() {
        let parts = vec![
            ("a".to_string(), 0),
            ("b".to_string(), 2),
            ("a".to_string(), 1),
        ];
        let r = request(&job(), &parts);
        assert_eq!(r.markers.len(), 1);
        let m = &r.markers[0];
        assert_eq!((m.producer_id.0, m.producer_epoch), (7, 3));
        assert_eq!((m.coordinator_epoch, m.transaction_result), (2, false));
        let topics: Vec<_> = m
            .topics
            .iter()
            .map(|t| (t.name.as_str().to_string(), t.partition_indexes.clone()))
            .collect();
        assert_eq!(
            topics,
            vec![("a".to_string(), vec![0, 1]), ("b".to_string(), vec![2])]
        );
    }

    /// Nothing listens: a connection error, not a hang or a panic.
    #[tokio::test]
    async fn an_unreachable_leader_is_an_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let r = send("127.0.0.1", port, "sluice-1", &request(&job(), &[])).await;
        assert!(matches!(r, Err(ChannelError::Io { .. })), "{r:?}");
    }
}
