//! Log recovery over arbitrary file bytes: the input is written as the only segment of a partition
//! directory (`00000000000000000000.log`, no indexes, recovery point 0), then the log is opened.
//! Oracle: no panic, opening succeeds, and what recovery kept reads back as whole valid batches
//! with offsets that only grow, ending at the log end offset it reported.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::log::{LogConfig, PartitionLog};

fuzz_target!(
    init: sluice_fuzz::seeds_from_env(sluice_fuzz::seeds::segments),
    |data: &[u8]| {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("t-0");
        std::fs::create_dir_all(&dir).expect("partition dir");
        std::fs::write(dir.join("00000000000000000000.log"), data).expect("segment");
        let (log, report) = PartitionLog::open(&dir, LogConfig::default(), 0, None, 0)
            .expect("recovery never fails on garbage");
        let end = log.log_end_offset();
        assert_eq!(report.log_end_offset, end);
        assert!(log.log_start_offset() <= end);
        let mut offset = log.log_start_offset();
        let mut kept = 0usize;
        while offset < end {
            let slice = log.read(offset, 1 << 20, i64::MAX).expect("read what recovery kept");
            assert!(!slice.bytes.is_empty(), "no batch at {offset} below the log end {end}");
            let mut rest = &slice.bytes[..];
            while !rest.is_empty() {
                let h = sluice::record::validate_batch(rest).expect("kept batch is valid");
                assert!(h.last_offset() >= offset, "offsets run backwards at {offset}");
                offset = h.last_offset() + 1;
                kept += h.total_size();
                rest = &rest[h.total_size()..];
            }
        }
        assert_eq!(offset, end, "batches end at the log end offset");
        assert!(kept <= data.len());
    }
);
