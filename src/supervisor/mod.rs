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

mod announced;
mod child;
mod command_env;
mod ended;
mod handover;
mod limits;
mod release;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::announce::{self, Announcer};
use crate::backend::{Backend, Session};
use crate::client::{Caller, Client, Taken};
use crate::config::{Config, RunSpec};
use crate::error::{Cause, Error, Result};
use crate::holding::held::HeldLock;
use crate::holding::lost::{Lost, why_lapsed};
use crate::holding::watchdog::{Lease, Renewing};
use crate::holding::{Ending, holder, watchdog};
use crate::lock::clock::Stamp;
use crate::lock::lease::tenths;
use crate::lock::name::LockName;
use crate::lock::token::Token;
use crate::report;
use crate::run_state::{self, Phase, Shared};
use crate::sys::guardian::{Deadlines, Guardian};
pub use announced::ended as announce_end;
pub use ended::Ended;
use ended::Holding;
pub use handover::give_back;

/// Runs `spec` through every state, to its end: what the run did, whatever
/// state it ended in. Its events on the way are told to `announcer`.
pub fn run(config: &Config, spec: &RunSpec, announcer: &Arc<Announcer>) -> Ended {
    let through = || -> std::result::Result<Ended, Box<Ended>> {
        Ok(Prepared::new(config, spec, announcer)
            .map_err(|err| Ended::early(err, None, None, None))?
            .acquire()?
            .spawn()?
            .wait()
            .release())
    };
    through().unwrap_or_else(|ended| *ended)
}

/// What every state of one run carries.
struct Run<'a> {
    spec: &'a RunSpec,
    config: &'a Config,
    /// The names as given: they name things in messages and COMMAND's
    /// environment.
    names: &'a [LockName],
    /// The names, comma-separated, for messages.
    display: String,
    /// The server(s), as a library program reaches them.
    client: Client,
    backend: Arc<dyn Backend>,
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
    holding: Holding,
    deadlines: Deadlines,
}

/// COMMAND runs.
pub struct Running<'a> {
    run: Run<'a>,
    command: child::Spawned,
    foreground: bool,
    session: Box<dyn Session>,
    holding: Holding,
    deadlines: Deadlines,
    /// The timer of `--max-hold` and `--signal-grace`, when asked for.
    limits: Option<limits::Timer>,
}

/// COMMAND and its process group are gone.
pub struct Finished<'a> {
    run: Run<'a>,
    holding: Holding,
    /// The session to release with (the watchdog's, when it ran); None when
    /// the watchdog could not hand it back.
    session: Option<Box<dyn Session>>,
    /// How long the locks were held, until COMMAND's group was gone.
    held: Duration,
    fate: Fate,
}

/// What became of the lease while COMMAND ran, and of COMMAND.
enum Fate {
    /// The watchdog could not be started, and COMMAND was killed.
    Unwatched,
    /// The lease could have lapsed under COMMAND, or the server disowned a
    /// hold.
    Lost(Lost),
    /// The lease held throughout: how COMMAND ended, or why waiting for it
    /// failed.
    Kept(Result<CommandEnd>),
}

/// How COMMAND ended, under a lease kept throughout.
#[derive(Debug, Clone, Copy)]
enum CommandEnd {
    /// It exited with this status.
    Exited(u8),
    /// It ran past `--max-hold` and was stopped.
    MaxHold,
}

impl CommandEnd {
    /// COMMAND's end from its exit `status`, and what its limits' timer
    /// did to it: killed after `--signal-grace`, it ends as the signal
    /// forwarded first would have ended it (128+N).
    fn of(
        stopped: limits::Stopped,
        status: Result<std::process::ExitStatus>,
    ) -> Result<CommandEnd> {
        match (stopped, status) {
            (limits::Stopped::MaxHold, _) => Ok(CommandEnd::MaxHold),
            (limits::Stopped::SignalGrace(signal), _) => {
                Ok(CommandEnd::Exited(signal.exit_status()))
            }
            (limits::Stopped::No, Ok(status)) => Ok(CommandEnd::Exited(child::status_code(status))),
            (limits::Stopped::No, Err(err)) => Err(err),
        }
    }

    fn ending(self) -> Ending {
        match self {
            CommandEnd::Exited(code) => Ending::Exited(code),
            CommandEnd::MaxHold => Ending::MaxHold,
        }
    }
}

impl<'a> Prepared<'a> {
    /// Finds COMMAND, forks the guardian and starts catching signals (the
    /// names and options were checked when the command line was resolved).
    /// Nothing is acquired yet.
    pub fn new(config: &'a Config, spec: &'a RunSpec, announcer: &Arc<Announcer>) -> Result<Self> {
        let names = spec.names.as_slice();
        let display = names
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let program = child::resolve(&spec.command[0], &display)?;
        let client = Client::from_config(config.clone(), spec.lock.dialect())?;
        let backend = Arc::clone(&client.inner().backend);
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
        let shared = Shared::announcing(&display, Arc::clone(announcer));
        child::become_subreaper();
        Ok(Prepared {
            run: Run {
                spec,
                config,
                names,
                display,
                client,
                backend,
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
    pub fn acquire(self) -> std::result::Result<Held<'a>, Box<Ended>> {
        let Prepared { run, program } = self;
        run.shared.set(Phase::Acquiring);
        let token = Token::generate().map_err(|err| Ended::early(err, None, None, None))?;
        let renewed = matches!(run.lease, Lease::Renewed(_));
        let caller = Caller {
            shared: Arc::clone(&run.shared),
            holder: holder::holder_info(&run.spec.command, &run.config.note),
            token,
            ttl: run.lease.ttl(),
            handoff: renewed,
            refresh_after: renewed.then(|| run.period()),
        };
        let Taken {
            session,
            held: locks,
            since,
            waited,
            recorder,
            ..
        } = run
            .client
            .lock_all(run.names.iter().map(LockName::as_str))
            .with_spec(&run.spec.lock)
            .take(caller)
            .map_err(|not| Ended::early(not.err, not.recorder, not.waited, None))?;
        crate::report::mark("acquired");
        let acquired = Instant::now();
        let deadlines = run.arm(since);
        Ok(Held {
            run,
            program,
            session,
            holding: Holding {
                locks,
                since,
                acquired,
                waited,
                recorder,
            },
            deadlines,
        })
    }
}

impl Run<'_> {
    /// COMMAND's time limits, as asked for.
    fn limits(&self) -> limits::Limits {
        limits::Limits {
            max_hold: self.spec.max_hold,
            signal_grace: self.spec.signal_grace,
            kill_after: self.grace,
        }
    }

    /// How often the lease is renewed: its own cadence, or under systemd's
    /// watchdog half its interval if shorter (WATCHDOG=1 follows each
    /// confirmed renewal, so the watchdog hears from a healthy holder in time).
    fn period(&self) -> Duration {
        let period = self.lease.period(self.grace);
        match self.spec.announce.notify.as_ref().and_then(|n| n.watchdog) {
            Some(watchdog) => period.min((watchdog / 2).max(Duration::from_millis(100))),
            None => period,
        }
    }

    /// Arms the lease's deadlines (counted from `since`) in the guardian. A
    /// file: lock has none: the kernel holds it while rlock's files are open.
    fn arm(&self, since: Stamp) -> Deadlines {
        let deadlines = self.guardian.deadlines();
        if let Some(path) = &self.spec.announce.ready_file
            && !deadlines.set_ready_file(path)
        {
            crate::report::verbose(|| {
                "--ready-file: the path is too long for the guardian to remove it should rlock stall"
                    .to_owned()
            });
        }
        if !self.config.is_local() {
            let (term, kill) = self.lease.deadlines(since, self.grace);
            deadlines.extend(term, kill);
            if let Lease::Renewed(_) = self.lease {
                crate::report::verbose(|| {
                    format!(
                        "{}: renewed every {}; rides out server outages up to {}",
                        self.display,
                        tenths(self.period()),
                        tenths(self.lease.rides_out(self.grace))
                    )
                });
            }
        }
        self.shared.set_deadlines(deadlines);
        deadlines
    }

    /// Gives back holds COMMAND never ran under, with their `acquired`
    /// events (as the wait gives back what it cannot keep); a failure is
    /// said with -v only (the run ends in a line of its own).
    fn give_back(&self, mut session: Box<dyn Session>, held: &[HeldLock]) {
        for lock in held.iter().rev() {
            if let Err(err) = session.give_back(&lock.id, &lock.hold) {
                report::verbose(|| {
                    format!(
                        "{}: not released ({}); it expires within {}",
                        lock.name(),
                        report::without_lock(&err.to_string(), lock.name()),
                        humantime::format_duration(self.lease.ttl())
                    )
                });
            }
        }
    }
}

impl<'a> Held<'a> {
    /// Starts COMMAND in its own process group (the terminal's foreground
    /// one on a terminal). When it cannot start, the lock is released and
    /// the error says why.
    pub fn spawn(self) -> std::result::Result<Running<'a>, Box<Ended>> {
        let Held {
            run,
            program,
            mut session,
            holding,
            deadlines,
        } = self;
        // The guardian looks at the deadlines again after each record, so
        // COMMAND's announcement (after this) is enough for it to act on a
        // lease that lapsed during the spawn.
        if !deadlines.wake() {
            deadlines.close(Stamp::now());
            run.give_back(session, &holding.locks);
            return Err(holding.ended(Error::internal(format!(
                "{}: the guardian process is gone; COMMAND was not started",
                run.display
            ))));
        }
        let env = command_env::child_env(run.names, &holding.locks, &run.config.inherited);
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
        let command = match spawned {
            Ok(command) => command,
            Err(err) => {
                if foreground {
                    child::reclaim_terminal();
                }
                run.shared.set(Phase::Finished);
                deadlines.close(Stamp::now());
                run.give_back(session, &holding.locks);
                // Said of every lock of the run, not of the one it was met on.
                let err = match err.cause() {
                    Cause::Interrupted(_) | Cause::LeaseLapsedBeforeStart => {
                        err.for_locks(&run.display)
                    }
                    _ => err,
                };
                return Err(holding.ended(err));
            }
        };
        // Off the path to COMMAND: should rlock die from here on, its
        // guardian gives the holds back once COMMAND's group is gone. (A
        // file: lock is the kernel's: it ends with rlock's open files.)
        if !run.config.is_local() {
            run.guardian
                .hand_over(&handover::text(command.pid(), &holding.locks));
        }
        announced::held(run.shared.announce(), run.names, &holding);
        let limits = limits::Timer::start(run.limits(), Stamp::now(), &run.shared);
        let unrecorded = holding.recorder.unrecorded(&holding.locks, holding.waited);
        // Off the path to COMMAND, which runs already; a signal that comes
        // meanwhile is forwarded by the signal thread, not held until these
        // writes end.
        if !unrecorded.is_empty() {
            let _ = run.shared.watch_signals();
        }
        for (lock, event) in &unrecorded {
            if let Err(err) = session.record(lock, holding.recorder.cap(), event) {
                report::verbose(|| format!("{}: history not written: {err}", lock.name));
            }
        }
        Ok(Running {
            run,
            command,
            foreground,
            session,
            holding,
            deadlines,
            limits,
        })
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
            holding,
            deadlines,
            limits,
        } = self;
        let pgid = command.pid();
        let renewal = watchdog::Renewal {
            holds: holding.locks.clone(),
            display: run.display.clone(),
            lease: run.lease,
            grace: run.grace,
            period: run.period(),
            confirmed_at: holding.since,
            deadlines: Arc::new(deadlines),
        };
        // A COMMAND that ends before its first renewal is due (most short
        // jobs) needs no watchdog thread: start one only if COMMAND still
        // runs then, or at once on a terminal, where a ^Z must be noticed
        // while it is stopped. Either way the thread is off the path from the
        // handoff to COMMAND; the guardian keeps the deadlines meanwhile.
        let first_renewal = holding.since + run.period();
        let mut renewing =
            if !foreground && child::exits_before(&command, first_renewal, &run.shared) {
                Renewing::Idle(session)
            } else {
                Renewing::start(session, renewal.clone(), &run.shared, pgid)
            };
        let status = child::wait(command, &run.shared, foreground);
        crate::report::mark("exited");
        run.shared.announce().tell(&announce::Event::Stopping);
        let stopped = limits.map_or(limits::Stopped::No, limits::Timer::finish);
        if let Renewing::Idle(session) = renewing {
            // What COMMAND left running in its group works under the lock
            // until it is stopped: keep the lease for it.
            renewing = if child::group_alive(pgid) {
                Renewing::start(session, renewal, &run.shared, pgid)
            } else {
                Renewing::Idle(session)
            };
        }
        // Under --signal-grace, what COMMAND left is stopped by the time its
        // grace ends, as COMMAND itself would have been.
        let grace = run
            .limits()
            .grace_left(&run.shared)
            .map_or(run.grace, |left| left.min(run.grace));
        let stopping = !matches!(stopped, limits::Stopped::No);
        let emptied = child::stop_leftovers(pgid, grace, &run.shared, stopping);
        // Closed at once: the guardian must not act on a group that is gone
        // (its number could be reused) while the watchdog finishes a renewal.
        let held_in_time = deadlines.close(Stamp::now());
        let held = holding.acquired.elapsed();
        run.shared.set(Phase::Finished);
        if foreground {
            child::reclaim_terminal();
        }
        let (session, watched) = Watched::end(renewing);
        run.guardian.disarm();
        let fate = match watched {
            Watched::Failed => Fate::Unwatched,
            Watched::Kept(seen) => match judge(&run, seen, held_in_time, emptied) {
                Some(lost) => Fate::Lost(lost),
                None => Fate::Kept(CommandEnd::of(stopped, status)),
            },
        };
        Finished {
            run,
            holding,
            session,
            held,
            fate,
        }
    }
}

/// What the watchdog thread made of the lease.
enum Watched {
    /// It could not be started.
    Failed,
    /// It ran (or was not needed), and saw this loss, if any.
    Kept(Option<Lost>),
}

impl Watched {
    /// Ends the renewals: the session to release with, if the watchdog
    /// gave it back, and what it made of the lease.
    fn end(renewing: Renewing) -> (Option<Box<dyn Session>>, Watched) {
        match renewing {
            Renewing::Idle(session) => (Some(session), Watched::Kept(None)),
            Renewing::Watching(watchdog) => match watchdog.finish() {
                Some((session, lost)) => (Some(session), Watched::Kept(lost)),
                None => (None, Watched::Kept(None)),
            },
            Renewing::Failed => (None, Watched::Failed),
        }
    }
}

/// Judged by the clock, whichever thread noticed first: the lease held only
/// if COMMAND's whole group was gone (`emptied`) before SIGTERM was due
/// (`held_in_time`). A hold the server disowned counts whenever it was seen.
fn judge(run: &Run<'_>, seen: Option<Lost>, held_in_time: bool, emptied: bool) -> Option<Lost> {
    match (seen, held_in_time) {
        _ if !emptied => Some(Lost::Unkillable),
        (Some(lost), _) if lost.refused() => Some(lost),
        (_, true) => None,
        (Some(lost), false) => Some(lost),
        (None, false) => Some(why_lapsed(run.lease, None, run.shared.late())),
    }
}
