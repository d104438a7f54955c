//! `renew` and `release`: the hold `rlock acquire` (in `acquire`) took for a
//! shell script, extended or given back (README: "A critical section in the
//! middle of a shell script").

use crate::backend::Extend;
use crate::cli::{ReleaseArgs, RenewArgs};
use crate::config::Config;
use crate::error::{Cause, Error, Result};
use crate::exit::Exit;
use crate::lock::token::Token;
use crate::report;

/// `release --force`: says on stderr whom it removed ([`report_forced`]) and,
/// with `--history`, records a `forced` event for each hold it removed: whose
/// hold (host, pid, command, fence, how long it was held), and by whom in the
/// note.
fn force(
    session: &mut dyn crate::backend::Administer,
    lock: &crate::lock::name::LockId,
    args: &ReleaseArgs,
    caller: &crate::backend::HolderInfo,
    caller_pid: u32,
) -> Result<Exit> {
    // Whom the force removes, as status sees them just before (a Redisson
    // lock stores no holder details to show).
    let before = match args.redisson {
        true => None,
        false => session.status(lock).ok(),
    };
    let removed = session.force_release(lock)?;
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
            event: crate::lock::event::EventKind::Forced,
            note: by.clone(),
            ..crate::lock::event::Event::default()
        }]
    } else {
        victims
            .0
            .iter()
            .map(|h| crate::lock::event::Event {
                event: crate::lock::event::EventKind::Forced,
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
        if let Err(err) = session.record(lock, args.history, event) {
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
/// command line, where `ps` shows it to everyone). `otherwise` ends the
/// message when there is none: what else the command could do.
fn given_token(
    given: Option<&str>,
    from_env: Option<&str>,
    lock: &str,
    otherwise: &str,
) -> Result<Token> {
    match given.or(from_env) {
        Some(text) => parse_token(text, lock),
        None => Err(Error::usage(format!(
            "{lock}: the owner token is needed: --token TOKEN, or RLOCK_TOKEN in the environment{otherwise}"
        ))),
    }
}

/// `rlock renew NAME [--token T]`: extends the hold to at least --ttl from now.
pub fn renew(config: &Config, args: &RenewArgs) -> Result<Exit> {
    let token = given_token(
        args.token.as_deref(),
        config.token_from_env.as_deref(),
        &args.name,
        "",
    )?;
    let keys = config.lock_id(args.redisson, &args.name);
    let backend = config.backend(keys.dialect())?;
    let mut session = backend.connect().map_err(|e| e.in_lock(&args.name))?;
    if session.renew(
        &keys,
        &token,
        args.ttl,
        config.connect_timeout,
        Extend::AtLeast,
    )? {
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
fn not_held(session: &mut dyn crate::backend::Session, lock: &crate::lock::name::LockId) -> Error {
    let why = session
        .why_gone(lock, None)
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
            // Without its token an operator usually means to clear a stuck
            // hold, which is --force.
            &format!(
                "; to remove any holder's hold (break-glass): rlock release --force {}",
                args.name
            ),
        )?)
    };
    let keys = config.lock_id(args.redisson, &args.name);
    let backend = config.backend(keys.dialect())?;
    // The caller (the script that releases) as the event's process.
    let caller = crate::holding::holder::described(&caller_argv(), &config.note);
    let caller_pid = crate::sys::process::parent_pid();
    let Some(token) = token else {
        let mut session = backend.administer().map_err(|e| e.in_lock(&args.name))?;
        return force(session.as_mut(), &keys, args, &caller, caller_pid);
    };
    let mut session = backend.connect().map_err(|e| e.in_lock(&args.name))?;
    let released = crate::lock::event::Event {
        pid: Some(u64::from(caller_pid)),
        ..crate::holding::holder::event(crate::lock::event::EventKind::Released, &caller)
    };
    let record = (args.history > 0).then_some((args.history, &released));
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
