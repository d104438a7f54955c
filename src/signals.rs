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

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use signal_hook::iterator::Signals;

use crate::backend::Backend;
use crate::name::LockKeys;
use crate::token::Token;

/// The signals rlock forwards to COMMAND (CONTRACT.md §3).
pub const FORWARDED: [i32; 6] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// A signal's name for messages.
pub fn name(signal: i32) -> String {
    let known = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGKILL => "SIGKILL",
        _ => return format!("signal {signal}"),
    };
    known.to_owned()
}

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
    Blocked(Blocked),
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
}

impl Shared {
    /// Starts in [`Phase::Connecting`].
    pub fn new(lock: &str) -> Arc<Self> {
        Arc::new(Shared {
            lock: lock.to_owned(),
            phase: Mutex::new(Phase::Connecting),
            interrupted: AtomicI32::new(0),
        })
    }

    /// The first signal that interrupted the wait, if any.
    pub fn interrupted(&self) -> Option<i32> {
        match self.interrupted.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n),
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
                    name(signal)
                ));
                std::process::exit(128 + signal);
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
                    // The server is not answering, so the waiter cannot be woken and
                    // holds nothing: leave now. Its waiter entry expires by itself.
                    let lock = blocked.keys.name.clone();
                    *phase = Phase::Finished;
                    crate::report::error(&format!(
                        "{lock}: interrupted by {} while waiting; nothing acquired ({err})",
                        name(signal)
                    ));
                    std::process::exit(128 + signal);
                }
            }
        }
    }
}

/// Starts the signal thread. Call before connecting, so an early ^C is not lost,
/// and before starting any other thread.
///
/// The forwarded signals are blocked in every other thread: socket calls with a
/// timeout are never restarted after a handler runs (signal(7)), so a signal
/// landing on a thread inside a Redis call would fail that call with EINTR.
pub fn start(shared: Arc<Shared>) -> crate::error::Result<()> {
    let mut signals = Signals::new(FORWARDED).map_err(|e| {
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
