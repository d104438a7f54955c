//! The command line, defined once: parsing, `--help`, the completions, the man
//! page and the list of option variables all come from these definitions
//! (README: "Using `rlock run`").

use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::lock::name::LockName;

mod context;
mod duration;
mod env;
pub mod generate;
mod lock_options;
mod parse;
mod run_args;
mod scripting_args;
mod words;

pub use duration::{FOREVER, duration};
use duration::{grace_duration, lease_duration, positive_duration};
pub use generate::option_variables;
pub use lock_options::LockOptions;
pub use parse::{parse, parse_from};
pub use run_args::{NotifyReady, RunArgs};
pub use scripting_args::{ReleaseArgs, RenewArgs};

const CONNECTION: &str = "Connection";
const WAITING: &str = "Waiting";
const LEASE: &str = "Lease";
const KINDS: &str = "Lock kinds";
const RECORDS: &str = "Records";
const SERVICE: &str = "Service managers";

/// Lock names are not files: completions offer nothing for NAME (and PATTERN)
/// positions (zsh shows the help text instead; src/cli/generate.rs sees to bash
/// and fish, whose clap scripts ignore a positional's hint).
const NAME_HINT: clap::ValueHint = clap::ValueHint::Other;

/// Run a command while holding a named lock in Redis.
///
/// rlock takes a lease lock in Redis (Redisson's re-entrant lock design), runs
/// COMMAND while a watchdog renews the lease, and releases the lock when COMMAND
/// ends. It exits with COMMAND's status, or with 75 when the lock was not
/// acquired, 70 when the lock was lost and COMMAND stopped, 124 when COMMAND ran
/// past --max-hold, 69 when the server is unavailable, and 2 for usage errors.
///
/// A duration (DUR) is a bare number of seconds, as flock's -w takes it (5, 0.5),
/// or a number with a unit (500ms, 30s, 10m, 1h 30m).
#[derive(Debug, Parser)]
#[command(
    name = "rlock",
    version,
    propagate_version = true,
    max_term_width = 100,
    subcommand_value_name = "SUBCOMMAND",
    subcommand_help_heading = "Subcommands"
)]
pub struct Cli {
    /// Options shared by every command.
    #[command(flatten)]
    pub global: Global,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Global options (README: "Using `rlock run`").
#[derive(Debug, Args)]
pub struct Global {
    // The brackets are the URL's syntax in --help and the man page, not links.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Redis server URL: redis://[user:password@]host[:port][/db].
    ///
    /// Also rediss:// (TLS), unix:///path/to/socket,
    /// redis+sentinel://host:port[,host:port...]/MASTER,
    /// redis+cluster://host:port[,host:port...], and file:DIR for locks on
    /// this host only, kept by the kernel in DIR (no server at all).
    /// Repeat it (or separate URLs with commas) for a Redlock quorum over
    /// independent servers. Without it, RLOCK_URL (comma-separated) is used,
    /// then REDIS_URL, then redis://127.0.0.1:6379. The password may also come
    /// from REDISCLI_AUTH; it is never printed.
    #[arg(short = 'u', long = "url", value_name = "URL", env = "RLOCK_URL", value_delimiter = ',',
          global = true, help_heading = CONNECTION)]
    pub urls: Vec<String>,

    /// Key namespace: a lock NAME lives under the key PREFIX:{NAME}.
    #[arg(long, value_name = "P", env = "RLOCK_PREFIX", default_value = "rlock", global = true,
          help_heading = CONNECTION)]
    pub prefix: String,

    /// TLS: CA certificate file (PEM) to trust for rediss:// (and an https://
    /// --ping), instead of the system's trust store.
    #[arg(long, value_name = "FILE", env = "RLOCK_CACERT", global = true, help_heading = CONNECTION)]
    pub cacert: Option<std::path::PathBuf>,

    /// TLS: client certificate file (PEM) for rediss://, with --key.
    #[arg(long, value_name = "FILE", env = "RLOCK_CERT", global = true, help_heading = CONNECTION)]
    pub cert: Option<std::path::PathBuf>,

    /// TLS: client private key file (PEM) for rediss://, with --cert.
    #[arg(long, value_name = "FILE", env = "RLOCK_KEY", global = true, help_heading = CONNECTION)]
    pub key: Option<std::path::PathBuf>,

    /// Read the password from FILE, again for each new connection (for
    /// short-lived tokens used as passwords, such as cloud IAM tokens).
    ///
    /// The file holds the password alone (a final newline is ignored) and
    /// must not be readable by group or others. It stands in for a password
    /// in the URL and for REDISCLI_AUTH; the URL may still name the user.
    #[arg(long, value_name = "FILE", env = "RLOCK_PASSWORD_FILE", global = true,
          help_heading = CONNECTION)]
    pub password_file: Option<std::path::PathBuf>,

    /// Run CMD with `sh -c` for each new connection; the first line it
    /// prints is the password (for short-lived tokens from a cloud's SDK or
    /// CLI, such as ElastiCache IAM or Entra tokens).
    ///
    /// CMD's stdin is /dev/null and its stderr is read, not shown. A CMD that
    /// fails, prints no password or takes longer than 10s fails the
    /// connection (exit 69) with the first line of its stderr; the password
    /// is never printed. It stands in for a password in the URL, for
    /// REDISCLI_AUTH and for --password-file; the URL may still name the user.
    #[arg(long, value_name = "CMD", env = "RLOCK_PASSWORD_COMMAND", global = true,
          value_hint = clap::ValueHint::CommandString, help_heading = CONNECTION)]
    pub password_command: Option<String>,

    /// Bound on each connection attempt and each reply; an unreachable or stalled
    /// server fails with exit 69 instead of hanging.
    #[arg(long, value_name = "DUR", default_value = "2s", value_parser = positive_duration,
          env = "RLOCK_CONNECT_TIMEOUT", global = true, help_heading = CONNECTION)]
    pub connect_timeout: Duration,

    /// Log the server(s) used, with the database and prefix, and where that
    /// came from (--url, RLOCK_URL, REDIS_URL, default), acquisition, each
    /// renewal and the release, with timings, on stderr.
    #[arg(short, long, global = true, conflicts_with = "quiet")]
    pub verbose: bool,

    /// Print no diagnostics on stderr (usage errors excepted).
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Whether the URL list came from `--url` (true) or RLOCK_URL (false);
    /// set by [`parse()`] from clap's value source, for `-v` to say where the
    /// server came from.
    #[arg(skip)]
    pub urls_from_option: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Wait for the lock(s), run COMMAND while holding them, release when COMMAND ends.
    ///
    /// Exits with COMMAND's status (128+N if it died by signal N); 75 (or -E) if
    /// the lock was not acquired; 70 if the lock was lost and COMMAND was stopped;
    /// 124 if COMMAND ran past --max-hold and was stopped; 69 if the server is
    /// unavailable; 126/127 if COMMAND cannot be run.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Take a lock for a shell script and print its owner token on stdout.
    ///
    /// Without renewal the lock lasts --ttl; renew it with `rlock renew`, give it
    /// up with `rlock release NAME --token TOKEN`. Exits 0, 75 (or -E), 69 or 2.
    Acquire(AcquireArgs),
    /// Extend a hold taken with `acquire` to at least --ttl from now.
    ///
    /// Exits 0, or 1 when the token no longer holds the lock (expired or released).
    Renew(RenewArgs),
    /// Give up a hold (--token), or break any hold (--force, operators only).
    ///
    /// Exits 0, or 1 when the token does not hold the lock (or, with --force,
    /// nothing held it). A `rlock run` whose hold was forced notices at its next
    /// renewal, stops its COMMAND and exits 70.
    Release(ReleaseArgs),
    /// Show who holds each lock: holders (host, pid, command, note, held for,
    /// ttl, last renewal or how overdue it is) and waiters. Never owner tokens.
    ///
    /// The first line names where it looked: the server(s), the database and
    /// the prefix (server 127.0.0.1:6379 db 1 prefix team-a; --json: server,
    /// db, prefix). A lock nobody holds reads
    /// `free`; a semaphore shows holders/limit; the fence is shown with -v and
    /// in --json. Exits 69, never reporting "free", when it cannot see the
    /// locks (server unreachable, a file: lock directory it may not read or
    /// that does not exist).
    Status {
        /// Lock names (none: every held or waited-for lock, like `list`).
        #[arg(value_name = "NAME", value_hint = NAME_HINT, value_parser = LockName::new)]
        names: Vec<LockName>,
        /// One JSON object per lock, one per line.
        #[arg(long, conflicts_with = "check")]
        json: bool,
        /// Print nothing; exit 0 when every NAME is held, 1 when one is free,
        /// 69 when it cannot tell (for monitoring scripts).
        #[arg(long, requires = "names")]
        check: bool,
        /// The locks are stored as Redisson's getLock(NAME) stores them (key
        /// NAME, no prefix): held by rlock --redisson or a Redisson client.
        /// Redisson records no holder details: the thread id, hold count and
        /// lease left are shown.
        #[arg(long)]
        redisson: bool,
    },
    /// List the locks that are held or waited for (SCAN, never KEYS).
    ///
    /// The first line names where it looked (the server(s), the database and
    /// the prefix); exits 69 when it cannot see the locks, as status does.
    List {
        /// Glob over lock names (default: every lock).
        #[arg(value_name = "PATTERN", default_value = "*", value_hint = NAME_HINT)]
        pattern: String,
        /// A JSON array of status objects.
        #[arg(long)]
        json: bool,
        /// List the locks stored in Redisson's layout (keys matching PATTERN,
        /// no prefix) instead of rlock's.
        #[arg(long)]
        redisson: bool,
    },
    /// Check that the server(s) can keep rlock's promises: one line per check.
    ///
    /// Asks each configured server (a Sentinel's master, a Cluster's masters, each
    /// server of a Redlock quorum) what rlock's guarantees rest on: reachable
    /// and as which user; name and version; scripts load and run, may read
    /// TIME, and run atomically; sub-second BLPOP; no eviction of held locks
    /// (maxmemory with an evicting maxmemory-policy warns: use noeviction);
    /// persistence (what a restart and a crash keep: appendonly, appendfsync,
    /// RDB save points; without appendonly it warns); replicas;
    /// the user's rights on the prefix, command by command; the topology;
    /// the server's clock against this host's (more than 1s apart warns); a
    /// Sentinel's or Cluster's failover timing against what --ttl rides out
    /// (a failover likely to outlast it warns). Each line reads ok, warn,
    /// fail or unknown (the server would not say: CONFIG or an INFO section
    /// refused), what was checked and the fix.
    ///
    /// Exits 0 when every check is ok, 1 when one warns or is unknown, 69 when rlock
    /// cannot work there (a check failed or the server is unreachable; with
    /// several --url, fewer servers without a failure than a quorum).
    #[command(after_help = CHECK_EXAMPLES)]
    Check {
        /// One JSON object: {"server": ..., "checks": [{"name", "server",
        /// "result", "detail"}]}.
        #[arg(long)]
        json: bool,
        /// The --ttl your runs use: the `failover` line says whether their
        /// lease rides out the server's failover.
        #[arg(long, value_name = "DUR", default_value = DEFAULT_TTL_TEXT, value_parser = lease_duration,
              env = "RLOCK_TTL")]
        ttl: Duration,
        /// The --kill-after your runs use [default: 10s, at most a third of
        /// the lease]: a longer one leaves the lease less of an outage to
        /// ride out.
        #[arg(long, value_name = "DUR", value_parser = grace_duration, env = "RLOCK_KILL_AFTER")]
        kill_after: Option<Duration>,
    },
    /// Show the lock's last events, newest first: acquired, released, lost,
    /// busy, forced, max-hold, interrupted, with host, pid, command, fence and
    /// how long it waited or held.
    History {
        /// Lock name.
        #[arg(value_name = "NAME", value_hint = NAME_HINT, value_parser = LockName::new)]
        name: LockName,
        /// Show at most N events (1 or more).
        #[arg(long, value_name = "N", default_value_t = 20,
              value_parser = clap::value_parser!(u32).range(1..))]
        limit: u32,
        /// A JSON array of events, newest first.
        #[arg(long)]
        json: bool,
        /// The lock is a Redisson lock (as taken with --redisson).
        #[arg(long)]
        redisson: bool,
    },
    /// Print the locks' state in Prometheus' text format (for node_exporter's
    /// textfile collector or a scrape wrapper).
    ///
    /// For each matching lock: rlock_held, rlock_holders, rlock_limit,
    /// rlock_waiters, rlock_longest_wait_seconds, rlock_hold_age_seconds and
    /// rlock_fence, labelled by lock; from its history,
    /// rlock_history_last_success_timestamp_seconds and rlock_history_events
    /// (by event).
    Metrics {
        /// Globs over lock names (default: every held or waited-for lock); a
        /// plain NAME is shown even when the lock is free.
        #[arg(value_name = "PATTERN", value_hint = NAME_HINT)]
        patterns: Vec<String>,
    },
    /// The background watchdog of `acquire --while-pid` (internal: parsed
    /// apart, so it is in no help, completion or man page).
    #[command(skip)]
    WhilePid(WhilePidArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

const CHECK_EXAMPLES: &str = "\
Examples:
  rlock --url redis://redis.internal:6379 check
  RLOCK_URL=redis://a:6379,redis://b:6379,redis://c:6379 rlock check --json
  rlock --url redis+sentinel://s1,s2,s3/mymaster check --ttl 60s   # rides out a failover?

Probe keys live under PREFIX:{check ...}, expire within 10 s and are deleted.
With file:DIR, check tests the directory only.";

const RUN_EXAMPLES: &str = "\
Examples:
  rlock run nightly-backup -- ./backup.sh
  rlock run --wait 10m deploy-prod -- make deploy
  rlock run --no-wait -E 0 report -- ./report.sh   # skip quietly if already running
  rlock run --limit 3 deploy-slot -- ./deploy.sh    # at most 3 deploys at once
  rlock run --shared db -- ./test-suite.sh          # many test suites at once ...
  rlock run db -- ./migrate.sh                      # ... but never beside a migration
  rlock run db cache -- ./rebuild.sh                # both locks or neither

DUR is a bare number of seconds (5, 0.5) or a number with a unit (500ms, 10m).
`rlock status NAME` shows who holds NAME, with its --note.

COMMAND gets RLOCK_NAME, RLOCK_TOKEN and RLOCK_FENCE (a number that strictly
increases with every acquisition of NAME) in its environment. An rlock run of the
same NAME inside COMMAND re-enters the lock instead of deadlocking.";

/// Options of `rlock acquire`.
#[derive(Debug, Args)]
pub struct AcquireArgs {
    /// How the lock is taken.
    #[command(flatten)]
    pub lock: LockOptions,

    /// Keep the lock renewed while process PID lives, and release it when PID
    /// exits (a small background watchdog; e.g. --while-pid $$ for the calling
    /// shell). The watchdog also ends when the lock is released or lost.
    /// With file:DIR it is required: the watchdog keeps the lock files open.
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
    pub while_pid: Option<u32>,

    /// Lock name: 1-200 bytes, no whitespace, control characters, '{' or '}'.
    #[arg(value_name = "NAME", value_hint = NAME_HINT, value_parser = LockName::new)]
    pub name: LockName,
}

/// The internal `rlock __while-pid ...` command line.
#[derive(Debug, Parser)]
#[command(name = "rlock __while-pid")]
struct WhilePidCli {
    #[command(flatten)]
    global: Global,
    #[command(flatten)]
    args: WhilePidArgs,
}

/// The first argument of the internal watchdog's command line.
pub const WHILE_PID: &str = "__while-pid";

/// Options of the internal `__while-pid` watchdog. The token comes from the
/// environment (RLOCK_KEEP_TOKEN), never the command line, which `ps` shows.
#[derive(Debug, Args, Clone)]
pub struct WhilePidArgs {
    /// Lock name.
    #[arg(value_parser = LockName::new)]
    pub name: LockName,
    /// The process whose life the hold follows.
    #[arg(long)]
    pub pid: u32,
    /// Lease length, renewed at the run's cadence.
    #[arg(long, value_parser = lease_duration)]
    pub ttl: Duration,
    /// The lock is a Redisson lock.
    #[arg(long)]
    pub redisson: bool,
    /// Events the lock's history keeps (the release is recorded).
    #[arg(long, default_value_t = crate::lock::event::DEFAULT_CAP)]
    pub history: u32,
}

/// `--ttl` when not given (`check`, `renew`, `run` and `acquire`).
const DEFAULT_TTL_TEXT: &str = "30s";

/// `rlock run`'s definition alone, beside the global options: a command line
/// that starts a run is parsed with it first, so a run does not build every
/// other subcommand (measured: about a third of its start-up). Only what it
/// accepts is used; help, version and every error come from [`command`],
/// which parses the line again, so the user sees one definition's words.
pub fn run_command() -> clap::Command {
    let top = clap::Command::new("rlock").subcommand_required(true);
    let run = <RunArgs as clap::Args>::augment_args(clap::Command::new("run"));
    <Global as clap::Args>::augment_args(top).subcommand(run)
}

/// The command-line definition every user of it takes: parsing, `--help`,
/// completions and the man page. Help names an option's environment variable
/// without its value (`[env: RLOCK_PREFIX]`): a value would be shown as
/// `[env: RLOCK_PREFIX=]` when unset, and a set one may be a URL or a note
/// that a help page should not repeat.
pub fn command() -> clap::Command {
    fn hide_env_values(cmd: clap::Command) -> clap::Command {
        cmd.mut_args(|arg| arg.hide_env_values(true))
            .mut_subcommands(hide_env_values)
    }
    hide_env_values(Cli::command())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_consistent() {
        command().debug_assert();
        run_command().debug_assert();
    }

    fn parse_ok(args: &[&str]) -> Cli {
        Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    #[test]
    fn run_takes_names_and_a_command_after_double_dash() {
        let cli = parse_ok(&[
            "rlock", "run", "--wait", "1m 30s", "deploy", "--", "make", "-j4",
        ]);
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.names[0].as_str(), "deploy");
        assert_eq!(run.names.len(), 1);
        assert_eq!(run.command, ["make", "-j4"]);
        assert_eq!(run.lock.wait, Some(Duration::from_secs(90)));
        assert_eq!(run.lock.ttl, Duration::from_secs(30));
        assert_eq!(run.kill_after, None);
        assert_eq!(run.lock.conflict_exit_code, 75);
    }

    #[test]
    fn global_options_may_follow_the_subcommand() {
        let cli = parse_ok(&["rlock", "run", "-u", "redis://h:1", "-v", "x", "--", "true"]);
        assert_eq!(cli.global.urls, ["redis://h:1"]);
        assert!(cli.global.verbose);
    }
}
