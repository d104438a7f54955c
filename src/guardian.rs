//! A guardian process that kills COMMAND's whole process group if rlock dies.
//!
//! `PR_SET_PDEATHSIG` kills only COMMAND itself when rlock is SIGKILLed; what
//! COMMAND started (a shell's children, a pipeline) would run on without the
//! lock. The guardian is a tiny forked child of rlock that blocks reading a pipe
//! whose only writer is rlock: when rlock dies the kernel closes that end, the
//! read returns end-of-file, and the guardian SIGKILLs COMMAND's group. When rlock
//! ends normally it writes a byte first, and the guardian exits without killing.

use std::io;

/// The running guardian, owned by rlock's main thread.
pub struct Guardian {
    pid: libc::pid_t,
    /// Write end of the pipe (close-on-exec, so COMMAND never holds it); -1
    /// once disarmed.
    writer: libc::c_int,
}

impl Guardian {
    /// Forks the guardian. Call from the main thread before spawning COMMAND,
    /// and before any other thread exists: a single-threaded fork is cheaper.
    ///
    /// A fork, not a clone sharing rlock's memory: the kernel's OOM killer (and,
    /// before Linux 5.16, a core dump) takes every process sharing the memory
    /// of the one it kills, and the guardian must outlive exactly that.
    pub fn start() -> io::Result<Self> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let (reader, writer) = (fds[0], fds[1]);
        // SAFETY: the child runs only async-signal-safe calls (close, setpgid,
        // sigprocmask, read, killpg, _exit) and never returns from this function.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let err = io::Error::last_os_error();
            // SAFETY: both fds are ours.
            unsafe {
                libc::close(reader);
                libc::close(writer);
            }
            return Err(err);
        }
        if pid == 0 {
            // SAFETY: see above; the guardian ends with _exit.
            unsafe { guard(reader, writer) }
        }
        // SAFETY: the parent keeps only the write end.
        unsafe { libc::close(reader) };
        Ok(Guardian { pid, writer })
    }

    /// The pipe COMMAND's process writes its pid (= its process group id) to
    /// before exec, with [`announce`], so the guardian knows the group before
    /// COMMAND can start anything.
    pub fn pipe(&self) -> libc::c_int {
        self.writer
    }

    /// COMMAND's process group is empty: the guardian exits without killing.
    pub fn disarm(&mut self) {
        if self.writer >= 0 {
            // SAFETY: a one-byte write from a valid buffer, then closing our fd.
            unsafe {
                libc::write(self.writer, b"d".as_ptr().cast(), 1);
                libc::close(self.writer);
            }
            self.writer = -1;
        }
    }
}

/// In COMMAND's process before exec: tells the guardian its process group.
///
/// # Safety
/// Only for the forked child before exec; write(2) is async-signal-safe.
pub unsafe fn announce(pipe: libc::c_int) {
    let pgid = libc::getpid().to_ne_bytes();
    libc::write(pipe, pgid.as_ptr().cast(), pgid.len());
}

impl Drop for Guardian {
    /// Reaps the guardian, disarming it first unless rlock is panicking (then
    /// COMMAND's group may still run, and the guardian must kill it). Dropped
    /// last in `run`, so its exit is not on the path to the release.
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        self.disarm();
        // SAFETY: the pid is our child; the guardian exits right after reading.
        unsafe {
            let mut status = 0;
            while libc::waitpid(self.pid, &mut status, 0) < 0
                && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
            {}
        }
    }
}

/// The guardian's whole life, in the forked child.
unsafe fn guard(reader: libc::c_int, writer: libc::c_int) -> ! {
    libc::close(writer);
    // Hold none of rlock's descriptors (its Redis socket, its stdout pipe): only
    // the read end of the pipe.
    if reader > 0 {
        libc::syscall(libc::SYS_close_range, 0u32, (reader - 1) as u32, 0u32);
    }
    libc::syscall(libc::SYS_close_range, (reader + 1) as u32, u32::MAX, 0u32);
    // Out of rlock's process group and deaf to its signals: a Ctrl-C or a
    // `kill -TERM -PGID` aimed at rlock must not take the guardian down with it.
    libc::setpgid(0, 0);
    let mut all: libc::sigset_t = std::mem::zeroed();
    libc::sigfillset(&mut all);
    libc::sigprocmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
    let mut pgid_bytes = [0u8; 4];
    if read_full(reader, &mut pgid_bytes) < 4 {
        libc::_exit(0);
    }
    let pgid = libc::pid_t::from_ne_bytes(pgid_bytes);
    let mut done = [0u8; 1];
    if read_full(reader, &mut done) == 0 && pgid > 1 {
        libc::killpg(pgid, libc::SIGKILL);
    }
    libc::_exit(0)
}

/// Reads until `buf` is full or end-of-file; returns the bytes read.
unsafe fn read_full(fd: libc::c_int, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        let n = libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got);
        if n > 0 {
            got += n as usize;
        } else if n == 0 || *libc::__errno_location() != libc::EINTR {
            break;
        }
    }
    got
}
