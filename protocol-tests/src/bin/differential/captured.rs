//! Differential entries from captured client traffic: request frames real clients sent
//! (`protocol-tests/fixtures/captured-requests.txt`, written by `scripts/capture-requests`),
//! replayed byte for byte to both brokers and their answers decoded by the frame's own API key
//! and version. Only the APIs listed in [`render`] are replayed; a fixture line of another API, or
//! a malformed line, fails the run rather than being skipped silently.

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, DescribeClusterRequest, FindCoordinatorRequest,
    InitProducerIdRequest, JoinGroupRequest, ListGroupsRequest, MetadataRequest,
};
use kafka_protocol::protocol::Request;
use protocol_tests::{decode_response, Client};

const FIXTURES: &str = include_str!("../../../fixtures/captured-requests.txt");

/// One captured request frame (without its length prefix).
pub struct Frame {
    pub name: String,
    bytes: Vec<u8>,
    key: i16,
    version: i16,
    correlation_id: i32,
}

/// The fixture file's frames, in file order.
pub fn frames() -> Result<Vec<Frame>> {
    let mut out = Vec::new();
    for (n, line) in FIXTURES.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, hex) = line
            .split_once(' ')
            .with_context(|| format!("fixture line {}: no space", n + 1))?;
        let bytes = unhex(hex.trim()).with_context(|| format!("fixture {name}"))?;
        ensure!(
            bytes.len() >= 8,
            "fixture {name}: {} bytes, no header",
            bytes.len()
        );
        let key = i16::from_be_bytes([bytes[0], bytes[1]]);
        let version = i16::from_be_bytes([bytes[2], bytes[3]]);
        let correlation_id = i32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        out.push(Frame {
            name: name.to_string(),
            bytes,
            key,
            version,
            correlation_id,
        });
    }
    Ok(out)
}

fn unhex(s: &str) -> Result<Vec<u8>> {
    ensure!(s.len().is_multiple_of(2), "odd number of hex digits");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).context("not hex"))
        .collect()
}

impl Frame {
    /// Sends the frame as captured and renders the decoded answer.
    pub async fn replay(&self, c: &mut Client) -> Result<String> {
        let mut wire = (self.bytes.len() as i32).to_be_bytes().to_vec();
        wire.extend_from_slice(&self.bytes);
        c.send_raw(&wire).await?;
        let frame = c.read_frame().await?;
        render(self.key, self.version, self.correlation_id, frame)
    }
}

fn decode<R: Request>(version: i16, id: i32, mut frame: Bytes) -> Result<String>
where
    R::Response: std::fmt::Debug,
{
    let key = ApiKey::try_from(R::KEY).map_err(|_| anyhow::anyhow!("unknown key {}", R::KEY))?;
    Ok(format!(
        "{:#?}",
        decode_response::<R>(key, version, id, &mut frame)?
    ))
}

/// Decodes an answer by the request's API key: the APIs clients send first.
fn render(key: i16, version: i16, id: i32, frame: Bytes) -> Result<String> {
    match key {
        3 => decode::<MetadataRequest>(version, id, frame),
        10 => decode::<FindCoordinatorRequest>(version, id, frame),
        11 => decode::<JoinGroupRequest>(version, id, frame),
        16 => decode::<ListGroupsRequest>(version, id, frame),
        18 => decode::<ApiVersionsRequest>(version, id, frame),
        22 => decode::<InitProducerIdRequest>(version, id, frame),
        60 => decode::<DescribeClusterRequest>(version, id, frame),
        k => bail!("no decoder for captured API key {k}"),
    }
}
