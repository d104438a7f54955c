//! `rlock run`: wait for the lock, run COMMAND while the watchdog keeps the
//! lease, release when COMMAND ends, and exit with COMMAND's status.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, Hold, HolderInfo, Session};
use crate::child;
use crate::cli::{LockOptions, RunArgs};
use crate::clock::Stamp;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::name::{self, LockKeys};
use crate::report;
use crate::signals::{self, Phase, Shared};
use crate::sys::guardian::Guardian;
use crate::token::{tokens_for_child, Token};
use crate::wait::{self, Wanted};
use crate::watchdog::{self, why_lapsed, Lease, Lost, Watchdog};

/// Longest holder command line stored in Redis.
const MAX_COMMAND_BYTES: usize = 1024;

/// Runs `rlock run`.
pub fn run(config: &Config, args: &RunArgs) -> Result<Exit> {
    for name in &args.names {
        name::validate(name)?;
    }
    refuse_conflicts(config, &args.lock)?;
    // The names as given (duplicates dropped) name things in messages and the
    // environment; they are acquired in sorted order.
    let mut names: Vec<&String> = Vec::new();
    for name in &args.names {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let display = names
        .iter()
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let program = child::resolve(&args.command[0], &display)?;
    let backend = config.backend()?;
    let mut order: Vec<&String> = names.clone();
    order.sort();
    let locks: Vec<LockKeys> = order
        .iter()
        .map(|n| lock_keys(&config.prefix, args.lock.redisson, n))
        .collect();
    let lease = match args.lease {
        Some(lease) => Lease::Fixed(lease),
        None => Lease::Renewed(args.lock.ttl),
    };
    let grace = fit_grace(args.kill_after, lease, &display);

    // Forked now, off the handoff path, and before any thread exists: a fork
    // of a single-threaded process is cheaper. It only acts once it knows
    // COMMAND's group.
    let mut guardian = Guardian::start()
        .map_err(|e| Error::Internal(format!("cannot start the guardian process: {e}")))?;
    let shared = Shared::new(&display);
    signals::start(Arc::clone(&shared))?;
    child::become_subreaper();
    shared.set(Phase::Acquiring);
    let token = Token::generate()?;
    let inherited = &config.inherited;
    let holder = holder_info(&args.command, &config.note);
    let handoff = matches!(lease, Lease::Renewed(_));
    let mut wanted = Wanted::new(
        &locks,
        &token,
        inherited,
        &holder,
        &args.lock,
        lease.ttl(),
        handoff,
    );
    wanted.replica_timeout = config.connect_timeout;
    let (session, holds, acquired_at) = wait::acquire(&backend, &wanted, &display, &shared)?;
    let held: Vec<(LockKeys, Token)> = locks
        .iter()
        .cloned()
        .zip(holds.iter().map(|h| h.token.clone()))
        .collect();

    // The guardian enforces the lease's deadlines from before COMMAND exists.
    // A file: lock has none: the kernel holds it while rlock's files are open.
    let deadlines = guardian.deadlines();
    if !config.is_local() {
        let (term, kill) = lease.deadlines(acquired_at, grace);
        deadlines.extend(term, kill);
    }
    shared.set_deadlines(deadlines);

    // The guardian looks at the deadlines again after each record, so COMMAND's
    // announcement (after this) is enough for it to act on a lease that lapsed
    // during the spawn.
    if !deadlines.wake() {
        deadlines.close(Stamp::now());
        release(backend.as_ref(), Some(session), &held, lease.ttl());
        return Err(Error::Internal(format!(
            "{display}: the guardian process is gone; COMMAND was not started"
        )));
    }
    let env = child_env(&names, &locks, &holds, inherited);
    let foreground = child::terminal_foreground();
    let spawned = child::spawn(
        &program,
        &args.command,
        &env,
        foreground,
        guardian.pipe(),
        &shared,
    );
    let command = match spawned {
        Ok(command) => command,
        Err(err) => {
            if foreground {
                child::reclaim_terminal();
            }
            shared.set(Phase::Finished);
            deadlines.close(Stamp::now());
            release(backend.as_ref(), Some(session), &held, lease.ttl());
            return Err(match err {
                Error::Interrupted { signal, .. } => Error::Interrupted {
                    lock: display,
                    signal,
                },
                Error::LeaseLapsedBeforeStart { .. } => {
                    Error::LeaseLapsedBeforeStart { lock: display }
                }
                err => err,
            });
        }
    };
    let pgid = command.pid();
    let renewal = watchdog::Config {
        holds: held.clone(),
        display: display.clone(),
        lease,
        grace,
        confirmed_at: acquired_at,
        deadlines,
    };
    // A COMMAND that ends before its first renewal is due (most short jobs)
    // needs no watchdog thread: start one only if COMMAND still runs then, or
    // at once on a terminal, where a ^Z must be noticed while it is stopped.
    // Either way the thread is off the path from the handoff to COMMAND; the
    // guardian keeps the deadlines meanwhile.
    let first_renewal = acquired_at + lease.ttl() / 3;
    let mut keeper = if !foreground && child::exits_before(&command, first_renewal, &shared) {
        Keeper::Idle(session)
    } else {
        Keeper::start(session, renewal.clone(), &shared, pgid)
    };
    let status = child::wait(command, &shared, foreground);
    if let Keeper::Idle(session) = keeper {
        // What COMMAND left running in its group works under the lock until
        // it is stopped: keep the lease for it.
        keeper = if child::group_alive(pgid) {
            Keeper::start(session, renewal, &shared, pgid)
        } else {
            Keeper::Idle(session)
        };
    }
    let emptied = child::stop_leftovers(pgid, grace, &shared);
    let finished = Stamp::now();
    // Closed at once: the guardian must not act on a group that is gone
    // (its number could be reused) while the watchdog finishes a renewal.
    let held_in_time = deadlines.close(finished);
    shared.set(Phase::Finished);
    if foreground {
        child::reclaim_terminal();
    }
    let (session, watched) = match keeper {
        Keeper::Idle(session) => (Some(session), None),
        Keeper::Watching(watchdog) => match watchdog.finish() {
            Some((session, lost)) => (Some(session), lost),
            None => (None, None),
        },
        Keeper::Failed => {
            guardian.disarm();
            release(backend.as_ref(), None, &held, lease.ttl());
            return Err(Error::Internal("the watchdog could not be started".into()));
        }
    };
    guardian.disarm();
    // Judged by the clock, whichever thread noticed first: the lease held
    // only if COMMAND's whole group was gone before SIGTERM was due. A hold
    // the server disowned counts whenever it was seen.
    let mut lost = match (watched, held_in_time) {
        _ if !emptied => Some(Lost::Unkillable),
        (Some(lost @ Lost::NotOurs(_)), _) => Some(lost),
        (_, true) => None,
        (Some(lost), false) => Some(lost),
        (None, false) => Some(why_lapsed(lease, None, shared.late())),
    };
    // A refused renewal leaves that lock nothing to release, but the others
    // still are ours. After an unconfirmed renewal the server may answer again
    // (and the keys outlive our count by the drift margin): try, within the
    // connect timeout. A group that survived SIGKILL keeps the lock until it
    // expires.
    let to_release: Vec<(LockKeys, Token)> = match &lost {
        Some(Lost::Unkillable) => Vec::new(),
        Some(Lost::NotOurs(gone)) => held
            .iter()
            .filter(|(k, _)| &k.name != gone)
            .cloned()
            .collect(),
        _ => held.clone(),
    };
    let gone = release(backend.as_ref(), session, &to_release, lease.ttl());
    if lost.is_none() {
        lost = gone.map(Lost::GoneAtRelease);
    }
    if let Some(lost) = lost {
        let which = match &lost {
            Lost::NotOurs(name) | Lost::GoneAtRelease(name) => name.clone(),
            _ => display.clone(),
        };
        report::error(&format!("{which}: {lost}"));
        return Ok(Exit::LockLost);
    }
    match status {
        Ok(status) => Ok(Exit::Child(child::status_code(status))),
        Err(Error::Interrupted { signal, .. }) => Err(Error::Interrupted {
            lock: display,
            signal,
        }),
        Err(err) => Err(err),
    }
}

/// The grace between SIGTERM and SIGKILL, fitted into the lease: at most a
/// third of it (10 s by default), with a note when an explicit
/// `--kill-after` is cut.
fn fit_grace(asked: Option<Duration>, lease: Lease, display: &str) -> Duration {
    let max = lease.max_grace();
    match asked {
        Some(grace) if grace > max => {
            report::error(&format!(
                "{display}: --kill-after {} capped to {}, a third of the {} lease, so that SIGKILL still lands inside it",
                humantime::format_duration(grace),
                humantime::format_duration(Duration::from_millis(max.as_millis() as u64)),
                humantime::format_duration(lease.ttl())
            ));
            max
        }
        Some(grace) => grace,
        None => DEFAULT_GRACE.min(max),
    }
}

/// `--kill-after` when not given.
const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// Who keeps the lease while COMMAND runs.
enum Keeper {
    /// Nobody yet: COMMAND ended before its first renewal was due.
    Idle(Box<dyn Session>),
    /// The watchdog thread.
    Watching(Watchdog),
    /// The watchdog could not be started; COMMAND was killed.
    Failed,
}

impl Keeper {
    /// Starts the watchdog; when that fails, kills COMMAND's group.
    fn start(
        session: Box<dyn Session>,
        config: watchdog::Config,
        shared: &Arc<Shared>,
        pgid: libc::pid_t,
    ) -> Keeper {
        let display = config.display.clone();
        match Watchdog::start(session, config, Arc::clone(shared)) {
            Ok(watchdog) => Keeper::Watching(watchdog),
            Err(e) => {
                report::error(&format!(
                    "{display}: cannot start the watchdog ({e}); stopping COMMAND"
                ));
                crate::sys::process::signal_group(pgid, libc::SIGKILL);
                Keeper::Failed
            }
        }
    }
}

/// COMMAND's environment: RLOCK_NAME (the names as given, space-separated),
/// RLOCK_FENCE and RLOCK_TOKEN (of the first name given), RLOCK_FENCES
/// (`name=fence` for each name, space-separated) and RLOCK_TOKENS (every
/// enclosing run's tokens and ours, for re-entry).
fn child_env(
    names: &[&String],
    locks: &[LockKeys],
    holds: &[Hold],
    inherited: &[Token],
) -> Vec<(&'static str, String)> {
    let hold_of = |name: &str| {
        locks
            .iter()
            .position(|k| k.name == name)
            .map(|i| &holds[i])
            .expect("every name was acquired")
    };
    let first = hold_of(names[0]);
    let fences: Vec<String> = names
        .iter()
        .map(|n| format!("{n}={}", hold_of(n).fence))
        .collect();
    let own: Vec<&Token> = holds.iter().map(|h| &h.token).collect();
    vec![
        (
            "RLOCK_NAME",
            names
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        ("RLOCK_TOKEN", first.token.as_str().to_owned()),
        ("RLOCK_FENCE", first.fence.to_string()),
        ("RLOCK_FENCES", fences.join(" ")),
        ("RLOCK_TOKENS", tokens_for_child(inherited, &own)),
    ]
}

/// Options that cannot go together: refuse them clearly instead of silently
/// running with other semantics.
pub(crate) fn refuse_conflicts(config: &Config, lock: &LockOptions) -> Result<()> {
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
        if lock.limit.is_some_and(|n| n > 1) || lock.fair {
            return Err(Error::usage(
                "--limit above 1 and --fair need one server: a Redlock quorum (several --url) cannot count holders or order a queue across servers",
            ));
        }
    }
    if lock.redisson && (lock.shared || lock.fair || lock.limit.is_some_and(|n| n > 1)) {
        return Err(Error::usage(
            "--redisson is Redisson's exclusive lock: it cannot be combined with --shared, --limit or --fair",
        ));
    }
    Ok(())
}

/// The keys of lock `name`: rlock's own, or Redisson's with `--redisson`.
pub(crate) fn lock_keys(prefix: &str, redisson: bool, name: &str) -> LockKeys {
    if redisson {
        LockKeys::redisson(name)
    } else {
        LockKeys::new(prefix, name)
    }
}

/// Releases the holds, reusing the watchdog's session when there is one.
/// Returns the name of a lock whose hold was already gone: it ended before
/// COMMAND did, and someone else may have held it meanwhile. A release that
/// fails is reported, not fatal (COMMAND ran under a proven lease, and the
/// lease expires by itself), once a fresh connection has shown the hold is
/// still ours.
fn release(
    backend: &dyn Backend,
    session: Option<Box<dyn Session>>,
    held: &[(LockKeys, Token)],
    ttl: Duration,
) -> Option<String> {
    let start = Instant::now();
    let mut session = match session {
        Some(s) => Ok(s),
        None => backend.connect(),
    };
    let mut gone = None;
    for (keys, token) in held.iter().rev() {
        let outcome = match &mut session {
            Ok(s) => s.release(keys, token),
            Err(err) => Err(Error::Internal(err.to_string())),
        };
        match outcome {
            Ok(Some(left)) => report::verbose(|| {
                format!(
                    "{}: released in {:.1} ms (holds left: {left})",
                    keys.name,
                    start.elapsed().as_secs_f64() * 1000.0
                )
            }),
            Ok(None) => gone = gone.or(Some(keys.name.clone())),
            Err(err) => {
                // The connection may have died with the server (a restart
                // that lost the lock): ask again on a new one whether the
                // hold is still ours. A renewal to 1 ms changes nothing (it
                // only lengthens). Not after a timeout: the release may have
                // been carried out without its reply reaching us.
                if !err.reply_timed_out() {
                    let still_ours = backend
                        .connect()
                        .and_then(|mut s| s.renew(keys, token, Duration::from_millis(1), ttl / 3));
                    if let Ok(false) = still_ours {
                        gone = gone.or(Some(keys.name.clone()));
                        continue;
                    }
                }
                report::error(&format!(
                    "{}: could not release ({}); it expires within {}",
                    keys.name,
                    report::without_lock(&err.to_string(), &keys.name),
                    humantime::format_duration(ttl)
                ));
            }
        }
    }
    gone
}

fn holder_info(command: &[OsString], note: &str) -> HolderInfo {
    let argv: Vec<String> = command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    HolderInfo {
        pid: std::process::id().to_string(),
        ..described(&argv, note)
    }
}

/// A holder on this host running `argv`, with its note: the command line
/// without secrets and cut to [`MAX_COMMAND_BYTES`].
pub(crate) fn described(argv: &[String], note: &str) -> HolderInfo {
    // Stored in Redis and shown by `status`: no password or token in it.
    let mut line = crate::redact::command_line(argv).join(" ");
    if line.len() > MAX_COMMAND_BYTES {
        let mut cut = MAX_COMMAND_BYTES;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
    }
    HolderInfo {
        host: hostname(),
        pid: String::new(),
        command: line,
        note: note.to_owned(),
        held_for: Duration::ZERO,
        detached: false,
    }
}

pub(crate) fn hostname() -> String {
    crate::sys::process::host_name()
}
