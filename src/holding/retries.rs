//! How renewals that failed are retried: spaced out while the lease's end
//! is far, denser as it nears.

use std::time::Duration;

/// How soon a renewal that failed fast (a refused connection) is first
/// retried; the spacing doubles up to [`MAX_RETRY_SPACING`], and is never more
/// than a quarter of the time left before SIGTERM. One that timed out has
/// waited already: it is retried at once.
const RETRY_SPACING: Duration = Duration::from_millis(50);
/// The widest spacing of retries.
const MAX_RETRY_SPACING: Duration = Duration::from_millis(500);

/// The spacing of renewals retried after a failure: spaced out while the
/// lease's end is far (many holders retrying against a server that is down
/// cost it little), denser as it nears, so a server back just before it is
/// heard in time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retries {
    spacing: Duration,
}

impl Default for Retries {
    fn default() -> Self {
        Retries {
            spacing: RETRY_SPACING,
        }
    }
}

impl Retries {
    /// How long after this failure to retry, with `left` before the
    /// deadline the renewals race.
    pub(crate) fn next(&mut self, left: Duration) -> Duration {
        let spacing = self.spacing.min(left / 4).max(Duration::from_millis(10));
        self.spacing = (self.spacing * 2).min(MAX_RETRY_SPACING);
        spacing
    }
}
