//! Every view of a wait, fed from one place: the terminal's waiting line,
//! the progress log off a terminal, and the run's announcer (systemd's
//! STATUS=). Each try that finds the lock taken is shown to all three from
//! the same facts; under systemd the progress log says only when the wait
//! starts and when its holder changes, since STATUS= carries the rest.

use std::time::Duration;

use crate::announce::Event;
use crate::backend::HolderInfo;
use crate::run_state::Shared;
use crate::wait::waiting_line::{ProgressLog, WaitLine, waiting_for};

/// Who holds the lock, as far as telling a change goes.
type Seen = Option<(String, String, bool)>;

/// The views of one wait, started at its first taken try.
#[derive(Default)]
pub(super) struct Views {
    started: bool,
    line: Option<WaitLine>,
    progress: Option<ProgressLog>,
    /// The holder the last try saw (None before the first).
    seen: Option<Seen>,
}

impl Views {
    /// What a try that found `lock` taken saw: its `holder` (`unknown` says
    /// what stands in the way when none is known) and our `place` in line.
    pub(super) fn taken(
        &mut self,
        shared: &Shared,
        every: Duration,
        lock: &str,
        holder: Option<&HolderInfo>,
        (place, unknown): (Option<u32>, &'static str),
    ) {
        let announce = shared.announce();
        if !self.started {
            self.started = true;
            self.line = WaitLine::start();
            if self.line.is_none() {
                self.progress = ProgressLog::start(every, announce.notifying());
            }
        }
        let now: Seen = holder.map(|h| (h.host.clone(), h.pid.clone(), h.earlier));
        let changed = self.seen.as_ref() != Some(&now);
        self.seen = Some(now);
        if let Some(line) = &self.line {
            line.waiting(lock, holder, place, unknown);
        }
        let quiet = announce.quiet();
        if self.progress.is_none() && quiet {
            return;
        }
        let status = waiting_for(lock, holder, place, unknown);
        if let Some(progress) = &mut self.progress {
            progress.tick(&status, changed);
        }
        if !quiet {
            announce.tell(&Event::Waiting { status: &status });
        }
    }

    /// The server did not answer a try for `lock`.
    pub(super) fn unreachable(&self, lock: &str) {
        if let Some(line) = &self.line {
            line.unreachable(lock);
        }
    }

    /// The longest to block before trying again, for the views' sake: the
    /// next progress line, and the next answer the announcer needs.
    pub(super) fn block_at_most(&self, shared: &Shared) -> Option<Duration> {
        let due = self.progress.as_ref().and_then(ProgressLog::until_due);
        match (due, shared.announce().answer_every()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The wait ended with `locks` held: a log that showed the wait shows
    /// its end.
    pub(super) fn acquired(&self, locks: &str) {
        if let Some(progress) = &self.progress {
            progress.acquired(locks);
        }
    }
}
