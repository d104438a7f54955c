//! Durations on the command line: humantime (`500ms`, `1m 30s`) or a bare
//! number of seconds, as flock's `-w` takes it, within bounds.

use std::time::Duration;

use crate::lock::lease::{MAX_TTL as MAX_DURATION, MIN_TTL};

/// A duration: humantime (`500ms`, `1m 30s`), or a bare number of seconds
/// (`5`, `0.5`), as flock's `-w` takes it.
pub fn duration(text: &str) -> Result<Duration, String> {
    let bare = text.trim();
    if is_bare_number(bare) {
        return bare
            .parse::<f64>()
            .ok()
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
            .ok_or_else(|| {
                format!("invalid duration {bare:?}: expected seconds or e.g. 500ms, 1m 30s")
            });
    }
    humantime::parse_duration(text).map_err(|e| e.to_string())
}

/// A wait that never ends, as `--wait forever` gives it.
pub const FOREVER: Duration = Duration::MAX;

/// A wait: a [`duration`], or `forever` / `infinity` (systemd's word) for
/// one that never gives up ([`FOREVER`]).
pub(super) fn wait_duration(text: &str) -> Result<Duration, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "forever" | "infinity" => Ok(FOREVER),
        _ => duration(text).map_err(|e| format!("{e} (or forever)")),
    }
}

/// `--signal-grace`: a positive [`duration`] (a grace of 0 would leave
/// COMMAND no time to stop at all), or `forever` / `infinity` for none.
pub(super) fn signal_grace_duration(text: &str) -> Result<Duration, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "forever" | "infinity" => Ok(FOREVER),
        _ => positive_duration(text).map_err(|e| format!("{e} (or forever)")),
    }
}

fn bounded(text: &str, min: Duration, min_text: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if d < min {
        return Err(format!("must be at least {min_text}"));
    }
    if d > MAX_DURATION {
        return Err("must be at most 1 year".into());
    }
    Ok(d)
}

pub(super) fn positive_duration(text: &str) -> Result<Duration, String> {
    bounded(text, Duration::from_millis(1), "1ms")
}

/// A lease: a bare number of 1000 or more is refused, not taken as seconds:
/// it is almost always milliseconds written as Redis's PX takes them, and
/// `--ttl 30000` would otherwise keep a dead holder's lock for 8h 20m.
pub(super) fn lease_duration(text: &str) -> Result<Duration, String> {
    let bare = text.trim();
    if is_bare_number(bare) && bare.parse::<f64>().is_ok_and(|n| n >= 1000.0) {
        return Err(format!(
            "a bare number is seconds, and {bare} seconds is a long lease: did you mean {bare}ms? (write {bare}s if you meant seconds)"
        ));
    }
    bounded(text, MIN_TTL, "100ms")
}

/// Digits and dots only: a number of seconds, as flock's -w takes it.
fn is_bare_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// Whether `word` is a unit a duration may end in (`m`, `min`, `ms`, ...),
/// as humantime spells them: after a bare number, it was meant to be joined
/// to it (`--wait 10 m`), not taken for a lock NAME.
pub(super) fn is_unit(word: &str) -> bool {
    matches!(
        word,
        "nsec"
            | "nsecs"
            | "ns"
            | "nanos"
            | "usec"
            | "usecs"
            | "us"
            | "µs"
            | "msec"
            | "msecs"
            | "ms"
            | "millis"
            | "s"
            | "sec"
            | "secs"
            | "second"
            | "seconds"
            | "m"
            | "min"
            | "mins"
            | "minute"
            | "minutes"
            | "h"
            | "hr"
            | "hrs"
            | "hour"
            | "hours"
            | "d"
            | "day"
            | "days"
            | "w"
            | "week"
            | "weeks"
            | "M"
            | "month"
            | "months"
            | "y"
            | "year"
            | "years"
    )
}

/// What a unit [`is_unit`] accepts means, in words (`minutes`), singular
/// after a `number` of 1.
pub(super) fn unit_words(unit: &str, number: &str) -> String {
    let plural = match unit {
        "nsec" | "nsecs" | "ns" | "nanos" => "nanoseconds",
        "usec" | "usecs" | "us" | "µs" => "microseconds",
        "msec" | "msecs" | "ms" | "millis" => "milliseconds",
        "m" | "min" | "mins" | "minute" | "minutes" => "minutes",
        "h" | "hr" | "hrs" | "hour" | "hours" => "hours",
        "d" | "day" | "days" => "days",
        "w" | "week" | "weeks" => "weeks",
        "M" | "month" | "months" => "months",
        "y" | "year" | "years" => "years",
        _ => "seconds",
    };
    if number.parse::<f64>() == Ok(1.0) {
        plural.trim_end_matches('s').to_owned()
    } else {
        plural.to_owned()
    }
}

/// Whether `text` is a bare number (`10`, `0.5`).
pub(super) fn bare_number(text: &str) -> bool {
    is_bare_number(text.trim())
}

pub(super) fn grace_duration(text: &str) -> Result<Duration, String> {
    bounded(text, Duration::ZERO, "0s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_number_is_seconds() {
        assert_eq!(duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(duration("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert!(duration(".").is_err());
        assert!(duration("1.2.3").is_err());
    }

    #[test]
    fn a_bare_lease_of_1000_or_more_is_refused_with_a_hint() {
        let err = lease_duration("30000").unwrap_err();
        assert!(err.contains("did you mean 30000ms?"), "{err}");
        assert_eq!(lease_duration("999"), Ok(Duration::from_secs(999)));
        assert_eq!(lease_duration("30000ms"), Ok(Duration::from_secs(30)));
        assert_eq!(lease_duration("1000s"), Ok(Duration::from_secs(1000)));
    }
}
