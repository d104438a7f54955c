//! The library: the `rlock` command's locks, taken from a Rust program.
//!
//! A [`Client`] is where locks live (the URL the CLI takes), a
//! [`LockBuilder`] says how a lock is taken, and a [`Hold`] is a lock held,
//! renewed in the background until it is released or dropped, or lost. The
//! acquisition, the renewals and the release are the CLI's own code paths:
//! the same keys, scripts, fences, history and holder record.

mod builder;
mod error;
mod hold;
mod notice;
mod renewer;
mod state;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use builder::LockBuilder;
pub(crate) use builder::{Caller, NotTaken, Taken};
pub use error::{Error, ErrorKind};
pub use hold::Hold;
pub use notice::{Loss, LossSignal};
pub use state::{Holder, LockState};

use crate::backend::{Backend, Session};
use crate::config::{Config, Settings, TlsPaths};
use crate::lock::name::Dialect;
use renewer::Renewer;

/// A connection to where locks live: one Redis server (plain, TLS, a Unix
/// socket, Sentinel or Cluster), a Redlock quorum of several, or a `file:`
/// directory of this host, named by the URLs the `rlock` command takes.
///
/// Cheap to clone (clones share everything) and to share between threads.
///
/// # Threads and connections
///
/// However many locks a client holds, it uses one background thread
/// (`rlock-renewer`, started with the first hold) and one connection to
/// renew them all, plus one connection that acquisitions and releases reuse
/// one after the other (a thread that acquires or releases while another
/// does opens one of its own for that call, and closes it after unless the
/// reused one is free). So a process holding 1,000 locks through one client
/// has one extra thread and two connections (for a Redlock quorum: two to
/// each server). A `file:` hold keeps its lock files open, and is never
/// renewed (the kernel keeps it).
///
/// # Signals
///
/// The library never touches the program's signals: no handler, no mask,
/// no signal thread. A wait for a lock ends when it is acquired or its
/// [`wait`](LockBuilder::wait) runs out.
///
/// ```no_run
/// # fn main() -> Result<(), rlock::Error> {
/// let client = rlock::Client::open("redis://127.0.0.1:6379")?;
/// let hold = client.lock("nightly").acquire()?;
/// println!("fence {}", hold.fence());
/// hold.release()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// What a client's clones and holds share.
pub(crate) struct Inner {
    pub(crate) config: Config,
    pub(crate) backend: Arc<dyn Backend>,
    /// The layout its locks are kept in (`--redisson` for the command).
    pub(crate) dialect: Dialect,
    /// The session acquisitions and releases reuse, when none is using it.
    idle: Mutex<Option<Box<dyn Session>>>,
    pub(crate) renewer: Renewer,
}

impl Inner {
    /// The idle session, or a new one.
    pub(crate) fn session(&self) -> crate::error::Result<Box<dyn Session>> {
        match self.take_idle() {
            Some(session) => Ok(session),
            None => self.backend.connect(),
        }
    }

    /// The idle session, if there is one (none for `file:`, whose sessions
    /// are their holds' open files).
    pub(crate) fn take_idle(&self) -> Option<Box<dyn Session>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Keeps `session` for the next acquisition or release, unless one is
    /// kept already (then it is closed).
    pub(crate) fn put_idle(&self, session: Box<dyn Session>) {
        if self.config.is_local() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.is_none() {
            *idle = Some(session);
        }
    }
}

impl Client {
    /// A client for `url`, with the defaults of the `rlock` command: key
    /// prefix `rlock`, a 2 s connect timeout, no TLS files of its own, the
    /// password in the URL if any. `url` is any URL `rlock --url` accepts:
    /// `redis://`, `rediss://`, `unix://`, `redis+sentinel://`,
    /// `redis+cluster://`, a comma-separated list of independent servers
    /// (a Redlock quorum), or `file:DIR`.
    ///
    /// Nothing is connected yet: the first acquisition connects. No setting
    /// is read from the environment (`RLOCK_URL`, `REDISCLI_AUTH`, … are
    /// the command's); only a hold's default note is, as the command's
    /// (see [`LockBuilder::note`]).
    ///
    /// ```no_run
    /// let client = rlock::Client::open("redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/main")?;
    /// # Ok::<(), rlock::Error>(())
    /// ```
    pub fn open(url: &str) -> Result<Client, Error> {
        Client::builder(url).open()
    }

    /// A builder for a client of `url` with settings of its own.
    ///
    /// ```no_run
    /// let client = rlock::Client::builder("rediss://redis.internal:6380")
    ///     .prefix("team-a")
    ///     .cacert("/etc/ssl/redis-ca.pem")
    ///     .connect_timeout(std::time::Duration::from_secs(1))
    ///     .open()?;
    /// # Ok::<(), rlock::Error>(())
    /// ```
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder {
            // Split and joined again as the command splits `--url`: the
            // host list of a Sentinel or Cluster URL is one URL.
            settings: Settings::new(crate::backend::url::choose_urls(
                &url.split(',').map(str::to_owned).collect::<Vec<_>>(),
                None,
            )),
        }
    }

    /// A builder for taking lock `name` (see [`LockBuilder`]).
    ///
    /// ```no_run
    /// # let client = rlock::Client::open("redis://127.0.0.1:6379")?;
    /// let hold = client.lock("nightly").wait(std::time::Duration::from_secs(10)).acquire()?;
    /// # Ok::<(), rlock::Error>(())
    /// ```
    pub fn lock(&self, name: &str) -> LockBuilder<'_> {
        LockBuilder::new(self, vec![name.to_owned()])
    }

    /// A builder for taking every lock of `names`, all or none, as `rlock
    /// run a b -- …` takes them: in name order, never waiting while holding
    /// any. One [`Hold`] holds them all; losing one loses the hold.
    ///
    /// ```no_run
    /// # let client = rlock::Client::open("redis://127.0.0.1:6379")?;
    /// let hold = client.lock_all(["orders", "invoices"]).acquire()?;
    /// # Ok::<(), rlock::Error>(())
    /// ```
    pub fn lock_all<I, S>(&self, names: I) -> LockBuilder<'_>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let names = names.into_iter().map(|n| n.as_ref().to_owned()).collect();
        LockBuilder::new(self, names)
    }

    /// The server(s), as the CLI's `status` names them (never a URL).
    pub fn server(&self) -> String {
        self.inner.config.server_label()
    }

    /// The client of a configuration the command line resolved, keeping
    /// its locks in `dialect` (`--redisson`): how `rlock run`, `acquire`
    /// and `status` reach the server, as a library program does.
    pub(crate) fn from_config(config: Config, dialect: Dialect) -> crate::error::Result<Client> {
        let backend = config.backend(dialect)?;
        Ok(Client::of(config, backend, dialect))
    }

    /// [`from_config`](Self::from_config) for reading only (`status`,
    /// `list`): a missing `file:` directory is reported, not created.
    pub(crate) fn for_reading(config: Config, dialect: Dialect) -> crate::error::Result<Client> {
        let backend = config.backend_for_reading(dialect)?;
        Ok(Client::of(config, backend, dialect))
    }

    fn of(config: Config, backend: Arc<dyn Backend>, dialect: Dialect) -> Client {
        Client {
            inner: Arc::new(Inner {
                config,
                backend,
                dialect,
                idle: Mutex::new(None),
                renewer: Renewer::default(),
            }),
        }
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server())
            .field("prefix", &self.inner.config.prefix)
            .finish()
    }
}

/// Settings of a [`Client`] beyond its URL: see [`Client::builder`].
#[derive(Clone)]
#[must_use = "a builder does nothing until .open()"]
pub struct ClientBuilder {
    settings: Settings,
}

impl ClientBuilder {
    /// The key prefix (`rlock --prefix`): lock NAME lives under
    /// `PREFIX:{NAME}`. Default `rlock`.
    pub fn prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.settings.prefix);
        self
    }

    /// Bound on each connection attempt and each reply (`rlock
    /// --connect-timeout`). Default 2 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = timeout;
        self
    }

    /// Reads the password from `path` for each new connection (`rlock
    /// --password-file`).
    pub fn password_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.settings.password_file = Some(path.into());
        self
    }

    /// Runs `command` with `sh -c` for each new connection's password
    /// (`rlock --password-command`).
    pub fn password_command(mut self, command: &str) -> Self {
        self.settings.password_command = Some(command.to_owned());
        self
    }

    /// The password when the URL has none (as `REDISCLI_AUTH` is to the
    /// command).
    pub fn password(mut self, password: &str) -> Self {
        self.settings.auth = Some(password.to_owned());
        self
    }

    /// The CA certificate (PEM) to trust for `rediss://` instead of the
    /// system's (`rlock --cacert`).
    pub fn cacert(mut self, path: impl Into<PathBuf>) -> Self {
        self.settings.tls.cacert = Some(path.into());
        self
    }

    /// The client certificate and its key (PEM) for `rediss://` (`rlock
    /// --cert`, `--key`).
    pub fn client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.settings.tls = TlsPaths {
            cert: Some(cert.into()),
            key: Some(key.into()),
            ..self.settings.tls
        };
        self
    }

    /// The client: the URL is parsed and checked, nothing is connected.
    pub fn open(self) -> Result<Client, Error> {
        let config = Config::from_settings(self.settings)?;
        Ok(Client::from_config(config, Dialect::Rlock)?)
    }
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // URLs may carry a password: not shown.
        f.debug_struct("ClientBuilder")
            .field("prefix", &self.settings.prefix)
            .finish_non_exhaustive()
    }
}
