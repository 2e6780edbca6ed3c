use super::*;

fn o(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn err(pairs: &[(&str, &str)]) -> String {
    validate(&o(pairs), &Config::default()).unwrap_err()
}

#[test]
fn validation_messages_are_kafkas() {
    let cfg = Config::default();
    assert!(validate(&o(&[("consumer.session.timeout.ms", " 50000 ")]), &cfg).is_ok());
    assert!(validate(&o(&[("share.auto.offset.reset", "by_duration:PT1H")]), &cfg).is_ok());
    assert!(validate(&o(&[("share.isolation.level", "read_committed")]), &cfg).is_ok());
    let cases = [
        (("no.such", "1"), "Unknown group config name: no.such"),
        (("consumer.session.timeout.ms", "5000"), "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        (("consumer.session.timeout.ms", "70000"), "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
        (("consumer.session.timeout.ms", "abc"), "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
        (("consumer.session.timeout.ms", "0"), "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
        (("consumer.heartbeat.interval.ms", "1000"), "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
        (("consumer.heartbeat.interval.ms", "20000"), "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
        (("share.record.lock.duration.ms", "500"), "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
        (("share.record.lock.duration.ms", "14999"), "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
        (("share.isolation.level", "bogus"), "Invalid value bogus for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"),
        (("share.auto.offset.reset", "EARLIEST"), "Invalid value EARLIEST for configuration share.auto.offset.reset: Invalid value `EARLIEST` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."),
        (("streams.num.standby.replicas", "3"), "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
        (("streams.num.standby.replicas", "-1"), "Invalid value -1 for configuration streams.num.standby.replicas: Value must be at least 0"),
        (("streams.session.timeout.ms", "60001"), "streams.session.timeout.ms must be less than or equal to group.streams.max.session.timeout.ms"),
    ];
    for ((k, v), want) in cases {
        assert_eq!(err(&[(k, v)]), want, "{k}={v}");
    }
    assert!(!is_duration("xx") && !is_duration("P") && !is_duration("PT"));
    assert!(is_duration("P1DT2H3M4.5S") && is_duration("PT0S"));
}

#[test]
fn describe_reports_every_key_with_its_layer() {
    let cfg = Config::default();
    let entries = describe(&o(&[("consumer.session.timeout.ms", "50000")]), &cfg);
    assert_eq!(entries.len(), 10);
    let s = entries
        .iter()
        .find(|e| e.name == "consumer.session.timeout.ms")
        .unwrap();
    assert_eq!(
        (s.value.as_deref(), s.source),
        (Some("50000"), SOURCE_GROUP)
    );
    assert_eq!(s.synonyms.len(), 1);
    let h = entries
        .iter()
        .find(|e| e.name == "consumer.heartbeat.interval.ms")
        .unwrap();
    assert_eq!((h.value.as_deref(), h.source), (Some("5000"), 5));
}

#[test]
fn a_legacy_file_is_read_and_forgotten_group_by_group() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(FILE),
        br#"{"g": {"consumer.heartbeat.interval.ms": "6000"}, "h": {"share.isolation.level": "read_committed"}}"#,
    )
    .unwrap();
    let metadata = || std::sync::Arc::new(MetadataLog::new("c", 1));
    let store = GroupConfigStore::open(dir.path(), metadata()).unwrap();
    assert_eq!(store.groups(), vec!["g".to_string(), "h".to_string()]);
    assert_eq!(store.consumer_timeouts("g"), (None, Some(6000)));
    assert!(store.logged("g").is_empty());
    store.forget_legacy("g").unwrap();
    store.forget_legacy("nobody").unwrap();
    assert!(store.get("g").is_empty());
    let reopened = GroupConfigStore::open(dir.path(), metadata()).unwrap();
    assert_eq!(reopened.groups(), vec!["h".to_string()]);
    assert_eq!(
        reopened
            .get("h")
            .get("share.isolation.level")
            .map(String::as_str),
        Some("read_committed")
    );
    std::fs::write(dir.path().join(FILE), b"not json").unwrap();
    assert!(GroupConfigStore::open(dir.path(), metadata()).is_err());
}

#[test]
fn set_validates_in_a_store_without_a_metadata_log() {
    let cfg = Config::default();
    let store = GroupConfigStore::in_memory();
    let bad = o(&[("consumer.heartbeat.interval.ms", "1")]);
    assert!(matches!(
        store.set("g", bad, &cfg, false),
        Err(SetError::Invalid(_))
    ));
    store
        .set(
            "g",
            o(&[("share.isolation.level", "read_committed")]),
            &cfg,
            true,
        )
        .unwrap();
    assert!(store.groups().is_empty());
    store
        .set(
            "g",
            o(&[("consumer.heartbeat.interval.ms", "6000")]),
            &cfg,
            false,
        )
        .unwrap();
    assert_eq!(store.consumer_timeouts("g"), (None, Some(6000)));
}

#[test]
fn kip848_groups_take_their_overrides() {
    use crate::group::consumer::{ConsumerHeartbeatInput, MetadataImage, TopicImage};
    use crate::group::coordinator::Coordinator;
    use crate::group::GroupConfig;
    use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, GroupId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    let store = std::sync::Arc::new(GroupConfigStore::in_memory());
    let cfg = Config::default();
    let overrides = o(&[
        ("consumer.session.timeout.ms", "50000"),
        ("consumer.heartbeat.interval.ms", "6000"),
    ]);
    store.set("tuned", overrides, &cfg, false).unwrap();
    let mut c = Coordinator::new(GroupConfig::default());
    c.group_configs = Some(store);
    let image: MetadataImage = BTreeMap::from([(
        "t".to_string(),
        TopicImage {
            id: uuid::Uuid::from_u128(7),
            partitions: 1,
        },
    )]);
    let now = 1_000_000;
    // (group, heartbeat interval answered, session deadline set)
    for (group, interval, session) in [("tuned", 6000, 50_000), ("plain", 5000, 45_000)] {
        let sb = |s: &str| StrBytes::from_string(s.to_string());
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_member_id(sb("member-aaaaaaaaaaaaaaaaaaaa"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(sb("t"))]))
            .with_topic_partitions(Some(Vec::new()));
        let input = ConsumerHeartbeatInput {
            version: 1,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            request,
        };
        let r = c.consumer_heartbeat(now, input, &image);
        assert_eq!(
            (r.error_code, r.heartbeat_interval_ms),
            (0, interval),
            "{group}"
        );
        let m = &c.consumer_groups[group].members["member-aaaaaaaaaaaaaaaaaaaa"];
        assert_eq!(m.session_deadline, now + session, "{group}");
    }
}
