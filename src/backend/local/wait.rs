//! How a `file:` waiter waits, with no queue to wake it: it watches DIR
//! (inotify) for a holder's or waiter's record leaving and for its own
//! interrupt, tries the lock file itself, and looks again every few
//! milliseconds for what changes silently (a holder killed).

use std::fs;
use std::time::{Duration, Instant};

use super::LocalSession;
use super::files::{self, open, try_flock};
use crate::backend::Wake;
use crate::error::Result;
use crate::lock::name::LockId;
use crate::lock::token::Token;

/// How often a waiter looks whether the lock is free.
pub(super) const POLL: Duration = Duration::from_millis(5);

/// How often a waiter that is woken by changes in DIR asks again anyway (for
/// what changes silently: a semaphore holder or a waiter killed).
pub(super) const RETRY: Duration = Duration::from_millis(50);

impl LocalSession {
    /// Watches DIR from the first wait on (events queue from then on, so none
    /// is missed between a look at the lock and the wait).
    pub(super) fn watch(&mut self) {
        if self.watch.is_none() {
            let mask = libc::IN_DELETE | libc::IN_CREATE | libc::IN_MOVED_TO;
            self.watch = Some(crate::sys::inotify::DirWatch::new(self.paths.dir(), mask));
        }
    }

    /// [`Session::block`](crate::backend::Session::block) on a `file:` lock.
    pub(super) fn block_in_dir(
        &mut self,
        lock: &LockId,
        token: &Token,
        timeout: Duration,
    ) -> Result<Wake> {
        let interrupt = self.record_path(&lock.name, "i", token);
        let until = Instant::now() + timeout;
        self.watch();
        let prefix = format!("{}.", files::stem(&lock.name));
        let mine = format!("i.{}", token.as_str());
        let queued = self.waiting.get(&lock.name).is_some_and(|w| w.queued);
        let exclusive = self.waiting.get(&lock.name).is_some_and(|w| w.exclusive);
        loop {
            if fs::remove_file(&interrupt).is_ok() {
                return Ok(Wake::Interrupted);
            }
            if let Some(waiting) = self.waiting.get_mut(&lock.name) {
                waiting.stamp();
            }
            // Free for an exclusive hold means free for any (but a request
            // the queue turned away waits for the queue to move).
            if !queued
                && let Ok(main) = open(&self.path(&lock.name, "lock"))
                && try_flock(&main, true).unwrap_or(false)
            {
                return Ok(Wake::Released);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Wake::TimedOut);
            }
            let Some(Some(watch)) = &self.watch else {
                std::thread::sleep(left.min(POLL));
                continue;
            };
            // A holder or waiter of this lock gone (a release, a waiter giving
            // up), or an interrupt for us: time to ask again.
            let changed = watch.wait(Some(left.min(POLL))).iter().any(|(mask, file)| {
                let Some(rest) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
                    return false;
                };
                (mask & libc::IN_DELETE != 0 && (rest.starts_with("h.") || rest.starts_with("w.")))
                    || rest == mine
            });
            // (An exclusive request looks at the lock file itself, at the top
            // of the loop: fewer waiters wake for nothing.)
            if changed && !exclusive {
                if fs::remove_file(&interrupt).is_ok() {
                    return Ok(Wake::Interrupted);
                }
                return Ok(Wake::Released);
            }
        }
    }
}
