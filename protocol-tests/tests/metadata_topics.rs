//! Metadata (key 3), CreateTopics (key 19) and DeleteTopics (key 20) at their lowest and highest
//! advertised versions.

use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{BrokerId, DeleteTopicsRequest, MetadataRequest};
use protocol_tests::{
    create_topic, create_topics_request, metadata, metadata_request, topic_name, TestBroker, Uuid,
};

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const LEADER_NOT_AVAILABLE: i16 = 5;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_CONFIG: i16 = 40;
const UNKNOWN_TOPIC_ID: i16 = 100;

/// (topic, partitions, replication factor, configs, expected error).
type Case<'a> = (&'a str, i32, i16, &'a [(&'a str, &'a str)], i16);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_brokers_and_cluster_id_at_every_version() -> anyhow::Result<()> {
    let mut broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let mut cluster_id = None;
    for version in 0..=13 {
        // v0 has no "null = all topics"; an empty list means all there. Ask for none/all alike.
        let req = if version == 0 {
            MetadataRequest::default().with_topics(Some(vec![]))
        } else {
            MetadataRequest::default().with_topics(None)
        };
        let r = c.call(version, &req).await?;
        assert_eq!(r.brokers.len(), 1, "v{version}");
        let b = &r.brokers[0];
        assert_eq!(b.node_id, BrokerId(1), "v{version}");
        assert_eq!(b.host.as_str(), "127.0.0.1", "v{version}");
        assert_eq!(
            b.port,
            broker.addr.port() as i32,
            "v{version}: advertised port must be the port clients can reach"
        );
        assert!(
            r.topics.is_empty(),
            "v{version}: fresh broker has no topics"
        );
        if version >= 1 {
            assert_eq!(r.controller_id, BrokerId(1), "v{version}");
        }
        if version >= 2 {
            let id = r.cluster_id.clone().expect("cluster id at v2+");
            assert!(!id.is_empty(), "v{version}");
            match &cluster_id {
                None => cluster_id = Some(id.to_string()),
                Some(prev) => assert_eq!(prev, id.as_str(), "v{version}: cluster id changed"),
            }
        }
        if version >= 13 {
            assert_eq!(r.error_code, 0);
        }
    }
    drop(c);
    broker.restart(&[]).await?;
    let mut c = broker.connect().await?;
    let r = c.call(12, &MetadataRequest::default()).await?;
    assert_eq!(
        r.cluster_id.map(|s| s.to_string()),
        cluster_id,
        "cluster id must survive a restart on the same data dir"
    );
    assert_eq!(r.brokers[0].port, broker.addr.port() as i32);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_auto_create_then_describe_at_lowest_and_highest_version() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    for (version, topic) in [(0i16, "auto-v0"), (13, "auto-v13")] {
        let req = metadata_request(&[topic], true);
        let first = c.call(version, &req).await?;
        assert_eq!(first.topics.len(), 1);
        let t = &first.topics[0];
        assert_eq!(t.name.as_ref().map(|n| n.as_str()), Some(topic));
        assert_eq!(
            t.error_code, LEADER_NOT_AVAILABLE,
            "v{version} first answer"
        );

        let second = c.call(version, &req).await?;
        assert_eq!(second.topics.len(), 1);
        let t = &second.topics[0];
        assert_eq!(t.error_code, 0, "v{version} second answer");
        assert_eq!(t.name.as_ref().map(|n| n.as_str()), Some(topic));
        assert_eq!(t.partitions.len(), 1, "num.partitions defaults to 1");
        let p = &t.partitions[0];
        assert_eq!(p.error_code, 0);
        assert_eq!(p.partition_index, 0);
        assert_eq!(p.leader_id, BrokerId(1));
        assert_eq!(p.replica_nodes, vec![BrokerId(1)]);
        assert_eq!(p.isr_nodes, vec![BrokerId(1)]);
        if version >= 7 {
            assert!(p.leader_epoch >= 0, "leader epoch {}", p.leader_epoch);
        }
        if version >= 10 {
            assert_ne!(t.topic_id, Uuid::nil(), "topic id at v10+");
        }
        if version >= 1 {
            assert!(!t.is_internal);
        }
    }
    // allow_auto_topic_creation=false (v4+): unknown topic, and it stays unknown.
    for _ in 0..2 {
        let r = c.call(4, &metadata_request(&["no-auto"], false)).await?;
        assert_eq!(r.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    }
    let r = c.call(13, &metadata_request(&["no-auto"], false)).await?;
    assert_eq!(r.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    // An invalid name is never auto-created.
    let r = c.call(9, &metadata_request(&["bad/name"], true)).await?;
    assert_eq!(r.topics[0].error_code, INVALID_TOPIC_EXCEPTION);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_topic_id_is_stable_and_lookup_by_id_works() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let created = create_topic(&mut c, "by-id", 2, &[]).await?;
    assert_ne!(created.topic_id, Uuid::nil());
    let r = metadata(&mut c, "by-id").await?;
    assert_eq!(r.topics[0].topic_id, created.topic_id);
    assert_eq!(r.topics[0].partitions.len(), 2);
    let idx: Vec<i32> = r.topics[0]
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .collect();
    assert_eq!(idx, vec![0, 1]);
    // Lookup by id (v12+ allows a null name with an id).
    let req = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_topic_id(created.topic_id)
            .with_name(None),
    ]));
    let r = c.call(12, &req).await?;
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.topics[0].name.as_ref().map(|n| n.as_str()), Some("by-id"));
    let unknown = MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_topic_id(Uuid::from_u128(0x1234))
            .with_name(None),
    ]));
    let r = c.call(12, &unknown).await?;
    assert_eq!(r.topics[0].error_code, UNKNOWN_TOPIC_ID);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_at_v2_and_v7() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    for (version, name) in [(2i16, "created-v2"), (7, "created-v7")] {
        let r = c
            .call(version, &create_topics_request(name, 3, 1, &[]))
            .await?;
        assert_eq!(r.topics.len(), 1);
        let t = &r.topics[0];
        assert_eq!(t.name.as_str(), name);
        assert_eq!(t.error_code, 0, "v{version}: {:?}", t.error_message);
        if version >= 5 {
            assert_eq!(t.num_partitions, 3);
            assert_eq!(t.replication_factor, 1);
        }
        if version >= 7 {
            assert_ne!(t.topic_id, Uuid::nil());
        }
        let m = metadata(&mut c, name).await?;
        assert_eq!(m.topics[0].error_code, 0);
        assert_eq!(m.topics[0].partitions.len(), 3);

        let cases: [Case; 5] = [
            (name, 1, 1, &[], TOPIC_ALREADY_EXISTS),
            ("zero-parts", 0, 1, &[], INVALID_PARTITIONS),
            ("rf-three", 1, 3, &[], INVALID_REPLICATION_FACTOR),
            ("bad/name", 1, 1, &[], INVALID_TOPIC_EXCEPTION),
            (
                "bad-config",
                1,
                1,
                &[("cleanup.policy", "shred")],
                INVALID_CONFIG,
            ),
        ];
        for (topic, parts, rf, configs, want) in cases {
            let r = c
                .call(version, &create_topics_request(topic, parts, rf, configs))
                .await?;
            let t = &r.topics[0];
            assert_eq!(t.name.as_str(), topic);
            assert_eq!(t.error_code, want, "v{version} {topic}");
            if version >= 1 {
                assert!(t.error_message.is_some(), "v{version} {topic}: no message");
            }
        }
        // None of the failed ones exists afterwards.
        for topic in ["zero-parts", "rf-three", "bad-config"] {
            let m = metadata(&mut c, topic).await?;
            assert_eq!(
                m.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION,
                "{topic}"
            );
        }
    }
    // An unknown config key is rejected too.
    let r = c
        .call(
            7,
            &create_topics_request("unknown-key", 1, 1, &[("no.such.key", "1")]),
        )
        .await?;
    assert_eq!(r.topics[0].error_code, INVALID_CONFIG);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_validate_only_creates_nothing() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let req = create_topics_request("dry-run", 4, 1, &[]).with_validate_only(true);
    let r = c.call(7, &req).await?;
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.topics[0].num_partitions, 4);
    let m = metadata(&mut c, "dry-run").await?;
    assert_eq!(m.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    // Validation still applies in validate-only mode.
    let req = create_topics_request("dry-run", 0, 1, &[]).with_validate_only(true);
    let r = c.call(7, &req).await?;
    assert_eq!(r.topics[0].error_code, INVALID_PARTITIONS);
    // And creating it for real afterwards works.
    create_topic(&mut c, "dry-run", 4, &[]).await?;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_topics_by_name_v1_and_by_id_v6() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "del-name", 1, &[]).await?;
    let by_id = create_topic(&mut c, "del-id", 1, &[]).await?;

    // v1: by name, plus an unknown name.
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topic_names(vec![topic_name("del-name"), topic_name("never-was")]);
    let r = c.call(1, &req).await?;
    assert_eq!(r.responses.len(), 2);
    assert_eq!(
        r.responses[0].name.as_ref().map(|n| n.as_str()),
        Some("del-name")
    );
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(
        r.responses[1].name.as_ref().map(|n| n.as_str()),
        Some("never-was")
    );
    assert_eq!(r.responses[1].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    let m = metadata(&mut c, "del-name").await?;
    assert_eq!(m.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);

    // v6: by id; the response names the topic and echoes the id.
    let req = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![
            DeleteTopicState::default().with_topic_id(by_id.topic_id),
            DeleteTopicState::default().with_topic_id(Uuid::from_u128(42)),
            DeleteTopicState::default().with_name(Some(topic_name("never-was"))),
        ]);
    let r = c.call(6, &req).await?;
    assert_eq!(r.responses.len(), 3);
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(
        r.responses[0].name.as_ref().map(|n| n.as_str()),
        Some("del-id")
    );
    assert_eq!(r.responses[0].topic_id, by_id.topic_id);
    assert_eq!(r.responses[1].error_code, UNKNOWN_TOPIC_ID);
    assert_eq!(r.responses[2].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    let m = metadata(&mut c, "del-id").await?;
    assert_eq!(m.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);

    // A deleted name can be created again, with a new id.
    let again = create_topic(&mut c, "del-id", 1, &[]).await?;
    assert_ne!(again.topic_id, by_id.topic_id);
    broker.shutdown().await;
    Ok(())
}

/// A topic created on one connection is in the Metadata answer of another at once (CreateTopics
/// answers only once the controller's entry is in the image), and the quorum's log keeps it: after
/// a restart with `topic-configs.json` removed, the topic has the same id, its partitions and its
/// config override, and a deleted topic stays deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_topics_are_seen_at_once_elsewhere_and_kept_by_the_metadata_log(
) -> anyhow::Result<()> {
    let mut broker = TestBroker::start().await?;
    let mut admin = broker.connect().await?;
    let mut other = broker.connect().await?;
    let created = create_topic(&mut admin, "seen", 3, &[("retention.ms", "1234")]).await?;
    assert_eq!(created.error_code, 0);
    let r = metadata(&mut other, "seen").await?;
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.topics[0].topic_id, created.topic_id);
    assert_eq!(r.topics[0].partitions.len(), 3);
    assert!(r.topics[0]
        .partitions
        .iter()
        .all(|p| p.error_code == 0 && p.leader_id == BrokerId(1)));
    create_topic(&mut admin, "gone", 1, &[]).await?;
    let req = DeleteTopicsRequest::default().with_topic_names(vec![topic_name("gone")]);
    let deleted = admin.call(5, &req).await?;
    assert_eq!(deleted.responses[0].error_code, 0);
    assert!(broker
        .dir
        .path()
        .join("__cluster_metadata-0")
        .join("raft.log")
        .exists());

    std::fs::remove_file(broker.dir.path().join("topic-configs.json"))?;
    broker.restart(&[]).await?;
    let mut c = broker.connect().await?;
    let r = metadata(&mut c, "seen").await?;
    assert_eq!(r.topics[0].topic_id, created.topic_id);
    assert_eq!(r.topics[0].partitions.len(), 3);
    let hosted = broker.broker()?.replicas.topic("seen").expect("hosted");
    assert_eq!(
        hosted.config.retention_ms, 1234,
        "the override comes from the log"
    );
    let r = metadata(&mut c, "gone").await?;
    assert_eq!(r.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    broker.shutdown().await;
    Ok(())
}

/// A kill -9 in the middle of a topic creation leaves at most a torn record at the end of the
/// quorum's journal (its entry never committed, so no directory was made for it): the restart
/// cuts it off and serves every committed topic, and creating topics goes on working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_metadata_journal_tail_restarts_cleanly() -> anyhow::Result<()> {
    let mut broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let kept = create_topic(&mut c, "kept", 2, &[]).await?;
    assert_eq!(kept.error_code, 0);
    drop(c);
    // Stop without a graceful end of the metadata side's own files, then tear the journal's tail.
    if let Some(r) = broker.running.take() {
        r.shutdown().await;
    }
    let journal = broker
        .dir
        .path()
        .join("__cluster_metadata-0")
        .join("raft.log");
    let before = std::fs::metadata(&journal)?.len();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&journal)?;
        f.write_all(&[
            0x00, 0x00, 0x01, 0x00, 0xAB, 0xCD, 0xEF, 0x01, 0x02, 0x03, 0x04,
        ])?;
    }
    assert!(std::fs::metadata(&journal)?.len() > before);
    broker.restart(&[]).await?;
    let mut c = broker.connect().await?;
    let r = metadata(&mut c, "kept").await?;
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.topics[0].topic_id, kept.topic_id);
    assert_eq!(r.topics[0].partitions.len(), 2);
    let after = create_topic(&mut c, "after", 1, &[]).await?;
    assert_eq!(after.error_code, 0);
    assert_ne!(after.topic_id, kept.topic_id);
    broker.shutdown().await;
    Ok(())
}
