//! One client quota key's state on this broker (Kafka's `ClientQuotaManager` for one
//! `QuotaType`): the quotas by entity, the entity levels ever enabled, and a sampled rate per
//! sensor. `record` answers the throttle time Kafka would (0 within the quota).
//!
//! Kafka's rules kept: nothing is recorded while the key has never had a quota on this broker
//! (`quotasEnabled`); once it has, every request is recorded, even one no quota applies to, so a
//! quota added later sees the rate already sampled. The value is recorded before the check, so a
//! throttled request still counts; Fetch takes its value back (`unrecord`) when it answers
//! empty instead. A sensor without records for an hour is dropped (Kafka's
//! `InactiveSensorExpirationTimeSeconds`), and at most [`MAX_SENSORS`] are kept (Sluice's bound:
//! client ids are the client's to choose).
//!
//! Pure: time is an argument, no I/O. Not thread-safe by itself: [`super::QuotaManagers`] keeps
//! each behind a mutex.

use std::collections::HashMap;

use super::precedence::{Levels, QuotaTable, SensorTags};
use super::rate::{throttle_time_ms, QuotaWindow, SampledRate};

/// A sensor without records for this long is dropped (Kafka: one hour).
pub const INACTIVE_SENSOR_EXPIRATION_MS: i64 = 3_600_000;
/// How often expired sensors are looked for (Kafka's metrics reaper runs every 30 s).
const EXPIRATION_CHECK_MS: i64 = 30_000;
/// The most sensors kept; past it the least recently recorded one goes.
pub const MAX_SENSORS: usize = 100_000;

#[derive(Debug, Clone)]
struct Sensor {
    rate: SampledRate,
    last_record_ms: i64,
}

/// The state of one quota key (see the module docs).
#[derive(Debug, Clone)]
pub struct ClientQuotaManager {
    window: QuotaWindow,
    table: QuotaTable,
    /// Kafka's `quotaTypesEnabled`: every level the key has had, never cleared.
    levels: Levels,
    sensors: HashMap<SensorTags, Sensor>,
    last_expiration_ms: i64,
}

impl ClientQuotaManager {
    pub fn new(window: QuotaWindow) -> ClientQuotaManager {
        ClientQuotaManager {
            window,
            table: QuotaTable::default(),
            levels: 0,
            sensors: HashMap::new(),
            last_expiration_ms: i64::MIN,
        }
    }

    pub fn window(&self) -> QuotaWindow {
        self.window
    }

    /// The key's quotas changed (a new metadata image): they apply from the next record on;
    /// the rates sampled so far are kept.
    pub fn update_quotas(&mut self, table: QuotaTable) {
        self.levels |= table.levels();
        self.table = table;
    }

    /// Whether requests are recorded at all (the key has had a quota on this broker).
    pub fn enabled(&self) -> bool {
        self.levels != 0
    }

    /// Records `value` for a request of `user` / `client_id` at `now_ms`: the throttle time in
    /// ms Kafka answers (`recordAndGetThrottleTimeMs`), 0 within the quota or without one.
    pub fn record(&mut self, user: &str, client_id: Option<&str>, value: f64, now_ms: i64) -> i32 {
        if !self.enabled() {
            return 0;
        }
        self.expire(now_ms);
        let tags = self.table.sensor_tags(self.levels, user, client_id);
        let bound = self.table.limit(&tags);
        let window = self.window;
        let sensor = self.sensor(tags, now_ms);
        sensor.rate.record(window, value, now_ms);
        sensor.last_record_ms = now_ms;
        let Some(bound) = bound else {
            return 0;
        };
        let measured = sensor.rate.measure(window, now_ms);
        if measured <= bound {
            return 0;
        }
        let window_ms = sensor.rate.window_size_ms(window, now_ms);
        throttle_time_ms(measured, bound, window_ms)
    }

    /// Takes back `value` recorded at `now_ms` (Kafka's `unrecordQuotaSensor`: a throttled
    /// Fetch answers empty, so its bytes do not count).
    pub fn unrecord(&mut self, user: &str, client_id: Option<&str>, value: f64, now_ms: i64) {
        if !self.enabled() {
            return;
        }
        let tags = self.table.sensor_tags(self.levels, user, client_id);
        let window = self.window;
        let sensor = self.sensor(tags, now_ms);
        sensor.rate.record(window, -value, now_ms);
        sensor.last_record_ms = now_ms;
    }

    /// The most a request of `user` / `client_id` may carry without being throttled for it alone
    /// (Kafka's `getMaxValueInQuotaWindow`); `None` without a quota.
    pub fn max_value_in_window(&self, user: &str, client_id: Option<&str>) -> Option<f64> {
        if !self.enabled() {
            return None;
        }
        let tags = self.table.sensor_tags(self.levels, user, client_id);
        self.table.limit(&tags).map(|b| self.window.max_value(b))
    }

    /// How many sensors are kept (tests, metrics).
    pub fn sensor_count(&self) -> usize {
        self.sensors.len()
    }

    fn sensor(&mut self, tags: SensorTags, now_ms: i64) -> &mut Sensor {
        if !self.sensors.contains_key(&tags) && self.sensors.len() >= MAX_SENSORS {
            self.evict_least_recent();
        }
        self.sensors.entry(tags).or_insert_with(|| Sensor {
            rate: SampledRate::new(),
            last_record_ms: now_ms,
        })
    }

    /// Drops the sensors idle for an hour, at most every 30 s.
    fn expire(&mut self, now_ms: i64) {
        if now_ms.saturating_sub(self.last_expiration_ms) < EXPIRATION_CHECK_MS {
            return;
        }
        self.last_expiration_ms = now_ms;
        self.sensors.retain(|_, s| {
            now_ms.saturating_sub(s.last_record_ms) <= INACTIVE_SENSOR_EXPIRATION_MS
        });
    }

    fn evict_least_recent(&mut self) {
        let oldest = self
            .sensors
            .iter()
            .min_by_key(|(_, s)| s.last_record_ms)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            self.sensors.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::quotas::{ClientQuotaRecord, ClientQuotas, QuotaValue, CLIENT_ID};

    const ANON: &str = "ANONYMOUS";

    fn client_quota(client: Option<&str>, value: f64) -> QuotaTable {
        let mut q = ClientQuotas::default();
        q.apply(&ClientQuotaRecord {
            entity: vec![(CLIENT_ID.into(), client.map(str::to_string))],
            key: "producer_byte_rate".into(),
            value: QuotaValue(value),
            remove: false,
        });
        QuotaTable::from_quotas(&q, "producer_byte_rate")
    }

    #[test]
    fn nothing_is_recorded_before_any_quota() {
        let mut m = ClientQuotaManager::new(QuotaWindow::DEFAULT);
        assert_eq!(m.record(ANON, Some("x"), 1e12, 0), 0);
        assert_eq!(m.sensor_count(), 0);
        assert_eq!(m.max_value_in_window(ANON, Some("x")), None);
    }

    #[test]
    fn a_burst_over_the_windows_is_throttled_by_kafkas_formula() {
        let mut m = ClientQuotaManager::new(QuotaWindow::DEFAULT);
        m.update_quotas(client_quota(Some("x"), 1_000.0));
        // 10 000 bytes at once: 1000/s over the 10 s a new sensor counts: at the bound.
        assert_eq!(m.record(ANON, Some("x"), 10_000.0, 5_000), 0);
        // 5000 more at the same time: 1500/s, (1500 - 1000) / 1000 * 10 000 = 5000 ms.
        assert_eq!(m.record(ANON, Some("x"), 5_000.0, 5_000), 5_000);
        // Another client id has no quota; "x" is not throttled once its rate is back down.
        assert_eq!(m.record(ANON, Some("y"), 1e9, 5_000), 0);
        // 5 s later the window is still the 10 s a young sensor counts: still 1500/s.
        assert_eq!(m.record(ANON, Some("x"), 0.0, 10_000), 5_000);
        // 11 s after its last record the burst's sample no longer counts.
        assert_eq!(m.record(ANON, Some("x"), 0.0, 16_000), 0);
        assert_eq!(m.max_value_in_window(ANON, Some("x")), Some(10_000.0));
        assert_eq!(m.max_value_in_window(ANON, Some("y")), None);
    }

    #[test]
    fn unrecord_takes_the_bytes_back() {
        let mut m = ClientQuotaManager::new(QuotaWindow::DEFAULT);
        m.update_quotas(client_quota(None, 100.0));
        let t = m.record(ANON, Some("c"), 5_000.0, 0);
        assert_eq!(t, 40_000, "(500 - 100) / 100 * 10 000");
        m.unrecord(ANON, Some("c"), 5_000.0, 0);
        assert_eq!(m.record(ANON, Some("c"), 1_000.0, 0), 0);
    }

    #[test]
    fn levels_stay_enabled_after_the_quota_goes_and_rates_carry_over() {
        let mut m = ClientQuotaManager::new(QuotaWindow::DEFAULT);
        m.update_quotas(client_quota(Some("x"), 1_000.0));
        m.update_quotas(QuotaTable::default());
        assert!(m.enabled(), "Kafka's quotaTypesEnabled never clears");
        // Recorded without a quota...
        assert_eq!(m.record(ANON, Some("x"), 20_000.0, 0), 0);
        // ...and counted once a quota comes back: 20 000 / 10 s = 2000/s over 1000.
        m.update_quotas(client_quota(Some("x"), 1_000.0));
        assert_eq!(m.record(ANON, Some("x"), 0.0, 0), 10_000);
    }

    /// A client sending 100 kB requests as soon as its throttle allows, for two simulated
    /// minutes, at 1 ms per request otherwise: what it gets is about the quota (plus the
    /// windows' burst at the start), the long-run promise of Kafka's client quotas.
    #[test]
    fn a_client_honouring_its_throttle_gets_the_quota_in_the_long_run() {
        const QUOTA: f64 = 1_048_576.0;
        let mut m = ClientQuotaManager::new(QuotaWindow::DEFAULT);
        m.update_quotas(client_quota(Some("x"), QUOTA));
        let (mut now, mut sent, mut sent_late, mut throttled) = (0i64, 0.0, 0.0, 0);
        while now < 120_000 {
            let t = m.record(ANON, Some("x"), 100_000.0, now);
            sent += 100_000.0;
            if now >= 60_000 {
                sent_late += 100_000.0;
            }
            throttled += usize::from(t > 0);
            now += i64::from(t) + 1;
        }
        let whole = sent / 120.0 / QUOTA;
        let late = sent_late / 60.0 / QUOTA;
        // Measured: 228 throttled, 1.028 x over the two minutes, 0.936 x over the last (Kafka's
        // estimate overshoots a little: the window it divides by shrinks as samples expire).
        assert!(throttled > 100, "{throttled} throttled requests");
        assert!((1.0..1.1).contains(&whole), "{whole} x quota over 2 min");
        assert!(
            (0.9..1.0).contains(&late),
            "{late} x quota over the last minute"
        );
    }

    #[test]
    fn idle_sensors_expire_and_their_number_is_bounded() {
        let mut m = ClientQuotaManager::new(QuotaWindow::DEFAULT);
        m.update_quotas(client_quota(None, 100.0));
        m.record(ANON, Some("a"), 1.0, 0);
        m.record(ANON, Some("b"), 1.0, 3_000_000);
        assert_eq!(m.sensor_count(), 2);
        m.record(ANON, Some("b"), 1.0, INACTIVE_SENSOR_EXPIRATION_MS + 1);
        assert_eq!(m.sensor_count(), 1, "a was idle for over an hour");
        let mut m = ClientQuotaManager::new(QuotaWindow::DEFAULT);
        m.update_quotas(client_quota(None, 100.0));
        for i in 0..MAX_SENSORS + 10 {
            m.record(ANON, Some(&format!("c{i}")), 1.0, i as i64);
        }
        assert_eq!(m.sensor_count(), MAX_SENSORS);
    }
}
