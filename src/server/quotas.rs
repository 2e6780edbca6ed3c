//! Connection quotas: Kafka's `max.connections`, `max.connections.per.ip` and
//! `max.connections.per.ip.overrides`, counted at accept.
//!
//! Kafka's rules (`ConnectionQuotas`): at the broker-wide limit the acceptor waits until a
//! connection closes (new connections wait in the listen backlog, nothing is refused); an address
//! at its own limit has the new connection closed at once. [`ConnectionCounts`] is the pure
//! counting; [`ConnectionQuotas`] wraps it in a mutex with a wake-up for the accept loop, and
//! hands out a [`ConnectionSlot`] that gives its count back when the connection ends.
//!
//! Thread-safe: one `Arc<ConnectionQuotas>` shared by the accept loop and every connection; the
//! mutex is held for a few map operations, never across `.await`.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// An address at its `max.connections.per.ip` limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyForIp {
    pub ip: IpAddr,
    pub limit: usize,
}

/// The counts and limits (pure).
#[derive(Debug)]
pub struct ConnectionCounts {
    max_total: usize,
    max_per_ip: usize,
    overrides: HashMap<IpAddr, usize>,
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

impl ConnectionCounts {
    pub fn new(
        max_total: usize,
        max_per_ip: usize,
        overrides: &BTreeMap<IpAddr, i32>,
    ) -> ConnectionCounts {
        ConnectionCounts {
            max_total,
            max_per_ip,
            overrides: overrides
                .iter()
                .map(|(ip, n)| (*ip, usize::try_from(*n).unwrap_or(0)))
                .collect(),
            total: 0,
            per_ip: HashMap::new(),
        }
    }

    /// Whether one more connection fits under `max.connections`.
    pub fn slot_available(&self) -> bool {
        self.total < self.max_total
    }

    /// Counts a new connection from `ip`, or refuses it when the address is at its limit.
    /// (The broker-wide limit is the caller's to wait for: see [`Self::slot_available`].)
    pub fn admit(&mut self, ip: IpAddr) -> Result<(), TooManyForIp> {
        let limit = self.limit_for(ip);
        let count = self.per_ip.entry(ip).or_insert(0);
        if *count >= limit {
            if *count == 0 {
                self.per_ip.remove(&ip);
            }
            return Err(TooManyForIp { ip, limit });
        }
        *count += 1;
        self.total += 1;
        Ok(())
    }

    /// A connection from `ip` ended.
    pub fn release(&mut self, ip: IpAddr) {
        if let Some(count) = self.per_ip.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&ip);
            }
            self.total -= 1;
        }
    }

    pub fn total(&self) -> usize {
        self.total
    }

    fn limit_for(&self, ip: IpAddr) -> usize {
        // An IPv4 client on a dual-stack listener shows up as ::ffff:a.b.c.d.
        let canonical = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        self.overrides
            .get(&ip)
            .or_else(|| self.overrides.get(&canonical))
            .copied()
            .unwrap_or(self.max_per_ip)
    }
}

/// The shared counts plus the accept loop's wake-up.
#[derive(Debug)]
pub struct ConnectionQuotas {
    counts: Mutex<ConnectionCounts>,
    freed: Notify,
}

/// One counted connection; dropping it gives the count back and wakes a waiting accept loop.
#[derive(Debug)]
pub struct ConnectionSlot {
    quotas: Arc<ConnectionQuotas>,
    ip: IpAddr,
}

impl ConnectionQuotas {
    pub fn new(counts: ConnectionCounts) -> Arc<ConnectionQuotas> {
        Arc::new(ConnectionQuotas {
            counts: Mutex::new(counts),
            freed: Notify::new(),
        })
    }

    /// Returns once one more connection fits under `max.connections`.
    pub async fn wait_for_slot(&self) {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.counts.lock().slot_available() {
                return;
            }
            freed.await;
        }
    }

    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, TooManyForIp> {
        self.counts.lock().admit(ip)?;
        Ok(ConnectionSlot {
            quotas: self.clone(),
            ip,
        })
    }

    /// Whether one more connection fits under `max.connections` right now.
    pub fn has_slot(&self) -> bool {
        self.counts.lock().slot_available()
    }

    /// Connections counted right now.
    pub fn total(&self) -> usize {
        self.counts.lock().total()
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.quotas.counts.lock().release(self.ip);
        self.quotas.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests;
