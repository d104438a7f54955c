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
//!   rlock can prove, it sends SIGKILL.
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
//! started would otherwise run on without the lock.
//!
//! The functions the guardian runs sit together in one linker section
//! (`.text.hot.rlock_guardian`, which the linker places as one run), so it
//! maps a few pages of rlock's code, not the ten 64 KiB stretches they were
//! spread over: its resident set went from about 450 KiB to 260 KiB.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::sys::clock::Stamp;

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
}

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
            unsafe { guard(reader, writer, cell) }
        }
        // SAFETY: the parent keeps only the write end.
        unsafe { libc::close(reader) };
        Ok(Guardian { pid, writer, cell })
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

/// The guardian's whole life, in the forked child: async-signal-safe calls only.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
unsafe fn guard(reader: libc::c_int, writer: libc::c_int, cell: &Cell) -> ! {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
        detach(reader, writer);
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
                pgid = read_order(reader, pgid);
            }
        }
    }
}

/// Keeps only the read end of the pipe, leaves rlock's process group, blocks
/// every signal and asks for precise timers.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
unsafe fn detach(reader: libc::c_int, writer: libc::c_int) {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
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
        // Deadlines to the microsecond, not to the default 50 µs slack or worse.
        libc::prctl(libc::PR_SET_TIMERSLACK, 1);
    }
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
            return true;
        }
        killed
    }
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
/// first if rlock is gone: nothing keeps the lease any more.
#[unsafe(link_section = ".text.hot.rlock_guardian")]
unsafe fn read_order(reader: libc::c_int, pgid: libc::pid_t) -> libc::pid_t {
    // SAFETY: callers keep the contract this function's doc comment states.
    unsafe {
        let mut record = [0u8; RECORD];
        if read_full(reader, &mut record) < RECORD {
            if pgid > 1 {
                libc::killpg(pgid, libc::SIGKILL);
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
