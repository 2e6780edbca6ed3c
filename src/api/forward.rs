//! Forwarding of controller-decided requests from a broker to the active controller (Kafka's
//! `ForwardingManager`, without the Envelope: the request is sent as the client sent it). On a
//! node of a multi-voter quorum that does not lead it, CreateTopics, DeleteTopics,
//! CreatePartitions, topic AlterConfigs / IncrementalAlterConfigs, ElectLeaders, UpdateFeatures,
//! AlterClientQuotas and DescribeQuorum go, byte for byte, to the leader's CONTROLLER listener, and
//! its answer goes back to the client unchanged (same correlation id, same version). The controller
//! listener runs the admin APIs through the same broker handlers (`handle_forwarded`: a forwarded request is never forwarded
//! again), deciding them on its own controller.
//!
//! Invariants: a request is sent to one controller at a time and at most once per connection
//! attempt; a connection failure before the answer tries the current leader again until the
//! deadline (the request may have been applied: Kafka's forwarding has the same at-least-once
//! retry, and the admin APIs answer a repeat with TOPIC_ALREADY_EXISTS and the like); an answer
//! above [`MAX_RESPONSE_BYTES`] closes that connection; nothing blocks a runtime worker.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use std::sync::Arc;

use kafka_protocol::messages::{
    AlterConfigsRequest, DescribeQuorumRequest, DescribeQuorumResponse,
    IncrementalAlterConfigsRequest,
};

use super::{Chunk, CloseReason, Reply};
use crate::broker::Broker;
use crate::protocol::bounded;
use crate::quorum::LeaderAndEpoch;

/// The APIs a non-leading node forwards (configs: topics, groups and brokers, see [`forwards_configs`]).
pub const FORWARDED_APIS: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::UpdateFeatures,
    ApiKey::AlterClientQuotas,
    ApiKey::DescribeQuorum,
];

/// The forwarded APIs a controller runs through the broker's own handlers (all but
/// DescribeQuorum, which the controller listener answers itself).
pub const ADMIN_APIS: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::UpdateFeatures,
    ApiKey::AlterClientQuotas,
];

/// Largest answer relayed (admin answers are small; a bound keeps a bad peer from costing memory).
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// How long a forwarded request may take (Kafka's `request.timeout.ms` for forwarding is 30 s).
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

const BACKOFF: Duration = Duration::from_millis(100);

/// Why a forwarded request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("no controller answered within {0:?} (last: {1})")]
    Timeout(Duration, String),
}

/// Config resources (AlterConfigs, IncrementalAlterConfigs) decided by the controller: topics (2),
/// groups (32, ConfigRecords as in Kafka) and brokers (4: the cluster default `""` or this node
/// `node_id`, Kafka's check of a broker resource on the receiving broker; another id stays here
/// and is refused by the handler, and so does a request mixing it with others).
pub fn forwards_configs<'a>(
    resources: impl IntoIterator<Item = (i8, &'a str)>,
    node_id: i32,
) -> bool {
    let mut any = false;
    for (t, name) in resources {
        let decided = match t {
            2 | 32 => true,
            4 => name.is_empty() || name.parse::<i32>() == Ok(node_id),
            _ => false,
        };
        if !decided {
            return false;
        }
        any = true;
    }
    any
}

/// A request as the dispatch parsed it: its key and version, its body (after the header) and
/// the whole frame (header included, no length prefix) to forward as it came.
pub struct Request<'a> {
    pub key: ApiKey,
    pub version: i16,
    pub flexible: bool,
    pub body: &'a Bytes,
    pub whole: &'a Bytes,
}

/// The reply that forwards `request` to the active controller, when this broker must (a
/// member of a multi-voter quorum whose controller does not lead, a forwarded API, topic
/// configs only); None when the request is handled here.
pub fn maybe_forward(
    broker: &Arc<Broker>,
    request: Request<'_>,
    peer: Option<std::net::SocketAddr>,
    local: Option<std::net::SocketAddr>,
) -> Option<Reply> {
    if !FORWARDED_APIS.contains(&request.key) {
        return None;
    }
    let forwarder = broker.forwarder()?;
    if forwarder.leads_here() || !decided_by_controller(&request, broker.identity.node_id) {
        return None;
    }
    let broker = broker.clone();
    let whole = request.whole.clone();
    let (key, version) = (request.key, request.version);
    Some(Reply::Barrier(Box::pin(async move {
        match forwarder.forward(whole.clone()).await {
            Ok(Some(answer)) => Ok(Reply::Now(Some(vec![Chunk::Bytes(answer)]))),
            // This node leads now: decide it here.
            Ok(None) => super::handle_inner(&broker, whole, peer, local, true),
            Err(e) => {
                tracing::warn!("forwarding {key:?} v{version} to the controller failed: {e}");
                Err(CloseReason::HandlerFailed {
                    key,
                    version,
                    reason: e.to_string(),
                })
            }
        }
    })))
}

/// Config changes go to the controller only when [`forwards_configs`] says so; anything that
/// does not decode is left to the local handler, which answers it as usual.
fn decided_by_controller(request: &Request<'_>, node_id: i32) -> bool {
    let mut body = request.body.clone();
    match request.key {
        ApiKey::AlterConfigs => {
            bounded::decode::<AlterConfigsRequest>(&mut body, request.version, request.flexible)
                .is_ok_and(|r| {
                    let resources = r.resources.iter();
                    forwards_configs(
                        resources.map(|c| (c.resource_type, c.resource_name.as_str())),
                        node_id,
                    )
                })
        }
        ApiKey::IncrementalAlterConfigs => bounded::decode::<IncrementalAlterConfigsRequest>(
            &mut body,
            request.version,
            request.flexible,
        )
        .is_ok_and(|r| {
            let resources = r.resources.iter();
            forwards_configs(
                resources.map(|c| (c.resource_type, c.resource_name.as_str())),
                node_id,
            )
        }),
        _ => true,
    }
}

/// A request forwarded by another broker, arriving on this node's CONTROLLER listener: decided
/// by the broker's own handler here (never forwarded again) and answered as one frame.
pub async fn handle_forwarded(broker: &Arc<Broker>, frame: Bytes) -> Result<Bytes, CloseReason> {
    let reply = super::handle_inner(broker, frame, None, None, true)?;
    let chunks = reply.resolve().await?;
    let mut out = BytesMut::new();
    for c in chunks.unwrap_or_default() {
        match c {
            Chunk::Bytes(b) => out.extend_from_slice(&b),
            Chunk::File(_) => {
                return Err(CloseReason::HandlerFailed {
                    key: ApiKey::CreateTopics,
                    version: 0,
                    reason: "a forwarded request answered with file records".into(),
                })
            }
        }
    }
    Ok(out.freeze())
}

/// DescribeQuorum answered from this node's own voter (a lone voter, or the leader: a
/// non-leading member forwarded it). Without a controller (shutting down): NOT_CONTROLLER.
pub async fn describe_quorum_here(
    broker: Arc<Broker>,
    version: i16,
    request: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    let Some(handle) = broker.controller_handle() else {
        return DescribeQuorumResponse::default()
            .with_error_code(kafka_protocol::error::ResponseError::NotController.code());
    };
    let config = &broker.config;
    let apis = crate::controller::rpc::ControllerApis {
        handle,
        cluster_id: broker.identity.cluster_id.clone(),
        voters: config
            .effective_quorum_voters()
            .iter()
            .map(|v| crate::controller::rpc::VoterEndpoint {
                id: v.id,
                host: v.host.clone(),
                port: v.port,
            })
            .collect(),
        listener_name: config
            .effective_listeners()
            .into_iter()
            .find(|l| l.controller)
            .map_or_else(|| "CONTROLLER".to_string(), |l| l.name),
        wall_clock: Arc::new(crate::broker::now_ms),
        admin: None,
    };
    apis.describe_quorum(request, version).await
}

/// CreateTopics (v7) for `topics`, sent to the active controller on behalf of this broker (its
/// internal topics, Metadata auto-creation), answered as the controller decided, once this
/// broker's own image names the created topics (or after `FORWARD_TIMEOUT`). None when this
/// node leads meanwhile (the caller decides it itself).
pub async fn create_topics(
    broker: &Broker,
    forwarder: &Forwarder,
    topics: &[crate::controller::CreatableTopic],
) -> Option<super::topics::Decided> {
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
    };
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, RequestHeader};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    const VERSION: i16 = 7;
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(FORWARD_TIMEOUT.as_millis() as i32)
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    CreatableTopic::default()
                        .with_name(StrBytes::from_string(t.name.clone()).into())
                        .with_num_partitions(t.num_partitions)
                        .with_replication_factor(t.replication_factor)
                        .with_assignments(
                            t.assignments
                                .iter()
                                .map(|(p, replicas)| {
                                    CreatableReplicaAssignment::default()
                                        .with_partition_index(*p)
                                        .with_broker_ids(
                                            replicas.iter().map(|&b| b.into()).collect(),
                                        )
                                })
                                .collect(),
                        )
                        .with_configs(
                            t.configs
                                .iter()
                                .map(|(k, v)| {
                                    CreatableTopicConfig::default()
                                        .with_name(StrBytes::from_string(k.clone()))
                                        .with_value(v.clone().map(StrBytes::from_string))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let failed = |reason: String| {
        topics
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    Err((
                        kafka_protocol::error::ResponseError::RequestTimedOut.code(),
                        reason.clone(),
                    )),
                )
            })
            .collect::<super::topics::Decided>()
    };
    let mut frame = BytesMut::new();
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::CreateTopics as i16)
        .with_request_api_version(VERSION)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_string(format!(
            "sluice-broker-{}",
            broker.config.node_id
        ))));
    let encoded = header
        .encode(
            &mut frame,
            ApiKey::CreateTopics.request_header_version(VERSION),
        )
        .and_then(|_| request.encode(&mut frame, VERSION));
    if let Err(e) = encoded {
        return Some(failed(format!("encoding CreateTopics: {e}")));
    }
    let answer = match forwarder.forward(frame.freeze()).await {
        Ok(Some(a)) => a,
        Ok(None) => return None,
        Err(e) => return Some(failed(e.to_string())),
    };
    let mut body = answer.slice(4..);
    let decoded = kafka_protocol::messages::ResponseHeader::decode(
        &mut body,
        ApiKey::CreateTopics.response_header_version(VERSION),
    )
    .and_then(|_| CreateTopicsResponse::decode(&mut body, VERSION));
    let response = match decoded {
        Ok(r) => r,
        Err(e) => return Some(failed(format!("decoding CreateTopics: {e}"))),
    };
    let decided: super::topics::Decided = response
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.as_str().to_string();
            let result = if t.error_code == 0 {
                Ok(crate::controller::CreatedTopic {
                    topic_id: t.topic_id,
                    num_partitions: t.num_partitions,
                    replication_factor: t.replication_factor,
                })
            } else {
                Err((
                    t.error_code,
                    t.error_message.map(|m| m.to_string()).unwrap_or_default(),
                ))
            };
            (name, result)
        })
        .collect();
    // The controller answered after its own image had the topics; wait for ours to follow.
    let created: Vec<&String> = decided
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(n, _)| n)
        .collect();
    let mut images = broker.metadata.subscribe();
    let _ = tokio::time::timeout(
        FORWARD_TIMEOUT,
        images.wait_for(|image| created.iter().all(|n| image.topic(n).is_some())),
    )
    .await;
    Some(decided)
}

/// The broker side of forwarding: where the voters' CONTROLLER listeners are, who leads, and
/// idle connections to reuse. Thread-safe.
pub struct Forwarder {
    me: i32,
    /// The voters' CONTROLLER listeners (a broker-only node's: shared with its observer, which
    /// learns them when only bootstrap servers are configured).
    voters: crate::controller::channel::ControllerEndpoints,
    leader: watch::Receiver<LeaderAndEpoch>,
    idle: parking_lot::Mutex<Vec<(i32, TcpStream)>>,
}

impl Forwarder {
    pub fn new(
        me: i32,
        voters: crate::controller::channel::ControllerEndpoints,
        leader: watch::Receiver<LeaderAndEpoch>,
    ) -> Forwarder {
        Forwarder {
            me,
            voters,
            leader,
            idle: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// Whether this node's own controller leads the quorum now (then nothing is forwarded).
    pub fn leads_here(&self) -> bool {
        self.leader.borrow().leader_id == Some(self.me)
    }

    /// The leader named by the quorum, if it is another voter.
    fn remote_leader(&self) -> Option<(i32, String)> {
        let id = self.leader.borrow().leader_id?;
        if id == self.me {
            return None;
        }
        self.voters.address_of(id).map(|a| (id, a))
    }

    /// Sends the request `frame` (header and body, no length prefix) to the active controller
    /// and returns its whole answer (length prefix included). When this node becomes the leader
    /// meanwhile, `Ok(None)`: the caller handles the request itself.
    pub async fn forward(&self, frame: Bytes) -> Result<Option<Bytes>, ForwardError> {
        let deadline = tokio::time::Instant::now() + FORWARD_TIMEOUT;
        let mut leader = self.leader.clone();
        let mut last = String::from("no leader known");
        loop {
            if self.leads_here() {
                return Ok(None);
            }
            if let Some((id, addr)) = self.remote_leader() {
                match self.attempt(id, &addr, &frame, deadline).await {
                    Ok(answer) => return Ok(Some(answer)),
                    Err(e) => last = format!("controller {id} at {addr}: {e}"),
                }
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(ForwardError::Timeout(FORWARD_TIMEOUT, last));
            }
            // Wait for a leader change or a short backoff, whichever comes first.
            let wait = BACKOFF.min(deadline - now);
            let _ = tokio::time::timeout(wait, leader.changed()).await;
        }
    }

    async fn attempt(
        &self,
        id: i32,
        addr: &str,
        frame: &Bytes,
        deadline: tokio::time::Instant,
    ) -> Result<Bytes, String> {
        let pooled = {
            let mut idle = self.idle.lock();
            idle.iter()
                .position(|(i, _)| *i == id)
                .map(|p| idle.swap_remove(p).1)
        };
        let fresh = pooled.is_none();
        let mut stream = match pooled {
            Some(s) => s,
            None => tokio::time::timeout_at(deadline, TcpStream::connect(addr))
                .await
                .map_err(|_| "connect timed out".to_string())?
                .map_err(|e| format!("connect: {e}"))?,
        };
        let _ = stream.set_nodelay(true);
        match tokio::time::timeout_at(deadline, exchange(&mut stream, frame)).await {
            Ok(Ok(answer)) => {
                self.idle.lock().push((id, stream));
                Ok(answer)
            }
            Ok(Err(e)) if !fresh => {
                // A pooled connection the controller closed meanwhile: once more on a new one.
                tracing::debug!("forwarding: pooled connection to {id} failed ({e}); reconnecting");
                Box::pin(self.attempt(id, addr, frame, deadline)).await
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err("no answer before the deadline".to_string()),
        }
    }
}

/// Writes one request frame and reads one whole answer frame (prefix included).
async fn exchange(stream: &mut TcpStream, frame: &Bytes) -> Result<Bytes, String> {
    let mut out = BytesMut::with_capacity(frame.len() + 4);
    out.put_i32(frame.len() as i32);
    out.extend_from_slice(frame);
    stream
        .write_all(&out)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let n = i32::from_be_bytes(size);
    let n = usize::try_from(n)
        .ok()
        .filter(|n| (4..=MAX_RESPONSE_BYTES).contains(n))
        .ok_or_else(|| format!("answer size {n} out of bounds"))?;
    let mut answer = BytesMut::with_capacity(n + 4);
    answer.put_slice(&size);
    answer.resize(n + 4, 0);
    stream
        .read_exact(&mut answer[4..])
        .await
        .map_err(|e| format!("read: {e}"))?;
    Ok(answer.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_group_and_broker_config_changes_are_forwarded() {
        assert!(forwards_configs([(2, "t"), (2, "u")], 1));
        assert!(
            forwards_configs([(2, "t"), (4, "")], 1),
            "the cluster default"
        );
        assert!(forwards_configs([(4, "1")], 1), "this broker");
        assert!(
            !forwards_configs([(4, "2")], 1),
            "another broker's id is refused here"
        );
        assert!(!forwards_configs([(4, "x")], 1), "a bad id is refused here");
        assert!(forwards_configs([(32, "g")], 1), "group configs");
        assert!(forwards_configs([(2, "t"), (32, "g")], 1));
        assert!(
            !forwards_configs([(4, "2"), (32, "g")], 1),
            "a mix with another broker's id stays here"
        );
        assert!(
            !forwards_configs([(16, "m")], 1),
            "client metrics stay here"
        );
        assert!(!forwards_configs([], 1), "nothing to forward");
    }

    #[tokio::test]
    async fn a_request_goes_to_the_leader_and_its_answer_comes_back_whole() {
        use tokio::net::TcpListener;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut answers = Vec::new();
            for _ in 0..2 {
                let mut size = [0u8; 4];
                s.read_exact(&mut size).await.unwrap();
                let mut req = vec![0u8; i32::from_be_bytes(size) as usize];
                s.read_exact(&mut req).await.unwrap();
                answers.push(req.clone());
                // Answer: the request's bytes reversed, as a frame.
                req.reverse();
                let mut out = (req.len() as i32).to_be_bytes().to_vec();
                out.extend(req);
                s.write_all(&out).await.unwrap();
            }
            answers
        });
        let (tx, rx) = watch::channel(LeaderAndEpoch {
            leader_id: Some(2),
            epoch: 1,
        });
        let f = Forwarder::new(1, vec![(2, addr.to_string())].into(), rx);
        assert!(!f.leads_here());
        let a = f.forward(Bytes::from_static(b"abcdef")).await.unwrap();
        assert_eq!(a.unwrap(), Bytes::from_static(b"\0\0\0\x06fedcba"));
        // The second request reuses the connection (the server accepts only one).
        let b = f.forward(Bytes::from_static(b"xyz1")).await.unwrap();
        assert_eq!(b.unwrap(), Bytes::from_static(b"\0\0\0\x041zyx"));
        assert_eq!(
            server.await.unwrap(),
            vec![b"abcdef".to_vec(), b"xyz1".to_vec()]
        );
        // Once this node leads, nothing is forwarded.
        tx.send_replace(LeaderAndEpoch {
            leader_id: Some(1),
            epoch: 2,
        });
        assert!(f.leads_here());
        assert!(f.forward(Bytes::from_static(b"q")).await.unwrap().is_none());
    }
}
