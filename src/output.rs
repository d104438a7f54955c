//! Writing results to standard output, with every failure seen.
//!
//! Rust's `stdout()` swallows some failures, and its runtime replaces a
//! closed descriptor 1 with /dev/null, so `rlock acquire >&-` would lose the
//! token silently. These writes go to descriptor 1 directly and report what
//! the kernel said.

use std::io;

/// Writes all of `text` to descriptor 1.
pub fn write_stdout(text: &str) -> io::Result<()> {
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        // SAFETY: a write from a valid buffer of rest.len() bytes.
        let n = unsafe { libc::write(1, rest.as_ptr().cast(), rest.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        rest = &rest[n as usize..];
    }
    Ok(())
}

/// A report for people (`status`, `list`): a reader that went away (`| head`)
/// is no error; anything else that stops the write is (exit 125).
pub fn report(text: &str) -> crate::error::Result<()> {
    match write_stdout(text) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(err) => Err(crate::error::Error::Internal(format!(
            "cannot write to standard output: {err}"
        ))),
    }
}

/// True when descriptor 1 was closed when rlock started. Rust's runtime then
/// puts /dev/null there, opened read-write; a shell's `>/dev/null` opens it
/// write-only, so that one still counts as a place to write to.
pub fn stdout_was_closed() -> bool {
    // SAFETY: fstat and fcntl on descriptor 1 only read its state.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(1, &mut st) != 0 {
            return true;
        }
        let null =
            (st.st_mode & libc::S_IFMT) == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3);
        null && libc::fcntl(1, libc::F_GETFL) & libc::O_ACCMODE == libc::O_RDWR
    }
}
