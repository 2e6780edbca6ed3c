//! Kafka's controller RPCs on the CONTROLLER listener (Kafka's `ControllerApis`): ApiVersions,
//! BrokerRegistration, BrokerHeartbeat, AllocateProducerIds, AlterPartition, DescribeQuorum,
//! DescribeCluster (KIP-919's controller endpoints), and Fetch / FetchSnapshot of
//! `__cluster_metadata` for observers (`controller::metadata_fetch`),
//! decoded and
//! encoded with the `kafka-protocol` crate. Each request runs one command through
//! [`ControllerHandle::run`] (DescribeQuorum reads the quorum status instead) and is answered
//! once that command's records are committed and applied.
//!
//! Invariants: no socket here ([`ControllerApis::handle`] maps one request frame to one response
//! frame or a [`CloseReason`]); a refusal is Kafka's error code in the response, never a panic;
//! an API that Kafka's controller listener does not serve (or that Sluice does not implement
//! there), or a version outside [`CONTROLLER_APIS`], closes the connection as Kafka's socket
//! server does ("not enabled on this listener"), except ApiVersions, which gets Kafka's v0
//! UNSUPPORTED_VERSION answer.
//!
//! Approximations (DescribeQuorum): offsets are raft indexes (they start at 1 where Kafka's start
//! at 0); a follower's log end offset is what raft-rs's progress says it has matched; the fetch
//! and caught-up times are the leader's observations of each voter converted to wall-clock
//! milliseconds; observers are the broker-only nodes that fetched `__cluster_metadata` from
//! this leader within Kafka's 5-minute observer session (`controller::metadata_fetch`: their log
//! end offset is their fetch offset - 1, a raft index like the voters'), not known to a new
//! leader until they fetch from it; replica directory ids are zero (Sluice has no KIP-853
//! directory ids).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{
    alter_partition_response, describe_quorum_response, AllocateProducerIdsRequest,
    AllocateProducerIdsResponse, AlterPartitionRequest, AlterPartitionResponse, ApiKey,
    ApiVersionsRequest, ApiVersionsResponse, BrokerHeartbeatRequest, BrokerHeartbeatResponse,
    BrokerRegistrationRequest, BrokerRegistrationResponse, DescribeClusterRequest,
    DescribeClusterResponse, DescribeQuorumRequest, DescribeQuorumResponse,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::driver::{lift, Clock, ControllerHandle};
use super::{AlterPartitionItem, BrokerRegistration, HeartbeatRequest, IsrMember};
use crate::api::{CloseReason, RequestContext};
use crate::metadata::records::BrokerEndpoint;
use crate::protocol::bounded;
use crate::protocol::header::{header_is_flexible, parse_header_rest, parse_request_header};
use crate::protocol::versions::ApiRange;

/// The metadata log's name, as Kafka's DescribeQuorum names it.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// The APIs (and versions) the controller listener serves, in key order.
pub const CONTROLLER_APIS: &[ApiRange] = &[
    // Observers (broker-only nodes) fetch `__cluster_metadata` by topic id
    // (`controller::metadata_fetch`).
    ApiRange {
        key: ApiKey::Fetch,
        min: 13,
        max: 17,
    },
    ApiRange {
        key: ApiKey::ApiVersions,
        min: 0,
        max: 4,
    },
    ApiRange {
        key: ApiKey::DescribeQuorum,
        min: 0,
        max: 2,
    },
    // Kafka 4.0 removed v0-1 (topic names); v3 carries broker epochs (KIP-903).
    ApiRange {
        key: ApiKey::AlterPartition,
        min: 2,
        max: 3,
    },
    ApiRange {
        key: ApiKey::FetchSnapshot,
        min: 0,
        max: 1,
    },
    // KIP-919: what `--bootstrap-controller` admin clients read (endpoint type CONTROLLER).
    ApiRange {
        key: ApiKey::DescribeCluster,
        min: 0,
        max: 2,
    },
    ApiRange {
        key: ApiKey::BrokerRegistration,
        min: 0,
        max: 4,
    },
    ApiRange {
        key: ApiKey::BrokerHeartbeat,
        min: 0,
        max: 1,
    },
    ApiRange {
        key: ApiKey::AllocateProducerIds,
        min: 0,
        max: 0,
    },
];

fn served(key: ApiKey, version: i16) -> bool {
    CONTROLLER_APIS
        .iter()
        .any(|r| r.key == key && version >= r.min && version <= r.max)
}

/// One voter's CONTROLLER endpoint (DescribeQuorum v2's `nodes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterEndpoint {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

/// Runs a forwarded admin request (CreateTopics, DeleteTopics, CreatePartitions, topic
/// AlterConfigs / IncrementalAlterConfigs, ElectLeaders: `api::forward::ADMIN_APIS`) through the
/// broker's own handlers on this node (combined, or controller-only with an image and no logs): request frame (no length prefix) in, the whole
/// response frame out. The broker handler never forwards such a request again.
pub type AdminDelegate = std::sync::Arc<
    dyn Fn(
            Bytes,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Bytes, CloseReason>> + Send>,
        > + Send
        + Sync,
>;

/// The controller's request handlers. Cheap to clone; thread-safe (the handle is).
#[derive(Clone)]
pub struct ControllerApis {
    pub handle: ControllerHandle,
    /// This cluster's id (`meta.properties`): registrations naming another are refused.
    pub cluster_id: String,
    /// The voters' CONTROLLER endpoints and the listener's name (DescribeQuorum v2).
    pub voters: Vec<VoterEndpoint>,
    pub listener_name: String,
    /// Wall-clock milliseconds (DescribeQuorum's timestamps).
    pub wall_clock: Clock,
    /// Forwarded admin requests: through a combined node's broker handlers, or a controller-only
    /// node's (`controller::dedicated`), which decide on this controller.
    pub admin: Option<AdminDelegate>,
}

impl ControllerApis {
    /// Handles one request frame (after the length prefix); returns the whole response frame
    /// (with its length prefix), or why the connection must close.
    pub async fn handle(&self, mut frame: Bytes) -> Result<Bytes, CloseReason> {
        let whole = frame.clone();
        let (key, version, correlation_id) = parse_request_header(&mut frame)?;
        let api_key = ApiKey::try_from(key).map_err(|_| CloseReason::UnknownApiKey(key))?;
        if let Some(admin) = &self.admin {
            if crate::api::forward::ADMIN_APIS.contains(&api_key) {
                // The broker's handlers check the version and decode the body themselves.
                return admin(whole).await;
            }
        }
        if api_key == ApiKey::ApiVersions && !served(api_key, version) {
            return Ok(unsupported_api_versions(correlation_id));
        }
        if !served(api_key, version) {
            return Err(CloseReason::UnsupportedVersion {
                key: api_key,
                version,
            });
        }
        let flexible = header_is_flexible(api_key, version);
        let client_id = parse_header_rest(&mut frame, flexible)?;
        let ctx = RequestContext {
            api_key,
            api_version: version,
            correlation_id,
            client_id,
            peer: None,
            listener: None,
            forwarded: false,
        };
        let malformed = |e: anyhow::Error| CloseReason::Malformed {
            key: api_key,
            version,
            reason: e.to_string(),
        };
        match api_key {
            ApiKey::ApiVersions => {
                let _: ApiVersionsRequest =
                    bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
                encode(&ctx, &api_versions())
            }
            ApiKey::BrokerRegistration => {
                let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
                encode(&ctx, &self.broker_registration(r).await)
            }
            ApiKey::BrokerHeartbeat => {
                let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
                encode(&ctx, &self.broker_heartbeat(r).await)
            }
            ApiKey::AllocateProducerIds => {
                let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
                encode(&ctx, &self.allocate_producer_ids(r).await)
            }
            ApiKey::DescribeQuorum => {
                let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
                encode(&ctx, &self.describe_quorum(r, version).await)
            }
            ApiKey::AlterPartition => {
                let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
                encode(&ctx, &self.alter_partition(r, version).await)
            }
            ApiKey::DescribeCluster => {
                let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
                encode(&ctx, &self.describe_cluster(&r, version))
            }
            ApiKey::Fetch => {
                let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
                encode(&ctx, &super::metadata_fetch::fetch(self, r, version).await)
            }
            ApiKey::FetchSnapshot => {
                let r = bounded::decode(&mut frame, version, flexible).map_err(malformed)?;
                encode(&ctx, &super::metadata_fetch::fetch_snapshot(self, r).await)
            }
            _ => Err(CloseReason::UnsupportedVersion {
                key: api_key,
                version,
            }),
        }
    }

    /// BrokerRegistration (Kafka's `ClusterControlManager.registerBroker`): the cluster id must
    /// be this cluster's (INCONSISTENT_CLUSTER_ID), then the controller decides
    /// (DUPLICATE_BROKER_REGISTRATION, UNSUPPORTED_VERSION for feature ranges that exclude a
    /// finalized level). `previous_broker_epoch` (v3+; -1 before) tells a clean restart from an
    /// unclean one (see `Controller::register_broker`).
    pub async fn broker_registration(
        &self,
        r: BrokerRegistrationRequest,
    ) -> BrokerRegistrationResponse {
        let refused = |error: ResponseError| {
            BrokerRegistrationResponse::default()
                .with_error_code(error.code())
                .with_broker_epoch(-1)
        };
        if r.cluster_id.as_str() != self.cluster_id {
            tracing::info!(
                broker = r.broker_id.0,
                "controller: refusing a registration for cluster {:?}, this is {:?}",
                r.cluster_id.as_str(),
                self.cluster_id
            );
            return refused(ResponseError::InconsistentClusterId);
        }
        let request = BrokerRegistration {
            broker_id: r.broker_id.0,
            incarnation_id: r.incarnation_id,
            listeners: r
                .listeners
                .iter()
                .map(|l| BrokerEndpoint {
                    name: l.name.to_string(),
                    host: l.host.to_string(),
                    port: l.port,
                    security_protocol: l.security_protocol,
                })
                .collect(),
            features: r
                .features
                .iter()
                .map(|f| {
                    (
                        f.name.to_string(),
                        f.min_supported_version,
                        f.max_supported_version,
                    )
                })
                .collect(),
            rack: r.rack.as_ref().map(|s| s.to_string()),
            previous_broker_epoch: r.previous_broker_epoch,
        };
        let decided = self
            .handle
            .run(move |c, ctx| lift(c.register_broker(&request, ctx.now_ms, ctx.next_offset)))
            .await;
        match decided {
            Ok(Ok(epoch)) => BrokerRegistrationResponse::default()
                .with_error_code(0)
                .with_broker_epoch(epoch),
            Ok(Err(e)) => {
                tracing::info!(
                    broker = r.broker_id.0,
                    "controller: registration refused: {}",
                    e.message
                );
                refused(e.error)
            }
            Err(e) => BrokerRegistrationResponse::default()
                .with_error_code(e.code())
                .with_broker_epoch(-1),
        }
    }

    /// BrokerHeartbeat (Kafka's `ReplicationControlManager.processBrokerHeartbeat`): STALE_BROKER_EPOCH
    /// for an unknown broker or another epoch; otherwise is_caught_up (metadata offset at least
    /// the registration's), is_fenced, should_shut_down. An error answer says fenced.
    pub async fn broker_heartbeat(&self, r: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse {
        let request = HeartbeatRequest {
            broker_id: r.broker_id.0,
            broker_epoch: r.broker_epoch,
            current_metadata_offset: r.current_metadata_offset,
            want_fence: r.want_fence,
            want_shutdown: r.want_shut_down,
        };
        let failed = |code: i16| {
            BrokerHeartbeatResponse::default()
                .with_error_code(code)
                .with_is_fenced(true)
        };
        match self
            .handle
            .run(move |c, ctx| lift(c.heartbeat(&request, ctx.now_ms, ctx.next_offset)))
            .await
        {
            Ok(Ok(a)) => BrokerHeartbeatResponse::default()
                .with_error_code(0)
                .with_is_caught_up(a.is_caught_up)
                .with_is_fenced(a.is_fenced)
                .with_should_shut_down(a.should_shut_down),
            Ok(Err(e)) => failed(e.code()),
            Err(e) => failed(e.code()),
        }
    }

    /// AllocateProducerIds: the next block of 1000 ids (STALE_BROKER_EPOCH for an unknown
    /// broker or epoch).
    pub async fn allocate_producer_ids(
        &self,
        r: AllocateProducerIdsRequest,
    ) -> AllocateProducerIdsResponse {
        let (id, epoch) = (r.broker_id.0, r.broker_epoch);
        let failed = |code: i16| AllocateProducerIdsResponse::default().with_error_code(code);
        match self
            .handle
            .run(move |c, _| lift(c.allocate_producer_ids(id, epoch)))
            .await
        {
            Ok(Ok(block)) => AllocateProducerIdsResponse::default()
                .with_error_code(0)
                .with_producer_id_start(block.first_producer_id.into())
                .with_producer_id_len(block.len),
            Ok(Err(e)) => failed(e.code()),
            Err(e) => failed(e.code()),
        }
    }

    /// AlterPartition (Kafka's `ReplicationControlManager.alterPartition`, see
    /// `controller::alter_partition`): one command for the whole request. v2 sends `new_isr`
    /// (broker epochs unchecked), v3 `new_isr_with_epochs` (KIP-903: an epoch other than -1 must
    /// be the member's registration). Top-level errors (STALE_BROKER_EPOCH, NOT_CONTROLLER) leave
    /// `topics` empty, as Kafka does; a per-partition error carries only the code.
    pub async fn alter_partition(
        &self,
        r: AlterPartitionRequest,
        version: i16,
    ) -> AlterPartitionResponse {
        use alter_partition_response::{PartitionData, TopicData};
        let (broker_id, broker_epoch) = (r.broker_id.0, r.broker_epoch);
        let mut shape: Vec<(uuid::Uuid, Vec<i32>)> = Vec::with_capacity(r.topics.len());
        let mut items = Vec::new();
        for t in &r.topics {
            let mut indexes = Vec::with_capacity(t.partitions.len());
            for p in &t.partitions {
                let new_isr = if version >= 3 {
                    p.new_isr_with_epochs
                        .iter()
                        .map(|m| IsrMember {
                            broker_id: m.broker_id.0,
                            broker_epoch: m.broker_epoch,
                        })
                        .collect()
                } else {
                    p.new_isr
                        .iter()
                        .map(|b| IsrMember::unchecked(b.0))
                        .collect()
                };
                indexes.push(p.partition_index);
                items.push(AlterPartitionItem {
                    topic_id: t.topic_id,
                    partition: p.partition_index,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    new_isr,
                    leader_recovery_state: p.leader_recovery_state,
                });
            }
            shape.push((t.topic_id, indexes));
        }
        let decided = self
            .handle
            .run(move |c, _| c.alter_partitions(broker_id, broker_epoch, &items))
            .await;
        let answers = match decided {
            Ok(Ok(answers)) => answers,
            Ok(Err(e)) => {
                tracing::info!(
                    broker = broker_id,
                    "controller: AlterPartition refused: {}",
                    e.message
                );
                return AlterPartitionResponse::default().with_error_code(e.code());
            }
            Err(e) => return AlterPartitionResponse::default().with_error_code(e.code()),
        };
        let mut answers = answers.into_iter();
        let topics = shape
            .into_iter()
            .map(|(topic_id, indexes)| {
                let partitions = indexes
                    .into_iter()
                    .map(|index| {
                        let base = PartitionData::default().with_partition_index(index);
                        match answers.next() {
                            Some(Ok(a)) => base
                                .with_error_code(a.error.map_or(0, |e| e.code()))
                                .with_leader_id(a.leader.into())
                                .with_leader_epoch(a.leader_epoch)
                                .with_isr(a.isr.into_iter().map(Into::into).collect())
                                .with_leader_recovery_state(super::LEADER_RECOVERED)
                                .with_partition_epoch(a.partition_epoch),
                            Some(Err(e)) => {
                                tracing::debug!(
                                    broker = broker_id,
                                    partition = index,
                                    "controller: AlterPartition: {}",
                                    e.message
                                );
                                base.with_error_code(e.code())
                            }
                            None => base.with_error_code(ResponseError::UnknownServerError.code()),
                        }
                    })
                    .collect();
                TopicData::default()
                    .with_topic_id(topic_id)
                    .with_partitions(partitions)
            })
            .collect();
        AlterPartitionResponse::default()
            .with_error_code(0)
            .with_topics(topics)
    }

    /// DescribeQuorum (Kafka's `KafkaRaftClient.handleDescribeQuorumRequest`): the metadata
    /// partition only (else UNKNOWN_TOPIC_OR_PARTITION), answered by the leader (else
    /// NOT_LEADER_OR_FOLLOWER), both as partition errors. See the module doc for what is
    /// approximated. Fields a `version` lacks are left out (timestamps before v1, error
    /// messages and nodes before v2).
    /// DescribeCluster on the controller listener (KIP-919, Kafka's `ControllerApis`): endpoint
    /// type CONTROLLER only (UNSUPPORTED_ENDPOINT_TYPE for an unknown type, MISMATCHED_ENDPOINT_TYPE
    /// for BROKER; INVALID_REQUEST for both at v0, whose type is always BROKER); the nodes are the
    /// voters on this listener (Sluice has no ControllerRegistration: `controller.quorum.voters`
    /// names them), the controller id the quorum leader (-1 when none is known).
    pub fn describe_cluster(
        &self,
        r: &DescribeClusterRequest,
        version: i16,
    ) -> DescribeClusterResponse {
        const BROKER: i8 = 1;
        const CONTROLLER: i8 = 2;
        let refused = |error: ResponseError, message: String| {
            let code = if version == 0 {
                ResponseError::InvalidRequest.code()
            } else {
                error.code()
            };
            DescribeClusterResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message)))
        };
        match r.endpoint_type {
            CONTROLLER => {}
            BROKER => {
                return refused(
                    ResponseError::MismatchedEndpointType,
                    "The request was sent to an endpoint of type CONTROLLER, but we wanted an \
                     endpoint of type BROKER"
                        .into(),
                )
            }
            other => {
                return refused(
                    ResponseError::UnsupportedEndpointType,
                    format!("Unsupported endpoint type {other}"),
                )
            }
        }
        let leader = self.handle.leader().borrow().leader_id;
        let controller_id = leader
            .filter(|id| self.voters.iter().any(|v| v.id == *id))
            .unwrap_or(-1);
        DescribeClusterResponse::default()
            .with_error_code(0)
            .with_endpoint_type(CONTROLLER)
            .with_cluster_id(StrBytes::from_string(self.cluster_id.clone()))
            .with_controller_id(controller_id.into())
            .with_brokers(
                self.voters
                    .iter()
                    .map(|v| {
                        DescribeClusterBroker::default()
                            .with_broker_id(v.id.into())
                            .with_host(StrBytes::from_string(v.host.clone()))
                            .with_port(i32::from(v.port))
                    })
                    .collect(),
            )
            .with_cluster_authorized_operations(crate::cluster::acl::authorized(
                r.include_cluster_authorized_operations,
                crate::cluster::acl::CLUSTER_OPERATIONS,
            ))
    }

    pub async fn describe_quorum(
        &self,
        r: DescribeQuorumRequest,
        version: i16,
    ) -> DescribeQuorumResponse {
        use describe_quorum_response::{Listener, Node, PartitionData, ReplicaState, TopicData};
        let only_metadata = r.topics.len() == 1
            && r.topics[0].topic_name.as_str() == METADATA_TOPIC
            && r.topics[0].partitions.len() == 1
            && r.topics[0].partitions[0].partition_index == 0;
        let error_partition = |error: ResponseError| {
            DescribeQuorumResponse::default()
                .with_error_code(0)
                .with_topics(vec![TopicData::default()
                    .with_topic_name(StrBytes::from_static_str(METADATA_TOPIC).into())
                    .with_partitions(vec![PartitionData::default()
                        .with_partition_index(0)
                        .with_error_code(error.code())
                        .with_error_message(Some(StrBytes::from_string(
                            error.to_string(),
                        )))])])
        };
        if !only_metadata {
            return error_partition(ResponseError::UnknownTopicOrPartition);
        }
        let Some(status) = self.handle.quorum_status().await else {
            return error_partition(ResponseError::NotLeaderOrFollower);
        };
        if !status.is_leader {
            return error_partition(ResponseError::NotLeaderOrFollower);
        }
        let wall_now = (self.wall_clock)();
        let wall = |t: Option<u64>| match t {
            Some(_) if version < 1 => -1,
            Some(t) => wall_now
                .saturating_sub(i64::try_from(status.now_ms.saturating_sub(t)).unwrap_or(i64::MAX)),
            None => -1,
        };
        let voters = status
            .voters
            .iter()
            .map(|v| {
                ReplicaState::default()
                    .with_replica_id(v.id.into())
                    .with_log_end_offset(
                        v.log_end_offset
                            .and_then(|o| i64::try_from(o).ok())
                            .unwrap_or(-1),
                    )
                    .with_last_fetch_timestamp(wall(v.last_fetch_ms))
                    .with_last_caught_up_timestamp(wall(v.last_caught_up_ms))
            })
            .collect();
        let observers = self
            .handle
            .tail()
            .observers(wall_now)
            .into_iter()
            .map(|(id, o)| {
                let at = |ms: i64| if version < 1 || ms < 0 { -1 } else { ms };
                ReplicaState::default()
                    .with_replica_id(id.into())
                    .with_log_end_offset(i64::try_from(o.log_end_offset).unwrap_or(i64::MAX))
                    .with_last_fetch_timestamp(at(o.last_fetch_ms))
                    .with_last_caught_up_timestamp(at(o.last_caught_up_ms))
            })
            .collect();
        let nodes = self
            .voters
            .iter()
            .filter(|_| version >= 2)
            .map(|v| {
                Node::default()
                    .with_node_id(v.id.into())
                    .with_listeners(vec![Listener::default()
                        .with_name(StrBytes::from_string(self.listener_name.clone()))
                        .with_host(StrBytes::from_string(v.host.clone()))
                        .with_port(v.port)])
            })
            .collect();
        DescribeQuorumResponse::default()
            .with_error_code(0)
            .with_topics(vec![TopicData::default()
                .with_topic_name(StrBytes::from_static_str(METADATA_TOPIC).into())
                .with_partitions(vec![PartitionData::default()
                    .with_partition_index(0)
                    .with_error_code(0)
                    .with_leader_id(status.leader.leader_id.unwrap_or(-1).into())
                    .with_leader_epoch(i32::try_from(status.leader.epoch).unwrap_or(i32::MAX))
                    .with_high_watermark(i64::try_from(status.high_watermark).unwrap_or(i64::MAX))
                    .with_current_voters(voters)
                    .with_observers(observers)])])
            .with_nodes(nodes)
    }
}

/// The controller listener's ApiVersions answer: [`CONTROLLER_APIS`].
pub fn api_versions() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(
            CONTROLLER_APIS
                .iter()
                .map(|a| {
                    ApiVersion::default()
                        .with_api_key(a.key as i16)
                        .with_min_version(a.min)
                        .with_max_version(a.max)
                })
                .collect(),
        )
}

/// Kafka's answer to an ApiVersions version it does not know: v0 body, UNSUPPORTED_VERSION,
/// plus the table so the client retries inside it.
fn unsupported_api_versions(correlation_id: i32) -> Bytes {
    let mut buf = BytesMut::with_capacity(16 + 6 * CONTROLLER_APIS.len());
    buf.put_i32(0);
    buf.put_i32(correlation_id);
    buf.put_i16(ResponseError::UnsupportedVersion.code());
    buf.put_i32(CONTROLLER_APIS.len() as i32);
    for a in CONTROLLER_APIS {
        buf.put_i16(a.key as i16);
        buf.put_i16(a.min);
        buf.put_i16(a.max);
    }
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    buf.freeze()
}

fn encode(ctx: &RequestContext, response: &impl Encodable) -> Result<Bytes, CloseReason> {
    let mut buf = BytesMut::with_capacity(128);
    buf.put_i32(0);
    crate::api::put_response_header(&mut buf, ctx);
    response
        .encode(&mut buf, ctx.api_version)
        .map_err(|e| CloseReason::Encode {
            key: ctx.api_key,
            version: ctx.api_version,
            reason: e.to_string(),
        })?;
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.freeze())
}

#[cfg(test)]
#[path = "rpc_tests.rs"]
mod tests;
