//! The lease: its length, how often it is renewed, what it rides out, and
//! when SIGTERM and SIGKILL are due for a lease a renewal confirmed.
//!
//! The lease is counted from when the last *confirmed* renewal was *sent* (the
//! server extended it after that instant, never before), less a drift margin:
//! that is the end of the lease rlock can prove. COMMAND's whole process group
//! must be dead before it, so SIGKILL is due a guard margin earlier (timer
//! slack and signal delivery), and SIGTERM `--kill-after` before that.

use std::time::Duration;

use crate::lock::clock::{Stamp, drift};
use crate::report;

/// The shortest lease rlock takes: a renewal must fit inside it.
pub const MIN_TTL: Duration = Duration::from_millis(100);
/// The longest lease (and the longest duration rlock takes): keeps every
/// millisecond count an exact integer in Redis and in Lua.
pub const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

/// "17.4s": seconds to a tenth, rounded down (a figure rlock promises, such
/// as what the lease rides out, is never rounded up).
pub fn tenths(d: Duration) -> String {
    let tenths = d.as_millis() / 100;
    format!("{}.{}s", tenths / 10, tenths % 10)
}

/// How the lease is kept.
#[derive(Debug, Clone, Copy)]
pub enum Lease {
    /// Renewed every [`Lease::period`] (`--ttl`).
    Renewed(Duration),
    /// Fixed, never renewed (`--lease`).
    Fixed(Duration),
}

impl Lease {
    /// The lease length.
    pub fn ttl(self) -> Duration {
        match self {
            Lease::Renewed(ttl) | Lease::Fixed(ttl) => ttl,
        }
    }

    /// The longest `--kill-after` that fits in the lease: a third of it, so
    /// that after a renewal fails, the remaining renewals still have about a
    /// third of the lease to get through before SIGTERM.
    pub fn max_grace(self) -> Duration {
        self.ttl() / 3
    }

    /// How long a renewal that fails has before SIGTERM is due: the lease
    /// less the drift and guard margins and `grace`. A server outage shorter
    /// than this, starting just after a renewal was confirmed, is ridden out.
    fn stretch(self, grace: Duration) -> Duration {
        let ttl = self.ttl();
        ttl.saturating_sub(drift(ttl) + guard(ttl) + grace)
    }

    /// How often the lease is renewed: a tenth of [`stretch`](Self::stretch),
    /// so that the outage ridden out when it starts at the worst moment (just
    /// before a renewal) is 90% of the one ridden out at the best (just after
    /// one), whatever the ttl. Never more often than every [`MIN_PERIOD`]
    /// (below a ttl of about 1.5 s the worst moment gets less than 90%), nor
    /// less often than every ttl/3 (Redisson's cadence).
    pub fn period(self, grace: Duration) -> Duration {
        (self.stretch(grace) / 10)
            .max(MIN_PERIOD)
            .min(self.ttl() / 3)
    }

    /// The longest server outage ridden out wherever it starts: the stretch
    /// less one period (it may start just after the last confirmed renewal
    /// was sent, and the next one fails).
    pub fn rides_out(self, grace: Duration) -> Duration {
        self.stretch(grace).saturating_sub(self.period(grace))
    }

    /// When SIGTERM and SIGKILL are due for a lease confirmed at `confirmed`
    /// (the sending of the request the server confirmed) with `grace` between
    /// them: SIGKILL lands a guard margin before the proven end of the lease.
    pub fn deadlines(self, confirmed: Stamp, grace: Duration) -> (Stamp, Stamp) {
        let ttl = self.ttl();
        let kill = confirmed + ttl - drift(ttl) - guard(ttl);
        (kill - grace, kill)
    }
}

/// The most frequent renewal: with a short ttl, a tenth of its stretch would
/// renew many times a second for little gain.
const MIN_PERIOD: Duration = Duration::from_millis(100);

/// Margin between SIGKILL and the proven end of the lease: the guardian's
/// wake-up under load and the signal's delivery (5 ms, plus 1% of the ttl).
pub fn guard(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(5)
}

/// The grace between SIGTERM and SIGKILL, fitted into the lease: at most a
/// third of it (10 s by default), with a note when an explicit
/// `--kill-after` is cut.
pub fn fit_grace(asked: Option<Duration>, lease: Lease, display: &str) -> Duration {
    let max = lease.max_grace();
    match asked {
        Some(grace) if grace > max => {
            report::error(&format!(
                "{display}: --kill-after {} capped to {}, a third of the {} lease, so that SIGKILL still lands inside it",
                humantime::format_duration(grace),
                humantime::format_duration(Duration::from_millis(max.as_millis() as u64)),
                humantime::format_duration(lease.ttl())
            ));
            max
        }
        Some(grace) => grace,
        None => DEFAULT_GRACE.min(max),
    }
}

/// `--kill-after` when not given.
const DEFAULT_GRACE: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_is_one_percent_plus_two_ms() {
        assert_eq!(drift(Duration::from_secs(30)), Duration::from_millis(302));
        assert_eq!(drift(Duration::from_secs(1)), Duration::from_millis(12));
    }

    #[test]
    fn sigkill_lands_before_the_proven_lease_end_and_sigterm_grace_earlier() {
        let lease = Lease::Renewed(Duration::from_secs(1));
        let at = Stamp(10_000_000_000);
        let (term, kill) = lease.deadlines(at, Duration::from_millis(300));
        // 1 s - 12 ms drift - 15 ms guard.
        assert_eq!(kill, at + Duration::from_millis(973));
        assert_eq!(term, at + Duration::from_millis(673));
        assert_eq!(lease.max_grace(), Duration::from_secs(1) / 3);
    }

    #[test]
    fn the_worst_moment_rides_out_nine_tenths_of_the_best() {
        let secs = Duration::from_secs;
        // The defaults: 30 s ttl, 10 s --kill-after.
        let lease = Lease::Renewed(secs(30));
        assert_eq!(lease.period(secs(10)), Duration::from_micros(1_939_300));
        assert_eq!(lease.rides_out(secs(10)), Duration::from_micros(17_453_700));
        for ttl in [3, 4, 10, 15, 20, 30, 60, 300, 3600] {
            let lease = Lease::Renewed(secs(ttl));
            for grace in [
                None,
                Some(Duration::ZERO),
                Some(secs(1)),
                Some(secs(ttl / 3)),
            ] {
                let grace = fit_grace(grace, lease, "x");
                let best = lease.stretch(grace);
                let worst = lease.rides_out(grace);
                assert!(
                    worst.as_secs_f64() >= 0.9 * best.as_secs_f64() - 1e-9,
                    "ttl {ttl}s grace {grace:?}: {worst:?} of {best:?}"
                );
                assert!(lease.period(grace) <= lease.ttl() / 3);
            }
        }
        // Short ttls keep at least 100 ms between renewals.
        assert_eq!(
            Lease::Renewed(Duration::from_secs(1)).period(Duration::from_millis(333)),
            Duration::from_millis(100)
        );
    }
}
