//! The options of `rlock run`: how the lock is taken and kept, and what
//! runs under it.

use std::ffi::OsString;
use std::time::Duration;

use clap::Args;

use super::duration::{grace_duration, lease_duration, positive_duration, signal_grace_duration};
use super::{LEASE, LockOptions, NAME_HINT, RECORDS, SERVICE};
use crate::lock::name::LockName;

/// Options of `rlock run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// How the lock is taken.
    #[command(flatten)]
    pub lock: LockOptions,

    /// Fixed lease without renewal: COMMAND gets SIGTERM --kill-after before it
    /// ends and is killed just before it ends (exit 70).
    #[arg(long, value_name = "DUR", value_parser = lease_duration, env = "RLOCK_LEASE",
          help_heading = LEASE)]
    pub lease: Option<Duration>,

    /// Stop COMMAND this long after it started, as timeout(1) does: SIGTERM
    /// to its process group, SIGKILL --kill-after later; the lock is released
    /// and rlock exits 124.
    ///
    /// The lease stays --ttl and renewed meanwhile, so a holder that crashes
    /// still frees the lock within its ttl (unlike a long --lease).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, env = "RLOCK_MAX_HOLD",
          help_heading = LEASE)]
    pub max_hold: Option<Duration>,

    /// When the run ends, write its outcome to FILE in Prometheus' text format
    /// (for node_exporter's textfile collector), keeping other locks' series.
    ///
    /// rlock_last_run_timestamp_seconds, rlock_last_success_timestamp_seconds,
    /// rlock_wait_seconds, rlock_hold_seconds and rlock_exit_status, labelled by
    /// lock (and result). Written atomically (a temporary file in the same
    /// directory, renamed); a failed write is one line on stderr, never a
    /// failed run.
    #[arg(long, value_name = "FILE", env = "RLOCK_METRICS_FILE",
          value_hint = clap::ValueHint::FilePath, help_heading = RECORDS)]
    pub metrics_file: Option<std::path::PathBuf>,

    /// Under systemd (NOTIFY_SOCKET set), when READY=1 goes out: once the
    /// lock is held and COMMAND started (held), or at once (start).
    ///
    /// Meanwhile STATUS= says what the run waits for, and EXTEND_TIMEOUT_USEC=
    /// keeps the unit's start from timing out. With WATCHDOG_USEC, WATCHDOG=1
    /// follows each answer from the server while waiting and each confirmed
    /// renewal while holding.
    #[arg(long, value_name = "WHEN", value_enum, default_value_t = NotifyReady::Held,
          env = "RLOCK_NOTIFY_READY", help_heading = SERVICE)]
    pub notify_ready: NotifyReady,

    /// A file that exists exactly while the lock is held and COMMAND runs
    /// (for a readiness probe): RLOCK_PID=, RLOCK_NAME=, RLOCK_FENCE=,
    /// RLOCK_FENCES= and RLOCK_SINCE= lines.
    ///
    /// Written atomically once COMMAND started; removed before the release,
    /// and as soon as the hold is lost (by the guardian if rlock is stopped
    /// past its lease). One a dead run left is removed at start. Its directory
    /// must be writable when rlock starts (else exit 2).
    #[arg(long, value_name = "PATH", env = "RLOCK_READY_FILE",
          value_hint = clap::ValueHint::FilePath, help_heading = SERVICE)]
    pub ready_file: Option<std::path::PathBuf>,

    // `<exit status>` is the URL's syntax in --help and the man page, not HTML.
    #[allow(rustdoc::invalid_html_tags)]
    /// Pings a monitor at URL in healthchecks.io's protocol (Cronitor and
    /// others accept it too): URL/start when the lock is taken, URL/<exit
    /// status> after the release, URL/log for a run skipped because the lock
    /// was taken, each with the run's id (rid=).
    ///
    /// The body is rlock's one-line cause, never COMMAND's output. The exit
    /// status goes out after the release; each ping gets 3 tries within 15s,
    /// and the run's end waits at most 5s for them; one that fails is a -v line and never
    /// changes the exit status. https:// trusts the system's CA store, or
    /// --cacert.
    #[arg(long, value_name = "URL", env = "RLOCK_PING",
          value_hint = clap::ValueHint::Url, help_heading = SERVICE)]
    pub ping: Option<String>,

    /// Grace between SIGTERM and SIGKILL when COMMAND must be stopped
    /// [default: 10s, at most a third of the lease].
    ///
    /// Both signals land inside the lease rlock can prove: when renewals fail,
    /// SIGTERM goes out this long before SIGKILL, which comes just before the
    /// lease could end, so renewals are retried until then. A longer grace
    /// leaves less time for retries; it is capped at a third of --ttl or
    /// --lease (with a note when given explicitly).
    #[arg(long, value_name = "DUR", value_parser = grace_duration, env = "RLOCK_KILL_AFTER",
          help_heading = LEASE)]
    pub kill_after: Option<Duration>,

    /// After forwarding SIGINT, SIGTERM or SIGHUP to COMMAND, kill COMMAND's
    /// process group (SIGKILL) if it still runs this long after the first of
    /// them, release the lock, and exit 128+N for that signal N [default: off].
    ///
    /// For CI runners that kill the whole job soon after cancelling it
    /// (GitHub Actions: SIGINT, SIGTERM 7.5s later, SIGKILL 2.5s after that;
    /// --signal-grace 5s fits): the lock is released before rlock is killed,
    /// instead of being held until its lease ends. `forever` turns it off.
    #[arg(long, value_name = "DUR", value_parser = signal_grace_duration,
          env = "RLOCK_SIGNAL_GRACE", help_heading = LEASE)]
    pub signal_grace: Option<Duration>,

    /// Lock name(s): 1-200 bytes, no whitespace, control characters, '{' or '}'.
    ///
    /// Several names are taken all together or not at all.
    #[arg(value_name = "NAME", required = true, value_hint = NAME_HINT,
          value_parser = LockName::new)]
    pub names: Vec<LockName>,

    /// The command to run, after `--`; executed directly, without a shell.
    #[arg(value_name = "COMMAND", last = true, required_unless_present = "shell",
          value_hint = clap::ValueHint::CommandWithArguments)]
    pub command: Vec<OsString>,

    /// Run STRING with `sh -c` instead of a COMMAND after `--` (as flock's -c).
    #[arg(
        short = 'c',
        long = "command",
        value_name = "STRING",
        value_hint = clap::ValueHint::CommandString,
        conflicts_with = "command"
    )]
    pub shell: Option<OsString>,
}

impl RunArgs {
    /// `-c STRING` becomes the COMMAND `sh -c STRING`.
    pub(super) fn resolve_shell(&mut self) {
        if let Some(string) = self.shell.take() {
            self.command = vec!["sh".into(), "-c".into(), string];
        }
    }
}

/// When a run under systemd tells it it is ready (`--notify-ready`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NotifyReady {
    /// Once the lock is held and COMMAND started.
    Held,
    /// At once: a waiting standby counts as started.
    Start,
}
