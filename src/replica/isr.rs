//! The ISR driver (Kafka's `AlterPartitionManager` user side): sends a leader's AlterPartition
//! proposals to the controller and hands each answer back to the partition, which may propose
//! again (a retriable error resends, a newer state proposes the next change). Proposals come from
//! follower fetches (expand), the periodic ISR check (shrink, every `replica.lag.time.max.ms / 2`)
//! and answers.
//!
//! The transport (`AlterPartitionTransport`, implemented by `replica::alter_partition`'s client) is
//! set by `server::start` once the metadata side is up (a member of a multi-voter quorum sends
//! AlterPartition to the active controller; a lone voter runs it on its own controller). Without one, proposals are dropped with a debug line and the partition keeps
//! its change in flight (it is resolved by the next registration from the image).
//!
//! Invariant: at most one proposal per partition is in flight at a time, because the pure
//! `PartitionLeader` emits a new one only after the previous one was answered (or replaced by a
//! newer registration).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use uuid::Uuid;

use super::partition::Partition;
use crate::replica::replication::leader::{
    AlterPartitionError, AlterPartitionProposal, AlterPartitionResponse,
};

/// Sends one AlterPartition proposal to the active controller and resolves with its answer for
/// this partition (errors as `AlterPartitionResponse::Error`).
pub trait AlterPartitionTransport: Send + Sync + 'static {
    fn alter_partition(
        &self,
        topic_id: Uuid,
        topic: &str,
        partition: i32,
        proposal: AlterPartitionProposal,
    ) -> BoxFuture<'static, AlterPartitionResponse>;
}

impl AlterPartitionTransport for super::alter_partition::AlterPartitionClient {
    fn alter_partition(
        &self,
        topic_id: Uuid,
        topic: &str,
        partition: i32,
        proposal: AlterPartitionProposal,
    ) -> BoxFuture<'static, AlterPartitionResponse> {
        let answer = self.submit(topic_id, topic, partition, proposal);
        Box::pin(async move {
            // A closed receiver: the client's task stopped (shutdown). Resent, as any unknown code.
            answer
                .await
                .unwrap_or(AlterPartitionResponse::Error(AlterPartitionError::Other(
                    -1,
                )))
        })
    }
}

/// Wall-clock milliseconds, the `now_ms` the replication logic is driven with.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Pause before resending a proposal the controller answered with a retriable error.
const RESEND_BACKOFF: Duration = Duration::from_millis(200);

#[derive(Default)]
pub struct IsrDriver {
    transport: parking_lot::RwLock<Option<Arc<dyn AlterPartitionTransport>>>,
}

impl IsrDriver {
    /// Sets the transport.
    pub fn set_transport(&self, transport: Arc<dyn AlterPartitionTransport>) {
        *self.transport.write() = Some(transport);
    }

    /// Drops the transport (shutdown: the lone voter's client holds the controller's handle,
    /// which must go before the controller can stop). Later proposals are dropped.
    pub fn clear_transport(&self) {
        self.transport.write().take();
    }

    /// Sends `proposals` of `partition` (topic id `topic_id`) and feeds the answers back, on a task
    /// of the current runtime.
    pub fn submit(
        &self,
        topic_id: Uuid,
        partition: &Arc<Partition>,
        proposals: Vec<AlterPartitionProposal>,
    ) {
        if proposals.is_empty() {
            return;
        }
        let Some(transport) = self.transport.read().clone() else {
            tracing::debug!(
                "{}-{}: no controller to send AlterPartition to",
                partition.topic,
                partition.index
            );
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for first in proposals {
            let partition = partition.clone();
            let transport = transport.clone();
            runtime.spawn(async move {
                let mut proposal = first;
                loop {
                    let answer = transport
                        .alter_partition(
                            topic_id,
                            &partition.topic,
                            partition.index,
                            proposal.clone(),
                        )
                        .await;
                    tracing::debug!(
                        "{}-{}: AlterPartition {:?} answered {answer:?}",
                        partition.topic,
                        partition.index,
                        proposal.new_isr
                    );
                    let resend = matches!(answer, AlterPartitionResponse::Error(_));
                    let next = partition.on_alter_partition_response(&proposal, answer, now_ms());
                    let Some(next) = next.into_iter().next() else {
                        break;
                    };
                    if resend {
                        tokio::time::sleep(RESEND_BACKOFF).await;
                    }
                    proposal = next;
                }
            });
        }
    }
}
