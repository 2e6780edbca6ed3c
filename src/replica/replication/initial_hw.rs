//! The high watermark a replica opens with (Kafka 4.1's `Partition.createLog`, which takes the
//! `replication-offset-checkpoint` entry or 0 when there is none, then `UnifiedLog.updateHighWatermark`,
//! which bounds it to the log). Pure: no I/O, no clock.
//!
//! The value only starts the replica: a leader raises it at once to the smallest log end offset over
//! its ISR (a lone leader: its own log end), a follower to the leader's high watermark from its first
//! fetch answer. What it prevents is a restarted replica serving or reporting as committed records
//! that reached its log but never the ISR.

/// The high watermark of a replica opened with log `[log_start_offset, log_end_offset)` and
/// `checkpointed`, its entry in `replication-offset-checkpoint` (`None`: no entry, Kafka's 0).
/// Below the log start it is the log start; at or past the log end it is the log end.
pub fn initial_high_watermark(
    checkpointed: Option<i64>,
    log_start_offset: i64,
    log_end_offset: i64,
) -> i64 {
    let hw = checkpointed.unwrap_or(0);
    if hw < log_start_offset {
        log_start_offset
    } else if hw >= log_end_offset {
        log_end_offset
    } else {
        hw
    }
}

#[cfg(test)]
mod tests {
    use super::initial_high_watermark;

    #[test]
    fn checkpointed_high_watermark_is_bounded_by_the_log() {
        // (checkpointed, log start, log end) -> high watermark at open
        let cases = [
            (Some(40), 0, 100, 40),      // below the log end: the checkpoint
            (Some(100), 0, 100, 100),    // at the log end
            (Some(250), 0, 100, 100),    // past the log end (a log cut by recovery): capped
            (Some(5), 20, 100, 20),      // below the log start (retention, DeleteRecords): raised
            (None, 0, 100, 0),           // no entry: Kafka's 0
            (None, 30, 100, 30),         // no entry, log starting later: the log start
            (None, 0, 0, 0),             // new empty log
            (Some(-1), 0, 10, 0),        // a negative entry never goes below the log start
            (Some(i64::MAX), 7, 12, 12), // nonsense stays within the log
        ];
        for (checkpointed, start, end, want) in cases {
            assert_eq!(
                initial_high_watermark(checkpointed, start, end),
                want,
                "checkpointed {checkpointed:?}, log [{start}, {end})"
            );
        }
    }
}
