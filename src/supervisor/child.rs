//! Starting COMMAND, waiting for it, and stopping it.
//!
//! COMMAND is executed directly (no shell) in a process group of its own, so
//! rlock can stop it and everything it started with one `killpg`. On a terminal
//! its group becomes the foreground group, so it reads the terminal and gets
//! the keys typed there itself. `PR_SET_PDEATHSIG` kills it if rlock dies; the
//! kernel sends it when the *thread* that forked exits, so `run` spawns from the
//! main thread, which lives until COMMAND is reaped.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Cause, Error, Result};
use crate::lock::clock::Stamp;
use crate::run_state::{Phase, Shared};
use crate::sys::signal::Signal;
use crate::sys::{self, process::ChildEvent, process::Pid};

/// Finds COMMAND the way a shell would, before any lock is taken, so a typo
/// costs no Redis round trip: 127 when it does not exist, 126 when it is not
/// executable.
pub fn resolve(program: &OsStr, lock: &str) -> Result<PathBuf> {
    let not_found =
        || Error::from(Cause::NotFound(program.to_string_lossy().into_owned())).in_lock(lock);
    let denied = |cause| {
        Error::from(Cause::CannotExecute {
            program: program.to_string_lossy().into_owned(),
            cause,
        })
        .in_lock(lock)
    };
    if program.is_empty() {
        return Err(not_found());
    }
    if program.as_bytes().contains(&b'/') {
        let path = Path::new(program);
        return match check_executable(path) {
            Some(Ok(())) => Ok(path.to_owned()),
            Some(Err(cause)) => Err(denied(cause)),
            None => Err(not_found()),
        };
    }
    let search =
        std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    let mut refused = None;
    for dir in std::env::split_paths(&search) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(program);
        match check_executable(&candidate) {
            Some(Ok(())) => return Ok(candidate),
            Some(Err(cause)) => refused = refused.or(Some(cause)),
            None => {}
        }
    }
    Err(refused.map_or_else(not_found, denied))
}

/// None: no such file. Some(Err): exists but cannot be executed.
fn check_executable(path: &Path) -> Option<std::result::Result<(), String>> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_dir() {
        return Some(Err("is a directory".into()));
    }
    if !sys::process::executable(path) {
        // A script just written or checked out without its mode bit is the
        // common case, and its fix is one command; other refusals (a noexec
        // mount, another user's file) are not fixed by chmod.
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            return Some(Err(format!(
                "permission denied (no execute permission: chmod +x {})",
                crate::report::quote(&path.to_string_lossy())
            )));
        }
        return Some(Err("permission denied".into()));
    }
    Some(Ok(()))
}

/// True when rlock runs in the foreground of a terminal on stdin: then COMMAND
/// gets the terminal.
pub fn terminal_foreground() -> bool {
    sys::terminal::foreground()
}

/// COMMAND, spawned and not yet reaped.
pub struct Spawned {
    pid: Pid,
}

impl Spawned {
    /// Its pid, which is also its process group id.
    pub fn pid(&self) -> Pid {
        self.pid
    }
}

/// Spawns COMMAND (already resolved to `path`) with `env` set or left out, in its own
/// process group, with default signal dispositions and an empty signal mask
/// (see [`crate::sys::spawn`]).
pub fn spawn(
    path: &Path,
    argv: &[OsString],
    env: &[(&str, Option<String>)],
    foreground: bool,
    guardian: libc::c_int,
    shared: &Arc<Shared>,
) -> Result<Spawned> {
    // Hold the phase lock across the spawn so a signal is either seen before
    // COMMAND exists (and handled as an interrupt) or forwarded to it.
    let mut phase = shared.phase();
    if !shared.lease_valid() {
        return Err(Error::from(Cause::LeaseLapsedBeforeStart).in_lock(shared.lock()));
    }
    if let Some(signal) = shared.interrupted() {
        return Err(Error::from(Cause::Interrupted(signal)));
    }
    let pid = crate::sys::spawn::spawn(path, argv, env, foreground, guardian)
        .map_err(|e| spawn_error(&argv[0], shared.lock(), &e))?;
    *phase = Phase::Running { pid, exited: false };
    Ok(Spawned { pid })
}

fn spawn_error(program: &OsStr, lock: &str, err: &io::Error) -> Error {
    let program = program.to_string_lossy().into_owned();
    let lock = lock.to_owned();
    match err.kind() {
        io::ErrorKind::NotFound => Error::from(Cause::NotFound(program)).in_lock(&lock),
        _ => Error::from(Cause::CannotExecute {
            program,
            cause: err.to_string(),
        })
        .in_lock(&lock),
    }
}

/// Whether COMMAND exits before `until`, as seen in time (false as well when
/// the kernel has no pidfd or signalfd to wait with). Leaves it unreaped, for
/// [`wait`]. Signals that come meanwhile are forwarded to COMMAND from here:
/// no signal thread runs yet.
pub fn exits_before(child: &Spawned, until: Stamp, shared: &Shared) -> bool {
    let Ok(pidfd) = sys::process::pidfd_open(child.pid) else {
        return false;
    };
    let Ok(signals) = sys::signals::SignalFd::open() else {
        return false;
    };
    loop {
        let left = until.remaining();
        // Rounded up to whole milliseconds, as poll(2) counts.
        let within = Duration::from_millis(
            u64::try_from(left.as_micros().div_ceil(1000)).unwrap_or(u64::MAX),
        );
        match sys::process::poll_ready(&[pidfd.as_fd(), signals.as_fd()], Some(within)) {
            Ok(ready) => {
                // First the signals: COMMAND, exited or not, is not reaped.
                while let Some(signal) = signals.take() {
                    shared.interrupt(signal);
                }
                if ready[0] {
                    // Seen only after the first renewal was due (rlock itself
                    // was stopped): let the watchdog judge the lease.
                    let in_time = !until.passed();
                    shared.note_wake(until);
                    return in_time;
                }
                if !ready[1] && left.is_zero() {
                    shared.note_wake(until);
                    return false;
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Waits for COMMAND to exit, marks it exited (so no one signals a recycled
/// pid), then reaps it.
///
/// With the terminal (`foreground`), a COMMAND suspended by ^Z suspends rlock
/// too, so the shell's job control sees the job stopped; `fg` or `bg` continues
/// both. While suspended rlock cannot renew: a suspension longer than the lease
/// ends in exit 70 when it resumes.
pub fn wait(child: Spawned, shared: &Shared, foreground: bool) -> Result<ExitStatus> {
    let pid = child.pid;
    loop {
        match sys::process::wait_child(pid, foreground) {
            Ok(ChildEvent::Ended) => break,
            Ok(ChildEvent::Stopped(Signal::TSTP | Signal::TTIN | Signal::TTOU)) => {
                suspend_with(pid, shared);
            }
            // Stopped by someone else (SIGSTOP from a debugger, a user): not
            // job control. Only take note, so the next wait sees new events.
            Ok(ChildEvent::Stopped(_)) => sys::process::consume_stop(pid),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => {
                return Err(Error::internal(format!(
                    "waiting for COMMAND failed: {err}"
                )));
            }
        }
    }
    shared.mark_exited();
    loop {
        match sys::process::reap(pid) {
            Ok(status) => return Ok(ExitStatus::from_raw(status)),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(Error::internal(format!("reaping COMMAND failed: {err}"))),
        }
    }
}

/// COMMAND stopped at the terminal: stop rlock as well, and on continuation
/// hand the terminal back (if we are in the foreground again) and continue
/// COMMAND, unless the lease ran out meanwhile: then the guardian has stopped
/// it for good (SIGTERM with SIGCONT, then SIGKILL; exit 70).
fn suspend_with(pid: Pid, shared: &Shared) {
    // (A pending stop notification: WSTOPPED without WNOWAIT or WEXITED
    // cannot reap an exit.)
    sys::process::consume_stop(pid);
    reclaim_terminal();
    sys::process::stop_self();
    if terminal_foreground() {
        sys::terminal::give_to(pid);
    }
    if shared.lease_valid() {
        sys::process::signal_group(pid, Signal::CONT);
    }
}

/// Takes the terminal back after COMMAND had it (rlock ignores SIGTTOU, so a
/// background rlock may).
pub fn reclaim_terminal() {
    sys::terminal::reclaim();
}

/// Makes rlock the reaper of its orphaned descendants: what COMMAND leaves
/// behind when it exits is reparented to rlock, not to init, so rlock can reap
/// it and tell when COMMAND's process group is really empty.
pub fn become_subreaper() {
    sys::process::become_subreaper();
}

/// True while COMMAND's process group has live members; reaps the ones that
/// were reparented to rlock and have exited. A member rlock may not signal
/// (EPERM: another user's) counts as alive.
pub fn group_alive(pgid: Pid) -> bool {
    sys::process::group_alive(pgid)
}

/// After COMMAND itself exited: processes it left running in its process group
/// would go on working without the lock, so they get SIGTERM, then SIGKILL
/// after `grace`, before the lock is released. Returns true once the group is
/// empty; false when SIGKILL could not empty it within a last second (a member
/// stuck in the kernel, or one rlock may not signal). `stopping`: COMMAND's
/// group was already being stopped (`--max-hold`), so no news to report.
pub fn stop_leftovers(pgid: Pid, grace: Duration, shared: &Shared, stopping: bool) -> bool {
    if !group_alive(pgid) {
        return true;
    }
    if !shared.lost() && !stopping {
        crate::report::error(&format!(
            "{}: COMMAND exited but left processes running in its process group; \
             stopping them before releasing the lock",
            shared.lock()
        ));
    }
    sys::process::signal_group(pgid, Signal::TERM);
    sys::process::signal_group(pgid, Signal::CONT);
    let until_gone = |within: Duration| {
        let deadline = Instant::now() + within;
        while group_alive(pgid) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    };
    if until_gone(grace) {
        return true;
    }
    sys::process::signal_group(pgid, Signal::KILL);
    until_gone(Duration::from_secs(1))
}

/// COMMAND's exit status as rlock's: its code, or 128+N when killed by signal N.
pub fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(255),
        (None, Some(signal)) => Signal::from_number(signal).exit_status(),
        _ => 255,
    }
}
