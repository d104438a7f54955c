//! Reading a lock across the quorum: the servers' views merged, each lock
//! listed once, the history of the first server that answers.

use std::time::Duration;

use super::{PER_SERVER, RedlockSession};
use crate::backend::{Inspect, LockStatus};
use crate::error::Result;
use crate::lock::event::Event;
use crate::lock::name::LockId;

impl Inspect for RedlockSession {
    fn status(&mut self, lock: &LockId) -> Result<LockStatus> {
        // A hold counts only on a quorum: every server is asked, and the
        // holders shown are those a quorum agrees on.
        let mut views = Vec::new();
        let mut failures = Vec::new();
        for result in self.each(|s| s.status(lock)) {
            match result {
                Ok(view) => views.push(view),
                Err(err) => failures.push(err),
            }
        }
        if views.len() < self.quorum() {
            return Err(self.no_quorum(Some(&lock.name), views.len(), &failures));
        }
        Ok(crate::backend::quorum_status::merge(
            &views,
            self.servers.len(),
            self.quorum(),
        ))
    }

    fn list(&mut self, prefix: &str, pattern: &str) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut failures = Vec::new();
        let mut answered = 0;
        for result in self.each(|s| s.list(prefix, pattern)) {
            match result {
                Ok(found) => {
                    answered += 1;
                    names.extend(found);
                }
                Err(err) => failures.push(err),
            }
        }
        if answered == 0 {
            return Err(self.no_quorum(None, 0, &failures));
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Read from the first server that answers (the servers' histories may
    /// differ by the events written while one was unreachable).
    fn history(&mut self, lock: &LockId, limit: usize) -> Result<Vec<Event>> {
        let mut failures = Vec::new();
        for slot in 0..self.sessions.len() {
            if self.sessions[slot].is_none() {
                self.sessions[slot] = self.servers[slot].connect_within(PER_SERVER).ok();
            }
            if let Some(session) = self.sessions[slot].as_mut() {
                match session.history(lock, limit) {
                    Ok(events) => return Ok(events),
                    Err(err) => failures.push(err),
                }
            }
        }
        Err(self.no_quorum(Some(&lock.name), 0, &failures))
    }

    /// The longest wait any server sees (a waiter registers on every server).
    fn longest_wait(&mut self, lock: &LockId) -> Result<Option<Duration>> {
        let results = self.each(|s| s.longest_wait(lock));
        Ok(results.into_iter().filter_map(|r| r.ok().flatten()).max())
    }
}
