//! How a run ended, decided where it ended, and what the run reports with
//! it: the figures `--metrics-file` writes and the events the history gets.

use std::time::{Duration, Instant};

use super::record::Recorder;
use crate::error::{Cause, Error, Result};
use crate::exit::Exit;

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

/// What a run did, returned by the state it ended in.
pub struct Ended {
    /// The exit status, or the error that ends the run.
    pub result: Result<Exit>,
    /// Why it ended.
    pub ending: Ending,
    /// How long it waited (until acquired, or until it gave up); None when
    /// it never waited.
    pub waited: Option<Duration>,
    /// How long the lock was held, until COMMAND's group was gone; None
    /// when COMMAND did not run.
    pub held: Option<Duration>,
    /// The run's history, once it began waiting.
    pub recorder: Option<Recorder>,
    /// After a loss: by when what is left to do (the release, the history)
    /// must be done, answered or not.
    pub wind_up_by: Option<Instant>,
}

impl Ended {
    /// A run that ended on `err` before COMMAND ran.
    pub(super) fn early(
        err: Error,
        recorder: Option<Recorder>,
        waited: Option<Duration>,
        acquired: Option<Instant>,
    ) -> Box<Ended> {
        Box::new(Ended {
            ending: Ending::of_error(&err, acquired),
            result: Err(err),
            waited,
            held: None,
            recorder,
            wind_up_by: None,
        })
    }

    /// The exit status the run gives.
    pub fn exit(&self) -> Exit {
        match &self.result {
            Ok(exit) => *exit,
            Err(err) => err.exit(),
        }
    }
}
