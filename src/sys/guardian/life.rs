//! The guardian's side: what the forked process does, from its start to its
//! end, with async-signal-safe calls only.

use std::sync::atomic::Ordering;

use super::successor::Successor;
use super::{Cell, FIRED, NONE, READY_FILE_MAX, RECORD, TAG_DONE, TAG_GROUP, fire_if_due};
use crate::sys::clock::Stamp;

/// The guardian's whole life, in the forked child: async-signal-safe calls only.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
pub(super) unsafe fn guard(
    reader: libc::c_int,
    writer: libc::c_int,
    cell: &Cell,
    successor: Option<&Successor>,
) -> ! {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
        detach(reader, writer, successor);
        let timer = libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_CLOEXEC);
        let mut pgid: libc::pid_t = 0;
        let mut killed = false;
        loop {
            if pgid > 1 {
                killed = signal_when_due(cell, pgid, killed);
            }
            let next = if pgid <= 1 || killed {
                NONE
            } else {
                next_deadline(cell)
            };
            let mut fds = [
                libc::pollfd {
                    fd: reader,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: timer,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let wait_ms = wake_at(timer, next);
            let n = libc::poll(fds.as_mut_ptr(), if timer >= 0 { 2 } else { 1 }, wait_ms);
            if n < 0 {
                continue;
            }
            if fds[1].revents & libc::POLLIN != 0 {
                let mut expirations = [0u8; 8];
                libc::read(timer, expirations.as_mut_ptr().cast(), 8);
            }
            if fds[0].revents != 0 {
                pgid = read_order(reader, pgid, successor, cell);
            }
        }
    }
}

/// Keeps only the read end of the pipe (and what its successor needs), leaves
/// rlock's process group, blocks every signal and asks for precise timers.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
unsafe fn detach(reader: libc::c_int, writer: libc::c_int, successor: Option<&Successor>) {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
        libc::close(writer);
        // Hold none of rlock's descriptors (its Redis socket, its stdout pipe): only
        // the read end of the pipe, and for a successor the handover file and
        // stderr (where it says what it could not do).
        let mut keep = [reader, -1, -1];
        if let Some(successor) = successor {
            keep = [reader, libc::STDERR_FILENO, successor.descriptor()];
        }
        close_all_but(keep);
        // Out of rlock's process group and deaf to its signals: a Ctrl-C or a
        // `kill -TERM -PGID` aimed at rlock must not take the guardian down with it.
        libc::setpgid(0, 0);
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
        // Deadlines to the microsecond, not to the default 50 µs slack or worse.
        libc::prctl(libc::PR_SET_TIMERSLACK, 1);
    }
}

/// Closes every descriptor but those in `keep` (-1: none).
#[unsafe(link_section = ".text.hot.rlock_guardian")]
unsafe fn close_all_but(mut keep: [libc::c_int; 3]) {
    keep.sort_unstable();
    let mut from: libc::c_int = 0;
    for fd in keep.into_iter().filter(|fd| *fd >= 0) {
        if fd > from {
            // SAFETY: close_range closes descriptors only.
            unsafe { libc::syscall(libc::SYS_close_range, from as u32, (fd - 1) as u32, 0u32) };
        }
        from = from.max(fd + 1);
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from as u32, u32::MAX, 0u32) };
}

/// Sends group `pgid` SIGTERM (and SIGCONT) when its deadline is due, and
/// SIGKILL once, when that one is; returns whether SIGKILL went out.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
unsafe fn signal_when_due(cell: &Cell, pgid: libc::pid_t, killed: bool) -> bool {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
        if fire_if_due(cell) {
            libc::killpg(pgid, libc::SIGTERM);
            libc::killpg(pgid, libc::SIGCONT);
        }
        if !killed
            && cell.term_at.load(Ordering::SeqCst) == FIRED
            && Stamp::now() >= Stamp(cell.kill_at.load(Ordering::SeqCst))
        {
            libc::killpg(pgid, libc::SIGKILL);
            // Only now: the file may sit on a file system that hangs, and
            // nothing may delay SIGKILL (until then the lease still holds).
            remove_ready_file(cell);
            return true;
        }
        killed
    }
}

/// Removes the `--ready-file` rlock named, if rlock wrote what it holds
/// (its first line, `RLOCK_PID=`: another run may have written the path
/// since): the lease can no longer be proven, so no probe may read the lock
/// as held. Only async-signal-safe calls: open, read, close, unlink.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
unsafe fn remove_ready_file(cell: &Cell) {
    let len = cell.ready_len.load(Ordering::SeqCst);
    if len == 0 || len >= READY_FILE_MAX {
        return;
    }
    let mut path = [0u8; READY_FILE_MAX];
    for (byte, slot) in path.iter_mut().zip(&cell.ready_file[..len]) {
        *byte = slot.load(Ordering::Relaxed);
    }
    let mut head = [0u8; 32];
    // SAFETY: `path` is NUL-terminated (len < READY_FILE_MAX, the rest zero);
    // the descriptor is ours and closed here.
    let read = unsafe {
        let fd = libc::open(
            path.as_ptr().cast(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        );
        if fd < 0 {
            return;
        }
        let n = read_full(fd, &mut head);
        libc::close(fd);
        n
    };
    let mut digits = [0u8; 10];
    let digits = write_pid(&mut digits, cell.owner_pid.load(Ordering::SeqCst));
    if names_pid(&head[..read], digits) {
        // SAFETY: as above.
        unsafe { libc::unlink(path.as_ptr().cast()) };
    }
}

/// `pid` in decimal at the end of `buf`; returns the digits.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
fn write_pid(buf: &mut [u8], mut pid: u32) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 || at == 0 {
            break;
        }
    }
    &buf[at..]
}

/// Whether a ready file's first bytes are `RLOCK_PID=<digits>\n`.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
fn names_pid(head: &[u8], digits: &[u8]) -> bool {
    const KEY: &[u8] = b"RLOCK_PID=";
    let end = KEY.len() + digits.len();
    head.starts_with(KEY)
        && head.get(KEY.len()..end) == Some(digits)
        && head.get(end) == Some(&b'\n')
}

/// The next deadline to wake for: SIGTERM's, or SIGKILL's once SIGTERM went out.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
fn next_deadline(cell: &Cell) -> u64 {
    match cell.term_at.load(Ordering::SeqCst) {
        FIRED => cell.kill_at.load(Ordering::SeqCst),
        term => term,
    }
}

/// Sets `timer` to ring at `next` (none: no deadline); returns poll's timeout
/// in ms, which only counts without a timerfd.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
unsafe fn wake_at(timer: libc::c_int, next: u64) -> libc::c_int {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
        if next == NONE {
            return -1;
        }
        if timer < 0 {
            // No timerfd: poll's own timeout, on the monotonic clock.
            let left = Stamp(next).remaining();
            return left.as_millis().min(60_000) as libc::c_int;
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                // `as _`: time_t is a deprecated alias on musl.
                tv_sec: (next / 1_000_000_000) as _,
                tv_nsec: (next % 1_000_000_000).max(1) as libc::c_long,
            },
        };
        libc::timerfd_settime(timer, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut());
        -1
    }
}

/// Reads rlock's next record: the group to guard (returned), or done. When
/// rlock is done or gone (end of file), the guardian exits, killing the group
/// first if rlock is gone: nothing keeps the lease any more. Then it becomes
/// rlock's successor, which gives the holds back once the group is gone.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
unsafe fn read_order(
    reader: libc::c_int,
    pgid: libc::pid_t,
    successor: Option<&Successor>,
    cell: &Cell,
) -> libc::pid_t {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
        let mut record = [0u8; RECORD];
        if read_full(reader, &mut record) < RECORD {
            if pgid > 1 {
                let proven_until = cell.proven_until.load(Ordering::SeqCst);
                libc::killpg(pgid, libc::SIGKILL);
                if let Some(successor) = successor {
                    successor.become_rlock(proven_until, cell.owner_pid.load(Ordering::SeqCst));
                }
                // No successor (or it could not start) to remove it.
                remove_ready_file(cell);
            }
            libc::_exit(0);
        }
        let mut value = [0u8; 8];
        value.copy_from_slice(&record[8..]);
        let value = u64::from_ne_bytes(value);
        match record[0] {
            TAG_GROUP => value as libc::pid_t,
            TAG_DONE => libc::_exit(0),
            _ => pgid,
        }
    }
}

/// Reads until `buf` is full or end-of-file; returns the bytes read.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
unsafe fn read_full(fd: libc::c_int, buf: &mut [u8]) -> usize {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_file_is_known_by_its_first_line() {
        let mut digits = [0u8; 10];
        assert_eq!(write_pid(&mut digits, 0), b"0");
        let mut digits = [0u8; 10];
        assert_eq!(write_pid(&mut digits, 4_294_967_295), b"4294967295");
        let mut digits = [0u8; 10];
        let pid = write_pid(&mut digits, 42);
        assert!(names_pid(b"RLOCK_PID=42\nRLOCK_NAME=a\n", pid));
        assert!(!names_pid(b"RLOCK_PID=421\n", pid));
        assert!(!names_pid(b"RLOCK_PID=42", pid));
        assert!(!names_pid(b"RLOCK_NAME=a\nRLOCK_PID=42\n", pid));
        assert!(!names_pid(b"", pid));
    }
}
