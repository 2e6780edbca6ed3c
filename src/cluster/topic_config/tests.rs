use super::*;

fn build(pairs: &[(&str, &str)]) -> Result<TopicConfig, TopicConfigError> {
    let m = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    TopicConfig::build(&Config::default(), m)
}

fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn overrides_apply_over_defaults() {
    let c = build(&[
        ("message.timestamp.type", "LogAppendTime"),
        ("segment.bytes", "1048576"),
        ("retention.ms", "1000"),
        ("retention.bytes", "5000"),
        ("cleanup.policy", "compact,delete"),
    ])
    .unwrap();
    assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
    assert_eq!(c.segment_bytes, 1_048_576);
    assert_eq!(c.retention_ms, 1000);
    assert_eq!(c.retention_bytes, 5000);
    assert!(c.cleanup_compact && c.cleanup_delete);
    assert_eq!(c.max_message_bytes, Config::default().message_max_bytes);
    let d = build(&[]).unwrap();
    assert_eq!(d.retention_ms, 604_800_000);
    assert_eq!(d.retention_bytes, -1);
    assert!(d.cleanup_delete && !d.cleanup_compact);
    assert_eq!(d.min_insync_replicas, 1);
}

#[test]
fn broker_dynamic_values_become_topic_defaults() {
    let mut dynamic = BTreeMap::new();
    dynamic.insert("log.retention.hours".to_string(), "2".to_string());
    dynamic.insert("log.cleanup.policy".to_string(), "compact".to_string());
    let broker = Config::default().with_dynamic(&dynamic).unwrap();
    let c = TopicConfig::defaults(&broker);
    assert_eq!(c.retention_ms, 2 * 3_600_000);
    assert!(c.cleanup_compact && !c.cleanup_delete);
    // log.retention.ms beats log.retention.hours whatever the layer order.
    dynamic.insert("log.retention.ms".to_string(), "7".to_string());
    let broker = Config::default().with_dynamic(&dynamic).unwrap();
    assert_eq!(TopicConfig::defaults(&broker).retention_ms, 7);
}

#[test]
fn bad_values_and_unknown_keys_get_kafkas_messages() {
    let msg = |pairs: &[(&str, &str)]| build(pairs).unwrap_err().to_string();
    assert_eq!(
        msg(&[("segment.bytes", "1000")]),
        "Invalid value 1000 for configuration segment.bytes: Value must be at least 1048576"
    );
    assert_eq!(
        msg(&[("segment.bytes", "tiny")]),
        "Invalid value tiny for configuration segment.bytes: Not a number of type INT"
    );
    assert_eq!(
        msg(&[("retention.ms", "-2")]),
        "Invalid value -2 for configuration retention.ms: Value must be at least -1"
    );
    assert_eq!(
        msg(&[("min.cleanable.dirty.ratio", "1.5")]),
        "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
    );
    assert_eq!(
        msg(&[("cleanup.policy", "shred")]),
        "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"
    );
    assert_eq!(
        msg(&[("no.such", "1")]),
        "Unknown topic config name: no.such"
    );
    assert_eq!(
        msg(&[("message.downconversion.enable", "true")]),
        "Unknown topic config name: message.downconversion.enable"
    );
    assert_eq!(
        msg(&[("min.insync.replicas", "0")]),
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"
    );
    assert!(build(&[("retention.bytes", "-2")]).is_ok());
    assert!(build(&[("unclean.leader.election.enable", "TRUE")]).is_ok());
}

#[test]
fn describe_matches_kafkas_sources_and_synonyms() {
    let empty = BTreeMap::new();
    let config = Config::default();
    let layers = BrokerLayers {
        per_broker: &empty,
        cluster_default: &empty,
        static_config: &config,
    };
    let o = overrides(&[("cleanup.policy", "compact"), ("retention.ms", "1000")]);
    let entries = describe_topic(&o, &layers, &config);
    assert_eq!(entries.len(), TOPIC_CONFIGS.len());
    let get = |n: &str| entries.iter().find(|e| e.name == n).unwrap().clone();

    let cp = get("cleanup.policy");
    assert_eq!(cp.value.as_deref(), Some("compact"));
    assert_eq!(cp.source, source::TOPIC);
    assert_eq!(cp.ty, ConfigType::List);
    assert_eq!(
        cp.synonyms,
        vec![
            Synonym {
                name: "cleanup.policy".into(),
                value: Some("compact".into()),
                source: source::TOPIC
            },
            Synonym {
                name: "log.cleanup.policy".into(),
                value: Some("delete".into()),
                source: source::DEFAULT
            },
        ]
    );
    let rm = get("retention.ms");
    assert_eq!(rm.synonyms.len(), 1);
    assert_eq!(rm.value.as_deref(), Some("1000"));

    let sm = get("segment.ms");
    assert_eq!(sm.value.as_deref(), Some("604800000"));
    assert_eq!(sm.source, source::DEFAULT);
    assert!(sm.synonyms.is_empty());

    let mmb = get("max.message.bytes");
    assert_eq!(mmb.value.as_deref(), Some("1048588"));
    assert_eq!(mmb.ty, ConfigType::Int);
    assert_eq!(mmb.synonyms[0].name, "message.max.bytes");
    assert_eq!(
        get("min.cleanable.dirty.ratio").value.as_deref(),
        Some("0.5")
    );
    assert_eq!(get("compression.type").value.as_deref(), Some("producer"));
    assert_eq!(
        get("follower.replication.throttled.replicas")
            .value
            .as_deref(),
        Some("")
    );
    assert!(entries.iter().all(|e| !e.read_only));
}

#[test]
fn describe_reports_dynamic_broker_layers() {
    let mut per_broker = BTreeMap::new();
    per_broker.insert("log.retention.bytes".to_string(), "4096".to_string());
    let mut cluster_default = BTreeMap::new();
    cluster_default.insert("log.retention.bytes".to_string(), "8192".to_string());
    let config = Config::default();
    let layers = BrokerLayers {
        per_broker: &per_broker,
        cluster_default: &cluster_default,
        static_config: &config,
    };
    let mut merged = cluster_default.clone();
    merged.extend(per_broker.clone());
    let effective = config.with_dynamic(&merged).unwrap();
    let entries = describe_topic(&BTreeMap::new(), &layers, &effective);
    let rb = entries
        .iter()
        .find(|e| e.name == "retention.bytes")
        .unwrap();
    assert_eq!(rb.value.as_deref(), Some("4096"));
    assert_eq!(rb.source, source::DYNAMIC_BROKER);
    let srcs: Vec<_> = rb
        .synonyms
        .iter()
        .map(|s| (s.value.clone().unwrap(), s.source))
        .collect();
    assert_eq!(
        srcs,
        vec![
            ("4096".to_string(), source::DYNAMIC_BROKER),
            ("8192".to_string(), source::DYNAMIC_DEFAULT_BROKER),
            ("-1".to_string(), source::DEFAULT)
        ]
    );
}
