//! The clock leases are judged by: `CLOCK_BOOTTIME`.
//!
//! A lease runs on the server whatever happens to this host. `Instant`
//! (`CLOCK_MONOTONIC`) stops while the host is suspended, so a laptop lid
//! closed for an hour would look like no time at all; `CLOCK_BOOTTIME` counts
//! the suspension, like the server's clock does. Stamps are nanoseconds since
//! boot in a `u64`, so they fit in an atomic shared with the guardian process.

use std::time::Duration;

pub use crate::sys::clock::Stamp;

/// Safety margin for clock drift between us and the server (Redlock's rule:
/// 1% of the ttl plus 2 ms).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}
