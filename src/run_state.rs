//! The signal thread and the state it shares with `run`.
//!
//! rlock catches HUP, INT, QUIT, TERM, USR1 and USR2 on one thread. What a signal
//! does depends on the phase: before COMMAND starts it interrupts the wait (exit
//! 128+N, nothing left behind); while COMMAND runs it is forwarded to COMMAND,
//! once; after COMMAND ended it is ignored while rlock releases the lock.
//!
//! COMMAND runs in its own process group, and on a terminal that group is the
//! foreground one (tini's model), so keys typed at the terminal reach COMMAND
//! directly and never rlock: forwarding what rlock receives cannot double them.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use signal_hook::iterator::Signals;

use crate::backend::Backend;
use crate::lock::clock::Stamp;
use crate::lock::name::LockId;
use crate::lock::token::Token;
use crate::signal::Signal;
use crate::sys::guardian::Deadlines;
use crate::sys::signals::{self as dispositions, FORWARDED};

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
    /// Connecting: nothing has been sent, so a signal ends rlock at once.
    Connecting,
    /// Attempting to acquire (a request may be in flight).
    Acquiring,
    /// Blocked waiting for a release.
    Blocked(Box<Blocked>),
    /// COMMAND runs as process `pid` (also its process group id).
    Running {
        /// COMMAND's pid and pgid.
        pid: libc::pid_t,
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
}

impl Shared {
    /// Starts in [`Phase::Connecting`].
    pub fn new(lock: &str) -> Arc<Self> {
        Arc::new(Shared {
            lock: lock.to_owned(),
            phase: Mutex::new(Phase::Connecting),
            interrupted: AtomicI32::new(0),
            deadlines: OnceLock::new(),
            late: AtomicU64::new(0),
        })
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

    /// The lock's name, for messages.
    pub fn lock(&self) -> &str {
        &self.lock
    }

    /// The first signal that interrupted the wait, if any.
    pub fn interrupted(&self) -> Option<Signal> {
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
    pub fn signal_group(&self, signal: i32) -> bool {
        if let Phase::Running { pid, exited: false } = *self.phase() {
            // COMMAND has not been reaped: its group cannot have been reused.
            crate::sys::process::signal_group(pid, signal);
            return true;
        }
        false
    }

    /// Interrupts a wait as `signal` would, from another thread (the
    /// `--while-pid` process is gone). Not for the connecting phase.
    pub fn interrupt(&self, signal: i32) {
        if !matches!(*self.phase(), Phase::Connecting) {
            self.on_signal(signal);
        }
    }

    fn on_signal(&self, signal: i32) {
        let mut phase = self.phase();
        match &*phase {
            Phase::Running { pid, exited: false } => {
                // Not reaped while the phase is locked: the pid is COMMAND's.
                crate::sys::process::signal_process(*pid, signal);
            }
            Phase::Running { .. } | Phase::Finished => {}
            Phase::Connecting => {
                crate::report::error(&format!(
                    "{}: interrupted by {} while connecting; nothing acquired",
                    self.lock,
                    Signal::from_number(signal)
                ));
                std::process::exit(i32::from(Signal::from_number(signal).exit_status()));
            }
            Phase::Acquiring => {
                let _ = self.interrupted.compare_exchange(
                    0,
                    signal,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
            }
            Phase::Blocked(blocked) => {
                let _ = self.interrupted.compare_exchange(
                    0,
                    signal,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
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
                        Signal::from_number(signal)
                    ));
                    std::process::exit(i32::from(Signal::from_number(signal).exit_status()));
                }
            }
        }
    }
}

/// Starts the signal thread. Call before connecting, so an early ^C is not lost,
/// and before starting any other thread.
///
/// A signal that was ignored when rlock started (`nohup`, a background job of a
/// non-interactive shell) stays ignored, in rlock and in COMMAND. SIGTTOU is
/// ignored so that rlock, in the background while COMMAND owns the terminal, is
/// never stopped by the tty for taking the terminal back or writing a message.
///
/// The caught signals are blocked in every other thread: socket calls with a
/// timeout are never restarted after a handler runs (signal(7)), so a signal
/// landing on a thread inside a Redis call would fail that call with EINTR.
pub fn start(shared: Arc<Shared>) -> crate::error::Result<()> {
    dispositions::note_ignored_at_start();
    dispositions::ignore_sigttou();
    let caught: Vec<i32> = FORWARDED
        .into_iter()
        .filter(|s| !dispositions::ignored_at_start(*s))
        .collect();
    let mut signals = Signals::new(&caught).map_err(|e| {
        crate::error::Error::internal(format!("cannot install signal handlers: {e}"))
    })?;
    dispositions::block_forwarded(true);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            dispositions::block_forwarded(false);
            for signal in signals.forever() {
                shared.on_signal(signal);
            }
        })
        .map_err(|e| crate::error::Error::internal(format!("cannot start signal thread: {e}")))?;
    Ok(())
}
