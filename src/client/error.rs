//! The library's error: the crate's own, said as the CLI says it, or a
//! loss found when a hold was released.

use std::fmt;

use super::notice::Loss;
use crate::error::Cause;

/// Why a lock could not be taken or given back.
///
/// Its `Display` is the one-line cause the `rlock` command prints after
/// `rlock: ` (for example `nightly: not acquired: held by pid 4242 on web-1
/// ('./compact') for 12s`): never a URL, a password or an owner token.
///
/// ```no_run
/// # fn main() -> Result<(), rlock::Error> {
/// let client = rlock::Client::open("redis://127.0.0.1:6379")?;
/// match client.lock("nightly").acquire() {
///     Ok(hold) => hold.release()?,
///     Err(err) if err.is_busy() => eprintln!("skipped: {err}"),
///     Err(err) => return Err(err),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Error {
    repr: Repr,
}

#[derive(Debug)]
enum Repr {
    Crate(crate::error::Error),
    Lost(Loss),
}

/// What kind of failure an [`Error`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The lock is held by someone else and the wait ran out (or there was
    /// no wait): [`Error::is_busy`].
    Busy,
    /// The server could not be reached or refused the request.
    Unavailable,
    /// Bad input: a URL, a name, options that cannot go together.
    Usage,
    /// The hold was lost before it was released (see [`crate::Hold::lost`]).
    Lost,
    /// Anything else.
    Other,
}

impl Error {
    /// True when the lock is taken and the wait ran out, or was not asked
    /// for: the CLI's "not acquired" (exit 75).
    pub fn is_busy(&self) -> bool {
        self.kind() == ErrorKind::Busy
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match &self.repr {
            Repr::Lost(_) => ErrorKind::Lost,
            Repr::Crate(err) => match err.cause() {
                Cause::NotAcquired { .. } => ErrorKind::Busy,
                Cause::Unavailable { .. } | Cause::Unreachable { .. } | Cause::ForeignKey(_) => {
                    ErrorKind::Unavailable
                }
                Cause::Usage(_) => ErrorKind::Usage,
                _ => ErrorKind::Other,
            },
        }
    }

    /// The status the `rlock` command exits with for the same failure (75
    /// busy, 69 unavailable, 2 usage, 70 lost, 125 otherwise).
    pub fn exit_code(&self) -> u8 {
        match &self.repr {
            Repr::Lost(_) => crate::exit::Exit::LockLost.code(),
            Repr::Crate(err) => err.exit().code(),
        }
    }

    /// The loss, when this error reports one.
    pub fn loss(&self) -> Option<&Loss> {
        match &self.repr {
            Repr::Lost(loss) => Some(loss),
            Repr::Crate(_) => None,
        }
    }

    pub(crate) fn lost(loss: Loss) -> Self {
        Error {
            repr: Repr::Lost(loss),
        }
    }
}

impl From<crate::error::Error> for Error {
    fn from(err: crate::error::Error) -> Self {
        Error {
            repr: Repr::Crate(err),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Crate(err) => err.fmt(f),
            Repr::Lost(loss) => loss.fmt(f),
        }
    }
}

impl std::error::Error for Error {}
