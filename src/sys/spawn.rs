//! Starting COMMAND without copying rlock's address space.
//!
//! `fork` copies the page tables of rlock (its threads, its heap) only for the
//! child to throw them away at `execve`; on the path from a handoff to
//! COMMAND that copy cost more than the Redis round trip. Like `posix_spawn`,
//! this uses `clone(CLONE_VM | CLONE_VFORK)`: the child runs on a stack of its
//! own in rlock's memory while the calling thread waits, and takes the steps
//! `posix_spawn` cannot (its own process group, telling the guardian,
//! `PR_SET_PDEATHSIG`, the terminal) before `execve`.
//!
//! The child shares rlock's memory until `execve`, so it may only make system
//! calls on data prepared beforehand: no allocation, no locks. All signals are
//! blocked across the `clone`, so no handler of rlock's runs in the child;
//! the child resets the dispositions rlock changed before unblocking them.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

/// The child's stack: enough for the few libc calls it makes.
const STACK: usize = 64 * 1024;

/// What the child needs, prepared by the parent (the child must not allocate).
struct Job {
    path: CString,
    argv: Vec<*const libc::c_char>,
    /// `/bin/sh path args...`, for a file execve refuses with ENOEXEC.
    sh_argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    guardian: libc::c_int,
    foreground: bool,
    parent: libc::pid_t,
    /// errno of the step that failed in the child, 0 when `execve` succeeded.
    error: AtomicI32,
}

/// Starts `path` with `argv` (`argv[0]` as given) and the environment with
/// `env`'s variables set (or, given None, left out), in a new process group, with default signal dispositions and an
/// empty signal mask; returns its pid once `execve` has succeeded. With
/// `foreground`, its group takes the terminal on stdin.
pub fn spawn(
    path: &Path,
    argv: &[OsString],
    env: &[(&str, Option<String>)],
    foreground: bool,
    guardian: libc::c_int,
) -> io::Result<super::process::Pid> {
    let invalid = |_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in an argument");
    let path = CString::new(path.as_os_str().as_bytes()).map_err(invalid)?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(invalid))
        .collect::<io::Result<_>>()?;
    let vars = environment(env).map_err(invalid)?;
    let pointers = |strings: &[CString]| {
        let mut p: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        p.push(std::ptr::null());
        p
    };
    // What execvp (and so std's Command) does with a file the kernel will not
    // run (ENOEXEC: an executable script without `#!`): run it with /bin/sh.
    let sh = c"/bin/sh";
    let mut sh_argv: Vec<*const libc::c_char> = vec![sh.as_ptr(), path.as_ptr()];
    sh_argv.extend(args.iter().skip(1).map(|a| a.as_ptr()));
    sh_argv.push(std::ptr::null());
    let job = Job {
        path,
        argv: pointers(&args),
        sh_argv,
        envp: pointers(&vars),
        guardian,
        foreground,
        // SAFETY: getpid has no preconditions.
        parent: unsafe { libc::getpid() },
        error: AtomicI32::new(0),
    };
    // Outlives the child's use of it: the parent resumes only after the
    // child's execve or _exit.
    let stack = Stack::new(STACK)?;
    // SAFETY: sigfillset initialises the set; pthread_sigmask changes only this
    // thread's mask, restored right after the clone.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&job as *const Job).cast_mut().cast(),
        );
        let err = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(err);
        }
        pid
    };
    drop(stack);
    match job.error.load(Ordering::SeqCst) {
        0 => Ok(super::process::Pid::from_raw(pid)),
        errno => {
            // SAFETY: reaps the child that failed before execve.
            unsafe {
                let mut status = 0;
                while libc::waitpid(pid, &mut status, 0) < 0
                    && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
                {
                }
            }
            Err(io::Error::from_raw_os_error(errno))
        }
    }
}

/// rlock's environment with `env` set (replacing any same-named variable).
fn environment(env: &[(&str, Option<String>)]) -> Result<Vec<CString>, std::ffi::NulError> {
    let mut vars = Vec::new();
    for (key, value) in std::env::vars_os() {
        if env.iter().any(|(k, _)| key.as_bytes() == k.as_bytes()) {
            continue;
        }
        let mut entry = key.as_bytes().to_vec();
        entry.push(b'=');
        entry.extend_from_slice(value.as_bytes());
        vars.push(CString::new(entry)?);
    }
    for (key, value) in env {
        if let Some(value) = value {
            vars.push(CString::new(format!("{key}={value}"))?);
        }
    }
    Ok(vars)
}

/// The child, until execve. Only system calls on the prepared `Job`.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: arg is the parent's Job, alive while the parent waits for us.
    let job = unsafe { &*(arg as *const Job) };
    let fail = |job: &Job| -> ! {
        // SAFETY: errno is readable; _exit ends the child without unwinding.
        unsafe {
            job.error
                .store((*libc::__errno_location()).max(1), Ordering::SeqCst);
            libc::_exit(127)
        }
    };
    // SAFETY: async-signal-safe calls only, on data prepared by the parent.
    unsafe {
        if libc::setpgid(0, 0) != 0 {
            fail(job);
        }
        crate::sys::guardian::announce(job.guardian);
        if job.foreground {
            // rlock ignores SIGTTOU, and so does this process until
            // restore_for_child: a background group may take the terminal.
            libc::tcsetpgrp(0, libc::getpid());
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            fail(job);
        }
        // rlock may have died before prctl took effect.
        if libc::getppid() != job.parent {
            libc::_exit(128 + libc::SIGKILL);
        }
        crate::sys::signals::restore_for_child();
        libc::execve(job.path.as_ptr(), job.argv.as_ptr(), job.envp.as_ptr());
        if *libc::__errno_location() == libc::ENOEXEC {
            libc::execve(job.sh_argv[0], job.sh_argv.as_ptr(), job.envp.as_ptr());
            *libc::__errno_location() = libc::ENOEXEC;
        }
    }
    fail(job)
}

/// A stack for a child started with `clone`: an anonymous mapping whose lowest
/// page is inaccessible, so an overflow faults instead of writing into rlock's
/// memory.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    /// `size` usable bytes above a guard page.
    fn new(size: usize) -> io::Result<Stack> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = size + page;
        // SAFETY: a fresh private anonymous mapping, checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack { base, len };
        // SAFETY: the lowest page of our own mapping.
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// Where the stack starts (it grows down), 16-byte aligned.
    fn top(&self) -> *mut libc::c_void {
        ((self.base as usize + self.len) & !15) as *mut libc::c_void
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no longer used.
        unsafe { libc::munmap(self.base, self.len) };
    }
}
