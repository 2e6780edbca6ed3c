//! Topic administration and log lifecycle on the wire: CreateTopics configs, CreatePartitions,
//! DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster,
//! DescribeTopicPartitions, DescribeLogDirs, OffsetForLeaderEpoch, ElectLeaders, at their lowest
//! and highest advertised versions (DeleteRecords, retention and compaction: `log_lifecycle.rs`).
//! Each test starts its own broker in-process on 127.0.0.1:0 with a temporary data directory.

mod admin_support;

use admin_support::*;
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request as iac;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

// ------------------------------------------------------------------ CreateTopics configs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_echoes_configs_from_v5_and_rejects_bad_configs() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    let r = create_topic_v(&mut c, 7, "echo", 2, &[("retention.ms", "1000")], false).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.error_message, None, "null on success");
    assert_eq!(r.num_partitions, 2);
    assert_eq!(r.topic_config_error_code, 0);
    let configs = r.configs.expect("v5+ lists the configs");
    let rm = configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .unwrap();
    assert_eq!(rm.value.as_deref(), Some("1000"));
    assert_eq!(rm.config_source, 1, "DYNAMIC_TOPIC_CONFIG");
    assert!(!rm.read_only && !rm.is_sensitive);
    let sb = configs
        .iter()
        .find(|c| c.name.as_str() == "segment.bytes")
        .unwrap();
    assert_eq!(sb.value.as_deref(), Some("1073741824"));
    assert_eq!(sb.config_source, 5, "DEFAULT_CONFIG");
    assert_eq!(configs.len(), 33, "every Kafka 4.1 topic config");

    // v2 has no configs in the response.
    let r = create_topic_v(&mut c, 2, "old", 1, &[], false).await;
    assert_eq!(
        (r.error_code, r.configs.map(|c| c.len()).unwrap_or(0)),
        (0, 0)
    );

    // Bad configs: INVALID_CONFIG with Kafka's message, nothing on disk.
    for (k, v, msg) in [
        ("segment.bytes", "1000", "Invalid value 1000 for configuration segment.bytes: Value must be at least 1048576"),
        ("cleanup.policy", "shred", "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"),
        ("no.such.config", "1", "Unknown topic config name: no.such.config"),
    ] {
        let r = create_topic_v(&mut c, 7, "bad", 1, &[(k, v)], false).await;
        assert_eq!(r.error_code, 40, "{k}");
        assert_eq!(r.error_message.as_deref(), Some(msg));
        assert_eq!((r.num_partitions, r.replication_factor), (-1, -1));
        // Kafka 4.1 answers an empty config list for a refused topic (scripts/differential).
        assert_eq!(r.configs, Some(vec![]), "no configs for a failed topic");
        assert!(!b.dir().join("bad-0").exists());
    }
    // Validate-only reports the configs but creates nothing.
    let r = create_topic_v(&mut c, 7, "dry", 3, &[("cleanup.policy", "compact")], true).await;
    assert_eq!(r.error_code, 0);
    let cp = r
        .configs
        .unwrap()
        .into_iter()
        .find(|c| c.name.as_str() == "cleanup.policy")
        .unwrap();
    assert_eq!(cp.value.as_deref(), Some("compact"));
    assert!(!b.dir().join("dry-0").exists());
    b.stop().await;
}

// ------------------------------------------------------------------ CreatePartitions

async fn create_partitions(
    c: &mut Client,
    v: i16,
    topics: &[(&str, i32)],
    validate_only: bool,
) -> Vec<(String, i16, Option<String>)> {
    let req = CreatePartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|(n, count)| {
                    CreatePartitionsTopic::default()
                        .with_name(TopicName(s(n)))
                        .with_count(*count)
                        .with_assignments(None)
                })
                .collect(),
        )
        .with_timeout_ms(5000)
        .with_validate_only(validate_only);
    let r: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, v, &req).await;
    r.results
        .into_iter()
        .map(|t| {
            (
                t.name.as_str().to_string(),
                t.error_code,
                t.error_message.map(|m| m.as_str().to_string()),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_increases_only_with_kafkas_messages() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic_v(&mut c, 7, "grow", 2, &[], false).await;
    for v in [0, 3] {
        let r = create_partitions(&mut c, v, &[("grow", 1)], false).await;
        assert_eq!(
            r,
            vec![(
                "grow".into(),
                37,
                Some(
                    "The topic grow currently has 2 partition(s); 1 would not be an increase."
                        .into()
                )
            )]
        );
        let r = create_partitions(&mut c, v, &[("grow", 2)], false).await;
        assert_eq!(r[0].1, 37);
        assert_eq!(r[0].2.as_deref(), Some("Topic already has 2 partition(s)."));
        let r = create_partitions(&mut c, v, &[("missing", 4)], false).await;
        assert_eq!(r[0].1, 3);
        assert_eq!(r[0].2, None);
    }
    // validate_only: success, nothing created.
    let r = create_partitions(&mut c, 3, &[("grow", 5)], true).await;
    assert_eq!(r, vec![("grow".into(), 0, None)]);
    assert!(!b.dir().join("grow-2").exists());
    assert_eq!(partition_count(&mut c, "grow").await, 2);
    // Duplicates are refused.
    let r = create_partitions(&mut c, 3, &[("grow", 5), ("grow", 6)], false).await;
    assert!(r
        .iter()
        .all(|(_, code, m)| *code == 42 && m.as_deref() == Some("Duplicate topic name.")));
    // The real thing.
    let r = create_partitions(&mut c, 0, &[("grow", 4)], false).await;
    assert_eq!(r, vec![("grow".into(), 0, None)]);
    assert!(b.dir().join("grow-3").exists());
    assert_eq!(partition_count(&mut c, "grow").await, 4);
    // A manual assignment naming another broker is refused.
    let req =
        CreatePartitionsRequest::default().with_topics(vec![CreatePartitionsTopic::default()
            .with_name(TopicName(s("grow")))
            .with_count(5)
            .with_assignments(Some(vec![
                CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(9)])
            ]))]);
    let r: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &req).await;
    assert_eq!(r.results[0].error_code, 39);
    // New partitions take produce.
    assert_eq!(produce(&mut c, "grow", 3, 0, 1).await, 0);
    b.stop().await;
}

// ------------------------------------------------------------------ DescribeConfigs

async fn describe_configs(
    c: &mut Client,
    v: i16,
    resource_type: i8,
    name: &str,
    keys: Option<&[&str]>,
    synonyms: bool,
) -> describe_configs_response::DescribeConfigsResult {
    let req = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configuration_keys(
                keys.map(|k| k.iter().map(|k| s(k)).collect()),
            )])
        .with_include_synonyms(synonyms);
    let mut r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, v, &req).await;
    assert_eq!(r.results.len(), 1);
    r.results.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_topic_and_broker_field_by_field() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic_v(
        &mut c,
        7,
        "dc",
        1,
        &[("retention.ms", "1000"), ("cleanup.policy", "compact")],
        false,
    )
    .await;
    for v in [1, 4] {
        let r = describe_configs(&mut c, v, 2, "dc", None, true).await;
        assert_eq!(
            (r.error_code, r.resource_type, r.resource_name.as_str()),
            (0, 2, "dc")
        );
        assert_eq!(r.configs.len(), 33);
        let rm = r
            .configs
            .iter()
            .find(|e| e.name.as_str() == "retention.ms")
            .unwrap();
        assert_eq!(rm.value.as_deref(), Some("1000"));
        assert_eq!(rm.config_source, 1);
        assert!(!rm.read_only && !rm.is_sensitive);
        if v >= 3 {
            assert_eq!(rm.documentation, None, "documentation is null");
        }
        assert_eq!(rm.synonyms.len(), 1);
        assert_eq!(rm.synonyms[0].name.as_str(), "retention.ms");
        assert_eq!(rm.config_type, if v >= 3 { 5 } else { 0 }, "LONG from v3");
        let cp = r
            .configs
            .iter()
            .find(|e| e.name.as_str() == "cleanup.policy")
            .unwrap();
        let syn: Vec<_> = cp
            .synonyms
            .iter()
            .map(|y| (y.name.as_str(), y.value.as_deref(), y.source))
            .collect();
        assert_eq!(
            syn,
            vec![
                ("cleanup.policy", Some("compact"), 1),
                ("log.cleanup.policy", Some("delete"), 5)
            ]
        );
        let sb = r
            .configs
            .iter()
            .find(|e| e.name.as_str() == "segment.bytes")
            .unwrap();
        assert_eq!(
            (sb.value.as_deref(), sb.config_source),
            (Some("1073741824"), 5)
        );
        let ratio = r
            .configs
            .iter()
            .find(|e| e.name.as_str() == "min.cleanable.dirty.ratio")
            .unwrap();
        assert_eq!(ratio.value.as_deref(), Some("0.5"));
        if v >= 3 {
            assert_eq!(ratio.config_type, 6, "DOUBLE");
            assert_eq!(cp.config_type, 7, "LIST");
        }
    }
    // Without synonyms, and filtered by key (unknown keys are skipped).
    let r = describe_configs(
        &mut c,
        4,
        2,
        "dc",
        Some(&["segment.ms", "not.a.key"]),
        false,
    )
    .await;
    assert_eq!(r.configs.len(), 1);
    assert_eq!(r.configs[0].name.as_str(), "segment.ms");
    assert_eq!(r.configs[0].value.as_deref(), Some("604800000"));
    assert!(r.configs[0].synonyms.is_empty());
    // Unknown and invalid topics.
    let r = describe_configs(&mut c, 4, 2, "nope", None, true).await;
    assert_eq!((r.error_code, r.configs.len()), (3, 0));
    let r = describe_configs(&mut c, 1, 2, "bad/name", None, true).await;
    assert_eq!(r.error_code, 17);
    // Broker: every known config, read-only unless dynamic.
    for v in [1, 4] {
        let r = describe_configs(&mut c, v, 4, "1", None, true).await;
        assert_eq!(r.error_code, 0);
        let np = r
            .configs
            .iter()
            .find(|e| e.name.as_str() == "num.partitions")
            .unwrap();
        assert!(np.read_only);
        assert_eq!(np.value.as_deref(), Some("1"));
        let lr = r
            .configs
            .iter()
            .find(|e| e.name.as_str() == "log.retention.bytes")
            .unwrap();
        assert!(!lr.read_only);
        assert_eq!((lr.value.as_deref(), lr.config_source), (Some("-1"), 5));
        let ms = r
            .configs
            .iter()
            .find(|e| e.name.as_str() == "log.retention.ms")
            .unwrap();
        assert_eq!(
            ms.value, None,
            "Kafka reports null for an unset log.retention.ms"
        );
    }
    let r = describe_configs(&mut c, 4, 4, "", None, true).await;
    assert_eq!(
        (r.error_code, r.configs.len()),
        (0, 0),
        "no cluster defaults set"
    );
    let r = describe_configs(&mut c, 4, 4, "7", None, true).await;
    assert_eq!(r.error_code, 42);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Unexpected broker id, expected 1 or empty string, but received 7")
    );
    let r = describe_configs(&mut c, 4, 4, "x", None, true).await;
    assert_eq!(
        r.error_message.as_deref(),
        Some("Broker id must be an integer, but it is: x")
    );
    b.stop().await;
}

// ------------------------------------------------------------------ AlterConfigs

async fn alter_configs(
    c: &mut Client,
    v: i16,
    resource_type: i8,
    name: &str,
    pairs: &[(&str, &str)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let req = AlterConfigsRequest::default()
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configs(
                pairs
                    .iter()
                    .map(|(k, v)| {
                        AlterableConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            )])
        .with_validate_only(validate_only);
    let r: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, v, &req).await;
    let x = &r.responses[0];
    assert_eq!(
        (x.resource_type, x.resource_name.as_str()),
        (resource_type, name)
    );
    (
        x.error_code,
        x.error_message.as_ref().map(|m| m.as_str().to_string()),
    )
}

async fn topic_value(c: &mut Client, topic: &str, key: &str) -> (Option<String>, i8) {
    let r = describe_configs(c, 4, 2, topic, Some(&[key]), false).await;
    let e = &r.configs[0];
    (
        e.value.as_ref().map(|v| v.as_str().to_string()),
        e.config_source,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_configs_replaces_all_overrides_and_validates() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic_v(&mut c, 7, "ac", 1, &[("retention.ms", "1000")], false).await;
    for v in [0, 2] {
        assert_eq!(
            alter_configs(&mut c, v, 2, "ac", &[("segment.ms", "5000")], false).await,
            (0, None)
        );
        assert_eq!(
            topic_value(&mut c, "ac", "segment.ms").await,
            (Some("5000".into()), 1)
        );
        // Legacy AlterConfigs replaces: retention.ms went back to the default.
        assert_eq!(
            topic_value(&mut c, "ac", "retention.ms").await,
            (Some("604800000".into()), 5)
        );
        assert_eq!(
            alter_configs(&mut c, v, 2, "ac", &[("retention.ms", "-7")], false).await,
            (
                40,
                Some(
                    "Invalid value -7 for configuration retention.ms: Value must be at least -1"
                        .into()
                )
            )
        );
        assert_eq!(
            topic_value(&mut c, "ac", "segment.ms").await.0.as_deref(),
            Some("5000")
        );
        assert_eq!(
            alter_configs(&mut c, v, 2, "gone", &[("retention.ms", "1")], false).await,
            (3, Some("The topic 'gone' does not exist.".into()))
        );
    }
    // validate_only changes nothing.
    assert_eq!(
        alter_configs(&mut c, 2, 2, "ac", &[("segment.ms", "9")], true).await,
        (0, None)
    );
    assert_eq!(
        topic_value(&mut c, "ac", "segment.ms").await.0.as_deref(),
        Some("5000")
    );
    // Broker: dynamic keys only.
    assert_eq!(
        alter_configs(&mut c, 2, 4, "1", &[("log.retention.bytes", "4096")], false).await,
        (0, None)
    );
    assert_eq!(
        topic_value(&mut c, "ac", "retention.bytes").await,
        (Some("4096".into()), 2)
    );
    assert_eq!(
        alter_configs(&mut c, 2, 4, "1", &[("num.partitions", "3")], false).await,
        (
            42, // INVALID_REQUEST, as Kafka 4.1.2 answers
            Some("Cannot update these configs dynamically: Set(num.partitions)".into())
        )
    );
    b.stop().await;
}

// ------------------------------------------------------------------ IncrementalAlterConfigs

async fn incremental(
    c: &mut Client,
    v: i16,
    resource_type: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let req = IncrementalAlterConfigsRequest::default()
        .with_resources(vec![iac::AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configs(
                ops.iter()
                    .map(|(k, op, v)| {
                        iac::AlterableConfig::default()
                            .with_name(s(k))
                            .with_config_operation(*op)
                            .with_value(v.map(s))
                    })
                    .collect(),
            )])
        .with_validate_only(validate_only);
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, v, &req).await;
    let x = &r.responses[0];
    assert_eq!(
        (x.resource_type, x.resource_name.as_str()),
        (resource_type, name)
    );
    (
        x.error_code,
        x.error_message.as_ref().map(|m| m.as_str().to_string()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_alter_configs_ops_apply_live_and_persist() {
    let mut b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic_v(&mut c, 7, "inc", 1, &[("retention.ms", "1000")], false).await;
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;
    const SUBTRACT: i8 = 3;
    for v in [0, 1] {
        let ok = incremental(
            &mut c,
            v,
            2,
            "inc",
            &[
                ("segment.ms", SET, Some("7000")),
                ("retention.ms", DELETE, None),
            ],
            false,
        )
        .await;
        assert_eq!(ok, (0, None));
        assert_eq!(
            topic_value(&mut c, "inc", "segment.ms").await,
            (Some("7000".into()), 1)
        );
        assert_eq!(
            topic_value(&mut c, "inc", "retention.ms").await,
            (Some("604800000".into()), 5)
        );
    }
    // APPEND starts from the default ("delete"); SUBTRACT removes.
    assert_eq!(
        incremental(
            &mut c,
            1,
            2,
            "inc",
            &[("cleanup.policy", APPEND, Some("compact"))],
            false
        )
        .await,
        (0, None)
    );
    assert_eq!(
        topic_value(&mut c, "inc", "cleanup.policy")
            .await
            .0
            .as_deref(),
        Some("delete,compact")
    );
    assert_eq!(
        incremental(
            &mut c,
            0,
            2,
            "inc",
            &[("cleanup.policy", SUBTRACT, Some("delete"))],
            false
        )
        .await,
        (0, None)
    );
    assert_eq!(
        topic_value(&mut c, "inc", "cleanup.policy")
            .await
            .0
            .as_deref(),
        Some("compact")
    );
    assert_eq!(
        incremental(
            &mut c,
            1,
            2,
            "inc",
            &[("retention.ms", APPEND, Some("5"))],
            false
        )
        .await,
        (
            40,
            Some("Can't APPEND to key retention.ms because its type is not LIST.".into())
        )
    );
    assert_eq!(
        incremental(
            &mut c,
            1,
            2,
            "inc",
            &[("max.message.bytes", SET, Some("-1"))],
            false
        )
        .await,
        (
            40,
            Some(
                "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"
                    .into()
            )
        )
    );
    assert_eq!(
        incremental(
            &mut c,
            1,
            2,
            "inc",
            &[("segment.ms", SET, Some("1")), ("segment.ms", DELETE, None)],
            false
        )
        .await
        .0,
        42
    );
    assert_eq!(
        incremental(&mut c, 1, 2, "inc", &[("segment.ms", SET, Some("1"))], true).await,
        (0, None)
    );
    assert_eq!(
        topic_value(&mut c, "inc", "segment.ms").await.0.as_deref(),
        Some("7000")
    );
    // A topic override of max.message.bytes takes effect at once on produce.
    assert_eq!(
        incremental(
            &mut c,
            1,
            2,
            "inc",
            &[("max.message.bytes", SET, Some("200"))],
            false
        )
        .await,
        (0, None)
    );
    assert_eq!(
        produce_sized(&mut c, "inc", 0, 1000).await,
        10,
        "MESSAGE_TOO_LARGE"
    );
    // Broker layers: per-broker and cluster default, inherited by topics at once.
    assert_eq!(
        incremental(
            &mut c,
            1,
            4,
            "",
            &[("log.retention.bytes", SET, Some("1000"))],
            false
        )
        .await,
        (0, None)
    );
    assert_eq!(
        topic_value(&mut c, "inc", "retention.bytes").await,
        (Some("1000".into()), 3)
    );
    assert_eq!(
        incremental(
            &mut c,
            0,
            4,
            "1",
            &[("log.retention.bytes", SET, Some("2000"))],
            false
        )
        .await,
        (0, None)
    );
    assert_eq!(
        topic_value(&mut c, "inc", "retention.bytes").await,
        (Some("2000".into()), 2)
    );
    assert_eq!(
        incremental(&mut c, 1, 4, "1", &[("log.segment.bytes", SET, Some("10"))], false).await,
        (42, Some("Invalid value 10 for configuration log.segment.bytes: Value must be at least 1048576".into()))
    );
    // Everything survives a restart.
    drop(c);
    b.restart(&[]).await;
    let mut c = b.client().await;
    assert_eq!(
        topic_value(&mut c, "inc", "segment.ms").await,
        (Some("7000".into()), 1)
    );
    assert_eq!(
        topic_value(&mut c, "inc", "cleanup.policy")
            .await
            .0
            .as_deref(),
        Some("compact")
    );
    assert_eq!(
        topic_value(&mut c, "inc", "retention.bytes").await,
        (Some("2000".into()), 2)
    );
    let r = describe_configs(&mut c, 4, 4, "", None, true).await;
    assert_eq!(r.configs.len(), 1);
    assert_eq!(r.configs[0].name.as_str(), "log.retention.bytes");
    assert_eq!(r.configs[0].config_source, 3);
    b.stop().await;
}

// ------------------------------------------------------------------ DescribeCluster

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_cluster_at_min_and_max_versions() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    let cluster_id = b.cluster_id();
    for v in [0, 2] {
        let req =
            DescribeClusterRequest::default().with_include_cluster_authorized_operations(v == 2);
        let r: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, v, &req).await;
        assert_eq!(r.error_code, 0);
        assert_eq!(r.error_message, None);
        assert_eq!(r.cluster_id.as_str(), cluster_id);
        assert_eq!(r.controller_id, BrokerId(1));
        assert_eq!(r.endpoint_type, 1, "BROKER (v0 decodes the default)");
        assert_eq!(r.brokers.len(), 1);
        let br = &r.brokers[0];
        assert_eq!(
            (br.broker_id, br.host.as_str(), br.port),
            (BrokerId(1), "127.0.0.1", b.advertised_port())
        );
        assert_eq!(br.rack, None);
        assert!(!br.is_fenced);
        let expected_ops = if v == 2 { 8096 } else { i32::MIN };
        assert_eq!(r.cluster_authorized_operations, expected_ops);
    }
    let req = DescribeClusterRequest::default().with_endpoint_type(2);
    let r: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, 2, &req).await;
    assert_eq!(r.error_code, 114);
    let req = DescribeClusterRequest::default().with_endpoint_type(9);
    let r: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, 1, &req).await;
    assert_eq!(r.error_code, 115);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Unsupported endpoint type 9")
    );
    b.stop().await;
}

// ------------------------------------------------------------------ DescribeTopicPartitions

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_topic_partitions_pages_with_a_cursor() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic_v(&mut c, 7, "a", 3, &[], false).await;
    create_topic_v(&mut c, 7, "b", 2, &[], false).await;
    let call = |topics: Vec<&str>, limit: i32, cursor: Option<(&str, i32)>| {
        DescribeTopicPartitionsRequest::default()
            .with_topics(
                topics
                    .into_iter()
                    .map(|t| TopicRequest::default().with_name(TopicName(s(t))))
                    .collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                Cursor::default()
                    .with_topic_name(TopicName(s(t)))
                    .with_partition_index(p)
            }))
    };
    let r: DescribeTopicPartitionsResponse = c
        .call(
            ApiKey::DescribeTopicPartitions,
            0,
            &call(vec![], 2000, None),
        )
        .await;
    let names: Vec<_> = r
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().as_str().to_string())
        .collect();
    assert_eq!(names, vec!["a", "b"]);
    assert!(r.next_cursor.is_none());
    let a = &r.topics[0];
    assert_eq!(
        (a.error_code, a.is_internal, a.partitions.len()),
        (0, false, 3)
    );
    assert!(!a.topic_id.is_nil());
    assert_eq!(a.topic_authorized_operations, 3576);
    let p = &a.partitions[2];
    assert_eq!(
        (p.error_code, p.partition_index, p.leader_id, p.leader_epoch),
        (0, 2, BrokerId(1), 0)
    );
    assert_eq!(p.replica_nodes, vec![BrokerId(1)]);
    assert_eq!(p.isr_nodes, vec![BrokerId(1)]);
    assert_eq!(p.eligible_leader_replicas, Some(vec![]));
    assert!(p.offline_replicas.is_empty());

    // Limit 2: a-0, a-1, then the cursor points at a-2.
    let r: DescribeTopicPartitionsResponse = c
        .call(ApiKey::DescribeTopicPartitions, 0, &call(vec![], 2, None))
        .await;
    assert_eq!(r.topics.len(), 1);
    assert_eq!(r.topics[0].partitions.len(), 2);
    let cur = r.next_cursor.unwrap();
    assert_eq!((cur.topic_name.as_str(), cur.partition_index), ("a", 2));
    let r: DescribeTopicPartitionsResponse = c
        .call(
            ApiKey::DescribeTopicPartitions,
            0,
            &call(vec![], 2, Some(("a", 2))),
        )
        .await;
    let got: Vec<_> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.name.as_ref().unwrap().as_str().to_string(),
                    p.partition_index,
                )
            })
        })
        .collect();
    assert_eq!(got, vec![("a".to_string(), 2), ("b".to_string(), 0)]);
    let cur = r.next_cursor.unwrap();
    assert_eq!((cur.topic_name.as_str(), cur.partition_index), ("b", 1));
    // Named topics, one unknown.
    let r: DescribeTopicPartitionsResponse = c
        .call(
            ApiKey::DescribeTopicPartitions,
            0,
            &call(vec!["zz", "b"], 2000, None),
        )
        .await;
    assert_eq!(r.topics.len(), 2);
    assert_eq!(
        (
            r.topics[0].name.as_ref().unwrap().as_str(),
            r.topics[0].error_code
        ),
        ("b", 0)
    );
    assert_eq!(
        (
            r.topics[1].name.as_ref().unwrap().as_str(),
            r.topics[1].error_code
        ),
        ("zz", 3)
    );
    assert!(r.topics[1].partitions.is_empty());
    b.stop().await;
}

// ------------------------------------------------------------------ DescribeLogDirs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_log_dirs_reports_partition_sizes() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic_v(&mut c, 7, "ld", 2, &[], false).await;
    create_topic_v(&mut c, 7, "other", 1, &[], false).await;
    produce(&mut c, "ld", 1, 0, 3).await;
    let dir = std::fs::canonicalize(b.dir())
        .unwrap()
        .display()
        .to_string();
    for v in [1, 4] {
        let req = DescribeLogDirsRequest::default().with_topics(Some(vec![
            DescribableLogDirTopic::default()
                .with_topic(TopicName(s("ld")))
                .with_partitions(vec![0, 1, 7]),
        ]));
        let r: DescribeLogDirsResponse = c.call(ApiKey::DescribeLogDirs, v, &req).await;
        assert_eq!(r.error_code, 0);
        assert_eq!(r.results.len(), 1);
        let d = &r.results[0];
        assert_eq!((d.error_code, d.log_dir.as_str()), (0, dir.as_str()));
        assert_eq!(d.topics.len(), 1);
        let parts: Vec<_> = d.topics[0]
            .partitions
            .iter()
            .map(|p| {
                (
                    p.partition_index,
                    p.partition_size > 0,
                    p.offset_lag,
                    p.is_future_key,
                )
            })
            .collect();
        assert_eq!(parts, vec![(0, false, 0, false), (1, true, 0, false)]);
        if v >= 4 {
            assert!(d.total_bytes > 0 && d.usable_bytes > 0 && d.usable_bytes <= d.total_bytes);
        } else {
            assert_eq!((d.total_bytes, d.usable_bytes), (-1, -1));
        }
    }
    let r: DescribeLogDirsResponse = c
        .call(
            ApiKey::DescribeLogDirs,
            4,
            &DescribeLogDirsRequest::default().with_topics(None),
        )
        .await;
    let mut names: Vec<_> = r.results[0]
        .topics
        .iter()
        .map(|t| t.name.as_str().to_string())
        .collect();
    names.sort();
    assert_eq!(names, vec!["ld", "other"]);
    b.stop().await;
}

// ------------------------------------------------------------------ OffsetForLeaderEpoch

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_for_leader_epoch_answers_epoch_zero_with_the_log_end() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic_v(&mut c, 7, "ep", 1, &[], false).await;
    produce(&mut c, "ep", 0, 0, 5).await;
    for v in [2, 4] {
        let req = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(TopicName(s("ep")))
                    .with_partitions(vec![
                        OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(0)
                            .with_leader_epoch(0),
                        OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(-1)
                            .with_leader_epoch(3),
                        OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(1)
                            .with_leader_epoch(0),
                        OffsetForLeaderPartition::default()
                            .with_partition(9)
                            .with_current_leader_epoch(-1)
                            .with_leader_epoch(0),
                    ]),
                OffsetForLeaderTopic::default()
                    .with_topic(TopicName(s("none")))
                    .with_partitions(vec![OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(-1)
                        .with_leader_epoch(0)]),
            ]);
        let r: OffsetForLeaderEpochResponse = c.call(ApiKey::OffsetForLeaderEpoch, v, &req).await;
        let got: Vec<_> = r.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition, p.error_code, p.leader_epoch, p.end_offset))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 0, 0, 5),
                (0, 0, -1, -1),
                (0, 75, -1, -1),
                (9, 3, -1, -1)
            ]
        );
        assert_eq!(r.topics[1].topic.as_str(), "none");
        assert_eq!(r.topics[1].partitions[0].error_code, 3);
    }
    // A restart re-registers the broker, which bumps the partition's leader epoch. A consumer
    // validating its position with the epoch it fetched at (0) must learn an end offset that
    // keeps it (the log end: nothing is truncated), never UNDEFINED, which makes the Java
    // consumer reset its position (found by java/streams-eos-restart recounting after a restart).
    let mut b = b;
    b.restart(&[]).await;
    let mut c = b.client().await;
    let md = protocol_tests_metadata_epoch(&mut c, "ep").await;
    assert!(md > 0, "a restart bumps the leader epoch (got {md})");
    let req = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(TopicName(s("ep")))
            .with_partitions(vec![
                OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(md)
                    .with_leader_epoch(0),
                OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(-1)
                    .with_leader_epoch(md + 1),
            ])]);
    let r: OffsetForLeaderEpochResponse = c.call(ApiKey::OffsetForLeaderEpoch, 4, &req).await;
    let got: Vec<_> = r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
        .collect();
    assert_eq!(got, vec![(0, 0, 5), (0, -1, -1)]);
    b.stop().await;
}

/// The leader epoch Metadata v12 reports for partition 0 of `topic`.
async fn protocol_tests_metadata_epoch(c: &mut Client, topic: &str) -> i32 {
    let req = kafka_protocol::messages::MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(s(topic)))),
    ]));
    let r: kafka_protocol::messages::MetadataResponse = c.call(ApiKey::Metadata, 12, &req).await;
    r.topics[0].partitions[0].leader_epoch
}

// ------------------------------------------------------------------ ElectLeaders

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_leaders_is_never_needed_on_one_node() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic_v(&mut c, 7, "el", 2, &[], false).await;
    for v in [0, 2] {
        let req = ElectLeadersRequest::default()
            .with_election_type(if v >= 1 { 1 } else { 0 })
            .with_topic_partitions(Some(vec![
                TopicPartitions::default()
                    .with_topic(TopicName(s("el")))
                    .with_partitions(vec![0, 5]),
                TopicPartitions::default()
                    .with_topic(TopicName(s("nope")))
                    .with_partitions(vec![0]),
            ]))
            .with_timeout_ms(1000);
        let r: ElectLeadersResponse = c.call(ApiKey::ElectLeaders, v, &req).await;
        assert_eq!(r.error_code, 0);
        let el = &r.replica_election_results[0];
        assert_eq!(el.topic.as_str(), "el");
        assert_eq!(
            (
                el.partition_result[0].partition_id,
                el.partition_result[0].error_code
            ),
            (0, 84)
        );
        assert_eq!(
            el.partition_result[0].error_message.as_deref(),
            Some("Leader election not needed for topic partition.")
        );
        assert_eq!(el.partition_result[1].error_code, 3);
        assert_eq!(
            el.partition_result[1].error_message.as_deref(),
            Some("No such partition as el-5")
        );
        let nope = &r.replica_election_results[1].partition_result[0];
        assert_eq!(nope.error_code, 3);
        assert_eq!(nope.error_message.as_deref(), Some("No such topic as nope"));
        // All partitions: nothing needed an election, so nothing is listed.
        let all = ElectLeadersRequest::default()
            .with_topic_partitions(None)
            .with_timeout_ms(1000);
        let r: ElectLeadersResponse = c.call(ApiKey::ElectLeaders, v, &all).await;
        assert!(r.replica_election_results.is_empty());
    }
    b.stop().await;
}
