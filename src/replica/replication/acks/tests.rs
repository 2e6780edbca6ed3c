use super::*;

#[test]
fn effective_min_isr_is_capped_by_the_replication_factor() {
    assert_eq!(effective_min_isr(2, 1), 1);
    assert_eq!(effective_min_isr(2, 3), 2);
    assert_eq!(effective_min_isr(5, 3), 3);
    assert_eq!(effective_min_isr(1, 3), 1);
    assert_eq!(effective_min_isr(0, 3), 1);
}

#[test]
fn acks_all_append_needs_the_effective_minimum() {
    // RF 1 with min.insync.replicas=2 still takes acks=all (Kafka 4.x).
    assert_eq!(check_acks_all_append(1, 1, 2), Ok(()));
    assert_eq!(check_acks_all_append(2, 3, 2), Ok(()));
    assert_eq!(
        check_acks_all_append(1, 3, 2),
        Err(NotEnoughReplicas {
            isr_size: 1,
            min_isr: 2
        })
    );
    assert_eq!(
        check_acks_all_append(2, 3, 3),
        Err(NotEnoughReplicas {
            isr_size: 2,
            min_isr: 3
        })
    );
}

fn view(high_watermark: i64, maximal_isr_size: usize) -> ReplicationView {
    ReplicationView {
        high_watermark,
        maximal_isr_size,
        effective_min_isr: 2,
    }
}

#[test]
fn delayed_produce_completes_once_the_high_watermark_passes_its_last_offset() {
    let p = DelayedProduce::new(9, 1_000, 30_000);
    assert_eq!(p.required_offset, 10);
    assert_eq!(p.deadline_ms, 31_000);
    assert_eq!(
        p.check(Some(&view(9, 3)), 2_000),
        DelayedProduceOutcome::Pending
    );
    assert_eq!(
        p.check(Some(&view(10, 3)), 2_000),
        DelayedProduceOutcome::Completed
    );
    assert_eq!(
        p.check(Some(&view(50, 2)), 2_000),
        DelayedProduceOutcome::Completed
    );
}

#[test]
fn delayed_produce_fails_after_append_when_the_isr_shrank_below_the_minimum() {
    let p = DelayedProduce::new(9, 1_000, 30_000);
    assert_eq!(
        p.check(Some(&view(10, 1)), 2_000),
        DelayedProduceOutcome::NotEnoughReplicasAfterAppend
    );
    // Not yet replicated: it waits (the leader holds the HW under min ISR), then times out.
    assert_eq!(
        p.check(Some(&view(5, 1)), 2_000),
        DelayedProduceOutcome::Pending
    );
    assert_eq!(
        p.check(Some(&view(5, 1)), 31_000),
        DelayedProduceOutcome::RequestTimedOut
    );
}

#[test]
fn delayed_produce_times_out_at_its_deadline_unless_satisfied() {
    let p = DelayedProduce::new(9, 1_000, 500);
    assert_eq!(
        p.check(Some(&view(9, 3)), 1_499),
        DelayedProduceOutcome::Pending
    );
    assert_eq!(
        p.check(Some(&view(9, 3)), 1_500),
        DelayedProduceOutcome::RequestTimedOut
    );
    assert_eq!(
        p.check(Some(&view(10, 3)), 1_500),
        DelayedProduceOutcome::Completed
    );
    assert_eq!(
        p.check(None, 1_000),
        DelayedProduceOutcome::NotLeaderOrFollower
    );
    // A negative timeout is treated as zero.
    assert_eq!(DelayedProduce::new(0, 7, -5).deadline_ms, 7);
}
