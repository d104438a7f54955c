//! How a lock is taken, resolved once from `run`'s and `acquire`'s options
//! beside the [`Config`] they need: the kind, how long to wait, the lease,
//! what is recorded, and which options cannot go together with the target.
//! Nothing below the command line sees the clap structs; the layers below
//! get a [`LockSpec`] (and `run` a [`RunSpec`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::Config;
use super::announce::AnnounceSpec;
#[cfg(feature = "cli")]
use crate::cli::{FOREVER, LockOptions, RunArgs};
use crate::error::{Error, Result};
use crate::lock::kind::Kind;
use crate::lock::name::{Dialect, LockId, LockName};

/// How a lock is taken (`--wait`, `--no-wait`, `-E`, the kind options,
/// `--fair`, `--min-replicas`, `--ttl`, `--history`, `--redisson`).
#[derive(Debug, Clone)]
pub struct LockSpec {
    /// Exclusive, shared or semaphore.
    pub kind: Kind,
    /// How long to wait for the lock: `None` forever, zero for `--no-wait`.
    pub wait: Option<Duration>,
    /// Without `--wait`: how long an unreachable server is waited for
    /// ([`FOREVER`]: with no end).
    pub unreachable_wait: Duration,
    /// Off a terminal: how often a waiting run says so (zero: never).
    pub progress_interval: Duration,
    /// Status for "not acquired" (`-E`).
    pub conflict_code: u8,
    /// First come, first served among waiters.
    pub fair: bool,
    /// Replicas that must confirm the holds before they count.
    pub min_replicas: u32,
    /// Lease length (`--ttl`).
    pub ttl: Duration,
    /// Events the lock's history keeps (0: none recorded).
    pub history: u32,
    /// Stored as Redisson's `getLock(NAME)` stores it (`--redisson`).
    pub redisson: bool,
}

impl LockSpec {
    /// Resolves `options` for `config`'s target, refusing options that
    /// cannot go together instead of silently running with other semantics.
    #[cfg(feature = "cli")]
    pub fn resolve(config: &Config, options: &LockOptions) -> Result<LockSpec> {
        let spec = LockSpec {
            kind: match (options.shared, options.limit) {
                (true, _) => Kind::Shared,
                (false, Some(n)) if n > 1 => Kind::Semaphore(n),
                _ => Kind::Exclusive,
            },
            wait: if options.no_wait {
                Some(Duration::ZERO)
            } else {
                options.wait.filter(|w| *w != FOREVER)
            },
            unreachable_wait: options.unreachable_wait,
            progress_interval: options.progress_interval,
            conflict_code: options.conflict_exit_code,
            fair: options.fair,
            min_replicas: options.min_replicas,
            ttl: options.ttl,
            history: options.history,
            redisson: options.redisson,
        };
        spec.refuse_conflicts(config, options.limit)?;
        Ok(spec)
    }

    /// Refuses what cannot go together with `config`'s target or with each
    /// other; `limit` is the semaphore limit as asked (`--limit 1` is an
    /// exclusive lock, but still asks for a count).
    pub fn refuse_conflicts(&self, config: &Config, limit: Option<u32>) -> Result<()> {
        refuse_conflicts(config, self, limit.is_some_and(|n| n > 1))
    }

    /// `--no-wait` (or `--wait 0`): never wait, for the lock or the server.
    pub fn no_wait(&self) -> bool {
        self.wait == Some(Duration::ZERO)
    }

    /// Lock `name` in this spec's layout, under `config`'s prefix.
    pub fn lock_id(&self, config: &Config, name: &str) -> LockId {
        config.lock_id(self.redisson, name)
    }

    /// The layout this spec's locks are stored in.
    pub fn dialect(&self) -> Dialect {
        Dialect::redisson_if(self.redisson)
    }
}

/// `rlock run`'s command line, resolved: the locks, how they are taken,
/// COMMAND and its limits.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// How the locks are taken.
    pub lock: LockSpec,
    /// The names as given, each once (a name given twice is one lock).
    pub names: Vec<LockName>,
    /// COMMAND and its arguments (`-c STRING` is already `sh -c STRING`).
    pub command: Vec<OsString>,
    /// `--lease`: a fixed lease without renewal, instead of `--ttl` renewed.
    pub lease: Option<Duration>,
    /// `--max-hold`.
    pub max_hold: Option<Duration>,
    /// `--kill-after`, as given (fitted into the lease later).
    pub kill_after: Option<Duration>,
    /// `--signal-grace` (None: off, as `forever` gives it too).
    pub signal_grace: Option<Duration>,
    /// `--metrics-file`.
    pub metrics_file: Option<PathBuf>,
    /// Whom the run tells it waits, holds and ends (systemd, `--ready-file`).
    pub announce: AnnounceSpec,
}

impl RunSpec {
    /// Resolves `run`'s options for `config`'s target.
    #[cfg(feature = "cli")]
    pub fn resolve(config: &Config, args: &RunArgs) -> Result<RunSpec> {
        Ok(RunSpec {
            lock: LockSpec::resolve(config, &args.lock)?,
            names: first_of_each(&args.names),
            command: args.command.clone(),
            lease: args.lease,
            max_hold: args.max_hold,
            kill_after: args.kill_after,
            signal_grace: args.signal_grace.filter(|g| *g != crate::cli::FOREVER),
            metrics_file: args.metrics_file.clone(),
            announce: AnnounceSpec::resolve(args, config.tls.cacert.as_deref())?,
        })
    }
}

/// `names` in the order given, each once.
fn first_of_each(names: &[LockName]) -> Vec<LockName> {
    let mut once: Vec<LockName> = Vec::with_capacity(names.len());
    for name in names {
        if !once.contains(name) {
            once.push(name.clone());
        }
    }
    once
}

/// Options that cannot go together with each other or with the target.
fn refuse_conflicts(config: &Config, lock: &LockSpec, counted: bool) -> Result<()> {
    if config.is_local() {
        let refuse = |what: &str| {
            Err(Error::usage(format!(
                "{what} has no meaning for file: locks (this host only)"
            )))
        };
        if lock.min_replicas > 0 {
            return refuse("--min-replicas");
        }
        if lock.redisson {
            return refuse("--redisson");
        }
        if lock.fair {
            return Err(Error::usage(
                "--fair is not supported by file: locks: the kernel keeps no queue",
            ));
        }
    }
    // (Sentinel and Cluster host lists are one URL each.)
    if config.is_quorum() {
        if lock.redisson {
            return Err(Error::usage(
                "--redisson locks one server as Redisson does; it cannot be combined with several --url",
            ));
        }
        // Each server counts only its own holders and queue: different
        // majorities could admit more than N, or order a queue differently.
        if counted || lock.fair {
            return Err(Error::usage(
                "--limit above 1 and --fair need one server: a Redlock quorum (several --url) cannot count holders or order a queue across servers",
            ));
        }
    }
    if lock.redisson && (lock.kind != Kind::Exclusive || lock.fair) {
        return Err(Error::usage(
            "--redisson is Redisson's exclusive lock: it cannot be combined with --shared, --limit or --fair",
        ));
    }
    Ok(())
}

#[cfg(all(test, feature = "cli"))]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    /// `rlock --url URL acquire OPTIONS... x`, resolved.
    fn spec(url: &str, options: &[&str]) -> Result<LockSpec> {
        let mut args = vec!["rlock", "--url", url, "acquire"];
        args.extend(options);
        args.push("x");
        let cli = Cli::try_parse_from(args).unwrap();
        let config = Config::resolve(&cli.global, None)?;
        let Command::Acquire(acquire) = &cli.command else {
            panic!("not acquire")
        };
        LockSpec::resolve(&config, &acquire.lock)
    }

    const ONE: &str = "redis://127.0.0.1:1";

    #[test]
    fn kinds_and_waits() {
        assert_eq!(spec(ONE, &[]).unwrap().kind, Kind::Exclusive);
        assert_eq!(spec(ONE, &["--limit", "1"]).unwrap().kind, Kind::Exclusive);
        let limit = spec(ONE, &["--limit", "3"]).unwrap();
        assert_eq!(limit.kind, Kind::Semaphore(3));
        assert_eq!(spec(ONE, &["-s"]).unwrap().kind, Kind::Shared);
        let forever = spec(ONE, &[]).unwrap();
        assert_eq!((forever.wait, forever.no_wait()), (None, false));
        let no_wait = spec(ONE, &["-n"]).unwrap();
        assert_eq!(
            (no_wait.wait, no_wait.no_wait()),
            (Some(Duration::ZERO), true)
        );
        let zero = spec(ONE, &["--wait", "0"]).unwrap();
        assert!(zero.no_wait());
    }

    #[test]
    fn conflicts_with_the_target_are_usage_errors() {
        let quorum = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3";
        for (url, options) in [
            ("file:/nonexistent-rlock-dir", &["--fair"][..]),
            ("file:/nonexistent-rlock-dir", &["--redisson"]),
            ("file:/nonexistent-rlock-dir", &["--min-replicas", "1"]),
            (quorum, &["--limit", "2"]),
            (quorum, &["--redisson"]),
            (ONE, &["--redisson", "--shared"]),
        ] {
            let err = spec(url, options).unwrap_err();
            assert_eq!(err.exit().code(), 2, "{url} {options:?}");
        }
        assert!(spec(quorum, &["--limit", "1"]).is_ok());
    }
}
