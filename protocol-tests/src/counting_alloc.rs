//! A global allocator that counts the bytes allocated (broker and client share the process), for
//! tests that bound what a request makes the broker allocate. A test binary installs it with
//! `#[global_allocator] static ALLOC: CountingBytes = CountingBytes;` and reads
//! [`allocated_bytes`] before and after.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

use sluice::alloc_guard::GuardedAllocator;

/// Forwards to the broker's own allocator, counting every allocation's size.
pub struct CountingBytes;

static BYTES: AtomicU64 = AtomicU64::new(0);

/// Bytes allocated so far through [`CountingBytes`] (frees are not subtracted).
pub fn allocated_bytes() -> u64 {
    BYTES.load(Ordering::SeqCst)
}

// SAFETY: every call is forwarded unchanged to `GuardedAllocator`, which upholds the contract.
unsafe impl GlobalAlloc for CountingBytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { GuardedAllocator.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { GuardedAllocator.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { GuardedAllocator.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        unsafe { GuardedAllocator.realloc(ptr, layout, new_size) }
    }
}
