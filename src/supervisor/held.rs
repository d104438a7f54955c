//! A lock of the run once it is held: which lock, and the hold on it (its
//! token and fence). The run carries one list of these from the acquisition
//! to the release.

use std::time::{Duration, Instant};

use super::ending::Ended;
use super::record::Recorder;
use crate::backend::Hold;
use crate::error::Error;
use crate::lock::clock::Stamp;
use crate::lock::name::LockId;
use crate::lock::token::{Fence, Token};

/// One lock the run holds.
#[derive(Debug, Clone)]
pub struct HeldLock {
    /// The lock (its name and keys).
    pub id: LockId,
    /// The hold on it.
    pub hold: Hold,
}

impl HeldLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.id.name
    }

    /// The owner token that holds it.
    pub fn token(&self) -> &Token {
        &self.hold.token
    }

    /// The hold's fencing token.
    pub fn fence(&self) -> Fence {
        self.hold.fence
    }

    /// `locks` (in the order they were asked for) with the holds the
    /// acquisition returned for them, in the same order.
    pub fn pair(locks: &[LockId], holds: Vec<Hold>) -> Vec<HeldLock> {
        locks
            .iter()
            .cloned()
            .zip(holds)
            .map(|(id, hold)| HeldLock { id, hold })
            .collect()
    }
}

/// What the run holds, from the acquisition to the release.
pub(super) struct Holding {
    /// Each lock, in the order acquired.
    pub(super) locks: Vec<HeldLock>,
    /// When the request that took them was sent (the lease counts from it).
    pub(super) since: Stamp,
    /// When they were acquired.
    pub(super) acquired: Instant,
    /// How long the wait took.
    pub(super) waited: Duration,
    /// The run's history.
    pub(super) recorder: Recorder,
}

impl Holding {
    /// The run ends on `err` with the locks held and COMMAND not run.
    pub(super) fn ended(self, err: Error) -> Box<Ended> {
        Ended::early(
            err,
            Some(self.recorder),
            Some(self.waited),
            Some(self.acquired),
        )
    }
}
