use kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, LeaderIdAndEpoch, PartitionData, SnapshotId,
};
use uuid::Uuid;

use super::*;
use crate::controller::metadata_fetch::encode_batch;

fn fence(id: i32) -> MetadataRecord {
    MetadataRecord::FenceBroker { id, epoch: 7 }
}

fn answer(p: PartitionData) -> FetchResponse {
    FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic_id(METADATA_TOPIC_ID)
        .with_partitions(vec![p])])
}

fn ok(records: Vec<u8>) -> PartitionData {
    PartitionData::default()
        .with_partition_index(0)
        .with_current_leader(
            LeaderIdAndEpoch::default()
                .with_leader_id(2.into())
                .with_leader_epoch(5),
        )
        .with_records(Some(records.into()))
}

fn batches(parts: &[(u64, Vec<MetadataRecord>)]) -> Vec<u8> {
    parts
        .iter()
        .flat_map(|(o, r)| encode_batch(*o, r, 0).to_vec())
        .collect()
}

#[test]
fn batches_decode_to_entries_and_empty_batches_only_move_the_position() {
    let bytes = batches(&[
        (3, vec![fence(1), fence(2)]),
        (4, vec![]),
        (6, vec![fence(3)]),
    ]);
    let (entries, upto) = parse_batches(&bytes, 1).unwrap();
    assert_eq!(
        entries,
        vec![(3, vec![fence(1), fence(2)]), (6, vec![fence(3)])]
    );
    assert_eq!(upto, Some(6));
    let (entries, upto) = parse_batches(&bytes, 5).unwrap();
    assert_eq!(
        entries,
        vec![(6, vec![fence(3)])],
        "batches below the position are skipped"
    );
    assert_eq!(upto, Some(6));
    // A partial last batch is ignored, as a cut Kafka answer.
    let cut = &bytes[..bytes.len() - 3];
    let (entries, upto) = parse_batches(cut, 1).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(upto, Some(4));
    assert_eq!(parse_batches(&[], 1).unwrap(), (vec![], None));
}

#[test]
fn a_damaged_or_undecodable_batch_is_an_error() {
    let mut bytes = batches(&[(3, vec![fence(1)])]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    assert!(parse_batches(&bytes, 1).unwrap_err().contains("CRC"));
    let garbage = crate::record::build_batch(4, 0, (-1, -1, -1), &[(None, Some(b"\x09\x09"))]);
    assert!(parse_batches(&garbage, 1).is_err());
    let backwards = batches(&[(5, vec![fence(1)]), (4, vec![fence(2)])]);
    assert!(parse_batches(&backwards, 1)
        .unwrap_err()
        .contains("out of order"));
}

#[test]
fn an_answer_with_entries_applies_them_and_follows_its_leader() {
    let a = answer(ok(batches(&[(1, vec![fence(1)]), (2, vec![])])));
    let leader = Some(LeaderAndEpoch {
        leader_id: Some(2),
        epoch: 5,
    });
    assert_eq!(
        on_fetch_answer(1, &a),
        Step::Apply {
            entries: vec![(1, vec![fence(1)])],
            upto: 2,
            leader
        }
    );
    assert_eq!(
        on_fetch_answer(3, &answer(ok(vec![]))),
        Step::Idle { leader },
        "an empty long poll"
    );
    assert_eq!(
        on_fetch_answer(3, &a),
        Step::Idle { leader },
        "batches all below the position move nothing"
    );
}

#[test]
fn a_snapshot_id_loads_the_snapshot_and_a_non_leader_redirects() {
    let snap = ok(vec![]).with_snapshot_id(SnapshotId::default().with_end_offset(41).with_epoch(5));
    assert!(matches!(
        on_fetch_answer(1, &answer(snap)),
        Step::LoadSnapshot {
            end_offset: 41,
            epoch: 5,
            ..
        }
    ));
    let not_leader = ok(vec![]).with_error_code(ResponseError::NotLeaderOrFollower.code());
    assert_eq!(
        on_fetch_answer(1, &answer(not_leader.clone())),
        Step::Redirect {
            leader: Some(LeaderAndEpoch {
                leader_id: Some(2),
                epoch: 5
            })
        }
    );
    let unknown = not_leader.with_current_leader(
        LeaderIdAndEpoch::default()
            .with_leader_id((-1).into())
            .with_leader_epoch(6),
    );
    assert_eq!(
        on_fetch_answer(1, &answer(unknown)),
        Step::Redirect { leader: None }
    );
}

#[test]
fn errors_are_retried() {
    let top = FetchResponse::default().with_error_code(ResponseError::InconsistentClusterId.code());
    assert!(
        matches!(on_fetch_answer(1, &top), Step::Retry(w) if w.contains("InconsistentClusterId"))
    );
    let other_topic =
        FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic_id(Uuid::from_u64_pair(9, 9))
            .with_partitions(vec![ok(vec![])])]);
    assert!(matches!(on_fetch_answer(1, &other_topic), Step::Retry(_)));
    let ahead = ok(vec![]).with_error_code(ResponseError::OffsetOutOfRange.code());
    assert!(
        matches!(on_fetch_answer(9, &answer(ahead)), Step::Retry(w) if w.contains("OffsetOutOfRange"))
    );
}

#[test]
fn a_snapshot_is_every_batch_s_records_in_order() {
    let mut bytes = encode_batch(9, &[fence(1), fence(2)], 0).to_vec();
    bytes.extend_from_slice(&encode_batch(9, &[fence(3)], 0));
    assert_eq!(
        snapshot_records(&bytes).unwrap(),
        vec![fence(1), fence(2), fence(3)],
        "batches at one offset (a snapshot's chunks)"
    );
    assert!(
        parse_batches(&bytes, 1).is_err(),
        "two entries at one offset in a fetch answer"
    );
}

#[test]
fn node_endpoints_of_an_answer_are_read_as_addresses() {
    use kafka_protocol::messages::fetch_response::NodeEndpoint;
    let endpoint = |id: i32, host: &'static str, port: i32| {
        NodeEndpoint::default()
            .with_node_id(id.into())
            .with_host(StrBytes::from_static_str(host))
            .with_port(port)
    };
    let mut r = FetchResponse::default();
    r.node_endpoints = vec![
        endpoint(2, "127.0.0.2", 9093),
        endpoint(3, "::1", 9094),
        endpoint(-1, "127.0.0.9", 9093),
        endpoint(4, "", 9093),
        endpoint(5, "h", 0),
        endpoint(6, "h", 70000),
    ];
    assert_eq!(
        answer_endpoints(&r),
        vec![
            (2, "127.0.0.2:9093".to_string()),
            (3, "[::1]:9094".to_string())
        ]
    );
}
