//! Frame + request header + body decoding alone, for every API and version Sluice accepts, with the
//! broker's own functions (`protocol::parse_request_header`, `versions::is_usable`,
//! `header::parse_header_rest`, `protocol::bounded::decode`) and no handler: the fast target, for
//! many executions. Oracle: no panic, no allocation beyond libFuzzer's limit (an array count the
//! bounded decode lets through), and whatever the bounded decode accepts, the crate's plain decode
//! accepts too with the same value. The `request` target runs the handlers as well.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use libfuzzer_sys::fuzz_target;
use sluice::protocol::{header, versions};

fuzz_target!(
    init: sluice_fuzz::seeds_from_env(sluice_fuzz::seeds::requests),
    |data: &[u8]| {
        let mut frame = Bytes::copy_from_slice(data);
        let Ok((key, version, _)) = sluice::protocol::parse_request_header(&mut frame) else {
            return;
        };
        let Ok(api) = ApiKey::try_from(key) else {
            return;
        };
        if !versions::is_usable(api, version) {
            return;
        }
        let flexible = header::header_is_flexible(api, version);
        if header::parse_header_rest(&mut frame, flexible).is_err() {
            return;
        }
        let _ = sluice_fuzz::seeds::check_bounded_decode(api, version, flexible, &frame);
    }
);
