//! The queues a caller is registered on as a waiter, left when it stops
//! waiting for them.

use crate::backend::Session;

use super::Wanted;

/// The locks a caller is registered as a waiter on (by index into `locks`).
#[derive(Default)]
pub(super) struct Registrations(Vec<usize>);

impl Registrations {
    pub(super) fn add(&mut self, i: usize) {
        if !self.0.contains(&i) {
            self.0.push(i);
        }
    }

    pub(super) fn remove(&mut self, i: usize) {
        self.0.retain(|&r| r != i);
    }

    /// Leaves every queue but `keep` (best effort: a failure only delays
    /// cleanup until the registration expires).
    pub(super) fn leave_all_but(
        &mut self,
        keep: Option<usize>,
        session: &mut dyn Session,
        wanted: &Wanted<'_>,
    ) {
        for &i in self.0.iter().filter(|&&i| Some(i) != keep) {
            let _ = session.leave(&wanted.locks[i], wanted.token);
        }
        self.0.retain(|&i| Some(i) == keep);
    }
}
