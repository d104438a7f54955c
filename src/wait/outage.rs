//! Riding out a server that is restarting, loading or failing over while a
//! run waits for the lock.
//!
//! A run that may wait for the lock also waits for its server: a refused or
//! dropped connection, a stalled reply, `LOADING`, `MASTERDOWN` or `READONLY`
//! are retried with a growing pause (up to [`MAX_PAUSE`]) instead of failing
//! at once. With `--wait` the outage may last the rest of the wait; without
//! it, `--unreachable-wait` (default 60 s), so cron jobs do not pile up
//! forever behind a dead server. `--no-wait` gives up at once: it asked not to
//! wait for anything, the server included.

use std::time::{Duration, Instant};

use crate::announce::Event;
use crate::error::{Cause, Error, Result};
use crate::report;
use crate::run_state::Shared;

/// First pause before trying an unreachable server again.
const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// Longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_secs(1);
/// How often a pause looks at the interrupt flag.
const SLICE: Duration = Duration::from_millis(20);

/// How long a waiting run may wait for an unreachable server.
#[derive(Clone, Copy, Debug)]
pub struct Patience {
    /// When the run's own `--wait` ends; None: it waits forever for the lock.
    pub wait_ends: Option<Instant>,
    /// `--no-wait`: never wait, for the lock or the server.
    pub no_wait: bool,
    /// Without `--wait`: the longest outage waited out (`--unreachable-wait`).
    pub bound: Duration,
}

/// One stretch of time during which the server could not be reached.
pub struct Outage {
    patience: Patience,
    since: Option<Instant>,
    pause: Duration,
    /// The last cause reported.
    said: Option<String>,
}

impl Outage {
    pub fn new(patience: Patience) -> Self {
        Outage {
            patience,
            since: None,
            pause: FIRST_PAUSE,
            said: None,
        }
    }

    /// Decides what `err` means for a waiting run working on `lock`: Ok after
    /// a pause when the server may come back in time (the caller tries
    /// again), or the error to give up with.
    pub fn ride_out(&mut self, err: Error, lock: &str, shared: &Shared) -> Result<()> {
        let never = self.patience.no_wait
            || (self.patience.wait_ends.is_none() && self.patience.bound.is_zero());
        if !err.is_transient() || never {
            return Err(err.settled());
        }
        let err = err.in_lock(lock);
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        // None: `--unreachable-wait forever`.
        let give_up = match self.patience.wait_ends {
            Some(end) => Some(end),
            None => since.checked_add(self.patience.bound),
        };
        if give_up.is_some_and(|at| now >= at) {
            return Err(self.gave_up(err, now - since));
        }
        shared.announce().tell(&Event::Unreachable {
            lock,
            for_: now - since,
        });
        // Said when the outage starts and when its cause changes (refused,
        // then loading), not at every try.
        let said = err.to_string();
        if self.said.as_deref() != Some(said.as_str()) {
            let until = match (self.patience.wait_ends, give_up) {
                (Some(_), _) => "for the rest of --wait".to_owned(),
                (None, None) => "as long as it takes (--unreachable-wait forever)".to_owned(),
                (None, Some(_)) => format!(
                    "up to {} (--unreachable-wait)",
                    humantime::format_duration(self.patience.bound)
                ),
            };
            report::error(&format!("{said}; waiting for it {until}"));
            self.said = Some(said);
        }
        let pause = give_up.map_or(self.pause, |at| self.pause.min(at - now));
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        let end = now + pause;
        while Instant::now() < end {
            if let Some(signal) = shared.interrupted() {
                return Err(Error::from(Cause::Interrupted(signal)).in_lock(lock));
            }
            std::thread::sleep(SLICE.min(end.saturating_duration_since(Instant::now())));
        }
        Ok(())
    }

    /// The server answered: an outage, if there was one, is over.
    pub fn over(&mut self, lock: &str, server: &str) {
        if let Some(since) = self.since.take() {
            report::error(&format!(
                "{lock}: server {server} is back after {:.1}s",
                since.elapsed().as_secs_f64()
            ));
        }
        self.pause = FIRST_PAUSE;
        self.said = None;
    }

    fn gave_up(&self, err: Error, lasted: Duration) -> Error {
        // Met only as the wait ran out: there was no outage to speak of.
        if lasted < Duration::from_millis(100) {
            return err.settled();
        }
        let lasted = format!("{:.1}s", lasted.as_secs_f64());
        err.settled()
            .with_more(&format!("; unreachable for the last {lasted}"))
    }
}
