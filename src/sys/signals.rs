//! Signal dispositions and masks: which signals rlock forwards, which were
//! ignored when it started (they stay ignored, in rlock and in COMMAND), and
//! what COMMAND gets back before exec.
//!
//! Caught signals are blocked and taken when rlock looks (sigtimedwait,
//! sigwaitinfo, a signalfd): no handler interrupts a system call that must
//! not end early.
//!
//! On `libc`: rustix offers no sigaction, sigprocmask or signal-set calls
//! (they belong to the C runtime's signal handling).

use super::signal::Signal;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// The signals rlock forwards to COMMAND (README: "Signals and the terminal").
pub const FORWARDED: [i32; 6] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Bit N set: signal N was ignored (SIG_IGN) when rlock started. Read in the
/// child before exec, so it is an atomic, not a lock.
static IGNORED_AT_START: AtomicU64 = AtomicU64::new(0);

/// Signals whose dispositions rlock changes: the forwarded ones and SIGTTOU.
fn changed() -> impl Iterator<Item = i32> {
    FORWARDED.into_iter().chain([libc::SIGTTOU])
}

/// Whether `signal` was ignored when rlock started.
pub fn ignored_at_start(signal: i32) -> bool {
    IGNORED_AT_START.load(Ordering::Relaxed) & (1 << signal) != 0
}

/// Records which of the signals rlock changes were ignored at start; call
/// before changing any.
pub fn note_ignored_at_start() {
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
}

/// Ignores SIGTTOU, so that rlock, in the background while COMMAND owns the
/// terminal, is never stopped for taking the terminal back or writing to it.
pub fn ignore_sigttou() {
    // SAFETY: setting a disposition to SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGTTOU, libc::SIG_IGN) };
}

/// In COMMAND's process before exec: gives back the dispositions rlock changed
/// (and SIGPIPE, which Rust's runtime ignores) and empties the signal mask.
///
/// # Safety
/// Only for a forked child before exec; calls async-signal-safe functions only.
pub unsafe fn restore_for_child() {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
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
}

/// The signals rlock catches: [`FORWARDED`] but those ignored at start.
/// Call [`note_ignored_at_start`] first.
pub fn caught() -> impl Iterator<Item = i32> {
    FORWARDED.into_iter().filter(|s| !ignored_at_start(*s))
}

fn caught_set() -> libc::sigset_t {
    // SAFETY: the set is initialised by sigemptyset before sigaddset adds to it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in caught() {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Blocks the caught signals in the calling thread and in every thread it
/// starts later. Blocked, a caught signal waits (pending) until
/// [`take_pending`], [`wait_caught`] or a [`SignalFd`] takes it: each one is
/// taken exactly once, by one of them. A signal ignored at start stays
/// unblocked, so the kernel goes on discarding it.
pub fn block_caught() {
    let set = caught_set();
    // SAFETY: pthread_sigmask only changes this thread's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// A caught signal that is pending, taken without waiting; None when none is.
pub fn take_pending() -> Option<Signal> {
    let set = caught_set();
    let now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        // SAFETY: the set and the timeout are initialised; a null info is allowed.
        let signal = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &now) };
        if signal > 0 {
            return Some(Signal::from_number(signal));
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return None;
        }
    }
}

/// Waits for the next caught signal and takes it.
pub fn wait_caught() -> Signal {
    let set = caught_set();
    loop {
        // SAFETY: the set is initialised; a null info is allowed.
        let signal = unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
        if signal > 0 {
            return Signal::from_number(signal);
        }
    }
}

/// The caught signals as a descriptor to poll beside others: readable while
/// one is pending, and [`SignalFd::take`] takes it.
///
/// On `libc`: rustix has no signalfd.
pub struct SignalFd(OwnedFd);

impl SignalFd {
    /// A non-blocking signalfd for the caught signals (blocked already).
    pub fn open() -> std::io::Result<SignalFd> {
        let set = caught_set();
        // SAFETY: the set is initialised; -1 asks for a new descriptor.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: signalfd returned a new descriptor that nothing else owns.
        Ok(SignalFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// A pending caught signal, taken; None when none is.
    pub fn take(&self) -> Option<Signal> {
        // SAFETY: all-zero bytes are a valid signalfd_siginfo (plain integers).
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        loop {
            // SAFETY: the buffer is `size` bytes of a plain-integer struct.
            let read = unsafe {
                libc::read(
                    self.0.as_raw_fd(),
                    (&raw mut info).cast::<libc::c_void>(),
                    size,
                )
            };
            if usize::try_from(read).is_ok_and(|n| n == size) {
                return i32::try_from(info.ssi_signo).ok().map(Signal::from_number);
            }
            if read >= 0
                || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                return None;
            }
        }
    }
}

impl AsFd for SignalFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}
