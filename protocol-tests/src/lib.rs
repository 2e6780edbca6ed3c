//! Raw-wire conformance tests for Sluice live in `tests/`; this library holds their shared client helpers.
