//! Log lifecycle on the wire: DeleteRecords (key 21) at its lowest and highest versions, background
//! retention (time) and compaction (`cleanup.policy=compact`), each surviving a restart. Each test
//! starts its own broker in-process on 127.0.0.1:0 with a temporary data directory.

mod admin_support;

use admin_support::*;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sluice::config::Value;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

// ------------------------------------------------------------------ DeleteRecords

async fn delete_records(
    c: &mut Client,
    v: i16,
    topic: &str,
    parts: &[(i32, i64)],
) -> Vec<(i32, i64, i16)> {
    let req = DeleteRecordsRequest::default()
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(
                parts
                    .iter()
                    .map(|(p, o)| {
                        DeleteRecordsPartition::default()
                            .with_partition_index(*p)
                            .with_offset(*o)
                    })
                    .collect(),
            )])
        .with_timeout_ms(5000);
    let r: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, v, &req).await;
    assert_eq!(r.topics[0].name.as_str(), topic);
    r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.low_watermark, p.error_code))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_log_start_offset() {
    let mut b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    create_topic_v(&mut c, 7, "dr", 1, &[], false).await;
    for i in 0..10 {
        assert_eq!(produce(&mut c, "dr", 0, i, 1).await, 0);
    }
    assert_eq!(
        delete_records(&mut c, 0, "dr", &[(0, 4)]).await,
        vec![(0, 4, 0)]
    );
    // Lower than the start: no change; beyond the high watermark: OFFSET_OUT_OF_RANGE; -1 = HW.
    assert_eq!(
        delete_records(&mut c, 2, "dr", &[(0, 2)]).await,
        vec![(0, 4, 0)]
    );
    assert_eq!(
        delete_records(&mut c, 2, "dr", &[(0, 11)]).await,
        vec![(0, -1, 1)]
    );
    assert_eq!(
        delete_records(&mut c, 2, "dr", &[(0, -5)]).await,
        vec![(0, -1, 1)]
    );
    assert_eq!(
        delete_records(&mut c, 2, "dr", &[(1, 0)]).await,
        vec![(1, -1, 3)]
    );
    assert_eq!(
        delete_records(&mut c, 2, "nope", &[(0, 0)]).await,
        vec![(0, -1, 3)]
    );
    assert_eq!(list_offset(&mut c, "dr", -2).await, 4);
    assert_eq!(
        fetch_error(&mut c, "dr", 3).await,
        1,
        "OFFSET_OUT_OF_RANGE below the start"
    );
    assert_eq!(fetch_error(&mut c, "dr", 4).await, 0);
    assert_eq!(
        delete_records(&mut c, 1, "dr", &[(0, -1)]).await,
        vec![(0, 10, 0)]
    );
    assert_eq!(list_offset(&mut c, "dr", -2).await, 10);
    assert_eq!(list_offset(&mut c, "dr", -1).await, 10);
    // The start survives a restart.
    drop(c);
    b.restart(&[]).await;
    let mut c = b.client().await;
    assert_eq!(list_offset(&mut c, "dr", -2).await, 10);
    // A compacted topic refuses (POLICY_VIOLATION).
    create_topic_v(
        &mut c,
        7,
        "compacted",
        1,
        &[("cleanup.policy", "compact")],
        false,
    )
    .await;
    produce(&mut c, "compacted", 0, 0, 1).await;
    assert_eq!(
        delete_records(&mut c, 2, "compacted", &[(0, 1)]).await,
        vec![(0, -1, 44)]
    );
    assert_eq!(list_offset(&mut c, "compacted", -2).await, 0);
    b.stop().await;
}

// ------------------------------------------------------------------ Retention

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_old_segments_in_the_background() {
    let mut b = TestBroker::start(&[("log.retention.check.interval.ms", Value::Int(200))]).await;
    let mut c = b.client().await;
    let r = create_topic_v(
        &mut c,
        7,
        "ret",
        1,
        &[("segment.bytes", "1048576"), ("retention.ms", "3600000")],
        false,
    )
    .await;
    assert_eq!(r.error_code, 0);
    // Eight ~300 KiB records stamped two hours ago: three or four segments, all but the active
    // one expired.
    let old = now_ms() - 2 * 3_600_000;
    for i in 0..8 {
        assert_eq!(
            produce_at(&mut c, "ret", 0, old, 300 * 1024).await,
            0,
            "record {i}"
        );
    }
    let segments = |b: &TestBroker| {
        let mut v: Vec<_> = std::fs::read_dir(b.dir().join("ret-0"))
            .unwrap()
            .filter_map(|e| {
                e.ok()?
                    .file_name()
                    .to_str()?
                    .strip_suffix(".log")
                    .map(str::to_string)
            })
            .collect();
        v.sort();
        v
    };
    assert!(segments(&b).len() >= 3, "{:?}", segments(&b));
    let mut start = 0;
    for _ in 0..100 {
        start = list_offset(&mut c, "ret", -2).await;
        if start > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let remaining = segments(&b);
    assert_eq!(
        remaining.len(),
        1,
        "only the active segment stays: {remaining:?}"
    );
    assert_eq!(start, remaining[0].parse::<i64>().unwrap());
    assert!(start > 0 && start < 8);
    assert_eq!(list_offset(&mut c, "ret", -1).await, 8);
    assert_eq!(
        fetch_error(&mut c, "ret", 0).await,
        1,
        "OFFSET_OUT_OF_RANGE at an old offset"
    );
    assert_eq!(fetch_error(&mut c, "ret", start).await, 0);
    // The new start survives a restart.
    drop(c);
    b.restart(&[]).await;
    let mut c = b.client().await;
    assert_eq!(list_offset(&mut c, "ret", -2).await, start);
    b.stop().await;
}

// ------------------------------------------------------------------ Compaction

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_the_latest_value_per_key() {
    let mut b = TestBroker::start(&[("log.cleaner.backoff.ms", Value::Int(100))]).await;
    let mut c = b.client().await;
    let r = create_topic_v(
        &mut c,
        7,
        "compact",
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "1048576"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
        false,
    )
    .await;
    assert_eq!(r.error_code, 0);
    // Three keys, four rounds of ~200 KiB values: about four segments, latest round is 3.
    for round in 0..4u8 {
        for key in ["k0", "k1", "k2"] {
            let value = vec![b'0' + round; 200 * 1024];
            assert_eq!(produce_kv(&mut c, "compact", key, &value).await, 0);
        }
    }
    // Fill the rest of the active segment so round 3 is cleanable too.
    for _ in 0..6 {
        assert_eq!(
            produce_kv(&mut c, "compact", "filler", &vec![b'f'; 200 * 1024]).await,
            0
        );
    }
    let records = |b: &TestBroker| -> Vec<(i64, String, u8)> {
        let dir = b.dir().join("compact-0");
        let mut logs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                e.ok()?
                    .file_name()
                    .to_str()?
                    .strip_suffix(".log")
                    .map(str::to_string)
            })
            .collect();
        logs.sort();
        let mut out = Vec::new();
        for l in logs {
            let bytes = std::fs::read(dir.join(format!("{l}.log"))).unwrap();
            let mut pos = 0;
            while pos < bytes.len() {
                let h =
                    sluice::record::validate_batch(&bytes[pos..]).expect("valid batches on disk");
                let batch = &bytes[pos..pos + h.total_size()];
                for r in sluice::log::cleaner::records(batch, &h).unwrap() {
                    let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                    // the first value byte tells the round (values are 200 KiB of one byte)
                    let last = r.bytes[r.bytes.len() - 2];
                    out.push((r.offset, key, last));
                }
                pos += h.total_size();
            }
        }
        out
    };
    // Wait until only one k0 is left and the log stopped changing (a pass may be mid-way).
    let mut after = Vec::new();
    for _ in 0..100 {
        let now = records(&b);
        if now.iter().filter(|r| r.1 == "k0").count() == 1 && now == after {
            break;
        }
        after = now;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let latest: Vec<_> = after
        .iter()
        .filter(|r| r.1.starts_with('k'))
        .cloned()
        .collect();
    assert_eq!(
        latest,
        vec![
            (9, "k0".into(), b'3'),
            (10, "k1".into(), b'3'),
            (11, "k2".into(), b'3')
        ],
        "only round 3 survives"
    );
    // Offsets are unchanged: consumers see 9.. at offset 0, and the log end did not move.
    assert_eq!(list_offset(&mut c, "compact", -2).await, 0);
    assert_eq!(list_offset(&mut c, "compact", -1).await, 18);
    assert_eq!(fetch_error(&mut c, "compact", 0).await, 0);
    assert!(b.dir().join("cleaner-offset-checkpoint").exists());
    drop(c);
    b.restart(&[]).await;
    assert_eq!(records(&b), after, "the compacted log reopens as is");
    b.stop().await;
}
