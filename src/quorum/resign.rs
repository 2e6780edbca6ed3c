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

use super::node::{LeaderAndEpoch, NodeId, TICKS_PER_ELECTION_TIMEOUT};

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
    /// Transfer started to this voter, by the leader of this epoch.
    Transferring { to: NodeId, epoch: u64 },
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
    /// No other leader in time: the stop goes on anyway.
    GaveUp {
        to: NodeId,
        why: GaveUp,
    },
}

/// Why the resigning leader stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaveUp {
    /// The transferee did not campaign (no higher epoch) within this time: it is gone.
    NoCampaign(Duration),
    /// No new leader within the whole bound.
    NoLeader(Duration),
}

/// How long a resigning leader waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// For the transferee's campaign to show (a higher epoch in the leader's watch).
    pub campaign_within: Duration,
    /// For a new leader.
    pub limit: Duration,
}

impl Bound {
    /// One election timeout for a new leader (raft-rs abandons a transfer after that too),
    /// three heartbeats (raft ticks) for the campaign: a caught-up transferee campaigns when
    /// MsgTimeoutNow arrives, a lagging one after an append round trip or two.
    pub fn for_election_timeout(election_timeout: Duration) -> Bound {
        Bound {
            campaign_within: election_timeout * 3 / TICKS_PER_ELECTION_TIMEOUT as u32,
            limit: election_timeout,
        }
    }
}

/// What the resigning leader does next, from its leader watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Another voter leads: stop now.
    Done { leader: NodeId },
    /// Wait for the next leader change, at most this long.
    Until(Duration),
    /// Stop waiting: no other leader in time.
    GiveUp(GaveUp),
}

/// The wait of voter `me` after it started a transfer at `epoch`, `elapsed` ago, seeing `view`.
pub fn check(
    me: NodeId,
    epoch: u64,
    view: LeaderAndEpoch,
    elapsed: Duration,
    bound: Bound,
) -> Wait {
    if let Some(l) = view.leader_id.filter(|&l| l != me) {
        return Wait::Done { leader: l };
    }
    if elapsed >= bound.limit {
        return Wait::GiveUp(GaveUp::NoLeader(bound.limit));
    }
    let mut next = bound.limit - elapsed;
    if view.epoch <= epoch {
        if elapsed >= bound.campaign_within {
            return Wait::GiveUp(GaveUp::NoCampaign(bound.campaign_within));
        }
        next = next.min(bound.campaign_within - elapsed);
    }
    Wait::Until(next)
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
    fn the_wait_ends_at_another_leader_at_a_missing_campaign_or_at_the_bound() {
        let ms = Duration::from_millis;
        let bound = Bound::for_election_timeout(ms(1000));
        assert_eq!(
            bound,
            Bound {
                campaign_within: ms(300),
                limit: ms(1000)
            }
        );
        let view = |l: Option<NodeId>, epoch: u64| LeaderAndEpoch {
            leader_id: l,
            epoch,
        };
        // Still leading at epoch 7: wait for the campaign, at most its bound.
        assert_eq!(
            check(1, 7, view(Some(1), 7), ms(0), bound),
            Wait::Until(ms(300))
        );
        assert_eq!(
            check(1, 7, view(Some(1), 7), ms(300), bound),
            Wait::GiveUp(GaveUp::NoCampaign(ms(300)))
        );
        // The transferee campaigns (epoch 8, no leader yet): wait for the whole bound.
        assert_eq!(
            check(1, 7, view(None, 8), ms(300), bound),
            Wait::Until(ms(700))
        );
        assert_eq!(
            check(1, 7, view(None, 8), ms(1000), bound),
            Wait::GiveUp(GaveUp::NoLeader(ms(1000)))
        );
        // Another leader ends it, even at the bound.
        assert_eq!(
            check(1, 7, view(Some(3), 8), ms(20), bound),
            Wait::Done { leader: 3 }
        );
        assert_eq!(
            check(1, 7, view(Some(2), 8), ms(1000), bound),
            Wait::Done { leader: 2 }
        );
    }
}
