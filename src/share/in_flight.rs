//! In-flight records of one share-partition (Kafka's `InFlightBatch` / `InFlightState`).
//!
//! A batch covers a contiguous offset range and keeps one state for the whole range.
//! `SharePartition` cuts a batch at the edges of a range that needs another state
//! (`split_off`), so memory follows the number of distinct ranges, never the offset count of a
//! batch; a per-offset form (`split`) remains for `update_range` on a strict part of a batch.
//! Invariant: a state's `member_id` and `lock_deadline_ms` are `Some` exactly when it is
//! Acquired. Pure: no I/O.

use super::partition::RecordState;
use super::persist::PersisterStateBatch;

/// The delivery state of one record or of a whole unsplit batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InFlightState {
    pub state: RecordState,
    /// How many times the record has been acquired (delivered).
    pub delivery_count: i16,
    /// The member holding the acquisition lock.
    pub member_id: Option<String>,
    /// When the acquisition lock expires (ms, the caller's clock).
    pub lock_deadline_ms: Option<i64>,
}

impl InFlightState {
    pub fn available(delivery_count: i16) -> Self {
        InFlightState {
            state: RecordState::Available,
            delivery_count,
            member_id: None,
            lock_deadline_ms: None,
        }
    }

    pub fn acquired(member_id: &str, delivery_count: i16, lock_deadline_ms: i64) -> Self {
        InFlightState {
            state: RecordState::Acquired,
            delivery_count,
            member_id: Some(member_id.to_string()),
            lock_deadline_ms: Some(lock_deadline_ms),
        }
    }

    /// Available -> Acquired; one more delivery.
    pub fn acquire(&mut self, member_id: &str, lock_deadline_ms: i64) {
        *self = InFlightState::acquired(
            member_id,
            self.delivery_count.saturating_add(1),
            lock_deadline_ms,
        );
    }

    /// Acquired -> Available, or Archived once the delivery count reached the limit.
    pub fn release(&mut self, delivery_count_limit: i16) {
        let state = if self.delivery_count >= delivery_count_limit {
            RecordState::Archived
        } else {
            RecordState::Available
        };
        self.finish(state);
    }

    /// Acquired -> `state` (Available, Acknowledged or Archived), dropping the lock.
    pub fn finish(&mut self, state: RecordState) {
        self.state = state;
        self.member_id = None;
        self.lock_deadline_ms = None;
    }

    /// Acquired stays Acquired by the same member with the same delivery count; the lock now
    /// ends at `lock_deadline_ms` (KIP-1222 RENEW).
    pub fn renew(&mut self, lock_deadline_ms: i64) {
        if self.state == RecordState::Acquired {
            self.lock_deadline_ms = Some(lock_deadline_ms);
        }
    }

    pub fn is_acquired_by(&self, member_id: &str) -> bool {
        self.state == RecordState::Acquired && self.member_id.as_deref() == Some(member_id)
    }

    pub fn lock_expired(&self, now_ms: i64) -> bool {
        self.state == RecordState::Acquired && self.lock_deadline_ms.is_some_and(|d| d <= now_ms)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Offsets {
    /// One state for every offset of the batch.
    Whole(InFlightState),
    /// One state per offset, index = offset - first_offset.
    PerOffset(Vec<InFlightState>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InFlightBatch {
    pub first_offset: i64,
    /// Inclusive.
    pub last_offset: i64,
    pub offsets: Offsets,
}

impl InFlightBatch {
    pub fn new(first_offset: i64, last_offset: i64, state: InFlightState) -> Self {
        InFlightBatch {
            first_offset,
            last_offset,
            offsets: Offsets::Whole(state),
        }
    }

    pub fn len(&self) -> u64 {
        (self.last_offset - self.first_offset + 1) as u64
    }

    pub fn state_at(&self, offset: i64) -> &InFlightState {
        match &self.offsets {
            Offsets::Whole(s) => s,
            Offsets::PerOffset(v) => &v[(offset - self.first_offset) as usize],
        }
    }

    /// Whether `[first, last]` (clamped to this batch) is the whole batch.
    pub fn covers_all(&self, first: i64, last: i64) -> bool {
        first <= self.first_offset && last >= self.last_offset
    }

    /// Gives every offset its own state (Kafka's "offset-based tracking").
    pub fn split(&mut self) {
        if let Offsets::Whole(s) = &self.offsets {
            self.offsets = Offsets::PerOffset(vec![s.clone(); self.len() as usize]);
        }
    }

    /// Whether `pred` holds for every offset of `[first, last]` (clamped to this batch).
    pub fn all_in(&self, first: i64, last: i64, pred: impl Fn(&InFlightState) -> bool) -> bool {
        let (a, z) = self.clamp(first, last);
        if a > z {
            return true;
        }
        match &self.offsets {
            Offsets::Whole(s) => pred(s),
            Offsets::PerOffset(v) => v
                [(a - self.first_offset) as usize..=(z - self.first_offset) as usize]
                .iter()
                .all(pred),
        }
    }

    /// Applies `f` to the states of `[first, last]` (clamped), splitting the batch only when
    /// the range is a strict part of it.
    pub fn update_range(&mut self, first: i64, last: i64, mut f: impl FnMut(&mut InFlightState)) {
        let (a, z) = self.clamp(first, last);
        if a > z {
            return;
        }
        if !self.covers_all(a, z) {
            self.split();
        }
        let base = self.first_offset;
        match &mut self.offsets {
            Offsets::Whole(s) => f(s),
            Offsets::PerOffset(v) => v[(a - base) as usize..=(z - base) as usize]
                .iter_mut()
                .for_each(f),
        }
    }

    /// The number of leading offsets in a terminal state (Acknowledged or Archived).
    pub fn leading_terminal(&self) -> u64 {
        match &self.offsets {
            Offsets::Whole(s) if s.state.is_terminal() => self.len(),
            Offsets::Whole(_) => 0,
            Offsets::PerOffset(v) => v.iter().take_while(|s| s.state.is_terminal()).count() as u64,
        }
    }

    /// Cuts the batch before `at` (first < at <= last): `self` keeps `[first, at - 1]`, the
    /// returned batch holds `[at, last]` with the same states.
    pub fn split_off(&mut self, at: i64) -> InFlightBatch {
        let right_offsets = match &mut self.offsets {
            Offsets::Whole(s) => Offsets::Whole(s.clone()),
            Offsets::PerOffset(v) => {
                Offsets::PerOffset(v.split_off((at - self.first_offset) as usize))
            }
        };
        let right = InFlightBatch {
            first_offset: at,
            last_offset: self.last_offset,
            offsets: right_offsets,
        };
        self.last_offset = at - 1;
        right
    }

    pub fn is_split(&self) -> bool {
        matches!(self.offsets, Offsets::PerOffset(_))
    }

    /// Drops the first `n` offsets (`n` < `len()`, batch split or `n` = 0).
    pub fn trim_front(&mut self, n: u64) {
        if let Offsets::PerOffset(v) = &mut self.offsets {
            v.drain(..n as usize);
            self.first_offset += n as i64;
        }
    }

    /// The states of `[first, last]` (clamped) as coalesced persister batches; an Acquired
    /// record is written as Available with its delivery count (what a restart would see).
    pub fn persister_batches(&self, first: i64, last: i64, out: &mut Vec<PersisterStateBatch>) {
        let (a, z) = self.clamp(first, last);
        if a > z {
            return;
        }
        for offset in a..=z {
            let s = self.state_at(offset);
            let state = match s.state {
                RecordState::Acquired => RecordState::Available,
                other => other,
            };
            match out.last_mut() {
                Some(prev)
                    if prev.last_offset + 1 == offset
                        && prev.delivery_state == state.id()
                        && prev.delivery_count == s.delivery_count =>
                {
                    prev.last_offset = offset;
                }
                _ => out.push(PersisterStateBatch::new(
                    offset,
                    offset,
                    state,
                    s.delivery_count,
                )),
            }
            if let Offsets::Whole(_) = self.offsets {
                // One state for the range: extend to its end at once.
                if let Some(prev) = out.last_mut() {
                    prev.last_offset = z;
                }
                break;
            }
        }
    }

    fn clamp(&self, first: i64, last: i64) -> (i64, i64) {
        (first.max(self.first_offset), last.min(self.last_offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_outside_the_batch_touch_nothing() {
        let mut b = InFlightBatch::new(10, 14, InFlightState::available(0));
        let before = b.clone();
        assert!(b.all_in(0, 5, |s| s.state == RecordState::Acquired));
        b.update_range(20, 30, |s| s.acquire("m", 1));
        assert_eq!(b, before);
        let mut out = Vec::new();
        b.persister_batches(0, 9, &mut out);
        assert!(out.is_empty());
        // A strict part splits per offset; cutting keeps both halves whole.
        let mut right = b.split_off(12);
        assert_eq!(
            (
                b.first_offset,
                b.last_offset,
                right.first_offset,
                right.last_offset
            ),
            (10, 11, 12, 14)
        );
        right.update_range(13, 13, |s| s.acquire("m", 1));
        assert!(right.is_split());
        assert_eq!(right.state_at(13).member_id.as_deref(), Some("m"));
        assert_eq!(right.state_at(14).state, RecordState::Available);
        assert!(!b.is_split());
    }
}
