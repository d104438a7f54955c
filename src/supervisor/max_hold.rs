//! `run --max-hold`: COMMAND may hold the lock this long, as `timeout(1)`
//! bounds a command: SIGTERM to its process group when the time is up,
//! SIGKILL the grace later, and the run exits 124.
//!
//! Unlike `--lease`, the lease stays short and renewed meanwhile, so a
//! crashed holder still frees the lock within its ttl. A thread of its own,
//! started only with `--max-hold`: the watchdog may not run at all for a
//! short COMMAND, and the guardian's deadlines belong to the lease (a
//! deadline it fires is a lost lease, exit 70).

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::lock::clock::Stamp;
use crate::run_state::Shared;
use crate::sys::signal::Signal;

/// The running timer.
pub(super) struct MaxHold {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<bool>,
}

impl MaxHold {
    /// Starts counting `limit` from `started` (COMMAND's start). None when
    /// the thread cannot be started (said on stderr: the run goes on without
    /// the bound rather than leaving COMMAND unsupervised mid-start).
    pub(super) fn start(
        limit: Duration,
        grace: Duration,
        started: Stamp,
        shared: &Arc<Shared>,
    ) -> Option<MaxHold> {
        let (stop, stopped) = mpsc::channel();
        let timer = Arc::clone(shared);
        let thread = std::thread::Builder::new()
            .name("max-hold".into())
            .spawn(move || {
                let shared = timer;
                let term_at = started + limit;
                if !wait_until(&stopped, term_at) {
                    return false;
                }
                // Not sent when COMMAND already exited: then it ended in time.
                if !shared.signal_group(Signal::TERM) {
                    return false;
                }
                shared.signal_group(Signal::CONT);
                crate::report::verbose(|| {
                    format!(
                        "{}: --max-hold {} reached: SIGTERM sent to COMMAND's process group",
                        shared.lock(),
                        humantime::format_duration(limit)
                    )
                });
                if wait_until(&stopped, Stamp::now() + grace) {
                    shared.signal_group(Signal::KILL);
                }
                true
            });
        match thread {
            Ok(thread) => Some(MaxHold { stop, thread }),
            Err(err) => {
                crate::report::error(&format!(
                    "{}: cannot start the --max-hold timer ({err}); COMMAND runs without it",
                    shared.lock()
                ));
                None
            }
        }
    }

    /// COMMAND exited: stops the timer. True when the bound was reached
    /// (SIGTERM went out while COMMAND ran).
    pub(super) fn finish(self) -> bool {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or(false)
    }
}

/// Sleeps until `until`; false when told to stop first.
fn wait_until(stopped: &mpsc::Receiver<()>, until: Stamp) -> bool {
    loop {
        if until.passed() {
            return true;
        }
        match stopped.recv_timeout(until.remaining()) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return false,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}
