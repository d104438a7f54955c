//! `--ping`: the monitor hears `start` once the lock is held and COMMAND
//! started, and, after the release, the run's exit status, or `log` for a run
//! skipped because the lock was taken; all under one run id.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Event, Sink};
use crate::ping::{FINISH_LIMIT, Pinger, RunId};

/// After a loss, what the pings may take past the run's wind-up: its exit
/// is due `--kill-after` + 3 s after SIGTERM, and the wind-up ends 2.5 s
/// after COMMAND's group was seen gone (by SIGKILL at the latest).
const AFTER_LOSS_SLACK: Duration = Duration::from_millis(400);

/// The monitor of one run.
pub(super) struct Ping {
    pinger: Arc<Pinger>,
    rid: RunId,
}

impl Ping {
    pub(super) fn new(pinger: Arc<Pinger>) -> Ping {
        Ping {
            pinger,
            rid: RunId::new(),
        }
    }
}

impl Sink for Ping {
    fn tell(&self, event: &Event<'_>) {
        match event {
            // Queued to the pinger's own thread: COMMAND runs already and
            // nothing here waits for the monitor.
            Event::Held(_) => self.pinger.start(&self.rid),
            Event::Ended(ended) => {
                let cause = ended.cause.unwrap_or("");
                if ended.skipped {
                    self.pinger.log(&self.rid, cause);
                } else {
                    self.pinger.exit(ended.exit.code(), &self.rid, cause);
                }
                // The last event: the lock is released; the monitor gets a
                // short bound (after a loss, no more than the run's ending
                // has left), and the pings it did not take are said.
                let bound = match ended.by {
                    Some(by) => (by + AFTER_LOSS_SLACK)
                        .saturating_duration_since(Instant::now())
                        .min(FINISH_LIMIT),
                    None => FINISH_LIMIT,
                };
                let unsent = self.pinger.finish(bound).unfinished;
                if unsent > 0 {
                    crate::report::verbose(|| {
                        let why = match bound.is_zero() {
                            true => "no time was left after the loss".to_owned(),
                            false => format!(
                                "the monitor took more than the {} the run's end waits",
                                crate::lock::lease::tenths(bound)
                            ),
                        };
                        format!(
                            "ping to {}: {unsent} ping(s) not sent: {why}",
                            self.pinger.display()
                        )
                    });
                }
            }
            _ => {}
        }
    }
}
