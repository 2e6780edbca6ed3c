use proptest::prelude::*;

use super::*;
use crate::metadata::quotas::{ClientQuotaRecord, QuotaValue};
use crate::metadata::records::NO_LEADER;

fn ids() -> impl Strategy<Value = Vec<i32>> {
    proptest::collection::vec(-1i32..10, 0..5)
}

fn uuid_strategy() -> impl Strategy<Value = Uuid> {
    any::<u128>().prop_map(Uuid::from_u128)
}

fn record_strategy() -> impl Strategy<Value = MetadataRecord> {
    let register = (
        any::<i32>(),
        uuid_strategy(),
        any::<i64>(),
        proptest::collection::vec(
            ("[A-Z_]{1,8}", "[a-z0-9.]{0,12}", any::<u16>(), 0i16..4),
            0..3,
        ),
        proptest::collection::vec(("[a-z.]{1,12}", any::<i16>(), any::<i16>()), 0..3),
        proptest::option::of("[a-z0-9-]{0,6}"),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(broker_id, incarnation_id, broker_epoch, eps, features, rack, fenced, cs)| {
                MetadataRecord::RegisterBroker(RegisterBroker {
                    broker_id,
                    incarnation_id,
                    broker_epoch,
                    endpoints: eps
                        .into_iter()
                        .map(|(name, host, port, security_protocol)| BrokerEndpoint {
                            name,
                            host,
                            port,
                            security_protocol,
                        })
                        .collect(),
                    features,
                    rack,
                    fenced,
                    in_controlled_shutdown: cs,
                })
            },
        );
    let partition = (
        any::<i32>(),
        uuid_strategy(),
        ids(),
        ids(),
        ids(),
        ids(),
        any::<i32>(),
        any::<i32>(),
        any::<i32>(),
    )
        .prop_map(|(p, t, replicas, isr, rem, add, leader, le, pe)| {
            MetadataRecord::Partition(PartitionRecord {
                partition_id: p,
                topic_id: t,
                replicas,
                isr,
                removing_replicas: rem,
                adding_replicas: add,
                leader,
                leader_epoch: le,
                partition_epoch: pe,
                elr: vec![],
                last_known_elr: vec![],
            })
        });
    let change = (
        any::<i32>(),
        uuid_strategy(),
        proptest::option::of(ids()),
        prop_oneof![Just(NO_LEADER_CHANGE), Just(NO_LEADER), 0i32..100],
        proptest::option::of(ids()),
        proptest::option::of(ids()),
        proptest::option::of(ids()),
    )
        .prop_map(|(p, t, isr, leader, replicas, rem, add)| {
            MetadataRecord::PartitionChange(PartitionChange {
                partition_id: p,
                topic_id: t,
                isr,
                leader,
                replicas,
                removing_replicas: rem,
                adding_replicas: add,
                elr: None,
                last_known_elr: None,
            })
        });
    let resource = prop_oneof![
        Just(ConfigResourceType::Topic),
        Just(ConfigResourceType::Broker),
        Just(ConfigResourceType::Group)
    ];
    prop_oneof![
        register,
        partition,
        change,
        (any::<i32>(), any::<i64>()).prop_map(|(broker_id, broker_epoch)| {
            MetadataRecord::UnregisterBroker {
                broker_id,
                broker_epoch,
            }
        }),
        (any::<i32>(), any::<i64>())
            .prop_map(|(id, epoch)| MetadataRecord::FenceBroker { id, epoch }),
        (any::<i32>(), any::<i64>())
            .prop_map(|(id, epoch)| MetadataRecord::UnfenceBroker { id, epoch }),
        ("[a-z._-]{1,20}", uuid_strategy())
            .prop_map(|(name, topic_id)| MetadataRecord::Topic { name, topic_id }),
        uuid_strategy().prop_map(|topic_id| MetadataRecord::RemoveTopic { topic_id }),
        (
            resource,
            "[a-z0-9]{0,5}",
            "[a-z.]{1,20}",
            proptest::option::of("[ -~]{0,10}")
        )
            .prop_map(|(resource_type, resource_name, name, value)| {
                MetadataRecord::Config {
                    resource_type,
                    resource_name,
                    name,
                    value,
                }
            }),
        (any::<i32>(), any::<i64>(), any::<i64>()).prop_map(|(b, e, n)| {
            MetadataRecord::ProducerIds {
                broker_id: b,
                broker_epoch: e,
                next_producer_id: n,
            }
        }),
        ("[a-z.]{1,20}", any::<i16>()).prop_map(|(name, feature_level)| {
            MetadataRecord::FeatureLevel {
                name,
                feature_level,
            }
        }),
        (
            proptest::collection::vec(
                (
                    prop_oneof![Just("user"), Just("client-id"), Just("ip")],
                    proptest::option::of("[a-z0-9.]{0,8}")
                ),
                0..3
            ),
            "[a-z_]{1,24}",
            any::<f64>().prop_filter("a number", |v| !v.is_nan()),
            any::<bool>()
        )
            .prop_map(|(entity, key, value, remove)| {
                MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity: entity
                        .into_iter()
                        .map(|(t, n)| (t.to_string(), n))
                        .collect(),
                    key,
                    value: QuotaValue(if remove { 0.0 } else { value }),
                    remove,
                })
            }),
        (
            any::<i32>(),
            any::<i64>(),
            proptest::option::of(any::<bool>()),
            prop_oneof![Just(None), Just(Some(true))]
        )
            .prop_map(
                |(broker_id, broker_epoch, fenced, in_controlled_shutdown)| {
                    MetadataRecord::BrokerRegistrationChange {
                        broker_id,
                        broker_epoch,
                        fenced,
                        in_controlled_shutdown,
                    }
                }
            ),
    ]
}

proptest! {
    #[test]
    fn every_record_round_trips(record in record_strategy()) {
        let bytes = encode(&record);
        prop_assert_eq!(decode(&bytes), Ok(record));
    }

    #[test]
    fn every_strict_prefix_is_refused(record in record_strategy(), cut in any::<prop::sample::Index>()) {
        let bytes = encode(&record);
        let cut = cut.index(bytes.len());
        prop_assert!(decode(&bytes[..cut]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert_eq!(decode(&longer), Err(DecodeError::TrailingBytes));
    }

    /// Fuzz-style: any bytes decode to a record or an error, never a panic or a huge allocation.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(record) = decode(&bytes) {
            // Whatever decodes re-encodes to something that decodes to the same record.
            prop_assert_eq!(decode(&encode(&record)), Ok(record));
        }
    }

    /// Random bodies behind a valid frame header reach every record type's decoder.
    #[test]
    fn random_bodies_never_panic(
        kind in prop::sample::select(vec![0u8, 1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 17]),
        version in 0u8..4,
        body in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let mut bytes = vec![1, kind, version];
        bytes.extend_from_slice(&body);
        if let Ok(record) = decode(&bytes) {
            prop_assert_eq!(record_type(&record), u32::from(kind));
        }
    }
}

#[test]
fn fence_broker_bytes_match_kafkas_layout() {
    let bytes = encode(&MetadataRecord::FenceBroker { id: 3, epoch: 258 });
    // frame 1, type 7, version 0, Id int32, Epoch int64, no tagged fields.
    assert_eq!(bytes, [1, 7, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1, 2, 0]);
}

#[test]
fn partition_change_writes_only_changed_fields_as_tags() {
    let topic_id = Uuid::from_u128(0x0102);
    let change = MetadataRecord::PartitionChange(PartitionChange {
        partition_id: 1,
        topic_id,
        isr: Some(vec![2]),
        leader: NO_LEADER_CHANGE,
        replicas: None,
        removing_replicas: None,
        adding_replicas: None,
        elr: None,
        last_known_elr: None,
    });
    let bytes = encode(&change);
    let mut expected = vec![1, 5, 0, 0, 0, 0, 1];
    expected.extend_from_slice(topic_id.as_bytes());
    // one tag: tag 0, 5 bytes: compact array of one int32 (length 2).
    expected.extend_from_slice(&[1, 0, 5, 2, 0, 0, 0, 2]);
    assert_eq!(bytes, expected);
}

#[test]
fn unknown_types_versions_and_frames_are_errors() {
    assert_eq!(decode(&[2, 7, 0]), Err(DecodeError::FrameVersion(2)));
    assert_eq!(decode(&[1, 6, 0]), Err(DecodeError::RecordType(6)));
    assert_eq!(
        decode(&[1, 7, 1]),
        Err(DecodeError::Version {
            record_type: 7,
            version: 1
        })
    );
    assert_eq!(
        decode(&[]),
        Err(DecodeError::Schema(SchemaError::Truncated))
    );
    // A Partition v1 with its Directories array is read (the directories are skipped).
    let topic_id = Uuid::from_u128(9);
    let mut v1 = vec![1, 3, 1, 0, 0, 0, 0];
    v1.extend_from_slice(topic_id.as_bytes());
    v1.extend_from_slice(&[2, 0, 0, 0, 1, 2, 0, 0, 0, 1, 1, 1]);
    v1.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    v1.push(2);
    v1.extend_from_slice(&[0xaa; 16]);
    v1.push(0);
    assert_eq!(
        decode(&v1),
        Ok(MetadataRecord::Partition(PartitionRecord {
            partition_id: 0,
            topic_id,
            replicas: vec![1],
            isr: vec![1],
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            elr: vec![],
            last_known_elr: vec![],
        }))
    );
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Bytes Kafka 4.1.2's `MetadataRecordSerde` writes for these records (captured with its jars),
/// at the versions we write: ours are identical, and we read Kafka's.
#[test]
fn records_match_the_bytes_kafka_writes() {
    let topic_id = Uuid::from_u64_pair(3, 4);
    let cases: Vec<(MetadataRecord, &str)> = vec![
        (
            MetadataRecord::FenceBroker { id: 3, epoch: 258 },
            "01070000000003000000000000010200",
        ),
        (
            MetadataRecord::UnfenceBroker { id: 3, epoch: 258 },
            "01080000000003000000000000010200",
        ),
        (
            MetadataRecord::UnregisterBroker {
                broker_id: 3,
                broker_epoch: 258,
            },
            "01010000000003000000000000010200",
        ),
        (
            MetadataRecord::RegisterBroker(RegisterBroker {
                broker_id: 1,
                incarnation_id: Uuid::from_u64_pair(1, 2),
                broker_epoch: 5,
                endpoints: vec![BrokerEndpoint {
                    name: "PLAINTEXT".into(),
                    host: "h".into(),
                    port: 9092,
                    security_protocol: 0,
                }],
                features: vec![("metadata.version".into(), 1, 27)],
                rack: Some("r".into()),
                fenced: true,
                in_controlled_shutdown: false,
            }),
            "0100030000000100000000000000000100000000000000020000000000000005020a504c41494e544558540268238400000002116d657461646174612e76657273696f6e0001001b000272010000",
        ),
        (
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id,
            },
            "01020002740000000000000003000000000000000400",
        ),
        (
            MetadataRecord::Partition(PartitionRecord {
                partition_id: 1,
                topic_id,
                replicas: vec![1, 2],
                isr: vec![1],
                removing_replicas: vec![],
                adding_replicas: vec![],
                leader: 1,
                leader_epoch: 2,
                partition_epoch: 3,
                elr: vec![],
                last_known_elr: vec![],
            }),
            "01030000000001000000000000000300000000000000040300000001000000020200000001010100000001000000020000000300",
        ),
        (
            MetadataRecord::PartitionChange(PartitionChange {
                partition_id: 1,
                topic_id,
                isr: Some(vec![2]),
                leader: 2,
                replicas: None,
                removing_replicas: None,
                adding_replicas: None,
                elr: None,
                last_known_elr: None,
            }),
            "01050000000001000000000000000300000000000000040200050200000002010400000002",
        ),
        (
            MetadataRecord::Config {
                resource_type: ConfigResourceType::Topic,
                resource_name: "t".into(),
                name: "retention.ms".into(),
                value: Some("1000".into()),
            },
            "0104000202740d726574656e74696f6e2e6d73053130303000",
        ),
        (
            MetadataRecord::Config {
                resource_type: ConfigResourceType::Broker,
                resource_name: String::new(),
                name: "x".into(),
                value: None,
            },
            "010400040102780000",
        ),
        (
            MetadataRecord::RemoveTopic { topic_id },
            "0109000000000000000003000000000000000400",
        ),
        (
            MetadataRecord::FeatureLevel {
                name: "metadata.version".into(),
                feature_level: 27,
            },
            "010c00116d657461646174612e76657273696f6e001b00",
        ),
        (
            MetadataRecord::ProducerIds {
                broker_id: 1,
                broker_epoch: 5,
                next_producer_id: 1000,
            },
            "010f0000000001000000000000000500000000000003e800",
        ),
        (
            MetadataRecord::BrokerRegistrationChange {
                broker_id: 1,
                broker_epoch: 5,
                fenced: Some(true),
                in_controlled_shutdown: Some(true),
            },
            "01110100000001000000000000000502000101010101",
        ),
        (
            MetadataRecord::BrokerRegistrationChange {
                broker_id: 1,
                broker_epoch: 5,
                fenced: Some(false),
                in_controlled_shutdown: None,
            },
            "011101000000010000000000000005010001ff",
        ),
    ];
    for (record, kafka) in cases {
        assert_eq!(encode(&record), hex(kafka), "{record:?}");
        assert_eq!(decode(&hex(kafka)), Ok(record));
    }
}

/// ClientQuotaRecord v0 as its JSON schema lays it out (flexible): the entity as a compact array
/// of (compact string type, compact nullable string name, tags), the key, the float64 value, the
/// remove flag, tags.
#[test]
fn client_quota_record_layout() {
    let set = MetadataRecord::ClientQuota(ClientQuotaRecord {
        entity: vec![("user".into(), Some("alice".into()))],
        key: "producer_byte_rate".into(),
        value: QuotaValue(1024.0),
        remove: false,
    });
    let bytes = hex(concat!(
        "010e00",
        "02",
        "0575736572",
        "06616c696365",
        "00",
        "1370726f64756365725f627974655f72617465",
        "4090000000000000",
        "00",
        "00"
    ));
    assert_eq!(encode(&set), bytes);
    assert_eq!(decode(&bytes), Ok(set));
    // The default client id (a null name), removed.
    let removed = MetadataRecord::ClientQuota(ClientQuotaRecord {
        entity: vec![("client-id".into(), None)],
        key: "request_percentage".into(),
        value: QuotaValue(0.0),
        remove: true,
    });
    let bytes = hex(concat!(
        "010e00",
        "02",
        "0a636c69656e742d6964",
        "00",
        "00",
        "13726571756573745f70657263656e74616765",
        "0000000000000000",
        "01",
        "00"
    ));
    assert_eq!(encode(&removed), bytes);
    assert_eq!(decode(&bytes), Ok(removed));
    // v1 is not a version Kafka 4.1 writes.
    assert_eq!(
        decode(&[1, 14, 1]),
        Err(DecodeError::Version {
            record_type: 14,
            version: 1
        })
    );
}
