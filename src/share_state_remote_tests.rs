//! The queues' accounting and bounds, and the requests a job sends.

use super::*;
use crate::share::partition::RecordState;

fn key() -> ShareKey {
    ShareKey::new("g", (uuid::Uuid::from_u128(9), 2))
}

fn write_job() -> (Job, oneshot::Receiver<i16>) {
    let (reply, answer) = oneshot::channel();
    let job = Job::Write {
        key: key(),
        write: WriteState {
            state_epoch: 1,
            leader_epoch: 4,
            start_offset: -1,
            state_batches: vec![PersisterStateBatch::new(3, 5, RecordState::Archived, 2)],
        },
        reply,
    };
    (job, answer)
}

#[test]
fn without_a_runtime_nothing_is_queued() {
    let outbox = Outbox::new(Weak::new());
    let (job, _answer) = write_job();
    assert_eq!(outbox.submit(0, job), Err(codes::COORDINATOR_NOT_AVAILABLE));
    assert!(!outbox.busy(0));
}

#[tokio::test]
async fn a_queued_job_keeps_its_partition_busy_until_it_finishes() {
    // No broker behind the outbox: the worker ends at once, answering nothing.
    let outbox = Outbox::new(Weak::new());
    let (job, answer) = write_job();
    outbox.submit(1, job).expect("queued");
    assert!(outbox.busy(1));
    assert!(!outbox.busy(0));
    // The worker found no broker: the job was dropped (its answer channel closed).
    assert!(answer.await.is_err());
    outbox.finished(1);
    assert!(!outbox.busy(1));
}

#[tokio::test]
async fn beyond_the_bound_jobs_are_refused() {
    let outbox = Outbox::new(Weak::new());
    outbox.queues.lock().total = MAX_QUEUED;
    let (job, _answer) = write_job();
    assert_eq!(outbox.submit(0, job), Err(codes::COORDINATOR_NOT_AVAILABLE));
    outbox.queues.lock().total = MAX_QUEUED - 1;
    let (job, _answer) = write_job();
    assert_eq!(outbox.submit(0, job), Ok(()));
}

#[test]
fn a_write_request_carries_the_change_of_one_key() {
    let Job::Write { write, .. } = write_job().0 else {
        unreachable!()
    };
    let r = write_request(&key(), &write);
    assert_eq!(r.group_id.as_str(), "g");
    let t = &r.topics[0];
    assert_eq!(t.topic_id, uuid::Uuid::from_u128(9));
    let p = &t.partitions[0];
    assert_eq!(
        (p.partition, p.state_epoch, p.leader_epoch, p.start_offset),
        (2, 1, 4, -1)
    );
    let b = &p.state_batches[0];
    assert_eq!(
        (
            b.first_offset,
            b.last_offset,
            b.delivery_state,
            b.delivery_count
        ),
        (3, 5, 4, 2)
    );
}
