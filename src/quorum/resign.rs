//! The quorum leader's resignation at a clean stop, as pure decisions: which voter takes over,
//! and how long the stopping leader waits for it. Kafka's leader sends EndQuorumEpoch so a
//! follower starts its election without waiting for its election timeout; raft-rs's counterpart
//! is leadership transfer (`RawNode::transfer_leader`: the leader catches the transferee up if
//! needed, then sends it MsgTimeoutNow, and the transferee campaigns at once, past pre-vote and
//! the other voters' leader lease). Performs no I/O; time arrives as arguments.
//!
//! The effects live elsewhere: `QuorumNode::resign` starts the transfer, `QuorumHandle::resign`
//! waits on the leader watch, the clean stop (`server::RunningBroker::shutdown`) calls it after
//! the controlled shutdown (which still needs this voter) and before the quorum task stops.

use std::time::Duration;

use super::node::{LeaderAndEpoch, NodeId};

/// What the leader knows of another voter when it resigns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub id: NodeId,
    /// Raft's matched index (the last entry known to be in the voter's log).
    pub matched: u64,
    /// When the voter last answered this leader (leader's clock, ms).
    pub last_contact_ms: Option<u64>,
    /// When the transport last failed to reach it (leader's clock, ms).
    pub unreachable_ms: Option<u64>,
}

/// The voter to hand leadership to: among the voters that answered within `recent_ms` of
/// `now_ms` and were not reported unreachable since, the one with the highest matched index
/// (the most caught up, so the transfer needs no catch-up), then the most recently heard, then
/// the lowest id. `None` when no voter qualifies (the leader stops without handing over).
pub fn choose_transferee(peers: &[Peer], now_ms: u64, recent_ms: u64) -> Option<NodeId> {
    peers
        .iter()
        .filter_map(|p| {
            let contact = p.last_contact_ms?;
            let recent = now_ms.saturating_sub(contact) <= recent_ms;
            let lost = p.unreachable_ms.is_some_and(|u| u >= contact);
            (recent && !lost).then_some((p.matched, contact, std::cmp::Reverse(p.id)))
        })
        .max()
        .map(|(_, _, std::cmp::Reverse(id))| id)
}

/// What `QuorumNode::resign` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resign {
    /// This voter does not lead: nothing to hand over.
    NotLeader,
    /// The only voter: nobody to hand over to.
    Alone,
    /// No other voter answered recently: the leader stops without handing over.
    NoTransferee,
    /// Transfer started to this voter.
    Transferring { to: NodeId },
}

/// How a resignation ended (`QuorumHandle::resign`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resignation {
    NotLeader,
    Alone,
    NoTransferee,
    /// The quorum task has stopped.
    Stopped,
    /// `leader` leads now (usually `to`), after `took`.
    Handed {
        to: NodeId,
        leader: NodeId,
        took: Duration,
    },
    /// No other leader within the bound: the stop goes on anyway.
    TimedOut {
        to: NodeId,
        limit: Duration,
    },
}

/// What the resigning leader does next, from its leader watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Another voter leads: stop now.
    Done { leader: NodeId },
    /// Wait for the next leader change, at most this long.
    Until(Duration),
    /// The bound passed with no other leader.
    GiveUp,
}

/// The wait of voter `me` after it started a transfer, `elapsed` ago, bounded by `limit`
/// (one election timeout: raft-rs abandons a transfer after that too).
pub fn check(me: NodeId, view: LeaderAndEpoch, elapsed: Duration, limit: Duration) -> Wait {
    match view.leader_id {
        Some(l) if l != me => Wait::Done { leader: l },
        _ if elapsed >= limit => Wait::GiveUp,
        _ => Wait::Until(limit - elapsed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(id: NodeId, matched: u64, contact: Option<u64>) -> Peer {
        Peer {
            id,
            matched,
            last_contact_ms: contact,
            unreachable_ms: None,
        }
    }

    #[test]
    fn the_most_caught_up_recent_voter_is_chosen() {
        let peers = [peer(2, 40, Some(990)), peer(3, 42, Some(950))];
        assert_eq!(choose_transferee(&peers, 1000, 1000), Some(3));
        let peers = [peer(2, 42, Some(990)), peer(3, 40, Some(999))];
        assert_eq!(choose_transferee(&peers, 1000, 1000), Some(2));
    }

    #[test]
    fn ties_go_to_the_most_recently_heard_then_the_lowest_id() {
        let peers = [peer(2, 42, Some(900)), peer(3, 42, Some(990))];
        assert_eq!(choose_transferee(&peers, 1000, 1000), Some(3));
        let peers = [peer(3, 42, Some(990)), peer(2, 42, Some(990))];
        assert_eq!(choose_transferee(&peers, 1000, 1000), Some(2));
    }

    #[test]
    fn silent_or_unreachable_voters_are_not_chosen() {
        // Never heard, or last heard longer ago than the window.
        let peers = [peer(2, 42, None), peer(3, 42, Some(100))];
        assert_eq!(choose_transferee(&peers, 2000, 1000), None);
        assert_eq!(choose_transferee(&peers, 1100, 1000), Some(3));
        // Reported unreachable after its last answer: lost, even if more caught up.
        let lost = Peer {
            unreachable_ms: Some(995),
            ..peer(2, 50, Some(990))
        };
        assert_eq!(
            choose_transferee(&[lost, peer(3, 42, Some(980))], 1000, 1000),
            Some(3)
        );
        // Unreachable once, answered since: back.
        let back = Peer {
            unreachable_ms: Some(500),
            ..peer(2, 50, Some(990))
        };
        assert_eq!(
            choose_transferee(&[back, peer(3, 42, Some(980))], 1000, 1000),
            Some(2)
        );
        assert_eq!(choose_transferee(&[], 1000, 1000), None);
    }

    #[test]
    fn the_wait_ends_at_another_leader_or_at_the_bound() {
        let ms = Duration::from_millis;
        let led_by = |l: Option<NodeId>| LeaderAndEpoch {
            leader_id: l,
            epoch: 7,
        };
        assert_eq!(
            check(1, led_by(Some(1)), ms(0), ms(1000)),
            Wait::Until(ms(1000))
        );
        assert_eq!(
            check(1, led_by(None), ms(300), ms(1000)),
            Wait::Until(ms(700))
        );
        assert_eq!(
            check(1, led_by(Some(3)), ms(20), ms(1000)),
            Wait::Done { leader: 3 }
        );
        // Another leader counts even at the bound; none at the bound gives up.
        assert_eq!(
            check(1, led_by(Some(2)), ms(1000), ms(1000)),
            Wait::Done { leader: 2 }
        );
        assert_eq!(check(1, led_by(None), ms(1000), ms(1000)), Wait::GiveUp);
        assert_eq!(check(1, led_by(Some(1)), ms(1500), ms(1000)), Wait::GiveUp);
    }
}
