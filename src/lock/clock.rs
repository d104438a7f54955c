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
