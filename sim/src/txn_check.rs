//! Invariants 17 and 18 (`Schedule::Fourth`), on what the read_committed consumer is delivered.
//! The consumer classifies each answer's batches as Kafka's consumer does, with the real
//! `share::read_committed::aborted_batches` over the answer's aborted transactions, drops the
//! aborted ones and the markers, and is delivered the rest.
//! - 17: it is never delivered a record of an aborted transaction (a transactional record it was
//!   delivered is later closed by an ABORT marker of its producer in the same partition: the
//!   partition's leader served it before its transaction was decided), and it is delivered the
//!   transactional records of each partition in increasing offsets, each once (the leader's side,
//!   no read past the last stable offset, is checked where the read is served, `replica::markers`).
//! - 18: no record of a transaction whose EndTxn(commit) was acknowledged is ever dropped as
//!   aborted, or closed by an ABORT marker; and at the end of the run (every fault healed 30 s
//!   before), in each of its partitions' leader's log, the first marker of its producer after its
//!   records is a COMMIT (`on_end`; transactions acknowledged in the last 10 s may still have
//!   their markers on the way).
//!
//! A reset of the consumer's position (OFFSET_OUT_OF_RANGE) starts the partition over. Exempt
//! (counted in `exempt`): a partition whose history an allowed loss rewrote (`repl_check`: an
//! unclean election, a leader that lost records by power loss): a lost COMMIT marker leaves its
//! transaction open, and the next ABORT closes it; a partition a coordinator's marker missed
//! because it resolved the topic's name in an image behind the topic's deletion and re-creation
//! (Kafka's markers name topics, not ids: found with seed 24247, whose coordinator wrote the
//! COMMIT marker into the deleted incarnation it still hosted); and a commit acknowledged before an allowed
//! loss of a `__transaction_state` partition, or acknowledged after one that came while it was
//! open (its PrepareCommit may be gone with it: the next coordinator finds the transaction
//! Ongoing and aborts it at its timeout; or the PrepareAbort of a timeout may be gone, and the
//! next coordinator finds an older PrepareCommit the previous one had undone: found with seed
//! 16935, where it then answered the client's EndTxn retry as committed).

use std::collections::{BTreeMap, BTreeSet};

use sluice::record::ControlType;
use sluice::share::read_committed::{aborted_batches, BatchInfo};

use crate::replica::{Rec, Tp};

#[derive(Default)]
struct PartitionSeen {
    last: Option<i64>,
    ids: BTreeSet<u64>,
    /// Per producer id: the transactional records delivered since its last marker.
    open: BTreeMap<i64, Vec<(i64, u64)>>,
}

#[derive(Default)]
pub struct TxnChecker {
    pub violations: Vec<String>,
    seen: BTreeMap<Tp, PartitionSeen>,
    /// Records of transactions whose commit was acknowledged, with the count of allowed losses
    /// of `__transaction_state` partitions when the transaction began.
    committed: BTreeMap<u64, u64>,
    /// Records the consumer dropped as aborted.
    dropped: BTreeSet<u64>,
    /// Findings on partitions an allowed loss rewrote.
    pub exempt: u64,
    /// Partitions a coordinator's markers missed, sent by name to another incarnation of their
    /// topic (`World::note_marker_route`): exempt as a rewritten one.
    pub misrouted: BTreeSet<Tp>,
    /// The transactions whose commit was acknowledged: when, their producer id, their records
    /// (partition, record id), the allowed losses of `__transaction_state` then.
    acked: Vec<AckedCommit>,
}

struct AckedCommit {
    at: u64,
    producer_id: i64,
    records: Vec<(Tp, u64)>,
    txn_losses: u64,
}

/// What `on_end` reads of a partition: its leader's log, and whether an allowed loss rewrote it.
pub struct LeaderLog<'a> {
    pub log: &'a [Rec],
    pub lossy: bool,
}

fn name(tp: Tp) -> String {
    format!("{}-{}", tp.0, tp.1)
}

impl TxnChecker {
    /// The records delivered (data of no aborted transaction, markers dropped) of an answer from
    /// `offset`, with the aborted transactions the leader listed; counts (delivered, dropped).
    /// `lossy`: an allowed loss rewrote the partition's history; `txn_losses`: the allowed losses
    /// of `__transaction_state` partitions so far.
    pub fn on_read_committed(
        &mut self,
        (tp, lossy, txn_losses): (Tp, bool, u64),
        offset: i64,
        records: &[Rec],
        aborted: &[(i64, i64)],
    ) -> (u64, u64) {
        // One `BatchInfo` per batch (a log holds whole batches; a read starts at a batch).
        let mut batches = Vec::new();
        let mut starts = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let o = offset + i as i64;
            if r.batch.index == 0 || batches.is_empty() {
                starts.push(i);
                batches.push(BatchInfo {
                    last_offset: o,
                    producer_id: r.batch.producer_id,
                    transactional: r.batch.transactional,
                    control: r.batch.control.map(|c| c.0),
                });
            } else if let Some(b) = batches.last_mut() {
                b.last_offset = o;
            }
        }
        let is_aborted = aborted_batches(&batches, aborted);
        let (mut delivered, mut dropped) = (0, 0);
        let mut found = Vec::new();
        let seen = self.seen.entry(tp).or_default();
        for (k, b) in batches.iter().enumerate() {
            let first = starts[k];
            let last = starts.get(k + 1).copied().unwrap_or(records.len());
            if let Some(control) = b.control {
                let closed = seen.open.remove(&b.producer_id).unwrap_or_default();
                if control == ControlType::Abort {
                    if let Some((o, id)) = closed.first() {
                        found.push(format!(
                            "invariant 17: the read_committed consumer was delivered record {id} of {} at offset {o}, whose transaction (producer {}) the marker at offset {} aborted",
                            name(tp), b.producer_id, offset + first as i64
                        ));
                    }
                    let acked = |id: &u64| self.committed.get(id) == Some(&txn_losses);
                    if let Some((o, id)) = closed.iter().find(|(_, id)| acked(id)) {
                        found.push(format!(
                            "invariant 18: record {id} of {} at offset {o} of a transaction acknowledged committed is closed by an ABORT marker",
                            name(tp)
                        ));
                    }
                }
                continue;
            }
            for (i, r) in records.iter().enumerate().take(last).skip(first) {
                let o = offset + i as i64;
                if is_aborted[k] {
                    dropped += 1;
                    if !lossy {
                        self.dropped.insert(r.id);
                    }
                    if self.committed.get(&r.id) == Some(&txn_losses) {
                        found.push(format!(
                            "invariant 18: record {} of {} at offset {o} of a transaction acknowledged committed was dropped as aborted",
                            r.id,
                            name(tp)
                        ));
                    }
                    continue;
                }
                delivered += 1;
                if !r.batch.transactional {
                    continue;
                }
                if seen.last.is_some_and(|l| o <= l) {
                    found.push(format!(
                        "invariant 17: the read_committed consumer was delivered {} offset {o} after offset {}",
                        name(tp),
                        seen.last.unwrap_or_default()
                    ));
                }
                seen.last = Some(o);
                if !seen.ids.insert(r.id) {
                    found.push(format!(
                        "invariant 17: the read_committed consumer was delivered record {} of {} twice",
                        r.id,
                        name(tp)
                    ));
                }
                seen.open
                    .entry(r.batch.producer_id)
                    .or_default()
                    .push((o, r.id));
            }
        }
        if lossy {
            self.exempt += found.len() as u64;
        } else {
            self.violations.extend(found);
        }
        (delivered, dropped)
    }

    /// The consumer's position of `tp` was reset: it starts over.
    pub fn on_reset(&mut self, tp: Tp) {
        self.seen.remove(&tp);
    }

    /// EndTxn(commit) was acknowledged at `at` for producer `producer_id`'s transaction of
    /// `records` (`txn_losses`: the allowed losses of `__transaction_state` partitions as above,
    /// when the transaction began and now).
    pub fn on_commit_acked(
        &mut self,
        (at, producer_id): (u64, i64),
        records: &[(Tp, u64)],
        (txn_losses, now_losses): (u64, u64),
    ) {
        self.acked.push(AckedCommit {
            at,
            producer_id,
            records: records.to_vec(),
            txn_losses,
        });
        for (_, id) in records {
            if self.dropped.contains(id) && txn_losses != now_losses {
                self.exempt += 1;
            } else if self.dropped.contains(id) {
                self.violations.push(format!(
                    "invariant 18: record {id} of a transaction acknowledged committed had been dropped as aborted"
                ));
            }
            self.committed.insert(*id, txn_losses);
        }
    }

    /// Invariant 18 at the end of the run (`end`, ms; `txn_losses` as above): each transaction
    /// acknowledged committed before the last 10 s is followed by a COMMIT of its producer in the
    /// leader's log of each of its partitions (`leader_log`: `None` when the partition is gone or
    /// has no leader).
    pub fn on_end<'a>(
        &mut self,
        end: u64,
        txn_losses: u64,
        leader_log: impl Fn(Tp) -> Option<LeaderLog<'a>>,
    ) {
        let mut found = Vec::new();
        for t in self.acked.iter().filter(|t| t.at + 10_000 <= end) {
            let mut tps: Vec<Tp> = t.records.iter().map(|(tp, _)| *tp).collect();
            tps.dedup();
            for tp in tps {
                let Some(l) = leader_log(tp) else {
                    continue;
                };
                let ids: BTreeSet<u64> = t
                    .records
                    .iter()
                    .filter(|(p, _)| *p == tp)
                    .map(|(_, id)| *id)
                    .collect();
                // Where its last record is (an allowed loss, or invariant 10, accounts for one
                // missing), then the first marker of its producer after it.
                let Some(last) = l.log.iter().rposition(|r| ids.contains(&r.id) && r.id != 0)
                else {
                    continue;
                };
                let marker = l.log[last..]
                    .iter()
                    .find(|r| r.batch.producer_id == t.producer_id && r.batch.control.is_some())
                    .and_then(|r| r.batch.control);
                if marker.is_some_and(|(c, _)| c == ControlType::Commit) {
                    continue;
                }
                let what = match marker {
                    Some(_) => "an ABORT marker",
                    None => "no marker",
                };
                let line = format!(
                    "invariant 18: a transaction of producer {} acknowledged committed at {} ms has {what} after its records at offset {last} of {} in the leader's log at the end",
                    t.producer_id,
                    t.at,
                    name(tp)
                );
                if l.lossy || t.txn_losses != txn_losses {
                    self.exempt += 1;
                } else {
                    found.push(line);
                }
            }
        }
        self.violations.extend(found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::BatchOf;
    use uuid::Uuid;

    fn data(id: u64, pid: i64) -> Rec {
        let mut batch = BatchOf::plain(1, 0);
        batch.producer_id = pid;
        batch.producer_epoch = 0;
        batch.base_sequence = id as i32;
        batch.transactional = true;
        Rec {
            epoch: 0,
            id,
            batch,
            kv: None,
        }
    }

    fn marker(pid: i64, control: ControlType) -> Rec {
        Rec {
            epoch: 0,
            id: 0,
            batch: BatchOf::marker(pid, 0, control, 0),
            kv: None,
        }
    }

    #[test]
    fn aborted_records_are_dropped_and_committed_ones_delivered() {
        let tp = (Uuid::from_u128(1), 0);
        let mut c = TxnChecker::default();
        c.on_commit_acked((0, 8), &[(tp, 2)], (0, 0));
        let log = [
            data(1, 7),
            data(2, 8),
            marker(7, ControlType::Abort),
            marker(8, ControlType::Commit),
        ];
        assert_eq!(
            c.on_read_committed((tp, false, 0), 0, &log, &[(7, 0)]),
            (1, 1)
        );
        assert!(c.violations.is_empty(), "{:?}", c.violations);
        // The same records served without the aborted list (a read past the LSO once the
        // transaction was open, then its ABORT marker): invariant 17.
        c.on_reset(tp);
        assert_eq!(
            c.on_read_committed((tp, false, 0), 0, &log[..2], &[]),
            (2, 0)
        );
        c.on_read_committed((tp, false, 0), 2, &log[2..], &[]);
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
        assert!(c.violations[0].contains("invariant 17"));
    }

    #[test]
    fn a_committed_transaction_dropped_as_aborted_breaks_invariant_18() {
        let tp = (Uuid::from_u128(1), 0);
        let mut c = TxnChecker::default();
        let aborted = [data(5, 3), marker(3, ControlType::Abort)];
        c.on_read_committed((tp, false, 0), 0, &aborted, &[(3, 0)]);
        assert!(c.violations.is_empty());
        c.on_commit_acked((0, 3), &[(tp, 5)], (0, 0));
        assert_eq!(c.violations.len(), 1);
        assert!(c.violations[0].contains("invariant 18"));
        // On a partition an allowed loss rewrote, the same finding is exempt.
        let mut c = TxnChecker::default();
        c.on_commit_acked((0, 3), &[(tp, 5)], (0, 0));
        c.on_read_committed((tp, true, 0), 0, &aborted, &[(3, 0)]);
        assert!(c.violations.is_empty());
        assert_eq!(c.exempt, 1);
        // A transaction acknowledged after an allowed loss of `__transaction_state` that came
        // while it was open (seed 16935): exempt when its records were dropped before the
        // acknowledgement, and when they are dropped after it.
        let mut c = TxnChecker::default();
        c.on_read_committed((tp, false, 1), 0, &aborted, &[(3, 0)]);
        c.on_commit_acked((0, 3), &[(tp, 5)], (0, 1));
        assert!(c.violations.is_empty(), "{:?}", c.violations);
        assert_eq!(c.exempt, 1);
        let mut c = TxnChecker::default();
        c.on_commit_acked((0, 3), &[(tp, 5)], (0, 1));
        c.on_read_committed((tp, false, 1), 0, &aborted, &[(3, 0)]);
        assert!(c.violations.is_empty(), "{:?}", c.violations);
    }

    #[test]
    fn at_the_end_an_acknowledged_commit_is_followed_by_a_commit_marker() {
        let tp = (Uuid::from_u128(1), 0);
        let mut c = TxnChecker::default();
        c.on_commit_acked((1_000, 7), &[(tp, 1), (tp, 2)], (0, 0));
        let committed = [
            data(1, 7),
            data(2, 7),
            data(3, 8),
            marker(7, ControlType::Commit),
        ];
        fn at<'a>(log: &'a [Rec]) -> impl Fn(Tp) -> Option<LeaderLog<'a>> + 'a {
            move |_| Some(LeaderLog { log, lossy: false })
        }
        let leader = |log: &[Rec]| -> Vec<Rec> { log.to_vec() };
        let committed = leader(&committed);
        c.on_end(20_000, 0, at(&committed));
        assert!(c.violations.is_empty(), "{:?}", c.violations);
        // Acknowledged in the last 10 s: its markers may be on the way.
        let open = leader(&[data(1, 7), data(2, 7)]);
        c.on_end(5_000, 0, at(&open));
        assert!(c.violations.is_empty(), "{:?}", c.violations);
        c.on_end(20_000, 0, at(&open));
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
        assert!(c.violations[0].contains("no marker"));
        let aborted = leader(&[data(1, 7), data(2, 7), marker(7, ControlType::Abort)]);
        c.on_end(20_000, 0, at(&aborted));
        assert!(c.violations[1].contains("an ABORT marker"));
        // After an allowed loss of `__transaction_state`, exempt.
        c.on_end(20_000, 1, at(&aborted));
        assert_eq!(c.violations.len(), 2);
        assert_eq!(c.exempt, 1);
    }
}
