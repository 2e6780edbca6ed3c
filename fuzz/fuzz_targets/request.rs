//! Frame + request header + body of any API at any version, through `sluice::api::handle` on a
//! running broker. Oracle: no panic (no abort: the decoder's array counts), and every response
//! frame is well formed (its length prefix counts its bytes, it carries the request's correlation
//! id).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fuzz::{cheap_to_handle, check_response, seeds, with_harness, Answer};

fuzz_target!(
    init: sluice_fuzz::seeds_from_env(seeds::requests),
    |data: &[u8]| {
        if !cheap_to_handle(data) {
            return;
        }
        if let Some(Answer::Frame(f)) = with_harness(|h| h.handle(data)) {
            let id = i32::from_be_bytes([data[4], data[5], data[6], data[7]]);
            check_response(&f, id);
        }
    }
);
