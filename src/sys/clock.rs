//! `CLOCK_BOOTTIME`, the clock leases are judged by: unlike `Instant`
//! (`CLOCK_MONOTONIC`) it counts a suspended host's sleep, as the server's
//! clock does. Stamps are nanoseconds since boot in a `u64`, so they fit in
//! an atomic shared with the guardian process.

use std::time::Duration;

/// A point in time on `CLOCK_BOOTTIME`, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(pub u64);

impl Stamp {
    /// Now. Inlined, so that the guardian's loop finds it in its own code
    /// (see `sys::guardian`).
    #[inline(always)]
    pub fn now() -> Stamp {
        let ts = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
        Stamp(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    /// How long after `earlier` this is (zero when it is not after it).
    pub fn since(self, earlier: Stamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// How long from now until this stamp (zero when it has passed).
    pub fn remaining(self) -> Duration {
        self.since(Stamp::now())
    }

    /// True once this stamp has passed.
    pub fn passed(self) -> bool {
        Stamp::now() >= self
    }
}

/// Saturating, like every sum of stamps here.
impl std::ops::Add<Duration> for Stamp {
    type Output = Stamp;
    fn add(self, d: Duration) -> Stamp {
        Stamp(self.0.saturating_add(nanos(d)))
    }
}

/// Saturating at zero.
impl std::ops::Sub<Duration> for Stamp {
    type Output = Stamp;
    fn sub(self, d: Duration) -> Stamp {
        Stamp(self.0.saturating_sub(nanos(d)))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_and_orders() {
        let a = Stamp(1_000);
        assert_eq!(a + Duration::from_nanos(500), Stamp(1_500));
        assert_eq!(a - Duration::from_secs(1), Stamp(0));
        assert_eq!(Stamp(1_500).since(a), Duration::from_nanos(500));
        assert_eq!(a.since(Stamp(1_500)), Duration::ZERO);
        assert!(Stamp(0).passed());
        assert!(!(Stamp::now() + Duration::from_secs(60)).passed());
    }
}
