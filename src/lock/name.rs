//! Lock names (README: NAME, under "Using `rlock run`") and the [`LockId`]
//! every backend is asked for.
//!
//! NAME may not contain `{` or `}`, which keeps the Cluster hash tag `{NAME}`
//! of the Redis keys unambiguous; the prefix may not either.

use crate::error::{Error, Result};

/// Longest NAME in bytes.
pub const MAX_NAME_BYTES: usize = 200;

/// A NAME that keeps the README's rules (NAME, under "Using `rlock run`"):
/// 1–200 bytes of UTF-8, no whitespace, no control characters, no braces.
/// [`LockName::new`] is the only way to make one, and it is clap's value
/// parser for every NAME on the command line, so a command never sees a
/// name it must still check.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LockName(String);

/// Why a NAME was refused: the whole `invalid lock name …` message (exit 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidName(String);

impl LockName {
    /// Checks `name`, quoting it in the refusal (cut as a note is).
    pub fn new(name: &str) -> Result<Self, InvalidName> {
        let bad = |why: &str| {
            // A NAME in a message is cut as a note is (a 10 KB NAME would
            // otherwise fill the screen): its start and its length.
            const SHOWN: usize = 60;
            let shown = match name.char_indices().nth(SHOWN) {
                Some((at, _)) => format!(
                    "{}… ({} bytes)",
                    crate::report::quote(&name[..at]),
                    name.len()
                ),
                None => crate::report::quote(name),
            };
            Err(InvalidName(format!("invalid lock name {shown}: {why}")))
        };
        if name.is_empty() {
            return bad("it is empty");
        }
        if name.len() > MAX_NAME_BYTES {
            return bad("longer than 200 bytes");
        }
        if name.chars().any(char::is_whitespace) {
            return bad("whitespace is not allowed");
        }
        if name.chars().any(char::is_control) {
            return bad("control characters are not allowed");
        }
        if name.contains(['{', '}']) {
            return bad("'{' and '}' are not allowed");
        }
        Ok(LockName(name.to_owned()))
    }

    /// The name as the user gave it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for LockName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for LockName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for LockName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for InvalidName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidName {}

impl From<InvalidName> for Error {
    fn from(bad: InvalidName) -> Self {
        Error::usage(bad.0)
    }
}

/// Checks `--prefix`: same character rules as a name, but it may be empty.
pub fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() {
        return Ok(());
    }
    LockName::new(prefix).map(drop).map_err(|_| {
        Error::usage(format!(
            "invalid --prefix {}: no whitespace, control characters, '{{' or '}}', at most 200 bytes",
            crate::report::quote(prefix)
        ))
    })
}

/// A lock as the backends are asked for it: its NAME, the key namespace
/// (`--prefix`), and whether it is stored as Redisson's `getLock(NAME)`
/// stores it. Each backend derives where it keeps the lock from this (the
/// Redis backend its keys, the `file:` backend its files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockId {
    /// The lock name as the user gave it.
    pub name: String,
    /// The key namespace (`--prefix`; empty for Redisson's layout).
    pub prefix: String,
    /// `--redisson`: Redisson's key layout and unlock channel.
    pub redisson: bool,
}

impl LockId {
    /// Lock `name` under `prefix` (`rlock` by default).
    pub fn new(prefix: &str, name: &str) -> Self {
        LockId {
            name: name.to_owned(),
            prefix: prefix.to_owned(),
            redisson: false,
        }
    }

    /// Lock `name` as Redisson's `getLock(NAME)` stores it.
    pub fn redisson(name: &str) -> Self {
        LockId {
            name: name.to_owned(),
            prefix: String::new(),
            redisson: true,
        }
    }

    /// The layout the lock is stored in.
    pub fn dialect(&self) -> Dialect {
        Dialect::redisson_if(self.redisson)
    }
}

/// The layout a command's locks are stored in, one for all of them: a
/// backend is opened for one dialect and its sessions speak only that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// rlock's own layout under `--prefix`: queues, kinds, holder details.
    Rlock,
    /// Redisson's `getLock(NAME)` layout (`--redisson`).
    Redisson,
}

impl Dialect {
    /// [`Dialect::Redisson`] when `--redisson` was given, else rlock's own.
    pub fn redisson_if(redisson: bool) -> Self {
        if redisson {
            Dialect::Redisson
        } else {
            Dialect::Rlock
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for name in [
            "deploy",
            "nightly-backup",
            "a",
            "db/migrate:prod",
            "é",
            &"x".repeat(200),
        ] {
            assert_eq!(LockName::new(name).unwrap().as_str(), name);
        }
    }

    #[test]
    fn rejects_names_outside_the_contract() {
        for name in [
            "",
            "a b",
            "a\tb",
            "a\u{1}b",
            "a{b",
            "}",
            &"x".repeat(201),
            "a\u{a0}b",
        ] {
            let err = Error::from(LockName::new(name).unwrap_err());
            assert_eq!(err.exit().code(), 2, "{name:?}");
        }
    }
}
