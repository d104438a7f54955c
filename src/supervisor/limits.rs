//! COMMAND's time limits, kept by one timer thread started only when one is
//! asked for:
//!
//! - `run --max-hold`: COMMAND may hold the lock this long, as `timeout(1)`
//!   bounds a command: SIGTERM to its process group when the time is up,
//!   SIGKILL the grace later, and the run exits 124. Unlike `--lease`, the
//!   lease stays short and renewed meanwhile, so a crashed holder still
//!   frees the lock within its ttl.
//! - `run --signal-grace`: COMMAND may take this long to stop after the
//!   first SIGINT, SIGTERM or SIGHUP rlock forwarded to it; then its group
//!   gets SIGKILL, the lock is released and the run exits 128+N, as it would
//!   had COMMAND died of that signal. A CI runner that cancels a job kills
//!   rlock a few seconds after its first signal; this releases before that.
//!
//! A thread of its own: the watchdog may not run at all for a short COMMAND,
//! and the guardian's deadlines belong to the lease (a deadline it fires is a
//! lost lease, exit 70).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::lock::clock::Stamp;
use crate::run_state::Shared;
use crate::sys::signal::Signal;

/// The limits asked for.
#[derive(Clone, Copy)]
pub(super) struct Limits {
    /// `--max-hold`.
    pub(super) max_hold: Option<Duration>,
    /// `--signal-grace`.
    pub(super) signal_grace: Option<Duration>,
    /// SIGTERM to SIGKILL after `--max-hold`.
    pub(super) kill_after: Duration,
}

impl Limits {
    /// How long COMMAND's group may still run under `--signal-grace`, once a
    /// stop signal was forwarded; None when no such bound applies.
    pub(super) fn grace_left(&self, shared: &Shared) -> Option<Duration> {
        let (_, at) = shared.stop_signal()?;
        Some((at + self.signal_grace?).remaining())
    }
}

/// What the timer did to COMMAND.
#[derive(Clone, Copy)]
pub(super) enum Stopped {
    /// Nothing: COMMAND ended within its limits.
    No,
    /// `--max-hold` was reached: SIGTERM went out while COMMAND ran.
    MaxHold,
    /// COMMAND still ran `--signal-grace` after this signal was forwarded,
    /// and was killed.
    SignalGrace(Signal),
}

/// The running timer.
pub(super) struct Timer {
    done: Arc<AtomicBool>,
    wake: mpsc::Sender<()>,
    thread: JoinHandle<Stopped>,
}

/// Why a wait of the timer ended.
enum Woke {
    /// Its time came.
    Due,
    /// A stop signal was forwarded: the deadlines may have changed.
    Nudged,
    /// COMMAND exited.
    Done,
}

impl Timer {
    /// Keeps `limits` for COMMAND, started at `started`. None when none is
    /// asked for, or when the thread cannot be started (said on stderr: the
    /// run goes on without the limits rather than leaving COMMAND
    /// unsupervised mid-start).
    pub(super) fn start(limits: Limits, started: Stamp, shared: &Arc<Shared>) -> Option<Timer> {
        if limits.max_hold.is_none() && limits.signal_grace.is_none() {
            return None;
        }
        let (wake, woken) = mpsc::channel();
        if limits.signal_grace.is_some() {
            shared.tell_stop_signal(wake.clone());
        }
        let done = Arc::new(AtomicBool::new(false));
        let (timer, finished) = (Arc::clone(shared), Arc::clone(&done));
        let thread = std::thread::Builder::new()
            .name("max-hold".into())
            .spawn(move || keep(limits, started, &timer, &woken, &finished));
        match thread {
            Ok(thread) => Some(Timer { done, wake, thread }),
            Err(err) => {
                crate::report::error(&format!(
                    "{}: cannot start the timer of --max-hold and --signal-grace ({err}); \
                     COMMAND runs without them",
                    shared.lock()
                ));
                None
            }
        }
    }

    /// COMMAND exited: stops the timer and says what it did.
    pub(super) fn finish(self) -> Stopped {
        self.done.store(true, Ordering::SeqCst);
        let _ = self.wake.send(());
        self.thread.join().unwrap_or(Stopped::No)
    }
}

/// The timer's thread: waits for the earliest limit, and acts on it.
fn keep(
    limits: Limits,
    started: Stamp,
    shared: &Shared,
    woken: &mpsc::Receiver<()>,
    done: &AtomicBool,
) -> Stopped {
    let term_at = limits.max_hold.map(|limit| started + limit);
    loop {
        let grace_end = limits.signal_grace.and_then(|grace| {
            shared
                .stop_signal()
                .map(|(signal, at)| (signal, at + grace))
        });
        let next = [term_at, grace_end.map(|(_, at)| at)]
            .into_iter()
            .flatten()
            .min();
        match wait_until(woken, done, next) {
            Woke::Done => return Stopped::No,
            Woke::Nudged => continue,
            Woke::Due => {}
        }
        if let Some((signal, at)) = grace_end
            && at.passed()
        {
            return kill_after_grace(limits, signal, shared);
        }
        if let Some(limit) = limits.max_hold
            && term_at.is_some_and(Stamp::passed)
        {
            return stop_at_max_hold(limit, limits.kill_after, shared, woken, done);
        }
    }
}

/// `--signal-grace` is over: SIGKILL to COMMAND's group, if COMMAND still runs.
fn kill_after_grace(limits: Limits, signal: Signal, shared: &Shared) -> Stopped {
    if !shared.signal_group(Signal::KILL) {
        return Stopped::No;
    }
    crate::report::error(&format!(
        "{}: COMMAND still ran {} after {signal}; killed it (--signal-grace)",
        shared.lock(),
        humantime::format_duration(limits.signal_grace.unwrap_or_default())
    ));
    Stopped::SignalGrace(signal)
}

/// `--max-hold` is reached: SIGTERM, then SIGKILL `grace` later.
fn stop_at_max_hold(
    limit: Duration,
    grace: Duration,
    shared: &Shared,
    woken: &mpsc::Receiver<()>,
    done: &AtomicBool,
) -> Stopped {
    // Not sent when COMMAND already exited: then it ended in time.
    if !shared.signal_group(Signal::TERM) {
        return Stopped::No;
    }
    shared.signal_group(Signal::CONT);
    crate::report::verbose(|| {
        format!(
            "{}: --max-hold {} reached: SIGTERM sent to COMMAND's process group",
            shared.lock(),
            humantime::format_duration(limit)
        )
    });
    let kill_at = Stamp::now() + grace;
    loop {
        match wait_until(woken, done, Some(kill_at)) {
            Woke::Nudged => {}
            Woke::Done => return Stopped::MaxHold,
            Woke::Due => {
                shared.signal_group(Signal::KILL);
                return Stopped::MaxHold;
            }
        }
    }
}

/// Sleeps until `until` (None: until woken).
fn wait_until(woken: &mpsc::Receiver<()>, done: &AtomicBool, until: Option<Stamp>) -> Woke {
    loop {
        if done.load(Ordering::SeqCst) {
            return Woke::Done;
        }
        let got = match until {
            Some(until) if until.passed() => return Woke::Due,
            Some(until) => woken.recv_timeout(until.remaining()),
            None => woken.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match got {
            Ok(()) if done.load(Ordering::SeqCst) => return Woke::Done,
            Ok(()) => return Woke::Nudged,
            Err(RecvTimeoutError::Disconnected) => return Woke::Done,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}
