//! Classic groups over the wire: FindCoordinator, JoinGroup (MEMBER_ID_REQUIRED, parked joins
//! completed by a second member), SyncGroup, Heartbeat, OffsetCommit/OffsetFetch at old and new
//! versions, the internal topic in Metadata, and offsets plus group state surviving a restart on
//! the same data directory. Helpers are local so this file stands alone.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice::config::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Client {
    stream: TcpStream,
    correlation: i32,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Result<Client> {
        Ok(Client {
            stream: TcpStream::connect(addr).await?,
            correlation: 0,
        })
    }

    async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp> {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("groups-test")));
        let mut body = BytesMut::new();
        header.encode(&mut body, key.request_header_version(version))?;
        request.encode(&mut body, version)?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).await?;
        let read = async {
            let len = self.stream.read_i32().await? as usize;
            let mut buf = vec![0u8; len];
            self.stream.read_exact(&mut buf).await?;
            anyhow::Ok(buf)
        };
        let buf = tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .context("no response within 20s")??;
        let mut bytes = Bytes::from(buf);
        let rh = ResponseHeader::decode(&mut bytes, key.response_header_version(version))?;
        ensure!(rh.correlation_id == self.correlation, "correlation id");
        let resp = Resp::decode(&mut bytes, version)?;
        ensure!(
            !bytes.has_remaining(),
            "{} bytes left over",
            bytes.remaining()
        );
        Ok(resp)
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn start(dir: &std::path::Path) -> Result<sluice::server::RunningBroker> {
    let config = Config {
        listen: "127.0.0.1:0".parse()?,
        data_dir: dir.to_path_buf(),
        group_initial_rebalance_delay_ms: 0,
        offsets_topic_num_partitions: 5,
        ..Config::default()
    };
    let broker = sluice::server::start(config).await?;
    // The topic the offsets are committed for (OffsetCommit refuses partitions that do not
    // exist); already there after a restart.
    let mut c = Client::connect(broker.local_addr).await?;
    let r: CreateTopicsResponse = c
        .call(
            ApiKey::CreateTopics,
            7,
            &CreateTopicsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(vec![create_topics_request::CreatableTopic::default()
                    .with_name(TopicName(s("orders")))
                    .with_num_partitions(3)
                    .with_replication_factor(1)]),
        )
        .await?;
    ensure!(
        matches!(r.topics[0].error_code, 0 | 36),
        "creating orders: {}",
        r.topics[0].error_code
    );
    Ok(broker)
}

fn join_request(member: &str, instance: Option<&str>) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s("wire-group")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(20_000)
        .with_member_id(s(member))
        .with_group_instance_id(instance.map(s))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(
                b"\x00\x00\x00\x00\x00\x01\x00\x01t",
            ))])
}

fn commit_request(generation: i32, member: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s("wire-group")))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("orders")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(2)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(0)
                .with_committed_metadata(Some(s("note")))])])
}

async fn fetch_v9(c: &mut Client) -> Result<(i64, String)> {
    let r: OffsetFetchResponse = c
        .call(
            ApiKey::OffsetFetch,
            9,
            &OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s("wire-group")))
                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                    .with_name(TopicName(s("orders")))
                    .with_partition_indexes(vec![2])]))]),
        )
        .await?;
    let p = &r.groups[0].topics[0].partitions[0];
    Ok((
        p.committed_offset,
        p.metadata
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_group_over_the_wire_and_offsets_survive_restart() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = start(dir.path()).await?;
    let addr = broker.local_addr;
    let mut a = Client::connect(addr).await?;

    // FindCoordinator: v3 single key, v6 batch with a transaction key (this node coordinates it).
    let r: FindCoordinatorResponse = a
        .call(
            ApiKey::FindCoordinator,
            3,
            &FindCoordinatorRequest::default().with_key(s("wire-group")),
        )
        .await?;
    let advertised = broker.broker.identity.advertised_port;
    assert_eq!((r.error_code, r.node_id.0, r.port), (0, 1, advertised));
    let r: FindCoordinatorResponse = a
        .call(
            ApiKey::FindCoordinator,
            6,
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![s("txn-1")]),
        )
        .await?;
    let c = &r.coordinators[0];
    assert_eq!((c.error_code, c.node_id.0, c.port), (0, 1, advertised));

    // Metadata lists the internal topic, marked internal.
    let md: MetadataResponse = a
        .call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(None),
        )
        .await?;
    let internal = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some("__consumer_offsets"))
        .context("__consumer_offsets listed")?;
    assert!(internal.is_internal);
    assert_eq!(internal.partitions.len(), 5);

    // JoinGroup v9: MEMBER_ID_REQUIRED, then a real join that becomes generation 1.
    let r: JoinGroupResponse = a
        .call(ApiKey::JoinGroup, 9, &join_request("", None))
        .await?;
    assert_eq!(r.error_code, 79);
    // as Kafka 4.1.2 answers it (found by scripts/differential): a null protocol name
    assert_eq!(r.protocol_name, None, "MEMBER_ID_REQUIRED protocol name");
    let member_a = r.member_id.to_string();
    assert!(member_a.starts_with("groups-test-"), "{member_a}");
    let r: JoinGroupResponse = a
        .call(ApiKey::JoinGroup, 9, &join_request(&member_a, None))
        .await?;
    assert_eq!((r.error_code, r.generation_id), (0, 1));
    assert_eq!(r.leader.as_str(), member_a);
    assert_eq!(r.members.len(), 1);
    let sync = |member: &str, generation: i32, assignment: &'static [u8]| {
        SyncGroupRequest::default()
            .with_group_id(GroupId(s("wire-group")))
            .with_generation_id(generation)
            .with_member_id(s(member))
            .with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s("range")))
            .with_assignments(if assignment.is_empty() {
                vec![]
            } else {
                vec![SyncGroupRequestAssignment::default()
                    .with_member_id(s(member))
                    .with_assignment(Bytes::from_static(assignment))]
            })
    };
    let r: SyncGroupResponse = a
        .call(ApiKey::SyncGroup, 5, &sync(&member_a, 1, b"assignment-a"))
        .await?;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.assignment.as_ref(), b"assignment-a");
    let hb = |member: &str, generation: i32| {
        HeartbeatRequest::default()
            .with_group_id(GroupId(s("wire-group")))
            .with_generation_id(generation)
            .with_member_id(s(member))
    };
    let r: HeartbeatResponse = a.call(ApiKey::Heartbeat, 4, &hb(&member_a, 1)).await?;
    assert_eq!(r.error_code, 0);
    let r: HeartbeatResponse = a.call(ApiKey::Heartbeat, 0, &hb(&member_a, 7)).await?;
    assert_eq!(r.error_code, 22);

    // A second member joins on another connection: its JoinGroup parks until A rejoins.
    let mut b = Client::connect(addr).await?;
    let r: JoinGroupResponse = b
        .call(ApiKey::JoinGroup, 7, &join_request("", None))
        .await?;
    assert_eq!(r.error_code, 79);
    let member_b = r.member_id.to_string();
    let parked = tokio::spawn(async move {
        let r: Result<JoinGroupResponse> = b
            .call(ApiKey::JoinGroup, 7, &join_request(&member_b, None))
            .await;
        (b, member_b, r)
    });
    let mut code = 0;
    for _ in 0..50 {
        let r: HeartbeatResponse = a.call(ApiKey::Heartbeat, 4, &hb(&member_a, 1)).await?;
        code = r.error_code;
        if code == 27 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(code, 27, "REBALANCE_IN_PROGRESS once B joined");
    let r: JoinGroupResponse = a
        .call(ApiKey::JoinGroup, 9, &join_request(&member_a, None))
        .await?;
    assert_eq!((r.error_code, r.generation_id, r.members.len()), (0, 2, 2));
    let (mut b, member_b, rb) = parked.await?;
    let rb = rb?;
    assert_eq!((rb.error_code, rb.generation_id), (0, 2));
    assert!(rb.members.is_empty());
    // B syncs first (parks), then the leader's assignment answers both.
    let b_sync = tokio::spawn(async move {
        let r: Result<SyncGroupResponse> =
            b.call(ApiKey::SyncGroup, 3, &sync(&member_b, 2, b"")).await;
        r
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let leader_sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("wire-group")))
        .with_generation_id(2)
        .with_member_id(s(&member_a))
        .with_assignments(vec![
            SyncGroupRequestAssignment::default()
                .with_member_id(s(&member_a))
                .with_assignment(Bytes::from_static(b"to-a")),
            SyncGroupRequestAssignment::default()
                .with_member_id(s(&rb.member_id))
                .with_assignment(Bytes::from_static(b"to-b")),
        ]);
    let r: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &leader_sync).await?;
    assert_eq!(r.assignment.as_ref(), b"to-a");
    assert_eq!(b_sync.await??.assignment.as_ref(), b"to-b");

    // Offsets: stale generation refused, current generation stored, read at v9 and v5.
    let r: OffsetCommitResponse = a
        .call(ApiKey::OffsetCommit, 9, &commit_request(1, &member_a, 41))
        .await?;
    assert_eq!(r.topics[0].partitions[0].error_code, 22);
    let r: OffsetCommitResponse = a
        .call(ApiKey::OffsetCommit, 8, &commit_request(2, &member_a, 42))
        .await?;
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    assert_eq!(fetch_v9(&mut a).await?, (42, "note".to_string()));
    let r: OffsetFetchResponse = a
        .call(
            ApiKey::OffsetFetch,
            5,
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(s("wire-group")))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s("orders")))
                    .with_partition_indexes(vec![2, 3])])),
        )
        .await?;
    let offsets: Vec<i64> = r.topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect();
    assert_eq!(offsets, vec![42, -1]);

    // Describe and list.
    let r: DescribeGroupsResponse = a
        .call(
            ApiKey::DescribeGroups,
            5,
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("wire-group"))]),
        )
        .await?;
    assert_eq!(r.groups[0].group_state.as_str(), "Stable");
    assert_eq!(r.groups[0].protocol_data.as_str(), "range");
    assert_eq!(r.groups[0].members.len(), 2);
    assert_eq!(r.groups[0].members[0].client_host.as_str(), "/127.0.0.1");
    let r: ListGroupsResponse = a
        .call(
            ApiKey::ListGroups,
            5,
            &ListGroupsRequest::default().with_states_filter(vec![s("stable")]),
        )
        .await?;
    assert_eq!(r.groups.len(), 1);
    assert_eq!(r.groups[0].group_type.as_str(), "classic");
    let r: DeleteGroupsResponse = a
        .call(
            ApiKey::DeleteGroups,
            2,
            &DeleteGroupsRequest::default()
                .with_groups_names(vec![GroupId(s("wire-group")), GroupId(s("nope"))]),
        )
        .await?;
    let codes: Vec<i16> = r.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![68, 69]);

    // Restart on the same data directory: offsets and members come back from __consumer_offsets.
    drop(a);
    broker.shutdown().await;
    let broker = start(dir.path()).await?;
    let mut c = Client::connect(broker.local_addr).await?;
    assert_eq!(fetch_v9(&mut c).await?, (42, "note".to_string()));
    let r: DescribeGroupsResponse = c
        .call(
            ApiKey::DescribeGroups,
            6,
            &DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(s("wire-group")), GroupId(s("unknown"))]),
        )
        .await?;
    assert_eq!(r.groups[0].group_state.as_str(), "Stable");
    assert_eq!(r.groups[0].members.len(), 2);
    assert_eq!(r.groups[0].members[1].member_assignment.as_ref(), b"to-b");
    assert_eq!(r.groups[1].error_code, 69);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_group_input_gets_kafkas_error_codes() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = start(dir.path()).await?;
    let mut c = Client::connect(broker.local_addr).await?;
    // Unknown group: sync, heartbeat and leave answer UNKNOWN_MEMBER_ID.
    let r: SyncGroupResponse = c
        .call(
            ApiKey::SyncGroup,
            5,
            &SyncGroupRequest::default()
                .with_group_id(GroupId(s("ghost")))
                .with_member_id(s("m")),
        )
        .await?;
    assert_eq!(r.error_code, 25);
    let r: LeaveGroupResponse = c
        .call(
            ApiKey::LeaveGroup,
            0,
            &LeaveGroupRequest::default()
                .with_group_id(GroupId(s("ghost")))
                .with_member_id(s("m")),
        )
        .await?;
    assert_eq!(r.error_code, 25);
    // Session timeout below group.min.session.timeout.ms; empty group id; no protocols.
    let r: JoinGroupResponse = c
        .call(
            ApiKey::JoinGroup,
            5,
            &join_request("", None).with_session_timeout_ms(1),
        )
        .await?;
    assert_eq!(r.error_code, 26);
    let r: JoinGroupResponse = c
        .call(
            ApiKey::JoinGroup,
            0,
            &join_request("", None).with_group_id(GroupId(s(""))),
        )
        .await?;
    assert_eq!(r.error_code, 24);
    let r: JoinGroupResponse = c
        .call(
            ApiKey::JoinGroup,
            9,
            &join_request("", None).with_protocols(vec![]),
        )
        .await?;
    assert_eq!(r.error_code, 23);
    // Oversized commit metadata.
    let mut big = commit_request(-1, "", 1);
    big.topics[0].partitions[0].committed_metadata = Some(s(&"m".repeat(5000)));
    let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 2, &big).await?;
    assert_eq!(r.topics[0].partitions[0].error_code, 12);
    // Clients may not write to the internal topic.
    let md: MetadataResponse = c
        .call(
            ApiKey::Metadata,
            1,
            &MetadataRequest::default().with_topics(None),
        )
        .await?;
    assert!(md.topics.iter().all(|t| !t.is_internal), "not created yet");
    broker.shutdown().await;
    Ok(())
}

/// Every group API answers at every advertised version (an encoding mistake would close the
/// connection instead), with a plausible error code for a request about an unknown group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_group_api_answers_at_every_advertised_version() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = start(dir.path()).await?;
    let mut c = Client::connect(broker.local_addr).await?;
    for v in 0..=6 {
        let r: FindCoordinatorResponse = c
            .call(
                ApiKey::FindCoordinator,
                v,
                &if v >= 4 {
                    FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g")])
                } else {
                    FindCoordinatorRequest::default().with_key(s("g"))
                },
            )
            .await
            .with_context(|| format!("FindCoordinator v{v}"))?;
        let code = if v >= 4 {
            r.coordinators[0].error_code
        } else {
            r.error_code
        };
        assert_eq!(code, 0, "FindCoordinator v{v}");
    }
    for v in 0..=9 {
        let r: JoinGroupResponse = c
            .call(ApiKey::JoinGroup, v, &join_request("not-a-member", None))
            .await
            .with_context(|| format!("JoinGroup v{v}"))?;
        assert_eq!(r.error_code, 25, "JoinGroup v{v}");
    }
    for v in 0..=5 {
        let r: SyncGroupResponse = c
            .call(
                ApiKey::SyncGroup,
                v,
                &SyncGroupRequest::default()
                    .with_group_id(GroupId(s("nope")))
                    .with_member_id(s("m")),
            )
            .await
            .with_context(|| format!("SyncGroup v{v}"))?;
        assert_eq!(r.error_code, 25, "SyncGroup v{v}");
    }
    for v in 0..=4 {
        let r: HeartbeatResponse = c
            .call(
                ApiKey::Heartbeat,
                v,
                &HeartbeatRequest::default()
                    .with_group_id(GroupId(s("nope")))
                    .with_member_id(s("m")),
            )
            .await
            .with_context(|| format!("Heartbeat v{v}"))?;
        assert_eq!(r.error_code, 25, "Heartbeat v{v}");
    }
    for v in 0..=5 {
        let mut req = LeaveGroupRequest::default().with_group_id(GroupId(s("nope")));
        if v >= 3 {
            req.members =
                vec![leave_group_request::MemberIdentity::default().with_member_id(s("m"))];
        } else {
            req.member_id = s("m");
        }
        let r: LeaveGroupResponse = c
            .call(ApiKey::LeaveGroup, v, &req)
            .await
            .with_context(|| format!("LeaveGroup v{v}"))?;
        assert_eq!(r.error_code, 25, "LeaveGroup v{v}");
    }
    for v in 2..=9 {
        let r: OffsetCommitResponse = c
            .call(
                ApiKey::OffsetCommit,
                v,
                &commit_request(-1, "", 10 + v as i64),
            )
            .await
            .with_context(|| format!("OffsetCommit v{v}"))?;
        assert_eq!(r.topics[0].partitions[0].error_code, 0, "OffsetCommit v{v}");
    }
    for v in 1..=9 {
        let req = if v >= 8 {
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s("wire-group")))
                .with_topics(None)])
        } else {
            OffsetFetchRequest::default()
                .with_group_id(GroupId(s("wire-group")))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s("orders")))
                    .with_partition_indexes(vec![2])]))
        };
        let r: OffsetFetchResponse = c
            .call(ApiKey::OffsetFetch, v, &req)
            .await
            .with_context(|| format!("OffsetFetch v{v}"))?;
        let offset = if v >= 8 {
            r.groups[0].topics[0].partitions[0].committed_offset
        } else {
            r.topics[0].partitions[0].committed_offset
        };
        assert_eq!(offset, 19, "OffsetFetch v{v}: the v9 commit wins");
    }
    for v in 0..=6 {
        let r: DescribeGroupsResponse = c
            .call(
                ApiKey::DescribeGroups,
                v,
                &DescribeGroupsRequest::default()
                    .with_groups(vec![GroupId(s("wire-group"))])
                    .with_include_authorized_operations(v >= 3),
            )
            .await
            .with_context(|| format!("DescribeGroups v{v}"))?;
        assert_eq!(
            r.groups[0].group_state.as_str(),
            "Empty",
            "DescribeGroups v{v}"
        );
    }
    for v in 0..=5 {
        let r: ListGroupsResponse = c
            .call(ApiKey::ListGroups, v, &ListGroupsRequest::default())
            .await
            .with_context(|| format!("ListGroups v{v}"))?;
        assert_eq!(r.groups.len(), 1, "ListGroups v{v}");
    }
    let r: OffsetDeleteResponse = c
        .call(
            ApiKey::OffsetDelete,
            0,
            &OffsetDeleteRequest::default()
                .with_group_id(GroupId(s("wire-group")))
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(s("orders")))
                        .with_partitions(vec![
                            offset_delete_request::OffsetDeleteRequestPartition::default()
                                .with_partition_index(2),
                        ]),
                ]),
        )
        .await?;
    assert_eq!((r.error_code, r.topics[0].partitions[0].error_code), (0, 0));
    for v in 0..=2 {
        let r: DeleteGroupsResponse = c
            .call(
                ApiKey::DeleteGroups,
                v,
                &DeleteGroupsRequest::default()
                    .with_groups_names(vec![GroupId(s(&format!("missing-{v}")))]),
            )
            .await
            .with_context(|| format!("DeleteGroups v{v}"))?;
        assert_eq!(r.results[0].error_code, 69, "DeleteGroups v{v}");
    }
    broker.shutdown().await;
    Ok(())
}
