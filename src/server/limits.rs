//! What bounds the network edge's memory and connections, in one shared value: [`Network`] holds
//! the request memory pool (`queued.max.request.bytes`), the connection quotas
//! (`max.connections`, `max.connections.per.ip`), the per-connection settings (response-queue
//! bound, idle and read timeouts) and counters tests and future metrics read ([`NetworkStats`]).
//!
//! Bounds, per connection: request frames it reads hold pool memory (at most one frame at a time,
//! plus up to `READ_CHUNK` read past it); its queued responses hold at most
//! `sluice.connection.queued.response.max.bytes` plus the last response queued (the reader stops
//! reading while they hold more); file ranges count [`FILE_CHUNK_COST`] each, as they pin a
//! descriptor and no memory, and at most 64 responses are queued. Broker-wide: the pool.
//!
//! Thread-safe: shared by `Arc` between the accept loop and every connection.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::pool::MemoryPool;
use super::quotas::{ConnectionCounts, ConnectionQuotas};
use crate::config::Config;

/// What a queued file-range chunk counts toward a connection's response bytes: it holds an open
/// descriptor and a small struct, not the range's bytes.
pub const FILE_CHUNK_COST: usize = 64;
/// At most one log line per this interval for a repeated network refusal (a flood must not
/// flood the log); the next line says how many were not logged.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Per-connection limits, from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// `socket.request.max.bytes`
    pub max_request_bytes: usize,
    /// `sluice.connection.queued.response.max.bytes`
    pub queued_response_max_bytes: usize,
    /// `connections.max.idle.ms` (`None`: never).
    pub idle: Option<Duration>,
    /// `sluice.socket.request.read.timeout.ms`
    pub read_timeout: Option<Duration>,
}

/// Counters of the network edge (read by tests; metric-ready).
#[derive(Debug, Default)]
pub struct NetworkStats {
    /// The most response bytes any one connection had queued at once.
    pub peak_queued_response_bytes: AtomicUsize,
    /// Connections whose reader is waiting for its responses to drain right now.
    pub muted_connections: AtomicUsize,
    /// Times a reader was muted (stopped reading) by its queued response bytes.
    pub mutes: AtomicU64,
    /// Connections closed because a frame did not arrive within the read timeout.
    pub read_timeouts: AtomicU64,
    /// Connections closed by `connections.max.idle.ms`.
    pub idle_closed: AtomicU64,
    /// Connections closed at accept by `max.connections.per.ip`.
    pub refused_per_ip: AtomicU64,
    /// Times a client quota throttled a connection (KIP-219: no request read for the time).
    pub throttles: AtomicU64,
    /// Connections whose reader is waiting out a quota throttle right now.
    pub throttled_connections: AtomicUsize,
}

impl NetworkStats {
    pub fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::Relaxed)
    }
}

/// The network edge's shared limits and counters.
#[derive(Debug)]
pub struct Network {
    pub limits: ConnectionLimits,
    pub pool: Arc<MemoryPool>,
    pub quotas: Arc<ConnectionQuotas>,
    pub stats: NetworkStats,
    pub(crate) refusal_log: RateLimit,
    pub(crate) full_log: RateLimit,
    pub(crate) timeout_log: RateLimit,
}

impl Network {
    pub fn from_config(config: &Config) -> Arc<Network> {
        let to_usize = |v: i32| usize::try_from(v).unwrap_or(0);
        let ms = |v: i64| u64::try_from(v).ok().map(Duration::from_millis);
        Arc::new(Network {
            limits: ConnectionLimits {
                max_request_bytes: config.max_request_bytes,
                queued_response_max_bytes: config.queued_response_max_bytes,
                idle: ms(config.connections_max_idle_ms),
                read_timeout: ms(config.request_read_timeout_ms),
            },
            pool: MemoryPool::new(config.effective_queued_max_request_bytes()),
            quotas: ConnectionQuotas::new(ConnectionCounts::new(
                to_usize(config.max_connections),
                to_usize(config.max_connections_per_ip),
                &config.max_connections_per_ip_overrides,
            )),
            stats: NetworkStats::default(),
            refusal_log: RateLimit::new(LOG_INTERVAL),
            full_log: RateLimit::new(LOG_INTERVAL),
            timeout_log: RateLimit::new(LOG_INTERVAL),
        })
    }
}

/// Lets one event in `interval` through and counts the ones held back (time is an argument).
#[derive(Debug)]
pub(crate) struct RateLimit {
    interval: Duration,
    state: Mutex<(Option<Instant>, u64)>,
}

impl RateLimit {
    pub(crate) fn new(interval: Duration) -> RateLimit {
        RateLimit {
            interval,
            state: Mutex::new((None, 0)),
        }
    }

    /// `Some(suppressed)` when this event should be logged (with how many were held back since
    /// the last logged one), `None` when it should be counted silently.
    pub(crate) fn check(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock();
        match state.0 {
            Some(last) if now.saturating_duration_since(last) < self.interval => {
                state.1 += 1;
                None
            }
            _ => {
                let suppressed = std::mem::take(&mut state.1);
                state.0 = Some(now);
                Some(suppressed)
            }
        }
    }
}

/// ", N more since the last" or nothing, for rate-limited lines.
pub(crate) fn suppressed_note(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} more not logged since the last such line)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_lets_one_event_per_interval_through_and_counts_the_rest() {
        let r = RateLimit::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(r.check(t0), Some(0));
        assert_eq!(r.check(t0 + Duration::from_secs(1)), None);
        assert_eq!(r.check(t0 + Duration::from_secs(9)), None);
        assert_eq!(r.check(t0 + Duration::from_secs(10)), Some(2));
        assert_eq!(r.check(t0 + Duration::from_secs(11)), None);
        assert_eq!(r.check(t0 + Duration::from_secs(30)), Some(1));
    }

    #[test]
    fn new_keys_parse_with_kafkas_names_and_refuse_bad_values() {
        use crate::config::Value;
        let entries = |pairs: &[(&str, Value)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let c = Config::from_entries(&entries(&[
            ("max.connections", Value::Int(7)),
            ("max.connections.per.ip", Value::Int(3)),
            (
                "max.connections.per.ip.overrides",
                Value::Str("127.0.0.1:5, [::1]:9".into()),
            ),
            ("connections.max.idle.ms", Value::Int(1234)),
            ("queued.max.request.bytes", Value::Int(1 << 20)),
            ("sluice.socket.request.read.timeout.ms", Value::Int(50)),
            (
                "sluice.connection.queued.response.max.bytes",
                Value::Int(4096),
            ),
        ]))
        .unwrap();
        assert_eq!((c.max_connections, c.max_connections_per_ip), (7, 3));
        let overrides: Vec<_> = c
            .max_connections_per_ip_overrides
            .clone()
            .into_iter()
            .collect();
        assert_eq!(
            overrides,
            vec![
                ("127.0.0.1".parse().unwrap(), 5),
                ("::1".parse().unwrap(), 9)
            ]
        );
        assert_eq!(c.connections_max_idle_ms, 1234);
        assert_eq!(c.effective_queued_max_request_bytes(), 1 << 20);
        assert_eq!(c.request_read_timeout_ms, 50);
        assert_eq!(c.queued_response_max_bytes, 4096);
        assert!(!c
            .explicit
            .contains_key("sluice.socket.request.read.timeout.ms"));
        assert!(c.explicit.contains_key("max.connections"));
        for bad in ["localhost:5", "127.0.0.1", "127.0.0.1:-1"] {
            let e = Config::from_entries(&entries(&[(
                "max.connections.per.ip.overrides",
                Value::Str(bad.into()),
            )]))
            .unwrap_err()
            .to_string();
            assert!(e.contains("max.connections.per.ip.overrides"), "{bad}: {e}");
        }
        let e = Config::from_entries(&entries(&[("max.connections", Value::Int(-1))]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("max.connections"), "{e}");
    }

    #[test]
    fn effective_pool_bound_uses_sluices_default_unless_positive() {
        let mut c = Config::default();
        assert_eq!(c.effective_queued_max_request_bytes(), 256 << 20);
        c.queued_max_request_bytes = 0;
        assert_eq!(c.effective_queued_max_request_bytes(), 256 << 20);
        c.queued_max_request_bytes = 1 << 20;
        assert_eq!(c.effective_queued_max_request_bytes(), 1 << 20);
        let n = Network::from_config(&c);
        assert_eq!(n.pool.capacity(), 1 << 20);
        assert_eq!(n.limits.idle, Some(Duration::from_secs(600)));
        c.connections_max_idle_ms = -1;
        assert_eq!(Network::from_config(&c).limits.idle, None);
    }
}
