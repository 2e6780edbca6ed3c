//! The idempotent producer over the wire: InitProducerId, then sequenced batches, duplicates,
//! gaps and epochs, and duplicate detection across a restart.

use protocol_tests::{create_topic, list_offsets, produce, Client, TestBroker};
use sluice::record;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_RECORD: i16 = 87;

fn idem_batch(producer_id: i64, epoch: i16, seq: i32, values: &[&[u8]]) -> Vec<u8> {
    let records: Vec<_> = values.iter().map(|v| (None, Some(*v))).collect();
    record::build_batch(0, 1_700_000_000_000, (producer_id, epoch, seq), &records)
}

async fn latest(c: &mut Client, topic: &str) -> anyhow::Result<i64> {
    let r = list_offsets(c, 7, topic, 0, -1).await?;
    assert_eq!(r.error_code, 0);
    Ok(r.offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_get_the_original_offset_and_gaps_are_refused() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "idem", 1, &[]).await?;
    let pid = c.init_idempotent_producer().await?;

    let first = idem_batch(pid, 0, 0, &[b"a"]);
    let second = idem_batch(pid, 0, 1, &[b"b", b"c"]);
    let r = produce(&mut c, 9, "idem", 0, first.clone()).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 0));
    let r = produce(&mut c, 9, "idem", 0, second.clone()).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 1));
    assert_eq!(latest(&mut c, "idem").await?, 3);

    // Retries of either batch: success with the original base offset, nothing appended.
    for version in [3i16, 9, 12] {
        let r = produce(&mut c, version, "idem", 0, first.clone()).await?;
        assert_eq!(
            (r.error_code, r.base_offset),
            (0, 0),
            "v{version} retry of seq 0"
        );
        let r = produce(&mut c, version, "idem", 0, second.clone()).await?;
        assert_eq!(
            (r.error_code, r.base_offset),
            (0, 1),
            "v{version} retry of seq 1"
        );
    }
    assert_eq!(
        latest(&mut c, "idem").await?,
        3,
        "duplicates must not grow the log"
    );

    // A gap (next expected is 3).
    let r = produce(&mut c, 9, "idem", 0, idem_batch(pid, 0, 5, &[b"gap"])).await?;
    assert_eq!(r.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(r.base_offset, -1);
    // A producer id without a sequence.
    let r = produce(&mut c, 9, "idem", 0, idem_batch(pid, 0, -1, &[b"noseq"])).await?;
    assert_eq!(r.error_code, INVALID_RECORD);
    assert_eq!(latest(&mut c, "idem").await?, 3);

    // The in-order next batch is still accepted after the refusals.
    let r = produce(&mut c, 9, "idem", 0, idem_batch(pid, 0, 3, &[b"d"])).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 3));

    // Epoch bump: the new epoch must start at 0 ...
    let r = produce(&mut c, 9, "idem", 0, idem_batch(pid, 1, 4, &[b"e"])).await?;
    assert_eq!(
        r.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "new epoch at seq 4"
    );
    let r = produce(&mut c, 9, "idem", 0, idem_batch(pid, 1, 0, &[b"e"])).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 4), "new epoch at seq 0");
    // ... after which the old epoch is fenced, even with a sequence that would follow.
    let r = produce(&mut c, 9, "idem", 0, idem_batch(pid, 0, 4, &[b"zombie"])).await?;
    assert_eq!(r.error_code, INVALID_PRODUCER_EPOCH);
    // A retry of a batch from the old epoch is not a duplicate any more either.
    let r = produce(&mut c, 9, "idem", 0, first.clone()).await?;
    assert_eq!(r.error_code, INVALID_PRODUCER_EPOCH);
    assert_eq!(latest(&mut c, "idem").await?, 5);

    // Two producers are independent.
    let other = c.init_idempotent_producer().await?;
    assert_ne!(other, pid);
    let r = produce(&mut c, 9, "idem", 0, idem_batch(other, 0, 0, &[b"o"])).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 5));
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_last_five_batches_are_duplicates() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "five", 1, &[]).await?;
    let pid = c.init_idempotent_producer().await?;
    let batches: Vec<Vec<u8>> = (0..7).map(|s| idem_batch(pid, 0, s, &[b"v"])).collect();
    for (i, b) in batches.iter().enumerate() {
        let r = produce(&mut c, 9, "five", 0, b.clone()).await?;
        assert_eq!((r.error_code, r.base_offset), (0, i as i64));
    }
    // Sequences 2..=6 are cached: retries answer with their offsets.
    for (s, b) in batches.iter().enumerate().skip(2) {
        let r = produce(&mut c, 9, "five", 0, b.clone()).await?;
        assert_eq!(
            (r.error_code, r.base_offset),
            (0, s as i64),
            "retry of seq {s}"
        );
    }
    // Sequence 0 is too old to be recognised: out of order, and nothing is appended.
    let r = produce(&mut c, 9, "five", 0, batches[0].clone()).await?;
    assert_eq!(r.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(latest(&mut c, "five").await?, 7);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_detection_survives_a_restart() -> anyhow::Result<()> {
    let mut broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "restart", 1, &[]).await?;
    let pid = c.init_idempotent_producer().await?;
    let b0 = idem_batch(pid, 0, 0, &[b"a", b"b"]);
    let b1 = idem_batch(pid, 0, 2, &[b"c"]);
    assert_eq!(
        produce(&mut c, 9, "restart", 0, b0.clone())
            .await?
            .base_offset,
        0
    );
    assert_eq!(
        produce(&mut c, 9, "restart", 0, b1.clone())
            .await?
            .base_offset,
        2
    );
    drop(c);
    broker.restart(&[]).await?;
    let mut c = broker.connect().await?;
    let r = produce(&mut c, 9, "restart", 0, b1).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 2), "retry after restart");
    // Kafka's snapshot keeps only each producer's last batch; a clean shutdown snapshots at the
    // log end, so an older retry is no longer recognised (Kafka answers 45 too) and appends nothing.
    let r = produce(&mut c, 9, "restart", 0, b0).await?;
    assert_eq!(
        r.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "older retry after restart"
    );
    assert_eq!(latest(&mut c, "restart").await?, 3);
    let r = produce(&mut c, 9, "restart", 0, idem_batch(pid, 0, 4, &[b"gap"])).await?;
    assert_eq!(
        r.error_code, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "sequence state after restart"
    );
    let r = produce(&mut c, 9, "restart", 0, idem_batch(pid, 0, 3, &[b"d"])).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 3));
    // A fresh producer id after the restart does not collide with the old one.
    assert_ne!(c.init_idempotent_producer().await?, pid);
    broker.shutdown().await;
    Ok(())
}
