//! A lock of the run once it is held: which lock, and the hold on it (its
//! token and fence). The run carries one list of these from the acquisition
//! to the release.

use crate::backend::Hold;
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
