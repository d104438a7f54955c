//! Signal dispositions and masks: which signals rlock forwards, which were
//! ignored when it started (they stay ignored, in rlock and in COMMAND), and
//! what COMMAND gets back before exec.
//!
//! On `libc`: rustix offers no sigaction, sigprocmask or signal-set calls
//! (they belong to the C runtime's signal handling, which signal-hook drives).

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

/// Signals whose dispositions rlock changes: the forwarded ones, and SIGTTOU.
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

/// Blocks (or unblocks) [`FORWARDED`] in the calling thread.
pub fn block_forwarded(block: bool) {
    let how = if block {
        libc::SIG_BLOCK
    } else {
        libc::SIG_UNBLOCK
    };
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
