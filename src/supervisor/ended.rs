//! What a run did, returned by the state it ended in, and what it holds on
//! the way there: the figures `--metrics-file` writes and the recorder that
//! writes the history.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::holding::ending::Ending;
use crate::holding::held::HeldLock;
use crate::holding::record::Recorder;
use crate::lock::clock::Stamp;

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
    /// The line said after the release of a run whose lease held, when one
    /// was (`--max-hold`, COMMAND's failure): what a monitor is told.
    pub closing: Option<String>,
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
            closing: None,
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
