//! Array counts and lengths larger than the frame are refused before anything is allocated from
//! them (`protocol::bounded`), so `alloc_guard` is only a backstop: a 100-byte body claiming
//! 2^31-1 elements, at any depth, classic or flexible, closes its connection while the largest
//! allocation the process makes stays small, and the broker goes on serving.
//!
//! The allocator below wraps the broker's own and records the largest single allocation while
//! armed; the client shares the process, but its allocations here are a few bytes.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use kafka_protocol::messages::ApiKey;
use protocol_tests::{raw_frame, TestBroker};
use sluice::alloc_guard::GuardedAllocator;

struct Largest;

static ARMED: AtomicBool = AtomicBool::new(false);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

impl Largest {
    fn note(size: usize) {
        if ARMED.load(Ordering::Relaxed) {
            LARGEST.fetch_max(size, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call is forwarded unchanged to `GuardedAllocator`, which upholds the contract.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Largest::note(layout.size());
        unsafe { GuardedAllocator.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Largest::note(layout.size());
        unsafe { GuardedAllocator.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { GuardedAllocator.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Largest::note(new_size);
        unsafe { GuardedAllocator.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Largest = Largest;

/// An unsigned varint.
fn uvarint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// (what, api key, version, body padded to 100 bytes) with a count of 2^31-1 somewhere inside.
fn bombs() -> Vec<(&'static str, ApiKey, i16, Vec<u8>)> {
    let big = i32::MAX;
    let mut out = Vec::new();
    // Produce v3: transactional id null, acks, timeout, topics = 2^31-1
    let mut b = vec![0xff, 0xff, 0, 1, 0, 0, 0x75, 0x30];
    b.extend_from_slice(&big.to_be_bytes());
    out.push(("Produce v3 topics", ApiKey::Produce, 3, b));
    // Produce v8: one topic "t" whose partitions = 2^31-1 (a nested array)
    let mut b = vec![0xff, 0xff, 0, 1, 0, 0, 0x75, 0x30, 0, 0, 0, 1, 0, 1, b't'];
    b.extend_from_slice(&big.to_be_bytes());
    out.push(("Produce v8 partitions of a topic", ApiKey::Produce, 8, b));
    // Produce v9 (flexible): header tagged fields, null compact id, acks, timeout, one topic "t",
    // partitions = 2^31-1
    let mut b = vec![0, 0, 0, 1, 0, 0, 0x75, 0x30, 2, 2, b't'];
    uvarint(big as u64 + 1, &mut b);
    out.push(("Produce v9 partitions of a topic", ApiKey::Produce, 9, b));
    // Metadata v4: topics = 2^31-1
    out.push((
        "Metadata v4 topics",
        ApiKey::Metadata,
        4,
        big.to_be_bytes().to_vec(),
    ));
    // Metadata v12 (flexible): header tagged fields, topics = 2^31-1
    let mut b = vec![0];
    uvarint(big as u64 + 1, &mut b);
    out.push(("Metadata v12 topics", ApiKey::Metadata, 12, b));
    // Fetch v12 (flexible): header tags, replica id, max wait, min bytes, max bytes, isolation,
    // session id, session epoch, topics = 2^31-1
    let mut b = vec![0];
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&500i32.to_be_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&(1i32 << 20).to_be_bytes());
    b.push(0);
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes());
    uvarint(big as u64 + 1, &mut b);
    out.push(("Fetch v12 topics", ApiKey::Fetch, 12, b));
    // SyncGroup v3: group "g", generation, member "m", instance null, assignments = 2^31-1
    let mut b = vec![0, 1, b'g', 0, 0, 0, 1, 0, 1, b'm', 0xff, 0xff];
    b.extend_from_slice(&big.to_be_bytes());
    out.push(("SyncGroup v3 assignments", ApiKey::SyncGroup, 3, b));
    for (_, _, _, body) in &mut out {
        body.resize(100, 0);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_beyond_the_frame_are_refused_without_a_large_allocation() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    for (what, key, version, body) in bombs() {
        let frame = raw_frame(key as i16, version, 9, &body);
        let mut c = broker.connect().await?;
        LARGEST.store(0, Ordering::SeqCst);
        ARMED.store(true, Ordering::SeqCst);
        c.send_raw(&frame).await?;
        let closed = c.expect_closed().await;
        ARMED.store(false, Ordering::SeqCst);
        let largest = LARGEST.load(Ordering::SeqCst);
        closed.map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
        assert!(
            largest < 1 << 20,
            "{what}: largest allocation {largest} bytes while refusing a 100-byte body"
        );
    }
    // the broker still serves
    broker.connect().await?.api_versions_ok().await?;
    broker.shutdown().await;
    Ok(())
}
