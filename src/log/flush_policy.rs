//! Kafka's flush policy for one partition: `flush.messages` (broker `log.flush.interval.messages`)
//! and `flush.ms` (broker `log.flush.interval.ms`, checked every `log.flush.scheduler.interval.ms`).
//!
//! The decisions only; pure (counts and times are arguments). `replica::Partition` performs the
//! fsyncs as group commits. What each setting means, as in Kafka's `UnifiedLog.append` and
//! `LogManager.flushDirtyLogs`:
//! - `messages = N`: once an append leaves `N` or more messages (offsets) above what is durable,
//!   that append's caller fsyncs the log before it answers. Long.MAX (the default) never does.
//! - `N = 1` is special in what others see: every append is fsynced before it is acknowledged,
//!   and we also keep the high watermark at the durable offset, so consumers never read what a
//!   crash could take back. For `N > 1` the high watermark is not tied to the fsync (as in Kafka,
//!   where the flush is just a step of some appends): records are visible and acknowledged at
//!   once, and only the append that crosses the threshold waits for the fsync.
//! - `ms = T`: a partition whose last flush is at least `T` old is fsynced by the periodic check
//!   (Long.MAX, the default, never).

/// The flush settings of one log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushPolicy {
    /// `flush.messages`: at least 1.
    pub messages: i64,
    /// `flush.ms`: at least 0.
    pub ms: i64,
}

impl Default for FlushPolicy {
    /// Kafka's defaults: never flush by count or time (durability from replication).
    fn default() -> FlushPolicy {
        FlushPolicy {
            messages: i64::MAX,
            ms: i64::MAX,
        }
    }
}

impl FlushPolicy {
    /// Every append is fsynced before it is acknowledged, and the high watermark waits for it.
    pub fn every_message(&self) -> bool {
        self.messages <= 1
    }

    /// Whether an append that leaves `unflushed` messages above the durable (or already
    /// requested) offset must fsync.
    pub fn due_by_messages(&self, unflushed: i64) -> bool {
        self.messages != i64::MAX && unflushed >= self.messages.max(1)
    }

    /// Whether the periodic check must fsync a log last flushed at `last_flush_ms` with
    /// `unflushed` messages not yet durable.
    pub fn due_by_time(&self, unflushed: i64, now_ms: i64, last_flush_ms: i64) -> bool {
        self.ms != i64::MAX && unflushed > 0 && now_ms.saturating_sub(last_flush_ms) >= self.ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_ages_decide_as_kafka() {
        let never = FlushPolicy::default();
        assert!(!never.every_message());
        assert!(!never.due_by_messages(i64::MAX - 1));
        assert!(!never.due_by_time(5, i64::MAX, 0));

        let one = FlushPolicy {
            messages: 1,
            ms: i64::MAX,
        };
        assert!(one.every_message());
        assert!(one.due_by_messages(1));

        let three = FlushPolicy {
            messages: 3,
            ms: 1000,
        };
        assert!(!three.every_message());
        assert_eq!(
            (0..5).map(|n| three.due_by_messages(n)).collect::<Vec<_>>(),
            vec![false, false, false, true, true]
        );
        assert!(!three.due_by_time(1, 10_999, 10_000));
        assert!(three.due_by_time(1, 11_000, 10_000));
        // Nothing unflushed: nothing to do, however old the last flush.
        assert!(!three.due_by_time(0, 99_000, 10_000));
    }
}
