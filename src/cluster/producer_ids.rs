//! Producer-id allocation for InitProducerId.
//!
//! Single node: ids are handed out from blocks of [`BLOCK_SIZE`]; the end of the current block is
//! persisted in `<data>/producer-id-block` before any id of the block is given out, so ids never
//! repeat across restarts, even after a crash (at most one block is skipped).
//!
//! Multi-node ([`ProducerIdAllocator::from_controller`]): blocks come from the active controller
//! (AllocateProducerIds, committed as ProducerIds records, so ids never repeat in the cluster),
//! as Kafka's `RPCProducerIdManager`: [`ControllerBlocks`] holds the current block and asks for the
//! next once 90% of it is used; while no id is at hand `next_id` fails with
//! `io::ErrorKind::WouldBlock` (Kafka answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry).
//! The fetching task lives with the broker lifecycle (`controller::remote`).
//! Thread-safe (internal mutexes, never held across an `.await`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

/// Ids reserved per write of the block file.
pub const BLOCK_SIZE: i64 = 1000;

pub struct ProducerIdAllocator {
    source: Source,
}

enum Source {
    File {
        path: PathBuf,
        /// (next id to hand out, end of the reserved block, exclusive)
        state: Mutex<(i64, i64)>,
    },
    Controller(Arc<BlockFeed>),
}

/// Producer-id blocks from the controller (pure; see the module doc).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ControllerBlocks {
    /// (next id, end exclusive) of the block ids are handed from.
    current: Option<(i64, i64)>,
    /// The block fetched ahead of need.
    prefetched: Option<(i64, i64)>,
    in_flight: bool,
}

impl ControllerBlocks {
    /// The next id, moving to the prefetched block when the current one is used up.
    pub fn next_id(&mut self) -> Option<i64> {
        if self.current.is_none_or(|(next, end)| next >= end) {
            self.current = self.prefetched.take();
        }
        let (next, end) = self.current.as_mut()?;
        if *next >= *end {
            return None;
        }
        let id = *next;
        *next += 1;
        Some(id)
    }

    /// Whether a block should be asked for now: none in flight or prefetched, and the current
    /// one missing or at least 90% used.
    pub fn wants_block(&self) -> bool {
        let low = self
            .current
            .is_none_or(|(next, end)| (end - next) * 10 <= BLOCK_SIZE);
        !self.in_flight && self.prefetched.is_none() && low
    }

    /// A request for a block is on its way.
    pub fn start_fetch(&mut self) {
        self.in_flight = true;
    }

    /// The controller's block `[first, first + len)` arrived.
    pub fn add_block(&mut self, first: i64, len: i32) {
        self.in_flight = false;
        let block = (first, first.saturating_add(i64::from(len.max(0))));
        if self.current.is_none_or(|(next, end)| next >= end) {
            self.current = Some(block);
        } else {
            self.prefetched = Some(block);
        }
    }

    /// The request failed; the next `wants_block` asks again.
    pub fn fetch_failed(&mut self) {
        self.in_flight = false;
    }
}

/// [`ControllerBlocks`] shared between the allocator and the task fetching blocks, which waits on
/// `wake` (thread-safe).
#[derive(Debug, Default)]
pub struct BlockFeed {
    pub blocks: Mutex<ControllerBlocks>,
    pub wake: tokio::sync::Notify,
}

impl BlockFeed {
    /// An id if one is at hand; wakes the fetcher when a block is wanted.
    pub fn take(&self) -> Option<i64> {
        let (id, wants) = {
            let mut b = self.blocks.lock();
            let id = b.next_id();
            (id, b.wants_block())
        };
        if wants {
            self.wake.notify_one();
        }
        id
    }
}

impl ProducerIdAllocator {
    /// Opens the allocator; the first id handed out is past every id reserved before.
    pub fn open(data_dir: &Path) -> io::Result<ProducerIdAllocator> {
        let path = data_dir.join("producer-id-block");
        let reserved_end = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<i64>().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} does not hold a number", path.display()),
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(ProducerIdAllocator {
            source: Source::File {
                path,
                state: Mutex::new((reserved_end, reserved_end)),
            },
        })
    }

    /// An allocator handing out ids from the controller's blocks (multi-node).
    pub fn from_controller(feed: Arc<BlockFeed>) -> ProducerIdAllocator {
        feed.wake.notify_one(); // fetch the first block now
        ProducerIdAllocator {
            source: Source::Controller(feed),
        }
    }

    /// Returns a fresh producer id (`WouldBlock`: no controller block at hand yet).
    pub fn next_id(&self) -> io::Result<i64> {
        let (path, state) = match &self.source {
            Source::File { path, state } => (path, state),
            Source::Controller(feed) => {
                return feed.take().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::WouldBlock,
                        "no producer-id block from the controller yet",
                    )
                })
            }
        };
        let mut st = state.lock();
        if st.0 >= st.1 {
            let end = st.0 + BLOCK_SIZE;
            crate::log::checkpoint::write_atomically(path, end.to_string().as_bytes())
                .map_err(io::Error::other)?;
            st.1 = end;
        }
        let id = st.0;
        st.0 += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let a = ProducerIdAllocator::open(dir.path()).unwrap();
        let first: Vec<i64> = (0..3).map(|_| a.next_id().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(a);
        let b = ProducerIdAllocator::open(dir.path()).unwrap();
        let next = b.next_id().unwrap();
        assert_eq!(next, BLOCK_SIZE);
    }

    #[test]
    fn controller_blocks_prefetch_at_ninety_percent_and_switch_without_a_gap() {
        let mut b = ControllerBlocks::default();
        assert!(b.wants_block());
        assert_eq!(b.next_id(), None);
        b.start_fetch();
        assert!(!b.wants_block(), "one request at a time");
        b.add_block(5000, 1000);
        let first: Vec<i64> = (0..899).filter_map(|_| b.next_id()).collect();
        assert_eq!(first.first(), Some(&5000));
        assert_eq!(first.len(), 899);
        assert!(!b.wants_block(), "101 left");
        assert_eq!(b.next_id(), Some(5899));
        assert!(b.wants_block(), "100 left: 90% used");
        b.start_fetch();
        b.add_block(9000, 1000);
        assert!(!b.wants_block(), "prefetched");
        let rest: Vec<i64> = (0..101).filter_map(|_| b.next_id()).collect();
        assert_eq!(rest.last(), Some(&9000), "5900..5999 then the next block");
        assert_eq!(rest[99], 5999);
        assert!(!b.wants_block(), "999 left");
        for _ in 0..899 {
            assert!(b.next_id().is_some());
        }
        assert!(b.wants_block());
        b.start_fetch();
        assert!(!b.wants_block());
        b.fetch_failed();
        assert!(b.wants_block(), "asks again after a failure");
    }

    #[test]
    fn a_controller_allocator_would_block_until_a_block_arrives() {
        let feed = Arc::new(BlockFeed::default());
        let a = ProducerIdAllocator::from_controller(feed.clone());
        let e = a.next_id().expect_err("no block");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        feed.blocks.lock().add_block(42, 1000);
        assert_eq!(a.next_id().expect("id"), 42);
        assert_eq!(a.next_id().expect("id"), 43);
    }
}
