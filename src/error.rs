//! Typed causes of failure, and the one place that maps them to exit statuses.
//!
//! Every message is printed as a single line `rlock: <lock>: <cause>`; messages
//! never contain a URL, a password or an owner token.

use std::fmt;

use crate::exit::Exit;

/// Why rlock could not do what was asked.
#[derive(Debug)]
pub enum Error {
    /// Bad input: option, duration, URL, NAME, missing COMMAND (exit 2).
    Usage(String),
    /// The server could not be reached, refused us, or answered with an error (exit 69).
    Unavailable {
        /// The lock being worked on, when known.
        lock: Option<String>,
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
        /// The lock being worked on, when known.
        lock: Option<String>,
        /// `host:port` of the server, never the URL.
        server: String,
        /// What went wrong, free of secrets.
        cause: String,
    },
    /// A key of the lock exists with a type or shape rlock did not write (exit 69).
    ForeignKey {
        /// The lock name.
        lock: String,
        /// What the server said about the key.
        cause: String,
    },
    /// The lock is held by someone else, or `--wait` elapsed (exit 75 or `-E`).
    NotAcquired {
        /// The lock name.
        lock: String,
        /// Who holds it, or how long we waited.
        cause: String,
        /// The status to exit with (`-E`).
        code: u8,
    },
    /// The token does not hold the lock (exit 1, `renew` and `release`).
    NotHeld {
        /// The lock name.
        lock: String,
        /// What was found.
        cause: String,
    },
    /// COMMAND does not exist (exit 127).
    NotFound {
        /// The lock COMMAND was to run under.
        lock: String,
        /// The program as the user wrote it.
        program: String,
    },
    /// COMMAND exists but cannot be executed (exit 126).
    CannotExecute {
        /// The lock COMMAND was to run under.
        lock: String,
        /// The program as the user wrote it.
        program: String,
        /// Why the kernel refused.
        cause: String,
    },
    /// rlock was interrupted by a signal while waiting; nothing is held (exit 128+N).
    Interrupted {
        /// The lock name.
        lock: String,
        /// The signal.
        signal: crate::signal::Signal,
    },
    /// The lease lapsed between acquiring and starting COMMAND (rlock was
    /// held up); COMMAND was not started (exit 70).
    LeaseLapsedBeforeStart {
        /// The lock name(s).
        lock: String,
    },
    /// Anything else (exit 125).
    Internal(String),
}

impl Error {
    /// The exit status for this error: the only error→status mapping in the crate.
    pub fn exit(&self) -> Exit {
        match self {
            Error::Usage(_) => Exit::Usage,
            Error::Unavailable { .. } | Error::Unreachable { .. } | Error::ForeignKey { .. } => {
                Exit::Unavailable
            }
            Error::NotAcquired { code, .. } => Exit::NotAcquired(*code),
            Error::NotHeld { .. } => Exit::NotHeld,
            Error::NotFound { .. } => Exit::NotFound,
            Error::CannotExecute { .. } => Exit::CannotExecute,
            Error::Interrupted { signal, .. } => Exit::Signal(*signal),
            Error::LeaseLapsedBeforeStart { .. } => Exit::LockLost,
            Error::Internal(_) => Exit::Internal,
        }
    }

    /// Names `lock` in an error that does not name a lock yet.
    pub fn for_lock(self, name: &str) -> Self {
        match self {
            Error::Unavailable {
                lock: None,
                server,
                cause,
            } if !name.is_empty() => Error::Unavailable {
                lock: Some(name.to_owned()),
                server,
                cause,
            },
            Error::Unreachable {
                lock: None,
                server,
                cause,
            } if !name.is_empty() => Error::Unreachable {
                lock: Some(name.to_owned()),
                server,
                cause,
            },
            other => other,
        }
    }

    /// True when a request may have been carried out though no reply came
    /// in time (the server was stalled, not gone).
    pub fn reply_timed_out(&self) -> bool {
        // The wording of a timeout, from the one place that describes server errors.
        matches!(self, Error::Unavailable { cause, .. } | Error::Unreachable { cause, .. }
            if cause.contains("no reply within"))
    }

    /// True when the server could not be used for a reason that may pass on
    /// its own (a restart, a failover): waiting may be worth it.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unreachable { .. })
    }

    /// The same error, no longer worth waiting for.
    pub fn settled(self) -> Self {
        match self {
            Error::Unreachable {
                lock,
                server,
                cause,
            } => Error::Unavailable {
                lock,
                server,
                cause,
            },
            other => other,
        }
    }

    /// A usage error with this message.
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(msg) | Error::Internal(msg) => f.write_str(msg),
            Error::LeaseLapsedBeforeStart { lock } => write!(
                f,
                "{lock}: lock lost: the lease lapsed before COMMAND could start (rlock was held up); COMMAND was not started"
            ),
            Error::Unavailable {
                lock: Some(lock),
                server,
                cause,
            }
            | Error::Unreachable {
                lock: Some(lock),
                server,
                cause,
            } => write!(f, "{lock}: server {server} unavailable: {cause}"),
            Error::Unavailable {
                lock: None,
                server,
                cause,
            }
            | Error::Unreachable {
                lock: None,
                server,
                cause,
            } => write!(f, "server {server} unavailable: {cause}"),
            Error::ForeignKey { lock, cause } => write!(f, "{lock}: {cause}"),
            Error::NotAcquired { lock, cause, .. } => write!(f, "{lock}: not acquired: {cause}"),
            Error::NotHeld { lock, cause } => write!(f, "{lock}: {cause}"),
            Error::NotFound { lock, program } => {
                write!(
                    f,
                    "{lock}: command not found: {}",
                    crate::report::quote(program)
                )?;
                // One word holding a whole shell command line: rlock runs
                // COMMAND directly, without a shell.
                if program.contains([' ', '|', '&', ';', '<', '>', '(', '$', '`', '*']) {
                    f.write_str(
                        " (COMMAND runs without a shell: for a shell command line use -c 'STRING' or -- sh -c 'STRING')",
                    )?;
                }
                Ok(())
            }
            Error::CannotExecute {
                lock,
                program,
                cause,
            } => {
                write!(
                    f,
                    "{lock}: cannot execute {}: {cause}",
                    crate::report::quote(program)
                )
            }
            Error::Interrupted { lock, signal } => write!(
                f,
                "{lock}: interrupted by {signal} while waiting; nothing acquired"
            ),
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
        let unavailable = Error::Unavailable {
            lock: None,
            server: "h:1".into(),
            cause: "refused".into(),
        };
        assert_eq!(unavailable.exit().code(), 69);
        assert_eq!(
            unavailable.for_lock("a").to_string(),
            "a: server h:1 unavailable: refused"
        );
        let taken = Error::NotAcquired {
            lock: "a".into(),
            cause: "held".into(),
            code: 3,
        };
        assert_eq!(taken.exit().code(), 3);
        let missing = Error::NotFound {
            lock: "a".into(),
            program: "x\ny".into(),
        };
        assert_eq!(missing.exit().code(), 127);
        assert_eq!(missing.to_string(), "a: command not found: 'x\\ny'");
        let interrupted = Error::Interrupted {
            lock: "a".into(),
            signal: crate::signal::Signal::INT,
        };
        assert_eq!(interrupted.exit().code(), 130);
        assert!(interrupted.to_string().contains("SIGINT"));
    }
}
