//! `acquire`, `renew` and `release`: locking for shell scripts that cannot wrap
//! a single command (README: "A critical section in the middle of a shell script").

use std::sync::Arc;

use crate::cli::{AcquireArgs, ReleaseArgs, RenewArgs};
use crate::commands::while_pid::{self, Watched};
use crate::config::{Config, LockSpec};
use crate::error::{Cause, Error, Result};
use crate::exit::Exit;
use crate::lock::token::Token;
use crate::report;
use crate::run_state::{self, Phase, Shared};
use crate::wait::{self, Wanted};

/// `rlock acquire`: waits as `run` does, then prints the owner token. The lock
/// lasts --ttl unless renewed.
pub fn acquire(config: &Config, spec: &LockSpec, args: &AcquireArgs) -> Result<Exit> {
    let local = config.is_local();
    if local && args.while_pid.is_none() {
        return Err(Error::usage(
            "rlock acquire needs --while-pid with file: locks: the kernel keeps a file lock only while a process holds it open (or use rlock run)",
        ));
    }
    // Opened before waiting, so the keeper follows this very process even if
    // its pid is reused meanwhile.
    let watched = args
        .while_pid
        .map(|pid| {
            Watched::open(pid).ok_or_else(|| {
                Error::usage(format!("{}: --while-pid {pid}: no such process", args.name))
            })
        })
        .transpose()?;
    let backend = config.backend()?;
    let keys = [spec.lock_id(config, &args.name)];
    let shared = Shared::new(&args.name);
    run_state::start(Arc::clone(&shared))?;
    shared.set(Phase::Acquiring);
    let token = Token::generate()?;
    let inherited = &config.inherited;
    // The holder is the calling script, which outlives this process: the
    // process it follows, or else its parent.
    let caller = args
        .while_pid
        .unwrap_or_else(crate::sys::process::parent_pid);
    // The holder's command line is the caller's (the script that took the
    // lock), as the kernel records it.
    let argv = crate::sys::process::cmdline(caller);
    let mut holder = crate::supervisor::holder::described(&argv, &config.note);
    if holder.command.is_empty() {
        holder.command = "(rlock acquire)".into();
    }
    holder.pid = caller.to_string();
    holder.detached = true;
    let mut wanted = Wanted::new(
        &keys, &token, inherited, &holder, spec, spec.ttl,
        // The lock must last its ttl from when this command returns.
        false,
    );
    wanted.replica_timeout = config.connect_timeout;
    let cap = spec.history;
    let acquired = crate::supervisor::holder::event("acquired", &holder);
    if cap > 0 {
        wanted.record = Some((cap, acquired.clone()));
    }
    let waiting_since = std::time::Instant::now();
    if let Some(watched) = &watched {
        while_pid::interrupt_on_exit(watched, &shared);
    }
    let caller_gone = |err: Error| match (&watched, err) {
        (Some(w), err) if matches!(err.cause(), Cause::Interrupted(_)) && w.gone() => {
            Error::internal(format!(
                "{}: --while-pid {} exited while waiting; nothing acquired",
                args.name,
                w.pid()
            ))
        }
        (_, err) => err,
    };
    let waited = || u64::try_from(waiting_since.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (mut session, holds, _) = match wait::acquire(&backend, &wanted, &args.name, &shared) {
        Ok(acquired) => acquired,
        Err(err) => {
            let kind = match err.exit() {
                Exit::NotAcquired(_) => Some("busy"),
                Exit::Signal(_) => Some("interrupted"),
                _ => None,
            };
            if let Some(kind) = kind {
                let event = crate::lock::event::Event {
                    waited_ms: Some(waited()),
                    exit: Some(i64::from(err.exit().code())),
                    ..crate::supervisor::holder::event(kind, &holder)
                };
                crate::commands::history::record_after(backend.as_ref(), &keys, cap, &event);
            }
            return Err(caller_gone(err));
        }
    };
    if cap > 0 && !holds[0].recorded && holds[0].count == 1 {
        let event = crate::lock::event::Event {
            waited_ms: Some(waited()),
            fence: Some(holds[0].fence.0),
            ..acquired.clone()
        };
        if let Err(err) = session.record(&keys[0], cap, &event) {
            report::verbose(|| format!("{}: history not written: {err}", args.name));
        }
    }
    let token = &holds[0].token;
    let give_back = |session: &mut Box<dyn crate::backend::Session>, err: Error| {
        let _ = session.release(&keys[0], token);
        match caller_gone(err) {
            err if matches!(err.cause(), Cause::Internal(_)) => {
                Error::internal(format!("{err}; the lock was given back"))
            }
            err => err,
        }
    };
    let mut keeper = None;
    if let Some(watched) = &watched {
        let fds = session.handover(&keys[0]);
        // A file: re-entry holds nothing of its own: the enclosing run keeps it.
        if !local || !fds.is_empty() {
            // Signals are noted, not acted on, until the keeper has answered.
            let started = while_pid::start(config, spec, &args.name, watched, token, &fds, &|| {
                shared.interrupted()
            });
            match started {
                Ok(started) => keeper = Some(started),
                Err(while_pid::StartError::Interrupted(signal)) => {
                    let lock = args.name.clone();
                    return Err(give_back(
                        &mut session,
                        Error::from(Cause::Interrupted(signal)).in_lock(&lock),
                    ));
                }
                Err(while_pid::StartError::Failed(err)) => {
                    let cause = format!(
                        "{}: cannot start the --while-pid watchdog: {err}",
                        args.name
                    );
                    return Err(give_back(&mut session, Error::internal(cause)));
                }
            }
        }
        if let Some(signal) = shared.interrupted() {
            // A signal, or PID exited: the script is not there to take it.
            if let Some(keeper) = keeper {
                keeper.stop();
            }
            let lock = args.name.clone();
            return Err(give_back(
                &mut session,
                Error::from(Cause::Interrupted(signal)).in_lock(&lock),
            ));
        }
    }
    shared.set(Phase::Finished);
    let printed = if crate::commands::output::stdout_was_closed() {
        Err(std::io::Error::other("standard output is closed"))
    } else {
        crate::commands::output::write_stdout(&format!("{}\n", token.as_str()))
    };
    let handed = match (printed, keeper) {
        (Ok(()), Some(keeper)) => keeper.confirm(),
        (Ok(()), None) => Ok(()),
        (Err(err), keeper) => {
            // Nobody got the token: end the keeper (which shares the hold).
            if let Some(keeper) = keeper {
                keeper.stop();
            }
            Err(err)
        }
    };
    if let Err(err) = handed {
        // Give the hold back rather than strand it.
        let cause = format!("{}: cannot hand the token over: {err}", args.name);
        return Err(give_back(&mut session, Error::internal(cause)));
    }
    Ok(Exit::Success)
}

/// `release --force`: says on stderr whom it removed ([`report_forced`]) and,
/// with `--history`, records a `forced` event for each hold it removed: whose
/// hold (host, pid, command, fence, how long it was held), and by whom in the
/// note.
fn force(
    session: &mut dyn crate::backend::Session,
    keys: &crate::lock::name::LockId,
    args: &ReleaseArgs,
    caller: &crate::backend::HolderInfo,
    caller_pid: u32,
) -> Result<Exit> {
    // Whom the force removes, as status sees them just before (a Redisson
    // lock stores no holder details to show).
    let before = match args.redisson {
        true => None,
        false => session.status(keys).ok(),
    };
    let removed = session.force_release(keys)?;
    if removed == 0 {
        return Err(Error::from(Cause::NotHeld("nothing held the lock".into())).in_lock(&args.name));
    }
    report_forced(&args.name, removed, before.as_ref());
    if args.history == 0 {
        return Ok(Exit::Success);
    }
    let now = crate::lock::clock::now_ms();
    let by = format!("forced by pid {caller_pid} on {}", caller.host);
    let victims = before.map(|s| (s.holders, s.fence)).unwrap_or_default();
    let single = victims.0.len() == 1;
    let events: Vec<crate::lock::event::Event> = if victims.0.is_empty() {
        vec![crate::lock::event::Event {
            event: "forced".into(),
            note: by.clone(),
            ..crate::lock::event::Event::default()
        }]
    } else {
        victims
            .0
            .iter()
            .map(|h| crate::lock::event::Event {
                event: "forced".into(),
                host: h.host.clone(),
                pid: h.pid.parse().ok(),
                command: h.command.clone(),
                note: by.clone(),
                fence: single.then_some(victims.1),
                held_ms: (h.since_ms > 0).then(|| now.saturating_sub(h.since_ms)),
                ..crate::lock::event::Event::default()
            })
            .collect()
    };
    for event in &events {
        if let Err(err) = session.record(keys, args.history, event) {
            report::verbose(|| format!("{}: history not written: {err}", args.name));
        }
    }
    Ok(Exit::Success)
}

/// The command line of this process's parent (the script that called it),
/// as the kernel records it.
fn caller_argv() -> Vec<String> {
    crate::sys::process::cmdline(crate::sys::process::parent_pid())
}

/// A token that is not even well-formed cannot hold the lock: exit 1, like a
/// stale one, naming the lock.
fn parse_token(text: &str, lock: &str) -> Result<Token> {
    Token::parse(text).ok_or_else(|| {
        Error::from(Cause::NotHeld(
            "this token does not hold the lock (not a token `rlock acquire` printed)".into(),
        ))
        .in_lock(lock)
    })
}

/// The token from --token, else from RLOCK_TOKEN (which keeps it off the
/// command line, where `ps` shows it to everyone).
fn given_token(given: Option<&str>, from_env: Option<&str>, lock: &str) -> Result<Token> {
    match given.or(from_env) {
        Some(text) => parse_token(text, lock),
        None => Err(Error::usage(format!(
            "{lock}: the owner token is needed: --token TOKEN, or RLOCK_TOKEN in the environment"
        ))),
    }
}

/// `rlock renew NAME [--token T]`: extends the hold to --ttl from now.
pub fn renew(config: &Config, args: &RenewArgs) -> Result<Exit> {
    let token = given_token(
        args.token.as_deref(),
        config.token_from_env.as_deref(),
        &args.name,
    )?;
    let backend = config.backend()?;
    let keys = config.lock_id(args.redisson, &args.name);
    let mut session = backend.connect().map_err(|e| e.in_lock(&args.name))?;
    if session.renew(&keys, &token, args.ttl, config.connect_timeout)? {
        report::verbose(|| {
            format!(
                "{}: renewed for {}",
                args.name,
                humantime::format_duration(args.ttl)
            )
        });
        return Ok(Exit::Success);
    }
    Err(not_held(session.as_mut(), &keys).in_lock(&args.name))
}

/// A token found not holding the lock, with the cause the server shows
/// (an eviction, a restart) when it shows one.
fn not_held(session: &mut dyn crate::backend::Session, keys: &crate::lock::name::LockId) -> Error {
    let why = session
        .why_gone(keys, None)
        .unwrap_or_else(|| "expired or released".into());
    Error::from(Cause::NotHeld(format!(
        "this token does not hold the lock ({why})"
    )))
}

/// `rlock release NAME [--token T] | --force`.
pub fn release(config: &Config, args: &ReleaseArgs) -> Result<Exit> {
    let token = if args.force {
        None
    } else {
        Some(given_token(
            args.token.as_deref(),
            config.token_from_env.as_deref(),
            &args.name,
        )?)
    };
    let backend = config.backend()?;
    let keys = config.lock_id(args.redisson, &args.name);
    let mut session = backend.connect().map_err(|e| e.in_lock(&args.name))?;
    // The caller (the script that releases) as the event's process.
    let caller = crate::supervisor::holder::described(&caller_argv(), &config.note);
    let caller_pid = crate::sys::process::parent_pid();
    let released = crate::lock::event::Event {
        pid: Some(u64::from(caller_pid)),
        ..crate::supervisor::holder::event("released", &caller)
    };
    let record = (args.history > 0).then_some((args.history, &released));
    let Some(token) = token else {
        return force(session.as_mut(), &keys, args, &caller, caller_pid);
    };
    match session.release_recorded(&keys, &token, record)? {
        Some(left) => {
            report::verbose(|| {
                format!(
                    "{}: released (holds left for this token: {left})",
                    args.name
                )
            });
            Ok(Exit::Success)
        }
        None => Err(not_held(session.as_mut(), &keys).in_lock(&args.name)),
    }
}

/// `release --force` says on stderr whom it removed (host, pid, command, how
/// long it had held the lock), one line per hold, so the operator's log
/// keeps who was cut off; `-q` silences it.
fn report_forced(name: &str, removed: u64, before: Option<&crate::backend::LockStatus>) {
    let holders = before.map(|s| s.holders.as_slice()).unwrap_or_default();
    if holders.is_empty() {
        report::error(&format!("{name}: removed {removed} hold(s)"));
        return;
    }
    let now = crate::lock::clock::now_ms();
    for h in holders {
        let held = match h.since_ms {
            0 => "an unknown time".to_owned(),
            ms => humantime::format_duration(std::time::Duration::from_secs(
                now.saturating_sub(ms) / 1000,
            ))
            .to_string(),
        };
        let or_unknown = |text: &str| match text {
            "" => "?".to_owned(),
            text => text.to_owned(),
        };
        report::error(&format!(
            "{name}: removed the hold of {}, held for {held}",
            report::holder(
                &or_unknown(&h.pid),
                &or_unknown(&h.host),
                &h.command,
                &h.note
            )
        ));
    }
}
