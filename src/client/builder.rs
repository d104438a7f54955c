//! How a lock is taken: the builder [`Client::lock`] returns, and its
//! acquisition through the CLI's own wait ([`crate::wait::acquire`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::hold::{Hold, Keeping};
use super::{Client, Error};
use crate::backend::HolderInfo;
use crate::config::LockSpec;
use crate::error::Cause;
use crate::lock::kind::Kind;
use crate::lock::lease::{Lease, fit_grace};
use crate::lock::name::{LockId, LockName};
use crate::lock::token::Token;
use crate::run_state::Shared;
use crate::supervisor::Recorder;
use crate::supervisor::held::HeldLock;
use crate::supervisor::{Ending, holder};
use crate::wait::{self, Wanted};

/// The lease when none is asked for, as `rlock --ttl`'s default.
const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// The shortest lease `rlock --ttl` takes.
const MIN_TTL: Duration = Duration::from_millis(100);
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
    ttl: Duration,
    wait: Option<Duration>,
    shared: bool,
    limit: Option<u32>,
    fair: bool,
    note: Option<String>,
    history: u32,
}

impl<'c> LockBuilder<'c> {
    pub(super) fn new(client: &'c Client, names: Vec<String>) -> Self {
        LockBuilder {
            client,
            names,
            ttl: DEFAULT_TTL,
            wait: Some(Duration::ZERO),
            shared: false,
            limit: None,
            fair: false,
            note: None,
            history: crate::lock::event::DEFAULT_CAP,
        }
    }

    /// Also takes lock `name` (all or none, as [`Client::lock_all`]).
    pub fn and(mut self, name: &str) -> Self {
        self.names.push(name.to_owned());
        self
    }

    /// The lease (`rlock --ttl`; at least 100 ms). Default 30 s. It is
    /// renewed in the background at the CLI's cadence (every 1.9 s with
    /// the default), and a hold whose renewals fail is reported lost a
    /// third of the lease (at most 10 s) before the lease could end.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Waits up to `wait` for the lock (`rlock --wait`); a release wakes the
    /// waiter at once. Default: no wait ([`Error::is_busy`] when taken). An
    /// unreachable server is waited for within the same time.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Waits for the lock however long it takes (`rlock` without
    /// `--no-wait` or `--wait`).
    pub fn wait_forever(mut self) -> Self {
        self.wait = None;
        self
    }

    /// A shared (read) lock (`rlock --shared`): many shared holders at once,
    /// none beside an exclusive one.
    pub fn shared(mut self) -> Self {
        self.shared = true;
        self
    }

    /// A semaphore (`rlock --limit N`): at most `n` holders at once.
    pub fn limit(mut self, n: u32) -> Self {
        self.limit = Some(n);
        self
    }

    /// First come, first served among waiters (`rlock --fair`).
    pub fn fair(mut self) -> Self {
        self.fair = true;
        self
    }

    /// What this holder is, shown by `rlock status` and to waiters
    /// (`rlock --note`; one line, at most 200 bytes, URL passwords hidden).
    pub fn note(mut self, note: &str) -> Self {
        self.note = Some(note.to_owned());
        self
    }

    /// Keeps the lock's last `n` events for `rlock history` (`rlock
    /// --history`). Default 100; 0 records nothing.
    pub fn history(mut self, n: u32) -> Self {
        self.history = n;
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
        let config = &inner.config;
        let spec = self.spec()?;
        spec.refuse_conflicts(config, self.limit)?;
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
        let locks: Vec<LockId> = names.iter().map(|n| config.lock_id(false, n)).collect();
        let note = crate::config::note::resolve(self.note.as_deref());
        let holder = program_holder(&note);
        let token = Token::generate()?;
        let lease = Lease::Renewed(spec.ttl);
        let grace = fit_grace(None, lease, &display);
        let mut recorder = Recorder::new(spec.history, holder.clone(), &locks);
        let mut wanted = Wanted::new(&locks, &token, &[], &holder, &spec, spec.ttl, true);
        wanted.replica_timeout = config.connect_timeout;
        wanted.refresh_after = lease.period(grace);
        wanted.record = recorder.acquired();
        let shared = Shared::without_signals(&display);
        let started = Instant::now();
        let acquired = wait::acquire_with(
            &inner.backend,
            inner.take_idle(),
            &wanted,
            &display,
            &shared,
        );
        let waited = started.elapsed();
        let (mut session, holds, since) = match acquired {
            Ok(acquired) => acquired,
            Err(err) => {
                record_not_acquired(&inner, &recorder, &err, waited);
                return Err(err.into());
            }
        };
        let held = HeldLock::pair(&locks, holds);
        recorder.held(&held);
        for (lock, event) in recorder.unrecorded(&held, waited) {
            let _ = session.record(&lock, recorder.cap(), &event);
        }
        Hold::start(Keeping {
            inner,
            session,
            held,
            display,
            first,
            lease,
            grace,
            since,
            recorder,
        })
    }

    /// The CLI's lock spec for what was asked.
    fn spec(&self) -> Result<LockSpec, Error> {
        if self.ttl < MIN_TTL {
            return Err(crate::error::Error::usage(format!(
                "the ttl must be at least 100ms, not {}",
                humantime::format_duration(self.ttl)
            ))
            .into());
        }
        if self.limit == Some(0) {
            return Err(crate::error::Error::usage("the limit must be at least 1").into());
        }
        Ok(LockSpec {
            kind: match (self.shared, self.limit) {
                (true, _) => Kind::Shared,
                (false, Some(n)) if n > 1 => Kind::Semaphore(n),
                _ => Kind::Exclusive,
            },
            wait: self.wait,
            unreachable_wait: UNREACHABLE_WAIT,
            progress_interval: Duration::ZERO,
            conflict_code: crate::exit::NOT_ACQUIRED_DEFAULT,
            fair: self.fair,
            min_replicas: 0,
            ttl: self.ttl,
            history: self.history,
            redisson: false,
        })
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
fn record_not_acquired(
    inner: &super::Inner,
    recorder: &Recorder,
    err: &crate::error::Error,
    waited: Duration,
) {
    let ending = match err.cause() {
        Cause::NotAcquired { .. } => Ending::Busy,
        _ => return,
    };
    let events = recorder.at_end(&ending, err.exit(), Some(waited));
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
