//! Processes followed by pidfd, and descriptors handed from one process to
//! another: what the `--while-pid` keeper and `acquire` use to follow PID and
//! to shake hands.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags};

use super::signal::Signal;

/// A process (or process group) id: never a bare integer above `sys`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pid(i32);

impl Pid {
    /// The process with this id, as the kernel numbers it.
    pub const fn from_raw(raw: i32) -> Pid {
        Pid(raw)
    }

    /// Its number, for the kernel and for messages.
    pub const fn raw(self) -> i32 {
        self.0
    }

    fn kernel(self) -> Option<rustix::process::Pid> {
        rustix::process::Pid::from_raw(self.0)
    }
}

/// `signal` as rustix names it (None for one it has no name for).
fn kernel_signal(signal: Signal) -> Option<rustix::process::Signal> {
    rustix::process::Signal::from_named_raw(signal.number())
}

/// The process a hold follows. With a pidfd it is this very process, even
/// if its pid is reused later.
pub struct Watched {
    pid: u32,
    fd: Option<OwnedFd>,
}

impl Watched {
    /// Opens PID; None when there is no such process.
    pub fn open(pid: u32) -> Option<Self> {
        let opened = pidfd_open(Pid::from_raw(pid as i32));
        if let Ok(fd) = opened {
            return Some(Watched { pid, fd: Some(fd) });
        }
        let watched = Watched { pid, fd: None };
        let missing = matches!(opened, Err(e) if e == rustix::io::Errno::SRCH) || watched.gone();
        (!missing).then_some(watched)
    }

    /// The keeper's end: the pidfd `acquire` handed over (descriptor
    /// `inherited`), else PID by number.
    pub fn inherited(pid: u32, inherited: Option<RawFd>) -> Self {
        Watched {
            pid,
            fd: inherited.and_then(take_fd),
        }
    }

    /// The same process, watched through a second descriptor (for a thread).
    pub fn try_clone(&self) -> Self {
        Watched {
            pid: self.pid,
            fd: self.fd.as_ref().and_then(|fd| fd.try_clone().ok()),
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The pidfd, to poll with others.
    pub fn borrowed_fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(AsFd::as_fd)
    }

    /// The pidfd, readable once the process has exited.
    pub fn fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Whether the process has exited (a zombie counts as exited).
    pub fn gone(&self) -> bool {
        self.exits_within(Duration::ZERO)
    }

    /// Waits up to `within` for the process to exit.
    pub fn exits_within(&self, within: Duration) -> bool {
        if let Some(fd) = &self.fd {
            return poll_readable(&[fd.as_fd()], Some(within)).is_ok_and(|n| n > 0);
        }
        // No pidfd (an old kernel): look by signal 0 once `within` has passed.
        std::thread::sleep(within);
        Pid::from_raw(self.pid as i32).kernel().is_some_and(|pid| {
            rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
        })
    }
}

/// Takes ownership of an inherited descriptor, if it is open (and makes it
/// close-on-exec).
pub fn take_fd(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: F_SETFD on a descriptor number: fails harmlessly if not open.
    if fd < 3 || unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return None;
    }
    // SAFETY: the descriptor is open and was handed to this process to own.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The keeper's end of the handshake with `acquire`: it says when it has
/// taken the hold over and learns whether the token reached the script.
pub struct Ready(Option<std::os::unix::net::UnixStream>);

impl Ready {
    /// The keeper's end, inherited as descriptor `fd`.
    pub fn inherited(fd: Option<RawFd>) -> Self {
        Ready(
            fd.and_then(take_fd)
                .map(std::os::unix::net::UnixStream::from),
        )
    }

    /// Tells `acquire` the hold is taken over, then waits until it has handed
    /// the token to the script. False when `acquire` gave up or died first:
    /// nobody knows the token, so the keeper must let go.
    pub fn handshake(&mut self) -> bool {
        let Some(mut stream) = self.0.take() else {
            return true;
        };
        let mut byte = [0u8; 1];
        stream.write_all(b"1").is_ok() && matches!(stream.read(&mut byte), Ok(1))
    }
}

/// A pidfd for `pid`: readable once it has exited, and never another process
/// even if the pid is reused.
pub fn pidfd_open(pid: Pid) -> rustix::io::Result<OwnedFd> {
    let pid = pid.kernel().ok_or(rustix::io::Errno::SRCH)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
}

/// Polls `fds` for input for up to `within` (None: no limit); the number
/// readable. EINTR is an error for the caller to retry.
pub fn poll_readable(fds: &[BorrowedFd<'_>], within: Option<Duration>) -> std::io::Result<usize> {
    Ok(poll_ready(fds, within)?
        .iter()
        .filter(|ready| **ready)
        .count())
}

/// Waits until one of `fds` is readable (or hung up), or `within` passes:
/// which of them are, in their order.
pub fn poll_ready(fds: &[BorrowedFd<'_>], within: Option<Duration>) -> std::io::Result<Vec<bool>> {
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .collect();
    let timeout = within.map(|d| rustix::time::Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    });
    rustix::event::poll(&mut polled, timeout.as_ref())?;
    Ok(polled.iter().map(|p| !p.revents().is_empty()).collect())
}

/// Sends `signal` to process `pid`. Failures (it is gone, or not ours) are the
/// caller's to ignore: it signals only processes it has not reaped.
pub fn signal_process(pid: Pid, signal: Signal) {
    if let (Some(pid), Some(signal)) = (pid.kernel(), kernel_signal(signal)) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Sends `signal` to process group `pgid`; false when it failed (no member
/// left, or none that may be signalled).
pub fn signal_group(pgid: Pid, signal: Signal) -> bool {
    match (pgid.kernel(), kernel_signal(signal)) {
        (Some(pgid), Some(signal)) => rustix::process::kill_process_group(pgid, signal).is_ok(),
        _ => false,
    }
}

/// True while process group `pgid` has live members; reaps the ones that were
/// reparented to this process and have exited. A member this process may not
/// signal (EPERM: another user's) counts as alive.
pub fn group_alive(pgid: Pid) -> bool {
    let Some(group) = pgid.kernel() else {
        return false;
    };
    while let Ok(Some(_)) = rustix::process::waitpgid(group, rustix::process::WaitOptions::NOHANG) {
    }
    match rustix::process::test_kill_process_group(group) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

/// Whether group `pgid` has a member that is not a zombie, for a process
/// that is not its members' parent: a member whose parent died waits for
/// init to reap it, which in a container may be never, yet it runs no more.
/// A member rlock may not signal (EPERM) counts as running.
pub fn group_running(pgid: Pid) -> bool {
    let Some(group) = pgid.kernel() else {
        return false;
    };
    match rustix::process::test_kill_process_group(group) {
        Ok(()) => {}
        Err(e) => return e == rustix::io::Errno::PERM,
    }
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return true;
    };
    procs.filter_map(|entry| entry.ok()).any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // After the command name's closing parenthesis: state, ppid, pgrp.
        let mut fields = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
        pgrp == Some(pgid.raw()) && !matches!(state, "Z" | "X")
    })
}

/// Makes this process the reaper of its orphaned descendants.
pub fn become_subreaper() {
    let _ = rustix::process::set_child_subreaper(rustix::process::getpid().into());
}

/// Stops this process (SIGSTOP) until someone continues it.
pub fn stop_self() {
    signal_process(
        Pid::from_raw(rustix::process::getpid().as_raw_nonzero().get()),
        Signal::STOP,
    );
}

/// The command line of process `pid`, as the kernel records it (empty when
/// it cannot be read: a process gone, or another user's under hidepid).
pub fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// This process's parent (0 if it has none).
pub fn parent_pid() -> u32 {
    rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32)
}

/// Whether `path` may be executed by this process (access(2) with X_OK).
pub fn executable(path: &std::path::Path) -> bool {
    rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok()
}

/// This host's name.
pub fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// What became of a child, as `waitid` reports it without reaping it.
pub enum ChildEvent {
    /// It exited or was killed (not reaped yet).
    Ended,
    /// It was stopped by this signal.
    Stopped(Signal),
}

/// Waits for child `pid` to end (or, with `stops`, to stop), leaving it
/// unreaped (WNOWAIT), so its pid cannot be reused while it is looked at.
/// On `libc`: rustix's waitid cannot leave the child unreaped and report it.
pub fn wait_child(pid: Pid, stops: bool) -> std::io::Result<ChildEvent> {
    let flags = if stops {
        libc::WEXITED | libc::WSTOPPED
    } else {
        libc::WEXITED
    };
    // SAFETY: siginfo_t is plain data; waitid with WNOWAIT leaves the child unreaped.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid siginfo_t to write to; the child is ours.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid.raw() as libc::id_t,
            &mut info,
            flags | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if info.si_code != libc::CLD_STOPPED {
        return Ok(ChildEvent::Ended);
    }
    // SAFETY: si_status is valid for CLD_STOPPED.
    Ok(ChildEvent::Stopped(Signal::from_number(unsafe {
        info.si_status()
    })))
}

/// Consumes child `pid`'s pending stop notification, if any.
pub fn consume_stop(pid: Pid) {
    // SAFETY: siginfo_t is plain data; waitid only reports on our child.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            pid.raw() as libc::id_t,
            &mut info,
            libc::WSTOPPED | libc::WNOHANG,
        );
    }
}

/// Reaps child `pid`, which has ended; its raw wait status.
pub fn reap(pid: Pid) -> std::io::Result<i32> {
    let mut status = 0;
    // SAFETY: reaps our own child, whose end was reported.
    if unsafe { libc::waitpid(pid.raw(), &mut status, 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(status)
}

/// Makes the process `cmd` starts the leader of a new session, away from the
/// caller's terminal, so job control and hangups do not reach it.
pub fn new_session(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// Marks every descriptor but 0-2 and `kept` close-on-exec, and `kept`
/// inheritable, so a process started next inherits only those.
/// On `libc`: the descriptors are numbers read from /proc, which rustix's
/// fcntl would first have to borrow unsafely.
pub fn only_these_inherited(kept: &[RawFd]) -> std::io::Result<()> {
    let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    for fd in open.into_iter().filter(|&fd| fd > 2) {
        let flags = if kept.contains(&fd) {
            0
        } else {
            libc::FD_CLOEXEC
        };
        // SAFETY: F_SETFD only changes this descriptor's flags (a number
        // that closed meanwhile, like read_dir's own, fails harmlessly).
        unsafe { libc::fcntl(fd, libc::F_SETFD, flags) };
    }
    Ok(())
}
