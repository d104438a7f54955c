//! How a lock is taken: the options `run` and `acquire` share.

use std::time::Duration;

use clap::Args;

use super::duration::{duration, lease_duration, wait_duration};
use super::{DEFAULT_TTL_TEXT, KINDS, LEASE, RECORDS, WAITING};
use crate::exit::NOT_ACQUIRED_DEFAULT;

/// How a lock is taken: shared by `run` and `acquire`.
#[derive(Debug, Args)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "each is a command-line flag of its own; config resolves them into a LockSpec"
)]
pub struct LockOptions {
    /// Give up after waiting this long for the lock (default: wait forever).
    ///
    /// A bare number is seconds, as flock's -w takes it (-w 5, -w 0.5); or give a
    /// unit (500ms, 10m, 1h 30m), as for every DUR; forever (or infinity) waits
    /// forever. --timeout is flock's spelling of it.
    #[arg(short, long, value_name = "DUR", value_parser = wait_duration, env = "RLOCK_WAIT",
          visible_alias = "timeout", help_heading = WAITING)]
    pub wait: Option<Duration>,

    /// Give up at once if the lock is taken (same as --wait 0).
    ///
    /// --nonblock and --nb are flock's spellings of it.
    #[arg(short, long, env = "RLOCK_NO_WAIT", value_parser = clap::builder::FalseyValueParser::new(),
          visible_aliases = ["nonblock", "nb"], help_heading = WAITING)]
    pub no_wait: bool,

    /// What this holder is, shown by status and to waiting runs (default: the
    /// CI job's URL under GitHub Actions, GitLab CI, Jenkins or Buildkite).
    #[arg(long, value_name = "TEXT", env = "RLOCK_NOTE", help_heading = WAITING)]
    pub note: Option<String>,

    /// Off a terminal: print a timestamped line when waiting starts and then
    /// this often (who holds the lock, how long we have waited), and one
    /// when the lock is acquired; 0: never.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = duration,
          env = "RLOCK_PROGRESS_INTERVAL", help_heading = WAITING)]
    pub progress_interval: Duration,

    /// Without --wait: how long to wait for a server that cannot be reached
    /// (down, restarting, loading, failing over) before giving up with exit 69.
    ///
    /// With --wait the server is waited for within the wait; with --no-wait, not
    /// at all. 0 gives up at once; forever (or infinity) never does.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = wait_duration,
          env = "RLOCK_UNREACHABLE_WAIT", help_heading = WAITING)]
    pub unreachable_wait: Duration,

    /// Exit status when the lock was not acquired.
    #[arg(short = 'E', long, value_name = "N", default_value_t = NOT_ACQUIRED_DEFAULT,
          env = "RLOCK_CONFLICT_EXIT_CODE", help_heading = WAITING)]
    pub conflict_exit_code: u8,

    /// Lease length (at least 100ms); `run` renews it while COMMAND runs, every
    /// tenth of what a failing renewal has before SIGTERM (1.9s by default: -v says).
    ///
    /// A bare number of 1000 or more is refused ("did you mean 30000ms?"):
    /// write a unit.
    #[arg(long, value_name = "DUR", default_value = DEFAULT_TTL_TEXT, value_parser = lease_duration,
          env = "RLOCK_TTL", help_heading = LEASE)]
    pub ttl: Duration,

    /// Exclusive lock: one holder at a time (the default; flock's -x).
    #[arg(short = 'x', long, help_heading = KINDS)]
    pub exclusive: bool,

    /// Shared (read) lock: many shared holders at once, none beside an exclusive one.
    ///
    /// Without --fair, once an exclusive run waits, new shared runs queue behind
    /// it, so a stream of readers cannot starve a writer.
    #[arg(short, long, env = "RLOCK_SHARED", value_parser = clap::builder::FalseyValueParser::new(), help_heading = KINDS)]
    pub shared: bool,

    /// Semaphore: at most N holders at once, each with its own lease.
    ///
    /// Runs that pass different N for one name are never more than the smallest
    /// N among the holders and the newcomer. --limit 1 is an exclusive lock.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..),
          env = "RLOCK_LIMIT", help_heading = KINDS)]
    pub limit: Option<u32>,

    /// First come, first served among waiters, across kinds.
    ///
    /// Exclusive and semaphore runs without --fair may still overtake the queue.
    #[arg(long, env = "RLOCK_FAIR", value_parser = clap::builder::FalseyValueParser::new(), help_heading = KINDS)]
    pub fair: bool,

    /// The lock counts only once N replicas have it (WAIT, within
    /// --connect-timeout); otherwise it is given back and rlock exits 69.
    #[arg(long, value_name = "N", default_value_t = 0, env = "RLOCK_MIN_REPLICAS",
          help_heading = KINDS)]
    pub min_replicas: u32,

    /// Keep the lock's last N events for `rlock history` (acquired, released,
    /// busy, lost, ...); 0 records nothing. A failed write is a -v note.
    #[arg(long, value_name = "N", default_value_t = crate::lock::event::DEFAULT_CAP,
          env = "RLOCK_HISTORY", help_heading = RECORDS)]
    pub history: u32,

    /// Store the lock exactly as Redisson's getLock(NAME) does (key NAME, no prefix).
    ///
    /// rlock and Redisson clients then exclude each other, and each side's
    /// unlock wakes the other's waiters (Redisson's unlock channel).
    #[arg(long, env = "RLOCK_REDISSON", value_parser = clap::builder::FalseyValueParser::new(), help_heading = KINDS)]
    pub redisson: bool,
}
