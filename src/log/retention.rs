//! Which whole segments retention removes, as Kafka's `UnifiedLog.deleteOldSegments` decides:
//! first the oldest segments whose largest timestamp is more than `retention.ms` old, then the
//! oldest segments while the log stays at or above `retention.bytes` without them. The active
//! (last) segment is never selected. Pure: no clock, no I/O.

/// What retention needs to know about one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentStat {
    pub size: u64,
    /// The segment's largest record timestamp (Kafka falls back to the file's mtime when a
    /// segment has none; the caller does that).
    pub largest_timestamp: i64,
}

/// Why segments go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionPlan {
    /// Leading segments removed by `retention.ms`.
    pub by_time: usize,
    /// Further leading segments removed by `retention.bytes`.
    pub by_size: usize,
}

impl RetentionPlan {
    /// How many leading segments to delete in total.
    pub fn total(&self) -> usize {
        self.by_time + self.by_size
    }
}

/// Plans retention over `segments` (oldest first, the active segment last). Negative
/// `retention_ms` / `retention_bytes` disable that rule.
pub fn plan(
    segments: &[SegmentStat],
    now_ms: i64,
    retention_ms: i64,
    retention_bytes: i64,
) -> RetentionPlan {
    let deletable = segments.len().saturating_sub(1);
    let mut p = RetentionPlan::default();
    if retention_ms >= 0 {
        while p.by_time < deletable
            && now_ms.saturating_sub(segments[p.by_time].largest_timestamp) > retention_ms
        {
            p.by_time += 1;
        }
    }
    if retention_bytes >= 0 {
        let remaining: u64 = segments[p.by_time..].iter().map(|s| s.size).sum();
        let mut excess = remaining as i64 - retention_bytes;
        let mut i = p.by_time;
        while i < deletable && excess - segments[i].size as i64 >= 0 {
            excess -= segments[i].size as i64;
            i += 1;
        }
        p.by_size = i - p.by_time;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seg(size: u64, ts: i64) -> SegmentStat {
        SegmentStat {
            size,
            largest_timestamp: ts,
        }
    }

    #[test]
    fn time_rule_takes_the_expired_prefix_but_never_the_active_segment() {
        let segs = [seg(10, 100), seg(10, 200), seg(10, 900), seg(10, 100)];
        // now 1000, retention 500: segments older than t=500 go, but only as a prefix.
        assert_eq!(plan(&segs, 1000, 500, -1).by_time, 2);
        // Everything expired: the active segment stays.
        assert_eq!(plan(&segs, 10_000, 500, -1).by_time, 3);
        // Exactly at the limit is kept (Kafka uses >).
        assert_eq!(plan(&[seg(1, 500), seg(1, 0)], 1000, 500, -1).by_time, 0);
        assert_eq!(plan(&segs, 10_000, -1, -1), RetentionPlan::default());
    }

    #[test]
    fn size_rule_keeps_the_log_at_or_above_the_limit() {
        let segs = [seg(100, 0), seg(100, 0), seg(100, 0), seg(50, 0)];
        assert_eq!(plan(&segs, 0, -1, 150).by_size, 2); // 350 -> 150
        assert_eq!(plan(&segs, 0, -1, 200).by_size, 1); // 350 -> 250, not 150
        assert_eq!(plan(&segs, 0, -1, 250).by_size, 1); // 350 -> 250
        assert_eq!(plan(&segs, 0, -1, 251).by_size, 0);
        assert_eq!(plan(&segs, 0, -1, 0).by_size, 3); // never the active one
    }

    #[test]
    fn size_rule_counts_what_the_time_rule_left() {
        let segs = [seg(100, 0), seg(100, 5000), seg(100, 5000), seg(10, 5000)];
        let p = plan(&segs, 5000, 1000, 110); // 210 left after time -> 110
        assert_eq!(
            p,
            RetentionPlan {
                by_time: 1,
                by_size: 1
            }
        );
        assert_eq!(p.total(), 2);
    }

    /// The model: delete from the front one segment at a time while a rule says so.
    fn model(segs: &[SegmentStat], now: i64, ms: i64, bytes: i64) -> usize {
        let mut n = 0;
        while n + 1 < segs.len() && ms >= 0 && now - segs[n].largest_timestamp > ms {
            n += 1;
        }
        loop {
            let total: i64 = segs[n..].iter().map(|s| s.size as i64).sum();
            if bytes >= 0 && n + 1 < segs.len() && total - segs[n].size as i64 >= bytes {
                n += 1;
            } else {
                return n;
            }
        }
    }

    proptest! {
        #[test]
        fn plan_matches_the_model(
            segs in proptest::collection::vec((0u64..500, 0i64..1000), 1..12),
            now in 0i64..2000,
            ms in -1i64..1000,
            bytes in -1i64..3000,
        ) {
            let segs: Vec<_> = segs.into_iter().map(|(s, t)| seg(s, t)).collect();
            prop_assert_eq!(plan(&segs, now, ms, bytes).total(), model(&segs, now, ms, bytes));
        }
    }
}
