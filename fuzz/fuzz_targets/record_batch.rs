//! Record-batch validation (`sluice::record`) over arbitrary bytes. Oracle: no panic, and a batch
//! that validates is consistent: it fits the input, its CRC is the one computed over it, its
//! offsets do not run backwards, and the record walk never returns more records than it claims.
//!
//! The produce path's validator (issue 13 item 2) is reached through the `produce` target, which
//! sends these bytes as a Produce request; it is covered there whatever its module is called.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::record;

fuzz_target!(
    init: sluice_fuzz::seeds_from_env(sluice_fuzz::seeds::batches),
    |data: &[u8]| {
        let _ = record::BatchHeader::parse(data);
        let Ok(h) = record::validate_batch(data) else {
            return;
        };
        let size = h.total_size();
        assert!(size <= data.len(), "validated batch larger than its bytes");
        assert_eq!(record::compute_crc(&data[..size]), h.crc);
        assert!(h.last_offset_delta >= 0 && h.record_count >= 0);
        let _ = h.last_sequence();
        let _ = record::control_type(&data[..size]);
        if let Some(records) = record::uncompressed_records(&data[..size]) {
            assert_eq!(records.len() as i64, h.record_count as i64, "records walked vs claimed");
        }
    }
);
