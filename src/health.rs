//! `sluice health`: a tiny blocking Kafka client that asks a broker for ApiVersions (v0) and
//! Metadata (v1, no topics) over one `std::net::TcpStream`, for compose `healthcheck:` and the
//! image's HEALTHCHECK. Healthy means both answered without an error code. Every socket operation
//! is bounded by the deadline; response sizes are bounded. No tokio, no broker state.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    RequestHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// Largest response read (a Metadata answer without topics is small).
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Why the broker is not healthy.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("cannot resolve: {0}")]
    Resolve(String),
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    #[error("{api}: {source}")]
    Io {
        api: &'static str,
        source: std::io::Error,
    },
    #[error("{api}: {reason}")]
    Protocol { api: &'static str, reason: String },
    #[error("{api} answered error code {code}")]
    ErrorCode { api: &'static str, code: i16 },
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("Metadata lists {have} broker(s), fewer than the {want} asked for")]
    TooFewBrokers { have: usize, want: usize },
}

/// The address to check a listener bound to `bind` on: itself, or loopback for a wildcard bind.
pub fn loopback_for(bind: std::net::SocketAddr) -> std::net::SocketAddr {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    match bind.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, bind.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, bind.port()).into(),
        _ => bind,
    }
}

/// Checks the broker at `bootstrap` (HOST:PORT). Returns a one-line summary when healthy.
pub fn check(bootstrap: &str, timeout: Duration) -> Result<String, HealthError> {
    check_brokers(bootstrap, timeout, 0)
}

/// [`check`], and unhealthy unless Metadata lists at least `min_brokers` brokers (a cluster
/// whose brokers have all registered and are unfenced).
pub fn check_brokers(
    bootstrap: &str,
    timeout: Duration,
    min_brokers: usize,
) -> Result<String, HealthError> {
    let deadline = Instant::now() + timeout;
    let addrs: Vec<_> = bootstrap
        .to_socket_addrs()
        .map_err(|e| HealthError::Resolve(e.to_string()))?
        .collect();
    let mut last = None;
    let mut stream = None;
    for addr in addrs {
        let left = remaining(deadline, timeout)?;
        match TcpStream::connect_timeout(&addr, left) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let mut stream = match (stream, last) {
        (Some(s), _) => s,
        (None, Some(e)) => return Err(HealthError::Connect(e)),
        (None, None) => return Err(HealthError::Resolve("no address".into())),
    };
    let _ = stream.set_nodelay(true);

    let versions: ApiVersionsResponse = call(
        &mut stream,
        ApiKey::ApiVersions,
        0,
        1,
        &ApiVersionsRequest::default(),
        deadline,
        timeout,
    )?;
    if versions.error_code != 0 {
        return Err(HealthError::ErrorCode {
            api: "ApiVersions",
            code: versions.error_code,
        });
    }
    let metadata: MetadataResponse = call(
        &mut stream,
        ApiKey::Metadata,
        1,
        2,
        &MetadataRequest::default().with_topics(Some(Vec::new())),
        deadline,
        timeout,
    )?;
    let brokers: Vec<String> = metadata
        .brokers
        .iter()
        .map(|b| format!("{}@{}:{}", b.node_id.0, b.host.as_str(), b.port))
        .collect();
    if brokers.len() < min_brokers {
        return Err(HealthError::TooFewBrokers {
            have: brokers.len(),
            want: min_brokers,
        });
    }
    Ok(format!(
        "healthy: {} APIs, controller {}, brokers {}",
        versions.api_keys.len(),
        metadata.controller_id.0,
        brokers.join(",")
    ))
}

fn remaining(deadline: Instant, timeout: Duration) -> Result<Duration, HealthError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(HealthError::Timeout(timeout))
    } else {
        Ok(left)
    }
}

/// Sends one request (header v1: these versions are not flexible) and decodes its response.
fn call<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &Req,
    deadline: Instant,
    timeout: Duration,
) -> Result<Resp, HealthError> {
    let api = match key {
        ApiKey::ApiVersions => "ApiVersions",
        _ => "Metadata",
    };
    let protocol = |e: anyhow::Error| HealthError::Protocol {
        api,
        reason: e.to_string(),
    };
    let io = |source: std::io::Error| {
        if matches!(
            source.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            HealthError::Timeout(timeout)
        } else {
            HealthError::Io { api, source }
        }
    };
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("sluice-health")));
    let mut body = BytesMut::new();
    header.encode(&mut body, 1).map_err(protocol)?;
    request.encode(&mut body, version).map_err(protocol)?;
    let mut frame = BytesMut::with_capacity(4 + body.len());
    frame.put_i32(body.len() as i32);
    frame.extend_from_slice(&body);
    stream
        .set_write_timeout(Some(remaining(deadline, timeout)?))
        .map_err(io)?;
    stream.write_all(&frame).map_err(io)?;

    let mut len = [0u8; 4];
    stream
        .set_read_timeout(Some(remaining(deadline, timeout)?))
        .map_err(io)?;
    stream.read_exact(&mut len).map_err(io)?;
    let len = i32::from_be_bytes(len);
    if len < 4 || len as usize > MAX_RESPONSE_BYTES {
        return Err(HealthError::Protocol {
            api,
            reason: format!("response length {len}"),
        });
    }
    let mut buf = vec![0u8; len as usize];
    stream
        .set_read_timeout(Some(remaining(deadline, timeout)?))
        .map_err(io)?;
    stream.read_exact(&mut buf).map_err(io)?;
    let mut buf = Bytes::from(buf);
    let got = buf.get_i32();
    if got != correlation_id {
        return Err(HealthError::Protocol {
            api,
            reason: format!("correlation id {got}, expected {correlation_id}"),
        });
    }
    Resp::decode(&mut buf, version).map_err(protocol)
}
