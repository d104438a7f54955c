//! A signal as rlock reports it: its name, its number and the 128+N exit
//! status it stands for (COMMAND killed by it, or rlock's wait ended by it).
//! One place, so messages and statuses never disagree.

use std::fmt;

/// A signal number with the names and statuses the contract uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal(i32);

impl Signal {
    pub const HUP: Signal = Signal(libc::SIGHUP);
    pub const INT: Signal = Signal(libc::SIGINT);
    pub const QUIT: Signal = Signal(libc::SIGQUIT);
    pub const TERM: Signal = Signal(libc::SIGTERM);
    pub const USR1: Signal = Signal(libc::SIGUSR1);
    pub const USR2: Signal = Signal(libc::SIGUSR2);
    pub const KILL: Signal = Signal(libc::SIGKILL);
    pub const CONT: Signal = Signal(libc::SIGCONT);
    pub const STOP: Signal = Signal(libc::SIGSTOP);
    pub const TSTP: Signal = Signal(libc::SIGTSTP);
    pub const TTIN: Signal = Signal(libc::SIGTTIN);
    pub const TTOU: Signal = Signal(libc::SIGTTOU);

    /// The signal with this number.
    pub const fn from_number(number: i32) -> Self {
        Signal(number)
    }

    /// Its number, for system calls.
    pub const fn number(self) -> i32 {
        self.0
    }

    /// 128+N, the status of a process it ended (255 if out of range).
    pub fn exit_status(self) -> u8 {
        u8::try_from(128 + self.0).unwrap_or(255)
    }

    /// `SIGTERM`, or `signal N` for one rlock has no name for.
    pub fn name(self) -> String {
        let known = match self.0 {
            libc::SIGHUP => "SIGHUP",
            libc::SIGINT => "SIGINT",
            libc::SIGQUIT => "SIGQUIT",
            libc::SIGTERM => "SIGTERM",
            libc::SIGUSR1 => "SIGUSR1",
            libc::SIGUSR2 => "SIGUSR2",
            libc::SIGKILL => "SIGKILL",
            _ => return format!("signal {}", self.0),
        };
        known.to_owned()
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_statuses_agree() {
        assert_eq!(Signal::INT.name(), "SIGINT");
        assert_eq!(Signal::TERM.exit_status(), 143);
        assert_eq!(Signal::from_number(libc::SIGKILL), Signal::KILL);
        assert_eq!(Signal::from_number(64).name(), "signal 64");
        assert_eq!(Signal::from_number(200).exit_status(), 255);
    }
}
