//! Share sessions (KIP-932): the set of share-partitions a member fetches from, kept per
//! (group id, member id) between ShareFetch requests, and the session epoch that orders them
//! (Kafka's `ShareSessionCache` / `ShareFetchContext`).
//!
//! Epochs: 0 opens a session (replacing an existing one, whose acquired records are released),
//! N > 0 continues it (it must exist: SHARE_SESSION_NOT_FOUND; N must be the expected epoch:
//! INVALID_SHARE_SESSION_EPOCH) and adds/forgets partitions, -1 closes it (its acquired records
//! are released). The expected epoch after N is N + 1, wrapping from `i32::MAX` to 1.
//!
//! Invariants: pure (no I/O, no clock); at most `max_sessions` sessions exist (a new one past
//! the limit is SHARE_SESSION_LIMIT_REACHED); a refused request changes nothing.

use std::collections::{BTreeSet, HashMap};

use uuid::Uuid;

pub const SHARE_SESSION_NOT_FOUND: i16 = 122;
pub const INVALID_SHARE_SESSION_EPOCH: i16 = 123;
pub const SHARE_SESSION_LIMIT_REACHED: i16 = 133;

/// The epoch that closes a session.
pub const FINAL_EPOCH: i32 = -1;
/// The epoch that opens a session.
pub const INITIAL_EPOCH: i32 = 0;

/// A share-partition by topic id and partition index.
pub type TopicIdPartition = (Uuid, i32);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Session {
    next_epoch: i32,
    partitions: BTreeSet<TopicIdPartition>,
}

/// What a ShareFetch does to its session.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchContext {
    /// The partitions to fetch from (the whole session; empty when the session closed).
    pub fetch: Vec<TopicIdPartition>,
    /// Partitions where the member's acquired records are released (a replaced or closed
    /// session's).
    pub release: Vec<TopicIdPartition>,
}

/// Every share session of this broker. Owned by the share registry; not thread-safe.
#[derive(Debug, Clone, Default)]
pub struct ShareSessions {
    sessions: HashMap<(String, String), Session>,
    max_sessions: usize,
}

fn next(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareSessions {
    /// `max_sessions`: `group.share.max.share.sessions` (Kafka's default 2000).
    pub fn new(max_sessions: usize) -> Self {
        ShareSessions {
            sessions: HashMap::new(),
            max_sessions: max_sessions.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The partitions of `member`'s session in `group` (none without a session).
    pub fn partitions_of(&self, group: &str, member: &str) -> Vec<TopicIdPartition> {
        self.sessions
            .get(&(group.to_string(), member.to_string()))
            .map_or_else(Vec::new, |s| s.partitions.iter().copied().collect())
    }

    /// The epoch the next request of this session must carry.
    pub fn expected_epoch(&self, group: &str, member: &str) -> Option<i32> {
        self.sessions
            .get(&(group.to_string(), member.to_string()))
            .map(|s| s.next_epoch)
    }

    /// A ShareFetch at `epoch` naming `added` partitions (those in the request) and `forgotten`
    /// ones. Err is a top-level error code.
    pub fn fetch(
        &mut self,
        group: &str,
        member: &str,
        epoch: i32,
        added: &[TopicIdPartition],
        forgotten: &[TopicIdPartition],
    ) -> Result<FetchContext, i16> {
        let key = (group.to_string(), member.to_string());
        match epoch {
            INITIAL_EPOCH => {
                let replaced = self.sessions.remove(&key);
                if replaced.is_none() && self.sessions.len() >= self.max_sessions {
                    return Err(SHARE_SESSION_LIMIT_REACHED);
                }
                let partitions: BTreeSet<TopicIdPartition> = added.iter().copied().collect();
                let fetch = partitions.iter().copied().collect();
                self.sessions.insert(
                    key,
                    Session {
                        next_epoch: 1,
                        partitions,
                    },
                );
                Ok(FetchContext {
                    fetch,
                    release: replaced
                        .map(|s| s.partitions.into_iter().collect())
                        .unwrap_or_default(),
                })
            }
            FINAL_EPOCH => {
                let s = self.sessions.remove(&key).ok_or(SHARE_SESSION_NOT_FOUND)?;
                Ok(FetchContext {
                    fetch: Vec::new(),
                    release: s.partitions.into_iter().collect(),
                })
            }
            e if e < FINAL_EPOCH => Err(INVALID_SHARE_SESSION_EPOCH),
            e => {
                let s = self.sessions.get_mut(&key).ok_or(SHARE_SESSION_NOT_FOUND)?;
                if s.next_epoch != e {
                    return Err(INVALID_SHARE_SESSION_EPOCH);
                }
                s.next_epoch = next(e);
                s.partitions.extend(added.iter().copied());
                for f in forgotten {
                    s.partitions.remove(f);
                }
                Ok(FetchContext {
                    fetch: s.partitions.iter().copied().collect(),
                    release: forgotten.to_vec(),
                })
            }
        }
    }

    /// Drops `member`'s session (the member left the group or its session timed out); returns
    /// its partitions, whose records the member held are to be released.
    pub fn remove(&mut self, group: &str, member: &str) -> Vec<TopicIdPartition> {
        self.sessions
            .remove(&(group.to_string(), member.to_string()))
            .map(|s| s.partitions.into_iter().collect())
            .unwrap_or_default()
    }

    /// Drops every session of `group` (the group was deleted).
    pub fn remove_group(&mut self, group: &str) {
        self.sessions.retain(|(g, _), _| g != group);
    }

    /// A ShareAcknowledge at `epoch`: 0 is INVALID_SHARE_SESSION_EPOCH (acknowledging needs a
    /// session), -1 closes the session (Ok with the partitions to release), N continues it.
    pub fn acknowledge(
        &mut self,
        group: &str,
        member: &str,
        epoch: i32,
    ) -> Result<Vec<TopicIdPartition>, i16> {
        let key = (group.to_string(), member.to_string());
        match epoch {
            FINAL_EPOCH => {
                let s = self.sessions.remove(&key).ok_or(SHARE_SESSION_NOT_FOUND)?;
                Ok(s.partitions.into_iter().collect())
            }
            e if e <= INITIAL_EPOCH => Err(INVALID_SHARE_SESSION_EPOCH),
            e => {
                let s = self.sessions.get_mut(&key).ok_or(SHARE_SESSION_NOT_FOUND)?;
                if s.next_epoch != e {
                    return Err(INVALID_SHARE_SESSION_EPOCH);
                }
                s.next_epoch = next(e);
                Ok(Vec::new())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicIdPartition {
        (Uuid::from_u128(7), p)
    }

    #[test]
    fn epochs_open_continue_and_close_a_session() {
        let mut s = ShareSessions::new(10);
        let c = s.fetch("g", "m", 0, &[tp(0)], &[]).unwrap();
        assert_eq!(c.fetch, vec![tp(0)]);
        assert!(c.release.is_empty());
        assert_eq!(s.expected_epoch("g", "m"), Some(1));
        // Incremental: the whole session is fetched, added partitions join it.
        let c = s.fetch("g", "m", 1, &[tp(1)], &[]).unwrap();
        assert_eq!(c.fetch, vec![tp(0), tp(1)]);
        assert_eq!(s.partitions_of("g", "m"), vec![tp(0), tp(1)]);
        assert!(s.partitions_of("g", "other").is_empty());
        let c = s.fetch("g", "m", 2, &[], &[tp(0)]).unwrap();
        assert_eq!(c.fetch, vec![tp(1)]);
        assert_eq!(c.release, vec![tp(0)]);
        assert_eq!(s.acknowledge("g", "m", 3), Ok(Vec::new()));
        assert_eq!(s.expected_epoch("g", "m"), Some(4));
        assert_eq!(s.acknowledge("g", "m", -1), Ok(vec![tp(1)]));
        assert!(s.is_empty());
    }

    #[test]
    fn wrong_epochs_and_missing_sessions_are_refused_without_change() {
        let mut s = ShareSessions::new(10);
        assert_eq!(
            s.fetch("g", "m", 1, &[tp(0)], &[]),
            Err(SHARE_SESSION_NOT_FOUND)
        );
        assert_eq!(
            s.fetch("g", "m", -1, &[], &[]),
            Err(SHARE_SESSION_NOT_FOUND)
        );
        assert_eq!(s.acknowledge("g", "m", 1), Err(SHARE_SESSION_NOT_FOUND));
        s.fetch("g", "m", 0, &[tp(0)], &[]).unwrap();
        assert_eq!(
            s.fetch("g", "m", 5, &[tp(1)], &[]),
            Err(INVALID_SHARE_SESSION_EPOCH)
        );
        assert_eq!(s.acknowledge("g", "m", 0), Err(INVALID_SHARE_SESSION_EPOCH));
        assert_eq!(
            s.fetch("g", "m", -2, &[], &[]),
            Err(INVALID_SHARE_SESSION_EPOCH)
        );
        assert_eq!(s.expected_epoch("g", "m"), Some(1));
        assert_eq!(s.fetch("g", "m", 1, &[], &[]).unwrap().fetch, vec![tp(0)]);
    }

    #[test]
    fn reopening_releases_the_old_session_and_the_limit_holds() {
        let mut s = ShareSessions::new(1);
        s.fetch("g", "a", 0, &[tp(0)], &[]).unwrap();
        let c = s.fetch("g", "a", 0, &[tp(1)], &[]).unwrap();
        assert_eq!(c.release, vec![tp(0)]);
        assert_eq!(c.fetch, vec![tp(1)]);
        assert_eq!(
            s.fetch("g", "b", 0, &[tp(0)], &[]),
            Err(SHARE_SESSION_LIMIT_REACHED)
        );
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn removed_sessions_free_their_slot() {
        let mut s = ShareSessions::new(1);
        s.fetch("g", "a", 0, &[tp(0)], &[]).unwrap();
        assert_eq!(s.remove("g", "a"), vec![tp(0)]);
        assert_eq!(s.remove("g", "a"), Vec::new());
        s.fetch("h", "b", 0, &[tp(1)], &[]).unwrap();
        s.remove_group("h");
        assert!(s.is_empty());
        assert!(s.fetch("g", "c", 0, &[tp(0)], &[]).is_ok());
    }

    #[test]
    fn the_epoch_wraps_to_one() {
        assert_eq!(next(i32::MAX), 1);
        assert_eq!(next(4), 5);
    }
}
