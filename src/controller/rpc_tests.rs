//! The controller RPC handlers on a lone voter (and on a voter without a majority for
//! NOT_CONTROLLER), through `ControllerApis::handle`: request bytes in, response bytes out.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::broker_registration_request::{Feature, Listener};
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    alter_partition_request, AllocateProducerIdsRequest, AllocateProducerIdsResponse,
    AlterPartitionRequest, AlterPartitionResponse, ApiVersionsRequest, ApiVersionsResponse,
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse, DescribeClusterRequest, DescribeClusterResponse,
    DescribeQuorumRequest, DescribeQuorumResponse, ProduceRequest, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, HeaderVersion, Request, StrBytes};
use uuid::Uuid;

use super::*;
use crate::controller::driver::{self, DriverConfig, MetadataApplier, RunningController};
use crate::controller::{bootstrap_records, ControllerSettings, Outcome, BOOTSTRAP_FEATURES};
use crate::metadata::MetadataRecord;
use crate::quorum::{NodeConfig, QuorumConfig};

const CLUSTER: &str = "rpc-unit-cluster-0000AA";

struct Nothing;
impl MetadataApplier for Nothing {
    fn apply(&self, _: u64, _: Vec<MetadataRecord>) {}
    fn load_snapshot(&self, _: u64, _: Vec<MetadataRecord>) {}
}

fn driver_config() -> DriverConfig {
    DriverConfig {
        settings: ControllerSettings::default(),
        bootstrap: bootstrap_records(BOOTSTRAP_FEATURES),
        tick_interval: Duration::from_millis(50),
        seed: 3,
        clock: Arc::new(crate::broker::now_ms),
    }
}

fn apis(running: &RunningController) -> ControllerApis {
    ControllerApis {
        handle: running.handle.clone(),
        cluster_id: CLUSTER.into(),
        voters: vec![VoterEndpoint {
            id: 1,
            host: "127.0.0.1".into(),
            port: 9093,
        }],
        listener_name: "CONTROLLER".into(),
        wall_clock: Arc::new(crate::broker::now_ms),
        admin: None,
    }
}

/// A lone voter that has become the active controller.
async fn lone_voter(dir: &std::path::Path) -> RunningController {
    let quorum = QuorumConfig {
        node: NodeConfig::new(1, vec![1]),
        dir: dir.to_path_buf(),
        voters: vec![(1, "127.0.0.1:1".into())],
    };
    let running = driver::start(driver_config(), quorum, None, Arc::new(Nothing)).expect("start");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while running
        .handle
        .run(|_, _| Outcome {
            records: vec![],
            answer: (),
        })
        .await
        .is_err()
    {
        assert!(tokio::time::Instant::now() < deadline, "never led");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    running
}

/// A request frame (after the length prefix) with correlation id 7.
fn frame<R: Request>(request: &R, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(R::KEY);
    buf.put_i16(version);
    buf.put_i32(7);
    buf.put_i16(4);
    buf.put_slice(b"test");
    if R::header_version(version) >= 2 {
        buf.put_u8(0);
    }
    request.encode(&mut buf, version).expect("encode");
    buf.freeze()
}

/// Decodes a response frame (with its length prefix).
fn response<R: Request>(mut bytes: Bytes, version: i16) -> R::Response {
    let len = i32::from_be_bytes(bytes[..4].try_into().expect("4 bytes"));
    assert_eq!(len as usize, bytes.len() - 4, "length prefix");
    let _ = bytes.split_to(4);
    let header_version = if R::KEY == ApiVersionsRequest::KEY {
        0
    } else {
        R::Response::header_version(version)
    };
    let header = ResponseHeader::decode(&mut bytes, header_version).expect("header");
    assert_eq!(header.correlation_id, 7);
    let body = R::Response::decode(&mut bytes, version).expect("body");
    assert!(bytes.is_empty(), "{} bytes left", bytes.len());
    body
}

async fn call<R: Request>(apis: &ControllerApis, request: &R, version: i16) -> R::Response {
    let bytes = apis
        .handle(frame(request, version))
        .await
        .expect("answered");
    response::<R>(bytes, version)
}

fn registration(id: i32, incarnation: Uuid) -> BrokerRegistrationRequest {
    BrokerRegistrationRequest::default()
        .with_broker_id(id.into())
        .with_cluster_id(StrBytes::from_static_str(CLUSTER))
        .with_incarnation_id(incarnation)
        .with_listeners(vec![Listener::default()
            .with_name(StrBytes::from_static_str("PLAINTEXT"))
            .with_host(StrBytes::from_static_str("127.0.0.1"))
            .with_port(9092)])
        .with_features(
            BOOTSTRAP_FEATURES
                .iter()
                .map(|(name, level)| {
                    Feature::default()
                        .with_name(StrBytes::from_static_str(name))
                        .with_min_supported_version(0)
                        .with_max_supported_version(*level)
                })
                .collect(),
        )
        .with_rack(Some(StrBytes::from_static_str("r1")))
}

fn heartbeat(id: i32, epoch: i64, offset: i64) -> BrokerHeartbeatRequest {
    BrokerHeartbeatRequest::default()
        .with_broker_id(id.into())
        .with_broker_epoch(epoch)
        .with_current_metadata_offset(offset)
}

fn describe_quorum(topic: &'static str, partition: i32) -> DescribeQuorumRequest {
    DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(StrBytes::from_static_str(topic).into())
        .with_partitions(vec![
            PartitionData::default().with_partition_index(partition)
        ])])
}

#[tokio::test]
async fn api_versions_lists_the_controller_apis_and_refuses_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = lone_voter(dir.path()).await;
    let apis = apis(&running);
    let r: ApiVersionsResponse = call(&apis, &ApiVersionsRequest::default(), 3).await;
    assert_eq!(r.error_code, 0);
    let keys: Vec<(i16, i16, i16)> = r
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    assert_eq!(
        keys,
        vec![
            (1, 13, 17),
            (18, 0, 4),
            (55, 0, 2),
            (56, 2, 3),
            (59, 0, 1),
            (60, 0, 2),
            (62, 0, 4),
            (63, 0, 1),
            (67, 0, 0)
        ]
    );
    // An ApiVersions version the controller does not know: v0 body with UNSUPPORTED_VERSION.
    let mut v99 = BytesMut::from(&frame(&ApiVersionsRequest::default(), 3)[..]);
    v99[2..4].copy_from_slice(&99i16.to_be_bytes());
    let bytes = apis.handle(v99.freeze()).await.expect("answered");
    let old: ApiVersionsResponse = {
        let mut b = bytes.slice(8..);
        ApiVersionsResponse::decode(&mut b, 0).expect("v0 body")
    };
    assert_eq!(old.error_code, 35);
    assert_eq!(old.api_keys.len(), CONTROLLER_APIS.len());
    // Produce is not served on the controller listener: the connection closes.
    let produce = apis.handle(frame(&ProduceRequest::default(), 9)).await;
    assert!(
        matches!(produce, Err(CloseReason::UnsupportedVersion { .. })),
        "{produce:?}"
    );
    // BrokerHeartbeat v2 does not exist: closed too.
    assert!(apis.handle(frame(&heartbeat(1, 1, 1), 1)).await.is_ok());
    let mut v2 = BytesMut::from(&frame(&heartbeat(1, 1, 1), 1)[..]);
    v2[2..4].copy_from_slice(&2i16.to_be_bytes());
    assert!(matches!(
        apis.handle(v2.freeze()).await,
        Err(CloseReason::UnsupportedVersion { .. })
    ));
    // A truncated body is malformed, and a frame shorter than a header is refused.
    let whole = frame(&registration(1, Uuid::new_v4()), 4);
    let cut = whole.slice(..whole.len() - 5);
    assert!(matches!(
        apis.handle(cut).await,
        Err(CloseReason::Malformed { .. })
    ));
    assert!(matches!(
        apis.handle(Bytes::from_static(&[0, 62, 0])).await,
        Err(CloseReason::Header(_))
    ));
}

#[tokio::test]
async fn registration_heartbeat_and_producer_ids_follow_kafka_semantics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = lone_voter(dir.path()).await;
    let apis = apis(&running);
    let incarnation = Uuid::new_v4();

    // Another cluster's broker is refused.
    let mut foreign = registration(1, incarnation);
    foreign.cluster_id = StrBytes::from_static_str("another-cluster-id-0000");
    let r: BrokerRegistrationResponse = call(&apis, &foreign, 4).await;
    assert_eq!(r.error_code, 104, "INCONSISTENT_CLUSTER_ID");
    assert_eq!(r.broker_epoch, -1);

    // A broker whose feature range excludes a finalized level is refused.
    let mut old = registration(1, incarnation);
    for f in &mut old.features {
        f.max_supported_version = 0;
        f.min_supported_version = 0;
    }
    let r: BrokerRegistrationResponse = call(&apis, &old, 4).await;
    assert_eq!(r.error_code, 35, "UNSUPPORTED_VERSION");

    let r: BrokerRegistrationResponse = call(&apis, &registration(1, incarnation), 4).await;
    assert_eq!(r.error_code, 0);
    let epoch = r.broker_epoch;
    assert!(epoch > 0, "epoch {epoch}");
    let state = running.handle.read(|c| c.state().brokers.get(&1).cloned());
    let state = state.expect("registered");
    assert!(state.fenced);
    assert_eq!(state.registration.rack.as_deref(), Some("r1"));

    // Another incarnation while the session is alive: DUPLICATE_BROKER_REGISTRATION.
    let r: BrokerRegistrationResponse = call(&apis, &registration(1, Uuid::new_v4()), 4).await;
    assert_eq!(r.error_code, 101, "DUPLICATE_BROKER_REGISTRATION");

    // Heartbeats: a wrong epoch is stale; behind the registration stays fenced; caught up
    // unfences.
    let r: BrokerHeartbeatResponse = call(&apis, &heartbeat(1, epoch + 5, epoch), 1).await;
    assert_eq!(r.error_code, 77, "STALE_BROKER_EPOCH");
    assert!(r.is_fenced);
    let r: BrokerHeartbeatResponse = call(&apis, &heartbeat(1, epoch, epoch - 1), 1).await;
    assert_eq!(
        (
            r.error_code,
            r.is_caught_up,
            r.is_fenced,
            r.should_shut_down
        ),
        (0, false, true, false)
    );
    let r: BrokerHeartbeatResponse = call(&apis, &heartbeat(1, epoch, epoch), 0).await;
    assert_eq!(
        (
            r.error_code,
            r.is_caught_up,
            r.is_fenced,
            r.should_shut_down
        ),
        (0, true, false, false)
    );
    assert!(running
        .handle
        .read(|c| c.state().brokers.get(&1).is_some_and(|b| !b.fenced)));
    // Controlled shutdown with no leaderships: told to shut down at once (Kafka's UNFENCED ->
    // SHUTDOWN_NOW), and again when asked again (fenced).
    let r: BrokerHeartbeatResponse = call(
        &apis,
        &heartbeat(1, epoch, epoch).with_want_shut_down(true),
        1,
    )
    .await;
    assert_eq!(r.error_code, 0);
    assert!(r.should_shut_down && r.is_fenced, "{r:?}");
    let r: BrokerHeartbeatResponse = call(
        &apis,
        &heartbeat(1, epoch, epoch).with_want_shut_down(true),
        1,
    )
    .await;
    assert!(r.should_shut_down && r.is_fenced, "{r:?}");

    // Producer ids: consecutive blocks of 1000; a stale epoch is refused.
    let r: BrokerRegistrationResponse = call(&apis, &registration(2, Uuid::new_v4()), 4).await;
    let epoch2 = r.broker_epoch;
    let a: AllocateProducerIdsResponse = call(
        &apis,
        &AllocateProducerIdsRequest::default()
            .with_broker_id(2.into())
            .with_broker_epoch(epoch2),
        0,
    )
    .await;
    let b: AllocateProducerIdsResponse = call(
        &apis,
        &AllocateProducerIdsRequest::default()
            .with_broker_id(2.into())
            .with_broker_epoch(epoch2),
        0,
    )
    .await;
    assert_eq!((a.error_code, a.producer_id_len), (0, 1000));
    assert_eq!(b.producer_id_start.0, a.producer_id_start.0 + 1000);
    let stale: AllocateProducerIdsResponse = call(
        &apis,
        &AllocateProducerIdsRequest::default()
            .with_broker_id(2.into())
            .with_broker_epoch(epoch2 - 1),
        0,
    )
    .await;
    assert_eq!(stale.error_code, 77);
}

#[tokio::test]
async fn describe_quorum_on_the_leader_and_for_an_unknown_partition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = lone_voter(dir.path()).await;
    let apis = apis(&running);
    for version in 0..=2 {
        let r: DescribeQuorumResponse =
            call(&apis, &describe_quorum(METADATA_TOPIC, 0), version).await;
        assert_eq!(r.error_code, 0);
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(p.leader_id.0, 1);
        assert!(p.leader_epoch >= 1);
        assert!(p.high_watermark >= 2, "bootstrap + no-op committed: {p:?}");
        assert_eq!(p.current_voters.len(), 1);
        assert_eq!(p.current_voters[0].log_end_offset, p.high_watermark);
        if version >= 1 {
            let now = crate::broker::now_ms();
            assert!((now - p.current_voters[0].last_fetch_timestamp).abs() < 60_000);
        }
        if version >= 2 {
            assert_eq!(r.nodes.len(), 1);
            assert_eq!(r.nodes[0].listeners[0].port, 9093);
        }
    }
    for version in 0..=2 {
        let r: DescribeQuorumResponse = call(&apis, &describe_quorum("other", 0), version).await;
        assert_eq!(
            r.topics[0].partitions[0].error_code, 3,
            "UNKNOWN_TOPIC_OR_PARTITION"
        );
    }
    let r: DescribeQuorumResponse = call(&apis, &describe_quorum(METADATA_TOPIC, 1), 2).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 3);
}

#[tokio::test]
async fn a_voter_without_a_majority_answers_not_controller() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quorum = QuorumConfig {
        node: NodeConfig::new(1, vec![1, 2]),
        dir: dir.path().to_path_buf(),
        voters: vec![(1, "127.0.0.1:1".into()), (2, "127.0.0.1:1".into())],
    };
    let running = driver::start(driver_config(), quorum, None, Arc::new(Nothing)).expect("start");
    let apis = apis(&running);
    let r: BrokerRegistrationResponse = call(&apis, &registration(1, Uuid::new_v4()), 4).await;
    assert_eq!(r.error_code, 41, "NOT_CONTROLLER");
    let r: BrokerHeartbeatResponse = call(&apis, &heartbeat(1, 1, 1), 1).await;
    assert_eq!((r.error_code, r.is_fenced), (41, true));
    let r: AllocateProducerIdsResponse = call(
        &apis,
        &AllocateProducerIdsRequest::default()
            .with_broker_id(1.into())
            .with_broker_epoch(1),
        0,
    )
    .await;
    assert_eq!(r.error_code, 41);
    let r: DescribeQuorumResponse = call(&apis, &describe_quorum(METADATA_TOPIC, 0), 1).await;
    assert_eq!(
        r.topics[0].partitions[0].error_code, 6,
        "NOT_LEADER_OR_FOLLOWER"
    );
}

/// An AlterPartition for partition 0 of `topic` from broker 1.
fn alter(
    epoch: i64,
    topic: Uuid,
    partition_epoch: i32,
    isr: &[(i32, i64)],
    version: i16,
) -> AlterPartitionRequest {
    use alter_partition_request::{BrokerState, PartitionData, TopicData};
    let mut p = PartitionData::default()
        .with_partition_index(0)
        .with_leader_epoch(0)
        .with_partition_epoch(partition_epoch);
    if version >= 3 {
        p.new_isr_with_epochs = isr
            .iter()
            .map(|(id, e)| {
                BrokerState::default()
                    .with_broker_id((*id).into())
                    .with_broker_epoch(*e)
            })
            .collect();
    } else {
        p.new_isr = isr.iter().map(|(id, _)| (*id).into()).collect();
    }
    AlterPartitionRequest::default()
        .with_broker_id(1.into())
        .with_broker_epoch(epoch)
        .with_topics(vec![TopicData::default()
            .with_topic_id(topic)
            .with_partitions(vec![p])])
}

#[tokio::test]
async fn alter_partition_commits_isr_changes_with_kafkas_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = lone_voter(dir.path()).await;
    let apis = apis(&running);
    let mut epochs = Vec::new();
    for id in 1..=3 {
        let r: BrokerRegistrationResponse = call(&apis, &registration(id, Uuid::new_v4()), 4).await;
        assert_eq!(r.error_code, 0);
        let e = r.broker_epoch;
        let h: BrokerHeartbeatResponse = call(&apis, &heartbeat(id, e, i64::MAX), 1).await;
        assert!(!h.is_fenced, "{h:?}");
        epochs.push(e);
    }
    let created = running
        .handle
        .run(|c, ctx| {
            c.create_topics(
                &[crate::controller::CreatableTopic {
                    name: "t".into(),
                    num_partitions: -1,
                    replication_factor: -1,
                    assignments: vec![(0, vec![1, 2, 3])],
                    configs: vec![],
                }],
                ctx.seed,
            )
        })
        .await
        .expect("created");
    let topic = created[0].1.as_ref().expect("topic").topic_id;
    // v2 shrink: committed, answered with the partition after the change.
    let r: AlterPartitionResponse = call(
        &apis,
        &alter(epochs[0], topic, 0, &[(1, -1), (2, -1)], 2),
        2,
    )
    .await;
    assert_eq!(r.error_code, 0);
    let p = &r.topics[0].partitions[0];
    assert_eq!(r.topics[0].topic_id, topic);
    assert_eq!(
        (
            p.error_code,
            p.leader_id.0,
            p.leader_epoch,
            p.partition_epoch
        ),
        (0, 1, 0, 1)
    );
    assert_eq!(p.isr.iter().map(|b| b.0).collect::<Vec<_>>(), vec![1, 2]);
    let state = running
        .handle
        .read(|c| c.state().partition(topic, 0).cloned());
    assert_eq!(state.expect("partition").isr, vec![1, 2]);
    // The same (now stale) partition epoch: INVALID_UPDATE_VERSION.
    let r: AlterPartitionResponse = call(
        &apis,
        &alter(epochs[0], topic, 0, &[(1, -1), (2, -1)], 2),
        2,
    )
    .await;
    assert_eq!(r.topics[0].partitions[0].error_code, 95);
    // v3: a member's broker epoch that is not its registration's: INELIGIBLE_REPLICA.
    let wrong = &[(1, epochs[0]), (2, epochs[1]), (3, epochs[2] + 1)];
    let r: AlterPartitionResponse = call(&apis, &alter(epochs[0], topic, 1, wrong, 3), 3).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 107);
    let right = &[(1, epochs[0]), (2, epochs[1]), (3, epochs[2])];
    let r: AlterPartitionResponse = call(&apis, &alter(epochs[0], topic, 1, right, 3), 3).await;
    let p = &r.topics[0].partitions[0];
    assert_eq!((p.error_code, p.partition_epoch), (0, 2));
    assert_eq!(p.isr.len(), 3);
    // A stale requesting broker epoch: top-level STALE_BROKER_EPOCH, no topics.
    let r: AlterPartitionResponse = call(&apis, &alter(epochs[0] + 9, topic, 2, right, 3), 3).await;
    assert_eq!((r.error_code, r.topics.len()), (77, 0));
    // An unknown topic id.
    let r: AlterPartitionResponse =
        call(&apis, &alter(epochs[0], Uuid::from_u128(9), 2, right, 3), 3).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 100);
}

#[tokio::test]
async fn describe_cluster_lists_the_voters_for_controller_endpoints_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = lone_voter(dir.path()).await;
    let apis = apis(&running);
    let asked = DescribeClusterRequest::default()
        .with_endpoint_type(2)
        .with_include_cluster_authorized_operations(true);
    let r: DescribeClusterResponse = call(&apis, &asked, 2).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.endpoint_type, 2);
    assert_eq!(r.cluster_id.as_str(), CLUSTER);
    assert_eq!(r.controller_id.0, 1, "the quorum leader");
    let nodes: Vec<(i32, String, i32)> = r
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.host.to_string(), b.port))
        .collect();
    assert_eq!(nodes, vec![(1, "127.0.0.1".to_string(), 9093)]);
    assert_eq!(
        r.cluster_authorized_operations,
        crate::cluster::acl::CLUSTER_OPERATIONS
    );
    // A broker endpoint type: MISMATCHED_ENDPOINT_TYPE (v1+), INVALID_REQUEST at v0.
    let broker = DescribeClusterRequest::default().with_endpoint_type(1);
    let r: DescribeClusterResponse = call(&apis, &broker, 1).await;
    assert_eq!(r.error_code, 114);
    assert!(r.brokers.is_empty());
    let r: DescribeClusterResponse = call(&apis, &DescribeClusterRequest::default(), 0).await;
    assert_eq!(r.error_code, 42);
    let unknown = DescribeClusterRequest::default().with_endpoint_type(7);
    let r: DescribeClusterResponse = call(&apis, &unknown, 2).await;
    assert_eq!(r.error_code, 115);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Unsupported endpoint type 7")
    );
}
