//! The clock leases are judged by: `CLOCK_BOOTTIME`.
//!
//! A lease runs on the server whatever happens to this host. `Instant`
//! (`CLOCK_MONOTONIC`) stops while the host is suspended, so a laptop lid
//! closed for an hour would look like no time at all; `CLOCK_BOOTTIME` counts
//! the suspension, like the server's clock does. Stamps are nanoseconds since
//! boot in a `u64`, so they fit in an atomic shared with the guardian process.
//!
//! What is stored or shown (when a hold began, the `file:` backend's fences)
//! reads the wall clock instead: [`now_ms`], [`now_us`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use crate::sys::clock::Stamp;

/// Safety margin for clock drift between us and the server (Redlock's rule:
/// 1% of the ttl plus 2 ms).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The host's clock (CLOCK_REALTIME) in milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The host's clock (CLOCK_REALTIME) in microseconds since the epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// One reading of the server's clock: `server_ms` (ms since the epoch), read
/// by a request sent at `sent` whose reply came at `replied`.
#[derive(Debug, Clone, Copy)]
pub struct ServerRead {
    pub sent: Stamp,
    pub replied: Stamp,
    pub server_ms: u64,
}

/// A step of the server's clock between two readings, beyond what the
/// readings' round trips and `margin` (the drift allowed for) explain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockStep {
    /// It moved at least this much further than time here: leases on it
    /// ended that much sooner.
    Forward(Duration),
    /// It moved at least this much less (or back): leases on it last that
    /// much longer.
    Back(Duration),
}

impl ClockStep {
    /// How far it stepped, either way.
    pub fn by(self) -> Duration {
        match self {
            ClockStep::Forward(by) | ClockStep::Back(by) => by,
        }
    }

    /// How the step is named in messages: "jumped forward 60s".
    pub fn describe(self) -> String {
        let (way, by) = match self {
            ClockStep::Forward(by) => ("forward", by),
            ClockStep::Back(by) => ("back", by),
        };
        // To a tenth of a second: "60s", "1.5s".
        let tenths = (by.as_millis() + 50) / 100;
        let by = match tenths % 10 {
            0 => format!("{}s", tenths / 10),
            t => format!("{}.{t}s", tenths / 10),
        };
        format!("jumped {way} {by}")
    }
}

/// The step of the server's clock between `before` and `after`, if any.
pub fn step(before: ServerRead, after: ServerRead, margin: Duration) -> Option<ClockStep> {
    let ms = |d: Duration| i128::try_from(d.as_millis()).unwrap_or(i128::MAX);
    let moved = i128::from(after.server_ms) - i128::from(before.server_ms);
    // The two readings were taken somewhere inside their round trips.
    let at_most = ms(after.replied.since(before.sent));
    let at_least = ms(after.sent.since(before.replied));
    let margin = ms(margin);
    let by = |n: i128| Duration::from_millis(u64::try_from(n).unwrap_or(u64::MAX));
    if moved > at_most + margin {
        Some(ClockStep::Forward(by(moved - at_most)))
    } else if moved < at_least - margin {
        Some(ClockStep::Back(by(at_least - moved)))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(sent_ms: u64, rtt_ms: u64, server_ms: u64) -> ServerRead {
        let sent = Stamp(sent_ms * 1_000_000);
        ServerRead {
            sent,
            replied: sent + Duration::from_millis(rtt_ms),
            server_ms,
        }
    }

    #[test]
    fn steps_beyond_the_round_trips_and_the_margin_are_named() {
        let margin = Duration::from_millis(302);
        let before = read(10_000, 1, 1_000_000);
        // 2 s here, 2 s there: no step, nor within the margin.
        assert_eq!(step(before, read(12_000, 1, 1_002_000), margin), None);
        assert_eq!(step(before, read(12_000, 1, 1_002_300), margin), None);
        assert_eq!(step(before, read(12_000, 1, 1_001_700), margin), None);
        // A slow reply widens what the server may have seen.
        assert_eq!(step(before, read(12_000, 900, 1_002_800), margin), None);
        let forward = step(before, read(12_000, 1, 1_062_000), margin);
        assert_eq!(
            forward,
            Some(ClockStep::Forward(Duration::from_millis(59_999)))
        );
        assert_eq!(forward.unwrap().describe(), "jumped forward 60s");
        assert_eq!(
            step(before, read(12_000, 1, 942_000), margin),
            Some(ClockStep::Back(Duration::from_millis(59_999)))
        );
    }
}
