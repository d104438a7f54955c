//! The signals rlock catches and the state it shares with `run`.
//!
//! rlock catches HUP, INT, QUIT, TERM, USR1 and USR2. What a signal does
//! depends on the phase: before COMMAND starts it interrupts the wait (exit
//! 128+N, nothing left behind); while COMMAND runs it is forwarded to COMMAND,
//! once; after COMMAND ended it is ignored while rlock releases the lock.
//!
//! The caught signals are blocked in every thread and taken where rlock looks
//! for them, each exactly once: by the main thread between requests
//! ([`Shared::interrupted`]); by its wait for a short COMMAND (a signalfd);
//! and by a signal thread started only when rlock blocks (a wait for a
//! release, which the thread wakes) or COMMAND outlives its first renewal.
//! A run that does not wait and whose COMMAND ends soon never starts it.
//!
//! COMMAND runs in its own process group, and on a terminal that group is the
//! foreground one (tini's model), so keys typed at the terminal reach COMMAND
//! directly and never rlock: forwarding what rlock receives cannot double them.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::announce::Announcer;
use crate::backend::Backend;
use crate::lock::clock::Stamp;
use crate::lock::name::LockId;
use crate::lock::token::Token;
use crate::sys::guardian::Deadlines;
use crate::sys::process::Pid;
use crate::sys::signal::Signal;
use crate::sys::signals as dispositions;

/// Whom to wake when a signal interrupts a blocked waiter.
pub struct Blocked {
    /// Where the waiter blocks.
    pub backend: Arc<dyn Backend>,
    /// The lock it waits for.
    pub keys: LockId,
    /// Its waiter token (names its private interrupt list).
    pub token: Token,
}

/// What rlock is doing, as far as signals are concerned.
pub enum Phase {
    /// Attempting to acquire (a request may be in flight).
    Acquiring,
    /// Blocked waiting for a release.
    Blocked(Box<Blocked>),
    /// COMMAND runs as process `pid` (also its process group id).
    Running {
        /// COMMAND's pid and pgid.
        pid: Pid,
        /// Set once COMMAND has exited, before it is reaped, so no signal is ever
        /// sent to a recycled pid.
        exited: bool,
    },
    /// COMMAND has ended; the lock is being released.
    Finished,
}

/// State shared by `run`, the signal thread and the watchdog.
pub struct Shared {
    lock: String,
    phase: Mutex<Phase>,
    interrupted: AtomicI32,
    /// The lease's deadlines, once the lock is held.
    deadlines: OnceLock<Deadlines>,
    /// The latest any timed wait of rlock's woke up past its time, in ns:
    /// how a suspension of rlock (SIGSTOP, a frozen cgroup) shows.
    late: AtomicU64,
    /// Set once the signal thread runs.
    watching: OnceLock<()>,
    /// The first SIGINT, SIGTERM or SIGHUP forwarded to COMMAND, and when:
    /// `--signal-grace` counts from it, and the run's closing line names it.
    stop_signal: OnceLock<(Signal, Stamp)>,
    /// Told when [`Shared::stop_signal`] is set (the timer of COMMAND's
    /// limits, when one runs).
    on_stop_signal: Mutex<Option<Sender<()>>>,
    /// Whom the run's events are told, from any of its threads.
    announce: Arc<Announcer>,
    /// Whether rlock's caught signals are looked for: not in a program
    /// using the library, whose signals are its own.
    signals: bool,
}

impl Shared {
    /// Starts in [`Phase::Acquiring`], announcing nothing.
    pub fn new(lock: &str) -> Arc<Self> {
        Shared::announcing(lock, Announcer::none())
    }

    /// Starts in [`Phase::Acquiring`]; the run's events go to `announce`.
    pub fn announcing(lock: &str, announce: Arc<Announcer>) -> Arc<Self> {
        Arc::new(Shared {
            lock: lock.to_owned(),
            phase: Mutex::new(Phase::Acquiring),
            interrupted: AtomicI32::new(0),
            deadlines: OnceLock::new(),
            late: AtomicU64::new(0),
            watching: OnceLock::new(),
            stop_signal: OnceLock::new(),
            on_stop_signal: Mutex::new(None),
            announce,
            signals: true,
        })
    }

    /// For a program using the library: starts in [`Phase::Acquiring`],
    /// announces nothing, and never takes, waits for or acts on a signal
    /// (the program's signals are its own: no signal thread, no
    /// sigtimedwait, dispositions and masks left as they are).
    pub fn without_signals(lock: &str) -> Arc<Self> {
        let mut shared = Shared::new(lock);
        if let Some(own) = Arc::get_mut(&mut shared) {
            own.signals = false;
        }
        shared
    }

    /// Whom the run's events are told.
    pub fn announce(&self) -> &Announcer {
        &self.announce
    }

    /// Starts the signal thread unless it runs already: call before blocking
    /// for long, where only a thread can act on a signal at once (wake a
    /// blocked waiter, forward to a COMMAND rlock waits for).
    pub fn watch_signals(self: &Arc<Self>) -> crate::error::Result<()> {
        if !self.signals || self.watching.get().is_some() {
            return Ok(());
        }
        let shared = Arc::clone(self);
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                loop {
                    shared.on_signal(dispositions::wait_caught());
                }
            })
            .map_err(|e| {
                crate::error::Error::internal(format!("cannot start the signal thread: {e}"))
            })?;
        let _ = self.watching.set(());
        Ok(())
    }

    /// Hands over the deadlines of the lease just acquired.
    pub fn set_deadlines(&self, deadlines: Deadlines) {
        let _ = self.deadlines.set(deadlines);
    }

    /// True while the lease is proven (or not yet tracked).
    pub fn lease_valid(&self) -> bool {
        self.deadlines.get().is_none_or(|d| d.valid())
    }

    /// True once COMMAND was told to stop because the hold is lost: from now
    /// on COMMAND may not start, and what runs in its group is stopped.
    pub fn lost(&self) -> bool {
        self.deadlines.get().is_some_and(|d| d.fired())
    }

    /// Notes that a wait meant to end at `planned` ended now.
    pub fn note_wake(&self, planned: Stamp) {
        let late = u64::try_from(Stamp::now().since(planned).as_nanos()).unwrap_or(u64::MAX);
        self.late.fetch_max(late, Ordering::SeqCst);
    }

    /// The longest any timed wait overran.
    pub fn late(&self) -> Duration {
        Duration::from_nanos(self.late.load(Ordering::SeqCst))
    }

    /// Records that COMMAND itself exited (before it is reaped, so no one
    /// signals a recycled pid).
    pub fn mark_exited(&self) {
        if let Phase::Running { exited, .. } = &mut *self.phase() {
            *exited = true;
        }
    }

    /// The first SIGINT, SIGTERM or SIGHUP forwarded to COMMAND, and when
    /// it was forwarded.
    pub fn stop_signal(&self) -> Option<(Signal, Stamp)> {
        self.stop_signal.get().copied()
    }

    /// Has `tell` sent a wake-up when the first stop signal is forwarded
    /// (at most once; check [`Shared::stop_signal`] after registering).
    pub fn tell_stop_signal(&self, tell: Sender<()>) {
        *self
            .on_stop_signal
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(tell);
    }

    /// The lock's name, for messages.
    pub fn lock(&self) -> &str {
        &self.lock
    }

    /// The first signal that interrupted the wait, if any. Takes the
    /// signals pending: call from the thread that acquires, which is not
    /// running COMMAND yet (they interrupt, as in [`Phase::Acquiring`]); the
    /// phase may be locked meanwhile.
    pub fn interrupted(&self) -> Option<Signal> {
        while self.signals
            && let Some(signal) = dispositions::take_pending()
        {
            self.note_interrupt(signal);
        }
        match self.interrupted.load(Ordering::SeqCst) {
            0 => None,
            n => Some(Signal::from_number(n)),
        }
    }

    /// Locks the phase; a poisoned lock still yields the state (no panic path).
    pub fn phase(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves to `phase`.
    pub fn set(&self, phase: Phase) {
        *self.phase() = phase;
    }

    /// Sends `signal` to COMMAND's whole process group if COMMAND has not
    /// exited; false when it had (nothing sent).
    pub fn signal_group(&self, signal: Signal) -> bool {
        if let Phase::Running { pid, exited: false } = *self.phase() {
            // COMMAND has not been reaped: its group cannot have been reused.
            crate::sys::process::signal_group(pid, signal);
            return true;
        }
        false
    }

    /// Acts on `signal` as the phase says, for a caller that took it (the
    /// wait for a short COMMAND, from its signalfd) or stands in for one
    /// (the `--while-pid` process is gone: SIGHUP).
    pub fn interrupt(&self, signal: Signal) {
        self.on_signal(signal);
    }

    fn note_interrupt(&self, signal: Signal) {
        let _ = self.interrupted.compare_exchange(
            0,
            signal.number(),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }

    fn on_signal(&self, signal: Signal) {
        let mut phase = self.phase();
        match &*phase {
            Phase::Running { pid, exited: false } => {
                // Not reaped while the phase is locked: the pid is COMMAND's.
                crate::sys::process::signal_process(*pid, signal);
                let stops = matches!(signal, Signal::INT | Signal::TERM | Signal::HUP);
                if stops && self.stop_signal.set((signal, Stamp::now())).is_ok() {
                    let tell = self
                        .on_stop_signal
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    if let Some(tell) = &*tell {
                        let _ = tell.send(());
                    }
                }
            }
            Phase::Running { .. } | Phase::Finished => {}
            Phase::Acquiring => self.note_interrupt(signal),
            Phase::Blocked(blocked) => {
                self.note_interrupt(signal);
                // The waiter sits in BLPOP: wake it through its private list. Holding
                // the phase lock meanwhile keeps it from moving on unseen.
                let woke = blocked
                    .backend
                    .connect()
                    .and_then(|mut s| s.interrupt(&blocked.keys, &blocked.token));
                if let Err(err) = woke {
                    // The server is not answering, so the waiter cannot be woken:
                    // leave now. Its waiter entry expires by itself, and so does a
                    // hold handed to it meanwhile (within its registration, ≤ ttl),
                    // under which nothing ever ran.
                    let lock = blocked.keys.name.clone();
                    *phase = Phase::Finished;
                    crate::report::error(&format!(
                        "{lock}: interrupted by {} while waiting; the server did not answer, \
                         so anything handed over meanwhile expires by itself ({err})",
                        signal
                    ));
                    std::process::exit(i32::from(signal.exit_status()));
                }
            }
        }
    }
}

/// Sets the signals up. Call first thing, before any thread is started, so
/// that every thread blocks the caught ones and an early ^C waits for rlock.
///
/// A signal that was ignored when rlock started (`nohup`, a background job of a
/// non-interactive shell) stays ignored, in rlock and in COMMAND. SIGTTOU is
/// ignored so that rlock, in the background while COMMAND owns the terminal, is
/// never stopped by the tty for taking the terminal back or writing a message.
///
/// Caught signals are blocked rather than handled: socket calls with a
/// timeout are never restarted after a handler runs (signal(7)), so a handler
/// running inside a Redis call would fail that call with EINTR.
pub fn start() {
    dispositions::note_ignored_at_start();
    dispositions::ignore_sigttou();
    dispositions::block_caught();
}
