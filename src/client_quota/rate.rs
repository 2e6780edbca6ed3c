//! A rate sampled over Kafka's quota windows: Kafka's `Rate` over a `WindowedSum`
//! (`SampledStat`), with the `MetricConfig` a client quota sensor gets (`quota.window.num`
//! samples of `quota.window.size.seconds` each), and the throttle time Kafka derives from it
//! (`QuotaUtils.throttleTime`).
//!
//! Kept exactly as Kafka 4.1 computes it, so a throttle time here is the one Kafka would answer
//! for the same records at the same times:
//! - a record goes into the current sample, or first moves to the next one (recycling the oldest
//!   of `samples + 1` slots) when the current sample is `window_ms` old;
//! - before a measurement, a sample whose last record is `samples * window_ms` old is reset to
//!   start now (it no longer counts);
//! - the rate is the sum of the samples divided by the time since the oldest sample started,
//!   counted as at least `samples - 1` whole windows (so a new client, or one idle for a while,
//!   is not measured over a few milliseconds), and at least 1 ms;
//! - the throttle time for a measured rate `O` over a bound `T` is `(O - T) / T * W` with `W` that
//!   same window, rounded: the delay after which the rate over the window is back at the bound
//!   if nothing more is recorded.
//!
//! Pure: no clock (`now_ms` is an argument), no I/O, no allocation after the first
//! `samples + 1` records.

/// The sampling of a quota's rate: Kafka's `quota.window.num` (11) samples of
/// `quota.window.size.seconds` (1 s) each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaWindow {
    /// `quota.window.num`, at least 1.
    pub samples: u32,
    /// `quota.window.size.seconds` in milliseconds, at least 1.
    pub window_ms: i64,
}

impl QuotaWindow {
    /// Kafka's defaults: 11 samples of one second.
    pub const DEFAULT: QuotaWindow = QuotaWindow {
        samples: 11,
        window_ms: 1000,
    };

    /// From Kafka's keys (`quota.window.num`, `quota.window.size.seconds`); values below 1 are
    /// taken as 1 (the configuration refuses them already).
    pub fn new(samples: u32, window_seconds: u32) -> QuotaWindow {
        QuotaWindow {
            samples: samples.max(1),
            window_ms: i64::from(window_seconds.max(1)) * 1000,
        }
    }

    /// The most a client may record within the windows without being throttled for it however
    /// idle it was before: Kafka's `getMaxValueInQuotaWindow` (bound x (samples - 1) x window
    /// seconds), which caps a quota'd consumer's fetch size.
    pub fn max_value(&self, bound: f64) -> f64 {
        bound * f64::from(self.samples - 1) * (self.window_ms as f64 / 1000.0)
    }
}

/// One sample: what was recorded from `start_ms` on.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    value: f64,
    start_ms: i64,
    last_event_ms: i64,
}

impl Sample {
    fn new(now_ms: i64) -> Sample {
        Sample {
            value: 0.0,
            start_ms: now_ms,
            last_event_ms: now_ms,
        }
    }
}

/// A sampled rate (Kafka's `Rate` of a `WindowedSum`, per second). Owned by one quota sensor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampledRate {
    /// At most `samples + 1` slots, recycled in a ring (Kafka keeps one extra so the window
    /// always covers `samples` whole windows before the current one is complete).
    samples: Vec<Sample>,
    current: usize,
}

impl SampledRate {
    pub fn new() -> SampledRate {
        SampledRate::default()
    }

    /// Adds `value` (bytes; negative to take back a record) at `now_ms` (Kafka's
    /// `SampledStat.record`). The event window is Kafka's `Long.MAX_VALUE`: only time completes a
    /// sample.
    pub fn record(&mut self, window: QuotaWindow, value: f64, now_ms: i64) {
        let complete = {
            let sample = self.current_sample(now_ms);
            now_ms.saturating_sub(sample.start_ms) >= window.window_ms
        };
        if complete {
            self.advance(window, now_ms);
        }
        let sample = &mut self.samples[self.current];
        sample.value += value;
        sample.last_event_ms = now_ms;
    }

    /// The rate per second at `now_ms` (Kafka's `Rate.measure`).
    pub fn measure(&mut self, window: QuotaWindow, now_ms: i64) -> f64 {
        self.purge_obsolete(window, now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (self.window_size_ms(window, now_ms) as f64 / 1000.0)
    }

    /// The time the rate is measured over at `now_ms` (Kafka's `Rate.windowSize`): since the
    /// oldest sample started, at least `samples - 1` whole windows, at least 1 ms.
    pub fn window_size_ms(&mut self, window: QuotaWindow, now_ms: i64) -> i64 {
        self.purge_obsolete(window, now_ms);
        let oldest = self.oldest_start(now_ms);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full_windows = elapsed / window.window_ms;
        let min_full_windows = i64::from(window.samples) - 1;
        if full_windows < min_full_windows {
            elapsed = elapsed.saturating_add((min_full_windows - full_windows) * window.window_ms);
        }
        elapsed.max(1)
    }

    fn current_sample(&mut self, now_ms: i64) -> &mut Sample {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
        }
        &mut self.samples[self.current]
    }

    /// Moves to the next slot of the ring, fresh from `now_ms`.
    fn advance(&mut self, window: QuotaWindow, now_ms: i64) {
        let slots = window.samples as usize + 1;
        self.current = (self.current + 1) % slots;
        if self.current >= self.samples.len() {
            self.samples.push(Sample::new(now_ms));
            // A smaller `samples` than before (never in one broker run) would skip slots.
            self.current = self.samples.len() - 1;
        } else {
            self.samples[self.current] = Sample::new(now_ms);
        }
    }

    /// Resets the samples whose last record is `samples` windows old: they start again now.
    fn purge_obsolete(&mut self, window: QuotaWindow, now_ms: i64) {
        let expire_age = i64::from(window.samples) * window.window_ms;
        for sample in &mut self.samples {
            if now_ms.saturating_sub(sample.last_event_ms) >= expire_age {
                *sample = Sample::new(now_ms);
            }
        }
    }

    /// The start of the oldest sample (the first of equals, as Kafka scans); a rate with no
    /// sample yet gets one starting now.
    fn oldest_start(&mut self, now_ms: i64) -> i64 {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
        }
        self.samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms)
    }
}

/// Kafka's throttle time (`QuotaUtils.throttleTime`) for a rate `measured` above `bound`, over a
/// window of `window_ms`: `round((measured - bound) / bound * window_ms)`, in 0..=i32::MAX
/// (Kafka's int; an absurd value is capped rather than wrapped). 0 when within the bound.
pub fn throttle_time_ms(measured: f64, bound: f64, window_ms: i64) -> i32 {
    if measured.is_nan() || measured <= bound {
        return 0;
    }
    if bound <= 0.0 {
        return i32::MAX;
    }
    let ms = ((measured - bound) / bound * window_ms as f64).round();
    if ms >= f64::from(i32::MAX) {
        i32::MAX
    } else {
        ms.max(0.0) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: QuotaWindow = QuotaWindow::DEFAULT;

    #[test]
    fn a_new_rate_is_measured_over_at_least_samples_minus_one_windows() {
        let mut r = SampledRate::new();
        r.record(W, 10_000.0, 1_000);
        // Oldest sample started at 1000: 0 ms elapsed, counted as 10 whole windows.
        assert_eq!(r.window_size_ms(W, 1_000), 10_000);
        assert_eq!(r.measure(W, 1_000), 1_000.0);
        // 2.5 s later: 2 whole windows, 8 more added.
        assert_eq!(r.window_size_ms(W, 3_500), 10_500);
        let rate = r.measure(W, 3_500);
        assert!((rate - 10_000.0 / 10.5).abs() < 1e-9, "{rate}");
    }

    #[test]
    fn samples_roll_and_the_ring_keeps_samples_plus_one() {
        let mut r = SampledRate::new();
        for second in 0..30 {
            r.record(W, 100.0, second * 1_000);
        }
        assert_eq!(r.samples.len(), 12, "samples + 1 slots");
        // At 29 000 the slots hold seconds 18..=29; the one of second 18 is 11 s old, so it is
        // reset: 11 x 100 over the 10 s since second 19.
        assert_eq!(r.window_size_ms(W, 29_000), 10_000);
        assert_eq!(r.measure(W, 29_000), 110.0);
        // Half a second on, no sample is that old yet: the window is 10.5 s.
        assert_eq!(r.measure(W, 29_500), 1_100.0 / 10.5);
    }

    #[test]
    fn a_sample_silent_for_the_whole_window_no_longer_counts() {
        let mut r = SampledRate::new();
        r.record(W, 5_000.0, 0);
        assert_eq!(r.measure(W, 10_999), 5_000.0 / 10.999);
        // 11 s after its last record the sample restarts empty at now.
        assert_eq!(r.measure(W, 11_000), 0.0);
        assert_eq!(r.window_size_ms(W, 11_000), 10_000);
    }

    #[test]
    fn a_negative_record_takes_a_value_back() {
        let mut r = SampledRate::new();
        r.record(W, 3_000.0, 500);
        r.record(W, -3_000.0, 500);
        assert_eq!(r.measure(W, 500), 0.0);
    }

    #[test]
    fn throttle_time_is_kafkas_formula_rounded() {
        // (2000 - 1000) / 1000 * 10000 = 10000
        assert_eq!(throttle_time_ms(2_000.0, 1_000.0, 10_000), 10_000);
        // (1024.0625 - 1024) / 1024 * 8192 = 0.5 exactly: rounds half up to 1, as Math.round.
        assert_eq!(throttle_time_ms(1024.0625, 1024.0, 8192), 1);
        assert_eq!(
            throttle_time_ms(1024.03125, 1024.0, 8192),
            0,
            "0.25 rounds down"
        );
        assert_eq!(
            throttle_time_ms(1_000.0, 1_000.0, 10_000),
            0,
            "at the bound"
        );
        assert_eq!(throttle_time_ms(999.0, 1_000.0, 10_000), 0);
        assert_eq!(throttle_time_ms(f64::MAX, 1.0, 10_000), i32::MAX, "capped");
        assert_eq!(throttle_time_ms(f64::NAN, 1.0, 10_000), 0);
        assert_eq!(throttle_time_ms(1.0, 0.0, 10_000), i32::MAX);
    }

    #[test]
    fn max_value_in_the_windows() {
        assert_eq!(W.max_value(1_048_576.0), 10_485_760.0);
        assert_eq!(QuotaWindow::new(3, 2).max_value(100.0), 400.0);
        assert_eq!(QuotaWindow::new(0, 0), QuotaWindow::new(1, 1));
    }
}
