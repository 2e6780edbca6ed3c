//! One Kafka connection from this broker to another (a follower's fetcher to its leader): requests
//! written with `kafka-protocol`'s client side, answers read in order with their correlation id
//! checked and their size bounded before anything is allocated. Any failure is a
//! [`ConnectionError`] and the caller drops the connection (a new one is dialled next time).

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("{addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("{addr}: no answer within {0:?}", .timeout)]
    Timeout { addr: String, timeout: Duration },
    #[error("{addr}: {reason}")]
    Invalid { addr: String, reason: String },
}

pub struct BrokerConnection {
    addr: String,
    stream: TcpStream,
    client_id: String,
    next_correlation_id: i32,
    max_response_bytes: usize,
}

impl BrokerConnection {
    /// Dials `addr` within `timeout`.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        max_response_bytes: usize,
        timeout: Duration,
    ) -> Result<BrokerConnection, ConnectionError> {
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => {
                return Err(ConnectionError::Io {
                    addr: addr.to_string(),
                    source,
                })
            }
            Err(_) => {
                return Err(ConnectionError::Timeout {
                    addr: addr.to_string(),
                    timeout,
                })
            }
        };
        let _ = stream.set_nodelay(true);
        Ok(BrokerConnection {
            addr: addr.to_string(),
            stream,
            client_id: client_id.to_string(),
            next_correlation_id: 1,
            max_response_bytes,
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `request` at `version` and reads its answer, all within `timeout`.
    pub async fn call<R: Request>(
        &mut self,
        version: i16,
        request: &R,
        timeout: Duration,
    ) -> Result<R::Response, ConnectionError> {
        let addr = self.addr.clone();
        match tokio::time::timeout(timeout, self.exchange(version, request)).await {
            Ok(answer) => answer,
            Err(_) => Err(ConnectionError::Timeout { addr, timeout }),
        }
    }

    async fn exchange<R: Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> Result<R::Response, ConnectionError> {
        let addr = self.addr.clone();
        let io = |source| ConnectionError::Io {
            addr: addr.clone(),
            source,
        };
        let invalid = |reason: String| ConnectionError::Invalid {
            addr: addr.clone(),
            reason,
        };
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i32(0);
        header
            .encode(&mut buf, R::header_version(version))
            .and_then(|_| request.encode(&mut buf, version))
            .map_err(|e| invalid(format!("encoding the request: {e}")))?;
        let len = i32::try_from(buf.len() - 4).map_err(|e| invalid(e.to_string()))?;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&buf).await.map_err(io)?;
        let size = self.stream.read_i32().await.map_err(io)?;
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s <= self.max_response_bytes)
            .ok_or_else(|| invalid(format!("answer size {size}")))?;
        let mut body = vec![0u8; size];
        self.stream.read_exact(&mut body).await.map_err(io)?;
        let mut body = Bytes::from(body);
        let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| invalid(e.to_string()))?;
        if header.correlation_id != correlation_id {
            return Err(invalid(format!(
                "correlation id {} where {correlation_id} was expected",
                header.correlation_id
            )));
        }
        let response =
            R::Response::decode(&mut body, version).map_err(|e| invalid(e.to_string()))?;
        if body.has_remaining() {
            return Err(invalid(format!("{} trailing bytes", body.remaining())));
        }
        Ok(response)
    }
}
