//! `api::fetch_encode::encode_fetch_response`: a Fetch answer for 6 partitions of one topic, each
//! carrying 1 MiB of records (spliced, not copied), as a consumer at full speed receives: records in
//! memory (`mem`, small reads) and as file ranges sent with sendfile (`file`, large reads).
use std::sync::Arc;

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use kafka_protocol::messages::TopicName;
use sluice::api::fetch_encode::{
    encode_fetch_response, FetchPartitionData, FetchResponseData, FetchTopicData,
};
use sluice::log::{FileRecords, Records};

fn response(records: Records) -> FetchResponseData {
    FetchResponseData {
        throttle_time_ms: 0,
        error_code: 0,
        session_id: 0,
        responses: vec![FetchTopicData {
            topic: TopicName(kafka_protocol::protocol::StrBytes::from_static_str(
                "bench-topic",
            )),
            topic_id: uuid::Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0),
            partitions: (0..6)
                .map(|p| FetchPartitionData {
                    partition_index: p,
                    error_code: 0,
                    high_watermark: 1_000_000,
                    last_stable_offset: 1_000_000,
                    log_start_offset: 0,
                    aborted_transactions: None,
                    preferred_read_replica: -1,
                    records: Some(records.clone()),
                    diverging_epoch: None,
                })
                .collect(),
        }],
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    std::fs::write(&path, vec![7u8; 1024 * 1024]).unwrap();
    let file = Arc::new(std::fs::File::open(&path).unwrap());
    let kinds = [
        ("mem", Records::Memory(Bytes::from(vec![7u8; 1024 * 1024]))),
        (
            "file",
            Records::File(FileRecords::new(file, 0, 1024 * 1024)),
        ),
    ];
    let mut g = c.benchmark_group("encode_fetch_response");
    for (kind, records) in kinds {
        let resp = response(records);
        for version in [11i16, 16] {
            g.bench_function(format!("v{version}_6x1MiB_{kind}"), |b| {
                let mut out = Vec::with_capacity(16);
                b.iter(|| {
                    out.clear();
                    encode_fetch_response(black_box(&resp), version, &mut out).unwrap()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
