//! How a lock is taken: the builder [`Client::lock`] returns, and its
//! acquisition through the CLI's own wait ([`crate::wait::acquire`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::hold::{Hold, Keeping};
use super::{Client, Error};
use crate::backend::{HolderInfo, Session};
use crate::config::LockSpec;
use crate::error::Cause;
use crate::holding::Recorder;
use crate::holding::held::HeldLock;
use crate::holding::{Ending, holder};
use crate::lock::clock::Stamp;
use crate::lock::kind::Kind;
use crate::lock::lease::{Lease, MAX_TTL, MIN_TTL, fit_grace};
use crate::lock::name::{LockId, LockName};
use crate::lock::token::Token;
use crate::run_state::Shared;
use crate::wait::{self, Wanted};

/// The lease when none is asked for, as `rlock --ttl`'s default.
const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// How long an unreachable server is waited for when there is no wait for
/// the lock, as `rlock --unreachable-wait`'s default.
const UNREACHABLE_WAIT: Duration = Duration::from_secs(60);

/// How a lock is taken: the lease, how long to wait, the kind and the
/// note. Made by [`Client::lock`] and [`Client::lock_all`]; nothing
/// happens until [`acquire`](Self::acquire).
///
/// ```no_run
/// use std::time::Duration;
/// # let client = rlock::Client::open("redis://127.0.0.1:6379")?;
/// let hold = client
///     .lock("reports")
///     .shared()
///     .ttl(Duration::from_secs(60))
///     .wait(Duration::from_secs(5))
///     .note("weekly report")
///     .acquire()?;
/// # Ok::<(), rlock::Error>(())
/// ```
#[must_use = "a lock builder takes nothing until .acquire()"]
#[derive(Debug, Clone)]
pub struct LockBuilder<'c> {
    client: &'c Client,
    names: Vec<String>,
    /// How the locks are taken: the CLI's own lock spec, which the setters
    /// fill in and `rlock run` and `rlock acquire` give whole.
    spec: LockSpec,
    /// The limit asked for, refused when 0 or beside a quorum even when
    /// `.shared()` made the lock shared.
    limit: Option<u32>,
    note: Option<String>,
}

/// The caller's side of an acquisition: what `rlock run`, `rlock acquire`
/// and a library program each bring (who holds, the lease asked for, how
/// the wait hears of signals).
pub(crate) struct Caller {
    /// The wait's run state: signals, progress, announcements.
    pub(crate) shared: Arc<Shared>,
    pub(crate) holder: HolderInfo,
    pub(crate) token: Token,
    /// The lease to ask for (a fixed `--lease`, or the ttl).
    pub(crate) ttl: Duration,
    /// A release may hand the lock over while we wait.
    pub(crate) handoff: bool,
    /// How often the holder will renew, when not a third of the lease.
    pub(crate) refresh_after: Option<Duration>,
}

/// What an acquisition took: the holds, the session they were taken on,
/// when the request that proved them was sent, and the history's recorder
/// (with each lock's fence).
pub(crate) struct Taken {
    pub(crate) session: Box<dyn Session>,
    /// The holds, in the order they were acquired (by name).
    pub(crate) held: Vec<HeldLock>,
    pub(crate) since: Stamp,
    pub(crate) waited: Duration,
    pub(crate) recorder: Recorder,
    /// The names as given, comma-separated.
    pub(crate) display: String,
    /// The first name given.
    pub(crate) first: String,
}

/// An acquisition that took nothing: why, and, once the wait began, the
/// recorder and the time waited for the events only its end knows.
pub(crate) struct NotTaken {
    pub(crate) err: crate::error::Error,
    pub(crate) recorder: Option<Recorder>,
    pub(crate) waited: Option<Duration>,
}

impl From<crate::error::Error> for Box<NotTaken> {
    fn from(err: crate::error::Error) -> Self {
        Box::new(NotTaken {
            err,
            recorder: None,
            waited: None,
        })
    }
}

impl<'c> LockBuilder<'c> {
    pub(super) fn new(client: &'c Client, names: Vec<String>) -> Self {
        LockBuilder {
            client,
            names,
            spec: LockSpec {
                kind: Kind::Exclusive,
                wait: Some(Duration::ZERO),
                unreachable_wait: UNREACHABLE_WAIT,
                progress_interval: Duration::ZERO,
                conflict_code: crate::exit::NOT_ACQUIRED_DEFAULT,
                fair: false,
                min_replicas: 0,
                ttl: DEFAULT_TTL,
                history: crate::lock::event::DEFAULT_CAP,
                redisson: false,
            },
            limit: None,
            note: None,
        }
    }

    /// The builder `rlock run` and `rlock acquire` take their locks with:
    /// every option as their command line resolved it.
    pub(crate) fn with_spec(mut self, spec: &LockSpec) -> Self {
        self.spec = spec.clone();
        self.limit = spec.kind.semaphore_limit();
        self
    }

    /// Also takes lock `name` (all or none, as [`Client::lock_all`]).
    pub fn and(mut self, name: &str) -> Self {
        self.names.push(name.to_owned());
        self
    }

    /// The lease (`rlock --ttl`; at least 100 ms, at most 1 year). Default 30 s. It is
    /// renewed in the background at the CLI's cadence (every 1.9 s with
    /// the default), and a hold whose renewals fail is reported lost a
    /// third of the lease (at most 10 s) before the lease could end.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.spec.ttl = ttl;
        self
    }

    /// Waits up to `wait` for the lock (`rlock --wait`); a release wakes the
    /// waiter at once. Default: no wait ([`Error::is_busy`] when taken). An
    /// unreachable server is waited for within the same time.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.spec.wait = Some(wait);
        self
    }

    /// Waits for the lock however long it takes (`rlock` without
    /// `--no-wait` or `--wait`).
    pub fn wait_forever(mut self) -> Self {
        self.spec.wait = None;
        self
    }

    /// A shared (read) lock (`rlock --shared`): many shared holders at once,
    /// none beside an exclusive one.
    pub fn shared(mut self) -> Self {
        self.spec.kind = Kind::Shared;
        self
    }

    /// A semaphore (`rlock --limit N`): at most `n` holders at once. A
    /// shared lock stays shared.
    pub fn limit(mut self, n: u32) -> Self {
        self.limit = Some(n);
        if self.spec.kind != Kind::Shared {
            self.spec.kind = match n {
                1 => Kind::Exclusive,
                n => Kind::Semaphore(n),
            };
        }
        self
    }

    /// First come, first served among waiters (`rlock --fair`).
    pub fn fair(mut self) -> Self {
        self.spec.fair = true;
        self
    }

    /// What this holder is, shown by `rlock status` and to waiters
    /// (`rlock --note`; one line, at most 200 bytes, URL passwords hidden).
    /// Default, as the command's: the CI job's URL from the environment
    /// under GitHub Actions, GitLab CI, Buildkite or Jenkins, else none.
    pub fn note(mut self, note: &str) -> Self {
        self.note = Some(note.to_owned());
        self
    }

    /// Keeps the lock's last `n` events for `rlock history` (`rlock
    /// --history`). Default 100; 0 records nothing.
    pub fn history(mut self, n: u32) -> Self {
        self.spec.history = n;
        self
    }

    /// Takes the lock(s), waiting as allowed. Blocks the calling thread.
    ///
    /// # Errors
    ///
    /// [`Error::is_busy`] when the lock is taken and the wait ran out (or
    /// was not asked for); otherwise the server could not be reached
    /// ([`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable)), or the
    /// names or options are refused
    /// ([`ErrorKind::Usage`](crate::ErrorKind::Usage)).
    pub fn acquire(self) -> Result<Hold, Error> {
        let inner = Arc::clone(self.client.inner());
        let note = crate::config::note::resolve(self.note.as_deref());
        let lease = Lease::Renewed(self.spec.ttl);
        let mut names: Vec<&str> = Vec::with_capacity(self.names.len());
        for name in &self.names {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        let display = names.join(", ");
        let grace = fit_grace(None, lease, &display);
        let caller = Caller {
            shared: Shared::without_signals(&display),
            holder: program_holder(&note),
            token: Token::generate()?,
            ttl: self.spec.ttl,
            handoff: true,
            refresh_after: Some(lease.period(grace)),
        };
        let mut taken = match self.take(caller) {
            Ok(taken) => taken,
            Err(not) => {
                record_not_acquired(&inner, &not);
                return Err(not.err.into());
            }
        };
        for (lock, event) in taken.recorder.unrecorded(&taken.held, taken.waited) {
            let _ = taken.session.record(&lock, taken.recorder.cap(), &event);
        }
        Hold::start(Keeping {
            inner,
            session: taken.session,
            held: taken.held,
            display: taken.display,
            first: taken.first,
            lease,
            grace,
            since: taken.since,
            recorder: taken.recorder,
        })
    }

    /// The acquisition itself, for a library program and for the CLI's
    /// `run` and `acquire` alike: checks the names and options, waits for
    /// every lock (all or none, in name order) and notes their fences.
    pub(crate) fn take(self, caller: Caller) -> Result<Taken, Box<NotTaken>> {
        let inner = self.client.inner();
        let config = &inner.config;
        let spec = self.checked_spec()?;
        let mut names: Vec<LockName> = Vec::with_capacity(self.names.len());
        for name in &self.names {
            let name = LockName::new(name).map_err(crate::error::Error::from)?;
            if !names.contains(&name) {
                names.push(name);
            }
        }
        if names.is_empty() {
            return Err(crate::error::Error::usage("no lock name given").into());
        }
        let display = names
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let first = names[0].as_str().to_owned();
        // Every holder takes shared names in the same order: no deadlock.
        names.sort();
        let locks: Vec<LockId> = names.iter().map(|n| spec.lock_id(config, n)).collect();
        let mut recorder = Recorder::new(spec.history, caller.holder.clone(), &locks);
        let mut wanted = Wanted::new(
            &locks,
            &caller.token,
            &config.inherited,
            &caller.holder,
            &spec,
            caller.ttl,
            caller.handoff,
        );
        wanted.replica_timeout = config.connect_timeout;
        if let Some(refresh_after) = caller.refresh_after {
            wanted.refresh_after = refresh_after;
        }
        wanted.record = recorder.acquired();
        let started = Instant::now();
        let acquired = wait::acquire(
            &inner.backend,
            inner.take_idle(),
            &wanted,
            &display,
            &caller.shared,
        );
        let waited = started.elapsed();
        let (session, holds, since) = match acquired {
            Ok(acquired) => acquired,
            Err(err) => {
                return Err(Box::new(NotTaken {
                    err,
                    recorder: Some(recorder),
                    waited: Some(waited),
                }));
            }
        };
        let held = HeldLock::pair(&locks, holds);
        recorder.held(&held);
        Ok(Taken {
            session,
            held,
            since,
            waited,
            recorder,
            display,
            first,
        })
    }

    /// The spec, with what cannot work refused.
    fn checked_spec(&self) -> crate::error::Result<LockSpec> {
        let spec = &self.spec;
        if spec.ttl < MIN_TTL || spec.ttl > MAX_TTL {
            return Err(crate::error::Error::usage(format!(
                "the ttl must be at least 100ms and at most 1 year, not {}",
                humantime::format_duration(spec.ttl)
            )));
        }
        if self.limit == Some(0) {
            return Err(crate::error::Error::usage("the limit must be at least 1"));
        }
        spec.refuse_conflicts(&self.client.inner().config, self.limit)?;
        Ok(spec.clone())
    }
}

/// This program as a holder: its pid, host and name, and the note.
fn program_holder(note: &str) -> HolderInfo {
    let program = std::env::args_os()
        .next()
        .map(|arg0| {
            std::path::Path::new(&arg0)
                .file_name()
                .map_or(arg0.clone(), ToOwned::to_owned)
        })
        .unwrap_or_else(|| "(rlock library)".into());
    holder::holder_info(&[program], note)
}

/// Records how a wait that got nothing ended (`busy`, as the CLI does), on
/// the client's session; other failures leave no event.
fn record_not_acquired(inner: &super::Inner, not: &NotTaken) {
    let (Some(recorder), Cause::NotAcquired { .. }) = (&not.recorder, not.err.cause()) else {
        return;
    };
    let events = recorder.at_end(&Ending::Busy, not.err.exit(), not.waited);
    if events.is_empty() {
        return;
    }
    if let Ok(mut session) = inner.session() {
        for (lock, event) in &events {
            let _ = session.record(lock, recorder.cap(), event);
        }
        inner.put_idle(session);
    }
}
