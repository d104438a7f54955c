//! The watchdog: renews the lease every ttl/3 while COMMAND runs, and stops
//! COMMAND no later than the moment the lease could have expired.
//!
//! The lease is counted from when the last *confirmed* renewal was *sent* (the
//! server extended it after that instant, never before), less a drift margin.
//! A renewal the server refuses ("not ours") stops COMMAND at once; renewals
//! that fail (server down, paused, unreachable) are retried until that deadline.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::Session;
use crate::name::LockKeys;
use crate::report;
use crate::signals::Shared;
use crate::token::Token;

/// How the lease is kept.
#[derive(Debug, Clone, Copy)]
pub enum Lease {
    /// Renewed every ttl/3 (`--ttl`).
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
}

/// Why the hold ended before COMMAND did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// A renewal found this lock held by someone else (expired, flushed, forced).
    NotOurs(String),
    /// No renewal was confirmed before the lease could have expired.
    Unconfirmed(String),
    /// The fixed `--lease` ran out.
    LeaseEnded(Duration),
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::NotOurs(_) => f.write_str("lock lost: the server says it is no longer ours"),
            Lost::Unconfirmed(cause) => {
                write!(
                    f,
                    "lock lost: lease could not be renewed before it expired ({cause})"
                )
            }
            Lost::LeaseEnded(lease) => {
                write!(f, "lease of {} ended", humantime::format_duration(*lease))
            }
        }
    }
}

/// Safety margin for clock drift between us and the server (Redlock's rule:
/// 1% of the ttl plus 2 ms).
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// A running watchdog thread.
pub struct Watchdog {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<(Box<dyn Session>, Option<Lost>)>,
}

/// What the watchdog needs to know.
#[derive(Clone)]
pub struct Config {
    /// Each lock held, with the token that holds it.
    pub holds: Vec<(LockKeys, Token)>,
    /// The locks' names, for messages.
    pub display: String,
    /// Lease kind and length.
    pub lease: Lease,
    /// Grace between SIGTERM and SIGKILL.
    pub kill_after: Duration,
    /// When the acquiring request was sent: the lease starts no earlier.
    pub acquired_at: Instant,
}

impl Watchdog {
    /// Starts the thread; it owns `session` until [`Watchdog::finish`].
    pub fn start(
        session: Box<dyn Session>,
        config: Config,
        shared: Arc<Shared>,
    ) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || watch(session, &config, &stopped, &shared))?;
        Ok(Watchdog { stop, handle })
    }

    /// Stops the thread (COMMAND has ended) and returns the session and whether
    /// the hold was lost.
    pub fn finish(self) -> Option<(Box<dyn Session>, Option<Lost>)> {
        let _ = self.stop.send(());
        self.handle.join().ok()
    }
}

fn watch(
    mut session: Box<dyn Session>,
    config: &Config,
    stopped: &mpsc::Receiver<()>,
    shared: &Shared,
) -> (Box<dyn Session>, Option<Lost>) {
    let ttl = config.lease.ttl();
    let margin = drift(ttl);
    let period = ttl / 3;
    let retry = (ttl / 10).clamp(Duration::from_millis(10), Duration::from_millis(500));
    let mut confirmed = config.acquired_at;
    let mut next = confirmed + period;
    let mut failing: Option<String> = None;
    let (lost, lost_at) = loop {
        let deadline = confirmed + ttl.saturating_sub(margin);
        shared.set_lease_until(deadline);
        let wake = match config.lease {
            Lease::Renewed(_) => next.min(deadline),
            Lease::Fixed(_) => deadline,
        };
        match stopped.recv_timeout(wake.saturating_duration_since(Instant::now())) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return (session, None),
            Err(RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        if now >= deadline {
            let lost = match (config.lease, failing) {
                (Lease::Fixed(lease), _) => Lost::LeaseEnded(lease),
                (Lease::Renewed(_), cause) => {
                    Lost::Unconfirmed(cause.unwrap_or_else(|| "no renewal confirmed".into()))
                }
            };
            break (lost, deadline);
        }
        match renew_all(session.as_mut(), config, ttl, deadline - now) {
            Ok(None) => {
                confirmed = now;
                next = now + period;
                if failing.take().is_some() {
                    report::error(&format!("{}: renewal confirmed again", config.display));
                }
                report::verbose(|| {
                    format!(
                        "{}: renewed in {:.1} ms",
                        config.display,
                        now.elapsed().as_secs_f64() * 1000.0
                    )
                });
            }
            // Each confirmed renewal proves the hold was never broken before it
            // was sent (nothing but our own acquire writes our token).
            Ok(Some(name)) => break (Lost::NotOurs(name), confirmed),
            Err(err) => {
                if failing.is_none() {
                    report::error(&format!(
                        "{}: renewal failed ({}); retrying for {} before stopping COMMAND",
                        config.display,
                        err,
                        humantime::format_duration(round_ms(
                            deadline.saturating_duration_since(Instant::now())
                        ))
                    ));
                }
                failing = Some(err);
                next = Instant::now() + retry;
            }
        }
    };
    if !shared.mark_lost(lost_at) {
        // COMMAND ended while the hold was still proven: nothing was lost.
        return (session, None);
    }
    stop_command(shared, config.kill_after, stopped);
    (session, Some(lost))
}

/// Renews every hold; a round is confirmed only when each renewal is. Returns
/// the name of a lock that is no longer ours, or the first failure's cause.
fn renew_all(
    session: &mut dyn Session,
    config: &Config,
    ttl: Duration,
    limit: Duration,
) -> Result<Option<String>, String> {
    let round = Instant::now();
    for (keys, token) in &config.holds {
        let left = limit.saturating_sub(round.elapsed());
        match session.renew(keys, token, ttl, left) {
            Ok(true) => {}
            Ok(false) => return Ok(Some(keys.name.clone())),
            Err(err) => return Err(err.to_string()),
        }
    }
    Ok(None)
}

/// SIGTERM to COMMAND's group (with SIGCONT, in case it was stopped), then
/// SIGKILL if it has not exited after `kill_after`.
fn stop_command(shared: &Shared, kill_after: Duration, stopped: &mpsc::Receiver<()>) {
    shared.signal_group(libc::SIGTERM);
    shared.signal_group(libc::SIGCONT);
    if let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(kill_after) {
        shared.signal_group(libc::SIGKILL);
    }
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_is_one_percent_plus_two_ms() {
        assert_eq!(drift(Duration::from_secs(30)), Duration::from_millis(302));
        assert_eq!(drift(Duration::from_secs(1)), Duration::from_millis(12));
    }
}
