//! What `rlock status` shows of a lock, read through a [`Client`]: the
//! command's `status` and `list` read with the same calls.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Client, Error};
use crate::backend::{HolderStatus, LockStatus};
use crate::lock::kind::Kind;
use crate::lock::name::{Dialect, LockName};

/// A lock as [`Client::status`] read it: who holds it, who waits, and the
/// last fence handed out. Never an owner token.
///
/// ```no_run
/// # let client = rlock::Client::open("redis://127.0.0.1:6379")?;
/// for lock in client.status(["nightly"])? {
///     match lock.holders().first() {
///         Some(holder) => println!("{} held on {}: {}", lock.name(), holder.host(), holder.command()),
///         None => println!("{} is free", lock.name()),
///     }
/// }
/// # Ok::<(), rlock::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct LockState {
    name: String,
    status: LockStatus,
    holders: Vec<Holder>,
}

impl LockState {
    pub(crate) fn new(name: String, status: LockStatus) -> LockState {
        let holders = status
            .holders
            .iter()
            .map(|h| Holder { status: h.clone() })
            .collect();
        LockState {
            name,
            status,
            holders,
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True while anyone holds it.
    pub fn is_held(&self) -> bool {
        !self.status.holders.is_empty()
    }

    /// True while it is held shared (read); false when free or held
    /// exclusively or as a semaphore.
    pub fn is_shared(&self) -> bool {
        self.is_held() && self.status.kind == Some(Kind::Shared)
    }

    /// While it is held as a semaphore: at most how many may hold it.
    pub fn limit(&self) -> Option<u32> {
        match self.status.kind {
            Some(Kind::Semaphore(n)) if self.is_held() => Some(n),
            _ => None,
        }
    }

    /// The last fence handed out: the current holder's, for a lock held
    /// exclusively. 0 before the first hold.
    pub fn fence(&self) -> u64 {
        self.status.fence
    }

    /// Its holders (one, unless shared or a semaphore).
    pub fn holders(&self) -> &[Holder] {
        &self.holders
    }

    /// How many wait for it.
    pub fn waiting(&self) -> u64 {
        self.status.waiting
    }

    /// For a Redlock quorum: where the servers' views differ (holds seen on
    /// some servers only, servers that did not answer). `None` for one
    /// server, or when every server answered and they agree.
    pub fn disagreement(&self) -> Option<&str> {
        self.status
            .servers
            .as_ref()
            .and_then(|servers| servers.disagreement.as_deref())
    }

    /// Everything the command's `status` shows.
    pub(crate) fn detail(&self) -> &LockStatus {
        &self.status
    }
}

/// One holder of a lock, as it described itself when it took the lock.
#[derive(Debug, Clone)]
pub struct Holder {
    status: HolderStatus,
}

impl Holder {
    /// Its host name.
    pub fn host(&self) -> &str {
        &self.status.host
    }

    /// Its process id on its host (the calling script's, for `rlock
    /// acquire`); `None` when it did not report one.
    pub fn pid(&self) -> Option<u32> {
        self.status.pid.parse().ok()
    }

    /// Its command line.
    pub fn command(&self) -> &str {
        &self.status.command
    }

    /// Its note ([`LockBuilder::note`](crate::LockBuilder::note), `rlock
    /// --note`, a CI job's URL), or empty.
    pub fn note(&self) -> &str {
        &self.status.note
    }

    /// When it took the lock, by the server's clock; `None` when the hold
    /// does not record it (one taken by an rlock before the current layout).
    pub fn since(&self) -> Option<SystemTime> {
        (self.status.since_ms != 0)
            .then(|| UNIX_EPOCH + Duration::from_millis(self.status.since_ms))
    }

    /// The lease it has left; `None` for a `file:` lock, which the kernel
    /// keeps while its holder lives.
    pub fn lease_left(&self) -> Option<Duration> {
        self.status.lease_ms.map(Duration::from_millis)
    }
}

impl Client {
    /// Who holds and waits for each of `names`, in the order given, read as
    /// `rlock status` reads them (one round trip per server).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) when the
    /// server could not be read: never a lock reported free unseen.
    pub fn status<I, S>(&self, names: I) -> Result<Vec<LockState>, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let names: Vec<String> = names.into_iter().map(|n| n.as_ref().to_owned()).collect();
        for name in &names {
            LockName::new(name).map_err(crate::error::Error::from)?;
        }
        Ok(self.read_states(Some(&names), "*", &names.join(", "))?)
    }

    /// Every lock held or waited for whose name matches the glob `pattern`
    /// (`*` for all), as `rlock list` reads them. (A `file:` client's
    /// directory exists from [`Client::open`] on: a missing one reads as
    /// no locks.)
    ///
    /// # Errors
    ///
    /// As [`status`](Self::status).
    pub fn list(&self, pattern: &str) -> Result<Vec<LockState>, Error> {
        Ok(self.read_states(None, pattern, pattern)?)
    }

    /// The states of `names`, or of the locks matching `pattern` when no
    /// names are given: what `status`, `list` and the command's both read.
    /// A failure to connect names `label`.
    pub(crate) fn read_states(
        &self,
        names: Option<&[String]>,
        pattern: &str,
        label: &str,
    ) -> crate::error::Result<Vec<LockState>> {
        let inner = self.inner();
        let config = &inner.config;
        let mut session = inner.backend.inspect().map_err(|e| e.in_lock(label))?;
        let names = match names {
            Some(names) => names.to_vec(),
            None => session.list(&config.prefix, pattern)?,
        };
        let redisson = inner.dialect == Dialect::Redisson;
        let locks: Vec<_> = names
            .iter()
            .map(|name| config.lock_id(redisson, name))
            .collect();
        let states = session.statuses(&locks)?;
        Ok(names
            .into_iter()
            .zip(states)
            .map(|(name, status)| LockState::new(name, status))
            .collect())
    }
}
