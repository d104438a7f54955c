//! Durations on the command line: humantime (`500ms`, `1m 30s`) or a bare
//! number of seconds, as flock's `-w` takes it, within bounds.

use std::time::Duration;

/// `--ttl` when not given.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// Longest lease or grace period: keeps every millisecond count an exact
/// integer in Redis and in Lua.
const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// A duration: humantime (`500ms`, `1m 30s`), or a bare number of seconds
/// (`5`, `0.5`), as flock's `-w` takes it.
pub fn duration(text: &str) -> Result<Duration, String> {
    let bare = text.trim();
    if !bare.is_empty() && bare.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
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

pub(super) fn lease_duration(text: &str) -> Result<Duration, String> {
    bounded(text, Duration::from_millis(100), "100ms")
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
}
