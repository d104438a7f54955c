//! `acquire`, `renew` and `release`: locking for shell scripts that cannot wrap
//! a single command (CONTRACT.md §5).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::HolderInfo;
use crate::cli::{AcquireArgs, Global, ReleaseArgs, RenewArgs};
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::name;
use crate::report;
use crate::run::{hostname, inherited_tokens, kind, lock_keys, refuse_unsupported};
use crate::signals::{self, Phase, Shared};
use crate::token::Token;
use crate::wait::{self, Wanted};

/// `rlock acquire`: waits as `run` does, then prints the owner token. The lock
/// lasts --ttl unless renewed.
pub fn acquire(global: &Global, args: &AcquireArgs) -> Result<Exit> {
    name::validate(&args.name)?;
    refuse_unsupported(&args.lock)?;
    if args.while_pid.is_some() {
        return Err(Error::usage("--while-pid is not supported yet"));
    }
    let backend = crate::connect::backend(global)?;
    let keys = [lock_keys(&global.prefix, args.lock.redisson, &args.name)];
    let shared = Shared::new(&args.name);
    signals::start(Arc::clone(&shared))?;
    let mut session = backend.connect().map_err(|e| e.for_lock(&args.name))?;
    shared.set(Phase::Acquiring);
    let token = Token::generate()?;
    let inherited = inherited_tokens();
    // The holder is the calling script, which outlives this process.
    // SAFETY: getppid has no preconditions.
    let caller = unsafe { libc::getppid() };
    let holder = HolderInfo {
        host: hostname(),
        pid: caller.to_string(),
        command: "(rlock acquire)".into(),
        held_for: Duration::ZERO,
    };
    let wanted = Wanted {
        locks: &keys,
        token: &token,
        inherited: &inherited,
        ttl: args.lock.ttl,
        holder: &holder,
        wait: if args.lock.no_wait {
            Some(Duration::ZERO)
        } else {
            args.lock.wait
        },
        conflict_code: args.lock.conflict_exit_code,
        kind: kind(&args.lock),
        fair: args.lock.fair,
    };
    let (holds, _) = wait::acquire(&backend, session.as_mut(), &wanted, &shared)?;
    shared.set(Phase::Finished);
    let printed = writeln!(std::io::stdout(), "{}", holds[0].token.as_str());
    if let Err(err) = printed {
        // Nobody got the token: give the hold back rather than strand it.
        let _ = session.release(&keys[0], &holds[0].token);
        return Err(Error::Internal(format!(
            "{}: cannot print the token: {err}",
            args.name
        )));
    }
    Ok(Exit::Success)
}

fn parse_token(text: &str) -> Result<Token> {
    Token::parse(text).ok_or_else(|| {
        Error::usage("invalid --token: expected the 32 hex digits `rlock acquire` printed")
    })
}

/// `rlock renew NAME --token T`: extends the hold to --ttl from now.
pub fn renew(global: &Global, args: &RenewArgs) -> Result<Exit> {
    name::validate(&args.name)?;
    let token = parse_token(&args.token)?;
    let backend = crate::connect::backend(global)?;
    let keys = lock_keys(&global.prefix, args.redisson, &args.name);
    let mut session = backend.connect().map_err(|e| e.for_lock(&args.name))?;
    if session.renew(&keys, &token, args.ttl, global.connect_timeout)? {
        report::verbose(|| {
            format!(
                "{}: renewed for {}",
                args.name,
                humantime::format_duration(args.ttl)
            )
        });
        return Ok(Exit::Success);
    }
    Err(Error::NotHeld {
        lock: args.name.clone(),
        cause: "this token does not hold the lock (expired or released)".into(),
    })
}

/// `rlock release NAME --token T | --force`.
pub fn release(global: &Global, args: &ReleaseArgs) -> Result<Exit> {
    name::validate(&args.name)?;
    let token = args.token.as_deref().map(parse_token).transpose()?;
    let backend = crate::connect::backend(global)?;
    let keys = lock_keys(&global.prefix, args.redisson, &args.name);
    let mut session = backend.connect().map_err(|e| e.for_lock(&args.name))?;
    match token {
        Some(token) => match session.release(&keys, &token)? {
            Some(left) => {
                report::verbose(|| {
                    format!(
                        "{}: released (holds left for this token: {left})",
                        args.name
                    )
                });
                Ok(Exit::Success)
            }
            None => Err(Error::NotHeld {
                lock: args.name.clone(),
                cause: "this token does not hold the lock (expired or released)".into(),
            }),
        },
        None => match session.force_release(&keys)? {
            0 => Err(Error::NotHeld {
                lock: args.name.clone(),
                cause: "nothing held the lock".into(),
            }),
            n => {
                report::verbose(|| format!("{}: forced {n} hold(s) out", args.name));
                Ok(Exit::Success)
            }
        },
    }
}
