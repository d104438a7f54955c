//! The guardian: a small forked process that stops COMMAND's whole process
//! group when the lease ends, and kills it if rlock dies.
//!
//! It is a process of its own, not a thread of rlock's, because rlock may be
//! the thing that stalls: stopped with SIGSTOP, frozen in a cgroup, starved,
//! or blocked in a renewal that the network holds up. The guardian keeps the
//! lease's deadlines on a `CLOCK_BOOTTIME` timerfd (so a suspended host counts
//! too) with a timer slack of 1 ns, and acts on them alone:
//!
//! - at the *term* deadline it sends SIGTERM (and SIGCONT) to COMMAND's group,
//! - at the *kill* deadline, `--kill-after` later and still inside the lease
//!   rlock can prove, it sends SIGKILL;
//! - after SIGKILL it removes the run's `--ready-file` if the file still
//!   names rlock's pid (not before: a file system that hangs must not delay
//!   SIGKILL, and until then the lease holds). When rlock dies, its successor
//!   removes it.
//!
//! rlock moves both deadlines forward after each confirmed renewal. They live
//! in a page shared between the two processes ([`Deadlines`]); the term
//! deadline is claimed with compare-and-swap, so a renewal either moves it
//! before it passes or finds that COMMAND was already told to stop — never
//! both. The pipe from rlock carries COMMAND's process group (written by
//! COMMAND's process before exec, so the guardian knows the group before
//! COMMAND can start anything), wake-ups when a deadline moves earlier, and
//! the final "done". When rlock dies the kernel closes the pipe, the read
//! returns end-of-file, and the guardian SIGKILLs the group: what COMMAND
//! started would otherwise run on without the lock. It then becomes an
//! rlock that gives the holds back once the group is gone
//! ([`successor`](successor::Successor)), so the next holder need not wait
//! out the lease.
//!
//! The functions the guardian runs sit together in one linker section
//! (`.text.hot.rlock_guardian`, which the linker places as one run), so it
//! maps a few pages of rlock's code, not the ten 64 KiB stretches they were
//! spread over: its resident set went from about 450 KiB to 260 KiB.

use std::io;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::sys::clock::Stamp;

mod life;
mod successor;
use life::guard;
use successor::Successor;
pub use successor::{dead_rlock, handed_over, is_successor, lease_still_proven};

/// No deadline.
const NONE: u64 = u64::MAX;
/// The term deadline once SIGTERM went out (or rlock declared the hold lost).
const FIRED: u64 = 0;

/// One message on the pipe: a tag and a value (atomic: shorter than PIPE_BUF).
const RECORD: usize = 16;
const TAG_GROUP: u8 = b'p';
const TAG_WAKE: u8 = b'w';
const TAG_DONE: u8 = b'd';

/// The deadlines, in a page both processes map.
#[repr(C)]
struct Cell {
    /// When SIGTERM is due (a [`Stamp`]), [`NONE`] or [`FIRED`].
    term_at: AtomicU64,
    /// When SIGKILL is due, once SIGTERM went out.
    kill_at: AtomicU64,
    /// When SIGTERM went out (0: not yet).
    fired_at: AtomicU64,
    /// Until when the lease was proven: the last confirmed renewal's kill
    /// deadline, which the stop never moves ([`NONE`] once rlock found the
    /// hold gone). Handed to the successor, which tells by it whether a hold
    /// it finds gone was lost under COMMAND or only lapsed after it.
    proven_until: AtomicU64,
    /// `--ready-file`, absolute, in its first `ready_len` bytes (0: none):
    /// the guardian removes it when it kills COMMAND itself (rlock stopped
    /// or stalled past its lease), as rlock would.
    ready_file: [AtomicU8; READY_FILE_MAX],
    ready_len: AtomicUsize,
    /// rlock's pid, as its ready file names it (`RLOCK_PID=`).
    owner_pid: AtomicU32,
}

/// The longest `--ready-file` path the guardian can remove (a longer one is
/// left to rlock and its successor).
const READY_FILE_MAX: usize = 1024;

/// rlock's handle on the deadlines the guardian enforces.
#[derive(Clone, Copy)]
pub struct Deadlines {
    cell: &'static Cell,
    writer: libc::c_int,
}

impl Deadlines {
    /// Moves the deadlines to (`term`, `kill`), unless COMMAND was already
    /// told to stop; false then (the hold is lost).
    pub fn extend(&self, term: Stamp, kill: Stamp) -> bool {
        let mut current = self.cell.term_at.load(Ordering::SeqCst);
        loop {
            if current == FIRED {
                return false;
            }
            match self.cell.term_at.compare_exchange(
                current,
                term.0.max(1),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
        // After the term deadline: the guardian reads kill_at only once it
        // has claimed term_at, and a late store can only make it earlier.
        self.cell.kill_at.store(kill.0, Ordering::SeqCst);
        self.cell.proven_until.store(kill.0, Ordering::SeqCst);
        true
    }

    /// When SIGTERM is due (None: no deadline, or it went out).
    pub fn term_at(&self) -> Option<Stamp> {
        match self.cell.term_at.load(Ordering::SeqCst) {
            NONE | FIRED => None,
            t => Some(Stamp(t)),
        }
    }

    /// True once COMMAND was told to stop.
    pub fn fired(&self) -> bool {
        self.cell.term_at.load(Ordering::SeqCst) == FIRED
    }

    /// When SIGKILL is due, once COMMAND was told to stop.
    pub fn kill_at(&self) -> Option<Stamp> {
        if !self.fired() {
            return None;
        }
        match self.cell.kill_at.load(Ordering::SeqCst) {
            NONE => None,
            t => Some(Stamp(t)),
        }
    }

    /// When SIGTERM went out, if it did.
    pub fn fired_at(&self) -> Option<Stamp> {
        match self.cell.fired_at.load(Ordering::SeqCst) {
            0 => None,
            t => Some(Stamp(t)),
        }
    }

    /// Claims the term deadline if it has passed. True when this caller must
    /// send SIGTERM now (no one else will).
    pub fn fire_if_due(&self) -> bool {
        fire_if_due(self.cell)
    }

    /// The hold is gone: claims the term deadline now (true when this caller
    /// must send SIGTERM) and brings SIGKILL to `grace` from now, never later
    /// than it was due. Wakes the guardian to act on the new kill deadline.
    pub fn stop_now(&self, grace: Duration) -> bool {
        let now = Stamp::now();
        let mine = self.cell.term_at.swap(FIRED, Ordering::SeqCst) != FIRED;
        if mine {
            self.cell.fired_at.store(now.0.max(1), Ordering::SeqCst);
        }
        let kill = (now + grace).0;
        self.cell.kill_at.fetch_min(kill, Ordering::SeqCst);
        self.cell.proven_until.store(NONE, Ordering::SeqCst);
        self.wake();
        mine
    }

    /// COMMAND's group is gone (seen at `finished`): no deadline is kept any
    /// more. True when the lease held until then: SIGTERM was neither due nor
    /// sent before `finished` (one sent at a group already gone stopped nothing).
    pub fn close(&self, finished: Stamp) -> bool {
        let mut current = self.cell.term_at.load(Ordering::SeqCst);
        loop {
            if current == FIRED {
                return self.fired_at().is_some_and(|at| at > finished);
            }
            if current != NONE && finished >= Stamp(current) {
                return false;
            }
            match self.cell.term_at.compare_exchange(
                current,
                NONE,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => current = now,
            }
        }
    }

    /// True while the lease is proven: SIGTERM is not yet due (or no lease is kept).
    pub fn valid(&self) -> bool {
        match self.cell.term_at.load(Ordering::SeqCst) {
            FIRED => false,
            NONE => true,
            term => !Stamp(term).passed(),
        }
    }

    /// Tells the guardian the `--ready-file` to remove should it stop
    /// COMMAND itself; false when the path is too long to tell.
    pub fn set_ready_file(&self, path: &std::path::Path) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let path = match path.is_absolute() {
            true => path.to_path_buf(),
            false => match std::env::current_dir() {
                Ok(dir) => dir.join(path),
                Err(_) => return false,
            },
        };
        let bytes = path.as_os_str().as_bytes();
        if bytes.len() >= READY_FILE_MAX || bytes.contains(&0) {
            return false;
        }
        self.cell.ready_len.store(0, Ordering::SeqCst);
        for (slot, byte) in self.cell.ready_file.iter().zip(bytes) {
            slot.store(*byte, Ordering::Relaxed);
        }
        self.cell.ready_len.store(bytes.len(), Ordering::SeqCst);
        true
    }

    /// Lets the guardian look at the deadlines again. False when it is gone
    /// (then nothing but rlock enforces them).
    pub fn wake(&self) -> bool {
        send(self.writer, TAG_WAKE, 0)
    }
}

#[unsafe(link_section = ".text.hot.rlock_guardian")]
fn fire_if_due(cell: &Cell) -> bool {
    let term = cell.term_at.load(Ordering::SeqCst);
    if term == FIRED || term == NONE || Stamp::now() < Stamp(term) {
        return false;
    }
    let won = cell
        .term_at
        .compare_exchange(term, FIRED, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    if won {
        cell.fired_at.store(Stamp::now().0.max(1), Ordering::SeqCst);
    }
    won
}

/// A guardian forked first thing in `main` ([`start_early`]), waiting for
/// `run` to take it.
static EARLY: std::sync::Mutex<Option<Guardian>> = std::sync::Mutex::new(None);

/// Forks the guardian before anything else happens in the process, when the
/// command line may be `run`: the fork is cheapest while rlock is one thread
/// with almost nothing mapped, and the guardian then shares none of the pages
/// rlock's start-up touches (its resident set stays small). A failure is left
/// for [`Guardian::start`] to meet again and report.
pub fn start_early() {
    // The clock's first read finds it in the vDSO: done here, the guardian
    // inherits the answer rather than running that code (and paging it in).
    let _ = Stamp::now();
    if let Ok(guardian) = Guardian::start()
        && let Ok(mut early) = EARLY.lock()
    {
        *early = Some(guardian);
    }
}

/// The guardian [`start_early`] forked, if any (dropping it disarms and
/// reaps it).
pub fn take_early() -> Option<Guardian> {
    EARLY.lock().ok()?.take()
}

/// The running guardian, owned by rlock's main thread.
pub struct Guardian {
    pid: libc::pid_t,
    /// Write end of the pipe (close-on-exec, so COMMAND never holds it); -1
    /// once disarmed.
    writer: libc::c_int,
    cell: &'static Cell,
    /// What it becomes should rlock die while COMMAND runs.
    successor: Option<Successor>,
}

impl Guardian {
    /// Forks the guardian. Call from the main thread before spawning COMMAND,
    /// and before any other thread exists: a single-threaded fork is cheaper.
    ///
    /// A fork, not a clone sharing rlock's memory: the kernel's OOM killer (and,
    /// before Linux 5.16, a core dump) takes every process sharing the memory
    /// of the one it kills, and the guardian must outlive exactly that. Only
    /// the one page of deadlines is shared.
    #[inline(never)]
    #[unsafe(link_section = ".text.hot.rlock_guardian")]
    pub fn start() -> io::Result<Self> {
        let cell = shared_cell()?;
        let successor = Successor::prepare();
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let (reader, writer) = (fds[0], fds[1]);
        // A guardian that stopped reading (SIGSTOPped) must not block rlock:
        // a full pipe reads as a guardian gone.
        // SAFETY: fcntl on our own descriptor.
        unsafe {
            let flags = libc::fcntl(writer, libc::F_GETFL);
            libc::fcntl(writer, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        // SAFETY: the child runs only async-signal-safe calls and never
        // returns from this function.
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
            unsafe { guard(reader, writer, cell, successor.as_ref()) }
        }
        // SAFETY: the parent keeps only the write end.
        unsafe { libc::close(reader) };
        Ok(Guardian {
            pid,
            writer,
            cell,
            successor,
        })
    }

    /// The pipe COMMAND's process writes its pid (= its process group id) to
    /// before exec, with [`announce`].
    pub fn pipe(&self) -> libc::c_int {
        self.writer
    }

    /// The deadlines this guardian enforces.
    pub fn deadlines(&self) -> Deadlines {
        Deadlines {
            cell: self.cell,
            writer: self.writer,
        }
    }

    /// Leaves `text` (the run's holds) for the rlock the guardian becomes
    /// should this one die; false when it cannot.
    pub fn hand_over(&self, text: &str) -> bool {
        self.successor
            .as_ref()
            .is_some_and(|s| s.write(text.as_bytes()).is_ok())
    }

    /// COMMAND's process group is empty: the guardian exits without killing.
    pub fn disarm(&mut self) {
        if self.writer >= 0 {
            send(self.writer, TAG_DONE, 0);
            // SAFETY: our own descriptor.
            unsafe { libc::close(self.writer) };
            self.writer = -1;
        }
    }
}

/// In COMMAND's process before exec: tells the guardian its process group.
///
/// # Safety
/// Only for the forked child before exec; write(2) is async-signal-safe.
pub unsafe fn announce(pipe: libc::c_int) {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
        send(pipe, TAG_GROUP, libc::getpid() as u64);
    }
}

/// One record on the pipe; false when the guardian is gone. Async-signal-safe.
fn send(fd: libc::c_int, tag: u8, value: u64) -> bool {
    if fd < 0 {
        return false;
    }
    let mut record = [0u8; RECORD];
    record[0] = tag;
    record[8..].copy_from_slice(&value.to_ne_bytes());
    loop {
        // SAFETY: a write from a valid buffer of RECORD bytes.
        let n = unsafe { libc::write(fd, record.as_ptr().cast(), RECORD) };
        if n == RECORD as isize {
            return true;
        }
        // SAFETY: reads this thread's errno.
        if n < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
            continue;
        }
        return false;
    }
}

fn shared_cell() -> io::Result<&'static Cell> {
    // SAFETY: a fresh anonymous shared mapping; never unmapped, so the
    // reference lives as long as the process.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            std::mem::size_of::<Cell>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let cell = page.cast::<Cell>();
    // SAFETY: the mapping is large enough and suitably aligned (a page).
    unsafe {
        cell.write(Cell {
            term_at: AtomicU64::new(NONE),
            kill_at: AtomicU64::new(NONE),
            fired_at: AtomicU64::new(0),
            proven_until: AtomicU64::new(NONE),
            ready_file: [const { AtomicU8::new(0) }; READY_FILE_MAX],
            ready_len: AtomicUsize::new(0),
            owner_pid: AtomicU32::new(std::process::id()),
        });
        Ok(&*cell)
    }
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
        // SAFETY: the pid is our child; the guardian exits right after reading
        // (continued first, should someone have stopped it).
        unsafe {
            libc::kill(self.pid, libc::SIGCONT);
            let mut status = 0;
            while libc::waitpid(self.pid, &mut status, 0) < 0
                && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
            {}
        }
    }
}
