//! Why rlock could not do what was asked: a typed [`Cause`], which alone
//! decides the exit status, and the lock it concerns, added on the way up
//! ([`Error::in_lock`]) where that is known rather than stored in each cause.
//!
//! Every message is printed as a single line `rlock: <lock>: <cause>`; messages
//! never contain a URL, a password or an owner token.

use std::fmt;

use crate::exit::Exit;
use crate::sys::signal::Signal;

/// The cause of a failure, by what the user can do about it.
#[derive(Debug)]
pub enum Cause {
    /// Bad input: option, duration, URL, NAME, missing COMMAND (exit 2).
    Usage(String),
    /// The server could not be reached, refused us, or answered with an error (exit 69).
    Unavailable {
        /// `host:port` of the server, never the URL.
        server: String,
        /// What went wrong, free of secrets.
        cause: String,
    },
    /// Like `Unavailable`, for a cause that may pass on its own: the server
    /// refused or dropped the connection, did not reply in time, or is
    /// loading, failing over or read-only (exit 69). A run waiting for the
    /// lock waits this out.
    Unreachable {
        /// `host:port` of the server, never the URL.
        server: String,
        /// What went wrong, free of secrets.
        cause: String,
    },
    /// A key of the lock exists with a type or shape rlock did not write
    /// (exit 69): what the server said about it.
    ForeignKey(String),
    /// The lock is held by someone else, or `--wait` elapsed (exit 75 or `-E`).
    NotAcquired {
        /// Who holds it, or how long we waited.
        cause: String,
        /// The status to exit with (`-E`).
        code: u8,
    },
    /// The token does not hold the lock (exit 1, `renew` and `release`):
    /// what was found.
    NotHeld(String),
    /// COMMAND does not exist (exit 127): the program as the user wrote it.
    NotFound(String),
    /// COMMAND exists but cannot be executed (exit 126).
    CannotExecute {
        /// The program as the user wrote it.
        program: String,
        /// Why the kernel refused.
        cause: String,
    },
    /// rlock was interrupted by a signal while waiting; nothing is held (exit 128+N).
    Interrupted(Signal),
    /// The lease lapsed between acquiring and starting COMMAND (rlock was
    /// held up); COMMAND was not started (exit 70).
    LeaseLapsedBeforeStart,
    /// Anything else (exit 125).
    Internal(String),
}

impl Cause {
    /// The exit status for this cause: the only error→status mapping in the crate.
    pub fn exit(&self) -> Exit {
        match self {
            Cause::Usage(_) => Exit::Usage,
            Cause::Unavailable { .. } | Cause::Unreachable { .. } | Cause::ForeignKey(_) => {
                Exit::Unavailable
            }
            Cause::NotAcquired { code, .. } => Exit::NotAcquired(*code),
            Cause::NotHeld(_) => Exit::NotHeld,
            Cause::NotFound(_) => Exit::NotFound,
            Cause::CannotExecute { .. } => Exit::CannotExecute,
            Cause::Interrupted(signal) => Exit::Signal(*signal),
            Cause::LeaseLapsedBeforeStart => Exit::LockLost,
            Cause::Internal(_) => Exit::Internal,
        }
    }

    /// Whether a message of this cause names the lock it concerns (usage and
    /// internal messages say what they need themselves).
    fn names_its_lock(&self) -> bool {
        !matches!(self, Cause::Usage(_) | Cause::Internal(_))
    }
}

/// A cause, and the lock it concerns once that is known.
#[derive(Debug)]
pub struct Error {
    cause: Cause,
    lock: Option<String>,
    /// A request went out and no reply came in time: set where the timeout
    /// is detected ([`Error::without_reply`]), never read from the message.
    no_reply: bool,
}

impl From<Cause> for Error {
    fn from(cause: Cause) -> Self {
        Error {
            cause,
            lock: None,
            no_reply: false,
        }
    }
}

impl Error {
    /// A usage error with this message.
    pub fn usage(msg: impl Into<String>) -> Self {
        Cause::Usage(msg.into()).into()
    }

    /// A failure of rlock itself with this message.
    pub fn internal(msg: impl Into<String>) -> Self {
        Cause::Internal(msg.into()).into()
    }

    /// What went wrong.
    pub fn cause(&self) -> &Cause {
        &self.cause
    }

    /// The exit status, decided by the cause alone.
    pub fn exit(&self) -> Exit {
        self.cause.exit()
    }

    /// Says which lock(s) the error concerns, unless it says so already: the
    /// context added on the way up, where the lock is known.
    pub fn in_lock(mut self, name: &str) -> Self {
        if self.lock.is_none() && !name.is_empty() && self.cause.names_its_lock() {
            self.lock = Some(name.to_owned());
        }
        self
    }

    /// The same cause, said of `name` even if another lock was named (a
    /// failure met on one of several locks, reported for them all).
    pub fn for_locks(mut self, name: &str) -> Self {
        self.lock = None;
        self.in_lock(name)
    }

    /// The same server error, for a request that got no reply in time: it
    /// may have been carried out (the server was stalled, not gone). Other
    /// causes are left as they are.
    pub fn without_reply(mut self) -> Self {
        self.no_reply = matches!(
            self.cause,
            Cause::Unavailable { .. } | Cause::Unreachable { .. }
        );
        self
    }

    /// True when a request may have been carried out though no reply came
    /// in time (the server was stalled, not gone).
    pub fn reply_timed_out(&self) -> bool {
        self.no_reply
    }

    /// True when the server could not be used for a reason that may pass on
    /// its own (a restart, a failover): waiting may be worth it.
    pub fn is_transient(&self) -> bool {
        matches!(self.cause, Cause::Unreachable { .. })
    }

    /// The same error, no longer worth waiting for.
    pub fn settled(self) -> Self {
        let cause = match self.cause {
            Cause::Unreachable { server, cause } => Cause::Unavailable { server, cause },
            other => other,
        };
        Error { cause, ..self }
    }

    /// The same error with more said about its server trouble (`; …`).
    pub fn with_more(self, more: &str) -> Self {
        let cause = match self.cause {
            Cause::Unavailable { server, cause } => Cause::Unavailable {
                server,
                cause: format!("{cause}{more}"),
            },
            Cause::Unreachable { server, cause } => Cause::Unreachable {
                server,
                cause: format!("{cause}{more}"),
            },
            other => other,
        };
        Error { cause, ..self }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Usage(msg) | Cause::Internal(msg) => f.write_str(msg),
            Cause::LeaseLapsedBeforeStart => f.write_str(
                "lock lost: the lease lapsed before COMMAND could start (rlock was held up); COMMAND was not started",
            ),
            Cause::Unavailable { server, cause } | Cause::Unreachable { server, cause } => {
                write!(f, "server {server} unavailable: {cause}")
            }
            Cause::ForeignKey(cause) | Cause::NotHeld(cause) => f.write_str(cause),
            Cause::NotAcquired { cause, .. } => write!(f, "not acquired: {cause}"),
            Cause::NotFound(program) => {
                write!(f, "command not found: {}", crate::report::quote(program))?;
                // One word holding a whole shell command line: rlock runs
                // COMMAND directly, without a shell.
                if program.contains([' ', '|', '&', ';', '<', '>', '(', '$', '`', '*']) {
                    f.write_str(
                        " (COMMAND runs without a shell: for a shell command line use -c 'STRING' or -- sh -c 'STRING')",
                    )?;
                }
                Ok(())
            }
            Cause::CannotExecute { program, cause } => write!(
                f,
                "cannot execute {}: {cause}",
                crate::report::quote(program)
            ),
            Cause::Interrupted(signal) => {
                write!(f, "interrupted by {signal} while waiting; nothing acquired")
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.lock {
            Some(lock) => write!(f, "{lock}: {}", self.cause),
            None => write!(f, "{}", self.cause),
        }
    }
}

impl std::error::Error for Error {}

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_maps_to_its_status() {
        assert_eq!(Error::usage("x").exit().code(), 2);
        let unavailable = Error::from(Cause::Unavailable {
            server: "h:1".into(),
            cause: "refused".into(),
        });
        assert_eq!(unavailable.exit().code(), 69);
        assert_eq!(
            unavailable.in_lock("a").to_string(),
            "a: server h:1 unavailable: refused"
        );
        let taken = Error::from(Cause::NotAcquired {
            cause: "held".into(),
            code: 3,
        })
        .in_lock("a");
        assert_eq!(taken.exit().code(), 3);
        assert_eq!(taken.to_string(), "a: not acquired: held");
        let missing = Error::from(Cause::NotFound("x\ny".into())).in_lock("a");
        assert_eq!(missing.exit().code(), 127);
        assert_eq!(missing.to_string(), "a: command not found: 'x\\ny'");
        let interrupted = Error::from(Cause::Interrupted(Signal::INT)).in_lock("a");
        assert_eq!(interrupted.exit().code(), 130);
        assert!(interrupted.to_string().contains("SIGINT"));
        // Usage messages say what they need; the first lock named stays.
        assert_eq!(Error::usage("bad").in_lock("a").to_string(), "bad");
        assert_eq!(
            interrupted.in_lock("b").to_string().split(':').next(),
            Some("a")
        );
    }

    #[test]
    fn a_timeout_is_a_flag_not_words() {
        let unreachable = || {
            Error::from(Cause::Unreachable {
                server: "h:1".into(),
                cause: "no reply within 2s".into(),
            })
        };
        // The words alone do not make a timeout.
        assert!(!unreachable().reply_timed_out());
        let timed_out = unreachable().without_reply();
        assert!(timed_out.reply_timed_out());
        // The flag outlives what is added on the way up, and only the flag
        // changes: the message and the status stay those of the cause.
        let later = timed_out.in_lock("a").with_more("; more").settled();
        assert!(later.reply_timed_out());
        assert_eq!(
            later.to_string(),
            "a: server h:1 unavailable: no reply within 2s; more"
        );
        assert_eq!(later.exit().code(), 69);
        assert!(!later.is_transient());
        // Only a server's error can lack a reply.
        assert!(!Error::internal("x").without_reply().reply_timed_out());
    }
}
