//! The transaction coordinator state machine: every transactional id this node owns and the
//! transitions Kafka's TransactionCoordinator makes (InitProducerId, AddPartitionsToTxn, EndTxn,
//! timeouts, markers written, expiration) plus replay of `__transaction_state`.
//! EndTxn (Transactions V1 and V2) lives in `end_txn.rs`; DescribeTransactions and
//! ListTransactions in `list.rs`.
//!
//! Pure: `now` is an argument, producer ids are inputs. A transition changes the metadata at once
//! and returns the record to persist; the driver persists it before answering and undoes the
//! step ([`Coordinator::restore`]) if the append fails. Owned by one task; not thread-safe.

use std::collections::{BTreeMap, BTreeSet};

use super::metadata::{is_epoch_exhausted, txn_version, TxnMetadata, TxnState};
use super::records;
use super::{codes, Effects, MarkerJob, TxnConfig, TxnRecord};
use crate::record::ControlType;

/// An InitProducerId with a transactional id.
#[derive(Debug, Clone)]
pub struct InitInput {
    pub transactional_id: String,
    pub timeout_ms: i32,
    /// KIP-360 (v3+): the producer id and epoch the client has, when it has one.
    pub expected: Option<(i64, i16)>,
    /// A freshly allocated producer id, when [`Coordinator::needs_producer_id`] said so.
    pub fresh_producer_id: Option<i64>,
}

/// InitProducerId's answer: error code, producer id, epoch (-1, -1 on error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitAnswer {
    pub error: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl InitAnswer {
    fn error(code: i16) -> InitAnswer {
        InitAnswer {
            error: code,
            producer_id: -1,
            producer_epoch: -1,
        }
    }
}

/// A transactional request's identity: id, producer id, epoch.
#[derive(Debug, Clone, Copy)]
pub struct TxnIdentity<'a> {
    pub transactional_id: &'a str,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// All transactional ids and their state.
#[derive(Debug, Default)]
pub struct Coordinator {
    pub config: TxnConfig,
    pub txns: BTreeMap<String, TxnMetadata>,
    /// Transactional ids changed since the driver last published the view.
    dirty: BTreeSet<String>,
    /// The `__transaction_state` shards loaded here, with their coordinator epochs.
    shards: LoadedShards,
}

/// The `__transaction_state` shards a coordinator loaded, each with Kafka's coordinator epoch:
/// the leader epoch the partition had when it was loaded. Markers carry their transactional id's
/// shard's, so a partition leader that took a newer coordinator's marker for a producer refuses
/// an older one's (TRANSACTION_COORDINATOR_FENCED): a coordinator that lost its shard and has not
/// noticed yet cannot end a transaction its successor decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedShards {
    /// The partition count of `__transaction_state` (a transactional id's shard is
    /// `records::partition_for(id, shard_count)`); 0 when nothing is loaded.
    pub shard_count: i32,
    /// Shard -> its leader epoch at load.
    pub epochs: BTreeMap<i32, i32>,
}

impl Coordinator {
    pub fn new(config: TxnConfig) -> Coordinator {
        Coordinator {
            config,
            txns: BTreeMap::new(),
            dirty: BTreeSet::new(),
            shards: LoadedShards::default(),
        }
    }

    /// The shard of `transactional_id` among the loaded ones' topic (None before a load).
    fn shard_of(&self, transactional_id: &str) -> Option<i32> {
        let count = self.shards.shard_count;
        (count > 0).then(|| records::partition_for(transactional_id, count))
    }

    /// Whether `transactional_id` belongs to one of `shards`.
    pub fn in_shards(&self, transactional_id: &str, shards: &BTreeSet<i32>) -> bool {
        self.shard_of(transactional_id)
            .is_some_and(|s| shards.contains(&s))
    }

    /// Records that `shard` (of a `shard_count`-partition `__transaction_state`) is loaded at
    /// leader epoch `epoch` (before its records are replayed).
    pub fn loaded_shard(&mut self, shard_count: i32, shard: i32, epoch: i32) {
        self.shards.shard_count = shard_count;
        self.shards.epochs.insert(shard, epoch);
    }

    /// Kafka's `onResignation` of `shards` (of a `shard_count`-partition `__transaction_state`):
    /// their transactional ids are forgotten (the view drops them at the next publish).
    pub fn unload_shards(&mut self, shard_count: i32, shards: &BTreeSet<i32>) {
        if shard_count <= 0 {
            return;
        }
        self.shards.shard_count = shard_count;
        let gone: Vec<String> = self
            .txns
            .keys()
            .filter(|id| self.in_shards(id, shards))
            .cloned()
            .collect();
        for id in gone {
            self.txns.remove(&id);
            self.dirty.insert(id);
        }
        self.shards.epochs.retain(|s, _| !shards.contains(s));
    }

    /// The coordinator epoch `transactional_id`'s markers carry: its shard's leader epoch at
    /// load, or `config.coordinator_epoch` when its shard is not loaded.
    pub fn coordinator_epoch_of(&self, transactional_id: &str) -> i32 {
        self.shard_of(transactional_id)
            .and_then(|s| self.shards.epochs.get(&s).copied())
            .unwrap_or(self.config.coordinator_epoch)
    }

    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id)
    }

    /// The transactional ids changed since the last call (for the produce-path view).
    pub fn take_dirty(&mut self) -> Vec<String> {
        std::mem::take(&mut self.dirty).into_iter().collect()
    }

    /// Whether InitProducerId for `transactional_id` will need a new producer id: the id is new,
    /// or its epochs are exhausted and the request may move it to a new producer id.
    pub fn needs_producer_id(&self, transactional_id: &str, expected: Option<(i64, i16)>) -> bool {
        match self.txns.get(transactional_id) {
            None => true,
            Some(m) => {
                m.state.is_idle()
                    && is_epoch_exhausted(m.producer_epoch)
                    && expected.is_none_or(|(_, e)| e == m.producer_epoch)
            }
        }
    }

    /// Applies a new version of a transactional id's metadata and emits its record.
    pub(super) fn write(&mut self, m: TxnMetadata, fx: &mut Effects) {
        let id = m.transactional_id.clone();
        let before = self.txns.insert(id.clone(), m.clone());
        if !fx.undo.iter().any(|(u, _)| *u == id) {
            fx.undo.push((id.clone(), before));
        }
        fx.records.push(TxnRecord {
            transactional_id: id.clone(),
            key: records::key(&id),
            value: Some(records::value(&m.to_value())),
        });
        self.dirty.insert(id);
    }

    /// Undoes a step whose records could not be persisted.
    pub fn restore(&mut self, undo: Vec<(String, Option<TxnMetadata>)>) {
        for (id, before) in undo.into_iter().rev() {
            match before {
                Some(m) => self.txns.insert(id.clone(), m),
                None => self.txns.remove(&id),
            };
            self.dirty.insert(id);
        }
    }

    /// InitProducerId with a transactional id (Kafka's handleInitProducerId, Transactions V1).
    pub fn init_producer_id(&mut self, now: i64, input: InitInput) -> (InitAnswer, Effects) {
        let mut fx = Effects::default();
        let id = input.transactional_id.as_str();
        if id.is_empty() {
            return (InitAnswer::error(codes::INVALID_REQUEST), fx);
        }
        if input.timeout_ms <= 0 || input.timeout_ms > self.config.max_timeout_ms {
            return (InitAnswer::error(codes::INVALID_TRANSACTION_TIMEOUT), fx);
        }
        let needs_id = self.needs_producer_id(id, input.expected);
        let fresh = match (needs_id, input.fresh_producer_id) {
            (true, None) => return (InitAnswer::error(codes::COORDINATOR_NOT_AVAILABLE), fx),
            (_, fresh) => fresh,
        };
        let m = match self.txns.get(id) {
            Some(m) => m.clone(),
            None => TxnMetadata {
                transactional_id: id.to_string(),
                producer_id: fresh.unwrap_or(-1),
                previous_producer_id: -1,
                producer_epoch: -1,
                last_producer_epoch: -1,
                timeout_ms: input.timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                start_timestamp_ms: -1,
                last_update_timestamp_ms: now,
                next_producer_id: -1,
                client_transaction_version: txn_version::V1,
            },
        };
        if let Some((pid, epoch)) = input.expected {
            // Fence unless the metadata is new, the id matches, or it is a retry after the epoch
            // ran out and the producer id changed.
            let valid = m.producer_epoch == -1
                || pid == m.producer_id
                || (pid == m.previous_producer_id && is_epoch_exhausted(epoch));
            if !valid {
                return (InitAnswer::error(codes::PRODUCER_FENCED), fx);
            }
        }
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                (InitAnswer::error(codes::CONCURRENT_TRANSACTIONS), fx)
            }
            TxnState::Ongoing | TxnState::PrepareEpochFence | TxnState::Dead => {
                // The previous instance left a transaction open: abort it with a bumped epoch
                // (fencing the old producer) and let the client retry once markers are written.
                self.fence_and_abort(now, m, &mut fx);
                (InitAnswer::error(codes::CONCURRENT_TRANSACTIONS), fx)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut next = m.clone();
                next.previous_producer_id = m.producer_id;
                if needs_id && !self.txns.contains_key(id) {
                    // A new transactional id: epoch 0 with the fresh producer id.
                    next.producer_epoch = 0;
                    next.last_producer_epoch = -1;
                } else if let (true, Some(fresh)) = (needs_id, fresh) {
                    next.producer_id = fresh;
                    next.producer_epoch = 0;
                    next.last_producer_epoch = if input.expected.is_some() {
                        m.producer_epoch
                    } else {
                        -1
                    };
                } else if is_epoch_exhausted(m.producer_epoch) {
                    return (InitAnswer::error(codes::PRODUCER_FENCED), fx);
                } else {
                    match input.expected {
                        None => {
                            next.producer_epoch = m.producer_epoch + 1;
                            next.last_producer_epoch = -1;
                        }
                        Some((_, e)) if m.producer_epoch == -1 || e == m.producer_epoch => {
                            next.producer_epoch = m.producer_epoch + 1;
                            next.last_producer_epoch = m.producer_epoch;
                        }
                        Some((_, e)) if e == m.last_producer_epoch => {
                            // A retry of a bump whose answer was lost: same answer again.
                        }
                        Some(_) => return (InitAnswer::error(codes::PRODUCER_FENCED), fx),
                    }
                }
                next.timeout_ms = input.timeout_ms;
                next.state = TxnState::Empty;
                next.partitions.clear();
                next.start_timestamp_ms = -1;
                next.last_update_timestamp_ms = now;
                let answer = InitAnswer {
                    error: codes::NONE,
                    producer_id: next.producer_id,
                    producer_epoch: next.producer_epoch,
                };
                self.write(next, &mut fx);
                (answer, fx)
            }
        }
    }

    /// Bumps the epoch (not past i16::MAX) and moves the transaction to PrepareAbort; the abort
    /// markers carry the new epoch. Kafka's prepareFenceProducerEpoch + endTransaction(abort),
    /// which runs at the broker's finalized transaction version: under V2 the abort bumps the
    /// epoch once more, as every V2 end of a transaction does.
    fn fence_and_abort(&mut self, now: i64, m: TxnMetadata, fx: &mut Effects) {
        let mut next = m.clone();
        next.previous_producer_id = m.producer_id;
        next.producer_epoch = m.producer_epoch.saturating_add(1);
        next.last_producer_epoch = -1;
        let level = self.config.transaction_version;
        if txn_version::supports_epoch_bump(level) {
            next.last_producer_epoch = next.producer_epoch;
            next.producer_epoch = next.producer_epoch.saturating_add(1);
            next.client_transaction_version = level;
        }
        next.state = TxnState::PrepareAbort;
        next.last_update_timestamp_ms = now;
        fx.markers.push(self.marker_job(&next, ControlType::Abort));
        self.write(next, fx);
    }

    pub(super) fn marker_job(&self, m: &TxnMetadata, control: ControlType) -> MarkerJob {
        MarkerJob {
            transactional_id: m.transactional_id.clone(),
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            coordinator_epoch: self.coordinator_epoch_of(&m.transactional_id),
            control,
            partitions: m.partitions.iter().cloned().collect(),
        }
    }

    /// The common checks of AddPartitionsToTxn and EndTxn.
    pub(super) fn check_identity(&self, who: TxnIdentity<'_>) -> Result<&TxnMetadata, i16> {
        if who.transactional_id.is_empty() {
            return Err(codes::INVALID_REQUEST);
        }
        let m = self
            .txns
            .get(who.transactional_id)
            .ok_or(codes::INVALID_PRODUCER_ID_MAPPING)?;
        if m.producer_id != who.producer_id {
            return Err(codes::INVALID_PRODUCER_ID_MAPPING);
        }
        if m.producer_epoch != who.producer_epoch {
            return Err(codes::PRODUCER_FENCED);
        }
        Ok(m)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (`client_version` V1), or the implicit add of a
    /// Transactions V2 Produce / TxnOffsetCommit (V2): partitions join the transaction (starting
    /// it). The transaction remembers the client's version (Kafka's prepareAddPartitions).
    pub fn add_partitions(
        &mut self,
        now: i64,
        who: TxnIdentity<'_>,
        partitions: &[(String, i32)],
        client_version: i16,
    ) -> (i16, Effects) {
        let mut fx = Effects::default();
        let m = match self.check_identity(who) {
            Ok(m) => m,
            Err(code) => return (code, fx),
        };
        if m.state.is_preparing() {
            return (codes::CONCURRENT_TRANSACTIONS, fx);
        }
        if m.state == TxnState::Ongoing && partitions.iter().all(|p| m.partitions.contains(p)) {
            return (codes::NONE, fx);
        }
        let mut next = m.clone();
        next.previous_producer_id = m.producer_id;
        if m.state.is_idle() {
            next.start_timestamp_ms = now;
            next.partitions.clear();
        }
        next.partitions.extend(partitions.iter().cloned());
        next.client_transaction_version = client_version;
        next.state = TxnState::Ongoing;
        next.last_update_timestamp_ms = now;
        self.write(next, &mut fx);
        (codes::NONE, fx)
    }

    /// AddPartitionsToTxn v4+ `verify_only`: per partition, may this producer write there now?
    pub fn verify(&self, who: TxnIdentity<'_>, partitions: &[(String, i32)]) -> Vec<i16> {
        let m = match self.txns.get(who.transactional_id) {
            Some(m) if m.producer_id == who.producer_id => m,
            _ => return vec![codes::INVALID_PRODUCER_ID_MAPPING; partitions.len()],
        };
        partitions
            .iter()
            .map(|p| {
                let added = m.partitions.contains(p);
                super::view::verify_rule(m.state, m.producer_epoch, who.producer_epoch, added)
                    .err()
                    .map(|c| {
                        if c == codes::INVALID_PRODUCER_EPOCH {
                            codes::PRODUCER_FENCED
                        } else {
                            c
                        }
                    })
                    .unwrap_or(codes::NONE)
            })
            .collect()
    }

    /// Every marker of `job` is written: PrepareCommit/PrepareAbort becomes CompleteCommit /
    /// CompleteAbort. Ignored when the transaction moved on meanwhile.
    pub fn markers_written(&mut self, now: i64, job: &MarkerJob) -> Effects {
        let mut fx = Effects::default();
        let Some(m) = self.txns.get(&job.transactional_id) else {
            return fx;
        };
        let complete = match (m.state, job.control) {
            (TxnState::PrepareCommit, ControlType::Commit) => TxnState::CompleteCommit,
            (TxnState::PrepareAbort, ControlType::Abort) => TxnState::CompleteAbort,
            _ => return fx,
        };
        if m.producer_id != job.producer_id || m.producer_epoch != job.producer_epoch {
            return fx;
        }
        let mut next = m.clone();
        next.previous_producer_id = m.producer_id;
        if txn_version::supports_epoch_bump(m.client_transaction_version) && m.next_producer_id >= 0
        {
            // Transactions V2 ran out of epochs: the producer continues under its next id.
            next.producer_id = m.next_producer_id;
            next.producer_epoch = 0;
        }
        next.next_producer_id = -1;
        next.state = complete;
        next.partitions.clear();
        next.last_update_timestamp_ms = now;
        self.write(next, &mut fx);
        fx
    }

    /// The markers still owed after a restart: every PrepareCommit/PrepareAbort transaction.
    pub fn pending_markers(&self) -> Vec<MarkerJob> {
        self.txns
            .values()
            .filter_map(|m| match m.state {
                TxnState::PrepareCommit => Some(self.marker_job(m, ControlType::Commit)),
                TxnState::PrepareAbort => Some(self.marker_job(m, ControlType::Abort)),
                _ => None,
            })
            .collect()
    }

    /// Timers: Ongoing transactions past their timeout are aborted with a bumped epoch (Kafka's
    /// abortTimedOutTransactions); idle transactional ids unused for
    /// `transactional.id.expiration.ms` are forgotten (a tombstone).
    pub fn tick(&mut self, now: i64) -> Effects {
        let mut fx = Effects::default();
        let expiration = self.config.transactional_id_expiration_ms;
        let timed_out: Vec<TxnMetadata> = self
            .txns
            .values()
            .filter(|m| m.timeout_deadline().is_some_and(|d| d <= now))
            .cloned()
            .collect();
        for m in timed_out {
            tracing::info!(
                "aborting transaction of {} (producer {} epoch {}): older than its timeout {} ms",
                m.transactional_id,
                m.producer_id,
                m.producer_epoch,
                m.timeout_ms
            );
            self.fence_and_abort(now, m, &mut fx);
        }
        let expired: Vec<String> = self
            .txns
            .values()
            .filter(|m| m.state.is_idle() && m.last_update_timestamp_ms + expiration <= now)
            .map(|m| m.transactional_id.clone())
            .collect();
        for id in expired {
            let before = self.txns.remove(&id);
            fx.undo.push((id.clone(), before));
            fx.records.push(TxnRecord {
                transactional_id: id.clone(),
                key: records::key(&id),
                value: None,
            });
            self.dirty.insert(id);
        }
        fx
    }

    /// The earliest timeout or expiration deadline.
    pub fn next_deadline(&self) -> Option<i64> {
        let expiration = self.config.transactional_id_expiration_ms;
        self.txns
            .values()
            .filter_map(|m| {
                m.timeout_deadline().or_else(|| {
                    m.state
                        .is_idle()
                        .then(|| m.last_update_timestamp_ms.saturating_add(expiration))
                })
            })
            .min()
    }

    /// Applies one stored record (startup load). Later records win; a null value deletes.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) {
        let id = match records::decode_key(key) {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(
                    "{}: skipping a record: {e}",
                    records::TRANSACTION_STATE_TOPIC
                );
                return;
            }
        };
        self.dirty.insert(id.clone());
        let Some(value) = value else {
            self.txns.remove(&id);
            return;
        };
        match records::decode_value(value)
            .ok()
            .and_then(|v| TxnMetadata::from_value(&id, v))
        {
            Some(m) if m.state == TxnState::Dead => {
                self.txns.remove(&id);
            }
            Some(m) => {
                self.txns.insert(id, m);
            }
            None => tracing::warn!(
                "{}: unreadable value for transactional id {id}",
                records::TRANSACTION_STATE_TOPIC
            ),
        }
    }
}
