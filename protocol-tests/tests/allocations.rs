//! Allocations on the hot paths do not grow with records or bytes: a produce of one batch and a
//! fetch of many batches cost the broker the same number of heap allocations whether the batches
//! hold 1 record or 500, whether they carry 10 KiB or 100 KiB, and (fetch) whether 20 or 220 of
//! them are read. (What remains per request is a
//! small constant: the decoded request and response structures. Under a franz-go produce the
//! allocator's functions were 0.5% of the broker's CPU in `perf`.)
//!
//! The count is the whole process's (client and broker share it), so every request frame is
//! encoded before counting starts and responses are decoded after it ends; both shapes read the
//! same number of response frames.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest};
use protocol_tests::{
    batch, create_topic, decode_response, encode_request, fetch_request, produce_request, Client,
    TestBroker,
};
use sluice::alloc_guard::GuardedAllocator;

/// Counts allocations (and reallocations) made through the broker's own allocator.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to `GuardedAllocator`, which upholds the contract.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { GuardedAllocator.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { GuardedAllocator.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { GuardedAllocator.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { GuardedAllocator.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const REQUESTS: usize = 200;
/// Fetches per shape; each reads the whole partition (2-22 MiB).
const FETCHES: usize = 40;

/// `count` one-batch produce frames (acks=1) to `topic`, each batch `records` values of `size` bytes.
fn produce_frames(
    topic: &str,
    count: usize,
    records: usize,
    size: usize,
) -> anyhow::Result<Vec<Bytes>> {
    let value = vec![b'v'; size];
    let values: Vec<&[u8]> = vec![&value[..]; records];
    let b = Bytes::from(batch(&values));
    (0..count)
        .map(|i| {
            encode_request(
                10_000 + i as i32,
                9,
                &produce_request(topic, 0, 1, b.clone()),
            )
        })
        .collect()
}

/// Sends `frames` one at a time and returns the allocations made meanwhile, with the responses.
async fn counted(c: &mut Client, frames: &[Bytes]) -> anyhow::Result<(u64, Vec<Bytes>)> {
    let mut responses = Vec::with_capacity(frames.len());
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for f in frames {
        c.send_raw(f).await?;
        responses.push(c.read_frame().await?);
    }
    Ok((ALLOCATIONS.load(Ordering::SeqCst) - before, responses))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_fetch_allocations_do_not_grow_with_records_or_bytes() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    // (records per batch, bytes per record): 1 x 10 KiB, 500 x 20 B (same bytes), 500 x 200 B
    let shapes = [("one", 1, 10_240), ("many", 500, 20), ("big", 500, 200)];
    let mut topic_ids = Vec::new();
    for (name, _, _) in shapes {
        topic_ids.push(create_topic(&mut c, name, 1, &[]).await?.topic_id);
    }

    let mut produce_allocs = Vec::new();
    for (name, records, size) in shapes {
        // warm-up (segment files, index growth, first-request paths), then the counted run
        let (_, warm) = counted(&mut c, &produce_frames(name, 20, records, size)?).await?;
        let frames = produce_frames(name, REQUESTS, records, size)?;
        let (n, responses) = counted(&mut c, &frames).await?;
        for (i, mut f) in warm.into_iter().chain(responses).enumerate() {
            let id = if i < 20 {
                10_000 + i as i32
            } else {
                10_000 + (i - 20) as i32
            };
            let r = decode_response::<ProduceRequest>(ApiKey::Produce, 9, id, &mut f)?;
            let p = &r.responses[0].partition_responses[0];
            assert_eq!(p.error_code, 0, "{name} produce {i}");
            assert_eq!(p.base_offset, (i * records) as i64, "{name} produce {i}");
        }
        produce_allocs.push(n as f64 / REQUESTS as f64);
    }

    let mut fetch_allocs = Vec::new();
    // every shape's whole partition (220 batches), and the last 20 batches of the first: the count
    // does not grow with batches either
    let reads = shapes
        .iter()
        .zip(&topic_ids)
        .map(|(&(name, records, _), id)| (name, records, id, 0))
        .chain([(shapes[0].0, shapes[0].1, &topic_ids[0], 200)]);
    for (name, records, id, offset) in reads {
        let frames: Vec<Bytes> = (0..FETCHES)
            .map(|i| {
                let mut req = fetch_request(12, name, *id, 0, offset, 0, 1);
                req.topics[0].partitions[0].partition_max_bytes = 200 << 20;
                req.max_bytes = 200 << 20;
                encode_request(20_000 + i as i32, 12, &req)
            })
            .collect::<anyhow::Result<_>>()?;
        let (n, responses) = counted(&mut c, &frames).await?;
        for (i, mut f) in responses.into_iter().enumerate() {
            let r = decode_response::<FetchRequest>(ApiKey::Fetch, 12, 20_000 + i as i32, &mut f)?;
            let p = &r.responses[0].partitions[0];
            assert_eq!(p.error_code, 0, "{name} fetch {i}");
            assert_eq!(p.high_watermark, (220 * records) as i64, "{name} fetch {i}");
            let batches = (220 - offset) as usize;
            let size = p.records.as_ref().map_or(0, |r| r.len());
            assert_eq!(size % batches, 0, "{name} fetch {i}: {size} bytes");
            assert!(size / batches > 10_000, "{name} fetch {i}: {size} bytes");
        }
        fetch_allocs.push(n as f64 / FETCHES as f64);
    }
    eprintln!("allocations per request: produce {produce_allocs:?}, fetch {fetch_allocs:?}");

    // The same per request whatever the shape, up to stray allocations of background tasks (one
    // per request at most); a per-record or per-kilobyte allocation would add 500 or 300+.
    for (what, per) in [("produce", &produce_allocs), ("fetch", &fetch_allocs)] {
        let (lo, hi) = per
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), &v| (l.min(v), h.max(v)));
        assert!(
            hi - lo <= 1.0,
            "{what} allocations per request differ by shape: {per:?}"
        );
        assert!(
            lo > 0.0,
            "{what}: nothing counted, the counter is not in use"
        );
    }
    broker.shutdown().await;
    Ok(())
}
