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
use crate::run::{hostname, inherited_tokens, lock_keys, refuse_conflicts};
use crate::signals::{self, Phase, Shared};
use crate::token::Token;
use crate::wait::{self, Wanted};

/// `rlock acquire`: waits as `run` does, then prints the owner token. The lock
/// lasts --ttl unless renewed.
pub fn acquire(global: &Global, args: &AcquireArgs) -> Result<Exit> {
    name::validate(&args.name)?;
    refuse_conflicts(global, &args.lock)?;
    let local = crate::server::local_dir(&global.urls).is_some();
    if local && args.while_pid.is_none() {
        return Err(Error::usage(
            "rlock acquire needs --while-pid with file: locks: the kernel keeps a file lock only while a process holds it open (or use rlock run)",
        ));
    }
    if let Some(pid) = args.while_pid {
        // SAFETY: kill with signal 0 only checks that the process exists.
        if unsafe { libc::kill(pid as libc::pid_t, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM)
        {
            return Err(Error::usage(format!("--while-pid {pid}: no such process")));
        }
    }
    // SAFETY: F_GETFD only reads descriptor flags.
    if unsafe { libc::fcntl(1, libc::F_GETFD) } < 0 {
        return Err(Error::Internal(format!(
            "{}: stdout is closed, so the token could not be handed over; nothing acquired",
            args.name
        )));
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
        detached: true,
    };
    let mut wanted = Wanted::new(
        &keys,
        &token,
        &inherited,
        &holder,
        &args.lock,
        args.lock.ttl,
        // The lock must last its ttl from when this command returns.
        false,
    );
    wanted.replica_timeout = global.connect_timeout;
    let (holds, _) = wait::acquire(&backend, session.as_mut(), &wanted, &shared)?;
    shared.set(Phase::Finished);
    if let Some(pid) = args.while_pid {
        let fds = session.handover(&keys[0]);
        // A file: re-entry holds nothing of its own: the enclosing run keeps it.
        let keeper_needed = !local || !fds.is_empty();
        let started = if keeper_needed {
            start_while_pid(global, args, pid, &holds[0].token, &fds)
        } else {
            Ok(())
        };
        if let Err(err) = started {
            let _ = session.release(&keys[0], &holds[0].token);
            return Err(Error::Internal(format!(
                "{}: cannot start the --while-pid watchdog: {err}",
                args.name
            )));
        }
    }
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

/// A token that is not even well-formed cannot hold the lock: exit 1, like a
/// stale one, naming the lock.
fn parse_token(text: &str, lock: &str) -> Result<Token> {
    Token::parse(text).ok_or_else(|| Error::NotHeld {
        lock: lock.to_owned(),
        cause: "this token does not hold the lock (not a token `rlock acquire` printed)".into(),
    })
}

/// `rlock renew NAME --token T`: extends the hold to --ttl from now.
pub fn renew(global: &Global, args: &RenewArgs) -> Result<Exit> {
    name::validate(&args.name)?;
    let token = parse_token(&args.token, &args.name)?;
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
    let token = args
        .token
        .as_deref()
        .map(|t| parse_token(t, &args.name))
        .transpose()?;
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

/// Starts the detached `__while-pid` watchdog: a new session, no terminal, no
/// inherited stdio (so `token=$(rlock acquire ...)` does not wait for it). The
/// URL and the token travel in its environment, not on its command line.
fn start_while_pid(
    global: &Global,
    args: &AcquireArgs,
    pid: u32,
    token: &Token,
    fds: &[std::os::fd::RawFd],
) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    let urls = crate::server::choose_urls(&global.urls, std::env::var("REDIS_URL").ok());
    let mut cmd = std::process::Command::new(exe);
    cmd.arg(crate::cli::WHILE_PID)
        .arg("--connect-timeout")
        .arg(humantime::format_duration(global.connect_timeout).to_string())
        .arg(&args.name)
        .arg("--pid")
        .arg(pid.to_string())
        .arg("--ttl")
        .arg(humantime::format_duration(args.lock.ttl).to_string())
        .env("RLOCK_URL", urls.join(","))
        .env("RLOCK_PREFIX", &global.prefix)
        .env("RLOCK_KEEP_TOKEN", token.as_str())
        .env(
            "RLOCK_KEEP_FDS",
            fds.iter()
                .map(|fd| fd.to_string())
                .collect::<Vec<_>>()
                .join(","),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if args.lock.redisson {
        cmd.arg("--redisson");
    }
    // Of the descriptors this process has, only the handed-over lock files
    // may reach the keeper: any other (say the locks of an enclosing file:
    // run, which COMMAND inherits) would live as long as the keeper.
    let mut kept: Vec<u32> = fds
        .iter()
        .filter_map(|&fd| u32::try_from(fd).ok())
        .collect();
    kept.sort_unstable();
    let mut others = Vec::new();
    let mut first = 3u32;
    for fd in kept.into_iter().filter(|&fd| fd >= 3) {
        if fd > first {
            others.push((first, fd - 1));
        }
        first = fd + 1;
    }
    others.push((first, u32::MAX));
    // SAFETY: setsid and close_range are async-signal-safe system calls; the
    // ranges were built before the fork. setsid detaches from the caller's
    // session and terminal so job control and hangups do not reach it.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            for &(from, to) in &others {
                // Marked close-on-exec rather than closed: the spawning code's
                // own pipe must stay open until the exec.
                libc::syscall(libc::SYS_close_range, from, to, libc::CLOSE_RANGE_CLOEXEC);
            }
            Ok(())
        });
    }
    cmd.spawn().map(drop)
}

/// `__while-pid`: renews the hold every ttl/3 while PID lives; releases it when
/// PID exits; ends when the hold is gone (released, forced, expired) or cannot
/// be renewed before its lease could run out.
pub fn while_pid(global: &Global, args: &crate::cli::WhilePidArgs) -> Result<Exit> {
    let token = std::env::var("RLOCK_KEEP_TOKEN")
        .ok()
        .and_then(|t| Token::parse(&t))
        .ok_or_else(|| Error::usage("__while-pid is internal to rlock acquire --while-pid"))?;
    if let Some(dir) = crate::server::local_dir(&global.urls) {
        let fds: Vec<std::os::fd::RawFd> = std::env::var("RLOCK_KEEP_FDS")
            .unwrap_or_default()
            .split(',')
            .filter_map(|fd| fd.parse().ok())
            .collect();
        crate::backend::keep_while(&dir, &args.name, &token, args.pid, &fds)?;
        return Ok(Exit::Success);
    }
    let backend = crate::connect::backend(global)?;
    let keys = lock_keys(&global.prefix, args.redisson, &args.name);
    let mut session = backend.connect()?;
    // SAFETY: pidfd_open has no memory-safety preconditions.
    let pidfd =
        unsafe { libc::syscall(libc::SYS_pidfd_open, args.pid as libc::pid_t, 0) } as libc::c_int;
    let period = args.ttl / 3;
    let margin = crate::watchdog::drift(args.ttl);
    let mut confirmed = std::time::Instant::now();
    loop {
        let exited = if pidfd < 0 {
            // No pidfd (an old kernel): check by signal 0 once a period.
            std::thread::sleep(period);
            // SAFETY: signal 0 only checks that the process exists.
            let gone = unsafe { libc::kill(args.pid as libc::pid_t, 0) } != 0;
            gone && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
        } else {
            let mut fds = libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = libc::c_int::try_from(period.as_millis()).unwrap_or(libc::c_int::MAX);
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut fds, 1, ms) > 0 }
        };
        if exited {
            let _ = session.release(&keys, &token);
            return Ok(Exit::Success);
        }
        match session.renew(&keys, &token, args.ttl, global.connect_timeout) {
            Ok(true) => confirmed = std::time::Instant::now(),
            Ok(false) => return Ok(Exit::NotHeld),
            Err(_) if confirmed.elapsed() + margin < args.ttl => {}
            Err(err) => return Err(err),
        }
    }
}
