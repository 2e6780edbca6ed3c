//! Damaged batches met by reads (a batch header in a segment that does not parse): counted for
//! metrics and logged once per (segment, position), so a consumer that retries at the damage
//! does not turn every retry into an ERROR line.
//!
//! Invariant: at most [`MAX_REMEMBERED`] positions are remembered; past that, further damage is
//! still counted but logged no more (the count keeps telling an operator it goes on).
//! Thread-safe (`Send + Sync`): an atomic counter and a mutex held for one set operation.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Distinct damage positions remembered for log rate limiting.
pub const MAX_REMEMBERED: usize = 1024;

/// Whether a damaged read is to be logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DamageLog {
    /// First read to meet this (segment, position): log it.
    First,
    /// Seen before: count only.
    Repeat,
    /// New, but [`MAX_REMEMBERED`] positions are already remembered: count only.
    Untracked,
}

/// Damage met by one partition's reads. Owned by its `Partition`.
#[derive(Debug, Default)]
pub struct ReadDamage {
    reads: AtomicU64,
    logged: Mutex<HashSet<(PathBuf, u64)>>,
}

impl ReadDamage {
    pub fn new() -> ReadDamage {
        ReadDamage::default()
    }

    /// Counts one read that stopped at the damaged batch at `position` of `segment` and says
    /// whether to log it.
    pub fn record(&self, segment: &Path, position: u64) -> DamageLog {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let mut logged = self.logged.lock();
        let key = (segment.to_path_buf(), position);
        if logged.contains(&key) {
            DamageLog::Repeat
        } else if logged.len() >= MAX_REMEMBERED {
            DamageLog::Untracked
        } else {
            logged.insert(key);
            DamageLog::First
        }
    }

    /// Reads answered with a damaged batch since the broker started (a counter for metrics).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Distinct (segment, position) damages remembered.
    pub fn distinct(&self) -> usize {
        self.logged.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_damage_is_logged_once_and_every_read_counted() {
        let d = ReadDamage::new();
        let a = Path::new("t-0/00000000000000000000.log");
        let b = Path::new("t-0/00000000000000000100.log");
        assert_eq!(d.record(a, 4096), DamageLog::First);
        for _ in 0..1000 {
            assert_eq!(d.record(a, 4096), DamageLog::Repeat);
        }
        assert_eq!(d.record(a, 8192), DamageLog::First, "another position");
        assert_eq!(d.record(b, 4096), DamageLog::First, "another segment");
        assert_eq!(d.record(b, 4096), DamageLog::Repeat);
        assert_eq!(d.reads(), 1004);
        assert_eq!(d.distinct(), 3);
    }

    #[test]
    fn past_the_bound_damage_is_counted_not_logged() {
        let d = ReadDamage::new();
        let seg = Path::new("s.log");
        for pos in 0..MAX_REMEMBERED as u64 {
            assert_eq!(d.record(seg, pos), DamageLog::First);
        }
        assert_eq!(d.record(seg, u64::MAX), DamageLog::Untracked);
        assert_eq!(d.record(seg, 0), DamageLog::Repeat);
        assert_eq!(d.distinct(), MAX_REMEMBERED);
        assert_eq!(d.reads(), MAX_REMEMBERED as u64 + 2);
    }
}
