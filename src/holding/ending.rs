//! How a run ended, decided where it ended: what the history records and
//! `--metrics-file` says of it.

use std::time::{Duration, Instant};

use crate::error::{Cause, Error};

/// Why the run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Failed for a reason of rlock's or the server's (COMMAND not found, the
    /// server unavailable, no watchdog…), with nothing of the lock's own to say.
    Failed,
    /// Not acquired: the lock was taken, or `--wait` ran out.
    Busy,
    /// A signal ended the wait; nothing was held.
    Interrupted,
    /// A signal ended the run while the lock was held.
    InterruptedHolding,
    /// The hold could have lapsed under the run: `line` says why; it was held
    /// for `held`.
    Lost {
        /// The run's line about the loss (the history's note).
        line: String,
        /// How long the lock was held.
        held: Duration,
    },
    /// COMMAND ran past `--max-hold` and was stopped.
    MaxHold,
    /// COMMAND exited with this status, under a lease kept throughout.
    Exited(u8),
}

impl Ending {
    /// The ending an error gives, at a point where the lock is `held` or
    /// not (for `held`, since `acquired`).
    pub fn of_error(err: &Error, acquired: Option<Instant>) -> Ending {
        match (err.cause(), acquired) {
            (Cause::NotAcquired { .. }, _) => Ending::Busy,
            (Cause::Interrupted(_), None) => Ending::Interrupted,
            (Cause::Interrupted(_), Some(_)) => Ending::InterruptedHolding,
            (Cause::LeaseLapsedBeforeStart, at) => Ending::Lost {
                line: err.to_string(),
                held: at.map_or(Duration::ZERO, |at| at.elapsed()),
            },
            _ => Ending::Failed,
        }
    }

    /// The `result` label of `--metrics-file`.
    pub fn word(&self) -> &'static str {
        match self {
            Ending::Failed => "error",
            Ending::Busy => "busy",
            Ending::Interrupted | Ending::InterruptedHolding => "interrupted",
            Ending::Lost { .. } => "lost",
            Ending::MaxHold => "max-hold",
            Ending::Exited(0) => "success",
            Ending::Exited(_) => "failure",
        }
    }
}
