//! The command line and the environment, resolved once: where locks live
//! ([`Target`]) and what every command needs to reach them. Everything the
//! environment adds (`REDIS_URL`, `REDISCLI_AUTH`, the enclosing runs'
//! tokens, a CI job's URL, `RLOCK_TOKEN`) is read here; nothing in the
//! layers below (the domain, the backends) reads the environment, and
//! nothing after this step parses a URL.

mod announce;
pub(crate) mod note;
mod spec;

pub use announce::{AnnounceSpec, NotifySpec};
pub use spec::{LockSpec, RunSpec};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::url::{self, PasswordFrom, ServerSpec};
use crate::backend::{Backend, Local, Redlock, Standalone};
#[cfg(feature = "cli")]
use crate::cli::Global;
use crate::error::{Error, Result};
use crate::lock::name::{Dialect, LockId};
use crate::lock::token::Token;

/// Where locks live.
#[derive(Clone)]
pub enum Target {
    /// `file:DIR`: this host only (`~/` expanded; created by the backend).
    Local(PathBuf),
    /// One Redis server: plain, or found through Sentinel or Cluster.
    Single(Box<ServerSpec>),
    /// A Redlock quorum of independent masters.
    Quorum(Vec<ServerSpec>),
}

/// TLS files as given on the command line or in `RLOCK_CACERT`, ...
#[derive(Clone, Default)]
pub struct TlsPaths {
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// What every lock command works with, resolved from the global options and
/// the environment.
#[derive(Clone)]
pub struct Config {
    pub target: Target,
    /// The URL list the target came from, as given (for the `--while-pid`
    /// keeper, which resolves it again in its own process).
    pub urls: Vec<String>,
    pub prefix: String,
    pub connect_timeout: Duration,
    pub tls: TlsPaths,
    /// `--password-file`, as given (for the `--while-pid` keeper).
    pub password_file: Option<PathBuf>,
    /// `--password-command`, as given (for the `--while-pid` keeper).
    pub password_command: Option<String>,
    /// The tokens of the enclosing `rlock run`s (RLOCK_TOKENS, RLOCK_TOKEN):
    /// a lock one of them holds is re-entered.
    pub inherited: Vec<Token>,
    /// The owner token `renew` and `release` take from RLOCK_TOKEN when
    /// `--token` is not given.
    pub token_from_env: Option<String>,
    /// The note a new hold carries: `--note`/RLOCK_NOTE, else the CI job's URL.
    pub note: String,
    /// Where the URL list came from, for `-v` and the default's note.
    pub url_source: UrlSource,
}

/// Where the server setting came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlSource {
    /// `-u`/`--url` on the command line.
    Option,
    /// The RLOCK_URL environment variable.
    RlockUrl,
    /// The REDIS_URL environment variable.
    RedisUrl,
    /// Nothing was given: redis://127.0.0.1:6379.
    Default,
}

impl UrlSource {
    /// How messages name it.
    pub fn describe(self) -> &'static str {
        match self {
            UrlSource::Option => "--url",
            UrlSource::RlockUrl => "RLOCK_URL",
            UrlSource::RedisUrl => "REDIS_URL",
            UrlSource::Default => "default",
        }
    }
}

/// Everything a [`Config`] is resolved from, as plain values: what the
/// command line and the environment give the CLI, and what a library user
/// gives [`crate::Client`]'s builder.
#[derive(Clone)]
pub struct Settings {
    /// The URL list (several: a Redlock quorum; `file:DIR`: this host).
    pub urls: Vec<String>,
    /// Where the URL list came from.
    pub url_source: UrlSource,
    /// The key prefix.
    pub prefix: String,
    /// Bound on each connection attempt and each reply.
    pub connect_timeout: Duration,
    /// TLS files for rediss://.
    pub tls: TlsPaths,
    /// Read the password from this file for each new connection.
    pub password_file: Option<PathBuf>,
    /// Run this command for each new connection's password.
    pub password_command: Option<String>,
    /// The password when neither of those is given (the CLI's
    /// REDISCLI_AUTH); a password in the URL comes first.
    pub auth: Option<String>,
    /// Tokens of enclosing holds, re-entered rather than waited for.
    pub inherited: Vec<Token>,
    /// The owner token `renew` and `release` use without `--token`.
    pub token_from_env: Option<String>,
    /// The note a new hold carries.
    pub note: String,
}

impl Settings {
    /// `urls` with the defaults of the command line: prefix `rlock`, a 2 s
    /// connect timeout, no TLS files, no password source, no enclosing
    /// holds, no note.
    pub fn new(urls: Vec<String>) -> Settings {
        Settings {
            urls,
            url_source: UrlSource::Option,
            prefix: "rlock".into(),
            connect_timeout: Duration::from_secs(2),
            tls: TlsPaths::default(),
            password_file: None,
            password_command: None,
            auth: None,
            inherited: Vec::new(),
            token_from_env: None,
            note: String::new(),
        }
    }
}

impl Config {
    /// Resolves `global` and the environment; `note` is `--note` (None for
    /// commands that make no hold).
    #[cfg(feature = "cli")]
    pub fn resolve(global: &Global, note: Option<&str>) -> Result<Config> {
        crate::lock::name::validate_prefix(&global.prefix)?;
        let redis_url = std::env::var("REDIS_URL").ok();
        let url_source = if global.urls.iter().any(|u| !u.trim().is_empty()) {
            if global.urls_from_option {
                UrlSource::Option
            } else {
                UrlSource::RlockUrl
            }
        } else if redis_url.as_deref().is_some_and(|u| !u.trim().is_empty()) {
            UrlSource::RedisUrl
        } else {
            UrlSource::Default
        };
        Config::from_settings(Settings {
            urls: url::choose_urls(&global.urls, redis_url),
            url_source,
            prefix: global.prefix.clone(),
            connect_timeout: global.connect_timeout,
            tls: TlsPaths {
                cacert: global.cacert.clone(),
                cert: global.cert.clone(),
                key: global.key.clone(),
            },
            password_file: global.password_file.clone(),
            password_command: global.password_command.clone(),
            auth: std::env::var("REDISCLI_AUTH").ok(),
            inherited: crate::lock::token::inherited_tokens(
                &std::env::var("RLOCK_TOKENS").unwrap_or_default(),
                &std::env::var("RLOCK_TOKEN").unwrap_or_default(),
            ),
            token_from_env: std::env::var("RLOCK_TOKEN").ok().filter(|t| !t.is_empty()),
            note: crate::config::note::resolve(note),
        })
    }

    /// Resolves `settings`, as given: nothing is read from the environment.
    pub fn from_settings(settings: Settings) -> Result<Config> {
        crate::lock::name::validate_prefix(&settings.prefix)?;
        let password = match (&settings.password_file, &settings.password_command) {
            (Some(_), Some(_)) => {
                return Err(Error::usage(
                    "--password-file and --password-command: give the password once",
                ));
            }
            (Some(file), None) => Some(PasswordFrom::File(file.clone())),
            (None, Some(command)) => Some(PasswordFrom::Command(command.clone())),
            (None, None) => None,
        };
        let Settings {
            urls,
            url_source,
            prefix,
            connect_timeout,
            tls,
            password_file,
            password_command,
            auth,
            inherited,
            token_from_env,
            note,
        } = settings;
        // --password-file and --password-command stand in for REDISCLI_AUTH.
        let auth = auth.filter(|_| password.is_none());
        Ok(Config {
            target: target(
                &urls,
                &tls,
                password.as_ref(),
                auth.as_deref(),
                connect_timeout,
            )?,
            password_file,
            password_command,
            urls,
            prefix,
            connect_timeout,
            tls,
            inherited,
            token_from_env,
            note,
            url_source,
        })
    }

    /// The server(s) asked, as `status` and `-v` name them: `server
    /// 127.0.0.1:6379`, `file:/var/lock/rlock`, `quorum of 3: a:1, b:2, c:3`
    /// (never a URL, so never a password).
    pub fn server_label(&self) -> String {
        match &self.target {
            Target::Local(dir) => format!("file:{}", dir.display()),
            Target::Single(spec) => format!("server {}", spec.display),
            Target::Quorum(specs) => format!(
                "quorum of {}: {}",
                specs.len(),
                specs
                    .iter()
                    .map(|s| s.display.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// Where `status`, `list` and `-v` look: [`Config::server_label`], the
    /// database and the key prefix, always both, so that a lock held under
    /// another database or prefix cannot read `free` unexplained (`server
    /// 127.0.0.1:6379 db 1 prefix team-a`). A `file:` directory has neither;
    /// Redisson's keys have no prefix.
    pub fn scope_label(&self, dialect: Dialect) -> String {
        let mut label = self.server_label();
        let dbs = self.dbs();
        match self.db() {
            _ if dbs.is_empty() => return label,
            Some(db) => label.push_str(&format!(" db {db}")),
            None => {
                let dbs: Vec<String> = dbs.iter().map(ToString::to_string).collect();
                label.push_str(&format!(" dbs {}", dbs.join(", ")));
            }
        }
        match dialect {
            Dialect::Rlock => label.push_str(&format!(" prefix {}", self.prefix)),
            Dialect::Redisson => label.push_str(" (Redisson's keys: no prefix)"),
        }
        label
    }

    /// The database of every server asked, in order (none for `file:`).
    fn dbs(&self) -> Vec<i64> {
        let db = |spec: &ServerSpec| spec.info.redis_settings().db();
        match &self.target {
            Target::Local(_) => Vec::new(),
            Target::Single(spec) => vec![db(spec)],
            Target::Quorum(specs) => specs.iter().map(db).collect(),
        }
    }

    /// The database locks are in, as `--json` names it: None for `file:`
    /// and for a quorum whose servers' databases differ.
    pub fn db(&self) -> Option<i64> {
        let dbs = self.dbs();
        dbs.first()
            .copied()
            .filter(|first| dbs.iter().all(|db| db == first))
    }

    /// The server(s) as `--json` names them: [`Config::server_label`]
    /// without the word `server` for one server.
    pub fn server_json(&self) -> String {
        match &self.target {
            Target::Single(spec) => spec.display.clone(),
            _ => self.server_label(),
        }
    }

    /// Whether locks are `file:` locks of this host.
    pub fn is_local(&self) -> bool {
        matches!(self.target, Target::Local(_))
    }

    /// Whether locks are taken on a Redlock quorum.
    pub fn is_quorum(&self) -> bool {
        matches!(self.target, Target::Quorum(_))
    }

    /// Lock `name`: under the prefix, or as Redisson stores it (`--redisson`).
    pub fn lock_id(&self, redisson: bool, name: &str) -> LockId {
        let prefix = &self.prefix;
        if redisson {
            LockId::redisson(name)
        } else {
            LockId::new(prefix, name)
        }
    }

    /// The backend for the target, for locks stored in `dialect` (a `file:`
    /// DIR is made absolute and created here).
    pub fn backend(&self, dialect: Dialect) -> Result<Arc<dyn Backend>> {
        self.backend_to(true, dialect)
    }

    /// The backend for reading only (`status`, `list`): a missing `file:`
    /// DIR is not created but reported (nothing could be seen in it).
    pub fn backend_for_reading(&self, dialect: Dialect) -> Result<Arc<dyn Backend>> {
        self.backend_to(false, dialect)
    }

    /// [`backend`](Self::backend) whose every connection attempt and reply
    /// is bounded by `limit` when that is shorter than `--connect-timeout`:
    /// what a run does after losing its lock must not wait out a stalled
    /// server at full length.
    pub fn backend_within(&self, dialect: Dialect, limit: Duration) -> Result<Arc<dyn Backend>> {
        let limit = limit.max(Duration::from_millis(1));
        let hurried = |spec: &ServerSpec| {
            let mut spec = spec.clone();
            spec.timeout = spec.timeout.min(limit);
            spec
        };
        Ok(match &self.target {
            Target::Local(_) => self.backend(dialect)?,
            Target::Single(spec) => Arc::new(Standalone::new(hurried(spec), dialect)?),
            Target::Quorum(specs) => Arc::new(Redlock::new(specs.iter().map(hurried).collect())?),
        })
    }

    /// The dialect matters on one Redis server only: `--redisson` with
    /// `file:` or a quorum is refused before a backend is built.
    fn backend_to(&self, create: bool, dialect: Dialect) -> Result<Arc<dyn Backend>> {
        Ok(match &self.target {
            Target::Local(dir) => Arc::new(Local::new(dir, self.inherited.clone(), create)?),
            Target::Single(spec) => Arc::new(Standalone::new(spec.as_ref().clone(), dialect)?),
            Target::Quorum(specs) => Arc::new(Redlock::new(specs.clone())?),
        })
    }
}

/// One server, or a Redlock quorum over several.
fn target(
    urls: &[String],
    tls: &TlsPaths,
    password: Option<&PasswordFrom>,
    auth: Option<&str>,
    timeout: Duration,
) -> Result<Target> {
    if let Some(dir) = urls.iter().find_map(|u| u.strip_prefix("file:")) {
        if urls.len() > 1 {
            return Err(Error::usage(
                "file: locks this host only; it cannot be combined with other --url",
            ));
        }
        return Ok(Target::Local(local_dir(dir)?));
    }
    let files = url::TlsFiles {
        cacert: tls.cacert.as_deref(),
        cert: tls.cert.as_deref(),
        key: tls.key.as_deref(),
    };
    let mut specs = urls
        .iter()
        .map(|url| {
            url::parse_url(url, auth, timeout)
                .and_then(|spec| spec.with_tls(&files))
                .and_then(|spec| spec.with_password(password))
        })
        .collect::<Result<Vec<_>>>()?;
    if specs.len() == 1 {
        return Ok(Target::Single(Box::new(specs.remove(0))));
    }
    if specs
        .iter()
        .any(|s| s.sentinel.is_some() || s.cluster.is_some())
    {
        return Err(Error::usage(
            "a Redlock quorum (several --url) needs independent redis:// or rediss:// masters, not Sentinel or Cluster URLs",
        ));
    }
    let mut seen: Vec<&str> = specs.iter().map(|s| s.display.as_str()).collect();
    seen.sort();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::usage(
            "several --url name the same server: a Redlock quorum needs independent servers",
        ));
    }
    Ok(Target::Quorum(specs))
}

/// The directory of `file:DIR`: absolute, `file:///DIR`, or `~/...` (from
/// $HOME, as a shell would expand it: the URL is often quoted, or set in a
/// crontab, where no shell expands it). A relative DIR is refused.
fn local_dir(dir: &str) -> Result<PathBuf> {
    if dir.is_empty() {
        return Err(Error::usage("invalid --url: expected file:DIR"));
    }
    // The URL form file:///DIR (or file://localhost/DIR) names an absolute
    // path; anything else after `//` would be a host, which a lock directory
    // of this host cannot have (`file://~/x` is not the home directory).
    let dir = match dir.strip_prefix("//") {
        Some(rest) => match rest.split_once('/') {
            Some(("" | "localhost", path)) => format!("/{path}"),
            _ => {
                return Err(Error::usage(format!(
                    "invalid --url file:{dir}: after file:// comes an absolute path (file:///DIR), not a host; for a directory in your home use file:~/DIR"
                )));
            }
        },
        None => dir.to_owned(),
    };
    let dir = dir.as_str();
    let home = |rest: &str| match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(rest)),
        None => Err(Error::usage(format!(
            "invalid --url file:{dir}: ~ needs $HOME, which is not set; use an absolute path"
        ))),
    };
    let dir = match dir.strip_prefix('~') {
        Some("") => home("")?,
        Some(rest) if rest.starts_with('/') => home(rest.trim_start_matches('/'))?,
        Some(_) => {
            return Err(Error::usage(format!(
                "invalid --url file:{dir}: only ~/ is expanded, not ~user; use an absolute path"
            )));
        }
        _ if !dir.starts_with('/') => {
            // Two jobs started from different working directories (cron's is
            // $HOME, a shell's anything) would silently lock in different places.
            let suggestion = std::path::absolute(dir)
                .map(|p| format!(", e.g. file:{}", p.display()))
                .unwrap_or_default();
            return Err(Error::usage(format!(
                "invalid --url file:{dir}: a relative lock directory depends on the working directory; use an absolute path{suggestion}"
            )));
        }
        _ => PathBuf::from(dir),
    };
    Ok(dir)
}
