//! `--ping`: the monitor hears `start` once the lock is held and COMMAND
//! started, and, after the release, the run's exit status, or `log` for a run
//! skipped because the lock was taken; all under one run id.

use std::sync::Arc;

use super::{Event, Sink};
use crate::ping::{FINISH_LIMIT, Pinger, RunId};

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
                // short bound, and the pings it did not take are said.
                let unsent = self.pinger.finish(FINISH_LIMIT).unfinished;
                if unsent > 0 {
                    crate::report::verbose(|| {
                        format!(
                            "ping to {}: {unsent} ping(s) not done within {} of the run's end; \
                             the run did not wait for them",
                            self.pinger.display(),
                            humantime::format_duration(FINISH_LIMIT)
                        )
                    });
                }
            }
            _ => {}
        }
    }
}
