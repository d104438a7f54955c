//! What the guardian becomes when rlock dies while COMMAND runs: once it has
//! sent SIGKILL to COMMAND's group, it executes rlock's own binary again
//! (`/proc/self/exe`, which names the running binary even when the file was
//! replaced on disk meanwhile) with the same command line and environment,
//! plus [`HANDOVER`], which names an inherited file where rlock wrote its
//! holds once it had them. That rlock gives the holds back as soon as
//! COMMAND's group is gone, so the next holder need not wait out the lease.
//! The token is never on a command line, nor in the environment: only in
//! that file, which no other process can open (a memfd, reached through its
//! descriptor alone).
//!
//! Only the file is made before the fork (one system call on the path to
//! COMMAND); the command line and environment are copied when the guardian
//! becomes the successor. It may allocate then: it was forked from a
//! process with one thread, so no lock in the allocator is held by a thread
//! that is not there.

use std::ffi::{CString, c_char};
use std::io;
use std::os::unix::ffi::OsStrExt;

use crate::sys::clock::Stamp;

/// The variable that tells an rlock it was started to give back the holds
/// of one that died, and the descriptor they are in.
pub const HANDOVER: &str = "RLOCK_HANDOVER_FD";

/// The handover file's name (`/memfd:rlock-handover` in /proc), which tells
/// it from any other descriptor.
const MEMFD_NAME: &[u8] = b"rlock-handover\0";

/// The handover file the successor inherits.
pub(super) struct Successor {
    file: libc::c_int,
}

impl Successor {
    /// A fresh handover file (close-on-exec). None for an rlock that is
    /// itself a successor, or when the kernel refuses (then a dead rlock's
    /// holds expire with their lease, as they always could).
    pub(super) fn prepare() -> Option<Successor> {
        if std::env::var_os(HANDOVER).is_some() {
            return None;
        }
        // SAFETY: memfd_create with a valid NUL-terminated name.
        let file = unsafe { libc::memfd_create(MEMFD_NAME.as_ptr().cast(), libc::MFD_CLOEXEC) };
        (file >= 0).then_some(Successor { file })
    }

    /// The descriptor the guardian keeps.
    pub(super) fn descriptor(&self) -> libc::c_int {
        self.file
    }

    /// Writes what the successor needs (rlock's holds) into the file.
    pub(super) fn write(&self, text: &[u8]) -> io::Result<()> {
        // SAFETY: a write from a valid buffer at offset 0 of our own file.
        let n = unsafe { libc::pwrite(self.file, text.as_ptr().cast(), text.len(), 0) };
        if n == text.len() as isize {
            return Ok(());
        }
        Err(io::Error::last_os_error())
    }

    /// In the guardian, COMMAND's group killed: becomes the successor.
    /// Returns only if it could not.
    ///
    /// # Safety
    /// Only in the guardian.
    #[unsafe(link_section = ".text.hot.rlock_guardian")]
    pub(super) unsafe fn become_rlock(&self, proven_until: u64, rlock: u32) {
        let Some((strings, argc)) = command_line(self.file, proven_until, rlock) else {
            return;
        };
        let pointers = |range: &[CString]| {
            let mut list: Vec<*const c_char> = range.iter().map(|s| s.as_ptr()).collect();
            list.push(std::ptr::null());
            list
        };
        let (argv, envp) = (pointers(&strings[..argc]), pointers(&strings[argc..]));
        // SAFETY: our own descriptor; the lists end in null and point into
        // `strings`, alive until execve returns (it returns only on failure).
        unsafe {
            libc::fcntl(self.file, libc::F_SETFD, 0);
            // The guardian blocked every signal; the successor starts as
            // any rlock does.
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            libc::execve(c"/proc/self/exe".as_ptr(), argv.as_ptr(), envp.as_ptr());
        }
    }
}

/// rlock's command line, then its environment with [`HANDOVER`] naming
/// `file` and, after commas, until when the lease was proven (a [`Stamp`];
/// `u64::MAX` once rlock found the hold gone) and the dead rlock's pid; and
/// where the environment starts.
fn command_line(file: libc::c_int, proven_until: u64, rlock: u32) -> Option<(Vec<CString>, usize)> {
    let mut strings = Vec::new();
    for arg in std::env::args_os() {
        strings.push(CString::new(arg.as_bytes()).ok()?);
    }
    let argc = strings.len();
    let value = format!("{file},{proven_until},{rlock}");
    strings.push(CString::new(format!("{HANDOVER}={value}")).ok()?);
    for (name, value) in std::env::vars_os() {
        if name == HANDOVER {
            continue;
        }
        let mut pair = name.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        strings.push(CString::new(pair).ok()?);
    }
    Some((strings, argc))
}

/// Field `n` of [`HANDOVER`]'s value (0: the descriptor; 1: until when the
/// lease was proven); None outside a successor.
fn handover_field(n: usize) -> Option<String> {
    let value = std::env::var_os(HANDOVER)?;
    Some(value.to_string_lossy().split(',').nth(n)?.to_owned())
}

/// The one line for a [`HANDOVER`] set by hand.
fn refused() -> io::Error {
    io::Error::other(format!("{HANDOVER} is rlock's own; unset it"))
}

/// In a successor: what the rlock that died handed over (empty when it died
/// before writing it); None in any other rlock.
pub fn handed_over() -> Option<io::Result<String>> {
    std::env::var_os(HANDOVER)?;
    let Some(fd) = handover_field(0).and_then(|fd| fd.parse::<libc::c_int>().ok()) else {
        return Some(Err(refused()));
    };
    let read = || -> io::Result<String> {
        // Only the file rlock made: a variable set by hand names no memfd.
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(|_| refused())?;
        let name = &MEMFD_NAME[..MEMFD_NAME.len() - 1];
        let ours = link
            .as_os_str()
            .as_bytes()
            .strip_prefix(b"/memfd:")
            .is_some_and(|rest| rest.starts_with(name));
        if !ours {
            return Err(refused());
        }
        use std::io::{Read, Seek};
        use std::os::fd::FromRawFd;
        // SAFETY: our own descriptor, checked above, owned and closed here.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        file.seek(io::SeekFrom::Start(0))?;
        let mut text = Vec::new();
        file.read_to_end(&mut text)?;
        String::from_utf8(text).map_err(io::Error::other)
    };
    Some(read())
}

/// In a successor: whether the dead rlock's lease is still proven now. A
/// release answered before that bound saw the hold gone while the lease
/// held: it was lost under COMMAND (or rlock had found it gone). One
/// answered later may only have lapsed after COMMAND was killed, as the
/// deadlines see to.
pub fn lease_still_proven() -> bool {
    handover_field(1)
        .and_then(|t| t.parse::<u64>().ok())
        .is_some_and(|t| Stamp::now() < Stamp(t))
}

/// The pid of the rlock whose holds a successor gives back.
pub fn dead_rlock() -> Option<u32> {
    handover_field(2).and_then(|pid| pid.parse().ok())
}

/// Whether this rlock is a successor (see [`handed_over`]).
pub fn is_successor() -> bool {
    std::env::var_os(HANDOVER).is_some()
}
