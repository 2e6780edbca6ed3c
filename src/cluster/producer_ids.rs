//! Producer-id allocation for InitProducerId.
//!
//! Ids are handed out from blocks of [`BLOCK_SIZE`]; the end of the current block is persisted in
//! `<data>/producer-id-block` before any id of the block is given out, so ids never repeat across
//! restarts, even after a crash (at most one block is skipped). Thread-safe (internal mutex).

use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// Ids reserved per write of the block file.
pub const BLOCK_SIZE: i64 = 1000;

pub struct ProducerIdAllocator {
    path: PathBuf,
    /// (next id to hand out, end of the reserved block, exclusive)
    state: Mutex<(i64, i64)>,
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
            path,
            state: Mutex::new((reserved_end, reserved_end)),
        })
    }

    /// Returns a fresh producer id.
    pub fn next_id(&self) -> io::Result<i64> {
        let mut st = self.state.lock();
        if st.0 >= st.1 {
            let end = st.0 + BLOCK_SIZE;
            crate::log::checkpoint::write_atomically(&self.path, end.to_string().as_bytes())
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
}
