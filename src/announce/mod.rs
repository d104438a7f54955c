//! What the world around a run is told: one [`Announcer`] per run receives
//! the run's lifecycle [`Event`]s, from whichever thread sees them, and
//! hands each to its [`Sink`]s (systemd's notification socket, the
//! `--ready-file`, the `--ping` monitor). A sink that is not configured does not exist: with none,
//! telling an event is a loop over an empty list (no thread, no system
//! call), and callers skip building what only a sink would read
//! ([`Announcer::quiet`]).
//!
//! The events, in the order a run meets them (the thread that tells each):
//! [`Event::Waiting`] after each answer that found the lock taken, and
//! [`Event::Unreachable`] for each try the server did not answer (the
//! waiting thread: `run`'s main thread); [`Event::Held`] once the locks are
//! held and COMMAND started (main thread); [`Event::Renewed`] after each
//! confirmed renewal (the watchdog thread); [`Event::Lost`] as soon as the
//! hold is known lost, before COMMAND is told to stop (the watchdog thread;
//! told again, harmlessly, when the guardian process stopped COMMAND
//! first); [`Event::Stopping`] once COMMAND has exited (main thread);
//! [`Event::Ended`] last, after the release and the history (main thread),
//! with the run's exit status, whether it was skipped because the lock was
//! taken, and its one-line cause.

mod notify;
mod ping;
mod ready_file;
pub use ready_file::remove_if_stale as remove_stale_ready_file;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::config::AnnounceSpec;
use crate::exit::Exit;

/// What happened to the run.
pub enum Event<'a> {
    /// A try found the lock taken (an answer from the server).
    Waiting {
        /// The waiting state in words, as the progress log writes it
        /// (`waiting for NAME: held by pid P on HOST ('cmd') for 3m`).
        status: &'a str,
    },
    /// The server did not answer a try while waiting, for `for_` so far.
    Unreachable {
        /// The lock waited for.
        lock: &'a str,
        /// Since the outage began.
        for_: Duration,
    },
    /// Every lock is held and COMMAND started.
    Held(&'a Held<'a>),
    /// A renewal of every hold was confirmed.
    Renewed,
    /// Renewals have failed for `for_` (the watchdog retries until the
    /// lease's deadline): `cause` is the last failure's.
    RenewalsFailing {
        /// Since the first failed renewal was sent.
        for_: Duration,
        /// Why, in words.
        cause: &'a str,
    },
    /// The hold is lost (or could have lapsed): COMMAND is being stopped.
    Lost,
    /// COMMAND has exited: rlock stops what it left and releases.
    Stopping,
    /// The run is over.
    Ended(&'a Ended<'a>),
}

/// The holds, once COMMAND started.
pub struct Held<'a> {
    /// Each name as given, with its fence.
    pub locks: &'a [(&'a str, u64)],
    /// When the locks were acquired (the end of the wait).
    pub acquired_at: SystemTime,
}

/// How the run ended.
pub struct Ended<'a> {
    /// rlock's exit status.
    pub exit: Exit,
    /// Not run because the lock was taken (`-E` sets the status).
    pub skipped: bool,
    /// The run's one-line cause, where it has one: the error it ended on,
    /// the line that said the hold was lost, or the one said after the
    /// release.
    pub cause: Option<&'a str>,
    /// After a loss: by when the run must be done (whatever is left then is
    /// not waited for).
    pub by: Option<std::time::Instant>,
}

/// Something told of a run's events. Called from several threads, and on
/// the path between the handoff and COMMAND: no blocking beyond a local
/// system call.
pub trait Sink: Send + Sync {
    /// Acts on `event`.
    fn tell(&self, event: &Event<'_>);
}

/// The run's sinks.
#[derive(Default)]
pub struct Announcer {
    sinks: Vec<Box<dyn Sink>>,
    /// systemd is told: the progress log says changes only.
    notifying: bool,
    /// The longest the waiter may go without an answer from the server.
    answer_every: Option<Duration>,
}

impl Announcer {
    /// Nothing announced (`acquire`, a run with no sink configured).
    pub fn none() -> Arc<Self> {
        Arc::new(Announcer::default())
    }

    /// The sinks `spec` configures; READY=1 goes out now if asked for at start.
    pub fn new(spec: &AnnounceSpec) -> Arc<Self> {
        let mut announcer = Announcer::default();
        if let Some(notify) = &spec.notify
            && let Some(sink) = notify::Notifier::open(notify)
        {
            announcer.notifying = true;
            announcer.answer_every = Some(sink.answer_every());
            announcer.sinks.push(Box::new(sink));
        }
        if let Some(path) = &spec.ready_file {
            announcer
                .sinks
                .push(Box::new(ready_file::ReadyFile::new(path.clone())));
        }
        if let Some(pinger) = &spec.ping {
            announcer
                .sinks
                .push(Box::new(ping::Ping::new(std::sync::Arc::clone(pinger))));
        }
        Arc::new(announcer)
    }

    /// True when no sink listens: callers skip building events.
    pub fn quiet(&self) -> bool {
        self.sinks.is_empty()
    }

    /// True when systemd is told the waiting state (STATUS=): the journal
    /// then needs a line only when the wait starts and its holder changes.
    pub fn notifying(&self) -> bool {
        self.notifying
    }

    /// How long a waiting run may block without hearing from the server, so
    /// that STATUS= stays current and WATCHDOG=1 goes out in time.
    pub fn answer_every(&self) -> Option<Duration> {
        self.answer_every
    }

    /// Tells every sink.
    pub fn tell(&self, event: &Event<'_>) {
        for sink in &self.sinks {
            sink.tell(event);
        }
    }
}

/// `holding a, b since 2026-11-30T12:00:00Z, fence 7` (`fences 7, 9`).
fn holding(held: &Held<'_>) -> String {
    let names: Vec<&str> = held.locks.iter().map(|(name, _)| *name).collect();
    let fences: Vec<String> = held.locks.iter().map(|(_, f)| f.to_string()).collect();
    format!(
        "holding {} since {}, fence{} {}",
        crate::report::sanitize(&names.join(", ")),
        humantime::format_rfc3339_seconds(held.acquired_at),
        if fences.len() > 1 { "s" } else { "" },
        fences.join(", ")
    )
}
