//! The exit statuses of `rlock`, one variant per row of the contract's table
//! (README: "Exit status"). Nothing else in the crate knows these numbers.

use std::process::ExitCode;

/// How `rlock` ends. Converted to a process status only in `main`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// COMMAND ran and exited with this status (or 128+N when killed by signal N).
    Child(u8),
    /// 0: acquire/renew/release succeeded.
    Success,
    /// 1: `renew`/`release`: the token does not hold the lock.
    NotHeld,
    /// 1: `check`: a check warned (none failed).
    Warnings,
    /// 2: usage error (bad option, duration, URL, NAME, missing COMMAND).
    Usage,
    /// 69: server unavailable: cannot connect or authenticate, server error.
    Unavailable,
    /// 70: lock lost or lease ended while COMMAND ran; COMMAND was stopped.
    LockLost,
    /// 75 by default: lock not acquired (taken, or `--wait` elapsed); `-E` changes it.
    NotAcquired(u8),
    /// 124: COMMAND ran past `--max-hold` and was stopped (as `timeout(1)`).
    TimedOut,
    /// 125: any other failure of rlock itself.
    Internal,
    /// 126: COMMAND found but not executable.
    CannotExecute,
    /// 127: COMMAND not found.
    NotFound,
    /// 128+N: rlock was interrupted by signal N while waiting.
    Signal(crate::sys::signal::Signal),
}

/// The default status for "lock not acquired" (`EX_TEMPFAIL` from sysexits.h).
pub const NOT_ACQUIRED_DEFAULT: u8 = 75;

impl Exit {
    /// The numeric process status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Child(code) => code,
            Exit::Success => 0,
            Exit::NotHeld | Exit::Warnings => 1,
            Exit::Usage => 2,
            Exit::Unavailable => 69,
            Exit::LockLost => 70,
            Exit::NotAcquired(code) => code,
            Exit::TimedOut => 124,
            Exit::Internal => 125,
            Exit::CannotExecute => 126,
            Exit::NotFound => 127,
            Exit::Signal(signal) => signal.exit_status(),
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_match_the_contract_table() {
        assert_eq!(Exit::Child(3).code(), 3);
        assert_eq!(Exit::Usage.code(), 2);
        assert_eq!(Exit::Unavailable.code(), 69);
        assert_eq!(Exit::LockLost.code(), 70);
        assert_eq!(Exit::NotAcquired(NOT_ACQUIRED_DEFAULT).code(), 75);
        assert_eq!(Exit::NotAcquired(9).code(), 9);
        assert_eq!(Exit::TimedOut.code(), 124);
        assert_eq!(Exit::Internal.code(), 125);
        assert_eq!(Exit::CannotExecute.code(), 126);
        assert_eq!(Exit::NotFound.code(), 127);
        assert_eq!(Exit::Signal(crate::sys::signal::Signal::INT).code(), 130);
        assert_eq!(Exit::Signal(crate::sys::signal::Signal::TERM).code(), 143);
    }
}
