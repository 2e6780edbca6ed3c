//! Wire-level guards in front of the `kafka-protocol` decoder: request-header parsing that cannot
//! panic, body decoding with array counts bounded by the frame (`bounded`), the table of API versions Sluice advertises, and response framing; Kafka's schema
//! primitives (`schema`) for the coordinators' internal-topic records; and the codec of the
//! API versions the crate lacks (`share_v2`: ShareFetch / ShareAcknowledge v2).
//!
//! Performs no I/O; everything here works on byte buffers.

pub mod bounded;
pub mod header;
pub mod schema;
pub mod share_v2;
pub mod versions;

pub use header::{parse_request_header, HeaderError, RequestHeader};
pub use versions::{supported_range, ADVERTISED};
