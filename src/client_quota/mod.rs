//! Client quota enforcement: Kafka's `ClientQuotaManager`s for `producer_byte_rate` (Produce)
//! and `consumer_byte_rate` (consumer Fetch), driven by the quotas in the metadata image
//! (`metadata::quotas`, written by AlterClientQuotas).
//!
//! - `rate`: a rate sampled over `quota.window.num` windows of `quota.window.size.seconds` and
//!   Kafka's throttle-time formula (pure).
//! - `precedence`: which entity's quota applies to a request and which rate it shares (KIP-55's
//!   user / client-id precedence with `<default>`s) (pure).
//! - `manager`: one quota key's sensors: `record` answers the throttle time (pure, time as an
//!   argument).
//! - [`QuotaManagers`] (here): the broker's two managers behind mutexes, the clock, and the sync
//!   with the metadata image: a quota altered through any broker applies from the next request.
//!
//! Handlers ask for a throttle time and answer it as data (the response's `throttle_time_ms`, a
//! `Reply::Throttled`); `server::connection` then stops reading that connection for that long
//! (KIP-219's muted channel). Requests come from Kafka's unauthenticated principal: Sluice serves
//! PLAINTEXT only, where Kafka's default principal builder names every client `User:ANONYMOUS`,
//! so a quota on the user `ANONYMOUS` (or the `<default>` user) covers every client together.
//! Not enforced: `request_percentage` (request handler time) and `controller_mutation_rate`.

pub mod manager;
pub mod precedence;
pub mod rate;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::metadata::image::MetadataImage;
use crate::metadata::quotas::ClientQuotas;
pub use manager::ClientQuotaManager;
pub use precedence::QuotaTable;
pub use rate::QuotaWindow;

/// The user every request comes from: Kafka's `KafkaPrincipal.ANONYMOUS` (PLAINTEXT, no SASL).
pub const ANONYMOUS: &str = "ANONYMOUS";
/// The quota keys enforced (Kafka's `QuotaConfig` names).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";

/// One quota key's manager and the image quotas it was last synced with.
struct Keyed {
    key: &'static str,
    /// Set once the key has had a quota (the manager records from then on): until then a
    /// request whose image has no quota at all takes no lock.
    enabled: AtomicBool,
    state: Mutex<KeyedState>,
}

struct KeyedState {
    manager: ClientQuotaManager,
    /// The image's quotas the table was built from (held, so the pointer comparison is sound).
    synced: Option<Arc<ClientQuotas>>,
}

impl Keyed {
    fn new(key: &'static str, window: QuotaWindow) -> Keyed {
        Keyed {
            key,
            enabled: AtomicBool::new(false),
            state: Mutex::new(KeyedState {
                manager: ClientQuotaManager::new(window),
                synced: None,
            }),
        }
    }

    /// Runs `f` on the manager synced with `image`'s quotas; `None` when nothing is recorded
    /// for this key yet (no quota on this broker so far).
    fn with<T>(
        &self,
        image: &MetadataImage,
        f: impl FnOnce(&mut ClientQuotaManager) -> T,
    ) -> Option<T> {
        let quotas = image.client_quotas_shared();
        if quotas.is_empty() && !self.enabled.load(Ordering::Relaxed) {
            return None;
        }
        let mut state = self.state.lock();
        if !state
            .synced
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, quotas))
        {
            let table = QuotaTable::from_quotas(quotas, self.key);
            state.manager.update_quotas(table);
            state.synced = Some(quotas.clone());
            if state.manager.enabled() {
                self.enabled.store(true, Ordering::Relaxed);
            }
        }
        state.manager.enabled().then(|| f(&mut state.manager))
    }
}

/// The broker's client quota managers (Kafka's `QuotaManagers`: produce and fetch). Shared by
/// every connection through `Broker`; thread-safe (one mutex per key, held for one record, never
/// across an await).
pub struct QuotaManagers {
    produce: Keyed,
    fetch: Keyed,
    /// Monotonic: a wall-clock step never makes a rate jump.
    epoch: Instant,
}

impl std::fmt::Debug for QuotaManagers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotaManagers").finish_non_exhaustive()
    }
}

impl QuotaManagers {
    pub fn new(window: QuotaWindow) -> QuotaManagers {
        QuotaManagers {
            produce: Keyed::new(PRODUCER_BYTE_RATE, window),
            fetch: Keyed::new(CONSUMER_BYTE_RATE, window),
            epoch: Instant::now(),
        }
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// Records a Produce request of `bytes` (Kafka's `request.sizeInBytes`: header and body)
    /// from `client_id`: the throttle time in ms (0 within the quota).
    pub fn record_produce(
        &self,
        image: &MetadataImage,
        client_id: Option<&str>,
        bytes: usize,
    ) -> i32 {
        let now = self.now_ms();
        self.produce
            .with(image, |m| m.record(ANONYMOUS, client_id, bytes as f64, now))
            .unwrap_or(0)
    }

    /// Records a consumer Fetch response of `bytes` (Kafka's `FetchResponse.sizeOf`) for
    /// `client_id`: the throttle time in ms. Above 0 the fetch answers empty (Kafka's
    /// `getThrottledResponse`), so its bytes are taken back at once, at the same time.
    pub fn record_fetch(
        &self,
        image: &MetadataImage,
        client_id: Option<&str>,
        bytes: usize,
    ) -> i32 {
        let now = self.now_ms();
        let value = bytes as f64;
        self.fetch
            .with(image, |m| {
                let throttle = m.record(ANONYMOUS, client_id, value, now);
                if throttle > 0 {
                    m.unrecord(ANONYMOUS, client_id, value, now);
                }
                throttle
            })
            .unwrap_or(0)
    }

    /// The most bytes a Fetch of `client_id` may return (Kafka's `maxQuotaWindowBytes`), `None`
    /// without a consumer quota.
    pub fn fetch_max_bytes(&self, image: &MetadataImage, client_id: Option<&str>) -> Option<usize> {
        self.fetch
            .with(image, |m| m.max_value_in_window(ANONYMOUS, client_id))
            .flatten()
            .map(|v| {
                if v >= i32::MAX as f64 {
                    i32::MAX as usize
                } else {
                    v.max(0.0) as usize
                }
            })
    }
}

#[cfg(test)]
mod kafka_reference_tests;
