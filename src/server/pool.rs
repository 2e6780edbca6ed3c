//! The broker-wide memory pool for request frames (Kafka's `queued.max.request.bytes`).
//!
//! A connection's reader acquires a frame's length from the pool as soon as it has read the
//! frame's 4-byte length prefix, before it reserves any buffer for the frame, and holds the
//! [`MemoryPermit`] until the request has been handled (its reply built, a barrier awaited); then
//! the permit is dropped and the bytes return to the pool. While the pool cannot grant a frame,
//! that reader waits and reads nothing more from its socket: the client's bytes stay in the
//! kernel (backpressure, as Kafka mutes channels when its pool is exhausted), nobody fails.
//!
//! Invariants: the bytes granted at once never exceed the capacity (a frame larger than the whole
//! pool is granted the whole pool; `socket.request.max.bytes` still caps it); grants are served
//! in request order (tokio's semaphore is fair), so a large frame is not starved by small ones.
//!
//! Thread-safe: one `Arc<MemoryPool>` is shared by every connection.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Request bytes being read or handled, across all connections.
#[derive(Debug)]
pub struct MemoryPool {
    capacity: usize,
    permits: Arc<Semaphore>,
    /// Granted bytes (the semaphore's view, kept separately so tests and metrics read one number).
    in_use: AtomicUsize,
    /// Highest `in_use` ever seen.
    peak: AtomicUsize,
    /// Readers waiting for a grant right now.
    waiting: AtomicUsize,
}

/// Bytes granted to one frame; returned to the pool on drop.
#[derive(Debug)]
pub struct MemoryPermit {
    pool: Arc<MemoryPool>,
    bytes: usize,
    _permit: OwnedSemaphorePermit,
}

impl MemoryPool {
    /// A pool of `capacity` bytes (at least 1; at most what one grant can ask, `u32::MAX`).
    pub fn new(capacity: usize) -> Arc<MemoryPool> {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        Arc::new(MemoryPool {
            capacity,
            permits: Arc::new(Semaphore::new(capacity)),
            in_use: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
        })
    }

    /// Waits until `frame_len` bytes (at most the whole pool) can be granted.
    pub async fn acquire(self: &Arc<Self>, frame_len: usize) -> MemoryPermit {
        let bytes = frame_len.clamp(1, self.capacity);
        let permit = match self.permits.clone().try_acquire_many_owned(bytes as u32) {
            Ok(p) => p,
            Err(_) => {
                self.waiting.fetch_add(1, Ordering::Relaxed);
                let _waiting = Decrement(&self.waiting);
                match self.permits.clone().acquire_many_owned(bytes as u32).await {
                    Ok(p) => p,
                    // The semaphore is never closed; should it be, wait forever rather than
                    // grant memory the pool does not have (the caller also watches `stop`).
                    Err(_) => std::future::pending().await,
                }
            }
        };
        let now = self.in_use.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
        MemoryPermit {
            pool: self.clone(),
            bytes,
            _permit: permit,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes granted right now.
    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Relaxed)
    }

    /// The most bytes ever granted at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Readers waiting for memory right now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

impl MemoryPermit {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for MemoryPermit {
    fn drop(&mut self) {
        // Before the semaphore permit (a later field) is released, so `in_use` never overstates.
        self.pool.in_use.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

struct Decrement<'a>(&'a AtomicUsize);

impl Drop for Decrement<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
