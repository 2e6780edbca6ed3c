//! Group configs (resource type 32) on the wire, as Apache Kafka 4.1.2 answers them (read from
//! the real broker): DescribeConfigs lists the ten group configs with the broker defaults or the
//! group's overrides (source GROUP_CONFIG = 8), IncrementalAlterConfigs / AlterConfigs validate
//! with Kafka's messages and persist, ListConfigResources lists groups with configs, and a KIP-848
//! group's heartbeat interval follows its override.

mod admin_support;

use admin_support::*;
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request as iac;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const GROUP: i8 = 32;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// DescribeConfigs of one group: (error code, [(name, value, source, type, synonym sources)]).
async fn describe(
    c: &mut Client,
    name: &str,
    version: i16,
) -> (i16, Vec<(String, String, i8, i8, Vec<i8>)>) {
    let req = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(GROUP)
            .with_resource_name(s(name))
            .with_configuration_keys(None)])
        .with_include_synonyms(version >= 1);
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, version, &req).await;
    let res = &r.results[0];
    let mut configs: Vec<_> = res
        .configs
        .iter()
        .map(|e| {
            assert!(!e.read_only && !e.is_sensitive, "{}", e.name.as_str());
            (
                e.name.to_string(),
                e.value.as_deref().unwrap_or("<null>").to_string(),
                e.config_source,
                e.config_type,
                e.synonyms.iter().map(|y| y.source).collect(),
            )
        })
        .collect();
    configs.sort();
    (res.error_code, configs)
}

/// IncrementalAlterConfigs v1 of one group: (error code, message).
async fn alter(
    c: &mut Client,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![iac::AlterConfigsResource::default()
            .with_resource_type(GROUP)
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
            )]);
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req).await;
    let x = &r.responses[0];
    (
        x.error_code,
        x.error_message.as_ref().map(|m| m.to_string()),
    )
}

async fn groups_with_configs(c: &mut Client) -> Vec<String> {
    let req = ListConfigResourcesRequest::default().with_resource_types(vec![GROUP]);
    let r: ListConfigResourcesResponse = c.call(ApiKey::ListConfigResources, 1, &req).await;
    assert_eq!(r.error_code, 0);
    r.config_resources
        .iter()
        .map(|x| x.resource_name.to_string())
        .collect()
}

fn defaults() -> Vec<(String, String, i8, i8, Vec<i8>)> {
    let d = |n: &str, v: &str, t: i8| (n.to_string(), v.to_string(), 5i8, t, vec![5i8]);
    vec![
        d("consumer.heartbeat.interval.ms", "5000", 3),
        d("consumer.session.timeout.ms", "45000", 3),
        d("share.auto.offset.reset", "latest", 2),
        d("share.heartbeat.interval.ms", "5000", 3),
        d("share.isolation.level", "read_uncommitted", 2),
        d("share.record.lock.duration.ms", "30000", 3),
        d("share.session.timeout.ms", "45000", 3),
        d("streams.heartbeat.interval.ms", "5000", 3),
        d("streams.num.standby.replicas", "0", 3),
        d("streams.session.timeout.ms", "45000", 3),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_configs_describe_alter_list_and_persist() {
    let mut b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    assert_eq!(describe(&mut c, "g", 4).await, (0, defaults()));
    let (code, _) = describe(&mut c, "", 4).await;
    assert_eq!(code, 42, "Group name must not be empty");

    let ok = (0, None);
    let set = |k: &'static str, v: &'static str| [(k, 0i8, Some(v))];
    assert_eq!(
        alter(
            &mut c,
            "g",
            &set("consumer.session.timeout.ms", "50000"),
            false
        )
        .await,
        ok
    );
    assert_eq!(
        alter(
            &mut c,
            "g",
            &set("share.auto.offset.reset", "earliest"),
            false
        )
        .await,
        ok
    );
    let refused: [(&str, &str, i16, &str); 5] = [
        ("consumer.session.timeout.ms", "5000", 40, "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        ("consumer.heartbeat.interval.ms", "20000", 40, "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
        ("consumer.session.timeout.ms", "abc", 40, "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
        ("no.such", "1", 40, "Unknown group config name: no.such"),
        ("share.record.lock.duration.ms", "500", 40, "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ];
    for (k, v, code, message) in refused {
        let got = alter(&mut c, "g", &set(k, v), false).await;
        assert_eq!(got, (code, Some(message.to_string())), "{k}={v}");
    }
    assert_eq!(
        alter(
            &mut c,
            "g",
            &[("consumer.session.timeout.ms", 2, Some("1"))],
            false
        )
        .await,
        (
            40,
            Some(
                "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST."
                    .into()
            )
        )
    );
    assert_eq!(
        alter(
            &mut c,
            "g",
            &[("consumer.session.timeout.ms", 0, None)],
            false
        )
        .await,
        (
            42,
            Some("Null value not supported for : consumer.session.timeout.ms".into())
        )
    );
    assert_eq!(
        alter(
            &mut c,
            "",
            &set("consumer.session.timeout.ms", "50000"),
            false
        )
        .await,
        (42, Some("Default group resources are not allowed.".into()))
    );
    // Validate-only stores nothing.
    assert_eq!(
        alter(
            &mut c,
            "h",
            &set("share.isolation.level", "read_committed"),
            true
        )
        .await,
        ok
    );

    let mut want = defaults();
    want[1] = (
        "consumer.session.timeout.ms".into(),
        "50000".into(),
        8,
        3,
        vec![8],
    );
    want[2] = (
        "share.auto.offset.reset".into(),
        "earliest".into(),
        8,
        2,
        vec![8],
    );
    assert_eq!(describe(&mut c, "g", 4).await, (0, want.clone()));
    assert_eq!(groups_with_configs(&mut c).await, vec!["g".to_string()]);

    // Overrides survive a restart.
    b.restart(&[]).await;
    let mut c = b.client().await;
    assert_eq!(describe(&mut c, "g", 4).await, (0, want));

    // Legacy AlterConfigs replaces every override.
    let req = AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(GROUP)
        .with_resource_name(s("g"))
        .with_configs(vec![AlterableConfig::default()
            .with_name(s("consumer.heartbeat.interval.ms"))
            .with_value(Some(s("6000")))])]);
    let r: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, 2, &req).await;
    assert_eq!(r.responses[0].error_code, 0);
    let (_, got) = describe(&mut c, "g", 1).await;
    let sources: Vec<(&str, i8)> = got
        .iter()
        .filter(|e| e.2 == 8)
        .map(|e| (e.0.as_str(), e.2))
        .collect();
    assert_eq!(sources, vec![("consumer.heartbeat.interval.ms", 8)]);

    // The KIP-848 group "g" heartbeats at its interval; another group at the default.
    assert_eq!(
        create_topic_v(&mut c, 7, "t", 1, &[], false)
            .await
            .error_code,
        0
    );
    for (group, interval) in [("g", 6000), ("other", 5000)] {
        let req = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_member_id(s("m1-aaaaaaaaaaaaaaaaaaaa"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30000)
            .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
            .with_topic_partitions(Some(vec![]));
        let r: ConsumerGroupHeartbeatResponse =
            c.call(ApiKey::ConsumerGroupHeartbeat, 0, &req).await;
        assert_eq!(
            (r.error_code, r.heartbeat_interval_ms),
            (0, interval),
            "{group}"
        );
    }

    // Deleting the last override drops the group from the listing.
    assert_eq!(
        alter(
            &mut c,
            "g",
            &[("consumer.heartbeat.interval.ms", 1, None)],
            false
        )
        .await,
        ok
    );
    assert!(groups_with_configs(&mut c).await.is_empty());
}
