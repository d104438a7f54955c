//! One `rlock run` as a chain of states, whose methods are the only order in
//! which its steps can happen:
//!
//! [`Prepared`] (COMMAND found, guardian forked, signals caught) →
//! [`Prepared::acquire`] → [`Held`] (the lock is ours; the guardian keeps
//! the lease's deadlines) → [`Held::spawn`] → [`Running`] (COMMAND started)
//! → [`Running::wait`] → [`Finished`] (COMMAND and what it left in its
//! process group are gone, the deadlines closed) → [`Finished::release`] →
//! the exit status.
//!
//! Each step consumes the state before it, so COMMAND cannot start before
//! the lock is held, and the lock cannot be released while COMMAND's group
//! still runs.

mod child;
mod command_env;
pub(crate) mod holder;
mod max_hold;
mod release;
mod watchdog;

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, Hold, HolderInfo, Session};
use crate::config::{Config, RunSpec};
use crate::error::{Cause, Error, Result};
use crate::exit::Exit;
use crate::lock::clock::Stamp;
use crate::lock::event::Event;
use crate::lock::name::{LockId, LockName};
use crate::lock::token::Token;
use crate::report;
use crate::run_state::{self, Phase, Shared};
use crate::sys::guardian::{Deadlines, Guardian};
use crate::wait::{self, Wanted};
use watchdog::{Lease, Lost, Watchdog, why_lapsed};

/// What a run did, for its metrics file and its history: filled in as it
/// goes, read by the caller whatever the run's end.
#[derive(Debug, Default)]
pub struct Outcome {
    /// When the run started waiting for the lock(s).
    pub waiting_since: Cell<Option<Instant>>,
    /// How long it waited, once acquired.
    pub waited: Cell<Option<Duration>>,
    /// When the lock(s) were acquired.
    pub acquired: Cell<Option<Instant>>,
    /// How long they were held: until COMMAND's group was gone.
    pub held: Cell<Option<Duration>>,
    /// Each lock's fence (by name), once acquired.
    pub fences: RefCell<Vec<(String, u64)>>,
    /// This process as the holder it asked to be (for the history).
    pub holder: RefCell<Option<HolderInfo>>,
    /// Why the hold was lost, when it was (exit 70).
    pub lost: RefCell<Option<String>>,
    /// After a loss: by when what is left to do (the release, the history)
    /// must be done, answered or not.
    pub wind_up_by: Cell<Option<Instant>>,
}

/// After a loss, the release and the history write share this much time, so
/// that rlock exits within `--kill-after` + 3 s of SIGTERM even when the
/// server does not answer.
pub const AFTER_LOSS: Duration = Duration::from_millis(2500);

/// After a loss, the bound on each connection attempt and reply.
pub const AFTER_LOSS_STEP: Duration = Duration::from_millis(500);

/// What every state of one run carries.
struct Run<'a> {
    spec: &'a RunSpec,
    outcome: &'a Outcome,
    config: &'a Config,
    /// The names as given, duplicates dropped: they name things in messages
    /// and COMMAND's environment.
    names: Vec<&'a LockName>,
    /// The names, comma-separated, for messages.
    display: String,
    backend: Arc<dyn Backend>,
    /// The locks in the order they are acquired (sorted by name).
    locks: Vec<LockId>,
    lease: Lease,
    /// SIGTERM to SIGKILL, fitted into the lease.
    grace: Duration,
    guardian: Guardian,
    shared: Arc<Shared>,
}

/// Checked and ready to acquire.
pub struct Prepared<'a> {
    run: Run<'a>,
    program: PathBuf,
}

/// The lock is held; COMMAND has not started.
pub struct Held<'a> {
    run: Run<'a>,
    program: PathBuf,
    session: Box<dyn Session>,
    holds: Vec<Hold>,
    acquired_at: Stamp,
    deadlines: Deadlines,
    /// `acquired` events still to record.
    unrecorded: Vec<(LockId, Event)>,
}

/// COMMAND runs.
pub struct Running<'a> {
    run: Run<'a>,
    command: child::Spawned,
    foreground: bool,
    session: Box<dyn Session>,
    held: Vec<(LockId, Token)>,
    acquired_at: Stamp,
    deadlines: Deadlines,
    /// The `--max-hold` timer, when asked for.
    max_hold: Option<max_hold::MaxHold>,
}

/// COMMAND and its process group are gone.
pub struct Finished<'a> {
    run: Run<'a>,
    held: Vec<(LockId, Token)>,
    status: Result<ExitStatus>,
    /// The session to release with (the watchdog's, when it ran); None when
    /// the watchdog could not hand it back.
    session: Option<Box<dyn Session>>,
    /// What the watchdog saw of the lease.
    watched: Option<Lost>,
    /// Whether the deadlines were still ahead when COMMAND's group was gone.
    held_in_time: bool,
    /// Whether COMMAND's group could be emptied.
    emptied: bool,
    /// The watchdog could not be started, and COMMAND was killed.
    watchdog_failed: bool,
    /// COMMAND was stopped for running past `--max-hold`.
    max_held: bool,
    /// When the request that took the lock was sent.
    acquired_at: Stamp,
}

impl<'a> Prepared<'a> {
    /// Finds COMMAND, forks the guardian and starts catching signals (the
    /// names and options were checked when the command line was resolved).
    /// Nothing is acquired yet.
    pub fn new(config: &'a Config, spec: &'a RunSpec, outcome: &'a Outcome) -> Result<Self> {
        let mut names: Vec<&LockName> = Vec::new();
        for name in &spec.names {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let display = names
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let program = child::resolve(&spec.command[0], &display)?;
        let backend = config.backend(spec.lock.dialect())?;
        let mut order: Vec<&LockName> = names.clone();
        order.sort();
        let locks: Vec<LockId> = order.iter().map(|n| spec.lock.lock_id(config, n)).collect();
        let lease = match spec.lease {
            Some(lease) => Lease::Fixed(lease),
            None => Lease::Renewed(spec.lock.ttl),
        };
        let grace = watchdog::fit_grace(spec.kill_after, lease, &display);
        // Forked now, off the handoff path, and before any thread exists: a
        // fork of a single-threaded process is cheaper. It only acts once it
        // knows COMMAND's group.
        let guardian = match crate::sys::guardian::take_early() {
            Some(guardian) => guardian,
            None => Guardian::start()
                .map_err(|e| Error::internal(format!("cannot start the guardian process: {e}")))?,
        };
        run_state::start();
        let shared = Shared::new(&display);
        child::become_subreaper();
        Ok(Prepared {
            run: Run {
                spec,
                outcome,
                config,
                names,
                display,
                backend,
                locks,
                lease,
                grace,
                guardian,
                shared,
            },
            program,
        })
    }

    /// Waits for every lock (all or none), then arms the lease's deadlines
    /// in the guardian, before COMMAND exists.
    pub fn acquire(self) -> Result<Held<'a>> {
        let Prepared { run, program } = self;
        run.shared.set(Phase::Acquiring);
        run.outcome.waiting_since.set(Some(Instant::now()));
        let token = Token::generate()?;
        let holder = crate::supervisor::holder::holder_info(&run.spec.command, &run.config.note);
        let handoff = matches!(run.lease, Lease::Renewed(_));
        let mut wanted = Wanted::new(
            &run.locks,
            &token,
            &run.config.inherited,
            &holder,
            &run.spec.lock,
            run.lease.ttl(),
            handoff,
        );
        wanted.replica_timeout = run.config.connect_timeout;
        if let Lease::Renewed(_) = run.lease {
            wanted.refresh_after = run.lease.period(run.grace);
        }
        let cap = run.spec.lock.history;
        let acquired = crate::supervisor::holder::event("acquired", &holder);
        if cap > 0 {
            wanted.record = Some((cap, acquired.clone()));
        }
        *run.outcome.holder.borrow_mut() = Some(holder.clone());
        let (session, holds, acquired_at) =
            wait::acquire(&run.backend, &wanted, &run.display, &run.shared)?;
        crate::report::mark("acquired");
        let now = Instant::now();
        run.outcome.acquired.set(Some(now));
        run.outcome.waited.set(
            run.outcome
                .waiting_since
                .get()
                .map(|since| now.duration_since(since)),
        );
        *run.outcome.fences.borrow_mut() = run
            .locks
            .iter()
            .zip(&holds)
            .map(|(lock, hold)| (lock.name.clone(), hold.fence.0))
            .collect();
        // The holds the acquiring script did not record (handed over by a
        // release, several locks, Redlock): recorded once COMMAND runs.
        let waited = run
            .outcome
            .waited
            .get()
            .map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX));
        let unrecorded: Vec<(LockId, Event)> = if cap == 0 {
            Vec::new()
        } else {
            run.locks
                .iter()
                .zip(&holds)
                // A re-entry (count above 1) is no new hold.
                .filter(|(_, hold)| !hold.recorded && hold.count == 1)
                .map(|(lock, hold)| {
                    let event = Event {
                        fence: Some(hold.fence.0),
                        waited_ms: waited,
                        ..acquired.clone()
                    };
                    (lock.clone(), event)
                })
                .collect()
        };
        // A file: lock has no deadlines: the kernel holds it while rlock's
        // files are open.
        let deadlines = run.guardian.deadlines();
        if !run.config.is_local() {
            let (term, kill) = run.lease.deadlines(acquired_at, run.grace);
            deadlines.extend(term, kill);
            if let Lease::Renewed(_) = run.lease {
                crate::report::verbose(|| {
                    format!(
                        "{}: renewed every {}; rides out server outages up to {}",
                        run.display,
                        tenths(run.lease.period(run.grace)),
                        tenths(run.lease.rides_out(run.grace))
                    )
                });
            }
        }
        run.shared.set_deadlines(deadlines);
        Ok(Held {
            run,
            program,
            session,
            holds,
            acquired_at,
            deadlines,
            unrecorded,
        })
    }
}

impl<'a> Held<'a> {
    fn held(&self) -> Vec<(LockId, Token)> {
        self.run
            .locks
            .iter()
            .cloned()
            .zip(self.holds.iter().map(|h| h.token.clone()))
            .collect()
    }

    /// Starts COMMAND in its own process group (the terminal's foreground
    /// one on a terminal). When it cannot start, the lock is released and
    /// the error says why.
    pub fn spawn(self) -> Result<Running<'a>> {
        let held = self.held();
        let Held {
            run,
            program,
            mut session,
            holds,
            acquired_at,
            deadlines,
            unrecorded,
        } = self;
        // The guardian looks at the deadlines again after each record, so
        // COMMAND's announcement (after this) is enough for it to act on a
        // lease that lapsed during the spawn.
        if !deadlines.wake() {
            deadlines.close(Stamp::now());
            release::release(
                run.backend.as_ref(),
                &mut Some(session),
                &held,
                run.lease.ttl(),
                true,
                None,
                None,
            );
            return Err(Error::internal(format!(
                "{}: the guardian process is gone; COMMAND was not started",
                run.display
            )));
        }
        let env = command_env::child_env(&run.names, &run.locks, &holds, &run.config.inherited);
        let foreground = child::terminal_foreground();
        let spawned = child::spawn(
            &program,
            &run.spec.command,
            &env,
            foreground,
            run.guardian.pipe(),
            &run.shared,
        );
        crate::report::mark("started");
        match spawned {
            Ok(command) => {
                let max_hold = run.spec.max_hold.and_then(|limit| {
                    max_hold::MaxHold::start(limit, run.grace, Stamp::now(), &run.shared)
                });
                // Off the path to COMMAND, which runs already; a signal that
                // comes meanwhile is forwarded by the signal thread, not held
                // until these writes end.
                if !unrecorded.is_empty() {
                    let _ = run.shared.watch_signals();
                }
                for (lock, event) in &unrecorded {
                    if let Err(err) = session.record(lock, run.spec.lock.history, event) {
                        report::verbose(|| format!("{}: history not written: {err}", lock.name));
                    }
                }
                Ok(Running {
                    run,
                    command,
                    foreground,
                    session,
                    held,
                    acquired_at,
                    deadlines,
                    max_hold,
                })
            }
            Err(err) => {
                if foreground {
                    child::reclaim_terminal();
                }
                run.shared.set(Phase::Finished);
                deadlines.close(Stamp::now());
                release::release(
                    run.backend.as_ref(),
                    &mut Some(session),
                    &held,
                    run.lease.ttl(),
                    true,
                    None,
                    None,
                );
                // Said of every lock of the run, not of the one it was met on.
                Err(match err.cause() {
                    Cause::Interrupted(_) | Cause::LeaseLapsedBeforeStart => {
                        err.for_locks(&run.display)
                    }
                    _ => err,
                })
            }
        }
    }
}

impl<'a> Running<'a> {
    /// Waits for COMMAND while the lease is kept, then stops what it left in
    /// its process group and closes the deadlines.
    pub fn wait(self) -> Finished<'a> {
        let Running {
            mut run,
            command,
            foreground,
            session,
            held,
            acquired_at,
            deadlines,
            max_hold,
        } = self;
        let pgid = command.pid();
        let renewal = watchdog::Renewal {
            holds: held.clone(),
            display: run.display.clone(),
            lease: run.lease,
            grace: run.grace,
            confirmed_at: acquired_at,
            deadlines,
        };
        // A COMMAND that ends before its first renewal is due (most short
        // jobs) needs no watchdog thread: start one only if COMMAND still
        // runs then, or at once on a terminal, where a ^Z must be noticed
        // while it is stopped. Either way the thread is off the path from the
        // handoff to COMMAND; the guardian keeps the deadlines meanwhile.
        let first_renewal = acquired_at + run.lease.period(run.grace);
        let mut renewing =
            if !foreground && child::exits_before(&command, first_renewal, &run.shared) {
                Renewing::Idle(session)
            } else {
                Renewing::start(session, renewal.clone(), &run.shared, pgid)
            };
        let status = child::wait(command, &run.shared, foreground);
        crate::report::mark("exited");
        let max_held = max_hold.is_some_and(max_hold::MaxHold::finish);
        if let Renewing::Idle(session) = renewing {
            // What COMMAND left running in its group works under the lock
            // until it is stopped: keep the lease for it.
            renewing = if child::group_alive(pgid) {
                Renewing::start(session, renewal, &run.shared, pgid)
            } else {
                Renewing::Idle(session)
            };
        }
        let emptied = child::stop_leftovers(pgid, run.grace, &run.shared, max_held);
        // Closed at once: the guardian must not act on a group that is gone
        // (its number could be reused) while the watchdog finishes a renewal.
        let held_in_time = deadlines.close(Stamp::now());
        run.outcome
            .held
            .set(run.outcome.acquired.get().map(|at| at.elapsed()));
        run.shared.set(Phase::Finished);
        if foreground {
            child::reclaim_terminal();
        }
        let (session, watched, watchdog_failed) = match renewing {
            Renewing::Idle(session) => (Some(session), None, false),
            Renewing::Watching(watchdog) => match watchdog.finish() {
                Some((session, lost)) => (Some(session), lost, false),
                None => (None, None, false),
            },
            Renewing::Failed => (None, None, true),
        };
        run.guardian.disarm();
        Finished {
            run,
            held,
            status,
            session,
            watched,
            held_in_time,
            emptied,
            watchdog_failed,
            max_held,
            acquired_at,
        }
    }
}

impl Finished<'_> {
    /// Releases what is still ours and decides the exit status: COMMAND's,
    /// or 70 when the lease could have lapsed under it.
    pub fn release(self) -> Result<Exit> {
        let Finished {
            run,
            held,
            status,
            session,
            watched,
            held_in_time,
            emptied,
            watchdog_failed,
            max_held,
            acquired_at,
        } = self;
        let mut session = session;
        let ttl = run.lease.ttl();
        if watchdog_failed {
            release::release(
                run.backend.as_ref(),
                &mut None,
                &held,
                ttl,
                true,
                None,
                None,
            );
            return Err(Error::internal("the watchdog could not be started"));
        }
        // Judged by the clock, whichever thread noticed first: the lease held
        // only if COMMAND's whole group was gone before SIGTERM was due. A
        // hold the server disowned counts whenever it was seen.
        let lost = match (watched, held_in_time) {
            _ if !emptied => Some(Lost::Unkillable),
            (Some(lost), _) if lost.refused() => Some(lost),
            (_, true) => None,
            (Some(lost), false) => Some(lost),
            (None, false) => Some(why_lapsed(run.lease, None, run.shared.late())),
        };
        // A refused renewal leaves that lock nothing to release, but the
        // others still are ours. After an unconfirmed renewal the server may
        // answer again (and the keys outlive our count by the drift margin):
        // try, within the connect timeout. A group that survived SIGKILL
        // keeps the lock until it expires.
        let to_release: Vec<(LockId, Token)> = match &lost {
            Some(Lost::Unkillable) => Vec::new(),
            _ => held
                .iter()
                .filter(|(k, _)| lost.as_ref().and_then(Lost::gone) != Some(k.name.as_str()))
                .cloned()
                .collect(),
        };
        // A normal end is recorded by the releasing script; a lost hold by
        // the caller, which knows the whole story.
        let ended = match (&lost, &status) {
            (Some(_), _) => None,
            (None, _) if max_held => Some(("max-hold", Some(124))),
            (None, Ok(status)) => Some(("released", Some(i64::from(child::status_code(*status))))),
            (None, Err(_)) => Some(("released", None)),
        };
        let holder = run.outcome.holder.borrow().clone();
        let fences = run.outcome.fences.borrow().clone();
        let event = match (ended, holder) {
            (Some((kind, exit)), Some(holder)) if run.spec.lock.history > 0 => Some(Event {
                held_ms: run
                    .outcome
                    .held
                    .get()
                    .map(|h| u64::try_from(h.as_millis()).unwrap_or(u64::MAX)),
                exit,
                ..crate::supervisor::holder::event(kind, &holder)
            }),
            _ => None,
        };
        let backend = match &lost {
            Some(known) => wind_up(&run, known, &held, &mut session, acquired_at),
            None => Arc::clone(&run.backend),
        };
        let gone = release::release(
            backend.as_ref(),
            &mut session,
            &to_release,
            ttl,
            lost.is_some(),
            event
                .as_ref()
                .map(|e| (run.spec.lock.history, e, fences.as_slice())),
            run.outcome.wind_up_by.get(),
        );
        crate::report::mark("released");
        if lost.is_some() {
            return Ok(Exit::LockLost);
        }
        if let Some(gone) = gone {
            let lost = Lost::GoneAtRelease(gone);
            say_lost(&run, &lost, &held, session.as_mut(), acquired_at);
            return Ok(Exit::LockLost);
        }
        if max_held {
            if let Some(limit) = run.spec.max_hold {
                report::error(&format!(
                    "{}: COMMAND ran past --max-hold {} and was stopped (SIGTERM, then SIGKILL \
                     after {} if still running); the lock was released",
                    run.display,
                    humantime::format_duration(limit),
                    humantime::format_duration(run.grace)
                ));
            }
            return Ok(Exit::TimedOut);
        }
        match status {
            Ok(status) => Ok(Exit::Child(child::status_code(status))),
            Err(err) if matches!(err.cause(), Cause::Interrupted(_)) => {
                Err(err.for_locks(&run.display))
            }
            Err(err) => Err(err),
        }
    }
}

/// After a loss known before the release: the loss is said first, then what
/// could not be done after it; the release and the history write that follow
/// share a short budget. Returns the backend they use, bounded by it.
fn wind_up(
    run: &Run<'_>,
    lost: &Lost,
    held: &[(LockId, Token)],
    session: &mut Option<Box<dyn Session>>,
    acquired_at: Stamp,
) -> Arc<dyn Backend> {
    run.outcome
        .wind_up_by
        .set(Some(Instant::now() + AFTER_LOSS));
    say_lost(run, lost, held, session.as_mut(), acquired_at);
    // The renewals' session may be stuck on a stalled server; a refusal came
    // from one that answers (and knows what it evicted). (A file: lock lives
    // in its session's open files: never swapped.)
    if !lost.refused() && !run.config.is_local() {
        *session = None;
    }
    run.config
        .backend_within(run.spec.lock.dialect(), AFTER_LOSS_STEP)
        .unwrap_or_else(|_| Arc::clone(&run.backend))
}

/// The run's one line about a loss, with the cause the server gives of a
/// hold found gone (a restart, an eviction), asked once on `session`.
fn say_lost(
    run: &Run<'_>,
    lost: &Lost,
    held: &[(LockId, Token)],
    session: Option<&mut Box<dyn Session>>,
    acquired_at: Stamp,
) {
    let which = lost.gone().unwrap_or(&run.display).to_owned();
    let named = !matches!(lost, Lost::ClockJumped { .. });
    let why = lost.gone().filter(|_| named).and_then(|name| {
        let (lock, _) = held.iter().find(|(lock, _)| lock.name == name)?;
        let held_for = Stamp::now().since(acquired_at);
        session?.why_gone(lock, Some(held_for))
    });
    if let Some(why) = &why {
        report::verbose(|| format!("{which}: the hold was found gone: {why}"));
    }
    let line = lost.line(why.as_deref());
    report::error(&format!("{which}: {line}"));
    *run.outcome.lost.borrow_mut() = Some(line);
}

/// What renews the lease while COMMAND runs.
enum Renewing {
    /// Nobody yet: COMMAND ended before its first renewal was due.
    Idle(Box<dyn Session>),
    /// The watchdog thread.
    Watching(Watchdog),
    /// The watchdog could not be started; COMMAND was killed.
    Failed,
}

impl Renewing {
    /// Starts the watchdog (and the signal thread); when that fails, kills
    /// COMMAND's group.
    fn start(
        session: Box<dyn Session>,
        renewal: watchdog::Renewal,
        shared: &Arc<Shared>,
        pgid: libc::pid_t,
    ) -> Renewing {
        let display = renewal.display.clone();
        // From here on rlock renews for as long as COMMAND runs: what it
        // allocates it also frees, so the start-up arena (which keeps what
        // it hands out) gives way to the system allocator. A COMMAND that
        // ends before its first renewal never gets here, and its release
        // allocates from the arena still.
        crate::sys::arena::close();
        // COMMAND runs on: a signal must reach it while rlock waits.
        let started = shared
            .watch_signals()
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|()| Watchdog::start(session, renewal, Arc::clone(shared)));
        match started {
            Ok(watchdog) => Renewing::Watching(watchdog),
            Err(e) => {
                report::error(&format!(
                    "{display}: cannot start the watchdog ({e}); stopping COMMAND"
                ));
                crate::sys::process::signal_group(pgid, libc::SIGKILL);
                Renewing::Failed
            }
        }
    }
}

/// "17.4s": seconds to a tenth, rounded down (a figure rlock promises).
fn tenths(d: Duration) -> String {
    let tenths = d.as_millis() / 100;
    format!("{}.{}s", tenths / 10, tenths % 10)
}
