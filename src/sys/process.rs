//! Processes followed by pidfd, and descriptors handed from one process to
//! another: what the `--while-pid` keeper and `acquire` use to follow PID and
//! to shake hands.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::error::{Error, Result};

/// The process a hold follows. With a pidfd it is this very process, even
/// if its pid is reused later.
pub struct Watched {
    pid: u32,
    fd: Option<OwnedFd>,
}

impl Watched {
    /// Opens PID for `acquire NAME`; a missing process is a usage error.
    pub fn open(pid: u32, name: &str) -> Result<Self> {
        // SAFETY: pidfd_open has no memory-safety preconditions.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd >= 0 {
            // SAFETY: a fresh descriptor, owned from here on.
            let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
            return Ok(Watched { pid, fd: Some(fd) });
        }
        let watched = Watched { pid, fd: None };
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) || watched.gone() {
            return Err(Error::usage(format!(
                "{name}: --while-pid {pid}: no such process"
            )));
        }
        Ok(watched)
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
        if let Some(fd) = self.fd() {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = libc::c_int::try_from(within.as_millis()).unwrap_or(libc::c_int::MAX);
            // SAFETY: one valid pollfd.
            return unsafe { libc::poll(&mut p, 1, ms) } > 0;
        }
        // No pidfd (an old kernel): look by signal 0 once `within` has passed.
        std::thread::sleep(within);
        // SAFETY: signal 0 only checks that the process exists.
        let missing = unsafe { libc::kill(self.pid as libc::pid_t, 0) } != 0;
        missing && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
}

/// Takes ownership of an inherited descriptor, if it is open.
fn take_fd(fd: RawFd) -> Option<OwnedFd> {
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
