//! The broker's AlterPartition client (Kafka's `AlterPartitionManager`): partition leaders submit
//! ISR proposals; one task batches them into AlterPartition requests to the active controller and
//! hands each partition its answer.
//!
//! - [`AlterPartitionClient::submit`] queues a proposal and returns a receiver of its
//!   [`AlterPartitionResponse`]. At most one proposal per partition is queued or in flight: a
//!   second one for the same partition is answered at once with OPERATION_NOT_ATTEMPTED, as
//!   Kafka's manager does (the leader's state machine never sends two).
//! - One request is in flight at a time; it carries every queued proposal (a batch). Proposals
//!   submitted meanwhile go in the next one.
//! - Where it goes ([`ControllerLink`]): a multi-voter node sends AlterPartition v3 over the
//!   `ControllerChannel` (which follows the quorum leader and retries NOT_CONTROLLER) with the
//!   broker epoch of the current registration (the lifecycle watch); a lone voter runs the same
//!   command on its local `ControllerHandle`. The caller cannot tell them apart.
//! - Like Kafka: a top-level error (STALE_BROKER_EPOCH while the broker registers again, any
//!   other code), no answer before the deadline, or a partition missing from the answer keeps
//!   the proposals queued and they are sent again after a backoff (100 ms doubling to 1 s);
//!   per-partition answers (committed, or an error code) complete the proposal. An unencodable
//!   request or a stopped broker lifecycle answers `Error(Other(UNKNOWN_SERVER_ERROR))`.
//! - v3's `new_isr_with_epochs`: the leader's own entry carries this broker's epoch; followers'
//!   entries carry -1 (not checked, KIP-903's "unknown") until the follower fetcher reports the
//!   broker epochs followers fetch with.
//!
//! Thread-safety: [`AlterPartitionClient`] is a cheap, `Clone + Send + Sync` handle (an mpsc
//! sender); the task owns the queue and the link. Dropping every handle ends the task. A `Local`
//! link holds a `ControllerHandle`, and a live handle keeps the controller driver running: drop
//! every client (and let the task end) before shutting the node down.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{alter_partition_request, AlterPartitionRequest};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use uuid::Uuid;

use super::replication::leader::{
    AlterPartitionError, AlterPartitionProposal, AlterPartitionResponse,
};
use crate::controller::channel::{ChannelError, ControllerChannel};
use crate::controller::driver::ControllerHandle;
use crate::controller::remote::Lifecycle;
use crate::controller::{AlterPartitionItem, IsrMember, LEADER_RECOVERED, UNKNOWN_BROKER_EPOCH};

/// The AlterPartition version sent to a remote controller (v3: KIP-903 broker epochs).
const VERSION: i16 = 3;
/// How long one request may take, NOT_CONTROLLER retries included.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_millis(1000);

/// Where AlterPartition requests go.
pub enum ControllerLink {
    /// A node of a multi-voter quorum: the wire, to whichever voter leads.
    Remote {
        channel: ControllerChannel,
        broker_id: i32,
        /// The broker lifecycle (registration, broker epoch).
        lifecycle: watch::Receiver<Lifecycle>,
    },
    /// The lone voter: the command on this process's controller.
    Local {
        handle: ControllerHandle,
        broker_id: i32,
        broker_epoch: i64,
    },
}

/// A partition by topic id and index.
type Key = (Uuid, i32);

struct Submission {
    key: Key,
    topic_name: String,
    proposal: AlterPartitionProposal,
    reply: oneshot::Sender<AlterPartitionResponse>,
}

/// See the module doc. Cheap to clone.
#[derive(Clone)]
pub struct AlterPartitionClient {
    submissions: mpsc::UnboundedSender<Submission>,
}

impl AlterPartitionClient {
    /// Starts the batching task on `link`. Must be called inside a tokio runtime.
    pub fn start(link: ControllerLink) -> (AlterPartitionClient, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(link, rx));
        (AlterPartitionClient { submissions: tx }, task)
    }

    /// Queues `proposal` for partition `partition` of topic `topic_id` (`topic_name` is for log
    /// lines). The receiver yields the controller's answer; it is closed without one only if the
    /// task stopped (the node is shutting down).
    pub fn submit(
        &self,
        topic_id: Uuid,
        topic_name: &str,
        partition: i32,
        proposal: AlterPartitionProposal,
    ) -> oneshot::Receiver<AlterPartitionResponse> {
        let (reply, rx) = oneshot::channel();
        let _ = self.submissions.send(Submission {
            key: (topic_id, partition),
            topic_name: topic_name.to_string(),
            proposal,
            reply,
        });
        rx
    }
}

/// A queued proposal.
struct Queued {
    topic_name: String,
    proposal: AlterPartitionProposal,
    reply: oneshot::Sender<AlterPartitionResponse>,
}

/// One request's outcome.
enum Sent {
    /// Per-partition answers (partitions missing from it stay queued).
    Answered(BTreeMap<Key, AlterPartitionResponse>),
    /// Send the whole batch again after a backoff.
    Retry(String),
    /// Answer every queued proposal with this and give up on them.
    Fail(i16),
}

async fn run(mut link: ControllerLink, mut rx: mpsc::UnboundedReceiver<Submission>) {
    let mut queue: BTreeMap<Key, Queued> = BTreeMap::new();
    let mut backoff = BACKOFF_MIN;
    loop {
        if queue.is_empty() {
            match rx.recv().await {
                Some(s) => enqueue(&mut queue, s),
                None => return,
            }
        }
        while let Ok(s) = rx.try_recv() {
            enqueue(&mut queue, s);
        }
        queue.retain(|_, q| !q.reply.is_closed());
        if queue.is_empty() {
            continue;
        }
        match send(&mut link, &queue).await {
            Sent::Answered(answers) => {
                backoff = BACKOFF_MIN;
                for (key, answer) in answers {
                    if let Some(q) = queue.remove(&key) {
                        tracing::debug!("AlterPartition {}-{}: {answer:?}", q.topic_name, key.1);
                        let _ = q.reply.send(answer);
                    }
                }
                if !queue.is_empty() {
                    tracing::warn!(
                        "AlterPartition: {} partition(s) missing from the controller's answer; sending again",
                        queue.len()
                    );
                    tokio::time::sleep(backoff).await;
                }
            }
            Sent::Retry(why) => {
                tracing::warn!("AlterPartition: {why}; sending again in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
            Sent::Fail(code) => {
                for (_, q) in std::mem::take(&mut queue) {
                    let _ =
                        q.reply
                            .send(AlterPartitionResponse::Error(AlterPartitionError::Other(
                                code,
                            )));
                }
            }
        }
    }
}

fn enqueue(queue: &mut BTreeMap<Key, Queued>, s: Submission) {
    if queue.contains_key(&s.key) {
        let _ = s.reply.send(AlterPartitionResponse::Error(
            AlterPartitionError::OperationNotAttempted,
        ));
        return;
    }
    queue.insert(
        s.key,
        Queued {
            topic_name: s.topic_name,
            proposal: s.proposal,
            reply: s.reply,
        },
    );
}

/// The controller's items for the queued proposals: the leader's own entry with `broker_epoch`.
fn items(queue: &BTreeMap<Key, Queued>, broker_epoch: i64) -> Vec<AlterPartitionItem> {
    queue
        .iter()
        .map(|((topic_id, partition), q)| AlterPartitionItem {
            topic_id: *topic_id,
            partition: *partition,
            leader_epoch: q.proposal.leader_epoch,
            partition_epoch: q.proposal.partition_epoch,
            new_isr: q
                .proposal
                .new_isr
                .iter()
                .map(|r| IsrMember {
                    broker_id: *r,
                    broker_epoch: if *r == q.proposal.leader_id {
                        broker_epoch
                    } else {
                        UNKNOWN_BROKER_EPOCH
                    },
                })
                .collect(),
            leader_recovery_state: LEADER_RECOVERED,
        })
        .collect()
}

/// A per-partition answer: committed, or the error its code names.
fn response(
    code: i16,
    leader_epoch: i32,
    partition_epoch: i32,
    isr: Vec<i32>,
) -> AlterPartitionResponse {
    match AlterPartitionError::from_code(code) {
        None => AlterPartitionResponse::Committed {
            leader_epoch,
            partition_epoch,
            isr,
        },
        Some(e) => AlterPartitionResponse::Error(e),
    }
}

async fn send(link: &mut ControllerLink, queue: &BTreeMap<Key, Queued>) -> Sent {
    match link {
        ControllerLink::Local {
            handle,
            broker_id,
            broker_epoch,
        } => {
            let (id, epoch) = (*broker_id, *broker_epoch);
            let items = items(queue, epoch);
            let keys: Vec<Key> = items.iter().map(|i| (i.topic_id, i.partition)).collect();
            match handle
                .run(move |c, _| c.alter_partitions(id, epoch, &items))
                .await
            {
                Ok(Ok(answers)) => Sent::Answered(
                    keys.into_iter()
                        .zip(answers)
                        .map(|(key, a)| {
                            let r = match a {
                                Ok(a) => response(
                                    a.error.map_or(0, |e| e.code()),
                                    a.leader_epoch,
                                    a.partition_epoch,
                                    a.isr,
                                ),
                                Err(e) => response(e.code(), -1, -1, vec![]),
                            };
                            (key, r)
                        })
                        .collect(),
                ),
                Ok(Err(e)) => Sent::Retry(format!("top-level {:?}: {}", e.error, e.message)),
                Err(e) => Sent::Retry(e.to_string()),
            }
        }
        ControllerLink::Remote {
            channel,
            broker_id,
            lifecycle,
        } => {
            let epoch = *lifecycle.borrow();
            let broker_epoch = match epoch {
                Lifecycle::Fenced { broker_epoch }
                | Lifecycle::Unfenced { broker_epoch }
                | Lifecycle::PendingControlledShutdown { broker_epoch } => broker_epoch,
                Lifecycle::ShutDown => return Sent::Fail(ResponseError::UnknownServerError.code()),
                Lifecycle::Registering => {
                    // Wait for a registration (bounded, then the batch is retried).
                    let waited = tokio::time::timeout(
                        REQUEST_DEADLINE,
                        lifecycle.wait_for(|s| !matches!(s, Lifecycle::Registering)),
                    )
                    .await;
                    return match waited {
                        Ok(Ok(_)) => Sent::Retry("the broker registered again".into()),
                        Ok(Err(_)) => Sent::Fail(ResponseError::UnknownServerError.code()),
                        Err(_) => Sent::Retry("the broker is not registered".into()),
                    };
                }
            };
            let request = wire_request(*broker_id, broker_epoch, &items(queue, broker_epoch));
            let deadline = Instant::now() + REQUEST_DEADLINE;
            match channel.send(&request, VERSION, deadline).await {
                Ok(r) if r.error_code == 0 => Sent::Answered(
                    r.topics
                        .iter()
                        .flat_map(|t| {
                            t.partitions.iter().map(move |p| {
                                let isr = p.isr.iter().map(|b| b.0).collect();
                                (
                                    (t.topic_id, p.partition_index),
                                    response(p.error_code, p.leader_epoch, p.partition_epoch, isr),
                                )
                            })
                        })
                        .collect(),
                ),
                Ok(r) => Sent::Retry(format!(
                    "top-level error {:?} (code {})",
                    ResponseError::try_from_code(r.error_code),
                    r.error_code
                )),
                Err(ChannelError::Encode(e)) => {
                    tracing::error!("AlterPartition: cannot encode the request: {e}");
                    Sent::Fail(ResponseError::UnknownServerError.code())
                }
                Err(e) => Sent::Retry(e.to_string()),
            }
        }
    }
}

/// AlterPartition v3 for `items`, grouped by topic id.
fn wire_request(
    broker_id: i32,
    broker_epoch: i64,
    items: &[AlterPartitionItem],
) -> AlterPartitionRequest {
    use alter_partition_request::{BrokerState, PartitionData, TopicData};
    let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    for i in items {
        topics.entry(i.topic_id).or_default().push(
            PartitionData::default()
                .with_partition_index(i.partition)
                .with_leader_epoch(i.leader_epoch)
                .with_new_isr_with_epochs(
                    i.new_isr
                        .iter()
                        .map(|m| {
                            BrokerState::default()
                                .with_broker_id(m.broker_id.into())
                                .with_broker_epoch(m.broker_epoch)
                        })
                        .collect(),
                )
                .with_leader_recovery_state(i.leader_recovery_state)
                .with_partition_epoch(i.partition_epoch),
        );
    }
    AlterPartitionRequest::default()
        .with_broker_id(broker_id.into())
        .with_broker_epoch(broker_epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(topic_id, partitions)| {
                    TopicData::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

#[cfg(test)]
mod tests;
