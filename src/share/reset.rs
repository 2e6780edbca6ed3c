//! `share.auto.offset.reset`: where a share-partition starts when the group has no state for
//! it yet (Kafka's `ShareGroupAutoOffsetResetStrategy`: `latest` (default), `earliest`,
//! `by_duration:<ISO-8601 duration>`). Pure: the caller resolves the offsets.

/// The configured strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoOffsetReset {
    Latest,
    Earliest,
    /// Start at the first record not older than this many milliseconds.
    ByDuration(i64),
}

/// The offset query the caller answers (as ListOffsets would).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    Earliest,
    Latest,
    /// The first offset whose timestamp is at or after this one.
    Timestamp(i64),
}

impl AutoOffsetReset {
    /// Parses Kafka's value; `None` for anything Kafka refuses.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "latest" => Some(AutoOffsetReset::Latest),
            "earliest" => Some(AutoOffsetReset::Earliest),
            v => {
                let d = v.strip_prefix("by_duration:")?;
                parse_iso_duration_ms(d.trim()).map(AutoOffsetReset::ByDuration)
            }
        }
    }

    /// The query for the initial SPSO at `now_ms`.
    pub fn offset_spec(self, now_ms: i64) -> OffsetSpec {
        match self {
            AutoOffsetReset::Latest => OffsetSpec::Latest,
            AutoOffsetReset::Earliest => OffsetSpec::Earliest,
            AutoOffsetReset::ByDuration(d) => OffsetSpec::Timestamp(now_ms.saturating_sub(d)),
        }
    }
}

/// The initial SPSO: `log_start_offset` for earliest, `high_watermark` for latest, and for a
/// timestamp the found offset, or the high watermark when no record is that recent.
pub fn initial_start_offset(
    spec: OffsetSpec,
    log_start_offset: i64,
    high_watermark: i64,
    offset_for_timestamp: Option<i64>,
) -> i64 {
    match spec {
        OffsetSpec::Earliest => log_start_offset,
        OffsetSpec::Latest => high_watermark,
        OffsetSpec::Timestamp(_) => offset_for_timestamp
            .unwrap_or(high_watermark)
            .clamp(log_start_offset, high_watermark.max(log_start_offset)),
    }
}

/// `PnDTnHnMn.nS` (Java's `Duration.parse`, upper or lower case, no sign) in milliseconds.
fn parse_iso_duration_ms(s: &str) -> Option<i64> {
    let s = s.to_ascii_uppercase();
    let rest = s.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut total: i64 = 0;
    let mut any = false;
    if !date.is_empty() {
        let days = date.strip_suffix('D')?;
        total = total.checked_add(
            days.parse::<i64>()
                .ok()
                .filter(|d| *d >= 0)?
                .checked_mul(86_400_000)?,
        )?;
        any = true;
    }
    if let Some(mut t) = time {
        for (unit, ms) in [('H', 3_600_000i64), ('M', 60_000)] {
            if let Some((n, tail)) = t.split_once(unit) {
                total = total
                    .checked_add(n.parse::<i64>().ok().filter(|n| *n >= 0)?.checked_mul(ms)?)?;
                t = tail;
                any = true;
            }
        }
        if let Some(secs) = t.strip_suffix('S') {
            let (whole, frac) = secs.split_once('.').unwrap_or((secs, ""));
            let whole: i64 = whole.parse().ok().filter(|n| *n >= 0)?;
            let frac_ms: i64 = if frac.is_empty() {
                0
            } else {
                if !frac.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 9 {
                    return None;
                }
                format!("{frac:0<3}")[..3].parse().ok()?
            };
            total = total.checked_add(whole.checked_mul(1000)?.checked_add(frac_ms)?)?;
            any = true;
        } else if !t.is_empty() {
            return None;
        }
    }
    any.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_values() {
        assert_eq!(
            AutoOffsetReset::parse("latest"),
            Some(AutoOffsetReset::Latest)
        );
        assert_eq!(
            AutoOffsetReset::parse("EARLIEST"),
            Some(AutoOffsetReset::Earliest)
        );
        assert_eq!(
            AutoOffsetReset::parse("by_duration:PT1H"),
            Some(AutoOffsetReset::ByDuration(3_600_000))
        );
        assert_eq!(
            AutoOffsetReset::parse("by_duration:P1DT2M3.5S"),
            Some(AutoOffsetReset::ByDuration(86_400_000 + 120_000 + 3_500))
        );
        assert_eq!(AutoOffsetReset::parse("by_duration:P"), None);
        assert_eq!(AutoOffsetReset::parse("by_duration:PT"), None);
        assert_eq!(AutoOffsetReset::parse("by_duration:PT-1S"), None);
        assert_eq!(AutoOffsetReset::parse("by_duration:1H"), None);
        assert_eq!(AutoOffsetReset::parse("none"), None);
    }

    #[test]
    fn initial_offset_by_strategy() {
        assert_eq!(initial_start_offset(OffsetSpec::Earliest, 5, 50, None), 5);
        assert_eq!(initial_start_offset(OffsetSpec::Latest, 5, 50, None), 50);
        let spec = AutoOffsetReset::ByDuration(1_000).offset_spec(10_000);
        assert_eq!(spec, OffsetSpec::Timestamp(9_000));
        assert_eq!(initial_start_offset(spec, 5, 50, Some(20)), 20);
        assert_eq!(initial_start_offset(spec, 5, 50, None), 50);
    }
}
