//! Writing results to standard output, with every failure seen.
//!
//! Rust's `stdout()` swallows some failures, and its runtime replaces a
//! closed descriptor 1 with /dev/null, so `rlock acquire >&-` would lose the
//! token silently. These writes go to descriptor 1 directly and report what
//! the kernel said.

use std::io;

pub use crate::sys::stdio::{stdout_was_closed, write_stdout};

/// A report for people (`status`, `list`): a reader that went away (`| head`)
/// is no error; anything else that stops the write is (exit 125).
pub fn report(text: &str) -> crate::error::Result<()> {
    match write_stdout(text) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(err) => Err(crate::error::Error::internal(format!(
            "cannot write to standard output: {err}"
        ))),
    }
}
