//! The broker side of a clean stop (Kafka's `BrokerLifecycleManager` PENDING_CONTROLLED_SHUTDOWN
//! state and `BrokerServer.shutdown`'s wait for it), as pure decisions: what the next heartbeat
//! asks, when it goes, and when the stop stops waiting. Time arrives as arguments (durations
//! since the stop began); no clock, no I/O. The drivers are `controller::remote` (heartbeats
//! over the wire) and `controller::local` (in-process calls on the lone voter).
//!
//! Kafka's sequence: `beginControlledShutdown` sends the next heartbeat at once with
//! WantShutDown=true; the first answer without ShouldShutDown schedules the next one after
//! 50 ms, later ones after `broker.heartbeat.interval.ms`; ShouldShutDown=true ends it. The broker
//! waits for that (the controlled shutdown future) before it stops its socket server, so it keeps
//! serving clients and followers while its leaderships move.
//!
//! Where Sluice differs: Kafka waits up to the whole shutdown's deadline (5 minutes, no key);
//! Sluice waits at most `broker.session.timeout.ms` (by then the controller has fenced a silent
//! broker and moved its leaderships anyway), and gives up sooner when its own quorum member has
//! known no leader for `controller.quorum.election.timeout.ms` (the quorum lost its majority),
//! at once when no other broker is active either (every node stopping together: nothing could
//! take a leadership): a stop never hangs on a missing controller.

use std::time::Duration;

/// Kafka's delay before the second heartbeat of a controlled shutdown.
pub const FIRST_PENDING_RETRY: Duration = Duration::from_millis(50);

/// The heartbeat schedule while a controlled shutdown is pending. `Copy`, owned by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingShutdown {
    /// `broker.heartbeat.interval.ms`.
    interval: Duration,
    /// The delay after the first answer without ShouldShutDown ([`FIRST_PENDING_RETRY`] over
    /// the wire; zero on the lone voter, whose controller answers in process).
    first_retry: Duration,
    answered: bool,
}

/// What to do after a heartbeat answer of a pending controlled shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAnswer {
    /// The controller said ShouldShutDown: stop heartbeating, go on with the shutdown.
    ShutDown,
    /// Heartbeat again (WantShutDown=true) after this delay.
    HeartbeatIn(Duration),
}

impl PendingShutdown {
    pub fn new(interval: Duration, first_retry: Duration) -> PendingShutdown {
        PendingShutdown {
            interval,
            first_retry,
            answered: false,
        }
    }

    /// The delay before the first WantShutDown heartbeat: none (Kafka's
    /// `scheduleNextCommunicationImmediately`).
    pub fn first_heartbeat(&self) -> Duration {
        Duration::ZERO
    }

    /// The controller answered (no error) with `should_shut_down`.
    pub fn on_answer(&mut self, should_shut_down: bool) -> AfterAnswer {
        if should_shut_down {
            return AfterAnswer::ShutDown;
        }
        let delay = if self.answered {
            self.interval
        } else {
            self.first_retry
        };
        self.answered = true;
        AfterAnswer::HeartbeatIn(delay)
    }

    /// The heartbeat failed (no controller, an error code): the next one after the interval.
    pub fn on_failure(&self) -> Duration {
        self.interval
    }
}

/// How long a clean stop waits for the controller. `Copy`; pure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownBound {
    /// `broker.session.timeout.ms`: the wait as a whole.
    pub limit: Duration,
    /// `controller.quorum.election.timeout.ms`: how long this node's quorum member may know no
    /// leader before the wait is abandoned. `None` for the lone voter (it is the leader).
    pub leaderless_limit: Option<Duration>,
}

/// Why a clean stop went on without the controller's ShouldShutDown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// The whole wait took `limit`.
    TimedOut(Duration),
    /// The quorum had no leader for this long.
    NoQuorumLeader(Duration),
    /// The quorum has no leader and no other broker is active: nothing could move.
    NothingToMove,
    /// So many other voters are known gone that no quorum can form: nothing could move.
    QuorumLost,
}

impl std::fmt::Display for GiveUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GiveUp::TimedOut(d) => write!(
                f,
                "the controller did not approve the controlled shutdown within {} ms \
                 (broker.session.timeout.ms)",
                d.as_millis()
            ),
            GiveUp::NoQuorumLeader(d) => write!(
                f,
                "the metadata quorum has had no leader for {} ms \
                 (controller.quorum.election.timeout.ms)",
                d.as_millis()
            ),
            GiveUp::QuorumLost => write!(
                f,
                "a majority of the controller quorum's voters is gone (their connections closed \
                 or were refused)"
            ),
            GiveUp::NothingToMove => write!(
                f,
                "the metadata quorum has no leader and no other broker is active \
                 (every node is stopping)"
            ),
        }
    }
}

/// The verdict of [`ShutdownBound::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Keep waiting; check again at the latest after this.
    Until(Duration),
    GiveUp(GiveUp),
}

/// What the stopping node sees besides the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Since when (measured from the start of the stop) this node's quorum member has known no
    /// leader; `None` while it knows one.
    pub leaderless_since: Option<Duration>,
    /// Whether another broker is active (unfenced, not shutting down) in this node's metadata:
    /// one that could take over a leadership.
    pub others_active: bool,
    /// Whether this node's quorum member knows a majority of the voters gone
    /// (`QuorumStatus::majority_unreachable`).
    pub quorum_lost: bool,
}

/// How often a stopping node re-reads its quorum member's view of the other voters while it
/// waits (the view has no watch; a status read is one message to the member's task).
pub const QUORUM_CHECK_INTERVAL: Duration = Duration::from_millis(20);

impl ShutdownBound {
    /// At `elapsed` since the stop began. Without a quorum leader and without another active
    /// broker nothing can move (every other node is stopping too): the wait ends at once.
    pub fn check(&self, elapsed: Duration, seen: Seen) -> Wait {
        if elapsed >= self.limit {
            return Wait::GiveUp(GiveUp::TimedOut(self.limit));
        }
        if seen.quorum_lost {
            return Wait::GiveUp(GiveUp::QuorumLost);
        }
        let mut next = self.limit - elapsed;
        if let (Some(limit), Some(since)) = (self.leaderless_limit, seen.leaderless_since) {
            let leaderless = elapsed.saturating_sub(since);
            if !seen.others_active {
                return Wait::GiveUp(GiveUp::NothingToMove);
            }
            if leaderless >= limit {
                return Wait::GiveUp(GiveUp::NoQuorumLeader(leaderless));
            }
            next = next.min(limit - leaderless);
        }
        Wait::Until(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn led() -> Seen {
        Seen {
            leaderless_since: None,
            others_active: true,
            quorum_lost: false,
        }
    }

    fn leaderless(since: Duration) -> Seen {
        Seen {
            leaderless_since: Some(since),
            others_active: true,
            quorum_lost: false,
        }
    }

    #[test]
    fn heartbeats_at_once_then_after_50_ms_then_at_the_interval() {
        let mut p = PendingShutdown::new(MS(500), FIRST_PENDING_RETRY);
        assert_eq!(p.first_heartbeat(), Duration::ZERO);
        assert_eq!(p.on_answer(false), AfterAnswer::HeartbeatIn(MS(50)));
        assert_eq!(p.on_answer(false), AfterAnswer::HeartbeatIn(MS(500)));
        assert_eq!(p.on_answer(false), AfterAnswer::HeartbeatIn(MS(500)));
        assert_eq!(p.on_failure(), MS(500));
        assert_eq!(p.on_answer(true), AfterAnswer::ShutDown);
    }

    #[test]
    fn the_lone_voter_asks_again_at_once() {
        let mut p = PendingShutdown::new(MS(2000), Duration::ZERO);
        assert_eq!(p.on_answer(false), AfterAnswer::HeartbeatIn(Duration::ZERO));
        assert_eq!(p.on_answer(false), AfterAnswer::HeartbeatIn(MS(2000)));
    }

    #[test]
    fn the_wait_ends_at_the_session_timeout() {
        let b = ShutdownBound {
            limit: MS(3000),
            leaderless_limit: Some(MS(1000)),
        };
        assert_eq!(b.check(MS(0), led()), Wait::Until(MS(3000)));
        assert_eq!(b.check(MS(2900), led()), Wait::Until(MS(100)));
        assert_eq!(
            b.check(MS(3000), led()),
            Wait::GiveUp(GiveUp::TimedOut(MS(3000)))
        );
    }

    #[test]
    fn a_leaderless_quorum_ends_the_wait_after_the_election_timeout() {
        let b = ShutdownBound {
            limit: MS(9000),
            leaderless_limit: Some(MS(1000)),
        };
        assert_eq!(b.check(MS(700), leaderless(MS(500))), Wait::Until(MS(800)));
        assert_eq!(
            b.check(MS(1600), leaderless(MS(500))),
            Wait::GiveUp(GiveUp::NoQuorumLeader(MS(1100)))
        );
        // A leader known again: only the overall limit counts.
        assert_eq!(b.check(MS(1600), led()), Wait::Until(MS(7400)));
        // Every other broker stopping too: nothing can move, the wait ends with the leader.
        let alone = Seen {
            leaderless_since: Some(MS(500)),
            others_active: false,
            quorum_lost: false,
        };
        assert_eq!(b.check(MS(600), alone), Wait::GiveUp(GiveUp::NothingToMove));
        let alone_led = Seen {
            leaderless_since: None,
            others_active: false,
            quorum_lost: false,
        };
        assert_eq!(b.check(MS(600), alone_led), Wait::Until(MS(8400)));
        // The other voters gone (their connections closed): no quorum can form, the wait ends at
        // once, while this node still believes in a leader and others look active.
        let lost = Seen {
            quorum_lost: true,
            ..led()
        };
        assert_eq!(b.check(MS(10), lost), Wait::GiveUp(GiveUp::QuorumLost));
        let lone = ShutdownBound {
            limit: MS(9000),
            leaderless_limit: None,
        };
        assert_eq!(
            lone.check(MS(5000), leaderless(MS(0))),
            Wait::Until(MS(4000))
        );
    }

    #[test]
    fn the_give_up_line_names_the_key() {
        let line = GiveUp::TimedOut(MS(9000)).to_string();
        assert!(line.contains("9000 ms") && line.contains("broker.session.timeout.ms"));
        let line = GiveUp::NoQuorumLeader(MS(1200)).to_string();
        assert!(line.contains("controller.quorum.election.timeout.ms"));
    }
}
