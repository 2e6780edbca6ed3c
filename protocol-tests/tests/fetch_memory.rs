//! A Fetch whose `partition_max_bytes` is under 64 KiB no longer copies a large first batch into
//! memory (issue 13.3): the read is a file range whatever the requested limit, so the bytes the
//! broker allocates for it stay far below the batch's size.

use protocol_tests::counting_alloc::{allocated_bytes, CountingBytes};
use protocol_tests::{create_topic, produce, TestBroker};
use sluice::log::Records;
use sluice::record;

#[global_allocator]
static ALLOC: CountingBytes = CountingBytes;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_limit_over_a_large_first_batch_reads_a_file_range() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "big-first", 1, &[]).await?;
    // one ~900 KB batch, then a small one
    let values: Vec<Vec<u8>> = (0..9).map(|i| vec![i as u8; 100_000]).collect();
    let records: Vec<_> = values.iter().map(|v| (None, Some(&v[..]))).collect();
    let big = record::build_batch(0, 1_700_000_000_000, (-1, -1, -1), &records);
    let p = produce(&mut c, 9, "big-first", 0, big.clone()).await?;
    assert_eq!(p.error_code, 0);
    let partition = broker
        .broker()?
        .replicas
        .partition("big-first", 0)
        .expect("partition");
    for limit in [1, 1000, 60_000] {
        // warm the file cache so the descriptor is not counted
        partition.fetch_records(0, limit, false, true)?;
        let before = allocated_bytes();
        let read = partition.fetch_records(0, limit, false, true)?;
        let allocated = allocated_bytes() - before;
        let Records::File(f) = &read.records else {
            panic!(
                "limit {limit}: expected a file range, got {} bytes in memory ({allocated} \
                 bytes allocated)",
                read.records.len()
            );
        };
        assert_eq!(f.len(), big.len(), "limit {limit}: the first batch whole");
        // the header walk reads one 64 KiB chunk at most; the 900 KB batch is not copied
        assert!(
            allocated < 200_000,
            "limit {limit}: {allocated} bytes allocated for a {} byte batch",
            big.len()
        );
        println!(
            "limit {limit}: {allocated} bytes allocated for a {} byte first batch",
            big.len()
        );
    }
    broker.shutdown().await;
    Ok(())
}
