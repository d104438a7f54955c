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
use crate::clock::Stamp;
use crate::guardian::Deadlines;
use crate::name::LockKeys;
use crate::signal::Signal;
use crate::token::Token;

/// The signals rlock forwards to COMMAND (README: "Signals and the terminal").
pub const FORWARDED: [i32; 6] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Whom to wake when a signal interrupts a blocked waiter.
pub struct Blocked {
    /// Where the waiter blocks.
    pub backend: Arc<dyn Backend>,
    /// The lock it waits for.
    pub keys: LockKeys,
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

    /// Sends `signal` to COMMAND's whole process group if COMMAND has not exited.
    pub fn signal_group(&self, signal: i32) {
        if let Phase::Running { pid, exited: false } = *self.phase() {
            // SAFETY: killpg has no memory-safety preconditions; pid is our live child.
            unsafe { libc::killpg(pid, signal) };
        }
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
                // SAFETY: as above; the child is not reaped while we hold the lock.
                unsafe { libc::kill(*pid, signal) };
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

/// Bit N set: signal N was ignored (SIG_IGN) when rlock started. Read in the
/// child before exec, so it is an atomic, not a lock.
static IGNORED_AT_START: AtomicU64 = AtomicU64::new(0);

/// Signals whose dispositions rlock changes: the forwarded ones, and SIGTTOU.
fn changed() -> impl Iterator<Item = i32> {
    FORWARDED.into_iter().chain([libc::SIGTTOU])
}

fn ignored_at_start(signal: i32) -> bool {
    IGNORED_AT_START.load(Ordering::Relaxed) & (1 << signal) != 0
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
    let mut mask = 0u64;
    for signal in changed() {
        // SAFETY: sigaction with a null new action only reads the disposition.
        let ignored = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
        };
        if ignored {
            mask |= 1 << signal;
        }
    }
    IGNORED_AT_START.store(mask, Ordering::Relaxed);
    // SAFETY: setting a disposition to SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGTTOU, libc::SIG_IGN) };
    let caught: Vec<i32> = FORWARDED
        .into_iter()
        .filter(|s| !ignored_at_start(*s))
        .collect();
    let mut signals = Signals::new(&caught).map_err(|e| {
        crate::error::Error::Internal(format!("cannot install signal handlers: {e}"))
    })?;
    set_mask(libc::SIG_BLOCK);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            set_mask(libc::SIG_UNBLOCK);
            for signal in signals.forever() {
                shared.on_signal(signal);
            }
        })
        .map_err(|e| crate::error::Error::Internal(format!("cannot start signal thread: {e}")))?;
    Ok(())
}

/// In COMMAND's process before exec: gives back the dispositions rlock changed
/// (and SIGPIPE, which Rust's runtime ignores) and empties the signal mask.
///
/// # Safety
/// Only for a forked child before exec; calls async-signal-safe functions only.
pub unsafe fn restore_for_child() {
    for signal in changed() {
        if !ignored_at_start(signal) {
            libc::signal(signal, libc::SIG_DFL);
        }
    }
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
}

/// Blocks or unblocks [`FORWARDED`] in the calling thread.
fn set_mask(how: libc::c_int) {
    // SAFETY: the set is initialised by sigemptyset before use; pthread_sigmask
    // only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in FORWARDED {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}
