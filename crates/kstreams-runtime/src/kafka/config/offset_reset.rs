//! `auto.offset.reset` as kstreams reads it and librdkafka checks it:
//! Kafka's `earliest`, `latest`, `none` and Kafka 4's
//! `by_duration:<ISO-8601 duration>` (KIP-1106), as Kafka's
//! `AutoOffsetResetStrategy` parses them.

use std::time::Duration;

/// `auto.offset.reset` as librdkafka checks it: Java's `none` (fail when a
/// partition has no committed offset) is librdkafka's `error`, which
/// kstreams turns into
/// [`RuntimeError::NoCommittedOffset`](crate::kafka::RuntimeError::NoCommittedOffset).
/// Kafka 4's `by_duration:<ISO-8601 duration>` (KIP-1106) has no librdkafka
/// counterpart: it is kept as written (the value returned is only what
/// librdkafka checks) and the stream thread seeks partitions without a
/// committed offset itself ([`reset_by_duration`]). `None` for other keys
/// and values; `Err` says what is accepted.
pub(super) fn auto_offset_reset_for_librdkafka(
    key: &str,
    value: &str,
) -> Option<Result<&'static str, &'static str>> {
    if key != "auto.offset.reset" {
        return None;
    }
    let trimmed = value.trim();
    if trimmed.eq_ignore_ascii_case("none") {
        Some(Ok("error"))
    } else if trimmed.to_ascii_lowercase().starts_with("by_duration:") {
        Some(match reset_by_duration(trimmed) {
            Some(_) => Ok(BY_DURATION_FALLBACK),
            None => Err(
                "by_duration: and a non-negative ISO-8601 duration (PnDTnHnMn.nS, e.g. \
                 by_duration:PT1H), or earliest, latest or none",
            ),
        })
    } else {
        None
    }
}

/// What librdkafka does under `auto.offset.reset=by_duration:...` when the
/// stream thread has not placed a partition itself: a committed offset out
/// of range (retention deleted it) restarts at the earliest record kept,
/// where Kafka's consumer would look up the duration again.
pub(crate) const BY_DURATION_FALLBACK: &str = "earliest";

/// The duration of `by_duration:<ISO-8601>` (Java's `Duration.parse`
/// syntax: `PnDTnHnMn.nS`, case-insensitive, not negative).
pub(crate) fn reset_by_duration(value: &str) -> Option<Duration> {
    let (prefix, iso) = value.trim().split_at_checked("by_duration:".len())?;
    if !prefix.eq_ignore_ascii_case("by_duration:") {
        return None;
    }
    let iso = iso.trim().to_ascii_uppercase();
    let iso = iso.strip_prefix('+').unwrap_or(&iso);
    let rest = iso.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((days, time)) if !time.is_empty() => (days, Some(time)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut millis: u128 = 0;
    let mut any = false;
    if !days.is_empty() {
        let n = days.strip_suffix('D')?;
        millis += n.parse::<u128>().ok()? * 86_400_000;
        any = true;
    }
    if let Some(mut time) = time {
        for (unit, unit_millis) in [('H', 3_600_000u128), ('M', 60_000)] {
            if let Some((n, after)) = time.split_once(unit) {
                millis += n.parse::<u128>().ok()? * unit_millis;
                time = after;
                any = true;
            }
        }
        if !time.is_empty() {
            let seconds = time.strip_suffix('S')?;
            let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
            if fraction.len() > 9 || !fraction.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            millis += whole.parse::<u128>().ok()? * 1_000;
            millis += format!("{fraction:0<3}")[..3].parse::<u128>().ok()?;
            any = true;
        }
    }
    any.then(|| Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::super::{KafkaClient, StreamsConfig};
    use super::*;

    #[test]
    fn auto_offset_reset_none_is_librdkafkas_error_and_by_duration_is_kept() {
        let mut config = StreamsConfig::new("app", "b:1");
        config.set("auto.offset.reset", "none").unwrap();
        config
            .set("restore.consumer.auto.offset.reset", "NONE")
            .unwrap();
        assert_eq!(
            config.client_settings(KafkaClient::MainConsumer)["auto.offset.reset"].1,
            "error"
        );
        config
            .set("main.consumer.auto.offset.reset", "by_duration:PT1H")
            .unwrap();
        assert_eq!(
            config.client_settings(KafkaClient::MainConsumer)["auto.offset.reset"].1,
            "by_duration:PT1H"
        );
        let err = config
            .set("auto.offset.reset", "by_duration:1h")
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "invalid value \"by_duration:1h\" for config auto.offset.reset: by_duration: and \
                 a non-negative ISO-8601 duration"
            ),
            "{err}"
        );
        config.set("auto.offset.reset", "latest").unwrap();
        assert_eq!(
            config.client_settings(KafkaClient::RestoreConsumer)["auto.offset.reset"].1,
            "error"
        );
    }

    #[test]
    fn by_duration_reads_durations_as_java_parses_them() {
        let ms = |v: &str| reset_by_duration(v).map(|d| d.as_millis());
        assert_eq!(ms("by_duration:PT1H"), Some(3_600_000));
        assert_eq!(ms("BY_DURATION:p1dt2h3m4.5s"), Some(93_784_500));
        assert_eq!(ms("by_duration:P2D"), Some(172_800_000));
        assert_eq!(ms("by_duration:PT0.001S"), Some(1));
        assert_eq!(ms("by_duration:PT90M"), Some(5_400_000));
        assert_eq!(ms("by_duration: PT30S"), Some(30_000));
        for bad in [
            "by_duration:",
            "by_duration:P",
            "by_duration:PT",
            "by_duration:-PT1H",
            "by_duration:PT-1H",
            "by_duration:1h",
            "by_duration:PT1.5H",
            "by_duration:P1W",
            "latest",
        ] {
            assert_eq!(ms(bad), None, "{bad}");
        }
    }
}
