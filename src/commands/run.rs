//! `rlock run`: wait for the lock, run COMMAND while the watchdog keeps the
//! lease, release when COMMAND ends, and exit with COMMAND's status.

use std::time::Instant;

use crate::announce::Announcer;
use crate::config::{Config, RunSpec};
use crate::error::Result;
use crate::exit::Exit;
use crate::holding::AFTER_LOSS_STEP;
use crate::supervisor::Ended;

/// Runs `rlock run`: acquire, spawn COMMAND, wait for it (and what it left
/// in its group), release, in that order (see [`crate::supervisor`]); then
/// writes the `--metrics-file` and the events only the run's end knows,
/// whatever the end, and tells the run's end to its announcer last.
pub fn run(config: &Config, spec: &RunSpec) -> Result<Exit> {
    let announcer = Announcer::new(&spec.announce);
    let ended = crate::supervisor::run(config, spec, &announcer);
    if ended.exit() != Exit::Usage {
        if let Some(path) = &spec.metrics_file {
            crate::commands::metrics::write_run_file(path, &spec.names, &ended);
        }
        record_end(config, spec, &ended);
    }
    crate::supervisor::announce_end(&announcer, &ended);
    ended.result
}

/// Writes the events the run's recorder says only its end knows (each on a
/// connection of its own); after a loss, within what is left of its short
/// budget.
fn record_end(config: &Config, spec: &RunSpec, ended: &Ended) {
    let Some(recorder) = &ended.recorder else {
        return;
    };
    let events = recorder.at_end(&ended.ending, ended.exit(), ended.waited);
    if events.is_empty() {
        return;
    }
    let backend = match ended.wind_up_by {
        Some(by) => {
            let left = by.saturating_duration_since(Instant::now());
            if left.is_zero() {
                crate::report::verbose(|| {
                    "history not written: no time left after the loss".to_owned()
                });
                return;
            }
            // Connecting and writing each get half of it at most.
            config.backend_within(spec.lock.dialect(), (left / 2).min(AFTER_LOSS_STEP))
        }
        None => config.backend(spec.lock.dialect()),
    };
    let Ok(backend) = backend else {
        return;
    };
    for (lock, event) in events {
        if ended.wind_up_by.is_some_and(|by| Instant::now() >= by) {
            break;
        }
        crate::commands::history::record_after(backend.as_ref(), &[lock], recorder.cap(), &event);
    }
}
