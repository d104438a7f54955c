//! Signal dispositions and masks: which signals rlock forwards, which were
//! ignored when it started (they stay ignored, in rlock and in COMMAND), and
//! what COMMAND gets back before exec.
//!
//! Caught signals are blocked and taken when rlock looks (sigtimedwait,
//! sigwaitinfo, a signalfd): no handler interrupts a system call that must
//! not end early. The one exception is [`interruptible`], a blocking read
//! that a signal is meant to end: handlers run only during it.
//!
//! On `libc`: rustix offers no sigaction, sigprocmask or signal-set calls
//! (they belong to the C runtime's signal handling).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

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

/// Signals whose dispositions rlock changes: the forwarded ones, SIGTTOU, and
/// SIGALRM (see [`interruptible`]).
fn changed() -> impl Iterator<Item = i32> {
    FORWARDED.into_iter().chain([libc::SIGTTOU, libc::SIGALRM])
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
pub fn take_pending() -> Option<i32> {
    let set = caught_set();
    let now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        // SAFETY: the set and the timeout are initialised; a null info is allowed.
        let signal = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &now) };
        if signal > 0 {
            return Some(signal);
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return None;
        }
    }
}

/// Waits for the next caught signal and takes it.
pub fn wait_caught() -> i32 {
    let set = caught_set();
    loop {
        // SAFETY: the set is initialised; a null info is allowed.
        let signal = unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
        if signal > 0 {
            return signal;
        }
    }
}

/// The first caught signal a handler took during [`interruptible`], 0 for none.
static HANDLED: AtomicI32 = AtomicI32::new(0);

/// The handler of a caught signal during [`interruptible`]: notes it, and
/// asks for SIGALRM every millisecond until the call ends, so that a call
/// the signal came just before (it had not blocked yet) is interrupted as
/// well. Async-signal-safe: an atomic and setitimer.
extern "C" fn on_caught(signal: libc::c_int) {
    let _ = HANDLED.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    let every = libc::timeval {
        tv_sec: 0,
        tv_usec: 1000,
    };
    let timer = libc::itimerval {
        it_interval: every,
        it_value: every,
    };
    // SAFETY: setitimer with a valid value and no old value.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut()) };
}

/// Whether a signal was sent by a process (kill, sigqueue, tkill), not by
/// the kernel for rlock's own timer.
fn sent_by_a_process(code: libc::c_int) -> bool {
    code <= 0
}

/// SIGALRM's handler during [`interruptible`]: rlock's own timer's SIGALRM
/// only interrupts the call. One another process sent does what it does
/// outside the call, end rlock: the default action, raised again (blocked
/// while this handler runs, it is delivered as the handler returns).
/// Async-signal-safe: signal and raise.
extern "C" fn on_alarm(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    if sent_by_a_process(unsafe { (*info).si_code }) {
        // SAFETY: both are async-signal-safe.
        unsafe {
            libc::signal(libc::SIGALRM, libc::SIG_DFL);
            libc::raise(libc::SIGALRM);
        }
    }
}

/// Whether [`interruptible`] can be used: SIGALRM was not ignored at start
/// (it then stays ignored, for COMMAND too) and the caught signals' handlers
/// are in place (installed once; the signals stay blocked outside the call).
pub fn interruptible_available() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if ignored_at_start(libc::SIGALRM) {
        return false;
    }
    *INSTALLED.get_or_init(|| {
        caught().all(|signal| {
            // SAFETY: the action is initialised (every signal blocked while
            // the handler runs, no SA_RESTART: the call must end with EINTR).
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_caught as extern "C" fn(libc::c_int) as usize;
                libc::sigfillset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut()) == 0
            }
        })
    })
}

/// The signal state [`interruptible`] sets up, undone when dropped (also if
/// the call panics): the caught signals blocked again, the timer stopped,
/// a SIGALRM of the timer's still pending taken, SIGALRM's default action
/// back (and one another process sent meanwhile raised again).
struct Window {
    caught: libc::sigset_t,
}

impl Window {
    fn open() -> Window {
        let caught = caught_set();
        // SAFETY: the action is initialised; pthread_sigmask only changes this
        // thread's mask. SIGALRM is unblocked (its default) in rlock's threads.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_alarm
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as usize;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigfillset(&mut action.sa_mask);
            libc::sigaction(libc::SIGALRM, &action, std::ptr::null_mut());
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &caught, std::ptr::null_mut());
        }
        Window { caught }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: sets initialised before use; every call only changes this
        // process's signal state, in the order that leaves no SIGALRM of the
        // timer behind.
        unsafe {
            let mut alarm: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut alarm);
            libc::sigaddset(&mut alarm, libc::SIGALRM);
            let mut both = self.caught;
            libc::sigaddset(&mut both, libc::SIGALRM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &both, std::ptr::null_mut());
            let stop: libc::itimerval = std::mem::zeroed();
            libc::setitimer(libc::ITIMER_REAL, &stop, std::ptr::null_mut());
            let now = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let mut sent = false;
            let mut info: libc::siginfo_t = std::mem::zeroed();
            while libc::sigtimedwait(&alarm, &mut info, &now) > 0 {
                sent |= sent_by_a_process(info.si_code);
            }
            libc::signal(libc::SIGALRM, libc::SIG_DFL);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &alarm, std::ptr::null_mut());
            if sent {
                libc::raise(libc::SIGALRM);
            }
        }
    }
}

/// Runs `f`, a blocking call of this thread's, with the caught signals
/// deliverable to it: one that comes ends a system call of `f` with EINTR
/// (at once, or within a millisecond when it came just before the call),
/// and [`take_handled`] returns it. Call only when [`interruptible_available`];
/// `f` must treat EINTR as the end of its wait. Only one thread may be in it
/// at a time (rlock's main thread).
pub fn interruptible<T>(f: impl FnOnce() -> T) -> T {
    let _window = Window::open();
    f()
}

/// The caught signal a handler took during [`interruptible`], taken.
pub fn take_handled() -> Option<i32> {
    match HANDLED.swap(0, Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
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
    pub fn take(&self) -> Option<i32> {
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
                return i32::try_from(info.ssi_signo).ok();
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
