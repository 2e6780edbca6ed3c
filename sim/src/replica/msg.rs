//! The replica role's vocabulary: partitions, records, the replication messages between
//! brokers and clients (Fetch with the follower's fetch offset and last fetched epoch, its
//! answer: records and the HW, a diverging epoch or an error; produce; consumer fetch), Kafka's
//! error codes as the role answers them, and the run's counters. Plain data.

use std::sync::Arc;

use sluice::record::ControlType;
use sluice::replica::replication::EpochEndOffset;
use uuid::Uuid;

/// A partition: (topic id, index).
pub type Tp = (Uuid, i32);

/// One record: the leader epoch that wrote it, the workload's unique id, and its batch (the
/// batch header's producer fields and the record's place in it: a log holds whole batches); a
/// coordinator's record (`__consumer_offsets`) also has its key and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub epoch: i32,
    pub id: u64,
    pub batch: BatchOf,
    pub kv: Option<Arc<KeyValue>>,
}

/// A coordinator record's key and value (`None`: a tombstone).
pub type KeyValue = (Vec<u8>, Option<Vec<u8>>);

/// The batch a record belongs to: its header's producer id, producer epoch and base sequence
/// (-1, -1, -1 for a producer without idempotence), its record count, and the record's index;
/// its transactional flag, and for a control batch (a transaction marker, one record) its type
/// and the coordinator epoch of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOf {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub count: i32,
    pub index: i32,
    pub transactional: bool,
    pub control: Option<(ControlType, i32)>,
}

impl BatchOf {
    /// A batch of `count` records without a producer id.
    pub fn plain(count: i32, index: i32) -> BatchOf {
        BatchOf {
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            count,
            index,
            transactional: false,
            control: None,
        }
    }

    /// A transaction marker of `producer_id` at `producer_epoch` (Kafka's control batch: one
    /// record, no sequence).
    pub fn marker(
        producer_id: i64,
        producer_epoch: i16,
        control: ControlType,
        coordinator_epoch: i32,
    ) -> BatchOf {
        BatchOf {
            producer_id,
            producer_epoch,
            base_sequence: -1,
            count: 1,
            index: 0,
            transactional: true,
            control: Some((control, coordinator_epoch)),
        }
    }

    /// The record's sequence (`None` without a producer id, or in a control batch).
    pub fn sequence(&self) -> Option<i32> {
        (self.producer_id >= 0 && self.control.is_none()).then_some(self.base_sequence + self.index)
    }
}

/// An idempotent batch's producer fields as the producer sends them (a transactional
/// producer's batch has the transactional flag too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Idempotent {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
}

/// Kafka error codes the replica role answers.
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
pub const REQUEST_TIMED_OUT: i16 = 7;
pub const KAFKA_STORAGE_ERROR: i16 = 56;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const NOT_ENOUGH_REPLICAS: i16 = 19;
pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
pub const FENCED_LEADER_EPOCH: i16 = 74;
pub const UNKNOWN_LEADER_EPOCH: i16 = 76;

#[derive(Debug, Clone)]
pub struct FetchPartition {
    pub tp: Tp,
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    /// The epoch of the follower's last record (`None`: empty log, no divergence check).
    pub last_fetched_epoch: Option<i32>,
}

#[derive(Debug, Clone)]
pub enum FetchResult {
    Records {
        base: i64,
        records: Vec<Rec>,
        high_watermark: i64,
    },
    Diverging(EpochEndOffset),
    Error(i16),
}

/// The replication messages between brokers and the produce / consume clients.
#[derive(Debug, Clone)]
pub enum ReplMsg {
    Fetch {
        id: u64,
        partitions: Vec<FetchPartition>,
    },
    FetchResponse {
        id: u64,
        answers: Vec<(FetchPartition, FetchResult)>,
    },
    Produce {
        id: u64,
        tp: Tp,
        ids: Vec<u64>,
        /// -1 (all) or 1 (the leader's append).
        acks: i16,
        /// The producer fields of an idempotent producer's batch.
        idempotent: Option<Idempotent>,
    },
    ProduceResponse {
        id: u64,
        code: i16,
    },
    /// A consumer's fetch; `read_committed`: below the last stable offset, with the aborted
    /// transactions.
    ConsumerFetch {
        tp: Tp,
        offset: i64,
        read_committed: bool,
    },
    /// Its answer; read_committed, the aborted transactions overlapping the records
    /// ((producer id, first offset), as the Fetch response's `aborted_transactions`).
    ConsumerRecords {
        tp: Tp,
        /// The serving leader's epoch (-1 when it is not the leader).
        epoch: i32,
        offset: i64,
        result: Result<Vec<Rec>, i16>,
        aborted: Vec<(i64, i64)>,
    },
    /// WriteTxnMarkers for one partition (a transaction coordinator to the partition's leader):
    /// the marker's producer id and epoch, the coordinator epoch, commit or abort. Answered with
    /// a `ProduceResponse` of the same id once the marker is committed.
    WriteTxnMarker {
        id: u64,
        tp: Tp,
        /// The topic's name, by which Kafka's WriteTxnMarkers names it (the coordinator resolved
        /// `tp` from it in its image; the world compares with the controller's).
        topic: String,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        control: ControlType,
    },
    /// A transactional producer's request to its transaction coordinator.
    Txn {
        id: u64,
        request: TxnRequest,
    },
    /// Its answer: the error code, and InitProducerId's producer id and epoch (-1, -1 otherwise).
    TxnResponse {
        id: u64,
        code: i16,
        producer_id: i64,
        producer_epoch: i16,
    },
    /// A group consumer's OffsetCommit of (topic, partition, offset), the commit's number in
    /// the metadata.
    OffsetCommit {
        id: u64,
        group: String,
        offsets: Vec<(String, i32, i64)>,
        metadata: String,
    },
    /// Its answer; acknowledged, (shard, its leader epoch, the records' base offset).
    OffsetCommitResponse {
        id: u64,
        code: i16,
        at: Option<(i32, i32, i64)>,
    },
    /// A group consumer's OffsetFetch of all its committed offsets.
    OffsetFetch {
        id: u64,
        group: String,
    },
    /// Its answer: (shard, its leader epoch, (topic, partition, offset, metadata)).
    OffsetFetchResponse {
        id: u64,
        result: Result<OffsetsFetched, i16>,
    },
}

/// The transaction coordinator's requests (Transactions V2, the partitions added by the producer:
/// see `world::txns`).
#[derive(Debug, Clone)]
pub enum TxnRequest {
    /// InitProducerId with a transactional id; `expected`: KIP-360's current producer id and
    /// epoch (a bump after an abortable error).
    InitProducerId {
        transactional_id: String,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    },
    AddPartitionsToTxn {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(String, i32)>,
    },
    EndTxn {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    },
}

impl TxnRequest {
    pub fn transactional_id(&self) -> &str {
        match self {
            TxnRequest::InitProducerId {
                transactional_id, ..
            }
            | TxnRequest::AddPartitionsToTxn {
                transactional_id, ..
            }
            | TxnRequest::EndTxn {
                transactional_id, ..
            } => transactional_id,
        }
    }
}

/// An OffsetFetch's answer: the shard, its leader epoch, every (topic, partition, offset,
/// metadata) committed.
pub type OffsetsFetched = (i32, i32, Vec<(String, i32, i64, String)>);

/// Counters of one run (summed into the seed's report).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplStats {
    pub produces: u64,
    pub acked_batches: u64,
    /// acks=1 produces answered at the leader's append (never promised: they may be lost).
    pub acks1_answered: u64,
    pub not_enough_replicas: u64,
    pub not_enough_replicas_after_append: u64,
    pub timed_out: u64,
    pub not_leader: u64,
    pub leader_changes: u64,
    pub truncations: u64,
    pub isr_changes: u64,
    pub consumed: u64,
    pub power_losses: u64,
    /// Appends refused by a full disk (KAFKA_STORAGE_ERROR to a producer, a follower's fetched
    /// records not written).
    pub storage_errors: u64,
    /// Idempotent batches sent (retries included), answered as duplicates of a batch in the log,
    /// refused OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH, acknowledged to their
    /// producer, and producer epoch bumps (a batch given up on).
    pub idempotent_sends: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    pub idempotent_acked: u64,
    pub epoch_bumps: u64,
    /// Producer-state snapshots taken at segment rolls, and loads (a truncation or a restart).
    pub producer_snapshots: u64,
    pub producer_state_loads: u64,
    /// Group coordinators loaded (a failover of a `__consumer_offsets` shard), OffsetCommits
    /// sent by the consumers, written by a coordinator, acknowledged; consumer restarts.
    pub coordinator_loads: u64,
    pub commits_sent: u64,
    pub commits_written: u64,
    pub commits_acked: u64,
    pub consumer_restarts: u64,
    /// Transactions (`Schedule::Fourth`): InitProducerId answered, transactions whose EndTxn
    /// commit / abort was acknowledged, transactional producers restarted (a restart, or a fatal
    /// error: fenced, timed out), markers written (committed at a leader), transaction
    /// coordinator loads; records delivered to the read_committed consumer and aborted records
    /// it dropped.
    pub txn_inits: u64,
    pub txns_committed: u64,
    pub txns_aborted: u64,
    pub txn_producer_restarts: u64,
    pub markers_written: u64,
    /// Markers a coordinator routed by name to another incarnation of the topic than the
    /// controller's (its image was behind a deletion and re-creation).
    pub markers_misrouted: u64,
    /// Markers a coordinator skipped as deleted while the controller had a topic of that name
    /// (its image was behind a deletion and re-creation).
    pub markers_skipped: u64,
    pub txn_coordinator_loads: u64,
    pub read_committed_delivered: u64,
    pub read_committed_dropped: u64,
}

impl ReplStats {
    pub fn add(&mut self, o: &ReplStats) {
        self.produces += o.produces;
        self.acked_batches += o.acked_batches;
        self.acks1_answered += o.acks1_answered;
        self.not_enough_replicas += o.not_enough_replicas;
        self.not_enough_replicas_after_append += o.not_enough_replicas_after_append;
        self.timed_out += o.timed_out;
        self.not_leader += o.not_leader;
        self.leader_changes += o.leader_changes;
        self.truncations += o.truncations;
        self.isr_changes += o.isr_changes;
        self.consumed += o.consumed;
        self.power_losses += o.power_losses;
        self.storage_errors += o.storage_errors;
        self.idempotent_sends += o.idempotent_sends;
        self.duplicates += o.duplicates;
        self.out_of_order += o.out_of_order;
        self.idempotent_acked += o.idempotent_acked;
        self.epoch_bumps += o.epoch_bumps;
        self.producer_snapshots += o.producer_snapshots;
        self.producer_state_loads += o.producer_state_loads;
        self.coordinator_loads += o.coordinator_loads;
        self.commits_sent += o.commits_sent;
        self.commits_written += o.commits_written;
        self.commits_acked += o.commits_acked;
        self.consumer_restarts += o.consumer_restarts;
        self.txn_inits += o.txn_inits;
        self.txns_committed += o.txns_committed;
        self.txns_aborted += o.txns_aborted;
        self.txn_producer_restarts += o.txn_producer_restarts;
        self.markers_written += o.markers_written;
        self.markers_misrouted += o.markers_misrouted;
        self.markers_skipped += o.markers_skipped;
        self.txn_coordinator_loads += o.txn_coordinator_loads;
        self.read_committed_delivered += o.read_committed_delivered;
        self.read_committed_dropped += o.read_committed_dropped;
    }
}
